//! `--npd-config`: node-problem-detector system-log-monitor configs. A config node-doctor
//! cannot honour stops the agent at start with exit 64 naming the file and the reason; a
//! rule that matches the node's kernel log is a finding with its evidence, and a hostile line
//! reaches the table escaped.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{run, FakeRoot};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collectors/tests/fixtures/npd")
        .join(rel)
}

#[test]
fn a_bad_npd_config_exits_64_naming_the_problem() {
    let root = FakeRoot::quiet();
    for (file, want) in [
        ("refused/bad-json.json", "not a system-log-monitor config"),
        ("refused/unknown-plugin.json", "unknown plugin"),
        ("refused/bad-regex.json", "does not compile"),
        ("refused/huge-regex.json", "too big"),
        ("refused/bad-layout.json", "does not convert"),
        ("refused/permanent-no-condition.json", "names no condition"),
        (
            "refused/permanent-unknown-condition.json",
            "not one of the config's conditions",
        ),
        (
            "refused/custom-plugin-monitor.json",
            "node-doctor runs no programs",
        ),
    ] {
        let path = fixture(file);
        let path = path.to_str().unwrap();
        let by_flag = vec![
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--npd-config",
            path,
        ];
        let by_env = vec!["check", "--host-root", root.root().to_str().unwrap()];
        for (args, env) in [
            (by_flag, vec![]),
            (by_env, vec![("NODE_DOCTOR_NPD_CONFIG", path)]),
        ] {
            let out = run(&args, &env);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(64), "{file}: {err}");
            assert!(err.contains("--npd-config"), "{file}: {err}");
            assert!(err.contains(file), "{file}: {err}");
            assert!(err.contains(want), "{file}: {err}");
        }
    }
}

/// NPD's own kernel-monitor.json on a node whose kernel log remounted a filesystem read-only
/// and killed a process whose name carries a terminal escape.
#[test]
fn an_npd_rule_match_is_a_finding_with_evidence() {
    let root = FakeRoot::quiet();
    root.write(
        "/dev/kmsg",
        "\
3,10,86300000000,-;EXT4-fs error (device sda1): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0
2,11,86300000100,-;EXT4-fs (sda1): Remounting filesystem read-only
3,12,86350000000,-;Killed process 4211 (\\x1b]0;pwned\\x07java) total-vm:812kB, anon-rss:401kB, file-rss:0kB
",
    );
    let config = fixture("shipped/kernel-monitor.json");
    let base = |format: &'static str| {
        vec![
            "check".to_string(),
            "--host-root".into(),
            root.root().to_str().unwrap().into(),
            "--collector".into(),
            "npd".into(),
            "--npd-config".into(),
            config.to_str().unwrap().into(),
            "--format".into(),
            format.into(),
            "--interval".into(),
            "100ms".into(),
        ]
    };
    let args = base("json");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings = v["findings"].as_array().unwrap();
    let find = |id: &str, subject: &str| {
        findings
            .iter()
            .find(|f| f["id"] == id && f["subject"] == subject)
            .unwrap_or_else(|| panic!("no {id} {subject}: {v}"))
    };
    let ro = find("npd.permanent", "FilesystemIsReadOnly");
    assert_eq!(ro["severity"], "warning");
    assert_eq!(ro["evidence"]["condition"], "ReadonlyFilesystem");
    assert_eq!(ro["evidence"]["healthy_reason"], "FilesystemIsNotReadOnly");
    assert_eq!(ro["evidence"]["source"], "kernel-monitor");
    assert_eq!(
        ro["evidence"]["lines"],
        "EXT4-fs (sda1): Remounting filesystem read-only"
    );
    assert!(ro["evidence"]["config_file"]
        .as_str()
        .unwrap()
        .ends_with("kernel-monitor.json"));
    assert_eq!(
        ro["title"],
        "node-problem-detector rule FilesystemIsReadOnly matched"
    );
    find("npd.temporary", "Ext4Error");
    let oom = find("npd.temporary", "OOMKilling");
    assert!(oom["evidence"]["lines"]
        .as_str()
        .unwrap()
        .contains("\u{1b}]0;pwned\u{7}java"));
    // The table shows the line escaped.
    let args = base("table");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args, &[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("OOMKilling"), "{table}");
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table}"
    );
}

/// Without --npd-config the collector runs and says it has nothing to match.
#[test]
fn without_npd_config_the_collector_is_ok_with_a_note() {
    let root = FakeRoot::quiet();
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--collector",
            "npd",
            "--format",
            "json",
            "--interval",
            "100ms",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    assert!(text.contains("no --npd-config given"), "{text}");
}
