//! The whole plugin system: the list of collectors the agent runs.

use std::sync::Arc;
use std::time::Duration;

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::disk::{DiskCollector, DiskConfig};
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::load::{LoadCollector, LoadConfig};
use collectors::memory::{MemoryCollector, MemoryConfig};
use collectors::runtime::probe::RuntimeProbe;
use collectors::runtime::{RuntimeCollector, RuntimeConfig};
use collectors::{Collector, Node};

use crate::probe::HostProbe;

/// Every collector's configuration, built from the command line (`cli::CollectorFlags`).
#[derive(Debug, Clone)]
pub struct CollectorOptions {
    pub disk: DiskConfig,
    pub load: LoadConfig,
    pub memory: MemoryConfig,
    pub iptables: IptablesConfig,
    pub conntrack: ConntrackConfig,
    pub kernel: KernelConfig,
    pub runtime: RuntimeConfig,
    /// How the runtime collector asks the daemons (the agent's hyper/tokio probes).
    pub runtime_probe: Arc<dyn RuntimeProbe>,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        CollectorOptions {
            disk: DiskConfig::default(),
            load: LoadConfig::default(),
            memory: MemoryConfig::default(),
            iptables: IptablesConfig::default(),
            conntrack: ConntrackConfig::default(),
            kernel: KernelConfig::default(),
            runtime: RuntimeConfig::default(),
            runtime_probe: Arc::new(HostProbe),
        }
    }
}

/// The shortest default timeout of a collector's run, when its work needs more than the
/// default (the smaller of its interval and 10 s; `check` samples 1 s apart): the runtime
/// collector waits up to its probe timeout for a hung daemon, plus its bounded walks.
pub fn min_timeout(name: &str, opts: &CollectorOptions) -> Option<Duration> {
    match name {
        "runtime" => {
            Some(opts.runtime.probe_timeout + opts.runtime.walk_time + Duration::from_secs(2))
        }
        _ => None,
    }
}

/// Every collector, constructed for this host.
///
/// Called again to re-create a collector after it panicked, so constructors must be cheap:
/// they open nothing (the `iptables` lock sampler starts a light thread, stopped on drop).
pub fn all(node: &Node, opts: &CollectorOptions) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(DiskCollector::new(node.clone(), opts.disk.clone())),
        Box::new(LoadCollector::new(node.clone(), opts.load.clone())),
        Box::new(MemoryCollector::new(node.clone(), opts.memory.clone())),
        Box::new(IptablesCollector::new(node.clone(), opts.iptables.clone())),
        Box::new(ConntrackCollector::new(
            node.clone(),
            opts.conntrack.clone(),
        )),
        Box::new(KernelCollector::new(node.clone(), opts.kernel.clone())),
        Box::new(RuntimeCollector::new(
            node.clone(),
            opts.runtime.clone(),
            Arc::clone(&opts.runtime_probe),
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_collectors() {
        let host = Node::new(collectors::HostPaths::new("/nonexistent-host-root"));
        let got: Vec<&str> = all(&host, &CollectorOptions::default())
            .iter()
            .map(|c| c.name())
            .collect();
        assert_eq!(
            got,
            [
                "disk",
                "load",
                "memory",
                "iptables",
                "conntrack",
                "kernel",
                "runtime"
            ]
        );
    }
}
