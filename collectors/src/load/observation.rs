//! The typed window the rules judge: what changed between two samples, already turned into
//! percentages and rates. Tests build these directly.

use std::collections::BTreeMap;

use crate::finding::Severity;
use crate::proc::cgroup::QosClass;
use crate::proc::diskstats::DiskStat;
use crate::proc::loadavg::Loadavg;
use crate::proc::pressure::Pressure;
use crate::proc::stat::CpuTimes;

/// CPU time per mode over a window, in percent of all CPU time (0–100, modes sum to 100).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuPercent {
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub idle: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
}

impl CpuPercent {
    /// The share of each mode between two readings; `None` when no time passed. Counters that
    /// went backwards (iowait does on some NO_HZ kernels) count as zero.
    pub fn between(a: &CpuTimes, b: &CpuTimes) -> Option<CpuPercent> {
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let parts = [
            d(a.user, b.user),
            d(a.nice, b.nice),
            d(a.system, b.system),
            d(a.idle, b.idle),
            d(a.iowait, b.iowait),
            d(a.irq, b.irq),
            d(a.softirq, b.softirq),
            d(a.steal, b.steal),
        ];
        let total: f64 = parts.iter().sum();
        if total <= 0.0 {
            return None;
        }
        let p = |x: f64| x * 100.0 / total;
        Some(CpuPercent {
            user: p(parts[0]),
            nice: p(parts[1]),
            system: p(parts[2]),
            idle: p(parts[3]),
            iowait: p(parts[4]),
            irq: p(parts[5]),
            softirq: p(parts[6]),
            steal: p(parts[7]),
        })
    }

    /// Time spent running code: user + nice + system + irq + softirq.
    pub fn busy(&self) -> f64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    /// The part of [`CpuPercent::busy`] that processes' own CPU times (`utime` + `stime`)
    /// can account for: user + nice + system. Interrupts and softirqs are charged to no
    /// process (with `CONFIG_IRQ_TIME_ACCOUNTING`, as distribution kernels build), not even
    /// to `ksoftirqd`, however many processes are read.
    pub fn in_tasks(&self) -> f64 {
        self.user + self.nice + self.system
    }

    /// (mode label, value) pairs in `top`'s order.
    pub fn modes(&self) -> [(&'static str, f64); 8] {
        [
            ("user", self.user),
            ("nice", self.nice),
            ("system", self.system),
            ("idle", self.idle),
            ("iowait", self.iowait),
            ("irq", self.irq),
            ("softirq", self.softirq),
            ("steal", self.steal),
        ]
    }
}

/// One whole disk over a window: the figures of atop's DSK line and `iostat -dx`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiskRates {
    pub name: String,
    /// Device-mapper name of a `dm-N` device.
    pub dm_name: Option<String>,
    /// Share of the window with at least one request in flight (iostat `%util`, atop `busy`).
    pub busy_percent: f64,
    pub reads_per_second: f64,
    pub writes_per_second: f64,
    pub read_bytes_per_second: f64,
    pub write_bytes_per_second: f64,
    /// Average time a request took, queueing included (iostat `await`), over reads, writes and
    /// discards; 0 when nothing completed.
    pub await_ms: f64,
    pub read_await_ms: f64,
    pub write_await_ms: f64,
    /// Busy time per completed request (atop `avio`, iostat's old `svctm`).
    pub service_ms: f64,
    /// Average number of requests in flight (iostat `aqu-sz`).
    pub queue_size: f64,
}

