//! `--rules-file`: an operator's rule file changes the words of a finding and adds steps and
//! commands; a file that does not load or check stops the agent at start with exit 64 and a
//! message naming the file and the problem.

use serde_json::Value;

use crate::support::{run, FakeRoot};

/// A quiet node whose memory is exhausted: 100 MiB available of 8 GiB.
fn exhausted() -> FakeRoot {
    let root = FakeRoot::quiet();
    root.write(
        "/proc/meminfo",
        "MemTotal:        8388608 kB\nMemFree:           80000 kB\nMemAvailable:     102400 kB\n",
    );
    root
}

const OVERRIDE: &str = r#"
[[rule]]
id = "memory.exhaustion"
title = { en = "Memory exhausted on {node}: page the platform team", zh = "{node} 内存耗尽：通知平台团队" }
add_steps = [{ en = "Follow runbook RB-7 (only {mem_available_bytes:mib} MiB left).", zh = "按运行手册 RB-7 处理（仅剩 {mem_available_bytes:mib} MiB）。" }]
add_commands = ["/usr/local/bin/oncall-page {node}"]
"#;

fn memory_finding(out: &std::process::Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "memory.exhaustion")
        .unwrap_or_else(|| panic!("no memory.exhaustion: {v}"))
        .clone()
}

#[test]
fn a_rules_file_changes_the_words_of_a_finding() {
    let root = exhausted();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.toml");
    std::fs::write(&file, OVERRIDE).unwrap();
    let args = |lang: &'static str| {
        vec![
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--collector",
            "memory",
            "--format",
            "json",
            "--interval",
            "100ms",
            "--node-name",
            "worker-3",
            "--lang",
            lang,
        ]
    };
    // Without the file: the built-in words.
    let f = memory_finding(&run(&args("en"), &[]));
    assert_eq!(f["title"], "Node memory is exhausted");
    // With it (flag, then environment): the operator's title, the built-in summary, the
    // built-in steps and commands followed by the added ones.
    let mut with = args("en");
    with.extend(["--rules-file", file.to_str().unwrap()]);
    for (argv, env) in [
        (with, vec![]),
        (
            args("en"),
            vec![("NODE_DOCTOR_RULES_FILE", file.to_str().unwrap())],
        ),
    ] {
        let out = run(&argv, &env);
        let f = memory_finding(&out);
        assert_eq!(
            f["title"],
            "Memory exhausted on worker-3: page the platform team"
        );
        assert!(f["summary"]
            .as_str()
            .unwrap()
            .starts_with("Only 100 MiB of 8192 MiB"));
        let steps = f["remediation"]["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 4, "{steps:?}");
        assert_eq!(steps[3], "Follow runbook RB-7 (only 100 MiB left).");
        let cmds = f["remediation"]["commands"].as_array().unwrap();
        assert_eq!(cmds.last().unwrap(), "/usr/local/bin/oncall-page worker-3");
        assert_eq!(
            f["remediation"]["source"]["section"],
            "Pod 处于 CrashLoopBackOff 状态"
        );
    }
    let mut zh = args("zh");
    zh.extend(["--rules-file", file.to_str().unwrap()]);
    let f = memory_finding(&run(&zh, &[]));
    assert_eq!(f["title"], "worker-3 内存耗尽：通知平台团队");
}

#[test]
fn a_bad_rules_file_exits_64_naming_the_problem() {
    let root = FakeRoot::quiet();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unknown-id.toml",
            "[[rule]]\nid = \"memory.nope\"\ntitle = { en = \"x\", zh = \"y\" }\n",
            "no built-in rule has the id \"memory.nope\"",
        ),
        (
            "placeholder.toml",
            "[[rule]]\nid = \"memory.exhaustion\"\ntitle = { en = \"{free_mb}\", zh = \"y\" }\n",
            "unknown placeholder {free_mb}",
        ),
        (
            "syntax.toml",
            "[[rule]\nid = \"memory.exhaustion\"\n",
            "rule file",
        ),
        (
            "command.toml",
            "[[rule]]\nid = \"memory.exhaustion\"\nadd_commands = [\"grep '{node}' /etc/hosts\"]\n",
            "command template",
        ),
        (
            "language.toml",
            "[[rule]]\nid = \"memory.exhaustion\"\nadd_steps = [{ en = \"only English\" }]\n",
            "en without zh",
        ),
    ];
    for (name, text, want) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let out = run(
            &[
                "check",
                "--host-root",
                root.root().to_str().unwrap(),
                "--rules-file",
                file.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(64), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--rules-file") && err.contains(name) && err.contains(want),
            "{name}: {err}"
        );
        assert!(
            out.stdout.is_empty(),
            "{name}: no report before the rules load"
        );
    }
    // A missing file, and a directory where a file should be.
    for p in [dir.path().join("missing.toml"), dir.path().to_path_buf()] {
        let out = run(&["serve", "--rules-file", p.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(64), "{}", p.display());
        assert!(String::from_utf8_lossy(&out.stderr).contains(p.to_str().unwrap()));
    }
}
