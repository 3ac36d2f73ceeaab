//! Filesystem and block-device error lines of the kernel log, naming the device, in the
//! wordings of 3.10 to 6.x:
//!
//! ```text
//! EXT4-fs error (device vdb): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0
//! EXT4-fs error (device sda1) in ext4_reserve_inode_write:5788: Journal has aborted
//! EXT4-fs (vdb): Remounting filesystem read-only                    (ext2/ext3/ext4, all versions)
//! EXT4-fs (sda1): warning: mounting fs with errors, running e2fsck is recommended
//! EXT4-fs (sdi): I/O error while writing superblock                         (2.6 .. 6.x)
//! EXT4-fs (dm-70): previous I/O error to superblock detected                 (2.6 .. 6.x)
//! Aborting journal on device dm-70-8.                    (jbd2: `<device>-<journal inode>`)
//! JBD2: Error -5 detected when updating journal superblock for dm-70-8.
//! JBD2: Detected IO errors while flushing file data on sda1-8
//! XFS (sdb): I/O Error Detected. Shutting down filesystem                     (3.x .. 5.13)
//! XFS (dm-0): Corruption of in-memory data detected.  Shutting down filesystem (3.x .. 5.13)
//! XFS (dm-0): Log I/O error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] (fs/xfs/xfs_log.c:1281). Shutting down filesystem (5.14 .. 5.16)
//! XFS (loop0): Log I/O Error (0x6) detected at xfs_fs_goingdown+0x63/0xb0 (fs/xfs/xfs_fsops.c:475).  Shutting down filesystem.  (5.17+)
//! XFS (dm-0): Filesystem has been shut down due to log error (0x2).           (5.17+)
//! XFS (sda4): Corruption detected. Unmount and run xfs_repair                 (all)
//! XFS (loop5): Metadata corruption detected at xfs_btree_lookup_get_block+0x27a/0x300, xfs_refcountbt block 0x28
//! XFS (sda2): Metadata CRC error detected at xfs_agi_read_verify+0x8e/0xd0 [xfs], xfs_agi block 0x2
//! XFS (dm-2): Internal error XFS_WANT_CORRUPTED_RETURN at line 351 of file fs/xfs/libxfs/xfs_alloc.c.  Caller …
//! XFS (dm-2): Corruption warning: Metadata has LSN (1:2736) ahead of current LSN (1:120). …
//! XFS (dm-11): metadata I/O error: block 0x2 ("xfs_trans_read_buf_map") error 5 numblks 1   (3.x .. 4.x)
//! XFS (dm-7): log mount failed
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
    /// XFS found corrupt metadata (it may shut down next).
    XfsCorruption,
    /// ext4 was mounted with errors recorded and not yet repaired (`running e2fsck is
    /// recommended`): a past error survived a remount or reboot.
    MountedWithErrors,
    /// The journal (jbd2) aborted: ext4 stops writing and goes read-only next.
    JournalAborted,
    /// ext4 or its journal could not write its superblock or flush data: the device under
    /// it failed.
    MetadataIo,
    /// XFS could not read its metadata or its log (`metadata I/O error`, a failed log
    /// mount): the device under it failed.
    XfsIo,
}

