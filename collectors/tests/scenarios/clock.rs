//! The clock collector on fake hosts, with the kernel clock's state injected
//! (`ClockCollector::with_source`): a staged host root is not a kernel, so the clock it would
//! read is this machine's. The states are those Debian's `adjtimex --print` shows for each
//! case (an unsynchronised boot clock: status 64, maxerror 16000000 µs, return value 5).
//! Real: this VM's own clock, read by the collector on the real root, against Debian's
//! `adjtimex` (unpacked into the download cache by the test itself, debian.rs), and a process
//! named `chronyd` found in the real process table.

use std::path::Path;
use std::process::Command;

use collectors::clock::timex::{from_raw, RawTimex};
use collectors::clock::{ClockCollector, ClockConfig, Timex};
use collectors::{CollectContext, Collection, Collector, Finding, HostNetns, Severity, Status};

use crate::debian::debian_binary;
use crate::support::{self, only, words, FakeHost};

/// 2 h after boot: past the 20 min grace.
const UPTIME: &str = "7200.00 14000.00\n";

fn timex(status: i64, maxerror_us: i64, offset: i64) -> Timex {
    let state = if status & 0x40 != 0 { 5 } else { 0 };
    from_raw(
        RawTimex {
            status,
            offset,
            freq: 1_234_567,
            maxerror: maxerror_us,
            esterror: maxerror_us.min(500_000),
        },
        state,
    )
}

/// An unsynchronised clock, as this VM's kernel reports it without a daemon.
fn unsynced() -> Timex {
    timex(0x40, 16_000_000, 0)
}

fn host(uptime: &str) -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", uptime).mkdir("/proc/self");
    h
}

fn collector(h: &FakeHost, t: Timex) -> ClockCollector {
    ClockCollector::with_source(h.node(), ClockConfig::default(), Box::new(move || Ok(t)))
}

fn collect(h: &FakeHost, t: Timex) -> Collection {
    support::collect(&mut collector(h, t), &support::ctx())
}

fn num(f: &Finding, name: &str) -> f64 {
    f.evidence[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} in {:?}", f.evidence))
}

/// The NodeConditions a finding sets, with their reasons.
fn sets(f: &Finding) -> Vec<(String, String)> {
    collectors::rules::RuleBook::cluster(f)
        .into_iter()
        .map(|(c, r)| (c.ctype.clone(), r))
        .collect()
}

#[test]
fn unsynchronised_without_a_daemon_says_install_one() {
    let h = host(UPTIME);
    let c = collect(&h, unsynced());
    assert_eq!(c.status, Status::Ok);
    let f = only(&c, "clock.unsynchronised");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "system clock");
    assert_eq!(num(f, "max_error_seconds"), 16.0);
    assert_eq!(num(f, "uptime_seconds"), 7200.0);
    assert_eq!(f.evidence["status"].as_str(), Some("UNSYNC"));
    assert_eq!(f.evidence["clock_state"].as_str(), Some("TIME_ERROR"));
    assert_eq!(f.evidence["time_daemons"].as_str(), Some("none"));
    let t = words(f);
    assert!(t.contains("No time daemon runs"), "{t}");
    assert!(t.contains("Install and enable a time daemon"), "{t}");
    assert!(t.contains("169.254.169.123"), "{t}");
    assert!(t.contains("adjtimex --print"), "{t}");
    assert!(!t.contains("chronyc"), "{t}");
    assert_eq!(
        f.remediation.source.as_ref().and_then(|s| s.url),
        Some("https://man7.org/linux/man-pages/man2/adjtimex.2.html")
    );
    assert_eq!(
        sets(f),
        [(
            "NodeDoctorClockUnsynchronised".to_string(),
            "ClockUnsynchronised".to_string()
        )]
    );
}

#[test]
fn unsynchronised_with_chronyd_asks_chronyd() {
    let h = host(UPTIME);
    crate::runtime::process(&h, 612, "chronyd", "/usr/sbin/chronyd -F 1", 100);
    crate::runtime::process(&h, 700, "sleep", "sleep 1000", 100);
    let c = collect(&h, unsynced());
    let f = only(&c, "clock.unsynchronised");
    assert_eq!(
        f.evidence["time_daemons"].as_str(),
        Some("chronyd (pid 612)")
    );
    let t = words(f);
    assert!(
        t.contains("chronyd (pid 612) runs but has not synchronised"),
        "{t}"
    );
    assert!(t.contains("chronyc sources -v"), "{t}");
    assert!(t.contains("UDP port 123"), "{t}");
    assert!(!t.contains("Install and enable"), "{t}");
    assert_eq!(
        f.remediation.source.as_ref().and_then(|s| s.url),
        Some("https://chrony-project.org/doc/4.6/chronyc.html")
    );
}

