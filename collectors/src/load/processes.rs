//! Per-process counters between runs, and the culprits they point at: top IO (like
//! `iotop -oPa`), top CPU, and tasks in D state. State is keyed by pid and start time and
//! rebuilt from the live pids on every run, so exited pids are dropped at once.

use std::collections::HashMap;

use super::observation::{Culprit, Origin};
use super::LoadConfig;
use crate::host::HostPaths;
use crate::pods::PodDirectory;
use crate::proc::cgroup::{self, Placement};
use crate::proc::{pid, pid_io};

/// USER_HZ: the unit of `/proc/<pid>/stat` times. Fixed at 100 by the kernel's user ABI on
/// every architecture Kubernetes runs on (x86, arm64, ppc64le, s390x).
const USER_HZ: f64 = 100.0;

#[derive(Debug, Clone, Copy)]
struct Prev {
    starttime: u64,
    cpu_ticks: u64,
    /// Storage bytes (read, written) at the last read of `/proc/<pid>/io`, and when (uptime).
    io: Option<(u64, u64, f64)>,
    io_denied: bool,
}

/// One live process in this run, with its deltas since the previous run (when it existed then).
#[derive(Debug, Clone)]
pub struct ProcDelta {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub state: char,
    pub num_threads: u64,
    pub cpu_ticks: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Seconds over which `read_bytes`/`write_bytes` accrued (since `io` was last read).
    pub io_seconds: f64,
}

/// How many refused processes [`ProcSample::io_denied_examples`] names.
const MAX_DENIED_EXAMPLES: usize = 3;

/// Everything one pass over `/proc` found.
#[derive(Debug, Default)]
pub struct ProcSample {
    pub procs: Vec<ProcDelta>,
    /// Processes whose `io` file was refused (not root).
    pub io_denied: usize,
    /// The first few of them (pid, comm), so a person can tell which.
    pub io_denied_examples: Vec<(u32, String)>,
    /// `/proc/<pid>/io` files read in this pass.
    pub io_reads: usize,
    /// Why `/proc` could not be listed.
    pub list_error: Option<String>,
}

/// Per-pid counters of the previous pass.
///
/// `/proc/<pid>/io` costs as much kernel time as `stat`, so it is read only for a process that
/// is new, used CPU since the previous pass, or is in D state. A process that issues IO runs
/// in the kernel to do it (the accounting happens in its own context when it submits reads,
/// dirties pages or sends direct IO), so a process whose CPU time did not move has, to tick
/// resolution, not issued IO; whatever it did is not lost: its counters are kept from the last
/// read and the difference is attributed, over the time since that read, when it is next read.
#[derive(Debug, Default)]
pub struct ProcessTracker {
    prev: HashMap<u32, Prev>,
}

impl ProcessTracker {
    pub fn len(&self) -> usize {
        self.prev.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prev.is_empty()
    }

    /// Reads every live process once (`now` is the host uptime in seconds); keeps only the
    /// live processes' counters for the next pass.
    pub fn sample(&mut self, host: &HostPaths, now: f64) -> ProcSample {
        let mut out = ProcSample::default();
        let pids = match pid::list_pids(host) {
            Ok(p) => p,
            Err(e) => {
                out.list_error = Some(e.to_string());
                return out;
            }
        };
        let mut next: HashMap<u32, Prev> = HashMap::with_capacity(pids.len());
        out.procs.reserve(pids.len());
        let mut buf = Vec::with_capacity(4096);
        for p in pids {
            // A pid that vanished since the listing is simply absent.
            let Some(st) = pid::stat_with(host, p, &mut buf) else {
                continue;
            };
            let ticks = st.utime.saturating_add(st.stime);
            let before = self
                .prev
                .get(&p)
                .filter(|b| b.starttime == st.starttime)
                .copied();
            let must_read = match before {
                None => true,
                Some(b) => !b.io_denied && (b.cpu_ticks != ticks || st.state == 'D'),
            };
            let mut io_denied = before.is_some_and(|b| b.io_denied);
            let mut io = before.and_then(|b| b.io);
            let (mut read_bytes, mut write_bytes, mut io_seconds) = (None, None, 0.0);
            if must_read {
                out.io_reads += 1;
                match pid_io::read_with(host, p, &mut buf) {
                    Ok(now_io) => {
                        if let Some((r0, w0, at)) = io {
                            read_bytes = Some(now_io.read_bytes.saturating_sub(r0));
                            write_bytes = Some(now_io.write_bytes.saturating_sub(w0));
                            io_seconds = now - at;
                        }
                        io = Some((now_io.read_bytes, now_io.write_bytes, now));
                    }
                    Err(pid_io::IoReadFailure::Denied) => io_denied = true,
                    Err(_) => {}
                }
            }
            if io_denied {
                out.io_denied += 1;
                if out.io_denied_examples.len() < MAX_DENIED_EXAMPLES {
                    out.io_denied_examples.push((p, st.comm.clone()));
                }
            }
            next.insert(
                p,
                Prev {
                    starttime: st.starttime,
                    cpu_ticks: ticks,
                    io,
                    io_denied,
                },
            );
            out.procs.push(ProcDelta {
                pid: p,
                ppid: st.ppid,
                comm: st.comm,
                state: st.state,
                num_threads: st.num_threads,
                cpu_ticks: before.map(|b| ticks.saturating_sub(b.cpu_ticks)),
                read_bytes,
                write_bytes,
                io_seconds,
            });
        }
        self.prev = next;
        out
    }
}

