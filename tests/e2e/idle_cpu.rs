//! Issue 43: a source that is missing, or whose directory is missing, costs nothing while the
//! agent waits for it. `serve` at its defaults (the shipped binary: `NODE_DOCTOR_BIN`) runs on
//! host roots that have this machine's `/proc`, `/sys` and `/dev` (symlinks) and a node's
//! `run/xtables.lock`, `var/log/messages` and journal directory; each case takes one away at
//! start or changes it a few seconds into the measurement. All cases run at once; each
//! `serve`'s threads are measured by their own CPU time (utime+stime of
//! `/proc/<pid>/task/<tid>/stat`, by thread name, and of the whole process) over 20 s after
//! every collector has run once: CPU time, not wall time, so a busy machine does not move it.
//!
//! The lock sampler spun a core when the lock's directory was missing (9.98 s of CPU in 10 s).
//! Every other follower (the kernel log, syslog files, journals, kube-proxy logs) runs in its
//! collector's cycle, every 15 s: a missing source costs a failed `open`/`stat` there, which
//! the bound on every thread and on the whole process covers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::parse_stat;
use crate::support::{shipped_bin, Server};

/// The measurement.
const WINDOW: Duration = Duration::from_secs(20);
/// When the cases that change something do it, into the window.
const CHANGE_AT: Duration = Duration::from_secs(2);
/// A share of one core no thread may reach, nor the whole process (whose total also counts the
/// collectors' worker threads that ended with their runs): 1 %. A spinning thread costs 20–100 %
/// (the debug build idles at about 0.2 % here, the release build below 0.1 %).
const MAX_SHARE: f64 = 0.01;
/// The lock sampler's thread name as the kernel keeps it (15 bytes).
const SAMPLER: &str = "xtables-lock-sa";

/// A node's host root: this machine's `/proc`, `/sys` and `/dev`, the xtables lock, a syslog
/// file, an (empty) persistent journal directory and the pod log directory.
fn stage(root: &Path) {
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, root.join(name)).expect("symlink into the host root")
    };
    link("/proc", "proc");
    link("/sys", "sys");
    link("/dev", "dev");
    for d in ["run", "var/log/journal", "var/log/pods"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("run/xtables.lock"), "").expect("lock file");
    std::fs::write(
        root.join("var/log/messages"),
        "Nov 29 05:00:00 node kubelet[1]: I1129 05:00:00.000000 1 server.go:1] started\n",
    )
    .expect("syslog file");
}

fn rm(path: &Path) {
    let md = std::fs::symlink_metadata(path).expect("stat what the case removes");
    if md.is_dir() {
        std::fs::remove_dir_all(path).expect("remove dir");
    } else {
        std::fs::remove_file(path).expect("remove file");
    }
}

/// One kind of host: what is taken away at start, and what changes during the window.
struct Case {
    name: &'static str,
    at_start: fn(&Path),
    during: Option<fn(&Path)>,
}

fn cases() -> Vec<Case> {
    fn nothing(_: &Path) {}
    vec![
        Case {
            name: "lock file present",
            at_start: nothing,
            during: None,
        },
        Case {
            name: "lock file absent",
            at_start: |r| rm(&r.join("run/xtables.lock")),
            during: None,
        },
        Case {
            name: "lock directory absent",
            at_start: |r| rm(&r.join("run")),
            during: None,
        },
        Case {
            name: "lock directory created later",
            at_start: |r| rm(&r.join("run")),
            during: Some(|r| {
                std::fs::create_dir(r.join("run")).expect("mkdir run");
                std::fs::write(r.join("run/xtables.lock"), "").expect("lock file");
            }),
        },
        Case {
            name: "lock file deleted while watched",
            at_start: nothing,
            during: Some(|r| rm(&r.join("run/xtables.lock"))),
        },
        Case {
            name: "lock file replaced by a directory",
            at_start: nothing,
            during: Some(|r| {
                rm(&r.join("run/xtables.lock"));
                std::fs::create_dir(r.join("run/xtables.lock")).expect("mkdir at the lock path");
            }),
        },
        Case {
            name: "lock file replaced by a FIFO",
            at_start: nothing,
            during: Some(|r| {
                let lock = r.join("run/xtables.lock");
                rm(&lock);
                nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .expect("mkfifo at the lock path");
            }),
        },
        Case {
            name: "lock directory removed while watched",
            at_start: nothing,
            during: Some(|r| rm(&r.join("run"))),
        },
        Case {
            name: "no var/log",
            at_start: |r| rm(&r.join("var/log")),
            during: None,
        },
        Case {
            name: "no journal directory",
            at_start: |r| rm(&r.join("var/log/journal")),
            during: None,
        },
        Case {
            name: "no dev/kmsg",
            at_start: |r| {
                rm(&r.join("dev"));
                std::fs::create_dir(r.join("dev")).expect("an empty dev");
            },
            during: None,
        },
    ]
}

/// CPU seconds (utime+stime) of each live thread of `pid` (by tid: its name and time), and of
/// the whole process (threads that exited included).
struct Cpu {
    process: f64,
    threads: BTreeMap<u32, (String, f64)>,
}

