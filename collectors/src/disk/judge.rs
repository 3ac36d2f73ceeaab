//! The disk rules: a typed [`DiskSample`] (from [`sample`](super::sample)) -> drafts (id,
//! severity, subject, evidence, conditions) under the [`Thresholds`] of
//! [`thresholds`](super::thresholds). Pure: no file access here. Their words, from the
//! handbook's node-disk-full section (`002_af370464fa0f13dd.txt`, lines 1–165) and the
//! disk-full parts of its ContainerCreating and Terminating sections, are in
//! `collectors/rules/disk.toml`.

use crate::config::docker::DaemonConfig;
use crate::config::kubelet::{Settings, Threshold};
use crate::finding::Severity;
use crate::node::discover::{Daemons, Role};
use crate::rules::template::human_bytes;
use crate::rules::{Draft, Item};

use super::logs::LogFile;
use super::sample::{DiskSample, FsSample};
use super::thresholds::Thresholds;
use super::trend::{self, Fit, Resource};

/// Which threshold decided a verdict: the condition the rule file's summary tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// At or past the kubelet's hard eviction threshold.
    HardEviction,
    /// Within the warning margin of it.
    NearHardEviction,
    /// Past the kubelet's soft eviction threshold.
    SoftEviction,
    /// Used share past the kubelet's image GC high threshold.
    ImageGc,
    /// At or above node-doctor's used limit.
    UsedLimit,
    /// Under node-doctor's free-space floor.
    FreeLimit,
}

impl Why {
    pub fn condition(self) -> &'static str {
        match self {
            Why::HardEviction => "hard_eviction",
            Why::NearHardEviction => "near_hard_eviction",
            Why::SoftEviction => "soft_eviction",
            Why::ImageGc => "image_gc",
            Why::UsedLimit => "used_limit",
            Why::FreeLimit => "free_limit",
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
    /// Which kind of threshold it is (`None` when nothing is wrong).
    pub why: Option<Why>,
}

impl Verdict {
    fn ok() -> Verdict {
        Verdict {
            severity: None,
            threshold: String::new(),
            origin: String::new(),
            why: None,
        }
    }

    fn consider(&mut self, severity: Severity, why: Why, threshold: String, origin: &str) {
        if Some(severity) > self.severity {
            *self = Verdict {
                severity: Some(severity),
                threshold,
                origin: origin.to_string(),
                why: Some(why),
            };
        }
    }
}

/// Where a kubelet threshold came from, as the rule file words it: the condition, and the
/// parts of the origin a translation needs. `origin` is [`Settings`]' own phrase
/// (`kubelet default`, `--eviction-hard flag of the running kubelet`,
/// `evictionHard in /var/lib/kubelet/config.yaml`).
struct Origin<'a> {
    condition: &'static str,
    /// The flag (`--eviction-hard`) of a flag of the running kubelet.
    flag: Option<&'a str>,
    /// The setting and the config file of a setting in a file.
    setting_in: Option<(&'a str, &'a str)>,
}

fn origin(o: &str) -> Origin<'_> {
    let none = Origin {
        condition: "origin_other",
        flag: None,
        setting_in: None,
    };
    if o == "kubelet default" {
        return Origin {
            condition: "origin_default",
            ..none
        };
    }
    if let Some(flag) = o.strip_suffix(" flag of the running kubelet") {
        return Origin {
            condition: "origin_flag",
            flag: Some(flag),
            ..none
        };
    }
    if let Some(parts) = o.split_once(" in ") {
        return Origin {
            condition: "origin_file",
            setting_in: Some(parts),
            ..none
        };
    }
    none
}

/// The verdict's origin, for the summary's translation: its condition and parts.
fn with_origin(d: Draft, o: &str) -> Draft {
    let o = origin(o);
    let mut d = d.when(o.condition);
    if let Some(f) = o.flag {
        d = d.var("origin_flag", f);
    }
    if let Some((setting, path)) = o.setting_in {
        d = d.var("origin_setting", setting).var("origin_path", path);
    }
    d
}

