//! `/proc/<pid>/net/{tcp,tcp6,udp,udp6}`: the sockets that accept traffic on a port — TCP
//! sockets in `LISTEN` and bound, unconnected UDP sockets — with their inodes (what
//! `/proc/<pid>/fd/*` links name as `socket:[inode]`, which finds the owning process).
//!
//! Our own parser, as [`super::net_udp`] (whose address decoding it shares): `procfs-core`'s
//! `TcpNetEntries`/`UdpNetEntries` drop the first line as the header without looking at it,
//! so a table without its header line loses a socket silently (the test
//! `procfs_core_drops_the_first_line_unseen` there); here only a line starting `sl` is one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::proc::net_udp::parse_address;
use crate::ReadError;

/// TCP `LISTEN`.
const TCP_LISTEN: u8 = 0x0A;
/// UDP sockets are `TCP_CLOSE` (7) until connected.
const UDP_UNCONNECTED: u8 = 0x07;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// A socket that accepts traffic on `local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub protocol: Protocol,
    pub local: SocketAddr,
    pub inode: u64,
}

/// Why a table could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ParseError {
    pub line: usize,
    pub what: String,
}

/// Parses a `tcp`/`tcp6` (`Protocol::Tcp`) or `udp`/`udp6` table, keeping the listeners.
pub fn parse(text: &str, protocol: Protocol) -> Result<Vec<Listener>, ParseError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let err = |what: &str| ParseError {
            line: idx + 1,
            what: what.to_string(),
        };
        let fields: Vec<&str> = line.split_whitespace().take(10).collect();
        match fields.first() {
            None | Some(&"sl") => continue,
            Some(_) => {}
        }
        if fields.len() < 10 {
            return Err(err("too few fields"));
        }
        let state = u8::from_str_radix(fields[3], 16).map_err(|_| err("bad state"))?;
        let wanted = match protocol {
            Protocol::Tcp => TCP_LISTEN,
            Protocol::Udp => UDP_UNCONNECTED,
        };
        if state != wanted {
            continue;
        }
        let local = parse_address(fields[1]).ok_or_else(|| err("bad local address"))?;
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
        let inode: u64 = fields[9].parse().map_err(|_| err("bad inode"))?;
        out.push(Listener {
            protocol,
            local,
            inode,
        });
    }
    Ok(out)
}

/// The four tables of `<root>/proc/<pid>/net/` with their protocols.
pub fn paths(host: &HostPaths, pid: u32) -> Vec<(PathBuf, Protocol)> {
    let net = host.proc_pid(pid).join("net");
    vec![
        (net.join("tcp"), Protocol::Tcp),
        (net.join("tcp6"), Protocol::Tcp),
        (net.join("udp"), Protocol::Udp),
        (net.join("udp6"), Protocol::Udp),
    ]
}

/// Reads and parses one table (at most [`crate::hostfs::cap::UDP_TABLE`] bytes); a table
/// that does not exist (no IPv6) is empty.
pub fn read(path: &Path, protocol: Protocol) -> Result<Vec<Listener>, ReadError> {
    match crate::hostfs::read_text_optional(path, crate::hostfs::cap::UDP_TABLE)? {
        None => Ok(Vec::new()),
        Some(text) => parse(&text, protocol).map_err(|e| ReadError::parse(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Linux 6.18: sshd on 22, a connection, a kubelet-style 127.0.0.1:10248 listener.
    const TCP_6_18: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21354 1 0000000000000000 100 0 0 10 0
   1: 0100007F:2808 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 88231 1 0000000000000000 100 0 0 10 0
   2: 0A00020F:0016 0202000A:C35A 01 00000000:00000000 02:0009A3B1 00000000     0        0 90011 4 0000000000000000 20 4 29 10 -1
";

    const UDP6_6_18: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  110: 00000000000000000000000000000000:0202 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 17777 2 0000000000000000 0
";

    #[test]
    #[cfg(target_endian = "little")]
    fn listeners_with_inodes() {
        let l = parse(TCP_6_18, Protocol::Tcp).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].local, "0.0.0.0:22".parse().unwrap());
        assert_eq!(l[1].local, "127.0.0.1:10248".parse().unwrap());
        assert_eq!(l[1].inode, 88231);
        let u = parse(UDP6_6_18, Protocol::Udp).unwrap();
        assert_eq!(u[0].local, "[::]:514".parse().unwrap());
        assert_eq!(u[0].inode, 17777);
        // The header-less table keeps its first socket.
        let body = TCP_6_18.lines().nth(1).unwrap();
        assert_eq!(parse(body, Protocol::Tcp).unwrap().len(), 1);
        assert!(parse("   0: 00000000:0016 00000000:0000 0A\n", Protocol::Tcp).is_err());
        assert!(parse("", Protocol::Udp).unwrap().is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s, Protocol::Tcp);
            let _ = parse(&s, Protocol::Udp);
        }
        /// `tcp`/`tcp6` tables as `get_tcp4_sock()` prints them (`… %lu %d %pK %lu %lu %u %u
        /// %d` after the inode) and `udp`/`udp6` ones (`… %u` drops), sockets in every state:
        /// exactly the listeners come back (TCP `0A`, UDP `07`), with their address and inode.
        #[test]
        fn parses_what_the_kernel_prints(
            (tcp, sockets) in (any::<bool>(), any::<bool>()).prop_flat_map(|(v6, tcp)| (
                Just(tcp),
                proptest::collection::vec(
                    (crate::testgen::socket_addr(v6), crate::testgen::socket_addr(v6),
                     proptest::sample::select(vec![0x01u8, 0x06, 0x07, 0x08, 0x0A, 0x0B]),
                     proptest::num::u32::ANY, proptest::num::u64::ANY),
                    0..8,
                ),
            )),
        ) {
            let (protocol, tail, listen) = if tcp {
                (Protocol::Tcp, "1 0000000000000000 100 0 0 10 0", TCP_LISTEN)
            } else {
                (Protocol::Udp, "2 0000000000000000 0", UDP_UNCONNECTED)
            };
            let mut text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n".to_string();
            let mut want = Vec::new();
            for (sl, (local, remote, state, uid, inode)) in sockets.into_iter().enumerate() {
                text += &crate::testgen::proc_net_socket_line(sl as u32, (local, remote), state, (uid, inode), tail);
                if state == listen {
                    want.push(Listener { protocol, local, inode });
                }
            }
            proptest::prop_assert_eq!(parse(&text, protocol), Ok(want));
        }
    }
}
