use super::*;
use crate::finding::Finding;
use crate::runtime::probe::{CriCondition, TaskStatus};
use crate::runtime::sample::{DeclaredPod, DiskFill, PortHolder};

fn findings(s: &Sample) -> Vec<Finding> {
    let rules = crate::rules::RuleBook::builtin();
    judge(s, &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, "node-1"))
        .collect()
}

fn rt(daemon: Daemon, pid: Option<u32>, outcome: Outcome) -> RuntimeSample {
    RuntimeSample {
        daemon,
        socket: match daemon {
            Daemon::Dockerd => "/var/run/docker.sock".into(),
            Daemon::Containerd => "/run/containerd/containerd.sock".into(),
            Daemon::CriDockerd => "/var/run/cri-dockerd.sock".into(),
        },
        why: vec![Why::Kubelet],
        pid,
        outcome,
        timeout: Duration::from_secs(2),
        version: None,
        data_dir: None,
        moby_shims: 0,
        restarts_in_window: 0,
    }
}

fn ids(s: &Sample) -> Vec<(String, Severity)> {
    findings(s)
        .into_iter()
        .map(|f| (f.id, f.severity))
        .collect()
}

#[test]
fn live_facts_for_the_log_judge() {
    let mut s = Sample::default();
    assert_eq!(s.runtime_responding(), None);
    assert_eq!(s.cni_config_present(), None);
    assert_eq!(s.cri_network_ready(), None);
    let mut full = rt(
        Daemon::Dockerd,
        Some(1),
        Outcome::Answered {
            latency: Duration::from_millis(1),
        },
    );
    full.data_dir = Some(DiskFill {
        path: "/data/docker".into(),
        used_percent: 99.0,
    });
    let mut down = rt(Daemon::Containerd, None, Outcome::NoSocket);
    down.data_dir = Some(DiskFill {
        path: "/var/lib/containerd".into(),
        used_percent: 40.0,
    });
    s.runtimes = vec![full, down];
    assert_eq!(
        s.full_runtime_dirs(&Thresholds::default()),
        vec!["/data/docker"]
    );
    assert_eq!(s.runtime_responding(), Some(false));
    s.runtimes.truncate(1);
    assert_eq!(s.runtime_responding(), Some(true));
    s.cni = Some(CniSample {
        conf_dir: "/etc/cni/net.d".into(),
        dir: CniDir::Empty,
        network_ready: Some(CriCondition {
            kind: "NetworkReady".into(),
            status: true,
            reason: String::new(),
            message: String::new(),
        }),
    });
    assert_eq!(s.cni_config_present(), Some(false));
    assert_eq!(s.cri_network_ready(), Some(true));
}

#[test]
fn each_runtime_state_has_its_finding() {
    let ok = Outcome::Answered {
        latency: Duration::from_millis(2),
    };
    let cases = [
        (Some(7), ok.clone(), None),
        (
            Some(7),
            Outcome::Answered {
                latency: Duration::from_millis(1500),
            },
            Some((SLOW, Severity::Warning)),
        ),
        (
            Some(7),
            Outcome::Timeout {
                after: Duration::from_secs(2),
                connected: true,
            },
            Some((HUNG, Severity::Critical)),
        ),
        (None, Outcome::Refused, Some((CRASHED, Severity::Critical))),
        (
            Some(7),
            Outcome::Refused,
            Some((UNREACHABLE, Severity::Critical)),
        ),
        (
            None,
            Outcome::NoSocket,
            Some((NOT_RUNNING, Severity::Critical)),
        ),
        (
            Some(7),
            Outcome::NoSocket,
            Some((UNREACHABLE, Severity::Critical)),
        ),
        (
            Some(7),
            Outcome::BadAnswer {
                latency: Duration::from_millis(3),
                detail: "HTTP 500".into(),
            },
            Some((UNREACHABLE, Severity::Critical)),
        ),
        (Some(7), Outcome::Failed("permission denied".into()), None),
    ];
    for (pid, outcome, want) in cases {
        let s = Sample {
            runtimes: vec![rt(Daemon::Dockerd, pid, outcome.clone())],
            ..Sample::default()
        };
        let got = ids(&s);
        match want {
            None => assert!(got.is_empty(), "{outcome:?}: {got:?}"),
            Some((id, sev)) => assert_eq!(got, vec![(id.to_string(), sev)], "{outcome:?}"),
        }
    }
}

