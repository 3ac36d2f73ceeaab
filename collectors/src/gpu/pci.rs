//! `/sys/bus/pci/devices/<bdf>`: which devices carry the node's work (GPUs, NICs, NVMe
//! controllers, NVSwitches), the port each hangs from, their AER counters and their link.
//!
//! Every value is read with `hostfs` (capped, regular files only); a file a kernel lacks
//! (`aer_dev_*` before 5.x or without AER, the link files on a virtual or legacy PCI device,
//! where reading them fails) is `None`, never an error. What the link files print:
//! `current_link_speed` is `16.0 GT/s PCIe` (6.x), `8 GT/s` (older), `Unknown` (device
//! asleep, D3cold); widths are plain numbers, 0 or 255 when unknown.

use std::path::PathBuf;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs;

use super::lines::{normalize_bdf, Bdf};

/// Devices listed under `/sys/bus/pci/devices` at most.
pub const MAX_DEVICES: usize = 4096;
/// NVIDIA's PCI vendor id.
pub const NVIDIA: u16 = 0x10de;

/// What a device is, by its PCI class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An NVIDIA display or 3D controller (class 0x0300xx, 0x0302xx).
    Gpu,
    /// An NVIDIA bridge of class 0x0680 (NVSwitch).
    NvSwitch,
    /// A network controller (0x02xxxx).
    Nic,
    /// An NVMe controller (0x0108xx).
    Nvme,
    /// The port a watched device hangs from.
    Port,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Gpu => "gpu",
            Kind::NvSwitch => "nvswitch",
            Kind::Nic => "nic",
            Kind::Nvme => "nvme",
            Kind::Port => "port",
        }
    }

    /// The kind of a device that carries the node's work, from its vendor and class.
    pub fn of(vendor: u16, class: u32) -> Option<Kind> {
        let base = class >> 16;
        let sub = (class >> 8) & 0xff;
        match (base, sub) {
            (0x03, 0x00 | 0x02) if vendor == NVIDIA => Some(Kind::Gpu),
            (0x06, 0x80) if vendor == NVIDIA => Some(Kind::NvSwitch),
            (0x02, _) => Some(Kind::Nic),
            (0x01, 0x08) => Some(Kind::Nvme),
            _ => None,
        }
    }
}

/// The three AER counters of a device (`aer_dev_correctable`, `_nonfatal`, `_fatal`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AerCounts {
    pub correctable: Option<u64>,
    pub nonfatal: Option<u64>,
    pub fatal: Option<u64>,
}

impl AerCounts {
    pub fn any(&self) -> bool {
        self.correctable.is_some() || self.nonfatal.is_some() || self.fatal.is_some()
    }
}

/// A device's link as trained and at most.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Link {
    /// GT/s.
    pub speed: Option<f64>,
    pub width: Option<u32>,
    pub max_speed: Option<f64>,
    pub max_width: Option<u32>,
}

impl Link {
    pub fn any(&self) -> bool {
        self.max_speed.is_some() || self.max_width.is_some()
    }
}

/// The directory of a device.
pub fn dir(host: &HostPaths, bdf: &str) -> PathBuf {
    host.sys_file("bus/pci/devices").join(bdf)
}

/// The PCI addresses listed under `/sys/bus/pci/devices`, sorted; names that are not PCI
/// addresses are left out.
pub fn list(host: &HostPaths) -> Result<Vec<Bdf>, ReadError> {
    let d = host.sys_file("bus/pci/devices");
    let mut v: Vec<Bdf> = hostfs::dir_entries(&d, MAX_DEVICES)?
        .filter_map(|e| e.file_name().to_str().and_then(normalize_bdf))
        .collect();
    v.sort();
    Ok(v)
}

/// `0x10de\n` -> 0x10de.
pub fn parse_hex(text: &str) -> Option<u32> {
    let t = text.trim();
    u32::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok()
}

fn read(host: &HostPaths, bdf: &str, file: &str) -> Option<String> {
    hostfs::read_text(&dir(host, bdf).join(file), hostfs::cap::VALUE).ok()
}

/// A device's vendor and class, `None` when either is unreadable.
pub fn identity(host: &HostPaths, bdf: &str) -> Option<(u16, u32)> {
    let vendor = parse_hex(&read(host, bdf, "vendor")?)?;
    let class = parse_hex(&read(host, bdf, "class")?)?;
    Some((u16::try_from(vendor).ok()?, class))
}

/// The port a device hangs from: the parent directory of its `/sys/devices` path, when that
/// is a PCI address (a root-complex device's parent is `pci0000:00`, not a port).
pub fn upstream(host: &HostPaths, bdf: &str) -> Option<Bdf> {
    let target = std::fs::read_link(dir(host, bdf)).ok()?;
    let parent = target.parent()?.file_name()?.to_str()?;
    normalize_bdf(parent).filter(|p| p != bdf)
}

