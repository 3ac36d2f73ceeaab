//! pid 1's host-wide tables that several collectors read in one round: its unix sockets
//! (`/proc/1/net/unix`) and its mounts (`/proc/1/mountinfo`); and what the daemon locator
//! said of each daemon ([`super::daemons::locate`]).
//!
//! A `check` on this VM's root read the unix socket table nine times (the daemon locator of
//! seven collectors, [`super::daemons`], and the runtime collector) and the mount table five
//! times (disk and hardware twice each, runtime once), two samples one second apart (counted
//! with `strace -f -e trace=openat`). Each read makes the kernel walk and print the whole
//! table: a node's unix table holds every socket of the host's network namespace (systemd's,
//! the runtime's, a shim's per container; 3,000 sockets print 278 KB and cost 2.5–3.2 ms of
//! CPU per read here), its mount table every pod's volumes. With sharing on, the first
//! caller of a round reads and parses, and the others within the window take the same
//! parsed table ([`Arc`]); a failed read is not kept (the next caller tries again).
//!
//! The daemon locator is asked by seven collectors per round, each for its daemons (the
//! kubelet, the runtimes, kube-proxy, the time daemons): each answer took a `stat` of the
//! daemon's unit cgroup in three hierarchies and a read of its `cgroup.procs` (111 of a
//! `check`'s 870 `statx` calls on this VM's root, `strace -f -k`). With sharing on, a name's
//! answer serves the callers within the window; callers that come while one is located wait
//! for it. The answer is a set of pids the callers confirm by their `stat` (a daemon that
//! restarted meanwhile is dead at its old pid, and they fall back to their own search).
//!
//! Off unless the agent turns it on ([`super::Node::sharing_reads`]): `check` does, with a
//! window that covers both its samples (nothing it judges compares these tables between
//! them: whether a daemon listens, where a filesystem is mounted); `serve` does not,
//! because a kept table (a few hundred KB of mounts on a node with many pods) would stay
//! resident between its rounds, and its collectors, which follow the daemons they found,
//! rarely read these tables twice in one round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::located::Located;
use crate::host::HostPaths;
use crate::proc::{mountinfo, net_unix};
use crate::ReadError;

