//! What the xtables lock sampler observes: a [`Tracker`] keeps, per (holder pid, lock file),
//! how long each hold of the lock persists and how many processes queue behind it, from
//! `/proc/locks` reads; `collect` drains its [`Window`] of observations. [`sample_once`] is one
//! read. Who reads when is the sampler's ([`super::sampler`]) and the watch's
//! ([`super::lockwatch`]); both use this module, neither each other's internals.
//!
//! All state is bounded: holds and waiters are keyed by what `/proc/locks` shows right now,
//! and entries that disappear are removed on the next read.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::host::HostPaths;
use crate::pods::PodDirectory;
use crate::proc::cgroup::{self, Placement};
use crate::proc::locks::{self, LockEntry};
use crate::proc::pid;

/// At most this many finished holds are kept per window (the longest ones).
const MAX_FINISHED: usize = 16;
/// At most this many holders or waiters are tracked at once (a garbage `/proc/locks` cannot
/// grow the state without bound).
const MAX_TRACKED: usize = 256;
/// Bytes of cmdline kept per process.
const CMDLINE_BYTES: usize = 200;

/// The identity of the lock file as `/proc/locks` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockId {
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

impl LockId {
    /// The `maj:min:inode` text `/proc/locks` uses for this file.
    pub fn proc_locks_key(&self) -> String {
        format!("{:02x}:{:02x}:{}", self.major, self.minor, self.inode)
    }

    /// Stats a file (following symlinks) and returns its identity.
    pub fn of_path(path: &std::path::Path) -> std::io::Result<LockId> {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(path)?;
        let (major, minor) = locks::dev_major_minor(md.dev());
        Ok(LockId {
            major,
            minor,
            inode: md.ino(),
        })
    }
}

/// Who a process is: enough to name it in a finding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcInfo {
    /// `None` when `/proc/locks` gave no pid (OFD locks, a holder in another pid namespace).
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// First 200 bytes of the command line.
    pub cmdline: Option<String>,
    /// The pod UID and container id, when the process runs in a Kubernetes pod.
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    /// The cgroup path of a host process (`/system.slice/kube-router.service`).
    pub host_cgroup: Option<String>,
    /// The pod's namespace and name and the container's name, from the node's pod metadata
    /// ([`crate::pods`]); filled by the collector with [`ProcInfo::name_pod`].
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub container_name: Option<String>,
}

impl ProcInfo {
    /// Reads comm, cmdline and cgroup placement of `pid` (missing pieces stay `None`).
    pub fn read(host: &HostPaths, pid: Option<u32>) -> ProcInfo {
        let Some(p) = pid else {
            return ProcInfo::default();
        };
        let mut info = ProcInfo {
            pid: Some(p),
            comm: pid::comm(host, p),
            cmdline: pid::cmdline(host, p, CMDLINE_BYTES),
            ..ProcInfo::default()
        };
        match cgroup::read(host, p) {
            Some(Placement::Pod(pod)) => {
                info.pod_uid = Some(pod.uid);
                info.container_id = pod.container_id;
            }
            Some(Placement::Host { cgroup }) => info.host_cgroup = Some(cgroup),
            None => {}
        }
        info
    }

    /// Names the pod (by its UID) and the container (by its id) of a process placed in a
    /// pod, from the node's pod metadata.
    pub fn name_pod(&mut self, pods: &PodDirectory) {
        let names = pods.names(self.pod_uid.as_deref(), self.container_id.as_deref());
        self.pod_namespace = names.namespace;
        self.pod_name = names.name;
        self.container_name = names.container;
    }

    /// Whether the process runs in a pod (its cgroup names a pod UID or a container).
    pub fn in_pod(&self) -> bool {
        self.pod_uid.is_some() || self.container_id.is_some()
    }

    /// `kube-router[4242]`, `pid 4242`, or `unknown process`.
    pub fn label(&self) -> String {
        match (&self.comm, self.pid) {
            (Some(c), Some(p)) => format!("{c}[{p}]"),
            (None, Some(p)) => format!("pid {p}"),
            _ => "a process in another pid namespace or an OFD lock".to_string(),
        }
    }
}

/// One holder of the lock, seen on consecutive samples.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldObs {
    pub holder: ProcInfo,
    /// `FLOCK`, `POSIX`, `OFDLCK`...
    pub class: String,
    /// `READ` or `WRITE`.
    pub access: String,
    /// Time between the first and the last sample that showed this hold: a lower bound of the
    /// hold time (the true hold is at most two sample periods longer).
    pub held_for: Duration,
    /// True when the last sample still showed it.
    pub ongoing: bool,
}

