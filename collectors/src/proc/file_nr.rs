//! `/proc/sys/fs/file-nr`, `file-max` and `nr_open`: the kernel's open-file table and its
//! limits (Documentation/admin-guide/sysctl/fs.rst).
//!
//! `file-nr` is three numbers: file handles allocated, allocated but unused (always 0 since
//! 2.6: freed handles are freed at once), and `file-max`. `file-max` is the most handles the
//! kernel allocates for the whole machine; `nr_open` the highest `RLIMIT_NOFILE` a process may
//! set. All three are global (not per namespace).
//!
//! Our own parser: `procfs-core` has no model of these files.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `file-nr` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("expected {expected} numbers, found {found}")]
    Count { expected: usize, found: usize },
    #[error("`{0}` is not a number")]
    BadNumber(String),
}

/// The three numbers of `file-nr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileNr {
    /// File handles allocated now.
    pub allocated: u64,
    /// Allocated but unused (0 on every kernel since 2.6).
    pub unused: u64,
    /// `file-max`, as `file-nr` prints it.
    pub max: u64,
}

fn numbers(text: &str) -> Result<Vec<u64>, ParseError> {
    text.split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .map_err(|_| ParseError::BadNumber(w.chars().take(32).collect()))
        })
        .collect()
}

/// Parses `file-nr` (`allocated unused max`, tab-separated).
pub fn parse(text: &str) -> Result<FileNr, ParseError> {
    let n = numbers(text)?;
    match n.as_slice() {
        [allocated, unused, max] => Ok(FileNr {
            allocated: *allocated,
            unused: *unused,
            max: *max,
        }),
        other => Err(ParseError::Count {
            expected: 3,
            found: other.len(),
        }),
    }
}

/// Parses a one-number sysctl (`file-max`, `nr_open`).
pub fn parse_value(text: &str) -> Result<u64, ParseError> {
    match numbers(text)?.as_slice() {
        [v] => Ok(*v),
        other => Err(ParseError::Count {
            expected: 1,
            found: other.len(),
        }),
    }
}

/// `<root>/proc/sys/fs/<name>`.
pub fn path(host: &HostPaths, name: &str) -> PathBuf {
    host.proc_file("sys/fs").join(name)
}

/// Reads `file-nr`.
pub fn read(host: &HostPaths) -> Result<FileNr, ReadError> {
    let p = path(host, "file-nr");
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::VALUE)?;
    parse(&text).map_err(|e| ReadError::parse(&p, e))
}

/// Reads a one-number file of `/proc/sys/fs` (`nr_open`, `file-max`).
pub fn read_value(host: &HostPaths, name: &str) -> Result<u64, ReadError> {
    let p = path(host, name);
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::VALUE)?;
    parse_value(&text).map_err(|e| ReadError::parse(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernels_format() {
        // Linux 6.18 (this VM): tab-separated, the middle field 0.
        assert_eq!(
            parse("205\t0\t2470938\n"),
            Ok(FileNr {
                allocated: 205,
                unused: 0,
                max: 2470938
            })
        );
        // file-max at its ceiling (LONG_MAX), as some distributions set it.
        assert_eq!(
            parse("1184\t0\t9223372036854775807\n").map(|f| f.max),
            Ok(9223372036854775807)
        );
        assert_eq!(parse_value("1048576\n"), Ok(1048576));
    }

    #[test]
    fn refuses_garbage() {
        assert!(parse("").is_err());
        assert!(parse("1 2").is_err());
        assert!(parse("1 2 3 4").is_err());
        assert!(parse("1 -2 3").is_err());
        assert!(parse_value("12 13").is_err());
        assert!(parse_value("x").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = parse_value(&s);
        }
        /// `file-nr` as the sysctl prints it (`%lu\t%lu\t%lu`) and a one-value file such
        /// as `nr_open`: the numbers read back in order.
        #[test]
        fn parses_what_the_kernel_prints(
            allocated in proptest::num::u64::ANY, unused in proptest::num::u64::ANY,
            max in proptest::num::u64::ANY,
        ) {
            proptest::prop_assert_eq!(
                parse(&format!("{allocated}\t{unused}\t{max}\n")),
                Ok(FileNr { allocated, unused, max })
            );
            proptest::prop_assert_eq!(parse_value(&format!("{max}\n")), Ok(max));
        }
    }
}
