//! The typed reading of the `memory` collector: one [`MemorySample`] of the free blocks per
//! zone, the node's memory, compaction activity ([`CompactionDelta`]) and the kernel log's page
//! allocation failures ([`FailureGroup`]). The collector reads it; `judge` decides on it; tests
//! build it directly.

use crate::proc::buddyinfo::ZoneFree;

/// Compaction activity between two samples (`/proc/vmstat`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionDelta {
    /// Direct compaction stalls (an allocating task had to compact memory itself).
    pub stall: u64,
    /// Compactions that failed to produce the block asked for.
    pub fail: u64,
    pub interval_seconds: f64,
}

/// Page allocation failures of one task at one order within the lookback window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    pub comm: String,
    pub order: u32,
    pub count: u64,
    /// Seconds since the last one (`None` when `/proc/uptime` could not be read).
    pub last_seen_seconds_ago: Option<u64>,
    pub mode: Option<String>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySample {
    pub zones: Vec<ZoneFree>,
    pub page_size_bytes: u64,
    pub mem_total_bytes: Option<u64>,
    pub mem_available_bytes: Option<u64>,
    pub compaction: Option<CompactionDelta>,
    /// Failures within the lookback window.
    pub failures: Vec<FailureGroup>,
    /// Failure reports the kernel rate-limited within the window (`warn_alloc: N callbacks
    /// suppressed`): failures that happened but are not in `failures`.
    pub suppressed_failures: u64,
    pub lookback_seconds: u64,
}