/// One process blocked waiting for the lock.
#[derive(Debug, Clone, PartialEq)]
pub struct WaiterObs {
    pub waiter: ProcInfo,
    pub waited_for: Duration,
}

/// What the sampler saw since the previous `collect`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    /// Number of successful samples of `/proc/locks` in the window.
    pub samples: u64,
    /// How long the window lasted.
    pub length: Duration,
    /// The lock file's identity at the last sample (`None`: the file does not exist).
    pub lock: Option<LockId>,
    /// The reason the last sample failed, if it did (unreadable `/proc/locks`, missing lock).
    pub error: Option<String>,
    /// Holds the last sample still showed.
    pub current_holds: Vec<HoldObs>,
    /// Holds that ended during the window (the longest few).
    pub finished_holds: Vec<HoldObs>,
    /// Waiters the last sample showed.
    pub current_waiters: Vec<WaiterObs>,
    /// Waiters that were seen during the window but are gone now (the longest few).
    pub finished_waiters: Vec<WaiterObs>,
    /// Most waiters queued at once during the window.
    pub max_waiters: usize,
    /// Longest run of consecutive samples that showed at least one waiter.
    pub max_waiter_streak: u32,
    /// How the lock is watched.
    pub watch: LockWatch,
    /// Reads of `/proc/locks` since the sampler started.
    pub locks_reads: u64,
    /// CPU time (user+system) of the sampler thread since it started, when known.
    pub sampler_cpu: Option<Duration>,
}

/// How the sampler watches the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LockWatch {
    /// inotify on the lock file and its directory: `/proc/locks` is read only while the file
    /// stays open longer than the threshold.
    #[default]
    Inotify,
    /// The lock file's directory does not exist (`reason`): nothing is read; the watch is made
    /// when it appears, and `how` says how it is waited for (inotify on its nearest existing
    /// ancestor, or a `stat` every period).
    AwaitingDir { reason: String, how: String },
    /// inotify cannot be used (the reason says why): `/proc/locks` is read every period.
    Polling { reason: String },
}

/// How a read is taken into the tracker (see [`Tracker::observe_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ObserveOptions {
    /// Nothing could hold or wait for the lock before this instant, and the holds and waits
    /// this read shows first began at or after it: count them from it rather than from the read.
    pub since: Option<Instant>,
    /// A close of the lock file prompted this read: holds and waits it no longer shows ended
    /// at it, rather than at the previous read.
    pub ended_now: bool,
}

impl Window {
    /// Every process the window names (holders and waiters), for annotation.
    pub fn procs_mut(&mut self) -> impl Iterator<Item = &mut ProcInfo> {
        let holds = self
            .current_holds
            .iter_mut()
            .chain(self.finished_holds.iter_mut())
            .map(|h| &mut h.holder);
        let waits = self
            .current_waiters
            .iter_mut()
            .chain(self.finished_waiters.iter_mut())
            .map(|w| &mut w.waiter);
        holds.chain(waits)
    }

    /// The longest hold of the window, finished or ongoing.
    pub fn longest_hold(&self) -> Option<&HoldObs> {
        self.current_holds
            .iter()
            .chain(self.finished_holds.iter())
            .max_by_key(|h| h.held_for)
    }
}

#[derive(Debug, Clone)]
struct Active {
    info: ProcInfo,
    class: String,
    access: String,
    first_seen: Instant,
    last_seen: Instant,
}

impl Active {
    fn hold(&self, ongoing: bool) -> HoldObs {
        HoldObs {
            holder: self.info.clone(),
            class: self.class.clone(),
            access: self.access.clone(),
            held_for: self.last_seen.saturating_duration_since(self.first_seen),
            ongoing,
        }
    }
    fn wait(&self) -> WaiterObs {
        WaiterObs {
            waiter: self.info.clone(),
            waited_for: self.last_seen.saturating_duration_since(self.first_seen),
        }
    }
}

/// Hold and wait tracking across samples. Pure apart from the `info` callback, so it can be
/// driven with synthetic instants in tests.
#[derive(Debug)]
pub struct Tracker {
    holds: HashMap<(u32, LockId), Active>,
    waiters: HashMap<(u32, LockId), Active>,
    finished: Vec<HoldObs>,
    finished_waiters: Vec<WaiterObs>,
    max_waiters: usize,
    waiter_streak: u32,
    max_waiter_streak: u32,
    samples: u64,
    lock: Option<LockId>,
    error: Option<String>,
    window_start: Instant,
    watch: LockWatch,
    reads: u64,
    cpu: Option<Duration>,
}

