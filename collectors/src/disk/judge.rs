//! The disk rules: typed samples in, findings out. No file access here.
//!
//! Handbook: `002_af370464fa0f13dd.txt`, 节点磁盘爆满排障处理 (lines 1–165), and the disk-full
//! parts of the ContainerCreating and Terminating sections.

use crate::cmd;
use crate::collector::CollectContext;
use crate::explain::see_also;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::runtime::discover::Role;
use crate::runtime::docker::DaemonConfig;
use crate::runtime::kubelet::{Settings, Threshold};
use crate::shell::Cmd;
use crate::sys::statvfs::FsUsage;

use super::deleted::DeletedFile;
use super::logs::LogFile;
use super::walk::DirSizes;

/// The handbook section every disk-full finding cites.
pub const SECTION: &str = "节点磁盘爆满排障处理";
/// The handbook's prevention subsection (cited by the prevention findings).
pub const SECTION_PREVENT: &str = "如何规避磁盘爆满？";

/// A directory serving a role, with its host-side path (symlinks resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleDir {
    pub role: Role,
    pub host_path: String,
}

/// One filesystem serving one or more roles, with what fills it.
#[derive(Debug, Clone, PartialEq)]
pub struct FsSample {
    pub mount_point: String,
    pub device: String,
    pub fstype: String,
    /// `st_dev` of the role directories.
    pub dev: u64,
    pub roles: Vec<RoleDir>,
    pub usage: FsUsage,
    /// The largest container logs on this filesystem, largest first.
    pub logs: Vec<LogFile>,
    /// Top-level directory sizes per walked role root (host path, figures).
    pub dirs: Vec<(Role, String, DirSizes)>,
    /// Deleted-but-open files on this filesystem (when scanned).
    pub deleted: Vec<DeletedFile>,
}

impl FsSample {
    pub fn has(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r.role == role)
    }

    pub fn role_names(&self) -> String {
        self.roles
            .iter()
            .map(|r| r.role.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn path_of(&self, role: Role) -> Option<&str> {
        self.roles
            .iter()
            .find(|r| r.role == role)
            .map(|r| r.host_path.as_str())
    }
}

/// Fixed limits that apply besides the kubelet's own thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Critical under this many free bytes (only on filesystems larger than ten times it).
    pub min_free_bytes: u64,
    /// Critical at or above this used share.
    pub critical_used_percent: f64,
    /// Warning within this many percentage points of an eviction threshold.
    pub warning_margin_percent: f64,
    /// A deleted-open finding needs at least this many bytes held...
    pub deleted_min_bytes: u64,
    /// ...or this share of the filesystem.
    pub deleted_min_percent: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_free_bytes: 1 << 30,
            critical_used_percent: 95.0,
            warning_margin_percent: 5.0,
            deleted_min_bytes: 1 << 30,
            deleted_min_percent: 5.0,
        }
    }
}

/// A judgement of space or inodes: how bad, and the threshold that decided it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub severity: Option<Severity>,
    /// The threshold that applies, e.g. `imagefs.available<15%`.
    pub threshold: String,
    /// Where it came from, e.g. `kubelet default`, `evictionHard in /var/lib/kubelet/config.yaml`.
    pub origin: String,
    /// Why, in a phrase (English / Chinese).
    pub why: Text,
}

impl Verdict {
    fn ok() -> Verdict {
        Verdict {
            severity: None,
            threshold: String::new(),
            origin: String::new(),
            why: Text::default(),
        }
    }

    fn consider(&mut self, other: Verdict) {
        if other.severity > self.severity {
            *self = other;
        }
    }
}

/// The origin of a threshold for Chinese text (paths and flags stay as written).
fn origin_zh(origin: &str) -> String {
    match origin {
        "kubelet default" => "kubelet 默认值".to_string(),
        "kubelet default (none)" => "kubelet 默认无".to_string(),
        "node-doctor limit" => "node-doctor 限值".to_string(),
        o => o
            .replace(
                "flag of the running kubelet",
                "（运行中 kubelet 的启动参数）",
            )
            .replace(" in ", " 位于 "),
    }
}

fn fmt_threshold(t: &Threshold) -> String {
    match *t {
        Threshold::Percent(p) => format!("{p}%"),
        Threshold::Quantity(q) => human_bytes(q as u64),
    }
}

/// `1.5 GiB`, `512 MiB`, `10 KiB`, `12 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// Judges the space of a filesystem against the kubelet's thresholds for the signals its
/// roles map to (nodefs for the kubelet root, imagefs for the runtime data root), the
/// image GC high threshold (image roles) and the fixed limits.
pub fn assess_space(fs: &FsSample, s: &Settings, l: &Limits) -> Verdict {
    assess(fs, s, l, false)
}

