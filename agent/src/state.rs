//! What the agent currently believes about the node: active findings with first/last seen,
//! each collector's latest status and metrics, and readiness.
//!
//! The scheduler feeds every run into [`State::apply`]; the state logs transitions (a finding
//! appears, changes severity or resolves; a collector's status changes) and
//! [`State::snapshot`] freezes it into an immutable [`Snapshot`] that the HTTP server and
//! `check` render. Findings are owned by the collector that reported them: the findings of
//! the latest *successful* run of a collector are active, the others resolve. A timeout, a
//! panic or a run that returns `Status::Error` leaves the previous findings in place.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use collectors::{Finding, Metric, Status};
use time::OffsetDateTime;

use crate::scheduler::{Outcome, RunReport};

/// Logs a finding's transition at the level of its severity: `info` findings are news, not
/// trouble, so they log at info; warning and critical ones at warn. (`tracing` needs the level
/// at compile time, hence the match.)
macro_rules! log_at {
    ($severity:expr, $($rest:tt)+) => {
        match $severity {
            collectors::Severity::Info => tracing::info!($($rest)+),
            collectors::Severity::Warning | collectors::Severity::Critical => {
                tracing::warn!($($rest)+)
            }
        }
    };
}

/// A finding that is currently active.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    pub finding: Finding,
    pub first_seen: OffsetDateTime,
    pub last_seen: OffsetDateTime,
}

/// The latest word from one collector.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorState {
    pub name: String,
    pub status: Status,
    /// When its latest run started; `None` before the first run finished.
    pub last_run: Option<OffsetDateTime>,
    pub duration: Option<Duration>,
    /// Metrics of its latest completed run (cleared by a timeout or panic).
    pub metrics: Vec<Metric>,
}

impl CollectorState {
    /// `node_doctor_collector_up`: its latest run read the host (ok or degraded).
    pub fn up(&self) -> bool {
        self.last_run.is_some() && matches!(self.status, Status::Ok | Status::Degraded(_))
    }
}

/// Everything the agent knows, mutable, behind the scheduler's lock.
#[derive(Debug)]
pub struct State {
    node: String,
    collectors: BTreeMap<String, CollectorState>,
    /// (collector, id, subject) -> active finding.
    active: BTreeMap<(String, String, String), Active>,
    /// Collectors that have not finished (or timed out) once yet.
    pending: BTreeSet<String>,
}

/// An immutable picture of the state at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub node: String,
    pub generated_at: OffsetDateTime,
    /// Sorted: most severe first, then id, then subject.
    pub findings: Vec<Active>,
    /// Sorted by name.
    pub collectors: Vec<CollectorState>,
    /// Every collector has finished or timed out at least once.
    pub ready: bool,
}

impl State {
    pub fn new(node: impl Into<String>, collector_names: &[String]) -> State {
        let collectors = collector_names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    CollectorState {
                        name: n.clone(),
                        status: Status::Unavailable("not run yet".into()),
                        last_run: None,
                        duration: None,
                        metrics: Vec::new(),
                    },
                )
            })
            .collect();
        State {
            node: node.into(),
            collectors,
            active: BTreeMap::new(),
            pending: collector_names.iter().cloned().collect(),
        }
    }

    /// Records one run of `collector` that started at `started`.
    pub fn apply(&mut self, collector: &str, report: RunReport, started: OffsetDateTime) {
        let status = report.outcome.status();
        let success = report.outcome.is_success();
        self.pending.remove(collector);
        let entry = self
            .collectors
            .entry(collector.to_string())
            .or_insert_with(|| CollectorState {
                name: collector.to_string(),
                status: Status::Ok,
                last_run: None,
                duration: None,
                metrics: Vec::new(),
            });
        let first = entry.last_run.is_none();
        if first || entry.status != status {
            log_status(collector, &entry.status, &status, first);
        }
        entry.status = status;
        // A stuck run is reported from when it started.
        entry.last_run = Some(match &report.outcome {
            Outcome::StillRunning { since, .. } => *since,
            _ => started,
        });
        entry.duration = Some(report.duration);
        let collection = match report.outcome {
            Outcome::Completed(c) => c,
            _ => {
                entry.metrics.clear();
                return;
            }
        };
        entry.metrics = collection.metrics;
        if !success {
            return;
        }

        let now = started + report.duration;
        let mut seen = BTreeSet::new();
        for finding in collection.findings {
            let key = (
                collector.to_string(),
                finding.id.clone(),
                finding.subject.clone(),
            );
            seen.insert(key.clone());
            match self.active.get_mut(&key) {
                Some(a) => {
                    if a.finding.severity != finding.severity {
                        log_at!(
                            finding.severity,
                            collector,
                            id = finding.id.as_str(),
                            subject = finding.subject.as_str(),
                            from = %a.finding.severity,
                            to = %finding.severity,
                            summary = finding.summary.en.as_str(),
                            "finding changed severity"
                        );
                    }
                    a.finding = finding;
                    a.last_seen = now;
                }
                None => {
                    log_at!(
                        finding.severity,
                        collector,
                        id = finding.id.as_str(),
                        subject = finding.subject.as_str(),
                        severity = %finding.severity,
                        summary = finding.summary.en.as_str(),
                        "finding appeared"
                    );
                    self.active.insert(
                        key,
                        Active {
                            finding,
                            first_seen: now,
                            last_seen: now,
                        },
                    );
                }
            }
        }
        self.active.retain(|key, a| {
            if key.0 != collector || seen.contains(key) {
                return true;
            }
            let active_seconds = (a.last_seen - a.first_seen).whole_seconds();
            tracing::info!(
                collector,
                id = a.finding.id.as_str(),
                subject = a.finding.subject.as_str(),
                severity = %a.finding.severity,
                active_seconds,
                "finding resolved"
            );
            false
        });
    }

    pub fn ready(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn snapshot(&self, now: OffsetDateTime) -> Snapshot {
        let mut findings: Vec<Active> = self.active.values().cloned().collect();
        // The same order as `collectors::finding::sort_findings`.
        findings.sort_by(|a, b| {
            let (a, b) = (&a.finding, &b.finding);
            b.severity
                .cmp(&a.severity)
                .then_with(|| a.id.cmp(&b.id))
                .then_with(|| a.subject.cmp(&b.subject))
        });
        Snapshot {
            node: self.node.clone(),
            generated_at: now,
            findings,
            collectors: self.collectors.values().cloned().collect(),
            ready: self.ready(),
        }
    }
}

