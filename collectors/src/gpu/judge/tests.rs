use super::*;
use crate::gpu::sample::{AerDelta, EarlierBoots};

fn events(xid: u32, class: Class, lines: u64, bursts: u64) -> XidEvents {
    XidEvents {
        lines,
        bursts,
        xids: vec![(xid, lines)],
        worst: class,
        worst_xid: Some(xid),
        fallen_off: false,
        init_failed: false,
        recovery_action: None,
        last_seen_seconds_ago: Some(10),
        line: format!("NVRM: Xid (PCI:0000:3b:00): {xid}, pid=1, name=x"),
    }
}

fn gpu(x: Option<XidEvents>) -> GpuState {
    let mut g = GpuState::new("0000:3b:00.0");
    g.on_bus = true;
    g.in_driver = Some(true);
    g.xids = x;
    g
}

fn one(s: &GpuSample, id: &str) -> Draft {
    let d: Vec<Draft> = judge(s, &Thresholds::default())
        .into_iter()
        .filter(|d| d.id == id)
        .collect();
    assert_eq!(d.len(), 1, "{d:#?}");
    d.into_iter().next().unwrap()
}

fn sample(g: GpuState) -> GpuSample {
    GpuSample {
        gpus: vec![g],
        driver_loaded: true,
        lookback_seconds: 3600,
        ..GpuSample::default()
    }
}

#[test]
fn the_applications_xids_stay_info_even_in_floods_and_repeats() {
    for x in [13, 31, 43, 45] {
        let d = one(
            &sample(gpu(Some(events(x, Class::App, 5000, 7)))),
            "gpu.xid",
        );
        assert_eq!(d.severity, Severity::Info, "Xid {x}");
        assert!(d.is("benign") && !d.is("repeated") && d.is("flood"));
    }
}

#[test]
fn classes_decide_severity_and_a_repeat_escalates() {
    let d = one(
        &sample(gpu(Some(events(94, Class::Watch, 1, 1)))),
        "gpu.xid",
    );
    assert_eq!(d.severity, Severity::Warning);
    assert!(d.is("watch") && !d.is("repeated"));
    let d = one(
        &sample(gpu(Some(events(94, Class::Watch, 2, 2)))),
        "gpu.xid",
    );
    assert_eq!(d.severity, Severity::Critical);
    assert!(d.is("repeated"));
    let d = one(
        &sample(gpu(Some(events(119, Class::Reset, 1, 1)))),
        "gpu.xid",
    );
    assert_eq!(d.severity, Severity::Critical);
    assert!(d.is("reset") && !d.is("repeated"));
    let d = one(
        &sample(gpu(Some(events(9999, Class::Unknown, 1, 1)))),
        "gpu.xid",
    );
    assert_eq!(d.severity, Severity::Warning);
    assert!(d.is("unknown"));
}

#[test]
fn an_earlier_boot_alone_raises_nothing_and_with_this_boot_escalates() {
    let mut g = gpu(None);
    g.earlier_boots = Some(EarlierBoots {
        lines: 3,
        xids: vec![79],
        worst: Class::Reboot,
    });
    assert!(judge(&sample(g.clone()), &Thresholds::default()).is_empty());
    g.xids = Some(events(94, Class::Watch, 1, 1));
    let d = one(&sample(g), "gpu.xid");
    assert_eq!(d.severity, Severity::Critical);
    assert!(d.is("across_reboot") && d.is("repeated"));
}

#[test]
fn lost_and_excluded_gpus() {
    let mut g = gpu(None);
    g.in_driver = Some(false);
    let d = one(&sample(g.clone()), "gpu.unavailable");
    assert!(d.is("missing") && d.severity == Severity::Critical);
    g.in_driver = None;
    assert!(
        judge(&sample(g.clone()), &Thresholds::default()).is_empty(),
        "driver not loaded: not lost"
    );
    g.in_driver = Some(true);
    g.excluded = true;
    assert!(one(&sample(g), "gpu.unavailable").is("excluded"));
}

fn device(kind: Kind, aer: Option<AerDelta>) -> DeviceState {
    DeviceState {
        bdf: "0000:17:00.0".into(),
        kind,
        below: None,
        below_kind: None,
        aer,
        aer_totals: [Some(0), Some(0), Some(0)],
        speed: Some(16.0),
        max_speed: Some(16.0),
        width: Some(16),
        max_width: Some(16),
    }
}

#[test]
fn aer_rates_not_totals() {
    let t = Thresholds::default();
    let quiet = GpuSample {
        devices: vec![device(
            Kind::Nic,
            Some(AerDelta {
                seconds: 60.0,
                correctable: 5,
                nonfatal: 0,
                fatal: 0,
            }),
        )],
        ..GpuSample::default()
    };
    assert!(judge(&quiet, &t).is_empty());
    let rising = GpuSample {
        devices: vec![device(
            Kind::Nic,
            Some(AerDelta {
                seconds: 60.0,
                correctable: 540,
                nonfatal: 0,
                fatal: 0,
            }),
        )],
        ..GpuSample::default()
    };
    let d = one(&rising, "gpu.pcie_errors");
    assert_eq!(d.severity, Severity::Warning);
    assert!(d.is("corrected") && d.is("from_counters"));
    let fatal = GpuSample {
        devices: vec![device(
            Kind::Gpu,
            Some(AerDelta {
                seconds: 60.0,
                correctable: 0,
                nonfatal: 0,
                fatal: 1,
            }),
        )],
        ..GpuSample::default()
    };
    let d = one(&fatal, "gpu.pcie_errors");
    assert!(d.severity == Severity::Critical && d.is("fatal") && d.is("gpu"));
}

#[test]
fn links_below_both_ends() {
    let mut d = device(Kind::Gpu, None);
    d.width = Some(8);
    let s = GpuSample {
        devices: vec![d.clone()],
        ..GpuSample::default()
    };
    assert!(one(&s, "gpu.pcie_link_degraded").is("narrower"));
    // A GPU at a lower speed (idle) is not degraded; a NIC is.
    d.width = Some(16);
    d.speed = Some(2.5);
    let s = GpuSample {
        devices: vec![d.clone()],
        ..GpuSample::default()
    };
    assert!(judge(&s, &Thresholds::default()).is_empty());
    d.kind = Kind::Nvme;
    let s = GpuSample {
        devices: vec![d],
        ..GpuSample::default()
    };
    assert!(one(&s, "gpu.pcie_link_degraded").is("slower"));
}
