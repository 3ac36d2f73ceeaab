//! The rules of the `load` collector: a judged [`Observation`] -> drafts, and metrics.
//!
//! Everything here is pure: no files, no clock. The judge decides which findings a window
//! raises, their severity, subject and evidence, and the conditions that pick the advice; the
//! words (the handbook's high-load section, in our own words) are in
//! `collectors/rules/load.toml`.
//!
//! **Dead band.** `io_bound`, `iowait` and `host_process` are raised at their limits and,
//! once the previous window reported them ([`Observation::held`]), kept while their figures
//! stay at or above the lower levels of [`super::thresholds::Hold`]: a steady load whose
//! figures hover around a limit gives a steady set of findings; such a finding carries the
//! condition `held`.

use super::observation::{Culprit, IoWaitMethod, Observation, Origin};
use super::sample::Sample;
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::metric::Metric;
use crate::rules::{Draft, Item};

/// Rule id: load1 per online CPU over the limit on the last two samples.
pub const HIGH_LOAD: &str = "load.high_load";
/// Rule id: a saturated disk, or tasks stalled on IO without one.
pub const IO_BOUND: &str = "load.io_bound";
/// Rule id: CPUs busy running code while the run queue holds a task per CPU.
pub const CPU_BOUND: &str = "load.cpu_bound";
/// Rule id: the share of CPU time idle while IO is outstanding.
pub const IOWAIT: &str = "load.iowait";
/// Rule id: a process outside Kubernetes among the top consumers of a loaded node.
pub const HOST_PROCESS: &str = "load.host_process";

/// Processes a finding's text names (and `load.host_process` looks at), per list.
const NAMED_IN_TEXT: usize = 3;
/// Processes the `*_processes` evidence names.
const NAMED_IN_EVIDENCE: usize = 5;
/// D-state tasks the `blocked_tasks` evidence names.
const BLOCKED_IN_EVIDENCE: usize = 10;

/// Judges one window.
pub fn judge(obs: &Observation, th: &Thresholds) -> Vec<Draft> {
    let io = material_io(obs, th);
    let cpu = material_cpu(obs, th);
    let mut out = Vec::new();
    out.extend(high_load(obs, th, &io, &cpu));
    out.extend(io_bound(obs, th, &io));
    out.extend(cpu_bound(obs, th, &cpu));
    out.extend(iowait(obs, th, &io));
    let pressing: Vec<(String, Severity)> =
        out.iter().map(|d| (d.id.clone(), d.severity)).collect();
    // The processes host_process named last window stay candidates at the hold floors.
    let held_io = held_culprits(material_io_at(obs, th, th.hold.culprit_share), obs);
    let held_cpu = held_culprits(material_cpu_at(obs, th, th.hold.culprit_share), obs);
    out.extend(host_processes(
        (&io, &held_io),
        (&cpu, &held_cpu),
        &pressing,
        obs.io_wait_method,
        th,
    ));
    out
}

/// The culprits of `list` that `host_process` named on the previous window.
fn held_culprits<'a>(list: Vec<&'a Culprit>, obs: &Observation) -> Vec<&'a Culprit> {
    list.into_iter()
        .filter(|c| obs.held.has(HOST_PROCESS, &c.comm))
        .collect()
}

/// `part` in percent of `whole` (0 when the whole is 0).
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part * 100.0 / whole
    } else {
        0.0
    }
}

/// The IO culprits worth naming, in the order they are named: first the processes whose IO
/// wait is material (at least `culprit_min_io_wait_percent` and `culprit_min_share_percent`
/// of all processes' IO wait), most waiting first, as iotop's `IO>` column ranks; then those
/// whose bytes are material (at least `culprit_min_io_bytes_per_second` and the same share
/// of all bytes), most bytes first; kernel threads after the processes. A process with
/// near-zero IO is never named, whatever its rank among the few that did any.
pub fn material_io<'a>(obs: &'a Observation, th: &Thresholds) -> Vec<&'a Culprit> {
    material_io_at(obs, th, 1.0)
}

