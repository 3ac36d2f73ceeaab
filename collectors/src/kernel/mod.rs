//! Collector `kernel`: what the kernel log and a few kernel counters say about pods dying or
//! hanging on this node.
//!
//! - OOM kills from `/dev/kmsg`, told apart as system OOM (the node ran out) and cgroup OOM (a
//!   container hit its limit), attributed to pods through the logged memory cgroup;
//! - memory limits in the kubepods cgroup tree too small to run anything (`1024m` for `1024Mi`);
//! - hung tasks, with the cheap signals that say whether the IO or the disk-full path applies
//!   (`procs_blocked`, `statvfs` of the runtime and kubelet directories);
//! - filesystem errors (ext4 errors, read-only remounts, XFS shutdowns, buffer I/O errors),
//!   placed through the host's mountinfo and checked against the runtime/kubelet directories;
//! - the kernel's own failures: oopses (and a panic a node survived), soft and hard lockups,
//!   RCU stalls; network devices that cannot be freed (`unregister_netdevice`); ext4 warnings;
//! - listen-queue drops from `<root>/proc/1/net/netstat` deltas, with the SYN backlog sysctls;
//! - PID exhaustion: tasks against `kernel.pid_max` and `kernel.threads-max`.
//!
//! Handbook: the CrashLoopBackOff, exit-code, ContainerCreating, health-check and Terminating
//! pages of `002_af370464fa0f13dd.txt` (the words and section titles are in
//! `collectors/rules/kernel.toml`).
//!
//! The shape of every collector: `KernelCollector::sample` reads the host into a typed
//! [`KernelSample`] (the model, in [`sample`]); [`judge::judge`] turns it into drafts under
//! [`KernelConfig::thresholds`] (the limits, in [`thresholds`]); `collect` renders them in
//! the rule file's words ([`CollectContext::render`]) and adds the metrics of the sample.

pub mod crash;
pub mod fs_error;
pub mod hung_task;
pub mod judge;
pub mod memcg;
pub mod netdev;
pub mod oom;
pub mod sample;
pub mod tasks;
pub mod thresholds;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::host::HostPaths;
use crate::kmsg::decay;
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::discover::{self, Locations};
use crate::node::Node;
use crate::pods::{PodDirectory, PodsConfig};
use crate::proc::cgroup::{self, PodRef};
use crate::proc::{meminfo, mountinfo, netstat};
use crate::rules::Draft;
use crate::sys::statvfs::{self, FsUsage, StatFsFn};

pub use sample::{
    Ext4WarningGroup, FsErrorGroup, HungGroup, KernelSample, ListenDelta, NetdevGroup, NodeMemory,
    OomGroup, OopsGroup, PidUsage, RoleFs, StallGroup, TinyPod,
};
pub use thresholds::Thresholds;

/// Longest task name kept from a log line (the kernel's comm is 16 bytes).
const MAX_COMM_BYTES: usize = 64;

/// Settings of the kernel collector.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelConfig {
    pub thresholds: Thresholds,
    /// The kernel-log reader; its lookback is also the window in which OOM kills, hung tasks
    /// and filesystem errors stay findings.
    pub kmsg: KmsgConfig,
    /// At most this many groups (pods, task names, devices) are remembered per kind.
    pub max_groups: usize,
    /// Bounds of the kubepods cgroup walk: directories visited...
    pub cgroup_walk_max_groups: usize,
    /// ...and depth below `kubepods` (pod = 2, container = 3).
    pub cgroup_walk_max_depth: usize,
    /// Where the runtime/kubelet directory discovery looks (the same as the disk collector's).
    pub runtime: Locations,
    /// Where pod UIDs and container ids are resolved to namespace/name (best effort).
    pub pods: PodsConfig,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            thresholds: Thresholds::default(),
            kmsg: KmsgConfig::default(),
            max_groups: 256,
            cgroup_walk_max_groups: 20_000,
            cgroup_walk_max_depth: 4,
            runtime: Locations::default(),
            pods: PodsConfig::default(),
        }
    }
}

/// Kills of one group within the window.
#[derive(Debug, Clone)]
struct OomStat {
    pod: Option<PodRef>,
    task_memcg: Option<String>,
    oom_memcg: Option<String>,
    kills: u64,
    /// Processes killed, memory.oom.group members included.
    processes: u64,
    /// Kills whose report the kernel suppressed, tied here by their task name.
    unreported: u64,
    /// No line says where these kills ran.
    report_missing: bool,
    last_pid: u32,
    last_comm: String,
    last_usec: u64,
    limit_bytes: Option<u64>,
    usage_bytes: Option<u64>,
}

#[derive(Debug, Clone)]
struct HungStat {
    last_pid: u32,
    /// The most recent reported pids (at most [`HUNG_PIDS_KEPT`]), checked for D state now.
    pids: Vec<u32>,
    reports: u64,
    max_blocked_seconds: u64,
    last_usec: u64,
    /// The pid in D state at the last sample (kept past the window while it is).
    blocked_now: Option<u32>,
    /// Whether the last sample could tell (every pid read, or one found in D state).
    live_known: bool,
}

