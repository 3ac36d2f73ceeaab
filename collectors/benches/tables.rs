//! Measures the CPU cost of one `tables` collection (target: a few hundred µs healthy).
//!
//! This machine's real root (healthy: no holder scan, no daemon's descriptors listed), and the
//! escalated path: a fake root whose `file-nr` is staged at 95 % over 300 staged processes of
//! 50 descriptors each (the holder scan runs every collection). Prints user+system CPU per
//! collection from getrusage.

use std::time::{Duration, Instant};

use collectors::tables::{TablesCollector, TablesConfig};
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

fn cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000)
            };
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

fn write(root: &std::path::Path, rel: &str, text: impl AsRef<[u8]>) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn escalated_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "proc/uptime", "7200.00 14000.00\n");
    write(root, "proc/sys/fs/file-nr", "950000\t0\t1000000\n");
    write(root, "proc/sys/fs/nr_open", "1048576\n");
    write(
        root,
        "proc/1/net/sockstat",
        "TCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\n",
    );
    write(root, "dev/kmsg", "");
    for pid in 2..302u32 {
        write(
            root,
            &format!("proc/{pid}/stat"),
            format!("{pid} (app) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 10 0 0 0 20 0 12 0 500 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
        );
        for fd in 0..50 {
            write(root, &format!("proc/{pid}/fd/{fd}"), "");
        }
    }
    dir
}

fn run(label: &str, host: HostPaths, iterations: u32) {
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    let mut c = TablesCollector::new(collectors::Node::new(host), TablesConfig::default());
    let (c0, w0) = (cpu(), Instant::now());
    let first = c.collect(&ctx);
    let (first_cpu, first_wall) = (cpu() - c0, w0.elapsed());
    let (c1, w1) = (cpu(), Instant::now());
    for _ in 0..iterations {
        let _ = c.collect(&ctx);
    }
    let per_cpu = (cpu() - c1) / iterations;
    let per_wall = w1.elapsed() / iterations;
    println!(
        "{label}: status {} findings {} metrics {} | first collection: cpu {:?} wall {:?} | steady state ({iterations} runs): cpu {:?}/collection, wall {:?}/collection",
        first.status.as_str(),
        first.findings.len(),
        first.metrics.len(),
        first_cpu,
        first_wall,
        per_cpu,
        per_wall
    );
}

fn main() {
    run("this machine (healthy)", HostPaths::new("/"), 2000);
    let fake = escalated_node();
    run(
        "fake node, file-nr at 95 %: holder scan of 300 pids x 50 fds",
        HostPaths::new(fake.path()),
        200,
    );
}
