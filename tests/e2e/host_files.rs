//! Hostile host files against the built binary (issue 14): 200 MB `/proc` files must not grow
//! the agent's memory or its output, and a FIFO at `etc/hostname` must not hang `check` or
//! `serve`.

use std::time::Duration;

use serde_json::Value;

use crate::support::{run_measured, FakeRoot, Measured, Server};

/// 200 MB, the size in the issue (a 200 MB `proc/uptime` took `check` to 748 MiB peak RSS, a
/// 200 MB `loadavg` to 388 MiB).
const HUGE: u64 = 200 << 20;
/// Peak anonymous memory bound (RssAnon, what the agent allocates; support::Memory): reading
/// either file whole would take 200 MiB or more.
const MAX_ANON_KIB: u64 = 32 << 10;
/// Output bound: the quiet root's JSON document is ~2 KB; any copy of the files' text would
/// be megabytes.
const MAX_OUTPUT_BYTES: usize = 64 << 10;

fn check_json(root: &FakeRoot) -> Measured {
    let r = root.root().to_str().expect("utf-8 temp path");
    run_measured(
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
        Duration::from_secs(60),
    )
}

fn collector<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["collectors"]
        .as_array()
        .expect("collectors")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} collector in {v:#}"))
}

/// Runs `check` on a quiet root with the given files made 200 MB, prints the figures, checks
/// the bounds and that the `load` collector's status names the files in `named` with their
/// cap, and returns the document.
fn check_with_huge(files: &[(&str, &str)], named: &[&str]) -> Value {
    let root = FakeRoot::quiet();
    for (path, prefix) in files {
        root.oversized(path, prefix, HUGE);
    }
    let m = check_json(&root);
    let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    println!(
        "check with 200 MB {names:?}: peak RssAnon {} KiB, JSON output {} bytes, {:?}, {}",
        m.peak_anon_kib,
        m.stdout.len(),
        m.took,
        m.status
    );
    assert!(
        // The refused file leaves `load` incomplete: the exit code carries bit 4.
        matches!(m.status.code(), Some(4..=6)),
        "{}: {}",
        m.status,
        String::from_utf8_lossy(&m.stderr)
    );
    assert!(
        m.peak_anon_kib < MAX_ANON_KIB,
        "peak RssAnon {} KiB with 200 MB {names:?}",
        m.peak_anon_kib
    );
    assert!(
        m.stdout.len() < MAX_OUTPUT_BYTES,
        "{} bytes of output",
        m.stdout.len()
    );
    assert!(
        m.stderr.len() < MAX_OUTPUT_BYTES,
        "{} bytes of logs",
        m.stderr.len()
    );
    let v: Value = serde_json::from_slice(&m.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&m.stdout)));
    crate::serve::assert_contract(&v, "n1");
    let load = collector(&v, "load");
    let msg = load["message"].as_str().unwrap_or("");
    for path in named {
        let file = root.path(path).display().to_string();
        assert!(
            msg.contains(&format!(
                "refusing to read {file}: it is larger than 4096 bytes"
            )),
            "{load}"
        );
    }
    v
}

#[test]
fn check_with_a_200_mb_uptime_stays_small() {
    let v = check_with_huge(
        &[("/proc/uptime", "86400.00 170000.00\n")],
        &["/proc/uptime"],
    );
    assert_eq!(collector(&v, "load")["status"], "degraded");
}

#[test]
fn check_with_a_200_mb_loadavg_stays_small() {
    // Parsed, this would be 4,194,000 tasks: a PID-exhaustion finding.
    let v = check_with_huge(
        &[("/proc/loadavg", "0.12 0.10 0.05 1/4194000 21971\n")],
        &["/proc/loadavg"],
    );
    assert_eq!(collector(&v, "load")["status"], "unavailable");
    let kernel = collector(&v, "kernel");
    assert_eq!(kernel["status"], "degraded", "{kernel}");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "kernel.pid_exhaustion"));
}