impl Tracker {
    pub fn new(now: Instant) -> Tracker {
        Tracker {
            holds: HashMap::new(),
            waiters: HashMap::new(),
            finished: Vec::new(),
            finished_waiters: Vec::new(),
            max_waiters: 0,
            waiter_streak: 0,
            max_waiter_streak: 0,
            samples: 0,
            lock: None,
            error: None,
            window_start: now,
            watch: LockWatch::default(),
            reads: 0,
            cpu: None,
        }
    }

    /// Records how the lock is watched (logged when it changes).
    pub fn set_watch(&mut self, watch: LockWatch) {
        self.watch = watch;
    }

    /// How the lock is watched.
    pub fn watch(&self) -> &LockWatch {
        &self.watch
    }

    /// Counts one read of `/proc/locks`.
    pub fn count_read(&mut self) {
        self.reads += 1;
    }

    /// Reads of `/proc/locks` since the tracker was made.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Records the sampler thread's CPU time so far.
    pub fn set_cpu(&mut self, cpu: Option<Duration>) {
        self.cpu = cpu;
    }

    /// The lock file at the path is (now) this one.
    pub fn set_lock(&mut self, lock: LockId) {
        if self.lock != Some(lock) {
            tracing::info!(lock = %lock.proc_locks_key(), "watching the xtables lock");
        }
        self.lock = Some(lock);
        self.error = None;
    }

    /// There is no lock file at the path (any more): nothing can hold it; the holds seen on
    /// the old file end.
    pub fn lock_gone(&mut self, reason: String, now: Instant) {
        if let Some(old) = self.lock {
            self.observe(old, &[], now, |_| ProcInfo::default());
        }
        self.observe_error(reason, None);
    }

    /// True when the last read showed the lock held or waited for.
    pub fn is_tracking(&self) -> bool {
        !self.holds.is_empty() || !self.waiters.is_empty()
    }

    /// Records a sample that could not be taken (not counted in `samples`).
    pub fn observe_error(&mut self, reason: String, lock: Option<LockId>) {
        if self.error.as_deref() != Some(reason.as_str()) {
            tracing::warn!(reason = reason.as_str(), "xtables lock sampling failed");
        }
        self.lock = lock;
        self.error = Some(reason);
    }

    /// Records one sample of `/proc/locks` for the lock `lock`. `info` names a pid the first
    /// time it is seen holding or waiting.
    pub fn observe(
        &mut self,
        lock: LockId,
        entries: &[LockEntry],
        now: Instant,
        info: impl FnMut(Option<u32>) -> ProcInfo,
    ) {
        self.observe_with(lock, entries, now, ObserveOptions::default(), info);
    }

    /// [`Tracker::observe`], with what the lock watch knows about when holds could have begun
    /// and ended ([`ObserveOptions`]).
    pub fn observe_with(
        &mut self,
        lock: LockId,
        entries: &[LockEntry],
        now: Instant,
        opts: ObserveOptions,
        mut info: impl FnMut(Option<u32>) -> ProcInfo,
    ) {
        let first_seen = opts.since.map_or(now, |s| s.min(now));
        self.samples += 1;
        if self.lock != Some(lock) {
            tracing::info!(lock = %lock.proc_locks_key(), "watching the xtables lock");
        }
        self.lock = Some(lock);
        self.error = None;
        let mut seen_holds: Vec<(u32, LockId)> = Vec::new();
        let mut seen_waiters: Vec<(u32, LockId)> = Vec::new();
        for e in entries
            .iter()
            .filter(|e| e.is_on(lock.major, lock.minor, lock.inode))
        {
            // Pid-less entries (OFD locks) share key 0.
            let key = (e.pid.unwrap_or(0), lock);
            let (map, seen) = if e.waiter {
                (&mut self.waiters, &mut seen_waiters)
            } else {
                (&mut self.holds, &mut seen_holds)
            };
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            if let Some(a) = map.get_mut(&key) {
                a.last_seen = now;
            } else if map.len() < MAX_TRACKED {
                map.insert(
                    key,
                    Active {
                        info: info(e.pid),
                        class: e.class.as_str().to_string(),
                        access: e.access.clone(),
                        first_seen,
                        last_seen: now,
                    },
                );
            }
        }
        // Holds and waits that ended.
        let ended: Vec<_> = self
            .holds
            .keys()
            .filter(|k| !seen_holds.contains(k))
            .copied()
            .collect();
        for k in ended {
            if let Some(mut a) = self.holds.remove(&k) {
                if opts.ended_now {
                    a.last_seen = now;
                }
                push_longest(&mut self.finished, a.hold(false), |h| h.held_for);
            }
        }
        let ended: Vec<_> = self
            .waiters
            .keys()
            .filter(|k| !seen_waiters.contains(k))
            .copied()
            .collect();
        for k in ended {
            if let Some(mut a) = self.waiters.remove(&k) {
                if opts.ended_now {
                    a.last_seen = now;
                }
                push_longest(&mut self.finished_waiters, a.wait(), |w| w.waited_for);
            }
        }
        let n = seen_waiters.len();
        self.max_waiters = self.max_waiters.max(n);
        if n > 0 {
            self.waiter_streak += 1;
            self.max_waiter_streak = self.max_waiter_streak.max(self.waiter_streak);
        } else {
            self.waiter_streak = 0;
        }
    }

