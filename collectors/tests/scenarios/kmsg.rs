//! The shared kernel-log reader against the real `/dev/kmsg` (root).

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use collectors::kmsg::{KmsgConfig, KmsgMode, KmsgReader, Record};
use collectors::{HostPaths, Status};

use crate::support;

/// Reads until the reader has caught up with everything currently held.
fn drain(r: &mut KmsgReader) -> Vec<collectors::kmsg::Record> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        let b = r.read_new();
        assert_eq!(b.status, Status::Ok, "reading the real /dev/kmsg");
        all.extend(b.records.iter().map(|r| (**r).clone()));
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
    let mut reader = KmsgReader::alone(&host, KmsgConfig::default());
    drain(&mut reader);

    let marker = write_marker("marker");

    let first = drain(&mut reader);
    let rec = seen_once(&first, &marker);
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
        collectors::skip!(
            "SKIP without_cap_syslog...: kernel.dmesg_restrict=0 lets anyone read /dev/kmsg"
        );
        return;
    }
    // Re-run this binary as `nobody` (a uid change drops CAP_SYSLOG) for the child test only
    // (ignored in every other run: it is this test's half, not a test of its own).
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "kmsg::unprivileged_child",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && stdout.contains("Permission denied") && !stdout.contains("1 passed")
    {
        collectors::skip!(
            "SKIP without_cap_syslog...: nobody cannot execute the test binary: {stdout}"
        );
        return;
    }
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The half of `without_cap_syslog_the_reader_is_degraded_with_the_reason` that runs as
/// `nobody`: that test re-executes this binary with `--ignored --exact` for it. Ignored in any
/// other run, so it is never counted as a pass of its own.
#[test]
#[ignore = "run as nobody by without_cap_syslog_the_reader_is_degraded_with_the_reason"]
fn unprivileged_child() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "run only by without_cap_syslog_the_reader_is_degraded_with_the_reason, as nobody"
    );
    let mut reader = KmsgReader::alone(&HostPaths::new("/"), KmsgConfig::default());
    let b = reader.read_new();
    // The device refuses open() and, without CAP_SYSLOG, so does the syslog(2) fallback.
    match &b.status {
        Status::Degraded(m) => {
            assert!(m.starts_with("/dev/kmsg: permission denied"), "{m}");
            assert!(m.contains("syslog(2) fallback failed"), "{m}");
            assert!(m.contains("needs CAP_SYSLOG"), "{m}");
        }
        s => panic!("expected degraded, got {s:?}"),
    }
    assert!(b.records.is_empty());
    assert_eq!(reader.mode(), KmsgMode::Kmsg);
}

/// A fake root whose `dev/` is a `nodev` tmpfs holding a real kmsg node (char 1:11) and whose
/// `proc` is the real `/proc`: `open("dev/kmsg")` fails with EACCES on the character device,
/// as the device cgroup of an unprivileged container makes it fail with EPERM. Unmounted when
/// dropped.
struct NodevKmsgRoot {
    dir: tempfile::TempDir,
}

impl NodevKmsgRoot {
    /// With the real kmsg node, char 1:11.
    fn new() -> NodevKmsgRoot {
        NodevKmsgRoot::with_device(1, 11)
    }

    fn with_device(major: u64, minor: u64) -> NodevKmsgRoot {
        use nix::mount::{mount, MsFlags};
        use nix::sys::stat::{makedev, mknod, Mode, SFlag};
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir(&dev).unwrap();
        mount(
            Some("tmpfs"),
            &dev,
            Some("tmpfs"),
            MsFlags::MS_NODEV | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("size=64k,mode=755"),
        )
        .unwrap();
        let root = NodevKmsgRoot { dir };
        mknod(
            &dev.join("kmsg"),
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o644),
            makedev(major, minor),
        )
        .unwrap();
        std::os::unix::fs::symlink("/proc", root.dir.path().join("proc")).unwrap();
        root
    }

    fn host(&self) -> HostPaths {
        HostPaths::new(self.dir.path())
    }
}

