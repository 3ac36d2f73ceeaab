//! `/proc/<pid>/net/netstat`: the `TcpExt:` / `IpExt:` / `MPTcpExt:` counters of one network
//! namespace. Same line-pair layout as `net/snmp` (a names line, then a values line with the
//! same prefix), so the text is parsed by [`crate::proc::snmp::parse`]; this module adds the
//! path and the TCP listen-queue counters the kernel collector judges.
//!
//! Read `<root>/proc/1/net/netstat` for the host's namespace (pid 1 lives in it), never
//! `/proc/net/netstat`, which is the agent's own namespace.
//!
//! `procfs-core` has no model of `netstat`, so the text goes to our `snmp` parser.

use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::proc::snmp::{self, ParseError, Snmp};
use crate::ReadError;

/// Listen-queue drop counters of `TcpExt` (each `None` when the kernel lacks the column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListenCounters {
    /// SYNs or completed connections dropped at a listening socket, for any reason
    /// (includes `ListenOverflows`).
    pub listen_drops: Option<u64>,
    /// Connections dropped because the accept queue (`somaxconn`/backlog) was full.
    pub listen_overflows: Option<u64>,
    /// Packets dropped because the socket's backlog queue was full while the socket was
    /// owned by the user (`TCPBacklogDrop`, the handbook's counter).
    pub backlog_drop: Option<u64>,
}

/// Parses the text of a `netstat` file.
pub fn parse(text: &str) -> Result<Snmp, ParseError> {
    snmp::parse(text)
}

/// The `TcpExt` listen counters of a parsed file; `None` without a `TcpExt` table.
pub fn listen_counters(netstat: &Snmp) -> Option<ListenCounters> {
    let t = netstat.table("TcpExt")?;
    let get = |n: &str| t.get(n).and_then(|v| u64::try_from(v).ok());
    Some(ListenCounters {
        listen_drops: get("ListenDrops"),
        listen_overflows: get("ListenOverflows"),
        backlog_drop: get("TCPBacklogDrop"),
    })
}

/// `<root>/proc/<pid>/net/netstat`.
pub fn path(host: &HostPaths, pid: u32) -> PathBuf {
    host.proc_pid(pid).join("net/netstat")
}

/// Reads and parses the `netstat` file at `path`.
pub fn read(path: &Path) -> Result<Snmp, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prop_assert_eq;

    /// Kernel 6.18.44 (this VM), `/proc/1/net/netstat`.
    const REAL_6_18: &str = include_str!("../../tests/fixtures/netstat/kernel-6.18.txt");

    /// Kernel 3.10 (CentOS 7): fewer columns, the same names for the ones we use.
    const CENTOS7: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled TWKilled PAWSPassive PAWSActive PAWSEstab DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPPrequeued TCPBacklogDrop TCPMinTTLDrop
TcpExt: 0 0 0 12 0 0 0 0 0 0 88123 0 0 0 0 3 120033 12 455 1532 1532 9 77 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets
IpExt: 0 0 0 0 0 0 123456 654321
";

    #[test]
    fn real_6_18() {
        let n = parse(REAL_6_18).unwrap();
        let c = listen_counters(&n).unwrap();
        assert_eq!(c.listen_overflows, Some(0));
        assert_eq!(c.listen_drops, Some(0));
        assert!(c.backlog_drop.is_some());
        assert!(n.table("IpExt").is_some());
    }

    #[test]
    fn centos7() {
        let c = listen_counters(&parse(CENTOS7).unwrap()).unwrap();
        assert_eq!(
            c,
            ListenCounters {
                listen_drops: Some(1532),
                listen_overflows: Some(1532),
                backlog_drop: Some(77)
            }
        );
        // No TcpExt table at all.
        assert_eq!(
            listen_counters(&parse("IpExt: A\nIpExt: 1\n").unwrap()),
            None
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            if let Ok(n) = parse(&s) {
                let _ = listen_counters(&n);
            }
        }
        #[test]
        fn never_panics_on_netstat_like(names in "(TcpExt: ([A-Za-z]{1,8} ){0,4}\n){1}", values in "(TcpExt: ([0-9-]{1,4} ){0,4}\n)") {
            let _ = parse(&format!("{names}{values}"));
        }

        /// Every table of kernel 6.18's file (or 3.10's `TcpExt` with fewer columns) with
        /// chosen values, some kernels lacking any of the three listen columns: the listen
        /// counters read back as written, a missing column as `None`.
        #[test]
        fn listen_counters_read_back_what_the_kernel_printed(
            old in proptest::bool::ANY,
            values in proptest::collection::vec(0u64..=i64::MAX as u64, 200),
            keep in proptest::array::uniform3(proptest::bool::ANY),
        ) {
            let wanted = ["ListenDrops", "ListenOverflows", "TCPBacklogDrop"];
            let fixture = if old { CENTOS7 } else { REAL_6_18 };
            let mut text = String::new();
            let mut want = [None; 3];
            for pair in fixture.lines().collect::<Vec<_>>().chunks(2) {
                let mut names = pair[0].split_whitespace();
                let prefix = names.next().unwrap();
                let names: Vec<&str> = names
                    .filter(|n| wanted.iter().zip(keep).all(|(w, k)| n != w || k))
                    .collect();
                let mut nums = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    let v = values[i % values.len()];
                    if prefix == "TcpExt:" {
                        if let Some(j) = wanted.iter().position(|w| w == n) {
                            want[j] = Some(v);
                        }
                    }
                    nums.push(v.to_string());
                }
                text += &format!("{prefix} {}\n{prefix} {}\n", names.join(" "), nums.join(" "));
            }
            let got = listen_counters(&parse(&text).unwrap());
            prop_assert_eq!(
                got,
                Some(ListenCounters {
                    listen_drops: want[0],
                    listen_overflows: want[1],
                    backlog_drop: want[2],
                })
            );
        }
    }
}
