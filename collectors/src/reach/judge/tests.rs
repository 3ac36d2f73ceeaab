use super::*;
use crate::reach::probe::{ApiAnswer, HealthzAnswer, HealthzBody, Stamp};

fn t() -> Thresholds {
    Thresholds::default()
}

fn healthz(outcome: Outcome, status: Option<u16>, body: Option<HealthzBody>) -> ReachSample {
    ReachSample {
        kube_proxy: KubeProxyReach::Probed {
            pid: 2345,
            addr: "127.0.0.1:10256".parse().unwrap(),
            answer: HealthzAnswer {
                outcome,
                status,
                body,
            },
        },
        api_server: ApiReach::NoKubeconfig {
            path: "/etc/kubernetes/kubelet.conf".into(),
        },
    }
}

fn connected() -> Outcome {
    Outcome::Connected {
        connect: Duration::from_millis(1),
    }
}

fn body(age: f64, eligible: Option<bool>) -> HealthzBody {
    HealthzBody {
        last_updated: Some(Stamp::At(1_714_557_600.0 - age)),
        current_time: Some(Stamp::At(1_714_557_600.0)),
        node_eligible: eligible,
    }
}

fn api(outcome: Outcome, handshake_ms: Option<u64>, failures: u32, slow: u32) -> ReachSample {
    ReachSample {
        kube_proxy: KubeProxyReach::NotRunning,
        api_server: ApiReach::Probed(ApiProbed {
            kubeconfig: "/etc/kubernetes/kubelet.conf".into(),
            server: "https://10.0.0.10:6443".into(),
            host: "10.0.0.10".into(),
            port: 6443,
            server_name: "10.0.0.10".into(),
            insecure: false,
            answer: ApiAnswer {
                outcome,
                handshake: handshake_ms.map(Duration::from_millis),
            },
            age: Duration::ZERO,
            failures_in_row: failures,
            slow_in_row: slow,
        }),
    }
}

#[test]
fn a_healthy_node_is_quiet() {
    let s = healthz(connected(), Some(200), Some(body(0.0, Some(true))));
    assert!(judge(&s, &t()).is_empty());
    let s = api(
        Outcome::Connected {
            connect: Duration::from_millis(3),
        },
        Some(12),
        0,
        0,
    );
    assert!(judge(&s, &t()).is_empty());
    // Nothing to probe is nothing to judge.
    let s = ReachSample {
        kube_proxy: KubeProxyReach::NotRunning,
        api_server: ApiReach::NoKubeconfig { path: "/x".into() },
    };
    assert!(judge(&s, &t()).is_empty());
}

#[test]
fn kube_proxy_503_carries_the_age_of_its_last_sync() {
    let d = judge(
        &healthz(connected(), Some(503), Some(body(95.4, Some(true)))),
        &t(),
    );
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "reach.kube_proxy_unhealthy");
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(d[0].evidence["sync_age_seconds"].as_f64(), Some(95.0));
    assert_eq!(d[0].evidence["addr"].as_str(), Some("127.0.0.1:10256"));
    assert!(!d[0].conditions.contains("never_synced"));
    // Ten minutes stale: critical.
    let d = judge(
        &healthz(connected(), Some(503), Some(body(600.0, Some(true)))),
        &t(),
    );
    assert_eq!(d[0].severity, Severity::Critical);
    // Never synced since it started: no age, a condition.
    let never = HealthzBody {
        last_updated: Some(Stamp::Zero),
        ..body(0.0, None)
    };
    let d = judge(&healthz(connected(), Some(503), Some(never)), &t());
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(!d[0].evidence.contains_key("sync_age_seconds"));
    assert!(d[0].conditions.contains("never_synced"));
}

#[test]
fn a_node_being_deleted_answers_503_on_purpose() {
    let s = healthz(connected(), Some(503), Some(body(0.0, Some(false))));
    assert!(judge(&s, &t()).is_empty());
}

