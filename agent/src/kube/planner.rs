//! The reporter's decisions, without any I/O or clock: what the node's conditions should say,
//! when to write them, and which events to create or update. The driver (`mod.rs`) feeds it
//! the time, the latest findings and the API's answers; the scale simulation feeds it a
//! simulated clock. Every rule that keeps the API server quiet is here:
//!
//! - conditions are written when a condition's status or reason changes, and otherwise only
//!   as a heartbeat, no more often than every `heartbeat` (5 min) plus up to 10 % jitter;
//!   a message that changes alone (a figure moved) rides on the next write;
//! - a problem sets its condition at once; the condition clears only after the problem has
//!   been gone for `clear_after`, so a flapping finding costs one True/False pair per
//!   `clear_after`, not one per collector run;
//! - status writes are at least `min_write_interval` apart (changes in between coalesce);
//! - events repeat into one object (`count`, `lastTimestamp`) and are spent from a per-node
//!   token bucket (client-go's event spam filter: burst 25, one token per 5 minutes); a
//!   repeat that finds no token is kept and sent, with its count, when one is free.

use std::collections::BTreeMap;
use std::time::Duration;

use collectors::{Finding, Severity};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::classes::{self, ConditionClass, Naming};

/// Longest condition or event message written (the API server caps event notes at 1 KiB).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Condition types with this prefix are node-doctor's own; any of them on the node that this
/// build does not write (a class that was removed or renamed) is deleted.
pub const OWN_PREFIX: &str = "NodeDoctor";
/// The field manager of node-doctor's status patches (sent as `fieldManager`): a condition
/// type another manager owns on the node is not node-doctor's to remove or take over.
pub const MANAGER: &str = "node-doctor";
/// Event spam filter of client-go's recorder: burst and refill period.
pub const EVENT_BURST: f64 = 25.0;
pub const EVENT_REFILL: Duration = Duration::from_secs(300);
/// Repeats within this long update the same Event object (the API server keeps events 1 h).
pub const EVENT_AGGREGATE_WINDOW: Duration = Duration::from_secs(3600);
/// Aggregation keys remembered (oldest forgotten first).
pub const EVENT_CACHE: usize = 256;
/// The namespace of events about a Node (as the kubelet's).
pub const EVENT_NAMESPACE: &str = "default";
pub const COMPONENT: &str = "node-doctor";

#[derive(Debug, Clone)]
pub struct Settings {
    pub node: String,
    /// The names written (`--kube-names`).
    pub naming: Naming,
    pub heartbeat: Duration,
    pub clear_after: Duration,
    pub min_write_interval: Duration,
    /// Base for the agent's own pages in messages (`/explain`, docs anchors).
    /// Where messages link for a rule.
    pub links: crate::links::Links,
}

/// One finding as the planner sees it.
pub struct Observed<'a> {
    pub finding: &'a Finding,
    pub last_seen: OffsetDateTime,
}

/// The latest picture: active findings and the collectors that are not running.
pub struct View<'a> {
    pub findings: Vec<Observed<'a>>,
    /// (collector, why) for every collector whose latest run did not read the host.
    pub down: Vec<(&'a str, &'a str)>,
    /// Every collector this agent runs (a class whose collectors are all missing here, as
    /// with `--collector`, is not checked).
    pub running: Vec<&'a str>,
}

/// A condition as node-doctor wrote (or found) it on the node.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub ctype: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition: OffsetDateTime,
    pub last_heartbeat: Option<OffsetDateTime>,
}

/// A small deterministic generator for jitter (seeded per node, so nodes spread out).
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new(seed: &str, salt: u64) -> Jitter {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
        for b in seed.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Jitter(h | 1)
    }
    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn add(t: OffsetDateTime, d: Duration) -> OffsetDateTime {
    t + time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}

/// RFC 3339 in seconds (the precision of `metav1.Time`).
pub use crate::timefmt::rfc3339;

pub fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

/// Cuts `s` to `max` bytes on a character boundary, marking the cut with `…`.
pub fn bounded(s: String, max: usize) -> String {
    collectors::bounded::ellipsis(&s, max)
}