#[derive(Debug, Clone)]
struct FsStat {
    kinds: BTreeSet<fs_error::FsErrorKind>,
    errors: u64,
    last_usec: u64,
    /// The filesystem refused writes at the last sample (kept past the window while it does).
    stops_writes_now: bool,
}

/// Oopses of one task name within the window.
#[derive(Debug, Clone)]
struct OopsStat {
    oopses: u64,
    kinds: BTreeSet<crash::OopsKind>,
    last: crash::Oops,
    panic: Option<String>,
}

/// Lockups and RCU stalls of one CPU within the window.
#[derive(Debug, Clone)]
struct StallStat {
    kinds: BTreeSet<crash::StallKind>,
    reports: u64,
    max_stuck_seconds: Option<u64>,
    last: crash::Stall,
}

/// `unregister_netdevice` waits of one device; `times`: the latest few, to count the recent.
#[derive(Debug, Clone, Default)]
struct NetdevStat {
    waits: u64,
    usage_count: Option<u64>,
    times: Vec<u64>,
    last_usec: u64,
}

/// Times kept per device for the frequency of `unregister_netdevice` waits.
const NETDEV_TIMES_KEPT: usize = 16;

/// ext4 warnings of one device.
#[derive(Debug, Clone, Default)]
struct Ext4WarnStat {
    warnings: u64,
    last_function: Option<String>,
    last_usec: u64,
}

/// Pids of one hung task name checked for D state.
const HUNG_PIDS_KEPT: usize = 8;

/// `EIO`: what a shut-down XFS answers to any access.
const EIO: i32 = 5;

/// Probes a mount point: its device number (`st_dev`), or the error.
type ProbeFn = dyn Fn(&Path) -> std::io::Result<u64> + Send;

/// Counters of kernel-log events seen since start (for `/metrics`).
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    oom_system: u64,
    oom_cgroup: u64,
    hung_task: u64,
    fs_error: u64,
    backlog_drop: u64,
    oops: u64,
    cpu_stall: u64,
    unregister_netdevice: u64,
    ext4_warning: u64,
}

/// The kernel collector. See the module documentation.
pub struct KernelCollector {
    node: Node,
    config: KernelConfig,
    kmsg: KmsgReader,
    statfs: Box<StatFsFn>,
    probe: Box<ProbeFn>,
    assembler: oom::Assembler,
    ooms: BTreeMap<(oom::OomKind, String), OomStat>,
    /// The group of the last kill, for the memory.oom.group members that follow it.
    last_oom: Option<(oom::OomKind, String)>,
    hung: BTreeMap<String, HungStat>,
    fs: BTreeMap<String, FsStat>,
    crash: crash::Assembler,
    /// Keyed by task name ("" when the oops named none).
    oopses: BTreeMap<String, OopsStat>,
    /// Keyed by CPU (`None`: the log named none).
    stalls: BTreeMap<Option<u32>, StallStat>,
    netdev: BTreeMap<String, NetdevStat>,
    ext4_warnings: BTreeMap<String, Ext4WarnStat>,
    totals: Totals,
    previous_netstat: Option<(Instant, netstat::ListenCounters)>,
    /// Pod UID -> namespace/name, container id -> name, from the node's on-disk metadata.
    pods: PodDirectory,
    /// Which daemons ran when the runtime directories were last looked up in this run
    /// (unknown unless a hung task or a filesystem error needed them).
    daemons: discover::Daemons,
}

impl KernelCollector {
    pub fn new(node: Node, config: KernelConfig) -> Self {
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        let pods = PodDirectory::new(node.host().clone(), config.pods.clone());
        KernelCollector {
            node,
            config,
            kmsg,
            statfs: Box::new(statvfs::usage),
            probe: Box::new(|p: &Path| {
                use std::os::unix::fs::MetadataExt;
                std::fs::symlink_metadata(p).map(|m| m.dev())
            }),
            assembler: oom::Assembler::default(),
            ooms: BTreeMap::new(),
            last_oom: None,
            hung: BTreeMap::new(),
            fs: BTreeMap::new(),
            crash: crash::Assembler::default(),
            oopses: BTreeMap::new(),
            stalls: BTreeMap::new(),
            netdev: BTreeMap::new(),
            ext4_warnings: BTreeMap::new(),
            totals: Totals::default(),
            previous_netstat: None,
            pods,
            daemons: discover::Daemons::default(),
        }
    }

    /// Replaces `statvfs` (tests on fake hosts).
    pub fn with_statfs(
        mut self,
        f: impl Fn(&Path) -> std::io::Result<FsUsage> + Send + 'static,
    ) -> Self {
        self.statfs = Box::new(f);
        self
    }

    /// Replaces the probe of a mount point (`lstat`, giving `st_dev`): tests stage a shut-down
    /// XFS (EIO) with it.
    pub fn with_mount_probe(
        mut self,
        f: impl Fn(&Path) -> std::io::Result<u64> + Send + 'static,
    ) -> Self {
        self.probe = Box::new(f);
        self
    }

    /// Groups remembered (OOM, hung-task, filesystem), for checking that state stays bounded.
    pub fn state_sizes(&self) -> (usize, usize, usize) {
        (self.ooms.len(), self.hung.len(), self.fs.len())
    }

