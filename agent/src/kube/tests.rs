//! The reporter against the stand-in API server (`kube-standin`: HTTPS with a CA made here,
//! bearer tokens, RBAC from the shipped manifests, the real server's patch and event rules,
//! every stored object validated against the official schemas), and the planner's rules on a
//! simulated clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::{Collection, Finding, Severity, Status, Text};
use kube_standin::{Fault, FaultAction, Options, Rbac, StandIn};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::classes::{self, Naming};
use super::client::{Api, ApiError, KubeApi};
use super::planner::{message, Planner, Settings, MAX_MESSAGE_BYTES};
use super::{view, Reporter};
use crate::kube_stats::Stats;
use crate::scheduler::fakes::{finding, with};
use crate::scheduler::{Outcome, RunReport};
use crate::state::{Snapshot, State};

pub(super) const NODE: &str = "worker-1";

pub(super) fn t(secs: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000 + secs).unwrap()
}

pub(super) fn settings() -> Settings {
    Settings {
        node: NODE.into(),
        naming: Naming::Own,
        heartbeat: Duration::from_secs(300),
        clear_after: Duration::ZERO,
        min_write_interval: Duration::ZERO,
        links: crate::links::Links::default(),
    }
}

/// A snapshot in which every collector of `runs` completed at `at` with these findings.
pub(super) fn snapshot(at: OffsetDateTime, runs: &[(&str, Collection)]) -> Snapshot {
    let names: Vec<String> = runs.iter().map(|(n, _)| n.to_string()).collect();
    let mut st = State::new(NODE, &names);
    for (name, c) in runs {
        st.apply(
            name,
            RunReport {
                outcome: Outcome::Completed(c.clone()),
                duration: Duration::ZERO,
                cpu_total: Duration::ZERO,
            },
            at,
        );
    }
    st.snapshot(at)
}

fn disk_full() -> Finding {
    finding(
        "disk.filesystem_full",
        "/var/lib/containerd",
        Severity::Critical,
    )
}

fn oom(kills: i64, ago: i64) -> Finding {
    Finding::new(
        "kernel.oom_cgroup",
        Severity::Warning,
        Text::new("OOM", "OOM"),
        Text::new(format!("{kills} kill(s)"), "x"),
    )
    .subject("0000abcd-0000-4000-8000-000000001072")
    .evidence("kills", kills)
    .evidence("last_seen_seconds_ago", ago)
}

pub(super) fn kubelet_ready() -> Value {
    json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
           "message": "kubelet is posting ready status",
           "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

fn npd_condition() -> Value {
    json!({"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock",
           "message": "kernel has no deadlock",
           "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

pub(super) fn standin_with_rbac() -> StandIn {
    let rbac = Rbac::from_manifests(
        &kube_standin::shipped_manifests(),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAME,
    )
    .expect("parse the shipped manifests");
    assert!(
        !rbac.sources.is_empty(),
        "manifests/base binds no role to the node-doctor ServiceAccount"
    );
    StandIn::start(Options {
        rbac: Some(rbac),
        ..Options::default()
    })
}

pub(super) async fn api_for(s: &StandIn, dir: &std::path::Path, token: &str) -> KubeApi {
    let kc = s.kubeconfig(dir, token);
    KubeApi::from_kubeconfig(&kc, NODE, Duration::from_secs(5))
        .await
        .expect("client from the stand-in's kubeconfig")
}

fn our_condition(s: &StandIn, ctype: &str) -> Value {
    s.condition(NODE, ctype)
        .unwrap_or_else(|| panic!("no {ctype} on the node: {:#}", s.node(NODE).unwrap()))
}

#[tokio::test]
async fn a_problem_sets_its_condition_and_a_warning_event_and_clearing_keeps_other_writers() {
    let s = standin_with_rbac();
    s.add_node(NODE, vec![kubelet_ready(), npd_condition()]);
    let dir = tempfile::tempdir().unwrap();
    let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
    let mut r = Reporter::new(settings(), api, Arc::new(Stats::default()));

    // Quiet node: every class written False with its healthy reason, nothing else touched.
    let quiet = snapshot(t(0), &[("disk", with(Status::Ok, vec![]))]);
    r.tick(t(0), Instant::now(), Some(&quiet)).await;
    let c = our_condition(&s, "NodeDoctorFilesystemFull");
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "FilesystemHasSpace");
    let t0 = c["lastTransitionTime"].as_str().unwrap().to_string();

    // One cycle with the problem: True, and a Warning event about the Node.
    s.clear_requests();
    let full = snapshot(t(15), &[("disk", with(Status::Ok, vec![disk_full()]))]);
    r.tick(t(15), Instant::now(), Some(&full)).await;
    let c = our_condition(&s, "NodeDoctorFilesystemFull");
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "FilesystemFull");
    let msg = c["message"].as_str().unwrap();
    assert!(
        msg.starts_with("disk.filesystem_full (/var/lib/containerd): "),
        "{msg}"
    );
    assert!(msg.contains("Fix: df -h /var/lib/containerd"), "{msg}");
    assert!(
        msg.ends_with(
            " More: node-doctor explain disk.filesystem_full; /rules/disk.filesystem_full"
        ),
        "{msg}"
    );
    let t1 = c["lastTransitionTime"].as_str().unwrap().to_string();
    assert!(t1 > t0, "{t1} after {t0}");
    let events = s.events();
    let warning = events
        .iter()
        .find(|e| e["reason"] == "FilesystemFull")
        .unwrap_or_else(|| panic!("no FilesystemFull event: {events:#?}"));
    assert_eq!(warning["type"], "Warning");
    assert_eq!(warning["metadata"]["namespace"], "default");
    let uid = s.node(NODE).unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        warning["involvedObject"],
        json!({"kind": "Node", "apiVersion": "v1", "name": NODE, "uid": uid})
    );
    assert_eq!(warning["source"]["component"], "node-doctor");
    // The writes of that cycle: one status patch, strategic merge, and the event.
    let writes: Vec<_> = s.requests().into_iter().filter(|r| r.is_write()).collect();
    assert_eq!(writes.len(), 2, "{writes:#?}");
    assert_eq!(
        writes[0].content_type,
        "application/strategic-merge-patch+json"
    );
    assert!(
        writes[0].user_agent.starts_with("node-doctor/"),
        "{}",
        writes[0].user_agent
    );

    // Nothing changed: no request at all.
    s.clear_requests();
    let still = snapshot(t(30), &[("disk", with(Status::Ok, vec![disk_full()]))]);
    r.tick(t(30), Instant::now(), Some(&still)).await;
    r.tick(t(45), Instant::now(), Some(&still)).await;
    assert!(s.requests().is_empty(), "{:#?}", s.requests());

    // It clears: False with a later transition time, a Normal event; the kubelet's and
    // node-problem-detector's conditions are untouched.
    let cleared = snapshot(t(60), &[("disk", with(Status::Ok, vec![]))]);
    r.tick(t(60), Instant::now(), Some(&cleared)).await;
    let c = our_condition(&s, "NodeDoctorFilesystemFull");
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "FilesystemHasSpace");
    assert!(c["lastTransitionTime"].as_str().unwrap() > t1.as_str());
    assert!(s
        .events()
        .iter()
        .any(|e| e["reason"] == "FilesystemHasSpace" && e["type"] == "Normal"));
    let node = s.node(NODE).unwrap();
    let conds = node["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds[0], kubelet_ready());
    assert_eq!(conds[1], npd_condition());
    assert_eq!(conds.len(), 2 + classes::conditions().len());
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
    // Every request was allowed by the shipped RBAC.
    assert!(s.requests().iter().all(|r| r.status < 300));
}

#[tokio::test]
async fn a_restart_takes_over_the_conditions_and_repeats_nothing() {
    let s = standin_with_rbac();
    s.add_node(NODE, vec![kubelet_ready()]);
    let dir = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let at = |secs: i64| now + time::Duration::seconds(secs);
    let snap = |secs| {
        snapshot(
            at(secs),
            &[
                ("disk", with(Status::Ok, vec![disk_full()])),
                // The kill happened 30 s before the first instance started: the kernel
                // log says so at every read, in seconds ago.
                ("kernel", with(Status::Ok, vec![oom(1, 30 + secs)])),
            ],
        )
    };
    let mut first = Reporter::new(
        settings(),
        api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
        Arc::new(Stats::default()),
    );
    first.tick(at(0), Instant::now(), Some(&snap(0))).await;
    let before = our_condition(&s, "NodeDoctorFilesystemFull");
    assert_eq!(before["status"], "True");
    let events_before = s.events();
    assert!(events_before
        .iter()
        .any(|e| e["reason"] == "NodeDoctorOOMKill"));

    // A new instance a minute later, same findings (the kernel log read back at start).
    s.clear_requests();
    let mut second = Reporter::new(
        settings(),
        api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
        Arc::new(Stats::default()),
    );
    second.tick(at(60), Instant::now(), Some(&snap(60))).await;
    let reqs = s.requests();
    assert_eq!(reqs.len(), 1, "only the take-over GET: {reqs:#?}");
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(our_condition(&s, "NodeDoctorFilesystemFull"), before);
    assert_eq!(s.events(), events_before, "no event repeated");

    // A new OOM kill after the restart is an update of the same event (count 2).
    second
        .tick(
            at(75),
            Instant::now(),
            Some(&snapshot(
                at(75),
                &[
                    ("disk", with(Status::Ok, vec![disk_full()])),
                    ("kernel", with(Status::Ok, vec![oom(2, 1)])),
                ],
            )),
        )
        .await;
    let ooms: Vec<Value> = s
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "NodeDoctorOOMKill")
        .collect();
    assert_eq!(
        ooms.len(),
        2,
        "a restart forgets the object; a new one counts the new kill"
    );
    assert_eq!(
        ooms.iter()
            .map(|e| e["count"].as_i64().unwrap())
            .sum::<i64>(),
        2
    );
    assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
}

