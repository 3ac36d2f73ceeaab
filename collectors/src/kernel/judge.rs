//! The kernel rules: typed sample -> findings, each with its remediation (our words) and the
//! handbook section it comes from. Pure: testable without files.

use crate::cmd;
use crate::explain::see_also;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::kernel::fs_error::FsErrorKind;
use crate::kernel::oom::OomKind;
use crate::pods::PodNames;
use crate::proc::cgroup::QosClass;
use crate::shell::{Cmd, Words};

const SECTION_CRASHLOOP: &str = "Pod 处于 CrashLoopBackOff 状态";
const SECTION_CREATING: &str = "Pod 一直处于 ContainerCreating 或 Waiting 状态";
const SECTION_TERMINATING: &str = "Pod 一直处于 Terminating 状态";
const SECTION_HEALTH: &str = "Pod 健康检查失败";
const SECTION_DISK_FULL: &str = "节点磁盘爆满排障处理";
const SECTION_LOAD: &str = "节点高负载排障处理";

/// Processes of the container runtime and the kubelet (by comm prefix): a hang in one of them
/// stops pods from being created or deleted.
const RUNTIME_COMMS: &[&str] = &[
    "dockerd",
    "containerd",
    "docker",
    "kubelet",
    "runc",
    "crio",
    "conmon",
];

/// Thresholds of the kernel rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// A container OOM-killed this many times within the window is critical (it is crash
    /// looping), fewer times a warning.
    pub oom_cgroup_critical_kills: u64,
    /// Container or pod memory limits below this cannot run anything (4 MiB).
    pub tiny_limit_bytes: u64,
    /// A runtime or kubelet filesystem at least this full (percent) puts a hung task on the
    /// disk-full path.
    pub hung_disk_used_percent: f64,
    /// Listen-queue drops per interval that make a warning...
    pub listen_drops_min: u64,
    /// ...and the rate (per second) that makes it critical.
    pub listen_drops_critical_per_second: f64,
    /// Tasks as a share of `pid_max` / `threads-max` (percent): warning, critical.
    pub pids_warning_percent: f64,
    pub pids_critical_percent: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            oom_cgroup_critical_kills: 3,
            tiny_limit_bytes: 4 << 20,
            hung_disk_used_percent: 90.0,
            listen_drops_min: 1,
            listen_drops_critical_per_second: 10.0,
            pids_warning_percent: 80.0,
            pids_critical_percent: 95.0,
        }
    }
}

/// OOM kills of one pod (or one non-pod cgroup, or the node) within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct OomGroup {
    pub kind: OomKind,
    /// Namespace/name of the pod and name of the container, when the node's metadata has them.
    pub names: PodNames,
    pub pod_uid: Option<String>,
    pub qos: Option<QosClass>,
    pub container_id: Option<String>,
    /// The victim's memory cgroup as logged.
    pub task_memcg: Option<String>,
    /// The cgroup whose limit was hit (cgroup OOM).
    pub oom_memcg: Option<String>,
    pub kills: u64,
    pub last_pid: u32,
    pub last_comm: String,
    pub last_seen_seconds_ago: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
}

/// What the system-OOM rule compares: the node's memory and what pods may take of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMemory {
    pub mem_total_bytes: Option<u64>,
    /// Limit of the kubepods cgroup; `None` when absent or unlimited.
    pub kubepods_limit_bytes: Option<u64>,
    /// Host path of the file it came from.
    pub kubepods_limit_file: Option<String>,
}

/// A container or pod cgroup with a limit below the threshold (one pod, all its groups).
#[derive(Debug, Clone, PartialEq)]
pub struct TinyPod {
    /// Pod UID, or the cgroup path when it is not a pod cgroup.
    pub subject: String,
    /// Namespace/name of the pod, when the node's metadata has them.
    pub names: PodNames,
    pub pod_uid: Option<String>,
    /// (cgroup path, container id if any, limit in bytes, host path of the limit file).
    pub groups: Vec<(String, Option<String>, u64, String)>,
}

/// Hung-task reports of one task name within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct HungGroup {
    pub comm: String,
    pub last_pid: u32,
    pub reports: u64,
    pub max_blocked_seconds: u64,
    pub last_seen_seconds_ago: Option<u64>,
}

/// A runtime or kubelet directory and how full its filesystem is.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleFs {
    pub role: &'static str,
    pub host_path: String,
    pub used_percent: f64,
    pub avail_bytes: u64,
}

/// Filesystem errors of one device within the window, with where it is mounted.
#[derive(Debug, Clone, PartialEq)]
pub struct FsErrorGroup {
    pub device: String,
    pub kinds: Vec<FsErrorKind>,
    pub errors: u64,
    pub last_seen_seconds_ago: Option<u64>,
    pub mount_point: Option<String>,
    pub fstype: Option<String>,
    /// True when mountinfo shows the filesystem mounted read-only now.
    pub read_only_now: Option<bool>,
    /// Runtime/kubelet directories on this filesystem: (role, host path).
    pub roles: Vec<(&'static str, String)>,
}

/// Listen-queue counter increases between two samples of the host namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListenDelta {
    pub listen_drops: u64,
    pub listen_overflows: u64,
    pub backlog_drop: u64,
    pub interval_seconds: f64,
    pub somaxconn: Option<u64>,
    pub tcp_max_syn_backlog: Option<u64>,
}

impl ListenDelta {
    /// Drops of new connections: `ListenDrops` (which counts overflows too) plus backlog drops.
    pub fn total(&self) -> u64 {
        self.listen_drops
            .max(self.listen_overflows)
            .saturating_add(self.backlog_drop)
    }
}

/// Tasks against the kernel's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PidUsage {
    pub tasks: u64,
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
}

