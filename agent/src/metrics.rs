//! `/metrics`: one snapshot encoded once with `prometheus-client` (OpenMetrics text).
//!
//! Families: `node_doctor_build_info{version}`, `node_doctor_finding{collector,id,severity,subject}`
//! (1 per active finding; `subject` keeps series unique when a rule fires for several mount
//! points or pids), `node_doctor_collector_up{collector}`,
//! `node_doctor_collector_duration_seconds{collector}`, and every [`collectors::Metric`] the
//! collectors returned, grouped by name. A family whose samples disagree on the kind, or
//! whose name or label names are not valid Prometheus names, is dropped (and logged once
//! per snapshot at debug level) rather than break the scrape.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use collectors::{Metric, MetricKind};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::state::Snapshot;

/// The `Content-Type` of [`encode_snapshot`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter<f64, AtomicU64>>;

fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label(s: &str) -> bool {
    valid_name(s) && !s.contains(':') && !s.starts_with("__")
}

/// prometheus-client appends the full stop itself.
fn help(h: &str) -> String {
    h.trim_end_matches('.').to_string()
}

/// Encodes one snapshot as OpenMetrics text.
pub fn encode_snapshot(snap: &Snapshot) -> String {
    let mut reg = Registry::default();

    let build = GaugeFamily::default();
    build
        .get_or_create(&vec![(
            "version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        )])
        .set(1.0);
    reg.register(
        "node_doctor_build_info",
        "node-doctor build; the value is always 1",
        build,
    );

    let finding = GaugeFamily::default();
    for a in &snap.findings {
        let f = &a.finding;
        finding
            .get_or_create(&vec![
                ("collector".to_string(), f.collector.clone()),
                ("id".to_string(), f.id.clone()),
                ("severity".to_string(), f.severity.as_str().to_string()),
                ("subject".to_string(), f.subject.clone()),
            ])
            .set(1.0);
    }
    reg.register(
        "node_doctor_finding",
        "Active finding (1 per finding; subject tells apart several findings of one rule)",
        finding,
    );

    let up = GaugeFamily::default();
    let duration = GaugeFamily::default();
    for c in &snap.collectors {
        let labels = vec![("collector".to_string(), c.name.clone())];
        up.get_or_create(&labels)
            .set(if c.up() { 1.0 } else { 0.0 });
        if let Some(d) = c.duration {
            duration.get_or_create(&labels).set(d.as_secs_f64());
        }
    }
    reg.register(
        "node_doctor_collector_up",
        "1 when the collector's latest run read the host (status ok or degraded), else 0",
        up,
    );
    reg.register(
        "node_doctor_collector_duration_seconds",
        "Wall time of the collector's latest run",
        duration,
    );

    // Collector metrics, grouped by name.
    let mut groups: BTreeMap<&str, Vec<&Metric>> = BTreeMap::new();
    for c in &snap.collectors {
        for m in &c.metrics {
            groups.entry(m.name.as_str()).or_default().push(m);
        }
    }
    for (name, samples) in groups {
        let kind = samples[0].kind;
        let ok = valid_name(name)
            && !name.starts_with("node_doctor_finding")
            && !name.starts_with("node_doctor_collector_")
            && !name.starts_with("node_doctor_build_info")
            && samples.iter().all(|m| {
                m.kind == kind && m.labels.iter().all(|(k, _)| valid_label(k)) && !m.value.is_nan()
            });
        if !ok {
            tracing::debug!(metric = name, "dropping an invalid metric family");
            continue;
        }
        match kind {
            MetricKind::Gauge if samples.len() == 1 && samples[0].labels.is_empty() => {
                let g = Gauge::<f64, AtomicU64>::default();
                g.set(samples[0].value);
                reg.register(name, help(samples[0].help), g);
            }
            MetricKind::Gauge => {
                let fam = GaugeFamily::default();
                for m in &samples {
                    fam.get_or_create(&m.labels).set(m.value);
                }
                reg.register(name, help(samples[0].help), fam);
            }
            MetricKind::Counter => {
                if samples.iter().any(|m| m.value < 0.0) {
                    continue;
                }
                // The encoder appends `_total` itself.
                let base = name.strip_suffix("_total").unwrap_or(name);
                if samples.len() == 1 && samples[0].labels.is_empty() {
                    let c = Counter::<f64, AtomicU64>::default();
                    c.inc_by(samples[0].value);
                    reg.register(base, help(samples[0].help), c);
                    continue;
                }
                let fam = CounterFamily::default();
                for m in &samples {
                    fam.get_or_create(&m.labels).inc_by(m.value);
                }
                reg.register(base, help(samples[0].help), fam);
            }
        }
    }

    // The Kubernetes reporter's families, when it runs (`serve --kube-report`).
    crate::kube::stats::register_metrics(&mut reg);

    let mut out = String::with_capacity(4096);
    if encode(&mut out, &reg).is_err() {
        // Writing into a String cannot fail.
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::{finding, with};
    use crate::scheduler::{Outcome, RunReport};
    use crate::state::State;
    use collectors::{Collection, Severity, Status};
    use std::time::Duration;
    use time::OffsetDateTime;

    fn snapshot(extra: Vec<Metric>) -> Snapshot {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new("n", &names);
        let mut c = with(
            Status::Ok,
            vec![
                finding("disk.filesystem_full", "/", Severity::Critical),
                finding("disk.filesystem_full", "/var/lib/docker", Severity::Warning),
            ],
        );
        c.metrics = extra;
        let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::Completed(c),
                duration: Duration::from_millis(250),
            },
            t0,
        );
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::Completed(Collection::unavailable("no loadavg")),
                duration: Duration::from_millis(1),
            },
            t0,
        );
        st.snapshot(t0)
    }

    #[test]
    fn encodes_core_families_and_collector_metrics() {
        let text = encode_snapshot(&snapshot(vec![
            Metric::gauge("node_doctor_disk_avail_bytes", "Available bytes.", 10.0)
                .label("mountpoint", "/"),
            Metric::gauge("node_doctor_disk_avail_bytes", "Available bytes.", 20.0)
                .label("mountpoint", "/data"),
            Metric::counter("node_doctor_disk_errors_total", "Errors.", 3.0),
        ]));
        for want in [
            "# TYPE node_doctor_build_info gauge",
            &format!(
                "node_doctor_build_info{{version=\"{}\"}} 1.0",
                env!("CARGO_PKG_VERSION")
            ),
            "node_doctor_finding{collector=\"disk\",id=\"disk.filesystem_full\",severity=\"critical\",subject=\"/\"} 1.0",
            "node_doctor_finding{collector=\"disk\",id=\"disk.filesystem_full\",severity=\"warning\",subject=\"/var/lib/docker\"} 1.0",
            "node_doctor_collector_up{collector=\"disk\"} 1.0",
            "node_doctor_collector_up{collector=\"load\"} 0.0",
            "node_doctor_collector_duration_seconds{collector=\"disk\"} 0.25",
            "# HELP node_doctor_disk_avail_bytes Available bytes.",
            "node_doctor_disk_avail_bytes{mountpoint=\"/data\"} 20.0",
            "# TYPE node_doctor_disk_errors counter",
            "node_doctor_disk_errors_total 3.0",
            "# EOF",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains(".."), "help gets one full stop");
    }

    #[test]
    fn invalid_or_conflicting_families_are_dropped() {
        let text = encode_snapshot(&snapshot(vec![
            Metric::gauge("bad name", "x", 1.0),
            Metric::gauge("node_doctor_x", "x", 1.0),
            Metric::counter("node_doctor_x", "x", 1.0),
            Metric::gauge("node_doctor_y", "y", 1.0).label("bad-label", "v"),
            Metric::gauge("node_doctor_collector_up", "spoof", 1.0),
            Metric::gauge("node_doctor_ok", "ok", 2.0),
        ]));
        assert!(!text.contains("bad name"));
        assert!(!text.contains("node_doctor_x"));
        assert!(!text.contains("node_doctor_y"));
        assert!(!text.contains("spoof"));
        assert!(text.contains("node_doctor_ok 2.0"), "{text}");
    }
}
