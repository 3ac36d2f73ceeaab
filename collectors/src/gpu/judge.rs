//! The gpu rules: a typed [`GpuSample`] to drafts (no words; `collectors/rules/gpu.toml`).
//!
//! - `gpu.xid`: one finding per GPU for its Xids of this boot. Its class decides: the
//!   application's (13, 31, 43, 45…) is info and never escalates; `watch`, `legacy`, an
//!   unknown Xid and NVLink5's Nonfatal lines warn; reset, reboot, hardware, a fallen-off GPU,
//!   an adapter that failed to initialise and a recovery action other than None are critical
//!   and set `NodeDoctorAcceleratorFailure`. A repeat (bursts, or this boot after an earlier
//!   boot's) makes a warning critical and turns the advice to the vendor. Earlier boots alone
//!   raise nothing.
//! - `gpu.sxid`: one per NVSwitch; a Fatal SXid is critical.
//! - `gpu.unavailable`: a GPU the bus shows that the loaded driver lost, or that it excluded.
//! - `gpu.pcie_errors`: AER errors of a device, from its counters' rises between two
//!   readings and the kernel log's reports.
//! - `gpu.pcie_link_degraded`: a link trained narrower (or, except a GPU's, slower) than both
//!   its ends can.

use crate::finding::Severity;
use crate::rules::Draft;

use super::pci::Kind;
use super::sample::{AerLines, DeviceState, GpuSample, GpuState, SwitchEvents, XidEvents};
use super::thresholds::Thresholds;
use super::xids::{self, Class};

/// Every draft of one sample.
pub fn judge(s: &GpuSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for g in &s.gpus {
        if let Some(x) = &g.xids {
            out.push(xid(g, x, t).var("lookback_seconds", s.lookback_seconds));
        }
        if let Some(d) = unavailable(g, s) {
            out.push(d);
        }
    }
    out.extend(s.switches.iter().map(sxid));
    out.extend(pcie_errors(s, t));
    out.extend(s.devices.iter().filter_map(link_degraded));
    out
}

/// The condition naming the advice of a class (exactly one per `gpu.xid`).
fn group(c: Class) -> &'static str {
    match c {
        Class::Ignore | Class::App => "benign",
        Class::Watch | Class::Legacy | Class::Driver | Class::Nvlink5 => "watch",
        Class::Unknown => "unknown",
        Class::Reset | Class::Recovery => "reset",
        Class::Reboot => "reboot",
        Class::Hardware => "hardware",
    }
}

