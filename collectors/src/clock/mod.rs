//! The `clock` collector: whether the kernel's clock is synchronised and how large its error
//! may be (`adjtimex(2)`, read-only), which time daemon runs, and the advice for that daemon.
//! An unsynchronised node breaks what compares clocks across machines: TLS certificates
//! ("not yet valid"), service-account tokens, leader-election leases, and the correlation of
//! logs and traces.
//!
//! No handbook covers time keeping: the rules cite the kernel's and the daemons'
//! documentation (`collectors/rules/clock.toml`).
//!
//! The kernel clock is global, not a host file: [`timex::read`] asks the running kernel.
//! A host root whose `/proc` is staged files (`HostNetns::NotProcfs`: a test's fake root) is
//! not this kernel's, so without an injected source ([`ClockCollector::with_source`]) the
//! collector says so and judges nothing, as the kernel-log reader reads no real log for a
//! fake root.

pub mod daemons;
pub mod judge;
pub mod sample;
pub mod thresholds;
pub mod timex;

use std::time::{Duration, Instant};

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::metric::Metric;
use crate::node::Node;
use crate::proc::uptime;
use crate::rules::Draft;

pub use sample::{ClockSample, DaemonKind, TimeDaemon};
pub use thresholds::Thresholds;
pub use timex::Timex;

/// Where a reading of the kernel clock comes from: the running kernel, or a test's.
pub type TimexSource = Box<dyn FnMut() -> std::io::Result<Timex> + Send>;

/// Configuration of the clock collector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClockConfig {
    pub thresholds: Thresholds,
}

/// Reads the kernel clock each run; looks for the time daemons only when a rule fires.
pub struct ClockCollector {
    node: Node,
    config: ClockConfig,
    /// `None`: the running kernel (`adjtimex(2)`), for a real host root only.
    source: Option<TimexSource>,
    previous_offset_seconds: Option<f64>,
    /// The last lookup of the time daemons and when: asked again after [`DAEMONS_RECHECK`]
    /// (a node whose clock stays unsynchronised would otherwise pass over `/proc` every run:
    /// the time daemons have no unit or socket the daemon locator knows).
    daemons_seen: Option<(Instant, Option<Vec<TimeDaemon>>)>,
}

/// How long a lookup of the time daemons is reused.
const DAEMONS_RECHECK: Duration = Duration::from_secs(600);

impl ClockCollector {
    pub fn new(node: Node, config: ClockConfig) -> Self {
        ClockCollector {
            node,
            config,
            source: None,
            previous_offset_seconds: None,
            daemons_seen: None,
        }
    }

    /// A collector reading `source` instead of the running kernel (tests, and any host root).
    pub fn with_source(node: Node, config: ClockConfig, source: TimexSource) -> Self {
        ClockCollector {
            source: Some(source),
            ..ClockCollector::new(node, config)
        }
    }

    fn read_timex(&mut self, ctx: &CollectContext) -> Result<Timex, Status> {
        let read =
            match (&mut self.source, ctx.host_netns) {
                (Some(source), _) => source(),
                (None, HostNetns::NotProcfs) => return Err(Status::Noted(
                    "the host root's /proc is staged files, not a kernel's: the clock adjtimex(2) \
                     reports is this machine's, not the staged host's, so it is not judged"
                        .into(),
                )),
                (None, _) => timex::read(),
            };
        read.map_err(|e| {
            Status::Unavailable(format!(
                "adjtimex(2) failed ({e}): the seccomp profile may forbid it (RuntimeDefault \
                 allows it); the clock is not judged"
            ))
        })
    }

    /// The time daemons running, in pid order (`None` when the process table is unreadable);
    /// the last lookup when it is younger than [`DAEMONS_RECHECK`].
    fn daemons(&mut self) -> Option<Vec<TimeDaemon>> {
        if let Some((at, seen)) = &self.daemons_seen {
            if at.elapsed() < DAEMONS_RECHECK {
                return seen.clone();
            }
        }
        let found = self.look_for_daemons();
        self.daemons_seen = Some((Instant::now(), found.clone()));
        found
    }

    fn look_for_daemons(&self) -> Option<Vec<TimeDaemon>> {
        let procs = self
            .node
            .processes()
            .named_apart(Self::NAME, &daemons::names())
            .ok()?;
        Some(
            procs
                .iter()
                .filter_map(|p| {
                    let (comm, kind) = daemons::kind_of(&p.comm)?;
                    Some(TimeDaemon {
                        kind,
                        comm,
                        pid: p.pid,
                    })
                })
                .collect(),
        )
    }
}

impl Phases for ClockCollector {
    const NAME: &'static str = "clock";
    type Sample = ClockSample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(ClockSample, Status), Status> {
        let timex = self.read_timex(ctx)?;
        let uptime_seconds = uptime::read(self.node.host())
            .ok()
            .map(|u| u.since_boot.as_secs_f64());
        let mut sample = ClockSample {
            timex,
            previous_offset_seconds: self.previous_offset_seconds,
            uptime_seconds,
            daemons: None,
        };
        let t = self.config.thresholds.clone();
        // The daemons are looked for only when a rule has something to say: a synchronised
        // clock costs one system call and the uptime.
        if !judge::judge(&sample, &t).is_empty() {
            sample.daemons = self.daemons();
        }
        let status = if !timex.synchronised() && !judge::past_grace(&sample, &t) {
            Status::Noted(format!(
                "the clock is not synchronised yet, within {} s of boot: not judged before then",
                t.boot_grace_seconds
            ))
        } else {
            Status::Ok
        };
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &ClockSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &ClockSample) -> Vec<Metric> {
        let x = &sample.timex;
        vec![
            Metric::gauge(
                "node_doctor_clock_synchronised",
                "1 when the kernel considers the system clock synchronised (adjtimex STA_UNSYNC clear), else 0.",
                if x.synchronised() { 1.0 } else { 0.0 },
            ),
            Metric::gauge(
                "node_doctor_clock_max_error_seconds",
                "The kernel's bound on the system clock's error (adjtimex maxerror); grows 0.5 ms per second without a time daemon's update.",
                x.max_error_seconds,
            ),
            Metric::gauge(
                "node_doctor_clock_estimated_error_seconds",
                "The time daemon's estimate of the clock's error at its last update (adjtimex esterror).",
                x.est_error_seconds,
            ),
            Metric::gauge(
                "node_doctor_clock_offset_seconds",
                "The phase offset the kernel's PLL is still correcting (adjtimex offset).",
                x.offset_seconds,
            ),
            Metric::gauge(
                "node_doctor_clock_frequency_adjustment_ppm",
                "The frequency correction in force on the system clock, ppm (adjtimex freq).",
                x.frequency_ppm,
            ),
        ]
    }

    fn keep(&mut self, sample: ClockSample) {
        self.previous_offset_seconds = Some(sample.timex.offset_seconds.abs());
    }
}
