//! What one run of the npd collector holds: the rules of the operator's node-problem-detector
//! configs that matched, in units, no words.

use super::config::RuleKind;

/// One rule's matches (rules of the same kind, condition and reason are one hit, whichever
/// config they came from: the last match's config is named).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The config file of the last match.
    pub config_file: String,
    /// The config's `source` (the monitor's name).
    pub source: String,
    /// `kmsg`, `filelog` or `journald`.
    pub plugin: &'static str,
    /// The host log the lines came from (`/dev/kmsg`, the file, the journal directory).
    pub log_path: String,
    /// The journald identifier read (journald only).
    pub identifier: Option<String>,
    pub kind: RuleKind,
    pub reason: String,
    /// The condition type a permanent rule sets, with its healthy default reason.
    pub condition: Option<(String, String)>,
    pub pattern: String,
    /// The lines of the last match, joined with `\n`, capped at 1 KiB.
    pub lines: String,
    /// Matches in the window (temporary) or since start (permanent).
    pub count: u64,
    /// Seconds since the last match.
    pub last_seen_seconds_ago: u64,
}

/// The configs' matches.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NpdSample {
    pub hits: Vec<Hit>,
    /// Configs in force.
    pub configs: usize,
}
