//! Measurements a collector exposes for `/metrics`, in a neutral form the agent encodes.

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Gauge,
    /// Monotonic; the name must end in `_total`.
    Counter,
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
    pub value: f64,
}

impl Metric {
    pub fn gauge(name: &str, help: &'static str, value: f64) -> Metric {
        Metric {
            name: name.to_string(),
            help,
            kind: MetricKind::Gauge,
            labels: Vec::new(),
            value,
        }
    }

    pub fn counter(name: &str, help: &'static str, value: f64) -> Metric {
        Metric {
            name: name.to_string(),
            help,
            kind: MetricKind::Counter,
            labels: Vec::new(),
            value,
        }
    }

    pub fn label(mut self, key: &str, value: impl Into<String>) -> Metric {
        self.labels.push((key.to_string(), value.into()));
        self
    }
}
