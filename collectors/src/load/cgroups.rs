//! Cgroup-first attribution: which cgroups are behind a window's IO and CPU, from their
//! counters ([`crate::sys::cgroup_io`]: one file per cgroup and counter), so that an
//! escalated run reads `/proc/<pid>/stat` and `io` of the tasks of those cgroups only, not of
//! every process.
//!
//! Between two readings of the hierarchy (a window apart, or `catch_up` apart at the onset),
//! each cgroup's **own** share is its counter's rate (v1 block counters: its own tasks only)
//! or its counter's rate minus its children's (v2, and v1 `cpuacct.usage`, which are
//! recursive). A cgroup other than the root is a **candidate** when its own share is at
//! least [`Floors::min_share_percent`] of the total and above zero; at most
//! [`Floors::max_candidates`] of them, the largest first. The rest is **uncovered**: the
//! other cgroups' own shares and what no cgroup below the root explains:
//! - IO: the traffic of the whole disks in `/proc/diskstats` not counted for a cgroup below
//!   the root on that device (the root's own tasks, kernel writeback and, on cgroup v1, every
//!   device the counters do not list), less what was attributed on loop devices (a loop
//!   device's traffic lands again on the disk that holds its backing file);
//! - CPU: the root's own share (its own tasks and the kernel threads).
//!
//! The pass falls back to every process ([`Plan::All`]) when the uncovered part could hold a
//! process the judge would name: at least the judge's own floors for naming a culprit
//! (`culprit_min_io_bytes_per_second` and `culprit_min_share_percent` of the total for IO,
//! `culprit_min_cpu_percent` and the same share for CPU); when tasks are blocked and no
//! candidate did IO (D state without block IO: NFS, FUSE, a hung mount); and when the
//! counters cannot be read or the walk was cut short.
//!
//! [`decide`] is pure (two readings in, a plan out); [`read`] reads one reading.

use std::collections::HashMap;

use crate::host::HostPaths;
use crate::proc::diskstats::{self, DiskStat};
use crate::sys::block;
use crate::sys::cgroup_io::{self, Layout, Limits, Tree, Version};

/// The floors of the cgroup pass (in the collector's configuration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floors {
    /// A cgroup is a candidate when its own share is at least this share of the total (IO
    /// bytes, or CPU time when CPU is looked at).
    pub min_share_percent: f64,
    /// At most this many candidate cgroups per counter (the largest).
    pub max_candidates: usize,
    /// Bounds of the walk of each hierarchy.
    pub limits: Limits,
}

impl Default for Floors {
    fn default() -> Self {
        Floors {
            min_share_percent: 1.0,
            max_candidates: 16,
            limits: Limits::default(),
        }
    }
}

/// One reading of the hierarchies (and of `/proc/diskstats`, to compare with).
#[derive(Debug, Clone)]
pub struct Reading {
    pub version: Version,
    pub trees: Vec<Tree>,
    pub disks: Vec<DiskStat>,
    /// Host uptime (or the agent's clock), seconds.
    pub at: f64,
}

/// Reads the hierarchies of `layout` and `/proc/diskstats`; why not, as a sentence.
pub fn read(host: &HostPaths, layout: &Layout, limits: Limits, at: f64) -> Result<Reading, String> {
    let mut trees = Vec::with_capacity(layout.hierarchies.len());
    for h in &layout.hierarchies {
        let tree = cgroup_io::walk(h, layout.version, limits).map_err(|e| e.to_string())?;
        if tree.truncated {
            return Err(format!(
                "{} has more than {} cgroups (the walk's bound)",
                h.dir.display(),
                limits.max_groups
            ));
        }
        if tree.unnamed > 0 {
            return Err(format!(
                "{} has {} cgroup(s) whose names are not UTF-8",
                h.dir.display(),
                tree.unnamed
            ));
        }
        if let Some(e) = &tree.first_error {
            return Err(format!(
                "{} cgroup counter(s) unreadable: {e}",
                tree.unreadable
            ));
        }
        trees.push(tree);
    }
    let disks = diskstats::read(&host.proc_file("diskstats")).map_err(|e| e.to_string())?;
    Ok(Reading {
        version: layout.version,
        trees,
        disks,
        at,
    })
}

