//! Bench of the `load` collector on the real host (run as root for /proc/<pid>/io):
//! - CPU time of one collection with 2,000 extra processes (spawned `sleep`s): as the host's
//!   whole-node signals decide, on a quiet node (no process read) and reading every process;
//! - resident memory over 1,000 collections with process churn (20 sleepers replaced per cycle);
//! - CPU time of parsing one `/proc/<pid>/stat` line (procfs-core behind `pid::parse_stat`).
//!
//! `cargo bench -p collectors --bench load`

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use collectors::load::{Escalation, LoadCollector, LoadConfig, Thresholds};
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

fn cpu_seconds() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    t(u.user_time()) + t(u.system_time())
}

fn rss_kib() -> u64 {
    // Our own status: the bench measures itself, so /proc/self is the right file here.
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sleep")
}

fn kill_all(children: &mut Vec<Child>) {
    for c in children.iter_mut() {
        let _ = c.kill();
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
    children.clear();
}

fn main() {
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    let root = nix::unistd::Uid::effective().is_root();
    println!("load bench (root: {root})");
    parse_stat_cost();
    let mut kids: Vec<Child> = (0..2000).map(|_| sleeper()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let pids = collectors::proc::pid::list_pids(&collectors::HostPaths::new("/"))
        .map(|p| p.len())
        .unwrap_or(0);
    println!("processes on the host: {pids}");

    collection_modes(&ctx);
    churn(&ctx, &mut kids);
    kill_all(&mut kids);
}

/// The cost of parsing one `/proc/<pid>/stat` line.
fn parse_stat_cost() {
    // Our own stat line: the bench measures parsing, any real line will do.
    let line = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let n = 200_000;
    let t = cpu_seconds();
    for _ in 0..n {
        let s = collectors::proc::pid::parse_stat(std::hint::black_box(&line));
        assert!(s.is_ok());
    }
    println!(
        "parse one /proc/<pid>/stat line: {:.0} ns CPU (mean of {n})",
        (cpu_seconds() - t) * 1e9 / f64::from(n)
    );
}

/// One collection's CPU time in each escalation mode.
fn collection_modes(ctx: &CollectContext) {
    // One collection's CPU time, steady state, three ways: escalation as this host's
    // whole-node signals decide; bars never reached (a quiet node: no process file read);
    // bars always reached (every process on every run, as before escalation).
    // A quiet node is staged by limits no host reaches: no rule fires, no bar is reached
    // (this shared VM's own load is not the bench's to choose).
    let unreachable = Thresholds {
        load_warning_per_cpu: f64::INFINITY,
        load_critical_per_cpu: f64::INFINITY,
        iowait_info_percent: f64::INFINITY,
        iowait_warning_percent: f64::INFINITY,
        iowait_critical_percent: f64::INFINITY,
        disk_busy_percent: f64::INFINITY,
        psi_io_full_percent: f64::INFINITY,
        blocked_per_cpu: f64::INFINITY,
        cpu_busy_percent: f64::INFINITY,
        escalation: Escalation::never(),
        ..Thresholds::default()
    };
    let modes = [
        ("as the host's signals decide", Thresholds::default()),
        ("quiet (no bar reached, no rule fires)", unreachable),
        (
            "every run (bars always reached)",
            Thresholds {
                escalation: Escalation::always(),
                ..Thresholds::default()
            },
        ),
    ];
    for (name, thresholds) in modes {
        let config = LoadConfig {
            thresholds,
            ..LoadConfig::default()
        };
        let host = HostPaths::new("/");
        let mut c = LoadCollector::new(collectors::Node::new(host.clone()), config);
        let t0 = cpu_seconds();
        c.collect(ctx);
        let first_ms = (cpu_seconds() - t0) * 1000.0;
        let mut runs = Vec::new();
        let mut read = 0;
        let paths0 = host.per_process_paths();
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(100));
            let t = cpu_seconds();
            let out = c.collect(ctx);
            runs.push((cpu_seconds() - t) * 1000.0);
            assert!(!out.metrics.is_empty());
            if out
                .metrics
                .iter()
                .any(|m| m.name == "node_doctor_load_process_detail" && m.value == 1.0)
            {
                read += 1;
            }
        }
        runs.sort_by(|a, b| a.total_cmp(b));
        println!(
            "one collection CPU time (user+sys), {name}: first {first_ms:.2} ms; next 10: min {:.2} ms, median {:.2} ms, max {:.2} ms; {read} of 10 read the processes, {} per-process paths per run",
            runs[0],
            runs[runs.len() / 2],
            runs[runs.len() - 1],
            (host.per_process_paths() - paths0) / 10
        );
    }
}

/// Per-pid state and memory over churn: `kids` replaced 20 at a time.
fn churn(ctx: &CollectContext, kids: &mut Vec<Child>) {
    // Per-pid state over churn: every process on every run.
    let mut c = LoadCollector::new(
        collectors::Node::new(HostPaths::new("/")),
        LoadConfig {
            thresholds: Thresholds {
                escalation: Escalation::always(),
                ..Thresholds::default()
            },
            ..LoadConfig::default()
        },
    );
    // Memory with churn: replace 20 sleepers before every collection.
    let cycles: usize = std::env::var("LOAD_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut rss = Vec::new();
    let mut collect_cpu = 0.0;
    let mut worst: f64 = 0.0;
    for i in 0..cycles {
        let mut gone: Vec<Child> = kids.drain(..20).collect();
        kill_all(&mut gone);
        kids.extend((0..20).map(|_| sleeper()));
        let t = cpu_seconds();
        c.collect(ctx);
        let spent = cpu_seconds() - t;
        collect_cpu += spent;
        worst = worst.max(spent);
        if [1, 10, 100, 250, 500, 750].contains(&(i + 1)) || i + 1 == cycles {
            rss.push((i + 1, rss_kib(), c.tracked_processes()));
        }
    }
    for (i, r, n) in &rss {
        println!("after {i:>4} cycles: VmRSS {r} KiB, per-pid entries kept {n}");
    }
    if cycles > 0 {
        println!(
            "churn (20 processes replaced per cycle): collection CPU mean {:.2} ms, max {:.2} ms over {cycles} cycles",
            collect_cpu * 1000.0 / cycles as f64,
            worst * 1000.0
        );
    }
}
