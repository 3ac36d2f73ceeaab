//! The `Collector` trait every collector implements, and what one run returns.

use std::sync::Arc;
use std::time::Duration;

use crate::figure::Figure;
use crate::finding::Finding;
use crate::metric::Metric;
use crate::rules::{Draft, RuleBook};

/// How a collector's last run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Everything it reads was read.
    Ok,
    /// Complete, with a note: everything that exists was read, and a source this host does
    /// not have by design is named (PSI off in the kernel, no legacy iptables, not a
    /// Kubernetes node). Reads as `ok` with a message; never makes a check incomplete.
    Noted(String),
    /// It ran, but part of its sources that should exist were missing, refused, unreadable
    /// or malformed (the reason says which and what to do, e.g. "/dev/kmsg needs
    /// CAP_SYSLOG"): it could not look.
    Degraded(String),
    /// It could read none of its sources (refused, not mounted under the host root, not
    /// root), or has not run yet. A source absent by design is [`Status::Noted`], not this.
    Unavailable(String),
    /// It failed (the agent also uses this for timeouts and panics).
    Error(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok | Status::Noted(_) => "ok",
            Status::Degraded(_) => "degraded",
            Status::Unavailable(_) => "unavailable",
            Status::Error(_) => "error",
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            Status::Ok => None,
            Status::Noted(m) | Status::Degraded(m) | Status::Unavailable(m) | Status::Error(m) => {
                Some(m)
            }
        }
    }

    /// The status with its message cut to [`crate::bounded::MESSAGE_BYTES`] with a marker.
    pub fn bounded(self) -> Status {
        use crate::bounded::{truncate, MESSAGE_BYTES};
        match self {
            Status::Ok => Status::Ok,
            Status::Noted(m) => Status::Noted(truncate(m, MESSAGE_BYTES)),
            Status::Degraded(m) => Status::Degraded(truncate(m, MESSAGE_BYTES)),
            Status::Unavailable(m) => Status::Unavailable(truncate(m, MESSAGE_BYTES)),
            Status::Error(m) => Status::Error(truncate(m, MESSAGE_BYTES)),
        }
    }

    /// Combines two statuses, keeping the worse and joining degraded reasons and notes (a
    /// degraded status keeps the notes beside its reasons).
    pub fn worst(self, other: Status) -> Status {
        use Status::*;
        match (self, other) {
            (Error(a), _) | (_, Error(a)) => Error(a),
            (Unavailable(a), _) | (_, Unavailable(a)) => Unavailable(a),
            (Degraded(a), Degraded(b) | Noted(b)) | (Noted(b), Degraded(a)) => {
                Degraded(format!("{a}; {b}"))
            }
            (Degraded(a), Ok) | (Ok, Degraded(a)) => Degraded(a),
            (Noted(a), Noted(b)) => Noted(format!("{a}; {b}")),
            (Noted(a), Ok) | (Ok, Noted(a)) => Noted(a),
            (Ok, Ok) => Ok,
        }
    }

    /// The status of a run from what it could not read (`could_not`: degraded) and what
    /// this host does not have by design (`absent`: noted).
    pub fn from_notes(could_not: Vec<String>, absent: Vec<String>) -> Status {
        let noted = if absent.is_empty() {
            Status::Ok
        } else {
            Status::Noted(absent.join("; "))
        };
        if could_not.is_empty() {
            noted
        } else {
            Status::Degraded(could_not.join("; ")).worst(noted)
        }
    }

    /// True when the run looked at everything it is meant to: `ok`, with or without a note.
    pub fn is_complete(&self) -> bool {
        matches!(self, Status::Ok | Status::Noted(_))
    }
}

/// What one run of a collector produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Collection {
    pub status: Status,
    pub findings: Vec<Finding>,
    pub metrics: Vec<Metric>,
    /// Series the collector keeps, for the agent's page ([`Phases::figures`]).
    pub figures: Vec<Figure>,
}

