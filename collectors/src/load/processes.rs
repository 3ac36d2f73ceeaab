//! Per-process counters between runs, and the culprits they point at: top IO (like
//! `iotop -oPa`: by the time spent waiting for IO, its `IO>` column, and by bytes), top CPU,
//! and tasks in D state. State is keyed by pid and start time and rebuilt from the live pids
//! on every run, so exited pids are dropped at once.
//!
//! **IO wait.** The kernel accounts the IO a process issues in bytes (`/proc/<pid>/io`), but
//! on slow or throttled storage bytes say little: a process writing through the page cache
//! moves many bytes without waiting, while the processes stuck on the slow disk move few and
//! wait all the time. What `iotop`'s `IO>` column ranks by is the time a task spent waiting
//! for block IO, from delay accounting: `/proc/<pid>/stat` field 42 (`delayacct_blkio_ticks`)
//! of the main thread, added up over the threads of a multi-threaded process that did IO in
//! two windows in a row (the kernel does not add them up in the process's own `stat`).
//! Delay accounting is off by default since Linux 5.14 (`kernel.task_delayacct`), and turned
//! on at run time it covers only the tasks forked afterwards; without it, when it shows no
//! delay while tasks sit in D state, and for D-state tasks it does not cover, the IO wait is
//! estimated by sampling:
//! the states of the candidate tasks (in D state, or with IO bytes) are read
//! [`IoWaitPlan::samples`] more times, [`IoWaitPlan::interval`] apart, and each process's
//! share of samples in D is its IO wait. [`IoWaitMethod`] says which was used.

use std::collections::HashMap;
use std::time::Duration;

use super::config::LoadConfig;
use super::observation::{Culprit, IoWaitMethod, Origin};
use crate::host::HostPaths;
use crate::hostfs::{self, entries};
use crate::pods::PodDirectory;
use crate::proc::cgroup::{self, Placement};
use crate::proc::{pid, pid_io};

/// USER_HZ: the unit of `/proc/<pid>/stat` times. Fixed at 100 by the kernel's user ABI on
/// every architecture Kubernetes runs on (x86, arm64, ppc64le, s390x).
const USER_HZ: f64 = 100.0;

/// What the tracker keeps of one process between passes: its counters at the last read of
/// its `stat` (and `io`), and what that read said, for a pass that does not read it again.
#[derive(Debug, Clone)]
struct Prev {
    /// Inode of `<root>/proc/<pid>` when listed (0: not known): procfs gives a new process a
    /// new one, so a reused pid is noticed without reading its files.
    ino: u64,
    starttime: u64,
    cpu_ticks: u64,
    /// When `stat` was last read (host uptime, seconds).
    read_at: f64,
    /// Storage bytes (read, written) at the last read of `/proc/<pid>/io`, and when (uptime).
    io: Option<(u64, u64, f64)>,
    io_denied: bool,
    /// The main thread's block-IO delay (`stat` field 42), clock ticks.
    blkio_ticks: Option<u64>,
    /// New, used CPU since the read before, or running or in D state at the last read: the
    /// next steady pass reads it again ([`ProcessTracker::steady`]).
    active: bool,
    ppid: u32,
    comm: String,
    state: char,
    num_threads: u64,
}

/// One live process in this run, with its deltas since the previous run (when it existed then).
#[derive(Debug, Clone)]
pub struct ProcDelta {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub state: char,
    pub num_threads: u64,
    pub cpu_ticks: Option<u64>,
    /// Seconds over which `cpu_ticks` accrued (since `stat` was last read; 0 when unknown).
    pub cpu_seconds: f64,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Seconds over which `read_bytes`/`write_bytes` accrued (since `io` was last read).
    pub io_seconds: f64,
    /// Block-IO delay over the window, clock ticks: the main thread's, or all threads' once
    /// [`ProcessTracker::sum_threads`] added them up. `None` when unknown.
    pub blkio_ticks: Option<u64>,
}

impl ProcDelta {
    /// Storage bytes read and written over the window (0 when unknown).
    pub fn io_bytes(&self) -> u64 {
        self.read_bytes
            .unwrap_or(0)
            .saturating_add(self.write_bytes.unwrap_or(0))
    }
}

/// How many refused processes [`ProcSample::io_denied_examples`] names.
const MAX_DENIED_EXAMPLES: usize = 3;

/// Everything one pass over `/proc` found.
#[derive(Debug, Default)]
pub struct ProcSample {
    /// Every listed process; those whose `stat` this pass did not read are listed as their
    /// last read found them, without deltas.
    pub procs: Vec<ProcDelta>,
    /// Processes whose `stat` this pass read.
    pub read: usize,
    /// Processes whose `io` file was refused (not root).
    pub io_denied: usize,
    /// The first few of them (pid, comm), so a person can tell which.
    pub io_denied_examples: Vec<(u32, String)>,
    /// `/proc/<pid>/io` files read in this pass.
    pub io_reads: usize,
    /// Why `/proc` could not be listed.
    pub list_error: Option<String>,
}

impl ProcSample {
    /// Puts what `later` read of the processes `tried` in place of their entries: one
    /// that `later` could not read any more has exited and is dropped.
    pub fn replace(&mut self, tried: &[u32], later: ProcSample) {
        let tried: std::collections::HashSet<u32> = tried.iter().copied().collect();
        let mut fresh: HashMap<u32, ProcDelta> =
            later.procs.into_iter().map(|d| (d.pid, d)).collect();
        self.procs.retain_mut(|d| {
            if let Some(n) = fresh.remove(&d.pid) {
                *d = n;
                true
            } else {
                !tried.contains(&d.pid)
            }
        });
        self.procs.extend(fresh.into_values());
        self.io_reads += later.io_reads;
        self.io_denied += later.io_denied;
        for e in later.io_denied_examples {
            if self.io_denied_examples.len() < MAX_DENIED_EXAMPLES {
                self.io_denied_examples.push(e);
            }
        }
    }