    /// Reads new kernel log records into the event groups; returns the reader's status.
    fn read_kernel_log(&mut self) -> Status {
        let batch = self.kmsg.read_new();
        for record in &batch.records {
            let msg = record.message.as_str();
            for event in self.assembler.feed(record) {
                match event {
                    oom::OomEvent::Kill(kill) => self.note_oom(kill),
                    oom::OomEvent::Member { .. } => self.note_oom_member(),
                }
            }
            if let Some(h) = hung_task::parse(msg) {
                self.note_hung(h, record.usec);
            }
            if let Some(e) = fs_error::parse(msg) {
                self.note_fs(e, record.usec);
            }
            for event in self.crash.feed(msg, record.usec) {
                self.note_crash(event);
            }
            if let Some(w) = netdev::parse(msg) {
                self.note_netdev(w, record.usec);
            }
            if let Some(w) = fs_error::parse_ext4_warning(msg) {
                self.note_ext4_warning(w, record.usec);
            }
        }
        // At the end of what the kernel holds, the last kill is final, and so is a decision
        // line without its victim line (kernels before 5.0 print them back to back).
        if !batch.truncated_by_budget {
            for kill in self.assembler.flush() {
                self.note_oom(kill);
            }
            for event in self.crash.flush() {
                self.note_crash(event);
            }
        }
        batch.status
    }

    fn note_oom(&mut self, kill: oom::OomKill) {
        let pod = kill
            .task_memcg
            .as_deref()
            .and_then(cgroup::pod_from_path)
            .or_else(|| kill.oom_memcg.as_deref().and_then(cgroup::pod_from_path));
        match kill.kind {
            oom::OomKind::System => self.totals.oom_system += 1,
            oom::OomKind::Cgroup => self.totals.oom_cgroup += 1,
        }
        let comm = crate::bounded::prefix_owned(&kill.comm, MAX_COMM_BYTES);
        let missing = kill.report == oom::Report::Missing;
        let key = match (&pod, kill.kind) {
            (Some(p), _) => p.uid.clone(),
            // System OOM victims outside pods: one group per task name.
            (None, oom::OomKind::System) => format!("comm:{comm}"),
            (None, oom::OomKind::Cgroup) => kill
                .oom_memcg
                .clone()
                .or_else(|| kill.task_memcg.clone())
                .unwrap_or_else(|| format!("comm:{comm}")),
        };
        let key = (kill.kind, crate::bounded::prefix_owned(&key, 512));
        self.last_oom = Some(key.clone());
        let stat = self
            .ooms
            .entry(key)
            .or_insert_with(|| {
                // Logged once per group in the window, not per kill: OOM storms stay quiet.
                tracing::info!(kind = kill.kind.as_str(), pid = kill.pid, comm = comm.as_str(), memcg = ?kill.task_memcg, "kernel OOM killer killed a process");
                OomStat {
                pod: None,
                task_memcg: None,
                oom_memcg: None,
                kills: 0,
                processes: 0,
                unreported: 0,
                report_missing: false,
                last_pid: 0,
                last_comm: String::new(),
                last_usec: 0,
                limit_bytes: None,
                usage_bytes: None,
            }
            });
        stat.kills += 1;
        stat.processes += 1;
        if kill.report == oom::Report::SameTaskRecently {
            stat.unreported += 1;
        }
        stat.report_missing |= missing;
        if kill.usec >= stat.last_usec {
            stat.last_usec = kill.usec;
            stat.last_pid = kill.pid;
            stat.last_comm = comm;
            stat.pod = pod;
            stat.task_memcg = kill
                .task_memcg
                .map(|s| crate::bounded::prefix_owned(&s, 512));
            stat.oom_memcg = kill
                .oom_memcg
                .map(|s| crate::bounded::prefix_owned(&s, 512));
            stat.limit_bytes = kill.limit_bytes.or(stat.limit_bytes);
            stat.usage_bytes = kill.usage_bytes.or(stat.usage_bytes);
        }
    }

    /// Another process of the last kill (memory.oom.group): the same kill, one more process.
    fn note_oom_member(&mut self) {
        if let Some(stat) = self.last_oom.as_ref().and_then(|k| self.ooms.get_mut(k)) {
            stat.processes += 1;
        }
    }

    fn note_hung(&mut self, h: hung_task::HungTask, usec: u64) {
        self.totals.hung_task += 1;
        let comm = crate::bounded::prefix_owned(&h.comm, MAX_COMM_BYTES);
        let stat = self.hung.entry(comm).or_insert_with_key(|comm| {
            tracing::info!(
                comm = comm.as_str(),
                pid = h.pid,
                blocked_seconds = h.blocked_seconds,
                "kernel reported a hung task"
            );
            HungStat {
                last_pid: h.pid,
                pids: Vec::new(),
                reports: 0,
                max_blocked_seconds: 0,
                last_usec: usec,
                blocked_now: None,
                live_known: false,
            }
        });
        stat.reports += 1;
        stat.max_blocked_seconds = stat.max_blocked_seconds.max(h.blocked_seconds);
        stat.pids.retain(|p| *p != h.pid);
        if stat.pids.len() == HUNG_PIDS_KEPT {
            stat.pids.remove(0);
        }
        stat.pids.push(h.pid);
        if usec >= stat.last_usec {
            stat.last_usec = usec;
            stat.last_pid = h.pid;
        }
    }

