//! Issue 16 on a real kernel, through the binary (root, `fio` and `losetup`): slow storage, as
//! in the issue. Four fio jobs write with direct IO to a loop device throttled to 1 MiB/s by
//! the block cgroup controller (cgroup v1 `blkio.throttle.write_bps_device` where the blkio
//! hierarchy is mounted, else cgroup v2 `io.max`; chosen at run time), so they sit in D state
//! waiting for the throttle; a fifth fio writes 2 MB/s to a file on the system disk through
//! the page cache, moving more bytes than the four together without waiting. `node-doctor check
//! --collector load` must name a throttled job as the IO culprit, not the buffered writer:
//! once with delay accounting on (`kernel.task_delayacct=1` before the jobs start; ranked by
//! `/proc/<pid>/stat` field 42, iotop's IO>), once with it off (ranked by sampling D states).
//!
//! Everything the test starts is stopped by Drop guards, also when an assertion fails: the fio
//! processes are killed and reaped, the cgroup is emptied and removed, the loop device is
//! detached, the files are removed and `kernel.task_delayacct` gets its old value back.
//!
//! The figures it prints (bytes/s and block-IO delay of each process over the check's window,
//! read by the test itself from `/proc/<pid>/io` and field 42, and who was named) are the ones
//! quoted in docs/collectors/load.md.
//!
//! Issue 28 ("Accuracy"), a steady load: one fio job writes 4 MiB/s, steadily, with direct IO
//! to a loop device throttled to that rate, while `node-doctor serve --collector load
//! --interval 3s` runs on the real host; the test polls `/findings` 40 times, 3 s apart, and
//! counts how often the set of load findings (id and subject) changes. A steady load must give
//! a steady set that is not empty (from the middle of the polls on, the load is seen): at most
//! two changes (the first raise, and one more as a rule with a longer `raise_after` joins).
//! The same guards clean up fio, the cgroup, the loop device and the file, and the server is
//! killed, also when an assertion fails.

use std::collections::BTreeSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where the loop device's backing file and the buffered writer's file live (on disk).
const DIR: &str = "/var/tmp";
/// The throttle on the loop device, bytes per second.
const THROTTLE_BPS: u64 = 1024 * 1024;
/// The buffered writer's rate.
const BUFFERED_RATE: &str = "2m";
const JOBS: usize = 4;

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
    })
}

/// A command's output, or why it failed.
fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A loop device detached on drop.
struct Loop {
    dev: String,
    major: u64,
    minor: u64,
}

impl Loop {
    fn attach(file: &Path) -> Result<Loop, String> {
        let dev = run(Command::new("losetup").args(["-f", "--show"]).arg(file))?;
        let m = std::fs::metadata(&dev).map_err(|e| format!("{dev}: {e}"))?;
        if !m.file_type().is_block_device() {
            return Err(format!("{dev} is not a block device"));
        }
        let rdev = m.rdev();
        Ok(Loop {
            major: nix::sys::stat::major(rdev),
            minor: nix::sys::stat::minor(rdev),
            dev,
        })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Err(e) = run(Command::new("losetup").args(["-d", &self.dev])) {
            eprintln!("detaching {}: {e}", self.dev);
        }
    }
}

/// A block cgroup throttling writes to one device; emptied (into its parent) and removed on
/// drop.
struct Throttle {
    dir: PathBuf,
    parent: PathBuf,
    kind: &'static str,
}

