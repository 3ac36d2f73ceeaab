//! The memory rules: typed sample -> findings, with their remediation (handbook
//! 节点内存碎片化排障处理, and the ContainerCreating / CrashLoopBackOff pages that point to it).
//! Pure: testable without files.

use crate::cmd;
use crate::explain::see_also;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::proc::buddyinfo::ZoneFree;

const SECTION_FRAGMENTATION: &str = "节点内存碎片化排障处理";
const SECTION_CRASHLOOP: &str = "Pod 处于 CrashLoopBackOff 状态";

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
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            fragmentation_order: 4,
            fragmentation_unusable_percent: 99.0,
            fragmentation_min_free_bytes: 16 << 20,
            exhaustion_available_percent: 5.0,
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
    pub lookback_seconds: u64,
}

/// Applies all memory rules.
pub fn judge(sample: &MemorySample, t: &Thresholds, node_name: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let exhausted = exhaustion(sample, t);
    if let Some(f) = exhausted.clone() {
        out.push(f);
    }
    // With memory truly short, missing large blocks are a symptom, not fragmentation.
    if exhausted.is_none() {
        out.extend(fragmentation(sample, t));
    }
    if let Some(f) = allocation_failures(sample, node_name) {
        out.push(f);
    }
    out
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
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
fn exhaustion(sample: &MemorySample, t: &Thresholds) -> Option<Finding> {
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
    let summary = Text::new(
        format!(
            "Only {:.0} MiB of {:.0} MiB is available ({percent:.1}%, below the {}% threshold){}: memory is exhausted, not fragmented, and the kernel will OOM-kill processes.",
            mib(available),
            mib(total),
            t.exhaustion_available_percent,
            if order0 > 0 { format!(" and {order0} order-0 page allocations failed") } else { String::new() }
        ),
        format!(
            "可用内存仅 {:.0} MiB / {:.0} MiB（{percent:.1}%，低于阈值 {}%）{}：这是内存真正耗尽而非碎片化，内核将触发 OOM 杀进程。",
            mib(available),
            mib(total),
            t.exhaustion_available_percent,
            if order0 > 0 { format!("，且有 {order0} 次 order-0 页分配失败") } else { String::new() }
        ),
    );
    Some(
        Finding::new(
            "memory.exhaustion",
            Severity::Critical,
            Text::new("Node memory is exhausted", "节点内存耗尽"),
            summary,
        )
        .evidence("mem_available_bytes", available)
        .evidence("mem_total_bytes", total)
        .evidence("available_percent", percent)
        .evidence("threshold_percent", t.exhaustion_available_percent)
        .evidence("buddy_free_bytes", free_pages.saturating_mul(sample.page_size_bytes))
        .evidence("order0_allocation_failures", order0)
        .step(Text::new(
            "Find what holds the memory: the largest processes, and whether they run outside Kubernetes (kubelet, dockerd, agents) where pod limits do not bound them.",
            "找出占用内存的进程：按常驻内存排序，并确认它们是否是 Kubernetes 之外的进程（kubelet、dockerd、各类 agent），这类进程不受 Pod limit 约束。",
        ))
        .step(Text::new(
            "If processes outside pods need more than kubelet reserves for them, raise --kube-reserved / --system-reserved so the scheduler stops packing pods into that memory.",
            "如果节点上非容器进程的用量超过了 kubelet 为其预留的量，应调大 --kube-reserved / --system-reserved，让调度器不再把这部分内存分给 Pod。",
        ))
        .step(Text::new(
            "Dropping caches or compacting memory will not help here: the memory is in use, not scattered.",
            "此时清理缓存或内存整理都无济于事：内存是被真正占用了，而不是被打散。",
        ))
        .command("grep -E 'MemTotal|MemAvailable|MemFree|^Cached' /proc/meminfo")
        .command("ps -eo pid,comm,rss --sort=-rss | head -n 15")
        .command("cat /sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/kubepods.slice/memory.max")
        .source(HANDBOOK, SECTION_CRASHLOOP)
        // Processes the OOM killer ends exit with 137; their pods go to CrashLoopBackOff.
        .see_also(see_also::OOM_SYSTEM)
        .see_also(see_also::OOM_KILLED)
        .see_also(see_also::CRASH_LOOP),
    )
}

/// `memory.fragmentation`: per NUMA node, free memory is substantial but (nearly) none of it
/// is in blocks of `fragmentation_order` or larger.
fn fragmentation(sample: &MemorySample, t: &Thresholds) -> Vec<Finding> {
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
        let highest = highest.join(", ");
        let block_kib = (sample.page_size_bytes << k.min(32)) / 1024;
        let severity = if high > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let failures_en = if high > 0 {
            format!(
                " {high} high-order page allocations failed in the last {}s.",
                sample.lookback_seconds
            )
        } else {
            String::new()
        };
        let failures_zh = if high > 0 {
            format!(
                "最近 {}s 内已有 {high} 次高阶页分配失败。",
                sample.lookback_seconds
            )
        } else {
            String::new()
        };
        let mut f = Finding::new(
            "memory.fragmentation",
            severity,
            Text::new("Node memory is fragmented", "节点内存碎片化"),
            Text::new(
                format!(
                    "NUMA node {node} has {:.1} MiB free but {unusable:.1}% of it is in blocks smaller than order {k} ({} contiguous pages, {block_kib} KiB; threshold {}%); highest free order per zone: {highest}.{failures_en}",
                    mib(free_bytes),
                    1u64 << k.min(32),
                    t.fragmentation_unusable_percent
                ),
                format!(
                    "NUMA 节点 {node} 空闲 {:.1} MiB，但其中 {unusable:.1}% 位于小于 order {k}（{} 个连续页，{block_kib} KiB；阈值 {}%）的块中；各 zone 最高空闲阶：{highest}。{failures_zh}",
                    mib(free_bytes),
                    1u64 << k.min(32),
                    t.fragmentation_unusable_percent
                ),
            ),
        )
        .subject(format!("node{node}"))
        .evidence("free_bytes", free_bytes)
        .evidence("large_block_free_bytes", large.saturating_mul(sample.page_size_bytes))
        .evidence("large_block_order", k)
        .evidence("unusable_free_percent", unusable)
        .evidence("threshold_percent", t.fragmentation_unusable_percent)
        .evidence("highest_free_order", highest.clone())
        .evidence("high_order_allocation_failures", high);
        for z in &zones {
            f = f.evidence(
                &format!("free_blocks_{}", z.zone.to_ascii_lowercase()),
                z.blocks
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        if let Some(c) = sample.compaction {
            f = f
                .evidence("compact_stall_delta", c.stall)
                .evidence("compact_fail_delta", c.fail)
                .evidence("compaction_interval_seconds", c.interval_seconds);
        }
        f = f
            .step(Text::new(
                "Confirm: in /proc/buddyinfo the columns from order 4 on (the fifth count onward) read 0 for the Normal (or, on small nodes, DMA32) zone while the first columns are large.",
                "确认：/proc/buddyinfo 中 Normal（小内存节点为 DMA32）zone 从 order 4 起（第五列起）的计数为 0，而前几列很大。",
            ))
            .step(Text::new(
                "First free the page cache so the kernel can merge pages into large blocks again; do it when large blocks run out, or on a schedule on nodes that fragment often.",
                "先释放页缓存，让内核能重新合并出大块连续内存；可在大块内存耗尽时执行，经常碎片化的节点可定期执行。",
            ))
            .step(Text::new(
                "Only if large blocks are still missing afterwards, trigger memory compaction. It is costly: it can stall workloads on the node while it runs, so choose a quiet moment.",
                "仅当清理缓存后仍缺少大块内存时，再触发内存整理。该操作开销很大，执行期间可能导致节点上的业务卡顿，请选择业务低峰期。",
            ))
            .command("cat /proc/buddyinfo")
            .command("grep -E 'compact_(stall|fail|success)' /proc/vmstat")
            .command("echo 3 > /proc/sys/vm/drop_caches")
            .command("echo 1 > /proc/sys/vm/compact_memory")
            .source(HANDBOOK, SECTION_FRAGMENTATION)
            .see_also(see_also::MEMORY_FRAGMENTATION);
        out.push(f);
    }
    out
}

/// `memory.page_allocation_failure`: the kernel log shows page allocation failures within
/// the lookback window.
fn allocation_failures(sample: &MemorySample, node_name: &str) -> Option<Finding> {
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
    let meaning_en = match (high > 0, order0 > 0) {
        (true, true) => "order 0 means memory is exhausted; higher orders mean it is fragmented",
        (true, false) => {
            "orders above 0 mean free memory is fragmented into blocks too small for the request"
        }
        _ => "order 0 means the node has no free memory at all",
    };
    let meaning_zh = match (high > 0, order0 > 0) {
        (true, true) => "order 0 表示内存耗尽，更高的 order 表示内存碎片化",
        (true, false) => "order 大于 0 表示空闲内存已碎片化，凑不出所需的连续块",
        _ => "order 0 表示节点已完全没有可用内存",
    };
    let (runtime_en, runtime_zh) = if runtimes.is_empty() {
        (String::new(), String::new())
    } else {
        (
            format!(
                "; the container runtime ({}) was refused, so new pods on {node_name} can stay in ContainerCreating",
                runtimes.join(", ")
            ),
            format!(
                "；容器运行时（{}）分配失败，{node_name} 上新建的 Pod 可能一直处于 ContainerCreating",
                runtimes.join("、")
            ),
        )
    };
    let mut f = Finding::new(
        "memory.page_allocation_failure",
        Severity::Critical,
        Text::new("The kernel failed to allocate pages", "内核页分配失败"),
        Text::new(
            format!(
                "{total} page allocation failure(s) in the kernel log within the last {}s: {listed} ({meaning_en}){runtime_en}.",
                sample.lookback_seconds
            ),
            format!(
                "最近 {}s 内核日志中有 {total} 次页分配失败：{listed}（{meaning_zh}）{runtime_zh}。",
                sample.lookback_seconds
            ),
        ),
    )
    .evidence("failures_in_window", total)
    .evidence("max_order", max_order)
    .evidence("order0_failures", order0)
    .evidence("high_order_failures", high)
    .evidence("tasks", listed)
    .evidence("lookback_seconds", sample.lookback_seconds)
    .see_also(see_also::MEMORY_FRAGMENTATION);
    if let Some(a) = last_ago {
        f = f.evidence("last_failure_seconds_ago", a);
    }
    if !runtimes.is_empty() {
        f = f
            .evidence("container_runtime_tasks", runtimes.join(", "))
            // The Pod state the operator sees (the sandbox entry is generic).
            .see_also(see_also::CONTAINER_CREATING);
    }
    f = f.step(Text::new(
        "Read the failures in the kernel log: the task before the colon asked for 2^order contiguous pages and got none.",
        "在内核日志中查看失败记录：冒号前是申请内存的进程，它申请 2^order 个连续页而未能得到。",
    ));
    if high > 0 {
        f = f
            .step(Text::new(
                "For failures above order 0, free the page cache so large blocks can form again; only if that is not enough, compact memory, knowing it is expensive and stalls workloads while it runs.",
                "对 order 大于 0 的失败，先释放页缓存让大块内存重新合并；不够时再做内存整理，但要知道它开销大、执行时会让业务卡顿。",
            ))
            .command("echo 3 > /proc/sys/vm/drop_caches")
            .command("echo 1 > /proc/sys/vm/compact_memory");
    }
    if order0 > 0 {
        f = f.step(Text::new(
            "For order-0 failures the node is out of memory: find the largest consumers and the processes outside Kubernetes, as for a system OOM.",
            "对 order-0 失败，说明节点内存已耗尽：按系统 OOM 的思路找出最大的内存消耗者及 Kubernetes 之外的进程。",
        ));
    }
    if !runtimes.is_empty() {
        f = f
            .step(Text::new(
                format!("Look for pods on {node_name} stuck in ContainerCreating whose events show the sandbox failing to start (runc 'exit status 6'); they recover once large blocks are available again (handbook section: Pod 一直处于 ContainerCreating 或 Waiting 状态)."),
                format!("查看 {node_name} 上一直处于 ContainerCreating、事件显示 sandbox 启动失败（runc \"exit status 6\"）的 Pod；大块内存恢复后它们即可创建成功（手册章节：Pod 一直处于 ContainerCreating 或 Waiting 状态）。"),
            ))
            .command(cmd!(
                "kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep ContainerCreating",
                node = node_name
            ));
    }
    f = f
        .command("dmesg -T | grep -i 'page allocation failure'")
        .command("cat /proc/buddyinfo")
        .source(HANDBOOK, SECTION_FRAGMENTATION);
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let f = judge(&s, &Thresholds::default(), "node-1");
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
        assert!(judge(&s, &Thresholds::default(), "n").is_empty());
    }

    #[test]
    fn little_free_memory_is_not_fragmentation() {
        // 100 order-0 pages: 400 KiB free, below the 16 MiB floor.
        let s = sample(vec![zone(
            0,
            "Normal",
            &[100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )]);
        assert!(judge(&s, &Thresholds::default(), "n").is_empty());
    }

    #[test]
    fn exhaustion_wins_over_fragmentation() {
        let mut s = sample(vec![zone(
            0,
            "Normal",
            &[9000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )]);
        s.mem_available_bytes = Some(100 << 20);
        let f = judge(&s, &Thresholds::default(), "n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "memory.exhaustion");
    }

    #[test]
    fn failures_group_and_flag_the_runtime() {
        let mut s = sample(vec![]);
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
        let f = judge(&s, &Thresholds::default(), "node-7");
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
    }
}
