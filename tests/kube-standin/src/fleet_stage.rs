//! A staged cluster for `node-doctor fleet`'s tests and benchmark: N Nodes as a real cluster
//! has them (labels, nodeInfo, 20 images, the kubelet's conditions and every node-doctor
//! condition), in 3 zones, 4 node pools (two providers' labels) and 2 kernel versions, with
//! planted patterns — the nodes of zone [`ZONES`]`[0]` fail DNS; the nodes on
//! [`KERNELS`]`[1]` log `unregister_netdevice` (the condition and an Event each); 3 scattered
//! nodes ([`hardware`]) have failed hardware; every clock is unsynchronised.

use serde_json::{json, Value};

use crate::StandIn;

/// A node-doctor condition class as the caller's rule book has it: type, healthy reason and
/// message (collectors/rules/cluster.toml; this crate does not depend on the collectors).
pub struct Class {
    pub ctype: String,
    pub healthy_reason: String,
    pub healthy_message: String,
}

pub const ZONES: [&str; 3] = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
pub const POOLS: [(&str, &str, &str); 4] = [
    ("eks.amazonaws.com/nodegroup", "general", "m6i.2xlarge"),
    ("eks.amazonaws.com/nodegroup", "batch", "c6i.4xlarge"),
    ("karpenter.sh/nodepool", "spot", "m6a.2xlarge"),
    ("karpenter.sh/nodepool", "gpu", "g5.2xlarge"),
];
pub const KERNELS: [&str; 2] = ["6.1.0-25-cloud-amd64", "6.1.0-28-cloud-amd64"];
pub const T0: &str = "2026-11-29T06:00:00Z";

pub fn zone(i: usize) -> usize {
    i % 3
}
pub fn pool(i: usize) -> usize {
    (i / 3) % 4
}
pub fn kernel(i: usize) -> usize {
    (i / 12) % 2
}
/// The 3 scattered nodes with failed hardware (fewer in a smaller cluster).
pub fn hardware(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [n / 7, n / 2 + 1, n.saturating_sub(2)]
        .into_iter()
        .filter(|&i| i < n)
        .collect();
    v.sort();
    v.dedup();
    v
}

pub fn name(i: usize) -> String {
    format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250)
}

fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": t, "status": status, "reason": reason, "message": message,
           "lastHeartbeatTime": "2026-11-29T07:55:00Z", "lastTransitionTime": T0})
}

/// One Node as a real cluster has it: labels, nodeInfo, images, the kubelet's conditions and
/// every node-doctor condition (False unless planted).
pub fn node(i: usize, n: usize, classes: &[Class]) -> Value {
    let (pool_key, pool_name, itype) = POOLS[pool(i)];
    let dns = zone(i) == 0;
    let unregister = kernel(i) == 1;
    let hw = hardware(n).contains(&i);
    let mut conditions = vec![
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        cond(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        cond(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ];
    for c in classes {
        let (status, reason, message) = match c.ctype.as_str() {
            "NodeDoctorDNSUnhealthy" if dns => ("True", "DNSNoAnswer", "dns.no_answer (10.100.0.10:53): the cluster DNS server does not answer"),
            "NodeDoctorFrequentUnregisterNetDevice" if unregister => ("True", "UnregisterNetDevice", "kernel.unregister_netdevice (eth0): 4 waits for a device to become free in 20 minutes"),
            "NodeDoctorHardwareFailure" if hw => ("True", "UncorrectableMemoryError", "hardware.memory_uncorrected (mc0): 1 uncorrected memory error"),
            "NodeDoctorClockUnsynchronised" => ("True", "ClockUnsynchronised", "clock.unsynchronised: the kernel says the clock is not synchronised"),
            _ => ("False", c.healthy_reason.as_str(), c.healthy_message.as_str()),
        };
        conditions.push(cond(&c.ctype, status, reason, message));
    }
    let images: Vec<Value> = (0..20)
        .map(|k| json!({"names": [format!("registry.example.com/team-{k}/service@sha256:{:064x}", k * 7919 + i), format!("registry.example.com/team-{k}/service:v1.{k}.{i}")], "sizeBytes": 123_456_789 + k}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name(i),
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name(i), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONES[zone(i)], "topology.kubernetes.io/region": "eu-west-1",
                pool_key: pool_name, "node.kubernetes.io/instance-type": itype,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
        },
        "spec": {"providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {
            "conditions": conditions,
            "nodeInfo": {
                "kernelVersion": KERNELS[kernel(i)], "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.31.4",
                "kubeProxyVersion": "v1.31.4", "operatingSystem": "linux", "architecture": "amd64",
                "machineID": format!("{i:032x}"), "systemUUID": format!("ec2{i:029x}"), "bootID": format!("{i:032x}")
            },
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)}, {"type": "Hostname", "address": name(i)}],
            "capacity": {"cpu": "8", "memory": "32386520Ki", "pods": "58"},
            "allocatable": {"cpu": "7910m", "memory": "31369688Ki", "pods": "58"},
            "images": images
        }
    })
}

pub fn unregister_event(i: usize) -> Value {
    json!({
        "metadata": {"name": format!("{}.unregister", name(i))},
        "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": name(i)},
        "reason": "NodeDoctorUnregisterNetDevice", "type": "Warning",
        "message": "kernel.unregister_netdevice (eth0): unregister_netdevice: waiting for eth0 to become free. Usage count = 2",
        "source": {"component": "node-doctor", "host": name(i)},
        "count": 4,
        "firstTimestamp": crate::rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(20)),
        "lastTimestamp": crate::rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(2)),
    })
}

/// Stages `n` nodes and their Events on `s`.
pub fn stage(s: &StandIn, n: usize, classes: &[Class]) {
    for i in 0..n {
        s.put_node(node(i, n, classes));
        if kernel(i) == 1 {
            s.put_event("default", unregister_event(i));
        }
    }
}
