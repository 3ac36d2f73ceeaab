//! The `reach` collector: the node's links to the cluster's control paths, probed from the
//! host's network namespace (the agent runs with `hostNetwork`):
//!
//! - kube-proxy's `/healthz` (found through the node's process table; its address from
//!   `--healthz-bind-address`, the old `--healthz-port`, or `healthzBindAddress` of its
//!   `--config` file read through its own root; default `0.0.0.0:10256`, probed on loopback):
//!   does it answer, and are its Service rules synced (200), or queued past its health timeout
//!   (503, with the age of its last sync by its own clock)?
//! - the API server of the kubelet's kubeconfig (`--kubeconfig` of the running kubelet, else
//!   `/etc/kubernetes/kubelet.conf`): TCP connect and TLS handshake times, the server's
//!   certificate verified against the kubeconfig's CA and name. At most once per
//!   [`ReachConfig::api_interval`] (a minute), at a per-node second of the minute (a hash of
//!   the node's name), so thousands of nodes do not shake hands with the API server at once;
//!   the runs in between judge the last answer again.
//!
//! The network I/O is the agent's ([`probe::ReachProbe`]); `--no-probes` turns it off (the
//! collector then reads nothing and says so). No kube-proxy process (a kube-proxy
//! replacement such as Cilium's) and no kubeconfig (not a node) are noted, not judged.

pub mod judge;
pub mod probe;
pub mod sample;
pub mod thresholds;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::config::flag_value;
use crate::config::kube_proxy::{self, Healthz};
use crate::config::kubeconfig::{self, Ca, DEFAULT_KUBELET_KUBECONFIG};
use crate::hostfs::{self, cap};
use crate::metric::Metric;
use crate::node::follow::{Followed, Rescan};
use crate::node::Node;
use crate::rules::Draft;

pub use probe::{ReachPlan, ReachProbe, ReachReport, ReachTarget};
pub use sample::{ApiProbed, ApiReach, KubeProxyReach, ReachSample};
pub use thresholds::Thresholds;

/// Configuration of the reach collector.
#[derive(Debug, Clone, PartialEq)]
pub struct ReachConfig {
    /// Probe at all (`--no-probes` sets it false: the collector touches no network).
    pub probes: bool,
    /// The deadline of each probe (connect, handshake and answer).
    pub probe_timeout: Duration,
    /// The API server is probed at most once per this interval (zero: every run; tests).
    pub api_interval: Duration,
    /// The kubelet kubeconfig read when no running kubelet names one (`--kubeconfig`).
    pub kubeconfig: String,
    pub thresholds: Thresholds,
}

impl Default for ReachConfig {
    fn default() -> Self {
        ReachConfig {
            probes: true,
            probe_timeout: Duration::from_secs(5),
            api_interval: Duration::from_secs(60),
            kubeconfig: DEFAULT_KUBELET_KUBECONFIG.to_string(),
            thresholds: Thresholds::default(),
        }
    }
}

/// The last API server probe, reused until the next is due.
#[derive(Debug, Clone)]
struct LastApi {
    probed: ApiProbed,
    at: Instant,
    /// The wall-clock second (Unix) from which the next probe is due.
    next_due: u64,
}

/// Probes kube-proxy every run and the API server once per interval.
pub struct ReachCollector {
    node: Node,
    config: ReachConfig,
    probe: Arc<dyn ReachProbe>,
    daemons: Followed,
    last_api: Option<LastApi>,
}

impl std::fmt::Debug for ReachCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReachCollector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What the sample phase decided about the API server before probing.
enum ApiPlan {
    Settled(ApiReach),
    /// Probe now: the kubeconfig path, its cluster and CA.
    Probe {
        kubeconfig: String,
        cluster: kubeconfig::Cluster,
        ca_pem: Option<Vec<u8>>,
    },
    /// Not due: judge the last answer again.
    Reuse,
}

impl ReachCollector {
    pub fn new(node: Node, config: ReachConfig, probe: Arc<dyn ReachProbe>) -> Self {
        ReachCollector {
            node,
            config,
            probe,
            daemons: Followed::new(
                &["kube-proxy", "kubelet"],
                1,
                Rescan::WhileMissing(4),
                "reach",
            ),
            last_api: None,
        }
    }

