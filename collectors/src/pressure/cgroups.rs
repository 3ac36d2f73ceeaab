//! Where the pressure collector finds cgroups: the hierarchy that holds PSI (`*.pressure`,
//! cgroup v2 only: `<root>/sys/fs/cgroup` when v2 is mounted there, else the v2 hierarchy a
//! v1 host mounts at `…/unified`), the one that holds CPU throttling (`cpu.stat`: v2, else
//! v1's cpu controller at `cpu`, `cpu,cpuacct` or `cpuacct,cpu`), and the bounded walk of
//! the kubepods tree in either (`kubepods.slice` with the systemd driver, `kubepods` with
//! cgroupfs): the QoS level, the pods (their UID and QoS from the path:
//! [`crate::proc::cgroup::pod_from_path`]) and, for throttling, their containers.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};
use crate::proc::cgroup::{self, PodRef};
use crate::proc::pressure::{self, Pressure};
use crate::sys::cgroup_io::{self, Throttling};

use super::sample::{Psi, Resource};

/// The two hierarchies this collector reads (agent-side directories).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hierarchies {
    /// The v2 hierarchy (PSI files).
    pub psi: Option<PathBuf>,
    /// The hierarchy with the cpu controller's `cpu.stat`, and whether it is v2.
    pub cpu: Option<(PathBuf, bool)>,
}

/// Finds the hierarchies under `<root>/sys/fs/cgroup`.
pub fn detect(host: &HostPaths) -> Hierarchies {
    let cg = host.sys_file("fs/cgroup");
    let is_file = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    if is_file(&cg.join("cgroup.controllers")) {
        return Hierarchies {
            psi: Some(cg.clone()),
            cpu: Some((cg, true)),
        };
    }
    let unified = cg.join("unified");
    let psi = is_file(&unified.join("cgroup.controllers")).then_some(unified);
    let cpu = ["cpu", "cpu,cpuacct", "cpuacct,cpu"]
        .iter()
        .map(|d| cg.join(d))
        .find(|d| is_file(&d.join("cpu.stat")))
        .map(|d| (d, false));
    Hierarchies { psi, cpu }
}

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

/// Reads the three `*.pressure` files of a cgroup directory (or `/proc/pressure`, whose
/// files are named without the suffix). `Err` with the first error when one exists but is
/// refused or garbage; absent files are `None`.
pub fn read_psi(dir: &Path, suffix: &str) -> Result<Psi, String> {
    let mut psi = Psi::default();
    for r in Resource::ALL {
        let file = dir.join(format!("{}{suffix}", r.as_str()));
        let p: Option<Pressure> = pressure::read(&file).map_err(|e| e.to_string())?;
        psi.set(r, p);
    }
    Ok(psi)
}

/// Reads a cgroup's `cpu.stat` throttling counters.
pub fn read_throttling(dir: &Path) -> Result<Throttling, String> {
    let path = dir.join("cpu.stat");
    let text = hostfs::read_text(&path, cap::COUNTERS).map_err(|e| e.to_string())?;
    cgroup_io::parse_throttling(&text).map_err(|m| format!("{}: {m}", path.display()))
}