/// A cgroup whose tasks are read.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Index of its tree in [`Reading::trees`] and of the group in it (in the later reading).
    pub tree: usize,
    pub group: usize,
    /// Its path in the hierarchy.
    pub path: String,
    /// Its own IO (bytes read + written per second) and CPU (percent of one CPU).
    pub io_bytes_per_second: f64,
    pub cpu_percent: f64,
}

/// Why a pass reads every process.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    /// The counters could not be read (no hierarchy, an unreadable file, a walk cut short).
    Unavailable(String),
    /// IO no candidate explains, bytes per second and share of the total.
    UnattributedIo { bytes_per_second: f64, percent: f64 },
    /// CPU no candidate explains, percent of one CPU and share of the total.
    UnattributedCpu { cpu_percent: f64, percent: f64 },
    /// Tasks are in D state and no candidate cgroup did block IO.
    BlockedWithoutIo { procs_blocked: u64 },
}

impl Fallback {
    /// The reason as a sentence for the evidence and the log.
    pub fn describe(&self) -> String {
        match self {
            Fallback::Unavailable(why) => format!("cgroup counters unavailable: {why}"),
            Fallback::UnattributedIo {
                bytes_per_second,
                percent,
            } => format!(
                "{} of IO ({percent:.0}% of the disks' traffic) is not explained by a candidate cgroup",
                rate(*bytes_per_second)
            ),
            Fallback::UnattributedCpu {
                cpu_percent,
                percent,
            } => format!(
                "{cpu_percent:.1}% of a CPU ({percent:.0}% of all CPU time) is not explained by a candidate cgroup"
            ),
            Fallback::BlockedWithoutIo { procs_blocked } => format!(
                "{procs_blocked} task(s) in D state and no candidate cgroup did block IO (NFS, FUSE or a hung mount wait without it)"
            ),
        }
    }
}

/// `1.0 MiB/s`, `12 KiB/s`, `300 B/s`.
fn rate(bps: f64) -> String {
    if bps >= 1024.0 * 1024.0 {
        format!("{:.1} MiB/s", bps / (1024.0 * 1024.0))
    } else if bps >= 1024.0 {
        format!("{:.0} KiB/s", bps / 1024.0)
    } else {
        format!("{bps:.0} B/s")
    }
}

/// What the pass over the processes reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The tasks of these cgroups only.
    Cgroups(Vec<Candidate>),
    /// Every process.
    All(Fallback),
}

/// What the judge would name a process for (the thresholds' culprit floors).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NameFloors {
    pub min_share_percent: f64,
    pub min_io_bytes_per_second: f64,
    pub min_cpu_percent: f64,
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part * 100.0 / whole
    } else {
        0.0
    }
}

/// The own shares of one counter in a tree: `(group index, per second)` for every group.
/// `value` reads a group's counter; `recursive` says whether it includes its children's.
fn own_rates<F: Fn(&cgroup_io::Group) -> Option<u64>>(
    before: Option<&Tree>,
    now: &Tree,
    span: f64,
    recursive: bool,
    value: F,
) -> Vec<(usize, f64)> {
    let prior: HashMap<&str, u64> = before
        .map(|t| {
            t.groups
                .iter()
                .filter_map(|g| Some((g.path.as_str(), value(g)?)))
                .collect()
        })
        .unwrap_or_default();
    // A cgroup that is new since the earlier reading counts from 0 (all of its counter in
    // this span: it can only make it more of a candidate).
    let rates: Vec<Option<f64>> = now
        .groups
        .iter()
        .map(|g| {
            let v = value(g)?;
            let b = prior.get(g.path.as_str()).copied().unwrap_or(0);
            Some(v.saturating_sub(b) as f64 / span)
        })
        .collect();
    let mut own: Vec<f64> = rates.iter().map(|r| r.unwrap_or(0.0)).collect();
    if recursive {
        for (i, g) in now.groups.iter().enumerate() {
            if let (Some(p), Some(r)) = (g.parent, rates[i]) {
                if rates[p].is_some() {
                    own[p] -= r;
                }
            }
        }
    }
    own.into_iter()
        .enumerate()
        .map(|(i, r)| (i, r.max(0.0)))
        .collect()
}

