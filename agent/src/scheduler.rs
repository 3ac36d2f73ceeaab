//! Runs one collector at a time on its own thread, with a timeout, at most one run in flight.
//!
//! A [`Runner`] owns one collector. [`Runner::run_once`] takes the collector out of its slot,
//! runs `collect` on a worker thread inside `catch_unwind`, and waits for the result up to
//! the timeout ([`Runner::start`] and [`Started::finish`] split the two, so one thread can
//! start many runs and then wait for them). The worker is a fresh OS thread, or the one of
//! the previous run while it lingers ([`Runner::linger`]: `check` keeps it for its second
//! sample; `serve`'s end with their run). The worker thread puts the collector back into the slot when `collect`
//! returns, so a run that hangs (a read or `statfs` on a dead NFS or FUSE mount) keeps the collector
//! checked out: later calls report [`Outcome::StillRunning`] at once and start nothing. A
//! panicking collector is dropped (its state may be half-updated) and re-created through the
//! runner's factory on the next run. Worker threads are plain detached `std::thread`s: a hung
//! one is never joined, so it cannot hold up shutdown (nor can a lingering one).
//!
//! The worker measures its own thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, user + system)
//! around `collect` and adds it to the runner's running total, also when the run ends after
//! its timeout or panics: [`RunReport::cpu_total`] is what
//! `node_doctor_collector_cpu_seconds_total` exports. A collector's own helper threads (the
//! iptables lock sampler) are not in it; the process's `process_cpu_seconds_total` is.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use collectors::{CollectContext, Collection, Collector, Status};
use time::OffsetDateTime;

use crate::timefmt::{fmt_duration, rfc3339};

/// Builds a fresh collector after the previous one panicked.
pub type Factory = Arc<dyn Fn() -> Option<Box<dyn Collector>> + Send + Sync>;

/// Where a runner reads the time for its deadlines and durations: `Instant::now`, or a
/// test's clock ([`Runner::with_clock`]), so that tests state durations exactly instead of
/// bounding the wall clock.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

enum Slot {
    /// Ready to run.
    Idle(Box<dyn Collector>),
    /// Checked out by a worker thread since the given instant (and wall-clock time).
    Running(Instant, OffsetDateTime),
    /// The previous collector panicked (or could not be built): build a new one first.
    NeedsNew,
}

/// What one call of [`Runner::run_once`] produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `collect` returned within the timeout.
    Completed(Collection),
    /// This run did not finish within `timeout`; its thread is left running.
    TimedOut { timeout: Duration },
    /// An earlier run is still in flight (it timed out); no new run was started.
    StillRunning {
        timeout: Duration,
        /// When the stuck run started.
        since: OffsetDateTime,
        stuck_for: Duration,
    },
    /// `collect` panicked with this message; the collector will be re-created.
    Panicked(String),
    /// The collector could not be (re-)created or its thread not started.
    Failed(String),
}

impl Outcome {
    /// The status this outcome gives the collector.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Completed(c) => c.status.clone(),
            Outcome::TimedOut { timeout } => {
                Status::Error(format!("timed out after {}", fmt_duration(*timeout)))
            }
            // Stable across cycles, so that the status does not "change" on every run.
            Outcome::StillRunning { timeout, since, .. } => Status::Error(format!(
                "timed out after {}; the run started at {} is still blocked (a hung read on the host), so no new run was started",
                fmt_duration(*timeout),
                rfc3339(*since)
            )),
            Outcome::Panicked(msg) => Status::Error(format!(
                "panicked: {msg} (the collector is re-created on its next run)"
            )),
            Outcome::Failed(msg) => Status::Error(msg.clone()),
        }
    }

    /// True when the collector's own judgement of the host is in this outcome, i.e. its
    /// findings replace the previous ones. Timeouts, panics and `Status::Error` keep the
    /// findings of the latest successful run.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Completed(c) if !matches!(c.status, Status::Error(_)))
    }
}

/// One run: what happened and how long the caller waited.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub outcome: Outcome,
    pub duration: Duration,
    /// CPU time (user + system) of every run of this collector so far, this one included
    /// when it finished; runs that finish after their timeout add theirs when they end.
    /// Never decreases.
    pub cpu_total: Duration,
}

/// CPU time (user + system) of the calling thread, `CLOCK_THREAD_CPUTIME_ID`; `None` when
/// the kernel refuses (it does not). Not `getrusage(RUSAGE_THREAD)`: that reads the
/// scheduler's runtime as of the thread's last accounting update (a tick or a switch), so a
/// run of a few milliseconds on a fresh thread often reads as zero; this clock includes the
/// time since.
pub fn thread_cpu() -> Option<Duration> {
    use nix::time::{clock_gettime, ClockId};
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(
        u64::try_from(t.tv_sec()).ok()?,
        u32::try_from(t.tv_nsec()).ok()?,
    ))
}

