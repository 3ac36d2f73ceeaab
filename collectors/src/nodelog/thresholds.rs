//! The limits of the log rules: how long a line keeps its finding current, and how many
//! subjects a rule names; apart from the judge that uses them.

/// Thresholds of the log rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A readiness state is current while its last line is at most this old (seconds).
    pub state_window_seconds: i64,
    /// An operation's error is current while its last line is at most this old (seconds).
    pub event_window_seconds: i64,
    /// With the live state known healthy, a state clears this long after its last line.
    pub settle_seconds: i64,
    /// At most this many findings per rule with a subject (containers, images): the most
    /// recent.
    pub max_subjects: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            state_window_seconds: 300,
            event_window_seconds: 900,
            settle_seconds: 60,
            max_subjects: 20,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting(
                "state_window_seconds",
                l::seconds(self.state_window_seconds.max(0).unsigned_abs()),
            ),
            l::setting(
                "event_window_seconds",
                l::seconds(self.event_window_seconds.max(0).unsigned_abs()),
            ),
            l::setting(
                "settle_seconds",
                l::seconds(self.settle_seconds.max(0).unsigned_abs()),
            ),
            l::setting("max_subjects", self.max_subjects.to_string()),
        ]
    }
}
