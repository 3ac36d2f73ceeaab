//! When the xtables lock sampler reads `/proc/locks`: an inotify watch on the lock file counts
//! the opens and closes of the file, and the table is read only while the file has stayed open
//! longer than a threshold (500 ms by default), then every sample period until the lock is
//! free and the file closed. A short `iptables -w` (open, flock, a few milliseconds of work,
//! close) costs two inotify events and no read.
//!
//! Why opens tell us enough: everything that takes the xtables lock (iptables, ip6tables,
//! iptables-restore, kube-proxy's and Calico's own lock code) opens the file for each use and
//! closes it when done, and a process that queues behind a holder has opened the file too. The
//! kernel sends one `IN_OPEN` per `open` and one `IN_CLOSE_*` when the last descriptor of that
//! open file description goes away (a `fork` or `dup` sends nothing), so opens minus closes is
//! the number of open file descriptions. Flock and POSIX locks are released at the latest when
//! the file is closed. What opens cannot show: a process that opened the file before the watch
//! began and takes the lock later without opening it again; it is seen as soon as anyone else
//! opens the file, e.g. the first process that queues behind it.
//!
//! While a hold is followed, the table is not read again as long as nobody opens or closes the
//! file: the one holder is confirmed each period through its `/proc/<pid>/fdinfo/<fd>` (the
//! kernel lists there the locks held through that descriptor), and when the last counted open
//! is closed the lock is free without reading. At 10,000 held locks a full read of
//! `/proc/locks` costs milliseconds of kernel time (the kernel restarts its list walk for every
//! page it hands out); a hold of any length then costs one read, stopped early at the holder
//! ([`locks::scan_for`]).
//!
//! The pieces: [`Gate`] (pure: events and instants in, "read now?" out), [`Watch`] (the
//! inotify instance: a watch on the lock file and one on its directory, so a lock file that
//! appears later or is replaced is picked up) and [`Runner`] (the sampler thread's state:
//! the watch; the wait for a lock directory that does not exist, which reads nothing
//! ([`super::dirwait`]); or the fallback of reading `/proc/locks` every period when inotify
//! cannot be used, which the window reports so the collector's status says so).

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::dirwait::{identity, inotify_error, DirWait};
use super::tracker::{LockId, LockWatch, ObserveOptions, ProcInfo, SamplerOptions, Tracker};
use crate::host::HostPaths;
use crate::proc::locks;

/// A read prompted by a close comes at least this long after the previous read (a process
/// that opens and closes the file in a loop while the lock is held cannot make us read the
/// table in a loop).
const CLOSE_READ_GAP: Duration = Duration::from_millis(10);
/// How often the watched directory and file are checked to still be the ones at the lock path
/// (a `stat` each; a tmpfs mounted over `/run` sends no event), and a missing lock directory
/// whose nearest ancestor is watched is looked for.
pub const CONFIRM_PERIOD: Duration = Duration::from_secs(5);
/// How often a watch that failed for a reason other than a missing directory is retried.
pub const RETRY_PERIOD: Duration = Duration::from_secs(60);

/// What the sampler knows of the lock file's openers, and when it must read `/proc/locks`.
/// Pure: driven by inotify events and instants, so it can be tested without a kernel.
#[derive(Debug, Clone)]
pub struct Gate {
    threshold: Duration,
    period: Duration,
    /// Opens minus closes seen (saturating at 0: a close of a file opened before the watch).
    opens: u32,
    /// Since when the file has been open (or possibly open), if it is.
    busy_since: Option<Instant>,
    /// The moment the file went from closed to open, when the count knows it (not after a
    /// start, a new file or a lost event): nothing could hold the lock before it, so holds
    /// and waits first seen on the first read after it are counted from it.
    backdate: Option<Instant>,
    /// Openers the count cannot see may exist (at start, on a new lock file, after the event
    /// queue overflowed); cleared by a read that finds the lock free.
    unknown: bool,
    /// The last read found holders or waiters, or failed: read every period until it does not.
    follow: bool,
    /// A read is due at this instant whatever the count says (start, lost events).
    read_at: Option<Instant>,
    /// A close came while following: read soon, and count what ended as ended at that read.
    close_pending: bool,
    last_read: Option<Instant>,
    /// An open, a close or a new file came since the last full read of `/proc/locks`: the
    /// holders and waiters may have changed.
    dirty: bool,
}

impl Gate {
    pub fn new(threshold: Duration, period: Duration) -> Gate {
        Gate {
            threshold,
            period,
            opens: 0,
            busy_since: None,
            backdate: None,
            unknown: false,
            follow: false,
            read_at: None,
            close_pending: false,
            last_read: None,
            dirty: true,
        }
    }

    /// The count no longer knows the openers (start, lost events): the file may be open.
    /// With `read_now`, read at once; otherwise after the threshold.
    pub fn unknown(&mut self, now: Instant, read_now: bool) {
        self.opens = 0;
        self.unknown = true;
        self.dirty = true;
        self.backdate = None;
        self.busy_since.get_or_insert(now);
        if read_now {
            self.read_at = Some(now);
        }
    }

    /// A new file is at the lock path (created, e.g. by the first iptables run, or moved
    /// there): its creator may have it open, so read after the threshold; nothing held a lock
    /// on it before it appeared, so what the read finds is counted from now.
    pub fn new_file(&mut self, now: Instant) {
        self.unknown(now, false);
        self.busy_since = Some(now);
        if !self.follow {
            self.backdate = Some(now);
        }
    }

