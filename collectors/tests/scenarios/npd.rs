//! The npd collector on fake hosts: node-problem-detector's shipped configs load, our own
//! configs in NPD's format match the kernel log (a multi-line pattern across the buffer), a
//! log file with either converted Go layout, and the journal; refused configs name why; a
//! hostile line stays capped.

use std::path::{Path, PathBuf};

use collectors::npd::config::{self, Plugin, TimeLayout};
use collectors::npd::{NpdCollector, NpdConfigs};
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{self, FakeHost};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/npd")
        .join(rel)
}

fn load(rel: &str) -> config::NpdConfig {
    config::load(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn collector(h: &FakeHost, configs: &[&str]) -> NpdCollector {
    let configs = configs.iter().map(|c| load(c)).collect();
    NpdCollector::new(
        h.node(),
        NpdConfigs {
            configs,
            ..NpdConfigs::default()
        },
    )
}

fn find<'a>(c: &'a Collection, id: &str, subject: &str) -> &'a Finding {
    c.findings
        .iter()
        .find(|f| f.id == id && f.subject == subject)
        .unwrap_or_else(|| panic!("no {id} {subject}: {:#?}", c.findings))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn npd_shipped_system_log_monitor_configs_load() {
    for (file, plugin, rules, conditions) in [
        ("shipped/kernel-monitor.json", "kmsg", 12, 3),
        ("shipped/kernel-monitor-filelog.json", "filelog", 8, 1),
        ("shipped/readonly-monitor.json", "kmsg", 1, 1),
        ("shipped/docker-monitor.json", "journald", 2, 1),
        ("shipped/docker-monitor-filelog.json", "filelog", 0, 0),
        ("shipped/systemd-monitor.json", "journald", 3, 0),
    ] {
        let c = load(file);
        assert_eq!(c.plugin.name(), plugin, "{file}");
        assert_eq!(c.rules.len(), rules, "{file}");
        assert_eq!(c.conditions.len(), conditions, "{file}");
        assert_eq!(c.buffer_size, 10, "{file}");
        assert_eq!(c.lookback.as_secs(), 300, "{file}");
    }
    // As published it has trailing commas: Go's encoding/json refuses it too.
    let e = config::load(&fixture("shipped/disk-log-message-filelog.json")).unwrap_err();
    assert!(e.reason.contains("not a system-log-monitor config"), "{e}");
}

#[test]
fn npd_own_configs_cover_every_field() {
    let k = load("own/kmsg-multiline.json");
    assert!(matches!(k.plugin, Plugin::Kmsg));
    assert_eq!(k.buffer_size, 5);
    assert_eq!(k.lookback.as_secs(), 3600);
    assert_eq!(k.skip_list, ["audit:"]);
    assert_eq!(k.source, "team-kernel-monitor");
    assert_eq!(k.conditions[0].reason, "TeamKernelHasNoDeadlock");
    assert_eq!(k.rules[0].condition.as_deref(), Some("TeamKernelDeadlock"));
    let f = load("own/filelog-syslog.json");
    let Plugin::Filelog(fmt) = &f.plugin else {
        panic!("filelog")
    };
    assert_eq!(fmt.layout, TimeLayout::Syslog);
    assert_eq!(f.log_path, "/var/log/kern.log");
    let r = load("own/filelog-rfc3339.json");
    let Plugin::Filelog(fmt) = &r.plugin else {
        panic!("filelog")
    };
    assert_eq!(fmt.layout, TimeLayout::Rfc3339);
    let j = load("own/journald.json");
    assert!(matches!(&j.plugin, Plugin::Journald { identifier } if identifier == "kubelet"));
}

#[test]
fn npd_refused_configs_say_why() {
    for (file, why) in [
        ("refused/bad-json.json", "not a system-log-monitor config"),
        (
            "refused/unknown-plugin.json",
            "unknown plugin \"syslog-ng\"",
        ),
        ("refused/bad-regex.json", "does not compile"),
        ("refused/huge-regex.json", "too big"),
        (
            "refused/bad-layout.json",
            "Go time layout node-doctor does not convert",
        ),
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
        let e = config::load(&fixture(file)).unwrap_err().to_string();
        assert!(e.contains(file), "{e}");
        assert!(e.contains(why), "{file}: {e}");
    }
    // A FIFO is refused, not waited on.
    let h = FakeHost::new();
    h.fifo("/npd.json");
    let e = config::load(&h.path("/npd.json")).unwrap_err().to_string();
    assert!(e.contains("npd.json"), "{e}");
}

/// The kernel log (uptime 7200 s): a hung containerd task over three records matches the
/// multi-line permanent rule; an OOM kill the temporary one; an audit line is skipped.
#[test]
fn npd_kmsg_multi_line_pattern_sets_the_condition() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "7200.00 14000.00\n").write(
        "/dev/kmsg",
        "\
6,900,7000000000,-;eth0: link up
3,901,7100000000,-;INFO: task containerd:1234 blocked for more than 120 seconds.
3,902,7100000100,-;      Not tainted 5.15.0-91-generic #101-Ubuntu
3,903,7100000200,-;\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
3,904,7150000000,-;Killed process 4211 (java) total-vm:812kB, anon-rss:401kB, file-rss:0kB
5,905,7160000000,-;audit: Killed process 1 (init) is a test
",
    );
    let mut c = collector(&h, &["own/kmsg-multiline.json"]);
    let out = c.collect(&support::ctx());
    assert_eq!(out.status, Status::Ok, "{:?}", out.status);
    let p = find(&out, "npd.permanent", "ContainerdHung");
    assert_eq!(p.severity, Severity::Warning);
    assert_eq!(p.evidence["condition"].as_str(), Some("TeamKernelDeadlock"));
    assert_eq!(
        p.evidence["healthy_reason"].as_str(),
        Some("TeamKernelHasNoDeadlock")
    );
    assert_eq!(p.evidence["rule_type"].as_str(), Some("permanent"));
    assert_eq!(p.evidence["source"].as_str(), Some("team-kernel-monitor"));
    assert_eq!(p.evidence["plugin"].as_str(), Some("kmsg"));
    assert_eq!(p.evidence["count"].as_f64(), Some(1.0));
    let lines = p.evidence["lines"].as_str().unwrap();
    assert_eq!(lines.lines().count(), 3, "{lines}");
    assert!(lines.starts_with("INFO: task containerd:1234"), "{lines}");
    assert!(p.evidence["config_file"]
        .as_str()
        .unwrap()
        .ends_with("kmsg-multiline.json"));
    assert!(p.title.en.contains("ContainerdHung"), "{}", p.title.en);
    assert!(p.remediation.commands[0].starts_with("journalctl -k | grep -P '"));
    let t = find(&out, "npd.temporary", "TeamOOMKilling");
    // The audit line, though it matches too, is on the skip list: one match.
    assert_eq!(t.evidence["count"].as_f64(), Some(1.0));
    assert!(t.evidence["lines"].as_str().unwrap().contains("(java)"));
    let age = t.evidence["last_seen_seconds_ago"].as_f64().unwrap();
    assert!((49.0..=52.0).contains(&age), "{age}");
    // The next run reads nothing new: the permanent rule holds, the event stays in its window.
    let again = c.collect(&support::ctx());
    find(&again, "npd.permanent", "ContainerdHung");
    find(&again, "npd.temporary", "TeamOOMKilling");
}

