//! How a finding raised from a past kernel-log line stands now.
//!
//! A kernel-log line reports something that happened. A finding raised from one keeps the
//! severity of a fresh event only while what the line reported is still true now: each rule
//! checks the host's live state for that (buddyinfo and meminfo for a page allocation
//! failure, the mount options for a filesystem that went read-only, the task's state for a
//! hung task, repetition for an OOM kill). Otherwise its severity decays with the age of the
//! last occurrence: within `recent_seconds` it is still news, after that it is history, kept
//! until the event leaves the reader's lookback window. The rules' own tables
//! (docs/collectors/kernel.md, memory.md) say what "still true" means for each.

use crate::finding::Severity;

/// Events at most this old are recent (15 min): long enough to span the kubelet's longest
/// crash-loop back-off (5 min) twice, short against the 1 h lookback window.
pub const DEFAULT_RECENT_SECONDS: u64 = 900;

/// Where a kernel-log based finding stands now. Also the name of the rule condition that
/// selects its words (`ongoing`, `recent`, `past`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// What the log reported is still true now (the rule's live check says so).
    Ongoing,
    /// Not confirmed now, but the last occurrence is at most `recent_seconds` old (or its age
    /// is unknown: the record was read in this window without a clock to date it).
    Recent,
    /// Not true now as far as the host shows, and older than `recent_seconds`: history.
    Past,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Ongoing => "ongoing",
            Phase::Recent => "recent",
            Phase::Past => "past",
        }
    }

    /// The phase of an event: `Ongoing` when `still_true` is `Some(true)`, else by the age of
    /// its last occurrence. `None` (the rule cannot tell) decays like `Some(false)`.
    pub fn of(still_true: Option<bool>, age_seconds: Option<u64>, recent_seconds: u64) -> Phase {
        if still_true == Some(true) {
            Phase::Ongoing
        } else if is_recent(age_seconds, recent_seconds) {
            Phase::Recent
        } else {
            Phase::Past
        }
    }
}

/// True when an event `age_seconds` old is recent. An unknown age (no `/proc/uptime`) counts as
/// recent: the record was read within the lookback window.
pub fn is_recent(age_seconds: Option<u64>, recent_seconds: u64) -> bool {
    age_seconds.is_none_or(|a| a <= recent_seconds)
}

/// One step less severe: critical -> warning -> info (info stays info).
pub fn lower(s: Severity) -> Severity {
    match s {
        Severity::Critical => Severity::Warning,
        Severity::Warning | Severity::Info => Severity::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_and_steps() {
        let r = DEFAULT_RECENT_SECONDS;
        assert_eq!(Phase::of(Some(true), Some(3500), r), Phase::Ongoing);
        assert_eq!(Phase::of(Some(false), Some(60), r), Phase::Recent);
        assert_eq!(Phase::of(None, Some(900), r), Phase::Recent);
        assert_eq!(Phase::of(None, Some(901), r), Phase::Past);
        assert_eq!(Phase::of(Some(false), None, r), Phase::Recent);
        assert_eq!(lower(Severity::Critical), Severity::Warning);
        assert_eq!(lower(Severity::Warning), Severity::Info);
        assert_eq!(lower(Severity::Info), Severity::Info);
        assert_eq!(Phase::Past.as_str(), "past");
    }
}
