use super::*;
use crate::finding::Finding;
use crate::kernel::sample::RoleFs;

/// A draft in the built-in words.
fn render(d: Draft) -> Finding {
    crate::rules::RuleBook::builtin().render(d, "node-1")
}

fn sample() -> KernelSample {
    KernelSample {
        window_seconds: 3600,
        ..KernelSample::default()
    }
}

#[test]
fn listen_delta_total_does_not_double_count_overflows() {
    let l = ListenDelta {
        listen_drops: 10,
        listen_overflows: 10,
        backlog_drop: 2,
        interval_seconds: 1.0,
        somaxconn: Some(128),
        tcp_max_syn_backlog: Some(128),
    };
    assert_eq!(l.total(), 12);
    let f = render(listen_drops(&l, &Thresholds::default()).unwrap());
    assert_eq!(f.severity, Severity::Critical);
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "sysctl -w net.ipv4.tcp_max_syn_backlog=256 net.core.somaxconn=256"));
    let quiet = ListenDelta {
        listen_drops: 0,
        listen_overflows: 0,
        backlog_drop: 0,
        ..l
    };
    assert!(listen_drops(&quiet, &Thresholds::default()).is_none());
    // Sysctls not known to be the host's (node-doctor in its own network namespace): the
    // drops are still reported, but no sysctl value and no `sysctl -w` from a guess.
    let unknown = ListenDelta {
        somaxconn: None,
        tcp_max_syn_backlog: None,
        ..l
    };
    let f = render(listen_drops(&unknown, &Thresholds::default()).unwrap());
    assert!(!f.evidence.contains_key("somaxconn"));
    assert!(!f.evidence.contains_key("tcp_max_syn_backlog"));
    assert!(
        f.remediation
            .commands
            .iter()
            .all(|c| !c.contains("sysctl -w")),
        "{:?}",
        f.remediation.commands
    );
    assert!(f.summary.en.contains("somaxconn=?"), "{}", f.summary.en);
}

#[test]
fn pid_thresholds() {
    let t = Thresholds::default();
    let p = |tasks| PidUsage {
        tasks,
        pid_max: Some(32768),
        threads_max: Some(100000),
    };
    assert!(pid_exhaustion(&p(26000), &t).is_none());
    let f = pid_exhaustion(&p(26300), &t).unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence["limit_name"].as_str(), Some("kernel.pid_max"));
    assert_eq!(
        pid_exhaustion(&p(31500), &t).unwrap().severity,
        Severity::Critical
    );
    // threads-max the tighter limit.
    let q = PidUsage {
        tasks: 9000,
        pid_max: Some(4194304),
        threads_max: Some(10000),
    };
    let f = pid_exhaustion(&q, &t).unwrap();
    assert_eq!(
        f.evidence["limit_name"].as_str(),
        Some("kernel.threads-max")
    );
    assert_eq!(f.evidence["used_percent"].as_f64(), Some(90.0));
}

#[test]
fn hung_task_paths() {
    let t = Thresholds::default();
    let h = HungGroup {
        comm: "dockerd".into(),
        last_pid: 1234,
        reports: 2,
        max_blocked_seconds: 120,
        last_seen_seconds_ago: Some(60),
        blocked_now: Some(true),
        blocked_now_pid: Some(1234),
    };
    let mut s = sample();
    s.procs_blocked = Some(0);
    let f = render(hung_task(&h, &s, &t));
    assert_eq!(f.severity, Severity::Critical);
    // The task itself is in D state: the IO path even when procs_blocked (IO wait) is 0.
    assert_eq!(f.evidence["path"].as_str(), Some("io"));
    let passed = HungGroup {
        blocked_now: Some(false),
        blocked_now_pid: None,
        ..h.clone()
    };
    assert_eq!(
        hung_task(&passed, &s, &t).evidence["path"].as_str(),
        Some("none")
    );
    s.procs_blocked = Some(5);
    assert_eq!(hung_task(&h, &s, &t).evidence["path"].as_str(), Some("io"));
    assert!(hung_task(&h, &s, &t).is("path_io"));
    s.role_fs.push(RoleFs {
        role: "docker_data",
        host_path: "/var/lib/docker".into(),
        used_percent: 97.5,
        avail_bytes: 1 << 20,
    });
    let f = render(hung_task(&h, &s, &t));
    assert_eq!(f.evidence["path"].as_str(), Some("disk_full"));
    assert!(f.summary.en.contains("/var/lib/docker"));
    assert_eq!(
        f.remediation.source.as_ref().map(|s| s.section),
        Some("节点磁盘爆满排障处理")
    );
    let other = HungGroup {
        comm: "jbd2/vdb-8".into(),
        ..h
    };
    assert_eq!(hung_task(&other, &s, &t).severity, Severity::Warning);
}

