//! The tables collector on fake hosts: `/proc/sys/fs/file-nr`, a daemon's `limits` and `fd`
//! directory, `/proc/1/net/stat/arp_cache` and `ndisc_cache` in the real kernel's format
//! (6.18's header, one hex line per CPU), `/proc/1/net/sockstat`, the sysctls, and the
//! kernel-log lines in their wordings; then this VM's real files and a real process that
//! holds many descriptors under a low `RLIMIT_NOFILE`.

use collectors::tables::{TablesCollector, TablesConfig};
use collectors::{
    CollectContext, Collection, Collector, Finding, HostNetns, HostPaths, Severity, Status,
};

use crate::support::{self, FakeHost};

/// Uptime of every staged host: 2 h, so a record at 7100 s is 100 s old (recent) and one at
/// 4000 s is 3200 s old (past the 900 s decay, inside the 1 h lookback).
const UPTIME: &str = "7200.00 14000.00\n";

const ARP_HEADER: &str = "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n";

/// A neighbour stat file of two CPUs in 6.18's format: `entries` on each line,
/// `forced_gc_runs` and `table_fulls` split over the CPUs.
fn neigh_stat(entries: u64, forced: u64, fulls: u64) -> String {
    let line = |f: u64, t: u64| {
        format!("{entries:08x} 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         000005c7         {f:08x}       00000000            {t:08x}\n")
    };
    format!(
        "{ARP_HEADER}{}{}",
        line(forced / 2, fulls / 2),
        line(forced - forced / 2, fulls - fulls / 2)
    )
}

/// A healthy host: this VM's figures.
fn host() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", UPTIME)
        .write("/proc/sys/fs/file-nr", "205\t0\t2470938\n")
        .write("/proc/sys/fs/nr_open", "1048576\n")
        .write("/proc/1/net/stat/arp_cache", neigh_stat(2, 0, 0))
        .write("/proc/1/net/stat/ndisc_cache", neigh_stat(4, 0, 0))
        .write(
            "/proc/1/net/sockstat",
            "sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\nUDP: inuse 0 mem 0\n",
        )
        .write("/proc/1/net/sockstat6", "TCP6: inuse 0\nUDP6: inuse 0\n")
        .write("/proc/sys/net/ipv4/tcp_mem", "288459\t384612\t576918\n")
        .write("/proc/sys/net/ipv4/tcp_max_orphans", "131072\n")
        .write("/dev/kmsg", "");
    for fam in ["ipv4", "ipv6"] {
        for (i, v) in [128, 512, 1024].iter().enumerate() {
            h.write(
                &format!("/proc/sys/net/{fam}/neigh/default/gc_thresh{}", i + 1),
                format!("{v}\n"),
            );
        }
    }
    h
}

/// Kernel-log records in `/dev/kmsg` format, `(usec, message)`.
fn kmsg(records: &[(u64, &str)]) -> String {
    records
        .iter()
        .enumerate()
        .map(|(i, (usec, m))| format!("4,{},{usec},-;{m}\n", 100 + i))
        .collect()
}

fn stat_line(pid: u32, comm: &str) -> String {
    format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 10 0 0 0 20 0 12 0 500 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
}

/// A process with `fds` descriptors (files in its `fd` directory), its soft and hard
/// `RLIMIT_NOFILE` and descriptor-table size.
fn process(h: &FakeHost, pid: u32, comm: &str, fds: u32, soft: u64, table: u64) {
    h.write(&format!("/proc/{pid}/comm"), format!("{comm}\n"))
        .write(&format!("/proc/{pid}/stat"), stat_line(pid, comm))
        .write(&format!("/proc/{pid}/cmdline"), format!("/usr/bin/{comm}\0"))
        .write(
            &format!("/proc/{pid}/limits"),
            format!("Limit                     Soft Limit           Hard Limit           Units     \nMax open files            {soft:<20} 524288               files     \n"),
        )
        .write(
            &format!("/proc/{pid}/status"),
            format!("Name:\t{comm}\nFDSize:\t{table}\n"),
        )
        .mkdir(&format!("/proc/{pid}/fd"));
    for fd in 0..fds {
        h.write(&format!("/proc/{pid}/fd/{fd}"), "");
    }
}