fn xid(g: &GpuState, x: &XidEvents, t: &Thresholds) -> Draft {
    let benign = x.worst.benign() && !x.fallen_off && !x.init_failed;
    let unusable = x.worst.unusable() || x.fallen_off || x.init_failed;
    let earlier = g.earlier_boots.as_ref().filter(|e| !e.worst.benign());
    let across_reboot = !benign && earlier.is_some();
    let repeated = !benign && (x.bursts >= t.repeat_bursts || across_reboot);
    let severity = if benign {
        Severity::Info
    } else if unusable || repeated {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let grp = if x.fallen_off || x.init_failed {
        "reboot"
    } else {
        group(x.worst)
    };
    let listed: Vec<String> = x
        .xids
        .iter()
        .map(|(id, n)| {
            if *n > 1 {
                format!("{id} ×{n}")
            } else {
                id.to_string()
            }
        })
        .collect();
    Draft::new("gpu.xid", severity)
        .subject(g.bdf.clone())
        .evidence("gpu", g.bdf.clone())
        .evidence_opt("uuid", g.uuid.clone())
        .evidence("lines", x.lines)
        .evidence("bursts", x.bursts)
        .evidence("xids", listed.join(", "))
        .evidence_opt("xid", x.worst_xid)
        .evidence_opt("mnemonic", x.worst_xid.and_then(xids::mnemonic))
        .evidence_opt(
            "recovery_action",
            x.recovery_action.as_ref().map(|(_, n)| n.clone()),
        )
        .evidence_opt("last_seen_seconds_ago", x.last_seen_seconds_ago)
        .evidence_opt("earlier_boot_lines", earlier.map(|e| e.lines))
        .evidence_opt(
            "earlier_boot_xids",
            earlier.map(|e| {
                e.xids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        )
        .evidence("line", x.line.clone())
        .when(grp)
        .when_if("fallen_off", x.fallen_off)
        .when_if("init_failed", x.init_failed)
        .when_if("repeated", repeated)
        .when_if("across_reboot", across_reboot)
        .when_if("flood", x.lines > x.bursts.saturating_mul(10))
}

fn unavailable(g: &GpuState, s: &GpuSample) -> Option<Draft> {
    let missing = g.on_bus && g.in_driver == Some(false);
    if !missing && !g.excluded {
        return None;
    }
    let on_bus = s.gpus.iter().filter(|g| g.on_bus).count() as u64;
    let in_driver = s.gpus.iter().filter(|g| g.in_driver == Some(true)).count() as u64;
    Some(
        Draft::new("gpu.unavailable", Severity::Critical)
            .subject(g.bdf.clone())
            .evidence("gpu", g.bdf.clone())
            .evidence_opt("uuid", g.uuid.clone())
            .evidence_opt("model", g.model.clone())
            .evidence("gpus_on_bus", on_bus)
            .evidence("gpus_in_driver", in_driver)
            .evidence_opt("device_nodes", s.device_nodes)
            .when_if("missing", missing)
            .when_if("excluded", !missing && g.excluded),
    )
}

fn sxid(w: &SwitchEvents) -> Draft {
    let severity = if w.fatal > 0 {
        Severity::Critical
    } else {
        Severity::Info
    };
    Draft::new("gpu.sxid", severity)
        .subject(w.bdf.clone())
        .evidence("switch", w.bdf.clone())
        .evidence("fatal", w.fatal)
        .evidence("nonfatal", w.nonfatal)
        .evidence(
            "sxids",
            w.sxids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        )
        .evidence_opt("last_seen_seconds_ago", w.last_seen_seconds_ago)
        .evidence("line", w.line.clone())
        .when_if("fatal", w.fatal > 0)
}

/// AER errors per device: its counters' rises and the kernel log's reports about it.
fn pcie_errors(s: &GpuSample, t: &Thresholds) -> Vec<Draft> {
    let mut subjects: Vec<&str> = s
        .devices
        .iter()
        .filter(|d| d.aer.is_some())
        .map(|d| d.bdf.as_str())
        .chain(s.aer_lines.iter().map(|l| l.bdf.as_str()))
        .collect();
    subjects.sort_unstable();
    subjects.dedup();
    subjects
        .into_iter()
        .filter_map(|b| {
            let dev = s.devices.iter().find(|d| d.bdf == b);
            let lines = s.aer_lines.iter().find(|l| l.bdf == b);
            pcie_error(b, dev, lines, t)
        })
        .collect()
}

fn pcie_error(
    bdf: &str,
    dev: Option<&DeviceState>,
    lines: Option<&AerLines>,
    t: &Thresholds,
) -> Option<Draft> {
    let delta = dev.and_then(|d| d.aer);
    let fatal = delta.map_or(0, |d| d.fatal) + lines.map_or(0, |l| l.fatal);
    let nonfatal = delta.map_or(0, |d| d.nonfatal) + lines.map_or(0, |l| l.nonfatal);
    let per_hour = delta
        .filter(|d| d.seconds > 0.0)
        .map(|d| d.correctable as f64 * 3600.0 / d.seconds);
    let counted = delta.is_some_and(|d| d.correctable >= t.corrected_min)
        && per_hour.is_some_and(|r| r >= t.corrected_per_hour);
    let logged = lines.is_some_and(|l| l.corrected >= t.corrected_lines);
    let corrected = delta.map_or(0, |d| d.correctable) + lines.map_or(0, |l| l.corrected);
    let severity = if fatal > 0 {
        Severity::Critical
    } else if nonfatal > 0 || counted || logged {
        Severity::Warning
    } else {
        return None;
    };
    let kind = dev.map(|d| d.kind).or(lines.and_then(|l| l.kind));
    let on_gpu = kind == Some(Kind::Gpu);
    Some(
        Draft::new("gpu.pcie_errors", severity)
            .subject(bdf.to_string())
            .evidence("device", bdf.to_string())
            .evidence("kind", kind.map_or("device", Kind::as_str))
            .evidence("fatal", fatal)
            .evidence("nonfatal", nonfatal)
            .evidence("corrected", corrected)
            .evidence_opt("corrected_per_hour", per_hour.map(|r| r.round()))
            .evidence_opt("interval_seconds", delta.map(|d| d.seconds.round()))
            .evidence_opt("below", dev.and_then(|d| d.below.clone()))
            .evidence_opt("line", lines.map(|l| l.line.clone()))
            .when_if("fatal", fatal > 0)
            .when_if("nonfatal", fatal == 0 && nonfatal > 0)
            .when_if("corrected", fatal == 0 && nonfatal == 0)
            .when_if("from_counters", delta.is_some())
            .when_if("from_log", lines.is_some())
            .when_if("gpu", on_gpu),
    )
}

fn link_degraded(d: &DeviceState) -> Option<Draft> {
    let narrower = matches!((d.width, d.max_width), (Some(w), Some(m)) if w < m);
    // A GPU (and the port above it) lowers its link speed when idle: only its width counts.
    let gpu_link = d.kind == Kind::Gpu || d.below_kind == Some(Kind::Gpu);
    let slower = !gpu_link && matches!((d.speed, d.max_speed), (Some(s), Some(m)) if s + 0.01 < m);
    if !narrower && !slower {
        return None;
    }
    Some(
        Draft::new("gpu.pcie_link_degraded", Severity::Warning)
            .subject(d.bdf.clone())
            .evidence("device", d.bdf.clone())
            .evidence("kind", d.kind.as_str())
            .evidence_opt("width", d.width)
            .evidence_opt("max_width", d.max_width)
            .evidence_opt("speed_gts", d.speed)
            .evidence_opt("max_speed_gts", d.max_speed)
            .evidence_opt("below", d.below.clone())
            .when_if("narrower", narrower)
            .when_if("slower", slower),
    )
}

#[cfg(test)]
mod tests;
