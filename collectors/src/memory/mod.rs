//! The `memory` collector: buddy-allocator fragmentation (`/proc/buddyinfo`), exhaustion
//! (`/proc/meminfo`), compaction activity (`/proc/vmstat`) and page allocation failures from
//! the kernel log (`/dev/kmsg`, through its own [`KmsgReader`]).
//!
//! Handbook 002: the memory fragmentation section, and the ContainerCreating /
//! CrashLoopBackOff pages that list fragmentation among their causes (the words and section
//! titles are in `collectors/rules/memory.toml`).
//!
//! The shape every collector has: `MemoryCollector::sample` reads the host into a typed
//! [`MemorySample`] (the model, in [`sample`]); [`judge::judge`] turns it into drafts under
//! the thresholds of [`MemoryConfig::thresholds`] (the limits, in [`thresholds`]); `collect`
//! renders them in the rule file's words ([`CollectContext::render`]) and adds the metrics of
//! the sample.

pub mod alloc_failure;
pub mod judge;
pub mod sample;
pub mod thresholds;

use std::collections::BTreeMap;
use std::time::Instant;

use crate::collector::{CollectContext, Phases, Status};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::Node;
use crate::proc::{buddyinfo, meminfo, vmstat};
use crate::rules::Draft;

pub use sample::{CompactionDelta, FailureGroup, MemorySample};
pub use thresholds::Thresholds;

/// Orders above this in a log line are garbage (no kernel has more than 2^15-page blocks).
const MAX_FAILURE_ORDER: u32 = 15;
/// Longest task name kept from a log line (the kernel's comm is 16 bytes; runc adds a suffix).
const MAX_COMM_BYTES: usize = 64;
/// `callbacks suppressed` notes of failure reports remembered.
const MAX_SUPPRESSED_NOTES: usize = 64;

/// Configuration of the memory collector.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    pub thresholds: Thresholds,
    /// The kernel-log reader: lookback window (also the window in which allocation failures
    /// make findings critical) and per-cycle bounds.
    pub kmsg: KmsgConfig,
    /// At most this many (task, order) failure groups are remembered; the stalest go first.
    pub max_failure_groups: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            thresholds: Thresholds::default(),
            kmsg: KmsgConfig::default(),
            max_failure_groups: 256,
        }
    }
}

/// Count and last occurrence of page allocation failures of one task at one order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FailureStat {
    count: u64,
    /// Kernel log time (µs since boot) of the last one.
    last_usec: u64,
    mode: Option<String>,
}

/// Samples memory state each cycle and reads new kernel log records.
pub struct MemoryCollector {
    node: Node,
    config: MemoryConfig,
    kmsg: KmsgReader,
    page_size_bytes: u64,
    failures: BTreeMap<(String, u32), FailureStat>,
    /// Failure reports the kernel suppressed (`warn_alloc: N callbacks suppressed`): (record
    /// time, N), at most [`MAX_SUPPRESSED_NOTES`], dropped with the window.
    suppressed: std::collections::VecDeque<(u64, u64)>,
    /// Failures seen since start, by order (a counter for `/metrics`).
    failures_by_order: BTreeMap<u32, u64>,
    previous_compaction: Option<(Instant, u64, u64)>,
}

/// The highest page order the kernel allocates by default (`MAX_PAGE_ORDER`, formerly
/// `MAX_ORDER - 1`): the counter of each order 0 to this is exported from the start.
const MAX_PAGE_ORDER: u32 = 10;

impl MemoryCollector {
    pub fn new(node: Node, config: MemoryConfig) -> Self {
        let page_size_bytes = node.facts().page_size;
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        MemoryCollector {
            node,
            config,
            kmsg,
            page_size_bytes,
            failures: BTreeMap::new(),
            suppressed: std::collections::VecDeque::new(),
            // Every order the kernel allocates (0 to MAX_PAGE_ORDER, 10 on every
            // architecture's default build) at 0 from the start: a panel or a `rate()` sees
            // the counter before the first failure, and counts that failure too.
            failures_by_order: (0..=MAX_PAGE_ORDER).map(|o| (o, 0)).collect(),
            previous_compaction: None,
        }
    }

    /// Reads new kernel log records into the failure groups; returns the reader's status.
    fn read_kernel_log(&mut self) -> Status {
        let batch = self.kmsg.read_new();
        for record in &batch.records {
            if let Some(n) = alloc_failure::parse_suppressed(&record.message) {
                if self.suppressed.len() == MAX_SUPPRESSED_NOTES {
                    self.suppressed.pop_front();
                }
                self.suppressed.push_back((record.usec, n));
                continue;
            }
            let Some(f) = alloc_failure::parse(&record.message) else {
                continue;
            };
            if f.order > MAX_FAILURE_ORDER {
                continue;
            }
            let comm = crate::bounded::prefix_owned(&f.comm, MAX_COMM_BYTES);
            *self.failures_by_order.entry(f.order).or_insert(0) += 1;
            let stat = self
                .failures
                .entry((comm, f.order))
                .or_insert_with_key(|(comm, order)| {
                    // Logged once per (task, order) in the window, not per record: floods
                    // stay quiet.
                    tracing::info!(comm = %comm, order = *order, mode = ?f.mode, "kernel reported a page allocation failure");
                    FailureStat {
                        count: 0,
                        last_usec: record.usec,
                        mode: None,
                    }
                });
            stat.count += 1;
            stat.last_usec = stat.last_usec.max(record.usec);
            stat.mode = f.mode;
        }
        self.prune_failures();
        batch.status
    }

