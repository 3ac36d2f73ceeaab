//! The whole plugin system: the list of collectors the agent runs.

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::disk::{DiskCollector, DiskConfig};
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::load::{LoadCollector, LoadConfig};
use collectors::memory::{MemoryCollector, MemoryConfig};
use collectors::{Collector, HostPaths};

/// Every collector's configuration, built from the command line (`cli::CollectorFlags`).
#[derive(Debug, Clone, Default)]
pub struct CollectorOptions {
    pub disk: DiskConfig,
    pub load: LoadConfig,
    pub memory: MemoryConfig,
    pub iptables: IptablesConfig,
    pub conntrack: ConntrackConfig,
    pub kernel: KernelConfig,
}

/// Every collector, constructed for this host.
///
/// Called again to re-create a collector after it panicked, so constructors must be cheap:
/// they open nothing (the `iptables` lock sampler starts a light thread, stopped on drop).
pub fn all(host: &HostPaths, opts: &CollectorOptions) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(DiskCollector::new(host.clone(), opts.disk.clone())),
        Box::new(LoadCollector::new(host.clone(), opts.load.clone())),
        Box::new(MemoryCollector::new(host.clone(), opts.memory.clone())),
        Box::new(IptablesCollector::new(host.clone(), opts.iptables.clone())),
        Box::new(ConntrackCollector::new(
            host.clone(),
            opts.conntrack.clone(),
        )),
        Box::new(KernelCollector::new(host.clone(), opts.kernel.clone())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_collectors() {
        let host = HostPaths::new("/nonexistent-host-root");
        let got: Vec<&str> = all(&host, &CollectorOptions::default())
            .iter()
            .map(|c| c.name())
            .collect();
        assert_eq!(
            got,
            ["disk", "load", "memory", "iptables", "conntrack", "kernel"]
        );
    }
}
