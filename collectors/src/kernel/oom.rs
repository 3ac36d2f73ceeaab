//! OOM-killer lines of the kernel log in the wordings of 3.10 to 6.x, and the small state
//! machine that joins the lines of one kill into one [`OomKill`], whatever the kernel
//! suppressed, split or let other messages interleave with.
//!
//! ```text
//! # 3.10 .. 4.18: the report (rate-limited), then the decision and the victim (maybe a child)
//! java invoked oom-killer: gfp_mask=0x201da, order=0, oom_score_adj=0
//! Task in /kubepods/burstable/pod<uid>/<cid> killed as a result of limit of /kubepods/burstable/pod<uid>
//! memory: usage 16384kB, limit 16384kB, failcnt 97
//! Memory cgroup out of memory: Kill process 1234 (java) score 1000 or sacrifice child
//! Out of memory: Kill process 1234 (java) score 900 or sacrifice child
//! Killed process 1234 (java) total-vm:4318240kB, anon-rss:2061848kB, file-rss:0kB[, shmem-rss:0kB]
//! # 4.19, 4.20: the `Task in` line becomes the one-line summary; the decision stays
//! oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/x,task_memcg=/x,task=java,pid=1234,uid=0
//! # 5.0+: no decision line; the kill line names the OOM's kind (5.3+ adds UID, pgtables, oom_score_adj)
//! Memory cgroup out of memory: Killed process 19701 (python3) total-vm:118968kB, anon-rss:16104kB, ...
//! Out of memory: Killed process 812 (mysqld) total-vm:..., UID:27 pgtables:5328kB oom_score_adj:0
//! # 4.19+ with memory.oom.group (cgroup v2; the kubelet sets it from 1.28): the whole cgroup goes
//! Tasks in /kubepods.slice/.../cri-containerd-<cid>.scope are going to be killed due to memory.oom.group set
//! Memory cgroup out of memory: Killed process 19701 (python3) ...     (the victim, printed again)
//! Memory cgroup out of memory: Killed process 19702 (sh) ...          (4.19/4.20: `Killed process ...`)
//! # all: more than 10 reports in 5 s and the kernel prints only the kill lines, then later
//! oom_kill_process: 15 callbacks suppressed
//! ```
//!
//! How the lines of one kill are found (reports are serialised by the kernel's `oom_lock`, so
//! two reports never interleave with each other; other messages do):
//! - A report starts at `invoked oom-killer`; `memory: usage`, `Task in` and the summary that
//!   follow belong to it. The summary names the victim's pid: a kill line of another pid does
//!   not take it. A report older than [`REPORT_MAX_AGE_USEC`] is stale.
//! - A summary cut by another CPU's message (`pr_cont()` pieces stored as records of their
//!   own, flag `c`) is joined again from the records that continue it, skipping interleaved
//!   ones, for at most [`FRAGMENT_BUDGET`] records.
//! - After `Tasks in X are going to be killed due to memory.oom.group set`, kill lines of the
//!   next [`GROUP_WINDOW_USEC`] are the same kill's other processes ([`OomEvent::Member`]), the
//!   victim's own second line included; they are not new kills.
//! - A kill the kernel printed without its report (rate-limited: the `callbacks suppressed`
//!   case) is tied to the cgroup of the logged kills of the same task name and kind within
//!   [`BURST_WINDOW_USEC`] before it, when they all name one cgroup ([`Report::SameTaskRecently`]);
//!   otherwise the log does not say where it ran ([`Report::Missing`]).

use std::collections::VecDeque;

use crate::kmsg::Record;
use crate::needle::Needle;
use crate::proc::cgroup::pod_from_path;

/// Whether the whole node or one memory cgroup ran out of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OomKind {
    /// The node itself ran out of memory (`Out of memory: ...`, `CONSTRAINT_NONE`).
    System,
    /// A memory cgroup hit its limit (`Memory cgroup out of memory: ...`, `CONSTRAINT_MEMCG`).
    Cgroup,
}

impl OomKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OomKind::System => "oom_system",
            OomKind::Cgroup => "oom_cgroup",
        }
    }
}

/// One OOM-related kernel log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OomLine {
    /// `<comm> invoked oom-killer: gfp_mask=...`: a report begins.
    Header,
    /// `[Memory cgroup ]out of memory: Kill[ed] process N (comm)`. `decided` is true for the
    /// old `Kill process ... or sacrifice child` form, whose victim follows on its own line.
    Kill {
        kind: OomKind,
        pid: u32,
        comm: String,
        decided: bool,
    },
    /// Bare `Killed process N (comm) ...` (the victim line of kernels before 5.0).
    Victim { pid: u32, comm: String },
    /// The 4.19+ `oom-kill:` summary; `complete` is false when the record ends before
    /// `,task=...,pid=...,uid=...` (the rest follows in records of its own).
    Summary {
        kind: OomKind,
        oom_memcg: Option<String>,
        task_memcg: Option<String>,
        task: Option<String>,
        pid: Option<u32>,
        complete: bool,
    },
    /// Old kernels' `Task in <task_memcg> killed as a result of limit of <oom_memcg>`.
    TaskIn {
        task_memcg: String,
        oom_memcg: String,
    },
    /// `memory: usage NkB, limit NkB, failcnt N` (the memcg's usage at the kill).
    Usage { usage_kb: u64, limit_kb: u64 },
    /// `Tasks in <memcg> are going to be killed due to memory.oom.group set` (4.19+).
    GroupKill { memcg: String },
    /// Cgroup v1's `Memory cgroup stats for <memcg>: cache:…` (3.10 .. 5.x), printed for the
    /// limited cgroup and then each cgroup under it: the first names the cgroup that hit its
    /// limit when the excerpt of the report lacks `Task in` and the summary.
    Stats { memcg: String },
}

