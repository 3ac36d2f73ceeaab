//! The runtime rules: a typed [`Sample`] -> drafts. Pure: no files, no clock, no network.
//!
//! The collector (`mod.rs`) finds the runtimes this node uses and asks them through the
//! [`super::probe::RuntimeProbe`]; this module decides what the answers mean. Every finding
//! lasts exactly as long as its condition: a restarted runtime answers and its finding is
//! gone in the next collection. The words are `collectors/rules/runtime.toml`.

use std::time::Duration;

use super::probe::{CriCondition, Outcome, TaskStatus};
use crate::finding::Severity;
use crate::rules::{Draft, Item};

/// Expected, no process, no socket: the runtime is stopped.
pub const NOT_RUNNING: &str = "runtime.not_running";
/// No process, its socket left behind and refusing connections: it died without cleaning up.
pub const CRASHED: &str = "runtime.crashed";
/// The socket accepts, nothing answers before the deadline.
pub const HUNG: &str = "runtime.hung";
/// It answers, slowly.
pub const SLOW: &str = "runtime.slow";
/// The process runs but its API cannot be reached (socket missing, refusing, wrong answer).
pub const UNREACHABLE: &str = "runtime.unreachable";
/// dockerd and containerd disagree about which containers run.
pub const OUT_OF_SYNC: &str = "runtime.out_of_sync";
/// Two installations of a runtime component side by side.
pub const DUPLICATE_INSTALL: &str = "runtime.duplicate_install";
/// The kubelet is configured on this node but does not run.
pub const KUBELET_NOT_RUNNING: &str = "runtime.kubelet_not_running";
/// The kubelet runs but its `/healthz` fails.
pub const KUBELET_UNHEALTHY: &str = "runtime.kubelet_unhealthy";
/// The kubelet restarted again and again.
pub const KUBELET_RESTARTS: &str = "runtime.kubelet_restarts";
/// No usable CNI configuration, or the runtime says its network is not ready.
pub const CNI_NOT_READY: &str = "runtime.cni_not_ready";
/// A file under a pod's or container's directory with the immutable or append-only attribute.
pub const IMMUTABLE_FILE: &str = "runtime.immutable_file";
/// A hostNetwork pod's port is bound by another process.
pub const HOST_PORT_CONFLICT: &str = "runtime.host_port_conflict";
/// kube-proxy in IPVS mode resyncs too often and burns CPU.
pub const KUBE_PROXY_IPVS_SYNC: &str = "runtime.kube_proxy_ipvs_sync";

/// What the rules judge by.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A first answer slower than this is `runtime.slow` (a healthy `/_ping` or `Version`
    /// takes about a millisecond).
    pub slow_answer: Duration,
    /// A runtime data directory at least this full is named as the likely cause of a hang
    /// (the handbook's disk-full case).
    pub disk_full_percent: f64,
    /// This many kubelet restarts within the window make `runtime.kubelet_restarts`.
    pub kubelet_restarts: u32,
    pub kubelet_restart_window: Duration,
    /// kube-proxy using at least this many CPU cores (averaged between two samples) with a
    /// short IPVS sync period makes `runtime.kube_proxy_ipvs_sync`.
    pub kube_proxy_cpu_cores: f64,
    /// The handbook's advice: `--ipvs-sync-period=30s`.
    pub ipvs_sync_period: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            slow_answer: Duration::from_secs(1),
            disk_full_percent: 95.0,
            kubelet_restarts: 3,
            kubelet_restart_window: Duration::from_secs(30 * 60),
            kube_proxy_cpu_cores: 0.5,
            ipvs_sync_period: Duration::from_secs(30),
        }
    }
}

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

/// Why the node is taken to use a runtime (an installed unit file is not a reason).
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
        }
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

