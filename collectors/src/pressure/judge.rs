//! The pressure rules: a typed [`PressureSample`] (from [`sample`](super::sample)) -> drafts
//! under the [`Thresholds`] of [`thresholds`](super::thresholds). Their words are in
//! `collectors/rules/pressure.toml`. Pure: testable without files.
//!
//! Stall (PSI) is judged on the kernel's 60 s and 300 s averages, throttling and swap-in as
//! rates over the window between two runs with a materiality floor, never totals since boot.
//! The `load` collector judges node-level CPU and IO PSI for its own question (CPU- or
//! IO-bound); these rules are about stall: memory and IO `full`, CPU `some`, and the pods
//! behind it.

use std::collections::BTreeMap;

use crate::config::kubelet::SwapOrigin;
use crate::finding::Severity;
use crate::proc::pressure::PsiLine;
use crate::rules::Draft;

use super::sample::{PodIdentity, PressureSample, Psi, Resource, ThrottleWindow};
use super::thresholds::{Stall, Thresholds, Window};

/// Applies every pressure rule.
pub fn judge(s: &PressureSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(node_stall(s, t));
    out.extend(pod_stall(s, t));
    out.extend(daemon_throttled(s, t));
    out.extend(pod_throttled(s, t));
    out.extend(swap_fail_swap_on(s));
    out.extend(swap_in(s, t));
    out
}

/// The line a resource is judged by, and its value in the judged window.
fn judged(psi: &Psi, r: Resource, stall: &Stall) -> Option<(PsiLine, f64)> {
    let p = psi.get(r)?;
    let line = if stall.full { p.full? } else { p.some };
    let v = match stall.window {
        Window::Avg60 => line.avg60,
        Window::Avg300 => line.avg300,
    };
    Some((line, v))
}

fn severity(v: f64, warning: f64, critical: f64) -> Option<Severity> {
    if v >= critical {
        Some(Severity::Critical)
    } else if v >= warning {
        Some(Severity::Warning)
    } else {
        None
    }
}

fn window_name(w: Window) -> &'static str {
    match w {
        Window::Avg60 => "avg60",
        Window::Avg300 => "avg300",
    }
}

/// The draft of a stalled resource, with the figures both stall rules print.
fn stall_draft(id: &str, sev: Severity, r: Resource, stall: &Stall, line: &PsiLine) -> Draft {
    Draft::new(id, sev)
        .evidence("resource", r.as_str())
        .evidence("line", if stall.full { "full" } else { "some" })
        .evidence("window", window_name(stall.window))
        .evidence(
            "averaged_seconds",
            match stall.window {
                Window::Avg60 => 60u64,
                Window::Avg300 => 300,
            },
        )
        .evidence("avg10_percent", line.avg10)
        .evidence("avg60_percent", line.avg60)
        .evidence("avg300_percent", line.avg300)
        .evidence("warning_percent", stall.warning)
        .evidence("critical_percent", stall.critical)
        .when_if("memory", r == Resource::Memory)
        .when_if("io", r == Resource::Io)
        .when_if("cpu", r == Resource::Cpu)
}

/// `pressure.node_stall`: the node's tasks stalled on memory, IO or CPU.
fn node_stall(s: &PressureSample, t: &Thresholds) -> Vec<Draft> {
    let Some(node) = &s.node else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in Resource::ALL {
        let stall = t.stall(r);
        let Some((line, v)) = judged(node, r, &stall) else {
            continue;
        };
        let Some(sev) = severity(v, stall.warning, stall.critical) else {
            continue;
        };
        // How much of it is the pods' (the kubepods cgroup's same line and window).
        let pods = s
            .kubepods
            .as_ref()
            .and_then(|k| judged(k, r, &stall))
            .map(|x| x.1);
        out.push(
            stall_draft("pressure.node_stall", sev, r, &stall, &line)
                .subject(r.as_str())
                .evidence("stall_percent", v)
                .evidence_opt("kubepods_percent", pods),
        );
    }
    out
}

/// The pod's name for a subject: `namespace/name` when known, else its UID.
fn pod_subject(p: &PodIdentity) -> String {
    match (&p.namespace, &p.name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        _ => p.uid.clone(),
    }
}

fn with_pod(d: Draft, p: &PodIdentity) -> Draft {
    d.subject(pod_subject(p))
        .evidence("pod_uid", p.uid.as_str())
        .evidence("qos", p.qos.as_str())
        .evidence_opt("namespace", p.namespace.clone())
        .evidence_opt("pod", p.name.clone())
}