/// Judges the inodes of a filesystem (`*.inodesFree`, and the fixed used share).
pub fn assess_inodes(fs: &FsSample, s: &Settings, l: &Limits) -> Verdict {
    if fs.usage.files == 0 {
        // btrfs and some network filesystems report no inode counts.
        return Verdict::ok();
    }
    assess(fs, s, l, true)
}

fn assess(fs: &FsSample, s: &Settings, l: &Limits, inodes: bool) -> Verdict {
    let u = &fs.usage;
    let (cap, free, used_pct) = if inodes {
        (u.files as f64, u.files_free as f64, u.inodes_used_percent())
    } else {
        (u.size_bytes as f64, u.avail_bytes as f64, u.used_percent())
    };
    let suffix = if inodes { "inodesFree" } else { "available" };
    let mut v = Verdict::ok();
    let mut families: Vec<&str> = fs.roles.iter().filter_map(|r| r.role.signal()).collect();
    families.sort_unstable();
    families.dedup();
    let margin = cap * l.warning_margin_percent / 100.0;
    for fam in &families {
        let signal = format!("{fam}.{suffix}");
        if let Some(t) = s.eviction_hard.get(&signal).filter(|t| !t.is_zero()) {
            let min_free = t.min_free(cap);
            let thr = format!("{signal}<{}", fmt_threshold(t));
            if free <= min_free {
                v.consider(Verdict {
                    severity: Some(Severity::Critical),
                    threshold: thr.clone(),
                    origin: s.hard_origin.clone(),
                    why: Text::new(
                        format!(
                            "at or past the kubelet's hard eviction threshold {thr} ({})",
                            s.hard_origin
                        ),
                        format!(
                            "已达到 kubelet 硬驱逐阈值 {thr}（来源：{}）",
                            origin_zh(&s.hard_origin)
                        ),
                    ),
                });
            } else if free <= min_free + margin {
                v.consider(Verdict {
                    severity: Some(Severity::Warning),
                    threshold: thr.clone(),
                    origin: s.hard_origin.clone(),
                    why: Text::new(
                        format!(
                            "within {} points of the kubelet's hard eviction threshold {thr} ({})",
                            l.warning_margin_percent, s.hard_origin
                        ),
                        format!(
                            "距 kubelet 硬驱逐阈值 {thr} 不足 {} 个百分点（来源：{}）",
                            l.warning_margin_percent,
                            origin_zh(&s.hard_origin)
                        ),
                    ),
                });
            }
        }
        if let Some(t) = s.eviction_soft.get(&signal).filter(|t| !t.is_zero()) {
            let thr = format!("{signal}<{}", fmt_threshold(t));
            if free <= t.min_free(cap) {
                v.consider(Verdict {
                    severity: Some(Severity::Warning),
                    threshold: thr.clone(),
                    origin: s.soft_origin.clone(),
                    why: Text::new(
                        format!(
                            "past the kubelet's soft eviction threshold {thr} ({})",
                            s.soft_origin
                        ),
                        format!(
                            "已超过 kubelet 软驱逐阈值 {thr}（来源：{}）",
                            origin_zh(&s.soft_origin)
                        ),
                    ),
                });
            }
        }
    }
    if !inodes && fs.roles.iter().any(|r| r.role.is_image()) {
        let gc = s.image_gc_high_percent;
        if gc < 100.0 && used_pct > gc {
            v.consider(Verdict {
                severity: Some(Severity::Warning),
                threshold: format!("imageGCHighThresholdPercent={gc}"),
                origin: s.gc_origin.clone(),
                why: Text::new(
                    format!(
                        "past the kubelet's image GC high threshold {gc}% ({})",
                        s.gc_origin
                    ),
                    format!(
                        "已超过 kubelet 镜像回收高水位 {gc}%（来源：{}）",
                        origin_zh(&s.gc_origin)
                    ),
                ),
            });
        }
    }
    // Fixed limits, whatever the kubelet says (it may not run, or not protect this disk).
    let crit_pct = l.critical_used_percent;
    if used_pct >= crit_pct {
        v.consider(Verdict {
            severity: Some(Severity::Critical),
            threshold: format!("used>={crit_pct}%"),
            origin: "node-doctor limit".into(),
            why: Text::new(
                format!("at or above node-doctor's {crit_pct}% used limit"),
                format!("使用率达到 node-doctor 的 {crit_pct}% 上限"),
            ),
        });
    }
    let min_free = l.min_free_bytes as f64;
    if !inodes && cap >= 10.0 * min_free && free < min_free {
        let thr = human_bytes(l.min_free_bytes);
        v.consider(Verdict {
            severity: Some(Severity::Critical),
            threshold: format!("available<{thr}"),
            origin: "node-doctor limit".into(),
            why: Text::new(
                format!("under node-doctor's {thr} free limit"),
                format!("可用空间低于 node-doctor 的 {thr} 下限"),
            ),
        });
    }
    v
}

