//! The `load` collector: load and iowait explained — busy disks, blocked tasks, and the
//! processes behind them (handbook 002, its high-load section; the words and the section
//! title are in `collectors/rules/load.toml`).
//!
//! Each run reads `/proc/loadavg`, `/proc/stat`, `/proc/uptime`, `/proc/diskstats`,
//! `/proc/pressure/*` and `/sys/devices/system/cpu/online`. Only when one of those
//! whole-node signals is at its escalation bar ([`escalation`]) does it read
//! `/proc/sys/kernel/task_delayacct` and, for every process, `/proc/<pid>/stat` (with its
//! block-IO delay) and `/proc/<pid>/io`; then only the top consumers get their
//! `/proc/<pid>/cgroup` (and `wchan`) read, and only multi-threaded processes doing IO their
//! threads' `stat`. When tasks wait in D state and delay accounting is off, the candidates'
//! states are sampled a few more times (see [`processes`]). Rates come from the previous
//! run's sample; the first run reports levels only. A run that escalates after one that did
//! not reads the processes twice, [`Escalation::catch_up`] apart, and measures the culprits
//! over that span; when it reads every process, the second reading is of its candidates
//! only (`LoadCollector::onset_pass`), and the runs after it read the new and the active
//! processes and a few others in turn (`LoadCollector::steady_pass`).
//!
//! The collector shape: `LoadCollector::sample` reads the host into a typed [`Sample`] (whose
//! window is an [`Observation`] that tests build without files); [`judge::judge`] turns the
//! window into drafts under [`LoadConfig::thresholds`]; `collect` renders them in the rule
//! file's words ([`CollectContext::render`]) and adds the metrics of the sample.

pub mod cgroups;
pub mod config;
pub mod escalation;
pub mod judge;
pub mod observation;
pub mod processes;
pub mod sample;
pub mod thresholds;

use std::time::{Duration, Instant};

use crate::collector::{CollectContext, Phases, Status};
use crate::host::HostPaths;
use crate::metric::Metric;
use crate::node::Node;
use crate::pods::PodDirectory;
use crate::proc::delayacct;
use crate::proc::diskstats::{self, DiskStat};
use crate::proc::loadavg::{self, Loadavg};
use crate::proc::pressure as psi;
use crate::proc::stat::{self, Stat};
use crate::proc::uptime;
use crate::rules::Draft;
use crate::sys::{block, cgroup_io};

use cgroups::{Fallback, NameFloors, Plan};
pub use config::LoadConfig;
pub use escalation::{Reason, Signals};
pub use observation::{
    CpuPercent, Culprit, DiskRates, Held, IoWaitMethod, Observation, Origin, Pressures,
};
use processes::{IoReads, IoWaitPlan, OnsetLimits, ProcessTracker};
pub use sample::Sample;
pub use thresholds::{Baseline, Escalation, Hold, Thresholds};

/// Which processes the tracker holds counters of (what the next pass can measure over the
/// window without a catch-up).
#[derive(Debug, Clone, PartialEq)]
enum Tracked {
    Nothing,
    All,
    /// The tasks of these cgroups (`<hierarchy dir>:<path>`).
    Cgroups(Vec<String>),
}

/// The system-wide part of one run's reading.
#[derive(Debug, Clone)]
struct SystemSample {
    uptime_seconds: f64,
    /// When it was taken, by the agent's clock (used when the host's uptime stands still).
    taken: Instant,
    load1: f64,
    stat: Stat,
    disks: Vec<DiskStat>,
    /// The previous window's overall iowait share.
    iowait_percent: Option<f64>,
}

pub struct LoadCollector {
    node: Node,
    config: LoadConfig,
    started: Instant,
    previous: Option<SystemSample>,
    tracker: ProcessTracker,
    tracked: Tracked,
    /// The cgroup counters of the previous escalated run.
    cgroup_previous: Option<cgroups::Reading>,
    /// What the last pass read (`cgroups` or why every process), for the log.
    last_scope: Option<&'static str>,
    /// Whether the previous run read per-process detail (the tracker holds its counters).
    detail_last_run: bool,
    /// What the judge reported on the previous window (the next window's dead band).
    held: Held,
    /// How long the last catch-up waited (`None` when the last run made none).
    catch_up_span: Option<Duration>,
    /// Steady passes made (whose turn it is among the idle processes).
    round: u64,
    /// The first steady pass (by `round`) that may read the idle processes again to explain
    /// the node's CPU: the last such read found less than a culprit's CPU among them (the
    /// CPU is elsewhere: processes that came and went, or beyond this view of `/proc`), so
    /// until then their turns ([`LoadConfig::idle_reread_every`]) are enough.
    others_due: u64,
    /// The CPU (percent of one CPU) the processes read left unexplained when the idle ones
    /// were last read for it in vain: until `others_due`, they are read for it again only
    /// when a culprit's CPU more is unexplained (one that starts to spin is named at once).
    others_unexplained: f64,
    /// Why the last pass over the processes was incomplete (kept while no pass is made, so
    /// the status does not change with escalation).
    detail_problems: Vec<String>,
    pods: PodDirectory,
    last: Option<Observation>,
}

