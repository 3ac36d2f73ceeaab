//! The `dns` collector: asks the DNS servers this node's pods use, from the host's network
//! namespace, the way a pod's resolver asks (handbook 002, its cluster DNS section): the
//! kubelet's `clusterDNS` (`--cluster-dns`, `clusterDNS`) and a node-local cache that listens
//! on this node (NodeLocal DNSCache's 169.254.20.10, `--nodelocal-dns`). Nothing else is ever
//! asked: the addresses come from the node's own configuration.
//!
//! Each run sends one probe per server (an `A` and an `AAAA` query for
//! `kubernetes.default.svc.<clusterDomain>` from one UDP socket; a second try of what is not
//! answered; TCP when UDP got nothing: [`probe`]), keeps the last
//! [`Thresholds::window_probes`] probes per server and the host's conntrack race counters
//! (`/proc/1/net/stat/nf_conntrack`) over the same window, and judges the latest probe (no
//! answer, an error code) and the window (answers only on the second try, slow answers).
//! The network is the agent's ([`probe::DnsProbe`]); `--no-probes` turns this collector's
//! probes off.

pub mod judge;
pub mod probe;
pub mod sample;
pub mod thresholds;

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::config::kubelet;
use crate::metric::Metric;
use crate::node::kubelet::KubeletFinder;
use crate::node::Node;
use crate::proc::{net_udp, nf_conntrack_stat};
use crate::rules::Draft;

pub use probe::{DnsPlan, DnsProbe, DnsReport};
pub use sample::{DnsSample, DomainSource, RaceCounters, Role, Round, Server, Window};
pub use thresholds::Thresholds;

/// NodeLocal DNSCache's default listen address.
pub const DEFAULT_NODELOCAL_DNS: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::new(169, 254, 20, 10)), 53);
/// The cluster domain when the kubelet names none (kubeadm's and most installers').
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// A pod's `resolv.conf` holds at most three nameservers (glibc's `MAXNS`).
const MAX_SERVERS: usize = 3;
/// Upper bounds of the answer-time histogram, seconds.
const BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Configuration of the dns collector.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsConfig {
    pub thresholds: Thresholds,
    /// `false` with `--no-probes`: nothing is sent.
    pub probes: bool,
    /// How long one UDP try waits (`--dns-probe-timeout`); TCP waits as long.
    pub try_timeout: Duration,
    /// The kubelet configuration file read when the kubelet's command line has no `--config`.
    pub kubelet_config: PathBuf,
    /// Where a node-local DNS cache would listen (`--nodelocal-dns`); probed only when a
    /// socket of the host listens there.
    pub nodelocal_dns_address: SocketAddr,
    /// When the kubelet is not found, look for it again every this many runs.
    pub kubelet_rescan_samples: u32,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            thresholds: Thresholds::default(),
            probes: true,
            try_timeout: Duration::from_secs(2),
            kubelet_config: PathBuf::from(kubelet::DEFAULT_CONFIG),
            nodelocal_dns_address: DEFAULT_NODELOCAL_DNS,
            kubelet_rescan_samples: 20,
        }
    }
}

/// The answer-time histogram of one server, since start.
#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Per bucket of [`BUCKETS`], then +Inf; not cumulative.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|le| v <= *le)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += v;
    }
}

/// What is kept per server between runs (only for the servers of the last run).
#[derive(Debug, Default)]
struct Memory {
    rounds: VecDeque<Round>,
    answer_seconds: Histogram,
    /// Probes by result of the latest round (`answered`, `retried`, `no_answer`, `error`,
    /// `failed`), since start.
    results: BTreeMap<&'static str, u64>,
}

/// Whom a run asks, and for what.
struct Targets {
    servers: Vec<(SocketAddr, Role)>,
    /// Without the final dot.
    name: String,
    domain_source: DomainSource,
}

pub struct DnsCollector {
    node: Node,
    config: DnsConfig,
    probe: Arc<dyn DnsProbe>,
    kubelet: KubeletFinder,
    servers: BTreeMap<SocketAddr, Memory>,
    /// The host's (insert_failed, drop) at each run of the window, oldest first.
    races: VecDeque<(u64, u64)>,
}

impl DnsCollector {
    pub fn new(node: Node, config: DnsConfig, probe: Arc<dyn DnsProbe>) -> Self {
        let kubelet = KubeletFinder::new(
            config.kubelet_config.clone(),
            config.kubelet_rescan_samples,
            "dns/kubelet",
        );
        DnsCollector {
            node,
            config,
            probe,
            kubelet,
            servers: BTreeMap::new(),
            races: VecDeque::new(),
        }
    }