    /// Where kube-proxy's `/healthz` is, or why it is not probed.
    fn kube_proxy_target(&self) -> Result<(u32, std::net::SocketAddr), Box<KubeProxyReach>> {
        let Some(p) = self.daemons.first("kube-proxy") else {
            return Err(Box::new(KubeProxyReach::NotRunning));
        };
        let pid = p.pid;
        let from_file = match kube_proxy::config_path(&p.args) {
            None => None,
            Some(config) => match kube_proxy::read_config(self.node.host(), pid, &config) {
                Ok((_, Some(text))) => match kube_proxy::healthz_from_config(&text) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        return Err(Box::new(KubeProxyReach::Unknown {
                            pid,
                            reason: format!("its --config {config}: {e}"),
                        }))
                    }
                },
                Ok((path, None)) => {
                    return Err(Box::new(KubeProxyReach::Unknown {
                        pid,
                        reason: format!("its --config {} does not exist", path.display()),
                    }))
                }
                Err(reason) => return Err(Box::new(KubeProxyReach::Unknown { pid, reason })),
            },
        };
        match kube_proxy::healthz(&p.args, from_file) {
            Ok(Healthz::At(addr)) => Ok((pid, addr)),
            Ok(Healthz::Off) => Err(Box::new(KubeProxyReach::Disabled { pid })),
            Err(reason) => Err(Box::new(KubeProxyReach::Unknown { pid, reason })),
        }
    }

    /// Whether the API server is due for a probe now.
    fn api_due(&self) -> bool {
        let Some(last) = &self.last_api else {
            return true;
        };
        let interval = self.config.api_interval;
        if interval.is_zero() {
            return true;
        }
        let since = last.at.elapsed();
        if since < interval {
            return false;
        }
        // The wall clock decides the node's slot; a clock that jumped never holds a probe back
        // beyond two intervals.
        now_unix() >= last.next_due || since >= interval * 2
    }

    /// The kubeconfig to read, and what to do about the API server this run.
    fn api_plan(&self) -> ApiPlan {
        let kubeconfig = self
            .daemons
            .first("kubelet")
            .and_then(|p| flag_value(&p.args, "--kubeconfig"))
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| self.config.kubeconfig.clone());
        if !self.api_due() {
            return ApiPlan::Reuse;
        }
        let host = self.node.host();
        let cluster = match kubeconfig::read(host, &kubeconfig) {
            Ok(Some(c)) => c,
            Ok(None) => return ApiPlan::Settled(ApiReach::NoKubeconfig { path: kubeconfig }),
            Err(e) => {
                return ApiPlan::Settled(ApiReach::Unreadable {
                    path: kubeconfig,
                    reason: e.to_string(),
                })
            }
        };
        let ca_pem = match &cluster.ca {
            Ca::Data(pem) => Some(pem.clone()),
            Ca::System => None,
            Ca::File(file) => {
                let path = host.resolve(kubeconfig::ca_file_path(&kubeconfig, file));
                match hostfs::read_bytes(&path, cap::CONFIG) {
                    Ok(pem) => Some(pem),
                    Err(e) => {
                        return ApiPlan::Settled(ApiReach::Unreadable {
                            path: kubeconfig,
                            reason: format!("its certificate-authority: {e}"),
                        })
                    }
                }
            }
        };
        ApiPlan::Probe {
            kubeconfig,
            cluster,
            ca_pem,
        }
    }

    /// The second of the minute (of the interval) at which this node probes the API server.
    fn slot_offset(&self, ctx: &CollectContext) -> u64 {
        let secs = self.config.api_interval.as_secs().max(1);
        fnv1a(ctx.node_name.as_bytes()) % secs
    }

    /// Records a fresh API answer (counts of failed and slow probes in a row).
    fn record_api(
        &mut self,
        ctx: &CollectContext,
        kubeconfig: String,
        cluster: kubeconfig::Cluster,
        answer: probe::ApiAnswer,
    ) -> ApiProbed {
        let prev = self.last_api.as_ref().map(|l| &l.probed);
        let failed = answer.handshake.is_none();
        let mut probed = ApiProbed {
            kubeconfig,
            server: cluster.server,
            host: cluster.host,
            port: cluster.port,
            server_name: cluster.server_name,
            insecure: cluster.insecure,
            answer,
            age: Duration::ZERO,
            failures_in_row: 0,
            slow_in_row: 0,
        };
        let same_server = prev.is_some_and(|p| p.server == probed.server);
        let before = |f: fn(&ApiProbed) -> u32| prev.filter(|_| same_server).map_or(0, f);
        probed.failures_in_row = if failed {
            before(|p| p.failures_in_row).saturating_add(1)
        } else {
            0
        };
        probed.slow_in_row = if judge::is_slow(&probed, &self.config.thresholds) {
            before(|p| p.slow_in_row).saturating_add(1)
        } else {
            0
        };
        let interval = self.config.api_interval.as_secs();
        let next_due = next_slot(now_unix(), interval, self.slot_offset(ctx));
        self.last_api = Some(LastApi {
            probed: probed.clone(),
            at: Instant::now(),
            next_due,
        });
        probed
    }

    /// Where kube-proxy's `/healthz` is, or why it is not probed (its loopback address is the
    /// agent's own network namespace's when the agent is outside the host's: a pod without
    /// hostNetwork cannot reach it).
    fn kube_proxy_plan(
        &self,
        ctx: &CollectContext,
    ) -> Result<(u32, std::net::SocketAddr), Box<KubeProxyReach>> {
        let (pid, addr) = self.kube_proxy_target()?;
        if addr.ip().is_loopback() && ctx.host_netns == HostNetns::Different {
            return Err(Box::new(KubeProxyReach::Unknown {
                pid,
                reason: format!(
                    "its /healthz listens on {addr}, and node-doctor is not in the host's network namespace (run it with hostNetwork)"
                ),
            }));
        }
        Ok((pid, addr))
    }

    /// Asks the probe for what is to be probed this run (nothing: no call).
    fn ask(
        &self,
        kp: &Result<(u32, std::net::SocketAddr), Box<KubeProxyReach>>,
        api: &ApiPlan,
    ) -> ReachReport {
        let mut plan = ReachPlan {
            targets: Vec::new(),
            timeout: self.config.probe_timeout,
        };
        if let Ok((_, addr)) = kp {
            plan.targets
                .push(ReachTarget::KubeProxyHealthz { addr: *addr });
        }
        if let ApiPlan::Probe {
            cluster, ca_pem, ..
        } = api
        {
            plan.targets.push(ReachTarget::ApiServer {
                host: cluster.host.clone(),
                port: cluster.port,
                server_name: cluster.server_name.clone(),
                ca_pem: ca_pem.clone(),
                insecure: cluster.insecure,
            });
        }
        if plan.targets.is_empty() {
            return ReachReport::default();
        }
        self.probe.probe(&plan)
    }

    /// The API server's reach this run: settled without a probe, the last answer again, or
    /// the answer at `index` of `report` (recorded for the next runs).
    fn api_reach(
        &mut self,
        ctx: &CollectContext,
        api: ApiPlan,
        report: &ReachReport,
        index: usize,
    ) -> ApiReach {
        match api {
            ApiPlan::Settled(a) => {
                self.last_api = None;
                a
            }
            ApiPlan::Reuse => match &self.last_api {
                Some(l) => {
                    let mut p = l.probed.clone();
                    p.age = l.at.elapsed();
                    ApiReach::Probed(p)
                }
                None => ApiReach::NoKubeconfig {
                    path: self.config.kubeconfig.clone(),
                },
            },
            ApiPlan::Probe {
                kubeconfig,
                cluster,
                ..
            } => match report.api(index) {
                Some(answer) => {
                    ApiReach::Probed(self.record_api(ctx, kubeconfig, cluster, answer.clone()))
                }
                None => ApiReach::Unreadable {
                    path: kubeconfig,
                    reason: "the probe gave no answer for the API server".into(),
                },
            },
        }
    }
}

