//! The memory rules: typed sample -> drafts (id, severity, subject, evidence, conditions).
//! Their words, from the handbook's memory fragmentation section and the ContainerCreating /
//! CrashLoopBackOff pages that point to it, are in `collectors/rules/memory.toml`.
//! Pure: testable without files.

use crate::finding::Severity;
use crate::kmsg::decay::{self, Phase};
use crate::proc::buddyinfo::ZoneFree;
use crate::rules::Draft;

/// Zones whose free blocks serve ordinary kernel and user allocations. `DMA` (the first
/// 16 MiB) is left out: it is reserved for old devices and always looks fragmented.
const GENERAL_ZONES: &[&str] = &["Normal", "DMA32", "Movable", "HighMem"];

/// Thresholds of the memory rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// The order a "large block" starts at: 4 = 16 contiguous pages (the handbook's example).
    pub fragmentation_order: usize,
    /// A NUMA node is fragmented when at least this share (percent) of its free memory sits in
    /// blocks smaller than `fragmentation_order` (100 = no large block at all).
    pub fragmentation_unusable_percent: f64,
    /// ... and only when it has at least this much free memory; below it, memory is short,
    /// not fragmented.
    pub fragmentation_min_free_bytes: u64,
    /// Memory is exhausted when MemAvailable is below this share of MemTotal (percent).
    pub exhaustion_available_percent: f64,
    /// A page allocation failure at most this old (seconds) whose condition is not true now
    /// is a warning; older ones are history (info).
    pub recent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            fragmentation_order: 4,
            fragmentation_unusable_percent: 99.0,
            fragmentation_min_free_bytes: 16 << 20,
            exhaustion_available_percent: 5.0,
            recent_seconds: decay::DEFAULT_RECENT_SECONDS,
        }
    }
}

/// Compaction activity between two samples (`/proc/vmstat`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionDelta {
    /// Direct compaction stalls (an allocating task had to compact memory itself).
    pub stall: u64,
    /// Compactions that failed to produce the block asked for.
    pub fail: u64,
    pub interval_seconds: f64,
}

/// Page allocation failures of one task at one order within the lookback window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    pub comm: String,
    pub order: u32,
    pub count: u64,
    /// Seconds since the last one (`None` when `/proc/uptime` could not be read).
    pub last_seen_seconds_ago: Option<u64>,
    pub mode: Option<String>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySample {
    pub zones: Vec<ZoneFree>,
    pub page_size_bytes: u64,
    pub mem_total_bytes: Option<u64>,
    pub mem_available_bytes: Option<u64>,
    pub compaction: Option<CompactionDelta>,
    /// Failures within the lookback window.
    pub failures: Vec<FailureGroup>,
    /// Failure reports the kernel rate-limited within the window (`warn_alloc: N callbacks
    /// suppressed`): failures that happened but are not in `failures`.
    pub suppressed_failures: u64,
    pub lookback_seconds: u64,
}

/// Applies all memory rules: the findings, without words (`collectors/rules/memory.toml`
/// holds them).
pub fn judge(sample: &MemorySample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    let exhausted = exhaustion(sample, t);
    // With memory truly short, missing large blocks are a symptom, not fragmentation.
    match exhausted {
        Some(d) => out.push(d),
        None => out.extend(fragmentation(sample, t)),
    }
    out.extend(allocation_failures(sample, t));
    out
}

/// Per NUMA node, the highest order with a free block in its general zones (`None`: no free
/// block at all); the smallest of those over the nodes, and whether any node lacks a block of
/// `order` or more. `None` when buddyinfo gave nothing.
fn largest_free_order_now(sample: &MemorySample, order: u32) -> Option<(Option<usize>, bool)> {
    let mut nodes: Vec<u32> = sample.zones.iter().map(|z| z.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let per_node: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| {
            sample
                .zones
                .iter()
                .filter(|z| z.node == *n && GENERAL_ZONES.contains(&z.zone.as_str()))
                .filter_map(|z| z.highest_free_order())
                .max()
        })
        .collect();
    if per_node.is_empty() {
        return None;
    }
    let smallest = per_node.iter().min().copied().flatten();
    let lacking = per_node
        .iter()
        .any(|o| o.is_none_or(|o| (o as u64) < u64::from(order)));
    Some((smallest, lacking))
}

