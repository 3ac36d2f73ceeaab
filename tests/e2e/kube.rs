//! The built binary's Kubernetes reporter (`serve --kube-report`) against the stand-in API
//! server (`kube-standin`: HTTPS with a CA made here, a bearer token, RBAC read from the
//! shipped manifests, the real server's rules for node status patches and events, every
//! stored object validated against the official Kubernetes schemas).

use std::time::{Duration, Instant};

use kube_standin::{Fault, FaultAction, Options, Rbac, StandIn};
use serde_json::{json, Value};

use crate::support::{FakeRoot, Server};

const NODE: &str = "fake-node";

fn standin() -> StandIn {
    let rbac = Rbac::from_manifests(
        &kube_standin::shipped_manifests(),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAME,
    )
    .expect("the shipped RBAC");
    let s = StandIn::start(Options {
        rbac: Some(rbac),
        ..Options::default()
    });
    s.add_node(
        NODE,
        vec![json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": "2026-11-23T14:00:00Z", "lastTransitionTime": "2026-11-23T09:00:00Z"})],
    );
    s
}

fn serve(root: &FakeRoot, kubeconfig: &std::path::Path) -> Server {
    Server::start_with(
        root.root(),
        &[
            "--interval=1s",
            "--collector=load",
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-clear-after=0s",
            "--kube-write-interval=0s",
        ],
        |c| {
            c.env("KUBECONFIG", kubeconfig);
        },
    )
}

fn wait_for(secs: u64, what: &str, server: &Server, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; logs:\n{}",
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status_of(s: &StandIn, ctype: &str) -> Option<String> {
    s.condition(NODE, ctype)
        .and_then(|c| c.get("status").and_then(Value::as_str).map(str::to_string))
}

#[test]
fn kube_reporter_sets_and_clears_a_condition_with_events() {
    let s = standin();
    let root = FakeRoot::quiet();
    // 2 CPUs, load1 9.5: high load on every sample.
    root.write("/proc/loadavg", "9.50 8.00 7.00 9/300 21971\n");
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let server = serve(&root, &kc);

    wait_for(30, "NodeDoctorHighLoad True", &server, || {
        status_of(&s, "NodeDoctorHighLoad").as_deref() == Some("True")
    });
    let c = s.condition(NODE, "NodeDoctorHighLoad").unwrap();
    assert_eq!(c["reason"], "LoadHigh");
    let msg = c["message"].as_str().unwrap();
    assert!(msg.starts_with("load.high_load: "), "{msg}");
    // The link is this agent's own page of the rule (no --docs-url), and it answers.
    let link = format!("http://{}/rules/load.high_load", server.addr);
    assert!(
        msg.ends_with(&format!(
            " More: node-doctor explain load.high_load; {link}"
        )),
        "{msg}"
    );
    assert_eq!(server.get("/rules/load.high_load").status, 200);
    let set_at = c["lastTransitionTime"].as_str().unwrap().to_string();
    wait_for(10, "a Warning LoadHigh event", &server, || {
        s.events()
            .iter()
            .any(|e| e["reason"] == "LoadHigh" && e["type"] == "Warning")
    });
    let ready = server.get("/readyz").text();
    assert!(ready.contains("kubernetes reporter: ok"), "{ready}");
    // What the cluster shows while the problem lasts (docs/kubernetes.md "What it looks like").
    println!("{ready}");
    println!(
        "{}",
        kube_standin::describe::conditions(&s.node(NODE).unwrap())
    );
    println!("{}", kube_standin::describe::events(&s.events()));
    // /metrics is rendered with each snapshot: it shows the write by the next collector run.
    wait_for(10, "the status writes in /metrics", &server, || {
        server
            .get("/metrics")
            .text()
            .contains("node_doctor_kube_requests_total{request=\"patch_status\",code=\"200\"}")
    });

    // The load falls: the condition clears, with a later transition time.
    root.write("/proc/loadavg", "0.10 0.50 1.00 1/300 21971\n");
    wait_for(30, "NodeDoctorHighLoad False", &server, || {
        status_of(&s, "NodeDoctorHighLoad").as_deref() == Some("False")
    });
    let c = s.condition(NODE, "NodeDoctorHighLoad").unwrap();
    assert_eq!(c["reason"], "LoadIsNormal");
    assert!(c["lastTransitionTime"].as_str().unwrap() >= set_at.as_str());
    wait_for(10, "a Normal LoadIsNormal event", &server, || {
        s.events().iter().any(|e| e["reason"] == "LoadIsNormal")
    });
    let node = s.node(NODE).unwrap();
    assert_eq!(
        node["status"]["conditions"][0]["type"], "Ready",
        "the kubelet's condition stays"
    );
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
    assert!(
        s.requests().iter().all(|r| r.status < 400),
        "every request allowed by the shipped RBAC: {:#?}",
        s.requests()
    );
    // And once it cleared.
    println!("{}", kube_standin::describe::conditions(&node));
    println!("{}", kube_standin::describe::events(&s.events()));
}

/// While the reporter's request to the API server is held unanswered, /findings answers from
/// the snapshot: shown by order (every answer came while the stand-in still held the request,
/// and the reporter, with a 10-minute request timeout, was still waiting on it), not by a time
/// bound. Released, the reporter goes on and writes the node's status.
#[test]
fn kube_reporter_on_a_stalled_api_server_does_not_slow_findings() {
    let s = standin();
    s.fault(Fault {
        method: None,
        path_contains: "/api/".into(),
        times: 1000,
        action: FaultAction::Hold,
    });
    let root = FakeRoot::quiet();
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let server = Server::start_with(
        root.root(),
        &[
            "--interval=1s",
            "--collector=load",
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-clear-after=0s",
            "--kube-write-interval=0s",
            "--kube-request-timeout=600s",
        ],
        |c| {
            c.env("KUBECONFIG", &kc);
        },
    );
    server.wait_ready(30);
    wait_for(30, "the reporter's first request held", &server, || {
        s.held() >= 1
    });
    for _ in 0..10 {
        let r = server.get("/findings");
        assert_eq!(r.status, 200);
    }
    let ready = server.get("/readyz");
    assert_eq!(
        ready.status, 200,
        "the API server's state is detail, not readiness"
    );
    assert!(
        ready.text().contains("kubernetes reporter:"),
        "{}",
        ready.text()
    );
    // Every answer above came while the request was held: none has been answered yet.
    assert!(s.held() >= 1, "the held request ended early");
    assert!(
        s.requests().iter().all(|r| !r.path.contains("/api/")),
        "{:#?}",
        s.requests()
    );
    s.release_held();
    wait_for(
        30,
        "the node's status written after the release",
        &server,
        || {
            s.requests()
                .iter()
                .any(|r| r.method == "PATCH" && r.path.ends_with("/status") && r.status < 400)
        },
    );
    assert_eq!(s.held(), 0);
}

/// `--npd-config` with `--kube-report`: NPD's kernel-monitor.json's own condition types are
/// written (healthy: the config's defaults; ReadonlyFilesystem True with the rule's reason
/// when the kernel log remounts a filesystem read-only), its temporary rule is an Event with
/// the rule's reason, and both validate against the schemas.
#[test]
fn kube_reporter_writes_an_npd_config_conditions_and_events() {
    let s = standin();
    let root = FakeRoot::quiet();
    root.write(
        "/dev/kmsg",
        "\
2,11,86300000100,-;EXT4-fs (sda1): Remounting filesystem read-only
3,12,86350000000,-;Killed process 4211 (java) total-vm:812kB, anon-rss:401kB, file-rss:0kB
",
    );
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collectors/tests/fixtures/npd/shipped/kernel-monitor.json");
    let server = Server::start_with(
        root.root(),
        &[
            "--interval=1s",
            "--collector=npd",
            "--npd-config",
            config.to_str().unwrap(),
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-clear-after=0s",
            "--kube-write-interval=0s",
        ],
        |c| {
            c.env("KUBECONFIG", &kc);
        },
    );
    wait_for(30, "ReadonlyFilesystem True", &server, || {
        status_of(&s, "ReadonlyFilesystem").as_deref() == Some("True")
    });
    let c = s.condition(NODE, "ReadonlyFilesystem").unwrap();
    assert_eq!(c["reason"], "FilesystemIsReadOnly");
    assert!(c["message"]
        .as_str()
        .unwrap()
        .starts_with("npd.permanent (FilesystemIsReadOnly): "));
    // The config's other conditions: its healthy defaults.
    let k = s.condition(NODE, "KernelDeadlock").unwrap();
    assert_eq!(k["status"], "False");
    assert_eq!(k["reason"], "KernelHasNoDeadlock");
    assert_eq!(k["message"], "kernel has no deadlock");
    wait_for(10, "an OOMKilling event", &server, || {
        s.events()
            .iter()
            .any(|e| e["reason"] == "OOMKilling" && e["type"] == "Warning")
    });
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
    assert!(
        s.requests().iter().all(|r| r.status < 400),
        "{:#?}",
        s.requests()
    );
    println!(
        "{}",
        kube_standin::describe::conditions(&s.node(NODE).unwrap())
    );
    println!("{}", kube_standin::describe::events(&s.events()));
}

/// A config naming a type node-doctor writes itself under --kube-npd-names is refused.
#[test]
fn an_npd_config_naming_node_doctors_own_npd_type_is_refused_with_kube_npd_names() {
    let root = FakeRoot::quiet();
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collectors/tests/fixtures/npd/shipped/readonly-monitor.json");
    let out = crate::support::run(
        &[
            "serve",
            "--host-root",
            root.root().to_str().unwrap(),
            "--npd-config",
            config.to_str().unwrap(),
            "--kube-report",
            "--kube-npd-names",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("ReadonlyFilesystem") && err.contains("NodeDoctorReadonlyFilesystem"),
        "{err}"
    );
}

/// `--kube-npd-names` replaces node-problem-detector's kernel monitor for a single corrected
/// memory error and a single corrected CPER record, below node-doctor's burst threshold: each
/// is an info finding, counted on /metrics, and the stand-in API server receives the Event
/// NPD writes for the line (`MemoryReadError`, `CperHardwareErrorCorrected`; type Warning, the
/// line as its message).
#[test]
fn kube_npd_names_write_npds_events_for_one_corrected_hardware_error() {
    let s = standin();
    let root = FakeRoot::quiet();
    let edac = "EDAC MC3: 1 CE memory read error on CPU_SrcID#0_Channel#0_DIMM#0 (channel:0 slot:0 page:0x12345 offset:0x0 grain:32 syndrome:0x0 -  area:DRAM err_code:0001:0090 socket:0 channel_mask:1 rank:0)";
    let cper = "{37}[Hardware Error]: event severity: corrected";
    root.write(
        "/dev/kmsg",
        &format!(
            "4,10,86300000000,-;{edac}\n\
             3,11,86310000000,-;{{37}}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 162\n\
             3,12,86310000010,-;{cper}\n\
             3,13,86310000020,-;{{37}}[Hardware Error]:   section_type: memory error\n"
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let server = Server::start_with(
        root.root(),
        &[
            "--interval=1s",
            "--collector=hardware",
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-npd-names",
            "--kube-clear-after=0s",
            "--kube-write-interval=0s",
        ],
        |c| {
            c.env("KUBECONFIG", &kc);
        },
    );
    let event = |reason: &str| s.events().into_iter().find(|e| e["reason"] == reason);
    wait_for(
        30,
        "MemoryReadError and CperHardwareErrorCorrected events",
        &server,
        || event("MemoryReadError").is_some() && event("CperHardwareErrorCorrected").is_some(),
    );
    for (reason, line) in [
        ("MemoryReadError", edac),
        ("CperHardwareErrorCorrected", cper),
    ] {
        let e = event(reason).unwrap();
        assert_eq!(e["type"], "Warning", "{reason}: {e}");
        assert_eq!(e["message"], line, "{reason}: {e}");
        assert_eq!(e["count"], 1, "{reason}: {e}");
        assert_eq!(e["involvedObject"]["kind"], "Node", "{reason}: {e}");
        assert_eq!(e["source"]["component"], "node-doctor", "{reason}: {e}");
    }
    // No event under node-doctor's own names for the same lines.
    assert!(s
        .events()
        .iter()
        .all(|e| !e["reason"].as_str().unwrap_or("").starts_with("NodeDoctor")));
    // The findings are info, with their figures; the lines are counted on /metrics.
    let findings = server.get("/findings").json();
    let find = |id: &str| {
        findings["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {findings}"))
            .clone()
    };
    let mem = find("hardware.memory_corrected");
    assert_eq!(mem["severity"], "info");
    assert_eq!(mem["subject"], "mc3");
    assert_eq!(mem["evidence"]["ce_in_window"], 1);
    assert_eq!(mem["evidence"]["threshold"], 10);
    let rec = find("hardware.cper");
    assert_eq!(rec["severity"], "info");
    assert_eq!(rec["subject"], "corrected");
    assert_eq!(rec["evidence"]["records"], 1);
    assert_eq!(rec["evidence"]["sections"], "memory error");
    let metrics = server.get("/metrics").text();
    for series in [
        "node_doctor_hardware_kernel_log_events_total{kind=\"edac_ce\"} 1.0",
        "node_doctor_hardware_cper_records_total{severity=\"corrected\"} 1.0",
    ] {
        assert!(metrics.contains(series), "{series}\n{metrics}");
    }
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
    assert!(
        s.requests().iter().all(|r| r.status < 400),
        "{:#?}",
        s.requests()
    );
    println!("{}", kube_standin::describe::events(&s.events()));
}

/// `serve` with the node monitoring agent's names (`--kube-names nma`) against `kc`, the
/// hardware collector only, no hold-down or write spacing.
fn serve_nma(root: &FakeRoot, kc: &std::path::Path) -> Server {
    Server::start_with(
        root.root(),
        &[
            "--interval=1s",
            "--collector=hardware",
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-names=nma",
            "--kube-clear-after=0s",
            "--kube-write-interval=0s",
        ],
        |c| {
            c.env("KUBECONFIG", kc);
        },
    )
}

/// An uncorrected memory error (EDAC's counter) is KernelReady False with the stable reason
/// HardwareFailure, as Karpenter's repair policy reads it; its lastTransitionTime survives two
/// agent restarts; a controller with a 2-second toleration counted from it acts on the node,
/// and on nothing else (no other type is False).
#[test]
fn kube_nma_names_a_hardware_failure_is_repaired_after_two_restarts() {
    let s = standin();
    let root = FakeRoot::quiet();
    root.write("/sys/devices/system/edac/mc/mc0/ce_count", "0\n");
    root.write("/sys/devices/system/edac/mc/mc0/ue_count", "1\n");
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let ltt = |s: &StandIn| {
        s.condition(NODE, "KernelReady")
            .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
    };
    let mut since = None;
    for run in 0..3 {
        let server = serve_nma(&root, &kc);
        wait_for(30, "KernelReady False", &server, || {
            status_of(&s, "KernelReady").as_deref() == Some("False")
        });
        // This instance took over the node (its GET), then had three ticks to get the
        // timer wrong.
        wait_for(30, "this instance's take-over", &server, || {
            s.requests().iter().any(|r| r.method == "GET")
        });
        std::thread::sleep(Duration::from_secs(3));
        let now = ltt(&s);
        match &since {
            None => since = now,
            Some(first) => assert_eq!(now.as_ref(), Some(first), "restart {run} reset the timer"),
        }
        drop(server);
        s.clear_requests();
    }
    let c = s.condition(NODE, "KernelReady").unwrap();
    assert_eq!(c["reason"], "HardwareFailure", "{c:#}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("hardware.memory_uncorrected"),
        "{c:#}"
    );
    // Karpenter's way: type, status, toleration from lastTransitionTime.
    let since = time::OffsetDateTime::parse(
        since.as_deref().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while time::OffsetDateTime::now_utc() - since < time::Duration::seconds(2) {
        assert!(
            Instant::now() < deadline,
            "the clock did not pass the toleration"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The controller's decision: each condition matching a policy (type, status False) whose
    // toleration (2 s here) has run from its lastTransitionTime.
    let node = s.node(NODE).unwrap();
    let due_types: Vec<&str> = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "False")
        .filter(|c| {
            c["lastTransitionTime"].as_str().is_some_and(|t| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .is_ok_and(|t| {
                        time::OffsetDateTime::now_utc() - t >= time::Duration::seconds(2)
                    })
            })
        })
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        due_types,
        ["KernelReady"],
        "the node is repaired, for its hardware alone"
    );
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
}

/// Runs `serve` with `args` (and `KUBECONFIG` when given) until it exits, at most 30 s (then
/// it is killed and the test fails): its exit code and stderr.
fn serve_until_exit(args: &[&str], kubeconfig: Option<&std::path::Path>) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(crate::support::node_doctor_bin());
    cmd.arg("serve")
        .arg("--listen=127.0.0.1:0")
        .args(args)
        .env_remove("NODE_NAME")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap());
    if let Some(kc) = kubeconfig {
        cmd.env("KUBECONFIG", kc);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "node-doctor did not stop:\n{}",
                std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    (status.code(), err)
}

/// `--kube-names nma` refuses to start (exit 64) where the node monitoring agent's process is
/// in the host's process table.
#[test]
fn kube_nma_names_are_refused_where_the_nma_runs() {
    let root = FakeRoot::quiet();
    root.write("/proc/4242/comm", "eks-node-monito\n");
    root.write(
        "/proc/4242/cmdline",
        "/usr/local/bin/eks-node-monitoring-agent\0--probe-address=:8002\0",
    );
    let (code, err) = serve_until_exit(
        &[
            "--host-root",
            root.root().to_str().unwrap(),
            "--kube-report",
            "--kube-names",
            "nma",
        ],
        None,
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("EKS node monitoring agent") && err.contains("4242"),
        "{err}"
    );
}

/// `--kube-names nma` stops (exit 64, saying which type and which writer) where another field
/// manager owns one of those types on the node.
#[test]
fn kube_nma_names_are_refused_where_another_writer_owns_the_types() {
    let s = standin();
    s.set_condition_as(
        NODE,
        "eks-node-monitoring-agent",
        json!({"type": "ContainerRuntimeReady", "status": "True", "reason": "ContainerRuntimeIsReady",
               "message": "ok", "lastHeartbeatTime": "2026-11-23T14:00:00Z",
               "lastTransitionTime": "2026-11-23T09:00:00Z"}),
    );
    let root = FakeRoot::quiet();
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let (code, err) = serve_until_exit(
        &[
            "--host-root",
            root.root().to_str().unwrap(),
            "--collector=hardware",
            "--node-name",
            NODE,
            "--kube-report",
            "--kube-names=nma",
        ],
        Some(&kc),
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("ContainerRuntimeReady") && err.contains("eks-node-monitoring-agent"),
        "{err}"
    );
    assert!(
        s.requests().iter().all(|r| r.method == "GET"),
        "nothing written: {:#?}",
        s.requests()
    );
    assert_eq!(
        s.condition(NODE, "ContainerRuntimeReady").unwrap()["status"],
        "True",
        "the other writer's condition untouched"
    );
}