#[test]
fn a_hung_runtime_on_a_full_disk_names_the_disk() {
    let mut r = rt(
        Daemon::Dockerd,
        Some(4822),
        Outcome::Timeout {
            after: Duration::from_secs(2),
            connected: true,
        },
    );
    r.data_dir = Some(DiskFill {
        path: "/var/lib/docker".into(),
        used_percent: 99.6,
    });
    let d = judge(
        &Sample {
            runtimes: vec![r],
            ..Sample::default()
        },
        &Thresholds::default(),
    );
    assert!(d[0].is("disk_full") && d[0].is("dockerd") && d[0].is("by_kubelet"));
    let f = findings(&Sample {
        runtimes: vec![rt(
            Daemon::Containerd,
            Some(1),
            Outcome::Timeout {
                after: Duration::from_secs(2),
                connected: true,
            },
        )],
        ..Sample::default()
    });
    assert_eq!(f[0].subject, "/run/containerd/containerd.sock");
    assert!(
        f[0].summary.en.contains("containerd"),
        "{}",
        f[0].summary.en
    );
}

#[test]
fn out_of_sync_lists_both_directions() {
    let s = Sample {
        sync: Some(SyncSample {
            docker_socket: "/var/run/docker.sock".into(),
            containerd_socket: "/run/containerd/containerd.sock".into(),
            namespace: "moby".into(),
            docker_only: vec![(
                "a9a1785b81343c3ad2093ad973f4f8e52dbf54823b8bb089886c8356d4036fe0".into(),
                Some(TaskStatus::Stopped),
            )],
            containerd_only: vec!["54922ec8b186".into()],
        }),
        ..Sample::default()
    };
    let f = findings(&s);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].id, OUT_OF_SYNC);
    assert_eq!(f[0].evidence["running_in_docker_only"].as_f64(), Some(1.0));
    assert!(
        f[0].summary.en.contains("a9a1785b8134"),
        "{}",
        f[0].summary.en
    );
    assert!(judge(
        &Sample {
            sync: Some(SyncSample::default()),
            ..Sample::default()
        },
        &Thresholds::default()
    )
    .is_empty());
}

#[test]
fn duplicates_only_matter_where_docker_runs() {
    let dup = DuplicateInstall {
        component: "runc".into(),
        paths: vec!["/usr/bin/runc".into(), "/usr/bin/docker-runc".into()],
        running: None,
    };
    let mut s = Sample {
        duplicates: vec![dup],
        ..Sample::default()
    };
    assert!(ids(&s).is_empty(), "no docker on this node");
    s.runtimes = vec![rt(
        Daemon::Dockerd,
        Some(1),
        Outcome::Answered {
            latency: Duration::from_millis(1),
        },
    )];
    assert_eq!(
        ids(&s),
        vec![(DUPLICATE_INSTALL.to_string(), Severity::Warning)]
    );
}