    /// Returns the window since the previous drain and starts a new one. Ongoing holds keep
    /// their start time; the maxima restart from the current state.
    pub fn drain(&mut self, now: Instant) -> Window {
        let mut current_holds: Vec<HoldObs> = self.holds.values().map(|a| a.hold(true)).collect();
        current_holds.sort_by_key(|h| std::cmp::Reverse(h.held_for));
        let mut current_waiters: Vec<WaiterObs> = self.waiters.values().map(|a| a.wait()).collect();
        current_waiters.sort_by_key(|w| std::cmp::Reverse(w.waited_for));
        let w = Window {
            samples: self.samples,
            length: now.saturating_duration_since(self.window_start),
            lock: self.lock,
            error: self.error.clone(),
            current_holds,
            finished_holds: std::mem::take(&mut self.finished),
            current_waiters,
            finished_waiters: std::mem::take(&mut self.finished_waiters),
            max_waiters: self.max_waiters,
            max_waiter_streak: self.max_waiter_streak,
            watch: self.watch.clone(),
            locks_reads: self.reads,
            sampler_cpu: self.cpu,
        };
        self.samples = 0;
        self.window_start = now;
        self.max_waiters = self.waiters.len();
        self.max_waiter_streak = self.waiter_streak;
        w
    }
}

/// Keeps at most `MAX_FINISHED` items, dropping the smallest by `key`.
fn push_longest<T>(v: &mut Vec<T>, item: T, key: impl Fn(&T) -> Duration) {
    v.push(item);
    if v.len() > MAX_FINISHED {
        if let Some((i, _)) = v.iter().enumerate().min_by_key(|(_, x)| key(x)) {
            v.swap_remove(i);
        }
    }
}

/// Takes one sample: stats the lock file, reads `/proc/locks`, updates the tracker. What the
/// sampler does every period when it cannot watch the lock with inotify, and what `collect`
/// does itself when the thread could not be started.
pub fn sample_once(host: &HostPaths, lock_path: &std::path::Path, tracker: &mut Tracker) {
    let now = Instant::now();
    let lock = match LockId::of_path(lock_path) {
        Ok(id) => id,
        Err(e) => {
            // No lock file: nothing can hold it; end the holds seen on the old file.
            if let Some(old) = tracker.lock {
                tracker.observe(old, &[], now, |_| ProcInfo::default());
            }
            tracker.observe_error(format!("cannot stat {}: {e}", lock_path.display()), None);
            return;
        }
    };
    tracker.count_read();
    match locks::scan_for(host, lock.major, lock.minor, lock.inode) {
        Ok(scan) => tracker.observe(lock, &scan.entries, now, |p| ProcInfo::read(host, p)),
        Err(e) => tracker.observe_error(e.to_string(), Some(lock)),
    }
}

