//! conntrack scenarios: the 5-second DNS delay from conntrack insert races (handbook 002,
//! 集群 DNS 解析异常排障处理), a nearly full or full table and which rule its drops belong to,
//! "table full" kernel messages of every kernel's wording and how their findings decay,
//! kube-proxy owning the limit, a node-local DNS cache, and real network namespaces: NATed UDP
//! traffic, and a table filled for real.

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::explain::see_also;
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{ctx, root_or_skip, FakeHost};

const HEADER_6_18: &str = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart";

/// A kernel-6.18 style stat file with two CPUs; counters are split between the CPUs the way
/// the kernel keeps them (the parser must sum them), `entries` repeats on each line.
pub(crate) fn stat_6_18(entries: u64, clashres: u64, insert_failed: u64, drop: u64) -> String {
    stat_6_18_with(entries, clashres, insert_failed, drop, 0)
}

/// [`stat_6_18`] with `early_drop` (entries evicted to make room in a full table).
fn stat_6_18_with(
    entries: u64,
    clashres: u64,
    insert_failed: u64,
    drop: u64,
    early_drop: u64,
) -> String {
    let line = |clash: u64, failed: u64, drop: u64, early: u64| {
        format!(
            "{entries:08x}  {clash:08x} 00001000 00000000 00000002 00000000 00000000 00000000 00000000 {failed:08x} {drop:08x} {early:08x} 00000000  00000000 00000000 00000000 00000001\n"
        )
    };
    let half = |v: u64| v / 2;
    format!(
        "{HEADER_6_18}\n{}{}",
        line(
            half(clashres),
            half(insert_failed),
            half(drop),
            half(early_drop)
        ),
        line(
            clashres - half(clashres),
            insert_failed - half(insert_failed),
            drop - half(drop),
            early_drop - half(early_drop)
        ),
    )
}

const SNMP: &str = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 1200 3 17 1300 11 0 0 0 0\n";
const UDP_HEADER: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n";
/// 127.0.0.53:53 (systemd-resolved style stub), not a node-local cache.
const UDP_STUB_ONLY: &str = " 1234: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 20001 2 0000000000000000 0\n";
/// 169.254.20.10:53, node-local-dns.
const UDP_NODELOCAL: &str = "14227: 0A14FEA9:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 18334 2 00000000ee48fb4d 0\n";

/// A node with conntrack loaded (max 65536, 8 GiB RAM), a kubelet (pid 812) started with
/// `--cluster-dns`, and three pods.
fn node(cluster_dns: &str, udp_lines: &str) -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/sys/net/netfilter/nf_conntrack_max", "65536\n")
        .write("/proc/sys/net/netfilter/nf_conntrack_buckets", "65536\n")
        .write("/proc/sys/kernel/osrelease", "6.18.44-fc-v669\n")
        .write(
            "/proc/meminfo",
            "MemTotal:        8388608 kB\nMemFree:         1000000 kB\n",
        )
        .write("/proc/1/net/snmp", SNMP)
        .write("/proc/1/net/udp", format!("{UDP_HEADER}{udp_lines}"))
        .write("/proc/1/comm", "systemd\n")
        .write("/proc/812/comm", "kubelet\n")
        .write(
            "/proc/812/cmdline",
            format!("/usr/bin/kubelet\0--cluster-dns={cluster_dns}\0--v=2\0"),
        )
        .mkdir("/var/lib/kubelet/pods/0b8f6a52-1f3e-4a55-9d7e-1c1c1c1c1c01")
        .mkdir("/var/lib/kubelet/pods/0b8f6a52-1f3e-4a55-9d7e-1c1c1c1c1c02")
        .mkdir("/var/lib/kubelet/pods/0b8f6a52-1f3e-4a55-9d7e-1c1c1c1c1c03")
        // A quiet kernel log (records in /dev/kmsg format) and the clock that dates them.
        .write("/dev/kmsg", "6,1,1000000,-;Linux version 6.18.44\n")
        .write("/proc/uptime", "5000.00 9000.00\n");
    h
}

fn find<'a>(c: &'a Collection, id: &str) -> Option<&'a Finding> {
    c.findings.iter().find(|f| f.id == id)
}

fn num(f: &Finding, key: &str) -> f64 {
    f.evidence
        .get(key)
        .and_then(|e| e.as_f64())
        .unwrap_or_else(|| panic!("evidence {key} missing or not a number: {:?}", f.evidence))
}

fn text<'a>(f: &'a Finding, key: &str) -> &'a str {
    f.evidence
        .get(key)
        .and_then(|e| e.as_str())
        .unwrap_or_else(|| panic!("evidence {key} missing or not text: {:?}", f.evidence))
}

fn metric(c: &Collection, name: &str) -> Option<f64> {
    crate::support::find_metric(c, name, &[]).map(|m| m.value)
}

#[test]
fn insert_failed_rising_between_samples_is_the_dns_race() {
    // The handbook's 5-second delay: parallel A/AAAA queries from one socket lose the
    // conntrack insert race. The kubelet points pods at the kube-dns Service IP (the
    // handbook's example 172.16.14.217) and no node-local cache runs.
    let h = node("172.16.14.217", UDP_STUB_ONLY);
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18(3000, 40, 100, 102),
    );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let first = crate::support::collect(&mut c, &ctx());
    assert_eq!(first.status, Status::Ok);
    assert!(
        first.findings.is_empty(),
        "no rate on the first sample: {:?}",
        first.findings
    );

    std::thread::sleep(std::time::Duration::from_millis(50));
    // 6.18 counts a clash it cannot resolve in insert_failed and drop together; 12 more were
    // resolved (clashres) and lost nothing.
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18(3010, 52, 137, 139),
    );
    let second = crate::support::collect(&mut c, &ctx());
    assert_eq!(second.status, Status::Ok);
    assert_eq!(second.findings.len(), 1, "{:?}", second.findings);
    let f = find(&second, "conntrack.insert_races").expect("race finding");
    assert_eq!(f.severity, Severity::Warning);
    // The catalogue's 5-second DNS delay entry explains the same race.
    assert_eq!(f.see_also, vec![see_also::CONNTRACK_DNS_DELAY]);
    assert_eq!(num(f, "lost_races"), 37.0);
    assert_eq!(num(f, "insert_failed_increase"), 37.0);
    assert_eq!(num(f, "insert_failed_total"), 137.0);
    assert_eq!(num(f, "drop_increase"), 37.0);
    assert_eq!(num(f, "drop_total"), 139.0);
    assert!(!f.evidence.contains_key("untracked_drop_increase"));
    let interval = num(f, "interval_seconds");
    assert!((0.05..30.0).contains(&interval), "interval {interval}");
    let rate = num(f, "insert_failed_per_second");
    assert!(
        (rate - 37.0 / interval).abs() / rate < 0.05,
        "rate {rate} vs 37/{interval}"
    );
    assert_eq!(num(f, "clash_resolve_total"), 52.0);
    assert_eq!(text(f, "kernel_counts_clash_resolution"), "yes");
    assert_eq!(text(f, "kernel_release"), "6.18.44-fc-v669");
    assert_eq!(text(f, "nodelocal_dns_listening"), "no");
    assert_eq!(text(f, "kubelet_cluster_dns"), "172.16.14.217");
    assert_eq!(num(f, "pods_on_node"), 3.0);
    assert_eq!(num(f, "udp_rcvbuf_errors_total"), 11.0);
    assert_eq!(num(f, "udp_in_errors_total"), 17.0);
    // Advice: deploy a node-local cache, resolver options, musl caveat; real node name.
    let steps: String = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(steps.contains("Run a DNS cache on every node"), "{steps}");
    assert!(steps.contains("169.254.20.10"), "{steps}");
    assert!(steps.contains("single-request-reopen") && steps.contains("use-vc"));
    assert!(steps.contains("musl"));
    assert!(f.remediation.commands.contains(&"conntrack -S".to_string()));
    assert!(f.remediation.commands.contains(
        &"kubectl get pods -A -o wide --field-selector spec.nodeName=node-1".to_string()
    ));
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.doc, "002_af370464fa0f13dd.txt");
    assert_eq!(src.section, "集群 DNS 解析异常排障处理");
    assert!(f.summary.en.contains("5 s"), "{}", f.summary.en);
}