fn drain(ctx: &CollectContext) -> Cmd {
    cmd!(
        "kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
        node = &ctx.node_name
    )
}

fn uncordon(ctx: &CollectContext) -> Cmd {
    cmd!("kubectl uncordon {node}", node = &ctx.node_name)
}

/// Rotated logs in the order the handbook empties them: oldest rotation first, then size.
fn truncation_order(logs: &[LogFile]) -> Vec<&LogFile> {
    let mut rotated: Vec<&LogFile> = logs.iter().filter(|l| l.rotated).collect();
    rotated.sort_by(|a, b| {
        b.age_rank
            .cmp(&a.age_rank)
            .then_with(|| b.size_bytes.cmp(&a.size_bytes))
    });
    let mut live: Vec<&LogFile> = logs.iter().filter(|l| !l.rotated).collect();
    live.sort_by_key(|l| std::cmp::Reverse(l.size_bytes));
    rotated.extend(live);
    rotated
}

/// `disk.filesystem_full`: a runtime or kubelet filesystem at or near its limit, with what
/// fills it and the handbook's recovery.
pub fn filesystem_full(
    fs: &FsSample,
    verdict: &Verdict,
    ctx: &CollectContext,
    host_path: &dyn Fn(&std::path::Path) -> String,
) -> Option<Finding> {
    let severity = verdict.severity?;
    let u = &fs.usage;
    let used = u.used_percent();
    let avail = human_bytes(u.avail_bytes);
    let size = human_bytes(u.size_bytes);
    let roles = fs.role_names();
    let mut f = Finding::new(
        "disk.filesystem_full",
        severity,
        Text::new(
            "Container runtime or kubelet filesystem is filling up",
            "容器运行时或 kubelet 所在磁盘即将写满",
        ),
        Text::new(
            format!(
                "{mp} ({roles}) is {used:.1}% used with {avail} available of {size}: {why}.",
                mp = fs.mount_point,
                why = verdict.why.en
            ),
            format!(
                "{mp}（{roles}）已使用 {used:.1}%，可用 {avail}，总量 {size}：{why}。",
                mp = fs.mount_point,
                why = verdict.why.zh
            ),
        ),
    )
    .subject(fs.mount_point.clone())
    .evidence("mount_point", fs.mount_point.as_str())
    .evidence("device", fs.device.as_str())
    .evidence("fstype", fs.fstype.as_str())
    .evidence("roles", roles.as_str())
    .evidence("size_bytes", u.size_bytes)
    .evidence("available_bytes", u.avail_bytes)
    .evidence("used_percent", used)
    .evidence("threshold", verdict.threshold.as_str())
    .evidence("threshold_source", verdict.origin.as_str());

    // What fills it: logs, top directories, deleted-but-open files.
    if let Some(top) = fs.logs.first() {
        f = f
            .evidence("largest_log_path", host_path(&top.path))
            .evidence("largest_log_bytes", top.size_bytes)
            .evidence("largest_log_rotated", top.rotated);
        // Owner names only when known: no empty evidence values.
        for (key, value) in [
            ("largest_log_namespace", &top.namespace),
            ("largest_log_pod", &top.pod),
            ("largest_log_container", &top.container),
        ] {
            if let Some(v) = value {
                f = f.evidence(key, v.as_str());
            }
        }
        let total: u64 = fs.logs.iter().map(|l| l.size_bytes).sum();
        f = f.evidence("top_logs_bytes", total);
    }
    for (role, _, sizes) in &fs.dirs {
        for (name, bytes) in sizes.entries.iter().take(5) {
            f = f.evidence(&format!("dir_{}_{}_bytes", role.as_str(), name), *bytes);
        }
        f = f
            .evidence(
                &format!("walk_{}_complete_ratio", role.as_str()),
                sizes.complete_ratio,
            )
            .evidence(&format!("walk_{}_entries", role.as_str()), sizes.files);
    }
    let held = super::deleted::total(&fs.deleted, fs.dev);
    if !fs.deleted.is_empty() {
        f = f.evidence("deleted_open_bytes", held);
    }

    // Recovery, in the handbook's order.
    f = f
        .step(Text::new(
            "Confirm which directories of the runtime and the kubelet sit on this filesystem.",
            "先确认容器运行时和 kubelet 的目录是否位于这块已满的磁盘上。",
        ))
        .command(cmd!("df -h {mount_point}", mount_point = &fs.mount_point));
    let order = truncation_order(&fs.logs);
    if !order.is_empty() {
        f = f.step(Text::new(
            "Free some room first so the runtime can stop cleanly: empty the largest container logs with `cat /dev/null >`, oldest rotation (highest number) first. Do not `rm` them: a file the runtime still holds open keeps its space until it is closed.",
            "先腾出少量空间，保证运行时能正常停止：用 `cat /dev/null >` 清空最大的容器日志，优先处理编号最大（最旧）的轮转文件。不要用 `rm`：被进程打开着的文件删除后空间并不会释放。",
        ));
        for l in order {
            f = f.command(cmd!("cat /dev/null > {file}", file = host_path(&l.path)));
        }
    }
    if let Some(d) = fs.path_of(Role::DockerData) {
        f = f.command(cmd!(
            "du -sh {data_root}/containers/* | sort -h | tail -n 20",
            data_root = d
        ));
    }
    if held > 0 {
        if let Some((pid, _, _, fd)) = super::deleted::holders(&fs.deleted, fs.dev).first() {
            f = f.command(cmd!("ls -l /proc/{pid}/fd | grep '(deleted)'", pid = pid));
            f = f.command(cmd!(
                "cat /dev/null > /proc/{pid}/fd/{fd}",
                pid = pid,
                fd = fd
            ));
        }
    }
    f = f
        .step(Text::new(
            "Cordon the node and move its pods elsewhere, so the runtime drops their containers, logs and writable layers when it restarts.",
            "将节点设为不可调度并驱逐其上的 Pod，使运行时重启时一并清除这些容器的日志和可写层。",
        ))
        .command(drain(ctx));
    let runtime = if fs.has(Role::DockerData) || fs.has(Role::DockerExec) {
        Some("docker")
    } else if fs.has(Role::ContainerdRoot) || fs.has(Role::ContainerdState) {
        Some("containerd")
    } else {
        None
    };
    if let Some(rt) = runtime {
        f = f
            .step(Text::new(
                format!("Restart {rt} once some space is free; a runtime stuck on a full disk often hangs until then."),
                format!("腾出空间后重启 {rt}；磁盘写满时运行时往往会卡住，需先清理再重启。"),
            ))
            .command(if rt == "docker" {
                Cmd::fixed("systemctl restart docker")
            } else {
                Cmd::fixed("systemctl restart containerd")
            });
    }
    f = f
        .step(Text::new(
            "When the pods have moved, find what filled the disk (the largest directories and logs above) and clean it up; then make sure kubelet image GC and eviction thresholds, docker log-opts max-size/max-file and kubelet containerLogMaxSize are set so it cannot recur.",
            "Pod 迁走后，根据上面列出的最大目录和日志找出写满磁盘的原因并清理；再检查 kubelet 的镜像回收与驱逐阈值、docker 的 log-opts max-size/max-file、kubelet 的 containerLogMaxSize 是否配置，避免再次发生。",
        ))
        .step(Text::new(
            "Make the node schedulable again.",
            "恢复节点可调度。",
        ))
        .command(uncordon(ctx))
        .source(HANDBOOK, SECTION)
        .see_also(see_also::DISK_FULL);
    Some(f)
}

