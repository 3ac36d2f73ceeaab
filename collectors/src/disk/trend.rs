//! Time to full: a bounded history of a filesystem's free space and free inodes, and a robust
//! fit of how fast they are used. Pure: the collector pushes one [`Point`] per cycle into a
//! [`Series`] (a ring of at most [`Series::CAPACITY`] points over the last
//! [`Series::WINDOW_SECS`], downsampled), and [`fit`] turns a series' points into a [`Fit`]
//! or nothing.
//!
//! The fit is Theil–Sen (the median of the slopes of every pair of points, and the median
//! intercept): a short burst, a deleted file or a few odd readings move a median of hundreds
//! of slopes by little. A fit exists only over enough history (a minimum span and number of
//! points), only when the consumption over the span stands out of the readings' scatter
//! (twice their median absolute deviation from the line), and only when the recent quarter of
//! the history agrees (it consumes too, at no less than [`Thresholds::fill_recent_agree`] of
//! the rate): a burst followed by a delete, a noisy flat line or a shrinking use give none.
//!
//! [`Thresholds::fill_recent_agree`]: super::thresholds::Thresholds::fill_recent_agree

use std::collections::VecDeque;

use super::thresholds::Thresholds;

/// One reading of a filesystem: when (seconds since the Unix epoch), bytes available to
/// non-root users, free inodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t: f64,
    pub avail_bytes: f64,
    pub files_free: f64,
}

/// Which figure of a [`Point`] a fit is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// Available bytes.
    Space,
    /// Free inodes.
    Inodes,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Space => "space",
            Resource::Inodes => "inodes",
        }
    }

    fn of(self, p: &Point) -> f64 {
        match self {
            Resource::Space => p.avail_bytes,
            Resource::Inodes => p.files_free,
        }
    }
}

/// A fitted use of space or inodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Consumed per second over the history (bytes/s or inodes/s; positive: filling).
    pub rate: f64,
    /// The same over the recent quarter of the history.
    pub recent_rate: f64,
    /// Seconds of history the fit covers.
    pub span_secs: f64,
    /// Points it rests on.
    pub points: usize,
    /// The latest reading (free bytes or inodes) and its time.
    pub free_now: f64,
    pub t_now: f64,
    /// Whether the growth is real: it stands out of the scatter and the recent trend agrees.
    pub filling: bool,
}

/// The bounded history of one filesystem: at most [`Series::CAPACITY`] points, at least
/// `WINDOW_SECS / CAPACITY` apart (the newest reading replaces the newest point until it is
/// that far from the one before), none older than [`Series::WINDOW_SECS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    points: VecDeque<Point>,
}

impl Series {
    /// Points kept per filesystem (3 min apart over 6 h).
    pub const CAPACITY: usize = 120;
    /// How far back the history reaches (node_exporter's mixin fits over 6 h too).
    pub const WINDOW_SECS: f64 = 6.0 * 3600.0;

    /// Adds a reading. A clock that went backwards starts the history again.
    pub fn push(&mut self, p: Point, window_secs: f64, capacity: usize) {
        let capacity = capacity.max(2);
        if self.points.back().is_some_and(|last| p.t <= last.t) {
            self.points.clear();
        }
        let spacing = window_secs / capacity as f64;
        let n = self.points.len();
        // The newest point slides with the latest reading until it is `spacing` after the
        // one before it; then it stays and the next reading starts a new one.
        if n >= 2 && self.points[n - 1].t - self.points[n - 2].t < spacing {
            self.points.pop_back();
        }
        self.points.push_back(p);
        while self.points.front().is_some_and(|f| p.t - f.t > window_secs) {
            self.points.pop_front();
        }
        while self.points.len() > capacity {
            self.points.pop_front();
        }
    }

