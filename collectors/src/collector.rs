//! The `Collector` trait every collector implements, and what one run returns.

use std::sync::Arc;

use crate::finding::{Finding, Severity};
use crate::metric::Metric;
use crate::rules::{Draft, RuleBook};

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

    /// The status with its message cut to [`crate::bounded::MESSAGE_BYTES`] with a marker.
    pub fn bounded(self) -> Status {
        use crate::bounded::{truncate, MESSAGE_BYTES};
        match self {
            Status::Ok => Status::Ok,
            Status::Degraded(m) => Status::Degraded(truncate(m, MESSAGE_BYTES)),
            Status::Unavailable(m) => Status::Unavailable(truncate(m, MESSAGE_BYTES)),
            Status::Error(m) => Status::Error(truncate(m, MESSAGE_BYTES)),
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

    /// Caps all host text in this collection ([`crate::bounded`]): the status message, every
    /// finding's subject, evidence strings, title, summary and steps, and metric label
    /// values. The agent applies it to every collection it receives, so no collector can put
    /// megabytes of host text into `/findings`, `/metrics` or the logs.
    pub fn bounded(mut self) -> Collection {
        use crate::bounded::{truncate_in_place, SUBJECT_BYTES};
        self.status = self.status.bounded();
        self.findings = self.findings.into_iter().map(Finding::bounded).collect();
        for m in &mut self.metrics {
            for (_, v) in &mut m.labels {
                truncate_in_place(v, SUBJECT_BYTES);
            }
        }
        self
    }
}

/// Facts about the node that rules put into commands and summaries, and the rules' words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectContext {
    /// The Kubernetes node name (`NODE_NAME`, else the hostname), for `kubectl drain <node>`.
    pub node_name: String,
    /// Whether node-doctor's own network namespace is the host's (the agent finds out once at
    /// start; collectors never look at their own process).
    pub host_netns: HostNetns,
    /// The words of every rule: the built-in rule files with the operator's overrides
    /// (`--rules-file`) applied, loaded once at start.
    pub rules: Arc<RuleBook>,
}

impl CollectContext {
    /// A context with the built-in rules.
    pub fn new(node_name: impl Into<String>, host_netns: HostNetns) -> CollectContext {
        CollectContext {
            node_name: node_name.into(),
            host_netns,
            rules: RuleBook::builtin(),
        }
    }

    pub fn with_rules(mut self, rules: Arc<RuleBook>) -> CollectContext {
        self.rules = rules;
        self
    }

    /// The findings of a judge's drafts, in the words of their rules (`{node}` is this
    /// node's name).
    pub fn render(&self, drafts: Vec<Draft>) -> Vec<Finding> {
        drafts
            .into_iter()
            .map(|d| self.rules.render(d, &self.node_name))
            .collect()
    }
}

/// Whether node-doctor runs in the host's network namespace.
///
/// Most per-network-namespace files have a per-process path, `<root>/proc/1/net/*`, that shows
/// the host's namespace (pid 1's) to any reader. Per-namespace sysctls do not: `/proc/sys/net/*`
/// always shows the namespace of the process that reads it, and there is no
/// `/proc/<pid>/sys`. So `net.core.somaxconn` read by a pod without `hostNetwork` is the pod's
/// own value, and a collector reports such a reading as the host's only when [`Self::Same`]
/// (or when the host root is staged files, [`Self::NotProcfs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostNetns {
    /// The agent is in pid 1's network namespace (`hostNetwork: true`, or run on the node).
    Same,
    /// The agent has a network namespace of its own (a pod without `hostNetwork`).
    Different,
    /// `<root>/proc` is a procfs, but neither pid 1's namespace link nor its `net/dev` entry
    /// could be compared with the agent's own.
    Unknown,
    /// `<root>/proc` is not a procfs (a staged host root in tests): its files are what they
    /// are, whoever reads them.
    NotProcfs,
}

impl HostNetns {
    /// True when `<root>/proc/sys/net/*` describes the host's network namespace.
    pub fn sysctls_are_hosts(self) -> bool {
        matches!(self, HostNetns::Same | HostNetns::NotProcfs)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HostNetns::Same => "same",
            HostNetns::Different => "different",
            HostNetns::Unknown => "unknown",
            HostNetns::NotProcfs => "not-procfs",
        }
    }
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

/// One change between two runs of a collector, as [`TransitionLog`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The status kind changed (`ok` -> `degraded`...); `reason` is the new status's message.
    Status {
        from: &'static str,
        to: &'static str,
        reason: Option<String>,
    },
    /// A finding (rule id, subject) appeared, or its severity changed.
    Finding {
        id: String,
        subject: String,
        from: Option<Severity>,
        to: Severity,
        summary: String,
    },
    /// A finding of the previous run is gone.
    Resolved { id: String, subject: String },
}

