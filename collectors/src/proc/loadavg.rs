//! `/proc/loadavg`: the 1, 5 and 15 minute load averages and the runnable/total task counts.

use std::path::Path;

use crate::error::ReadError;
use crate::hostfs::{self, cap};

/// One reading of `/proc/loadavg`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loadavg {
    pub load1: f64,
    pub load5: f64,
    pub load15: f64,
    /// Runnable tasks (field 4 before the `/`), threads included.
    pub running: u64,
    /// All tasks (field 4 after the `/`), threads included.
    pub total: u64,
}

/// Parses the text of `/proc/loadavg` (`0.27 0.41 0.18 3/99 9544`).
pub fn parse(text: &str) -> Result<Loadavg, String> {
    let mut f = text.split_whitespace();
    let mut load = |name: &str| -> Result<f64, String> {
        let v = f
            .next()
            .ok_or_else(|| format!("missing {name}"))?
            .parse::<f64>()
            .map_err(|e| format!("{name}: {e}"))?;
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("{name}: out of range"))
        }
    };
    let load1 = load("load1")?;
    let load5 = load("load5")?;
    let load15 = load("load15")?;
    let tasks = f.next().ok_or("missing running/total")?;
    let (r, t) = tasks.split_once('/').ok_or("running/total without '/'")?;
    Ok(Loadavg {
        load1,
        load5,
        load15,
        running: r.parse().map_err(|e| format!("running: {e}"))?,
        total: t.parse().map_err(|e| format!("total: {e}"))?,
    })
}

/// Reads and parses a `loadavg` file.
pub fn read(path: &Path) -> Result<Loadavg, ReadError> {
    let text = hostfs::read_text(path, cap::VALUE)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_lines() {
        // Linux 6.18 (this project's CI VM).
        let l = parse("0.27 0.41 0.18 3/99 9544\n").unwrap();
        assert_eq!(
            (l.load1, l.load5, l.load15, l.running, l.total),
            (0.27, 0.41, 0.18, 3, 99)
        );
        // The handbook's node (top: load average 34.64, 35.80, 35.76; 679 tasks), Linux 3.x/4.x.
        let h = parse("34.64 35.80 35.76 2/679 31245\n").unwrap();
        assert_eq!((h.load1, h.total), (34.64, 679));
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            "",
            "1 2",
            "1 2 3",
            "1 2 3 4",
            "a b c 1/2 3",
            "1 2 3 x/2",
            "-1 2 3 1/2 3",
            "NaN 1 1 1/1 1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
    }
}
