//! The `reach` collector on staged nodes: a kube-proxy (and a kubelet) in a fake `/proc`, the
//! kubelet's kubeconfig under the host root, and a fake probe standing in for kube-proxy's
//! `/healthz` and the API server's TLS port (the real probes are the agent's:
//! `agent/src/reach_probe/tests.rs` runs them against servers on 127.0.0.1). Every rule of
//! docs/collectors/reach.md, a healthy control node, the once-a-minute schedule, `--no-probes`
//! and a node with nothing to probe.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use collectors::reach::probe::{
    ApiAnswer, HealthzAnswer, HealthzBody, Outcome, ReachPlan, ReachProbe, ReachReply, ReachReport,
    ReachTarget, Stamp, TlsFailure,
};
use collectors::reach::{ReachCollector, ReachConfig};
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{collect, ctx, find_metric, FakeHost};

/// The answers the test sets, and the plans asked (anything not set is refused).
#[derive(Debug, Default)]
pub struct FakeReach {
    healthz: Mutex<Option<HealthzAnswer>>,
    api: Mutex<Option<ApiAnswer>>,
    plans: Mutex<Vec<ReachPlan>>,
}

impl FakeReach {
    pub fn healthz(&self, a: HealthzAnswer) {
        *self.healthz.lock().unwrap() = Some(a);
    }
    pub fn api(&self, a: ApiAnswer) {
        *self.api.lock().unwrap() = Some(a);
    }
    pub fn plans(&self) -> Vec<ReachPlan> {
        self.plans.lock().unwrap().clone()
    }
    fn api_probes(&self) -> usize {
        self.plans()
            .iter()
            .flat_map(|p| &p.targets)
            .filter(|t| matches!(t, ReachTarget::ApiServer { .. }))
            .count()
    }
}

impl ReachProbe for FakeReach {
    fn probe(&self, plan: &ReachPlan) -> ReachReport {
        self.plans.lock().unwrap().push(plan.clone());
        let refused = Outcome::Refused;
        ReachReport {
            replies: plan
                .targets
                .iter()
                .map(|t| match t {
                    ReachTarget::KubeProxyHealthz { .. } => {
                        ReachReply::Healthz(self.healthz.lock().unwrap().clone().unwrap_or(
                            HealthzAnswer {
                                outcome: refused.clone(),
                                status: None,
                                body: None,
                            },
                        ))
                    }
                    ReachTarget::ApiServer { .. } => {
                        ReachReply::Api(self.api.lock().unwrap().clone().unwrap_or(ApiAnswer {
                            outcome: refused.clone(),
                            handshake: None,
                        }))
                    }
                })
                .collect(),
        }
    }
}

const NOW: f64 = 1_714_557_600.0;

fn healthz(status: u16, age_seconds: f64) -> HealthzAnswer {
    HealthzAnswer {
        outcome: Outcome::Connected {
            connect: Duration::from_micros(150),
        },
        status: Some(status),
        body: Some(HealthzBody {
            last_updated: Some(Stamp::At(NOW - age_seconds)),
            current_time: Some(Stamp::At(NOW)),
            node_eligible: Some(true),
        }),
    }
}

fn handshake(connect_ms: u64, handshake_ms: u64) -> ApiAnswer {
    ApiAnswer {
        outcome: Outcome::Connected {
            connect: Duration::from_millis(connect_ms),
        },
        handshake: Some(Duration::from_millis(handshake_ms)),
    }
}

fn stat(pid: u32, comm: &str) -> String {
    format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 10 0 0 0 20 0 12 0 500 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
}

/// Stages process `pid` (`comm`, `args` separated by spaces) in the fake `/proc`.
pub fn process(h: &FakeHost, pid: u32, comm: &str, args: &str) {
    h.write(&format!("/proc/{pid}/comm"), format!("{comm}\n"))
        .write(&format!("/proc/{pid}/stat"), stat(pid, comm))
        .write(
            &format!("/proc/{pid}/cmdline"),
            args.replace(' ', "\0") + "\0",
        )
        .write(
            &format!("/proc/{pid}/cgroup"),
            "0::/kubepods.slice/kubepods-besteffort.slice/x.scope\n",
        );
}