/// The culprits of one window.
#[derive(Debug, Default)]
pub struct Culprits {
    pub top_io: Vec<Culprit>,
    pub top_cpu: Vec<Culprit>,
    pub blocked: Vec<Culprit>,
}

/// Picks the top IO and CPU processes and the D-state tasks, and finds where each runs.
pub fn culprits(
    host: &HostPaths,
    sample: &ProcSample,
    elapsed: f64,
    config: &LoadConfig,
    pods: &PodDirectory,
    procs_blocked: u64,
) -> Culprits {
    let n = config.top_processes;
    let io_of = |d: &ProcDelta| {
        d.read_bytes
            .unwrap_or(0)
            .saturating_add(d.write_bytes.unwrap_or(0))
    };
    let mut by_io: Vec<&ProcDelta> = sample.procs.iter().filter(|d| io_of(d) > 0).collect();
    by_io.sort_by(|a, b| io_of(b).cmp(&io_of(a)).then(a.pid.cmp(&b.pid)));
    by_io.truncate(n);
    let mut by_cpu: Vec<&ProcDelta> = sample
        .procs
        .iter()
        .filter(|d| d.cpu_ticks.unwrap_or(0) > 0)
        .collect();
    by_cpu.sort_by(|a, b| b.cpu_ticks.cmp(&a.cpu_ticks).then(a.pid.cmp(&b.pid)));
    by_cpu.truncate(n);

    let mut origins: HashMap<u32, Origin> = HashMap::new();
    let mut origin = |d: &ProcDelta| -> Origin {
        origins
            .entry(d.pid)
            .or_insert_with(|| origin_of(host, d, config, pods))
            .clone()
    };
    let mk =
        |d: &ProcDelta, tid: Option<u32>, state: char, origin: Origin, wchan: Option<String>| {
            Culprit {
                pid: d.pid,
                tid,
                comm: d.comm.clone(),
                state,
                cpu_percent: d.cpu_ticks.unwrap_or(0) as f64 / USER_HZ / elapsed * 100.0,
                read_bytes_per_second: d.read_bytes.unwrap_or(0) as f64 / io_span(d, elapsed),
                write_bytes_per_second: d.write_bytes.unwrap_or(0) as f64 / io_span(d, elapsed),
                wchan,
                origin,
            }
        };
    let top_io = by_io
        .iter()
        .map(|d| mk(d, None, d.state, origin(d), None))
        .collect();
    let top_cpu = by_cpu
        .iter()
        .map(|d| mk(d, None, d.state, origin(d), None))
        .collect();

    // D-state tasks: main threads from the pass over /proc; other threads only when the
    // kernel counts more blocked tasks than that found, with a cap on threads read.
    let max = config.max_blocked_tasks;
    let mut blocked: Vec<Culprit> = Vec::new();
    for d in sample.procs.iter().filter(|d| d.state == 'D').take(max) {
        let w = pid::wchan(host, d.pid);
        blocked.push(mk(d, None, 'D', origin(d), w));
    }
    if (blocked.len() as u64) < procs_blocked && blocked.len() < max {
        let mut budget = max.saturating_mul(16);
        'outer: for d in sample.procs.iter().filter(|d| d.num_threads > 1) {
            for tid in pid::list_tasks(host, d.pid) {
                if budget == 0 || blocked.len() >= max {
                    break 'outer;
                }
                budget -= 1;
                if tid == d.pid {
                    continue;
                }
                if let Some(ts) = pid::task_stat(host, d.pid, tid) {
                    if ts.state == 'D' {
                        let w = pid::task_wchan(host, d.pid, tid);
                        let mut c = mk(d, Some(tid), 'D', origin(d), w);
                        c.comm = ts.comm;
                        blocked.push(c);
                    }
                }
            }
        }
    }
    Culprits {
        top_io,
        top_cpu,
        blocked,
    }
}