    /// The processes whose `stat` this pass read, by their CPU over `elapsed` (percent of
    /// one CPU, added up).
    pub fn cpu_percent(&self, elapsed: f64) -> f64 {
        self.procs.iter().map(|d| cpu_percent(d, elapsed)).sum()
    }
}

/// One pid of a listing of `<root>/proc`, with the inode of its directory (0: not known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    pub pid: u32,
    pub ino: u64,
}

/// Lists `<root>/proc`'s pids with their directories' inodes, sorted by pid (at most
/// [`entries::PROC`]).
pub fn list(host: &HostPaths) -> Result<Vec<Listed>, crate::ReadError> {
    use std::os::unix::fs::DirEntryExt;
    let mut out: Vec<Listed> = hostfs::dir_entries(&host.proc(), entries::PROC)?
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some(Listed { pid, ino: e.ino() })
        })
        .collect();
    out.sort_unstable_by_key(|l| l.pid);
    Ok(out)
}

/// Which processes' `/proc/<pid>/io` a pass reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoReads {
    /// Of a process that is new, used CPU since its last read, or is in D state.
    Changed,
    /// Of every process read (unless refused before): a baseline.
    Always,
    /// None (the onset's survey: `io` only of the candidates).
    Never,
}

/// How the onset pass picks the processes it reads again after the catch-up wait
/// ([`ProcessTracker::onset_candidates`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OnsetLimits {
    /// At most this many per ranking: running (`R`) by lifetime CPU rate, every process by
    /// lifetime CPU rate, by CPU time in all, and (with delay accounting) by block-IO delay
    /// rate.
    pub busiest: usize,
    /// At most this many processes in D state (all of them, in pid order).
    pub blocked: usize,
    /// Delay accounting is on: block-IO delay ranks too.
    pub delayacct: bool,
}

/// Per-pid counters of the previous pass.
///
/// `/proc/<pid>/io` costs as much kernel time as `stat`, so it is read only for a process that
/// is new, used CPU since the previous pass, or is in D state. A process that issues IO runs
/// in the kernel to do it (the accounting happens in its own context when it submits reads,
/// dirties pages or sends direct IO), so a process whose CPU time did not move has, to tick
/// resolution, not issued IO; whatever it did is not lost: its counters are kept from the last
/// read and the difference is attributed, over the time since that read, when it is next read.
#[derive(Debug, Default)]
pub struct ProcessTracker {
    prev: HashMap<u32, Prev>,
    /// (start time, block-IO delay summed over all threads) of the multi-threaded processes
    /// whose threads were added up in the previous pass.
    thread_blkio: HashMap<u32, (u64, u64)>,
}

impl ProcessTracker {
    pub fn len(&self) -> usize {
        self.prev.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prev.is_empty()
    }

    /// Forgets every process (a pass that does not follow the previous run's starts over).
    pub fn clear(&mut self) {
        self.prev = HashMap::new();
        self.thread_blkio = HashMap::new();
    }

    /// Reads every live process once (`now` is the host uptime in seconds); keeps only the
    /// live processes' counters for the next pass.
    pub fn sample(&mut self, host: &HostPaths, now: f64) -> ProcSample {
        match list(host) {
            Ok(listed) => self.pass(host, now, &listed, IoReads::Changed),
            Err(e) => listing_failed(e),
        }
    }

    /// Reads the processes `pids` once, like [`ProcessTracker::sample`] does every process
    /// (the tasks of candidate cgroups); keeps only their counters for the next pass.
    pub fn sample_pids(&mut self, host: &HostPaths, now: f64, pids: &[u32]) -> ProcSample {
        let listed: Vec<Listed> = pids.iter().map(|&pid| Listed { pid, ino: 0 }).collect();
        self.pass(host, now, &listed, IoReads::Changed)
    }

    /// The onset's one pass over every listed process: `stat` only, no `io`, every counter
    /// forgotten first (the deltas of the processes read again after the wait start here).
    pub fn survey(&mut self, host: &HostPaths, now: f64, listed: &[Listed]) -> ProcSample {
        self.clear();
        self.pass(host, now, listed, IoReads::Never)
    }

    /// Reads `pids` again (`stat`, and `io` as `io` says), keeping the other processes'
    /// counters: the deltas of those read are since their last read.
    pub fn reread(&mut self, host: &HostPaths, now: f64, pids: &[u32], io: IoReads) -> ProcSample {
        let mut out = ProcSample::default();
        let mut buf = Vec::with_capacity(4096);
        for &pid in pids {
            let ino = self.prev.get(&pid).map_or(0, |b| b.ino);
            match self.read_pid(host, Listed { pid, ino }, now, io, &mut buf, &mut out) {
                Some(p) => {
                    self.prev.insert(pid, p);
                }
                None => {
                    self.prev.remove(&pid);
                }
            }
        }
        out
    }

    /// The steady pass of a run that follows a pass over every process: reads the `stat`
    /// (and `io`, as [`IoReads::Changed`]) of the processes that are new (a pid not seen, or a
    /// new inode), were active at their last read (used CPU, running, in D state), or whose
    /// turn it is (`round`: one in `every` of the others, by pid, so that none goes unread
    /// for more than `every` runs); lists the others as their last read found them. Returns
    /// the sample and the processes not read (what [`ProcessTracker::reread`] completes
    /// when they may hold a culprit).
    pub fn steady(
        &mut self,
        host: &HostPaths,
        now: f64,
        listed: &[Listed],
        round: u64,
        every: u64,
    ) -> (ProcSample, Vec<u32>) {
        let every = every.max(1);
        let mut out = ProcSample::default();
        out.procs.reserve(listed.len());
        let mut next: HashMap<u32, Prev> = HashMap::with_capacity(listed.len());
        let mut unread = Vec::new();
        let mut buf = Vec::with_capacity(4096);
        for &l in listed {
            let turn = (u64::from(l.pid) + round).is_multiple_of(every);
            match self.prev.get(&l.pid) {
                Some(b) if b.ino == l.ino && !b.active && !turn => {
                    out.procs.push(ProcDelta {
                        pid: l.pid,
                        ppid: b.ppid,
                        comm: b.comm.clone(),
                        state: b.state,
                        num_threads: b.num_threads,
                        cpu_ticks: None,
                        cpu_seconds: 0.0,
                        read_bytes: None,
                        write_bytes: None,
                        io_seconds: 0.0,
                        blkio_ticks: None,
                    });
                    next.insert(l.pid, b.clone());
                    unread.push(l.pid);
                }
                _ => {
                    if let Some(p) =
                        self.read_pid(host, l, now, IoReads::Changed, &mut buf, &mut out)
                    {
                        next.insert(l.pid, p);
                    }
                }
            }
        }
        self.prev = next;
        (out, unread)
    }