#[tokio::test]
async fn throttling_and_server_errors_back_off_and_retry() {
    let s = standin_with_rbac();
    s.add_node(NODE, vec![kubelet_ready()]);
    let dir = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let mut r = Reporter::new(
        settings(),
        api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
        Arc::clone(&stats),
    );
    let snap = snapshot(t(0), &[("disk", with(Status::Ok, vec![disk_full()]))]);
    s.fault(Fault {
        method: Some("GET".into()),
        path_contains: "/nodes/".into(),
        times: 1,
        action: FaultAction::Status {
            code: 429,
            retry_after: Some(7),
        },
    });
    let start = Instant::now();
    r.tick(t(0), start, Some(&snap)).await;
    assert!(!r.planner.took_over());
    assert!(
        !r.backoff.ready(start + Duration::from_secs(6)),
        "Retry-After: 7 honoured"
    );
    r.tick(t(1), start + Duration::from_secs(1), Some(&snap))
        .await;
    assert_eq!(s.requests().len(), 1, "no request while backing off");
    assert!(
        stats.summary(0).contains("backing off"),
        "{}",
        stats.summary(0)
    );

    // 503 twice on the status patch: exponential backoff with jitter, then success.
    s.fault(Fault {
        method: Some("PATCH".into()),
        path_contains: "/status".into(),
        times: 2,
        action: FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    });
    let mut now = start + Duration::from_secs(7);
    r.tick(t(7), now, Some(&snap)).await;
    assert!(r.planner.took_over());
    let first_wait = (1..=60).find(|s| r.backoff.ready(now + Duration::from_millis(*s * 100)));
    now += Duration::from_secs(6);
    r.tick(t(13), now, Some(&snap)).await;
    let second_wait = (1..=600).find(|s| r.backoff.ready(now + Duration::from_millis(*s * 100)));
    assert!(
        first_wait.unwrap() <= 10 && second_wait.unwrap() >= 10,
        "1 s then 2 s, each jittered to half at least: {first_wait:?} {second_wait:?}"
    );
    now += Duration::from_secs(5);
    r.tick(t(18), now, Some(&snap)).await;
    assert_eq!(
        our_condition(&s, "NodeDoctorFilesystemFull")["status"],
        "True"
    );
    let text = {
        let mut reg = prometheus_client::registry::Registry::default();
        stats.register(&mut reg);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        out
    };
    for want in [
        "node_doctor_kube_requests_total{request=\"get_node\",code=\"429\"} 1",
        "node_doctor_kube_requests_total{request=\"patch_status\",code=\"503\"} 2",
        "node_doctor_kube_requests_total{request=\"patch_status\",code=\"200\"} 1",
    ] {
        assert!(text.contains(want), "missing {want}:\n{text}");
    }
    assert!(stats.summary(0).contains("kubernetes reporter: ok"));
}

