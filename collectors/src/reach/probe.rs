//! The seam between the `reach` collector and the network: the collector decides *what* to
//! probe (a [`ReachPlan`]: kube-proxy's `/healthz`, the API server's TLS port, one deadline)
//! and judges the typed answers ([`ReachReport`]); *how* (TCP, HTTP/1.1, TLS) is the agent's
//! (`agent/src/reach_probe.rs`), which alone knows tokio, hyper and rustls. Scenario tests
//! inject a fake probe.
//!
//! Every probe is read-only and small: one `GET /healthz` to kube-proxy on the node itself,
//! and one TCP connect plus a TLS handshake to the API server (no client certificate, no HTTP
//! request). Targets are asked concurrently, each within [`ReachPlan::timeout`].

use std::net::SocketAddr;
use std::time::Duration;

/// Probes the node's control paths. Implemented by the agent and by the scenario tests' fake.
pub trait ReachProbe: Send + Sync + std::fmt::Debug {
    /// One answer per target of `plan`, in the same order, within about `plan.timeout`.
    fn probe(&self, plan: &ReachPlan) -> ReachReport;
}

/// What to probe in one collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachPlan {
    pub targets: Vec<ReachTarget>,
    /// The deadline of each target (connect, handshake and answer together).
    pub timeout: Duration,
}

/// One control path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReachTarget {
    /// kube-proxy's `GET /healthz` over HTTP/1.1 (loopback for a wildcard bind).
    KubeProxyHealthz { addr: SocketAddr },
    /// The API server: a TCP connect to `host:port` (a name is resolved by the agent), then a
    /// TLS handshake offering `server_name` and verifying the certificate chain against
    /// `ca_pem` (the system's roots when `None`), unless `insecure`.
    ApiServer {
        host: String,
        port: u16,
        server_name: String,
        ca_pem: Option<Vec<u8>>,
        insecure: bool,
    },
}

/// The answers, in the order of [`ReachPlan::targets`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReachReport {
    pub replies: Vec<ReachReply>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReachReply {
    Healthz(HealthzAnswer),
    Api(ApiAnswer),
}

impl ReachReport {
    pub fn healthz(&self, i: usize) -> Option<&HealthzAnswer> {
        match self.replies.get(i) {
            Some(ReachReply::Healthz(h)) => Some(h),
            _ => None,
        }
    }

    pub fn api(&self, i: usize) -> Option<&ApiAnswer> {
        match self.replies.get(i) {
            Some(ReachReply::Api(a)) => Some(a),
            _ => None,
        }
    }
}

/// How reaching a target went, up to the point where it stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Connected after `connect`; the exchange after it (an HTTP answer, a TLS handshake)
    /// completed (its figures are in the answer).
    Connected { connect: Duration },
    /// The connection was refused (`ECONNREFUSED`): nothing listens there.
    Refused,
    /// No route (`EHOSTUNREACH`, `ENETUNREACH`), or the network refused it another way.
    NoRoute { detail: String },
    /// The server's name did not resolve.
    NotResolved { detail: String },
    /// No answer before the deadline: `connected` tells a silent listener (or a silent TLS
    /// peer) from a connect that never completed (packets dropped).
    Timeout { after: Duration, connected: bool },
    /// Connected after `connect`, but the TLS handshake failed.
    Tls {
        connect: Duration,
        kind: TlsFailure,
        detail: String,
    },
    /// Connected, but what came back is not the protocol's answer (`detail` is bounded).
    BadAnswer { detail: String },
    /// The probe could not try (no socket, another OS error).
    Failed(String),
}

/// Why a TLS handshake failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server's certificate has expired (by this node's clock).
    Expired,
    /// The server's certificate is not valid yet (by this node's clock).
    NotYetValid,
    /// Its chain does not lead to the CA of the kubeconfig.
    UnknownCa,
    /// The certificate does not carry the server's name or address.
    NameMismatch,
    /// The kubeconfig's CA could not be used (not PEM, no certificate in it).
    BadCa,
    /// Anything else (a protocol alert, a revoked certificate, a handshake the peer broke).
    Other,
}

impl TlsFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsFailure::Expired => "certificate_expired",
            TlsFailure::NotYetValid => "certificate_not_yet_valid",
            TlsFailure::UnknownCa => "unknown_ca",
            TlsFailure::NameMismatch => "name_mismatch",
            TlsFailure::BadCa => "bad_ca",
            TlsFailure::Other => "other",
        }
    }
}

impl Outcome {
    /// A short name for metrics and evidence.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Connected { .. } => "connected",
            Outcome::Refused => "refused",
            Outcome::NoRoute { .. } => "no_route",
            Outcome::NotResolved { .. } => "not_resolved",
            Outcome::Timeout { .. } => "timeout",
            Outcome::Tls { .. } => "tls_error",
            Outcome::BadAnswer { .. } => "bad_answer",
            Outcome::Failed(_) => "failed",
        }
    }

    /// The connect time, when the connection was made.
    pub fn connect(&self) -> Option<Duration> {
        match self {
            Outcome::Connected { connect } | Outcome::Tls { connect, .. } => Some(*connect),
            _ => None,
        }
    }
}