fn collector(h: &FakeHost) -> TablesCollector {
    TablesCollector::new(h.node(), TablesConfig::default())
}

fn find<'a>(c: &'a Collection, id: &str, subject: &str) -> &'a Finding {
    c.findings
        .iter()
        .find(|f| f.id == id && f.subject == subject)
        .unwrap_or_else(|| panic!("no {id} {subject} in {:#?}", c.findings))
}

fn num(f: &Finding, name: &str) -> f64 {
    f.evidence[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} in {:?}", f.evidence))
}

fn source_url(f: &Finding) -> String {
    let s = f.remediation.source.as_ref().expect("a source");
    s.url.unwrap_or_default().to_string()
}

#[test]
fn a_healthy_host_is_quiet() {
    let h = host();
    let c = support::collect(&mut collector(&h), &support::ctx());
    assert_eq!(c.status, Status::Ok);
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    let m = support::find_metric(
        &c,
        "node_doctor_tables_neighbour_entries",
        &[("family", "ipv4")],
    )
    .expect("entries metric");
    assert_eq!(m.value, 2.0);
    assert!(support::find_metric(
        &c,
        "node_doctor_tables_tcp_mem_limit_pages",
        &[("level", "max")]
    )
    .is_some());
    // No process was listed: nothing on the node is high.
    assert!(!c
        .findings
        .iter()
        .any(|f| f.evidence.contains_key("top_holders")));
}

#[test]
fn file_nr_at_95_percent_of_file_max_is_critical_and_names_the_holders() {
    let h = host();
    h.write("/proc/sys/fs/file-nr", "950000\t0\t1000000\n");
    process(&h, 4242, "leaky-app", 40, 1 << 20, 64);
    process(&h, 77, "sshd", 5, 1024, 64);
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.file_handles", "file-max");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "allocated_handles"), 950000.0);
    assert_eq!(num(f, "file_max"), 1000000.0);
    assert_eq!(num(f, "used_percent"), 95.0);
    assert_eq!(
        f.evidence["top_holders"].as_str(),
        Some("leaky-app (pid 4242) 40, sshd (pid 77) 5")
    );
    assert!(
        f.summary.en.contains("fails with ENFILE"),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps[0].en.contains("almost always a leak"));
    let cmds = &f.remediation.commands;
    assert!(
        cmds.iter().any(|c| c == "ls /proc/4242/fd | wc -l"),
        "{cmds:?}"
    );
    assert!(
        cmds.iter().any(|c| c == "sysctl -w fs.file-max=2097152"),
        "{cmds:?}"
    );
    assert!(source_url(f).contains("sysctl/fs.html"));
}

#[test]
fn a_runtime_near_its_rlimit_nofile_is_critical() {
    let h = host();
    // containerd with 1000 of 1024 descriptors (its unit left the default soft limit).
    process(&h, 812, "containerd", 1000, 1024, 1024);
    // The kubelet far below its limit: its table is not listed.
    process(&h, 900, "kubelet", 50, 1 << 20, 64);
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.daemon_file_limit", "containerd");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "pid"), 812.0);
    assert_eq!(num(f, "open_fds"), 1000.0);
    assert_eq!(num(f, "soft_limit"), 1024.0);
    assert_eq!(num(f, "hard_limit"), 524288.0);
    assert!(
        f.summary.en.contains("fail with EMFILE"),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps[1].en.contains("LimitNOFILE=1048576"));
    let cmds = &f.remediation.commands;
    assert!(
        cmds.iter()
            .any(|c| c == "prlimit --pid 812 --nofile=1048576:1048576"),
        "{cmds:?}"
    );
    assert!(cmds
        .iter()
        .any(|c| c == "systemctl show containerd -p LimitNOFILE"));
    assert_eq!(c.findings.len(), 1, "{:#?}", c.findings);
    let open = support::find_metric(
        &c,
        "node_doctor_tables_daemon_open_fds",
        &[("daemon", "kubelet")],
    )
    .expect("kubelet metric");
    // The kubelet's table size stands for its count: an upper bound far below its limit.
    assert_eq!(open.value, 64.0);
}

