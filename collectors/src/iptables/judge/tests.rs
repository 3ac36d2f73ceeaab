use super::*;
use crate::finding::Finding;
use crate::iptables::backend::BinaryBackend;
use crate::iptables::sample::LogCount;
use crate::iptables::tracker::{WaiterObs, Window};

fn render(d: Vec<Draft>) -> Vec<Finding> {
    let rules = crate::rules::RuleBook::builtin();
    d.into_iter().map(|d| rules.render(d, "node-1")).collect()
}

fn th() -> Thresholds {
    Thresholds::default()
}

fn kube_router() -> ProcInfo {
    ProcInfo {
        pid: Some(4100),
        comm: Some("kube-router".into()),
        cmdline: Some("/usr/local/bin/kube-router --run-firewall=true".into()),
        pod_uid: Some("5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60".into()),
        container_id: Some(
            "0b3f5c2e9d1a7c4b8e6f2a1d3c5b7e9f0a2c4e6b8d1f3a5c7e9b2d4f6a8c0e1d".into(),
        ),
        host_cgroup: None,
        pod_namespace: Some("kube-system".into()),
        pod_name: Some("kube-router-7xk2q".into()),
        container_name: Some("kube-router".into()),
    }
}

fn lock() -> LockId {
    LockId {
        major: 8,
        minor: 1,
        inode: 1835041,
    }
}

fn hold(holder: ProcInfo, secs: u64, ongoing: bool) -> HoldObs {
    HoldObs {
        holder,
        class: "FLOCK".into(),
        access: "WRITE".into(),
        held_for: Duration::from_secs(secs),
        ongoing,
    }
}

fn waiter(pid: u32, comm: &str) -> WaiterObs {
    WaiterObs {
        waiter: ProcInfo {
            pid: Some(pid),
            comm: Some(comm.into()),
            ..ProcInfo::default()
        },
        waited_for: Duration::from_millis(500),
    }
}

fn sample(window: Window) -> Sample {
    Sample {
        lock_path: "/run/xtables.lock".into(),
        window,
        sample_period: Duration::from_millis(250),
        log_window: Duration::from_secs(1800),
        ..Sample::default()
    }
}

#[test]
fn a_long_hold_names_the_holder_its_pod_and_the_waiters() {
    let w = Window {
        lock: Some(lock()),
        current_holds: vec![hold(kube_router(), 6, true)],
        current_waiters: vec![waiter(4242, "iptables-restor"), waiter(4243, "iptables")],
        max_waiters: 2,
        ..Window::default()
    };
    let f = render(judge(&sample(w), &th()));
    assert_eq!(f.len(), 1, "{f:?}");
    let f = &f[0];
    assert_eq!(
        (f.id.as_str(), f.severity),
        (LOCK_CONTENTION, Severity::Critical)
    );
    assert_eq!(f.subject, "pid 4100");
    assert_eq!(
        f.summary.en,
        "kube-router[4100] (pod kube-system/kube-router-7xk2q, pod UID 5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60) held /run/xtables.lock for 6.0 s and still holds it, with up to 2 process(es) waiting; above the critical threshold of 5 s (kube-proxy waits 5 s for this lock)."
    );
    assert_eq!(
        f.summary.zh,
        "kube-router[4100]（Pod kube-system/kube-router-7xk2q，Pod UID 5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60）持有 /run/xtables.lock 达 6.0 秒且仍未释放，最多 2 个进程排队等待；超过 5 秒的严重阈值（kube-proxy 等锁只等 5 秒）。"
    );
    assert_eq!(
        f.remediation.commands,
        [
            "grep ' 08:01:1835041 ' /proc/locks",
            "ps -o pid,etimes,args -p 4100",
            "cat /proc/4100/cgroup",
            "kubectl -n kube-system describe pod kube-router-7xk2q",
            "kubectl get pods -A --field-selector spec.nodeName=node-1 -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep 5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60",
            "crictl inspect 0b3f5c2e9d1a7",
            "ps -o pid,etimes,args -p 4242,4243",
        ]
    );
    assert_eq!(
        f.evidence["waiters"].as_str(),
        Some("iptables-restor[4242], iptables[4243]")
    );
}

