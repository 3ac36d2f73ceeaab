//! Hardware error lines of the kernel log, every wording of the kernels node-doctor meets:
//!
//! ```text
//! mce: [Hardware Error]: Machine check events logged                                   (3.10 .. 6.x)
//! mce: [Hardware Error]: CPU 3: Machine Check Exception: 0 Bank 7: be00000000800400     (3.10)
//! mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400               (4.x .. 6.x)
//! MCE 0x1a2b3c: dirty LRU page recovery: Recovered                                     (3.10)
//! Memory failure: 0x1a2b3c: recovery action for dirty LRU page: Recovered              (4.x .. 6.x)
//! {1}[Hardware Error]: event severity: corrected                                       (APEI GHES, CPER)
//! {1}[Hardware Error]:  section_type: memory error
//! [Hardware Error]: event severity: fatal                                              (BERT: the previous boot's)
//! EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 ...)
//! EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 ...)
//! nvme nvme0: I/O 123 QID 4 timeout, aborting                                          (3.10 backports .. 6.x)
//! nvme nvme0: I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, aborting req_op:READ(0) size:4096  (6.8+)
//! nvme nvme0: I/O 123 QID 4 timeout, reset controller
//! nvme nvme0: I/O 897 QID 2 timeout, completion polled                  (4.x .. 6.x: a missed interrupt)
//! nvme nvme0: Abort status: 0x0
//! nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff
//! nvme nvme0: Removing after probe failure status: -19
//! end_request: I/O error, dev sdb, sector 1234                                         (3.10)
//! blk_update_request: I/O error, dev sdb, sector 1234                                  (4.x .. 5.15)
//! blk_update_request: I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0
//! I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0   (5.16 .. 6.x)
//! critical medium error, dev sdb, sector 1234 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0
//! ```

use crate::needle::Needle;

/// Longest device, label or section name kept from a line.
const MAX_NAME: usize = 64;

/// How `memory_failure()` ended for a poisoned page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    Recovered,
    /// Delayed, Ignored, Failed: the page could not be isolated cleanly.
    NotRecovered,
}

/// A CPER record's severity (`cper_severity_str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CperSeverity {
    Info,
    Corrected,
    Recoverable,
    Fatal,
}

impl CperSeverity {
    pub fn as_str(self) -> &'static str {
        match self {
            CperSeverity::Info => "info",
            CperSeverity::Corrected => "corrected",
            CperSeverity::Recoverable => "recoverable",
            CperSeverity::Fatal => "fatal",
        }
    }
}

/// What an NVMe controller line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NvmeEvent {
    /// A command timed out and is aborted (or the abort's own status).
    Timeout,
    /// The driver resets the controller (a timeout it could not abort, or a dead controller).
    Reset,
    /// The controller failed to come back and the driver removed it: the disk is gone.
    Removed,
}

impl NvmeEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NvmeEvent::Timeout => "timeout",
            NvmeEvent::Reset => "reset",
            NvmeEvent::Removed => "removed",
        }
    }
}

/// One recognised line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwLine {
    /// `Machine check events logged`: corrected machine checks the kernel passed to mcelog.
    MceLogged,
    /// A machine check reported for a CPU and bank.
    MceBank { cpu: u32, bank: u32 },
    /// A poisoned page handled by `memory_failure()`.
    MemoryFailure { pfn: String, recovery: Recovery },
    /// A CPER record's severity line; `seq` is the `{N}` record number (none before BERT's
    /// records of the previous boot, which print `[Hardware Error]:` alone).
    CperSeverity {
        seq: Option<u32>,
        severity: CperSeverity,
    },
    /// A CPER section's type (follows its record's severity line).
    CperSection {
        seq: Option<u32>,
        section_type: String,
    },
    /// An EDAC memory error line (the one node-problem-detector's `MemoryReadError` matches).
    Edac {
        controller: String,
        count: u64,
        uncorrected: bool,
        label: Option<String>,
    },
    Nvme {
        controller: String,
        event: NvmeEvent,
    },
    /// A block-layer request error: the disk and the error's kind (`I/O`, `critical medium`).
    BlockError {
        device: String,
        kind: String,
        sector: Option<u64>,
    },
}

fn name(s: &str) -> String {
    crate::bounded::prefix_owned(s, MAX_NAME)
}

