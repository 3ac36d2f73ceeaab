//! What one run of the `load` collector read: the levels every sample has and, from the
//! second run on, the window between this sample and the previous one ([`Observation`]),
//! which the judge decides on. Tests build it directly.

use super::escalation::Reason;
use super::observation::{Observation, Pressures};
use crate::proc::loadavg::Loadavg;

/// One run's reading: the levels every sample has and, from the second run on, the window
/// between this sample and the previous one (what the rules judge).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub load: Loadavg,
    /// Online CPUs.
    pub cpus: u32,
    /// `procs_running` of `/proc/stat` (or loadavg's runnable count).
    pub procs_running: u64,
    /// `procs_blocked` of `/proc/stat`.
    pub procs_blocked: u64,
    pub pressures: Pressures,
    /// Why this run read per-process detail (`None`: every whole-node signal was under its
    /// bar, no process file was read).
    pub process_detail: Option<Reason>,
    /// `None` on the first run, or when no time passed since the previous one.
    pub window: Option<Observation>,
}
