//! A staged GPU node's host root, for the gpu collector's bench (`collectors/benches/gpu.rs`)
//! and the cost bench's GPU host kind (`scripts/bench-cost.sh --gpu-hosts`, through
//! `collectors/examples/stage_gpu_node.rs`): 64 PCI devices in sysfs' layout (each directory
//! under `sys/devices/pci0000:00[/port]` and its link in `sys/bus/pci/devices`), healthy. With
//! `gpus`, 8 NVIDIA H100 (3D controllers, each behind its own switch port, Gen5 x16) that the
//! driver's `proc/driver/nvidia/gpus` and `dev/nvidia[0-7]` show too; without, the same slots
//! hold non-GPU devices, so the two roots differ only in the GPUs. Also 2 ConnectX NICs and 2
//! NVMe drives behind 4 ports, 40 other devices, `proc/uptime` and an empty `dev/kmsg`.

use std::io;
use std::path::Path;

fn write(root: &Path, p: &str, s: &str) -> io::Result<()> {
    let p = root.join(p);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(p, s)
}

const AER: &str = "RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 0\n";

/// A device under `sys/devices/pci0000:00[/port]` with its `sys/bus/pci/devices` link; a PCIe
/// one has a trained link at its best and zero AER counters.
fn device(
    root: &Path,
    bdf: &str,
    port: Option<&str>,
    (vendor, class): (u16, u32),
    pcie: bool,
) -> io::Result<()> {
    let rel = match port {
        Some(p) => format!("pci0000:00/{p}/{bdf}"),
        None => format!("pci0000:00/{bdf}"),
    };
    let dir = format!("sys/devices/{rel}");
    write(root, &format!("{dir}/vendor"), &format!("0x{vendor:04x}\n"))?;
    write(root, &format!("{dir}/class"), &format!("0x{class:06x}\n"))?;
    if pcie {
        for (f, v) in [
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_width", "16"),
        ] {
            write(root, &format!("{dir}/{f}"), &format!("{v}\n"))?;
        }
        write(root, &format!("{dir}/aer_dev_correctable"), AER)?;
        write(
            root,
            &format!("{dir}/aer_dev_nonfatal"),
            "TOTAL_ERR_NONFATAL 0\n",
        )?;
        write(root, &format!("{dir}/aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n")?;
    }
    let devices = root.join("sys/bus/pci/devices");
    std::fs::create_dir_all(&devices)?;
    std::os::unix::fs::symlink(format!("../../../devices/{rel}"), devices.join(bdf))
}

/// Stages the node under `root` (an empty directory).
pub fn stage(root: &Path, gpus: bool) -> io::Result<()> {
    const PORT: (u16, u32) = (0x8086, 0x060400);
    const OTHER: (u16, u32) = (0x8086, 0x088000);
    write(root, "proc/uptime", "7200.00 1.00\n")?;
    write(root, "dev/kmsg", "")?;
    for i in 0..8u32 {
        let port = format!("0000:{:02x}:01.0", 0x17 + i * 0x10);
        let gpu = format!("0000:{:02x}:00.0", 0x18 + i * 0x10);
        device(root, &port, None, PORT, true)?;
        if !gpus {
            device(root, &gpu, Some(&port), OTHER, false)?;
            continue;
        }
        device(root, &gpu, Some(&port), (0x10de, 0x030200), true)?;
        write(
            root,
            &format!("proc/driver/nvidia/gpus/{gpu}/information"),
            &format!("Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-3291dfa4-fcc4-0110-615b-c894a0d7c6{i:02x}\nDevice Minor: \t {i}\nGPU Excluded:\t No\n"),
        )?;
        write(root, &format!("dev/nvidia{i}"), "")?;
    }
    for (i, class) in [0x020000u32, 0x020000, 0x010802, 0x010802]
        .iter()
        .enumerate()
    {
        let port = format!("0000:{:02x}:01.0", 0xa0 + i * 2);
        device(root, &port, None, PORT, true)?;
        let dev = format!("0000:{:02x}:00.0", 0xa1 + i * 2);
        device(root, &dev, Some(&port), (0x15b3, *class), true)?;
    }
    for i in 0..40u32 {
        let bdf = format!("0000:00:{:02x}.{}", 4 + i / 8, i % 8);
        device(root, &bdf, None, OTHER, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both roots hold 64 devices; only the GPU root has GPUs and the driver's view of them.
    #[test]
    fn stages_64_devices_with_and_without_the_gpus() {
        for gpus in [true, false] {
            let t = tempfile::tempdir().unwrap();
            stage(t.path(), gpus).unwrap();
            let n = std::fs::read_dir(t.path().join("sys/bus/pci/devices"))
                .unwrap()
                .count();
            assert_eq!(n, 64);
            let nvidia = std::fs::read_dir(t.path().join("sys/bus/pci/devices"))
                .unwrap()
                .filter(|e| {
                    let v = e.as_ref().unwrap().path().join("vendor");
                    std::fs::read_to_string(v).unwrap() == "0x10de\n"
                })
                .count();
            assert_eq!(nvidia, if gpus { 8 } else { 0 });
            assert_eq!(t.path().join("proc/driver/nvidia").exists(), gpus);
        }
    }
}
