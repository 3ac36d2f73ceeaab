//! `/proc/<pid>/net/unix`: the unix sockets of a network namespace, to tell whether anything
//! listens on a socket path (a daemon's API socket left behind by a crash has no listener;
//! one held by systemd for socket activation has one).
//!
//! Our own parser: `procfs-core`'s `UnixNetEntry` has no `Flags` column, which is where the
//! kernel marks a listening socket (`__SO_ACCEPTCON`, `00010000`), and it cuts a path at its
//! first space.

use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// `__SO_ACCEPTCON`: the socket is listening.
const ACCEPTCON: u32 = 0x0001_0000;

/// One unix socket bound to a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The path as the binding process named it.
    pub path: String,
    /// A listening (stream or seqpacket) socket; false for a datagram socket bound to the path
    /// (chronyd's command socket) and for a connection accepted on a listener.
    pub listening: bool,
}

/// The unix sockets of `text` bound to a path; abstract sockets (`@name`) and unbound ones
/// are left out. Lines that do not parse are skipped: one odd line never hides the others.
pub fn bound(text: &str) -> Vec<Bound> {
    let mut out = Vec::new();
    for line in text.lines() {
        // Num: RefCount Protocol Flags Type St Inode Path
        let mut f = line.split_whitespace();
        let (Some(num), Some(_refs), Some(_proto), Some(flags), Some(_ty), Some(_st), Some(_ino)) = (
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
        ) else {
            continue;
        };
        if !num.ends_with(':') {
            continue;
        }
        let Ok(flags) = u32::from_str_radix(flags, 16) else {
            continue;
        };
        let path: Vec<&str> = f.collect();
        let path = path.join(" ");
        if path.starts_with('/') {
            out.push(Bound {
                path,
                listening: flags & ACCEPTCON != 0,
            });
        }
    }
    out
}

/// The paths (as the binding process named them) of the listening sockets among `sockets`.
pub fn listening(sockets: &[Bound]) -> impl Iterator<Item = &str> {
    sockets
        .iter()
        .filter(|b| b.listening)
        .map(|b| b.path.as_str())
}

/// `<root>/proc/<pid>/net/unix`.
pub fn path(host: &HostPaths, pid: u32) -> std::path::PathBuf {
    host.proc_pid(pid).join("net/unix")
}

/// Reads every socket of one table bound to a path (listening or not), at most
/// [`crate::hostfs::cap::UDP_TABLE`] bytes (a line per socket, like the UDP table).
pub fn read_bound(path: &Path) -> Result<Vec<Bound>, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::UDP_TABLE)?;
    Ok(bound(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18 with dockerd and containerd running, an abstract socket and a connection.
    const UNIX_6_18: &str = "Num       RefCount Protocol Flags    Type St Inode Path
ffff8f0c41d4a000: 00000002 00000000 00010000 0001 01 62231 /run/containerd/containerd.sock
ffff8f0c41d4b000: 00000002 00000000 00010000 0001 01 62233 /run/containerd/containerd.sock.ttrpc
ffff8f0c41d4c800: 00000002 00000000 00010000 0001 01 63302 /var/run/docker.sock
ffff8f0c41d4d000: 00000002 00000000 00010000 0001 01 19201 @/containerd-shim/de2bfeef.sock
ffff8f0c41d4e000: 00000003 00000000 00000000 0001 03 90210 /run/containerd/containerd.sock
ffff8f0c41d4f000: 00000002 00000000 00010000 0001 01 70001 /tmp/dir with space/d.sock
";

    fn listening_paths(text: &str) -> Vec<String> {
        listening(&bound(text)).map(str::to_string).collect()
    }

    #[test]
    fn listening_path_sockets_only() {
        assert_eq!(
            listening_paths(UNIX_6_18),
            vec![
                "/run/containerd/containerd.sock",
                "/run/containerd/containerd.sock.ttrpc",
                "/var/run/docker.sock",
                "/tmp/dir with space/d.sock",
            ]
        );
        assert!(listening_paths("").is_empty());
        // Every bound path, the accepted connection and a datagram socket among them.
        let chrony =
            "ffff8f0c41d50000: 00000002 00000000 00000000 0002 01 71001 /run/chrony/chronyd.sock\n";
        let all = bound(&format!("{UNIX_6_18}{chrony}"));
        assert_eq!(all.len(), 6, "{all:?}");
        assert_eq!(
            all.iter()
                .filter(|b| !b.listening)
                .map(|b| b.path.as_str())
                .collect::<Vec<_>>(),
            [
                "/run/containerd/containerd.sock",
                "/run/chrony/chronyd.sock"
            ]
        );
        assert!(listening_paths("garbage\nffff: 1 2 zz 1 1 1 /x\n").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = listening_paths(&s);
            let _ = bound(&s);
        }

        /// Tables as `unix_seq_show()` prints them (`%pK: %08X %08X %08X %04X %02X %5lu`, then
        /// a space and the path, `@` first for an abstract name, nothing when unbound): the
        /// path-bound sockets come back in order, listening where the flags say `00010000`.
        #[test]
        fn parses_what_the_kernel_prints(
            sockets in proptest::collection::vec((
                proptest::num::u64::ANY, 0u8..3,
                "/[a-zA-Z0-9._-]{1,12}(/[a-zA-Z0-9._-]{1,12}){0,3}( [a-z]{1,5}(/[a-z.]{1,6})?)?",
                proptest::bool::ANY, 1u16..=5, 1u8..=4, proptest::num::u64::ANY,
            ), 0..8),
        ) {
            let mut text = "Num       RefCount Protocol Flags    Type St Inode Path\n".to_string();
            let mut want = Vec::new();
            for (addr, kind, path, listening, ty, st, inode) in sockets {
                let flags = if listening { ACCEPTCON } else { 0 };
                text += &format!("{addr:016x}: 00000002 00000000 {flags:08X} {ty:04X} {st:02X} {inode:5}");
                match kind {
                    0 => {
                        text += &format!(" {path}");
                        want.push(Bound { path, listening });
                    }
                    1 => text += &format!(" @{path}"),
                    _ => {}
                }
                text.push('\n');
            }
            proptest::prop_assert_eq!(bound(&text), want);
        }
    }
}
