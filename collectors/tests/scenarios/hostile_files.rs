//! Hostile host files (issue 14): every collector on fake roots where a file it reads is far
//! larger than any real one, or a FIFO. A refused file becomes a `degraded`/`unavailable`
//! status naming the file and the cap, no finding is built from its text, and no collector
//! blocks.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::disk::{DiskCollector, DiskConfig};
use collectors::hostfs::cap;
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::load::{LoadCollector, LoadConfig};
use collectors::memory::{MemoryCollector, MemoryConfig};
use collectors::sys::statvfs::FsUsage;
use collectors::{Collection, Collector, Status};

use crate::support::{ctx, FakeHost};

/// 200 MB: the size of the files in the issue (a 200 MB `proc/uptime` took `check` to
/// 748 MiB). Sparse, so they cost no disk space and are created at once.
const HUGE: u64 = 200 << 20;

/// A quiet node's `/proc` and `/sys` (Linux 6.18, this project's CI VM) with a kubelet and
/// docker configuration, so every collector has what it reads.
fn quiet_host() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n")
        .write("/proc/loadavg", "0.12 0.10 0.05 1/94 21971\n")
        .write(
            "/proc/stat",
            "cpu  1000 0 500 100000 10 0 5 0 0 0\ncpu0 500 0 250 50000 5 0 3 0 0 0\n\
             cpu1 500 0 250 50000 5 0 2 0 0 0\nctxt 123456\nbtime 1763798400\n\
             processes 22000\nprocs_running 1\nprocs_blocked 0\n",
        )
        .write(
            "/proc/meminfo",
            "MemTotal:       24684084 kB\nMemFree:        21874744 kB\nMemAvailable:   24117824 kB\n",
        )
        .write("/proc/vmstat", "nr_free_pages 20123\ncompact_stall 0\ncompact_fail 0\n")
        .write(
            "/proc/buddyinfo",
            "Node 0, zone   Normal   2431   1434    901   1074    574    355    392    249    135    112   1490\n",
        )
        .write("/proc/diskstats", " 253       0 vda 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0 0 0\n")
        .write("/sys/devices/system/cpu/online", "0-1\n")
        .write("/proc/sys/kernel/pid_max", "4194304\n")
        .write("/proc/sys/kernel/threads-max", "191853\n")
        .write(
            "/proc/1/mountinfo",
            "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
        )
        .write(
            "/var/lib/kubelet/config.yaml",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 10.96.0.10\n",
        )
        .write("/run/xtables.lock", "")
        .mkdir("/var/lib/kubelet/pods")
        .mkdir("/var/lib/docker/containers");
    h
}

fn fake_statfs(_: &std::path::Path) -> std::io::Result<FsUsage> {
    Ok(FsUsage {
        size_bytes: 100 << 30,
        avail_bytes: 60 << 30,
        free_bytes: 60 << 30,
        files: 6_553_600,
        files_free: 6_000_000,
    })
}

/// Runs `collect` on a thread and fails if it takes longer than 20 s (a collector blocked on
/// a FIFO would never return). Returns the collection and how long it took.
fn collect_within(mut c: Box<dyn Collector>, runs: usize) -> (Collection, Duration) {
    let name = c.name();
    let (tx, rx) = mpsc::channel();
    // Named after the test: support::collect keys its golden files by the thread name.
    let test = std::thread::current().name().map(str::to_string);
    let mut spawn = std::thread::Builder::new();
    if let Some(t) = test {
        spawn = spawn.name(t);
    }
    spawn
        .spawn(move || {
            let started = Instant::now();
            let mut out = crate::support::collect(&mut *c, &ctx());
            for _ in 1..runs {
                std::thread::sleep(Duration::from_millis(50));
                out = crate::support::collect(&mut *c, &ctx());
            }
            let _ = tx.send((out, started.elapsed()));
        })
        .expect("spawn a collect thread");
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the {name} collector did not return within 20 s: it blocked"))
}

fn all_collectors(h: &FakeHost) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(LoadCollector::new(h.node(), LoadConfig::default())),
        Box::new(MemoryCollector::new(h.node(), MemoryConfig::default())),
        Box::new(KernelCollector::new(h.node(), KernelConfig::default())),
        Box::new(DiskCollector::new(h.node(), DiskConfig::default()).with_statfs(fake_statfs)),
        Box::new(ConntrackCollector::new(
            h.node(),
            ConntrackConfig::default(),
        )),
        Box::new(IptablesCollector::new(h.node(), IptablesConfig::default())),
    ]
}

fn message(c: &Collection) -> &str {
    c.status.message().unwrap_or("")
}