/// node-problem-detector's FrequentDockerRestart / FrequentContainerdRestart: a runtime that
/// restarted `daemon_restarts` times in the window warns, naming it, with the condition of
/// its class (and NPD's name with --kube-npd-names).
#[test]
fn a_runtime_that_keeps_restarting_warns_with_its_npd_condition() {
    let ok = Outcome::Answered {
        latency: Duration::from_millis(1),
    };
    let t = Thresholds::default();
    for (daemon, class, npd) in [
        (
            Daemon::Dockerd,
            "NodeDoctorFrequentDockerRestart",
            "FrequentDockerRestart",
        ),
        (
            Daemon::Containerd,
            "NodeDoctorFrequentContainerdRestart",
            "FrequentContainerdRestart",
        ),
    ] {
        let mut r = rt(daemon, Some(4242), ok.clone());
        r.restarts_in_window = t.daemon_restarts - 1;
        let s = Sample {
            runtimes: vec![r.clone()],
            ..Sample::default()
        };
        assert!(ids(&s).is_empty(), "below the threshold: {:?}", ids(&s));
        r.restarts_in_window = t.daemon_restarts + 1;
        let s = Sample {
            runtimes: vec![r],
            ..Sample::default()
        };
        let f = findings(&s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.id, DAEMON_RESTARTS);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.subject, daemon.as_str());
        assert_eq!(f.evidence["restarts"].as_f64(), Some(4.0));
        assert_eq!(f.evidence["window_minutes"].as_f64(), Some(30.0));
        assert_eq!(f.evidence["pid"].as_f64(), Some(4242.0));
        assert!(f.title.en.starts_with(daemon.as_str()), "{}", f.title.en);
        assert!(f
            .summary
            .en
            .contains("restarted 4 times in the last 30 minutes"));
        assert!(f
            .remediation
            .steps
            .iter()
            .any(|s| s.en.contains("OOM killer")));
        let sets = crate::rules::RuleBook::cluster(f);
        assert_eq!(sets.len(), 1, "{sets:?}");
        assert_eq!(sets[0].0.ctype(false), class);
        assert_eq!(sets[0].0.ctype(true), npd);
        assert_eq!(sets[0].1, npd);
    }
}

#[test]
fn kubelet_states() {
    let probed = |outcome: Outcome| Healthz::Probed {
        addr: "127.0.0.1:10248".into(),
        outcome,
        status: None,
    };
    let k = |pid: Option<u32>, healthz: Healthz, restarts: u32| Sample {
        kubelet: Some(KubeletSample {
            pid,
            healthz,
            restarts_in_window: restarts,
            started_seconds_ago: Some(60),
        }),
        ..Sample::default()
    };
    let ok = Outcome::Answered {
        latency: Duration::from_millis(1),
    };
    assert!(ids(&k(Some(1), probed(ok.clone()), 0)).is_empty());
    // Answering without a process we can see (a kubelet in another pid namespace): fine.
    assert!(ids(&k(None, probed(ok.clone()), 0)).is_empty());
    assert_eq!(
        ids(&k(None, probed(Outcome::Refused), 0)),
        vec![(KUBELET_NOT_RUNNING.to_string(), Severity::Critical)]
    );
    assert_eq!(
        ids(&k(None, Healthz::Disabled, 0)),
        vec![(KUBELET_NOT_RUNNING.to_string(), Severity::Critical)]
    );
    // Not from this network namespace and no process seen: nothing is claimed.
    assert!(ids(&k(None, Healthz::NotFromHere, 0)).is_empty());
    assert!(ids(&k(Some(3), Healthz::NotFromHere, 0)).is_empty());
    assert_eq!(
        ids(&k(Some(3), probed(Outcome::Refused), 0)),
        vec![(KUBELET_UNHEALTHY.to_string(), Severity::Warning)]
    );
    assert_eq!(
        ids(&k(
            Some(3),
            probed(Outcome::BadAnswer {
                latency: Duration::from_millis(4),
                detail: "HTTP 500: [-]syncloop failed".into()
            }),
            0
        )),
        vec![(KUBELET_UNHEALTHY.to_string(), Severity::Critical)]
    );
    assert_eq!(
        ids(&k(Some(3), probed(ok.clone()), 3)),
        vec![(KUBELET_RESTARTS.to_string(), Severity::Warning)]
    );
    assert!(ids(&k(Some(3), probed(ok), 2)).is_empty());
}