#[test]
fn sustained_races_turn_critical_and_stop_when_counters_stop() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    let cfg = ConntrackConfig {
        thresholds: collectors::conntrack::Thresholds {
            races_critical_samples: 3,
            ..Default::default()
        },
        ..ConntrackConfig::default()
    };
    let mut c = ConntrackCollector::new(h.node(), cfg);
    let mut failed = 100;
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18(500, 0, failed, failed),
    );
    assert!(crate::support::collect(&mut c, &ctx()).findings.is_empty());
    let mut severities = Vec::new();
    for _ in 0..3 {
        failed += 10;
        h.write(
            "/proc/1/net/stat/nf_conntrack",
            stat_6_18(500, 0, failed, failed),
        );
        let got = crate::support::collect(&mut c, &ctx());
        severities.push(find(&got, "conntrack.insert_races").map(|f| f.severity));
    }
    assert_eq!(
        severities,
        vec![
            Some(Severity::Warning),
            Some(Severity::Warning),
            Some(Severity::Critical)
        ]
    );
    // No change between samples: nothing, and the streak starts over.
    let quiet = crate::support::collect(&mut c, &ctx());
    assert!(quiet.findings.is_empty(), "{:?}", quiet.findings);
    failed += 1;
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18(500, 0, failed, failed),
    );
    let again = crate::support::collect(&mut c, &ctx());
    assert_eq!(
        find(&again, "conntrack.insert_races").map(|f| f.severity),
        Some(Severity::Warning)
    );
}

#[test]
fn no_change_between_samples_gives_nothing() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(3000, 40, 100, 2));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    crate::support::collect(&mut c, &ctx());
    let second = crate::support::collect(&mut c, &ctx());
    assert_eq!(second.status, Status::Ok);
    assert!(second.findings.is_empty(), "{:?}", second.findings);
}

#[test]
fn table_at_92_percent_is_critical_with_the_sysctl_command() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    // 60293 / 65536 = 92.0 %.
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(60293, 0, 0, 0));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "entries"), 60293.0);
    assert_eq!(num(f, "entries_limit"), 65536.0);
    assert_eq!(num(f, "used_percent"), 92.0);
    assert_eq!(num(f, "buckets"), 65536.0);
    // 8 GiB / 32768 = 262144 > 2 x 65536.
    assert_eq!(num(f, "recommended_max"), 262144.0);
    assert_eq!(num(f, "recommended_max_memory_bytes"), 262144.0 * 300.0);
    let cmds = &f.remediation.commands;
    assert!(
        cmds.contains(&"sysctl -w net.netfilter.nf_conntrack_max=262144".to_string()),
        "{cmds:?}"
    );
    assert!(cmds.contains(
        &"echo 'net.netfilter.nf_conntrack_max = 262144' > /etc/sysctl.d/90-node-doctor-conntrack.conf"
            .to_string()
    ));
    assert!(
        cmds.contains(&"echo 262144 > /sys/module/nf_conntrack/parameters/hashsize".to_string())
    );
    assert!(f.summary.en.contains("60293 of 65536"), "{}", f.summary.en);
    assert!(f.summary.en.contains("92.0%"), "{}", f.summary.en);
    // The handbooks do not cover a full table (their DNS section is about races): the
    // kernel's own documentation of the sysctl, with its address.
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.doc, "Linux kernel documentation");
    assert_eq!(
        src.url,
        Some("https://docs.kernel.org/networking/nf_conntrack-sysctl.html")
    );
    assert_eq!(metric(&got, "node_doctor_conntrack_entries"), Some(60293.0));
    assert_eq!(
        metric(&got, "node_doctor_conntrack_entries_limit"),
        Some(65536.0)
    );
}

#[test]
fn table_at_80_percent_warns_and_below_75_is_quiet() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(52429, 0, 0, 0));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "used_percent"), 80.0);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(49000, 0, 0, 0));
    assert!(crate::support::collect(&mut c, &ctx()).findings.is_empty());
}

/// "table full" messages in the kernel log keep the finding only as long as their age
/// says: the table below its thresholds now, a message 10 s old is critical, 210 s old a
/// warning, 58 min old info, and once it leaves the 1 h window the finding is gone. The boot
/// clock is the staged `/proc/uptime`, moved forward between collections.
#[test]
fn table_full_kernel_messages_decay_with_their_age() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0));
    // Two "table full" records 10 s before now (uptime 5000 s), one 2 hours old that the
    // lookback excludes.
    h.write(
        "/dev/kmsg",
        "4,8999,0,-;nf_conntrack: table full, dropping packet\n\
         4,9001,4990000000,-;nf_conntrack: table full, dropping packet\n\
         4,9002,4990000100,-;nf_conntrack: nf_conntrack: table full, dropping packet\n\
         6,9003,4990000200,-;eth0: link up\n",
    );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let mut at = |uptime: f64| {
        h.write("/proc/uptime", format!("{uptime:.2} 9000.00\n"));
        let got = crate::support::collect(&mut c, &ctx());
        assert_eq!(got.status, Status::Ok, "{:?}", got.status);
        got
    };
    let got = at(5000.0);
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "table_full_messages"), 2.0);
    assert!((num(f, "last_table_full_seconds_ago") - 9.9999).abs() < 0.01);
    assert_eq!(f.title.en, "conntrack table was full recently");
    assert!(
        f.summary
            .en
            .contains("2 \"table full\" kernel message(s), the last 10 s ago; table at 1.8% now."),
        "{}",
        f.summary.en
    );
    assert_eq!(
        metric(&got, "node_doctor_conntrack_table_full_messages_total"),
        Some(2.0)
    );
    let f = at(5200.0);
    let f = find(&f, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.summary.en.contains("the last 4 min ago"),
        "{}",
        f.summary.en
    );
    let got = at(8470.0);
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary
            .en
            .contains("the last 58 min ago; table at 1.8% now"),
        "{}",
        f.summary.en
    );
    // Past the 1 h window: gone.
    let got = at(8700.0);
    assert!(got.findings.is_empty(), "{:?}", got.findings);
}

/// The issue's figures, read from a full table on 6.18: `drop` 651 -> 1407, `early_drop`
/// 39 -> 93, `insert_failed` 0 -> 0, entries = max, and "table full" in the kernel log. The
/// drops are the full table's: `conntrack.table_full` (critical) only, no race.
#[test]
fn a_full_table_is_table_full_not_insert_races() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/sys/net/netfilter/nf_conntrack_max", "65536\n")
        .write(
            "/proc/1/net/stat/nf_conntrack",
            stat_6_18_with(65536, 0, 0, 651, 39),
        );
    // The kernel's message about it, 1 s before now (uptime 5000 s).
    h.write(
        "/dev/kmsg",
        "4,9001,4999000000,-;nf_conntrack: nf_conntrack: table full, dropping packet\n",
    );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    crate::support::collect(&mut c, &ctx());
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18_with(65536, 0, 0, 1407, 93),
    );
    let got = crate::support::collect(&mut c, &ctx());
    assert_eq!(got.findings.len(), 1, "{:#?}", got.findings);
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "drop_increase"), 756.0);
    assert_eq!(num(f, "untracked_drop_increase"), 756.0);
    assert_eq!(num(f, "early_drop_increase"), 54.0);
    assert_eq!(num(f, "used_percent"), 100.0);
    assert_eq!(num(f, "table_full_messages"), 1.0);
    assert!(!f.summary.en.contains("5 s"), "{}", f.summary.en);
    assert!(
        f.summary
            .en
            .contains("756 packet(s) dropped since the previous sample were not insert races"),
        "{}",
        f.summary.en
    );
    assert!(find(&got, "conntrack.insert_races").is_none());
}