#[test]
fn arp_entries_at_gc_thresh3_with_overflow_lines_is_critical_with_sized_advice() {
    let h = host();
    h.write("/proc/1/net/stat/arp_cache", neigh_stat(1024, 40, 10));
    let mut c = collector(&h);
    let first = support::collect(&mut c, &support::ctx());
    let f = find(&first, "tables.neighbour_table", "ipv4");
    assert_eq!(f.severity, Severity::Critical);
    // The kernel refuses more entries between the two samples, and logs it (6.x wording).
    h.write("/proc/1/net/stat/arp_cache", neigh_stat(1024, 52, 47))
        .write(
            "/dev/kmsg",
            kmsg(&[
                (
                    7_100_000_000,
                    "neighbour: arp_cache: neighbor table overflow!",
                ),
                (7_101_000_000, "arp_cache: neighbor table overflow!"),
            ]),
        );
    let second = support::collect(&mut c, &support::ctx());
    let f = find(&second, "tables.neighbour_table", "ipv4");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "entries"), 1024.0);
    assert_eq!(num(f, "gc_thresh3"), 1024.0);
    assert_eq!(num(f, "table_fulls_increase"), 37.0);
    assert_eq!(num(f, "forced_gc_increase"), 12.0);
    assert!(
        f.summary.en.contains("refused 37 new entries"),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps[0].en.contains("flat networks"));
    let cmds = &f.remediation.commands;
    assert!(
        cmds.iter().any(|c| c == "sysctl -w net.ipv4.neigh.default.gc_thresh1=256 net.ipv4.neigh.default.gc_thresh2=1024 net.ipv4.neigh.default.gc_thresh3=2048"),
        "{cmds:?}"
    );
    assert!(source_url(f).contains("ip-sysctl"));
    let k = find(&second, "tables.kernel_table_full", "neighbour-ipv4");
    assert_eq!(k.severity, Severity::Critical);
    assert_eq!(num(k, "messages"), 2.0);
    assert_eq!(k.evidence["phase"].as_str(), Some("ongoing"));
    assert!(k.summary.en.contains("neighbor table overflow!"));
    let m = support::find_metric(
        &second,
        "node_doctor_tables_kernel_lines_total",
        &[("table", "neighbour-ipv4")],
    )
    .expect("lines metric");
    assert_eq!(m.value, 2.0);
}

#[test]
fn ipv6_ndisc_near_gc_thresh3_warns_and_its_old_overflow_line_is_recent() {
    let h = host();
    h.write("/proc/1/net/stat/ndisc_cache", neigh_stat(1000, 3, 0))
        .write(
            "/dev/kmsg",
            kmsg(&[(7_100_000_000, "ndisc_cache: neighbor table overflow!")]),
        );
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.neighbour_table", "ipv6");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "entries"), 1000.0);
    assert_eq!(f.evidence["table"].as_str(), Some("ndisc_cache"));
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c.starts_with("sysctl -w net.ipv6.neigh.default.gc_thresh1=256 ")));
    let k = find(&c, "tables.kernel_table_full", "neighbour-ipv6");
    // 1000 < 1024 and nothing refused: not ongoing; the line is 100 s old.
    assert_eq!(k.severity, Severity::Warning);
    assert_eq!(k.evidence["phase"].as_str(), Some("recent"));
    assert_eq!(num(k, "last_seen_seconds_ago"), 100.0);
}

