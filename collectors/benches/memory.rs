//! Bench (not a test): the kernel-log reader and the memory collector under a flood of
//! 100,000 kmsg records in a fake root, printing measured CPU time per cycle and checking that
//! every cycle stays within the per-cycle bound.
//!
//! Run: `cargo bench -p collectors --bench memory`

use std::time::{Duration, Instant};

use collectors::kmsg::{KmsgConfig, KmsgReader};
use collectors::memory::{MemoryCollector, MemoryConfig};
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

const RECORDS: u64 = 100_000;

fn cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// An OOM-storm-like kernel log: every 4th record a page allocation failure, every 10th with
/// continuation lines, all within the last hour of a 2 h uptime.
fn flood() -> String {
    let mut s = String::with_capacity(RECORDS as usize * 100);
    for i in 0..RECORDS {
        let usec = 3_700_000_000 + i * 30_000;
        match i % 4 {
            0 => s.push_str(&format!(
                "4,{i},{usec},-;runc:[1:CHILD]: page allocation failure: order:{}, mode:0x10c0d0\n",
                i % 11
            )),
            1 => s.push_str(&format!(
                "4,{i},{usec},-;CPU: 1 PID: {i} Comm: java Not tainted 6.18.44 #1\n"
            )),
            2 => s.push_str(&format!(
                "6,{i},{usec},-;Out of memory: Killed process {i} (java) total-vm:123456kB, anon-rss:65432kB\n"
            )),
            _ => s.push_str(&format!(
                "6,{i},{usec},-;oom_reaper: reaped process {i} (java)\n SUBSYSTEM=memory\n DEVICE=+memory:x\n"
            )),
        }
    }
    s
}

fn root() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(t.path().join("proc")).expect("mkdir");
    std::fs::create_dir_all(t.path().join("dev")).expect("mkdir");
    std::fs::write(t.path().join("proc/uptime"), "7200.00 1.00\n").expect("uptime");
    std::fs::write(
        t.path().join("proc/buddyinfo"),
        "Node 0, zone DMA32 2725 624 489 178 0 0 0 0 0 0 0\nNode 0, zone Normal 1163 1101 932 222 0 0 0 0 0 0 0\n",
    )
    .expect("buddyinfo");
    std::fs::write(
        t.path().join("proc/meminfo"),
        "MemTotal: 8009924 kB\nMemAvailable: 4100000 kB\n",
    )
    .expect("meminfo");
    std::fs::write(
        t.path().join("proc/vmstat"),
        "compact_stall 1\ncompact_fail 1\n",
    )
    .expect("vmstat");
    std::fs::write(t.path().join("dev/kmsg"), flood()).expect("kmsg");
    t
}

fn main() {
    let config = KmsgConfig::default();
    println!(
        "kmsg flood: {RECORDS} records; bound {} records / {} ms per cycle",
        config.max_records_per_cycle, config.max_millis_per_cycle
    );

    bare_reader(&config);
    time_bound_only(&config);
    let t = root();
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    whole_collector(t.path(), &ctx);
    steady_state(t.path(), &ctx);
}

/// Step 1: the bare reader.
fn bare_reader(config: &KmsgConfig) {
    let t = root();
    let host = HostPaths::new(t.path());
    let mut reader = KmsgReader::alone(&host, config.clone());
    let (mut cycles, mut total, mut max_records, mut max_wall, mut max_cpu) =
        (0u32, 0u64, 0usize, Duration::ZERO, Duration::ZERO);
    let cpu0 = cpu();
    loop {
        let (c0, w0) = (cpu(), Instant::now());
        let b = reader.read_new();
        let (wall, c) = (w0.elapsed(), cpu().saturating_sub(c0));
        cycles += 1;
        total += b.records.len() as u64;
        max_records = max_records.max(b.records.len());
        max_wall = max_wall.max(wall);
        max_cpu = max_cpu.max(c);
        assert!(
            b.records.len() <= config.max_records_per_cycle,
            "record bound broken"
        );
        if !b.truncated_by_budget || cycles > 10_000 {
            break;
        }
    }
    let spent = cpu().saturating_sub(cpu0);
    println!(
        "reader: {total} records in {cycles} cycles; max per cycle {max_records} records, {:.1} ms wall, {:.1} ms CPU; total CPU {:.1} ms = {:.2} us/record; dropped {}",
        max_wall.as_secs_f64() * 1e3,
        max_cpu.as_secs_f64() * 1e3,
        spent.as_secs_f64() * 1e3,
        spent.as_secs_f64() * 1e6 / total.max(1) as f64,
        reader.dropped_total()
    );
    assert_eq!(total, RECORDS, "every record read exactly once");
    let slack = Duration::from_millis(config.max_millis_per_cycle + 20);
    println!(
        "reader: per-cycle wall bound {} (max {:.1} ms vs {} ms + 20 ms slack)",
        if max_wall <= slack {
            "held"
        } else {
            "EXCEEDED"
        },
        max_wall.as_secs_f64() * 1e3,
        config.max_millis_per_cycle
    );
}

