//! What the page draws (`GET /`) and `/history` returns: the figures that decide findings,
//! bounded and in memory. The disk collector hands its own time-to-full history with each run
//! ([`collectors::figure`]); for the rest the agent keeps a short ring per series, fed from the
//! metrics each run already publishes: the load per CPU, the iowait share, the busiest disk's
//! busy share, the conntrack table's fill and insert failures, each DNS server's answer time.
//!
//! What a reader would get wrong: nothing here reads the host or runs a collector; a ring
//! holds the last [`POINTS`] runs of its collector (30 min at the default 15 s interval), the
//! disk's figure its own downsampled 6 h, and every series is dropped with what it describes.

use std::collections::{BTreeMap, VecDeque};

use collectors::figure::{Figure, Unit};
use collectors::{Metric, MetricKind};

/// Points kept per ring.
pub const POINTS: usize = 120;
/// DNS servers with a ring, at most (a node asks one or two).
pub const MAX_DNS_SERVERS: usize = 8;

/// The agent's own rings: kind, unit.
const LOAD_PER_CPU: (&str, Unit) = ("load.per_cpu", Unit::Ratio);
const IOWAIT: (&str, Unit) = ("load.iowait", Unit::Percent);
const DISK_BUSY: (&str, Unit) = ("load.disk_busy", Unit::Percent);
const CONNTRACK_FILL: (&str, Unit) = ("conntrack.fill", Unit::Percent);
const INSERT_FAILED: (&str, Unit) = ("conntrack.insert_failed", Unit::PerSecond);
const DNS_ANSWER: (&str, Unit) = ("dns.answer", Unit::Seconds);

/// One ring: its unit and at most [`POINTS`] (time, value), oldest first.
#[derive(Debug, Default)]
struct Ring {
    unit: Option<Unit>,
    points: VecDeque<(f64, f64)>,
}

impl Ring {
    fn push(&mut self, unit: Unit, t: f64, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.unit = Some(unit);
        self.points.push_back((t, v));
        while self.points.len() > POINTS {
            self.points.pop_front();
        }
    }
}