    /// An `IN_OPEN` of the lock file.
    pub fn opened(&mut self, now: Instant) {
        self.opens = self.opens.saturating_add(1);
        self.dirty = true;
        if self.busy_since.is_none() {
            self.busy_since = Some(now);
            if !self.follow {
                self.backdate = Some(now);
            }
        }
    }

    /// An `IN_CLOSE_WRITE` or `IN_CLOSE_NOWRITE` of the lock file.
    pub fn closed(&mut self) {
        self.opens = self.opens.saturating_sub(1);
        self.dirty = true;
        if self.follow {
            self.close_pending = true;
        }
        self.settle();
    }

    /// Back to idle when nothing is open, known or followed.
    fn settle(&mut self) {
        if self.opens == 0 && !self.unknown && !self.follow {
            self.busy_since = None;
            self.backdate = None;
        }
    }

    /// When the next read is due (`None`: not until an event says so).
    pub fn due(&self) -> Option<Instant> {
        if let Some(at) = self.read_at {
            return Some(at);
        }
        if self.follow {
            let last = self.last_read?;
            let gap = if self.close_pending {
                CLOSE_READ_GAP.min(self.period)
            } else {
                self.period
            };
            return Some(last + gap);
        }
        let since = self.busy_since?;
        let mut due = since + self.threshold;
        if let Some(last) = self.last_read {
            due = due.max(last + self.period);
        }
        Some(due)
    }

    /// How the tracker takes the next read: from when a hold may be counted, and whether
    /// what ended ended at this read (a close prompted it).
    pub fn read_options(&self) -> ObserveOptions {
        ObserveOptions {
            since: self.backdate,
            ended_now: self.close_pending,
        }
    }

    /// A read was taken at `now`; `follow`: it found holders or waiters, or failed.
    pub fn read_done(&mut self, now: Instant, follow: bool) {
        self.last_read = Some(now);
        self.read_at = None;
        self.close_pending = false;
        self.backdate = None;
        self.follow = follow;
        if !follow {
            self.unknown = false;
        }
        self.settle();
    }

    /// True when the holders and waiters may have changed since the last full read (an open,
    /// a close, a new file): the next read must be a full one.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// A full read of `/proc/locks` was taken (call before taking in the events that came
    /// during it, which make it dirty again).
    pub fn full_read(&mut self) {
        self.dirty = false;
    }

    /// True when the count knows every open of the file and none is left: no flock or POSIX
    /// lock can exist on a file nobody has open, so the lock is free without reading.
    pub fn free_by_count(&self) -> bool {
        self.opens == 0 && !self.unknown
    }

    /// True when no read is due until an event comes.
    pub fn idle(&self) -> bool {
        self.due().is_none()
    }
}

/// Why a watch could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupError {
    /// The lock file's directory does not exist (yet): waited for ([`DirWait`]).
    NoDir(String),
    /// inotify refused (instance or watch limit, an error): retried every [`RETRY_PERIOD`].
    Failed(String),
}

/// What one batch of inotify events means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Changes {
    /// The lock file at the path may be another file (created, replaced, removed).
    pub file: bool,
    /// The directory itself went away or was replaced: the watch must be made again.
    pub dir: bool,
    /// The kernel's event queue overflowed: opens and closes were lost.
    pub overflow: bool,
}

/// Tells the tracker which file is now at the lock path.
fn file_changed(watch: &Watch, tracker: &mut Tracker, now: Instant) {
    match watch.file() {
        Some(id) => tracker.set_lock(id),
        None => {
            let path = watch.path();
            let reason = match LockId::of_path(&path) {
                Err(e) => format!("cannot stat {}: {e}", path.display()),
                Ok(_) => format!("{} appeared while it was being watched", path.display()),
            };
            tracker.lock_gone(reason, now);
        }
    }
}

impl Changes {
    fn merge(&mut self, o: Changes) {
        self.file |= o.file;
        self.dir |= o.dir;
        self.overflow |= o.overflow;
    }

    fn any(&self) -> bool {
        self.file || self.dir || self.overflow
    }
}

/// The pid of the one holder of the lock, when exactly one process holds it.
fn one_holder(entries: &[locks::LockEntry]) -> Option<u32> {
    let mut holders = entries.iter().filter(|e| !e.waiter);
    let h = holders.next()?;
    if holders.next().is_some() {
        return None;
    }
    h.pid
}

/// The inotify instance watching the lock file and its directory.
#[derive(Debug)]
pub struct Watch {
    inotify: Inotify,
    dir: PathBuf,
    name: OsString,
    dir_wd: WatchDescriptor,
    dir_id: (u64, u64),
    file_wd: Option<WatchDescriptor>,
    file_id: Option<LockId>,
}

const DIR_EVENTS: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);
const FILE_EVENTS: AddWatchFlags = AddWatchFlags::IN_OPEN
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_CLOSE_NOWRITE);

