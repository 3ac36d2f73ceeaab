//! The iptables rules: typed samples (lock window, namespace comparisons, kube-proxy log
//! counts, backend facts) in, findings and metrics out. No file access here.
//!
//! Every rule follows the handbook `002_af370464fa0f13dd.txt`, chapter "集群 Kube-Proxy 异常排障
//! 处理" (lines 1009–1336); each finding names the sub-section its advice comes from.

use std::collections::BTreeMap;
use std::time::Duration;

use super::backend::{Backend, BinaryBackend};
use super::kplog::{KindStats, LogKind};
use super::sampler::{HoldObs, LockId, ProcInfo, Window};
use crate::cmd;
use crate::explain::see_also;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::metric::Metric;

/// Handbook sub-sections, spelled as in the document.
pub const SEC_BACKEND: &str = "kube-proxy 未能正确适配节点 iptables 后端";
pub const SEC_NOT_MOUNTED: &str = "其它组件未挂载 iptables 锁导致并发写入失败";
pub const SEC_NO_WAIT: &str = "iptables-restore 版本低导致不支持阻塞写入";
pub const SEC_LONG_HOLD: &str = "其它组件持有 iptables 锁时间过长";
pub const SEC_STREAM: &str = "kube-proxy 到 kube-apiserver 连接异常";
pub const SEC_PANIC_FIRST: &str = "kube-proxy 首次启动发生 panic，重启后正常";
pub const SEC_PANIC_LOOP: &str = "kube-proxy 不间断 panic";