fn oom_group(kind: OomKind) -> OomGroup {
    OomGroup {
        kind,
        names: PodNames::default(),
        pod_uid: None,
        qos: None,
        container_id: None,
        task_memcg: None,
        oom_memcg: None,
        kills: 1,
        last_pid: 5,
        last_comm: "agent".into(),
        processes_killed: 1,
        unreported_kills: 0,
        report_missing: false,
        pod_present: None,
        last_seen_seconds_ago: None,
        limit_bytes: None,
        usage_bytes: None,
    }
}

/// A cgroup OOM outside pods names the cgroup (or says the log did not), and an event
/// without a clock reads "recently".
#[test]
fn oom_outside_pods_names_the_cgroup() {
    let t = Thresholds::default();
    let mut g = oom_group(OomKind::Cgroup);
    let f = render(oom_cgroup(&g, 3600, &t));
    assert_eq!(
        f.summary.en,
        "The memory cgroup OOM killer killed agent (pid 5) of cgroup (not logged) 1 time(s) in the last 3600 s, last recently: its pod shows OOMKilled / exit code 137 (3 kills make this critical). Recent, not a crash loop: fewer than 3 kills."
    );
    assert_eq!(
        f.summary.zh,
        "最近 3600 秒内 cgroup （日志未给出） 的进程 agent（pid 5）因达到内存上限被 cgroup OOM 杀死 1 次，最后一次：最近。Pod 会显示 OOMKilled / 退出码 137（达到 3 次为严重）。最近发生，但未形成崩溃循环：少于 3 次。"
    );
    // No pod: no kubectl command.
    assert_eq!(
        f.remediation.commands,
        ["journalctl -k | grep -E 'Memory cgroup out of memory|oom-kill:'"]
    );
    g.task_memcg = Some("/system.slice/agent.service".into());
    g.last_seen_seconds_ago = Some(30);
    let f = render(oom_cgroup(&g, 3600, &t));
    assert!(
        f.summary.en.contains(
            "of cgroup /system.slice/agent.service 1 time(s) in the last 3600 s, last 30 s ago:"
        ),
        "{}",
        f.summary.en
    );
    assert_eq!(f.subject, "/system.slice/agent.service");
}

#[test]
fn a_tiny_limit_outside_pods_names_the_cgroup() {
    let p = TinyPod {
        subject: "/kubepods/burstable/x".into(),
        names: PodNames::default(),
        pod_uid: None,
        groups: vec![(
            "/kubepods/burstable/x".into(),
            None,
            1,
            "/sys/fs/cgroup/memory/kubepods/burstable/x/memory.limit_in_bytes".into(),
        )],
    };
    let f = render(tiny_limit(&p, &Thresholds::default()));
    assert!(
        f.summary.en.starts_with(
            "Cgroup /kubepods/burstable/x has a memory limit of 1 bytes (/kubepods/burstable/x=1B; below the 4 MiB threshold): "
        ),
        "{}",
        f.summary.en
    );
    assert!(f
        .summary
        .zh
        .starts_with("cgroup /kubepods/burstable/x 的内存上限只有 1 字节（/kubepods/burstable/x=1B；低于阈值 4 MiB）："));
    assert_eq!(
        f.remediation.commands,
        ["cat /sys/fs/cgroup/memory/kubepods/burstable/x/memory.limit_in_bytes"]
    );
}

