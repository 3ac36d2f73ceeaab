//! One process table shared by every collector of an agent ([`Node::processes`]).
//!
//! Collectors used to walk `<root>/proc` each on its own, reading `comm` (and often `cmdline`
//! and namespace links) of every process every cycle. The table walks it for all of them:
//!
//! - `<root>/proc` is listed at most once per [`MAX_AGE`] for all callers (a caller that asks
//!   twice gets a new listing, so one collector's successive cycles always see a fresh one);
//! - only a pid the previous listing did not have, or whose `/proc/<pid>` directory is a new
//!   inode (procfs gives a new process a new inode, and `readdir` reports it: a reused pid is
//!   noticed without reading anything), is examined: one read of `/proc/<pid>/stat` gives its
//!   `comm`, state and start time, the key of everything remembered about it;
//! - `cmdline` and namespace links are read only when a caller asks, and remembered per
//!   (pid, start time);
//! - a process younger than [`SETTLE`] when examined is examined again on the next listing (a
//!   wrapper that `exec`s the daemon changes its `comm`, arguments and perhaps namespaces, not
//!   its start time), and nothing about it is remembered until then; every [`REEXAMINE`], at
//!   most [`REEXAMINE_PER_LISTING`] old entries per listing are examined again (a long-lived
//!   process that `exec`s late);
//! - at most `cap` pids are kept (the lowest), and pids gone from a listing are dropped.
//!
//! What the table hands out comes from the last listing; a caller that acts on a process
//! (names a daemon, reads its configuration) confirms it first with [`Processes::reread`]: one
//! read of its `stat` now. Fake host roots whose processes have a `comm` and no `stat` are
//! examined by `comm` alone, every listing, and nothing about them is remembered; a pid with
//! neither stays listed with an empty `comm` (it exited since the listing) and is not read
//! again while its directory stays.
//!
//! [`Node::processes`]: crate::node::Node::processes

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::daemons::{self, Located};
use super::shared::SharedReads;
use crate::host::HostPaths;
use crate::hostfs::{self, entries};
use crate::proc::{ns, pid, uptime};

/// A listing younger than this serves every caller that has not used it yet.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// A process younger than this when examined is examined again on the next listing.
pub const SETTLE: Duration = Duration::from_secs(5);

/// An entry examined longer ago than this is examined again (a few per listing).
pub const REEXAMINE: Duration = Duration::from_secs(600);

/// At most this many old entries are examined again per listing.
pub const REEXAMINE_PER_LISTING: usize = 16;

/// Processes kept by default (the lowest pids); the rest of a larger listing is not examined.
pub const DEFAULT_CAP: usize = 65_536;

/// Bytes of arguments the table remembers in all (a `cmdline` may be 128 KiB): past this,
/// arguments are read each time they are asked for.
pub const ARGS_BUDGET: usize = 4 << 20;

/// The namespaces the table remembers per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ns {
    Net,
    Mnt,
}

impl Ns {
    fn kind(self) -> &'static str {
        match self {
            Ns::Net => "net",
            Ns::Mnt => "mnt",
        }
    }

    fn index(self) -> usize {
        match self {
            Ns::Net => 0,
            Ns::Mnt => 1,
        }
    }
}

/// One process as the table knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    /// Start time after boot in clock ticks (`stat` field 22); `None` when `stat` could not
    /// be read and the process was known by its `comm` file alone.
    pub start: Option<u64>,
    /// The command name (`comm`, at most 15 bytes on Linux).
    pub comm: Arc<str>,
    /// Single-letter state (`R`, `S`, `D`, `Z`...) when `stat` was read.
    pub state: Option<char>,
    /// User + system CPU time in clock ticks when `stat` was read (at that read).
    pub cpu_ticks: Option<u64>,
}

impl Proc {
    /// An exited but not reaped (`Z`) or dead (`X`) process.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, Some('Z' | 'X'))
    }
}

/// One listing handed out: the processes in pid order.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub procs: Vec<Proc>,
    /// The listing had more pids than the cap: the highest were not examined.
    pub truncated: bool,
}

/// What the table remembers of one pid.
#[derive(Debug)]
struct Entry {
    proc: Proc,
    /// Inode of `<root>/proc/<pid>` in the listing (a new process gets a new one).
    ino: u64,
    examined: Instant,
    /// Examined when older than [`SETTLE`] with a known start time: what is read lazily
    /// about it may be remembered.
    settled: bool,
    args: Option<Option<Arc<[String]>>>,
    ns: [Option<Option<u64>>; 2],
}

impl Entry {
    fn new(proc: Proc, ino: u64, settled: bool, now: Instant) -> Entry {
        Entry {
            proc,
            ino,
            examined: now,
            settled,
            args: None,
            ns: [None, None],
        }
    }

    fn args_bytes(&self) -> usize {
        self.args
            .as_ref()
            .and_then(Option::as_ref)
            .map_or(0, |a| args_size(a))
    }

    /// Neither `stat` nor `comm` could be read: nothing to examine again in the same
    /// directory (on procfs such a pid is gone by the next listing).
    fn nameless(&self) -> bool {
        self.proc.start.is_none() && self.proc.comm.is_empty()
    }