impl LoadCollector {
    pub fn new(node: Node, config: LoadConfig) -> Self {
        let pods = PodDirectory::new(node.host().clone(), config.pods.clone());
        LoadCollector {
            node,
            config,
            started: Instant::now(),
            previous: None,
            tracker: ProcessTracker::default(),
            tracked: Tracked::Nothing,
            cgroup_previous: None,
            last_scope: None,
            detail_last_run: false,
            held: Held::default(),
            catch_up_span: None,
            round: 0,
            others_due: 0,
            others_unexplained: 0.0,
            detail_problems: Vec::new(),
            pods,
            last: None,
        }
    }

    /// The last window judged (None before the second run).
    pub fn last_observation(&self) -> Option<&Observation> {
        self.last.as_ref()
    }

    /// How long the last run waited between its two passes over the processes (the onset of
    /// trouble after a quiet run); `None` when it made no catch-up.
    pub fn catch_up_span(&self) -> Option<Duration> {
        self.catch_up_span
    }

    /// Number of processes whose previous counters are kept (bounded by live pids; none after
    /// a run that read no process).
    pub fn tracked_processes(&self) -> usize {
        self.tracker.len()
    }
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for LoadCollector {
    const NAME: &'static str = "load";
    type Sample = Sample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(Sample, Status), Status> {
        self.read_host().map_err(Status::Unavailable)
    }

    /// The window's rules (none on the first run, which has no window); remembers what they
    /// reported (the next window's dead band, and the next run's escalation).
    fn judge(&mut self, sample: &Sample) -> Vec<Draft> {
        let drafts = match &sample.window {
            Some(obs) => judge::judge(obs, &self.config.thresholds),
            None => Vec::new(),
        };
        self.held = Held::of(
            drafts
                .iter()
                .map(|d| (d.id.as_str(), d.subject.as_str(), d.severity)),
        );
        drafts
    }

    fn metrics(&self, sample: &Sample) -> Vec<Metric> {
        judge::metrics(sample)
    }

    fn keep(&mut self, sample: Sample) {
        if let Some(obs) = sample.window {
            self.last = Some(obs);
        }
    }
}

/// A kernel without PSI (built without `CONFIG_PSI`, or booted with `psi=0`) has no
/// `/proc/pressure` files by design: a note, not a source that could not be read.
fn psi_note() -> String {
    "no /proc/pressure: PSI is off in this kernel (CONFIG_PSI, psi=0), so pressure stall \
     figures are not reported"
        .to_string()
}

/// The whole-node levels one run reads.
struct Levels {
    stat: Stat,
    load: Loadavg,
    uptime_seconds: f64,
    cpus: u32,
    disks: Vec<DiskStat>,
    pressures: Pressures,
    /// No PSI file exists (or the kernel refuses them with `EOPNOTSUPP`): PSI is off.
    psi_absent: bool,
}

/// The window's whole-node part: CPU shares and disk rates since the previous run.
struct WholeNode {
    elapsed: f64,
    previous_load1: f64,
    cpu: CpuPercent,
    per_cpu: Vec<(u32, CpuPercent)>,
    disk_rates: Vec<DiskRates>,
}

/// The per-process pass of an escalated run: what was read, over which span, how IO wait
/// was measured, and whose processes.
type Detail = (processes::ProcSample, f64, bool, Scope);

impl LoadCollector {
    /// Reads the host into a sample (and keeps what the next window needs); the status says
    /// what could not be read. `Err` says why nothing can be read (the collector is
    /// unavailable).
    fn read_host(&mut self) -> Result<(Sample, Status), String> {
        let mut degraded: Vec<String> = Vec::new();
        let levels = self.read_levels(&mut degraded)?;
        let absent = levels.psi_absent.then(psi_note).into_iter().collect();
        let whole = self.whole_node(&levels);
        let (reason, detail) = self.escalate(&levels, whole.as_ref(), &mut degraded);
        let window = whole.map(|w| self.observe(&levels, w, detail.as_ref()));
        // The next window's "previous iowait": this window's, or the last one judged.
        let iowait_percent = window.as_ref().or(self.last.as_ref()).map(|o| o.cpu.iowait);
        let Levels {
            stat,
            load,
            uptime_seconds,
            cpus,
            disks,
            pressures,
            ..
        } = levels;
        let sample = Sample {
            load,
            cpus,
            procs_running: stat.procs_running.unwrap_or(load.running),
            procs_blocked: stat.procs_blocked.unwrap_or(0),
            pressures,
            process_detail: reason,
            window,
        };
        self.previous = Some(SystemSample {
            uptime_seconds,
            taken: Instant::now(),
            load1: load.load1,
            stat,
            disks,
            iowait_percent,
        });
        Ok((sample, Status::from_notes(degraded, absent)))
    }