    /// Reads every process of `listed` once; keeps only their counters.
    fn pass(&mut self, host: &HostPaths, now: f64, listed: &[Listed], io: IoReads) -> ProcSample {
        let mut out = ProcSample::default();
        let mut next: HashMap<u32, Prev> = HashMap::with_capacity(listed.len());
        out.procs.reserve(listed.len());
        let mut buf = Vec::with_capacity(4096);
        for &l in listed {
            if let Some(p) = self.read_pid(host, l, now, io, &mut buf, &mut out) {
                next.insert(l.pid, p);
            }
        }
        self.prev = next;
        out
    }

    /// Reads one process's `stat` (and `io` as `io` says), adds it to `out` with its deltas
    /// since its last read, and returns what to keep of it; `None` when it vanished.
    fn read_pid(
        &self,
        host: &HostPaths,
        l: Listed,
        now: f64,
        io: IoReads,
        buf: &mut Vec<u8>,
        out: &mut ProcSample,
    ) -> Option<Prev> {
        let p = l.pid;
        // A pid that vanished since the listing is simply absent.
        let st = pid::stat_with(host, p, buf)?;
        out.read += 1;
        let ticks = st.utime.saturating_add(st.stime);
        let before = self.prev.get(&p).filter(|b| b.starttime == st.starttime);
        let ran = before.is_some_and(|b| b.cpu_ticks != ticks);
        let must_read = match (io, before) {
            (IoReads::Never, _) => false,
            (_, None) => true,
            (IoReads::Always, Some(b)) => !b.io_denied,
            (IoReads::Changed, Some(b)) => !b.io_denied && (ran || st.state == 'D'),
        };
        let mut io_denied = before.is_some_and(|b| b.io_denied);
        let mut io_now = before.and_then(|b| b.io);
        let (mut read_bytes, mut write_bytes, mut io_seconds) = (None, None, 0.0);
        if must_read {
            out.io_reads += 1;
            match pid_io::read_with(host, p, buf) {
                Ok(n) => {
                    if let Some((r0, w0, at)) = io_now {
                        read_bytes = Some(n.read_bytes.saturating_sub(r0));
                        write_bytes = Some(n.write_bytes.saturating_sub(w0));
                        io_seconds = now - at;
                    }
                    io_now = Some((n.read_bytes, n.write_bytes, now));
                }
                Err(pid_io::IoReadFailure::Denied) => io_denied = true,
                Err(_) => {}
            }
        }
        if io_denied && io != IoReads::Never {
            out.io_denied += 1;
            if out.io_denied_examples.len() < MAX_DENIED_EXAMPLES {
                out.io_denied_examples.push((p, st.comm.clone()));
            }
        }
        out.procs.push(ProcDelta {
            pid: p,
            ppid: st.ppid,
            comm: st.comm.clone(),
            state: st.state,
            num_threads: st.num_threads,
            cpu_ticks: before.map(|b| ticks.saturating_sub(b.cpu_ticks)),
            cpu_seconds: before.map_or(0.0, |b| now - b.read_at),
            read_bytes,
            write_bytes,
            io_seconds,
            blkio_ticks: match (before.and_then(|b| b.blkio_ticks), st.blkio_ticks) {
                (Some(b), Some(n)) => Some(n.saturating_sub(b)),
                _ => None,
            },
        });
        Some(Prev {
            ino: l.ino,
            starttime: st.starttime,
            cpu_ticks: ticks,
            read_at: now,
            io: io_now,
            io_denied,
            blkio_ticks: st.blkio_ticks,
            // New to a pass that has counters of the others (not to the onset's survey,
            // where every process is new and only its state says it is busy).
            active: (before.is_none() && io != IoReads::Never)
                || ran
                || matches!(st.state, 'R' | 'D'),
            ppid: st.ppid,
            comm: st.comm,
            state: st.state,
            num_threads: st.num_threads,
        })
    }

