//! When the `load` collector pays for per-process detail.
//!
//! Every run reads a few whole-node files (`loadavg`, `stat`, `diskstats`, PSI): a dozen reads
//! whatever the number of processes. The pass over `/proc/<pid>/stat` and `io` (and thread
//! `stat`s, `wchan`, D-state samples) costs about 8 µs of CPU per process, most of it in the
//! kernel, and only names *which* processes are behind a finding; every finding of the
//! collector is decided by the whole-node signals alone. So the pass is made only when those
//! signals are at a low bar, well below the limits the rules fire at ([`Escalation`], in the
//! collector's thresholds): at the default bars no rule can fire while every signal is under
//! its bar ([`needs_detail`] is implied by any finding; a property test checks it).
//!
//! Pure: no files, no clock. The collector asks [`needs_detail`] on every run with the
//! [`Signals`] it read, before any per-process file.

use super::observation::{Observation, Pressures};
use super::thresholds::Thresholds;

/// Why a run reads per-process detail: the first bar a signal reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Load,
    CpuBusy,
    Iowait,
    DiskBusy,
    PsiIoFull,
    PsiSome,
    ProcsBlocked,
    /// The previous window raised a finding (its culprits are kept current until it stops).
    FindingReported,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Load => "load",
            Reason::CpuBusy => "cpu_busy",
            Reason::Iowait => "iowait",
            Reason::DiskBusy => "disk_busy",
            Reason::PsiIoFull => "psi_io_full",
            Reason::PsiSome => "psi_some",
            Reason::ProcsBlocked => "procs_blocked",
            Reason::FindingReported => "finding_reported",
        }
    }
}

/// The whole-node signals of one run. The window's shares (iowait, disk busy) are `None` on
/// the first run, which has no window.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    pub cpus: u32,
    pub load1: f64,
    pub procs_blocked: u64,
    pub previous_procs_blocked: Option<u64>,
    /// us+ni+sy+hi+si over the window.
    pub cpu_busy_percent: Option<f64>,
    pub iowait_percent: Option<f64>,
    /// The busiest whole disk's busy share over the window.
    pub max_disk_busy_percent: Option<f64>,
    pub pressure: Pressures,
}

impl Signals {
    /// Whether the run has a window (a previous sample): the first run has none.
    pub fn has_window(&self) -> bool {
        self.cpu_busy_percent.is_some()
    }

    /// The signals of a judged window (its culprits are not looked at).
    pub fn of(obs: &Observation) -> Signals {
        Signals {
            cpus: obs.cpus,
            load1: obs.load.load1,
            procs_blocked: obs.procs_blocked,
            previous_procs_blocked: obs.previous_procs_blocked,
            cpu_busy_percent: Some(obs.cpu.busy()),
            iowait_percent: Some(obs.cpu.iowait),
            max_disk_busy_percent: obs
                .disks
                .iter()
                .map(|d| d.busy_percent)
                .max_by(f64::total_cmp),
            pressure: obs.pressure,
        }
    }
}

/// Whether this run reads per-process detail, and why: the first whole-node signal at its
/// bar, or on a run without a window a sign of IO trouble at the
/// [`Baseline`](super::thresholds::Baseline)'s bars
/// ([`takes_baseline`]), else `None` (nothing of the collector's rules can fire).
pub fn needs_detail(s: &Signals, th: &Thresholds) -> Option<Reason> {
    at_a_bar(s, th).or_else(|| takes_baseline(s, th))
}

/// The first whole-node signal at its escalation bar.
fn at_a_bar(s: &Signals, th: &Thresholds) -> Option<Reason> {
    let e = &th.escalation;
    let cpus = f64::from(s.cpus.max(1));
    let load_limit = th.load_warning_per_cpu.min(th.load_critical_per_cpu);
    if s.load1 / cpus >= e.load_share * load_limit {
        return Some(Reason::Load);
    }
    if s.load1 >= cpus
        && s.cpu_busy_percent
            .is_some_and(|b| b >= e.cpu_busy_share * th.cpu_busy_percent)
    {
        return Some(Reason::CpuBusy);
    }
    let iowait_limit = th
        .iowait_info_percent
        .min(th.iowait_warning_percent)
        .min(th.iowait_critical_percent);
    if s.iowait_percent
        .is_some_and(|w| w >= e.iowait_share * iowait_limit)
    {
        return Some(Reason::Iowait);
    }
    if s.max_disk_busy_percent
        .is_some_and(|b| b >= e.disk_busy_share * th.disk_busy_percent)
    {
        return Some(Reason::DiskBusy);
    }
    let io = s.pressure.io;
    if io
        .and_then(|p| p.full)
        .is_some_and(|f| f.avg10 >= e.psi_io_full_share * th.psi_io_full_percent)
    {
        return Some(Reason::PsiIoFull);
    }
    if [s.pressure.cpu, io]
        .iter()
        .flatten()
        .any(|p| p.some.avg10 >= e.psi_some_avg10_percent)
    {
        return Some(Reason::PsiSome);
    }
    if s.procs_blocked >= e.procs_blocked
        && s.previous_procs_blocked
            .is_some_and(|b| b >= e.procs_blocked)
    {
        return Some(Reason::ProcsBlocked);
    }
    None
}

/// Whether a run without a window takes a baseline of every process for the next run
/// ([`Baseline`](super::thresholds::Baseline), `check`'s first sample), and why: a sign of IO
/// trouble, PSI io or
/// `procs_blocked` on this one sample, at its bar. `None` on a run with a window, or without
/// baseline bars (`serve`).
pub fn takes_baseline(s: &Signals, th: &Thresholds) -> Option<Reason> {
    let b = th
        .escalation
        .baseline
        .as_ref()
        .filter(|_| !s.has_window())?;
    let io = s.pressure.io;
    if io
        .and_then(|p| p.full)
        .is_some_and(|f| f.avg10 >= b.psi_io_full_share * th.psi_io_full_percent)
    {
        return Some(Reason::PsiIoFull);
    }
    if io.is_some_and(|p| p.some.avg10 >= b.psi_io_some_avg10_percent) {
        return Some(Reason::PsiSome);
    }
    (s.procs_blocked >= b.procs_blocked).then_some(Reason::ProcsBlocked)
}

/// Whether the window's IO signals are all under their bars (iowait, the busiest disk, PSI
/// io `full` and `some`) and no task is blocked: no IO finding can fire, so which processes
/// did IO matters less than which used CPU (the steady pass over every process may leave
/// out the idle ones). `false` without a window.
pub fn io_quiet(s: &Signals, th: &Thresholds) -> bool {
    let e = &th.escalation;
    let iowait_limit = th
        .iowait_info_percent
        .min(th.iowait_warning_percent)
        .min(th.iowait_critical_percent);
    let io = s.pressure.io;
    s.iowait_percent
        .is_some_and(|w| w < e.iowait_share * iowait_limit)
        && s.max_disk_busy_percent
            .is_none_or(|b| b < e.disk_busy_share * th.disk_busy_percent)
        && !io
            .and_then(|p| p.full)
            .is_some_and(|f| f.avg10 >= e.psi_io_full_share * th.psi_io_full_percent)
        && !io.is_some_and(|p| p.some.avg10 >= e.psi_some_avg10_percent)
        && s.procs_blocked == 0
}

#[cfg(test)]
mod tests;
