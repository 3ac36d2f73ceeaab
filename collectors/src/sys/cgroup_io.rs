//! Per-cgroup IO and CPU counters: what each cgroup's tasks moved on the block devices and
//! how much CPU they used, read from the host's cgroup hierarchy under
//! `<root>/sys/fs/cgroup`. The `load` collector reads them before any per-process file (one
//! file per cgroup and counter) to find which cgroups are behind the IO and CPU of a window.
//!
//! Layouts (decided by what is mounted under the host root, [`detect`]):
//! - cgroup v2 at the top (`<cg>/cgroup.controllers` exists): `io.stat` (per device `rbytes=
//!   wbytes= rios= wios= …`) and `cpu.stat` (`usage_usec`), both **recursive** (a cgroup's
//!   figures include its descendants'). The root has `cpu.stat` (the whole system) but no
//!   `io.stat`.
//! - cgroup v1 (`<cg>/blkio`, `<cg>/cpuacct` or `<cg>/cpu,cpuacct`): `blkio.throttle.
//!   io_service_bytes` (per device `Read`/`Write`/…/`Total` lines), **not recursive** (a
//!   cgroup's own tasks only), and `cpuacct.usage` (nanoseconds, recursive). On this project's
//!   CI VM (Linux 6.18) the v1 throttle counters list only devices a throttle was ever
//!   configured on (the root's file has the loop devices tests throttled, not `vda`): a
//!   device missing from them is traffic the counters do not see.
//! - a hybrid host whose v1 hierarchies have no blkio or cpuacct but whose v2 hierarchy at
//!   `<cg>/unified` has the `io` controller: that v2 hierarchy.
//!
//! IO is counted in bytes read + written (discards move no data, and `/proc/diskstats`'s
//! sectors, which the caller compares with, leave them out too).
//!
//! Parsing is separate from reading: `parse_*` take the text. Every read goes through
//! [`crate::hostfs`] with a cap; the walk is bounded in depth and in groups ([`Limits`]) and
//! says when it stopped early.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};

/// Which cgroup version the counters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }

    /// Whether a cgroup's counter includes its descendants' (v2 both, v1 `cpuacct.usage`);
    /// v1's block counters hold a cgroup's own tasks only.
    pub fn io_recursive(self) -> bool {
        self == Version::V2
    }
}

/// One mounted hierarchy to walk and the counters it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Agent-side directory of the hierarchy's root.
    pub dir: PathBuf,
    pub io: bool,
    pub cpu: bool,
}

/// The hierarchies that hold IO and CPU counters on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: Version,
    pub hierarchies: Vec<Hierarchy>,
}

/// Finds the hierarchies under `<root>/sys/fs/cgroup` (`None`: no cgroup counters).
pub fn detect(host: &HostPaths) -> Option<Layout> {
    let cg = host.sys_file("fs/cgroup");
    let is_file = |p: PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    if is_file(cg.join("cgroup.controllers")) {
        return Some(Layout {
            version: Version::V2,
            hierarchies: vec![Hierarchy {
                dir: cg,
                io: true,
                cpu: true,
            }],
        });
    }
    let blkio = cg.join("blkio");
    let blkio = is_file(blkio.join(V1_IO_FILE)).then_some(blkio);
    let cpuacct = ["cpuacct", "cpu,cpuacct", "cpuacct,cpu"]
        .iter()
        .map(|d| cg.join(d))
        .find(|d| is_file(d.join(V1_CPU_FILE)));
    if blkio.is_some() || cpuacct.is_some() {
        let mut hierarchies = Vec::new();
        match (blkio, cpuacct) {
            (Some(b), Some(c)) if b == c => hierarchies.push(Hierarchy {
                dir: b,
                io: true,
                cpu: true,
            }),
            (b, c) => {
                hierarchies.extend(b.map(|dir| Hierarchy {
                    dir,
                    io: true,
                    cpu: false,
                }));
                hierarchies.extend(c.map(|dir| Hierarchy {
                    dir,
                    io: false,
                    cpu: true,
                }));
            }
        }
        return Some(Layout {
            version: Version::V1,
            hierarchies,
        });
    }
    let unified = cg.join("unified");
    let controllers = hostfs::read_text(&unified.join("cgroup.controllers"), cap::VALUE).ok()?;
    controllers
        .split_whitespace()
        .any(|c| c == "io")
        .then(|| Layout {
            version: Version::V2,
            hierarchies: vec![Hierarchy {
                dir: unified,
                io: true,
                cpu: true,
            }],
        })
}

