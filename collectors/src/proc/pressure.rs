//! `/proc/pressure/{cpu,io,memory}` (PSI, Linux 4.20+): the share of time tasks stalled.
//!
//! `some` is always present; `full` is absent from `cpu` before Linux 5.13.
//!
//! Our own parser: `procfs-core`'s `CpuPressure` requires the `full` line, so it refuses the
//! `cpu` file of every kernel from 4.20 to 5.12, and its line parser slices past a line cut
//! after `some` and panics (test `procfs_core_refuses_5_4_cpu_and_panics_on_a_cut_line`).

use std::path::Path;

use crate::error::ReadError;

/// One line of a pressure file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Total stall time in microseconds.
    pub total_us: u64,
}

/// One pressure file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

fn parse_line(rest: &str) -> Result<PsiLine, String> {
    let mut l = PsiLine {
        avg10: f64::NAN,
        avg60: f64::NAN,
        avg300: f64::NAN,
        total_us: 0,
    };
    let mut have_total = false;
    for kv in rest.split_whitespace() {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("bad field {kv:?}"))?;
        let pct = || -> Result<f64, String> {
            let x = v.parse::<f64>().map_err(|e| format!("{k}: {e}"))?;
            if x.is_finite() && (0.0..=100.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!("{k}: out of range"))
            }
        };
        match k {
            "avg10" => l.avg10 = pct()?,
            "avg60" => l.avg60 = pct()?,
            "avg300" => l.avg300 = pct()?,
            "total" => {
                l.total_us = v.parse().map_err(|e| format!("total: {e}"))?;
                have_total = true;
            }
            _ => {} // a newer kernel may add fields
        }
    }
    if l.avg10.is_nan() || l.avg60.is_nan() || l.avg300.is_nan() || !have_total {
        return Err("missing avg10/avg60/avg300/total".into());
    }
    Ok(l)
}

/// Parses the text of one pressure file.
pub fn parse(text: &str) -> Result<Pressure, String> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("some ") {
            some = Some(parse_line(rest)?);
        } else if let Some(rest) = line.strip_prefix("full ") {
            full = Some(parse_line(rest)?);
        }
    }
    Ok(Pressure {
        some: some.ok_or("no 'some' line")?,
        full,
    })
}

/// Reads a pressure file; `Ok(None)` when PSI is absent (kernel before 4.20, or `psi=0`:
/// the file is missing or reading it fails with EOPNOTSUPP).
pub fn read(path: &Path) -> Result<Option<Pressure>, ReadError> {
    match crate::hostfs::read_text(path, crate::hostfs::cap::COUNTERS) {
        Ok(text) => parse(&text)
            .map(Some)
            .map_err(|m| ReadError::parse(path, m)),
        Err(e) if e.is_not_found() || e.raw_os_error() == Some(nix::libc::EOPNOTSUPP) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18, /proc/pressure/cpu (has `full` since 5.13, always zero at system level).
    const CPU_618: &str = "some avg10=5.87 avg60=3.25 avg300=3.06 total=16133437\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
    // Linux 6.18, /proc/pressure/io.
    const IO_618: &str = "some avg10=0.51 avg60=0.40 avg300=0.44 total=3044819\nfull avg10=0.51 avg60=0.23 avg300=0.21 total=1821802\n";
    // Linux 5.4 (Ubuntu 20.04), /proc/pressure/cpu: no `full` line before 5.13.
    const CPU_54: &str = "some avg10=0.00 avg60=0.12 avg300=0.07 total=22419381\n";

    #[test]
    fn parses_real_files() {
        let c = parse(CPU_618).unwrap();
        assert_eq!(c.some.avg10, 5.87);
        assert_eq!(c.some.total_us, 16133437);
        assert_eq!(c.full.unwrap().avg60, 0.0);
        let io = parse(IO_618).unwrap();
        assert_eq!(io.full.unwrap().avg10, 0.51);
        assert_eq!(io.full.unwrap().avg300, 0.21);
        let old = parse(CPU_54).unwrap();
        assert_eq!(old.some.avg60, 0.12);
        assert!(old.full.is_none());
    }

    #[test]
    fn bad_files_are_errors() {
        for bad in [
            "",
            "full avg10=1 avg60=1 avg300=1 total=1",
            "some avg10=x avg60=1 avg300=1 total=1",
            "some avg10=1",
            "some avg10=101 avg60=1 avg300=1 total=1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn procfs_core_refuses_5_4_cpu_and_panics_on_a_cut_line() {
        use procfs_core::FromRead;
        assert!(procfs_core::CpuPressure::from_read(CPU_54.as_bytes()).is_err());
        assert!(parse(CPU_54).is_ok());
        let core = std::panic::catch_unwind(|| procfs_core::parse_pressure_record("some"));
        assert!(core.is_err(), "procfs-core no longer panics on a cut line");
        assert!(parse("some").is_err());
    }

    #[test]
    fn missing_file_is_none() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read(&t.path().join("cpu")).unwrap(), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_near_valid(a in 0.0f64..200.0, t in proptest::num::u64::ANY, cut in 0usize..80) {
            let s = format!("some avg10={a:.2} avg60=1.00 avg300=0.50 total={t}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
            let end = cut.min(s.len());
            let _ = parse(&s[..end]);
        }
        /// Files as `psi_show()` prints them (`some avg10=%lu.%02lu … total=%llu`), with and
        /// without the `full` line (5.13+ for cpu): parse to the values they were printed from.
        #[test]
        fn parses_what_the_kernel_prints(
            some in (proptest::array::uniform3(0u64..=10_000), proptest::num::u64::ANY),
            full in proptest::option::of((proptest::array::uniform3(0u64..=10_000), proptest::num::u64::ANY)),
        ) {
            use crate::testgen::{fmt_hundredths, hundredths_f64};
            let line = |name: &str, (a, t): ([u64; 3], u64)| format!(
                "{name} avg10={} avg60={} avg300={} total={t}\n",
                fmt_hundredths(a[0]), fmt_hundredths(a[1]), fmt_hundredths(a[2]));
            let psi = |(a, t): ([u64; 3], u64)| PsiLine {
                avg10: hundredths_f64(a[0]),
                avg60: hundredths_f64(a[1]),
                avg300: hundredths_f64(a[2]),
                total_us: t,
            };
            let mut text = line("some", some);
            if let Some(f) = full {
                text += &line("full", f);
            }
            let want = Pressure { some: psi(some), full: full.map(psi) };
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
