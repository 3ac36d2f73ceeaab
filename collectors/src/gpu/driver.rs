//! The NVIDIA driver's view of its GPUs without NVML: `/proc/driver/nvidia/gpus/<bdf>/`
//! (one directory per GPU the driver attached) and its `information` file, and the device
//! nodes `/dev/nvidia[0-9]*`. The driver's `information` file (R450+; tabs shown as spaces):
//!
//! ```text
//! Model:           NVIDIA L4
//! GPU UUID:        GPU-3291dfa4-fcc4-0110-615b-c894a0d7c689
//! Bus Location:    0000:70:00.0
//! Device Minor:    0
//! GPU Excluded:    No
//! ```
//!
//! `/proc/driver/nvidia` missing means the driver is not loaded: not a finding by itself (a
//! node being set up, the GPU Operator still installing), a note.

use crate::host::HostPaths;
use crate::hostfs;

use super::lines::{normalize_bdf, Bdf};

/// GPU directories listed at most.
const MAX_GPUS: usize = 256;
/// `/dev` entries looked at at most when counting the device nodes.
const MAX_DEV_ENTRIES: usize = 16_384;

/// What the driver's `information` file says of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Information {
    pub model: Option<String>,
    pub uuid: Option<String>,
    pub minor: Option<u32>,
    /// `GPU Excluded: Yes`: the driver keeps the GPU out of use (`NVreg_ExcludedGpus`, or a
    /// GPU that failed its checks).
    pub excluded: bool,
}

/// Parses an `information` file; unknown lines are skipped.
pub fn parse_information(text: &str) -> Information {
    let mut info = Information::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "Model" => info.model = Some(crate::bounded::prefix_owned(v, 128)),
            "GPU UUID" if v.starts_with("GPU-") && v.len() <= 64 => {
                info.uuid = Some(v.to_string());
            }
            "Device Minor" => info.minor = v.parse().ok(),
            "GPU Excluded" => info.excluded = v.eq_ignore_ascii_case("yes"),
            _ => {}
        }
    }
    info
}

/// The driver's GPUs by PCI address, or `None` when the driver is not loaded.
pub fn gpus(host: &HostPaths) -> Option<Vec<Bdf>> {
    let dir = host.proc_file("driver/nvidia/gpus");
    let entries = hostfs::dir_entries(&dir, MAX_GPUS).ok()?;
    let mut v: Vec<Bdf> = entries
        .filter_map(|e| e.file_name().to_str().and_then(normalize_bdf))
        .collect();
    v.sort();
    Some(v)
}

/// One GPU's `information` file, when readable.
pub fn information(host: &HostPaths, bdf: &str) -> Option<Information> {
    let path = host
        .proc_file("driver/nvidia/gpus")
        .join(bdf)
        .join("information");
    hostfs::read_text(&path, hostfs::cap::VALUE)
        .ok()
        .map(|t| parse_information(&t))
}

/// How many `/dev/nvidiaN` nodes the host has (`None` when `/dev` is not readable).
pub fn device_nodes(host: &HostPaths) -> Option<u32> {
    let entries = hostfs::dir_entries(&host.join("/dev"), MAX_DEV_ENTRIES).ok()?;
    let n = entries
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix("nvidia")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .count();
    u32::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Verbatim from https://github.com/canonical/snapd/pull/14893 (an L4's file).
    const L4: &str = "Model: \t\t NVIDIA L4\nIRQ:   \t\t 16\nGPU UUID: \t GPU-3291dfa4-fcc4-0110-615b-c894a0d7c689\nVideo BIOS: \t 95.04.65.00.13\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t 0000:70:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n";

    #[test]
    fn reads_the_drivers_information_file() {
        let i = parse_information(L4);
        assert_eq!(i.model.as_deref(), Some("NVIDIA L4"));
        assert_eq!(
            i.uuid.as_deref(),
            Some("GPU-3291dfa4-fcc4-0110-615b-c894a0d7c689")
        );
        assert_eq!(i.minor, Some(0));
        assert!(!i.excluded);
        assert!(
            parse_information(&L4.replace("GPU Excluded:\t No", "GPU Excluded:\t Yes")).excluded
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_information(&s);
        }

        #[test]
        fn parses_what_the_driver_prints(minor in 0u32..64, excluded: bool, a in 0u32.., b in 0u16..) {
            let uuid = format!("GPU-{a:08x}-{b:04x}-0110-615b-c894a0d7c689");
            let text = format!("Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\nGPU Excluded:\t {}\n", if excluded { "Yes" } else { "No" });
            let i = parse_information(&text);
            prop_assert_eq!(i.uuid, Some(uuid));
            prop_assert_eq!(i.minor, Some(minor));
            prop_assert_eq!(i.excluded, excluded);
        }
    }
}
