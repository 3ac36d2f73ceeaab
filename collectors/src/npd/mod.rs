//! The `npd` collector: the operator's node-problem-detector system-log-monitor configs
//! (`--npd-config`), so NPD users keep their custom rules. Each config's lines (the kernel log
//! through the node's kmsg hub, a log file under the host root, or the journal's entries of
//! one `SYSLOG_IDENTIFIER`) go through NPD's matching ([`matcher`]); a temporary rule's match
//! is an event-like finding, a permanent rule's the config's condition set with the rule's
//! reason, held until the agent restarts (NPD's own semantics). [`config`] parses and checks
//! the JSON at start. Without a config the collector has nothing to judge and says so.
//! docs/collectors/npd.md.

pub mod config;
pub mod judge;
pub mod matcher;
pub mod sample;
pub mod thresholds;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::collector::{CollectContext, Phases, Status};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::Node;
use crate::nodelog::follow::Follower;
use crate::nodelog::journal_follow::JournalFollower;
use crate::nodelog::tz::LocalZone;
use crate::rules::Draft;

pub use config::{NpdConfig, Plugin, RuleKind};
pub use sample::{Hit, NpdSample};
pub use thresholds::Thresholds;

/// Bytes of matched lines kept as evidence.
pub const LINES_BYTES: usize = 1024;
/// Bytes of a log file read back at first sight, and read per run.
const FILE_BYTES_PER_RUN: u64 = 1 << 20;
/// Journal entries and bytes read per run.
const JOURNAL_ENTRIES_PER_RUN: usize = 20_000;
const JOURNAL_BYTES_PER_RUN: u64 = 8 << 20;
/// Match times remembered per rule (the count in the window is at most this).
const MAX_TIMES: usize = 1024;

/// Configuration of the npd collector.
#[derive(Debug, Clone, Default)]
pub struct NpdConfigs {
    pub thresholds: Thresholds,
    /// The checked configs (`--npd-config`), in the order given.
    pub configs: Vec<NpdConfig>,
    /// The kernel-log reader's bounds (`--kmsg-max-records`); each kmsg config's own
    /// `lookback` replaces the lookback.
    pub kmsg: KmsgConfig,
}

/// Where one config's lines come from, with its position.
enum Reader {
    Kmsg(KmsgReader),
    File {
        follower: Follower,
        path: PathBuf,
        zone: Option<LocalZone>,
    },
    Journal(JournalFollower),
}

/// One config at work: its reader, its buffer.
struct Monitor {
    config: NpdConfig,
    reader: Reader,
    buffer: matcher::LineBuffer,
    lines_total: u64,
}

/// What is remembered of a rule's matches.
#[derive(Debug, Clone)]
struct Memory {
    hit: Hit,
    /// Unix seconds of each match (temporary rules: the window's).
    times: VecDeque<i64>,
    last: i64,
}

