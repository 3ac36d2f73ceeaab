//! The net collector on fake hosts: `/proc/net/softnet_stat` in the formats of 3.10 (10
//! columns), 4.19 (11), 5.15 (13) and 6.18 (15, as this VM's kernel prints it); sysfs
//! interfaces laid out as the kernel lays them out (`/sys/class/net/<if>` with `type`, `flags`,
//! `operstate`, `carrier_changes`, `statistics/*`, a `device` link for a NIC, `bonding/` for a
//! bond, `bridge/` for a bridge); and `/proc/1/net/bonding/bond0` in the format of
//! `drivers/net/bonding/bond_procfs.c`. Each scenario stages a first reading, then a second
//! 15 s later (the host's `/proc/uptime` is the collector's clock): rates come from the two.
//!
//! The real test at the end makes a veth pair in a network and mount namespace of its own,
//! mounts that namespace's sysfs, flaps the link and reads the real `carrier_changes`.

use collectors::net::{NetCollector, NetConfig};
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{self, FakeHost};

/// Staged `statistics/*` values of one interface (the rest read 0).
#[derive(Default, Clone, Copy)]
struct Stats {
    rx_packets: u64,
    tx_packets: u64,
    rx_errors: u64,
    rx_dropped: u64,
    rx_missed: u64,
    rx_fifo: u64,
    rx_crc: u64,
    carrier_changes: u64,
}

/// A NIC (`device` link to its virtio/PCI device), set up (`IFF_UP`), link `operstate`.
fn stage_nic(h: &FakeHost, name: &str, operstate: &str, s: Stats) {
    let d = format!("/sys/class/net/{name}");
    h.write(&format!("{d}/type"), "1\n")
        .write(&format!("{d}/flags"), "0x1003\n")
        .write(&format!("{d}/operstate"), format!("{operstate}\n"))
        .write(&format!("{d}/mtu"), "1500\n")
        .write(&format!("{d}/speed"), "10000\n")
        .write(&format!("{d}/duplex"), "full\n");
    if !h.path(&format!("{d}/device")).exists() {
        h.mkdir("/sys/devices/pci0000:00/0000:00:03.0").symlink(
            "/sys/devices/pci0000:00/0000:00:03.0",
            &format!("{d}/device"),
        );
    }
    stage_stats(h, name, s);
}

fn stage_stats(h: &FakeHost, name: &str, s: Stats) {
    let d = format!("/sys/class/net/{name}");
    for (file, v) in [
        ("rx_packets", s.rx_packets),
        ("tx_packets", s.tx_packets),
        ("rx_errors", s.rx_errors),
        ("tx_errors", 0),
        ("rx_dropped", s.rx_dropped),
        ("tx_dropped", 0),
        ("rx_missed_errors", s.rx_missed),
        ("rx_fifo_errors", s.rx_fifo),
        ("rx_crc_errors", s.rx_crc),
        ("rx_frame_errors", 0),
        ("rx_over_errors", 0),
    ] {
        h.write(&format!("{d}/statistics/{file}"), format!("{v}\n"));
    }
    h.write(
        &format!("{d}/carrier_changes"),
        format!("{}\n", s.carrier_changes),
    );
}

/// lo, a docker bridge and a pod's veth: never watched (no `device`), whatever they count.
fn stage_virtual(h: &FakeHost) {
    let bad = Stats {
        rx_packets: 100,
        rx_errors: 5_000_000,
        carrier_changes: 999,
        ..Stats::default()
    };
    h.write("/sys/class/net/lo/type", "772\n")
        .write("/sys/class/net/lo/flags", "0x9\n")
        .write("/sys/class/net/lo/operstate", "unknown\n")
        .mkdir("/sys/class/net/docker0/bridge")
        .write("/sys/class/net/docker0/type", "1\n")
        .write("/sys/class/net/docker0/flags", "0x1003\n")
        .write("/sys/class/net/docker0/operstate", "down\n")
        .write("/sys/class/net/veth1a2b3c4/type", "1\n")
        .write("/sys/class/net/veth1a2b3c4/flags", "0x1003\n")
        .write("/sys/class/net/veth1a2b3c4/operstate", "lowerlayerdown\n");
    for name in ["lo", "docker0", "veth1a2b3c4"] {
        stage_stats(h, name, bad);
    }
}

/// 6.18's 15 columns (the CPU in the 13th), per CPU `(processed, dropped, squeezed)`.
fn softnet_6_18(cpus: &[(u64, u64, u64)]) -> String {
    cpus.iter()
        .enumerate()
        .map(|(i, (p, d, s))| {
            format!("{p:08x} {d:08x} {s:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 {i:08x} 00000000 00000000\n")
        })
        .collect()
}

/// 5.15's 13 columns.
fn softnet_5_15(cpus: &[(u64, u64, u64)]) -> String {
    cpus.iter()
        .enumerate()
        .map(|(i, (p, d, s))| {
            format!("{p:08x} {d:08x} {s:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 {i:08x}\n")
        })
        .collect()
}

/// 4.19's 11 columns.
fn softnet_4_19(cpus: &[(u64, u64, u64)]) -> String {
    cpus.iter()
        .map(|(p, d, s)| {
            format!("{p:08x} {d:08x} {s:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n")
        })
        .collect()
}

/// 3.10's 10 columns.
fn softnet_3_10(cpus: &[(u64, u64, u64)]) -> String {
    cpus.iter()
        .map(|(p, d, s)| {
            format!("{p:08x} {d:08x} {s:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n")
        })
        .collect()
}

/// A quiet node at uptime `t`: two CPUs sharing the work, eth0 passing traffic.
fn host(t: f64) -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", format!("{t:.2} 1000.00\n"))
        .write("/dev/kmsg", "")
        .write(
            "/proc/net/softnet_stat",
            softnet_6_18(&[(1_000_000, 0, 10), (990_000, 0, 12)]),
        )
        .write("/proc/sys/net/core/netdev_max_backlog", "1000\n")
        .write("/proc/sys/net/core/netdev_budget", "300\n")
        .write("/proc/sys/net/core/netdev_budget_usecs", "2000\n")
        .write("/proc/1/net/route", ROUTE);
    stage_nic(
        &h,
        "eth0",
        "up",
        Stats {
            rx_packets: 5_000_000,
            tx_packets: 4_000_000,
            rx_dropped: 12,
            carrier_changes: 2,
            ..Stats::default()
        },
    );
    stage_virtual(&h);
    h
}

/// The host's routing table (kernel 6.18's format): the default route through eth0.
const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       \neth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0                                                                               \neth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0                                                                               \n";

fn later(h: &FakeHost, t: f64) {
    h.write("/proc/uptime", format!("{t:.2} 1000.00\n"));
}

fn collector(h: &FakeHost) -> NetCollector {
    NetCollector::new(h.node(), NetConfig::default())
}

fn find<'a>(c: &'a Collection, id: &str) -> &'a Finding {
    c.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:#?}", c.findings))
}

fn num(f: &Finding, name: &str) -> f64 {
    f.evidence[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} in {:?}", f.evidence))
}

fn text<'a>(f: &'a Finding, name: &str) -> &'a str {
    f.evidence[name]
        .as_str()
        .unwrap_or_else(|| panic!("{name} in {:?}", f.evidence))
}

fn source_url(f: &Finding) -> String {
    let s = f.remediation.source.as_ref().expect("a source");
    s.url.unwrap_or_default().to_string()
}

fn ids(c: &Collection) -> Vec<&str> {
    c.findings.iter().map(|f| f.id.as_str()).collect()
}

