//! The dns collector on fake hosts, with a scripted DNS probe: the kubelet's configuration
//! names the cluster DNS (the handbook's kube-dns ClusterIP 172.16.14.217 where it matters),
//! `/proc/1/net/udp` says whether a node-local cache listens (this VM's 6.18 text), the host's
//! conntrack counters rise or not, and the probe answers as the case needs. Each rule's
//! severity, evidence, cause and remediation are asserted. The agent's real probe against real
//! DNS servers is tested in the agent (loopback servers, and a server behind a veth in network
//! namespaces of the test's own).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use collectors::dns::probe::{Answer, Attempt, Query, ServerReply};
use collectors::dns::{DnsCollector, DnsConfig, DnsPlan, DnsProbe, DnsReport};
use collectors::{Finding, Severity, Status};

use crate::support::{self, ctx, only, words, FakeHost};

const UDP_NODELOCAL: &str = include_str!("../fixtures/conntrack/net_udp.linux-6.18");

/// How the scripted server answers one probe.
#[derive(Debug, Clone, Copy)]
enum Script {
    Healthy,
    /// The AAAA's first packet lost, answered on the retry.
    PairLost,
    /// Nothing over UDP; TCP answers.
    UdpLost,
    /// Every try refused.
    Refused,
    /// An answer with this code.
    Rcode(u8),
    /// Both answered after this many ms.
    Slow(u64),
}

fn answer(ms: u64, rcode: u8) -> Attempt {
    Attempt::Answered(Answer {
        latency: Duration::from_millis(ms),
        rcode,
        records: u16::from(rcode == 0),
        truncated: false,
    })
}

fn lost() -> Attempt {
    Attempt::NoAnswer {
        after: Duration::from_secs(2),
    }
}

fn reply(server: SocketAddr, s: Script) -> ServerReply {
    let q = |first, retry| Query { first, retry };
    let (a, aaaa, tcp) = match s {
        Script::Healthy => (q(answer(2, 0), None), q(answer(3, 0), None), None),
        Script::PairLost => (q(answer(2, 0), None), q(lost(), Some(answer(3, 0))), None),
        Script::UdpLost => (
            q(lost(), Some(lost())),
            q(lost(), Some(lost())),
            Some(answer(4, 0)),
        ),
        Script::Refused => (
            q(Attempt::Refused, Some(Attempt::Refused)),
            q(Attempt::Refused, Some(Attempt::Refused)),
            Some(Attempt::Refused),
        ),
        Script::Rcode(r) => (q(answer(2, r), None), q(answer(2, r), None), None),
        Script::Slow(ms) => (q(answer(ms, 0), None), q(answer(ms, 0), None), None),
    };
    ServerReply {
        server,
        a,
        aaaa,
        tcp,
        failed: None,
    }
}

/// A probe that answers every server with the next script (the last one repeats), and keeps
/// the plans it was given.
#[derive(Debug, Default)]
struct Scripted {
    scripts: Mutex<VecDeque<Script>>,
    plans: Mutex<Vec<DnsPlan>>,
    real: bool,
}

impl Scripted {
    fn new(scripts: &[Script]) -> Arc<Scripted> {
        Arc::new(Scripted {
            scripts: Mutex::new(scripts.iter().copied().collect()),
            ..Scripted::default()
        })
    }

    fn plans(&self) -> Vec<DnsPlan> {
        self.plans.lock().unwrap().clone()
    }
}

impl DnsProbe for Scripted {
    fn probe(&self, plan: &DnsPlan) -> DnsReport {
        self.plans.lock().unwrap().push(plan.clone());
        let mut q = self.scripts.lock().unwrap();
        let s = if q.len() > 1 {
            q.pop_front()
        } else {
            q.front().copied()
        };
        let s = s.unwrap_or(Script::Healthy);
        DnsReport {
            servers: plan.servers.iter().map(|a| reply(*a, s)).collect(),
        }
    }

    fn real_network(&self) -> bool {
        self.real
    }
}

