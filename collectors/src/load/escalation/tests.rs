use super::*;
use crate::load::judge::judge;
use crate::load::observation::{CpuPercent, DiskRates, Held, IoWaitMethod};
use crate::load::thresholds::Escalation;
use crate::proc::loadavg::Loadavg;
use crate::proc::pressure::{Pressure, PsiLine};
use proptest::prelude::*;

fn line(avg10: f64) -> PsiLine {
    PsiLine {
        avg10,
        avg60: avg10,
        avg300: avg10,
        total_us: 0,
    }
}

/// A window of whole-node signals (no processes: the judge decides on the signals).
#[allow(clippy::too_many_arguments)]
fn window(
    cpus: u32,
    (load1, previous_load1): (f64, Option<f64>),
    (blocked, previous_blocked): (u64, Option<u64>),
    (busy, iowait, previous_iowait): (f64, f64, Option<f64>),
    disk_busy: Option<f64>,
    psi_io: Option<(f64, f64)>,
    psi_cpu_some: Option<f64>,
) -> Observation {
    Observation {
        elapsed_seconds: 15.0,
        cpus,
        load: Loadavg {
            load1,
            load5: load1,
            load15: load1,
            running: 1,
            total: 100,
        },
        previous_load1,
        procs_running: 1,
        procs_blocked: blocked,
        previous_procs_blocked: previous_blocked,
        cpu: CpuPercent {
            user: busy,
            iowait,
            idle: (100.0 - busy - iowait).max(0.0),
            ..CpuPercent::default()
        },
        previous_iowait_percent: previous_iowait,
        per_cpu: Vec::new(),
        disks: disk_busy
            .map(|b| DiskRates {
                name: "vda".into(),
                busy_percent: b,
                ..DiskRates::default()
            })
            .into_iter()
            .collect(),
        pressure: Pressures {
            io: psi_io.map(|(some, full)| Pressure {
                some: line(some),
                full: Some(line(full)),
            }),
            cpu: psi_cpu_some.map(|some| Pressure {
                some: line(some),
                full: None,
            }),
            memory: None,
        },
        top_io: Vec::new(),
        top_cpu: Vec::new(),
        blocked: Vec::new(),
        io_wait_method: IoWaitMethod::BytesOnly,
        total_io_wait_percent: 0.0,
        total_io_bytes_per_second: 0.0,
        total_cpu_percent: 0.0,
        kubelet_running: Some(true),
        process_scope: None,
        held: Held::default(),
    }
}

fn quiet() -> Observation {
    window(
        2,
        (0.3, Some(0.3)),
        (0, Some(0)),
        (5.0, 0.0, Some(0.0)),
        Some(1.0),
        Some((0.1, 0.0)),
        Some(0.5),
    )
}

