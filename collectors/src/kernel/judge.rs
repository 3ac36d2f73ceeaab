//! The kernel rules: a typed [`KernelSample`] (from [`sample`](super::sample)) -> drafts (id,
//! severity, subject, evidence, conditions) under the [`Thresholds`] of
//! [`thresholds`](super::thresholds). Pure: testable without files. Their words, from the
//! handbook's CrashLoopBackOff, exit-code, ContainerCreating, health-check and Terminating
//! pages, are in `collectors/rules/kernel.toml`.

use crate::finding::Severity;
use crate::kernel::crash::StallKind;
use crate::kernel::fs_error::FsErrorKind;
use crate::kernel::oom::OomKind;
use crate::kernel::tasks::{sysctl_name, PID_MAX, THREADS_MAX};
use crate::kmsg::decay::{self, Phase};
use crate::node::discover::Daemons;
use crate::pods::PodNames;
use crate::proc::cgroup::QosClass;
use crate::rules::{Draft, Item};

use super::sample::{
    Ext4WarningGroup, FsErrorGroup, HungGroup, KernelSample, ListenDelta, NetdevGroup, OomGroup,
    OopsGroup, PidUsage, StallGroup, TinyPod,
};
use super::thresholds::Thresholds;

/// Applies all kernel rules.
pub fn judge(s: &KernelSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(oom_system(s, t));
    out.extend(
        s.oom
            .iter()
            .filter(|g| g.kind == OomKind::Cgroup)
            .map(|g| oom_cgroup(g, s.window_seconds, t)),
    );
    out.extend(s.tiny.iter().map(|p| tiny_limit(p, t)));
    out.extend(s.hung.iter().map(|h| hung_task(h, s, t)));
    out.extend(s.fs_errors.iter().map(|e| fs_error(e, s.window_seconds, t)));
    out.extend(s.listen.as_ref().and_then(|l| listen_drops(l, t)));
    out.extend(s.pids.as_ref().and_then(|p| pid_exhaustion(p, t)));
    out.extend(s.oopses.iter().map(|o| oops(o, s.window_seconds, t)));
    out.extend(s.stalls.iter().map(|g| cpu_stall(g, s.window_seconds, t)));
    out.extend(s.netdev.iter().map(|n| unregister_netdevice(n, s, t)));
    out.extend(
        s.ext4_warnings
            .iter()
            .map(|w| ext4_warning(w, s.window_seconds, t)),
    );
    out
}