/// [`material_io`] with every floor multiplied by `at` (the dead band's lower floors).
fn material_io_at<'a>(obs: &'a Observation, th: &Thresholds, at: f64) -> Vec<&'a Culprit> {
    let min_share = at * th.culprit_min_share_percent;
    let waits = |c: &Culprit| {
        obs.io_wait_method != IoWaitMethod::BytesOnly
            && c.io_wait_percent >= at * th.culprit_min_io_wait_percent
            && share(c.io_wait_percent, obs.total_io_wait_percent) >= min_share
    };
    let moves = |c: &Culprit| {
        c.io_bytes_per_second() >= at * th.culprit_min_io_bytes_per_second
            && share(c.io_bytes_per_second(), obs.total_io_bytes_per_second) >= min_share
    };
    let mut by_wait: Vec<&Culprit> = obs.top_io.iter().filter(|c| waits(c)).collect();
    by_wait.sort_by(|a, b| {
        b.io_wait_percent
            .total_cmp(&a.io_wait_percent)
            .then(b.io_bytes_per_second().total_cmp(&a.io_bytes_per_second()))
    });
    let mut by_bytes: Vec<&Culprit> = obs
        .top_io
        .iter()
        .filter(|c| !waits(c) && moves(c))
        .collect();
    // Stable: equals keep the collector's order.
    by_bytes.sort_by(|a, b| b.io_bytes_per_second().total_cmp(&a.io_bytes_per_second()));
    by_wait.extend(by_bytes);
    // Kernel threads (jbd2, flush, kworker) wait and write on behalf of some process: they
    // are named after the processes, which are what an operator can act on.
    let (mut user, kernel): (Vec<&Culprit>, Vec<&Culprit>) = by_wait
        .into_iter()
        .partition(|c| c.origin != Origin::Kernel);
    user.extend(kernel);
    user
}

/// The CPU culprits worth naming, most CPU first: at least `culprit_min_cpu_percent` of one
/// CPU and `culprit_min_share_percent` of all processes' CPU time.
pub fn material_cpu<'a>(obs: &'a Observation, th: &Thresholds) -> Vec<&'a Culprit> {
    material_cpu_at(obs, th, 1.0)
}

/// [`material_cpu`] with every floor multiplied by `at`.
fn material_cpu_at<'a>(obs: &'a Observation, th: &Thresholds, at: f64) -> Vec<&'a Culprit> {
    obs.top_cpu
        .iter()
        .filter(|c| {
            c.cpu_percent >= at * th.culprit_min_cpu_percent
                && share(c.cpu_percent, obs.total_cpu_percent) >= at * th.culprit_min_share_percent
        })
        .collect()
}

/// Adds `<prefix>_pid`, `_comm`, `_origin`, `_pod_uid` and the figures of a culprit (its IO
/// wait only when it was named for IO).
fn culprit_evidence(mut d: Draft, prefix: &str, c: &Culprit, for_io: bool) -> Draft {
    let name = |field: &str| format!("{prefix}_{field}");
    d = d
        .evidence(&name("pid"), c.pid)
        .evidence(&name("comm"), c.comm.as_str())
        .evidence(&name("origin"), c.origin.kind())
        .evidence(&name("cpu_percent"), c.cpu_percent)
        .evidence(&name("read_bytes_per_second"), c.read_bytes_per_second)
        .evidence(&name("write_bytes_per_second"), c.write_bytes_per_second);
    if for_io {
        d = d.evidence(&name("io_wait_percent"), c.io_wait_percent);
    }
    match &c.origin {
        Origin::Pod {
            uid,
            namespace,
            name: pod,
            container_id,
            ..
        } => {
            d = d.evidence(&name("pod_uid"), uid.as_str());
            if let (Some(ns), Some(n)) = (namespace, pod) {
                d = d.evidence(&name("pod"), format!("{ns}/{n}"));
            }
            d.evidence_opt(&name("container_id"), container_id.as_deref())
        }
        Origin::Host { cgroup, .. } => d.evidence(&name("cgroup"), cgroup.as_str()),
        _ => d,
    }
}

