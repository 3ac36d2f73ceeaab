//! `/proc/<pid>/io`: a process's IO accounting (the figures `iotop -oPa` accumulates).
//!
//! `read_bytes`/`write_bytes` count bytes that reached (or were sent to) the storage layer;
//! `rchar`/`wchar` count every read/write syscall, page cache hits included. Read from the
//! thread-group directory, the figures cover all threads. Reading another user's process
//! needs ptrace-read rights (root or CAP_SYS_PTRACE).

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

/// Parses the text of `/proc/<pid>/io`. `read_bytes` and `write_bytes` are required (kernels
/// without CONFIG_TASK_IO_ACCOUNTING lack them).
pub fn parse(text: &str) -> Result<PidIo, String> {
    let mut io = PidIo::default();
    let (mut rb, mut wb) = (false, false);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = match v.trim().parse() {
            Ok(v) => v,
            Err(e) => return Err(format!("{k}: {e}")),
        };
        match k.trim() {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "syscr" => io.syscr = v,
            "syscw" => io.syscw = v,
            "read_bytes" => {
                io.read_bytes = v;
                rb = true;
            }
            "write_bytes" => {
                io.write_bytes = v;
                wb = true;
            }
            "cancelled_write_bytes" => io.cancelled_write_bytes = v,
            _ => {}
        }
    }
    if !(rb && wb) {
        return Err("no read_bytes/write_bytes (task IO accounting disabled?)".into());
    }
    Ok(io)
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

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
    }
}