    fn note_fs(&mut self, e: fs_error::FsError, usec: u64) {
        self.totals.fs_error += 1;
        let stat = self.fs.entry(e.device).or_insert_with_key(|dev| {
            tracing::warn!(
                device = dev.as_str(),
                kind = e.kind.as_str(),
                "kernel reported a filesystem error"
            );
            FsStat {
                kinds: BTreeSet::new(),
                errors: 0,
                last_usec: usec,
                stops_writes_now: false,
            }
        });
        stat.kinds.insert(e.kind);
        stat.errors += 1;
        stat.last_usec = stat.last_usec.max(usec);
    }

    fn note_crash(&mut self, event: crash::Event) {
        match event {
            crash::Event::Oops(o) => {
                self.totals.oops += 1;
                let key = o.comm.clone().unwrap_or_default();
                let stat = self.oopses.entry(key).or_insert_with(|| {
                    tracing::warn!(kind = o.kind.as_str(), pid = ?o.pid, comm = ?o.comm, cpu = ?o.cpu, panic = ?o.panic, "kernel oopsed");
                    OopsStat {
                        oopses: 0,
                        kinds: BTreeSet::new(),
                        last: o.clone(),
                        panic: None,
                    }
                });
                stat.oopses += 1;
                stat.kinds.insert(o.kind);
                if o.panic.is_some() {
                    stat.panic.clone_from(&o.panic);
                }
                if o.usec >= stat.last.usec {
                    stat.last = o;
                }
            }
            crash::Event::Stall(st) => {
                self.totals.cpu_stall += 1;
                let entry = self.stalls.entry(st.cpu).or_insert_with(|| {
                    tracing::warn!(kind = st.kind.as_str(), cpu = ?st.cpu, comm = ?st.comm, "kernel reported a stalled CPU");
                    StallStat {
                        kinds: BTreeSet::new(),
                        reports: 0,
                        max_stuck_seconds: None,
                        last: st.clone(),
                    }
                });
                entry.reports += 1;
                entry.kinds.insert(st.kind);
                entry.max_stuck_seconds = entry.max_stuck_seconds.max(st.stuck_seconds);
                if st.usec >= entry.last.usec {
                    entry.last = st;
                }
            }
        }
    }

    fn note_netdev(&mut self, w: netdev::Wait, usec: u64) {
        self.totals.unregister_netdevice += 1;
        let stat = self.netdev.entry(w.device).or_insert_with_key(|dev| {
            tracing::warn!(
                device = dev.as_str(),
                "kernel is waiting for a network device to become free"
            );
            NetdevStat::default()
        });
        stat.waits += 1;
        stat.usage_count = w.usage_count.or(stat.usage_count);
        if stat.times.len() == NETDEV_TIMES_KEPT {
            stat.times.remove(0);
        }
        stat.times.push(usec);
        stat.last_usec = stat.last_usec.max(usec);
    }

    fn note_ext4_warning(&mut self, w: fs_error::Ext4Warning, usec: u64) {
        self.totals.ext4_warning += 1;
        let stat = self.ext4_warnings.entry(w.device).or_default();
        stat.warnings += 1;
        if usec >= stat.last_usec {
            stat.last_usec = usec;
            stat.last_function = w.function.or(stat.last_function.take());
        }
    }

    /// Oops, stall, netdev and ext4-warning groups as the judge sees them; the node-wide
    /// count of recent `unregister_netdevice` waits.
    fn crash_groups(
        &self,
    ) -> (
        Vec<OopsGroup>,
        Vec<StallGroup>,
        Vec<NetdevGroup>,
        u64,
        Vec<Ext4WarningGroup>,
    ) {
        let oopses = self
            .oopses
            .iter()
            .map(|(comm, s)| OopsGroup {
                comm: (!comm.is_empty()).then(|| comm.clone()),
                oopses: s.oopses,
                kinds: s.kinds.iter().copied().collect(),
                last_kind: s.last.kind,
                last_pid: s.last.pid,
                last_cpu: s.last.cpu,
                process_context: s.last.process_context(),
                panic: s.panic.clone(),
                last_seen_seconds_ago: self.age(s.last.usec),
            })
            .collect();
        let stalls = self
            .stalls
            .iter()
            .map(|(cpu, s)| StallGroup {
                cpu: *cpu,
                kinds: s.kinds.iter().copied().collect(),
                reports: s.reports,
                max_stuck_seconds: s.max_stuck_seconds,
                last_comm: s.last.comm.clone(),
                last_pid: s.last.pid,
                rcu_flavor: s.last.rcu_flavor.clone(),
                last_seen_seconds_ago: self.age(s.last.usec),
            })
            .collect();
        let netdev = self
            .netdev
            .iter()
            .map(|(dev, s)| NetdevGroup {
                device: dev.clone(),
                waits: s.waits,
                usage_count: s.usage_count,
                last_seen_seconds_ago: self.age(s.last_usec),
            })
            .collect();
        let frequent = self.config.thresholds.unregister_frequent_seconds;
        let recent = self
            .netdev
            .values()
            .flat_map(|s| s.times.iter())
            .filter(|&&t| decay::is_recent(self.age(t), frequent))
            .count() as u64;
        let ext4 = self
            .ext4_warnings
            .iter()
            .map(|(dev, s)| Ext4WarningGroup {
                device: dev.clone(),
                warnings: s.warnings,
                last_function: s.last_function.clone(),
                last_seen_seconds_ago: self.age(s.last_usec),
            })
            .collect();
        (oopses, stalls, netdev, recent, ext4)
    }