impl Watch {
    /// Watches the directory of `lock_path` and, if it exists, the file. The file's state
    /// (its identity, or why it cannot be stat'ed) is [`Watch::file`].
    pub fn new(lock_path: &Path) -> Result<Watch, SetupError> {
        let (Some(dir), Some(name)) = (lock_path.parent(), lock_path.file_name()) else {
            return Err(SetupError::Failed(format!(
                "{} names no file in a directory",
                lock_path.display()
            )));
        };
        let dir_id = match identity(dir) {
            Ok(id) if dir.is_dir() => id,
            Ok(_) => {
                return Err(SetupError::NoDir(format!(
                    "{} is not a directory",
                    dir.display()
                )))
            }
            Err(e) => {
                return Err(SetupError::NoDir(format!(
                    "cannot stat {}: {e}",
                    dir.display()
                )))
            }
        };
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
            .map_err(|e| SetupError::Failed(inotify_error("cannot watch", dir, e)))?;
        let dir_wd = match inotify.add_watch(dir, DIR_EVENTS) {
            Ok(wd) => wd,
            Err(e @ (Errno::ENOENT | Errno::ENOTDIR)) => {
                return Err(SetupError::NoDir(format!(
                    "cannot watch {}: {}",
                    dir.display(),
                    e.desc()
                )))
            }
            Err(e) => return Err(SetupError::Failed(inotify_error("cannot watch", dir, e))),
        };
        let mut w = Watch {
            inotify,
            dir: dir.to_path_buf(),
            name: name.to_os_string(),
            dir_wd,
            dir_id,
            file_wd: None,
            file_id: None,
        };
        w.watch_file().map_err(SetupError::Failed)?;
        Ok(w)
    }

    /// The lock file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The watched lock file's identity (`None`: there is no file at the path).
    pub fn file(&self) -> Option<LockId> {
        self.file_id
    }

    /// (Re)watches the file at the lock path. `Err` only when inotify refuses a file that
    /// exists (a watch limit); a missing file is `Ok` with [`Watch::file`] `None`.
    pub fn watch_file(&mut self) -> Result<(), String> {
        if let Some(wd) = self.file_wd.take() {
            // Fails harmlessly when the kernel already dropped it (file deleted).
            let _ = self.inotify.rm_watch(wd);
        }
        self.file_id = None;
        let path = self.path();
        // Watch first, then stat: a file replaced in between sends a directory event, which
        // brings us back here.
        match self.inotify.add_watch(&path, FILE_EVENTS) {
            Ok(wd) => {
                self.file_wd = Some(wd);
                self.file_id = LockId::of_path(&path).ok();
                Ok(())
            }
            Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(inotify_error("cannot watch", &path, e)),
        }
    }

    /// True when the directory and the file at the lock path are still the watched ones.
    pub fn is_current(&self) -> (bool, bool) {
        let dir_ok = identity(&self.dir).ok() == Some(self.dir_id);
        let file_ok = LockId::of_path(&self.path()).ok() == self.file_id;
        (dir_ok, file_ok)
    }

    /// Reads the pending events, feeding opens and closes of the file to `gate` in order.
    pub fn events(&self, gate: &mut Gate, now: Instant) -> Changes {
        let mut ch = Changes::default();
        loop {
            let evs = match self.inotify.read_events() {
                Ok(evs) => evs,
                Err(Errno::EAGAIN) => return ch,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reading xtables lock inotify events failed");
                    ch.dir = true;
                    return ch;
                }
            };
            if evs.is_empty() {
                return ch;
            }
            for ev in evs {
                let m = ev.mask;
                if m.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    ch.overflow = true;
                    continue;
                }
                if Some(ev.wd) == self.file_wd {
                    if m.contains(AddWatchFlags::IN_OPEN) {
                        gate.opened(now);
                    }
                    if m.intersects(AddWatchFlags::IN_CLOSE) {
                        gate.closed();
                    }
                    if m.contains(AddWatchFlags::IN_IGNORED) {
                        ch.file = true;
                    }
                } else if ev.wd == self.dir_wd {
                    if m.intersects(
                        AddWatchFlags::IN_DELETE_SELF
                            | AddWatchFlags::IN_MOVE_SELF
                            | AddWatchFlags::IN_IGNORED
                            | AddWatchFlags::IN_UNMOUNT,
                    ) {
                        ch.dir = true;
                    } else if ev.name.as_deref() == Some(self.name.as_os_str()) {
                        ch.file = true;
                    }
                }
            }
        }
    }
}

impl AsFd for Watch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

/// When the polling fallback tries inotify again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    At(Instant),
    /// inotify is turned off.
    Never,
}

/// How the runner watches: inotify, waiting for the lock's directory, or reading every period.
#[derive(Debug)]
enum Mode {
    Watching {
        watch: Watch,
        next_confirm: Instant,
    },
    /// The lock file's directory does not exist: there is nothing to read. The watch is tried
    /// again on an event of `wait` and when a look at `next_check` finds the wait out of date;
    /// without `wait` (inotify refused), a `stat` of the directory every period.
    AwaitingDir {
        wait: Option<DirWait>,
        next_check: Instant,
    },
    Polling {
        next_sample: Instant,
        retry: Retry,
    },
}

/// The sampler thread's state: the watch (or the polling fallback), the gate, and the reads.
#[derive(Debug)]
pub struct Runner {
    host: HostPaths,
    lock_path: PathBuf,
    period: Duration,
    gate: Gate,
    mode: Mode,
    /// What events read during the last read said beyond opens and closes.
    pending: Changes,
    /// The one holder of the lock, confirmed between full reads through its `fdinfo`.
    held: Option<Held>,
    /// The last full read failed: the next must be a real one, whatever the count says.
    read_failed: bool,
    /// The first watch, when it is made at start, starts idle instead of reading at once
    /// (nothing can hold the lock: `SamplerOptions::read_at_start` was false).
    quiet_start: bool,
    /// Watches tried (made or not) since start.
    tries: u64,
}