const V1_IO_FILE: &str = "blkio.throttle.io_service_bytes";
const V1_CPU_FILE: &str = "cpuacct.usage";
const V2_IO_FILE: &str = "io.stat";
const V2_CPU_FILE: &str = "cpu.stat";

/// Bytes (read + written) one cgroup moved on one block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceIo {
    pub major: u32,
    pub minor: u32,
    pub bytes: u64,
}

/// `major:minor` of a counter line.
fn device(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Parses cgroup v2 `io.stat`: `259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0` per
/// device. Keys it does not know are skipped (kernels add some: `cost.*` with iocost); a
/// line without `rbytes`/`wbytes` counts 0.
pub fn parse_io_stat(text: &str) -> Result<Vec<DeviceIo>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let dev = words.next().unwrap_or("");
        let (major, minor) = device(dev).ok_or_else(|| {
            format!(
                "io.stat line does not start with major:minor: {}",
                clip(line)
            )
        })?;
        let mut bytes = 0u64;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                continue;
            };
            if k == "rbytes" || k == "wbytes" {
                let v: u64 = v
                    .parse()
                    .map_err(|_| format!("io.stat {k} is not a number: {}", clip(line)))?;
                bytes = bytes.saturating_add(v);
            }
        }
        out.push(DeviceIo {
            major,
            minor,
            bytes,
        });
    }
    Ok(out)
}

/// Parses cgroup v1 `blkio.throttle.io_service_bytes`: `7:0 Read 13236224`, `7:0 Write …`,
/// `Sync`, `Async`, `Discard`, `Total` per device, and a last `Total N` over all devices.
/// Read + Write per device (the per-device `Total` adds discards).
pub fn parse_blkio(text: &str) -> Result<Vec<DeviceIo>, String> {
    let mut out: Vec<DeviceIo> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Total", n] => {
                n.parse::<u64>()
                    .map_err(|_| format!("blkio Total is not a number: {}", clip(line)))?;
            }
            [dev, op, n] => {
                let (major, minor) = device(dev).ok_or_else(|| {
                    format!("blkio line does not start with major:minor: {}", clip(line))
                })?;
                let n: u64 = n
                    .parse()
                    .map_err(|_| format!("blkio counter is not a number: {}", clip(line)))?;
                let slot = match out
                    .iter_mut()
                    .find(|d| (d.major, d.minor) == (major, minor))
                {
                    Some(d) => d,
                    None => {
                        out.push(DeviceIo {
                            major,
                            minor,
                            bytes: 0,
                        });
                        out.last_mut().expect("just pushed")
                    }
                };
                if *op == "Read" || *op == "Write" {
                    slot.bytes = slot.bytes.saturating_add(n);
                }
            }
            _ => return Err(format!("unexpected blkio line: {}", clip(line))),
        }
    }
    Ok(out)
}

/// Parses cgroup v2 `cpu.stat`: its `usage_usec` (microseconds of CPU).
pub fn parse_cpu_stat(text: &str) -> Result<u64, String> {
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("usage_usec ") {
            return v
                .trim()
                .parse()
                .map_err(|_| format!("cpu.stat usage_usec is not a number: {}", clip(line)));
        }
    }
    Err("cpu.stat has no usage_usec line".into())
}

/// CPU bandwidth throttling of one cgroup since it was created (`cpu.stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Throttling {
    /// Enforcement periods in which the cgroup had runnable tasks (`nr_periods`).
    pub periods: u64,
    /// Periods in which it ran out of quota (`nr_throttled`).
    pub throttled: u64,
    /// Time its tasks were held back, microseconds (v2 `throttled_usec`, v1 `throttled_time`
    /// in nanoseconds / 1000).
    pub throttled_usec: u64,
}

