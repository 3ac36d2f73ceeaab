//! `node-doctor serve` on a loopback port against a fake host root. These tests hold with or
//! without collectors in the registry: they check the contract of whatever is reported.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{parse_exposition, Conn, Exposition, FakeRoot, Server};

const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];
const STATUSES: [&str; 4] = ["ok", "degraded", "unavailable", "error"];

fn is_rfc3339_utc(s: &str) -> bool {
    // 2026-11-22T08:22:32Z
    let b = s.as_bytes();
    s.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z'
        && s.chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19].contains(&i) || c.is_ascii_digit())
}

/// Checks one `/findings` document against docs/findings.md.
pub fn assert_contract(v: &Value, node: &str) {
    assert_eq!(v["node"], node);
    assert!(is_rfc3339_utc(v["generated_at"].as_str().unwrap()), "{v}");
    assert_eq!(v["agent_version"], env!("CARGO_PKG_VERSION"));
    let findings = v["findings"].as_array().expect("findings array");
    let rank = |s: &str| SEVERITIES.iter().position(|x| *x == s).unwrap();
    let mut prev: Option<(usize, String)> = None;
    for f in findings {
        let id = f["id"].as_str().expect("id");
        let collector = f["collector"].as_str().expect("collector");
        assert!(id.starts_with(&format!("{collector}.")), "{id}");
        assert!(f["subject"].is_string());
        let sev = f["severity"].as_str().expect("severity");
        assert!(SEVERITIES.contains(&sev), "{sev}");
        assert!(!f["title"].as_str().expect("title").is_empty());
        assert!(!f["summary"].as_str().expect("summary").is_empty());
        for (k, val) in f["evidence"].as_object().expect("evidence") {
            assert!(val.is_number() || val.is_string(), "{k}: {val}");
        }
        let r = &f["remediation"];
        assert!(r["steps"].as_array().unwrap().iter().all(Value::is_string));
        assert!(r["commands"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_string));
        if !r["source"].is_null() {
            // A handbook file, or a public document by its address (docs/findings.md).
            let doc = r["source"]["doc"].as_str().unwrap();
            match r["source"]["url"].as_str() {
                None => assert!(doc.ends_with(".txt"), "{r}"),
                Some(url) => assert!(url.starts_with("https://") && !doc.is_empty(), "{r}"),
            }
            assert!(!r["source"]["section"].as_str().unwrap().is_empty());
        }
        assert!(is_rfc3339_utc(f["first_seen"].as_str().unwrap()));
        assert!(is_rfc3339_utc(f["last_seen"].as_str().unwrap()));
        assert!(f["first_seen"].as_str() <= f["last_seen"].as_str());
        assert!(
            matches!(f["state"].as_str(), Some("active" | "clearing")),
            "state: {}",
            f["state"]
        );
        // Sorted by severity (most severe first), then id.
        let key = (2 - rank(sev), id.to_string());
        if let Some(p) = &prev {
            assert!(*p <= key, "findings out of order: {p:?} then {key:?}");
        }
        prev = Some(key);
    }
    for c in v["collectors"].as_array().expect("collectors array") {
        assert!(!c["name"].as_str().unwrap().is_empty());
        let status = c["status"].as_str().unwrap();
        assert!(STATUSES.contains(&status), "{status}");
        if !c["last_run"].is_null() {
            assert!(is_rfc3339_utc(c["last_run"].as_str().unwrap()));
            // A run that read anything took some time: 0 would be a run not measured.
            let ms = c["duration_ms"].as_f64().unwrap();
            assert!(ms.is_finite() && ms > 0.0, "{c}");
        }
        if status != "ok" {
            assert!(
                !c["message"].as_str().unwrap_or("").is_empty(),
                "a collector that is not ok says why: {c}"
            );
        }
    }
}