fn commands(f: &Finding) -> String {
    f.remediation.commands.join("\n")
}

fn steps_en(f: &Finding) -> String {
    f.remediation
        .steps
        .iter()
        .map(|s| s.en.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_healthy_node_is_quiet_and_counts() {
    let h = host(1000.0);
    let mut c = collector(&h);
    let first = support::collect(&mut c, &support::ctx());
    assert!(matches!(first.status, Status::Ok), "{:?}", first.status);
    assert!(first.findings.is_empty());
    // 15 s later: ordinary traffic, a few unknown-protocol frames dropped.
    later(&h, 1015.0);
    h.write(
        "/proc/net/softnet_stat",
        softnet_6_18(&[(1_200_000, 0, 11), (1_180_000, 0, 12)]),
    );
    stage_stats(
        &h,
        "eth0",
        Stats {
            rx_packets: 5_200_000,
            tx_packets: 4_150_000,
            rx_dropped: 15,
            carrier_changes: 2,
            ..Stats::default()
        },
    );
    let second = support::collect(&mut c, &support::ctx());
    assert!(second.findings.is_empty(), "{:#?}", second.findings);
    let m = support::find_metric(
        &second,
        "node_doctor_net_softnet_processed_total",
        &[("cpu", "1")],
    )
    .expect("softnet metric");
    assert_eq!(m.value, 1_180_000.0);
    let m = support::find_metric(
        &second,
        "node_doctor_net_interface_packets_total",
        &[("interface", "eth0"), ("direction", "receive")],
    )
    .expect("interface metric");
    assert_eq!(m.value, 5_200_000.0);
    // Only the NIC is watched: no metric names lo, docker0 or the veth.
    assert!(second.metrics.iter().all(|m| m
        .labels
        .iter()
        .all(|(_, v)| v != "veth1a2b3c4" && v != "lo" && v != "docker0")));
}

/// A kernel's `softnet_stat` text from (processed, dropped, squeezed) per CPU.
type SoftnetFormat = fn(&[(u64, u64, u64)]) -> String;

/// The same backlog drops read from each kernel's format: CPU 1 takes nearly all the traffic
/// and drops 3,000 frames in 15 s.
#[test]
fn backlog_drops_on_one_cpu_in_every_kernel_format() {
    let formats: [(&str, SoftnetFormat); 4] = [
        ("3.10", softnet_3_10),
        ("4.19", softnet_4_19),
        ("5.15", softnet_5_15),
        ("6.18", softnet_6_18),
    ];
    for (kernel, format) in formats {
        let h = host(1000.0);
        h.write(
            "/proc/net/softnet_stat",
            format(&[(100_000, 0, 0), (9_000_000, 100, 500)]),
        );
        let mut c = collector(&h);
        assert!(support::collect(&mut c, &support::ctx())
            .findings
            .is_empty());
        later(&h, 1015.0);
        h.write(
            "/proc/net/softnet_stat",
            format(&[(110_000, 0, 0), (9_500_000, 3_100, 1_400)]),
        );
        let out = support::collect(&mut c, &support::ctx());
        let f = find(&out, "net.backlog_drops");
        assert_eq!(f.severity, Severity::Warning, "{kernel}");
        assert_eq!(f.subject, "softnet backlog");
        assert_eq!(num(f, "dropped"), 3000.0, "{kernel}");
        assert_eq!(num(f, "dropped_per_second"), 200.0);
        assert_eq!(num(f, "worst_cpu"), 1.0);
        assert_eq!(num(f, "netdev_max_backlog"), 1000.0);
        assert_eq!(num(f, "busiest_cpu"), 1.0);
        assert_eq!(num(f, "busiest_cpu_ratio"), 50.0);
        assert!(
            f.summary.en.contains("backlog was full"),
            "{}",
            f.summary.en
        );
        assert!(steps_en(f).contains("netdev_max_backlog"));
        assert!(steps_en(f).contains("RPS"));
        assert!(commands(f).contains("rps_cpus"));
        assert_eq!(
            source_url(f),
            "https://docs.kernel.org/networking/scaling.html"
        );
        // 900 squeezes in 15 s with drops: the budget is short, a warning.
        let q = find(&out, "net.softirq_squeeze");
        assert_eq!(q.severity, Severity::Warning);
        assert_eq!(num(q, "squeezes_per_second"), 60.0);
        assert_eq!(num(q, "netdev_budget"), 300.0);
        assert!(commands(q).contains("sysctl net.core.netdev_budget net.core.netdev_budget_usecs"));
        assert_eq!(
            source_url(q),
            "https://docs.kernel.org/networking/scaling.html"
        );
    }
}

/// The kernel prints 32-bit counters: a drop counter that wrapped still counts forward, and
/// without drops the squeezes alone are info.
#[test]
fn squeezes_alone_and_a_wrapped_counter() {
    let h = host(1000.0);
    h.write(
        "/proc/net/softnet_stat",
        softnet_6_18(&[(0xffff_ff00, 0, 0xffff_fff0), (0xffff_ff00, 0, 0)]),
    );
    let mut c = collector(&h);
    support::collect(&mut c, &support::ctx());
    later(&h, 1015.0);
    h.write(
        "/proc/net/softnet_stat",
        softnet_6_18(&[(0x0001_0000, 0, 0x0000_0200), (0x0001_0000, 0, 0)]),
    );
    let out = support::collect(&mut c, &support::ctx());
    assert_eq!(ids(&out), ["net.softirq_squeeze"]);
    let q = &out.findings[0];
    assert_eq!(q.severity, Severity::Info);
    // 0x10 before the wrap, 0x200 after it.
    assert_eq!(num(q, "squeezes"), 528.0);
    assert_eq!(
        source_url(q),
        "https://docs.kernel.org/admin-guide/sysctl/net.html"
    );
}

/// eth0's NIC misses frames (ring full); eth1 receives damaged frames (CRC), 2 % of them.
#[test]
fn interface_missed_and_crc_errors() {
    let h = host(1000.0);
    stage_nic(
        &h,
        "eth1",
        "up",
        Stats {
            rx_packets: 1_000_000,
            tx_packets: 10,
            ..Stats::default()
        },
    );
    let mut c = collector(&h);
    support::collect(&mut c, &support::ctx());
    later(&h, 1015.0);
    stage_stats(
        &h,
        "eth0",
        Stats {
            rx_packets: 5_100_000,
            tx_packets: 4_050_000,
            rx_dropped: 12,
            rx_missed: 600,
            rx_fifo: 600,
            carrier_changes: 2,
            ..Stats::default()
        },
    );
    stage_stats(
        &h,
        "eth1",
        Stats {
            rx_packets: 1_010_000,
            tx_packets: 10,
            rx_errors: 200,
            rx_crc: 200,
            ..Stats::default()
        },
    );
    let out = support::collect(&mut c, &support::ctx());
    let eth0 = out
        .findings
        .iter()
        .find(|f| f.id == "net.interface_errors" && f.subject == "eth0")
        .expect("eth0");
    assert_eq!(eth0.severity, Severity::Warning);
    assert_eq!(num(eth0, "rx_missed"), 600.0);
    assert_eq!(num(eth0, "bad_per_second"), 40.0);
    assert!(eth0.summary.en.contains("receive descriptors"));
    assert!(commands(eth0).contains("ethtool -g eth0"));
    let eth1 = out
        .findings
        .iter()
        .find(|f| f.id == "net.interface_errors" && f.subject == "eth1")
        .expect("eth1");
    assert_eq!(eth1.severity, Severity::Critical);
    assert_eq!(num(eth1, "rx_crc"), 200.0);
    assert!((num(eth1, "bad_percent") - 2.0).abs() < 0.01);
    assert!(steps_en(eth1).contains("CRC errors are never fixed on the host"));
    assert!(commands(eth1).contains("kubectl drain node-1"));
    assert_eq!(
        source_url(eth1),
        "https://docs.kernel.org/networking/statistics.html"
    );
}

#[test]
fn a_flapping_link_and_a_link_down() {
    let h = host(1000.0);
    stage_nic(&h, "eth1", "up", Stats::default());
    let mut c = collector(&h);
    support::collect(&mut c, &support::ctx());
    later(&h, 1015.0);
    // eth0 lost its carrier twice (4 changes); eth1 is set up but has no carrier.
    stage_stats(
        &h,
        "eth0",
        Stats {
            rx_packets: 5_000_100,
            tx_packets: 4_000_100,
            rx_dropped: 12,
            carrier_changes: 6,
            ..Stats::default()
        },
    );
    h.write("/sys/class/net/eth1/operstate", "down\n");
    let out = support::collect(&mut c, &support::ctx());
    let f = find(&out, "net.link_flapping");
    assert_eq!(f.subject, "eth0");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "carrier_changes"), 4.0);
    assert_eq!(num(f, "carrier_changes_total"), 6.0);
    assert!(commands(f).contains("ethtool eth0"));
    let d = find(&out, "net.link_down");
    assert_eq!(d.subject, "eth1");
    assert_eq!(text(d, "operstate"), "down");
    assert!(d.summary.en.contains("NO-CARRIER"));
    assert_eq!(
        source_url(d),
        "https://docs.kernel.org/networking/operstates.html"
    );
    // Nobody set eth1 up: an unused port, not reported.
    h.write("/sys/class/net/eth1/flags", "0x1002\n");
    later(&h, 1030.0);
    let out = support::collect(&mut c, &support::ctx());
    assert!(!ids(&out).contains(&"net.link_down"), "{:?}", ids(&out));
}