    /// The whole-node levels: `/proc/stat`, loadavg, uptime, online CPUs, diskstats, PSI.
    fn read_levels(&self, degraded: &mut Vec<String>) -> Result<Levels, String> {
        let stat = match stat::read(&self.node.host().proc_file("stat")) {
            Ok(s) => s,
            Err(e) => {
                return Err(format!(
                    "{e}; is the host's /proc mounted under the host root?"
                ))
            }
        };
        let load = match loadavg::read(&self.node.host().proc_file("loadavg")) {
            Ok(l) => l,
            Err(e) => return Err(e.to_string()),
        };
        let uptime_seconds = match uptime::read(self.node.host()) {
            Ok(u) => u.since_boot.as_secs_f64(),
            Err(e) => {
                degraded.push(format!("{e}; timing windows with the agent's clock"));
                self.started.elapsed().as_secs_f64()
            }
        };
        // An uptime that did not advance (a frozen copy of /proc, a host root that is a
        // snapshot) cannot time a window: advance it by the agent's own clock instead.
        let uptime_seconds = match &self.previous {
            Some(prev) if uptime_seconds <= prev.uptime_seconds => {
                prev.uptime_seconds + prev.taken.elapsed().as_secs_f64()
            }
            _ => uptime_seconds,
        };
        let cpus = match self.node.online_cpus() {
            Ok(v) if !v.is_empty() => v.len() as u32,
            other => {
                if let Err(e) = other {
                    degraded.push(format!("{e}; counting cpuN lines of /proc/stat instead"));
                }
                stat.cpus.len().max(1) as u32
            }
        };
        let disks = match diskstats::read(&self.node.host().proc_file("diskstats")) {
            Ok(d) => d,
            Err(e) => {
                degraded.push(e.to_string());
                Vec::new()
            }
        };
        let mut pressures = Pressures::default();
        let mut psi_absent = true;
        for (res, slot) in [
            ("cpu", &mut pressures.cpu),
            ("io", &mut pressures.io),
            ("memory", &mut pressures.memory),
        ] {
            match psi::read(&self.node.host().proc_file("pressure").join(res)) {
                Ok(p) => {
                    psi_absent &= p.is_none();
                    *slot = p;
                }
                Err(e) => {
                    psi_absent = false;
                    degraded.push(e.to_string());
                }
            }
        }
        Ok(Levels {
            stat,
            load,
            uptime_seconds,
            cpus,
            disks,
            pressures,
            psi_absent,
        })
    }

    /// The window since the previous run (none on the first run, or when no time passed).
    fn whole_node(&self, levels: &Levels) -> Option<WholeNode> {
        let prev = self.previous.as_ref()?;
        let elapsed = levels.uptime_seconds - prev.uptime_seconds;
        if elapsed <= 0.0 {
            return None;
        }
        let cpu = CpuPercent::between(&prev.stat.total, &levels.stat.total).unwrap_or_default();
        let per_cpu: Vec<(u32, CpuPercent)> = levels
            .stat
            .cpus
            .iter()
            .filter_map(|(n, now)| {
                let (_, before) = prev.stat.cpus.iter().find(|(m, _)| m == n)?;
                Some((*n, CpuPercent::between(before, now)?))
            })
            .collect();
        let disk_rates = disk_windows(self.node.host(), &prev.disks, &levels.disks, elapsed);
        Some(WholeNode {
            elapsed,
            previous_load1: prev.load1,
            cpu,
            per_cpu,
            disk_rates,
        })
    }