#[test]
fn tcp_memory_above_its_high_mark_with_the_kernel_line_is_critical() {
    let h = host();
    h.write(
        "/proc/1/net/sockstat",
        "sockets: used 48300\nTCP: inuse 48211 orphan 120 tw 3100 alloc 48300 mem 590112\n",
    )
    .write(
        "/dev/kmsg",
        kmsg(&[(
            7_150_000_000,
            "TCP: out of memory -- consider tuning tcp_mem",
        )]),
    );
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.tcp_memory", "tcp_mem");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "mem_pages"), 590112.0);
    assert_eq!(num(f, "mem_bytes"), 590112.0 * 4096.0);
    assert_eq!(num(f, "tcp_mem_max"), 576918.0);
    assert!(f.summary.en.contains("refuses buffers"), "{}", f.summary.en);
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "sysctl -w 'net.ipv4.tcp_mem=288459 769224 1153836'"));
    let k = find(&c, "tables.kernel_table_full", "tcp-memory");
    assert_eq!(k.severity, Severity::Critical);
    assert!(k.title.en.contains("ran out of TCP memory"));
    assert!(source_url(k).contains("ip-sysctl"));
}

#[test]
fn orphans_past_half_of_tcp_max_orphans_are_critical_and_an_old_line_is_history() {
    let h = host();
    h.write(
        "/proc/1/net/sockstat",
        "TCP: inuse 9000 orphan 70000 tw 20000 alloc 79000 mem 4000\n",
    )
    .write(
        "/dev/kmsg",
        kmsg(&[(4_000_000_000, "TCP: too many orphaned sockets")]),
    );
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.tcp_orphans", "tcp_max_orphans");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "orphans"), 70000.0);
    assert_eq!(num(f, "max_orphans"), 131072.0);
    assert!(f.summary.en.contains("resets the orphans it penalises"));
    assert!(f.remediation.steps[1].en.contains("tcp_orphan_retries"));
    // 70000 x 4 > 131072: the kernel still resets orphans, so the line is ongoing.
    let k = find(&c, "tables.kernel_table_full", "tcp-orphans");
    assert_eq!(k.severity, Severity::Critical);
    // Fewer orphans now: the 3200 s old line is history.
    h.write(
        "/proc/1/net/sockstat",
        "TCP: inuse 9000 orphan 10 tw 20000 alloc 79000 mem 4000\n",
    );
    let c = support::collect(&mut collector(&h), &support::ctx());
    let k = find(&c, "tables.kernel_table_full", "tcp-orphans");
    assert_eq!(k.severity, Severity::Info);
    assert!(!c.findings.iter().any(|f| f.id == "tables.tcp_orphans"));
}

#[test]
fn a_raised_level_holds_down_to_its_clear_bar() {
    let h = host();
    h.write("/proc/sys/fs/file-nr", "850000\t0\t1000000\n");
    let mut c = collector(&h);
    let first = support::collect(&mut c, &support::ctx());
    assert_eq!(
        find(&first, "tables.file_handles", "file-max").severity,
        Severity::Warning
    );
    // 78 %: below the raise bar (80 %) but above the clear bar (75 %): still raised.
    h.write("/proc/sys/fs/file-nr", "780000\t0\t1000000\n");
    let second = support::collect(&mut c, &support::ctx());
    assert_eq!(
        find(&second, "tables.file_handles", "file-max").severity,
        Severity::Warning
    );
    h.write("/proc/sys/fs/file-nr", "740000\t0\t1000000\n");
    let third = support::collect(&mut c, &support::ctx());
    assert!(third.findings.is_empty(), "{:#?}", third.findings);
    // A fresh collector at 78 % raises nothing.
    h.write("/proc/sys/fs/file-nr", "780000\t0\t1000000\n");
    assert!(support::collect(&mut collector(&h), &support::ctx())
        .findings
        .is_empty());
}

#[test]
fn outside_the_host_network_namespace_the_limits_are_not_judged() {
    let h = host();
    h.write("/proc/1/net/stat/arp_cache", neigh_stat(5000, 0, 0));
    let ctx = CollectContext::new("node-1", HostNetns::Different);
    let c = support::collect(&mut collector(&h), &ctx);
    let Status::Degraded(why) = &c.status else {
        panic!("{:?}", c.status)
    };
    assert!(why.contains("hostNetwork"), "{why}");
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
}

