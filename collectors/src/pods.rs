//! Pod UID -> namespace/name (and container id -> container name) from the metadata the kubelet
//! and the container runtime leave on the node's disk. Best effort, cached, bounded: no API
//! server, no CRI socket.
//!
//! Sources:
//! - `/var/log/pods/<namespace>_<pod>_<uid>/` (kubelet, every CRI runtime since 1.14);
//! - `/var/log/containers/<pod>_<namespace>_<container>-<container id>.log` (kubelet symlinks);
//! - `<docker data-root>/containers/<id>/config.v2.json` labels `io.kubernetes.pod.uid`,
//!   `io.kubernetes.pod.namespace`, `io.kubernetes.pod.name`, `io.kubernetes.container.name`
//!   (dockershim and cri-dockerd nodes).
//!
//! Namespaces and pod names are DNS labels/subdomains: they never contain `_`, which makes the
//! directory names unambiguous.
//!
//! These names are host data (anyone who can create a directory under `/var/log/pods` or a
//! container with labels writes them), and they end up in printed commands and reports. A
//! name is taken for a Kubernetes name only when it is one: namespaces and container names
//! are DNS-1123 labels, pod names DNS-1123 subdomains, pod UIDs UUIDs (or the 32 hex digits
//! the kubelet gives static pods), container ids 64 hex digits. Anything else is not a pod:
//! skipped, counted ([`PodDirectory::rejected`]) and logged at debug level.

use crate::names::{is_container_id, is_dns_label, is_dns_subdomain, is_pod_uid};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::docker::{self, PodLabels};
use crate::host::HostPaths;

/// Where to look and how much to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct PodsConfig {
    /// The kubelet's pod log directory (host path).
    pub pod_log_dir: PathBuf,
    /// The kubelet's container log symlink directory (host path).
    pub container_log_dir: PathBuf,
    /// Docker data roots (host paths) whose `containers/*/config.v2.json` are read.
    pub docker_roots: Vec<PathBuf>,
    /// Re-read the directories at most this often.
    pub refresh_interval: Duration,
    /// At most this many pods and containers are kept (a node runs at most a few hundred).
    pub max_entries: usize,
    /// `config.v2.json` files larger than this are not parsed.
    pub max_config_bytes: u64,
}

impl Default for PodsConfig {
    fn default() -> Self {
        PodsConfig {
            pod_log_dir: PathBuf::from("/var/log/pods"),
            container_log_dir: PathBuf::from("/var/log/containers"),
            docker_roots: vec![PathBuf::from("/var/lib/docker")],
            refresh_interval: Duration::from_secs(60),
            max_entries: 4096,
            max_config_bytes: 1 << 20,
        }
    }
}

/// A pod as its on-disk metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodMeta {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What the node's metadata says about a process's pod and container (see
/// [`PodDirectory::names`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodNames {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub container: Option<String>,
}

/// A container as its on-disk metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerMeta {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub pod_uid: Option<String>,
}

/// Parses a `/var/log/pods` directory name `<namespace>_<pod>_<uid>`: the one parser of these
/// names (disk names CRI log owners with it). `None` unless every part is a valid Kubernetes
/// name.
pub fn parse_pod_log_dir(name: &str) -> Option<PodMeta> {
    let mut it = name.split('_');
    let (ns, pod, uid) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || !is_dns_label(ns) || !is_dns_subdomain(pod) || !is_pod_uid(uid) {
        return None;
    }
    Some(PodMeta {
        namespace: ns.to_string(),
        name: pod.to_string(),
        uid: uid.to_string(),
    })
}

/// Parses a `/var/log/containers` file name `<pod>_<namespace>_<container>-<id>.log` into the
/// container id and its metadata. `None` unless every part is a valid Kubernetes name and the
/// id a full container id.
pub fn parse_container_log_name(name: &str) -> Option<(String, ContainerMeta)> {
    let stem = name.strip_suffix(".log")?;
    let mut it = stem.split('_');
    let (pod, ns, rest) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || !is_dns_subdomain(pod) || !is_dns_label(ns) {
        return None;
    }
    let (container, id) = rest.rsplit_once('-')?;
    if !is_dns_label(container) || !is_container_id(id) {
        return None;
    }
    Some((
        id.to_string(),
        ContainerMeta {
            namespace: ns.to_string(),
            pod: pod.to_string(),
            container: container.to_string(),
            pod_uid: None,
        },
    ))
}