/// A NIC whose link negotiated 100 Mb/s half duplex; a veth at half duplex is not judged.
#[test]
fn a_nic_at_half_duplex() {
    let h = host(1000.0);
    h.write("/sys/class/net/eth0/duplex", "half\n")
        .write("/sys/class/net/eth0/speed", "100\n")
        .write("/sys/class/net/veth1a2b3c4/duplex", "half\n")
        .write("/sys/class/net/veth1a2b3c4/operstate", "up\n");
    let out = support::collect(&mut collector(&h), &support::ctx());
    assert_eq!(ids(&out), ["net.interface_speed"]);
    let f = &out.findings[0];
    assert_eq!(f.subject, "eth0");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "speed_mbps"), 100.0);
    assert!(
        f.summary.en.contains("half duplex at 100 Mb/s"),
        "{}",
        f.summary.en
    );
    assert!(commands(f).contains("ethtool eth0"));
    assert_eq!(
        source_url(f),
        "https://docs.kernel.org/admin-guide/abi-testing.html"
    );
}

/// flannel over a 1450-byte uplink (an OpenStack tenant network) with flannel.1 and cni0 left
/// at 1450: encapsulated, a full pod packet is 1500 bytes and does not fit.
#[test]
fn pod_mtu_larger_than_the_uplink_allows() {
    let h = host(1000.0);
    h.write("/sys/class/net/eth0/mtu", "1450\n")
        .write("/sys/class/net/flannel.1/mtu", "1450\n")
        .write("/sys/class/net/flannel.1/operstate", "unknown\n")
        .mkdir("/sys/class/net/cni0/bridge")
        .write("/sys/class/net/cni0/mtu", "1450\n")
        .write("/sys/class/net/veth1a2b3c4/mtu", "1400\n");
    let out = support::collect(&mut collector(&h), &support::ctx());
    assert_eq!(ids(&out), ["net.mtu_mismatch"]);
    let f = &out.findings[0];
    assert_eq!(f.subject, "eth0");
    assert_eq!(num(f, "uplink_mtu"), 1450.0);
    assert_eq!(num(f, "overhead_bytes"), 50.0);
    assert_eq!(num(f, "limit_mtu"), 1400.0);
    assert_eq!(text(f, "too_large"), "flannel.1, cni0 (1450)");
    assert!(
        f.summary.en.contains("flannel.1 adds 50 bytes"),
        "{}",
        f.summary.en
    );
    assert!(commands(f).contains("ip link show dev eth0"));
    // flannel set right: quiet.
    h.write("/sys/class/net/flannel.1/mtu", "1400\n")
        .write("/sys/class/net/cni0/mtu", "1400\n");
    later(&h, 1015.0);
    let out = support::collect(&mut collector(&h), &support::ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

/// An active-backup bond whose backup slave lost its link, as 5.15's driver prints it.
const BOND_5_15: &str = "\
Ethernet Channel Bonding Driver: v5.15.0-91-generic

Bonding Mode: fault-tolerance (active-backup)
Primary Slave: None
Currently Active Slave: eth0
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0
Peer Notification Delay (ms): 0

Slave Interface: eth0
MII Status: up
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 52:54:00:12:34:56
Slave queue ID: 0

Slave Interface: eth1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 3
Permanent HW addr: 52:54:00:12:34:57
Slave queue ID: 0
";

#[test]
fn a_bond_with_a_slave_down_is_degraded() {
    let h = host(1000.0);
    h.mkdir("/sys/class/net/bond0/bonding")
        .write("/sys/class/net/bond0/type", "1\n")
        .write("/sys/class/net/bond0/flags", "0x1403\n")
        .write("/sys/class/net/bond0/operstate", "up\n");
    stage_stats(&h, "bond0", Stats::default());
    h.write("/proc/1/net/bonding/bond0", BOND_5_15);
    let mut c = collector(&h);
    let out = support::collect(&mut c, &support::ctx());
    // A state: judged on the first run already.
    let f = find(&out, "net.bond_degraded");
    assert_eq!(f.subject, "bond0");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(text(f, "slaves_down"), "eth1");
    assert_eq!(num(f, "slaves_up"), 1.0);
    assert_eq!(num(f, "link_failures"), 3.0);
    assert_eq!(text(f, "active_slave"), "eth0");
    assert!(f.summary.en.contains("without redundancy"));
    assert!(commands(f).contains("cat /proc/net/bonding/bond0"));
    assert!(commands(f).contains("ethtool eth1"));
    assert_eq!(
        source_url(f),
        "https://docs.kernel.org/networking/bonding.html"
    );
    let m = support::find_metric(
        &out,
        "node_doctor_net_bond_slaves",
        &[("bond", "bond0"), ("state", "down")],
    )
    .expect("bond metric");
    assert_eq!(m.value, 1.0);
    // Both slaves down: the bond carries nothing.
    later(&h, 1015.0);
    h.write(
        "/proc/1/net/bonding/bond0",
        BOND_5_15
            .replace(
                "Currently Active Slave: eth0\nMII Status: up",
                "Currently Active Slave: None\nMII Status: down",
            )
            .replace(
                "MII Status: up\nSpeed: 10000 Mbps",
                "MII Status: down\nSpeed: Unknown",
            )
            .replace("Link Failure Count: 0", "Link Failure Count: 1"),
    );
    let out = support::collect(&mut c, &support::ctx());
    let f = find(&out, "net.bond_degraded");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(text(f, "slaves_down"), "eth0, eth1");
    assert_eq!(num(f, "link_failures_in_window"), 1.0);
    assert!(commands(f).contains("kubectl cordon node-1"));
}

/// A veth is not watched unless the operator names it; named, its counters are judged.
#[test]
fn a_configured_interface_is_watched() {
    let h = host(1000.0);
    let mut quiet = collector(&h);
    let mut named = NetCollector::new(
        h.node(),
        NetConfig {
            interfaces: vec!["veth1a2b3c4".into()],
            ..NetConfig::default()
        },
    );
    support::collect(&mut quiet, &support::ctx());
    support::collect(&mut named, &support::ctx());
    later(&h, 1015.0);
    stage_stats(
        &h,
        "veth1a2b3c4",
        Stats {
            rx_packets: 100,
            rx_errors: 5_000_000,
            carrier_changes: 1009,
            ..Stats::default()
        },
    );
    assert!(support::collect(&mut quiet, &support::ctx())
        .findings
        .is_empty());
    let out = support::collect(&mut named, &support::ctx());
    let f = find(&out, "net.link_flapping");
    assert_eq!(f.subject, "veth1a2b3c4");
    assert_eq!(text(f, "role"), "configured");
    assert_eq!(f.severity, Severity::Critical);
    // Set up, no carrier (its peer is down): a link down too.
    assert_eq!(find(&out, "net.link_down").subject, "veth1a2b3c4");
}

#[test]
fn nothing_readable_is_unavailable() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "1000.00 1000.00\n");
    let out = support::collect(&mut collector(&h), &support::ctx());
    assert!(
        matches!(out.status, Status::Unavailable(_)),
        "{:?}",
        out.status
    );
    // sysfs alone: degraded, the interfaces still judged.
    stage_nic(&h, "eth0", "up", Stats::default());
    let out = support::collect(&mut collector(&h), &support::ctx());
    match &out.status {
        Status::Degraded(m) => assert!(m.contains("softnet"), "{m}"),
        s => panic!("{s:?}"),
    }
}