/// Judges one sample.
pub fn judge(s: &Sample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for r in &s.runtimes {
        out.extend(runtime(r, t));
    }
    if let Some(sync) = &s.sync {
        out.extend(out_of_sync(sync));
    }
    let docker_used = s.runtimes.iter().any(|r| r.daemon == Daemon::Dockerd);
    if docker_used {
        out.extend(s.duplicates.iter().map(duplicate));
    }
    if let Some(k) = &s.kubelet {
        out.extend(kubelet(k, t));
    }
    if let Some(c) = &s.cni {
        out.extend(cni(c));
    }
    out.extend(s.immutable.iter().map(immutable));
    out.extend(s.port_conflicts.iter().filter_map(port_conflict));
    if let Some(k) = &s.kube_proxy {
        out.extend(kube_proxy(k, t));
    }
    out
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The drafts about one runtime; `None` when it is healthy.
fn runtime(r: &RuntimeSample, t: &Thresholds) -> Option<Draft> {
    let alive = r.pid.is_some();
    let base = |id: &str, severity: Severity| {
        let why: Vec<&str> = r.why.iter().map(|w| w.as_str()).collect();
        let disk_full = r
            .data_dir
            .as_ref()
            .is_some_and(|d| d.used_percent >= t.disk_full_percent);
        Draft::new(id, severity)
            .subject(r.socket.clone())
            .evidence("daemon", r.daemon.as_str())
            .evidence("socket", r.socket.clone())
            .evidence("outcome", r.outcome.as_str())
            .evidence("expected_because", why.join(", "))
            .evidence_opt("pid", r.pid)
            .evidence_opt("version", r.version.clone())
            .evidence_opt("data_dir", r.data_dir.as_ref().map(|d| d.path.clone()))
            .evidence_opt(
                "data_dir_used_percent",
                r.data_dir
                    .as_ref()
                    .map(|d| (d.used_percent * 10.0).round() / 10.0),
            )
            .when(r.daemon.condition())
            .when_if("by_kubelet", r.why.contains(&Why::Kubelet))
            .when_if("disk_full", disk_full)
    };
    match &r.outcome {
        Outcome::Answered { latency } if *latency >= t.slow_answer => Some(
            base(SLOW, Severity::Warning)
                .evidence("latency_seconds", secs(*latency))
                .evidence("slow_seconds", secs(t.slow_answer)),
        ),
        Outcome::Answered { .. } => None,
        Outcome::Timeout { after, connected } => Some(
            base(HUNG, Severity::Critical)
                .evidence("waited_seconds", secs(*after))
                .when_if("not_accepting", !connected),
        ),
        Outcome::Refused if alive => Some(base(UNREACHABLE, Severity::Critical).when("refused")),
        Outcome::Refused => Some(base(CRASHED, Severity::Critical)),
        Outcome::NoSocket if alive => Some(
            base(UNREACHABLE, Severity::Critical)
                .evidence("timeout_seconds", secs(r.timeout))
                .when("socket_missing"),
        ),
        Outcome::NotSocket if alive => {
            Some(base(UNREACHABLE, Severity::Critical).when("not_a_socket"))
        }
        Outcome::NoSocket | Outcome::NotSocket => Some(base(NOT_RUNNING, Severity::Critical)),
        Outcome::BadAnswer { latency, detail } => Some(
            base(UNREACHABLE, Severity::Critical)
                .evidence("latency_seconds", secs(*latency))
                .evidence("answer", detail.clone())
                .when("bad_answer"),
        ),
        // The probe could not try: the collector's status says why; nothing is judged.
        Outcome::Failed(_) => None,
    }
}

/// `runtime.out_of_sync`: dockerd and containerd disagree (held over two samples).
fn out_of_sync(s: &SyncSample) -> Option<Draft> {
    if s.docker_only.is_empty() && s.containerd_only.is_empty() {
        return None;
    }
    let mut items = Vec::new();
    for (id, status) in &s.docker_only {
        items.push(
            Item::new()
                .value("container_id", id.clone())
                .value("short_id", short(id))
                .value(
                    "containerd_status",
                    status.map_or("absent", |st| st.as_str()),
                )
                .when("listed_by_docker"),
        );
    }
    for id in &s.containerd_only {
        items.push(
            Item::new()
                .value("container_id", id.clone())
                .value("short_id", short(id))
                .value("containerd_status", "running")
                .when("task_in_containerd"),
        );
    }
    let ids: Vec<String> = s
        .docker_only
        .iter()
        .map(|(id, _)| id.clone())
        .chain(s.containerd_only.iter().cloned())
        .collect();
    Some(
        Draft::new(OUT_OF_SYNC, Severity::Warning)
            .subject(s.docker_socket.clone())
            .evidence("docker_socket", s.docker_socket.clone())
            .evidence("containerd_socket", s.containerd_socket.clone())
            .evidence("namespace", s.namespace.clone())
            .evidence("running_in_docker_only", s.docker_only.len())
            .evidence("running_in_containerd_only", s.containerd_only.len())
            .evidence("container_ids", ids.join(", "))
            .items("containers", items)
            .when_if("docker_running", !s.docker_only.is_empty())
            .when_if("containerd_running", !s.containerd_only.is_empty()),
    )
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// `runtime.duplicate_install`.
fn duplicate(d: &DuplicateInstall) -> Draft {
    Draft::new(DUPLICATE_INSTALL, Severity::Warning)
        .subject(d.component.clone())
        .evidence("component", d.component.clone())
        .evidence("binaries", d.paths.join(", "))
        .evidence_opt("running_binary", d.running.clone())
        .words("paths", &d.paths)
}

/// The kubelet's drafts.
fn kubelet(k: &KubeletSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    if let Healthz::Probed {
        addr,
        outcome,
        status,
    } = &k.healthz
    {
        let url = format!("http://{addr}/healthz");
        let d = |id: &str, severity: Severity| {
            Draft::new(id, severity)
                .subject("kubelet")
                .evidence("healthz", url.clone())
                .evidence("outcome", outcome.as_str())
                .evidence_opt("pid", k.pid)
                .evidence_opt("http_status", status.map(u32::from))
        };
        match (k.pid, outcome) {
            (_, Outcome::Answered { .. }) => {}
            (None, Outcome::Refused | Outcome::NoSocket | Outcome::NotSocket) => out.push(
                Draft::new(KUBELET_NOT_RUNNING, Severity::Critical)
                    .subject("kubelet")
                    .evidence("healthz", url.clone())
                    .evidence("outcome", outcome.as_str()),
            ),
            (_, Outcome::Failed(_)) => {}
            (None, _) | (Some(_), _) => {
                let severity = match outcome {
                    Outcome::Refused => Severity::Warning,
                    _ => Severity::Critical,
                };
                let mut draft = d(KUBELET_UNHEALTHY, severity)
                    .when_if("refused", matches!(outcome, Outcome::Refused))
                    .when_if("timeout", matches!(outcome, Outcome::Timeout { .. }))
                    .when_if("bad_answer", matches!(outcome, Outcome::BadAnswer { .. }));
                if let Outcome::BadAnswer { detail, .. } = outcome {
                    draft = draft.evidence("answer", detail.clone());
                }
                if let Outcome::Timeout { after, .. } = outcome {
                    draft = draft.evidence("waited_seconds", secs(*after));
                }
                out.push(draft);
            }
        }
    } else if k.pid.is_none() && !matches!(k.healthz, Healthz::NotFromHere) {
        // Health endpoint off or unreadable, and no process: the kubelet is not running.
        out.push(
            Draft::new(KUBELET_NOT_RUNNING, Severity::Critical)
                .subject("kubelet")
                .evidence("outcome", "no_process"),
        );
    }
    if k.restarts_in_window >= t.kubelet_restarts {
        out.push(
            Draft::new(KUBELET_RESTARTS, Severity::Warning)
                .subject("kubelet")
                .evidence("restarts", k.restarts_in_window)
                .evidence("window_minutes", t.kubelet_restart_window.as_secs() / 60)
                .evidence("restarts_threshold", t.kubelet_restarts)
                .evidence_opt("pid", k.pid)
                .evidence_opt("started_seconds_ago", k.started_seconds_ago),
        );
    }
    out
}

/// `runtime.cni_not_ready`.
fn cni(c: &CniSample) -> Option<Draft> {
    let cri_not_ready = c.network_ready.as_ref().filter(|n| !n.status);
    let dir_bad = matches!(
        c.dir,
        CniDir::Missing | CniDir::Empty | CniDir::Invalid { .. }
    );
    if !dir_bad && cri_not_ready.is_none() {
        return None;
    }
    let mut d = Draft::new(CNI_NOT_READY, Severity::Critical)
        .subject(c.conf_dir.clone())
        .evidence("conf_dir", c.conf_dir.clone())
        .when_if("dir_missing", c.dir == CniDir::Missing)
        .when_if("dir_empty", c.dir == CniDir::Empty)
        .when_if("cri_network_not_ready", cri_not_ready.is_some());
    if let CniDir::Invalid { files } = &c.dir {
        d = d
            .evidence("invalid_files", files.join(", "))
            .when("invalid_config");
    }
    if let CniDir::Valid { file } = &c.dir {
        d = d.evidence("config_file", file.clone());
    }
    if let Some(n) = cri_not_ready {
        d = d
            .evidence("cri_reason", n.reason.clone())
            .evidence("cri_message", n.message.clone());
    }
    Some(d)
}

/// `runtime.immutable_file`.
fn immutable(f: &ImmutableFile) -> Draft {
    let attrs = match (f.immutable, f.append_only) {
        (true, true) => "ia",
        (true, false) => "i",
        _ => "a",
    };
    Draft::new(IMMUTABLE_FILE, Severity::Warning)
        .subject(f.path.clone())
        .evidence("file", f.path.clone())
        .evidence("attributes", attrs)
        .evidence("kind", if f.is_dir { "directory" } else { "file" })
        .evidence_opt("pod_uid", f.pod_uid.clone())
        .evidence_opt("pod_namespace", f.pod.as_ref().map(|p| p.0.clone()))
        .evidence_opt("pod_name", f.pod.as_ref().map(|p| p.1.clone()))
        .evidence_opt("container_id", f.container_id.clone())
        .when_if("immutable", f.immutable)
        .when_if("append_only", f.append_only)
}

/// `runtime.host_port_conflict`: a hostNetwork pod's port held by another process, or
/// declared by several pods.
fn port_conflict(c: &PortConflict) -> Option<Draft> {
    let declared: Vec<String> = c.pods.iter().map(|p| p.name.clone()).collect();
    let holder_elsewhere = c.holder.as_ref().is_some_and(|h| h.outside(&c.pods));
    let several = {
        let mut d = declared.clone();
        d.sort();
        d.dedup();
        d.len() > 1
    };
    if !holder_elsewhere && !several {
        return None;
    }
    let sources: Vec<String> = c.pods.iter().map(|p| p.source.clone()).collect();
    let mut d = Draft::new(HOST_PORT_CONFLICT, Severity::Warning)
        .subject(format!("{}/{}", c.protocol, c.port))
        .evidence("protocol", c.protocol)
        .evidence("port", u32::from(c.port))
        .evidence("pods", declared.join(", "))
        .evidence("declared_in", sources.join(", "))
        .words("pod_list", &declared)
        .when_if("several_pods", several);
    if let Some(h) = &c.holder {
        d = d
            .evidence("holder_pid", h.pid)
            .evidence("holder_comm", h.comm.clone())
            .evidence_opt("holder_pod", h.pod.clone())
            .when_if("held_by_host_process", !h.in_pod)
            .when_if("held_by_other_pod", h.in_pod && holder_elsewhere);
    }
    Some(d)
}

/// `runtime.kube_proxy_ipvs_sync`.
fn kube_proxy(k: &KubeProxySample, t: &Thresholds) -> Option<Draft> {
    let ipvs = k
        .mode
        .as_deref()
        .is_some_and(|m| m.eq_ignore_ascii_case("ipvs"));
    let cpu = k.cpu_cores?;
    let sync = k.sync_period?;
    if !ipvs || cpu < t.kube_proxy_cpu_cores || sync >= t.ipvs_sync_period {
        return None;
    }
    Some(
        Draft::new(KUBE_PROXY_IPVS_SYNC, Severity::Warning)
            .subject("kube-proxy")
            .evidence("pid", k.pid)
            .evidence("kube_proxy_cpu_percent", (cpu * 1000.0).round() / 10.0)
            .evidence("cpu_threshold_percent", t.kube_proxy_cpu_cores * 100.0)
            .evidence("sync_period_seconds", secs(sync))
            .evidence("recommended_sync_period_seconds", secs(t.ipvs_sync_period))
            .evidence_opt("min_sync_period_seconds", k.min_sync_period.map(secs))
            .evidence("settings_from", k.origin.clone())
            .when_if(
                "min_sync_nonzero",
                k.min_sync_period.is_some_and(|m| !m.is_zero()),
            ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Finding;

    fn findings(s: &Sample) -> Vec<Finding> {
        let rules = crate::rules::RuleBook::builtin();
        judge(s, &Thresholds::default())
            .into_iter()
            .map(|d| rules.render(d, "node-1"))
            .collect()
    }

    fn rt(daemon: Daemon, pid: Option<u32>, outcome: Outcome) -> RuntimeSample {
        RuntimeSample {
            daemon,
            socket: match daemon {
                Daemon::Dockerd => "/var/run/docker.sock".into(),
                Daemon::Containerd => "/run/containerd/containerd.sock".into(),
                Daemon::CriDockerd => "/var/run/cri-dockerd.sock".into(),
            },
            why: vec![Why::Kubelet],
            pid,
            outcome,
            timeout: Duration::from_secs(2),
            version: None,
            data_dir: None,
        }
    }

    fn ids(s: &Sample) -> Vec<(String, Severity)> {
        findings(s)
            .into_iter()
            .map(|f| (f.id, f.severity))
            .collect()
    }

    #[test]
    fn live_facts_for_the_log_judge() {
        let mut s = Sample::default();
        assert_eq!(s.runtime_responding(), None);
        assert_eq!(s.cni_config_present(), None);
        assert_eq!(s.cri_network_ready(), None);
        let mut full = rt(
            Daemon::Dockerd,
            Some(1),
            Outcome::Answered {
                latency: Duration::from_millis(1),
            },
        );
        full.data_dir = Some(DiskFill {
            path: "/data/docker".into(),
            used_percent: 99.0,
        });
        let mut down = rt(Daemon::Containerd, None, Outcome::NoSocket);
        down.data_dir = Some(DiskFill {
            path: "/var/lib/containerd".into(),
            used_percent: 40.0,
        });
        s.runtimes = vec![full, down];
        assert_eq!(
            s.full_runtime_dirs(&Thresholds::default()),
            vec!["/data/docker"]
        );
        assert_eq!(s.runtime_responding(), Some(false));
        s.runtimes.truncate(1);
        assert_eq!(s.runtime_responding(), Some(true));
        s.cni = Some(CniSample {
            conf_dir: "/etc/cni/net.d".into(),
            dir: CniDir::Empty,
            network_ready: Some(CriCondition {
                kind: "NetworkReady".into(),
                status: true,
                reason: String::new(),
                message: String::new(),
            }),
        });
        assert_eq!(s.cni_config_present(), Some(false));
        assert_eq!(s.cri_network_ready(), Some(true));
    }

    #[test]
    fn each_runtime_state_has_its_finding() {
        let ok = Outcome::Answered {
            latency: Duration::from_millis(2),
        };
        let cases = [
            (Some(7), ok.clone(), None),
            (
                Some(7),
                Outcome::Answered {
                    latency: Duration::from_millis(1500),
                },
                Some((SLOW, Severity::Warning)),
            ),
            (
                Some(7),
                Outcome::Timeout {
                    after: Duration::from_secs(2),
                    connected: true,
                },
                Some((HUNG, Severity::Critical)),
            ),
            (None, Outcome::Refused, Some((CRASHED, Severity::Critical))),
            (
                Some(7),
                Outcome::Refused,
                Some((UNREACHABLE, Severity::Critical)),
            ),
            (
                None,
                Outcome::NoSocket,
                Some((NOT_RUNNING, Severity::Critical)),
            ),
            (
                Some(7),
                Outcome::NoSocket,
                Some((UNREACHABLE, Severity::Critical)),
            ),
            (
                Some(7),
                Outcome::BadAnswer {
                    latency: Duration::from_millis(3),
                    detail: "HTTP 500".into(),
                },
                Some((UNREACHABLE, Severity::Critical)),
            ),
            (Some(7), Outcome::Failed("permission denied".into()), None),
        ];
        for (pid, outcome, want) in cases {
            let s = Sample {
                runtimes: vec![rt(Daemon::Dockerd, pid, outcome.clone())],
                ..Sample::default()
            };
            let got = ids(&s);
            match want {
                None => assert!(got.is_empty(), "{outcome:?}: {got:?}"),
                Some((id, sev)) => assert_eq!(got, vec![(id.to_string(), sev)], "{outcome:?}"),
            }
        }
    }

    #[test]
    fn a_hung_runtime_on_a_full_disk_names_the_disk() {
        let mut r = rt(
            Daemon::Dockerd,
            Some(4822),
            Outcome::Timeout {
                after: Duration::from_secs(2),
                connected: true,
            },
        );
        r.data_dir = Some(DiskFill {
            path: "/var/lib/docker".into(),
            used_percent: 99.6,
        });
        let d = judge(
            &Sample {
                runtimes: vec![r],
                ..Sample::default()
            },
            &Thresholds::default(),
        );
        assert!(d[0].is("disk_full") && d[0].is("dockerd") && d[0].is("by_kubelet"));
        let f = findings(&Sample {
            runtimes: vec![rt(
                Daemon::Containerd,
                Some(1),
                Outcome::Timeout {
                    after: Duration::from_secs(2),
                    connected: true,
                },
            )],
            ..Sample::default()
        });
        assert_eq!(f[0].subject, "/run/containerd/containerd.sock");
        assert!(
            f[0].summary.en.contains("containerd"),
            "{}",
            f[0].summary.en
        );
    }

    #[test]
    fn out_of_sync_lists_both_directions() {
        let s = Sample {
            sync: Some(SyncSample {
                docker_socket: "/var/run/docker.sock".into(),
                containerd_socket: "/run/containerd/containerd.sock".into(),
                namespace: "moby".into(),
                docker_only: vec![(
                    "a9a1785b81343c3ad2093ad973f4f8e52dbf54823b8bb089886c8356d4036fe0".into(),
                    Some(TaskStatus::Stopped),
                )],
                containerd_only: vec!["54922ec8b186".into()],
            }),
            ..Sample::default()
        };
        let f = findings(&s);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, OUT_OF_SYNC);
        assert_eq!(f[0].evidence["running_in_docker_only"].as_f64(), Some(1.0));
        assert!(
            f[0].summary.en.contains("a9a1785b8134"),
            "{}",
            f[0].summary.en
        );
        assert!(judge(
            &Sample {
                sync: Some(SyncSample::default()),
                ..Sample::default()
            },
            &Thresholds::default()
        )
        .is_empty());
    }

    #[test]
    fn duplicates_only_matter_where_docker_runs() {
        let dup = DuplicateInstall {
            component: "runc".into(),
            paths: vec!["/usr/bin/runc".into(), "/usr/bin/docker-runc".into()],
            running: None,
        };
        let mut s = Sample {
            duplicates: vec![dup],
            ..Sample::default()
        };
        assert!(ids(&s).is_empty(), "no docker on this node");
        s.runtimes = vec![rt(
            Daemon::Dockerd,
            Some(1),
            Outcome::Answered {
                latency: Duration::from_millis(1),
            },
        )];
        assert_eq!(
            ids(&s),
            vec![(DUPLICATE_INSTALL.to_string(), Severity::Warning)]
        );
    }

    #[test]
    fn kubelet_states() {
        let probed = |outcome: Outcome| Healthz::Probed {
            addr: "127.0.0.1:10248".into(),
            outcome,
            status: None,
        };
        let k = |pid: Option<u32>, healthz: Healthz, restarts: u32| Sample {
            kubelet: Some(KubeletSample {
                pid,
                healthz,
                restarts_in_window: restarts,
                started_seconds_ago: Some(60),
            }),
            ..Sample::default()
        };
        let ok = Outcome::Answered {
            latency: Duration::from_millis(1),
        };
        assert!(ids(&k(Some(1), probed(ok.clone()), 0)).is_empty());
        // Answering without a process we can see (a kubelet in another pid namespace): fine.
        assert!(ids(&k(None, probed(ok.clone()), 0)).is_empty());
        assert_eq!(
            ids(&k(None, probed(Outcome::Refused), 0)),
            vec![(KUBELET_NOT_RUNNING.to_string(), Severity::Critical)]
        );
        assert_eq!(
            ids(&k(None, Healthz::Disabled, 0)),
            vec![(KUBELET_NOT_RUNNING.to_string(), Severity::Critical)]
        );
        // Not from this network namespace and no process seen: nothing is claimed.
        assert!(ids(&k(None, Healthz::NotFromHere, 0)).is_empty());
        assert!(ids(&k(Some(3), Healthz::NotFromHere, 0)).is_empty());
        assert_eq!(
            ids(&k(Some(3), probed(Outcome::Refused), 0)),
            vec![(KUBELET_UNHEALTHY.to_string(), Severity::Warning)]
        );
        assert_eq!(
            ids(&k(
                Some(3),
                probed(Outcome::BadAnswer {
                    latency: Duration::from_millis(4),
                    detail: "HTTP 500: [-]syncloop failed".into()
                }),
                0
            )),
            vec![(KUBELET_UNHEALTHY.to_string(), Severity::Critical)]
        );
        assert_eq!(
            ids(&k(Some(3), probed(ok.clone()), 3)),
            vec![(KUBELET_RESTARTS.to_string(), Severity::Warning)]
        );
        assert!(ids(&k(Some(3), probed(ok), 2)).is_empty());
    }

    #[test]
    fn cni_from_the_directory_or_the_runtime() {
        let c = |dir: CniDir, ready: Option<bool>| Sample {
            cni: Some(CniSample {
                conf_dir: "/etc/cni/net.d".into(),
                dir,
                network_ready: ready.map(|status| CriCondition {
                    kind: "NetworkReady".into(),
                    status,
                    reason: "NetworkPluginNotReady".into(),
                    message: "Network plugin returns error: cni plugin not initialized".into(),
                }),
            }),
            ..Sample::default()
        };
        let valid = CniDir::Valid {
            file: "/etc/cni/net.d/10-flannel.conflist".into(),
        };
        assert!(ids(&c(valid.clone(), Some(true))).is_empty());
        assert!(ids(&c(CniDir::NotUsed, None)).is_empty());
        for dir in [
            CniDir::Missing,
            CniDir::Empty,
            CniDir::Invalid {
                files: vec!["/etc/cni/net.d/10-x.conf".into()],
            },
        ] {
            assert_eq!(ids(&c(dir, None)).len(), 1);
        }
        let f = findings(&c(valid, Some(false)));
        assert_eq!(f.len(), 1);
        assert!(
            f[0].summary.en.contains("cni plugin not initialized"),
            "{}",
            f[0].summary.en
        );
    }

    #[test]
    fn immutable_files_name_the_file_and_the_attribute() {
        let s = Sample {
            immutable: vec![ImmutableFile {
                path: "/data/docker/overlay2/b1ae/diff/usr/bin/bash".into(),
                immutable: true,
                append_only: false,
                is_dir: false,
                pod_uid: None,
                pod: None,
                container_id: Some("19d837c77a3c".into()),
            }],
            ..Sample::default()
        };
        let f = findings(&s);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "/data/docker/overlay2/b1ae/diff/usr/bin/bash");
        assert!(f[0]
            .remediation
            .commands
            .contains(&"chattr -i /data/docker/overlay2/b1ae/diff/usr/bin/bash".to_string()));
        assert!(!f[0]
            .remediation
            .commands
            .iter()
            .any(|c| c.contains("chattr -a")));
    }

    #[test]
    fn port_conflicts_need_another_holder_or_two_claimants() {
        let pod = DeclaredPod {
            name: "kube-system/node-exporter-x".into(),
            uid: Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f".into()),
            source: "docker container 1a2b".into(),
        };
        let c = |holder: Option<PortHolder>, pods: Vec<DeclaredPod>| Sample {
            port_conflicts: vec![PortConflict {
                protocol: "tcp",
                port: 9100,
                pods,
                holder,
            }],
            ..Sample::default()
        };
        let holder = |pod: Option<&str>, uid: Option<&str>, in_pod: bool| PortHolder {
            pid: 10,
            comm: "node_exporter".into(),
            pod: pod.map(String::from),
            pod_uid: uid.map(String::from),
            in_pod,
        };
        // Its own pod, by uid or by name: fine.
        let own = holder(None, Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f"), true);
        assert!(ids(&c(Some(own), vec![pod.clone()])).is_empty());
        let own = holder(Some("kube-system/node-exporter-x"), None, true);
        assert!(ids(&c(Some(own), vec![pod.clone()])).is_empty());
        // Nobody holds it: not this finding.
        assert!(ids(&c(None, vec![pod.clone()])).is_empty());
        // A pod nobody can name, against a pod without a known uid: cannot tell.
        let unknown = holder(None, None, true);
        let static_pod = DeclaredPod {
            uid: None,
            ..pod.clone()
        };
        assert!(ids(&c(Some(unknown), vec![static_pod])).is_empty());
        // Another pod (its uid differs), or a host process.
        let other = holder(None, Some("0a1b2c3d-1d2a-4c3b-9e8f-5f0c6b4e0000"), true);
        let d = judge(&c(Some(other), vec![pod.clone()]), &Thresholds::default());
        assert!(d[0].is("held_by_other_pod"), "{d:?}");
        let host = holder(None, None, false);
        let d = judge(&c(Some(host), vec![pod.clone()]), &Thresholds::default());
        assert_eq!(d.len(), 1);
        assert!(d[0].is("held_by_host_process") && !d[0].is("held_by_other_pod"));
        let two = vec![
            pod.clone(),
            DeclaredPod {
                name: "monitoring/exporter-y".into(),
                uid: None,
                source: "/etc/kubernetes/manifests/e.yaml".into(),
            },
        ];
        let d = judge(&c(None, two), &Thresholds::default());
        assert!(d[0].is("several_pods"));
    }

    #[test]
    fn kube_proxy_needs_ipvs_high_cpu_and_a_short_period() {
        let k = |mode: &str, cpu: f64, sync: u64| Sample {
            kube_proxy: Some(KubeProxySample {
                pid: 5,
                mode: Some(mode.into()),
                sync_period: Some(Duration::from_secs(sync)),
                min_sync_period: Some(Duration::from_secs(1)),
                origin: "flags".into(),
                cpu_cores: Some(cpu),
            }),
            ..Sample::default()
        };
        assert_eq!(
            ids(&k("ipvs", 0.9, 5)),
            vec![(KUBE_PROXY_IPVS_SYNC.to_string(), Severity::Warning)]
        );
        assert!(ids(&k("iptables", 0.9, 5)).is_empty());
        assert!(ids(&k("ipvs", 0.1, 5)).is_empty());
        assert!(ids(&k("ipvs", 0.9, 30)).is_empty());
    }
}