    /// Drops groups older than the lookback window, then the stalest beyond the cap.
    fn prune_failures(&mut self) {
        let lookback = self.config.kmsg.lookback;
        if let Some(clock) = self.kmsg.clock() {
            self.failures
                .retain(|_, s| clock.age(s.last_usec) <= lookback);
            self.suppressed
                .retain(|(usec, _)| clock.age(*usec) <= lookback);
        }
        while self.failures.len() > self.config.max_failure_groups {
            let stalest = self
                .failures
                .iter()
                .min_by_key(|(_, s)| s.last_usec)
                .map(|(k, _)| k.clone());
            match stalest {
                Some(k) => {
                    self.failures.remove(&k);
                }
                None => break,
            }
        }
    }

    fn failure_groups(&self) -> Vec<FailureGroup> {
        let clock = self.kmsg.clock();
        self.failures
            .iter()
            .map(|((comm, order), s)| FailureGroup {
                comm: comm.clone(),
                order: *order,
                count: s.count,
                last_seen_seconds_ago: clock.map(|c| c.age(s.last_usec).as_secs()),
                mode: s.mode.clone(),
            })
            .collect()
    }

    fn compaction(&mut self, vm: &vmstat::Vmstat) -> Option<CompactionDelta> {
        let (stall, fail) = (vm.get("compact_stall")?, vm.get("compact_fail")?);
        let now = Instant::now();
        let previous = self.previous_compaction.replace((now, stall, fail));
        let (then, s0, f0) = previous?;
        Some(CompactionDelta {
            stall: stall.saturating_sub(s0),
            fail: fail.saturating_sub(f0),
            interval_seconds: now.duration_since(then).as_secs_f64(),
        })
    }
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for MemoryCollector {
    const NAME: &'static str = "memory";
    type Sample = MemorySample;

    /// Reads everything the rules look at; the status says what could not be read.
    fn sample(&mut self, _ctx: &CollectContext) -> Result<(MemorySample, Status), Status> {
        let mut status = Status::Ok;
        let zones = match buddyinfo::read(self.node.host()) {
            Ok(b) => b.zones,
            Err(e) => {
                status = status.worst(Status::Degraded(format!(
                    "{e}; fragmentation is not judged"
                )));
                Vec::new()
            }
        };
        let mem = match meminfo::read(self.node.host()) {
            Ok(m) => Some(m),
            Err(e) => {
                status = status.worst(Status::Degraded(format!("{e}; exhaustion is not judged")));
                None
            }
        };
        let compaction = match vmstat::read(self.node.host()) {
            Ok(vm) => self.compaction(&vm),
            Err(_) => None,
        };
        let kmsg_status = self.read_kernel_log();
        let kmsg_ok = kmsg_status == Status::Ok;
        status = status.worst(kmsg_status);
        // Nothing to judge at all: say so as `unavailable`, not `degraded`.
        if zones.is_empty() && mem.is_none() && !kmsg_ok {
            if let Status::Degraded(why) = status {
                status = Status::Unavailable(format!("no memory source is readable: {why}"));
            }
        }
        let sample = MemorySample {
            zones,
            page_size_bytes: self.page_size_bytes,
            mem_total_bytes: mem.as_ref().and_then(|m| m.mem_total_bytes()),
            mem_available_bytes: mem.as_ref().and_then(|m| m.mem_available_bytes()),
            compaction,
            failures: self.failure_groups(),
            suppressed_failures: self
                .suppressed
                .iter()
                .fold(0, |acc: u64, (_, n)| acc.saturating_add(*n)),
            lookback_seconds: self.config.kmsg.lookback.as_secs(),
        };
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &MemorySample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    /// The metrics of a sample, plus the failure counters and the kernel-log reader's.
    fn metrics(&self, sample: &MemorySample) -> Vec<Metric> {
        let mut metrics = Vec::new();
        let k = self.config.thresholds.fragmentation_order;
        for z in &sample.zones {
            let node = z.node.to_string();
            for (order, n) in z.blocks.iter().enumerate() {
                metrics.push(
                    Metric::gauge(
                        "node_doctor_memory_buddyinfo_blocks",
                        "Free blocks of 2^size pages per NUMA node and zone (/proc/buddyinfo).",
                        *n as f64,
                    )
                    .label("node", node.clone())
                    .label("zone", z.zone.clone())
                    .label("size", order.to_string()),
                );
            }
            metrics.push(
                Metric::gauge(
                    "node_doctor_memory_highest_free_order",
                    "Highest order with a free block per NUMA node and zone; -1 when the zone has none.",
                    z.highest_free_order().map_or(-1.0, |o| o as f64),
                )
                .label("node", node.clone())
                .label("zone", z.zone.clone()),
            );
            metrics.push(
                Metric::gauge(
                    "node_doctor_memory_unusable_index",
                    "Share (0-1) of a zone's free memory in blocks too small for an order-4 request (kernel extfrag unusable index).",
                    z.unusable_index(k),
                )
                .label("node", node)
                .label("zone", z.zone.clone()),
            );
        }
        for (order, n) in &self.failures_by_order {
            metrics.push(
                Metric::counter(
                    "node_doctor_memory_page_alloc_failures_total",
                    "Page allocation failures read from the kernel log by this agent (including its start-up lookback), by order.",
                    *n as f64,
                )
                .label("order", order.to_string()),
            );
        }
        if let Some(a) = sample.mem_available_bytes {
            metrics.push(Metric::gauge(
                "node_doctor_memory_available_bytes",
                "MemAvailable from /proc/meminfo.",
                a as f64,
            ));
        }
        metrics.extend(self.kmsg.metrics("memory"));
        metrics
    }
}