/// A node whose kubelet config names `dns` (and `domain` when some).
fn node(dns: &str, domain: Option<&str>) -> FakeHost {
    let h = FakeHost::new();
    let mut cfg = format!("kind: KubeletConfiguration\nclusterDNS:\n- {dns}\n");
    if let Some(d) = domain {
        cfg.push_str(&format!("clusterDomain: {d}\n"));
    }
    h.write("/var/lib/kubelet/config.yaml", cfg)
        .mkdir("/proc/1")
        .write(
            "/proc/1/net/stat/nf_conntrack",
            crate::conntrack::stat_6_18(300, 0, 10, 10),
        );
    h
}

fn collector(h: &FakeHost, probe: &Arc<Scripted>) -> DnsCollector {
    DnsCollector::new(
        h.node(),
        DnsConfig::default(),
        Arc::clone(probe) as Arc<dyn DnsProbe>,
    )
}

fn num(f: &Finding, k: &str) -> f64 {
    f.evidence
        .get(k)
        .and_then(|e| e.as_f64())
        .unwrap_or_else(|| panic!("{k}: {:?}", f.evidence))
}

fn text<'a>(f: &'a Finding, k: &str) -> &'a str {
    f.evidence
        .get(k)
        .and_then(|e| e.as_str())
        .unwrap_or_else(|| panic!("{k}: {:?}", f.evidence))
}

#[test]
fn a_healthy_cluster_dns_is_quiet_and_only_the_kubelets_server_is_asked() {
    let h = node("10.96.0.10", Some("cluster.local"));
    let p = Scripted::new(&[Script::Healthy]);
    let mut c = collector(&h, &p);
    for _ in 0..3 {
        let out = support::collect(&mut c, &ctx());
        assert_eq!(out.status, Status::Ok);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
    }
    let plans = p.plans();
    assert_eq!(plans.len(), 3);
    assert_eq!(plans[0].servers, vec!["10.96.0.10:53".parse().unwrap()]);
    assert_eq!(plans[0].name, "kubernetes.default.svc.cluster.local.");
    let out = support::collect(&mut c, &ctx());
    let up = support::find_metric(&out, "node_doctor_dns_up", &[("server", "10.96.0.10")]);
    assert_eq!(up.map(|m| m.value), Some(1.0));
    let h = support::find_metric(
        &out,
        "node_doctor_dns_answer_seconds",
        &[("role", "cluster_dns")],
    )
    .expect("histogram");
    // Two answers (A and AAAA) per probe, four probes, all in the 2.5 ms and 5 ms buckets.
    assert_eq!(h.count(), 8);
    assert_eq!(h.buckets.last().map(|b| b.0), Some(f64::INFINITY));
    let answered = support::find_metric(
        &out,
        "node_doctor_dns_probes_total",
        &[("result", "answered")],
    );
    assert_eq!(answered.map(|m| m.value), Some(4.0));
}

#[test]
fn udp_lost_while_tcp_answers_is_no_answer_with_the_firewall_advice() {
    let h = node("172.16.14.217", Some("cluster.local"));
    let p = Scripted::new(&[Script::UdpLost]);
    let mut c = collector(&h, &p);
    let out = support::collect(&mut c, &ctx());
    let f = only(&out, "dns.no_answer");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject, "172.16.14.217:53");
    assert_eq!(text(f, "server"), "172.16.14.217");
    assert_eq!(text(f, "tcp"), "answered");
    assert_eq!(text(f, "role"), "cluster_dns");
    assert_eq!(num(f, "try_timeout_ms"), 2000.0);
    assert_eq!(num(f, "unanswered_probes"), 1.0);
    let w = words(f);
    assert!(w.contains("over TCP was answered"), "{w}");
    assert!(w.contains("UDP port 53"), "{w}");
    assert!(
        w.contains(
            "dig +tcp +time=2 +tries=1 @172.16.14.217 kubernetes.default.svc.cluster.local A"
        ),
        "{w}"
    );
    let src = f.remediation.source.as_ref().expect("a source");
    assert_eq!(
        (src.doc, src.section),
        ("002_af370464fa0f13dd.txt", "集群 DNS 解析异常排障处理")
    );
    let up = support::find_metric(&out, "node_doctor_dns_up", &[]);
    assert_eq!(up.map(|m| m.value), Some(0.0));
}

