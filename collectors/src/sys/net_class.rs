//! `/sys/class/net/<if>`: the network interfaces and their counters
//! (`Documentation/ABI/testing/sysfs-class-net*`). One value per file; a file the driver
//! cannot answer (`speed` of a link without carrier, `carrier` of an interface that is
//! administratively down) reads as `EINVAL`, which is `None` here, not an error.
//!
//! sysfs shows the network namespace of whoever mounted it: the host's `/sys` bind-mounted
//! into the agent's pod shows the node's interfaces; a sysfs mounted inside another namespace
//! shows that namespace's.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::hostfs::{self, cap};

/// Most interfaces listed from `/sys/class/net` (a node with thousands of pods has thousands
/// of veths; the listing is cut there and said so).
pub const MAX_LISTED: usize = 16_384;

/// `IFF_UP`: the interface is administratively up.
pub const IFF_UP: u64 = 0x1;

/// `<root>/sys/class/net`.
pub fn dir(host: &HostPaths) -> PathBuf {
    host.sys_file("class/net")
}

/// The names under `/sys/class/net`, sorted, at most [`MAX_LISTED`]; the second value is true
/// when the listing was cut.
pub fn list(host: &HostPaths) -> Result<(Vec<String>, bool), crate::ReadError> {
    let mut names: Vec<String> = hostfs::dir_entries(&dir(host), MAX_LISTED + 1)?
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    let cut = names.len() > MAX_LISTED;
    names.truncate(MAX_LISTED);
    names.sort();
    Ok((names, cut))
}

/// A `device` link: a bus device (PCI, virtio, USB…) backs the interface. The link is only
/// looked at, never followed or opened.
pub fn has_device(host: &HostPaths, name: &str) -> bool {
    std::fs::symlink_metadata(dir(host).join(name).join("device")).is_ok()
}

/// A `bonding/` directory: a bond master.
pub fn is_bond(host: &HostPaths, name: &str) -> bool {
    dir(host).join(name).join("bonding").is_dir()
}

/// The text of `<if>/<file>`, trimmed; `None` when missing, refused or unanswerable.
pub fn text(host: &HostPaths, name: &str, file: &str) -> Option<String> {
    let p = dir(host).join(name).join(file);
    hostfs::read_text(&p, cap::VALUE)
        .ok()
        .map(|t| t.trim().to_string())
}

/// A decimal value of `<if>/<file>` (`0x` hexadecimal for `flags`).
pub fn value<T: std::str::FromStr>(host: &HostPaths, name: &str, file: &str) -> Option<T> {
    text(host, name, file)?.parse().ok()
}

/// `<if>/flags` (`IFF_*`, printed `0x%x`).
pub fn flags(host: &HostPaths, name: &str) -> Option<u64> {
    let t = text(host, name, "flags")?;
    u64::from_str_radix(t.strip_prefix("0x").unwrap_or(&t), 16).ok()
}

/// `<if>/statistics/<counter>`.
pub fn statistic(host: &HostPaths, name: &str, counter: &str) -> Option<u64> {
    value(host, name, &format!("statistics/{counter}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_staged_interface() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        let d = t.path().join("sys/class/net/eth0");
        std::fs::create_dir_all(d.join("statistics")).unwrap();
        std::fs::create_dir_all(t.path().join("sys/class/net/bond0/bonding")).unwrap();
        std::fs::write(d.join("type"), "1\n").unwrap();
        std::fs::write(d.join("flags"), "0x1003\n").unwrap();
        std::fs::write(d.join("statistics/rx_errors"), "17\n").unwrap();
        std::os::unix::fs::symlink("../../../virtio2", d.join("device")).unwrap();
        let (names, cut) = list(&host).unwrap();
        assert_eq!(names, ["bond0", "eth0"]);
        assert!(!cut);
        assert!(has_device(&host, "eth0") && !is_bond(&host, "eth0"));
        assert!(is_bond(&host, "bond0") && !has_device(&host, "bond0"));
        assert_eq!(value::<u32>(&host, "eth0", "type"), Some(1));
        assert_eq!(flags(&host, "eth0"), Some(0x1003));
        assert_eq!(statistic(&host, "eth0", "rx_errors"), Some(17));
        assert_eq!(statistic(&host, "eth0", "tx_errors"), None);
        assert_eq!(value::<u64>(&host, "eth0", "speed"), None);
    }
}
