//! `fleet` against the stand-in API server (HTTPS, tokens, RBAC from manifests/fleet): a
//! staged cluster of N nodes in 3 zones, 4 node pools (two providers' labels) and 2 kernel
//! versions, with planted patterns — one zone's nodes fail DNS, one kernel's nodes log
//! `unregister_netdevice` (condition and Events), 3 scattered nodes have failed hardware,
//! every clock is unsynchronised — must come back as exactly those classes, grouped and
//! judged right, one request per page.

use std::path::Path;
use std::time::Duration;

use kube_standin::fleet_stage::{self, hardware, kernel, node, zone, KERNELS, T0, ZONES};
use kube_standin::{Options, Rbac, StandIn};
use serde_json::{json, Value};

use super::classes::Dim;
use super::verdict::{Report, Verdict};
use super::{collect, Settings};

/// The stand-in with the fleet's RBAC (manifests/fleet) for its token, `n` staged nodes.
pub fn staged(n: usize) -> StandIn {
    let rbac = Rbac::from_manifests(
        &kube_standin::shipped_manifests().join("../fleet"),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        "node-doctor-fleet",
    )
    .expect("manifests/fleet");
    assert!(!rbac.sources.is_empty(), "manifests/fleet binds no role");
    let s = StandIn::start(Options {
        rbac: Some(rbac),
        record_bodies: false,
        workers: 2,
        ..Options::default()
    });
    fleet_stage::stage(&s, n, &classes());
    s
}

/// node-doctor's condition classes, for the staged nodes.
pub fn classes() -> Vec<fleet_stage::Class> {
    collectors::rules::RuleBook::node_conditions()
        .iter()
        .map(|c| fleet_stage::Class {
            ctype: c.ctype.clone(),
            healthy_reason: c.healthy_reason.clone(),
            healthy_message: c.healthy_message.clone(),
        })
        .collect()
}

pub fn settings(kubeconfig: &Path) -> Settings {
    Settings {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        context: None,
        prometheus: None,
        chunk_size: 1000,
        events_since: Duration::from_secs(3600),
        request_timeout: Duration::from_secs(30),
    }
}

fn run(s: &StandIn, settings: &Settings) -> anyhow::Result<(Report, super::read::Fleet)> {
    let _ = s;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(collect(settings))
}

fn row<'a>(r: &'a Report, class: &str) -> &'a super::verdict::Row {
    r.rows.iter().find(|x| x.name == class).unwrap_or_else(|| {
        panic!(
            "no {class} in {:?}",
            r.rows.iter().map(|x| &x.name).collect::<Vec<_>>()
        )
    })
}

/// The groups of a row as (dimension, value).
fn groups(r: &super::verdict::Row) -> Vec<(Dim, String)> {
    r.grouped
        .shared_by
        .iter()
        .map(|g| (g.dim, g.value.clone()))
        .collect()
}

