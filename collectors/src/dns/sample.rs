//! What one run of the `dns` collector read: per server, the latest probe and the window of
//! recent ones summarised, and the host's conntrack race counters over that window. Figures
//! only, no words; tests build it directly.

use std::net::SocketAddr;
use std::time::Duration;

use super::probe::{Attempt, ServerReply};

/// Where the name's cluster domain came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainSource {
    /// The kubelet's `--cluster-domain` or `clusterDomain`.
    Kubelet,
    /// The kubelet sets none: `cluster.local`, kubeadm's and most installers' default.
    Default,
}

/// Why a server is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The kubelet's `clusterDNS`: the nameserver in every pod's `resolv.conf`.
    ClusterDns,
    /// A node-local DNS cache listening on this node (NodeLocal DNSCache's 169.254.20.10),
    /// not the kubelet's `clusterDNS`.
    NodeLocal,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ClusterDns => "cluster_dns",
            Role::NodeLocal => "node_local",
        }
    }
}

/// One probe of one server, reduced to what the rules judge.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// Some UDP query was answered (on either try).
    pub udp_answered: bool,
    /// The TCP fallback's result (`answered`, `no_answer`, `refused`, `failed`), when asked.
    pub tcp: Option<&'static str>,
    /// Every try was refused (ICMP port unreachable, or a TCP reset).
    pub refused: bool,
    /// The first response code that was not NOERROR (the `A` query's first).
    pub error_rcode: Option<u8>,
    /// A query was answered only on its second try.
    pub retried: bool,
    /// Exactly one of the pair was lost on the first try while the other was answered: the
    /// conntrack race's mark (both packets share one 5-tuple).
    pub pair_lost: bool,
    /// The slowest query answered on its first try (`None`: none was).
    pub latency: Option<Duration>,
    /// The probe could not be sent (for people).
    pub failed: Option<String>,
}

impl Round {
    /// Some answer came, over UDP or TCP.
    pub fn answered(&self) -> bool {
        self.udp_answered || self.tcp == Some("answered")
    }

    /// Reduces a server's reply.
    pub fn of(reply: &ServerReply) -> Round {
        let queries = reply.queries();
        let udp_answered = queries.iter().any(|(_, q)| q.answer().is_some());
        let tcp_answer = match &reply.tcp {
            Some(Attempt::Answered(a)) => Some(a),
            _ => None,
        };
        let mut tries = queries
            .iter()
            .flat_map(|(_, q)| std::iter::once(&q.first).chain(q.retry.as_ref()))
            .chain(reply.tcp.as_ref());
        let refused = reply.failed.is_none() && tries.all(|t| matches!(t, Attempt::Refused));
        let error_rcode = queries
            .iter()
            .filter_map(|(_, q)| q.answer())
            .chain(tcp_answer)
            .map(|a| a.rcode)
            .find(|r| *r != 0);
        let first_answered = |q: &super::probe::Query| matches!(q.first, Attempt::Answered(_));
        let pair_lost = first_answered(&reply.a) != first_answered(&reply.aaaa);
        let latency = queries
            .iter()
            .filter_map(|(_, q)| match &q.first {
                Attempt::Answered(a) => Some(a.latency),
                _ => None,
            })
            .max();
        Round {
            udp_answered,
            tcp: reply.tcp.as_ref().map(Attempt::as_str),
            refused,
            error_rcode,
            retried: queries.iter().any(|(_, q)| q.answered_on_retry()),
            pair_lost,
            latency,
            failed: reply.failed.clone(),
        }
    }
}

/// A window of recent probes of one server, summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub rounds: usize,
    /// Rounds where a query was answered only on its second try.
    pub retried: usize,
    /// Rounds where exactly one of the pair was lost on the first try.
    pub pair_lost: usize,
    /// Rounds with no answer over UDP (a probe that could not be sent is not counted).
    pub unanswered: usize,
    /// Rounds with a query answered on its first try.
    pub answered_first: usize,
    /// The median of those rounds' [`Round::latency`].
    pub median_latency: Option<Duration>,
}

impl Window {
    pub fn of<'a>(rounds: impl IntoIterator<Item = &'a Round>) -> Window {
        let mut w = Window {
            rounds: 0,
            retried: 0,
            pair_lost: 0,
            unanswered: 0,
            answered_first: 0,
            median_latency: None,
        };
        let mut latencies = Vec::new();
        for r in rounds {
            w.rounds += 1;
            w.retried += usize::from(r.retried);
            w.pair_lost += usize::from(r.pair_lost);
            w.unanswered += usize::from(!r.udp_answered && r.failed.is_none());
            latencies.extend(r.latency);
        }
        latencies.sort_unstable();
        w.answered_first = latencies.len();
        // The lower median: half the answers at least as fast.
        w.median_latency = latencies
            .get(latencies.len().saturating_sub(1) / 2)
            .copied();
        w
    }
}

/// One probed server.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub addr: SocketAddr,
    pub role: Role,
    pub latest: Round,
    pub window: Window,
}

/// The host's conntrack race counters (`/proc/1/net/stat/nf_conntrack`, all CPUs) over the
/// window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaceCounters {
    pub insert_failed: u64,
    pub drop: u64,
}

/// One run.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsSample {
    /// The name asked (`kubernetes.default.svc.cluster.local`, without the final dot).
    pub name: String,
    pub domain_source: DomainSource,
    pub try_timeout: Duration,
    pub servers: Vec<Server>,
    /// The rise of the host's race counters over the window (`None`: unreadable, or no
    /// earlier reading).
    pub races: Option<RaceCounters>,
}