/// A lock holder that can be confirmed without reading `/proc/locks`: while no process opens
/// or closes the lock file, the holders and waiters can only change by the holder unlocking
/// (iptables never does without closing), which its `/proc/<pid>/fdinfo/<fd>` shows: the
/// kernel lists there the locks held through that descriptor (`lock:` lines, in the format of
/// `/proc/locks`). A few hundred bytes instead of the whole table.
#[derive(Debug, Clone)]
struct Held {
    pid: u32,
    fdinfo: PathBuf,
    /// What the last full read showed (the holder and its waiters), observed again while the
    /// holder is confirmed.
    entries: Vec<locks::LockEntry>,
}

/// Bytes of an `fdinfo` file: a few lines plus one `lock:` line per lock held through it.
const FDINFO_CAP: usize = crate::hostfs::cap::PID_RECORD;
/// Descriptors of a holder looked at to find the lock file's.
const HOLDER_FDS: usize = 4096;

/// The `fdinfo` path of `pid`'s descriptor of the lock file, if it has one (among its first
/// [`HOLDER_FDS`] descriptors).
fn holder_fdinfo(host: &HostPaths, pid: u32, lock: LockId) -> Option<PathBuf> {
    let base = host.proc_pid(pid);
    let fds = crate::hostfs::dir_entries(&base.join("fd"), HOLDER_FDS).ok()?;
    for e in fds {
        // `stat` follows the magic link to the open file without opening anything.
        if LockId::of_path(&e.path()).ok() == Some(lock) {
            return Some(base.join("fdinfo").join(e.file_name()));
        }
    }
    None
}

/// True when the `fdinfo` file shows `pid` holding `lock` through that descriptor.
fn fdinfo_holds(path: &Path, pid: u32, lock: LockId) -> bool {
    let mut buf = Vec::new();
    if crate::hostfs::read_pid_record(path, FDINFO_CAP, &mut buf).is_err() {
        return false;
    }
    let Ok(text) = std::str::from_utf8(&buf) else {
        return false;
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("lock:"))
        .filter_map(|l| locks::parse_line(l).ok())
        .any(|e| !e.waiter && e.pid == Some(pid) && e.is_on(lock.major, lock.minor, lock.inode))
}

impl Runner {
    /// Sets up the watch (or the fallback) and, unless `options.read_at_start` is false,
    /// takes the first read at once. `options.period` is used as given.
    pub fn start(
        host: HostPaths,
        lock_path: PathBuf,
        options: &SamplerOptions,
        tracker: &mut Tracker,
        now: Instant,
    ) -> Runner {
        let period = options.period;
        let use_inotify = options.inotify;
        let mut r = Runner {
            quiet_start: !options.read_at_start,
            host,
            lock_path,
            period,
            gate: Gate::new(options.open_threshold, period),
            pending: Changes::default(),
            held: None,
            read_failed: false,
            tries: 0,
            mode: Mode::Polling {
                next_sample: now,
                retry: Retry::Never,
            },
        };
        if use_inotify {
            r.try_watch(tracker, now);
        } else {
            tracker.set_watch(LockWatch::Polling {
                reason: "inotify is turned off in the configuration".to_string(),
            });
        }
        r.advance(tracker, now);
        r
    }

    /// Watches tried (made or not) since start: once at start, then once per change of the
    /// lock's directory, retry of the fallback, or look at a missing directory that found it.
    pub fn tries(&self) -> u64 {
        self.tries
    }

    /// Makes the watch; on success a read follows at once (openers are unknown).
    fn try_watch(&mut self, tracker: &mut Tracker, now: Instant) {
        self.tries += 1;
        // Only a watch made at start may start idle: one made later (the directory appeared,
        // a retry) cannot know what happened before it.
        let quiet = std::mem::take(&mut self.quiet_start);
        match Watch::new(&self.lock_path) {
            Ok(watch) => {
                tracing::info!(lock = %self.lock_path.display(), "watching the xtables lock file with inotify");
                tracker.set_watch(LockWatch::Inotify);
                file_changed(&watch, tracker, now);
                self.gate = Gate::new(self.gate.threshold, self.period);
                if !quiet {
                    self.gate.unknown(now, true);
                }
                self.pending = Changes::default();
                self.held = None;
                self.mode = Mode::Watching {
                    watch,
                    next_confirm: now + CONFIRM_PERIOD,
                };
            }
            Err(SetupError::NoDir(reason)) => {
                let dir = self.lock_dir().to_path_buf();
                self.await_dir(reason, DirWait::new(&dir), tracker, now);
            }
            Err(SetupError::Failed(reason)) => self.fall_back(reason, tracker, now),
        }
    }

    /// The directory of the lock file.
    fn lock_dir(&self) -> &Path {
        self.lock_path.parent().unwrap_or(Path::new("/"))
    }