    /// Drops groups older than the window (except a hung task still blocked and a
    /// filesystem still refusing writes: still true now), then the stalest beyond the cap.
    fn prune(&mut self) {
        let window = self.config.kmsg.lookback;
        let cap = self.config.max_groups.max(1);
        if let Some(clock) = self.kmsg.clock() {
            self.ooms.retain(|_, s| clock.age(s.last_usec) <= window);
            self.hung
                .retain(|_, s| clock.age(s.last_usec) <= window || s.blocked_now.is_some());
            self.fs
                .retain(|_, s| clock.age(s.last_usec) <= window || s.stops_writes_now);
            self.oopses.retain(|_, s| clock.age(s.last.usec) <= window);
            self.stalls.retain(|_, s| clock.age(s.last.usec) <= window);
            self.netdev.retain(|_, s| clock.age(s.last_usec) <= window);
            self.ext4_warnings
                .retain(|_, s| clock.age(s.last_usec) <= window);
        }
        cap_map(&mut self.oopses, cap, |s| s.last.usec);
        cap_map(&mut self.stalls, cap, |s| s.last.usec);
        cap_map(&mut self.netdev, cap, |s| s.last_usec);
        cap_map(&mut self.ext4_warnings, cap, |s| s.last_usec);
        cap_map(&mut self.ooms, cap, |s| s.last_usec);
        cap_map(&mut self.hung, cap, |s| s.last_usec);
        cap_map(&mut self.fs, cap, |s| s.last_usec);
    }

    fn age(&self, usec: u64) -> Option<u64> {
        self.kmsg.clock().map(|c| c.age(usec).as_secs())
    }

    fn oom_groups(&self, scan: &memcg::Scan) -> Vec<OomGroup> {
        self.ooms
            .iter()
            .map(|((kind, _), s)| OomGroup {
                kind: *kind,
                names: self.pods.names(
                    s.pod.as_ref().map(|p| p.uid.as_str()),
                    s.pod.as_ref().and_then(|p| p.container_id.as_deref()),
                ),
                pod_uid: s.pod.as_ref().map(|p| p.uid.clone()),
                qos: s.pod.as_ref().map(|p| p.qos),
                container_id: s.pod.as_ref().and_then(|p| p.container_id.clone()),
                task_memcg: s.task_memcg.clone(),
                oom_memcg: s.oom_memcg.clone(),
                kills: s.kills,
                processes_killed: s.processes,
                unreported_kills: s.unreported,
                report_missing: s.report_missing,
                pod_present: s.pod.as_ref().and_then(|p| scan.pod_present(&p.uid)),
                last_pid: s.last_pid,
                last_comm: s.last_comm.clone(),
                last_seen_seconds_ago: self.age(s.last_usec),
                limit_bytes: s.limit_bytes,
                usage_bytes: s.usage_bytes,
            })
            .collect()
    }

    /// Checks, per hung task name, whether one of its reported pids is in D state now (same
    /// name: a reused pid is another task). A pid without `/proc/<pid>` has exited.
    fn refresh_hung(&mut self) {
        for (comm, s) in self.hung.iter_mut() {
            let mut known = true;
            s.blocked_now = None;
            for &pid in s.pids.iter().rev() {
                match crate::proc::pid::stat(self.node.host(), pid) {
                    Some(st) if st.state == 'D' && st.comm == *comm => {
                        s.blocked_now = Some(pid);
                        break;
                    }
                    Some(_) => {}
                    None if crate::proc::pid::exists(&self.node.host().proc_pid(pid)) => {
                        known = false
                    }
                    None => {}
                }
            }
            s.live_known = known || s.blocked_now.is_some();
        }
    }

    fn hung_groups(&self) -> Vec<HungGroup> {
        self.hung
            .iter()
            .map(|(comm, s)| HungGroup {
                comm: comm.clone(),
                last_pid: s.last_pid,
                reports: s.reports,
                max_blocked_seconds: s.max_blocked_seconds,
                last_seen_seconds_ago: self.age(s.last_usec),
                blocked_now: s.live_known.then_some(s.blocked_now.is_some()),
                blocked_now_pid: s.blocked_now,
            })
            .collect()
    }

