use super::*;
use crate::finding::Finding;
use crate::nodelog::patterns::Detail;
use crate::nodelog::registry::RegistryFacts;
use crate::nodelog::sample::ReadReport;

const NOW: i64 = 1_795_406_400;

fn inc(kind: EventKind, subject: &str, ago: i64) -> Incident {
    Incident {
        kind,
        subject: subject.into(),
        count: 3,
        first_seen: NOW - ago - 120,
        last_seen: NOW - ago,
        example: "line".into(),
        source: SourceKind::Syslog,
        file: "/var/log/messages".into(),
        ident: "kubelet".into(),
        detail: Detail::default(),
    }
}

fn sample(incidents: Vec<Incident>) -> LogSample {
    LogSample {
        now: NOW,
        lookback_seconds: 3600,
        incidents,
        report: ReadReport::default(),
    }
}

fn render(s: &LogSample, live: &LiveFacts) -> Vec<Finding> {
    let rules = crate::rules::RuleBook::builtin();
    judge(s, live, &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, "node-1"))
        .collect()
}

#[test]
fn recent_states_fire_old_ones_are_history() {
    let s = sample(vec![
        inc(EventKind::PlegUnhealthy, "", 10),
        inc(EventKind::NetworkNotReady, "", 299),
        inc(EventKind::RuntimeNotReady, "", 301),
    ]);
    let f = render(&s, &LiveFacts::default());
    let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "runtime.pleg_unhealthy",
            "runtime.kubelet_network_not_ready"
        ]
    );
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].evidence["last_seen_seconds_ago"].as_f64(), Some(10.0));
}

#[test]
fn pleg_names_the_full_disk() {
    let mut no_space = inc(EventKind::NoSpace, "", 30);
    no_space.detail.path = Some("/var/lib/docker/containers/x-json.log".into());
    let s = sample(vec![inc(EventKind::PlegUnhealthy, "", 10), no_space]);
    let d = judge(&s, &LiveFacts::default(), &Thresholds::default());
    assert!(d[0].is("disk_full"));
    let live = LiveFacts {
        full_runtime_dirs: vec!["/var/lib/docker".into()],
        ..LiveFacts::default()
    };
    let s = sample(vec![inc(EventKind::PlegUnhealthy, "", 10)]);
    let f = render(&s, &live);
    assert_eq!(
        f[0].evidence["full_runtime_dirs"].as_str(),
        Some("/var/lib/docker")
    );
    assert!(
        f[0].summary.en.contains("/var/lib/docker"),
        "{}",
        f[0].summary.en
    );
    let s = sample(vec![inc(EventKind::PlegUnhealthy, "", 10)]);
    assert!(!judge(&s, &LiveFacts::default(), &Thresholds::default())[0].is("disk_full"));
}

#[test]
fn a_healthy_live_state_clears_after_settling() {
    let live = LiveFacts {
        cni_config_present: Some(true),
        runtime_responding: Some(true),
        ..LiveFacts::default()
    };
    let s = sample(vec![
        inc(EventKind::NetworkNotReady, "", 90),
        inc(EventKind::RuntimeNotReady, "", 90),
    ]);
    assert!(judge(&s, &live, &Thresholds::default()).is_empty());
    // Still logging: still a finding, whatever the live state says.
    let s = sample(vec![inc(EventKind::NetworkNotReady, "", 5)]);
    assert_eq!(judge(&s, &live, &Thresholds::default()).len(), 1);
    // What the probes already show is theirs to report.
    let missing = LiveFacts {
        cni_config_present: Some(false),
        runtime_responding: Some(false),
        ..LiveFacts::default()
    };
    let s = sample(vec![
        inc(EventKind::NetworkNotReady, "", 5),
        inc(EventKind::RuntimeNotReady, "", 5),
    ]);
    assert!(judge(&s, &missing, &Thresholds::default()).is_empty());
    let present = LiveFacts {
        cni_config_present: Some(true),
        ..LiveFacts::default()
    };
    let s = sample(vec![inc(EventKind::NetworkNotReady, "", 5)]);
    assert!(judge(&s, &present, &Thresholds::default())[0].is("cni_config_present"));
}

#[test]
fn pulls_confirm_their_cause_in_the_config() {
    let mut i = inc(EventKind::PullHttpRegistry, "10.0.0.5:5000/shop/web:v1", 60);
    i.detail.registry = Some("10.0.0.5:5000".into());
    i.detail.runtime = Some(Runtime::Docker);
    let mut live = LiveFacts::default();
    live.registries.insert(
        "10.0.0.5:5000".into(),
        RegistryFacts {
            registry: "10.0.0.5:5000".into(),
            docker_config: true,
            ..RegistryFacts::default()
        },
    );
    let d = judge(&sample(vec![i.clone()]), &live, &Thresholds::default());
    assert!(d[0].is("docker") && d[0].is("docker_not_listed"));
    let f = render(&sample(vec![i.clone()]), &live);
    assert!(f[0]
        .remediation
        .commands
        .iter()
        .any(|c| c.contains("daemon.json")));
    live.registries
        .get_mut("10.0.0.5:5000")
        .unwrap()
        .docker_insecure = true;
    let d = judge(&sample(vec![i.clone()]), &live, &Thresholds::default());
    assert!(d[0].is("docker_listed_insecure"));
    // An old failure is history.
    let old = inc(EventKind::PullNotFound, "imroc/test:v0.2", 901);
    assert!(judge(&sample(vec![old]), &live, &Thresholds::default()).is_empty());
}

#[test]
fn conflicts_are_per_container_and_capped() {
    let mut v = Vec::new();
    for n in 0..30 {
        let mut i = inc(
            EventKind::NameConflict,
            &format!("k8s_POD_web-{n}_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0"),
            n,
        );
        i.detail.pod = Some(format!("web-{n}"));
        i.detail.namespace = Some("default".into());
        i.detail.runtime = Some(Runtime::Docker);
        v.push(i);
    }
    let d = judge(&sample(v), &LiveFacts::default(), &Thresholds::default());
    assert_eq!(d.len(), 20);
    assert!(d[0].subject.contains("web-0_"));
}