/// Matches the configs' rules against their sources.
pub struct NpdCollector {
    node: Node,
    config: NpdConfigs,
    monitors: Vec<Monitor>,
    /// By (kind, condition, reason).
    memory: BTreeMap<(u8, String, String), Memory>,
    matches_total: BTreeMap<(String, String), u64>,
    /// Unix seconds now (tests fix it).
    clock: fn() -> i64,
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl NpdCollector {
    pub fn new(node: Node, config: NpdConfigs) -> Self {
        let monitors = config
            .configs
            .iter()
            .map(|c| {
                let reader = match &c.plugin {
                    Plugin::Kmsg => Reader::Kmsg(node.kmsg_reader(KmsgConfig {
                        lookback: c.lookback,
                        ..config.kmsg.clone()
                    })),
                    Plugin::Filelog(_) => Reader::File {
                        follower: Follower::new(),
                        path: node.host().join(&c.log_path),
                        zone: None,
                    },
                    Plugin::Journald { .. } => Reader::Journal(JournalFollower::new()),
                };
                Monitor {
                    config: c.clone(),
                    reader,
                    buffer: matcher::LineBuffer::new(c.buffer_size),
                    lines_total: 0,
                }
            })
            .collect();
        NpdCollector {
            node,
            config,
            monitors,
            memory: BTreeMap::new(),
            matches_total: BTreeMap::new(),
            clock: now_unix,
        }
    }

    /// The same collector with another clock (tests: a journal fixture's time).
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    /// Reads each config's new lines and matches them; returns what could not be read.
    fn read_and_match(&mut self, now: i64) -> Vec<String> {
        let mut could_not = Vec::new();
        let host = self.node.host().clone();
        for m in &mut self.monitors {
            let (lines, problem) = read_lines(m, &host, now);
            if let Some(p) = problem {
                could_not.push(format!("{}: {p}", m.config.file));
            }
            for (time, line) in lines {
                if m.config.skip_list.iter().any(|s| line.contains(s.as_str())) {
                    continue;
                }
                m.lines_total += 1;
                m.buffer.push(&line);
                for rule in &m.config.rules {
                    let Some(matched) = m.buffer.matches(&rule.regex) else {
                        continue;
                    };
                    let joined = crate::bounded::ellipsis(&matched.join("\n"), LINES_BYTES);
                    let kind = match rule.kind {
                        RuleKind::Temporary => 0,
                        RuleKind::Permanent => 1,
                    };
                    let key = (
                        kind,
                        rule.condition.clone().unwrap_or_default(),
                        rule.reason.clone(),
                    );
                    let condition = rule.condition.as_ref().map(|c| {
                        let healthy = m
                            .config
                            .conditions
                            .iter()
                            .find(|d| &d.kind == c)
                            .map(|d| d.reason.clone())
                            .unwrap_or_default();
                        (c.clone(), healthy)
                    });
                    let entry = self.memory.entry(key).or_insert_with(|| {
                        tracing::info!(config = %m.config.file, reason = %rule.reason, rule_type = rule.kind.name(), "node-problem-detector rule matched");
                        Memory {
                            hit: Hit {
                                config_file: String::new(),
                                source: String::new(),
                                plugin: "",
                                log_path: String::new(),
                                identifier: None,
                                kind: rule.kind,
                                reason: rule.reason.clone(),
                                condition: None,
                                pattern: String::new(),
                                lines: String::new(),
                                count: 0,
                                last_seen_seconds_ago: 0,
                            },
                            times: VecDeque::new(),
                            last: time,
                        }
                    });
                    let h = &mut entry.hit;
                    h.config_file = crate::bounded::ellipsis(&m.config.file, 512);
                    h.source = m.config.source.clone();
                    h.plugin = m.config.plugin.name();
                    h.log_path = match &m.config.plugin {
                        Plugin::Kmsg => "/dev/kmsg".into(),
                        _ => m.config.log_path.clone(),
                    };
                    h.identifier = match &m.config.plugin {
                        Plugin::Journald { identifier } => Some(identifier.clone()),
                        _ => None,
                    };
                    h.condition = condition;
                    h.pattern = crate::bounded::ellipsis(&rule.pattern, LINES_BYTES);
                    h.lines = joined;
                    if entry.times.len() == MAX_TIMES {
                        entry.times.pop_front();
                    }
                    entry.times.push_back(time);
                    entry.last = entry.last.max(time);
                    h.count = h.count.saturating_add(1);
                    *self
                        .matches_total
                        .entry((m.config.source.clone(), rule.reason.clone()))
                        .or_insert(0) += 1;
                }
            }
        }
        could_not
    }

    /// The hits as of `now`: temporary counts are those of the window.
    fn hits(&mut self, now: i64) -> Vec<Hit> {
        let window = self.config.thresholds.event_window_seconds as i64;
        let mut out = Vec::new();
        self.memory.retain(|_, m| {
            if m.hit.kind == RuleKind::Temporary {
                m.times.retain(|t| now - *t <= window);
                if m.times.is_empty() {
                    return false;
                }
                m.hit.count = m.times.len() as u64;
            }
            m.hit.last_seen_seconds_ago = (now - m.last).max(0) as u64;
            out.push(m.hit.clone());
            true
        });
        out
    }
}

/// One config's new lines with their times (Unix seconds), and what went wrong reading.
fn read_lines(
    m: &mut Monitor,
    host: &crate::host::HostPaths,
    now: i64,
) -> (Vec<(i64, String)>, Option<String>) {
    let since = now - m.config.lookback.as_secs() as i64;
    match (&mut m.reader, &m.config.plugin) {
        (Reader::Kmsg(k), _) => {
            let batch = k.read_new();
            let lines = batch
                .records
                .into_iter()
                .map(|r| {
                    let t = r
                        .timestamp
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .map_or(now, |d| d.as_secs() as i64);
                    let message = std::sync::Arc::try_unwrap(r)
                        .map_or_else(|r| r.message.clone(), |r| r.message);
                    (t, trimmed(message))
                })
                .collect();
            let problem = match batch.status {
                Status::Ok | Status::Noted(_) => None,
                Status::Degraded(s) | Status::Unavailable(s) | Status::Error(s) => Some(s),
            };
            (lines, problem)
        }
        (
            Reader::File {
                follower,
                path,
                zone,
            },
            Plugin::Filelog(format),
        ) => {
            let zone = zone.get_or_insert_with(|| LocalZone::read(host));
            let chunk = match follower.read_new(path, FILE_BYTES_PER_RUN, FILE_BYTES_PER_RUN) {
                Ok(c) => c,
                Err(e) => return (Vec::new(), Some(e.to_string())),
            };
            let mut lines = Vec::new();
            for line in chunk.text.lines() {
                let Some(t) = file_time(line, format, &zone.tz, now) else {
                    continue;
                };
                if t < since {
                    continue;
                }
                let Some(msg) = last_group(&format.message, line) else {
                    continue;
                };
                lines.push((t, msg.to_string()));
            }
            (lines, None)
        }
        (Reader::Journal(j), Plugin::Journald { identifier }) => {
            let mut out = Vec::new();
            let id = identifier.clone();
            let report = j.read_new(
                host,
                std::slice::from_ref(&m.config.log_path),
                since.max(0) as u64 * 1_000_000,
                JOURNAL_ENTRIES_PER_RUN,
                JOURNAL_BYTES_PER_RUN,
                &|e| e.identifier.as_deref() == Some(id.as_str()),
                &mut out,
            );
            let problem = if report.files.is_empty() && !report.errors.is_empty() {
                Some(report.errors.join("; "))
            } else if report.files.is_empty() {
                Some(format!(
                    "no system journal file under {}",
                    m.config.log_path
                ))
            } else {
                None
            };
            let lines = out
                .into_iter()
                .filter_map(|e| Some(((e.realtime_usec / 1_000_000) as i64, trimmed(e.message?))))
                .collect();
            (lines, problem)
        }
        _ => (Vec::new(), None),
    }
}

/// A kmsg or journal message as NPD's watchers pass it on: without leading and trailing white
/// space (`strings.TrimSpace`), so `divide error: 0000 [#1] SMP ` meets a pattern ending in `SMP`.
fn trimmed(message: String) -> String {
    let t = message.trim();
    if t.len() == message.len() {
        message
    } else {
        t.to_string()
    }
}

/// The last capture group that took part in the match, else the whole match (NPD uses the
/// last submatch).
fn last_group<'a>(re: &regex::Regex, line: &'a str) -> Option<&'a str> {
    let c = re.captures(line)?;
    (0..c.len())
        .rev()
        .find_map(|i| c.get(i))
        .map(|m| m.as_str())
}