impl Collection {
    pub fn new(status: Status) -> Collection {
        Collection {
            status,
            findings: Vec::new(),
            metrics: Vec::new(),
            figures: Vec::new(),
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
        for f in &mut self.figures {
            truncate_in_place(&mut f.subject, SUBJECT_BYTES);
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

/// What the agent drives: a collector by name, run once per interval on a thread of its own.
/// Every collector implements it through [`Phases`], its shape; the agent knows only this.
pub trait Collector: Send {
    /// `disk`, `load`, `memory`, `iptables`, `conntrack`, ...
    fn name(&self) -> &'static str;

    /// The shortest timeout one run needs, when its work needs more than the agent's default
    /// (the runtime collector waits up to its probe timeout for a hung daemon).
    fn min_timeout(&self) -> Option<Duration> {
        None
    }

    /// One run: sample, judge, render, metrics.
    fn collect(&mut self, ctx: &CollectContext) -> Collection;
}

/// The shape of every collector: one [`Phases::sample`] of the host (typed, no words), judged
/// into drafts by its rules ([`Phases::judge`]), the metrics of the same sample
/// ([`Phases::metrics`]), and what it keeps for the next run ([`Phases::keep`]). The words
/// are the rule files' (`ctx.render`). A type implementing it is a [`Collector`].
///
/// `sample` is called once per interval on a blocking thread; a collector may keep bounded
/// state between runs (previous counters for rates): the first run after construction has no
/// previous sample, so rules that need rates report nothing yet. A collector whose sources
/// are missing returns `Err(Status::Unavailable(..))` with a reason a person can act on; it
/// never panics on host input. Constructors read nothing and start nothing: a collector is
/// rebuilt by its constructor after a panic.
pub trait Phases: Send {
    /// The collector's name (the registry's, the CLI's, the rule files').
    const NAME: &'static str;

    /// What one run read.
    type Sample;

    /// Reads the host: the sample and how completely it was read (`Ok` with `Degraded` when
    /// part is missing), or, when there is nothing to judge, the status that says why.
    fn sample(&mut self, ctx: &CollectContext) -> Result<(Self::Sample, Status), Status>;

    /// The rules: drafts from the sample (and the bounded state kept between runs).
    fn judge(&mut self, sample: &Self::Sample) -> Vec<Draft>;

    /// The metrics of the sample.
    fn metrics(&self, sample: &Self::Sample) -> Vec<Metric>;

    /// The series it keeps that explain its findings, for the agent's page (default: none).
    fn figures(&self, sample: &Self::Sample) -> Vec<Figure> {
        let _ = sample;
        Vec::new()
    }

    /// Keeps what the next run compares with (default: nothing).
    fn keep(&mut self, sample: Self::Sample) {
        let _ = sample;
    }

    /// The shortest timeout one run needs ([`Collector::min_timeout`]; default none).
    fn min_timeout(&self) -> Option<Duration> {
        None
    }
}

impl<T: Phases> Collector for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn min_timeout(&self) -> Option<Duration> {
        Phases::min_timeout(self)
    }

    fn collect(&mut self, ctx: &CollectContext) -> Collection {
        match self.sample(ctx) {
            Err(status) => Collection::new(status),
            Ok((sample, status)) => {
                let drafts = self.judge(&sample);
                let metrics = self.metrics(&sample);
                let figures = self.figures(&sample);
                self.keep(sample);
                Collection {
                    status,
                    findings: ctx.render(drafts),
                    metrics,
                    figures,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Severity, Text};

    fn finding(subject: &str, severity: Severity) -> Finding {
        Finding::new("x.rule", severity, Text::new("t", "t"), Text::new("s", "s")).subject(subject)
    }

    #[test]
    fn a_note_is_complete_and_reads_as_ok_with_a_message() {
        let n = Status::Noted("no /proc/pressure: PSI is off".into());
        assert_eq!(n.as_str(), "ok");
        assert_eq!(n.message(), Some("no /proc/pressure: PSI is off"));
        assert!(n.is_complete() && Status::Ok.is_complete());
        for s in ["degraded", "unavailable", "error"] {
            let st = match s {
                "degraded" => Status::Degraded("x".into()),
                "unavailable" => Status::Unavailable("x".into()),
                _ => Status::Error("x".into()),
            };
            assert!(!st.is_complete(), "{s}");
        }
        // Notes join; a could-not-look reason wins and keeps the note beside it.
        assert_eq!(
            Status::Ok
                .worst(Status::Noted("a".into()))
                .worst(Status::Noted("b".into())),
            Status::Noted("a; b".into())
        );
        assert_eq!(
            Status::Noted("a".into()).worst(Status::Degraded("d".into())),
            Status::Degraded("d; a".into())
        );
        assert_eq!(Status::from_notes(vec![], vec![]), Status::Ok);
        assert_eq!(
            Status::from_notes(vec![], vec!["n".into()]),
            Status::Noted("n".into())
        );
        assert_eq!(
            Status::from_notes(vec!["d".into(), "e".into()], vec!["n".into()]),
            Status::Degraded("d; e; n".into())
        );
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
            Status::Noted(huge.clone()),
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

    /// A collector uses the shared readers (`proc`, `sys`, `config`, `node`, `pods`, `kmsg`,
    /// ...) and never another collector's module: what two collectors share lives in a shared
    /// module. A collector is the registry's, the folder `src/<name>/`.
    #[test]
    fn collectors_do_not_import_each_other() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        // The registry's collectors, each the folder of its name.
        let collectors: Vec<&str> = crate::registry::names().collect();
        assert!(collectors.len() >= 7, "{collectors:?}");
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
                                .is_some_and(|g| g.split([',', '}', ' ']).any(|w| w == *other));
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
