//! The reach collector's network probes ([`collectors::reach::probe`]): kube-proxy's
//! `/healthz` over HTTP/1.1 (hyper, with `probe.rs`'s helpers) and the API server's TCP
//! connect and TLS handshake (rustls with ring, as the Kubernetes reporter uses; no client
//! certificate, no HTTP request). The collectors crate decides what to probe; this module
//! probes.
//!
//! Like `probe.rs`: a current-thread tokio runtime built for the probe (the collector runs on
//! its own thread), the targets asked concurrently, each under one deadline; the runtime is
//! dropped with whatever a silent peer still holds.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::reach::probe::{
    parse_healthz_body, ApiAnswer, HealthzAnswer, Outcome, ReachPlan, ReachProbe, ReachReply,
    ReachReport, ReachTarget, TlsFailure,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::time::timeout_at;

use crate::probe::{ask_all, cut, get, http1, SMALL_BODY};

/// The agent's probe of the control paths, from its own network namespace (the host's).
#[derive(Debug, Default, Clone, Copy)]
pub struct HostReachProbe;

impl ReachProbe for HostReachProbe {
    fn probe(&self, plan: &ReachPlan) -> ReachReport {
        ReachReport {
            replies: ask_all(&plan.targets, plan.timeout, ask, failed),
        }
    }
}

fn failed(t: &ReachTarget, why: &str) -> ReachReply {
    let outcome = Outcome::Failed(why.to_string());
    match t {
        ReachTarget::KubeProxyHealthz { .. } => ReachReply::Healthz(HealthzAnswer {
            outcome,
            status: None,
            body: None,
        }),
        ReachTarget::ApiServer { .. } => ReachReply::Api(ApiAnswer {
            outcome,
            handshake: None,
        }),
    }
}

async fn ask(t: ReachTarget, timeout: Duration) -> ReachReply {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    match t {
        ReachTarget::KubeProxyHealthz { addr } => {
            ReachReply::Healthz(healthz(addr, start, deadline).await)
        }
        ReachTarget::ApiServer {
            host,
            port,
            server_name,
            ca_pem,
            insecure,
        } => ReachReply::Api(
            api_server(
                &host,
                port,
                &server_name,
                ca_pem.as_deref(),
                insecure,
                start,
                deadline,
            )
            .await,
        ),
    }
}

/// A failed TCP connect in the probe's terms.
fn connect_outcome(e: &std::io::Error) -> Outcome {
    let unreachable = [nix::libc::EHOSTUNREACH, nix::libc::ENETUNREACH];
    match e.kind() {
        ErrorKind::ConnectionRefused => Outcome::Refused,
        _ if e.raw_os_error().is_some_and(|c| unreachable.contains(&c)) => Outcome::NoRoute {
            detail: cut(&e.to_string()),
        },
        _ => Outcome::Failed(cut(&e.to_string())),
    }
}

fn timed_out(start: Instant, connected: bool) -> Outcome {
    Outcome::Timeout {
        after: start.elapsed(),
        connected,
    }
}

/// A TCP connect within the deadline: the stream and the connect time, or the outcome.
async fn connect(
    addr: SocketAddr,
    start: Instant,
    deadline: tokio::time::Instant,
) -> Result<(tokio::net::TcpStream, Duration), Outcome> {
    match timeout_at(deadline, tokio::net::TcpStream::connect(addr)).await {
        Err(_) => Err(timed_out(start, false)),
        Ok(Err(e)) => Err(connect_outcome(&e)),
        Ok(Ok(s)) => Ok((s, start.elapsed())),
    }
}

