use super::*;
use crate::net::sample::{
    Bond, Counters, CpuSoftnet, MtuPath, PodConntrack, PodCounters, SoftnetDelta, Sysctls,
};
use crate::proc::net_bonding::{self, Slave};

fn cpu(cpu: u32, processed: u64, dropped: u64, squeeze: u64) -> CpuSoftnet {
    CpuSoftnet {
        cpu,
        processed: processed * 10,
        dropped: dropped * 10,
        time_squeeze: squeeze * 10,
        delta: Some(SoftnetDelta {
            processed,
            dropped,
            time_squeeze: squeeze,
        }),
    }
}

fn sample(cpus: Vec<CpuSoftnet>) -> NetSample {
    NetSample {
        interval_seconds: Some(15.0),
        cpus,
        interfaces: Vec::new(),
        bonds: Vec::new(),
        mtu: None,
        sysctls: Sysctls {
            netdev_max_backlog: Some(1000),
            netdev_budget: Some(300),
            netdev_budget_usecs: Some(2000),
        },
        pods: Vec::new(),
        tx_timeouts: Vec::new(),
    }
}

fn eth0(delta: Counters) -> Interface {
    Interface {
        name: "eth0".into(),
        role: Some(Role::Physical),
        operstate: "up".into(),
        admin_up: true,
        speed_mbps: Some(10_000),
        duplex: Some("full".into()),
        mtu: Some(1500),
        counters: delta,
        delta: Some(delta),
    }
}