/// Each kernel-log rule's decay: the full severity while what the log said is still true
/// now, less while it is recent, information when it is history.
#[test]
fn kernel_log_findings_decay_when_no_longer_true() {
    let t = Thresholds::default();
    // kernel.oom_system: one kill, memory fine now.
    let mut s = sample();
    s.node_memory.mem_total_bytes = Some(16 << 30);
    s.node_memory.mem_available_bytes = Some(8 << 30);
    let mut g = oom_group(OomKind::System);
    g.last_seen_seconds_ago = Some(60);
    s.oom = vec![g.clone()];
    let sev = |s: &KernelSample| oom_system(s, &t).unwrap().severity;
    assert_eq!(sev(&s), Severity::Warning);
    s.oom[0].kills = 2;
    assert_eq!(sev(&s), Severity::Critical, "repeating");
    s.oom[0].last_seen_seconds_ago = Some(3000);
    let f = render(oom_system(&s, &t).unwrap());
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary.en.ends_with("; MemAvailable is 50.0% now. None in the last 15 min: history, kept until it leaves the window."),
        "{}",
        f.summary.en
    );
    s.node_memory.mem_available_bytes = Some(400 << 20);
    assert_eq!(sev(&s), Severity::Critical, "short of memory now");

    // kernel.oom_cgroup: a crash loop, a single kill, history, a pod gone.
    let mut g = oom_group(OomKind::Cgroup);
    g.kills = 3;
    g.last_seen_seconds_ago = Some(120);
    assert_eq!(oom_cgroup(&g, 3600, &t).severity, Severity::Critical);
    g.last_seen_seconds_ago = Some(1800);
    assert_eq!(oom_cgroup(&g, 3600, &t).severity, Severity::Info);
    g.kills = 1;
    g.last_seen_seconds_ago = Some(120);
    assert_eq!(oom_cgroup(&g, 3600, &t).severity, Severity::Warning);
    g.kills = 5;
    g.pod_present = Some(false);
    let f = render(oom_cgroup(&g, 3600, &t));
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary
            .en
            .contains("The pod is no longer on this node: history."),
        "{}",
        f.summary.en
    );

    // kernel.hung_task: still in D state an hour later, recovered recently, recovered long ago.
    let h = HungGroup {
        comm: "containerd".into(),
        last_pid: 900,
        reports: 1,
        max_blocked_seconds: 120,
        last_seen_seconds_ago: Some(3500),
        blocked_now: Some(true),
        blocked_now_pid: Some(900),
    };
    let s = sample();
    let f = render(hung_task(&h, &s, &t));
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        f.summary
            .en
            .contains("Still true now: pid 900 of that name is in uninterruptible sleep (D)."),
        "{}",
        f.summary.en
    );
    let gone = HungGroup {
        blocked_now: Some(false),
        blocked_now_pid: None,
        last_seen_seconds_ago: Some(300),
        ..h.clone()
    };
    assert_eq!(hung_task(&gone, &s, &t).severity, Severity::Warning);
    let old = HungGroup {
        last_seen_seconds_ago: Some(3500),
        ..gone
    };
    assert_eq!(hung_task(&old, &s, &t).severity, Severity::Info);

    // kernel.fs_error on the runtime's disk.
    let e = FsErrorGroup {
        device: "vdb".into(),
        kinds: vec![FsErrorKind::Ext4Error, FsErrorKind::ReadOnly],
        errors: 2,
        last_seen_seconds_ago: Some(3500),
        mount_point: Some("/var/lib/docker".into()),
        fstype: Some("ext4".into()),
        read_only_now: Some(true),
        shut_down_now: None,
        errors_count_now: Some(2),
        roles: vec![("docker_data", "/var/lib/docker".into())],
    };
    assert_eq!(fs_error(&e, 3600, &t).severity, Severity::Critical);
    let remounted = FsErrorGroup {
        read_only_now: Some(false),
        ..e.clone()
    };
    let f = render(fs_error(&remounted, 3600, &t));
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary.en.contains("it accepts writes again now"),
        "{}",
        f.summary.en
    );
    // An ext4 error that never took the filesystem read-only, repaired or not.
    let error_only = FsErrorGroup {
        kinds: vec![FsErrorKind::Ext4Error],
        read_only_now: Some(false),
        ..e.clone()
    };
    assert_eq!(fs_error(&error_only, 3600, &t).severity, Severity::Warning);
    let repaired = FsErrorGroup {
        errors_count_now: Some(0),
        ..error_only.clone()
    };
    assert_eq!(fs_error(&repaired, 3600, &t).severity, Severity::Info);
    let fresh = FsErrorGroup {
        last_seen_seconds_ago: Some(60),
        ..repaired
    };
    assert_eq!(fs_error(&fresh, 3600, &t).severity, Severity::Critical);
    // A shut-down XFS keeps its severity while every access fails.
    let xfs = FsErrorGroup {
        kinds: vec![FsErrorKind::XfsShutdown],
        fstype: Some("xfs".into()),
        read_only_now: Some(false),
        shut_down_now: Some(true),
        errors_count_now: None,
        ..e
    };
    assert_eq!(fs_error(&xfs, 3600, &t).severity, Severity::Critical);
}

mod daemon_advice_tests {
    use super::*;

