//! The `hardware` collector: whether this node should be drained and its hardware replaced.
//!
//! It reads EDAC memory-controller counters (`/sys/devices/system/edac/mc`, [`edac`]), the
//! previous boots' crash records (`/sys/fs/pstore`, `/var/crash/*/vmcore-dmesg.txt`,
//! [`crash`]), poisoned pages (`HardwareCorrupted` in `/proc/meminfo`), the kernel log's
//! machine checks, CPER records, EDAC lines, NVMe resets and block I/O errors ([`lines`],
//! through the node's kernel-log hub), NVMe controller states (`/sys/class/nvme/*/state`),
//! software RAID (`/proc/mdstat`, [`mdstat`]; `/sys/block/md*/md/degraded`), bad-block lists
//! (`/sys/block/*/badblocks`) and the kernel's taint ([`taint`]).
//!
//! No handbook covers hardware faults: the rule file (`collectors/rules/hardware.toml`) cites
//! the kernel's documentation (RAS/EDAC, ramoops/kdump, hwpoison, md, tainted kernels) and
//! node-problem-detector's kernel monitor.

pub mod crash;
pub mod edac;
pub mod judge;
pub mod lines;
pub mod mdstat;
pub mod sample;
pub mod taint;
pub mod thresholds;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::collector::{CollectContext, Phases, Status};
use crate::hostfs;
use crate::kmsg::{KmsgConfig, KmsgReader, Record};
use crate::metric::Metric;
use crate::node::Node;
use crate::proc::{meminfo, mountinfo, uptime};
use crate::rules::Draft;

use lines::HwLine;
pub use sample::HardwareSample;
use sample::{ControllerState, DiskErrors, DiskMount, LogEvents, MemoryCounters};
pub use thresholds::Thresholds;

/// How long after `Machine check events logged` a CPU's bank line is the same event.
const MCE_HEADER_USEC: u64 = 2_000_000;

/// Kernel-log event groups remembered (subject x kind); the stalest go first.
const MAX_EVENT_GROUPS: usize = 256;
/// Counter rises remembered per EDAC counter within the window.
const MAX_RISES: usize = 1024;
/// EDAC counters followed (controllers and DIMMs).
const MAX_COUNTERS: usize = 1024;
/// Block devices listed under `/sys/block` and NVMe controllers under `/sys/class/nvme`.
const MAX_DEVICES: usize = 4096;
/// CPER record numbers waiting for their section lines.
const MAX_CPER_PENDING: usize = 64;
/// Kinds remembered per event group.
const MAX_KINDS: usize = 16;
/// Longest kernel line kept as a group's latest (an EDAC line with its address fields is
/// about 400 bytes).
const MAX_LINE: usize = 512;

/// Configuration of the hardware collector.
#[derive(Debug, Clone, PartialEq)]
pub struct HardwareConfig {
    pub thresholds: Thresholds,
    /// The kernel-log reader: lookback window and per-cycle bounds.
    pub kmsg: KmsgConfig,
    /// The kubelet's root directory on the host: a disk with I/O errors that holds its `pods`
    /// directory affects pods.
    pub kubelet_root: PathBuf,
}

impl Default for HardwareConfig {
    fn default() -> Self {
        HardwareConfig {
            thresholds: Thresholds::default(),
            kmsg: KmsgConfig::default(),
            kubelet_root: PathBuf::from("/var/lib/kubelet"),
        }
    }
}

/// Kernel-log events of one group and subject.
#[derive(Debug, Clone)]
struct Stat {
    count: u64,
    last_usec: u64,
    kinds: BTreeSet<String>,
    worst: String,
    sector: Option<u64>,
    /// The latest line of the group, as logged (cut to [`MAX_LINE`]).
    line: String,
}

/// One EDAC counter's history: its last value and its rises within the window.
#[derive(Debug, Clone, Default)]
struct Rises {
    last: u64,
    rises: VecDeque<(Instant, u64)>,
}

