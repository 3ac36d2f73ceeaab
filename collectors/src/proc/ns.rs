//! `/proc/<pid>/ns/*`: which namespaces a process lives in.
//!
//! The kernel shows each namespace as a symlink whose text is `<type>:[<inode>]`, e.g.
//! `net:[4026531840]`; two processes share a namespace when the inodes are equal. The text is
//! read with `readlink` (not `stat`), so fake host roots can stage namespaces as plain symlinks.
//! `procfs-core` parses no link text (its `procfs` half reads links of the agent's own `/proc`).

use crate::host::HostPaths;

/// Parses a namespace link text such as `net:[4026531840]` into its inode. `kind` must match.
pub fn parse_link(text: &str, kind: &str) -> Option<u64> {
    let rest = text.trim().strip_prefix(kind)?.strip_prefix(":[")?;
    rest.strip_suffix(']')?.parse::<u64>().ok()
}

/// The inode of a process's namespace of `kind` (`net`, `mnt`, `pid`...); `None` when the pid
/// vanished or the link cannot be read (another user's process without privilege).
pub fn inode(host: &HostPaths, pid: u32, kind: &str) -> Option<u64> {
    let link = std::fs::read_link(host.proc_pid(pid).join("ns").join(kind)).ok()?;
    parse_link(&link.to_string_lossy(), kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_links_of_linux_6_18() {
        // readlink /proc/1/ns/net and /proc/1/ns/mnt on this machine (Linux 6.18).
        assert_eq!(parse_link("net:[4026531840]", "net"), Some(4026531840));
        assert_eq!(parse_link("mnt:[4026531841]\n", "mnt"), Some(4026531841));
        assert_eq!(parse_link("mnt:[4026531841]", "net"), None);
        assert_eq!(parse_link("net:[x]", "net"), None);
        assert_eq!(parse_link("", "net"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse_link(&s, "net");
        }
    }
}