#[test]
fn a_refused_service_address_points_at_its_endpoints() {
    let h = node("10.96.0.10", Some("cluster.local"));
    let p = Scripted::new(&[Script::Refused]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    let f = only(&out, "dns.no_answer");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(text(f, "tcp"), "refused");
    let w = words(f);
    assert!(w.contains("nothing listens there"), "{w}");
    assert!(w.contains("no endpoint took it"), "{w}");
    assert!(
        w.contains("kubectl -n kube-system describe svc kube-dns"),
        "{w}"
    );
}

#[test]
fn servfail_and_nxdomain_name_their_causes() {
    let h = node("10.96.0.10", Some("cluster.local"));
    let out = support::collect(
        &mut collector(&h, &Scripted::new(&[Script::Rcode(2)])),
        &ctx(),
    );
    let f = only(&out, "dns.error");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(text(f, "rcode"), "SERVFAIL");
    let w = words(f);
    assert!(w.contains("cannot reach the API server"), "{w}");
    assert!(
        w.contains("kubectl -n kube-system logs -l k8s-app=kube-dns --tail=50"),
        "{w}"
    );

    // The kubelet names a domain CoreDNS does not serve: every Service name fails.
    let h = node("10.96.0.10", Some("corp.example"));
    let p = Scripted::new(&[Script::Rcode(3)]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    assert_eq!(p.plans()[0].name, "kubernetes.default.svc.corp.example.");
    let f = only(&out, "dns.error");
    assert_eq!(
        (f.severity, text(f, "rcode")),
        (Severity::Critical, "NXDOMAIN")
    );
    assert!(words(f).contains("Corefile"), "{}", words(f));

    // No domain from the kubelet: cluster.local is a guess, so NXDOMAIN is only a warning.
    let h = node("10.96.0.10", None);
    let out = support::collect(
        &mut collector(&h, &Scripted::new(&[Script::Rcode(3)])),
        &ctx(),
    );
    let f = only(&out, "dns.error");
    assert_eq!(f.severity, Severity::Warning);
    assert!(words(f).contains("this answer is expected"), "{}", words(f));
}

#[test]
fn one_of_the_pair_lost_twice_is_the_five_second_delay_tied_to_conntrack() {
    let h = node("172.16.14.217", Some("cluster.local"));
    let p = Scripted::new(&[Script::Healthy, Script::PairLost, Script::PairLost]);
    let mut c = collector(&h, &p);
    assert!(support::collect(&mut c, &ctx()).findings.is_empty());
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        crate::conntrack::stat_6_18(300, 0, 12, 12),
    );
    let out = support::collect(&mut c, &ctx());
    assert!(
        out.findings.is_empty(),
        "one retry is noise: {:?}",
        out.findings
    );
    h.write(
        "/proc/1/net/stat/nf_conntrack",
        crate::conntrack::stat_6_18(300, 0, 14, 14),
    );
    let out = support::collect(&mut c, &ctx());
    let f = only(&out, "dns.five_second_delay");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "retried_probes"), 2.0);
    assert_eq!(num(f, "pair_lost_probes"), 2.0);
    assert_eq!(num(f, "window_probes"), 3.0);
    assert_eq!(num(f, "insert_failed"), 4.0);
    assert_eq!(num(f, "conntrack_drop"), 4.0);
    let w = words(f);
    assert!(w.contains("exactly one of the A/AAAA pair"), "{w}");
    assert!(w.contains("insert_failed +4"), "{w}");
    assert!(w.contains("single-request-reopen"), "{w}");
    assert!(w.contains("NodeLocal DNSCache"), "{w}");
    assert!(f.see_also.iter().any(|k| k == "conntrack-dns-delay"));
    let retried = support::find_metric(
        &out,
        "node_doctor_dns_probes_total",
        &[("result", "retried")],
    );
    assert_eq!(retried.map(|m| m.value), Some(2.0));
}

