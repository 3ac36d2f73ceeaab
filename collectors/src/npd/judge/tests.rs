use super::*;
use crate::npd::sample::Hit;

fn hit(kind: RuleKind, ago: u64) -> Hit {
    Hit {
        config_file: "/etc/npd/kernel-monitor.json".into(),
        source: "kernel-monitor".into(),
        plugin: "kmsg",
        log_path: "/dev/kmsg".into(),
        identifier: None,
        kind,
        reason: "OOMKilling".into(),
        condition: (kind == RuleKind::Permanent)
            .then(|| ("KernelDeadlock".into(), "KernelHasNoDeadlock".into())),
        pattern: "Killed process .*".into(),
        lines: "Killed process 1 (x)".into(),
        count: 2,
        last_seen_seconds_ago: ago,
    }
}

#[test]
fn a_temporary_match_lasts_the_window() {
    let t = Thresholds::default();
    let s = NpdSample {
        hits: vec![hit(RuleKind::Temporary, 10)],
        configs: 1,
    };
    let d = judge(&s, &t);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "npd.temporary");
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].is("kmsg"));
    let s = NpdSample {
        hits: vec![hit(RuleKind::Temporary, t.event_window_seconds + 1)],
        configs: 1,
    };
    assert!(judge(&s, &t).is_empty());
}

#[test]
fn a_permanent_match_holds() {
    let t = Thresholds::default();
    let s = NpdSample {
        hits: vec![hit(RuleKind::Permanent, 1_000_000)],
        configs: 1,
    };
    let d = judge(&s, &t);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, "npd.permanent");
    assert_eq!(d[0].subject, "OOMKilling");
}
