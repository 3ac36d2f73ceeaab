//! `/proc/<pid>/net/udp` and `udp6`: the UDP sockets of one network namespace.
//!
//! Each line after the header is `sl: local remote st tx_queue:rx_queue ... inode ref pointer
//! drops`. Addresses are hexadecimal: IPv4 as one 32-bit word and IPv6 as four, each word
//! printed as the CPU reads the network-order bytes from memory (so `0100007F` is 127.0.0.1 on
//! the little-endian machines we run on); the port is plain big-endian hex (`0035` = 53).
//!
//! Our own parser: `procfs-core`'s `UdpNetEntries` has no `drops` column (our
//! [`UdpSocket::drops`]), and it drops the first line as the header without looking at it, so
//! a table without its header line loses a socket silently; here only a line that starts with
//! `sl` is a header (test `procfs_core_drops_the_first_line_unseen`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `udp` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: too few fields")]
    TooFewFields { line: usize },
    #[error("line {line}: bad address `{value}`")]
    BadAddress { line: usize, value: String },
    #[error("line {line}: bad state `{value}`")]
    BadState { line: usize, value: String },
}

/// One UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSocket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// TCP-style state number; 7 (`TCP_CLOSE`) for an unconnected, bound socket.
    pub state: u8,
    /// Datagrams dropped on this socket (last column; absent on very old kernels).
    pub drops: Option<u64>,
}

/// Parses a hex address and port, `0100007F:0035` or a 32-digit IPv6 form.
pub fn parse_address(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    if !addr.is_ascii() {
        return None;
    }
    let ip = match addr.len() {
        8 => {
            let word = u32::from_str_radix(addr, 16).ok()?;
            IpAddr::V4(Ipv4Addr::from(word.to_ne_bytes()))
        }
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                let word = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Parses the text of a `udp` or `udp6` file.
pub fn parse(text: &str) -> Result<Vec<UdpSocket>, ParseError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let mut fields = line.split_whitespace();
        // The header starts with `sl`; blank lines are skipped.
        let Some(first) = fields.next() else { continue };
        if first == "sl" {
            continue;
        }
        let (Some(local), Some(remote), Some(state)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(ParseError::TooFewFields { line: line_no });
        };
        let bad = |v: &str| ParseError::BadAddress {
            line: line_no,
            value: v.chars().take(64).collect(),
        };
        let local = parse_address(local).ok_or_else(|| bad(local))?;
        let remote = parse_address(remote).ok_or_else(|| bad(remote))?;
        let state = u8::from_str_radix(state, 16).map_err(|_| ParseError::BadState {
            line: line_no,
            value: state.chars().take(16).collect(),
        })?;
        // tx:rx tr:when retrnsmt uid timeout inode ref pointer, then drops.
        let drops = fields.nth(8).and_then(|d| d.parse().ok());
        out.push(UdpSocket {
            local,
            remote,
            state,
            drops,
        });
    }
    Ok(out)
}

/// `<root>/proc/<pid>/net/udp`.
pub fn path_v4(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/udp")
}

/// `<root>/proc/<pid>/net/udp6`.
pub fn path_v6(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/udp6")
}

/// Reads and parses a `udp`/`udp6` file.
pub fn read(path: &Path) -> Result<Vec<UdpSocket>, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::UDP_TABLE)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

