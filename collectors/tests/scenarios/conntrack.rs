//! conntrack scenarios (handbook 002, 集群 DNS 解析异常排障处理): the 5-second DNS delay from
//! conntrack insert races, a nearly full table, a node-local DNS cache, and a real network
//! namespace with NATed UDP traffic.

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::explain::see_also;
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{ctx, root_or_skip, FakeHost};

const HEADER_6_18: &str = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart";

/// A kernel-6.18 style stat file with two CPUs; counters are split between the CPUs the way
/// the kernel keeps them (the parser must sum them), `entries` repeats on each line.
fn stat_6_18(entries: u64, clashres: u64, insert_failed: u64, drop: u64) -> String {
    let line = |clash: u64, failed: u64, drop: u64| {
        format!(
            "{entries:08x}  {clash:08x} 00001000 00000000 00000002 00000000 00000000 00000000 00000000 {failed:08x} {drop:08x} 00000000 00000000  00000000 00000000 00000000 00000001\n"
        )
    };
    let half = |v: u64| v / 2;
    format!(
        "{HEADER_6_18}\n{}{}",
        line(half(clashres), half(insert_failed), half(drop)),
        line(
            clashres - half(clashres),
            insert_failed - half(insert_failed),
            drop - half(drop)
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
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(3000, 40, 100, 2));
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
    let first = crate::support::collect(&mut c, &ctx());
    assert_eq!(first.status, Status::Ok);
    assert!(
        first.findings.is_empty(),
        "no rate on the first sample: {:?}",
        first.findings
    );

    std::thread::sleep(std::time::Duration::from_millis(50));
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(3010, 52, 137, 5));
    let second = crate::support::collect(&mut c, &ctx());
    assert_eq!(second.status, Status::Ok);
    let f = find(&second, "conntrack.insert_races").expect("race finding");
    assert_eq!(f.severity, Severity::Warning);
    // The catalogue's 5-second DNS delay entry explains the same race.
    assert_eq!(f.see_also, vec![see_also::CONNTRACK_DNS_DELAY]);
    assert_eq!(num(f, "insert_failed_increase"), 37.0);
    assert_eq!(num(f, "insert_failed_total"), 137.0);
    assert_eq!(num(f, "drop_increase"), 3.0);
    assert_eq!(num(f, "drop_total"), 5.0);
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
    let mut c = ConntrackCollector::new(h.host(), cfg);
    let mut failed = 100;
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        stat_6_18(500, 0, failed, 0),
    );
    assert!(crate::support::collect(&mut c, &ctx()).findings.is_empty());
    let mut severities = Vec::new();
    for _ in 0..3 {
        failed += 10;
        h.write(
            "/proc/1/net/stat/nf_conntrack",
            stat_6_18(500, 0, failed, 0),
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
        stat_6_18(500, 0, failed, 0),
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    assert_eq!(
        f.remediation.source.as_ref().unwrap().section,
        "集群 DNS 解析异常排障处理"
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "used_percent"), 80.0);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(49000, 0, 0, 0));
    assert!(crate::support::collect(&mut c, &ctx()).findings.is_empty());
}

#[test]
fn table_full_kernel_messages_are_critical_even_when_the_count_is_low() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(1200, 0, 0, 0));
    // Two "table full" records 10 minutes before now (uptime 5000 s), inside the 1 h lookback,
    // and one 2 hours old that the lookback excludes.
    h.write(
        "/dev/kmsg",
        "4,8999,0,-;nf_conntrack: table full, dropping packet\n\
         4,9001,4400000000,-;nf_conntrack: table full, dropping packet\n\
         4,9002,4400000100,-;nf_conntrack: nf_conntrack: table full, dropping packet\n\
         6,9003,4400000200,-;eth0: link up\n",
    );
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    assert_eq!(got.status, Status::Ok, "{:?}", got.status);
    let f = find(&got, "conntrack.table_full").expect("table finding");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "table_full_messages"), 2.0);
    assert!(f.summary.en.contains("2 \"table full"), "{}", f.summary.en);
    assert_eq!(
        metric(&got, "node_doctor_conntrack_table_full_messages_total"),
        Some(2.0)
    );
}

#[test]
fn nodelocal_dns_in_use_changes_the_advice() {
    // NodeLocal DNSCache listens on 169.254.20.10:53 and kubelet hands it to pods.
    let h = node("169.254.20.10", &format!("{UDP_STUB_ONLY}{UDP_NODELOCAL}"));
    h.write("/proc/1/net/stat/nf_conntrack", stat_6_18(100, 0, 10, 0));
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
fn module_not_loaded_is_unavailable() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    h.mkdir("/proc/1/net/stat");
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
    let got = crate::support::collect(&mut c, &ctx());
    match &got.status {
        Status::Unavailable(reason) => {
            assert!(reason.contains("nf_conntrack is not loaded"), "{reason}")
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    assert!(got.findings.is_empty() && got.metrics.is_empty());
}

#[test]
fn netns_pid_not_visible_is_unavailable_with_hostpid_advice() {
    let h = node("10.96.0.10", UDP_STUB_ONLY);
    let cfg = ConntrackConfig {
        netns_pid: 4242,
        ..ConntrackConfig::default()
    };
    let mut c = ConntrackCollector::new(h.host(), cfg);
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
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
    let mut c = ConntrackCollector::new(h.host(), ConntrackConfig::default());
    match crate::support::collect(&mut c, &ctx()).status {
        Status::Error(reason) => assert!(reason.contains("nf_conntrack"), "{reason}"),
        other => panic!("expected error, got {other:?}"),
    }
}

/// Real kernel: a network namespace created by the test, with an iptables DNAT rule so
/// conntrack tracks its traffic, and a sleeping process inside it whose `/proc/<pid>/net` the
/// collector reads (`netns_pid`). UDP goes to 500 loopback ports inside the namespace only.
mod real_kernel {
    use super::*;
    use std::os::fd::AsFd;
    use std::process::{Child, Command, Stdio};

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
        for tool in ["ip", "iptables"] {
            if tool_missing(tool) {
                eprintln!(
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
            eprintln!("SKIP {test}: cannot add a NAT rule in the namespace: {e}");
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
        let mut collector = ConntrackCollector::new(collectors::HostPaths::new("/"), cfg);
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
}