/// Matches one kernel log message; `None` when it is no OOM line we use.
pub fn parse(message: &str) -> Option<OomLine> {
    let m = message.trim();
    if let Some(rest) = m.strip_prefix("oom-kill:") {
        return Some(summary(rest));
    }
    static INVOKED: Needle = Needle::new(" invoked oom-killer: ");
    if INVOKED.is_in(m) {
        return Some(OomLine::Header);
    }
    if let Some(rest) = m.strip_prefix("Task in ") {
        let (task, oom) = rest.split_once(" killed as a result of limit of ")?;
        return Some(OomLine::TaskIn {
            task_memcg: task.trim().to_string(),
            oom_memcg: oom.trim().to_string(),
        });
    }
    if let Some(rest) = m.strip_prefix("Tasks in ") {
        let memcg = rest.strip_suffix(" are going to be killed due to memory.oom.group set")?;
        return Some(OomLine::GroupKill {
            memcg: memcg.trim().to_string(),
        });
    }
    if let Some(rest) = m.strip_prefix("Memory cgroup stats for ") {
        let (memcg, _) = rest.split_once(':')?;
        let memcg = memcg.trim();
        return memcg.starts_with('/').then(|| OomLine::Stats {
            memcg: memcg.to_string(),
        });
    }
    if let Some(rest) = m.strip_prefix("memory: usage ") {
        let (usage, rest) = rest.split_once("kB, limit ")?;
        let (limit, _) = rest.split_once("kB")?;
        return Some(OomLine::Usage {
            usage_kb: usage.trim().parse().ok()?,
            limit_kb: limit.trim().parse().ok()?,
        });
    }
    if let Some(rest) = m.strip_prefix("Killed process ") {
        let (pid, comm) = pid_comm(rest)?;
        return Some(OomLine::Victim { pid, comm });
    }
    let (kind, rest) = if let Some(r) = m.strip_prefix("Memory cgroup out of memory") {
        (OomKind::Cgroup, r)
    } else if let Some(r) = m.strip_prefix("Out of memory") {
        // Also `Out of memory (oom_kill_allocating_task): Killed process ...`.
        (OomKind::System, r)
    } else {
        return None;
    };
    let (_, after) = rest.split_once(": ")?;
    let (decided, after) = if let Some(a) = after.strip_prefix("Killed process ") {
        (false, a)
    } else if let Some(a) = after.strip_prefix("Kill process ") {
        (true, a)
    } else {
        return None;
    };
    let (pid, comm) = pid_comm(after)?;
    Some(OomLine::Kill {
        kind,
        pid,
        comm,
        decided,
    })
}

/// `1234 (java) ...` -> (1234, "java"). The comm may contain spaces and parentheses; it ends
/// at the last `)` before ` total-vm`/` score` or the end.
fn pid_comm(s: &str) -> Option<(u32, String)> {
    let (pid, rest) = s.split_once(' ')?;
    let pid: u32 = pid.trim().parse().ok()?;
    let rest = rest.strip_prefix('(')?;
    let end = [") total-vm", ") score", "), "]
        .iter()
        .filter_map(|t| rest.find(t))
        .min()
        .or_else(|| rest.rfind(')'))?;
    Some((pid, rest[..end].to_string()))
}

fn summary(rest: &str) -> OomLine {
    let mut kind = OomKind::System;
    let (mut oom_memcg, mut task_memcg, mut task, mut pid, mut uid) =
        (None, None, None, None, None);
    // Values never contain ',' except `nodemask=`/`mems_allowed=` lists, which we do not use.
    for field in rest.split(',') {
        let (k, v) = field.split_once('=').unwrap_or((field, ""));
        match k.trim() {
            "constraint" if v == "CONSTRAINT_MEMCG" => kind = OomKind::Cgroup,
            "oom_memcg" => oom_memcg = Some(v.to_string()),
            "task_memcg" => task_memcg = Some(v.to_string()),
            "task" => task = Some(v.to_string()),
            "pid" => pid = v.parse().ok(),
            "uid" => uid = v.trim().parse::<u32>().ok(),
            _ => {}
        }
    }
    OomLine::Summary {
        kind,
        oom_memcg,
        task_memcg,
        task,
        pid,
        complete: pid.is_some() && uid.is_some(),
    }
}

/// How a kill was tied to its memory cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Report {
    /// The kernel's report of this kill names the cgroup (summary or `Task in`), or the kill
    /// is a system OOM whose report names no cgroup (cgroup v1 without `task_memcg`).
    Logged,
    /// The kernel suppressed the report (rate limit): the cgroup is the one every logged kill
    /// of the same task name and kind named within the burst before it.
    SameTaskRecently,
    /// No report, and nothing ties the kill to a cgroup.
    Missing,
}

/// One process killed by the OOM killer, with what the log said about its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomKill {
    pub kind: OomKind,
    pub pid: u32,
    pub comm: String,
    /// The victim's memory cgroup (`/kubepods/burstable/pod<uid>/<cid>`), when printed.
    pub task_memcg: Option<String>,
    /// The cgroup whose limit was hit (cgroup OOM), when printed.
    pub oom_memcg: Option<String>,
    /// The limit and usage of that cgroup (`memory: usage ..., limit ...`), in bytes.
    pub limit_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    /// Kernel log time of the kill (µs since boot).
    pub usec: u64,
    pub report: Report,
}

/// What the assembler makes of the lines it is fed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OomEvent {
    /// A kill: one decision of the OOM killer.
    Kill(OomKill),
    /// Another process the same decision killed (memory.oom.group), after its [`Self::Kill`].
    Member { pid: u32, comm: String },
}