#[test]
fn a_nested_node_without_the_initial_namespaces_files_is_complete_with_a_note() {
    // A kind node: pid 1 is in a network namespace of its own, so there is no neighbour
    // statistics file and none of the initial namespace's sysctls.
    let h = host();
    for f in [
        "/proc/1/net/stat/arp_cache",
        "/proc/1/net/stat/ndisc_cache",
        "/proc/sys/net/ipv4/tcp_mem",
        "/proc/sys/net/ipv4/tcp_max_orphans",
    ] {
        std::fs::remove_file(h.path(f)).unwrap();
    }
    std::fs::remove_dir_all(h.path("/proc/sys/net/ipv4/neigh")).unwrap();
    let c = support::collect(&mut collector(&h), &support::ctx());
    let Status::Noted(why) = &c.status else {
        panic!("{:?}", c.status)
    };
    assert!(
        why.contains("not the kernel's initial network namespace"),
        "{why}"
    );
    assert!(c.status.is_complete());
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
}

#[test]
fn a_hostile_process_name_stays_in_the_evidence_never_in_a_command() {
    let h = host();
    h.write("/proc/sys/fs/file-nr", "950000\t0\t1000000\n");
    process(&h, 31337, "$(reboot)\u{1b}[2J", 30, 1 << 20, 64);
    let c = support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "tables.file_handles", "file-max");
    assert!(f.evidence["top_holders"]
        .as_str()
        .unwrap()
        .contains("$(reboot)"));
    for cmd in &f.remediation.commands {
        assert!(!cmd.contains("reboot") && !cmd.contains('\u{1b}'), "{cmd}");
    }
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "ls /proc/31337/fd | wc -l"));
}

#[test]
fn missing_sources_are_named() {
    let h = FakeHost::new();
    h.write("/dev/kmsg", "");
    let c = collector(&h).collect(&support::ctx());
    let Status::Unavailable(why) = &c.status else {
        panic!("{:?}", c.status)
    };
    assert!(why.contains("file-nr") && why.contains("sockstat"), "{why}");
}

// ------------------------------------------------------------------ real kernel

/// Whether this test runs in the kernel's initial network namespace: on 6.18 only it has the
/// neighbour tables' statistics (`/proc/net/stat/arp_cache`), `tcp_mem` and `neigh/default`.
fn initial_netns() -> bool {
    std::path::Path::new("/proc/self/net/stat/arp_cache").exists()
}

/// This VM's kernel files as the test reads them itself, keyed as the tables collector's
/// metrics are (`name` or `name{label=value,...}`): file-nr, nr_open, the neighbour tables
/// through pid 1, `sockstat` through pid 1 and the host namespace's sysctls. A file that is
/// absent here (no IPv6, not the initial network namespace) leaves its keys out.
fn kernel_tables() -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let num = |w: &str| -> f64 { w.trim().parse::<u64>().map_or(f64::NAN, |v| v as f64) };
    if let Some(t) = read("/proc/sys/fs/file-nr") {
        let w: Vec<&str> = t.split_whitespace().collect();
        out.insert(
            "node_doctor_tables_file_handles_allocated".into(),
            num(w[0]),
        );
        out.insert("node_doctor_tables_file_handles_max".into(), num(w[2]));
    }
    if let Some(t) = read("/proc/sys/fs/nr_open") {
        out.insert("node_doctor_tables_nr_open".into(), num(&t));
    }
    for (fam, table) in [("ipv4", "arp_cache"), ("ipv6", "ndisc_cache")] {
        let Some(t) = read(&format!("/proc/1/net/stat/{table}")) else {
            continue;
        };
        let mut lines = t.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
        let rows: Vec<Vec<u64>> = lines
            .map(|l| {
                l.split_whitespace()
                    .map(|h| u64::from_str_radix(h, 16).unwrap_or(u64::MAX))
                    .collect()
            })
            .collect();
        let col = |n: &str| header.iter().position(|c| *c == n).unwrap();
        let sum = |n: &str| rows.iter().map(|r| r[col(n)]).sum::<u64>() as f64;
        let key = |n: &str| format!("node_doctor_tables_{n}{{family={fam}}}");
        out.insert(key("neighbour_entries"), rows[0][col("entries")] as f64);
        out.insert(key("neighbour_table_fulls_total"), sum("table_fulls"));
        out.insert(key("neighbour_forced_gc_runs_total"), sum("forced_gc_runs"));
        for level in 1..=3 {
            let p = format!("/proc/sys/net/{fam}/neigh/default/gc_thresh{level}");
            if let Some(v) = read(&p) {
                out.insert(
                    format!("node_doctor_tables_neighbour_gc_thresh{{family={fam},level={level}}}"),
                    num(&v),
                );
            }
        }
    }
    if let Some(t) = read("/proc/1/net/sockstat") {
        let tcp: Vec<&str> = t
            .lines()
            .find_map(|l| l.strip_prefix("TCP:"))
            .unwrap_or("")
            .split_whitespace()
            .collect();
        for pair in tcp.chunks(2) {
            let name = match pair[0] {
                "mem" => "tcp_memory_pages",
                "orphan" => "tcp_orphans",
                _ => continue,
            };
            out.insert(format!("node_doctor_tables_{name}"), num(pair[1]));
        }
    }
    if let Some(t) = read("/proc/sys/net/ipv4/tcp_mem") {
        for (level, v) in ["min", "pressure", "max"].iter().zip(t.split_whitespace()) {
            out.insert(
                format!("node_doctor_tables_tcp_mem_limit_pages{{level={level}}}"),
                num(v),
            );
        }
    }
    if let Some(t) = read("/proc/sys/net/ipv4/tcp_max_orphans") {
        out.insert("node_doctor_tables_tcp_max_orphans".into(), num(&t));
    }
    out
}