/// `kernel.oops`: the kernel oopsed (or panicked and the node lived on). The kernel that oopsed
/// still runs until the node reboots (a lock the dead task held stays held, its memory may be
/// inconsistent): critical while recent, then warning, never history (info) while in the window.
fn oops(o: &OopsGroup, window_seconds: u64, t: &Thresholds) -> Draft {
    let phase = Phase::of(None, o.last_seen_seconds_ago, t.recent_seconds);
    let severity = match phase {
        Phase::Past => Severity::Warning,
        _ => Severity::Critical,
    };
    Draft::new("kernel.oops", severity)
        .subject(o.comm.clone().unwrap_or_else(|| "kernel".to_string()))
        .evidence("oopses", o.oopses)
        .evidence("kind", o.last_kind.as_str())
        .evidence(
            "kinds",
            o.kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(","),
        )
        .evidence("process_context", o.process_context)
        .evidence("window_seconds", window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("comm", o.comm.clone())
        .evidence_opt("pid", o.last_pid)
        .evidence_opt("cpu", o.last_cpu)
        .evidence_opt("panic", o.panic.clone())
        .evidence_opt("last_seen_seconds_ago", o.last_seen_seconds_ago)
        .var("recent_seconds", t.recent_seconds)
        .when(phase.as_str())
        .when_if("process_context", o.process_context)
        .when_if("panicked", o.panic.is_some())
}

/// `kernel.cpu_stall`: soft or hard lockups, RCU stalls of one CPU. Critical while recent (the
/// CPU ran nothing else for seconds: probes and the kubelet time out), then history.
fn cpu_stall(g: &StallGroup, window_seconds: u64, t: &Thresholds) -> Draft {
    let phase = Phase::of(None, g.last_seen_seconds_ago, t.recent_seconds);
    let severity = match phase {
        Phase::Past => Severity::Info,
        _ => Severity::Critical,
    };
    let has = |k: StallKind| g.kinds.contains(&k);
    Draft::new("kernel.cpu_stall", severity)
        .subject(
            g.cpu
                .map_or_else(|| "cpu".to_string(), |c| format!("cpu{c}")),
        )
        .evidence("reports", g.reports)
        .evidence(
            "kinds",
            g.kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(","),
        )
        .evidence("window_seconds", window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("cpu", g.cpu)
        .evidence_opt("stuck_seconds", g.max_stuck_seconds)
        .evidence_opt("comm", g.last_comm.clone())
        .evidence_opt("pid", g.last_pid)
        .evidence_opt("rcu_flavor", g.rcu_flavor.clone())
        .evidence_opt("last_seen_seconds_ago", g.last_seen_seconds_ago)
        .var("recent_seconds", t.recent_seconds)
        .when(phase.as_str())
        .when_if("soft_lockup", has(StallKind::SoftLockup))
        .when_if("hard_lockup", has(StallKind::HardLockup))
        .when_if("rcu_stall", has(StallKind::RcuStall))
}

/// `kernel.unregister_netdevice`: a network device cannot be freed. Frequent (at least
/// `unregister_frequent_waits` waits of any device in `unregister_frequent_seconds`, the
/// last one recent): critical, the device is stuck and network namespaces are not torn
/// down. Otherwise a warning while recent, then history.
fn unregister_netdevice(n: &NetdevGroup, s: &KernelSample, t: &Thresholds) -> Draft {
    let phase = Phase::of(None, n.last_seen_seconds_ago, t.recent_seconds);
    let frequent = s.netdev_waits_recent >= t.unregister_frequent_waits.max(1)
        && decay::is_recent(n.last_seen_seconds_ago, t.unregister_frequent_seconds);
    let severity = match phase {
        _ if frequent => Severity::Critical,
        Phase::Past => Severity::Info,
        _ => Severity::Warning,
    };
    Draft::new("kernel.unregister_netdevice", severity)
        .subject(n.device.clone())
        .evidence("device", n.device.as_str())
        .evidence("waits", n.waits)
        .evidence("node_waits_recent", s.netdev_waits_recent)
        .evidence("window_seconds", s.window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("usage_count", n.usage_count)
        .evidence_opt("last_seen_seconds_ago", n.last_seen_seconds_ago)
        .var("recent_seconds", t.recent_seconds)
        .var("frequent_waits", t.unregister_frequent_waits)
        .var("frequent_seconds", t.unregister_frequent_seconds)
        .when(phase.as_str())
        .when_if("frequent", frequent)
}

/// `kernel.ext4_warning`: ext4 warned about a device (not an error: the filesystem stays
/// writable). A warning while recent, then history.
fn ext4_warning(w: &Ext4WarningGroup, window_seconds: u64, t: &Thresholds) -> Draft {
    let phase = Phase::of(None, w.last_seen_seconds_ago, t.recent_seconds);
    let severity = match phase {
        Phase::Past => Severity::Info,
        _ => Severity::Warning,
    };
    Draft::new("kernel.ext4_warning", severity)
        .subject(w.device.clone())
        .evidence("device", w.device.as_str())
        .evidence("warnings", w.warnings)
        .evidence("window_seconds", window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("function", w.last_function.clone())
        .evidence_opt("last_seen_seconds_ago", w.last_seen_seconds_ago)
        .var("recent_seconds", t.recent_seconds)
        .when(phase.as_str())
}

/// What the runtime advice of a hung task or a filesystem error needs to know: whether a
/// container runtime (dockerd or containerd) and the kubelet run, as conditions
/// `runtime_not_running` and `kubelet_not_running` (only when the process list was read).
pub fn daemon_advice(drafts: Vec<Draft>, daemons: &Daemons) -> Vec<Draft> {
    drafts
        .into_iter()
        .map(|d| {
            let advises = (d.id == "kernel.hung_task" && d.is("runtime"))
                || (d.id == "kernel.fs_error" && d.is("runtime_disk"));
            if !advises || !daemons.known {
                return d;
            }
            d.when_if(
                "runtime_not_running",
                !daemons.dockerd && !daemons.containerd,
            )
            .when_if("kubelet_not_running", !daemons.kubelet)
        })
        .collect()
}

/// `namespace/name` of a pod when known.
fn pod_name(names: &PodNames) -> Option<String> {
    Some(format!(
        "{}/{}",
        names.namespace.as_ref()?,
        names.name.as_ref()?
    ))
}

/// The pod's UID, and its namespace and name when the node's metadata has them: the rule
/// file describes the pod by name, or looks it up by UID first.
fn pod_ref(d: Draft, names: &PodNames, uid: Option<&str>) -> Draft {
    let d = d
        .evidence_opt("pod_uid", uid)
        .evidence_opt("pod", pod_name(names));
    match (&names.namespace, &names.name) {
        (Some(ns), Some(name)) => d
            .var("pod_namespace", ns.as_str())
            .var("pod_name", name.as_str()),
        _ => d,
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// `kernel.oom_system`: the node ran out of memory and the kernel killed processes.
///
/// Still true now: the node is short of memory (MemAvailable below
/// `oom_system_available_percent` of MemTotal): critical however old the kill. Otherwise a
/// past event: critical while repeating (`oom_system_critical_kills` in the window, the last
/// one recent), warning while recent, then info until it leaves the window.
fn oom_system(s: &KernelSample, t: &Thresholds) -> Option<Draft> {
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
    let unreported: u64 = groups.iter().map(|g| g.unreported_kills).sum::<u64>()
        + groups
            .iter()
            .filter(|g| g.report_missing)
            .map(|g| g.kills)
            .sum::<u64>();
    let victims: Vec<String> = groups
        .iter()
        .take(8)
        .map(|g| match &g.pod_uid {
            Some(uid) => format!("{}({}, pod {uid})", g.last_comm, g.last_pid),
            None => format!("{}({})", g.last_comm, g.last_pid),
        })
        .collect();
    let m = &s.node_memory;
    let available_percent = match (m.mem_available_bytes, m.mem_total_bytes) {
        (Some(a), Some(t)) if t > 0 => Some(a as f64 * 100.0 / t as f64),
        _ => None,
    };
    let short_now = available_percent.map(|p| p < t.oom_system_available_percent);
    let phase = Phase::of(short_now, last.last_seen_seconds_ago, t.recent_seconds);
    let repeating = kills >= t.oom_system_critical_kills.max(1);
    let severity = match phase {
        Phase::Ongoing => Severity::Critical,
        Phase::Recent if repeating => Severity::Critical,
        Phase::Recent => Severity::Warning,
        Phase::Past => Severity::Info,
    };
    let limit_file = m
        .kubepods_limit_file
        .clone()
        .unwrap_or_else(|| "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes".to_string());
    let mut d = Draft::new("kernel.oom_system", severity)
        .evidence("kills", kills)
        .evidence("pod_victims", pod_kills)
        .evidence("last_pid", last.last_pid)
        .evidence("last_comm", last.last_comm.as_str())
        .evidence("victims", victims.join(", "))
        .evidence("window_seconds", s.window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("last_seen_seconds_ago", last.last_seen_seconds_ago)
        .evidence_opt("mem_total_bytes", m.mem_total_bytes)
        .evidence_opt("mem_available_percent_now", available_percent)
        .evidence_opt("kubepods_limit_bytes", m.kubepods_limit_bytes)
        .evidence_opt("unreported_kills", (unreported > 0).then_some(unreported))
        .var("limit_file", limit_file)
        .var("recent_seconds", t.recent_seconds)
        .var(
            "available_threshold_percent",
            t.oom_system_available_percent,
        )
        .var("critical_kills", t.oom_system_critical_kills)
        .when(phase.as_str())
        .when_if("repeating", repeating)
        .when_if("victims_in_pods", pod_kills > 0);
    // What kube-reserved, system-reserved and the eviction threshold leave to the rest.
    if let (Some(total), Some(pods)) = (m.mem_total_bytes, m.kubepods_limit_bytes) {
        let reserved = total.saturating_sub(pods);
        d = d.evidence("reserved_bytes", reserved).var(
            "reserved_percent",
            reserved as f64 * 100.0 / total.max(1) as f64,
        );
    }
    Some(d)
}

/// `kernel.oom_cgroup`: a container (or other memory cgroup) hit its memory limit.
///
/// An OOM kill is a past event; what is still true now is a crash loop: at least
/// `oom_cgroup_critical_kills` kills in the window with the last one recent (critical). A
/// recent kill is a warning, an older one history (info); so is any kill of a pod that is no
/// longer on the node (its cgroup is gone).
fn oom_cgroup(g: &OomGroup, window: u64, t: &Thresholds) -> Draft {
    let repeating = g.kills >= t.oom_cgroup_critical_kills;
    let recent = decay::is_recent(g.last_seen_seconds_ago, t.recent_seconds);
    let pod_gone = g.pod_present == Some(false);
    let phase = if pod_gone {
        Phase::Past
    } else {
        Phase::of(
            Some(repeating && recent),
            g.last_seen_seconds_ago,
            t.recent_seconds,
        )
    };
    let severity = match phase {
        Phase::Ongoing => Severity::Critical,
        Phase::Recent => Severity::Warning,
        Phase::Past => Severity::Info,
    };
    let subject = g
        .pod_uid
        .clone()
        .or_else(|| g.oom_memcg.clone())
        .or_else(|| g.task_memcg.clone())
        .unwrap_or_else(|| g.last_comm.clone());
    let mut d = Draft::new("kernel.oom_cgroup", severity)
        .subject(subject)
        .evidence("kills", g.kills)
        .evidence("last_pid", g.last_pid)
        .evidence("last_comm", g.last_comm.as_str())
        .evidence("window_seconds", window)
        .evidence("phase", phase.as_str())
        .evidence_opt("last_seen_seconds_ago", g.last_seen_seconds_ago)
        .evidence_opt(
            "processes_killed",
            (g.processes_killed > g.kills).then_some(g.processes_killed),
        )
        .evidence_opt(
            "unreported_kills",
            (g.unreported_kills > 0).then_some(g.unreported_kills),
        )
        .evidence_opt("pod_present_now", g.pod_present)
        .evidence_opt("container", g.names.container.as_deref())
        .evidence_opt("qos_class", g.qos.map(QosClass::as_str))
        .evidence_opt("container_id", g.container_id.as_deref())
        .evidence_opt("oom_memcg", g.oom_memcg.as_deref())
        .evidence_opt("task_memcg", g.task_memcg.as_deref())
        .evidence_opt("limit_bytes", g.limit_bytes)
        .evidence_opt("usage_bytes", g.usage_bytes)
        .var("critical_kills", t.oom_cgroup_critical_kills)
        .var("recent_seconds", t.recent_seconds)
        .when(phase.as_str())
        .when_if("pod_gone", pod_gone)
        .when_if("report_missing", g.report_missing)
        .when_if("limit_above_pod", limit_above_pod(g));
    d = pod_ref(d, &g.names, g.pod_uid.as_deref());
    // Who was killed: a container of a pod (named, or by its short id), a pod, or a cgroup.
    match (&g.pod_uid, &g.container_id) {
        (Some(_), Some(c)) => {
            let label = g.names.container.as_deref().unwrap_or_else(|| short(c));
            d = d.var("container_label", label);
        }
        (Some(_), None) => {}
        (None, _) => {
            if let Some(m) = g.oom_memcg.as_deref().or(g.task_memcg.as_deref()) {
                d = d.var("memcg", m);
            }
        }
    }
    d
}

/// True when the limit hit is a cgroup above the victim's pod (`kubepods`, a QoS class): the
/// pods together went over what that cgroup allows (node allocatable), the container was
/// only the victim the kernel chose there.
fn limit_above_pod(g: &OomGroup) -> bool {
    g.pod_uid.is_some()
        && g.oom_memcg
            .as_deref()
            .is_some_and(|m| crate::proc::cgroup::pod_from_path(m).is_none())
}

/// `kernel.tiny_memory_limit`: a pod or container limit too small to start anything.
fn tiny_limit(p: &TinyPod, t: &Thresholds) -> Draft {
    let smallest = p.groups.iter().map(|g| g.2).min().unwrap_or(0);
    let containers: Vec<String> = p
        .groups
        .iter()
        .map(|(cg, cid, limit, _)| match cid {
            Some(c) => format!("{}={limit}B", short(c)),
            None => format!("{cg}={limit}B"),
        })
        .collect();
    let files = p
        .groups
        .iter()
        .take(4)
        .map(|(_, _, _, file)| Item::new().value("file", file.as_str()))
        .collect();
    let mut d = Draft::new("kernel.tiny_memory_limit", Severity::Critical)
        .subject(p.subject.clone())
        .evidence("limit_bytes", smallest)
        .evidence("threshold_bytes", t.tiny_limit_bytes)
        .evidence("cgroups", containers.join(", "))
        .items("limit_files", files);
    d = pod_ref(d, &p.names, p.pod_uid.as_deref());
    if p.pod_uid.is_none() {
        d = d.var("cgroup", p.subject.as_str());
    }
    d
}

/// `kernel.hung_task`: a task stayed in uninterruptible sleep past the hung-task timeout.
///
/// Still true now: a reported task of that name is in D state now (its `/proc/<pid>/stat`):
/// the full severity (critical for the runtime or the kubelet, else warning), however old the
/// report (the kernel stops reporting after `kernel.hung_task_warnings` reports). Otherwise
/// one step less while recent, then info.
fn hung_task(h: &HungGroup, s: &KernelSample, t: &Thresholds) -> Draft {
    let runtime = crate::names::is_runtime_or_kubelet(&h.comm);
    let base = if runtime {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let phase = Phase::of(h.blocked_now, h.last_seen_seconds_ago, t.recent_seconds);
    let severity = match phase {
        Phase::Ongoing => base,
        Phase::Recent => decay::lower(base),
        Phase::Past => Severity::Info,
    };
    let fullest = s
        .role_fs
        .iter()
        .filter(|r| r.used_percent >= t.hung_disk_used_percent)
        .max_by(|a, b| a.used_percent.total_cmp(&b.used_percent));
    let blocked = s.procs_blocked.unwrap_or(0);
    // Which path the stall takes: a full runtime/kubelet disk, IO, or neither any more.
    let (path, condition) = if fullest.is_some() {
        ("disk_full", "path_disk_full")
    } else if blocked > 0 || h.blocked_now == Some(true) {
        ("io", "path_io")
    } else {
        ("none", "path_none")
    };
    let mut d = Draft::new("kernel.hung_task", severity)
        .subject(h.comm.clone())
        .evidence("comm", h.comm.as_str())
        .evidence("last_pid", h.last_pid)
        .evidence("reports", h.reports)
        .evidence("blocked_seconds", h.max_blocked_seconds)
        .evidence("path", path)
        .evidence("runtime_or_kubelet", runtime)
        .evidence("window_seconds", s.window_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("last_seen_seconds_ago", h.last_seen_seconds_ago)
        .evidence_opt("blocked_now", h.blocked_now)
        .evidence_opt("blocked_now_pid", h.blocked_now_pid)
        .evidence_opt("procs_blocked", s.procs_blocked)
        .var("hung_disk_used_percent", t.hung_disk_used_percent)
        .var("recent_seconds", t.recent_seconds)
        .when(condition)
        .when(phase.as_str())
        .when_if("runtime", runtime)
        .when_if("docker_task", h.comm.starts_with("docker"))
        .when_if("kubelet_task", h.comm == crate::names::KUBELET);
    if let Some(r) = fullest {
        d = d
            .evidence("full_dir", r.host_path.as_str())
            .evidence("full_dir_used_percent", r.used_percent)
            .evidence("full_dir_avail_bytes", r.avail_bytes)
            .var("full_dir_role", r.role);
    }
    if !s.role_fs.is_empty() {
        d = d.words("dirs", s.role_fs.iter().map(|r| r.host_path.as_str()));
    }
    d
}

/// `kernel.fs_error`: filesystem or block-device errors on one device.
///
/// Still true now: the filesystem refuses writes (read-only or XFS shut down, by the mount
/// options and a probe of the mount now): the full severity however old. A filesystem the log
/// took read-only (or shut down) that accepts writes again has recovered: info. Otherwise the
/// full severity while recent, one step less while ext4 still records unrepaired errors, then
/// info.
fn fs_error(e: &FsErrorGroup, window: u64, t: &Thresholds) -> Draft {
    let backs = !e.roles.is_empty();
    // I/O errors on a device that holds no mounted filesystem (an empty CD-ROM drive, a
    // detached volume) do not affect pods: information only.
    let unmounted_io_only =
        e.mount_point.is_none() && e.kinds.iter().all(|k| *k == FsErrorKind::BufferIo);
    let base = if backs {
        Severity::Critical
    } else if unmounted_io_only {
        Severity::Info
    } else {
        Severity::Warning
    };
    let stopped_now = e.read_only_now == Some(true) || e.shut_down_now == Some(true);
    // Recovered: what the log stopped accepts writes again, as far as the host shows (an XFS
    // shutdown needs the probe's answer: the mount options do not change).
    let logged_ro = e.kinds.contains(&FsErrorKind::ReadOnly);
    let logged_shutdown = e.kinds.contains(&FsErrorKind::XfsShutdown);
    let recovered = !stopped_now
        && (logged_ro || logged_shutdown)
        && (!logged_ro || e.read_only_now == Some(false))
        && (!logged_shutdown || e.shut_down_now == Some(false));
    let unrepaired = e.errors_count_now.is_some_and(|n| n > 0);
    let phase = if recovered {
        Phase::Past
    } else {
        Phase::of(Some(stopped_now), e.last_seen_seconds_ago, t.recent_seconds)
    };
    let severity = match phase {
        Phase::Ongoing => base,
        Phase::Recent => base,
        Phase::Past if unrepaired && !recovered => decay::lower(base),
        Phase::Past => Severity::Info,
    };
    let kinds: Vec<&str> = e.kinds.iter().map(|k| k.as_str()).collect();
    let xfs = e.fstype.as_deref() == Some("xfs")
        || e.kinds.iter().any(|k| {
            matches!(
                k,
                FsErrorKind::XfsShutdown | FsErrorKind::XfsCorruption | FsErrorKind::XfsIo
            )
        });
    let mut d = Draft::new("kernel.fs_error", severity)
        .subject(e.device.clone())
        .evidence("device", e.device.as_str())
        .evidence("errors", e.errors)
        .evidence("kinds", kinds.join(","))
        .evidence("backs_runtime_or_kubelet", backs)
        .evidence("window_seconds", window)
        .evidence("phase", phase.as_str())
        .evidence_opt("mount_point", e.mount_point.as_deref())
        .evidence_opt("fstype", e.fstype.as_deref())
        .evidence_opt("read_only_now", e.read_only_now)
        .evidence_opt("shut_down_now", e.shut_down_now)
        .evidence_opt("errors_count_now", e.errors_count_now)
        .evidence_opt("last_seen_seconds_ago", e.last_seen_seconds_ago)
        .var("kind_list", kinds.join(", "))
        .var("recent_seconds", t.recent_seconds)
        .when(phase.as_str())
        .when_if("stops_writes", stopped_now)
        .when_if("recovered", recovered)
        .when_if("logged_stop", logged_ro || logged_shutdown)
        .when_if("unrepaired", unrepaired && !stopped_now)
        .when_if("xfs", xfs)
        .when_if("read_only_now", e.read_only_now == Some(true))
        .when_if(
            "ext4_error_logged",
            e.kinds.contains(&FsErrorKind::Ext4Error),
        )
        .when_if("buffer_io_logged", e.kinds.contains(&FsErrorKind::BufferIo));
    if backs {
        let roles: Vec<String> = e.roles.iter().map(|(r, p)| format!("{r} {p}")).collect();
        d = d
            .evidence("roles", roles.join(", "))
            .words("role_dirs", roles)
            .when("runtime_disk");
    }
    d
}

/// `kernel.listen_drops`: new TCP connections dropped at listening sockets of the host
/// namespace (SYN/accept queue or socket backlog full).
fn listen_drops(l: &ListenDelta, t: &Thresholds) -> Option<Draft> {
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
    let mut d = Draft::new("kernel.listen_drops", severity)
        .evidence("dropped", total)
        .evidence("dropped_per_second", rate)
        .evidence("listen_drops", l.listen_drops)
        .evidence("listen_overflows", l.listen_overflows)
        .evidence("tcp_backlog_drop", l.backlog_drop)
        .evidence("interval_seconds", l.interval_seconds)
        .evidence_opt("tcp_max_syn_backlog", l.tcp_max_syn_backlog)
        .evidence_opt("somaxconn", l.somaxconn)
        .var("critical_per_second", t.listen_drops_critical_per_second);
    // The new values double the host's current ones: only when both are known to be the
    // host's (not read, or node-doctor's own network namespace's: no advice from a guess).
    if let (Some(syn), Some(acc)) = (l.tcp_max_syn_backlog, l.somaxconn) {
        d = d
            .var("new_tcp_max_syn_backlog", syn.max(128).saturating_mul(2))
            .var("new_somaxconn", acc.max(128).saturating_mul(2));
    }
    Some(d)
}

/// `kernel.pid_exhaustion`: tasks (processes and threads) close to `pid_max` or `threads-max`.
fn pid_exhaustion(p: &PidUsage, t: &Thresholds) -> Option<Draft> {
    let pct = |limit: Option<u64>| {
        limit
            .filter(|l| *l > 0)
            .map(|l| p.tasks as f64 * 100.0 / l as f64)
    };
    let pid_pct = pct(p.pid_max);
    let thr_pct = pct(p.threads_max);
    let (which, limit, percent) = match (pid_pct, thr_pct) {
        (Some(a), Some(b)) if b > a => (THREADS_MAX, p.threads_max?, b),
        (Some(a), _) => (PID_MAX, p.pid_max?, a),
        (None, Some(b)) => (THREADS_MAX, p.threads_max?, b),
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
    Some(
        Draft::new("kernel.pid_exhaustion", severity)
            .evidence("tasks", p.tasks)
            .evidence("used_percent", percent)
            .evidence("limit_name", sysctl_name(which))
            .evidence_opt("pid_max", p.pid_max)
            .evidence_opt("threads_max", p.threads_max)
            .var("limit", limit)
            .var("warning_percent", t.pids_warning_percent)
            .var("critical_percent", t.pids_critical_percent),
    )
}

#[cfg(test)]
mod tests;