#[test]
fn a_quiet_window_needs_no_detail_and_each_bar_escalates() {
    let th = Thresholds::default();
    assert_eq!(needs_detail(&Signals::of(&quiet()), &th), None);
    type Stage = fn(&mut Observation);
    let cases: [(Stage, Option<Reason>); 7] = [
        (|o| o.load.load1 = 2.0, Some(Reason::Load)),
        (|o| o.cpu.iowait = 0.5, Some(Reason::Iowait)),
        (|o| o.disks[0].busy_percent = 45.0, Some(Reason::DiskBusy)),
        (
            |o| {
                o.pressure.io = Some(Pressure {
                    some: line(9.0),
                    full: Some(line(10.0)),
                })
            },
            Some(Reason::PsiIoFull),
        ),
        (
            |o| {
                o.pressure.cpu = Some(Pressure {
                    some: line(10.0),
                    full: None,
                })
            },
            Some(Reason::PsiSome),
        ),
        (
            |o| {
                o.procs_blocked = 1;
                o.previous_procs_blocked = Some(2);
            },
            Some(Reason::ProcsBlocked),
        ),
        // Just under every bar: still quiet.
        (
            |o| {
                o.load.load1 = 1.99;
                o.cpu.iowait = 0.49;
                o.disks[0].busy_percent = 44.9;
                o.pressure.io = Some(Pressure {
                    some: line(9.9),
                    full: Some(line(9.9)),
                });
                o.procs_blocked = 3;
            },
            None,
        ),
    ];
    for (stage, reason) in cases {
        let mut o = quiet();
        stage(&mut o);
        assert_eq!(needs_detail(&Signals::of(&o), &th), reason, "{o:?}");
    }
    // With the load limits raised (6× per CPU), a saturated run queue at 2.5 per CPU is
    // under the load bar (3.0) but CPU-bound territory: busy 50% ≥ half of 90%.
    let raised = Thresholds {
        load_warning_per_cpu: 6.0,
        load_critical_per_cpu: 8.0,
        ..Thresholds::default()
    };
    let mut o = quiet();
    o.load.load1 = 5.0;
    o.cpu.user = 50.0;
    assert_eq!(
        needs_detail(&Signals::of(&o), &raised),
        Some(Reason::CpuBusy)
    );
    o.cpu.user = 44.0;
    assert_eq!(needs_detail(&Signals::of(&o), &raised), None);
    // A single sample of D-state tasks is not sustained.
    let mut o = quiet();
    o.procs_blocked = 4;
    assert_eq!(needs_detail(&Signals::of(&o), &th), None);
    // A lowered rule limit lowers its bar: --disk-busy-percent 1 escalates at 0.5%.
    let lowered = Thresholds {
        disk_busy_percent: 1.0,
        ..Thresholds::default()
    };
    let mut o = quiet();
    o.disks[0].busy_percent = 0.6;
    assert_eq!(
        needs_detail(&Signals::of(&o), &lowered),
        Some(Reason::DiskBusy)
    );
    assert_eq!(
        needs_detail(
            &Signals::of(&o),
            &Thresholds {
                escalation: Escalation::never(),
                ..lowered
            }
        ),
        None
    );
    assert_eq!(
        needs_detail(
            &Signals::of(&quiet()),
            &Thresholds {
                escalation: Escalation::always(),
                ..Thresholds::default()
            }
        ),
        Some(Reason::Load)
    );
}

/// A share in percent: often 0 (a quiet signal) or small, often near a default limit.
fn percent() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        0.0..5.0f64,
        5.0..40.0f64,
        0.0..100.0f64,
        85.0..100.0f64,
        Just(100.0)
    ]
}

/// load1 per CPU: often under 1, else up to 8.
fn per_cpu() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..1.0f64, 0.0..8.0f64]
}

/// A rule limit: its default half the time, else anything (0 included).
fn limit(default: f64) -> impl Strategy<Value = f64> {
    prop_oneof![Just(default), Just(0.0), 0.01..200.0f64]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// Why no finding can be missed: whatever the window and the rule limits, a window the
    /// judge raises anything on has a whole-node signal at its escalation bar (at the
    /// default shares), so its run read the processes that finding names.
    #[test]
    fn every_finding_implies_escalation(
        cpus in prop_oneof![1u32..4, 1u32..64],
        load_per_cpu in per_cpu(),
        (previous_per_cpu, load_sustained) in (proptest::option::of(per_cpu()), any::<bool>()),
        blocked in prop_oneof![Just(0u64), 0u64..8, 0u64..200],
        (previous_blocked, blocked_sustained) in (
            proptest::option::of(prop_oneof![Just(0u64), 0u64..8, 0u64..200]),
            any::<bool>(),
        ),
        busy in percent(),
        iowait in percent(),
        previous_iowait in proptest::option::of(percent()),
        disk_busy in proptest::option::of(percent()),
        psi_io in proptest::option::of((percent(), prop_oneof![Just(0.0), percent()])),
        // The PSI `some` bar feeds no rule: the others must do without it.
        psi_some_bar in prop_oneof![Just(10.0), Just(f64::INFINITY)],
        psi_cpu in proptest::option::of(percent()),
        // `check`'s second sample: the bars at the limits.
        at_the_limits in any::<bool>(),
        limits in (
            limit(2.0), limit(4.0), limit(1.0), limit(10.0), limit(30.0), limit(90.0),
            limit(20.0), limit(90.0), limit(1.0),
        ),
    ) {
        let (warn, crit, info, wa_warn, wa_crit, disk, psi, cpu_busy, blocked_per_cpu) =
            limits;
        // Sustained signals are as common as changing ones.
        let load1 = load_per_cpu * f64::from(cpus);
        let previous_load1 = if load_sustained {
            Some(load1)
        } else {
            previous_per_cpu.map(|p| p * f64::from(cpus))
        };
        let previous_blocked = if blocked_sustained {
            Some(blocked)
        } else {
            previous_blocked
        };
        let th = Thresholds {
            load_warning_per_cpu: warn,
            load_critical_per_cpu: crit,
            iowait_info_percent: info,
            iowait_warning_percent: wa_warn,
            iowait_critical_percent: wa_crit,
            disk_busy_percent: disk,
            psi_io_full_percent: psi,
            cpu_busy_percent: cpu_busy,
            blocked_per_cpu,
            escalation: if at_the_limits {
                Escalation::default().at_the_limits()
            } else {
                Escalation {
                    psi_some_avg10_percent: psi_some_bar,
                    ..Escalation::default()
                }
            },
            ..Thresholds::default()
        };
        // As the kernel reports it: `some` is at least `full`.
        let psi_io = psi_io.map(|(full, more)| ((full + more).min(100.0), full));
        let busy = busy.min(100.0 - iowait);
        let obs = window(
            cpus,
            (load1, previous_load1),
            (blocked, previous_blocked),
            (busy, iowait, previous_iowait),
            disk_busy,
            psi_io,
            psi_cpu,
        );
        let drafts = judge(&obs, &th);
        if !drafts.is_empty() {
            prop_assert!(
                needs_detail(&Signals::of(&obs), &th).is_some(),
                "{:?} raised without escalation: {obs:?} {th:?}",
                drafts.iter().map(|d| d.id.as_str()).collect::<Vec<_>>()
            );
        }
        // Nor an IO finding with its IO signals "quiet": the steady pass that leaves out the
        // idle processes is never the pass of an IO finding.
        if drafts.iter().any(|d| d.id == "load.io_bound" || d.id == "load.iowait") {
            prop_assert!(
                !io_quiet(&Signals::of(&obs), &th),
                "an IO finding with quiet IO signals: {obs:?} {th:?}"
            );
        }
    }
}