/// The agent outside the host's network namespace: the `net.core` sysctls it would read are
/// its own namespace's, so the advice goes without them.
#[test]
fn sysctls_of_another_namespace_are_not_quoted() {
    let h = host(1000.0);
    let ctx = collectors::CollectContext::new("node-1", collectors::HostNetns::Different);
    let mut c = collector(&h);
    c.collect(&ctx);
    later(&h, 1015.0);
    h.write(
        "/proc/net/softnet_stat",
        softnet_6_18(&[(1_100_000, 3_000, 10), (1_090_000, 0, 12)]),
    );
    let out = c.collect(&ctx);
    let f = find(&out, "net.backlog_drops");
    assert!(!f.evidence.contains_key("netdev_max_backlog"));
}

/// A real kernel: a veth pair in a network and mount namespace of the test's own, whose
/// sysfs the test mounts there; the collector's host root is a directory whose `proc` is the
/// real one and whose `sys` is that mount (through the namespace's `/proc/<pid>/root`). The
/// test sets the link down and up twice; the real `carrier_changes` rise by 4.
#[test]
fn real_veth_flapping_in_its_own_namespace() {
    use std::process::{Command, Stdio};
    let test = "real_veth_flapping_in_its_own_namespace";
    if !support::root_or_skip(test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("sys");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        "set -e; mount -t sysfs sysfs '{m}'; ip link add ndA type veth peer name ndB; \
         ip link set ndA up; ip link set ndB up; echo ready; exec sleep 120",
        m = mnt.display()
    );
    let child = Command::new("unshare")
        .args([
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        collectors::skip!("SKIP {test}: unshare could not run");
        return;
    };
    // Killed (and its namespace, veths and mount gone) whatever happens below.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    {
        use std::io::BufRead;
        let out = child.stdout.take().unwrap();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    let pid = child.id();
    let mut child = Reap(child);
    if line.trim() != "ready" {
        let mut err = String::new();
        if let Some(mut e) = child.0.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        collectors::skip!("SKIP {test}: the namespace could not be set up: {err}");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/proc", root.path().join("proc")).unwrap();
    std::os::unix::fs::symlink(
        format!("/proc/{pid}/root{}", mnt.display()),
        root.path().join("sys"),
    )
    .unwrap();
    let host = collectors::HostPaths::new(root.path());
    assert!(
        host.sys_file("class/net/ndA").exists(),
        "the namespace's sysfs shows its veth"
    );
    assert!(
        !host.sys_file("class/net/eth0").exists(),
        "the namespace's sysfs shows none of the host's interfaces"
    );
    let node = collectors::node::Node::new(host);
    let mut c = NetCollector::new(
        node,
        NetConfig {
            interfaces: vec!["ndA".into()],
            ..NetConfig::default()
        },
    );
    let ctx = collectors::CollectContext::new("node-1", collectors::HostNetns::Different);
    let first = c.collect(&ctx);
    assert!(
        !ids(&first).contains(&"net.link_flapping"),
        "{:#?}",
        first.findings
    );
    let before = support::find_metric(
        &first,
        "node_doctor_net_interface_carrier_changes_total",
        &[("interface", "ndA")],
    )
    .expect("ndA watched")
    .value;
    let ip = |args: &[&str]| {
        let ok = Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-n", "ip"])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip {args:?}");
    };
    for _ in 0..2 {
        ip(&["link", "set", "ndB", "down"]);
        ip(&["link", "set", "ndB", "up"]);
    }
    // The uptime clock ticks in hundredths: let it move.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let second = c.collect(&ctx);
    let f = find(&second, "net.link_flapping");
    assert_eq!(f.subject, "ndA");
    assert_eq!(text(f, "role"), "configured");
    assert_eq!(num(f, "carrier_changes"), 4.0, "{:?}", f.evidence);
    assert_eq!(num(f, "carrier_changes_total"), before + 4.0);
    assert_eq!(f.severity, Severity::Warning);
    drop(child);
}

// ------------------------------------------------------------------ the pods' own namespaces

/// The host's network namespace (`readlink /proc/1/ns/net` on Linux 6.18).
const HOST_NETNS: &str = "net:[4026531840]";
const COREDNS_UID: &str = "3f6c2b9e-8a41-4d7e-9c55-0b1a2e7d4f60";
const MESH_UID: &str = "9b2d41c7-5e3a-4f18-a6c0-7d8e1f2a3b4c";
const HOSTNET_UID: &str = "5a1e7c3d-2b4f-4a69-8e0d-6c7b9a8f1e2d";
const CID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

/// `/proc/<pid>/net/snmp` as Linux 6.18 prints it (the conntrack fixture), with this `Udp:`
/// line: InDatagrams NoPorts InErrors RcvbufErrors.
fn snmp_6_18(in_datagrams: u64, no_ports: u64, in_errors: u64, rcvbuf: u64) -> String {
    include_str!("../fixtures/conntrack/snmp.linux-6.18").replace(
        "Udp: 52 0 0 53 0 0 0 0 0",
        &format!("Udp: {in_datagrams} {no_ports} {in_errors} 53 {rcvbuf} 0 0 0 0"),
    )
}

/// `/proc/<pid>/net/stat/nf_conntrack` as Linux 6.18 prints it (hex, one line per CPU; the
/// header of the conntrack fixture), with `insert_failed` and `drop` on CPU 1.
fn nf_conntrack_6_18(insert_failed: u64, drop: u64) -> String {
    let header = include_str!("../fixtures/conntrack/nf_conntrack_stat.linux-6.18.netns-traffic")
        .lines()
        .next()
        .unwrap()
        .to_string();
    let line = |f: u64, d: u64| {
        format!("00000007  00000000 00000012 00000000 00000000 00000000 00000000 00000000 00000009 {f:08x} {d:08x} 00000000 00000000  00000000 00000000 00000000 00000000\n")
    };
    format!("{header}\n{}{}", line(0, 0), line(insert_failed, drop))
}

/// A pod process: its namespace link and its namespace's counters.
fn stage_pod_process(h: &FakeHost, pid: u32, netns: u64, snmp: &str, conntrack: Option<&str>) {
    let link = format!("/proc/{pid}/ns/net");
    let _ = std::fs::remove_file(h.path(&link));
    h.symlink(&format!("net:[{netns}]"), &link)
        .write(&format!("/proc/{pid}/net/snmp"), snmp);
    if let Some(ct) = conntrack {
        h.write(&format!("/proc/{pid}/net/stat/nf_conntrack"), ct);
    }
}

/// A pod's container cgroup with the systemd driver on cgroup v2.
fn stage_v2_pod(h: &FakeHost, qos: &str, uid: &str, pid: u32) {
    h.write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
        .write(
            &format!(
                "/sys/fs/cgroup/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{}.slice/cri-containerd-{CID}.scope/cgroup.procs",
                uid.replace('-', "_")
            ),
            format!("{pid}\n"),
        );
}

/// A pod's container cgroup with the cgroupfs driver on cgroup v1 (the pids hierarchy).
fn stage_v1_pod(h: &FakeHost, qos: &str, uid: &str, pid: u32) {
    h.write(
        &format!("/sys/fs/cgroup/pids/kubepods/{qos}/pod{uid}/{CID}/cgroup.procs"),
        format!("{pid}\n"),
    );
}

fn pod_metric(c: &Collection, name: &str, uid: &str) -> Option<f64> {
    support::find_metric(c, name, &[("uid", uid)]).map(|m| m.value)
}

fn pod_namespaces(c: &Collection, state: &str) -> f64 {
    support::find_metric(c, "node_doctor_net_pod_namespaces", &[("state", state)])
        .expect("pod namespace counts")
        .value
}

/// A CoreDNS pod (cgroup v2, systemd driver) whose sockets overflow: 420 receive-buffer
/// errors in 15 s against 36,000 datagrams. Beside it, a hostNetwork pod whose process is in
/// the host's namespace (its counters, the node's, rise wildly: not a pod's) and a quiet pod.
#[test]
fn pod_udp_errors_in_a_coredns_pods_own_namespace() {
    let h = host(1000.0);
    h.symlink(HOST_NETNS, "/proc/1/ns/net").mkdir(&format!(
        "/var/log/pods/kube-system_coredns-7db6d8ff4d-x2k9p_{COREDNS_UID}"
    ));
    stage_v2_pod(&h, "burstable", COREDNS_UID, 48211);
    stage_v2_pod(&h, "besteffort", HOSTNET_UID, 3310);
    stage_v2_pod(&h, "besteffort", MESH_UID, 51873);
    stage_pod_process(
        &h,
        48211,
        4026532712,
        &snmp_6_18(100_000, 3, 8_700, 8_000),
        None,
    );
    stage_pod_process(&h, 3310, 4026531840, &snmp_6_18(1_000_000, 0, 0, 0), None);
    stage_pod_process(&h, 51873, 4026532988, &snmp_6_18(5_000, 0, 2, 0), None);
    let mut c = collector(&h);
    let first = support::collect(&mut c, &support::ctx());
    assert!(first.findings.is_empty(), "{:#?}", first.findings);
    assert!(matches!(first.status, Status::Ok), "{:?}", first.status);
    assert_eq!(pod_namespaces(&first, "read"), 2.0);
    assert_eq!(pod_namespaces(&first, "host_network"), 1.0);
    later(&h, 1015.0);
    stage_pod_process(
        &h,
        48211,
        4026532712,
        &snmp_6_18(136_000, 3, 9_120, 8_420),
        None,
    );
    stage_pod_process(
        &h,
        3310,
        4026531840,
        &snmp_6_18(2_000_000, 0, 90_000, 90_000),
        None,
    );
    stage_pod_process(&h, 51873, 4026532988, &snmp_6_18(5_300, 0, 2, 0), None);
    let second = support::collect(&mut c, &support::ctx());
    assert_eq!(
        ids(&second),
        ["net.pod_udp_errors"],
        "{:#?}",
        second.findings
    );
    let f = find(&second, "net.pod_udp_errors");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "kube-system/coredns-7db6d8ff4d-x2k9p");
    assert_eq!(text(f, "pod_uid"), COREDNS_UID);
    assert_eq!(text(f, "pod_namespace"), "kube-system");
    assert_eq!(num(f, "pid"), 48211.0);
    assert_eq!(num(f, "netns_inode"), 4026532712.0);
    assert_eq!(num(f, "udp_in_errors"), 420.0);
    assert_eq!(num(f, "udp_rcvbuf_errors"), 420.0);
    assert_eq!(num(f, "udp_errors_per_second"), 28.0);
    assert_eq!(num(f, "udp_in_datagrams"), 36_000.0);
    assert_eq!(num(f, "interval_seconds"), 15.0);
    // The cause: the pod's own sockets overflow; the node's counters do not show it.
    assert!(
        f.summary.en.contains("receive buffers overflow"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.en.contains("only the host's namespace"),
        "{}",
        f.summary.en
    );
    let steps = steps_en(f);
    assert!(
        steps.contains("SO_RCVBUF") && steps.contains("CoreDNS"),
        "{steps}"
    );
    let cmds = commands(f);
    assert!(
        cmds.contains("nsenter -t 48211 -n cat /proc/net/snmp"),
        "{cmds}"
    );
    assert!(
        cmds.contains("kubectl -n kube-system get pod coredns-7db6d8ff4d-x2k9p -o yaml"),
        "{cmds}"
    );
    assert!(source_url(f).contains("sysctl/net.html"));
    // Metrics: the pod over the floor, by name; the quiet pod and the host's namespace not.
    let m = support::find_metric(
        &second,
        "node_doctor_net_pod_udp_receive_errors_per_second",
        &[
            ("namespace", "kube-system"),
            ("pod", "coredns-7db6d8ff4d-x2k9p"),
        ],
    )
    .expect("the pod's rate");
    assert_eq!(m.value, 28.0);
    for uid in [MESH_UID, HOSTNET_UID] {
        assert_eq!(
            pod_metric(
                &second,
                "node_doctor_net_pod_udp_receive_errors_per_second",
                uid
            ),
            None
        );
    }
    assert_eq!(pod_namespaces(&second, "read"), 2.0);
    assert_eq!(pod_namespaces(&second, "host_network"), 1.0);
    assert_eq!(pod_namespaces(&second, "skipped"), 0.0);
}

/// A mesh pod (cgroup v1, cgroupfs driver) whose init container's iptables redirect makes
/// conntrack work in its namespace: 6 queries lost in 15 s (insert_failed and drop both
/// count each on 6.x), then 30 in 15 s: critical. The pod is not in the kubelet's log
/// directories: it is named by its UID.
#[test]
fn pod_conntrack_races_in_a_mesh_pods_own_namespace() {
    let h = host(1000.0);
    h.symlink(HOST_NETNS, "/proc/1/ns/net");
    stage_v1_pod(&h, "burstable", MESH_UID, 51873);
    let snmp = snmp_6_18(5_000, 0, 0, 0);
    stage_pod_process(
        &h,
        51873,
        4026532988,
        &snmp,
        Some(&nf_conntrack_6_18(35, 35)),
    );
    let mut c = collector(&h);
    assert!(support::collect(&mut c, &support::ctx())
        .findings
        .is_empty());
    later(&h, 1015.0);
    stage_pod_process(
        &h,
        51873,
        4026532988,
        &snmp,
        Some(&nf_conntrack_6_18(41, 41)),
    );
    let second = support::collect(&mut c, &support::ctx());
    assert_eq!(
        ids(&second),
        ["net.pod_conntrack_races"],
        "{:#?}",
        second.findings
    );
    let f = find(&second, "net.pod_conntrack_races");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, format!("pod {MESH_UID}"));
    assert_eq!(num(f, "lost"), 6.0);
    assert_eq!(num(f, "lost_per_second"), 0.4);
    assert_eq!(num(f, "insert_failed_increase"), 6.0);
    assert_eq!(num(f, "drop_increase"), 6.0);
    assert_eq!(num(f, "insert_failed_total"), 41.0);
    assert_eq!(num(f, "pid"), 51873.0);
    assert!(!f.evidence.contains_key("pod_name"));
    assert!(
        f.summary.en.contains("retries after 5 s"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.en.contains("service mesh"), "{}", f.summary.en);
    let steps = steps_en(f);
    assert!(
        steps.contains("single-request-reopen") && steps.contains("use-vc"),
        "{steps}"
    );
    assert!(
        steps.contains("NodeLocal DNSCache") && steps.contains("DNS proxy"),
        "{steps}"
    );
    let cmds = commands(f);
    assert!(cmds.contains("nsenter -t 51873 -n conntrack -S"), "{cmds}");
    // Unnamed: no kubectl command with a guessed name.
    assert!(!cmds.contains("kubectl"), "{cmds}");
    let src = f.remediation.source.as_ref().expect("a source");
    assert_eq!(src.doc, "002_af370464fa0f13dd.txt");
    assert_eq!(
        pod_metric(
            &second,
            "node_doctor_net_pod_conntrack_lost_per_second",
            MESH_UID
        ),
        Some(0.4)
    );
    later(&h, 1030.0);
    stage_pod_process(
        &h,
        51873,
        4026532988,
        &snmp,
        Some(&nf_conntrack_6_18(71, 71)),
    );
    let third = support::collect(&mut c, &support::ctx());
    let f = find(&third, "net.pod_conntrack_races");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "lost_per_second"), 2.0);
}