#[tokio::test]
async fn a_server_with_a_certificate_from_another_ca_or_a_bad_token_is_refused() {
    let s = StandIn::start(Options::default());
    s.add_node(NODE, vec![]);
    let other_ca = kube_standin::make_pki().unwrap().ca_pem;
    let dir = tempfile::tempdir().unwrap();
    let kc = kube_standin::write_kubeconfig(
        dir.path(),
        &s.url(),
        &other_ca,
        kube_standin::DEFAULT_TOKEN,
    );
    let api = KubeApi::from_kubeconfig(&kc, NODE, Duration::from_secs(5))
        .await
        .unwrap();
    match api.get_node(NODE).await {
        Err(ApiError::Transport(e)) => assert!(e.contains("invalid peer certificate"), "{e}"),
        other => panic!("expected a TLS failure, got {other:?}"),
    }
    assert!(
        s.requests().is_empty(),
        "no request got through the handshake"
    );

    let api = api_for(&s, dir.path(), "not-the-token").await;
    assert_eq!(api.get_node(NODE).await.unwrap_err().code(), Some(401));
    let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
    assert!(api.get_node(NODE).await.is_ok());
    assert_eq!(api.get_node("nope").await.unwrap_err().code(), Some(404));
}

#[tokio::test]
async fn the_shipped_rbac_allows_exactly_what_the_reporter_does() {
    let s = standin_with_rbac();
    s.add_node(NODE, vec![]);
    let dir = tempfile::tempdir().unwrap();
    let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
    // Events about a Node belong in `default`: elsewhere the server's validation refuses them.
    let mut ev = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "x.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": NODE},
        "reason": "R", "message": "m", "type": "Normal"});
    assert!(api.create_event(&ev).await.is_ok());
    assert_eq!(api.create_event(&ev).await.unwrap_err().code(), Some(409));
    ev["metadata"]["name"] = json!("x.2");
    ev["metadata"]["namespace"] = json!("kube-system");
    assert_eq!(
        api.create_event(&ev).await.unwrap_err().code(),
        Some(400),
        "object namespace differs from the request's"
    );
    let code = raw_body(
        &s,
        dir.path(),
        "POST",
        "/api/v1/namespaces/kube-system/events",
        &ev,
    )
    .await;
    assert_eq!(code, 422, "a Node event outside default");
    assert_eq!(
        api.patch_event("missing", &json!({"count": 2}))
            .await
            .unwrap_err()
            .code(),
        Some(404)
    );
    // What the reporter never does is forbidden: list nodes, patch the node object itself.
    let forbidden = [
        ("/api/v1/nodes", "GET"),
        ("/api/v1/nodes/worker-1", "PATCH"),
        ("/api/v1/namespaces/default/pods", "GET"),
    ];
    for (path, method) in forbidden {
        let code = raw(&s, dir.path(), method, path).await;
        assert_eq!(code, 403, "{method} {path}");
    }
}

/// A raw request through the same client.
async fn raw(s: &StandIn, dir: &std::path::Path, method: &str, path: &str) -> u16 {
    raw_body(s, dir, method, path, &json!({})).await
}

async fn raw_body(
    s: &StandIn,
    dir: &std::path::Path,
    method: &str,
    path: &str,
    body: &Value,
) -> u16 {
    let kc = s.kubeconfig(dir, kube_standin::DEFAULT_TOKEN);
    let kc = kube::config::Kubeconfig::read_from(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(
            "content-type",
            if method == "POST" {
                "application/json"
            } else {
                "application/strategic-merge-patch+json"
            },
        )
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    client.send(req).await.unwrap().status().as_u16()
}

#[test]
fn heartbeats_are_at_least_five_minutes_apart_and_jittered() {
    let mut p = Planner::new(settings());
    p.take_over(
        &json!({"metadata": {"uid": "u"}, "status": {"conditions": []}}),
        t(0),
    )
    .unwrap();
    let quiet = snapshot(t(0), &[("disk", with(Status::Ok, vec![]))]);
    let mut writes = Vec::new();
    for s in (0..3600).step_by(15) {
        p.observe(t(s), &view(&quiet));
        if p.status_patch(t(s)).is_some() {
            p.status_written(t(s));
            writes.push(s);
        }
    }
    // The first write, then one per heartbeat of 300-330 s (15 s ticks round up).
    assert!(writes.len() >= 11 && writes.len() <= 13, "{writes:?}");
    for w in writes.windows(2) {
        assert!(w[1] - w[0] >= 300 && w[1] - w[0] <= 345, "{writes:?}");
    }
    // Two nodes do not beat in step.
    let mut other = Planner::new(Settings {
        node: "worker-2".into(),
        ..settings()
    });
    other
        .take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    let mut w2 = Vec::new();
    for s in (0..3600).step_by(15) {
        other.observe(t(s), &view(&quiet));
        if other.status_patch(t(s)).is_some() {
            other.status_written(t(s));
            w2.push(s);
        }
    }
    assert_ne!(writes, w2);
}

#[test]
fn a_flapping_finding_costs_one_pair_of_writes_per_clear_after() {
    let mut p = Planner::new(Settings {
        clear_after: Duration::from_secs(120),
        min_write_interval: Duration::from_secs(10),
        ..settings()
    });
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    let mut writes = 0;
    for i in 0..240 {
        // Appears on every other 15 s run for an hour.
        let s = i * 15;
        let findings = if i % 2 == 0 {
            vec![disk_full()]
        } else {
            vec![]
        };
        let snap = snapshot(t(s), &[("disk", with(Status::Ok, findings))]);
        p.observe(t(s), &view(&snap));
        if p.status_patch(t(s)).is_some() {
            p.status_written(t(s));
            writes += 1;
        }
    }
    // It never stays away 2 minutes: True once, then heartbeats only.
    assert!(writes <= 14, "{writes} status writes in an hour");
    let c = p
        .desired()
        .find(|c| c.ctype == "NodeDoctorFilesystemFull")
        .unwrap();
    assert_eq!(c.status, "True");
}

#[test]
fn stale_own_conditions_are_deleted_and_others_kept() {
    let mut p = Planner::new(settings());
    p.take_over(
        &json!({"metadata": {"uid": "u"}, "status": {"conditions": [
            kubelet_ready(),
            {"type": "NodeDoctorRemovedRule", "status": "True", "reason": "Old"},
        ]}}),
        t(0),
    )
    .unwrap();
    let quiet = snapshot(t(0), &[("disk", with(Status::Ok, vec![]))]);
    p.observe(t(0), &view(&quiet));
    let body = p.status_patch(t(0)).unwrap();
    let conds = body["status"]["conditions"].as_array().unwrap();
    assert!(conds.contains(&json!({"type": "NodeDoctorRemovedRule", "$patch": "delete"})));
    assert!(
        conds.iter().all(|c| c["type"] != "Ready"),
        "never the kubelet's"
    );
    let mut node = json!({"status": {"conditions": [kubelet_ready(),
        {"type": "NodeDoctorRemovedRule", "status": "True"}]}});
    kube_standin::patch::strategic(&mut node, &body).unwrap();
    let types: Vec<&str> = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"Ready") && !types.contains(&"NodeDoctorRemovedRule"));
}

