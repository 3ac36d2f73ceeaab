//! The hardware rules: a typed [`HardwareSample`] (from [`sample`](super::sample)) -> drafts
//! under the [`Thresholds`] of [`thresholds`](super::thresholds). Their words are in
//! `collectors/rules/hardware.toml`. Pure: testable without files.
//!
//! Severity follows the consequence: an uncorrected memory error, a fatal CPER record, a
//! panic the previous boot left, a degraded array without a rebuild and an NVMe controller
//! that is not live are critical ("cordon, drain, replace"); corrected errors warn only in
//! bursts, and below one are an info finding (node-problem-detector writes an Event for each
//! line: `MemoryReadError`, `CperHardwareErrorCorrected`); one-off kernel-log lines decay with
//! their age ([`Phase`]).

use crate::finding::Severity;
use crate::kmsg::decay::{self, Phase};
use crate::rules::Draft;

use super::sample::{CrashKind, HardwareSample, LogEvents};
use super::taint;
use super::thresholds::Thresholds;

/// Applies every hardware rule.
pub fn judge(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(memory_uncorrected(s));
    out.extend(memory_corrected(s, t));
    out.extend(machine_checks(s, t));
    out.extend(cper(s, t));
    out.extend(previous_crash(s, t));
    out.extend(poisoned_pages(s, t));
    out.extend(nvme(s, t));
    out.extend(io_errors(s, t));
    out.extend(raid(s));
    out.extend(bad_blocks(s));
    out.extend(kernel_taint(s));
    out
}

fn phase(e: &LogEvents, t: &Thresholds) -> Phase {
    Phase::of(None, e.last_seen_seconds_ago, t.recent_seconds)
}

fn joined(words: &[String]) -> String {
    words.join(", ")
}

fn log_labels(lines: &[LogEvents], controller: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|e| e.subject == controller)
        .flat_map(|e| e.kinds.iter().cloned())
        .collect()
}

/// The latest kernel line logged for `controller`, if any.
fn log_line(lines: &[LogEvents], controller: &str) -> Option<String> {
    lines
        .iter()
        .filter(|e| e.subject == controller)
        .find_map(|e| e.line.clone())
}

fn log_count(lines: &[LogEvents], controller: &str) -> u64 {
    lines
        .iter()
        .filter(|e| e.subject == controller)
        .map(|e| e.count)
        .sum()
}