    #[test]
    fn runtime_advice_says_which_daemons_do_not_run() {
        let hung = || Draft::new("kernel.hung_task", Severity::Critical).when("runtime");
        let other = || Draft::new("kernel.hung_task", Severity::Warning);
        let stopped = Daemons {
            known: true,
            kubelet: false,
            dockerd: false,
            containerd: false,
        };
        let out = daemon_advice(vec![hung(), other()], &stopped);
        assert!(out[0].is("runtime_not_running") && out[0].is("kubelet_not_running"));
        assert!(!out[1].is("runtime_not_running"), "not a runtime task");
        let out = daemon_advice(vec![hung()], &Daemons::all_running());
        assert!(!out[0].is("runtime_not_running") && !out[0].is("kubelet_not_running"));
        // containerd alone is a runtime.
        let containerd = Daemons {
            containerd: true,
            ..stopped
        };
        assert!(!daemon_advice(vec![hung()], &containerd)[0].is("runtime_not_running"));
        // Unknown: nothing said.
        let out = daemon_advice(vec![hung()], &Daemons::default());
        assert!(!out[0].is("runtime_not_running") && !out[0].is("kubelet_not_running"));
        let fs = Draft::new("kernel.fs_error", Severity::Critical).when("runtime_disk");
        assert!(daemon_advice(vec![fs], &stopped)[0].is("kubelet_not_running"));
    }
}

#[test]
fn kernel_failures_decay_and_unregister_netdevice_is_frequent_at_three() {
    use crate::kernel::crash::{OopsKind, StallKind};
    let t = Thresholds::default();
    let oops_at = |age| OopsGroup {
        comm: Some("java".into()),
        oopses: 1,
        kinds: vec![OopsKind::NullPointer],
        last_kind: OopsKind::NullPointer,
        last_pid: Some(1234),
        last_cpu: Some(3),
        process_context: true,
        panic: None,
        last_seen_seconds_ago: age,
    };
    // Unknown age (no /proc/uptime) counts as recent.
    for (age, want) in [
        (Some(60), Severity::Critical),
        (None, Severity::Critical),
        (Some(901), Severity::Warning),
    ] {
        let f = render(oops(&oops_at(age), 3600, &t));
        assert_eq!(f.severity, want, "{age:?}");
        assert_eq!(f.subject, "java");
    }
    let stall = |age| StallGroup {
        cpu: Some(3),
        kinds: vec![StallKind::SoftLockup, StallKind::RcuStall],
        reports: 2,
        max_stuck_seconds: Some(23),
        last_comm: Some("java".into()),
        last_pid: Some(1234),
        rcu_flavor: Some("rcu_sched".into()),
        last_seen_seconds_ago: Some(age),
    };
    let f = render(cpu_stall(&stall(60), 3600, &t));
    assert_eq!(
        (f.severity, f.subject.as_str()),
        (Severity::Critical, "cpu3")
    );
    // Both kinds: the lockup documentation, not RCU's alone.
    assert_eq!(
        f.remediation.source.as_ref().and_then(|s| s.url),
        Some("https://docs.kernel.org/admin-guide/lockup-watchdogs.html")
    );
    assert_eq!(
        render(cpu_stall(&stall(901), 3600, &t)).severity,
        Severity::Info
    );
    let n = NetdevGroup {
        device: "lo".into(),
        waits: 2,
        usage_count: Some(1),
        last_seen_seconds_ago: Some(30),
    };
    for (recent, want) in [(2, Severity::Warning), (3, Severity::Critical)] {
        let s = KernelSample {
            netdev: vec![n.clone()],
            netdev_waits_recent: recent,
            ..sample()
        };
        let d = unregister_netdevice(&n, &s, &t);
        assert_eq!(d.is("frequent"), recent >= 3);
        assert_eq!(render(d).severity, want, "{recent} waits");
    }
    // Frequent across devices, but this device's last wait is older than 20 min: not its.
    let old = NetdevGroup {
        last_seen_seconds_ago: Some(1300),
        ..n.clone()
    };
    let s = KernelSample {
        netdev_waits_recent: 5,
        ..sample()
    };
    assert_eq!(
        render(unregister_netdevice(&old, &s, &t)).severity,
        Severity::Info
    );
    let w = Ext4WarningGroup {
        device: "sda1".into(),
        warnings: 1,
        last_function: Some("ext4_dx_add_entry".into()),
        last_seen_seconds_ago: Some(10),
    };
    assert_eq!(
        render(ext4_warning(&w, 3600, &t)).severity,
        Severity::Warning
    );
}
