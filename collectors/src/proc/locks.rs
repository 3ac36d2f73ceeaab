//! `/proc/locks`: the kernel's table of file locks, holders and blocked waiters.
//!
//! One line per lock; a lock that is waiting for another one is printed right after it with
//! a `->` marker (kernels since 5.x print nested waiters with more indentation before `->`):
//!
//! ```text
//! 5: FLOCK  ADVISORY  WRITE 9870 fe:00:10010993 0 EOF
//! 5: -> FLOCK  ADVISORY  WRITE 9945 fe:00:10010993 0 EOF
//! 1: OFDLCK ADVISORY  WRITE -1 fe:00:10011101 20 EOF
//! ```
//!
//! Fields: ordinal, optional `->`, class (`FLOCK`, `POSIX`, `OFDLCK`, `LEASE`, `DELEG`, and the
//! `UNKNOWN`), mode (`ADVISORY`, `MANDATORY`, or a lease's `ACTIVE`,
//! `BREAKING`, `BREAKER`, or `MSNFS` for old `LOCK_MAND` flocks), access (`READ`, `WRITE`, `UNLCK`, `RW`, `NONE`), pid (`-1` for OFD
//! locks, `0` for a holder outside our pid namespace), `major:minor:inode` (major and minor in
//! hex, inode in decimal), start and end (`EOF` or an offset).
//!
//! Our own parser: `procfs-core`'s `Lock` drops the `->` marker, so a blocked waiter reads
//! as one more holder of the same file, and the `iptables` collector's question is exactly
//! who holds the xtables lock and who waits for it (test `procfs_core_loses_the_waiter_marker`).

use crate::host::HostPaths;
use crate::ReadError;

/// The kind of lock, as the first word of the line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockClass {
    Flock,
    Posix,
    /// Open file description lock (`F_OFD_SETLK`), printed as `OFDLCK`; its pid is `-1`.
    Ofd,
    Lease,
    Deleg,
    /// Anything else a kernel may print (e.g. `UNKNOWN`).
    Other(String),
}

impl LockClass {
    fn parse(s: &str) -> LockClass {
        match s {
            "FLOCK" => LockClass::Flock,
            "POSIX" => LockClass::Posix,
            "OFDLCK" => LockClass::Ofd,
            "LEASE" => LockClass::Lease,
            "DELEG" => LockClass::Deleg,
            other => LockClass::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            LockClass::Flock => "FLOCK",
            LockClass::Posix => "POSIX",
            LockClass::Ofd => "OFDLCK",
            LockClass::Lease => "LEASE",
            LockClass::Deleg => "DELEG",
            LockClass::Other(s) => s,
        }
    }
}

/// One line of `/proc/locks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// The ordinal of the lock (a waiter shares the ordinal of the lock it waits for).
    pub ordinal: u64,
    /// True for a `->` line: this process is blocked waiting, it does not hold the lock.
    pub waiter: bool,
    pub class: LockClass,
    /// `ADVISORY`, `MANDATORY`, or a lease state (`ACTIVE`, `BREAKING`, `BREAKER`).
    pub mode: String,
    /// `READ`, `WRITE`, `UNLCK`, `RW`, `NONE`.
    pub access: String,
    /// The owning process; `None` for OFD locks (`-1`) and for holders outside our pid
    /// namespace (`0`).
    pub pid: Option<u32>,
    /// Device of the locked file, as `MAJOR(s_dev):MINOR(s_dev)`.
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
    /// First locked byte.
    pub start: u64,
    /// Last locked byte; `None` for `EOF` (to the end of the file).
    pub end: Option<u64>,
}

impl LockEntry {
    /// True when this entry is about the file with this device and inode.
    pub fn is_on(&self, major: u32, minor: u32, inode: u64) -> bool {
        self.inode == inode && self.major == major && self.minor == minor
    }
}

/// A line of `/proc/locks` that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Parses the whole text of `/proc/locks`. Blank lines are skipped; any malformed line is an
/// error naming its line number (a newer kernel format should be noticed, not half-read).
pub fn parse(text: &str) -> Result<Vec<LockEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry = parse_line(line).map_err(|message| ParseError {
            line: i + 1,
            message,
        })?;
        out.push(entry);
    }
    Ok(out)
}

