//! Cost of the `iptables` collector's 250 ms xtables lock sampler, and of one `collect`.
//!
//! Runs the real sampler thread against the real kernel's `/proc/locks` (through a temp host
//! root whose `proc` links to `/proc`, with a lock file held by `flock` half of the time) for
//! `ND_BENCH_SECS` seconds (default 60) while the main thread sleeps, and reports the process's
//! user+sys CPU time (getrusage) as a percentage of one core. Then times single samples and one
//! full `collect` (namespace scan of every process, log scan, backend).
//!
//! `cargo bench -p collectors --bench iptables`

use std::process::Command;
use std::time::{Duration, Instant};

use collectors::iptables::tracker::{sample_once, Tracker};
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

fn main() {
    let secs: u64 = std::env::var("ND_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let root = tempfile::tempdir().expect("temp root");
    std::os::unix::fs::symlink("/proc", root.path().join("proc")).expect("proc link");
    std::fs::create_dir_all(root.path().join("run")).expect("run dir");
    let lock = root.path().join("run/xtables.lock");
    std::fs::write(&lock, "").expect("lock file");
    let host = HostPaths::new(root.path());
    let locks_len = std::fs::read_to_string("/proc/locks")
        .map(|s| s.lines().count())
        .unwrap_or(0);

    // 1. The sampler thread alone, 250 ms period, for `secs` seconds.
    let mut collector = IptablesCollector::new(
        collectors::Node::new(host.clone()),
        IptablesConfig::default(),
    );
    collector.start_sampler();
    // Hold the lock for the first half (sampler sees a holder: enrichment once).
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", &(secs / 2).max(1).to_string()])
        .spawn()
        .ok();
    let c0 = cpu();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let used = cpu() - c0;
    let wall = t0.elapsed();
    if let Some(h) = holder.as_mut() {
        let _ = h.kill();
        let _ = h.wait();
    }
    let pct = used.as_secs_f64() / wall.as_secs_f64() * 100.0;
    println!(
        "sampler: {:.1} s wall, {:.3} s CPU (user+sys) => {:.4} % of one core at 250 ms ({} samples, /proc/locks had {} lines)",
        wall.as_secs_f64(),
        used.as_secs_f64(),
        pct,
        (wall.as_millis() / 250),
        locks_len
    );
    drop(collector);

    // 2. One sample, measured over many in a tight loop.
    let n = 20_000u32;
    let mut tr = Tracker::new(Instant::now());
    let c0 = cpu();
    for _ in 0..n {
        sample_once(&host, &lock, &mut tr);
    }
    let per = (cpu() - c0) / n;
    println!(
        "one sample (stat + read + parse /proc/locks): {:.1} us CPU",
        per.as_secs_f64() * 1e6
    );

    // 2b. A busy node: a staged /proc/locks of 2000 lines (databases, kubelet, runtimes).
    let busy = tempfile::tempdir().expect("temp root");
    std::fs::create_dir_all(busy.path().join("proc")).expect("proc dir");
    std::fs::create_dir_all(busy.path().join("run")).expect("run dir");
    let busy_lock = busy.path().join("run/xtables.lock");
    std::fs::write(&busy_lock, "").expect("lock file");
    let text: String = (1..=2000)
        .map(|i| {
            format!(
                "{i}: POSIX  ADVISORY  WRITE {} fd:01:{} 0 EOF\n",
                1000 + i,
                500_000 + i
            )
        })
        .collect();
    std::fs::write(busy.path().join("proc/locks"), &text).expect("locks");
    let busy_host = HostPaths::new(busy.path());
    let n = 2_000u32;
    let c0 = cpu();
    for _ in 0..n {
        sample_once(&busy_host, &busy_lock, &mut tr);
    }
    let per_busy = (cpu() - c0) / n;
    println!(
        "one sample of a 2000-line /proc/locks ({} KiB): {:.1} us CPU => {:.3} % of one core at 250 ms",
        text.len() / 1024,
        per_busy.as_secs_f64() * 1e6,
        per_busy.as_secs_f64() / 0.25 * 100.0
    );

    // 3. One full collect on this machine's real /proc.
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    let pids = collectors::proc::pid::list_pids(&collectors::HostPaths::new("/"))
        .map(|p| p.len())
        .unwrap_or(0);
    // This process stands for pid 1 (the sandbox may hide pid 1's namespaces).
    let cfg = IptablesConfig {
        reference_pid: std::process::id(),
        ..IptablesConfig::default()
    };
    let mut c = IptablesCollector::new(collectors::Node::new(host.clone()), cfg);
    let c0 = cpu();
    let t0 = Instant::now();
    let rounds = 20u32;
    for _ in 0..rounds {
        let _ = c.collect(&ctx);
    }
    println!(
        "collect (namespace scan of {pids} processes, logs, backend): {:.2} ms CPU, {:.2} ms wall per call",
        ((cpu() - c0) / rounds).as_secs_f64() * 1e3,
        (t0.elapsed() / rounds).as_secs_f64() * 1e3
    );
}