/// Parses the throttling counters of `cpu.stat`, either version: v2 (`nr_periods`,
/// `nr_throttled`, `throttled_usec`, beside `usage_usec`) or v1's cpu controller
/// (`nr_periods`, `nr_throttled`, `throttled_time` in nanoseconds). The v1 file of a
/// kernel with `cpu.cfs_burst_us` adds `nr_bursts`/`burst_time`; unknown keys are skipped.
pub fn parse_throttling(text: &str) -> Result<Throttling, String> {
    let mut t = Throttling::default();
    let (mut periods, mut throttled, mut time) = (false, false, false);
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once(' ') else {
            continue;
        };
        let num = || {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("cpu.stat {k} is not a number: {}", clip(line)))
        };
        match k {
            "nr_periods" => (t.periods, periods) = (num()?, true),
            "nr_throttled" => (t.throttled, throttled) = (num()?, true),
            "throttled_usec" => (t.throttled_usec, time) = (num()?, true),
            "throttled_time" => (t.throttled_usec, time) = (num()? / 1000, true),
            _ => {}
        }
    }
    if !(periods && throttled && time) {
        return Err("cpu.stat has no nr_periods/nr_throttled/throttled time".into());
    }
    Ok(t)
}

/// Parses cgroup v1 `cpuacct.usage` (nanoseconds) into microseconds.
pub fn parse_cpuacct_usage(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map(|ns| ns / 1000)
        .map_err(|_| format!("cpuacct.usage is not a number: {}", clip(text)))
}

/// Parses `cgroup.procs`: one pid per line.
pub fn parse_procs(text: &str) -> Result<Vec<u32>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse()
                .map_err(|_| format!("cgroup.procs line is not a pid: {}", clip(l)))
        })
        .collect()
}

/// The first 80 bytes of host text quoted in an error.
fn clip(s: &str) -> String {
    format!("{:?}", crate::bounded::prefix(s, 80))
}

/// One cgroup of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Path inside its hierarchy: `/` for the root, `/kubepods.slice/…`.
    pub path: String,
    /// Index of the parent in [`Tree::groups`] (`None` for the root).
    pub parent: Option<usize>,
    /// Per-device bytes (`None`: the hierarchy has no IO counters, or the file could not
    /// be read: a v2 cgroup whose parent does not enable `io`, or the v2 root).
    pub io: Option<Vec<DeviceIo>>,
    /// CPU microseconds (`None` likewise).
    pub cpu_usec: Option<u64>,
}

impl Group {
    pub fn io_bytes(&self) -> Option<u64> {
        self.io
            .as_ref()
            .map(|d| d.iter().fold(0u64, |a, x| a.saturating_add(x.bytes)))
    }
}

/// Bounds of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Levels below the root that are visited (the kubelet's deepest, a container's
    /// `cri-containerd-<id>.scope`, is 4 below the root; systemd user sessions ~6).
    pub max_depth: usize,
    /// Cgroups visited per hierarchy.
    pub max_groups: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 8,
            max_groups: 2048,
        }
    }
}

/// One hierarchy's cgroups, parents before children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub hierarchy: Hierarchy,
    pub groups: Vec<Group>,
    /// The walk stopped at [`Limits::max_groups`] (groups beyond it were not read).
    pub truncated: bool,
    /// Groups below [`Limits::max_depth`] that were not visited (their figures count in
    /// their ancestors' only where counters are recursive).
    pub too_deep: usize,
    /// Child directories skipped because their names are not UTF-8 (their figures would be
    /// counted in their parent's own share on v2).
    pub unnamed: usize,
    /// Counter files that exist but could not be read or parsed, with the first error.
    pub unreadable: usize,
    pub first_error: Option<String>,
}

