//! What one run of the gpu collector read: the GPUs (on the bus, in the driver, their Xids of
//! this boot and of earlier boots), the NVSwitches' SXids, the PCIe devices it watches (AER
//! rates, links) and the kernel log's AER reports. No words; tests build it directly.

use super::pci::Kind;
use super::xids::Class;

/// One run's reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuSample {
    pub gpus: Vec<GpuState>,
    pub switches: Vec<SwitchEvents>,
    /// Watched devices with AER counters or link state.
    pub devices: Vec<DeviceState>,
    /// AER reports in the kernel log, per device.
    pub aer_lines: Vec<AerLines>,
    /// The NVIDIA driver is loaded (`/proc/driver/nvidia/gpus` exists).
    pub driver_loaded: bool,
    /// `/dev/nvidiaN` nodes, when `/dev` is readable.
    pub device_nodes: Option<u32>,
    /// The kernel-log window, seconds.
    pub lookback_seconds: u64,
}

/// One GPU: what the bus, the driver and the kernel log say of it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuState {
    /// PCI address, `0000:3b:00.0`.
    pub bdf: String,
    pub uuid: Option<String>,
    pub model: Option<String>,
    /// Listed under `/sys/bus/pci/devices` as an NVIDIA display/3D controller.
    pub on_bus: bool,
    /// Listed under `/proc/driver/nvidia/gpus`; `None` when the driver is not loaded.
    pub in_driver: Option<bool>,
    /// `GPU Excluded: Yes`.
    pub excluded: bool,
    /// Xid reports of this boot within the window.
    pub xids: Option<XidEvents>,
    /// Xid reports of earlier boots (the node's own logs), which raise nothing by themselves.
    pub earlier_boots: Option<EarlierBoots>,
}

impl GpuState {
    pub fn new(bdf: &str) -> GpuState {
        GpuState {
            bdf: bdf.to_string(),
            uuid: None,
            model: None,
            on_bus: false,
            in_driver: None,
            excluded: false,
            xids: None,
            earlier_boots: None,
        }
    }
}

/// The Xid reports of one GPU in this boot.
#[derive(Debug, Clone, PartialEq)]
pub struct XidEvents {
    /// Lines counted (a flood of one Xid is one finding with this count).
    pub lines: u64,
    /// Bursts: runs of lines less than the burst gap apart.
    pub bursts: u64,
    /// Each Xid seen and its count, by Xid.
    pub xids: Vec<(u32, u64)>,
    /// The worst class in force: the table's, with NVLink5's Fatal/Nonfatal word and the
    /// latest Xid 154 recovery action applied.
    pub worst: Class,
    /// The Xid of the worst class (the latest such).
    pub worst_xid: Option<u32>,
    pub fallen_off: bool,
    pub init_failed: bool,
    /// The latest Xid 154 recovery action: code and name.
    pub recovery_action: Option<(u32, String)>,
    pub last_seen_seconds_ago: Option<u64>,
    /// The latest line of the worst class, as logged (cut).
    pub line: String,
}

/// Xid reports of earlier boots, from the node's logs.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierBoots {
    pub lines: u64,
    pub xids: Vec<u32>,
    pub worst: Class,
}

/// One NVSwitch's SXid reports in the window.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchEvents {
    pub bdf: String,
    pub fatal: u64,
    pub nonfatal: u64,
    pub sxids: Vec<u32>,
    pub last_seen_seconds_ago: Option<u64>,
    pub line: String,
}

/// A watched PCI device: its AER counters between two readings and its link.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceState {
    pub bdf: String,
    pub kind: Kind,
    /// For a port: the watched device below it and what that is.
    pub below: Option<String>,
    pub below_kind: Option<Kind>,
    /// Counter rises since the previous reading (`None` at the first reading or when a
    /// counter is unreadable).
    pub aer: Option<AerDelta>,
    /// Counters since boot, for the metrics.
    pub aer_totals: [Option<u64>; 3],
    /// GT/s now and at most (the smaller of the device's and its port's maximum).
    pub speed: Option<f64>,
    pub max_speed: Option<f64>,
    pub width: Option<u32>,
    pub max_width: Option<u32>,
}

/// AER counter rises over `seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AerDelta {
    pub seconds: f64,
    pub correctable: u64,
    pub nonfatal: u64,
    pub fatal: u64,
}

/// The kernel log's AER reports about one device in the window.
#[derive(Debug, Clone, PartialEq)]
pub struct AerLines {
    pub bdf: String,
    /// What the device is, when it is watched.
    pub kind: Option<Kind>,
    pub corrected: u64,
    pub nonfatal: u64,
    pub fatal: u64,
    pub last_seen_seconds_ago: Option<u64>,
    pub line: String,
}