/// Quiet and bounded: counters flat, a pod whose remembered process is reused while its
/// cgroup is no longer read, a process that exited (absent, not an error), a pod found again
/// through its cgroup when its process moved namespace, and the cap on namespaces per run.
#[test]
fn pod_namespaces_are_quiet_when_flat_remembered_and_capped() {
    let h = host(1000.0);
    h.symlink(HOST_NETNS, "/proc/1/ns/net");
    let uids = [COREDNS_UID, MESH_UID, HOSTNET_UID];
    for (i, uid) in uids.iter().enumerate() {
        let pid = 100 + i as u32;
        stage_v2_pod(&h, "burstable", uid, pid);
        stage_pod_process(
            &h,
            pid,
            4026532700 + i as u64,
            &snmp_6_18(1_000, 0, 500, 500),
            Some(&nf_conntrack_6_18(3, 3)),
        );
    }
    let mut cfg = NetConfig::default();
    cfg.thresholds.max_pod_namespaces = 2;
    let mut c = NetCollector::new(h.node(), cfg);
    let first = support::collect(&mut c, &support::ctx());
    match &first.status {
        Status::Degraded(m) => assert!(
            m.contains("1 pods beyond the first 2 pod network namespaces are not read"),
            "{m}"
        ),
        s => panic!("the cap is not said: {s:?}"),
    }
    assert_eq!(pod_namespaces(&first, "read"), 2.0);
    assert_eq!(pod_namespaces(&first, "skipped"), 1.0);
    // Flat counters 15 s later: nothing. The first pod's cgroup is emptied: its remembered
    // process (same namespace) is read without it.
    later(&h, 1015.0);
    let first_procs = format!(
        "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope/cgroup.procs",
        COREDNS_UID.replace('-', "_")
    );
    h.write(&first_procs, "");
    let second = support::collect(&mut c, &support::ctx());
    assert!(second.findings.is_empty(), "{:#?}", second.findings);
    assert_eq!(pod_namespaces(&second, "read"), 2.0);
    // The second pod read (by UID order: HOSTNET_UID's, pid 102) exits: absent, not an
    // error, and the pod skipped so far takes its place under the cap. The first pod's pid
    // now belongs to a process of another namespace, and its cgroup names a new one: found
    // again, with no window yet (a new namespace), so its rising counters raise nothing.
    later(&h, 1030.0);
    std::fs::remove_dir_all(h.path("/proc/102")).unwrap();
    stage_pod_process(
        &h,
        999,
        4026533999,
        &snmp_6_18(9_000, 0, 9_000, 9_000),
        None,
    );
    h.write(&first_procs, "999\n");
    stage_pod_process(&h, 100, 4026534000, &snmp_6_18(1_000, 0, 500, 500), None);
    let third = support::collect(&mut c, &support::ctx());
    assert!(third.findings.is_empty(), "{:#?}", third.findings);
    assert!(matches!(third.status, Status::Ok), "{:?}", third.status);
    assert_eq!(pod_namespaces(&third, "read"), 2.0);
    assert_eq!(pod_namespaces(&third, "skipped"), 0.0);
    assert_eq!(pod_namespaces(&third, "no_process"), 1.0);
    // Its counters rise by 15 in the next 15 s: now it has a window.
    later(&h, 1045.0);
    h.write("/proc/999/net/snmp", snmp_6_18(9_900, 0, 9_015, 9_015));
    let fourth = support::collect(&mut c, &support::ctx());
    let f = find(&fourth, "net.pod_udp_errors");
    assert_eq!(num(f, "pid"), 999.0);
    assert_eq!(num(f, "netns_inode"), 4026533999.0);
    assert_eq!(num(f, "udp_in_errors"), 15.0);
}

