//! The node's own logs, where real nodes keep them: the syslog files (`/var/log/messages` on
//! CentOS/TencentOS, as TKE nodes; `/var/log/syslog` on Ubuntu/Debian) and the systemd journal
//! (`/var/log/journal`, or `/run/log/journal` when it is volatile), read natively from its
//! files. What kubelet, dockerd and containerd say there is what the handbook quotes.
//!
//! - [`syslog`]: a line of a syslog file, in the node's local time ([`tz`]: the host's
//!   `etc/localtime`), year inferred with roll-over; rsyslog's RFC 3339 and RFC 5424 formats.
//! - [`follow`]: following a text file across cycles (offsets, rotation by rename or
//!   truncation, a byte budget).
//! - [`journal`]: a reader of the journal file format; [`journal_follow`]: following the
//!   system journal's files across cycles by file id.
//! - [`patterns`]: what a line means: the kubelet's PLEG and runtime/network readiness, the
//!   runtimes' name conflicts, ttrpc errors and image pull failures, with the names they carry
//!   validated.
//! - [`sample`]: the typed reading the log rules judge (the incidents [`Incidents`] keeps,
//!   the read's report, the live facts), which tests build directly; [`thresholds`]: the
//!   log rules' limits.
//! - [`judge`]: the log-derived findings of the `runtime` collector as drafts
//!   (`collectors/rules/runtime_logs.toml`), from a [`LogSample`].
//!
//! [`NodeLog::read_new`] reads what is new in every source (a bounded look back on the first
//! read, then only new lines or entries), keeps the lines of the programs asked for, drops a
//! line a second source already gave (on CentOS journald forwards every line to rsyslog, so
//! the same line is in the journal and in `/var/log/messages`), and drops lines older than the
//! window: an incident hours ago is history, not a current finding.

pub mod follow;
pub mod journal;
pub mod journal_follow;
pub mod judge;
pub mod patterns;
pub mod registry;
pub mod sample;
pub mod syslog;
pub mod thresholds;
pub mod tz;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::time::Duration;

use crate::host::HostPaths;
use crate::metric::Metric;

pub use patterns::{classify, Event, EventKind};
pub use sample::{Incident, LiveFacts, LogSample, ReadReport, SourceKind};
pub use thresholds::Thresholds;

/// Where and how much to read.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLogConfig {
    /// Syslog files, host paths.
    pub syslog_files: Vec<String>,
    /// Journal directories, host paths.
    pub journal_dirs: Vec<String>,
    /// Lines older than this are history: not read on the first pass, dropped if met later.
    pub lookback: Duration,
    /// Bytes read from the end of a syslog file seen for the first time.
    pub first_read_bytes: u64,
    /// Bytes read per cycle over all sources.
    pub max_bytes_per_cycle: u64,
    /// Lines or entries taken per cycle over all sources.
    pub max_records_per_cycle: usize,
    /// Programs whose lines are kept (`SYSLOG_IDENTIFIER` / the syslog tag).
    pub idents: Vec<String>,
}