impl DiskRates {
    /// Rates between two readings of one device `elapsed` seconds apart; `None` when a counter
    /// went backwards (device re-created, 32-bit wrap) or no time passed.
    pub fn between(a: &DiskStat, b: &DiskStat, elapsed: f64) -> Option<DiskRates> {
        if elapsed <= 0.0 {
            return None;
        }
        let d = |x: u64, y: u64| y.checked_sub(x).map(|v| v as f64);
        let od = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (Some(x), Some(y)) => y.checked_sub(x).map(|v| v as f64),
            _ => Some(0.0),
        };
        let reads = d(a.reads, b.reads)?;
        let writes = d(a.writes, b.writes)?;
        let rsec = d(a.sectors_read, b.sectors_read)?;
        let wsec = d(a.sectors_written, b.sectors_written)?;
        let rms = d(a.read_ms, b.read_ms)?;
        let wms = d(a.write_ms, b.write_ms)?;
        let ticks = d(a.io_ticks_ms, b.io_ticks_ms)?;
        let weighted = d(a.weighted_ms, b.weighted_ms)?;
        let discards = od(a.discards, b.discards)?;
        let dms = od(a.discard_ms, b.discard_ms)?;
        let elapsed_ms = elapsed * 1000.0;
        let per = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        let ios = reads + writes + discards;
        Some(DiskRates {
            name: b.name.clone(),
            dm_name: None,
            busy_percent: (ticks * 100.0 / elapsed_ms).min(100.0),
            reads_per_second: reads / elapsed,
            writes_per_second: writes / elapsed,
            read_bytes_per_second: rsec * 512.0 / elapsed,
            write_bytes_per_second: wsec * 512.0 / elapsed,
            await_ms: per(rms + wms + dms, ios),
            read_await_ms: per(rms, reads),
            write_await_ms: per(wms, writes),
            service_ms: per(ticks, ios),
            queue_size: weighted / elapsed_ms,
        })
    }

    /// `sda` or `dm-0 (vg0-data)`.
    pub fn label(&self) -> String {
        match &self.dm_name {
            Some(n) => format!("{} ({n})", self.name),
            None => self.name.clone(),
        }
    }
}

/// PSI readings (absent when the kernel has no PSI).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pressures {
    pub cpu: Option<Pressure>,
    pub io: Option<Pressure>,
    pub memory: Option<Pressure>,
}

/// Where a process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// In a Kubernetes pod; names filled in when the node's metadata has them.
    Pod {
        uid: String,
        qos: QosClass,
        container_id: Option<String>,
        namespace: Option<String>,
        name: Option<String>,
        container: Option<String>,
    },
    /// Directly on the host, not managed by Kubernetes. `infrastructure` marks Kubernetes' own
    /// node components (kubelet, container runtime), which also run there.
    Host {
        cgroup: String,
        infrastructure: bool,
    },
    /// A kernel thread (jbd2, kworker, flush): work the kernel does for some process.
    Kernel,
    /// The cgroup could not be read (the process exited meanwhile).
    Unknown,
}

impl Origin {
    /// `pod`, `host`, `kubernetes-component`, `kernel` or `unknown`.
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Pod { .. } => "pod",
            Origin::Host {
                infrastructure: false,
                ..
            } => "host",
            Origin::Host {
                infrastructure: true,
                ..
            } => "kubernetes-component",
            Origin::Kernel => "kernel",
            Origin::Unknown => "unknown",
        }
    }

    /// True for a user-space process outside Kubernetes and not part of it.
    pub fn is_outside_kubernetes(&self) -> bool {
        matches!(
            self,
            Origin::Host {
                infrastructure: false,
                ..
            }
        )
    }
}

/// A process named as a consumer (of IO or CPU) or as blocked in D state.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    pub pid: u32,
    /// The thread id when a thread (not the main one) is the one in D state.
    pub tid: Option<u32>,
    pub comm: String,
    pub state: char,
    /// CPU used over the window, in percent of one CPU (200 = two full CPUs).
    pub cpu_percent: f64,
    pub read_bytes_per_second: f64,
    pub write_bytes_per_second: f64,
    /// Time its tasks waited for block IO, as iotop's `IO>` column: in percent of the window
    /// (delay accounting), or of the samples that found it in D state (see
    /// [`Observation::io_wait_method`]); 0 when it did not wait or nothing was measured.
    pub io_wait_percent: f64,
    /// The kernel function a D-state task waits in, when readable.
    pub wchan: Option<String>,
    pub origin: Origin,
}

