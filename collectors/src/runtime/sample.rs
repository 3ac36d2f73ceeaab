//! The typed reading of the `runtime` collector: one [`Sample`] of everything a collection
//! found (the runtimes the node uses and their answers, the kubelet, dockerd's and
//! containerd's views, duplicate installs, the CNI configuration, immutable files, port
//! conflicts, kube-proxy), with the live facts the node logs' judge asks of it. The collector
//! and its readers build it; `judge` decides on it; tests build it directly.

use std::time::Duration;

use super::probe::{CriCondition, Outcome, TaskStatus};
use super::thresholds::Thresholds;

/// The runtime daemons judged: the two runtimes, and cri-dockerd, the CRI shim between the
/// kubelet (1.24+) and dockerd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Daemon {
    Dockerd,
    Containerd,
    CriDockerd,
}

impl Daemon {
    pub fn as_str(self) -> &'static str {
        match self {
            Daemon::Dockerd => "dockerd",
            Daemon::Containerd => "containerd",
            Daemon::CriDockerd => "cri-dockerd",
        }
    }

    /// The condition the rule files test for this daemon's advice.
    pub fn condition(self) -> &'static str {
        match self {
            Daemon::Dockerd => "dockerd",
            Daemon::Containerd => "containerd",
            Daemon::CriDockerd => "cri_dockerd",
        }
    }
}

/// Why the node is taken to use a runtime (an installed unit file is not a reason; one that
/// systemd is told to start at boot is, and so are docker's containers' shims).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Why {
    /// The kubelet's container runtime endpoint names it (or cri-dockerd/dockershim, for
    /// dockerd).
    Kubelet,
    /// Its process runs now.
    Running,
    /// This agent saw it run (or answer) in an earlier collection.
    SeenEarlier,
    /// The operator named its socket (`--docker-socket`, `--containerd-socket`).
    Configured,
    /// Its socket file exists: something created it since boot (`/run` is a tmpfs).
    SocketLeft,
    /// dockerd is configured to use this containerd.
    UsedByDocker,
    /// Shims of docker's containers (`containerd-shim… -namespace moby`) run: its
    /// containers outlived it (live-restore).
    MobyShims,
    /// Its systemd unit is enabled (a `*.wants/docker.service` link) on a host booted with
    /// systemd: it is meant to run.
    SystemdUnit,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Kubelet => "kubelet",
            Why::Running => "running",
            Why::SeenEarlier => "seen_earlier",
            Why::Configured => "configured",
            Why::SocketLeft => "socket_left",
            Why::UsedByDocker => "used_by_dockerd",
            Why::MobyShims => "moby_shims",
            Why::SystemdUnit => "systemd_unit",
        }
    }

    /// Signs that docker is installed and used, which do not say the kubelet or the operator
    /// depend on it: a daemon known only by them is stopped (a warning), not missing.
    pub fn is_sign_only(self) -> bool {
        matches!(self, Why::MobyShims | Why::SystemdUnit)
    }
}

/// How full a runtime's data directory is.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskFill {
    /// Host path of the directory (`/var/lib/docker`).
    pub path: String,
    pub used_percent: f64,
}

/// One runtime the node uses, and what was found.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeSample {
    pub daemon: Daemon,
    /// Host path of its API socket.
    pub socket: String,
    /// Why the node is taken to use it (never empty: a runtime with no reason is not judged).
    pub why: Vec<Why>,
    /// Its process, when one runs.
    pub pid: Option<u32>,
    /// The first call's outcome.
    pub outcome: Outcome,
    /// The deadline the probe had.
    pub timeout: Duration,
    /// Its version, when it said.
    pub version: Option<String>,
    /// Its data directory's fill, when known.
    pub data_dir: Option<DiskFill>,
    /// dockerd: shims of its containers running (`-namespace moby`), counted only when no
    /// dockerd runs.
    pub moby_shims: u32,
    /// Its restarts (a new process where the last collection saw another) in the window
    /// (`kubelet_restart_window`).
    pub restarts_in_window: u32,
}

/// The kubelet, on a node that has one.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletSample {
    pub pid: Option<u32>,
    pub healthz: Healthz,
    /// Restarts seen (its process start time changing) within the window.
    pub restarts_in_window: u32,
    /// Seconds since its current process started, when it runs.
    pub started_seconds_ago: Option<u64>,
}

/// The kubelet's `/healthz`, or why it was not asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Healthz {
    Probed {
        /// `127.0.0.1:10248`.
        addr: String,
        outcome: Outcome,
        status: Option<u16>,
    },
    /// `healthzPort: 0`.
    Disabled,
    /// The agent is not in the host's network namespace: 127.0.0.1 is not the node's.
    NotFromHere,
    /// The configured port or address is not one.
    BadConfig(String),
}

/// dockerd's and containerd's views of the running containers, when both answered, with the
/// differences that held in two consecutive samples.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncSample {
    pub docker_socket: String,
    pub containerd_socket: String,
    /// The containerd namespace docker's containers live in (`moby`).
    pub namespace: String,
    /// dockerd lists these as running; containerd has them in another state (`Some`) or not
    /// at all (`None`).
    pub docker_only: Vec<(String, Option<TaskStatus>)>,
    /// containerd runs these tasks; dockerd does not list them as running.
    pub containerd_only: Vec<String>,
}

/// A runtime component installed more than once.
#[derive(Debug, Clone, PartialEq)]
pub struct DuplicateInstall {
    /// `dockerd`, `containerd`, `runc`, `containerd-shim`.
    pub component: String,
    /// Distinct binaries (host paths).
    pub paths: Vec<String>,
    /// The binary the running daemon was started from, when it runs and can be read.
    pub running: Option<String>,
}