/// True when some socket is bound to `addr` exactly (`169.254.20.10:53`), or to the wildcard
/// address of the same family on that port (a cache bound to `0.0.0.0:53` also answers there).
pub fn listens_on(sockets: &[UdpSocket], addr: SocketAddr) -> bool {
    sockets.iter().any(|s| {
        s.local.port() == addr.port()
            && (s.local.ip() == addr.ip()
                || (s.local.ip().is_unspecified() && s.local.is_ipv4() == addr.is_ipv4()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINUX_6_18_V4: &str = include_str!("../../tests/fixtures/conntrack/net_udp.linux-6.18");
    const LINUX_6_18_V6: &str = include_str!("../../tests/fixtures/conntrack/net_udp6.linux-6.18");

    #[test]
    #[cfg(target_endian = "little")]
    fn kernel_6_18_udp_with_nodelocal_dns_socket() {
        // Copied from this machine (kernel 6.18.44), a namespace with sockets on
        // 127.0.0.1:9999 (with a queued datagram) and 169.254.20.10:53.
        let s = parse(LINUX_6_18_V4).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local, "127.0.0.1:9999".parse().unwrap());
        assert_eq!(s[0].remote, "0.0.0.0:0".parse().unwrap());
        assert_eq!(s[0].state, 7);
        assert_eq!(s[0].drops, Some(0));
        assert_eq!(s[1].local, "169.254.20.10:53".parse().unwrap());
        assert!(listens_on(&s, "169.254.20.10:53".parse().unwrap()));
        assert!(!listens_on(&s, "169.254.20.11:53".parse().unwrap()));
        assert!(!listens_on(&s, "127.0.0.1:53".parse().unwrap()));
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn kernel_6_18_udp6() {
        let s = parse(LINUX_6_18_V6).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local, "[::]:5353".parse().unwrap());
        assert_eq!(s[1].local, "[::1]:53".parse().unwrap());
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn wildcard_bind_counts_as_listening() {
        let text = "  sl  local_address rem_address   st\n   1: 00000000:0035 00000000:0000 07\n";
        let s = parse(text).unwrap();
        assert_eq!(s[0].drops, None);
        assert!(listens_on(&s, "169.254.20.10:53".parse().unwrap()));
        assert!(!listens_on(&s, "[fd00::a]:53".parse().unwrap()));
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn procfs_core_drops_the_first_line_unseen() {
        use procfs_core::FromReadSI;
        let si = procfs_core::ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: true,
        };
        // The 169.254.20.10:53 line of LINUX_6_18_V4, without the header.
        let line = LINUX_6_18_V4.lines().nth(2).unwrap();
        assert!(line.contains("0A14FEA9:0035"), "{line}");
        let core = procfs_core::net::UdpNetEntries::from_read(line.as_bytes(), &si).unwrap();
        assert!(core.0.is_empty());
        let ours = parse(line).unwrap();
        assert_eq!(ours[0].local, "169.254.20.10:53".parse().unwrap());
    }

    #[test]
    fn header_only_and_empty() {
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(
            parse("   sl  local_address rem_address   st tx_queue\n").unwrap(),
            vec![]
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            parse(" 1: 0100007F:0035\n"),
            Err(ParseError::TooFewFields { line: 1 })
        ));
        assert!(matches!(
            parse(" 1: 0100007F 00000000:0000 07\n"),
            Err(ParseError::BadAddress { .. })
        ));
        assert!(matches!(
            parse(" 1: 0100007F:0035 00000000:0000 zz\n"),
            Err(ParseError::BadState { .. })
        ));
        assert_eq!(parse_address("0100007F:10000"), None);
        assert_eq!(parse_address("ééééé:0035"), None);
        assert_eq!(parse_address("0100007:0035"), None);
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_udpish_lines(text in "( |[0-9A-Fé]{1,33}|:|\n){0,40}") {
            let _ = parse(&text);
        }

        /// Tables as `udp4_format_sock()`/`udp6_sock_seq_show()` print them (header, then
        /// `%5d: %08X:%04X …` with addresses in host-order words, `… %lu %d %pK %u` with the
        /// drops last): addresses, ports, state and drops read back.
        #[test]
        fn parses_what_the_kernel_prints(
            (v6, sockets) in any::<bool>().prop_flat_map(|v6| (Just(v6), prop::collection::vec(
                (
                    any::<u16>(), crate::testgen::socket_addr(v6), crate::testgen::socket_addr(v6),
                    any::<u8>(), any::<u32>(), any::<u64>(), any::<u32>(),
                ),
                0..8,
            ))),
        ) {
            let mut text = if v6 {
                "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
            } else {
                "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n"
            }.to_string();
            let mut want = Vec::new();
            for (sl, local, remote, state, uid, inode, drops) in sockets {
                let tail = format!("2 00000000ee48fb4d {drops}");
                text += &crate::testgen::proc_net_socket_line(u32::from(sl), (local, remote), state, (uid, inode), &tail);
                want.push(UdpSocket { local, remote, state, drops: Some(u64::from(drops)) });
            }
            prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