/// kube-proxy's `/healthz`.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthzAnswer {
    pub outcome: Outcome,
    /// The HTTP status, when one came back (200 healthy, 503 not).
    pub status: Option<u16>,
    /// The JSON body ([`parse_healthz_body`]), when it parsed.
    pub body: Option<HealthzBody>,
}

/// The API server's TLS port.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiAnswer {
    pub outcome: Outcome,
    /// The TLS handshake's duration, when it completed.
    pub handshake: Option<Duration>,
}

/// A time of kube-proxy's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stamp {
    /// Go's zero time (`0001-01-01 00:00:00 +0000 UTC`): never set.
    Zero,
    /// Seconds since the Unix epoch.
    At(f64),
}

/// The body of kube-proxy's `/healthz` (`pkg/proxy/healthcheck/proxier_health.go`):
/// `{"lastUpdated": "<time>","currentTime": "<time>", "nodeEligible": <bool>}`, the times in
/// Go's `time.Time.String()` form (`2024-05-01 10:00:00.123456789 +0000 UTC m=+3600.1`).
/// On a 200 kube-proxy reports `lastUpdated` = `currentTime`; on a 503 `lastUpdated` is the
/// last successful sync of its rules (zero when none since it started). `nodeEligible`
/// (kube-proxy 1.28+) is false when the node is being deleted or tainted
/// `ToBeDeletedByClusterAutoscaler`: a 503 then drains load balancers, it is not a fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthzBody {
    pub last_updated: Option<Stamp>,
    pub current_time: Option<Stamp>,
    pub node_eligible: Option<bool>,
}

impl HealthzBody {
    /// `currentTime − lastUpdated` in seconds: both from kube-proxy's own clock, so this
    /// node's clock error does not enter. `None` when either is missing or never set.
    pub fn sync_age_seconds(&self) -> Option<f64> {
        match (self.last_updated?, self.current_time?) {
            (Stamp::At(last), Stamp::At(now)) => Some((now - last).max(0.0)),
            _ => None,
        }
    }

    /// kube-proxy has not synced its rules once since it started.
    pub fn never_synced(&self) -> bool {
        self.last_updated == Some(Stamp::Zero)
    }
}

/// Parses kube-proxy's `/healthz` body (bounded by the caller). Unknown keys are ignored; a
/// time that does not parse is `None`.
pub fn parse_healthz_body(body: &[u8]) -> Result<HealthzBody, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    let stamp = |k: &str| v.get(k).and_then(|t| t.as_str()).and_then(parse_go_time);
    Ok(HealthzBody {
        last_updated: stamp("lastUpdated"),
        current_time: stamp("currentTime"),
        node_eligible: v.get("nodeEligible").and_then(|b| b.as_bool()),
    })
}

