//! `/proc/net/sockstat` and `sockstat6`: socket counts per protocol (net/ipv4/proc.c,
//! `sockstat_seq_show`).
//!
//! ```text
//! sockets: used 11
//! TCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102
//! UDP: inuse 0 mem 0
//! ```
//!
//! Which figures are whose (checked on 6.18 in a new network namespace, which prints the same
//! `orphan`, `alloc` and `mem`): `inuse` and `tw` count the reader's network namespace;
//! `orphan` (`tcp_orphan_count`), `alloc` (`tcp_sockets_allocated`) and `mem`
//! (`tcp_memory_allocated`, in pages) are global, which is what `tcp_max_orphans` and
//! `tcp_mem` bound. Read through pid 1 so that `inuse` is the host namespace's.
//!
//! Our own parser: `procfs-core` has no model of these files.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a sockstat text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no `TCP:` line")]
    NoTcp,
}

/// The `TCP:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tcp {
    /// Sockets in use in the reader's namespace.
    pub inuse: Option<u64>,
    /// Orphaned sockets (closed by their process, still in the kernel): global.
    pub orphan: Option<u64>,
    /// TIME_WAIT sockets of the reader's namespace.
    pub tw: Option<u64>,
    /// TCP sockets allocated: global.
    pub alloc: Option<u64>,
    /// Memory of all TCP sockets, in pages: global, what `tcp_mem` bounds.
    pub mem_pages: Option<u64>,
}

/// Parses the `TCP:` line of `sockstat` (unknown keys and malformed values are skipped; a
/// value the kernel did not print is `None`).
pub fn parse(text: &str) -> Result<Tcp, ParseError> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("TCP:"))
        .ok_or(ParseError::NoTcp)?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut t = Tcp::default();
    for pair in words.chunks(2) {
        let [key, value] = pair else { continue };
        let Ok(v) = value.parse::<u64>() else {
            continue;
        };
        match *key {
            "inuse" => t.inuse = Some(v),
            "orphan" => t.orphan = Some(v),
            "tw" => t.tw = Some(v),
            "alloc" => t.alloc = Some(v),
            "mem" => t.mem_pages = Some(v),
            _ => {}
        }
    }
    Ok(t)
}

/// `TCP6: inuse N` of `sockstat6`.
pub fn parse_tcp6_inuse(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP6:"))?;
    let mut words = line.split_whitespace();
    while let Some(k) = words.next() {
        let v = words.next()?;
        if k == "inuse" {
            return v.parse().ok();
        }
    }
    None
}

/// `<root>/proc/1/net/<file>` (`sockstat`, `sockstat6`): the host namespace's.
pub fn path(host: &HostPaths, file: &str) -> PathBuf {
    host.proc_pid(1).join("net").join(file)
}

/// Reads the host's `sockstat`.
pub fn read(host: &HostPaths) -> Result<Tcp, ReadError> {
    let p = path(host, "sockstat");
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::VALUE)?;
    parse(&text).map_err(|e| ReadError::parse(&p, e))
}

/// Reads the host's IPv6 TCP sockets in use; `None` without IPv6 or on any error.
pub fn read_tcp6_inuse(host: &HostPaths) -> Option<u64> {
    let text =
        crate::hostfs::read_text(&path(host, "sockstat6"), crate::hostfs::cap::VALUE).ok()?;
    parse_tcp6_inuse(&text)
}

/// Parses `tcp_mem` (`min pressure max`, pages).
pub fn parse_tcp_mem(text: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    match v.as_slice() {
        [a, b, c] => Some([*a, *b, *c]),
        _ => None,
    }
}

/// Reads a global TCP sysctl of `<root>/proc/sys/net/ipv4` (`tcp_mem`, `tcp_max_orphans`):
/// they exist in the initial network namespace only (a new namespace has neither: checked on
/// 6.18), so only a reader in the host's namespace sees them.
pub fn read_ipv4_sysctl(host: &HostPaths, name: &str) -> Result<String, ReadError> {
    let p = host.proc_file("sys/net/ipv4").join(name);
    crate::hostfs::read_text(&p, crate::hostfs::cap::VALUE)
}