fn check_patterns(n: usize, ignore_limit: bool, chunk: usize) {
    let s = staged(n);
    s.ignore_list_limit(ignore_limit);
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let settings = Settings {
        chunk_size: chunk,
        ..settings(&kc)
    };
    let (report, _fleet) = run(&s, &settings).expect("fleet reads the staged cluster");
    assert!(report.incomplete.is_empty(), "{:?}", report.incomplete);
    assert_eq!(report.nodes, n);
    let in_zone_a = (0..n).filter(|&i| zone(i) == 0).count();
    let on_new_kernel = (0..n).filter(|&i| kernel(i) == 1).count();
    let hw = hardware(n);
    // Exactly the planted classes, nothing else.
    let mut want = vec![
        "NodeDoctorClockUnsynchronised",
        "NodeDoctorDNSUnhealthy",
        "NodeDoctorHardwareFailure",
    ];
    if on_new_kernel > 0 {
        want.push("NodeDoctorFrequentUnregisterNetDevice");
    }
    want.sort();
    let mut got: Vec<&str> = report.rows.iter().map(|r| r.name.as_str()).collect();
    got.sort();
    assert_eq!(got, want, "n={n}");
    // Worst first: the critical hardware class leads.
    assert_eq!(report.rows[0].name, "NodeDoctorHardwareFailure");

    let hwr = row(&report, "NodeDoctorHardwareFailure");
    assert_eq!(hwr.grouped.nodes.len(), hw.len());
    assert_eq!(hwr.verdict, Verdict::NodeLocal, "{}", hwr.because);
    assert!(groups(hwr).is_empty(), "{:?}", groups(hwr));
    assert!(
        hwr.next
            .iter()
            .any(|c| c == "node-doctor explain hardware.memory_uncorrected"),
        "{:?}",
        hwr.next
    );

    let dns = row(&report, "NodeDoctorDNSUnhealthy");
    let clock = row(&report, "NodeDoctorClockUnsynchronised");
    assert_eq!(dns.grouped.nodes.len(), in_zone_a);
    assert_eq!(clock.grouped.nodes.len(), n);
    assert_eq!(
        clock.grouped.since,
        Some(1_795_932_000),
        "since = lastTransitionTime ({T0})"
    );
    assert!(groups(clock).is_empty(), "{:?}", groups(clock));
    if n == 1 {
        for r in &report.rows {
            assert_eq!(r.verdict, Verdict::NodeLocal, "{}: {}", r.name, r.because);
        }
        return;
    }
    assert_eq!(
        groups(dns),
        vec![(Dim::Zone, ZONES[0].to_string())],
        "n={n}"
    );
    assert_eq!(dns.verdict, Verdict::Shared);
    assert!(dns.because.contains("cluster DNS"), "{}", dns.because);
    assert!(
        dns.next.iter().any(|c| c.contains("k8s-app=kube-dns")),
        "{:?}",
        dns.next
    );
    assert!(
        dns.next
            .iter()
            .any(|c| c == "kubectl get nodes -l topology.kubernetes.io/zone=eu-west-1a"),
        "{:?}",
        dns.next
    );
    assert_eq!(clock.verdict, Verdict::Shared);
    assert!(clock.because.contains("time source"), "{}", clock.because);

    let unreg = row(&report, "NodeDoctorFrequentUnregisterNetDevice");
    assert_eq!(unreg.grouped.nodes.len(), on_new_kernel);
    assert_eq!(groups(unreg), vec![(Dim::Kernel, KERNELS[1].to_string())]);
    assert_eq!(unreg.verdict, Verdict::Shared);
    assert!(unreg.because.contains(KERNELS[1]), "{}", unreg.because);
    assert_eq!(
        unreg.grouped.event_nodes, on_new_kernel,
        "its Events joined the class"
    );
    assert_eq!(unreg.grouped.events, 4 * on_new_kernel as u64);

    // One request per page of `chunk` objects (the 5,000-node budget is the e2e test's); the
    // stand-in counted the same.
    let c = s.counts();
    assert_eq!(u64::from(report.requests.nodes), c.node_lists);
    assert_eq!(u64::from(report.requests.events), c.event_lists);
    if ignore_limit {
        let whole = (c.node_lists, c.event_lists);
        assert_eq!(whole, (1, 1), "the watch cache answered everything at once");
    } else {
        assert_eq!(c.node_lists as usize, n.div_ceil(chunk));
        assert_eq!(c.event_lists as usize, on_new_kernel.div_ceil(chunk).max(1));
    }
}

// 5,000 nodes: tests/e2e/fleet.rs (the binary, in its own process: the staged
// answers are hundreds of MB in the test process, which the heap test measures).
#[test]
fn staged_50_nodes_in_pages_of_20() {
    check_patterns(50, false, 20);
}

#[test]
fn staged_50_nodes_from_a_server_that_ignores_limit() {
    check_patterns(50, true, 20);
}

#[test]
fn staged_50_nodes_in_one_page() {
    check_patterns(50, false, 1000);
}