#[test]
fn events_repeat_into_one_object_and_spend_a_per_node_budget() {
    let mut p = Planner::new(settings());
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    let mut creates = 0;
    let mut patches = 0;
    // A new OOM kill every 10 s for an hour.
    for i in 0..360i64 {
        let s = i * 10;
        let snap = snapshot(t(s), &[("kernel", with(Status::Ok, vec![oom(i + 1, 0)]))]);
        p.observe(t(s), &view(&snap));
        while let Some(w) = p.next_event(t(s)) {
            match &w {
                super::planner::EventWrite::Create { body, .. } => {
                    creates += 1;
                    let name = body["metadata"]["name"].as_str().unwrap().to_string();
                    p.event_written(&w, Ok(name));
                }
                super::planner::EventWrite::Patch { name, .. } => {
                    patches += 1;
                    let n = name.clone();
                    p.event_written(&w, Ok(n));
                }
            }
        }
    }
    assert_eq!(creates, 1, "one object");
    // Burst 25, then one per 5 minutes: 25 + 12 in an hour at most.
    assert!(creates + patches <= 37, "{creates} + {patches}");
    assert!(p.events_pending() <= 1);
}

#[test]
fn events_created_in_the_same_instant_get_distinct_names() {
    let mut p = Planner::new(settings());
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    let ooms: Vec<Finding> = (0..30)
        .map(|i| oom(1, 10).subject(format!("pod-{i}")))
        .collect();
    let snap = snapshot(t(0), &[("kernel", with(Status::Ok, ooms))]);
    p.observe(t(0), &view(&snap));
    let mut names = std::collections::BTreeSet::new();
    while let Some(w) = p.next_event(t(0)) {
        if let super::planner::EventWrite::Create { body, .. } = &w {
            let name = body["metadata"]["name"].as_str().unwrap().to_string();
            assert!(name.starts_with("worker-1."), "{name}");
            assert!(names.insert(name.clone()), "{name} twice");
            p.event_written(&w, Ok(name));
        }
    }
    // The burst of 25, then the rest wait for tokens (one per 5 minutes).
    assert_eq!(names.len(), 25);
    assert_eq!(p.events_pending(), 5);
    assert!(p.next_event(t(299)).is_none());
    assert!(p.next_event(t(301)).is_some());
}

#[test]
fn messages_name_the_finding_and_stay_bounded_and_printable() {
    let mut f = disk_full();
    f.summary.en = format!("\x1b[31mred{}", "x".repeat(5000));
    f.see_also = vec!["disk-full".into()];
    let docs = crate::links::Links {
        base: Some("https://sre.example.com/nd".into()),
        agent: Some("http://10.0.0.7:9808".into()),
    };
    let m = message(&f, 2, &docs);
    assert!(m.len() <= MAX_MESSAGE_BYTES);
    assert!(!m.contains('\x1b'), "{m}");
    assert!(m.starts_with("disk.filesystem_full (/var/lib/containerd): \\x1b[31mred"));
    assert!(
        m.ends_with(
            " More: node-doctor explain disk.filesystem_full; https://sre.example.com/nd/rules/disk.filesystem_full (+2 more finding(s) in /findings)"
        ),
        "{m}"
    );
    // Without --docs-url: this agent's own page.
    let own = crate::links::Links {
        base: None,
        agent: Some("http://10.0.0.7:9808".into()),
    };
    let m = message(&f, 0, &own);
    assert!(
        m.ends_with(" More: node-doctor explain disk.filesystem_full; http://10.0.0.7:9808/rules/disk.filesystem_full"),
        "{m}"
    );
    assert!(!m.contains("github.com"), "{m}");
}

#[test]
fn npd_names_are_opt_in() {
    let hung = Finding::new(
        "kernel.hung_task",
        Severity::Critical,
        Text::new("t", "t"),
        Text::new("s", "s"),
    )
    .subject("dockerd")
    .evidence("comm", "dockerd")
    .evidence("runtime_or_kubelet", true)
    .evidence("reports", 1)
    .evidence("last_seen_seconds_ago", 1)
    // What the judge sets for a hung dockerd (the rule's conditions choose the classes).
    .condition("runtime")
    .condition("docker_task");
    let snap = snapshot(t(0), &[("kernel", with(Status::Ok, vec![hung]))]);
    for (npd, types) in [
        (
            false,
            [
                "NodeDoctorKernelDeadlock",
                "NodeDoctorContainerRuntimeUnhealthy",
            ],
        ),
        (true, ["KernelDeadlock", "ContainerRuntimeUnhealthy"]),
    ] {
        let mut p = Planner::new(Settings {
            naming: Naming::npd(npd),
            ..settings()
        });
        p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
            .unwrap();
        p.observe(t(0), &view(&snap));
        for ty in types {
            let c = p.desired().find(|c| c.ctype == ty).unwrap();
            assert_eq!(c.status, "True", "{ty}");
        }
        let dl = p.desired().find(|c| c.ctype == types[0]).unwrap();
        assert_eq!(dl.reason, "DockerHung");
        let mut reasons = Vec::new();
        while let Some(w) = p.next_event(t(0)) {
            if let super::planner::EventWrite::Create { body, .. } = &w {
                reasons.push(body["reason"].as_str().unwrap().to_string());
            }
            p.event_written(&w, Ok("e".into()));
        }
        let want = if npd {
            "TaskHung"
        } else {
            "NodeDoctorTaskHung"
        };
        assert!(reasons.iter().any(|r| r == want), "{reasons:?}");
    }
}

