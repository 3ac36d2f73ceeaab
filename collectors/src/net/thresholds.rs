//! The limits of the net rules, apart from the judge that uses them. Every rate is over the
//! window between two runs (15 s at the default interval), never a total since boot.

/// Thresholds of the net rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `net.backlog_drops`: frames dropped per second, summed over CPUs, because a CPU's
    /// backlog was full (Netdata's `1min_netdev_backlog_exceeded` warns on any drop in a
    /// minute; one a second keeps a single burst from raising it).
    pub backlog_drops_per_second: f64,
    /// ... critical at this many per second and this share of the frames processed.
    pub backlog_drops_critical_per_second: f64,
    pub backlog_drops_critical_percent: f64,
    /// `net.softirq_squeeze`: times per second the receive softirq stopped with work left
    /// (`time_squeeze`), summed over CPUs. A squeeze alone loses nothing: it is info, or a
    /// warning when the backlog drops too.
    pub squeeze_per_second: f64,
    /// Both rules: the busiest CPU's processed frames at this many times the mean of the other
    /// CPUs' marks the
    /// receive work as stuck on few CPUs (RPS/RSS advice). Judged over the window, with at
    /// least `uneven_min_per_second` frames per second in all.
    pub uneven_ratio: f64,
    pub uneven_min_per_second: f64,
    /// `net.interface_errors`: errors, drops or misses per second on one interface…
    pub interface_errors_per_second: f64,
    /// ... and at least this share of its packets (rx + tx) in the window.
    pub interface_errors_percent: f64,
    /// ... critical at this share.
    pub interface_errors_critical_percent: f64,
    /// `net.link_flapping`: carrier changes in one window (a flap is two: down, then up).
    pub flap_changes: u64,
    /// ... critical at this many.
    pub flap_critical_changes: u64,
    /// Most interfaces watched (physical, bonds, configured); beyond it the rest is skipped
    /// and said so.
    pub max_interfaces: usize,
    /// `net.pod_udp_errors`: UDP receive errors (`Udp: InErrors`) per second in one pod's
    /// network namespace…
    pub pod_udp_errors_per_second: f64,
    /// ... and at least this many in the window (a burst of a few is no finding).
    pub pod_udp_errors_min: u64,
    /// ... critical at this share of the datagrams the namespace received (delivered + errors).
    pub pod_udp_errors_critical_percent: f64,
    /// `net.pod_conntrack_races`: packets a pod namespace's own conntrack lost in one window
    /// (`insert_failed`/`drop`): each lost DNS query is a 5-second delay (handbook 002), so one
    /// is material.
    pub pod_conntrack_lost_min: u64,
    /// ... critical at this many per second.
    pub pod_conntrack_lost_critical_per_second: f64,
    /// Most pod network namespaces read per run; the pods beyond are skipped and said so.
    pub max_pod_namespaces: usize,
    /// `net.tx_timeout`: kernel-log transmit-hang lines of one interface less than this apart
    /// are one burst (the watchdog repeats every few seconds while a queue stays stuck; ENA
    /// every few seconds per missing completion).
    pub tx_timeout_burst_gap_seconds: u64,
    /// ... critical at this many bursts in the lookback window: the driver's reset after each
    /// hang does not cure it (the gpu collector's Xid repeats escalate the same way).
    pub tx_timeout_critical_bursts: u64,
    /// ... a last line older than this is history: info (`kmsg::decay`'s 15 min).
    pub tx_timeout_recent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            backlog_drops_per_second: 1.0,
            backlog_drops_critical_per_second: 100.0,
            backlog_drops_critical_percent: 1.0,
            squeeze_per_second: 10.0,
            uneven_ratio: 4.0,
            uneven_min_per_second: 1000.0,
            interface_errors_per_second: 1.0,
            interface_errors_percent: 0.1,
            interface_errors_critical_percent: 1.0,
            flap_changes: 2,
            flap_critical_changes: 6,
            max_interfaces: 64,
            pod_udp_errors_per_second: 1.0,
            pod_udp_errors_min: 10,
            pod_udp_errors_critical_percent: 5.0,
            pod_conntrack_lost_min: 1,
            pod_conntrack_lost_critical_per_second: 1.0,
            max_pod_namespaces: 256,
            tx_timeout_burst_gap_seconds: 60,
            tx_timeout_critical_bursts: 3,
            tx_timeout_recent_seconds: crate::kmsg::decay::DEFAULT_RECENT_SECONDS,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        let per_s = |v: f64| format!("{} /s", l::num(v));
        let pct = |v: f64| format!("{} %", l::num(v));
        vec![
            l::setting(
                "backlog_drops_per_second",
                per_s(self.backlog_drops_per_second),
            ),
            l::setting(
                "backlog_drops_critical_per_second",
                per_s(self.backlog_drops_critical_per_second),
            ),
            l::setting(
                "backlog_drops_critical_percent",
                pct(self.backlog_drops_critical_percent),
            ),
            l::setting("squeeze_per_second", per_s(self.squeeze_per_second)),
            l::setting("uneven_ratio", format!("{}×", l::num(self.uneven_ratio))),
            l::setting("uneven_min_per_second", per_s(self.uneven_min_per_second)),
            l::setting(
                "interface_errors_per_second",
                per_s(self.interface_errors_per_second),
            ),
            l::setting(
                "interface_errors_percent",
                pct(self.interface_errors_percent),
            ),
            l::setting(
                "interface_errors_critical_percent",
                pct(self.interface_errors_critical_percent),
            ),
            l::setting("flap_changes", self.flap_changes.to_string()),
            l::setting(
                "flap_critical_changes",
                self.flap_critical_changes.to_string(),
            ),
            l::setting("max_interfaces", self.max_interfaces.to_string()),
            l::setting(
                "pod_udp_errors_per_second",
                per_s(self.pod_udp_errors_per_second),
            ),
            l::setting("pod_udp_errors_min", self.pod_udp_errors_min.to_string()),
            l::setting(
                "pod_udp_errors_critical_percent",
                pct(self.pod_udp_errors_critical_percent),
            ),
            l::setting(
                "pod_conntrack_lost_min",
                self.pod_conntrack_lost_min.to_string(),
            ),
            l::setting(
                "pod_conntrack_lost_critical_per_second",
                per_s(self.pod_conntrack_lost_critical_per_second),
            ),
            l::setting("max_pod_namespaces", self.max_pod_namespaces.to_string()),
            l::setting(
                "tx_timeout_burst_gap_seconds",
                format!("{} s", self.tx_timeout_burst_gap_seconds),
            ),
            l::setting(
                "tx_timeout_critical_bursts",
                self.tx_timeout_critical_bursts.to_string(),
            ),
            l::setting(
                "tx_timeout_recent_seconds",
                format!("{} s", self.tx_timeout_recent_seconds),
            ),
        ]
    }
}