impl Default for NodeLogConfig {
    fn default() -> Self {
        NodeLogConfig {
            syslog_files: vec!["/var/log/messages".into(), "/var/log/syslog".into()],
            journal_dirs: vec!["/var/log/journal".into(), "/run/log/journal".into()],
            lookback: Duration::from_secs(3600),
            // An hour of a busy node's syslog (30 lines/s of ~140 B) is ~15 MB.
            first_read_bytes: 16 << 20,
            max_bytes_per_cycle: 32 << 20,
            max_records_per_cycle: 200_000,
            idents: ["kubelet", "dockerd", "containerd", "docker", "crio"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// Bytes of a syslog file read at once (a cycle reads as many pieces as its budget allows).
const CHUNK: u64 = 1 << 20;

/// One line of a program the reader was asked for, inside the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Unix seconds.
    pub time: i64,
    pub source: SourceKind,
    /// Host path of the file it came from.
    pub file: String,
    pub ident: String,
    pub pid: Option<u32>,
    pub message: String,
    /// The boot the line was written in, where the source says (a journal entry's boot id; a
    /// syslog line does not say). A line met in both sources carries the journal's.
    pub boot_id: Option<[u8; 16]>,
}

/// The reader of every node log source, with its positions between cycles.
#[derive(Debug)]
pub struct NodeLog {
    host: HostPaths,
    config: NodeLogConfig,
    files: follow::Follower,
    journal: journal_follow::JournalFollower,
    seen: Seen,
    /// Where in this read's output each syslog line went, by its `Seen` key: the same line
    /// met again in the journal gives it the entry's boot id.
    taken: HashMap<u64, usize>,
}

impl NodeLog {
    pub fn new(host: HostPaths, config: NodeLogConfig) -> NodeLog {
        NodeLog {
            host,
            config,
            files: follow::Follower::new(),
            journal: journal_follow::JournalFollower::new(),
            seen: Seen::default(),
            taken: HashMap::new(),
        }
    }

    pub fn config(&self) -> &NodeLogConfig {
        &self.config
    }

    /// Reads what is new in every source; `now` is Unix seconds.
    pub fn read_new(&mut self, now: i64) -> (Vec<LogRecord>, ReadReport) {
        let mut report = ReadReport::default();
        let mut out = Vec::new();
        let since = now - self.config.lookback.as_secs() as i64;
        let mut budget = self.config.max_bytes_per_cycle;
        let zone = tz::LocalZone::read(&self.host);
        report.zone = zone.name.clone();
        report.zone_problem = zone.problem.clone();
        self.seen.prune(since);
        self.taken.clear();

        // Syslog files.
        let mut live: Vec<PathBuf> = Vec::new();
        let syslog_files = self.config.syslog_files.clone();
        for f in &syslog_files {
            let path = self.host.resolve(f);
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                _ => {}
            }
            live.push(path.clone());
            if budget == 0 || out.len() >= self.config.max_records_per_cycle {
                report.behind = true;
                continue;
            }
            // In pieces of at most CHUNK bytes: memory stays bounded whatever the budget.
            let mut first = true;
            loop {
                let want = budget.min(CHUNK);
                let chunk = match self
                    .files
                    .read_new(&path, self.config.first_read_bytes, want)
                {
                    Ok(c) => c,
                    Err(e) => {
                        report.errors.push(e.to_string());
                        break;
                    }
                };
                if first {
                    report.files.push(f.clone());
                    first = false;
                }
                budget = budget.saturating_sub(chunk.bytes_read);
                *report.bytes_read.entry(SourceKind::Syslog).or_default() += chunk.bytes_read;
                self.take_lines(&chunk.text, &zone, now, since, f, &mut out, &mut report);
                if chunk.behind_bytes == 0 || chunk.bytes_read == 0 {
                    break;
                }
                if budget == 0 || out.len() >= self.config.max_records_per_cycle {
                    report.behind = true;
                    break;
                }
            }
        }
        self.files.retain(&live);

        // The journal.
        let mut entries = Vec::new();
        let room = self.config.max_records_per_cycle.saturating_sub(out.len());
        let idents = self.config.idents.clone();
        let wanted = |e: &journal::Entry| idents.iter().any(|i| i == e.ident());
        let jr = self.journal.read_new(
            &self.host,
            &self.config.journal_dirs,
            since.max(0) as u64 * 1_000_000,
            room,
            budget,
            &wanted,
            &mut entries,
        );
        *report.bytes_read.entry(SourceKind::Journal).or_default() += jr.stats.bytes_read;
        *report.records_read.entry(SourceKind::Journal).or_default() += jr.stats.entries;
        report.undecodable_fields += jr.stats.undecodable_fields;
        report.behind |= jr.behind;
        report.errors.extend(jr.errors.iter().cloned());
        report.files.extend(jr.files.iter().cloned());
        for (n, e) in entries.into_iter().enumerate() {
            let file = jr.file_of(n).unwrap_or_default().to_string();
            let ident = e.ident();
            if !self.config.idents.iter().any(|i| i == ident) {
                continue;
            }
            let Some(msg) = e.message.as_deref() else {
                continue;
            };
            let time = i64::try_from(e.realtime_usec / 1_000_000).ok();
            let ident = ident.to_string();
            let boot_id = Some(e.boot_id).filter(|b| *b != [0; 16]);
            self.keep(
                &mut out,
                &mut report,
                since,
                time,
                (SourceKind::Journal, boot_id),
                &file,
                &ident,
                e.pid,
                msg,
            );
        }
        self.taken.clear();
        (out, report)
    }

    /// The lines of the programs asked for in a chunk of a syslog file.
    #[allow(clippy::too_many_arguments)]
    fn take_lines(
        &mut self,
        text: &str,
        zone: &tz::LocalZone,
        now: i64,
        since: i64,
        file: &str,
        out: &mut Vec<LogRecord>,
        report: &mut ReadReport,
    ) {
        for line in text.lines() {
            *report.records_read.entry(SourceKind::Syslog).or_default() += 1;
            // Cheap test before parsing: the line names one of the programs.
            if !self.config.idents.iter().any(|i| line.contains(i.as_str())) {
                continue;
            }
            let Some(l) = syslog::parse(line, &zone.tz, now) else {
                report.unparsed += 1;
                continue;
            };
            if !self.config.idents.iter().any(|i| i == l.ident) {
                continue;
            }
            self.keep(
                out,
                report,
                since,
                l.time,
                (SourceKind::Syslog, None),
                file,
                l.ident,
                l.pid,
                l.message,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn keep(
        &mut self,
        out: &mut Vec<LogRecord>,
        report: &mut ReadReport,
        since: i64,
        time: Option<i64>,
        (source, boot_id): (SourceKind, Option<[u8; 16]>),
        file: &str,
        ident: &str,
        pid: Option<u32>,
        message: &str,
    ) {
        let Some(time) = time.filter(|t| *t >= since) else {
            report.outside_window += 1;
            return;
        };
        let key = Seen::key(time, ident, message);
        if !self.seen.insert(key, time) {
            // The syslog copy of a journal entry (journald forwards to rsyslog) was kept
            // first: it now says which boot it is from.
            if let Some(r) = boot_id
                .and(self.taken.get(&key))
                .and_then(|i| out.get_mut(*i))
            {
                r.boot_id = r.boot_id.or(boot_id);
            }
            report.duplicates += 1;
            return;
        }
        if source == SourceKind::Syslog && !self.config.journal_dirs.is_empty() {
            self.taken.insert(key, out.len());
        }
        report.records_kept += 1;
        out.push(LogRecord {
            time,
            source,
            file: file.to_string(),
            ident: ident.to_string(),
            pid,
            message: crate::bounded::truncate(message.to_string(), journal::MAX_PAYLOAD),
            boot_id,
        });
    }

    /// `node_doctor_<collector>_node_log_*` metrics of a read.
    pub fn metrics(collector: &str, report: &ReadReport) -> Vec<Metric> {
        let mut m = Vec::new();
        for (kind, bytes) in &report.bytes_read {
            m.push(
                Metric::gauge(
                    &format!("node_doctor_{collector}_node_log_bytes_read"),
                    "Bytes read from the node's syslog files or journal in the last run.",
                    *bytes as f64,
                )
                .label("source", kind.as_str()),
            );
        }
        for (kind, n) in &report.records_read {
            m.push(
                Metric::gauge(
                    &format!("node_doctor_{collector}_node_log_records_read"),
                    "Lines or journal entries read from the node's logs in the last run.",
                    *n as f64,
                )
                .label("source", kind.as_str()),
            );
        }
        m.push(Metric::gauge(
            &format!("node_doctor_{collector}_node_log_behind"),
            "1 when the last run's byte or record budget ran out before the end of the node's logs.",
            if report.behind { 1.0 } else { 0.0 },
        ));
        m
    }
}

/// Lines already taken, by (second, program, message), for as long as the window: the same
/// line met in a second source is skipped. Bounded.
#[derive(Debug, Default)]
struct Seen {
    keys: HashMap<u64, i64>,
    order: VecDeque<(i64, u64)>,
}

const SEEN_MAX: usize = 200_000;

impl Seen {
    fn key(time: i64, ident: &str, message: &str) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (time, ident, message.trim_end()).hash(&mut h);
        h.finish()
    }

    /// Takes the line of key `k` (from [`Seen::key`]); false when it was taken before.
    fn insert(&mut self, k: u64, time: i64) -> bool {
        if self.keys.contains_key(&k) {
            return false;
        }
        self.keys.insert(k, time);
        self.order.push_back((time, k));
        while self.order.len() > SEEN_MAX {
            if let Some((_, old)) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
        true
    }

    fn prune(&mut self, since: i64) {
        // Entries arrive roughly in time order; drop from the front while old.
        while self.order.front().is_some_and(|(t, _)| *t < since) {
            if let Some((_, k)) = self.order.pop_front() {
                self.keys.remove(&k);
            }
        }
    }
}

/// Incidents: what the patterns found, per (kind, subject), with counts and first/last seen,
/// kept for the window. Bounded: at most [`MAX_INCIDENTS`], the stalest dropped first.
#[derive(Debug, Default)]
pub struct Incidents {
    map: BTreeMap<(EventKind, String), Incident>,
}

/// Incidents remembered at most (each is one kind of problem with one subject).
pub const MAX_INCIDENTS: usize = 512;

impl Incidents {
    pub fn new() -> Incidents {
        Incidents::default()
    }

    /// Adds the events of new lines.
    pub fn add(&mut self, record: &LogRecord, event: Event) {
        let key = (event.kind, event.subject.clone());
        let inc = self.map.entry(key).or_insert_with(|| Incident {
            kind: event.kind,
            subject: event.subject.clone(),
            count: 0,
            first_seen: record.time,
            last_seen: record.time,
            example: String::new(),
            source: record.source,
            file: record.file.clone(),
            ident: record.ident.clone(),
            detail: event.detail.clone(),
        });
        inc.count += 1;
        if record.time >= inc.last_seen {
            inc.last_seen = record.time;
            inc.example = crate::bounded::truncate(record.message.clone(), 600);
            inc.source = record.source;
            inc.file = record.file.clone();
            inc.ident = record.ident.clone();
            inc.detail.merge(event.detail);
        }
        inc.first_seen = inc.first_seen.min(record.time);
    }

    /// Drops incidents last seen before `since`, then the stalest beyond the cap.
    pub fn prune(&mut self, since: i64) {
        self.map.retain(|_, i| i.last_seen >= since);
        while self.map.len() > MAX_INCIDENTS {
            let stalest = self
                .map
                .iter()
                .min_by_key(|(_, i)| i.last_seen)
                .map(|(k, _)| k.clone());
            match stalest {
                Some(k) => {
                    self.map.remove(&k);
                }
                None => break,
            }
        }
    }

    pub fn list(&self) -> Vec<Incident> {
        self.map.values().cloned().collect()
    }
}

/// The node logs as the `runtime` collector uses them: the reader, the incidents it found, and
/// the last read's report. `sample` reads, classifies and prunes; the judge takes the sample.
#[derive(Debug)]
pub struct NodeLogWatcher {
    log: NodeLog,
    incidents: Incidents,
    /// Lines matched since start, by kind (a counter for `/metrics`).
    matched: BTreeMap<EventKind, u64>,
}

impl NodeLogWatcher {
    pub fn new(host: HostPaths, config: NodeLogConfig) -> NodeLogWatcher {
        NodeLogWatcher {
            log: NodeLog::new(host, config),
            incidents: Incidents::new(),
            matched: BTreeMap::new(),
        }
    }

    /// Reads new lines, records their events, forgets what left the window. `now` is Unix
    /// seconds.
    pub fn sample(&mut self, now: i64) -> LogSample {
        let (records, report) = self.log.read_new(now);
        for r in &records {
            for e in classify(&r.ident, &r.message) {
                *self.matched.entry(e.kind).or_default() += 1;
                self.incidents.add(r, e);
            }
        }
        let lookback = self.log.config().lookback.as_secs() as i64;
        self.incidents.prune(now - lookback);
        LogSample {
            now,
            lookback_seconds: lookback,
            incidents: self.incidents.list(),
            report,
        }
    }

    /// The reader's metrics and the matched-line counters.
    pub fn metrics(&self, collector: &str, sample: &LogSample) -> Vec<Metric> {
        let mut m = NodeLog::metrics(collector, &sample.report);
        for (kind, n) in &self.matched {
            m.push(
                Metric::counter(
                    &format!("node_doctor_{collector}_node_log_matches_total"),
                    "Lines of the node's logs that matched a known problem since the agent started, by kind.",
                    *n as f64,
                )
                .label("kind", kind.as_str()),
            );
        }
        m
    }
}

/// The facts of every registry a pull incident names (at most `max` registries, the most
/// recently seen first), for [`LiveFacts::registries`]: read here, beside the log
/// reader, so that the judge stays pure and the registry reader knows nothing of incidents.
pub fn registry_facts(
    host: &HostPaths,
    incidents: &[Incident],
    daemon_json: &str,
    containerd_config: &str,
    max: usize,
) -> BTreeMap<String, registry::RegistryFacts> {
    let mut pulls: Vec<&Incident> = incidents
        .iter()
        .filter(|i| {
            matches!(
                i.kind,
                EventKind::PullHttpRegistry
                    | EventKind::PullUnknownCa
                    | EventKind::PullAuth
                    | EventKind::PullNotFound
            )
        })
        .collect();
    pulls.sort_by_key(|i| std::cmp::Reverse(i.last_seen));
    let mut out = BTreeMap::new();
    for i in pulls {
        let Some(r) = i.detail.registry.as_deref() else {
            continue;
        };
        if out.len() >= max {
            break;
        }
        if !out.contains_key(r) && patterns::is_registry_host(r) {
            out.insert(
                r.to_string(),
                registry::facts(host, r, daemon_json, containerd_config),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