#[test]
fn cni_from_the_directory_or_the_runtime() {
    let c = |dir: CniDir, ready: Option<bool>| Sample {
        cni: Some(CniSample {
            conf_dir: "/etc/cni/net.d".into(),
            dir,
            network_ready: ready.map(|status| CriCondition {
                kind: "NetworkReady".into(),
                status,
                reason: "NetworkPluginNotReady".into(),
                message: "Network plugin returns error: cni plugin not initialized".into(),
            }),
        }),
        ..Sample::default()
    };
    let valid = CniDir::Valid {
        file: "/etc/cni/net.d/10-flannel.conflist".into(),
    };
    assert!(ids(&c(valid.clone(), Some(true))).is_empty());
    assert!(ids(&c(CniDir::NotUsed, None)).is_empty());
    for dir in [
        CniDir::Missing,
        CniDir::Empty,
        CniDir::Invalid {
            files: vec!["/etc/cni/net.d/10-x.conf".into()],
        },
    ] {
        assert_eq!(ids(&c(dir, None)).len(), 1);
    }
    let f = findings(&c(valid, Some(false)));
    assert_eq!(f.len(), 1);
    assert!(
        f[0].summary.en.contains("cni plugin not initialized"),
        "{}",
        f[0].summary.en
    );
}

#[test]
fn immutable_files_name_the_file_and_the_attribute() {
    let s = Sample {
        immutable: vec![ImmutableFile {
            path: "/data/docker/overlay2/b1ae/diff/usr/bin/bash".into(),
            immutable: true,
            append_only: false,
            is_dir: false,
            pod_uid: None,
            pod: None,
            container_id: Some("19d837c77a3c".into()),
            named_by: Some(("kubelet".into(), "/var/log/messages".into())),
        }],
        ..Sample::default()
    };
    let f = findings(&s);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].subject, "/data/docker/overlay2/b1ae/diff/usr/bin/bash");
    assert!(f[0]
        .remediation
        .commands
        .contains(&"chattr -i /data/docker/overlay2/b1ae/diff/usr/bin/bash".to_string()));
    assert!(!f[0]
        .remediation
        .commands
        .iter()
        .any(|c| c.contains("chattr -a")));
}