/// The kernel's own failures under `--kube-npd-names`: node-problem-detector's
/// FrequentUnregisterNetDevice condition and its UnregisterNetDevice, KernelOops and IOError
/// event reasons (its kernel-monitor and kernel-monitor-counter rules).
#[test]
fn npd_names_of_the_kernels_own_failures() {
    let text = || (Text::new("t", "t"), Text::new("s", "s"));
    let netdev = {
        let (t, s) = text();
        Finding::new("kernel.unregister_netdevice", Severity::Critical, t, s)
            .subject("lo")
            .evidence("device", "lo")
            .evidence("waits", 3)
            .evidence("last_seen_seconds_ago", 10)
            .condition("frequent")
    };
    let oops = {
        let (t, s) = text();
        Finding::new("kernel.oops", Severity::Critical, t, s)
            .subject("java")
            .evidence("oopses", 1)
            .evidence("last_seen_seconds_ago", 10)
    };
    let io = {
        let (t, s) = text();
        Finding::new("kernel.fs_error", Severity::Warning, t, s)
            .subject("sdc")
            .evidence("errors", 1)
            .evidence("last_seen_seconds_ago", 10)
            .condition("buffer_io_logged")
    };
    let snap = snapshot(
        t(0),
        &[("kernel", with(Status::Ok, vec![netdev, oops, io]))],
    );
    for (npd, condition, events) in [
        (
            false,
            "NodeDoctorFrequentUnregisterNetDevice",
            [
                "NodeDoctorUnregisterNetDevice",
                "NodeDoctorKernelOops",
                "NodeDoctorFilesystemError",
            ],
        ),
        (
            true,
            "FrequentUnregisterNetDevice",
            ["UnregisterNetDevice", "KernelOops", "IOError"],
        ),
    ] {
        let mut p = Planner::new(Settings {
            naming: Naming::npd(npd),
            ..settings()
        });
        p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
            .unwrap();
        p.observe(t(0), &view(&snap));
        let c = p.desired().find(|c| c.ctype == condition).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "UnregisterNetDevice")
        );
        let mut reasons = Vec::new();
        while let Some(w) = p.next_event(t(0)) {
            if let super::planner::EventWrite::Create { body, .. } = &w {
                reasons.push(body["reason"].as_str().unwrap().to_string());
            }
            p.event_written(&w, Ok("e".into()));
        }
        for want in events {
            assert!(reasons.iter().any(|r| r == want), "{want}: {reasons:?}");
        }
    }
}

/// One corrected memory error and one corrected CPER record, below node-doctor's burst
/// threshold (info findings): with `--kube-npd-names` each is the Event node-problem-detector
/// writes for the line (`MemoryReadError`, `CperHardwareErrorCorrected`: type Warning, the
/// line as the message); with node-doctor's names a Normal event of its own reason and message.
#[test]
fn a_single_corrected_hardware_error_is_npds_event_under_npd_names() {
    let edac = "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c2d1 offset:0x0 grain:32 syndrome:0x0)";
    let cper = "{37}[Hardware Error]: event severity: corrected";
    let findings = |ce: i64, records: i64| {
        vec![
            Finding::new(
                "hardware.memory_corrected",
                Severity::Info,
                Text::new("t", "t"),
                Text::new("s", "s"),
            )
            .subject("mc0")
            .evidence("ce_in_window", ce)
            .evidence("line", edac)
            .condition("logged")
            .condition("below_burst"),
            Finding::new(
                "hardware.cper",
                Severity::Info,
                Text::new("t", "t"),
                Text::new("s", "s"),
            )
            .subject("corrected")
            .evidence("records", records)
            .evidence("last_seen_seconds_ago", 5)
            .evidence("line", cper)
            .condition("corrected")
            .condition("below_burst")
            .condition("recent"),
        ]
    };
    for (npd, want) in [
        (
            true,
            [
                ("MemoryReadError", "Warning", edac),
                ("CperHardwareErrorCorrected", "Warning", cper),
            ],
        ),
        (
            false,
            [
                (
                    "NodeDoctorCorrectedMemoryErrors",
                    "Normal",
                    "hardware.memory_corrected (mc0): s",
                ),
                (
                    "NodeDoctorHardwareErrorRecord",
                    "Normal",
                    "hardware.cper (corrected): s",
                ),
            ],
        ),
    ] {
        let mut p = Planner::new(Settings {
            naming: Naming::npd(npd),
            ..settings()
        });
        p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
            .unwrap();
        let snap = snapshot(t(0), &[("hardware", with(Status::Ok, findings(1, 1)))]);
        p.observe(t(0), &view(&snap));
        let mut written = Vec::new();
        while let Some(w) = p.next_event(t(0)) {
            if let super::planner::EventWrite::Create { body, .. } = &w {
                written.push(body.clone());
            }
            p.event_written(&w, Ok("e".into()));
        }
        assert_eq!(written.len(), 2, "{written:#?}");
        for (reason, etype, msg) in want {
            let e = written
                .iter()
                .find(|e| e["reason"] == reason)
                .unwrap_or_else(|| panic!("{reason}: {written:#?}"));
            assert_eq!(e["type"], etype, "{reason}");
            let m = e["message"].as_str().unwrap();
            if npd {
                assert_eq!(m, msg, "{reason}");
            } else {
                assert!(m.starts_with(msg), "{reason}: {m}");
            }
            assert_eq!(e["count"], 1, "{reason}");
        }
        // A second error of each: the same Event objects, counted 2.
        let snap = snapshot(t(60), &[("hardware", with(Status::Ok, findings(2, 2)))]);
        p.observe(t(60), &view(&snap));
        let mut counts = Vec::new();
        while let Some(w) = p.next_event(t(60)) {
            if let super::planner::EventWrite::Patch { body, .. } = &w {
                counts.push(body["count"].as_u64().unwrap());
            }
            p.event_written(&w, Ok("e".into()));
        }
        assert_eq!(counts, vec![2, 2], "npd {npd}");
    }
}