fn order0_failures(sample: &MemorySample) -> u64 {
    sample
        .failures
        .iter()
        .filter(|g| g.order == 0)
        .map(|g| g.count)
        .sum()
}

fn high_order_failures(sample: &MemorySample) -> u64 {
    sample
        .failures
        .iter()
        .filter(|g| g.order >= 1)
        .map(|g| g.count)
        .sum()
}

/// `memory.exhaustion`: MemAvailable below its threshold share of MemTotal.
fn exhaustion(sample: &MemorySample, t: &Thresholds) -> Option<Draft> {
    let total = sample.mem_total_bytes.filter(|t| *t > 0)?;
    let available = sample.mem_available_bytes?;
    let percent = available as f64 * 100.0 / total as f64;
    if percent >= t.exhaustion_available_percent {
        return None;
    }
    let order0 = order0_failures(sample);
    let free_pages: u64 = sample
        .zones
        .iter()
        .map(|z| z.free_pages())
        .fold(0, u64::saturating_add);
    Some(
        Draft::new("memory.exhaustion", Severity::Critical)
            .evidence("mem_available_bytes", available)
            .evidence("mem_total_bytes", total)
            .evidence("available_percent", percent)
            .evidence("threshold_percent", t.exhaustion_available_percent)
            .evidence(
                "buddy_free_bytes",
                free_pages.saturating_mul(sample.page_size_bytes),
            )
            .evidence("order0_allocation_failures", order0)
            .when_if("order0_failures", order0 > 0),
    )
}

