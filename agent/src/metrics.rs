//! `/metrics`: one snapshot encoded once with `prometheus-client` (OpenMetrics text).
//!
//! Families: `node_doctor_build_info{version}`, `node_doctor_finding{collector,id,severity,subject}`
//! (1 per shown finding, active or clearing; `subject` keeps series unique when a rule fires
//! for several mount points or pids),
//! `node_doctor_finding_transitions_total{collector,id,transition}` (`raised`, `cleared`,
//! `suppressed`, `reraised` per rule since start: `reraised` counts flaps),
//! `node_doctor_collector_up{collector}`,
//! `node_doctor_collector_cpu_seconds_total{collector}` (CPU time of its runs, measured on
//! the thread that runs them), `node_doctor_collector_duration_seconds{collector}` (a
//! histogram of its runs' wall time), and every [`collectors::Metric`] the
//! collectors returned, grouped by name. A family whose samples disagree on the kind, or
//! whose name or label names are not valid Prometheus names, is dropped (and logged once
//! per snapshot at debug level) rather than break the scrape.
//!
//! [`with_process`] adds the agent's own process families at scrape time, the set every
//! Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`, `process_threads`, with client_golang's
//! HELP texts). `prometheus-client` has no process collector of its own; the figures come
//! from `/proc/self/stat` parsed by `procfs-core`, `getrlimit(RLIMIT_NOFILE)` and the entries
//! of `/proc/self/fd`, as client_golang reads them. This is the agent's own process, not the
//! host's, so it reads the agent's `/proc`, never `--host-root`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use hyper::body::Bytes;

use collectors::{Metric, MetricKind};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

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

/// A label value as exported: host text (a subject, a pod or mount name) without the
/// characters that act on a terminal or reader instead of being shown (C0 and C1 controls,
/// DEL, bidi overrides and isolates, line separators: [`collectors::sanitize::is_unsafe`]);
/// a Prometheus UI, `promtool` or an Alertmanager message prints label values as they are.
/// Nothing else is changed, so series stay the same for clean values.
pub fn label_value(s: &str) -> String {
    if s.chars().any(collectors::sanitize::is_unsafe) {
        s.chars()
            .filter(|c| !collectors::sanitize::is_unsafe(*c))
            .collect()
    } else {
        s.to_string()
    }
}

/// A collector metric's labels with their values made safe ([`label_value`]).
fn clean(l: &Labels) -> Labels {
    l.iter().map(|(k, v)| (k.clone(), label_value(v))).collect()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), label_value(v)))
        .collect()
}

/// Encodes one snapshot as OpenMetrics text; `links` gives the runbook of each finding.
pub fn encode_snapshot(snap: &Snapshot, links: &crate::links::Links) -> String {
    let mut reg = Registry::default();
    register_build_info(&mut reg);
    register_findings(&mut reg, snap);
    register_finding_info(&mut reg, snap, links);
    register_transitions(&mut reg, snap);
    register_collector_runs(&mut reg, snap);
    register_collector_metrics(&mut reg, snap);
    // The Kubernetes reporter's families, when it runs (`serve --kube-report`).
    crate::kube_stats::register_metrics(&mut reg);

    let mut out = String::with_capacity(4096);
    if encode(&mut out, &reg).is_err() {
        // Writing into a String cannot fail.
        out.clear();
    }
    out
}

/// `node_doctor_build_info{version}`.
fn register_build_info(reg: &mut Registry) {
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
}

/// `node_doctor_finding{collector,id,severity,subject}`, 1 per shown finding.
fn register_findings(reg: &mut Registry, snap: &Snapshot) {
    let finding = GaugeFamily::default();
    for a in &snap.findings {
        let f = &a.finding;
        finding
            .get_or_create(&labels(&[
                ("collector", &f.collector),
                ("id", &f.id),
                ("severity", f.severity.as_str()),
                ("subject", &f.subject),
            ]))
            .set(1.0);
    }
    reg.register(
        "node_doctor_finding",
        "Active finding (1 per finding; subject tells apart several findings of one rule)",
        finding,
    );
}

