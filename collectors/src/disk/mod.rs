//! Collector `disk`: the filesystems under the container runtime's and the kubelet's
//! directories, how full they are against the kubelet's own thresholds, what fills them
//! (largest container logs, top directories from a bounded walk, deleted-but-open files),
//! and the handbook's recovery (its node-disk-full section, whose title and words are in
//! `collectors/rules/disk.toml`).
//!
//! Reads: `<root>/proc/1/mountinfo`; `/etc/docker/daemon.json`; `/etc/containerd/config.toml`;
//! the kubelet's, dockerd's and containerd's `/proc/<pid>/cmdline`; the kubelet config file;
//! `statvfs` of each directory; `<data-root>/containers/*/`; `/var/log/pods/*/*/`;
//! `/proc/*/fd` (only when a filesystem needs attention).
//!
//! The shape of every collector: `DiskCollector::sample` reads the host into a typed
//! [`DiskSample`] (the model, in [`sample`]); [`judge::judge`] turns it into drafts under
//! [`DiskConfig::thresholds`] (the limits, in [`thresholds`]); `collect` renders them in the
//! words of `collectors/rules/disk.toml` ([`CollectContext::render`]) and adds the metrics of
//! the sample.

pub mod deleted;
pub mod judge;
pub mod logs;
pub mod sample;
pub mod thresholds;
pub mod trend;
pub mod walk;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::collector::{CollectContext, Phases, Status};
use crate::config::kubelet as config_kubelet;
use crate::figure::{kinds, Figure, Line, Unit};
use crate::metric::Metric;
use crate::node::discover::{self, Discovery, Locations, Role};
use crate::node::Node;
use crate::proc::mountinfo::{self, Mount};
use crate::rules::Draft;
use crate::sys::statvfs::{self, FsUsage, StatFsFn};

pub use sample::{DiskSample, DockerSample, FsSample, Grower, RoleDir, Trend};
pub use thresholds::Thresholds;

/// Settings of the disk collector.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskConfig {
    /// Where the runtimes' and the kubelet's configuration files are.
    pub runtime: Locations,
    /// CRI pod log directory (host path).
    pub pod_log_dir: String,
    /// Thresholds besides the kubelet's own (which come from its settings).
    pub thresholds: Thresholds,
    /// How many of the largest logs to report.
    pub top_logs: usize,
    /// Directory-walk budget per cycle: entries...
    pub walk_budget_entries: usize,
    /// ...and time.
    pub walk_budget: Duration,
    /// Walk (and scan `/proc/*/fd`) even when every filesystem is healthy.
    pub walk_when_healthy: bool,
    /// Time to full: how far back the history of each filesystem reaches...
    pub history_window: Duration,
    /// ...in at most this many points (downsampled: one per `history_window / history_points`).
    pub history_points: usize,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            runtime: Locations::default(),
            pod_log_dir: "/var/log/pods".to_string(),
            thresholds: Thresholds::default(),
            top_logs: 5,
            walk_budget_entries: 20_000,
            walk_budget: Duration::from_millis(20),
            walk_when_healthy: false,
            history_window: Duration::from_secs_f64(trend::Series::WINDOW_SECS),
            history_points: trend::Series::CAPACITY,
        }
    }
}

/// The disk collector. See the module documentation.
pub struct DiskCollector {
    node: Node,
    config: DiskConfig,
    statfs: Box<StatFsFn>,
    walkers: BTreeMap<PathBuf, walk::Walker>,
    labels: logs::LabelCache,
    /// Log file names per docker container directory, per data root.
    docker_dirs: HashMap<PathBuf, logs::DockerDirCache>,
    last_walk: walk::Spent,
    /// Seconds since the Unix epoch (the system clock; tests inject theirs).
    clock: Box<dyn Fn() -> f64 + Send>,
    /// The history of each filesystem seen on the last run, by mount point and device.
    history: BTreeMap<(String, u64), FsHistory>,
    /// The items of the last complete walk of each walked root, and what grew since the one
    /// before.
    growth: HashMap<PathBuf, RootGrowth>,
    /// Each container log's size at the last run (agent-side path) and when it was read: the
    /// logs that grow fastest are growers too (a pod's logs under `/var/log/pods` are outside
    /// every walked root). Only the logs of the last listing are kept.
    log_sizes: HashMap<PathBuf, u64>,
    logs_at: Option<f64>,
}