#[test]
fn a_holder_without_a_pid_is_named_as_such_in_both_languages() {
    let w = Window {
        finished_holds: vec![hold(ProcInfo::default(), 3, false)],
        ..Window::default()
    };
    let f = render(judge(&sample(w), &th()));
    let f = &f[0];
    assert_eq!(
        (f.severity, f.subject.as_str()),
        (Severity::Warning, "pid unknown")
    );
    assert!(
        f.summary.en.starts_with(
            "a process in another pid namespace or an OFD lock (placement unknown) held /run/xtables.lock for 3.0 s before releasing it, with up to 0 process(es) waiting; above the warning threshold of 2 s"
        ),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary
            .zh
            .starts_with("另一个 pid 命名空间中的进程或 OFD 锁（所属位置未知）持有"),
        "{}",
        f.summary.zh
    );
    assert!(f.remediation.steps[0]
        .en
        .starts_with("Find out what a process in another pid namespace"));
    // Nothing to identify, no lock id (the file is gone), no waiter.
    assert!(
        f.remediation.commands.is_empty(),
        "{:?}",
        f.remediation.commands
    );
}

#[test]
fn queued_waiters_count_their_samples_as_evidence() {
    let w = Window {
        lock: Some(lock()),
        finished_holds: vec![hold(kube_router(), 1, false)],
        current_waiters: vec![waiter(11, "kube-proxy")],
        max_waiters: 1,
        max_waiter_streak: 6,
        ..Window::default()
    };
    let d = judge(&sample(w), &th());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, LOCK_WAITERS);
    assert_eq!(d[0].evidence["waiter_streak_samples"].as_f64(), Some(6.0));
    let f = &render(d)[0];
    assert_eq!(
        f.summary.en,
        "Up to 1 process(es) (kube-proxy[11]) were blocked on /run/xtables.lock for about 1.50 s (6 consecutive samples, threshold 2), although no single hold reached 2 s."
    );
    assert_eq!(
        f.remediation.commands,
        [
            "grep ' 08:01:1835041 ' /proc/locks",
            "ps -o pid,etimes,args -p 11"
        ]
    );
    // The lock id is in the command only: no new evidence beyond the sample count.
    assert!(!f.evidence.contains_key("lock_proc_locks_id"));
}

#[test]
fn each_kube_proxy_message_has_its_rule_subject_and_severity() {
    let log = |kind: LogKind| LogCount {
        kind,
        recent: 2,
        total: 5,
        last_time: "2026-03-02T10:15:04Z".into(),
        last_message: "m".into(),
        last_file: "/var/log/pods/kube-system_kube-proxy-x_u/kube-proxy/0.log".into(),
    };
    let mut s = sample(Window::default());
    s.logs = LogKind::ALL.iter().map(|k| log(*k)).collect();
    s.logs.push(LogCount {
        recent: 0,
        ..log(LogKind::LockNoWait)
    });
    let f = render(judge(&s, &th()));
    let got: Vec<(&str, &str, Severity, &str)> = f
        .iter()
        .map(|f| {
            (
                f.id.as_str(),
                f.subject.as_str(),
                f.severity,
                f.remediation.source.as_ref().unwrap().section,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                KUBE_PROXY_LOCK_ERROR,
                "lock_no_wait",
                Severity::Warning,
                "iptables-restore 版本低导致不支持阻塞写入"
            ),
            (
                KUBE_PROXY_LOCK_ERROR,
                "lock_timeout",
                Severity::Critical,
                "其它组件持有 iptables 锁时间过长"
            ),
            (
                KUBE_PROXY_RESTORE_FAILED,
                "",
                Severity::Critical,
                "其它组件未挂载 iptables 锁导致并发写入失败"
            ),
            (
                BACKEND_MISMATCH,
                "",
                Severity::Critical,
                "kube-proxy 未能正确适配节点 iptables 后端"
            ),
            (
                KUBE_PROXY_APISERVER_STREAM_ERROR,
                "",
                Severity::Warning,
                "kube-proxy 到 kube-apiserver 连接异常"
            ),
            (
                KUBE_PROXY_PANIC,
                "nil_pointer",
                Severity::Warning,
                "kube-proxy 首次启动发生 panic，重启后正常"
            ),
            (
                KUBE_PROXY_PANIC,
                "slice_bounds",
                Severity::Critical,
                "kube-proxy 不间断 panic"
            ),
        ]
    );
    assert_eq!(f[0].see_also, ["xtables-lock"]);
    assert_eq!(f[1].see_also, ["xtables-lock-held"]);
    assert_eq!(
        f[1].title.en,
        "kube-proxy waited 5 s for the xtables lock and gave up"
    );
    assert!(f[1].summary.en.starts_with(
        "kube-proxy logged this 2 time(s) in the last 30 min (last at 2026-03-02T10:15:04Z): another component"
    ));
    assert_eq!(
        f[2].remediation.commands[0],
        "grep -cE 'iptables-restore: line [0-9]+ failed' /var/log/pods/kube-system_kube-proxy-x_u/kube-proxy/0.log"
    );
    assert_eq!(f[5].see_also, ["kube-proxy-panic-nil-pointer"]);
    assert_eq!(f[6].see_also, ["kube-proxy-panic-slice-bounds"]);
    // The backend mismatch carries the backend facts.
    assert_eq!(
        f[3].evidence["host_iptables_backend"].as_str(),
        Some("unknown")
    );
}