/// The first processes of a list as items the rule text names: `comm`, `pid`, `cpu_percent`,
/// `io_wait_percent`, `io_bytes_per_second` (with the condition `waits` when its IO wait is
/// material) and where each runs (one of the conditions `pod_named` with `namespace`, `name`,
/// `uid` and maybe `container`; `pod` with `uid`; `host` with `cgroup`; `component`;
/// `kernel`; `origin_unknown`). The first is the `heaviest`: the commands name its owner.
/// `th` is given for IO lists only (the IO figures and `waits` are for them).
fn culprit_items(cs: &[&Culprit], io: Option<&Thresholds>) -> Vec<Item> {
    cs.iter()
        .take(NAMED_IN_TEXT)
        .enumerate()
        .map(|(i, c)| {
            let mut item = Item::new()
                .value("comm", c.comm.as_str())
                .value("pid", c.pid)
                .value("cpu_percent", c.cpu_percent)
                .when_if("heaviest", i == 0);
            if let Some(th) = io {
                item = item
                    .value("io_wait_percent", c.io_wait_percent)
                    .value("io_bytes_per_second", c.io_bytes_per_second())
                    .when_if("waits", c.io_wait_percent >= th.culprit_min_io_wait_percent)
                    .when_if("moves", c.io_bytes_per_second() > 0.0);
            }
            match &c.origin {
                Origin::Pod {
                    uid,
                    namespace: Some(ns),
                    name: Some(n),
                    container,
                    ..
                } => item
                    .when("pod_named")
                    .value("uid", uid.as_str())
                    .value("namespace", ns.as_str())
                    .value("name", n.as_str())
                    .value_opt("container", container.as_deref()),
                Origin::Pod { uid, .. } => item.when("pod").value("uid", uid.as_str()),
                Origin::Host {
                    cgroup,
                    infrastructure: false,
                } => item.when("host").value("cgroup", cgroup.as_str()),
                Origin::Host {
                    infrastructure: true,
                    ..
                } => item.when("component"),
                Origin::Kernel => item.when("kernel"),
                Origin::Unknown => item.when("origin_unknown"),
            }
        })
        .collect()
}

/// `load.high_load`: load1 per online CPU over the limit on the last two samples.
fn high_load(
    obs: &Observation,
    th: &Thresholds,
    io: &[&Culprit],
    cpu: &[&Culprit],
) -> Option<Draft> {
    let cpus = f64::from(obs.cpus.max(1));
    let prev = obs.previous_load1?;
    let sustained = obs.load.load1.min(prev);
    let per_cpu = sustained / cpus;
    let (severity, limit) = if per_cpu >= th.load_critical_per_cpu {
        (Severity::Critical, th.load_critical_per_cpu)
    } else if per_cpu >= th.load_warning_per_cpu {
        (Severity::Warning, th.load_warning_per_cpu)
    } else {
        return None;
    };
    let busy_disk = obs
        .disks
        .iter()
        .filter(|d| d.busy_percent >= th.disk_busy_percent)
        .max_by(|a, b| a.busy_percent.total_cmp(&b.busy_percent));
    let cause = if busy_disk.is_some()
        || obs.cpu.iowait >= th.iowait_warning_percent
        || obs.procs_blocked as f64 >= cpus
    {
        "io"
    } else if obs.cpu.busy() >= 50.0 {
        "cpu"
    } else {
        "mixed"
    };
    let mut d = Draft::new(HIGH_LOAD, severity)
        .evidence("load1", obs.load.load1)
        .evidence("load5", obs.load.load5)
        .evidence("load15", obs.load.load15)
        .evidence("previous_load1", prev)
        .evidence("cpus", obs.cpus)
        .evidence("load1_per_cpu", per_cpu)
        .evidence("threshold_per_cpu", limit)
        .evidence("procs_running", obs.procs_running)
        .evidence("procs_blocked", obs.procs_blocked)
        .evidence("cpu_user_percent", obs.cpu.user)
        .evidence("cpu_system_percent", obs.cpu.system)
        .evidence("cpu_idle_percent", obs.cpu.idle)
        .evidence("cpu_iowait_percent", obs.cpu.iowait)
        .evidence("cause", cause)
        .when(&format!("cause_{cause}"));
    if let Some(disk) = busy_disk {
        d = d
            .evidence("busiest_disk", disk.name.as_str())
            .evidence("busiest_disk_busy_percent", disk.busy_percent);
    }
    let top = if cause == "io" { io } else { cpu };
    if let Some(c) = top.first() {
        d = culprit_evidence(d, "top", c, cause == "io");
    }
    if cause == "io" {
        d = d.evidence("io_wait_method", obs.io_wait_method.as_str());
    }
    Some(kubelet(d, obs))
}