/// `<id> (<subject>): <summary> Fix: <first command> More: node-doctor explain <id>; <link>`
/// — one line, control characters made visible, at most [`MAX_MESSAGE_BYTES`]. The link is
/// the rule's page ([`crate::links::Links`]).
pub fn message(f: &Finding, others: usize, links: &crate::links::Links) -> String {
    let vis = |s: &str| collectors::sanitize::visible(s).into_owned();
    let mut m = f.id.clone();
    if !f.subject.is_empty() {
        m.push_str(&format!(" ({})", vis(&bounded(f.subject.clone(), 128))));
    }
    m.push_str(": ");
    m.push_str(&vis(&bounded(f.summary.en.clone(), 480)));
    if let Some(cmd) = f.remediation.commands.first() {
        m.push_str(" Fix: ");
        m.push_str(&vis(&bounded(cmd.clone(), 240)));
    }
    let tail = format!(
        " More: node-doctor explain {}; {}{}",
        f.id,
        links.rule(&f.id),
        if others > 0 {
            format!(" (+{others} more finding(s) in /findings)")
        } else {
            String::new()
        }
    );
    let room = MAX_MESSAGE_BYTES.saturating_sub(tail.len());
    let mut m = bounded(m, room);
    m.push_str(&tail);
    bounded(m, MAX_MESSAGE_BYTES)
}

/// node-problem-detector's message for a temporary rule's Event: the matched log line, one
/// line, control characters made visible, at most [`MAX_MESSAGE_BYTES`].
pub fn npd_message(line: &str) -> String {
    bounded(
        collectors::sanitize::visible(line).into_owned(),
        MAX_MESSAGE_BYTES,
    )
}

/// What to send next.
#[derive(Debug, Clone, PartialEq)]
pub enum EventWrite {
    Create {
        key: String,
        body: Value,
    },
    Patch {
        key: String,
        name: String,
        body: Value,
    },
}

#[derive(Debug, Clone)]
struct EventEntry {
    name: Option<String>,
    reason: String,
    etype: &'static str,
    message: String,
    /// Occurrences counted locally.
    count: u64,
    /// Occurrences the API server has.
    sent: u64,
    first: OffsetDateTime,
    last: OffsetDateTime,
    /// Attempts to create that met an existing name.
    collisions: u32,
}

/// Per-finding memory for telling a new occurrence from the same one seen again.
#[derive(Debug, Clone)]
struct Occurrence {
    count: f64,
    at: Option<OffsetDateTime>,
    seen: OffsetDateTime,
}

pub struct Planner {
    pub s: Settings,
    uid: Option<String>,
    /// What is on the node, of node-doctor's conditions (taken over, then as written).
    written: BTreeMap<String, Condition>,
    /// What the node should say, by written type.
    desired: BTreeMap<String, Condition>,
    /// Each class's own state (key: its `NodeDoctor…` type; True while its problem holds),
    /// from which `desired` is rendered in the chosen naming.
    classes: BTreeMap<&'static str, Condition>,
    /// Class type -> since when its problem has been gone (hold-down before clearing).
    absent_since: BTreeMap<&'static str, OffsetDateTime>,
    /// node-doctor condition types on the node that this build does not write.
    stale: Vec<String>,
    next_heartbeat: Option<OffsetDateTime>,
    last_write: Option<OffsetDateTime>,
    /// When a previous instance last wrote (the newest heartbeat of our conditions at
    /// take-over): occurrences before it were its to report.
    previous_alive: Option<OffsetDateTime>,
    /// Occurrences older than this were reported by a previous instance (set at take-over).
    occurrences: BTreeMap<(String, String), Occurrence>,
    events: BTreeMap<String, EventEntry>,
    tokens: f64,
    tokens_at: Option<OffsetDateTime>,
    pub events_dropped: u64,
    jitter: Jitter,
    observed_once: bool,
    /// Makes event names unique among those created in the same instant.
    seq: u64,
}

impl Planner {
    pub fn new(s: Settings) -> Planner {
        let jitter = Jitter::new(&s.node, 0x6e64);
        Planner {
            s,
            uid: None,
            written: BTreeMap::new(),
            desired: BTreeMap::new(),
            classes: BTreeMap::new(),
            absent_since: BTreeMap::new(),
            stale: Vec::new(),
            next_heartbeat: None,
            last_write: None,
            previous_alive: None,
            occurrences: BTreeMap::new(),
            events: BTreeMap::new(),
            tokens: EVENT_BURST,
            tokens_at: None,
            events_dropped: 0,
            jitter,
            observed_once: false,
            seq: 0,
        }
    }

