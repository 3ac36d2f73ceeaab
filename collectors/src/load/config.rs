//! The load collector's configuration: its rule thresholds and the bounds of its
//! per-process reading.

use std::time::Duration;

use super::cgroups;
use super::thresholds::Thresholds;
use crate::pods::PodsConfig;

/// Thresholds and limits of the `load` collector.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// What the rules judge by.
    pub thresholds: Thresholds,
    /// How many top IO and top CPU processes are named.
    pub top_processes: usize,
    /// At most this many D-state tasks are listed (and at most 16× this many threads read).
    pub max_blocked_tasks: usize,
    /// Without delay accounting, while tasks wait in D state: how many more times the
    /// candidates' states are read, how far apart, and at most how many candidates.
    pub io_wait_samples: u32,
    pub io_wait_sample_interval: Duration,
    pub io_wait_max_candidates: usize,
    /// With delay accounting: at most this many thread `stat` files are read per run to add
    /// up the IO wait of multi-threaded processes.
    pub max_thread_reads: usize,
    /// The onset pass over every process reads `stat` of each once and reads again, after
    /// the catch-up wait, only its candidates: those in D state and at most this many per
    /// ranking (running, CPU per second of life, CPU in all, block-IO delay).
    pub onset_candidates: usize,
    /// A steady pass over every process reads, besides the new and the active ones, one in
    /// this many of the idle ones (each in turn, so none goes unread longer than this many
    /// runs).
    pub idle_reread_every: u64,
    /// Where pod names come from.
    pub pods: PodsConfig,
    /// Cgroup-first attribution ([`cgroups`]): an escalated run reads the processes of the
    /// cgroups behind the window's IO and CPU only. `None`: every process, always.
    pub cgroups: Option<cgroups::Floors>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            thresholds: Thresholds::default(),
            top_processes: 5,
            max_blocked_tasks: 20,
            io_wait_samples: 10,
            io_wait_sample_interval: Duration::from_millis(20),
            io_wait_max_candidates: 64,
            max_thread_reads: 1024,
            onset_candidates: 16,
            idle_reread_every: 8,
            pods: PodsConfig::default(),
            cgroups: Some(cgroups::Floors::default()),
        }
    }
}