/// The CNI configuration and the runtime's network condition.
#[derive(Debug, Clone, PartialEq)]
pub struct CniSample {
    /// Host path of the configuration directory (`/etc/cni/net.d`).
    pub conf_dir: String,
    pub dir: CniDir,
    /// The CRI `NetworkReady` condition of the kubelet's runtime, when it answered.
    pub network_ready: Option<CriCondition>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CniDir {
    /// The kubelet does not use CNI (`--network-plugin=kubenet`): the directory is not judged.
    NotUsed,
    Missing,
    /// No `*.conf`, `*.conflist` or `*.json` file.
    Empty,
    /// Configuration files, none of them readable JSON naming a plugin.
    Invalid {
        files: Vec<String>,
    },
    /// The file the runtime loads first.
    Valid {
        file: String,
    },
}

/// A file with the immutable (`i`) or append-only (`a`) attribute under a directory the
/// kubelet or the runtime must remove, confirmed just before it is reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ImmutableFile {
    /// Host path.
    pub path: String,
    pub immutable: bool,
    pub append_only: bool,
    pub is_dir: bool,
    /// The pod whose directory holds it: uid, and namespace/name when known.
    pub pod_uid: Option<String>,
    pub pod: Option<(String, String)>,
    /// The container whose directory or writable layer holds it.
    pub container_id: Option<String>,
    /// The log that names it as a file that could not be removed: the program (`kubelet`,
    /// `dockerd`) and the log file's host path.
    pub named_by: Option<(String, String)>,
}

/// A hostNetwork pod's port bound by a process outside that pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConflict {
    /// `tcp` or `udp`.
    pub protocol: &'static str,
    pub port: u16,
    /// Pods that declare the port with hostNetwork.
    pub pods: Vec<DeclaredPod>,
    /// The process bound to the port, when one is.
    pub holder: Option<PortHolder>,
}

/// A pod declaring a host port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredPod {
    /// `namespace/name`.
    pub name: String,
    pub uid: Option<String>,
    /// Where the declaration was read (a manifest's host path, `docker container <id>`).
    pub source: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PortHolder {
    pub pid: u32,
    pub comm: String,
    /// `namespace/name` of its pod, when the node's metadata names it.
    pub pod: Option<String>,
    /// Its pod's uid, from its cgroup.
    pub pod_uid: Option<String>,
    /// Whether it runs in a pod's cgroup at all.
    pub in_pod: bool,
}

impl PortHolder {
    /// Whether this process is outside every pod in `pods`: a host process, or a process of
    /// a pod known (by uid or name) to be another. `false` when that cannot be told.
    pub fn outside(&self, pods: &[DeclaredPod]) -> bool {
        if !self.in_pod {
            return true;
        }
        let uid_match = self
            .pod_uid
            .as_ref()
            .is_some_and(|u| pods.iter().any(|p| p.uid.as_ref() == Some(u)));
        let name_match = self
            .pod
            .as_ref()
            .is_some_and(|n| pods.iter().any(|p| &p.name == n));
        if uid_match || name_match {
            return false;
        }
        let uids_known = self.pod_uid.is_some() && pods.iter().all(|p| p.uid.is_some());
        uids_known || self.pod.is_some()
    }
}

/// kube-proxy's IPVS settings and CPU use.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeProxySample {
    pub pid: u32,
    /// `ipvs`, `iptables`, `nftables` as configured (`None`: not set, kube-proxy's default is
    /// iptables).
    pub mode: Option<String>,
    pub sync_period: Option<Duration>,
    pub min_sync_period: Option<Duration>,
    /// Where the settings came from (`flags`, or the config file's host path).
    pub origin: String,
    /// CPU cores used between the last two samples.
    pub cpu_cores: Option<f64>,
}

/// Everything one collection found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    pub runtimes: Vec<RuntimeSample>,
    pub kubelet: Option<KubeletSample>,
    pub sync: Option<SyncSample>,
    pub duplicates: Vec<DuplicateInstall>,
    pub cni: Option<CniSample>,
    pub immutable: Vec<ImmutableFile>,
    pub port_conflicts: Vec<PortConflict>,
    pub kube_proxy: Option<KubeProxySample>,
}

/// What the probes know now, for the judge of the node's logs (the kubelet's PLEG and
/// network lines are current only while nothing live contradicts them, and a PLEG finding
/// names a full runtime disk as its cause).
impl Sample {
    /// Host paths of the runtimes' data directories at least `t.disk_full_percent` full.
    pub fn full_runtime_dirs(&self, t: &Thresholds) -> Vec<String> {
        let mut out: Vec<String> = self
            .runtimes
            .iter()
            .filter_map(|r| r.data_dir.as_ref())
            .filter(|d| d.used_percent >= t.disk_full_percent)
            .map(|d| d.path.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether the CNI directory holds a valid configuration (`None`: not judged, no
    /// kubelet or not a CNI node).
    pub fn cni_config_present(&self) -> Option<bool> {
        match self.cni.as_ref()?.dir {
            CniDir::NotUsed => None,
            CniDir::Valid { .. } => Some(true),
            _ => Some(false),
        }
    }

    /// The kubelet's runtime's CRI `NetworkReady` condition (`None`: not asked, or no answer).
    pub fn cri_network_ready(&self) -> Option<bool> {
        Some(self.cni.as_ref()?.network_ready.as_ref()?.status)
    }

    /// Whether every runtime this node uses answered (`None`: no runtime here, or one could
    /// not be asked).
    pub fn runtime_responding(&self) -> Option<bool> {
        if self.runtimes.is_empty()
            || self
                .runtimes
                .iter()
                .any(|r| matches!(r.outcome, Outcome::Failed(_)))
        {
            return None;
        }
        Some(self.runtimes.iter().all(|r| r.outcome.answered()))
    }
}
