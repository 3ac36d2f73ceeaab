//! The hardware collector on fake hosts: EDAC counters staged in the kernel's sysfs layout
//! (this VM's kernel has no EDAC driver), pstore and kdump crash records, poisoned pages,
//! RAID, bad blocks, taints, and the kernel log's hardware lines in each wording of the kernels
//! node-doctor meets (3.10, 5.4, 5.15, 6.8, 6.18; written by us in each kernel's format, from
//! the printk calls of that version: arch/x86/kernel/cpu/mce, mm/memory-failure.c,
//! drivers/acpi/apei/ghes.c + drivers/firmware/efi/cper.c, drivers/edac/edac_mc.c,
//! drivers/nvme/host/pci.c + core.c, block/blk-core.c / blk-mq.c).

use std::time::{Duration, SystemTime};

use collectors::hardware::{HardwareCollector, HardwareConfig};
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{self, FakeHost};

/// Uptime of every staged host: 2 h, so a record at 7000 s is 200 s old (recent) and one at
/// 4000 s is 3200 s old (past the 900 s decay, inside the 1 h lookback).
const UPTIME: &str = "7200.00 14000.00\n";

fn host() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", UPTIME)
        .write(
            "/proc/meminfo",
            "MemTotal: 8009924 kB\nHardwareCorrupted:     0 kB\n",
        )
        .write("/proc/sys/kernel/tainted", "0\n")
        .write("/dev/kmsg", "");
    h
}

/// Kernel-log records in `/dev/kmsg` format, `(usec, message)`.
fn kmsg(records: &[(u64, &str)]) -> String {
    records
        .iter()
        .enumerate()
        .map(|(i, (usec, m))| format!("3,{},{usec},-;{m}\n", 100 + i))
        .collect()
}

fn collector(h: &FakeHost) -> HardwareCollector {
    HardwareCollector::new(h.node(), HardwareConfig::default())
}

fn collect(h: &FakeHost) -> Collection {
    support::collect(&mut collector(h), &support::ctx())
}

fn find<'a>(c: &'a Collection, id: &str) -> &'a Finding {
    c.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:#?}", c.findings))
}

fn num(f: &Finding, name: &str) -> f64 {
    f.evidence[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}"))
}

fn text<'a>(f: &'a Finding, name: &str) -> &'a str {
    f.evidence[name]
        .as_str()
        .unwrap_or_else(|| panic!("{name}"))
}

fn source_url(f: &Finding) -> String {
    let s = f.remediation.source.as_ref().expect("a source");
    s.url.unwrap_or_default().to_string()
}

/// A memory controller of a 2-socket Intel server (sb_edac / skx_edac layout, 3.6+).
fn stage_edac(h: &FakeHost, ce: u64, ue: u64) {
    let mc = "/sys/devices/system/edac/mc/mc0";
    h.write(&format!("{mc}/ce_count"), format!("{ce}\n"))
        .write(&format!("{mc}/ue_count"), format!("{ue}\n"))
        .write(&format!("{mc}/mc_name"), "Skylake Socket#0 IMC#0\n")
        .write(&format!("{mc}/dimm0/dimm_ce_count"), format!("{ce}\n"))
        .write(&format!("{mc}/dimm0/dimm_ue_count"), format!("{ue}\n"))
        .write(
            &format!("{mc}/dimm0/dimm_label"),
            "CPU_SrcID#0_MC#0_Chan#0_DIMM#0\n",
        )
        .write(&format!("{mc}/dimm1/dimm_ce_count"), "0\n")
        .write(&format!("{mc}/dimm1/dimm_ue_count"), "0\n")
        .write(
            &format!("{mc}/dimm1/dimm_label"),
            "CPU_SrcID#0_MC#0_Chan#1_DIMM#0\n",
        );
}

#[test]
fn uncorrected_memory_error_names_the_dimm_and_says_drain_and_replace() {
    let h = host();
    stage_edac(&h, 3, 1);
    let c = collect(&h);
    assert_eq!(c.status, Status::Ok);
    let f = find(&c, "hardware.memory_uncorrected");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject, "mc0");
    assert_eq!(num(f, "ue_count"), 1.0);
    assert_eq!(num(f, "ce_count"), 3.0);
    assert_eq!(text(f, "dimms"), "CPU_SrcID#0_MC#0_Chan#0_DIMM#0");
    assert!(
        f.summary.en.contains("ECC could not repair"),
        "{}",
        f.summary.en
    );
    let cmds = &f.remediation.commands;
    assert!(
        cmds.iter().any(|c| c == "kubectl cordon node-1"),
        "{cmds:?}"
    );
    assert!(cmds.iter().any(|c| c.starts_with("kubectl drain node-1")));
    assert!(f.remediation.steps[1].en.contains("Replace the DIMM"));
    assert!(source_url(f).contains("admin-guide/ras.html"));
    // 3 corrected errors (since a boot 2 h ago) are below the burst: info.
    let ce = find(&c, "hardware.memory_corrected");
    assert_eq!(ce.severity, Severity::Info);
    assert_eq!(num(ce, "ce_in_window"), 3.0);
    assert!(ce.conditions.contains("below_burst"));
    assert_eq!(
        support::find_metric(
            &c,
            "node_doctor_hardware_memory_uncorrected_errors_total",
            &[
                ("counter", "mc0/dimm0"),
                ("dimm_label", "CPU_SrcID#0_MC#0_Chan#0_DIMM#0")
            ]
        )
        .map(|m| m.value),
        Some(1.0)
    );
}

