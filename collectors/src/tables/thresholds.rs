//! The limits of the `tables` rules: each a raise bar, a stricter critical bar and a lower
//! clear bar (a finding raised stays until its figure falls below the clear bar). No handbook
//! covers these tables; the figures follow the kernel's own behaviour (cited per field) and
//! the peers' alerts (node_exporter's mixin warns at 70 % and pages at 90 % of `file-max`).

use crate::kmsg::decay;

/// Thresholds of the tables rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `tables.file_handles`: allocated handles as a percentage of `fs.file-max`: warning,
    /// critical, and the bar a raised finding must fall below to clear.
    pub files_warning_percent: f64,
    pub files_critical_percent: f64,
    pub files_clear_percent: f64,
    /// From this share of `file-max` on, the processes holding the most descriptors are
    /// counted (below the raise bar, so a finding has its culprits).
    pub files_scan_percent: f64,
    /// `tables.daemon_file_limit`: a daemon's open descriptors as a percentage of its soft
    /// `RLIMIT_NOFILE` (past it, `accept`/`open` fail with EMFILE).
    pub daemon_warning_percent: f64,
    pub daemon_critical_percent: f64,
    pub daemon_clear_percent: f64,
    /// `tables.neighbour_table`: entries as a percentage of `gc_thresh3` (at `gc_thresh3` the
    /// kernel refuses new entries after a forced collection fails).
    pub neigh_warning_percent: f64,
    pub neigh_critical_percent: f64,
    pub neigh_clear_percent: f64,
    /// `tables.tcp_memory`: TCP memory as a percentage of `tcp_mem`'s pressure value
    /// (100: the kernel is in memory-pressure mode); critical at its maximum, where new
    /// buffers are refused and the kernel logs `out of memory -- consider tuning tcp_mem`.
    pub tcp_mem_warning_percent_of_pressure: f64,
    pub tcp_mem_clear_percent_of_pressure: f64,
    /// `tables.tcp_orphans`: orphans as a percentage of `tcp_max_orphans`. The kernel resets
    /// orphans when `orphans << shift > tcp_max_orphans`, shift 0 to 2 by how penalised the
    /// socket is: at 25 % the most penalised ones go, at 50 % most, at 100 % all.
    pub orphans_warning_percent: f64,
    pub orphans_critical_percent: f64,
    pub orphans_clear_percent: f64,
    /// `tables.kernel_table_full`: a line at most this old whose table is not full now is a
    /// warning; older ones are history (info) until they leave the lookback window.
    pub recent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            files_warning_percent: 80.0,
            files_critical_percent: 90.0,
            files_clear_percent: 75.0,
            files_scan_percent: 70.0,
            daemon_warning_percent: 80.0,
            daemon_critical_percent: 95.0,
            daemon_clear_percent: 75.0,
            neigh_warning_percent: 90.0,
            neigh_critical_percent: 100.0,
            neigh_clear_percent: 80.0,
            tcp_mem_warning_percent_of_pressure: 100.0,
            tcp_mem_clear_percent_of_pressure: 90.0,
            orphans_warning_percent: 25.0,
            orphans_critical_percent: 50.0,
            orphans_clear_percent: 20.0,
            recent_seconds: decay::DEFAULT_RECENT_SECONDS,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        let p = |name, v| l::setting(name, l::percent(v));
        vec![
            p("files_warning_percent", self.files_warning_percent),
            p("files_critical_percent", self.files_critical_percent),
            p("files_clear_percent", self.files_clear_percent),
            p("files_scan_percent", self.files_scan_percent),
            p("daemon_warning_percent", self.daemon_warning_percent),
            p("daemon_critical_percent", self.daemon_critical_percent),
            p("daemon_clear_percent", self.daemon_clear_percent),
            p("neigh_warning_percent", self.neigh_warning_percent),
            p("neigh_critical_percent", self.neigh_critical_percent),
            p("neigh_clear_percent", self.neigh_clear_percent),
            p(
                "tcp_mem_warning_percent_of_pressure",
                self.tcp_mem_warning_percent_of_pressure,
            ),
            p(
                "tcp_mem_clear_percent_of_pressure",
                self.tcp_mem_clear_percent_of_pressure,
            ),
            p("orphans_warning_percent", self.orphans_warning_percent),
            p("orphans_critical_percent", self.orphans_critical_percent),
            p("orphans_clear_percent", self.orphans_clear_percent),
            l::setting("recent_seconds", l::seconds(self.recent_seconds)),
        ]
    }
}
