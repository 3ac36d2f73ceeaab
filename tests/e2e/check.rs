//! `node-doctor check`: exit codes, JSON identical in shape to /findings, table, usage errors.

use serde_json::Value;

use crate::serve::assert_contract;
use crate::support::{run, FakeRoot};

fn expected_exit(v: &Value) -> i32 {
    let sevs: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    if sevs.contains(&"critical") {
        2
    } else if sevs.contains(&"warning") {
        1
    } else {
        0
    }
}

#[test]
fn check_json_follows_the_contract_and_the_exit_code_matches() {
    let root = FakeRoot::quiet();
    let r = root.root().to_str().unwrap();
    let out = run(
        &[
            "check",
            "--host-root",
            r,
            "--format",
            "json",
            "--interval",
            "200ms",
            "--node-name",
            "n1",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_contract(&v, "n1");
    assert_eq!(out.status.code(), Some(expected_exit(&v)));
    // Every collector ran (twice): none is left "not run yet".
    for c in v["collectors"].as_array().unwrap() {
        assert!(!c["last_run"].is_null(), "{c}");
    }
}

#[test]
fn check_reads_flags_from_the_environment() {
    let root = FakeRoot::quiet();
    let out = run(
        &["check"],
        &[
            ("NODE_DOCTOR_HOST_ROOT", root.root().to_str().unwrap()),
            ("NODE_DOCTOR_FORMAT", "json"),
            ("NODE_DOCTOR_INTERVAL", "100ms"),
            ("NODE_DOCTOR_LANG", "zh"),
            ("NODE_NAME", "from-downward-api"),
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON from env flags");
    assert_contract(&v, "from-downward-api");
}

#[test]
fn node_name_falls_back_to_the_host_hostname() {
    let root = FakeRoot::quiet();
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--interval",
            "100ms",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["node"], "fake-host");
}

#[test]
fn check_table_is_plain_text_when_piped() {
    let root = FakeRoot::quiet();
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--interval",
            "100ms",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("node-doctor "), "{text}");
    assert!(text.contains("collectors:"));
    assert!(text.contains(" critical, "));
    assert!(
        !text.contains('\x1b'),
        "no colour codes when stdout is not a TTY"
    );
    assert!(matches!(out.status.code(), Some(0..=2)));
    let zh = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--interval",
            "100ms",
            "--lang",
            "zh",
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&zh.stdout).contains("采集器"));
}

#[test]
fn bad_usage_exits_64_with_a_message() {
    for args in [
        &["check", "--format", "xml"][..],
        &["check", "--interval", "soon"],
        &["check", "--lang", "fr"],
        &["check", "--collector", "no-such-collector"],
        &["serve", "--listen", "nowhere"],
        &["serve", "--collector-interval", "no-such-collector=5s"],
        &["serve", "--collector-timeout", "0s"],
        &["--no-such-flag"],
        &[],
    ] {
        let out = run(args, &[]);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: a message");
    }
    let out = run(&["check", "--format", "xml"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
    let env = run(&["check"], &[("NODE_DOCTOR_INTERVAL", "later")]);
    assert_eq!(env.status.code(), Some(64));
    assert_eq!(run(&["--help"], &[]).status.code(), Some(0));
    assert_eq!(run(&["--version"], &[]).status.code(), Some(0));
}

#[test]
fn a_missing_host_root_is_an_agent_failure() {
    let out = run(
        &["check", "--host-root", "/nonexistent/node-doctor-root"],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("host root"));
}