/// "-----BEGIN CERTIFICATE-----\n" in base64: the decoded CA the plan carries.
const CA_B64: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {CA_B64}
    server: {server}
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: system:node:node-1
  name: system:node:node-1@kubernetes
current-context: system:node:node-1@kubernetes
kind: Config
preferences: {{}}
users:
- name: system:node:node-1
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
"
    )
}

/// A kubeadm node: kube-proxy (pid 2231) with its ConfigMap file (health endpoint on all
/// interfaces, port 10256), the kubelet (pid 1187) with its kubeconfig.
fn node() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n");
    process(
        &h,
        2231,
        "kube-proxy",
        "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf --hostname-override=node-1",
    );
    h.write(
        "/proc/2231/root/var/lib/kube-proxy/config.conf",
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nbindAddress: 0.0.0.0\nhealthzBindAddress: 0.0.0.0:10256\nkind: KubeProxyConfiguration\nmode: iptables\n",
    );
    process(
        &h,
        1187,
        "kubelet",
        "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml",
    );
    h.write(
        "/etc/kubernetes/kubelet.conf",
        kubeconfig("https://10.0.0.10:6443"),
    );
    h
}

/// A collector probing the API server every run (the tests' clock is their runs).
fn collector(h: &FakeHost, probe: &Arc<FakeReach>) -> ReachCollector {
    let config = ReachConfig {
        api_interval: Duration::ZERO,
        ..ReachConfig::default()
    };
    ReachCollector::new(h.node(), config, probe.clone() as Arc<dyn ReachProbe>)
}

fn only<'a>(c: &'a Collection, id: &str) -> &'a Finding {
    assert_eq!(c.findings.len(), 1, "{:#?} {:?}", c.findings, c.status);
    let f = &c.findings[0];
    assert_eq!(f.id, id);
    f
}

fn num(f: &Finding, name: &str) -> f64 {
    f.evidence[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} in {:?}", f.evidence))
}

fn text(f: &Finding) -> String {
    let mut s = format!("{} {}", f.title.en, f.summary.en);
    for step in &f.remediation.steps {
        s.push(' ');
        s.push_str(&step.en);
    }
    s
}

fn sets(f: &Finding) -> Vec<(String, String)> {
    collectors::rules::RuleBook::cluster(f)
        .into_iter()
        .map(|(c, r)| (c.ctype.clone(), r))
        .collect()
}

fn gauge(c: &Collection, name: &str, labels: &[(&str, &str)]) -> f64 {
    find_metric(c, name, labels)
        .unwrap_or_else(|| panic!("{name} {labels:?} in {:#?}", c.metrics))
        .value
}

#[test]
fn a_healthy_node_is_quiet_and_measured() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(handshake(3, 14));
    let mut c = collector(&h, &probe);
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    assert_eq!(out.status, Status::Ok);
    // What was probed: kube-proxy's wildcard bind on loopback, the kubeconfig's server with
    // its CA decoded and the name the certificate must carry.
    let plan = &probe.plans()[0];
    assert_eq!(
        plan.targets,
        vec![
            ReachTarget::KubeProxyHealthz {
                addr: "127.0.0.1:10256".parse().unwrap()
            },
            ReachTarget::ApiServer {
                host: "10.0.0.10".into(),
                port: 6443,
                server_name: "10.0.0.10".into(),
                ca_pem: Some(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
                insecure: false,
            },
        ]
    );
    assert_eq!(plan.timeout, Duration::from_secs(5));
    assert_eq!(
        gauge(&out, "node_doctor_reach_up", &[("target", "kube_proxy")]),
        1.0
    );
    assert_eq!(
        gauge(&out, "node_doctor_reach_up", &[("target", "api_server")]),
        1.0
    );
    assert_eq!(
        gauge(
            &out,
            "node_doctor_reach_probe_outcome",
            &[("target", "api_server"), ("outcome", "connected")]
        ),
        1.0
    );
    assert_eq!(
        gauge(
            &out,
            "node_doctor_reach_connect_seconds",
            &[("target", "api_server")]
        ),
        0.003
    );
    assert_eq!(
        gauge(
            &out,
            "node_doctor_reach_api_server_tls_handshake_seconds",
            &[]
        ),
        0.014
    );
    assert_eq!(
        gauge(&out, "node_doctor_reach_kube_proxy_healthz_status", &[]),
        200.0
    );
    assert_eq!(
        gauge(&out, "node_doctor_reach_kube_proxy_sync_age_seconds", &[]),
        0.0
    );
}