#[test]
fn a_quiet_node_raises_nothing() {
    let mut s = sample(vec![cpu(0, 150_000, 0, 3), cpu(1, 140_000, 0, 2)]);
    s.interfaces.push(eth0(Counters {
        rx_packets: 150_000,
        tx_packets: 140_000,
        rx_dropped: 3, // a few unknown-protocol frames: under the floors
        ..Counters::default()
    }));
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn the_first_run_judges_no_counter() {
    let mut s = sample(vec![cpu(0, 150_000, 100_000, 3_000)]);
    s.interval_seconds = None;
    s.interfaces.push(eth0(Counters {
        rx_errors: 100_000,
        carrier_changes: 40,
        ..Counters::default()
    }));
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn backlog_drops_on_one_cpu_with_uneven_work() {
    // 3,000 drops in 15 s, all on CPU 2, which processed 10x the mean of 4 CPUs' traffic.
    let s = sample(vec![
        cpu(0, 10_000, 0, 0),
        cpu(1, 10_000, 0, 0),
        cpu(2, 400_000, 3_000, 600),
        cpu(3, 10_000, 0, 0),
    ]);
    let d = judge(&s, &Thresholds::default());
    let b = d.iter().find(|d| d.id == "net.backlog_drops").unwrap();
    assert_eq!(b.severity, Severity::Warning);
    assert_eq!(b.evidence["dropped_per_second"].as_f64(), Some(200.0));
    assert_eq!(b.evidence["worst_cpu"].as_f64(), Some(2.0));
    assert_eq!(b.evidence["netdev_max_backlog"].as_f64(), Some(1000.0));
    assert!(b.conditions.contains("one_cpu"));
    assert!(b.conditions.contains("uneven"));
    // The squeezes come with drops: a warning, not info.
    let q = d.iter().find(|d| d.id == "net.softirq_squeeze").unwrap();
    assert_eq!(q.severity, Severity::Warning);
    assert_eq!(q.evidence["squeezes_per_second"].as_f64(), Some(40.0));
    assert!(q.conditions.contains("dropping"));
}

#[test]
fn heavy_backlog_drops_are_critical() {
    let s = sample(vec![cpu(0, 100_000, 3_000, 0), cpu(1, 100_000, 3_000, 0)]);
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(!d[0].conditions.contains("one_cpu"));
    assert!(!d[0].conditions.contains("uneven"));
}

#[test]
fn squeezes_without_drops_are_info() {
    let s = sample(vec![cpu(0, 100_000, 0, 300), cpu(1, 100_000, 0, 0)]);
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.softirq_squeeze");
    assert_eq!(d[0].severity, Severity::Info);
}

#[test]
fn interface_errors_by_kind() {
    let mut s = sample(Vec::new());
    s.interfaces.push(eth0(Counters {
        rx_packets: 100_000,
        tx_packets: 50_000,
        rx_missed: 600,
        rx_fifo: 0,
        rx_crc: 0,
        ..Counters::default()
    }));
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.interface_errors");
    assert_eq!(d[0].subject, "eth0");
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(d[0].evidence["bad_per_second"].as_f64(), Some(40.0));
    assert!(d[0].conditions.contains("ring"));
    assert!(!d[0].conditions.contains("wire"));
    // CRC errors at 2 % of the packets: a bad cable or optic, critical.
    s.interfaces[0] = eth0(Counters {
        rx_packets: 10_000,
        rx_errors: 200,
        rx_crc: 200,
        ..Counters::default()
    });
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(d[0].conditions.contains("wire"));
    // Material in share but not in rate (1 error in a quiet window): nothing.
    s.interfaces[0] = eth0(Counters {
        rx_packets: 100,
        rx_errors: 1,
        ..Counters::default()
    });
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn carrier_changes_rising_is_flapping() {
    let mut s = sample(Vec::new());
    let mut i = eth0(Counters::default());
    i.counters.carrier_changes = 14;
    i.delta = Some(Counters {
        carrier_changes: 4,
        ..Counters::default()
    });
    s.interfaces.push(i);
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.link_flapping");
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(d[0].evidence["carrier_changes"].as_f64(), Some(4.0));
    assert_eq!(d[0].evidence["carrier_changes_total"].as_f64(), Some(14.0));
    // One change (the link went down and stayed): not a flap.
    s.interfaces[0].delta = Some(Counters {
        carrier_changes: 1,
        ..Counters::default()
    });
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn link_down_only_when_set_up() {
    let mut s = sample(Vec::new());
    let mut i = eth0(Counters::default());
    i.operstate = "down".into();
    s.interfaces.push(i.clone());
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.link_down");
    assert_eq!(d[0].severity, Severity::Warning);
    // A port nobody set up (no IFF_UP): an unused port, not a fault.
    i.admin_up = false;
    s.interfaces[0] = i;
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

fn bond(slaves: &[(&str, &str, u64)]) -> Bond {
    Bond {
        name: "bond0".into(),
        bond: net_bonding::Bond {
            mode: "fault-tolerance (active-backup)".into(),
            mii_status: if slaves.iter().any(|s| s.1 == "up") {
                "up".into()
            } else {
                "down".into()
            },
            active_slave: slaves.iter().find(|s| s.1 == "up").map(|s| s.0.into()),
            slaves: slaves
                .iter()
                .map(|(n, st, f)| Slave {
                    name: (*n).into(),
                    mii_status: (*st).into(),
                    link_failure_count: Some(*f),
                })
                .collect(),
        },
        link_failures_delta: Some(1),
    }
}

#[test]
fn bond_with_a_slave_down_is_degraded() {
    let mut s = sample(Vec::new());
    s.bonds
        .push(bond(&[("eth0", "up", 0), ("eth1", "down", 3)]));
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.bond_degraded");
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(d[0].evidence["slaves_down"].as_str(), Some("eth1"));
    assert_eq!(d[0].evidence["slaves_up"].as_f64(), Some(1.0));
    assert_eq!(d[0].evidence["link_failures"].as_f64(), Some(3.0));
    s.bonds[0] = bond(&[("eth0", "down", 1), ("eth1", "down", 3)]);
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(d[0].conditions.contains("no_slave_up"));
    s.bonds[0] = bond(&[("eth0", "up", 1), ("eth1", "up", 3)]);
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn a_nic_at_half_duplex_is_misnegotiated() {
    let mut s = sample(Vec::new());
    let mut i = eth0(Counters::default());
    i.duplex = Some("half".into());
    i.speed_mbps = Some(100);
    s.interfaces.push(i.clone());
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.interface_speed");
    assert_eq!(d[0].evidence["speed_mbps"].as_f64(), Some(100.0));
    // A configured virtual interface, or a link that is down: not judged.
    i.role = Some(Role::Configured);
    s.interfaces[0] = i.clone();
    assert!(judge(&s, &Thresholds::default()).is_empty());
    i.role = Some(Role::Physical);
    i.operstate = "down".into();
    i.admin_up = false;
    s.interfaces[0] = i;
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

#[test]
fn pod_interfaces_larger_than_the_uplink_allows() {
    let mut s = sample(Vec::new());
    // flannel over a 1450 uplink (an OpenStack tenant network): flannel.1 left at 1450 and
    // cni0 at 1450, where 1400 fits.
    s.mtu = Some(MtuPath {
        uplink: "ens3".into(),
        uplink_mtu: 1450,
        overlay: Some(("flannel.1".into(), 1450, 50)),
        pod_side: vec![("cni0".into(), 1450), ("veth0a1b".into(), 1400)],
    });
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "net.mtu_mismatch");
    assert_eq!(d[0].subject, "ens3");
    assert_eq!(d[0].evidence["limit_mtu"].as_f64(), Some(1400.0));
    assert_eq!(
        d[0].evidence["too_large"].as_str(),
        Some("flannel.1, cni0 (1450)")
    );
    // Set right: quiet. No overlay: the pods' MTU may equal the uplink's.
    s.mtu = Some(MtuPath {
        uplink: "ens3".into(),
        uplink_mtu: 1450,
        overlay: Some(("flannel.1".into(), 1400, 50)),
        pod_side: vec![("cni0".into(), 1400)],
    });
    assert!(judge(&s, &Thresholds::default()).is_empty());
    s.mtu = Some(MtuPath {
        uplink: "eth0".into(),
        uplink_mtu: 1500,
        overlay: None,
        pod_side: vec![("lxc12ab".into(), 1500)],
    });
    assert!(judge(&s, &Thresholds::default()).is_empty());
}

/// A pod namespace whose counters moved by `delta` in the window (`None`: first seen).
fn pod(named: bool, delta: Option<PodCounters>) -> PodNetns {
    PodNetns {
        uid: "3f6c2b9e-8a41-4d7e-9c55-0b1a2e7d4f60".into(),
        namespace: named.then(|| "kube-system".to_string()),
        name: named.then(|| "coredns-7db6d8ff4d-x2k9p".to_string()),
        pid: 48211,
        netns: 4026532712,
        counters: PodCounters {
            udp_in_datagrams: 100_000,
            udp_in_errors: 9_000,
            udp_rcvbuf_errors: 8_000,
            udp_no_ports: 3,
            conntrack: Some(PodConntrack {
                insert_failed: 41,
                drop: 41,
            }),
        },
        delta,
    }
}

fn udp(datagrams: u64, errors: u64, rcvbuf: u64) -> PodCounters {
    PodCounters {
        udp_in_datagrams: datagrams,
        udp_in_errors: errors,
        udp_rcvbuf_errors: rcvbuf,
        udp_no_ports: 0,
        conntrack: Some(PodConntrack::default()),
    }
}

fn pods_only(pods: Vec<PodNetns>) -> NetSample {
    let mut s = sample(Vec::new());
    s.pods = pods;
    s
}

#[test]
fn a_pods_udp_buffer_overflows_are_named_with_rates() {
    // 420 errors in 15 s against 36,000 datagrams delivered: 28/s, 1.15 %: a warning.
    let s = pods_only(vec![pod(true, Some(udp(36_000, 420, 420)))]);
    let d = judge(&s, &Thresholds::default());
    assert_eq!(d.len(), 1, "{d:#?}");
    let f = &d[0];
    assert_eq!(f.id, "net.pod_udp_errors");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "kube-system/coredns-7db6d8ff4d-x2k9p");
    assert_eq!(f.evidence["udp_errors_per_second"].as_f64(), Some(28.0));
    // Evidence keeps three decimals.
    let share = f.evidence["udp_errors_percent"].as_f64().unwrap();
    assert!((share - 420.0 * 100.0 / 36_420.0).abs() < 1e-3, "{share}");
    assert_eq!(f.evidence["udp_rcvbuf_errors"].as_f64(), Some(420.0));
    assert_eq!(f.evidence["udp_in_errors_total"].as_f64(), Some(9_000.0));
    assert_eq!(f.evidence["pid"].as_f64(), Some(48211.0));
    assert_eq!(f.evidence["netns_inode"].as_f64(), Some(4026532712.0));
    assert_eq!(f.evidence["pod_namespace"].as_str(), Some("kube-system"));
    assert!(f.conditions.contains("rcvbuf"));
}

#[test]
fn a_pods_udp_errors_are_critical_by_share_and_quiet_under_the_floors() {
    let t = Thresholds::default();
    // 10 % of what arrived was lost: critical; errors that are not overflows.
    let s = pods_only(vec![pod(false, Some(udp(900, 100, 10)))]);
    let d = judge(&s, &t);
    assert_eq!(d[0].severity, Severity::Critical);
    assert_eq!(d[0].subject, "pod 3f6c2b9e-8a41-4d7e-9c55-0b1a2e7d4f60");
    assert!(!d[0].conditions.contains("rcvbuf"));
    assert!(!d[0].evidence.contains_key("pod_name"));
    // Under the window count (9 < 10), under the rate (14 in 15 s < 1/s), flat, first seen.
    for quiet in [
        Some(udp(1_000, 9, 9)),
        Some(udp(1_000, 14, 14)),
        Some(udp(1_000, 0, 0)),
        None,
    ] {
        assert!(
            judge(&pods_only(vec![pod(true, quiet)]), &t).is_empty(),
            "{quiet:?}"
        );
    }
    // The first run of the collector (no interval) judges no pod counter either.
    let mut s = pods_only(vec![pod(true, Some(udp(36_000, 420, 420)))]);
    s.interval_seconds = None;
    assert!(judge(&s, &t).is_empty());
}

#[test]
fn a_pods_own_conntrack_losing_packets_is_the_dns_delay() {
    let t = Thresholds::default();
    let mut d = udp(5_000, 0, 0);
    d.conntrack = Some(PodConntrack {
        insert_failed: 6,
        drop: 6,
    });
    let got = judge(&pods_only(vec![pod(true, Some(d))]), &t);
    assert_eq!(got.len(), 1, "{got:#?}");
    let f = &got[0];
    assert_eq!(f.id, "net.pod_conntrack_races");
    assert_eq!(f.severity, Severity::Warning);
    // A clash counts in both insert_failed and drop: 6 packets, not 12.
    assert_eq!(f.evidence["lost"].as_f64(), Some(6.0));
    assert_eq!(f.evidence["lost_per_second"].as_f64(), Some(0.4));
    assert_eq!(f.evidence["insert_failed_total"].as_f64(), Some(41.0));
    // At one a second: critical.
    d.conntrack = Some(PodConntrack {
        insert_failed: 0,
        drop: 15,
    });
    let got = judge(&pods_only(vec![pod(true, Some(d))]), &t);
    assert_eq!(got[0].severity, Severity::Critical);
    assert_eq!(got[0].evidence["drop_increase"].as_f64(), Some(15.0));
    // No conntrack in the namespace (module not loaded, or not read last run): nothing.
    d.conntrack = None;
    assert!(judge(&pods_only(vec![pod(true, Some(d))]), &t).is_empty());
}

#[test]
fn pod_counters_that_went_back_count_from_zero() {
    let was = udp(1_000, 500, 400);
    let now = udp(30, 12, 10);
    let d = now.since(&was);
    assert_eq!((d.udp_in_datagrams, d.udp_in_errors), (30, 12));
    let mut with_ct = now;
    with_ct.conntrack = Some(PodConntrack {
        insert_failed: 3,
        drop: 1,
    });
    // Conntrack appearing between runs (the module loaded): no window for it yet.
    assert_eq!(with_ct.since(&PodCounters::default()).conntrack, None);
    assert_eq!(with_ct.conntrack_lost(), 3);
}

fn hang(bursts: u64, age: Option<u64>) -> TxTimeouts {
    TxTimeouts {
        interface: "eth4".into(),
        driver: Some("r8125".into()),
        queues: vec![0],
        events: bursts + 1,
        bursts,
        ena: false,
        last_seen_seconds_ago: age,
        line:
            "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5160 ms"
                .into(),
    }
}

/// A transmit hang warns; it recurring in three separate bursts is critical (the driver's
/// resets do not cure it); once its last line is history, info.
#[test]
fn a_transmit_hang_warns_recurs_critical_and_decays() {
    let t = Thresholds::default();
    let d = tx_timeout(&hang(2, Some(30)), &t);
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.subject, "eth4");
    assert_eq!(
        d.evidence.get("bursts"),
        Some(&crate::finding::Evidence::from(2u64))
    );
    assert!(d.conditions.contains("recent") && !d.conditions.contains("repeated"));
    let d = tx_timeout(&hang(t.tx_timeout_critical_bursts, Some(30)), &t);
    assert_eq!(d.severity, Severity::Critical);
    assert!(d.conditions.contains("repeated"));
    let d = tx_timeout(&hang(5, Some(t.tx_timeout_recent_seconds + 1)), &t);
    assert_eq!(d.severity, Severity::Info);
    assert!(d.conditions.contains("past"));
    // No clock to date the line: it was read within the window, so recent.
    assert_eq!(tx_timeout(&hang(1, None), &t).severity, Severity::Warning);
    // The sample's hangs are judged with the rest.
    let mut s = sample(Vec::new());
    s.tx_timeouts = vec![hang(1, Some(5))];
    let all = judge(&s, &t);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].id, "net.tx_timeout");
}