/// An item about a setting that came from `o`: the origin as written, its condition and
/// parts.
fn item_origin(i: Item, o: &str) -> Item {
    let parts = origin(o);
    let mut i = i.value("origin", o).when(parts.condition);
    if let Some(f) = parts.flag {
        i = i.value("origin_flag", f);
    }
    if let Some((setting, path)) = parts.setting_in {
        i = i
            .value("origin_setting", setting)
            .value("origin_path", path);
    }
    i
}

/// `10%`, or a quantity in bytes (`1.0 GiB`).
fn fmt_threshold(t: &Threshold) -> String {
    match *t {
        Threshold::Percent(p) => format!("{p}%"),
        Threshold::Quantity(q) => human_bytes(q.trunc()),
    }
}

/// Judges the space of a filesystem against the kubelet's thresholds for the signals its
/// roles map to (nodefs for the kubelet root, imagefs for the runtime data root), the
/// image GC high threshold (image roles) and the fixed limits.
pub fn assess_space(fs: &FsSample, s: &Settings, t: &Thresholds) -> Verdict {
    assess(fs, s, t, false)
}

/// Judges the inodes of a filesystem (`*.inodesFree`, and the fixed used share).
pub fn assess_inodes(fs: &FsSample, s: &Settings, t: &Thresholds) -> Verdict {
    if fs.usage.files == 0 {
        // btrfs and some network filesystems report no inode counts.
        return Verdict::ok();
    }
    assess(fs, s, t, true)
}

fn assess(fs: &FsSample, s: &Settings, t: &Thresholds, inodes: bool) -> Verdict {
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
    let margin = cap * t.warning_margin_percent / 100.0;
    for fam in &families {
        let signal = format!("{fam}.{suffix}");
        if let Some(th) = s.eviction_hard.get(&signal).filter(|t| !t.is_zero()) {
            let min_free = th.min_free(cap);
            let thr = format!("{signal}<{}", fmt_threshold(th));
            if free <= min_free {
                v.consider(Severity::Critical, Why::HardEviction, thr, &s.hard_origin);
            } else if free <= min_free + margin {
                v.consider(
                    Severity::Warning,
                    Why::NearHardEviction,
                    thr,
                    &s.hard_origin,
                );
            }
        }
        if let Some(th) = s.eviction_soft.get(&signal).filter(|t| !t.is_zero()) {
            if free <= th.min_free(cap) {
                let thr = format!("{signal}<{}", fmt_threshold(th));
                v.consider(Severity::Warning, Why::SoftEviction, thr, &s.soft_origin);
            }
        }
    }
    if !inodes && fs.roles.iter().any(|r| r.role.is_image()) {
        let gc = s.image_gc_high_percent;
        if gc < 100.0 && used_pct > gc {
            let thr = format!("imageGCHighThresholdPercent={gc}");
            v.consider(Severity::Warning, Why::ImageGc, thr, &s.gc_origin);
        }
    }
    // Fixed limits, whatever the kubelet says (it may not run, or not protect this disk).
    let crit_pct = t.critical_used_percent;
    if used_pct >= crit_pct {
        let thr = format!("used>={crit_pct}%");
        v.consider(Severity::Critical, Why::UsedLimit, thr, "node-doctor limit");
    }
    let min_free = t.min_free_bytes as f64;
    if !inodes && cap >= 10.0 * min_free && free < min_free {
        let thr = format!("available<{}", human_bytes(min_free));
        v.consider(Severity::Critical, Why::FreeLimit, thr, "node-doctor limit");
    }
    v
}