    /// Whether this run reads per-process detail (a whole-node signal at its bar, or a
    /// finding of the previous window), and that pass when it does.
    fn escalate(
        &mut self,
        levels: &Levels,
        whole: Option<&WholeNode>,
        degraded: &mut Vec<String>,
    ) -> (Option<Reason>, Option<Detail>) {
        let procs_blocked = levels.stat.procs_blocked.unwrap_or(0);
        let signals = Signals {
            cpus: levels.cpus,
            load1: levels.load.load1,
            procs_blocked,
            previous_procs_blocked: self.previous.as_ref().and_then(|p| p.stat.procs_blocked),
            cpu_busy_percent: whole.map(|w| w.cpu.busy()),
            iowait_percent: whole.map(|w| w.cpu.iowait),
            max_disk_busy_percent: whole.and_then(|w| {
                w.disk_rates
                    .iter()
                    .map(|d| d.busy_percent)
                    .max_by(f64::total_cmp)
            }),
            pressure: levels.pressures,
        };
        let reason = escalation::needs_detail(&signals, &self.config.thresholds)
            .or((!self.held.is_empty()).then_some(Reason::FindingReported));
        self.log_escalation(reason);
        self.catch_up_span = None;
        let mut detail = None;
        if let Some(reason) = reason {
            let delayacct = match delayacct::read(self.node.host()) {
                Ok(d) => d.is_on(),
                Err(e) => {
                    degraded.push(format!(
                        "{e}; IO wait is measured by sampling D states instead of delay accounting"
                    ));
                    false
                }
            };
            let window = whole.map(|w| w.elapsed);
            let all = AllPass {
                io_quiet: escalation::io_quiet(&signals, &self.config.thresholds)
                    && !self.held.any("load.io_bound")
                    && !self.held.any("load.iowait"),
                node_cpu_percent: whole.map(|w| w.cpu.in_tasks() * f64::from(levels.cpus)),
                baseline: escalation::takes_baseline(&signals, &self.config.thresholds).is_some(),
            };
            let (procs, span, scope) = self.detail(
                reason,
                levels.uptime_seconds,
                window,
                procs_blocked,
                delayacct,
                all,
            );
            self.detail_problems.clear();
            if procs.io_denied > 0 {
                self.detail_problems
                    .push(io_denied_reason(procs.io_denied, &procs.io_denied_examples));
            }
            if let Some(e) = &procs.list_error {
                self.detail_problems.push(e.clone());
            }
            detail = Some((procs, span, delayacct, scope));
        } else {
            // Counters of an earlier pass would make the next window's deltas span the gap.
            self.tracker.clear();
            self.tracked = Tracked::Nothing;
            self.cgroup_previous = None;
            self.last_scope = None;
        }
        self.detail_last_run = reason.is_some();
        degraded.extend(self.detail_problems.iter().cloned());
        (reason, detail)
    }