fn log_status(collector: &str, from: &Status, to: &Status, first: bool) {
    let reason = to.message().unwrap_or("");
    let status = to.as_str();
    if first {
        match to {
            Status::Ok => tracing::info!(collector, status, "collector is running"),
            _ => tracing::warn!(collector, status, reason, "collector's first run is not ok"),
        }
        return;
    }
    let from = from.as_str();
    match to {
        Status::Ok => tracing::info!(collector, from, status, "collector recovered"),
        Status::Degraded(_) | Status::Unavailable(_) => {
            tracing::warn!(collector, from, status, reason, "collector status changed")
        }
        Status::Error(_) => tracing::error!(collector, from, status, reason, "collector failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::{finding, with};
    use collectors::{Collection, Severity};

    fn t(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + secs).unwrap()
    }

    fn done(c: Collection) -> RunReport {
        RunReport {
            outcome: Outcome::Completed(c),
            duration: Duration::from_millis(2),
        }
    }

    fn keys(s: &Snapshot) -> Vec<(String, String)> {
        s.findings
            .iter()
            .map(|a| (a.finding.id.clone(), a.finding.subject.clone()))
            .collect()
    }

    #[test]
    fn alternating_findings_appear_resolve_and_keep_first_seen() {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new("node-a", &names);
        let a = || {
            finding(
                "disk.filesystem_full",
                "/var/lib/docker",
                Severity::Critical,
            )
        };
        let b = || finding("disk.filesystem_full", "/", Severity::Warning);

        st.apply("disk", done(with(Status::Ok, vec![a(), b()])), t(0));
        st.apply("disk", done(with(Status::Ok, vec![a()])), t(15));
        let s = st.snapshot(t(16));
        assert_eq!(
            keys(&s),
            vec![("disk.filesystem_full".into(), "/var/lib/docker".into())]
        );
        let active = &s.findings[0];
        assert_eq!(active.first_seen, t(0) + Duration::from_millis(2));
        assert_eq!(active.last_seen, t(15) + Duration::from_millis(2));

        // b comes back: a new first_seen.
        st.apply("disk", done(with(Status::Ok, vec![a(), b()])), t(30));
        let s = st.snapshot(t(31));
        assert_eq!(s.findings.len(), 2);
        assert_eq!(s.findings[0].finding.severity, Severity::Critical);
        assert_eq!(s.findings[1].first_seen, t(30) + Duration::from_millis(2));
        assert_eq!(s.findings[0].first_seen, t(0) + Duration::from_millis(2));
    }

    #[test]
    fn finding_transitions_log_at_the_level_of_their_severity() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let w = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let names = vec!["kernel".to_string()];
            let mut st = State::new("n", &names);
            let info = || finding("kernel.oom_cgroup", "pod a", Severity::Info);
            let warn = || finding("kernel.oom_cgroup", "pod a", Severity::Warning);
            let crit = || finding("kernel.hung_task", "pid 7", Severity::Critical);
            st.apply("kernel", done(with(Status::Ok, vec![info(), crit()])), t(0));
            st.apply(
                "kernel",
                done(with(Status::Ok, vec![warn(), crit()])),
                t(15),
            );
            st.apply(
                "kernel",
                done(with(Status::Ok, vec![info(), crit()])),
                t(30),
            );
        });
        let logs = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let level = |needle: &str, id: &str| -> Vec<String> {
            logs.lines()
                .filter(|l| l.contains(needle) && l.contains(id))
                .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(level("finding appeared", "oom_cgroup"), ["INFO"], "{logs}");
        assert_eq!(level("finding appeared", "hung_task"), ["WARN"], "{logs}");
        // info -> warning warns; warning -> info is back to info.
        assert_eq!(
            level("changed severity", "oom_cgroup"),
            ["WARN", "INFO"],
            "{logs}"
        );
    }

    #[test]
    fn failures_keep_the_last_successful_findings() {
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names);
        let a = || finding("disk.filesystem_full", "/", Severity::Critical);
        st.apply("disk", done(with(Status::Ok, vec![a()])), t(0));
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::TimedOut {
                    timeout: Duration::from_secs(2),
                },
                duration: Duration::from_secs(2),
            },
            t(15),
        );
        let s = st.snapshot(t(17));
        assert_eq!(s.findings.len(), 1, "timeout does not resolve");
        assert_eq!(s.findings[0].last_seen, t(0) + Duration::from_millis(2));
        assert_eq!(s.collectors[0].status.as_str(), "error");
        assert!(!s.collectors[0].up());
        st.apply("disk", done(with(Status::Error("x".into()), vec![])), t(30));
        assert_eq!(st.snapshot(t(31)).findings.len(), 1, "error keeps findings");
        st.apply("disk", done(with(Status::Ok, vec![])), t(45));
        let s = st.snapshot(t(46));
        assert!(s.findings.is_empty(), "a successful empty run resolves");
        assert!(s.collectors[0].up());
    }

    #[test]
    fn findings_of_other_collectors_are_untouched() {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new("n", &names);
        st.apply(
            "disk",
            done(with(
                Status::Ok,
                vec![finding("disk.x", "/", Severity::Info)],
            )),
            t(0),
        );
        st.apply(
            "load",
            done(with(
                Status::Ok,
                vec![finding("load.high", "", Severity::Warning)],
            )),
            t(1),
        );
        st.apply("load", done(with(Status::Ok, vec![])), t(2));
        let s = st.snapshot(t(3));
        assert_eq!(keys(&s), vec![("disk.x".into(), "/".into())]);
    }

    #[test]
    fn readiness_waits_for_every_collector_to_finish_or_time_out() {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new("n", &names);
        assert!(!st.ready());
        let s = st.snapshot(t(0));
        assert!(!s.ready);
        assert!(s.collectors.iter().all(|c| c.last_run.is_none() && !c.up()));
        st.apply("disk", done(with(Status::Ok, vec![])), t(0));
        assert!(!st.ready());
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::TimedOut {
                    timeout: Duration::from_secs(1),
                },
                duration: Duration::from_secs(1),
            },
            t(0),
        );
        assert!(st.ready());
        assert!(State::new("n", &[]).ready(), "no collectors: ready at once");
    }

    #[test]
    fn snapshot_sorts_by_severity_then_id_then_subject() {
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names);
        st.apply(
            "disk",
            done(with(
                Status::Ok,
                vec![
                    finding("disk.b", "/b", Severity::Info),
                    finding("disk.a", "/z", Severity::Warning),
                    finding("disk.a", "/a", Severity::Warning),
                    finding("disk.c", "/", Severity::Critical),
                ],
            )),
            t(0),
        );
        let got = keys(&st.snapshot(t(1)));
        let want: Vec<(String, String)> = [
            ("disk.c", "/"),
            ("disk.a", "/a"),
            ("disk.a", "/z"),
            ("disk.b", "/b"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn metrics_follow_the_latest_completed_run() {
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names);
        let mut c = Collection::new(Status::Ok);
        c.metrics
            .push(Metric::gauge("node_doctor_disk_x_bytes", "x", 1.0));
        st.apply("disk", done(c), t(0));
        assert_eq!(st.snapshot(t(1)).collectors[0].metrics.len(), 1);
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::Panicked("boom".into()),
                duration: Duration::ZERO,
            },
            t(2),
        );
        let s = st.snapshot(t(3));
        assert!(s.collectors[0].metrics.is_empty());
        assert!(s.collectors[0]
            .status
            .message()
            .unwrap()
            .contains("panicked: boom"));
    }
}
