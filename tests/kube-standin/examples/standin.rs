//! Runs the stand-in API server by itself, for trying the reporter by hand or measuring it:
//!
//!     cargo run -p kube-standin --example standin -- DIR NODE SECONDS
//!
//! registers NODE (with a kubelet `Ready` condition), enforces the RBAC of
//! `manifests/base`, writes `DIR/kubeconfig` (and `DIR/ca.pem`) for it, serves for SECONDS,
//! then prints the node's conditions and its events as `kubectl describe node` and `kubectl
//! get events` would.

use std::time::Duration;

use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(node)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: standin DIR NODE [SECONDS]");
        std::process::exit(64);
    };
    let secs: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(60);
    let rbac = kube_standin::Rbac::from_manifests(
        &kube_standin::shipped_manifests(),
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAMESPACE,
        kube_standin::SA_NAME,
    )
    .unwrap_or_else(|e| panic!("RBAC from the manifests: {e}"));
    let s = kube_standin::StandIn::start(kube_standin::Options {
        rbac: Some(rbac),
        ..Default::default()
    });
    s.add_node(
        node,
        vec![
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": kube_standin::now_rfc3339(),
            "lastTransitionTime": kube_standin::now_rfc3339()}),
        ],
    );
    let kc = s.kubeconfig(std::path::Path::new(dir), kube_standin::DEFAULT_TOKEN);
    println!(
        "stand-in at {} for {secs} s; KUBECONFIG={}",
        s.url(),
        kc.display()
    );
    std::thread::sleep(Duration::from_secs(secs));
    if let Some(n) = s.node(node) {
        println!("{}", kube_standin::describe::conditions(&n));
    }
    println!("{}", kube_standin::describe::events(&s.events()));
    let c = s.counts();
    println!(
        "requests: {} GET node, {} status patches, {} event creates, {} event patches, {} errors; schema errors: {}",
        c.node_gets,
        c.status_patches,
        c.event_creates,
        c.event_patches,
        c.errors,
        s.schema_errors().len()
    );
}