/// Thresholds of the lock rules.
#[derive(Debug, Clone, PartialEq)]
pub struct LockThresholds {
    pub hold_warning: Duration,
    pub hold_critical: Duration,
    /// Waiters seen on at least this many consecutive samples are a queue.
    pub waiter_streak_samples: u32,
    pub sample_period: Duration,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `pod <uid>` / `host cgroup /system.slice/x` / `unknown placement`, in both languages.
fn placement(p: &ProcInfo) -> (String, String) {
    match (&p.pod_uid, &p.host_cgroup) {
        (Some(uid), _) => match (&p.pod_namespace, &p.pod_name) {
            (Some(ns), Some(name)) => (
                format!("pod {ns}/{name}, pod UID {uid}"),
                format!("Pod {ns}/{name}，Pod UID {uid}"),
            ),
            _ => (format!("pod UID {uid}"), format!("Pod UID {uid}")),
        },
        (None, Some(cg)) => (
            format!("host process, cgroup {cg}"),
            format!("宿主机进程，cgroup {cg}"),
        ),
        _ => ("placement unknown".into(), "所属位置未知".into()),
    }
}

fn proc_evidence(mut f: Finding, prefix: &str, p: &ProcInfo) -> Finding {
    if let Some(pid) = p.pid {
        f = f.evidence(&format!("{prefix}_pid"), pid);
    }
    if let Some(c) = &p.comm {
        f = f.evidence(&format!("{prefix}_comm"), c.as_str());
    }
    if let Some(c) = &p.cmdline {
        f = f.evidence(&format!("{prefix}_cmdline"), c.as_str());
    }
    if let Some(u) = &p.pod_uid {
        f = f.evidence(&format!("{prefix}_pod_uid"), u.as_str());
    }
    if let Some(c) = &p.container_id {
        f = f.evidence(&format!("{prefix}_container_id"), c.as_str());
    }
    if let Some(ns) = &p.pod_namespace {
        f = f.evidence(&format!("{prefix}_pod_namespace"), ns.as_str());
    }
    if let Some(n) = &p.pod_name {
        f = f.evidence(&format!("{prefix}_pod_name"), n.as_str());
    }
    if let Some(c) = &p.container_name {
        f = f.evidence(&format!("{prefix}_container_name"), c.as_str());
    }
    if let Some(c) = &p.host_cgroup {
        f = f.evidence(&format!("{prefix}_cgroup"), c.as_str());
    }
    f
}

/// Commands that name a process and its pod.
fn identify_commands(mut f: Finding, p: &ProcInfo, node: &str) -> Finding {
    if let Some(pid) = p.pid {
        f = f
            .command(cmd!("ps -o pid,etimes,args -p {pid}", pid = pid))
            .command(cmd!("cat /proc/{pid}/cgroup", pid = pid));
    }
    if let (Some(ns), Some(name)) = (&p.pod_namespace, &p.pod_name) {
        f = f.command(cmd!(
            "kubectl -n {ns} describe pod {pod}",
            ns = ns,
            pod = name
        ));
    }
    if let Some(uid) = &p.pod_uid {
        f = f.command(cmd!(
            "kubectl get pods -A --field-selector spec.nodeName={node} -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep {uid}",
            node = node,
            uid = uid
        ));
    }
    if let Some(cid) = &p.container_id {
        let short: String = cid.chars().take(13).collect();
        f = f.command(cmd!("crictl inspect {id}", id = short));
    }
    f
}

/// `iptables.lock_contention` (a hold above the thresholds) and `iptables.lock_waiters`
/// (processes queued on consecutive samples while no hold crossed a threshold).
pub fn lock_findings(w: &Window, lock_path: &str, th: &LockThresholds, node: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    // A pid may wait, get the lock and wait again within one window: name it once.
    let mut waiter_pids: Vec<String> = Vec::new();
    let mut waiter_names: Vec<String> = Vec::new();
    for x in w.current_waiters.iter().chain(w.finished_waiters.iter()) {
        let name = x.waiter.label();
        if waiter_names.contains(&name) {
            continue;
        }
        waiter_names.push(name);
        if let Some(p) = x.waiter.pid {
            waiter_pids.push(p.to_string());
        }
    }
    let lock_key = w.lock.map(|l| l.proc_locks_key());
    // The longest hold per holder pid.
    let mut by_holder: BTreeMap<Option<u32>, &HoldObs> = BTreeMap::new();
    for h in w.current_holds.iter().chain(w.finished_holds.iter()) {
        let e = by_holder.entry(h.holder.pid).or_insert(h);
        if h.held_for > e.held_for {
            *e = h;
        }
    }
    for h in by_holder.values() {
        if h.held_for < th.hold_warning {
            continue;
        }
        let critical = h.held_for >= th.hold_critical;
        let (severity, threshold) = if critical {
            (Severity::Critical, th.hold_critical)
        } else {
            (Severity::Warning, th.hold_warning)
        };
        let who = h.holder.label();
        let (pl_en, pl_zh) = placement(&h.holder);
        let held = secs(h.held_for);
        let (still_en, still_zh) = if h.ongoing {
            ("and still holds it", "且仍未释放")
        } else {
            ("before releasing it", "后才释放")
        };
        let summary = Text::new(
            format!(
                "{who} ({pl_en}) held {lock_path} for {held:.1} s {still_en}, with up to {} process(es) waiting; above the {} threshold of {:.0} s (kube-proxy waits 5 s for this lock).",
                w.max_waiters,
                severity,
                secs(threshold)
            ),
            format!(
                "{who}（{pl_zh}）持有 {lock_path} 达 {held:.1} 秒{still_zh}，最多 {} 个进程排队等待；超过 {:.0} 秒的{}阈值（kube-proxy 等锁只等 5 秒）。",
                w.max_waiters,
                secs(threshold),
                if critical { "严重" } else { "告警" }
            ),
        );
        let subject = match h.holder.pid {
            Some(p) => format!("pid {p}"),
            None => "pid unknown".to_string(),
        };
        let mut f = Finding::new(
            "iptables.lock_contention",
            severity,
            Text::new(
                "A process holds the iptables (xtables) lock for seconds",
                "有进程长时间持有 iptables（xtables）锁",
            ),
            summary,
        )
        .subject(subject)
        .evidence("hold_seconds", held)
        .evidence("still_held", h.ongoing)
        .evidence("threshold_seconds", secs(threshold))
        .evidence("lock_path", lock_path)
        .evidence("lock_class", h.class.as_str())
        .evidence("lock_access", h.access.as_str())
        .evidence("waiters_max", w.max_waiters)
        .evidence("waiter_pids", waiter_pids.join(","))
        .evidence("waiters", waiter_names.join(", "));
        if let Some(k) = &lock_key {
            f = f.evidence("lock_proc_locks_id", k.as_str());
        }
        f = proc_evidence(f, "holder", &h.holder);
        f = f
            .step(Text::new(
                format!("Find out what {who} does while it keeps the lock: every other iptables user on the node, kube-proxy included, is blocked meanwhile, and kube-proxy gives up after 5 s so Service rules stop being synced."),
                format!("查清 {who} 持锁期间在做什么：持锁期间节点上其他 iptables 使用者（包括 kube-proxy）都被阻塞，kube-proxy 等满 5 秒即放弃，Service 规则随之无法同步。"),
            ))
            .step(Text::new(
                "If the holder is kube-router (the TKE NetworkPolicy add-on), older releases keep the lock too long: upgrade it (v1.3.2 is the latest the handbook names). For other components, make them hold the lock only around the actual rule write.",
                "如果持锁者是 kube-router（TKE 的 NetworkPolicy 组件），其老版本持锁时间过长，请升级（手册给出的最新版为 v1.3.2）。其他组件应只在真正写规则时短暂持锁。",
            ));
        if let Some(k) = &lock_key {
            f = f.command(cmd!("grep {key} /proc/locks", key = format!(" {k} ")));
        }
        f = identify_commands(f, &h.holder, node);
        if !waiter_pids.is_empty() {
            f = f.command(cmd!(
                "ps -o pid,etimes,args -p {pids}",
                pids = waiter_pids.join(",")
            ));
        }
        out.push(
            f.source(HANDBOOK, SEC_LONG_HOLD)
                .see_also(see_also::XTABLES_LOCK_HELD),
        );
    }
    if out.is_empty() && w.max_waiter_streak >= th.waiter_streak_samples && w.max_waiters > 0 {
        let queued = secs(th.sample_period) * f64::from(w.max_waiter_streak);
        let longest = w.longest_hold();
        let mut f = Finding::new(
            "iptables.lock_waiters",
            Severity::Warning,
            Text::new(
                "Processes queue for the iptables (xtables) lock",
                "有进程排队等待 iptables（xtables）锁",
            ),
            Text::new(
                format!(
                    "Up to {} process(es) ({}) were blocked on {lock_path} for about {queued:.2} s ({} consecutive samples, threshold {}), although no single hold reached {:.0} s.",
                    w.max_waiters,
                    waiter_names.join(", "),
                    w.max_waiter_streak,
                    th.waiter_streak_samples,
                    secs(th.hold_warning)
                ),
                format!(
                    "最多 {} 个进程（{}）在 {lock_path} 上阻塞约 {queued:.2} 秒（连续 {} 次采样，阈值 {} 次），但单次持锁未达到 {:.0} 秒。",
                    w.max_waiters,
                    waiter_names.join(", "),
                    w.max_waiter_streak,
                    th.waiter_streak_samples,
                    secs(th.hold_warning)
                ),
            ),
        )
        .evidence("waiters_max", w.max_waiters)
        .evidence("waiter_pids", waiter_pids.join(","))
        .evidence("queued_seconds", queued)
        .evidence("lock_path", lock_path);
        if let Some(h) = longest {
            f = f.evidence("longest_hold_seconds", secs(h.held_for));
            f = proc_evidence(f, "holder", &h.holder);
        }
        f = f.step(Text::new(
            "Several components write iptables rules at the same moment and take turns on the lock; if this persists, find which ones hold it and reduce how often or how long they write (kube-proxy sync period, NetworkPolicy agents).",
            "多个组件同时写 iptables 规则、轮流等锁；若持续出现，请找出持锁的组件并降低其写规则的频率或持锁时长（如 kube-proxy 同步周期、NetworkPolicy 组件）。",
        ));
        if let Some(k) = &lock_key {
            f = f.command(cmd!("grep {key} /proc/locks", key = format!(" {k} ")));
        }
        if !waiter_pids.is_empty() {
            f = f.command(cmd!(
                "ps -o pid,etimes,args -p {pids}",
                pids = waiter_pids.join(",")
            ));
        }
        out.push(
            f.source(HANDBOOK, SEC_LONG_HOLD)
                .see_also(see_also::XTABLES_LOCK_HELD),
        );
    }
    out
}

/// A process in the host network namespace but its own mount namespace, whose view of the
/// lock path is not the host's lock file.
#[derive(Debug, Clone, PartialEq)]
pub struct MountGap {
    pub proc: ProcInfo,
    pub mnt_ns: u64,
    /// The lock's identity on the host (`None`: no lock file on the host).
    pub host_lock: Option<LockId>,
    /// The lock's identity inside the process's root (`None`: no file there).
    pub pod_lock: Option<LockId>,
}

/// The handbook's fix, as YAML for the pod spec.
pub fn lock_mount_yaml(lock_path: &str) -> String {
    format!(
        "volumeMounts:\n- mountPath: {lock_path}\n  name: xtables-lock\n  readOnly: false\nvolumes:\n- hostPath:\n    path: {lock_path}\n    type: FileOrCreate\n  name: xtables-lock\n"
    )
}

fn yaml_step(lock_path: &str) -> Text {
    let yaml = lock_mount_yaml(lock_path);
    Text::new(
        format!("Mount the host's lock file into every pod that runs iptables (container volumeMounts and pod volumes), then recreate the pod:\n{yaml}"),
        format!("把宿主机的锁文件挂载进每个会执行 iptables 的 Pod（容器的 volumeMounts 与 Pod 的 volumes），然后重建 Pod：\n{yaml}"),
    )
}

/// `iptables.lock_not_mounted`: one finding per mount namespace.
pub fn mount_findings(gaps: &[MountGap], lock_path: &str, node: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in gaps {
        let who = g.proc.label();
        let (pl_en, pl_zh) = placement(&g.proc);
        let (what_en, what_zh) = match g.pod_lock {
            None => (
                format!("has no {lock_path} at all"),
                format!("挂载命名空间中根本没有 {lock_path}"),
            ),
            Some(l) => (
                format!("sees a different file at {lock_path} (inode {})", l.inode),
                format!(
                    "挂载命名空间中的 {lock_path} 是另一个文件（inode {}）",
                    l.inode
                ),
            ),
        };
        let host_inode = g
            .host_lock
            .map(|l| l.inode.to_string())
            .unwrap_or_else(|| "missing".into());
        let subject = match (&g.proc.pod_uid, g.proc.pid) {
            (Some(uid), _) => format!("pod {uid}"),
            (None, Some(p)) => format!("pid {p}"),
            (None, None) => format!("mnt ns {}", g.mnt_ns),
        };
        let mut f = Finding::new(
            "iptables.lock_not_mounted",
            Severity::Warning,
            Text::new(
                "An iptables user does not share the host's xtables lock",
                "iptables 使用者未挂载宿主机的 xtables 锁",
            ),
            Text::new(
                format!("{who} ({pl_en}) runs in the host network namespace with its own mount namespace and {what_en} (host lock inode {host_inode}); its iptables writes are not serialised with kube-proxy's and can fail with \"iptables-restore: line N failed\"."),
                format!("{who}（{pl_zh}）使用宿主机网络命名空间，但有独立的挂载命名空间，其{what_zh}（宿主机锁 inode {host_inode}）；它写 iptables 时不会与 kube-proxy 互斥，可能导致 \"iptables-restore: line N failed\"。"),
            ),
        )
        .subject(subject)
        .evidence("lock_path", lock_path)
        .evidence("host_lock_inode", host_inode.as_str())
        .evidence(
            "pod_lock_inode",
            g.pod_lock
                .map(|l| l.inode.to_string())
                .unwrap_or_else(|| "missing".into()),
        )
        .evidence("mnt_ns", g.mnt_ns);
        f = proc_evidence(f, "process", &g.proc);
        f = f.step(yaml_step(lock_path));
        if let Some(pid) = g.proc.pid {
            f = f.command(cmd!(
                "stat -c '%d:%i %n' {lock} /proc/{pid}/root{lock}",
                lock = lock_path,
                pid = pid
            ));
        }
        f = identify_commands(f, &g.proc, node);
        out.push(
            f.source(HANDBOOK, SEC_NOT_MOUNTED)
                .see_also(see_also::XTABLES_LOCK_NOT_MOUNTED),
        );
    }
    out
}

/// Backend facts: legacy tables in the kernel and the host's `iptables` symlink target.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackendFacts {
    /// `None` when `/proc/net/ip_tables_names` is absent (legacy module not loaded).
    pub legacy_tables: Option<Vec<String>>,
    pub binary: Option<BinaryBackend>,
}

