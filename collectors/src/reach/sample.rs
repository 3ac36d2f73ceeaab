//! What one run of the `reach` collector found: kube-proxy's health endpoint and the API
//! server of the kubelet's kubeconfig, as probed (or why not), in units, no words.

use std::net::SocketAddr;
use std::time::Duration;

use super::probe::{ApiAnswer, HealthzAnswer};

/// One run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReachSample {
    pub kube_proxy: KubeProxyReach,
    pub api_server: ApiReach,
}

/// kube-proxy's `/healthz`.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeProxyReach {
    /// No kube-proxy process (a kube-proxy replacement such as Cilium's, or not a node).
    NotRunning,
    /// Running with its health endpoint turned off.
    Disabled { pid: u32 },
    /// Running, but where its endpoint listens could not be read.
    Unknown { pid: u32, reason: String },
    /// Probed.
    Probed {
        pid: u32,
        addr: SocketAddr,
        answer: HealthzAnswer,
    },
}

/// The API server of the kubelet's kubeconfig.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiReach {
    /// No kubeconfig at this host path (not a node, or a kubelet that has not joined).
    NoKubeconfig { path: String },
    /// The kubeconfig (or its CA file) could not be read or understood.
    Unreadable { path: String, reason: String },
    /// Probed now or at an earlier run (the probe runs at most once per interval).
    Probed(ApiProbed),
}

/// The last probe of the API server and its history.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiProbed {
    /// The kubeconfig read.
    pub kubeconfig: String,
    /// `server` as written, and the host, port and TLS name probed.
    pub server: String,
    pub host: String,
    pub port: u16,
    pub server_name: String,
    pub insecure: bool,
    pub answer: ApiAnswer,
    /// How long ago the answer was taken (zero: this run).
    pub age: Duration,
    /// Consecutive probes (this one included) that did not complete a handshake, and that
    /// completed it slowly.
    pub failures_in_row: u32,
    pub slow_in_row: u32,
}