/// Applies all disk rules.
pub fn judge(sample: &DiskSample, t: &Thresholds) -> Vec<Draft> {
    let settings = sample
        .kubelet
        .as_ref()
        .map(|k| k.0.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for fs in &sample.filesystems {
        let space = assess_space(fs, &settings, t);
        let inodes = assess_inodes(fs, &settings, t);
        out.extend(filesystem_full(fs, &space, &settings, t));
        out.extend(inodes_exhausted(fs, &inodes, t));
        out.extend(deleted_open_files(fs, space.severity, t));
        out.extend(filling_up(fs, &settings, t, Resource::Space));
        out.extend(filling_up(fs, &settings, t, Resource::Inodes));
    }
    if let Some((s, path)) = &sample.kubelet {
        out.extend(kubelet_unprotected(s, path));
    }
    if let Some(d) = &sample.docker {
        out.extend(docker_log_unbounded(
            d.config.as_ref(),
            &d.daemon_json,
            &d.data_root,
        ));
    }
    out.into_iter()
        .map(|d| daemon_advice(d, &sample.daemons))
        .collect()
}

/// What the advice of a draft needs to know about the daemons it names: whether the kubelet
/// runs (drain and kubelet advice: condition `kubelet_not_running`, evidence
/// `kubelet_running`) and whether the runtime it restarts runs (`docker_not_running`,
/// `containerd_not_running`, evidence `runtime_running`). Nothing is said when the process
/// list could not be read.
fn daemon_advice(mut d: Draft, daemons: &Daemons) -> Draft {
    if !daemons.known {
        return d;
    }
    let drains = matches!(
        d.id.as_str(),
        "disk.filesystem_full"
            | "disk.inodes_exhausted"
            | "disk.deleted_open_files"
            | "disk.kubelet_unprotected"
    );
    if drains {
        d = d
            .evidence("kubelet_running", daemons.kubelet)
            .when_if("kubelet_not_running", !daemons.kubelet);
    }
    let runtime = if d.id == "disk.docker_log_unbounded" || d.is("docker") {
        Some(("docker_not_running", daemons.dockerd))
    } else if d.is("containerd") {
        Some(("containerd_not_running", daemons.containerd))
    } else {
        None
    };
    if let Some((condition, running)) = runtime {
        d = d
            .evidence("runtime_running", running)
            .when_if(condition, !running);
    }
    d
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

/// The verdict's threshold and its origin, and the figures its wording names.
fn verdict(d: Draft, v: &Verdict, t: &Thresholds) -> Draft {
    let d = d
        .evidence("threshold", v.threshold.as_str())
        .evidence("threshold_source", v.origin.as_str())
        .var("warning_margin_percent", t.warning_margin_percent)
        .var("critical_used_percent", t.critical_used_percent);
    let d = with_origin(d, &v.origin);
    match v.why {
        Some(w) => d.when(w.condition()),
        None => d,
    }
}

/// `disk.filesystem_full`: a runtime or kubelet filesystem at or near its limit, with what
/// fills it and the handbook's recovery.
fn filesystem_full(fs: &FsSample, v: &Verdict, s: &Settings, t: &Thresholds) -> Option<Draft> {
    let severity = v.severity?;
    let u = &fs.usage;
    let mut d = Draft::new("disk.filesystem_full", severity)
        .subject(fs.mount_point.clone())
        .evidence("mount_point", fs.mount_point.as_str())
        .evidence("device", fs.device.as_str())
        .evidence("fstype", fs.fstype.as_str())
        .evidence("roles", fs.role_names())
        .evidence("size_bytes", u.size_bytes)
        .evidence("available_bytes", u.avail_bytes)
        .evidence("used_percent", u.used_percent())
        .var("image_gc_high_percent", s.image_gc_high_percent)
        .var("min_free_bytes", t.min_free_bytes);
    d = verdict(d, v, t);

    // What fills it: logs, top directories, deleted-but-open files.
    if let Some(top) = fs.logs.first() {
        d = d
            .evidence("largest_log_path", top.path.to_string_lossy().into_owned())
            .evidence("largest_log_bytes", top.size_bytes)
            .evidence("largest_log_rotated", top.rotated)
            // Owner names only when known: no empty evidence values.
            .evidence_opt("largest_log_namespace", top.namespace.as_deref())
            .evidence_opt("largest_log_pod", top.pod.as_deref())
            .evidence_opt("largest_log_container", top.container.as_deref());
        let total: u64 = fs.logs.iter().map(|l| l.size_bytes).sum();
        d = d.evidence("top_logs_bytes", total);
    }
    for (role, _, sizes) in &fs.dirs {
        for (name, bytes) in sizes.entries.iter().take(5) {
            d = d.evidence(&format!("dir_{}_{}_bytes", role.as_str(), name), *bytes);
        }
        d = d
            .evidence(
                &format!("walk_{}_complete_ratio", role.as_str()),
                sizes.complete_ratio,
            )
            .evidence(&format!("walk_{}_entries", role.as_str()), sizes.files);
    }
    let held = super::deleted::total(&fs.deleted, fs.dev);
    if !fs.deleted.is_empty() {
        d = d.evidence("deleted_open_bytes", held);
    }

    // The logs to empty first, the data root to look in, the holder of deleted files.
    let order = truncation_order(&fs.logs);
    if !order.is_empty() {
        let logs = order
            .into_iter()
            .map(|l| Item::new().value("file", l.path.to_string_lossy().into_owned()))
            .collect();
        d = d.items("logs", logs);
    }
    if let Some(root) = fs.path_of(Role::DockerData) {
        d = d.var("docker_data_root", root);
    }
    if held > 0 {
        if let Some((pid, _, _, fd)) = super::deleted::holders(&fs.deleted, fs.dev).first() {
            d = d.var("deleted_pid", *pid).var("deleted_fd", *fd);
        }
    }
    // The runtime to restart once there is room.
    if fs.has(Role::DockerData) || fs.has(Role::DockerExec) {
        d = d.when("docker");
    } else if fs.has(Role::ContainerdRoot) || fs.has(Role::ContainerdState) {
        d = d.when("containerd");
    }
    Some(d)
}

/// `disk.inodes_exhausted`: a runtime or kubelet filesystem running out of inodes.
fn inodes_exhausted(fs: &FsSample, v: &Verdict, t: &Thresholds) -> Option<Draft> {
    let severity = v.severity?;
    let u = &fs.usage;
    let dirs = fs
        .roles
        .iter()
        .map(|r| Item::new().value("dir", r.host_path.as_str()))
        .collect();
    let d = Draft::new("disk.inodes_exhausted", severity)
        .subject(fs.mount_point.clone())
        .evidence("mount_point", fs.mount_point.as_str())
        .evidence("device", fs.device.as_str())
        .evidence("roles", fs.role_names())
        .evidence("inodes", u.files)
        .evidence("inodes_free", u.files_free)
        .evidence("inodes_used_percent", u.inodes_used_percent())
        .items("role_dirs", dirs);
    Some(verdict(d, v, t))
}

/// `disk.deleted_open_files`: space on a runtime/kubelet filesystem held by deleted files
/// that a process keeps open.
fn deleted_open_files(
    fs: &FsSample,
    fs_severity: Option<Severity>,
    t: &Thresholds,
) -> Option<Draft> {
    let held = super::deleted::total(&fs.deleted, fs.dev);
    let share = if fs.usage.size_bytes == 0 {
        0.0
    } else {
        held as f64 * 100.0 / fs.usage.size_bytes as f64
    };
    if held == 0 || (held < t.deleted_min_bytes && share < t.deleted_min_percent) {
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
    let mut d = Draft::new("disk.deleted_open_files", severity)
        .subject(fs.mount_point.clone())
        .evidence("mount_point", fs.mount_point.as_str())
        .evidence("deleted_open_bytes", held)
        .evidence("deleted_open_percent", share)
        .evidence("top_pid", pid)
        .evidence("top_comm", comm)
        .evidence("top_bytes", bytes)
        .evidence("top_fd", fd)
        .evidence("top_path", example)
        .evidence("holders", holders.len());
    for (i, (p, c, b, _)) in holders.iter().enumerate().skip(1).take(4) {
        d = d.evidence(&format!("holder_{}", i + 1), format!("{p} {c} {b}"));
    }
    Some(d)
}

/// `disk.kubelet_unprotected`: kubelet settings that leave the disk without eviction or
/// image GC.
fn kubelet_unprotected(s: &Settings, config_path: &str) -> Option<Draft> {
    let mut issues = Vec::new();
    for signal in ["nodefs.available", "imagefs.available", "nodefs.inodesFree"] {
        let issue = match s.eviction_hard.get(signal) {
            None => "no_hard_threshold",
            Some(t) if t.is_zero() => "zero_hard_threshold",
            Some(_) => continue,
        };
        issues.push(item_origin(
            Item::new().value("signal", signal).when(issue),
            &s.hard_origin,
        ));
    }
    if s.image_gc_high_percent >= 100.0 {
        issues.push(item_origin(
            Item::new().when("image_gc_never"),
            &s.gc_origin,
        ));
    }
    if issues.is_empty() {
        return None;
    }
    let mut d = Draft::new("disk.kubelet_unprotected", Severity::Warning)
        .subject("kubelet")
        .evidence("config_path", config_path)
        .evidence("eviction_hard_source", s.hard_origin.as_str())
        .evidence("image_gc_high_threshold_percent", s.image_gc_high_percent)
        .evidence("problems", issues.len());
    for (k, t) in &s.eviction_hard {
        d = d.evidence(&format!("eviction_hard_{k}"), fmt_threshold(t));
    }
    Some(d.items("issues", issues))
}

/// `disk.docker_log_unbounded`: docker's json-file logging without a size limit. `d` is
/// `None` when the daemon config file does not exist (docker's defaults then apply: json-file
/// without a size limit).
fn docker_log_unbounded(
    d: Option<&DaemonConfig>,
    daemon_json: &str,
    data_root: &str,
) -> Option<Draft> {
    let defaults = DaemonConfig::default();
    let cfg = d.unwrap_or(&defaults);
    if cfg.log_driver() != "json-file" || cfg.log_max_size.is_some() {
        return None;
    }
    Some(
        Draft::new("disk.docker_log_unbounded", Severity::Warning)
            .subject("docker")
            .evidence("daemon_json", daemon_json)
            .evidence("daemon_json_exists", d.is_some())
            .evidence("log_driver", cfg.log_driver())
            .evidence_opt("log_max_file", cfg.log_max_file.as_deref())
            .var("data_root", data_root)
            .when_if("no_daemon_json", d.is_none()),
    )
}

/// What kind of threshold a filling filesystem will cross.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The kubelet's hard eviction threshold: it evicts pods when crossed.
    Hard,
    /// Its soft one: it evicts once crossed for the grace period.
    Soft,
    /// node-doctor's used limit (no kubelet threshold applies to the filesystem).
    Limit,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Hard => "hard",
            Kind::Soft => "soft",
            Kind::Limit => "node-doctor",
        }
    }
}

