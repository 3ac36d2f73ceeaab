//! The iptables rules: a typed [`Sample`] (lock window, namespace comparisons, kube-proxy log
//! counts, backend facts; [`sample`](super::sample)) and the [`Thresholds`] of
//! [`thresholds`](super::thresholds) in, drafts and metrics out. No file access here.
//!
//! Every rule follows the handbook `002_af370464fa0f13dd.txt`, chapter "Kube-Proxy" (lines
//! 1009–1336); the words, and the sub-section each finding cites, are in
//! `collectors/rules/iptables.toml`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::backend::Backend;
use super::kplog::LogKind;
use super::sample::{BackendFacts, MountGap, Sample};
use super::thresholds::Thresholds;
use super::tracker::{HoldObs, LockId, LockWatch, ProcInfo};
use crate::finding::Severity;
use crate::metric::Metric;
use crate::rules::Draft;

/// Rule id: a process held the lock above the thresholds.
pub const LOCK_CONTENTION: &str = "iptables.lock_contention";
/// Rule id: processes queued on the lock on consecutive samples, no long hold.
pub const LOCK_WAITERS: &str = "iptables.lock_waiters";
/// Rule id: an iptables user in the host network namespace without the host's lock file.
pub const LOCK_NOT_MOUNTED: &str = "iptables.lock_not_mounted";
/// Rule id: which backend the host's iptables is (info).
pub const BACKEND: &str = "iptables.backend";
/// Rule id: legacy tables loaded while the host's iptables is nft.
pub const BACKEND_MIXED: &str = "iptables.backend_mixed";
/// Rule ids of kube-proxy's logged errors (which kind of message is which: `log_rule`).
pub const KUBE_PROXY_LOCK_ERROR: &str = "iptables.kube_proxy_lock_error";
pub const KUBE_PROXY_RESTORE_FAILED: &str = "iptables.kube_proxy_restore_failed";
pub const BACKEND_MISMATCH: &str = "iptables.backend_mismatch";
pub const KUBE_PROXY_APISERVER_STREAM_ERROR: &str = "iptables.kube_proxy_apiserver_stream_error";
pub const KUBE_PROXY_PANIC: &str = "iptables.kube_proxy_panic";

/// Characters of a container id `crictl inspect` is given (what `crictl ps` prints).
const SHORT_CONTAINER_ID: usize = 13;

