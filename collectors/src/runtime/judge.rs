//! The runtime rules: a typed [`Sample`] -> drafts. Pure: no files, no clock, no network.
//!
//! The collector (`mod.rs`) finds the runtimes this node uses and asks them through the
//! [`super::probe::RuntimeProbe`]; this module decides what the answers mean. Every finding
//! lasts exactly as long as its condition: a restarted runtime answers and its finding is
//! gone in the next collection. The words are `collectors/rules/runtime.toml`.

use std::time::Duration;

use super::probe::Outcome;
use super::sample::{
    CniDir, CniSample, Daemon, DuplicateInstall, Healthz, ImmutableFile, KubeProxySample,
    KubeletSample, PortConflict, RuntimeSample, Sample, SyncSample, Why,
};
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::rules::{Draft, Item};

/// Expected, no process, no socket: the runtime is stopped.
pub const NOT_RUNNING: &str = "runtime.not_running";
/// No process, its socket left behind and refusing connections: it died without cleaning up.
pub const CRASHED: &str = "runtime.crashed";
/// The socket accepts, nothing answers before the deadline.
pub const HUNG: &str = "runtime.hung";
/// It answers, slowly.
pub const SLOW: &str = "runtime.slow";
/// The process runs but its API cannot be reached (socket missing, refusing, wrong answer).
pub const UNREACHABLE: &str = "runtime.unreachable";
/// dockerd and containerd disagree about which containers run.
pub const OUT_OF_SYNC: &str = "runtime.out_of_sync";
/// Two installations of a runtime component side by side.
pub const DUPLICATE_INSTALL: &str = "runtime.duplicate_install";
/// The kubelet is configured on this node but does not run.
pub const KUBELET_NOT_RUNNING: &str = "runtime.kubelet_not_running";
/// The kubelet runs but its `/healthz` fails.
pub const KUBELET_UNHEALTHY: &str = "runtime.kubelet_unhealthy";
/// The kubelet restarted again and again.
pub const KUBELET_RESTARTS: &str = "runtime.kubelet_restarts";
/// A runtime daemon restarted again and again.
pub const DAEMON_RESTARTS: &str = "runtime.daemon_restarts";
/// No usable CNI configuration, or the runtime says its network is not ready.
pub const CNI_NOT_READY: &str = "runtime.cni_not_ready";
/// A file under a pod's or container's directory with the immutable or append-only attribute.
pub const IMMUTABLE_FILE: &str = "runtime.immutable_file";
/// A hostNetwork pod's port is bound by another process.
pub const HOST_PORT_CONFLICT: &str = "runtime.host_port_conflict";
/// kube-proxy in IPVS mode resyncs too often and burns CPU.
pub const KUBE_PROXY_IPVS_SYNC: &str = "runtime.kube_proxy_ipvs_sync";

/// Judges one sample.
pub fn judge(s: &Sample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for r in &s.runtimes {
        out.extend(runtime(r, t));
        out.extend(restarts(r, t));
    }
    if let Some(sync) = &s.sync {
        out.extend(out_of_sync(sync));
    }
    let docker_used = s.runtimes.iter().any(|r| r.daemon == Daemon::Dockerd);
    if docker_used {
        out.extend(s.duplicates.iter().map(duplicate));
    }
    if let Some(k) = &s.kubelet {
        out.extend(kubelet(k, t));
    }
    if let Some(c) = &s.cni {
        out.extend(cni(c));
    }
    out.extend(s.immutable.iter().map(immutable));
    out.extend(s.port_conflicts.iter().filter_map(port_conflict));
    if let Some(k) = &s.kube_proxy {
        out.extend(kube_proxy(k, t));
    }
    out
}