impl Culprit {
    pub fn io_bytes_per_second(&self) -> f64 {
        self.read_bytes_per_second + self.write_bytes_per_second
    }

    /// How the evidence lists (`top_io_processes`, `top_cpu_processes`) name a process:
    /// `mysqld (pid 9783, host process outside Kubernetes, cgroup /system.slice/mysqld.service)`.
    /// A fixed English form that is part of the JSON contract, not advice: the findings' text
    /// describes processes in both languages in `collectors/rules/load.toml`.
    pub fn label(&self) -> String {
        let pid = match self.tid {
            Some(t) => format!("pid {} thread {t}", self.pid),
            None => format!("pid {}", self.pid),
        };
        let where_ = match &self.origin {
            Origin::Pod {
                uid,
                namespace,
                name,
                container,
                ..
            } => match (namespace, name) {
                (Some(ns), Some(n)) => format!(
                    "pod {ns}/{n}{} uid {uid}",
                    container
                        .as_ref()
                        .map(|c| format!(" container {c}"))
                        .unwrap_or_default()
                ),
                _ => format!("pod uid {uid}"),
            },
            Origin::Host {
                cgroup,
                infrastructure: false,
            } => format!("host process outside Kubernetes, cgroup {cgroup}"),
            Origin::Host {
                infrastructure: true,
                ..
            } => "Kubernetes node component on the host".to_string(),
            Origin::Kernel => "kernel thread".to_string(),
            Origin::Unknown => "origin unknown".to_string(),
        };
        format!("{} ({pid}, {where_})", self.comm)
    }
}

/// One judged window.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub elapsed_seconds: f64,
    /// Online CPUs.
    pub cpus: u32,
    pub load: Loadavg,
    /// load1 at the previous sample (for "sustained").
    pub previous_load1: Option<f64>,
    pub procs_running: u64,
    pub procs_blocked: u64,
    pub previous_procs_blocked: Option<u64>,
    /// Overall CPU shares over the window.
    pub cpu: CpuPercent,
    /// The previous window's iowait share (for "sustained").
    pub previous_iowait_percent: Option<f64>,
    pub per_cpu: Vec<(u32, CpuPercent)>,
    pub disks: Vec<DiskRates>,
    pub pressure: Pressures,
    /// Candidates for top IO: the top processes by IO wait (most first, non-zero), then
    /// those of the top by storage bytes read+written not among them. The judge names the
    /// material ones ([`super::judge::material_io`]).
    pub top_io: Vec<Culprit>,
    /// Top processes by CPU time over the window (most first, non-zero).
    pub top_cpu: Vec<Culprit>,
    /// Tasks in D state now.
    pub blocked: Vec<Culprit>,
    /// How `io_wait_percent` was measured.
    pub io_wait_method: IoWaitMethod,
    /// Sums over every process of the window: IO wait (in the unit of the method), storage
    /// bytes per second, CPU percent of one CPU. What a culprit's share is a share of.
    pub total_io_wait_percent: f64,
    pub total_io_bytes_per_second: f64,
    pub total_cpu_percent: f64,
    /// Whether a `kubelet` process runs (`None`: the process list could not be read). The
    /// advice to cordon the node says so when it does not.
    pub kubelet_running: Option<bool>,
    /// Which processes the culprits come from: the tasks of the candidate cgroups (named,
    /// with their IO and CPU), or every process and why (`None`: no process was read).
    pub process_scope: Option<String>,
    /// What the previous window reported: the dead band keeps those findings while their
    /// figures stay above the hold levels ([`super::thresholds::Hold`]).
    pub held: Held,
}

/// The findings one window reported, by rule id and subject, with their severity: what the
/// next window's dead band may keep.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Held(BTreeMap<(String, String), Severity>);