impl Throttle {
    /// cgroup v1 where the blkio hierarchy is mounted (this VM), else cgroup v2 where the
    /// unified hierarchy at /sys/fs/cgroup has the io controller.
    fn new(name: &str, dev: &Loop, bps: u64) -> Result<Throttle, String> {
        let v1 = Path::new("/sys/fs/cgroup/blkio");
        let v2 = Path::new("/sys/fs/cgroup");
        let (parent, kind, file, line) = if v1.join("blkio.throttle.write_bps_device").exists() {
            (
                v1.to_path_buf(),
                "cgroup v1 blkio.throttle.write_bps_device",
                "blkio.throttle.write_bps_device",
                format!("{}:{} {bps}", dev.major, dev.minor),
            )
        } else if std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "io"))
        {
            let sub =
                std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
            if !sub.split_whitespace().any(|w| w == "io") {
                std::fs::write(v2.join("cgroup.subtree_control"), "+io")
                    .map_err(|e| format!("enabling the io controller: {e}"))?;
            }
            (
                v2.to_path_buf(),
                "cgroup v2 io.max",
                "io.max",
                format!("{}:{} wbps={bps}", dev.major, dev.minor),
            )
        } else {
            return Err("no block cgroup controller (blkio v1 or io v2) is available".into());
        };
        let dir = parent.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let t = Throttle { dir, parent, kind };
        std::fs::write(t.dir.join(file), line).map_err(|e| format!("{file}: {e}"))?;
        Ok(t)
    }

    fn procs(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for pid in self.procs() {
            let _ = std::fs::write(self.parent.join("cgroup.procs"), pid.to_string());
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// `kernel.task_delayacct`, set for the test and restored on drop.
struct DelayAcct(Option<String>);

impl DelayAcct {
    const PATH: &'static str = "/proc/sys/kernel/task_delayacct";

    fn set(on: bool) -> Result<DelayAcct, String> {
        let old =
            std::fs::read_to_string(Self::PATH).map_err(|e| format!("{}: {e}", Self::PATH))?;
        std::fs::write(Self::PATH, if on { "1" } else { "0" })
            .map_err(|e| format!("{}: {e}", Self::PATH))?;
        Ok(DelayAcct(Some(old.trim().to_string())))
    }
}

impl Drop for DelayAcct {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            let _ = std::fs::write(Self::PATH, old);
        }
    }
}

/// A process and its descendants (fio forks its jobs, which call `setsid`: a process group
/// does not hold them), killed and reaped on drop.
struct Tree(Child);

impl Tree {
    fn spawn(cmd: &mut Command) -> Tree {
        Tree(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{cmd:?}: {e}")),
        )
    }