    /// The servers to ask and the name, from the kubelet's settings and the node-local
    /// cache's socket; `Err` when there is nothing to ask.
    fn plan(&mut self, degraded: &mut Vec<String>) -> Result<Targets, Status> {
        let view = self.kubelet.lookup(&self.node);
        degraded.extend(view.config_error.clone());
        let mut servers: Vec<(SocketAddr, Role)> = Vec::new();
        for s in kubelet::cluster_dns(&view.args, view.config.as_ref()) {
            match s.parse::<IpAddr>() {
                Ok(ip) if servers.len() < MAX_SERVERS => {
                    let addr = SocketAddr::new(ip, 53);
                    if !servers.iter().any(|(a, _)| *a == addr) {
                        servers.push((addr, Role::ClusterDns));
                    }
                }
                Ok(_) => {}
                Err(_) => degraded.push(format!(
                    "the kubelet's cluster DNS {:?} is not an IP address: not probed",
                    crate::bounded::ellipsis(&s, 64)
                )),
            }
        }
        let local = self.config.nodelocal_dns_address;
        if !servers.iter().any(|(a, _)| *a == local) && self.listens_on_host(local, degraded) {
            servers.push((local, Role::NodeLocal));
        }
        if servers.is_empty() {
            return Err(Status::Noted(
                if view.pid.is_none() && view.config.is_none() {
                    "no cluster DNS to probe: the kubelet does not run and its configuration file is \
                 absent, and no node-local DNS cache listens on this node"
                    .into()
                } else {
                    "no cluster DNS to probe: the kubelet sets no clusterDNS and no node-local DNS \
                 cache listens on this node"
                        .into()
                },
            ));
        }
        let (domain, source) = match kubelet::cluster_domain(&view.args, view.config.as_ref()) {
            Some(d) if crate::names::is_dns_subdomain(&d) => (d, DomainSource::Kubelet),
            Some(d) => {
                degraded.push(format!(
                    "the kubelet's cluster domain {:?} is not a DNS name: {DEFAULT_CLUSTER_DOMAIN} asked instead",
                    crate::bounded::ellipsis(&d, 64)
                ));
                (DEFAULT_CLUSTER_DOMAIN.to_string(), DomainSource::Default)
            }
            None => (DEFAULT_CLUSTER_DOMAIN.to_string(), DomainSource::Default),
        };
        Ok(Targets {
            servers,
            name: format!("kubernetes.default.svc.{domain}"),
            domain_source: source,
        })
    }

    /// A UDP socket of the host's network namespace listens on `addr` (or its wildcard).
    fn listens_on_host(&self, addr: SocketAddr, degraded: &mut Vec<String>) -> bool {
        let host = self.node.host();
        let path = if addr.is_ipv4() {
            net_udp::path_v4(host, 1)
        } else {
            net_udp::path_v6(host, 1)
        };
        match net_udp::read(&path) {
            Ok(sockets) => net_udp::listens_on(&sockets, addr),
            Err(e) if e.is_not_found() => false,
            Err(e) => {
                degraded.push(format!("{e}: a node-local DNS cache is not looked for"));
                false
            }
        }
    }

    /// The host's race counters now, kept for the window; their rise over the window.
    fn races(&mut self) -> Option<RaceCounters> {
        let path = nf_conntrack_stat::path(self.node.host(), 1);
        let Ok(stat) = nf_conntrack_stat::read(&path) else {
            self.races.clear();
            return None;
        };
        let now = (
            stat.get("insert_failed").unwrap_or(0),
            stat.get("drop").unwrap_or(0),
        );
        self.races.push_back(now);
        while self.races.len() > self.config.thresholds.window_probes.max(1) {
            self.races.pop_front();
        }
        let first = *self.races.front()?;
        (self.races.len() > 1).then(|| RaceCounters {
            insert_failed: now.0.saturating_sub(first.0),
            drop: now.1.saturating_sub(first.1),
        })
    }