/// Everything the kernel rules look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelSample {
    pub oom: Vec<OomGroup>,
    pub node_memory: NodeMemory,
    pub tiny: Vec<TinyPod>,
    pub hung: Vec<HungGroup>,
    /// Tasks in D state now (`/proc/stat` `procs_blocked`).
    pub procs_blocked: Option<u64>,
    /// Runtime and kubelet filesystems (read only when a hung task needs them).
    pub role_fs: Vec<RoleFs>,
    pub fs_errors: Vec<FsErrorGroup>,
    pub listen: Option<ListenDelta>,
    pub pids: Option<PidUsage>,
    /// The window kernel-log events are kept in (seconds).
    pub window_seconds: u64,
}

/// Applies all kernel rules.
pub fn judge(s: &KernelSample, t: &Thresholds, node: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(oom_system(s));
    out.extend(
        s.oom
            .iter()
            .filter(|g| g.kind == OomKind::Cgroup)
            .map(|g| oom_cgroup(g, s.window_seconds, t)),
    );
    out.extend(s.tiny.iter().map(|p| tiny_limit(p, t)));
    out.extend(s.hung.iter().map(|h| hung_task(h, s, t)));
    out.extend(
        s.fs_errors
            .iter()
            .map(|e| fs_error(e, s.window_seconds, node)),
    );
    out.extend(s.listen.as_ref().and_then(|l| listen_drops(l, t)));
    out.extend(s.pids.as_ref().and_then(|p| pid_exhaustion(p, t)));
    out
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn ago(s: Option<u64>) -> String {
    s.map_or_else(|| "recently".to_string(), |v| format!("{v} s ago"))
}

fn ago_zh(s: Option<u64>) -> String {
    s.map_or_else(|| "最近".to_string(), |v| format!("{v} 秒前"))
}

/// A `kubectl` command that prints a pod's namespace/name (and memory limits) from its UID.
/// The pod with this UID and its memory limits. The jsonpath query is one quoted argument.
fn pod_by_uid(uid: &str) -> Cmd {
    let query = format!(
        "{{range .items[?(@.metadata.uid==\"{uid}\")]}}{{.metadata.namespace}}/{{.metadata.name}} limits={{.spec.containers[*].resources.limits.memory}}{{\"\\n\"}}{{end}}"
    );
    cmd!("kubectl get pods -A -o jsonpath={query}", query = query)
}

/// `kubectl describe` of a pod piped through `grep <grep_args>`: by namespace/name when the
/// node's metadata names the pod, else by looking its UID up first. `None` without a pod UID.
fn describe_pod(names: &PodNames, uid: Option<&str>, grep_args: &[&str]) -> Option<Cmd> {
    let grep_args: Words = grep_args.iter().collect();
    if let (Some(ns), Some(name)) = (&names.namespace, &names.name) {
        return Some(cmd!(
            "kubectl -n {ns} describe pod {pod} | grep {grep_args}",
            ns = ns,
            pod = name,
            grep_args = grep_args
        ));
    }
    let uid = uid?;
    let query = format!(
        "{{range .items[?(@.metadata.uid==\"{uid}\")]}}{{.metadata.namespace}} {{.metadata.name}}{{\"\\n\"}}{{end}}"
    );
    Some(cmd!(
        "kubectl get pods -A -o jsonpath={query} | while read -r ns name; do kubectl -n \"$ns\" describe pod \"$name\" | grep {grep_args}; done",
        query = query,
        grep_args = grep_args
    ))
}

/// `namespace/name` of a pod when known.
fn pod_name(names: &PodNames) -> Option<String> {
    Some(format!(
        "{}/{}",
        names.namespace.as_ref()?,
        names.name.as_ref()?
    ))
}

/// `kernel.oom_system`: the node ran out of memory and the kernel killed processes.
fn oom_system(s: &KernelSample) -> Option<Finding> {
    let mut groups: Vec<&OomGroup> = s.oom.iter().filter(|g| g.kind == OomKind::System).collect();
    // Most recent first (unknown ages last).
    groups.sort_by_key(|g| g.last_seen_seconds_ago.unwrap_or(u64::MAX));
    let kills: u64 = groups.iter().map(|g| g.kills).sum();
    if kills == 0 {
        return None;
    }
    let last = groups.first()?;
    let pod_kills: u64 = groups
        .iter()
        .filter(|g| g.pod_uid.is_some())
        .map(|g| g.kills)
        .sum();
    let victims: Vec<String> = groups
        .iter()
        .take(8)
        .map(|g| match &g.pod_uid {
            Some(uid) => format!("{}({}, pod {uid})", g.last_comm, g.last_pid),
            None => format!("{}({})", g.last_comm, g.last_pid),
        })
        .collect();
    let m = &s.node_memory;
    let (reserve_en, reserve_zh) = match (m.mem_total_bytes, m.kubepods_limit_bytes) {
        (Some(total), Some(pods)) => {
            let reserved = total.saturating_sub(pods);
            let pct = reserved as f64 * 100.0 / total.max(1) as f64;
            (
                format!(
                    "; pods may use {:.0} MiB of the node's {:.0} MiB, leaving {:.0} MiB ({pct:.1}%) for the system and Kubernetes daemons",
                    mib(pods), mib(total), mib(reserved)
                ),
                format!(
                    "；Pod 最多可用节点 {:.0} MiB 中的 {:.0} MiB，留给系统和 Kubernetes 组件的只有 {:.0} MiB（{pct:.1}%）",
                    mib(total), mib(pods), mib(reserved)
                ),
            )
        }
        (Some(_), None) => (
            "; the kubepods cgroup has no memory limit, so pods can take the memory the system needs".to_string(),
            "；kubepods cgroup 没有内存上限，Pod 可以占满系统进程所需的内存".to_string(),
        ),
        _ => (String::new(), String::new()),
    };
    let mut f = Finding::new(
        "kernel.oom_system",
        Severity::Critical,
        Text::new("The node ran out of memory (system OOM)", "节点发生系统 OOM"),
        Text::new(
            format!(
                "The kernel's OOM killer ran {kills} time(s) for the whole node in the last {} s, last killing {} (pid {}) {}{}{reserve_en}.",
                s.window_seconds,
                last.last_comm,
                last.last_pid,
                ago(last.last_seen_seconds_ago),
                if pod_kills > 0 { format!("; {pod_kills} of the victims ran in pods (exit code 137)") } else { String::new() },
            ),
            format!(
                "最近 {} 秒内节点整机内存耗尽 {kills} 次，内核 OOM killer 最后一次（{}）杀死了 {}（pid {}）{}{reserve_zh}。",
                s.window_seconds,
                ago_zh(last.last_seen_seconds_ago),
                last.last_comm,
                last.last_pid,
                if pod_kills > 0 { format!("；其中 {pod_kills} 个被杀进程属于 Pod（退出码 137）") } else { String::new() },
            ),
        ),
    )
    .evidence("kills", kills)
    .evidence("pod_victims", pod_kills)
    .evidence("last_pid", last.last_pid)
    .evidence("last_comm", last.last_comm.as_str())
    .evidence("victims", victims.join(", "))
    .evidence("window_seconds", s.window_seconds);
    if let Some(a) = last.last_seen_seconds_ago {
        f = f.evidence("last_seen_seconds_ago", a);
    }
    if let Some(t) = m.mem_total_bytes {
        f = f.evidence("mem_total_bytes", t);
    }
    if let Some(p) = m.kubepods_limit_bytes {
        f = f.evidence("kubepods_limit_bytes", p);
        if let Some(t) = m.mem_total_bytes {
            f = f.evidence("reserved_bytes", t.saturating_sub(p));
        }
    }
    let limit_file = m
        .kubepods_limit_file
        .clone()
        .unwrap_or_else(|| "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes".to_string());
    f.step(Text::new(
        "A system OOM means processes outside pod limits (kubelet, the runtime, sshd, agents, anything not managed by Kubernetes) needed more memory than the node kept back for them; the OOM killer then picks a victim anywhere, pods included.",
        "系统 OOM 说明不受 Pod limit 约束的进程（kubelet、容器运行时、sshd、各类 agent 等非 Kubernetes 管理的进程）用掉了比节点为其预留的更多的内存，OOM killer 会在整机范围内（包括 Pod）挑选进程杀掉。",
    ))
    .step(Text::new(
        "Compare the kubepods cgroup limit with the node's memory: the difference is what kube-reserved plus system-reserved (and the eviction threshold) leave for everything else. Find which non-pod processes use the most memory.",
        "对比 kubepods cgroup 的上限和节点总内存：二者之差就是 kube-reserved、system-reserved（及驱逐阈值）给其它进程留下的空间。找出占用内存最多的非 Pod 进程。",
    ))
    .step(Text::new(
        "Stop or limit the non-Kubernetes processes, or raise kubelet's --kube-reserved / --system-reserved (kubeReserved / systemReserved) so that pods are scheduled into less of the node's memory.",
        "停止或限制这些非 Kubernetes 进程，或调大 kubelet 的 --kube-reserved / --system-reserved（kubeReserved / systemReserved），让调度给 Pod 的内存更少一些。",
    ))
    .command("journalctl -k | grep -E 'Out of memory|oom-kill:'")
    .command(cmd!(
        "cat {limit_file}; grep MemTotal /proc/meminfo",
        limit_file = limit_file
    ))
    .command("ps -eo pid,rss,comm --sort=-rss | head -n 15")
    .command("ps -o args= -C kubelet | tr ' ' '\\n' | grep -E 'reserved|--config'")
    .source(HANDBOOK, SECTION_CRASHLOOP)
    .see_also(see_also::OOM_SYSTEM)
    .see_also(see_also::OOM_KILLED)
    .see_also(see_also::CRASH_LOOP)
    .into()
}

/// `kernel.oom_cgroup`: a container (or other memory cgroup) hit its memory limit.
fn oom_cgroup(g: &OomGroup, window: u64, t: &Thresholds) -> Finding {
    let severity = if g.kills >= t.oom_cgroup_critical_kills {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let subject = g
        .pod_uid
        .clone()
        .or_else(|| g.oom_memcg.clone())
        .or_else(|| g.task_memcg.clone())
        .unwrap_or_else(|| g.last_comm.clone());
    let pod_en = match (pod_name(&g.names), &g.pod_uid) {
        (Some(n), Some(uid)) => format!("{n} (uid {uid})"),
        (_, Some(uid)) => uid.clone(),
        (_, None) => String::new(),
    };
    let container = |c: &str| {
        g.names
            .container
            .clone()
            .unwrap_or_else(|| short(c).to_string())
    };
    let who_en = match (&g.pod_uid, &g.container_id) {
        (Some(_), Some(c)) => format!("container {} of pod {pod_en}", container(c)),
        (Some(_), None) => format!("pod {pod_en}"),
        _ => format!(
            "cgroup {}",
            g.oom_memcg
                .as_deref()
                .or(g.task_memcg.as_deref())
                .unwrap_or("(not logged)")
        ),
    };
    let who_zh = match (&g.pod_uid, &g.container_id) {
        (Some(_), Some(c)) => format!("Pod {pod_en} 的容器 {}", container(c)),
        (Some(_), None) => format!("Pod {pod_en}"),
        _ => format!(
            "cgroup {}",
            g.oom_memcg
                .as_deref()
                .or(g.task_memcg.as_deref())
                .unwrap_or("（日志未给出）")
        ),
    };
    let usage = match (g.usage_bytes, g.limit_bytes) {
        (Some(u), Some(l)) => (
            format!(" at {:.1} MiB used of a {:.1} MiB limit", mib(u), mib(l)),
            format!("，用量 {:.1} MiB / 上限 {:.1} MiB", mib(u), mib(l)),
        ),
        _ => (String::new(), String::new()),
    };
    let mut f = Finding::new(
        "kernel.oom_cgroup",
        severity,
        Text::new(
            "A container was OOM-killed at its memory limit",
            "容器因达到内存 limit 被 OOM kill",
        ),
        Text::new(
            format!(
                "The memory cgroup OOM killer killed {} (pid {}) of {who_en} {} time(s) in the last {window} s, last {}{}: its pod shows OOMKilled / exit code 137 ({} kills make this critical).",
                g.last_comm, g.last_pid, g.kills, ago(g.last_seen_seconds_ago), usage.0, t.oom_cgroup_critical_kills
            ),
            format!(
                "最近 {window} 秒内 {who_zh} 的进程 {}（pid {}）因达到内存上限被 cgroup OOM 杀死 {} 次，最后一次：{}{}。Pod 会显示 OOMKilled / 退出码 137（达到 {} 次为严重）。",
                g.last_comm, g.last_pid, g.kills, ago_zh(g.last_seen_seconds_ago), usage.1, t.oom_cgroup_critical_kills
            ),
        ),
    )
    .subject(subject)
    .evidence("kills", g.kills)
    .evidence("last_pid", g.last_pid)
    .evidence("last_comm", g.last_comm.as_str())
    .evidence("window_seconds", window);
    if let Some(a) = g.last_seen_seconds_ago {
        f = f.evidence("last_seen_seconds_ago", a);
    }
    if let Some(u) = &g.pod_uid {
        f = f.evidence("pod_uid", u.as_str());
    }
    if let Some(n) = pod_name(&g.names) {
        f = f.evidence("pod", n);
    }
    if let Some(c) = &g.names.container {
        f = f.evidence("container", c.as_str());
    }
    if let Some(q) = g.qos {
        f = f.evidence("qos_class", q.as_str());
    }
    if let Some(c) = &g.container_id {
        f = f.evidence("container_id", c.as_str());
    }
    if let Some(m) = &g.oom_memcg {
        f = f.evidence("oom_memcg", m.as_str());
    }
    if let Some(m) = &g.task_memcg {
        f = f.evidence("task_memcg", m.as_str());
    }
    if let Some(l) = g.limit_bytes {
        f = f.evidence("limit_bytes", l);
    }
    if let Some(u) = g.usage_bytes {
        f = f.evidence("usage_bytes", u);
    }
    f = f
        .step(Text::new(
            "The container used all the memory its limit allows and the kernel killed it inside its cgroup; the node itself is not short of memory. kubectl describe shows Last State: Terminated, Reason: OOMKilled, Exit Code: 137.",
            "容器用满了 limit 允许的内存，内核在其 cgroup 内把它杀掉；节点本身并不缺内存。kubectl describe 中可见 Last State 为 Terminated、Reason 为 OOMKilled、Exit Code 为 137。",
        ))
        .step(Text::new(
            "If the workload really needs more, raise resources.limits.memory (and requests); if its memory grows without bound, fix the leak. If the limit is only a few bytes or KiB, it was written with the unit m instead of Mi (see kernel.tiny_memory_limit).",
            "如果业务确实需要更多内存，调大 resources.limits.memory（及 requests）；如果内存无限增长，需修复内存泄漏。若 limit 只有几字节或几 KiB，说明单位误写成了 m 而不是 Mi（参见 kernel.tiny_memory_limit）。",
        ));
    if let Some(uid) = &g.pod_uid {
        f = f.command(pod_by_uid(uid));
    }
    f = f.command("journalctl -k | grep -E 'Memory cgroup out of memory|oom-kill:'");
    if let Some(c) = describe_pod(&g.names, g.pod_uid.as_deref(), &["-A5", "Last State"]) {
        f = f.command(c);
    }
    f.source(HANDBOOK, SECTION_CRASHLOOP)
        .see_also(see_also::OOM_CGROUP)
        .see_also(see_also::OOM_KILLED)
        .see_also(see_also::CRASH_LOOP)
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// `kernel.tiny_memory_limit`: a pod or container limit too small to start anything.
fn tiny_limit(p: &TinyPod, t: &Thresholds) -> Finding {
    let smallest = p.groups.iter().map(|g| g.2).min().unwrap_or(0);
    let containers: Vec<String> = p
        .groups
        .iter()
        .map(|(cg, cid, limit, _)| match cid {
            Some(c) => format!("{}={limit}B", short(c)),
            None => format!("{cg}={limit}B"),
        })
        .collect();
    let who_en = match (&p.pod_uid, pod_name(&p.names)) {
        (Some(uid), Some(n)) => format!("Pod {n} (uid {uid})"),
        (Some(uid), None) => format!("Pod {uid}"),
        (None, _) => format!("Cgroup {}", p.subject),
    };
    let who_zh = match (&p.pod_uid, pod_name(&p.names)) {
        (Some(uid), Some(n)) => format!("Pod {n}（uid {uid}）"),
        (Some(uid), None) => format!("Pod {uid}"),
        (None, _) => format!("cgroup {}", p.subject),
    };
    let mut f = Finding::new(
        "kernel.tiny_memory_limit",
        Severity::Critical,
        Text::new(
            "A memory limit is too small to run anything",
            "内存 limit 过小，容器无法运行",
        ),
        Text::new(
            format!(
                "{who_en} has a memory limit of {smallest} bytes ({}; below the {:.0} MiB threshold): its containers, the pause container first, are OOM-killed as soon as they start, typically because the limit was written as e.g. 1024m (milli-bytes) instead of 1024Mi.",
                containers.join(", "),
                mib(t.tiny_limit_bytes)
            ),
            format!(
                "{who_zh} 的内存上限只有 {smallest} 字节（{}；低于阈值 {:.0} MiB）：容器（首先是 pause 容器）一启动就会被 OOM kill，通常是把 limit 写成了 1024m（毫字节）而不是 1024Mi。",
                containers.join(", "),
                mib(t.tiny_limit_bytes)
            ),
        ),
    )
    .subject(p.subject.clone())
    .evidence("limit_bytes", smallest)
    .evidence("threshold_bytes", t.tiny_limit_bytes)
    .evidence("cgroups", containers.join(", "));
    if let Some(uid) = &p.pod_uid {
        f = f.evidence("pod_uid", uid.as_str());
    }
    if let Some(n) = pod_name(&p.names) {
        f = f.evidence("pod", n);
    }
    f = f
        .step(Text::new(
            "In Kubernetes quantities a lower-case m means one thousandth: 1024m of memory is about one byte. Write memory limits with Mi or Gi (or M / G).",
            "在 Kubernetes 的数量写法里，小写 m 表示千分之一：1024m 内存约等于 1 字节。内存 limit 应使用 Mi、Gi（或 M、G）作单位。",
        ))
        .step(Text::new(
            "Fix the limit in the workload's manifest (Deployment, StatefulSet, ...) and let the controller recreate the pod; the stuck pod cannot recover by itself.",
            "在工作负载（Deployment、StatefulSet 等）的清单中改正 limit，由控制器重建 Pod；卡住的 Pod 无法自行恢复。",
        ));
    if let Some(uid) = &p.pod_uid {
        f = f.command(pod_by_uid(uid));
    }
    if let Some(c) = describe_pod(&p.names, p.pod_uid.as_deref(), &["-B2", "-A3", "Limits"]) {
        f = f.command(c);
    }
    for (_, _, _, file) in p.groups.iter().take(4) {
        f = f.command(cmd!("cat {file}", file = file));
    }
    f.source(HANDBOOK, SECTION_CREATING)
        .see_also(see_also::MEMORY_LIMIT_UNIT)
        .see_also(see_also::CONTAINER_CREATING)
}

fn is_runtime(comm: &str) -> bool {
    RUNTIME_COMMS.iter().any(|r| comm.starts_with(r))
}

/// `kernel.hung_task`: a task stayed in uninterruptible sleep past the hung-task timeout.
fn hung_task(h: &HungGroup, s: &KernelSample, t: &Thresholds) -> Finding {
    let runtime = is_runtime(&h.comm);
    let severity = if runtime {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let fullest = s
        .role_fs
        .iter()
        .filter(|r| r.used_percent >= t.hung_disk_used_percent)
        .max_by(|a, b| a.used_percent.total_cmp(&b.used_percent));
    let blocked = s.procs_blocked.unwrap_or(0);
    let (path, path_en, path_zh) = if let Some(r) = fullest {
        (
            "disk_full",
            format!(
                "the {} directory {} is on a filesystem {:.1}% full (threshold {}%): the disk-full path, see disk.filesystem_full",
                r.role, r.host_path, r.used_percent, t.hung_disk_used_percent
            ),
            format!(
                "{} 目录 {} 所在文件系统已用 {:.1}%（阈值 {}%）：属于磁盘爆满路径，参见 disk.filesystem_full",
                r.role, r.host_path, r.used_percent, t.hung_disk_used_percent
            ),
        )
    } else if blocked > 0 {
        (
            "io",
            format!("{blocked} task(s) are in uninterruptible IO wait right now: the IO path, see load.io_bound"),
            format!("当前有 {blocked} 个任务处于不可中断的 IO 等待：属于 IO 瓶颈路径，参见 load.io_bound"),
        )
    } else {
        (
            "none",
            "no task is blocked now and no runtime or kubelet filesystem is full: the stall has passed or has another cause".to_string(),
            "当前没有任务阻塞，容器运行时和 kubelet 的文件系统也未写满：阻塞已经过去，或另有原因".to_string(),
        )
    };
    let (role_en, role_zh) = if runtime {
        (
            " It is a container runtime or kubelet process, so pods stay ContainerCreating or Terminating while it hangs.",
            "该进程属于容器运行时或 kubelet，它卡住期间 Pod 会一直处于 ContainerCreating 或 Terminating。",
        )
    } else {
        ("", "")
    };
    let mut f = Finding::new(
        "kernel.hung_task",
        severity,
        Text::new("A task hung in the kernel", "有任务在内核中长时间阻塞（hung task）"),
        Text::new(
            format!(
                "Task {}:{} was blocked for more than {} s ({} report(s) in the last {} s, last {}); {path_en}.{role_en}",
                h.comm, h.last_pid, h.max_blocked_seconds, h.reports, s.window_seconds, ago(h.last_seen_seconds_ago)
            ),
            format!(
                "任务 {}:{} 阻塞超过 {} 秒（最近 {} 秒内报告 {} 次，最后一次：{}）；{path_zh}。{role_zh}",
                h.comm, h.last_pid, h.max_blocked_seconds, s.window_seconds, h.reports, ago_zh(h.last_seen_seconds_ago)
            ),
        ),
    )
    .subject(h.comm.clone())
    .evidence("comm", h.comm.as_str())
    .evidence("last_pid", h.last_pid)
    .evidence("reports", h.reports)
    .evidence("blocked_seconds", h.max_blocked_seconds)
    .evidence("path", path)
    .evidence("runtime_or_kubelet", runtime)
    .evidence("window_seconds", s.window_seconds);
    if let Some(a) = h.last_seen_seconds_ago {
        f = f.evidence("last_seen_seconds_ago", a);
    }
    if let Some(b) = s.procs_blocked {
        f = f.evidence("procs_blocked", b);
    }
    if let Some(r) = fullest {
        f = f
            .evidence("full_dir", r.host_path.as_str())
            .evidence("full_dir_used_percent", r.used_percent)
            .evidence("full_dir_avail_bytes", r.avail_bytes);
    }
    f = f
        .step(Text::new(
            "A hung task waits for IO that does not complete: a disk that is saturated, failing or full, or a network filesystem that stopped answering. Check whether the task is still in D state and what it waits on.",
            "hung task 表示任务在等待迟迟不完成的 IO：磁盘繁忙、故障或写满，或网络文件系统失去响应。先确认该任务是否仍处于 D 状态以及它在等什么。",
        ))
        .step(Text::new(
            "On the disk-full path free space on the runtime/kubelet filesystem first (the disk.filesystem_full finding lists what fills it); on the IO path find the processes and the device doing the IO (the load.io_bound finding).",
            "若属于磁盘爆满路径，先清理容器运行时/kubelet 所在文件系统的空间（disk.filesystem_full 会列出占用来源）；若属于 IO 路径，找出产生 IO 的进程和设备（参见 load.io_bound）。",
        ));
    if runtime {
        f = f.step(Text::new(
            "Once IO recovers, check that the runtime answers again (docker ps / crictl ps); after a full disk dockerd and containerd may disagree about container states and need a restart.",
            "IO 恢复后，确认容器运行时重新响应（docker ps / crictl ps）；磁盘写满过后 dockerd 与 containerd 的容器状态可能不一致，需要重启。",
        ));
    }
    let dirs: Vec<&str> = s.role_fs.iter().map(|r| r.host_path.as_str()).collect();
    f = f
        .command("ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /D/'")
        .command(cmd!("cat /proc/{pid}/stack", pid = h.last_pid))
        .command("iostat -x 1 3");
    if !dirs.is_empty() {
        f = f.command(cmd!("df -h {dirs}", dirs = dirs.iter().collect::<Words>()));
    }
    f = f.command("journalctl -k | grep -E 'blocked for more than'");
    f = if path == "disk_full" {
        f.source(HANDBOOK, SECTION_DISK_FULL)
    } else {
        f.source(HANDBOOK, SECTION_LOAD)
    };
    f = f.see_also(see_also::HUNG_TASK);
    if runtime {
        f = f
            .see_also(see_also::TERMINATING)
            .see_also(see_also::CONTAINER_CREATING);
    }
    f
}

/// `kernel.fs_error`: filesystem or block-device errors on one device.
fn fs_error(e: &FsErrorGroup, window: u64, node: &str) -> Finding {
    let backs = !e.roles.is_empty();
    // I/O errors on a device that holds no mounted filesystem (an empty CD-ROM drive, a
    // detached volume) do not affect pods: information only.
    let unmounted_io_only =
        e.mount_point.is_none() && e.kinds.iter().all(|k| *k == FsErrorKind::BufferIo);
    let severity = if backs {
        Severity::Critical
    } else if unmounted_io_only {
        Severity::Info
    } else {
        Severity::Warning
    };
    let kinds: Vec<&str> = e.kinds.iter().map(|k| k.as_str()).collect();
    let stops = e.kinds.iter().any(|k| k.stops_writes()) || e.read_only_now == Some(true);
    let where_en = match (&e.mount_point, &e.fstype) {
        (Some(mp), Some(fs)) => format!(" ({fs} mounted at {mp})"),
        (Some(mp), None) => format!(" (mounted at {mp})"),
        _ => " (not found in the host's mounts)".to_string(),
    };
    let where_zh = match (&e.mount_point, &e.fstype) {
        (Some(mp), Some(fs)) => format!("（{fs}，挂载于 {mp}）"),
        (Some(mp), None) => format!("（挂载于 {mp}）"),
        _ => "（未在宿主机挂载表中找到）".to_string(),
    };
    let roles: Vec<String> = e.roles.iter().map(|(r, p)| format!("{r} {p}")).collect();
    let (roles_en, roles_zh) = if backs {
        (
            format!(
                "; it holds {}: the runtime and kubelet cannot create or delete containers, so pods hang in ContainerCreating or Terminating",
                roles.join(", ")
            ),
            format!(
                "；其上有 {}：容器运行时和 kubelet 无法创建或删除容器，Pod 会卡在 ContainerCreating 或 Terminating",
                roles.join("、")
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let mut f = Finding::new(
        "kernel.fs_error",
        severity,
        Text::new("Filesystem errors on a disk", "磁盘文件系统报错"),
        Text::new(
            format!(
                "The kernel logged {} error(s) ({}) for device {}{where_en} in the last {window} s, last {}{}{roles_en}.",
                e.errors,
                kinds.join(", "),
                e.device,
                ago(e.last_seen_seconds_ago),
                if stops { "; the filesystem no longer accepts writes" } else { "" },
            ),
            format!(
                "最近 {window} 秒内内核记录了设备 {}{where_zh} 的 {} 条错误（{}），最后一次：{}{}{roles_zh}。",
                e.device,
                e.errors,
                kinds.join(", "),
                ago_zh(e.last_seen_seconds_ago),
                if stops { "；该文件系统已无法写入" } else { "" },
            ),
        ),
    )
    .subject(e.device.clone())
    .evidence("device", e.device.as_str())
    .evidence("errors", e.errors)
    .evidence("kinds", kinds.join(","))
    .evidence("backs_runtime_or_kubelet", backs)
    .evidence("window_seconds", window);
    if let Some(mp) = &e.mount_point {
        f = f.evidence("mount_point", mp.as_str());
    }
    if let Some(t) = &e.fstype {
        f = f.evidence("fstype", t.as_str());
    }
    if let Some(ro) = e.read_only_now {
        f = f.evidence("read_only_now", ro);
    }
    if let Some(a) = e.last_seen_seconds_ago {
        f = f.evidence("last_seen_seconds_ago", a);
    }
    if backs {
        f = f.evidence("roles", roles.join(", "));
    }
    f = f
        .step(Text::new(
            "Errors like these come from a failing or detached disk, or from on-disk corruption; they do not go away by themselves, and ext4 or XFS may stop all writes to protect the data.",
            "这类错误来自故障或被卸载的磁盘，或磁盘上的数据损坏；不会自行消失，ext4 或 XFS 可能为保护数据而停止一切写入。",
        ))
        .step(Text::new(
            "Move the workloads away (drain the node), check the disk's health with the cloud provider, then unmount the filesystem and repair it (fsck for ext4, xfs_repair for XFS) before putting the node back.",
            "先把业务迁走（drain 节点），在云厂商控制台检查磁盘健康状况，然后卸载文件系统并修复（ext4 用 fsck，XFS 用 xfs_repair），再让节点恢复调度。",
        ));
    if backs {
        f = f.step(Text::new(
            "After the repair restart the runtime and kubelet, and check that docker and containerd agree on which containers run; stale containers can be pruned.",
            "修复后重启容器运行时和 kubelet，并确认 docker 与 containerd 记录的容器状态一致；残留容器可以清理掉。",
        ));
    }
    let dev = &e.device;
    let xfs = e.fstype.as_deref() == Some("xfs") || e.kinds.contains(&FsErrorKind::XfsShutdown);
    f = f
        .command(cmd!("dmesg -T | grep -w {device}", device = dev))
        .command(cmd!("findmnt /dev/{device}", device = dev))
        .command(cmd!(
            "kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
            node = node
        ));
    f = f.command(match (&e.mount_point, xfs) {
        (Some(mp), true) => cmd!(
            "umount {mount_point} && xfs_repair /dev/{device}",
            mount_point = mp,
            device = dev
        ),
        (Some(mp), false) => cmd!(
            "umount {mount_point} && fsck -fy /dev/{device}",
            mount_point = mp,
            device = dev
        ),
        (None, true) => cmd!("xfs_repair /dev/{device}", device = dev),
        (None, false) => cmd!("fsck -fy /dev/{device}", device = dev),
    });
    if backs {
        f = f
            .source(HANDBOOK, SECTION_TERMINATING)
            .see_also(see_also::TERMINATING)
            .see_also(see_also::CONTAINER_CREATING);
    }
    f
}

/// `kernel.listen_drops`: new TCP connections dropped at listening sockets of the host
/// namespace (SYN/accept queue or socket backlog full).
fn listen_drops(l: &ListenDelta, t: &Thresholds) -> Option<Finding> {
    let total = l.total();
    if total < t.listen_drops_min.max(1) {
        return None;
    }
    let rate = if l.interval_seconds > 0.0 {
        total as f64 / l.interval_seconds
    } else {
        0.0
    };
    let severity = if rate >= t.listen_drops_critical_per_second {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let show = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let mut f = Finding::new(
        "kernel.listen_drops",
        severity,
        Text::new(
            "TCP connections are dropped at full listen queues",
            "TCP 监听队列满导致新建连接被丢弃",
        ),
        Text::new(
            format!(
                "{total} new connection(s) were dropped in {:.1} s ({rate:.2}/s; ListenDrops +{}, ListenOverflows +{}, TCPBacklogDrop +{}; critical from {}/s) with tcp_max_syn_backlog={} and somaxconn={}: health-check probes can time out this way.",
                l.interval_seconds, l.listen_drops, l.listen_overflows, l.backlog_drop, t.listen_drops_critical_per_second, show(l.tcp_max_syn_backlog), show(l.somaxconn)
            ),
            format!(
                "{:.1} 秒内有 {total} 个新建连接被丢弃（{rate:.2}/秒；ListenDrops +{}、ListenOverflows +{}、TCPBacklogDrop +{}；达到 {}/秒为严重），当前 tcp_max_syn_backlog={}、somaxconn={}：健康检查探测可能因此超时失败。",
                l.interval_seconds, l.listen_drops, l.listen_overflows, l.backlog_drop, t.listen_drops_critical_per_second, show(l.tcp_max_syn_backlog), show(l.somaxconn)
            ),
        ),
    )
    .evidence("dropped", total)
    .evidence("dropped_per_second", rate)
    .evidence("listen_drops", l.listen_drops)
    .evidence("listen_overflows", l.listen_overflows)
    .evidence("tcp_backlog_drop", l.backlog_drop)
    .evidence("interval_seconds", l.interval_seconds);
    if let Some(v) = l.tcp_max_syn_backlog {
        f = f.evidence("tcp_max_syn_backlog", v);
    }
    if let Some(v) = l.somaxconn {
        f = f.evidence("somaxconn", v);
    }
    f = f
        .step(Text::new(
            "When many connections arrive at once and the SYN backlog or accept queue is too short, the kernel drops new connections; probes from kubelet are among them and the pod is marked unhealthy or restarted.",
            "短时间内新建连接很多而 SYN backlog 或 accept 队列太短时，内核会丢弃新连接；kubelet 的探测连接也在其中，Pod 因此被判为不健康或被重启。",
        ))
        .step(Text::new(
            "Find the listening sockets whose accept queue is full (Recv-Q reaching Send-Q in ss -lnt), then raise net.ipv4.tcp_max_syn_backlog, and net.core.somaxconn together with the application's own listen backlog.",
            "找出 accept 队列已满的监听 socket（ss -lnt 中 Recv-Q 达到 Send-Q），然后调大 net.ipv4.tcp_max_syn_backlog，并同时调大 net.core.somaxconn 和应用自身的 listen backlog。",
        ))
        .step(Text::new(
            "These counters are the host network namespace's (host processes and hostNetwork pods); a pod with its own namespace keeps its own counters (nsenter -t <pid> -n netstat -s).",
            "这些计数来自宿主机网络命名空间（宿主机进程和 hostNetwork Pod）；独立网络命名空间的 Pod 有自己的计数（nsenter -t <pid> -n netstat -s）。",
        ))
        .command("netstat -s | grep -i -E 'listen|TCPBacklogDrop'")
        .command("ss -lnt")
        .command("sysctl net.ipv4.tcp_max_syn_backlog net.core.somaxconn");
    // The new values double the host's current ones: only when both are known to be the
    // host's (not read, or node-doctor's own network namespace's: no advice from a guess).
    if let (Some(syn), Some(acc)) = (l.tcp_max_syn_backlog, l.somaxconn) {
        let syn = syn.max(128).saturating_mul(2);
        let acc = acc.max(128).saturating_mul(2);
        f = f.command(cmd!(
            "sysctl -w net.ipv4.tcp_max_syn_backlog={syn} net.core.somaxconn={acc}",
            syn = syn,
            acc = acc
        ));
    }
    Some(
        f.source(HANDBOOK, SECTION_HEALTH)
            .see_also(see_also::SYN_BACKLOG),
    )
}

/// `kernel.pid_exhaustion`: tasks (processes and threads) close to `pid_max` or `threads-max`.
fn pid_exhaustion(p: &PidUsage, t: &Thresholds) -> Option<Finding> {
    let pct = |limit: Option<u64>| {
        limit
            .filter(|l| *l > 0)
            .map(|l| p.tasks as f64 * 100.0 / l as f64)
    };
    let pid_pct = pct(p.pid_max);
    let thr_pct = pct(p.threads_max);
    let (which, limit, percent) = match (pid_pct, thr_pct) {
        (Some(a), Some(b)) if b > a => ("kernel.threads-max", p.threads_max?, b),
        (Some(a), _) => ("kernel.pid_max", p.pid_max?, a),
        (None, Some(b)) => ("kernel.threads-max", p.threads_max?, b),
        (None, None) => return None,
    };
    if percent < t.pids_warning_percent {
        return None;
    }
    let severity = if percent >= t.pids_critical_percent {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "kernel.pid_exhaustion",
        severity,
        Text::new("The node is running out of PIDs", "节点 PID 即将耗尽"),
        Text::new(
            format!(
                "{} tasks exist against {which}={limit} ({percent:.1}%, warning at {}%, critical at {}%): new processes and threads (container starts, exec probes) will fail with 'resource temporarily unavailable'.",
                p.tasks, t.pids_warning_percent, t.pids_critical_percent
            ),
            format!(
                "当前有 {} 个任务，{which}={limit}（{percent:.1}%，{}% 告警、{}% 严重）：新进程和线程（容器启动、exec 探针）将以 “resource temporarily unavailable” 失败。",
                p.tasks, t.pids_warning_percent, t.pids_critical_percent
            ),
        ),
    )
    .evidence("tasks", p.tasks)
    .evidence("used_percent", percent)
    .evidence("limit_name", which);
    if let Some(v) = p.pid_max {
        f = f.evidence("pid_max", v);
    }
    if let Some(v) = p.threads_max {
        f = f.evidence("threads_max", v);
    }
    Some(
        f.step(Text::new(
            "Every thread takes a PID. Find the processes with the most threads or children: usually one leaking workload (a thread per request, zombie children never reaped).",
            "每个线程都占用一个 PID。找出线程数或子进程最多的进程：通常是某个泄漏的业务（每个请求一个线程、僵尸子进程没有回收）。",
        ))
        .step(Text::new(
            "Stop the leak, and cap pods with the kubelet's podPidsLimit so one pod cannot exhaust the node; raise kernel.pid_max only if the node legitimately runs that many tasks.",
            "修复泄漏，并用 kubelet 的 podPidsLimit 限制单个 Pod 的 PID 数，避免一个 Pod 耗尽整个节点；只有节点确实需要这么多任务时才调大 kernel.pid_max。",
        ))
        .command("ps -eo nlwp,pid,comm --sort=-nlwp | head -n 15")
        .command("ps -eo stat | grep -c '^Z'")
        .command("sysctl kernel.pid_max kernel.threads-max"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let f = listen_drops(&l, &Thresholds::default()).unwrap();
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
        let f = listen_drops(&unknown, &Thresholds::default()).unwrap();
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
        };
        let mut s = sample();
        s.procs_blocked = Some(0);
        let f = hung_task(&h, &s, &t);
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.evidence["path"].as_str(), Some("none"));
        s.procs_blocked = Some(5);
        assert_eq!(hung_task(&h, &s, &t).evidence["path"].as_str(), Some("io"));
        s.role_fs.push(RoleFs {
            role: "docker_data",
            host_path: "/var/lib/docker".into(),
            used_percent: 97.5,
            avail_bytes: 1 << 20,
        });
        let f = hung_task(&h, &s, &t);
        assert_eq!(f.evidence["path"].as_str(), Some("disk_full"));
        assert!(f.summary.en.contains("/var/lib/docker"));
        assert_eq!(
            f.remediation.source.as_ref().map(|s| s.section),
            Some(SECTION_DISK_FULL)
        );
        let other = HungGroup {
            comm: "jbd2/vdb-8".into(),
            ..h
        };
        assert_eq!(hung_task(&other, &s, &t).severity, Severity::Warning);
    }
}
