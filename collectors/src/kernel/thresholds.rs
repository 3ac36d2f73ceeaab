//! The limits of the kernel rules: the collector's tunables, apart from the judge that uses
//! them.

use crate::kmsg::decay;

/// Thresholds of the kernel rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A container OOM-killed this many times within the window, the last time within
    /// `recent_seconds`, is critical (it is crash looping); fewer times, or longer ago, less.
    pub oom_cgroup_critical_kills: u64,
    /// System OOM kills within the window that make it critical (with the last one recent).
    pub oom_system_critical_kills: u64,
    /// MemAvailable below this share of MemTotal (percent) means the node is short of memory
    /// now: a system OOM in the window is then critical however old.
    pub oom_system_available_percent: f64,
    /// A kernel-log event at most this old (seconds) is recent: it keeps (most of) its
    /// severity even when its condition is not true now; older events are history (info).
    pub recent_seconds: u64,
    /// Container or pod memory limits below this cannot run anything (4 MiB).
    pub tiny_limit_bytes: u64,
    /// A runtime or kubelet filesystem at least this full (percent) puts a hung task on the
    /// disk-full path.
    pub hung_disk_used_percent: f64,
    /// Listen-queue drops per interval that make a warning...
    pub listen_drops_min: u64,
    /// ...and the rate (per second) that makes it critical.
    pub listen_drops_critical_per_second: f64,
    /// Tasks as a share of `pid_max` / `threads-max` (percent): warning, critical.
    pub pids_warning_percent: f64,
    pub pids_critical_percent: f64,
    /// `unregister_netdevice: waiting for` lines (all devices) within
    /// `unregister_frequent_seconds` that make the wait frequent (critical, and
    /// node-problem-detector's FrequentUnregisterNetDevice: its log counter's 3 in 20 min).
    pub unregister_frequent_waits: u64,
    pub unregister_frequent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            oom_cgroup_critical_kills: 3,
            oom_system_critical_kills: 2,
            oom_system_available_percent: 5.0,
            recent_seconds: decay::DEFAULT_RECENT_SECONDS,
            tiny_limit_bytes: 4 << 20,
            hung_disk_used_percent: 90.0,
            listen_drops_min: 1,
            listen_drops_critical_per_second: 10.0,
            pids_warning_percent: 80.0,
            pids_critical_percent: 95.0,
            unregister_frequent_waits: 3,
            unregister_frequent_seconds: 1200,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting(
                "oom_cgroup_critical_kills",
                self.oom_cgroup_critical_kills.to_string(),
            ),
            l::setting(
                "oom_system_critical_kills",
                self.oom_system_critical_kills.to_string(),
            ),
            l::setting(
                "oom_system_available_percent",
                l::percent(self.oom_system_available_percent),
            ),
            l::setting("recent_seconds", l::seconds(self.recent_seconds)),
            l::setting("tiny_limit_bytes", l::bytes(self.tiny_limit_bytes)),
            l::setting(
                "hung_disk_used_percent",
                l::percent(self.hung_disk_used_percent),
            ),
            l::setting("listen_drops_min", self.listen_drops_min.to_string()),
            l::setting(
                "listen_drops_critical_per_second",
                l::num(self.listen_drops_critical_per_second),
            ),
            l::setting(
                "pids_warning_percent",
                l::percent(self.pids_warning_percent),
            ),
            l::setting(
                "pids_critical_percent",
                l::percent(self.pids_critical_percent),
            ),
            l::setting(
                "unregister_frequent_waits",
                self.unregister_frequent_waits.to_string(),
            ),
            l::setting(
                "unregister_frequent_seconds",
                l::seconds(self.unregister_frequent_seconds),
            ),
        ]
    }
}