/// `pressure.pod_stall`: the pods whose own cgroup stalls most, each on its worst resource
/// (by its value over the resource's warning limit); at most `max_pods_named`.
fn pod_stall(s: &PressureSample, t: &Thresholds) -> Vec<Draft> {
    let mut hits = Vec::new();
    for pod in &s.pods {
        let worst = Resource::ALL
            .iter()
            .filter_map(|&r| {
                let stall = t.stall(r);
                let (line, v) = judged(&pod.psi, r, &stall)?;
                let sev = severity(v, stall.warning, stall.critical)?;
                Some((
                    sev,
                    v / stall.warning.max(f64::MIN_POSITIVE),
                    r,
                    stall,
                    line,
                    v,
                ))
            })
            .max_by(|a, b| {
                (a.0, a.1)
                    .partial_cmp(&(b.0, b.1))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        if let Some(w) = worst {
            hits.push((pod, w));
        }
    }
    hits.sort_by(|a, b| {
        (b.1 .0, b.1 .1)
            .partial_cmp(&(a.1 .0, a.1 .1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    hits.into_iter()
        .take(t.max_pods_named)
        .map(|(pod, (sev, _, r, stall, line, v))| {
            let file = format!("{}/{}.pressure", pod.cgroup_dir, r.as_str());
            with_pod(
                stall_draft("pressure.pod_stall", sev, r, &stall, &line),
                &pod.pod,
            )
            .evidence("stall_percent", v)
            .evidence("pressure_file", file)
        })
        .collect()
}

/// The figures of a throttling window.
fn throttle_evidence(d: Draft, w: &ThrottleWindow) -> Draft {
    d.evidence("throttled_percent", w.percent())
        .evidence("periods", w.periods)
        .evidence("throttled_periods", w.throttled)
        .evidence("throttled_seconds", w.throttled_usec as f64 / 1e6)
        .evidence("window_seconds", w.window_seconds)
}

/// `pressure.daemon_throttled`: the kubelet's or a container runtime's CPU cgroup ran out
/// of quota in a material share of its periods.
fn daemon_throttled(s: &PressureSample, t: &Thresholds) -> Vec<Draft> {
    s.daemons
        .iter()
        .filter_map(|d| {
            let w = d.window?;
            if w.periods < t.min_periods {
                return None;
            }
            let sev = severity(
                w.percent(),
                t.daemon_throttled_warning_percent,
                t.daemon_throttled_critical_percent,
            )?;
            let draft = Draft::new("pressure.daemon_throttled", sev)
                .subject(d.daemon.as_str())
                .evidence("daemon", d.daemon.as_str())
                .evidence("pid", d.pid)
                .evidence("cgroup", d.cgroup.as_str())
                .evidence("cpu_stat_file", format!("{}/cpu.stat", d.cgroup_dir))
                .evidence("threshold_percent", t.daemon_throttled_warning_percent)
                .when_if("kubelet", d.daemon == "kubelet");
            Some(throttle_evidence(draft, &w))
        })
        .collect()
}

/// `pressure.pod_throttled`: the pods with the most throttled cgroup (pod or container),
/// among cgroups with at least `min_periods` in the window; at most `max_pods_named`.
fn pod_throttled(s: &PressureSample, t: &Thresholds) -> Vec<Draft> {
    let mut worst: BTreeMap<&str, &super::sample::PodThrottle> = BTreeMap::new();
    for c in &s.pod_throttling {
        if c.window.periods < t.min_periods || c.window.percent() < t.pod_throttled_warning_percent
        {
            continue;
        }
        let slot = worst.entry(c.pod.uid.as_str()).or_insert(c);
        if c.window.percent() > slot.window.percent() {
            *slot = c;
        }
    }
    let mut hits: Vec<_> = worst.into_values().collect();
    hits.sort_by(|a, b| {
        b.window
            .percent()
            .partial_cmp(&a.window.percent())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    hits.into_iter()
        .take(t.max_pods_named)
        .map(|c| {
            let d = with_pod(
                Draft::new("pressure.pod_throttled", Severity::Warning),
                &c.pod,
            )
            .evidence("cpu_stat_file", format!("{}/cpu.stat", c.cgroup_dir))
            .evidence_opt("container_id", c.container_id.clone())
            .evidence("threshold_percent", t.pod_throttled_warning_percent)
            .when_if("container", c.container_id.is_some());
            throttle_evidence(d, &c.window)
        })
        .collect()
}

/// `pressure.swap_fail_swap_on`: swap is on and the kubelet is set to refuse it.
fn swap_fail_swap_on(s: &PressureSample) -> Option<Draft> {
    let swap = s.swap.as_ref().filter(|w| w.total_bytes > 0)?;
    let k = s.kubelet.as_ref().filter(|k| k.fail_swap_on)?;
    let sev = if k.running {
        Severity::Warning
    } else {
        Severity::Critical
    };
    Some(
        Draft::new("pressure.swap_fail_swap_on", sev)
            .subject("swap")
            .evidence("swap_total_bytes", swap.total_bytes)
            .evidence(
                "swap_used_bytes",
                swap.total_bytes.saturating_sub(swap.free_bytes),
            )
            .evidence("kubelet_config", k.config_path.as_str())
            .words("swap_areas", swap.areas.iter())
            .when_if("kubelet_running", k.running)
            .when_if("from_flag", k.origin == SwapOrigin::Flag)
            .when_if("from_config", k.origin == SwapOrigin::ConfigFile)
            .when_if("from_default", k.origin == SwapOrigin::Default),
    )
}

/// `pressure.swap_in`: pages come back in from swap at a sustained rate.
fn swap_in(s: &PressureSample, t: &Thresholds) -> Option<Draft> {
    let swap = s.swap.as_ref()?;
    let rate = swap.rate?;
    if rate.window_seconds <= 0.0 || rate.pages_in < t.min_swap_in_pages {
        return None;
    }
    let per_s = rate.pages_in as f64 / rate.window_seconds;
    let sev = severity(
        per_s,
        t.swap_in_warning_pages_per_second,
        t.swap_in_critical_pages_per_second,
    )?;
    let behavior = s.kubelet.as_ref().and_then(|k| k.behavior.clone());
    Some(
        Draft::new("pressure.swap_in", sev)
            .subject("swap")
            .evidence("swap_in_pages_per_second", per_s)
            .evidence(
                "swap_out_pages_per_second",
                rate.pages_out as f64 / rate.window_seconds,
            )
            .evidence("swap_in_bytes_per_second", per_s * s.page_size_bytes as f64)
            .evidence("window_seconds", rate.window_seconds)
            .evidence("swap_total_bytes", swap.total_bytes)
            .evidence(
                "swap_used_bytes",
                swap.total_bytes.saturating_sub(swap.free_bytes),
            )
            .evidence(
                "threshold_pages_per_second",
                t.swap_in_warning_pages_per_second,
            )
            .evidence_opt("swap_behavior", behavior),
    )
}

#[cfg(test)]
mod tests;