/// `node_doctor_finding_info{collector,id,subject,title,runbook}`, 1 per shown finding: what
/// the alerts print (the finding's title in its own words, the link to its rule's page),
/// looked up by the alert's annotations, so a title that changes with the finding's
/// conditions changes no alert's identity (manifests/overlays/prometheus-operator).
fn register_finding_info(reg: &mut Registry, snap: &Snapshot, links: &crate::links::Links) {
    let info = GaugeFamily::default();
    for a in &snap.findings {
        let f = &a.finding;
        info.get_or_create(&labels(&[
            ("collector", &f.collector),
            ("id", &f.id),
            ("subject", &f.subject),
            ("title", &f.title.en),
            ("runbook", &links.rule(&f.id)),
        ]))
        .set(1.0);
    }
    reg.register(
        "node_doctor_finding_info",
        "The title and the rule page of each active finding (value always 1; join on collector, id and subject)",
        info,
    );
}

/// Raises and clears per rule: how often each finding came and went (a flap counter).
fn register_transitions(reg: &mut Registry, snap: &Snapshot) {
    let transitions = CounterFamily::default();
    for ((collector, id), t) in &snap.transitions {
        for (kind, n) in [
            ("raised", t.raised),
            ("cleared", t.cleared),
            ("suppressed", t.suppressed),
            ("reraised", t.reraised),
        ] {
            transitions
                .get_or_create(&vec![
                    ("collector".to_string(), collector.clone()),
                    ("id".to_string(), id.clone()),
                    ("transition".to_string(), kind.to_string()),
                ])
                .inc_by(n as f64);
        }
    }
    reg.register(
        "node_doctor_finding_transitions",
        "Findings raised (shown after their rule's raise_after runs), cleared (after clear_after runs without them), suppressed (gone before they were raised) and reraised (raised again after they were cleared: flaps) since the agent started, per rule",
        transitions,
    );
}

/// Per collector: whether it is up, the CPU time and the wall time of its runs.
fn register_collector_runs(reg: &mut Registry, snap: &Snapshot) {
    let up = GaugeFamily::default();
    let cpu = CounterFamily::default();
    let mut durations = Histograms::default();
    for c in &snap.collectors {
        let labels = vec![("collector".to_string(), c.name.clone())];
        up.get_or_create(&labels)
            .set(if c.up() { 1.0 } else { 0.0 });
        cpu.get_or_create(&labels).inc_by(c.cost.cpu.as_secs_f64());
        durations.0.push((labels, c.cost.durations.clone()));
    }
    reg.register(
        "node_doctor_collector_up",
        "1 when the collector's latest run read the host (status ok or degraded), else 0",
        up,
    );
    reg.register_with_unit(
        "node_doctor_collector_cpu",
        "CPU time (user and system) the collector's runs spent since the agent started, measured on the thread that runs them",
        Unit::Seconds,
        cpu,
    );
    reg.register_with_unit(
        "node_doctor_collector_duration",
        "Wall time of the collector's runs (a timed-out run counts as its timeout)",
        Unit::Seconds,
        durations,
    );
}

/// The collectors' own metrics, grouped by name into families; an invalid family is dropped.
fn register_collector_metrics(reg: &mut Registry, snap: &Snapshot) {
    let mut groups: BTreeMap<&str, Vec<&Metric>> = BTreeMap::new();
    for c in &snap.collectors {
        for m in c.metrics.iter() {
            groups.entry(m.name.as_str()).or_default().push(m);
        }
    }
    for (name, samples) in groups {
        if !is_valid_family(name, &samples) {
            tracing::debug!(metric = name, "dropping an invalid metric family");
            continue;
        }
        register_family(reg, name, &samples);
    }
}

/// A family may be exported: a valid name that is not one of ours, one kind, valid label
/// names, no NaN.
fn is_valid_family(name: &str, samples: &[&Metric]) -> bool {
    let kind = samples[0].kind;
    valid_name(name)
        && !name.starts_with("node_doctor_finding")
        && !name.starts_with("node_doctor_collector_")
        && !name.starts_with("node_doctor_build_info")
        && samples.iter().all(|m| {
            m.kind == kind && m.labels.iter().all(|(k, _)| valid_label(k)) && !m.value.is_nan()
        })
}