/// Parses one line of `/proc/locks`.
pub fn parse_line(line: &str) -> Result<LockEntry, String> {
    let mut words = line.split_whitespace().peekable();
    let ord = words.next().ok_or("empty line")?;
    let ordinal = ord
        .strip_suffix(':')
        .ok_or_else(|| format!("ordinal {ord:?} lacks ':'"))?
        .parse::<u64>()
        .map_err(|e| format!("ordinal {ord:?}: {e}"))?;
    let mut waiter = false;
    while words.peek() == Some(&"->") {
        waiter = true;
        words.next();
    }
    let mut next = |what: &str| words.next().ok_or_else(|| format!("missing {what}"));
    let class = LockClass::parse(next("lock class")?);
    let mode = next("mode")?.to_string();
    let access = next("access")?.to_string();
    let pid_s = next("pid")?;
    let pid_n = pid_s
        .parse::<i64>()
        .map_err(|e| format!("pid {pid_s:?}: {e}"))?;
    let pid = u32::try_from(pid_n).ok().filter(|p| *p > 0);
    let id = next("maj:min:inode")?;
    let mut parts = id.splitn(3, ':');
    let (Some(maj), Some(min), Some(ino)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("{id:?} is not maj:min:inode"));
    };
    let major = u32::from_str_radix(maj, 16).map_err(|e| format!("major {maj:?}: {e}"))?;
    let minor = u32::from_str_radix(min, 16).map_err(|e| format!("minor {min:?}: {e}"))?;
    let inode = ino
        .parse::<u64>()
        .map_err(|e| format!("inode {ino:?}: {e}"))?;
    let start_s = next("start")?;
    let start = start_s
        .parse::<u64>()
        .map_err(|e| format!("start {start_s:?}: {e}"))?;
    let end_s = next("end")?;
    let end = if end_s == "EOF" {
        None
    } else {
        Some(
            end_s
                .parse::<u64>()
                .map_err(|e| format!("end {end_s:?}: {e}"))?,
        )
    };
    Ok(LockEntry {
        ordinal,
        waiter,
        class,
        mode,
        access,
        pid,
        major,
        minor,
        inode,
        start,
        end,
    })
}

/// Parses only the lines about one file (`maj:min:inode` as the kernel prints it, `%02x:%02x:%lu`).
/// On a busy node `/proc/locks` has thousands of lines about other files, and skipping them
/// before splitting keeps a read cheap; [`scan_for`] does the same line by line as it reads
/// (the reference it is tested against).
pub fn parse_for(
    text: &str,
    major: u32,
    minor: u32,
    inode: u64,
) -> Result<Vec<LockEntry>, ParseError> {
    let id = format!(" {major:02x}:{minor:02x}:{inode} ");
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if !line.contains(&id) {
            continue;
        }
        let entry = parse_line(line).map_err(|message| ParseError {
            line: i + 1,
            message,
        })?;
        if entry.is_on(major, minor, inode) {
            out.push(entry);
        }
    }
    Ok(out)
}

/// What [`scan_for`] read: the entries about one file, and how much of the table it took.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scan {
    pub entries: Vec<LockEntry>,
    /// Bytes of `/proc/locks` read.
    pub bytes: usize,
    /// True when the read stopped before the end of the table (see [`scan_for`]).
    pub stopped_early: bool,
}

/// Bytes asked of the kernel per `read` (procfs hands out at most a page per call anyway).
const SCAN_CHUNK: usize = 16 << 10;