/// What the run could not look at (`could_not`: degraded) and what this node does not have
/// (`absent`: noted).
fn notes(
    kube_proxy: &KubeProxyReach,
    api_server: &ApiReach,
    could_not: &mut Vec<String>,
    absent: &mut Vec<String>,
) {
    match kube_proxy {
        KubeProxyReach::NotRunning => absent.push(
            "no kube-proxy runs (a kube-proxy replacement, or not a node): nothing to probe"
                .to_string(),
        ),
        KubeProxyReach::Disabled { pid } => absent.push(format!(
            "kube-proxy (pid {pid}) runs with its health endpoint off"
        )),
        KubeProxyReach::Unknown { pid, reason } => could_not.push(format!(
            "kube-proxy (pid {pid}): {reason}; its /healthz is not probed"
        )),
        KubeProxyReach::Probed { answer, addr, .. } => {
            if let probe::Outcome::Failed(why) | probe::Outcome::NoRoute { detail: why } =
                &answer.outcome
            {
                could_not.push(format!(
                    "kube-proxy's /healthz at {addr} could not be probed: {why}"
                ));
            }
        }
    }
    match api_server {
        ApiReach::NoKubeconfig { path } => absent.push(format!(
            "no kubelet kubeconfig at {path}: the API server is not probed"
        )),
        ApiReach::Unreadable { path, reason } => could_not.push(format!(
            "the kubelet kubeconfig {path}: {reason}; the API server is not probed"
        )),
        ApiReach::Probed(p) => {
            if let probe::Outcome::Failed(why) | probe::Outcome::BadAnswer { detail: why } =
                &p.answer.outcome
            {
                could_not.push(format!(
                    "the API server {} could not be probed: {why}",
                    p.server
                ));
            }
        }
    }
}