/// `disk.inodes_exhausted`: a runtime or kubelet filesystem running out of inodes.
pub fn inodes_exhausted(fs: &FsSample, verdict: &Verdict, ctx: &CollectContext) -> Option<Finding> {
    let severity = verdict.severity?;
    let u = &fs.usage;
    let used = u.inodes_used_percent();
    let roles = fs.role_names();
    let mut f = Finding::new(
        "disk.inodes_exhausted",
        severity,
        Text::new(
            "Container runtime or kubelet filesystem is running out of inodes",
            "容器运行时或 kubelet 所在磁盘 inode 即将耗尽",
        ),
        Text::new(
            format!(
                "{mp} ({roles}) has {free} of {files} inodes free ({used:.1}% used): {why}.",
                mp = fs.mount_point,
                free = u.files_free,
                files = u.files,
                why = verdict.why.en
            ),
            format!(
                "{mp}（{roles}）仅剩 {free}/{files} 个 inode（已用 {used:.1}%）：{why}。",
                mp = fs.mount_point,
                free = u.files_free,
                files = u.files,
                why = verdict.why.zh
            ),
        ),
    )
    .subject(fs.mount_point.clone())
    .evidence("mount_point", fs.mount_point.as_str())
    .evidence("device", fs.device.as_str())
    .evidence("roles", roles.as_str())
    .evidence("inodes", u.files)
    .evidence("inodes_free", u.files_free)
    .evidence("inodes_used_percent", used)
    .evidence("threshold", verdict.threshold.as_str())
    .evidence("threshold_source", verdict.origin.as_str())
    .step(Text::new(
        "Find the directories holding the most files on this filesystem; many small files (pod emptyDir volumes, image layers, leftover sockets or caches) exhaust inodes long before space.",
        "找出这块磁盘上文件数最多的目录；大量小文件（Pod 的 emptyDir、镜像层、残留的缓存文件）会先于空间耗尽 inode。",
    ))
    .command(cmd!("df -i {mount_point}", mount_point = &fs.mount_point));
    for r in &fs.roles {
        f = f.command(cmd!(
            "du --inodes -x -d 2 {dir} | sort -n | tail -n 20",
            dir = &r.host_path
        ));
    }
    f = f
        .step(Text::new(
            "Cordon and drain the node, remove the files (or the pods producing them), then make it schedulable again.",
            "将节点设为不可调度并驱逐 Pod，清理这些文件（或产生它们的 Pod）后再恢复调度。",
        ))
        .command(drain(ctx))
        .command(uncordon(ctx))
        .source(HANDBOOK, SECTION)
        .see_also(see_also::DISK_FULL);
    Some(f)
}

