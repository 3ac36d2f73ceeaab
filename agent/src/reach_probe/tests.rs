//! The real probes against servers of the tests' own on 127.0.0.1 (random ports): a
//! kube-proxy-like `/healthz`, and TLS servers with certificates made here (`rcgen`): a good
//! one, one from another CA, an expired one, one for another name; a refused port and a
//! listener that accepts and never speaks.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use super::*;

fn plan(targets: Vec<ReachTarget>, ms: u64) -> ReachPlan {
    ReachPlan {
        targets,
        timeout: Duration::from_millis(ms),
    }
}

/// A time as Go's `time.Time.String()` writes it, `secs_ago` seconds before now, with a
/// monotonic reading as kube-proxy's clock adds.
fn go_time(secs_ago: u64) -> String {
    let t = time::OffsetDateTime::from(SystemTime::now() - Duration::from_secs(secs_ago));
    let f = time::macros::format_description!(
        "[year]-[month]-[day] [hour]:[minute]:[second].[subsecond digits:9] +0000 UTC"
    );
    format!("{} m=+86400.123456789", t.format(&f).unwrap())
}

/// Serves `answers` (status, body) to one connection each, as kube-proxy's `/healthz` does.
fn healthz_server(answers: Vec<(u16, String)>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for (status, body) in answers {
            let Ok((mut s, _)) = l.accept() else { return };
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            assert!(req.starts_with("GET /healthz HTTP/1.1\r\n"), "{req}");
            let reason = if status == 200 {
                "OK"
            } else {
                "Service Unavailable"
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

#[test]
fn kube_proxy_healthz_status_and_age() {
    let now = go_time(0);
    let healthy =
        format!(r#"{{"lastUpdated": "{now}","currentTime": "{now}", "nodeEligible": true}}"#);
    let stale = format!(
        r#"{{"lastUpdated": "{}","currentTime": "{}", "nodeEligible": true}}"#,
        go_time(600),
        go_time(0)
    );
    let addr = healthz_server(vec![(200, healthy), (503, stale)]);
    let probe = HostReachProbe;
    let p = plan(vec![ReachTarget::KubeProxyHealthz { addr }], 2000);
    let r = probe.probe(&p);
    let h = r.healthz(0).expect("a healthz answer");
    assert!(matches!(h.outcome, Outcome::Connected { .. }), "{h:?}");
    assert_eq!(h.status, Some(200));
    let body = h.body.expect("the body parsed");
    assert_eq!(body.sync_age_seconds(), Some(0.0));
    assert_eq!(body.node_eligible, Some(true));
    let r = probe.probe(&p);
    let h = r.healthz(0).unwrap();
    assert_eq!(h.status, Some(503));
    let age = h.body.unwrap().sync_age_seconds().unwrap();
    assert!((599.0..=601.0).contains(&age), "{age}");
}

#[test]
fn kube_proxy_refused_and_silent() {
    // A port nobody listens on: bind, note it, close.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = HostReachProbe.probe(&plan(vec![ReachTarget::KubeProxyHealthz { addr }], 1000));
    assert_eq!(r.healthz(0).unwrap().outcome, Outcome::Refused);
    let (silent, _keep) = silent_listener();
    let r = HostReachProbe.probe(&plan(
        vec![ReachTarget::KubeProxyHealthz { addr: silent }],
        300,
    ));
    match &r.healthz(0).unwrap().outcome {
        Outcome::Timeout { after, connected } => {
            assert!(*connected);
            assert!(*after >= Duration::from_millis(300), "{after:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// A listener that accepts and never writes (its accepted connections held open).
fn silent_listener() -> (SocketAddr, Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    (addr, held)
}

struct Pki {
    ca_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

fn ca(name: &str) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = p.self_signed(&key).unwrap();
    Pki {
        ca_pem: cert.pem(),
        issuer: rcgen::Issuer::new(p, key),
    }
}

/// A server certificate for `names` (and 127.0.0.1) signed by `ca`, valid from `from` to `to`
/// (years).
fn server_cert(ca: &Pki, names: &[&str], from: i32, to: i32) -> (String, String) {
    use rcgen::{CertificateParams, KeyPair, SanType};
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    p.subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    p.not_before = rcgen::date_time_ymd(from, 1, 1);
    p.not_after = rcgen::date_time_ymd(to, 1, 1);
    let cert = p.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A TLS server on 127.0.0.1 presenting `cert`, for as many handshakes as come.
fn tls_server(cert_pem: &str, key_pem: &str) -> SocketAddr {
    use rustls::pki_types::PrivateKeyDer;
    let certs = vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let cfg = Arc::new(cfg);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let cfg = Arc::clone(&cfg);
            thread::spawn(move || {
                let Ok(mut conn) = rustls::ServerConnection::new(cfg) else {
                    return;
                };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                while conn.is_handshaking() {
                    if conn.complete_io(&mut s).is_err() {
                        return;
                    }
                }
                let _ = conn.complete_io(&mut s);
            });
        }
    });
    addr
}

fn api(addr: SocketAddr, name: &str, ca_pem: Option<&str>, insecure: bool) -> ReachTarget {
    ReachTarget::ApiServer {
        host: addr.ip().to_string(),
        port: addr.port(),
        server_name: name.to_string(),
        ca_pem: ca_pem.map(|p| p.as_bytes().to_vec()),
        insecure,
    }
}

fn probe_api(t: ReachTarget, ms: u64) -> ApiAnswer {
    HostReachProbe
        .probe(&plan(vec![t], ms))
        .api(0)
        .cloned()
        .expect("an API answer")
}

fn tls_kind(a: &ApiAnswer) -> TlsFailure {
    match &a.outcome {
        Outcome::Tls { kind, .. } => *kind,
        other => panic!("not a TLS failure: {other:?}"),
    }
}

#[test]
fn api_server_handshake_verified_against_the_ca() {
    let good = ca("reach test CA");
    let (cert, key) = server_cert(&good, &["kubernetes.default.svc"], 2000, 4000);
    let addr = tls_server(&cert, &key);
    // The right CA and a name the certificate carries: connect and handshake times, both
    // measured, one after the other inside the probe's call (no bound on either).
    let called = std::time::Instant::now();
    let a = probe_api(
        api(addr, "kubernetes.default.svc", Some(&good.ca_pem), false),
        3000,
    );
    let whole = called.elapsed();
    assert!(matches!(a.outcome, Outcome::Connected { .. }), "{a:?}");
    let hs = a.handshake.expect("handshake time");
    let connect = a.outcome.connect().expect("connect time");
    assert!(hs > Duration::ZERO, "{a:?}");
    assert!(connect + hs <= whole, "{a:?} in a call of {whole:?}");
    // By IP address (a kubeadm kubeconfig's server).
    let a = probe_api(api(addr, "127.0.0.1", Some(&good.ca_pem), false), 3000);
    assert!(a.handshake.is_some(), "{a:?}");
    // Another CA.
    let other = ca("another CA");
    let a = probe_api(
        api(addr, "kubernetes.default.svc", Some(&other.ca_pem), false),
        3000,
    );
    assert_eq!(tls_kind(&a), TlsFailure::UnknownCa, "{a:?}");
    assert!(a.handshake.is_none());
    assert!(a.outcome.connect().is_some());
    // A name the certificate does not carry.
    let a = probe_api(
        api(addr, "api.elsewhere.example", Some(&good.ca_pem), false),
        3000,
    );
    assert_eq!(tls_kind(&a), TlsFailure::NameMismatch, "{a:?}");
    // insecure-skip-tls-verify: any certificate completes the handshake.
    let a = probe_api(
        api(addr, "api.elsewhere.example", Some(&other.ca_pem), true),
        3000,
    );
    assert!(a.handshake.is_some(), "{a:?}");
    // A CA that is not PEM.
    let a = probe_api(api(addr, "127.0.0.1", Some("garbage"), false), 3000);
    assert_eq!(tls_kind(&a), TlsFailure::BadCa, "{a:?}");
}

#[test]
fn api_server_expired_and_future_certificates() {
    let good = ca("reach test CA");
    let (cert, key) = server_cert(&good, &["localhost"], 2001, 2002);
    let addr = tls_server(&cert, &key);
    let a = probe_api(api(addr, "localhost", Some(&good.ca_pem), false), 3000);
    assert_eq!(tls_kind(&a), TlsFailure::Expired, "{a:?}");
    let (cert, key) = server_cert(&good, &["localhost"], 3000, 3001);
    let addr = tls_server(&cert, &key);
    let a = probe_api(api(addr, "localhost", Some(&good.ca_pem), false), 3000);
    assert_eq!(tls_kind(&a), TlsFailure::NotYetValid, "{a:?}");
}

#[test]
fn api_server_refused_and_silent() {
    let good = ca("reach test CA");
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let a = probe_api(api(closed, "127.0.0.1", Some(&good.ca_pem), false), 1000);
    assert_eq!(a.outcome, Outcome::Refused);
    // Accepts, never speaks TLS: the handshake times out, connected.
    let (silent, _keep) = silent_listener();
    // Its 400 ms timeout ends the handshake; without it the probe would wait for ever.
    let target = api(silent, "127.0.0.1", Some(&good.ca_pem), false);
    let a = crate::scheduler::fakes::within_30s("a handshake with a silent server", move || {
        probe_api(target, 400)
    });
    match a.outcome {
        Outcome::Timeout { after, connected } => {
            assert!(connected);
            assert!(after >= Duration::from_millis(400), "{after:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn both_targets_in_one_plan_answer_in_order() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = HostReachProbe.probe(&plan(
        vec![
            ReachTarget::KubeProxyHealthz { addr: closed },
            api(closed, "127.0.0.1", None, false),
        ],
        1000,
    ));
    assert_eq!(r.healthz(0).unwrap().outcome, Outcome::Refused);
    // No CA and not insecure: the probe does not guess roots; it says it could not try.
    assert!(
        matches!(&r.api(1).unwrap().outcome, Outcome::Failed(why) if why.contains("names no CA")),
        "{r:?}"
    );
}
