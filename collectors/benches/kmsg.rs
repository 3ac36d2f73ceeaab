//! Bench (not a test): the kernel-log reader's `syslog(2)` fallback on the real kernel,
//! printing measured CPU time per call: the first (lookback) read, steady state with nothing
//! new, catching up after a flood written to `/dev/kmsg`, steady state with a full ring buffer,
//! and the `/dev/kmsg` device reader for comparison. Needs root (it mounts a `nodev` tmpfs so
//! that a real kmsg node refuses `open()`, as in an unprivileged container, and it writes
//! `<7>node-doctor-bench` records to the host's kernel log).
//!
//! Run: `cargo bench -p collectors --bench kmsg`

use std::io::Write;
use std::time::{Duration, Instant};

use collectors::kmsg::{KmsgBatch, KmsgConfig, KmsgMode, KmsgReader};
use collectors::HostPaths;
use nix::sys::resource::{getrusage, UsageWho};

const FLOOD: usize = 3000;

/// (user, system) CPU time of this process so far.
fn cpu_split() -> (Duration, Duration) {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            (t(u.user_time()), t(u.system_time()))
        }
        Err(_) => (Duration::ZERO, Duration::ZERO),
    }
}

fn cpu() -> Duration {
    let (user, sys) = cpu_split();
    user + sys
}

/// `(batch, cpu, wall)` of one call.
fn timed(r: &mut KmsgReader) -> (KmsgBatch, Duration, Duration) {
    let (c0, w0) = (cpu(), Instant::now());
    let b = r.read_new();
    (b, cpu() - c0, w0.elapsed())
}

fn steady(label: &str, r: &mut KmsgReader) {
    let mut max = Duration::ZERO;
    let mut total = Duration::ZERO;
    let calls = 20;
    let (u0, s0) = cpu_split();
    for _ in 0..calls {
        let (b, c, _) = timed(r);
        assert!(b.status == collectors::Status::Ok, "{:?}", b.status);
        max = max.max(c);
        total += c;
    }
    let (u1, s1) = cpu_split();
    println!(
        "{label}: {calls} calls, CPU mean {:.0} µs (user {:.0}, system {:.0}), max {:.0} µs per call",
        total.as_secs_f64() * 1e6 / calls as f64,
        (u1 - u0).as_secs_f64() * 1e6 / calls as f64,
        (s1 - s0).as_secs_f64() * 1e6 / calls as f64,
        max.as_secs_f64() * 1e6
    );
}

struct NodevRoot(tempfile::TempDir);

impl Drop for NodevRoot {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0.path().join("dev"), nix::mount::MntFlags::MNT_DETACH);
    }
}

fn nodev_root() -> NodevRoot {
    use nix::mount::{mount, MsFlags};
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let t = tempfile::tempdir().expect("temp dir");
    let dev = t.path().join("dev");
    std::fs::create_dir(&dev).expect("mkdir dev");
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NODEV | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("size=64k"),
    )
    .expect("mount a nodev tmpfs");
    let root = NodevRoot(t);
    mknod(
        &dev.join("kmsg"),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o644),
        makedev(1, 11),
    )
    .expect("mknod kmsg");
    std::os::unix::fs::symlink("/proc", root.0.path().join("proc")).expect("proc link");
    root
}

fn main() {
    if !nix::unistd::Uid::effective().is_root() {
        println!("SKIP kmsg bench: needs root (mount, mknod, writing /dev/kmsg)");
        return;
    }
    let root = nodev_root();
    let host = HostPaths::new(root.0.path());
    let mut r = KmsgReader::alone(&host, KmsgConfig::default());
    let (b, c, w) = timed(&mut r);
    assert_eq!(r.mode(), KmsgMode::Syslog);
    println!(
        "syslog first read (1 h lookback): {} records returned, {} older skipped, CPU {:.2} ms, wall {:.2} ms",
        b.records.len(),
        b.skipped_old,
        c.as_secs_f64() * 1e3,
        w.as_secs_f64() * 1e3
    );
    steady("syslog steady state, nothing new", &mut r);

    let t0 = Instant::now();
    for i in 0..FLOOD {
        // A fresh open per write: /dev/kmsg rate-limits writers per open file.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .expect("open /dev/kmsg for writing");
        let _ = f.write_all(
            format!("<7>node-doctor-bench: flood record {i} of {FLOOD}, some text to look like a kernel message\n")
                .as_bytes(),
        );
    }
    println!(
        "wrote {FLOOD} records in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let (mut calls, mut got, mut dropped) = (0, 0, 0);
    let (mut max_cpu, mut max_wall, mut total) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    loop {
        let (b, c, w) = timed(&mut r);
        calls += 1;
        got += b.records.len();
        dropped += b.dropped;
        max_cpu = max_cpu.max(c);
        max_wall = max_wall.max(w);
        total += c;
        if !b.truncated_by_budget || calls > 100 {
            break;
        }
    }
    println!(
        "syslog catch-up after the flood: {calls} call(s), {got} records, {dropped} dropped (unknown-loss events), CPU max {:.2} ms / total {:.2} ms, wall max {:.2} ms",
        max_cpu.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        max_wall.as_secs_f64() * 1e3
    );
    steady("syslog steady state, ring buffer full", &mut r);

    let mut device = KmsgReader::alone(&HostPaths::new("/"), KmsgConfig::default());
    let (b, c, _) = timed(&mut device);
    assert_eq!(device.mode(), KmsgMode::Kmsg);
    println!(
        "device first read: {} records, CPU {:.2} ms",
        b.records.len(),
        c.as_secs_f64() * 1e3
    );
    steady("device steady state, nothing new", &mut device);
}