/// Step 1b: the time bound alone: no record cap, 2 ms per cycle.
fn time_bound_only(config: &KmsgConfig) {
    let t = root();
    let tight = KmsgConfig {
        max_records_per_cycle: usize::MAX,
        max_millis_per_cycle: 2,
        ..config.clone()
    };
    let mut reader = KmsgReader::alone(&HostPaths::new(t.path()), tight);
    let (mut cycles, mut total, mut max_wall) = (0u32, 0u64, Duration::ZERO);
    loop {
        let w0 = Instant::now();
        let b = reader.read_new();
        max_wall = max_wall.max(w0.elapsed());
        cycles += 1;
        total += b.records.len() as u64;
        if !b.truncated_by_budget || cycles > 100_000 {
            break;
        }
    }
    println!(
        "reader, 2 ms time bound only: {total} records in {cycles} cycles, max {:.2} ms wall per cycle",
        max_wall.as_secs_f64() * 1e3
    );
    assert_eq!(total, RECORDS, "every record read exactly once");
}

/// Step 2: the whole memory collector on the same flood (a quarter are allocation failures).
fn whole_collector(fake: &std::path::Path, ctx: &CollectContext) {
    let mut col = MemoryCollector::new(
        collectors::Node::new(HostPaths::new(fake)),
        MemoryConfig::default(),
    );
    let (mut cycles, mut max_wall, mut max_cpu) = (0u32, Duration::ZERO, Duration::ZERO);
    let cpu0 = cpu();
    let last;
    loop {
        let (c0, w0) = (cpu(), Instant::now());
        let c = col.collect(ctx);
        max_wall = max_wall.max(w0.elapsed());
        max_cpu = max_cpu.max(cpu().saturating_sub(c0));
        cycles += 1;
        let read = c
            .metrics
            .iter()
            .find(|m| m.name == "node_doctor_kmsg_records_total")
            .map_or(0.0, |m| m.value);
        if read as u64 >= RECORDS || cycles > 10_000 {
            last = Some(c);
            break;
        }
    }
    let spent = cpu().saturating_sub(cpu0);
    println!(
        "collector: caught up in {cycles} cycles; max per cycle {:.1} ms wall, {:.1} ms CPU; total CPU {:.1} ms",
        max_wall.as_secs_f64() * 1e3,
        max_cpu.as_secs_f64() * 1e3,
        spent.as_secs_f64() * 1e3
    );
    if let Some(c) = last {
        let failures: f64 = c
            .metrics
            .iter()
            .filter(|m| m.name == "node_doctor_memory_page_alloc_failures_total")
            .map(|m| m.value)
            .sum();
        println!(
            "collector: {failures} allocation failures counted, {} findings",
            c.findings.len()
        );
    }
}

/// Step 3: steady state, one quiet cycle on the real host (root) or the fake root (`fake`, where
/// the collector of step 2 ran).
fn steady_state(fake: &std::path::Path, ctx: &CollectContext) {
    let real = nix::unistd::Uid::effective().is_root();
    let host = if real {
        HostPaths::new("/")
    } else {
        HostPaths::new(fake)
    };
    let mut col = MemoryCollector::new(collectors::Node::new(host), MemoryConfig::default());
    col.collect(ctx);
    let n = 200u32;
    let c0 = cpu();
    for _ in 0..n {
        col.collect(ctx);
    }
    let per = cpu().saturating_sub(c0) / n;
    println!(
        "steady state ({}): {:.0} us CPU per collect",
        if real { "real host" } else { "fake root" },
        per.as_secs_f64() * 1e6
    );
}
