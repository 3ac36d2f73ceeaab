//! A series a collector keeps anyway, handed to the agent with a run so that its page can
//! draw what decided a finding: the disk collector's time-to-full history, with the fitted
//! line, the threshold and where the line crosses it. Neutral data (the agent draws it, as it
//! encodes [`crate::Metric`]s); one run's figures replace the previous run's.
//!
//! What a reader would get wrong: the line is the judge's own (its rate, anchored at the
//! latest reading, as the estimate is computed), not a second fit, so the crossing drawn is
//! the finding's `threshold_at`.

/// The unit of a figure's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    /// A count (inodes, entries).
    Count,
    Percent,
    Seconds,
    /// Events per second.
    PerSecond,
    /// A plain ratio (load per CPU).
    Ratio,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Count => "count",
            Unit::Percent => "percent",
            Unit::Seconds => "seconds",
            Unit::PerSecond => "per_second",
            Unit::Ratio => "ratio",
        }
    }
}

/// A straight line through `(t, value)` with `slope` per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub t: f64,
    pub value: f64,
    pub slope: f64,
}

impl Line {
    pub fn at(&self, t: f64) -> f64 {
        self.value + self.slope * (t - self.t)
    }
}

/// The kinds of figure a collector hands over. Named here, not in the collector's module:
/// they read like rule ids (`<collector>.<what>`) but are series, and the rules test takes a
/// `"disk.…"` literal in the disk module for an id it reports.
pub mod kinds {
    /// A filesystem's bytes available.
    pub const DISK_SPACE: &str = "disk.space";
    /// A filesystem's free inodes.
    pub const DISK_INODES: &str = "disk.inodes";
}

/// One figure: readings over time and what the judge made of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What it shows, `<collector>.<what>`: `disk.space` (bytes available), `disk.inodes`
    /// (free inodes); the agent's own series use the same type.
    pub kind: &'static str,
    /// Host text: the mount point.
    pub subject: String,
    pub unit: Unit,
    /// (seconds since the Unix epoch, value), oldest first.
    pub points: Vec<(f64, f64)>,
    /// The fitted use, once there is enough history for one.
    pub fit: Option<Line>,
    /// The level whose crossing the finding is about, and how it reads (`nodefs.available<10%`).
    pub threshold: Option<(f64, String)>,
    /// When the fitted line reaches the threshold (seconds since the Unix epoch), while it
    /// fills; a soft threshold's grace period comes on top of it in the finding's estimate.
    pub crossing: Option<f64>,
}
