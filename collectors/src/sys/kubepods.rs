//! The kubelet's pod cgroups in one hierarchy: the kubepods cgroup (`kubepods.slice` with the
//! systemd driver, `kubepods` with cgroupfs), and a bounded breadth-first walk of its QoS
//! levels, its pods (their UID and QoS from the path: [`crate::proc::cgroup::pod_from_path`])
//! and, when asked, their containers. Used by `pressure` (PSI and throttling per pod) and
//! `net` (one process of each pod, for its network namespace).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::hostfs::{self, entries};
use crate::proc::cgroup::{self, PodRef};

/// The kubepods cgroup of a hierarchy, when there is one.
pub fn kubepods(hierarchy: &Path) -> Option<PathBuf> {
    ["kubepods.slice", "kubepods"]
        .iter()
        .map(|d| hierarchy.join(d))
        .find(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
}

/// A pod's cgroup and, when asked for, its containers'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDirs {
    pub pod: PodRef,
    pub dir: PathBuf,
    /// Child cgroups (containers; the container id when the name carries a valid one).
    pub children: Vec<(PathBuf, Option<String>)>,
}

/// What one walk of a kubepods tree found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Walk {
    pub pods: Vec<PodDirs>,
    /// Cgroup directories listed.
    pub visited: usize,
    /// The walk stopped at its bound; the cgroups after it were not looked at.
    pub truncated: bool,
}

/// Walks `kubepods` (a directory of `hierarchy`) breadth-first: the QoS level, the pods and,
/// with `containers`, each pod's children; at most `max_dirs` directories listed (the
/// kubepods and QoS levels count). Names are the kubelet's: a directory that is not a QoS
/// level or a valid pod is not entered.
pub fn walk(hierarchy: &Path, kubepods: &Path, containers: bool, max_dirs: usize) -> Walk {
    let mut out = Walk::default();
    // (dir, depth below kubepods, index of its pod in `out.pods`)
    let mut queue: VecDeque<(PathBuf, usize, Option<usize>)> =
        VecDeque::from([(kubepods.to_path_buf(), 0, None)]);
    while let Some((dir, depth, pod)) = queue.pop_front() {
        if out.visited >= max_dirs {
            out.truncated = true;
            break;
        }
        out.visited += 1;
        let Ok(listing) = hostfs::dir_entries(&dir, entries::CGROUP) else {
            continue; // removed since its parent was listed
        };
        let mut children: Vec<String> = listing
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        children.sort();
        for c in children {
            let child = dir.join(&c);
            match pod {
                Some(i) => {
                    let rel = relative(hierarchy, &child);
                    let id = cgroup::pod_from_path(&rel).and_then(|p| p.container_id);
                    out.pods[i].children.push((child, id));
                }
                None if depth < 2 => {
                    let rel = relative(hierarchy, &child);
                    match cgroup::pod_from_path(&rel) {
                        Some(p) => {
                            out.pods.push(PodDirs {
                                pod: p,
                                dir: child.clone(),
                                children: Vec::new(),
                            });
                            if containers {
                                queue.push_back((child, depth + 1, Some(out.pods.len() - 1)));
                            }
                        }
                        None if is_qos(&c) => queue.push_back((child, depth + 1, None)),
                        None => {}
                    }
                }
                None => {}
            }
        }
    }
    out
}

/// The QoS levels of both drivers.
fn is_qos(name: &str) -> bool {
    matches!(
        name,
        "burstable" | "besteffort" | "kubepods-burstable.slice" | "kubepods-besteffort.slice"
    )
}

/// A directory's path inside its hierarchy (`/kubepods/burstable/pod…`).
pub fn relative(hierarchy: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(hierarchy).unwrap_or(dir);
    format!("/{}", rel.to_string_lossy())
}
