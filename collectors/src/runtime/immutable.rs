//! Files with the immutable (`chattr +i`) or append-only (`chattr +a`) attribute under the
//! directories the kubelet and the runtime must remove: pod directories, docker's container
//! directories and writable layers, containerd's snapshots. Such a file makes removal fail
//! with "operation not permitted" and the pod stays Terminating (handbook 002, the Terminating
//! section's "i" attribute check; `runtime.immutable_file` in the rule file cites it).
//!
//! The attribute is read from the file itself with `FS_IOC_GETFLAGS` (what `lsattr` does),
//! on a descriptor opened `O_RDONLY | O_NONBLOCK | O_NOFOLLOW` after the directory entry said
//! it is a regular file or a directory, and checked again with `fstat` (a FIFO or device put
//! in its place is never read). The walk is bounded per collection (entries and time),
//! resumes where it stopped, never enters another filesystem mounted below a root (pod
//! volumes, overlay `merged` mounts: their mount points are skipped by path, without a
//! `stat` that could hang on a dead network mount), and starts over when a pass ends.

use std::collections::BTreeSet;
use std::fs::ReadDir;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `FS_IMMUTABLE_FL`.
const IMMUTABLE_FL: i64 = 0x10;
/// `FS_APPEND_FL`.
const APPEND_FL: i64 = 0x20;

nix::ioctl_read!(fs_ioc_getflags, b'f', 1, nix::libc::c_long);

/// The attribute flags of an agent-side path that is a regular file or a directory; `None`
/// when it is neither, is gone, cannot be opened, or the filesystem has no such flags.
pub fn attributes(path: &Path) -> Option<(bool, bool)> {
    use nix::libc;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !(m.is_file() || m.is_dir()) {
        return None;
    }
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes at most one `long` (the kernel's handlers write an
    // `int`) into `flags`, which lives for the call; the descriptor is open for the call.
    let r = unsafe { fs_ioc_getflags(std::os::fd::AsRawFd::as_raw_fd(&f), &mut flags) };
    r.ok()?;
    let flags = flags as i64;
    Some((flags & IMMUTABLE_FL != 0, flags & APPEND_FL != 0))
}

/// Named files at most the logs make a collection check (the most recently logged first).
pub const MAX_NAMED: usize = 16;

/// The agent-side path of a regular file a log names (host text: a path the kubelet or a
/// runtime could not remove), resolved under the host root only: absolute, at most 1 KiB,
/// no `..` component, symlinks followed the way the host would and re-rooted (never out of
/// the root), and the file itself a regular file, not a link, FIFO, device or directory.
/// `None` for anything else.
pub fn named_file(host: &crate::HostPaths, host_path: &str) -> Option<PathBuf> {
    if !host_path.starts_with('/')
        || host_path.len() > 1024
        || host_path.chars().any(char::is_control)
        || Path::new(host_path)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return None;
    }
    let agent = host.resolve(host_path);
    if !agent.starts_with(host.root()) {
        return None;
    }
    let m = std::fs::symlink_metadata(&agent).ok()?;
    m.file_type().is_file().then_some(agent)
}

/// Whose directory a walk root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// `<kubelet root>/pods`: the first component below is a pod uid.
    Pods,
    /// `<docker data root>/containers`: the first component below is a container id.
    DockerContainers,
    /// A docker container's writable layer.
    DockerLayer { container_id: String },
    /// containerd's overlayfs snapshots (image layers and containers' writable layers).
    ContainerdSnapshots,
}

/// One directory to walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub agent: PathBuf,
    /// Its host path, to name what is found.
    pub host: String,
    pub owner: Owner,
}

/// A flagged file the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagged {
    pub agent: PathBuf,
    pub host: String,
    pub is_dir: bool,
    /// Pod uid or container id, from the path.
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
}

/// The bounded, resumable walk.
#[derive(Debug, Default)]
pub struct Walker {
    roots: Vec<Root>,
    /// Directories to read: path and root index.
    stack: Vec<(PathBuf, usize)>,
    current: Option<(ReadDir, usize)>,
    /// Agent-side mount points below the roots: never entered.
    skip: BTreeSet<PathBuf>,
    /// Complete passes.
    pub passes: u64,
    /// Entries looked at in the current pass.
    pub entries_this_pass: u64,
}

impl Walker {
    pub fn new() -> Walker {
        Walker::default()
    }

    /// True when no pass is under way (the next [`Walker::walk`] needs
    /// [`Walker::start`] first).
    pub fn idle(&self) -> bool {
        self.stack.is_empty() && self.current.is_none()
    }

    /// Starts a pass over `roots`, skipping the agent-side mount points in `skip`.
    pub fn start(&mut self, roots: Vec<Root>, skip: BTreeSet<PathBuf>) {
        self.stack = roots
            .iter()
            .enumerate()
            .filter(|(_, r)| r.agent.is_dir())
            .map(|(i, r)| (r.agent.clone(), i))
            .rev()
            .collect();
        self.roots = roots;
        self.skip = skip;
        self.current = None;
        self.entries_this_pass = 0;
    }

