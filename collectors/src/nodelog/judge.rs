//! The log-derived findings of the `runtime` collector: typed incidents from the node's logs
//! (plus what is known live about the node) -> drafts. Their words are
//! `collectors/rules/runtime_logs.toml`. Pure: testable without files.
//!
//! Everything ends when the condition ends. kubelet repeats its readiness states (PLEG, the
//! runtime, the network) every few seconds while they hold, so one is current while its last
//! line is at most `state_window` old; the runtimes' errors of one operation (a pull, a
//! sandbox) are retried with back-off of up to five minutes, so they are current while their
//! last line is at most `event_window` old. An older line is history: no finding. When the
//! live state is known to be healthy (the CNI configuration is there and the runtime's
//! network is ready, the runtime answers), a state clears `settle` after its last line
//! without waiting for the window.
//!
//! The collector also probes what the kubelet's lines describe: when the probes already show
//! the runtime down (`runtime.not_running`, `runtime.hung`, …) or the network not ready
//! (`runtime.cni_not_ready`, from the CNI directory and the CRI's `NetworkReady`), those
//! findings say it, and the kubelet's lines add no second finding about the same thing. The
//! log findings are for what only the logs show: the kubelet saying so while the probes see
//! nothing wrong (or cannot tell).

use super::patterns::{EventKind, Runtime};
use super::sample::{Incident, LiveFacts, LogSample, SourceKind};
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::rules::Draft;

/// Broken overlay2 layers reported at most (one finding each).
const MAX_LAYERS: usize = 8;

/// Applies the log rules.
pub fn judge(sample: &LogSample, live: &LiveFacts, t: &Thresholds) -> Vec<Draft> {
    let j = Judging { sample, live, t };
    let mut out = Vec::new();
    out.extend(j.pleg_unhealthy());
    out.extend(j.runtime_not_ready());
    out.extend(j.network_not_ready());
    out.extend(j.name_conflicts());
    if let Some(i) = j.of(EventKind::Ttrpc).first() {
        out.push(
            j.base("runtime.ttrpc_shim_errors", Severity::Warning, i)
                .subject("dockerd"),
        );
    }
    out.extend(j.image_pulls());
    out.extend(j.docker_store());
    out
}

/// One application of the log rules: the sample, the live facts and the thresholds, and the
/// questions every rule asks of an incident.
struct Judging<'a> {
    sample: &'a LogSample,
    live: &'a LiveFacts,
    t: &'a Thresholds,
}

impl<'a> Judging<'a> {
    /// Seconds since the incident's last line.
    fn age(&self, i: &Incident) -> i64 {
        (self.sample.now - i.last_seen).max(0)
    }

    /// How long an incident of this kind stays current after its last line.
    fn window(&self, kind: EventKind) -> i64 {
        if kind.is_state() {
            self.t.state_window_seconds
        } else {
            self.t.event_window_seconds
        }
    }