impl Drop for NodevKmsgRoot {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(
            &self.dir.path().join("dev"),
            nix::mount::MntFlags::MNT_DETACH,
        );
    }
}

/// The one record carrying `marker` among `records` (exactly one, or the test fails), written
/// by [`write_marker`] at user facility, info level.
fn seen_once<'a>(records: &'a [Record], marker: &str) -> &'a Record {
    let hits: Vec<_> = records.iter().filter(|r| r.message == marker).collect();
    assert_eq!(
        hits.len(),
        1,
        "marker seen once in {} new records",
        records.len()
    );
    let rec = hits[0];
    assert_eq!(
        (rec.level, rec.facility),
        (6, 1),
        "user facility, info level"
    );
    rec
}

fn write_marker(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let marker = format!("node-doctor-test: {tag} {}-{nanos}", std::process::id());
    // A fresh open per write: /dev/kmsg rate-limits writers per open file.
    let mut kmsg = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap();
    kmsg.write_all(format!("<6>{marker}\n").as_bytes()).unwrap();
    marker
}

#[test]
fn refused_device_falls_back_to_syslog_and_returns_a_marker_once() {
    if !support::root_or_skip("refused_device_falls_back_to_syslog_and_returns_a_marker_once") {
        return;
    }
    let root = NodevKmsgRoot::new();
    let refused = std::fs::File::open(root.dir.path().join("dev/kmsg"))
        .expect_err("a device node on a nodev mount cannot be opened");
    assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);

    let mut reader = KmsgReader::alone(&root.host(), KmsgConfig::default());
    let metric = |r: &KmsgReader| {
        r.metrics("memory")
            .into_iter()
            .find(|m| m.name == "node_doctor_kmsg_syslog_fallback")
            .map(|m| m.value)
    };
    assert_eq!(metric(&reader), Some(0.0));
    let held = drain(&mut reader);
    assert_eq!(reader.mode(), KmsgMode::Syslog);
    assert_eq!(reader.mode().as_str(), "syslog");
    assert_eq!(metric(&reader), Some(1.0));
    // Nothing held twice, even within the first (lookback) read.
    let mut keys: Vec<_> = held.iter().map(|r| (r.usec, r.seq)).collect();
    keys.dedup();
    assert_eq!(keys.len(), held.len());

    let marker = write_marker("syslog-fallback");
    let first = drain(&mut reader);
    let rec = seen_once(&first, &marker);
    assert!(rec.continuation.is_empty());
    let ts = rec
        .timestamp
        .expect("uptime is readable through the proc symlink");
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
    // The device reader, on the real root, sees the same record at the same time.
    let mut device = KmsgReader::alone(&HostPaths::new("/"), KmsgConfig::default());
    let via_device = drain(&mut device);
    assert_eq!(device.mode(), KmsgMode::Kmsg);
    let same = via_device.iter().find(|r| r.message == marker).unwrap();
    assert_eq!(same.usec, rec.usec);
    // Sequence numbers are the reader's own, increasing.
    assert!(first.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn another_refused_device_at_dev_kmsg_does_not_fall_back() {
    if !support::root_or_skip("another_refused_device_at_dev_kmsg_does_not_fall_back") {
        return;
    }
    // char 1:3 is /dev/null: not the kernel log, so syslog(2) must not stand in for it.
    let root = NodevKmsgRoot::with_device(1, 3);
    let mut reader = KmsgReader::alone(&root.host(), KmsgConfig::default());
    let b = reader.read_new();
    match &b.status {
        Status::Degraded(m) => assert!(m.contains("needs CAP_SYSLOG"), "{m}"),
        s => panic!("expected degraded, got {s:?}"),
    }
    assert!(b.records.is_empty());
    assert_eq!(reader.mode(), KmsgMode::Kmsg);
}
