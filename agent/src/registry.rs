//! The whole plugin system: the list of collectors the agent runs.

use collectors::{Collector, HostPaths};

/// Every collector, constructed for this host. Each collector helper adds its own line.
pub fn all(_host: &HostPaths) -> Vec<Box<dyn Collector>> {
    Vec::new()
}
