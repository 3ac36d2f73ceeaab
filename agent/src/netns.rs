//! Is node-doctor in the host's network namespace?
//!
//! The collectors read the host's per-network-namespace files through pid 1
//! (`<root>/proc/1/net/*`), which works from any namespace. Per-namespace sysctls
//! (`/proc/sys/net/*`) have no such path: they always show the namespace of the process that
//! reads them. So the agent finds out once, at start, whether its own network namespace is pid
//! 1's, and hands the answer to every collector in `CollectContext::host_netns` (collectors
//! never look at their own process).
//!
//! How: the namespace links (`readlink /proc/self/ns/net` against `<root>/proc/1/ns/net`) where
//! pid 1's is readable; else the inode of the `net/dev` entry, which each network namespace
//! registers for itself (`stat /proc/self/net/dev` against `<root>/proc/1/net/dev`: equal if
//! and only if it is the same namespace; procfs numbers these entries system-wide, so two
//! procfs mounts agree). Only when `<root>/proc` is a real procfs (statfs magic): on a staged
//! host root the files are what they are.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use collectors::proc::ns;
use collectors::{HostNetns, HostPaths};

/// How the answer was found (logged with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `<root>/proc` is not a procfs: nothing to compare.
    NotProcfs,
    /// `ns/net` links, both readable.
    NsLink,
    /// Inodes of the `net/dev` entries (pid 1's ns link unreadable).
    NetDevInode,
    /// Neither could be compared.
    None,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::NotProcfs => "host root's proc is not a procfs",
            Method::NsLink => "ns/net links",
            Method::NetDevInode => "net/dev entry inodes",
            Method::None => "none",
        }
    }
}

/// Compares the agent's own network namespace with pid 1's under the host root, and logs the
/// answer once.
pub fn detect(host: &HostPaths) -> HostNetns {
    // The agent's own process, through its own /proc (not the host root's, which may be
    // another pid namespace's procfs).
    let (answer, method) = compare(host, Path::new("/proc/self"), &host.proc_pid(1));
    let reference = host.proc_pid(1);
    match answer {
        HostNetns::Same | HostNetns::NotProcfs => tracing::info!(
            host_netns = answer.as_str(),
            method = method.as_str(),
            reference = %reference.display(),
            "network namespace checked"
        ),
        HostNetns::Different => tracing::warn!(
            host_netns = answer.as_str(),
            method = method.as_str(),
            reference = %reference.display(),
            "node-doctor is not in the host's network namespace: host network files are read through pid 1, \
             but per-namespace sysctls (somaxconn, tcp_max_syn_backlog) are not the host's and are not reported; \
             run with hostNetwork: true"
        ),
        HostNetns::Unknown => tracing::warn!(
            host_netns = answer.as_str(),
            reference = %reference.display(),
            "cannot tell whether node-doctor is in the host's network namespace (pid 1's ns/net link and net/dev \
             entry unreadable); per-namespace sysctls are not reported as the host's"
        ),
    }
    answer
}

/// Compares the network namespace of the process whose procfs directory is `own` (e.g.
/// `/proc/self`) with that of `reference` (`<root>/proc/1`).
pub fn compare(host: &HostPaths, own: &Path, reference: &Path) -> (HostNetns, Method) {
    if !is_procfs(&host.proc()) {
        return (HostNetns::NotProcfs, Method::NotProcfs);
    }
    let same = |equal: bool| {
        if equal {
            HostNetns::Same
        } else {
            HostNetns::Different
        }
    };
    if let (Some(a), Some(b)) = (ns_link(own), ns_link(reference)) {
        return (same(a == b), Method::NsLink);
    }
    if let (Some(a), Some(b)) = (net_dev_inode(own), net_dev_inode(reference)) {
        return (same(a == b), Method::NetDevInode);
    }
    (HostNetns::Unknown, Method::None)
}

/// True when `path` is the root of a procfs mount (or inside one).
fn is_procfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