/// How the sampler thread reads the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerOptions {
    /// Between two reads of `/proc/locks` while the lock is held or the file open.
    pub period: Duration,
    /// The lock file must stay open this long before `/proc/locks` is read.
    pub open_threshold: Duration,
    /// Watch the lock file with inotify (false: read `/proc/locks` every period).
    pub inotify: bool,
    /// Read `/proc/locks` as soon as the watch is made, for a hold taken before it (the
    /// openers before the watch are unknown). False when nothing can have taken the lock
    /// (no legacy iptables tables on the host, [`super::backend::LegacyUse`]): a watch that
    /// starts then reads nothing until the file is opened.
    pub read_at_start: bool,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            period: Duration::from_millis(250),
            open_threshold: Duration::from_millis(500),
            inotify: true,
            read_at_start: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::locks::parse;

    #[test]
    fn names_a_pod_by_uid_and_a_container_by_id() {
        const UID: &str = "5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60";
        const CID: &str = "0b3f5c2e9d1a7c4b8e6f2a1d3c5b7e9f0a2c4e6b8d1f3a5c7e9b2d4f6a8c0e1d";
        let t = tempfile::tempdir().unwrap();
        let logs = t.path().join("var/log/containers");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::create_dir_all(
            t.path()
                .join(format!("var/log/pods/kube-system_calico-node-x2_{UID}")),
        )
        .unwrap();
        std::fs::write(
            logs.join(format!("calico-node-x2_kube-system_calico-node-{CID}.log")),
            "",
        )
        .unwrap();
        let mut pods = PodDirectory::new(HostPaths::new(t.path()), Default::default());
        pods.refresh();
        let mut p = ProcInfo {
            pid: Some(9),
            pod_uid: Some(UID.to_string()),
            container_id: Some(CID[..12].to_string()),
            ..ProcInfo::default()
        };
        assert!(p.in_pod());
        p.name_pod(&pods);
        assert_eq!(p.pod_namespace.as_deref(), Some("kube-system"));
        assert_eq!(p.pod_name.as_deref(), Some("calico-node-x2"));
        assert_eq!(p.container_name.as_deref(), Some("calico-node"));
        // An unknown UID leaves the names empty; a host process is not in a pod.
        let mut q = ProcInfo {
            pod_uid: Some("1111".to_string()),
            ..ProcInfo::default()
        };
        q.name_pod(&pods);
        assert_eq!((q.pod_namespace, q.pod_name), (None, None));
        assert!(!ProcInfo::default().in_pod());
    }

    const LOCK: LockId = LockId {
        major: 0,
        minor: 0x13,
        inode: 19023,
    };

    fn info(p: Option<u32>) -> ProcInfo {
        ProcInfo {
            pid: p,
            comm: p.map(|p| format!("p{p}")),
            ..ProcInfo::default()
        }
    }

    #[test]
    fn tracks_hold_time_and_waiters_across_samples() {
        let t0 = Instant::now();
        let mut tr = Tracker::new(t0);
        let held = parse(
            "1: FLOCK  ADVISORY  WRITE 31337 00:13:19023 0 EOF\n\
             1: -> FLOCK  ADVISORY  WRITE 4242 00:13:19023 0 EOF\n\
             2: FLOCK  ADVISORY  WRITE 77 00:13:1 0 EOF\n",
        )
        .unwrap();
        for i in 0..25u64 {
            tr.observe(LOCK, &held, t0 + Duration::from_millis(250 * i), info);
        }
        let w = tr.drain(t0 + Duration::from_secs(6));
        assert_eq!(w.samples, 25);
        assert_eq!(w.current_holds.len(), 1, "the other inode is ignored");
        assert_eq!(w.current_holds[0].holder.pid, Some(31337));
        assert_eq!(w.current_holds[0].held_for, Duration::from_secs(6));
        assert_eq!(w.current_waiters[0].waiter.pid, Some(4242));
        assert_eq!((w.max_waiters, w.max_waiter_streak), (1, 25));
        // The holder releases; the waiter takes the lock briefly.
        let after = parse("1: FLOCK  ADVISORY  WRITE 4242 00:13:19023 0 EOF\n").unwrap();
        tr.observe(LOCK, &after, t0 + Duration::from_millis(6250), info);
        tr.observe(LOCK, &[], t0 + Duration::from_millis(6500), info);
        let w = tr.drain(t0 + Duration::from_secs(7));
        assert!(w.current_holds.is_empty());
        assert_eq!(w.finished_holds.len(), 2);
        let longest = w.longest_hold().unwrap();
        assert_eq!(longest.holder.pid, Some(31337));
        assert_eq!(longest.held_for, Duration::from_secs(6));
        assert!(!longest.ongoing);
        assert_eq!(w.finished_waiters[0].waiter.pid, Some(4242));
        assert_eq!(
            w.max_waiters, 1,
            "the window started with one waiter queued"
        );
        // The next window is empty: state is bounded and pruned.
        let w = tr.drain(t0 + Duration::from_secs(8));
        assert!(w.finished_holds.is_empty() && w.current_holds.is_empty());
        assert_eq!(w.max_waiters, 0);
        assert!(tr.holds.is_empty() && tr.waiters.is_empty());
    }

    #[test]
    fn a_watched_hold_counts_from_the_open_and_ends_at_the_close() {
        let t0 = Instant::now();
        let mut tr = Tracker::new(t0);
        let held = parse(
            "1: FLOCK  ADVISORY  WRITE 31337 00:13:19023 0 EOF\n\
             1: -> FLOCK  ADVISORY  WRITE 4242 00:13:19023 0 EOF\n",
        )
        .unwrap();
        // First read 500 ms after the open: holder and waiter count from the open.
        let first = ObserveOptions {
            since: Some(t0),
            ended_now: false,
        };
        tr.observe_with(LOCK, &held, t0 + Duration::from_millis(500), first, info);
        assert!(tr.is_tracking());
        tr.observe(LOCK, &held, t0 + Duration::from_millis(1750), info);
        // The holder closed the file at 2.01 s; the waiter got the lock and closed at once.
        let closed = ObserveOptions {
            since: None,
            ended_now: true,
        };
        tr.observe_with(LOCK, &[], t0 + Duration::from_millis(2010), closed, info);
        assert!(!tr.is_tracking());
        let w = tr.drain(t0 + Duration::from_secs(3));
        let h = w.longest_hold().unwrap();
        assert_eq!(h.holder.pid, Some(31337));
        assert_eq!(h.held_for, Duration::from_millis(2010));
        assert_eq!(
            w.finished_waiters[0].waited_for,
            Duration::from_millis(2010)
        );
        // A `since` later than the read never makes a hold start after it was seen.
        let mut tr = Tracker::new(t0);
        let late = ObserveOptions {
            since: Some(t0 + Duration::from_secs(9)),
            ended_now: false,
        };
        tr.observe_with(LOCK, &held, t0, late, info);
        tr.observe(LOCK, &held, t0 + Duration::from_secs(1), info);
        let w = tr.drain(t0 + Duration::from_secs(1));
        assert_eq!(w.current_holds[0].held_for, Duration::from_secs(1));
    }

    #[test]
    fn the_window_carries_the_watch_and_its_cost() {
        let t0 = Instant::now();
        let mut tr = Tracker::new(t0);
        tr.set_watch(LockWatch::Polling {
            reason: "test".into(),
        });
        tr.count_read();
        tr.count_read();
        tr.set_cpu(Some(Duration::from_millis(7)));
        let w = tr.drain(t0);
        assert_eq!(
            w.watch,
            LockWatch::Polling {
                reason: "test".into()
            }
        );
        assert_eq!(w.locks_reads, 2);
        assert_eq!(w.sampler_cpu, Some(Duration::from_millis(7)));
        // A lock file that goes away ends the holds seen on it and says why.
        let held = parse("1: FLOCK  ADVISORY  WRITE 7 00:13:19023 0 EOF\n").unwrap();
        tr.observe(LOCK, &held, t0, info);
        tr.lock_gone("cannot stat x".into(), t0 + Duration::from_secs(1));
        let w = tr.drain(t0 + Duration::from_secs(1));
        assert_eq!((w.lock, w.error.as_deref()), (None, Some("cannot stat x")));
        assert_eq!(w.finished_holds.len(), 1);
        tr.set_lock(LOCK);
        assert_eq!(tr.drain(t0).error, None);
    }

    /// The thread stops when the sampler is dropped, whether it was waiting on inotify or
    /// polling, and a dropped sampler does not wait for a period to end.
    #[test]
    fn finished_holds_are_bounded_to_the_longest() {
        let t0 = Instant::now();
        let mut tr = Tracker::new(t0);
        let mut t = t0;
        for pid in 1..=40u32 {
            let e = parse(&format!("1: FLOCK ADVISORY WRITE {pid} 00:13:19023 0 EOF")).unwrap();
            for _ in 0..pid {
                tr.observe(LOCK, &e, t, info);
                t += Duration::from_millis(10);
            }
        }
        tr.observe(LOCK, &[], t, info);
        let w = tr.drain(t);
        assert_eq!(w.finished_holds.len(), MAX_FINISHED);
        assert_eq!(w.longest_hold().unwrap().holder.pid, Some(40));
        assert!(w.finished_holds.iter().all(|h| h.holder.pid >= Some(25)));
    }
}