impl FsErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FsErrorKind::Ext4Error => "ext4_error",
            FsErrorKind::ReadOnly => "remounted_read_only",
            FsErrorKind::XfsShutdown => "xfs_shutdown",
            FsErrorKind::BufferIo => "buffer_io_error",
            FsErrorKind::XfsCorruption => "xfs_corruption",
            FsErrorKind::MountedWithErrors => "mounted_with_errors",
            FsErrorKind::JournalAborted => "journal_aborted",
            FsErrorKind::MetadataIo => "metadata_io_error",
            FsErrorKind::XfsIo => "xfs_io_error",
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
            let kind = if rest.contains("Remounting filesystem read-only") {
                FsErrorKind::ReadOnly
            } else if rest.contains("mounting fs with errors") {
                FsErrorKind::MountedWithErrors
            } else if rest.contains("I/O error while writing superblock")
                || rest.contains("previous I/O error to superblock detected")
            {
                FsErrorKind::MetadataIo
            } else {
                return None;
            };
            return dev_until(rest, ')').map(|d| FsError { device: d, kind });
        }
    }
    if let Some(rest) = m.strip_prefix("XFS (") {
        let (_, text) = rest.split_once("): ")?;
        let kind = if text.contains("Shutting down filesystem")
            || text.starts_with("Filesystem has been shut down")
        {
            FsErrorKind::XfsShutdown
        } else if text.starts_with("Corruption detected")
            || text.starts_with("Metadata corruption detected")
            || text.starts_with("Metadata CRC error detected")
            || text.starts_with("Internal error ")
            || text.starts_with("Corruption warning: ")
        {
            FsErrorKind::XfsCorruption
        } else if text.starts_with("metadata I/O error")
            || text.starts_with("log mount failed")
            || text.starts_with("log mount/recovery failed")
        {
            FsErrorKind::XfsIo
        } else {
            return None;
        };
        return dev_until(rest, ')').map(|d| FsError { device: d, kind });
    }
    if let Some(e) = parse_journal(m) {
        return Some(e);
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

/// jbd2's lines, which name the journal as `<device>-<journal inode>` (`dm-70-8`): an aborted
/// journal, a journal superblock it could not write, file data it could not flush.
fn parse_journal(m: &str) -> Option<FsError> {
    let (journal, kind) = if let Some(r) = m.strip_prefix("Aborting journal on device ") {
        (r.trim_end_matches('.'), FsErrorKind::JournalAborted)
    } else if let Some(r) = m.strip_prefix("JBD2: ") {
        let (_, j) = r
            .split_once("when updating journal superblock for ")
            .or_else(|| r.split_once("Detected IO errors while flushing file data on "))?;
        (j.trim_end_matches('.'), FsErrorKind::MetadataIo)
    } else {
        return None;
    };
    let (device, inode) = journal.trim().rsplit_once('-')?;
    if inode.is_empty() || !inode.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    dev_until(&format!("{device})"), ')').map(|device| FsError { device, kind })
}

/// An ext4 warning (`EXT4-fs warning (device sda1): ext4_dx_add_entry:2461: Directory index
/// full!`, the same from 3.10 to 6.x): the device and the function that warned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ext4Warning {
    pub device: String,
    /// The kernel function named after the device (`ext4_dx_add_entry`), when it looks like one.
    pub function: Option<String>,
}