/// A filelog line's time (Unix seconds) by the config's timestamp regexp and layout.
fn file_time(line: &str, f: &config::FileFormat, tz: &jiff::tz::TimeZone, now: i64) -> Option<i64> {
    let text = last_group(&f.timestamp, line)?;
    parse_time(text, f.layout, tz, now)
}

/// Parses a timestamp of a converted Go layout.
pub fn parse_time(
    text: &str,
    layout: config::TimeLayout,
    tz: &jiff::tz::TimeZone,
    now: i64,
) -> Option<i64> {
    match layout {
        config::TimeLayout::Rfc3339 => crate::nodelog::syslog::parse_rfc3339(text.trim()),
        config::TimeLayout::Syslog => {
            // `Jan _2 15:04:05`: month name, day padded with a space, time.
            let mut it = text.split_whitespace();
            let name = it.next()?;
            let month = MONTHS.iter().position(|m| *m == name)? as i8 + 1;
            let day: i8 = it.next()?.parse().ok()?;
            let hms: Vec<i8> = it
                .next()?
                .split(':')
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            let [h, mi, s] = hms[..] else { return None };
            crate::nodelog::syslog::date_3164(tz, now, month, day, h, mi, s)
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl Phases for NpdCollector {
    const NAME: &'static str = "npd";
    type Sample = NpdSample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(NpdSample, Status), Status> {
        if self.monitors.is_empty() {
            return Err(Status::Noted(
                "no --npd-config given: no node-problem-detector rules to match".into(),
            ));
        }
        let now = (self.clock)();
        let could_not = self.read_and_match(now);
        let all_failed = could_not.len() == self.monitors.len();
        let status = Status::from_notes(could_not, Vec::new());
        let sample = NpdSample {
            hits: self.hits(now),
            configs: self.monitors.len(),
        };
        match status {
            Status::Degraded(why) if all_failed => Err(Status::Unavailable(why)),
            s => Ok((sample, s)),
        }
    }

    fn judge(&mut self, sample: &NpdSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, _sample: &NpdSample) -> Vec<Metric> {
        let mut out = Vec::new();
        for m in &self.monitors {
            out.push(
                Metric::counter(
                    "node_doctor_npd_lines_total",
                    "Lines of a node-problem-detector config's source matched against its rules.",
                    m.lines_total as f64,
                )
                .label("source", m.config.source.clone()),
            );
        }
        for ((source, reason), n) in &self.matches_total {
            out.push(
                Metric::counter(
                    "node_doctor_npd_matches_total",
                    "Matches of a node-problem-detector rule (by its config's source and the rule's reason).",
                    *n as f64,
                )
                .label("source", source.clone())
                .label("reason", reason.clone()),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_layouts_parse() {
        let tz = jiff::tz::TimeZone::UTC;
        let now = crate::nodelog::syslog::parse_rfc3339("2026-11-27T12:00:00Z").unwrap();
        assert_eq!(
            parse_time("Nov 27 11:59:00", config::TimeLayout::Syslog, &tz, now),
            Some(now - 60)
        );
        assert_eq!(
            parse_time("Nov  7 11:59:00", config::TimeLayout::Syslog, &tz, now),
            crate::nodelog::syslog::parse_rfc3339("2026-11-07T11:59:00Z")
        );
        assert_eq!(
            parse_time(
                "2026-11-27T11:59:00.123456789+00:00",
                config::TimeLayout::Rfc3339,
                &tz,
                now
            ),
            Some(now - 60)
        );
        assert_eq!(
            parse_time(
                "2026-11-27T11:59:00Z",
                config::TimeLayout::Rfc3339,
                &tz,
                now
            ),
            Some(now - 60)
        );
        assert_eq!(
            parse_time("garbage", config::TimeLayout::Syslog, &tz, now),
            None
        );
    }
}
