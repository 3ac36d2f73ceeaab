//! `statvfs(2)` of a directory, in node_exporter's `node_filesystem_*` terms. Not a file under
//! `/sys`: the one system call the collectors make about filesystems, on an agent-side path
//! that comes from [`HostPaths::resolve`](crate::HostPaths::resolve). Used by the `disk`
//! collector (how full a filesystem is) and the `kernel` collector (the filesystems behind a
//! hung task).

use std::path::Path;

/// `statvfs` of an agent-side path. Replaceable for tests (fake hosts have no real disks).
pub type StatFsFn = dyn Fn(&Path) -> std::io::Result<FsUsage> + Send;

/// `statfs` figures of a filesystem, with node_exporter's `node_filesystem_*` meanings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsUsage {
    /// `f_blocks * f_frsize`.
    pub size_bytes: u64,
    /// Free for unprivileged users: `f_bavail * f_frsize`.
    pub avail_bytes: u64,
    /// Free including root's reserve: `f_bfree * f_frsize`.
    pub free_bytes: u64,
    pub files: u64,
    pub files_free: u64,
}

impl FsUsage {
    /// Used share as `df` computes it: used / (used + available).
    pub fn used_percent(&self) -> f64 {
        let used = self.size_bytes.saturating_sub(self.free_bytes) as f64;
        let denom = used + self.avail_bytes as f64;
        if denom <= 0.0 {
            0.0
        } else {
            used * 100.0 / denom
        }
    }

    pub fn inodes_used_percent(&self) -> f64 {
        if self.files == 0 {
            0.0
        } else {
            self.files.saturating_sub(self.files_free) as f64 * 100.0 / self.files as f64
        }
    }
}

/// `statvfs(2)` of an agent-side path (a directory under the host root), in node_exporter's
/// terms.
pub fn usage(path: &Path) -> std::io::Result<FsUsage> {
    let s = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let frsize = s.fragment_size() as u64;
    let frsize = if frsize == 0 {
        s.block_size() as u64
    } else {
        frsize
    };
    Ok(FsUsage {
        size_bytes: (s.blocks() as u64).saturating_mul(frsize),
        avail_bytes: (s.blocks_available() as u64).saturating_mul(frsize),
        free_bytes: (s.blocks_free() as u64).saturating_mul(frsize),
        files: s.files() as u64,
        files_free: s.files_free() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_share_is_dfs() {
        // df: used / (used + available), root's reserve counted as neither.
        let u = FsUsage {
            size_bytes: 100,
            avail_bytes: 15,
            free_bytes: 20,
            files: 10,
            files_free: 4,
        };
        assert_eq!(u.used_percent(), 80.0 * 100.0 / 95.0);
        assert_eq!(u.inodes_used_percent(), 60.0);
        assert_eq!(FsUsage::default().used_percent(), 0.0);
        assert_eq!(FsUsage::default().inodes_used_percent(), 0.0);
    }

    #[test]
    fn statvfs_of_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let u = usage(dir.path()).unwrap();
        assert!(u.size_bytes > 0 && u.avail_bytes <= u.size_bytes, "{u:?}");
        assert!(u.free_bytes >= u.avail_bytes, "{u:?}");
        assert!(usage(&dir.path().join("missing")).is_err());
    }
}