#[test]
fn corrected_burst_since_a_recent_boot_warns() {
    // Booted 2 h ago, 14 corrected errors since: 14 within the 24 h window.
    let h = host();
    stage_edac(&h, 14, 0);
    let c = collect(&h);
    let f = find(&c, "hardware.memory_corrected");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "ce_in_window"), 14.0);
    assert_eq!(num(f, "threshold"), 10.0);
    assert_eq!(text(f, "dimms"), "CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (14)");
    assert!(f.summary.en.contains("degrading"));
    assert!(f.remediation.steps[0].en.contains("plan the replacement"));
    assert!(c
        .findings
        .iter()
        .all(|f| f.id != "hardware.memory_uncorrected"));
}

#[test]
fn corrected_errors_after_a_long_uptime_warn_only_when_they_rise() {
    // Up 10 days with 500 corrected errors: how fast they came is unknown; nothing yet.
    let h = host();
    h.write("/proc/uptime", "864000.00 1700000.00\n");
    stage_edac(&h, 500, 0);
    let mut col = collector(&h);
    let c = support::collect(&mut col, &support::ctx());
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    // 12 more between two samples: a burst.
    stage_edac(&h, 512, 0);
    let c = support::collect(&mut col, &support::ctx());
    let f = find(&c, "hardware.memory_corrected");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "ce_in_window"), 12.0);
    assert_eq!(num(f, "ce_count"), 512.0);
}

#[test]
fn legacy_csrow_layout_names_the_channel_label() {
    // 2.6/3.10 drivers (i5000_edac, amd64_edac without dimm*): per-channel counters in csrow*.
    let h = host();
    let mc = "/sys/devices/system/edac/mc/mc0";
    h.write(&format!("{mc}/ce_count"), "12\n")
        .write(&format!("{mc}/ue_count"), "0\n")
        .write(&format!("{mc}/csrow0/ce_count"), "12\n")
        .write(&format!("{mc}/csrow0/ue_count"), "0\n")
        .write(&format!("{mc}/csrow0/ch0_ce_count"), "0\n")
        .write(&format!("{mc}/csrow0/ch0_dimm_label"), "DIMM_A1\n")
        .write(&format!("{mc}/csrow0/ch1_ce_count"), "12\n")
        .write(&format!("{mc}/csrow0/ch1_dimm_label"), "DIMM_B1\n");
    let c = collect(&h);
    let f = find(&c, "hardware.memory_corrected");
    assert_eq!(text(f, "dimms"), "DIMM_B1 (12)");
}

/// EDAC's own kernel-log lines (what node-problem-detector's MemoryReadError matches): 3.10
/// and 5.4 print `area:DRAM`, 5.15+ `err_code:`; amd64_edac prints `CE on <csrow>`.
const EDAC_CE_LINES: &[(&str, &str)] = &[
    ("3.10", "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x0 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0091 socket:0 ha:0 channel_mask:2 rank:1)"),
    ("5.4", "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x0 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0091 socket:0 ha:0 channel_mask:2 rank:1)"),
    ("5.15", "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x340 grain:32 syndrome:0x0 - err_code:0x0000:0x009f  SystemAddress:0x3c2d1340 ProcessorSocketId:0x0 MemoryControllerId:0x0 ChannelAddress:0x1e16940 ChannelId:0x1 RankAddress:0xf0b480 PhysicalRankId:0x0 DimmSlotId:0x0 Row:0x3c2 Column:0x1a0 Bank:0x1 BankGroup:0x1 ChipSelect:0x0 ChipId:0x0)"),
    ("6.8", "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x340 grain:32 syndrome:0x0 - err_code:0x0000:0x009f  SystemAddress:0x3c2d1340 ProcessorSocketId:0x0 MemoryControllerId:0x0 ChannelAddress:0x1e16940 ChannelId:0x1 RankAddress:0xf0b480 PhysicalRankId:0x0 DimmSlotId:0x0 Row:0x3c2 Column:0x1a0 Bank:0x1 BankGroup:0x1 ChipSelect:0x0 ChipId:0x0)"),
    ("6.18", "EDAC MC0: 1 CE on mc#0csrow#1channel#0 (csrow:1 channel:0 page:0x3c2d1 offset:0x340 grain:64 syndrome:0x1e3)"),
];