/// Per-device IO rates of the groups below the root (their own shares, summed), bytes/s.
fn attributed_by_device(
    before: Option<&Tree>,
    now: &Tree,
    span: f64,
    version: Version,
) -> HashMap<(u32, u32), f64> {
    let prior: HashMap<(&str, u32, u32), u64> = before
        .map(|t| {
            t.groups
                .iter()
                .flat_map(|g| {
                    g.io.iter()
                        .flatten()
                        .map(move |d| ((g.path.as_str(), d.major, d.minor), d.bytes))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out: HashMap<(u32, u32), f64> = HashMap::new();
    for g in now.groups.iter().filter(|g| g.parent.is_some()) {
        // v2 counters are recursive: the root's children hold everything below the root.
        if version.io_recursive() && g.parent != Some(0) {
            continue;
        }
        for d in g.io.iter().flatten() {
            let b = prior
                .get(&(g.path.as_str(), d.major, d.minor))
                .copied()
                .unwrap_or(0);
            *out.entry((d.major, d.minor)).or_default() += d.bytes.saturating_sub(b) as f64 / span;
        }
    }
    out
}

/// The disks' traffic no cgroup below the root explains, bytes/s (see the module
/// documentation). `kind` tells a device's kind by name (sysfs in production).
fn unattributed_io(
    before: &[DiskStat],
    now: &[DiskStat],
    span: f64,
    attributed: &HashMap<(u32, u32), f64>,
    kind: &dyn Fn(&str) -> block::DeviceKind,
) -> f64 {
    let mut disks = 0.0;
    let mut loops = 0.0;
    for d in now {
        let Some(b) = before
            .iter()
            .find(|b| (b.major, b.minor, &b.name) == (d.major, d.minor, &d.name))
        else {
            continue;
        };
        let sectors = (d.sectors_read.saturating_add(d.sectors_written))
            .saturating_sub(b.sectors_read.saturating_add(b.sectors_written));
        let traffic = sectors as f64 * 512.0 / span;
        let attr = attributed.get(&(d.major, d.minor)).copied().unwrap_or(0.0);
        if d.name.starts_with("loop") {
            loops += traffic.min(attr);
        } else if kind(&d.name) == block::DeviceKind::Disk {
            disks += (traffic - attr).max(0.0);
        }
    }
    (disks - loops).max(0.0)
}

/// The candidates of one counter: cgroups below the root whose own share is at least the
/// floor, largest first, at most `max`; and the total.
fn pick(
    own: &[(usize, f64)],
    tree: usize,
    total: f64,
    floors: &Floors,
) -> Vec<(usize, usize, f64)> {
    let mut c: Vec<(usize, usize, f64)> = own
        .iter()
        .filter(|(g, r)| *g != 0 && *r > 0.0 && share(*r, total) >= floors.min_share_percent)
        .map(|(g, r)| (tree, *g, *r))
        .collect();
    c.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.1.cmp(&b.1)));
    c.truncate(floors.max_candidates);
    c
}

/// The plan of a pass from two readings (`before` earlier): the candidate cgroups, or why
/// every process is read. `cpu`: CPU counts too (the signal was load or CPU).
pub fn decide(
    before: &Reading,
    now: &Reading,
    cpu: bool,
    procs_blocked: u64,
    name: NameFloors,
    floors: &Floors,
    kind: &dyn Fn(&str) -> block::DeviceKind,
) -> Plan {
    let span = now.at - before.at;
    if span <= 0.0 || before.version != now.version {
        return Plan::All(Fallback::Unavailable(
            "the two readings of the cgroup counters are not a window".into(),
        ));
    }
    let earlier = |t: &Tree| {
        before
            .trees
            .iter()
            .find(|b| b.hierarchy.dir == t.hierarchy.dir)
    };
    let mut chosen: Vec<(usize, usize, f64, f64)> = Vec::new();
    let mut add = |tree: usize, group: usize, io: f64, cpu: f64| match chosen
        .iter_mut()
        .find(|c| (c.0, c.1) == (tree, group))
    {
        Some(c) => {
            c.2 += io;
            c.3 += cpu;
        }
        None => chosen.push((tree, group, io, cpu)),
    };

    // IO.
    let mut io_candidates = 0;
    let mut io_trees = 0;
    for (i, t) in now.trees.iter().enumerate().filter(|(_, t)| t.hierarchy.io) {
        io_trees += 1;
        let b = earlier(t);
        let own = own_rates(b, t, span, now.version.io_recursive(), |g| g.io_bytes());
        let attributed = attributed_by_device(b, t, span, now.version);
        let rest = unattributed_io(&before.disks, &now.disks, span, &attributed, kind);
        let below_root: f64 = own.iter().filter(|(g, _)| *g != 0).map(|(_, r)| r).sum();
        let total = below_root + rest;
        let picked = pick(&own, i, total, floors);
        let covered: f64 = picked.iter().map(|c| c.2).sum();
        let uncovered = (total - covered).max(0.0);
        if uncovered >= name.min_io_bytes_per_second
            && share(uncovered, total) >= name.min_share_percent
        {
            return Plan::All(Fallback::UnattributedIo {
                bytes_per_second: uncovered,
                percent: share(uncovered, total),
            });
        }
        io_candidates += picked.len();
        for (t, g, r) in picked {
            add(t, g, r, 0.0);
        }
    }
    if io_trees == 0 {
        return Plan::All(Fallback::Unavailable("no block IO counters".into()));
    }
    if procs_blocked > 0 && io_candidates == 0 {
        return Plan::All(Fallback::BlockedWithoutIo { procs_blocked });
    }

    // CPU, in percent of one CPU.
    if cpu {
        let mut cpu_trees = 0;
        for (i, t) in now
            .trees
            .iter()
            .enumerate()
            .filter(|(_, t)| t.hierarchy.cpu)
        {
            cpu_trees += 1;
            let own: Vec<(usize, f64)> = own_rates(earlier(t), t, span, true, |g| g.cpu_usec)
                .into_iter()
                .map(|(g, r)| (g, r / 1e4))
                .collect();
            let total: f64 = own.iter().map(|(_, r)| r).sum();
            let picked = pick(&own, i, total, floors);
            let covered: f64 = picked.iter().map(|c| c.2).sum();
            let uncovered = (total - covered).max(0.0);
            if uncovered >= name.min_cpu_percent
                && share(uncovered, total) >= name.min_share_percent
            {
                return Plan::All(Fallback::UnattributedCpu {
                    cpu_percent: uncovered,
                    percent: share(uncovered, total),
                });
            }
            for (t, g, r) in picked {
                add(t, g, 0.0, r);
            }
        }
        if cpu_trees == 0 {
            return Plan::All(Fallback::Unavailable("no CPU counters".into()));
        }
    }
    Plan::Cgroups(
        chosen
            .into_iter()
            .map(|(tree, group, io, cpu)| Candidate {
                tree,
                group,
                path: now.trees[tree].groups[group].path.clone(),
                io_bytes_per_second: io,
                cpu_percent: cpu,
            })
            .collect(),
    )
}

/// The pids of the candidates' own tasks, sorted, without duplicates.
pub fn tasks(now: &Reading, candidates: &[Candidate]) -> Result<Vec<u32>, String> {
    let mut pids = Vec::new();
    for c in candidates {
        let tree = &now.trees[c.tree];
        let dir = tree.dir_of(&tree.groups[c.group]);
        pids.extend(cgroup_io::procs(&dir).map_err(|e| e.to_string())?);
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// The candidates as the evidence names them: `/docker/abc (1.0 MiB/s IO, 3.0% CPU)`.
pub fn describe(candidates: &[Candidate]) -> String {
    candidates
        .iter()
        .map(|c| {
            let mut parts = Vec::new();
            if c.io_bytes_per_second > 0.0 {
                parts.push(format!("{} IO", rate(c.io_bytes_per_second)));
            }
            if c.cpu_percent > 0.0 {
                parts.push(format!("{:.1}% CPU", c.cpu_percent));
            }
            format!("{} ({})", c.path, parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::cgroup_io::{DeviceIo, Group, Hierarchy};
    use std::path::PathBuf;

    fn kind(name: &str) -> block::DeviceKind {
        block::kind_by_name(name)
    }

    fn disk(name: &str, major: u32, minor: u32, sectors: u64) -> DiskStat {
        DiskStat {
            major,
            minor,
            name: name.into(),
            reads: 0,
            reads_merged: 0,
            sectors_read: 0,
            read_ms: 0,
            writes: 0,
            writes_merged: 0,
            sectors_written: sectors,
            write_ms: 0,
            in_flight: 0,
            io_ticks_ms: 0,
            weighted_ms: 0,
            discards: None,
            discard_ms: None,
            flushes: None,
            flush_ms: None,
        }
    }

    /// A tree of (path, parent, io bytes on 7:0, cpu usec).
    fn tree(dir: &str, io: bool, cpu: bool, groups: &[Spec]) -> Tree {
        Tree {
            hierarchy: Hierarchy {
                dir: PathBuf::from(dir),
                io,
                cpu,
            },
            groups: groups
                .iter()
                .map(|(p, parent, b, c)| Group {
                    path: p.to_string(),
                    parent: *parent,
                    io: b.map(|bytes| {
                        vec![DeviceIo {
                            major: 7,
                            minor: 0,
                            bytes,
                        }]
                    }),
                    cpu_usec: *c,
                })
                .collect(),
            truncated: false,
            too_deep: 0,
            unnamed: 0,
            unreadable: 0,
            first_error: None,
        }
    }

    /// (path, parent, IO bytes on 7:0, CPU µs) of a test group.
    type Spec<'a> = (&'a str, Option<usize>, Option<u64>, Option<u64>);

    const NAME: NameFloors = NameFloors {
        min_share_percent: 10.0,
        min_io_bytes_per_second: 65536.0,
        min_cpu_percent: 10.0,
    };

    fn reading(version: Version, trees: Vec<Tree>, disks: Vec<DiskStat>, at: f64) -> Reading {
        Reading {
            version,
            trees,
            disks,
            at,
        }
    }

    #[test]
    fn v1_the_io_heavy_cgroup_is_the_candidate_and_root_io_falls_back() {
        // /fio wrote 1 MiB over 1 s on loop0 (7:0); its backing disk vda wrote as much.
        let t0 = tree(
            "/cg/blkio",
            true,
            false,
            &[
                ("/", None, Some(0), None),
                ("/fio", Some(0), Some(0), None),
                ("/idle", Some(0), Some(0), None),
            ],
        );
        let t1 = tree(
            "/cg/blkio",
            true,
            false,
            &[
                ("/", None, Some(0), None),
                ("/fio", Some(0), Some(1 << 20), None),
                ("/idle", Some(0), Some(0), None),
            ],
        );
        let d0 = vec![disk("loop0", 7, 0, 0), disk("vda", 254, 0, 0)];
        let d1 = vec![disk("loop0", 7, 0, 2048), disk("vda", 254, 0, 2048)];
        let b = reading(Version::V1, vec![t0.clone()], d0.clone(), 10.0);
        let n = reading(Version::V1, vec![t1.clone()], d1.clone(), 11.0);
        let plan = decide(&b, &n, false, 4, NAME, &Floors::default(), &kind);
        let Plan::Cgroups(c) = plan else {
            panic!("{plan:?}")
        };
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].path.as_str(), c[0].io_bytes_per_second),
            ("/fio", 1048576.0)
        );
        assert_eq!(describe(&c), "/fio (1.0 MiB/s IO)");
        // The root's own tasks wrote 512 KiB on loop0 too: a third of the traffic.
        let mut t1r = t1.clone();
        t1r.groups[0].io = Some(vec![DeviceIo {
            major: 7,
            minor: 0,
            bytes: 1 << 19,
        }]);
        let n = reading(
            Version::V1,
            vec![t1r],
            vec![disk("loop0", 7, 0, 3072), disk("vda", 254, 0, 3072)],
            11.0,
        );
        assert!(matches!(
            decide(&b, &n, false, 4, NAME, &Floors::default(), &kind),
            Plan::All(Fallback::UnattributedIo { .. })
        ));
        // vda moved 2 MiB/s more than the loop explains (a writer the v1 counters do not see).
        let n = reading(
            Version::V1,
            vec![t1.clone()],
            vec![disk("loop0", 7, 0, 2048), disk("vda", 254, 0, 2048 + 4096)],
            11.0,
        );
        let plan = decide(&b, &n, false, 4, NAME, &Floors::default(), &kind);
        assert!(
            matches!(plan, Plan::All(Fallback::UnattributedIo { bytes_per_second, .. }) if bytes_per_second == 2097152.0),
            "{plan:?}"
        );
        // A little unexplained traffic (32 KiB/s) is under the judge's floor: still cgroups.
        let n = reading(
            Version::V1,
            vec![t1.clone()],
            vec![disk("loop0", 7, 0, 2048), disk("vda", 254, 0, 2048 + 64)],
            11.0,
        );
        assert!(matches!(
            decide(&b, &n, false, 4, NAME, &Floors::default(), &kind),
            Plan::Cgroups(_)
        ));
        // Blocked tasks and no cgroup did IO: every process.
        let n = reading(Version::V1, vec![t0.clone()], d0.clone(), 11.0);
        assert_eq!(
            decide(&b, &n, false, 2, NAME, &Floors::default(), &kind),
            Plan::All(Fallback::BlockedWithoutIo { procs_blocked: 2 })
        );
        // Nobody blocked and no IO: no candidate, nothing to read.
        assert_eq!(
            decide(&b, &n, false, 0, NAME, &Floors::default(), &kind),
            Plan::Cgroups(vec![])
        );
    }

    #[test]
    fn v2_own_shares_subtract_children_and_cpu_counts_when_asked() {
        // Recursive counters: /kubepods = 3 MiB, its pod 3 MiB, the pod's container 3 MiB.
        let g = |k: u64, p: u64, c: u64, cpu: [u64; 4]| {
            tree(
                "/cg",
                true,
                true,
                &[
                    ("/", None, None, Some(cpu[0])),
                    ("/kubepods", Some(0), Some(k), Some(cpu[1])),
                    ("/kubepods/pod1", Some(1), Some(p), Some(cpu[2])),
                    ("/kubepods/pod1/c1", Some(2), Some(c), Some(cpu[3])),
                ],
            )
        };
        let b = reading(
            Version::V2,
            vec![g(0, 0, 0, [0; 4])],
            vec![disk("loop0", 7, 0, 0)],
            0.0,
        );
        let n = reading(
            Version::V2,
            vec![g(
                3 << 20,
                3 << 20,
                3 << 20,
                [1_000_000, 500_000, 500_000, 500_000],
            )],
            vec![disk("loop0", 7, 0, 6144)],
            1.0,
        );
        let plan = decide(&b, &n, false, 0, NAME, &Floors::default(), &kind);
        let Plan::Cgroups(c) = plan else {
            panic!("{plan:?}")
        };
        assert_eq!(
            c.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
            ["/kubepods/pod1/c1"]
        );
        // CPU: the root's own half a CPU (its own tasks, the kernel) is not explained.
        let plan = decide(&b, &n, true, 0, NAME, &Floors::default(), &kind);
        assert!(
            matches!(plan, Plan::All(Fallback::UnattributedCpu { cpu_percent, .. }) if cpu_percent == 50.0),
            "{plan:?}"
        );
        let n = reading(
            Version::V2,
            vec![g(
                3 << 20,
                3 << 20,
                3 << 20,
                [520_000, 500_000, 500_000, 500_000],
            )],
            vec![disk("loop0", 7, 0, 6144)],
            1.0,
        );
        let Plan::Cgroups(c) = decide(&b, &n, true, 0, NAME, &Floors::default(), &kind) else {
            panic!()
        };
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].io_bytes_per_second, c[0].cpu_percent),
            (3145728.0, 50.0)
        );
    }

    #[test]
    fn too_many_material_cgroups_fall_back() {
        let names: Vec<String> = (0..20).map(|i| format!("/g{i}")).collect();
        let refs: Vec<Spec> = std::iter::once(("/", None, Some(0), None))
            .chain(
                names
                    .iter()
                    .map(|n| (n.as_str(), Some(0), Some(1 << 20), None)),
            )
            .collect();
        let zero: Vec<Spec> = refs
            .iter()
            .map(|(p, a, _, c)| (*p, *a, Some(0), *c))
            .collect();
        let b = reading(
            Version::V1,
            vec![tree("/b", true, false, &zero)],
            vec![],
            0.0,
        );
        let n = reading(
            Version::V1,
            vec![tree("/b", true, false, &refs)],
            vec![],
            1.0,
        );
        // 16 candidates cover 80%; 4 MiB/s (20%) is left.
        assert!(matches!(
            decide(&b, &n, false, 0, NAME, &Floors::default(), &kind),
            Plan::All(Fallback::UnattributedIo { .. })
        ));
        let wide = Floors {
            max_candidates: 20,
            ..Floors::default()
        };
        assert!(
            matches!(decide(&b, &n, false, 0, NAME, &wide, &kind), Plan::Cgroups(c) if c.len() == 20)
        );
    }
}