    /// The typed window the rules judge, with the culprits of the per-process pass.
    fn observe(&mut self, levels: &Levels, w: WholeNode, detail: Option<&Detail>) -> Observation {
        let procs_blocked = levels.stat.procs_blocked.unwrap_or(0);
        let mut culprits = processes::Culprits::default();
        let mut kubelet_running = None;
        let mut process_scope = None;
        if let Some((procs, span, delayacct, scope)) = detail {
            self.pods.refresh_if_stale(Instant::now());
            let plan = IoWaitPlan {
                delayacct: *delayacct,
                samples: self.config.io_wait_samples,
                interval: self.config.io_wait_sample_interval,
                max_candidates: self.config.io_wait_max_candidates,
            };
            culprits = processes::culprits(
                self.node.host(),
                procs,
                *span,
                &self.config,
                &self.pods,
                procs_blocked,
                &plan,
            );
            let seen = procs.procs.iter().any(|d| d.comm == "kubelet");
            kubelet_running = match scope {
                // Only the candidates' tasks were read: a kubelet among them runs; its
                // absence from them says nothing.
                Scope::Cgroups(_) if seen => Some(true),
                Scope::Cgroups(_) => self.cgroup_previous.as_ref().and_then(kubelet_service),
                Scope::All(_) => procs.list_error.is_none().then_some(seen),
            };
            process_scope = Some(scope.describe(procs.read));
        }
        Observation {
            elapsed_seconds: w.elapsed,
            cpus: levels.cpus,
            load: levels.load,
            previous_load1: Some(w.previous_load1),
            procs_running: levels.stat.procs_running.unwrap_or(levels.load.running),
            procs_blocked,
            previous_procs_blocked: self.previous.as_ref().and_then(|p| p.stat.procs_blocked),
            cpu: w.cpu,
            previous_iowait_percent: self.previous.as_ref().and_then(|p| p.iowait_percent),
            per_cpu: w.per_cpu,
            disks: w.disk_rates,
            pressure: levels.pressures,
            top_io: culprits.top_io,
            top_cpu: culprits.top_cpu,
            blocked: culprits.blocked,
            io_wait_method: culprits.io_wait_method,
            total_io_wait_percent: culprits.total_io_wait_percent,
            total_io_bytes_per_second: culprits.total_io_bytes_per_second,
            total_cpu_percent: culprits.total_cpu_percent,
            kubelet_running,
            process_scope,
            held: self.held.clone(),
        }
    }
}

/// What an escalated run knows, before its pass, about how to read every process.
#[derive(Debug, Clone, Copy)]
struct AllPass {
    /// The window's IO signals are under their bars and no IO finding is reported: a steady
    /// pass may leave out the processes that were idle ([`LoadCollector::steady_pass`]).
    io_quiet: bool,
    /// The node's CPU in processes over the window (user, nice and system: what processes'
    /// CPU times can explain), percent of one CPU (`None` without a window).
    node_cpu_percent: Option<f64>,
    /// A run without a window reads every process as the next run's baseline (signs of IO
    /// trouble on `check`'s first sample, [`escalation::takes_baseline`]), not only the
    /// cgroups' counters.
    baseline: bool,
}

/// Which processes a pass read.
#[derive(Debug, Clone, PartialEq)]
enum Scope {
    /// The tasks of the candidate cgroups (described).
    Cgroups(String),
    /// Every process, and why.
    All(String),
}

impl Scope {
    /// The `process_scope` evidence: `cgroups /fio (1.0 MiB/s IO): 4 process(es) read`, or
    /// `all processes (…why…): 2,071 read`.
    fn describe(&self, read: usize) -> String {
        match self {
            Scope::Cgroups(c) if c.is_empty() => {
                format!("cgroups (none above the floors): {read} process(es) read")
            }
            Scope::Cgroups(c) => format!("cgroups {c}: {read} process(es) read"),
            Scope::All(why) => format!("all processes ({why}): {read} read"),
        }
    }
}

impl LoadCollector {
    /// One pass over every process (`now`: host uptime, seconds), with the threads' IO wait
    /// added up when delay accounting is on.
    fn pass(&mut self, now: f64, delayacct: bool, pids: Option<&[u32]>) -> processes::ProcSample {
        let mut procs = match pids {
            Some(p) => self.tracker.sample_pids(self.node.host(), now, p),
            None => self.tracker.sample(self.node.host(), now),
        };
        if delayacct {
            self.tracker
                .sum_threads(self.node.host(), &mut procs, self.config.max_thread_reads);
        }
        procs
    }

