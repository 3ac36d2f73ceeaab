use super::*;
use crate::clock::sample::{DaemonKind, TimeDaemon};
use crate::clock::timex::{from_raw, RawTimex};

fn timex(status: i64, maxerror_us: i64, offset_us: i64) -> crate::clock::timex::Timex {
    let state = if status & 0x40 != 0 { 5 } else { 0 };
    from_raw(
        RawTimex {
            status,
            offset: offset_us,
            freq: 0,
            maxerror: maxerror_us,
            esterror: maxerror_us / 2,
        },
        state,
    )
}

fn sample(status: i64, maxerror_us: i64, offset_us: i64) -> ClockSample {
    ClockSample {
        timex: timex(status, maxerror_us, offset_us),
        previous_offset_seconds: None,
        uptime_seconds: Some(7200.0),
        daemons: Some(Vec::new()),
    }
}

fn chronyd() -> TimeDaemon {
    TimeDaemon {
        kind: DaemonKind::Chrony,
        comm: "chronyd",
        pid: 612,
    }
}

#[test]
fn a_synchronised_clock_is_quiet() {
    // chronyd at a 1024 s poll: maxerror about 0.55 s, no PLL offset.
    assert!(judge(&sample(0x2001, 550_000, 0), &Thresholds::default()).is_empty());
}

#[test]
fn unsynchronised_after_the_grace_period_names_no_daemon() {
    let d = judge(&sample(0x40, 16_000_000, 0), &Thresholds::default());
    assert_eq!(d.len(), 1);
    let d = &d[0];
    assert_eq!(d.id, "clock.unsynchronised");
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.evidence["status"].as_str(), Some("UNSYNC"));
    assert_eq!(d.evidence["clock_state"].as_str(), Some("TIME_ERROR"));
    assert_eq!(d.evidence["max_error_seconds"].as_f64(), Some(16.0));
    assert_eq!(d.evidence["time_daemons"].as_str(), Some("none"));
    assert!(d.conditions.contains("no_daemon"));
}

#[test]
fn unsynchronised_during_the_boot_grace_is_not_judged() {
    let mut s = sample(0x40, 16_000_000, 0);
    s.uptime_seconds = Some(600.0);
    assert!(judge(&s, &Thresholds::default()).is_empty());
    s.uptime_seconds = Some(1200.0);
    assert_eq!(judge(&s, &Thresholds::default()).len(), 1);
    // Uptime unknown: the grace is taken as over.
    s.uptime_seconds = None;
    assert_eq!(judge(&s, &Thresholds::default()).len(), 1);
}

#[test]
fn the_daemon_found_selects_its_advice() {
    let mut s = sample(0x40, 16_000_000, 0);
    s.daemons = Some(vec![chronyd()]);
    let d = &judge(&s, &Thresholds::default())[0];
    assert_eq!(
        d.evidence["time_daemons"].as_str(),
        Some("chronyd (pid 612)")
    );
    assert!(d.conditions.contains("chronyd"));
    assert!(!d.conditions.contains("no_daemon"));
    // Not looked for (the process table could not be read): neither.
    s.daemons = None;
    let d = &judge(&s, &Thresholds::default())[0];
    assert!(!d.evidence.contains_key("time_daemons"));
    assert!(d.conditions.is_empty(), "{:?}", d.conditions);
}

#[test]
fn a_grown_error_bound_on_a_synchronised_clock() {
    // The daemon stopped updating the kernel 2.5 h ago: 0.05 s + 9000 s * 0.5 ms.
    let d = judge(&sample(0x2001, 4_550_000, 0), &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "clock.error_large");
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].conditions.contains("bound_large"));
    assert!(!d[0].conditions.contains("offset_large"));
    // Just under the bound: quiet.
    assert!(judge(&sample(0x2001, 3_990_000, 0), &Thresholds::default()).is_empty());
}

#[test]
fn an_offset_that_does_not_shrink_warns_and_a_shrinking_one_does_not() {
    let t = Thresholds::default();
    let mut s = sample(0x0001, 100_000, 80_000); // 80 ms, µs units
    let d = judge(&s, &t);
    assert_eq!(d[0].id, "clock.error_large");
    assert_eq!(d[0].evidence["offset_seconds"].as_f64(), Some(0.08));
    assert!(d[0].conditions.contains("offset_large"));
    s.previous_offset_seconds = Some(0.09); // converging: 90 ms -> 80 ms
    assert!(judge(&s, &t).is_empty());
    s.previous_offset_seconds = Some(-0.07); // |70 ms| -> 80 ms: growing
    assert_eq!(judge(&s, &t).len(), 1);
    // Negative offsets count by their size.
    let s = sample(0x0001, 100_000, -1_500_000);
    assert_eq!(judge(&s, &t)[0].severity, Severity::Critical);
    // Under the threshold: quiet.
    assert!(judge(&sample(0x0001, 100_000, 49_000), &t).is_empty());
}

#[test]
fn every_condition_the_judge_sets_is_declared_in_the_rule_file() {
    // The rule file's declared conditions must cover each daemon kind's name.
    let text = include_str!("../../../rules/clock.toml");
    for (_, kind) in crate::clock::daemons::NAMES {
        assert!(
            text.contains(&format!("{} = ", kind.condition())),
            "{kind:?}"
        );
    }
}
