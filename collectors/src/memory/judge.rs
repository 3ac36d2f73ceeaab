//! The memory rules: a typed [`MemorySample`] (from [`sample`](super::sample)) -> drafts (id,
//! severity, subject, evidence, conditions) under the [`Thresholds`] of
//! [`thresholds`](super::thresholds). Their words, from the handbook's memory fragmentation
//! section and the ContainerCreating / CrashLoopBackOff pages that point to it, are in
//! `collectors/rules/memory.toml`. Pure: testable without files.

use crate::finding::Severity;
use crate::kmsg::decay::Phase;
use crate::proc::buddyinfo::ZoneFree;
use crate::rules::Draft;

use super::sample::MemorySample;
use super::thresholds::Thresholds;

/// Zones whose free blocks serve ordinary kernel and user allocations. `DMA` (the first
/// 16 MiB) is left out: it is reserved for old devices and always looks fragmented.
const GENERAL_ZONES: &[&str] = &["Normal", "DMA32", "Movable", "HighMem"];

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
mod tests;