impl BackendFacts {
    fn host_backend(&self) -> Backend {
        self.binary.as_ref().map_or(Backend::Unknown, |b| b.backend)
    }
    fn legacy_in_use(&self) -> bool {
        self.legacy_tables.as_ref().is_some_and(|t| !t.is_empty())
    }
    fn with_evidence(&self, mut f: Finding) -> Finding {
        f = f.evidence("host_iptables_backend", self.host_backend().as_str());
        if let Some(b) = &self.binary {
            f = f
                .evidence("host_iptables_path", b.path.to_string_lossy().into_owned())
                .evidence("host_iptables_links", b.chain.join(" -> "));
        }
        f.evidence(
            "legacy_tables",
            match &self.legacy_tables {
                Some(t) if !t.is_empty() => t.join(","),
                Some(_) => "none (ip_tables loaded, no table in use)".to_string(),
                None => "none (ip_tables not loaded)".to_string(),
            },
        )
    }
}

/// Upgrade table of the backend mismatch, in our words.
fn backend_upgrade_step() -> Text {
    Text::new(
        "Upgrade kube-proxy to a build that follows the node's backend. By TKE cluster version: above 1.18 not affected; 1.18 -> v1.18.4-tke.26 or later; 1.16 -> v1.16.3-tke.28 or later; 1.14 -> v1.14.3-tke.27 or later; 1.12 -> v1.12.4-tke.31 or later; 1.10 -> v1.10.5-tke.20 or later. Newer OS images (tlinux 2.6 (tk4), tlinux 3.1/3.2, CentOS 8, Ubuntu 20) use the nft backend.",
        "将 kube-proxy 升级到能适配节点后端的版本。按 TKE 集群版本：高于 1.18 不受影响；1.18 升到 v1.18.4-tke.26 及以上；1.16 升到 v1.16.3-tke.28 及以上；1.14 升到 v1.14.3-tke.27 及以上；1.12 升到 v1.12.4-tke.31 及以上；1.10 升到 v1.10.5-tke.20 及以上。较新的系统镜像（tlinux 2.6 (tk4)、tlinux 3.1/3.2、CentOS 8、Ubuntu 20）使用 nft 后端。",
    )
}

