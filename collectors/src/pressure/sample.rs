//! The typed reading of the `pressure` collector: one [`PressureSample`] of the node's PSI,
//! the kubepods cgroup's and its pods' PSI, the throttling of the daemons' and the pods' CPU
//! cgroups over the window since the previous run, and swap. The collector reads it; `judge`
//! decides on it; tests build it directly.

use crate::config::kubelet::SwapOrigin;
use crate::proc::cgroup::QosClass;
use crate::proc::pressure::{Pressure, PsiLine};

/// A resource PSI reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Memory,
    Io,
    Cpu,
}

impl Resource {
    /// In the order the rules look at them.
    pub const ALL: [Resource; 3] = [Resource::Memory, Resource::Io, Resource::Cpu];

    /// The file name under `/proc/pressure` and the prefix of a cgroup's `<name>.pressure`.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Io => "io",
            Resource::Cpu => "cpu",
        }
    }
}

/// PSI of the node or of one cgroup, by resource (`None`: that file was absent).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Psi {
    pub memory: Option<Pressure>,
    pub io: Option<Pressure>,
    pub cpu: Option<Pressure>,
}

impl Psi {
    pub fn get(&self, r: Resource) -> Option<&Pressure> {
        match r {
            Resource::Memory => self.memory.as_ref(),
            Resource::Io => self.io.as_ref(),
            Resource::Cpu => self.cpu.as_ref(),
        }
    }

    pub fn set(&mut self, r: Resource, p: Option<Pressure>) {
        match r {
            Resource::Memory => self.memory = p,
            Resource::Io => self.io = p,
            Resource::Cpu => self.cpu = p,
        }
    }

    /// The `some` line of a resource (what bounds every descendant's `some` and `full`).
    pub fn some(&self, r: Resource) -> Option<&PsiLine> {
        self.get(r).map(|p| &p.some)
    }
}

/// A pod as its cgroup names it, with its namespace and name where the node's pod log
/// directories tell them ([`crate::pods`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    pub uid: String,
    pub qos: QosClass,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// One pod cgroup's PSI.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPsi {
    pub pod: PodIdentity,
    /// Host-side directory of the pod's cgroup (`/sys/fs/cgroup/kubepods.slice/…`).
    pub cgroup_dir: String,
    pub psi: Psi,
}

/// CPU bandwidth throttling of one cgroup over the window between two runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleWindow {
    /// Enforcement periods with runnable tasks in the window.
    pub periods: u64,
    /// Of them, periods that ran out of quota.
    pub throttled: u64,
    /// Time the cgroup's tasks were held back in the window, microseconds.
    pub throttled_usec: u64,
    pub window_seconds: f64,
}

impl ThrottleWindow {
    /// Throttled periods per period, percent (0 without periods).
    pub fn percent(&self) -> f64 {
        if self.periods == 0 {
            0.0
        } else {
            self.throttled as f64 * 100.0 / self.periods as f64
        }
    }
}

/// A node daemon's CPU cgroup (kubelet, container runtime).
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonThrottle {
    /// Its process name (`kubelet`, `containerd`, `dockerd`, `crio`, `cri-dockerd`).
    pub daemon: String,
    pub pid: u32,
    /// Its cgroup path in the CPU hierarchy (`/system.slice/kubelet.service`).
    pub cgroup: String,
    /// Host-side directory of that cgroup.
    pub cgroup_dir: String,
    /// `None` on the first run that saw this cgroup.
    pub window: Option<ThrottleWindow>,
}

/// One pod cgroup's (pod-level or a container's) throttling.
#[derive(Debug, Clone, PartialEq)]
pub struct PodThrottle {
    pub pod: PodIdentity,
    /// Host-side directory of the cgroup.
    pub cgroup_dir: String,
    /// The container id when the cgroup is a container's.
    pub container_id: Option<String>,
    pub window: ThrottleWindow,
}

/// Swap-in and swap-out over the window (`/proc/vmstat` `pswpin`/`pswpout`, pages).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwapRate {
    pub pages_in: u64,
    pub pages_out: u64,
    pub window_seconds: f64,
}

/// Swap on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct Swap {
    /// `SwapTotal` and `SwapFree` of `/proc/meminfo`.
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// The areas of `/proc/swaps` (their paths).
    pub areas: Vec<String>,
    /// `None` on the first run or when `/proc/vmstat` lacks the counters.
    pub rate: Option<SwapRate>,
}

/// The kubelet's swap settings (read only while swap is on and a kubelet is on the node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletSwap {
    /// A kubelet process runs now.
    pub running: bool,
    pub fail_swap_on: bool,
    pub origin: SwapOrigin,
    /// `memorySwap.swapBehavior` when its config file sets it.
    pub behavior: Option<String>,
    /// The config file read (host path).
    pub config_path: String,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq)]
pub struct PressureSample {
    /// The node's PSI (`/proc/pressure/*`); `None` when PSI is off in the kernel.
    pub node: Option<Psi>,
    /// The kubepods cgroup's PSI (v2 hierarchy only).
    pub kubepods: Option<Psi>,
    /// Pods' PSI: read only when the kubepods cgroup's `some` reaches a rule's threshold
    /// (a pod's `some` and `full` never exceed its parent's `some`).
    pub pods: Vec<PodPsi>,
    pub daemons: Vec<DaemonThrottle>,
    /// Pod and container cgroups with a window.
    pub pod_throttling: Vec<PodThrottle>,
    /// `None` when `/proc/meminfo` could not be read.
    pub swap: Option<Swap>,
    pub kubelet: Option<KubeletSwap>,
    /// Bytes per page (swap counters count pages).
    pub page_size_bytes: u64,
}
