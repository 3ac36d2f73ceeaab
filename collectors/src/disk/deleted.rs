//! Space held by deleted-but-open files: `<root>/proc/<pid>/fd/*` links whose target ends in
//! ` (deleted)`. The space of such a file comes back only when the last holder closes it,
//! which is why the handbook says to empty a log with `cat /dev/null >` instead of `rm`.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::host::HostPaths;
use crate::hostfs::{self, entries};
use crate::node::Node;

/// One open descriptor of a deleted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedFile {
    pub pid: u32,
    pub fd: u32,
    pub comm: String,
    /// The path the file had, as the holder's mount namespace saw it.
    pub path: String,
    /// Allocated bytes of the file (`st_blocks * 512`): what deleting it would have freed.
    pub bytes: u64,
    /// `st_dev` of the filesystem the file is on.
    pub dev: u64,
    /// False for the second and later descriptors of one file (count its bytes once).
    pub first: bool,
}

/// The result of one scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub files: Vec<DeletedFile>,
    /// Processes whose `fd` directory could not be read (permission).
    pub denied: usize,
}

/// Splits the ` (deleted)` suffix off a `readlink` result.
pub fn deleted_target(link: &str) -> Option<&str> {
    link.strip_suffix(" (deleted)")
}

/// Scans every process's descriptors for deleted files on one of `devs` (the processes and
/// their `comm` from the shared process table). The disk collector calls it only for
/// filesystems that need attention (judged at warning or worse by their usage alone).
pub fn scan(node: &Node, devs: &HashSet<u64>) -> Result<Scan, crate::ReadError> {
    let host = node.host();
    let mut out = Scan::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let snap = node.processes().snapshot("disk/deleted")?;
    for proc in &snap.procs {
        let p = proc.pid;
        let fd_dir = host.proc_pid(p).join("fd");
        let rd = match hostfs::dir_entries(&fd_dir, entries::FDS) {
            Ok(rd) => rd,
            Err(e) if e.is_permission_denied() => {
                out.denied += 1;
                continue;
            }
            Err(_) => continue,
        };
        for entry in rd {
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let target = target.to_string_lossy();
            let Some(path) = deleted_target(&target) else {
                continue;
            };
            // stat follows the magic link to the (deleted) inode itself.
            let Ok(md) = std::fs::metadata(entry.path()) else {
                continue;
            };
            if !md.is_file() || !devs.contains(&md.dev()) {
                continue;
            }
            let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let comm = proc.comm.to_string();
            out.files.push(DeletedFile {
                pid: p,
                fd,
                comm,
                path: path.to_string(),
                bytes: md.blocks().saturating_mul(512),
                dev: md.dev(),
                first: seen.insert((md.dev(), md.ino())),
            });
        }
    }
    Ok(out)
}

/// Bytes held per process on device `dev`, largest first: (pid, comm, bytes, largest fd).
pub fn holders(files: &[DeletedFile], dev: u64) -> Vec<(u32, String, u64, u32)> {
    let mut by_pid: std::collections::BTreeMap<u32, (String, u64, u32, u64)> = Default::default();
    for f in files.iter().filter(|f| f.dev == dev) {
        let e = by_pid
            .entry(f.pid)
            .or_insert_with(|| (f.comm.clone(), 0, f.fd, 0));
        e.1 = e.1.saturating_add(f.bytes);
        if f.bytes > e.3 {
            e.2 = f.fd;
            e.3 = f.bytes;
        }
    }
    let mut v: Vec<(u32, String, u64, u32)> = by_pid
        .into_iter()
        .map(|(pid, (comm, bytes, fd, _))| (pid, comm, bytes, fd))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Total bytes held on `dev`, each file counted once.
pub fn total(files: &[DeletedFile], dev: u64) -> u64 {
    files
        .iter()
        .filter(|f| f.dev == dev && f.first)
        .map(|f| f.bytes)
        .fold(0u64, u64::saturating_add)
}

/// The agent-side path of a holder's descriptor, for tests.
pub fn fd_path(host: &HostPaths, pid: u32, fd: u32) -> PathBuf {
    host.proc_pid(pid).join("fd").join(fd.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix() {
        // readlink of /proc/<pid>/fd/<n> on Linux 6.18 for an unlinked file.
        assert_eq!(
            deleted_target("/var/lib/docker/containers/a/a-json.log (deleted)"),
            Some("/var/lib/docker/containers/a/a-json.log")
        );
        assert_eq!(deleted_target("/var/log/messages"), None);
        assert_eq!(deleted_target("socket:[12345]"), None);
    }

    #[test]
    fn holders_count_files_once_in_total() {
        let f = |pid, fd, bytes, first| DeletedFile {
            pid,
            fd,
            comm: format!("p{pid}"),
            path: "/x".into(),
            bytes,
            dev: 7,
            first,
        };
        let files = vec![
            f(10, 3, 100, true),
            f(10, 4, 500, true),
            f(11, 5, 500, false),
        ];
        assert_eq!(total(&files, 7), 600);
        assert_eq!(total(&files, 8), 0);
        let h = holders(&files, 7);
        assert_eq!(h[0], (10, "p10".to_string(), 600, 4));
        assert_eq!(h[1], (11, "p11".to_string(), 500, 5));
    }
}
