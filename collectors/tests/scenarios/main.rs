//! Scenario tests: fake host roots built by the tests that reproduce the handbook's situations,
//! plus real-kernel tests that skip (with the reason printed) when not root.
//! One test binary for all collectors (each collector adds its module below).

mod citations;
mod clock;
mod conntrack;
#[path = "../../../tests/e2e/debian.rs"]
mod debian;
mod disk;
mod disk_filling;
mod dns;
mod explain;
mod explain_phrasings;
mod function_length;
mod golden;
mod gpu;
mod hardware;
mod hostile;
mod hostile_files;
mod iptables;
mod kernel;
mod kmsg;
mod load;
mod memory;
mod net;
mod nodelog;
mod npd;
mod npd_parity;
mod pressure;
mod reach;
mod registry;
mod rules;
mod runtime;
#[path = "../../../tests/e2e/sandbox.rs"]
mod sandbox;
mod support;
mod tables;