/// NPD's kmsg watcher trims each message (`strings.TrimSpace`): NPD's own test line
/// `divide error: 0000 [#1] SMP ` (test/kernel_log_generator/problems/divide_zero), trailing
/// space and all, matches its kernel monitor's `divide error: 0000 \[#\d+\] SMP` rule, which
/// is anchored at the end; so it does here.
#[test]
fn npd_kmsg_messages_are_trimmed_as_npd_trims_them() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "7200.00 14000.00\n").write(
        "/dev/kmsg",
        "4,10,7150000000,-;divide error: 0000 [#1] SMP \n\
         4,11,7150000010,-;CPU: 1 PID: 1853 Comm: docker Tainted: G         C    3.16.0-4-amd64 #1 Debian 3.16.7-ckt20-1+deb8u4\n",
    );
    let mut c = collector(&h, &["upstream/kernel-monitor.json"]);
    let out = c.collect(&support::ctx());
    let t = find(&out, "npd.temporary", "KernelOops");
    assert_eq!(t.evidence["count"].as_f64(), Some(1.0));
    assert_eq!(
        t.evidence["lines"].as_str(),
        Some("divide error: 0000 [#1] SMP")
    );
}

/// A syslog-format kern.log (`Jan _2 15:04:05`, the host's zone: UTC here): a line inside the
/// lookback matches, one older than it does not.
#[test]
fn npd_filelog_with_the_syslog_layout() {
    let h = FakeHost::new();
    let fmt = |t: i64| {
        jiff::tz::TimeZone::UTC
            .to_datetime(jiff::Timestamp::from_second(t).unwrap())
            .strftime("%b %e %H:%M:%S")
            .to_string()
    };
    let n = now();
    let text = format!(
        "{} node-1 kernel: [ 100.000000] INFO: task dockerd:812 blocked for more than 120 seconds.\n\
         {} node-1 kernel: [ 200.000000] INFO: task kubelet:900 blocked for more than 120 seconds.\n\
         {} node-1 kernel: [ 201.000000] eth0: link up\n",
        fmt(n - 11 * 3600),
        fmt(n - 120),
        fmt(n - 60),
    );
    h.write("/var/log/kern.log", text);
    let mut c = collector(&h, &["own/filelog-syslog.json"]);
    let out = c.collect(&support::ctx());
    assert_eq!(out.status, Status::Ok, "{:?}", out.status);
    // Only the kubelet line is inside the 10 h lookback; the link-up line ends the buffer, so
    // the pattern matched when the kubelet line came in.
    let f = find(&out, "npd.temporary", "TeamTaskHung");
    assert_eq!(f.evidence["count"].as_f64(), Some(1.0));
    assert_eq!(
        f.evidence["lines"].as_str(),
        Some("INFO: task kubelet:900 blocked for more than 120 seconds.")
    );
    assert_eq!(f.evidence["log_path"].as_str(), Some("/var/log/kern.log"));
    assert!(
        f.remediation.commands[0].ends_with(" /var/log/kern.log"),
        "{:?}",
        f.remediation.commands
    );
    // A line appended later is read from where the last run stopped.
    let mut more = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/kern.log"))
        .unwrap();
    use std::io::Write;
    writeln!(
        more,
        "{} node-1 kernel: [ 300.000000] INFO: task containerd:700 blocked for more than 240 seconds.",
        fmt(n)
    )
    .unwrap();
    let out = c.collect(&support::ctx());
    assert_eq!(
        find(&out, "npd.temporary", "TeamTaskHung").evidence["count"].as_f64(),
        Some(2.0)
    );
}

