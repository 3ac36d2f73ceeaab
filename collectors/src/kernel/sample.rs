//! The typed reading of the `kernel` collector: one [`KernelSample`] of the kernel log's OOM
//! kills, hung tasks and filesystem errors grouped within the window ([`OomGroup`],
//! [`HungGroup`], [`FsErrorGroup`]), the memory limits too small to run anything ([`TinyPod`]),
//! the node's memory, the runtime and kubelet filesystems, listen-queue drops ([`ListenDelta`])
//! and PID use ([`PidUsage`]). The collector reads it; `judge` decides on it; tests build it
//! directly.

use crate::kernel::crash::{OopsKind, StallKind};
use crate::kernel::fs_error::FsErrorKind;
use crate::kernel::oom::OomKind;
use crate::pods::PodNames;
use crate::proc::cgroup::QosClass;

/// OOM kills of one pod (or one non-pod cgroup, or the node) within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct OomGroup {
    pub kind: OomKind,
    /// Namespace/name of the pod and name of the container, when the node's metadata has them.
    pub names: PodNames,
    pub pod_uid: Option<String>,
    pub qos: Option<QosClass>,
    pub container_id: Option<String>,
    /// The victim's memory cgroup as logged.
    pub task_memcg: Option<String>,
    /// The cgroup whose limit was hit (cgroup OOM).
    pub oom_memcg: Option<String>,
    /// OOM kills (decisions of the OOM killer) within the window.
    pub kills: u64,
    /// Processes those kills ended (more than `kills` when memory.oom.group killed whole
    /// containers).
    pub processes_killed: u64,
    /// Kills whose report the kernel suppressed (rate limit), tied here by their task name.
    pub unreported_kills: u64,
    /// True when no line of these kills says where they ran (the kernel suppressed their
    /// report and no logged kill of the same task names one cgroup).
    pub report_missing: bool,
    /// Whether the pod is still on the node (its cgroup exists), when the kubepods tree was
    /// walked to the end.
    pub pod_present: Option<bool>,
    pub last_pid: u32,
    pub last_comm: String,
    pub last_seen_seconds_ago: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
}

/// What the system-OOM rule compares: the node's memory and what pods may take of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMemory {
    pub mem_total_bytes: Option<u64>,
    /// MemAvailable now.
    pub mem_available_bytes: Option<u64>,
    /// Limit of the kubepods cgroup; `None` when absent or unlimited.
    pub kubepods_limit_bytes: Option<u64>,
    /// Host path of the file it came from.
    pub kubepods_limit_file: Option<String>,
}

/// A container or pod cgroup with a limit below the threshold (one pod, all its groups).
#[derive(Debug, Clone, PartialEq)]
pub struct TinyPod {
    /// Pod UID, or the cgroup path when it is not a pod cgroup.
    pub subject: String,
    /// Namespace/name of the pod, when the node's metadata has them.
    pub names: PodNames,
    pub pod_uid: Option<String>,
    /// (cgroup path, container id if any, limit in bytes, host path of the limit file).
    pub groups: Vec<(String, Option<String>, u64, String)>,
}

/// Hung-task reports of one task name within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct HungGroup {
    pub comm: String,
    pub last_pid: u32,
    pub reports: u64,
    pub max_blocked_seconds: u64,
    pub last_seen_seconds_ago: Option<u64>,
    /// A reported task of this name still in uninterruptible sleep (D) now, when its
    /// `/proc/<pid>/stat` could be read (`Some(false)`: every reported pid has exited or runs).
    pub blocked_now: Option<bool>,
    /// The pid found in D state now.
    pub blocked_now_pid: Option<u32>,
}

/// A runtime or kubelet directory and how full its filesystem is.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleFs {
    pub role: &'static str,
    pub host_path: String,
    pub used_percent: f64,
    pub avail_bytes: u64,
}