/// `load.io_bound`: a saturated disk (one finding per disk), or PSI io / D-state tasks high
/// without one.
fn io_bound(obs: &Observation, th: &Thresholds, io: &[&Culprit]) -> Vec<Draft> {
    let hold = &th.hold;
    let cpus = f64::from(obs.cpus.max(1));
    let psi_full = obs.pressure.io.and_then(|p| p.full).map(|l| l.avg10);
    let psi_some = obs.pressure.io.map(|p| p.some.avg10);
    let blocked_limit = (cpus * th.blocked_per_cpu).max(1.0);
    let blocked_at = |limit: f64| {
        obs.procs_blocked as f64 >= limit
            && obs
                .previous_procs_blocked
                .is_some_and(|b| b as f64 >= limit)
    };
    let blocked_sustained = blocked_at(blocked_limit);
    let hold_busy = hold.disk_busy_share * th.disk_busy_percent;
    let load_per_cpu = obs.load.load1 / cpus;
    let escalate =
        obs.cpu.iowait >= th.iowait_critical_percent || load_per_cpu >= th.load_critical_per_cpu;
    let severity = if escalate {
        Severity::Critical
    } else {
        Severity::Warning
    };

    let mut out = Vec::new();
    // A disk reported last window is kept down to the hold level.
    let busy: Vec<_> = obs
        .disks
        .iter()
        .filter(|d| {
            d.busy_percent >= th.disk_busy_percent
                || (obs.held.has(IO_BOUND, &d.name) && d.busy_percent >= hold_busy)
        })
        .collect();
    for disk in &busy {
        let d = Draft::new(IO_BOUND, severity)
            .subject(disk.name.as_str())
            .when("disk_saturated")
            .when_if("held", disk.busy_percent < th.disk_busy_percent)
            .var("hold_busy_percent", hold_busy)
            .evidence("device", disk.name.as_str())
            .evidence_opt("dm_name", disk.dm_name.as_deref())
            .evidence("busy_percent", disk.busy_percent)
            .evidence("threshold_busy_percent", th.disk_busy_percent)
            .evidence("reads_per_second", disk.reads_per_second)
            .evidence("writes_per_second", disk.writes_per_second)
            .evidence("read_bytes_per_second", disk.read_bytes_per_second)
            .evidence("write_bytes_per_second", disk.write_bytes_per_second)
            .evidence("await_ms", disk.await_ms)
            .evidence("service_ms", disk.service_ms)
            .evidence("queue_size", disk.queue_size)
            .evidence("cpu_iowait_percent", obs.cpu.iowait)
            .evidence("procs_blocked", obs.procs_blocked)
            .evidence("load1", obs.load.load1)
            .evidence("cpus", obs.cpus)
            .evidence("window_seconds", obs.elapsed_seconds)
            .evidence_opt("psi_io_full_avg10_percent", psi_full);
        out.push(io_culprits(d, obs, io, th));
    }
    let psi_high = psi_full.is_some_and(|p| p >= th.psi_io_full_percent);
    let raised = psi_high || blocked_sustained;
    // Reported last window: kept while PSI io full, the D-state tasks or PSI io some stay at
    // their hold levels.
    let hold_psi_full = hold.psi_io_full_share * th.psi_io_full_percent;
    let hold_blocked = hold.blocked_share * blocked_limit;
    let kept = obs.held.has(IO_BOUND, "")
        && (psi_full.is_some_and(|p| p >= hold_psi_full)
            || blocked_at(hold_blocked)
            || psi_some.is_some_and(|p| p >= hold.psi_io_some_percent));
    if busy.is_empty() && (raised || kept) {
        let d = Draft::new(IO_BOUND, severity)
            .when("tasks_stalled")
            .when_if("held", !raised)
            .evidence_opt("psi_io_some_avg10_percent", psi_some)
            .var("hold_psi_full_percent", hold_psi_full)
            .var("hold_blocked", hold_blocked)
            .var("hold_psi_some_percent", hold.psi_io_some_percent)
            .evidence("procs_blocked", obs.procs_blocked)
            .evidence("threshold_blocked", blocked_limit)
            .evidence("cpu_iowait_percent", obs.cpu.iowait)
            .evidence("load1", obs.load.load1)
            .evidence("cpus", obs.cpus)
            .evidence_opt("psi_io_full_avg10_percent", psi_full)
            .var("disk_busy_limit_percent", th.disk_busy_percent)
            .var("psi_io_full_limit_percent", th.psi_io_full_percent);
        out.push(io_culprits(d, obs, io, th));
    }
    out
}