#[test]
fn edac_log_lines_of_each_kernel_count_as_memory_read_errors() {
    for (kernel, line) in EDAC_CE_LINES {
        let h = host();
        let records: Vec<(u64, &str)> =
            (0..10).map(|i| (7_000_000_000 + i * 1000, *line)).collect();
        h.write("/dev/kmsg", kmsg(&records));
        let c = collect(&h);
        let f = find(&c, "hardware.memory_corrected");
        assert_eq!(f.severity, Severity::Warning, "{kernel}");
        assert_eq!(num(f, "ce_in_window"), 10.0, "{kernel}");
        assert!(f.conditions.contains("logged"), "{kernel}");
        assert!(
            text(f, "dimms").contains("Chan#1") || text(f, "dimms").contains("csrow#1"),
            "{kernel}"
        );
        // No EDAC in sysfs: said, not an error.
        assert!(
            matches!(c.status, Status::Noted(_)),
            "{kernel}: {:?}",
            c.status
        );
    }
}

#[test]
fn edac_uncorrected_line_is_critical_without_sysfs() {
    let h = host();
    h.write(
        "/dev/kmsg",
        kmsg(&[(7_000_000_000, "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 page:0x1 offset:0x0 grain:32 syndrome:0x0 - err_code:0x0000:0x009f)")]),
    );
    let c = collect(&h);
    let f = find(&c, "hardware.memory_uncorrected");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject, "mc1");
    assert_eq!(text(f, "dimms"), "CPU_SrcID#1_MC#0_Chan#2_DIMM#0");
    assert!(f.summary.en.contains("(from the kernel log)"));
}

/// Machine check lines per kernel: the bank line (3.10 says "Machine Check Exception"), then
/// the poisoned page's recovery (3.10: `MCE 0x…: … recovery: …`).
const MCE_LINES: &[(&str, &str, &str)] = &[
    (
        "3.10",
        "mce: [Hardware Error]: CPU 3: Machine Check Exception: 0 Bank 7: be00000000800400",
        "MCE 0x3c2d1: dirty LRU page recovery: Recovered",
    ),
    (
        "5.4",
        "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400",
        "Memory failure: 0x3c2d1: recovery action for dirty LRU page: Recovered",
    ),
    (
        "5.15",
        "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400",
        "Memory failure: 0x3c2d1: recovery action for dirty LRU page: Recovered",
    ),
    (
        "6.8",
        "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400",
        "Memory failure: 0x3c2d1: recovery action for dirty LRU page: Recovered",
    ),
    (
        "6.18",
        "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400",
        "Memory failure: 0x3c2d1: recovery action for dirty LRU page: Failed",
    ),
];

#[test]
fn machine_checks_of_each_kernel_warn_and_decay() {
    for (kernel, bank, recovery) in MCE_LINES {
        let h = host();
        h.write(
            "/dev/kmsg",
            kmsg(&[
                (
                    4_000_000_000,
                    "mce: [Hardware Error]: Machine check events logged",
                ),
                (7_000_000_000, bank),
                (
                    7_000_000_100,
                    "mce: [Hardware Error]: TSC 0 ADDR 3c2d1340 MISC 8c",
                ),
                (7_000_000_200, recovery),
            ]),
        );
        let c = collect(&h);
        let cpu = c
            .findings
            .iter()
            .find(|f| f.id == "hardware.machine_check" && f.subject == "cpu3")
            .unwrap_or_else(|| panic!("{kernel}: {:#?}", c.findings));
        assert_eq!(cpu.severity, Severity::Warning, "{kernel}");
        assert_eq!(text(cpu, "kinds"), "bank 7", "{kernel}");
        assert_eq!(num(cpu, "last_seen_seconds_ago"), 200.0, "{kernel}");
        // The "events logged" line is 3200 s old: history, info.
        let logged = c
            .findings
            .iter()
            .find(|f| f.subject == "node")
            .expect(kernel);
        assert_eq!(logged.severity, Severity::Info, "{kernel}");
        assert!(logged.summary.en.contains("history"), "{kernel}");
        let page = c
            .findings
            .iter()
            .find(|f| f.subject == "memory_failure")
            .expect(kernel);
        if *kernel == "6.18" {
            assert_eq!(page.severity, Severity::Critical);
            assert!(page.summary.en.contains("could not be isolated"));
            assert!(page
                .remediation
                .steps
                .iter()
                .any(|s| s.en.contains("Cordon and drain")));
        } else {
            assert_eq!(page.severity, Severity::Warning, "{kernel}");
            assert_eq!(text(page, "kinds"), "0x3c2d1 recovered", "{kernel}");
        }
    }
}

