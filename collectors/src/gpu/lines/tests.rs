use super::*;
use proptest::prelude::*;

fn xid(gpu: &str, xid: u32, fatal: Option<bool>) -> Option<LinePart> {
    Some(LinePart::Xid {
        gpu: gpu.into(),
        xid,
        fatal,
    })
}

/// Verbatim driver lines (sources: collectors/tests/scenarios/gpu.rs names each).
#[test]
fn reads_every_wording_of_the_driver() {
    assert_eq!(
        parse("NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        xid("0000:5d:00.0", 79, None)
    );
    assert_eq!(
        parse("NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff"),
        xid("0000:01:00.0", 3, None)
    );
    assert_eq!(
        parse("NVRM: Xid (PCI:0000:01:00): 62, 223b6a66 00002100 00000000 20662342"),
        xid("0000:01:00.0", 62, None)
    );
    // The number ends the line: no trailing comma.
    assert_eq!(
        parse("NVRM: Xid (PCI:0000:01:00): 62"),
        xid("0000:01:00.0", 62, None)
    );
    assert_eq!(parse("NVRM: Xid (PCI:0000:01:00): 62x"), None);
    assert_eq!(
        parse("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"),
        xid("0018:01:00.0", 145, Some(false))
    );
    assert_eq!(
        parse("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"),
        xid("0000:00:00.0", 149, Some(true))
    );
    assert_eq!(
        parse("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
        Some(LinePart::RecoveryAction {
            gpu: "0000:01:00.0".into(),
            code: 1,
            name: "GPU Reset Required".into()
        })
    );
    assert_eq!(
        parse("NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus."),
        Some(LinePart::FallenOff {
            gpu: "0000:2b:00.0".into()
        })
    );
    assert_eq!(
        parse("NVRM: GPU at 0000:01:00.0 has fallen off the bus."),
        Some(LinePart::FallenOff {
            gpu: "0000:01:00.0".into()
        })
    );
    assert_eq!(
        parse("NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands.\n"),
        Some(LinePart::FallenOff { gpu: "0000:b3:00.0".into() })
    );
    assert_eq!(
        parse("NVRM: The NVIDIA GPU 0000:b3:00.0"),
        Some(LinePart::FallenOffStart {
            gpu: "0000:b3:00.0".into()
        })
    );
    assert_eq!(
        parse("NVRM: fallen off the bus and is not responding to commands."),
        Some(LinePart::FallenOffEnd)
    );
    assert_eq!(
        parse("NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)"),
        Some(LinePart::InitFailed {
            gpu: Some("0000:04:01.0".into())
        })
    );
    assert_eq!(
        parse("NVRM: RmInitAdapter failed! (0x26:0xffff:1281)"),
        Some(LinePart::InitFailed { gpu: None })
    );
    assert_eq!(
        parse("NVRM: GPU 0000:04:01.0: rm_init_adapter failed, device minor number 0"),
        None
    );
    assert_eq!(
        parse("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.195.03"),
        None
    );
}

#[test]
fn reads_sxids_and_skips_their_continuation_lines() {
    assert_eq!(
        parse("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt"),
        Some(LinePart::SXid { switch: "0000:04:00.0".into(), sxid: 22013, fatal: false })
    );
    assert_eq!(
        parse("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00"),
        None
    );
    assert_eq!(
        parse("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, 0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}"),
        None
    );
}

#[test]
fn reads_aer_reports_of_every_kernel() {
    use AerSeverity::*;
    let aer = |device: &str, severity, detail| {
        Some(LinePart::Aer {
            device: device.into(),
            severity,
            detail,
        })
    };
    assert_eq!(
        parse("pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010"),
        aer("0000:00:02.0", Fatal, false)
    );
    assert_eq!(
        parse("pcieport 0000:00:02.0: AER: Corrected error received: id=0010"),
        aer("0000:00:02.0", Corrected, false)
    );
    assert_eq!(
        parse("pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5"),
        aer("0000:00:1c.5", Corrected, false)
    );
    assert_eq!(
        parse("pcieport 0000:00:1d.0: AER: Multiple Corrected error received: 0000:03:00.0"),
        aer("0000:03:00.0", Corrected, false)
    );
    assert_eq!(
        parse("pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0"),
        aer("0000:00:00.0", Corrected, false)
    );
    assert_eq!(parse("pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)"), aer("0000:00:02.0", Fatal, true));
    assert_eq!(parse("nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"), aer("0000:03:00.0", Corrected, true));
    assert_eq!(parse("pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e8(Receiver ID)"), aer("0000:00:1d.0", Corrected, true));
    assert_eq!(parse("pcieport 0000:00:01.1: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"), aer("0000:00:01.1", NonFatal, true));
    assert_eq!(
        parse("pcieport 0000:00:1d.0: AER: device [8086:a330] error status/mask=00000001/00002000"),
        None
    );
}

#[test]
fn addresses_are_normalized_and_checked() {
    assert_eq!(
        normalize_bdf("PCI:0000:3B:00").as_deref(),
        Some("0000:3b:00.0")
    );
    assert_eq!(
        normalize_bdf("0000:3b:00.1").as_deref(),
        Some("0000:3b:00.1")
    );
    assert_eq!(normalize_bdf("3b:00.0").as_deref(), Some("0000:3b:00.0"));
    assert_eq!(
        normalize_bdf("10000:01:00.0").as_deref(),
        Some("10000:01:00.0")
    );
    assert_eq!(normalize_bdf("0000:3b:20.0"), None);
    assert_eq!(normalize_bdf("0000:3b:00.8"), None);
    assert_eq!(normalize_bdf("$(reboot)"), None);
    assert_eq!(normalize_bdf(""), None);
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC*") {
        let _ = parse(&s);
        let _ = parse(&format!("NVRM: Xid (PCI:{s}"));
        let _ = parse(&format!("nvidia-nvswitch0: SXid ({s}"));
        let _ = parse(&format!("pcieport {s}: AER: Corrected error received: id={s}"));
        let _ = normalize_bdf(&s);
    }

    #[test]
    fn parses_what_the_driver_prints(dom in 0u32..0x10000, bus in 0u32..256, dev in 0u32..32, x in 1u32..200, pid in 0u32..1 << 22) {
        let line = format!("NVRM: Xid (PCI:{dom:04x}:{bus:02x}:{dev:02x}): {x}, pid={pid}, name=python3, Ch 00000001");
        let gpu = format!("{dom:04x}:{bus:02x}:{dev:02x}.0");
        // No Fatal/Nonfatal word and no recovery action: a plain Xid, whatever its number.
        prop_assert_eq!(parse(&line), Some(LinePart::Xid { gpu: gpu.clone(), xid: x, fatal: None }));
        let aer = format!("pcieport {dom:04x}:{bus:02x}:{dev:02x}.0: AER: Uncorrectable (Fatal) error message received from {gpu}");
        prop_assert_eq!(parse(&aer), Some(LinePart::Aer { device: gpu, severity: AerSeverity::Fatal, detail: false }));
    }
}

/// The prefilter passes each word wherever a driver or a log prefix puts it in the head, and
/// nothing else: the bench's busy-node lines, the words' look-alikes, a word past the head.
#[test]
fn the_prefilter_finds_each_word_and_only_those() {
    let yes = |nvrm, sxid, aer| Candidates { nvrm, sxid, aer };
    for prefix in ["", "[ 1234.567890] ", "[12345678.123456] "] {
        let c = |m: &str| candidates(&format!("{prefix}{m}"));
        assert_eq!(
            c("NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>'"),
            yes(true, false, false)
        );
        assert_eq!(
            c("NVRM: fallen off the bus and is not responding to commands."),
            yes(true, false, false)
        );
        assert_eq!(
            c("nvidia-nvswitch13: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44"),
            yes(false, true, false)
        );
        assert_eq!(
            c("mlx5_core 10000:0c:00.1: AER: Corrected error received: 10000:0c:00.1"),
            yes(false, false, true)
        );
        assert_eq!(
            c("pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, type=Physical Layer"),
            yes(false, false, true)
        );
    }
    for other in [
        "IPv6: ADDRCONF(NETDEV_CHANGE): veth1: link becomes ready",
        "EXT4-fs (dm-1): mounted filesystem r/w with ordered data mode. Quota mode: none.",
        "audit: type=1400 audit(1.123:1): apparmor=\"DENIED\" operation=\"open\"",
        "NVRM loading NVIDIA UNIX Open Kernel Module",
        "CPU0: Core temperature above threshold, cpu clock throttled (AER 3)",
        "usb 1-1: new high-speed USB device number 2 using xhci_hcd (a PCIe Bus device)",
    ] {
        assert_eq!(candidates(other), Candidates::default(), "{other}");
    }
    // A word past the head is not looked for (no driver prints one there).
    let far = format!("{} NVRM: Xid (PCI:0000:05:00): 79", "x".repeat(HEAD));
    assert_eq!(candidates(&far), Candidates::default());
    assert_eq!(parse(&far), None);
}

proptest! {
    /// Whatever precedes the words within the head, the driver's lines are read.
    #[test]
    fn the_words_are_found_after_any_short_prefix(prefix in "[a-z0-9 .:\\[\\]_-]{0,40}", bus in 0u32..256) {
        let line = format!("{prefix}NVRM: Xid (PCI:0000:{bus:02x}:00): 79, GPU has fallen off the bus.");
        prop_assert!(candidates(&line).nvrm);
        let aer = format!("{prefix}pcieport 0000:{bus:02x}:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)");
        prop_assert!(candidates(&aer).aer);
    }
}