/// Filesystems whose history is kept, at most (a node has a handful).
const MAX_SERIES: usize = 64;

/// Growers named per filesystem, at most.
const MAX_GROWERS: usize = 5;

/// What the collector remembers of a filesystem between runs.
#[derive(Debug, Default)]
struct FsHistory {
    series: trend::Series,
    raised_space: bool,
    raised_inodes: bool,
}

/// A walked root's last complete pass (when, and its items' bytes and entries) and what grew
/// between it and the pass before.
#[derive(Debug, Default)]
struct RootGrowth {
    passes: u64,
    at: f64,
    items: HashMap<String, (u64, u64)>,
    growers: Vec<(walk::ItemSize, f64, f64)>,
}

/// Which filesystem a directory is on: grouping key, `st_dev`, and the mount with its
/// host-side mount point when mountinfo knows it.
type Placed = (String, u64, Option<(Mount, String)>);

/// The runtime's and kubelet's directories grouped by filesystem, while a sample is read: the
/// keys in the order met, each filesystem's sample, the agent-side directory its usage is
/// read through, and the filesystems whose usage could not be read.
#[derive(Default)]
struct Filesystems {
    order: Vec<String>,
    groups: HashMap<String, FsSample>,
    agent_of: HashMap<String, PathBuf>,
    stat_failed: HashSet<String>,
}