/// A threshold a filesystem's free space or inodes can fall to.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `nodefs.available`, `imagefs.inodesFree`; `used` for node-doctor's limit.
    pub signal: String,
    pub kind: Kind,
    /// As the summary prints it: `nodefs.available<10%`, `used>=95%`.
    pub threshold: String,
    /// The free bytes or inodes at which it is crossed.
    pub min_free: f64,
    /// Seconds past the crossing before the kubelet evicts (soft thresholds).
    pub grace_secs: f64,
    pub origin: String,
}

/// The thresholds of a filesystem's space or inodes: the kubelet's hard and soft ones of the
/// signals its roles map to, or, when none applies, node-doctor's used limit.
pub fn targets(fs: &FsSample, s: &Settings, t: &Thresholds, resource: Resource) -> Vec<Target> {
    let u = &fs.usage;
    let inodes = resource == Resource::Inodes;
    let cap = if inodes {
        u.files as f64
    } else {
        u.size_bytes as f64
    };
    let suffix = if inodes { "inodesFree" } else { "available" };
    let mut families: Vec<&str> = fs.roles.iter().filter_map(|r| r.role.signal()).collect();
    families.sort_unstable();
    families.dedup();
    let mut out = Vec::new();
    for fam in families {
        let signal = format!("{fam}.{suffix}");
        if let Some(th) = s.eviction_hard.get(&signal).filter(|t| !t.is_zero()) {
            out.push(Target {
                threshold: format!("{signal}<{}", fmt_threshold(th)),
                signal: signal.clone(),
                kind: Kind::Hard,
                min_free: th.min_free(cap),
                grace_secs: 0.0,
                origin: s.hard_origin.clone(),
            });
        }
        if let Some(th) = s.eviction_soft.get(&signal).filter(|t| !t.is_zero()) {
            out.push(Target {
                threshold: format!("{signal}<{}", fmt_threshold(th)),
                signal: signal.clone(),
                kind: Kind::Soft,
                min_free: th.min_free(cap),
                grace_secs: s
                    .eviction_soft_grace
                    .get(&signal)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0),
                origin: s.soft_origin.clone(),
            });
        }
    }
    if out.is_empty() && cap > 0.0 {
        // df's used share: used / (used + available), root's reserve left out.
        let share = (100.0 - t.critical_used_percent).max(0.0) / 100.0;
        let min_free = if inodes {
            cap * share
        } else {
            let reserve = u.free_bytes.saturating_sub(u.avail_bytes) as f64;
            (cap - reserve).max(0.0) * share
        };
        out.push(Target {
            signal: "used".into(),
            kind: Kind::Limit,
            threshold: format!("used>={}%", t.critical_used_percent),
            min_free,
            grace_secs: 0.0,
            origin: "node-doctor limit".into(),
        });
    }
    out
}