/// Filesystem errors of one device within the window, with where it is mounted.
#[derive(Debug, Clone, PartialEq)]
pub struct FsErrorGroup {
    pub device: String,
    pub kinds: Vec<FsErrorKind>,
    pub errors: u64,
    pub last_seen_seconds_ago: Option<u64>,
    pub mount_point: Option<String>,
    pub fstype: Option<String>,
    /// True when mountinfo shows the filesystem read-only now: the mount or the superblock
    /// `ro`, or ext4's `emergency_ro` (6.6+ keeps `rw` in the options after an error).
    pub read_only_now: Option<bool>,
    /// XFS only: true when the mounted filesystem answers with EIO now (shut down), false when
    /// it answers; `None` when it was not probed or the agent does not see that mount.
    pub shut_down_now: Option<bool>,
    /// ext4 only: errors recorded in the superblock and not repaired yet
    /// (`/sys/fs/ext4/<dev>/errors_count`; 0 after fsck).
    pub errors_count_now: Option<u64>,
    /// Runtime/kubelet directories on this filesystem: (role, host path).
    pub roles: Vec<(&'static str, String)>,
}

/// Listen-queue counter increases between two samples of the host namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListenDelta {
    pub listen_drops: u64,
    pub listen_overflows: u64,
    pub backlog_drop: u64,
    pub interval_seconds: f64,
    pub somaxconn: Option<u64>,
    pub tcp_max_syn_backlog: Option<u64>,
}

impl ListenDelta {
    /// Drops of new connections: `ListenDrops` (which counts overflows too) plus backlog drops.
    pub fn total(&self) -> u64 {
        self.listen_drops
            .max(self.listen_overflows)
            .saturating_add(self.backlog_drop)
    }
}

/// Tasks against the kernel's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PidUsage {
    pub tasks: u64,
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
}

/// Oopses (and panics) of one task name (or of no known task) within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct OopsGroup {
    /// The task's name, when the oops's `CPU:` line was read.
    pub comm: Option<String>,
    pub oopses: u64,
    /// What opened each oops, once each.
    pub kinds: Vec<OopsKind>,
    pub last_kind: OopsKind,
    pub last_pid: Option<u32>,
    pub last_cpu: Option<u32>,
    /// The last oops happened in a task's context (a pid other than 0, not the idle task).
    pub process_context: bool,
    /// The text of a `Kernel panic - not syncing:` line that followed one of them.
    pub panic: Option<String>,
    pub last_seen_seconds_ago: Option<u64>,
}

/// Lockups and RCU stalls of one CPU (or of no CPU the log named) within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct StallGroup {
    pub cpu: Option<u32>,
    pub kinds: Vec<StallKind>,
    pub reports: u64,
    pub max_stuck_seconds: Option<u64>,
    pub last_comm: Option<String>,
    pub last_pid: Option<u32>,
    pub rcu_flavor: Option<String>,
    pub last_seen_seconds_ago: Option<u64>,
}

/// `unregister_netdevice: waiting for <dev>` lines of one device within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct NetdevGroup {
    pub device: String,
    pub waits: u64,
    pub usage_count: Option<u64>,
    pub last_seen_seconds_ago: Option<u64>,
}

/// ext4 warnings of one device within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Ext4WarningGroup {
    pub device: String,
    pub warnings: u64,
    pub last_function: Option<String>,
    pub last_seen_seconds_ago: Option<u64>,
}

/// Everything the kernel rules look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelSample {
    pub oom: Vec<OomGroup>,
    pub node_memory: NodeMemory,
    pub tiny: Vec<TinyPod>,
    pub hung: Vec<HungGroup>,
    /// Tasks in D state now (`/proc/stat` `procs_blocked`).
    pub procs_blocked: Option<u64>,
    /// Runtime and kubelet filesystems (read only when a hung task needs them).
    pub role_fs: Vec<RoleFs>,
    pub fs_errors: Vec<FsErrorGroup>,
    pub listen: Option<ListenDelta>,
    pub pids: Option<PidUsage>,
    pub oopses: Vec<OopsGroup>,
    pub stalls: Vec<StallGroup>,
    pub netdev: Vec<NetdevGroup>,
    /// `unregister_netdevice` waits of all devices within `unregister_frequent_seconds`.
    pub netdev_waits_recent: u64,
    pub ext4_warnings: Vec<Ext4WarningGroup>,
    /// The window kernel-log events are kept in (seconds).
    pub window_seconds: u64,
}