#[test]
fn io_is_quiet_only_under_every_io_bar_and_with_nothing_blocked() {
    let th = Thresholds::default();
    let quiet = window(
        2,
        (3.0, Some(3.0)),
        (0, Some(0)),
        (95.0, 0.2, Some(0.0)),
        Some(10.0),
        Some((5.0, 1.0)),
        Some(80.0),
    );
    assert!(io_quiet(&Signals::of(&quiet), &th), "busy CPUs, quiet IO");
    let loud = [
        window(
            2,
            (3.0, None),
            (0, None),
            (90.0, 0.5, None),
            Some(10.0),
            Some((5.0, 1.0)),
            None,
        ),
        window(
            2,
            (3.0, None),
            (0, None),
            (90.0, 0.0, None),
            Some(45.0),
            Some((5.0, 1.0)),
            None,
        ),
        window(
            2,
            (3.0, None),
            (0, None),
            (90.0, 0.0, None),
            Some(10.0),
            Some((12.0, 10.0)),
            None,
        ),
        window(
            2,
            (3.0, None),
            (0, None),
            (90.0, 0.0, None),
            Some(10.0),
            Some((10.0, 0.0)),
            None,
        ),
        window(
            2,
            (3.0, None),
            (1, None),
            (90.0, 0.0, None),
            Some(10.0),
            None,
            None,
        ),
    ];
    for (i, w) in loud.iter().enumerate() {
        assert!(!io_quiet(&Signals::of(w), &th), "case {i}: {w:?}");
    }
    let mut first = Signals::of(&quiet);
    first.iowait_percent = None;
    assert!(!io_quiet(&first, &th), "no window: nothing known");
}

/// `check`'s last sample: a one-second window with an iowait tick (0.5 % on 2 CPUs), PSI
/// `some` from other work and load1 at 1.5 per CPU reaches the default bars but none at the
/// limits; each rule's own limit still does.
#[test]
fn at_the_limits_a_flicker_reads_no_process_and_a_limit_does() {
    let th = Thresholds {
        escalation: Escalation::default().at_the_limits(),
        ..Thresholds::default()
    };
    let mut w = quiet();
    w.cpus = 2;
    w.load.load1 = 3.0;
    w.cpu.iowait = 0.5;
    w.pressure.cpu = Some(Pressure {
        some: line(60.0),
        full: None,
    });
    assert!(needs_detail(&Signals::of(&w), &Thresholds::default()).is_some());
    assert_eq!(needs_detail(&Signals::of(&w), &th), None);
    assert!(judge(&w, &th).is_empty(), "and nothing to report");
    type Stage = fn(&mut Observation);
    let cases: [(Stage, Reason); 3] = [
        (|o| o.load.load1 = 4.0, Reason::Load),
        (|o| o.cpu.iowait = 1.5, Reason::Iowait),
        (|o| o.disks[0].busy_percent = 90.0, Reason::DiskBusy),
    ];
    for (stage, reason) in cases {
        let mut o = w.clone();
        stage(&mut o);
        assert_eq!(needs_detail(&Signals::of(&o), &th), Some(reason), "{o:?}");
    }
}