const KP_IMAGE_CMD: &str = "kubectl -n kube-system get ds kube-proxy -o jsonpath='{.spec.template.spec.containers[0].image}'";

/// `iptables.backend` (info: which backend the host's `iptables` is and whether legacy tables
/// are loaded, when known) and `iptables.backend_mixed` (legacy tables loaded while the host's
/// iptables is nft).
pub fn backend_findings(b: &BackendFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let backend = b.host_backend();
    if backend != Backend::Unknown || b.legacy_tables.is_some() {
        let legacy = if b.legacy_in_use() {
            "in use"
        } else {
            "not in use"
        };
        let legacy_zh = if b.legacy_in_use() { "有" } else { "没有" };
        let info = Finding::new(
            "iptables.backend",
            Severity::Info,
            Text::new("iptables backend of the node", "节点的 iptables 后端"),
            if backend == Backend::Unknown {
                // No iptables binary (or an unrecognised one) under the host root.
                Text::new(
                    format!(
                        "The host's iptables backend could not be determined (no recognised iptables binary under the host root); legacy tables are {legacy}."
                    ),
                    format!(
                        "无法确定宿主机 iptables 命令的后端（宿主机根目录下没有可识别的 iptables 程序）；内核中{legacy_zh}加载 legacy 表。"
                    ),
                )
            } else {
                Text::new(
                    format!(
                        "The host's iptables command uses the {} backend; legacy tables are {legacy}.",
                        backend.as_str()
                    ),
                    format!(
                        "宿主机的 iptables 命令使用 {} 后端；内核中{legacy_zh}加载 legacy 表。",
                        backend.as_str()
                    ),
                )
            },
        );
        out.push(
            b.with_evidence(info)
                .step(Text::new(
                    "Nothing to do by itself; kube-proxy must use the same backend as the node (older kube-proxy builds only know legacy).",
                    "本身无需处理；kube-proxy 必须与节点使用同一后端（老版本 kube-proxy 只支持 legacy）。",
                ))
                .command("iptables --version")
                .source(HANDBOOK, SEC_BACKEND),
        );
    }
    if !(b.legacy_in_use() && backend == Backend::Nft) {
        return out;
    }
    let tables = b
        .legacy_tables
        .as_ref()
        .map(|t| t.join(","))
        .unwrap_or_default();
    let f = Finding::new(
        "iptables.backend_mixed",
        Severity::Warning,
        Text::new(
            "Legacy iptables tables on an nft host",
            "nft 后端的节点上存在 legacy iptables 表",
        ),
        Text::new(
            format!("The host's iptables command uses the nft backend, yet legacy tables ({tables}) are loaded: some component (often an old kube-proxy) writes rules the host tools do not see, and kube-proxy can fail with \"Couldn't load target KUBE-MARK-DROP\"."),
            format!("宿主机的 iptables 命令使用 nft 后端，但内核中加载了 legacy 表（{tables}）：有组件（常见为老版本 kube-proxy）写入了宿主机工具看不到的规则，kube-proxy 可能报 \"Couldn't load target KUBE-MARK-DROP\"。"),
        ),
    );
    out.push(
        b.with_evidence(f)
        .step(backend_upgrade_step())
        .command("cat /proc/net/ip_tables_names")
        .command("iptables --version")
        .command(
            "iptables-legacy-save 2>/dev/null | grep -c KUBE- ; iptables-nft-save | grep -c KUBE-",
        )
        .command(KP_IMAGE_CMD)
        .source(HANDBOOK, SEC_BACKEND)
        .see_also(see_also::IPTABLES_BACKEND_MISMATCH),
    );
    out
}