#[test]
fn a_slow_median_over_the_window_is_slow() {
    let h = node("10.96.0.10", Some("cluster.local"));
    let p = Scripted::new(&[Script::Slow(800)]);
    let mut c = collector(&h, &p);
    for _ in 0..4 {
        assert!(support::collect(&mut c, &ctx()).findings.is_empty());
    }
    let out = support::collect(&mut c, &ctx());
    let f = only(&out, "dns.slow");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "median_ms"), 800.0);
    assert_eq!(num(f, "answered_probes"), 5.0);
    assert!(words(f).contains("CPU"), "{}", words(f));
}

#[test]
fn a_node_local_cache_that_listens_is_asked_too() {
    let h = node("10.96.0.10", Some("cluster.local"));
    h.write("/proc/1/net/udp", UDP_NODELOCAL);
    let p = Scripted::new(&[Script::UdpLost]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    assert_eq!(
        p.plans()[0].servers,
        vec![
            "10.96.0.10:53".parse::<SocketAddr>().unwrap(),
            "169.254.20.10:53".parse().unwrap()
        ]
    );
    assert_eq!(out.findings.len(), 2, "{:?}", out.findings);
    let local = out
        .findings
        .iter()
        .find(|f| f.subject == "169.254.20.10:53")
        .expect("node-local finding");
    assert_eq!(text(local, "role"), "node_local");
    assert!(
        words(local).contains("node-local DNS cache on this node"),
        "{}",
        words(local)
    );
    // When the kubelet already points pods at it, it is asked once, as their cluster DNS.
    let h = node("169.254.20.10", Some("cluster.local"));
    h.write("/proc/1/net/udp", UDP_NODELOCAL);
    let p = Scripted::new(&[Script::Healthy]);
    support::collect(&mut collector(&h, &p), &ctx());
    assert_eq!(
        p.plans()[0].servers,
        vec!["169.254.20.10:53".parse().unwrap()]
    );
}

#[test]
fn nothing_is_asked_without_a_cluster_dns_with_no_probes_or_on_a_staged_root() {
    // No kubelet, no config, no cache: nothing to ask.
    let h = FakeHost::new();
    h.mkdir("/proc/1");
    let p = Scripted::new(&[Script::Healthy]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    assert!(
        matches!(out.status, Status::Noted(ref m) if m.contains("no cluster DNS to probe")),
        "{:?}",
        out.status
    );
    assert!(p.plans().is_empty());

    // --no-probes.
    let h = node("10.96.0.10", Some("cluster.local"));
    let cfg = DnsConfig {
        probes: false,
        ..DnsConfig::default()
    };
    let mut c = DnsCollector::new(h.node(), cfg, Arc::clone(&p) as Arc<dyn DnsProbe>);
    let out = support::collect(&mut c, &ctx());
    assert!(
        matches!(out.status, Status::Noted(ref m) if m.contains("--no-probes")),
        "{:?}",
        out.status
    );
    assert!(p.plans().is_empty());

    // The agent's real probe never asks what a staged root's files name.
    let real = Arc::new(Scripted {
        real: true,
        ..Scripted::default()
    });
    let out = support::collect(&mut collector(&h, &real), &ctx());
    assert!(
        matches!(out.status, Status::Noted(ref m) if m.contains("staged")),
        "{:?}",
        out.status
    );
    assert!(real.plans().is_empty());
}

#[test]
fn a_cluster_dns_that_is_not_an_address_is_not_asked() {
    let h = node("$(reboot)", Some("cluster.local"));
    let p = Scripted::new(&[Script::Healthy]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    assert!(p.plans().is_empty());
    assert!(matches!(out.status, Status::Noted(_)), "{:?}", out.status);
    let h = node("10.96.0.10", Some("x;rm -rf /"));
    let p = Scripted::new(&[Script::Healthy]);
    let out = support::collect(&mut collector(&h, &p), &ctx());
    assert_eq!(p.plans()[0].name, "kubernetes.default.svc.cluster.local.");
    assert!(
        out.status
            .message()
            .is_some_and(|m| m.contains("not a DNS name")),
        "{:?}",
        out.status
    );
}
