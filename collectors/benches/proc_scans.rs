//! Bench (not a test): what the collectors that look at processes (`disk`, `iptables`,
//! `runtime`, `conntrack`) cost per cycle on this machine's real `/`, with `PROC_SCANS_IDLE`
//! (default 2,000) extra idle processes (`sleep 3600`, children of the bench, killed when it
//! ends). Prints, per collector, the CPU of the first cycle and the median CPU of the steady
//! and mean CPU of the steady cycles (this thread's CPU clock, so the iptables lock sampler's
//! own thread is not counted), and the per-process paths (`<root>/proc/<pid>/…`) built per steady cycle.
//!
//! Run it in a pid namespace of its own, where pid 1 is readable and the idle processes are
//! the node's (as with hostPID):
//!
//! ```sh
//! cargo bench -p collectors --bench proc_scans --no-run
//! unshare --pid --fork --mount-proc \
//!   "$(ls -t target/release/deps/proc_scans-* | grep -v '\.d$' | head -1)"
//! ```

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
use collectors::disk::{DiskCollector, DiskConfig};
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::runtime::probe::{ProbePlan, ProbeReport, RuntimeProbe};
use collectors::runtime::{RuntimeCollector, RuntimeConfig};
use collectors::{CollectContext, Collector, HostNetns, HostPaths};

#[path = "common/thread_cpu.rs"]
mod common;
use common::thread_cpu;

const CYCLES: usize = 30;

/// No daemon answers (the probe is the agent's; its cost is the network's).
#[derive(Debug)]
struct Silent;

impl RuntimeProbe for Silent {
    fn probe(&self, _plan: &ProbePlan) -> ProbeReport {
        ProbeReport {
            replies: Vec::new(),
        }
    }
}

/// The idle processes, killed and reaped on drop (also when the bench panics).
struct Idle(Vec<Child>);

impl Drop for Idle {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

fn main() {
    let n: usize = std::env::var("PROC_SCANS_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let mut idle = Idle(Vec::with_capacity(n));
    for _ in 0..n {
        match Command::new("sleep")
            .arg("3600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => idle.0.push(c),
            Err(e) => {
                eprintln!("could not start an idle process: {e}");
                break;
            }
        }
    }
    // Let them settle (exec'd, older than the process table's settle time).
    std::thread::sleep(Duration::from_secs(6));
    let listed = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|s| s.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    // One node, as an agent has: the collectors share its process table.
    let node = collectors::Node::new(HostPaths::new("/"));
    let ctx = CollectContext::new("node-1", HostNetns::Same);
    let mut collectors: Vec<Box<dyn Collector>> = vec![
        Box::new(DiskCollector::new(node.clone(), DiskConfig::default())),
        Box::new(IptablesCollector::new(
            node.clone(),
            IptablesConfig::default(),
        )),
        Box::new(RuntimeCollector::new(
            node.clone(),
            RuntimeConfig::default(),
            Arc::new(Silent),
        )),
        Box::new(ConntrackCollector::new(
            node.clone(),
            ConntrackConfig::default(),
        )),
    ];
    let k = collectors.len();
    let mut first = vec![Duration::ZERO; k];
    let mut steady: Vec<Vec<Duration>> = vec![Vec::new(); k];
    let mut paths = vec![0u64; k];
    for cycle in 0..=CYCLES {
        for (i, c) in collectors.iter_mut().enumerate() {
            let p0 = node.per_process_paths();
            let t0 = thread_cpu();
            let _ = c.collect(&ctx);
            let spent = thread_cpu() - t0;
            if cycle == 0 {
                first[i] = spent;
            } else {
                steady[i].push(spent);
                paths[i] += node.per_process_paths() - p0;
            }
        }
        // Cycles apart, as the agent runs them (the process table's listing is shared
        // within a second).
        std::thread::sleep(Duration::from_millis(1_100));
    }
    println!(
        "proc_scans: {listed} processes listed in /proc ({} idle started), {CYCLES} steady cycles",
        idle.0.len()
    );
    let (mut total_median, mut total_mean) = (Duration::ZERO, Duration::ZERO);
    for (i, c) in collectors.iter().enumerate() {
        steady[i].sort();
        let median = steady[i][steady[i].len() / 2];
        let mean = steady[i].iter().sum::<Duration>() / CYCLES as u32;
        total_median += median;
        total_mean += mean;
        println!(
            "  {:<10} first {:>10.3?}  steady median {:>10.3?}  mean {:>10.3?}  max {:>10.3?}  per-process paths/cycle {:.1}",
            c.name(),
            first[i],
            median,
            mean,
            steady[i][steady[i].len() - 1],
            paths[i] as f64 / CYCLES as f64
        );
    }
    println!("  all four, steady: median {total_median:.3?}, mean {total_mean:.3?} CPU per cycle");
    drop(idle);
}