/// Reads the hardware's state each cycle and new kernel log records.
pub struct HardwareCollector {
    node: Node,
    config: HardwareConfig,
    kmsg: KmsgReader,
    /// (group, subject) -> events.
    events: BTreeMap<(&'static str, String), Stat>,
    cper_pending: BTreeMap<Option<u32>, lines::CperSeverity>,
    counters: BTreeMap<String, Rises>,
    taint_before: Option<u64>,
    /// Recognised kernel-log lines since start, by group (a counter for `/metrics`).
    lines_total: BTreeMap<&'static str, u64>,
    /// CPER records since start, by severity (node-problem-detector's `CperHardwareError*`).
    cper_total: BTreeMap<&'static str, u64>,
}

/// The rank of an event's worst kind within its group.
fn rank(worst: &str) -> u8 {
    match worst {
        "removed" | "not_recovered" => 3,
        "reset" => 2,
        _ => 1,
    }
}

impl HardwareCollector {
    pub fn new(node: Node, config: HardwareConfig) -> Self {
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        HardwareCollector {
            node,
            config,
            kmsg,
            events: BTreeMap::new(),
            cper_pending: BTreeMap::new(),
            counters: BTreeMap::new(),
            taint_before: None,
            lines_total: ["mce", "cper", "edac_ce", "edac_ue", "nvme", "disk"]
                .into_iter()
                .map(|g| (g, 0))
                .collect(),
            cper_total: ["corrected", "recoverable", "fatal", "info"]
                .into_iter()
                .map(|g| (g, 0))
                .collect(),
        }
    }

    fn note(
        &mut self,
        group: &'static str,
        subject: String,
        kind: String,
        worst: &str,
        record: &Record,
        add: u64,
    ) -> &mut Stat {
        *self.lines_total.entry(group).or_insert(0) += add;
        let usec = record.usec;
        let s = self.events.entry((group, subject)).or_insert_with(|| Stat {
            count: 0,
            last_usec: usec,
            kinds: BTreeSet::new(),
            worst: worst.to_string(),
            sector: None,
            line: String::new(),
        });
        s.count = s.count.saturating_add(add);
        if usec >= s.last_usec || s.line.is_empty() {
            s.line = crate::bounded::prefix_owned(record.message.trim(), MAX_LINE);
        }
        s.last_usec = s.last_usec.max(usec);
        if s.kinds.len() < MAX_KINDS {
            s.kinds.insert(kind);
        }
        if rank(worst) > rank(&s.worst) {
            s.worst = worst.to_string();
        }
        s
    }

    /// A CPU's machine-check line right after `Machine check events logged` is that event
    /// (4.x+ print the header, then the bank of each record): the header is not counted as a
    /// second, CPU-less event.
    fn absorb_logged(&mut self, usec: u64) {
        let key = ("mce", "node".to_string());
        let Some(s) = self.events.get_mut(&key) else {
            return;
        };
        if usec.saturating_sub(s.last_usec) > MCE_HEADER_USEC {
            return;
        }
        if s.count <= 1 {
            self.events.remove(&key);
        } else {
            s.count -= 1;
        }
    }

    /// Phase: new kernel-log records into the event groups; returns the reader's status.
    fn read_kernel_log(&mut self) -> Status {
        let batch = self.kmsg.read_new();
        for r in &batch.records {
            let Some(line) = lines::parse(&r.message) else {
                continue;
            };
            match line {
                HwLine::MceLogged => {
                    self.note("mce", "node".into(), "events_logged".into(), "logged", r, 1);
                }
                HwLine::MceBank { cpu, bank } => {
                    self.absorb_logged(r.usec);
                    self.note(
                        "mce",
                        format!("cpu{cpu}"),
                        format!("bank {bank}"),
                        "machine_check",
                        r,
                        1,
                    );
                }
                HwLine::MemoryFailure { pfn, recovery } => {
                    let worst = match recovery {
                        lines::Recovery::Recovered => "recovered",
                        lines::Recovery::NotRecovered => "not_recovered",
                    };
                    self.note(
                        "mce",
                        "memory_failure".into(),
                        format!("{pfn} {worst}"),
                        worst,
                        r,
                        1,
                    );
                }
                HwLine::CperSeverity { seq, severity } => {
                    if self.cper_pending.len() >= MAX_CPER_PENDING {
                        self.cper_pending.clear();
                    }
                    self.cper_pending.insert(seq, severity);
                    *self.cper_total.entry(severity.as_str()).or_insert(0) += 1;
                    self.note(
                        "cper",
                        severity.as_str().into(),
                        "record".into(),
                        severity.as_str(),
                        r,
                        1,
                    );
                }
                HwLine::CperSection { seq, section_type } => {
                    if let Some(sev) = self.cper_pending.get(&seq).copied() {
                        if let Some(s) = self.events.get_mut(&("cper", sev.as_str().to_string())) {
                            s.kinds.remove("record");
                            if s.kinds.len() < MAX_KINDS {
                                s.kinds.insert(section_type);
                            }
                        }
                    }
                }
                HwLine::Edac {
                    controller,
                    count,
                    uncorrected,
                    label,
                } => {
                    let group = if uncorrected { "edac_ue" } else { "edac_ce" };
                    let kind = label.unwrap_or_else(|| controller.clone());
                    self.note(group, controller, kind, "logged", r, count.max(1));
                }
                HwLine::Nvme { controller, event } => {
                    self.note(
                        "nvme",
                        controller,
                        event.as_str().into(),
                        event.as_str(),
                        r,
                        1,
                    );
                }
                HwLine::BlockError {
                    device,
                    kind,
                    sector,
                } => {
                    let s = self.note("disk", device, kind, "error", r, 1);
                    s.sector = sector.or(s.sector);
                }
            }
        }
        self.prune_events();
        batch.status
    }

