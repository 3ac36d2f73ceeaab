//! `/sys/block` and `/sys/class/block`: which `/proc/diskstats` entries are whole disks, and
//! the names device-mapper volumes carry (`dm-0` -> `vg0-data`).

use crate::host::HostPaths;

/// What a `/proc/diskstats` entry is, for the purpose of judging disk load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// A whole disk (sda, vda, nvme0n1, xvda...), a device-mapper or md volume.
    Disk,
    /// A partition of a disk.
    Partition,
    /// loop, ram, zram devices: memory or files, not storage of their own.
    Virtual,
}

/// Classifies a device by name alone (used when `/sys` is not available).
pub fn kind_by_name(name: &str) -> DeviceKind {
    if ["loop", "ram", "zram", "fd"]
        .iter()
        .any(|p| name.starts_with(p) && name[p.len()..].chars().all(|c| c.is_ascii_digit()))
    {
        return DeviceKind::Virtual;
    }
    if name.starts_with("dm-") || name.starts_with("md") {
        return DeviceKind::Disk;
    }
    // nvme0n1p2, mmcblk0p1, nbd0p1: `p<digits>` after a digit is a partition.
    if name.starts_with("nvme") || name.starts_with("mmcblk") || name.starts_with("nbd") {
        if let Some(idx) = name.rfind('p') {
            let (head, tail) = name.split_at(idx);
            let digits = &tail[1..];
            if !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit())
                && head.ends_with(|c: char| c.is_ascii_digit())
            {
                return DeviceKind::Partition;
            }
        }
        return DeviceKind::Disk;
    }
    // sda1, vdb2, xvda1, hda3: letters then digits.
    let is_lettered = ["sd", "vd", "xvd", "hd"]
        .iter()
        .any(|p| name.starts_with(p));
    if is_lettered && name.ends_with(|c: char| c.is_ascii_digit()) {
        return DeviceKind::Partition;
    }
    DeviceKind::Disk
}

/// Classifies a device, asking sysfs when it is mounted under the host root: an entry of
/// `/sys/block` is a whole device, an entry with a `partition` file is a partition.
pub fn kind(host: &HostPaths, name: &str) -> DeviceKind {
    let by_name = kind_by_name(name);
    if by_name == DeviceKind::Virtual {
        return by_name;
    }
    let sys_name = name.replace('/', "!");
    if host.sys_file("block").is_dir() {
        if host.sys_file("block").join(&sys_name).exists() {
            return DeviceKind::Disk;
        }
        if host
            .sys_file("class/block")
            .join(&sys_name)
            .join("partition")
            .exists()
        {
            return DeviceKind::Partition;
        }
    }
    by_name
}

/// The device-mapper name of `dm-N` (`/sys/block/dm-N/dm/name`), when readable.
pub fn dm_name(host: &HostPaths, name: &str) -> Option<String> {
    if !name.starts_with("dm-") {
        return None;
    }
    let path = host.sys_file("block").join(name).join("dm/name");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE).ok()?;
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classifies_by_name() {
        use DeviceKind::*;
        for (n, k) in [
            ("sda", Disk),
            ("sda5", Partition),
            ("vda", Disk),
            ("vda1", Partition),
            ("xvdb", Disk),
            ("xvdb1", Partition),
            ("nvme0n1", Disk),
            ("nvme0n1p2", Partition),
            ("mmcblk0", Disk),
            ("mmcblk0p1", Partition),
            ("dm-0", Disk),
            ("md127", Disk),
            ("loop3", Virtual),
            ("ram0", Virtual),
            ("zram0", Virtual),
            ("sr0", Disk),
            ("nbd0", Disk),
            ("nbd0p1", Partition),
        ] {
            assert_eq!(kind_by_name(n), k, "{n}");
        }
    }

    #[test]
    fn sysfs_overrides_name() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        std::fs::create_dir_all(t.path().join("sys/block/vdb")).unwrap();
        std::fs::create_dir_all(t.path().join("sys/block/dm-1/dm")).unwrap();
        std::fs::write(t.path().join("sys/block/dm-1/dm/name"), "vg0-data\n").unwrap();
        std::fs::create_dir_all(t.path().join("sys/class/block/sdc9")).unwrap();
        std::fs::write(t.path().join("sys/class/block/sdc9/partition"), "9\n").unwrap();
        assert_eq!(kind(&h, "vdb"), DeviceKind::Disk);
        assert_eq!(kind(&h, "sdc9"), DeviceKind::Partition);
        assert_eq!(dm_name(&h, "dm-1").as_deref(), Some("vg0-data"));
        assert_eq!(dm_name(&h, "sda"), None);
    }

    proptest::proptest! {
        #[test]
        fn classifying_never_panics(s in ".*") {
            let _ = kind_by_name(&s);
        }
        /// Names as the kernel's drivers make them (`sd_format_disk_name()`'s `sda`…`sdzz`
        /// and `sda1`, `nvme%dn%d` and `…p%d`, `loop%d`, `dm-%d`, `md%d`): each family reads
        /// as its kind.
        #[test]
        fn names_the_kernel_makes_classify_as_their_kind(
            (name, want) in proptest::prop_oneof![
                "(sd|vd|xvd|hd)[a-z]{1,2}".prop_map(|n| (n, DeviceKind::Disk)),
                "(sd|vd|xvd|hd)[a-z]{1,2}[1-9][0-9]?".prop_map(|n| (n, DeviceKind::Partition)),
                "(nvme[0-9]{1,2}n[1-9]|mmcblk[0-9]{1,2}|nbd[0-9]{1,2})".prop_map(|n| (n, DeviceKind::Disk)),
                "(nvme[0-9]{1,2}n[1-9]|mmcblk[0-9]{1,2}|nbd[0-9]{1,2})p[1-9][0-9]?".prop_map(|n| (n, DeviceKind::Partition)),
                "(loop|ram|zram|fd)[0-9]{1,3}".prop_map(|n| (n, DeviceKind::Virtual)),
                "(dm-|md)[0-9]{1,3}".prop_map(|n| (n, DeviceKind::Disk)),
            ],
        ) {
            proptest::prop_assert_eq!(kind_by_name(&name), want);
        }
    }
}