/// The first second at or after `now + interval` that is `offset` seconds into an interval
/// (a node's own second of the minute); 0 when `interval` is 0 (every run).
fn next_slot(now: u64, interval: u64, offset: u64) -> u64 {
    if interval == 0 {
        return 0;
    }
    let earliest = now.saturating_add(interval);
    let slot = earliest - earliest % interval + offset % interval;
    if slot >= earliest {
        slot
    } else {
        slot.saturating_add(interval)
    }
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// FNV-1a: a stable hash of the node's name (the same slot across restarts).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Phases for ReachCollector {
    const NAME: &'static str = "reach";
    type Sample = ReachSample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(ReachSample, Status), Status> {
        if !self.config.probes {
            return Err(Status::Noted("probes are off (--no-probes)".into()));
        }
        let mut could_not = Vec::new();
        let mut absent = Vec::new();
        if self.daemons.refresh(&self.node, &[]).unreadable {
            could_not.push("the process table could not be read: kube-proxy and the kubelet's --kubeconfig are not known".to_string());
        }
        let kp = self.kube_proxy_plan(ctx);
        let api = self.api_plan();
        let report = self.ask(&kp, &api);
        let kube_proxy = match kp {
            Ok((pid, addr)) => match report.healthz(0) {
                Some(answer) => KubeProxyReach::Probed {
                    pid,
                    addr,
                    answer: answer.clone(),
                },
                None => KubeProxyReach::Unknown {
                    pid,
                    reason: "the probe gave no answer for kube-proxy".into(),
                },
            },
            Err(k) => *k,
        };
        let api_index = usize::from(matches!(kube_proxy, KubeProxyReach::Probed { .. }));
        let api_server = self.api_reach(ctx, api, &report, api_index);
        notes(&kube_proxy, &api_server, &mut could_not, &mut absent);
        let sample = ReachSample {
            kube_proxy,
            api_server,
        };
        if matches!(sample.kube_proxy, KubeProxyReach::NotRunning)
            && matches!(sample.api_server, ApiReach::NoKubeconfig { .. })
            && could_not.is_empty()
        {
            return Err(Status::Noted(absent.join("; ")));
        }
        Ok((sample, Status::from_notes(could_not, absent)))
    }

    fn judge(&mut self, sample: &ReachSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &ReachSample) -> Vec<Metric> {
        let mut out = Vec::new();
        let mut target = |t: &str, outcome: &probe::Outcome, reached: bool| {
            out.push(
                Metric::gauge(
                    "node_doctor_reach_up",
                    "1 when the last probe of the control path reached it (kube-proxy's /healthz answered 200 or 503; the API server completed a TLS handshake), else 0.",
                    if reached { 1.0 } else { 0.0 },
                )
                .label("target", t),
            );
            out.push(
                Metric::gauge(
                    "node_doctor_reach_probe_outcome",
                    "1 for the outcome of the last probe of the control path (connected, refused, no_route, not_resolved, timeout, tls_error, bad_answer, failed).",
                    1.0,
                )
                .label("target", t)
                .label("outcome", outcome.as_str()),
            );
            if let Some(c) = outcome.connect() {
                out.push(
                    Metric::gauge(
                        "node_doctor_reach_connect_seconds",
                        "The TCP connect time of the last probe of the control path.",
                        c.as_secs_f64(),
                    )
                    .label("target", t),
                );
            }
        };
        if let KubeProxyReach::Probed { answer, .. } = &sample.kube_proxy {
            let reached = matches!(answer.status, Some(200 | 503));
            target("kube_proxy", &answer.outcome, reached);
        }
        if let ApiReach::Probed(p) = &sample.api_server {
            target(
                "api_server",
                &p.answer.outcome,
                p.answer.handshake.is_some(),
            );
        }
        if let KubeProxyReach::Probed { answer, .. } = &sample.kube_proxy {
            if let Some(s) = answer.status {
                out.push(Metric::gauge(
                    "node_doctor_reach_kube_proxy_healthz_status",
                    "The HTTP status of kube-proxy's /healthz at the last probe (200 synced, 503 rule changes late).",
                    f64::from(s),
                ));
            }
            if let Some(age) = answer.body.as_ref().and_then(|b| b.sync_age_seconds()) {
                out.push(Metric::gauge(
                    "node_doctor_reach_kube_proxy_sync_age_seconds",
                    "Seconds since kube-proxy last synced its rules, by its own clock (currentTime - lastUpdated of /healthz; 0 while healthy).",
                    age,
                ));
            }
        }
        if let ApiReach::Probed(p) = &sample.api_server {
            if let Some(h) = p.answer.handshake {
                out.push(Metric::gauge(
                    "node_doctor_reach_api_server_tls_handshake_seconds",
                    "The TLS handshake time of the last probe of the kubelet's API server (after the TCP connect).",
                    h.as_secs_f64(),
                ));
            }
            out.push(Metric::gauge(
                "node_doctor_reach_api_server_probe_age_seconds",
                "How old the API server answer judged in this run is (the server is probed at most once a minute).",
                p.age.as_secs_f64(),
            ));
        }
        out
    }

    fn min_timeout(&self) -> Option<Duration> {
        // The probes run concurrently, each within the probe timeout.
        Some(self.config.probe_timeout + Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_probe_is_at_the_nodes_second_after_a_full_interval() {
        // 12:00:10 with this node's second 37: not before 12:01:10, so 12:01:37.
        let now = 1_714_557_600 + 10;
        assert_eq!(next_slot(now, 60, 37), 1_714_557_600 + 60 + 37);
        // 12:00:50, second 37: 12:01:50 has passed 12:01:37, so 12:02:37.
        let now = 1_714_557_600 + 50;
        assert_eq!(next_slot(now, 60, 37), 1_714_557_600 + 120 + 37);
        // Always at least an interval away, at most two; always the node's second.
        for now in 1_714_557_600..1_714_557_600 + 180 {
            let at = next_slot(now, 60, 37);
            assert!(at >= now + 60 && at < now + 120, "{now} -> {at}");
            assert_eq!(at % 60, 37);
        }
        assert_eq!(next_slot(100, 0, 5), 0);
    }

    #[test]
    fn nodes_spread_over_the_minute() {
        let mut seconds: Vec<u64> = (0..5000)
            .map(|i| fnv1a(format!("node-{i}").as_bytes()) % 60)
            .collect();
        seconds.sort_unstable();
        seconds.dedup();
        // 5,000 names land on every second of the minute.
        assert_eq!(seconds.len(), 60);
        // Stable across restarts: the same name, the same second.
        assert_eq!(fnv1a(b"worker-1"), fnv1a(b"worker-1"));
    }
}