    /// The per-process detail of an escalated run: the cgroup pass first (when configured),
    /// then the processes of the candidate cgroups or every process. Returns the sample, the
    /// span its deltas cover (the window, or the catch-up at the onset; 0 for a baseline)
    /// and what was read.
    fn detail(
        &mut self,
        reason: Reason,
        now: f64,
        window: Option<f64>,
        procs_blocked: u64,
        delayacct: bool,
        all: AllPass,
    ) -> (processes::ProcSample, f64, Scope) {
        // The onset of trouble within one interval waits `catch_up` between two readings (at
        // most a quarter of the window, so that a run stays well within a timeout of one
        // interval, `check`'s default; at most two such waits, cgroups then processes).
        let wait = window.map(|e| {
            (self.config.thresholds.escalation.catch_up).min(Duration::from_secs_f64(e / 4.0))
        });
        let plan = match self.config.cgroups {
            None => Plan::All(Fallback::Unavailable(
                "cgroup-first attribution is off".into(),
            )),
            Some(floors) => match self.cgroup_plan(&floors, reason, now, wait, procs_blocked) {
                Some(p) => p,
                // The first run: the cgroups' baseline is all the next window needs, unless
                // that run must measure the processes over its whole window (`check`'s
                // second sample after signs of IO trouble, `escalation::takes_baseline`):
                // then every process's too.
                None => {
                    self.tracker.clear();
                    if all.baseline {
                        self.tracked = Tracked::All;
                        let scope = Scope::All("a baseline for the next sample".into());
                        return (self.pass(now, delayacct, None), 0.0, scope);
                    }
                    self.tracked = Tracked::Nothing;
                    let scope = Scope::Cgroups("baseline".into());
                    return (processes::ProcSample::default(), 0.0, scope);
                }
            },
        };
        let (plan, pids) = match plan {
            Plan::Cgroups(c) => {
                let reading = self.cgroup_previous.as_ref();
                match reading.map(|r| cgroups::tasks(r, &c)) {
                    Some(Ok(pids)) => (Plan::Cgroups(c), Some(pids)),
                    Some(Err(e)) => (Plan::All(Fallback::Unavailable(e)), None),
                    None => (
                        Plan::All(Fallback::Unavailable("no reading of the cgroups".into())),
                        None,
                    ),
                }
            }
            all => (all, None),
        };
        self.log_scope(&plan);
        let (tracked, scope) = match &plan {
            Plan::Cgroups(c) => {
                let dirs: Vec<String> = c
                    .iter()
                    .map(|k| {
                        let dir = self.cgroup_previous.as_ref().map_or_else(String::new, |r| {
                            r.trees[k.tree].hierarchy.dir.display().to_string()
                        });
                        format!("{dir}:{}", k.path)
                    })
                    .collect();
                (Tracked::Cgroups(dirs), Scope::Cgroups(cgroups::describe(c)))
            }
            Plan::All(why) => (Tracked::All, Scope::All(why.describe())),
        };
        // The tracker holds a baseline for what this pass reads when the previous run read
        // the same processes (every process, or the tasks of at least these cgroups), or
        // every process (any cgroups' tasks among them).
        let baseline = match (&self.tracked, &tracked) {
            (Tracked::All, _) => true,
            (Tracked::Cgroups(had), Tracked::Cgroups(want)) => want.iter().all(|w| had.contains(w)),
            _ => false,
        };
        self.tracked = tracked;
        let every_process = matches!(plan, Plan::All(_));
        let (procs, span) = match (window, wait) {
            (Some(elapsed), _) if baseline && every_process && all.io_quiet => {
                (self.steady_pass(now, elapsed, delayacct, &all), elapsed)
            }
            (Some(elapsed), _) if baseline => (self.pass(now, delayacct, pids.as_deref()), elapsed),
            (Some(_), Some(wait)) if every_process => self.onset_pass(now, wait, delayacct),
            (Some(_), Some(wait)) => {
                // Read now and again after `wait`, and measure over that span.
                self.tracker.clear();
                self.pass(now, delayacct, pids.as_deref());
                let t = Instant::now();
                std::thread::sleep(wait);
                self.catch_up_span = Some(self.catch_up_span.unwrap_or_default() + wait);
                let span = t.elapsed().as_secs_f64().max(1e-3);
                let pids = match &plan {
                    // Tasks started in the candidates meanwhile are read too.
                    Plan::Cgroups(c) => self
                        .cgroup_previous
                        .as_ref()
                        .and_then(|r| cgroups::tasks(r, c).ok())
                        .or(pids),
                    Plan::All(_) => None,
                };
                (self.pass(now + span, delayacct, pids.as_deref()), span)
            }
            // The first run: a baseline for the next window.
            _ => (self.pass(now, delayacct, pids.as_deref()), 0.0),
        };
        (procs, span, scope)
    }

    /// The onset's pass over every process (the run before read none of them): one `stat`
    /// of each, then `stat` and `io` of the candidates only ([`ProcessTracker::
    /// onset_candidates`]: in D state, running, the busiest by CPU and block-IO delay), read
    /// again after `wait` and measured over that span. The others are listed without deltas;
    /// the next run has every process's baseline.
    fn onset_pass(
        &mut self,
        now: f64,
        wait: Duration,
        delayacct: bool,
    ) -> (processes::ProcSample, f64) {
        let host = self.node.host().clone();
        let listed = match processes::list(&host) {
            Ok(l) => l,
            Err(e) => {
                self.tracker.clear();
                return (processes::listing_failed(e), 0.0);
            }
        };
        let mut procs = self.tracker.survey(&host, now, &listed);
        let limits = OnsetLimits {
            busiest: self.config.onset_candidates,
            blocked: self
                .config
                .io_wait_max_candidates
                .max(self.config.max_blocked_tasks),
            delayacct,
        };
        let candidates = self.tracker.onset_candidates(&procs, now, limits);
        // Their `io` baselines (and `stat` again, a moment later: the deltas start here), and
        // the threads' delays of those in D state (as the first of two full passes gave).
        let mut base = self
            .tracker
            .reread(&host, now, &candidates, IoReads::Always);
        if delayacct {
            self.tracker
                .sum_threads(&host, &mut base, self.config.max_thread_reads);
        }
        let t = Instant::now();
        std::thread::sleep(wait);
        self.catch_up_span = Some(self.catch_up_span.unwrap_or_default() + wait);
        let span = t.elapsed().as_secs_f64().max(1e-3);
        let later = self
            .tracker
            .reread(&host, now + span, &candidates, IoReads::Changed);
        procs.replace(&candidates, later);
        if delayacct {
            self.tracker
                .sum_threads(&host, &mut procs, self.config.max_thread_reads);
        }
        (procs, span)
    }

