//! Bench (not a test): the kernel collector's cost per cycle, printing measured CPU time
//! (getrusage user+sys deltas):
//! 1. the pure line matchers over 100,000 kernel-log messages (then the oops/lockup/RCU,
//!    unregister_netdevice and ext4-warning matchers over the same messages);
//! 2. `collect()` on a fake node with an OOM-storm kernel log of 100,000 records (bounded per
//!    cycle by the reader) and a kubepods cgroup v2 tree of 300 pods x 3 containers;
//! 3. steady-state `collect()` on this machine's real root (`/`), when run as root.
//!
//! Run: `cargo bench -p collectors --bench kernel`

use std::time::{Duration, Instant};

use collectors::kernel::{crash, fs_error, hung_task, netdev, oom, KernelCollector, KernelConfig};
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

const RECORDS: u64 = 100_000;
const PODS: usize = 300;

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

fn message(i: u64) -> String {
    match i % 5 {
        0 => format!("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{:08x}_0000_4000_8000_000000000000.slice,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{:08x}_0000_4000_8000_000000000000.slice/cri-containerd-{:064x}.scope,task=java,pid={i},uid=0", i % 50, i % 50, i % 50),
        1 => format!("Memory cgroup out of memory: Killed process {} (java) total-vm:4118968kB, anon-rss:262104kB, file-rss:6500kB, shmem-rss:0kB, UID:1000 pgtables:880kB oom_score_adj:969", i - 1),
        2 => format!("INFO: task worker{}:{i} blocked for more than 120 seconds.", i % 40),
        3 => format!("Buffer I/O error on dev sd{}, logical block {i}, async page read", i % 8),
        _ => format!("IPv6: ADDRCONF(NETDEV_CHANGE): veth{i}: link becomes ready"),
    }
}

fn fake_root() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("temp dir");
    let w = |p: &str, s: &str| {
        let p = t.path().join(p);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, s).expect("write");
    };
    w("proc/uptime", "7200.00 1.00\n");
    w(
        "proc/meminfo",
        "MemTotal: 16384000 kB\nMemAvailable: 8000000 kB\n",
    );
    w("proc/loadavg", "0.5 0.4 0.3 2/2190 23311\n");
    w("proc/stat", "cpu 1 2 3 4 5 6 7 8 0 0\nprocs_blocked 0\n");
    w("proc/sys/kernel/pid_max", "4194304\n");
    w("proc/sys/kernel/threads-max", "191853\n");
    w(
        "proc/1/net/netstat",
        "TcpExt: ListenOverflows ListenDrops TCPBacklogDrop\nTcpExt: 1 1 0\n",
    );
    w(
        "proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime - ext4 /dev/vda1 rw\n",
    );
    let mut kmsg = String::with_capacity(RECORDS as usize * 200);
    for i in 0..RECORDS {
        let usec = 3_700_000_000 + i * 30_000;
        kmsg.push_str(&format!("4,{i},{usec},-;{}\n", message(i)));
    }
    w("dev/kmsg", &kmsg);
    let base = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice";
    w("sys/fs/cgroup/kubepods.slice/memory.max", "16106127360\n");
    for p in 0..PODS {
        let pod = format!("{base}/kubepods-burstable-pod{p:08x}_0000_4000_8000_000000000000.slice");
        w(
            &format!("{pod}/memory.max"),
            if p == 7 { "1\n" } else { "805306368\n" },
        );
        for c in 0..3 {
            w(
                &format!("{pod}/cri-containerd-{:064x}.scope/memory.max", p * 3 + c),
                "268435456\n",
            );
        }
    }
    t
}

/// Cycles measured in a steady state.
const STEADY_CYCLES: u32 = 20;

fn main() {
    matchers();
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    fake_node(&ctx);
    this_machine(&ctx);
}