/// Judges one sample.
pub fn judge(s: &Sample, th: &Thresholds) -> Vec<Draft> {
    let mut out = lock_drafts(s, th);
    out.extend(s.mount_gaps.iter().map(|g| mount_draft(g, &s.lock_path)));
    out.extend(log_drafts(s));
    out.extend(backend_drafts(&s.backend));
    out
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// What is known of a process, as evidence `<prefix>_pid`, `_comm`, `_cmdline`, `_pod_uid`,
/// `_container_id`, `_pod_namespace`, `_pod_name`, `_container_name`, `_cgroup`.
fn proc_evidence(d: Draft, prefix: &str, p: &ProcInfo) -> Draft {
    let name = |field: &str| format!("{prefix}_{field}");
    d.evidence_opt(&name("pid"), p.pid)
        .evidence_opt(&name("comm"), p.comm.as_deref())
        .evidence_opt(&name("cmdline"), p.cmdline.as_deref())
        .evidence_opt(&name("pod_uid"), p.pod_uid.as_deref())
        .evidence_opt(&name("container_id"), p.container_id.as_deref())
        .evidence_opt(&name("pod_namespace"), p.pod_namespace.as_deref())
        .evidence_opt(&name("pod_name"), p.pod_name.as_deref())
        .evidence_opt(&name("container_name"), p.container_name.as_deref())
        .evidence_opt(&name("cgroup"), p.host_cgroup.as_deref())
}

/// [`proc_evidence`] and the short container id the rule's `crictl inspect` takes.
fn identified(d: Draft, prefix: &str, p: &ProcInfo) -> Draft {
    let d = proc_evidence(d, prefix, p);
    match &p.container_id {
        Some(cid) => d.var(
            &format!("{prefix}_container_short_id"),
            cid.chars().take(SHORT_CONTAINER_ID).collect::<String>(),
        ),
        None => d,
    }
}

/// `iptables.lock_contention` (a hold above the thresholds) and `iptables.lock_waiters`
/// (processes queued on consecutive samples while no hold crossed a threshold).
fn lock_drafts(s: &Sample, th: &Thresholds) -> Vec<Draft> {
    let w = &s.window;
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
        let (severity, threshold) = if h.held_for >= th.hold_critical {
            (Severity::Critical, th.hold_critical)
        } else {
            (Severity::Warning, th.hold_warning)
        };
        let subject = match h.holder.pid {
            Some(p) => format!("pid {p}"),
            None => "pid unknown".to_string(),
        };
        let d = Draft::new(LOCK_CONTENTION, severity)
            .subject(subject)
            .evidence("hold_seconds", secs(h.held_for))
            .evidence("still_held", h.ongoing)
            .evidence("threshold_seconds", secs(threshold))
            .evidence("lock_path", s.lock_path.as_str())
            .evidence("lock_class", h.class.as_str())
            .evidence("lock_access", h.access.as_str())
            .evidence("waiters_max", w.max_waiters)
            .evidence("waiter_pids", waiter_pids.join(","))
            .evidence("waiters", waiter_names.join(", "))
            .evidence_opt("lock_proc_locks_id", lock_key.as_deref())
            .when_if("ongoing", h.ongoing)
            .when_if("waiters_named", !waiter_pids.is_empty());
        out.push(identified(d, "holder", &h.holder));
    }
    if out.is_empty() && w.max_waiter_streak >= th.waiter_streak_samples && w.max_waiters > 0 {
        let queued = secs(s.sample_period) * f64::from(w.max_waiter_streak);
        let mut d = Draft::new(LOCK_WAITERS, Severity::Warning)
            .evidence("waiters_max", w.max_waiters)
            .evidence("waiter_pids", waiter_pids.join(","))
            .evidence("queued_seconds", queued)
            .evidence("waiter_streak_samples", w.max_waiter_streak)
            .evidence("lock_path", s.lock_path.as_str())
            .var("waiters", waiter_names.join(", "))
            .var("threshold_samples", th.waiter_streak_samples)
            .var("hold_warning_seconds", secs(th.hold_warning))
            .when_if("waiters_named", !waiter_pids.is_empty());
        if let Some(k) = &lock_key {
            d = d.var("lock_proc_locks_id", k.as_str());
        }
        if let Some(h) = w.longest_hold() {
            d = d.evidence("longest_hold_seconds", secs(h.held_for));
            d = proc_evidence(d, "holder", &h.holder);
        }
        out.push(d);
    }
    out
}

/// `iptables.lock_not_mounted`: one finding per mount namespace.
fn mount_draft(g: &MountGap, lock_path: &str) -> Draft {
    let inode = |l: Option<LockId>| {
        l.map(|l| l.inode.to_string())
            .unwrap_or_else(|| "missing".into())
    };
    let subject = match (&g.proc.pod_uid, g.proc.pid) {
        (Some(uid), _) => format!("pod {uid}"),
        (None, Some(p)) => format!("pid {p}"),
        (None, None) => format!("mnt ns {}", g.mnt_ns),
    };
    let d = Draft::new(LOCK_NOT_MOUNTED, Severity::Warning)
        .subject(subject)
        .evidence("lock_path", lock_path)
        .evidence("host_lock_inode", inode(g.host_lock))
        .evidence("pod_lock_inode", inode(g.pod_lock))
        .evidence("mnt_ns", g.mnt_ns)
        .when_if("no_lock_file", g.pod_lock.is_none());
    identified(d, "process", &g.proc)
}

// The evidence of the backend findings: a decision, so it stays with the judge.
impl BackendFacts {
    fn with_evidence(&self, mut d: Draft) -> Draft {
        d = d.evidence("host_iptables_backend", self.host_backend().as_str());
        if let Some(b) = &self.binary {
            d = d
                .evidence("host_iptables_path", b.path.to_string_lossy().into_owned())
                .evidence("host_iptables_links", b.chain.join(" -> "));
        }
        d.evidence(
            "legacy_tables",
            match &self.legacy_tables {
                Some(t) if !t.is_empty() => t.join(","),
                Some(_) => "none (ip_tables loaded, no table in use)".to_string(),
                None => "none (ip_tables not loaded)".to_string(),
            },
        )
    }
}