    fn prune_events(&mut self) {
        let lookback = self.config.kmsg.lookback;
        if let Some(clock) = self.kmsg.clock() {
            self.events
                .retain(|_, s| clock.age(s.last_usec) <= lookback);
        }
        while self.events.len() > MAX_EVENT_GROUPS {
            let stalest = self
                .events
                .iter()
                .min_by_key(|(_, s)| s.last_usec)
                .map(|(k, _)| k.clone());
            match stalest {
                Some(k) => {
                    self.events.remove(&k);
                }
                None => break,
            }
        }
    }

    fn groups(&self, group: &str) -> Vec<LogEvents> {
        let clock = self.kmsg.clock();
        self.events
            .iter()
            .filter(|((g, _), _)| *g == group)
            .map(|((_, subject), s)| LogEvents {
                subject: subject.clone(),
                kinds: s.kinds.iter().cloned().collect(),
                count: s.count,
                last_seen_seconds_ago: clock.map(|c| c.age(s.last_usec).as_secs()),
                worst: s.worst.clone(),
                line: (!s.line.is_empty()).then(|| s.line.clone()),
            })
            .collect()
    }

    /// Corrected errors of one counter within the window: its rises this agent saw, and at
    /// the first reading the count since boot when the node booted within the window.
    fn ce_in_window(
        &mut self,
        name: &str,
        total: u64,
        uptime: Option<Duration>,
        now: Instant,
    ) -> u64 {
        let window = Duration::from_secs(self.config.thresholds.corrected_window_seconds);
        if !self.counters.contains_key(name) && self.counters.len() >= MAX_COUNTERS {
            return 0;
        }
        let r = self.counters.entry(name.to_string()).or_insert_with(|| {
            let mut r = Rises {
                last: total,
                rises: VecDeque::new(),
            };
            if uptime.is_some_and(|u| u <= window) && total > 0 {
                r.rises.push_back((now, total));
            }
            r
        });
        if total > r.last {
            if r.rises.len() >= MAX_RISES {
                r.rises.pop_front();
            }
            r.rises.push_back((now, total - r.last));
        }
        // A counter that went down was reset (driver reload, `reset_counters`): start over.
        r.last = total;
        r.rises
            .retain(|(t, _)| now.saturating_duration_since(*t) <= window);
        r.rises.iter().map(|(_, n)| *n).fold(0, u64::saturating_add)
    }

    /// Phase: EDAC counters with their window counts.
    fn read_edac(&mut self, notes: &mut Vec<String>) -> Option<Vec<ControllerState>> {
        let controllers = match edac::read(self.node.host()) {
            Ok(c) => c?,
            Err(e) => {
                notes.push(format!("{e}; memory error counters are not judged"));
                return None;
            }
        };
        let uptime = uptime::read(self.node.host()).ok().map(|u| u.since_boot);
        let now = Instant::now();
        let mut out = Vec::new();
        for c in controllers {
            let mc = MemoryCounters {
                ce_in_window: self.ce_in_window(&c.name, c.ce, uptime, now),
                name: c.name.clone(),
                label: None,
                ce_total: c.ce,
                ue_total: Some(c.ue),
            };
            let dimms = c
                .dimms
                .iter()
                .map(|d| {
                    let name = format!("{}/{}", c.name, d.name);
                    MemoryCounters {
                        ce_in_window: self.ce_in_window(&name, d.ce, uptime, now),
                        name,
                        label: d.label.clone(),
                        ce_total: d.ce,
                        ue_total: d.ue,
                    }
                })
                .collect();
            out.push(ControllerState {
                controller: mc,
                dimms,
            });
        }
        Some(out)
    }