#[test]
fn check_with_a_200_mb_uptime_and_loadavg_stays_small() {
    // Without loadavg the load collector stops before it reads uptime.
    let v = check_with_huge(
        &[
            ("/proc/uptime", "86400.00 170000.00\n"),
            ("/proc/loadavg", "0.12 0.10 0.05 1/94 21971\n"),
        ],
        &["/proc/loadavg"],
    );
    assert_eq!(collector(&v, "load")["status"], "unavailable");
}

#[test]
fn a_10_mb_uptime_of_digits_is_not_copied_into_the_output() {
    // The case: a 10 MB "number" in uptime once made a 10.5 MB /findings (the parse
    // error quoted it). The interval leaves the old parser time to fail rather than time out.
    let root = FakeRoot::quiet();
    root.write("/proc/uptime", &format!("{} 1.00\n", "9".repeat(10 << 20)));
    let r = root.root().to_str().expect("utf-8 temp path");
    let m = run_measured(
        &[
            "check",
            "--host-root",
            r,
            "--format",
            "json",
            "--interval",
            "3s",
            "--node-name",
            "n1",
        ],
        &[],
        Duration::from_secs(60),
    );
    println!(
        "check with a 10 MB uptime of digits: JSON output {} bytes, peak RssAnon {} KiB",
        m.stdout.len(),
        m.peak_anon_kib
    );
    assert!(
        m.stdout.len() < MAX_OUTPUT_BYTES,
        "{} bytes",
        m.stdout.len()
    );
    let v: Value = serde_json::from_slice(&m.stdout).expect("JSON");
    let load = collector(&v, "load");
    assert_eq!(load["status"], "degraded", "{load}");
    assert!(load["message"]
        .as_str()
        .unwrap()
        .contains("it is larger than 4096 bytes"));
}

/// This machine's host name (the test's own UTS namespace, which the agent shares): the
/// agent's fallback, `gethostname()`, when `etc/hostname` is refused.
fn own_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read the kernel's host name")
        .trim()
        .to_string()
}

#[test]
fn a_fifo_at_etc_hostname_does_not_hang_check() {
    let root = FakeRoot::quiet();
    root.fifo("/etc/hostname");
    let r = root.root().to_str().expect("utf-8 temp path");
    // NODE_NAME is unset by run_measured and no --node-name is given: the name comes from
    // <root>/etc/hostname, which must be refused at once.
    let m = run_measured(
        &[
            "check",
            "--host-root",
            r,
            "--format",
            "json",
            "--interval",
            "100ms",
        ],
        &[],
        Duration::from_secs(30),
    );
    println!(
        "check with a FIFO at etc/hostname: {:?}, {}",
        m.took, m.status
    );
    // Completed (0–2, or 4–6 as the quiet root lacks some collectors' sources); not 3, the
    // agent's own failure, nor a signal.
    assert!(
        matches!(m.status.code(), Some(0..=2 | 4..=6)),
        "{}",
        m.status
    );
    let v: Value = serde_json::from_slice(&m.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&m.stdout)));
    assert_eq!(v["node"], own_hostname().as_str(), "{v:#}");
}

#[test]
fn a_fifo_at_etc_hostname_does_not_hang_serve() {
    let root = FakeRoot::quiet();
    root.fifo("/etc/hostname");
    // No --node-name, NODE_NAME unset: start_with fails the test if /healthz never answers.
    let s = Server::start_with(root.root(), &["--log-format", "json"], |_| {});
    assert_eq!(s.get("/healthz").status, 200);
    let v = s.wait_findings(30, "a first snapshot", |v| v["node"].is_string());
    assert_eq!(v["node"], own_hostname().as_str(), "{v:#}");
    let logs = s.logs();
    assert!(
        logs.contains("host name not taken from the host root") && logs.contains("FIFO"),
        "{logs}"
    );
}