/// `iptables.backend` (info: which backend the host's `iptables` is and whether legacy tables
/// are loaded, when known) and `iptables.backend_mixed` (legacy tables loaded while the host's
/// iptables is nft).
fn backend_drafts(b: &BackendFacts) -> Vec<Draft> {
    let mut out = Vec::new();
    let backend = b.host_backend();
    if backend != Backend::Unknown || b.legacy_tables.is_some() {
        out.push(
            b.with_evidence(Draft::new(BACKEND, Severity::Info))
                .when_if("backend_unknown", backend == Backend::Unknown)
                .when_if("legacy_in_use", b.legacy_in_use()),
        );
    }
    if b.legacy_in_use() && backend == Backend::Nft {
        out.push(b.with_evidence(Draft::new(BACKEND_MIXED, Severity::Warning)));
    }
    out
}

/// The rule id, subject and severity of each kind of kube-proxy message.
fn log_rule(kind: LogKind) -> (&'static str, &'static str, Severity) {
    match kind {
        LogKind::LockNoWait => (KUBE_PROXY_LOCK_ERROR, "lock_no_wait", Severity::Warning),
        LogKind::LockTimeout => (KUBE_PROXY_LOCK_ERROR, "lock_timeout", Severity::Critical),
        LogKind::RestoreLineFailed => (KUBE_PROXY_RESTORE_FAILED, "", Severity::Critical),
        LogKind::MarkDropMissing => (BACKEND_MISMATCH, "", Severity::Critical),
        LogKind::ApiserverStreamError => (KUBE_PROXY_APISERVER_STREAM_ERROR, "", Severity::Warning),
        LogKind::PanicNilPointer => (KUBE_PROXY_PANIC, "nil_pointer", Severity::Warning),
        LogKind::PanicSliceBounds => (KUBE_PROXY_PANIC, "slice_bounds", Severity::Critical),
    }
}

/// Findings from kube-proxy's logs: one per kind of message seen within the log window.
fn log_drafts(s: &Sample) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in s.logs.iter().filter(|c| c.recent > 0) {
        let (id, subject, severity) = log_rule(c.kind);
        let mut d = Draft::new(id, severity)
            .subject(subject)
            .evidence("kind", c.kind.as_str())
            .evidence("matches_recent", c.recent)
            .evidence("matches_total", c.total)
            .evidence("window_seconds", s.log_window.as_secs())
            .evidence("last_seen", c.last_time.as_str())
            .evidence("last_message", c.last_message.as_str())
            .evidence("log_file", c.last_file.as_str())
            .var("grep_pattern", c.kind.grep_pattern())
            .when_if("lock_timeout", c.kind == LogKind::LockTimeout)
            .when_if("slice_bounds", c.kind == LogKind::PanicSliceBounds);
        if c.kind == LogKind::MarkDropMissing {
            d = s.backend.with_evidence(d);
        }
        out.push(d);
    }
    out
}

/// The collector's metrics.
pub fn metrics(s: &Sample) -> Vec<Metric> {
    let w = &s.window;
    let backend = &s.backend;
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
        Metric::counter(
            "node_doctor_iptables_lock_reads_total",
            "Reads of /proc/locks by the xtables lock sampler since it started.",
            w.locks_reads as f64,
        ),
        Metric::gauge(
            "node_doctor_iptables_lock_inotify",
            "1 when the xtables lock file is watched with inotify (/proc/locks read only while it stays open), 0 when /proc/locks is polled.",
            if w.watch == LockWatch::Inotify { 1.0 } else { 0.0 },
        ),
        Metric::gauge(
            "node_doctor_iptables_legacy_tables",
            "Number of legacy iptables tables loaded (/proc/net/ip_tables_names).",
            backend.legacy_tables.as_ref().map_or(0, |t| t.len()) as f64,
        ),
    ];
    if let Some(cpu) = w.sampler_cpu {
        v.push(Metric::counter(
            "node_doctor_iptables_lock_sampler_cpu_seconds_total",
            "CPU time (user+system) of the xtables lock sampler thread since it started.",
            cpu.as_secs_f64(),
        ));
    }
    for kind in LogKind::ALL {
        let total = s
            .logs
            .iter()
            .find(|c| c.kind == kind)
            .map_or(0, |c| c.total);
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

#[cfg(test)]
mod tests;
