//! The whole plugin system: the list of collectors the agent runs.

use collectors::{Collector, HostPaths};

/// Per-collector settings built from the command line (kmsg lookback, thresholds, ...).
/// Each collector's options are added here when it is wired in.
#[derive(Debug, Clone, Default)]
pub struct CollectorOptions {}

/// Every collector, constructed for this host. Each collector adds its own line.
///
/// Called again to re-create a collector after it panicked, so constructors must be cheap
/// and must not read the host.
pub fn all(_host: &HostPaths, _opts: &CollectorOptions) -> Vec<Box<dyn Collector>> {
    Vec::new()
}