/// One valid family of collector metrics (all of one kind): a lone unlabelled sample is
/// registered as a plain metric, else as a family; a counter with a negative value is left out.
fn register_family(reg: &mut Registry, name: &str, samples: &[&Metric]) {
    let help_text = help(samples[0].help);
    let lone = samples.len() == 1 && samples[0].labels.is_empty();
    match samples[0].kind {
        MetricKind::Gauge if lone => {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(samples[0].value);
            reg.register(name, help_text, g);
        }
        MetricKind::Gauge => {
            let fam = GaugeFamily::default();
            for m in samples {
                fam.get_or_create(&clean(&m.labels)).set(m.value);
            }
            reg.register(name, help_text, fam);
        }
        MetricKind::Counter => {
            if samples.iter().any(|m| m.value < 0.0) {
                return;
            }
            // The encoder appends `_total` itself.
            let base = name.strip_suffix("_total").unwrap_or(name);
            if lone {
                let c = Counter::<f64, AtomicU64>::default();
                c.inc_by(samples[0].value);
                reg.register(base, help_text, c);
                return;
            }
            let fam = CounterFamily::default();
            for m in samples {
                fam.get_or_create(&clean(&m.labels)).inc_by(m.value);
            }
            reg.register(base, help_text, fam);
        }
        MetricKind::Histogram => {
            let h = CollectorHistograms(
                samples
                    .iter()
                    .filter(|m| valid_buckets(&m.buckets))
                    .map(|m| CollectorHistogram {
                        labels: clean(&m.labels),
                        buckets: m.buckets.clone(),
                        sum: m.value,
                        count: m.count(),
                    })
                    .collect(),
            );
            if !h.0.is_empty() {
                reg.register(name, help_text, h);
            }
        }
    }
}

/// A collector histogram's buckets can be encoded: some, bounds rising, the last +Inf.
fn valid_buckets(b: &[(f64, u64)]) -> bool {
    b.last().is_some_and(|l| l.0 == f64::INFINITY) && b.windows(2).all(|w| w[0].0 < w[1].0)
}

/// A collector's histogram family ([`MetricKind::Histogram`]): per series its labels, its
/// buckets (upper bound, observations in that bucket alone), their sum and count.
#[derive(Debug, Default)]
struct CollectorHistograms(Vec<CollectorHistogram>);

/// One series of a [`CollectorHistograms`].
#[derive(Debug)]
struct CollectorHistogram {
    labels: Labels,
    /// Upper bound, observations in that bucket alone; the last bound +Inf.
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

impl prometheus_client::metrics::TypedMetric for CollectorHistograms {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

impl prometheus_client::encoding::EncodeMetric for CollectorHistograms {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        for h in &self.0 {
            // The encoder sums the counts into cumulative buckets; f64::MAX is its +Inf.
            let buckets: Vec<(f64, u64)> = h
                .buckets
                .iter()
                .map(|(le, n)| (if le.is_finite() { *le } else { f64::MAX }, *n))
                .collect();
            encoder
                .encode_family(&h.labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    h.sum, h.count, &buckets, None,
                )?;
        }
        Ok(())
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

/// One histogram family built from the snapshot's data (prometheus-client's own `Histogram`
/// is a live, lock-guarded recorder; the snapshot already holds the counts).
#[derive(Debug, Default)]
struct Histograms(Vec<(Labels, crate::state::Histogram)>);

impl prometheus_client::metrics::TypedMetric for Histograms {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

impl prometheus_client::encoding::EncodeMetric for Histograms {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        use crate::state::DURATION_BUCKETS;
        for (labels, h) in &self.0 {
            // The encoder sums the counts into cumulative buckets; f64::MAX is its +Inf.
            let buckets: Vec<(f64, u64)> = DURATION_BUCKETS
                .iter()
                .copied()
                .chain(std::iter::once(f64::MAX))
                .zip(h.counts.iter().copied())
                .collect();
            encoder
                .encode_family(labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    h.sum, h.count, &buckets, None,
                )?;
        }
        Ok(())
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        <Self as prometheus_client::metrics::TypedMetric>::TYPE
    }
}

/// The agent's own process, one reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSample {
    /// User and system CPU time.
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// The soft `RLIMIT_NOFILE`; `None` when unlimited (the series is left out).
    pub max_fds: Option<u64>,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
    pub threads: u64,
}

/// Facts of the kernel the agent runs on, which turn `/proc/self/stat`'s ticks and pages
/// into seconds and bytes. `sysconf` of the agent is right for them: the agent runs on the
/// host's kernel, whatever its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFacts {
    pub ticks_per_second: u64,
    pub page_size: u64,
    /// `btime` of `/proc/stat`, seconds since the Unix epoch.
    pub boot_time_secs: u64,
}

impl KernelFacts {
    /// `sysconf(_SC_CLK_TCK)`, `sysconf(_SC_PAGESIZE)` and `btime` of `<proc>/stat`.
    pub fn read(proc: &Path) -> anyhow::Result<KernelFacts> {
        use nix::unistd::{sysconf, SysconfVar};
        use procfs_core::FromReadSI;
        let conf = |v: SysconfVar| -> anyhow::Result<u64> {
            let n = sysconf(v)
                .with_context(|| format!("sysconf({v:?})"))?
                .with_context(|| format!("sysconf({v:?}) has no value"))?;
            u64::try_from(n)
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| format!("sysconf({v:?}) is {n}"))
        };
        let ticks_per_second = conf(SysconfVar::CLK_TCK)?;
        let page_size = conf(SysconfVar::PAGE_SIZE)?;
        let path = proc.join("stat");
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let si = procfs_core::ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second,
            page_size,
            is_little_endian: cfg!(target_endian = "little"),
        };
        let stat = procfs_core::KernelStats::from_read(text.as_slice(), &si)
            .map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?;
        Ok(KernelFacts {
            ticks_per_second,
            page_size,
            boot_time_secs: stat.btime,
        })
    }
}

