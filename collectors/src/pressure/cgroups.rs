//! Where the pressure collector finds cgroups: the hierarchy that holds PSI (`*.pressure`,
//! cgroup v2 only: `<root>/sys/fs/cgroup` when v2 is mounted there, else the v2 hierarchy a
//! v1 host mounts at `…/unified`), the one that holds CPU throttling (`cpu.stat`: v2, else
//! v1's cpu controller at `cpu`, `cpu,cpuacct` or `cpuacct,cpu`), and the bounded walk of
//! the kubepods tree in either (`kubepods.slice` with the systemd driver, `kubepods` with
//! cgroupfs): the QoS level, the pods (their UID and QoS from the path:
//! [`crate::proc::cgroup::pod_from_path`]) and, for throttling, their containers.

use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::hostfs::{self, cap};
use crate::proc::pressure::{self, Pressure};
use crate::sys::cgroup_io::{self, Throttling};
pub use crate::sys::kubepods::{kubepods, relative, walk, PodDirs, Walk};

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