    /// Takes what was remembered from `old` when it is the same process, unchanged (start
    /// time and `comm`: a late `exec` changes the name), and both are settled.
    fn inherit(&mut self, old: Entry) {
        if self.settled
            && old.settled
            && old.proc.start == self.proc.start
            && old.proc.comm == self.proc.comm
        {
            self.args = old.args;
            self.ns = old.ns;
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: BTreeMap<u32, Entry>,
    listed_at: Option<Instant>,
    generation: u64,
    truncated: bool,
    /// The listing generation each caller last used.
    used: HashMap<&'static str, u64>,
    /// Callers answered once without a listing ([`Processes::apart_in_netns`]).
    cold_asked: HashSet<&'static str>,
    /// Examinations since the table was made (tests, self-monitoring).
    examined: u64,
    /// Bytes of the arguments remembered (recounted at each listing).
    args_bytes: usize,
    buf: Vec<u8>,
}

/// The shared process table (see the module documentation). Held by [`crate::node::Node`] in
/// an `Arc`: clones of a node share it.
pub struct ProcessTable {
    inner: Mutex<Inner>,
    cap: usize,
    args_budget: usize,
    /// Clock ticks per second of `stat`'s start times.
    ticks: u64,
}

impl std::fmt::Debug for ProcessTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("ProcessTable")
            .field("entries", &inner.entries.len())
            .field("generation", &inner.generation)
            .field("cap", &self.cap)
            .finish()
    }
}

impl ProcessTable {
    /// A table keeping at most `cap` processes, on a machine whose `/proc/<pid>/stat` counts
    /// `clock_ticks` per second ([`super::Facts`]).
    pub fn new(cap: usize, clock_ticks: u64) -> ProcessTable {
        ProcessTable::with_args_budget(cap, ARGS_BUDGET, clock_ticks)
    }

    /// A table keeping at most `cap` processes and `args_budget` bytes of arguments.
    pub fn with_args_budget(cap: usize, args_budget: usize, clock_ticks: u64) -> ProcessTable {
        ProcessTable {
            inner: Mutex::default(),
            cap: cap.max(1),
            args_budget,
            ticks: clock_ticks.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves a table that is still consistent
        // (entries are replaced whole): keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `/proc` has been listed (the table remembers what it examined: a new listing costs the
    /// directory and the new pids only).
    fn listed(&self) -> bool {
        self.lock().listed_at.is_some()
    }

    /// True the first time `caller` asks while `/proc` has never been listed: it may be
    /// answered without the table (a one-off, as in `check`). A caller that asks again
    /// repeats (an agent's cycles) and is answered from the table, which then costs only the
    /// new pids.
    fn first_cold_ask(&self, caller: &'static str) -> bool {
        let mut inner = self.lock();
        inner.listed_at.is_none() && inner.cold_asked.insert(caller)
    }

    /// How many processes were examined (a `stat` or `comm` read) since the table was made.
    pub fn examined(&self) -> u64 {
        self.lock().examined
    }

    /// How many processes the table holds.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// True when the table holds no process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn snapshot(
        &self,
        host: &HostPaths,
        caller: &'static str,
    ) -> Result<Snapshot, crate::ReadError> {
        let mut inner = self.lock();
        let now = Instant::now();
        let fresh = inner
            .listed_at
            .is_some_and(|t| now.saturating_duration_since(t) < MAX_AGE)
            && inner.used.get(caller) != Some(&inner.generation);
        if !fresh {
            if let Err(e) = self.relist(&mut inner, host, now) {
                inner.listed_at = None;
                return Err(e);
            }
        }
        let generation = inner.generation;
        inner.used.insert(caller, generation);
        Ok(Snapshot {
            procs: inner.entries.values().map(|e| e.proc.clone()).collect(),
            truncated: inner.truncated,
        })
    }

    fn relist(
        &self,
        inner: &mut Inner,
        host: &HostPaths,
        now: Instant,
    ) -> Result<(), crate::ReadError> {
        let mut listed: Vec<(u32, u64)> = hostfs::dir_entries(&host.proc(), entries::PROC)?
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
                Some((pid, e.ino()))
            })
            .collect();
        listed.sort_unstable();
        inner.truncated = listed.len() > self.cap;
        listed.truncate(self.cap);
        let uptime = uptime::read(host).ok().map(|u| u.since_boot);
        let ticks = self.ticks;
        let mut old = std::mem::take(&mut inner.entries);
        let mut buf = std::mem::take(&mut inner.buf);
        let mut reexamine = REEXAMINE_PER_LISTING;
        for (p, ino) in listed {
            let previous = old.remove(&p);
            let keep = previous.as_ref().is_some_and(|e| {
                e.ino == ino
                    && (e.settled || e.nameless())
                    && (now.saturating_duration_since(e.examined) < REEXAMINE || reexamine == 0)
            });
            if keep {
                if let Some(e) = previous {
                    inner.entries.insert(p, e);
                }
                continue;
            }
            if previous.as_ref().is_some_and(|e| e.ino == ino && e.settled) {
                reexamine -= 1;
            }
            inner.examined += 1;
            // A pid whose `stat` and `comm` cannot be read (it exited since the listing, or a
            // fake root without them) stays listed with no name: descriptor scans still see it.
            let proc = examine(host, p, &mut buf).unwrap_or_else(|| Proc {
                pid: p,
                start: None,
                comm: Arc::from(""),
                state: None,
                cpu_ticks: None,
            });
            let settled = is_settled(&proc, uptime, ticks);
            let mut entry = Entry::new(proc, ino, settled, now);
            if let Some(prev) = previous {
                entry.inherit(prev);
            }
            inner.entries.insert(p, entry);
        }
        inner.buf = buf;
        inner.args_bytes = inner.entries.values().map(Entry::args_bytes).sum();
        inner.listed_at = Some(now);
        inner.generation = inner.generation.wrapping_add(1);
        Ok(())
    }

    /// Re-reads one process now; updates the table when it changed.
    fn reread(&self, host: &HostPaths, p: u32) -> Option<Proc> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let mut buf = std::mem::take(&mut inner.buf);
        let fresh = examine(host, p, &mut buf);
        inner.buf = buf;
        match (&fresh, inner.entries.get_mut(&p)) {
            (Some(f), Some(e)) if e.proc != *f => {
                if e.proc.start != f.start || e.proc.comm != f.comm {
                    let freed = e.args_bytes();
                    e.args = None;
                    e.ns = [None, None];
                    e.settled = false;
                    inner.args_bytes = inner.args_bytes.saturating_sub(freed);
                }
                e.proc = f.clone();
            }
            (None, Some(_)) => {
                inner.entries.remove(&p);
            }
            _ => {}
        }
        fresh
    }

    /// The remembered value of an entry for `p` when it may be used.
    fn cached<T: Clone>(&self, p: &Proc, get: impl Fn(&Entry) -> Option<T>) -> Option<T> {
        let inner = self.lock();
        let e = inner.entries.get(&p.pid)?;
        (e.settled && e.proc.start.is_some() && e.proc.start == p.start)
            .then(|| get(e))
            .flatten()
    }

    fn remember(&self, p: &Proc, set: impl FnOnce(&mut Entry)) {
        let mut inner = self.lock();
        if let Some(e) = inner.entries.get_mut(&p.pid) {
            if e.settled && e.proc.start.is_some() && e.proc.start == p.start {
                set(e);
            }
        }
    }

    /// Remembers `p`'s arguments while the table's budget allows.
    fn remember_args(&self, p: &Proc, args: Option<Arc<[String]>>) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let size = args.as_deref().map_or(0, args_size);
        if inner.args_bytes.saturating_add(size) > self.args_budget {
            return;
        }
        let Some(e) = inner.entries.get_mut(&p.pid) else {
            return;
        };
        if e.settled && e.proc.start.is_some() && e.proc.start == p.start && e.args.is_none() {
            e.args = Some(args);
            inner.args_bytes += size;
        }
    }
}