/// When a filling filesystem evicts first: the fit, the threshold and the seconds to it
/// (with a soft threshold's grace period).
#[derive(Debug, Clone, PartialEq)]
pub struct Eta {
    pub fit: Fit,
    pub target: Target,
    pub secs: f64,
}

/// The earliest threshold a filling filesystem will cross, when its history says it fills
/// (thresholds already crossed are the level rules' and left out).
pub fn time_to_threshold(
    fs: &FsSample,
    s: &Settings,
    t: &Thresholds,
    resource: Resource,
) -> Option<Eta> {
    let fit = match resource {
        Resource::Space => fs.trend.space,
        Resource::Inodes => fs.trend.inodes,
    }?;
    if !fit.filling || fit.rate <= 0.0 {
        return None;
    }
    targets(fs, s, t, resource)
        .into_iter()
        .filter(|target| fit.free_now > target.min_free)
        .map(|target| Eta {
            secs: (fit.free_now - target.min_free) / fit.rate + target.grace_secs,
            target,
            fit,
        })
        .min_by(|a, b| a.secs.total_cmp(&b.secs))
}

/// Whether a filesystem grows towards a threshold within the clearing horizon: the walk then
/// names what grows.
pub fn growing(fs: &FsSample, s: &Settings, t: &Thresholds) -> bool {
    let horizon = t.fill_warning_secs * t.fill_clear_factor;
    [Resource::Space, Resource::Inodes]
        .into_iter()
        .filter_map(|r| time_to_threshold(fs, s, t, r))
        .any(|e| e.secs <= horizon)
}

