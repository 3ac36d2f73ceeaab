//! Debian's real Prometheus scraping a real agent and evaluating the shipped alert rules
//! (manifests/overlays/prometheus-operator/prometheusrule.yaml, only their `for:` shortened so
//! the test takes seconds): the scrape is gzip-compressed (a recording proxy between them sees
//! Prometheus ask for it and the agent answer with it), the finding alerts fire with the
//! finding's title in a clean summary (no empty "()", no doubled space), their runbook link
//! answers 200 from the agent without a token, and the agent-down alert fires under a job
//! name of our own choosing once the agent is gone.
//!
//! Prometheus comes from Debian's `prometheus` package, unpacked (not installed: its package
//! starts a service) into the download cache by the test itself (support in debian.rs); or
//! `$ND_PROMETHEUS`, or `prometheus` on PATH. Without any, the test prints SKIP and why.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::debian::debian_binary;
use crate::support::{free_port, FakeRoot, Server};

/// A TCP proxy that records what passes: requests that accept gzip and responses that are
/// gzip-encoded.
struct Recorder {
    addr: SocketAddr,
    accept_gzip: Arc<AtomicUsize>,
    gzip_responses: Arc<AtomicUsize>,
    plain_metrics: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Recorder {
    fn start(upstream: SocketAddr) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let r = Recorder {
            addr,
            accept_gzip: Arc::default(),
            gzip_responses: Arc::default(),
            plain_metrics: Arc::default(),
            stop: Arc::default(),
        };
        let (accept_gzip, gzip, plain, stop) = (
            Arc::clone(&r.accept_gzip),
            Arc::clone(&r.gzip_responses),
            Arc::clone(&r.plain_metrics),
            Arc::clone(&r.stop),
        );
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let ag = Arc::clone(&accept_gzip);
                std::thread::spawn(move || {
                    pipe(client, server, |chunk| {
                        let text = String::from_utf8_lossy(chunk).to_ascii_lowercase();
                        ag.fetch_add(
                            text.matches("accept-encoding: gzip").count(),
                            Ordering::Relaxed,
                        );
                    })
                });
                let (gz, pl) = (Arc::clone(&gzip), Arc::clone(&plain));
                std::thread::spawn(move || {
                    pipe(s2, c2, |chunk| {
                        let text = String::from_utf8_lossy(chunk).to_ascii_lowercase();
                        gz.fetch_add(
                            text.matches("content-encoding: gzip").count(),
                            Ordering::Relaxed,
                        );
                        pl.fetch_add(
                            text.matches("# type node_doctor_").count(),
                            Ordering::Relaxed,
                        );
                    })
                });
            }
        });
        r
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to`, showing each chunk to `see`, until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream, see: impl Fn(&[u8])) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                see(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Prometheus on a loopback port, its data in a temp dir; killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(bin: &Path, scrape: SocketAddr, job: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let rules = dir.path().join("rules.yaml");
        std::fs::write(&rules, shipped_rules_fast()).expect("rules");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
rule_files:\n  - {}\n\
scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: ['{scrape}']\n",
                rules.display()
            ),
        )
        .expect("config");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, addr, dir };
        p.wait(Duration::from_secs(30), "Prometheus to be ready", |p| {
            get(p.addr, "/-/ready")
                .is_some_and(|(s, _)| s == 200)
                .then_some(())
        });
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn api(&self, path: &str) -> Value {
        let (status, body) = get(self.addr, path).unwrap_or((0, String::new()));
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// Polls `f` until it gives a value or `within` passes.
    fn wait<T>(&self, within: Duration, what: &str, f: impl Fn(&Prometheus) -> Option<T>) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "waited {within:?} for {what}; Prometheus log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The firing alerts named `name`.
    fn firing(&self, name: &str) -> Vec<Value> {
        let v = self.api("/api/v1/alerts");
        v["data"]["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a["labels"]["alertname"] == name && a["state"] == "firing")
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped rule groups as a plain rule file, every `for:` at 1 s (the only change).
fn shipped_rules_fast() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/overlays/prometheus-operator/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).expect("prometheusrule.yaml");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let mut groups = doc["spec"]["groups"].clone();
    for g in groups.as_sequence_mut().expect("groups") {
        for r in g["rules"].as_sequence_mut().expect("rules") {
            if r.get("for").is_some() {
                r["for"] = serde_yaml::Value::from("1s");
            }
        }
    }
    let mut out = serde_yaml::Mapping::new();
    out.insert("groups".into(), groups);
    serde_yaml::to_string(&out).expect("yaml")
}

/// One GET over HTTP/1.1 (`Connection: close`): status and body.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A node whose memory is nearly gone (memory.exhaustion, critical, no subject) and whose
/// load is over the warning bar (load.high_load, warning, no subject).
fn troubled_node() -> FakeRoot {
    let root = FakeRoot::quiet();
    root.write(
        "/proc/meminfo",
        "MemTotal:       24684084 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n",
    );
    root.write("/proc/loadavg", "5.00 4.00 3.00 3/94 21971\n");
    root
}

#[test]
fn real_prometheus_scrapes_gzip_and_the_shipped_alerts_read_cleanly() {
    let bin = match debian_binary("ND_PROMETHEUS", "prometheus", "usr/bin/prometheus") {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!(
                "SKIP real_prometheus_scrapes_gzip_and_the_shipped_alerts_read_cleanly: {why}"
            );
            return;
        }
    };
    let root = troubled_node();
    let mut agent = Server::start(
        root.root(),
        &["--collector", "memory,load", "--interval", "1s"],
    );
    let proxy = Recorder::start(agent.addr);
    // A scrape job name of our own: the agent-down alert must not depend on it.
    let prom = Prometheus::start(&bin, proxy.addr, "nd-e2e");

    let alerts = prom.wait(
        Duration::from_secs(60),
        "the critical finding's alert",
        |p| {
            let a = p.firing("NodeDoctorCriticalFinding");
            (!a.is_empty()).then_some(a)
        },
    );
    let findings = agent.get("/findings").json();
    let title_of = |id: &str| -> String {
        findings["findings"]
            .as_array()
            .and_then(|fs| fs.iter().find(|f| f["id"] == id))
            .and_then(|f| f["title"].as_str())
            .unwrap_or_else(|| panic!("no {id} in /findings: {findings:#}"))
            .to_string()
    };
    let crit = alerts
        .iter()
        .find(|a| a["labels"]["id"] == "memory.exhaustion")
        .unwrap_or_else(|| panic!("no memory.exhaustion alert: {alerts:#?}"));
    let summary = crit["annotations"]["summary"].as_str().unwrap_or_default();
    let title = title_of("memory.exhaustion");
    assert_eq!(summary, format!("node {}: {title}", proxy.addr), "{crit:#}");
    for text in [
        summary,
        crit["annotations"]["description"].as_str().unwrap_or(""),
    ] {
        assert!(!text.contains("()") && !text.contains("  "), "{text:?}");
        assert!(!text.contains("github.com"), "{text:?}");
    }
    assert!(
        crit["annotations"]["description"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("curl -s http://{}/findings", proxy.addr))),
        "{crit:#}"
    );

    // The runbook is this agent's page of the rule (no --docs-url): it answers 200 with the
    // rule's page, without a token.
    let runbook = crit["annotations"]["runbook_url"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        runbook,
        format!("http://{}/rules/memory.exhaustion", agent.addr),
        "{crit:#}"
    );
    let path = runbook
        .split_once(&agent.addr.to_string())
        .map_or("", |x| x.1);
    let (status, page) = get(agent.addr, path).expect("the runbook answers");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<code>memory.exhaustion</code>"), "{page}");

    // The warning, also without a subject.
    let warn = prom.wait(Duration::from_secs(60), "the warning's alert", |p| {
        p.firing("NodeDoctorWarningFinding")
            .into_iter()
            .find(|a| a["labels"]["id"] == "load.high_load")
    });
    assert_eq!(
        warn["annotations"]["summary"].as_str().unwrap_or_default(),
        format!("node {}: {}", proxy.addr, title_of("load.high_load")),
        "{warn:#}"
    );

    // The scrapes asked for gzip and got it; no uncompressed exposition passed.
    assert!(proxy.accept_gzip.load(Ordering::Relaxed) > 0);
    assert!(
        proxy.gzip_responses.load(Ordering::Relaxed) > 0,
        "no gzip response reached Prometheus"
    );
    assert_eq!(proxy.plain_metrics.load(Ordering::Relaxed), 0);
    let targets = prom.api("/api/v1/targets");
    assert_eq!(
        targets["data"]["activeTargets"][0]["health"], "up",
        "{targets:#}"
    );

    // The agent goes away: the agent-down alert fires under our job name.
    agent.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = agent.wait_exit(10);
    let down = prom.wait(Duration::from_secs(60), "the agent-down alert", |p| {
        p.firing("NodeDoctorAgentDown").into_iter().next()
    });
    assert_eq!(down["labels"]["job"], "nd-e2e", "{down:#}");
    let d = down["annotations"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(!d.contains("  ") && !d.contains("()"), "{d:?}");
}
