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
    io: Option<(u64, u64)>,
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
}

/// Everything one pass over `/proc` found.
#[derive(Debug, Default)]
pub struct ProcSample {
    pub procs: Vec<ProcDelta>,
    /// Processes whose `io` file was refused (not root).
    pub io_denied: usize,
    /// Why `/proc` could not be listed.
    pub list_error: Option<String>,
}

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

    /// Reads every live process once; keeps only their counters for the next run.
    pub fn sample(&mut self, host: &HostPaths) -> ProcSample {
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
        for p in pids {
            // A pid that vanished since the listing is simply absent.
            let Some(st) = pid::stat(host, p) else {
                continue;
            };
            let io = match pid_io::read(host, p) {
                Ok(io) => Some((io.read_bytes, io.write_bytes)),
                Err(pid_io::IoReadFailure::Denied) => {
                    out.io_denied += 1;
                    None
                }
                Err(_) => None,
            };
            let ticks = st.utime.saturating_add(st.stime);
            let before = self.prev.get(&p).filter(|b| b.starttime == st.starttime);
            let (cpu_ticks, read_bytes, write_bytes) = match before {
                Some(b) => {
                    let (r, w) = match (b.io, io) {
                        (Some((r0, w0)), Some((r1, w1))) => {
                            (Some(r1.saturating_sub(r0)), Some(w1.saturating_sub(w0)))
                        }
                        _ => (None, None),
                    };
                    (Some(ticks.saturating_sub(b.cpu_ticks)), r, w)
                }
                None => (None, None, None),
            };
            next.insert(
                p,
                Prev {
                    starttime: st.starttime,
                    cpu_ticks: ticks,
                    io,
                },
            );
            out.procs.push(ProcDelta {
                pid: p,
                ppid: st.ppid,
                comm: st.comm,
                state: st.state,
                num_threads: st.num_threads,
                cpu_ticks,
                read_bytes,
                write_bytes,
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
                read_bytes_per_second: d.read_bytes.unwrap_or(0) as f64 / elapsed,
                write_bytes_per_second: d.write_bytes.unwrap_or(0) as f64 / elapsed,
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

fn origin_of(host: &HostPaths, d: &ProcDelta, config: &LoadConfig, pods: &PodDirectory) -> Origin {
    // Kernel threads are children of kthreadd (pid 2), or kthreadd itself.
    if d.pid == 2 || (d.ppid == 2 && d.pid != 1) {
        return Origin::Kernel;
    }
    match cgroup::read(host, d.pid) {
        Some(Placement::Pod(p)) => {
            let meta = pods.pod(&p.uid);
            let container = p
                .container_id
                .as_deref()
                .and_then(|id| pods.container(id))
                .map(|c| c.container.clone());
            Origin::Pod {
                namespace: meta.map(|m| m.namespace.clone()),
                name: meta.map(|m| m.name.clone()),
                uid: p.uid,
                qos: p.qos,
                container_id: p.container_id,
                container,
            }
        }
        Some(Placement::Host { cgroup }) => Origin::Host {
            infrastructure: config.infrastructure_processes.contains(&d.comm),
            cgroup,
        },
        None => Origin::Unknown,
    }
}
