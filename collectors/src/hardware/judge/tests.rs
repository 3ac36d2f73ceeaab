use super::*;
use crate::hardware::mdstat::Array;
use crate::hardware::sample::{
    ControllerState, CrashRecord, DiskErrors, DiskMount, LogEvents, MemoryCounters,
};

fn counters(
    name: &str,
    label: Option<&str>,
    ce: u64,
    ue: Option<u64>,
    window: u64,
) -> MemoryCounters {
    MemoryCounters {
        name: name.into(),
        label: label.map(str::to_string),
        ce_total: ce,
        ue_total: ue,
        ce_in_window: window,
    }
}

fn events(subject: &str, kinds: &[&str], count: u64, ago: u64, worst: &str) -> LogEvents {
    LogEvents {
        subject: subject.into(),
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        count,
        last_seen_seconds_ago: Some(ago),
        worst: worst.into(),
        line: None,
    }
}

fn ids(d: &[Draft]) -> Vec<(&str, Severity)> {
    d.iter().map(|d| (d.id.as_str(), d.severity)).collect()
}

#[test]
fn uncorrected_is_critical_and_corrected_warns_only_in_bursts() {
    let t = Thresholds::default();
    let mut s = HardwareSample {
        edac: Some(vec![ControllerState {
            controller: counters("mc0", None, 9, Some(0), 9),
            dimms: vec![counters("mc0/dimm0", Some("DIMM_A1"), 9, Some(0), 9)],
        }]),
        ..HardwareSample::default()
    };
    // 9 corrected errors are below the burst: info, not a warning.
    let d = judge(&s, &t);
    assert_eq!(ids(&d), vec![("hardware.memory_corrected", Severity::Info)]);
    assert!(d[0].conditions.contains("below_burst"));
    assert_eq!(d[0].evidence["ce_in_window"].as_f64(), Some(9.0));
    // None within the window (a counter that has not risen): nothing.
    let e = s.edac.as_mut().unwrap();
    e[0].controller = counters("mc0", None, 500, Some(0), 0);
    e[0].dimms[0] = counters("mc0/dimm0", Some("DIMM_A1"), 500, Some(0), 0);
    assert!(judge(&s, &t).is_empty());
    let e = s.edac.as_mut().unwrap();
    e[0].controller = counters("mc0", None, 12, Some(1), 12);
    e[0].dimms[0] = counters("mc0/dimm0", Some("DIMM_A1"), 12, Some(1), 12);
    let d = judge(&s, &t);
    assert_eq!(
        ids(&d),
        vec![
            ("hardware.memory_uncorrected", Severity::Critical),
            ("hardware.memory_corrected", Severity::Warning)
        ]
    );
    assert_eq!(d[0].evidence["dimms"].as_str(), Some("DIMM_A1"));
    assert_eq!(d[1].evidence["dimms"].as_str(), Some("DIMM_A1 (12)"));
}

#[test]
fn kernel_log_events_decay() {
    let t = Thresholds::default();
    let s = HardwareSample {
        machine_checks: vec![
            events("cpu3", &["bank 7"], 1, 60, "machine_check"),
            events(
                "memory_failure",
                &["0x1a2b3c not_recovered"],
                1,
                60,
                "not_recovered",
            ),
        ],
        cper: vec![
            events("fatal", &["memory error"], 1, 60, "fatal"),
            events("recoverable", &["PCIe error"], 1, 7200, "recoverable"),
            events("corrected", &["memory error"], 3, 60, "corrected"),
        ],
        ..HardwareSample::default()
    };
    assert_eq!(
        ids(&judge(&s, &t)),
        vec![
            ("hardware.machine_check", Severity::Warning),
            ("hardware.machine_check", Severity::Critical),
            ("hardware.cper", Severity::Critical),
            ("hardware.cper", Severity::Info),
            ("hardware.cper", Severity::Info),
        ]
    );
}