/// node-problem-detector's message is the matched line: control characters from the host's
/// log are made visible and the message stays within the API server's limit.
#[test]
fn npds_message_is_the_line_made_printable_and_bounded() {
    use super::planner::npd_message;
    assert_eq!(npd_message("a\u{1b}]0;x\u{7}b"), "a\\x1b]0;x\\x07b");
    let long = "x".repeat(5000);
    assert!(npd_message(&long).len() <= MAX_MESSAGE_BYTES);
}

#[test]
fn a_collector_that_does_not_run_makes_its_conditions_unknown_not_healthy() {
    let mut p = Planner::new(settings());
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    let snap = snapshot(t(0), &[("disk", Collection::unavailable("no mountinfo"))]);
    p.observe(t(0), &view(&snap));
    let c = p
        .desired()
        .find(|c| c.ctype == "NodeDoctorFilesystemFull")
        .unwrap();
    assert_eq!(c.status, "Unknown");
    assert!(
        c.message.contains("collector disk: no mountinfo"),
        "{}",
        c.message
    );
    // Collectors this agent does not run at all (as with --collector disk): not checked.
    let c = p
        .desired()
        .find(|c| c.ctype == "NodeDoctorHighLoad")
        .unwrap();
    assert_eq!(c.status, "Unknown");
    assert!(
        c.message.contains("collector load: not run by this agent"),
        "{}",
        c.message
    );
}

/// Every rule that sets a condition or makes an event is documented on its collector's
/// page, and every class, NPD name and event reason in docs/kubernetes.md.
#[test]
fn every_mapped_id_is_a_rule_and_every_class_is_documented() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs: String = collectors::registry::names()
        .map(|n| {
            std::fs::read_to_string(repo.join(format!("docs/collectors/{n}.md")))
                .unwrap_or_else(|e| panic!("docs/collectors/{n}.md: {e}"))
        })
        .collect();
    let book = collectors::rules::RuleBook::builtin();
    let mut mapped = 0;
    let kdoc = include_str!("../../../docs/kubernetes.md");
    for rule in book.rules() {
        let sets = rule.cluster_reasons().count() > 0 || rule.event().is_some();
        if !sets {
            continue;
        }
        mapped += 1;
        assert!(
            docs.contains(&format!("`{}`", rule.id)),
            "{} is not a documented rule",
            rule.id
        );
        if let Some(e) = rule.event() {
            assert!(
                kdoc.contains(e.reason.as_str()),
                "{} missing in docs/kubernetes.md",
                e.reason
            );
        }
    }
    assert!(mapped >= 30, "{mapped} rules set something in the cluster");
    for c in classes::conditions() {
        assert!(
            kdoc.contains(c.ctype.as_str()),
            "{} missing in docs/kubernetes.md",
            c.ctype
        );
        if let Some((t, r)) = &c.npd {
            assert!(kdoc.contains(t.as_str()) && kdoc.contains(r.as_str()));
        }
        // Its repair flag and NMA name, in the Repair table.
        let row = kdoc
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", c.ctype)) && l.contains("repair-worthy"));
        match (&c.nma, row) {
            (Some(m), Some(row)) => assert!(
                row.contains("repair-worthy")
                    && row.contains(&format!("`{}`, reason `{}`", m.ctype, m.reason)),
                "{}: {row}",
                c.ctype
            ),
            (Some(_), None) => panic!("{}: not in the Repair table", c.ctype),
            (None, _) => assert!(!c.repair, "{}: repair-worthy without an NMA type", c.ctype),
        }
    }
}

