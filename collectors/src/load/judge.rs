//! The rules of the `load` collector: a judged [`Observation`] -> findings, and metrics.
//! Remediation text lives beside each rule; all of it comes from the handbook section
//! 节点高负载排障处理 (002_af370464fa0f13dd.txt), in our own words.

use super::observation::{Culprit, Observation, Origin, Pressures};
use super::LoadConfig;
use crate::cmd;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::metric::Metric;
use crate::proc::loadavg::Loadavg;
use crate::proc::stat::Stat;
use crate::shell::Cmd;

/// The handbook section every rule here cites.
pub const SECTION: &str = "节点高负载排障处理";

/// Judges one window.
pub fn judge(obs: &Observation, cfg: &LoadConfig, node: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(high_load(obs, cfg, node));
    out.extend(io_bound(obs, cfg, node));
    out.extend(cpu_bound(obs, cfg, node));
    out.extend(iowait(obs, cfg));
    let pressing: Vec<(String, Severity)> =
        out.iter().map(|f| (f.id.clone(), f.severity)).collect();
    out.extend(host_processes(obs, cfg, &pressing));
    out
}

fn mib(bytes_per_second: f64) -> f64 {
    bytes_per_second / (1024.0 * 1024.0)
}

fn list_en(cs: &[Culprit], k: usize) -> String {
    cs.iter()
        .take(k)
        .map(Culprit::describe_en)
        .collect::<Vec<_>>()
        .join("; ")
}

fn list_zh(cs: &[Culprit], k: usize) -> String {
    cs.iter()
        .take(k)
        .map(Culprit::describe_zh)
        .collect::<Vec<_>>()
        .join("；")
}

/// Adds `<prefix>_pid`, `_comm`, `_origin`, `_pod_uid` and the figures of a culprit.
fn culprit_evidence(mut f: Finding, prefix: &str, c: &Culprit) -> Finding {
    f = f
        .evidence(&format!("{prefix}_pid"), c.pid)
        .evidence(&format!("{prefix}_comm"), c.comm.as_str())
        .evidence(&format!("{prefix}_origin"), c.origin.kind())
        .evidence(&format!("{prefix}_cpu_percent"), c.cpu_percent)
        .evidence(
            &format!("{prefix}_read_bytes_per_second"),
            c.read_bytes_per_second,
        )
        .evidence(
            &format!("{prefix}_write_bytes_per_second"),
            c.write_bytes_per_second,
        );
    match &c.origin {
        Origin::Pod {
            uid,
            namespace,
            name,
            container_id,
            ..
        } => {
            f = f.evidence(&format!("{prefix}_pod_uid"), uid.as_str());
            if let (Some(ns), Some(n)) = (namespace, name) {
                f = f.evidence(&format!("{prefix}_pod"), format!("{ns}/{n}"));
            }
            if let Some(id) = container_id {
                f = f.evidence(&format!("{prefix}_container_id"), id.as_str());
            }
        }
        Origin::Host { cgroup, .. } => {
            f = f.evidence(&format!("{prefix}_cgroup"), cgroup.as_str());
        }
        _ => {}
    }
    f
}

/// Commands that tell the owner of a culprit: the pod, or the host service.
fn owner_commands(mut f: Finding, c: &Culprit) -> Finding {
    match &c.origin {
        Origin::Pod {
            uid,
            namespace: Some(ns),
            name: Some(n),
            ..
        } => {
            f = f.command(cmd!("kubectl -n {ns} describe pod {pod}", ns = ns, pod = n));
            let _ = uid;
        }
        Origin::Pod { uid, .. } => {
            f = f.command(cmd!(
                "kubectl get pods -A -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep {uid}",
                uid = uid
            ));
        }
        Origin::Host { .. } => {
            f = f
                .command(cmd!("systemctl status {pid}", pid = c.pid))
                .command(cmd!("ps -o pid,user,etime,args -p {pid}", pid = c.pid));
        }
        _ => {}
    }
    f
}

