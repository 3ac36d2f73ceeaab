//! hostNetwork pods' ports against the sockets listening on the node: the handbook's health
//! check failure where several hostNetwork pods want one host port, one binds it and the
//! others keep running without listening (handbook 002, the health-check section's check of
//! the container's listening port).
//!
//! Which pods declare which ports is read from disk, without the API server:
//! - static pod manifests (the kubelet's `staticPodPath`, default `/etc/kubernetes/manifests`):
//!   `hostNetwork: true` and every `containerPort`/`hostPort` with its `protocol`;
//! - docker's pod sandboxes (dockershim and cri-dockerd nodes):
//!   `<data-root>/containers/<id>/config.v2.json` labelled `io.kubernetes.docker.type:
//!   podsandbox`, running, with `ExposedPorts`, whose `hostconfig.json` has `NetworkMode:
//!   host` (the sandbox carries the pod's port mappings; with hostNetwork the host port is
//!   the container port).
//!
//! The limit: on containerd nodes the sandboxes' configurations live in containerd's bolt
//! database, so only static pods are seen there.
//!
//! Listeners come from `<root>/proc/1/net/{tcp,tcp6,udp,udp6}` (the host's network
//! namespace); a listener's process is found through `/proc/<pid>/fd/*` links
//! (`socket:[inode]`), read only for the ports pods declare, within an entry budget, and
//! remembered by inode while the socket lives.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use super::sample::DeclaredPod;
use crate::config::docker;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};
use crate::node::Node;
use crate::proc::net_listen::{self, Listener, Protocol};

/// Manifests and sandboxes looked at, at most.
const MAX_FILES: usize = 512;

/// A port a pod declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub protocol: Protocol,
    pub port: u16,
    pub pod: DeclaredPod,
}

/// `protocol: TCP|UDP|SCTP` to ours (`None`: SCTP, not checked).
fn protocol(p: &str) -> Option<Protocol> {
    match p
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_ascii_uppercase()
        .as_str()
    {
        "" | "TCP" => Some(Protocol::Tcp),
        "UDP" => Some(Protocol::Udp),
        _ => None,
    }
}

/// A hostNetwork static pod: its namespace, name and ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub namespace: String,
    pub name: String,
    pub ports: Vec<(Protocol, u16)>,
}

/// The port item being read: `containerPort`, `hostPort`, `protocol`.
#[derive(Debug, Default)]
struct PortItem {
    container: Option<u16>,
    host: Option<u16>,
    protocol: Option<Protocol>,
}

/// The hostNetwork ports of a static pod manifest (YAML as kubeadm writes it, or JSON), or
/// `None` when the pod is not hostNetwork or the text is not a pod. A line scanner: each `- `
/// list item under `ports:` is one port, its `hostPort` (else `containerPort`) and `protocol`
/// (default TCP).
pub fn parse_manifest(text: &str) -> Option<Manifest> {
    if text.trim_start().starts_with('{') {
        return parse_manifest_json(text);
    }
    let mut kind_pod = false;
    let mut host_network = false;
    let mut name = None;
    let mut namespace = None;
    let mut in_metadata = false;
    let mut ports = Vec::new();
    let mut item: Option<PortItem> = None;
    let mut in_ports: Option<usize> = None;
    let flush = |item: &mut Option<PortItem>, ports: &mut Vec<(Protocol, u16)>| {
        if let Some(i) = item.take() {
            let p = i.protocol.unwrap_or(Protocol::Tcp);
            if let Some(port) = i.host.or(i.container).filter(|p| *p > 0) {
                ports.push((p, port));
            }
        }
    };
    for raw in text.lines() {
        let line = raw.split(" #").next().unwrap_or(raw).trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let (dash, body) = match trimmed.strip_prefix("- ") {
            Some(b) => (true, b.trim_start()),
            None => (false, trimmed),
        };
        let key_indent = if dash { indent + 2 } else { indent };
        let (key, value) = match body.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim().trim_matches(|c| c == '"' || c == '\'')),
            None => ("", ""),
        };
        if indent == 0 {
            in_metadata = key == "metadata";
            if key == "kind" {
                kind_pod = value == "Pod";
            }
        } else if in_metadata && indent == 2 {
            match key {
                "name" => name = Some(value.to_string()),
                "namespace" => namespace = Some(value.to_string()),
                _ => {}
            }
        }
        if key == "hostNetwork" {
            host_network = value == "true";
        }
        // Leaving the ports list: a line at or left of its key.
        if let Some(pi) = in_ports {
            if key_indent <= pi && !(dash && indent >= pi) {
                flush(&mut item, &mut ports);
                in_ports = None;
            }
        }
        if key == "ports" && value.is_empty() {
            flush(&mut item, &mut ports);
            in_ports = Some(key_indent);
            continue;
        }
        if in_ports.is_some() {
            if dash {
                flush(&mut item, &mut ports);
                item = Some(PortItem::default());
            }
            let mut unsupported = false;
            if let Some(i) = item.as_mut() {
                match key {
                    "containerPort" => i.container = value.parse().ok(),
                    "hostPort" => i.host = value.parse().ok(),
                    "protocol" => {
                        i.protocol = protocol(value);
                        // SCTP and unknown protocols are left out.
                        unsupported = i.protocol.is_none();
                    }
                    _ => {}
                }
            }
            if unsupported {
                item = None;
            }
        }
    }
    flush(&mut item, &mut ports);
    if !kind_pod || !host_network {
        return None;
    }
    Some(Manifest {
        namespace: namespace.unwrap_or_else(|| "default".to_string()),
        name: name?,
        ports,
    })
}