/// A report older than this (µs) when a kill line comes is not that kill's.
pub const REPORT_MAX_AGE_USEC: u64 = 10_000_000;
/// Records an incomplete `oom-kill:` summary waits for its remaining pieces.
pub const FRAGMENT_BUDGET: u8 = 16;
/// Kill lines this soon (µs) after `Tasks in ... memory.oom.group set` are that kill's members.
pub const GROUP_WINDOW_USEC: u64 = 2_000_000;
/// An unreported kill is tied to logged kills of the same task at most this much (µs) older:
/// twice the kernel's rate-limit interval (`DEFAULT_RATELIMIT_INTERVAL`, 5 s), within which a
/// suppressed kill always follows a printed report.
pub const BURST_WINDOW_USEC: u64 = 10_000_000;
/// Logged kills remembered for that.
const RECENT_CAP: usize = 32;
/// Pids of one memory.oom.group kill remembered to tell a re-printed line from a new member.
const GROUP_PIDS_CAP: usize = 64;
/// The longest summary text assembled from pieces.
const MAX_SUMMARY_BYTES: usize = 4096;

/// The report being printed: what the lines before the kill line said.
#[derive(Debug, Default, Clone)]
struct Context {
    usec: u64,
    /// The victim named by the summary.
    pid: Option<u32>,
    task_memcg: Option<String>,
    oom_memcg: Option<String>,
    usage: Option<(u64, u64)>,
    /// A summary or `Task in` line was seen: the report names the cgroup (or, for a system
    /// OOM, says it names none).
    names_cgroup: bool,
}

/// A memory.oom.group kill in progress.
#[derive(Debug, Clone)]
struct Group {
    usec: u64,
    pids: Vec<u32>,
}

/// A logged kill, for tying unreported kills of the same task to its cgroup.
#[derive(Debug, Clone)]
struct Logged {
    kind: OomKind,
    comm: String,
    usec: u64,
    task_memcg: Option<String>,
    oom_memcg: Option<String>,
    limit_bytes: Option<u64>,
}

/// Joins the lines of each kill (see the module documentation). Its state is bounded: one
/// report, one summary being joined, one pending decision, one group, [`RECENT_CAP`] logged
/// kills.
#[derive(Debug, Default, Clone)]
pub struct Assembler {
    report: Option<Context>,
    /// An incomplete summary: its text so far and how many more records it waits.
    pending_summary: Option<(String, u8)>,
    /// An old-format decision waiting for its `Killed process` victim line.
    decided: Option<OomKill>,
    /// The last kill, returned at the next OOM line or [`Self::flush`].
    held: Option<OomKill>,
    group: Option<Group>,
    recent: VecDeque<Logged>,
    /// The pid of the last kill returned.
    last: Option<u32>,
}

impl Assembler {
    /// Feeds one record; returns the events it completes. A kill is returned when the next
    /// OOM line comes (or at [`Self::flush`]): until then a memory.oom.group line may add to it.
    pub fn feed(&mut self, record: &Record) -> Vec<OomEvent> {
        let mut out = Vec::new();
        let message = record.message.as_str();
        if self.continue_summary(record) {
            return out;
        }
        let Some(line) = parse(message) else {
            return out;
        };
        let usec = record.usec;
        if !matches!(line, OomLine::GroupKill { .. } | OomLine::Victim { .. }) {
            // Any other OOM line ends what the last kill's lines could still add to it (a
            // victim line completes the decision before it, a group line adds to the kill).
            self.settle(&mut out);
        }
        match line {
            OomLine::Header => {
                self.group = None;
                self.report = Some(Context {
                    usec,
                    ..Context::default()
                });
            }
            OomLine::Summary { complete, .. } if !complete => {
                self.pending_summary = Some((message.trim_end().to_string(), FRAGMENT_BUDGET));
            }
            OomLine::Summary {
                oom_memcg,
                task_memcg,
                pid,
                ..
            } => {
                let ctx = self.context(usec);
                ctx.pid = pid;
                ctx.task_memcg = task_memcg;
                ctx.oom_memcg = oom_memcg.filter(|m| !m.is_empty());
                ctx.names_cgroup = true;
            }
            OomLine::TaskIn {
                task_memcg,
                oom_memcg,
            } => {
                let ctx = self.context(usec);
                ctx.task_memcg = Some(task_memcg);
                ctx.oom_memcg = Some(oom_memcg);
                ctx.names_cgroup = true;
            }
            OomLine::Usage { usage_kb, limit_kb } => {
                self.context(usec).usage = Some((usage_kb, limit_kb));
            }
            OomLine::Stats { memcg } => {
                // Only the first (the limited cgroup) and only when nothing named one yet.
                let ctx = self.context(usec);
                if !ctx.names_cgroup {
                    ctx.oom_memcg = Some(memcg.clone());
                    ctx.task_memcg = Some(memcg);
                    ctx.names_cgroup = true;
                }
            }
            OomLine::GroupKill { memcg } => self.group_kill(memcg, usec, &mut out),
            OomLine::Kill {
                kind,
                pid,
                comm,
                decided,
            } => {
                if let Some(member) = self.member(pid, &comm, usec) {
                    out.extend(member);
                    return out;
                }
                self.group = None;
                let kill = self.complete(kind, pid, comm, usec);
                if decided {
                    self.decided = Some(kill);
                } else {
                    self.hold(kill, &mut out);
                }
            }
            OomLine::Victim { pid, comm } => {
                if let Some(mut kill) = self.decided.take() {
                    // The victim may be a child of the chosen task: it is the one killed.
                    kill.pid = pid;
                    kill.comm = comm;
                    kill.usec = usec;
                    self.hold(kill, &mut out);
                } else if let Some(member) = self.member(pid, &comm, usec) {
                    out.extend(member);
                }
            }
        }
        out
    }

    /// A summary waiting for its rest: `true` when `record` was taken for it (its rest, or
    /// another message while the rest may still follow).
    fn continue_summary(&mut self, record: &Record) -> bool {
        let Some((mut text, budget)) = self.pending_summary.take() else {
            return false;
        };
        let message = record.message.as_str();
        if continues_summary(&text, record) {
            if text.len() + message.len() <= MAX_SUMMARY_BYTES {
                text.push_str(message.trim_end());
            }
            self.summary_text(text, record.usec);
            return true;
        }
        // Another message came in between: the summary's rest may still follow.
        if budget > 1 && parse(message).is_none() {
            self.pending_summary = Some((text, budget - 1));
            return true;
        }
        self.finish_summary(&text, record.usec);
        false
    }

