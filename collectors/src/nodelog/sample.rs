//! The typed reading the log rules judge: the incidents the node's logs showed within the
//! lookback ([`LogSample`], with the reader's [`ReadReport`]) and what is known about the node
//! live, outside the logs ([`LiveFacts`]). The reader and the `runtime` collector build it;
//! `judge` decides on it; tests build it directly.

use std::collections::BTreeMap;

use super::patterns::EventKind;
use super::registry::RegistryFacts;

/// Which kind of source a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    Syslog,
    Journal,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Syslog => "syslog",
            SourceKind::Journal => "journal",
        }
    }
}

/// What one read did, per source and in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReport {
    /// Host paths read this cycle.
    pub files: Vec<String>,
    pub bytes_read: BTreeMap<SourceKind, u64>,
    /// Lines or entries looked at (before the program filter).
    pub records_read: BTreeMap<SourceKind, u64>,
    /// Lines kept (of the programs asked for, inside the window, not seen already).
    pub records_kept: u64,
    /// Lines skipped because another source gave them already.
    pub duplicates: u64,
    /// Lines dropped for a timestamp older than the window or not readable.
    pub outside_window: u64,
    /// Syslog lines in none of the formats.
    pub unparsed: u64,
    /// Journal fields whose compression could not be decoded.
    pub undecodable_fields: u64,
    /// A budget ran out: the rest is read next cycle.
    pub behind: bool,
    /// Sources that could not be read, with the reason.
    pub errors: Vec<String>,
    /// The zone syslog times were read in.
    pub zone: String,
    /// Why `etc/localtime` could not be used, if it could not.
    pub zone_problem: Option<String>,
}

impl ReadReport {
    /// No source exists at all (no syslog file, no journal file).
    pub fn no_source(&self) -> bool {
        self.files.is_empty()
    }
}

/// One kind of problem with one subject, as the logs showed it within the lookback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    pub kind: EventKind,
    pub subject: String,
    /// Lines in the lookback window.
    pub count: u64,
    /// Unix seconds.
    pub first_seen: i64,
    pub last_seen: i64,
    /// The latest line (cut).
    pub example: String,
    pub source: SourceKind,
    /// Host path of the log file of the latest line.
    pub file: String,
    pub ident: String,
    pub detail: super::patterns::Detail,
}

/// What the logs showed, at `now`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogSample {
    /// Unix seconds.
    pub now: i64,
    pub lookback_seconds: i64,
    pub incidents: Vec<Incident>,
    pub report: ReadReport,
}

/// What is known about the node now, from outside the logs (the `runtime` collector fills
/// what it knows; `None` is unknown).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveFacts {
    /// Runtime directories whose filesystem is full now (host paths).
    pub full_runtime_dirs: Vec<String>,
    /// The CNI configuration directory holds a network configuration now.
    pub cni_config_present: Option<bool>,
    /// The runtime's CRI `NetworkReady` condition now.
    pub cri_network_ready: Option<bool>,
    /// The container runtime answers now.
    pub runtime_responding: Option<bool>,
    /// Registry configuration, by registry (see [`super::registry::facts`]).
    pub registries: BTreeMap<String, RegistryFacts>,
}