    /// The lock's directory does not exist (`reason`): nothing can be held at the lock path
    /// and nothing is read. Waits on `wait` (inotify on the nearest existing ancestor, looked
    /// at every [`CONFIRM_PERIOD`] for what inotify cannot see) or, when inotify refused, with
    /// a `stat` of the directory every period. The next look is never due at once: the wait
    /// costs a look per [`CONFIRM_PERIOD`] (or period), and a try per event that names the
    /// missing directory.
    fn await_dir(
        &mut self,
        reason: String,
        wait: Result<DirWait, String>,
        tracker: &mut Tracker,
        now: Instant,
    ) {
        let (how, every) = match &wait {
            Ok(w) => (
                format!(
                    "inotify on {}, looked at every {} s",
                    w.ancestor().display(),
                    CONFIRM_PERIOD.as_secs()
                ),
                CONFIRM_PERIOD,
            ),
            Err(e) => (
                format!("a stat every {} ms ({e})", self.period.as_millis()),
                self.period,
            ),
        };
        if !matches!(self.mode, Mode::AwaitingDir { .. }) {
            tracing::info!(
                reason = reason.as_str(),
                how = how.as_str(),
                "the xtables lock's directory does not exist; waiting for it"
            );
        }
        tracker.lock_gone(reason.clone(), now);
        tracker.set_watch(LockWatch::AwaitingDir { reason, how });
        self.pending = Changes::default();
        self.held = None;
        // The wait was made before this look: a directory that appeared meanwhile is found
        // here (and looked at after a period, not at once).
        let next_check = match &wait {
            Ok(w) if w.stale() => now + self.period,
            _ => now + every,
        };
        self.mode = Mode::AwaitingDir {
            wait: wait.ok(),
            next_check,
        };
    }

    /// While the lock's directory is missing: on an event of the wait or when the look is
    /// due, tries the watch again if the directory may be there now.
    fn check_dir(&mut self, tracker: &mut Tracker, now: Instant) {
        let Mode::AwaitingDir { wait, next_check } = &mut self.mode else {
            return;
        };
        let woke = wait.as_ref().is_some_and(DirWait::events);
        if !woke && now < *next_check {
            return;
        }
        let again = match wait {
            // An event that names the next component, or what inotify cannot see: the
            // directory may be there, or the wait must move to a nearer ancestor.
            Some(w) => {
                *next_check = now + CONFIRM_PERIOD;
                woke || w.stale()
            }
            None => {
                *next_check = now + self.period;
                self.lock_path.parent().is_some_and(Path::is_dir)
            }
        };
        if again {
            self.try_watch(tracker, now);
        }
    }

    /// Reads `/proc/locks` every period from now on, and says why.
    fn fall_back(&mut self, reason: String, tracker: &mut Tracker, now: Instant) {
        if !matches!(tracker.watch(), LockWatch::Polling { .. }) {
            tracing::warn!(
                reason = reason.as_str(),
                "cannot watch the xtables lock with inotify; reading /proc/locks every sample period"
            );
        }
        tracker.set_watch(LockWatch::Polling { reason });
        self.mode = Mode::Polling {
            next_sample: now,
            retry: Retry::At(now + RETRY_PERIOD),
        };
    }

