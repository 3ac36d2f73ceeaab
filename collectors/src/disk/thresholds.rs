//! node-doctor's own limits of the disk rules, besides the kubelet's thresholds (which come
//! from its settings, in the sample): the collector's tunables, apart from the judge that
//! uses them.

/// Thresholds of the disk rules besides the kubelet's own (which come from its settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Critical under this many free bytes (only on filesystems larger than ten times it).
    pub min_free_bytes: u64,
    /// Critical at or above this used share.
    pub critical_used_percent: f64,
    /// Warning within this many percentage points of an eviction threshold.
    pub warning_margin_percent: f64,
    /// A deleted-open finding needs at least this many bytes held...
    pub deleted_min_bytes: u64,
    /// ...or this share of the filesystem.
    pub deleted_min_percent: f64,
    /// `disk.filling_up`/`disk.inodes_filling_up`: warning when the fitted use crosses a
    /// threshold within this many seconds (4 h)...
    pub fill_warning_secs: f64,
    /// ...critical within this many (30 min).
    pub fill_critical_secs: f64,
    /// A raised finding stays until the estimate is beyond the horizon times this (1.5), or
    /// the growth stops.
    pub fill_clear_factor: f64,
    /// A fit needs this many seconds of history (30 min)...
    pub fill_min_history_secs: f64,
    /// ...and this many points (10).
    pub fill_min_points: usize,
    /// The recent quarter of the history must consume at least this share of the fitted
    /// rate (0.25): a burst that stopped, or was deleted, does not count.
    pub fill_recent_agree: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_free_bytes: 1 << 30,
            critical_used_percent: 95.0,
            warning_margin_percent: 5.0,
            deleted_min_bytes: 1 << 30,
            deleted_min_percent: 5.0,
            fill_warning_secs: 4.0 * 3600.0,
            fill_critical_secs: 1800.0,
            fill_clear_factor: 1.5,
            fill_min_history_secs: 1800.0,
            fill_min_points: 10,
            fill_recent_agree: 0.25,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("min_free_bytes", l::bytes(self.min_free_bytes)),
            l::setting(
                "critical_used_percent",
                l::percent(self.critical_used_percent),
            ),
            l::setting(
                "warning_margin_percent",
                l::percent(self.warning_margin_percent),
            ),
            l::setting("deleted_min_bytes", l::bytes(self.deleted_min_bytes)),
            l::setting("deleted_min_percent", l::percent(self.deleted_min_percent)),
            l::setting(
                "fill_warning_secs",
                l::seconds(self.fill_warning_secs as u64),
            ),
            l::setting(
                "fill_critical_secs",
                l::seconds(self.fill_critical_secs as u64),
            ),
            l::setting("fill_clear_factor", l::num(self.fill_clear_factor)),
            l::setting(
                "fill_min_history_secs",
                l::seconds(self.fill_min_history_secs as u64),
            ),
            l::setting("fill_min_points", self.fill_min_points.to_string()),
            l::setting("fill_recent_agree", l::num(self.fill_recent_agree)),
        ]
    }
}