/// Parses a docker `config.v2.json` into the Kubernetes labels it carries; `None` for a
/// container not started by the kubelet or unparsable JSON. The labels are read by
/// [`docker::parse_config_v2`].
pub fn parse_docker_config(json: &str) -> Option<ContainerMeta> {
    ContainerMeta::from_labels(docker::parse_config_v2(json).ok()?)
}

impl ContainerMeta {
    /// A container from its docker labels; `None` without a valid namespace and pod name, or
    /// with an invalid container name (not a Kubernetes container). An invalid pod UID is
    /// dropped.
    pub fn from_labels(l: PodLabels) -> Option<ContainerMeta> {
        let namespace = l.namespace.filter(|n| is_dns_label(n))?;
        let pod = l.pod.filter(|p| is_dns_subdomain(p))?;
        let container = match l.container {
            Some(c) if is_dns_label(&c) => c,
            Some(_) => return None,
            // The sandbox ("pause") container has no container name label.
            None => "POD".to_string(),
        };
        Some(ContainerMeta {
            namespace,
            pod,
            container,
            pod_uid: l.pod_uid.filter(|u| is_pod_uid(u)),
        })
    }
}

/// Docker labels with every name that is not a valid Kubernetes name dropped (for readers
/// that use the labels one by one, such as the disk collector naming a log's owner).
pub fn valid_labels(l: PodLabels) -> PodLabels {
    PodLabels {
        namespace: l.namespace.filter(|n| is_dns_label(n)),
        pod: l.pod.filter(|p| is_dns_subdomain(p)),
        container: l.container.filter(|c| is_dns_label(c)),
        pod_uid: l.pod_uid.filter(|u| is_pod_uid(u)),
    }
}

/// The cached directory of pods and containers on this node.
#[derive(Debug)]
pub struct PodDirectory {
    host: HostPaths,
    config: PodsConfig,
    pods: HashMap<String, PodMeta>,
    containers: HashMap<String, ContainerMeta>,
    /// Docker container ids already parsed (with their result), pruned to existing dirs.
    docker_parsed: HashMap<String, Option<ContainerMeta>>,
    /// Entries of the last refresh that were not valid Kubernetes names.
    rejected: usize,
    last_refresh: Option<Instant>,
}

impl PodDirectory {
    pub fn new(host: HostPaths, config: PodsConfig) -> Self {
        PodDirectory {
            host,
            config,
            pods: HashMap::new(),
            containers: HashMap::new(),
            docker_parsed: HashMap::new(),
            rejected: 0,
            last_refresh: None,
        }
    }

    /// Refreshes when never refreshed or older than the refresh interval. Returns whether it did.
    pub fn refresh_if_stale(&mut self, now: Instant) -> bool {
        let stale = match self.last_refresh {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= self.config.refresh_interval,
        };
        if stale {
            self.refresh();
            self.last_refresh = Some(now);
        }
        stale
    }