    pub fn took_over(&self) -> bool {
        self.uid.is_some()
    }

    /// The condition types this build writes, in the chosen naming, in order.
    pub fn own_types(&self) -> Vec<&'static str> {
        self.outputs().into_iter().map(|(t, _)| t).collect()
    }

    /// Each type written, with the classes it is made of (one, but under the node monitoring
    /// agent's naming several repair-worthy classes may share a type).
    fn outputs(&self) -> Vec<(&'static str, Vec<&'static ConditionClass>)> {
        let mut out: Vec<(&'static str, Vec<&'static ConditionClass>)> = Vec::new();
        for c in classes::conditions() {
            let t = c.written_type(self.s.naming);
            match out.iter_mut().find(|(o, _)| *o == t) {
                Some((_, members)) => members.push(c),
                None => out.push((t, vec![c])),
            }
        }
        out
    }

    /// Takes over the node's current conditions (from `GET /api/v1/nodes/<name>`): a restart
    /// keeps their status and `lastTransitionTime`, and writes nothing if nothing changed.
    /// Types this build wrote under another naming are queued for removal. Refused (the
    /// agent stops) under the node monitoring agent's naming when another field manager owns
    /// one of its types on the node: two writers of one type reset each other's timer.
    pub fn take_over(&mut self, node: &Value, now: OffsetDateTime) -> Result<(), String> {
        let own = self.own_types();
        let owners = managers_of_conditions(node);
        if self.s.naming == Naming::Nma {
            self.refuse_foreign_owners(&owners)?;
        }
        self.uid = Some(
            node.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        );
        self.written.clear();
        self.stale.clear();
        let mut oldest_heartbeat: Option<OffsetDateTime> = None;
        for c in node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let ctype = s("type");
            if own.contains(&ctype.as_str()) {
                let hb = parse_time(&s("lastHeartbeatTime"));
                if let Some(h) = hb {
                    self.previous_alive = Some(self.previous_alive.map_or(h, |p| p.max(h)));
                    oldest_heartbeat = Some(oldest_heartbeat.map_or(h, |o| o.min(h)));
                }
                self.written.insert(
                    ctype.clone(),
                    Condition {
                        ctype,
                        status: s("status"),
                        reason: s("reason"),
                        message: s("message"),
                        last_transition: parse_time(&s("lastTransitionTime")).unwrap_or(now),
                        last_heartbeat: hb,
                    },
                );
            } else if is_left_behind(&ctype, owners.as_ref()) {
                self.stale.push(ctype);
            }
        }
        self.desired = self.written.clone();
        self.restore_classes();
        // The next heartbeat is due a heartbeat after the oldest one on the node.
        self.next_heartbeat = Some(match oldest_heartbeat {
            Some(h) if self.written.len() == own.len() => self.heartbeat_after(h),
            _ => now,
        });
        Ok(())
    }

    /// Under the node monitoring agent's naming: an error naming the type and its other
    /// manager, when one of the types node-doctor would write is owned by another.
    fn refuse_foreign_owners(
        &self,
        owners: &Option<BTreeMap<String, Vec<String>>>,
    ) -> Result<(), String> {
        let Some(owners) = owners else {
            return Ok(());
        };
        for (t, members) in self.outputs() {
            if !members.iter().any(|c| c.nma_for(self.s.naming).is_some()) {
                continue;
            }
            if let Some(other) = owners
                .get(t)
                .and_then(|m| m.iter().find(|m| m.as_str() != MANAGER))
            {
                return Err(format!(
                    "--kube-names nma: condition {t} on node {} is written by field manager {other:?} (the EKS node monitoring agent, or another agent): two writers of one type reset each other's lastTransitionTime, and repair would act on either. Run one of them, or use node-doctor's own names",
                    self.s.node
                ));
            }
        }
        Ok(())
    }

    /// Each class's state from what was taken over: its written condition in node-doctor's
    /// polarity. Under the node monitoring agent's naming a False type is the problem of the
    /// class whose reason it carries (the others of that type start unknown and are judged
    /// afresh); a True type is every mapped class healthy.
    fn restore_classes(&mut self) {
        self.classes.clear();
        let naming = self.s.naming;
        for class in classes::conditions() {
            let Some(w) = self.written.get(class.written_type(naming)) else {
                continue;
            };
            let state = match class.nma_for(naming) {
                None => Some(Condition {
                    ctype: class.ctype(naming == Naming::Npd).to_string(),
                    ..w.clone()
                }),
                Some(m) => {
                    let own = |status: &str, reason: &str, message: &str| Condition {
                        ctype: class.ctype.clone(),
                        status: status.to_string(),
                        reason: reason.to_string(),
                        message: message.to_string(),
                        ..w.clone()
                    };
                    match w.status.as_str() {
                        "False" if w.reason == m.reason => Some(own("True", &m.reason, &w.message)),
                        "True" => Some(own("False", &class.healthy_reason, &class.healthy_message)),
                        "Unknown" => Some(own("Unknown", &w.reason, &w.message)),
                        _ => None,
                    }
                }
            };
            if let Some(st) = state {
                self.classes.insert(class.ctype.as_str(), st);
            }
        }
    }

    fn heartbeat_after(&mut self, t: OffsetDateTime) -> OffsetDateTime {
        let extra = self.s.heartbeat.mul_f64(0.1 * self.jitter.next());
        add(t, self.s.heartbeat + extra)
    }

    /// Updates what the conditions should say and queues events, from the latest picture.
    /// Cheap; the driver calls it every tick.
    pub fn observe(&mut self, now: OffsetDateTime, view: &View<'_>) {
        if !self.took_over() {
            return;
        }
        let naming = self.s.naming;
        // Problems per class: (finding, reason), most severe first.
        let mut problems: BTreeMap<&'static str, Vec<(&Finding, String)>> = BTreeMap::new();
        let mut sorted: Vec<&Observed> = view.findings.iter().collect();
        sorted.sort_by(|a, b| {
            b.finding
                .severity
                .cmp(&a.finding.severity)
                .then_with(|| a.finding.id.cmp(&b.finding.id))
                .then_with(|| a.finding.subject.cmp(&b.finding.subject))
        });
        for o in &sorted {
            for (class, reason) in classes::conditions_of(o.finding) {
                problems
                    .entry(class.ctype.as_str())
                    .or_default()
                    .push((o.finding, reason));
            }
        }
        for class in classes::conditions() {
            let ctype = class.ctype(naming == Naming::Npd);
            let next = match problems.get(class.ctype.as_str()) {
                Some(list) => {
                    self.absent_since.remove(class.ctype.as_str());
                    let (f, reason) = &list[0];
                    Some((
                        "True",
                        reason.clone(),
                        message(f, list.len() - 1, &self.s.links),
                    ))
                }
                None => self.absent(class, now, view),
            };
            let Some((status, reason, msg)) = next else {
                continue;
            };
            let prev = self.classes.get(class.ctype.as_str()).cloned();
            let changed = prev.as_ref().is_none_or(|p| p.status != status);
            let announce = changed && (prev.is_some() || status == "True");
            let cond = Condition {
                ctype: ctype.to_string(),
                status: status.to_string(),
                reason: reason.clone(),
                message: msg.clone(),
                last_transition: match &prev {
                    Some(p) if !changed => p.last_transition,
                    _ => now,
                },
                last_heartbeat: prev.as_ref().and_then(|p| p.last_heartbeat),
            };
            if announce {
                let from = prev.clone().unwrap_or_else(|| Condition {
                    status: "Unknown".into(),
                    ..cond.clone()
                });
                self.transition_event(now, class, &from, &cond);
            }
            self.classes.insert(class.ctype.as_str(), cond);
        }
        self.render(now);
        self.observe_happenings(now, view);
        self.observed_once = true;
    }

    /// What the node should say, from the classes' states, in the chosen naming: one class
    /// per type as it is, or (the node monitoring agent's types) the classes mapped onto a
    /// type combined with its polarity. A type's `lastTransitionTime` moves only when its
    /// status does: never for a new reason or message, nor for a second problem while one
    /// already holds it.
    fn render(&mut self, now: OffsetDateTime) {
        for (t, members) in self.outputs() {
            let states: Vec<(&'static ConditionClass, &Condition)> = members
                .iter()
                .filter_map(|c| self.classes.get(c.ctype.as_str()).map(|s| (*c, s)))
                .collect();
            if states.is_empty() {
                continue;
            }
            let (status, reason, message) = match classes::nma_condition(t)
                .filter(|_| members.iter().any(|c| c.nma_for(self.s.naming).is_some()))
            {
                None => {
                    let s = states[0].1;
                    (s.status.clone(), s.reason.clone(), s.message.clone())
                }
                Some(nc) => combine(nc, &states),
            };
            let prev = self.desired.get(t);
            let last_transition = match prev {
                Some(p) if p.status == status => p.last_transition,
                _ => now,
            };
            let cond = Condition {
                ctype: t.to_string(),
                status,
                reason,
                message,
                last_transition,
                last_heartbeat: prev.and_then(|p| p.last_heartbeat),
            };
            self.desired.insert(t.to_string(), cond);
        }
    }

    /// The condition of a class with no problem: after the hold-down, False (or Unknown when
    /// none of its collectors runs); during it, unchanged.
    fn absent(
        &mut self,
        class: &'static ConditionClass,
        now: OffsetDateTime,
        view: &View<'_>,
    ) -> Option<(&'static str, String, String)> {
        let npd = self.s.naming == Naming::Npd;
        let down: Vec<String> = class
            .collectors
            .iter()
            .filter_map(|c| {
                if !view.running.contains(&c.as_str()) {
                    Some(format!(
                        "collector {c}: not run by this agent (--collector)"
                    ))
                } else {
                    view.down
                        .iter()
                        .find(|(d, _)| d == c)
                        .map(|(_, r)| format!("collector {c}: {r}"))
                }
            })
            .collect();
        if down.len() == class.collectors.len() {
            let why = down.join("; ");
            let prev_true = self
                .classes
                .get(class.ctype.as_str())
                .is_some_and(|p| p.status == "True");
            if prev_true {
                // A problem is not cleared because the collector that saw it stopped.
                return None;
            }
            return Some((
                "Unknown",
                "NodeDoctorCannotCheck".into(),
                bounded(
                    format!(
                        "node-doctor cannot check this: {}",
                        collectors::sanitize::visible(&why)
                    ),
                    MAX_MESSAGE_BYTES,
                ),
            ));
        }
        let healthy = || {
            Some((
                "False",
                class.healthy_reason(npd).to_string(),
                class.healthy_message.to_string(),
            ))
        };
        match self.classes.get(class.ctype.as_str()) {
            Some(p) if p.status == "True" => {
                let since = *self.absent_since.entry(class.ctype.as_str()).or_insert(now);
                if now - since >= time::Duration::try_from(self.s.clear_after).unwrap_or_default() {
                    healthy()
                } else {
                    None
                }
            }
            _ => healthy(),
        }
    }

    fn transition_event(
        &mut self,
        now: OffsetDateTime,
        class: &ConditionClass,
        from: &Condition,
        to: &Condition,
    ) {
        // Under the node monitoring agent's naming the type is named, with its polarity, and
        // the class that moved it.
        let nma = class.nma_for(self.s.naming);
        let (etype, what) = match (to.status.as_str(), nma) {
            ("True", None) => ("Warning", format!("{} is now True", to.ctype)),
            ("True", Some(m)) => (
                "Warning",
                format!("{} is now False ({})", m.ctype, class.ctype),
            ),
            ("False", None) if from.status == "True" => ("Normal", format!("{} cleared", to.ctype)),
            ("False", Some(m)) if from.status == "True" => {
                ("Normal", format!("{}: {} cleared", m.ctype, class.ctype))
            }
            _ => return,
        };
        let msg = bounded(
            format!("Node condition {what}: {}", to.message),
            MAX_MESSAGE_BYTES,
        );
        let key = format!("condition/{}/{}", class.ctype, to.reason);
        self.happen(now, key, to.reason.clone(), etype, msg, 1);
    }

    fn observe_happenings(&mut self, now: OffsetDateTime, view: &View<'_>) {
        let npd = self.s.naming == Naming::Npd;
        let first = !self.observed_once;
        let mut seen = Vec::new();
        for o in &view.findings {
            let f = o.finding;
            let Some(class) = classes::event_of(f) else {
                continue;
            };
            let key = (f.id.clone(), f.subject.clone());
            seen.push(key.clone());
            let count = classes::number(f, &class.count).unwrap_or(1.0).max(1.0);
            let at = class
                .age
                .as_deref()
                .and_then(|k| classes::number(f, k))
                .map(|age| o.last_seen - time::Duration::seconds_f64(age.max(0.0)));
            let prev = self.occurrences.get(&key).cloned();
            self.occurrences.insert(
                key.clone(),
                Occurrence {
                    count,
                    at,
                    seen: now,
                },
            );
            let new = match &prev {
                None => {
                    // At start, what happened before a previous instance last wrote was its
                    // to report (it was alive and saw it).
                    let reported_before = first
                        && match (self.previous_alive, at) {
                            (Some(alive), Some(at)) => at < alive,
                            (Some(_), None) => true,
                            _ => false,
                        };
                    (!reported_before).then_some(count as u64)
                }
                Some(p) => {
                    let later = match (p.at, at) {
                        (Some(a), Some(b)) => b - a > time::Duration::seconds(5),
                        _ => false,
                    };
                    if count > p.count {
                        Some((count - p.count) as u64)
                    } else if later {
                        Some(1)
                    } else {
                        None
                    }
                }
            };
            let Some(n) = new else { continue };
            let Some(reason) = class.reason_for(npd, f) else {
                continue;
            };
            // node-problem-detector's Event (under its name): Warning, as NPD writes every
            // temporary rule's, and the matched log line as its message where the rule keeps it.
            let etype = if f.severity >= Severity::Warning || class.is_npd_for(npd, f) {
                "Warning"
            } else {
                "Normal"
            };
            let msg = match class.npd_message_for(npd, f) {
                Some(line) => npd_message(&line),
                None => message(f, 0, &self.s.links),
            };
            let ekey = format!("finding/{reason}/{}/{}", f.id, f.subject);
            self.happen(now, ekey, reason.to_string(), etype, msg, n.max(1));
        }
        // Forget findings that resolved a while ago (bounded memory).
        let horizon = now - time::Duration::hours(2);
        self.occurrences
            .retain(|k, o| seen.contains(k) || o.seen > horizon);
    }

    fn happen(
        &mut self,
        now: OffsetDateTime,
        key: String,
        reason: String,
        etype: &'static str,
        message: String,
        n: u64,
    ) {
        let window = time::Duration::try_from(EVENT_AGGREGATE_WINDOW).unwrap_or_default();
        match self.events.get_mut(&key) {
            Some(e) if now - e.last < window => {
                e.count += n;
                e.last = now;
                e.message = message;
                e.etype = etype;
            }
            _ => {
                if self.events.len() >= EVENT_CACHE {
                    if let Some(oldest) = self
                        .events
                        .iter()
                        .filter(|(_, e)| e.sent == e.count)
                        .min_by_key(|(_, e)| e.last)
                        .map(|(k, _)| k.clone())
                    {
                        self.events.remove(&oldest);
                    } else {
                        self.events_dropped += n;
                        return;
                    }
                }
                self.events.insert(
                    key,
                    EventEntry {
                        name: None,
                        reason,
                        etype,
                        message,
                        count: n,
                        sent: 0,
                        first: now,
                        last: now,
                        collisions: 0,
                    },
                );
            }
        }
    }

    fn refill(&mut self, now: OffsetDateTime) {
        let at = *self.tokens_at.get_or_insert(now);
        let secs = (now - at).as_seconds_f64().max(0.0);
        self.tokens = (self.tokens + secs / EVENT_REFILL.as_secs_f64()).min(EVENT_BURST);
        self.tokens_at = Some(now);
    }

    /// When a status write is due: the body of a strategic merge patch of node-doctor's own
    /// conditions (and deletions of stale ones), else None.
    pub fn status_patch(&mut self, now: OffsetDateTime) -> Option<Value> {
        if !self.took_over() || !self.observed_once {
            return None;
        }
        let changed = self.desired.iter().any(|(t, d)| {
            self.written
                .get(t)
                .is_none_or(|w| w.status != d.status || w.reason != d.reason)
        }) || !self.stale.is_empty();
        let heartbeat_due = self.next_heartbeat.is_some_and(|h| now >= h);
        if !changed && !heartbeat_due {
            return None;
        }
        if changed && !heartbeat_due {
            if let Some(last) = self.last_write {
                let min = time::Duration::try_from(self.s.min_write_interval).unwrap_or_default();
                if now - last < min {
                    return None;
                }
            }
        }
        let ts = rfc3339(now);
        let mut conditions: Vec<Value> = self
            .own_types()
            .iter()
            .filter_map(|t| self.desired.get(*t))
            .map(|c| {
                json!({
                    "type": c.ctype,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastHeartbeatTime": ts,
                    "lastTransitionTime": rfc3339(c.last_transition),
                })
            })
            .collect();
        for t in &self.stale {
            conditions.push(json!({"type": t, "$patch": "delete"}));
        }
        Some(json!({"status": {"conditions": conditions}}))
    }

    /// The status patch was accepted.
    pub fn status_written(&mut self, now: OffsetDateTime) {
        for c in self.desired.values_mut() {
            c.last_heartbeat = Some(now);
        }
        self.written = self.desired.clone();
        self.stale.clear();
        self.last_write = Some(now);
        self.next_heartbeat = Some(self.heartbeat_after(now));
    }

    /// Conditions the node should carry (for tests and `/readyz`).
    pub fn desired(&self) -> impl Iterator<Item = &Condition> {
        self.desired.values()
    }

    /// The next event write the token bucket allows, if any is pending.
    pub fn next_event(&mut self, now: OffsetDateTime) -> Option<EventWrite> {
        if !self.took_over() {
            return None;
        }
        self.refill(now);
        if self.tokens < 1.0 {
            return None;
        }
        let key = self
            .events
            .iter()
            .filter(|(_, e)| e.count > e.sent)
            .min_by_key(|(_, e)| e.last)
            .map(|(k, _)| k.clone())?;
        self.seq += 1;
        let seq = self.seq;
        let e = self.events.get(&key)?;
        let involved = json!({
            "kind": "Node",
            "apiVersion": "v1",
            "name": self.s.node,
            "uid": self.uid.clone().unwrap_or_default(),
        });
        let w = match &e.name {
            Some(name) => EventWrite::Patch {
                key: key.clone(),
                name: name.clone(),
                body: json!({
                    "count": e.count,
                    "lastTimestamp": rfc3339(e.last),
                    "message": e.message,
                }),
            },
            None => {
                // client-go's form, `<object>.<hex nanoseconds>`, plus a sequence number
                // and the collisions met: events created in the same tick get distinct names.
                let stamp = e.first.unix_timestamp_nanos() as u64;
                let mut node = self.s.node.clone();
                node.truncate(200);
                let name = format!("{node}.{stamp:x}{seq:x}{:x}", e.collisions);
                let mut instance = self.s.node.clone();
                instance.truncate(128);
                EventWrite::Create {
                    key: key.clone(),
                    body: json!({
                        "apiVersion": "v1",
                        "kind": "Event",
                        "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
                        "involvedObject": involved,
                        "reason": e.reason,
                        "message": e.message,
                        "type": e.etype,
                        "count": e.count,
                        "firstTimestamp": rfc3339(e.first),
                        "lastTimestamp": rfc3339(e.last),
                        "source": {"component": COMPONENT, "host": self.s.node},
                        "reportingComponent": COMPONENT,
                        "reportingInstance": instance,
                    }),
                }
            }
        };
        self.tokens -= 1.0;
        Some(w)
    }

    /// The answer to an event write: Ok with the object's name, or the HTTP status of the
    /// failure (404: the event expired, create a new one; 409: the name is taken, pick
    /// another; anything else: keep it pending).
    pub fn event_written(&mut self, w: &EventWrite, result: Result<String, u16>) {
        let key = match w {
            EventWrite::Create { key, .. } | EventWrite::Patch { key, .. } => key,
        };
        let sent_count = match w {
            EventWrite::Create { body, .. } | EventWrite::Patch { body, .. } => {
                body.get("count").and_then(Value::as_u64).unwrap_or(0)
            }
        };
        let Some(e) = self.events.get_mut(key) else {
            return;
        };
        match result {
            Ok(name) => {
                e.name = Some(name);
                e.sent = e.sent.max(sent_count);
            }
            Err(404) => {
                e.name = None;
                e.sent = 0;
            }
            Err(409) => {
                // The name is taken: another name next time, and the token comes back.
                e.collisions += 1;
                self.tokens = (self.tokens + 1.0).min(EVENT_BURST);
            }
            Err(422) | Err(400) => {
                // The server will never take it: drop it rather than retry forever.
                self.events_dropped += e.count.saturating_sub(e.sent);
                e.sent = e.count;
            }
            Err(_) => {
                // Not spent: the token comes back, the driver backs off.
                self.tokens = (self.tokens + 1.0).min(EVENT_BURST);
            }
        }
    }

    /// Events waiting for a token or a retry.
    pub fn events_pending(&self) -> usize {
        self.events.values().filter(|e| e.count > e.sent).count()
    }
}