/// docker's log with RFC 3339 times (`2006-01-02T15:04:05Z07:00`): the permanent rule.
#[test]
fn npd_filelog_with_an_rfc3339_layout() {
    let h = FakeHost::new();
    let t = jiff::Timestamp::from_second(now() - 30).unwrap();
    h.write(
        "/var/log/docker.log",
        format!(
            "time=\"{t}\" level=error msg=\"Handler for GET /containers/abc/json returned error: readlink /var/lib/docker/overlay2/l: invalid argument\"\n"
        ),
    );
    let mut c = collector(&h, &["own/filelog-rfc3339.json"]);
    let out = c.collect(&support::ctx());
    let f = find(&out, "npd.permanent", "CorruptOverlay");
    assert_eq!(f.evidence["condition"].as_str(), Some("TeamDockerOverlay"));
    assert!(f.evidence["lines"]
        .as_str()
        .unwrap()
        .starts_with("Handler for GET"));
}

/// The journal (systemd 252's files, tests/fixtures/journal): kubelet's PLEG lines, read by
/// SYSLOG_IDENTIFIER; dockerd's lines are not the config's.
#[test]
fn npd_journald_reads_one_identifier() {
    let h = FakeHost::new();
    let mut out = Vec::new();
    lzma_rs::xz_decompress(
        &mut &include_bytes!("../fixtures/journal/compact-zstd.journal.xz")[..],
        &mut out,
    )
    .unwrap();
    h.write(
        "/var/log/journal/5e8c2a0d4b3f4f6e9a1c7d2e3f405162/system.journal",
        out,
    );
    // The fixture's entries run from 04:00:00Z to 04:06:30Z on 2026-11-23, one every 10 s.
    let mut c = collector(&h, &["own/journald.json"]).with_clock(|| 1_795_406_400 + 400);
    let out = c.collect(&support::ctx());
    assert_eq!(out.status, Status::Ok, "{:?}", out.status);
    let f = find(&out, "npd.temporary", "TeamPLEGSlow");
    assert_eq!(f.evidence["identifier"].as_str(), Some("kubelet"));
    assert_eq!(f.evidence["plugin"].as_str(), Some("journald"));
    assert!(f.evidence["count"].as_f64().unwrap() >= 1.0);
    assert!(f.remediation.commands[0].starts_with("journalctl -t kubelet"));
}

