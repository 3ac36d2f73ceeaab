//! CPU of the xtables lock sampler thread on a node with many held file locks.
//!
//! Holds `ND_BENCH_LOCKS` (default 10,000) exclusive `flock`s on files in a temp dir (this
//! process raises its own open-file limit to do so), starts the `iptables` collector on a temp
//! host root whose `proc` links to the real `/proc` and whose `run/xtables.lock` is a fresh
//! file, and for `ND_BENCH_SECS` seconds (default 60) either leaves the lock idle or, with
//! `ND_BENCH_HOLD_EVERY=10`, runs `flock -x <lock> sleep ND_BENCH_HOLD_SECS` (default 2) every
//! 10 s. It reports the sampler thread's own CPU time (utime+stime of the thread named
//! `xtables-lock-sa…` in `/proc/self/task/*/stat`, so the holder processes and this main thread
//! are not counted) as a percentage of one core, and what the collector found at the end.
//!
//! `cargo bench -p collectors --bench xtables_sampler` (idle lock),
//! `ND_BENCH_HOLD_EVERY=10 cargo bench -p collectors --bench xtables_sampler` (a 2 s hold every
//! 10 s).

use std::fs::File;
use std::process::Command;
use std::time::{Duration, Instant};

use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::{CollectContext, Collector, HostPaths};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::resource::{getrlimit, setrlimit, Resource};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// utime+stime of this process's sampler thread, from `/proc/self/task/<tid>/stat`.
fn sampler_thread_cpu() -> Option<Duration> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("xtables-lock") {
            continue;
        }
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        return Some(Duration::from_secs_f64((utime + stime) / ticks));
    }
    None
}

fn main() {
    let secs = env_u64("ND_BENCH_SECS", 60);
    let nlocks = env_u64("ND_BENCH_LOCKS", 10_000) as usize;
    let hold_every = env_u64("ND_BENCH_HOLD_EVERY", 0);
    let hold_secs = env_u64("ND_BENCH_HOLD_SECS", 2);

    // 1. Many held flocks, as on a node with busy databases and runtimes.
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    let want = (nlocks as u64 + 1024).min(hard);
    setrlimit(Resource::RLIMIT_NOFILE, want, hard).expect("setrlimit");
    let dir = tempfile::tempdir().expect("lock dir");
    let mut held: Vec<Flock<File>> = Vec::with_capacity(nlocks);
    for i in 0..nlocks {
        let f = File::create(dir.path().join(format!("l{i}"))).expect("lock file");
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(l) => held.push(l),
            Err((_, e)) => panic!("flock #{i}: {e}"),
        }
    }
    let locks_lines = std::fs::read_to_string("/proc/locks")
        .map(|s| s.lines().count())
        .unwrap_or(0);

    // 2. The collector on a root whose proc is the real one.
    let root = tempfile::tempdir().expect("temp root");
    std::os::unix::fs::symlink("/proc", root.path().join("proc")).expect("proc link");
    std::fs::create_dir_all(root.path().join("run")).expect("run dir");
    let lock = root.path().join("run/xtables.lock");
    std::fs::write(&lock, "").expect("xtables lock");
    let cfg = IptablesConfig {
        reference_pid: std::process::id(),
        ..IptablesConfig::default()
    };
    let mut collector =
        IptablesCollector::new(collectors::Node::new(HostPaths::new(root.path())), cfg);
    collector.start_sampler();
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    // Let start-up (the first full read) pass, then measure the steady state.
    std::thread::sleep(Duration::from_secs(1));
    let _ = collector.collect(&ctx);
    let c0 = sampler_thread_cpu().expect("sampler thread not found");
    let t0 = Instant::now();
    let mut holds = 0u32;
    let mut caught = 0usize;
    while t0.elapsed() < Duration::from_secs(secs) {
        if hold_every > 0 {
            let next = Duration::from_secs(hold_every * u64::from(holds) + 1);
            if next + Duration::from_secs(hold_secs) > Duration::from_secs(secs) {
                // No room for another hold: idle to the end.
                if let Some(wait) = Duration::from_secs(secs).checked_sub(t0.elapsed()) {
                    std::thread::sleep(wait);
                }
                break;
            }
            if let Some(wait) = next.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
            let st = Command::new("flock")
                .arg("-x")
                .arg(&lock)
                .args(["sleep", &hold_secs.to_string()])
                .status()
                .expect("flock");
            assert!(st.success(), "flock failed");
            holds += 1;
            std::thread::sleep(Duration::from_millis(100));
            let out = collector.collect(&ctx);
            caught += out
                .findings
                .iter()
                .filter(|f| f.id == "iptables.lock_contention")
                .count();
        } else {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let wall = t0.elapsed();
    let used = sampler_thread_cpu().expect("sampler thread") - c0;
    let out = collector.collect(&ctx);
    let metric = |name: &str| {
        out.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| format!("{}", m.value))
            .unwrap_or_else(|| "n/a".to_string())
    };
    let reads = metric("node_doctor_iptables_lock_reads_total");
    let thread_cpu = metric("node_doctor_iptables_lock_sampler_cpu_seconds_total");
    println!(
        "sampler thread: {:.3} s CPU in {:.1} s wall => {:.3} % of one core; {} held flocks \
         (/proc/locks {} lines); {} holds of {} s, {} lock_contention findings; /proc/locks reads \
         (since start) {}; the thread's own CPU metric (since start, getrusage) {} s",
        used.as_secs_f64(),
        wall.as_secs_f64(),
        used.as_secs_f64() / wall.as_secs_f64() * 100.0,
        held.len(),
        locks_lines,
        holds,
        hold_secs,
        caught,
        reads,
        thread_cpu
    );
    drop(collector);
    drop(held);
}