/// The scale simulation (a bench, not a unit test: `scripts/bench-kube.sh`). N simulated
/// nodes' reporters, each with its own planner and backoff, against one stand-in API server
/// (HTTPS, RBAC from the shipped manifests, every object schema-checked) for a simulated
/// hour in 15 s collector cycles: a tenth of the nodes with a steady problem (a full disk),
/// a tenth with a flapping one (high load on every other cycle), a twentieth with an OOM kill
/// every 2 minutes, the rest quiet. Every request is real; only the clock is simulated.
/// Prints API writes per second per 1,000 nodes next to node-problem-detector's steady rate.
#[test]
#[ignore = "scale simulation: run scripts/bench-kube.sh"]
fn scale_simulation() {
    let nodes: usize = std::env::var("ND_SIM_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let seconds: i64 = std::env::var("ND_SIM_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    let rbac = Rbac::from_manifests(
        &kube_standin::shipped_manifests(),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAME,
    )
    .unwrap();
    let s = StandIn::start(Options {
        rbac: Some(rbac),
        record_bodies: false,
        workers: 2,
        ..Options::default()
    });
    let names: Vec<String> = (0..nodes).map(|i| format!("sim-node-{i:05}")).collect();
    for n in &names {
        s.add_node(n, vec![kubelet_ready()]);
    }
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let wall = Instant::now();
    rt.block_on(async {
        let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
        let stats = Arc::new(Stats::default());
        let mut reporters: Vec<Reporter<KubeApi>> = names
            .iter()
            .map(|n| {
                Reporter::new(
                    Settings {
                        node: n.clone(),
                        clear_after: Duration::from_secs(120),
                        min_write_interval: Duration::from_secs(10),
                        ..settings()
                    },
                    api.clone(),
                    Arc::clone(&stats),
                )
            })
            .collect();
        let start = OffsetDateTime::now_utc();
        let mono = Instant::now();
        let mut startup = kube_standin::Counts::default();
        for step in 0..=(seconds / 15) {
            let secs = step * 15;
            let now = start + time::Duration::seconds(secs);
            let quiet = snapshot(now, &[("disk", with(Status::Ok, vec![]))]);
            let steady = snapshot(now, &[("disk", with(Status::Ok, vec![disk_full()]))]);
            let load = finding("load.high_load", "", Severity::Warning);
            let flapping = snapshot(
                now,
                &[(
                    "load",
                    with(Status::Ok, if step % 2 == 0 { vec![load] } else { vec![] }),
                )],
            );
            let kills = 1 + secs / 120;
            let ooming = snapshot(
                now,
                &[("kernel", with(Status::Ok, vec![oom(kills.min(30), secs % 120)]))],
            );
            // On for 5 minutes, off for 5: real changes, each worth a write.
            let slow = snapshot(
                now,
                &[(
                    "load",
                    with(
                        Status::Ok,
                        if (secs / 300) % 2 == 0 {
                            vec![finding("load.high_load", "", Severity::Warning)]
                        } else {
                            vec![]
                        },
                    ),
                )],
            );
            for (i, r) in reporters.iter_mut().enumerate() {
                let snap = match i % 20 {
                    0 | 1 => &steady,
                    2 | 3 => &flapping,
                    4 => &ooming,
                    5 => &slow,
                    _ => &quiet,
                };
                r.tick(now, mono + Duration::from_secs(secs as u64), Some(snap))
                    .await;
            }
            if step == 0 {
                startup = s.counts();
            }
        }
        let c = s.counts();
        let per_1000 = |n: u64| n as f64 / seconds as f64 / (nodes as f64 / 1000.0);
        let npd_steady = 1000.0 / 300.0;
        let status_after_start = c.status_patches - startup.status_patches;
        let events = c.event_creates + c.event_patches;
        println!(
            "scale simulation: {nodes} nodes, {seconds} simulated seconds, {:.1} s of wall time",
            wall.elapsed().as_secs_f64()
        );
        println!(
            "  requests: {} GET node, {} status patches ({} in the first cycle), {} event creates, {} event patches, {} errors",
            c.node_gets, c.status_patches, startup.status_patches, c.event_creates, c.event_patches, c.errors
        );
        println!(
            "  status writes/s per 1000 nodes: {:.3} after the first cycle, {:.3} with it",
            per_1000(status_after_start),
            per_1000(c.status_patches)
        );
        println!("  event writes/s per 1000 nodes:  {:.3}", per_1000(events));
        println!(
            "  all writes/s per 1000 nodes:    {:.3} after the first cycle",
            per_1000(status_after_start + events - startup.event_creates - startup.event_patches)
        );
        println!(
            "  node-problem-detector: {npd_steady:.3} status writes/s per 1000 nodes steady (one per node per 5 minutes), plus one per change"
        );
        assert_eq!(c.errors, 0, "every request allowed and valid");
        assert!(s.schema_errors().is_empty(), "{:?}", s.schema_errors());
        // The slow flappers (1 in 20) change about 12 times an hour; everything else is steady.
        let changes = (nodes as f64 / 20.0) * (seconds as f64 / 300.0);
        assert!(
            status_after_start as f64 <= npd_steady / 1000.0 * nodes as f64 * seconds as f64 + changes,
            "status writes above NPD's steady rate plus changes"
        );
    });
}

/// A raw request with a content type; the answer's status and body.
async fn send(
    s: &StandIn,
    dir: &std::path::Path,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    use http_body_util::BodyExt;
    let kc = s.kubeconfig(dir, kube_standin::DEFAULT_TOKEN);
    let kc = kube::config::Kubeconfig::read_from(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("user-agent", "other-agent/1.0")
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn types(node: &Value) -> Vec<String> {
    node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect()
}

/// The stand-in's node status patches behave as the API server's do, content type by
/// content type: why node-doctor uses a strategic merge patch and not a merge patch.
#[tokio::test]
async fn the_standin_patches_node_status_like_the_api_server() {
    let s = StandIn::start(Options::default());
    s.add_node(NODE, vec![kubelet_ready(), npd_condition()]);
    let dir = tempfile::tempdir().unwrap();
    let path = format!("/api/v1/nodes/{NODE}/status");
    let mine = json!({"type": "Mine", "status": "True", "reason": "R", "message": "m",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let body = serde_json::to_vec(&json!({"status": {"conditions": [mine]}})).unwrap();

    // Strategic merge: merged by type, the others stay.
    let (code, node) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        &body,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(types(&node), ["Ready", "KernelDeadlock", "Mine"]);
    // The same patch again changes nothing: the resourceVersion stays.
    let rv = node["metadata"]["resourceVersion"].clone();
    let (_, again) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        &body,
    )
    .await;
    assert_eq!(again["metadata"]["resourceVersion"], rv);
    // A stale resourceVersion in the patch is a conflict.
    let stale =
        serde_json::to_vec(&json!({"metadata": {"resourceVersion": "1"}, "status": {}})).unwrap();
    let (code, st) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        &stale,
    )
    .await;
    assert_eq!((code, st["reason"].as_str()), (409, Some("Conflict")));
    // JSON patch on one item.
    let jp = serde_json::to_vec(
        &json!([{"op": "replace", "path": "/status/conditions/2/status", "value": "False"}]),
    )
    .unwrap();
    let (code, node) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/json-patch+json",
        &jp,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(node["status"]["conditions"][2]["status"], "False");
    // Server-side apply: fieldManager required; another manager's field is a conflict.
    let apply = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    )
    .unwrap();
    let (code, _) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/apply-patch+yaml",
        &apply,
    )
    .await;
    assert_eq!(code, 422, "no fieldManager");
    let with_mgr = format!("{path}?fieldManager=someone");
    let (code, st) = send(
        &s,
        dir.path(),
        "PATCH",
        &with_mgr,
        "application/apply-patch+yaml",
        &apply,
    )
    .await;
    assert_eq!(code, 409, "Ready is the kubelet's: {st}");
    let forced = format!("{path}?fieldManager=someone&force=true");
    let (code, node) = send(
        &s,
        dir.path(),
        "PATCH",
        &forced,
        "application/apply-patch+yaml",
        &apply,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(node["status"]["conditions"][0]["status"], "False");
    // A body that breaks the schema is refused and recorded.
    let bad = serde_json::to_vec(
        &json!({"status": {"conditions": [{"type": "Mine", "lastHeartbeatTime": "soon"}]}}),
    )
    .unwrap();
    let (code, _) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        &bad,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(s.schema_errors().len(), 1);
    // An unknown content type.
    let (code, _) = send(&s, dir.path(), "PATCH", &path, "application/json", &body).await;
    assert_eq!(code, 415);
    // Merge patch: the whole list is replaced — every other writer's condition is gone.
    let (code, node) = send(
        &s,
        dir.path(),
        "PATCH",
        &path,
        "application/merge-patch+json",
        &body,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(types(&node), ["Mine"]);
    // Unknown node.
    let (code, _) = send(
        &s,
        dir.path(),
        "PATCH",
        "/api/v1/nodes/nope/status",
        "application/strategic-merge-patch+json",
        &body,
    )
    .await;
    assert_eq!(code, 404);
}

/// The runtime collector's probes feed the runtime and kubelet conditions next to the kernel's
/// hung tasks, and kubelet restarts become NPD's FrequentKubeletRestart class; a healthy
/// runtime run keeps them False, and a node without the runtime collector leaves the restart
/// class Unknown.
#[test]
fn runtime_findings_set_the_runtime_kubelet_and_restart_conditions() {
    for (id, ctype, reason) in [
        (
            "runtime.not_running",
            "NodeDoctorContainerRuntimeUnhealthy",
            "ContainerRuntimeNotRunning",
        ),
        (
            "runtime.crashed",
            "NodeDoctorContainerRuntimeUnhealthy",
            "ContainerRuntimeCrashed",
        ),
        (
            "runtime.hung",
            "NodeDoctorContainerRuntimeUnhealthy",
            "ContainerRuntimeHung",
        ),
        (
            "runtime.unreachable",
            "NodeDoctorContainerRuntimeUnhealthy",
            "ContainerRuntimeUnreachable",
        ),
        (
            "runtime.kubelet_not_running",
            "NodeDoctorKubeletUnhealthy",
            "KubeletNotRunning",
        ),
        (
            "runtime.kubelet_unhealthy",
            "NodeDoctorKubeletUnhealthy",
            "KubeletHealthzFailed",
        ),
        (
            "runtime.kubelet_restarts",
            "NodeDoctorFrequentKubeletRestart",
            "FrequentKubeletRestart",
        ),
    ] {
        let f = finding(id, "dockerd", Severity::Warning);
        let snap = snapshot(
            t(0),
            &[
                ("runtime", with(Status::Ok, vec![f])),
                ("kernel", with(Status::Ok, vec![])),
            ],
        );
        let mut p = Planner::new(settings());
        p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
            .unwrap();
        p.observe(t(0), &view(&snap));
        let c = p.desired().find(|c| c.ctype == ctype).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", reason),
            "{id}"
        );
        // The other runtime classes stay healthy.
        for other in [
            "NodeDoctorContainerRuntimeUnhealthy",
            "NodeDoctorKubeletUnhealthy",
            "NodeDoctorFrequentKubeletRestart",
        ] {
            if other != ctype {
                let c = p.desired().find(|c| c.ctype == other).unwrap();
                assert_eq!(c.status, "False", "{id}: {other}");
            }
        }
    }
    // Without the runtime collector the restart class is not checked: Unknown.
    let snap = snapshot(t(0), &[("kernel", with(Status::Ok, vec![]))]);
    let mut p = Planner::new(settings());
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    p.observe(t(0), &view(&snap));
    let c = p
        .desired()
        .find(|c| c.ctype == "NodeDoctorFrequentKubeletRestart")
        .unwrap();
    assert_eq!(c.status, "Unknown");
    // With NPD's names, the restart class is written as NPD's type.
    let f = finding("runtime.kubelet_restarts", "kubelet", Severity::Warning);
    let snap = snapshot(t(0), &[("runtime", with(Status::Ok, vec![f]))]);
    let mut p = Planner::new(Settings {
        naming: Naming::Npd,
        ..settings()
    });
    p.take_over(&json!({"metadata": {"uid": "u"}}), t(0))
        .unwrap();
    p.observe(t(0), &view(&snap));
    assert!(p
        .desired()
        .any(|c| c.ctype == "FrequentKubeletRestart" && c.status == "True"));
}

/// The reporter's code names no finding: what a rule sets in the cluster is the rule file's
/// (a `"<collector>.<rule>"` literal outside this test module would be a mapping by id).
#[test]
fn the_reporter_holds_no_finding_id() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kube");
    let names: Vec<&str> = collectors::registry::names().collect();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("tests.rs"))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines().map(|l| l.split("//").next().unwrap_or("")) {
            for n in &names {
                let quoted = format!("\"{n}.");
                assert!(
                    !line.contains(&quoted),
                    "{}: {line:?} names a finding id",
                    path.display()
                );
            }
        }
    }
}

