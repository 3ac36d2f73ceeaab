//! The `dns` collector's rules: a server that does not answer pods' queries, one that answers
//! with an error for a name every cluster has, answers lost on the first try (the 5-second
//! delay of handbook 002, tied to the host's conntrack race counters), and slow answers. The
//! words are `collectors/rules/dns.toml`'s.

use crate::finding::Severity;
use crate::rules::Draft;

use super::probe::rcode_name;
use super::sample::{DnsSample, DomainSource, Role, Server};
use super::thresholds::Thresholds;

pub fn judge(sample: &DnsSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for s in &sample.servers {
        out.extend(no_answer(sample, s));
        out.extend(error(sample, s));
        out.extend(five_second_delay(sample, s, t));
        out.extend(slow(sample, s, t));
    }
    out
}

/// What every DNS finding says of its server.
fn base(id: &str, severity: Severity, sample: &DnsSample, s: &Server) -> Draft {
    Draft::new(id, severity)
        .subject(s.addr.to_string())
        .evidence("server", s.addr.ip().to_string())
        .evidence("port", u32::from(s.addr.port()))
        .evidence("role", s.role.as_str())
        .evidence("name", sample.name.as_str())
        .when_if("node_local", s.role == Role::NodeLocal)
        .when_if("cluster_dns", s.role == Role::ClusterDns)
}

/// Neither UDP query of the latest probe was answered, on either try.
fn no_answer(sample: &DnsSample, s: &Server) -> Option<Draft> {
    let r = &s.latest;
    if r.udp_answered || r.failed.is_some() {
        return None;
    }
    let races = sample.races.filter(|c| c.insert_failed > 0 || c.drop > 0);
    Some(
        base("dns.no_answer", Severity::Critical, sample, s)
            .evidence(
                "try_timeout_ms",
                sample.try_timeout.as_millis().min(u128::from(u64::MAX)) as u64,
            )
            .evidence("tcp", r.tcp.unwrap_or("not_asked"))
            .evidence("unanswered_probes", s.window.unanswered)
            .evidence("window_probes", s.window.rounds)
            .evidence_opt("insert_failed", races.map(|c| c.insert_failed))
            .evidence_opt("conntrack_drop", races.map(|c| c.drop))
            .when_if("refused", r.refused)
            .when_if("tcp_answers", r.tcp == Some("answered"))
            .when_if("races", races.is_some()),
    )
}

/// An answer with an error code for `kubernetes.default.svc.<domain>`, which exists in every
/// cluster.
fn error(sample: &DnsSample, s: &Server) -> Option<Draft> {
    let rcode = s.latest.error_rcode?;
    let name = rcode_name(rcode);
    let guessed = sample.domain_source == DomainSource::Default;
    // An NXDOMAIN for a domain we guessed may be our guess's fault: a warning.
    let severity = if rcode == 3 && guessed {
        Severity::Warning
    } else {
        Severity::Critical
    };
    Some(
        base("dns.error", severity, sample, s)
            .evidence("rcode", name)
            .when_if("servfail", rcode == 2)
            .when_if("nxdomain", rcode == 3)
            .when_if("refused_rcode", rcode == 5)
            .when_if("other_rcode", !matches!(rcode, 2 | 3 | 5))
            .when_if("domain_default", guessed),
    )
}

/// Answers that came only on the second try, in enough probes of the window: a pod's
/// resolver waits its whole `timeout:` (5 s with glibc's defaults) each time.
fn five_second_delay(sample: &DnsSample, s: &Server, t: &Thresholds) -> Option<Draft> {
    let w = &s.window;
    if w.retried < t.delay_min_probes.max(1) {
        return None;
    }
    let races = sample.races.filter(|c| c.insert_failed > 0 || c.drop > 0);
    // Most losses took one packet of the pair: the mark of the conntrack insert race.
    let pair = w.pair_lost * 2 >= w.retried;
    Some(
        base("dns.five_second_delay", Severity::Warning, sample, s)
            .evidence("retried_probes", w.retried)
            .evidence("pair_lost_probes", w.pair_lost)
            .evidence("window_probes", w.rounds)
            .evidence(
                "try_timeout_ms",
                sample.try_timeout.as_millis().min(u128::from(u64::MAX)) as u64,
            )
            .evidence_opt("insert_failed", races.map(|c| c.insert_failed))
            .evidence_opt("conntrack_drop", races.map(|c| c.drop))
            .var("delay_min_probes", t.delay_min_probes)
            .when_if("pair_race", pair)
            .when_if("races", races.is_some()),
    )
}

/// The window's median first-try answer time at or above the threshold.
fn slow(sample: &DnsSample, s: &Server, t: &Thresholds) -> Option<Draft> {
    let w = &s.window;
    let median = w.median_latency?;
    if w.answered_first < t.slow_min_probes.max(1) || median.as_millis() < u128::from(t.slow_ms) {
        return None;
    }
    Some(
        base("dns.slow", Severity::Warning, sample, s)
            .evidence("median_ms", median.as_secs_f64() * 1000.0)
            .evidence("answered_probes", w.answered_first)
            .evidence("slow_ms", t.slow_ms),
    )
}

#[cfg(test)]
mod tests;