    /// Re-reads every source now.
    pub fn refresh(&mut self) {
        let max = self.config.max_entries;
        let mut pods: HashMap<String, PodMeta> = HashMap::new();
        let mut containers: HashMap<String, ContainerMeta> = HashMap::new();
        let mut rejected: Vec<String> = Vec::new();

        for name in dir_names(&self.host.resolve(&self.config.pod_log_dir), max) {
            match parse_pod_log_dir(&name) {
                Some(p) => {
                    pods.insert(p.uid.clone(), p);
                }
                None => rejected.push(name),
            }
        }
        for name in dir_names(&self.host.resolve(&self.config.container_log_dir), max) {
            match parse_container_log_name(&name) {
                Some((id, c)) => {
                    containers.insert(id, c);
                }
                None => rejected.push(name),
            }
        }

        let mut present: HashSet<String> = HashSet::new();
        for root in &self.config.docker_roots {
            let dir = self.host.resolve(root).join("containers");
            for id in dir_names(&dir, max) {
                if present.len() >= max {
                    break;
                }
                if !is_container_id(&id) {
                    rejected.push(id);
                    continue;
                }
                if !self.docker_parsed.contains_key(&id) {
                    let meta = docker::read_pod_labels_limited(
                        &dir.join(&id),
                        self.config.max_config_bytes,
                    )
                    .and_then(ContainerMeta::from_labels);
                    self.docker_parsed.insert(id.clone(), meta);
                }
                present.insert(id);
            }
        }
        self.docker_parsed.retain(|id, _| present.contains(id));
        for (id, meta) in &self.docker_parsed {
            let Some(m) = meta else { continue };
            if let Some(uid) = &m.pod_uid {
                if pods.len() < max {
                    pods.entry(uid.clone()).or_insert_with(|| PodMeta {
                        namespace: m.namespace.clone(),
                        name: m.pod.clone(),
                        uid: uid.clone(),
                    });
                }
            }
            if containers.len() < max {
                containers.insert(id.clone(), m.clone());
            }
        }
        // Fill in pod UIDs of containers known only by their log symlink.
        let by_name: HashMap<(String, String), String> = pods
            .values()
            .map(|p| ((p.namespace.clone(), p.name.clone()), p.uid.clone()))
            .collect();
        for c in containers.values_mut() {
            if c.pod_uid.is_none() {
                c.pod_uid = by_name.get(&(c.namespace.clone(), c.pod.clone())).cloned();
            }
        }
        if rejected.len() != self.rejected {
            // The name is host text: logged as a plain string, which the text log format
            // prints with Rust escapes (no control character reaches the terminal).
            let example = rejected.first().map(String::as_str).unwrap_or("");
            let example: String = example.chars().take(256).collect();
            tracing::debug!(
                rejected = rejected.len(),
                example = example.as_str(),
                "pod directory: entries that are not valid Kubernetes names are skipped"
            );
        }
        self.rejected = rejected.len();
        if pods.len() != self.pods.len() || containers.len() != self.containers.len() {
            tracing::debug!(
                pods = pods.len(),
                containers = containers.len(),
                "pod directory refreshed"
            );
        }
        self.pods = pods;
        self.containers = containers;
    }

    /// The pod with this UID, when the node's metadata names it.
    pub fn pod(&self, uid: &str) -> Option<&PodMeta> {
        self.pods.get(uid)
    }

    /// The container with this id (full 64-hex id, or a unique prefix of at least 12).
    pub fn container(&self, id: &str) -> Option<&ContainerMeta> {
        if let Some(c) = self.containers.get(id) {
            return Some(c);
        }
        if id.len() < 12 {
            return None;
        }
        let mut found = self
            .containers
            .iter()
            .filter(|(k, _)| k.starts_with(id) || id.starts_with(k.as_str()));
        match (found.next(), found.next()) {
            (Some((_, c)), None) => Some(c),
            _ => None,
        }
    }

    /// The names of a process's pod and container, from the pod UID and container id its
    /// cgroup gives: namespace and pod by UID, container by id. Unknown parts are `None`.
    pub fn names(&self, uid: Option<&str>, container_id: Option<&str>) -> PodNames {
        let pod = uid.and_then(|u| self.pod(u));
        PodNames {
            namespace: pod.map(|p| p.namespace.clone()),
            name: pod.map(|p| p.name.clone()),
            container: container_id
                .and_then(|id| self.container(id))
                .map(|c| c.container.clone()),
        }
    }

    /// Number of pods and containers known.
    pub fn len(&self) -> (usize, usize) {
        (self.pods.len(), self.containers.len())
    }

    /// Directory entries of the last refresh skipped because their names are not valid
    /// Kubernetes names (or container ids).
    pub fn rejected(&self) -> usize {
        self.rejected
    }
}