#[test]
fn cper_fatal_is_critical_and_corrected_warns_only_in_bursts() {
    let h = host();
    let mut records = vec![
        (
            6_900_000_000,
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
        ),
        (6_900_000_010, "{1}[Hardware Error]: event severity: fatal"),
        (6_900_000_020, "{1}[Hardware Error]:  Error 0, type: fatal"),
        (
            6_900_000_030,
            "{1}[Hardware Error]:   section_type: memory error",
        ),
        (
            6_900_000_040,
            "{1}[Hardware Error]:   physical_address: 0x0000003c2d1340",
        ),
        (
            6_950_000_000,
            "{2}[Hardware Error]: event severity: recoverable",
        ),
        (
            6_950_000_030,
            "{2}[Hardware Error]:   section_type: PCIe error",
        ),
    ];
    let corrected: Vec<(u64, &str)> = (0..3)
        .flat_map(|i| {
            [
                (
                    7_000_000_000 + i * 100,
                    "{3}[Hardware Error]: event severity: corrected",
                ),
                (
                    7_000_000_050 + i * 100,
                    "{3}[Hardware Error]:   section_type: memory error",
                ),
            ]
        })
        .collect();
    records.extend(corrected);
    h.write("/dev/kmsg", kmsg(&records));
    let c = collect(&h);
    let fatal = c
        .findings
        .iter()
        .find(|f| f.subject == "fatal")
        .expect("fatal");
    assert_eq!(fatal.id, "hardware.cper");
    assert_eq!(fatal.severity, Severity::Critical);
    assert_eq!(text(fatal, "sections"), "memory error");
    assert!(fatal.summary.en.contains("could not recover"));
    assert!(fatal
        .remediation
        .commands
        .iter()
        .any(|c| c.starts_with("kubectl drain node-1")));
    let rec = c
        .findings
        .iter()
        .find(|f| f.subject == "recoverable")
        .expect("recoverable");
    assert_eq!(rec.severity, Severity::Warning);
    assert_eq!(text(rec, "sections"), "PCIe error");
    // 3 corrected records: below the burst of 10, info.
    let corr = c
        .findings
        .iter()
        .find(|f| f.subject == "corrected")
        .expect("corrected");
    assert_eq!(corr.severity, Severity::Info);
    assert_eq!(num(corr, "records"), 3.0);
    assert!(corr.conditions.contains("below_burst"));
    assert!(
        corr.summary.en.contains("below the burst of 10"),
        "{}",
        corr.summary.en
    );
    for (severity, n) in [("fatal", 1.0), ("recoverable", 1.0), ("corrected", 3.0)] {
        assert_eq!(
            support::find_metric(
                &c,
                "node_doctor_hardware_cper_records_total",
                &[("severity", severity)]
            )
            .map(|m| m.value),
            Some(n),
            "{severity}"
        );
    }
}

