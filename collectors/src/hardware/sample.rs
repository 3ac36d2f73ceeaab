//! The typed reading of the `hardware` collector: what one run read, in units, no words. The
//! collector builds it; `judge` decides on it; tests build it directly.

pub use super::crash::{CrashKind, CrashRecord};
pub use super::lines::{CperSeverity, NvmeEvent};
pub use super::mdstat::Array;

/// One memory controller's or DIMM's counters and what they rose by within the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCounters {
    /// `mc0`, or `mc0/dimm3` for a DIMM.
    pub name: String,
    pub label: Option<String>,
    pub ce_total: u64,
    pub ue_total: Option<u64>,
    /// Corrected errors counted within the burst window (the counter's rises this agent saw,
    /// plus the count since boot when the node booted within the window).
    pub ce_in_window: u64,
}

/// One controller with its DIMMs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerState {
    pub controller: MemoryCounters,
    pub dimms: Vec<MemoryCounters>,
}

/// Kernel-log events of one kind and subject within the lookback window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvents {
    /// The CPU (`cpu3`), controller (`nvme0`, `mc0`), disk (`sdb`), CPER severity.
    pub subject: String,
    /// What happened: `machine_check`, `memory_failure_recovered`, an [`NvmeEvent`] name, a
    /// block error kind, CPER section types…
    pub kinds: Vec<String>,
    pub count: u64,
    pub last_seen_seconds_ago: Option<u64>,
    /// Worst of the events (NVMe: removed > reset > timeout; memory failure: not recovered).
    pub worst: String,
    /// The latest line, as logged (what node-problem-detector writes as its Event's message).
    pub line: Option<String>,
}

/// Where a disk with I/O errors is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskMount {
    pub source: String,
    pub mount_point: String,
    pub fstype: String,
}

/// A disk the kernel logged request errors for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskErrors {
    pub events: LogEvents,
    pub mounts: Vec<DiskMount>,
    /// The kubelet's pod directories are on one of its filesystems.
    pub pods_affected: bool,
    /// The device's first sector in error (the last line's).
    pub sector: Option<u64>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HardwareSample {
    /// `None`: no EDAC driver (no `/sys/devices/system/edac/mc`).
    pub edac: Option<Vec<ControllerState>>,
    /// EDAC memory error lines by controller (subject `mc0`; kinds: DIMM labels).
    pub edac_ce_lines: Vec<LogEvents>,
    pub edac_ue_lines: Vec<LogEvents>,
    pub crashes: Vec<CrashRecord>,
    pub hardware_corrupted_bytes: Option<u64>,
    /// Machine checks by CPU (`cpu3`, or `node` for "events logged") and poisoned pages
    /// (`memory_failure`).
    pub machine_checks: Vec<LogEvents>,
    /// CPER records by severity (subject: the severity's name; kinds: section types).
    pub cper: Vec<LogEvents>,
    pub nvme: Vec<LogEvents>,
    /// NVMe controllers whose sysfs `state` is not `live`: (controller, state).
    pub nvme_not_live: Vec<(String, String)>,
    pub disks: Vec<DiskErrors>,
    pub arrays: Vec<Array>,
    /// `/sys/block/md*/md/degraded`: (array, devices missing).
    pub md_degraded: Vec<(String, u64)>,
    /// `/sys/block/*/badblocks`: (disk, bad ranges listed).
    pub bad_blocks: Vec<(String, u64)>,
    pub taint: Option<u64>,
    /// The previous run's taint value (`None` on the first run).
    pub taint_before: Option<u64>,
    pub lookback_seconds: u64,
}
