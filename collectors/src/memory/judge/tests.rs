use super::*;
use crate::explain::see_also;
use crate::finding::Finding;
use crate::memory::sample::FailureGroup;

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