/// Parses an `EXT4-fs warning (device …)` message; `None` for anything else.
pub fn parse_ext4_warning(message: &str) -> Option<Ext4Warning> {
    let rest = message.trim().strip_prefix("EXT4-fs warning (device ")?;
    let device = dev_until(rest, ')')?;
    let function = rest
        .split_once("): ")
        .and_then(|(_, t)| t.split_once(':'))
        .map(|(f, _)| f)
        .filter(|f| {
            !f.is_empty()
                && f.len() <= 64
                && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(str::to_string);
    Some(Ext4Warning { device, function })
}

/// The device name up to `end`, when it looks like one (no spaces, no slashes, not `.` or
/// `..`, short): it names files under `/sys/class/block` and `/sys/fs/ext4`.
fn dev_until(s: &str, end: char) -> Option<String> {
    let (dev, _) = s.split_once(end)?;
    let dev = dev.trim();
    let ok = !dev.is_empty()
        && !dev.chars().all(|c| c == '.')
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
    fn ext4_warnings() {
        // The same from 3.10 (CentOS 7) to 6.x.
        assert_eq!(
            parse_ext4_warning(
                "EXT4-fs warning (device sda1): ext4_dx_add_entry:2461: Directory index full!"
            ),
            Some(Ext4Warning {
                device: "sda1".into(),
                function: Some("ext4_dx_add_entry".into())
            })
        );
        assert_eq!(
            parse_ext4_warning("EXT4-fs warning (device vdb): ext4_end_bio:343: I/O error 10 writing to inode 12 starting block 8193)")
                .and_then(|w| w.function),
            Some("ext4_end_bio".into())
        );
        assert_eq!(
            parse_ext4_warning("EXT4-fs warning (device a/b): x:1: y"),
            None
        );
        assert_eq!(
            p("EXT4-fs warning (device sda1): ext4_dx_add_entry:2461: Directory index full!"),
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
        assert_eq!(p("Buffer I/O error on dev .., logical block 1"), None);
    }

    /// Kernel 6.18.44 (this VM): an ext4 image on a loop device, `errors=remount-ro`, an error
    /// raised through `/sys/fs/ext4/loop0/trigger_fs_error`, then a cleared directory inode
    /// (debugfs `clri`) looked up after a remount.
    #[test]
    fn ext4_6_18_lines() {
        for (line, kind) in [
            ("EXT4-fs error (device loop0): trigger_test_error:129: comm fs2.sh: node-doctor fixture", FsErrorKind::Ext4Error),
            ("EXT4-fs (loop0): Remounting filesystem read-only", FsErrorKind::ReadOnly),
            ("EXT4-fs error (device loop0): ext4_lookup:1789: inode #2: comm ls: deleted inode referenced: 12", FsErrorKind::Ext4Error),
            ("EXT4-fs (loop0): warning: mounting fs with errors, running e2fsck is recommended", FsErrorKind::MountedWithErrors),
        ] {
            assert_eq!(p(line), Some(("loop0".into(), kind)), "{line}");
        }
        for line in [
            "EXT4-fs warning (device loop0): ext4_clear_journal_err:6350: Filesystem error recorded from previous mount: IO failure",
            "EXT4-fs (loop0): recovery complete",
            "EXT4-fs (loop0): unmounting filesystem c1d99bff-be0f-4bf2-895e-bdd17f217d29.",
        ] {
            assert_eq!(p(line), None, "{line}");
        }
        // The journal's own lines name the device with its journal inode (`loop0-8`).
        assert_eq!(
            p("Aborting journal on device loop0-8."),
            Some(("loop0".into(), FsErrorKind::JournalAborted))
        );
        // 3.10 .. 6.x: an error in a journal operation names the function after "in".
        assert_eq!(
            p("EXT4-fs error (device sda1) in ext4_reserve_inode_write:5788: Journal has aborted"),
            Some(("sda1".into(), FsErrorKind::Ext4Error))
        );
    }

    /// Lines of public reports (collectors/tests/corpus): ext4 superblock and jbd2 write
    /// failures of devmapper thin devices and Longhorn volumes (4.x, 5.x), XFS metadata read
    /// errors, a failed log mount and an internal error (3.10, 4.4, 4.13).
    #[test]
    fn metadata_io_and_journal_lines_of_real_reports() {
        for (line, dev, kind) in [
            ("EXT4-fs (sdi): I/O error while writing superblock", "sdi", FsErrorKind::MetadataIo),
            ("EXT4-fs (dm-70): previous I/O error to superblock detected", "dm-70", FsErrorKind::MetadataIo),
            ("JBD2: Error -5 detected when updating journal superblock for dm-70-8.", "dm-70", FsErrorKind::MetadataIo),
            ("JBD2: Detected IO errors while flushing file data on sda1-8", "sda1", FsErrorKind::MetadataIo),
            ("Aborting journal on device xvda9-8.", "xvda9", FsErrorKind::JournalAborted),
            ("XFS (dm-11): metadata I/O error: block 0x2 (\"xfs_trans_read_buf_map\") error 5 numblks 1", "dm-11", FsErrorKind::XfsIo),
            ("XFS (dm-7): log mount failed", "dm-7", FsErrorKind::XfsIo),
            ("XFS (dm-7): log mount/recovery failed: error -5", "dm-7", FsErrorKind::XfsIo),
            ("XFS (dm-2): Internal error XFS_WANT_CORRUPTED_RETURN at line 351 of file fs/xfs/libxfs/xfs_alloc.c.  Caller xfs_alloc_ag_vextent_near+0x78f/0xba0 [xfs]", "dm-2", FsErrorKind::XfsCorruption),
            ("XFS (dm-2): Corruption warning: Metadata has LSN (1:2736) ahead of current LSN (1:120). Please unmount and run xfs_repair (>= v4.3) to resolve.", "dm-2", FsErrorKind::XfsCorruption),
        ] {
            assert_eq!(p(line), Some((dev.to_string(), kind)), "{line}");
        }
        for line in [
            "Aborting journal on device sdb1.",
            "Aborting journal on device a/b-8.",
            "JBD2: Spotted dirty metadata buffer (dev = dm-70, blocknr = 0). There's a risk of filesystem corruption in case of system crash.",
            "XFS (dm-5): Ending clean mount",
        ] {
            assert_eq!(p(line), None, "{line}");
        }
    }

    /// XFS shutdown and corruption lines by kernel version.
    #[test]
    fn xfs_lines_by_version() {
        for (line, kind) in [
            // 6.18.44 (this VM): a mounted XFS image shut down with `xfs_io -x -c shutdown`.
            ("XFS (loop0): Log I/O Error (0x6) detected at xfs_fs_goingdown+0x63/0xb0 (fs/xfs/xfs_fsops.c:475).  Shutting down filesystem.", FsErrorKind::XfsShutdown),
            ("XFS (loop0): Metadata I/O Error (0x4) detected at xfs_fs_goingdown+0x7b/0xb0 (fs/xfs/xfs_fsops.c:472).  Shutting down filesystem.", FsErrorKind::XfsShutdown),
            // 5.19-rc4 (the kernel log quoted in commit 7561cea5dbb9, a log I/O error).
            ("XFS (dm-0): Filesystem has been shut down due to log error (0x2).", FsErrorKind::XfsShutdown),
            // 5.14 .. 5.16 ("xfs: print name of function causing fs shutdown instead of hex
            // pointer", June 2021; the forms of the patch itself).
            ("XFS (dm-0): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x14e/0x160 [xfs] (fs/xfs/xfs_trans.c:1097).  Shutting down filesystem", FsErrorKind::XfsShutdown),
            ("XFS (sdb): Log I/O error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] (fs/xfs/xfs_log.c:1281). Shutting down filesystem", FsErrorKind::XfsShutdown),
            // Verifier reports (3.10 .. 6.x), quoted in XFS patches.
            ("XFS (sda4): Corruption detected. Unmount and run xfs_repair", FsErrorKind::XfsCorruption),
            ("XFS (loop5): Metadata corruption detected at xfs_btree_lookup_get_block+0x27a/0x300, xfs_refcountbt block 0x28", FsErrorKind::XfsCorruption),
            ("XFS (sda2): Metadata CRC error detected at xfs_agi_read_verify+0x8e/0xd0 [xfs], xfs_agi block 0x2", FsErrorKind::XfsCorruption),
        ] {
            let dev = line[5..line.find(')').unwrap()].to_string();
            assert_eq!(p(line), Some((dev, kind)), "{line}");
        }
        for line in [
            "XFS (loop0): User initiated shutdown received.",
            "XFS (loop0): Please unmount the filesystem and rectify the problem(s)",
            "XFS (loop0): Mounting V5 Filesystem 8cbbd9e7-c99d-4916-b808-7ad8a1481f93",
            "XFS (loop0): Ending clean mount",
            "XFS (sda4): Unmount and run xfs_repair",
        ] {
            assert_eq!(p(line), None, "{line}");
        }
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

        /// Every wording in the module's table, as ext2/3/4, XFS and the buffer layer print
        /// it, for any block device name and any block number: the device and the kind read
        /// back; an ext4 warning gives its device and function.
        #[test]
        fn parses_what_the_kernel_prints(
            d in crate::testgen::block_device(), block in proptest::num::u64::ANY,
            line in 1u32..10_000, wording in 0usize..15,
        ) {
            use FsErrorKind::*;
            let (text, kind) = [
                (format!("EXT4-fs error (device {d}): ext4_find_entry:{line}: inode #2: comm ls: reading directory lblock {block}"), Ext4Error),
                (format!("EXT4-fs error (device {d}) in ext4_reserve_inode_write:{line}: Journal has aborted"), Ext4Error),
                (format!("EXT4-fs ({d}): Remounting filesystem read-only"), ReadOnly),
                (format!("EXT3-fs ({d}): Remounting filesystem read-only"), ReadOnly),
                (format!("EXT2-fs ({d}): Remounting filesystem read-only"), ReadOnly),
                (format!("EXT4-fs ({d}): warning: mounting fs with errors, running e2fsck is recommended"), MountedWithErrors),
                (format!("XFS ({d}): I/O Error Detected. Shutting down filesystem"), XfsShutdown),
                (format!("XFS ({d}): Corruption of in-memory data detected.  Shutting down filesystem"), XfsShutdown),
                (format!("XFS ({d}): Log I/O error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] (fs/xfs/xfs_log.c:{line}). Shutting down filesystem"), XfsShutdown),
                (format!("XFS ({d}): Filesystem has been shut down due to log error (0x2)."), XfsShutdown),
                (format!("XFS ({d}): Corruption detected. Unmount and run xfs_repair"), XfsCorruption),
                (format!("XFS ({d}): Metadata corruption detected at xfs_btree_lookup_get_block+0x27a/0x300, xfs_refcountbt block {block:#x}"), XfsCorruption),
                (format!("XFS ({d}): Metadata CRC error detected at xfs_agi_read_verify+0x8e/0xd0 [xfs], xfs_agi block {block:#x}"), XfsCorruption),
                (format!("Buffer I/O error on dev {d}, logical block {block}, async page read"), BufferIo),
                (format!("Buffer I/O error on device {d}, logical block {block}"), BufferIo),
            ][wording].clone();
            proptest::prop_assert_eq!(parse(&text), Some(FsError { device: d.clone(), kind }));
            let warning = format!("EXT4-fs warning (device {d}): ext4_dx_add_entry:{line}: Directory index full!");
            proptest::prop_assert_eq!(
                parse_ext4_warning(&warning),
                Some(Ext4Warning { device: d, function: Some("ext4_dx_add_entry".into()) })
            );
        }
    }
}
