//! The pods' own network namespaces: one process of each pod, found from the kubelet's pod
//! cgroups (v1 and v2, cgroupfs `kubepods/…/pod<uid>` and systemd
//! `kubepods-…-pod<uid_with_underscores>.slice`: [`crate::sys::kubepods`]), and what the
//! kernel counts in that process's namespace (`<root>/proc/<pid>/net/snmp` and `snmp6`,
//! `net/stat/nf_conntrack`).
//!
//! Cheap on a steady node: each run lists the kubepods cgroup and its two QoS levels (three
//! directories), then per pod checks the process it remembers with one `readlink` of
//! `/proc/<pid>/ns/net` (the same inode: the same namespace) and reads the two counter files.
//! Only a pod it has not seen, or whose process is gone or in another namespace, costs a
//! listing of the pod's cgroup and a read of a `cgroup.procs`. `/proc` is never listed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::hostfs::{self, entries};
use crate::proc::{nf_conntrack_stat, ns, snmp, snmp6};
use crate::sys::{cgroup_io, kubepods};

use super::sample::{PodConntrack, PodCounters};

/// Container cgroups of one pod tried for a process (the sandbox's and the first
/// containers' by name; any process of the pod shares its network namespace).
const CHILDREN_TRIED: usize = 8;

/// One process of a pod, and the network namespace it was in when found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    pub netns: u64,
}

/// One run's look at the pods' namespaces.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Pod UID -> its process, for pods with a namespace of their own, in cgroup order.
    pub pods: Vec<(String, Found)>,
    /// Pods in the host's namespace (hostNetwork).
    pub host_network: usize,
    /// Pods not looked at: beyond the cap of namespaces per run.
    pub skipped: usize,
    /// Pods whose cgroups held no process that could be read (a pod starting or ending).
    pub no_process: usize,
}

/// The kubelet's pod cgroups: the v2 hierarchy, else the first v1 hierarchy that has a
/// kubepods cgroup (every v1 controller the kubelet uses holds the same tree).
pub fn kubepods_dir(host: &HostPaths) -> Option<(PathBuf, PathBuf)> {
    let cg = host.sys_file("fs/cgroup");
    let v2 = std::fs::symlink_metadata(cg.join("cgroup.controllers")).is_ok_and(|m| m.is_file());
    let candidates: Vec<PathBuf> = if v2 {
        vec![cg]
    } else {
        ["pids", "memory", "cpu,cpuacct", "cpu", "systemd"]
            .iter()
            .map(|d| cg.join(d))
            .collect()
    };
    candidates
        .into_iter()
        .find_map(|h| kubepods::kubepods(&h).map(|k| (h, k)))
}

/// Finds one process of each pod (at most `max` namespaces), reusing what `known` remembers
/// while its process is still in the same namespace. `known` keeps only the pods seen.
pub fn discover(
    host: &HostPaths,
    host_netns: u64,
    max: usize,
    known: &mut BTreeMap<String, Found>,
) -> Discovery {
    let mut out = Discovery::default();
    let Some((hierarchy, kp)) = kubepods_dir(host) else {
        known.clear();
        return out;
    };
    // The kubepods cgroup and its QoS levels: pods are not entered.
    let walk = kubepods::walk(&hierarchy, &kp, false, 8);
    let mut seen = BTreeSet::new();
    let mut namespaces = BTreeSet::new();
    for pod in walk.pods {
        let uid = pod.pod.uid.clone();
        if !seen.insert(uid.clone()) {
            continue;
        }
        if namespaces.len() >= max {
            out.skipped += 1;
            continue;
        }
        let still = known
            .get(&uid)
            .copied()
            .filter(|f| ns::inode(host, f.pid, "net") == Some(f.netns));
        let Some(found) = still.or_else(|| find_process(host, &pod.dir)) else {
            out.no_process += 1;
            continue;
        };
        known.insert(uid.clone(), found);
        if found.netns == host_netns {
            out.host_network += 1;
        } else if namespaces.insert(found.netns) {
            out.pods.push((uid, found));
        }
    }
    known.retain(|uid, _| seen.contains(uid));
    out
}

/// The first process, with a readable network namespace, of a pod's container cgroups
/// (then of the pod's own cgroup).
fn find_process(host: &HostPaths, pod_dir: &Path) -> Option<Found> {
    let mut children: Vec<PathBuf> = hostfs::dir_entries(pod_dir, entries::CGROUP)
        .ok()?
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    children.sort();
    children.truncate(CHILDREN_TRIED);
    children.push(pod_dir.to_path_buf());
    children.iter().find_map(|dir| {
        let pids = cgroup_io::procs(dir).ok()?;
        pids.into_iter().take(4).find_map(|pid| {
            let netns = ns::inode(host, pid, "net")?;
            Some(Found { pid, netns })
        })
    })
}

/// What the kernel counts in `pid`'s network namespace. `Ok(None)` when the process is gone;
/// `Err` when a file exists but is refused or garbage. A namespace without conntrack (the
/// module not loaded) has no conntrack counters.
pub fn read_counters(host: &HostPaths, pid: u32) -> Result<Option<PodCounters>, String> {
    let snmp = match snmp::read(&snmp::path(host, pid)) {
        Ok(s) => s,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let Some(udp) = snmp.table("Udp") else {
        return Err(format!("{}: no Udp table", snmp::path(host, pid).display()));
    };
    // IPv6 (`snmp6`, absent when IPv6 is disabled): its `Udp6*` counters add to the IPv4 ones.
    let udp6 = match snmp6::read(&snmp6::path(host, pid)) {
        Ok(s) => Some(s),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.to_string()),
    };
    let get = |n: &str| {
        let v4 = udp.get(n).and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
        let v6 = udp6
            .as_ref()
            .and_then(|s| s.get(&format!("Udp6{n}")))
            .unwrap_or(0);
        v4.saturating_add(v6)
    };
    let conntrack = match nf_conntrack_stat::read(&nf_conntrack_stat::path(host, pid)) {
        Ok(s) => Some(PodConntrack {
            insert_failed: s.get("insert_failed").unwrap_or(0),
            drop: s.get("drop").unwrap_or(0),
        }),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.to_string()),
    };
    Ok(Some(PodCounters {
        udp_in_datagrams: get("InDatagrams"),
        udp_in_errors: get("InErrors"),
        udp_rcvbuf_errors: get("RcvbufErrors"),
        udp_no_ports: get("NoPorts"),
        conntrack,
    }))
}
