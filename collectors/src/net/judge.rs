//! The net rules: a typed [`NetSample`] -> drafts (id, severity, subject, evidence,
//! conditions) under the [`Thresholds`]. Their words are in `collectors/rules/net.toml`.
//! Pure: testable without a host. Every rate is over the window between two runs; the first
//! run judges only states (a link down, a bond degraded), never counters.
//!
//! - `net.backlog_drops`: softnet `dropped` rising (Netdata `1min_netdev_backlog_exceeded`).
//! - `net.softirq_squeeze`: softnet `time_squeeze` rising (Netdata `10min_netdev_budget_ran_outs`).
//! - `net.interface_errors`: rx/tx errors, drops and misses per interface (node_exporter's
//!   mixin `NodeNetworkReceiveErrs`/`NodeNetworkTransmitErrs`, Netdata `interface_inbound_errors`).
//! - `net.link_flapping`: `carrier_changes` rising (the mixin's `NodeNetworkInterfaceFlapping`).
//! - `net.link_down`: an interface set up whose link is down (`NO-CARRIER`).
//! - `net.interface_speed`: a NIC whose link came up at half duplex (a failed
//!   auto-negotiation: collisions and late retransmits on a link that should be full duplex).
//! - `net.mtu_mismatch`: the CNI's devices (overlay, bridge, pod veths) with an MTU larger
//!   than the uplink's minus the overlay's encapsulation.
//! - `net.bond_degraded`: a bond with a slave whose MII status is not up (the mixin's
//!   `NodeBondingDegraded`).
//! - `net.pod_udp_errors`: UDP receive errors rising in one pod's own network namespace (its
//!   sockets' buffers overflow).
//! - `net.pod_conntrack_races`: `insert_failed`/`drop` rising in one pod's own namespace's
//!   conntrack (its own netfilter rules race: the 5-second DNS delay for that pod).
//! - `net.tx_timeout`: an interface whose transmit hung, from the kernel log (`NETDEV
//!   WATCHDOG`, ENA's missing Tx completions): warning, critical when it recurs in several
//!   bursts, info once the last line is history.

use crate::finding::Severity;
use crate::rules::{Draft, Item};

use super::sample::{CpuSoftnet, Interface, NetSample, PodNetns, Role, TxTimeouts};
use super::thresholds::Thresholds;

/// The subject of the softnet findings: the node's receive path, over all CPUs.
const SOFTNET: &str = "softnet backlog";

/// Applies the net rules.
pub fn judge(sample: &NetSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(backlog_drops(sample, t));
    out.extend(softirq_squeeze(sample, t));
    for i in &sample.interfaces {
        out.extend(interface_errors(i, sample.interval_seconds, t));
        out.extend(link_flapping(i, sample.interval_seconds, t));
        out.extend(link_down(i));
        out.extend(half_duplex(i));
    }
    for b in &sample.bonds {
        out.extend(bond_degraded(b));
    }
    out.extend(sample.mtu.as_ref().and_then(mtu_mismatch));
    for p in &sample.pods {
        out.extend(pod_udp_errors(p, sample.interval_seconds, t));
        out.extend(pod_conntrack_races(p, sample.interval_seconds, t));
    }
    out.extend(sample.tx_timeouts.iter().map(|x| tx_timeout(x, t)));
    out
}

/// `net.tx_timeout`: one interface's transmit hangs in the kernel log. A hang is a warning:
/// the driver resets the NIC and traffic may resume, or not. It recurring in
/// `tx_timeout_critical_bursts` separate bursts is critical (the resets do not cure it); a last
/// line older than `tx_timeout_recent_seconds` is history (info).
pub fn tx_timeout(x: &TxTimeouts, t: &Thresholds) -> Draft {
    let recent =
        crate::kmsg::decay::is_recent(x.last_seen_seconds_ago, t.tx_timeout_recent_seconds);
    let repeated = x.bursts >= t.tx_timeout_critical_bursts;
    let severity = match (recent, repeated) {
        (false, _) => Severity::Info,
        (true, true) => Severity::Critical,
        (true, false) => Severity::Warning,
    };
    let queues = x
        .queues
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    Draft::new("net.tx_timeout", severity)
        .subject(x.interface.as_str())
        .evidence("interface", x.interface.as_str())
        .evidence_opt("driver", x.driver.as_deref())
        .evidence_opt("queues", (!queues.is_empty()).then_some(queues))
        .evidence("events", x.events)
        .evidence("bursts", x.bursts)
        .evidence_opt("last_seen_seconds_ago", x.last_seen_seconds_ago)
        .evidence_opt("line", (!x.line.is_empty()).then(|| x.line.clone()))
        .when_if("ena", x.ena)
        .when_if("repeated", repeated)
        .when(if recent { "recent" } else { "past" })
}