impl DiskCollector {
    pub fn new(node: Node, config: DiskConfig) -> Self {
        DiskCollector {
            node,
            config,
            statfs: Box::new(statvfs::usage),
            walkers: BTreeMap::new(),
            labels: logs::LabelCache::default(),
            docker_dirs: HashMap::new(),
            last_walk: walk::Spent::default(),
            clock: Box::new(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0)
            }),
            history: BTreeMap::new(),
            growth: HashMap::new(),
            log_sizes: HashMap::new(),
            logs_at: None,
        }
    }

    /// Replaces the clock (seconds since the Unix epoch): tests make their cycles minutes.
    pub fn with_clock(mut self, f: impl Fn() -> f64 + Send + 'static) -> Self {
        self.clock = Box::new(f);
        self
    }

    /// Filesystems whose history is kept, for checking that state stays bounded.
    pub fn history_count(&self) -> usize {
        self.history.len()
    }

    /// Replaces `statvfs` (tests on fake hosts).
    pub fn with_statfs(
        mut self,
        f: impl Fn(&Path) -> std::io::Result<FsUsage> + Send + 'static,
    ) -> Self {
        self.statfs = Box::new(f);
        self
    }

    /// What the directory walk spent in the last cycle (entries and time), for benchmarks
    /// and self-monitoring.
    pub fn last_walk(&self) -> walk::Spent {
        self.last_walk
    }

    /// Walkers alive (one per walked root), for checking that state stays bounded.
    pub fn walker_count(&self) -> usize {
        self.walkers.len()
    }

    fn discover(&self) -> Discovery {
        discover::discover(&self.node, &self.config.runtime, "disk/discover")
    }

    /// The mount containing a directory: by the host's view of the path when its device
    /// matches, else by the agent's view (the agent runs with a host root that is not `/`
    /// in the same mount namespace), else the host's view as written (fake hosts).
    fn locate<'m>(
        &self,
        mounts: &'m [Mount],
        host_path: &Path,
        agent_path: &Path,
        dev: u64,
    ) -> Option<(&'m Mount, String)> {
        let hv = mountinfo::containing(mounts, host_path);
        if let Some(m) = hv.filter(|m| m.dev() == dev) {
            return Some((m, m.mount_point.to_string_lossy().into_owned()));
        }
        if !self.node.host().is_identity() {
            if let Some(m) = mountinfo::containing(mounts, agent_path).filter(|m| m.dev() == dev) {
                let mp = self
                    .node
                    .host()
                    .host_side(&m.mount_point)
                    .unwrap_or_else(|| m.mount_point.clone());
                return Some((m, mp.to_string_lossy().into_owned()));
            }
        }
        hv.map(|m| (m, m.mount_point.to_string_lossy().into_owned()))
    }

    /// Reads everything the rules look at: the filesystems of the runtime and kubelet
    /// directories with what fills them, the kubelet's settings, docker's logging. `Err` with
    /// the status when there is nothing to judge: no such directory is a machine that is not
    /// a node (complete, with a note), unless a configuration file that names them could not
    /// be read (unavailable).
    fn read_host(&mut self) -> Result<(DiskSample, Status), Status> {
        let disc = self.discover();
        let mut notes = disc.notes.clone();
        if disc.dirs.is_empty() {
            // No filesystem is watched: none has a history any more.
            self.history.clear();
            self.growth.clear();
            let none = format!(
                "no container runtime or kubelet directory under {}: looked for the docker data/exec roots, the containerd root/state and the kubelet root dir",
                self.node.host().root().display()
            );
            return Err(if notes.is_empty() {
                Status::Noted(format!("{none}; not a node, nothing to judge"))
            } else {
                Status::Unavailable(format!("{}; {none}", notes.join("; ")))
            });
        }
        let mounts = match self.node.mounts() {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!(
                    "{e}; filesystems are told apart by device number only"
                ));
                Default::default()
            }
        };
        let now = (self.clock)();
        let mut fs = self.group_by_filesystem(&disc, &mounts, &mut notes);
        let mut absent = Vec::new();
        self.record_history(&mut fs, now, &mut absent);
        let largest_logs = self.container_logs(&disc, &mounts, &mut fs, now);
        let (attention, growing) = self.needing_attention(&disc, &fs);
        self.walk(&disc, &attention, &mut fs, now);
        let full: Vec<String> = attention
            .iter()
            .filter(|k| !growing.contains(*k))
            .cloned()
            .collect();
        self.deleted_files(&full, &mut fs, &mut notes);
        let sample = self.assemble(disc, fs, largest_logs);
        Ok((sample, Status::from_notes(notes, absent)))
    }

    /// The filesystem a directory is on, as a key (the mount, else the device), with its
    /// device number and mount.
    fn placed(&self, mounts: &[Mount], host_path: &Path, agent: &Path) -> Option<Placed> {
        let dev = std::fs::metadata(agent).ok()?.dev();
        let loc = self
            .locate(mounts, host_path, agent, dev)
            .map(|(m, mp)| (m.clone(), mp));
        let key = match &loc {
            Some((m, _)) => format!("m{}", m.mount_id),
            None => format!("d{dev}"),
        };
        Some((key, dev, loc))
    }

    /// The runtime's and the kubelet's directories grouped by the filesystem they are on,
    /// each filesystem's usage read once.
    fn group_by_filesystem(
        &self,
        disc: &Discovery,
        mounts: &[Mount],
        notes: &mut Vec<String>,
    ) -> Filesystems {
        let mut fs = Filesystems::default();
        for (role, host_path, agent) in &disc.dirs {
            let Some((key, dev, loc)) = self.placed(mounts, Path::new(host_path), agent) else {
                continue;
            };
            let entry = fs.groups.entry(key.clone()).or_insert_with(|| {
                fs.order.push(key.clone());
                fs.agent_of.insert(key.clone(), agent.clone());
                let (mount_point, device, fstype) = match &loc {
                    Some((m, mp)) => (mp.clone(), m.source.clone(), m.fstype.clone()),
                    None => (host_path.clone(), "unknown".into(), "unknown".into()),
                };
                FsSample {
                    mount_point,
                    device,
                    fstype,
                    dev,
                    roles: Vec::new(),
                    usage: FsUsage::default(),
                    logs: Vec::new(),
                    dirs: Vec::new(),
                    deleted: Vec::new(),
                    trend: Trend::default(),
                }
            });
            entry.roles.push(RoleDir {
                role: *role,
                host_path: host_path.clone(),
            });
        }
        for key in &fs.order {
            let (Some(g), Some(agent)) = (fs.groups.get_mut(key), fs.agent_of.get(key)) else {
                continue;
            };
            match (self.statfs)(agent) {
                Ok(u) => g.usage = u,
                Err(e) => {
                    notes.push(format!("statfs {}: {e}", agent.display()));
                    fs.stat_failed.insert(key.clone());
                }
            }
        }
        fs
    }

    /// The largest container logs of each filesystem (into its sample) and of the node
    /// (returned), from docker's and the kubelet's log directories.
    fn container_logs(
        &mut self,
        disc: &Discovery,
        mounts: &[Mount],
        fs: &mut Filesystems,
        now: f64,
    ) -> Vec<logs::LogFile> {
        let mut all_logs: Vec<(String, logs::LogFile)> = Vec::new();
        let mut log_dirs: Vec<(PathBuf, bool)> = Vec::new();
        for (role, _, agent) in &disc.dirs {
            if *role == Role::DockerData {
                log_dirs.push((agent.join("containers"), true));
            }
        }
        let pods = self.node.host().resolve(&self.config.pod_log_dir);
        if pods.is_dir() {
            log_dirs.push((pods, false));
        }
        let mut live_ids: HashSet<String> = HashSet::new();
        for (dir, is_docker) in &log_dirs {
            let mut found = Vec::new();
            if *is_docker {
                self.docker_dirs
                    .entry(dir.clone())
                    .or_default()
                    .list(dir, &mut found);
            } else {
                logs::list_cri(dir, &mut found);
            }
            let host_dir = self
                .node
                .host()
                .host_side(dir)
                .unwrap_or_else(|| dir.clone());
            let key = self
                .placed(mounts, &host_dir, dir)
                .map(|k| k.0)
                .unwrap_or_default();
            for l in found {
                if let Some(id) = &l.container_id {
                    live_ids.insert(id.clone());
                }
                all_logs.push((key.clone(), l));
            }
        }
        self.log_growers(&all_logs, fs, now);
        self.labels.retain(&live_ids);
        self.docker_dirs
            .retain(|dir, _| log_dirs.iter().any(|(d, docker)| *docker && d == dir));
        let top_n = self.config.top_logs;
        let mut by_key: HashMap<String, Vec<logs::LogFile>> = HashMap::new();
        for (k, l) in &all_logs {
            by_key.entry(k.clone()).or_default().push(l.clone());
        }
        for (k, v) in by_key {
            if let Some(g) = fs.groups.get_mut(&k) {
                let mut top = logs::largest(v, top_n);
                self.labels.annotate(&mut top);
                g.logs = top;
            }
        }
        let mut overall = logs::largest(all_logs.into_iter().map(|x| x.1).collect(), top_n);
        self.labels.annotate(&mut overall);
        overall
    }

    /// The container log that grew fastest on each filesystem since the last run, as a grower
    /// of kind `pod_log` (a rotated or truncated log, smaller now, is no grower); remembers
    /// this listing's sizes for the next run.
    fn log_growers(
        &mut self,
        all_logs: &[(String, logs::LogFile)],
        fs: &mut Filesystems,
        now: f64,
    ) {
        let dt = self.logs_at.map_or(0.0, |t| now - t);
        let mut best: HashMap<&str, (f64, &logs::LogFile)> = HashMap::new();
        if dt > 0.0 {
            for (key, l) in all_logs {
                let Some(before) = self.log_sizes.get(&l.path) else {
                    continue;
                };
                let Some(grew) = l.size_bytes.checked_sub(*before).filter(|g| *g > 0) else {
                    continue;
                };
                let rate = grew as f64 / dt;
                if best.get(key.as_str()).is_none_or(|(r, _)| rate > *r) {
                    best.insert(key.as_str(), (rate, l));
                }
            }
        }
        for (key, (rate, l)) in best {
            if let Some(g) = fs.groups.get_mut(key) {
                let host = self.node.host().host_side(&l.path);
                let path = host.as_deref().unwrap_or(&l.path);
                g.trend.growers.push(Grower {
                    path: path.display().to_string(),
                    kind: "pod_log",
                    pod_uid: pod_log_uid(path),
                    bytes_per_second: rate,
                    entries_per_second: 0.0,
                    bytes: l.size_bytes,
                });
            }
        }
        self.log_sizes = all_logs
            .iter()
            .map(|(_, l)| (l.path.clone(), l.size_bytes))
            .collect();
        self.logs_at = Some(now);
    }

    /// Adds this run's reading of each filesystem to its history and fits it (into the
    /// sample's `trend`); forgets the filesystems not seen. Notes when some filesystem has too
    /// little history for a time-to-full estimate (every `check`, the first minutes of `serve`).
    fn record_history(&mut self, fs: &mut Filesystems, now: f64, absent: &mut Vec<String>) {
        let t = self.config.thresholds;
        let window = self.config.history_window.as_secs_f64();
        let mut seen = HashSet::new();
        let mut short = false;
        for key in &fs.order {
            if fs.stat_failed.contains(key) {
                continue;
            }
            let Some(g) = fs.groups.get_mut(key) else {
                continue;
            };
            let id = (g.mount_point.clone(), g.dev);
            if !self.history.contains_key(&id) && self.history.len() >= MAX_SERIES {
                continue;
            }
            let h = self.history.entry(id.clone()).or_default();
            h.series.push(
                trend::Point {
                    t: now,
                    avail_bytes: g.usage.avail_bytes as f64,
                    files_free: g.usage.files_free as f64,
                },
                window,
                self.config.history_points,
            );
            let points = h.series.points();
            short |= !trend::enough(&points, &t);
            g.trend = Trend {
                space: trend::fit(&points, trend::Resource::Space, &t),
                inodes: (g.usage.files > 0)
                    .then(|| trend::fit(&points, trend::Resource::Inodes, &t))
                    .flatten(),
                history_secs: points.last().map(|l| l.t - points[0].t).unwrap_or(0.0),
                history_points: points.len(),
                raised_space: h.raised_space,
                raised_inodes: h.raised_inodes,
                growers: Vec::new(),
                points,
            };
            seen.insert(id);
        }
        self.history.retain(|id, _| seen.contains(id));
        if short {
            absent.push(format!(
                "time to full needs history: run serve (estimated after {} min of samples, kept in memory)",
                (t.fill_min_history_secs / 60.0).round()
            ));
        }
    }

    /// Which filesystems need attention (a walk, an fd scan): those the rules will judge at
    /// warning or worse; and, apart, those only growing (their history says they will cross
    /// a threshold within the clearing horizon): a walk names what grows, no fd scan.
    fn needing_attention(&self, disc: &Discovery, fs: &Filesystems) -> (Vec<String>, Vec<String>) {
        let settings = disc
            .kubelet
            .as_ref()
            .map(|k| k.0.clone())
            .unwrap_or_default();
        let thresholds = self.config.thresholds;
        let mut attention = Vec::new();
        let mut growing = Vec::new();
        for k in &fs.order {
            let Some(g) = fs.groups.get(k).filter(|_| !fs.stat_failed.contains(k)) else {
                if self.config.walk_when_healthy {
                    attention.push(k.clone());
                }
                continue;
            };
            let full = judge::assess_space(g, &settings, &thresholds)
                .severity
                .is_some()
                || judge::assess_inodes(g, &settings, &thresholds)
                    .severity
                    .is_some();
            if full || self.config.walk_when_healthy {
                attention.push(k.clone());
            } else if judge::growing(g, &settings, &thresholds) {
                attention.push(k.clone());
                growing.push(k.clone());
            }
        }
        (attention, growing)
    }

    /// The bounded walk of the data roots on the filesystems that need attention (resumed
    /// next cycle when the budget runs out).
    fn walk(&mut self, disc: &Discovery, attention: &[String], fs: &mut Filesystems, now: f64) {
        let live_roots: HashSet<PathBuf> = disc
            .dirs
            .iter()
            .filter(|d| matches!(d.0, Role::DockerData | Role::ContainerdRoot | Role::Kubelet))
            .map(|d| d.2.clone())
            .collect();
        let mut walked: HashSet<PathBuf> = HashSet::new();
        let walk_start = Instant::now();
        let deadline = walk_start + self.config.walk_budget;
        let mut remaining = self.config.walk_budget_entries;
        for key in attention {
            let Some(g) = fs.groups.get_mut(key) else {
                continue;
            };
            for (role, host_path, agent) in &disc.dirs {
                if !g
                    .roles
                    .iter()
                    .any(|r| r.role == *role && &r.host_path == host_path)
                    || !live_roots.contains(agent)
                {
                    continue;
                }
                walked.insert(agent.clone());
                let w = self
                    .walkers
                    .entry(agent.clone())
                    .or_insert_with(|| walk::Walker::new(agent.clone()));
                let at = Instant::now();
                if remaining > 0 && at < deadline {
                    let spent = w.advance(walk::Budget {
                        entries: remaining,
                        time: deadline - at,
                    });
                    remaining = remaining.saturating_sub(spent.entries);
                }
                if let Some(s) = w.sizes() {
                    g.dirs.push((*role, host_path.clone(), s));
                }
                let growth = self.growth.entry(agent.clone()).or_default();
                compare_walks(growth, w, now);
                g.trend
                    .growers
                    .extend(growth.growers.iter().map(|(item, bps, eps)| Grower {
                        path: format!("{}/{}", host_path.trim_end_matches('/'), item.key),
                        kind: item.kind,
                        pod_uid: pod_uid(&item.key),
                        bytes_per_second: *bps,
                        entries_per_second: *eps,
                        bytes: item.bytes,
                    }));
            }
            g.trend
                .growers
                .sort_by(|a, b| b.bytes_per_second.total_cmp(&a.bytes_per_second));
        }
        // A walk of a filesystem that is healthy again (or a root that is gone) is dropped
        // with its stack and open directory; it starts afresh if the disk fills again.
        self.walkers.retain(|root, _| walked.contains(root));
        self.growth.retain(|root, _| walked.contains(root));
        self.last_walk = walk::Spent {
            entries: self.config.walk_budget_entries - remaining,
            elapsed: walk_start.elapsed(),
        };
    }

    /// Deleted-but-open files on the filesystems that need attention.
    fn deleted_files(&self, attention: &[String], fs: &mut Filesystems, notes: &mut Vec<String>) {
        if attention.is_empty() {
            return;
        }
        let devs: HashSet<u64> = attention
            .iter()
            .filter_map(|k| fs.groups.get(k).map(|g| g.dev))
            .collect();
        match deleted::scan(&self.node, &devs) {
            Ok(scan) => {
                if scan.denied > 0 {
                    notes.push(format!(
                        "cannot read /proc/<pid>/fd of {} processes: deleted-but-open files need root (CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH)",
                        scan.denied
                    ));
                }
                for key in attention {
                    if let Some(g) = fs.groups.get_mut(key) {
                        g.deleted = scan
                            .files
                            .iter()
                            .filter(|f| f.dev == g.dev)
                            .cloned()
                            .collect();
                    }
                }
            }
            Err(e) => notes.push(format!("{e}; deleted-but-open files not scanned")),
        }
    }

    /// The sample, with the paths the findings print made the host's.
    fn assemble(
        &self,
        disc: Discovery,
        mut fs: Filesystems,
        mut overall: Vec<logs::LogFile>,
    ) -> DiskSample {
        let host = self.node.host();
        let host_side = |l: &mut logs::LogFile| {
            if let Some(p) = host.host_side(&l.path) {
                l.path = p;
            }
        };
        overall.iter_mut().for_each(host_side);
        let filesystems = fs
            .order
            .iter()
            .filter(|k| !fs.stat_failed.contains(*k))
            .filter_map(|k| fs.groups.remove(k))
            .map(|mut g| {
                g.logs.iter_mut().for_each(host_side);
                g
            })
            .collect();
        DiskSample {
            filesystems,
            kubelet: disc.kubelet,
            docker: disc
                .docker
                .map(|(config, daemon_json, data_root)| DockerSample {
                    config,
                    daemon_json,
                    data_root,
                }),
            largest_logs: overall,
            daemons: disc.daemons,
        }
    }

    /// Time to full of a filesystem: its history's span, and per resource (`space`,
    /// `inodes`) the fitted rate (once there is enough history) and the seconds to the first
    /// threshold it will cross (only while it fills).
    fn trend_metrics(
        g: &FsSample,
        settings: &config_kubelet::Settings,
        t: &Thresholds,
    ) -> Vec<Metric> {
        let mut out = vec![Metric::gauge(
            "node_doctor_disk_history_seconds",
            "Seconds of usage history the time-to-full fit can use (kept in memory: 0 after a restart).",
            g.trend.history_secs,
        )
        .label("mountpoint", g.mount_point.clone())];
        for (resource, fit) in [
            (trend::Resource::Space, g.trend.space),
            (trend::Resource::Inodes, g.trend.inodes),
        ] {
            let Some(fit) = fit else { continue };
            out.push(
                Metric::gauge(
                    "node_doctor_disk_fill_rate_per_second",
                    "Fitted use of a filesystem per second (bytes for space, inodes for inodes; negative: freeing), Theil-Sen over its history.",
                    fit.rate,
                )
                .label("mountpoint", g.mount_point.clone())
                .label("resource", resource.as_str()),
            );
            if let Some(eta) = judge::time_to_threshold(g, settings, t, resource) {
                out.push(
                    Metric::gauge(
                        "node_doctor_disk_seconds_to_threshold",
                        "Seconds until a filling filesystem crosses its first threshold (kubelet eviction, soft with its grace period, or node-doctor's used limit) at the fitted rate.",
                        eta.secs,
                    )
                    .label("mountpoint", g.mount_point.clone())
                    .label("resource", resource.as_str())
                    .label("signal", eta.target.signal.clone()),
                );
            }
        }
        out
    }

    /// The metrics of a sample: usage per filesystem and role, the walk's completeness, the
    /// largest logs of the node.
    fn sample_metrics(sample: &DiskSample, t: &Thresholds) -> Vec<Metric> {
        let mut metrics = Vec::new();
        let settings = sample
            .kubelet
            .as_ref()
            .map(|k| k.0.clone())
            .unwrap_or_default();
        for g in &sample.filesystems {
            metrics.extend(Self::trend_metrics(g, &settings, t));
            let mut roles: Vec<Role> = g.roles.iter().map(|r| r.role).collect();
            roles.sort();
            roles.dedup();
            for role in roles {
                let u = &g.usage;
                for (name, help, v) in [
                    ("node_doctor_disk_size_bytes", "Filesystem size in bytes (node_filesystem_size_bytes).", u.size_bytes),
                    ("node_doctor_disk_avail_bytes", "Filesystem space available to non-root users in bytes (node_filesystem_avail_bytes).", u.avail_bytes),
                    ("node_doctor_disk_free_bytes", "Filesystem free space in bytes, including root's reserve (node_filesystem_free_bytes).", u.free_bytes),
                    ("node_doctor_disk_files", "Filesystem total inodes (node_filesystem_files).", u.files),
                    ("node_doctor_disk_files_free", "Filesystem free inodes (node_filesystem_files_free).", u.files_free),
                ] {
                    metrics.push(
                        Metric::gauge(name, help, v as f64)
                            .label("mountpoint", g.mount_point.clone())
                            .label("device", g.device.clone())
                            .label("fstype", g.fstype.clone())
                            .label("role", role.as_str()),
                    );
                }
            }
            for (role, _, s) in &g.dirs {
                metrics.push(
                    Metric::gauge(
                        "node_doctor_disk_walk_complete_ratio",
                        "How complete the reported directory sizes of a role's root are (1 = from a full walk).",
                        s.complete_ratio,
                    )
                    .label("role", role.as_str()),
                );
            }
        }
        for l in &sample.largest_logs {
            metrics.push(
                Metric::gauge(
                    "node_doctor_disk_largest_log_bytes",
                    "Size in bytes of the largest container log files.",
                    l.size_bytes as f64,
                )
                .label("path", l.path.to_string_lossy().into_owned())
                .label("namespace", l.namespace.clone().unwrap_or_default())
                .label("pod", l.pod.clone().unwrap_or_default())
                .label("container", l.container.clone().unwrap_or_default()),
            );
        }

        metrics
    }
}