/// Reads `<root>/proc/locks` line by line, keeping the lines about one file, and stops as soon
/// as the rest of the table cannot hold anything more about it: after an exclusive (`WRITE`)
/// `FLOCK` holder of the file and the `->` lines of its waiters, which the kernel prints right
/// after the lock they wait for. No other flock of the file can exist then (it would conflict
/// and wait, so it would be one of those `->` lines); only a POSIX or OFD lock on the same file,
/// which flock does not exclude, could be further down, and the xtables lock users take flocks.
///
/// The kernel regenerates `/proc/locks` from the start of its lock list on every `read`
/// (a page at a time), so the cost of a full read grows with the square of the table; stopping
/// early at the holder saves the rest. Same caps and refusals as every host read
/// ([`crate::hostfs`]): a regular file only, at most [`crate::hostfs::cap::LOCKS`] bytes.
pub fn scan_for(host: &HostPaths, major: u32, minor: u32, inode: u64) -> Result<Scan, ReadError> {
    use std::io::Read;
    let path = host.proc_file("locks");
    let cap = crate::hostfs::cap::LOCKS;
    let (mut file, _) = crate::hostfs::open_regular(&path)?;
    let mut filter = LineFilter::new(major, minor, inode);
    let mut scan = Scan::default();
    let mut buf = vec![0u8; SCAN_CHUNK];
    let mut pending: Vec<u8> = Vec::new();
    let mut line_no = 0usize;
    loop {
        let n = loop {
            match file.read(&mut buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::io(&path, e)),
            }
        };
        scan.bytes += n;
        if scan.bytes > cap {
            return Err(ReadError::TooLarge { path, cap });
        }
        let at_end = n == 0;
        pending.extend_from_slice(&buf[..n]);
        let mut start = 0;
        while let Some(len) = pending[start..].iter().position(|b| *b == b'\n') {
            let line = &pending[start..start + len];
            start += len + 1;
            line_no += 1;
            if filter.line(line, line_no, &path, &mut scan.entries)? {
                scan.stopped_early = true;
                return Ok(scan);
            }
        }
        pending.drain(..start);
        if at_end {
            if !pending.is_empty() {
                filter.line(&pending, line_no + 1, &path, &mut scan.entries)?;
            }
            return Ok(scan);
        }
    }
}

/// The line-by-line state of [`scan_for`].
struct LineFilter {
    id: String,
    major: u32,
    minor: u32,
    inode: u64,
    /// The ordinal of an exclusive flock holder of the file, once its line has been read.
    exclusive_holder: Option<u64>,
}

impl LineFilter {
    fn new(major: u32, minor: u32, inode: u64) -> LineFilter {
        LineFilter {
            id: format!(" {major:02x}:{minor:02x}:{inode} "),
            major,
            minor,
            inode,
            exclusive_holder: None,
        }
    }

    /// Takes one line; returns true when the scan can stop before this line.
    fn line(
        &mut self,
        bytes: &[u8],
        line_no: usize,
        path: &std::path::Path,
        out: &mut Vec<LockEntry>,
    ) -> Result<bool, ReadError> {
        let line = std::str::from_utf8(bytes).map_err(|e| {
            ReadError::parse(
                path,
                format!(
                    "line {line_no}: not UTF-8 text (invalid byte at {})",
                    e.valid_up_to()
                ),
            )
        })?;
        if let Some(ord) = self.exclusive_holder {
            let mut w = line.split_whitespace();
            let same_ordinal = w
                .next()
                .and_then(|o| o.strip_suffix(':'))
                .and_then(|o| o.parse::<u64>().ok())
                == Some(ord);
            if !(same_ordinal && w.next() == Some("->")) {
                return Ok(true);
            }
        }
        if line.trim().is_empty() || !line.contains(&self.id) {
            return Ok(false);
        }
        let entry = parse_line(line).map_err(|message| {
            ReadError::parse(
                path,
                ParseError {
                    line: line_no,
                    message,
                },
            )
        })?;
        if entry.is_on(self.major, self.minor, self.inode) {
            if !entry.waiter && entry.class == LockClass::Flock && entry.access == "WRITE" {
                self.exclusive_holder.get_or_insert(entry.ordinal);
            }
            out.push(entry);
        }
        Ok(false)
    }
}

/// Reads and parses `<root>/proc/locks`.
pub fn read(host: &HostPaths) -> Result<Vec<LockEntry>, ReadError> {
    let path = host.proc_file("locks");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::LOCKS)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