/// The material IO processes (evidence and the text's list), how their IO wait was
/// measured, and the D-state tasks.
fn io_culprits(mut d: Draft, obs: &Observation, io: &[&Culprit], th: &Thresholds) -> Draft {
    d = d
        .evidence("io_wait_method", obs.io_wait_method.as_str())
        .when(match obs.io_wait_method {
            IoWaitMethod::DelayAcct => "by_delayacct",
            IoWaitMethod::DelayAcctAndSampling => "by_delayacct_and_samples",
            IoWaitMethod::DStateSampling => "by_d_state_samples",
            IoWaitMethod::BytesOnly => "by_bytes",
        })
        .var("min_share_percent", th.culprit_min_share_percent);
    if let Some(c) = io.first() {
        d = culprit_evidence(d, "top_io", c, true);
        d = d.evidence(
            "top_io_processes",
            io.iter()
                .take(NAMED_IN_EVIDENCE)
                .map(|c| c.label())
                .collect::<Vec<_>>()
                .join("; "),
        );
        let mut outside: Vec<&str> = Vec::new();
        for c in io.iter().filter(|c| c.origin.is_outside_kubernetes()) {
            if !outside.contains(&c.comm.as_str()) {
                outside.push(c.comm.as_str());
            }
        }
        d = d.evidence("top_io_outside_kubernetes", outside.join(","));
    }
    if !obs.blocked.is_empty() {
        d = d.evidence(
            "blocked_tasks",
            obs.blocked
                .iter()
                .take(BLOCKED_IN_EVIDENCE)
                .map(|c| match &c.wchan {
                    Some(w) => format!("{}({}) in {w}", c.comm, c.tid.unwrap_or(c.pid)),
                    None => format!("{}({})", c.comm, c.tid.unwrap_or(c.pid)),
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    kubelet(d.items("top_io", culprit_items(io, Some(th))), obs)
}

/// Whether the kubelet runs, for advice that cordons the node: the evidence
/// `kubelet_running` and the condition `kubelet_not_running` (when the process list says so);
/// and which processes the culprits come from (`process_scope`, when processes were read).
fn kubelet(d: Draft, obs: &Observation) -> Draft {
    let d = d.evidence_opt("process_scope", obs.process_scope.as_deref());
    match obs.kubelet_running {
        Some(running) => d
            .evidence("kubelet_running", running)
            .when_if("kubelet_not_running", !running),
        None => d,
    }
}

/// `load.cpu_bound`: CPUs busy running code most of the window while the run queue holds at
/// least one task per CPU (saturated: load is what the handbook's rule explains). Busy CPUs
/// with a short queue are a well-used node, not a problem.
fn cpu_bound(obs: &Observation, th: &Thresholds, cpu: &[&Culprit]) -> Option<Draft> {
    let busy = obs.cpu.busy();
    let cpus = f64::from(obs.cpus.max(1));
    if busy < th.cpu_busy_percent || obs.load.load1 < cpus {
        return None;
    }
    let severity = if obs.load.load1 / cpus >= th.load_critical_per_cpu {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut d = Draft::new(CPU_BOUND, severity)
        .evidence("cpu_busy_percent", busy)
        .evidence("threshold_busy_percent", th.cpu_busy_percent)
        .evidence("cpu_user_percent", obs.cpu.user)
        .evidence("cpu_system_percent", obs.cpu.system)
        .evidence("cpu_steal_percent", obs.cpu.steal)
        .evidence("load1", obs.load.load1)
        .evidence("cpus", obs.cpus)
        .evidence("window_seconds", obs.elapsed_seconds);
    if let Some(c) = cpu.first() {
        d = culprit_evidence(d, "top_cpu", c, false);
        d = d.evidence(
            "top_cpu_processes",
            cpu.iter()
                .take(NAMED_IN_EVIDENCE)
                .map(|c| format!("{} {:.0}%", c.label(), c.cpu_percent))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    Some(d.items("top_cpu", culprit_items(cpu, None)))
}

/// `load.iowait`: share of CPU time idle while IO is outstanding.
fn iowait(obs: &Observation, th: &Thresholds, io: &[&Culprit]) -> Option<Draft> {
    let wa = obs.cpu.iowait;
    let limit_of = |s: Severity| match s {
        Severity::Critical => th.iowait_critical_percent,
        Severity::Warning => th.iowait_warning_percent,
        Severity::Info => th.iowait_info_percent,
    };
    let raised = if wa > th.iowait_critical_percent {
        Some(Severity::Critical)
    } else if wa > th.iowait_warning_percent {
        Some(Severity::Warning)
    } else if wa > th.iowait_info_percent
        && !obs
            .previous_iowait_percent
            .is_some_and(|p| p <= th.iowait_info_percent)
    {
        Some(Severity::Info)
    } else {
        None
    };
    // Reported last window: the highest severity up to that one whose limit iowait still
    // reaches at the hold share; at least info while tasks stall on IO (PSI io some), which
    // busy CPUs hide from iowait.
    let held = obs.held.severity(IOWAIT, "");
    let psi_some = obs.pressure.io.map(|p| p.some.avg10);
    let kept = held.and_then(|h| {
        [Severity::Critical, Severity::Warning, Severity::Info]
            .into_iter()
            .filter(|s| *s <= h)
            .find(|s| wa > th.hold.iowait_share * limit_of(*s))
            .or(psi_some
                .is_some_and(|p| p >= th.hold.psi_io_some_percent)
                .then_some(Severity::Info))
    });
    let severity = raised.max(kept)?;
    let limit = limit_of(severity);
    let (max_cpu, max_wa) = obs
        .per_cpu
        .iter()
        .map(|(n, p)| (*n, p.iowait))
        // The highest share; among equals the lowest CPU number, as `top` lists them.
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .unwrap_or((0, wa));
    let hot: Vec<String> = obs
        .per_cpu
        .iter()
        .filter(|(_, p)| p.iowait > th.iowait_warning_percent)
        .map(|(n, p)| format!("cpu{n} {:.1}%", p.iowait))
        .collect();
    let busiest = obs
        .disks
        .iter()
        .max_by(|a, b| a.busy_percent.total_cmp(&b.busy_percent));
    let mut d = Draft::new(IOWAIT, severity)
        .when_if("held", raised < Some(severity))
        .when_if("held_by_io_pressure", wa <= th.hold.iowait_share * limit)
        .evidence_opt("psi_io_some_avg10_percent", psi_some)
        .var("hold_percent", th.hold.iowait_share * limit)
        .var("hold_psi_some_percent", th.hold.psi_io_some_percent)
        .evidence("iowait_percent", wa)
        .evidence("threshold_percent", limit)
        .evidence("max_cpu_iowait_percent", max_wa)
        .evidence("max_iowait_cpu", max_cpu)
        .evidence("cpus_above_warning", hot.join(", "))
        .evidence("window_seconds", obs.elapsed_seconds)
        .evidence_opt("previous_iowait_percent", obs.previous_iowait_percent);
    if let Some(disk) = busiest {
        d = d
            .evidence("busiest_disk", disk.name.as_str())
            .evidence("busiest_disk_busy_percent", disk.busy_percent);
        if let Some(dm) = &disk.dm_name {
            d = d.var("busiest_disk_dm_name", dm.as_str());
        }
    }
    if let Some(c) = io.first() {
        d = culprit_evidence(d, "top_io", c, true)
            .evidence("io_wait_method", obs.io_wait_method.as_str());
    }
    Some(d)
}

/// `load.host_process`: a process outside Kubernetes among the material top consumers while
/// the node is under load (the handbook's "other cause": a service such as a database
/// installed on the node and not managed by Kubernetes).
fn host_processes(
    (io, held_io): (&[&Culprit], &[&Culprit]),
    (cpu, held_cpu): (&[&Culprit], &[&Culprit]),
    pressing: &[(String, Severity)],
    method: IoWaitMethod,
    th: &Thresholds,
) -> Vec<Draft> {
    let worst = |ids: &[&str]| {
        pressing
            .iter()
            .filter(|(id, _)| ids.contains(&id.as_str()))
            .map(|(_, s)| *s)
            .max()
    };
    let io_sev = worst(&[IO_BOUND, IOWAIT, HIGH_LOAD]);
    let cpu_sev = worst(&[CPU_BOUND, HIGH_LOAD]);
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    // The material culprits the text names, then those named last window that are still
    // candidates at the hold floors (the dead band; `seen` keeps each name once).
    let io = io
        .iter()
        .take(NAMED_IN_TEXT)
        .chain(held_io)
        .map(|c| (c, "io", io_sev));
    let cpu = cpu
        .iter()
        .take(NAMED_IN_TEXT)
        .chain(held_cpu)
        .map(|c| (c, "cpu", cpu_sev));
    for (c, resource, sev) in io.chain(cpu) {
        let Some(sev) = sev else { continue };
        let Origin::Host {
            cgroup,
            infrastructure: false,
        } = &c.origin
        else {
            continue;
        };
        if seen.contains(&c.comm.as_str()) {
            continue;
        }
        seen.push(&c.comm);
        out.push(
            Draft::new(HOST_PROCESS, sev.min(Severity::Warning))
                .subject(c.comm.as_str())
                .evidence("pid", c.pid)
                .evidence("comm", c.comm.as_str())
                .evidence("cgroup", cgroup.as_str())
                .evidence("resource", resource)
                .evidence("cpu_percent", c.cpu_percent)
                .evidence("read_bytes_per_second", c.read_bytes_per_second)
                .evidence("write_bytes_per_second", c.write_bytes_per_second)
                .var("io_bytes_per_second", c.io_bytes_per_second())
                .when_if("io_consumer", resource == "io")
                .when_if(
                    "waits_delayacct",
                    resource == "io"
                        && matches!(
                            method,
                            IoWaitMethod::DelayAcct | IoWaitMethod::DelayAcctAndSampling
                        )
                        && c.io_wait_percent >= th.culprit_min_io_wait_percent,
                )
                .when_if(
                    "waits_sampled",
                    resource == "io"
                        && method == IoWaitMethod::DStateSampling
                        && c.io_wait_percent >= th.culprit_min_io_wait_percent,
                )
                .evidence_opt(
                    "io_wait_percent",
                    (resource == "io").then_some(c.io_wait_percent),
                )
                .evidence_opt(
                    "io_wait_method",
                    (resource == "io").then_some(method.as_str()),
                ),
        );
    }
    out
}

/// The metrics of a sample: levels always, rates and shares once there is a window.
pub fn metrics(s: &Sample) -> Vec<Metric> {
    let mut m = level_metrics(s);
    if let Some(obs) = &s.window {
        m.extend(window_metrics(obs));
    }
    m
}

/// Metrics available from one sample (no window needed).
fn level_metrics(s: &Sample) -> Vec<Metric> {
    let load = &s.load;
    let mut m = vec![
        Metric::gauge(
            "node_doctor_load_load1",
            "1-minute load average.",
            load.load1,
        ),
        Metric::gauge(
            "node_doctor_load_load5",
            "5-minute load average.",
            load.load5,
        ),
        Metric::gauge(
            "node_doctor_load_load15",
            "15-minute load average.",
            load.load15,
        ),
        Metric::gauge("node_doctor_load_cpus", "Online CPUs.", f64::from(s.cpus)),
        Metric::gauge(
            "node_doctor_load_procs_running",
            "Runnable tasks (procs_running of /proc/stat).",
            s.procs_running as f64,
        ),
        Metric::gauge(
            "node_doctor_load_procs_blocked",
            "Tasks in uninterruptible sleep, D state (procs_blocked of /proc/stat).",
            s.procs_blocked as f64,
        ),
        Metric::gauge(
            "node_doctor_load_process_detail",
            "1 when this run read per-process detail (a whole-node signal reached its escalation bar), 0 when it read no process file.",
            if s.process_detail.is_some() { 1.0 } else { 0.0 },
        ),
    ];
    let psi = &s.pressures;
    for (res, p) in [("cpu", psi.cpu), ("io", psi.io), ("memory", psi.memory)] {
        let Some(p) = p else { continue };
        let lines = std::iter::once(("some", p.some)).chain(p.full.map(|f| ("full", f)));
        for (kind, l) in lines {
            m.push(
                Metric::gauge(
                    "node_doctor_load_pressure_avg10_percent",
                    "PSI share of the last 10 s tasks stalled on the resource.",
                    l.avg10,
                )
                .label("resource", res)
                .label("kind", kind),
            );
            m.push(
                Metric::gauge(
                    "node_doctor_load_pressure_avg60_percent",
                    "PSI share of the last 60 s tasks stalled on the resource.",
                    l.avg60,
                )
                .label("resource", res)
                .label("kind", kind),
            );
        }
    }
    m
}

/// Metrics that need a window (rates and shares).
fn window_metrics(obs: &Observation) -> Vec<Metric> {
    let mut m = Vec::new();
    for (mode, v) in obs.cpu.modes() {
        m.push(
            Metric::gauge(
                "node_doctor_load_cpu_percent",
                "Share of all CPU time per mode over the last window.",
                v,
            )
            .label("mode", mode),
        );
    }
    for d in &obs.disks {
        let g = |name: &str, help: &'static str, v: f64| {
            Metric::gauge(name, help, v).label("device", d.name.as_str())
        };
        m.push(g(
            "node_doctor_load_disk_busy_percent",
            "Share of the window the disk had IO in flight (iostat %util).",
            d.busy_percent,
        ));
        m.push(g(
            "node_doctor_load_disk_await_ms",
            "Average IO request time including queueing (iostat await).",
            d.await_ms,
        ));
        m.push(g(
            "node_doctor_load_disk_queue_size",
            "Average IO requests in flight (iostat aqu-sz).",
            d.queue_size,
        ));
        m.push(g(
            "node_doctor_load_disk_reads_per_second",
            "Completed reads per second.",
            d.reads_per_second,
        ));
        m.push(g(
            "node_doctor_load_disk_writes_per_second",
            "Completed writes per second.",
            d.writes_per_second,
        ));
    }
    m
}

#[cfg(test)]
mod tests;
