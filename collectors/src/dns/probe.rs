//! The seam between the `dns` collector and the network: the collector decides *what* to ask
//! (a [`DnsPlan`]: which servers, which name, how long to wait) and judges the typed answers
//! ([`DnsReport`]); *how* to ask (the DNS wire format over UDP and TCP) is the agent's
//! (`agent/src/dns_probe.rs`), as the runtime collector's probe is. Scenario tests inject a
//! fake.
//!
//! One probe of a server asks what a pod's resolver asks for a name with no search list to
//! walk: an `A` and an `AAAA` query sent back to back from one UDP socket (one source port,
//! so both packets share a conntrack 5-tuple: glibc's and musl's parallel lookup, the
//! pattern behind the 5-second delay in handbook 002). A query not answered within
//! [`DnsPlan::try_timeout`] is sent once more (a new id, the same socket), as the resolver
//! does after its `timeout:`; when neither try of a query was answered, or an answer came
//! back truncated, it is asked once over TCP. Servers are asked concurrently, so one probe
//! returns within about `2 × try_timeout + tcp_timeout` whatever the servers do.

use std::net::SocketAddr;
use std::time::Duration;

/// Asks the DNS servers. Implemented by the agent and by the scenario tests' fake.
pub trait DnsProbe: Send + Sync + std::fmt::Debug {
    /// One [`ServerReply`] per server of `plan`, in the same order.
    fn probe(&self, plan: &DnsPlan) -> DnsReport;

    /// True when it sends real packets (the agent's): the collector then asks nothing on a
    /// staged host root, whose addresses are not this machine's. Fakes answer `false`.
    fn real_network(&self) -> bool {
        true
    }
}

/// What to ask in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsPlan {
    pub servers: Vec<SocketAddr>,
    /// The fully qualified name asked (`kubernetes.default.svc.cluster.local.`): it exists in
    /// every cluster, so any answer but an address is the server's fault.
    pub name: String,
    /// How long one UDP try waits for its answer.
    pub try_timeout: Duration,
    /// How long the TCP fallback waits (connect, query and answer).
    pub tcp_timeout: Duration,
}

impl DnsPlan {
    /// The longest a probe of one server can take.
    pub fn worst_case(&self) -> Duration {
        self.try_timeout * 2 + self.tcp_timeout
    }
}

/// The answers, in the order of [`DnsPlan::servers`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DnsReport {
    pub servers: Vec<ServerReply>,
}

/// How one server answered one probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReply {
    pub server: SocketAddr,
    /// The `A` query over UDP.
    pub a: Query,
    /// The `AAAA` query over UDP, sent right after the `A` from the same socket.
    pub aaaa: Query,
    /// The `A` query over TCP, asked when neither UDP query was answered or an answer was
    /// truncated; `None` when not asked.
    pub tcp: Option<Attempt>,
    /// The probe could not be tried at all (no socket: permission, no route); `None` when it
    /// was sent.
    pub failed: Option<String>,
}

impl ServerReply {
    /// Both UDP queries, `A` first.
    pub fn queries(&self) -> [(&'static str, &Query); 2] {
        [("A", &self.a), ("AAAA", &self.aaaa)]
    }
}

/// One query's tries over UDP.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub first: Attempt,
    /// The second try, sent only when the first had no answer within the try timeout.
    pub retry: Option<Attempt>,
}

impl Query {
    /// The answer that came, from either try.
    pub fn answer(&self) -> Option<&Answer> {
        match (&self.first, &self.retry) {
            (Attempt::Answered(a), _) => Some(a),
            (_, Some(Attempt::Answered(a))) => Some(a),
            _ => None,
        }
    }

    /// Answered, but only on the second try: a resolver with glibc's defaults
    /// (`timeout:5`) waited its whole timeout for it.
    pub fn answered_on_retry(&self) -> bool {
        !matches!(self.first, Attempt::Answered(_))
            && matches!(self.retry, Some(Attempt::Answered(_)))
    }
}

/// One try of one query.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    Answered(Answer),
    /// Nothing came back within the timeout.
    NoAnswer {
        after: Duration,
    },
    /// The server's host said no one listens (ICMP port unreachable on UDP, RST on TCP).
    Refused,
    /// Another error (for people; bounded when copied out).
    Failed(String),
}

impl Attempt {
    pub fn as_str(&self) -> &'static str {
        match self {
            Attempt::Answered(_) => "answered",
            Attempt::NoAnswer { .. } => "no_answer",
            Attempt::Refused => "refused",
            Attempt::Failed(_) => "failed",
        }
    }
}

/// A DNS answer to our question.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// From the send of this try to the answer.
    pub latency: Duration,
    /// The response code (RFC 1035 §4.1.1: 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED).
    pub rcode: u8,
    /// Answer records of the asked type.
    pub records: u16,
    /// The TC bit: the answer did not fit a UDP datagram.
    pub truncated: bool,
}

impl Answer {
    /// NOERROR (with or without records: a cluster without IPv6 has no `AAAA`).
    pub fn ok(&self) -> bool {
        self.rcode == 0
    }
}

/// The name of a response code for evidence and metrics.
pub fn rcode_name(rcode: u8) -> &'static str {
    match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "OTHER",
    }
}
