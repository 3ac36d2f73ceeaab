//! Issue 10: findings link to catalogue entries. A finding's `see_also` keys, as `check`
//! prints them, are what `node-doctor explain` finds for that key.

use serde_json::Value;

use crate::support::{run, FakeRoot};

/// The handbook's fragmented node (节点内存碎片化排障处理): nothing free at order 4 or above
/// in DMA32 and Normal.
const HANDBOOK_BUDDYINFO: &str = "\
Node 0, zone DMA 1 0 1 0 2 1 1 0 1 1 3
Node 0, zone DMA32 2725 624 489 178 0 0 0 0 0 0 0
Node 0, zone Normal 1163 1101 932 222 0 0 0 0 0 0 0
";

/// Checks that every `see_also` key of `f` is explained by `node-doctor explain <key>` with
/// that very entry first; returns the keys.
pub fn assert_links_resolve(f: &Value) -> Vec<String> {
    let keys: Vec<String> = f["see_also"]
        .as_array()
        .unwrap_or_else(|| panic!("no see_also array: {f:#}"))
        .iter()
        .map(|k| k.as_str().expect("key").to_string())
        .collect();
    for key in &keys {
        let out = run(&["explain", "--format", "json", key], &[]);
        assert_eq!(out.status.code(), Some(0), "explain {key}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["results"][0]["key"], key.as_str(), "explain {key}: {v:#}");
    }
    keys
}

#[test]
fn a_fragmentation_finding_links_to_the_page_allocation_failure_entry() {
    let root = FakeRoot::quiet();
    root.write("/proc/buddyinfo", HANDBOOK_BUDDYINFO);
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--interval",
            "100ms",
            "--collector",
            "memory",
            "--node-name",
            "n1",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "memory.fragmentation")
        .unwrap_or_else(|| panic!("no memory.fragmentation:\n{v:#}"));
    assert_eq!(assert_links_resolve(f), vec!["page-allocation-failure"]);
}