fn ns_link(proc_pid_dir: &Path) -> Option<u64> {
    let link = std::fs::read_link(proc_pid_dir.join("ns/net")).ok()?;
    ns::parse_link(&link.to_string_lossy(), "net")
}

fn net_dev_inode(proc_pid_dir: &Path) -> Option<u64> {
    std::fs::metadata(proc_pid_dir.join("net/dev"))
        .ok()
        .map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    fn is_root() -> bool {
        nix::unistd::Uid::effective().is_root()
    }

    /// A `sleep` in a network namespace of its own (`unshare -n`), or in this one; killed on drop.
    struct Sleeper(Child);
    impl Sleeper {
        fn start(own_netns: bool) -> Option<Sleeper> {
            let mut cmd = if own_netns {
                let mut c = Command::new("unshare");
                c.args(["--net", "sleep", "30"]);
                c
            } else {
                let mut c = Command::new("sleep");
                c.arg("30");
                c
            };
            let child = cmd.stdin(Stdio::null()).spawn().ok()?;
            let s = Sleeper(child);
            // `unshare` execs sleep once the namespace exists: wait for the exec.
            let comm = format!("/proc/{}/comm", s.0.id());
            for _ in 0..200 {
                if std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "sleep") {
                    return Some(s);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            None
        }
        fn dir(&self) -> std::path::PathBuf {
            Path::new("/proc").join(self.0.id().to_string())
        }
    }
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_staged_host_root_is_not_compared() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc/1/ns")).unwrap();
        std::os::unix::fs::symlink("net:[1]", t.path().join("proc/1/ns/net")).unwrap();
        let host = HostPaths::new(t.path());
        assert_eq!(
            compare(&host, Path::new("/proc/self"), &host.proc_pid(1)),
            (HostNetns::NotProcfs, Method::NotProcfs)
        );
        assert_eq!(detect(&host), HostNetns::NotProcfs);
    }

    #[test]
    fn compares_with_the_real_procfs() {
        let host = HostPaths::new("/");
        if !is_procfs(&host.proc()) {
            collectors::skip!("SKIP compares_with_the_real_procfs: /proc is not a procfs here");
            return;
        }
        // This process against itself: the same namespace whichever way it is checked.
        let own = Path::new("/proc/self");
        let (same, method) = compare(&host, own, own);
        assert_eq!(same, HostNetns::Same);
        assert_eq!(method, Method::NsLink);
        // A pid that does not exist: nothing to compare.
        assert_eq!(
            compare(&host, own, Path::new("/proc/4294967295")),
            (HostNetns::Unknown, Method::None)
        );
        if !is_root() {
            collectors::skip!(
                "SKIP compares_with_the_real_procfs (other namespaces): needs root for unshare -n"
            );
            return;
        }
        let (Some(other), Some(here)) = (Sleeper::start(true), Sleeper::start(false)) else {
            collectors::skip!(
                "SKIP compares_with_the_real_procfs (other namespaces): unshare/sleep not runnable"
            );
            return;
        };
        // Readable links (our own children): the authoritative comparison.
        assert_eq!(
            compare(&host, own, &other.dir()),
            (HostNetns::Different, Method::NsLink)
        );
        assert_eq!(
            compare(&host, own, &here.dir()),
            (HostNetns::Same, Method::NsLink)
        );
        // A reference whose ns link cannot be read (as this VM's pid 1's, even for root): the
        // net/dev entry inodes tell the same. Staged as a directory holding only a link to the
        // process's net/.
        let t = tempfile::tempdir().unwrap();
        let net_only = |proc_dir: std::path::PathBuf, name: &str| {
            let d = t.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::os::unix::fs::symlink(proc_dir.join("net"), d.join("net")).unwrap();
            d
        };
        assert_eq!(
            compare(&host, own, &net_only(other.dir(), "other")),
            (HostNetns::Different, Method::NetDevInode)
        );
        assert_eq!(
            compare(&host, own, &net_only(here.dir(), "here")),
            (HostNetns::Same, Method::NetDevInode)
        );
    }
}
