//! `/proc/loadavg`: the 1, 5 and 15 minute load averages and the runnable/total task counts.
//!
//! Parsed by `procfs-core` ([`procfs_core::LoadAverage`]). It reads the averages as `f32`; the
//! kernel prints them with two decimals (`LOAD_INT.LOAD_FRAC`), so they are rounded back to
//! hundredths here and `0.27` stays `0.27`, not `0.2700000107`.

use std::path::Path;

use procfs_core::FromRead;

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
    let l = procfs_core::LoadAverage::from_read(text.as_bytes())
        .map_err(|e| format!("{} in {text:?}", super::core_error(&e)))?;
    let load = |name: &str, v: f32| -> Result<f64, String> {
        if v.is_finite() && v >= 0.0 {
            Ok((f64::from(v) * 100.0).round() / 100.0)
        } else {
            Err(format!("{name} {v} is out of range"))
        }
    };
    Ok(Loadavg {
        load1: load("load1", l.one)?,
        load5: load("load5", l.five)?,
        load15: load("load15", l.fifteen)?,
        running: u64::from(l.cur),
        total: u64::from(l.max),
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
    fn keeps_the_kernels_two_decimals() {
        // procfs-core reads f32: without rounding, 1234.56 would read 1234.56005859375.
        let l = parse("1234.56 999.99 0.01 1/2 3\n").unwrap();
        assert_eq!((l.load1, l.load5, l.load15), (1234.56, 999.99, 0.01));
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
        /// `%lu.%02lu %lu.%02lu %lu.%02lu %u/%d %d` as `loadavg_proc_show()` prints it, with
        /// averages up to 10 000 (beyond, procfs-core's `f32` loses the hundredths).
        #[test]
        fn parses_what_the_kernel_prints(
            loads in proptest::array::uniform3(crate::testgen::hundredths(9_999)),
            (running, total) in proptest::strategy::Strategy::prop_flat_map(1u32..=4_194_304, |t| (0..=t, proptest::strategy::Just(t))),
            last_pid in 1u32..=4_194_304,
        ) {
            use crate::testgen::{fmt_hundredths, hundredths_f64};
            let text = format!("{} {} {} {running}/{total} {last_pid}\n",
                fmt_hundredths(loads[0]), fmt_hundredths(loads[1]), fmt_hundredths(loads[2]));
            let want = Loadavg {
                load1: hundredths_f64(loads[0]),
                load5: hundredths_f64(loads[1]),
                load15: hundredths_f64(loads[2]),
                running: u64::from(running),
                total: u64::from(total),
            };
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
