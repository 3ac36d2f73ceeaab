//! Measurements a collector exposes for `/metrics`, in a neutral form the agent encodes.

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Gauge,
    /// Monotonic; the name must end in `_total`.
    Counter,
    /// Observations in buckets: [`Metric::buckets`], `value` is their sum.
    Histogram,
}

/// One sample of one metric. Samples sharing a `name` form one family; they must share
/// `help` and `kind`.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Full name with unit, e.g. `node_doctor_disk_avail_bytes`.
    pub name: String,
    pub help: &'static str,
    pub kind: MetricKind,
    pub labels: Vec<(String, String)>,
    /// The value; a histogram's sum of observations.
    pub value: f64,
    /// A histogram's buckets: upper bound and the observations in that bucket alone (not
    /// cumulative), in increasing order, the last one `f64::INFINITY`. Empty otherwise.
    pub buckets: Vec<(f64, u64)>,
}

impl Metric {
    pub fn gauge(name: &str, help: &'static str, value: f64) -> Metric {
        Metric {
            name: name.to_string(),
            help,
            kind: MetricKind::Gauge,
            labels: Vec::new(),
            value,
            buckets: Vec::new(),
        }
    }

    pub fn counter(name: &str, help: &'static str, value: f64) -> Metric {
        Metric {
            name: name.to_string(),
            help,
            kind: MetricKind::Counter,
            labels: Vec::new(),
            value,
            buckets: Vec::new(),
        }
    }

    /// A histogram of `buckets` (upper bound, observations in that bucket alone; the last
    /// bound `f64::INFINITY`) whose observations sum to `sum`.
    pub fn histogram(name: &str, help: &'static str, buckets: Vec<(f64, u64)>, sum: f64) -> Metric {
        Metric {
            name: name.to_string(),
            help,
            kind: MetricKind::Histogram,
            labels: Vec::new(),
            value: sum,
            buckets,
        }
    }

    /// A histogram's count of observations (0 for other kinds).
    pub fn count(&self) -> u64 {
        self.buckets
            .iter()
            .map(|b| b.1)
            .fold(0, u64::saturating_add)
    }

    pub fn label(mut self, key: &str, value: impl Into<String>) -> Metric {
        self.labels.push((key.to_string(), value.into()));
        self
    }
}