    /// The steady pass over every process (the run before read them all, and IO is quiet):
    /// the processes that are new, were active or whose turn it is ([`ProcessTracker::
    /// steady`]); the others too when those read leave CPU time that could hold a culprit
    /// unexplained (the node's CPU in processes, from `/proc/stat`, less theirs, at the
    /// culprit floors: `culprit_min_cpu_percent` and `culprit_min_share_percent` of the
    /// node's), unless the last time they were read for it they held less than a culprit's
    /// CPU: then not again for `idle_reread_every` passes (each is read in turn meanwhile),
    /// unless a culprit's CPU more than then is unexplained.
    fn steady_pass(
        &mut self,
        now: f64,
        elapsed: f64,
        delayacct: bool,
        all: &AllPass,
    ) -> processes::ProcSample {
        let host = self.node.host().clone();
        let listed = match processes::list(&host) {
            Ok(l) => l,
            Err(e) => {
                self.tracker.clear();
                return processes::listing_failed(e);
            }
        };
        self.round = self.round.wrapping_add(1);
        let every = self.config.idle_reread_every;
        let (mut procs, unread) = self.tracker.steady(&host, now, &listed, self.round, every);
        let th = &self.config.thresholds;
        let uncovered = all
            .node_cpu_percent
            .map(|node| (node - procs.cpu_percent(elapsed), node));
        let material = match uncovered {
            Some((u, node)) => {
                u >= th.culprit_min_cpu_percent
                    && u * 100.0 >= th.culprit_min_share_percent * node.max(f64::MIN_POSITIVE)
            }
            None => true,
        };
        // Without the node's CPU (no window of `/proc/stat`) nothing is known to have grown.
        let grown = uncovered
            .is_some_and(|(u, _)| u >= self.others_unexplained + th.culprit_min_cpu_percent);
        let due = self.round >= self.others_due || grown;
        if material && !unread.is_empty() && due {
            tracing::debug!(
                collector = "load",
                node_cpu_percent = ?all.node_cpu_percent,
                explained_cpu_percent = procs.cpu_percent(elapsed),
                read = procs.read,
                unread = unread.len(),
                "the processes read leave CPU time unexplained: reading the others too"
            );
            let read = procs.read;
            let rest = self.tracker.reread(&host, now, &unread, IoReads::Changed);
            if rest.cpu_percent(elapsed) < th.culprit_min_cpu_percent {
                // Not among them: their turns find one that starts to spin slowly, the
                // unexplained CPU one that spins.
                self.others_due = self.round.saturating_add(every);
                self.others_unexplained = uncovered.map_or(f64::INFINITY, |(u, _)| u);
            } else {
                self.others_due = 0;
                self.others_unexplained = 0.0;
            }
            let extra = rest.read;
            procs.replace(&unread, rest);
            procs.read = read + extra;
        }
        if delayacct {
            self.tracker
                .sum_threads(&host, &mut procs, self.config.max_thread_reads);
        }
        procs
    }

    /// Reads the cgroup counters and decides which processes to read. `None` on the first
    /// run (no window): the reading is kept as the next window's baseline.
    fn cgroup_plan(
        &mut self,
        floors: &cgroups::Floors,
        reason: Reason,
        now: f64,
        wait: Option<Duration>,
        procs_blocked: u64,
    ) -> Option<Plan> {
        let Some(layout) = cgroup_io::detect(self.node.host()) else {
            self.cgroup_previous = None;
            return Some(Plan::All(Fallback::Unavailable(
                "no cgroup IO or CPU counters under /sys/fs/cgroup".into(),
            )));
        };
        let read = |host: &HostPaths, at: f64| cgroups::read(host, &layout, floors.limits, at);
        let mut current = match read(self.node.host(), now) {
            Ok(r) => r,
            Err(e) => {
                self.cgroup_previous = None;
                return Some(Plan::All(Fallback::Unavailable(e)));
            }
        };
        let before = match self.cgroup_previous.take() {
            Some(p) if p.at < current.at && p.version == current.version => p,
            _ => {
                let Some(wait) = wait else {
                    self.cgroup_previous = Some(current);
                    return None;
                };
                // The onset: read them again after `wait`.
                let t = Instant::now();
                std::thread::sleep(wait);
                self.catch_up_span = Some(wait);
                let later = current.at + t.elapsed().as_secs_f64().max(1e-3);
                match read(self.node.host(), later) {
                    Ok(r) => std::mem::replace(&mut current, r),
                    Err(e) => return Some(Plan::All(Fallback::Unavailable(e))),
                }
            }
        };
        let th = &self.config.thresholds;
        let name = NameFloors {
            min_share_percent: th.culprit_min_share_percent,
            min_io_bytes_per_second: th.culprit_min_io_bytes_per_second,
            min_cpu_percent: th.culprit_min_cpu_percent,
        };
        // CPU counts when the signal was the load or the CPUs (or a finding is reported,
        // which may name CPU culprits).
        let cpu = matches!(
            reason,
            Reason::Load | Reason::CpuBusy | Reason::PsiSome | Reason::FindingReported
        );
        let host = self.node.host();
        let plan = cgroups::decide(&before, &current, cpu, procs_blocked, name, floors, &|n| {
            block::kind(host, n)
        });
        self.cgroup_previous = Some(current);
        Some(plan)
    }