/// `load.high_load`: load1 per online CPU over the limit on the last two samples.
fn high_load(obs: &Observation, cfg: &LoadConfig, node: &str) -> Option<Finding> {
    let cpus = f64::from(obs.cpus.max(1));
    let prev = obs.previous_load1?;
    let sustained = obs.load.load1.min(prev);
    let per_cpu = sustained / cpus;
    let (severity, limit) = if per_cpu >= cfg.load_critical_per_cpu {
        (Severity::Critical, cfg.load_critical_per_cpu)
    } else if per_cpu >= cfg.load_warning_per_cpu {
        (Severity::Warning, cfg.load_warning_per_cpu)
    } else {
        return None;
    };
    let busy_disk = obs
        .disks
        .iter()
        .filter(|d| d.busy_percent >= cfg.disk_busy_percent)
        .max_by(|a, b| a.busy_percent.total_cmp(&b.busy_percent));
    let (cause, cause_en, cause_zh) = if busy_disk.is_some()
        || obs.cpu.iowait >= cfg.iowait_warning_percent
        || obs.procs_blocked as f64 >= cpus
    {
        (
            "io",
            "tasks waiting for storage (iowait, D-state tasks) drive the load".to_string(),
            "负载主要来自等待存储的任务（iowait、D 状态）".to_string(),
        )
    } else if obs.cpu.busy() >= 50.0 {
        (
            "cpu",
            "runnable tasks compete for the CPUs".to_string(),
            "可运行任务在争抢 CPU".to_string(),
        )
    } else {
        (
            "mixed",
            "neither CPU nor disk is saturated over the window; look at blocked tasks and their wchan".to_string(),
            "窗口内 CPU 与磁盘均未饱和，请查看阻塞任务及其 wchan".to_string(),
        )
    };
    let mut f = Finding::new(
        "load.high_load",
        severity,
        Text::new("Load average is high for the number of CPUs", "节点负载相对 CPU 数过高"),
        Text::new(
            format!(
                "load1 {:.2} (previous sample {:.2}) on {} online CPUs is {:.1}× the CPU count, at or above the {:.0}× limit; {}.",
                obs.load.load1, prev, obs.cpus, per_cpu, limit, cause_en
            ),
            format!(
                "load1 为 {:.2}（上次采样 {:.2}），在线 CPU {} 个，为 CPU 数的 {:.1} 倍，达到 {:.0} 倍阈值；{}。",
                obs.load.load1, prev, obs.cpus, per_cpu, limit, cause_zh
            ),
        ),
    )
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
    .evidence("cause", cause);
    if let Some(d) = busy_disk {
        f = f
            .evidence("busiest_disk", d.name.as_str())
            .evidence("busiest_disk_busy_percent", d.busy_percent);
    }
    let top = if cause == "io" {
        &obs.top_io
    } else {
        &obs.top_cpu
    };
    if let Some(c) = top.first() {
        f = culprit_evidence(f, "top", c);
    }
    f.step(Text::new(
        "Tell CPU load from IO load: in `top` compare us/sy with id and wa (press 1 for each CPU). Low us with high id and a high load means tasks wait for the disk.",
        "先区分是 CPU 还是 IO 造成的负载：在 `top` 中对比 us/sy 与 id、wa（按 1 查看每个核）。us 低、id 高而负载高，说明任务在等磁盘。",
    ))
    .step(Text::new(
        "Find who is behind it: `atop` then `d` for per-process disk use, `iotop -oPa` for accumulated IO per process; for CPU, the %CPU column of `top`.",
        "找出背后的进程：`atop` 后按 `d` 查看各进程磁盘使用，`iotop -oPa` 查看各进程累计 IO；CPU 则看 `top` 的 %CPU 列。",
    ))
    .step(Text::new(
        format!("Relieve the node: move or limit the heaviest workload (cordon {node} so no new pods land, then reschedule), and take services not managed by Kubernetes off the node."),
        format!("为节点减负：迁移或限制最重的负载（先 cordon {node} 避免新 Pod 调度上来，再迁移），并把不受 Kubernetes 管理的服务移出该节点。"),
    ))
    .command("top")
    .command("atop")
    .command("iotop -oPa")
    .command(cmd!("kubectl cordon {node}", node = node))
    .source(HANDBOOK, SECTION)
    .into()
}

