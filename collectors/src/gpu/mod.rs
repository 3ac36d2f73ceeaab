//! The `gpu` collector: accelerator nodes' GPU faults from the kernel log, and the PCIe
//! devices (GPUs, NICs, NVMe controllers, NVSwitches and the ports above them) whose links
//! degrade, without NVML: it runs no program and links no vendor library.
//!
//! It reads the kernel log through the node's hub (NVIDIA Xid, SXid, NVLink, recovery-action,
//! fallen-off-the-bus and adapter-init lines, PCIe AER reports: [`lines`], classed by the
//! table `collectors/rules/gpu_xids.tsv`: [`xids`]), `/sys/bus/pci/devices` ([`pci`]: one walk
//! to find what to watch, [`devices`]), the driver's `/proc/driver/nvidia/gpus` and
//! `/dev/nvidia*` ([`driver`]), and once, on a node with GPUs, the node's own logs for the
//! Xids of earlier boots (a repeat across a reboot).
//!
//! What a reader would get wrong: the counters and links are not read every cycle. A sweep
//! reads them at most every `sweep_seconds` (and at once when the kernel log reports an AER
//! error); the findings of the last sweep stand between sweeps. A node with nothing to watch
//! reads nothing per cycle but the kernel log every collector shares.

pub mod devices;
pub mod driver;
pub mod events;
pub mod judge;
pub mod lines;
pub mod pci;
pub mod sample;
pub mod thresholds;
pub mod xids;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::collector::{CollectContext, Phases, Status};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::Node;
use crate::nodelog::{NodeLog, NodeLogConfig};
use crate::rules::Draft;

use devices::{Discovery, Previous};
use events::Events;
pub use sample::GpuSample;
use sample::{DeviceState, EarlierBoots, GpuState};
pub use thresholds::Thresholds;

/// Configuration of the gpu collector.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuConfig {
    pub thresholds: Thresholds,
    /// The kernel-log reader: lookback window and per-cycle bounds.
    pub kmsg: KmsgConfig,
    /// The node's logs read once, on a node with GPUs, for the Xids of earlier boots.
    pub node_log: NodeLogConfig,
    /// AER counters, links and the driver's view are read at most this often (60 s).
    pub sweep_seconds: u64,
    /// `/sys/bus/pci/devices` is walked again this often (10 min: hot-plug is rare).
    pub rediscover_seconds: u64,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            thresholds: Thresholds::default(),
            kmsg: KmsgConfig::default(),
            node_log: NodeLogConfig {
                syslog_files: vec![
                    "/var/log/kern.log".into(),
                    "/var/log/messages".into(),
                    "/var/log/syslog".into(),
                ],
                idents: vec!["kernel".into()],
                // A GPU that failed yesterday and was rebooted is the repeat that matters.
                lookback: Duration::from_secs(24 * 3600),
                first_read_bytes: 8 << 20,
                max_bytes_per_cycle: 16 << 20,
                ..NodeLogConfig::default()
            },
            sweep_seconds: 60,
            rediscover_seconds: 600,
        }
    }
}

/// A monotonic clock in seconds (tests replace it).
type Clock = Box<dyn Fn() -> f64 + Send>;

fn monotonic() -> f64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// What the last sweep read.
#[derive(Debug, Default)]
struct Swept {
    at: Option<f64>,
    count: u64,
    devices: Vec<DeviceState>,
    driver: Option<Vec<String>>,
    info: BTreeMap<String, driver::Information>,
    device_nodes: Option<u32>,
}

/// Reads the kernel log every cycle, the PCIe devices and the driver's view every sweep.
pub struct GpuCollector {
    node: Node,
    config: GpuConfig,
    kmsg: KmsgReader,
    clock: Clock,
    events: Events,
    discovery: Option<(f64, Result<Discovery, String>)>,
    previous: Previous,
    swept: Swept,
    /// Xid reports of earlier boots, read once on a node with GPUs.
    earlier: Option<BTreeMap<String, EarlierBoots>>,
    earlier_note: Option<String>,
}

impl GpuCollector {
    pub fn new(node: Node, config: GpuConfig) -> Self {
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        GpuCollector {
            node,
            config,
            kmsg,
            clock: Box::new(monotonic),
            events: Events::default(),
            discovery: None,
            previous: Previous::new(),
            swept: Swept::default(),
            earlier: None,
            earlier_note: None,
        }
    }

    /// Replaces the monotonic clock (seconds): tests make their sweeps minutes apart.
    pub fn with_clock(mut self, f: impl Fn() -> f64 + Send + 'static) -> Self {
        self.clock = Box::new(f);
        self
    }

    /// Phase: new kernel-log records into the events; returns the reader's status.
    fn read_kernel_log(&mut self) -> Status {
        let batch = self.kmsg.read_new();
        let gap = Duration::from_secs(self.config.thresholds.burst_gap_seconds);
        for r in &batch.records {
            if let Some(part) = lines::parse(&r.message) {
                self.events.note(part, r, gap);
            }
        }
        self.events
            .prune(self.kmsg.clock().as_ref(), self.config.kmsg.lookback);
        batch.status
    }

