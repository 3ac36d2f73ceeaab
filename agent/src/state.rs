//! What the agent currently believes about the node: active findings with first/last seen,
//! each collector's latest status and metrics, and readiness.
//!
//! The scheduler feeds every run into [`State::apply`]; the state logs transitions (a finding
//! is raised, changes severity or is cleared; a collector's status changes) and
//! [`State::snapshot`] freezes it into an immutable [`Snapshot`] that the HTTP server and
//! `check` render. Findings are owned by the collector that reported them. A timeout, a panic
//! or a run that returns `Status::Error` leaves the previous findings in place and counts for
//! nothing below.
//!
//! **Hysteresis** (`serve`; [`State::with_hysteresis`]): each rule states in its rule file how
//! many successful runs in a row must report a finding before it is raised (`raise_after`)
//! and how many in a row must not before it is cleared (`clear_after`). A finding reported
//! fewer times is *pending*: tracked, not shown. A shown finding its collector stops
//! reporting is *clearing*: still shown, with the evidence of the last run that reported it
//! and its `last_seen`, and marked ([`FindingState::Clearing`]), until `clear_after` runs in
//! a row have not reported it. Reported again meanwhile, it is simply active again (no new
//! raise). `check` builds its state without hysteresis: it shows what its second sample sees.
//! Every raise, clear and pending finding dropped before its raise is counted per rule id, and
//! so is every raise of a finding (same collector, id and subject) that had been cleared
//! before: a flap ([`Transitions`], the `/metrics` family
//! `node_doctor_finding_transitions_total`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use collectors::rules::{Hysteresis, RuleBook};
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

/// Whether a shown finding is still reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingState {
    /// Its collector's latest successful run reported it.
    Active,
    /// Its collector's last `missing` successful runs did not report it; it is cleared when
    /// `missing` reaches its rule's `clear_after`. Its evidence is that of the last run that
    /// reported it (`last_seen`).
    Clearing { missing: u32, clear_after: u32 },
}

impl FindingState {
    /// `active` or `clearing` (the JSON `state`).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingState::Active => "active",
            FindingState::Clearing { .. } => "clearing",
        }
    }
}

/// A finding that is shown: active or clearing.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    pub finding: Finding,
    /// When its collector first reported it in the streak that raised it.
    pub first_seen: OffsetDateTime,
    /// When its collector last reported it.
    pub last_seen: OffsetDateTime,
    pub state: FindingState,
}

/// Transitions of one rule's findings since the agent started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transitions {
    /// Findings shown (reported `raise_after` runs in a row).
    pub raised: u64,
    /// Findings no longer shown (absent `clear_after` runs in a row).
    pub cleared: u64,
    /// Findings reported, then absent before they were raised: what hysteresis kept quiet.
    pub suppressed: u64,
    /// Raises of a finding (same collector, id and subject) that had been cleared before
    /// since the agent started: flaps. Counted while the finding is among the last
    /// [`REMEMBERED_CLEARS`] cleared ones.
    pub reraised: u64,
}

/// How many cleared findings (collector, id, subject) the state remembers to count a finding
/// that comes back as a flap ([`Transitions::reraised`]).
pub const REMEMBERED_CLEARS: usize = 4096;

/// Where a tracked finding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reported `seen` runs in a row, fewer than `raise_after`: not shown.
    Pending {
        seen: u32,
    },
    Shown(FindingState),
}

#[derive(Debug, Clone)]
struct Tracked {
    finding: Finding,
    first_seen: OffsetDateTime,
    last_seen: OffsetDateTime,
    phase: Phase,
}

/// The latest word from one collector.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorState {
    pub name: String,
    pub status: Status,
    /// When its latest run started; `None` before the first run finished.
    pub last_run: Option<OffsetDateTime>,
    pub duration: Option<Duration>,
    /// Metrics of its latest completed run (cleared by a timeout or panic), shared with
    /// every snapshot taken until the next run: a snapshot per run (15 a cycle) copied every
    /// collector's metrics before.
    pub metrics: Arc<[Metric]>,
    /// What its runs have cost since the agent started.
    pub cost: Cost,
}

