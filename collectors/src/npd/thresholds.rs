//! The limits of the npd rules.

/// Thresholds of the npd rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A temporary rule's finding lasts this long after its last match (seconds): NPD posts an
    /// Event and forgets; a finding that vanished at the next run would never be seen by a
    /// person reading `/findings`. One hour, as the kernel collector's event-like findings.
    pub event_window_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            event_window_seconds: 3600,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![l::setting(
            "event_window_seconds",
            l::seconds(self.event_window_seconds),
        )]
    }
}
