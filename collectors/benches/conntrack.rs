//! Measures the CPU cost of one `conntrack` collection (target: under 2 ms).
//!
//! Two hosts: a fake node built in a temp dir (64 CPU lines in the stat file, 2000 UDP
//! sockets, 300 processes with the kubelet among them, 110 pods), and this machine's real
//! `/proc` read through pid 1. Prints user+system CPU per collection from getrusage.

use std::time::{Duration, Instant};

use collectors::conntrack::{ConntrackCollector, ConntrackConfig};
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

fn fake_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut stat = String::from("entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n");
    for cpu in 0..64u64 {
        stat.push_str(&format!(
            "0002a3f1  {:08x} {:08x} 00000000 {:08x} 00000000 00000000 00000000 00000000 {:08x} {:08x} 00000000 00000003  00000000 00000000 00000000 {:08x}\n",
            cpu * 7, cpu * 100_003, cpu * 11, cpu, cpu / 3, cpu * 5
        ));
    }
    write(root, "proc/1/net/stat/nf_conntrack", stat);
    write(
        root,
        "proc/1/net/snmp",
        include_str!("../tests/fixtures/conntrack/snmp.linux-6.18"),
    );
    let mut udp = String::from("   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n");
    for i in 0..2000u32 {
        udp.push_str(&format!(
            "{:5}: {:08X}:{:04X} 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 {} 2 0000000000000000 0\n",
            i, 0x0100_007Fu32 + (i << 24), 10000 + i, 20000 + i
        ));
    }
    write(root, "proc/1/net/udp", udp);
    write(root, "proc/sys/net/netfilter/nf_conntrack_max", "262144\n");
    write(
        root,
        "proc/sys/net/netfilter/nf_conntrack_buckets",
        "262144\n",
    );
    write(root, "proc/sys/kernel/osrelease", "6.18.44\n");
    write(root, "proc/meminfo", "MemTotal:       24684084 kB\n");
    for pid in 2..300u32 {
        write(root, &format!("proc/{pid}/comm"), "kworker/0:1\n");
    }
    write(root, "proc/299/comm", "kubelet\n");
    write(
        root,
        "proc/299/cmdline",
        "/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0",
    );
    write(
        root,
        "var/lib/kubelet/config.yaml",
        "kind: KubeletConfiguration\nclusterDNS:\n- 10.96.0.10\n",
    );
    for i in 0..110 {
        std::fs::create_dir_all(root.join(format!("var/lib/kubelet/pods/pod-{i}"))).unwrap();
    }
    dir
}

fn run(label: &str, host: HostPaths, iterations: u32) {
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    let mut c = ConntrackCollector::new(collectors::Node::new(host), ConntrackConfig::default());
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
        "{label}: status {} metrics {} | first collection: cpu {:?} wall {:?} | steady state ({iterations} runs): cpu {:?}/collection, wall {:?}/collection",
        first.status.as_str(),
        first.metrics.len(),
        first_cpu,
        first_wall,
        per_cpu,
        per_wall
    );
}

/// The race path: insert_failed rises before every measured collection, so the kubelet's
/// cluster DNS and the pod count are looked up too. Only the collections are timed.
fn run_races(label: &str, root: &std::path::Path, iterations: u32) {
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    let stat_path = root.join("proc/1/net/stat/nf_conntrack");
    let base = std::fs::read_to_string(&stat_path).unwrap();
    let bump = |n: u32| {
        // Rewrites CPU 0's insert_failed column (10th value) with n.
        let mut lines: Vec<String> = base.lines().map(String::from).collect();
        let mut cols: Vec<String> = lines[1].split_whitespace().map(String::from).collect();
        cols[9] = format!("{n:08x}");
        lines[1] = cols.join(" ");
        std::fs::write(&stat_path, lines.join("\n") + "\n").unwrap();
    };
    let mut c = ConntrackCollector::new(
        collectors::Node::new(HostPaths::new(root)),
        ConntrackConfig::default(),
    );
    bump(0);
    let _ = c.collect(&ctx);
    let mut first = Duration::ZERO;
    let mut total = Duration::ZERO;
    let mut found = 0;
    for i in 1..=iterations {
        bump(i);
        let c0 = cpu();
        let got = c.collect(&ctx);
        let d = cpu() - c0;
        if i == 1 {
            first = d;
        } else {
            total += d;
        }
        found += got.findings.len();
    }
    println!(
        "{label}: race finding in {found}/{iterations} runs | first race collection (walks the process table for the kubelet): cpu {first:?} | later race collections: cpu {:?}/collection",
        total / (iterations - 1)
    );
    std::fs::write(&stat_path, base).unwrap();
}

fn main() {
    let fake = fake_node();
    run(
        "fake node (64 CPUs, 2000 UDP sockets, 300 pids, 110 pods)",
        HostPaths::new(fake.path()),
        2000,
    );
    run_races("fake node, insert_failed rising", fake.path(), 500);
    run("this machine (/proc via pid 1)", HostPaths::new("/"), 2000);
}
