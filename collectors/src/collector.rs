//! The `Collector` trait every collector implements, and what one run returns.

use crate::finding::Finding;
use crate::metric::Metric;

/// How a collector's last run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Everything it reads was read.
    Ok,
    /// It ran, but part of its sources were missing or refused (the reason says which and
    /// what to do, e.g. "/dev/kmsg needs CAP_SYSLOG").
    Degraded(String),
    /// Its sources are absent on this host (module not loaded, no such runtime, not root).
    Unavailable(String),
    /// It failed (the agent also uses this for timeouts and panics).
    Error(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Degraded(_) => "degraded",
            Status::Unavailable(_) => "unavailable",
            Status::Error(_) => "error",
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            Status::Ok => None,
            Status::Degraded(m) | Status::Unavailable(m) | Status::Error(m) => Some(m),
        }
    }

    /// Combines two statuses, keeping the worse and joining degraded reasons.
    pub fn worst(self, other: Status) -> Status {
        use Status::*;
        match (self, other) {
            (Error(a), _) | (_, Error(a)) => Error(a),
            (Unavailable(a), _) | (_, Unavailable(a)) => Unavailable(a),
            (Degraded(a), Degraded(b)) => Degraded(format!("{a}; {b}")),
            (Degraded(a), Ok) | (Ok, Degraded(a)) => Degraded(a),
            (Ok, Ok) => Ok,
        }
    }
}

/// What one run of a collector produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Collection {
    pub status: Status,
    pub findings: Vec<Finding>,
    pub metrics: Vec<Metric>,
}

impl Collection {
    pub fn new(status: Status) -> Collection {
        Collection {
            status,
            findings: Vec::new(),
            metrics: Vec::new(),
        }
    }

    pub fn unavailable(reason: impl Into<String>) -> Collection {
        Collection::new(Status::Unavailable(reason.into()))
    }
}

/// Facts about the node that rules put into commands and summaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectContext {
    /// The Kubernetes node name (`NODE_NAME`, else the hostname), for `kubectl drain <node>`.
    pub node_name: String,
}

/// A collector samples the host and judges its samples into findings.
///
/// `collect` is called once per interval on a blocking thread; it may keep bounded state
/// between calls (previous counters for rates). The first call after construction has no
/// previous sample: rules that need rates report nothing yet. A collector whose sources are
/// missing returns `Status::Unavailable` with a reason a person can act on; it never panics
/// on host input.
pub trait Collector: Send {
    /// `disk`, `load`, `memory`, `iptables`, `conntrack`, ...
    fn name(&self) -> &'static str;

    /// One run: sample, compare with the previous sample, judge.
    fn collect(&mut self, ctx: &CollectContext) -> Collection;
}
