//! `/proc/<pid>/limits`: a process's resource limits; we need its `Max open files` line
//! (`RLIMIT_NOFILE`, soft and hard).
//!
//! ```text
//! Limit                     Soft Limit           Hard Limit           Units
//! Max open files            1048576              1048576              files
//! ```
//!
//! Our own parser: `procfs_core::process::Limits` models the file, but indexes its tokens by
//! `len - 3` and slices `[0..len - 3]`, which panics on a line of fewer than three words (a
//! hostile or truncated file; `procfs_core_limits_panics_on_a_short_line` shows it), and it
//! fails the whole file when any one of its sixteen limits is missing. We read one line and
//! skip the rest.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `limits` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no `Max open files` line")]
    NoOpenFiles,
    #[error("`Max open files`: `{0}` is neither a number nor `unlimited`")]
    BadValue(String),
}

/// `RLIMIT_NOFILE`: `None` is `unlimited` (not settable for this limit on Linux, but printed
/// as such by the format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

fn value(w: &str) -> Result<Option<u64>, ParseError> {
    if w == "unlimited" {
        return Ok(None);
    }
    w.parse()
        .map(Some)
        .map_err(|_| ParseError::BadValue(w.chars().take(32).collect()))
}

/// Parses the `Max open files` line of a `limits` file.
pub fn parse(text: &str) -> Result<OpenFiles, ParseError> {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("Max open files") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(soft), Some(hard)) = (words.next(), words.next()) else {
            return Err(ParseError::NoOpenFiles);
        };
        return Ok(OpenFiles {
            soft: value(soft)?,
            hard: value(hard)?,
        });
    }
    Err(ParseError::NoOpenFiles)
}

/// `<root>/proc/<pid>/limits`.
pub fn path(host: &HostPaths, pid: u32) -> PathBuf {
    host.proc_pid(pid).join("limits")
}

/// Reads a process's `RLIMIT_NOFILE`.
pub fn read(host: &HostPaths, pid: u32) -> Result<OpenFiles, ReadError> {
    let p = path(host, pid);
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::PID_RECORD)?;
    parse(&text).map_err(|e| ReadError::parse(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM's Linux 6.18 (`cat /proc/self/limits` of a shell).
    const LINUX_6_18: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
Max cpu time              unlimited            unlimited            seconds   \n\
Max file size             unlimited            unlimited            bytes     \n\
Max data size             unlimited            unlimited            bytes     \n\
Max stack size            8388608              unlimited            bytes     \n\
Max core file size        0                    unlimited            bytes     \n\
Max resident set          unlimited            unlimited            bytes     \n\
Max processes             7858                 7858                 processes \n\
Max open files            20000                20000                files     \n\
Max locked memory         8388608              8388608              bytes     \n\
Max address space         unlimited            unlimited            bytes     \n\
Max file locks            unlimited            unlimited            locks     \n\
Max pending signals       7858                 7858                 signals   \n\
Max msgqueue size         819200               819200               bytes     \n\
Max nice priority         0                    0                    \n\
Max realtime priority     0                    0                    \n\
Max realtime timeout      unlimited            unlimited            us        \n";

    #[test]
    fn this_kernels_format() {
        assert_eq!(
            parse(LINUX_6_18),
            Ok(OpenFiles {
                soft: Some(20000),
                hard: Some(20000)
            })
        );
        // containerd's systemd unit: LimitNOFILE=infinity reads as the kernel's nr_open.
        let soft_low = LINUX_6_18.replace(
            "Max open files            20000                20000",
            "Max open files            1024                 524288",
        );
        assert_eq!(
            parse(&soft_low),
            Ok(OpenFiles {
                soft: Some(1024),
                hard: Some(524288)
            })
        );
    }

    #[test]
    fn refuses_garbage() {
        assert_eq!(parse(""), Err(ParseError::NoOpenFiles));
        assert_eq!(parse("Max open files\n"), Err(ParseError::NoOpenFiles));
        assert!(matches!(
            parse("Max open files  x 3 files"),
            Err(ParseError::BadValue(_))
        ));
        assert_eq!(
            parse("Max open files unlimited unlimited files").map(|o| o.soft),
            Ok(None)
        );
    }

    #[test]
    fn procfs_core_limits_panics_on_a_short_line() {
        use procfs_core::FromRead;
        let hostile = format!("{LINUX_6_18}x\n");
        let r = std::panic::catch_unwind(|| {
            procfs_core::process::Limits::from_read(hostile.as_bytes()).is_ok()
        });
        // It panics (or, in a release build, errors on the whole file); ours reads the line.
        assert!(!matches!(r, Ok(true)), "procfs-core accepted it: {r:?}");
        assert_eq!(parse(&hostile).map(|o| o.soft), Ok(Some(20000)));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = parse(&format!("Max open files {s}"));
        }
        /// Every limit as `proc_pid_limits()` prints it (`%-25s %-20s %-20s %-10s`, a limit
        /// of `RLIM_INFINITY` as `unlimited`), names and units from this kernel's file: the
        /// `Max open files` pair reads back, unlimited as `None`.
        #[test]
        fn parses_what_the_kernel_prints(
            limits in proptest::collection::vec(
                proptest::array::uniform2(proptest::option::of(0..u64::MAX)), 16,
            ),
        ) {
            let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |n| n.to_string());
            let mut text = String::new();
            let mut want = None;
            for (row, [soft, hard]) in LINUX_6_18.lines().zip(std::iter::once([None, None]).chain(limits)) {
                if row.starts_with("Limit") {
                    text += &format!("{row}\n");
                    continue;
                }
                let (name, unit) = (row[..25].trim_end(), row[25 + 21 + 21..].trim_end());
                text += &format!("{name:<25} {:<20} {:<20} {unit:<10}\n", show(soft), show(hard));
                if name == "Max open files" {
                    want = Some(OpenFiles { soft, hard });
                }
            }
            proptest::prop_assert_eq!(parse(&text).ok(), want);
        }
    }
}