    /// The process and all its descendants now.
    fn pids(&self) -> Vec<u32> {
        let mut all = vec![self.0.id()];
        let mut i = 0;
        while i < all.len() {
            for c in children(all[i]) {
                if !all.contains(&c) {
                    all.push(c);
                }
            }
            i += 1;
        }
        all
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let pids = self.pids();
        for pid in &pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.0.wait();
        // Killed jobs in D state exit when their IO completes: wait for them before the cgroup
        // and the loop device go (init reaps them).
        let deadline = Instant::now() + Duration::from_secs(20);
        for pid in &pids[1..] {
            while Instant::now() < deadline && Path::new(&format!("/proc/{pid}")).exists() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The children of `pid` (fio's job processes), from /proc/<pid>/task/*/children.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// (write_bytes, delayacct_blkio_ticks) of a process now.
fn io_and_delay(pid: u32) -> Option<(u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let wb = io
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))?
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field 42 of the line is the 40th after the comm (fields 3.. start at index 0).
    let blkio = fields.get(39)?.parse().ok()?;
    Some((wb, blkio))
}

/// Why a test of this file cannot run here: root, `fio` and `losetup`.
fn skip_reason_tools() -> Option<String> {
    if !crate::support::is_root() {
        return Some("needs root (loop devices, cgroups, every process's /proc/<pid>/io)".into());
    }
    for (tool, package) in [("fio", "fio"), ("losetup", "mount")] {
        if !on_path(tool) {
            return Some(format!(
                "needs `{tool}` (Debian package {package}: apt-get install {package})"
            ));
        }
    }
    None
}

fn skip_reason() -> Option<String> {
    if let Some(why) = skip_reason_tools() {
        return Some(why);
    }
    if !Path::new(DelayAcct::PATH).exists() {
        return Some(format!(
            "{} is missing (a kernel before 5.14)",
            DelayAcct::PATH
        ));
    }
    None
}

/// One measurement: the throttled jobs and the buffered writer run while `check` takes its
/// two samples. Returns the named process, the method and the figures.
fn measure(delayacct: bool) -> Result<(), String> {
    let _acct = DelayAcct::set(delayacct)?;
    let tag = format!("nd-e2e-{}-{}", std::process::id(), u8::from(delayacct));
    let backing = TempFile(Path::new(DIR).join(format!("{tag}.img")));
    std::fs::File::create(&backing.0)
        .and_then(|f| f.set_len(256 << 20))
        .map_err(|e| format!("{}: {e}", backing.0.display()))?;
    let lo = Loop::attach(&backing.0)?;
    let cg = Throttle::new(&tag, &lo, THROTTLE_BPS)?;
    let buffered_file = TempFile(Path::new(DIR).join(format!("{tag}-buffered.dat")));

    // The throttled jobs: the shell joins the cgroup, then becomes fio (its jobs fork there).
    let procs = cg.dir.join("cgroup.procs");
    let throttled = Tree::spawn(
        Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg("fio")
            .args([
                "--name=throttled",
                "--rw=randwrite",
                "--bs=4k",
                "--direct=1",
                "--ioengine=psync",
                "--time_based",
                "--runtime=30",
            ])
            .arg(format!("--numjobs={JOBS}"))
            .arg(format!("--filename={}", lo.dev)),
    );
    let buffered = Tree::spawn(
        Command::new("fio")
            .args([
                "--name=buffered",
                "--rw=write",
                "--bs=64k",
                "--size=256m",
                "--ioengine=psync",
                "--time_based",
                "--runtime=30",
            ])
            .arg(format!("--rate={BUFFERED_RATE}"))
            .arg(format!("--filename={}", buffered_file.0.display())),
    );
    // Let fio lay out its file and start its jobs.
    std::thread::sleep(Duration::from_millis(2500));
    let jobs: Vec<u32> = cg
        .procs()
        .into_iter()
        .filter(|p| *p != throttled.0.id())
        .collect();
    let writer: Vec<u32> = children(buffered.0.id());
    // The throttled jobs are also the throttled fio's children (the check of the guard).
    let mut tree = throttled.pids();
    tree.retain(|p| *p != throttled.0.id());
    tree.sort_unstable();
    let mut sorted = jobs.clone();
    sorted.sort_unstable();
    if jobs.len() != JOBS || writer.len() != 1 || tree != sorted {
        return Err(format!(
            "fio did not start as expected: throttled jobs {jobs:?} (its children {tree:?}), buffered job {writer:?}"
        ));
    }
    let writer = writer[0];
    let before: Vec<Option<(u64, u64)>> = jobs
        .iter()
        .chain([&writer])
        .map(|p| io_and_delay(*p))
        .collect();
    let started = Instant::now();
    let out = Command::new(crate::support::node_doctor_bin())
        .args([
            "check",
            "--host-root",
            "/",
            "--node-name",
            "e2e-node",
            "--interval",
            "3s",
            "--format",
            "json",
            "--collector",
            "load",
        ])
        .env_remove("NODE_NAME")
        .output()
        .map_err(|e| format!("node-doctor check: {e}"))?;
    let elapsed = started.elapsed().as_secs_f64();
    let after: Vec<Option<(u64, u64)>> = jobs
        .iter()
        .chain([&writer])
        .map(|p| io_and_delay(*p))
        .collect();
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "check printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;

    // The figures over the check's window, as the kernel counts them.
    let mode = if delayacct { "on" } else { "off" };
    for (i, pid) in jobs.iter().chain([&writer]).enumerate() {
        let who = if *pid == writer {
            "buffered writer"
        } else {
            "throttled job"
        };
        if let (Some((w0, b0)), Some((w1, b1))) = (before[i], after[i]) {
            println!(
                "delayacct {mode}: {who} pid {pid}: {:.1} KiB/s written, blkio delay {:.0}% of the window",
                (w1 - w0) as f64 / 1024.0 / elapsed,
                (b1 - b0) as f64 / 100.0 / elapsed * 100.0
            );
        }
    }

    let findings = v["findings"].as_array().cloned().unwrap_or_default();
    let named = ["load.io_bound", "load.iowait"].iter().find_map(|id| {
        findings
            .iter()
            .find(|f| f["id"] == *id && f["evidence"]["top_io_pid"].is_number())
            .map(|f| (*id, f["evidence"].clone()))
    });
    let Some((id, ev)) = named else {
        return Err(format!(
            "no load.io_bound or load.iowait names an IO process (throttled jobs {jobs:?}, buffered writer {writer}):\n{v:#}"
        ));
    };
    let top = ev["top_io_pid"].as_u64().unwrap_or(0) as u32;
    println!(
        "delayacct {mode} ({}): {id} names pid {top} ({}), io_wait_method {}, IO wait {}%, {} B/s written; blocked_tasks {}; top_io_processes {}",
        cg.kind,
        ev["top_io_comm"],
        ev["io_wait_method"],
        ev["top_io_io_wait_percent"],
        ev["top_io_write_bytes_per_second"],
        ev["blocked_tasks"],
        ev["top_io_processes"]
    );
    if !jobs.contains(&top) {
        return Err(format!(
            "{id} named pid {top}, not a throttled job {jobs:?} (buffered writer {writer}):\n{ev:#}"
        ));
    }
    // With delay accounting on, the method is "delayacct", or "delayacct_and_d_state_sampling"
    // when another task on this shared machine (a build, git) was blocked without delay
    // accounting figures and was sampled: either way the fio jobs were ranked by delayacct.
    let (want, also) = if delayacct {
        ("delayacct", "delayacct_and_d_state_sampling")
    } else {
        ("d_state_sampling", "d_state_sampling")
    };
    if ev["io_wait_method"] != want && ev["io_wait_method"] != also {
        return Err(format!(
            "io_wait_method {} where {want} was expected:\n{ev:#}",
            ev["io_wait_method"]
        ));
    }
    // Stop the writers before the guards take the cgroup and the loop device away.
    drop(buffered);
    drop(throttled);
    Ok(())
}

#[test]
fn real_throttled_fio_jobs_are_named_over_a_buffered_writer() {
    let _machine = crate::support::exclusive();
    let name = "real_throttled_fio_jobs_are_named_over_a_buffered_writer";
    if let Some(why) = skip_reason() {
        collectors::skip!("SKIP {name}: {why}");
        return;
    }
    for delayacct in [true, false] {
        if let Err(e) = measure(delayacct) {
            panic!(
                "delay accounting {}: {e}",
                if delayacct { "on" } else { "off" }
            );
        }
    }
}

/// The steady load: fio asks for 4 MiB/s on a loop device throttled to 3 MiB/s, so it writes
/// 3 MiB/s steadily and its job waits on the throttle most of the time (PSI io full around
/// `io_bound`'s 20% on this shared VM, iowait around 10% and more).
const STEADY_RATE: &str = "4m";
const STEADY_THROTTLE_BPS: u64 = 3 * 1024 * 1024;
/// How often and how many times `/findings` is read (the agent's interval is the same 3 s).
const POLLS: usize = 40;
const POLL_EVERY: Duration = Duration::from_secs(3);
/// The most changes of the set of load findings a steady load may show over the polls.
const MAX_CHANGES: usize = 2;

/// The load findings of a `/findings` document, by id and subject (a finding shown as
/// `clearing` is still shown).
fn load_set(v: &Value) -> BTreeSet<String> {
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["collector"] == "load")
        .map(|f| match f["subject"].as_str() {
            Some(s) if !s.is_empty() => format!("{} {s}", f["id"].as_str().unwrap_or("?")),
            _ => f["id"].as_str().unwrap_or("?").to_string(),
        })
        .collect()
}

/// The findings a steady IO load can cause: `io_bound`, `iowait` and fio as a host process.
/// The machine's other work (builds sharing its two CPUs) raises `cpu_bound`, `high_load` and
/// `host_process rustc` of its own, which are right and not the steady load's.
fn steady_io_set(all: &BTreeSet<String>) -> BTreeSet<String> {
    all.iter()
        .filter(|f| {
            f.starts_with("load.io_bound") || *f == "load.iowait" || *f == "load.host_process fio"
        })
        .cloned()
        .collect()
}

/// How many times a sequence of sets changes, counting a first set that is not empty.
fn set_changes(sets: &[BTreeSet<String>]) -> usize {
    let first = usize::from(sets.first().is_some_and(|s| !s.is_empty()));
    first + sets.windows(2).filter(|w| w[0] != w[1]).count()
}

/// The whole-node figures the load rules decide on, as the last run's metrics give them:
/// iowait, PSI io full avg10, D-state tasks and the busiest disk.
fn load_figures(metrics: &str) -> String {
    let Ok(e) = crate::support::parse_exposition(metrics) else {
        return "metrics unreadable".into();
    };
    let one = |name: &str, label: &[(&str, &str)]| {
        e.find(name)
            .into_iter()
            .find(|s| {
                label
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map_or(f64::NAN, |s| s.value)
    };
    let busiest = e
        .find("node_doctor_load_disk_busy_percent")
        .into_iter()
        .max_by(|a, b| a.value.total_cmp(&b.value))
        .map(|s| format!("{} {:.0}%", s.labels["device"], s.value))
        .unwrap_or_default();
    format!(
        "iowait {:.1}%, psi io full {:.1}%, blocked {}, load1 {:.2}, busiest disk {busiest}",
        one("node_doctor_load_cpu_percent", &[("mode", "iowait")]),
        one(
            "node_doctor_load_pressure_avg10_percent",
            &[("resource", "io"), ("kind", "full")]
        ),
        one("node_doctor_load_procs_blocked", &[]),
        one("node_doctor_load_load1", &[]),
    )
}

/// Busy CPU seconds of the whole machine ([`crate::support::cpu_ticks`]) and the CPU seconds
/// (utime+stime, every thread) of `pids`.
fn busy_seconds(pids: &[u32]) -> (f64, f64) {
    let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let machine = crate::support::cpu_ticks().0 as f64 / tick;
    let own = pids
        .iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|s| crate::support::parse_stat(&s, tick))
        .map(|(_, seconds)| seconds)
        .sum();
    (machine, own)
}

/// The CPUs (on average) that work other than this test's `serve` and fio kept busy between
/// two [`busy_seconds`] readings `seconds` apart.
fn other_work_cpus(before: (f64, f64), after: (f64, f64), seconds: f64) -> f64 {
    let machine = after.0 - before.0;
    let own = after.1 - before.1;
    (machine - own).max(0.0) / seconds.max(1.0)
}

/// More CPU than this, on average, spent by other work during the polls makes the steady
/// load's IO signal vanish: iowait counts only idle CPUs, and a node kept busy by something
/// else is rightly reported as CPU-bound by that something (a build beside the tests: 1.6–2
/// CPUs, `load.cpu_bound`, `load.host_process rustc`, iowait 0.0–0.3 %).
const OTHER_WORK_MAX_CPUS: f64 = 0.5;

/// The steady load under `serve`: the changes of the set of load findings over the polls.
/// `Ok(Some(why))` when other work on the machine took the CPUs the scenario needs idle.
fn steady_load() -> Result<Option<String>, String> {
    let tag = format!("nd-e2e-steady-{}", std::process::id());
    let backing = TempFile(Path::new(DIR).join(format!("{tag}.img")));
    std::fs::File::create(&backing.0)
        .and_then(|f| f.set_len(256 << 20))
        .map_err(|e| format!("{}: {e}", backing.0.display()))?;
    let lo = Loop::attach(&backing.0)?;
    let cg = Throttle::new(&tag, &lo, STEADY_THROTTLE_BPS)?;
    // One job, joined to the cgroup by its shell before it becomes fio; it runs past the polls
    // and is killed by its guard.
    let fio = Tree::spawn(
        Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(cg.dir.join("cgroup.procs"))
            .arg("fio")
            .args([
                "--name=steady",
                "--rw=write",
                "--bs=64k",
                "--direct=1",
                "--ioengine=psync",
                "--time_based",
                "--runtime=600",
            ])
            .arg(format!("--rate={STEADY_RATE}"))
            .arg(format!("--filename={}", lo.dev)),
    );
    std::thread::sleep(Duration::from_millis(2500));
    if cg.procs().len() < 2 {
        return Err(format!(
            "fio did not start its job in {}: {:?}",
            cg.dir.display(),
            cg.procs()
        ));
    }
    let server =
        crate::support::Server::start(Path::new("/"), &["--collector", "load", "--interval", "3s"]);
    let mut sets: Vec<BTreeSet<String>> = Vec::with_capacity(POLLS);
    let ours = |cg: &Throttle| -> Vec<u32> {
        let mut p = cg.procs();
        p.push(server.child.id());
        p
    };
    let (t0, before) = (std::time::Instant::now(), busy_seconds(&ours(&cg)));
    for poll in 0..POLLS {
        std::thread::sleep(POLL_EVERY);
        let set = load_set(&server.get("/findings").json());
        println!(
            "poll {:2}: {:?}; {}",
            poll + 1,
            set,
            load_figures(&server.get("/metrics").text())
        );
        sets.push(set);
    }
    let other = other_work_cpus(before, busy_seconds(&ours(&cg)), t0.elapsed().as_secs_f64());
    let io_sets: Vec<BTreeSet<String>> = sets.iter().map(steady_io_set).collect();
    let changes = set_changes(&io_sets);
    println!(
        "fio --rate={STEADY_RATE} on a loop device throttled to {STEADY_THROTTLE_BPS} B/s ({}): over {POLLS} polls {}s apart the set of the steady load's findings changed {changes} time(s), the set of all load findings {} time(s)",
        cg.kind,
        POLL_EVERY.as_secs(),
        set_changes(&sets)
    );
    drop(server);
    drop(fio);
    println!("other work on the machine during the polls: {other:.2} CPUs");
    if other > OTHER_WORK_MAX_CPUS {
        return Ok(Some(format!(
            "other work kept {other:.2} CPUs busy during the polls (more than {OTHER_WORK_MAX_CPUS}): the steady IO load cannot show as iowait, and the node is rightly CPU-bound by that work"
        )));
    }
    // Zero findings would be zero changes: the steady load must first be seen, and stay seen
    // (from the middle of the polls on, once every rule's raise_after has passed).
    let unseen: Vec<usize> = io_sets
        .iter()
        .enumerate()
        .skip(POLLS / 2)
        .filter(|(_, s)| s.is_empty())
        .map(|(i, _)| i + 1)
        .collect();
    if !unseen.is_empty() {
        return Err(format!(
            "the steady throttled load raised no io_bound, iowait or host_process finding at polls {unseen:?}: {io_sets:#?}"
        ));
    }
    if changes > MAX_CHANGES {
        return Err(format!(
            "the set of the steady load's findings changed {changes} times (at most {MAX_CHANGES}): {io_sets:#?}"
        ));
    }
    Ok(None)
}

#[test]
fn real_steady_throttled_io_keeps_a_steady_set_of_load_findings() {
    let _machine = crate::support::exclusive();
    let name = "real_steady_throttled_io_keeps_a_steady_set_of_load_findings";
    if let Some(why) = skip_reason_tools() {
        collectors::skip!("SKIP {name}: {why}");
        return;
    }
    match steady_load() {
        Ok(None) => {}
        Ok(Some(why)) => collectors::skip!("SKIP {name}: {why}"),
        Err(e) => panic!("{e}"),
    }
}