#[test]
fn port_conflicts_need_another_holder_or_two_claimants() {
    let pod = DeclaredPod {
        name: "kube-system/node-exporter-x".into(),
        uid: Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f".into()),
        source: "docker container 1a2b".into(),
    };
    let c = |holder: Option<PortHolder>, pods: Vec<DeclaredPod>| Sample {
        port_conflicts: vec![PortConflict {
            protocol: "tcp",
            port: 9100,
            pods,
            holder,
        }],
        ..Sample::default()
    };
    let holder = |pod: Option<&str>, uid: Option<&str>, in_pod: bool| PortHolder {
        pid: 10,
        comm: "node_exporter".into(),
        pod: pod.map(String::from),
        pod_uid: uid.map(String::from),
        in_pod,
    };
    // Its own pod, by uid or by name: fine.
    let own = holder(None, Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f"), true);
    assert!(ids(&c(Some(own), vec![pod.clone()])).is_empty());
    let own = holder(Some("kube-system/node-exporter-x"), None, true);
    assert!(ids(&c(Some(own), vec![pod.clone()])).is_empty());
    // Nobody holds it: not this finding.
    assert!(ids(&c(None, vec![pod.clone()])).is_empty());
    // A pod nobody can name, against a pod without a known uid: cannot tell.
    let unknown = holder(None, None, true);
    let static_pod = DeclaredPod {
        uid: None,
        ..pod.clone()
    };
    assert!(ids(&c(Some(unknown), vec![static_pod])).is_empty());
    // Another pod (its uid differs), or a host process.
    let other = holder(None, Some("0a1b2c3d-1d2a-4c3b-9e8f-5f0c6b4e0000"), true);
    let d = judge(&c(Some(other), vec![pod.clone()]), &Thresholds::default());
    assert!(d[0].is("held_by_other_pod"), "{d:?}");
    let host = holder(None, None, false);
    let d = judge(&c(Some(host), vec![pod.clone()]), &Thresholds::default());
    assert_eq!(d.len(), 1);
    assert!(d[0].is("held_by_host_process") && !d[0].is("held_by_other_pod"));
    let two = vec![
        pod.clone(),
        DeclaredPod {
            name: "monitoring/exporter-y".into(),
            uid: None,
            source: "/etc/kubernetes/manifests/e.yaml".into(),
        },
    ];
    let d = judge(&c(None, two), &Thresholds::default());
    assert!(d[0].is("several_pods"));
}

#[test]
fn kube_proxy_needs_ipvs_high_cpu_and_a_short_period() {
    let k = |mode: &str, cpu: f64, sync: u64| Sample {
        kube_proxy: Some(KubeProxySample {
            pid: 5,
            mode: Some(mode.into()),
            sync_period: Some(Duration::from_secs(sync)),
            min_sync_period: Some(Duration::from_secs(1)),
            origin: "flags".into(),
            cpu_cores: Some(cpu),
        }),
        ..Sample::default()
    };
    assert_eq!(
        ids(&k("ipvs", 0.9, 5)),
        vec![(KUBE_PROXY_IPVS_SYNC.to_string(), Severity::Warning)]
    );
    assert!(ids(&k("iptables", 0.9, 5)).is_empty());
    assert!(ids(&k("ipvs", 0.1, 5)).is_empty());
    assert!(ids(&k("ipvs", 0.9, 30)).is_empty());
}

#[test]
fn a_stopped_dockerd_known_by_its_shims_or_unit_is_a_warning_naming_docker() {
    // Clean SIGTERM with live-restore: socket and pid file gone, two containers run on.
    let mut d = rt(Daemon::Dockerd, None, Outcome::NoSocket);
    d.why = vec![Why::MobyShims, Why::SystemdUnit];
    d.moby_shims = 2;
    let s = Sample {
        runtimes: vec![d.clone()],
        ..Sample::default()
    };
    let f = findings(&s);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(
        (f.id.as_str(), f.severity),
        (NOT_RUNNING, Severity::Warning)
    );
    assert_eq!(f.subject, "/var/run/docker.sock");
    assert_eq!(f.evidence["daemon"], crate::Evidence::from("dockerd"));
    assert_eq!(f.evidence["moby_shims"], crate::Evidence::from(2u32));
    assert_eq!(
        f.evidence["expected_because"],
        crate::Evidence::from("moby_shims, systemd_unit")
    );
    assert!(f.title.en.contains("dockerd"), "{}", f.title.en);
    assert!(
        f.summary.en.contains("2 of its containers still run"),
        "{}",
        f.summary.en
    );
    let steps: Vec<&str> = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps.iter().any(|s| s.contains("live-restore")),
        "{steps:?}"
    );
    assert!(
        f.remediation
            .commands
            .iter()
            .any(|c| c == "systemctl start docker"),
        "{:?}",
        f.remediation.commands
    );
    assert_eq!(
        f.remediation.source.as_ref().map(|s| s.section),
        Some("Pod 异常排查概述")
    );
    // Without live-restore its containers died with it: still a warning, and the summary
    // says none runs.
    d.moby_shims = 0;
    d.why = vec![Why::SystemdUnit];
    let s = Sample {
        runtimes: vec![d.clone()],
        ..Sample::default()
    };
    let f = &findings(&s)[0];
    assert_eq!(
        (f.id.as_str(), f.severity),
        (NOT_RUNNING, Severity::Warning)
    );
    assert!(!f.evidence.contains_key("moby_shims"));
    assert!(f.summary.en.contains("enabled"), "{}", f.summary.en);
    // The kubelet depends on it too: critical, as before.
    d.why = vec![Why::Kubelet, Why::MobyShims];
    d.moby_shims = 1;
    let s = Sample {
        runtimes: vec![d],
        ..Sample::default()
    };
    assert_eq!(ids(&s), vec![(NOT_RUNNING.to_string(), Severity::Critical)]);
}
