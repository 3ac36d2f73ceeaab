//! The limits of the reach rules, apart from the judge that uses them.

/// Thresholds of the reach rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `reach.kube_proxy_unhealthy` is critical when kube-proxy's rules were last synced this
    /// many seconds ago or more (kube-proxy answers 503 from twice its sync period, 60 s by
    /// default; ten minutes of stale Service rules is long past a restart or a slow sync).
    pub kube_proxy_stale_critical_seconds: u64,
    /// `reach.api_server_unreachable` is raised after this many probes in a row (one a
    /// minute) failed to connect: one lost SYN is not an outage.
    pub api_failures: u32,
    /// `reach.api_server_slow`: a TCP connect at or above this many milliseconds (a connect
    /// within the cluster's network takes a few; 1 s is a retransmitted SYN).
    pub api_connect_slow_ms: u64,
    /// ... or a TLS handshake at or above this many milliseconds (an API server under load
    /// answers in tens).
    pub api_handshake_slow_ms: u64,
    /// ... in this many probes in a row.
    pub api_slow_probes: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            kube_proxy_stale_critical_seconds: 600,
            api_failures: 2,
            api_connect_slow_ms: 1000,
            api_handshake_slow_ms: 2000,
            api_slow_probes: 2,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting(
                "kube_proxy_stale_critical_seconds",
                l::seconds(self.kube_proxy_stale_critical_seconds),
            ),
            l::setting("api_failures", format!("{} probes", self.api_failures)),
            l::setting(
                "api_connect_slow_ms",
                format!("{} ms", self.api_connect_slow_ms),
            ),
            l::setting(
                "api_handshake_slow_ms",
                format!("{} ms", self.api_handshake_slow_ms),
            ),
            l::setting(
                "api_slow_probes",
                format!("{} probes", self.api_slow_probes),
            ),
        ]
    }
}