/// Everything kept: rings by (kind, subject), the counters of the previous run that rates
/// are taken against, the latest figures each collector handed over.
#[derive(Debug, Default)]
pub struct History {
    rings: BTreeMap<(&'static str, String), Ring>,
    /// (kind, subject) -> (time, counter, second counter) of the previous run.
    last: BTreeMap<(&'static str, String), (f64, f64, f64)>,
    figures: BTreeMap<String, Vec<Figure>>,
    /// The device the busiest-disk ring last read.
    busiest: String,
}

/// The value of `name` with the label `key=value` (any labels when `key` is empty).
fn value(metrics: &[Metric], name: &str, key: &str, want: &str) -> Option<f64> {
    metrics
        .iter()
        .find(|m| m.name == name && (key.is_empty() || label(m, key) == Some(want)))
        .map(|m| m.value)
}

fn label<'a>(m: &'a Metric, key: &str) -> Option<&'a str> {
    m.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl History {
    /// Records one completed run of `collector` that ended at `t` (seconds since the Unix
    /// epoch): its metrics into the rings, its figures in place of the last run's.
    pub fn record(&mut self, collector: &str, metrics: &[Metric], figures: Vec<Figure>, t: f64) {
        // Which series a run feeds follows from the metrics it published, not from the
        // collector's name (the registry alone names collectors): each reader takes only its
        // own metrics, and the DNS reader, which drops the servers a run did not probe, runs
        // only on a run that published DNS metrics.
        self.load(metrics, t);
        self.conntrack(metrics, t);
        if metrics
            .iter()
            .any(|x| x.name.starts_with("node_doctor_dns_"))
        {
            self.dns(metrics, t);
        }
        if figures.is_empty() {
            self.figures.remove(collector);
        } else {
            self.figures.insert(collector.to_string(), figures);
        }
    }

    fn push(&mut self, (kind, unit): (&'static str, Unit), subject: &str, t: f64, v: f64) {
        self.rings
            .entry((kind, subject.to_string()))
            .or_default()
            .push(unit, t, v);
    }

    /// The increase of a counter since the previous run, per second; `None` on the first run
    /// and after a reset (the counter went down).
    fn rate(&mut self, kind: &'static str, subject: &str, t: f64, count: f64) -> Option<f64> {
        let prev = self
            .last
            .insert((kind, subject.to_string()), (t, count, 0.0));
        let (t0, c0, _) = prev?;
        (t > t0 && count >= c0).then(|| (count - c0) / (t - t0))
    }

    fn load(&mut self, m: &[Metric], t: f64) {
        let cpus = value(m, "node_doctor_load_cpus", "", "").filter(|c| *c > 0.0);
        if let (Some(l), Some(c)) = (value(m, "node_doctor_load_load1", "", ""), cpus) {
            self.push(LOAD_PER_CPU, "", t, l / c);
        }
        if let Some(w) = value(m, "node_doctor_load_cpu_percent", "mode", "iowait") {
            self.push(IOWAIT, "", t, w);
        }
        let busiest = m
            .iter()
            .filter(|x| x.name == "node_doctor_load_disk_busy_percent")
            .max_by(|a, b| a.value.total_cmp(&b.value));
        if let Some(b) = busiest {
            self.busiest = label(b, "device").unwrap_or_default().to_string();
            self.push(DISK_BUSY, "", t, b.value);
        }
    }

    fn conntrack(&mut self, m: &[Metric], t: f64) {
        let entries = value(m, "node_doctor_conntrack_entries", "", "");
        let limit = value(m, "node_doctor_conntrack_entries_limit", "", "").filter(|l| *l > 0.0);
        if let (Some(e), Some(l)) = (entries, limit) {
            self.push(CONNTRACK_FILL, "", t, e * 100.0 / l);
        }
        if let Some(c) = value(m, "node_doctor_conntrack_stat_insert_failed_total", "", "") {
            if let Some(r) = self.rate(INSERT_FAILED.0, "", t, c) {
                self.push(INSERT_FAILED, "", t, r);
            }
        }
    }

    /// Each server's mean answer time over the run: the histogram's sum and count against
    /// the previous run's. Servers no longer probed lose their ring.
    fn dns(&mut self, m: &[Metric], t: f64) {
        let mut seen = Vec::new();
        for h in m.iter().filter(|x| {
            x.name == "node_doctor_dns_answer_seconds" && x.kind == MetricKind::Histogram
        }) {
            let server = label(h, "server").unwrap_or_default().to_string();
            let known = self.rings.contains_key(&(DNS_ANSWER.0, server.clone()))
                || self.last.contains_key(&(DNS_ANSWER.0, server.clone()));
            if !known && seen.len() >= MAX_DNS_SERVERS {
                continue;
            }
            let (sum, count) = (h.value, h.count() as f64);
            let key = (DNS_ANSWER.0, server.clone());
            if let Some((_, s0, c0)) = self.last.insert(key, (t, sum, count)) {
                if count > c0 && sum >= s0 {
                    self.push(DNS_ANSWER, &server, t, (sum - s0) / (count - c0));
                }
            }
            seen.push(server);
        }
        self.rings
            .retain(|(k, s), _| *k != DNS_ANSWER.0 || seen.contains(s));
        self.last
            .retain(|(k, s), _| *k != DNS_ANSWER.0 || seen.contains(s));
    }

    /// Every figure, the collectors' first (by collector), then the agent's rings with two
    /// points or more.
    pub fn figures(&self) -> Vec<Figure> {
        let mut out: Vec<Figure> = self.figures.values().flatten().cloned().collect();
        for ((kind, subject), ring) in &self.rings {
            let Some(unit) = ring.unit.filter(|_| ring.points.len() >= 2) else {
                continue;
            };
            let subject = if *kind == DISK_BUSY.0 {
                self.busiest.clone()
            } else {
                subject.clone()
            };
            out.push(Figure {
                kind,
                subject,
                unit,
                points: ring.points.iter().copied().collect(),
                fit: None,
                threshold: None,
                crossing: None,
            });
        }
        out
    }

    /// Points held, over every series (what the memory bound counts).
    #[cfg(test)]
    pub fn points(&self) -> usize {
        self.rings.values().map(|r| r.points.len()).sum::<usize>()
            + self
                .figures
                .values()
                .flatten()
                .map(|f| f.points.len())
                .sum::<usize>()
    }
}

/// `/history`: every figure with its points, fit, threshold and crossing, and how many points
/// are held (at most [`POINTS`] per ring; the disk's figures hold the collector's own bound).
pub fn to_json(node: &str, figures: &[Figure]) -> Vec<u8> {
    let series: Vec<serde_json::Value> = figures
        .iter()
        .map(|f| {
            serde_json::json!({
                "kind": f.kind,
                "subject": f.subject,
                "unit": f.unit.as_str(),
                "points": f.points.iter().map(|(t, v)| [*t, *v]).collect::<Vec<_>>(),
                "fit": f.fit.map(|l| serde_json::json!({"t": l.t, "value": l.value, "slope_per_second": l.slope})),
                "threshold": f.threshold.as_ref().map(|(v, label)| serde_json::json!({"value": v, "label": label})),
                "crossing": f.crossing,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "node": node,
        "ring_points": POINTS,
        "points": figures.iter().map(|f| f.points.len()).sum::<usize>(),
        "series": series,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Whether figure `f` explains finding `id` about `subject` (drawn on its card).
pub fn explains(f: &Figure, id: &str, subject: &str) -> bool {
    match f.kind {
        "disk.space" => {
            f.subject == subject
                && matches!(
                    id,
                    "disk.filling_up" | "disk.filesystem_full" | "disk.deleted_open_files"
                )
        }
        "disk.inodes" => {
            f.subject == subject && matches!(id, "disk.inodes_filling_up" | "disk.inodes_exhausted")
        }
        "load.per_cpu" => matches!(id, "load.high_load" | "load.cpu_bound"),
        "load.iowait" | "load.disk_busy" => matches!(id, "load.io_bound" | "load.iowait"),
        "conntrack.fill" => id == "conntrack.table_full",
        "conntrack.insert_failed" => id == "conntrack.insert_races",
        // The finding's subject is `ip:port` (`[ip]:port` for IPv6), the metric's label the ip.
        "dns.answer" => {
            id.starts_with("dns.")
                && subject
                    .trim_start_matches('[')
                    .strip_prefix(f.subject.as_str())
                    .is_some_and(|rest| rest.starts_with(':') || rest.starts_with("]:"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, v: f64) -> Metric {
        Metric::gauge(name, "h", v)
    }

    fn load_run(load1: f64, iowait: f64, busy: &[(&str, f64)]) -> Vec<Metric> {
        let mut m = vec![
            g("node_doctor_load_load1", load1),
            g("node_doctor_load_cpus", 2.0),
            g("node_doctor_load_cpu_percent", 3.0).label("mode", "user"),
            g("node_doctor_load_cpu_percent", iowait).label("mode", "iowait"),
        ];
        for (d, b) in busy {
            m.push(g("node_doctor_load_disk_busy_percent", *b).label("device", *d));
        }
        m
    }

    fn series<'a>(figs: &'a [Figure], kind: &str) -> &'a Figure {
        figs.iter()
            .find(|f| f.kind == kind)
            .unwrap_or_else(|| panic!("no {kind}: {figs:#?}"))
    }

    #[test]
    fn load_runs_become_per_cpu_iowait_and_busiest_disk_rings() {
        let mut h = History::default();
        h.record(
            "load",
            &load_run(3.0, 10.0, &[("sda", 5.0), ("vdb", 80.0)]),
            vec![],
            100.0,
        );
        assert!(h.figures().is_empty(), "one point draws nothing");
        h.record(
            "load",
            &load_run(1.0, 20.0, &[("sda", 90.0), ("vdb", 1.0)]),
            vec![],
            115.0,
        );
        let f = h.figures();
        assert_eq!(
            series(&f, "load.per_cpu").points,
            [(100.0, 1.5), (115.0, 0.5)]
        );
        assert_eq!(
            series(&f, "load.iowait").points,
            [(100.0, 10.0), (115.0, 20.0)]
        );
        let busy = series(&f, "load.disk_busy");
        assert_eq!(busy.points, [(100.0, 80.0), (115.0, 90.0)]);
        assert_eq!(busy.subject, "sda", "the device busiest now");
    }

    #[test]
    fn rings_are_bounded_and_counted() {
        let mut h = History::default();
        for i in 0..(3 * POINTS) {
            h.record(
                "load",
                &load_run(1.0, 1.0, &[("sda", 1.0)]),
                vec![],
                i as f64,
            );
        }
        let f = h.figures();
        assert_eq!(f.len(), 3);
        assert!(f.iter().all(|s| s.points.len() == POINTS), "{f:?}");
        assert_eq!(series(&f, "load.per_cpu").points[0].0, (2 * POINTS) as f64);
        assert_eq!(h.points(), 3 * POINTS);
    }

    #[test]
    fn conntrack_fill_and_insert_failures_per_second() {
        let mut h = History::default();
        let run = |entries: f64, failed: f64| {
            vec![
                g("node_doctor_conntrack_entries", entries),
                g("node_doctor_conntrack_entries_limit", 1000.0),
                Metric::counter(
                    "node_doctor_conntrack_stat_insert_failed_total",
                    "h",
                    failed,
                ),
            ]
        };
        h.record("conntrack", &run(100.0, 7.0), vec![], 0.0);
        h.record("conntrack", &run(250.0, 37.0), vec![], 15.0);
        // A counter that went down (a reset) gives no point; the next one rates against it.
        h.record("conntrack", &run(500.0, 3.0), vec![], 30.0);
        h.record("conntrack", &run(900.0, 18.0), vec![], 45.0);
        let f = h.figures();
        assert_eq!(
            series(&f, "conntrack.fill").points,
            [(0.0, 10.0), (15.0, 25.0), (30.0, 50.0), (45.0, 90.0)]
        );
        assert_eq!(
            series(&f, "conntrack.insert_failed").points,
            [(15.0, 2.0), (45.0, 1.0)]
        );
    }

    #[test]
    fn dns_answer_time_is_the_runs_mean_and_gone_servers_are_dropped() {
        let mut h = History::default();
        let hist = |server: &str, sum: f64, count: u64| {
            Metric::histogram(
                "node_doctor_dns_answer_seconds",
                "h",
                vec![(0.1, count), (f64::INFINITY, 0)],
                sum,
            )
            .label("server", server)
        };
        h.record("dns", &[hist("10.96.0.10", 0.0, 0)], vec![], 0.0);
        h.record("dns", &[hist("10.96.0.10", 0.02, 2)], vec![], 15.0);
        h.record("dns", &[hist("10.96.0.10", 5.06, 4)], vec![], 30.0);
        let f = h.figures();
        let d = series(&f, "dns.answer");
        assert_eq!(d.subject, "10.96.0.10");
        assert_eq!(d.points, [(15.0, 0.01), (30.0, 2.52)]);
        assert!(explains(d, "dns.slow", "10.96.0.10:53"));
        assert!(!explains(d, "dns.slow", "10.96.0.100:53"));
        // Another collector's run (no DNS metric) leaves the DNS rings alone.
        h.record("kernel", &[], vec![], 40.0);
        assert_eq!(series(&h.figures(), "dns.answer").points.len(), 2);
        h.record("dns", &[hist("169.254.20.10", 0.0, 0)], vec![], 45.0);
        assert!(h.figures().is_empty());
        assert_eq!(h.points(), 0);
        // At most MAX_DNS_SERVERS servers get a ring.
        let many: Vec<Metric> = (0..20)
            .map(|i| hist(&format!("10.0.0.{i}"), 0.0, 0))
            .collect();
        h.record("dns", &many, vec![], 60.0);
        assert_eq!(h.last.len(), MAX_DNS_SERVERS);
    }

    #[test]
    fn a_collectors_figures_replace_the_last_runs() {
        let mut h = History::default();
        let fig = |subject: &str| Figure {
            kind: "disk.space",
            subject: subject.into(),
            unit: Unit::Bytes,
            points: vec![(1.0, 10.0), (2.0, 9.0)],
            fit: None,
            threshold: None,
            crossing: None,
        };
        h.record("disk", &[], vec![fig("/"), fig("/var/lib/kubelet")], 2.0);
        assert_eq!(h.figures().len(), 2);
        assert_eq!(h.points(), 4);
        h.record("disk", &[], vec![fig("/")], 3.0);
        assert_eq!(h.figures(), [fig("/")]);
        assert!(explains(&fig("/"), "disk.filling_up", "/"));
        assert!(!explains(&fig("/"), "disk.filling_up", "/var"));
        h.record("disk", &[], vec![], 4.0);
        assert!(h.figures().is_empty());
    }
}
