//! The typed reading of the `iptables` collector: one [`Sample`] of the lock window, the
//! iptables users without the host's lock file ([`MountGap`]), kube-proxy's messages per kind
//! ([`LogCount`]) and the backend facts ([`BackendFacts`]). The collector reads it; `judge`
//! decides on it; tests build it directly.

use std::time::Duration;

use super::backend::{Backend, BinaryBackend};
use super::kplog::LogKind;
use super::tracker::{LockId, ProcInfo, Window};

/// kube-proxy's logged messages of one kind since the agent started.
#[derive(Debug, Clone, PartialEq)]
pub struct LogCount {
    pub kind: LogKind,
    /// Matches within the sample's log window.
    pub recent: u64,
    /// Matches since the agent started.
    pub total: u64,
    /// The latest match: its timestamp text, message (cut) and host-side log path.
    pub last_time: String,
    pub last_message: String,
    pub last_file: String,
}

/// One collection's reading of the host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    /// The xtables lock file, as a host path.
    pub lock_path: String,
    /// What the lock sampler saw since the previous collection.
    pub window: Window,
    /// How often the sampler read `/proc/locks` (a waiter streak of N samples is about N of
    /// these).
    pub sample_period: Duration,
    /// iptables users in the host network namespace whose lock file is not the host's (empty
    /// when namespaces could not be compared: the status says why).
    pub mount_gaps: Vec<MountGap>,
    /// kube-proxy's messages per kind seen since the agent started, in [`LogKind`] order.
    pub logs: Vec<LogCount>,
    /// The window [`LogCount::recent`] covers.
    pub log_window: Duration,
    pub backend: BackendFacts,
}

/// A process in the host network namespace but its own mount namespace, whose view of the
/// lock path is not the host's lock file.
#[derive(Debug, Clone, PartialEq)]
pub struct MountGap {
    pub proc: ProcInfo,
    pub mnt_ns: u64,
    /// The lock's identity on the host (`None`: no lock file on the host).
    pub host_lock: Option<LockId>,
    /// The lock's identity inside the process's root (`None`: no file there).
    pub pod_lock: Option<LockId>,
}

/// Backend facts: legacy tables in the kernel and the host's `iptables` symlink target.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackendFacts {
    /// `None` when `/proc/net/ip_tables_names` is absent (legacy module not loaded).
    pub legacy_tables: Option<Vec<String>>,
    pub binary: Option<BinaryBackend>,
}

impl BackendFacts {
    pub(super) fn host_backend(&self) -> Backend {
        self.binary.as_ref().map_or(Backend::Unknown, |b| b.backend)
    }
    pub(super) fn legacy_in_use(&self) -> bool {
        self.legacy_tables.as_ref().is_some_and(|t| !t.is_empty())
    }
}
