//! The host-path abstraction: every path a collector reads is resolved under one host root.
//!
//! In a pod the host's `/` is mounted at `/host`; on the node itself the root is `/`. Host
//! processes come from `<root>/proc`, host mounts from `<root>/proc/1/mountinfo`. Absolute
//! symlinks inside the host tree (`/var/run -> /run`) are re-rooted by [`HostPaths::resolve`]
//! so that they never escape to the agent's own filesystem.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Maximum number of symlinks followed while resolving one host path (as the kernel's 40).
const MAX_SYMLINKS: usize = 40;

/// Where the host's filesystem is visible to the agent.
///
/// Clones share one count of the per-process paths built ([`HostPaths::per_process_paths`]):
/// every read of a `<root>/proc/<pid>/…` file goes through [`HostPaths::proc_pid`], so the
/// count is what the escalation tests assert on (a quiet node reads no per-process file).
///
/// It holds the root and resolves paths under it, nothing else: what collectors share about
/// the node beyond its paths (the process table, the kernel-log hub) is the node context's
/// ([`crate::node::Node`]).
#[derive(Debug, Clone)]
pub struct HostPaths {
    root: PathBuf,
    per_process: Arc<AtomicU64>,
}

/// Two hosts are the same host when their roots are; the shared count is bookkeeping.
impl PartialEq for HostPaths {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for HostPaths {}

impl HostPaths {
    /// A host whose `/` is visible at `root` (`/` on the node, `/host` in a pod).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HostPaths {
            root: root.into(),
            per_process: Arc::default(),
        }
    }

    /// How many `<root>/proc/<pid>` paths this host and its clones have built since it was
    /// made: one per per-process file read (or directory listed) — what a collector's
    /// escalation costs. Relaxed: a statistic, not a synchronisation point.
    pub fn per_process_paths(&self) -> u64 {
        self.per_process.load(Ordering::Relaxed)
    }

    /// The host root itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when the host root is the agent's own `/` (no re-rooting happens).
    pub fn is_identity(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Joins a host-absolute path (`/var/lib/docker`) under the root, lexically, without
    /// following symlinks. Use for `/proc` and `/sys` paths, which must not be resolved.
    pub fn join(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let mut out = self.root.clone();
        for c in host_path.as_ref().components() {
            match c {
                Component::Normal(p) => out.push(p),
                Component::ParentDir => {
                    // Never climb above the root.
                    if out != self.root {
                        out.pop();
                    }
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        out
    }

    /// `<root>/proc`.
    pub fn proc(&self) -> PathBuf {
        self.root.join("proc")
    }

    /// `<root>/proc/<pid>`.
    pub fn proc_pid(&self, pid: u32) -> PathBuf {
        self.per_process.fetch_add(1, Ordering::Relaxed);
        self.proc().join(pid.to_string())
    }

    /// `<pid>/<rest>` relative to `<root>/proc`, into `buf` (no allocation), counted like
    /// [`Self::proc_pid`]: for a pass over every pid that reads relative to an open `<root>/proc`.
    /// `None` when it does not fit.
    pub fn proc_pid_relative<'b>(
        &self,
        pid: u32,
        rest: &str,
        buf: &'b mut [u8],
    ) -> Option<&'b [u8]> {
        use std::io::Write;
        self.per_process.fetch_add(1, Ordering::Relaxed);
        let len = buf.len();
        let mut w = &mut buf[..];
        write!(w, "{pid}/{rest}").ok()?;
        let left = w.len();
        Some(&buf[..len - left])
    }

    /// `<root>/proc/<rest>`, e.g. `proc_file("loadavg")`.
    pub fn proc_file(&self, rest: impl AsRef<Path>) -> PathBuf {
        self.proc().join(rest)
    }

    /// `<root>/sys/<rest>`.
    pub fn sys_file(&self, rest: impl AsRef<Path>) -> PathBuf {
        self.root.join("sys").join(rest)
    }

    /// Resolves a host-absolute path under the root, following symlinks the way the host
    /// would: an absolute link target is taken relative to the host root, not the agent's
    /// `/`. Components that do not exist are appended as they are (and what follows one is
    /// not looked up: nothing can be under it, until a `..` climbs out). Returns the
    /// agent-side path.
    pub fn resolve(&self, host_path: impl AsRef<Path>) -> PathBuf {
        // `pending` holds the components still to walk, in reverse order.
        let mut pending: Vec<std::ffi::OsString> = Vec::new();
        push_components(&mut pending, host_path.as_ref());
        let mut host_cur = PathBuf::from("/");
        let mut followed = 0usize;
        // Components of `host_cur` from the first that does not exist on (0: all exist).
        let mut missing = 0usize;
        while let Some(comp) = pending.pop() {
            if comp == ".." {
                host_cur.pop();
                missing = missing.saturating_sub(1);
                continue;
            }
            let candidate = host_cur.join(&comp);
            if missing > 0 {
                host_cur = candidate;
                missing += 1;
                continue;
            }
            let agent_side = self.join(&candidate);
            match std::fs::symlink_metadata(&agent_side) {
                Ok(md) if md.file_type().is_symlink() && followed < MAX_SYMLINKS => {
                    followed += 1;
                    match std::fs::read_link(&agent_side) {
                        Ok(target) => {
                            if target.is_absolute() {
                                host_cur = PathBuf::from("/");
                            }
                            push_components(&mut pending, &target);
                        }
                        Err(_) => host_cur = candidate,
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    host_cur = candidate;
                    missing = 1;
                }
                _ => host_cur = candidate,
            }
        }
        self.join(host_cur)
    }

    /// The host-side path of an agent-side path under the root (`/host/var/lib` -> `/var/lib`).
    pub fn host_side(&self, agent_path: &Path) -> Option<PathBuf> {
        let rel = agent_path.strip_prefix(&self.root).ok()?;
        Some(Path::new("/").join(rel))
    }
}

/// Pushes the normal and `..` components of `p` onto `stack` so that they pop in order.
fn push_components(stack: &mut Vec<std::ffi::OsString>, p: &Path) {
    let comps: Vec<std::ffi::OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    stack.extend(comps.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path leaf imports nothing of the crate but its error types (ARCHITECTURE.md
    /// "Invariants"): no cache, no reader, no collector.
    #[test]
    fn the_path_leaf_imports_only_error_types() {
        let src = include_str!("host.rs");
        let code = src.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines().map(|l| l.split("//").next().unwrap_or("")) {
            for (i, _) in line.match_indices("crate::") {
                assert!(
                    line[i..].starts_with("crate::error"),
                    "host.rs imports {line:?}"
                );
            }
        }
    }

    #[test]
    fn clones_share_the_count_of_per_process_paths() {
        let h = HostPaths::new("/host");
        let c = h.clone();
        assert_eq!(h.per_process_paths(), 0);
        assert_eq!(c.proc_pid(42), Path::new("/host/proc/42"));
        let _ = h.proc_pid(7);
        let _ = h.proc_file("loadavg");
        assert_eq!(h.per_process_paths(), 2);
        assert_eq!(c.per_process_paths(), 2);
        // A new host counts from zero and is equal by its root alone.
        let other = HostPaths::new("/host");
        assert_eq!(other.per_process_paths(), 0);
        assert_eq!(other, h);
    }

    #[test]
    fn join_never_escapes_root() {
        let h = HostPaths::new("/host");
        assert_eq!(
            h.join("/var/lib/docker"),
            PathBuf::from("/host/var/lib/docker")
        );
        assert_eq!(
            h.join("/../../etc/passwd"),
            PathBuf::from("/host/etc/passwd")
        );
        assert_eq!(h.proc_pid(1), PathBuf::from("/host/proc/1"));
        assert_eq!(
            h.sys_file("devices/system/cpu/online"),
            PathBuf::from("/host/sys/devices/system/cpu/online")
        );
    }

    #[test]
    fn resolve_reroots_absolute_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("run/docker")).unwrap();
        std::fs::create_dir_all(root.join("var")).unwrap();
        std::os::unix::fs::symlink("/run", root.join("var/run")).unwrap();
        std::fs::create_dir_all(root.join("data/docker")).unwrap();
        std::os::unix::fs::symlink("../data/docker", root.join("var/lib-docker")).unwrap();
        let h = HostPaths::new(root);
        assert_eq!(h.resolve("/var/run/docker"), root.join("run/docker"));
        assert_eq!(h.resolve("/var/lib-docker/x"), root.join("data/docker/x"));
        assert_eq!(h.resolve("/missing/path"), root.join("missing/path"));
        // Out of a missing directory and back into links.
        assert_eq!(
            h.resolve("/missing/deeper/../../var/run/docker"),
            root.join("run/docker")
        );
        assert_eq!(
            h.resolve("/var/missing/../lib-docker/x"),
            root.join("data/docker/x")
        );
        assert_eq!(
            h.host_side(&root.join("run/docker")),
            Some(PathBuf::from("/run/docker"))
        );
    }

    #[test]
    fn resolve_survives_symlink_loops() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::os::unix::fs::symlink("/b", root.join("a")).unwrap();
        std::os::unix::fs::symlink("/a", root.join("b")).unwrap();
        let h = HostPaths::new(root);
        // Terminates; the exact result after giving up is unimportant.
        let _ = h.resolve("/a/x");
    }
}