    /// A memory.oom.group line: the victim's kill (just printed, or a decision still without
    /// its victim line) is the first of the group; the group line names its cgroup when the
    /// rest of the report did not.
    fn group_kill(&mut self, memcg: String, usec: u64, out: &mut Vec<OomEvent>) {
        if let Some(d) = self.decided.take() {
            self.hold(d, out);
        }
        let mut pids = Vec::new();
        if let Some(h) = self.held.as_mut() {
            pids.push(h.pid);
            let named = |m: Option<&str>| m.and_then(pod_from_path).is_some();
            if !named(h.task_memcg.as_deref()) && named(Some(&memcg)) {
                h.task_memcg = Some(memcg);
                h.report = Report::Logged;
            }
        } else if let Some(pid) = self.last {
            pids.push(pid);
        }
        out.extend(self.release());
        self.group = Some(Group { usec, pids });
    }

    /// Returns what is still pending at the end of the input: a decision without its victim
    /// line, and the last kill (which a following memory.oom.group line could have named).
    pub fn flush(&mut self) -> Vec<OomKill> {
        let mut out = Vec::new();
        self.settle(&mut out);
        out.into_iter()
            .filter_map(|e| match e {
                OomEvent::Kill(k) => Some(k),
                OomEvent::Member { .. } => None,
            })
            .collect()
    }

    /// Returns the pending decision (as a kill) and the held kill.
    fn settle(&mut self, out: &mut Vec<OomEvent>) {
        if let Some(d) = self.decided.take() {
            self.hold(d, out);
        }
        out.extend(self.release());
    }

    /// Holds a kill until the next OOM line: a memory.oom.group line right after it belongs to
    /// it. Returns the kill held before.
    fn hold(&mut self, kill: OomKill, out: &mut Vec<OomEvent>) {
        out.extend(self.release());
        self.last = Some(kill.pid);
        self.held = Some(kill);
    }

    /// Returns the held kill, noting a logged one for the unreported kills of its task.
    fn release(&mut self) -> Option<OomEvent> {
        let kill = self.held.take()?;
        if kill.report == Report::Logged {
            if self.recent.len() == RECENT_CAP {
                self.recent.pop_front();
            }
            self.recent.push_back(Logged {
                kind: kill.kind,
                comm: kill.comm.clone(),
                usec: kill.usec,
                task_memcg: kill.task_memcg.clone(),
                oom_memcg: kill.oom_memcg.clone(),
                limit_bytes: kill.limit_bytes,
            });
        }
        Some(OomEvent::Kill(kill))
    }

    /// A kill line within a memory.oom.group kill: `Some(events)` (empty for the victim's own
    /// second line), `None` when no group is in progress.
    fn member(&mut self, pid: u32, comm: &str, usec: u64) -> Option<Vec<OomEvent>> {
        let g = self.group.as_mut()?;
        if usec.saturating_sub(g.usec) > GROUP_WINDOW_USEC {
            self.group = None;
            return None;
        }
        if g.pids.contains(&pid) {
            return Some(Vec::new());
        }
        if g.pids.len() < GROUP_PIDS_CAP {
            g.pids.push(pid);
        }
        Some(vec![OomEvent::Member {
            pid,
            comm: comm.to_string(),
        }])
    }

    /// The report in progress (a fresh one when there is none or it is stale).
    fn context(&mut self, usec: u64) -> &mut Context {
        let stale = self
            .report
            .as_ref()
            .is_none_or(|c| usec.saturating_sub(c.usec) > REPORT_MAX_AGE_USEC);
        if stale {
            self.report = Some(Context {
                usec,
                ..Context::default()
            });
        }
        self.report.get_or_insert_with(Context::default)
    }

    /// A summary whose pieces are joined (or whose wait ended): parse and keep what it says.
    fn summary_text(&mut self, text: String, usec: u64) {
        match parse(&text) {
            Some(OomLine::Summary { complete, .. }) if !complete => {
                self.pending_summary = Some((text, FRAGMENT_BUDGET));
            }
            _ => self.finish_summary(&text, usec),
        }
    }

    fn finish_summary(&mut self, text: &str, usec: u64) {
        if let Some(OomLine::Summary {
            oom_memcg,
            task_memcg,
            pid,
            ..
        }) = parse(text)
        {
            let ctx = self.context(usec);
            ctx.pid = pid;
            ctx.task_memcg = task_memcg;
            ctx.oom_memcg = oom_memcg.filter(|m| !m.is_empty());
            ctx.names_cgroup = true;
        }
    }

    /// A kill from the report in progress, or, without one, from the logged kills of the same
    /// task in the burst before it.
    fn complete(&mut self, kind: OomKind, pid: u32, comm: String, usec: u64) -> OomKill {
        let mut kill = OomKill {
            kind,
            pid,
            comm,
            task_memcg: None,
            oom_memcg: None,
            limit_bytes: None,
            usage_bytes: None,
            usec,
            report: Report::Missing,
        };
        let ctx = self
            .report
            .take()
            .filter(|c| usec.saturating_sub(c.usec) <= REPORT_MAX_AGE_USEC)
            // The summary names the victim: a report of another pid is not this kill's.
            .filter(|c| c.pid.is_none_or(|p| p == pid));
        if let Some(ctx) = ctx {
            kill.task_memcg = ctx.task_memcg;
            kill.oom_memcg = ctx.oom_memcg;
            if let Some((usage, limit)) = ctx.usage {
                if kind == OomKind::Cgroup {
                    kill.usage_bytes = Some(usage.saturating_mul(1024));
                    kill.limit_bytes = Some(limit.saturating_mul(1024));
                }
            }
            // A system OOM's report names the cgroup only when it has one (task_memcg,
            // 4.19+); an old kernel's header and meminfo are report enough.
            if ctx.names_cgroup || kind == OomKind::System {
                kill.report = Report::Logged;
                return kill;
            }
        }
        self.tie_to_same_task(&mut kill);
        kill
    }