    /// Filesystem error groups placed on the host's mounts and the runtime/kubelet dirs, with
    /// what the filesystem shows now: read-only, shut down (XFS), unrepaired errors (ext4).
    fn fs_groups(
        &mut self,
        mounts: &[mountinfo::Mount],
        dirs: &[(&'static str, String)],
    ) -> Vec<FsErrorGroup> {
        let mut out = Vec::new();
        for (dev, s) in self.fs.iter_mut() {
            let mount = mount_of_device(self.node.host(), mounts, dev);
            let roles = match mount {
                Some(m) => dirs
                    .iter()
                    .filter(|(_, p)| {
                        mountinfo::containing(mounts, Path::new(p))
                            .is_some_and(|c| (c.major, c.minor) == (m.major, m.minor))
                    })
                    .cloned()
                    .collect(),
                None => Vec::new(),
            };
            let read_only_now = mount.map(read_only);
            let is_xfs = mount.is_some_and(|m| m.fstype == "xfs");
            let shut_down_now = mount
                .filter(|_| is_xfs)
                .and_then(|m| shut_down(self.node.host(), &*self.probe, m));
            let errors_count_now = mount
                .filter(|m| m.fstype == "ext4")
                .and_then(|_| ext4_errors_count(self.node.host(), dev));
            s.stops_writes_now = read_only_now == Some(true) || shut_down_now == Some(true);
            out.push(FsErrorGroup {
                device: dev.clone(),
                kinds: s.kinds.iter().copied().collect(),
                errors: s.errors,
                last_seen_seconds_ago: self.kmsg.clock().map(|c| c.age(s.last_usec).as_secs()),
                mount_point: mount.map(|m| m.mount_point.to_string_lossy().into_owned()),
                fstype: mount.map(|m| m.fstype.clone()),
                read_only_now,
                shut_down_now,
                errors_count_now,
                roles,
            });
        }
        out
    }

    /// Listen-queue counter deltas since the previous call (none at the first). The SYN
    /// backlog sysctls come with them only when they are the host's (`host_netns`).
    fn listen_delta(&mut self, status: &mut Status, host_netns: HostNetns) -> Option<ListenDelta> {
        let path = netstat::path(self.node.host(), 1);
        let counters = match netstat::read(&path) {
            Ok(n) => netstat::listen_counters(&n)?,
            Err(e) => {
                *status = std::mem::replace(status, Status::Ok).worst(Status::Degraded(format!(
                    "{e}; listen drops are not judged"
                )));
                return None;
            }
        };
        let now = Instant::now();
        let (then, prev) = self.previous_netstat.replace((now, counters))?;
        let d = |a: Option<u64>, b: Option<u64>| match (a, b) {
            // A counter that went down (namespace recreated, wrap) counts as no increase.
            (Some(a), Some(b)) => a.saturating_sub(b),
            _ => 0,
        };
        let delta = ListenDelta {
            listen_drops: d(counters.listen_drops, prev.listen_drops),
            listen_overflows: d(counters.listen_overflows, prev.listen_overflows),
            backlog_drop: d(counters.backlog_drop, prev.backlog_drop),
            interval_seconds: now.duration_since(then).as_secs_f64(),
            somaxconn: tasks::net_sysctl(self.node.host(), host_netns, "net/core/somaxconn"),
            tcp_max_syn_backlog: tasks::net_sysctl(
                self.node.host(),
                host_netns,
                "net/ipv4/tcp_max_syn_backlog",
            ),
        };
        self.totals.backlog_drop = self.totals.backlog_drop.saturating_add(delta.total());
        Some(delta)
    }

    /// The metrics of a sample, plus the event counters and the kernel-log reader's.
    fn sample_metrics(&self, sample: &KernelSample) -> Vec<Metric> {
        let t = self.totals;
        let mut out: Vec<Metric> = [
            ("oom_system", t.oom_system),
            ("oom_cgroup", t.oom_cgroup),
            ("hung_task", t.hung_task),
            ("fs_error", t.fs_error),
            ("backlog_drop", t.backlog_drop),
            ("oops", t.oops),
            ("cpu_stall", t.cpu_stall),
            ("unregister_netdevice", t.unregister_netdevice),
            ("ext4_warning", t.ext4_warning),
        ]
        .into_iter()
        .map(|(kind, v)| {
            Metric::counter(
                "node_doctor_kernel_events_total",
                "Kernel events seen by this agent since start (kernel-log OOM kills, hung tasks, filesystem errors, oopses, CPU stalls, unregister_netdevice waits and ext4 warnings, including the start-up lookback; backlog_drop: host listen-queue drops counted between samples).",
                v as f64,
            )
            .label("kind", kind)
        })
        .collect();
        if let Some(p) = &sample.pids {
            out.push(Metric::gauge(
                "node_doctor_kernel_pids",
                "Tasks (processes and threads) on the node, from /proc/loadavg.",
                p.tasks as f64,
            ));
            if let Some(v) = p.pid_max {
                out.push(Metric::gauge(
                    "node_doctor_kernel_pid_max",
                    "kernel.pid_max.",
                    v as f64,
                ));
            }
            if let Some(v) = p.threads_max {
                out.push(Metric::gauge(
                    "node_doctor_kernel_threads_max",
                    "kernel.threads-max.",
                    v as f64,
                ));
            }
        }
        out.extend(self.kmsg.metrics("kernel"));
        out
    }
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for KernelCollector {
    const NAME: &'static str = "kernel";
    type Sample = KernelSample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(KernelSample, Status), Status> {
        Ok(self.read_host(ctx.host_netns))
    }

    /// The rules, with the advice that depends on which daemons run now.
    fn judge(&mut self, sample: &KernelSample) -> Vec<Draft> {
        let drafts = judge::judge(sample, &self.config.thresholds);
        judge::daemon_advice(drafts, &self.daemons)
    }

    fn metrics(&self, sample: &KernelSample) -> Vec<Metric> {
        self.sample_metrics(sample)
    }
}

impl KernelCollector {
    /// Reads everything the rules look at: new kernel-log records into the event groups, the
    /// kubepods limits, and the counters and files the events are judged against. The status
    /// says what could not be read.
    fn read_host(&mut self, host_netns: HostNetns) -> (KernelSample, Status) {
        let mut status = self.read_kernel_log();
        let host = self.node.host().clone();

        // Tiny limits (and the pods on the node): a bounded walk of the kubepods tree.
        let th = self.config.thresholds.tiny_limit_bytes;
        let scan = memcg::scan(
            &host,
            th,
            self.config.cgroup_walk_max_groups,
            self.config.cgroup_walk_max_depth,
        );
        if scan.truncated {
            status = status.worst(Status::Degraded(format!(
                "the kubepods cgroup walk stopped after {} groups; raise the bound to check every limit",
                scan.groups
            )));
        }
        // Names for the pods the findings point at (re-read at most once a minute).
        if !scan.tiny.is_empty() || self.ooms.values().any(|s| s.pod.is_some()) {
            self.pods.refresh_if_stale(Instant::now());
        }
        let tiny = group_tiny(&host, &self.pods, scan.tiny.clone());

        // What is still true now of the hung tasks and filesystem errors in the log.
        self.refresh_hung();
        let mut role_fs = Vec::new();
        let mut fs_errors = Vec::new();
        self.daemons = discover::Daemons::default();
        if !self.hung.is_empty() || !self.fs.is_empty() {
            // Runtime/kubelet directories: only when a hung task or a filesystem error needs them.
            let disc = discover::discover(&self.node, &self.config.runtime, "kernel/discover");
            self.daemons = disc.daemons;
            let dirs: Vec<(&'static str, String)> = disc
                .dirs
                .iter()
                .map(|(r, h, _)| (r.as_str(), h.clone()))
                .collect();
            if !self.hung.is_empty() {
                for (role, host_path, agent) in &disc.dirs {
                    if let Ok(u) = (self.statfs)(agent) {
                        role_fs.push(RoleFs {
                            role: role.as_str(),
                            host_path: host_path.clone(),
                            used_percent: u.used_percent(),
                            avail_bytes: u.avail_bytes,
                        });
                    }
                }
            }
            if !self.fs.is_empty() {
                let mounts = match self.node.mounts() {
                    Ok(m) => m,
                    Err(e) => {
                        status = status.worst(Status::Degraded(format!(
                            "{e}; failing devices are not placed on mount points"
                        )));
                        Default::default()
                    }
                };
                fs_errors = self.fs_groups(&mounts, &dirs);
            }
        }
        // Events past the window are dropped now, unless still true.
        self.prune();
        fs_errors.retain(|g| self.fs.contains_key(&g.device));

        let mem = unless_broken(
            meminfo::read(&host),
            &mut status,
            "node memory is not sized",
        );
        let kubepods = memcg::kubepods_limit(&host);
        if let Some(reason) = net_sysctls_reason(host_netns) {
            status = status.worst(Status::Degraded(reason.to_string()));
        }
        let listen = self.listen_delta(&mut status, host_netns);
        let pids =
            unless_broken(tasks::tasks(&host), &mut status, "PID use is not judged").map(|t| {
                PidUsage {
                    tasks: t,
                    pid_max: tasks::sysctl(&host, tasks::PID_MAX),
                    threads_max: tasks::sysctl(&host, tasks::THREADS_MAX),
                }
            });
        let procs_blocked = unless_broken(
            tasks::procs_blocked(&host),
            &mut status,
            "blocked tasks are not counted",
        )
        .flatten();

        let (oopses, stalls, netdev, netdev_waits_recent, ext4_warnings) = self.crash_groups();
        let sample = KernelSample {
            oom: self.oom_groups(&scan),
            node_memory: NodeMemory {
                mem_total_bytes: mem.as_ref().and_then(|m| m.mem_total_bytes()),
                mem_available_bytes: mem.as_ref().and_then(|m| m.mem_available_bytes()),
                kubepods_limit_bytes: kubepods.as_ref().map(|k| k.0),
                kubepods_limit_file: kubepods
                    .as_ref()
                    .and_then(|k| host.host_side(&k.1))
                    .map(|p| p.to_string_lossy().into_owned()),
            },
            tiny,
            hung: self.hung_groups(),
            procs_blocked,
            role_fs,
            fs_errors,
            listen,
            pids,
            oopses,
            stalls,
            netdev,
            netdev_waits_recent,
            ext4_warnings,
            window_seconds: self.config.kmsg.lookback.as_secs(),
        };
        (sample, status)
    }
}

/// The value of a best-effort read, or `None`. A file that is absent stays quiet, as before
/// (a fake root or an old kernel without it); one that is there but refused (a FIFO, over its
/// cap) or garbage degrades the status with the reason and what is left unjudged.
fn unless_broken<T>(
    r: Result<T, crate::ReadError>,
    status: &mut Status,
    unjudged: &str,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            *status = std::mem::replace(status, Status::Ok)
                .worst(Status::Degraded(format!("{e}; {unjudged}")));
            None
        }
    }
}

/// Why the per-network-namespace sysctls (`somaxconn`, `tcp_max_syn_backlog`) are not the
/// host's, when they are not: a `degraded` reason, the same on every run.
pub fn net_sysctls_reason(host_netns: HostNetns) -> Option<&'static str> {
    match host_netns {
        HostNetns::Same | HostNetns::NotProcfs => None,
        HostNetns::Different => Some(
            "somaxconn/tcp_max_syn_backlog are node-doctor's own network namespace's, not the host's: \
             run with hostNetwork: true; listen drops are still the host's (/proc/1/net/netstat) but \
             are judged without these sysctls and without sysctl advice",
        ),
        HostNetns::Unknown => Some(
            "cannot tell whether node-doctor is in the host's network namespace (pid 1's ns/net link \
             and net/dev entry could not be compared with its own), so somaxconn/tcp_max_syn_backlog \
             are not reported as the host's: run with hostPID and CAP_SYS_PTRACE, and hostNetwork: true",
        ),
    }
}

/// Groups tiny limits by pod (a pod's own cgroup and its containers' make one finding).
fn group_tiny(host: &HostPaths, pods: &PodDirectory, tiny: Vec<memcg::TinyLimit>) -> Vec<TinyPod> {
    let mut by: BTreeMap<String, TinyPod> = BTreeMap::new();
    for t in tiny {
        let pod = cgroup::pod_from_path(&t.cgroup);
        let subject = pod
            .as_ref()
            .map(|p| p.uid.clone())
            .unwrap_or_else(|| t.cgroup.clone());
        let file = host
            .host_side(&t.file)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| t.file.to_string_lossy().into_owned());
        let entry = by.entry(subject.clone()).or_insert_with(|| TinyPod {
            subject,
            names: pods.names(pod.as_ref().map(|p| p.uid.as_str()), None),
            pod_uid: pod.as_ref().map(|p| p.uid.clone()),
            groups: Vec::new(),
        });
        entry.groups.push((
            t.cgroup,
            pod.and_then(|p| p.container_id),
            t.limit_bytes,
            file,
        ));
    }
    by.into_values().collect()
}