/// One `CE memory read error` line (node-problem-detector's `MemoryReadError`, an Event per
/// line) on a node without EDAC in sysfs: below the burst of 10 it is an info finding with its
/// figures and the line, counted on /metrics; under `--kube-npd-names` its Event is NPD's
/// (reason, Warning, the line as message). The same for one corrected CPER record
/// (`CperHardwareErrorCorrected`) of a firmware that numbers them (GHES `{N}`) and one that
/// does not (BERT, the previous boot's).
#[test]
fn one_corrected_error_line_is_an_info_finding_counted_with_npds_event() {
    // The kernel's own documentation of an injected error (einj.rst).
    let edac = "EDAC MC3: 1 CE memory read error on CPU_SrcID#0_Channel#0_DIMM#0 (channel:0 slot:0 page:0x12345 offset:0x0 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0090 socket:0 channel_mask:1 rank:0)";
    for cper in [
        "{37}[Hardware Error]: event severity: corrected",
        "[Hardware Error]: event severity: corrected",
    ] {
        let section = if cper.starts_with('{') {
            "{37}[Hardware Error]:   section_type: memory error"
        } else {
            "[Hardware Error]:   section_type: memory error"
        };
        let h = host();
        h.write(
            "/dev/kmsg",
            kmsg(&[
                (7_000_000_000, edac),
                (7_000_100_000, cper),
                (7_000_100_010, section),
            ]),
        );
        let c = collect(&h);
        let f = find(&c, "hardware.memory_corrected");
        assert_eq!(f.severity, Severity::Info, "{cper}");
        assert_eq!(f.subject, "mc3");
        assert_eq!(num(f, "ce_in_window"), 1.0);
        assert_eq!(num(f, "threshold"), 10.0);
        assert_eq!(num(f, "window_seconds"), 86400.0);
        assert_eq!(text(f, "dimms"), "CPU_SrcID#0_Channel#0_DIMM#0");
        assert_eq!(text(f, "line"), edac);
        assert!(f.conditions.contains("logged") && f.conditions.contains("below_burst"));
        assert!(
            f.summary.en.contains("corrected 1 memory error(s)"),
            "{}",
            f.summary.en
        );
        assert!(f.remediation.steps[0]
            .en
            .starts_with("Nothing to do for now"));
        let e = collectors::rules::RuleBook::event(f).expect("an Event");
        assert_eq!(e.reason_for(true, f).as_deref(), Some("MemoryReadError"));
        assert_eq!(
            e.reason_for(false, f).as_deref(),
            Some("NodeDoctorCorrectedMemoryErrors")
        );
        assert!(e.is_npd_for(true, f) && !e.is_npd_for(false, f));
        assert_eq!(e.npd_message_for(true, f).as_deref(), Some(edac));
        assert_eq!(e.npd_message_for(false, f), None);
        assert_eq!(
            support::find_metric(
                &c,
                "node_doctor_hardware_kernel_log_events_total",
                &[("kind", "edac_ce")]
            )
            .map(|m| m.value),
            Some(1.0)
        );
        let r = c
            .findings
            .iter()
            .find(|f| f.id == "hardware.cper")
            .unwrap_or_else(|| panic!("{cper}: no hardware.cper in {:#?}", c.findings));
        assert_eq!(r.severity, Severity::Info, "{cper}");
        assert_eq!(r.subject, "corrected");
        assert_eq!(num(r, "records"), 1.0);
        assert_eq!(text(r, "sections"), "memory error", "{cper}");
        assert_eq!(text(r, "line"), cper);
        let e = collectors::rules::RuleBook::event(r).expect("an Event");
        assert_eq!(
            e.reason_for(true, r).as_deref(),
            Some("CperHardwareErrorCorrected")
        );
        assert_eq!(
            e.reason_for(false, r).as_deref(),
            Some("NodeDoctorHardwareErrorRecord")
        );
        assert_eq!(e.npd_message_for(true, r).as_deref(), Some(cper));
        assert_eq!(
            support::find_metric(
                &c,
                "node_doctor_hardware_cper_records_total",
                &[("severity", "corrected")]
            )
            .map(|m| m.value),
            Some(1.0)
        );
    }
}

const PSTORE_PANIC: &str = "Panic#1 Part1
<4>[ 8120.112233] mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400
<4>[ 8120.112250] mce: [Hardware Error]: TSC 0 ADDR 3c2d1340 MISC 8c
<0>[ 8120.112301] Kernel panic - not syncing: Fatal machine check
";

/// kdump's vmcore-dmesg.txt of a 5.4 kernel that oopsed (makedumpfile --dump-dmesg format).
const VMCORE_DMESG_OOPS: &str = "[    0.000000] Linux version 5.4.0-150-generic (buildd@lcy02-amd64-001) #167-Ubuntu SMP
[  512.000001] BUG: unable to handle page fault for address: 0000000000001010
[  512.000050] #PF: supervisor read access in kernel mode
[  512.000100] Oops: 0000 [#1] SMP PTI
[  512.000200] CPU: 2 PID: 4242 Comm: kworker/2:1 Tainted: G           OE     5.4.0-150-generic #167-Ubuntu
";

#[test]
fn previous_crash_from_pstore_is_critical_and_old_kdump_oops_is_history() {
    let h = host();
    h.write("/sys/fs/pstore/dmesg-efi-171234567801001", PSTORE_PANIC)
        .write(
            "/var/crash/202611201000/vmcore-dmesg.txt",
            VMCORE_DMESG_OOPS,
        )
        .write("/var/crash/202611201000/dmesg.202611201000", "");
    // The kdump record is three days old.
    let old = SystemTime::now() - Duration::from_secs(3 * 86400);
    std::fs::File::options()
        .write(true)
        .open(h.path("/var/crash/202611201000/vmcore-dmesg.txt"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let c = collect(&h);
    let panic = find(&c, "hardware.previous_crash");
    assert_eq!(panic.subject, "/sys/fs/pstore/dmesg-efi-171234567801001");
    assert_eq!(panic.severity, Severity::Critical);
    assert_eq!(
        text(panic, "line"),
        "Kernel panic - not syncing: Fatal machine check"
    );
    assert!(panic.summary.en.contains("The kernel panicked"));
    assert!(panic
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("cordon and drain")));
    assert!(source_url(panic).contains("ramoops"));
    let oops = c
        .findings
        .iter()
        .find(|f| f.subject == "/var/crash/202611201000/vmcore-dmesg.txt")
        .expect("kdump record");
    assert_eq!(oops.severity, Severity::Info);
    assert_eq!(text(oops, "kind"), "oops");
    assert!(num(oops, "crash_age_seconds") >= 3.0 * 86400.0);
    assert!(source_url(oops).contains("kdump"));
}

#[test]
fn poisoned_pages_warn_then_turn_critical_by_size() {
    let h = host();
    h.write(
        "/proc/meminfo",
        "MemTotal: 8009924 kB\nHardwareCorrupted:     8 kB\n",
    );
    let c = collect(&h);
    let f = find(&c, "hardware.poisoned_pages");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "hardware_corrupted_bytes"), 8192.0);
    assert!(f.summary.en.contains("a few bad cells"));
    h.write(
        "/proc/meminfo",
        "MemTotal: 8009924 kB\nHardwareCorrupted:  2048 kB\n",
    );
    let c = collect(&h);
    let f = find(&c, "hardware.poisoned_pages");
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.summary.en.contains("a DIMM is failing"));
    assert!(source_url(f).contains("hwpoison"));
}

