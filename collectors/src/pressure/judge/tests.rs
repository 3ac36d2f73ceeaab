use super::*;
use crate::pressure::sample::{DaemonThrottle, KubeletSwap, PodPsi, PodThrottle, Swap, SwapRate};
use crate::proc::cgroup::QosClass;
use crate::proc::pressure::Pressure;

fn line(avg10: f64, avg60: f64, avg300: f64) -> PsiLine {
    PsiLine {
        avg10,
        avg60,
        avg300,
        total_us: 1,
    }
}

fn pressure(some: PsiLine, full: PsiLine) -> Pressure {
    Pressure {
        some,
        full: Some(full),
    }
}

fn quiet() -> Psi {
    let z = line(0.0, 0.0, 0.0);
    Psi {
        memory: Some(pressure(z, z)),
        io: Some(pressure(z, z)),
        cpu: Some(pressure(z, z)),
    }
}

fn sample() -> PressureSample {
    PressureSample {
        node: Some(quiet()),
        kubepods: Some(quiet()),
        pods: Vec::new(),
        daemons: Vec::new(),
        pod_throttling: Vec::new(),
        swap: Some(Swap {
            total_bytes: 0,
            free_bytes: 0,
            areas: Vec::new(),
            rate: None,
        }),
        kubelet: None,
        page_size_bytes: 4096,
    }
}

fn pod(uid: &str, named: bool) -> PodIdentity {
    PodIdentity {
        uid: uid.into(),
        qos: QosClass::Burstable,
        namespace: named.then(|| "shop".to_string()),
        name: named.then(|| format!("p-{}", &uid[..4])),
    }
}

fn window(periods: u64, throttled: u64) -> ThrottleWindow {
    ThrottleWindow {
        periods,
        throttled,
        throttled_usec: throttled * 50_000,
        window_seconds: 30.0,
    }
}

const UID_A: &str = "aaaaaaaa-0000-1111-2222-333344445555";
const UID_B: &str = "bbbbbbbb-0000-1111-2222-333344445555";

#[test]
fn a_healthy_sample_raises_nothing() {
    assert!(judge(&sample(), &Thresholds::default()).is_empty());
}

#[test]
fn node_memory_full_by_its_60s_average_with_two_levels() {
    let t = Thresholds::default();
    let mut s = sample();
    // A 10 s burst alone does not raise: the minute's average decides.
    s.node.as_mut().unwrap().memory = Some(pressure(line(50.0, 9.0, 3.0), line(30.0, 9.9, 2.0)));
    assert!(judge(&s, &t).is_empty());
    s.node.as_mut().unwrap().memory = Some(pressure(line(50.0, 40.0, 15.0), line(30.0, 12.0, 5.0)));
    let d = judge(&s, &t);
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].id.as_str(), d[0].severity),
        ("pressure.node_stall", Severity::Warning)
    );
    assert_eq!(d[0].subject, "memory");
    assert!(d[0].is("memory") && !d[0].is("io"));
    assert_eq!(d[0].evidence["stall_percent"], 12.0.into());
    assert_eq!(d[0].evidence["kubepods_percent"], 0.0.into());
    s.node.as_mut().unwrap().memory = Some(pressure(line(50.0, 40.0, 15.0), line(30.0, 30.0, 5.0)));
    assert_eq!(judge(&s, &t)[0].severity, Severity::Critical);
    // Without a `full` line (or without the kubepods reading) nothing breaks.
    s.kubepods = None;
    assert!(!judge(&s, &t)[0].evidence.contains_key("kubepods_percent"));
}

#[test]
fn node_io_full_and_cpu_some_by_their_windows() {
    let t = Thresholds::default();
    let mut s = sample();
    s.node.as_mut().unwrap().io = Some(pressure(line(60.0, 55.0, 40.0), line(25.0, 21.0, 10.0)));
    // CPU some is judged over 300 s: 90 % for a minute is not enough.
    s.node.as_mut().unwrap().cpu = Some(pressure(line(95.0, 90.0, 49.0), line(0.0, 0.0, 0.0)));
    let d = judge(&s, &t);
    assert_eq!(d.len(), 1);
    assert!(d[0].is("io"));
    assert_eq!(d[0].evidence["line"], "full".into());
    s.node.as_mut().unwrap().cpu = Some(pressure(line(95.0, 90.0, 85.0), line(0.0, 0.0, 0.0)));
    let d = judge(&s, &t);
    let cpu = d.iter().find(|d| d.subject == "cpu").unwrap();
    assert_eq!(cpu.severity, Severity::Critical);
    assert_eq!(cpu.evidence["window"], "avg300".into());
    // PSI off: nothing to judge.
    s.node = None;
    assert!(judge(&s, &t).is_empty());
}