    /// The processes of the onset's survey worth reading again after the catch-up wait, in
    /// pid order: every process in D state (at most `blocked`), and the `busiest` first of
    /// each ranking: running processes by CPU time per second of life, every process by the
    /// same and by CPU time in all, and with delay accounting by block-IO delay per second of
    /// life. The survey read each process once, so "recent" is what its state says (a
    /// process that burns a CPU is running whenever it is looked at) and "busy" what it
    /// accumulated; `now` is the host uptime.
    pub fn onset_candidates(&self, survey: &ProcSample, now: f64, lim: OnsetLimits) -> Vec<u32> {
        struct Rank {
            pid: u32,
            state: char,
            ticks: u64,
            rate: f64,
            blkio_rate: f64,
        }
        let ranks: Vec<Rank> = survey
            .procs
            .iter()
            .filter_map(|d| {
                let b = self.prev.get(&d.pid)?;
                let age = (now - b.starttime as f64 / USER_HZ).max(1.0);
                Some(Rank {
                    pid: d.pid,
                    state: d.state,
                    ticks: b.cpu_ticks,
                    rate: b.cpu_ticks as f64 / age,
                    blkio_rate: b.blkio_ticks.unwrap_or(0) as f64 / age,
                })
            })
            .collect();
        let mut picked: Vec<u32> = ranks
            .iter()
            .filter(|r| r.state == 'D')
            .take(lim.blocked)
            .map(|r| r.pid)
            .collect();
        let mut take = |mut v: Vec<&Rank>, key: &dyn Fn(&Rank) -> f64| {
            v.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid)));
            picked.extend(v.iter().take(lim.busiest).map(|r| r.pid));
        };
        take(ranks.iter().filter(|r| r.state == 'R').collect(), &|r| {
            r.rate
        });
        take(ranks.iter().filter(|r| r.ticks > 0).collect(), &|r| r.rate);
        take(ranks.iter().filter(|r| r.ticks > 0).collect(), &|r| {
            r.ticks as f64
        });
        if lim.delayacct {
            take(
                ranks.iter().filter(|r| r.blkio_rate > 0.0).collect(),
                &|r| r.blkio_rate,
            );
        }
        picked.sort_unstable();
        picked.dedup();
        picked
    }
    /// Adds up the block-IO delay over all threads of the multi-threaded processes that did
    /// IO in this window (bytes, delay of the main thread, or D state), reading at most
    /// `budget` thread `stat` files. A process gets the sum of its threads from its second
    /// such window in a row (the first is the baseline; until then its main thread's delay
    /// stands). Threads that exited between two windows take their delay with them.
    pub fn sum_threads(&mut self, host: &HostPaths, sample: &mut ProcSample, budget: usize) {
        let mut left = budget;
        let mut next: HashMap<u32, (u64, u64)> = HashMap::new();
        for d in sample.procs.iter_mut() {
            let active = d.io_bytes() > 0 || d.blkio_ticks.unwrap_or(0) > 0 || d.state == 'D';
            if d.num_threads <= 1 || !active || left == 0 {
                continue;
            }
            let Some(starttime) = self.prev.get(&d.pid).map(|p| p.starttime) else {
                continue;
            };
            let mut sum = 0u64;
            let mut complete = true;
            for tid in pid::list_tasks(host, d.pid) {
                if left == 0 {
                    complete = false;
                    break;
                }
                left -= 1;
                if let Some(ts) = pid::task_stat(host, d.pid, tid) {
                    sum = sum.saturating_add(ts.blkio_ticks.unwrap_or(0));
                }
            }
            if !complete {
                continue;
            }
            if let Some((st, before)) = self.thread_blkio.get(&d.pid) {
                if *st == starttime {
                    d.blkio_ticks = Some(sum.saturating_sub(*before));
                }
            }
            next.insert(d.pid, (starttime, sum));
        }
        self.thread_blkio = next;
    }
}

/// How to measure IO wait in one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoWaitPlan {
    /// Delay accounting is on (`kernel.task_delayacct`).
    pub delayacct: bool,
    /// Extra reads of the candidates' states when sampling D states.
    pub samples: u32,
    /// Time between them.
    pub interval: Duration,
    /// At most this many candidate processes are sampled.
    pub max_candidates: usize,
}

/// The culprits of one window.
#[derive(Debug, Default)]
pub struct Culprits {
    /// The top processes by IO wait and the top by bytes (each list `top_processes` long,
    /// merged): the judge decides which are material and in which order they are named.
    pub top_io: Vec<Culprit>,
    pub top_cpu: Vec<Culprit>,
    pub blocked: Vec<Culprit>,
    pub io_wait_method: IoWaitMethod,
    /// Totals over every process of the window: IO wait (percent of the window, or of D-state
    /// samples), storage bytes per second, CPU percent of one CPU.
    pub total_io_wait_percent: f64,
    pub total_io_bytes_per_second: f64,
    pub total_cpu_percent: f64,
}

/// Picks the top IO and CPU processes and the D-state tasks, measures IO wait as `plan`
/// says, and finds where each named process runs.
pub fn culprits(
    host: &HostPaths,
    sample: &ProcSample,
    elapsed: f64,
    config: &LoadConfig,
    pods: &PodDirectory,
    procs_blocked: u64,
    plan: &IoWaitPlan,
) -> Culprits {
    let n = config.top_processes;
    let blocked_tasks = blocked_tasks(host, sample, config.max_blocked_tasks, procs_blocked);
    let (method, io_wait) = io_wait(host, sample, elapsed, plan, &blocked_tasks, procs_blocked);
    let by_wait = top_by_io(sample, &io_wait, n);
    let by_cpu = top_by_cpu(sample, n);

    let mut namer = Namer {
        host,
        pods,
        elapsed,
        io_wait: &io_wait,
        origins: HashMap::new(),
    };
    let top_io = by_wait
        .iter()
        .map(|d| namer.culprit(d, None, d.state, None))
        .collect();
    let top_cpu = by_cpu
        .iter()
        .map(|d| namer.culprit(d, None, d.state, None))
        .collect();
    let blocked = blocked_tasks
        .into_iter()
        .map(|(d, tid, comm)| {
            let w = match tid {
                Some(t) => pid::task_wchan(host, d.pid, t),
                None => pid::wchan(host, d.pid),
            };
            let mut c = namer.culprit(d, tid, 'D', w);
            c.comm = comm;
            c
        })
        .collect();
    Culprits {
        top_io,
        top_cpu,
        blocked,
        io_wait_method: method,
        total_io_wait_percent: io_wait.values().sum(),
        total_io_bytes_per_second: sample
            .procs
            .iter()
            .map(|d| d.io_bytes() as f64 / io_span(d, elapsed))
            .sum(),
        total_cpu_percent: sample.procs.iter().map(|d| cpu_percent(d, elapsed)).sum(),
    }
}

/// A task in D state: its process, its thread (`None` for the main thread), and its name.
type BlockedTask<'a> = (&'a ProcDelta, Option<u32>, String);