    /// Walks on for at most `max_entries` entries and `max_time`; returns the flagged files
    /// found. A pass that ends counts in [`Walker::passes`].
    pub fn walk(&mut self, max_entries: usize, max_time: Duration) -> Vec<Flagged> {
        let started = Instant::now();
        let mut out = Vec::new();
        let mut spent = 0usize;
        while spent < max_entries && started.elapsed() < max_time {
            if self.current.is_none() {
                let Some((dir, root)) = self.stack.pop() else {
                    if !self.roots.is_empty() {
                        self.passes += 1;
                        self.roots.clear();
                    }
                    break;
                };
                // The root directory itself carries attributes too (a pod dir with +i).
                if dir == self.roots[root].agent {
                    spent += 1;
                }
                match std::fs::read_dir(&dir) {
                    Ok(rd) => self.current = Some((rd, root)),
                    Err(_) => continue,
                }
            }
            let Some((rd, root)) = self.current.as_mut() else {
                continue;
            };
            let root = *root;
            let Some(entry) = rd.next() else {
                self.current = None;
                continue;
            };
            spent += 1;
            self.entries_this_pass += 1;
            let Ok(entry) = entry else { continue };
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if !(ft.is_file() || ft.is_dir()) {
                continue;
            }
            if ft.is_dir() && self.skip.contains(&path) {
                continue;
            }
            if let Some((i, a)) = attributes(&path) {
                if i || a {
                    out.push(self.flagged(&path, root, ft.is_dir()));
                }
            }
            if ft.is_dir() {
                self.stack.push((path, root));
            }
        }
        out
    }

    fn flagged(&self, path: &Path, root: usize, is_dir: bool) -> Flagged {
        let r = &self.roots[root];
        let rel = path.strip_prefix(&r.agent).unwrap_or(path);
        let first = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(String::from);
        let (pod_uid, container_id) = match &r.owner {
            Owner::Pods => (first.filter(|u| crate::names::is_pod_uid(u)), None),
            Owner::DockerContainers => (None, first.filter(|c| crate::names::is_container_id(c))),
            Owner::DockerLayer { container_id } => (None, Some(container_id.clone())),
            Owner::ContainerdSnapshots => (None, None),
        };
        Flagged {
            agent: path.to_path_buf(),
            host: format!("{}/{}", r.host.trim_end_matches('/'), rel.to_string_lossy()),
            is_dir,
            pod_uid,
            container_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_in_slices_and_skips_mount_points() {
        let t = tempfile::tempdir().unwrap();
        let pods = t.path().join("pods");
        for i in 0..30 {
            std::fs::create_dir_all(pods.join(format!("uid-{i}/volumes/v"))).unwrap();
            std::fs::write(pods.join(format!("uid-{i}/volumes/v/f")), "x").unwrap();
        }
        let skip = BTreeSet::from([pods.join("uid-3/volumes")]);
        let mut w = Walker::new();
        assert!(w.idle());
        w.start(
            vec![Root {
                agent: pods.clone(),
                host: "/var/lib/kubelet/pods".into(),
                owner: Owner::Pods,
            }],
            skip,
        );
        let mut steps = 0;
        while !w.idle() || w.passes == 0 {
            // tmpfs has no attribute flags: nothing is found, every entry is looked at.
            assert!(w.walk(10, Duration::from_secs(5)).is_empty());
            steps += 1;
            assert!(steps < 100);
        }
        assert!(steps > 5, "{steps}");
        assert_eq!(w.passes, 1);
        // 30 pod dirs, 30 volumes dirs, 29 v dirs and files (one volumes dir skipped).
        assert_eq!(w.entries_this_pass, 30 + 30 + 29 * 2);
        let f = Walker {
            roots: vec![Root {
                agent: pods.clone(),
                host: "/var/lib/kubelet/pods/".into(),
                owner: Owner::Pods,
            }],
            ..Walker::default()
        }
        .flagged(
            &pods.join("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f/etc-hosts"),
            0,
            false,
        );
        assert_eq!(
            f.host,
            "/var/lib/kubelet/pods/5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f/etc-hosts"
        );
        assert_eq!(
            f.pod_uid.as_deref(),
            Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f")
        );
    }

    #[test]
    fn attributes_refuse_what_is_not_a_file_or_directory() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Opened non-blocking and refused after fstat: no hang.
        assert_eq!(attributes(&fifo), None);
        std::os::unix::fs::symlink("/etc/passwd", t.path().join("link")).unwrap();
        assert_eq!(attributes(&t.path().join("link")), None);
        assert_eq!(attributes(&t.path().join("gone")), None);
    }
}