/// Bytes an argument list takes (its text and one `String` per argument).
fn args_size(a: &[String]) -> usize {
    a.iter()
        .map(|s| s.len() + std::mem::size_of::<String>())
        .sum()
}

/// One read of `stat` (or, when that fails, of `comm`): the process now.
fn examine(host: &HostPaths, p: u32, buf: &mut Vec<u8>) -> Option<Proc> {
    if let Some(st) = pid::stat_with(host, p, buf) {
        return Some(Proc {
            pid: p,
            start: Some(st.starttime),
            comm: st.comm.into(),
            state: Some(st.state),
            cpu_ticks: Some(st.utime.saturating_add(st.stime)),
        });
    }
    let comm = pid::comm(host, p)?;
    Some(Proc {
        pid: p,
        start: None,
        comm: comm.into(),
        state: None,
        cpu_ticks: None,
    })
}

/// A process is settled when it started [`SETTLE`] or more before `uptime` (or its age
/// cannot be told: no uptime).
fn is_settled(p: &Proc, uptime: Option<Duration>, ticks: u64) -> bool {
    let Some(start) = p.start else {
        return false;
    };
    let Some(up) = uptime else {
        return true;
    };
    let started = Duration::from_secs_f64(start as f64 / ticks.max(1) as f64);
    up.saturating_sub(started) >= SETTLE
}

/// The shared table bound to its host: what collectors call ([`crate::node::Node::processes`]).
#[derive(Clone, Copy)]
pub struct Processes<'a> {
    host: &'a HostPaths,
    table: &'a ProcessTable,
    shared: &'a SharedReads,
}