#[test]
fn backend_info_and_mixed_tables() {
    let nft = BackendFacts {
        legacy_tables: Some(vec!["nat".into(), "filter".into()]),
        binary: Some(BinaryBackend {
            path: "/usr/sbin/iptables".into(),
            chain: vec!["/usr/sbin/iptables-nft".into()],
            backend: Backend::Nft,
        }),
    };
    let mut s = sample(Window::default());
    s.backend = nft.clone();
    let f = render(judge(&s, &th()));
    assert_eq!(f.len(), 2);
    assert_eq!(
        f[0].summary.zh,
        "宿主机的 iptables 命令使用 nft 后端；内核中有加载 legacy 表。"
    );
    assert!(f[1]
        .summary
        .en
        .contains("yet legacy tables (nat,filter) are loaded"));

    s.backend = BackendFacts {
        legacy_tables: Some(Vec::new()),
        binary: None,
    };
    let f = render(judge(&s, &th()));
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].summary.en,
        "The host's iptables backend could not be determined (no recognised iptables binary under the host root); legacy tables are not in use."
    );
    assert_eq!(
        f[0].evidence["legacy_tables"].as_str(),
        Some("none (ip_tables loaded, no table in use)")
    );
    s.backend = BackendFacts::default();
    assert!(judge(&s, &th()).is_empty());
}

/// Text the rule file writes out more than once (its header lists them) renders alike in
/// every copy.
#[test]
fn copies_in_the_rule_file_render_alike() {
    let mut s = sample(Window {
        lock: Some(lock()),
        current_holds: vec![hold(kube_router(), 6, true)],
        ..Window::default()
    });
    s.mount_gaps = vec![MountGap {
        proc: kube_router(),
        mnt_ns: 4026532201,
        host_lock: Some(lock()),
        pod_lock: None,
    }];
    s.logs = LogKind::ALL
        .iter()
        .map(|k| LogCount {
            kind: *k,
            recent: 1,
            total: 1,
            last_time: "t".into(),
            last_message: "m".into(),
            last_file: "/f".into(),
        })
        .collect();
    s.backend = BackendFacts {
        legacy_tables: Some(vec!["nat".into()]),
        binary: Some(BinaryBackend {
            path: "/usr/sbin/iptables".into(),
            chain: vec!["/usr/sbin/iptables-nft".into()],
            backend: Backend::Nft,
        }),
    };
    let f = render(judge(&s, &th()));
    let by = |id: &str| f.iter().find(|f| f.id == id).unwrap();
    // How a process is named, and the commands that identify it.
    let contention = by(LOCK_CONTENTION);
    let not_mounted = by(LOCK_NOT_MOUNTED);
    for (a, b) in [
        (&contention.summary.en, &not_mounted.summary.en),
        (&contention.summary.zh, &not_mounted.summary.zh),
    ] {
        let who = |t: &str| t[..t.find([')', '）']).unwrap()].to_string();
        assert_eq!(who(a), who(b));
    }
    assert_eq!(
        contention.remediation.commands[1..6],
        not_mounted.remediation.commands[1..6]
    );
    // The lock mount (the configured path is the default here).
    assert_eq!(
        not_mounted.remediation.steps[0],
        by(KUBE_PROXY_RESTORE_FAILED).remediation.steps[1]
    );
    // The upgrade table.
    assert_eq!(
        by(BACKEND_MIXED).remediation.steps[0],
        by(BACKEND_MISMATCH).remediation.steps[0]
    );
    // kube-proxy's image: one per kind of message and backend_mixed.
    let image: Vec<&String> = f
        .iter()
        .flat_map(|f| &f.remediation.commands)
        .filter(|c| c.contains("get ds kube-proxy"))
        .collect();
    assert_eq!(image.len(), LogKind::ALL.len() + 1, "{image:?}");
    assert!(image.iter().all(|c| *c
        == "kubectl -n kube-system get ds kube-proxy -o jsonpath='{.spec.template.spec.containers[0].image}'"));
}