#[test]
fn kube_proxy_not_answering() {
    let d = judge(&healthz(Outcome::Refused, None, None), &t());
    assert_eq!(d[0].id, "reach.kube_proxy_not_answering");
    assert!(d[0].conditions.contains("refused"));
    assert_eq!(d[0].evidence["outcome"].as_str(), Some("refused"));
    let d = judge(
        &healthz(
            Outcome::Timeout {
                after: Duration::from_millis(5003),
                connected: true,
            },
            None,
            None,
        ),
        &t(),
    );
    assert!(d[0].conditions.contains("timeout"));
    assert_eq!(d[0].evidence["waited_ms"].as_f64(), Some(5003.0));
    // Something else on the port (a 404).
    let d = judge(&healthz(connected(), Some(404), None), &t());
    assert!(d[0].conditions.contains("bad_answer"));
    assert_eq!(d[0].evidence["status"].as_f64(), Some(404.0));
    // A probe that could not try is the status's, not a finding.
    assert!(judge(&healthz(Outcome::Failed("EPERM".into()), None, None), &t()).is_empty());
}

#[test]
fn api_server_unreachable_after_repeated_failures() {
    // One failed probe is not an outage.
    assert!(judge(&api(Outcome::Refused, None, 1, 0), &t()).is_empty());
    let d = judge(&api(Outcome::Refused, None, 2, 0), &t());
    assert_eq!(d[0].id, "reach.api_server_unreachable");
    assert_eq!(d[0].severity, Severity::Critical);
    assert_eq!(d[0].evidence["address"].as_str(), Some("10.0.0.10:6443"));
    assert_eq!(d[0].evidence["failed_probes"].as_f64(), Some(2.0));
    assert!(d[0].conditions.contains("refused"));
    let d = judge(
        &api(
            Outcome::NoRoute {
                detail: "No route to host (os error 113)".into(),
            },
            None,
            3,
            0,
        ),
        &t(),
    );
    assert!(d[0].conditions.contains("no_route"));
    assert_eq!(
        d[0].evidence["detail"].as_str(),
        Some("No route to host (os error 113)")
    );
    let d = judge(
        &api(
            Outcome::Timeout {
                after: Duration::from_secs(5),
                connected: false,
            },
            None,
            2,
            0,
        ),
        &t(),
    );
    assert!(d[0].conditions.contains("timeout"));
    let d = judge(
        &api(
            Outcome::Timeout {
                after: Duration::from_secs(5),
                connected: true,
            },
            None,
            2,
            0,
        ),
        &t(),
    );
    assert!(d[0].conditions.contains("silent"));
}

#[test]
fn tls_failures_name_their_kind() {
    for (kind, cond) in [
        (TlsFailure::Expired, "expired"),
        (TlsFailure::NotYetValid, "not_yet_valid"),
        (TlsFailure::UnknownCa, "unknown_ca"),
        (TlsFailure::NameMismatch, "name_mismatch"),
        (TlsFailure::Other, "other"),
    ] {
        let d = judge(
            &api(
                Outcome::Tls {
                    connect: Duration::from_millis(2),
                    kind,
                    detail: "invalid peer certificate".into(),
                },
                None,
                1,
                0,
            ),
            &t(),
        );
        assert_eq!(d[0].id, "reach.api_server_tls_failed", "{cond}");
        assert!(d[0].conditions.contains(cond), "{cond}");
        assert_eq!(d[0].evidence["tls_error"].as_str(), Some(kind.as_str()));
    }
}

#[test]
fn slow_only_when_repeated() {
    let slow = Outcome::Connected {
        connect: Duration::from_millis(1500),
    };
    assert!(judge(&api(slow.clone(), Some(20), 0, 1), &t()).is_empty());
    let d = judge(&api(slow, Some(20), 0, 2), &t());
    assert_eq!(d[0].id, "reach.api_server_slow");
    assert_eq!(d[0].evidence["connect_ms"].as_f64(), Some(1500.0));
    assert!(d[0].conditions.contains("slow_connect"));
    assert!(!d[0].conditions.contains("slow_handshake"));
    let d = judge(&api(connected(), Some(2500), 0, 3), &t());
    assert!(d[0].conditions.contains("slow_handshake"));
    assert_eq!(d[0].evidence["handshake_ms"].as_f64(), Some(2500.0));
    // is_slow agrees with the judge.
    if let ApiReach::Probed(p) = &api(connected(), Some(2500), 0, 3).api_server {
        assert!(is_slow(p, &t()));
    }
    if let ApiReach::Probed(p) = &api(connected(), Some(20), 0, 3).api_server {
        assert!(!is_slow(p, &t()));
    }
}