#[test]
fn kube_proxy_with_rules_ten_minutes_stale_is_critical() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(503, 600.0));
    probe.api(handshake(3, 14));
    let mut c = collector(&h, &probe);
    let out = collect(&mut c, &ctx());
    let f = only(&out, "reach.kube_proxy_unhealthy");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject, "kube-proxy");
    assert_eq!(num(f, "sync_age_seconds"), 600.0);
    assert_eq!(num(f, "pid"), 2231.0);
    let t = text(f);
    assert!(t.contains("answers 503 at 127.0.0.1:10256/healthz"), "{t}");
    assert!(
        t.contains("last synced 600 s ago (by its own clock)"),
        "{t}"
    );
    assert!(t.contains("stale rules"), "{t}");
    assert!(t.contains("cordon"), "{t}");
    let cmds = &f.remediation.commands;
    assert!(cmds.contains(&"curl -s --max-time 5 http://127.0.0.1:10256/healthz".to_string()));
    assert!(
        cmds.contains(&"kubectl -n kube-system logs -l k8s-app=kube-proxy --tail=200".to_string())
    );
    assert!(cmds.contains(&"kubectl cordon node-1".to_string()));
    assert_eq!(
        sets(f),
        [(
            "NodeDoctorKubeProxyUnhealthy".to_string(),
            "KubeProxyRulesStale".to_string()
        )]
    );
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.doc, "Kubernetes documentation");
    assert_eq!(
        gauge(&out, "node_doctor_reach_kube_proxy_sync_age_seconds", &[]),
        600.0
    );
    // Synced again: quiet.
    probe.healthz(healthz(200, 0.0));
    assert!(collect(&mut c, &ctx()).findings.is_empty());
}

#[test]
fn a_node_being_deleted_is_not_a_kube_proxy_fault() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    let mut a = healthz(503, 0.0);
    a.body.as_mut().unwrap().node_eligible = Some(false);
    probe.healthz(a);
    probe.api(handshake(3, 14));
    let out = collect(&mut collector(&h, &probe), &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    assert_eq!(
        gauge(&out, "node_doctor_reach_kube_proxy_healthz_status", &[]),
        503.0
    );
}

#[test]
fn kube_proxy_refusing_on_its_old_health_port() {
    let h = node();
    // An old kube-proxy with flags: an address and a separate port.
    process(
        &h,
        2231,
        "kube-proxy",
        "/usr/local/bin/kube-proxy --healthz-bind-address=0.0.0.0 --healthz-port=10249 --master=https://10.0.0.10:6443",
    );
    let probe = Arc::new(FakeReach::default());
    probe.api(handshake(3, 14));
    let out = collect(&mut collector(&h, &probe), &ctx());
    let f = only(&out, "reach.kube_proxy_not_answering");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence["outcome"].as_str(), Some("refused"));
    let t = text(f);
    assert!(
        t.contains("GET /healthz at 127.0.0.1:10249 was refused"),
        "{t}"
    );
    assert!(t.contains("--healthz-bind-address"), "{t}");
    let cmds = &f.remediation.commands;
    assert!(
        cmds.contains(&"ss -ltnp 'sport = :10249'".to_string()),
        "{cmds:?}"
    );
    assert!(cmds.contains(&"kubectl -n kube-system get pods -l k8s-app=kube-proxy -o wide --field-selector spec.nodeName=node-1".to_string()), "{cmds:?}");
    assert_eq!(
        sets(f),
        [(
            "NodeDoctorKubeProxyUnhealthy".to_string(),
            "KubeProxyNotAnswering".to_string()
        )]
    );
}