    /// The current incidents of kind `k`.
    fn of(&self, k: EventKind) -> Vec<&'a Incident> {
        let mut v: Vec<&Incident> = self
            .sample
            .incidents
            .iter()
            .filter(|i| i.kind == k && self.age(i) <= self.window(i.kind))
            .collect();
        // Most recent first, then by subject for a stable order.
        v.sort_by(|a, b| {
            b.last_seen
                .cmp(&a.last_seen)
                .then(a.subject.cmp(&b.subject))
        });
        v
    }

    /// The draft of rule `id` about incident `i`, with the evidence every log rule gives.
    fn base(&self, id: &str, sev: Severity, i: &Incident) -> Draft {
        Draft::new(id, sev)
            .evidence("lines_in_window", i.count)
            .evidence("last_seen_seconds_ago", self.age(i))
            .evidence(
                "first_seen_seconds_ago",
                (self.sample.now - i.first_seen).max(0),
            )
            .evidence("log_file", i.file.as_str())
            .evidence("log_source", i.source.as_str())
            .evidence("last_line", i.example.as_str())
            .var("window_seconds", self.window(i.kind))
            .when_if("journal", i.source == SourceKind::Journal)
    }

    /// node-problem-detector's docker monitor: a broken overlay2 layer (one finding per
    /// layer), a half-written image layer, containers whose process died before they
    /// started.
    fn docker_store(&self) -> Vec<Draft> {
        let mut out: Vec<Draft> = self
            .of(EventKind::CorruptOverlay2)
            .into_iter()
            .take(MAX_LAYERS)
            .map(|i| {
                self.base("runtime.overlay2_corrupt", Severity::Warning, i)
                    .subject(i.subject.clone())
                    .evidence("layer", i.subject.as_str())
            })
            .collect();
        if let Some(i) = self.of(EventKind::CorruptImage).first() {
            out.push(
                self.base("runtime.image_layer_corrupt", Severity::Warning, i)
                    .subject(i.subject.clone())
                    .evidence_opt("image", (i.subject != "dockerd").then(|| i.subject.clone())),
            );
        }
        if let Some(i) = self.of(EventKind::StartDead).first() {
            out.push(
                self.base("runtime.container_start_dead", Severity::Warning, i)
                    .subject(i.subject.clone())
                    .evidence("runtime", i.subject.as_str()),
            );
        }
        out
    }

    /// The live state is known healthy and the incident's last line is older than `settle`.
    fn settled(&self, i: &Incident, healthy: Option<bool>) -> bool {
        healthy == Some(true) && self.age(i) > self.t.settle_seconds
    }

    fn pleg_unhealthy(&self) -> Option<Draft> {
        let live = self.live;
        let i = *self.of(EventKind::PlegUnhealthy).first()?;
        let no_space = self.of(EventKind::NoSpace);
        let full = !live.full_runtime_dirs.is_empty() || !no_space.is_empty();
        let mut d = self
            .base("runtime.pleg_unhealthy", Severity::Critical, i)
            .subject("kubelet")
            .when_if("disk_full", full);
        if !live.full_runtime_dirs.is_empty() {
            d = d
                .evidence("full_runtime_dirs", live.full_runtime_dirs.join(", "))
                .words("full_dirs", &live.full_runtime_dirs);
        }
        if let Some(p) = no_space.first().and_then(|n| n.detail.path.clone()) {
            d = d.evidence("no_space_path", p);
        }
        Some(d)
    }

    fn runtime_not_ready(&self) -> Option<Draft> {
        let live = self.live;
        let i = *self.of(EventKind::RuntimeNotReady).first()?;
        // A runtime the probes see down is reported from the probes.
        if live.runtime_responding == Some(false) || self.settled(i, live.runtime_responding) {
            return None;
        }
        Some(
            self.base("runtime.kubelet_runtime_not_ready", Severity::Critical, i)
                .subject("kubelet")
                .evidence_opt("reason", i.detail.reason.clone()),
        )
    }

    fn network_not_ready(&self) -> Option<Draft> {
        let live = self.live;
        let i = *self.of(EventKind::NetworkNotReady).first()?;
        // A missing configuration or a CRI saying the network is not ready is reported from
        // the probes (runtime.cni_not_ready).
        let probes_show_it =
            live.cni_config_present == Some(false) || live.cri_network_ready == Some(false);
        let healthy = match (live.cni_config_present, live.cri_network_ready) {
            (Some(true), Some(true)) | (Some(true), None) => Some(true),
            _ => None,
        };
        if probes_show_it || self.settled(i, healthy) {
            return None;
        }
        Some(
            self.base("runtime.kubelet_network_not_ready", Severity::Critical, i)
                .subject("kubelet")
                .evidence_opt("reason", i.detail.reason.clone())
                .when_if("cni_config_present", live.cni_config_present == Some(true)),
        )
    }

    fn name_conflicts(&self) -> Vec<Draft> {
        let mut out = Vec::new();
        for i in self
            .of(EventKind::NameConflict)
            .into_iter()
            .take(self.t.max_subjects)
        {
            let runtime = i.detail.runtime.unwrap_or(Runtime::Docker);
            out.push(
                self.base("runtime.container_name_conflict", Severity::Warning, i)
                    .subject(i.subject.as_str())
                    .evidence("container_name", i.subject.as_str())
                    .evidence("pod", i.detail.pod.clone().unwrap_or_default())
                    .evidence("namespace", i.detail.namespace.clone().unwrap_or_default())
                    .evidence("runtime", runtime.as_str())
                    .evidence_opt("holder_id", i.detail.holder.clone())
                    .when_if("docker", runtime == Runtime::Docker)
                    .when_if("containerd", runtime == Runtime::Containerd),
            );
        }
        out
    }

    fn image_pulls(&self) -> Vec<Draft> {
        let mut out = Vec::new();
        for (kind, id) in [
            (
                EventKind::PullHttpRegistry,
                "runtime.image_pull_http_registry",
            ),
            (EventKind::PullUnknownCa, "runtime.image_pull_unknown_ca"),
            (EventKind::PullAuth, "runtime.image_pull_auth"),
            (EventKind::PullNotFound, "runtime.image_not_found"),
        ] {
            for i in self.of(kind).into_iter().take(self.t.max_subjects) {
                out.push(self.image_pull(kind, id, i));
            }
        }
        out
    }

    /// One image pull failure, with the advice for the runtime and the registry's
    /// configuration.
    fn image_pull(&self, kind: EventKind, id: &str, i: &Incident) -> Draft {
        let registry = i.detail.registry.clone().unwrap_or_default();
        let facts = self.live.registries.get(&registry);
        let runtime = i.detail.runtime;
        let docker = runtime == Some(Runtime::Docker)
            || (runtime.is_none()
                && facts.is_some_and(|f| f.docker_config && !f.containerd_config));
        let containerd = runtime == Some(Runtime::Containerd)
            || (runtime.is_none()
                && facts.is_some_and(|f| f.containerd_config && !f.docker_config));
        let mut d = self
            .base(id, Severity::Warning, i)
            .subject(i.subject.as_str())
            .evidence("image", i.subject.as_str())
            .evidence("registry", registry.as_str())
            .evidence_opt("runtime", runtime.map(Runtime::as_str))
            .when_if("docker", docker)
            .when_if("containerd", containerd);
        if kind == EventKind::PullUnknownCa {
            d = d.var("registry_address", with_port(&registry));
        }
        if let Some(f) = facts {
            d = match kind {
                EventKind::PullHttpRegistry => d
                    .when_if("docker_listed_insecure", docker && f.docker_insecure)
                    .when_if("docker_not_listed", docker && !f.docker_insecure)
                    .when_if(
                        "containerd_http_configured",
                        containerd && f.containerd_http,
                    )
                    .when_if(
                        "containerd_not_configured",
                        containerd && !f.containerd_http,
                    ),
                EventKind::PullUnknownCa => d
                    .when_if("docker_ca_present", docker && f.docker_ca)
                    .when_if("docker_ca_missing", docker && !f.docker_ca)
                    .when_if(
                        "containerd_ca_configured",
                        containerd && (f.containerd_ca || f.containerd_skip_verify),
                    )
                    .when_if(
                        "containerd_ca_missing",
                        containerd && !f.containerd_ca && !f.containerd_skip_verify,
                    ),
                _ => d,
            };
            d = d.evidence_opt("containerd_hosts_file", f.containerd_hosts_file.clone());
        }
        d
    }
}

/// `host:port` of a registry for a TLS connection: its own port, else 443.
fn with_port(registry: &str) -> String {
    if registry
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        registry.to_string()
    } else if registry == "docker.io" {
        "registry-1.docker.io:443".to_string()
    } else {
        format!("{registry}:443")
    }
}

#[cfg(test)]
mod tests;