/// D-state tasks: main threads from the pass over /proc; other threads only when the
/// kernel counts more blocked tasks than that found, with a cap on threads read.
fn blocked_tasks<'a>(
    host: &HostPaths,
    sample: &'a ProcSample,
    max: usize,
    procs_blocked: u64,
) -> Vec<BlockedTask<'a>> {
    let mut blocked_tasks: Vec<BlockedTask<'a>> = Vec::new();
    for d in sample.procs.iter().filter(|d| d.state == 'D').take(max) {
        blocked_tasks.push((d, None, d.comm.clone()));
    }
    if (blocked_tasks.len() as u64) < procs_blocked && blocked_tasks.len() < max {
        let mut budget = max.saturating_mul(16);
        'outer: for d in sample.procs.iter().filter(|d| d.num_threads > 1) {
            for tid in pid::list_tasks(host, d.pid) {
                if budget == 0 || blocked_tasks.len() >= max {
                    break 'outer;
                }
                budget -= 1;
                if tid == d.pid {
                    continue;
                }
                if let Some(ts) = pid::task_stat(host, d.pid, tid) {
                    if ts.state == 'D' {
                        blocked_tasks.push((d, Some(tid), ts.comm));
                    }
                }
            }
        }
    }
    blocked_tasks
}

/// IO wait per pid, as a percentage (of the window, or of the samples), and how it was
/// measured.
fn io_wait(
    host: &HostPaths,
    sample: &ProcSample,
    elapsed: f64,
    plan: &IoWaitPlan,
    blocked_tasks: &[BlockedTask],
    procs_blocked: u64,
) -> (IoWaitMethod, HashMap<u32, f64>) {
    let total_blkio: u64 = sample
        .procs
        .iter()
        .map(|d| d.blkio_ticks.unwrap_or(0))
        .sum();
    let someone_waited = !blocked_tasks.is_empty() || procs_blocked > 0;
    if plan.delayacct && total_blkio > 0 {
        io_wait_from_delayacct(host, sample, elapsed, plan, blocked_tasks)
    } else if someone_waited {
        let mut candidates: Vec<(u32, Option<u32>)> = Vec::new();
        for (d, tid, _) in blocked_tasks {
            candidates.push((d.pid, *tid));
        }
        let mut by_bytes: Vec<&ProcDelta> =
            sample.procs.iter().filter(|d| d.io_bytes() > 0).collect();
        by_bytes.sort_by(|a, b| b.io_bytes().cmp(&a.io_bytes()).then(a.pid.cmp(&b.pid)));
        for d in by_bytes {
            if !candidates.iter().any(|(p, t)| *p == d.pid && t.is_none()) {
                candidates.push((d.pid, None));
            }
        }
        candidates.truncate(plan.max_candidates);
        (
            IoWaitMethod::DStateSampling,
            sampled_io_wait(host, plan, &candidates),
        )
    } else {
        (IoWaitMethod::BytesOnly, HashMap::new())
    }
}

/// IO wait from delay accounting, with the D-state tasks it does not cover sampled.
fn io_wait_from_delayacct(
    host: &HostPaths,
    sample: &ProcSample,
    elapsed: f64,
    plan: &IoWaitPlan,
    blocked_tasks: &[BlockedTask],
) -> (IoWaitMethod, HashMap<u32, f64>) {
    let mut per: HashMap<u32, f64> = sample
        .procs
        .iter()
        .filter_map(|d| {
            let t = d.blkio_ticks.filter(|t| *t > 0)?;
            Some((d.pid, t as f64 / USER_HZ / elapsed * 100.0))
        })
        .collect();
    // A task the kernel does not account (forked before kernel.task_delayacct was turned
    // on: the kernel gives delay accounting only to tasks created while it is on) shows no
    // delay while it sits in D state: sampled like without delay accounting.
    let mut unaccounted: Vec<(u32, Option<u32>)> = blocked_tasks
        .iter()
        .filter(|(d, _, _)| !per.contains_key(&d.pid))
        .map(|(d, tid, _)| (d.pid, *tid))
        .collect();
    unaccounted.truncate(plan.max_candidates);
    if unaccounted.is_empty() {
        (IoWaitMethod::DelayAcct, per)
    } else {
        per.extend(sampled_io_wait(host, plan, &unaccounted));
        (IoWaitMethod::DelayAcctAndSampling, per)
    }
}

/// IO wait of `tasks` by sampling their states: per pid, the percentage of observations in D.
fn sampled_io_wait(
    host: &HostPaths,
    plan: &IoWaitPlan,
    tasks: &[(u32, Option<u32>)],
) -> HashMap<u32, f64> {
    let observations = f64::from(plan.samples) + 1.0;
    sample_d_states(host, tasks, plan.samples, plan.interval)
        .into_iter()
        .map(|(pid, count)| (pid, f64::from(count) * 100.0 / observations))
        .collect()
}

/// A process's IO wait in `io_wait` (0 when it has none).
fn wait_of(io_wait: &HashMap<u32, f64>, d: &ProcDelta) -> f64 {
    io_wait.get(&d.pid).copied().unwrap_or(0.0)
}

/// Candidates for top IO: the top n by IO wait and the top n by bytes.
fn top_by_io<'a>(
    sample: &'a ProcSample,
    io_wait: &HashMap<u32, f64>,
    n: usize,
) -> Vec<&'a ProcDelta> {
    let wait_of = |d: &ProcDelta| wait_of(io_wait, d);
    let mut by_wait: Vec<&ProcDelta> = sample.procs.iter().filter(|d| wait_of(d) > 0.0).collect();
    by_wait.sort_by(|a, b| {
        wait_of(b)
            .total_cmp(&wait_of(a))
            .then(b.io_bytes().cmp(&a.io_bytes()))
            .then(a.pid.cmp(&b.pid))
    });
    by_wait.truncate(n);
    let mut by_io: Vec<&ProcDelta> = sample.procs.iter().filter(|d| d.io_bytes() > 0).collect();
    by_io.sort_by(|a, b| b.io_bytes().cmp(&a.io_bytes()).then(a.pid.cmp(&b.pid)));
    by_io.truncate(n);
    for d in by_io {
        if !by_wait.iter().any(|w| w.pid == d.pid) {
            by_wait.push(d);
        }
    }
    by_wait
}

/// The top n processes by CPU time in the window.
fn top_by_cpu(sample: &ProcSample, n: usize) -> Vec<&ProcDelta> {
    let mut by_cpu: Vec<&ProcDelta> = sample
        .procs
        .iter()
        .filter(|d| d.cpu_ticks.unwrap_or(0) > 0)
        .collect();
    by_cpu.sort_by(|a, b| b.cpu_ticks.cmp(&a.cpu_ticks).then(a.pid.cmp(&b.pid)));
    by_cpu.truncate(n);
    by_cpu
}