/// The walk's growth: when `w` has completed a pass since the last look, what grew between
/// it and the pass before (the fastest [`MAX_GROWERS`], by bytes then entries per second).
fn compare_walks(growth: &mut RootGrowth, w: &walk::Walker, now: f64) {
    if w.passes == growth.passes {
        return;
    }
    let items: HashMap<String, (u64, u64)> = w
        .items()
        .iter()
        .map(|i| (i.key.clone(), (i.bytes, i.entries)))
        .collect();
    let dt = now - growth.at;
    if growth.passes > 0 && dt > 0.0 {
        let mut grew: Vec<(walk::ItemSize, f64, f64)> = w
            .items()
            .iter()
            .filter_map(|i| {
                let (b0, e0) = growth.items.get(&i.key).copied().unwrap_or((0, 0));
                let db = i.bytes as f64 - b0 as f64;
                let de = i.entries as f64 - e0 as f64;
                (db > 0.0 || de > 0.0).then(|| (i.clone(), db / dt, de / dt))
            })
            .collect();
        grew.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        grew.truncate(MAX_GROWERS);
        growth.growers = grew;
    }
    growth.passes = w.passes;
    growth.at = now;
    growth.items = items;
}

/// The pod uid of an item under the kubelet's `pods/<uid>`, when it is a valid one.
/// The pod uid of a CRI log path (`…/pods/<namespace>_<pod>_<uid>/<container>/0.log`).
fn pod_log_uid(path: &Path) -> Option<String> {
    let dir = path.parent()?.parent()?.file_name()?.to_str()?;
    crate::pods::parse_pod_log_dir(dir).map(|p| p.uid)
}

