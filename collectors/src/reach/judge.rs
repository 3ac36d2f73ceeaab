//! The reach rules: a typed [`ReachSample`] -> drafts (id, severity, subject, evidence,
//! conditions) under the [`Thresholds`]. Their words are in `collectors/rules/reach.toml`.
//! Pure: testable without a network.
//!
//! - `reach.kube_proxy_not_answering`: kube-proxy runs, but its `/healthz` refuses, stays
//!   silent or answers something else than kube-proxy's 200/503.
//! - `reach.kube_proxy_unhealthy`: its `/healthz` answers 503: rule changes are queued and
//!   not applied within its health timeout (not when the node is being deleted:
//!   `nodeEligible: false`). Evidence: the age of its last sync, by kube-proxy's clock.
//! - `reach.api_server_unreachable`: the kubelet's API server refused, had no route, did not
//!   resolve or did not answer, in `api_failures` probes in a row.
//! - `reach.api_server_tls_failed`: the TCP connection was made, the TLS handshake failed
//!   (expired or not-yet-valid certificate, unknown CA, name mismatch).
//! - `reach.api_server_slow`: connect or handshake over its threshold in `api_slow_probes`
//!   probes in a row.

use std::time::Duration;

use crate::finding::Severity;
use crate::rules::Draft;

use super::probe::{Outcome, TlsFailure};
use super::sample::{ApiProbed, ApiReach, KubeProxyReach, ReachSample};
use super::thresholds::Thresholds;

/// The subject of the kube-proxy findings.
const KUBE_PROXY: &str = "kube-proxy";