/// The span IO deltas accrued over: since the last read of the process's `io` file, and never
/// shorter than the window.
fn io_span(d: &ProcDelta, elapsed: f64) -> f64 {
    if d.io_seconds > elapsed {
        d.io_seconds
    } else {
        elapsed
    }
}

fn origin_of(host: &HostPaths, d: &ProcDelta, config: &LoadConfig, pods: &PodDirectory) -> Origin {
    // Kernel threads are children of kthreadd (pid 2), or kthreadd itself.
    if d.pid == 2 || (d.ppid == 2 && d.pid != 1) {
        return Origin::Kernel;
    }
    match cgroup::read(host, d.pid) {
        Some(Placement::Pod(p)) => {
            let names = pods.names(Some(&p.uid), p.container_id.as_deref());
            Origin::Pod {
                namespace: names.namespace,
                name: names.name,
                uid: p.uid,
                qos: p.qos,
                container_id: p.container_id,
                container: names.container,
            }
        }
        Some(Placement::Host { cgroup }) => Origin::Host {
            infrastructure: config.infrastructure_processes.contains(&d.comm),
            cgroup,
        },
        None => Origin::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &std::path::Path, pid: u32, ticks: u64, state: char, write_bytes: u64) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            // The 44 fields of a 3.x+ kernel (procfs-core needs at least the first 37).
            format!("{pid} (w) {state} 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 77 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("io"),
            format!("rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: {write_bytes}\ncancelled_write_bytes: 0\n"),
        )
        .unwrap();
    }

    #[test]
    fn io_is_read_only_for_processes_that_ran_and_attributed_over_the_span() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        let mut tr = ProcessTracker::default();
        write(t.path(), 10, 100, 'S', 1000);
        write(t.path(), 11, 100, 'S', 0);
        let s = tr.sample(&h, 100.0);
        assert_eq!(s.io_reads, 2, "new processes get a baseline");
        // pid 10 did not run: its io file is not read (and a change there is not seen yet).
        write(t.path(), 10, 100, 'S', 5000);
        write(t.path(), 11, 100, 'D', 0);
        let s = tr.sample(&h, 110.0);
        assert_eq!(s.io_reads, 1, "only the D-state task is re-read");
        let p10 = s.procs.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(p10.write_bytes, None);
        // It runs again: the 4000 bytes are attributed over the 20 s since the baseline.
        write(t.path(), 10, 105, 'S', 5000);
        let s = tr.sample(&h, 120.0);
        let p10 = s.procs.iter().find(|p| p.pid == 10).unwrap();
        assert_eq!(
            (p10.write_bytes, p10.io_seconds, p10.cpu_ticks),
            (Some(4000), 20.0, Some(5))
        );
        assert_eq!(io_span(p10, 10.0), 20.0);
        let pods = PodDirectory::new(h.clone(), Default::default());
        let c = culprits(&h, &s, 10.0, &LoadConfig::default(), &pods, 0);
        assert_eq!(c.top_io.len(), 1);
        assert_eq!(
            c.top_io[0].write_bytes_per_second, 200.0,
            "4000 bytes over 20 s, not 10"
        );
        assert_eq!(c.top_io[0].cpu_percent, 0.5, "5 ticks (50 ms) over 10 s");
        // Exited pids are dropped.
        std::fs::remove_dir_all(t.path().join("proc/11")).unwrap();
        tr.sample(&h, 130.0);
        assert_eq!(tr.len(), 1);
    }
}