/// `disk.filling_up` / `disk.inodes_filling_up`: at the rate fitted over its history, a
/// filesystem crosses a threshold within the warning horizon (critical within the critical
/// one); once raised, it stays until the estimate is past the horizon times the clearing
/// factor or the growth stops.
fn filling_up(fs: &FsSample, s: &Settings, t: &Thresholds, resource: Resource) -> Option<Draft> {
    let eta = time_to_threshold(fs, s, t, resource)?;
    let (id, raised, unit) = match resource {
        Resource::Space => ("disk.filling_up", fs.trend.raised_space, "bytes"),
        Resource::Inodes => ("disk.inodes_filling_up", fs.trend.raised_inodes, "inodes"),
    };
    let horizon = if raised {
        t.fill_warning_secs * t.fill_clear_factor
    } else {
        t.fill_warning_secs
    };
    if eta.secs > horizon {
        return None;
    }
    let severity = if eta.secs <= t.fill_critical_secs {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let u = &fs.usage;
    let mut d = Draft::new(id, severity)
        .subject(fs.mount_point.clone())
        .evidence("mount_point", fs.mount_point.as_str())
        .evidence("device", fs.device.as_str())
        .evidence("fstype", fs.fstype.as_str())
        .evidence("roles", fs.role_names())
        .evidence(&format!("fill_rate_{unit}_per_second"), eta.fit.rate)
        .evidence(
            &format!("recent_rate_{unit}_per_second"),
            eta.fit.recent_rate,
        )
        .evidence("seconds_to_threshold", eta.secs.round())
        .evidence("threshold", eta.target.threshold.as_str())
        .evidence("threshold_signal", eta.target.signal.as_str())
        .evidence("threshold_kind", eta.target.kind.as_str())
        .evidence(
            &format!("threshold_free_{unit}"),
            eta.target.min_free.round(),
        )
        .evidence("threshold_source", eta.target.origin.as_str())
        .evidence("threshold_at", trend::utc(eta.fit.t_now + eta.secs))
        .evidence("history_seconds", eta.fit.span_secs.round())
        .evidence("history_points", eta.fit.points)
        .evidence("occurrences", 1u64)
        .var("warning_horizon_seconds", t.fill_warning_secs)
        .var("critical_horizon_seconds", t.fill_critical_secs);
    d = match resource {
        Resource::Space => d
            .evidence("size_bytes", u.size_bytes)
            .evidence("available_bytes", u.avail_bytes)
            .evidence("used_percent", u.used_percent()),
        Resource::Inodes => d
            .evidence("inodes", u.files)
            .evidence("inodes_free", u.files_free)
            .evidence("inodes_used_percent", u.inodes_used_percent()),
    };
    d = d.when(match eta.target.kind {
        Kind::Hard => "hard_eviction",
        Kind::Soft => "soft_eviction",
        Kind::Limit => "used_limit",
    });
    if eta.target.kind == Kind::Soft {
        d = d.evidence("grace_period_seconds", eta.target.grace_secs);
    }
    d = with_origin(d, &eta.target.origin);
    // What grows fastest between the last two complete walks.
    let grower = match resource {
        Resource::Space => fs
            .trend
            .growers
            .iter()
            .filter(|g| g.bytes_per_second > 0.0)
            .max_by(|a, b| a.bytes_per_second.total_cmp(&b.bytes_per_second)),
        Resource::Inodes => fs
            .trend
            .growers
            .iter()
            .filter(|g| g.entries_per_second > 0.0)
            .max_by(|a, b| a.entries_per_second.total_cmp(&b.entries_per_second)),
    };
    if let Some(g) = grower {
        d = d
            .evidence("grower_path", g.path.as_str())
            .evidence("grower_kind", g.kind)
            .evidence(
                &format!("grower_{unit}_per_second"),
                match resource {
                    Resource::Space => g.bytes_per_second,
                    Resource::Inodes => g.entries_per_second,
                },
            )
            .evidence("grower_bytes", g.bytes)
            .evidence_opt("grower_pod_uid", g.pod_uid.as_deref())
            .when(match g.kind {
                "pod_log" => "grower_pod_log",
                "empty_dir" => "grower_empty_dir",
                "pod_dir" => "grower_pod_dir",
                "container_dir" => "grower_container_dir",
                "layer" => "grower_layer",
                "image" | "image_content" => "grower_image",
                _ => "grower_other",
            });
    }
    Some(d)
}

#[cfg(test)]
mod tests;
