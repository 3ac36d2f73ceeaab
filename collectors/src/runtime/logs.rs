//! The node logs' findings, joined to the runtime collector: the reader and judge are the
//! shared `crate::nodelog` (syslog files and the journal, the kubelet's and the runtimes'
//! lines, `collectors/rules/runtime_logs.toml`); this module hands that judge what the probes
//! know now ([`Sample`]'s live facts) and the registry configuration of the registries the
//! pull failures name.

use crate::host::HostPaths;
use crate::node::discover::Locations;
use crate::nodelog::{self, LiveFacts, LogSample};
use crate::rules::Draft;

use super::sample::Sample;
use super::thresholds::Thresholds;

/// Registries whose configuration is read per collection, at most (the most recently seen).
const MAX_REGISTRIES: usize = 20;

/// What the probes and the runtime's configuration say now, for the log judge.
pub fn live_facts(
    host: &HostPaths,
    sample: &Sample,
    t: &Thresholds,
    log: &LogSample,
    locations: &Locations,
) -> LiveFacts {
    LiveFacts {
        full_runtime_dirs: sample.full_runtime_dirs(t),
        cni_config_present: sample.cni_config_present(),
        cri_network_ready: sample.cri_network_ready(),
        runtime_responding: sample.runtime_responding(),
        registries: nodelog::registry_facts(
            host,
            &log.incidents,
            &locations.daemon_json,
            &locations.containerd_config,
            MAX_REGISTRIES,
        ),
    }
}

/// The log findings of one collection.
pub fn judge(
    host: &HostPaths,
    sample: &Sample,
    t: &Thresholds,
    log: &LogSample,
    log_thresholds: &nodelog::Thresholds,
    locations: &Locations,
) -> Vec<Draft> {
    let live = live_facts(host, sample, t, log, locations);
    nodelog::judge::judge(log, &live, log_thresholds)
}

/// What the log reader could not do, for the collector's status.
pub fn notes(log: &LogSample) -> Vec<String> {
    let mut out: Vec<String> = log
        .report
        .errors
        .iter()
        .map(|e| format!("node log: {e}"))
        .collect();
    if let Some(z) = &log.report.zone_problem {
        out.push(format!("node log: {z}"));
    }
    out
}