/// The mount of a kernel device name: by `major:minor` from `<root>/sys/class/block/<dev>/dev`,
/// else by the mount source `/dev/<dev>`.
fn mount_of_device<'m>(
    host: &HostPaths,
    mounts: &'m [mountinfo::Mount],
    dev: &str,
) -> Option<&'m mountinfo::Mount> {
    let numbers = crate::hostfs::read_text(
        &host.sys_file("class/block").join(dev).join("dev"),
        crate::hostfs::cap::VALUE,
    )
    .ok()
    .and_then(|t| {
        let (a, b) = t.trim().split_once(':')?;
        Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?))
    });
    // The first mount of the device (a later one is usually a bind mount of a subdirectory).
    if let Some((maj, min)) = numbers {
        if let Some(m) = mounts.iter().find(|m| (m.major, m.minor) == (maj, min)) {
            return Some(m);
        }
    }
    let source = format!("/dev/{dev}");
    mounts.iter().find(|m| m.source == source)
}

/// True when a mount refuses writes by its options: the mount's own `ro`, the superblock's
/// `ro` (an ext4 `errors=remount-ro` remount before 6.6 sets it there, leaving the mount
/// `rw`), or ext4's `emergency_ro` (6.6+ keeps `rw` in both and says this instead, as
/// 6.18 shows after `Remounting filesystem read-only`).
fn read_only(m: &mountinfo::Mount) -> bool {
    let has = |opts: &str, want: &str| opts.split(',').any(|o| o == want);
    has(&m.mount_options, "ro")
        || has(&m.super_options, "ro")
        || has(&m.super_options, "emergency_ro")
}

