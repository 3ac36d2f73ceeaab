//! End-to-end tests, one binary (as ripgrep gathers its integration tests): they drive the
//! `node-doctor` binary Cargo builds for this package (`CARGO_BIN_EXE_node-doctor`) against
//! fake host roots built by the tests.

mod as_deployed;
mod browser;
mod check;
mod daemons;
mod debian;
mod deploy;
mod explain;
mod fleet;
mod host_files;
mod hostile;
mod hot_code;
mod hysteresis;
mod idle_cpu;
mod image;
mod kube;
mod manifests;
mod node_page;
mod npd;
mod prometheus;
mod readme;
mod real_disk;
mod real_dns;
mod real_load;
mod real_runtime;
mod real_throttled;
mod release;
mod rules_file;
mod sandbox;
mod see_also;
mod serve;
mod server_limits;
mod soak;
mod support;