/// One kernel's wording per fixture (tests/fixtures/conntrack/README.md): each is read as a
/// "table full" message of the node's table, whichever kernel wrote it.
#[test]
fn every_kernel_wording_of_table_full_is_recognised() {
    for (fixture, release, uptime, messages) in [
        (
            "kmsg.table-full.linux-2.6.32",
            "2.6.32-754.el6.x86_64",
            5000.0,
            3.0,
        ),
        (
            "kmsg.table-full.linux-3.10",
            "3.10.0-1160.el7.x86_64",
            5000.0,
            3.0,
        ),
        (
            "kmsg.table-full.linux-4.15",
            "4.15.0-213-generic",
            5000.0,
            3.0,
        ),
        (
            "kmsg.table-full.linux-5.15",
            "5.15.0-91-generic",
            5000.0,
            3.0,
        ),
        (
            "kmsg.table-full.linux-6.18.init-netns",
            "6.18.44",
            5000.0,
            3.0,
        ),
    ] {
        let h = node("10.96.0.10", UDP_STUB_ONLY);
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/conntrack")
                .join(fixture),
        )
        .unwrap();
        h.write("/dev/kmsg", text)
            .write("/proc/uptime", format!("{uptime:.2} 9000.00\n"))
            .write("/proc/sys/kernel/osrelease", format!("{release}\n"))
            .write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0));
        let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
        let got = c.collect(&ctx());
        let f = find(&got, "conntrack.table_full")
            .unwrap_or_else(|| panic!("{fixture}: no finding: {:?}", got.findings));
        assert_eq!(num(f, "table_full_messages"), messages, "{fixture}");
        // The last message 5.8 s before the fake uptime: critical, the table fine now.
        assert_eq!(f.severity, Severity::Critical, "{fixture}");
        assert!(f.subject.is_empty(), "{fixture}: {}", f.subject);
    }
}

/// 6.17+ names other namespaces: `table full in netns 4026532177` (real text from this
/// machine's 6.18) is another namespace's table when the collector reads the host's. With a
/// process still in it, the finding has that namespace as subject and its fill now; read
/// through that process, it is the collector's own table.
#[test]
fn table_full_in_another_netns_is_that_namespaces_finding() {
    let fixture = include_str!("../fixtures/conntrack/kmsg.table-full.linux-6.18.netns");
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/dev/kmsg", fixture)
        // 4.16 s after the last record.
        .write("/proc/uptime", "9260.00 9000.00\n")
        .write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0))
        .symlink("net:[4026531840]", "/proc/1/ns/net")
        // A pod's process in the named namespace, its table full now.
        .write("/proc/4242/comm", "envoy\n")
        .symlink("net:[4026532177]", "/proc/4242/ns/net")
        .write(
            "/proc/4242/net/stat/nf_conntrack",
            stat_6_18(65536, 0, 0, 900),
        );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    assert!(
        got.findings.iter().all(|f| !f.subject.is_empty()),
        "the node's own table is fine: {:#?}",
        got.findings
    );
    let f = got
        .findings
        .iter()
        .find(|f| f.subject == "netns 4026532177")
        .expect("the namespace's finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "table_full_messages"), 10.0);
    assert_eq!(num(f, "netns_pid"), 4242.0);
    assert_eq!(num(f, "used_percent"), 100.0);
    assert!(f
        .remediation
        .commands
        .contains(&"nsenter -t 4242 -n conntrack -S".to_string()));
    // The process is gone (the pod deleted): its table cannot be read any more, and the
    // messages, 4 s old, leave a warning (info once they are 10 min old: the next test).
    std::fs::remove_dir_all(h.path("/proc/4242")).unwrap();
    let got = c.collect(&ctx());
    let f = got
        .findings
        .iter()
        .find(|f| f.subject == "netns 4026532177")
        .expect("the namespace's finding");
    assert_eq!(f.severity, Severity::Warning);
    assert!(!f.evidence.contains_key("netns_pid"), "{:?}", f.evidence);

    // Reading that namespace itself (netns_pid 4243 lives in it): the messages are ours.
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/dev/kmsg", fixture)
        .write("/proc/uptime", "9260.00 9000.00\n")
        .write("/proc/4243/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0))
        .write("/proc/4243/net/snmp", SNMP)
        .write("/proc/4243/net/udp", format!("{UDP_HEADER}{UDP_STUB_ONLY}"))
        .symlink("net:[4026532177]", "/proc/4243/ns/net");
    let cfg = ConntrackConfig {
        netns_pid: 4243,
        ..ConntrackConfig::default()
    };
    let mut c = ConntrackCollector::new(h.node(), cfg);
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("our table's finding");
    assert_eq!(num(f, "table_full_messages"), 10.0);
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(got.findings.len(), 1, "{:#?}", got.findings);
}

/// "table full" messages of another network namespace in which no process is left (a pod
/// deleted seconds after its table filled; 6.18 wording `table full in netns N`) next to the
/// node's own (`nf_conntrack: nf_conntrack: table full, dropping packet`, unnamed: the initial
/// namespace's on 6.17+). Fresh, the namespace's finding is a warning saying how many and how
/// long ago, and the node's is critical; staged 15 minutes old, both are info.
#[test]
fn table_full_in_a_namespace_without_processes_warns_while_recent_then_is_info() {
    let stage = |at: &[f64]| {
        let h = node("10.96.0.10", UDP_STUB_ONLY);
        // Uptime 5000 s: a record at `t` s since boot is 5000 - t seconds old.
        let mut kmsg = String::from("6,1,1000000,-;Linux version 6.18.44\n");
        for (i, t) in at.iter().enumerate() {
            let usec = (t * 1_000_000.0) as u64;
            kmsg.push_str(&format!(
                "4,{},{usec},-;nf_conntrack: nf_conntrack: table full in netns 4026532177, dropping packet\n",
                100 + 2 * i
            ));
        }
        let last = at.iter().copied().fold(0.0, f64::max);
        kmsg.push_str(&format!(
            "4,999,{},-;nf_conntrack: nf_conntrack: table full, dropping packet\n",
            ((last - 6.0) * 1_000_000.0) as u64
        ));
        h.write("/dev/kmsg", kmsg)
            .write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0))
            .symlink("net:[4026531840]", "/proc/1/ns/net");
        let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
        let got = crate::support::collect(&mut c, &ctx());
        assert_eq!(got.status, Status::Ok, "{:?}", got.status);
        assert_eq!(got.findings.len(), 2, "{:#?}", got.findings);
        got
    };
    let netns = |c: &Collection| {
        c.findings
            .iter()
            .find(|f| f.subject == "netns 4026532177")
            .cloned()
            .expect("the namespace's finding")
    };
    let own = |c: &Collection| {
        c.findings
            .iter()
            .find(|f| f.subject.is_empty())
            .cloned()
            .expect("the node's own finding")
    };

    // Three messages, the last 4 s ago; the node's own 10 s ago.
    let fresh = stage(&[4990.0, 4993.0, 4996.0]);
    let f = netns(&fresh);
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(&f, "table_full_messages"), 3.0);
    assert!((num(&f, "last_table_full_seconds_ago") - 4.0).abs() < 0.01);
    assert_eq!(text(&f, "netns"), "4026532177");
    assert!(!f.evidence.contains_key("netns_pid"), "{:?}", f.evidence);
    assert_eq!(
        f.title.en,
        "conntrack table of another network namespace was full"
    );
    assert!(
        f.summary.en.contains(
            "no process is left in that namespace (its pod is gone); 3 \"table full\" kernel message(s), the last 4 s ago. That namespace dropped packets then"
        ),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary
            .en
            .contains("a warning until it has been quiet for 10 min, then info"),
        "{}",
        f.summary.en
    );
    assert!(
        f.remediation.steps[0]
            .en
            .starts_with("No process is left in that namespace: the pod that owned it was deleted"),
        "{:#?}",
        f.remediation.steps
    );
    assert!(f.remediation.commands.contains(
        &"kubectl get pods -A -o wide --sort-by=.metadata.creationTimestamp --field-selector spec.nodeName=node-1"
            .to_string()
    ));
    assert!(f
        .remediation
        .commands
        .contains(&"dmesg -T | grep 'conntrack: table full' | tail -n 5".to_string()));
    let o = own(&fresh);
    assert_eq!(o.severity, Severity::Critical);
    assert_eq!(num(&o, "table_full_messages"), 1.0);
    assert!((num(&o, "last_table_full_seconds_ago") - 10.0).abs() < 0.01);

    // The same messages 15 minutes old (the namespace quiet for longer than 10 min): info,
    // and the node's own too.
    let old = stage(&[4090.0, 4093.0, 4096.0]);
    let f = netns(&old);
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(num(&f, "table_full_messages"), 3.0);
    assert!((num(&f, "last_table_full_seconds_ago") - 904.0).abs() < 0.01);
    assert!(
        f.summary
            .en
            .contains("3 \"table full\" kernel message(s), the last 15 min ago."),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps[0].en.starts_with("No process is left"));
    assert_eq!(own(&old).severity, Severity::Info);
}