    /// Phase: the walk of `/sys/bus/pci/devices`, when none was made or it is stale.
    fn discover(&mut self, now: f64) {
        let stale = self
            .discovery
            .as_ref()
            .is_none_or(|(at, _)| now - at >= self.config.rediscover_seconds as f64);
        if stale {
            let found = devices::discover(self.node.host()).map_err(|e| {
                if e.is_not_found() {
                    String::new()
                } else {
                    e.to_string()
                }
            });
            self.discovery = Some((now, found));
        }
    }

    fn found(&self) -> Option<&Discovery> {
        self.discovery.as_ref().and_then(|(_, d)| d.as_ref().ok())
    }

    /// Phase: AER counters, links and the driver's view, when a sweep is due: the first two
    /// samples (a rate needs two readings: `check`'s), then every `sweep_seconds`, or at once
    /// after an AER report in the kernel log.
    fn sweep(&mut self, now: f64) {
        let due = self.swept.count < 2
            || self.events.aer_since_sweep
            || self
                .swept
                .at
                .is_none_or(|at| now - at >= self.config.sweep_seconds as f64);
        if !due {
            return;
        }
        self.events.aer_since_sweep = false;
        let host = self.node.host().clone();
        let watched = self.found().map(|d| d.watched.clone()).unwrap_or_default();
        self.swept.devices = devices::sweep(&host, &watched, &mut self.previous, now);
        let has_gpus = self.found().is_some_and(|d| !d.gpus.is_empty());
        self.swept.driver = driver::gpus(&host);
        self.swept.info = self
            .swept
            .driver
            .iter()
            .flatten()
            .filter_map(|b| driver::information(&host, b).map(|i| (b.clone(), i)))
            .collect();
        self.swept.device_nodes = if has_gpus || self.swept.driver.is_some() {
            driver::device_nodes(&host)
        } else {
            None
        };
        self.swept.at = Some(now);
        self.swept.count += 1;
    }

    /// Phase (once, on a node with GPUs): the Xids of earlier boots in the node's logs.
    fn read_earlier_boots(&mut self) {
        if self.earlier.is_some() {
            return;
        }
        let Some(clock) = self.kmsg.clock() else {
            self.earlier = Some(BTreeMap::new());
            self.earlier_note =
                Some("no proc/uptime: the Xids of earlier boots are not read".to_string());
            return;
        };
        let unix = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        };
        let split = events::BootSplit {
            current: crate::proc::boot_id::read(self.node.host()).ok(),
            boot_unix: unix(clock.wall_clock(0)),
        };
        let now = unix(std::time::SystemTime::now());
        let mut log = NodeLog::new(self.node.host().clone(), self.config.node_log.clone());
        let (records, report) = log.read_new(now);
        let lines = records
            .iter()
            .map(|r| (r.time, r.boot_id, r.message.as_str()));
        self.earlier = Some(events::earlier_boots(lines, split));
        if !report.errors.is_empty() {
            self.earlier_note = Some(format!(
                "{}; the Xids of earlier boots may be incomplete",
                report.errors.join("; ")
            ));
        }
    }

    /// Every GPU the bus, the driver or the kernel log names.
    fn gpu_states(&self) -> Vec<GpuState> {
        let clock = self.kmsg.clock();
        let on_bus: BTreeSet<&String> = self
            .found()
            .map(|d| d.gpus.iter().collect())
            .unwrap_or_default();
        let driver = self.swept.driver.as_ref();
        let mut names: BTreeSet<&String> = on_bus.clone();
        names.extend(driver.into_iter().flatten());
        names.extend(self.events.gpu_names());
        names
            .into_iter()
            .map(|b| {
                let info = self.swept.info.get(b);
                let mut g = GpuState::new(b);
                g.on_bus = on_bus.contains(b);
                g.in_driver = driver.map(|d| d.contains(b));
                g.uuid = info.and_then(|i| i.uuid.clone());
                g.model = info.and_then(|i| i.model.clone());
                g.excluded = info.is_some_and(|i| i.excluded);
                g.xids = self.events.xid_events(b, clock.as_ref());
                g.earlier_boots = self.earlier.as_ref().and_then(|e| e.get(b).cloned());
                g
            })
            .collect()
    }

    /// The run's status: what could not be read, and what this node does not have.
    fn status(&self, s: &GpuSample) -> Status {
        let mut notes = Vec::new();
        let mut absent = Vec::new();
        match &self.discovery {
            Some((_, Err(e))) if e.is_empty() => absent.push(
                "no sys/bus/pci/devices: GPUs and PCIe links are judged from the kernel log only"
                    .to_string(),
            ),
            Some((_, Err(e))) => notes.push(format!("{e}; PCIe devices are not judged")),
            _ => {}
        }
        let gpus_on_bus = s.gpus.iter().filter(|g| g.on_bus).count();
        if s.gpus.is_empty() {
            absent.push(format!(
                "no NVIDIA GPU on this node (PCI bus, driver, kernel log); watching the AER counters and links of {} PCIe device(s)",
                s.devices.len()
            ));
        } else if gpus_on_bus > 0 && !s.driver_loaded {
            absent.push(
                "the NVIDIA driver is not loaded (no proc/driver/nvidia): GPUs are judged from the PCI bus and the kernel log only"
                    .to_string(),
            );
        }
        notes.extend(self.earlier_note.clone());
        Status::from_notes(notes, absent)
    }
}

