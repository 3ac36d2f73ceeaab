//! Names node-doctor recognises: the Kubernetes names it accepts from host files (a
//! directory, label or cgroup name counts as a pod's or container's only when it is a valid
//! one, so host text that is not one is never passed on as a name), and the processes of
//! the container runtimes and the kubelet. The one list of each: readers, collectors and the
//! agent ask here.

/// The daemons node-doctor follows by process name (`comm`): the container runtimes it
/// probes, the kubelet and kube-proxy.
pub const DAEMONS: &[&str] = &[
    "dockerd",
    "containerd",
    "cri-dockerd",
    "kubelet",
    "kube-proxy",
];

/// Processes of the container runtimes, as `comm` prefixes (a `comm` is at most 15 bytes):
/// `docker` covers dockerd, docker-proxy and docker-containerd, `containerd` its shims,
/// `cri-dockerd` the CRI shim of docker, `crio`, `conmon`, `runc` and `crun` CRI-O and the OCI
/// runtimes.
pub const RUNTIME_PREFIXES: &[&str] = &[
    "docker",
    "containerd",
    "cri-dockerd",
    "crio",
    "conmon",
    "runc",
    "crun",
];

/// The kubelet's process name.
pub const KUBELET: &str = "kubelet";

/// A process of a container runtime ([`RUNTIME_PREFIXES`]).
pub fn is_runtime(comm: &str) -> bool {
    RUNTIME_PREFIXES.iter().any(|p| comm.starts_with(p))
}

/// A process of a container runtime or the kubelet: a hang in one stops pods from being
/// created or deleted.
pub fn is_runtime_or_kubelet(comm: &str) -> bool {
    comm == KUBELET || is_runtime(comm)
}

/// A host process that is part of Kubernetes itself rather than a workload outside it: the
/// runtimes, the kubelet, kube-proxy and node-doctor.
pub fn is_node_infrastructure(comm: &str) -> bool {
    is_runtime_or_kubelet(comm) || comm == "kube-proxy" || comm == "node-doctor"
}

/// A DNS-1123 label (namespaces, container names): 1–63 of `[a-z0-9-]`, starting and
/// ending with a letter or digit.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain (pod names): at most 253 characters, labels of `[a-z0-9-]` joined by
/// dots, each starting and ending with a letter or digit.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// A pod UID: a UUID in lower-case hex (`8-4-4-4-12`), or the 32 hex digits the kubelet
/// derives for static pods from their manifest.
pub fn is_pod_uid(s: &str) -> bool {
    let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    let b = s.as_bytes();
    match b.len() {
        32 => b.iter().all(|c| hex(*c)),
        36 => b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                hex(*c)
            }
        }),
        _ => false,
    }
}

/// A full container id of docker, containerd or CRI-O: 64 lower-case hex digits.
pub fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";
    const CID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

    #[test]
    fn kubernetes_name_rules() {
        for ok in ["default", "kube-system", "a", "a1-b2", &"x".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "a b",
            &"x".repeat(64),
            "é",
        ] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        for ok in ["web-7c9d", "a.b-c.d", "0", &"a".repeat(253)] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "a.-b", "Web", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
        assert!(is_pod_uid(UID));
        assert!(is_pod_uid("6d1b2a3c4d5e6f708192a3b4c5d6e7f8"));
        for bad in [
            "",
            "5f0c",
            &UID.to_uppercase(),
            &UID.replace('-', "_"),
            &format!("{UID}0"),
        ] {
            assert!(!is_pod_uid(bad), "{bad}");
        }
        assert!(is_container_id(CID));
        assert!(!is_container_id(&CID[..12]));
        assert!(!is_container_id(&CID.to_uppercase()));
        assert!(!is_container_id(&format!("{}g", &CID[..63])));
    }

    #[test]
    fn runtime_processes_by_prefix() {
        for comm in [
            "dockerd",
            "docker-proxy",
            "containerd",
            "containerd-shim",
            "cri-dockerd",
            "runc",
            "crun",
            "conmon",
            "crio",
        ] {
            assert!(is_runtime(comm), "{comm}");
            assert!(is_node_infrastructure(comm), "{comm}");
        }
        assert!(!is_runtime("kubelet") && is_runtime_or_kubelet("kubelet"));
        assert!(!is_runtime_or_kubelet("kube-proxy") && is_node_infrastructure("kube-proxy"));
        for comm in ["nginx", "java", "crond", "dock"] {
            assert!(!is_node_infrastructure(comm), "{comm}");
        }
    }
}
