//! `/proc/<pid>/io`: a process's IO accounting (the figures `iotop -oPa` accumulates).
//!
//! `read_bytes`/`write_bytes` count bytes that reached (or were sent to) the storage layer;
//! `rchar`/`wchar` count every read/write syscall, page cache hits included. Read from the
//! thread-group directory, the figures cover all threads. Reading another user's process
//! needs ptrace-read rights (root or CAP_SYS_PTRACE).
//!
//! Parsed by `procfs-core` ([`procfs_core::process::Io`]), which needs all seven lines. It cuts
//! the `:` off each key by byte, which panics on a key ending in a multi-byte character
//! (test `procfs_core_panics_on_a_non_ascii_key`); the kernel writes this file in ASCII, so
//! any other text is refused before it gets there.

use procfs_core::FromRead;

use crate::host::HostPaths;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidIo {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

/// Parses the text of `/proc/<pid>/io`. Kernels without CONFIG_TASK_IO_ACCOUNTING lack the
/// file's `read_bytes`/`write_bytes` lines: that is an error.
pub fn parse(text: &str) -> Result<PidIo, String> {
    if !text.is_ascii() {
        return Err("not ASCII text".into());
    }
    let io = procfs_core::process::Io::from_read(text.as_bytes())
        .map_err(|e| format!("{} (task IO accounting disabled?)", super::core_error(&e)))?;
    Ok(PidIo {
        rchar: io.rchar,
        wchar: io.wchar,
        syscr: io.syscr,
        syscw: io.syscw,
        read_bytes: io.read_bytes,
        write_bytes: io.write_bytes,
        cancelled_write_bytes: io.cancelled_write_bytes,
    })
}

/// Why `/proc/<pid>/io` could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoReadFailure {
    /// The pid exited (not an error).
    Gone,
    /// Reading needs ptrace-read rights we lack.
    Denied,
    /// The text did not parse.
    Unparsable,
}

/// Reads and parses `<root>/proc/<pid>/io`.
pub fn read(host: &HostPaths, pid: u32) -> Result<PidIo, IoReadFailure> {
    read_with(host, pid, &mut Vec::new())
}

/// Like [`read`], reusing `buf` for the file's bytes.
pub fn read_with(host: &HostPaths, pid: u32, buf: &mut Vec<u8>) -> Result<PidIo, IoReadFailure> {
    match crate::proc::pid::read_proc_file(&host.proc_pid(pid).join("io"), buf) {
        Ok(()) => std::str::from_utf8(buf)
            .map_err(|_| IoReadFailure::Unparsable)
            .and_then(|t| parse(t).map_err(|_| IoReadFailure::Unparsable)),
        Err(e) if e.is_permission_denied() => Err(IoReadFailure::Denied),
        // A FIFO or an oversized file in a fake root is no process's IO accounting.
        Err(e) if e.is_refused() => Err(IoReadFailure::Unparsable),
        Err(_) => Err(IoReadFailure::Gone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18, `cat /proc/self/io` of a fresh shell.
    const IO_618: &str = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
    // Linux 4.14, mysqld on a busy node.
    const IO_MYSQLD: &str = "rchar: 181926331829\nwchar: 96347822371\nsyscr: 40213889\nsyscw: 29117762\nread_bytes: 7618420736\nwrite_bytes: 224365039616\ncancelled_write_bytes: 1286144\n";

    #[test]
    fn parses_real_files() {
        let a = parse(IO_618).unwrap();
        assert_eq!((a.rchar, a.syscr, a.read_bytes), (6976, 10, 0));
        let m = parse(IO_MYSQLD).unwrap();
        assert_eq!(m.write_bytes, 224365039616);
        assert_eq!(m.read_bytes, 7618420736);
        assert_eq!(m.cancelled_write_bytes, 1286144);
    }

    #[test]
    fn missing_accounting_is_an_error() {
        assert!(parse("rchar: 1\nwchar: 2\n").is_err());
        assert!(parse("read_bytes: x\nwrite_bytes: 1").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn procfs_core_panics_on_a_non_ascii_key() {
        // Why parse refuses non-ASCII text before handing it to procfs-core.
        let bad = "rché 1\n";
        let core = std::panic::catch_unwind(|| {
            let _ = procfs_core::process::Io::from_read(bad.as_bytes());
        });
        assert!(core.is_err(), "procfs-core no longer panics on {bad:?}");
        assert!(parse(bad).is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_io_lines(lines in proptest::collection::vec("[a-zé_]{0,12}:? ?[0-9x]{0,21}", 0..10)) {
            let _ = parse(&lines.join("\n"));
        }
        /// `proc_pid_io_accounting()`'s seven `%s: %llu` lines: every counter reads back.
        #[test]
        fn parses_what_the_kernel_prints(v in proptest::array::uniform7(proptest::num::u64::ANY)) {
            let text = format!(
                "rchar: {}\nwchar: {}\nsyscr: {}\nsyscw: {}\nread_bytes: {}\nwrite_bytes: {}\ncancelled_write_bytes: {}\n",
                v[0], v[1], v[2], v[3], v[4], v[5], v[6],
            );
            let want = PidIo {
                rchar: v[0], wchar: v[1], syscr: v[2], syscw: v[3],
                read_bytes: v[4], write_bytes: v[5], cancelled_write_bytes: v[6],
            };
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
