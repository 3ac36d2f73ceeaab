use super::*;
use crate::finding::Finding;
use crate::load::observation::{Held, Pressures};
use crate::load::thresholds::Hold;
use crate::load::{CpuPercent, DiskRates};
use crate::proc::cgroup::QosClass;
use crate::proc::loadavg::Loadavg;
use crate::proc::pressure::{Pressure, PsiLine};

/// The drafts of the default thresholds, in the built-in words.
fn findings(obs: &Observation) -> Vec<Finding> {
    let rules = crate::rules::RuleBook::builtin();
    judge(obs, &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, "node-1"))
        .collect()
}

fn only<'a>(f: &'a [Finding], id: &str) -> Vec<&'a Finding> {
    f.iter().filter(|f| f.id == id).collect()
}

fn num(f: &Finding, k: &str) -> f64 {
    f.evidence[k].as_f64().unwrap_or_else(|| panic!("{k}"))
}

fn text(f: &Finding, k: &str) -> String {
    f.evidence[k].to_string()
}

fn quiet(cpus: u32) -> Observation {
    Observation {
        elapsed_seconds: 10.0,
        cpus,
        load: Loadavg {
            load1: 0.5,
            load5: 0.5,
            load15: 0.5,
            running: 1,
            total: 200,
        },
        previous_load1: Some(0.5),
        procs_running: 1,
        procs_blocked: 0,
        previous_procs_blocked: Some(0),
        cpu: CpuPercent {
            idle: 100.0,
            ..CpuPercent::default()
        },
        previous_iowait_percent: Some(0.0),
        per_cpu: Vec::new(),
        disks: Vec::new(),
        pressure: Pressures::default(),
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

/// The window's totals as if the listed processes were all that ran.
fn fill_totals(obs: &mut Observation) {
    obs.total_io_wait_percent = obs.top_io.iter().map(|c| c.io_wait_percent).sum();
    obs.total_io_bytes_per_second = obs.top_io.iter().map(Culprit::io_bytes_per_second).sum();
    obs.total_cpu_percent = obs.top_cpu.iter().map(|c| c.cpu_percent).sum();
}

fn culprit(pid: u32, comm: &str, origin: Origin) -> Culprit {
    Culprit {
        pid,
        tid: None,
        comm: comm.into(),
        state: 'R',
        cpu_percent: 150.0,
        read_bytes_per_second: 0.0,
        write_bytes_per_second: 4.0 * 1024.0 * 1024.0,
        io_wait_percent: 0.0,
        wchan: None,
        origin,
    }
}

fn pod(ns: Option<&str>, name: Option<&str>, container: Option<&str>) -> Origin {
    Origin::Pod {
        uid: "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b".into(),
        qos: QosClass::Burstable,
        container_id: None,
        namespace: ns.map(str::to_string),
        name: name.map(str::to_string),
        container: container.map(str::to_string),
    }
}

fn host(cgroup: &str) -> Origin {
    Origin::Host {
        cgroup: cgroup.into(),
        infrastructure: false,
    }
}

#[test]
fn a_quiet_node_yields_nothing() {
    assert!(judge(&quiet(4), &Thresholds::default()).is_empty());
}

#[test]
fn high_load_names_its_cause_by_condition() {
    let mut obs = quiet(4);
    obs.load.load1 = 12.5;
    obs.previous_load1 = Some(12.1);
    obs.cpu = CpuPercent {
        user: 70.0,
        system: 20.0,
        idle: 10.0,
        ..CpuPercent::default()
    };
    let d = judge(&obs, &Thresholds::default());
    let high = d.iter().find(|d| d.id == HIGH_LOAD).expect("high load");
    assert_eq!(high.severity, Severity::Warning);
    assert!(high.is("cause_cpu") && !high.is("cause_io") && !high.is("cause_mixed"));
    let f = findings(&obs);
    let f = only(&f, HIGH_LOAD)[0];
    assert!(
        f.summary.en.ends_with(
            "is 3.0× the CPU count, at or above the 2× limit; runnable tasks compete for the CPUs."
        ),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.zh.contains("可运行任务在争抢 CPU"),
        "{}",
        f.summary.zh
    );

    // iowait at the warning level: the cause is IO.
    obs.cpu.iowait = 15.0;
    obs.cpu.user = 55.0;
    let d = judge(&obs, &Thresholds::default());
    assert!(d.iter().any(|d| d.id == HIGH_LOAD && d.is("cause_io")));
}

#[test]
fn io_bound_lists_the_top_three_and_names_the_owner_of_the_heaviest_only() {
    let mut obs = quiet(4);
    obs.disks = vec![DiskRates {
        name: "dm-0".into(),
        dm_name: Some("vg0-data".into()),
        busy_percent: 99.0,
        writes_per_second: 2000.0,
        write_bytes_per_second: 8.0 * 1024.0 * 1024.0,
        ..DiskRates::default()
    }];
    obs.top_io = vec![
        culprit(4242, "java", pod(Some("shop"), Some("web-1"), Some("app"))),
        culprit(9783, "mysqld", host("/system.slice/mysqld.service")),
        culprit(5120, "fluentd", pod(None, None, None)),
        culprit(1930, "flush-8:0", Origin::Kernel),
    ];
    fill_totals(&mut obs);
    let f = findings(&obs);
    let io = only(&f, IO_BOUND);
    assert_eq!(io.len(), 1);
    let io = io[0];
    assert_eq!(io.subject, "dm-0");
    assert!(
        io.summary
            .en
            .starts_with("Disk dm-0 (vg0-data) was busy 99% "),
        "{}",
        io.summary.en
    );
    assert!(
        io.summary.en.ends_with(
            "top IO by bytes (no task waited on IO): java (pid 4242, pod shop/web-1 container app uid 8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b, 4.0 MiB/s); \
             mysqld (pid 9783, host process outside Kubernetes, cgroup /system.slice/mysqld.service, 4.0 MiB/s); \
             fluentd (pid 5120, pod uid 8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b, 4.0 MiB/s)."
        ),
        "{}",
        io.summary.en
    );
    // Chinese names no container, joins with "；".
    assert!(
        io.summary.zh.contains(
            "java（pid 4242，Pod shop/web-1，UID 8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b，4.0 MiB/s）；mysqld（pid 9783，宿主机上未被 Kubernetes 管理的进程"
        ),
        "{}",
        io.summary.zh
    );
    // The evidence list names five, in the fixed English form.
    assert!(io.evidence["top_io_processes"]
        .as_str()
        .is_some_and(|s| s.ends_with("; flush-8:0 (pid 1930, kernel thread)")));
    assert_eq!(
        io.remediation.commands,
        [
            "top",
            "atop",
            "iotop -oPa",
            "iostat -dx 2 5 /dev/dm-0",
            "cat /proc/4242/io",
            "kubectl -n shop describe pod web-1",
            "kubectl cordon node-1",
        ]
    );
    // mysqld, a host process among the top three, has its own finding.
    let hp = only(&f, HOST_PROCESS);
    assert_eq!(hp.len(), 1);
    assert_eq!(hp[0].subject, "mysqld");
    assert!(hp[0]
        .summary
        .en
        .contains("top IO processes (4.00 MiB/s read+written)"));
    assert!(hp[0]
        .remediation
        .commands
        .contains(&"iotop -oPa".to_string()));
}

#[test]
fn stalled_tasks_without_psi_say_it_is_unknown() {
    let mut obs = quiet(2);
    obs.procs_blocked = 5;
    obs.previous_procs_blocked = Some(4);
    let f = findings(&obs);
    let io = only(&f, IO_BOUND);
    assert_eq!(io.len(), 1, "{f:?}");
    let io = io[0];
    assert_eq!(io.title.en, "Tasks are stalled on IO");
    assert!(
        io.summary.en.starts_with(
            "No local disk is ≥90% busy, yet 5 tasks are in D state (limit 2) (the kernel reports no IO pressure to say how long tasks stall): "
        ),
        "{}",
        io.summary.en
    );
    assert!(!io.summary.en.contains("0.0%"), "{}", io.summary.en);
    assert!(
        io.summary.en.ends_with(
            "no process accounts for a material share (10% or more) of the IO wait or of the bytes read and written (kernel writeback, or another host on shared storage?)."
        ),
        "{}",
        io.summary.en
    );
    assert!(io
        .remediation
        .commands
        .contains(&"iostat -dx 2 5".to_string()));

    // With PSI, its share and limit.
    obs.pressure.io = Some(Pressure {
        some: PsiLine {
            avg10: 60.0,
            avg60: 50.0,
            avg300: 40.0,
            total_us: 1,
        },
        full: Some(PsiLine {
            avg10: 48.5,
            avg60: 40.0,
            avg300: 30.0,
            total_us: 1,
        }),
    });
    let f = findings(&obs);
    let io = only(&f, IO_BOUND)[0];
    assert!(
        io.summary
            .en
            .contains(" and all non-idle tasks stalled on IO 48.5% of the last 10 s (limit 20%): "),
        "{}",
        io.summary.en
    );
}

#[test]
fn cpu_bound_lists_processes_with_their_cpu_share() {
    let mut obs = quiet(4);
    obs.load.load1 = 20.0;
    obs.previous_load1 = Some(3.0);
    obs.cpu = CpuPercent {
        user: 95.0,
        system: 5.0,
        ..CpuPercent::default()
    };
    obs.top_cpu = vec![
        culprit(
            812,
            "kubelet",
            Origin::Host {
                cgroup: "/kubepods".into(),
                infrastructure: true,
            },
        ),
        culprit(17, "kworker/0:1", Origin::Unknown),
    ];
    fill_totals(&mut obs);
    let f = findings(&obs);
    let c = only(&f, CPU_BOUND)[0];
    assert_eq!(c.severity, Severity::Critical);
    assert!(
        c.summary.en.ends_with(
            "top CPU: kubelet (pid 812, Kubernetes node component on the host) 150%; kworker/0:1 (pid 17, origin unknown) 150%."
        ),
        "{}",
        c.summary.en
    );
    assert!(c
        .summary
        .zh
        .contains("kubelet（pid 812，宿主机上的 Kubernetes 节点组件） 150%"));
    // The owner of a node component is its unit: systemctl, ps; no pod commands.
    assert!(c.remediation.commands.contains(&"top -p 812".to_string()));
    assert!(c
        .remediation
        .commands
        .contains(&"systemctl status 812".to_string()));
    assert!(!c.remediation.commands.iter().any(|c| c.contains("17")));
    // Node components are part of Kubernetes: no host_process finding.
    assert!(only(&f, HOST_PROCESS).is_empty());
}

/// The process description is written out in io_bound and cpu_bound: the two copies say
/// the same (cpu_bound adds the CPU share).
#[test]
fn io_bound_and_cpu_bound_describe_processes_alike() {
    let rules = crate::rules::RuleBook::builtin();
    let origins = [
        pod(Some("shop"), Some("web-1"), Some("app")),
        pod(Some("shop"), Some("web-1"), None),
        pod(None, None, None),
        host("/system.slice/x.service"),
        Origin::Host {
            cgroup: "/".into(),
            infrastructure: true,
        },
        Origin::Kernel,
        Origin::Unknown,
    ];
    for o in origins {
        let c = culprit(42, "p", o);
        let mut obs = quiet(1);
        obs.procs_blocked = 3;
        obs.previous_procs_blocked = Some(3);
        obs.load.load1 = 3.0;
        obs.cpu = CpuPercent {
            user: 100.0,
            ..CpuPercent::default()
        };
        obs.top_io = vec![c.clone()];
        obs.top_cpu = vec![c.clone()];
        fill_totals(&mut obs);
        let f: Vec<Finding> = judge(&obs, &Thresholds::default())
            .into_iter()
            .map(|d| rules.render(d, "n"))
            .collect();
        let io = &only(&f, IO_BOUND)[0].summary;
        let cpu = &only(&f, CPU_BOUND)[0].summary;
        // io_bound adds the bytes (and the IO wait when material) before the `)`.
        let en = io
            .en
            .split("top IO by bytes (no task waited on IO): ")
            .nth(1)
            .unwrap()
            .trim_end_matches('.')
            .strip_suffix(", 4.0 MiB/s)")
            .unwrap();
        let en = format!("{en})");
        let zh = io
            .zh
            .split("IO 最多的进程：")
            .nth(1)
            .unwrap()
            .trim_end_matches('。')
            .strip_suffix("，4.0 MiB/s）")
            .unwrap();
        let zh = format!("{zh}）");
        assert_eq!(en, c.label(), "{:?}", c.origin);
        assert!(
            cpu.en.ends_with(&format!("top CPU: {en} 150%.")),
            "{}",
            cpu.en
        );
        assert!(
            cpu.zh.ends_with(&format!("CPU 占用最多：{zh} 150%。")),
            "{}",
            cpu.zh
        );
    }
}

/// The VM: iowait info sustained, pid 1 the only process with any IO, 4 KiB/s.
#[test]
fn pid_1_with_near_zero_io_is_never_the_culprit() {
    let mut obs = quiet(2);
    obs.cpu.iowait = 3.0;
    obs.cpu.idle = 97.0;
    obs.previous_iowait_percent = Some(2.5);
    let mut init = culprit(1, "process_api", host("/"));
    init.write_bytes_per_second = 4096.0;
    init.cpu_percent = 2.0;
    obs.top_io = vec![init.clone()];
    obs.top_cpu = vec![init];
    fill_totals(&mut obs);
    assert!(material_io(&obs, &Thresholds::default()).is_empty());
    assert!(material_cpu(&obs, &Thresholds::default()).is_empty());
    let f = findings(&obs);
    let wa = only(&f, IOWAIT);
    assert_eq!(wa.len(), 1, "{f:?}");
    assert!(
        !wa[0].evidence.contains_key("top_io_pid"),
        "{:?}",
        wa[0].evidence
    );
    assert!(only(&f, HOST_PROCESS).is_empty(), "{f:?}");
    // Its IO wait sampled in D state once in 11 (9%): still under the floor.
    obs.io_wait_method = IoWaitMethod::DStateSampling;
    obs.top_io[0].io_wait_percent = 100.0 / 11.0;
    fill_totals(&mut obs);
    assert!(material_io(&obs, &Thresholds::default()).is_empty());
}

/// The slow storage: four fio jobs blocked on a throttled disk (98% IO wait, a few
/// KiB/s each) and a writer through the page cache (1.6 MB/s, no wait).
fn throttled(method: IoWaitMethod, fio_wait: f64) -> Observation {
    let mut obs = quiet(2);
    obs.procs_blocked = 4;
    obs.previous_procs_blocked = Some(4);
    obs.cpu.iowait = 81.0;
    obs.cpu.idle = 15.0;
    obs.io_wait_method = method;
    let mut dd = culprit(700, "dd", host("/user.slice"));
    dd.write_bytes_per_second = 1_600_000.0;
    let mut top = vec![dd];
    for pid in 801..=804 {
        let mut f = culprit(pid, "fio", host("/user.slice"));
        f.write_bytes_per_second = 65_536.0;
        f.io_wait_percent = fio_wait + f64::from(pid - 800) / 10.0;
        f.state = 'D';
        top.push(f);
    }
    obs.top_io = top;
    fill_totals(&mut obs);
    obs
}

#[test]
fn io_wait_outranks_bytes_with_delay_accounting() {
    let obs = throttled(IoWaitMethod::DelayAcct, 98.0);
    let th = Thresholds::default();
    let io: Vec<u32> = material_io(&obs, &th).iter().map(|c| c.pid).collect();
    assert_eq!(
        io,
        [804, 803, 802, 801, 700],
        "fio by IO wait, then dd by bytes"
    );
    let f = findings(&obs);
    let stalled = only(&f, IO_BOUND)[0];
    assert_eq!(num(stalled, "top_io_pid"), 804.0);
    assert_eq!(text(stalled, "io_wait_method"), "delayacct");
    assert!((num(stalled, "top_io_io_wait_percent") - 98.4).abs() < 1e-9);
    assert!(
        stalled.summary.en.contains(
            "top IO by time waiting for IO (delay accounting, as iotop's IO> column): \
             fio (pid 804, host process outside Kubernetes, cgroup /user.slice, waiting for IO 98% of the time, 64.0 KiB/s); \
             fio (pid 803,"
        ),
        "{}",
        stalled.summary.en
    );
    assert!(
        stalled.summary.zh.contains(
            "按等待 IO 的时间排序（延迟统计，即 iotop 的 IO> 列），IO 最多的进程：fio（pid 804，"
        ),
        "{}",
        stalled.summary.zh
    );
    assert!(stalled
        .remediation
        .commands
        .contains(&"cat /proc/804/io".to_string()));
    assert!(!stalled
        .remediation
        .commands
        .contains(&"sysctl -w kernel.task_delayacct=1".to_string()));
    // The iowait finding names the same process.
    assert_eq!(num(only(&f, IOWAIT)[0], "top_io_pid"), 804.0);
    // So does host_process (fio runs on the host), with its IO wait; dd is named too
    // (material by bytes) but after it, and only one finding per command name.
    let hp = only(&f, HOST_PROCESS);
    let subjects: Vec<&str> = hp.iter().map(|f| f.subject.as_str()).collect();
    assert_eq!(
        subjects,
        ["fio"],
        "the first three material IO processes are fio"
    );
    assert!(
        hp[0].summary.en.contains(
            "is among the top IO processes (waiting for IO 98% of the time, 0.06 MiB/s read+written)"
        ),
        "{}",
        hp[0].summary.en
    );
}

#[test]
fn d_state_samples_rank_when_delay_accounting_is_off() {
    let obs = throttled(IoWaitMethod::DStateSampling, 90.0);
    let f = findings(&obs);
    let stalled = only(&f, IO_BOUND)[0];
    assert_eq!(num(stalled, "top_io_pid"), 804.0);
    assert_eq!(text(stalled, "io_wait_method"), "d_state_sampling");
    assert!(
        stalled.summary.en.contains(
            "top IO by time in D state (sampled, as delay accounting is off or counted no delay): fio (pid 804, host process outside Kubernetes, cgroup /user.slice, in D state in 90% of samples, 64.0 KiB/s)"
        ),
        "{}",
        stalled.summary.en
    );
    assert!(stalled
        .remediation
        .commands
        .contains(&"sysctl -w kernel.task_delayacct=1".to_string()));
    assert!(stalled.remediation.steps.iter().any(|s| s
        .en
        .contains("because delay accounting is off on this kernel or counted no delay")));
    // Without any IO wait, the same window ranks by bytes: dd first.
    let obs = throttled(IoWaitMethod::BytesOnly, 0.0);
    let io: Vec<u32> = material_io(&obs, &Thresholds::default())
        .iter()
        .map(|c| c.pid)
        .collect();
    assert_eq!(io, [700], "only dd moves a material share of the bytes");
}

#[test]
fn a_cpu_culprit_needs_a_material_share() {
    let mut obs = quiet(2);
    obs.load.load1 = 5.0;
    obs.previous_load1 = Some(5.0);
    obs.cpu = CpuPercent {
        user: 95.0,
        system: 5.0,
        ..CpuPercent::default()
    };
    let mut hog = culprit(10, "stress", host("/system.slice/stress.service"));
    hog.cpu_percent = 190.0;
    let mut small = culprit(11, "sshd", host("/system.slice/ssh.service"));
    small.cpu_percent = 5.0;
    obs.top_cpu = vec![hog, small];
    fill_totals(&mut obs);
    let cpu: Vec<u32> = material_cpu(&obs, &Thresholds::default())
        .iter()
        .map(|c| c.pid)
        .collect();
    assert_eq!(cpu, [10]);
    let f = findings(&obs);
    let hp: Vec<&str> = only(&f, HOST_PROCESS)
        .iter()
        .map(|f| f.subject.as_str())
        .collect();
    assert_eq!(hp, ["stress"], "sshd at 5% of a CPU is not named");
}

#[test]
fn cordon_advice_says_when_the_kubelet_is_not_running() {
    let mut obs = quiet(4);
    obs.load.load1 = 12.5;
    obs.previous_load1 = Some(12.1);
    obs.cpu = CpuPercent {
        user: 90.0,
        idle: 10.0,
        ..CpuPercent::default()
    };
    let f = findings(&obs);
    let high = only(&f, HIGH_LOAD)[0];
    assert_eq!(text(high, "kubelet_running"), "true");
    assert!(!high
        .remediation
        .commands
        .contains(&"systemctl status kubelet".to_string()));
    obs.kubelet_running = Some(false);
    let f = findings(&obs);
    let high = only(&f, HIGH_LOAD)[0];
    assert_eq!(text(high, "kubelet_running"), "false");
    assert!(high.remediation.commands.ends_with(&[
        "kubectl cordon node-1".to_string(),
        "systemctl status kubelet".to_string()
    ]));
    assert!(high
        .remediation
        .steps
        .iter()
        .any(|s| s.en.starts_with("No kubelet process runs on this node")
            && s.zh.starts_with("该节点上没有运行 kubelet 进程")));
    // Unknown (no process list): nothing claimed.
    obs.kubelet_running = None;
    let f = findings(&obs);
    assert!(!only(&f, HIGH_LOAD)[0]
        .evidence
        .contains_key("kubelet_running"));
}

/// Judges windows one after another as the collector does: each window holds what the one
/// before reported. Returns, per window, the set of (id, subject) and the findings.
fn run(windows: Vec<Observation>, th: &Thresholds) -> Vec<(Vec<String>, Vec<Finding>)> {
    let rules = crate::rules::RuleBook::builtin();
    let mut held = Held::default();
    let mut out = Vec::new();
    for mut obs in windows {
        obs.held = held;
        let drafts = judge(&obs, th);
        held = Held::of(
            drafts
                .iter()
                .map(|d| (d.id.as_str(), d.subject.as_str(), d.severity)),
        );
        let f: Vec<Finding> = drafts
            .into_iter()
            .map(|d| rules.render(d, "node-1"))
            .collect();
        let mut set: Vec<String> = f
            .iter()
            .map(|f| format!("{} {}", f.id, f.subject))
            .collect();
        set.sort();
        out.push((set, f));
    }
    out
}

/// How many times the set of findings changes over a run, counting the first raise.
fn changes(run: &[(Vec<String>, Vec<Finding>)]) -> usize {
    let mut last: Vec<String> = Vec::new();
    let mut n = 0;
    for (set, _) in run {
        if *set != last {
            n += 1;
            last = set.clone();
        }
    }
    n
}

/// A steady IO load on 2 CPUs, its figures hovering around the limits: PSI io full around
/// 20%, iowait around 10%, the fio job on the host around the culprit floors (10% IO wait,
/// 64 KiB/s).
fn hovering(
    psi_full: f64,
    psi_some: f64,
    iowait: f64,
    fio_wait: f64,
    fio_bytes: f64,
) -> Observation {
    let mut obs = quiet(2);
    obs.cpu.iowait = iowait;
    obs.cpu.idle = 100.0 - iowait;
    obs.previous_iowait_percent = Some(iowait);
    obs.procs_blocked = 1;
    obs.previous_procs_blocked = Some(1);
    obs.pressure.io = Some(Pressure {
        some: PsiLine {
            avg10: psi_some,
            avg60: psi_some,
            avg300: psi_some,
            total_us: 0,
        },
        full: Some(PsiLine {
            avg10: psi_full,
            avg60: psi_full,
            avg300: psi_full,
            total_us: 0,
        }),
    });
    obs.io_wait_method = IoWaitMethod::DStateSampling;
    let mut fio = culprit(4321, "fio", host("/nd-e2e-steady"));
    fio.state = 'D';
    fio.cpu_percent = 1.0;
    fio.io_wait_percent = fio_wait;
    fio.write_bytes_per_second = fio_bytes;
    // Another writer (a build) moving 30 KiB/s (under the floors) without waiting.
    let mut other = culprit(999, "cargo", host("/user.slice"));
    other.cpu_percent = 1.0;
    other.write_bytes_per_second = 30.0 * 1024.0;
    other.io_wait_percent = 1.0;
    obs.top_io = vec![fio, other];
    fill_totals(&mut obs);
    obs
}

/// Issue 28: a steady load whose figures hover around the limits raises its findings once
/// and keeps them (the dead band); without it the same windows raise and clear them again
/// and again. PSI io full 22/18/13/21/..., iowait 11/9/6/10.5/... (warning at 10%), fio's IO
/// wait 12/8/6/11/...% and bytes 72/48/36/66/... KiB/s (the culprit floors are 10% and 64 KiB/s).
#[test]
fn a_load_hovering_at_the_limits_raises_once_and_stays() {
    let figures: [(f64, f64, f64, f64); 12] = [
        (22.0, 40.0, 11.0, 12.0),
        (18.0, 38.0, 9.0, 8.0),
        (13.0, 31.0, 6.0, 6.0),
        (21.0, 42.0, 10.5, 11.0),
        (19.0, 39.0, 8.0, 9.0),
        (11.0, 25.0, 5.5, 7.0),
        (24.0, 45.0, 12.0, 13.0),
        (17.5, 36.0, 9.5, 9.5),
        (20.5, 41.0, 10.1, 10.5),
        (12.0, 28.0, 6.5, 6.5),
        (23.0, 44.0, 11.5, 12.0),
        (16.0, 33.0, 7.0, 8.0),
    ];
    let windows = || {
        figures
            .iter()
            .map(|(full, some, wa, wait)| hovering(*full, *some, *wa, *wait, wait * 6.0 * 1024.0))
            .collect::<Vec<_>>()
    };
    let th = Thresholds::default();
    let steady = run(windows(), &th);
    let want = vec![
        "load.host_process fio".to_string(),
        format!("{IO_BOUND} "),
        format!("{IOWAIT} "),
    ];
    for (i, (set, _)) in steady.iter().enumerate() {
        assert_eq!(*set, want, "window {}: {steady:#?}", i + 1);
    }
    assert_eq!(changes(&steady), 1, "only the first raise");
    // The severity of iowait steps down only under half its limit: warning all along.
    assert!(steady
        .iter()
        .all(|(_, f)| only(f, IOWAIT)[0].severity == Severity::Warning));
    // Held windows say so.
    let (_, f) = &steady[2];
    let io = only(f, IO_BOUND)[0];
    assert!(io.conditions.contains("held"), "{io:#?}");
    assert!(
        io.summary.en.contains(
            "below the limits now, kept while PSI io full stays ≥ 10%, D-state tasks ≥ 1.0 or tasks stall on IO ≥ 20% of the time (PSI io some 31.0%; dead band)"
        ),
        "{}",
        io.summary.en
    );
    assert_eq!(num(io, "psi_io_full_avg10_percent"), 13.0);
    assert_eq!(num(io, "psi_io_some_avg10_percent"), 31.0);
    let wa = only(f, IOWAIT)[0];
    assert!(wa.conditions.contains("held"));
    assert_eq!(num(wa, "iowait_percent"), 6.0);
    assert_eq!(num(wa, "threshold_percent"), 10.0);
    assert!(
        wa.summary
            .en
            .ends_with(" Under the limit now, kept until iowait is at most 5.0% (dead band)."),
        "{}",
        wa.summary.en
    );
    let hp = only(f, HOST_PROCESS)[0];
    assert_eq!(hp.subject, "fio");
    assert_eq!(num(hp, "pid"), 4321.0);
    assert!(!hp.remediation.commands.is_empty());

    // Without the dead band the same windows flap.
    let flappy = run(
        windows(),
        &Thresholds {
            hold: Hold::none(),
            ..Thresholds::default()
        },
    );
    assert!(changes(&flappy) >= 6, "{flappy:#?}");
}

/// The dead band keeps a finding only while its figures stay at the hold levels: a clear
/// drop (PSI io full 3%, some 5%, iowait 0.2%, no task in D state, fio waiting 1% at 8 KiB/s)
/// clears everything in one window, from any severity.
#[test]
fn a_clear_drop_still_clears() {
    let th = Thresholds::default();
    let mut drop = hovering(3.0, 5.0, 0.2, 1.0, 8.0 * 1024.0);
    drop.procs_blocked = 0;
    let r = run(
        vec![hovering(35.0, 60.0, 32.0, 40.0, 96.0 * 1024.0), drop],
        &th,
    );
    assert_eq!(r[0].0.len(), 3, "{r:#?}");
    assert_eq!(only(&r[0].1, IOWAIT)[0].severity, Severity::Critical);
    assert!(r[1].0.is_empty(), "{r:#?}");
    // Critical iowait steps down to where its figure is: 20% is under 30% but above 15%
    // (half of it): kept critical; 12% is warning; 4% is info (above 0.5%).
    let steps = run(
        vec![
            hovering(35.0, 60.0, 32.0, 40.0, 96.0 * 1024.0),
            hovering(35.0, 60.0, 20.0, 40.0, 96.0 * 1024.0),
            hovering(35.0, 60.0, 12.0, 40.0, 96.0 * 1024.0),
            hovering(35.0, 60.0, 4.0, 40.0, 96.0 * 1024.0),
        ],
        &th,
    );
    let sev: Vec<Severity> = steps
        .iter()
        .map(|(_, f)| only(f, IOWAIT)[0].severity)
        .collect();
    assert_eq!(
        sev,
        [
            Severity::Critical,
            Severity::Critical,
            Severity::Warning,
            Severity::Info
        ]
    );
}

/// Busy CPUs hide a steady IO stall from iowait (no idle time) and PSI io full (runnable
/// tasks are not stalled); PSI io some still shows it: the IO findings reported before are
/// kept, and say why. Never raised from PSI io some alone.
#[test]
fn busy_cpus_hiding_the_io_wait_keep_the_io_findings() {
    let th = Thresholds::default();
    let r = run(
        vec![
            hovering(30.0, 55.0, 12.0, 40.0, 96.0 * 1024.0),
            hovering(4.0, 52.0, 0.0, 40.0, 96.0 * 1024.0),
        ],
        &th,
    );
    let f = &r[1].1;
    let io = only(f, IO_BOUND)[0];
    assert!(io.conditions.contains("held"));
    let wa = only(f, IOWAIT)[0];
    assert_eq!(wa.severity, Severity::Info);
    assert!(wa.conditions.contains("held_by_io_pressure"));
    assert!(
        wa.summary.en.ends_with(
            " Kept while tasks stall on IO 52.0% of the time (PSI io some, hold 20%): busy CPUs leave no idle time for iowait to show it."
        ),
        "{}",
        wa.summary.en
    );
    assert_eq!(num(wa, "psi_io_some_avg10_percent"), 52.0);
    assert_eq!(only(f, HOST_PROCESS)[0].subject, "fio");
    // The same window with nothing reported before raises nothing.
    assert!(
        run(vec![hovering(4.0, 52.0, 0.0, 40.0, 96.0 * 1024.0)], &th)[0]
            .0
            .is_empty()
    );
}

/// A saturated disk: raised at 90% busy, kept down to 72% (80% of the limit), cleared under.
#[test]
fn a_busy_disk_is_kept_down_to_its_hold_level() {
    let disk = |busy: f64| {
        let mut obs = quiet(2);
        obs.disks = vec![DiskRates {
            name: "vdb".into(),
            busy_percent: busy,
            ..DiskRates::default()
        }];
        obs
    };
    let th = Thresholds::default();
    let r = run(
        vec![disk(95.0), disk(80.0), disk(73.0), disk(71.0), disk(85.0)],
        &th,
    );
    let sets: Vec<bool> = r
        .iter()
        .map(|(s, _)| s == &[format!("{IO_BOUND} vdb")])
        .collect();
    assert_eq!(sets, [true, true, true, false, false], "{r:#?}");
    let held = only(&r[1].1, IO_BOUND)[0];
    assert!(held.conditions.contains("held"));
    assert!(
        held.summary
            .en
            .contains("below the limit now, kept until the disk is busy under 72% (dead band); "),
        "{}",
        held.summary.en
    );
}