/// `/proc/<pid>/net/snmp6` as Linux 6.18 prints it (`name<spaces>\tvalue`), with these
/// `Udp6InDatagrams`, `Udp6InErrors` and `Udp6RcvbufErrors`.
fn snmp6_6_18(in_datagrams: u64, in_errors: u64, rcvbuf: u64) -> String {
    include_str!("../fixtures/net/snmp6.linux-6.18")
        .lines()
        .map(|l| {
            let v = match l.split_whitespace().next() {
                Some("Udp6InDatagrams") => Some(in_datagrams),
                Some("Udp6InErrors") => Some(in_errors),
                Some("Udp6RcvbufErrors") => Some(rcvbuf),
                _ => None,
            };
            match v {
                Some(v) => format!("{}\t{v}\n", l.split('\t').next().unwrap_or(l)),
                None => format!("{l}\n"),
            }
        })
        .collect()
}

/// An IPv6-only service: its IPv4 counters stay flat while `Udp6InErrors` rises by 30 in
/// 15 s; the errors of both families are one figure.
#[test]
fn pod_udp6_errors_count_with_the_ipv4_ones() {
    let h = host(1000.0);
    h.symlink(HOST_NETNS, "/proc/1/ns/net");
    stage_v2_pod(&h, "burstable", COREDNS_UID, 48211);
    let snmp = snmp_6_18(100, 0, 4, 4);
    stage_pod_process(&h, 48211, 4026532712, &snmp, None);
    h.write("/proc/48211/net/snmp6", snmp6_6_18(20_000, 100, 100));
    let mut c = collector(&h);
    assert!(support::collect(&mut c, &support::ctx())
        .findings
        .is_empty());
    later(&h, 1015.0);
    h.write("/proc/48211/net/snmp6", snmp6_6_18(20_570, 130, 130));
    let second = support::collect(&mut c, &support::ctx());
    let f = find(&second, "net.pod_udp_errors");
    assert_eq!(num(f, "udp_in_errors"), 30.0);
    assert_eq!(num(f, "udp_rcvbuf_errors"), 30.0);
    assert_eq!(num(f, "udp_in_datagrams"), 570.0);
    assert_eq!(num(f, "udp_in_errors_total"), 134.0);
    assert_eq!(num(f, "udp_errors_per_second"), 2.0);
    assert_eq!(f.severity, Severity::Critical, "30 of 600: 5 %");
}