fn leading_u32(s: &str) -> Option<u32> {
    let d: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
    d.parse().ok()
}

/// A device name as the kernel prints it: `sdb`, `nvme0n1`, `dm-0`, `loop7`, `vda`.
fn is_device_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'!')
}

/// Parses one kernel log message; `None` when it is none of the lines above.
pub fn parse(message: &str) -> Option<HwLine> {
    let m = message.trim();
    if let Some(line) = cper(m) {
        return Some(line);
    }
    if let Some(rest) = m.strip_prefix("mce: [Hardware Error]: ") {
        return mce(rest);
    }
    if let Some(rest) = m.strip_prefix("Memory failure: ") {
        return memory_failure(rest);
    }
    if let Some(rest) = m.strip_prefix("MCE ") {
        // 3.10: `MCE 0x1a2b3c: dirty LRU page recovery: Recovered`
        if rest.starts_with("0x") && rest.contains("recovery: ") {
            return memory_failure(rest);
        }
    }
    if let Some(rest) = m.strip_prefix("EDAC ") {
        return edac(rest);
    }
    if let Some(rest) = m.strip_prefix("nvme ") {
        return nvme(rest);
    }
    block(m)
}

fn mce(rest: &str) -> Option<HwLine> {
    if rest.starts_with("Machine check events logged") {
        return Some(HwLine::MceLogged);
    }
    let cpu_rest = rest.strip_prefix("CPU ")?;
    let cpu = leading_u32(cpu_rest)?;
    let after = cpu_rest.split_once(": ")?.1;
    let after = after
        .strip_prefix("Machine Check Exception: ")
        .or_else(|| after.strip_prefix("Machine Check: "))?;
    let bank_at = after.find("Bank ")?;
    let bank = leading_u32(&after[bank_at + 5..])?;
    Some(HwLine::MceBank { cpu, bank })
}

fn memory_failure(rest: &str) -> Option<HwLine> {
    let (pfn, tail) = rest.split_once(':')?;
    if !pfn.starts_with("0x") || !pfn[2..].bytes().all(|b| b.is_ascii_hexdigit()) || pfn.len() < 3 {
        return None;
    }
    let result = tail.rsplit(": ").next()?.trim();
    let recovery = match result {
        "Recovered" => Recovery::Recovered,
        "Delayed" | "Ignored" | "Failed" => Recovery::NotRecovered,
        _ => return None,
    };
    Some(HwLine::MemoryFailure {
        pfn: name(pfn),
        recovery,
    })
}

/// A CPER record's severity or section line, whatever comes before `[Hardware Error]:` (GHES's
/// `{N}`, nothing for BERT; node-problem-detector's patterns start with `.*`).
fn cper(m: &str) -> Option<HwLine> {
    static HW_ERR: Needle = Needle::new("[Hardware Error]:");
    let at = HW_ERR.find(m)?;
    let seq = m[..at]
        .strip_prefix('{')
        .and_then(|h| h.strip_suffix('}'))
        .and_then(|n| n.parse().ok());
    let rest = m[at + HW_ERR.len()..].trim_start();
    if let Some(sev) = rest.strip_prefix("event severity: ") {
        let severity = match sev.trim() {
            "corrected" => CperSeverity::Corrected,
            "recoverable" => CperSeverity::Recoverable,
            "fatal" => CperSeverity::Fatal,
            "info" => CperSeverity::Info,
            _ => return None,
        };
        return Some(HwLine::CperSeverity { seq, severity });
    }
    let t = rest.strip_prefix("section_type: ")?.trim();
    (!t.is_empty()).then(|| HwLine::CperSection {
        seq,
        section_type: name(t),
    })
}

fn edac(rest: &str) -> Option<HwLine> {
    // `MC0: 1 CE memory read error on LABEL (...)`, amd64: `MC0: 1 CE on mc#0csrow#1channel#0 (...)`
    let (mc, tail) = rest.split_once(": ")?;
    if !mc.starts_with("MC") || !mc[2..].bytes().all(|b| b.is_ascii_digit()) || mc.len() < 3 {
        return None;
    }
    let (n, tail) = tail.split_once(' ')?;
    let count: u64 = n.parse().ok()?;
    let uncorrected = if tail.starts_with("CE ") {
        false
    } else if tail.starts_with("UE ") {
        true
    } else {
        return None;
    };
    let label = tail.split_once(" on ").and_then(|(_, l)| {
        let l = l.split(" (").next().unwrap_or(l).trim();
        (!l.is_empty()).then(|| name(l))
    });
    Some(HwLine::Edac {
        controller: format!("mc{}", &mc[2..]),
        count,
        uncorrected,
        label,
    })
}