/// Reads the agent's own process from `<proc>/self/stat` and `<proc>/self/fd`, and its
/// `RLIMIT_NOFILE`.
pub fn read_process(proc: &Path, k: &KernelFacts) -> anyhow::Result<ProcessSample> {
    use procfs_core::FromRead;
    let path = proc.join("self/stat");
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let stat = procfs_core::process::Stat::from_read(text.as_slice())
        .map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?;
    let fd_dir = proc.join("self/fd");
    // Counts the descriptor of the listing itself, as client_golang does.
    let open_fds = std::fs::read_dir(&fd_dir)
        .with_context(|| format!("listing {}", fd_dir.display()))?
        .count() as u64;
    let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .context("getrlimit(RLIMIT_NOFILE)")?;
    let tps = k.ticks_per_second as f64;
    Ok(ProcessSample {
        cpu_seconds: stat.utime.saturating_add(stat.stime) as f64 / tps,
        resident_bytes: stat.rss.saturating_mul(k.page_size),
        virtual_bytes: stat.vsize,
        open_fds,
        max_fds: (soft != nix::sys::resource::RLIM_INFINITY).then_some(soft),
        start_time_seconds: k.boot_time_secs as f64 + stat.starttime as f64 / tps,
        threads: u64::try_from(stat.num_threads).unwrap_or(0),
    })
}

/// The `process_*` families of one sample, OpenMetrics text without the closing `# EOF`.
/// The HTTP server's own family: `node_doctor_http_connections_shed_total{reason}`, every
/// reason from the start (at 0 until it happens).
pub fn encode_server() -> String {
    let mut reg = Registry::default();
    let shed = CounterFamily::default();
    for (reason, n) in crate::connections::SHED.counts() {
        shed.get_or_create(&vec![("reason".to_string(), reason.to_string())])
            .inc_by(n as f64);
    }
    reg.register(
        "node_doctor_http_connections_shed",
        "Connections the HTTP server closed on its own since the agent started: limit (the longest-idle one, to admit a new connection at the cap), no_request (nothing sent within the header timeout)",
        shed,
    );
    let mut out = String::new();
    if encode(&mut out, &reg).is_err() {
        out.clear();
    }
    out.strip_suffix("# EOF\n").unwrap_or(&out).to_string()
}

