//! `/proc/<pid>/net/snmp`: per-protocol counters of one network namespace.
//!
//! The file is a sequence of line pairs: `Udp: InDatagrams NoPorts ...` names the columns and
//! the next `Udp: 52 0 ...` line holds their values. Columns are found by name because kernels
//! add columns (`InCsumErrors` in 3.10, `IgnoredMulti` in 3.19, `MemErrors` in 5.x).
//!
//! Our own parser: `procfs-core`'s `Snmp` is a fixed struct that requires every column it
//! names, `Udp: IgnoredMulti` (3.19) and the whole `UdpLite` table among them, so it refuses
//! the file of a 3.10 kernel (CentOS 7, the handbook's era); and it has no field for the newer
//! columns (`Udp: MemErrors`). It also does not read `netstat`, which shares this layout
//! (test `procfs_core_refuses_a_3_10_snmp`).

use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `snmp` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: `{prefix}` header has no value line")]
    MissingValues { line: usize, prefix: String },
    #[error("line {line}: `{prefix}` has {names} names but {values} values")]
    ColumnCount {
        line: usize,
        prefix: String,
        names: usize,
        values: usize,
    },
    #[error("line {line}: `{value}` is not a number")]
    BadNumber { line: usize, value: String },
}

/// One protocol's counters, in file order. Values are signed (`Tcp: MaxConn` is -1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    pub protocol: String,
    pub values: Vec<(String, i64)>,
}

impl Table {
    pub fn get(&self, name: &str) -> Option<i64> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// Every protocol table of the file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snmp {
    pub tables: Vec<Table>,
}

impl Snmp {
    pub fn table(&self, protocol: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.protocol == protocol)
    }

    /// The UDP counters the DNS rules use, when the `Udp` table is present.
    pub fn udp(&self) -> Option<UdpCounters> {
        let t = self.table("Udp")?;
        let get = |n: &str| t.get(n).and_then(|v| u64::try_from(v).ok());
        Some(UdpCounters {
            in_datagrams: get("InDatagrams"),
            in_errors: get("InErrors"),
            rcvbuf_errors: get("RcvbufErrors"),
        })
    }
}

/// `Udp:` counters of one namespace (each `None` when the kernel lacks the column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpCounters {
    pub in_datagrams: Option<u64>,
    pub in_errors: Option<u64>,
    pub rcvbuf_errors: Option<u64>,
}

/// Parses the text of a `snmp` file.
pub fn parse(text: &str) -> Result<Snmp, ParseError> {
    let mut out = Snmp::default();
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    while let Some((idx, names_line)) = lines.next() {
        let Some((prefix, names)) = names_line.split_once(':') else {
            continue;
        };
        let prefix = prefix.trim();
        let (vidx, values_line) = lines.next().ok_or_else(|| ParseError::MissingValues {
            line: idx + 1,
            prefix: prefix.to_string(),
        })?;
        let values = match values_line.split_once(':') {
            Some((p, v)) if p.trim() == prefix => v,
            _ => {
                return Err(ParseError::MissingValues {
                    line: idx + 1,
                    prefix: prefix.to_string(),
                })
            }
        };
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(ParseError::ColumnCount {
                line: vidx + 1,
                prefix: prefix.to_string(),
                names: names.len(),
                values: values.len(),
            });
        }
        let mut table = Table {
            protocol: prefix.to_string(),
            values: Vec::with_capacity(names.len()),
        };
        for (n, v) in names.iter().zip(values.iter()) {
            // Counters are unsigned longs in the kernel; clamp the (theoretical) ones above
            // i64::MAX rather than failing the whole file.
            let parsed = v.parse::<i64>().or_else(|_| {
                v.parse::<u64>()
                    .map(|u| i64::try_from(u).unwrap_or(i64::MAX))
            });
            let v: i64 = parsed.map_err(|_| ParseError::BadNumber {
                line: vidx + 1,
                value: v.chars().take(32).collect(),
            })?;
            table.values.push((n.to_string(), v));
        }
        out.tables.push(table);
    }
    Ok(out)
}

/// `<root>/proc/<pid>/net/snmp`.
pub fn path(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/snmp")
}

