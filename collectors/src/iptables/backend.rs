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

/// Whether the legacy (`ip_tables`/`ip6_tables`, get/setsockopt) backend holds tables in a
/// network namespace: the only users of the xtables lock. `iptables-nft` ignores `--wait` and
/// takes no lock (xtables-nft(8): "the iptables-legacy --wait option is a no-op in
/// iptables-nft"), and a legacy command creates the table it touches, so a namespace without
/// legacy tables has had no legacy user since the modules were loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyUse {
    /// `ip_tables_names` or `ip6_tables_names` lists a table.
    InUse,
    /// Both are absent (modules not loaded) or empty.
    NotInUse,
    /// One could not be read for another reason (permission, a refused file).
    Unknown,
}

impl LegacyUse {
    /// Whether xtables lock users may exist (in use, or cannot tell).
    pub fn lock_users_possible(self) -> bool {
        self != LegacyUse::NotInUse
    }
}

/// Reads `<root>/proc/<pid>/net/ip_tables_names` and `ip6_tables_names` ([`LegacyUse`]).
pub fn legacy_use(host: &HostPaths, pid: u32) -> LegacyUse {
    let mut out = LegacyUse::NotInUse;
    for name in ["ip_tables_names", "ip6_tables_names"] {
        let path = host.proc_pid(pid).join("net").join(name);
        match crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE) {
            Ok(text) if !parse_table_names(&text).is_empty() => return LegacyUse::InUse,
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(_) => out = LegacyUse::Unknown,
        }
    }
    out
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

        /// `/proc/net/ip{,6}_tables_names` as the kernel prints it (one `xt_table` name a
        /// line, in registration order) reads back name for name; an alternatives target
        /// named as Debian, RHEL or Alpine name them is told by its name.
        #[test]
        fn reads_what_the_kernel_and_packages_name(
            names in proptest::collection::vec("[a-z][a-z0-9_]{0,30}", 0..6),
            dir in "(/usr)?/s?bin/|/etc/alternatives/|",
            tool in "(ip|ip6|eb|arp)tables(-(save|restore))?|xtables",
            backend in proptest::sample::select(vec![Backend::Nft, Backend::Legacy]),
            multi in proptest::bool::ANY,
        ) {
            let text: String = names.iter().map(|n| format!("{n}\n")).collect();
            proptest::prop_assert_eq!(parse_table_names(&text), names);
            let target = format!("{dir}{tool}-{}{}", backend.as_str(), if multi { "-multi" } else { "" });
            proptest::prop_assert_eq!(classify_target(&target), backend, "{}", target);
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

    #[test]
    fn legacy_use_from_both_table_lists() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        let net = t.path().join("proc/1/net");
        std::fs::create_dir_all(&net).unwrap();
        // Neither module loaded: nobody can take the lock.
        assert_eq!(legacy_use(&host, 1), LegacyUse::NotInUse);
        assert!(!LegacyUse::NotInUse.lock_users_possible());
        std::fs::write(net.join("ip_tables_names"), "").unwrap();
        assert_eq!(legacy_use(&host, 1), LegacyUse::NotInUse);
        // IPv6 alone is enough.
        std::fs::write(net.join("ip6_tables_names"), "filter\n").unwrap();
        assert_eq!(legacy_use(&host, 1), LegacyUse::InUse);
        std::fs::write(net.join("ip6_tables_names"), "").unwrap();
        std::fs::write(net.join("ip_tables_names"), "nat\nfilter\n").unwrap();
        assert_eq!(legacy_use(&host, 1), LegacyUse::InUse);
        // Unreadable (a directory where the file should be): cannot tell, so possible.
        std::fs::remove_file(net.join("ip_tables_names")).unwrap();
        std::fs::create_dir(net.join("ip_tables_names")).unwrap();
        assert_eq!(legacy_use(&host, 1), LegacyUse::Unknown);
        assert!(LegacyUse::Unknown.lock_users_possible());
    }
}