/// Whether a mounted XFS is shut down now: any access to it fails with EIO (6.18: `statfs`
/// still answers, `lstat` of the mount point does not). `None` when the agent does not see
/// that mount at its path (the probe answers for another device) or fails otherwise.
fn shut_down(host: &HostPaths, probe: &ProbeFn, m: &mountinfo::Mount) -> Option<bool> {
    match probe(&host.join(&m.mount_point)) {
        Ok(dev) => (dev == m.dev()).then_some(false),
        Err(e) if e.raw_os_error() == Some(EIO) => Some(true),
        Err(_) => None,
    }
}

/// `<root>/sys/fs/ext4/<dev>/errors_count`: errors recorded in the superblock since the last
/// fsck (0 once repaired).
fn ext4_errors_count(host: &HostPaths, dev: &str) -> Option<u64> {
    let path = host.sys_file("fs/ext4").join(dev).join("errors_count");
    crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Removes the entries with the smallest `key` until at most `cap` remain.
fn cap_map<K: Ord + Clone, V>(map: &mut BTreeMap<K, V>, cap: usize, key: impl Fn(&V) -> u64) {
    while map.len() > cap {
        let stalest = map
            .iter()
            .min_by_key(|(_, v)| key(v))
            .map(|(k, _)| k.clone());
        match stalest {
            Some(k) => {
                map.remove(&k);
            }
            None => break,
        }
    }
}