/// `file-nr`'s allocated handles counts the files open while it is read: the reader's own
/// (the collector holds a directory or another file of its run open; the test's read holds
/// just `file-nr`), so the two reads of an unchanged kernel differ by those few.
fn assert_allocated_near(got: f64, kernel: Option<f64>) {
    let Some(k) = kernel else {
        panic!("the test could not read /proc/sys/fs/file-nr");
    };
    assert!(
        (got - k).abs() <= 8.0,
        "file-nr's allocated: the reader says {got}, the kernel {k} (within 8 of the reader's own open files)"
    );
}

/// Runs `run` between two reads of [`kernel_tables`] until a run that no change of the
/// kernel's figures fell into (this busy VM opens and closes files and sockets all the time):
/// the figures the run must have seen, and its result.
fn with_still_kernel<T>(
    mut run: impl FnMut() -> T,
) -> (std::collections::BTreeMap<String, f64>, T) {
    for _ in 0..100 {
        let before = kernel_tables();
        let got = run();
        if kernel_tables() == before {
            return (before, got);
        }
    }
    panic!("the kernel's table figures changed during each of 100 runs");
}

/// This VM's own files parse to the figures the test reads from them itself: `file-nr`,
/// `nr_open`, `arp_cache`, `ndisc_cache`, `sockstat`, `tcp_mem`, `gc_thresh*` and this
/// process's `limits`.
#[test]
fn real_kernel_files_parse() {
    use collectors::proc::{file_nr, limits, neigh_stat, sockstat};
    let host = HostPaths::new("/");
    let (kernel, got) = with_still_kernel(|| {
        let f = file_nr::read(&host).expect("file-nr");
        let nr_open = file_nr::read_value(&host, "nr_open").expect("nr_open");
        let arp = neigh_stat::read(&host, "arp_cache").expect("arp_cache through pid 1");
        let ndisc = neigh_stat::read(&host, "ndisc_cache").ok();
        let t = sockstat::read(&host).expect("sockstat");
        (f, nr_open, arp, ndisc, t)
    });
    let (f, nr_open, arp, ndisc, t) = got;
    let k = |key: &str| kernel.get(key).copied();
    assert_allocated_near(
        f.allocated as f64,
        k("node_doctor_tables_file_handles_allocated"),
    );
    assert_eq!(
        Some(f.max as f64),
        k("node_doctor_tables_file_handles_max"),
        "{f:?}"
    );
    assert_eq!(Some(nr_open as f64), k("node_doctor_tables_nr_open"));
    let cpus = std::fs::read_to_string("/proc/1/net/stat/arp_cache")
        .unwrap()
        .lines()
        .count()
        - 1;
    assert_eq!(arp.cpus, cpus, "one line per possible CPU");
    for (fam, stat) in [("ipv4", Some(arp)), ("ipv6", ndisc)] {
        let key = |n: &str| k(&format!("node_doctor_tables_{n}{{family={fam}}}"));
        let Some(stat) = stat else {
            assert_eq!(
                key("neighbour_entries"),
                None,
                "ndisc_cache is there: must parse"
            );
            continue;
        };
        assert_eq!(
            Some(stat.entries as f64),
            key("neighbour_entries"),
            "{stat:?}"
        );
        assert_eq!(
            stat.table_fulls.map(|v| v as f64),
            key("neighbour_table_fulls_total")
        );
        assert_eq!(
            stat.forced_gc_runs.map(|v| v as f64),
            key("neighbour_forced_gc_runs_total")
        );
    }
    assert_eq!(
        t.mem_pages.map(|v| v as f64),
        k("node_doctor_tables_tcp_memory_pages"),
        "{t:?}"
    );
    assert_eq!(
        t.orphan.map(|v| v as f64),
        k("node_doctor_tables_tcp_orphans"),
        "{t:?}"
    );
    if initial_netns() {
        let mem = sockstat::read_tcp_mem(&host).expect("tcp_mem");
        let levels = ["min", "pressure", "max"].map(|l| {
            k(&format!(
                "node_doctor_tables_tcp_mem_limit_pages{{level={l}}}"
            ))
        });
        assert_eq!(mem.map(|v| Some(v as f64)), levels);
        let g = neigh_stat::read_gc_thresh(&host, "ipv4").expect("gc_thresh");
        let levels = [1, 2, 3].map(|l| {
            k(&format!(
                "node_doctor_tables_neighbour_gc_thresh{{family=ipv4,level={l}}}"
            ))
        });
        assert_eq!(g.map(|v| Some(v as f64)), levels);
    } else {
        // A network namespace of its own (test.sh's fresh-netns run): this kernel (6.18) has
        // no tcp_mem and no neigh/default there, and the readers say so.
        assert!(sockstat::read_tcp_mem(&host).is_err());
        assert!(neigh_stat::read_gc_thresh(&host, "ipv4").is_err());
        eprintln!("real_kernel_files_parse: tcp_mem and gc_thresh* not read: not the initial network namespace");
    }
    let me = limits::read(&host, std::process::id()).expect("own limits");
    let line = std::fs::read_to_string("/proc/self/limits").unwrap();
    let words: Vec<&str> = line
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    let limit = |w: &str| w.parse::<u64>().ok();
    assert_eq!(
        (me.soft, me.hard),
        (limit(words[3]), limit(words[4])),
        "{line}"
    );
}

