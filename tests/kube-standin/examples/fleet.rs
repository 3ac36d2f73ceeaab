//! A staged cluster for `node-doctor fleet`, served until killed or for SECONDS:
//!
//!     cargo run --release -p kube-standin --example fleet -- DIR NODES [SECONDS] [--ignore-limit]
//!
//! stages NODES nodes (kube_standin::fleet_stage), enforces manifests/fleet's RBAC, writes
//! `DIR/kubeconfig`, prints `ready` and, at the end, the requests it answered.

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
        eprintln!("usage: fleet DIR NODES [SECONDS] [--ignore-limit]");
        std::process::exit(64);
    };
    let secs: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(600);
    let rbac = kube_standin::Rbac::from_manifests(
        &kube_standin::shipped_manifests().join("../fleet"),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        "node-doctor-fleet",
    )
    .unwrap_or_else(|e| panic!("RBAC from manifests/fleet: {e}"));
    let s = kube_standin::StandIn::start(kube_standin::Options {
        rbac: Some(rbac),
        record_bodies: false,
        workers: 2,
        ..Default::default()
    });
    let classes: Vec<kube_standin::fleet_stage::Class> =
        collectors::rules::RuleBook::node_conditions()
            .iter()
            .map(|c| kube_standin::fleet_stage::Class {
                ctype: c.ctype.clone(),
                healthy_reason: c.healthy_reason.clone(),
                healthy_message: c.healthy_message.clone(),
            })
            .collect();
    kube_standin::fleet_stage::stage(&s, n, &classes);
    s.ignore_list_limit(args.iter().any(|a| a == "--ignore-limit"));
    let kc = s.kubeconfig(std::path::Path::new(dir), kube_standin::DEFAULT_TOKEN);
    println!(
        "ready: {n} nodes at {}; KUBECONFIG={}",
        s.url(),
        kc.display()
    );
    let mut last = kube_standin::Counts::default();
    for _ in 0..secs {
        std::thread::sleep(Duration::from_secs(1));
        let c = s.counts();
        if c != last {
            println!(
                "requests: {} node lists, {} event lists",
                c.node_lists, c.event_lists
            );
            last = c;
        }
    }
}
