//! Bench (not a test): CPU time of one healthy `pressure` cycle on this machine's real root,
//! and on a staged node of 110 pods with two containers each (cgroup v2, systemd driver: the
//! throttling walk reads ~330 `cpu.stat` files; PSI quiet, so no pod PSI file is read).
//!
//! Run: `cargo bench -p collectors --bench pressure`

use std::time::Duration;

use collectors::pressure::{PressureCollector, PressureConfig};
use collectors::{CollectContext, Collector, HostPaths, Node};
use nix::sys::resource::{getrusage, UsageWho};

const CYCLES: u32 = 200;

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

fn per_cycle(host: HostPaths, label: &str) {
    let mut c = PressureCollector::new(Node::new(host), PressureConfig::default());
    let ctx = CollectContext::new("bench", collectors::HostNetns::Same);
    for _ in 0..3 {
        let _ = c.collect(&ctx);
    }
    let start = cpu();
    let mut findings = 0;
    for _ in 0..CYCLES {
        findings += c.collect(&ctx).findings.len();
    }
    let each = (cpu() - start) / CYCLES;
    println!(
        "{label}: {:.0} µs CPU per cycle ({CYCLES} cycles, {findings} findings)",
        each.as_secs_f64() * 1e6
    );
}

fn staged() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("temp dir");
    let w = |p: &str, s: &str| {
        let p = t.path().join(p);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, s).expect("write");
    };
    let quiet = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n";
    for r in ["cpu", "memory", "io"] {
        w(&format!("proc/pressure/{r}"), quiet);
        w(&format!("sys/fs/cgroup/kubepods.slice/{r}.pressure"), quiet);
    }
    w("proc/uptime", "7200.00 1.00\n");
    w(
        "proc/meminfo",
        "MemTotal: 8009924 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
    );
    w("proc/vmstat", "pswpin 0\npswpout 0\n");
    w("sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
    let stat = "usage_usec 1\nnr_periods 100\nnr_throttled 0\nthrottled_usec 0\n";
    for i in 0..110u32 {
        let uid = format!("{i:08x}_0000_1111_2222_333344445555");
        let pod = format!("sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice");
        w(&format!("{pod}/cpu.stat"), stat);
        for c in 0..2 {
            w(
                &format!("{pod}/cri-containerd-{i:08x}{c:056x}.scope/cpu.stat"),
                stat,
            );
        }
    }
    t
}

fn main() {
    per_cycle(HostPaths::new("/"), "this machine (real root)");
    let t = staged();
    per_cycle(
        HostPaths::new(t.path()),
        "staged node, 110 pods x 2 containers",
    );
}