#[test]
fn api_server_without_a_route_after_two_probes() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(ApiAnswer {
        outcome: Outcome::NoRoute {
            detail: "No route to host (os error 113)".into(),
        },
        handshake: None,
    });
    let mut c = collector(&h, &probe);
    // One failed probe is not an outage.
    let first = collect(&mut c, &ctx());
    assert!(first.findings.is_empty(), "{:#?}", first.findings);
    assert_eq!(
        gauge(&first, "node_doctor_reach_up", &[("target", "api_server")]),
        0.0
    );
    let out = collect(&mut c, &ctx());
    let f = only(&out, "reach.api_server_unreachable");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject, "https://10.0.0.10:6443");
    assert_eq!(num(f, "failed_probes"), 2.0);
    assert_eq!(f.evidence["address"].as_str(), Some("10.0.0.10:6443"));
    let t = text(f);
    assert!(t.contains("(/etc/kubernetes/kubelet.conf), https://10.0.0.10:6443 at 10.0.0.10:6443, was not reached in 2 probes in a row: no route to it (No route to host (os error 113))"), "{t}");
    assert!(t.contains("NotReady"), "{t}");
    assert!(t.contains("ip route get"), "{t}");
    let cmds = &f.remediation.commands;
    assert!(
        cmds.contains(&"ip route get 10.0.0.10".to_string()),
        "{cmds:?}"
    );
    assert!(
        cmds.contains(
            &"echo | openssl s_client -connect 10.0.0.10:6443 -servername 10.0.0.10".to_string()
        ),
        "{cmds:?}"
    );
    assert_eq!(
        sets(f),
        [(
            "NodeDoctorNetworkDegraded".to_string(),
            "APIServerUnreachable".to_string()
        )]
    );
    // The path comes back: the count starts again.
    probe.api(handshake(3, 14));
    assert!(collect(&mut c, &ctx()).findings.is_empty());
    probe.api(ApiAnswer {
        outcome: Outcome::Refused,
        handshake: None,
    });
    assert!(collect(&mut c, &ctx()).findings.is_empty());
}

#[test]
fn an_expired_certificate_names_the_clock_too() {
    let h = node();
    // The CA as a file beside the kubeconfig (a relative name).
    h.write(
        "/etc/kubernetes/kubelet.conf",
        kubeconfig("https://api.cluster.example:6443").replace(
            &format!("certificate-authority-data: {CA_B64}"),
            "certificate-authority: pki/ca.crt\n    tls-server-name: kubernetes.default.svc",
        ),
    )
    .write(
        "/etc/kubernetes/pki/ca.crt",
        "-----BEGIN CERTIFICATE-----\nfile\n",
    );
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(ApiAnswer {
        outcome: Outcome::Tls {
            connect: Duration::from_millis(2),
            kind: TlsFailure::Expired,
            detail: "invalid peer certificate: certificate expired".into(),
        },
        handshake: None,
    });
    let out = collect(&mut collector(&h, &probe), &ctx());
    let plan = &probe.plans()[0];
    assert_eq!(
        plan.targets[1],
        ReachTarget::ApiServer {
            host: "api.cluster.example".into(),
            port: 6443,
            server_name: "kubernetes.default.svc".into(),
            ca_pem: Some(b"-----BEGIN CERTIFICATE-----\nfile\n".to_vec()),
            insecure: false,
        }
    );
    let f = only(&out, "reach.api_server_tls_failed");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(
        f.evidence["tls_error"].as_str(),
        Some("certificate_expired")
    );
    assert_eq!(num(f, "connect_ms"), 2.0);
    let t = text(f);
    assert!(t.contains("has expired by this node's clock"), "{t}");
    assert!(t.contains("this node's clock is wrong"), "{t}");
    assert!(t.contains("kubeadm certs renew"), "{t}");
    let cmds = &f.remediation.commands;
    assert!(cmds.contains(&"echo | openssl s_client -connect api.cluster.example:6443 -servername kubernetes.default.svc".to_string()), "{cmds:?}");
    assert!(cmds.contains(&"timedatectl status".to_string()));
    assert!(cmds.contains(&"kubeadm certs check-expiration".to_string()));
    let src = f.remediation.source.as_ref().unwrap();
    assert!(
        src.section.contains("Check certificate expiration"),
        "{src:?}"
    );
    // No NodeCondition: a certificate is the control plane's to fix.
    assert!(sets(f).is_empty());
}

