//! Bench of the `disk` collector on a synthetic docker root: 2,000 container log
//! directories and 200,000 files under overlay2, with the data disk reported 97% full so
//! that the bounded walk and the `/proc/*/fd` scan run every cycle.
//!
//! Prints CPU time per cycle (getrusage user+sys deltas), wall time, the walk's entries and
//! time per cycle against its budget, and how many cycles a full pass of the tree takes.
//! Then the cost of time to full: the Theil–Sen fit of a full history (120 points, space and
//! inodes) alone, and healthy cycles whose clock advances 3 min each, so that every cycle
//! after the 120th fits a full history.
//! Run: `cargo bench -p collectors --bench disk`.

use std::path::Path;
use std::time::{Duration, Instant};

use collectors::disk::{DiskCollector, DiskConfig};
use collectors::sys::statvfs::FsUsage;
use collectors::{CollectContext, Collector, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

const CONTAINERS: usize = 2_000;
const LAYERS: usize = 2_000;
const FILES_PER_LAYER: usize = 100;

fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
    };
    t(u.user_time()) + t(u.system_time())
}

fn build(root: &Path) {
    let docker = root.join("var/lib/docker");
    for i in 0..CONTAINERS {
        let id = format!("{i:064x}");
        let dir = docker.join("containers").join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.v2.json"),
            format!(r#"{{"Config":{{"Labels":{{"io.kubernetes.pod.namespace":"ns{i}","io.kubernetes.pod.name":"pod-{i}","io.kubernetes.container.name":"c"}}}}}}"#),
        )
        .unwrap();
        let f = std::fs::File::create(dir.join(format!("{id}-json.log"))).unwrap();
        f.set_len((i as u64 + 1) * 4096).unwrap();
        if i % 4 == 0 {
            std::fs::File::create(dir.join(format!("{id}-json.log.1"))).unwrap();
        }
    }
    for l in 0..LAYERS {
        let diff = docker
            .join("overlay2")
            .join(format!("layer{l:05}"))
            .join("diff/usr/lib");
        std::fs::create_dir_all(&diff).unwrap();
        for f in 0..FILES_PER_LAYER {
            std::fs::File::create(diff.join(format!("f{f}"))).unwrap();
        }
    }
    std::fs::create_dir_all(docker.join("image/overlay2")).unwrap();
    std::fs::create_dir_all(docker.join("volumes")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/kubelet/pods")).unwrap();
    // The real /proc: the process lookups and the deleted-file scan see a real system.
    std::os::unix::fs::symlink("/proc", root.join("proc")).unwrap();
}

fn run(label: &str, root: &Path, avail_percent: u64, cycles: usize) {
    let config = DiskConfig::default();
    let budget_entries = config.walk_budget_entries;
    let budget_time = config.walk_budget;
    let mut c = DiskCollector::new(collectors::Node::new(HostPaths::new(root)), config)
        .with_statfs(move |_| {
            Ok(FsUsage {
                size_bytes: 100 << 30,
                avail_bytes: (100u64 << 30) * avail_percent / 100,
                free_bytes: (100u64 << 30) * avail_percent / 100,
                files: 6_553_600,
                files_free: 6_000_000,
            })
        });
    let ctx = CollectContext::new("bench-node", collectors::HostNetns::Same);
    let mut cpus = Vec::new();
    let mut walls = Vec::new();
    let mut max_entries = 0usize;
    let mut max_walk = Duration::ZERO;
    let mut first_complete: Option<usize> = None;
    for i in 0..cycles {
        let (c0, w0) = (cpu(), Instant::now());
        let out = c.collect(&ctx);
        let (dc, dw) = (cpu() - c0, w0.elapsed());
        let walk = c.last_walk();
        max_entries = max_entries.max(walk.entries);
        max_walk = max_walk.max(walk.elapsed);
        let ratio = out
            .metrics
            .iter()
            .find(|m| m.name == "node_doctor_disk_walk_complete_ratio")
            .map(|m| m.value);
        if first_complete.is_none() && ratio == Some(1.0) {
            first_complete = Some(i + 1);
        }
        println!(
            "{label} cycle {:>2}: cpu {:>6.1} ms  wall {:>6.1} ms  walk {:>6} entries {:>5.1} ms  complete_ratio {:?}  findings {}",
            i + 1,
            dc.as_secs_f64() * 1e3,
            dw.as_secs_f64() * 1e3,
            walk.entries,
            walk.elapsed.as_secs_f64() * 1e3,
            ratio,
            out.findings.len()
        );
        cpus.push(dc);
        walls.push(dw);
    }
    // Steady state: every cycle after the first (which warms the page cache).
    let steady = &cpus[1..];
    let mean = steady.iter().sum::<Duration>() / steady.len() as u32;
    let max = steady.iter().max().copied().unwrap_or_default();
    println!(
        "{label}: steady-state CPU per cycle mean {:.1} ms, max {:.1} ms (first cycle {:.1} ms); walk max {} entries (budget {}), max {:.1} ms (budget {:.0} ms); first complete pass after {:?} cycles",
        mean.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
        cpus[0].as_secs_f64() * 1e3,
        max_entries,
        budget_entries,
        max_walk.as_secs_f64() * 1e3,
        budget_time.as_secs_f64() * 1e3,
        first_complete
    );
    assert!(
        max_entries <= budget_entries,
        "walk exceeded its entry budget"
    );
}

/// The fit of one filesystem's full history (space and inodes), as each cycle does it.
fn history_fit() {
    use collectors::disk::trend::{self, Point, Resource, Series};
    let t = collectors::disk::Thresholds::default();
    let mut s = Series::default();
    for i in 0..400u32 {
        s.push(
            Point {
                t: f64::from(i) * 60.0,
                avail_bytes: 5e10 - f64::from(i) * 1e6 + f64::from(i % 7) * 3e5,
                files_free: 9e5 - f64::from(i),
            },
            Series::WINDOW_SECS,
            Series::CAPACITY,
        );
    }
    let points = s.points();
    let n = 2_000u32;
    let (c0, w0) = (cpu(), Instant::now());
    let mut filling = 0;
    for _ in 0..n {
        let a = trend::fit(&points, Resource::Space, &t);
        let b = trend::fit(&points, Resource::Inodes, &t);
        filling += usize::from(a.is_some_and(|f| f.filling) && b.is_some_and(|f| f.filling));
    }
    let (dc, dw) = (cpu() - c0, w0.elapsed());
    println!(
        "history fit: {} points, space + inodes: {:.1} us CPU ({:.1} us wall) per filesystem per cycle ({filling}/{n} filling)",
        points.len(),
        dc.as_secs_f64() * 1e6 / f64::from(n),
        dw.as_secs_f64() * 1e6 / f64::from(n),
    );
}

/// Healthy cycles (no walk) with the clock 3 min further each: the last 20 fit a full history.
fn healthy_with_history(root: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let clock = Arc::new(AtomicU64::new(1_795_798_800));
    let c2 = clock.clone();
    let mut c = DiskCollector::new(
        collectors::Node::new(HostPaths::new(root)),
        DiskConfig::default(),
    )
    .with_statfs(move |_| {
        Ok(FsUsage {
            size_bytes: 100 << 30,
            avail_bytes: 60 << 30,
            free_bytes: 60 << 30,
            files: 6_553_600,
            files_free: 6_000_000,
        })
    })
    .with_clock(move || c2.load(Ordering::SeqCst) as f64);
    let ctx = CollectContext::new("bench-node", collectors::HostNetns::Same);
    let mut cpus = Vec::new();
    for _ in 0..140 {
        clock.fetch_add(180, Ordering::SeqCst);
        let c0 = cpu();
        let out = c.collect(&ctx);
        cpus.push(cpu() - c0);
        assert!(out.findings.iter().all(|f| !f.id.ends_with("filling_up")));
        assert_eq!(
            c.last_walk().entries,
            0,
            "a healthy, flat disk is not walked"
        );
    }
    let tail = &cpus[120..];
    let early = &cpus[1..11];
    let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() * 1e3 / v.len() as f64;
    println!(
        "healthy with history: CPU per cycle mean {:.2} ms over cycles 2-11 (history short: no fit), {:.2} ms over cycles 121-140 (full history fitted)",
        mean(early),
        mean(tail)
    );
}

fn main() {
    let t = tempfile::tempdir().expect("tempdir");
    let b0 = Instant::now();
    build(t.path());
    println!(
        "built synthetic docker root: {CONTAINERS} container dirs, {} overlay2 files in {:.1} s",
        LAYERS * FILES_PER_LAYER,
        b0.elapsed().as_secs_f64()
    );
    run("critical (97% used)", t.path(), 3, 60);
    run("healthy (40% used)", t.path(), 60, 5);
    history_fit();
    healthy_with_history(t.path());
}