/// The signals of a first sample (no window) of `quiet()`'s node.
fn first_sample() -> Signals {
    Signals {
        previous_procs_blocked: None,
        cpu_busy_percent: None,
        iowait_percent: None,
        max_disk_busy_percent: None,
        ..Signals::of(&quiet())
    }
}

/// `check`'s first sample has no window and is followed by its second: when PSI io is at
/// serve's bars, or a task is blocked on that one sample, it reads every process as the
/// second's baseline; a quiet one reads none, and neither does one whose only signs are CPU
/// (load1 past serve's bar but under the limit, PSI cpu some): the catch-up finds CPU
/// culprits. `serve`'s first
/// run is unchanged (a single blocked task does not escalate it), and `check`'s windows keep
/// the bars at the limits.
#[test]
fn at_the_limits_the_first_sample_takes_a_baseline_at_signs_of_io_trouble() {
    let check = Thresholds {
        escalation: Escalation::default().at_the_limits(),
        ..Thresholds::default()
    };
    let serve = Thresholds::default();
    let s = first_sample();
    assert!(!s.has_window());
    assert_eq!(needs_detail(&s, &check), None);
    assert_eq!(needs_detail(&s, &serve), None);
    type Stage = fn(&mut Signals);
    let io: [(Stage, Reason, Option<Reason>); 3] = [
        (
            |s| s.pressure.io.as_mut().unwrap().full = Some(line(10.0)),
            Reason::PsiIoFull,
            Some(Reason::PsiIoFull),
        ),
        (
            |s| s.pressure.io.as_mut().unwrap().some = line(10.0),
            Reason::PsiSome,
            Some(Reason::PsiSome),
        ),
        (|s| s.procs_blocked = 1, Reason::ProcsBlocked, None),
    ];
    for (stage, reason, at_serve) in io {
        let mut s = first_sample();
        stage(&mut s);
        assert_eq!(needs_detail(&s, &check), Some(reason), "{s:?}");
        assert_eq!(takes_baseline(&s, &check), Some(reason), "{s:?}");
        assert_eq!(needs_detail(&s, &serve), at_serve, "{s:?}");
    }
    let cpu: [(Stage, Reason); 2] = [
        // The handbook's 34.6 on 24 CPUs: 1.4 per CPU, over serve's bar (1.0), under the limit.
        (
            |s| {
                s.cpus = 24;
                s.load1 = 34.6;
            },
            Reason::Load,
        ),
        (
            |s| s.pressure.cpu.as_mut().unwrap().some = line(60.0),
            Reason::PsiSome,
        ),
    ];
    for (stage, at_serve) in cpu {
        let mut s = first_sample();
        stage(&mut s);
        assert_eq!(needs_detail(&s, &check), None, "{s:?}");
        assert_eq!(needs_detail(&s, &serve), Some(at_serve), "{s:?}");
    }
    // load1 at its limit (2.0 per CPU) escalates the run, as any, but takes no baseline of
    // every process (the cgroups' counters are that run's reading): the catch-up finds the
    // CPU culprits. With a task blocked too, it takes one.
    let mut s = first_sample();
    s.cpus = 24;
    s.load1 = 48.0;
    assert_eq!(needs_detail(&s, &check), Some(Reason::Load));
    assert_eq!(takes_baseline(&s, &check), None);
    s.procs_blocked = 1;
    assert_eq!(takes_baseline(&s, &check), Some(Reason::ProcsBlocked));
    assert_eq!(takes_baseline(&s, &serve), None);
    // The load over a window at the limits: 1.4 per CPU is under the 2.0 limit.
    let mut w = quiet();
    w.cpus = 24;
    w.load.load1 = 34.6;
    assert_eq!(needs_detail(&Signals::of(&w), &check), None);
    w.load.load1 = 48.0;
    assert_eq!(needs_detail(&Signals::of(&w), &check), Some(Reason::Load));
}
