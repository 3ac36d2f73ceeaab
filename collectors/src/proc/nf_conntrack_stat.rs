//! `/proc/<pid>/net/stat/nf_conntrack`: the conntrack statistics of one network namespace.
//!
//! The file has a header line naming the columns and one line per possible CPU, every value
//! in hexadecimal. Kernels differ in the columns: 2.6.32 ends at `expect_delete`, 3.10/4.14
//! print `entries searched found new invalid ignore delete delete_list insert insert_failed
//! drop early_drop icmp_error expect_new expect_create expect_delete search_restart`, 5.x
//! replaced `searched` with `clashres` and later `delete_list` with `chainlength`. So columns
//! are found by their header name, never by position.
//!
//! `entries` is the namespace's entry count (the same on every CPU line, not summed); every
//! other column is a per-CPU counter, summed here across CPUs.
//!
//! Our own parser: `procfs-core` has no model of `net/stat/nf_conntrack`.

use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `nf_conntrack` stat text could not be understood.
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

/// The statistics of one namespace, summed across CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NfConntrackStat {
    /// Entries in the namespace's table (the `entries` column of the first CPU line).
    pub entries: u64,
    /// Every other column in header order, with its value summed across CPUs.
    pub counters: Vec<(String, u64)>,
    /// How many CPU lines the file had.
    pub cpus: usize,
}

impl NfConntrackStat {
    /// The summed value of a column, `None` when this kernel does not print it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// True when the kernel prints the column.
    pub fn has(&self, name: &str) -> bool {
        self.counters.iter().any(|(n, _)| n == name)
    }
}

/// Parses the text of a `nf_conntrack` stat file.
pub fn parse(text: &str) -> Result<NfConntrackStat, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or(ParseError::Empty)?;
    let names: Vec<&str> = header.split_whitespace().collect();
    let entries_at = names
        .iter()
        .position(|n| *n == "entries")
        .ok_or(ParseError::NoEntriesColumn)?;
    let mut out = NfConntrackStat {
        entries: 0,
        counters: names
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != entries_at)
            .map(|(_, n)| (n.to_string(), 0u64))
            .collect(),
        cpus: 0,
    };
    for (idx, line) in lines {
        let line_no = idx + 1;
        let values: Vec<&str> = line.split_whitespace().collect();
        if values.len() != names.len() {
            return Err(ParseError::ColumnCount {
                line: line_no,
                expected: names.len(),
                found: values.len(),
            });
        }
        let mut counter = 0usize;
        for (i, raw) in values.iter().enumerate() {
            let v = u64::from_str_radix(raw, 16).map_err(|_| ParseError::BadNumber {
                line: line_no,
                value: raw.chars().take(32).collect(),
            })?;
            if i == entries_at {
                if out.cpus == 0 {
                    out.entries = v;
                }
            } else {
                if let Some(slot) = out.counters.get_mut(counter) {
                    slot.1 = slot.1.saturating_add(v);
                }
                counter += 1;
            }
        }
        out.cpus += 1;
    }
    if out.cpus == 0 {
        return Err(ParseError::NoCpuLines);
    }
    Ok(out)
}

/// `<root>/proc/<pid>/net/stat/nf_conntrack`: the stat file as seen from `pid`'s namespace.
pub fn path(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/stat/nf_conntrack")
}