/// Owns one collector and runs it.
pub struct Runner {
    name: String,
    slot: Arc<Mutex<Slot>>,
    factory: Factory,
    /// Nanoseconds of CPU time of all runs so far (see [`RunReport::cpu_total`]).
    cpu_nanos: Arc<AtomicU64>,
    /// How long `run_once` waits for `collect`.
    pub timeout: Duration,
    /// How often the serve loop runs it.
    pub interval: Duration,
    /// The worker thread that runs it, while one is alive ([`Runner::dispatch`]).
    worker: Arc<Mutex<Option<mpsc::Sender<Job>>>>,
    /// How long a worker waits for the next run after one ([`Runner::linger`]).
    linger: Duration,
    clock: Clock,
    /// Called by a worker whose linger ran out, before it takes the handle's lock (tests: a
    /// run handed over right then).
    #[cfg(test)]
    give_up_hook: Option<Arc<dyn Fn() + Send + Sync>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker never panics while holding a lock (collect runs outside it), but be safe.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runner {
    pub fn new(
        collector: Box<dyn Collector>,
        factory: Factory,
        interval: Duration,
        timeout: Duration,
    ) -> Runner {
        Runner {
            name: collector.name().to_string(),
            slot: Arc::new(Mutex::new(Slot::Idle(collector))),
            factory,
            cpu_nanos: Arc::new(AtomicU64::new(0)),
            timeout,
            interval,
            worker: Arc::new(Mutex::new(None)),
            linger: Duration::ZERO,
            clock: Arc::new(Instant::now),
            #[cfg(test)]
            give_up_hook: None,
        }
    }

    /// Reads the time from `clock` instead of `Instant::now` (tests). Only the measure
    /// changes: `finish` still waits on the real clock, for what is left of the timeout
    /// by `clock`.
    #[cfg(test)]
    pub(crate) fn with_clock(mut self, clock: Clock) -> Runner {
        self.clock = clock;
        self
    }

    fn now(&self) -> Instant {
        (self.clock)()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the collector once, waiting at most `timeout`. Never panics, never blocks longer
    /// than `timeout` (plus thread start-up).
    pub fn run_once(&self, ctx: &CollectContext) -> RunReport {
        self.start(ctx).finish()
    }

    /// Starts one run and returns at once: [`Started::finish`] waits for it (at most the
    /// timeout from now). `check` starts every collector's run and then waits for each, so
    /// that no thread waits on the side (issue 32: a thread made and torn down costs
    /// 35-65 µs of CPU on a 2-vCPU VM, a tenth of a `check` when there were four per
    /// collector).
    pub fn start(&self, ctx: &CollectContext) -> Started<'_> {
        let start = self.now();
        let state = self.start_inner(ctx, start);
        Started {
            runner: self,
            start,
            state,
        }
    }

    /// Keeps each run's worker thread for `linger` after its run, for the next run to reuse
    /// (`check`'s second sample); zero (the default, `serve`) ends it with its run, so that
    /// no idle thread keeps a stack between runs minutes apart.
    pub fn linger(mut self, linger: Duration) -> Runner {
        self.linger = linger;
        self
    }

    fn start_inner(&self, ctx: &CollectContext, start: Instant) -> Pending {
        let collector = {
            let mut slot = lock(&self.slot);
            let now = OffsetDateTime::now_utc();
            match std::mem::replace(&mut *slot, Slot::Running(start, now)) {
                Slot::Idle(c) => c,
                Slot::Running(since, wall) => {
                    *slot = Slot::Running(since, wall);
                    return Pending::Done(Outcome::StillRunning {
                        timeout: self.timeout,
                        since: wall,
                        stuck_for: self.now().saturating_duration_since(since),
                    });
                }
                Slot::NeedsNew => match (self.factory)() {
                    Some(c) => c,
                    None => {
                        *slot = Slot::NeedsNew;
                        return Pending::Done(Outcome::Failed(format!(
                            "collector {} could not be re-created",
                            self.name
                        )));
                    }
                },
            }
        };
        let (tx, rx) = mpsc::channel::<Done>();
        let job = Job {
            collector,
            ctx: ctx.clone(),
            reply: tx,
        };
        if let Err(e) = self.dispatch(job) {
            *lock(&self.slot) = Slot::NeedsNew;
            return Pending::Done(Outcome::Failed(format!(
                "could not start a thread for {}: {e}",
                self.name
            )));
        }
        Pending::Waiting(rx)
    }

    /// Hands `job` to this runner's lingering worker, or to a new one.
    fn dispatch(&self, job: Job) -> std::io::Result<()> {
        let mut worker = lock(&self.worker);
        let job = match worker.take() {
            Some(tx) => match tx.send(job) {
                Ok(()) => {
                    *worker = Some(tx);
                    return Ok(());
                }
                // Its worker has ended: start another.
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        let (tx, rx) = mpsc::channel::<Job>();
        // Cannot fail: `rx` is alive.
        let _ = tx.send(job);
        let w = Worker {
            jobs: rx,
            handle: Arc::clone(&self.worker),
            slot: Arc::clone(&self.slot),
            cpu_nanos: Arc::clone(&self.cpu_nanos),
            linger: self.linger,
            clock: Arc::clone(&self.clock),
            #[cfg(test)]
            give_up_hook: self.give_up_hook.clone(),
        };
        std::thread::Builder::new()
            .name(format!("collect-{}", self.name))
            .spawn(move || w.run())?;
        *worker = Some(tx);
        Ok(())
    }
}

/// A run [`Runner::start`]ed: its result, once [`Started::finish`] has waited for it.
pub struct Started<'r> {
    runner: &'r Runner,
    start: Instant,
    state: Pending,
}

enum Pending {
    /// Decided without running (still running, could not be built or started).
    Done(Outcome),
    /// Running on a worker thread.
    Waiting(mpsc::Receiver<Done>),
}

impl Started<'_> {
    /// Waits for the run up to the runner's timeout from its start.
    pub fn finish(self) -> RunReport {
        let r = self.runner;
        let elapsed = || r.now().saturating_duration_since(self.start);
        let (outcome, ended) = match self.state {
            Pending::Done(o) => (o, None),
            Pending::Waiting(rx) => {
                let left = r.timeout.saturating_sub(elapsed());
                match rx.recv_timeout(left) {
                    // Waited for after its deadline (others were waited for first) and
                    // returned after it: as late as one waited for alone.
                    Ok((_, at)) if at.saturating_duration_since(self.start) > r.timeout => {
                        (Outcome::TimedOut { timeout: r.timeout }, None)
                    }
                    // The final safety net over host text: whatever a collector put in its
                    // status, findings and labels, no more than the caps of
                    // `collectors::bounded` go on.
                    Ok((Ok(collection), at)) => {
                        (Outcome::Completed(collection.bounded()), Some(at))
                    }
                    Ok((Err(msg), at)) => (
                        Outcome::Panicked(collectors::bounded::truncate(
                            msg,
                            collectors::bounded::MESSAGE_BYTES,
                        )),
                        Some(at),
                    ),
                    Err(RecvTimeoutError::Timeout) => {
                        (Outcome::TimedOut { timeout: r.timeout }, None)
                    }
                    Err(RecvTimeoutError::Disconnected) => (
                        Outcome::Panicked("the worker thread ended without a result".to_string()),
                        None,
                    ),
                }
            }
        };
        let duration = match (&outcome, ended) {
            (Outcome::StillRunning { stuck_for, .. }, _) => *stuck_for,
            (_, Some(at)) => at.saturating_duration_since(self.start),
            // A run not waited for beyond its timeout took the timeout.
            (Outcome::TimedOut { timeout }, None) => elapsed().min(*timeout),
            (_, None) => elapsed(),
        };
        RunReport {
            outcome,
            duration,
            cpu_total: Duration::from_nanos(r.cpu_nanos.load(Ordering::Acquire)),
        }
    }
}

/// What a worker hands back: the collection (or the panic's message) and when `collect`
/// returned, so that a run waited for after others (`check`) is timed as it ran.
type Done = (Result<Collection, String>, Instant);

/// One run for a worker: the collector (checked out of its slot), and where the result goes.
struct Job {
    collector: Box<dyn Collector>,
    ctx: CollectContext,
    reply: mpsc::Sender<Done>,
}

/// A runner's worker thread: runs the jobs it is handed, one at a time, then waits up to
/// `linger` for another before it ends.
struct Worker {
    jobs: mpsc::Receiver<Job>,
    /// The runner's handle on the worker ([`Runner::dispatch`] sends there); emptied, under
    /// its lock, when this worker ends, so that a job is never sent to a worker that left.
    handle: Arc<Mutex<Option<mpsc::Sender<Job>>>>,
    slot: Arc<Mutex<Slot>>,
    cpu_nanos: Arc<AtomicU64>,
    linger: Duration,
    clock: Clock,
    #[cfg(test)]
    give_up_hook: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Worker {
    fn run(self) {
        loop {
            let job = match self.jobs.recv_timeout(self.linger) {
                Ok(job) => job,
                Err(_) => {
                    #[cfg(test)]
                    if let Some(hook) = &self.give_up_hook {
                        hook();
                    }
                    // No job within `linger`: end, unless one came in while the lock was
                    // free (dispatch sends under the same lock).
                    let mut handle = lock(&self.handle);
                    match self.jobs.try_recv() {
                        Ok(job) => job,
                        Err(_) => {
                            *handle = None;
                            return;
                        }
                    }
                }
            };
            self.run_job(job);
        }
    }

    fn run_job(&self, job: Job) {
        let Job {
            mut collector,
            ctx,
            reply,
        } = job;
        let before = thread_cpu();
        let result = catch_unwind(AssertUnwindSafe(|| collector.collect(&ctx)));
        // Counted before the result is handed over, so the report includes it.
        if let (Some(b), Some(a)) = (before, thread_cpu()) {
            let spent = u64::try_from(a.saturating_sub(b).as_nanos()).unwrap_or(u64::MAX);
            self.cpu_nanos.fetch_add(spent, Ordering::AcqRel);
        }
        let result = match result {
            Ok(collection) => {
                *lock(&self.slot) = Slot::Idle(collector);
                Ok(collection)
            }
            Err(payload) => {
                drop(collector);
                *lock(&self.slot) = Slot::NeedsNew;
                Err(panic_message(payload.as_ref()))
            }
        };
        // The receiver is gone when the run timed out: the result is stale, drop it.
        let _ = reply.send((result, (self.clock)()));
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

#[cfg(test)]
pub(crate) mod fakes {
    //! In-process fake collectors for scheduler and state tests; they need no host.
    use super::*;
    use collectors::{Finding, Metric, Severity, Text};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Sleeps `delay` then reports ok with `runs` as a metric.
    pub struct Slow {
        pub name: &'static str,
        pub delay: Duration,
        pub runs: u64,
    }
    impl Collector for Slow {
        fn name(&self) -> &'static str {
            self.name
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            std::thread::sleep(self.delay);
            self.runs += 1;
            let mut c = Collection::new(Status::Ok);
            c.metrics.push(Metric::counter(
                "node_doctor_fake_runs_total",
                "Runs of the fake collector.",
                self.runs as f64,
            ));
            c
        }
    }

    /// A clock that moves only when the test says ([`Runner::with_clock`]).
    #[derive(Clone)]
    pub struct TestClock(Arc<Mutex<Instant>>);
    impl TestClock {
        pub fn new() -> TestClock {
            TestClock(Arc::new(Mutex::new(Instant::now())))
        }
        pub fn advance(&self, by: Duration) {
            *lock(&self.0) += by;
        }
        pub fn clock(&self) -> Clock {
            let t = Arc::clone(&self.0);
            Arc::new(move || *lock(&t))
        }
    }

    /// Advances the test's clock by `cost` instead of sleeping, then reports ok with `runs`
    /// as a metric.
    pub struct Ticking {
        pub clock: TestClock,
        pub cost: Duration,
        pub runs: u64,
    }
    impl Collector for Ticking {
        fn name(&self) -> &'static str {
            "ticking"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            self.clock.advance(self.cost);
            self.runs += 1;
            let mut c = Collection::new(Status::Ok);
            c.metrics.push(Metric::counter(
                "node_doctor_fake_runs_total",
                "Runs of the fake collector.",
                self.runs as f64,
            ));
            c
        }
    }

    /// The test's side of a [`Gated`] collector: how many runs entered and finished, and
    /// the gate that lets one run finish.
    pub struct Gate {
        pub entered: Arc<AtomicUsize>,
        pub finished: Arc<AtomicUsize>,
        release: mpsc::Sender<()>,
    }
    impl Gate {
        pub fn new(name: &'static str) -> (Gate, Box<dyn Collector>) {
            let (release, rx) = mpsc::channel();
            let gate = Gate {
                entered: Arc::new(AtomicUsize::new(0)),
                finished: Arc::new(AtomicUsize::new(0)),
                release,
            };
            let c = Gated {
                name,
                entered: Arc::clone(&gate.entered),
                finished: Arc::clone(&gate.finished),
                release: rx,
                runs: 0,
            };
            (gate, Box::new(c))
        }
        /// Lets one run (this one or the next) finish.
        pub fn open(&self) {
            let _ = self.release.send(());
        }
        /// Waits until `n` runs have entered `collect` (fails after 30 s: a hang stopper).
        pub fn wait_entered(&self, n: usize) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.entered.load(Ordering::SeqCst) < n {
                assert!(Instant::now() < deadline, "{n} runs never entered");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Finishes a run only when its [`Gate`] is opened, then reports ok with `runs` as a
    /// metric. Gives up waiting after 30 s, so that a runner that wrongly waits for it
    /// fails its test (the run shows as finished) rather than hanging it.
    pub struct Gated {
        name: &'static str,
        entered: Arc<AtomicUsize>,
        finished: Arc<AtomicUsize>,
        release: mpsc::Receiver<()>,
        runs: u64,
    }
    impl Collector for Gated {
        fn name(&self) -> &'static str {
            self.name
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let _ = self.release.recv_timeout(Duration::from_secs(30));
            self.runs += 1;
            self.finished.fetch_add(1, Ordering::SeqCst);
            let mut c = Collection::new(Status::Ok);
            c.metrics.push(Metric::counter(
                "node_doctor_fake_runs_total",
                "Runs of the fake collector.",
                self.runs as f64,
            ));
            c
        }
    }

    /// Runs `f` on a thread of its own and returns its result; fails when `f` has not
    /// returned within 30 s (a hang stopper, not a speed budget: what is tested would
    /// otherwise block for an hour or for ever).
    pub fn within_30s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what}: still blocked after 30 s"))
    }