/// Asserts that `c`'s status is degraded or unavailable and names the refused file and its
/// cap.
fn names_refused(c: &Collection, h: &FakeHost, host_path: &str, cap: usize) {
    assert!(
        matches!(c.status, Status::Degraded(_) | Status::Unavailable(_)),
        "{host_path}: {:?}",
        c.status
    );
    let m = message(c);
    let file = h.path(host_path).display().to_string();
    assert!(
        m.contains(&format!(
            "refusing to read {file}: it is larger than {cap} bytes"
        )),
        "{host_path}: {m}"
    );
    assert!(
        m.len() < 4096,
        "the status carries no file text: {} bytes",
        m.len()
    );
}

#[test]
fn a_200_mb_uptime_degrades_load_and_is_not_parsed() {
    let h = quiet_host();
    // Believable text first: a parser handed the file would find a number.
    h.oversized("/proc/uptime", "86400.00 170000.00\n", HUGE);
    let (c, _) = collect_within(
        Box::new(LoadCollector::new(h.node(), LoadConfig::default())),
        2,
    );
    names_refused(&c, &h, "/proc/uptime", cap::VALUE);
    assert!(message(&c).contains("timing windows with the agent's clock"));
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
}

#[test]
fn a_200_mb_loadavg_makes_load_unavailable_and_kernel_degraded_without_findings() {
    let h = quiet_host();
    // 4,194,000 tasks of a pid_max of 4,194,304: the PID-exhaustion rule would fire if this
    // text were parsed.
    h.oversized("/proc/loadavg", "0.12 0.10 0.05 1/4194000 21971\n", HUGE);
    let (load, _) = collect_within(
        Box::new(LoadCollector::new(h.node(), LoadConfig::default())),
        1,
    );
    assert!(
        matches!(load.status, Status::Unavailable(_)),
        "{:?}",
        load.status
    );
    names_refused(&load, &h, "/proc/loadavg", cap::VALUE);
    assert!(load.findings.is_empty());
    let (kernel, _) = collect_within(
        Box::new(KernelCollector::new(h.node(), KernelConfig::default())),
        1,
    );
    names_refused(&kernel, &h, "/proc/loadavg", cap::VALUE);
    assert!(message(&kernel).contains("PID use is not judged"));
    assert!(
        kernel
            .findings
            .iter()
            .all(|f| f.id != "kernel.pid_exhaustion"),
        "{:#?}",
        kernel.findings
    );
    assert!(kernel
        .metrics
        .iter()
        .all(|m| m.name != "node_doctor_kernel_pids"));
}

#[test]
fn an_oversized_proc_stat_makes_load_unavailable() {
    let h = quiet_host();
    h.oversized(
        "/proc/stat",
        "cpu  1000 0 500 100000 10 0 5 0 0 0\nprocs_blocked 4000\n",
        cap::PER_CPU_TABLE as u64 + 1,
    );
    let (load, _) = collect_within(
        Box::new(LoadCollector::new(h.node(), LoadConfig::default())),
        1,
    );
    assert!(matches!(load.status, Status::Unavailable(_)));
    names_refused(&load, &h, "/proc/stat", cap::PER_CPU_TABLE);
    let (kernel, _) = collect_within(
        Box::new(KernelCollector::new(h.node(), KernelConfig::default())),
        1,
    );
    names_refused(&kernel, &h, "/proc/stat", cap::PER_CPU_TABLE);
    assert!(message(&kernel).contains("blocked tasks are not counted"));
}

#[test]
fn an_oversized_buddyinfo_degrades_memory_without_a_fragmentation_finding() {
    let h = quiet_host();
    // The handbook's fragmented zone first: parsed, it would be a finding.
    h.oversized(
        "/proc/buddyinfo",
        "Node 0, zone Normal 1163 1101 932 222 0 0 0 0 0 0 0\n",
        HUGE,
    );
    let (c, _) = collect_within(
        Box::new(MemoryCollector::new(h.node(), MemoryConfig::default())),
        1,
    );
    names_refused(&c, &h, "/proc/buddyinfo", cap::COUNTERS);
    assert!(
        c.findings.iter().all(|f| f.id != "memory.fragmentation"),
        "{:#?}",
        c.findings
    );
}

#[test]
fn an_oversized_mountinfo_and_kubelet_config_degrade_disk() {
    let h = quiet_host();
    h.oversized(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
        cap::MOUNTINFO as u64 + 1,
    );
    h.oversized(
        "/var/lib/kubelet/config.yaml",
        "evictionHard:\n  nodefs.available: \"99%\"\n",
        HUGE,
    );
    let (c, _) = collect_within(
        Box::new(DiskCollector::new(h.node(), DiskConfig::default()).with_statfs(fake_statfs)),
        1,
    );
    names_refused(&c, &h, "/proc/1/mountinfo", cap::MOUNTINFO);
    names_refused(&c, &h, "/var/lib/kubelet/config.yaml", cap::CONFIG);
    // A 99% eviction threshold read from the refused file would make every disk "full".
    assert!(
        c.findings.iter().all(|f| f.id != "disk.filesystem_full"),
        "{:#?}",
        c.findings
    );
}