/// Logs what changed between a collector's runs — its status kind, and findings appearing,
/// changing severity or resolving — never every sample. It logs at `debug`: the agent's state
/// logs the same transitions for every collector at `info`/`warn` (with first/last seen), so
/// a default log shows each transition once. Remembers only the previous run's
/// status kind and finding keys (bounded by the number of findings). Starts from `ok` with no
/// findings, so a healthy first run logs nothing.
#[derive(Debug)]
pub struct TransitionLog {
    collector: &'static str,
    status: &'static str,
    findings: std::collections::BTreeMap<(String, String), Severity>,
}

impl TransitionLog {
    pub fn new(collector: &'static str) -> TransitionLog {
        TransitionLog {
            collector,
            status: "ok",
            findings: std::collections::BTreeMap::new(),
        }
    }

    /// Compares a run with the previous one, logs the differences with `tracing` and returns
    /// them.
    pub fn observe(&mut self, c: &Collection) -> Vec<Transition> {
        let changes = self.diff(c);
        let collector = self.collector;
        for t in &changes {
            match t {
                Transition::Status {
                    from,
                    to,
                    reason: Some(reason),
                } => {
                    tracing::debug!(
                        collector,
                        from,
                        to,
                        reason = reason.as_str(),
                        "collector status changed"
                    )
                }
                Transition::Status { from, to, .. } => {
                    tracing::debug!(collector, from, to, "collector status changed")
                }
                Transition::Finding {
                    id,
                    subject,
                    from,
                    to,
                    summary,
                } => {
                    let from = from.map(|s| s.to_string()).unwrap_or_else(|| "none".into());
                    tracing::debug!(collector, id = id.as_str(), subject = subject.as_str(), from = %from, severity = %to, summary = summary.as_str(), "finding appeared or changed severity");
                }
                Transition::Resolved { id, subject } => {
                    tracing::debug!(
                        collector,
                        id = id.as_str(),
                        subject = subject.as_str(),
                        "finding resolved"
                    )
                }
            }
        }
        changes
    }