/// The names of at most `max` entries of a directory; empty when it does not exist.
fn dir_names(dir: &std::path::Path, max: usize) -> Vec<String> {
    let Ok(rd) = crate::hostfs::dir_entries(dir, max) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";
    const CID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

    #[test]
    fn parses_pod_log_dirs() {
        let p = parse_pod_log_dir(&format!("kube-system_coredns-5d78c9869d-x2x4b_{UID}")).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
            ("kube-system", "coredns-5d78c9869d-x2x4b", UID)
        );
        assert!(parse_pod_log_dir("a_b").is_none());
        assert!(parse_pod_log_dir("a_b_c_d").is_none());
        assert!(parse_pod_log_dir("a_b_not-a-uid!").is_none());
    }

    #[test]
    fn parses_container_log_names() {
        let (id, c) = parse_container_log_name(&format!("web-7c9d_shop_nginx-{CID}.log")).unwrap();
        assert_eq!(id, CID);
        assert_eq!(
            (c.pod.as_str(), c.namespace.as_str(), c.container.as_str()),
            ("web-7c9d", "shop", "nginx")
        );
        // Container names may contain dashes; the id is after the last one.
        let (_, c) = parse_container_log_name(&format!("p_ns_side-car-{CID}.log")).unwrap();
        assert_eq!(c.container, "side-car");
        assert!(parse_container_log_name("p_ns_c-xyz.log").is_none());
        assert!(parse_container_log_name("p_ns_c.txt").is_none());
    }

    #[test]
    fn parses_docker_config_labels() {
        // Trimmed from a dockershim node (Docker 19.03, Kubernetes 1.18).
        let json = format!(
            r#"{{"ID":"{CID}","Config":{{"Hostname":"web","Labels":{{"annotation.io.kubernetes.container.hash":"3e8a","io.kubernetes.container.name":"nginx","io.kubernetes.docker.type":"container","io.kubernetes.pod.name":"web-7c9d","io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.uid":"{UID}"}}}},"State":{{"Running":true}}}}"#
        );
        let c = parse_docker_config(&json).unwrap();
        assert_eq!(c.container, "nginx");
        assert_eq!(c.pod_uid.as_deref(), Some(UID));
        assert!(parse_docker_config(r#"{"Config":{"Labels":{}}}"#).is_none());
        // A sandbox container (no container name) with a malformed UID label.
        let c = parse_docker_config(
            r#"{"Config":{"Labels":{"io.kubernetes.pod.name":"p","io.kubernetes.pod.namespace":"n","io.kubernetes.pod.uid":"not a uid!"}}}"#,
        )
        .unwrap();
        assert_eq!((c.container.as_str(), c.pod_uid), ("POD", None));
        assert!(parse_docker_config("not json").is_none());
    }

    #[test]
    fn directory_refreshes_and_prunes() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join(format!("var/log/pods/shop_web-7c9d_{UID}"))).unwrap();
        let cdir = root.join("var/lib/docker/containers").join(CID);
        std::fs::create_dir_all(&cdir).unwrap();
        std::fs::write(
            cdir.join("config.v2.json"),
            format!(r#"{{"Config":{{"Labels":{{"io.kubernetes.container.name":"nginx","io.kubernetes.pod.name":"web-7c9d","io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.uid":"{UID}"}}}}}}"#),
        )
        .unwrap();
        let mut d = PodDirectory::new(HostPaths::new(root), PodsConfig::default());
        let t0 = Instant::now();
        assert!(d.refresh_if_stale(t0));
        assert_eq!(d.pod(UID).unwrap().name, "web-7c9d");
        assert_eq!(d.container(&CID[..12]).unwrap().container, "nginx");
        assert_eq!(
            d.names(Some(UID), Some(CID)),
            PodNames {
                namespace: Some("shop".into()),
                name: Some("web-7c9d".into()),
                container: Some("nginx".into()),
            }
        );
        assert_eq!(d.names(Some("0000"), None), PodNames::default());
        // Not stale yet: a removed container is still known until the next refresh.
        std::fs::remove_dir_all(&cdir).unwrap();
        assert!(!d.refresh_if_stale(t0 + Duration::from_secs(1)));
        assert!(d.container(CID).is_some());
        assert!(d.refresh_if_stale(t0 + Duration::from_secs(61)));
        assert!(d.container(CID).is_none());
        assert_eq!(d.len(), (1, 0));
    }

    /// Names a hostile process or user could give directories and labels: none of them is
    /// taken for a pod, namespace or container.
    const HOSTILE: &[&str] = &[
        "x$(touch /tmp/pwned)",
        "a`id`",
        "a;b",
        "a|b",
        "a&&b",
        "it's",
        "a\"b",
        "a\nb",
        "a\x1b[31mb",
        "a\u{202e}b",
        "a b",
        "A",
    ];

    #[test]
    fn hostile_names_are_not_pods() {
        for bad in HOSTILE {
            assert_eq!(
                parse_pod_log_dir(&format!("{bad}_web_{UID}")),
                None,
                "{bad:?}"
            );
            assert_eq!(
                parse_pod_log_dir(&format!("shop_{bad}_{UID}")),
                None,
                "{bad:?}"
            );
            assert_eq!(
                parse_pod_log_dir(&format!("shop_web_{bad}")),
                None,
                "{bad:?}"
            );
            for name in [
                format!("{bad}_shop_c-{CID}.log"),
                format!("web_{bad}_c-{CID}.log"),
                format!("web_shop_{bad}-{CID}.log"),
                format!("web_shop_c-{bad}.log"),
            ] {
                assert_eq!(parse_container_log_name(&name), None, "{name:?}");
            }
            let label = |k: &str, v: &str| {
                let mut l = PodLabels {
                    namespace: Some("shop".into()),
                    pod: Some("web".into()),
                    container: Some("c".into()),
                    pod_uid: Some(UID.into()),
                };
                match k {
                    "namespace" => l.namespace = Some(v.into()),
                    "pod" => l.pod = Some(v.into()),
                    _ => l.container = Some(v.into()),
                }
                l
            };
            for k in ["namespace", "pod", "container"] {
                assert_eq!(
                    ContainerMeta::from_labels(label(k, bad)),
                    None,
                    "{k}={bad:?}"
                );
                let v = valid_labels(label(k, bad));
                assert!(
                    [&v.namespace, &v.pod, &v.container]
                        .iter()
                        .all(|x| x.as_deref() != Some(*bad)),
                    "{k}={bad:?}"
                );
            }
        }
    }

    #[test]
    fn the_directory_skips_and_counts_hostile_entries() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join(format!("var/log/pods/shop_web-7c9d_{UID}"))).unwrap();
        for bad in ["x$(touch /tmp/pwned)", "a\nb", "a\x1b[31m"] {
            std::fs::create_dir_all(root.join(format!("var/log/pods/shop_{bad}_{UID}"))).unwrap();
        }
        std::fs::create_dir_all(root.join("var/log/containers")).unwrap();
        std::fs::write(
            root.join(format!("var/log/containers/web_shop_c;reboot-{CID}.log")),
            "",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("var/lib/docker/containers/$(id)")).unwrap();
        let mut d = PodDirectory::new(HostPaths::new(root), PodsConfig::default());
        d.refresh();
        assert_eq!(d.len(), (1, 0));
        assert_eq!(d.pod(UID).unwrap().name, "web-7c9d");
        assert_eq!(d.rejected(), 5);
    }

    proptest::proptest! {
        /// Whatever the directory name, what is parsed out of it is a valid Kubernetes name.
        #[test]
        fn parsed_names_are_always_valid(s in "[a-z0-9_.;$`'\n -]{0,40}_[a-f0-9-]{36}") {
            if let Some(p) = parse_pod_log_dir(&s) {
                proptest::prop_assert!(is_dns_label(&p.namespace) && is_dns_subdomain(&p.name) && is_pod_uid(&p.uid));
            }
        }

        #[test]
        fn parsers_never_panic(s in ".*") {
            let _ = parse_pod_log_dir(&s);
            let _ = parse_container_log_name(&s);
            let _ = parse_docker_config(&s);
        }

        /// The names the kubelet makes (`/var/log/pods/<ns>_<pod>_<uid>`,
        /// `/var/log/containers/<pod>_<ns>_<container>-<id>.log`) and the labels dockershim
        /// writes read back to the pod they were made from.
        #[test]
        fn names_the_kubelet_makes_read_back(
            ns in crate::testgen::dns_label(),
            pod in crate::testgen::dns_subdomain(),
            uid in crate::testgen::pod_uid(),
            container in proptest::option::of(crate::testgen::dns_label()),
            id in crate::testgen::container_id(),
        ) {
            proptest::prop_assert_eq!(
                parse_pod_log_dir(&format!("{ns}_{pod}_{uid}")),
                Some(PodMeta { namespace: ns.clone(), name: pod.clone(), uid: uid.clone() })
            );
            let c = container.clone().unwrap_or_else(|| "pause".into());
            proptest::prop_assert_eq!(
                parse_container_log_name(&format!("{pod}_{ns}_{c}-{id}.log")),
                Some((id, ContainerMeta { namespace: ns.clone(), pod: pod.clone(), container: c, pod_uid: None }))
            );
            let mut labels = serde_json::json!({
                "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod,
                "io.kubernetes.pod.uid": uid, "io.kubernetes.docker.type": "container",
            });
            if let Some(c) = &container {
                labels["io.kubernetes.container.name"] = c.clone().into();
            }
            let v2 = serde_json::json!({"ID": "4d3c", "Config": {"Labels": labels}});
            proptest::prop_assert_eq!(
                parse_docker_config(&v2.to_string()),
                Some(ContainerMeta { namespace: ns, pod, container: container.unwrap_or_else(|| "POD".into()), pod_uid: Some(uid) })
            );
        }
    }
}