/// The total of an `aer_dev_*` file: its `TOTAL_ERR_*` line, else the sum of its lines.
pub fn parse_aer(text: &str) -> Option<u64> {
    let mut sum: Option<u64> = None;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(name), Some(v)) = (f.next(), f.next()) else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else {
            continue;
        };
        if name.starts_with("TOTAL_ERR_") {
            return Some(v);
        }
        sum = Some(sum.unwrap_or(0).saturating_add(v));
    }
    sum
}

/// A device's AER counters (each `None` when its file is missing or unreadable).
pub fn aer(host: &HostPaths, bdf: &str) -> AerCounts {
    let c = |f: &str| read(host, bdf, f).as_deref().and_then(parse_aer);
    AerCounts {
        correctable: c("aer_dev_correctable"),
        nonfatal: c("aer_dev_nonfatal"),
        fatal: c("aer_dev_fatal"),
    }
}

/// `16.0 GT/s PCIe`, `8 GT/s`, `2.5 GT/s` -> GT/s; `Unknown` -> `None`.
pub fn parse_speed(text: &str) -> Option<f64> {
    let t = text.trim();
    let n = t.split_whitespace().next()?;
    let v: f64 = n.parse().ok()?;
    (t.contains("GT/s") && v.is_finite() && v > 0.0 && v < 1000.0).then_some(v)
}

/// `16` -> 16; 0 and 255 (unknown) -> `None`.
pub fn parse_width(text: &str) -> Option<u32> {
    let t = text.trim();
    let v: u32 = t.strip_prefix('x').unwrap_or(t).parse().ok()?;
    (1..=32).contains(&v).then_some(v)
}

/// The current link (speed and width) of a device.
pub fn current_link(host: &HostPaths, bdf: &str) -> (Option<f64>, Option<u32>) {
    (
        read(host, bdf, "current_link_speed")
            .as_deref()
            .and_then(parse_speed),
        read(host, bdf, "current_link_width")
            .as_deref()
            .and_then(parse_width),
    )
}

/// The current link width alone.
pub fn current_width(host: &HostPaths, bdf: &str) -> Option<u32> {
    read(host, bdf, "current_link_width")
        .as_deref()
        .and_then(parse_width)
}

/// The most a device's link can train at.
pub fn max_link(host: &HostPaths, bdf: &str) -> (Option<f64>, Option<u32>) {
    (
        read(host, bdf, "max_link_speed")
            .as_deref()
            .and_then(parse_speed),
        read(host, bdf, "max_link_width")
            .as_deref()
            .and_then(parse_width),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_the_kernel_prints() {
        assert_eq!(parse_hex("0x10de\n"), Some(0x10de));
        assert_eq!(parse_hex("0x030200\n"), Some(0x030200));
        assert_eq!(Kind::of(0x10de, 0x030200), Some(Kind::Gpu));
        assert_eq!(Kind::of(0x10de, 0x030000), Some(Kind::Gpu));
        assert_eq!(
            Kind::of(0x10de, 0x040300),
            None,
            "the GPU's HDMI audio function"
        );
        assert_eq!(Kind::of(0x10de, 0x068000), Some(Kind::NvSwitch));
        assert_eq!(Kind::of(0x15b3, 0x020700), Some(Kind::Nic));
        assert_eq!(Kind::of(0x144d, 0x010802), Some(Kind::Nvme));
        assert_eq!(Kind::of(0x1af4, 0x010000), None, "virtio block");
        // drivers/pci/pcie/aer.c, 6.x: one line per bit, then the total.
        let text = "RxErr 3\nBadTLP 0\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 4\n";
        assert_eq!(parse_aer(text), Some(4));
        assert_eq!(parse_aer("Undefined 0\nDLP 2\n"), Some(2));
        assert_eq!(parse_aer("garbage"), None);
        assert_eq!(parse_speed("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(parse_speed("8 GT/s\n"), Some(8.0));
        assert_eq!(parse_speed("Unknown\n"), None);
        assert_eq!(parse_speed("Unknown speed\n"), None);
        assert_eq!(parse_width("16\n"), Some(16));
        assert_eq!(parse_width("0\n"), None);
        assert_eq!(parse_width("255\n"), None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_hex(&s);
            let _ = parse_aer(&s);
            let _ = parse_speed(&s);
            let _ = parse_width(&s);
        }

        #[test]
        fn parses_what_the_kernel_prints(rx in 0u64..1 << 40, bad in 0u64..1 << 40, w in 1u32..=32, gen in 0usize..6) {
            let total = rx + bad;
            let text = format!("RxErr {rx}\nBadTLP {bad}\nTOTAL_ERR_COR {total}\n");
            prop_assert_eq!(parse_aer(&text), Some(total));
            prop_assert_eq!(parse_width(&format!("{w}\n")), Some(w));
            let speeds = ["2.5", "5.0", "8.0", "16.0", "32.0", "64.0"];
            let want: f64 = speeds[gen].parse().unwrap();
            prop_assert_eq!(parse_speed(&format!("{} GT/s PCIe\n", speeds[gen])), Some(want));
        }
    }
}
