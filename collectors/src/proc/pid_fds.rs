//! A process's file descriptors: how many `/proc/<pid>/fd` lists (bounded), and the size of
//! its descriptor table (`FDSize:` of `/proc/<pid>/status`, the `max_fds` of its fdtable: a
//! power of two at least one above the highest descriptor open, so an upper bound of the
//! count that costs one small read).
//!
//! Our own reader: `procfs-core` counts descriptors through its `Process` (which opens
//! `/proc/<pid>` itself) and its `Status` model needs the whole file to parse; we need one
//! line and a bounded listing.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::ReadError;

/// `<root>/proc/<pid>/fd`.
pub fn fd_dir(host: &HostPaths, pid: u32) -> PathBuf {
    host.proc_pid(pid).join("fd")
}

/// The open descriptors of `pid`, counting at most `max`: `(count, stopped at max)`.
pub fn count(host: &HostPaths, pid: u32, max: usize) -> Result<(u64, bool), ReadError> {
    let dir = fd_dir(host, pid);
    let n = crate::hostfs::dir_entries(&dir, max.saturating_add(1))?.count();
    Ok((n.min(max) as u64, n > max))
}

/// `FDSize:` of a `status` text.
pub fn parse_fd_size(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `pid`'s descriptor-table size; `None` when it exited or the line is missing.
pub fn fd_size(host: &HostPaths, pid: u32) -> Option<u64> {
    let p = host.proc_pid(pid).join("status");
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::COUNTERS).ok()?;
    parse_fd_size(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_size_line() {
        assert_eq!(
            parse_fd_size("Name:\tbash\nUmask:\t0022\nFDSize:\t256\nGroups:\t0\n"),
            Some(256)
        );
        assert_eq!(parse_fd_size("FDSize: x\n"), None);
        assert_eq!(parse_fd_size(""), None);
    }

    #[test]
    fn counts_its_own_descriptors_with_a_cap() {
        let host = HostPaths::new("/");
        let me = std::process::id();
        let (n, more) = count(&host, me, 1 << 20).unwrap();
        assert!(n >= 3 && !more, "{n}");
        let (n, more) = count(&host, me, 2).unwrap();
        assert_eq!((n, more), (2, true));
        assert!(fd_size(&host, me).is_some_and(|s| s >= 64));
    }
}