/// A collector's cost since start: `node_doctor_collector_cpu_seconds_total` and
/// `node_doctor_collector_duration_seconds`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    /// CPU time of its runs ([`RunReport::cpu_total`]).
    pub cpu: Duration,
    /// Wall time of every run that started (a timed-out run counts as its timeout; a call
    /// that found the previous run still stuck started none and is not counted).
    pub durations: Histogram,
}

/// Upper bounds of [`Histogram`]'s buckets, in seconds: client_golang's default buckets
/// with 1 ms in front (a healthy node's collectors take 1-30 ms), up to the 10 s that is the
/// longest default timeout.
pub const DURATION_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// A fixed-bucket histogram of durations (the data of a Prometheus histogram, no encoding).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Observations per bucket of [`DURATION_BUCKETS`], not cumulative; the last one is +Inf.
    pub counts: [u64; DURATION_BUCKETS.len() + 1],
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        let i = DURATION_BUCKETS
            .iter()
            .position(|le| v <= *le)
            .unwrap_or(DURATION_BUCKETS.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

impl CollectorState {
    /// `node_doctor_collector_up`: its latest run read the host (ok, with or without a
    /// note, or degraded).
    pub fn up(&self) -> bool {
        self.last_run.is_some()
            && matches!(
                self.status,
                Status::Ok | Status::Noted(_) | Status::Degraded(_)
            )
    }
}

/// Everything the agent knows, mutable, behind the scheduler's lock.
pub struct State {
    node: String,
    collectors: BTreeMap<String, CollectorState>,
    /// (collector, id, subject) -> pending, active or clearing finding.
    tracked: BTreeMap<(String, String, String), Tracked>,
    /// Collectors that have not finished (or timed out) once yet.
    pending: BTreeSet<String>,
    /// The rules whose hysteresis applies; `None`: every finding is raised and cleared as
    /// reported (`check`).
    rules: Option<Arc<RuleBook>>,
    /// (collector, id) -> transitions since start.
    transitions: BTreeMap<(String, String), Transitions>,
    /// The last cleared findings, oldest first (at most [`REMEMBERED_CLEARS`]).
    cleared: std::collections::VecDeque<(String, String, String)>,
    cleared_set: BTreeSet<(String, String, String)>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("node", &self.node)
            .field("collectors", &self.collectors.len())
            .field("tracked", &self.tracked.len())
            .field("hysteresis", &self.rules.is_some())
            .finish()
    }
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
    /// (collector, id) -> transitions since start, sorted.
    pub transitions: Vec<((String, String), Transitions)>,
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
                        metrics: Arc::from([]),
                        cost: Cost::default(),
                    },
                )
            })
            .collect();
        State {
            node: node.into(),
            collectors,
            tracked: BTreeMap::new(),
            pending: collector_names.iter().cloned().collect(),
            rules: None,
            transitions: BTreeMap::new(),
            cleared: std::collections::VecDeque::new(),
            cleared_set: BTreeSet::new(),
        }
    }

    /// Applies each rule's `raise_after`/`clear_after` from `rules` (`serve`).
    pub fn with_hysteresis(mut self, rules: Arc<RuleBook>) -> State {
        self.rules = Some(rules);
        self
    }

    fn hysteresis(&self, id: &str) -> Hysteresis {
        match &self.rules {
            Some(r) => r.hysteresis(id),
            None => Hysteresis::DEFAULT,
        }
    }

    fn count(&mut self, collector: &str, id: &str) -> &mut Transitions {
        self.transitions
            .entry((collector.to_string(), id.to_string()))
            .or_default()
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
                metrics: Arc::from([]),
                cost: Cost::default(),
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
        entry.cost.cpu = entry.cost.cpu.max(report.cpu_total);
        if !matches!(report.outcome, Outcome::StillRunning { .. }) {
            entry.cost.durations.observe(report.duration);
        }
        let collection = match report.outcome {
            Outcome::Completed(c) => c,
            _ => {
                entry.metrics = Arc::from([]);
                return;
            }
        };
        entry.metrics = Arc::from(collection.metrics);
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
            self.reported(key, finding, now);
        }
        let absent: Vec<_> = self
            .tracked
            .keys()
            .filter(|k| k.0 == collector && !seen.contains(*k))
            .cloned()
            .collect();
        for key in absent {
            self.absent(key);
        }
    }

    /// A successful run reported the finding of `key`.
    fn reported(&mut self, key: (String, String, String), finding: Finding, now: OffsetDateTime) {
        let h = self.hysteresis(&finding.id);
        let collector = key.0.clone();
        let raise = match self.tracked.get_mut(&key) {
            Some(t) => {
                if let Phase::Shown(_) = t.phase {
                    if t.finding.severity != finding.severity {
                        log_at!(
                            finding.severity,
                            collector,
                            id = finding.id.as_str(),
                            subject = finding.subject.as_str(),
                            from = %t.finding.severity,
                            to = %finding.severity,
                            summary = finding.summary.en.as_str(),
                            "finding changed severity"
                        );
                    }
                }
                t.finding = finding;
                t.last_seen = now;
                match t.phase {
                    Phase::Pending { seen } if seen + 1 >= h.raise_after => true,
                    Phase::Pending { seen } => {
                        t.phase = Phase::Pending { seen: seen + 1 };
                        false
                    }
                    Phase::Shown(_) => {
                        t.phase = Phase::Shown(FindingState::Active);
                        false
                    }
                }
            }
            None => {
                let raise = h.raise_after <= 1;
                if !raise {
                    tracing::debug!(
                        collector,
                        id = finding.id.as_str(),
                        subject = finding.subject.as_str(),
                        raise_after = h.raise_after,
                        "finding pending"
                    );
                }
                self.tracked.insert(
                    key.clone(),
                    Tracked {
                        finding,
                        first_seen: now,
                        last_seen: now,
                        phase: Phase::Pending { seen: 1 },
                    },
                );
                raise
            }
        };
        if raise {
            if let Some(t) = self.tracked.get_mut(&key) {
                t.phase = Phase::Shown(FindingState::Active);
                let f = &t.finding;
                log_at!(
                    f.severity,
                    collector,
                    id = f.id.as_str(),
                    subject = f.subject.as_str(),
                    severity = %f.severity,
                    summary = f.summary.en.as_str(),
                    "finding appeared"
                );
            }
            let again = self.cleared_set.remove(&key);
            if again {
                self.cleared.retain(|k| k != &key);
            }
            let c = self.count(&key.0, &key.1);
            c.raised += 1;
            if again {
                c.reraised += 1;
            }
        }
    }

    /// A successful run did not report the finding of `key`.
    fn absent(&mut self, key: (String, String, String)) {
        let h = self.hysteresis(&key.1);
        let Some(t) = self.tracked.get_mut(&key) else {
            return;
        };
        let missing = match t.phase {
            Phase::Pending { .. } => {
                tracing::debug!(
                    collector = key.0.as_str(),
                    id = key.1.as_str(),
                    subject = key.2.as_str(),
                    "pending finding dropped before it was raised"
                );
                self.tracked.remove(&key);
                self.count(&key.0, &key.1).suppressed += 1;
                return;
            }
            Phase::Shown(FindingState::Active) => 1,
            Phase::Shown(FindingState::Clearing { missing, .. }) => missing + 1,
        };
        if missing < h.clear_after {
            t.phase = Phase::Shown(FindingState::Clearing {
                missing,
                clear_after: h.clear_after,
            });
            return;
        }
        let active_seconds = (t.last_seen - t.first_seen).whole_seconds();
        tracing::info!(
            collector = key.0.as_str(),
            id = t.finding.id.as_str(),
            subject = t.finding.subject.as_str(),
            severity = %t.finding.severity,
            active_seconds,
            "finding resolved"
        );
        self.tracked.remove(&key);
        self.count(&key.0, &key.1).cleared += 1;
        if self.cleared_set.insert(key.clone()) {
            self.cleared.push_back(key);
            if self.cleared.len() > REMEMBERED_CLEARS {
                if let Some(old) = self.cleared.pop_front() {
                    self.cleared_set.remove(&old);
                }
            }
        }
    }

    pub fn ready(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn snapshot(&self, now: OffsetDateTime) -> Snapshot {
        let mut findings: Vec<Active> = self
            .tracked
            .values()
            .filter_map(|t| match t.phase {
                Phase::Pending { .. } => None,
                Phase::Shown(state) => Some(Active {
                    finding: t.finding.clone(),
                    first_seen: t.first_seen,
                    last_seen: t.last_seen,
                    state,
                }),
            })
            .collect();
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
            transitions: self
                .transitions
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }
}