#[test]
fn unsynchronised_with_timesyncd_asks_timedatectl() {
    let h = host(UPTIME);
    crate::runtime::process(
        &h,
        401,
        "systemd-timesyn",
        "/lib/systemd/systemd-timesyncd",
        50,
    );
    let f = only(&collect(&h, unsynced()), "clock.unsynchronised").clone();
    assert_eq!(
        f.evidence["time_daemons"].as_str(),
        Some("systemd-timesyn (pid 401)")
    );
    let t = words(&f);
    assert!(t.contains("timedatectl timesync-status"), "{t}");
    assert!(!t.contains("chronyc"), "{t}");
}

#[test]
fn within_the_boot_grace_it_is_noted_not_raised() {
    let h = host("300.00 500.00\n");
    let c = collect(&h, unsynced());
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    match &c.status {
        Status::Noted(m) => assert!(m.contains("within 1200 s of boot"), "{m}"),
        s => panic!("{s:?}"),
    }
    let m = support::find_metric(&c, "node_doctor_clock_synchronised", &[]).expect("metric");
    assert_eq!(m.value, 0.0);
}

#[test]
fn a_synchronised_clock_is_quiet_and_measured() {
    let h = host(UPTIME);
    // ntpd in PLL mode, nanosecond offsets: 2 ms offset, 30 ms bound.
    let c = collect(&h, timex(0x2001, 30_000, 2_000_000));
    assert_eq!(c.status, Status::Ok);
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    let m = |n: &str| {
        support::find_metric(&c, n, &[])
            .unwrap_or_else(|| panic!("{n}"))
            .value
    };
    assert_eq!(m("node_doctor_clock_synchronised"), 1.0);
    assert!((m("node_doctor_clock_max_error_seconds") - 0.03).abs() < 1e-12);
    assert!((m("node_doctor_clock_offset_seconds") - 0.002).abs() < 1e-12);
    assert!((m("node_doctor_clock_frequency_adjustment_ppm") - 1_234_567.0 / 65536.0).abs() < 1e-9);
}

#[test]
fn a_daemon_that_stopped_updating_leaves_a_growing_bound() {
    let h = host(UPTIME);
    crate::runtime::process(&h, 731, "ntpd", "/usr/sbin/ntpd -g", 100);
    let c = collect(&h, timex(0x0001, 4_600_000, 0));
    let f = only(&c, "clock.error_large");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "max_error_seconds"), 4.6);
    assert_eq!(num(f, "max_error_threshold_seconds"), 4.0);
    let t = words(f);
    assert!(t.contains("error bound has grown to 4.6 s"), "{t}");
    assert!(t.contains("ntpd (pid 731)"), "{t}");
    assert!(t.contains("ntpq -pn"), "{t}");
    assert!(!t.contains("cordon"), "{t}");
    assert_eq!(
        sets(f),
        [(
            "NodeDoctorClockUnsynchronised".to_string(),
            "ClockErrorLarge".to_string()
        )]
    );
}

#[test]
fn an_offset_of_seconds_that_does_not_shrink_is_critical() {
    let h = host(UPTIME);
    // µs units: 1.5 s behind, run after run.
    let t = timex(0x0001, 200_000, -1_500_000);
    let mut col = collector(&h, t);
    let first = support::collect(&mut col, &support::ctx());
    let f = only(&first, "clock.error_large");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "offset_seconds"), -1.5);
    assert!(words(f).contains("kubectl cordon node-1"), "{}", words(f));
    // Unchanged on the next run: still not shrinking, still raised.
    let second = col.collect(&support::ctx());
    assert_eq!(second.findings.len(), 1);
}

#[test]
fn a_shrinking_offset_is_a_correction_under_way() {
    let h = host(UPTIME);
    let offsets = std::sync::Arc::new(std::sync::Mutex::new(vec![90_000i64, 120_000]));
    let o = offsets.clone();
    let mut col = ClockCollector::with_source(
        h.node(),
        ClockConfig::default(),
        Box::new(move || {
            let v = o
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .pop();
            Ok(timex(0x0001, 100_000, v.unwrap_or(0)))
        }),
    );
    // 120 ms first (no previous run: raised), then 90 ms (shrinking: quiet).
    assert_eq!(col.collect(&support::ctx()).findings.len(), 1);
    assert!(col.collect(&support::ctx()).findings.is_empty());
}

#[test]
fn a_staged_root_without_a_source_judges_nothing() {
    // The collector the registry builds, on a fake root: the kernel's clock is not the staged
    // host's.
    let h = host(UPTIME);
    let mut col = ClockCollector::new(h.node(), ClockConfig::default());
    let c = col.collect(&support::ctx());
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    match &c.status {
        Status::Noted(m) => assert!(m.contains("staged files"), "{m}"),
        s => panic!("{s:?}"),
    }
    assert!(c.status.is_complete());
}