pub fn encode_process(p: &ProcessSample) -> String {
    let mut reg = Registry::default();
    let cpu = Counter::<f64, AtomicU64>::default();
    cpu.inc_by(p.cpu_seconds);
    reg.register_with_unit(
        "process_cpu",
        "Total user and system CPU time spent in seconds",
        Unit::Seconds,
        cpu,
    );
    let gauge = |v: u64| {
        let g = Gauge::<i64>::default();
        g.set(i64::try_from(v).unwrap_or(i64::MAX));
        g
    };
    reg.register_with_unit(
        "process_resident_memory",
        "Resident memory size in bytes",
        Unit::Bytes,
        gauge(p.resident_bytes),
    );
    reg.register_with_unit(
        "process_virtual_memory",
        "Virtual memory size in bytes",
        Unit::Bytes,
        gauge(p.virtual_bytes),
    );
    reg.register(
        "process_open_fds",
        "Number of open file descriptors",
        gauge(p.open_fds),
    );
    if let Some(max) = p.max_fds {
        reg.register(
            "process_max_fds",
            "Maximum number of open file descriptors",
            gauge(max),
        );
    }
    let start = Gauge::<f64, AtomicU64>::default();
    start.set(p.start_time_seconds);
    reg.register_with_unit(
        "process_start_time",
        "Start time of the process since unix epoch in seconds",
        Unit::Seconds,
        start,
    );
    reg.register(
        "process_threads",
        "Number of OS threads in the process",
        gauge(p.threads),
    );
    let mut out = String::with_capacity(1024);
    if encode(&mut out, &reg).is_err() {
        out.clear();
    }
    out.truncate(out.strip_suffix("# EOF\n").map_or(out.len(), str::len));
    out
}

/// How long a reading of the agent's own process serves scrapes: a flood of `/metrics`
/// requests reads `/proc/self` once a second, not once per request.
const PROCESS_REFRESH: Duration = Duration::from_secs(1);

struct ProcessCache {
    facts: Option<KernelFacts>,
    /// (snapshot generation, when, the whole body) of the latest scrape.
    body: Option<(u64, Instant, Bytes)>,
    /// Whether the latest reading failed, so a failure is logged once, not per scrape.
    failing: bool,
}