impl Held {
    /// The findings reported, as (id, subject, severity).
    pub fn of<'a>(reported: impl IntoIterator<Item = (&'a str, &'a str, Severity)>) -> Held {
        Held(
            reported
                .into_iter()
                .map(|(id, subject, sev)| ((id.to_string(), subject.to_string()), sev))
                .collect(),
        )
    }

    /// The severity `id` was reported with for `subject`, if it was.
    pub fn severity(&self, id: &str, subject: &str) -> Option<Severity> {
        self.0.get(&(id.to_string(), subject.to_string())).copied()
    }

    pub fn has(&self, id: &str, subject: &str) -> bool {
        self.severity(id, subject).is_some()
    }

    /// Whether `id` was reported, for any subject.
    pub fn any(&self, id: &str) -> bool {
        self.0.keys().any(|(i, _)| i == id)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How a window's IO wait was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoWaitMethod {
    /// Delay accounting: the time each process's tasks spent waiting for block IO.
    DelayAcct,
    /// Delay accounting, and D-state samples for the tasks it does not cover (in D state with
    /// no delay: forked before `kernel.task_delayacct` was turned on).
    DelayAcctAndSampling,
    /// Delay accounting is off (or showed nothing while tasks were in D state): the share of
    /// samples in which each process's tasks were in D state.
    DStateSampling,
    /// No task waited on IO in the window (none in D state, no delay): processes are ranked
    /// by bytes only.
    #[default]
    BytesOnly,
}

impl IoWaitMethod {
    /// `delayacct`, `d_state_sampling` or `bytes_only` (the evidence `io_wait_method`).
    pub fn as_str(self) -> &'static str {
        match self {
            IoWaitMethod::DelayAcct => "delayacct",
            IoWaitMethod::DelayAcctAndSampling => "delayacct_and_d_state_sampling",
            IoWaitMethod::DStateSampling => "d_state_sampling",
            IoWaitMethod::BytesOnly => "bytes_only",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::diskstats;

    #[test]
    fn disk_rates_match_iostat_arithmetic() {
        // Two real readings of vda on Linux 6.18, 10 s apart, with fio writing.
        let a = diskstats::parse_line(" 254 0 vda 11369 5506 2657002 10591 4389 35587 12680472 59747 0 5860 70730 3692 130 44840 390 18 1").unwrap().unwrap();
        let b = diskstats::parse_line(" 254 0 vda 11389 5506 2657162 10611 24389 35587 12840472 79747 1 15760 95730 3692 130 44840 390 18 1").unwrap().unwrap();
        let r = DiskRates::between(&a, &b, 10.0).unwrap();
        assert!((r.busy_percent - 99.0).abs() < 1e-9);
        assert!((r.writes_per_second - 2000.0).abs() < 1e-9);
        assert!((r.reads_per_second - 2.0).abs() < 1e-9);
        assert!((r.write_bytes_per_second - 160000.0 * 512.0 / 10.0).abs() < 1e-6);
        assert!((r.write_await_ms - 1.0).abs() < 1e-9);
        assert!((r.queue_size - 2.5).abs() < 1e-9);
        assert!((r.service_ms - 9900.0 / 20020.0).abs() < 1e-9);
        // Counters going backwards (device re-created): no rates rather than nonsense.
        assert!(DiskRates::between(&b, &a, 10.0).is_none());
        assert!(DiskRates::between(&a, &b, 0.0).is_none());
    }

    #[test]
    fn cpu_percent_sums_to_100() {
        let a = CpuTimes {
            user: 100,
            idle: 800,
            iowait: 100,
            ..Default::default()
        };
        let b = CpuTimes {
            user: 250,
            system: 20,
            idle: 1600,
            iowait: 230,
            ..Default::default()
        };
        let p = CpuPercent::between(&a, &b).unwrap();
        let sum: f64 = p.modes().iter().map(|(_, v)| v).sum();
        assert!((sum - 100.0).abs() < 1e-9);
        assert!((p.iowait - 130.0 * 100.0 / 1100.0).abs() < 1e-9);
        assert!(CpuPercent::between(&a, &a).is_none());
    }
}