    /// Keeps the round and the answer times of one server's reply.
    fn remember(&mut self, reply: &probe::ServerReply, round: &Round) -> Window {
        let window = self.config.thresholds.window_probes.max(1);
        let m = self.servers.entry(reply.server).or_default();
        for (_, q) in reply.queries() {
            if let Some(a) = q.answer() {
                let waited = if q.answered_on_retry() {
                    self.config.try_timeout + a.latency
                } else {
                    a.latency
                };
                m.answer_seconds.observe(waited);
            }
        }
        let result = if round.failed.is_some() {
            "failed"
        } else if !round.udp_answered {
            "no_answer"
        } else if round.error_rcode.is_some() {
            "error"
        } else if round.retried {
            "retried"
        } else {
            "answered"
        };
        *m.results.entry(result).or_default() += 1;
        m.rounds.push_back(round.clone());
        while m.rounds.len() > window {
            m.rounds.pop_front();
        }
        Window::of(&m.rounds)
    }
}

impl Phases for DnsCollector {
    const NAME: &'static str = "dns";
    type Sample = DnsSample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(DnsSample, Status), Status> {
        if !self.config.probes {
            return Err(Status::Noted(
                "active probes are off (--no-probes): the cluster DNS is not asked".into(),
            ));
        }
        if ctx.host_netns == HostNetns::NotProcfs && self.probe.real_network() {
            return Err(Status::Noted(
                "the host root's /proc is staged files: the DNS servers its files name are not \
                 this machine's to ask"
                    .into(),
            ));
        }
        let mut degraded = Vec::new();
        let Targets {
            servers,
            name,
            domain_source,
        } = self.plan(&mut degraded)?;
        let plan = DnsPlan {
            servers: servers.iter().map(|(a, _)| *a).collect(),
            name: format!("{name}."),
            try_timeout: self.config.try_timeout,
            tcp_timeout: self.config.try_timeout,
        };
        let report = self.probe.probe(&plan);
        let races = self.races();
        let mut probed = Vec::new();
        for (addr, role) in &servers {
            let Some(reply) = report.servers.iter().find(|r| r.server == *addr) else {
                degraded.push(format!("the probe gave no answer for {addr}"));
                continue;
            };
            let latest = Round::of(reply);
            if let Some(why) = &latest.failed {
                degraded.push(format!(
                    "{addr} could not be asked: {}",
                    crate::bounded::ellipsis(why, 200)
                ));
            }
            let window = self.remember(reply, &latest);
            probed.push(Server {
                addr: *addr,
                role: *role,
                latest,
                window,
            });
        }
        self.servers
            .retain(|a, _| servers.iter().any(|(s, _)| s == a));
        let status = Status::from_notes(degraded, Vec::new());
        Ok((
            DnsSample {
                name,
                domain_source,
                try_timeout: self.config.try_timeout,
                servers: probed,
                races,
            },
            status,
        ))
    }

    fn judge(&mut self, sample: &DnsSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &DnsSample) -> Vec<Metric> {
        let mut out = Vec::new();
        for s in &sample.servers {
            let Some(m) = self.servers.get(&s.addr) else {
                continue;
            };
            let server = s.addr.ip().to_string();
            let role = s.role.as_str();
            let buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .copied()
                .chain(std::iter::once(f64::INFINITY))
                .zip(m.answer_seconds.counts.iter().copied())
                .collect();
            out.push(
                Metric::histogram(
                    "node_doctor_dns_answer_seconds",
                    "Time from a probe's query to its answer, as a pod's resolver would wait with the probe's try timeout (a query answered on its second try counts the first try's timeout too).",
                    buckets,
                    m.answer_seconds.sum,
                )
                .label("server", server.clone())
                .label("role", role),
            );
            for (result, n) in &m.results {
                out.push(
                    Metric::counter(
                        "node_doctor_dns_probes_total",
                        "DNS probes of a server by result: answered, retried (an answer only on the second try), error (an answer with an error code), no_answer (nothing over UDP), failed (not sent).",
                        *n as f64,
                    )
                    .label("server", server.clone())
                    .label("role", role)
                    .label("result", *result),
                );
            }
            out.push(
                Metric::gauge(
                    "node_doctor_dns_up",
                    "1 when the server answered the latest probe over UDP with NOERROR, else 0.",
                    if s.latest.udp_answered && s.latest.error_rcode.is_none() {
                        1.0
                    } else {
                        0.0
                    },
                )
                .label("server", server)
                .label("role", role),
            );
        }
        out
    }

    fn min_timeout(&self) -> Option<Duration> {
        // Two UDP tries and the TCP fallback, servers asked together, and slack.
        Some(self.config.try_timeout * 3 + Duration::from_secs(2))
    }
}