    /// Blocks until `release` is sent (or forever), counting entries.
    pub struct Blocking {
        pub entered: Arc<AtomicUsize>,
        pub release: Arc<Mutex<mpsc::Receiver<()>>>,
    }
    impl Collector for Blocking {
        fn name(&self) -> &'static str {
            "blocking"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let rx = self.release.lock().unwrap_or_else(|e| e.into_inner());
            let _ = rx.recv();
            Collection::new(Status::Ok)
        }
    }

    /// Panics on the runs listed in `panic_on` (1-based, counted across re-creations via
    /// `calls`), else reports ok with its own per-instance run count as a metric.
    pub struct Panicky {
        pub calls: Arc<AtomicUsize>,
        pub panic_on: Vec<usize>,
        pub own_runs: u64,
    }
    impl Collector for Panicky {
        fn name(&self) -> &'static str {
            "panicky"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            self.own_runs += 1;
            if self.panic_on.contains(&n) {
                panic!("boom on call {n}");
            }
            let mut c = Collection::new(Status::Ok);
            c.metrics.push(Metric::gauge(
                "node_doctor_fake_own_runs",
                "Runs of this instance.",
                self.own_runs as f64,
            ));
            c
        }
    }

    /// Returns the scripted collections in turn (the last one repeats).
    pub struct Scripted {
        pub name: &'static str,
        pub script: Vec<Collection>,
        pub i: usize,
    }
    impl Collector for Scripted {
        fn name(&self) -> &'static str {
            self.name
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            let c = self.script[self.i.min(self.script.len() - 1)].clone();
            self.i += 1;
            c
        }
    }

    pub fn finding(id: &str, subject: &str, sev: Severity) -> Finding {
        Finding::new(
            id,
            sev,
            Text::new(format!("{id} title"), format!("{id} 标题")),
            Text::new(format!("{id} on {subject}"), format!("{subject} 上的 {id}")),
        )
        .subject(subject)
        .evidence("used_percent", 97.5)
        .step(Text::new("free space", "清理空间"))
        .command(collectors::cmd!(
            "df -h {mount_point}",
            mount_point = subject
        ))
        .source(collectors::finding::HANDBOOK, "节点磁盘爆满排障处理")
    }

    pub fn with(status: Status, findings: Vec<Finding>) -> Collection {
        let mut c = Collection::new(status);
        c.findings = findings;
        c
    }

    pub fn ctx() -> CollectContext {
        CollectContext::new("node-a", collectors::HostNetns::NotProcfs)
    }

    pub fn no_factory() -> Factory {
        Arc::new(|| None)
    }
}