/// One table: the last read and when it began.
struct Memo<T> {
    last: Mutex<Option<(Instant, Arc<T>)>>,
    /// Reads made (what the tests count).
    reads: std::sync::atomic::AtomicU64,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            last: Mutex::new(None),
            reads: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl<T> Memo<T> {
    fn lock(&self) -> MutexGuard<'_, Option<(Instant, Arc<T>)>> {
        // A panic while reading leaves the slot as it was: keep using it.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table read within `window` before now, else a new read (kept when `window` is
    /// not zero). Callers that come while a read is under way wait for it and share it.
    fn get(
        &self,
        window: Duration,
        read: impl FnOnce() -> Result<T, ReadError>,
    ) -> Result<Arc<T>, ReadError> {
        let mut last = self.lock();
        if let Some((at, table)) = last.as_ref() {
            if at.elapsed() < window {
                return Ok(Arc::clone(table));
            }
        }
        let began = Instant::now();
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let table = Arc::new(read()?);
        *last = (!window.is_zero()).then(|| (began, Arc::clone(&table)));
        Ok(table)
    }

    fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// pid 1's tables as the collectors of one node share them (see the module documentation).
#[derive(Default)]
pub struct SharedReads {
    window: Duration,
    unix: Memo<Vec<net_unix::Bound>>,
    mounts: Memo<Vec<mountinfo::Mount>>,
    located: Mutex<Answers>,
}

/// The daemon locator's answers by name, each with when it was found; and how many it found.
#[derive(Default)]
pub(crate) struct Answers {
    by_name: HashMap<String, (Instant, Located)>,
    found: u64,
}

impl Answers {
    /// The answer for `name` found within `window` before now.
    pub(crate) fn get(&self, name: &str, window: Duration) -> Option<Located> {
        let (at, l) = self.by_name.get(name)?;
        (at.elapsed() < window).then(|| l.clone())
    }

    /// Counts an answer found, and keeps it when `window` is not zero.
    pub(crate) fn keep(&mut self, name: &str, located: &Located, window: Duration) {
        self.found += 1;
        if !window.is_zero() {
            self.by_name
                .insert(name.to_string(), (Instant::now(), located.clone()));
        }
    }
}

impl std::fmt::Debug for SharedReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedReads")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl SharedReads {
    /// Tables read within `window` are shared; a zero window shares nothing.
    pub fn new(window: Duration) -> SharedReads {
        SharedReads {
            window,
            ..SharedReads::default()
        }
    }

    /// How long what is read or found serves the callers (zero: not at all).
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// The daemon locator's answers, held while one call of it finds what is missing (a
    /// caller that comes meanwhile waits and takes them).
    pub(crate) fn answers(&self) -> MutexGuard<'_, Answers> {
        // A panic while locating leaves whole answers: keep using them.
        self.located.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the daemon locator found (not taken from another caller's).
    pub fn located(&self) -> u64 {
        self.answers().found
    }

    /// The unix sockets of pid 1's network namespace bound to a path ([`net_unix::read_bound`]).
    pub fn unix_sockets(&self, host: &HostPaths) -> Result<Arc<Vec<net_unix::Bound>>, ReadError> {
        self.unix.get(self.window, || {
            net_unix::read_bound(&net_unix::path(host, 1))
        })
    }

    /// pid 1's mounts ([`mountinfo::read`]).
    pub fn mounts(&self, host: &HostPaths) -> Result<Arc<Vec<mountinfo::Mount>>, ReadError> {
        self.mounts.get(self.window, || mountinfo::read(host, 1))
    }

    /// Reads made of the unix socket table and of the mount table.
    pub fn reads(&self) -> (u64, u64) {
        (self.unix.reads(), self.mounts.reads())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_with_tables() -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc/1/net")).unwrap();
        std::fs::write(
            t.path().join("proc/1/net/unix"),
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             0000000000000000: 00000002 00000000 00010000 0001 01 1001 /run/containerd/containerd.sock\n",
        )
        .unwrap();
        std::fs::write(
            t.path().join("proc/1/mountinfo"),
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n",
        )
        .unwrap();
        let host = HostPaths::new(t.path());
        (t, host)
    }

    #[test]
    fn within_the_window_one_read_serves_every_caller() {
        let (_t, host) = host_with_tables();
        let shared = SharedReads::new(Duration::from_secs(60));
        let a = shared.unix_sockets(&host).unwrap();
        let b = shared.unix_sockets(&host).unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second caller takes the first read"
        );
        assert_eq!(a[0].path, "/run/containerd/containerd.sock");
        assert!(a[0].listening);
        shared.mounts(&host).unwrap();
        let m = shared.mounts(&host).unwrap();
        assert_eq!(m[0].mount_point, std::path::Path::new("/"));
        assert_eq!(shared.reads(), (1, 1));
    }

    #[test]
    fn threads_that_ask_at_once_share_one_read() {
        let (_t, host) = host_with_tables();
        let shared = SharedReads::new(Duration::from_secs(60));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    shared.unix_sockets(&host).unwrap();
                    shared.mounts(&host).unwrap();
                });
            }
        });
        assert_eq!(shared.reads(), (1, 1));
    }

    #[test]
    fn a_zero_window_reads_each_time_and_a_new_table_is_seen() {
        let (t, host) = host_with_tables();
        let shared = SharedReads::new(Duration::ZERO);
        assert_eq!(shared.unix_sockets(&host).unwrap().len(), 1);
        std::fs::write(t.path().join("proc/1/net/unix"), "Num RefCount\n").unwrap();
        assert!(shared.unix_sockets(&host).unwrap().is_empty());
        assert_eq!(shared.reads().0, 2);
    }

    #[test]
    fn a_table_older_than_the_window_is_read_again() {
        let (t, host) = host_with_tables();
        let shared = SharedReads::new(Duration::from_millis(30));
        assert_eq!(shared.unix_sockets(&host).unwrap().len(), 1);
        std::fs::write(t.path().join("proc/1/net/unix"), "Num RefCount\n").unwrap();
        std::thread::sleep(Duration::from_millis(40));
        assert!(shared.unix_sockets(&host).unwrap().is_empty());
        assert_eq!(shared.reads().0, 2);
    }

    /// A daemon's answer serves the callers within the window, is found again once older,
    /// and with a zero window is never kept.
    #[test]
    fn the_daemon_locators_answers_are_kept_for_the_window_only() {
        let pids = Located::InCgroup(vec![42]);
        let shared = SharedReads::new(Duration::from_millis(30));
        let w = shared.window();
        assert_eq!(shared.answers().get("kubelet", w), None);
        shared.answers().keep("kubelet", &pids, w);
        assert_eq!(shared.answers().get("kubelet", w), Some(pids.clone()));
        assert_eq!(shared.answers().get("containerd", w), None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(shared.answers().get("kubelet", w), None, "aged");
        let apart = SharedReads::new(Duration::ZERO);
        apart.answers().keep("kubelet", &pids, apart.window());
        assert_eq!(apart.answers().get("kubelet", apart.window()), None);
        assert_eq!((shared.located(), apart.located()), (1, 1));
    }

    #[test]
    fn a_failed_read_is_not_kept() {
        let (t, host) = host_with_tables();
        std::fs::remove_file(t.path().join("proc/1/mountinfo")).unwrap();
        let shared = SharedReads::new(Duration::from_secs(60));
        assert!(shared.mounts(&host).is_err());
        std::fs::write(
            t.path().join("proc/1/mountinfo"),
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n",
        )
        .unwrap();
        assert_eq!(shared.mounts(&host).unwrap().len(), 1);
        assert_eq!(shared.reads().1, 2);
    }
}