/// What every pod finding carries: who the pod is and which process and namespace were read.
fn pod_draft(id: &str, severity: Severity, p: &PodNetns, seconds: f64) -> Draft {
    Draft::new(id, severity)
        .subject(p.label())
        .var("pod", p.label())
        .evidence("pod_uid", p.uid.as_str())
        .evidence_opt("pod_namespace", p.namespace.as_deref())
        .evidence_opt("pod_name", p.name.as_deref())
        .evidence("pid", u64::from(p.pid))
        .evidence("netns_inode", p.netns)
        .evidence("interval_seconds", seconds)
}

/// The UDP receive errors of a pod's own namespace: `InErrors` (which counts the buffer
/// overflows, `RcvbufErrors`, with checksum and memory errors).
pub fn pod_udp_errors(p: &PodNetns, seconds: Option<f64>, t: &Thresholds) -> Option<Draft> {
    let seconds = seconds.filter(|s| *s > 0.0)?;
    let d = p.delta?;
    let errors = d.udp_in_errors;
    let rate = errors as f64 / seconds;
    if errors < t.pod_udp_errors_min || rate < t.pod_udp_errors_per_second {
        return None;
    }
    let share = percent(errors, d.udp_in_datagrams.saturating_add(errors));
    let severity = if share >= t.pod_udp_errors_critical_percent {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let rcvbuf = d.udp_rcvbuf_errors.saturating_mul(2) >= errors;
    Some(
        pod_draft("net.pod_udp_errors", severity, p, seconds)
            .evidence("udp_in_errors", errors)
            .evidence("udp_rcvbuf_errors", d.udp_rcvbuf_errors)
            .evidence("udp_in_datagrams", d.udp_in_datagrams)
            .evidence("udp_no_ports", d.udp_no_ports)
            .evidence("udp_errors_per_second", rate)
            .evidence("udp_errors_percent", share)
            .evidence("udp_in_errors_total", p.counters.udp_in_errors)
            .when_if("rcvbuf", rcvbuf),
    )
}

/// Packets lost by the conntrack of a pod's own namespace (its own netfilter rules: a
/// service mesh's redirect), as the node's lose them in the insert race.
pub fn pod_conntrack_races(p: &PodNetns, seconds: Option<f64>, t: &Thresholds) -> Option<Draft> {
    let seconds = seconds.filter(|s| *s > 0.0)?;
    let d = p.delta?;
    let c = d.conntrack?;
    let lost = d.conntrack_lost();
    if lost < t.pod_conntrack_lost_min.max(1) {
        return None;
    }
    let rate = lost as f64 / seconds;
    let severity = if rate >= t.pod_conntrack_lost_critical_per_second {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let total = p.counters.conntrack.unwrap_or_default();
    Some(
        pod_draft("net.pod_conntrack_races", severity, p, seconds)
            .evidence("lost", lost)
            .evidence("lost_per_second", rate)
            .evidence("insert_failed_increase", c.insert_failed)
            .evidence("drop_increase", c.drop)
            .evidence("insert_failed_total", total.insert_failed)
            .evidence("drop_total", total.drop),
    )
}

/// The pods' packets must fit the uplink once encapsulated: the overlay device's MTU, the
/// CNI bridge's and the pod veths' at most the uplink's minus the encapsulation.
fn mtu_mismatch(m: &super::sample::MtuPath) -> Option<Draft> {
    let overhead = m.overlay.as_ref().map_or(0, |o| o.2);
    let limit = m.uplink_mtu.saturating_sub(overhead);
    let mut over: Vec<&(String, u64)> = m.pod_side.iter().filter(|(_, mtu)| *mtu > limit).collect();
    let overlay_over = m.overlay.as_ref().filter(|o| o.1 > limit);
    if over.is_empty() && overlay_over.is_none() {
        return None;
    }
    over.sort_by_key(|(n, mtu)| (std::cmp::Reverse(*mtu), n.clone()));
    let largest = over
        .first()
        .map(|o| o.1)
        .into_iter()
        .chain(overlay_over.map(|o| o.1))
        .max()
        .unwrap_or(0);
    let mut names: Vec<String> = overlay_over.map(|o| o.0.clone()).into_iter().collect();
    names.extend(over.iter().map(|(n, mtu)| format!("{n} ({mtu})")));
    Some(
        Draft::new("net.mtu_mismatch", Severity::Warning)
            .subject(m.uplink.as_str())
            .evidence("uplink", m.uplink.as_str())
            .evidence("uplink_mtu", m.uplink_mtu)
            .evidence("overhead_bytes", overhead)
            .evidence("limit_mtu", limit)
            .evidence("largest_mtu", largest)
            .evidence("too_large", names.join(", "))
            .evidence_opt("overlay", m.overlay.as_ref().map(|o| o.0.as_str()))
            .evidence_opt("overlay_mtu", m.overlay.as_ref().map(|o| o.1)),
    )
}

/// The softnet window over all CPUs.
struct Softnet {
    seconds: f64,
    processed: u64,
    dropped: u64,
    squeezes: u64,
    /// The CPU with most drops (or squeezes), and its count.
    worst_dropped: (u32, u64),
    worst_squeezed: (u32, u64),
    /// The busiest CPU's processed frames over the mean, when the traffic is material.
    uneven: Option<(u32, f64)>,
}

fn softnet(sample: &NetSample, t: &Thresholds) -> Option<Softnet> {
    let seconds = sample.interval_seconds.filter(|s| *s > 0.0)?;
    let with: Vec<(&CpuSoftnet, _)> = sample
        .cpus
        .iter()
        .filter_map(|c| c.delta.map(|d| (c, d)))
        .collect();
    if with.is_empty() {
        return None;
    }
    let sum = |f: fn(&super::sample::SoftnetDelta) -> u64| -> u64 {
        with.iter().map(|(_, d)| f(d)).fold(0, u64::saturating_add)
    };
    let worst = |f: fn(&super::sample::SoftnetDelta) -> u64| -> (u32, u64) {
        with.iter()
            .map(|(c, d)| (c.cpu, f(d)))
            .max_by_key(|(cpu, v)| (*v, std::cmp::Reverse(*cpu)))
            .unwrap_or((0, 0))
    };
    let processed = sum(|d| d.processed);
    let busiest = worst(|d| d.processed);
    // The busiest CPU against the mean of the others (at least one frame each, so that all
    // the work on one CPU reads as a large ratio, not a division by zero).
    let others = processed.saturating_sub(busiest.1) as f64 / (with.len().max(2) - 1) as f64;
    let ratio = busiest.1 as f64 / others.max(1.0);
    let uneven = (with.len() > 1
        && processed as f64 / seconds >= t.uneven_min_per_second
        && ratio >= t.uneven_ratio)
        .then_some((busiest.0, ratio));
    Some(Softnet {
        seconds,
        processed,
        dropped: sum(|d| d.dropped),
        squeezes: sum(|d| d.time_squeeze),
        worst_dropped: worst(|d| d.dropped),
        worst_squeezed: worst(|d| d.time_squeeze),
        uneven,
    })
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn with_uneven(d: Draft, s: &Softnet, cpus: usize) -> Draft {
    let d = d.var("other_cpus", cpus.saturating_sub(1) as u64);
    match s.uneven {
        Some((cpu, ratio)) => d
            .when("uneven")
            .evidence("busiest_cpu", u64::from(cpu))
            .evidence("busiest_cpu_ratio", ratio),
        None => d,
    }
}

fn backlog_drops(sample: &NetSample, t: &Thresholds) -> Option<Draft> {
    let s = softnet(sample, t)?;
    let rate = s.dropped as f64 / s.seconds;
    if rate < t.backlog_drops_per_second {
        return None;
    }
    let share = percent(s.dropped, s.processed.saturating_add(s.dropped));
    let severity = if rate >= t.backlog_drops_critical_per_second
        && share >= t.backlog_drops_critical_percent
    {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let one_cpu = s.dropped > 0 && s.worst_dropped.1 as f64 >= 0.8 * s.dropped as f64;
    let d = Draft::new("net.backlog_drops", severity)
        .subject(SOFTNET)
        .evidence("dropped_per_second", rate)
        .evidence("dropped", s.dropped)
        .evidence("dropped_percent", share)
        .evidence("processed_per_second", s.processed as f64 / s.seconds)
        .evidence("worst_cpu", u64::from(s.worst_dropped.0))
        .evidence("worst_cpu_dropped", s.worst_dropped.1)
        .evidence("interval_seconds", s.seconds)
        .evidence_opt("netdev_max_backlog", sample.sysctls.netdev_max_backlog)
        .when_if("one_cpu", one_cpu && sample.cpus.len() > 1);
    Some(with_uneven(d, &s, sample.cpus.len()))
}

fn softirq_squeeze(sample: &NetSample, t: &Thresholds) -> Option<Draft> {
    let s = softnet(sample, t)?;
    let rate = s.squeezes as f64 / s.seconds;
    if rate < t.squeeze_per_second {
        return None;
    }
    let dropping = s.dropped as f64 / s.seconds >= t.backlog_drops_per_second;
    let severity = if dropping {
        Severity::Warning
    } else {
        Severity::Info
    };
    let d = Draft::new("net.softirq_squeeze", severity)
        .subject(SOFTNET)
        .evidence("squeezes_per_second", rate)
        .evidence("squeezes", s.squeezes)
        .evidence("processed_per_second", s.processed as f64 / s.seconds)
        .evidence("worst_cpu", u64::from(s.worst_squeezed.0))
        .evidence("worst_cpu_squeezes", s.worst_squeezed.1)
        .evidence("interval_seconds", s.seconds)
        .evidence_opt("netdev_budget", sample.sysctls.netdev_budget)
        .evidence_opt("netdev_budget_usecs", sample.sysctls.netdev_budget_usecs)
        .when_if("dropping", dropping);
    Some(with_uneven(d, &s, sample.cpus.len()))
}

fn role(i: &Interface) -> &'static str {
    match i.role {
        Some(Role::Bond) => "bond",
        Some(Role::Configured) => "configured",
        _ => "physical",
    }
}

fn interface_errors(i: &Interface, seconds: Option<f64>, t: &Thresholds) -> Option<Draft> {
    let seconds = seconds.filter(|s| *s > 0.0)?;
    let d = i.delta?;
    // Errors and drops: the kernel's totals (rx_errors already includes crc, frame, fifo and
    // over on most drivers; rx_missed is the NIC's ring overflow, kept apart by most).
    let errors = d.rx_errors.saturating_add(d.tx_errors);
    let drops = d
        .rx_dropped
        .saturating_add(d.tx_dropped)
        .saturating_add(d.rx_missed);
    let bad = errors.max(drops);
    let packets = d.rx_packets.saturating_add(d.tx_packets);
    let rate = bad as f64 / seconds;
    let share = percent(bad, packets.saturating_add(d.rx_missed));
    if rate < t.interface_errors_per_second || share < t.interface_errors_percent {
        return None;
    }
    let severity = if share >= t.interface_errors_critical_percent {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let ring = d.rx_missed > 0 || d.rx_fifo > 0 || d.rx_over > 0;
    let wire = d.rx_crc > 0 || d.rx_frame > 0;
    Some(
        Draft::new("net.interface_errors", severity)
            .subject(i.name.as_str())
            .evidence("interface", i.name.as_str())
            .evidence("role", role(i))
            .evidence("rx_errors", d.rx_errors)
            .evidence("tx_errors", d.tx_errors)
            .evidence("rx_dropped", d.rx_dropped)
            .evidence("tx_dropped", d.tx_dropped)
            .evidence("rx_missed", d.rx_missed)
            .evidence("rx_fifo", d.rx_fifo)
            .evidence("rx_crc", d.rx_crc)
            .evidence("rx_frame", d.rx_frame)
            .evidence("packets", packets)
            .evidence("bad_per_second", rate)
            .evidence("bad_percent", share)
            .evidence("interval_seconds", seconds)
            .when_if("ring", ring)
            .when_if("wire", wire)
            .when_if(
                "rx_dropped_only",
                d.rx_dropped > 0 && !ring && !wire && errors == 0,
            )
            .when_if("tx", d.tx_errors > 0 || d.tx_dropped > 0),
    )
}

fn link_flapping(i: &Interface, seconds: Option<f64>, t: &Thresholds) -> Option<Draft> {
    let seconds = seconds.filter(|s| *s > 0.0)?;
    let changes = i.delta?.carrier_changes;
    if changes < t.flap_changes {
        return None;
    }
    let severity = if changes >= t.flap_critical_changes {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(
        Draft::new("net.link_flapping", severity)
            .subject(i.name.as_str())
            .evidence("interface", i.name.as_str())
            .evidence("role", role(i))
            .evidence("carrier_changes", changes)
            .evidence("carrier_changes_total", i.counters.carrier_changes)
            .evidence("operstate", i.operstate.as_str())
            .evidence("interval_seconds", seconds)
            .when_if("bond", i.role == Some(Role::Bond)),
    )
}

fn link_down(i: &Interface) -> Option<Draft> {
    if !i.link_down() {
        return None;
    }
    let severity = if i.role == Some(Role::Bond) {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(
        Draft::new("net.link_down", severity)
            .subject(i.name.as_str())
            .evidence("interface", i.name.as_str())
            .evidence("role", role(i))
            .evidence("operstate", i.operstate.as_str())
            .evidence("carrier_changes_total", i.counters.carrier_changes)
            .when_if("bond", i.role == Some(Role::Bond)),
    )
}

fn half_duplex(i: &Interface) -> Option<Draft> {
    if i.role != Some(Role::Physical) || i.operstate != "up" || i.duplex.as_deref() != Some("half")
    {
        return None;
    }
    Some(
        Draft::new("net.interface_speed", Severity::Warning)
            .subject(i.name.as_str())
            .evidence("interface", i.name.as_str())
            .evidence("duplex", "half")
            .evidence_opt("speed_mbps", i.speed_mbps),
    )
}

fn bond_degraded(b: &super::sample::Bond) -> Option<Draft> {
    let down: Vec<&str> = b
        .bond
        .slaves
        .iter()
        .filter(|s| !s.is_up())
        .map(|s| s.name.as_str())
        .collect();
    let up = b.bond.slaves.len() - down.len();
    let bond_down = b.bond.mii_status != "up";
    if down.is_empty() && !bond_down {
        return None;
    }
    let severity = if up == 0 || bond_down {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let failures: u64 = b
        .bond
        .slaves
        .iter()
        .filter_map(|s| s.link_failure_count)
        .sum();
    Some(
        Draft::new("net.bond_degraded", severity)
            .subject(b.name.as_str())
            .evidence("bond", b.name.as_str())
            .evidence("mode", b.bond.mode.as_str())
            .evidence("mii_status", b.bond.mii_status.as_str())
            .evidence("slaves", b.bond.slaves.len() as u64)
            .evidence("slaves_up", up as u64)
            .evidence("slaves_down", down.join(", "))
            .evidence("link_failures", failures)
            .evidence_opt("active_slave", b.bond.active_slave.as_deref())
            .evidence_opt("link_failures_in_window", b.link_failures_delta)
            .items(
                "down_slaves",
                down.iter()
                    .map(|s| Item::new().value("slave", *s))
                    .collect(),
            )
            .when_if("no_slave_up", up == 0),
    )
}

#[cfg(test)]
mod tests;