#[test]
fn pods_are_named_by_their_worst_resource_most_stalled_first_and_bounded() {
    let t = Thresholds {
        max_pods_named: 2,
        ..Thresholds::default()
    };
    let mut s = sample();
    let stalled = |uid: &str, io_full60: f64, mem_full60: f64| {
        let mut psi = quiet();
        psi.io = Some(pressure(
            line(90.0, 90.0, 50.0),
            line(io_full60, io_full60, 10.0),
        ));
        psi.memory = Some(pressure(
            line(20.0, 20.0, 5.0),
            line(mem_full60, mem_full60, 1.0),
        ));
        PodPsi {
            pod: pod(uid, uid == UID_A),
            cgroup_dir: format!("/sys/fs/cgroup/kubepods/burstable/pod{uid}"),
            psi,
        }
    };
    s.pods = vec![
        stalled(UID_B, 25.0, 0.0),
        stalled(UID_A, 60.0, 12.0),
        stalled("cccccccc-0000-1111-2222-333344445555", 21.0, 0.0),
        stalled("dddddddd-0000-1111-2222-333344445555", 5.0, 0.0),
    ];
    let d = judge(&s, &t);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].subject, "shop/p-aaaa");
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(
        d[0].is("io"),
        "60 % IO is further over its limit than 12 % memory"
    );
    assert_eq!(
        d[0].evidence["pressure_file"],
        format!("/sys/fs/cgroup/kubepods/burstable/pod{UID_A}/io.pressure").into()
    );
    assert_eq!(d[1].subject, UID_B);
    assert!(!d[1].evidence.contains_key("namespace"));
}

#[test]
fn throttling_needs_the_floor_and_the_share() {
    let t = Thresholds::default();
    let mut s = sample();
    s.daemons = vec![DaemonThrottle {
        daemon: "kubelet".into(),
        pid: 42,
        cgroup: "/system.slice/kubelet.service".into(),
        cgroup_dir: "/sys/fs/cgroup/cpu/system.slice/kubelet.service".into(),
        window: Some(window(99, 99)),
    }];
    assert!(judge(&s, &t).is_empty(), "below the periods floor");
    s.daemons[0].window = Some(window(300, 20));
    assert!(judge(&s, &t).is_empty(), "6.7 % is below 10 %");
    s.daemons[0].window = Some(window(300, 60));
    let d = judge(&s, &t);
    assert_eq!(
        (d[0].id.as_str(), d[0].severity),
        ("pressure.daemon_throttled", Severity::Warning)
    );
    assert!(d[0].is("kubelet"));
    assert_eq!(d[0].evidence["throttled_percent"], 20.0.into());
    assert_eq!(d[0].evidence["throttled_seconds"], 3.0.into());
    s.daemons[0].window = Some(window(300, 200));
    assert_eq!(judge(&s, &t)[0].severity, Severity::Critical);
    s.daemons[0].window = None;
    assert!(judge(&s, &t).is_empty(), "no window on the first run");
}

#[test]
fn a_pod_is_named_once_by_its_most_throttled_cgroup() {
    let t = Thresholds::default();
    let mut s = sample();
    let cg = |uid: &str, c: Option<&str>, w: ThrottleWindow| PodThrottle {
        pod: pod(uid, true),
        cgroup_dir: format!(
            "/sys/fs/cgroup/cpu/kubepods/pod{uid}{}",
            c.map_or(String::new(), |c| format!("/{c}"))
        ),
        container_id: c.map(str::to_string),
        window: w,
    };
    s.pod_throttling = vec![
        cg(UID_A, None, window(300, 90)),
        cg(UID_A, Some("c1"), window(300, 240)),
        cg(UID_B, None, window(50, 50)),
    ];
    let d = judge(&s, &t);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].id, "pressure.pod_throttled");
    assert!(d[0].is("container"));
    assert_eq!(d[0].evidence["throttled_percent"], 80.0.into());
    assert_eq!(d[0].evidence["container_id"], "c1".into());
}

#[test]
fn swap_with_fail_swap_on_and_heavy_swap_in() {
    let t = Thresholds::default();
    let mut s = sample();
    s.swap = Some(Swap {
        total_bytes: 2 << 30,
        free_bytes: 1 << 30,
        areas: vec!["/swapfile".into()],
        rate: Some(SwapRate {
            pages_in: 900,
            pages_out: 0,
            window_seconds: 1.0,
        }),
    });
    let mut k = KubeletSwap {
        running: true,
        fail_swap_on: false,
        origin: SwapOrigin::ConfigFile,
        behavior: Some("LimitedSwap".into()),
        config_path: "/var/lib/kubelet/config.yaml".into(),
    };
    s.kubelet = Some(k.clone());
    assert!(
        judge(&s, &t).is_empty(),
        "swap allowed; 900 pages is below the floor"
    );
    k.fail_swap_on = true;
    s.kubelet = Some(k.clone());
    let d = judge(&s, &t);
    assert_eq!(
        (d[0].id.as_str(), d[0].severity),
        ("pressure.swap_fail_swap_on", Severity::Warning)
    );
    assert!(d[0].is("from_config") && d[0].is("kubelet_running"));
    assert_eq!(d[0].evidence["swap_used_bytes"], (1u64 << 30).into());
    k.running = false;
    s.kubelet = Some(k);
    assert_eq!(judge(&s, &t)[0].severity, Severity::Critical);
    s.kubelet = None;
    s.swap.as_mut().unwrap().rate = Some(SwapRate {
        pages_in: 30_000,
        pages_out: 6_000,
        window_seconds: 30.0,
    });
    let d = judge(&s, &t);
    assert_eq!(
        (d[0].id.as_str(), d[0].severity),
        ("pressure.swap_in", Severity::Warning)
    );
    assert_eq!(d[0].evidence["swap_in_pages_per_second"], 1000.0.into());
    assert_eq!(
        d[0].evidence["swap_in_bytes_per_second"],
        4_096_000.0.into()
    );
    s.swap.as_mut().unwrap().rate.as_mut().unwrap().pages_in = 90_000;
    assert_eq!(judge(&s, &t)[0].severity, Severity::Critical);
}