#[test]
fn findings_follow_the_contract_and_filters_apply() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    s.wait_ready(30);
    let r = s.get("/findings");
    assert_eq!(r.header("content-type"), "application/json");
    let all = r.json();
    assert_contract(&all, "e2e-node");

    let warn = s.get("/findings?severity=warning").json();
    assert_contract(&warn, "e2e-node");
    for f in warn["findings"].as_array().unwrap() {
        assert_ne!(f["severity"], "info");
    }
    let all_n = all["findings"].as_array().unwrap().len();
    let non_info = all["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .count();
    assert_eq!(warn["findings"].as_array().unwrap().len(), non_info);
    let crit = s.get("/findings?severity=critical").json();
    for f in crit["findings"].as_array().unwrap() {
        assert_eq!(f["severity"], "critical");
    }

    // collector filter: for each collector and for an unknown one.
    for c in all["collectors"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let one = s.get(&format!("/findings?collector={name}")).json();
        assert_eq!(one["collectors"].as_array().unwrap().len(), 1);
        for f in one["findings"].as_array().unwrap() {
            assert_eq!(f["collector"], name);
        }
    }
    // An unknown collector is a bad request naming the known ones (as `check --collector`
    // exits 64), not an empty report that reads as "nothing wrong".
    let none = s.get("/findings?collector=no-such-collector");
    assert_eq!(none.status, 400);
    let msg = none.text();
    assert!(
        msg.contains("unknown collector \"no-such-collector\"") && msg.contains("disk"),
        "{msg}"
    );
    assert_eq!(s.get("/?collector=no-such-collector").status, 400);

    // lang=zh: the same findings, rendered in Chinese.
    let zh = s.get("/findings?lang=zh").json();
    assert_contract(&zh, "e2e-node");
    let ids = |v: &Value| -> Vec<String> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{}|{}", f["id"], f["subject"]))
            .collect()
    };
    assert_eq!(ids(&zh), ids(&s.get("/findings").json()));
    for f in zh["findings"].as_array().unwrap() {
        let t = f["title"].as_str().unwrap();
        assert!(
            t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "zh title has Chinese: {t}"
        );
    }
    assert!(all_n == 0 || !all["findings"][0]["title"].as_str().unwrap().is_empty());

    // Bad filter values are the client's mistake.
    assert_eq!(s.get("/findings?severity=loud").status, 400);
    assert_eq!(s.get("/findings?lang=fr").status, 400);
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    s.wait_ready(30);
    let findings = s.get("/findings").json();
    let r = s.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .starts_with("application/openmetrics-text"));
    let text = r.text();
    let e = parse_exposition(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    assert!(text.ends_with("# EOF\n"));
    let build = e.find("node_doctor_build_info");
    assert_eq!(build.len(), 1);
    assert_eq!(build[0].labels["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(build[0].value, 1.0);
    assert_eq!(e.types["node_doctor_finding"], "gauge");
    assert_eq!(e.types["node_doctor_collector_up"], "gauge");
    // One collector_up and duration histogram per collector.
    let collectors = findings["collectors"].as_array().unwrap();
    let up = e.find("node_doctor_collector_up");
    assert_eq!(up.len(), collectors.len());
    for c in collectors {
        let name = c["name"].as_str().unwrap();
        let u = up
            .iter()
            .find(|s| s.labels["collector"] == name)
            .unwrap_or_else(|| panic!("no up series for {name}"));
        let ok = matches!(c["status"].as_str(), Some("ok" | "degraded"));
        assert_eq!(u.value, if ok { 1.0 } else { 0.0 }, "{name}");
        assert!(e
            .find("node_doctor_collector_duration_seconds_count")
            .iter()
            .any(|s| s.labels["collector"] == name));
    }
    // Every counter family's samples end in _total.
    for s in &e.samples {
        let base = s.name.strip_suffix("_total").unwrap_or(&s.name);
        if e.types.get(base).map(String::as_str) == Some("counter") {
            assert!(s.name.ends_with("_total"), "{}", s.name);
        }
    }
    // Findings series: labels collector, id, severity, subject; value 1. (Counted against a
    // fresh /findings, since a collector may have run in between.)
    for f in e.find("node_doctor_finding") {
        let keys: Vec<&str> = f.labels.keys().map(String::as_str).collect();
        assert_eq!(keys, ["collector", "id", "severity", "subject"]);
        assert_eq!(f.value, 1.0);
    }
}

/// Per collector: its CPU counter, and its duration histogram's count and sum, checked for
/// shape (one sample per collector, cumulative buckets ending in +Inf = count).
fn collector_costs(e: &Exposition) -> BTreeMap<String, (f64, f64, f64)> {
    assert_eq!(e.types["node_doctor_collector_cpu_seconds"], "counter");
    assert_eq!(
        e.types["node_doctor_collector_duration_seconds"],
        "histogram"
    );
    let one = |name: &str, collector: &str| -> f64 {
        let s: Vec<_> = e
            .find(name)
            .into_iter()
            .filter(|s| s.labels["collector"] == collector)
            .collect();
        assert_eq!(s.len(), 1, "{name}{{collector={collector:?}}}: {s:?}");
        s[0].value
    };
    let mut out = BTreeMap::new();
    for up in e.find("node_doctor_collector_up") {
        let c = up.labels["collector"].as_str();
        let count = one("node_doctor_collector_duration_seconds_count", c);
        let mut buckets: Vec<(f64, f64)> = e
            .find("node_doctor_collector_duration_seconds_bucket")
            .into_iter()
            .filter(|s| s.labels["collector"] == c)
            .map(|s| {
                let le = s.labels["le"].as_str();
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (le, s.value)
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(buckets.len() >= 10, "{c}: {buckets:?}");
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{c}: {buckets:?}"
        );
        assert_eq!(buckets.last(), Some(&(f64::INFINITY, count)), "{c}");
        out.insert(
            c.to_string(),
            (
                one("node_doctor_collector_cpu_seconds_total", c),
                count,
                one("node_doctor_collector_duration_seconds_sum", c),
            ),
        );
    }
    out
}

/// After two cycles every collector has a CPU counter and a duration histogram; both only
/// grow; the collectors' CPU is some of the process's and never more than all of it.
#[test]
fn collector_cost_metrics_are_present_monotone_and_within_the_process_cpu() {
    use nix::unistd::{sysconf, SysconfVar};
    let tick = 1.0 / sysconf(SysconfVar::CLK_TCK).unwrap().unwrap() as f64;
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &["--interval", "1s"]);
    s.wait_ready(30);
    let scrape = || {
        let text = s.get("/metrics").text();
        parse_exposition(&text).unwrap_or_else(|err| panic!("{err}\n{text}"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut history: Vec<BTreeMap<String, (f64, f64, f64)>> = Vec::new();
    // Until every collector has finished two runs since the first look, and some more.
    loop {
        let e = scrape();
        let costs = collector_costs(&e);
        assert!(!costs.is_empty());
        let process = e.find("process_cpu_seconds_total")[0].value;
        let total: f64 = costs.values().map(|c| c.0).sum();
        assert!(
            total <= process + tick,
            "collectors {total} s > process {process} s: {costs:?}"
        );
        if let Some(prev) = history.last() {
            assert_eq!(
                prev.keys().collect::<Vec<_>>(),
                costs.keys().collect::<Vec<_>>()
            );
            for (name, (cpu, count, sum)) in &costs {
                let (pcpu, pcount, psum) = prev[name];
                assert!(
                    *cpu >= pcpu && *count >= pcount && *sum >= psum,
                    "{name} went back"
                );
            }
        }
        let done = history
            .first()
            .is_some_and(|first| costs.iter().all(|(n, c)| c.1 >= first[n].1 + 2.0));
        history.push(costs);
        if done {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{history:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let (first, last) = (&history[0], &history[history.len() - 1]);
    for (name, (cpu, count, sum)) in last {
        assert!(*count >= 2.0 && *sum > 0.0, "{name}: {last:?}");
        // Every run does some work; a clock that reads zero for a short run (getrusage of the
        // running thread, updated only at ticks) would fail here.
        assert!(*cpu > 0.0, "{name}: {last:?}");
        assert!(*cpu >= first[name].0, "{name}");
    }
    // The counters measure something: collecting costs CPU.
    let grown: f64 = last.iter().map(|(n, c)| c.0 - first[n].0).sum();
    assert!(grown > 0.0, "{first:?} -> {last:?}");
}

/// Fields 14 (utime) and 15 (stime), 20 (threads) and 22 (starttime) of /proc/<pid>/stat.
fn pid_stat(pid: u32) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest: Vec<u64> = text[text.rfind(')').unwrap() + 2..]
        .split(' ')
        .skip(1)
        .map(|f| f.trim().parse::<i64>().map_or(0, |v| v.max(0) as u64))
        .collect();
    // rest[0] is field 4.
    (rest[10] + rest[11], rest[16], rest[18])
}

/// A `Key:   N kB` (or plain `N`) line of /proc/<pid>/status.
fn pid_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in status"))
}

#[test]
fn process_metrics_match_the_running_agent() {
    use nix::unistd::{sysconf, SysconfVar};
    let tps = sysconf(SysconfVar::CLK_TCK).unwrap().unwrap() as f64;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    s.wait_ready(30);
    let pid = s.pid();
    // Work the agent until it has used some CPU time (a few ticks), so the comparison is of
    // a figure that moved.
    for _ in 0..5000 {
        if pid_stat(pid).0 >= 5 {
            break;
        }
        s.get("/findings?severity=critical");
    }
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as f64
    };
    let (ticks_before, threads_before, starttime) = pid_stat(pid);
    let (rss_before, vm_before, fds_before) =
        (pid_status(pid, "VmRSS:"), pid_status(pid, "VmSize:"), fds());
    let text = s.get("/metrics").text();
    let (ticks_after, threads_after, _) = pid_stat(pid);
    let (rss_after, vm_after, fds_after) =
        (pid_status(pid, "VmRSS:"), pid_status(pid, "VmSize:"), fds());
    let e = parse_exposition(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let one = |name: &str| -> f64 {
        let v = e.find(name);
        assert_eq!(v.len(), 1, "{name} in\n{text}");
        v[0].value
    };
    for (family, kind) in [
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_threads", "gauge"),
    ] {
        assert_eq!(
            e.types.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    // CPU: the agent read its own ticks between our two readings.
    let cpu = one("process_cpu_seconds_total");
    assert!(ticks_before >= 5, "the agent used {ticks_before} ticks");
    assert!(
        ticks_before as f64 / tps - 1e-9 <= cpu && cpu <= ticks_after as f64 / tps + 1e-9,
        "cpu {cpu} s outside [{ticks_before}, {ticks_after}] ticks at {tps}/s"
    );
    // Memory: /proc/<pid>/status around the scrape, with room for the response's buffers.
    let within = |v: f64, a: u64, b: u64, slack: f64| {
        let (lo, hi) = (a.min(b) as f64 * 1024.0, a.max(b) as f64 * 1024.0);
        lo - slack <= v && v <= hi + slack
    };
    let rss = one("process_resident_memory_bytes");
    assert!(
        within(rss, rss_before, rss_after, 2.0 * 1048576.0),
        "rss {rss} vs VmRSS {rss_before}..{rss_after} kB"
    );
    let vm = one("process_virtual_memory_bytes");
    assert!(
        within(vm, vm_before, vm_after, 64.0 * 1048576.0),
        "vsize {vm} vs VmSize {vm_before}..{vm_after} kB"
    );
    // Descriptors: the entries of /proc/<pid>/fd (the scrape's connection and the agent's
    // listing of its own fd directory come and go around it).
    let open = one("process_open_fds");
    assert!(
        fds_before.min(fds_after) - 3.0 <= open && open <= fds_before.max(fds_after) + 3.0,
        "open fds {open} vs {fds_before}..{fds_after}"
    );
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let soft: f64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert_eq!(one("process_max_fds"), soft);
    // Start time: btime + starttime ticks, and within a second or two of our own clock.
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let start = one("process_start_time_seconds");
    assert!(
        (start - (btime + starttime as f64 / tps)).abs() < 0.01,
        "{start}"
    );
    assert!(
        started - 2.0 <= start && start <= started + 30.0,
        "start {start}, test began at {started}"
    );
    let threads = one("process_threads");
    assert!(
        threads >= 2.0 && threads <= threads_before.max(threads_after) as f64 + 16.0,
        "threads {threads}"
    );
}

/// `/metrics`, `/findings` and the page are gzip-compressed when the client asks (as
/// Prometheus always does), with `Vary`, and decompress to what an uncompressed request gets;
/// a client that does not ask gets plain text.
#[test]
fn responses_are_gzip_compressed_when_asked() {
    use std::io::Read;
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    s.wait_ready(30);
    let gunzip = |body: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut out)
            .expect("a gzip stream");
        out
    };
    for path in ["/metrics", "/findings", "/findings?lang=zh", "/"] {
        let plain = s.get(path);
        assert_eq!(plain.status, 200, "{path}");
        assert_eq!(plain.header("content-encoding"), "", "{path}");
        let zipped = s.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate\r\nConnection: close\r\n\r\n"
        ));
        assert_eq!(zipped.status, 200, "{path}");
        assert_eq!(zipped.header("content-encoding"), "gzip", "{path}");
        assert!(
            zipped
                .header("vary")
                .to_ascii_lowercase()
                .contains("accept-encoding"),
            "{path}: {:?}",
            zipped.headers
        );
        assert_eq!(
            zipped.header("content-type"),
            plain.header("content-type"),
            "{path}"
        );
        let body = gunzip(&zipped.body);
        assert!(
            zipped.body.len() * 2 < body.len(),
            "{path}: {} bytes compressed to {}",
            body.len(),
            zipped.body.len()
        );
        match path {
            "/metrics" => {
                let text = String::from_utf8(body).unwrap();
                let e = parse_exposition(&text).unwrap();
                let plain_e = parse_exposition(&plain.text()).unwrap();
                assert_eq!(
                    e.types.keys().collect::<Vec<_>>(),
                    plain_e.types.keys().collect::<Vec<_>>()
                );
            }
            "/" => assert!(String::from_utf8(body).unwrap().contains("<html")),
            _ => {
                let j: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(j["node"], plain.json()["node"], "{path}");
            }
        }
    }
    // Tiny bodies are not worth it.
    let h = s.raw(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        (h.header("content-encoding"), h.text().as_str()),
        ("", "ok\n")
    );
}

#[test]
fn health_readiness_html_404_405() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    let h = s.get("/healthz");
    assert_eq!((h.status, h.text().as_str()), (200, "ok\n"));
    s.wait_ready(30);
    assert_eq!(s.get("/readyz").text(), "ready\n");

    let page = s.get("/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").starts_with("text/html"));
    let html = page.text();
    assert!(html.contains("<html") && html.contains("e2e-node"));
    assert!(html.contains("href=\"/findings\"") && html.contains("href=\"/metrics\""));
    assert!(!html.to_ascii_lowercase().contains("<script"));
    assert!(s.get("/?lang=zh").text().contains("采集器"));

    assert_eq!(s.get("/nope").status, 404);
    assert_eq!(s.get("/findings/extra").status, 404);
    for method in ["POST", "PUT", "DELETE"] {
        for path in ["/findings", "/metrics", "/healthz"] {
            let r = s.raw(&format!(
                "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ));
            assert_eq!(r.status, 405, "{method} {path}");
            assert_eq!(r.header("allow"), "GET, HEAD");
        }
    }
    let head = s.raw("HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(head.status, 200);
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    let mut c = Conn::open(s.addr).unwrap();
    for path in [
        "/healthz",
        "/findings",
        "/metrics",
        "/findings?lang=zh",
        "/nope",
    ] {
        c.send(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
            .unwrap();
        let r = c.read_response().unwrap();
        assert_eq!(r.status, if path == "/nope" { 404 } else { 200 }, "{path}");
        assert_ne!(r.header("connection"), "close");
    }
}

#[test]
fn bearer_token_protects_data_but_not_probes() {
    let root = FakeRoot::quiet();
    let token_file = root.path("/token");
    write_token(&token_file, "s3cret-token-for-e2e\n");
    let s = Server::start(
        root.root(),
        &["--auth-token-file", token_file.to_str().unwrap()],
    );
    let req = |path: &str, auth: Option<&str>| {
        let h = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        s.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\n{h}Connection: close\r\n\r\n"
        ))
        .status
    };
    for path in ["/findings", "/metrics", "/", "/history"] {
        assert_eq!(req(path, None), 401, "{path}");
        assert_eq!(req(path, Some("Bearer wrong")), 401, "{path}");
        assert_eq!(req(path, Some("Bearer s3cret-token-for-e2")), 401, "{path}");
        assert_eq!(req(path, Some("Basic s3cret-token-for-e2e")), 401, "{path}");
        assert_eq!(
            req(path, Some("Bearer s3cret-token-for-e2e")),
            200,
            "{path}"
        );
    }
    assert_eq!(req("/healthz", None), 200);
    assert!(matches!(req("/readyz", None), 200 | 503));
    // The rule pages hold no node data: alerts and NodeConditions link to them.
    assert_eq!(req("/rules", None), 200);
    assert_eq!(req("/rules/disk.filesystem_full?lang=zh", None), 200);
    assert_eq!(req("/rules/disk.nope", None), 404);
    assert_eq!(req("/rules/disk.filesystem_full?lang=fr", None), 400);
    let r = s.raw("GET /findings HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(r.header("www-authenticate").starts_with("Bearer"));
}

#[test]
fn empty_or_missing_token_file_refuses_to_start() {
    let root = FakeRoot::quiet();
    let token_file = root.path("/token");
    std::fs::write(&token_file, "\n").unwrap();
    for f in [token_file.clone(), root.path("/missing")] {
        let out = crate::support::run(
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--host-root",
                root.root().to_str().unwrap(),
                "--auth-token-file",
                f.to_str().unwrap(),
            ],
            &[],
        );
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("auth token file"));
    }
}

/// Writes a token file readable by its owner only (as a Secret volume with defaultMode 0400).
fn write_token(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Replaces the token file the way a Kubernetes Secret volume does: a new file renamed over.
fn rotate_token(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("new");
    write_token(&tmp, text);
    std::fs::rename(&tmp, path).unwrap();
}

fn auth_status(s: &Server, token: &str) -> u16 {
    s.raw(&format!(
        "GET /findings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    ))
    .status
}

/// Every unusable token file stops start-up at once with a message naming the file and the
/// problem; a FIFO in particular must not hang it.
#[test]
fn unusable_token_files_refuse_to_start_with_a_clear_message() {
    let root = FakeRoot::quiet();
    let dir = root.path("/secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        write_token(&p, text);
        p
    };
    let cases = [
        (fifo, "is a FIFO, not a regular file"),
        (dir.clone(), "is a directory, not a regular file"),
        (
            std::path::PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (file("big", &"a".repeat(5000)), "larger than 4096 bytes"),
        (file("empty", " \n\n"), "is empty"),
        (
            file("short", "changeme\n"),
            "holds a 8-byte token; the minimum is 16 bytes",
        ),
        (
            file("two-lines", "0123456789abcdef0123\nsecond line\n"),
            "one line of visible ASCII",
        ),
    ];
    for (path, expect) in cases {
        let p = path.to_str().unwrap();
        let args = [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--host-root",
            root.root().to_str().unwrap(),
            "--auth-token-file",
            p,
        ];
        let (out, _) = crate::support::run_with_timeout(&args, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{p}: serve still running after 30 s (hung?)"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{p}: started:\n{stderr}");
        assert!(
            stderr.contains("auth token file") && stderr.contains(expect),
            "{p}: expected {expect:?} in:\n{stderr}"
        );
        assert!(!stderr.contains("changeme"), "the token is never logged");
        // Refused at start-up, before it listened or ran a collector.
        assert!(
            !stderr.contains("node-doctor serving"),
            "{p}: served:\n{stderr}"
        );
    }
}

#[test]
fn a_token_file_readable_by_others_starts_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let root = FakeRoot::quiet();
    let token_file = root.path("/token");
    for (mode, warned) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
        write_token(&token_file, "0123456789abcdef-token\n");
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(mode)).unwrap();
        let s = Server::start(
            root.root(),
            &["--auth-token-file", token_file.to_str().unwrap()],
        );
        assert_eq!(auth_status(&s, "0123456789abcdef-token"), 200);
        let logs = s.logs();
        let warning = logs
            .lines()
            .find(|l| l.contains("readable by more than its owner"));
        assert_eq!(warning.is_some(), warned, "mode {mode:o}:\n{logs}");
        if let Some(w) = warning {
            assert!(w.contains("\"level\":\"WARN\""), "{w}");
            assert!(!w.contains("0123456789abcdef-token"), "{w}");
        }
    }
}

/// SIGHUP re-reads the token file: a valid new token replaces the old one; an invalid file
/// keeps the old one in force and logs why; the process never exits on SIGHUP.
#[test]
fn sighup_reloads_the_token_and_keeps_the_old_one_when_the_new_file_is_bad() {
    use nix::sys::signal::Signal;
    let root = FakeRoot::quiet();
    let token_file = root.path("/token");
    write_token(&token_file, "first-token-0123456789\n");
    let mut s = Server::start(
        root.root(),
        &["--auth-token-file", token_file.to_str().unwrap()],
    );
    assert_eq!(auth_status(&s, "first-token-0123456789"), 200);

    rotate_token(&token_file, "second-token-0123456789\n");
    s.signal(Signal::SIGHUP);
    let logs = s.wait_log(10, "auth token reloaded");
    assert!(s.alive(), "SIGHUP ended the process:\n{logs}");
    assert_eq!(auth_status(&s, "second-token-0123456789"), 200);
    assert_eq!(auth_status(&s, "first-token-0123456789"), 401);
    assert!(!logs.contains("second-token") && !logs.contains("first-token"));

    // Invalid replacements: too short, then a FIFO. The second token stays in force.
    for (bad, why) in [("short", "holds a 5-byte token"), ("fifo", "is a FIFO")] {
        let _ = std::fs::remove_file(&token_file);
        if bad == "fifo" {
            nix::unistd::mkfifo(&token_file, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .unwrap();
        } else {
            write_token(&token_file, "short\n");
        }
        let before = s.logs().matches("auth token not reloaded").count();
        s.signal(Signal::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.logs().matches("auth token not reloaded").count() == before {
            assert!(
                Instant::now() < deadline,
                "no error logged for {bad}:\n{}",
                s.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let logs = s.logs();
        let line = logs
            .lines()
            .rev()
            .find(|l| l.contains("auth token not reloaded"))
            .unwrap();
        assert!(
            line.contains("\"level\":\"ERROR\"") && line.contains(why),
            "{line}"
        );
        assert!(s.alive(), "{bad}: SIGHUP ended the process");
        assert_eq!(auth_status(&s, "second-token-0123456789"), 200, "{bad}");
        assert_eq!(auth_status(&s, "short"), 401, "{bad}");
    }
}

#[test]
fn sighup_without_a_token_file_is_ignored() {
    use nix::sys::signal::Signal;
    let root = FakeRoot::quiet();
    let mut s = Server::start(root.root(), &[]);
    for _ in 0..3 {
        s.signal(Signal::SIGHUP);
    }
    s.wait_log(10, "SIGHUP ignored");
    std::thread::sleep(Duration::from_millis(200));
    assert!(s.alive(), "SIGHUP ended the process:\n{}", s.logs());
    assert_eq!(s.get("/findings").status, 200);
}

/// On SIGTERM or SIGINT the agent stops accepting, ends a client's keep-alive connection
/// after the request in flight (the client keeps asking on it every 50 ms, so neither the
/// idle timer nor the client would end it) and exits without waiting out its grace period:
/// shown by the order of its log lines and the absence of the grace period's warning, not by
/// a time bound (the 60 s wait is a failure guard only).
#[test]
fn sigterm_and_sigint_shut_down_gracefully() {
    use nix::sys::signal::Signal;
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let root = FakeRoot::quiet();
        let mut s = Server::start(root.root(), &[]);
        let addr = s.addr;
        let (first, answered_once) = std::sync::mpsc::channel();
        let client = std::thread::spawn(move || -> (usize, String) {
            let mut c = Conn::open(addr).expect("connect");
            let mut answered = 0;
            for _ in 0..2_000 {
                if let Err(e) = c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") {
                    return (answered, format!("send: {e}"));
                }
                match c.read_response() {
                    Ok(r) => {
                        assert_eq!(r.status, 200);
                        answered += 1;
                        let _ = first.send(());
                        if r.header("connection") == "close" {
                            return (answered, "connection: close".into());
                        }
                    }
                    Err(e) => return (answered, format!("read: {e}")),
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (answered, "still open".into())
        });
        answered_once.recv().expect("the client's first answer");
        s.signal(sig);
        let st = s.wait_exit(60);
        let (answered, ended) = client.join().expect("client thread");
        assert!(st.success(), "{sig}: {st}\n{}", s.logs());
        assert!(answered >= 1 && ended != "still open", "{sig}: {ended}");
        let logs = s.logs();
        let at = |needle: &str| {
            logs.lines()
                .position(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{sig}: no {needle:?} in\n{logs}"))
        };
        let order = [
            at("\"shutting down\""),
            at("shutting down: no new connections"),
            at("node-doctor stopped"),
        ];
        assert!(order.is_sorted(), "{sig}: {order:?}\n{logs}");
        assert!(
            !logs.contains("after the grace period"),
            "{sig}: the client's connection held up the exit\n{logs}"
        );
        assert!(std::net::TcpStream::connect(s.addr).is_err(), "port closed");
    }
}

#[test]
fn json_logs_are_one_object_per_line() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    s.wait_ready(30);
    let logs = s.logs();
    assert!(!logs.is_empty());
    for line in logs.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string() && v["message"].is_string(), "{line}");
    }
    assert!(
        logs.contains("\"message\":\"node-doctor serving\""),
        "{logs}"
    );
}

/// A collector whose host file hangs every access (a FUSE mount that never answers, as a
/// dead NFS or FUSE mount does; a FIFO no longer blocks anything, the readers refuse it) must
/// time out while `/findings` keeps answering within 100 ms and the other collectors keep
/// reporting. `<root>/proc/diskstats` is read by the `load` collector alone (`kernel` also
/// reads `loadavg`, so a hang there would block two collectors).
#[test]
fn a_blocked_collector_times_out_while_the_agent_keeps_answering() {
    let _machine = crate::support::exclusive();
    let hung = match crate::support::HungFs::open() {
        Ok(h) => h,
        Err(why) => {
            collectors::skip!(
                "SKIP a_blocked_collector_times_out_while_the_agent_keeps_answering: {why}"
            );
            return;
        }
    };
    let root = FakeRoot::quiet();
    root.write("/proc/diskstats", "");
    let mut args = vec!["--node-name", "e2e-node", "--log-format", "json"];
    args.extend(["--collector-timeout", "2s", "--interval", "3s"]);
    let s = Server::start_with(root.root(), &args, |cmd| {
        hung.mount_in(cmd, &root.path("/proc/diskstats"))
    });
    // A failure guard only: the claim is the collector's own "timed out after 2s".
    let deadline = Instant::now() + Duration::from_secs(60);
    // Answers received while `load`'s read hung: a server that waited on the collector would
    // answer once the run timed out (two seconds in), not before.
    let mut answered_while_hung = 0;
    let v = loop {
        // /readyz first: when the /findings after it still shows load's run in flight, the
        // /readyz answer came before the timeout too, and must say not ready, naming load.
        let ready = s.get("/readyz");
        let v = s.get("/findings").json();
        let load = v["collectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "load")
            .cloned()
            .expect("load collector listed");
        if load["status"] == "error" {
            let msg = load["message"].as_str().unwrap();
            assert!(msg.starts_with("timed out after 2s"), "{msg}");
            break v;
        }
        assert_eq!(ready.status, 503, "{}", ready.text());
        assert!(ready.text().contains("load"), "{}", ready.text());
        answered_while_hung += 1;
        assert!(Instant::now() < deadline, "load never timed out: {v:#}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        answered_while_hung >= 3,
        "/findings answered {answered_while_hung} times before load's run timed out"
    );
    assert_contract(&v, "e2e-node");
    assert_eq!(s.get("/readyz").status, 200);
    // The other collectors ran and keep running (last_run advances past the next interval).
    let others: Vec<Value> = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] != "load")
        .cloned()
        .collect();
    for c in &others {
        assert!(!c["last_run"].is_null(), "{c}");
    }
    let later = s.wait_findings(10, "other collectors run again", |v| {
        v["collectors"].as_array().unwrap().iter().all(|c| {
            c["name"] == "load"
                || others.iter().any(|o| {
                    o["name"] == c["name"] && o["last_run"].as_str() < c["last_run"].as_str()
                })
        })
    });
    // The stuck run is still in flight: the next cycle does not start another one.
    let load = later["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "load")
        .cloned()
        .unwrap();
    assert_eq!(load["status"], "error");
    assert!(load["message"].as_str().unwrap().contains("timed out"));
    let m = s.get("/metrics").text();
    assert!(
        m.contains("node_doctor_collector_up{collector=\"load\"} 0"),
        "{m}"
    );
}

#[test]
fn slow_request_headers_are_cut_off_and_do_not_block_others() {
    use std::io::{Read, Write};
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    let mut slow = std::net::TcpStream::connect(s.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(b"GET /findings HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let t = Instant::now();
    // Meanwhile other clients are served: this answer comes while the slow client's
    // connection is still open (nothing to read yet, not closed).
    let r = s.get("/healthz");
    assert_eq!(r.status, 200);
    slow.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let pending = slow.peek(&mut byte);
    assert!(
        matches!(&pending, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the slow client was dealt with first: {pending:?}"
    );
    slow.set_nonblocking(false).unwrap();
    // The server gives up on the incomplete headers after its 5 s header timeout: it
    // closes the connection itself (our 20 s read timeout would end in an error).
    let mut buf = Vec::new();
    let read = slow.read_to_end(&mut buf);
    let waited = t.elapsed();
    assert!(
        read.is_ok(),
        "not closed by the server: {read:?} after {waited:?}"
    );
    assert!(
        waited >= Duration::from_millis(4500),
        "closed after {waited:?}"
    );
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}