/// The `/metrics` body: the snapshot's families (generation `generation`) followed by the
/// agent's own `process_*` families, refreshed at most once per [`PROCESS_REFRESH`]. When
/// `/proc/self` cannot be read the body is the snapshot's alone (logged on the transition).
pub fn with_process(generation: u64, snapshot_text: &Bytes) -> Bytes {
    static CACHE: OnceLock<Mutex<ProcessCache>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        Mutex::new(ProcessCache {
            facts: None,
            body: None,
            failing: false,
        })
    });
    let Ok(mut c) = cache.lock() else {
        return snapshot_text.clone();
    };
    if let Some((g, at, body)) = &c.body {
        if *g == generation && at.elapsed() < PROCESS_REFRESH {
            return body.clone();
        }
    }
    let proc = Path::new("/proc");
    let sample = match c.facts {
        Some(f) => Ok(f),
        None => KernelFacts::read(proc),
    }
    .and_then(|f| {
        c.facts = Some(f);
        read_process(proc, &f)
    });
    let mut tail = match sample {
        Ok(p) => {
            if c.failing {
                tracing::info!("process metrics are readable again");
                c.failing = false;
            }
            encode_process(&p)
        }
        Err(e) => {
            if !c.failing {
                tracing::warn!(error = format!("{e:#}"), "process metrics are not exported");
                c.failing = true;
            }
            String::new()
        }
    };
    tail.push_str(&encode_server());
    let head = snapshot_text
        .strip_suffix(b"# EOF\n")
        .unwrap_or(snapshot_text);
    let mut out = Vec::with_capacity(head.len() + tail.len() + 6);
    out.extend_from_slice(head);
    out.extend_from_slice(tail.as_bytes());
    out.extend_from_slice(b"# EOF\n");
    let body = Bytes::from(out);
    c.body = Some((generation, Instant::now(), body.clone()));
    body
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
                cpu_total: Duration::from_millis(125),
            },
            t0,
        );
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::Completed(Collection::unavailable("no loadavg")),
                duration: Duration::from_millis(1),
                cpu_total: Duration::ZERO,
            },
            t0,
        );
        st.snapshot(t0)
    }

    #[test]
    fn encodes_core_families_and_collector_metrics() {
        let text = encode_snapshot(
            &snapshot(vec![
                Metric::gauge("node_doctor_disk_avail_bytes", "Available bytes.", 10.0)
                    .label("mountpoint", "/"),
                Metric::gauge("node_doctor_disk_avail_bytes", "Available bytes.", 20.0)
                    .label("mountpoint", "/data"),
                Metric::counter("node_doctor_disk_errors_total", "Errors.", 3.0),
            ]),
            &crate::links::Links::default(),
        );
        for want in [
            "# TYPE node_doctor_build_info gauge",
            &format!(
                "node_doctor_build_info{{version=\"{}\"}} 1.0",
                env!("CARGO_PKG_VERSION")
            ),
            "node_doctor_finding{collector=\"disk\",id=\"disk.filesystem_full\",severity=\"critical\",subject=\"/\"} 1.0",
            "node_doctor_finding{collector=\"disk\",id=\"disk.filesystem_full\",severity=\"warning\",subject=\"/var/lib/docker\"} 1.0",
            "# TYPE node_doctor_finding_info gauge",
            "node_doctor_finding_info{collector=\"disk\",id=\"disk.filesystem_full\",subject=\"/\",title=\"disk.filesystem_full title\",runbook=\"/rules/disk.filesystem_full\"} 1.0",
            "# TYPE node_doctor_finding_transitions counter",
            "node_doctor_finding_transitions_total{collector=\"disk\",id=\"disk.filesystem_full\",transition=\"raised\"} 2.0",
            "node_doctor_finding_transitions_total{collector=\"disk\",id=\"disk.filesystem_full\",transition=\"cleared\"} 0.0",
            "node_doctor_finding_transitions_total{collector=\"disk\",id=\"disk.filesystem_full\",transition=\"suppressed\"} 0.0",
            "node_doctor_finding_transitions_total{collector=\"disk\",id=\"disk.filesystem_full\",transition=\"reraised\"} 0.0",
            "node_doctor_collector_up{collector=\"disk\"} 1.0",
            "node_doctor_collector_up{collector=\"load\"} 0.0",
            "# TYPE node_doctor_collector_cpu_seconds counter",
            "# UNIT node_doctor_collector_cpu_seconds seconds",
            "node_doctor_collector_cpu_seconds_total{collector=\"disk\"} 0.125",
            "node_doctor_collector_cpu_seconds_total{collector=\"load\"} 0.0",
            "# TYPE node_doctor_collector_duration_seconds histogram",
            "# UNIT node_doctor_collector_duration_seconds seconds",
            "node_doctor_collector_duration_seconds_sum{collector=\"disk\"} 0.25",
            "node_doctor_collector_duration_seconds_count{collector=\"disk\"} 1",
            "node_doctor_collector_duration_seconds_bucket{le=\"0.1\",collector=\"disk\"} 0",
            "node_doctor_collector_duration_seconds_bucket{le=\"0.25\",collector=\"disk\"} 1",
            "node_doctor_collector_duration_seconds_bucket{le=\"+Inf\",collector=\"disk\"} 1",
            "node_doctor_collector_duration_seconds_bucket{le=\"0.001\",collector=\"load\"} 1",
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

    /// A collector's histogram is encoded as one: cumulative buckets ending in +Inf, its sum
    /// and count; one whose bounds do not rise to +Inf is left out rather than break the
    /// scrape.
    #[test]
    fn collector_histograms_are_encoded_cumulatively() {
        let h = |server: &str, buckets: Vec<(f64, u64)>| {
            Metric::histogram(
                "node_doctor_dns_answer_seconds",
                "Answer time.",
                buckets,
                0.014,
            )
            .label("server", server)
        };
        let text = encode_snapshot(
            &snapshot(vec![
                h(
                    "10.96.0.10",
                    vec![(0.001, 1), (0.005, 2), (f64::INFINITY, 1)],
                ),
                h("10.96.0.11", vec![(0.005, 2), (0.001, 1)]),
            ]),
            &crate::links::Links::default(),
        );
        for want in [
            "# TYPE node_doctor_dns_answer_seconds histogram",
            "node_doctor_dns_answer_seconds_sum{server=\"10.96.0.10\"} 0.014",
            "node_doctor_dns_answer_seconds_count{server=\"10.96.0.10\"} 4",
            "node_doctor_dns_answer_seconds_bucket{le=\"0.001\",server=\"10.96.0.10\"} 1",
            "node_doctor_dns_answer_seconds_bucket{le=\"0.005\",server=\"10.96.0.10\"} 3",
            "node_doctor_dns_answer_seconds_bucket{le=\"+Inf\",server=\"10.96.0.10\"} 4",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(
            !text.contains("10.96.0.11"),
            "bad buckets are left out:\n{text}"
        );
    }

    /// Runs land in their buckets (upper bounds inclusive), the buckets are cumulative and
    /// end in +Inf = count; the CPU counter only grows, whatever order reports arrive in.
    #[test]
    fn cost_families_accumulate_runs() {
        let names = vec!["disk".to_string()];
        let mut st = State::new("n", &names);
        let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let run = |st: &mut State, ms: u64, cpu_ms: u64, outcome: Outcome| {
            st.apply(
                "disk",
                RunReport {
                    outcome,
                    duration: Duration::from_millis(ms),
                    cpu_total: Duration::from_millis(cpu_ms),
                },
                t0,
            )
        };
        let ok = || Outcome::Completed(Collection::new(Status::Ok));
        run(&mut st, 1, 1, ok());
        run(&mut st, 7, 3, ok());
        run(&mut st, 7_000, 2, ok()); // an older total: the counter keeps 3 ms
        run(
            &mut st,
            10_000,
            3,
            Outcome::TimedOut {
                timeout: Duration::from_secs(10),
            },
        );
        // No run started: not a duration.
        run(
            &mut st,
            60_000,
            4,
            Outcome::StillRunning {
                timeout: Duration::from_secs(10),
                since: t0,
                stuck_for: Duration::from_secs(60),
            },
        );
        let text = encode_snapshot(&st.snapshot(t0), &Default::default());
        let series = |le: &str| {
            format!(
                "node_doctor_collector_duration_seconds_bucket{{le=\"{le}\",collector=\"disk\"}} "
            )
        };
        let value = |prefix: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no {prefix:?} in\n{text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(value(&series("0.001")), 1.0);
        assert_eq!(value(&series("0.005")), 1.0);
        assert_eq!(value(&series("0.01")), 2.0);
        assert_eq!(value(&series("2.5")), 2.0);
        assert_eq!(value(&series("5.0")), 2.0);
        assert_eq!(value(&series("+Inf")), 4.0);
        assert_eq!(
            value("node_doctor_collector_duration_seconds_count{collector=\"disk\"} "),
            4.0
        );
        assert_eq!(
            value("node_doctor_collector_duration_seconds_sum{collector=\"disk\"} "),
            17.008
        );
        assert_eq!(
            value("node_doctor_collector_cpu_seconds_total{collector=\"disk\"} "),
            0.004
        );
    }

    /// ESC, other controls and bidi overrides never reach a label value; the rest of the
    /// text is kept. The runbook follows --docs-url.
    #[test]
    fn label_values_lose_control_and_bidi_characters() {
        assert_eq!(
            label_value("pod-\u{1b}[31mred\u{202e}gpj.exe\n"),
            "pod-[31mredgpj.exe"
        );
        assert_eq!(label_value("/var/lib/节点"), "/var/lib/节点");
        let text = encode_snapshot(
            &snapshot(vec![Metric::gauge(
                "node_doctor_disk_avail_bytes",
                "Available.",
                1.0,
            )
            .label("mountpoint", "/mnt/\u{1b}]0;owned\u{7}x\u{2066}")]),
            &crate::links::Links {
                base: Some("https://sre.example.com/nd".into()),
                agent: None,
            },
        );
        assert!(text.contains("mountpoint=\"/mnt/]0;ownedx\""), "{text}");
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && collectors::sanitize::is_unsafe(c)),
            "{text}"
        );
        assert!(
            text.contains("runbook=\"https://sre.example.com/nd/rules/disk.filesystem_full\""),
            "{text}"
        );
    }

    #[test]
    fn invalid_or_conflicting_families_are_dropped() {
        let text = encode_snapshot(
            &snapshot(vec![
                Metric::gauge("bad name", "x", 1.0),
                Metric::gauge("node_doctor_x", "x", 1.0),
                Metric::counter("node_doctor_x", "x", 1.0),
                Metric::gauge("node_doctor_y", "y", 1.0).label("bad-label", "v"),
                Metric::gauge("node_doctor_collector_up", "spoof", 1.0),
                Metric::gauge("node_doctor_ok", "ok", 2.0),
            ]),
            &Default::default(),
        );
        assert!(!text.contains("bad name"));
        assert!(!text.contains("node_doctor_x"));
        assert!(!text.contains("node_doctor_y"));
        assert!(!text.contains("spoof"));
        assert!(text.contains("node_doctor_ok 2.0"), "{text}");
    }

    const SAMPLE: ProcessSample = ProcessSample {
        cpu_seconds: 1.25,
        resident_bytes: 12_582_912,
        virtual_bytes: 1_134_559_232,
        open_fds: 14,
        max_fds: Some(1_048_576),
        start_time_seconds: 1_800_000_000.5,
        threads: 9,
    };

    #[test]
    fn process_families_have_the_standard_names_help_and_types() {
        let text = encode_process(&SAMPLE);
        for want in [
            "# HELP process_cpu_seconds Total user and system CPU time spent in seconds.",
            "# TYPE process_cpu_seconds counter",
            "# UNIT process_cpu_seconds seconds",
            "process_cpu_seconds_total 1.25",
            "# HELP process_resident_memory_bytes Resident memory size in bytes.",
            "# TYPE process_resident_memory_bytes gauge",
            "process_resident_memory_bytes 12582912",
            "# HELP process_virtual_memory_bytes Virtual memory size in bytes.",
            "process_virtual_memory_bytes 1134559232",
            "# HELP process_open_fds Number of open file descriptors.",
            "# TYPE process_open_fds gauge",
            "process_open_fds 14",
            "# HELP process_max_fds Maximum number of open file descriptors.",
            "process_max_fds 1048576",
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
            "# TYPE process_start_time_seconds gauge",
            "process_start_time_seconds 1800000000.5",
            "# HELP process_threads Number of OS threads in the process.",
            "process_threads 9",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
        let unlimited = encode_process(&ProcessSample {
            max_fds: None,
            ..SAMPLE
        });
        assert!(!unlimited.contains("process_max_fds"), "{unlimited}");
    }

    #[test]
    fn reads_a_staged_proc() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("self/fd")).unwrap();
        for fd in ["0", "1", "2", "5"] {
            std::fs::write(t.path().join("self/fd").join(fd), "").unwrap();
        }
        // Linux 6.18, `cat /proc/self/stat` of a node-doctor serve, and this VM's /proc/stat.
        std::fs::write(
            t.path().join("self/stat"),
            "5130 (node-doctor) S 5120 5120 5120 0 -1 4194560 2412 0 0 0 31 17 0 0 20 0 9 0 \
             123456 1134559232 3072 18446744073709551615 1 1 0 0 0 0 0 4096 17476 0 0 0 17 1 0 0 0 \
             0 0 0 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        std::fs::write(
            t.path().join("stat"),
            "cpu  9865 0 4229 63419 248 0 35 38 0 0\ncpu0 4695 0 1933 32215 32 0 7 17 0 0\n\
             intr 146023 0\nctxt 255582\nbtime 1795335051\nprocesses 9546\nprocs_running 3\n\
             procs_blocked 0\n",
        )
        .unwrap();
        let mut facts = KernelFacts::read(t.path()).unwrap();
        assert_eq!(facts.boot_time_secs, 1_795_335_051);
        facts.ticks_per_second = 100;
        facts.page_size = 4096;
        let p = read_process(t.path(), &facts).unwrap();
        assert_eq!(p.cpu_seconds, 0.48);
        assert_eq!(p.resident_bytes, 3072 * 4096);
        assert_eq!(p.virtual_bytes, 1_134_559_232);
        assert_eq!(p.open_fds, 4);
        assert_eq!(p.start_time_seconds, 1_795_335_051.0 + 1234.56);
        assert_eq!(p.threads, 9);
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(p.max_fds, Some(soft));
        assert!(read_process(&t.path().join("missing"), &facts).is_err());
    }

    #[test]
    fn the_scrape_body_ends_with_one_eof_after_the_process_families() {
        let snap = Bytes::from(encode_snapshot(&snapshot(vec![]), &Default::default()));
        let body = with_process(7, &snap);
        let text = std::str::from_utf8(&body).unwrap();
        assert!(text.starts_with("# HELP node_doctor_build_info"), "{text}");
        let (families, process) = (
            text.find("node_doctor_collector_up").unwrap(),
            text.find("process_cpu_seconds_total").unwrap(),
        );
        assert!(families < process, "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
        // Within the refresh interval, the same generation gets the same bytes.
        assert_eq!(with_process(7, &snap), body);
    }
}