/// A time in Go's `time.Time.String()` form (`2006-01-02 15:04:05.999999999 -0700 MST`,
/// with an optional monotonic `m=±s`) or RFC 3339.
pub fn parse_go_time(s: &str) -> Option<Stamp> {
    let s = s.trim();
    let (date, rest) = s.split_at_checked(10)?;
    let rest = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('T'))?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let mo: u32 = d.next()?.parse().ok()?;
    let da: u32 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    // The clock part runs to the first space, `Z`, `+` or `-`.
    let end = rest.find([' ', 'Z', '+', '-']).unwrap_or(rest.len());
    let (clock, zone) = rest.split_at(end);
    let (hms, frac) = match clock.split_once('.') {
        Some((a, f)) => (a, f),
        None => (clock, ""),
    };
    let mut t = hms.split(':');
    let h: u32 = t.next()?.parse().ok()?;
    let mi: u32 = t.next()?.parse().ok()?;
    let se: u32 = t.next()?.parse().ok()?;
    if t.next().is_some() || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let frac = if frac.is_empty() {
        0.0
    } else if frac.len() <= 9 && frac.bytes().all(|b| b.is_ascii_digit()) {
        format!("0.{frac}").parse::<f64>().ok()?
    } else {
        return None;
    };
    let zone = zone.trim_start();
    let offset = if zone.starts_with('Z') {
        0
    } else {
        let sign = match zone.as_bytes().first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let digits: String = zone[1..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ':')
            .filter(|c| *c != ':')
            .collect();
        if digits.len() != 4 {
            return None;
        }
        let oh: i64 = digits[..2].parse().ok()?;
        let om: i64 = digits[2..].parse().ok()?;
        sign * (oh * 3600 + om * 60)
    };
    if y == 1 && mo == 1 && da == 1 && h == 0 && mi == 0 && se == 0 && offset == 0 {
        return Some(Stamp::Zero);
    }
    let days = days_from_civil(y, mo, da);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + se) - offset;
    Some(Stamp::At(secs as f64 + frac))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_times() {
        // 2024-05-01T10:00:00Z is 1714557600.
        assert_eq!(
            parse_go_time("2024-05-01 10:00:00.5 +0000 UTC m=+3600.000000001"),
            Some(Stamp::At(1_714_557_600.5))
        );
        assert_eq!(
            parse_go_time("2024-05-01 12:00:00 +0200 CEST"),
            Some(Stamp::At(1_714_557_600.0))
        );
        assert_eq!(
            parse_go_time("2024-05-01T10:00:00Z"),
            Some(Stamp::At(1_714_557_600.0))
        );
        assert_eq!(
            parse_go_time("2024-05-01T05:30:00-04:30"),
            Some(Stamp::At(1_714_557_600.0))
        );
        assert_eq!(
            parse_go_time("0001-01-01 00:00:00 +0000 UTC"),
            Some(Stamp::Zero)
        );
        assert_eq!(
            parse_go_time("1970-01-01 00:00:00 +0000 UTC"),
            Some(Stamp::At(0.0))
        );
        for bad in [
            "",
            "yesterday",
            "2024-13-01 00:00:00 +0000 UTC",
            "2024-05-01 25:00:00 +0000",
            "2024-05-01 10:00:00 UTC",
        ] {
            assert_eq!(parse_go_time(bad), None, "{bad}");
        }
    }

    /// Bodies as kube-proxy 1.29 writes them (`fmt.Fprintf` of `%q` times).
    #[test]
    fn healthz_bodies() {
        let ok = br#"{"lastUpdated": "2024-05-01 10:00:00.123 +0000 UTC m=+86400.5","currentTime": "2024-05-01 10:00:00.123 +0000 UTC m=+86400.5", "nodeEligible": true}"#;
        let b = parse_healthz_body(ok).unwrap();
        assert_eq!(b.sync_age_seconds(), Some(0.0));
        assert_eq!(b.node_eligible, Some(true));
        let stale = br#"{"lastUpdated": "2024-05-01 09:50:00 +0000 UTC m=+85800.1","currentTime": "2024-05-01 10:00:00 +0000 UTC m=+86400.2", "nodeEligible": true}"#;
        assert_eq!(
            parse_healthz_body(stale).unwrap().sync_age_seconds(),
            Some(600.0)
        );
        let never = br#"{"lastUpdated": "0001-01-01 00:00:00 +0000 UTC","currentTime": "2024-05-01 10:00:00 +0000 UTC m=+5.0"}"#;
        let b = parse_healthz_body(never).unwrap();
        assert!(b.never_synced());
        assert_eq!(b.sync_age_seconds(), None);
        assert_eq!(b.node_eligible, None);
        assert!(parse_healthz_body(b"ok").is_err());
        assert!(parse_healthz_body(b"[1]").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*") {
            let _ = parse_go_time(&s);
            let _ = parse_healthz_body(s.as_bytes());
        }

        /// kube-proxy's `/healthz` body with its times in Go's `time.Time.String()` form
        /// (any zone, nanoseconds with trailing zeros cut, the monotonic reading or not) or
        /// RFC 3339: each time reads back as the instant it was built from.
        #[test]
        fn reads_the_times_kube_proxy_writes(
            [last, now] in proptest::array::uniform2(0i64..4_102_444_800),
            [last_ns, now_ns] in proptest::array::uniform2(0u32..1_000_000_000),
            offset_hours in -12i8..=14,
            never in proptest::bool::ANY,
            rfc in proptest::bool::ANY,
            eligible in proptest::option::of(proptest::bool::ANY),
        ) {
            let frac = |ns: u32| if ns == 0 { String::new() } else { format!(".{ns:09}").trim_end_matches('0').to_string() };
            let go = |t: i64, ns: u32| {
                let tz = jiff::tz::TimeZone::fixed(jiff::tz::offset(offset_hours));
                let dt = tz.to_datetime(jiff::Timestamp::from_second(t).unwrap_or_default());
                let sign = if offset_hours < 0 { '-' } else { '+' };
                let h = offset_hours.unsigned_abs();
                // Go names a zone without an abbreviation by its offset (`+08`).
                let abbr = if offset_hours == 0 { "UTC".to_string() } else { format!("{sign}{h:02}") };
                format!("{} {}{} {sign}{h:02}00 {abbr} m=+3600.012345678", dt.date(), dt.time().strftime("%H:%M:%S"), frac(ns))
            };
            let show = |t: i64, ns: u32| if rfc { crate::testgen::rfc3339(t, &frac(ns), offset_hours, true) } else { go(t, ns) };
            let at = |t: i64, ns: u32| Stamp::At(t as f64 + format!("0{}", frac(ns)).parse::<f64>().unwrap_or(0.0));
            let (last_text, last_want) = if never {
                ("0001-01-01 00:00:00 +0000 UTC".to_string(), Stamp::Zero)
            } else {
                (show(last, last_ns), at(last, last_ns))
            };
            let mut body = serde_json::json!({"lastUpdated": last_text, "currentTime": show(now, now_ns)});
            if let Some(e) = eligible {
                body["nodeEligible"] = e.into();
            }
            let want = HealthzBody { last_updated: Some(last_want), current_time: Some(at(now, now_ns)), node_eligible: eligible };
            proptest::prop_assert_eq!(parse_healthz_body(body.to_string().as_bytes()), Ok(want), "{}", body);
        }
    }
}