/// The handbook's reading of each kube-proxy message.
struct LogRule {
    id: &'static str,
    subject: &'static str,
    severity: Severity,
    title: (&'static str, &'static str),
    meaning: (&'static str, &'static str),
    steps: &'static [(&'static str, &'static str)],
    section: &'static str,
    /// The catalogue entry for the same message (`node-doctor explain`), if any.
    see_also: Option<&'static str>,
}

fn log_rule(kind: LogKind) -> LogRule {
    match kind {
        LogKind::LockNoWait => LogRule {
            id: "iptables.kube_proxy_lock_error",
            subject: "lock_no_wait",
            severity: Severity::Warning,
            title: ("kube-proxy's iptables-restore gives up on a busy xtables lock", "kube-proxy 的 iptables-restore 遇锁即退出"),
            meaning: ("its iptables-restore is too old to wait for the lock (no -w) and exits with status 4 whenever another process holds it; kube-proxy retries on the next sync, so rules arrive late", "其 iptables-restore 版本过旧，不支持 -w 等锁，只要锁被占用就以状态 4 退出；kube-proxy 会在下个同步周期重试，规则下发因此变慢"),
            steps: &[
                ("kube-proxy installed as a node binary: upgrade the node OS so it ships a newer iptables-restore (CentOS 7.2+, Ubuntu 20.04+, Tencent Linux 2.4+).", "kube-proxy 以节点二进制部署时：升级节点操作系统以获得新版 iptables-restore（CentOS 7.2 及以上、Ubuntu 20.04 及以上、Tencent Linux 2.4 及以上）。"),
                ("kube-proxy as a DaemonSet: clusters above 1.12 are not affected; on 1.12 upgrade kube-proxy to v1.12.4-tke.31 or later; below 1.12 upgrade the cluster.", "kube-proxy 以 DaemonSet 部署时：1.12 以上集群不受影响；1.12 集群将 kube-proxy 升到 v1.12.4-tke.31 及以上；低于 1.12 请升级集群。"),
            ],
            section: SEC_NO_WAIT,
            see_also: Some(see_also::XTABLES_LOCK),
        },
        LogKind::LockTimeout => LogRule {
            id: "iptables.kube_proxy_lock_error",
            subject: "lock_timeout",
            severity: Severity::Critical,
            title: ("kube-proxy waited 5 s for the xtables lock and gave up", "kube-proxy 等待 xtables 锁 5 秒后放弃"),
            meaning: ("another component kept the lock longer than the 5 s kube-proxy waits, so the rule update failed with status 4", "其他组件持锁超过 kube-proxy 的 5 秒等待时间，规则更新以状态 4 失败"),
            steps: &[
                ("Find the component that keeps the lock (see the iptables.lock_contention finding, or /proc/locks) and shorten its hold.", "找出长时间持锁的组件（见 iptables.lock_contention 结论或 /proc/locks），缩短其持锁时间。"),
                ("The TKE NetworkPolicy add-on (kube-router) holds the lock too long in older releases: upgrade it (v1.3.2 is the latest the handbook names).", "TKE 的 NetworkPolicy 组件（kube-router）老版本持锁过久：请升级（手册给出的最新版为 v1.3.2）。"),
            ],
            section: SEC_LONG_HOLD,
            see_also: Some(see_also::XTABLES_LOCK_HELD),
        },
        LogKind::RestoreLineFailed => LogRule {
            id: "iptables.kube_proxy_restore_failed",
            subject: "",
            severity: Severity::Critical,
            title: ("kube-proxy's iptables-restore fails on a rule line", "kube-proxy 的 iptables-restore 写规则失败"),
            meaning: ("iptables-restore exited with status 1 (\"line N failed\"), the mark of a concurrent writer that does not take the host's /run/xtables.lock", "iptables-restore 以状态 1 退出（\"line N failed\"），说明有并发写者没有使用宿主机的 /run/xtables.lock"),
            steps: &[
                ("Check every pod that runs iptables on this node (kube-proxy, kube-router, hostNetwork pods): each must mount the host's /run/xtables.lock (see iptables.lock_not_mounted findings).", "检查本节点所有会执行 iptables 的 Pod（kube-proxy、kube-router、hostNetwork Pod）：每个都必须挂载宿主机的 /run/xtables.lock（见 iptables.lock_not_mounted 结论）。"),
            ],
            section: SEC_NOT_MOUNTED,
            see_also: Some(see_also::XTABLES_LOCK_NOT_MOUNTED),
        },
        LogKind::MarkDropMissing => LogRule {
            id: "iptables.backend_mismatch",
            subject: "",
            severity: Severity::Critical,
            title: ("kube-proxy uses a different iptables backend from the node", "kube-proxy 与节点的 iptables 后端不一致"),
            meaning: ("iptables-restore exited with status 2 because the KUBE-MARK-DROP chain (kept by kubelet) is not where kube-proxy looks: a legacy-backend kube-proxy on an OS whose iptables is nft", "iptables-restore 以状态 2 退出，因为 kube-proxy 找不到由 kubelet 维护的 KUBE-MARK-DROP 链：老版本 kube-proxy 使用 legacy 后端，而系统使用 nft"),
            steps: &[],
            section: SEC_BACKEND,
            see_also: Some(see_also::IPTABLES_BACKEND_MISMATCH),
        },
        LogKind::ApiserverStreamError => LogRule {
            id: "iptables.kube_proxy_apiserver_stream_error",
            subject: "",
            severity: Severity::Warning,
            title: ("kube-proxy reuses a closed connection to kube-apiserver", "kube-proxy 复用了已关闭的 kube-apiserver 连接"),
            meaning: ("an http2 client bug of older Kubernetes (kubernetes issue 87615, fixed by PR 95981) makes list calls fail on a closed connection, so rule syncs fail", "老版本 Kubernetes 的 http2 客户端缺陷（kubernetes issue 87615，PR 95981 修复）导致 list 请求落到已关闭的连接上，规则同步失败"),
            steps: &[
                ("By TKE cluster version: above 1.18 not affected; 1.18 -> upgrade kube-proxy to v1.18.4-tke.26 or later; below 1.18 upgrade the cluster.", "按 TKE 集群版本：高于 1.18 不受影响；1.18 将 kube-proxy 升到 v1.18.4-tke.26 及以上；低于 1.18 请升级集群。"),
            ],
            section: SEC_STREAM,
            see_also: Some(see_also::KUBE_PROXY_STALE_CONNECTION),
        },
        LogKind::PanicNilPointer => LogRule {
            id: "iptables.kube_proxy_panic",
            subject: "nil_pointer",
            severity: Severity::Warning,
            title: ("kube-proxy panicked with a nil pointer dereference", "kube-proxy 发生空指针 panic"),
            meaning: ("a known 1.18 bug leaves a variable uninitialised when loaded kernel modules are counted at start-up (kubernetes issue 89729); the restarted process usually runs", "1.18 已知缺陷：启动时统计已加载内核模块不全，导致变量未初始化就被使用（kubernetes issue 89729）；重启后通常恢复"),
            steps: &[
                ("Only 1.18 clusters are affected: upgrade kube-proxy to v1.18.4-tke.26 or later.", "仅 1.18 集群受影响：将 kube-proxy 升到 v1.18.4-tke.26 及以上。"),
            ],
            section: SEC_PANIC_FIRST,
            see_also: Some(see_also::KUBE_PROXY_PANIC_NIL_POINTER),
        },
        LogKind::PanicSliceBounds => LogRule {
            id: "iptables.kube_proxy_panic",
            subject: "slice_bounds",
            severity: Severity::Critical,
            title: ("kube-proxy panics repeatedly (slice bounds out of range)", "kube-proxy 反复 panic（slice bounds out of range）"),
            meaning: ("a known bug mixes iptables-save's stdout and stderr in one buffer and panics while parsing it (kubernetes issue 78443, PR 78428); it keeps recurring", "已知缺陷：iptables-save 的标准输出和标准错误写进同一缓冲区，解析时 panic（kubernetes issue 78443、PR 78428），会反复出现"),
            steps: &[
                ("By TKE cluster version: 1.14 -> upgrade kube-proxy to v1.14.3-tke.27 or later; 1.12 -> v1.12.4-tke.31 or later; other versions are not affected.", "按 TKE 集群版本：1.14 将 kube-proxy 升到 v1.14.3-tke.27 及以上；1.12 升到 v1.12.4-tke.31 及以上；其他版本不受影响。"),
            ],
            section: SEC_PANIC_LOOP,
            see_also: Some(see_also::KUBE_PROXY_PANIC_SLICE_BOUNDS),
        },
    }
}