#[test]
fn a_parse_error_quotes_no_more_than_a_few_hundred_bytes_of_host_text() {
    // Within its cap but garbage: the parse error is reported, cut short.
    let h = quiet_host();
    h.write("/proc/uptime", "9".repeat(cap::VALUE));
    let (c, _) = collect_within(
        Box::new(LoadCollector::new(h.node(), LoadConfig::default())),
        1,
    );
    let m = message(&c);
    assert!(
        m.contains("cannot parse") && m.contains("…[truncated "),
        "{m}"
    );
    assert!(m.len() < 1024, "{} bytes", m.len());
}

/// Every file the collectors read, replaced by a FIFO with no writer: a blocking `open` of
/// any of them would hang the collector forever.
const FIFO_PLACES: &[&str] = &[
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/stat",
    "/proc/meminfo",
    "/proc/vmstat",
    "/proc/buddyinfo",
    "/proc/diskstats",
    "/proc/pressure/cpu",
    "/proc/pressure/io",
    "/proc/pressure/memory",
    "/proc/locks",
    "/proc/sys/kernel/pid_max",
    "/proc/sys/kernel/threads-max",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/net/netfilter/nf_conntrack_max",
    "/proc/sys/net/netfilter/nf_conntrack_buckets",
    "/proc/net/ip_tables_names",
    "/proc/1/mountinfo",
    "/proc/1/net/netstat",
    "/proc/1/net/snmp",
    "/proc/1/net/udp",
    "/proc/1/net/stat/nf_conntrack",
    "/proc/42/stat",
    "/proc/42/comm",
    "/proc/42/cmdline",
    "/proc/42/io",
    "/proc/42/cgroup",
    "/sys/devices/system/cpu/online",
    "/dev/kmsg",
    "/etc/docker/daemon.json",
    "/etc/containerd/config.toml",
    "/var/lib/kubelet/config.yaml",
    KUBE_PROXY_LOG,
];

/// kube-proxy's CRI log, which the iptables collector follows incrementally.
const KUBE_PROXY_LOG: &str =
    "/var/log/pods/kube-system_kube-proxy-x7k2p_9a8b7c6d-1111-2222-3333-444455556666/kube-proxy/0.log";

#[test]
fn fifos_where_files_are_expected_block_no_collector() {
    let h = quiet_host();
    // A legacy table: the lock sampler reads /proc/locks at start (and meets the FIFO).
    h.write("/proc/1/net/ip_tables_names", "filter\n");
    for p in FIFO_PLACES {
        h.fifo(p);
    }
    let mut all = Vec::new();
    for c in all_collectors(&h) {
        let name = c.name();
        let (out, took) = collect_within(c, 1);
        println!(
            "{name}: {} in {took:?}: {}",
            out.status.as_str(),
            message(&out)
        );
        all.push((name, out));
    }
    let status = |n: &str| &all.iter().find(|(name, _)| *name == n).unwrap().1;
    // The readers name what they refused.
    let fifo = |p: &str| format!("refusing to read {}: it is a FIFO", h.path(p).display());
    let load = status("load");
    assert!(matches!(load.status, Status::Unavailable(_)));
    assert!(
        message(load).contains(&fifo("/proc/stat")),
        "{}",
        message(load)
    );
    let memory = status("memory");
    assert!(
        message(memory).contains(&fifo("/proc/buddyinfo")),
        "{}",
        message(memory)
    );
    let kernel = status("kernel");
    assert!(
        message(kernel).contains(&fifo("/proc/loadavg")),
        "{}",
        message(kernel)
    );
    let disk = status("disk");
    assert!(
        message(disk).contains(&fifo("/etc/docker/daemon.json"))
            || message(disk).contains(&fifo("/var/lib/kubelet/config.yaml")),
        "{}",
        message(disk)
    );
    let conntrack = status("conntrack");
    assert!(matches!(conntrack.status, Status::Unavailable(_)));
    assert!(
        message(conntrack).contains(&fifo("/proc/1/net/stat/nf_conntrack")),
        "{}",
        message(conntrack)
    );
    let iptables = status("iptables");
    assert!(
        message(iptables).contains(&fifo("/proc/locks")),
        "{}",
        message(iptables)
    );
    // kube-proxy's log, read incrementally: refused the same way.
    assert!(
        message(iptables).contains(&fifo(KUBE_PROXY_LOG)),
        "{}",
        message(iptables)
    );
    // Nothing but the iptables backend's info (the legacy table staged above).
    for (_, c) in &all {
        assert!(
            c.findings.iter().all(|f| f.id == "iptables.backend"),
            "{:#?}",
            c.findings
        );
    }
}