/// `disk.deleted_open_files`: space on a runtime/kubelet filesystem held by deleted files
/// that a process keeps open.
pub fn deleted_open_files(
    fs: &FsSample,
    fs_severity: Option<Severity>,
    l: &Limits,
) -> Option<Finding> {
    let held = super::deleted::total(&fs.deleted, fs.dev);
    let share = if fs.usage.size_bytes == 0 {
        0.0
    } else {
        held as f64 * 100.0 / fs.usage.size_bytes as f64
    };
    if held == 0 || (held < l.deleted_min_bytes && share < l.deleted_min_percent) {
        return None;
    }
    let holders = super::deleted::holders(&fs.deleted, fs.dev);
    let (pid, comm, bytes, fd) = holders.first()?.clone();
    let severity = if fs_severity == Some(Severity::Critical) {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let example = fs
        .deleted
        .iter()
        .filter(|d| d.pid == pid && d.fd == fd)
        .map(|d| d.path.clone())
        .next()
        .unwrap_or_default();
    let mut f = Finding::new(
        "disk.deleted_open_files",
        severity,
        Text::new(
            "Deleted files still hold disk space",
            "已删除的文件仍占用磁盘空间",
        ),
        Text::new(
            format!(
                "{h} ({share:.1}% of {mp}) is held by deleted files that processes keep open; the largest holder is pid {pid} ({comm}) with {b}. Removing a file with rm frees nothing while a process holds it.",
                h = human_bytes(held),
                mp = fs.mount_point,
                b = human_bytes(bytes)
            ),
            format!(
                "{mp} 上有 {h}（{share:.1}%）被已删除但仍被进程打开的文件占用；占用最多的是 pid {pid}（{comm}），共 {b}。进程仍持有的文件用 rm 删除并不会释放空间。",
                h = human_bytes(held),
                mp = fs.mount_point,
                b = human_bytes(bytes)
            ),
        ),
    )
    .subject(fs.mount_point.clone())
    .evidence("mount_point", fs.mount_point.as_str())
    .evidence("deleted_open_bytes", held)
    .evidence("deleted_open_percent", share)
    .evidence("top_pid", pid)
    .evidence("top_comm", comm.as_str())
    .evidence("top_bytes", bytes)
    .evidence("top_fd", fd)
    .evidence("top_path", example.as_str())
    .evidence("holders", holders.len());
    for (i, (p, c, b, _)) in holders.iter().enumerate().skip(1).take(4) {
        f = f.evidence(&format!("holder_{}", i + 1), format!("{p} {c} {b}"));
    }
    f = f
        .step(Text::new(
            "Look at the holder's open descriptors that point to deleted files.",
            "查看该进程打开着的、已被删除的文件描述符。",
        ))
        .command(cmd!("ls -l /proc/{pid}/fd | grep '(deleted)'", pid = pid))
        .step(Text::new(
            "Release the space without stopping the process by emptying the file through its descriptor; or restart the holder (for dockerd or containerd, drain the node first). Next time empty logs with `cat /dev/null >` instead of `rm`.",
            "可通过文件描述符清空该文件，在不停进程的情况下释放空间；或重启持有它的进程（若是 dockerd/containerd，先驱逐节点上的 Pod）。以后清理日志请用 `cat /dev/null >`，不要用 `rm`。",
        ))
        .command(cmd!("cat /dev/null > /proc/{pid}/fd/{fd}", pid = pid, fd = fd))
        .source(HANDBOOK, SECTION)
        .see_also(see_also::DISK_FULL);
    Some(f)
}

/// `disk.kubelet_unprotected`: kubelet settings that leave the disk without eviction or
/// image GC.
pub fn kubelet_unprotected(s: &Settings, config_path: &str) -> Option<Finding> {
    let mut problems: Vec<(String, String)> = Vec::new();
    for signal in ["nodefs.available", "imagefs.available", "nodefs.inodesFree"] {
        match s.eviction_hard.get(signal) {
            None => problems.push((
                format!(
                    "no hard eviction threshold for {signal} ({})",
                    s.hard_origin
                ),
                format!("{signal} 没有硬驱逐阈值（{}）", origin_zh(&s.hard_origin)),
            )),
            Some(t) if t.is_zero() => problems.push((
                format!(
                    "{signal} hard eviction threshold is 0, which disables it ({})",
                    s.hard_origin
                ),
                format!(
                    "{signal} 硬驱逐阈值为 0，等于关闭（{}）",
                    origin_zh(&s.hard_origin)
                ),
            )),
            Some(_) => {}
        }
    }
    if s.image_gc_high_percent >= 100.0 {
        problems.push((
            format!(
                "image GC high threshold is {}%, so images are never collected ({})",
                s.image_gc_high_percent, s.gc_origin
            ),
            format!(
                "镜像回收高水位为 {}%，镜像永远不会被回收（{}）",
                s.image_gc_high_percent,
                origin_zh(&s.gc_origin)
            ),
        ));
    }
    if problems.is_empty() {
        return None;
    }
    let en: Vec<&str> = problems.iter().map(|p| p.0.as_str()).collect();
    let zh: Vec<&str> = problems.iter().map(|p| p.1.as_str()).collect();
    let mut f = Finding::new(
        "disk.kubelet_unprotected",
        Severity::Warning,
        Text::new(
            "Kubelet does not protect the node's disk",
            "kubelet 未对节点磁盘做保护",
        ),
        Text::new(
            format!("The kubelet will let the disk fill up: {}.", en.join("; ")),
            format!("kubelet 不会阻止磁盘被写满：{}。", zh.join("；")),
        ),
    )
    .subject("kubelet")
    .evidence("config_path", config_path)
    .evidence("eviction_hard_source", s.hard_origin.as_str())
    .evidence("image_gc_high_threshold_percent", s.image_gc_high_percent)
    .evidence("problems", problems.len());
    for (k, t) in &s.eviction_hard {
        f = f.evidence(&format!("eviction_hard_{k}"), fmt_threshold(t));
    }
    f.step(Text::new(
        "Give the kubelet disk eviction thresholds (for example nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%) and an image GC high threshold below 100 (85 is the default), in its config file or flags; when setting evictionHard list every signal, as the ones left out get no threshold.",
        "在 kubelet 配置文件或启动参数中设置磁盘驱逐阈值（如 nodefs.available<10%、nodefs.inodesFree<5%、imagefs.available<15%）以及低于 100 的镜像回收高水位（默认 85）；配置 evictionHard 时要写全所有信号，未写出的信号将没有阈值。",
    ))
    .command(cmd!(
        "grep -nE 'eviction|imageGC' {config}; ps -o args= -C kubelet",
        config = config_path
    ))
    .step(Text::new(
        "Restart the kubelet to apply the change.",
        "重启 kubelet 使配置生效。",
    ))
    .command("systemctl restart kubelet")
    .source(HANDBOOK, SECTION_PREVENT)
    .into()
}

/// `disk.docker_log_unbounded`: docker's json-file logging without a size limit. `d` is
/// `None` when the daemon config file does not exist (docker's defaults then apply: json-file
/// without a size limit).
pub fn docker_log_unbounded(
    d: Option<&DaemonConfig>,
    daemon_json: &str,
    data_root: &str,
) -> Option<Finding> {
    let defaults = DaemonConfig::default();
    let cfg = d.unwrap_or(&defaults);
    if cfg.log_driver() != "json-file" || cfg.log_max_size.is_some() {
        return None;
    }
    let (why_en, why_zh) = if d.is_some() {
        (
            format!("{daemon_json} sets no log-opts max-size"),
            format!("{daemon_json} 未设置 log-opts max-size"),
        )
    } else {
        (
            format!("there is no {daemon_json}, so docker's default applies: no size limit"),
            format!("节点上没有 {daemon_json}，docker 默认不限制日志大小"),
        )
    };
    let mut f = Finding::new(
        "disk.docker_log_unbounded",
        Severity::Warning,
        Text::new(
            "Docker container logs have no size limit",
            "docker 容器日志没有大小限制",
        ),
        Text::new(
            format!("Docker logs with json-file and {why_en}, so one chatty container can fill {data_root}."),
            format!("docker 使用 json-file 日志驱动，但{why_zh}，单个容器的大量输出就可能写满 {data_root}。"),
        ),
    )
    .subject("docker")
    .evidence("daemon_json", daemon_json)
    .evidence("daemon_json_exists", d.is_some())
    .evidence("log_driver", cfg.log_driver());
    if let Some(n) = &cfg.log_max_file {
        f = f.evidence("log_max_file", n.as_str());
    }
    f = f.step(Text::new(
        "Add log-opts max-size and max-file to daemon.json (create the file if it does not exist) and restart docker; the limit applies to containers created afterwards.",
        "在 daemon.json 中加入 log-opts 的 max-size 与 max-file（文件不存在时新建）并重启 docker；该限制只对之后新建的容器生效。",
    ));
    if d.is_some() {
        f = f.command(cmd!("cat {daemon_json}", daemon_json = daemon_json));
    }
    f.command(r#"# in daemon.json: "log-driver": "json-file", "log-opts": {"max-size": "100m", "max-file": "5"}"#)
        .command("systemctl restart docker")
        .source(HANDBOOK, SECTION_PREVENT)
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kubelet::{effective, parse_config};

    const GIB_U: u64 = 1 << 30;

    fn fs(roles: &[Role], size: u64, avail: u64) -> FsSample {
        FsSample {
            mount_point: "/var/lib/docker".into(),
            device: "/dev/vdb".into(),
            fstype: "ext4".into(),
            dev: 1,
            roles: roles
                .iter()
                .map(|r| RoleDir {
                    role: *r,
                    host_path: "/var/lib/docker".into(),
                })
                .collect(),
            usage: FsUsage {
                size_bytes: size,
                avail_bytes: avail,
                free_bytes: avail,
                files: 1000,
                files_free: 900,
            },
            logs: vec![],
            dirs: vec![],
            deleted: vec![],
        }
    }

    #[test]
    fn default_thresholds_per_role() {
        let s = Settings::default();
        let l = Limits::default();
        // 100 GiB imagefs with 14 GiB free: past imagefs.available<15% -> critical.
        let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 14 * GIB_U), &s, &l);
        assert_eq!(v.severity, Some(Severity::Critical));
        assert_eq!(v.threshold, "imagefs.available<15%");
        assert_eq!(v.origin, "kubelet default");
        // Same figures on a kubelet-only filesystem: nodefs 10% + 5 points -> warning.
        let v = assess_space(&fs(&[Role::Kubelet], 100 * GIB_U, 14 * GIB_U), &s, &l);
        assert_eq!(v.severity, Some(Severity::Warning));
        assert_eq!(v.threshold, "nodefs.available<10%");
        // 20% free on imagefs: within 5 points of 15% -> warning.
        let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 19 * GIB_U), &s, &l);
        assert_eq!(v.severity, Some(Severity::Warning));
        // Healthy.
        let v = assess_space(
            &fs(&[Role::DockerData, Role::Kubelet], 100 * GIB_U, 50 * GIB_U),
            &s,
            &l,
        );
        assert_eq!(v.severity, None);
    }

    #[test]
    fn exec_root_uses_fixed_limits_only() {
        let s = Settings::default();
        let l = Limits::default();
        // A small tmpfs at 90%: no kubelet signal applies, below 95% -> fine.
        let v = assess_space(&fs(&[Role::DockerExec], 512 << 20, 51 << 20), &s, &l);
        assert_eq!(v.severity, None);
        let v = assess_space(&fs(&[Role::DockerExec], 512 << 20, 20 << 20), &s, &l);
        assert_eq!(v.severity, Some(Severity::Critical));
        assert_eq!(v.threshold, "used>=95%");
    }

    #[test]
    fn under_one_gib_on_a_big_disk() {
        let mut s = Settings::default();
        s.eviction_hard.clear();
        let l = Limits::default();
        // 10 GiB with 0.9 GiB free is 91% used: only the 1 GiB floor applies.
        let v = assess_space(&fs(&[Role::DockerData], 10 * GIB_U, GIB_U * 9 / 10), &s, &l);
        assert_eq!(v.severity, Some(Severity::Critical));
        assert_eq!(v.threshold, "available<1.0 GiB");
    }

    #[test]
    fn image_gc_and_soft_thresholds_warn() {
        let c = parse_config(
            "imageGCHighThresholdPercent: 70\nevictionSoft:\n  imagefs.available: 25%\n",
        )
        .unwrap();
        let s = effective(&[], Some(&c), "/etc/kubelet.yaml");
        let l = Limits::default();
        let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 28 * GIB_U), &s, &l);
        assert_eq!(v.severity, Some(Severity::Warning));
        assert!(
            v.why.en.contains("image GC high threshold 70%"),
            "{}",
            v.why.en
        );
        let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 24 * GIB_U), &s, &l);
        assert_eq!(v.severity, Some(Severity::Warning));
        assert_eq!(v.threshold, "imagefs.available<25%");
        assert_eq!(v.origin, "evictionSoft in /etc/kubelet.yaml");
    }

    #[test]
    fn inodes_use_inode_signals() {
        let s = Settings::default();
        let l = Limits::default();
        let mut f = fs(&[Role::Kubelet], 100 * GIB_U, 50 * GIB_U);
        f.usage.files = 1_000_000;
        f.usage.files_free = 30_000;
        let v = assess_inodes(&f, &s, &l);
        assert_eq!(v.severity, Some(Severity::Critical));
        assert_eq!(v.threshold, "nodefs.inodesFree<5%");
        f.usage.files = 0;
        assert_eq!(assess_inodes(&f, &s, &l).severity, None);
    }

    #[test]
    fn unprotected_kubelet() {
        assert!(
            kubelet_unprotected(&Settings::default(), "/var/lib/kubelet/config.yaml").is_none()
        );
        let c = parse_config("evictionHard:\n  memory.available: 100Mi\n  nodefs.available: \"0%\"\nimageGCHighThresholdPercent: 100\n").unwrap();
        let s = effective(&[], Some(&c), "/var/lib/kubelet/config.yaml");
        let f = kubelet_unprotected(&s, "/var/lib/kubelet/config.yaml").unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.evidence["problems"].as_f64(), Some(4.0));
        assert!(f
            .summary
            .en
            .contains("nodefs.available hard eviction threshold is 0"));
        assert!(f
            .summary
            .en
            .contains("no hard eviction threshold for imagefs.available"));
        assert!(f.summary.en.contains("image GC high threshold is 100%"));
    }

    #[test]
    fn docker_log_limits() {
        let d = DaemonConfig::default();
        let f =
            docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").unwrap();
        assert_eq!(f.id, "disk.docker_log_unbounded");
        assert!(f
            .summary
            .en
            .contains("/etc/docker/daemon.json sets no log-opts max-size"));
        assert!(f
            .remediation
            .commands
            .contains(&"cat /etc/docker/daemon.json".to_string()));
        assert!(
            !f.evidence.contains_key("log_max_file"),
            "no empty evidence"
        );
        let d = DaemonConfig {
            log_max_size: Some("100m".into()),
            ..Default::default()
        };
        assert!(
            docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").is_none()
        );
        let d = DaemonConfig {
            log_driver: Some("journald".into()),
            ..Default::default()
        };
        assert!(
            docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").is_none()
        );
    }

    #[test]
    fn docker_log_limits_without_a_daemon_json() {
        // No daemon.json: docker's defaults (json-file, unlimited). The finding says the file
        // is missing instead of claiming it lacks a setting, and does not `cat` it.
        let f = docker_log_unbounded(None, "/etc/docker/daemon.json", "/var/lib/docker").unwrap();
        assert!(
            f.summary.en.contains("there is no /etc/docker/daemon.json"),
            "{}",
            f.summary.en
        );
        assert!(f.summary.zh.contains("节点上没有 /etc/docker/daemon.json"));
        assert_eq!(
            f.evidence["daemon_json_exists"],
            crate::finding::Evidence::from(false)
        );
        assert!(f
            .remediation
            .commands
            .iter()
            .all(|c| !c.starts_with("cat ")));
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(5 * GIB_U), "5.0 GiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
