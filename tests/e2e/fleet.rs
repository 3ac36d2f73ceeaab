//! `node-doctor fleet` as a person runs it: the binary against the stand-in API server with a
//! staged cluster (kube_standin::fleet_stage), its cost on 5,000 nodes (printed, not asserted
//! on wall time: the machine is shared), the kubectl plugin's name, and `--prometheus`
//! against Debian's real Prometheus scraping three agents on staged roots.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_standin::fleet_stage;
use kube_standin::{Options, Rbac, StandIn};
use serde_json::Value;

use crate::debian::debian_binary;
use crate::support::{free_port, shipped_bin, FakeRoot, Server};

fn classes() -> Vec<fleet_stage::Class> {
    collectors::rules::RuleBook::node_conditions()
        .iter()
        .map(|c| fleet_stage::Class {
            ctype: c.ctype.clone(),
            healthy_reason: c.healthy_reason.clone(),
            healthy_message: c.healthy_message.clone(),
        })
        .collect()
}

/// The stand-in with manifests/fleet's RBAC and `n` staged nodes.
fn staged(n: usize) -> StandIn {
    let rbac = Rbac::from_manifests(
        &kube_standin::shipped_manifests().join("../fleet"),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        "node-doctor-fleet",
    )
    .expect("manifests/fleet");
    let s = StandIn::start(Options {
        rbac: Some(rbac),
        record_bodies: false,
        workers: 2,
        ..Options::default()
    });
    fleet_stage::stage(&s, n, &classes());
    s
}

/// What one run cost: wall time, CPU seconds (user + system), peak RSS, exit code, stdout.
struct Run {
    wall: Duration,
    cpu: f64,
    max_rss_kib: u64,
    code: i32,
    stdout: Vec<u8>,
}