#[test]
fn an_unknown_ca_points_at_a_rotation() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(ApiAnswer {
        outcome: Outcome::Tls {
            connect: Duration::from_millis(2),
            kind: TlsFailure::UnknownCa,
            detail: "invalid peer certificate: UnknownIssuer".into(),
        },
        handshake: None,
    });
    let out = collect(&mut collector(&h, &probe), &ctx());
    let f = only(&out, "reach.api_server_tls_failed");
    let t = text(f);
    assert!(t.contains("not signed by the kubeconfig's CA"), "{t}");
    assert!(t.contains("CA rotation"), "{t}");
    assert!(!t.contains("clock is wrong"), "{t}");
}

#[test]
fn a_slow_handshake_is_raised_when_repeated() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(handshake(1500, 2400));
    let mut c = collector(&h, &probe);
    assert!(collect(&mut c, &ctx()).findings.is_empty());
    let out = collect(&mut c, &ctx());
    let f = only(&out, "reach.api_server_slow");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "connect_ms"), 1500.0);
    assert_eq!(num(f, "handshake_ms"), 2400.0);
    assert_eq!(num(f, "slow_probes"), 2.0);
    let t = text(f);
    assert!(t.contains("TCP connect 1500 ms (threshold 1000 ms"), "{t}");
    assert!(
        t.contains("TLS handshake 2400 ms (threshold 2000 ms"),
        "{t}"
    );
    assert!(f
        .remediation
        .commands
        .contains(&"nstat -az TcpRetransSegs".to_string()));
}

/// The API server is probed once a minute at most: the runs between judge the last answer.
#[test]
fn the_api_server_is_probed_once_a_minute() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    probe.api(handshake(3, 14));
    let mut c = ReachCollector::new(
        h.node(),
        ReachConfig::default(),
        probe.clone() as Arc<dyn ReachProbe>,
    );
    for _ in 0..3 {
        let out = c.collect(&ctx());
        assert!(out.findings.is_empty());
        assert_eq!(
            gauge(&out, "node_doctor_reach_up", &[("target", "api_server")]),
            1.0
        );
    }
    assert_eq!(probe.plans().len(), 3, "kube-proxy every run");
    assert_eq!(probe.api_probes(), 1, "{:#?}", probe.plans());
}

#[test]
fn no_probes_touches_nothing() {
    let h = node();
    let probe = Arc::new(FakeReach::default());
    let config = ReachConfig {
        probes: false,
        ..ReachConfig::default()
    };
    let node = h.node();
    let mut c = ReachCollector::new(node.clone(), config, probe.clone() as Arc<dyn ReachProbe>);
    let out = collect(&mut c, &ctx());
    assert_eq!(
        out.status,
        Status::Noted("probes are off (--no-probes)".into())
    );
    assert!(out.findings.is_empty());
    assert!(probe.plans().is_empty());
    assert_eq!(node.processes().examined(), 0);
}

#[test]
fn a_node_without_kube_proxy_or_kubeconfig_has_nothing_to_probe() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "100.00 100.00\n");
    let probe = Arc::new(FakeReach::default());
    let out = collect(&mut collector(&h, &probe), &ctx());
    assert!(out.findings.is_empty());
    match &out.status {
        Status::Noted(m) => {
            assert!(m.contains("no kube-proxy runs"), "{m}");
            assert!(
                m.contains("no kubelet kubeconfig at /etc/kubernetes/kubelet.conf"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(probe.plans().is_empty());
    // A kube-proxy replacement (Cilium): the API server alone is probed.
    h.write(
        "/etc/kubernetes/kubelet.conf",
        kubeconfig("https://10.0.0.10:6443"),
    );
    probe.api(handshake(3, 14));
    let out = collect(&mut collector(&h, &probe), &ctx());
    assert!(
        matches!(&out.status, Status::Noted(m) if m.contains("no kube-proxy runs")),
        "{:?}",
        out.status
    );
    assert_eq!(probe.plans().last().unwrap().targets.len(), 1);
}

#[test]
fn an_unreadable_kubeconfig_is_degraded() {
    let h = node();
    h.write("/etc/kubernetes/kubelet.conf", "current-context: gone\n");
    let probe = Arc::new(FakeReach::default());
    probe.healthz(healthz(200, 0.0));
    let out = collect(&mut collector(&h, &probe), &ctx());
    match &out.status {
        Status::Degraded(m) => assert!(m.contains("current-context \"gone\""), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(probe.api_probes(), 0);
}