    /// Logs when the pass changes between the candidates' tasks and every process (and why).
    fn log_scope(&mut self, plan: &Plan) {
        let kind = match plan {
            Plan::Cgroups(_) => "cgroups",
            Plan::All(Fallback::Unavailable(_)) => "all: counters unavailable",
            Plan::All(Fallback::UnattributedIo { .. }) => "all: unattributed IO",
            Plan::All(Fallback::UnattributedCpu { .. }) => "all: unattributed CPU",
            Plan::All(Fallback::BlockedWithoutIo { .. }) => "all: blocked without cgroup IO",
        };
        if self.last_scope != Some(kind) {
            match plan {
                Plan::Cgroups(c) => tracing::debug!(
                    collector = "load",
                    cgroups = ?cgroups::describe(c),
                    "reading the processes of the candidate cgroups only"
                ),
                Plan::All(why) => tracing::debug!(
                    collector = "load",
                    reason = ?why.describe(),
                    "reading every process"
                ),
            }
            self.last_scope = Some(kind);
        }
    }

    /// Logs when per-process reading starts (with the signal that asked for it) and stops.
    fn log_escalation(&self, reason: Option<Reason>) {
        match (self.detail_last_run, reason) {
            (false, Some(r)) => tracing::debug!(
                collector = "load",
                reason = r.as_str(),
                "a whole-node signal reached its bar: reading per-process detail"
            ),
            (true, None) => tracing::debug!(
                collector = "load",
                "whole-node signals under their bars: per-process detail stops"
            ),
            _ => {}
        }
    }
}

/// `Some(true)` when a systemd `kubelet.service` cgroup of the reading holds tasks (the
/// kubelet runs, though not in a candidate cgroup); `None` when that says nothing.
fn kubelet_service(r: &cgroups::Reading) -> Option<bool> {
    r.trees.iter().find_map(|t| {
        let g = t
            .groups
            .iter()
            .find(|g| g.path.ends_with("/kubelet.service"))?;
        cgroup_io::procs(&t.dir_of(g))
            .ok()
            .and_then(|p| (!p.is_empty()).then_some(true))
    })
}

/// Per-disk rates between two `/proc/diskstats` samples, whole disks only.
fn disk_windows(
    host: &HostPaths,
    before: &[DiskStat],
    now: &[DiskStat],
    elapsed: f64,
) -> Vec<DiskRates> {
    now.iter()
        .filter(|d| block::kind(host, &d.name) == block::DeviceKind::Disk)
        .filter_map(|d| {
            let b = before
                .iter()
                .find(|b| b.name == d.name && b.major == d.major && b.minor == d.minor)?;
            let mut r = DiskRates::between(b, d, elapsed)?;
            r.dm_name = block::dm_name(host, &d.name);
            Some(r)
        })
        .collect()
}

/// Why per-process IO is incomplete, naming the first refused processes: a single refusal while
/// running as root comes from a security module or another user namespace, not missing root.
fn io_denied_reason(count: usize, examples: &[(u32, String)]) -> String {
    let named: Vec<String> = examples
        .iter()
        .map(|(pid, comm)| format!("pid {pid} {comm}"))
        .collect();
    let more = if count > examples.len() { ", ..." } else { "" };
    format!(
        "/proc/<pid>/io of {count} process(es) is unreadable ({}{more}): per-process IO needs root with CAP_SYS_PTRACE, and a security module or another user namespace can still refuse single processes",
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_denied_reason_names_the_refused_processes() {
        let one = io_denied_reason(1, &[(1, "process_api".to_string())]);
        assert!(
            one.starts_with("/proc/<pid>/io of 1 process(es) is unreadable (pid 1 process_api):"),
            "{one}"
        );
        assert!(one.contains("security module"));
        let many = io_denied_reason(
            7,
            &[
                (1, "init".to_string()),
                (42, "a".to_string()),
                (43, "b".to_string()),
            ],
        );
        assert!(
            many.contains("(pid 1 init, pid 42 a, pid 43 b, ...)"),
            "{many}"
        );
    }
}