#[test]
fn a_failing_adjtimex_is_unavailable() {
    let h = host(UPTIME);
    let mut col = ClockCollector::with_source(
        h.node(),
        ClockConfig::default(),
        Box::new(|| Err(std::io::Error::from_raw_os_error(1))),
    );
    let c = col.collect(&support::ctx());
    match &c.status {
        Status::Unavailable(m) => assert!(m.contains("adjtimex(2) failed"), "{m}"),
        s => panic!("{s:?}"),
    }
}

/// `adjtimex --print` as name -> value.
fn adjtimex_print(bin: &Path) -> std::collections::BTreeMap<String, String> {
    let out = Command::new(bin)
        .arg("--print")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':').or_else(|| l.split_once('='))?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

#[test]
fn real_this_machines_clock_agrees_with_debian_adjtimex() {
    // Debian's adjtimex, unpacked, never installed: the package's init script would set the
    // clock's tick and frequency.
    let bin = match debian_binary("ND_ADJTIMEX", "adjtimex", "sbin/adjtimex") {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!("SKIP real_this_machines_clock_agrees_with_debian_adjtimex: {why}");
            return;
        }
    };
    let peer = adjtimex_print(&bin);
    let mut col = ClockCollector::new(
        collectors::Node::new(collectors::HostPaths::new("/")),
        ClockConfig::default(),
    );
    let c = col.collect(&CollectContext::new("node-1", HostNetns::Same));
    let status: u32 = peer["status"].parse().expect("status");
    let unsync = status & 0x40 != 0;
    let metric = |n: &str| {
        support::find_metric(&c, n, &[])
            .unwrap_or_else(|| panic!("{n}: {c:#?}"))
            .value
    };
    assert_eq!(
        metric("node_doctor_clock_synchronised") == 0.0,
        unsync,
        "{peer:?}"
    );
    // maxerror moves by 0.5 ms a second between the two reads, and stops at 16 s.
    let peer_max: f64 = peer["maxerror"].parse::<f64>().expect("maxerror") / 1e6;
    assert!(
        (metric("node_doctor_clock_max_error_seconds") - peer_max).abs() < 0.01,
        "{peer:?}"
    );
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .expect("uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("uptime");
    let raised = c.findings.iter().any(|f| f.id == "clock.unsynchronised");
    // Unsynchronised past the grace period: reported; synchronised: not.
    if uptime > 1300.0 || !unsync {
        assert_eq!(raised, unsync, "{peer:?} {:#?}", c.findings);
    }
    if raised {
        let f = &c.findings[0];
        assert_eq!(
            f.evidence["max_error_seconds"]
                .as_f64()
                .map(|v| (v - peer_max).abs() < 0.01),
            Some(true)
        );
        eprintln!("this machine's clock: {}", f.summary.en);
    }
}

/// A process whose name is `chronyd` (a copy of sleep) and chronyd's sign, its command socket
/// (a datagram socket named `chronyd.sock`, bound here by the test in the host's network
/// namespace): the daemon locator cannot rule chronyd out, and the pass over the real `/proc`
/// finds it by name.
#[test]
fn real_a_running_time_daemon_is_named() {
    let same_netns =
        std::fs::read_link("/proc/1/ns/net").ok() == std::fs::read_link("/proc/self/ns/net").ok();
    if !same_netns {
        collectors::skip!(
            "SKIP real_a_running_time_daemon_is_named: needs pid 1's network namespace"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let _sign = std::os::unix::net::UnixDatagram::bind(dir.path().join("chronyd.sock"))
        .expect("bind chronyd.sock");
    let bin = dir.path().join("chronyd");
    std::fs::copy("/bin/sleep", &bin).expect("copy sleep");
    let mut child = Command::new(&bin).arg("30").spawn().expect("spawn");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = child.id();
    let _guard = Kill(std::mem::replace(
        &mut child,
        Command::new("true").spawn().expect("true"),
    ));
    let _ = child.wait();
    let mut col = ClockCollector::with_source(
        collectors::Node::new(collectors::HostPaths::new("/")),
        ClockConfig::default(),
        Box::new(|| Ok(unsynced())),
    );
    let c = col.collect(&CollectContext::new("node-1", HostNetns::Same));
    let f = c
        .findings
        .iter()
        .find(|f| f.id == "clock.unsynchronised")
        .unwrap_or_else(|| panic!("{c:#?}"));
    let daemons = f.evidence["time_daemons"].as_str().expect("daemons");
    assert!(
        daemons.contains(&format!("chronyd (pid {pid})")),
        "{daemons}"
    );
    assert!(words(f).contains("chronyc tracking"), "{}", words(f));
}
