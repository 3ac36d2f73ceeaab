//! The limits of the memory rules: the collector's tunables, apart from the judge that uses
//! them.

use crate::kmsg::decay;

/// Thresholds of the memory rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// The order a "large block" starts at: 4 = 16 contiguous pages (the handbook's example).
    pub fragmentation_order: usize,
    /// A NUMA node is fragmented when at least this share (percent) of its free memory sits in
    /// blocks smaller than `fragmentation_order` (100 = no large block at all).
    pub fragmentation_unusable_percent: f64,
    /// ... and only when it has at least this much free memory; below it, memory is short,
    /// not fragmented.
    pub fragmentation_min_free_bytes: u64,
    /// Memory is exhausted when MemAvailable is below this share of MemTotal (percent).
    pub exhaustion_available_percent: f64,
    /// A page allocation failure at most this old (seconds) whose condition is not true now
    /// is a warning; older ones are history (info).
    pub recent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            fragmentation_order: 4,
            fragmentation_unusable_percent: 99.0,
            fragmentation_min_free_bytes: 16 << 20,
            exhaustion_available_percent: 5.0,
            recent_seconds: decay::DEFAULT_RECENT_SECONDS,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("fragmentation_order", self.fragmentation_order.to_string()),
            l::setting(
                "fragmentation_unusable_percent",
                l::percent(self.fragmentation_unusable_percent),
            ),
            l::setting(
                "fragmentation_min_free_bytes",
                l::bytes(self.fragmentation_min_free_bytes),
            ),
            l::setting(
                "exhaustion_available_percent",
                l::percent(self.exhaustion_available_percent),
            ),
            l::setting("recent_seconds", l::seconds(self.recent_seconds)),
        ]
    }
}