/// A process's CPU use over the window, percent of one CPU: over the time since its `stat`
/// was last read when that is longer than the window (a process a steady pass did not read
/// for a few runs).
fn cpu_percent(d: &ProcDelta, elapsed: f64) -> f64 {
    let span = if d.cpu_seconds > elapsed {
        d.cpu_seconds
    } else {
        elapsed
    };
    d.cpu_ticks.unwrap_or(0) as f64 / USER_HZ / span * 100.0
}

/// A pass that could not list `/proc`.
pub(super) fn listing_failed(e: crate::ReadError) -> ProcSample {
    ProcSample {
        list_error: Some(e.to_string()),
        ..ProcSample::default()
    }
}

/// Makes the culprits of one window, finding each process's origin once.
struct Namer<'a> {
    host: &'a HostPaths,
    pods: &'a PodDirectory,
    elapsed: f64,
    io_wait: &'a HashMap<u32, f64>,
    origins: HashMap<u32, Origin>,
}

impl Namer<'_> {
    fn culprit(
        &mut self,
        d: &ProcDelta,
        tid: Option<u32>,
        state: char,
        wchan: Option<String>,
    ) -> Culprit {
        let (host, pods) = (self.host, self.pods);
        let origin = self
            .origins
            .entry(d.pid)
            .or_insert_with(|| origin_of(host, d, pods))
            .clone();
        Culprit {
            pid: d.pid,
            tid,
            comm: d.comm.clone(),
            state,
            cpu_percent: cpu_percent(d, self.elapsed),
            read_bytes_per_second: d.read_bytes.unwrap_or(0) as f64 / io_span(d, self.elapsed),
            write_bytes_per_second: d.write_bytes.unwrap_or(0) as f64 / io_span(d, self.elapsed),
            io_wait_percent: wait_of(self.io_wait, d),
            wchan,
            origin,
        }
    }
}

/// Reads the states of `tasks` (pid, thread) `samples + 1` times, `interval` apart, and
/// counts per pid the observations in D state (a process's tasks add up, as iotop -P adds
/// up threads). Tasks that vanish count as not in D.
fn sample_d_states(
    host: &HostPaths,
    tasks: &[(u32, Option<u32>)],
    samples: u32,
    interval: Duration,
) -> HashMap<u32, u32> {
    let mut counts: HashMap<u32, u32> = HashMap::new();
    let mut buf = Vec::with_capacity(1024);
    let state = |buf: &mut Vec<u8>, pid: u32, tid: Option<u32>| -> Option<char> {
        match tid {
            Some(t) => pid::task_stat(host, pid, t).map(|s| s.state),
            None => pid::stat_with(host, pid, buf).map(|s| s.state),
        }
    };
    for round in 0..=samples {
        if round > 0 && !interval.is_zero() {
            std::thread::sleep(interval);
        }
        for (pid, tid) in tasks {
            if state(&mut buf, *pid, *tid) == Some('D') {
                *counts.entry(*pid).or_default() += 1;
            }
        }
    }
    counts
}

/// The span IO deltas accrued over: since the last read of the process's `io` file, and never
/// shorter than the window.
fn io_span(d: &ProcDelta, elapsed: f64) -> f64 {
    if d.io_seconds > elapsed {
        d.io_seconds
    } else {
        elapsed
    }
}

