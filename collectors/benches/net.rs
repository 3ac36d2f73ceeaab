//! Bench (not a test): the net collector's healthy cycle on this machine's real root, printing
//! the CPU time per cycle (the thread's CPU clock): `/proc/uptime`, `/proc/net/softnet_stat`,
//! the listing of `/sys/class/net` and, per watched interface, its kind, link files and 11
//! `statistics/*` counters; the bonding directory; the metrics of every CPU and interface.
//!
//! Run: `cargo bench -p collectors --bench net`

use std::time::Duration;

use collectors::net::{NetCollector, NetConfig};
use collectors::{CollectContext, Collector, HostNetns, HostPaths, Node};

const CYCLES: u32 = 2_000;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, exclusively borrowed timespec the call fills in.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let ctx = CollectContext::new("bench", HostNetns::Same);
    let node = Node::new(HostPaths::new("/"));
    let mut col = NetCollector::new(node, NetConfig::default());
    let first = col.collect(&ctx);
    let interfaces = first
        .metrics
        .iter()
        .filter(|m| m.name == "node_doctor_net_interface_link_up")
        .count();
    let t0 = thread_cpu();
    let mut findings = 0;
    for _ in 0..CYCLES {
        findings += col.collect(&ctx).findings.len();
    }
    let spent = thread_cpu() - t0;
    println!(
        "healthy cycle, real root ({interfaces} interfaces watched)  {:>8.1} µs CPU per cycle ({CYCLES} cycles, {} findings per cycle)",
        spent.as_secs_f64() * 1e6 / f64::from(CYCLES),
        findings / CYCLES as usize
    );
}