    /// The inotify descriptor to wait on, when watching.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.mode {
            Mode::Watching { watch, .. } => Some(watch.as_fd()),
            Mode::AwaitingDir { wait, .. } => wait.as_ref().map(|w| w.as_fd()),
            Mode::Polling { .. } => None,
        }
    }

    /// How long the thread may sleep before [`Runner::advance`] has something to do (events on
    /// [`Runner::fd`] wake it earlier).
    pub fn sleep_for(&self, now: Instant) -> Duration {
        if self.pending.any() {
            return Duration::ZERO;
        }
        let next = match &self.mode {
            Mode::Watching { next_confirm, .. } => match self.gate.due() {
                Some(d) => d.min(*next_confirm),
                None => *next_confirm,
            },
            Mode::AwaitingDir { next_check, .. } => *next_check,
            Mode::Polling { next_sample, .. } => *next_sample,
        };
        next.saturating_duration_since(now)
    }

    /// Handles pending events and due timers; reads `/proc/locks` when due.
    pub fn advance(&mut self, tracker: &mut Tracker, now: Instant) {
        let ch = match &mut self.mode {
            Mode::AwaitingDir { .. } => {
                self.check_dir(tracker, now);
                return;
            }
            Mode::Polling { next_sample, retry } => {
                if now < *next_sample {
                    return;
                }
                *next_sample = now + self.period;
                let retry_now = match *retry {
                    Retry::At(at) => now >= at,
                    Retry::Never => false,
                };
                if retry_now {
                    self.try_watch(tracker, now);
                    if !matches!(self.mode, Mode::Polling { .. }) {
                        // Watching: the first read is due at once, the next step takes it.
                        // Awaiting the directory: nothing to read.
                        return;
                    }
                }
                super::tracker::sample_once(&self.host, &self.lock_path, tracker);
                return;
            }
            Mode::Watching {
                watch,
                next_confirm,
            } => {
                let mut ch = std::mem::take(&mut self.pending);
                ch.merge(watch.events(&mut self.gate, now));
                if now >= *next_confirm {
                    *next_confirm = now + CONFIRM_PERIOD;
                    let (dir_ok, file_ok) = watch.is_current();
                    ch.dir |= !dir_ok;
                    ch.file |= !file_ok;
                }
                if ch.file && !ch.dir {
                    match watch.watch_file() {
                        Ok(()) => {
                            file_changed(watch, tracker, now);
                            self.gate.new_file(now);
                            self.held = None;
                        }
                        Err(reason) => {
                            // The next step polls.
                            self.fall_back(reason, tracker, now);
                            return;
                        }
                    }
                }
                ch
            }
        };
        if ch.dir {
            // The next step reads (watching) or samples (polling) at once, or waits for the
            // directory.
            tracing::info!("the xtables lock directory changed; watching it again");
            self.try_watch(tracker, now);
            return;
        }
        if ch.overflow {
            tracing::warn!("xtables lock inotify queue overflowed; reading /proc/locks");
            self.gate.unknown(now, true);
        }
        if self.gate.due().is_some_and(|d| d <= now) {
            self.read(tracker, now);
        }
    }

    /// One read of `/proc/locks` for the watched file, fed to the tracker.
    fn read(&mut self, tracker: &mut Tracker, now: Instant) {
        let Mode::Watching { watch, .. } = &self.mode else {
            return;
        };
        let Some(lock) = watch.file() else {
            // No file: nothing can hold it.
            self.gate.read_done(now, false);
            return;
        };
        if self.gate.free_by_count() && !self.read_failed {
            // Every open was counted and closed: the holds and waits followed ended now.
            let opts = ObserveOptions {
                since: None,
                ended_now: self.gate.read_options().ended_now,
            };
            tracker.observe_with(lock, &[], now, opts, |_| ProcInfo::default());
            self.gate.full_read();
            self.gate.read_done(now, false);
            self.held = None;
            return;
        }
        if !self.gate.dirty() {
            if let Some(h) = &self.held {
                if fdinfo_holds(&h.fdinfo, h.pid, lock) {
                    let host = &self.host;
                    tracker.observe_with(lock, &h.entries, now, ObserveOptions::default(), |p| {
                        ProcInfo::read(host, p)
                    });
                    self.gate.read_done(now, true);
                    return;
                }
            }
        }
        self.gate.full_read();
        let since = self.gate.read_options().since;
        tracker.count_read();
        let host = &self.host;
        let result = locks::scan_for(host, lock.major, lock.minor, lock.inode);
        // The kernel queues IN_CLOSE before it removes the locks of the closed file, so a
        // hold this read no longer shows because its file was closed has its close queued
        // by now: take the events in before judging what ended (and keep what else they say
        // for the next step).
        let later = watch.events(&mut self.gate, now);
        self.pending.merge(later);
        let opts = ObserveOptions {
            since,
            ended_now: self.gate.read_options().ended_now,
        };
        match result {
            Ok(scan) => {
                self.read_failed = false;
                tracker.observe_with(lock, &scan.entries, now, opts, |p| ProcInfo::read(host, p));
                self.gate.read_done(now, !scan.entries.is_empty());
                self.held = one_holder(&scan.entries).and_then(|pid| {
                    let fdinfo = match self.held.take() {
                        Some(h) if h.pid == pid => Some(h.fdinfo),
                        _ => holder_fdinfo(host, pid, lock),
                    }?;
                    Some(Held {
                        pid,
                        fdinfo,
                        entries: scan.entries,
                    })
                });
            }
            Err(e) => {
                self.read_failed = true;
                tracker.observe_error(e.to_string(), Some(lock));
                self.gate.read_done(now, true);
                self.held = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TH: Duration = Duration::from_millis(500);
    const P: Duration = Duration::from_millis(250);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_short_open_costs_no_read() {
        let t0 = Instant::now();
        let mut g = Gate::new(TH, P);
        assert!(g.idle());
        for i in 0..100u64 {
            let t = t0 + ms(i * 3);
            g.opened(t);
            assert_eq!(g.due(), Some(t + TH));
            g.closed();
            assert!(g.idle(), "closed within the threshold: nothing to read");
        }
    }

    #[test]
    fn a_long_open_is_read_from_the_threshold_then_every_period_until_closed() {
        let t0 = Instant::now();
        let mut g = Gate::new(TH, P);
        g.opened(t0);
        g.opened(t0 + ms(100)); // a waiter queues
        assert_eq!(g.due(), Some(t0 + TH));
        // The first read counts what it finds from the open.
        let o = g.read_options();
        assert_eq!((o.since, o.ended_now), (Some(t0), false));
        g.read_done(t0 + TH, true);
        assert_eq!(g.due(), Some(t0 + TH + P));
        assert_eq!(
            g.read_options().since,
            None,
            "later reads count from themselves"
        );
        g.read_done(t0 + ms(750), true);
        // The holder closes: read soon, and what vanished ended at that read.
        g.closed();
        assert_eq!(g.due(), Some(t0 + ms(760)));
        assert!(g.read_options().ended_now);
        assert!(!g.free_by_count(), "the waiter still has it open");
        g.read_done(t0 + ms(760), true); // the waiter holds now
        g.closed();
        assert!(
            g.free_by_count(),
            "every counted open is closed: nothing to read"
        );
        g.read_done(t0 + ms(800), false);
        assert!(g.idle());
    }

    #[test]
    fn an_open_file_without_a_lock_is_read_every_period_while_open() {
        let t0 = Instant::now();
        let mut g = Gate::new(TH, P);
        g.opened(t0);
        g.read_done(t0 + TH, false);
        assert_eq!(g.due(), Some(t0 + TH + P));
        g.read_done(t0 + TH + P, false);
        g.closed();
        assert!(g.idle());
    }

    #[test]
    fn unknown_openers_are_read_once_and_cleared_by_a_free_lock() {
        let t0 = Instant::now();
        let mut g = Gate::new(TH, P);
        g.unknown(t0, true);
        assert_eq!(g.due(), Some(t0));
        assert!(
            !g.free_by_count(),
            "openers before the watch are not counted"
        );
        assert_eq!(g.read_options().since, None, "a start does not backdate");
        // A close of a file opened before the watch does not go below zero.
        g.closed();
        g.read_done(t0, false);
        assert!(g.idle());
        // A new file: read after the threshold, in case its creator holds it, and count what
        // the read finds from the file's arrival.
        g.new_file(t0 + ms(10));
        assert_eq!(g.due(), Some(t0 + ms(510)));
        assert_eq!(g.read_options().since, Some(t0 + ms(10)));
        // A hold found at start is followed even with no opens counted.
        g.read_done(t0 + ms(510), true);
        assert_eq!(g.due(), Some(t0 + ms(760)));
        g.read_done(t0 + ms(760), false);
        assert!(g.idle());
    }

    #[test]
    fn a_missing_directory_waits_and_a_bad_path_fails() {
        let t = tempfile::tempdir().unwrap();
        let e = Watch::new(&t.path().join("run/xtables.lock")).unwrap_err();
        assert!(
            matches!(&e, SetupError::NoDir(m) if m.contains("cannot stat")),
            "{e:?}"
        );
        std::fs::write(t.path().join("file"), "").unwrap();
        let e = Watch::new(&t.path().join("file/xtables.lock")).unwrap_err();
        assert!(matches!(e, SetupError::NoDir(_)), "{e:?}");
        assert!(matches!(
            Watch::new(Path::new("/")),
            Err(SetupError::Failed(_))
        ));
        // A directory without the file: watched, no file yet.
        let w = Watch::new(&t.path().join("xtables.lock")).unwrap();
        assert_eq!(w.file(), None);
        assert_eq!(w.is_current(), (true, true));
        std::fs::write(t.path().join("xtables.lock"), "").unwrap();
        let mut g = Gate::new(TH, P);
        let ch = w.events(&mut g, Instant::now());
        assert!(ch.file && !ch.dir, "{ch:?}");
        assert_eq!(w.is_current(), (true, false));
    }

    #[test]
    fn opens_and_closes_of_the_file_reach_the_gate() {
        let t = tempfile::tempdir().unwrap();
        let lock = t.path().join("xtables.lock");
        std::fs::write(&lock, "").unwrap();
        let w = Watch::new(&lock).unwrap();
        assert!(w.file().is_some());
        let mut g = Gate::new(TH, P);
        let t0 = Instant::now();
        let f = std::fs::File::open(&lock).unwrap();
        let dup = f.try_clone().unwrap();
        assert_eq!(w.events(&mut g, t0), Changes::default());
        assert_eq!(g.due(), Some(t0 + TH), "open");
        drop(f);
        w.events(&mut g, t0);
        assert!(!g.idle(), "a dup keeps the open file description");
        drop(dup);
        w.events(&mut g, t0);
        assert!(g.idle(), "closed");
        // Removing the file is a change of the file at the path.
        std::fs::remove_file(&lock).unwrap();
        assert!(w.events(&mut g, t0).file);
    }

    /// The holder confirmation reads this process's own fdinfo, on the real kernel.
    #[test]
    fn a_holder_is_confirmed_through_its_fdinfo() {
        use nix::fcntl::{Flock, FlockArg};
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc", t.path().join("proc")).unwrap();
        let host = HostPaths::new(t.path());
        let path = t.path().join("xtables.lock");
        std::fs::write(&path, "").unwrap();
        let lock = LockId::of_path(&path).unwrap();
        let me = std::process::id();
        let f = std::fs::File::open(&path).unwrap();
        let held = Flock::lock(f, FlockArg::LockExclusiveNonblock).unwrap();
        let fdinfo = holder_fdinfo(&host, me, lock).expect("our descriptor of the lock");
        assert!(fdinfo_holds(&fdinfo, me, lock));
        assert!(!fdinfo_holds(&fdinfo, me + 1, lock), "another pid");
        let other = LockId {
            inode: lock.inode + 1,
            ..lock
        };
        assert!(!fdinfo_holds(&fdinfo, me, other), "another file");
        let f = held.unlock().unwrap();
        assert!(!fdinfo_holds(&fdinfo, me, lock), "unlocked");
        drop(f);
        assert!(!fdinfo_holds(&fdinfo, me, lock), "closed");
        assert_eq!(holder_fdinfo(&host, me, lock), None);
        // One holder, or none to confirm.
        let e = |text: &str| locks::parse(text).unwrap();
        assert_eq!(
            one_holder(&e("1: FLOCK ADVISORY WRITE 7 00:13:1 0 EOF\n1: -> FLOCK ADVISORY WRITE 8 00:13:1 0 EOF")),
            Some(7)
        );
        assert_eq!(
            one_holder(&e(
                "1: FLOCK ADVISORY READ 7 00:13:1 0 EOF\n2: FLOCK ADVISORY READ 8 00:13:1 0 EOF"
            )),
            None
        );
        assert_eq!(
            one_holder(&e("1: OFDLCK ADVISORY WRITE -1 00:13:1 0 EOF")),
            None
        );
    }

    /// Runs the sampler thread's loop on simulated time from `t` for `span`: sleeps as long as
    /// [`Runner::sleep_for`] says (no event is waited for), then advances. The wake-ups (at
    /// most 100,000: a loop that does not sleep stops there) and the last instant.
    fn simulate(r: &mut Runner, tr: &mut Tracker, t: Instant, span: Duration) -> (u32, Instant) {
        let end = t + span;
        let mut t = t;
        let mut wakes = 0;
        while wakes < 100_000 {
            let next = t + r.sleep_for(t);
            if next > end {
                break;
            }
            t = next;
            r.advance(tr, t);
            wakes += 1;
        }
        (wakes, t)
    }

    fn start(root: &Path, lock: &Path, t0: Instant) -> (Runner, Tracker) {
        let mut tr = Tracker::new(t0);
        let opts = SamplerOptions {
            period: P,
            open_threshold: TH,
            ..SamplerOptions::default()
        };
        let r = Runner::start(HostPaths::new(root), lock.to_path_buf(), &opts, &mut tr, t0);
        (r, tr)
    }

    /// Issue 43: with the lock's directory missing the sampler thread spun (a look due at
    /// once, every time). Now it sleeps until an event of the wait or the next look.
    #[test]
    fn a_missing_directory_is_waited_for_without_spinning() {
        let t = tempfile::tempdir().unwrap();
        let lock = t.path().join("run/xtables.lock");
        let t0 = Instant::now();
        let (mut r, mut tr) = start(t.path(), &lock, t0);
        match tr.watch() {
            LockWatch::AwaitingDir { reason, how } => {
                assert!(reason.contains("cannot stat"), "{reason}");
                let on = format!("inotify on {}", t.path().display());
                assert!(how.contains(&on), "{how}");
            }
            w => panic!("{w:?}"),
        }
        assert_eq!(r.sleep_for(t0), CONFIRM_PERIOD);
        assert_eq!(r.tries(), 1);
        // A minute of nothing: one look every 5 s, no watch tried, nothing read.
        let (wakes, t1) = simulate(&mut r, &mut tr, t0, Duration::from_secs(60));
        assert_eq!(wakes, 12, "one look per {CONFIRM_PERIOD:?}");
        assert_eq!((r.tries(), tr.reads()), (1, 0));
        let w = tr.drain(t1);
        assert_eq!(w.lock, None);
        assert!(w.error.is_some_and(|e| e.contains("cannot stat")));
        // The directory appears: its event makes the watch, and the first read is due.
        std::fs::create_dir(t.path().join("run")).unwrap();
        r.advance(&mut tr, t1);
        assert_eq!(r.tries(), 2);
        assert_eq!(tr.watch(), &LockWatch::Inotify);
        assert_eq!(r.sleep_for(t1), Duration::ZERO, "a read at once");
    }

    /// Without inotify for the wait, the directory is looked for once per period: N periods
    /// of simulated time make N looks, and the watch is tried only once it is there.
    #[test]
    fn without_inotify_a_missing_directory_costs_one_stat_per_period() {
        let t = tempfile::tempdir().unwrap();
        let lock = t.path().join("run/xtables.lock");
        let t0 = Instant::now();
        let (mut r, mut tr) = start(t.path(), &lock, t0);
        r.await_dir(
            "cannot stat run".into(),
            Err("inotify refused (test)".into()),
            &mut tr,
            t0,
        );
        assert!(r.fd().is_none());
        assert_eq!(r.sleep_for(t0), P);
        let (wakes, t1) = simulate(&mut r, &mut tr, t0, Duration::from_secs(10));
        assert_eq!(wakes, 40, "one look per {P:?}");
        assert_eq!((r.tries(), tr.reads()), (1, 0));
        std::fs::create_dir(t.path().join("run")).unwrap();
        r.advance(&mut tr, t1 + ms(100));
        assert_eq!(r.tries(), 1, "not before the next look");
        r.advance(&mut tr, t1 + P);
        assert_eq!(r.tries(), 2);
        assert_eq!(tr.watch(), &LockWatch::Inotify);
    }

    /// The directory removed while watched, then made again; and the polling fallback's retry
    /// that finds no directory: both wait without reading.
    #[test]
    fn a_directory_that_goes_is_waited_for_and_watched_again() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let lock = run.join("xtables.lock");
        std::fs::write(&lock, "").unwrap();
        let t0 = Instant::now();
        let (mut r, mut tr) = start(t.path(), &lock, t0);
        assert_eq!(tr.watch(), &LockWatch::Inotify);
        std::fs::remove_dir_all(&run).unwrap();
        r.advance(&mut tr, t0 + ms(1));
        assert!(matches!(tr.watch(), LockWatch::AwaitingDir { .. }));
        assert_eq!(r.sleep_for(t0 + ms(1)), CONFIRM_PERIOD);
        std::fs::create_dir(&run).unwrap();
        r.advance(&mut tr, t0 + ms(2));
        assert_eq!(tr.watch(), &LockWatch::Inotify);
        // The fallback's retry, a minute later, finds the directory gone: it waits.
        r.fall_back("inotify refused (test)".into(), &mut tr, t0 + ms(3));
        std::fs::remove_dir(&run).unwrap();
        let (wakes, t1) = simulate(&mut r, &mut tr, t0 + ms(3), RETRY_PERIOD + ms(1));
        assert!(matches!(tr.watch(), LockWatch::AwaitingDir { .. }));
        let polled = (RETRY_PERIOD.as_millis() / P.as_millis()) as u32;
        assert_eq!(wakes, polled + 1, "polled until the retry, then waited");
        assert_eq!(r.sleep_for(t1), CONFIRM_PERIOD);
    }

    #[test]
    fn a_failed_read_is_retried_every_period() {
        let t0 = Instant::now();
        let mut g = Gate::new(TH, P);
        g.unknown(t0, true);
        g.read_done(t0, true);
        assert_eq!(g.due(), Some(t0 + P));
    }
}
