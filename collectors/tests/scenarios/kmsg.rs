//! The shared kernel-log reader against the real `/dev/kmsg` (root).

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use collectors::kmsg::{KmsgConfig, KmsgReader};
use collectors::{HostPaths, Status};

use crate::support;

/// Reads until the reader has caught up with everything currently held.
fn drain(r: &mut KmsgReader) -> Vec<collectors::kmsg::Record> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        let b = r.read_new();
        assert_eq!(b.status, Status::Ok, "reading the real /dev/kmsg");
        all.extend(b.records);
        if !b.truncated_by_budget {
            break;
        }
    }
    all
}

#[test]
fn real_kmsg_marker_is_seen_exactly_once() {
    if !support::root_or_skip("real_kmsg_marker_is_seen_exactly_once") {
        return;
    }
    let host = HostPaths::new("/");
    let mut reader = KmsgReader::new(&host, KmsgConfig::default());
    drain(&mut reader);

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let marker = format!("node-doctor-test: marker {}-{nanos}", std::process::id());
    // A fresh open per write: /dev/kmsg rate-limits writers per open file.
    let mut kmsg = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap();
    kmsg.write_all(format!("<6>{marker}\n").as_bytes()).unwrap();
    drop(kmsg);

    let first = drain(&mut reader);
    let hits: Vec<_> = first.iter().filter(|r| r.message == marker).collect();
    assert_eq!(
        hits.len(),
        1,
        "marker seen once in {} new records",
        first.len()
    );
    let rec = hits[0];
    assert_eq!(
        (rec.level, rec.facility),
        (6, 1),
        "user facility, info level"
    );
    let ts = rec.timestamp.expect("uptime is readable on a real host");
    let skew = match SystemTime::now().duration_since(ts) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    assert!(skew < Duration::from_secs(60), "timestamp off by {skew:?}");

    let second = drain(&mut reader);
    assert!(
        second.iter().all(|r| r.message != marker),
        "marker returned again on the next cycle"
    );
    assert!(reader.records_total() >= 1);
}

/// Set in the environment of the unprivileged child run of this test binary.
const CHILD_ENV: &str = "NODE_DOCTOR_KMSG_UNPRIVILEGED_CHILD";

#[test]
fn without_cap_syslog_the_reader_is_degraded_with_the_reason() {
    use std::os::unix::process::CommandExt;
    if !support::root_or_skip("without_cap_syslog_the_reader_is_degraded_with_the_reason") {
        return;
    }
    let restricted = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    if !restricted {
        eprintln!("SKIP without_cap_syslog...: kernel.dmesg_restrict=0 lets anyone read /dev/kmsg");
        return;
    }
    // Re-run this binary as `nobody` (a uid change drops CAP_SYSLOG) for the child test only.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "kmsg::unprivileged_child", "--nocapture"])
        .env(CHILD_ENV, "1")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && stdout.contains("Permission denied") && !stdout.contains("1 passed")
    {
        eprintln!("SKIP without_cap_syslog...: nobody cannot execute the test binary: {stdout}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs only inside the child started above.
#[test]
fn unprivileged_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let mut reader = KmsgReader::new(&HostPaths::new("/"), KmsgConfig::default());
    let b = reader.read_new();
    match &b.status {
        Status::Degraded(m) => assert!(m.contains("/dev/kmsg needs CAP_SYSLOG"), "{m}"),
        s => panic!("expected degraded, got {s:?}"),
    }
    assert!(b.records.is_empty());
}
