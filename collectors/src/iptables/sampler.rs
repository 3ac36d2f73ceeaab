//! The xtables lock sampler: a small std thread that feeds the [`Tracker`] from
//! `/proc/locks`; `collect` drains the window of observations gathered since the previous call.
//!
//! When it reads `/proc/locks` is [`super::lockwatch`]'s business: with inotify on the lock
//! file, only while the file has stayed open longer than a threshold (500 ms) and then every
//! period (250 ms) until it is closed; without inotify, every period. The window says which
//! ([`super::tracker::LockWatch`]), how many reads were taken and the thread's own CPU time.
//!
//! The thread starts at the collector's first collection and stops when the collector is
//! dropped.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::tracker::*;
use crate::host::HostPaths;

/// Where the sampler takes the time: [`monotonic`], or a clock a test drives, so that how long
/// the lock file stayed open (the threshold before a read of `/proc/locks`) does not depend
/// on how the machine schedules the test's holders.
pub type SamplerClock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The monotonic clock ([`Instant::now`]): the sampler's clock outside tests.
pub fn monotonic() -> SamplerClock {
    Arc::new(Instant::now)
}

/// The running sampler thread. Dropping it stops and joins the thread.
pub struct Sampler {
    tracker: Arc<Mutex<Tracker>>,
    clock: SamplerClock,
    /// Set on drop, before `wake` is closed.
    stop: Arc<AtomicBool>,
    /// Closed on drop: the thread's `poll` wakes up and the thread ends.
    wake: Option<OwnedFd>,
    handle: Option<JoinHandle<()>>,
}

fn lock_tracker(m: &Mutex<Tracker>) -> MutexGuard<'_, Tracker> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// CPU time (user+system) of the calling thread.
fn thread_cpu() -> Option<Duration> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
    let tv = |t: nix::sys::time::TimeVal| {
        let secs = u64::try_from(t.tv_sec()).ok()?;
        let micros = u64::try_from(t.tv_usec()).ok()?;
        Some(Duration::from_secs(secs) + Duration::from_micros(micros))
    };
    Some(tv(u.user_time())? + tv(u.system_time())?)
}

/// Milliseconds for `poll`, rounded up so that a due instant is not missed by a busy loop.
fn poll_timeout(d: Duration) -> nix::poll::PollTimeout {
    let ms = d.as_micros().div_ceil(1000).min(60_000);
    nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::MAX)
}

impl Sampler {
    /// Starts the thread and waits (up to a second) until it watches the lock file: the first
    /// read of `/proc/locks`, when the options ask for one, is in the tracker when this
    /// returns. Every instant the sampler uses is `clock`'s.
    pub fn start(
        host: HostPaths,
        lock_path: PathBuf,
        options: SamplerOptions,
        clock: SamplerClock,
    ) -> std::io::Result<Sampler> {
        let tracker = Arc::new(Mutex::new(Tracker::new(clock())));
        let thread_clock = Arc::clone(&clock);
        let (wake_rx, wake_tx) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
        let thread_tracker = Arc::clone(&tracker);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let period = options.period.max(Duration::from_millis(10));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("xtables-lock-sampler".into())
            .spawn(move || {
                use nix::poll::{poll, PollFd, PollFlags};
                let mut runner = {
                    let mut tr = lock_tracker(&thread_tracker);
                    let r = super::lockwatch::Runner::start(
                        host,
                        lock_path,
                        &SamplerOptions { period, ..options },
                        &mut tr,
                        thread_clock(),
                    );
                    tr.set_cpu(thread_cpu());
                    r
                };
                let _ = ready_tx.send(());
                loop {
                    let timeout = poll_timeout(runner.sleep_for(thread_clock()));
                    {
                        // The write end of `wake` is closed on drop, which ends this wait.
                        let mut fds = vec![PollFd::new(wake_rx.as_fd(), PollFlags::POLLIN)];
                        if let Some(fd) = runner.fd() {
                            fds.push(PollFd::new(fd, PollFlags::POLLIN));
                        }
                        match poll(&mut fds, timeout) {
                            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "xtables lock sampler: poll failed");
                                std::thread::sleep(period);
                            }
                        }
                    }
                    if thread_stop.load(Ordering::Acquire) {
                        break;
                    }
                    let mut tr = lock_tracker(&thread_tracker);
                    runner.advance(&mut tr, thread_clock());
                    tr.set_cpu(thread_cpu());
                }
            })?;
        // A thread that died in its setup closes the channel: no wait then.
        let _ = ready_rx.recv_timeout(Duration::from_secs(1));
        Ok(Sampler {
            tracker,
            clock,
            stop,
            wake: Some(wake_tx),
            handle: Some(handle),
        })
    }

    /// The observations since the previous drain.
    pub fn drain(&self) -> Window {
        lock_tracker(&self.tracker).drain((self.clock)())
    }

    /// Reads of `/proc/locks` since the sampler started.
    pub fn locks_reads(&self) -> u64 {
        lock_tracker(&self.tracker).reads()
    }

    /// How the lock is watched right now.
    pub fn watch(&self) -> LockWatch {
        lock_tracker(&self.tracker).watch().clone()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        drop(self.wake.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_sampler_stops_its_thread_at_once() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("run")).unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/locks"), "").unwrap();
        std::fs::write(t.path().join("run/xtables.lock"), "").unwrap();
        for inotify in [true, false] {
            let s = Sampler::start(
                HostPaths::new(t.path()),
                t.path().join("run/xtables.lock"),
                SamplerOptions {
                    period: Duration::from_secs(3600),
                    inotify,
                    ..SamplerOptions::default()
                },
                monotonic(),
            )
            .unwrap();
            let started = Instant::now();
            while s.locks_reads() == 0 && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(s.locks_reads(), 1, "one read at start");
            assert_eq!(s.watch() == LockWatch::Inotify, inotify);
            // Dropped on a thread of its own: a drop that waited for the next period (an
            // hour) fails here after 30 s rather than hanging the test.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                drop(s);
                let _ = tx.send(());
            });
            assert!(
                rx.recv_timeout(Duration::from_secs(30)).is_ok(),
                "the sampler's thread did not stop when it was dropped"
            );
        }
    }

    /// Where nothing can hold the lock (no legacy tables), the watch starts without reading
    /// `/proc/locks`, and reads it once the file has stayed open past the threshold.
    #[test]
    fn a_quiet_start_reads_nothing_until_the_file_stays_open() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("run")).unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/locks"), "").unwrap();
        let lock = t.path().join("run/xtables.lock");
        std::fs::write(&lock, "").unwrap();
        let s = Sampler::start(
            HostPaths::new(t.path()),
            lock.clone(),
            SamplerOptions {
                period: Duration::from_millis(20),
                open_threshold: Duration::from_millis(50),
                read_at_start: false,
                ..SamplerOptions::default()
            },
            monotonic(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(s.watch(), LockWatch::Inotify);
        assert_eq!(s.locks_reads(), 0, "no read at start");
        let f = std::fs::File::open(&lock).unwrap();
        let t0 = Instant::now();
        while s.locks_reads() == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(s.locks_reads() >= 1, "read once the file stayed open");
        drop(f);
    }
}