/// NVMe lines per kernel (drivers/nvme/host/pci.c nvme_timeout; 6.8 prints the tag and op).
const NVME_LINES: &[(&str, &str, &str)] = &[
    ("3.10", "nvme nvme0: I/O 123 QID 4 timeout, aborting", "nvme nvme0: I/O 123 QID 4 timeout, reset controller"),
    ("5.4", "nvme nvme0: I/O 123 QID 4 timeout, aborting", "nvme nvme0: I/O 123 QID 4 timeout, reset controller"),
    ("5.15", "nvme nvme0: I/O 123 QID 4 timeout, aborting", "nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff"),
    ("6.8", "nvme nvme0: I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, aborting req_op:READ(0) size:4096", "nvme nvme0: I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, reset controller"),
    ("6.18", "nvme nvme0: I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, aborting req_op:READ(0) size:4096", "nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff"),
];

#[test]
fn nvme_timeouts_of_each_kernel_warn_and_removal_is_critical() {
    for (kernel, timeout, reset) in NVME_LINES {
        let h = host();
        h.write(
            "/dev/kmsg",
            kmsg(&[
                (7_000_000_000, timeout),
                (7_000_000_100, "nvme nvme0: Abort status: 0x0"),
                (7_000_000_200, reset),
            ]),
        )
        .write("/sys/class/nvme/nvme0/state", "live\n");
        let c = collect(&h);
        let f = find(&c, "hardware.nvme");
        assert_eq!(f.severity, Severity::Warning, "{kernel}");
        assert_eq!(num(f, "events"), 3.0, "{kernel}");
        assert_eq!(text(f, "kinds"), "reset, timeout", "{kernel}");
        assert!(
            f.remediation.steps[0].en.contains("CAP_SYS_ADMIN"),
            "{kernel}"
        );
        assert!(f
            .remediation
            .commands
            .iter()
            .any(|c| c == "nvme smart-log /dev/nvme0"));
    }
    // The controller did not come back: removed, and sysfs says dead.
    let h = host();
    h.write(
        "/dev/kmsg",
        kmsg(&[
            (
                7_000_000_000,
                "nvme nvme1: I/O 9 QID 2 timeout, reset controller",
            ),
            (
                7_000_500_000,
                "nvme nvme1: Removing after probe failure status: -19",
            ),
        ]),
    )
    .write("/sys/class/nvme/nvme1/state", "dead\n");
    let c = collect(&h);
    let f = find(&c, "hardware.nvme");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(text(f, "state"), "dead");
    assert!(f.summary.en.contains("the driver removed it"));
    assert!(f
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("Cordon and drain")));
}

/// Block-layer request errors per kernel (3.10 end_request; 4.x-5.15 blk_update_request,
/// with op/flags from 5.3; 5.16+ without the caller).
const BLOCK_LINES: &[(&str, &str)] = &[
    ("3.10", "end_request: I/O error, dev sdb, sector 1234"),
    ("5.4", "blk_update_request: I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"),
    ("5.15", "blk_update_request: I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"),
    ("6.8", "I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2"),
    ("6.18", "I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"),
];

/// The host's mounts: /var/lib/kubelet on sdb1, another filesystem on sdc.
const MOUNTINFO: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 8:17 / /var/lib/kubelet rw,relatime - ext4 /dev/sdb1 rw
41 27 8:18 / /data rw,relatime - xfs /dev/sdb2 rw
42 27 8:32 / /backup rw,relatime - ext4 /dev/sdc rw
";