fn nvme(rest: &str) -> Option<HwLine> {
    let (ctrl, tail) = rest.split_once(": ")?;
    if !numbered(ctrl, "nvme") {
        return None;
    }
    let event = if tail.contains(" timeout, reset controller")
        || tail.starts_with("controller is down; will reset")
    {
        NvmeEvent::Reset
    } else if tail.contains(" timeout, aborting")
        || tail.contains(" timeout, completion polled")
        || tail.starts_with("Abort status: ")
    {
        NvmeEvent::Timeout
    } else if tail.starts_with("Removing after probe failure") {
        NvmeEvent::Removed
    } else {
        return None;
    };
    Some(HwLine::Nvme {
        controller: name(ctrl),
        event,
    })
}

fn numbered(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn block(m: &str) -> Option<HwLine> {
    static MARK: Needle = Needle::new(" error, dev ");
    let at = MARK.find(m)?;
    let head = &m[..at];
    // `end_request: I/O`, `blk_update_request: critical medium`, `I/O`: the caller is optional.
    let kind = head.rsplit_once(": ").map_or(head, |(_, k)| k).trim();
    const KINDS: &[&str] = &[
        "I/O",
        "critical medium",
        "critical target",
        "critical nexus",
        "critical space allocation",
        "recoverable transport",
        "timeout",
        "protection",
    ];
    if !KINDS.contains(&kind) {
        return None;
    }
    let rest = &m[at + MARK.len()..];
    let (device, tail) = rest.split_once(", ").unwrap_or((rest, ""));
    if !is_device_name(device) {
        return None;
    }
    let sector = tail
        .strip_prefix("sector ")
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok());
    Some(HwLine::BlockError {
        device: device.to_string(),
        kind: kind.to_string(),
        sector,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_checks() {
        assert_eq!(
            parse("mce: [Hardware Error]: Machine check events logged"),
            Some(HwLine::MceLogged)
        );
        let bank = Some(HwLine::MceBank { cpu: 3, bank: 7 });
        assert_eq!(
            parse(
                "mce: [Hardware Error]: CPU 3: Machine Check Exception: 0 Bank 7: be00000000800400"
            ),
            bank
        );
        assert_eq!(
            parse("mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400"),
            bank
        );
        assert_eq!(
            parse("mce: [Hardware Error]: TSC 0 ADDR 1ffff MISC 8c"),
            None
        );
        assert_eq!(
            parse("Memory failure: 0x1a2b3c: recovery action for dirty LRU page: Recovered"),
            Some(HwLine::MemoryFailure {
                pfn: "0x1a2b3c".into(),
                recovery: Recovery::Recovered
            })
        );
        assert_eq!(
            parse("MCE 0x1a2b3c: dirty LRU page recovery: Failed"),
            Some(HwLine::MemoryFailure {
                pfn: "0x1a2b3c".into(),
                recovery: Recovery::NotRecovered
            })
        );
        assert_eq!(parse("Memory failure: 0x1a: something: Maybe"), None);
    }

    #[test]
    fn cper_and_edac() {
        assert_eq!(
            parse("{1}[Hardware Error]: event severity: fatal"),
            Some(HwLine::CperSeverity {
                seq: Some(1),
                severity: CperSeverity::Fatal
            })
        );
        // BERT's records of the previous boot carry no record number; node-problem-detector's
        // own test line has the `mce: ` prefix (its pattern starts with `.*`).
        for (line, severity) in [
            (
                "[Hardware Error]: event severity: fatal",
                CperSeverity::Fatal,
            ),
            (
                "mce: [Hardware Error]: event severity: fatal",
                CperSeverity::Fatal,
            ),
            (
                "[Hardware Error]: event severity: corrected",
                CperSeverity::Corrected,
            ),
        ] {
            assert_eq!(
                parse(line),
                Some(HwLine::CperSeverity {
                    seq: None,
                    severity
                }),
                "{line}"
            );
        }
        assert_eq!(
            parse("[Hardware Error]:   section_type: memory error"),
            Some(HwLine::CperSection {
                seq: None,
                section_type: "memory error".into()
            })
        );
        assert_eq!(parse("{x}[Hardware Error]: event severity: bogus"), None);
        assert_eq!(
            parse("{12}[Hardware Error]:  section_type: memory error"),
            Some(HwLine::CperSection {
                seq: Some(12),
                section_type: "memory error".into()
            })
        );
        assert_eq!(
            parse("{1}[Hardware Error]:  Error 0, type: corrected"),
            None
        );
        assert_eq!(
            parse("EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x12345 offset:0x0 grain:32 syndrome:0x0)"),
            Some(HwLine::Edac { controller: "mc0".into(), count: 1, uncorrected: false, label: Some("CPU_SrcID#0_Ha#0_Chan#0_DIMM#0".into()) })
        );
        assert_eq!(
            parse("EDAC MC1: 2 UE on mc#1csrow#1channel#0 (csrow:1 channel:0 page:0x1 offset:0x0 grain:64)"),
            Some(HwLine::Edac { controller: "mc1".into(), count: 2, uncorrected: true, label: Some("mc#1csrow#1channel#0".into()) })
        );
        assert_eq!(parse("EDAC MC: Ver: 3.0.0"), None);
    }

    #[test]
    fn nvme_and_block() {
        let n = |e| {
            Some(HwLine::Nvme {
                controller: "nvme0".into(),
                event: e,
            })
        };
        assert_eq!(
            parse("nvme nvme0: I/O 897 QID 2 timeout, completion polled"),
            n(NvmeEvent::Timeout)
        );
        assert_eq!(
            parse("nvme nvme0: I/O 123 QID 4 timeout, aborting"),
            n(NvmeEvent::Timeout)
        );
        assert_eq!(parse("nvme nvme0: I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, aborting req_op:READ(0) size:4096"), n(NvmeEvent::Timeout));
        assert_eq!(
            parse("nvme nvme0: I/O 123 QID 4 timeout, reset controller"),
            n(NvmeEvent::Reset)
        );
        assert_eq!(
            parse("nvme nvme0: Abort status: 0x0"),
            n(NvmeEvent::Timeout)
        );
        assert_eq!(
            parse("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff"),
            n(NvmeEvent::Reset)
        );
        assert_eq!(
            parse("nvme nvme0: Removing after probe failure status: -19"),
            n(NvmeEvent::Removed)
        );
        assert_eq!(parse("nvme nvme0: 8/0/0 default/read/poll queues"), None);
        let b = |k: &str| {
            Some(HwLine::BlockError {
                device: "sdb".into(),
                kind: k.into(),
                sector: Some(1234),
            })
        };
        assert_eq!(
            parse("end_request: I/O error, dev sdb, sector 1234"),
            b("I/O")
        );
        assert_eq!(
            parse("blk_update_request: I/O error, dev sdb, sector 1234"),
            b("I/O")
        );
        assert_eq!(parse("blk_update_request: I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"), b("I/O"));
        assert_eq!(parse("I/O error, dev sdb, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2"), b("I/O"));
        assert_eq!(parse("critical medium error, dev sdb, sector 1234 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0"), b("critical medium"));
        assert_eq!(
            parse("Buffer I/O error on dev sdb1, logical block 0, async page read"),
            None
        );
        assert_eq!(parse("I/O error, dev s;db, sector 1"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_near_markers(pre in "(mce: \\[Hardware Error\\]: |\\{1\\}\\[Hardware Error\\]: event severity: |\\[Hardware Error\\]:|Memory failure: |MCE |\\{|EDAC |nvme |I/O)", post in "\\PC{0,40}") {
            let _ = parse(&format!("{pre}{post}"));
        }

        /// Each kind of line in the wordings the kernels print it (`mce_log`, `memory_failure`,
        /// `cper_print`, `edac_mc_handle_error`, `nvme_timeout`, `blk_print_req_error`), built
        /// from values: it parses back to those values.
        #[test]
        fn parses_what_the_kernel_prints(
            (line, want) in hw_line(),
            space in proptest::bool::ANY,
        ) {
            let line = if space { format!(" {line} ") } else { line };
            proptest::prop_assert_eq!(parse(&line), Some(want), "{}", line);
        }
    }

    /// A printed line and the value it says.
    fn hw_line() -> impl proptest::strategy::Strategy<Value = (String, HwLine)> {
        use proptest::prelude::*;
        let seq = proptest::option::of(0u32..1000);
        let brace = |s: Option<u32>| s.map(|n| format!("{{{n}}}")).unwrap_or_default();
        prop_oneof![
            Just(("mce: [Hardware Error]: Machine check events logged".to_string(), HwLine::MceLogged)),
            (any::<u32>(), any::<u32>(), "( Exception)?", any::<u64>()).prop_map(|(cpu, bank, exc, status)| (
                format!("mce: [Hardware Error]: CPU {cpu}: Machine Check{exc}: 0 Bank {bank}: {status:016x}"),
                HwLine::MceBank { cpu, bank },
            )),
            ("0x[0-9a-f]{1,12}", "(dirty|clean) LRU page|free buddy page|huge page|reserved kernel page",
             prop::sample::select(vec!["Recovered", "Delayed", "Ignored", "Failed"]), any::<bool>())
                .prop_map(|(pfn, page, result, old)| (
                    if old {
                        format!("MCE {pfn}: {page} recovery: {result}")
                    } else {
                        format!("Memory failure: {pfn}: recovery action for {page}: {result}")
                    },
                    HwLine::MemoryFailure {
                        pfn,
                        recovery: if result == "Recovered" { Recovery::Recovered } else { Recovery::NotRecovered },
                    },
                )),
            (seq.clone(), prop::sample::select(vec![CperSeverity::Info, CperSeverity::Corrected, CperSeverity::Recoverable, CperSeverity::Fatal]))
                .prop_map(move |(seq, severity)| (
                    format!("{}[Hardware Error]: event severity: {}", brace(seq), severity.as_str()),
                    HwLine::CperSeverity { seq, severity },
                )),
            (seq, "memory error|PCIe error|general processor error|[A-Za-z][A-Za-z0-9 -]{0,30}[a-z]", " {1,3}")
                .prop_map(move |(seq, section_type, pad)| (
                    format!("{}[Hardware Error]:{pad}section_type: {section_type}", brace(seq)),
                    HwLine::CperSection { seq, section_type },
                )),
            (0u32..64, any::<u64>(), any::<bool>(), proptest::option::of("[A-Za-z0-9_#]{1,40}"), "(memory (read|write|scrubbing) error )?")
                .prop_map(|(mc, count, uncorrected, label, what)| {
                    let ce = if uncorrected { "UE" } else { "CE" };
                    let at = label.as_deref().map(|l| format!("on {l} ")).unwrap_or_default();
                    (
                        format!("EDAC MC{mc}: {count} {ce} {what}{at}(channel:0 slot:0 page:0x12345 offset:0x0 grain:32)"),
                        HwLine::Edac { controller: format!("mc{mc}"), count, uncorrected, label },
                    )
                }),
            (0u32..100, prop::sample::select(vec![
                ("I/O 123 QID 4 timeout, reset controller", NvmeEvent::Reset),
                ("controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff", NvmeEvent::Reset),
                ("I/O 123 QID 4 timeout, aborting", NvmeEvent::Timeout),
                ("I/O tag 123 (007b) opcode 0x2 (Read) QID 4 timeout, aborting req_op:READ(0) size:4096", NvmeEvent::Timeout),
                ("Abort status: 0x0", NvmeEvent::Timeout),
                ("Removing after probe failure status: -19", NvmeEvent::Removed),
            ])).prop_map(|(n, (tail, event))| (
                format!("nvme nvme{n}: {tail}"),
                HwLine::Nvme { controller: format!("nvme{n}"), event },
            )),
            ("(end_request|blk_update_request|print_req_error): |",
             prop::sample::select(vec!["I/O", "critical medium", "critical target", "critical nexus",
                 "critical space allocation", "recoverable transport", "timeout", "protection"]),
             crate::testgen::block_device(), proptest::option::of(any::<u64>()), any::<bool>())
                .prop_map(|(caller, kind, device, sector, op)| {
                    let tail = match sector {
                        Some(s) if op => format!(", sector {s} op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2"),
                        Some(s) => format!(", sector {s}"),
                        None => String::new(),
                    };
                    (
                        format!("{caller}{kind} error, dev {device}{tail}"),
                        HwLine::BlockError { device, kind: kind.to_string(), sector },
                    )
                }),
        ]
    }
}