/// A node whose pid 1 namespace cannot be read: the pods' namespaces cannot be told from the
/// host's (a hostNetwork pod would pass the node's counters off as its own), so none is read,
/// the status says so, and the counts of the run before (a hostNetwork pod) are not repeated.
#[test]
fn pod_namespaces_are_not_read_without_the_hosts() {
    let h = host(1000.0);
    h.symlink(HOST_NETNS, "/proc/1/ns/net");
    stage_v2_pod(&h, "burstable", COREDNS_UID, 48211);
    stage_pod_process(&h, 48211, 4026532712, &snmp_6_18(1, 0, 0, 0), None);
    stage_v2_pod(&h, "besteffort", HOSTNET_UID, 3310);
    stage_pod_process(&h, 3310, 4026531840, &snmp_6_18(1, 0, 0, 0), None);
    let mut c = collector(&h);
    let first = support::collect(&mut c, &support::ctx());
    assert_eq!(pod_namespaces(&first, "read"), 1.0);
    assert_eq!(pod_namespaces(&first, "host_network"), 1.0);
    std::fs::remove_file(h.path("/proc/1/ns/net")).unwrap();
    later(&h, 1015.0);
    let out = support::collect(&mut c, &support::ctx());
    match &out.status {
        Status::Degraded(m) => assert!(
            m.contains("proc/1/ns/net; the pods' own network namespaces are not read"),
            "{m}"
        ),
        s => panic!("{s:?}"),
    }
    assert_eq!(pod_namespaces(&out, "read"), 0.0);
    assert_eq!(pod_namespaces(&out, "host_network"), 0.0);
}

/// Real kernel: a network namespace of the test's own (`unshare -n`, held by a sleeping
/// process, removed with it whatever happens) stands for a pod's. A UDP socket in it with the
/// smallest receive buffer, never read, is flooded over that namespace's loopback: the
/// kernel counts `RcvbufErrors` there. The collector, given a host root whose pod cgroup names
/// that process and whose `proc` is the real one, reads the rise through
/// `/proc/<pid>/net/snmp` and names the pod, while the host's namespace (here the test's
/// own, the collector's `netns_pid`) counted none of it.
#[test]
fn real_udp_buffer_overflows_in_a_pods_namespace() {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    use std::process::{Command, Stdio};
    let test = "real_udp_buffer_overflows_in_a_pods_namespace";
    if !support::root_or_skip(test) {
        return;
    }
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Command::new("unshare")
        .args([
            "-n",
            "sh",
            "-c",
            "ip link set lo up && echo ready && exec sleep 60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        collectors::skip!("SKIP {test}: unshare could not run");
        return;
    };
    let mut child = Reap(child);
    let mut line = String::new();
    if let Some(out) = child.0.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    if line.trim() != "ready" {
        collectors::skip!("SKIP {test}: the namespace could not be set up (unshare -n, ip)");
        return;
    }
    let pid = child.0.id();
    let udp = |p: &str, name: &str| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{p}/net/snmp")).unwrap();
        let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
        let names: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let values: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let i = names.iter().position(|n| *n == name).unwrap();
        values[i].parse().unwrap()
    };
    // The pod: its cgroup (v2, systemd driver) names the namespace's process; its log
    // directory names it.
    let h = FakeHost::new();
    h.symlink("/proc", "/proc");
    stage_v2_pod(&h, "besteffort", COREDNS_UID, pid);
    h.mkdir(&format!("/var/log/pods/default_udp-flood_{COREDNS_UID}"));
    // The host: the test's own namespace (pid 1's links may be closed to this sandbox).
    let me = std::process::id();
    let mut c = NetCollector::new(
        h.node(),
        NetConfig {
            netns_pid: me,
            ..NetConfig::default()
        },
    );
    let ctx = collectors::CollectContext::new("node-1", collectors::HostNetns::Same);
    let first = c.collect(&ctx);
    assert!(
        !ids(&first).contains(&"net.pod_udp_errors"),
        "{:#?}",
        first.findings
    );
    assert_eq!(pod_namespaces(&first, "read"), 1.0, "{:?}", first.status);
    let host_before = udp(&me.to_string(), "RcvbufErrors");
    let pod_before = udp(&pid.to_string(), "RcvbufErrors");
    // The flood, from a thread that joins the namespace: its sockets are made there.
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
    let sent = std::thread::spawn(move || -> Result<u64, String> {
        // SAFETY: setns on this thread only, with a namespace file we hold open.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let size: libc::c_int = 1;
        // SAFETY: a valid socket and a c_int option value of its size.
        let rc = unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let to = rx.local_addr().map_err(|e| e.to_string())?;
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let payload = [0u8; 1200];
        let mut n = 0;
        for _ in 0..2000 {
            if tx.send_to(&payload, to).is_ok() {
                n += 1;
            }
        }
        Ok(n)
    })
    .join()
    .expect("the flooding thread");
    let sent = match sent {
        Ok(n) => n,
        Err(e) => {
            collectors::skip!("SKIP {test}: could not flood in the namespace: {e}");
            return;
        }
    };
    let pod_rise = udp(&pid.to_string(), "RcvbufErrors") - pod_before;
    let host_rise = udp(&me.to_string(), "RcvbufErrors") - host_before;
    assert!(pod_rise >= 1000, "sent {sent}, overflowed {pod_rise}");
    assert!(host_rise < pod_rise / 2, "the host counted {host_rise}");
    // The uptime clock ticks in hundredths: let it move.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let second = c.collect(&ctx);
    let f = find(&second, "net.pod_udp_errors");
    assert_eq!(f.subject, "default/udp-flood");
    assert_eq!(num(f, "pid"), f64::from(pid));
    assert_eq!(num(f, "udp_rcvbuf_errors"), pod_rise as f64);
    assert!(num(f, "udp_in_errors") >= pod_rise as f64);
    // Nothing read the socket: every datagram that arrived was lost.
    assert_eq!(f.severity, Severity::Critical);
    assert!(commands(f).contains(&format!("nsenter -t {pid} -n cat /proc/net/snmp")));
    drop(child);
}

/// Kernel-log records in `/dev/kmsg` format, `(seconds since boot, level, message)`.
fn kmsg(records: &[(f64, u8, &str)]) -> String {
    records
        .iter()
        .enumerate()
        .map(|(i, (t, level, m))| format!("{level},{},{},-;{m}\n", 100 + i, (t * 1e6) as u64))
        .collect()
}

