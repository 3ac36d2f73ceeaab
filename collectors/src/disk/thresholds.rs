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
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_free_bytes: 1 << 30,
            critical_used_percent: 95.0,
            warning_margin_percent: 5.0,
            deleted_min_bytes: 1 << 30,
            deleted_min_percent: 5.0,
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
        ]
    }
}