/// Walks one hierarchy breadth-first, reading its counters (one file per counter per
/// cgroup). An error when the root's directory cannot be listed.
pub fn walk(h: &Hierarchy, version: Version, limits: Limits) -> Result<Tree, ReadError> {
    let mut tree = Tree {
        hierarchy: h.clone(),
        groups: Vec::new(),
        truncated: false,
        too_deep: 0,
        unnamed: 0,
        unreadable: 0,
        first_error: None,
    };
    let (io_file, cpu_file) = match version {
        Version::V1 => (V1_IO_FILE, V1_CPU_FILE),
        Version::V2 => (V2_IO_FILE, V2_CPU_FILE),
    };
    let mut queue: VecDeque<(PathBuf, String, Option<usize>, usize)> =
        VecDeque::from([(h.dir.clone(), "/".to_string(), None, 0)]);
    while let Some((dir, path, parent, depth)) = queue.pop_front() {
        if tree.groups.len() >= limits.max_groups {
            tree.truncated = true;
            break;
        }
        let listing = hostfs::dir_entries(&dir, entries::CGROUP);
        let listing = match listing {
            Ok(l) => l,
            Err(e) if parent.is_none() => return Err(e),
            // A cgroup removed since its parent was listed.
            Err(_) => continue,
        };
        let idx = tree.groups.len();
        let mut group = Group {
            path: path.clone(),
            parent,
            io: None,
            cpu_usec: None,
        };
        let mut children = Vec::new();
        let (mut has_io, mut has_cpu) = (false, false);
        for e in listing {
            let name = e.file_name();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let Some(name) = name.to_str() else {
                tree.unnamed += usize::from(is_dir);
                continue;
            };
            // Cgroup directories are real directories; never follow symlinks.
            if is_dir {
                children.push(name.to_string());
            } else if h.io && name == io_file {
                has_io = true;
            } else if h.cpu && name == cpu_file {
                has_cpu = true;
            }
        }
        if has_io {
            match read_counter(&dir.join(io_file), version, Counter::Io) {
                Ok(Value::Io(v)) => group.io = Some(v),
                Ok(_) => {}
                Err(e) => tree.note_error(e),
            }
        }
        if has_cpu {
            match read_counter(&dir.join(cpu_file), version, Counter::Cpu) {
                Ok(Value::Cpu(v)) => group.cpu_usec = Some(v),
                Ok(_) => {}
                Err(e) => tree.note_error(e),
            }
        }
        tree.groups.push(group);
        children.sort();
        for c in children {
            if depth >= limits.max_depth {
                tree.too_deep += 1;
                continue;
            }
            let child_path = if path == "/" {
                format!("/{c}")
            } else {
                format!("{path}/{c}")
            };
            queue.push_back((dir.join(&c), child_path, Some(idx), depth + 1));
        }
    }
    Ok(tree)
}

impl Tree {
    fn note_error(&mut self, e: ReadError) {
        self.unreadable += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }

    /// The agent-side directory of a group.
    pub fn dir_of(&self, group: &Group) -> PathBuf {
        let rel = group.path.trim_start_matches('/');
        if rel.is_empty() {
            self.hierarchy.dir.clone()
        } else {
            self.hierarchy.dir.join(rel)
        }
    }
}

enum Counter {
    Io,
    Cpu,
}

enum Value {
    Io(Vec<DeviceIo>),
    Cpu(u64),
}

type Parser = fn(&str) -> Result<Value, String>;