#[cfg(test)]
mod tests {
    use super::fakes::*;
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs until the previous (stuck) run has handed the collector back, up to 5 s.
    fn run_until_started(r: &Runner) -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let o = r.run_once(&ctx()).outcome;
            if !matches!(o, Outcome::StillRunning { .. }) || Instant::now() > deadline {
                return o;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn runner(c: Box<dyn Collector>, factory: Factory, timeout_ms: u64) -> Runner {
        Runner::new(
            c,
            factory,
            Duration::from_secs(15),
            Duration::from_millis(timeout_ms),
        )
    }

    #[test]
    fn fast_collector_completes_and_keeps_state_between_runs() {
        let clock = TestClock::new();
        let r = runner(
            Box::new(Ticking {
                clock: clock.clone(),
                cost: Duration::from_millis(5),
                runs: 0,
            }),
            no_factory(),
            2000,
        )
        .with_clock(clock.clock());
        for expected in 1..=3 {
            let rep = r.run_once(&ctx());
            match rep.outcome {
                Outcome::Completed(c) => {
                    assert_eq!(c.status, Status::Ok);
                    assert_eq!(c.metrics[0].value, expected as f64, "state is kept");
                }
                other => panic!("unexpected {other:?}"),
            }
            // The run's own time by the runner's clock, exactly.
            assert_eq!(rep.duration, Duration::from_millis(5));
        }
    }

    #[test]
    fn slow_collector_times_out_then_is_reused_after_it_finishes() {
        let (gate, slow) = Gate::new("slow");
        let r = runner(slow, no_factory(), 50);
        let rep = r.run_once(&ctx());
        assert_eq!(
            rep.outcome,
            Outcome::TimedOut {
                timeout: Duration::from_millis(50)
            }
        );
        // Returned while the run is still in `collect` (its gate is shut): it did not
        // wait for it.
        assert_eq!(gate.entered.load(Ordering::SeqCst), 1);
        assert_eq!(
            gate.finished.load(Ordering::SeqCst),
            0,
            "waited for the run"
        );
        assert_eq!(rep.outcome.status().as_str(), "error");
        assert!(rep
            .outcome
            .status()
            .message()
            .unwrap()
            .contains("timed out after 50ms"));
        // While the first run is still in flight, nothing new starts.
        match r.run_once(&ctx()).outcome {
            Outcome::StillRunning { .. } => {}
            other => panic!("expected StillRunning, got {other:?}"),
        }
        // Once it finishes, the same instance (runs = 1 already) is reused.
        gate.open();
        gate.open();
        let r2 = Runner {
            timeout: Duration::from_secs(2),
            ..r
        };
        match run_until_started(&r2) {
            Outcome::Completed(c) => assert_eq!(c.metrics[0].value, 2.0),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn blocking_forever_keeps_one_run_in_flight_and_never_starts_another() {
        let entered = Arc::new(AtomicUsize::new(0));
        let (release_tx, release_rx) = mpsc::channel();
        let r = runner(
            Box::new(Blocking {
                entered: entered.clone(),
                release: Arc::new(Mutex::new(release_rx)),
            }),
            no_factory(),
            30,
        );
        let clock = TestClock::new();
        let r = r.with_clock(clock.clock());
        assert!(matches!(
            r.run_once(&ctx()).outcome,
            Outcome::TimedOut { .. }
        ));
        // From now on an hour's timeout: a call that waited for it, rather than reporting
        // the stuck run at once, would block the test for an hour.
        let r = Runner {
            timeout: Duration::from_secs(3600),
            ..r
        };
        let (r, reports) = within_30s("run_once beside a stuck run", move || {
            let reports: Vec<RunReport> = (1..=5)
                .map(|_| {
                    clock.advance(Duration::from_secs(1));
                    r.run_once(&ctx())
                })
                .collect();
            (r, reports)
        });
        let mut statuses = Vec::new();
        for (i, rep) in (1..).zip(reports) {
            let Outcome::StillRunning { stuck_for, .. } = rep.outcome else {
                panic!("{:?}", rep.outcome);
            };
            // Stuck since the first run's start, by the runner's clock.
            assert_eq!(stuck_for, Duration::from_secs(i));
            assert_eq!(rep.duration, stuck_for);
            statuses.push(rep.outcome.status());
            let msg = rep.outcome.status().message().unwrap().to_string();
            assert!(msg.starts_with("timed out after 1h"), "{msg}");
            assert!(msg.contains("no new run"), "{msg}");
        }
        assert_eq!(entered.load(Ordering::SeqCst), 1, "only one run in flight");
        // The message is stable, so a stuck collector does not log a "change" every cycle.
        assert!(statuses.windows(2).all(|w| w[0] == w[1]), "{statuses:?}");
        // Unblock it: the collector comes back and runs again.
        release_tx.send(()).unwrap();
        release_tx.send(()).unwrap();
        let r = Runner {
            timeout: Duration::from_secs(2),
            ..r
        };
        assert!(matches!(run_until_started(&r), Outcome::Completed(_)));
        assert_eq!(entered.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn panic_is_reported_and_the_collector_is_recreated() {
        let calls = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let factory: Factory = {
            let calls = calls.clone();
            let made = made.clone();
            Arc::new(move || {
                made.fetch_add(1, Ordering::SeqCst);
                Some(Box::new(Panicky {
                    calls: calls.clone(),
                    panic_on: vec![2],
                    own_runs: 0,
                }) as Box<dyn Collector>)
            })
        };
        let r = runner(
            Box::new(Panicky {
                calls: calls.clone(),
                panic_on: vec![2],
                own_runs: 0,
            }),
            factory,
            2000,
        );
        let own_runs = |o: Outcome| match o {
            Outcome::Completed(c) => c.metrics[0].value,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(own_runs(r.run_once(&ctx()).outcome), 1.0);
        let rep = r.run_once(&ctx());
        assert_eq!(rep.outcome, Outcome::Panicked("boom on call 2".into()));
        let msg = rep.outcome.status().message().unwrap().to_string();
        assert!(msg.contains("panicked: boom on call 2"), "{msg}");
        assert!(!rep.outcome.is_success());
        // Retried on the next run with a fresh instance (own run count restarts at 1).
        assert_eq!(own_runs(r.run_once(&ctx()).outcome), 1.0);
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(own_runs(r.run_once(&ctx()).outcome), 2.0);
    }

    /// Burns `cpu` of its own thread's CPU time per run.
    struct Spin {
        cpu: Duration,
    }
    impl Collector for Spin {
        fn name(&self) -> &'static str {
            "spin"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            let start = thread_cpu().unwrap();
            while thread_cpu().unwrap() < start + self.cpu {
                std::hint::black_box(0u64);
            }
            Collection::new(Status::Ok)
        }
    }

    #[test]
    fn cpu_time_of_every_run_is_counted_also_of_a_run_that_timed_out() {
        let r = runner(
            Box::new(Spin {
                cpu: Duration::from_millis(30),
            }),
            no_factory(),
            2000,
        );
        let first = r.run_once(&ctx());
        assert!(matches!(first.outcome, Outcome::Completed(_)));
        // Its own thread's time: at least what it burned, not the whole process's.
        assert!(first.cpu_total >= Duration::from_millis(30), "{first:?}");
        assert!(first.cpu_total < Duration::from_millis(300), "{first:?}");
        // A run that times out adds its time when it ends; the next report includes it.
        let r = Runner {
            timeout: Duration::from_millis(1),
            ..r
        };
        let timed_out = r.run_once(&ctx());
        assert!(matches!(timed_out.outcome, Outcome::TimedOut { .. }));
        assert!(timed_out.cpu_total >= first.cpu_total);
        let r = Runner {
            timeout: Duration::from_secs(2),
            ..r
        };
        let third = match run_until_started(&r) {
            Outcome::Completed(_) => r.run_once(&ctx()),
            other => panic!("unexpected {other:?}"),
        };
        assert!(
            third.cpu_total >= first.cpu_total + Duration::from_millis(90),
            "four runs of 30 ms: {first:?} then {third:?}"
        );
    }

    #[test]
    fn panic_without_factory_fails_until_it_can_be_built() {
        let calls = Arc::new(AtomicUsize::new(0));
        let r = runner(
            Box::new(Panicky {
                calls,
                panic_on: vec![1],
                own_runs: 0,
            }),
            no_factory(),
            2000,
        );
        assert!(matches!(r.run_once(&ctx()).outcome, Outcome::Panicked(_)));
        let rep = r.run_once(&ctx());
        assert!(matches!(rep.outcome, Outcome::Failed(_)));
        assert!(rep
            .outcome
            .status()
            .message()
            .unwrap()
            .contains("could not be re-created"));
    }

    #[test]
    fn error_status_from_collector_is_not_a_success() {
        let r = runner(
            Box::new(Scripted {
                name: "s",
                script: vec![Collection::new(Status::Error("bad".into()))],
                i: 0,
            }),
            no_factory(),
            2000,
        );
        let o = r.run_once(&ctx()).outcome;
        assert!(!o.is_success());
        assert_eq!(o.status(), Status::Error("bad".into()));
        let ok = Outcome::Completed(Collection::new(Status::Unavailable("x".into())));
        assert!(ok.is_success());
    }

    /// A collector that copies 10 MB of host text into its status and a finding: what the
    /// runner hands on is capped (the safety net behind `Collection::bounded`).
    struct Verbose;
    impl Collector for Verbose {
        fn name(&self) -> &'static str {
            "verbose"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            let huge = "9".repeat(10 << 20);
            let mut f = finding("disk.full", "/", collectors::Severity::Warning);
            f.subject = huge.clone();
            f.summary = collectors::Text::new(huge.clone(), huge.clone());
            f.evidence
                .insert("raw".into(), collectors::Evidence::Str(huge.clone()));
            with(
                Status::Degraded(format!("cannot parse uptime {huge}")),
                vec![f],
            )
        }
    }

    struct LoudPanic;
    impl Collector for LoudPanic {
        fn name(&self) -> &'static str {
            "loud"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            panic!("bad text {}", "x".repeat(64 << 10));
        }
    }

    #[test]
    fn host_text_in_a_collection_is_capped_before_it_goes_on() {
        use collectors::bounded::{EVIDENCE_BYTES, MESSAGE_BYTES, SUBJECT_BYTES, TEXT_BYTES};
        let r = runner(Box::new(Verbose), no_factory(), 10_000);
        let Outcome::Completed(c) = r.run_once(&ctx()).outcome else {
            panic!("verbose did not complete");
        };
        let m = c.status.message().unwrap();
        assert!(m.len() <= MESSAGE_BYTES, "{}", m.len());
        assert!(m.starts_with("cannot parse uptime 999") && m.contains("…[truncated "));
        let f = &c.findings[0];
        assert!(f.subject.len() <= SUBJECT_BYTES);
        assert!(f.summary.en.len() <= TEXT_BYTES && f.summary.zh.len() <= TEXT_BYTES);
        assert!(f.evidence["raw"].as_str().unwrap().len() <= EVIDENCE_BYTES);
        assert_eq!(f.evidence["used_percent"].as_f64(), Some(97.5));

        let r = runner(Box::new(LoudPanic), no_factory(), 10_000);
        let o = r.run_once(&ctx()).outcome;
        let Outcome::Panicked(msg) = &o else {
            panic!("{o:?}");
        };
        assert!(msg.starts_with("bad text xxx") && msg.len() <= MESSAGE_BYTES);
    }

    /// Records the thread each run ran on.
    struct WhichThread {
        seen: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }
    impl Collector for WhichThread {
        fn name(&self) -> &'static str {
            "which"
        }
        fn collect(&mut self, _: &CollectContext) -> Collection {
            self.seen.lock().unwrap().push(std::thread::current().id());
            Collection::new(Status::Ok)
        }
    }

    fn which(linger: Duration) -> (Runner, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let r = runner(
            Box::new(WhichThread {
                seen: Arc::clone(&seen),
            }),
            no_factory(),
            2000,
        )
        .linger(linger);
        (r, seen)
    }

    fn completed(r: &Runner) {
        let o = r.run_once(&ctx()).outcome;
        assert!(matches!(o, Outcome::Completed(_)), "{o:?}");
    }

    #[test]
    fn a_lingering_worker_runs_the_next_run_and_ends_after_its_linger() {
        let (r, seen) = which(Duration::from_millis(300));
        completed(&r);
        completed(&r);
        std::thread::sleep(Duration::from_millis(20));
        completed(&r);
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 3);
            assert!(
                seen.iter().all(|t| *t == seen[0]),
                "one worker ran all three"
            );
            assert_ne!(seen[0], std::thread::current().id());
        }
        // Past its linger the worker has ended (the runner's handle on it is cleared) and
        // the next run gets a new one.
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&r.worker).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(lock(&r.worker).is_none(), "the worker did not end");
        completed(&r);
        let seen = seen.lock().unwrap();
        assert_ne!(seen[3], seen[0]);
    }

    #[test]
    fn without_linger_every_run_gets_a_thread_of_its_own() {
        let (r, seen) = which(Duration::ZERO);
        for _ in 0..3 {
            completed(&r);
            // The worker ends right after its run.
            let deadline = Instant::now() + Duration::from_secs(5);
            while lock(&r.worker).is_some() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert!(seen[0] != seen[1] && seen[1] != seen[2] && seen[0] != seen[2]);
    }

    #[test]
    fn no_run_is_lost_when_it_is_handed_over_as_the_worker_gives_up() {
        // A run handed to the worker after its linger ran out but before it left: the
        // worker takes it (or a new one does), rather than leaving it in a queue nobody
        // reads, which would keep the collector checked out for good.
        let (mut r, seen) = which(Duration::from_millis(50));
        let (gave_up_tx, gave_up_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let gave_up_tx = Mutex::new(gave_up_tx);
        let go_rx = Mutex::new(go_rx);
        let first = std::sync::atomic::AtomicBool::new(true);
        r.give_up_hook = Some(Arc::new(move || {
            if first.swap(false, Ordering::SeqCst) {
                let _ = gave_up_tx.lock().unwrap().send(());
                let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(5));
            }
        }));
        completed(&r);
        gave_up_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the worker gave up waiting");
        // The worker has stopped waiting but not left: this run goes to it.
        let run = r.start(&ctx());
        go_tx.send(()).unwrap();
        let rep = run.finish();
        assert!(
            matches!(rep.outcome, Outcome::Completed(_)),
            "{:?}",
            rep.outcome
        );
        assert_eq!(seen.lock().unwrap().len(), 2);
        completed(&r);
        assert_eq!(seen.lock().unwrap().len(), 3);
    }

    #[test]
    fn runs_started_together_are_waited_for_each_up_to_its_own_timeout() {
        let clock = TestClock::new();
        let (slow_gate, slow) = Gate::new("slow");
        let (fast_gate, fast) = Gate::new("fast");
        let slow = runner(slow, no_factory(), 100).with_clock(clock.clock());
        let fast = runner(fast, no_factory(), 2000).with_clock(clock.clock());
        let a = slow.start(&ctx());
        let b = fast.start(&ctx());
        // Both are in `collect` at once, and `start` returned before either finished.
        slow_gate.wait_entered(1);
        fast_gate.wait_entered(1);
        assert_eq!(slow_gate.finished.load(Ordering::SeqCst), 0, "start waited");
        assert_eq!(fast_gate.finished.load(Ordering::SeqCst), 0, "start waited");
        // The fast one returns 50 ms in; its worker has handed the result over (and ended)
        // before the clock moves on.
        clock.advance(Duration::from_millis(50));
        fast_gate.open();
        let deadline = Instant::now() + Duration::from_secs(30);
        while lock(&fast.worker).is_some() {
            assert!(Instant::now() < deadline, "the fast run never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
        // 150 ms in, past the slow one's timeout: waited for first, it timed out.
        clock.advance(Duration::from_millis(100));
        let a = a.finish();
        assert_eq!(
            a.outcome,
            Outcome::TimedOut {
                timeout: Duration::from_millis(100)
            }
        );
        assert_eq!(a.duration, Duration::from_millis(100));
        let b = b.finish();
        assert!(
            matches!(b.outcome, Outcome::Completed(_)),
            "{:?}",
            b.outcome
        );
        // Timed as it ran, not as long as it was waited for (150 ms, behind the slow one).
        assert_eq!(b.duration, Duration::from_millis(50));
        slow_gate.open();
    }

    #[test]
    fn a_run_that_returned_after_its_timeout_is_late_even_when_waited_for_later() {
        let first = runner(
            Box::new(Slow {
                name: "first",
                delay: Duration::from_millis(300),
                runs: 0,
            }),
            no_factory(),
            250,
        );
        let late = runner(
            Box::new(Slow {
                name: "late",
                delay: Duration::from_millis(150),
                runs: 0,
            }),
            no_factory(),
            100,
        );
        let a = first.start(&ctx());
        let b = late.start(&ctx());
        assert!(matches!(a.finish().outcome, Outcome::TimedOut { .. }));
        // Its result is there by now, 150 ms after its start: 50 ms past its timeout.
        let b = b.finish();
        assert_eq!(
            b.outcome,
            Outcome::TimedOut {
                timeout: Duration::from_millis(100)
            }
        );
        assert_eq!(b.duration, Duration::from_millis(100));
    }
}