/// This VM is healthy: the real collector raises nothing, and its metrics are the figures
/// the test reads from the kernel's files itself.
#[test]
fn real_kernel_this_host_is_quiet() {
    let mut c = TablesCollector::new(
        collectors::Node::new(HostPaths::new("/")),
        TablesConfig::default(),
    );
    let ctx = CollectContext::new("node-1", HostNetns::Same);
    let initial = initial_netns();
    for _ in 0..2 {
        let (kernel, out) = with_still_kernel(|| c.collect(&ctx));
        if initial {
            assert!(
                matches!(out.status, Status::Ok | Status::Degraded(_)),
                "{:?}",
                out.status
            );
        } else {
            // test.sh's fresh-netns run: the global limits are not in this namespace.
            assert!(
                matches!(&out.status, Status::Noted(m) if m.contains("not the kernel's initial network namespace")),
                "{:?}",
                out.status
            );
        }
        let reported: std::collections::BTreeMap<String, f64> = out
            .metrics
            .iter()
            .filter(|m| m.name.starts_with("node_doctor_tables_"))
            .filter(|m| !m.name.contains("daemon") && !m.name.contains("kernel_lines"))
            .map(|m| {
                let labels: Vec<String> =
                    m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let key = if labels.is_empty() {
                    m.name.clone()
                } else {
                    format!("{}{{{}}}", m.name, labels.join(","))
                };
                (key, m.value)
            })
            .collect();
        let allocated = "node_doctor_tables_file_handles_allocated";
        let mut reported = reported;
        match (reported.remove(allocated), kernel.get(allocated).copied()) {
            (None, None) => {}
            (got, k) => assert_allocated_near(got.unwrap_or(f64::NAN), k),
        }
        let mut kernel = kernel;
        kernel.remove(allocated);
        assert_eq!(reported, kernel);
        let loud: Vec<_> = out
            .findings
            .iter()
            .filter(|f| f.severity != Severity::Info)
            .collect();
        assert!(loud.is_empty(), "{loud:#?}");
    }
}