/// `memory.fragmentation`: per NUMA node, free memory is substantial but (nearly) none of it
/// is in blocks of `fragmentation_order` or larger.
fn fragmentation(sample: &MemorySample, t: &Thresholds) -> Vec<Draft> {
    let mut nodes: Vec<u32> = sample.zones.iter().map(|z| z.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let k = t.fragmentation_order;
    let high = high_order_failures(sample);
    let mut out = Vec::new();
    for node in nodes {
        let zones: Vec<&ZoneFree> = sample
            .zones
            .iter()
            .filter(|z| z.node == node && GENERAL_ZONES.contains(&z.zone.as_str()))
            .collect();
        let free: u64 = zones
            .iter()
            .map(|z| z.free_pages())
            .fold(0, u64::saturating_add);
        let large: u64 = zones
            .iter()
            .map(|z| z.free_pages_at_or_above(k))
            .fold(0, u64::saturating_add);
        let free_bytes = free.saturating_mul(sample.page_size_bytes);
        if free == 0 || free_bytes < t.fragmentation_min_free_bytes {
            continue;
        }
        let unusable = (free - large.min(free)) as f64 * 100.0 / free as f64;
        if unusable < t.fragmentation_unusable_percent {
            continue;
        }
        let highest: Vec<String> = zones
            .iter()
            .map(|z| match z.highest_free_order() {
                Some(o) => format!("{}={o}", z.zone),
                None => format!("{}=none", z.zone),
            })
            .collect();
        let severity = if high > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let mut d = Draft::new("memory.fragmentation", severity)
            .subject(format!("node{node}"))
            .evidence("free_bytes", free_bytes)
            .evidence(
                "large_block_free_bytes",
                large.saturating_mul(sample.page_size_bytes),
            )
            .evidence("large_block_order", k)
            .evidence("unusable_free_percent", unusable)
            .evidence("threshold_percent", t.fragmentation_unusable_percent)
            .evidence("highest_free_order", highest.join(", "))
            .evidence("high_order_allocation_failures", high)
            .var("numa_node", node)
            .var("block_pages", 1u64 << k.min(32))
            .var("block_kib", (sample.page_size_bytes << k.min(32)) / 1024)
            .var("lookback_seconds", sample.lookback_seconds)
            .when_if("high_order_failures", high > 0);
        for z in &zones {
            d = d.evidence(
                &format!("free_blocks_{}", z.zone.to_ascii_lowercase()),
                z.blocks
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        if let Some(c) = sample.compaction {
            d = d
                .evidence("compact_stall_delta", c.stall)
                .evidence("compact_fail_delta", c.fail)
                .evidence("compaction_interval_seconds", c.interval_seconds);
        }
        out.push(d);
    }
    out
}

/// `memory.page_allocation_failure`: the kernel log shows page allocation failures within
/// the lookback window.
///
/// Still true now: for failures above order 0, some NUMA node has no free block of the
/// largest failed order or more (buddyinfo now); for order-0 failures, memory is exhausted
/// now (MemAvailable below `exhaustion_available_percent`). Critical while still true;
/// otherwise a warning while the last failure is at most `recent_seconds` old, then info
/// until it leaves the window.
fn allocation_failures(sample: &MemorySample, t: &Thresholds) -> Option<Draft> {
    if sample.failures.is_empty() {
        return None;
    }
    let mut groups = sample.failures.clone();
    groups.sort_by(|a, b| a.comm.cmp(&b.comm).then(a.order.cmp(&b.order)));
    let total: u64 = groups.iter().map(|g| g.count).sum();
    let max_order = groups.iter().map(|g| g.order).max().unwrap_or(0);
    let order0 = order0_failures(sample);
    let high = high_order_failures(sample);
    let listed = groups
        .iter()
        .map(|g| format!("{} order {} x{}", g.comm, g.order, g.count))
        .collect::<Vec<_>>()
        .join(", ");
    let mut runtimes: Vec<&str> = groups
        .iter()
        .filter(|g| super::alloc_failure::is_container_runtime(&g.comm))
        .map(|g| g.comm.as_str())
        .collect();
    runtimes.dedup();
    let last_ago = groups.iter().filter_map(|g| g.last_seen_seconds_ago).min();
    // What the host shows now.
    let buddy = largest_free_order_now(sample, max_order);
    let fragmented_now = if high > 0 {
        buddy.map(|(_, lacking)| lacking)
    } else {
        None
    };
    let available_percent = match (sample.mem_available_bytes, sample.mem_total_bytes) {
        (Some(a), Some(total)) if total > 0 => Some(a as f64 * 100.0 / total as f64),
        _ => None,
    };
    let exhausted_now = if order0 > 0 {
        available_percent.map(|p| p < t.exhaustion_available_percent)
    } else {
        None
    };
    let still_true = match (fragmented_now, exhausted_now) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (None, None) => None,
        _ => Some(false),
    };
    let phase = Phase::of(still_true, last_ago, t.recent_seconds);
    let severity = match phase {
        Phase::Ongoing => Severity::Critical,
        Phase::Recent => Severity::Warning,
        Phase::Past => Severity::Info,
    };
    let mut d = Draft::new("memory.page_allocation_failure", severity)
        .evidence("failures_in_window", total)
        .evidence("max_order", max_order)
        .evidence("order0_failures", order0)
        .evidence("high_order_failures", high)
        .evidence("tasks", listed)
        .evidence("lookback_seconds", sample.lookback_seconds)
        .evidence("phase", phase.as_str())
        .evidence_opt("last_failure_seconds_ago", last_ago)
        .evidence_opt(
            "largest_free_order_now",
            buddy.and_then(|(o, _)| o).map(|o| o as u64),
        )
        .evidence_opt(
            "mem_available_percent_now",
            available_percent.filter(|_| order0 > 0),
        )
        .evidence_opt(
            "suppressed_failures",
            (sample.suppressed_failures > 0).then_some(sample.suppressed_failures),
        )
        .var("recent_seconds", t.recent_seconds)
        .var("exhaustion_percent", t.exhaustion_available_percent)
        .when(phase.as_str())
        .when_if("fragmented_now", fragmented_now == Some(true))
        .when_if("exhausted_now", exhausted_now == Some(true))
        .when_if("no_free_block_now", buddy.is_some_and(|(o, _)| o.is_none()))
        .when_if("high_order_failures", high > 0)
        .when_if("order0_failures", order0 > 0);
    if !runtimes.is_empty() {
        d = d
            .evidence("container_runtime_tasks", runtimes.join(", "))
            .words("runtimes", &runtimes)
            .when("runtime_failures");
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::see_also;
    use crate::finding::Finding;

    /// The drafts of the default thresholds, in the built-in words.
    fn findings(s: &MemorySample, node: &str) -> Vec<Finding> {
        let rules = crate::rules::RuleBook::builtin();
        judge(s, &Thresholds::default())
            .into_iter()
            .map(|d| rules.render(d, node))
            .collect()
    }

    fn zone(node: u32, name: &str, blocks: &[u64]) -> ZoneFree {
        ZoneFree {
            node,
            zone: name.into(),
            blocks: blocks.to_vec(),
        }
    }

    fn sample(zones: Vec<ZoneFree>) -> MemorySample {
        MemorySample {
            zones,
            page_size_bytes: 4096,
            mem_total_bytes: Some(8 << 30),
            mem_available_bytes: Some(4 << 30),
            compaction: None,
            failures: Vec::new(),
            suppressed_failures: 0,
            lookback_seconds: 3600,
        }
    }

    #[test]
    fn handbook_buddyinfo_is_fragmented_per_numa_node() {
        let s = sample(vec![
            zone(0, "DMA", &[1, 0, 1, 0, 2, 1, 1, 0, 1, 1, 3]),
            zone(0, "DMA32", &[2725, 624, 489, 178, 0, 0, 0, 0, 0, 0, 0]),
            zone(0, "Normal", &[1163, 1101, 932, 222, 0, 0, 0, 0, 0, 0, 0]),
        ]);
        let f = findings(&s, "node-1");
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(
            (f.id.as_str(), f.severity, f.subject.as_str()),
            ("memory.fragmentation", Severity::Warning, "node0")
        );
        let pages = (2725 + 624 * 2 + 489 * 4 + 178 * 8) + (1163 + 1101 * 2 + 932 * 4 + 222 * 8);
        assert_eq!(
            f.evidence["free_bytes"].as_f64(),
            Some((pages * 4096) as f64)
        );
        assert_eq!(f.evidence["unusable_free_percent"].as_f64(), Some(100.0));
        assert_eq!(
            f.evidence["highest_free_order"].as_str(),
            Some("DMA32=3, Normal=3")
        );
    }

    #[test]
    fn large_blocks_in_one_zone_are_not_fragmentation() {
        // DMA32 fragmented but Normal has plenty of order-10 blocks: allocations succeed.
        let s = sample(vec![
            zone(0, "DMA32", &[2725, 624, 489, 178, 0, 0, 0, 0, 0, 0, 0]),
            zone(0, "Normal", &[1163, 1101, 932, 222, 10, 0, 0, 0, 0, 0, 100]),
        ]);
        assert!(findings(&s, "n").is_empty());
    }

    #[test]
    fn little_free_memory_is_not_fragmentation() {
        // 100 order-0 pages: 400 KiB free, below the 16 MiB floor.
        let s = sample(vec![zone(
            0,
            "Normal",
            &[100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )]);
        assert!(findings(&s, "n").is_empty());
    }

    #[test]
    fn exhaustion_wins_over_fragmentation() {
        let mut s = sample(vec![zone(
            0,
            "Normal",
            &[9000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )]);
        s.mem_available_bytes = Some(100 << 20);
        let f = findings(&s, "n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "memory.exhaustion");
    }

    #[test]
    fn failures_group_and_flag_the_runtime() {
        // Little free memory, none of it above order 3: the order-6 failure still holds.
        let mut s = sample(vec![zone(
            0,
            "Normal",
            &[1000, 500, 100, 10, 0, 0, 0, 0, 0, 0, 0],
        )]);
        s.failures = vec![
            FailureGroup {
                comm: "runc:[1:CHILD]".into(),
                order: 6,
                count: 2,
                last_seen_seconds_ago: Some(30),
                mode: None,
            },
            FailureGroup {
                comm: "kworker/0:1".into(),
                order: 0,
                count: 1,
                last_seen_seconds_ago: Some(90),
                mode: None,
            },
        ];
        let f = findings(&s, "node-7");
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.evidence["failures_in_window"].as_f64(), Some(3.0));
        assert_eq!(f.evidence["order0_failures"].as_f64(), Some(1.0));
        assert_eq!(f.evidence["last_failure_seconds_ago"].as_f64(), Some(30.0));
        assert_eq!(
            f.evidence["tasks"].as_str(),
            Some("kworker/0:1 order 0 x1, runc:[1:CHILD] order 6 x2")
        );
        assert!(f
            .remediation
            .commands
            .iter()
            .any(|c| c.contains("spec.nodeName=node-7")));
        assert!(f.summary.en.contains("ContainerCreating"));
        assert_eq!(
            f.see_also,
            vec![see_also::MEMORY_FRAGMENTATION, see_also::CONTAINER_CREATING]
        );
        assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
        assert_eq!(f.evidence["largest_free_order_now"].as_f64(), Some(3.0));
        assert!(
            f.summary
                .en
                .contains("Still true now: the largest free block on the worst NUMA node is order 3, below the order 6 that failed"),
            "{}",
            f.summary.en
        );
    }

    fn failure(order: u32, ago: u64) -> FailureGroup {
        FailureGroup {
            comm: "runc:[1:CHILD]".into(),
            order,
            count: 1,
            last_seen_seconds_ago: Some(ago),
            mode: None,
        }
    }

    /// An order-6 failure: critical while no order-6 block is free on some NUMA node, however
    /// old; with large blocks free again, a warning while recent and information after.
    #[test]
    fn a_page_allocation_failure_decays_when_large_blocks_are_back() {
        let healthy = zone(
            0,
            "Normal",
            &[2431, 1434, 901, 1074, 574, 355, 392, 249, 135, 112, 1490],
        );
        let fragmented = zone(0, "Normal", &[1163, 1101, 932, 222, 0, 0, 0, 0, 0, 0, 0]);
        let judge_one = |z: ZoneFree, ago: u64| {
            let mut s = sample(vec![z]);
            s.failures = vec![failure(6, ago)];
            findings(&s, "n")
                .into_iter()
                .find(|f| f.id == "memory.page_allocation_failure")
                .unwrap()
        };
        let f = judge_one(healthy.clone(), 3480);
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.evidence["phase"].as_str(), Some("past"));
        assert_eq!(f.evidence["largest_free_order_now"].as_f64(), Some(10.0));
        assert!(
            f.summary.en.contains("the last 3480 s ago. Not true now: blocks of order 10 are free on every NUMA node; no failure in the last 15 min: history"),
            "{}",
            f.summary.en
        );
        assert_eq!(judge_one(healthy, 300).severity, Severity::Warning);
        let f = judge_one(fragmented.clone(), 3480);
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.evidence["largest_free_order_now"].as_f64(), Some(3.0));
        // A second NUMA node with large blocks does not help the fragmented one.
        let mut s = sample(vec![
            fragmented,
            zone(1, "Normal", &[10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 500]),
        ]);
        s.failures = vec![failure(6, 3480)];
        let f = &findings(&s, "n")[..];
        let f = f
            .iter()
            .find(|f| f.id == "memory.page_allocation_failure")
            .unwrap();
        assert_eq!(f.severity, Severity::Critical);
        // Without buddyinfo nothing confirms it now: it decays by age.
        let mut s = sample(vec![]);
        s.failures = vec![failure(6, 3480)];
        assert_eq!(findings(&s, "n")[0].severity, Severity::Info);
    }

    /// Order-0 failures are still true while memory is exhausted now.
    #[test]
    fn an_order0_failure_is_critical_while_memory_is_exhausted() {
        let mut s = sample(vec![]);
        s.failures = vec![failure(0, 3000)];
        let f = findings(&s, "n");
        let f = f
            .iter()
            .find(|f| f.id == "memory.page_allocation_failure")
            .unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.evidence["mem_available_percent_now"].as_f64(), Some(50.0));
        s.mem_available_bytes = Some(100 << 20);
        let f = findings(&s, "n");
        let f = f
            .iter()
            .find(|f| f.id == "memory.page_allocation_failure")
            .unwrap();
        assert_eq!(f.severity, Severity::Critical);
        assert!(
            f.summary
                .en
                .contains("Still true now: MemAvailable is 1.2% of MemTotal, below 5%"),
            "{}",
            f.summary.en
        );
    }
}