impl<'a> Processes<'a> {
    pub(crate) fn new(
        host: &'a HostPaths,
        table: &'a ProcessTable,
        shared: &'a SharedReads,
    ) -> Processes<'a> {
        Processes {
            host,
            table,
            shared,
        }
    }

    /// The host's processes in pid order, from a listing at most [`MAX_AGE`] old that
    /// `caller` (a stable name of the call site) has not used yet. Reads `stat` of the pids
    /// the previous listing did not have. An error when `<root>/proc` cannot be listed.
    pub fn snapshot(&self, caller: &'static str) -> Result<Snapshot, crate::ReadError> {
        self.table.snapshot(self.host, caller)
    }

    /// The process `pid` now (one read of its `stat`): confirms what a snapshot said before a
    /// caller acts on it. `None` when it exited. The caller compares start time and `comm`.
    pub fn reread(&self, pid: u32) -> Option<Proc> {
        self.table.reread(self.host, pid)
    }

    /// `p`'s arguments (`cmdline`), remembered per (pid, start time) within [`ARGS_BUDGET`].
    pub fn args(&self, p: &Proc) -> Option<Arc<[String]>> {
        if let Some(a) = self.table.cached(p, |e| e.args.clone()) {
            return a;
        }
        let a: Option<Arc<[String]>> = pid::args(self.host, p.pid).map(Into::into);
        self.table.remember_args(p, a.clone());
        a
    }

    /// The inode of `p`'s namespace of `kind`, remembered per (pid, start time).
    pub fn ns(&self, p: &Proc, kind: Ns) -> Option<u64> {
        let i = kind.index();
        if let Some(n) = self.table.cached(p, |e| e.ns[i]) {
            return n;
        }
        let n = ns::inode(self.host, p.pid, kind.kind());
        self.table.remember(p, |e| e.ns[i] = Some(n));
        n
    }

    /// The live processes whose `comm` is one of `names`, in pid order, each confirmed now
    /// (one `stat` read each: a reused pid or a process that exited is not returned).
    ///
    /// Until `/proc` has been listed once (a `check`, or an agent no other caller makes list),
    /// the daemons are first looked for where they show themselves ([`daemons`]: their
    /// systemd unit's cgroup, their listening sockets); `/proc` is listed only when that
    /// cannot tell for every name, and from then on the listing answers (only new pids cost).
    pub fn named(
        &self,
        caller: &'static str,
        names: &[&str],
    ) -> Result<Vec<Proc>, crate::ReadError> {
        let (procs, confirmed) = self.by_name(caller, names)?;
        if confirmed {
            return Ok(procs);
        }
        Ok(procs
            .iter()
            .filter_map(|p| self.reread(p.pid))
            .filter(|p| names.contains(&&*p.comm) && !p.is_dead())
            .collect())
    }

    /// The processes whose `comm` is one of `names`, in pid order, as [`Processes::named`]
    /// finds them, but not confirmed when they come from a listing: for a caller that reads
    /// each one's `stat` itself.
    pub fn named_unconfirmed(
        &self,
        caller: &'static str,
        names: &[&str],
    ) -> Result<Vec<Proc>, crate::ReadError> {
        Ok(self.by_name(caller, names)?.0)
    }

    /// The processes of `names`: found where the daemons show themselves (confirmed: `true`)
    /// until `/proc` has been listed, else from a listing (as listed: `false`).
    fn by_name(
        &self,
        caller: &'static str,
        names: &[&str],
    ) -> Result<(Vec<Proc>, bool), crate::ReadError> {
        if !self.table.listed() {
            if let Some(found) = self.located(names) {
                return Ok((found, true));
            }
        }
        let snap = self.snapshot(caller)?;
        let procs = snap
            .procs
            .into_iter()
            .filter(|p| names.contains(&&*p.comm))
            .collect();
        Ok((procs, false))
    }

    /// How many processes were examined since the table was made.
    pub fn examined(&self) -> u64 {
        self.table.examined()
    }

    /// A process in each of the network namespaces `wanted` (by inode) that one is found
    /// in. From the table when `/proc` has been listed (the namespaces it remembers cost
    /// nothing); else by reading the `ns/net` link of each listed pid, in pid order, until
    /// every one is found: a cold table is not examined for it (a `stat` of every process,
    /// twice the cost of the links, for a namespace that may be gone).
    pub fn in_netns(
        &self,
        caller: &'static str,
        wanted: &[u64],
    ) -> Result<std::collections::HashMap<u64, u32>, crate::ReadError> {
        let mut found = std::collections::HashMap::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        // Records `pid` for its namespace `n` when wanted; true once every one is found.
        let mut note = |n: Option<u64>, pid: u32| {
            if let Some(n) = n.filter(|n| wanted.contains(n)) {
                found.entry(n).or_insert(pid);
            }
            found.len() == wanted.len()
        };
        if self.table.listed() {
            for p in &self.snapshot(caller)?.procs {
                if note(self.ns(p, Ns::Net), p.pid) {
                    break;
                }
            }
        } else {
            let links = ns::Links::open(self.host);
            for pid in pid::list_pids(self.host)? {
                if note(links.inode(pid, "net"), pid) {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The processes in the network namespace `net` whose mount namespace is not `mnt` and
    /// that `wanted` accepts, in pid order, each with its mount namespace: the processes that
    /// share a network namespace and see files of their own (a hostNetwork pod's, next to
    /// the host's).
    ///
    /// From the table when `/proc` has been listed, or when `caller` asks a second time:
    /// `wanted` first, on the `comm` the listing holds, then the namespaces (remembered) of
    /// those it accepts. The first time on a cold table (a `check`), the other way round,
    /// and the table is not examined: the `ns/net` link of each listed pid, its `ns/mnt`
    /// link when that matched, and a `stat` read (then `wanted`) only of the pids left. On a
    /// node most processes are in a pod's network namespace or in the host's mount
    /// namespace, so one link of each, half the cost of a `stat`, is what a `check` pays;
    /// an agent pays that once, then one `stat` of every process once, then new pids only.
    pub fn apart_in_netns(
        &self,
        caller: &'static str,
        net: u64,
        mnt: u64,
        mut wanted: impl FnMut(&Proc) -> bool,
    ) -> Result<Vec<(Proc, u64)>, crate::ReadError> {
        let mut out = Vec::new();
        if !self.table.first_cold_ask(caller) {
            for p in self.snapshot(caller)?.procs {
                if !wanted(&p) || self.ns(&p, Ns::Net) != Some(net) {
                    continue;
                }
                if let Some(m) = self.ns(&p, Ns::Mnt).filter(|&m| m != mnt) {
                    out.push((p, m));
                }
            }
            return Ok(out);
        }
        let links = ns::Links::open(self.host);
        for pid in pid::list_pids(self.host)? {
            if links.inode(pid, Ns::Net.kind()) != Some(net) {
                continue;
            }
            let Some(m) = links.inode(pid, Ns::Mnt.kind()).filter(|&m| m != mnt) else {
                continue;
            };
            if let Some(p) = self.reread(pid).filter(|p| wanted(p)) {
                out.push((p, m));
            }
        }
        Ok(out)
    }

    /// The live processes whose `comm` is one of `names`, in pid order, for a rare caller (the
    /// clock collector's lookup of the time daemons, every 10 minutes): from a listing younger
    /// than [`MAX_AGE`] when one is at hand; else what the daemon locator says
    /// ([`super::daemons`]: the time daemons' units, sockets and ports) when it can tell for
    /// every name; else by a pass of its own that leaves the table as it is: one `comm` read
    /// per process (the kernel writes `stat`'s fifty fields for a `stat` read, about twice
    /// the cost) and a `stat` of the few whose name matches. Listing through the table instead
    /// would make it "listed", and every other caller's lookups by name would then list
    /// `/proc` each cycle (about 3 ms at 2,000 processes) where the locator answered before.
    pub fn named_apart(
        &self,
        caller: &'static str,
        names: &[&str],
    ) -> Result<Vec<Proc>, crate::ReadError> {
        if self.table.listed() {
            return self.named(caller, names);
        }
        if let Some(found) = self.located(names) {
            return Ok(found);
        }
        let mut buf = Vec::new();
        Ok(pid::list_pids(self.host)?
            .into_iter()
            .filter(|&p| pid::comm_with(self.host, p, &mut buf).is_some_and(|c| names.contains(&c)))
            .filter_map(|p| self.reread(p))
            .filter(|p| names.contains(&&*p.comm) && !p.is_dead())
            .collect())
    }

    fn located(&self, names: &[&str]) -> Option<Vec<Proc>> {
        let mut out = Vec::new();
        for (name, how) in daemons::locate(self.host, self.shared, names) {
            match how {
                Located::Absent => {}
                Located::Unknown => return None,
                Located::InCgroup(pids) => {
                    let before = out.len();
                    out.extend(
                        pids.into_iter()
                            .filter_map(|p| self.reread(p))
                            .filter(|p| *p.comm == *name && !p.is_dead()),
                    );
                    if out.len() == before {
                        return None;
                    }
                }
            }
        }
        out.sort_by_key(|p| p.pid);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn stat_line(pid: u32, comm: &str, state: char, start: u64) -> String {
        format!("{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 {start} 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    }

    /// A fake process; the fake host's uptime is 10,000 s, so a start of 100 ticks is old.
    fn proc_dir(root: &Path, pid: u32, comm: &str, start: u64, args: &str) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(d.join("ns")).unwrap();
        std::fs::write(d.join("stat"), stat_line(pid, comm, 'S', start)).unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(d.join("cmdline"), args.replace(' ', "\0") + "\0").unwrap();
        let _ = std::fs::remove_file(d.join("ns/net"));
        std::os::unix::fs::symlink(
            format!("net:[{}]", 4026531840u64 + u64::from(pid)),
            d.join("ns/net"),
        )
        .unwrap();
    }

    /// Clock ticks of the fake stat lines.
    const TICKS: u64 = 100;

    /// A fake node; `.host()` of it gives its paths.
    fn fake() -> (tempfile::TempDir, crate::node::Node) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/uptime"), "10000.00 1.00\n").unwrap();
        let facts = crate::node::Facts {
            page_size: 4096,
            clock_ticks: TICKS,
        };
        let h = crate::node::Node::with_facts(HostPaths::new(t.path()), facts);
        (t, h)
    }

    fn pids(s: &Snapshot) -> Vec<u32> {
        s.procs.iter().map(|p| p.pid).collect()
    }

    #[test]
    fn a_new_pid_is_examined_once_and_a_gone_pid_dropped() {
        let (t, host) = fake();
        for p in [10, 11, 12] {
            proc_dir(t.path(), p, "sleep", 100, "sleep 3600");
        }
        let procs = host.processes();
        let s = procs.snapshot("a").unwrap();
        assert_eq!(pids(&s), vec![10, 11, 12]);
        assert_eq!(&*s.procs[0].comm, "sleep");
        assert_eq!(s.procs[0].start, Some(100));
        assert_eq!(procs.examined(), 3);
        // Another caller within MAX_AGE shares the listing: nothing is read.
        let before = host.per_process_paths();
        let s = procs.snapshot("b").unwrap();
        assert_eq!(pids(&s), vec![10, 11, 12]);
        assert_eq!(host.per_process_paths(), before);
        // The same caller again: a new listing, and only the new pid is examined.
        proc_dir(t.path(), 13, "kubelet", 100, "kubelet --v=2");
        std::fs::remove_dir_all(t.path().join("proc/11")).unwrap();
        let s = procs.snapshot("a").unwrap();
        assert_eq!(pids(&s), vec![10, 12, 13]);
        assert_eq!(procs.examined(), 4);
        assert_eq!(host.per_process_paths(), before + 1);
        assert_eq!(procs.table.len(), 3, "the gone pid is dropped");
    }

    #[test]
    fn named_apart_finds_processes_without_making_the_table_listed() {
        let (t, host) = fake();
        proc_dir(t.path(), 30, "chronyd", 100, "/usr/sbin/chronyd -F 1");
        proc_dir(t.path(), 31, "sleep", 100, "sleep 3600");
        let procs = host.processes();
        let found = procs.named_apart("clock", &["chronyd", "ntpd"]).unwrap();
        assert_eq!(found.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![30]);
        // The table was not listed: other callers' lookups by name still go to the locator.
        assert!(!procs.table.listed());
        assert_eq!(procs.table.len(), 0);
        // Once someone has listed it, the listing answers.
        let _ = procs.snapshot("other").unwrap();
        let found = procs.named_apart("clock", &["chronyd"]).unwrap();
        assert_eq!(found.len(), 1);
    }

    /// With the host's signs in view, time daemons that show none are ruled out without a
    /// pass; with a sign, the pass reads `comm` of each process and `stat` of the matches.
    #[test]
    fn named_apart_asks_the_locator_first_and_passes_over_comm_only() {
        let (t, host) = fake();
        for p in 100..140 {
            proc_dir(t.path(), p, "sleep", 100, "sleep 3600");
        }
        let net = t.path().join("proc/1/net");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(
            net.join("unix"),
            "Num RefCount Protocol Flags Type St Inode Path\n",
        )
        .unwrap();
        std::fs::write(net.join("udp"), "  sl  local_address\n").unwrap();
        std::fs::write(t.path().join("proc/1/comm"), "init\n").unwrap();
        let names = ["chronyd", "ntpd", "systemd-timesyn", "phc2sys"];
        let procs = host.processes();
        let before = host.per_process_paths();
        assert!(procs.named_apart("clock", &names).unwrap().is_empty());
        // pid 1's sockets, UDP tables and name: nothing of the 40 others.
        assert!(
            host.per_process_paths() - before < 8,
            "{}",
            host.per_process_paths() - before
        );
        // chronyd's command socket: the pass finds it, reading `stat` of it alone.
        std::fs::write(
            net.join("unix"),
            "Num RefCount Protocol Flags Type St Inode Path\n0000000000000000: 00000002 00000000 00000000 0002 01 9 /run/chrony/chronyd.sock\n",
        )
        .unwrap();
        proc_dir(t.path(), 120, "chronyd", 100, "/usr/sbin/chronyd");
        let found = procs.named_apart("clock", &names).unwrap();
        assert_eq!(found.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![120]);
        assert_eq!(found[0].start, Some(100), "confirmed by its stat");
        assert!(!procs.table.listed());
    }

    #[test]
    fn a_reused_pid_is_re_examined_and_forgets_what_was_remembered() {
        let (t, host) = fake();
        proc_dir(t.path(), 20, "bash", 100, "bash");
        let procs = host.processes();
        let s = procs.snapshot("a").unwrap();
        let old = s.procs[0].clone();
        assert_eq!(procs.args(&old).unwrap()[0], "bash");
        assert_eq!(procs.ns(&old, Ns::Net), Some(4026531860));
        // Remembered: asking again reads nothing.
        let before = host.per_process_paths();
        assert_eq!(procs.args(&old).unwrap()[0], "bash");
        assert_eq!(procs.ns(&old, Ns::Net), Some(4026531860));
        assert_eq!(host.per_process_paths(), before);
        // The process exits and another takes its pid: a new /proc/<pid> directory (a new
        // inode, as procfs gives a new process; made before the old one goes, so that the
        // filesystem cannot hand out the same inode again), a new start time.
        proc_dir(t.path(), 21, "dockerd", 200, "/usr/bin/dockerd -H fd://");
        std::fs::write(
            t.path().join("proc/21/stat"),
            stat_line(20, "dockerd", 'S', 200),
        )
        .unwrap();
        std::fs::remove_dir_all(t.path().join("proc/20")).unwrap();
        std::fs::rename(t.path().join("proc/21"), t.path().join("proc/20")).unwrap();
        let s = procs.snapshot("a").unwrap();
        let new = s.procs[0].clone();
        assert_eq!((&*new.comm, new.start), ("dockerd", Some(200)));
        assert_eq!(procs.args(&new).unwrap()[0], "/usr/bin/dockerd");
        // What a caller kept of the old process is not answered from the new one's memory.
        assert_eq!(procs.table.cached(&old, |e| e.args.clone()), None);
    }

    #[test]
    fn reread_confirms_and_catches_a_reuse_in_the_same_directory() {
        let (t, host) = fake();
        proc_dir(t.path(), 30, "dockerd", 100, "dockerd");
        let procs = host.processes();
        assert_eq!(procs.named("a", &["dockerd"]).unwrap().len(), 1);
        // The same directory, another process (a fake root can do that; procfs cannot).
        std::fs::write(t.path().join("proc/30/stat"), stat_line(30, "sh", 'S', 300)).unwrap();
        assert!(procs.named("a", &["dockerd"]).unwrap().is_empty());
        let s = procs.snapshot("b").unwrap();
        assert_eq!(
            &*s.procs[0].comm, "sh",
            "the table learnt it from the re-read"
        );
        // A zombie daemon is not a running one.
        std::fs::write(
            t.path().join("proc/30/stat"),
            stat_line(30, "dockerd", 'Z', 300),
        )
        .unwrap();
        assert!(procs.named("a", &["dockerd"]).unwrap().is_empty());
        std::fs::remove_dir_all(t.path().join("proc/30")).unwrap();
        assert_eq!(procs.reread(30), None);
    }

    #[test]
    fn a_young_process_is_examined_again_and_nothing_of_it_is_remembered() {
        let (t, host) = fake();
        // Started 1 s before the fake uptime: a wrapper about to exec the daemon.
        let young = 9_999 * TICKS;
        proc_dir(t.path(), 40, "sh", young, "sh -c exec kubelet");
        let procs = host.processes();
        let s = procs.snapshot("a").unwrap();
        assert_eq!(&*s.procs[0].comm, "sh");
        assert_eq!(procs.args(&s.procs[0]).unwrap()[0], "sh");
        // It execs: same pid, same directory, same start time.
        proc_dir(t.path(), 40, "kubelet", young, "/usr/bin/kubelet --v=2");
        let s = procs.snapshot("a").unwrap();
        assert_eq!(&*s.procs[0].comm, "kubelet");
        assert_eq!(procs.args(&s.procs[0]).unwrap()[0], "/usr/bin/kubelet");
        assert_eq!(procs.examined(), 2);
    }

    #[test]
    fn the_table_keeps_at_most_cap_processes() {
        let (t, host) = fake();
        for p in 1..=10 {
            proc_dir(t.path(), p, "sleep", 100, "sleep");
        }
        let table = ProcessTable::new(4, TICKS);
        let s = table.snapshot(host.host(), "a").unwrap();
        assert_eq!(pids(&s), vec![1, 2, 3, 4]);
        assert!(s.truncated);
        assert_eq!(table.len(), 4);
        assert_eq!(table.examined(), 4);
    }

    #[test]
    fn arguments_are_remembered_within_a_budget() {
        let (t, host) = fake();
        // Two processes with a 100 KiB argument each, and a budget of 150 KiB: the first is
        // remembered, the second is read each time it is asked for.
        let big = "x".repeat(100 << 10);
        proc_dir(t.path(), 60, "java", 100, &format!("java {big}"));
        proc_dir(t.path(), 61, "java", 100, &format!("java {big}"));
        let table = ProcessTable::with_args_budget(DEFAULT_CAP, 150 << 10, TICKS);
        let shared = SharedReads::default();
        let procs = Processes::new(host.host(), &table, &shared);
        let s = procs.snapshot("a").unwrap();
        for p in &s.procs {
            assert_eq!(procs.args(p).unwrap()[1].len(), 100 << 10);
        }
        let before = host.per_process_paths();
        procs.args(&s.procs[0]);
        assert_eq!(host.per_process_paths(), before, "remembered");
        procs.args(&s.procs[1]);
        assert_eq!(
            host.per_process_paths(),
            before + 1,
            "over the budget: read again"
        );
        let used = table.lock().args_bytes;
        assert!(used > 100 << 10 && used <= 150 << 10, "{used}");
        // Recounted at each listing.
        std::fs::remove_dir_all(t.path().join("proc/60")).unwrap();
        procs.snapshot("a").unwrap();
        assert_eq!(table.lock().args_bytes, 0);
    }

    #[test]
    fn a_process_known_by_comm_alone_is_read_every_listing() {
        let (t, host) = fake();
        let d = t.path().join("proc/50");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), "kubelet\n").unwrap();
        std::fs::write(d.join("cmdline"), "kubelet\0--v=2\0").unwrap();
        let procs = host.processes();
        let s = procs.snapshot("a").unwrap();
        assert_eq!((&*s.procs[0].comm, s.procs[0].start), ("kubelet", None));
        std::fs::write(d.join("cmdline"), "kubelet\0--v=4\0").unwrap();
        assert_eq!(procs.args(&s.procs[0]).unwrap()[1], "--v=4");
        std::fs::write(d.join("comm"), "kubelet2\n").unwrap();
        let s = procs.snapshot("a").unwrap();
        assert_eq!(&*s.procs[0].comm, "kubelet2");
    }

    #[test]
    fn an_unlistable_proc_is_an_error_and_a_later_listing_retries() {
        let t = tempfile::tempdir().unwrap();
        let host = crate::node::Node::new(HostPaths::new(t.path()));
        assert!(host.processes().snapshot("a").is_err());
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        proc_dir(t.path(), 7, "init", 100, "init");
        assert_eq!(pids(&host.processes().snapshot("a").unwrap()), vec![7]);
    }

    #[test]
    fn reads_the_real_proc() {
        let host = crate::node::Node::new(HostPaths::new("/"));
        let procs = host.processes();
        let me = std::process::id();
        let s = procs.snapshot("a").unwrap();
        let p = s
            .procs
            .iter()
            .find(|p| p.pid == me)
            .expect("this test's own pid");
        assert!(p.start.is_some() && !p.comm.is_empty());
        assert!(procs.reread(me).is_some_and(|r| r.start == p.start));
    }

    #[test]
    fn in_netns_reads_links_only_on_a_cold_table_and_remembered_ones_after() {
        let (t, host) = fake();
        for pid in [3, 5, 9] {
            proc_dir(t.path(), pid, "sleep", 100, "sleep 1");
        }
        let procs = host.processes();
        let want = [4026531840 + 5, 4026531840 + 9, 7];
        let found = procs.in_netns("a", &want).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!((found[&(4026531840 + 5)], found[&(4026531840 + 9)]), (5, 9));
        assert_eq!(procs.examined(), 0, "no stat on a cold table");
        // Once listed, the table answers (and remembers the links).
        procs.snapshot("b").unwrap();
        assert_eq!(procs.in_netns("a", &want).unwrap(), found);
        let paths = host.per_process_paths();
        assert_eq!(procs.in_netns("a", &want).unwrap(), found);
        assert_eq!(host.per_process_paths(), paths, "remembered");
        assert!(procs.in_netns("a", &[]).unwrap().is_empty());
    }

    /// Points `<pid>/ns/<kind>` at namespace inode `n`.
    fn ns_link(root: &Path, pid: u32, kind: &str, n: u64) {
        let l = root.join(format!("proc/{pid}/ns/{kind}"));
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(format!("{kind}:[{n}]"), l).unwrap();
    }

    #[test]
    fn apart_in_netns_reads_links_before_stat_once_on_a_cold_table_and_names_first_after() {
        let (t, host) = fake();
        let (net, other_net, host_mnt, pod_mnt) = (1000, 2000, 3000, 4000);
        // 3: a host daemon; 5: a hostNetwork pod's kube-proxy; 7: a kube-proxy in a pod's
        // network namespace; 9: something else of the hostNetwork pod.
        for (pid, comm, n, m) in [
            (3, "kubelet", net, host_mnt),
            (5, "kube-proxy", net, pod_mnt),
            (7, "kube-proxy", other_net, pod_mnt + 1),
            (9, "sleep", net, pod_mnt),
        ] {
            proc_dir(t.path(), pid, comm, 100, comm);
            ns_link(t.path(), pid, "net", n);
            ns_link(t.path(), pid, "mnt", m);
        }
        let procs = host.processes();
        let proxy = |p: &Proc| &*p.comm == "kube-proxy";
        let before = host.per_process_paths();
        let cold = procs.apart_in_netns("a", net, host_mnt, proxy).unwrap();
        let found: Vec<(u32, u64)> = cold.iter().map(|(p, m)| (p.pid, *m)).collect();
        assert_eq!(found, [(5, pod_mnt)]);
        assert_eq!(procs.examined(), 0, "the table is not examined");
        // Four net links, three mnt links (3, 5, 9 share the network), two stats (5, 9).
        assert_eq!(host.per_process_paths() - before, 9);
        // Asked again (an agent's next cycle), the table is listed and the name filters
        // first: four stats, then only the kube-proxies' links, 5's two and 7's net.
        let before = host.per_process_paths();
        let warm = procs.apart_in_netns("a", net, host_mnt, proxy).unwrap();
        assert_eq!(warm, cold);
        assert_eq!(procs.examined(), 4);
        assert_eq!(host.per_process_paths() - before, 4 + 3);
        let before = host.per_process_paths();
        assert_eq!(
            procs.apart_in_netns("a", net, host_mnt, proxy).unwrap(),
            cold
        );
        assert_eq!(host.per_process_paths(), before, "remembered");
        // Measured from the pod's mount namespace, the host daemon is the one apart; a table
        // listed before a caller's first ask answers it from the listing (no link of 7's
        // mount namespace, in another network, is read).
        let all = procs.apart_in_netns("c", net, pod_mnt, |_| true).unwrap();
        assert_eq!(all.iter().map(|(p, _)| p.pid).collect::<Vec<_>>(), [3]);
    }
}