/// Step 1: the matchers.
fn matchers() {
    let records: Vec<collectors::kmsg::Record> = (0..RECORDS)
        .map(|i| {
            collectors::kmsg::parse_record(&format!("6,{i},{i},-;{}", message(i)))
                .expect("bench record")
        })
        .collect();
    let (c0, w0) = (cpu(), Instant::now());
    let mut asm = oom::Assembler::default();
    let (mut kills, mut hung, mut fs) = (0usize, 0usize, 0usize);
    for r in &records {
        kills += asm.feed(r).len();
        hung += usize::from(hung_task::parse(&r.message).is_some());
        fs += usize::from(fs_error::parse(&r.message).is_some());
    }
    let (c1, w1) = (cpu(), w0.elapsed());
    println!(
        "matchers: {RECORDS} messages in {:.1} ms CPU ({:.2} µs/message, wall {:.1} ms): {kills} OOM kills, {hung} hung tasks, {fs} fs errors",
        (c1 - c0).as_secs_f64() * 1e3,
        (c1 - c0).as_secs_f64() * 1e6 / RECORDS as f64,
        w1.as_secs_f64() * 1e3
    );
    // The matchers of the kernel's own failures (oops/lockup/RCU assembler, unregister_netdevice,
    // ext4 warnings) over the same messages: what they add to every record.
    let (c0, w0) = (cpu(), Instant::now());
    let mut crash_asm = crash::Assembler::default();
    let mut other = 0usize;
    for r in &records {
        other += crash_asm.feed(&r.message, r.usec).len();
        other += usize::from(netdev::parse(&r.message).is_some());
        other += usize::from(fs_error::parse_ext4_warning(&r.message).is_some());
    }
    let (c1, w1) = (cpu(), w0.elapsed());
    println!(
        "crash matchers: {RECORDS} messages in {:.1} ms CPU ({:.2} µs/message, wall {:.1} ms): {other} events",
        (c1 - c0).as_secs_f64() * 1e3,
        (c1 - c0).as_secs_f64() * 1e6 / RECORDS as f64,
        w1.as_secs_f64() * 1e3
    );
}

/// Step 2: a fake node under an OOM storm with a 1,200-group kubepods tree.
fn fake_node(ctx: &CollectContext) {
    let t = fake_root();
    let mut k = KernelCollector::new(
        collectors::Node::new(HostPaths::new(t.path())),
        KernelConfig::default(),
    );
    let mut cycles = 0;
    let mut worst = Duration::ZERO;
    let mut total = Duration::ZERO;
    loop {
        let (c0, w0) = (cpu(), Instant::now());
        let c = k.collect(ctx);
        let (spent, wall) = (cpu() - c0, w0.elapsed());
        cycles += 1;
        worst = worst.max(spent);
        total += spent;
        let records = c
            .metrics
            .iter()
            .find(|m| m.name == "node_doctor_kmsg_records_total")
            .map_or(0.0, |m| m.value);
        if cycles <= 3 || records >= RECORDS as f64 {
            println!(
                "fake node cycle {cycles}: {:.1} ms CPU, {:.1} ms wall, {} findings, {} records read so far, state {:?}",
                spent.as_secs_f64() * 1e3,
                wall.as_secs_f64() * 1e3,
                c.findings.len(),
                records,
                k.state_sizes()
            );
        }
        if records >= RECORDS as f64 || cycles > 200 {
            break;
        }
    }
    println!(
        "fake node: {cycles} cycles to drain {RECORDS} records, {:.1} ms CPU in total, worst cycle {:.1} ms",
        total.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3
    );
    let (c0, w0) = (cpu(), Instant::now());
    for _ in 0..STEADY_CYCLES {
        let _ = k.collect(ctx);
    }
    println!(
        "fake node steady state (no new records, {} cgroups walked): {:.2} ms CPU per cycle ({:.2} ms wall)",
        PODS * 4 + 2,
        (cpu() - c0).as_secs_f64() * 1e3 / STEADY_CYCLES as f64,
        w0.elapsed().as_secs_f64() * 1e3 / STEADY_CYCLES as f64
    );
}

/// Step 3: this machine.
fn this_machine(ctx: &CollectContext) {
    if nix::unistd::Uid::effective().is_root() {
        let mut k = KernelCollector::new(
            collectors::Node::new(HostPaths::new("/")),
            KernelConfig::default(),
        );
        let (c0, w0) = (cpu(), Instant::now());
        let first = k.collect(ctx);
        println!(
            "real root first cycle: {:.2} ms CPU ({:.2} ms wall), status {:?}, {} findings",
            (cpu() - c0).as_secs_f64() * 1e3,
            w0.elapsed().as_secs_f64() * 1e3,
            first.status.as_str(),
            first.findings.len()
        );
        let (c0, w0) = (cpu(), Instant::now());
        for _ in 0..STEADY_CYCLES {
            let _ = k.collect(ctx);
        }
        println!(
            "real root steady state: {:.3} ms CPU per cycle ({:.3} ms wall)",
            (cpu() - c0).as_secs_f64() * 1e3 / STEADY_CYCLES as f64,
            w0.elapsed().as_secs_f64() * 1e3 / STEADY_CYCLES as f64
        );
    } else {
        println!("real root: skipped (needs root for /dev/kmsg)");
    }
}