    fn diff(&mut self, c: &Collection) -> Vec<Transition> {
        let mut out = Vec::new();
        let to = c.status.as_str();
        if to != self.status {
            out.push(Transition::Status {
                from: self.status,
                to,
                reason: c.status.message().map(|m| {
                    crate::bounded::truncate(m.to_string(), crate::bounded::MESSAGE_BYTES)
                }),
            });
            self.status = to;
        }
        let mut now = std::collections::BTreeMap::new();
        for f in &c.findings {
            let key = f.key();
            let before = self.findings.get(&key).copied();
            if before != Some(f.severity) && !now.contains_key(&key) {
                out.push(Transition::Finding {
                    id: f.id.clone(),
                    subject: f.subject.clone(),
                    from: before,
                    to: f.severity,
                    summary: crate::bounded::truncate(
                        f.summary.en.clone(),
                        crate::bounded::TEXT_BYTES,
                    ),
                });
            }
            now.insert(key, f.severity);
        }
        for (id, subject) in self.findings.keys() {
            if !now.contains_key(&(id.clone(), subject.clone())) {
                out.push(Transition::Resolved {
                    id: id.clone(),
                    subject: subject.clone(),
                });
            }
        }
        self.findings = now;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Text;

    fn finding(subject: &str, severity: Severity) -> Finding {
        Finding::new("x.rule", severity, Text::new("t", "t"), Text::new("s", "s")).subject(subject)
    }

    #[test]
    fn bounded_caps_every_piece_of_host_text() {
        use crate::bounded::{EVIDENCE_BYTES, MESSAGE_BYTES, SUBJECT_BYTES, TEXT_BYTES};
        let huge = "9".repeat(10 << 20);
        let mut f = finding("/a", Severity::Warning);
        f.subject = huge.clone();
        f.summary = Text::new(huge.clone(), huge.clone());
        f.evidence
            .insert("uptime".into(), crate::Evidence::Str(huge.clone()));
        let mut c = Collection::new(Status::Degraded(format!("cannot parse uptime {huge}")));
        c.findings = vec![f, finding("/b", Severity::Info)];
        c.metrics = vec![Metric::gauge("m", "h", 1.0).label("device", huge.clone())];
        for status in [
            Status::Unavailable(huge.clone()),
            Status::Error(huge.clone()),
            Status::Degraded(huge.clone()),
        ] {
            let b = status.clone().bounded();
            assert_eq!(b.as_str(), status.as_str());
            let m = b.message().unwrap();
            assert!(
                m.len() <= MESSAGE_BYTES && m.contains("…[truncated "),
                "{}",
                m.len()
            );
        }
        assert_eq!(Status::Ok.bounded(), Status::Ok);
        let b = c.bounded();
        let m = b.status.message().unwrap();
        assert!(m.starts_with("cannot parse uptime 999") && m.len() <= MESSAGE_BYTES);
        let f = &b.findings[0];
        assert!(f.subject.len() <= SUBJECT_BYTES);
        assert!(f.summary.en.len() <= TEXT_BYTES && f.summary.zh.len() <= TEXT_BYTES);
        assert!(f.evidence["uptime"].as_str().unwrap().len() <= EVIDENCE_BYTES);
        assert_eq!(
            b.findings[1],
            finding("/b", Severity::Info),
            "short text is untouched"
        );
        assert!(b.metrics[0].labels[0].1.len() <= SUBJECT_BYTES);
        // The transition log never copies more than the caps either.
        let mut log = TransitionLog::new("x");
        let mut c = Collection::new(Status::Degraded(huge.clone()));
        let mut f = finding("/a", Severity::Warning);
        f.summary = Text::new(huge.clone(), "");
        c.findings = vec![f];
        for t in log.observe(&c) {
            match t {
                Transition::Status { reason, .. } => {
                    assert!(reason.unwrap().len() <= MESSAGE_BYTES)
                }
                Transition::Finding { summary, .. } => assert!(summary.len() <= TEXT_BYTES),
                Transition::Resolved { .. } => {}
            }
        }
    }

    #[test]
    fn transitions_not_samples() {
        let mut log = TransitionLog::new("x");
        let mut c = Collection::new(Status::Ok);
        assert!(
            log.observe(&c).is_empty(),
            "a healthy first run logs nothing"
        );
        c.findings = vec![finding("/a", Severity::Warning)];
        let t = log.observe(&c);
        assert!(
            matches!(
                &t[..],
                [Transition::Finding {
                    from: None,
                    to: Severity::Warning,
                    ..
                }]
            ),
            "{t:?}"
        );
        assert!(
            log.observe(&c).is_empty(),
            "the same finding again is not news"
        );
        c.findings = vec![
            finding("/a", Severity::Critical),
            finding("/b", Severity::Info),
        ];
        c.status = Status::Degraded("no /dev/kmsg".into());
        let t = log.observe(&c);
        assert_eq!(t.len(), 3, "{t:?}");
        assert_eq!(
            t[0],
            Transition::Status {
                from: "ok",
                to: "degraded",
                reason: Some("no /dev/kmsg".into())
            }
        );
        assert!(matches!(
            &t[1],
            Transition::Finding {
                from: Some(Severity::Warning),
                to: Severity::Critical,
                ..
            }
        ));
        c.findings = vec![finding("/b", Severity::Info)];
        c.status = Status::Degraded("other reason".into());
        let t = log.observe(&c);
        assert_eq!(
            t,
            vec![Transition::Resolved {
                id: "x.rule".into(),
                subject: "/a".into()
            }]
        );
    }

    /// Every `.rs` file below `dir`.
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// A collector uses the shared readers (`proc`, `sys`, `runtime`, `pods`, `kmsg`, ...) and
    /// never another collector's module: what two collectors share lives in a shared module.
    /// A collector is a directory of `src/` whose `mod.rs` implements `Collector`, or such a
    /// directory inside a shared module (`runtime/health`, the `runtime` collector beside
    /// the shared runtime readers), named by its module path (`runtime::health`).
    #[test]
    fn collectors_do_not_import_each_other() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let is_collector = |dir: &std::path::Path| {
            std::fs::read_to_string(dir.join("mod.rs"))
                .is_ok_and(|t| t.contains("impl Collector for"))
        };
        let mut collectors = Vec::new();
        for entry in std::fs::read_dir(&src).unwrap() {
            let dir = entry.unwrap().path();
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            if is_collector(&dir) {
                collectors.push(name);
            } else if dir.is_dir() {
                for sub in std::fs::read_dir(&dir).unwrap() {
                    let sub = sub.unwrap().path();
                    if sub.is_dir() && is_collector(&sub) {
                        let s = sub.file_name().unwrap().to_string_lossy().into_owned();
                        collectors.push(format!("{name}::{s}"));
                    }
                }
            }
        }
        collectors.sort();
        assert_eq!(
            collectors,
            [
                "conntrack",
                "disk",
                "iptables",
                "kernel",
                "load",
                "memory",
                "runtime"
            ]
        );
        let mut crossings = Vec::new();
        for c in &collectors {
            let mut files = Vec::new();
            rust_files(&src.join(c.replace("::", "/")), &mut files);
            for file in files {
                let text = std::fs::read_to_string(&file).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    for other in collectors.iter().filter(|o| *o != c) {
                        let names_it = [
                            format!("crate::{other}::"),
                            format!("crate::{other};"),
                            format!("crate::{other},"),
                            format!("crate::{{{other}"),
                            format!(" {other}::"),
                            format!("super::super::{other}"),
                        ]
                        .iter()
                        .any(|p| code.contains(p.as_str()));
                        let in_group = code.contains("crate::{")
                            && code
                                .split("crate::{")
                                .nth(1)
                                .is_some_and(|g| g.split([',', '}', ' ']).any(|w| w == other));
                        if names_it || in_group {
                            crossings.push(format!(
                                "{}:{}: {}",
                                file.display(),
                                n + 1,
                                line.trim()
                            ));
                        }
                    }
                }
            }
        }
        assert!(crossings.is_empty(), "{crossings:#?}");
    }
}