    /// Phase: the disks with I/O errors and what is mounted from them.
    fn disks(&self, notes: &mut Vec<String>) -> Vec<DiskErrors> {
        let events = self.groups("disk");
        if events.is_empty() {
            return Vec::new();
        }
        let mounts = match self.node.mounts() {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!(
                    "{e}; the filesystems on disks with I/O errors are not named"
                ));
                Default::default()
            }
        };
        let pods = mountinfo::containing(&mounts, &self.config.kubelet_root.join("pods"));
        events
            .into_iter()
            .map(|e| {
                let on_disk = |m: &mountinfo::Mount| from_disk(&m.source, &e.subject);
                let sector = self
                    .events
                    .get(&("disk", e.subject.clone()))
                    .and_then(|s| s.sector);
                DiskErrors {
                    mounts: mounts
                        .iter()
                        .filter(|m| on_disk(m))
                        .take(16)
                        .map(|m| DiskMount {
                            source: m.source.clone(),
                            mount_point: m.mount_point.display().to_string(),
                            fstype: m.fstype.clone(),
                        })
                        .collect(),
                    pods_affected: pods.is_some_and(on_disk),
                    sector,
                    events: e,
                }
            })
            .collect()
    }

    /// Phase: NVMe controllers whose state is neither live nor on its way back.
    fn nvme_states(&self) -> Vec<(String, String)> {
        let dir = self.node.host().sys_file("class/nvme");
        let mut out = Vec::new();
        for n in listing(&dir) {
            if !n.starts_with("nvme") {
                continue;
            }
            let Ok(text) = hostfs::read_text(&dir.join(&n).join("state"), hostfs::cap::VALUE)
            else {
                continue;
            };
            let state = crate::bounded::prefix_owned(text.trim(), 32);
            if !matches!(state.as_str(), "live" | "resetting" | "connecting" | "new") {
                out.push((n, state));
            }
        }
        out
    }

    /// Phase: `/sys/block/md*/md/degraded` and every disk's `badblocks`.
    fn block_sysfs(&self) -> (Vec<DeviceCount>, Vec<DeviceCount>) {
        let dir = self.node.host().sys_file("block");
        let (mut degraded, mut bad) = (Vec::new(), Vec::new());
        for n in listing(&dir) {
            let dev = dir.join(&n);
            if n.starts_with("md") {
                if let Some(v) = value(&dev.join("md/degraded")) {
                    degraded.push((n.clone(), v));
                }
            }
            if let Ok(text) = hostfs::read_text(&dev.join("badblocks"), hostfs::cap::COUNTERS) {
                let ranges = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
                if ranges > 0 {
                    bad.push((n, ranges));
                }
            }
        }
        (degraded, bad)
    }
}

/// A block device and a count read for it (`md/degraded`, bad-block ranges).
type DeviceCount = (String, u64);

/// A mount source on disk `dev`: `/dev/sdb`, `/dev/sdb1`, `/dev/nvme0n1p2`.
fn from_disk(source: &str, dev: &str) -> bool {
    let Some(rest) = source
        .strip_prefix("/dev/")
        .and_then(|s| s.strip_prefix(dev))
    else {
        return false;
    };
    let rest = rest.strip_prefix('p').unwrap_or(rest);
    rest.bytes().all(|b| b.is_ascii_digit())
}