#[test]
fn block_io_errors_of_each_kernel_name_the_disk_its_filesystems_and_the_pods() {
    for (kernel, line) in BLOCK_LINES {
        let h = host();
        h.write("/proc/1/mountinfo", MOUNTINFO).write(
            "/dev/kmsg",
            kmsg(&[(7_000_000_000, line), (7_000_000_100, line)]),
        );
        let c = collect(&h);
        let f = find(&c, "hardware.io_error");
        assert_eq!(f.subject, "sdb", "{kernel}");
        assert_eq!(f.severity, Severity::Critical, "{kernel}");
        assert_eq!(num(f, "errors"), 2.0, "{kernel}");
        assert_eq!(num(f, "sector"), 1234.0, "{kernel}");
        assert_eq!(
            text(f, "mounts"),
            "/dev/sdb1 on /var/lib/kubelet (ext4), /dev/sdb2 on /data (xfs)",
            "{kernel}"
        );
        assert!(f.conditions.contains("pods_affected"), "{kernel}");
        assert!(f.summary.en.contains("pods' volumes and logs"), "{kernel}");
        assert!(f
            .remediation
            .commands
            .iter()
            .any(|c| c == "smartctl -a /dev/sdb"));
    }
    // An old error on a disk without pods: history.
    let h = host();
    h.write("/proc/1/mountinfo", MOUNTINFO).write(
        "/dev/kmsg",
        kmsg(&[(4_000_000_000, "blk_update_request: critical medium error, dev sdc, sector 88 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0")]),
    );
    let c = collect(&h);
    let f = find(&c, "hardware.io_error");
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(text(f, "kinds"), "critical medium");
    assert_eq!(text(f, "mounts"), "/dev/sdc on /backup (ext4)");
    assert!(!f.conditions.contains("pods_affected"));
}

const MDSTAT_DEGRADED: &str = "Personalities : [raid1] [raid6] [raid5] [raid4]
md0 : active raid1 sdb1[1](F) sda1[0]
      1048512 blocks super 1.2 [2/1] [U_]

md1 : active raid5 sdc1[0] sdd1[1] sde1[3]
      2095104 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]
      [=>...................]  recovery =  8.5% (89600/1048512) finish=0.4min speed=29866K/sec

unused devices: <none>
";

