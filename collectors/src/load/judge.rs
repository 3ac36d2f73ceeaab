//! The rules of the `load` collector: a judged [`Observation`] -> drafts, and metrics.
//!
//! Everything here is pure: no files, no clock. The judge decides which findings a window
//! raises, their severity, subject and evidence, and the conditions that pick the advice; the
//! words (the handbook's high-load section, in our own words) are in
//! `collectors/rules/load.toml`.

use super::escalation::Reason;
use super::observation::{Culprit, IoWaitMethod, Observation, Origin, Pressures};
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::metric::Metric;
use crate::proc::loadavg::Loadavg;
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

/// One run's reading: the levels every sample has and, from the second run on, the window
/// between this sample and the previous one (what the rules judge).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub load: Loadavg,
    /// Online CPUs.
    pub cpus: u32,
    /// `procs_running` of `/proc/stat` (or loadavg's runnable count).
    pub procs_running: u64,
    /// `procs_blocked` of `/proc/stat`.
    pub procs_blocked: u64,
    pub pressures: Pressures,
    /// Why this run read per-process detail (`None`: every whole-node signal was under its
    /// bar, no process file was read).
    pub process_detail: Option<Reason>,
    /// `None` on the first run, or when no time passed since the previous one.
    pub window: Option<Observation>,
}

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
    out.extend(host_processes(&io, &cpu, &pressing, obs.io_wait_method, th));
    out
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
    let waits = |c: &Culprit| {
        obs.io_wait_method != IoWaitMethod::BytesOnly
            && c.io_wait_percent >= th.culprit_min_io_wait_percent
            && share(c.io_wait_percent, obs.total_io_wait_percent) >= th.culprit_min_share_percent
    };
    let moves = |c: &Culprit| {
        c.io_bytes_per_second() >= th.culprit_min_io_bytes_per_second
            && share(c.io_bytes_per_second(), obs.total_io_bytes_per_second)
                >= th.culprit_min_share_percent
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
    obs.top_cpu
        .iter()
        .filter(|c| {
            c.cpu_percent >= th.culprit_min_cpu_percent
                && share(c.cpu_percent, obs.total_cpu_percent) >= th.culprit_min_share_percent
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
    let cpus = f64::from(obs.cpus.max(1));
    let psi_full = obs.pressure.io.and_then(|p| p.full).map(|l| l.avg10);
    let blocked_limit = (cpus * th.blocked_per_cpu).max(1.0);
    let blocked_sustained = obs.procs_blocked as f64 >= blocked_limit
        && obs
            .previous_procs_blocked
            .is_some_and(|b| b as f64 >= blocked_limit);
    let load_per_cpu = obs.load.load1 / cpus;
    let escalate =
        obs.cpu.iowait >= th.iowait_critical_percent || load_per_cpu >= th.load_critical_per_cpu;
    let severity = if escalate {
        Severity::Critical
    } else {
        Severity::Warning
    };

    let mut out = Vec::new();
    let busy: Vec<_> = obs
        .disks
        .iter()
        .filter(|d| d.busy_percent >= th.disk_busy_percent)
        .collect();
    for disk in &busy {
        let d = Draft::new(IO_BOUND, severity)
            .subject(disk.name.as_str())
            .when("disk_saturated")
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
    if busy.is_empty() && (psi_high || blocked_sustained) {
        let d = Draft::new(IO_BOUND, severity)
            .when("tasks_stalled")
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
    let (severity, limit) = if wa > th.iowait_critical_percent {
        (Severity::Critical, th.iowait_critical_percent)
    } else if wa > th.iowait_warning_percent {
        (Severity::Warning, th.iowait_warning_percent)
    } else if wa > th.iowait_info_percent
        && !obs
            .previous_iowait_percent
            .is_some_and(|p| p <= th.iowait_info_percent)
    {
        (Severity::Info, th.iowait_info_percent)
    } else {
        return None;
    };
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
    io: &[&Culprit],
    cpu: &[&Culprit],
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
    let io = io.iter().take(NAMED_IN_TEXT).map(|c| (c, "io", io_sev));
    let cpu = cpu.iter().take(NAMED_IN_TEXT).map(|c| (c, "cpu", cpu_sev));
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
mod tests {
    use super::*;
    use crate::finding::Finding;
    use crate::load::{CpuPercent, DiskRates};
    use crate::proc::cgroup::QosClass;
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
            f.summary
                .en
                .ends_with("is 3.0× the CPU count, at or above the 2× limit; runnable tasks compete for the CPUs."),
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
            io.summary.en.contains(
                " and all non-idle tasks stalled on IO 48.5% of the last 10 s (limit 20%): "
            ),
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
            stalled
                .summary
                .zh
                .contains("按等待 IO 的时间排序（延迟统计，即 iotop 的 IO> 列），IO 最多的进程：fio（pid 804，"),
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
}