fn cpu(pid: u32) -> Cpu {
    let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let read = |p: String| std::fs::read_to_string(&p).ok();
    let process = read(format!("/proc/{pid}/stat"))
        .and_then(|t| parse_stat(&t, tick))
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no /proc/{pid}/stat: the agent exited"));
    let mut threads = BTreeMap::new();
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the agent's threads");
    for e in dir.filter_map(Result::ok) {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // A thread may exit between the listing and the read: the process total has it.
        if let Some(t) =
            read(format!("/proc/{pid}/task/{tid}/stat")).and_then(|t| parse_stat(&t, tick))
        {
            threads.insert(tid, t);
        }
    }
    Cpu { process, threads }
}

/// What one case's `serve` used over the window.
struct Used {
    process: f64,
    /// Per live thread: name and CPU seconds within the window (a thread started during it
    /// counts from its start).
    threads: Vec<(String, f64)>,
}

fn used(before: &Cpu, after: &Cpu) -> Used {
    let threads = after
        .threads
        .iter()
        .map(|(tid, (name, t))| {
            let t0 = before.threads.get(tid).map_or(0.0, |(_, t0)| *t0);
            (name.clone(), t - t0)
        })
        .collect();
    Used {
        process: after.process - before.process,
        threads,
    }
}

#[test]
fn missing_sources_cost_no_cpu_while_serve_waits() {
    let bin = shipped_bin();
    let cases = cases();
    let roots: Vec<tempfile::TempDir> = cases
        .iter()
        .map(|c| {
            let d = tempfile::tempdir().expect("tempdir");
            stage(d.path());
            (c.at_start)(d.path());
            d
        })
        .collect();
    // All at once: each `serve` is killed when dropped, whatever happens below.
    let servers: Vec<Server> = roots
        .iter()
        .map(|r| Server::start_bin(&bin, r.path(), &[]))
        .collect();
    for s in &servers {
        s.wait_ready(120);
    }
    // The lock directory's absence is said as such (issue 43), not as a lock file that
    // appears "once iptables has run".
    let absent = cases
        .iter()
        .position(|c| c.name == "lock directory absent")
        .expect("the case");
    let v = servers[absent].get("/findings?collector=iptables").json();
    let msg = v["collectors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("its directory does not exist") && msg.contains("waiting for it: inotify"),
        "{v:#}"
    );
    for s in &servers {
        assert!(
            cpu(s.pid()).threads.values().any(|(n, _)| n == SAMPLER),
            "no {SAMPLER} thread:\n{}",
            s.logs()
        );
    }

    let before: Vec<Cpu> = servers.iter().map(|s| cpu(s.pid())).collect();
    std::thread::sleep(CHANGE_AT);
    for (c, r) in cases.iter().zip(&roots) {
        if let Some(change) = c.during {
            change(r.path());
        }
    }
    std::thread::sleep(WINDOW - CHANGE_AT);
    let after: Vec<Cpu> = servers.iter().map(|s| cpu(s.pid())).collect();

    let window = WINDOW.as_secs_f64();
    let mut report = String::new();
    let mut failures = Vec::new();
    for ((c, b), a) in cases.iter().zip(&before).zip(&after) {
        let u = used(b, a);
        let sampler: f64 = u
            .threads
            .iter()
            .filter(|(n, _)| n == SAMPLER)
            .map(|(_, t)| t)
            .sum();
        let busiest = u
            .threads
            .iter()
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .cloned()
            .unwrap_or_default();
        report.push_str(&format!(
            "{:<40} process {:.3} s ({:.2} %), {SAMPLER} {:.3} s, busiest thread {} {:.3} s\n",
            c.name,
            u.process,
            u.process / window * 100.0,
            sampler,
            busiest.0,
            busiest.1
        ));
        for (name, t) in &u.threads {
            if *t >= MAX_SHARE * window {
                failures.push(format!("{}: thread {name} used {t:.3} s", c.name));
            }
        }
        if u.process >= MAX_SHARE * window {
            failures.push(format!("{}: the process used {:.3} s", c.name, u.process));
        }
    }
    println!("serve's CPU over {window} s ({bin:?}):\n{report}");
    assert!(
        failures.is_empty(),
        "over {window} s, no thread nor the process may use {:.0} % of a core:\n{}\n{report}",
        MAX_SHARE * 100.0,
        failures.join("\n")
    );
}

#[test]
fn a_stat_line_gives_the_thread_name_and_its_cpu() {
    // Linux 6.18's format; then a name with a space and parentheses in it.
    let line = "4242 (xtables-lock-sa) S 1 4242 4242 0 -1 4194368 88 0 0 0 250 31 0 0 20 0 \
                12 0 1000 100000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0";
    assert_eq!(
        parse_stat(line, 100.0),
        Some(("xtables-lock-sa".to_string(), 2.81))
    );
    let odd = "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0";
    assert_eq!(parse_stat(odd, 100.0), Some(("a) b (c".to_string(), 0.1)));
    assert_eq!(parse_stat("7 (x) R 1", 100.0), None);
}