/// `runtime.daemon_restarts`: node-problem-detector's `FrequentDockerRestart` and
/// `FrequentContainerdRestart`, from the processes.
fn restarts(r: &RuntimeSample, t: &Thresholds) -> Option<Draft> {
    (r.restarts_in_window >= t.daemon_restarts).then(|| {
        Draft::new(DAEMON_RESTARTS, Severity::Warning)
            .subject(r.daemon.as_str())
            .when(r.daemon.condition())
            .evidence("daemon", r.daemon.as_str())
            .evidence("restarts", r.restarts_in_window)
            .evidence("window_minutes", t.kubelet_restart_window.as_secs() / 60)
            .evidence("restarts_threshold", t.daemon_restarts)
            .evidence_opt("pid", r.pid)
    })
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The drafts about one runtime; `None` when it is healthy.
fn runtime(r: &RuntimeSample, t: &Thresholds) -> Option<Draft> {
    let alive = r.pid.is_some();
    let base = |id: &str, severity: Severity| {
        let why: Vec<&str> = r.why.iter().map(|w| w.as_str()).collect();
        let disk_full = r
            .data_dir
            .as_ref()
            .is_some_and(|d| d.used_percent >= t.disk_full_percent);
        Draft::new(id, severity)
            .subject(r.socket.clone())
            .evidence("daemon", r.daemon.as_str())
            .evidence("socket", r.socket.clone())
            .evidence("outcome", r.outcome.as_str())
            .evidence("expected_because", why.join(", "))
            .evidence_opt("pid", r.pid)
            .evidence_opt("version", r.version.clone())
            .evidence_opt("data_dir", r.data_dir.as_ref().map(|d| d.path.clone()))
            .evidence_opt(
                "data_dir_used_percent",
                r.data_dir
                    .as_ref()
                    .map(|d| (d.used_percent * 10.0).round() / 10.0),
            )
            .when(r.daemon.condition())
            .when_if("by_kubelet", r.why.contains(&Why::Kubelet))
            .when_if("disk_full", disk_full)
    };
    match &r.outcome {
        Outcome::Answered { latency } if *latency >= t.slow_answer => Some(
            base(SLOW, Severity::Warning)
                .evidence("latency_seconds", secs(*latency))
                .evidence("slow_seconds", secs(t.slow_answer)),
        ),
        Outcome::Answered { .. } => None,
        Outcome::Timeout { after, connected } => Some(
            base(HUNG, Severity::Critical)
                .evidence("waited_seconds", secs(*after))
                .when_if("not_accepting", !connected),
        ),
        Outcome::Refused if alive => Some(base(UNREACHABLE, Severity::Critical).when("refused")),
        Outcome::Refused => Some(base(CRASHED, Severity::Critical)),
        Outcome::NoSocket if alive => Some(
            base(UNREACHABLE, Severity::Critical)
                .evidence("timeout_seconds", secs(r.timeout))
                .when("socket_missing"),
        ),
        Outcome::NotSocket if alive => {
            Some(base(UNREACHABLE, Severity::Critical).when("not_a_socket"))
        }
        Outcome::NoSocket | Outcome::NotSocket => {
            // Known only by the shims of its containers or its enabled unit: stopped, and
            // nothing says the kubelet or the operator depends on it. A warning, whether its
            // containers still run (live-restore) or not.
            let severity = if r.why.iter().all(|w| w.is_sign_only()) {
                Severity::Warning
            } else {
                Severity::Critical
            };
            Some(
                base(NOT_RUNNING, severity)
                    .evidence_opt("moby_shims", (r.moby_shims > 0).then_some(r.moby_shims))
                    .when_if("containers_left", r.moby_shims > 0)
                    .when_if("unit_enabled", r.why.contains(&Why::SystemdUnit)),
            )
        }
        Outcome::BadAnswer { latency, detail } => Some(
            base(UNREACHABLE, Severity::Critical)
                .evidence("latency_seconds", secs(*latency))
                .evidence("answer", detail.clone())
                .when("bad_answer"),
        ),
        // The probe could not try: the collector's status says why; nothing is judged.
        Outcome::Failed(_) => None,
    }
}

/// `runtime.out_of_sync`: dockerd and containerd disagree (held over two samples).
fn out_of_sync(s: &SyncSample) -> Option<Draft> {
    if s.docker_only.is_empty() && s.containerd_only.is_empty() {
        return None;
    }
    let mut items = Vec::new();
    for (id, status) in &s.docker_only {
        items.push(
            Item::new()
                .value("container_id", id.clone())
                .value("short_id", short(id))
                .value(
                    "containerd_status",
                    status.map_or("absent", |st| st.as_str()),
                )
                .when("listed_by_docker"),
        );
    }
    for id in &s.containerd_only {
        items.push(
            Item::new()
                .value("container_id", id.clone())
                .value("short_id", short(id))
                .value("containerd_status", "running")
                .when("task_in_containerd"),
        );
    }
    let ids: Vec<String> = s
        .docker_only
        .iter()
        .map(|(id, _)| id.clone())
        .chain(s.containerd_only.iter().cloned())
        .collect();
    Some(
        Draft::new(OUT_OF_SYNC, Severity::Warning)
            .subject(s.docker_socket.clone())
            .evidence("docker_socket", s.docker_socket.clone())
            .evidence("containerd_socket", s.containerd_socket.clone())
            .evidence("namespace", s.namespace.clone())
            .evidence("running_in_docker_only", s.docker_only.len())
            .evidence("running_in_containerd_only", s.containerd_only.len())
            .evidence("container_ids", ids.join(", "))
            .items("containers", items)
            .when_if("docker_running", !s.docker_only.is_empty())
            .when_if("containerd_running", !s.containerd_only.is_empty()),
    )
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// `runtime.duplicate_install`.
fn duplicate(d: &DuplicateInstall) -> Draft {
    Draft::new(DUPLICATE_INSTALL, Severity::Warning)
        .subject(d.component.clone())
        .evidence("component", d.component.clone())
        .evidence("binaries", d.paths.join(", "))
        .evidence_opt("running_binary", d.running.clone())
        .words("paths", &d.paths)
}

/// The kubelet's drafts.
fn kubelet(k: &KubeletSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    if let Healthz::Probed {
        addr,
        outcome,
        status,
    } = &k.healthz
    {
        let url = format!("http://{addr}/healthz");
        let d = |id: &str, severity: Severity| {
            Draft::new(id, severity)
                .subject("kubelet")
                .evidence("healthz", url.clone())
                .evidence("outcome", outcome.as_str())
                .evidence_opt("pid", k.pid)
                .evidence_opt("http_status", status.map(u32::from))
        };
        match (k.pid, outcome) {
            (_, Outcome::Answered { .. }) => {}
            (None, Outcome::Refused | Outcome::NoSocket | Outcome::NotSocket) => out.push(
                Draft::new(KUBELET_NOT_RUNNING, Severity::Critical)
                    .subject("kubelet")
                    .evidence("healthz", url.clone())
                    .evidence("outcome", outcome.as_str()),
            ),
            (_, Outcome::Failed(_)) => {}
            (None, _) | (Some(_), _) => {
                let severity = match outcome {
                    Outcome::Refused => Severity::Warning,
                    _ => Severity::Critical,
                };
                let mut draft = d(KUBELET_UNHEALTHY, severity)
                    .when_if("refused", matches!(outcome, Outcome::Refused))
                    .when_if("timeout", matches!(outcome, Outcome::Timeout { .. }))
                    .when_if("bad_answer", matches!(outcome, Outcome::BadAnswer { .. }));
                if let Outcome::BadAnswer { detail, .. } = outcome {
                    draft = draft.evidence("answer", detail.clone());
                }
                if let Outcome::Timeout { after, .. } = outcome {
                    draft = draft.evidence("waited_seconds", secs(*after));
                }
                out.push(draft);
            }
        }
    } else if k.pid.is_none() && !matches!(k.healthz, Healthz::NotFromHere) {
        // Health endpoint off or unreadable, and no process: the kubelet is not running.
        out.push(
            Draft::new(KUBELET_NOT_RUNNING, Severity::Critical)
                .subject("kubelet")
                .evidence("outcome", "no_process"),
        );
    }
    if k.restarts_in_window >= t.kubelet_restarts {
        out.push(
            Draft::new(KUBELET_RESTARTS, Severity::Warning)
                .subject("kubelet")
                .evidence("restarts", k.restarts_in_window)
                .evidence("window_minutes", t.kubelet_restart_window.as_secs() / 60)
                .evidence("restarts_threshold", t.kubelet_restarts)
                .evidence_opt("pid", k.pid)
                .evidence_opt("started_seconds_ago", k.started_seconds_ago),
        );
    }
    out
}

/// `runtime.cni_not_ready`.
fn cni(c: &CniSample) -> Option<Draft> {
    let cri_not_ready = c.network_ready.as_ref().filter(|n| !n.status);
    let dir_bad = matches!(
        c.dir,
        CniDir::Missing | CniDir::Empty | CniDir::Invalid { .. }
    );
    if !dir_bad && cri_not_ready.is_none() {
        return None;
    }
    let mut d = Draft::new(CNI_NOT_READY, Severity::Critical)
        .subject(c.conf_dir.clone())
        .evidence("conf_dir", c.conf_dir.clone())
        .when_if("dir_missing", c.dir == CniDir::Missing)
        .when_if("dir_empty", c.dir == CniDir::Empty)
        .when_if("cri_network_not_ready", cri_not_ready.is_some());
    if let CniDir::Invalid { files } = &c.dir {
        d = d
            .evidence("invalid_files", files.join(", "))
            .when("invalid_config");
    }
    if let CniDir::Valid { file } = &c.dir {
        d = d.evidence("config_file", file.clone());
    }
    if let Some(n) = cri_not_ready {
        d = d
            .evidence("cri_reason", n.reason.clone())
            .evidence("cri_message", n.message.clone());
    }
    Some(d)
}

/// `runtime.immutable_file`.
fn immutable(f: &ImmutableFile) -> Draft {
    let attrs = match (f.immutable, f.append_only) {
        (true, true) => "ia",
        (true, false) => "i",
        _ => "a",
    };
    Draft::new(IMMUTABLE_FILE, Severity::Warning)
        .subject(f.path.clone())
        .evidence("file", f.path.clone())
        .evidence("attributes", attrs)
        .evidence("kind", if f.is_dir { "directory" } else { "file" })
        .evidence_opt("pod_uid", f.pod_uid.clone())
        .evidence_opt("pod_namespace", f.pod.as_ref().map(|p| p.0.clone()))
        .evidence_opt("pod_name", f.pod.as_ref().map(|p| p.1.clone()))
        .evidence_opt("container_id", f.container_id.clone())
        .evidence_opt("log_program", f.named_by.as_ref().map(|n| n.0.clone()))
        .evidence_opt("log_file", f.named_by.as_ref().map(|n| n.1.clone()))
        .when_if("immutable", f.immutable)
        .when_if("append_only", f.append_only)
}

/// `runtime.host_port_conflict`: a hostNetwork pod's port held by another process, or
/// declared by several pods.
fn port_conflict(c: &PortConflict) -> Option<Draft> {
    let declared: Vec<String> = c.pods.iter().map(|p| p.name.clone()).collect();
    let holder_elsewhere = c.holder.as_ref().is_some_and(|h| h.outside(&c.pods));
    let several = {
        let mut d = declared.clone();
        d.sort();
        d.dedup();
        d.len() > 1
    };
    if !holder_elsewhere && !several {
        return None;
    }
    let sources: Vec<String> = c.pods.iter().map(|p| p.source.clone()).collect();
    let mut d = Draft::new(HOST_PORT_CONFLICT, Severity::Warning)
        .subject(format!("{}/{}", c.protocol, c.port))
        .evidence("protocol", c.protocol)
        .evidence("port", u32::from(c.port))
        .evidence("pods", declared.join(", "))
        .evidence("declared_in", sources.join(", "))
        .words("pod_list", &declared)
        .when_if("several_pods", several);
    if let Some(h) = &c.holder {
        d = d
            .evidence("holder_pid", h.pid)
            .evidence("holder_comm", h.comm.clone())
            .evidence_opt("holder_pod", h.pod.clone())
            .when_if("held_by_host_process", !h.in_pod)
            .when_if("held_by_other_pod", h.in_pod && holder_elsewhere);
    }
    Some(d)
}

/// `runtime.kube_proxy_ipvs_sync`.
fn kube_proxy(k: &KubeProxySample, t: &Thresholds) -> Option<Draft> {
    let ipvs = k
        .mode
        .as_deref()
        .is_some_and(|m| m.eq_ignore_ascii_case("ipvs"));
    let cpu = k.cpu_cores?;
    let sync = k.sync_period?;
    if !ipvs || cpu < t.kube_proxy_cpu_cores || sync >= t.ipvs_sync_period {
        return None;
    }
    Some(
        Draft::new(KUBE_PROXY_IPVS_SYNC, Severity::Warning)
            .subject("kube-proxy")
            .evidence("pid", k.pid)
            .evidence("kube_proxy_cpu_percent", (cpu * 1000.0).round() / 10.0)
            .evidence("cpu_threshold_percent", t.kube_proxy_cpu_cores * 100.0)
            .evidence("sync_period_seconds", secs(sync))
            .evidence("recommended_sync_period_seconds", secs(t.ipvs_sync_period))
            .evidence_opt("min_sync_period_seconds", k.min_sync_period.map(secs))
            .evidence("settings_from", k.origin.clone())
            .when_if(
                "min_sync_nonzero",
                k.min_sync_period.is_some_and(|m| !m.is_zero()),
            ),
    )
}

#[cfg(test)]
mod tests;
