//! Bench (not a test): the net collector's healthy cycle on this machine's real root, printing
//! the CPU time per cycle (the thread's CPU clock): `/proc/uptime`, `/proc/net/softnet_stat`,
//! the listing of `/sys/class/net` and, per watched interface, its kind, link files and 11
//! `statistics/*` counters; the bonding directory; the metrics of every CPU and interface.
//!
//! Second, the pods' own network namespaces on a staged root (a temp dir laid out as the
//! kernel lays out `/proc` and a cgroup v2 systemd-driver kubepods tree): the same steady
//! cycle with 0 and with 110 pods (the kubelet's default `maxPods`), each with a remembered
//! process whose `ns/net` link, `net/snmp`, `net/snmp6` (Linux 6.18's texts) and
//! `net/stat/nf_conntrack` (2 CPUs) are read every cycle. The difference is what the pods cost.
//!
//! Run: `cargo bench -p collectors --bench net`

use std::path::Path;

use collectors::net::{NetCollector, NetConfig};
use collectors::{CollectContext, Collector, HostNetns, HostPaths, Node};

#[path = "common/thread_cpu.rs"]
mod common;
use common::thread_cpu;

const CYCLES: u32 = 2_000;

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
    let quiet = staged_cycle(0);
    let pods = staged_cycle(110);
    println!(
        "staged root, steady cycle: no pod {:>8.1} µs, 110 pod namespaces {:>8.1} µs CPU per cycle ({:.1} µs per pod)",
        quiet,
        pods,
        (pods - quiet) / 110.0
    );
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// µs of CPU per steady cycle on a staged root with `pods` pod namespaces.
fn staged_cycle(pods: u32) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "/proc/uptime", "1000.00 1000.00\n");
    write(
        root,
        "/proc/net/softnet_stat",
        "0000a000 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n",
    );
    std::fs::create_dir_all(root.join("sys/class/net")).unwrap();
    std::os::unix::fs::symlink("net:[4026531840]", {
        std::fs::create_dir_all(root.join("proc/1/ns")).unwrap();
        root.join("proc/1/ns/net")
    })
    .unwrap();
    write(
        root,
        "/sys/fs/cgroup/cgroup.controllers",
        "cpu io memory pids\n",
    );
    let snmp = include_str!("../tests/fixtures/conntrack/snmp.linux-6.18");
    let snmp6 = include_str!("../tests/fixtures/net/snmp6.linux-6.18");
    let ct = include_str!("../tests/fixtures/conntrack/nf_conntrack_stat.linux-6.18.netns-traffic");
    for i in 0..pods {
        let pid = 10_000 + i;
        let uid = format!("3f6c2b9e-8a41-4d7e-9c55-{:012x}", i);
        write(
            root,
            &format!(
                "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{:064x}.scope/cgroup.procs",
                uid.replace('-', "_"),
                i
            ),
            &format!("{pid}\n"),
        );
        std::fs::create_dir_all(root.join(format!("proc/{pid}/ns"))).unwrap();
        std::os::unix::fs::symlink(
            format!("net:[{}]", 4026532000 + u64::from(i)),
            root.join(format!("proc/{pid}/ns/net")),
        )
        .unwrap();
        write(root, &format!("/proc/{pid}/net/snmp"), snmp);
        write(root, &format!("/proc/{pid}/net/stat/nf_conntrack"), ct);
        write(root, &format!("/proc/{pid}/net/snmp6"), snmp6);
    }
    let ctx = CollectContext::new("bench", HostNetns::NotProcfs);
    let mut col = NetCollector::new(Node::new(HostPaths::new(root)), NetConfig::default());
    let first = col.collect(&ctx);
    let read = first
        .metrics
        .iter()
        .find(|m| {
            m.name == "node_doctor_net_pod_namespaces"
                && m.labels.iter().any(|(k, v)| k == "state" && v == "read")
        })
        .map_or(0.0, |m| m.value);
    assert_eq!(read, f64::from(pods));
    let cycles = CYCLES / 4;
    let t0 = thread_cpu();
    for _ in 0..cycles {
        col.collect(&ctx);
    }
    (thread_cpu() - t0).as_secs_f64() * 1e6 / f64::from(cycles)
}