/// kube-proxy sets nf_conntrack_max itself when it starts: a kubeadm kube-proxy (its
/// ConfigMap file read through its own root) on 2 CPUs sets 131072 = max(32768 x 2, 131072),
/// so the advice is its `conntrack.min`, not a sysctl.d file that it would undo.
#[test]
fn kube_proxy_owns_the_limit_and_the_advice_says_so() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/sys/net/netfilter/nf_conntrack_max", "131072\n")
        .write("/proc/1/net/stat/nf_conntrack", stat_6_18(131072, 0, 0, 0))
        .write("/sys/devices/system/cpu/online", "0-1\n")
        .write("/proc/2231/comm", "kube-proxy\n")
        .write(
            "/proc/2231/cmdline",
            "/usr/local/bin/kube-proxy\0--config=/var/lib/kube-proxy/config.conf\0--hostname-override=node-1\0",
        )
        .write(
            "/proc/2231/root/var/lib/kube-proxy/config.conf",
            "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: null\n  min: null\n  tcpCloseWaitTimeout: null\nmode: \"\"\n",
        );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "kube_proxy_pid"), 2231.0);
    assert_eq!(num(f, "kube_proxy_sets_max"), 131072.0);
    assert_eq!(num(f, "cpus"), 2.0);
    assert_eq!(
        text(f, "kube_proxy_config"),
        "/var/lib/kube-proxy/config.conf"
    );
    let steps: String = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps.contains("max(maxPerCore 32768 × 2 CPUs, min 131072) = 131072"),
        "{steps}"
    );
    assert!(steps.contains("`conntrack.min: 262144`"), "{steps}");
    let cmds = &f.remediation.commands;
    assert!(!cmds.iter().any(|c| c.contains("sysctl.d")), "{cmds:?}");
    assert!(cmds.contains(
        &"grep -A3 conntrack: /proc/2231/root/var/lib/kube-proxy/config.conf".to_string()
    ));
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.doc, "Kubernetes documentation");

    // The same kube-proxy told to leave the limit alone (flags, maxPerCore 0): sysctl.d.
    h.write(
        "/proc/2231/cmdline",
        "kube-proxy\0--conntrack-max-per-core=0\0",
    );
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c.contains("/etc/sysctl.d/90-node-doctor-conntrack.conf")));
    let steps: String = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps.contains("leaves nf_conntrack_max to the node"),
        "{steps}"
    );
}

/// kube-proxy's `--config` path is host data: it reaches the printed command as one quoted
/// word, never as shell code.
#[test]
fn a_hostile_kube_proxy_config_path_is_one_quoted_word() {
    let path = "/etc/kp/$(touch /tmp/pwned)'; reboot #.yaml";
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/sys/net/netfilter/nf_conntrack_max", "131072\n")
        .write("/proc/1/net/stat/nf_conntrack", stat_6_18(131072, 0, 0, 0))
        .write("/sys/devices/system/cpu/online", "0-1\n")
        .write("/proc/2231/comm", "kube-proxy\n")
        .write(
            "/proc/2231/cmdline",
            format!("kube-proxy\0--config={path}\0"),
        )
        .write(
            &format!("/proc/2231/root{path}"),
            "conntrack:\n  maxPerCore: 32768\n",
        );
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = c.collect(&ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(text(f, "kube_proxy_config"), path);
    let want =
        r#"grep -A3 conntrack: /proc/2231/root'/etc/kp/$(touch /tmp/pwned)'\''; reboot #.yaml'"#;
    assert!(
        f.remediation.commands.iter().any(|c| c == want),
        "{:#?}",
        f.remediation.commands
    );
}

#[test]
fn nodelocal_dns_in_use_changes_the_advice() {
    // NodeLocal DNSCache listens on 169.254.20.10:53 and kubelet hands it to pods.
    let h = node("169.254.20.10", &format!("{UDP_STUB_ONLY}{UDP_NODELOCAL}"));
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 10, 0));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let first = crate::support::collect(&mut c, &ctx());
    assert_eq!(
        metric(&first, "node_doctor_conntrack_nodelocal_dns"),
        Some(1.0)
    );
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 14, 0));
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.insert_races").expect("race finding");
    assert_eq!(text(f, "nodelocal_dns_listening"), "yes");
    assert_eq!(text(f, "nodelocal_dns_address"), "169.254.20.10:53");
    assert!(
        f.summary.en.contains(
            "node-local DNS cache listens on 169.254.20.10:53 and kubelet points pods at it"
        ),
        "{}",
        f.summary.en
    );
    let steps: String = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps.contains("A node-local DNS cache is present"),
        "{steps}"
    );
    assert!(steps.contains("come from other UDP flows"), "{steps}");
    assert!(!steps.contains("Run a DNS cache on every node"), "{steps}");
}

#[test]
fn nodelocal_dns_listening_but_pods_not_pointed_at_it() {
    let h = node("10.96.0.10", UDP_NODELOCAL);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 10, 0));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    crate::support::collect(&mut c, &ctx());
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 11, 0));
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.insert_races").expect("race finding");
    assert_eq!(text(f, "nodelocal_dns_listening"), "yes");
    let steps: String = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps.contains("kubelet still gives pods 10.96.0.10 as nameserver"),
        "{steps}"
    );
}

