//! node-doctor's collectors: re-rootable readers of the host's `/proc`, `/sys` and
//! container-runtime directories, and the rules that judge what they read into [`Finding`]s.
//!
//! Invariants (see ARCHITECTURE.md):
//! - nothing in this crate reads an absolute path: every path comes from [`HostPaths`];
//! - parsing (`text -> typed sample`) is pure and separate from judging (`sample -> findings`);
//! - this crate knows nothing of HTTP, JSON documents, Prometheus encoding or tokio;
//! - every host read goes through [`hostfs`]: capped per kind of file, non-blocking, regular
//!   files only; host text copied into output is capped by [`bounded`];
//! - no finding builds shell text with `format!` from host data: commands are [`shell::Cmd`]
//!   templates whose arguments the one renderer quotes.

pub mod bounded;
pub mod clock;
pub mod collector;
pub mod config;
pub mod conntrack;
pub mod disk;
pub mod dns;
pub mod embedded;
pub mod error;
pub mod explain;
pub mod figure;
pub mod finding;
pub mod gpu;
pub mod handbooks;
pub mod hardware;
pub mod host;
pub mod hostfs;
#[cfg(test)]
mod imports;
pub mod iptables;
pub mod kernel;
pub mod kmsg;
pub mod listing;
pub mod load;
pub mod memory;
pub mod metric;
pub mod names;
pub mod needle;
pub mod net;
pub mod node;
pub mod nodelog;
pub mod npd;
pub mod pods;
pub mod pressure;
pub mod proc;
pub mod reach;
pub mod registry;
pub mod rules;
pub mod runtime;
pub mod sanitize;
pub mod shell;
pub mod sys;
pub mod tables;
#[cfg(test)]
mod testgen;
pub mod testing;

pub use collector::{CollectContext, Collection, Collector, HostNetns, Phases, Status};
pub use error::ReadError;
pub use finding::{Evidence, Finding, Lang, Remediation, Severity, Source, Text};
pub use host::HostPaths;
pub use metric::{Metric, MetricKind};
pub use node::Node;
pub use shell::Cmd;
