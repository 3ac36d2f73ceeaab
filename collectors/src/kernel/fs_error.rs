//! Filesystem and block-device error lines of the kernel log, naming the device:
//!
//! ```text
//! EXT4-fs error (device vdb): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0
//! EXT4-fs (vdb): Remounting filesystem read-only
//! EXT4-fs (sda1): previous I/O error to superblock detected                  (ignored)
//! XFS (dm-0): Corruption of in-memory data detected.  Shutting down filesystem
//! XFS (sdb): I/O Error Detected. Shutting down filesystem                     (3.10)
//! Buffer I/O error on dev sdb1, logical block 0, async page read              (4.x+)
//! Buffer I/O error on device sdb1, logical block 12345                        (2.6/3.10)
//! ```

/// What happened to the filesystem or device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FsErrorKind {
    /// An ext4 error (`EXT4-fs error`); the filesystem may go read-only next.
    Ext4Error,
    /// The filesystem was remounted read-only: writes now fail.
    ReadOnly,
    /// XFS shut the filesystem down: every access fails until it is unmounted and repaired.
    XfsShutdown,
    /// A block-layer read or write failed on the device.
    BufferIo,
}

impl FsErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FsErrorKind::Ext4Error => "ext4_error",
            FsErrorKind::ReadOnly => "remounted_read_only",
            FsErrorKind::XfsShutdown => "xfs_shutdown",
            FsErrorKind::BufferIo => "buffer_io_error",
        }
    }

    /// True when the filesystem no longer accepts writes.
    pub fn stops_writes(self) -> bool {
        matches!(self, FsErrorKind::ReadOnly | FsErrorKind::XfsShutdown)
    }
}

/// One filesystem error line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// Kernel device name (`vdb`, `sda1`, `dm-0`), as printed.
    pub device: String,
    pub kind: FsErrorKind,
}

/// Parses a kernel log message; `None` when it is none of the lines above.
pub fn parse(message: &str) -> Option<FsError> {
    let m = message.trim();
    if let Some(rest) = m.strip_prefix("EXT4-fs error (device ") {
        return dev_until(rest, ')').map(|d| FsError {
            device: d,
            kind: FsErrorKind::Ext4Error,
        });
    }
    // ext2/ext3/ext4 print the read-only remount the same way.
    for prefix in ["EXT4-fs (", "EXT3-fs (", "EXT2-fs ("] {
        if let Some(rest) = m.strip_prefix(prefix) {
            if rest.contains("Remounting filesystem read-only") {
                return dev_until(rest, ')').map(|d| FsError {
                    device: d,
                    kind: FsErrorKind::ReadOnly,
                });
            }
            return None;
        }
    }
    if let Some(rest) = m.strip_prefix("XFS (") {
        if rest.contains("Shutting down filesystem") {
            return dev_until(rest, ')').map(|d| FsError {
                device: d,
                kind: FsErrorKind::XfsShutdown,
            });
        }
        return None;
    }
    if let Some(rest) = m.strip_prefix("Buffer I/O error on dev") {
        let rest = rest.strip_prefix("ice").unwrap_or(rest);
        return dev_until(rest.trim_start(), ',').map(|d| FsError {
            device: d,
            kind: FsErrorKind::BufferIo,
        });
    }
    None
}

/// The device name up to `end`, when it looks like one (no spaces, no slashes, short).
fn dev_until(s: &str, end: char) -> Option<String> {
    let (dev, _) = s.split_once(end)?;
    let dev = dev.trim();
    let ok = !dev.is_empty()
        && dev.len() <= 64
        && dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '!'));
    ok.then(|| dev.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<(String, FsErrorKind)> {
        parse(s).map(|e| (e.device, e.kind))
    }

    #[test]
    fn ext4_old_and_new() {
        // Kernel 3.10 (CentOS 7) and 6.1 (Debian 12) print the same text.
        assert_eq!(
            p("EXT4-fs error (device vdb): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0"),
            Some(("vdb".into(), FsErrorKind::Ext4Error))
        );
        assert_eq!(
            p("EXT4-fs (vdb): Remounting filesystem read-only"),
            Some(("vdb".into(), FsErrorKind::ReadOnly))
        );
        assert_eq!(
            p("EXT3-fs (sda2): Remounting filesystem read-only"),
            Some(("sda2".into(), FsErrorKind::ReadOnly))
        );
        // Kernel 6.18.44 (this VM): an ordinary mount message is not an error.
        assert_eq!(
            p("EXT4-fs (vda): mounted filesystem 00000000-0000-0000-0000-000000000000 r/w without journal. Quota mode: none."),
            None
        );
    }

    #[test]
    fn xfs_and_buffer_io() {
        // Kernel 3.10 and 5.x forms.
        assert_eq!(
            p("XFS (sdb): I/O Error Detected. Shutting down filesystem"),
            Some(("sdb".into(), FsErrorKind::XfsShutdown))
        );
        assert_eq!(
            p("XFS (dm-0): Corruption of in-memory data detected.  Shutting down filesystem"),
            Some(("dm-0".into(), FsErrorKind::XfsShutdown))
        );
        assert_eq!(
            p("XFS (dm-0): Please unmount the filesystem and rectify the problem(s)"),
            None
        );
        assert_eq!(
            p("Buffer I/O error on dev sdb1, logical block 0, async page read"),
            Some(("sdb1".into(), FsErrorKind::BufferIo))
        );
        assert_eq!(
            p("Buffer I/O error on device sdb1, logical block 12345"),
            Some(("sdb1".into(), FsErrorKind::BufferIo))
        );
        assert_eq!(
            p("Buffer I/O error on dev loop0, logical block 3, lost async page write"),
            Some(("loop0".into(), FsErrorKind::BufferIo))
        );
        assert_eq!(p("Buffer I/O error on dev , logical block 1"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_fs_like(s in "(EXT4-fs error \\(device |EXT4-fs \\(|XFS \\(|Buffer I/O error on dev(ice)? )[a-z0-9 ,()-]{0,20}(Remounting filesystem read-only|Shutting down filesystem)?") {
            let _ = parse(&s);
        }
    }
}