#[test]
fn kubelet_cluster_dns_from_its_config_file() {
    let h = node("x", UDP_STUB_ONLY);
    // A kubelet started with --config only.
    h.write(
        "/proc/812/cmdline",
        "/usr/bin/kubelet\0--config=/etc/kubernetes/kubelet.yaml\0",
    )
    .write(
        "/etc/kubernetes/kubelet.yaml",
        "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.20.10\nclusterDomain: cluster.local\n",
    )
    .write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 10, 0));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    crate::support::collect(&mut c, &ctx());
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 11, 0));
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.insert_races").expect("race finding");
    assert_eq!(text(f, "kubelet_cluster_dns"), "169.254.20.10");
}

#[test]
fn older_kernel_header_is_read_and_clash_resolution_reported_absent() {
    // Kernel 3.10 layout: `searched` instead of `clashres`, 4 CPUs.
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    let fixture = include_str!("../fixtures/conntrack/nf_conntrack_stat.linux-3.10");
    h.write("/proc/1/net/stat/nf_conntrack", fixture)
        .write("/proc/sys/kernel/osrelease", "3.10.0-1160.el7.x86_64\n")
        .write("/proc/sys/net/netfilter/nf_conntrack_max", "131072\n");
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let first = crate::support::collect(&mut c, &ctx());
    // 120000 / 131072 = 91.6 %: critical.
    let f = find(&first, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(
        metric(&first, "node_doctor_conntrack_stat_insert_failed_total"),
        Some((0x7b + 0x65 + 0x88 + 0x71) as f64)
    );
    assert_eq!(
        metric(&first, "node_doctor_conntrack_stat_searched_total"),
        Some((0xa1b2c3u64 + 0x9a8b7c + 0xb3c4d5 + 0xa9b8c7) as f64)
    );
    assert_eq!(
        metric(&first, "node_doctor_conntrack_stat_clashres_total"),
        None
    );
    // One more failed insert on CPU 0.
    let bumped = fixture.replacen(" 0000007b ", " 0000007c ", 1);
    h.write("/proc/1/net/stat/nf_conntrack", bumped);
    let second = crate::support::collect(&mut c, &ctx());
    let r = find(&second, "conntrack.insert_races").expect("race finding");
    assert_eq!(num(r, "insert_failed_increase"), 1.0);
    assert_eq!(text(r, "kernel_counts_clash_resolution"), "no");
    assert_eq!(text(r, "kernel_release"), "3.10.0-1160.el7.x86_64");
}

#[test]
fn metrics_cover_every_stat_column_and_udp_counters() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(777, 3, 8, 1));
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    assert_eq!(metric(&got, "node_doctor_conntrack_entries"), Some(777.0));
    assert_eq!(metric(&got, "node_doctor_conntrack_buckets"), Some(65536.0));
    assert_eq!(
        metric(&got, "node_doctor_conntrack_stat_insert_failed_total"),
        Some(8.0)
    );
    assert_eq!(
        metric(&got, "node_doctor_conntrack_stat_clashres_total"),
        Some(3.0)
    );
    assert_eq!(
        metric(&got, "node_doctor_conntrack_stat_found_total"),
        Some(8192.0)
    );
    let stat_metrics = got
        .metrics
        .iter()
        .filter(|m| m.name.starts_with("node_doctor_conntrack_stat_"))
        .count();
    assert_eq!(stat_metrics, 16);
    assert!(got
        .metrics
        .iter()
        .filter(|m| m.name.starts_with("node_doctor_conntrack_stat_"))
        .all(|m| m.kind == collectors::MetricKind::Counter && m.name.ends_with("_total")));
    assert_eq!(
        metric(&got, "node_doctor_conntrack_udp_rcvbuf_errors_total"),
        Some(11.0)
    );
    assert_eq!(
        metric(&got, "node_doctor_conntrack_udp_in_errors_total"),
        Some(17.0)
    );
    assert_eq!(
        metric(&got, "node_doctor_conntrack_nodelocal_dns"),
        Some(0.0)
    );
    // The kernel log is read (a quiet one): the table-full counter is exported at 0.
    assert_eq!(
        metric(&got, "node_doctor_conntrack_table_full_messages_total"),
        Some(0.0)
    );
}

#[test]
fn module_not_loaded_is_complete_with_a_note() {
    // No connection tracking on this node: absent by design, nothing to judge, and the
    // check is complete (not exit bit 4); the note says why.
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.mkdir("/proc/1/net/stat");
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    match &got.status {
        Status::Noted(reason) => {
            assert!(reason.contains("nf_conntrack is not loaded"), "{reason}")
        }
        other => panic!("expected a note, got {other:?}"),
    }
    assert!(got.status.is_complete());
    assert!(got.findings.is_empty() && got.metrics.is_empty());
}

#[test]
fn netns_pid_not_visible_is_unavailable_with_hostpid_advice() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    let cfg = ConntrackConfig {
        netns_pid: 4242,
        ..ConntrackConfig::default()
    };
    let mut c = ConntrackCollector::new(h.node(), cfg);
    match crate::support::collect(&mut c, &ctx()).status {
        Status::Unavailable(reason) => assert!(reason.contains("hostPID"), "{reason}"),
        other => panic!("expected unavailable, got {other:?}"),
    }
}

#[test]
fn missing_side_files_degrade_but_rules_still_run() {
    let h = FakeHost::new();
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(60293, 0, 0, 0))
        .write("/proc/sys/net/netfilter/nf_conntrack_max", "65536\n");
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    match &got.status {
        Status::Degraded(reason) => {
            assert!(reason.contains("nf_conntrack_buckets missing"), "{reason}");
            assert!(reason.contains("net/snmp"), "{reason}");
        }
        other => panic!("expected degraded, got {other:?}"),
    }
    let f = find(&got, "conntrack.table_full").expect("table finding");
    // Memory unknown: twice the limit.
    assert_eq!(num(f, "recommended_max"), 131072.0);
}

#[test]
fn garbage_stat_file_is_an_error_not_a_panic() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", "entries found\nzz qq\n");
    let mut c = ConntrackCollector::new(h.node(), ConntrackConfig::default());
    match crate::support::collect(&mut c, &ctx()).status {
        Status::Error(reason) => assert!(reason.contains("nf_conntrack"), "{reason}"),
        other => panic!("expected error, got {other:?}"),
    }
}