/// `load.io_bound`: a saturated disk (one finding per disk), or PSI io / D-state tasks high
/// without one.
fn io_bound(obs: &Observation, cfg: &LoadConfig, node: &str) -> Vec<Finding> {
    let cpus = f64::from(obs.cpus.max(1));
    let psi_full = obs.pressure.io.and_then(|p| p.full).map(|l| l.avg10);
    let blocked_limit = (cpus * cfg.blocked_per_cpu).max(1.0);
    let blocked_sustained = obs.procs_blocked as f64 >= blocked_limit
        && obs
            .previous_procs_blocked
            .is_some_and(|b| b as f64 >= blocked_limit);
    let load_per_cpu = obs.load.load1 / cpus;
    let escalate =
        obs.cpu.iowait >= cfg.iowait_critical_percent || load_per_cpu >= cfg.load_critical_per_cpu;
    let top_en = if obs.top_io.is_empty() {
        "no process showed storage IO in /proc/<pid>/io (kernel writeback or another host?)"
            .to_string()
    } else {
        format!("top IO: {}", list_en(&obs.top_io, 3))
    };
    let top_zh = if obs.top_io.is_empty() {
        "/proc/<pid>/io 中没有进程产生存储 IO（可能是内核回写或其他主机）".to_string()
    } else {
        format!("IO 最多的进程：{}", list_zh(&obs.top_io, 3))
    };

    let mut out = Vec::new();
    let busy: Vec<_> = obs
        .disks
        .iter()
        .filter(|d| d.busy_percent >= cfg.disk_busy_percent)
        .collect();
    for d in &busy {
        let severity = if escalate {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let mut f = Finding::new(
            "load.io_bound",
            severity,
            Text::new("A disk is saturated: IO is the bottleneck", "磁盘 IO 已饱和，成为瓶颈"),
            Text::new(
                format!(
                    "Disk {} was busy {:.0}% of the last {:.1} s (limit {:.0}%): {:.0} r/s, {:.0} w/s, {:.2} MiB/s written, await {:.2} ms, queue {:.2}; iowait {:.1}%, load1 {:.2} on {} CPUs; {}.",
                    d.label(), d.busy_percent, obs.elapsed_seconds, cfg.disk_busy_percent,
                    d.reads_per_second, d.writes_per_second, mib(d.write_bytes_per_second),
                    d.await_ms, d.queue_size, obs.cpu.iowait, obs.load.load1, obs.cpus, top_en
                ),
                format!(
                    "磁盘 {} 在最近 {:.1} 秒内 {:.0}% 的时间处于忙碌（阈值 {:.0}%）：读 {:.0} 次/秒，写 {:.0} 次/秒，写入 {:.2} MiB/s，await {:.2} ms，队列 {:.2}；iowait {:.1}%，load1 {:.2}（{} 个 CPU）；{}。",
                    d.label(), obs.elapsed_seconds, d.busy_percent, cfg.disk_busy_percent,
                    d.reads_per_second, d.writes_per_second, mib(d.write_bytes_per_second),
                    d.await_ms, d.queue_size, obs.cpu.iowait, obs.load.load1, obs.cpus, top_zh
                ),
            ),
        )
        .subject(d.name.as_str())
        .evidence("device", d.name.as_str())
        .evidence("busy_percent", d.busy_percent)
        .evidence("threshold_busy_percent", cfg.disk_busy_percent)
        .evidence("reads_per_second", d.reads_per_second)
        .evidence("writes_per_second", d.writes_per_second)
        .evidence("read_bytes_per_second", d.read_bytes_per_second)
        .evidence("write_bytes_per_second", d.write_bytes_per_second)
        .evidence("await_ms", d.await_ms)
        .evidence("service_ms", d.service_ms)
        .evidence("queue_size", d.queue_size)
        .evidence("cpu_iowait_percent", obs.cpu.iowait)
        .evidence("procs_blocked", obs.procs_blocked)
        .evidence("load1", obs.load.load1)
        .evidence("cpus", obs.cpus)
        .evidence("window_seconds", obs.elapsed_seconds);
        if let Some(n) = &d.dm_name {
            f = f.evidence("dm_name", n.as_str());
        }
        if let Some(p) = psi_full {
            f = f.evidence("psi_io_full_avg10_percent", p);
        }
        f = io_culprits(f, obs);
        out.push(io_remediation(
            f,
            obs,
            cmd!("iostat -dx 2 5 /dev/{device}", device = &d.name),
            node,
        ));
    }
    if busy.is_empty() {
        let psi_high = psi_full.is_some_and(|p| p >= cfg.psi_io_full_percent);
        if psi_high || blocked_sustained {
            let severity = if escalate {
                Severity::Critical
            } else {
                Severity::Warning
            };
            let mut f = Finding::new(
                "load.io_bound",
                severity,
                Text::new("Tasks are stalled on IO", "任务因 IO 而停滞"),
                Text::new(
                    format!(
                        "No local disk is ≥{:.0}% busy, yet {} tasks are in D state (limit {:.0}) and all non-idle tasks stalled on IO {:.1}% of the last 10 s (limit {:.0}%): slow or remote storage (NFS, cloud disk throttling) holds them; {}.",
                        cfg.disk_busy_percent, obs.procs_blocked, blocked_limit, psi_full.unwrap_or(0.0), cfg.psi_io_full_percent, top_en
                    ),
                    format!(
                        "没有本地磁盘忙碌度达到 {:.0}%，但有 {} 个任务处于 D 状态（阈值 {:.0}），最近 10 秒内全部非空闲任务因 IO 停滞的时间占 {:.1}%（阈值 {:.0}%）：慢速或远端存储（NFS、云盘限速）拖住了它们；{}。",
                        cfg.disk_busy_percent, obs.procs_blocked, blocked_limit, psi_full.unwrap_or(0.0), cfg.psi_io_full_percent, top_zh
                    ),
                ),
            )
            .evidence("procs_blocked", obs.procs_blocked)
            .evidence("threshold_blocked", blocked_limit)
            .evidence("cpu_iowait_percent", obs.cpu.iowait)
            .evidence("load1", obs.load.load1)
            .evidence("cpus", obs.cpus);
            if let Some(p) = psi_full {
                f = f.evidence("psi_io_full_avg10_percent", p);
            }
            f = io_culprits(f, obs);
            out.push(io_remediation(f, obs, Cmd::fixed("iostat -dx 2 5"), node));
        }
    }
    out
}

fn io_culprits(mut f: Finding, obs: &Observation) -> Finding {
    if let Some(c) = obs.top_io.first() {
        f = culprit_evidence(f, "top_io", c);
    }
    if !obs.top_io.is_empty() {
        f = f.evidence("top_io_processes", list_en(&obs.top_io, 5));
        let outside: Vec<&Culprit> = obs
            .top_io
            .iter()
            .filter(|c| c.origin.is_outside_kubernetes())
            .collect();
        f = f.evidence(
            "top_io_outside_kubernetes",
            outside
                .iter()
                .map(|c| c.comm.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    if !obs.blocked.is_empty() {
        f = f.evidence(
            "blocked_tasks",
            obs.blocked
                .iter()
                .take(10)
                .map(|c| match &c.wchan {
                    Some(w) => format!("{}({}) in {w}", c.comm, c.tid.unwrap_or(c.pid)),
                    None => format!("{}({})", c.comm, c.tid.unwrap_or(c.pid)),
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    f
}

fn io_remediation(mut f: Finding, obs: &Observation, iostat: Cmd, node: &str) -> Finding {
    f = f
        .step(Text::new(
            "Confirm the disk is the limit: `top` then `1` shows wa for each CPU (it should sit near 0%); `atop` then `d` shows the disk's busy share and which processes use it; `iotop -oPa` adds up IO per process since it started.",
            "确认瓶颈在磁盘：`top` 后按 `1` 查看每个核的 wa（正常应接近 0%）；`atop` 后按 `d` 查看磁盘忙碌度以及使用磁盘的进程；`iotop -oPa` 按进程累计启动以来的 IO。",
        ))
        .step(Text::new(
            "If the heaviest writer runs in a pod, give it storage of its own (a dedicated volume or a faster disk type) or reschedule it to a node with spare IO; if it is a service installed on the node outside Kubernetes (a database, for example), move it off the Kubernetes node.",
            "若写入最多的进程在 Pod 中，为其提供独立存储（单独的数据盘或更高性能的云盘）或迁移到 IO 富余的节点；若是节点上安装的、不受 Kubernetes 管理的服务（例如数据库），请将其迁出该节点。",
        ))
        .step(Text::new(
            "If the load is legitimate and lasting, upgrade the disk (higher IOPS/throughput class) rather than letting health checks and network calls time out.",
            "若负载合理且长期存在，应升级磁盘规格（更高 IOPS/吞吐），避免健康检查和网络请求超时。",
        ))
        .command("top")
        .command("atop")
        .command("iotop -oPa")
        .command(iostat);
    if let Some(c) = obs.top_io.first() {
        f = f.command(cmd!("cat /proc/{pid}/io", pid = c.pid));
        f = owner_commands(f, c);
    }
    f.command(cmd!("kubectl cordon {node}", node = node))
        .source(HANDBOOK, SECTION)
}

/// `load.cpu_bound`: CPUs busy running code most of the window while the run queue holds at
/// least one task per CPU (saturated: load is what the handbook's rule explains). Busy CPUs
/// with a short queue are a well-used node, not a problem.
fn cpu_bound(obs: &Observation, cfg: &LoadConfig, node: &str) -> Option<Finding> {
    let busy = obs.cpu.busy();
    let cpus = f64::from(obs.cpus.max(1));
    if busy < cfg.cpu_busy_percent || obs.load.load1 < cpus {
        return None;
    }
    let severity = if obs.load.load1 / cpus >= cfg.load_critical_per_cpu {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let top_en = if obs.top_cpu.is_empty() {
        "no single process stands out".to_string()
    } else {
        format!(
            "top CPU: {}",
            obs.top_cpu
                .iter()
                .take(3)
                .map(|c| format!("{} {:.0}%", c.describe_en(), c.cpu_percent))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    let top_zh = if obs.top_cpu.is_empty() {
        "没有明显突出的进程".to_string()
    } else {
        format!(
            "CPU 占用最多：{}",
            obs.top_cpu
                .iter()
                .take(3)
                .map(|c| format!("{} {:.0}%", c.describe_zh(), c.cpu_percent))
                .collect::<Vec<_>>()
                .join("；")
        )
    };
    let mut f = Finding::new(
        "load.cpu_bound",
        severity,
        Text::new("The CPUs are saturated", "CPU 已跑满"),
        Text::new(
            format!(
                "CPUs spent {:.1}% of the last {:.1} s running code (us {:.1}%, sy {:.1}%; limit {:.0}%), load1 {:.2} on {} CPUs; {}.",
                busy, obs.elapsed_seconds, obs.cpu.user, obs.cpu.system, cfg.cpu_busy_percent, obs.load.load1, obs.cpus, top_en
            ),
            format!(
                "最近 {:.1} 秒内 CPU 有 {:.1}% 的时间在执行代码（us {:.1}%，sy {:.1}%；阈值 {:.0}%），load1 {:.2}（{} 个 CPU）；{}。",
                obs.elapsed_seconds, busy, obs.cpu.user, obs.cpu.system, cfg.cpu_busy_percent, obs.load.load1, obs.cpus, top_zh
            ),
        ),
    )
    .evidence("cpu_busy_percent", busy)
    .evidence("threshold_busy_percent", cfg.cpu_busy_percent)
    .evidence("cpu_user_percent", obs.cpu.user)
    .evidence("cpu_system_percent", obs.cpu.system)
    .evidence("cpu_steal_percent", obs.cpu.steal)
    .evidence("load1", obs.load.load1)
    .evidence("cpus", obs.cpus)
    .evidence("window_seconds", obs.elapsed_seconds);
    if let Some(c) = obs.top_cpu.first() {
        f = culprit_evidence(f, "top_cpu", c);
        f = f.evidence(
            "top_cpu_processes",
            obs.top_cpu
                .iter()
                .take(5)
                .map(|c| format!("{} {:.0}%", c.describe_en(), c.cpu_percent))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    f = f
        .step(Text::new(
            "Confirm in `top` (press 1 for each CPU) that us/sy dominate and see which processes lead the %CPU column.",
            "在 `top` 中（按 1 查看每个核）确认 us/sy 占主导，并查看 %CPU 列排在前面的进程。",
        ))
        .step(Text::new(
            "For a pod, check its CPU limits and requests and scale it out or move it to a less loaded node; for a service outside Kubernetes on the node, move it off or cap it, since the scheduler cannot see it.",
            "若是 Pod，检查其 CPU limits/requests，扩容或迁移到负载较低的节点；若是节点上不受 Kubernetes 管理的服务，由于调度器看不到它，应将其迁出或限制其用量。",
        ))
        .command("top")
        .command("atop");
    if let Some(c) = obs.top_cpu.first() {
        f = f.command(cmd!("top -p {pid}", pid = c.pid));
        f = owner_commands(f, c);
    }
    Some(
        f.command(cmd!("kubectl describe node {node}", node = node))
            .source(HANDBOOK, SECTION),
    )
}

/// `load.iowait`: share of CPU time idle while IO is outstanding.
fn iowait(obs: &Observation, cfg: &LoadConfig) -> Option<Finding> {
    let wa = obs.cpu.iowait;
    let (severity, limit) = if wa > cfg.iowait_critical_percent {
        (Severity::Critical, cfg.iowait_critical_percent)
    } else if wa > cfg.iowait_warning_percent {
        (Severity::Warning, cfg.iowait_warning_percent)
    } else if wa > cfg.iowait_info_percent
        && !obs
            .previous_iowait_percent
            .is_some_and(|p| p <= cfg.iowait_info_percent)
    {
        (Severity::Info, cfg.iowait_info_percent)
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
        .filter(|(_, p)| p.iowait > cfg.iowait_warning_percent)
        .map(|(n, p)| format!("cpu{n} {:.1}%", p.iowait))
        .collect();
    let busiest = obs
        .disks
        .iter()
        .max_by(|a, b| a.busy_percent.total_cmp(&b.busy_percent));
    let disk_en = busiest
        .map(|d| {
            format!(
                "; busiest disk {} at {:.0}% busy",
                d.label(),
                d.busy_percent
            )
        })
        .unwrap_or_default();
    let disk_zh = busiest
        .map(|d| format!("；最忙的磁盘 {} 忙碌度 {:.0}%", d.label(), d.busy_percent))
        .unwrap_or_default();
    let mut f = Finding::new(
        "load.iowait",
        severity,
        Text::new("CPUs are waiting for IO", "CPU 在等待 IO"),
        Text::new(
            format!(
                "iowait was {wa:.1}% over the last {:.1} s (above {limit:.0}%; it normally sits at 0%, and staying above 1% means storage cannot keep up), highest on cpu{max_cpu} at {max_wa:.1}%{disk_en}.",
                obs.elapsed_seconds
            ),
            format!(
                "最近 {:.1} 秒 iowait 为 {wa:.1}%（超过 {limit:.0}%；正常应为 0%，持续高于 1% 说明存储跟不上 CPU），最高的是 cpu{max_cpu}，为 {max_wa:.1}%{disk_zh}。",
                obs.elapsed_seconds
            ),
        ),
    )
    .evidence("iowait_percent", wa)
    .evidence("threshold_percent", limit)
    .evidence("max_cpu_iowait_percent", max_wa)
    .evidence("max_iowait_cpu", max_cpu)
    .evidence("cpus_above_warning", hot.join(", "))
    .evidence("window_seconds", obs.elapsed_seconds);
    if let Some(p) = obs.previous_iowait_percent {
        f = f.evidence("previous_iowait_percent", p);
    }
    if let Some(d) = busiest {
        f = f
            .evidence("busiest_disk", d.name.as_str())
            .evidence("busiest_disk_busy_percent", d.busy_percent);
    }
    if let Some(c) = obs.top_io.first() {
        f = culprit_evidence(f, "top_io", c);
    }
    let mut f = f
        .step(Text::new(
            "Watch wa per CPU with `top` then `1`: a few CPUs far above the rest point at a few IO-heavy threads.",
            "用 `top` 后按 `1` 观察每个核的 wa：个别核明显偏高，说明少数线程在做大量 IO。",
        ))
        .step(Text::new(
            "Find the disk and the processes: `atop` then `d`, and `iotop -oPa`; then relieve that disk (move the writer, give it its own volume, or use a faster disk).",
            "找出对应的磁盘和进程：`atop` 后按 `d`，以及 `iotop -oPa`；然后为该磁盘减负（迁移写入方、使用独立数据盘或更快的磁盘）。",
        ))
        .command("top")
        .command("atop")
        .command("iotop -oPa");
    if let Some(d) = busiest {
        f = f.command(cmd!("iostat -dx 2 5 /dev/{device}", device = &d.name));
    }
    Some(f.source(HANDBOOK, SECTION))
}

/// `load.host_process`: a process outside Kubernetes among the top consumers while the node
/// is under load (the handbook's "other cause": a service such as a database installed on the
/// node and not managed by Kubernetes).
fn host_processes(
    obs: &Observation,
    cfg: &LoadConfig,
    pressing: &[(String, Severity)],
) -> Vec<Finding> {
    let worst = |ids: &[&str]| {
        pressing
            .iter()
            .filter(|(id, _)| ids.contains(&id.as_str()))
            .map(|(_, s)| *s)
            .max()
    };
    let io_sev = worst(&["load.io_bound", "load.iowait", "load.high_load"]);
    let cpu_sev = worst(&["load.cpu_bound", "load.high_load"]);
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let k = cfg.top_processes.min(3);
    let io = obs.top_io.iter().take(k).map(|c| (c, "io", io_sev));
    let cpu = obs.top_cpu.iter().take(k).map(|c| (c, "cpu", cpu_sev));
    for (c, what, sev) in io.chain(cpu) {
        let Some(sev) = sev else { continue };
        if !c.origin.is_outside_kubernetes() || seen.contains(&c.comm) {
            continue;
        }
        seen.push(c.comm.clone());
        let severity = sev.min(Severity::Warning);
        let (fig_en, fig_zh) = if what == "io" {
            (
                format!("{:.2} MiB/s read+written", mib(c.io_bytes_per_second())),
                format!("读写 {:.2} MiB/s", mib(c.io_bytes_per_second())),
            )
        } else {
            (
                format!("{:.0}% of a CPU", c.cpu_percent),
                format!("占用 {:.0}% 个 CPU", c.cpu_percent),
            )
        };
        let cgroup = match &c.origin {
            Origin::Host { cgroup, .. } => cgroup.clone(),
            _ => String::new(),
        };
        let f = Finding::new(
            "load.host_process",
            severity,
            Text::new("A service outside Kubernetes is among the top consumers", "不受 Kubernetes 管理的服务是主要资源消耗者之一"),
            Text::new(
                format!(
                    "{} is among the top {} consumers ({fig_en}) while the node is loaded; it runs directly on the host, so the scheduler neither sees nor limits it.",
                    c.describe_en(), if what == "io" { "IO" } else { "CPU" }
                ),
                format!(
                    "节点负载高时，{}是 {} 消耗最多的进程之一（{fig_zh}）；它直接运行在宿主机上，调度器既看不到也无法限制它。",
                    c.describe_zh(), if what == "io" { "IO" } else { "CPU" }
                ),
            ),
        )
        .subject(c.comm.as_str())
        .evidence("pid", c.pid)
        .evidence("comm", c.comm.as_str())
        .evidence("cgroup", cgroup.as_str())
        .evidence("resource", what)
        .evidence("cpu_percent", c.cpu_percent)
        .evidence("read_bytes_per_second", c.read_bytes_per_second)
        .evidence("write_bytes_per_second", c.write_bytes_per_second)
        .step(Text::new(
            "Identify the service and who owns it: its systemd unit and command line.",
            "确认该服务及其负责人：查看它的 systemd 单元和命令行。",
        ))
        .step(Text::new(
            "Move it to a machine outside the cluster (or run it as a workload Kubernetes schedules, with requests and limits); until then, cap it with its unit's CPUQuota/IOWeight settings.",
            "将其迁移到集群外的机器（或改为由 Kubernetes 调度、设置了 requests/limits 的工作负载）；在此之前，可通过其 systemd 单元的 CPUQuota/IOWeight 限制用量。",
        ))
        .command(cmd!("systemctl status {pid}", pid = c.pid))
        .command(cmd!("ps -o pid,user,etime,args -p {pid}", pid = c.pid))
        .command(cmd!("cat /proc/{pid}/cgroup", pid = c.pid))
        .command(if what == "io" { Cmd::fixed("iotop -oPa") } else { cmd!("top -p {pid}", pid = c.pid) })
        .source(HANDBOOK, SECTION);
        out.push(f);
    }
    out
}

/// Metrics available from one sample (no window needed).
pub fn level_metrics(load: &Loadavg, cpus: u32, stat: &Stat, psi: &Pressures) -> Vec<Metric> {
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
        Metric::gauge("node_doctor_load_cpus", "Online CPUs.", f64::from(cpus)),
        Metric::gauge(
            "node_doctor_load_procs_running",
            "Runnable tasks (procs_running of /proc/stat).",
            stat.procs_running.unwrap_or(load.running) as f64,
        ),
        Metric::gauge(
            "node_doctor_load_procs_blocked",
            "Tasks in uninterruptible sleep, D state (procs_blocked of /proc/stat).",
            stat.procs_blocked.unwrap_or(0) as f64,
        ),
    ];
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
pub fn window_metrics(obs: &Observation) -> Vec<Metric> {
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