/// Controllers named by the counters or the log, in order.
fn controllers(s: &HardwareSample, lines: &[LogEvents]) -> Vec<String> {
    let mut names: Vec<String> = s
        .edac
        .iter()
        .flatten()
        .map(|c| c.controller.name.clone())
        .chain(lines.iter().map(|e| e.subject.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `hardware.memory_uncorrected`: a memory controller counted an uncorrected error (or the
/// kernel logged one).
fn memory_uncorrected(s: &HardwareSample) -> Vec<Draft> {
    let mut out = Vec::new();
    for mc in controllers(s, &s.edac_ue_lines) {
        let state = s.edac.iter().flatten().find(|c| c.controller.name == mc);
        let counted = state.and_then(|c| c.controller.ue_total).unwrap_or(0);
        let logged = log_count(&s.edac_ue_lines, &mc);
        if counted == 0 && logged == 0 {
            continue;
        }
        let mut labels: Vec<String> = state
            .map(|c| {
                c.dimms
                    .iter()
                    .filter(|d| d.ue_total.unwrap_or(0) > 0)
                    .map(|d| d.label.clone().unwrap_or_else(|| d.name.clone()))
                    .collect()
            })
            .unwrap_or_default();
        labels.extend(log_labels(&s.edac_ue_lines, &mc));
        labels.sort();
        labels.dedup();
        out.push(
            Draft::new("hardware.memory_uncorrected", Severity::Critical)
                .subject(mc.clone())
                .evidence("controller", mc.clone())
                .evidence("ue_count", counted.max(logged))
                .evidence_opt("ce_count", state.map(|c| c.controller.ce_total))
                .evidence_opt("dimms", (!labels.is_empty()).then(|| joined(&labels)))
                .when_if("logged", counted == 0),
        );
    }
    out
}

/// `hardware.memory_corrected`: corrected memory errors on one controller within the window;
/// a warning at the burst threshold, info below it.
fn memory_corrected(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for mc in controllers(s, &s.edac_ce_lines) {
        let state = s.edac.iter().flatten().find(|c| c.controller.name == mc);
        let counted = state.map_or(0, |c| c.controller.ce_in_window);
        let logged = log_count(&s.edac_ce_lines, &mc);
        let in_window = counted.max(logged);
        if in_window == 0 {
            continue;
        }
        let burst = in_window >= t.corrected_burst;
        let mut labels: Vec<String> = state
            .map(|c| {
                c.dimms
                    .iter()
                    .filter(|d| d.ce_in_window > 0)
                    .map(|d| {
                        let n = d.label.clone().unwrap_or_else(|| d.name.clone());
                        format!("{n} ({})", d.ce_in_window)
                    })
                    .collect()
            })
            .unwrap_or_default();
        if labels.is_empty() {
            labels = log_labels(&s.edac_ce_lines, &mc);
            labels.sort();
            labels.dedup();
        }
        let severity = if burst {
            Severity::Warning
        } else {
            Severity::Info
        };
        out.push(
            Draft::new("hardware.memory_corrected", severity)
                .subject(mc.clone())
                .evidence("controller", mc.clone())
                .evidence("ce_in_window", in_window)
                .evidence("threshold", t.corrected_burst)
                .evidence("window_seconds", t.corrected_window_seconds)
                .evidence_opt("ce_count", state.map(|c| c.controller.ce_total))
                .evidence_opt("dimms", (!labels.is_empty()).then(|| joined(&labels)))
                .evidence_opt("line", log_line(&s.edac_ce_lines, &mc))
                .when_if("logged", counted < logged)
                .when_if("below_burst", !burst),
        );
    }
    out
}

/// `hardware.machine_check`: machine checks and poisoned-page recoveries in the kernel log.
fn machine_checks(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    s.machine_checks
        .iter()
        .map(|e| {
            let p = phase(e, t);
            let not_recovered = e.worst == "not_recovered";
            let severity = match (not_recovered, p) {
                (true, Phase::Past) => Severity::Warning,
                (true, _) => Severity::Critical,
                (false, Phase::Past) => Severity::Info,
                (false, _) => Severity::Warning,
            };
            Draft::new("hardware.machine_check", severity)
                .subject(e.subject.clone())
                .evidence("reported_by", e.subject.clone())
                .evidence("events", e.count)
                .evidence("kinds", joined(&e.kinds))
                .evidence("lookback_seconds", s.lookback_seconds)
                .evidence_opt("last_seen_seconds_ago", e.last_seen_seconds_ago)
                .var("recent_seconds", t.recent_seconds)
                .when(if p == Phase::Past { "past" } else { "recent" })
                .when_if("memory_failure", e.subject == "memory_failure")
                .when_if("not_recovered", not_recovered)
        })
        .collect()
}

/// `hardware.cper`: firmware-reported (APEI/CPER) hardware errors by severity.
fn cper(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for e in &s.cper {
        let p = phase(e, t);
        let recent = p != Phase::Past;
        let severity = match e.subject.as_str() {
            "fatal" if recent => Severity::Critical,
            "fatal" => Severity::Warning,
            "recoverable" if recent => Severity::Warning,
            "recoverable" => Severity::Info,
            "corrected" if e.count >= t.corrected_burst => decay::lower(Severity::Critical),
            "corrected" => Severity::Info,
            _ => continue,
        };
        out.push(
            Draft::new("hardware.cper", severity)
                .subject(e.subject.clone())
                .evidence("severity_reported", e.subject.clone())
                .evidence("records", e.count)
                .evidence("sections", joined(&e.kinds))
                .evidence("lookback_seconds", s.lookback_seconds)
                .evidence_opt("last_seen_seconds_ago", e.last_seen_seconds_ago)
                .evidence_opt("line", e.line.clone())
                .var("threshold", t.corrected_burst)
                .when(e.subject.as_str())
                .when_if(
                    "below_burst",
                    e.subject == "corrected" && e.count < t.corrected_burst,
                )
                .when(if recent { "recent" } else { "past" }),
        );
    }
    out
}

/// `hardware.previous_crash`: pstore or kdump kept how an earlier boot died.
fn previous_crash(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    s.crashes
        .iter()
        .map(|c| {
            let recent = decay::is_recent(c.age_seconds, t.crash_recent_seconds);
            let severity = match (c.kind, recent) {
                (CrashKind::Panic, true) => Severity::Critical,
                (CrashKind::Panic, false) | (_, true) => Severity::Warning,
                (_, false) => Severity::Info,
            };
            Draft::new("hardware.previous_crash", severity)
                .subject(c.file.clone())
                .evidence("file", c.file.clone())
                .evidence("kind", c.kind.as_str())
                .evidence("line", c.line.clone())
                .evidence("source_kind", c.source)
                .evidence_opt("crash_age_seconds", c.age_seconds)
                .var("crash_recent_seconds", t.crash_recent_seconds)
                .when_if("panic", c.kind == CrashKind::Panic)
                .when_if("kdump", c.source == "kdump")
                .when(if recent { "recent" } else { "past" })
        })
        .collect()
}

/// `hardware.poisoned_pages`: `HardwareCorrupted` in `/proc/meminfo`.
fn poisoned_pages(s: &HardwareSample, t: &Thresholds) -> Option<Draft> {
    let bytes = s.hardware_corrupted_bytes.filter(|b| *b > 0)?;
    let severity = if bytes >= t.poisoned_critical_bytes {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(
        Draft::new("hardware.poisoned_pages", severity)
            .evidence("hardware_corrupted_bytes", bytes)
            .evidence("critical_bytes", t.poisoned_critical_bytes),
    )
}

/// `hardware.nvme`: NVMe controller timeouts, resets and removals, and controllers not live.
fn nvme(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    let mut names: Vec<String> = s
        .nvme
        .iter()
        .map(|e| e.subject.clone())
        .chain(s.nvme_not_live.iter().map(|(c, _)| c.clone()))
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for ctrl in names {
        let events = s.nvme.iter().find(|e| e.subject == ctrl);
        let state = s
            .nvme_not_live
            .iter()
            .find(|(c, _)| *c == ctrl)
            .map(|(_, st)| st.clone());
        let recent = events.is_none_or(|e| phase(e, t) != Phase::Past);
        let removed = events.is_some_and(|e| e.worst == "removed");
        let severity = if state.is_some() || (removed && recent) {
            Severity::Critical
        } else if recent || removed {
            Severity::Warning
        } else {
            Severity::Info
        };
        out.push(
            Draft::new("hardware.nvme", severity)
                .subject(ctrl.clone())
                .evidence("controller", ctrl.clone())
                .evidence("events", events.map_or(0, |e| e.count))
                .evidence_opt("kinds", events.map(|e| joined(&e.kinds)))
                .evidence_opt("state", state.clone())
                .evidence_opt(
                    "last_seen_seconds_ago",
                    events.and_then(|e| e.last_seen_seconds_ago),
                )
                .when_if("not_live", state.is_some())
                .when_if("removed", removed)
                .when(if recent { "recent" } else { "past" }),
        );
    }
    out
}

/// `hardware.io_error`: block-layer request errors on a disk, with what is mounted from it.
fn io_errors(s: &HardwareSample, t: &Thresholds) -> Vec<Draft> {
    s.disks
        .iter()
        .map(|d| {
            let p = phase(&d.events, t);
            let recent = p != Phase::Past;
            let severity = match (recent, d.pods_affected) {
                (true, true) => Severity::Critical,
                (true, false) | (false, true) => Severity::Warning,
                (false, false) => Severity::Info,
            };
            let mounts: Vec<String> = d
                .mounts
                .iter()
                .map(|m| format!("{} on {} ({})", m.source, m.mount_point, m.fstype))
                .collect();
            Draft::new("hardware.io_error", severity)
                .subject(d.events.subject.clone())
                .evidence("device", d.events.subject.clone())
                .evidence("errors", d.events.count)
                .evidence("kinds", joined(&d.events.kinds))
                .evidence("lookback_seconds", s.lookback_seconds)
                .evidence_opt("sector", d.sector)
                .evidence_opt("mounts", (!mounts.is_empty()).then(|| joined(&mounts)))
                .evidence_opt("last_seen_seconds_ago", d.events.last_seen_seconds_ago)
                .var("recent_seconds", t.recent_seconds)
                .when_if("pods_affected", d.pods_affected)
                .when(if recent { "recent" } else { "past" })
        })
        .collect()
}

/// `hardware.raid_degraded`: a software RAID array runs with fewer devices than it needs.
fn raid(s: &HardwareSample) -> Vec<Draft> {
    let mut out = Vec::new();
    for a in s.arrays.iter().filter(|a| a.degraded()) {
        let rebuilding = a
            .sync
            .as_ref()
            .is_some_and(|(k, _)| k == "recovery" || k == "reshape");
        let severity = if rebuilding {
            Severity::Warning
        } else {
            Severity::Critical
        };
        out.push(
            Draft::new("hardware.raid_degraded", severity)
                .subject(a.name.clone())
                .evidence("array", a.name.clone())
                .evidence("level", a.level.clone())
                .evidence("devices_wanted", a.wanted.unwrap_or(0))
                .evidence("devices_working", a.working.unwrap_or(0))
                .evidence_opt(
                    "failed_devices",
                    (!a.failed.is_empty()).then(|| a.failed.join(", ")),
                )
                .evidence_opt(
                    "rebuild_percent",
                    a.sync.as_ref().filter(|_| rebuilding).map(|(_, p)| *p),
                )
                .when_if("rebuilding", rebuilding),
        );
    }
    // Arrays sysfs calls degraded that /proc/mdstat did not show (or could not be read).
    for (name, missing) in &s.md_degraded {
        if *missing == 0 || s.arrays.iter().any(|a| a.name == *name) {
            continue;
        }
        out.push(
            Draft::new("hardware.raid_degraded", Severity::Critical)
                .subject(name.clone())
                .evidence("array", name.clone())
                .evidence("level", "unknown")
                .evidence("devices_wanted", 0u64)
                .evidence("devices_working", 0u64)
                .evidence("devices_missing", *missing),
        );
    }
    out
}

/// `hardware.bad_blocks`: a disk's bad-block list is not empty.
fn bad_blocks(s: &HardwareSample) -> Vec<Draft> {
    s.bad_blocks
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(dev, n)| {
            Draft::new("hardware.bad_blocks", Severity::Warning)
                .subject(dev.clone())
                .evidence("disk", dev.clone())
                .evidence("bad_ranges", *n)
        })
        .collect()
}

/// `hardware.kernel_taint`: the kernel carries a taint that says the machine or the kernel
/// failed (machine check, bad page, oops, soft lockup, warning); benign taints (proprietary,
/// out-of-tree, unsigned modules) are not named.
fn kernel_taint(s: &HardwareSample) -> Option<Draft> {
    let value = s.taint?;
    let flags = taint::flags(value);
    if flags.is_empty() {
        return None;
    }
    let before = s
        .taint_before
        .map(taint::flags)
        .unwrap_or_else(|| flags.clone());
    let new: Vec<char> = flags
        .iter()
        .filter(|f| !before.contains(f))
        .copied()
        .collect();
    let severity = if flags.contains(&'M') {
        Severity::Critical
    } else if flags.iter().any(|f| matches!(f, 'B' | 'D' | 'L')) {
        Severity::Warning
    } else {
        Severity::Info
    };
    let words = |v: &[char]| {
        v.iter()
            .filter_map(|f| taint::FLAGS.iter().find(|(_, c, _)| c == f))
            .map(|(bit, c, what)| format!("{c} (bit {bit}, {what})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(
        Draft::new("hardware.kernel_taint", severity)
            .evidence("tainted", value)
            .evidence("flags", words(&flags))
            .evidence_opt("new_flags", (!new.is_empty()).then(|| words(&new)))
            .when_if("appeared", !new.is_empty())
            .when_if("machine_check", flags.contains(&'M')),
    )
}

#[cfg(test)]
mod tests;
