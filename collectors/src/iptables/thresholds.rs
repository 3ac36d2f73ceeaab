//! The limits of the lock rules: the collector's tunables, apart from the judge that uses
//! them.

use std::time::Duration;

/// Thresholds of the lock rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A hold at least this long is a warning.
    pub hold_warning: Duration,
    /// A hold at least this long is critical (kube-proxy waits 5 s).
    pub hold_critical: Duration,
    /// Waiters seen on this many consecutive samples are a queue (warning).
    pub waiter_streak_samples: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            hold_warning: Duration::from_secs(2),
            hold_critical: Duration::from_secs(5),
            waiter_streak_samples: 2,
        }
    }
}