/// Every rule's example finding (warning or critical, every condition it declares held) in
/// one snapshot, reported to the stand-in API server with node-doctor's names,
/// node-problem-detector's and the node monitoring agent's: every status patch and Event validates against the official
/// schemas, and each class a rule names is written in the naming chosen.
#[tokio::test]
async fn every_rules_conditions_and_events_validate_in_every_naming() {
    let book = collectors::rules::RuleBook::builtin();
    let mut by_collector: std::collections::BTreeMap<String, Vec<Finding>> =
        std::collections::BTreeMap::new();
    for rule in book.rules() {
        let conditions: Vec<&str> = rule.conditions().keys().map(String::as_str).collect();
        let mut f = collectors::rules::RuleBook::render_example(rule, &conditions, NODE);
        if f.severity == Severity::Info {
            f.severity = Severity::Warning;
        }
        let collector = rule.id.split('.').next().unwrap_or("").to_string();
        f.collector = collector.clone();
        by_collector.entry(collector).or_default().push(f);
    }
    let runs: Vec<(String, Collection)> = by_collector
        .into_iter()
        .map(|(c, fs)| (c, with(Status::Ok, fs)))
        .collect();
    let runs: Vec<(&str, Collection)> = runs.iter().map(|(c, r)| (c.as_str(), r.clone())).collect();
    for naming in [Naming::Own, Naming::Npd, Naming::Nma] {
        let s = standin_with_rbac();
        s.add_node(NODE, vec![kubelet_ready()]);
        let dir = tempfile::tempdir().unwrap();
        let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
        let mut r = Reporter::new(
            Settings {
                naming,
                ..settings()
            },
            api,
            Arc::new(Stats::default()),
        );
        let snap = snapshot(t(0), &runs);
        r.tick(t(0), Instant::now(), Some(&snap)).await;
        r.tick(t(1), Instant::now(), Some(&snap)).await;
        assert!(
            s.schema_errors().is_empty(),
            "{naming:?}: {:#?}",
            s.schema_errors()
        );
        for class in collectors::rules::RuleBook::node_conditions() {
            let ctype = class.written_type(naming);
            let c = s
                .condition(NODE, ctype)
                .unwrap_or_else(|| panic!("{naming:?}: {ctype} not written"));
            let problem = if class.nma_for(naming).is_some() {
                "False"
            } else {
                "True"
            };
            assert_eq!(c["status"], problem, "{naming:?}: {c:#}");
        }
        assert!(!s.events().is_empty());
    }
}