async fn healthz(
    addr: SocketAddr,
    start: Instant,
    deadline: tokio::time::Instant,
) -> HealthzAnswer {
    let mut answer = HealthzAnswer {
        outcome: Outcome::Failed(String::new()),
        status: None,
        body: None,
    };
    let (stream, connect) = match connect(addr, start, deadline).await {
        Ok(s) => s,
        Err(o) => {
            answer.outcome = o;
            return answer;
        }
    };
    let host = addr.to_string();
    let work = async {
        let mut sender = http1(stream).await?;
        get(&mut sender, &host, "/healthz", SMALL_BODY).await
    };
    match timeout_at(deadline, work).await {
        Err(_) => answer.outcome = timed_out(start, true),
        Ok(Err(e)) => answer.outcome = Outcome::BadAnswer { detail: cut(&e) },
        Ok(Ok((status, body))) => {
            answer.outcome = Outcome::Connected { connect };
            answer.status = Some(status);
            answer.body = parse_healthz_body(&body).ok();
        }
    }
    answer
}

async fn api_server(
    host: &str,
    port: u16,
    server_name: &str,
    ca_pem: Option<&[u8]>,
    insecure: bool,
    start: Instant,
    deadline: tokio::time::Instant,
) -> ApiAnswer {
    let fail = |outcome| ApiAnswer {
        outcome,
        handshake: None,
    };
    if ca_pem.is_none() && !insecure {
        // A kubeconfig without a CA trusts the system's roots, the host's, which this probe
        // does not load: it could only guess, so it says it could not try.
        return fail(Outcome::Failed(
            "the kubeconfig names no CA (it trusts the system's roots, which the probe does not load)"
                .into(),
        ));
    }
    let tls = match client_config(ca_pem, insecure) {
        Ok(c) => c,
        Err((kind, detail)) => {
            return fail(Outcome::Tls {
                connect: Duration::ZERO,
                kind,
                detail: cut(&detail),
            })
        }
    };
    let Ok(name) = ServerName::try_from(server_name.to_string()) else {
        return fail(Outcome::Failed(cut(&format!(
            "{server_name:?} is not a TLS server name"
        ))));
    };
    let addr = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => match timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
            Err(_) => return fail(timed_out(start, false)),
            Ok(Err(e)) => {
                return fail(Outcome::NotResolved {
                    detail: cut(&e.to_string()),
                })
            }
            Ok(Ok(mut addrs)) => match addrs.next() {
                Some(a) => a,
                None => {
                    return fail(Outcome::NotResolved {
                        detail: "no address".into(),
                    })
                }
            },
        },
    };
    let (stream, connect) = match connect(addr, start, deadline).await {
        Ok(s) => s,
        Err(o) => return fail(o),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    match timeout_at(deadline, connector.connect(name, stream)).await {
        Err(_) => fail(timed_out(start, true)),
        Ok(Err(e)) => {
            let (kind, detail) = classify(&e);
            fail(Outcome::Tls {
                connect,
                kind,
                detail: cut(&detail),
            })
        }
        Ok(Ok(_stream)) => ApiAnswer {
            outcome: Outcome::Connected { connect },
            handshake: Some(start.elapsed().saturating_sub(connect)),
        },
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client's TLS configuration: the kubeconfig's CA as the only root, or (insecure) no
/// verification of the chain. `Err` when the CA cannot be used.
fn client_config(
    ca_pem: Option<&[u8]>,
    insecure: bool,
) -> Result<rustls::ClientConfig, (TlsFailure, String)> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| (TlsFailure::Other, e.to_string()))?;
    if insecure {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
            .with_no_client_auth());
    }
    let Some(pem) = ca_pem else {
        return Err((TlsFailure::BadCa, "no CA to verify against".into()));
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| (TlsFailure::BadCa, format!("the CA is not PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| (TlsFailure::BadCa, format!("the CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err((TlsFailure::BadCa, "the CA holds no certificate".to_string()));
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// A failed handshake's kind, from rustls' error inside the I/O error.
fn classify(e: &std::io::Error) -> (TlsFailure, String) {
    let detail = e.to_string();
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return (TlsFailure::Other, detail);
    };
    let kind = match tls {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                TlsFailure::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TlsFailure::NotYetValid
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsFailure::UnknownCa
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsFailure::NameMismatch
            }
            _ => TlsFailure::Other,
        },
        _ => TlsFailure::Other,
    };
    (kind, detail)
}

/// `insecure-skip-tls-verify`: any certificate is accepted (as the kubelet would), the
/// handshake's signatures are still checked.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