impl Phases for GpuCollector {
    const NAME: &'static str = "gpu";
    type Sample = GpuSample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(GpuSample, Status), Status> {
        let kmsg_status = self.read_kernel_log();
        let now = (self.clock)();
        self.discover(now);
        self.sweep(now);
        let has_gpus = self.found().is_some_and(|d| !d.gpus.is_empty())
            || self.swept.driver.as_ref().is_some_and(|d| !d.is_empty())
            || self.events.gpu_names().next().is_some();
        if has_gpus {
            self.read_earlier_boots();
        }
        let clock = self.kmsg.clock();
        let kinds: BTreeMap<&str, pci::Kind> = self
            .found()
            .map(|d| d.watched.iter().map(|w| (w.bdf.as_str(), w.kind)).collect())
            .unwrap_or_default();
        let sample = GpuSample {
            gpus: self.gpu_states(),
            switches: self.events.switch_events(clock.as_ref()),
            devices: self.swept.devices.clone(),
            aer_lines: self
                .events
                .aer_lines(clock.as_ref(), |b| kinds.get(b).copied()),
            driver_loaded: self.swept.driver.is_some(),
            device_nodes: self.swept.device_nodes,
            lookback_seconds: self.config.kmsg.lookback.as_secs(),
        };
        let status = self.status(&sample).worst(kmsg_status);
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &GpuSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &GpuSample) -> Vec<Metric> {
        let mut m = gpu_metrics(sample);
        for (gpu, n) in &self.events.per_gpu_total {
            m.push(
                Metric::counter(
                    "node_doctor_gpu_xid_lines_total",
                    "Xid, fallen-off-the-bus and adapter-init lines about a GPU read from the kernel log by this agent (including its start-up lookback).",
                    *n as f64,
                )
                .label("gpu", gpu.clone()),
            );
        }
        for (kind, n) in &self.events.totals {
            m.push(
                Metric::counter(
                    "node_doctor_gpu_kernel_log_events_total",
                    "Accelerator and PCIe AER lines read from the kernel log by this agent (including its start-up lookback), by kind.",
                    *n as f64,
                )
                .label("kind", *kind),
            );
        }
        m.extend(self.kmsg.metrics("gpu"));
        m
    }
}

/// The per-GPU and per-device families of a sample.
fn gpu_metrics(s: &GpuSample) -> Vec<Metric> {
    let mut m = Vec::new();
    for g in &s.gpus {
        m.push(
            Metric::gauge(
                "node_doctor_gpu_info",
                "A GPU this node has: 1, with where it is seen (on the PCI bus, in the NVIDIA driver) and whether the driver excluded it.",
                1.0,
            )
            .label("gpu", g.bdf.clone())
            .label("uuid", g.uuid.clone().unwrap_or_default())
            .label("on_bus", if g.on_bus { "true" } else { "false" })
            .label("in_driver", match g.in_driver { Some(true) => "true", Some(false) => "false", None => "unknown" })
            .label("excluded", if g.excluded { "true" } else { "false" }),
        );
    }
    for d in &s.devices {
        let dev = |name: &str, help: &'static str, v: f64| {
            Metric::gauge(name, help, v)
                .label("device", d.bdf.clone())
                .label("kind", d.kind.as_str())
        };
        for (sev, v) in ["correctable", "nonfatal", "fatal"]
            .iter()
            .zip(d.aer_totals)
        {
            if let Some(v) = v {
                m.push(
                    Metric::counter(
                        "node_doctor_gpu_pcie_aer_errors_total",
                        "AER errors a PCIe device counted since boot (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal), by severity.",
                        v as f64,
                    )
                    .label("device", d.bdf.clone())
                    .label("kind", d.kind.as_str())
                    .label("severity", *sev),
                );
            }
        }
        if let Some(w) = d.width {
            m.push(dev(
                "node_doctor_gpu_pcie_link_width",
                "The lanes a PCIe device's link trained at (current_link_width).",
                w as f64,
            ));
        }
        if let Some(w) = d.max_width {
            m.push(dev("node_doctor_gpu_pcie_link_max_width", "The lanes a PCIe device's link can train at: the smaller of the device's and its port's max_link_width.", w as f64));
        }
        if let Some(v) = d.speed {
            m.push(dev("node_doctor_gpu_pcie_link_speed_gts", "The speed a PCIe device's link trained at, GT/s (current_link_speed; not read for GPUs, which lower it when idle).", v));
        }
        if let Some(v) = d.max_speed {
            m.push(dev("node_doctor_gpu_pcie_link_max_speed_gts", "The speed a PCIe device's link can train at, GT/s: the smaller of the device's and its port's max_link_speed.", v));
        }
    }
    m
}