#[test]
fn degraded_raid_and_bad_blocks() {
    let h = host();
    h.write("/proc/mdstat", MDSTAT_DEGRADED)
        .write("/sys/block/md0/md/degraded", "1\n")
        .write("/sys/block/md1/md/degraded", "1\n")
        .write("/sys/block/md2/md/degraded", "1\n")
        .write("/sys/block/sda/badblocks", "")
        .write("/sys/block/sdc/badblocks", "1234 8\n4096 16\n");
    let c = collect(&h);
    let md = |n: &str| {
        c.findings
            .iter()
            .find(|f| f.id == "hardware.raid_degraded" && f.subject == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    let md0 = md("md0");
    assert_eq!(md0.severity, Severity::Critical);
    assert_eq!(text(md0, "failed_devices"), "sdb1");
    assert!(md0.summary.en.contains("one more failure loses the data"));
    let md1 = md("md1");
    assert_eq!(md1.severity, Severity::Warning);
    assert_eq!(num(md1, "rebuild_percent"), 8.5);
    // Missing from /proc/mdstat but degraded in sysfs.
    let md2 = md("md2");
    assert_eq!(md2.severity, Severity::Critical);
    assert_eq!(num(md2, "devices_missing"), 1.0);
    let bb = find(&c, "hardware.bad_blocks");
    assert_eq!(bb.subject, "sdc");
    assert_eq!(num(bb, "bad_ranges"), 2.0);
    assert!(bb
        .remediation
        .commands
        .iter()
        .any(|c| c == "cat /sys/block/sdc/badblocks"));
}

#[test]
fn taint_that_appears_between_samples_is_named_and_benign_taints_are_not() {
    let h = host();
    // A GPU node: P (proprietary) + O (out-of-tree) + E (unsigned).
    h.write("/proc/sys/kernel/tainted", "12289\n");
    let mut col = collector(&h);
    let c = support::collect(&mut col, &support::ctx());
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    // Then an oops: D (bit 7).
    h.write("/proc/sys/kernel/tainted", "12417\n");
    let c = support::collect(&mut col, &support::ctx());
    let f = find(&c, "hardware.kernel_taint");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(text(f, "flags"), "D (bit 7, kernel died (oops or BUG))");
    assert_eq!(text(f, "new_flags"), "D (bit 7, kernel died (oops or BUG))");
    assert!(f.conditions.contains("appeared"));
    assert!(f.summary.en.contains("(P, O, E) are not counted"));
    // Then a machine check: M (bit 4) makes it critical.
    h.write("/proc/sys/kernel/tainted", "12433\n");
    let c = support::collect(&mut col, &support::ctx());
    let f = find(&c, "hardware.kernel_taint");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(text(f, "new_flags"), "M (bit 4, machine check)");
    assert!(source_url(f).contains("tainted-kernels"));
}

#[test]
fn a_healthy_host_without_edac_is_quiet_and_says_so() {
    let h = host();
    h.write("/proc/mdstat", "Personalities : \nunused devices: <none>\n")
        .write("/sys/class/nvme/nvme0/state", "live\n")
        .write("/proc/1/mountinfo", MOUNTINFO);
    let c = collect(&h);
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    match &c.status {
        Status::Noted(m) => assert!(m.contains("no EDAC memory controller"), "{m}"),
        s => panic!("{s:?}"),
    }
    assert_eq!(
        support::find_metric(&c, "node_doctor_hardware_corrupted_bytes", &[]).map(|m| m.value),
        Some(0.0)
    );
}

/// Detaches a test's loop device and unmounts its tmpfs, even when the test fails.
struct LoopOnTmpfs {
    mount_point: std::path::PathBuf,
    device: Option<String>,
}

impl Drop for LoopOnTmpfs {
    fn drop(&mut self) {
        let quiet = |c: &mut std::process::Command| {
            let _ = c.stderr(std::process::Stdio::null()).status();
        };
        if let Some(d) = &self.device {
            quiet(std::process::Command::new("losetup").args(["-d", d]));
        }
        quiet(std::process::Command::new("umount").arg(&self.mount_point));
    }
}

/// Real kernel: a loop device over an 8 MiB sparse file on a 1 MiB tmpfs of the test's own;
/// direct writes past the first MiB fail in the backing file (ENOSPC), and the block layer
/// logs a request error for the loop device (6.18: `critical space allocation error, dev
/// loop0, sector 2048 op 0x1:(WRITE) flags 0x8800 phys_seg 1 prio class 2`). The collector
/// reading the real `/dev/kmsg` names the device.
#[test]
fn real_kernel_loop_device_write_errors_are_io_errors() {
    if !support::root_or_skip("real_kernel_loop_device_write_errors_are_io_errors") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("tmpfs");
    std::fs::create_dir(&mnt).unwrap();
    let ok = |cmd: &mut std::process::Command| cmd.status().is_ok_and(|s| s.success());
    if !ok(std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "node-doctor-test"])
        .arg(&mnt))
    {
        collectors::skip!(
            "SKIP real_kernel_loop_device_write_errors_are_io_errors: cannot mount a tmpfs"
        );
        return;
    }
    let mut guard = LoopOnTmpfs {
        mount_point: mnt.clone(),
        device: None,
    };
    let image = mnt.join("disk.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output();
    let loop_dev = out
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !loop_dev.starts_with("/dev/loop") {
        collectors::skip!(
            "SKIP real_kernel_loop_device_write_errors_are_io_errors: no loop device ({out:?})"
        );
        return;
    }
    guard.device = Some(loop_dev.clone());
    let dev = loop_dev.trim_start_matches("/dev/").to_string();
    // Fails once the tmpfs is full; the failure is the point.
    let _ = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={loop_dev}"),
            "bs=64k",
            "count=32",
            "oflag=direct",
        ])
        .stderr(std::process::Stdio::null())
        .status();
    let mut col = HardwareCollector::new(
        collectors::Node::new(collectors::HostPaths::new("/")),
        HardwareConfig {
            kmsg: collectors::kmsg::KmsgConfig {
                lookback: Duration::from_secs(30),
                ..Default::default()
            },
            ..HardwareConfig::default()
        },
    );
    let mut found = None;
    for _ in 0..20 {
        let c = col.collect(&support::ctx());
        if let Some(f) = c
            .findings
            .into_iter()
            .find(|f| f.id == "hardware.io_error" && f.subject == dev)
        {
            found = Some(f);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let f = found.unwrap_or_else(|| panic!("no hardware.io_error for {dev}"));
    eprintln!("real loop-device error: {}", f.summary.en);
    assert!(f.evidence["errors"].as_f64().unwrap() >= 1.0);
    let kinds = f.evidence["kinds"].as_str().unwrap();
    assert!(
        kinds.contains("critical space allocation") || kinds.contains("I/O"),
        "{kinds}"
    );
    assert!(f.evidence["sector"].as_f64().is_some());
    assert!(!f.conditions.contains("pods_affected"));
    drop(guard);
}

/// node-problem-detector parity, the rule its kernel monitor has that is this collector's:
/// `MemoryReadError` (`CE memory read error …`). NPD posts an Event per line; node-doctor
/// too (an info finding below the burst), and warns on a burst (10 in 24 h), with NPD's
/// reason under `--kube-npd-names`.
#[test]
fn npd_parity_memory_read_error() {
    let h = host();
    let line = "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x0 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0091 socket:0 ha:0 channel_mask:2 rank:1)";
    let records: Vec<(u64, &str)> = (0..10).map(|i| (7_000_000_000 + i * 1000, line)).collect();
    h.write("/dev/kmsg", kmsg(&records));
    let c = collect(&h);
    let f = find(&c, "hardware.memory_corrected");
    let reason = collectors::rules::RuleBook::event(f).and_then(|e| e.reason_for(true, f));
    eprintln!("node-problem-detector MemoryReadError: 1/1 recognised ({reason:?})");
    assert_eq!(reason.as_deref(), Some("MemoryReadError"));
}