#[test]
fn staged_1_node_is_never_a_pattern() {
    check_patterns(1, false, 1000);
}

#[test]
fn outputs_carry_the_same_classes() {
    let s = staged(50);
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let (report, fleet) = run(&s, &settings(&kc)).unwrap();
    assert_eq!(report.exit_code(), 2, "a critical class");
    let table =
        String::from_utf8(super::render(&report, &fleet, super::Format::Table, false)).unwrap();
    assert!(
        table.contains("shared by: zone eu-west-1a (17 of 17)"),
        "{table}"
    );
    assert!(table.contains("verdict: node-local"), "{table}");
    let doc: Value =
        serde_json::from_slice(&super::render(&report, &fleet, super::Format::Json, false))
            .unwrap();
    assert_eq!(doc["nodes"], 50);
    let classes = doc["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 4);
    let dns = classes
        .iter()
        .find(|c| c["class"] == "NodeDoctorDNSUnhealthy")
        .unwrap();
    assert_eq!(dns["verdict"], "shared");
    assert_eq!(dns["node_names"].as_array().unwrap().len(), 17);
    assert_eq!(dns["shared_by"][0]["dimension"], "zone");
    let html =
        String::from_utf8(super::render(&report, &fleet, super::Format::Html, false)).unwrap();
    assert!(
        html.contains(
            "id=\"class-NodeDoctorDNSUnhealthy\" class=\"fleet-class sev-warning verdict-shared\""
        ),
        "{html}"
    );
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
}

#[test]
fn rbac_is_the_manifests_and_events_are_optional() {
    // The agent's own ServiceAccount (manifests/base) may not list nodes: fleet fails (3).
    let base = Rbac::from_manifests(
        &kube_standin::shipped_manifests(),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAME,
    )
    .unwrap();
    let s = StandIn::start(Options {
        rbac: Some(base),
        ..Options::default()
    });
    s.put_node(node(0, 1, &classes()));
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let err = run(&s, &settings(&kc)).err().expect("refused");
    assert!(format!("{err:#}").contains("403"), "{err:#}");
    // A role that lists nodes but not events: the report stands, marked incomplete (rc & 4).
    let docs = vec![
        json!({"kind": "ClusterRole", "metadata": {"name": "nodes-only"},
               "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "nodes-only"},
               "roleRef": {"kind": "ClusterRole", "name": "nodes-only"},
               "subjects": [{"kind": "ServiceAccount", "name": "node-doctor", "namespace": "node-doctor"}]}),
    ];
    let s = StandIn::start(Options {
        rbac: Some(Rbac::from_objects(
            &docs,
            "node-doctor",
            "node-doctor",
            "node-doctor",
        )),
        ..Options::default()
    });
    s.put_node(node(0, 1, &classes()));
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let (report, _) = run(&s, &settings(&kc)).unwrap();
    assert_eq!(report.incomplete.len(), 1, "{:?}", report.incomplete);
    assert!(report.incomplete[0].contains("403"));
    assert_eq!(report.exit_code(), 2 | crate::exit::INCOMPLETE);
    // Every request the fleet made was a read.
    assert!(s.requests().iter().all(|r| !r.is_write()));
}

#[test]
fn a_healthy_cluster_exits_0() {
    let s = StandIn::start(Options::default());
    let mut n = node(0, 1, &classes());
    for c in n["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"].as_str().unwrap().starts_with("NodeDoctor") {
            c["status"] = json!("False");
        }
    }
    s.put_node(n);
    let dir = tempfile::tempdir().unwrap();
    let kc = s.kubeconfig(dir.path(), kube_standin::DEFAULT_TOKEN);
    let (report, fleet) = run(&s, &settings(&kc)).unwrap();
    assert!(report.rows.is_empty());
    assert_eq!(report.exit_code(), 0);
    let table =
        String::from_utf8(super::render(&report, &fleet, super::Format::Table, false)).unwrap();
    assert!(table.contains("No node holds a problem"), "{table}");
}