fn log_status(collector: &str, from: &Status, to: &Status, first: bool) {
    let reason = to.message().unwrap_or("");
    let status = to.as_str();
    if first {
        match to {
            Status::Ok => tracing::info!(collector, status, "collector is running"),
            Status::Noted(_) => tracing::info!(collector, status, reason, "collector is running"),
            _ => tracing::warn!(collector, status, reason, "collector's first run is not ok"),
        }
        return;
    }
    let from = from.as_str();
    match to {
        Status::Ok => tracing::info!(collector, from, status, "collector recovered"),
        Status::Noted(_) => tracing::info!(collector, from, status, reason, "collector recovered"),
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
            cpu_total: Duration::ZERO,
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

    /// The built-in rules with `disk.filesystem_full` at raise_after 3, clear_after 2.
    fn tuned() -> Arc<RuleBook> {
        Arc::new(
            RuleBook::builtin()
                .with_overrides(
                    "t.toml",
                    "[[rule]]\nid = \"disk.filesystem_full\"\nraise_after = 3\nclear_after = 2\n",
                )
                .unwrap(),
        )
    }

    fn counts(st: &State, id: &str) -> Transitions {
        st.snapshot(t(0))
            .transitions
            .iter()
            .find(|((_, i), _)| i == id)
            .map(|(_, c)| *c)
            .unwrap_or_default()
    }

    #[test]
    fn hysteresis_raises_after_n_reports_and_clears_after_m_absences() {
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names).with_hysteresis(tuned());
        let full = |pct: f64| {
            finding("disk.filesystem_full", "/", Severity::Critical).evidence("used_percent", pct)
        };
        let run = |st: &mut State, at: i64, f: Vec<Finding>| {
            st.apply("disk", done(with(Status::Ok, f)), t(at));
        };
        // Two reports: pending, not shown.
        run(&mut st, 0, vec![full(96.0)]);
        run(&mut st, 15, vec![full(96.5)]);
        assert!(
            st.snapshot(t(16)).findings.is_empty(),
            "pending after 2 of 3"
        );
        // A timeout counts for nothing: still pending with 2.
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::TimedOut {
                    timeout: Duration::from_secs(2),
                },
                duration: Duration::from_secs(2),
                cpu_total: Duration::ZERO,
            },
            t(30),
        );
        run(&mut st, 45, vec![full(97.0)]);
        let s = st.snapshot(t(46));
        assert_eq!(s.findings.len(), 1, "raised on the third report");
        let a = &s.findings[0];
        assert_eq!(a.state, FindingState::Active);
        assert_eq!(
            a.first_seen,
            t(0) + Duration::from_millis(2),
            "since the streak began"
        );
        assert_eq!(counts(&st, "disk.filesystem_full").raised, 1);

        // One run without it: still shown, clearing, with the last evidence.
        run(&mut st, 60, vec![]);
        let s = st.snapshot(t(61));
        assert_eq!(
            s.findings[0].state,
            FindingState::Clearing {
                missing: 1,
                clear_after: 2
            }
        );
        assert_eq!(
            s.findings[0].finding.evidence["used_percent"].as_f64(),
            Some(97.0)
        );
        assert_eq!(s.findings[0].last_seen, t(45) + Duration::from_millis(2));
        // Back: active again, no second raise.
        run(&mut st, 75, vec![full(98.0)]);
        assert_eq!(st.snapshot(t(76)).findings[0].state, FindingState::Active);
        assert_eq!(counts(&st, "disk.filesystem_full").raised, 1);
        // Two runs without it: cleared.
        run(&mut st, 90, vec![]);
        run(&mut st, 105, vec![]);
        assert!(st.snapshot(t(106)).findings.is_empty());
        let c = counts(&st, "disk.filesystem_full");
        assert_eq!(
            (c.raised, c.cleared, c.suppressed, c.reraised),
            (1, 1, 0, 0)
        );

        // Flapping on every other run never reaches 3 in a row: never shown, each counted.
        for i in 0..20 {
            let f = if i % 2 == 0 { vec![full(96.0)] } else { vec![] };
            run(&mut st, 200 + i * 15, f);
            assert!(st.snapshot(t(0)).findings.is_empty(), "run {i}");
        }
        let c = counts(&st, "disk.filesystem_full");
        assert_eq!(
            (c.raised, c.cleared, c.suppressed, c.reraised),
            (1, 1, 10, 0)
        );
        // Three reports in a row: the same finding is back, a flap.
        for i in 0..3 {
            run(&mut st, 600 + i * 15, vec![full(96.0)]);
        }
        let c = counts(&st, "disk.filesystem_full");
        assert_eq!((c.raised, c.reraised), (2, 1));
        // Another subject of the same rule is another finding: raised, not re-raised.
        let other = || finding("disk.filesystem_full", "/data", Severity::Warning);
        for i in 0..3 {
            run(&mut st, 700 + i * 15, vec![full(96.0), other()]);
        }
        let c = counts(&st, "disk.filesystem_full");
        assert_eq!((c.raised, c.reraised), (3, 1));

        // A rule raised at once (disk.inodes_exhausted: raise_after 1): shown on its first
        // report.
        let mut st = State::new("n", &names).with_hysteresis(tuned());
        let h = RuleBook::builtin().hysteresis("disk.inodes_exhausted");
        for i in 0..h.raise_after {
            assert!(st.snapshot(t(0)).findings.is_empty());
            run(
                &mut st,
                i64::from(i),
                vec![finding("disk.inodes_exhausted", "/", Severity::Warning)],
            );
        }
        assert_eq!(st.snapshot(t(0)).findings.len(), 1);
    }

    #[test]
    fn without_hysteresis_findings_are_raised_and_cleared_as_reported() {
        // check's state: the tuned rule counts for nothing.
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names);
        let f = || finding("disk.filesystem_full", "/", Severity::Critical);
        st.apply("disk", done(with(Status::Ok, vec![f()])), t(0));
        assert_eq!(st.snapshot(t(1)).findings.len(), 1);
        assert_eq!(st.snapshot(t(1)).findings[0].state, FindingState::Active);
        st.apply("disk", done(with(Status::Ok, vec![])), t(2));
        assert!(st.snapshot(t(3)).findings.is_empty());
        let c = counts(&st, "disk.filesystem_full");
        assert_eq!((c.raised, c.cleared, c.suppressed), (1, 1, 0));
        st.apply("disk", done(with(Status::Ok, vec![f()])), t(4));
        assert_eq!(counts(&st, "disk.filesystem_full").reraised, 1);
    }

    #[test]
    fn remembered_clears_are_bounded() {
        let names = vec!["kernel".to_string()];
        let mut st = State::new("n", &names);
        let n = REMEMBERED_CLEARS + 10;
        for i in 0..n {
            let f = finding("kernel.oom_cgroup", &format!("pod {i}"), Severity::Warning);
            st.apply("kernel", done(with(Status::Ok, vec![f])), t(2 * i as i64));
            st.apply(
                "kernel",
                done(with(Status::Ok, vec![])),
                t(2 * i as i64 + 1),
            );
        }
        assert_eq!(st.cleared.len(), REMEMBERED_CLEARS);
        assert_eq!(st.cleared_set.len(), REMEMBERED_CLEARS);
        assert_eq!(counts(&st, "kernel.oom_cgroup").reraised, 0);
    }

    #[test]
    fn finding_transitions_log_at_the_level_of_their_severity() {
        // tracing caches, per call site, whether any subscriber listens. Another test's thread
        // that registers a call site while this one installs its subscriber can cache "nobody"
        // for good (it computed the interest before the subscriber existed and published the
        // call site after this test asked every call site again), and a WARN line went missing
        // in CI that way. So the body runs in a process where no other test runs.
        if crate::alone::ran_alone_in_a_child(
            "state::tests::finding_transitions_log_at_the_level_of_their_severity",
        ) {
            return;
        }
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
                cpu_total: Duration::ZERO,
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
                cpu_total: Duration::ZERO,
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
                cpu_total: Duration::ZERO,
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
