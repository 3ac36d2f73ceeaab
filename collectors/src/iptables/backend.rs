//! Which iptables backend the host uses, found without executing anything:
//! - `/proc/net/ip_tables_names`: the legacy (x_tables) tables loaded in the host's network
//!   namespace; non-empty means something on the node wrote rules through the legacy backend.
//!   Tables are per network namespace and `/proc/net` is the reader's, so it is read as
//!   `/proc/1/net/ip_tables_names` (pid 1's namespace), which is the host's whatever
//!   node-doctor's own namespace is;
//! - the `/usr/sbin/iptables` symlink chain (alternatives): `iptables-nft`/`xtables-nft-multi`
//!   is the nft backend, `iptables-legacy`/`xtables-legacy-multi`/`xtables-multi` is legacy.

use std::path::{Path, PathBuf};

use crate::host::HostPaths;

/// The backend an `iptables` binary drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Nft,
    Legacy,
    Unknown,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Nft => "nft",
            Backend::Legacy => "legacy",
            Backend::Unknown => "unknown",
        }
    }
}

/// The host's `iptables` command as the symlinks say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryBackend {
    /// The host path looked at, e.g. `/usr/sbin/iptables`.
    pub path: PathBuf,
    /// Each symlink target in order, e.g. `["/etc/alternatives/iptables", "/usr/sbin/iptables-nft"]`.
    pub chain: Vec<String>,
    pub backend: Backend,
}

/// Parses `/proc/net/ip_tables_names` (one table name per line: `filter`, `nat`, `mangle`...).
pub fn parse_table_names(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.len() <= 64)
        .map(str::to_string)
        .collect()
}

/// Reads `<root>/proc/<pid>/net/ip_tables_names`, the tables of `pid`'s network namespace
/// (pid 1: the host's); `None` when absent (`ip_tables` not loaded).
pub fn legacy_tables(host: &HostPaths, pid: u32) -> Option<Vec<String>> {
    let path = host.proc_pid(pid).join("net/ip_tables_names");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE).ok()?;
    Some(parse_table_names(&text))
}

/// Classifies the final file name of the iptables symlink chain.
pub fn classify_target(name: &str) -> Backend {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.contains("nft") {
        Backend::Nft
    } else if base.contains("legacy") || base == "xtables-multi" || base == "iptables-multi" {
        Backend::Legacy
    } else {
        Backend::Unknown
    }
}

/// Follows the symlinks of a host path (re-rooting absolute targets), up to 16 links.
/// `None` when the path does not exist.
pub fn binary_backend(host: &HostPaths, host_path: &Path) -> Option<BinaryBackend> {
    let mut cur = host_path.to_path_buf();
    let mut chain: Vec<String> = Vec::new();
    for _ in 0..16 {
        let agent = host.join(&cur);
        let md = std::fs::symlink_metadata(&agent).ok()?;
        if !md.file_type().is_symlink() {
            let backend = match chain.last() {
                Some(last) => classify_target(last),
                None => Backend::Unknown,
            };
            return Some(BinaryBackend {
                path: host_path.to_path_buf(),
                chain,
                backend,
            });
        }
        let target = std::fs::read_link(&agent).ok()?;
        chain.push(target.to_string_lossy().into_owned());
        cur = if target.is_absolute() {
            target
        } else {
            cur.parent().unwrap_or(Path::new("/")).join(target)
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*") {
            let names = parse_table_names(&s);
            proptest::prop_assert!(names.iter().all(|n| !n.is_empty() && n.len() <= 64));
            let _ = classify_target(&s);
        }
    }

    #[test]
    fn table_names_of_a_legacy_node() {
        // /proc/net/ip_tables_names on a CentOS 7 node running kube-proxy (Linux 3.10).
        assert_eq!(
            parse_table_names("mangle\nnat\nfilter\n"),
            vec!["mangle", "nat", "filter"]
        );
        assert!(parse_table_names("").is_empty());
    }

    #[test]
    fn classifies_alternatives_targets() {
        assert_eq!(classify_target("/usr/sbin/iptables-nft"), Backend::Nft);
        assert_eq!(classify_target("xtables-nft-multi"), Backend::Nft);
        assert_eq!(
            classify_target("/usr/sbin/iptables-legacy"),
            Backend::Legacy
        );
        assert_eq!(classify_target("xtables-legacy-multi"), Backend::Legacy);
        assert_eq!(classify_target("xtables-multi"), Backend::Legacy);
        assert_eq!(classify_target("busybox"), Backend::Unknown);
    }

    #[test]
    fn follows_debian_alternatives_under_the_root() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("usr/sbin")).unwrap();
        std::fs::create_dir_all(r.join("etc/alternatives")).unwrap();
        std::fs::write(r.join("usr/sbin/xtables-nft-multi"), "").unwrap();
        std::os::unix::fs::symlink("xtables-nft-multi", r.join("usr/sbin/iptables-nft")).unwrap();
        std::os::unix::fs::symlink(
            "/usr/sbin/iptables-nft",
            r.join("etc/alternatives/iptables"),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/alternatives/iptables", r.join("usr/sbin/iptables"))
            .unwrap();
        let h = HostPaths::new(r);
        let b = binary_backend(&h, Path::new("/usr/sbin/iptables")).unwrap();
        assert_eq!(b.backend, Backend::Nft);
        assert_eq!(
            b.chain,
            vec![
                "/etc/alternatives/iptables",
                "/usr/sbin/iptables-nft",
                "xtables-nft-multi"
            ]
        );
        assert!(binary_backend(&h, Path::new("/sbin/iptables")).is_none());
    }
}