/// Findings from kube-proxy's logs: one per kind of message seen at or after `since`
/// (Unix seconds).
pub fn log_findings(
    stats: &BTreeMap<LogKind, KindStats>,
    since: i64,
    window: Duration,
    backend: &BackendFacts,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (kind, s) in stats {
        let recent = s.recent_count(since);
        if recent == 0 {
            continue;
        }
        let r = log_rule(*kind);
        let mins = secs(window) / 60.0;
        let mut f = Finding::new(
            r.id,
            r.severity,
            Text::new(r.title.0, r.title.1),
            Text::new(
                format!(
                    "kube-proxy logged this {recent} time(s) in the last {mins:.0} min (last at {}): {}.",
                    s.last_time, r.meaning.0
                ),
                format!(
                    "kube-proxy 在最近 {mins:.0} 分钟内记录了 {recent} 次（最近一次 {}）：{}。",
                    s.last_time, r.meaning.1
                ),
            ),
        )
        .subject(r.subject)
        .evidence("kind", kind.as_str())
        .evidence("matches_recent", recent)
        .evidence("matches_total", s.total)
        .evidence("window_seconds", window.as_secs())
        .evidence("last_seen", s.last_time.as_str())
        .evidence("last_message", s.last_message.as_str())
        .evidence("log_file", s.last_file.as_str());
        for (en, zh) in r.steps {
            f = f.step(Text::new(*en, *zh));
        }
        match kind {
            LogKind::MarkDropMissing => {
                f = backend
                    .with_evidence(f)
                    .step(backend_upgrade_step())
                    .command("iptables --version")
                    .command("cat /proc/net/ip_tables_names");
            }
            LogKind::RestoreLineFailed => {
                f = f.step(yaml_step("/run/xtables.lock"));
            }
            _ => {}
        }
        f = f
            .command(cmd!(
                "grep -cE {pattern} {file}",
                pattern = kind.grep_pattern(),
                file = &s.last_file
            ))
            .command(KP_IMAGE_CMD);
        f = f.source(HANDBOOK, r.section);
        if let Some(key) = r.see_also {
            f = f.see_also(key);
        }
        out.push(f);
    }
    out
}

