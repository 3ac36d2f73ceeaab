//! Two installations of a runtime component side by side: the handbook's ContainerCreating
//! case where docker was installed over an older or incompletely removed one (`yum install
//! docker` beside docker-ce), whose mixed components fail with "ttrpc: client shutting down"
//! (handbook 002, the ContainerCreating section's check for an existing docker).
//!
//! Read from the file system: the places the packages of each generation put a component's
//! binary (distribution packages, docker-ce, the old `docker` package's `*-current` names,
//! tarball installs in `/usr/local`). Two different files (by device and inode, so a symlink
//! to the other is one) are two installations. Judged only on nodes that use docker.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

use super::sample::DuplicateInstall;
use crate::host::HostPaths;

/// Where each component's binary is installed, by package generation.
pub const CANDIDATES: &[(&str, &[&str])] = &[
    (
        "dockerd",
        &[
            "/usr/bin/dockerd",
            "/usr/sbin/dockerd",
            "/usr/local/bin/dockerd",
            "/usr/bin/dockerd-current",
        ],
    ),
    (
        "containerd",
        &[
            "/usr/bin/containerd",
            "/usr/local/bin/containerd",
            "/usr/bin/docker-containerd",
            "/usr/bin/docker-containerd-current",
        ],
    ),
    (
        "containerd-shim",
        &[
            "/usr/bin/containerd-shim",
            "/usr/local/bin/containerd-shim",
            "/usr/bin/docker-containerd-shim",
            "/usr/bin/docker-containerd-shim-current",
        ],
    ),
    (
        "runc",
        &[
            "/usr/bin/runc",
            "/usr/sbin/runc",
            "/usr/local/bin/runc",
            "/usr/local/sbin/runc",
            "/usr/bin/docker-runc",
            "/usr/bin/docker-runc-current",
            "/usr/libexec/docker/docker-runc-current",
        ],
    ),
];

/// The components installed more than once. `running` maps a component to the binary its
/// running process was started from (`/proc/<pid>/exe`), when known.
pub fn duplicates(host: &HostPaths, running: &[(&str, String)]) -> Vec<DuplicateInstall> {
    let mut out = Vec::new();
    for (component, paths) in CANDIDATES {
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        for p in *paths {
            // Follows symlinks (re-rooted): a link to another candidate is the same file.
            let Ok(m) = std::fs::metadata(host.resolve(p)) else {
                continue;
            };
            if !m.is_file() {
                continue;
            }
            if seen.insert((m.dev(), m.ino())) {
                found.push(p.to_string());
            }
        }
        if found.len() > 1 {
            out.push(DuplicateInstall {
                component: component.to_string(),
                paths: found,
                running: running
                    .iter()
                    .find(|(c, _)| c == component)
                    .map(|(_, exe)| exe.clone()),
            });
        }
    }
    out
}

/// The binary a process was started from (`<root>/proc/<pid>/exe`, a host path; ` (deleted)`
/// when it was replaced since).
pub fn exe(host: &HostPaths, pid: u32) -> Option<String> {
    std::fs::read_link(host.proc_pid(pid).join("exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_files_are_two_installs_a_link_is_not() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        for d in ["usr/bin", "usr/sbin", "usr/local/bin"] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
        }
        // Debian: /usr/bin/runc -> ../sbin/runc (one install).
        std::fs::write(t.path().join("usr/sbin/runc"), "elf").unwrap();
        std::os::unix::fs::symlink("../sbin/runc", t.path().join("usr/bin/runc")).unwrap();
        std::fs::write(t.path().join("usr/bin/containerd"), "elf").unwrap();
        assert!(duplicates(&host, &[]).is_empty());
        // The old docker package beside it.
        std::fs::write(t.path().join("usr/bin/docker-runc-current"), "elf").unwrap();
        let d = duplicates(&host, &[("runc", "/usr/sbin/runc".into())]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].component, "runc");
        assert_eq!(
            d[0].paths,
            vec!["/usr/bin/runc", "/usr/bin/docker-runc-current"]
        );
        assert_eq!(d[0].running.as_deref(), Some("/usr/sbin/runc"));
        // A directory at a candidate path is not a binary.
        std::fs::create_dir_all(t.path().join("usr/local/bin/containerd")).unwrap();
        assert_eq!(duplicates(&host, &[]).len(), 1);
    }
}
