//! Bench (not a test): the clock collector's cycle on this machine's real root, printing the
//! CPU time per cycle (the thread's CPU clock, precise where getrusage rounds to the tick):
//! a synchronised clock (one `adjtimex(2)` and `/proc/uptime`; the kernel's state injected so
//! the figure does not depend on this machine's daemon), and an unsynchronised one (the time
//! daemons looked up in the process table each cycle as well).
//!
//! Run: `cargo bench -p collectors --bench clock`

use collectors::clock::timex::{self, from_raw, RawTimex};
use collectors::clock::{ClockCollector, ClockConfig};
use collectors::{CollectContext, Collector, HostNetns, HostPaths, Node};

#[path = "common/thread_cpu.rs"]
mod common;
use common::thread_cpu;

const CYCLES: u32 = 2_000;

fn per_cycle(name: &str, col: &mut ClockCollector, ctx: &CollectContext) {
    // Warm: the first cycle lists /proc for the process table.
    let _ = col.collect(ctx);
    let t0 = thread_cpu();
    let mut findings = 0;
    for _ in 0..CYCLES {
        findings += col.collect(ctx).findings.len();
    }
    let spent = thread_cpu() - t0;
    println!(
        "{name:<44} {:>8.1} µs CPU per cycle ({CYCLES} cycles, {} findings per cycle)",
        spent.as_secs_f64() * 1e6 / f64::from(CYCLES),
        findings / CYCLES as usize
    );
}

fn main() {
    let ctx = CollectContext::new("bench", HostNetns::Same);
    let node = Node::new(HostPaths::new("/"));
    let real = timex::read().map(|t| t.synchronised());
    println!("this machine's clock synchronised: {real:?}");
    let synced = from_raw(
        RawTimex {
            status: 0x2001,
            offset: 0,
            freq: 0,
            maxerror: 30_000,
            esterror: 1_000,
        },
        0,
    );
    let unsynced = from_raw(
        RawTimex {
            status: 0x40,
            maxerror: 16_000_000,
            esterror: 16_000_000,
            ..RawTimex::default()
        },
        5,
    );
    let mut ok = ClockCollector::with_source(
        node.clone(),
        ClockConfig::default(),
        Box::new(move || {
            // The system call itself, then the injected state.
            let _ = timex::read();
            Ok(synced)
        }),
    );
    per_cycle("synchronised (healthy cycle)", &mut ok, &ctx);
    let mut bad = ClockCollector::with_source(
        node.clone(),
        ClockConfig::default(),
        Box::new(move || {
            let _ = timex::read();
            Ok(unsynced)
        }),
    );
    per_cycle("unsynchronised (daemons looked up)", &mut bad, &ctx);
    let mut real = ClockCollector::new(node, ClockConfig::default());
    per_cycle("this machine's clock, as deployed", &mut real, &ctx);
}