fn value(path: &Path) -> Option<u64> {
    hostfs::read_text(path, hostfs::cap::VALUE)
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match hostfs::dir_entries(dir, MAX_DEVICES) {
        Ok(it) => it
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

impl Phases for HardwareCollector {
    const NAME: &'static str = "hardware";
    type Sample = HardwareSample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(HardwareSample, Status), Status> {
        let mut notes = Vec::new();
        let mut absent = Vec::new();
        let edac = self.read_edac(&mut notes);
        if edac.is_none() && notes.is_empty() {
            absent.push(
                "no EDAC memory controller (sys/devices/system/edac/mc): memory errors are judged from the kernel log only"
                    .to_string(),
            );
        }
        let kmsg_status = self.read_kernel_log();
        let host = self.node.host().clone();
        let hardware_corrupted_bytes = match meminfo::read(&host) {
            Ok(m) => m.get("HardwareCorrupted"),
            Err(e) => {
                notes.push(format!("{e}; poisoned pages are not judged"));
                None
            }
        };
        let arrays =
            match hostfs::read_text_optional(&host.proc_file("mdstat"), hostfs::cap::COUNTERS) {
                Ok(t) => t.map(|t| mdstat::parse(&t)).unwrap_or_default(),
                Err(e) => {
                    notes.push(format!("{e}; software RAID is judged from sysfs only"));
                    Vec::new()
                }
            };
        let taint =
            match hostfs::read_text(&host.proc_file("sys/kernel/tainted"), hostfs::cap::VALUE) {
                Ok(t) => taint::parse(&t),
                // Every kernel since 2.6 has it: only a staged root lacks it.
                Err(e) if e.is_not_found() => {
                    absent.push(
                        "no proc/sys/kernel/tainted: the kernel's taint is not judged".to_string(),
                    );
                    None
                }
                Err(e) => {
                    notes.push(format!("{e}; the kernel's taint is not judged"));
                    None
                }
            };
        let (md_degraded, bad_blocks) = self.block_sysfs();
        let sample = HardwareSample {
            edac,
            edac_ce_lines: self.groups("edac_ce"),
            edac_ue_lines: self.groups("edac_ue"),
            crashes: crash::read(&host, SystemTime::now()),
            hardware_corrupted_bytes,
            machine_checks: self.groups("mce"),
            cper: self.groups("cper"),
            nvme: self.groups("nvme"),
            nvme_not_live: self.nvme_states(),
            disks: self.disks(&mut notes),
            arrays,
            md_degraded,
            bad_blocks,
            taint_before: self.taint_before,
            taint,
            lookback_seconds: self.config.kmsg.lookback.as_secs(),
        };
        self.taint_before = taint.or(self.taint_before);
        let status = Status::from_notes(notes, absent).worst(kmsg_status);
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &HardwareSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &HardwareSample) -> Vec<Metric> {
        let mut m = Vec::new();
        for c in sample.edac.iter().flatten() {
            for counter in std::iter::once(&c.controller).chain(&c.dimms) {
                let label = counter.label.clone().unwrap_or_default();
                m.push(
                    Metric::counter(
                        "node_doctor_hardware_memory_corrected_errors_total",
                        "Corrected memory errors an EDAC memory controller or DIMM counted since boot (ce_count).",
                        counter.ce_total as f64,
                    )
                    .label("counter", counter.name.clone())
                    .label("dimm_label", label.clone()),
                );
                if let Some(ue) = counter.ue_total {
                    m.push(
                        Metric::counter(
                            "node_doctor_hardware_memory_uncorrected_errors_total",
                            "Uncorrected memory errors an EDAC memory controller or DIMM counted since boot (ue_count).",
                            ue as f64,
                        )
                        .label("counter", counter.name.clone())
                        .label("dimm_label", label),
                    );
                }
            }
        }
        if let Some(b) = sample.hardware_corrupted_bytes {
            m.push(Metric::gauge(
                "node_doctor_hardware_corrupted_bytes",
                "Memory the kernel took out of use after hardware errors (HardwareCorrupted in /proc/meminfo).",
                b as f64,
            ));
        }
        if let Some(t) = sample.taint {
            m.push(Metric::gauge(
                "node_doctor_hardware_kernel_tainted",
                "The kernel's taint bits (/proc/sys/kernel/tainted).",
                t as f64,
            ));
        }
        for (group, n) in &self.lines_total {
            m.push(
                Metric::counter(
                    "node_doctor_hardware_kernel_log_events_total",
                    "Hardware error lines read from the kernel log by this agent (including its start-up lookback), by kind.",
                    *n as f64,
                )
                .label("kind", *group),
            );
        }
        for (severity, n) in &self.cper_total {
            m.push(
                Metric::counter(
                    "node_doctor_hardware_cper_records_total",
                    "Firmware hardware error records (CPER: GHES, BERT) read from the kernel log by this agent (including its start-up lookback), by the severity the record states.",
                    *n as f64,
                )
                .label("severity", *severity),
            );
        }
        m.extend(self.kmsg.metrics("hardware"));
        m
    }
}