    /// Ties an unreported kill to the one cgroup the logged kills of its task name and kind
    /// named within [`BURST_WINDOW_USEC`] before it.
    fn tie_to_same_task(&self, kill: &mut OomKill) {
        let mut same = self.recent.iter().rev().filter(|l| {
            l.kind == kill.kind
                && l.comm == kill.comm
                && kill.usec.saturating_sub(l.usec) <= BURST_WINDOW_USEC
        });
        let Some(first) = same.next() else {
            return;
        };
        if first.task_memcg.is_none() && first.oom_memcg.is_none() {
            return;
        }
        if same.all(|l| l.task_memcg == first.task_memcg && l.oom_memcg == first.oom_memcg) {
            kill.task_memcg = first.task_memcg.clone();
            kill.oom_memcg = first.oom_memcg.clone();
            kill.limit_bytes = first.limit_bytes;
            kill.report = Report::SameTaskRecently;
        }
    }
}

/// True when `record` carries the next piece of the incomplete summary `text`: a piece the
/// kernel flagged as a fragment or that starts with a summary field (`,cpuset=`, `,oom_memcg=`,
/// `,task_memcg=`, `,global_oom`, `,task=`, `,pid=`, `,uid=`, `,mems_allowed=`), or, after a
/// `field=`, the value itself (a cgroup path or name: no spaces).
fn continues_summary(text: &str, record: &Record) -> bool {
    const FIELDS: &[&str] = &[
        ",cpuset=",
        ",mems_allowed=",
        ",oom_memcg=",
        ",task_memcg=",
        ",global_oom",
        ",task=",
        ",pid=",
        ",uid=",
    ];
    let m = record.message.trim_end();
    if m.is_empty() || m.len() > MAX_SUMMARY_BYTES {
        return false;
    }
    if FIELDS.iter().any(|f| m.starts_with(f)) {
        return true;
    }
    text.ends_with('=') && !m.contains(' ') && (record.fragment || !m.contains(':'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmsg::parse_record;
    use proptest::strategy::Strategy as _;

    /// Feeds kmsg records (`prio,seq,usec,flags;message` lines), then flushes as the collector
    /// does at the end of what the kernel holds, and collects the events.
    fn run(a: &mut Assembler, lines: &str) -> Vec<OomEvent> {
        let mut out = Vec::new();
        for l in lines.lines().filter(|l| !l.trim().is_empty()) {
            out.extend(a.feed(&parse_record(l.trim_start()).unwrap()));
        }
        out.extend(a.flush().into_iter().map(OomEvent::Kill));
        out
    }

    fn kills(events: &[OomEvent]) -> Vec<&OomKill> {
        events
            .iter()
            .filter_map(|e| match e {
                OomEvent::Kill(k) => Some(k),
                OomEvent::Member { .. } => None,
            })
            .collect()
    }

    fn members(events: &[OomEvent]) -> Vec<u32> {
        events
            .iter()
            .filter_map(|e| match e {
                OomEvent::Member { pid, .. } => Some(*pid),
                OomEvent::Kill(_) => None,
            })
            .collect()
    }

    fn rec(line: &str) -> Record {
        parse_record(line).unwrap()
    }

    // Kernel 6.18.44 (this VM), a cgroup v1 group with a 16 MiB limit.
    const K618_SUMMARY: &str = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/ndtest,task_memcg=/ndtest,task=python3,pid=19701,uid=0";
    const K618_KILL: &str = "Memory cgroup out of memory: Killed process 19701 (python3) total-vm:118968kB, anon-rss:16104kB, file-rss:6500kB, shmem-rss:0kB, UID:0 pgtables:88kB oom_score_adj:0";
    const K618_USAGE: &str = "memory: usage 16384kB, limit 16384kB, failcnt 97";

    /// kubernetes/kubernetes#56891 (3.10.0-327.4.5.el7): a report quoted from its
    /// `Memory cgroup stats for` line, without `Task in`: the first stats line names the cgroup.
    #[test]
    fn cgroup_v1_stats_line_names_the_cgroup_when_task_in_is_missing() {
        let mut a = Assembler::default();
        let ev = run(
            &mut a,
            "6,1,1000000,-;Memory cgroup stats for /kubepods/pod95387fa4-da9c-11e7-9d36-5254b24cbf5e/6895a3e1: cache:32KB rss:524188KB
             6,2,1000100,-;Memory cgroup stats for /kubepods/pod95387fa4-da9c-11e7-9d36-5254b24cbf5e/other: cache:0KB rss:0KB
             3,3,1500000,-;Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child
             3,4,1500100,-;Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, file-rss:13684kB",
        );
        let k = kills(&ev);
        assert_eq!(k.len(), 1, "{ev:?}");
        assert_eq!(
            k[0].oom_memcg.as_deref(),
            Some("/kubepods/pod95387fa4-da9c-11e7-9d36-5254b24cbf5e/6895a3e1")
        );
        assert_eq!(parse("Memory cgroup stats for relative: cache:0KB"), None);
    }

    #[test]
    fn new_format_cgroup_oom() {
        assert_eq!(
            parse(K618_KILL),
            Some(OomLine::Kill {
                kind: OomKind::Cgroup,
                pid: 19701,
                comm: "python3".into(),
                decided: false
            })
        );
        assert_eq!(
            parse(K618_USAGE),
            Some(OomLine::Usage {
                usage_kb: 16384,
                limit_kb: 16384
            })
        );
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            &format!(
                "4,1,1,-;python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n\
                 6,2,2,-;{K618_USAGE}\n6,3,3,-;{K618_SUMMARY}\n3,4,4,-;{K618_KILL}\n\
                 6,5,5,-;oom_reaper: reaped process 19701 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"
            ),
        );
        assert_eq!(
            e,
            vec![OomEvent::Kill(OomKill {
                kind: OomKind::Cgroup,
                pid: 19701,
                comm: "python3".into(),
                task_memcg: Some("/ndtest".into()),
                oom_memcg: Some("/ndtest".into()),
                limit_bytes: Some(16 << 20),
                usage_bytes: Some(16 << 20),
                usec: 4,
                report: Report::Logged,
            })]
        );
    }

    #[test]
    fn new_format_system_oom_names_pod_victim() {
        // Kernel 5.10 (Ubuntu 20.04 HWE): a global OOM whose victim runs in a pod.
        let mut a = Assembler::default();
        let e = run(&mut a, "6,1,10,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=cri-containerd-4d3c.scope,mems_allowed=0,global_oom,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e_2d3f.slice/cri-containerd-4d3c.scope,task=java,pid=4242,uid=1000\n\
            3,2,11,-;Out of memory: Killed process 4242 (java) total-vm:8123456kB, anon-rss:6012345kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:12345kB oom_score_adj:969");
        let k = kills(&e);
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].kind, OomKind::System);
        assert_eq!(k[0].oom_memcg, None);
        assert!(k[0].task_memcg.as_deref().unwrap().contains("pod7c1e_2d3f"));
        assert_eq!(k[0].limit_bytes, None);
        assert_eq!(k[0].report, Report::Logged);
    }

    #[test]
    fn old_format_decision_then_child_victim() {
        // Kernel 3.10.0-957 (CentOS 7), the handbook's era.
        let mut a = Assembler::default();
        let e = run(&mut a, "6,1,1,-;Task in /kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e killed as a result of limit of /kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e\n\
            6,2,2,-;memory: usage 1048576kB, limit 1048576kB, failcnt 1204\n\
            3,3,3,-;Memory cgroup out of memory: Kill process 1234 (sh) score 1000 or sacrifice child\n\
            3,4,4,-;Killed process 1240 (java) total-vm:4318240kB, anon-rss:1040000kB, file-rss:0kB");
        let k = kills(&e);
        assert_eq!(k.len(), 1);
        assert_eq!((k[0].pid, k[0].comm.as_str()), (1240, "java"));
        assert_eq!(k[0].kind, OomKind::Cgroup);
        assert_eq!(
            k[0].task_memcg.as_deref(),
            Some("/kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e")
        );
        assert_eq!(k[0].limit_bytes, Some(1 << 30));
        // The handbook's system OOM line (old form) without a victim line yet: flushed.
        let e = run(
            &mut a,
            "3,5,5,-;Out of memory: Kill process 812 (mysqld) score 901 or sacrifice child",
        );
        let f = kills(&e)[0];
        assert_eq!(
            (f.kind, f.pid, f.comm.as_str()),
            (OomKind::System, 812, "mysqld")
        );
        // A bare victim line without a decision is ignored.
        assert!(run(&mut a, "3,6,6,-;Killed process 1 (x) total-vm:1kB").is_empty());
    }

    #[test]
    fn comm_with_spaces_and_parens_and_allocating_task_form() {
        assert_eq!(
            parse("Out of memory (oom_kill_allocating_task): Killed process 77 (Web Content (x)) total-vm:1kB"),
            Some(OomLine::Kill {
                kind: OomKind::System,
                pid: 77,
                comm: "Web Content (x)".into(),
                decided: false
            })
        );
        assert_eq!(parse("Out of memory and no killable processes..."), None);
        assert_eq!(
            parse("oom_reaper: reaped process 19701 (python3), now anon-rss:0kB"),
            None
        );
        assert_eq!(parse("oom_kill_process: 15 callbacks suppressed"), None);
        assert_eq!(parse("net_ratelimit: 12 callbacks suppressed"), None);
    }

    #[test]
    fn stale_summary_of_another_pid_is_not_used() {
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            &format!("6,1,1,-;{K618_SUMMARY}\n3,2,2,-;Memory cgroup out of memory: Killed process 5 (other) total-vm:1kB"),
        );
        assert_eq!(kills(&e)[0].task_memcg, None);
        assert_eq!(kills(&e)[0].report, Report::Missing);
    }

    /// A summary cut in three by other CPUs' messages (kernel 5.10+ stores the `pr_cont()`
    /// pieces as records of their own, flag `c`, at the default level 4) is joined again.
    #[test]
    fn a_summary_split_by_interleaved_messages_is_joined() {
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            "4,100,1000,-;java invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=969\n\
             6,101,1100,-;memory: usage 262144kB, limit 262144kB, failcnt 97\n\
             6,102,1200,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-4d3c.scope,mems_allowed=0\n\
             4,103,1201,-;net_ratelimit: 12 callbacks suppressed\n\
             4,104,1202,c;,oom_memcg=\n\
             4,105,1203,-;IPv4: martian source 10.0.0.1 from 10.0.0.2, on dev eth0\n\
             4,106,1204,c;/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e_2d3f.slice/cri-containerd-4d3c.scope\n\
             4,107,1205,c;,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e_2d3f.slice/cri-containerd-4d3c.scope,task=java,pid=4242,uid=1000\n\
             3,108,1300,-;Memory cgroup out of memory: Killed process 4242 (java) total-vm:4118968kB, anon-rss:262104kB, file-rss:6500kB, shmem-rss:0kB, UID:1000 pgtables:880kB oom_score_adj:969",
        );
        let k = kills(&e);
        assert_eq!(k.len(), 1, "{e:?}");
        assert_eq!(k[0].report, Report::Logged);
        assert!(k[0].task_memcg.as_deref().unwrap().contains("pod7c1e_2d3f"));
        assert!(k[0].oom_memcg.as_deref().unwrap().ends_with("4d3c.scope"));
        assert_eq!(k[0].limit_bytes, Some(256 << 20));
    }

    /// syslog(2) text has no flags: the pieces are told by their text.
    #[test]
    fn summary_pieces_without_flags_are_told_by_their_text() {
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            "6,1,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=\n\
             6,2,2,-;/kubepods/burstable/pod11111111-2222-3333-4444-555555555555\n\
             6,3,3,-;,task_memcg=/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/abc,task=x,pid=9,uid=0\n\
             3,4,4,-;Memory cgroup out of memory: Killed process 9 (x) total-vm:1kB",
        );
        assert_eq!(
            kills(&e)[0].oom_memcg.as_deref(),
            Some("/kubepods/burstable/pod11111111-2222-3333-4444-555555555555")
        );
        // An unrelated line with a colon never completes a value.
        let t = "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=";
        assert!(!continues_summary(t, &rec("6,1,1,-;eth0:link")));
        assert!(continues_summary(t, &rec("4,1,1,c;/a/b")));
    }

    /// Kernel 5.4 (AKS node, memory.oom.group set on the container's cgroup): the victim's kill
    /// line is printed again after the group line. One kill, not two.
    #[test]
    fn oom_group_reprint_of_the_victim_is_one_kill() {
        let cid = "178ec18073cc6ac7be2de8d9869daf162a6349dd056b6535849112c53ec3102a";
        let memcg = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod10d16a28_60ff_475f_a631_510d9792219f.slice/cri-containerd-{cid}.scope");
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            &format!(
                "6,1,8341856856,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{cid}.scope,mems_allowed=0,oom_memcg=/kubepods.slice,task_memcg={memcg},task=stress,pid=68061,uid=0\n\
                 3,2,8341856870,-;Memory cgroup out of memory: Killed process 68061 (stress) total-vm:4195088kB, anon-rss:2884696kB, file-rss:288kB, shmem-rss:0kB, UID:0 pgtables:5696kB oom_score_adj:872\n\
                 6,3,8341868335,-;Tasks in {memcg} are going to be killed due to memory.oom.group set\n\
                 3,4,8341890658,-;Memory cgroup out of memory: Killed process 68061 (stress) total-vm:4195088kB, anon-rss:2884696kB, file-rss:288kB, shmem-rss:0kB, UID:0 pgtables:5696kB oom_score_adj:872"
            ),
        );
        assert_eq!(kills(&e).len(), 1, "{e:?}");
        assert!(members(&e).is_empty());
        assert_eq!(kills(&e)[0].oom_memcg.as_deref(), Some("/kubepods.slice"));
    }

    /// Kernel 4.19 (the memory.oom.group patch's own example): a decision, its victim, the
    /// group line, then bare `Killed process` lines of the other members.
    #[test]
    fn oom_group_members_belong_to_the_kill() {
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            "3,1,52835327,-;Out of memory: Kill process 1221 (allocate) score 241 or sacrifice child\n\
             3,2,52836625,-;Killed process 1221 (allocate) total-vm:2257144kB, anon-rss:2009128kB, file-rss:4kB, shmem-rss:0kB\n\
             6,3,52841431,-;Tasks in /A1 are going to be killed due to memory.oom.group set\n\
             3,4,52869439,-;Killed process 1217 (allocate) total-vm:2052344kB, anon-rss:1704036kB, file-rss:0kB, shmem-rss:0kB\n\
             3,5,52875601,-;Killed process 1218 (allocate) total-vm:106668kB, anon-rss:24668kB, file-rss:0kB, shmem-rss:0kB\n\
             3,6,52882914,-;Killed process 1219 (allocate) total-vm:106668kB, anon-rss:21528kB, file-rss:0kB, shmem-rss:0kB",
        );
        assert_eq!(kills(&e).len(), 1, "{e:?}");
        assert_eq!(members(&e), vec![1217, 1218, 1219]);
        // Three seconds later the group is over: a bare victim line is ignored again.
        assert!(run(&mut a, "3,7,55900000,-;Killed process 1 (x) total-vm:1kB").is_empty());
    }

    /// Kernel 6.18.44 (this VM): 25 kills in 0.3 s; the kernel printed 10 reports, then only
    /// the kill lines. The unreported kills of the same task are tied to the logged cgroup.
    #[test]
    fn rate_limited_kills_are_tied_to_the_logged_kills_of_the_same_task() {
        let mut a = Assembler::default();
        let mut events = Vec::new();
        for i in 0..10u64 {
            events.extend(run(&mut a, &format!(
                "4,{},{},-;ndburst invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n\
                 6,{},{},-;memory: usage 16384kB, limit 16384kB, failcnt 0\n\
                 6,{},{},-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/klog-exp-13622,task_memcg=/klog-exp-13622,task=ndburst,pid={},uid=0\n\
                 3,{},{},-;Memory cgroup out of memory: Killed process {} (ndburst) total-vm:9448kB, anon-rss:6656kB, file-rss:1560kB, shmem-rss:0kB, UID:0 pgtables:60kB oom_score_adj:0",
                i * 4, 9479991892 + i * 10_000, i * 4 + 1, 9479992037 + i * 10_000, i * 4 + 2, 9479996122 + i * 10_000, 13640 + i,
                i * 4 + 3, 9479996141 + i * 10_000, 13640 + i)));
        }
        events.extend(run(&mut a, "3,8617,9480109568,-;Memory cgroup out of memory: Killed process 13641 (ndburst) total-vm:6604kB, anon-rss:3712kB, file-rss:1560kB, shmem-rss:0kB, UID:0 pgtables:52kB oom_score_adj:0\n\
             4,8618,9480110000,-;net_ratelimit: 3 callbacks suppressed\n\
             3,8619,9480118394,-;Memory cgroup out of memory: Killed process 13651 (ndburst) total-vm:6332kB, anon-rss:3456kB, file-rss:1680kB, shmem-rss:0kB, UID:0 pgtables:48kB oom_score_adj:0\n\
             4,8632,9486261348,-;oom_kill_process: 15 callbacks suppressed"));
        let k = kills(&events);
        assert_eq!(k.len(), 12);
        assert!(k
            .iter()
            .all(|k| k.task_memcg.as_deref() == Some("/klog-exp-13622")));
        assert_eq!(
            k.iter()
                .filter(|k| k.report == Report::SameTaskRecently)
                .count(),
            2
        );
        assert_eq!(k[11].limit_bytes, Some(16 << 20));
        // Another task's unreported kill, or one long after the burst: not tied to anything.
        let e = run(&mut a, "3,9000,9480120000,-;Memory cgroup out of memory: Killed process 2 (other) total-vm:1kB\n\
             3,9001,9499000000,-;Memory cgroup out of memory: Killed process 3 (ndburst) total-vm:1kB");
        assert!(kills(&e)
            .iter()
            .all(|k| k.report == Report::Missing && k.task_memcg.is_none()));
    }

    /// Two pods running the same program in one burst: an unreported kill of that program
    /// could be either's, so it is tied to neither.
    #[test]
    fn an_ambiguous_unreported_kill_is_tied_to_no_cgroup() {
        let mut a = Assembler::default();
        let e = run(
            &mut a,
            "6,1,1000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/podA,task_memcg=/kubepods/podA,task=php-fpm,pid=10,uid=0\n\
             3,2,1001,-;Memory cgroup out of memory: Killed process 10 (php-fpm) total-vm:1kB\n\
             6,3,2000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/podB,task_memcg=/kubepods/podB,task=php-fpm,pid=20,uid=0\n\
             3,4,2001,-;Memory cgroup out of memory: Killed process 20 (php-fpm) total-vm:1kB\n\
             3,5,3000,-;Memory cgroup out of memory: Killed process 30 (php-fpm) total-vm:1kB",
        );
        let k = kills(&e);
        assert_eq!(k.len(), 3);
        assert_eq!(k[2].report, Report::Missing);
        assert_eq!(k[2].task_memcg, None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let mut a = Assembler::default();
            let r = Record { seq: 1, usec: 0, level: 3, facility: 0, message: s.clone(), continuation: Vec::new(), fragment: true, timestamp: None };
            let _ = a.feed(&r);
            let _ = a.feed(&r);
        }
        #[test]
        fn never_panics_on_oom_like(s in "(Memory cgroup o|O)ut of memory[^:]{0,5}: Kill(ed)? process [0-9 ]{0,12}\\(?[a-z() ]{0,10}\\)?( total-vm| score)?.{0,10}") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_summary_like(s in "oom-kill:([a-z_]{0,10}=?[A-Za-z_/0-9()]{0,12},?){0,8}", t in "(,[a-z_]{0,10}=?[A-Za-z_/0-9()]{0,12}){0,4}") {
            let mut a = Assembler::default();
            for (i, m) in [s, t].into_iter().enumerate() {
                let r = Record { seq: i as u64, usec: i as u64, level: 6, facility: 0, message: m, continuation: Vec::new(), fragment: true, timestamp: None };
                let _ = a.feed(&r);
            }
        }
        /// Each OOM wording of the module's table as `oom_kill_process()`, `__oom_kill_process()`,
        /// `dump_oom_summary()`, `mem_cgroup_print_oom_meminfo()` and the memory.oom.group
        /// message print it, comms with spaces and parentheses, cgroup paths, cpu lists with
        /// commas: pid, comm, kind, paths and usage read back.
        #[test]
        fn parses_what_the_kernel_prints(
            pid in 1u32..=4_194_304, uid in proptest::num::u32::ANY,
            comm in (crate::testgen::comm(), "( \\([a-z]{1,4}\\))?").prop_map(|(c, p)| c + &p),
            (task, oom) in ("(/[a-z0-9_.-]{1,12}){1,4}", "(/[a-z0-9_.-]{1,12}){1,3}"),
            [usage, limit, vm] in proptest::array::uniform3(proptest::num::u64::ANY),
            memcg in proptest::bool::ANY, mems in "0|0-1|0,2", wording in 0usize..8,
        ) {
            let (kind, prefix, constraint) = if memcg {
                (OomKind::Cgroup, "Memory cgroup out of memory", "CONSTRAINT_MEMCG")
            } else {
                (OomKind::System, "Out of memory", "CONSTRAINT_NONE")
            };
            let oom_field = if memcg { format!(",oom_memcg={oom}") } else { String::new() };
            let (text, want) = [
                (format!("{prefix}: Killed process {pid} ({comm}) total-vm:{vm}kB, anon-rss:{usage}kB, file-rss:0kB, shmem-rss:0kB, UID:{uid} pgtables:48kB oom_score_adj:-997"),
                 OomLine::Kill { kind, pid, comm: comm.clone(), decided: false }),
                (format!("{prefix}: Kill process {pid} ({comm}) score 1000 or sacrifice child"),
                 OomLine::Kill { kind, pid, comm: comm.clone(), decided: true }),
                (format!("Killed process {pid} ({comm}) total-vm:{vm}kB, anon-rss:{usage}kB, file-rss:0kB"),
                 OomLine::Victim { pid, comm: comm.clone() }),
                (format!("oom-kill:constraint={constraint},nodemask=(null),cpuset=/,mems_allowed={mems}{oom_field},task_memcg={task},task={comm},pid={pid},uid={uid}"),
                 OomLine::Summary { kind, oom_memcg: memcg.then(|| oom.clone()), task_memcg: Some(task.clone()), task: Some(comm.clone()), pid: Some(pid), complete: true }),
                (format!("{comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997"),
                 OomLine::Header),
                (format!("Task in {task} killed as a result of limit of {oom}"),
                 OomLine::TaskIn { task_memcg: task.clone(), oom_memcg: oom.clone() }),
                (format!("memory: usage {usage}kB, limit {limit}kB, failcnt {vm}"),
                 OomLine::Usage { usage_kb: usage, limit_kb: limit }),
                (format!("Tasks in {task} are going to be killed due to memory.oom.group set"),
                 OomLine::GroupKill { memcg: task.clone() }),
            ][wording].clone();
            proptest::prop_assert_eq!(parse(&text), Some(want));
        }
    }
}