/// NIC transmit hangs from the kernel log, with the lines of public reports:
/// - 6.8+ wording (device first, no WARNING), r8125 on two ports, OpenWrt 6.6:
///   https://github.com/csrutil/OpenWrt-NIC-Drivers/issues/11
/// - ENA's missing Tx completions, Amazon Linux 2 (4.14) EKS node:
///   https://github.com/awslabs/amazon-eks-ami/issues/454
/// - the WARNING-block wording, 4.13.16 ftgmac100 on an OpenBMC:
///   https://github.com/openbmc/openbmc/issues/3192
///
/// One finding per interface, warning; the hang returning in a third burst is critical; the
/// commands carry the interface shell-quoted.
#[test]
fn nic_transmit_hangs_from_the_kernel_log() {
    let h = host(3710.0);
    let mut log = vec![
            (1356.296930, 2, "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5010 ms"),
            (1356.350008, 3, "r8125 0000:22:04.0 eth4: rtl_rxtx_empty_cond == 0 (loop: 42, delay: 100)."),
            (3651.381145, 2, "r8125 0000:22:01.0 eth1: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5010 ms"),
            (3651.434044, 3, "r8125 0000:22:01.0 eth1: rtl_rxtx_empty_cond == 0 (loop: 42, delay: 100)."),
            (3670.0, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 475."),
            (3673.0, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 476."),
            (3676.0, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 477."),
            (3676.1, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 478."),
            (3679.0, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 479."),
            (3679.1, 4, "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 480."),
            (3680.140984, 2, "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5160 ms"),
            (3680.194042, 3, "r8125 0000:22:04.0 eth4: rtl_rxtx_empty_cond == 0 (loop: 42, delay: 100)."),
            (3690.139253, 4, "------------[ cut here ]------------"),
            (3690.144052, 4, "WARNING: CPU: 0 PID: 7 at /kernel-source//net/sched/sch_generic.c:316 dev_watchdog+0x22c/0x244"),
            (3690.153715, 4, "NETDEV WATCHDOG: eth$(reboot) (ftgmac100): transmit queue 0 timed out"),
            (3690.160624, 4, "CPU: 0 PID: 7 Comm: ksoftirqd/0 Not tainted 4.13.16-a1340b5c31182ee3e191ac745f8e591badaeb586 #1"),
    ];
    h.write("/dev/kmsg", kmsg(&log));
    let mut c = collector(&h);
    let out = support::collect(&mut c, &support::ctx());
    assert!(matches!(out.status, Status::Ok), "{:?}", out.status);
    let hangs: Vec<&Finding> = out
        .findings
        .iter()
        .filter(|f| f.id == "net.tx_timeout")
        .collect();
    let subjects: Vec<&str> = hangs.iter().map(|f| f.subject.as_str()).collect();
    assert_eq!(subjects, ["eth$(reboot)", "eth0", "eth1", "eth4"]);
    assert!(hangs.iter().all(|f| f.severity == Severity::Warning));

    // r8125 eth4: two hangs 39 minutes apart, two bursts, the last 30 s ago.
    let eth4 = hangs[3];
    assert_eq!(text(eth4, "driver"), "r8125");
    assert_eq!(text(eth4, "queues"), "0");
    assert_eq!((num(eth4, "events"), num(eth4, "bursts")), (2.0, 2.0));
    assert_eq!(num(eth4, "last_seen_seconds_ago"), 29.0);
    assert!(text(eth4, "line").ends_with("timed out 5160 ms"));
    assert!(
        eth4.summary
            .en
            .contains("2 transmit hang(s) on eth4 (driver r8125), queue(s) 0, in 2 burst(s)"),
        "{}",
        eth4.summary.en
    );
    assert!(eth4
        .summary
        .en
        .contains("watchdog found a transmit queue stopped"));
    assert!(eth4.summary.en.contains("not a kernel crash"));
    assert!(steps_en(eth4).contains("ethtool -i"));
    let cmds = commands(eth4);
    for want in [
        "ethtool -S eth4",
        "ip -s link show dev eth4",
        "dmesg -T | grep -i 'transmit queue'",
    ] {
        assert!(cmds.contains(want), "{want} in {cmds}");
    }
    assert!(!cmds.contains("kubectl cordon"));
    assert_eq!(
        source_url(eth4),
        "https://docs.kernel.org/networking/netdevices.html"
    );

    // ENA eth0: six lines in one burst, queue 5; the ENA words and source.
    let eth0 = hangs[1];
    assert_eq!((num(eth0, "events"), num(eth0, "bursts")), (6.0, 1.0));
    assert_eq!((text(eth0, "driver"), text(eth0, "queues")), ("ena", "5"));
    assert!(eth0
        .summary
        .en
        .contains("completions the device never returned"));
    assert!(steps_en(eth0).contains("pps_allowance_exceeded"));
    assert!(commands(eth0).contains("grep -i 'completed on time'"));
    assert!(source_url(eth0).contains("amazon/ena.html"));

    // The name a host printed is quoted by the renderer, never run.
    let hostile = hangs[0];
    assert_eq!(text(hostile, "driver"), "ftgmac100");
    assert!(
        commands(hostile).contains("ethtool -S 'eth$(reboot)'"),
        "{}",
        commands(hostile)
    );

    // eth4 hangs again, a third burst: the resets do not cure it, critical. The kernel
    // appends the record; the collector reads only it, as a new one.
    later(&h, 3800.0);
    log.push((
        3790.0,
        2,
        "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5010 ms",
    ));
    h.write("/dev/kmsg", kmsg(&log));
    let third = support::collect(&mut c, &support::ctx());
    let f = third
        .findings
        .iter()
        .find(|f| f.subject == "eth4")
        .expect("eth4");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(num(f, "events"), 3.0);
    assert_eq!(num(f, "bursts"), 3.0);
    assert!(f.summary.en.contains("the resets do not cure it"));
    assert!(commands(f).contains("kubectl cordon"));
}

/// A node whose counters cannot be read still judges the kernel log's transmit hangs (the
/// 5.10 Raspberry Pi 4 bcmgenet report: https://github.com/raspberrypi/linux/issues/4485).
#[test]
fn transmit_hangs_are_judged_without_the_counters() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "30.00 10.00\n").write(
        "/dev/kmsg",
        kmsg(&[
            (18.953329, 4, "NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 3 timed out"),
            (18.953351, 4, "Modules linked in: cmac bnep hci_uart btbcm bluetooth ecdh_generic ecc 8021q garp stp llc vc4 brcmfmac brcmutil cec v3d drm_kms_helper gpu_sched sha256_generic cfg80211 rfkill drm bcm2835_cod6"),
            (18.954653, 4, "CPU: 3 PID: 0 Comm: swapper/3 Tainted: G         C        5.10.17-v7l+ #1414"),
        ]),
    );
    let out = support::collect(&mut collector(&h), &support::ctx());
    match &out.status {
        Status::Degraded(m) => assert!(m.contains("softnet"), "{m}"),
        s => panic!("{s:?}"),
    }
    assert_eq!(ids(&out), ["net.tx_timeout"]);
    let f = find(&out, "net.tx_timeout");
    assert_eq!(
        (f.subject.as_str(), f.severity),
        ("eth0", Severity::Warning)
    );
    assert_eq!((text(f, "driver"), text(f, "queues")), ("bcmgenet", "3"));
    assert_eq!(num(f, "last_seen_seconds_ago"), 11.0);
}