/// Splits a `st_dev` value into the major and minor numbers `/proc/locks` prints (glibc's
/// `gnu_dev_major`/`gnu_dev_minor` encoding).
pub fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (
        u32::try_from(major).unwrap_or(u32::MAX),
        u32::try_from(minor).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18 (this machine): `flock /tmp/lk1 sleep 8` holding, `flock /tmp/lk1 true`
    // blocked behind it, `flock -s` on lk2, python `lockf` on lk3.
    const LINUX_6_18: &str = "\
1: POSIX  ADVISORY  WRITE 9788 fe:00:382078 0 EOF
2: POSIX  ADVISORY  WRITE 9788 fe:00:382079 0 EOF
3: POSIX  ADVISORY  WRITE 9947 fe:00:10011004 0 EOF
4: FLOCK  ADVISORY  READ 9946 fe:00:10011003 0 EOF
5: FLOCK  ADVISORY  WRITE 9870 fe:00:10010993 0 EOF
5: -> FLOCK  ADVISORY  WRITE 9945 fe:00:10010993 0 EOF
6: POSIX  ADVISORY  WRITE 9788 fe:00:379054 0 EOF
";

    // Linux 6.18: two OFD locks (pid -1) with byte ranges, and a POSIX lockf waiting on them.
    const LINUX_6_18_OFD: &str = "\
1: OFDLCK ADVISORY  WRITE -1 fe:00:10011101 20 EOF
2: OFDLCK ADVISORY  READ -1 fe:00:10011101 0 9
2: -> POSIX  ADVISORY  WRITE 10321 fe:00:10011101 0 4
";

    // Linux 4.14 (CentOS 7 / TencentOS 2.4 era, the handbook's kernels): no OFD lines, a
    // lease, an xtables lock on tmpfs (00:13) held by kube-router with kube-proxy's
    // iptables-restore waiting.
    const LINUX_4_14: &str = "\
1: FLOCK  ADVISORY  WRITE 31337 00:13:19023 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4242 00:13:19023 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4243 00:13:19023 0 EOF
2: LEASE  ACTIVE    READ 1201 fd:01:2651 0 EOF
3: POSIX  ADVISORY  WRITE 988 fd:01:33582131 0 EOF
";

    // Linux 3.10 style (RHEL 7): MANDATORY, a LOCK_MAND flock (printed `MSNFS`, removed in 5.x) and
    // a byte range on 08:02.
    const LINUX_3_10: &str = "\
1: POSIX  MANDATORY WRITE 2110 08:02:4194369 0 EOF
2: FLOCK  MSNFS     READ  1877 08:02:1310723 0 EOF
3: POSIX  ADVISORY  READ  1573 08:02:2885693 128 128
";

    // Linux >= 5.x nested waiters (a waiter of a waiter is indented further).
    const NESTED: &str = "\
1: POSIX  ADVISORY  WRITE 11223 00:31:2 0 EOF
1: -> POSIX  ADVISORY  WRITE 11224 00:31:2 0 EOF
1:  -> POSIX  ADVISORY  WRITE 11225 00:31:2 0 EOF
";

    #[test]
    fn procfs_core_loses_the_waiter_marker() {
        use procfs_core::FromRead;
        let core = procfs_core::Locks::from_read(LINUX_6_18.as_bytes()).unwrap();
        // Lines 5 (holder 9870) and 6 (waiter 9945) come out the same but for the pid.
        let (holder, waiter) = (&core.0[4], &core.0[5]);
        assert_eq!((holder.pid, waiter.pid), (Some(9870), Some(9945)));
        assert_eq!(
            (holder.inode, holder.offset_first, holder.offset_last),
            (waiter.inode, waiter.offset_first, waiter.offset_last)
        );
        let ours = parse(LINUX_6_18).unwrap();
        assert!(!ours[4].waiter && ours[5].waiter);
    }

    #[test]
    fn parses_real_6_18_holders_and_waiters() {
        let v = parse(LINUX_6_18).unwrap();
        assert_eq!(v.len(), 7);
        let holder = &v[4];
        assert_eq!(holder.class, LockClass::Flock);
        assert!(!holder.waiter);
        assert_eq!(holder.pid, Some(9870));
        assert_eq!(
            (holder.major, holder.minor, holder.inode),
            (0xfe, 0, 10010993)
        );
        assert_eq!(holder.access, "WRITE");
        assert_eq!(holder.end, None);
        let waiter = &v[5];
        assert!(waiter.waiter);
        assert_eq!(waiter.ordinal, 5);
        assert_eq!(waiter.pid, Some(9945));
        assert_eq!(v[3].access, "READ");
        assert_eq!(v[0].class, LockClass::Posix);
        let on: Vec<_> = v
            .iter()
            .filter(|e| e.is_on(0xfe, 0, 10010993))
            .map(|e| (e.pid, e.waiter))
            .collect();
        assert_eq!(on, vec![(Some(9870), false), (Some(9945), true)]);
    }

    #[test]
    fn parses_ofd_with_no_pid_and_ranges() {
        let v = parse(LINUX_6_18_OFD).unwrap();
        assert_eq!(v[0].class, LockClass::Ofd);
        assert_eq!(v[0].pid, None);
        assert_eq!((v[0].start, v[0].end), (20, None));
        assert_eq!((v[1].start, v[1].end), (0, Some(9)));
        assert!(v[2].waiter);
        assert_eq!(v[2].class, LockClass::Posix);
        assert_eq!(v[2].pid, Some(10321));
    }

    #[test]
    fn parses_older_kernels() {
        let v = parse(LINUX_4_14).unwrap();
        assert_eq!(v.iter().filter(|e| e.waiter).count(), 2);
        assert_eq!((v[0].major, v[0].minor), (0, 0x13));
        assert_eq!(v[3].class, LockClass::Lease);
        assert_eq!(v[3].mode, "ACTIVE");
        let old = parse(LINUX_3_10).unwrap();
        assert_eq!(old[0].mode, "MANDATORY");
        assert_eq!(
            (&old[1].class, old[1].mode.as_str()),
            (&LockClass::Flock, "MSNFS")
        );
        let odd = parse_line("7: UNKNOWN UNKNOWN  UNLCK 3 00:13:9 0 EOF").unwrap();
        assert_eq!(odd.class, LockClass::Other("UNKNOWN".into()));
        assert_eq!((old[2].start, old[2].end), (128, Some(128)));
        assert_eq!((old[2].major, old[2].minor), (8, 2));
        let nested = parse(NESTED).unwrap();
        assert_eq!(
            nested.iter().map(|e| e.waiter).collect::<Vec<_>>(),
            vec![false, true, true]
        );
    }

    fn locks_root(text: &str) -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/locks"), text).unwrap();
        let h = HostPaths::new(t.path());
        (t, h)
    }

    /// `n` POSIX locks on other files, as databases and runtimes hold them.
    fn others(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| {
                format!(
                    "{i}: POSIX  ADVISORY  WRITE {} fd:01:{} 0 EOF\n",
                    1000 + i,
                    500_000 + i
                )
            })
            .collect()
    }

    #[test]
    fn scan_stops_after_an_exclusive_flock_holder_and_its_waiters() {
        // Linux 6.18 prints nested waiters (blocked on a blocked lock) with more indentation.
        let text = format!(
            "{}2001: FLOCK  ADVISORY  WRITE 31337 00:13:19023 0 EOF\n\
             2001: -> FLOCK  ADVISORY  WRITE 4242 00:13:19023 0 EOF\n\
             2001:  -> FLOCK  ADVISORY  WRITE 4243 00:13:19023 0 EOF\n{}",
            others(1, 2000),
            others(2002, 2000)
        );
        let (_t, h) = locks_root(&text);
        let s = scan_for(&h, 0, 0x13, 19023).unwrap();
        assert_eq!(
            s.entries
                .iter()
                .map(|e| (e.pid, e.waiter))
                .collect::<Vec<_>>(),
            vec![(Some(31337), false), (Some(4242), true), (Some(4243), true)]
        );
        assert!(s.stopped_early);
        assert!(s.bytes < text.len(), "{} of {}", s.bytes, text.len());
        // What the whole-table parser finds is the same.
        assert_eq!(s.entries, parse_for(&text, 0, 0x13, 19023).unwrap());
    }

    #[test]
    fn scan_reads_to_the_end_when_it_cannot_stop() {
        // Shared (READ) flocks and POSIX locks may have other holders further down.
        let text = format!(
            "{}1: FLOCK  ADVISORY  READ 10 00:13:19023 0 EOF\n{}\
             3000: FLOCK  ADVISORY  READ 11 00:13:19023 0 EOF\n\
             3001: POSIX  ADVISORY  WRITE 12 00:13:19023 0 EOF",
            others(100, 5),
            others(200, 1000)
        );
        let (_t, h) = locks_root(&text);
        let s = scan_for(&h, 0, 0x13, 19023).unwrap();
        assert!(!s.stopped_early);
        assert_eq!(s.bytes, text.len());
        assert_eq!(
            s.entries.iter().map(|e| e.pid).collect::<Vec<_>>(),
            vec![Some(10), Some(11), Some(12)],
            "the last line has no newline and is read too"
        );
        assert_eq!(s.entries, parse_for(&text, 0, 0x13, 19023).unwrap());
        // Nothing about the file: the whole table, no entries.
        let s = scan_for(&h, 0, 0x13, 1).unwrap();
        assert!(s.entries.is_empty() && !s.stopped_early);
    }

    #[test]
    fn scan_refuses_garbage_and_oversized_tables() {
        let (_t, h) = locks_root("1: FLOCK  ADVISORY  WRITE x 00:13:19023 0 EOF\n");
        let e = scan_for(&h, 0, 0x13, 19023).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("pid"), "{e}");
        let (t, h) = locks_root("");
        std::fs::write(t.path().join("proc/locks"), b"1: FLOCK \xff\n").unwrap();
        let e = scan_for(&h, 0, 0x13, 19023).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        let big = others(1, crate::hostfs::cap::LOCKS / 40);
        let (_t, h) = locks_root(&big);
        assert!(matches!(
            scan_for(&h, 0, 0x13, 19023),
            Err(ReadError::TooLarge { .. })
        ));
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc/locks")).unwrap();
        assert!(matches!(
            scan_for(&HostPaths::new(t.path()), 0, 0x13, 19023),
            Err(ReadError::NotRegular { .. })
        ));
    }

    #[test]
    fn parse_for_keeps_only_one_file() {
        let v = parse_for(LINUX_6_18, 0xfe, 0, 10010993).unwrap();
        assert_eq!(
            v.iter().map(|e| (e.pid, e.waiter)).collect::<Vec<_>>(),
            vec![(Some(9870), false), (Some(9945), true)]
        );
        // The same lines through the full parser, filtered, agree.
        let all: Vec<_> = parse(LINUX_4_14)
            .unwrap()
            .into_iter()
            .filter(|e| e.is_on(0, 0x13, 19023))
            .collect();
        assert_eq!(parse_for(LINUX_4_14, 0, 0x13, 19023).unwrap(), all);
        assert_eq!(all.len(), 3);
        // A garbage line about another file does not matter; one about ours is an error.
        assert!(parse_for(
            "junk\n1: FLOCK ADVISORY WRITE 1 00:13:5 0 EOF\n",
            0,
            0x13,
            5
        )
        .is_ok());
        assert!(parse_for("1: FLOCK ADVISORY WRITE x 00:13:5 0 EOF\n", 0, 0x13, 5).is_err());
        // Inode 5 must not match inode 55.
        assert!(
            parse_for("1: FLOCK ADVISORY WRITE 1 00:13:55 0 EOF\n", 0, 0x13, 5)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn pid_zero_is_outside_our_namespace() {
        let e = parse_line("1: FLOCK  ADVISORY  WRITE 0 00:19:77 0 EOF").unwrap();
        assert_eq!(e.pid, None);
    }

    #[test]
    fn garbage_is_an_error_with_line_number() {
        let err = parse("1: FLOCK  ADVISORY  WRITE 1 00:13:5 0 EOF\nhello world\n").unwrap_err();
        assert_eq!(err.line, 2);
        for bad in [
            "1 FLOCK ADVISORY WRITE 1 00:13:5 0 EOF",
            "1: FLOCK ADVISORY WRITE x 00:13:5 0 EOF",
            "1: FLOCK ADVISORY WRITE 1 00:13 0 EOF",
            "1: FLOCK ADVISORY WRITE 1 zz:13:5 0 EOF",
            "1: FLOCK ADVISORY WRITE 1 00:13:5 0",
            "1: ->",
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("\n\n").unwrap(), vec![]);
    }

    #[test]
    fn dev_numbers_split_like_glibc() {
        assert_eq!(dev_major_minor(0xfe00), (0xfe, 0));
        assert_eq!(dev_major_minor(0x0013), (0, 0x13));
        // major 259 (nvme partitions), minor 3.
        assert_eq!(dev_major_minor((259 << 8) | 3), (259, 3));
        // minor above 255 uses the high bits.
        assert_eq!(
            dev_major_minor((1 << 8) | (0x123 & 0xff) | ((0x123 & !0xff) << 12)),
            (1, 0x123)
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
            let _ = parse_for(&s, 0, 0x13, 5);
        }
        /// Lines as `lock_get_status()` prints them (`%lld: `, `-> ` indented one more space
        /// per nesting level, padded class/mode/access, `%d %02x:%02x:%lu `, `%Ld EOF` or
        /// `%Ld %Ld`): every field reads back, pid `-1`/`0` as no pid.
        #[test]
        fn parses_what_the_kernel_prints(
            locks in proptest::collection::vec(
                (
                    0u64..100_000, 0usize..4,
                    proptest::sample::select(vec![
                        ("FLOCK", LockClass::Flock), ("POSIX", LockClass::Posix), ("OFDLCK", LockClass::Ofd),
                        ("LEASE", LockClass::Lease), ("DELEG", LockClass::Deleg),
                        ("ACCESS", LockClass::Other("ACCESS".into())),
                    ]),
                    proptest::sample::select(vec!["ADVISORY", "MANDATORY", "MSNFS", "ACTIVE", "BREAKING", "BREAKER"]),
                    proptest::sample::select(vec!["READ", "WRITE", "UNLCK", "RW", "NONE"]),
                    -1i32..=4_194_304,
                    (0u32..1 << 12, 0u32..1 << 20, proptest::num::u64::ANY),
                    (0u64..=i64::MAX as u64, proptest::option::of(0u64..=i64::MAX as u64)),
                ),
                0..12,
            ),
        ) {
            let mut text = String::new();
            let mut want = Vec::new();
            for (ordinal, depth, (class_s, class), mode, access, pid, (major, minor, inode), (start, end)) in locks {
                let arrow = if depth == 0 { String::new() } else { format!("{:>w$}", "-> ", w = depth + 2) };
                let end_s = end.map_or("EOF".to_string(), |e| e.to_string());
                text += &format!(
                    "{ordinal}: {arrow}{class_s:<6} {mode:<9} {access:<5} {pid} {major:02x}:{minor:02x}:{inode} {start} {end_s}\n"
                );
                want.push(LockEntry {
                    ordinal,
                    waiter: depth > 0,
                    class,
                    mode: mode.to_string(),
                    access: access.to_string(),
                    pid: u32::try_from(pid).ok().filter(|p| *p > 0),
                    major, minor, inode, start, end,
                });
            }
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
        /// Reading line by line finds what the whole-table parser finds, up to where it may
        /// stop: the same entries when it reads to the end, a prefix of them when it stops.
        #[test]
        fn scan_agrees_with_parse_for(
            lines in proptest::collection::vec(
                (0u64..4, proptest::bool::ANY, 0usize..3, 0usize..2, 1u32..5, 4u64..7),
                0..40,
            )
        ) {
            let text: String = lines
                .iter()
                .map(|(ord, waiter, class, access, pid, ino)| {
                    format!(
                        "{ord}: {}{} ADVISORY {} {pid} 00:13:{ino} 0 EOF\n",
                        if *waiter { "-> " } else { "" },
                        ["FLOCK", "POSIX", "OFDLCK"][*class],
                        ["WRITE", "READ"][*access],
                    )
                })
                .collect();
            let t = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(t.path().join("proc")).unwrap();
            std::fs::write(t.path().join("proc/locks"), &text).unwrap();
            let scan = scan_for(&HostPaths::new(t.path()), 0, 0x13, 5).unwrap();
            let all = parse_for(&text, 0, 0x13, 5).unwrap();
            if scan.stopped_early {
                proptest::prop_assert!(all.starts_with(&scan.entries));
            } else {
                proptest::prop_assert_eq!(scan.entries, all);
            }
        }
        #[test]
        fn never_panics_on_lockish_lines(s in "[0-9]{1,3}: (-> )?(FLOCK|POSIX|OFDLCK|X) +[A-Z]{0,9} +[A-Z]{0,5} -?[0-9]{0,6} [0-9a-f:]{0,12} [0-9]{0,4} (EOF|[0-9]{0,4})") {
            let _ = parse(&s);
        }
    }
}