/// One node monitoring agent type from the states of the classes mapped onto it: False while
/// any has a problem (the reason of the longest-standing one, so it stays put while a second
/// problem comes and goes; every problem's message), else Unknown while one cannot be
/// checked (a type whose part nobody checks is not called healthy), else True.
fn combine(
    nc: &collectors::rules::NmaCondition,
    states: &[(&'static ConditionClass, &Condition)],
) -> (String, String, String) {
    let mut bad: Vec<&(&ConditionClass, &Condition)> =
        states.iter().filter(|(_, s)| s.status == "True").collect();
    bad.sort_by_key(|(_, s)| s.last_transition);
    if let Some((class, _)) = bad.first() {
        let reason = class
            .nma
            .as_ref()
            .map_or_else(|| class.ctype.clone(), |m| m.reason.clone());
        let message = bad
            .iter()
            .map(|(_, s)| s.message.as_str())
            .collect::<Vec<_>>()
            .join(" | ");
        return ("False".into(), reason, bounded(message, MAX_MESSAGE_BYTES));
    }
    if let Some((_, s)) = states.iter().find(|(_, s)| s.status == "Unknown") {
        return ("Unknown".into(), s.reason.clone(), s.message.clone());
    }
    (
        "True".into(),
        nc.healthy_reason.clone(),
        nc.healthy_message.clone(),
    )
}

/// Condition type -> the field managers that own it on the node, from its `managedFields`
/// (`f:status` / `f:conditions` / `k:{"type":"…"}`); None when the node carries none (then
/// nothing but node-doctor's own prefix is removed).
pub fn managers_of_conditions(node: &Value) -> Option<BTreeMap<String, Vec<String>>> {
    let entries = node.pointer("/metadata/managedFields")?.as_array()?;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in entries {
        let Some(manager) = e.get("manager").and_then(Value::as_str) else {
            continue;
        };
        let Some(conds) = e
            .pointer("/fieldsV1/f:status/f:conditions")
            .and_then(Value::as_object)
        else {
            continue;
        };
        for key in conds.keys() {
            let Some(json) = key.strip_prefix("k:") else {
                continue;
            };
            let Ok(k) = serde_json::from_str::<Value>(json) else {
                continue;
            };
            if let Some(t) = k.get("type").and_then(Value::as_str) {
                let list = out.entry(t.to_string()).or_default();
                if !list.iter().any(|m| m == manager) {
                    list.push(manager.to_string());
                }
            }
        }
    }
    Some(out)
}

/// A condition this build does not write that node-doctor left behind: one of its
/// `NodeDoctor…` types (unless the node says another manager alone owns it), or a name one of
/// its classes has under another naming (node-problem-detector's, the node monitoring
/// agent's) that node-doctor alone owns on the node. A type another manager owns, or one
/// whose owner the node does not say, is never removed: it may be NPD's or the NMA's own.
fn is_left_behind(ctype: &str, owners: Option<&BTreeMap<String, Vec<String>>>) -> bool {
    let owned = owners.and_then(|o| o.get(ctype));
    let ours_alone = owned.is_some_and(|m| !m.is_empty() && m.iter().all(|m| m == MANAGER));
    if ctype.starts_with(OWN_PREFIX) {
        return owned.is_none_or(|m| m.is_empty() || m.iter().any(|m| m == MANAGER));
    }
    let a_name_of_ours = classes::conditions()
        .iter()
        .any(|c| c.all_types().any(|t| t == ctype));
    a_name_of_ours && ours_alone
}