/// One corrected line below the burst is an info finding that keeps the line (the Event's
/// message under node-problem-detector's names); at the burst it warns.
#[test]
fn a_single_corrected_line_is_info_with_its_line_and_a_burst_warns() {
    let t = Thresholds::default();
    let line = "EDAC MC0: 1 CE memory read error on DIMM_A1 (channel:0 slot:0 page:0x1 offset:0x0 grain:32 syndrome:0x0)";
    let cper_line = "{7}[Hardware Error]: event severity: corrected";
    let mut s = HardwareSample {
        edac_ce_lines: vec![LogEvents {
            line: Some(line.into()),
            ..events("mc0", &["DIMM_A1"], 1, 30, "logged")
        }],
        cper: vec![LogEvents {
            line: Some(cper_line.into()),
            ..events("corrected", &["memory error"], 1, 30, "corrected")
        }],
        ..HardwareSample::default()
    };
    let d = judge(&s, &t);
    assert_eq!(
        ids(&d),
        vec![
            ("hardware.memory_corrected", Severity::Info),
            ("hardware.cper", Severity::Info)
        ]
    );
    assert_eq!(d[0].evidence["line"].as_str(), Some(line));
    assert_eq!(d[0].evidence["ce_in_window"].as_f64(), Some(1.0));
    assert!(d[0].conditions.contains("logged") && d[0].conditions.contains("below_burst"));
    assert_eq!(d[1].evidence["line"].as_str(), Some(cper_line));
    assert!(d[1].conditions.contains("corrected") && d[1].conditions.contains("below_burst"));
    s.edac_ce_lines[0].count = t.corrected_burst;
    s.cper[0].count = t.corrected_burst;
    let d = judge(&s, &t);
    assert_eq!(
        ids(&d),
        vec![
            ("hardware.memory_corrected", Severity::Warning),
            ("hardware.cper", Severity::Warning)
        ]
    );
    assert!(!d[0].conditions.contains("below_burst"));
    assert!(!d[1].conditions.contains("below_burst"));
}

#[test]
fn crashes_disks_raid_and_taint() {
    let t = Thresholds::default();
    let crash = |kind, age| CrashRecord {
        file: "/sys/fs/pstore/dmesg-efi-1".into(),
        source: "pstore",
        kind,
        line: "x".into(),
        age_seconds: Some(age),
    };
    let s = HardwareSample {
        crashes: vec![crash(CrashKind::Panic, 60), crash(CrashKind::Oops, 200_000)],
        hardware_corrupted_bytes: Some(4096),
        disks: vec![DiskErrors {
            events: events("sdb", &["I/O"], 2, 30, "error"),
            mounts: vec![DiskMount {
                source: "/dev/sdb1".into(),
                mount_point: "/var/lib/kubelet".into(),
                fstype: "ext4".into(),
            }],
            pods_affected: true,
            sector: Some(1234),
        }],
        arrays: vec![Array {
            name: "md0".into(),
            active: true,
            level: "raid1".into(),
            failed: vec!["sdb1".into()],
            wanted: Some(2),
            working: Some(1),
            sync: None,
        }],
        bad_blocks: vec![("sdc".into(), 2)],
        taint: Some((1 << 7) | 1 | (1 << 12)),
        taint_before: Some(1 | (1 << 12)),
        ..HardwareSample::default()
    };
    let d = judge(&s, &t);
    assert_eq!(
        ids(&d),
        vec![
            ("hardware.previous_crash", Severity::Critical),
            ("hardware.previous_crash", Severity::Info),
            ("hardware.poisoned_pages", Severity::Warning),
            ("hardware.io_error", Severity::Critical),
            ("hardware.raid_degraded", Severity::Critical),
            ("hardware.bad_blocks", Severity::Warning),
            ("hardware.kernel_taint", Severity::Warning),
        ]
    );
    let taint = d.last().unwrap();
    assert!(taint.is("appeared"));
    assert_eq!(
        taint.evidence["flags"].as_str(),
        Some("D (bit 7, kernel died (oops or BUG))")
    );
}

#[test]
fn benign_taint_and_nothing_else_is_quiet() {
    let s = HardwareSample {
        taint: Some(1 | (1 << 12) | (1 << 13)),
        hardware_corrupted_bytes: Some(0),
        ..HardwareSample::default()
    };
    assert!(judge(&s, &Thresholds::default()).is_empty());
}