/// Real kernel: network namespaces created by the tests, with an iptables rule so conntrack
/// tracks their traffic, and a sleeping process inside each whose `/proc/<pid>/net` the
/// collector reads (`netns_pid`). Traffic goes to loopback ports inside the namespace only.
/// `nf_conntrack_max` is global (read-only in a child namespace on 6.18): the test that fills
/// a table lowers it in the initial namespace for a moment and restores it in a Drop guard;
/// [`conntrack_lock`] serialises it with the other tests here and with other processes.
mod real_kernel {
    use super::*;
    use std::os::fd::AsFd;
    use std::process::{Child, Command, Stdio};
    use std::sync::{Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    const NF_CONNTRACK_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";

    /// Held by every real-kernel conntrack test: a mutex for this test process and an
    /// exclusive `flock` on a lock file for other processes (another checkout's test run), so
    /// no test creates conntrack entries while another has the global limit lowered.
    struct ConntrackLock {
        _flock: Option<nix::fcntl::Flock<std::fs::File>>,
        _guard: MutexGuard<'static, ()>,
    }

    fn conntrack_lock() -> ConntrackLock {
        static LOCK: Mutex<()> = Mutex::new(());
        let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let dir = if std::path::Path::new("/run/lock").is_dir() {
            "/run/lock"
        } else {
            "/tmp"
        };
        let flock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(format!("{dir}/node-doctor-nf_conntrack_max.lock"))
            .ok()
            .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
        ConntrackLock {
            _flock: flock,
            _guard: guard,
        }
    }

    /// `nf_conntrack_max` lowered for the guard's life; the value it had is written back on
    /// drop (also when the test fails). Nothing else is changed.
    struct MaxGuard {
        original: String,
    }

    impl MaxGuard {
        fn lower(to: u64) -> std::io::Result<MaxGuard> {
            let original = std::fs::read_to_string(NF_CONNTRACK_MAX)?
                .trim()
                .to_string();
            std::fs::write(NF_CONNTRACK_MAX, to.to_string())?;
            Ok(MaxGuard { original })
        }
    }

    impl Drop for MaxGuard {
        fn drop(&mut self) {
            if let Err(e) = std::fs::write(NF_CONNTRACK_MAX, &self.original) {
                eprintln!(
                    "could not restore {NF_CONNTRACK_MAX} to {}: {e}",
                    self.original
                );
            }
        }
    }

    struct Netns {
        name: String,
        sleeper: Option<Child>,
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            if let Some(mut child) = self.sleeper.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }

    fn run(args: &[&str]) -> Result<(), String> {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("{}: {e}", args.join(" ")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn tool_missing(tool: &str) -> bool {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
    }

    fn stat_value(c: &Collection, column: &str) -> f64 {
        metric(c, &format!("node_doctor_conntrack_stat_{column}_total")).unwrap_or(0.0)
    }

    #[test]
    fn nat_udp_in_a_namespace_grows_entries() {
        let test = "conntrack real_kernel nat_udp_in_a_namespace_grows_entries";
        if !root_or_skip(test) {
            return;
        }
        let _lock = conntrack_lock();
        for tool in ["ip", "iptables"] {
            if tool_missing(tool) {
                collectors::skip!(
                    "SKIP {test}: `{tool}` not installed (apt-get install iproute2 iptables)"
                );
                return;
            }
        }
        let name = format!("nd-ct-{}", std::process::id());
        let mut ns = Netns {
            name: name.clone(),
            sleeper: None,
        };
        run(&["ip", "netns", "add", &name]).expect("create netns");
        run(&[
            "ip", "netns", "exec", &name, "ip", "link", "set", "lo", "up",
        ])
        .expect("lo up");
        if let Err(e) = run(&[
            "ip",
            "netns",
            "exec",
            &name,
            "iptables",
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-p",
            "udp",
            "-d",
            "127.0.0.1",
            "--dport",
            "20000:20999",
            "-j",
            "DNAT",
            "--to-destination",
            "127.0.0.1:9",
        ]) {
            collectors::skip!("SKIP {test}: cannot add a NAT rule in the namespace: {e}");
            return;
        }
        // `ip netns exec` execs the command, so the child's pid is a process in the namespace.
        let child = Command::new("ip")
            .args(["netns", "exec", &name, "sleep", "60"])
            .spawn()
            .expect("spawn sleeper");
        let pid = child.id();
        ns.sleeper = Some(child);
        let own = std::fs::read_link("/proc/self/ns/net").expect("own netns");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net"));
            if theirs.as_ref().is_ok_and(|t| *t != own) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sleeper {pid} never entered the namespace"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }

        let cfg = ConntrackConfig {
            netns_pid: pid,
            ..ConntrackConfig::default()
        };
        let mut collector =
            ConntrackCollector::new(collectors::Node::new(collectors::HostPaths::new("/")), cfg);
        let before = collector.collect(&ctx());
        assert!(
            matches!(before.status, Status::Ok | Status::Degraded(_)),
            "{:?}",
            before.status
        );
        let entries_before = metric(&before, "node_doctor_conntrack_entries").expect("entries");

        // Send one datagram to each of 500 ports from a thread that joined the namespace;
        // the thread's namespace ends with the thread, the test process stays where it was.
        // The thread also holds a socket on the node-local DNS address until told to stop.
        run(&[
            "ip",
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            "169.254.20.10/32",
            "dev",
            "lo",
        ])
        .expect("add node-local address");
        let ns_file = std::fs::File::open(format!("/run/netns/{name}")).expect("open netns");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let traffic = std::thread::spawn(move || {
            nix::sched::setns(ns_file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("setns");
            let dns = std::net::UdpSocket::bind("169.254.20.10:53").expect("bind 169.254.20.10:53");
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            for port in 20000..20500u16 {
                let _ = sock.send_to(b"x", ("127.0.0.1", port));
            }
            let _ = ready_tx.send(());
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(10));
            drop(dns);
        });
        ready_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("traffic sent");
        let after = collector.collect(&ctx());
        let _ = done_tx.send(());
        traffic.join().expect("traffic thread");
        let entries_after = metric(&after, "node_doctor_conntrack_entries").expect("entries");
        assert!(
            entries_after >= entries_before + 450.0,
            "entries {entries_before} -> {entries_after}"
        );
        // Kernels up to 5.x count each new entry in `insert`; 6.x prints `insert` as 0 and
        // counts the reply lookups (ICMP port unreachable from the closed port) in `found`.
        // Either way the per-connection counters must grow.
        let grew = |col: &str| stat_value(&after, col) - stat_value(&before, col);
        eprintln!(
            "{test}: pid {pid}: entries {entries_before} -> {entries_after}, insert +{}, found +{}",
            grew("insert"),
            grew("found")
        );
        assert!(
            grew("insert") + grew("found") >= 450.0,
            "insert +{} found +{}",
            grew("insert"),
            grew("found")
        );
        // The socket on 169.254.20.10:53 is seen through /proc/<pid>/net/udp.
        assert_eq!(
            metric(&before, "node_doctor_conntrack_nodelocal_dns"),
            Some(0.0)
        );
        assert_eq!(
            metric(&after, "node_doctor_conntrack_nodelocal_dns"),
            Some(1.0)
        );
        // Nothing is judged from this clean traffic.
        assert!(
            find(&after, "conntrack.insert_races").is_none(),
            "{:?}",
            after.findings
        );
    }

    /// `conntrack -S` in a namespace, summed over CPUs: `found=0 invalid=0 ... drop=791 ...`.
    fn conntrack_s(ns: &str) -> Option<std::collections::BTreeMap<String, u64>> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "conntrack", "-S"])
            .output()
            .ok()?;
        let mut sums = std::collections::BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            for field in line.split_whitespace() {
                if let Some((k, v)) = field.split_once('=') {
                    if k != "cpu" {
                        if let Ok(v) = v.parse::<u64>() {
                            *sums.entry(k.to_string()).or_insert(0) += v;
                        }
                    }
                }
            }
        }
        Some(sums)
    }

    /// The node's own table finding (other namespaces' have a subject).
    fn own_table(c: &Collection) -> Option<&Finding> {
        c.findings
            .iter()
            .find(|f| f.id == "conntrack.table_full" && f.subject.is_empty())
    }

    /// A table filled for real: in a namespace of its own, with the global limit lowered to
    /// 200 for the moment it takes to send 1000 UDP datagrams and collect once. The kernel
    /// drops and evicts (drop, early_drop), logs `table full in netns N` and counts no
    /// insert_failed: the collector raises `conntrack.table_full` (critical) and no race.
    /// Then the table is flushed (recovery) and the finding decays by the stated rule
    /// (critical while the last message is under 2 s old, a warning under 4 s, info until it
    /// leaves the 8 s kernel-log window, here shortened from the defaults 120 s, 600 s, 1 h)
    /// and disappears.
    #[test]
    fn a_table_filled_for_real_is_table_full_not_races_and_decays() {
        let test =
            "conntrack real_kernel a_table_filled_for_real_is_table_full_not_races_and_decays";
        if !root_or_skip(test) {
            return;
        }
        for tool in ["ip", "iptables", "conntrack"] {
            if tool_missing(tool) {
                collectors::skip!(
                    "SKIP {test}: `{tool}` not installed (apt-get install iproute2 iptables conntrack)"
                );
                return;
            }
        }
        if !std::path::Path::new(NF_CONNTRACK_MAX).exists() {
            collectors::skip!("SKIP {test}: nf_conntrack is not loaded");
            return;
        }
        // The limit is global: the kernel lets only the initial network namespace write it.
        let writable = std::fs::metadata(NF_CONNTRACK_MAX)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o200 != 0);
        if !writable {
            collectors::skip!(
                "SKIP {test}: {NF_CONNTRACK_MAX} is read-only here: the global limit can only be \
                 lowered from the initial network namespace (this one is not)"
            );
            return;
        }
        let _lock = conntrack_lock();
        let name = format!("nd-ctfull-{}", std::process::id());
        let mut ns = Netns {
            name: name.clone(),
            sleeper: None,
        };
        run(&["ip", "netns", "add", &name]).expect("create netns");
        run(&[
            "ip", "netns", "exec", &name, "ip", "link", "set", "lo", "up",
        ])
        .expect("lo up");
        // A conntrack match makes the kernel track this namespace's traffic.
        if let Err(e) = run(&[
            "ip",
            "netns",
            "exec",
            &name,
            "iptables",
            "-A",
            "OUTPUT",
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-j",
            "ACCEPT",
        ]) {
            collectors::skip!("SKIP {test}: cannot add a conntrack rule in the namespace: {e}");
            return;
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &name, "sleep", "120"])
            .spawn()
            .expect("spawn sleeper");
        let pid = child.id();
        ns.sleeper = Some(child);
        let own = std::fs::read_link("/proc/self/ns/net").expect("own netns");
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(format!("/proc/{pid}/ns/net")).map_or(true, |t| t == own) {
            assert!(
                Instant::now() < deadline,
                "sleeper {pid} never entered the namespace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        let cfg = ConntrackConfig {
            netns_pid: pid,
            thresholds: collectors::conntrack::Thresholds {
                log_critical_seconds: 2.0,
                log_warning_seconds: 4.0,
                ..Default::default()
            },
            kmsg: collectors::kmsg::KmsgConfig {
                lookback: Duration::from_secs(8),
                ..Default::default()
            },
            ..ConntrackConfig::default()
        };
        let mut collector =
            ConntrackCollector::new(collectors::Node::new(collectors::HostPaths::new("/")), cfg);
        let before = collector.collect(&ctx());
        assert!(own_table(&before).is_none(), "{:?}", before.findings);
        let cs_before = conntrack_s(&name).expect("conntrack -S");

        // The window with the limit lowered: send, collect once, restore.
        let ns_file = std::fs::File::open(format!("/run/netns/{name}")).expect("open netns");
        let full = {
            let _max = MaxGuard::lower(200).expect("lower nf_conntrack_max");
            let traffic = std::thread::spawn(move || {
                nix::sched::setns(ns_file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                    .expect("setns");
                let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
                let mut refused = 0u32;
                for port in 20000..21000u16 {
                    if sock.send_to(b"x", ("127.0.0.1", port)).is_err() {
                        refused += 1;
                    }
                }
                refused
            });
            let refused = traffic.join().expect("traffic thread");
            eprintln!("{test}: 1000 datagrams sent, {refused} refused by the kernel (EPERM)");
            collector.collect(&ctx())
        };
        let restored = std::fs::read_to_string(NF_CONNTRACK_MAX).unwrap();
        let cs_after = conntrack_s(&name).expect("conntrack -S");
        let stat = |c: &Collection, col: &str| stat_value(c, col) as u64;
        eprintln!(
            "{test}: conntrack -S (summed over CPUs) before {cs_before:?} after {cs_after:?}; \
             /proc/<pid>/net/stat/nf_conntrack drop {} -> {}, early_drop {} -> {}, \
             insert_failed {} -> {}, clashres {} -> {}, entries {} with nf_conntrack_max 200 \
             (restored to {})",
            stat(&before, "drop"),
            stat(&full, "drop"),
            stat(&before, "early_drop"),
            stat(&full, "early_drop"),
            stat(&before, "insert_failed"),
            stat(&full, "insert_failed"),
            stat(&before, "clashres"),
            stat(&full, "clashres"),
            metric(&full, "node_doctor_conntrack_entries").unwrap_or(-1.0),
            restored.trim()
        );
        // conntrack -S and the stat file agree.
        for (col, key) in [
            ("drop", "drop"),
            ("early_drop", "early_drop"),
            ("insert_failed", "insert_failed"),
            ("clashres", "clash_resolve"),
        ] {
            assert_eq!(
                stat(&full, col),
                cs_after.get(key).copied().unwrap_or(0),
                "{col} vs conntrack -S {key}"
            );
        }
        // What the kernel moved: drop, not insert_failed.
        assert!(stat(&full, "drop") > stat(&before, "drop"));
        assert_eq!(stat(&full, "insert_failed"), stat(&before, "insert_failed"));

        let f =
            own_table(&full).unwrap_or_else(|| panic!("no table finding: {:#?}", full.findings));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(num(f, "entries"), 200.0);
        assert_eq!(num(f, "entries_limit"), 200.0);
        assert!(num(f, "untracked_drop_increase") > 0.0, "{:?}", f.evidence);
        assert!(
            num(f, "table_full_messages") >= 1.0,
            "the kernel logged `table full in netns N` for our namespace: {:?}",
            f.evidence
        );
        assert!(
            find(&full, "conntrack.insert_races").is_none(),
            "a full table is not a race: {:#?}",
            full.findings
        );

        // Recovery: the limit is back and the table emptied; the finding decays.
        run(&["ip", "netns", "exec", &name, "conntrack", "-F"]).expect("flush the table");
        let expected = |age: f64| {
            if age <= 2.0 {
                Severity::Critical
            } else if age <= 4.0 {
                Severity::Warning
            } else {
                Severity::Info
            }
        };
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let gone_at = loop {
            let got = collector.collect(&ctx());
            assert!(find(&got, "conntrack.insert_races").is_none());
            match own_table(&got) {
                None => break seen.last().map(|(a, _)| *a).unwrap_or(0.0),
                Some(f) => {
                    let age = num(f, "last_table_full_seconds_ago");
                    assert_eq!(f.severity, expected(age), "age {age}: {:#?}", f);
                    assert_eq!(f.title.en, "conntrack table was full recently");
                    assert!(num(f, "used_percent") < 1.0);
                    seen.push((age, f.severity));
                }
            }
            assert!(
                Instant::now() < deadline,
                "the finding never went away: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(400));
        };
        eprintln!("{test}: after recovery (age s, severity): {seen:?}; gone after {gone_at:.1} s");
        assert!(
            seen.iter().any(|(_, s)| *s == Severity::Warning),
            "{seen:?}"
        );
        assert!(seen.iter().any(|(_, s)| *s == Severity::Info), "{seen:?}");
        // Gone once the last message left the 8 s window (with one polling step).
        assert!(gone_at <= 8.0 + 0.5, "{seen:?}");
    }

    /// The 5-second DNS delay's mechanism on a real kernel: two threads send UDP from one
    /// socket to a DNATed Service address at the same moment, port after port, so their
    /// conntrack entries clash. This kernel (6.x) resolves such clashes: they count in
    /// `clashres`, not in `insert_failed` or `drop`, no packet is lost, and the collector
    /// raises no `conntrack.insert_races`.
    #[test]
    fn clashes_the_kernel_resolves_are_not_races() {
        let test = "conntrack real_kernel clashes_the_kernel_resolves_are_not_races";
        if !root_or_skip(test) {
            return;
        }
        for tool in ["ip", "iptables"] {
            if tool_missing(tool) {
                collectors::skip!(
                    "SKIP {test}: `{tool}` not installed (apt-get install iproute2 iptables)"
                );
                return;
            }
        }
        let _lock = conntrack_lock();
        let name = format!("nd-ctrace-{}", std::process::id());
        let mut ns = Netns {
            name: name.clone(),
            sleeper: None,
        };
        run(&["ip", "netns", "add", &name]).expect("create netns");
        for args in [
            vec!["ip", "link", "set", "lo", "up"],
            vec!["ip", "addr", "add", "10.96.0.10/32", "dev", "lo"],
            vec!["ip", "addr", "add", "10.0.0.1/32", "dev", "lo"],
        ] {
            let mut all = vec!["ip", "netns", "exec", &name];
            all.extend(args);
            run(&all).expect("set up the namespace");
        }
        if let Err(e) = run(&[
            "ip",
            "netns",
            "exec",
            &name,
            "iptables",
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-d",
            "10.96.0.10",
            "-p",
            "udp",
            "-j",
            "DNAT",
            "--to-destination",
            "10.0.0.1",
        ]) {
            collectors::skip!("SKIP {test}: cannot add a DNAT rule in the namespace: {e}");
            return;
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &name, "sleep", "60"])
            .spawn()
            .expect("spawn sleeper");
        let pid = child.id();
        ns.sleeper = Some(child);
        let own = std::fs::read_link("/proc/self/ns/net").expect("own netns");
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(format!("/proc/{pid}/ns/net")).map_or(true, |t| t == own) {
            assert!(
                Instant::now() < deadline,
                "sleeper {pid} never entered the namespace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let cfg = ConntrackConfig {
            netns_pid: pid,
            ..ConntrackConfig::default()
        };
        let mut collector =
            ConntrackCollector::new(collectors::Node::new(collectors::HostPaths::new("/")), cfg);
        let before = collector.collect(&ctx());

        let ns_file = std::fs::File::open(format!("/run/netns/{name}")).expect("open netns");
        let sock = {
            let ns_file = ns_file.try_clone().expect("dup");
            std::thread::spawn(move || {
                nix::sched::setns(ns_file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                    .expect("setns");
                std::net::UdpSocket::bind("0.0.0.0:0").expect("bind")
            })
            .join()
            .expect("socket thread")
        };
        let sock = std::sync::Arc::new(sock);
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (sock, barrier) = (sock.clone(), barrier.clone());
                std::thread::spawn(move || {
                    for port in 30000..33000u16 {
                        barrier.wait();
                        let _ = sock.send_to(b"q", ("10.96.0.10", port));
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().expect("sender");
        }
        let after = collector.collect(&ctx());
        let grew = |col: &str| stat_value(&after, col) - stat_value(&before, col);
        eprintln!(
            "{test}: 2 threads x 3000 ports: clashres +{}, insert_failed +{}, drop +{}, entries {}",
            grew("clashres"),
            grew("insert_failed"),
            grew("drop"),
            metric(&after, "node_doctor_conntrack_entries").unwrap_or(-1.0)
        );
        assert_eq!(grew("insert_failed"), 0.0);
        assert_eq!(grew("drop"), 0.0);
        assert!(
            find(&after, "conntrack.insert_races").is_none(),
            "{:#?}",
            after.findings
        );
    }
}

/// Cost and escalation (docs/collectors/conntrack.md): with no race and a table far from
/// full, a cycle reads the host namespace's files through pid 1 (`net/stat/nf_conntrack`,
/// `net/snmp`, `net/udp`, its `ns/net` link) and no file of any other process: the kubelet
/// and kube-proxy are looked up only when a finding needs their settings.
#[test]
fn a_quiet_table_reads_no_file_of_other_processes() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(3000, 40, 100, 2));
    crate::runtime::idle_processes(&h, 3000, 200, 4026531840, 4026531841);
    let host = h.node();
    let mut c = ConntrackCollector::new(host.clone(), ConntrackConfig::default());
    let first = c.collect(&ctx());
    let after_first = host.per_process_paths();
    let second = c.collect(&ctx());
    assert_eq!(second.status, Status::Ok);
    assert!(second.findings.is_empty(), "{:?}", second.findings);
    assert_eq!(first.findings, second.findings);
    // pid 1's net/stat/nf_conntrack, net/snmp, net/udp and ns/net, each cycle.
    assert_eq!(after_first, 4);
    assert_eq!(host.per_process_paths() - after_first, 4);
}

/// Cost (issue 32): the kernel log names a namespace no process is in (a pod deleted after its
/// table filled). The first run reads the `ns/net` link of every process to look for one;
/// later runs do not search again, however often the collector is told to rescan, until a
/// newer message names that number: the kernel reuses a freed namespace's number, and then a
/// process of the new namespace is found and its table read.
#[test]
fn a_namespace_found_gone_is_not_searched_for_again() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    let full = |seq: u64, secs: u64| {
        format!(
            "4,{seq},{},-;nf_conntrack: nf_conntrack: table full in netns 4026532177, dropping packet\n",
            secs * 1_000_000
        )
    };
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0))
        .write(
            "/dev/kmsg",
            format!("6,1,1000000,-;Linux version 6.18.44\n{}", full(2, 4990)),
        );
    crate::runtime::idle_processes(&h, 3000, 300, 4026531840, 4026531841);
    let host = h.node();
    let config = ConntrackConfig {
        kubelet_rescan_samples: 1,
        ..ConntrackConfig::default()
    };
    let mut c = ConntrackCollector::new(host.clone(), config);
    let gone = |c: &Collection| {
        let f = c
            .findings
            .iter()
            .find(|f| f.subject == "netns 4026532177")
            .cloned()
            .expect("the namespace's finding");
        assert_eq!(f.severity, Severity::Warning, "{:?}", f.evidence);
        assert!(!f.evidence.contains_key("netns_pid"), "{:?}", f.evidence);
    };
    let first = c.collect(&ctx());
    gone(&first);
    let searched = host.per_process_paths();
    assert!(searched >= 300, "{searched}");
    for _ in 0..3 {
        let before = host.per_process_paths();
        let again = c.collect(&ctx());
        gone(&again);
        // pid 1's files and links and kube-proxy's lookup (8 here): no link of the 300 others.
        assert!(
            host.per_process_paths() - before <= 10,
            "searched again: {} per-process paths",
            host.per_process_paths() - before
        );
    }
    // A newer message about the same number, and now a process in that namespace.
    crate::runtime::idle_processes(&h, 5000, 1, 4026532177, 4026531841);
    h.write(
        "/proc/5000/net/stat/nf_conntrack",
        stat_6_18(60000, 0, 0, 0),
    );
    let mut log = std::fs::read_to_string(h.path("/dev/kmsg")).unwrap();
    log.push_str(&full(3, 4995));
    h.write("/dev/kmsg", log);
    // The process table's listing serves its callers for up to a second: let it age out.
    std::thread::sleep(collectors::node::processes::MAX_AGE + std::time::Duration::from_millis(50));
    let found = c.collect(&ctx());
    let f = found
        .findings
        .iter()
        .find(|f| f.subject == "netns 4026532177")
        .expect("the namespace's finding");
    assert_eq!(
        f.evidence.get("netns_pid").map(|e| e.to_string()),
        Some("5000".to_string()),
        "{:?}",
        f.evidence
    );
    assert_eq!(f.severity, Severity::Critical, "{:?}", f.evidence);
}