    pub fn points(&self) -> Vec<Point> {
        self.points.iter().copied().collect()
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// Enough history for a fit under `t`: the span and the number of points.
pub fn enough(points: &[Point], t: &Thresholds) -> bool {
    match (points.first(), points.last()) {
        (Some(a), Some(b)) => {
            points.len() >= t.fill_min_points && b.t - a.t >= t.fill_min_history_secs
        }
        _ => false,
    }
}

/// The fit of one resource, or `None` with too little history.
pub fn fit(points: &[Point], resource: Resource, t: &Thresholds) -> Option<Fit> {
    if !enough(points, t) {
        return None;
    }
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.t, resource.of(p))).collect();
    let (slope, intercept) = theil_sen(&xy)?;
    let last = *points.last()?;
    let span = last.t - points.first()?.t;
    // The recent quarter of the history (at least 3 points).
    let recent_n = (xy.len() / 4).max(3).min(xy.len());
    let (recent_slope, _) = theil_sen(&xy[xy.len() - recent_n..])?;
    let rate = -slope;
    let recent_rate = -recent_slope;
    let mut residuals: Vec<f64> = xy
        .iter()
        .map(|(x, y)| (y - (intercept + slope * x)).abs())
        .collect();
    let mad = median(&mut residuals).unwrap_or(0.0);
    let filling = rate > 0.0
        && rate * span > 2.0 * mad
        && recent_rate > 0.0
        && recent_rate >= rate * t.fill_recent_agree;
    Some(Fit {
        rate,
        recent_rate,
        span_secs: span,
        points: points.len(),
        free_now: resource.of(&last),
        t_now: last.t,
        filling,
    })
}

/// Theil–Sen: the median slope of all pairs with distinct x, and the median intercept.
pub fn theil_sen(xy: &[(f64, f64)]) -> Option<(f64, f64)> {
    let mut slopes = Vec::with_capacity(xy.len() * xy.len().saturating_sub(1) / 2);
    for (i, a) in xy.iter().enumerate() {
        for b in &xy[i + 1..] {
            let dx = b.0 - a.0;
            if dx != 0.0 {
                slopes.push((b.1 - a.1) / dx);
            }
        }
    }
    let slope = median(&mut slopes)?;
    let mut intercepts: Vec<f64> = xy.iter().map(|(x, y)| y - slope * x).collect();
    Some((slope, median(&mut intercepts)?))
}

fn median(v: &mut Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if v.len() % 2 == 1 {
        return Some(m);
    }
    let below = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((below + m) / 2.0)
}

/// Seconds since the Unix epoch as `2026-11-27T17:30:00Z` (UTC, whole seconds).
pub fn utc(secs: f64) -> String {
    let s = secs.floor() as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_800_600.5), "2026-11-27T17:30:00Z");
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut vec![f64::NAN]), None);
    }

    #[test]
    fn series_is_bounded_and_downsampled() {
        let mut s = Series::default();
        // A reading every 15 s for 12 h: at most CAPACITY points, none older than the window.
        for i in 0..(12 * 240) {
            let t = 1000.0 + f64::from(i) * 15.0;
            s.push(
                Point {
                    t,
                    avail_bytes: 1.0,
                    files_free: 1.0,
                },
                Series::WINDOW_SECS,
                Series::CAPACITY,
            );
        }
        let p = s.points();
        assert!(p.len() <= Series::CAPACITY, "{}", p.len());
        assert!(p.len() >= Series::CAPACITY - 2, "{}", p.len());
        let last = p.last().unwrap().t;
        assert!(last - p[0].t <= Series::WINDOW_SECS);
        // Spaced by about 3 min, the newest point the latest reading.
        assert!(p.windows(2).rev().skip(1).all(|w| w[1].t - w[0].t >= 180.0));
        assert_eq!(last, 1000.0 + f64::from(12 * 240 - 1) * 15.0);
        // A clock that went backwards starts again.
        s.push(
            Point {
                t: 10.0,
                avail_bytes: 1.0,
                files_free: 1.0,
            },
            Series::WINDOW_SECS,
            Series::CAPACITY,
        );
        assert_eq!(s.len(), 1);
    }
}
