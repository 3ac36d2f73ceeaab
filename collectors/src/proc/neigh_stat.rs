//! `/proc/net/stat/arp_cache` and `/proc/net/stat/ndisc_cache`: the statistics of the
//! kernel's IPv4 (ARP) and IPv6 (NDP) neighbour tables (net/core/neighbour.c,
//! `neigh_stat_seq_show`).
//!
//! A header naming the columns and one line per possible CPU, every value in hexadecimal:
//!
//! ```text
//! entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls
//! 00000002 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         00000000         00000000       00000000            00000000
//! ```
//!
//! `entries` is the table-wide count (`atomic_read(&tbl->entries)`, the same on every line);
//! every other column is a per-CPU counter, summed here. A neighbour table is shared by every
//! network namespace, and the kernel creates these files in the initial namespace's
//! `/proc/net/stat` only (a new namespace has none: checked on 6.18), so they are read
//! through pid 1 (`<root>/proc/1/net/stat/...`). Columns are found by name: 2.6 kernels lack
//! `unresolved_discards` and `table_fulls` came in 2.6.20.
//!
//! Our own parser: `procfs-core` has no model of these files.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a neighbour stat text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty file")]
    Empty,
    #[error("header has no `entries` column")]
    NoEntriesColumn,
    #[error("line {line}: expected {expected} values, found {found}")]
    ColumnCount {
        line: usize,
        expected: usize,
        found: usize,
    },
    #[error("line {line}: `{value}` is not a hexadecimal number")]
    BadNumber { line: usize, value: String },
    #[error("no CPU lines after the header")]
    NoCpuLines,
}

/// One neighbour table's statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NeighStat {
    /// Entries in the table now (all namespaces).
    pub entries: u64,
    /// Allocations refused because the table was full after a forced collection
    /// (`table_fulls`; the kernel logs `neighbor table overflow!` for them). `None` when the
    /// kernel does not print the column.
    pub table_fulls: Option<u64>,
    /// Forced garbage collections (the table reached `gc_thresh2` for 5 s or `gc_thresh3`).
    pub forced_gc_runs: Option<u64>,
    /// CPU lines read.
    pub cpus: usize,
}

/// Parses the text of `arp_cache` or `ndisc_cache`.
pub fn parse(text: &str) -> Result<NeighStat, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or(ParseError::Empty)?;
    let names: Vec<&str> = header.split_whitespace().collect();
    let col = |n: &str| names.iter().position(|c| *c == n);
    let entries_at = col("entries").ok_or(ParseError::NoEntriesColumn)?;
    let fulls_at = col("table_fulls");
    let forced_at = col("forced_gc_runs");
    let mut out = NeighStat {
        table_fulls: fulls_at.map(|_| 0),
        forced_gc_runs: forced_at.map(|_| 0),
        ..NeighStat::default()
    };
    for (idx, line) in lines {
        let line_no = idx + 1;
        let values = line
            .split_whitespace()
            .map(|raw| {
                u64::from_str_radix(raw, 16).map_err(|_| ParseError::BadNumber {
                    line: line_no,
                    value: raw.chars().take(32).collect(),
                })
            })
            .collect::<Result<Vec<u64>, _>>()?;
        if values.len() != names.len() {
            return Err(ParseError::ColumnCount {
                line: line_no,
                expected: names.len(),
                found: values.len(),
            });
        }
        if out.cpus == 0 {
            out.entries = values[entries_at];
        }
        let add = |slot: &mut Option<u64>, at: Option<usize>| {
            if let (Some(s), Some(i)) = (slot.as_mut(), at) {
                *s = s.saturating_add(values[i]);
            }
        };
        add(&mut out.table_fulls, fulls_at);
        add(&mut out.forced_gc_runs, forced_at);
        out.cpus += 1;
    }
    if out.cpus == 0 {
        return Err(ParseError::NoCpuLines);
    }
    Ok(out)
}

/// `<root>/proc/1/net/stat/<table>` (`arp_cache`, `ndisc_cache`): the initial namespace's.
pub fn path(host: &HostPaths, table: &str) -> PathBuf {
    host.proc_pid(1).join("net/stat").join(table)
}

/// Reads and parses one table's statistics.
pub fn read(host: &HostPaths, table: &str) -> Result<NeighStat, ReadError> {
    let p = path(host, table);
    let text = crate::hostfs::read_text(&p, crate::hostfs::cap::PER_CPU_TABLE)?;
    parse(&text).map_err(|e| ReadError::parse(&p, e))
}