/// Reads and parses the `snmp` file at `path`.
pub fn read(path: &Path) -> Result<Snmp, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINUX_6_18: &str = include_str!("../../tests/fixtures/conntrack/snmp.linux-6.18");
    const LINUX_3_10: &str = include_str!("../../tests/fixtures/conntrack/snmp.linux-3.10");

    #[test]
    fn procfs_core_refuses_a_3_10_snmp() {
        use procfs_core::FromRead;
        assert!(procfs_core::net::Snmp::from_read(LINUX_3_10.as_bytes()).is_err());
        assert!(parse(LINUX_3_10).unwrap().udp().is_some());
    }

    #[test]
    fn kernel_6_18_all_tables() {
        // Copied from this machine (kernel 6.18.44).
        let s = parse(LINUX_6_18).unwrap();
        let protocols: Vec<&str> = s.tables.iter().map(|t| t.protocol.as_str()).collect();
        assert_eq!(
            protocols,
            ["Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite"]
        );
        assert_eq!(s.table("Tcp").unwrap().get("MaxConn"), Some(-1));
        let udp = s.table("Udp").unwrap();
        assert_eq!(udp.values.len(), 9);
        assert_eq!(udp.get("MemErrors"), Some(0));
        assert_eq!(
            s.udp().unwrap(),
            UdpCounters {
                in_datagrams: Some(52),
                in_errors: Some(0),
                rcvbuf_errors: Some(0)
            }
        );
    }

    #[test]
    fn kernel_3_10_udp_without_newer_columns() {
        let s = parse(LINUX_3_10).unwrap();
        let udp = s.table("Udp").unwrap();
        assert_eq!(udp.get("IgnoredMulti"), None);
        assert_eq!(udp.get("MemErrors"), None);
        assert_eq!(
            s.udp().unwrap(),
            UdpCounters {
                in_datagrams: Some(183221009),
                in_errors: Some(4217),
                rcvbuf_errors: Some(4201)
            }
        );
    }

    #[test]
    fn no_udp_table() {
        let s = parse("Tcp: A B\nTcp: 1 2\n").unwrap();
        assert_eq!(s.udp(), None);
        assert_eq!(parse("").unwrap(), Snmp::default());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            parse("Udp: InErrors\n"),
            Err(ParseError::MissingValues { line: 1, .. })
        ));
        assert!(matches!(
            parse("Udp: InErrors\nTcp: 1\n"),
            Err(ParseError::MissingValues { .. })
        ));
        assert!(matches!(
            parse("Udp: InErrors RcvbufErrors\nUdp: 1\n"),
            Err(ParseError::ColumnCount {
                names: 2,
                values: 1,
                ..
            })
        ));
        assert!(matches!(
            parse("Udp: InErrors\nUdp: x1\n"),
            Err(ParseError::BadNumber { line: 2, .. })
        ));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_snmpish_text(text in "(Udp:|Tcp:| |InErrors|-?[0-9]{1,21}|\n){0,40}") {
            let _ = parse(&text);
        }

        /// Tables under the real name lines of `net/snmp` (3.10, 6.18) and `net/netstat`
        /// (6.18, the same format and parser), each followed by `Prefix:` and ` %ld`/` %lu` per
        /// column: every value reads back in its column, a `%lu` above `i64::MAX` as
        /// `i64::MAX`.
        #[test]
        fn parses_what_the_kernel_prints(
            fixture in prop::sample::select(vec![
                LINUX_3_10, LINUX_6_18, include_str!("../../tests/fixtures/netstat/kernel-6.18.txt"),
            ]),
            values in prop::collection::vec(prop_oneof![
                any::<i64>().prop_map(|v| (v.to_string(), v)),
                any::<u64>().prop_map(|v| (v.to_string(), i64::try_from(v).unwrap_or(i64::MAX))),
            ], 128),
        ) {
            let mut text = String::new();
            let mut want = Snmp::default();
            let mut next = values.iter().cycle();
            for names_line in fixture.lines().step_by(2) {
                let Some((prefix, names)) = names_line.split_once(':') else { continue };
                let mut table = Table { protocol: prefix.to_string(), values: Vec::new() };
                let mut printed = Vec::new();
                for name in names.split_whitespace() {
                    let (s, v) = next.next().cloned().unwrap_or_default();
                    printed.push(s);
                    table.values.push((name.to_string(), v));
                }
                text += &format!("{names_line}\n{prefix}: {}\n", printed.join(" "));
                want.tables.push(table);
            }
            prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