fn read_counter(path: &Path, version: Version, which: Counter) -> Result<Value, ReadError> {
    let (cap, parse): (usize, Parser) = match (version, which) {
        // A line per block device (~100 B in v2, 6 lines of ~20 B in v1).
        (Version::V2, Counter::Io) => (cap::PER_CPU_TABLE, |t| parse_io_stat(t).map(Value::Io)),
        (Version::V1, Counter::Io) => (cap::PER_CPU_TABLE, |t| parse_blkio(t).map(Value::Io)),
        // A dozen named counters.
        (Version::V2, Counter::Cpu) => (cap::COUNTERS, |t| parse_cpu_stat(t).map(Value::Cpu)),
        (Version::V1, Counter::Cpu) => (cap::VALUE, |t| parse_cpuacct_usage(t).map(Value::Cpu)),
    };
    let text = hostfs::read_text(path, cap)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

/// The pids of a cgroup's own tasks (`cgroup.procs`; at most [`cap::PER_CPU_TABLE`], ~500,000
/// pids).
pub fn procs(dir: &Path) -> Result<Vec<u32>, ReadError> {
    let path = dir.join("cgroup.procs");
    let text = hostfs::read_text(&path, cap::PER_CPU_TABLE)?;
    parse_procs(&text).map_err(|m| ReadError::parse(&path, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM's root `blkio.throttle.io_service_bytes` (Linux 6.18, cgroup v1): only the two
    /// loop devices a throttle was configured on are listed, not `vda`.
    const BLKIO_6_18: &str = "7:1 Read 1068032\n7:1 Write 2272103424\n7:1 Sync 2273170432\n7:1 Async 1024\n7:1 Discard 0\n7:1 Total 2273171456\n7:0 Read 13236224\n7:0 Write 4117883904\n7:0 Sync 4131103744\n7:0 Async 16384\n7:0 Discard 0\n7:0 Total 4131120128\nTotal 6404291584\n";
    /// A v1 cgroup that did no IO (this VM's `/docker`).
    const BLKIO_EMPTY_6_18: &str = "Total 0\n";
    /// cgroup v2 `io.stat` (Linux 6.1, a containerd pod's container; the second device has
    /// iocost's extra keys).
    const IO_STAT_V2: &str = "259:0 rbytes=5701632 wbytes=1306624 rios=178 wios=96 dbytes=0 dios=0\n8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=12 cost.wait=0 cost.indebt=0 cost.indelay=0\n";
    /// cgroup v2 `cpu.stat` (Linux 6.18, this VM's `/sys/fs/cgroup/unified/cpu.stat`).
    const CPU_STAT_6_18: &str = "usage_usec 29673013602\nuser_usec 22019473000\nsystem_usec 7653540602\nnice_usec 1000\ncore_sched.force_idle_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n";

    #[test]
    fn parses_v1_blkio_read_plus_write_per_device() {
        let d = parse_blkio(BLKIO_6_18).unwrap();
        assert_eq!(
            d,
            vec![
                DeviceIo {
                    major: 7,
                    minor: 1,
                    bytes: 1068032 + 2272103424
                },
                DeviceIo {
                    major: 7,
                    minor: 0,
                    bytes: 13236224 + 4117883904
                },
            ]
        );
        assert_eq!(parse_blkio(BLKIO_EMPTY_6_18).unwrap(), vec![]);
        assert!(parse_blkio("7:0 Read x\n").is_err());
        assert!(parse_blkio("garbage\n").is_err());
    }

    #[test]
    fn parses_v2_io_stat_and_cpu_counters() {
        let d = parse_io_stat(IO_STAT_V2).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].major, d[0].minor, d[0].bytes),
            (259, 0, 5701632 + 1306624)
        );
        assert_eq!(d[1].bytes, 4096);
        assert!(parse_io_stat("nonsense rbytes=1\n").is_err());
        assert!(parse_io_stat("8:0 rbytes=-1\n").is_err());
        assert_eq!(parse_cpu_stat(CPU_STAT_6_18), Ok(29673013602));
        assert!(parse_cpu_stat("user_usec 1\n").is_err());
        // This VM's root cpuacct.usage, nanoseconds.
        assert_eq!(parse_cpuacct_usage("29672978347538\n"), Ok(29672978347));
        assert!(parse_cpuacct_usage("").is_err());
        assert_eq!(parse_procs("1\n42\n"), Ok(vec![1, 42]));
        assert_eq!(parse_procs(""), Ok(vec![]));
        assert!(parse_procs("1\nx\n").is_err());
    }

    #[test]
    fn parses_throttling_of_both_versions() {
        assert_eq!(parse_throttling(CPU_STAT_6_18), Ok(Throttling::default()));
        // cgroup v1 cpu.stat, Linux 6.18 (this VM's /sys/fs/cgroup/cpu/cpu.stat after a
        // throttled busy loop): throttled_time in nanoseconds.
        let v1 = "nr_periods 41\nnr_throttled 39\nthrottled_time 3512345678\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(
            parse_throttling(v1),
            Ok(Throttling {
                periods: 41,
                throttled: 39,
                throttled_usec: 3512345
            })
        );
        let v2 = "usage_usec 10\nnr_periods 200\nnr_throttled 50\nthrottled_usec 4000000\n";
        assert_eq!(parse_throttling(v2).map(|t| t.throttled), Ok(50));
        assert!(parse_throttling("usage_usec 5\n").is_err());
        assert!(parse_throttling("nr_periods x\nnr_throttled 1\nthrottled_usec 1\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = parse_io_stat(&s);
            let _ = parse_blkio(&s);
            let _ = parse_cpu_stat(&s);
            let _ = parse_cpuacct_usage(&s);
            let _ = parse_procs(&s);
            let _ = parse_throttling(&s);
        }

        /// v2 `io.stat` as `blkcg_print_stat()` prints it (`%u:%u rbytes=%llu wbytes=%llu
        /// rios=… dios=…`, iocost's keys after) and v1 `io_service_bytes` as
        /// `__blkg_prfill_rwstat()` does (`Read`…`Total` per device, a last `Total`): each
        /// device reads back with read + write bytes.
        #[test]
        fn io_parses_what_the_kernel_prints(
            devices in proptest::collection::btree_map(
                (0u32..4096, 0u32..1 << 20),
                (proptest::array::uniform2(0u64..1 << 62), proptest::array::uniform3(proptest::num::u64::ANY), proptest::bool::ANY),
                0..6,
            ),
        ) {
            let (mut v2, mut v1, mut want) = (String::new(), String::new(), Vec::new());
            for (&(major, minor), &([r, w], [ios, sync, discard], iocost)) in &devices {
                v2 += &format!("{major}:{minor} rbytes={r} wbytes={w} rios={ios} wios={ios} dbytes={discard} dios=0");
                if iocost {
                    v2 += " cost.vrate=100.00 cost.usage=12 cost.wait=0 cost.indebt=0 cost.indelay=0";
                }
                v2.push('\n');
                v1 += &format!(
                    "{major}:{minor} Read {r}\n{major}:{minor} Write {w}\n{major}:{minor} Sync {sync}\n\
                     {major}:{minor} Async {sync}\n{major}:{minor} Discard {discard}\n{major}:{minor} Total {}\n",
                    r + w,
                );
                want.push(DeviceIo { major, minor, bytes: r + w });
            }
            v1 += "Total 6404291584\n";
            proptest::prop_assert_eq!(parse_io_stat(&v2), Ok(want.clone()));
            proptest::prop_assert_eq!(parse_blkio(&v1), Ok(want));
        }

        /// v2 `cpu.stat` (`cpu_stat_show()`: `usage_usec %llu` …, then with a quota
        /// `nr_periods %d`, `nr_throttled %d`, `throttled_usec %llu`, `nr_bursts`…), v1's cpu
        /// controller `cpu.stat` (`throttled_time` in ns), `cpuacct.usage` (ns) and
        /// `cgroup.procs` (`%d` per line): each reads back in microseconds and pids.
        #[test]
        fn cpu_parses_what_the_kernel_prints(
            [usage, user, periods, throttled, time] in proptest::array::uniform5(proptest::num::u64::ANY),
            pids in proptest::collection::vec(1u32..=4_194_304, 0..20),
        ) {
            let v2 = format!(
                "usage_usec {usage}\nuser_usec {user}\nsystem_usec {user}\nnice_usec 0\n\
                 nr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec {time}\nnr_bursts 0\nburst_usec 0\n"
            );
            let v1 = format!("nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {time}\nnr_bursts 0\nburst_time 0\n");
            proptest::prop_assert_eq!(parse_cpu_stat(&v2), Ok(usage));
            proptest::prop_assert_eq!(parse_throttling(&v2), Ok(Throttling { periods, throttled, throttled_usec: time }));
            proptest::prop_assert_eq!(parse_throttling(&v1), Ok(Throttling { periods, throttled, throttled_usec: time / 1000 }));
            proptest::prop_assert_eq!(parse_cpuacct_usage(&format!("{usage}\n")), Ok(usage / 1000));
            let procs: String = pids.iter().map(|p| format!("{p}\n")).collect();
            proptest::prop_assert_eq!(parse_procs(&procs), Ok(pids));
        }
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn detects_each_layout_and_walks_with_bounds() {
        // v1 (this VM): blkio and cpuacct mounted apart, v2 at unified without io.
        let t = tempfile::tempdir().unwrap();
        let cg = t.path().join("sys/fs/cgroup");
        write(&cg.join("blkio").join(V1_IO_FILE), BLKIO_6_18);
        write(&cg.join("blkio/docker").join(V1_IO_FILE), BLKIO_EMPTY_6_18);
        write(
            &cg.join("blkio/docker/a/b").join(V1_IO_FILE),
            BLKIO_EMPTY_6_18,
        );
        write(&cg.join("cpuacct").join(V1_CPU_FILE), "1000\n");
        write(&cg.join("unified/cgroup.controllers"), "hugetlb\n");
        let host = HostPaths::new(t.path());
        let l = detect(&host).unwrap();
        assert_eq!(l.version, Version::V1);
        assert_eq!(l.hierarchies.len(), 2);
        assert!(l.hierarchies[0].io && !l.hierarchies[0].cpu);
        let tree = walk(&l.hierarchies[0], l.version, Limits::default()).unwrap();
        let paths: Vec<&str> = tree.groups.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, ["/", "/docker", "/docker/a", "/docker/a/b"]);
        assert_eq!(tree.groups[2].io, None, "no counter file there");
        assert_eq!(tree.groups[3].parent, Some(2));
        assert_eq!(tree.dir_of(&tree.groups[3]), cg.join("blkio/docker/a/b"));
        let shallow = walk(
            &l.hierarchies[0],
            l.version,
            Limits {
                max_depth: 1,
                max_groups: 10,
            },
        )
        .unwrap();
        assert_eq!((shallow.groups.len(), shallow.too_deep), (2, 1));
        let few = walk(
            &l.hierarchies[0],
            l.version,
            Limits {
                max_depth: 8,
                max_groups: 2,
            },
        )
        .unwrap();
        assert!(few.truncated && few.groups.len() == 2);
        // A counter file that is not a regular file is refused and counted, never opened.
        std::fs::remove_file(cg.join("blkio/docker").join(V1_IO_FILE)).unwrap();
        nix::unistd::mkfifo(
            &cg.join("blkio/docker").join(V1_IO_FILE),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let tree = walk(&l.hierarchies[0], l.version, Limits::default()).unwrap();
        assert_eq!(tree.unreadable, 1);
        assert!(tree.first_error.as_deref().unwrap().contains("FIFO"));
        // A cgroup whose name is not UTF-8 is counted, not walked.
        use std::os::unix::ffi::OsStrExt;
        std::fs::create_dir(cg.join("blkio").join(std::ffi::OsStr::from_bytes(b"\xff"))).unwrap();
        let tree = walk(&l.hierarchies[0], l.version, Limits::default()).unwrap();
        assert_eq!((tree.unnamed, tree.groups.len()), (1, 4));

        // Hybrid: no v1 blkio/cpuacct, v2 at unified with io.
        let t = tempfile::tempdir().unwrap();
        let cg = t.path().join("sys/fs/cgroup");
        write(&cg.join("memory/memory.usage_in_bytes"), "1\n");
        write(&cg.join("unified/cgroup.controllers"), "cpu io memory\n");
        let l = detect(&HostPaths::new(t.path())).unwrap();
        assert_eq!(l.version, Version::V2);
        assert_eq!(l.hierarchies[0].dir, cg.join("unified"));

        // v2 at the top.
        let t = tempfile::tempdir().unwrap();
        let cg = t.path().join("sys/fs/cgroup");
        write(&cg.join("cgroup.controllers"), "cpu io memory pids\n");
        write(&cg.join("cpu.stat"), CPU_STAT_6_18);
        write(&cg.join("kubepods.slice").join(V2_IO_FILE), IO_STAT_V2);
        write(
            &cg.join("kubepods.slice").join(V2_CPU_FILE),
            "usage_usec 5\n",
        );
        let l = detect(&HostPaths::new(t.path())).unwrap();
        assert_eq!(l.version, Version::V2);
        let tree = walk(&l.hierarchies[0], l.version, Limits::default()).unwrap();
        assert_eq!(tree.groups[0].cpu_usec, Some(29673013602));
        assert_eq!(tree.groups[0].io, None, "the v2 root has no io.stat");
        assert_eq!(tree.groups[1].io_bytes(), Some(5701632 + 1306624 + 4096));

        // Nothing mounted.
        let t = tempfile::tempdir().unwrap();
        assert_eq!(detect(&HostPaths::new(t.path())), None);
    }

    /// This VM's real hierarchy (cgroup v1 blkio and cpuacct), when it is there: the walk
    /// reads it and finds the root's counters.
    #[test]
    fn reads_this_hosts_hierarchy() {
        let host = HostPaths::new("/");
        let Some(l) = detect(&host) else {
            crate::skip!(
                "SKIP reads_this_hosts_hierarchy: no cgroup IO/CPU counters under /sys/fs/cgroup"
            );
            return;
        };
        for h in &l.hierarchies {
            let tree = walk(h, l.version, Limits::default()).unwrap();
            assert_eq!(tree.groups[0].path, "/");
            if h.cpu {
                assert!(tree.groups[0].cpu_usec.is_some_and(|u| u > 0), "{tree:?}");
            }
            assert!(procs(&h.dir).is_ok_and(|p| !p.is_empty()));
        }
    }
}