fn parse_manifest_json(text: &str) -> Option<Manifest> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    if v.get("kind")?.as_str()? != "Pod" {
        return None;
    }
    let spec = v.get("spec")?;
    if spec.get("hostNetwork").and_then(|h| h.as_bool()) != Some(true) {
        return None;
    }
    let meta = v.get("metadata")?;
    let name = meta.get("name")?.as_str()?.to_string();
    let ns = meta
        .get("namespace")
        .and_then(|n| n.as_str())
        .unwrap_or("default")
        .to_string();
    let mut ports = Vec::new();
    for c in spec.get("containers")?.as_array()? {
        for p in c
            .get("ports")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            let port = p
                .get("hostPort")
                .or_else(|| p.get("containerPort"))
                .and_then(|n| n.as_u64())
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n > 0);
            let proto = protocol(p.get("protocol").and_then(|x| x.as_str()).unwrap_or("TCP"));
            if let (Some(port), Some(proto)) = (port, proto) {
                ports.push((proto, port));
            }
        }
    }
    Some(Manifest {
        namespace: ns,
        name,
        ports,
    })
}

/// The static pods' hostNetwork ports from the manifests in `dir` (agent-side), named as
/// the kubelet names them (`<name>-<node>`).
pub fn static_pods(dir: &Path, host_dir: &str, node: &str) -> Vec<Declared> {
    let mut out = Vec::new();
    let Ok(entries) = hostfs::dir_entries(dir, MAX_FILES) else {
        return out;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json"))
        .collect();
    names.sort();
    for n in names {
        let Ok(text) = hostfs::read_text(&dir.join(&n), cap::CONFIG) else {
            continue;
        };
        let Some(Manifest {
            namespace: ns,
            name,
            ports,
        }) = parse_manifest(&text)
        else {
            continue;
        };
        let pod_name = format!("{name}-{node}");
        if !crate::names::is_dns_label(&ns) || !crate::names::is_dns_subdomain(&pod_name) {
            continue;
        }
        for (protocol, port) in ports {
            out.push(Declared {
                protocol,
                port,
                pod: DeclaredPod {
                    name: format!("{ns}/{pod_name}"),
                    uid: None,
                    source: format!("{}/{n}", host_dir.trim_end_matches('/')),
                },
            });
        }
    }
    out
}

/// A running docker pod sandbox in the host network: its pod and exposed ports, from
/// `config.v2.json` and `hostconfig.json` texts.
pub fn parse_docker_sandbox(
    config_v2: &str,
    hostconfig: &str,
) -> Option<(DeclaredPod, Vec<(Protocol, u16)>)> {
    let host: serde_json::Value = serde_json::from_str(hostconfig).ok()?;
    if host.get("NetworkMode")?.as_str()? != "host" {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(config_v2).ok()?;
    if v.pointer("/State/Running").and_then(|r| r.as_bool()) != Some(true) {
        return None;
    }
    let labels = v.pointer("/Config/Labels")?;
    if labels.get("io.kubernetes.docker.type")?.as_str()? != "podsandbox" {
        return None;
    }
    let l = crate::pods::valid_labels(docker::parse_config_v2(config_v2).ok()?);
    let (ns, pod) = (l.namespace?, l.pod?);
    let id = v.get("ID").and_then(|i| i.as_str()).unwrap_or("");
    let mut ports = Vec::new();
    if let Some(exposed) = v
        .pointer("/Config/ExposedPorts")
        .and_then(|e| e.as_object())
    {
        for key in exposed.keys() {
            let (port, proto) = key.split_once('/').unwrap_or((key, "tcp"));
            if let (Ok(port), Some(proto)) = (port.parse::<u16>(), protocol(proto)) {
                if port > 0 {
                    ports.push((proto, port));
                }
            }
        }
    }
    ports.sort();
    Some((
        DeclaredPod {
            name: format!("{ns}/{pod}"),
            uid: l.pod_uid,
            source: format!(
                "docker container {}",
                id.chars().take(12).collect::<String>()
            ),
        },
        ports,
    ))
}

/// The docker sandboxes' hostNetwork ports under `<data root>/containers` (agent-side).
pub fn docker_sandboxes(containers: &Path) -> Vec<Declared> {
    let mut out = Vec::new();
    let Ok(entries) = hostfs::dir_entries(containers, MAX_FILES) else {
        return out;
    };
    for e in entries {
        let Some(id) = e.file_name().to_str().map(String::from) else {
            continue;
        };
        if !crate::names::is_container_id(&id) {
            continue;
        }
        let dir = containers.join(&id);
        let (Ok(c), Ok(h)) = (
            hostfs::read_text(&dir.join("config.v2.json"), cap::CONFIG),
            hostfs::read_text(&dir.join("hostconfig.json"), cap::CONFIG),
        ) else {
            continue;
        };
        if let Some((pod, ports)) = parse_docker_sandbox(&c, &h) {
            for (protocol, port) in ports {
                out.push(Declared {
                    protocol,
                    port,
                    pod: pod.clone(),
                });
            }
        }
    }
    out
}

/// The listeners of the host's network namespace (`<root>/proc/1/net/*`).
pub fn listeners(host: &HostPaths) -> Result<Vec<Listener>, crate::ReadError> {
    let mut out = Vec::new();
    for (path, protocol) in net_listen::paths(host, 1) {
        out.extend(net_listen::read(&path, protocol)?);
    }
    Ok(out)
}

/// Finds the processes holding the socket `inodes`: `/proc/<pid>/fd/*` links, at most
/// `max_links` of them read. Returns inode -> pid for those found. The caller asks only for
/// the sockets of ports that hostNetwork pods declare, and only for those whose holder it
/// does not remember: a node without such ports never reads a descriptor.
pub fn socket_owners(node: &Node, inodes: &HashSet<u64>, max_links: usize) -> HashMap<u64, u32> {
    let host = node.host();
    let mut out = HashMap::new();
    if inodes.is_empty() {
        return out;
    }
    let Ok(snap) = node.processes().snapshot("runtime/ports") else {
        return out;
    };
    let mut budget = max_links;
    'pids: for pid in snap.procs.iter().map(|p| p.pid) {
        let Ok(fds) =
            hostfs::dir_entries(&host.proc_pid(pid).join("fd"), crate::hostfs::entries::FDS)
        else {
            continue;
        };
        for fd in fds {
            if budget == 0 {
                break 'pids;
            }
            budget -= 1;
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            let Some(inode) = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if inodes.contains(&inode) {
                out.entry(inode).or_insert(pid);
                if out.len() == inodes.len() {
                    break 'pids;
                }
            }
        }
    }
    out
}

/// The declared ports grouped by (protocol, port).
pub fn group(declared: Vec<Declared>) -> BTreeMap<(Protocol, u16), Vec<DeclaredPod>> {
    let mut out: BTreeMap<(Protocol, u16), Vec<DeclaredPod>> = BTreeMap::new();
    for d in declared {
        let pods = out.entry((d.protocol, d.port)).or_default();
        if !pods.iter().any(|p| p.name == d.pod.name) {
            pods.push(d.pod);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // A hostNetwork static pod as an operator writes it (node-exporter pinned to the node).
    const MANIFEST: &str = "apiVersion: v1
kind: Pod
metadata:
  name: node-exporter
  namespace: monitoring
  labels:
    name: x
spec:
  hostNetwork: true
  containers:
  - name: node-exporter
    image: prom/node-exporter:v1.8.1
    ports:
    - containerPort: 9100
      name: metrics
    - name: dns
      containerPort: 5353
      protocol: UDP
    - containerPort: 9999
      protocol: SCTP
    livenessProbe:
      httpGet:
        port: 9100
  - name: sidecar
    ports:
      - hostPort: 8443
        containerPort: 443
";

    #[test]
    fn manifests_yaml_and_json() {
        let m = parse_manifest(MANIFEST).unwrap();
        assert_eq!(
            (m.namespace.as_str(), m.name.as_str()),
            ("monitoring", "node-exporter")
        );
        assert_eq!(
            m.ports,
            vec![
                (Protocol::Tcp, 9100),
                (Protocol::Udp, 5353),
                (Protocol::Tcp, 8443)
            ]
        );
        assert_eq!(
            parse_manifest(&MANIFEST.replace("hostNetwork: true", "hostNetwork: false")),
            None
        );
        assert_eq!(
            parse_manifest("kind: Deployment\nspec:\n  hostNetwork: true\n"),
            None
        );
        let j = r#"{"kind":"Pod","metadata":{"name":"etcd"},"spec":{"hostNetwork":true,"containers":[{"name":"etcd","ports":[{"containerPort":2379},{"containerPort":70000},{"hostPort":53,"containerPort":53,"protocol":"UDP"}]}]}}"#;
        assert_eq!(
            parse_manifest(j),
            Some(Manifest {
                namespace: "default".to_string(),
                name: "etcd".to_string(),
                ports: vec![(Protocol::Tcp, 2379), (Protocol::Udp, 53)]
            })
        );
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("node-exporter.yaml"), MANIFEST).unwrap();
        std::fs::write(t.path().join("notes.txt"), MANIFEST).unwrap();
        let d = static_pods(t.path(), "/etc/kubernetes/manifests", "node-1");
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].pod.name, "monitoring/node-exporter-node-1");
        assert_eq!(
            d[0].pod.source,
            "/etc/kubernetes/manifests/node-exporter.yaml"
        );
    }

    const SANDBOX: &str = r#"{"ID":"8f3e2a1b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f","State":{"Running":true,"Pid":4242},"Config":{"ExposedPorts":{"9100/tcp":{},"53/udp":{}},"Labels":{"io.kubernetes.docker.type":"podsandbox","io.kubernetes.pod.name":"node-exporter-abcde","io.kubernetes.pod.namespace":"monitoring","io.kubernetes.pod.uid":"5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f"}}}"#;

    #[test]
    fn docker_sandboxes_in_the_host_network() {
        let (pod, ports) = parse_docker_sandbox(SANDBOX, r#"{"NetworkMode":"host"}"#).unwrap();
        assert_eq!(pod.name, "monitoring/node-exporter-abcde");
        assert_eq!(
            pod.uid.as_deref(),
            Some("5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f")
        );
        assert_eq!(pod.source, "docker container 8f3e2a1b9c7d");
        assert_eq!(ports, vec![(Protocol::Tcp, 9100), (Protocol::Udp, 53)]);
        assert_eq!(
            parse_docker_sandbox(SANDBOX, r#"{"NetworkMode":"none"}"#),
            None
        );
        assert_eq!(
            parse_docker_sandbox(
                &SANDBOX.replace("podsandbox", "container"),
                r#"{"NetworkMode":"host"}"#
            ),
            None
        );
        assert_eq!(
            parse_docker_sandbox(
                &SANDBOX.replace("\"Running\":true", "\"Running\":false"),
                r#"{"NetworkMode":"host"}"#
            ),
            None
        );
        // A pod name that is not a Kubernetes name is not passed on.
        assert_eq!(
            parse_docker_sandbox(
                &SANDBOX.replace("node-exporter-abcde", "x;reboot"),
                r#"{"NetworkMode":"host"}"#
            ),
            None
        );
    }

    #[test]
    fn owners_through_fd_links() {
        let t = tempfile::tempdir().unwrap();
        let host = crate::node::Node::new(crate::HostPaths::new(t.path()));
        let fd = t.path().join("proc/77/fd");
        std::fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink("socket:[12345]", fd.join("3")).unwrap();
        std::os::unix::fs::symlink("/dev/null", fd.join("0")).unwrap();
        let got = socket_owners(&host, &HashSet::from([12345, 999]), 100);
        assert_eq!(got, HashMap::from([(12345, 77)]));
        assert!(socket_owners(&host, &HashSet::from([12345]), 0).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_manifest(&s);
            let _ = parse_docker_sandbox(&s, &s);
        }

        #[test]
        fn never_panics_on_yaml_like_text(s in "(( {0,6})(- )?(kind: Pod|hostNetwork: true|ports:|containerPort: [0-9]{1,6}|protocol: (UDP|TCP|x)|name: [a-z]{1,5}|metadata:)\n){0,30}") {
            let _ = parse_manifest(&s);
        }

        /// A hostNetwork static pod as kubeadm (YAML, list items at the key's indent or
        /// indented, keys in any order) or `kubectl -o json` writes it: its namespace, name and
        /// every TCP/UDP port read back (SCTP and port 0 left out), and a sandbox docker
        /// writes reads back its pod and exposed ports.
        #[test]
        fn reads_the_ports_it_was_given(
            ns in proptest::option::of(crate::testgen::dns_label()),
            name in crate::testgen::dns_subdomain(),
            containers in proptest::collection::vec(proptest::collection::vec(
                ("|TCP|UDP|SCTP", 0u16.., proptest::option::of(0u16..), proptest::bool::ANY), 0..4), 1..3),
            json in proptest::bool::ANY,
            indent_items in proptest::bool::ANY,
            uid in crate::testgen::pod_uid(),
        ) {
            let mut want = Vec::new();
            for (proto, container, host, _) in containers.iter().flatten() {
                let p = match proto.as_str() { "UDP" => Protocol::Udp, "SCTP" => continue, _ => Protocol::Tcp };
                if let Some(port) = Some(host.unwrap_or(*container)).filter(|p| *p > 0) {
                    want.push((p, port));
                }
            }
            let text = if json {
                let cs: Vec<_> = containers.iter().enumerate().map(|(i, ports)| {
                    let ps: Vec<_> = ports.iter().map(|(proto, c, h, _)| {
                        let mut p = serde_json::json!({"containerPort": c, "name": "p"});
                        if let Some(h) = h { p["hostPort"] = (*h).into(); }
                        if !proto.is_empty() { p["protocol"] = proto.clone().into(); }
                        p
                    }).collect();
                    serde_json::json!({"name": format!("c{i}"), "image": "registry.k8s.io/etcd:3.5.12-0", "ports": ps})
                }).collect();
                let mut meta = serde_json::json!({"name": name, "labels": {"tier": "control-plane"}});
                if let Some(ns) = &ns { meta["namespace"] = ns.clone().into(); }
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": {"hostNetwork": true, "containers": cs}}).to_string()
            } else {
                let mut t = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    component: x\n");
                t += &format!("  name: {name}\n");
                if let Some(ns) = &ns { t += &format!("  namespace: \"{ns}\"\n"); }
                t += "spec:\n  containers:\n";
                let pad = if indent_items { "  " } else { "" };
                for (i, ports) in containers.iter().enumerate() {
                    t += &format!("  - name: c{i}\n    image: registry.k8s.io/etcd:3.5.12-0\n    command:\n    - etcd\n");
                    if ports.is_empty() { continue; }
                    t += "    ports:\n";
                    for (proto, c, h, proto_first) in ports {
                        let mut keys = vec![format!("containerPort: {c}"), "name: metrics".to_string()];
                        if let Some(h) = h { keys.push(format!("hostPort: {h}")); }
                        if !proto.is_empty() {
                            let at = if *proto_first { 0 } else { keys.len() };
                            keys.insert(at, format!("protocol: {proto}"));
                        }
                        t += &format!("    {pad}- {}\n", keys[0]);
                        for k in &keys[1..] { t += &format!("    {pad}  {k}\n"); }
                    }
                    t += "    resources:\n      requests:\n        cpu: 100m\n";
                }
                t += "  hostNetwork: true\n  priorityClassName: system-node-critical\nstatus: {}\n";
                t
            };
            let m = Manifest { namespace: ns.clone().unwrap_or_else(|| "default".into()), name: name.clone(), ports: want.clone() };
            proptest::prop_assert_eq!(parse_manifest(&text), Some(m), "{}", text);

            let exposed: serde_json::Map<String, serde_json::Value> = containers.iter().flatten()
                .map(|(proto, c, _, _)| (format!("{c}/{}", if proto.is_empty() { "tcp".to_string() } else { proto.to_lowercase() }), serde_json::json!({})))
                .collect();
            let mut ports: Vec<(Protocol, u16)> = exposed.keys().filter_map(|k| {
                let (port, proto) = k.split_once('/')?;
                let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
                match proto { "tcp" => Some((Protocol::Tcp, port)), "udp" => Some((Protocol::Udp, port)), _ => None }
            }).collect();
            ports.sort();
            let ns = ns.unwrap_or_else(|| "default".into());
            let config = serde_json::json!({"ID": "8f3e2a1b9c7d6e5f", "State": {"Running": true, "Pid": 4242},
                "Config": {"ExposedPorts": exposed, "Labels": {"io.kubernetes.docker.type": "podsandbox",
                    "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid}}});
            let pod = DeclaredPod { name: format!("{ns}/{name}"), uid: Some(uid), source: "docker container 8f3e2a1b9c7d".into() };
            proptest::prop_assert_eq!(parse_docker_sandbox(&config.to_string(), r#"{"NetworkMode":"host"}"#), Some((pod, ports)));
        }
    }
}
