//! The typed reading of the `tables` collector: the kernel's open-file table, the daemons'
//! descriptors against their `RLIMIT_NOFILE`, the neighbour tables, TCP memory and orphans,
//! and the kernel-log lines that say one ran out. The collector reads it; `judge` decides on
//! it; tests build it directly.

use std::collections::BTreeSet;

use super::lines::Line;

/// The open-file table (`/proc/sys/fs/file-nr`, `nr_open`).
#[derive(Debug, Clone, PartialEq)]
pub struct FileHandles {
    pub allocated: u64,
    pub max: u64,
    /// `fs.nr_open`: the highest `RLIMIT_NOFILE` a process may have (`None`: unreadable).
    pub nr_open: Option<u64>,
}

/// A process holding many descriptors (read only when the table is high).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// `comm`, as the process table has it (at most 15 bytes on Linux; capped again on output).
    pub comm: String,
    pub fds: u64,
    /// The count stopped at the per-process cap: at least `fds`.
    pub at_least: bool,
}

/// The processes holding the most descriptors, from a bounded scan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holders {
    /// The largest holders, most first.
    pub top: Vec<Holder>,
    /// Processes whose descriptors were counted.
    pub scanned: u64,
    /// The scan stopped at its process, descriptor or time budget.
    pub partial: bool,
}

/// A container runtime or kubelet process against its own descriptor limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonFds {
    /// `containerd`, `dockerd`, `cri-dockerd`, `kubelet`.
    pub name: String,
    pub pid: u32,
    /// Descriptors open now; `None` when only the table size was read (it was far below the
    /// limit) or the count failed.
    pub open: Option<u64>,
    /// The size of its descriptor table (`FDSize`): an upper bound of `open`.
    pub table_size: Option<u64>,
    /// Soft `RLIMIT_NOFILE` (`None`: unlimited).
    pub soft_limit: Option<u64>,
    pub hard_limit: Option<u64>,
}

/// Which neighbour table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }

    /// The kernel's name of the table (`arp_cache`, `ndisc_cache`).
    pub fn table(self) -> &'static str {
        match self {
            Family::Ipv4 => "arp_cache",
            Family::Ipv6 => "ndisc_cache",
        }
    }

    /// The kernel-log line of this table's overflow.
    pub fn line(self) -> Line {
        match self {
            Family::Ipv4 => Line::ArpOverflow,
            Family::Ipv6 => Line::NdiscOverflow,
        }
    }
}

/// One neighbour table: its entries, its garbage-collection thresholds, and what its
/// counters did since the previous sample.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighTable {
    pub family: Family,
    pub entries: u64,
    /// `gc_thresh1..3` (`None`: not readable from the agent's network namespace).
    pub gc_thresh: Option<[u64; 3]>,
    /// `table_fulls` since the previous sample (refused entries), with its interval.
    pub table_fulls_increase: Option<u64>,
    pub forced_gc_increase: Option<u64>,
    pub table_fulls_total: Option<u64>,
    pub forced_gc_total: Option<u64>,
    pub interval_seconds: Option<f64>,
}

/// TCP sockets' memory and orphans (`/proc/net/sockstat`) against their sysctls.
#[derive(Debug, Clone, PartialEq)]
pub struct Tcp {
    pub mem_pages: Option<u64>,
    /// `tcp_mem`: min, pressure, max, in pages (`None`: not readable).
    pub tcp_mem: Option<[u64; 3]>,
    pub orphans: Option<u64>,
    pub max_orphans: Option<u64>,
    pub inuse: Option<u64>,
    pub inuse6: Option<u64>,
    pub time_wait: Option<u64>,
    pub alloc: Option<u64>,
}

/// Kernel-log lines of one kind within the lookback window.
#[derive(Debug, Clone, PartialEq)]
pub struct LineLog {
    pub line: Line,
    pub count: u64,
    pub last_seconds_ago: Option<u64>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    pub files: Option<FileHandles>,
    /// Read only when the open-file table is at or above the scan bar.
    pub holders: Option<Holders>,
    pub daemons: Vec<DaemonFds>,
    pub neigh: Vec<NeighTable>,
    pub tcp: Option<Tcp>,
    pub lines: Vec<LineLog>,
    pub page_size_bytes: u64,
    pub lookback_seconds: u64,
    /// The (rule id, subject) pairs the previous run's judge raised: a level holds a raised
    /// finding down to its clear bar (hysteresis in the figures, below the rule file's
    /// `clear_after` in runs).
    pub raised_before: BTreeSet<(String, String)>,
}

impl Sample {
    /// True when the previous run raised `id` for `subject`.
    pub fn was_raised(&self, id: &str, subject: &str) -> bool {
        self.raised_before
            .contains(&(id.to_string(), subject.to_string()))
    }
}