/// Reads `tcp_mem`.
pub fn read_tcp_mem(host: &HostPaths) -> Result<[u64; 3], ReadError> {
    let text = read_ipv4_sysctl(host, "tcp_mem")?;
    parse_tcp_mem(&text).ok_or_else(|| {
        ReadError::parse(
            host.proc_file("sys/net/ipv4/tcp_mem"),
            "expected three numbers",
        )
    })
}

/// Reads `tcp_max_orphans`.
pub fn read_max_orphans(host: &HostPaths) -> Result<u64, ReadError> {
    let text = read_ipv4_sysctl(host, "tcp_max_orphans")?;
    text.trim().parse().map_err(|_| {
        ReadError::parse(
            host.proc_file("sys/net/ipv4/tcp_max_orphans"),
            "not a number",
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn tcp_mem_line() {
        assert_eq!(
            parse_tcp_mem("288459\t384612\t576918\n"),
            Some([288459, 384612, 576918])
        );
        assert_eq!(parse_tcp_mem("1 2"), None);
        assert_eq!(parse_tcp_mem("1 2 x"), None);
    }

    use super::*;

    /// This VM's Linux 6.18.
    const LINUX_6_18: &str = "sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\nUDP: inuse 0 mem 0\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n";

    #[test]
    fn this_kernels_format() {
        assert_eq!(
            parse(LINUX_6_18),
            Ok(Tcp {
                inuse: Some(1),
                orphan: Some(0),
                tw: Some(0),
                alloc: Some(1),
                mem_pages: Some(102)
            })
        );
        assert_eq!(parse_tcp6_inuse("TCP6: inuse 7\nUDP6: inuse 0\n"), Some(7));
    }

    #[test]
    fn odd_lines() {
        assert_eq!(parse("UDP: inuse 0\n"), Err(ParseError::NoTcp));
        let t = parse("TCP: inuse x orphan 3 mem\n").unwrap();
        assert_eq!((t.inuse, t.orphan, t.mem_pages), (None, Some(3), None));
        assert_eq!(parse_tcp6_inuse("TCP6: inuse\n"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = parse(&format!("TCP:{s}"));
            let _ = parse_tcp6_inuse(&format!("TCP6:{s}"));
        }
        /// `sockstat_seq_show()`'s `TCP: inuse %d orphan %d tw %d alloc %d mem %ld` among
        /// the other protocol lines, `sockstat6`'s `TCP6: inuse %d`, and `tcp_mem` as the
        /// sysctl prints it (`%lu\t%lu\t%lu`): every number reads back.
        #[test]
        fn parses_what_the_kernel_prints(
            tcp in proptest::array::uniform4(0u32..=i32::MAX as u32), mem in 0u64..=i64::MAX as u64,
            tcp6 in 0u32..=i32::MAX as u32, limits in proptest::array::uniform3(proptest::num::u64::ANY),
        ) {
            let [inuse, orphan, tw, alloc] = tcp;
            let text = format!("sockets: used 11\nTCP: inuse {inuse} orphan {orphan} tw {tw} alloc {alloc} mem {mem}\n\
                                UDP: inuse 0 mem 0\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n");
            let some = |v: u32| Some(u64::from(v));
            let want = Tcp { inuse: some(inuse), orphan: some(orphan), tw: some(tw), alloc: some(alloc), mem_pages: Some(mem) };
            proptest::prop_assert_eq!(parse(&text), Ok(want));
            let six = format!("TCP6: inuse {tcp6}\nUDP6: inuse 0\nUDPLITE6: inuse 0\nRAW6: inuse 0\nFRAG6: inuse 0 memory 0\n");
            proptest::prop_assert_eq!(parse_tcp6_inuse(&six), Some(u64::from(tcp6)));
            let [a, b, c] = limits;
            proptest::prop_assert_eq!(parse_tcp_mem(&format!("{a}\t{b}\t{c}\n")), Some(limits));
        }
    }
}