fn origin_of(host: &HostPaths, d: &ProcDelta, pods: &PodDirectory) -> Origin {
    // Kernel threads are children of kthreadd (pid 2), or kthreadd itself.
    if d.pid == 2 || (d.ppid == 2 && d.pid != 1) {
        return Origin::Kernel;
    }
    match cgroup::read(host, d.pid) {
        Some(Placement::Pod(p)) => {
            let names = pods.names(Some(&p.uid), p.container_id.as_deref());
            Origin::Pod {
                namespace: names.namespace,
                name: names.name,
                uid: p.uid,
                qos: p.qos,
                container_id: p.container_id,
                container: names.container,
            }
        }
        Some(Placement::Host { cgroup }) => Origin::Host {
            infrastructure: crate::names::is_node_infrastructure(&d.comm),
            cgroup,
        },
        None => Origin::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &std::path::Path, pid: u32, ticks: u64, state: char, write_bytes: u64) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            // The 44 fields of a 3.x+ kernel (procfs-core needs at least the first 37).
            format!("{pid} (w) {state} 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 77 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("io"),
            format!("rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: {write_bytes}\ncancelled_write_bytes: 0\n"),
        )
        .unwrap();
    }

    #[test]
    fn io_is_read_only_for_processes_that_ran_and_attributed_over_the_span() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        let mut tr = ProcessTracker::default();
        write(t.path(), 10, 100, 'S', 1000);
        write(t.path(), 11, 100, 'S', 0);
        let s = tr.sample(&h, 100.0);
        assert_eq!(s.io_reads, 2, "new processes get a baseline");
        // pid 10 did not run: its io file is not read (and a change there is not seen yet).
        write(t.path(), 10, 100, 'S', 5000);
        write(t.path(), 11, 100, 'D', 0);
        let s = tr.sample(&h, 110.0);
        assert_eq!(s.io_reads, 1, "only the D-state task is re-read");
        let p10 = s.procs.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(p10.write_bytes, None);
        // It runs again: the 4000 bytes are attributed over the 20 s since the baseline.
        write(t.path(), 10, 105, 'S', 5000);
        let s = tr.sample(&h, 120.0);
        let p10 = s.procs.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(
            (p10.write_bytes, p10.io_seconds, p10.cpu_ticks),
            (Some(4000), 20.0, Some(5))
        );
        assert_eq!(io_span(p10, 10.0), 20.0);
        let pods = PodDirectory::new(h.clone(), Default::default());
        let plan = IoWaitPlan {
            delayacct: false,
            samples: 0,
            interval: Duration::ZERO,
            max_candidates: 8,
        };
        let c = culprits(&h, &s, 10.0, &LoadConfig::default(), &pods, 0, &plan);
        // pid 11 sits in D state: without delay accounting, sampled (1 of 1 observations in
        // D) and named first; pid 10 after it, by its bytes.
        assert_eq!(c.io_wait_method, IoWaitMethod::DStateSampling);
        assert_eq!(c.top_io.len(), 2);
        assert_eq!((c.top_io[0].pid, c.top_io[0].io_wait_percent), (11, 100.0));
        assert_eq!((c.top_io[1].pid, c.top_io[1].io_wait_percent), (10, 0.0));
        assert_eq!(
            c.top_io[1].write_bytes_per_second, 200.0,
            "4000 bytes over 20 s, not 10"
        );
        assert_eq!(c.top_io[1].cpu_percent, 0.5, "5 ticks (50 ms) over 10 s");
        // Exited pids are dropped.
        std::fs::remove_dir_all(t.path().join("proc/11")).unwrap();
        tr.sample(&h, 130.0);
        assert_eq!(tr.len(), 1);
    }

    /// A `stat` line with `threads` threads and the main thread's block-IO delay `blkio`.
    fn stat_line(pid: u32, state: char, ticks: u64, threads: u64, blkio: u64) -> String {
        format!("{pid} (db) {state} 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 {threads} 0 77 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 {blkio} 0 0\n")
    }

    #[test]
    fn threads_io_wait_adds_up_from_the_second_window() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        let d = t.path().join("proc/20");
        std::fs::create_dir_all(d.join("task/20")).unwrap();
        std::fs::create_dir_all(d.join("task/21")).unwrap();
        let stage = |ticks: u64, main: u64, worker: u64, io: u64| {
            std::fs::write(d.join("stat"), stat_line(20, 'S', ticks, 2, main)).unwrap();
            std::fs::write(d.join("task/20/stat"), stat_line(20, 'S', ticks, 2, main)).unwrap();
            std::fs::write(d.join("task/21/stat"), stat_line(21, 'D', 0, 2, worker)).unwrap();
            std::fs::write(
                d.join("io"),
                format!("rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: {io}\ncancelled_write_bytes: 0\n"),
            )
            .unwrap();
        };
        let mut tr = ProcessTracker::default();
        stage(10, 5, 100, 0);
        let mut s = tr.sample(&h, 100.0);
        tr.sum_threads(&h, &mut s, 64);
        assert_eq!(s.procs[0].blkio_ticks, None, "no previous pass");
        // Second window: the main thread waited 1 tick, the worker 800; the threads are read
        // for the first time (baseline), so only the main thread's delay is known.
        stage(11, 6, 900, 4096);
        let mut s = tr.sample(&h, 110.0);
        tr.sum_threads(&h, &mut s, 64);
        assert_eq!(s.procs[0].blkio_ticks, Some(1));
        // Third window: 2 + 900 ticks over all threads.
        stage(12, 8, 1800, 8192);
        let mut s = tr.sample(&h, 120.0);
        tr.sum_threads(&h, &mut s, 64);
        assert_eq!(s.procs[0].blkio_ticks, Some(902));
        // A budget too small to read every thread: the main thread's delay stands.
        stage(13, 9, 2700, 12288);
        let mut s = tr.sample(&h, 130.0);
        tr.sum_threads(&h, &mut s, 1);
        assert_eq!(s.procs[0].blkio_ticks, Some(1));
        // Culprits with delay accounting: 902 ticks over 10 s is 90.2% of the window.
        stage(14, 10, 3600, 16384);
        let mut s = tr.sample(&h, 140.0);
        tr.sum_threads(&h, &mut s, 64);
        assert_eq!(
            s.procs[0].blkio_ticks,
            Some(1),
            "the skipped window left no baseline for the threads: the main thread's stands"
        );
        stage(15, 12, 4500, 20480);
        let mut s = tr.sample(&h, 150.0);
        tr.sum_threads(&h, &mut s, 64);
        let pods = PodDirectory::new(h.clone(), Default::default());
        let plan = IoWaitPlan {
            delayacct: true,
            samples: 0,
            interval: Duration::ZERO,
            max_candidates: 8,
        };
        let c = culprits(&h, &s, 10.0, &LoadConfig::default(), &pods, 1, &plan);
        assert_eq!(c.io_wait_method, IoWaitMethod::DelayAcct);
        assert_eq!(c.top_io.len(), 1);
        assert!((c.top_io[0].io_wait_percent - 90.2).abs() < 1e-9);
        assert!((c.total_io_wait_percent - 90.2).abs() < 1e-9);
    }

    /// A `stat` line with a start time (clock ticks after boot) and the block-IO delay.
    fn stat_at(pid: u32, state: char, ticks: u64, start: u64, blkio: u64) -> String {
        format!("{pid} (p) {state} 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 {start} 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 {blkio} 0 0\n")
    }

    fn stage(root: &std::path::Path, pid: u32, stat: String) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("stat"), stat).unwrap();
        std::fs::write(
            d.join("io"),
            "rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n",
        )
        .unwrap();
    }

    #[test]
    fn the_onset_candidates_are_the_blocked_the_running_and_the_busiest() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        // Uptime 1000 s. 40 sleepers started at boot with 1..40 ticks; a sleeper with a lot
        // of CPU time in all over a long life (200); one young and busy for its age (300,
        // started 10 s ago); one running (400) with little time yet; one in D state (500);
        // one whose main thread waited for IO (600).
        for i in 0..40 {
            stage(
                t.path(),
                100 + i,
                stat_at(100 + i, 'S', u64::from(i) + 1, 0, 0),
            );
        }
        stage(t.path(), 200, stat_at(200, 'S', 50_000, 0, 0));
        stage(t.path(), 300, stat_at(300, 'S', 900, 99_000, 0));
        stage(t.path(), 400, stat_at(400, 'R', 1, 99_900, 0));
        stage(t.path(), 500, stat_at(500, 'D', 0, 0, 0));
        stage(t.path(), 600, stat_at(600, 'S', 0, 50_000, 2000));
        let mut tr = ProcessTracker::default();
        let listed = list(&h).unwrap();
        let before = h.per_process_paths();
        let survey = tr.survey(&h, 1000.0, &listed);
        assert_eq!(survey.read, 45);
        assert_eq!(survey.io_reads, 0, "the survey reads no io");
        assert_eq!(h.per_process_paths() - before, 45, "one stat of each");
        assert!(survey.procs.iter().all(|d| d.cpu_ticks.is_none()));
        let lim = OnsetLimits {
            busiest: 2,
            blocked: 8,
            delayacct: false,
        };
        // D: 500; running: 400; by rate: 300 (90 ticks/s), 200 (50); in all: 200, 300.
        assert_eq!(
            tr.onset_candidates(&survey, 1000.0, lim),
            vec![200, 300, 400, 500]
        );
        let lim = OnsetLimits {
            delayacct: true,
            ..lim
        };
        assert_eq!(
            tr.onset_candidates(&survey, 1000.0, lim),
            vec![200, 300, 400, 500, 600]
        );
        let lim = OnsetLimits {
            busiest: 0,
            blocked: 0,
            delayacct: true,
        };
        assert!(tr.onset_candidates(&survey, 1000.0, lim).is_empty());
        // Read again: deltas since the survey, io for the candidates only.
        let cands = [300, 500];
        let base = tr.reread(&h, 1000.0, &cands, IoReads::Always);
        assert_eq!((base.read, base.io_reads), (2, 2));
        stage(t.path(), 300, stat_at(300, 'S', 950, 99_000, 0));
        let later = tr.reread(&h, 1000.25, &cands, IoReads::Changed);
        let d300 = later.procs.iter().find(|d| d.pid == 300).unwrap();
        assert_eq!((d300.cpu_ticks, d300.cpu_seconds), (Some(50), 0.25));
        assert_eq!(later.io_reads, 2, "300 ran, 500 is in D state");
        let mut merged = survey;
        merged.replace(&cands, later);
        assert_eq!(merged.procs.len(), 45);
        assert_eq!(
            merged
                .procs
                .iter()
                .filter(|d| d.cpu_ticks.is_some())
                .count(),
            2
        );
        assert_eq!(tr.len(), 45, "every process's counters are kept");
    }

    #[test]
    fn a_steady_pass_reads_the_new_the_active_and_those_whose_turn_it_is() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        for pid in 10..30 {
            stage(t.path(), pid, stat_at(pid, 'S', 5, 0, 0));
        }
        stage(t.path(), 40, stat_at(40, 'R', 100, 0, 0));
        let mut tr = ProcessTracker::default();
        let listed = list(&h).unwrap();
        tr.survey(&h, 100.0, &listed);
        // Nobody ran; 40 was running: read, with one in four of the others (10, 14, ...:
        // (pid + 2) % 4 == 0 for round 2).
        let (s, unread) = tr.steady(&h, 110.0, &listed, 2, 4);
        let mut read: Vec<u32> = s
            .procs
            .iter()
            .filter(|d| d.cpu_ticks.is_some())
            .map(|d| d.pid)
            .collect();
        read.sort_unstable();
        assert_eq!(read, vec![10, 14, 18, 22, 26, 40]);
        assert_eq!(s.read, 6);
        assert_eq!(s.procs.len(), 21, "the others are listed as they were");
        assert_eq!(unread.len(), 15);
        assert!(s
            .procs
            .iter()
            .filter(|d| unread.contains(&d.pid))
            .all(|d| d.state == 'S' && d.comm == "p" && d.cpu_ticks.is_none()));
        // 11 wakes up and burns; 40 sleeps now; 50 is new. Round 3: (pid + 3) % 4 == 0.
        stage(t.path(), 11, stat_at(11, 'R', 1005, 0, 0));
        stage(t.path(), 40, stat_at(40, 'S', 100, 0, 0));
        stage(t.path(), 50, stat_at(50, 'S', 0, 0, 0));
        let listed = list(&h).unwrap();
        let (s, unread) = tr.steady(&h, 120.0, &listed, 3, 4);
        let d11 = s.procs.iter().find(|d| d.pid == 11).unwrap();
        assert_eq!(
            d11.cpu_ticks, None,
            "not active at its last read, not its turn"
        );
        let read: Vec<u32> = s
            .procs
            .iter()
            .filter(|d| d.cpu_ticks.is_some() || d.pid == 50)
            .map(|d| d.pid)
            .collect();
        assert_eq!(read, vec![13, 17, 21, 25, 29, 40, 50]);
        assert_eq!(s.cpu_percent(10.0), 0.0);
        // Completed: 11's ticks over the 20 s since the survey read it.
        let mut s = s;
        let rest = tr.reread(&h, 120.0, &unread, IoReads::Changed);
        s.replace(&unread, rest);
        let d11 = s.procs.iter().find(|d| d.pid == 11).unwrap();
        assert_eq!((d11.cpu_ticks, d11.cpu_seconds), (Some(1000), 20.0));
        assert_eq!(
            cpu_percent(d11, 10.0),
            50.0,
            "over its own 20 s, not the window"
        );
        // A reused pid (a new directory: a new inode, as procfs gives a new process) is read
        // though idle before. (Made beside the old one so that the inode is another.)
        stage(t.path(), 9999, stat_at(12, 'S', 0, 99_000, 0));
        std::fs::remove_dir_all(t.path().join("proc/12")).unwrap();
        std::fs::rename(t.path().join("proc/9999"), t.path().join("proc/12")).unwrap();
        let listed = list(&h).unwrap();
        let (s, _) = tr.steady(&h, 130.0, &listed, 3, 4);
        let d12 = s.procs.iter().find(|d| d.pid == 12).unwrap();
        assert_eq!(d12.cpu_ticks, None, "a new process: no delta");
        assert!(s.read >= 1 && s.io_reads >= 1, "its stat and io were read");
        assert_eq!(tr.len(), 22);
    }
}
