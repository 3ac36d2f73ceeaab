//! `/proc/<pid>/net/snmp6`: the IPv6 counters of one network namespace, one line per counter:
//! the name padded with spaces to 32 columns, a tab, the value (`Udp6InErrors`, spaces, tab,
//! `0`). The file is absent when IPv6 is disabled (`ipv6.disable=1`).
//!
//! Our own parser: `procfs-core`'s `Snmp6` is a fixed struct that requires every counter it
//! names, `Udp6IgnoredMulti` (3.19) among them, so it refuses a 3.10 kernel's file, and it
//! has no field for the newer `Udp6MemErrors` (test `procfs_core_has_no_udp6_mem_errors`).

use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `snmp6` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: `{text}` is not a counter name and value")]
    BadLine { line: usize, text: String },
}

/// Every counter of the file, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snmp6 {
    pub counters: Vec<(String, u64)>,
}

impl Snmp6 {
    /// A counter's value, `None` when this kernel does not print it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// Parses the text of a `snmp6` file.
pub fn parse(text: &str) -> Result<Snmp6, ParseError> {
    let mut out = Snmp6::default();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let (Some(name), value, rest) = (words.next(), words.next(), words.next()) else {
            continue; // a blank line
        };
        let value = value.and_then(|v| v.parse::<u64>().ok());
        match (value, rest) {
            (Some(v), None) => out.counters.push((name.to_string(), v)),
            _ => {
                return Err(ParseError::BadLine {
                    line: i + 1,
                    text: line.chars().take(64).collect(),
                })
            }
        }
    }
    Ok(out)
}

/// `<root>/proc/<pid>/net/snmp6`.
pub fn path(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/snmp6")
}

/// Reads and parses the `snmp6` file at `path`.
pub fn read(path: &Path) -> Result<Snmp6, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINUX_6_18: &str = include_str!("../../tests/fixtures/net/snmp6.linux-6.18");

    #[test]
    fn kernel_6_18_udp6_counters() {
        // Copied from this machine (kernel 6.18.44).
        let s = parse(LINUX_6_18).unwrap();
        assert_eq!(s.counters.len(), 90);
        assert_eq!(s.get("Udp6InErrors"), Some(0));
        assert_eq!(s.get("Udp6RcvbufErrors"), Some(0));
        assert_eq!(s.get("Udp6MemErrors"), Some(0));
        assert_eq!(s.get("Ip6InReceives"), Some(4));
        assert_eq!(s.get("Udp6Nothing"), None);
    }

    #[test]
    fn procfs_core_has_no_udp6_mem_errors() {
        use procfs_core::FromRead;
        // It parses this kernel's file, but without its newest counter; a 3.10 file (no
        // Udp6IgnoredMulti) it refuses, where this parser reads what there is.
        assert!(procfs_core::net::Snmp6::from_read(LINUX_6_18.as_bytes()).is_ok());
        let old: String = LINUX_6_18
            .lines()
            .filter(|l| !l.starts_with("Udp6IgnoredMulti") && !l.starts_with("Udp6MemErrors"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(procfs_core::net::Snmp6::from_read(old.as_bytes()).is_err());
        let s = parse(&old).unwrap();
        assert_eq!(s.get("Udp6InErrors"), Some(0));
        assert_eq!(s.get("Udp6IgnoredMulti"), None);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            parse("Udp6InErrors\n"),
            Err(ParseError::BadLine { line: 1, .. })
        ));
        assert!(matches!(
            parse("Udp6InErrors 1\nUdp6RcvbufErrors x\n"),
            Err(ParseError::BadLine { line: 2, .. })
        ));
        assert!(matches!(
            parse("Udp6InErrors 1 2\n"),
            Err(ParseError::BadLine { .. })
        ));
        assert_eq!(parse("\n").unwrap(), Snmp6::default());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        /// `%-32s\t%lu` per counter, as `snmp6_seq_show_item()` prints it: every counter
        /// reads back in order.
        #[test]
        fn parses_what_the_kernel_prints(
            counters in prop::collection::vec(("(Ip6|Icmp6|Udp6|UdpLite6)[A-Z][A-Za-z0-9]{2,24}", any::<u64>()), 0..40),
        ) {
            let text: String = counters.iter().map(|(n, v)| format!("{n:<32}\t{v}\n")).collect();
            prop_assert_eq!(parse(&text), Ok(Snmp6 { counters }));
        }
    }
}
