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

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("hold_warning", l::duration(self.hold_warning)),
            l::setting("hold_critical", l::duration(self.hold_critical)),
            l::setting(
                "waiter_streak_samples",
                self.waiter_streak_samples.to_string(),
            ),
        ]
    }
}
