//! The seam between the `runtime` collector and the network: the collector decides *what* to
//! ask (a [`ProbePlan`]: which sockets, which endpoint, how long to wait) and judges the
//! typed answers ([`ProbeReport`]); *how* to ask (HTTP over a unix socket, gRPC over HTTP/2,
//! TCP to the kubelet) is the agent's, which alone knows hyper and tokio. Scenario tests
//! inject a fake probe.
//!
//! Every call is read-only and cheap: Docker `GET /_ping`, `GET /version` and
//! `GET /containers/json` (running containers); containerd's `Version` and `Tasks.List` in
//! docker's namespace; the CRI `Version` and `Status`; the kubelet's `GET /healthz`. Each
//! target has one deadline ([`ProbePlan::timeout`]) for all of its calls, and the targets
//! are asked concurrently, so one probe returns within about one timeout whatever the
//! daemons do.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Asks the runtimes and the kubelet. Implemented by the agent (`agent/src/probe.rs`) and by
/// the scenario tests' fake.
pub trait RuntimeProbe: Send + Sync + std::fmt::Debug {
    /// One answer per target of `plan`, in the same order. Returns within about
    /// `plan.timeout` (plus the time to set up), never blocks longer on a daemon.
    fn probe(&self, plan: &ProbePlan) -> ProbeReport;
}

/// What to ask in one collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    pub targets: Vec<Target>,
    /// The deadline of each target (all its calls together).
    pub timeout: Duration,
}

/// One daemon to ask. Socket paths are agent-side (under the host root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// dockerd's API socket: `GET /_ping`, then `GET /version` and, when `list_running`,
    /// `GET /containers/json` (the running containers, in dockerd's memory).
    Docker { socket: PathBuf, list_running: bool },
    /// containerd's socket: `containerd.services.version.v1.Version/Version`, then, when
    /// `tasks_namespace` is set, `containerd.services.tasks.v1.Tasks/List` in it.
    Containerd {
        socket: PathBuf,
        tasks_namespace: Option<String>,
    },
    /// A CRI endpoint (the kubelet's): `runtime.v1.RuntimeService/Version`, then `Status`.
    Cri { socket: PathBuf },
    /// The kubelet's `GET /healthz` over TCP, from the agent's network namespace.
    KubeletHealthz { addr: SocketAddr },
}

/// The answers, in the order of [`ProbePlan::targets`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProbeReport {
    pub replies: Vec<Reply>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Docker(DockerReply),
    Containerd(ContainerdReply),
    Cri(CriReply),
    Healthz(HealthzReply),
}

/// How the first (cheapest) call to a daemon went.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It answered as the API answers, after `latency` (connect included).
    Answered { latency: Duration },
    /// Nothing at the socket path (`ENOENT`).
    NoSocket,
    /// Something that is not a socket is at the path (`ENOTSOCK`, or a file).
    NotSocket,
    /// The connection was refused: no process listens on the socket (`ECONNREFUSED`), the
    /// mark of a daemon that died without removing its socket.
    Refused,
    /// Connected (or connecting), no answer before the deadline: a hung daemon.
    Timeout { after: Duration, connected: bool },
    /// It answered, but not with the API's answer (an HTTP error status, a gRPC error, a
    /// broken protocol). `detail` is for people (bounded when copied out).
    BadAnswer { latency: Duration, detail: String },
    /// The probe could not try (permission denied, another OS error).
    Failed(String),
}

impl Outcome {
    pub fn answered(&self) -> bool {
        matches!(self, Outcome::Answered { .. })
    }

    /// The latency of an answer (also of a bad answer).
    pub fn latency(&self) -> Option<Duration> {
        match self {
            Outcome::Answered { latency } | Outcome::BadAnswer { latency, .. } => Some(*latency),
            _ => None,
        }
    }

    /// A short name for metrics and evidence.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Answered { .. } => "answered",
            Outcome::NoSocket => "no_socket",
            Outcome::NotSocket => "not_a_socket",
            Outcome::Refused => "refused",
            Outcome::Timeout { .. } => "timeout",
            Outcome::BadAnswer { .. } => "bad_answer",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// dockerd's answers.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerReply {
    /// `GET /_ping`.
    pub ping: Outcome,
    /// `GET /version`: the engine's `Version` (`20.10.24`), when it answered in time.
    pub version: Option<String>,
    /// `GET /containers/json`: ids of the containers dockerd believes are running.
    pub running: Option<Vec<String>>,
}

/// containerd's answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerdReply {
    /// `Version/Version`.
    pub version_call: Outcome,
    pub version: Option<String>,
    /// `Tasks/List` in the asked namespace.
    pub tasks: Option<Vec<Task>>,
}

/// One containerd task (a container's init process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub container_id: String,
    pub status: TaskStatus,
}

/// `containerd.v1.types.Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Unknown,
    Created,
    Running,
    Stopped,
    Paused,
    Pausing,
}

impl TaskStatus {
    /// From the protobuf enum value (unknown values are `Unknown`).
    pub fn from_i32(v: i32) -> TaskStatus {
        match v {
            1 => TaskStatus::Created,
            2 => TaskStatus::Running,
            3 => TaskStatus::Stopped,
            4 => TaskStatus::Paused,
            5 => TaskStatus::Pausing,
            _ => TaskStatus::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Unknown => "unknown",
            TaskStatus::Created => "created",
            TaskStatus::Running => "running",
            TaskStatus::Stopped => "stopped",
            TaskStatus::Paused => "paused",
            TaskStatus::Pausing => "pausing",
        }
    }
}

/// A CRI runtime's answers.
#[derive(Debug, Clone, PartialEq)]
pub struct CriReply {
    /// `RuntimeService/Version`.
    pub version_call: Outcome,
    /// `runtime_name` and `runtime_version` (`containerd`, `v1.7.13`).
    pub runtime: Option<(String, String)>,
    /// `RuntimeService/Status`: the runtime's conditions (`RuntimeReady`, `NetworkReady`).
    pub conditions: Option<Vec<CriCondition>>,
}

/// One `RuntimeCondition` of a CRI `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriCondition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// The kubelet's `/healthz`.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthzReply {
    /// `Answered` only for `200` with body `ok`; another status is a `BadAnswer`.
    pub outcome: Outcome,
    /// The HTTP status, when one came back.
    pub status: Option<u16>,
}

impl ProbeReport {
    /// The reply to target `i` of the plan, if the probe gave one of the right kind.
    pub fn docker(&self, i: usize) -> Option<&DockerReply> {
        match self.replies.get(i) {
            Some(Reply::Docker(r)) => Some(r),
            _ => None,
        }
    }

    pub fn containerd(&self, i: usize) -> Option<&ContainerdReply> {
        match self.replies.get(i) {
            Some(Reply::Containerd(r)) => Some(r),
            _ => None,
        }
    }

    pub fn cri(&self, i: usize) -> Option<&CriReply> {
        match self.replies.get(i) {
            Some(Reply::Cri(r)) => Some(r),
            _ => None,
        }
    }

    pub fn healthz(&self, i: usize) -> Option<&HealthzReply> {
        match self.replies.get(i) {
            Some(Reply::Healthz(r)) => Some(r),
            _ => None,
        }
    }
}