/// Reads and parses the stat file at `path`.
pub fn read(path: &Path) -> Result<NfConntrackStat, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::PER_CPU_TABLE)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINUX_6_18_TRAFFIC: &str =
        include_str!("../../tests/fixtures/conntrack/nf_conntrack_stat.linux-6.18.netns-traffic");
    const LINUX_6_18_IDLE: &str =
        include_str!("../../tests/fixtures/conntrack/nf_conntrack_stat.linux-6.18.host-idle");
    const LINUX_5_10: &str =
        include_str!("../../tests/fixtures/conntrack/nf_conntrack_stat.linux-5.10");
    const LINUX_3_10: &str =
        include_str!("../../tests/fixtures/conntrack/nf_conntrack_stat.linux-3.10");
    const LINUX_2_6_32: &str =
        include_str!("../../tests/fixtures/conntrack/nf_conntrack_stat.linux-2.6.32");

    #[test]
    fn kernel_6_18_newer_header_two_cpus() {
        // Read on this machine (kernel 6.18.44) in a namespace after 150 NATed UDP sends.
        let s = parse(LINUX_6_18_TRAFFIC).unwrap();
        assert_eq!(s.cpus, 2);
        assert_eq!(s.entries, 0x96); // 150, global: not summed over the two lines
        assert_eq!(s.get("found"), Some(0x129));
        assert_eq!(s.get("clashres"), Some(0));
        assert_eq!(s.get("chainlength"), Some(0));
        assert_eq!(s.get("searched"), None);
        assert_eq!(s.get("delete_list"), None);
        assert_eq!(s.counters.len(), 16);
        assert_eq!(s.counters[0].0, "clashres");
        assert_eq!(s.counters[15].0, "search_restart");
    }

    #[test]
    fn kernel_6_18_idle_host() {
        let s = parse(LINUX_6_18_IDLE).unwrap();
        assert_eq!(s.cpus, 2);
        assert_eq!(s.entries, 0);
        assert!(s.counters.iter().all(|(_, v)| *v == 0));
    }

    #[test]
    fn kernel_5_10_has_clashres_and_delete_list() {
        let s = parse(LINUX_5_10).unwrap();
        assert_eq!(s.cpus, 2);
        assert_eq!(s.entries, 0x3a98);
        assert_eq!(s.get("clashres"), Some(0x12c + 0xf1));
        assert_eq!(s.get("insert_failed"), Some(12));
        assert_eq!(s.get("drop"), Some(12));
        assert_eq!(s.get("search_restart"), Some(0x41 + 0x3c));
        assert!(s.has("delete_list"));
        assert!(!s.has("chainlength"));
    }

    #[test]
    fn kernel_3_10_older_header_four_cpus_summed() {
        let s = parse(LINUX_3_10).unwrap();
        assert_eq!(s.cpus, 4);
        assert_eq!(s.entries, 0x1d4c0); // 120000
        assert_eq!(s.get("insert_failed"), Some(0x7b + 0x65 + 0x88 + 0x71));
        assert_eq!(s.get("drop"), Some(4 + 1 + 3 + 2));
        assert_eq!(s.get("early_drop"), Some(0));
        assert_eq!(s.get("icmp_error"), Some(0x19 + 0x12 + 0x17 + 0x14));
        assert_eq!(s.get("insert"), Some(0x2b3c4 + 0x29a88 + 0x2c1d0 + 0x2a2b4));
        assert!(s.has("searched"));
        assert!(!s.has("clashres"));
    }

    #[test]
    fn kernel_2_6_32_without_search_restart_and_trailing_space() {
        let s = parse(LINUX_2_6_32).unwrap();
        assert_eq!(s.cpus, 2);
        assert_eq!(s.entries, 0xc35);
        assert_eq!(s.get("insert_failed"), Some(4));
        assert_eq!(s.get("search_restart"), None);
    }

    #[test]
    fn counters_above_u32_do_not_overflow() {
        let text = "entries insert_failed\nffffffff ffffffff\nffffffff ffffffff\n";
        let s = parse(text).unwrap();
        assert_eq!(s.entries, 0xffff_ffff);
        assert_eq!(s.get("insert_failed"), Some(2 * 0xffff_ffff));
    }

    #[test]
    fn garbage_is_an_error() {
        assert_eq!(parse(""), Err(ParseError::Empty));
        assert_eq!(parse("\n\n"), Err(ParseError::Empty));
        assert_eq!(parse("found drop\n1 2\n"), Err(ParseError::NoEntriesColumn));
        assert_eq!(parse("entries drop\n"), Err(ParseError::NoCpuLines));
        assert!(matches!(
            parse("entries drop\n00000001\n"),
            Err(ParseError::ColumnCount {
                line: 2,
                expected: 2,
                found: 1
            })
        ));
        assert!(matches!(
            parse("entries drop\n0000000g 00000001\n"),
            Err(ParseError::BadNumber { line: 2, .. })
        ));
    }

    #[test]
    fn read_adds_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nf_conntrack");
        std::fs::write(&p, "entries\nxyz\n").unwrap();
        let e = read(&p).unwrap_err();
        assert_eq!(e.path(), p.as_path());
        assert!(e.to_string().contains("not a hexadecimal"), "{e}");
        assert!(read(&dir.path().join("missing"))
            .unwrap_err()
            .is_not_found());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_hexish_tables(text in "(entries|found|drop| |[0-9a-f]{1,9}|\n){0,60}") {
            let _ = parse(&text);
        }

        /// Tables as `ct_cpu_seq_show()` prints them under each real kernel's header (taken
        /// from the fixtures): `%08x` per column, the same `entries` on every CPU line.
        /// `entries` reads from the first line, every other column is the sum over CPUs.
        #[test]
        fn parses_what_the_kernel_prints(
            fixture in prop::sample::select(vec![LINUX_2_6_32, LINUX_3_10, LINUX_5_10, LINUX_6_18_IDLE]),
            entries in any::<u32>(),
            cpus in prop::collection::vec(prop::collection::vec(any::<u32>(), 17), 1..6),
        ) {
            let header = fixture.lines().next().unwrap_or_default();
            let names: Vec<&str> = header.split_whitespace().skip(1).collect();
            let rows: Vec<Vec<u64>> = cpus
                .iter()
                .map(|c| std::iter::once(entries).chain(c[..names.len()].iter().copied()).map(u64::from).collect())
                .collect();
            let text = crate::testgen::hex_cpu_table(header, &rows);
            let counters = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), cpus.iter().map(|c| u64::from(c[i])).sum()))
                .collect();
            let want = NfConntrackStat { entries: u64::from(entries), counters, cpus: cpus.len() };
            prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