/// The collector's metrics.
pub fn metrics(
    w: &Window,
    stats: &BTreeMap<LogKind, KindStats>,
    backend: &BackendFacts,
) -> Vec<Metric> {
    let current = w
        .current_holds
        .iter()
        .map(|h| h.held_for)
        .max()
        .unwrap_or_default();
    let longest = w.longest_hold().map(|h| h.held_for).unwrap_or_default();
    let mut v = vec![
        Metric::gauge(
            "node_doctor_iptables_lock_held",
            "1 when the last sample of /proc/locks showed the xtables lock held, else 0.",
            if w.current_holds.is_empty() { 0.0 } else { 1.0 },
        ),
        Metric::gauge(
            "node_doctor_iptables_lock_hold_seconds",
            "How long the current holder of the xtables lock has held it (0 when free).",
            secs(current),
        ),
        Metric::gauge(
            "node_doctor_iptables_lock_longest_hold_seconds",
            "Longest xtables lock hold seen since the previous collection.",
            secs(longest),
        ),
        Metric::gauge(
            "node_doctor_iptables_lock_waiters",
            "Most processes blocked on the xtables lock at once since the previous collection.",
            w.max_waiters as f64,
        ),
        Metric::gauge(
            "node_doctor_iptables_legacy_tables",
            "Number of legacy iptables tables loaded (/proc/net/ip_tables_names).",
            backend.legacy_tables.as_ref().map_or(0, |t| t.len()) as f64,
        ),
    ];
    for kind in LogKind::ALL {
        let total = stats.get(&kind).map_or(0, |s| s.total);
        v.push(
            Metric::counter(
                "node_doctor_iptables_kube_proxy_errors_total",
                "kube-proxy log lines matching a handbook error, by kind, since the agent started.",
                total as f64,
            )
            .label("kind", kind.as_str()),
        );
    }
    v
}
