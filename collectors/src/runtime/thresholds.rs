//! The limits of the runtime rules: the collector's tunables, apart from the judge that uses
//! them.

use std::time::Duration;

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
    /// The window of both restart rules (node-problem-detector counts 5 starts in 20
    /// minutes; node-doctor sees restarts from the processes, which a crash loop under
    /// systemd's back-off reaches sooner than 5).
    pub kubelet_restart_window: Duration,
    /// This many restarts of a runtime (dockerd, containerd, cri-dockerd) within the window
    /// make `runtime.daemon_restarts`.
    pub daemon_restarts: u32,
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
            daemon_restarts: 3,
            kube_proxy_cpu_cores: 0.5,
            ipvs_sync_period: Duration::from_secs(30),
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("slow_answer", l::duration(self.slow_answer)),
            l::setting("disk_full_percent", l::percent(self.disk_full_percent)),
            l::setting("kubelet_restarts", self.kubelet_restarts.to_string()),
            l::setting(
                "kubelet_restart_window",
                l::duration(self.kubelet_restart_window),
            ),
            l::setting("daemon_restarts", self.daemon_restarts.to_string()),
            l::setting("kube_proxy_cpu_cores", l::num(self.kube_proxy_cpu_cores)),
            l::setting("ipvs_sync_period", l::duration(self.ipvs_sync_period)),
        ]
    }
}
