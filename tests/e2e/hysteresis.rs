//! Hysteresis through the binary: `serve` shows a finding only after its rule's `raise_after`
//! runs in a row reported it, keeps it as `"state": "clearing"` (with the evidence of its last
//! report) until `clear_after` runs in a row have not, and counts both in
//! `node_doctor_finding_transitions_total`; `check` shows what its second sample sees.
//!
//! The finding is `memory.exhaustion` on a fake root whose `/proc/meminfo` the test rewrites;
//! an operator's `--rules-file` sets its hysteresis to 3 and 3 (the built-in 2 and 3 would do;
//! 3 also shows that an override of the hysteresis applies).

use std::time::{Duration, Instant};

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::support::{parse_exposition, FakeRoot, Server};

const LOW: &str =
    "MemTotal:       24684084 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n";
const HIGH: &str =
    "MemTotal:       24684084 kB\nMemFree:        21874744 kB\nMemAvailable:   24117824 kB\n";

fn exhaustion(v: &Value) -> Option<Value> {
    v["findings"]
        .as_array()?
        .iter()
        .find(|f| f["id"] == "memory.exhaustion")
        .cloned()
}

fn at(f: &Value, key: &str) -> OffsetDateTime {
    OffsetDateTime::parse(f[key].as_str().unwrap_or(""), &Rfc3339)
        .unwrap_or_else(|e| panic!("{key}: {e}: {f:#}"))
}

/// (raised, cleared, suppressed, reraised) of `memory.exhaustion` in /metrics.
fn transitions(s: &Server) -> [f64; 4] {
    let e = parse_exposition(&s.get("/metrics").text()).expect("/metrics parses");
    let n = |t: &str| {
        e.find("node_doctor_finding_transitions_total")
            .iter()
            .find(|x| x.labels["id"] == "memory.exhaustion" && x.labels["transition"] == t)
            .map_or(0.0, |x| x.value)
    };
    [n("raised"), n("cleared"), n("suppressed"), n("reraised")]
}

/// Polls `/findings` until `cond` holds on the memory.exhaustion finding (or its absence).
fn wait(s: &Server, secs: u64, what: &str, cond: impl Fn(Option<&Value>) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = s.get("/findings").json();
        if cond(exhaustion(&v).as_ref()) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{v:#}\n{}",
            s.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_raises_after_raise_after_runs_and_clears_after_clear_after() {
    let root = FakeRoot::quiet();
    root.write("/proc/meminfo", LOW);
    let rules = root.path("/etc/node-doctor-rules.toml");
    root.write(
        "/etc/node-doctor-rules.toml",
        "[[rule]]\nid = \"memory.exhaustion\"\nraise_after = 3\nclear_after = 3\n",
    );
    let rules = rules.to_string_lossy().into_owned();

    // check: no hysteresis, the finding is there from its second sample.
    let out = std::process::Command::new(crate::support::node_doctor_bin())
        .args(["check", "--host-root"])
        .arg(root.root())
        .args([
            "--collector",
            "memory",
            "--interval",
            "100ms",
            "--format",
            "json",
            "--rules-file",
            &rules,
        ])
        .env_remove("NODE_NAME")
        .output()
        .expect("run check");
    let v: Value = serde_json::from_slice(&out.stdout).expect("check prints JSON");
    let f = exhaustion(&v).unwrap_or_else(|| panic!("check shows no exhaustion:\n{v:#}"));
    assert_eq!(f["state"], "active");

    let s = Server::start(
        root.root(),
        &[
            "--collector",
            "memory",
            "--interval",
            "1s",
            "--rules-file",
            &rules,
        ],
    );
    // Raised on the third run that reports it: at least two intervals after its first_seen
    // (first_seen is the first report of the streak, printed to the second).
    let v = wait(&s, 20, "the exhaustion finding", |f| f.is_some());
    let shown = OffsetDateTime::now_utc();
    let f = exhaustion(&v).unwrap();
    let waited = (shown - at(&f, "first_seen")).as_seconds_f64();
    assert!(
        waited >= 1.9,
        "shown {waited:.2} s after its first report, before raise_after = 3 runs:\n{f:#}"
    );
    assert_eq!(f["state"], "active");
    assert_eq!(transitions(&s), [1.0, 0.0, 0.0, 0.0]);
    let low_available = f["evidence"]["mem_available_bytes"].clone();

    // Memory back: shown as clearing, with the evidence of its last report, then gone.
    root.write("/proc/meminfo", HIGH);
    let v = wait(&s, 20, "the finding to be clearing", |f| {
        f.is_some_and(|f| f["state"] == "clearing")
    });
    let f = exhaustion(&v).unwrap();
    assert_eq!(f["evidence"]["mem_available_bytes"], low_available, "{f:#}");
    let last_seen = at(&f, "last_seen");
    wait(&s, 20, "the finding to clear", |f| f.is_none());
    let gone = (OffsetDateTime::now_utc() - last_seen).as_seconds_f64();
    assert!(
        gone >= 2.0,
        "cleared {gone:.2} s after its last report, before clear_after = 3 runs"
    );
    assert_eq!(transitions(&s), [1.0, 1.0, 0.0, 0.0]);

    // Low again for a single run only: reported once, then gone before its raise.
    root.write("/proc/meminfo", LOW);
    let deadline = Instant::now() + Duration::from_secs(20);
    while transitions(&s)[2] < 1.0 {
        // Put the memory back as soon as a run has seen it low (that run's metric shows it).
        let m = parse_exposition(&s.get("/metrics").text()).expect("/metrics parses");
        let available = m
            .find("node_doctor_memory_available_bytes")
            .first()
            .map(|x| x.value);
        if available == Some(200_000.0 * 1024.0) {
            root.write("/proc/meminfo", HIGH);
        }
        assert!(Instant::now() < deadline, "never suppressed: {available:?}");
        assert!(
            exhaustion(&s.get("/findings").json()).is_none(),
            "raised after fewer than 3 reports"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(transitions(&s), [1.0, 1.0, 1.0, 0.0]);
}