/// Parses a `gc_thresh` sysctl (one number).
pub fn parse_thresh(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Reads `gc_thresh1..3` of `<root>/proc/sys/net/<family>/neigh/default` (`family`: `ipv4`,
/// `ipv6`). The kernel registers the `default` directory, whose `gc_thresh*` are the
/// table's own (global) values, in the initial network namespace only (a new namespace has
/// none: checked on 6.18), so only a reader in the host's namespace sees them.
pub fn read_gc_thresh(host: &HostPaths, family: &str) -> Result<[u64; 3], ReadError> {
    let dir = host.proc_file("sys/net").join(family).join("neigh/default");
    let mut out = [0u64; 3];
    for (i, slot) in out.iter_mut().enumerate() {
        let p = dir.join(format!("gc_thresh{}", i + 1));
        let text = crate::hostfs::read_text(&p, crate::hostfs::cap::VALUE)?;
        *slot = parse_thresh(&text).ok_or_else(|| ReadError::parse(&p, "not a number"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM's Linux 6.18, 2 CPUs (`cat /proc/net/stat/arp_cache`).
    pub(crate) const ARP_LINUX_6_18: &str = "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n\
00000002 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         00000000         00000000       00000000            00000000\n\
00000002 00000099 00000095 00000000   0000017c 0000000c 00000000   00000000         00000000         000005c7         00000000       00000000            00000000\n";

    #[test]
    fn this_kernels_format() {
        let s = parse(ARP_LINUX_6_18).unwrap();
        assert_eq!(
            s,
            NeighStat {
                entries: 2,
                table_fulls: Some(0),
                forced_gc_runs: Some(0),
                cpus: 2
            }
        );
    }

    #[test]
    fn entries_are_not_summed_counters_are() {
        let full = "entries  allocs forced_gc_runs table_fulls\n\
00000400 00000010 00000003 0000000a\n\
00000400 00000020 00000004 00000005\n";
        let s = parse(full).unwrap();
        assert_eq!(s.entries, 1024);
        assert_eq!(s.table_fulls, Some(15));
        assert_eq!(s.forced_gc_runs, Some(7));
    }

    #[test]
    fn older_kernels_without_table_fulls() {
        let s = parse("entries allocs\n00000001 00000002\n").unwrap();
        assert_eq!(
            (s.entries, s.table_fulls, s.forced_gc_runs),
            (1, None, None)
        );
    }

    #[test]
    fn refuses_garbage() {
        assert_eq!(parse(""), Err(ParseError::Empty));
        assert_eq!(parse("allocs\n1\n"), Err(ParseError::NoEntriesColumn));
        assert_eq!(parse("entries\n"), Err(ParseError::NoCpuLines));
        assert!(parse("entries x\n1\n").is_err());
        assert!(parse("entries\nzz\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = parse(&format!("entries table_fulls\n{s}"));
        }
        /// Tables as `neigh_stat_seq_show()` prints them under the 6.18 header: `entries`
        /// from the first CPU line, `table_fulls` and `forced_gc_runs` summed over CPUs
        /// (saturating), under an older header without them `None`.
        #[test]
        fn parses_what_the_kernel_prints(
            entries in proptest::num::u32::ANY,
            cpus in proptest::collection::vec(proptest::collection::vec(proptest::num::u64::ANY, 12), 1..6),
            old_header in proptest::bool::ANY,
        ) {
            let header = ARP_LINUX_6_18.lines().next().unwrap_or_default();
            let header = if old_header {
                header.replace(" forced_gc_runs", "").replace(" table_fulls", "")
            } else {
                header.to_string()
            };
            let columns = header.split_whitespace().count() - 1;
            let rows: Vec<Vec<u64>> = cpus
                .iter()
                .map(|c| std::iter::once(u64::from(entries)).chain(c[..columns].iter().copied()).collect())
                .collect();
            let sum = |i: usize| cpus.iter().fold(0u64, |a, c| a.saturating_add(c[i]));
            let want = NeighStat {
                entries: u64::from(entries),
                // Columns after `entries`: forced_gc_runs is the 10th, table_fulls the 12th.
                table_fulls: (!old_header).then(|| sum(11)),
                forced_gc_runs: (!old_header).then(|| sum(9)),
                cpus: cpus.len(),
            };
            proptest::prop_assert_eq!(parse(&crate::testgen::hex_cpu_table(&header, &rows)), Ok(want));
        }
    }
}