fn pod_uid(key: &str) -> Option<String> {
    let mut parts = key.split('/');
    (parts.next() == Some("pods"))
        .then(|| parts.next())
        .flatten()
        .filter(|u| crate::names::is_pod_uid(u))
        .map(str::to_string)
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for DiskCollector {
    const NAME: &'static str = "disk";
    type Sample = DiskSample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(DiskSample, Status), Status> {
        self.read_host()
    }

    fn judge(&mut self, sample: &DiskSample) -> Vec<Draft> {
        let drafts = judge::judge(sample, &self.config.thresholds);
        // The filling rules' own hysteresis: what was raised this run.
        for ((mount_point, _), h) in self.history.iter_mut() {
            let raised = |id: &str| {
                drafts
                    .iter()
                    .any(|d| d.id == id && d.subject == *mount_point)
            };
            h.raised_space = raised("disk.filling_up");
            h.raised_inodes = raised("disk.inodes_filling_up");
        }
        drafts
    }

    fn metrics(&self, sample: &DiskSample) -> Vec<Metric> {
        Self::sample_metrics(sample, &self.config.thresholds)
    }

    fn figures(&self, sample: &DiskSample) -> Vec<Figure> {
        let settings = sample
            .kubelet
            .as_ref()
            .map(|k| k.0.clone())
            .unwrap_or_default();
        let t = &self.config.thresholds;
        let mut out = Vec::new();
        for g in &sample.filesystems {
            out.extend(fs_figure(g, &settings, t, trend::Resource::Space));
            // Inodes only while they fill towards a threshold: most filesystems never do.
            if judge::time_to_threshold(g, &settings, t, trend::Resource::Inodes).is_some() {
                out.extend(fs_figure(g, &settings, t, trend::Resource::Inodes));
            }
        }
        out
    }
}

/// A filesystem's history of one resource as a figure: its points, the judge's fitted line
/// (anchored at the latest reading, as the estimate is), the threshold it would cross first,
/// and where the line crosses it while it fills. `None` with fewer than two points.
fn fs_figure(
    g: &FsSample,
    settings: &config_kubelet::Settings,
    t: &Thresholds,
    resource: trend::Resource,
) -> Option<Figure> {
    let points = &g.trend.points;
    if points.len() < 2 {
        return None;
    }
    let (kind, unit, fit) = match resource {
        trend::Resource::Space => (kinds::DISK_SPACE, Unit::Bytes, g.trend.space),
        trend::Resource::Inodes => (kinds::DISK_INODES, Unit::Count, g.trend.inodes),
    };
    let eta = judge::time_to_threshold(g, settings, t, resource);
    let target = match &eta {
        Some(e) => Some(e.target.clone()),
        // Not filling: the threshold a falling line would meet first.
        None => judge::targets(g, settings, t, resource)
            .into_iter()
            .max_by(|a, b| a.min_free.total_cmp(&b.min_free)),
    };
    Some(Figure {
        kind,
        subject: g.mount_point.clone(),
        unit,
        points: points
            .iter()
            .map(|p| {
                let v = match resource {
                    trend::Resource::Space => p.avail_bytes,
                    trend::Resource::Inodes => p.files_free,
                };
                (p.t, v)
            })
            .collect(),
        fit: fit.map(|f| Line {
            t: f.t_now,
            value: f.free_now,
            slope: -f.rate,
        }),
        threshold: target.map(|t| (t.min_free, t.threshold)),
        crossing: eta.map(|e| e.fit.t_now + (e.fit.free_now - e.target.min_free) / e.fit.rate),
    })
}