/// A real process named `containerd` (a copy of `sleep`) started by bash with
/// `ulimit -n 64` and 58 descriptors opened before `exec`: in a fake root whose
/// `proc/sys/fs/file-nr` is staged at 95 % and whose `proc/<pid>` is the real process's
/// directory (a symlink to `/proc/<pid>`; the host's real file-nr cannot be pushed that high
/// safely), the holder scan names it and the daemon rule sees it near its limit.
#[test]
fn real_kernel_a_process_near_its_rlimit_nofile_is_seen() {
    let test = "real_kernel_a_process_near_its_rlimit_nofile_is_seen";
    if !support::root_or_skip(test) {
        return;
    }
    let Ok(sleep) = which("sleep") else {
        collectors::skip!("SKIP {test}: no sleep binary");
        return;
    };
    if which("bash").is_err() {
        collectors::skip!("SKIP {test}: no bash");
        return;
    }
    let bin = tempfile::tempdir().unwrap();
    let daemon = bin.path().join("containerd");
    std::fs::copy(&sleep, &daemon).unwrap();
    let script = format!(
        "ulimit -n 64 && for i in $(seq 3 60); do eval \"exec $i</dev/null\"; done && exec {} 30",
        daemon.display()
    );
    let child = std::process::Command::new("bash")
        .args(["-c", &script])
        .spawn()
        .expect("spawn bash");
    let guard = Child(child);
    let pid = guard.0.id();
    // Wait for the exec (its comm becomes containerd) with its descriptors open.
    let comm = format!("/proc/{pid}/comm");
    let mut ready = false;
    for _ in 0..200 {
        if std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "containerd")
            && std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| d.count() >= 61)
        {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(ready, "the child did not exec with its descriptors");
    // 0-2 and 3-60, plus any descriptor the test harness let it inherit; counted before and
    // after the collector's run, and the run taken again if the two differ (the fresh-netns
    // run once saw the child's count move by one while other tests spawned children).
    let count = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let h = host();
    h.write("/proc/sys/fs/file-nr", "950000\t0\t1000000\n")
        .symlink(&format!("/proc/{pid}"), &format!("/proc/{pid}"));
    let (open, out) = (0..5)
        .find_map(|_| {
            let before = count();
            let out = collector(&h).collect(&support::ctx());
            (count() == before).then_some((before, out))
        })
        .expect("the child's descriptors kept changing");
    let f = find(&out, "tables.file_handles", "file-max");
    let holders = f.evidence["top_holders"].as_str().unwrap();
    assert!(
        holders.starts_with(&format!("containerd (pid {pid}) {open}")),
        "{holders}: the test counted {open} descriptors"
    );
    let d = find(&out, "tables.daemon_file_limit", "containerd");
    assert_eq!(d.severity, Severity::Critical);
    assert_eq!(num(d, "pid"), pid as f64);
    assert_eq!(num(d, "open_fds"), open as f64);
    assert_eq!(num(d, "soft_limit"), 64.0);
    drop(guard);
}

/// Kills and reaps the child when the test ends, even on failure.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
        .ok_or(())
}