/// Applies the reach rules.
pub fn judge(sample: &ReachSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(kube_proxy(&sample.kube_proxy, t));
    if let ApiReach::Probed(p) = &sample.api_server {
        out.extend(api_server(p, t));
    }
    out
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn kube_proxy(k: &KubeProxyReach, t: &Thresholds) -> Option<Draft> {
    let KubeProxyReach::Probed { pid, addr, answer } = k else {
        return None;
    };
    let base = |id: &str, sev: Severity| {
        Draft::new(id, sev)
            .subject(KUBE_PROXY)
            .evidence("pid", *pid)
            .evidence("addr", addr.to_string())
            .var("port", u64::from(addr.port()))
    };
    match (&answer.outcome, answer.status) {
        (Outcome::Connected { .. }, Some(200)) => None,
        (Outcome::Connected { .. }, Some(503)) => {
            let body = answer.body.as_ref();
            // A node being deleted (or tainted for deletion) answers 503 on purpose.
            if body.and_then(|b| b.node_eligible) == Some(false) {
                return None;
            }
            let age = body.and_then(|b| b.sync_age_seconds());
            let never = body.is_some_and(|b| b.never_synced());
            let critical = age.is_some_and(|a| a >= t.kube_proxy_stale_critical_seconds as f64);
            let sev = if critical {
                Severity::Critical
            } else {
                Severity::Warning
            };
            Some(
                base("reach.kube_proxy_unhealthy", sev)
                    .evidence("status", 503u64)
                    .evidence_opt("sync_age_seconds", age.map(|a| a.round()))
                    .evidence(
                        "stale_critical_seconds",
                        t.kube_proxy_stale_critical_seconds,
                    )
                    .when_if("never_synced", never),
            )
        }
        (Outcome::Connected { .. }, status) => Some(
            base("reach.kube_proxy_not_answering", Severity::Warning)
                .evidence("outcome", "bad_answer")
                .evidence_opt("status", status.map(u64::from))
                .when("bad_answer"),
        ),
        (o @ (Outcome::Refused | Outcome::Timeout { .. } | Outcome::BadAnswer { .. }), _) => {
            let (cond, after) = match o {
                Outcome::Refused => ("refused", None),
                Outcome::Timeout { after, .. } => ("timeout", Some(ms(*after))),
                _ => ("bad_answer", None),
            };
            Some(
                base("reach.kube_proxy_not_answering", Severity::Warning)
                    .evidence("outcome", o.as_str())
                    .evidence_opt("waited_ms", after)
                    .when(cond),
            )
        }
        // No route to a loopback or own address, a name, a probe that could not try: the
        // collector's status says so; no finding about kube-proxy.
        _ => None,
    }
}

fn api_server(p: &ApiProbed, t: &Thresholds) -> Option<Draft> {
    let address = if p.host.contains(':') {
        format!("[{}]:{}", p.host, p.port)
    } else {
        format!("{}:{}", p.host, p.port)
    };
    let base = |id: &str, sev: Severity| {
        Draft::new(id, sev)
            .subject(p.server.clone())
            .evidence("server", p.server.clone())
            .evidence("address", address.clone())
            .evidence("host", p.host.clone())
            .evidence("server_name", p.server_name.clone())
            .evidence("kubeconfig", p.kubeconfig.clone())
    };
    match &p.answer.outcome {
        o @ (Outcome::Refused
        | Outcome::NoRoute { .. }
        | Outcome::NotResolved { .. }
        | Outcome::Timeout { .. }) => {
            if p.failures_in_row < t.api_failures.max(1) {
                return None;
            }
            let (cond, detail, waited) = match o {
                Outcome::Refused => ("refused", None, None),
                Outcome::NoRoute { detail } => ("no_route", Some(detail.clone()), None),
                Outcome::NotResolved { detail } => ("not_resolved", Some(detail.clone()), None),
                Outcome::Timeout { after, connected } => (
                    if *connected { "silent" } else { "timeout" },
                    None,
                    Some(ms(*after)),
                ),
                _ => return None,
            };
            Some(
                base("reach.api_server_unreachable", Severity::Critical)
                    .evidence("outcome", o.as_str())
                    .evidence("failed_probes", p.failures_in_row)
                    .evidence_opt("detail", detail)
                    .evidence_opt("waited_ms", waited)
                    .when(cond),
            )
        }
        Outcome::Tls {
            connect,
            kind,
            detail,
        } => {
            let cond = match kind {
                TlsFailure::Expired => "expired",
                TlsFailure::NotYetValid => "not_yet_valid",
                TlsFailure::UnknownCa => "unknown_ca",
                TlsFailure::NameMismatch => "name_mismatch",
                TlsFailure::BadCa => "bad_ca",
                TlsFailure::Other => "other",
            };
            Some(
                base("reach.api_server_tls_failed", Severity::Critical)
                    .evidence("tls_error", kind.as_str())
                    .evidence("detail", detail.clone())
                    .evidence("connect_ms", ms(*connect))
                    .when(cond),
            )
        }
        Outcome::Connected { connect } => {
            let handshake = p.answer.handshake.unwrap_or_default();
            let slow_connect = ms(*connect) >= t.api_connect_slow_ms;
            let slow_handshake = ms(handshake) >= t.api_handshake_slow_ms;
            if !(slow_connect || slow_handshake) || p.slow_in_row < t.api_slow_probes.max(1) {
                return None;
            }
            Some(
                base("reach.api_server_slow", Severity::Warning)
                    .evidence("connect_ms", ms(*connect))
                    .evidence("handshake_ms", ms(handshake))
                    .evidence("connect_threshold_ms", t.api_connect_slow_ms)
                    .evidence("handshake_threshold_ms", t.api_handshake_slow_ms)
                    .evidence("slow_probes", p.slow_in_row)
                    .when_if("slow_connect", slow_connect)
                    .when_if("slow_handshake", slow_handshake),
            )
        }
        Outcome::BadAnswer { .. } | Outcome::Failed(_) => None,
    }
}

/// Whether an answer counts as slow under `t` (for the collector's count of slow probes).
pub fn is_slow(p: &ApiProbed, t: &Thresholds) -> bool {
    match p.answer.outcome {
        Outcome::Connected { connect } => {
            ms(connect) >= t.api_connect_slow_ms
                || ms(p.answer.handshake.unwrap_or_default()) >= t.api_handshake_slow_ms
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