/// The process's `VmHWM` (peak resident set, KiB) while it runs. Not `ru_maxrss` from wait4:
/// a child spawned from this test process starts inside its address space (vfork), and the
/// kernel carries that peak across exec into `ru_maxrss`.
fn vm_hwm(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs `bin` with `args`, its stdout to a file; samples its peak RSS until it exits and
/// reaps it with wait4 for its CPU time.
fn run_measured(bin: &Path, args: &[&str]) -> Run {
    let out = tempfile::NamedTempFile::new().expect("stdout file");
    let start = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdout(out.reopen().expect("reopen"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start node-doctor fleet");
    let pid = child.id();
    let mut hwm = 0;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let Some(h) = vm_hwm(pid) {
            hwm = hwm.max(h);
        }
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid as libc::pid_t {
            break;
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        std::thread::sleep(Duration::from_millis(2));
    }
    let wall = start.elapsed();
    std::mem::forget(child);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        wall,
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        max_rss_kib: hwm,
        code: if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
        stdout: std::fs::read(out.path()).expect("read stdout"),
    }
}

fn classes_of(doc: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = doc["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap_or("").to_string(),
                c["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The benchmark (scripts/bench-fleet.sh runs it on the release build; docs/cost.md keeps the
/// figures): 5,000 staged nodes, a paging server and one that answers everything at once.
#[test]
fn fleet_on_5000_nodes_prints_its_cost() {
    let bin = shipped_bin();
    let n = 5000;
    for ignore_limit in [false, true] {
        let s = staged(n);
        s.ignore_list_limit(ignore_limit);
        let dir = tempfile::tempdir().expect("tempdir");
        let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
        let kc = kc.to_str().expect("utf-8 path");
        let run = run_measured(&bin, &["fleet", "--kubeconfig", kc, "--format", "json"]);
        let doc: Value = serde_json::from_slice(&run.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&run.stdout)));
        let c = s.counts();
        println!(
            "fleet on {n} nodes ({}): wall {:.2} s, CPU {:.2} s, max RSS {:.1} MiB, requests {} ({} node lists, {} event lists), exit {}",
            if ignore_limit { "server answers the whole list at once" } else { "paged, 1000 a page" },
            run.wall.as_secs_f64(),
            run.cpu,
            run.max_rss_kib as f64 / 1024.0,
            c.node_lists + c.event_lists,
            c.node_lists,
            c.event_lists,
            run.code
        );
        assert_eq!(run.code, 2, "the hardware class is critical");
        assert_eq!(doc["nodes"], n);
        assert_eq!(
            classes_of(&doc),
            [
                ("NodeDoctorClockUnsynchronised", "shared"),
                ("NodeDoctorDNSUnhealthy", "shared"),
                ("NodeDoctorFrequentUnregisterNetDevice", "shared"),
                ("NodeDoctorHardwareFailure", "node-local"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let class = |name: &str| -> &Value {
            doc["classes"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["class"] == name))
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let groups = |name: &str| -> Vec<String> {
            class(name)["shared_by"]
                .as_array()
                .map(|gs| {
                    gs.iter()
                        .map(|g| {
                            format!(
                                "{} {} {}/{}",
                                g["dimension"], g["value"], g["nodes"], g["of"]
                            )
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let zone_a = (0..n).filter(|&i| fleet_stage::zone(i) == 0).count();
        let new_kernel = (0..n).filter(|&i| fleet_stage::kernel(i) == 1).count();
        assert_eq!(
            groups("NodeDoctorDNSUnhealthy"),
            [format!(
                "\"zone\" \"{}\" {zone_a}/{zone_a}",
                fleet_stage::ZONES[0]
            )]
        );
        assert_eq!(
            groups("NodeDoctorFrequentUnregisterNetDevice"),
            [format!(
                "\"kernel\" \"{}\" {new_kernel}/{new_kernel}",
                fleet_stage::KERNELS[1]
            )]
        );
        assert!(groups("NodeDoctorClockUnsynchronised").is_empty());
        assert!(groups("NodeDoctorHardwareFailure").is_empty());
        assert_eq!(class("NodeDoctorHardwareFailure")["nodes"], 3);
        assert_eq!(class("NodeDoctorClockUnsynchronised")["nodes"], n);
        assert!(
            c.node_lists + c.event_lists <= (n / 500) as u64,
            "{c:?}: at most one request per 500 nodes"
        );
        // Memory is bounded by what the report keeps, not by the answer's size (the
        // staged list is 58 MB of JSON when answered at once).
        assert!(
            run.max_rss_kib < 100 * 1024,
            "max RSS {} KiB",
            run.max_rss_kib
        );
    }
}

/// `kubectl node-doctor fleet`: the binary as `kubectl-node_doctor` on PATH.
#[test]
fn fleet_runs_as_the_kubectl_plugin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = dir.path().join("kubectl-node_doctor");
    symlink(shipped_bin(), &plugin).expect("symlink");
    let help = Command::new(&plugin)
        .args(["fleet", "--help"])
        .output()
        .expect("run the plugin");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("Usage: kubectl node-doctor fleet"), "{text}");

    let s = staged(50);
    let kc = s.kubeconfig(&dir.path().join("kc"), kube_standin::DEFAULT_TOKEN);
    let kubectl = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file());
    let Some(kubectl) = kubectl else {
        collectors::skip!("SKIP fleet_runs_as_the_kubectl_plugin (kubectl part): no kubectl");
        return;
    };
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(kubectl)
        .args(["node-doctor", "fleet"])
        .env("PATH", path)
        .env("KUBECONFIG", &kc)
        .env("HOME", dir.path())
        .output()
        .expect("kubectl node-doctor fleet");
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("node-doctor fleet · 50 nodes"), "{table}");
    assert!(
        table.contains("shared by: zone eu-west-1a (17 of 17)"),
        "{table}"
    );
}

/// Prometheus scraping three agents whose roots stage findings with subjects: `fleet
/// --prometheus` lists each finding with its node (the `instance` label) and subject.
#[test]
fn fleet_lists_prometheus_findings_with_node_and_subject() {
    let prom_bin = match debian_binary("ND_PROMETHEUS", "prometheus", "usr/bin/prometheus") {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!("SKIP fleet_lists_prometheus_findings_with_node_and_subject: {why}");
            return;
        }
    };
    // node-a and node-b: bad blocks on a disk (hardware.bad_blocks, subject the disk);
    // node-c: memory nearly gone (memory.exhaustion, no subject).
    let roots: Vec<(&str, FakeRoot)> = vec![("node-a", "sdb"), ("node-b", "sdc"), ("node-c", "")]
        .into_iter()
        .map(|(node, disk)| {
            let r = FakeRoot::quiet();
            if disk.is_empty() {
                r.write(
                    "/proc/meminfo",
                    "MemTotal:       24684084 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n",
                );
            } else {
                r.write(&format!("/sys/block/{disk}/badblocks"), "1234 8\n4096 16\n");
            }
            (node, r)
        })
        .collect();
    let agents: Vec<(&str, Server)> = roots
        .iter()
        .map(|(node, r)| {
            // The node is the `instance` label Prometheus gives the target (below).
            let s = Server::start(
                r.root(),
                &["--collector", "hardware,memory", "--interval", "1s"],
            );
            (*node, s)
        })
        .collect();
    let pdir = tempfile::tempdir().expect("tempdir");
    let mut targets = String::new();
    for (node, s) in &agents {
        targets.push_str(&format!(
            "      - targets: ['{}']\n        labels: {{instance: '{node}'}}\n",
            s.addr
        ));
    }
    let config = pdir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: node-doctor\n    static_configs:\n{targets}"),
    )
    .expect("config");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut prom = Command::new(&prom_bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            pdir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _prom = Kill(&mut prom);

    let s = staged(3);
    let kdir = tempfile::tempdir().expect("tempdir");
    let kc = s.kubeconfig(kdir.path(), kube_standin::DEFAULT_TOKEN);
    let url = format!("http://{addr}");
    let want = [
        ("hardware.bad_blocks", "node-a", "sdb"),
        ("hardware.bad_blocks", "node-b", "sdc"),
        ("memory.exhaustion", "node-c", ""),
    ];
    let deadline = Instant::now() + Duration::from_secs(90);
    let doc = loop {
        let out = Command::new(shipped_bin())
            .args(["fleet", "--format", "json", "--prometheus", &url])
            .arg("--kubeconfig")
            .arg(&kc)
            .output()
            .expect("fleet");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let have = |id: &str, node: &str, subject: &str| {
            doc["findings"].as_array().is_some_and(|fs| {
                fs.iter()
                    .any(|f| f["id"] == id && f["node"] == node && f["subject"] == subject)
            })
        };
        if want.iter().all(|(i, n, s)| have(i, n, s)) {
            assert_eq!(out.status.code(), Some(2), "{doc:#}");
            break doc;
        }
        assert!(
            Instant::now() < deadline,
            "fleet --prometheus never listed {want:?}: {doc:#} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for f in doc["findings"].as_array().expect("findings") {
        assert!(f["title"].as_str().is_some_and(|t| !t.is_empty()), "{f}");
        assert!(
            ["critical", "warning", "info"].contains(&f["severity"].as_str().unwrap_or("")),
            "{f}"
        );
    }
    // The table shows them too, each with its node and subject.
    let out = Command::new(shipped_bin())
        .args(["fleet", "--prometheus", &url])
        .arg("--kubeconfig")
        .arg(&kc)
        .output()
        .expect("fleet");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("Findings from Prometheus"), "{table}");
    assert!(
        table.contains("    node-a  sdb") && table.contains("    node-b  sdc"),
        "{table}"
    );
    drop(agents);
}

/// What the fleet page of the 50-node staged cluster must show, each class with the group the
/// report names for it (the same patterns `fleet_runs_as_the_kubectl_plugin` reads in the
/// table): what is missing from a rendered page, as messages.
fn check_fleet_page(f: &crate::browser::Facts) -> Vec<String> {
    let want = [
        ("NodeDoctorHardwareFailure", "node-local"),
        ("NodeDoctorClockUnsynchronised", "shared"),
        (
            "NodeDoctorFrequentUnregisterNetDevice",
            "6.1.0-28-cloud-amd64",
        ),
        ("NodeDoctorDNSUnhealthy", "eu-west-1a"),
    ];
    let mut bad = Vec::new();
    for (class, group) in want {
        match f.text.lines().find(|l| l.contains(class)) {
            None => bad.push(format!(
                "class {class} is not on the page at {:?}",
                f.viewport
            )),
            Some(line) if !f.text.contains(group) => bad.push(format!(
                "class {class} ({line:?}) without {group:?} at {:?}",
                f.viewport
            )),
            Some(_) => {}
        }
    }
    bad
}

/// `fleet --format html` opened in a real browser (headless chromium, [`crate::browser`]), as
/// an SRE opens the file it wrote: every planted class with its grouping, nothing logged to
/// the console, no request leaving the file, nothing scrolling sideways at a laptop's or a
/// phone's width. Screenshots: `target/browser-screenshots/fleet-*.png`. The checker is shown
/// failing on a copy with one class taken out.
#[test]
fn fleet_html_shows_every_class_in_a_real_browser() {
    use crate::browser::{self, check_page, Browser, DESKTOP, PHONE};
    let name = "fleet_html_shows_every_class_in_a_real_browser";
    let mut b = match Browser::launch() {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!("SKIP {name}: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let s = staged(50);
    let kc = s.kubeconfig(&dir.path().join("kc"), kube_standin::DEFAULT_TOKEN);
    let out = Command::new(shipped_bin())
        .args(["fleet", "--format", "html", "--kubeconfig"])
        .arg(&kc)
        .output()
        .expect("node-doctor fleet --format html");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).expect("UTF-8 page");
    let page = dir.path().join("fleet.html");
    std::fs::write(&page, &html).expect("write the page");
    let shots = browser::artefacts();
    let _ = std::fs::create_dir_all(&shots);
    let mut problems = Vec::new();
    for size in [DESKTOP, PHONE] {
        let shot = shots.join(format!("fleet-{}.png", size.0));
        let f = b
            .open(page.to_str().expect("UTF-8 path"), size, Some(&shot))
            .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(f.title.contains("fleet"), "title {:?}", f.title);
        problems.extend(check_page(&f, "file://"));
        problems.extend(check_fleet_page(&f));
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // The same checks on a copy without the DNS class: named.
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        html.replace("NodeDoctorDNSUnhealthy", "NodeDoctorSomethingElse"),
    )
    .expect("write the broken copy");
    let f = b
        .open(broken.to_str().expect("UTF-8 path"), DESKTOP, None)
        .expect("open the broken copy");
    let bad = check_fleet_page(&f);
    assert!(
        bad.iter()
            .any(|p| p.contains("class NodeDoctorDNSUnhealthy is not on the page")),
        "{bad:#?}"
    );
}