/// A hostile log line: 1 MiB with control characters and a terminal escape. The evidence
/// keeps at most 1 KiB of it (plus the marker); the summary is bounded.
#[test]
fn npd_a_hostile_line_stays_capped() {
    let h = FakeHost::new();
    let t = jiff::Timestamp::from_second(now() - 5).unwrap();
    let payload = format!(
        "readlink /var/lib/docker/overlay2/\x1b]0;pwned\x07\x1b[2J{}: invalid argument",
        "A".repeat(1 << 20)
    );
    h.write(
        "/var/log/docker.log",
        format!("time=\"{t}\" level=error msg=\"{payload}\"\n"),
    );
    let mut c = collector(&h, &["own/filelog-rfc3339.json"]);
    let out = c.collect(&support::ctx());
    // The 1 MiB line is beyond what is kept of one line (16 KiB): cut, so the pattern's end
    // (": invalid argument") is gone and nothing matches; a line that fits matches below.
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    let payload = format!(
        "readlink /var/lib/docker/overlay2/\x1b]0;pwned\x07\x1b[2J{}: invalid argument",
        "A".repeat(8 << 10)
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/docker.log"))
        .unwrap();
    use std::io::Write;
    writeln!(f, "time=\"{t}\" level=error msg=\"{payload}\"").unwrap();
    let out = c.collect(&support::ctx());
    let f = find(&out, "npd.permanent", "CorruptOverlay");
    let lines = f.evidence["lines"].as_str().unwrap();
    assert!(lines.len() <= 1024 + 64, "{}", lines.len());
    assert!(lines.ends_with('…'), "{lines}");
    assert!(f.summary.en.len() <= collectors::bounded::TEXT_BYTES + 64);
    let shown = collectors::sanitize::visible(&f.summary.en);
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown}"
    );
    for cmd in &f.remediation.commands {
        assert!(!cmd.contains('\x1b'), "{cmd}");
    }
}

/// Without --npd-config the collector has nothing to judge, and says so (complete).
#[test]
fn npd_without_a_config_is_noted() {
    let h = FakeHost::new();
    let mut c = collector(&h, &[]);
    let out = c.collect(&support::ctx());
    assert!(
        matches!(&out.status, Status::Noted(m) if m.contains("no --npd-config")),
        "{:?}",
        out.status
    );
    assert!(out.findings.is_empty());
}

/// A config whose log file is missing, or a FIFO (never opened, so never waited on):
/// degraded, naming the config.
#[test]
fn npd_a_missing_log_file_is_degraded() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "7200.00 14000.00\n")
        .write("/dev/kmsg", "6,1,1,-;hello\n");
    let mut c = collector(&h, &["own/filelog-syslog.json", "own/kmsg-multiline.json"]);
    let out = c.collect(&support::ctx());
    assert!(
        matches!(&out.status, Status::Degraded(m) if m.contains("filelog-syslog.json")),
        "{:?}",
        out.status
    );
    h.fifo("/var/log/kern.log");
    let out = c.collect(&support::ctx());
    assert!(
        matches!(&out.status, Status::Degraded(m) if m.contains("filelog-syslog.json") && m.contains("kern.log")),
        "{:?}",
        out.status
    );
}
