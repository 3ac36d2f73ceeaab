//! Issue 16's soak, shortened: `node-doctor serve` on the real host (`--host-root /`) with a
//! short interval for `NODE_DOCTOR_SOAK_SECONDS` (default 75 s) at `NODE_DOCTOR_SOAK_INTERVAL`
//! (default 3s), then its flap counter: on an idle node every finding is raised at most once
//! and cleared at most once (`node_doctor_finding_transitions_total{transition="reraised"}` is
//! 0 for every rule). The full ten minutes: `scripts/soak.sh`.
//!
//! The host is the machine the tests run on: a finding it really has is raised once and stays
//! (or clears once); what must not happen is a finding that comes and goes, as
//! `load.host_process` did 190 times in 16 minutes before hysteresis and material culprits.
//!
//! The `load` rules judge how busy the node is, so they are held to this only when the node
//! was idle over the soak (its CPUs at most [`IDLE_BUSY_PERCENT`] busy, by `/proc/stat`): on
//! a machine busy with other work (a shared build VM) their findings follow that work, and the
//! test says that it did not judge them. Every other rule is held to it in any case.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::{cpu_ticks, parse_exposition, Server};

/// The node counts as idle when its CPUs were at most this busy over the soak.
const IDLE_BUSY_PERCENT: f64 = 25.0;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

#[test]
fn idle_node_soak_raises_and_clears_each_finding_at_most_once() {
    let _machine = crate::support::exclusive();
    let seconds: u64 = env_or("NODE_DOCTOR_SOAK_SECONDS", "75")
        .parse()
        .expect("NODE_DOCTOR_SOAK_SECONDS is a number of seconds");
    let interval = env_or("NODE_DOCTOR_SOAK_INTERVAL", "3s");
    let server = Server::start(Path::new("/"), &["--interval", &interval]);
    server.wait_ready(60);
    let (busy0, total0) = cpu_ticks();
    std::thread::sleep(Duration::from_secs(seconds));
    let (busy1, total1) = cpu_ticks();
    let busy = (busy1 - busy0) as f64 * 100.0 / (total1 - total0).max(1) as f64;
    let idle = busy <= IDLE_BUSY_PERCENT;

    let text = server.get("/metrics").text();
    let exposition =
        parse_exposition(&text).unwrap_or_else(|e| panic!("/metrics does not parse: {e}"));
    assert_eq!(
        exposition
            .types
            .get("node_doctor_finding_transitions")
            .map(String::as_str),
        Some("counter"),
        "no flap counter in /metrics"
    );
    // id -> transition -> count.
    let mut by_id: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for s in exposition.find("node_doctor_finding_transitions_total") {
        by_id
            .entry(s.labels["id"].clone())
            .or_default()
            .insert(s.labels["transition"].clone(), s.value);
    }
    println!(
        "soak: {seconds} s at --interval {interval} on this host, CPUs {busy:.1}% busy ({})",
        if idle {
            "idle: every rule is judged"
        } else {
            "not idle: the load rules follow the other work and are not judged"
        }
    );
    for (id, t) in &by_id {
        let n = |k: &str| t.get(k).copied().unwrap_or(0.0);
        println!(
            "  {id}: raised {} cleared {} suppressed {} reraised {}",
            n("raised"),
            n("cleared"),
            n("suppressed"),
            n("reraised")
        );
    }
    let flapping: Vec<(&String, f64)> = by_id
        .iter()
        .filter(|(id, _)| idle || !id.starts_with("load."))
        .map(|(id, t)| (id, t.get("reraised").copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    assert!(
        flapping.is_empty(),
        "findings raised again after they cleared (flaps): {flapping:?}\n/findings:\n{:#}",
        server.get("/findings").json()
    );
    // Every transition is a whole count, and a rule never clears more findings than it raised.
    for (id, t) in &by_id {
        let n = |k: &str| t.get(k).copied().unwrap_or(0.0);
        assert!(n("cleared") <= n("raised"), "{id}: {t:?}");
    }
}
