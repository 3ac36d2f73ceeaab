//! `/proc/<pid>/cgroup`: where a process runs — in a Kubernetes pod (pod UID, QoS class,
//! container id) or directly on the host, "not managed by Kubernetes".
//!
//! Handles cgroup v1 (`N:controllers:/path`) and v2 (`0::/path`), and the kubelet's two cgroup
//! drivers:
//! - cgroupfs: `/kubepods/burstable/pod<uid>/<container-id>`, `/kubepods/pod<uid>/<id>` (Guaranteed)
//! - systemd:  `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`
//!   (also `docker-<id>.scope`, `crio-<id>.scope`, and `kubepods-pod<uid>.slice` for Guaranteed).
//!
//! The file's line split (`id:controllers:path`) is ours too: the work here is classifying the
//! path, which `procfs-core` does not do, and its `ProcessCGroups` refuses the whole file for
//! one line it cannot read, where this classifies from the lines it can (test
//! `procfs_core_refuses_the_file_for_one_bad_line`).

use crate::host::HostPaths;

/// A pod's QoS class as the kubelet encodes it in the cgroup path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// Where a process runs, as far as its cgroup tells.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Placement {
    /// In a Kubernetes pod.
    Pod(PodRef),
    /// On the host, outside Kubernetes (a systemd service, a user session, a kernel thread...).
    /// `cgroup` is the path that says so, e.g. `/system.slice/mysqld.service`.
    Host { cgroup: String },
}

impl Placement {
    pub fn pod(&self) -> Option<&PodRef> {
        match self {
            Placement::Pod(p) => Some(p),
            Placement::Host { .. } => None,
        }
    }

    pub fn is_kubernetes(&self) -> bool {
        matches!(self, Placement::Pod(_))
    }
}

/// A pod as identified from a cgroup path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// The pod UID with dashes (`1f2e...-...`), as the API server shows it.
    pub uid: String,
    pub qos: QosClass,
    /// The container id (64 hex chars) when the path goes down to the container.
    pub container_id: Option<String>,
}

/// Classifies the text of a `/proc/<pid>/cgroup` file. Unknown or empty text is a host process
/// with whatever path it had.
pub fn parse(text: &str) -> Placement {
    let mut first_path: Option<&str> = None;
    for line in text.lines() {
        // hierarchy-ID:controller-list:path — the path may itself contain ':'.
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(_ctrl), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if first_path.is_none() {
            first_path = Some(path);
        }
        if let Some(pod) = pod_from_path(path) {
            return Placement::Pod(pod);
        }
    }
    Placement::Host {
        cgroup: first_path.unwrap_or("").to_string(),
    }
}

/// Reads `<root>/proc/<pid>/cgroup`; `None` when the pid vanished.
pub fn read(host: &HostPaths, pid: u32) -> Option<Placement> {
    let path = host.proc_pid(pid).join("cgroup");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::PID_CGROUP).ok()?;
    Some(parse(&text))
}

/// The cgroup path of one controller in a `/proc/<pid>/cgroup` text, and whether it is the
/// v2 hierarchy's: the v1 line whose controller list names `controller` (`4:cpu,cpuacct:/x`),
/// else the v2 line (`0::/x`). `None` when neither is there.
pub fn controller_path(text: &str, controller: &str) -> Option<(String, bool)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        if id == "0" && ctrl.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrl.split(',').any(|c| c == controller) {
            return Some((path.to_string(), false));
        }
    }
    v2.map(|p| (p, true))
}

/// Recognises a kubepods cgroup path of either driver.
pub fn pod_from_path(path: &str) -> Option<PodRef> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let start = segs
        .iter()
        .position(|s| *s == "kubepods" || *s == "kubepods.slice")?;
    let mut qos = QosClass::Guaranteed;
    let mut uid = None;
    let mut container_id = None;
    for seg in &segs[start + 1..] {
        if uid.is_none() {
            match *seg {
                "burstable" | "kubepods-burstable.slice" => {
                    qos = QosClass::Burstable;
                    continue;
                }
                "besteffort" | "kubepods-besteffort.slice" => {
                    qos = QosClass::BestEffort;
                    continue;
                }
                _ => {}
            }
            if let Some(u) = uid_from_segment(seg) {
                uid = Some(u);
                continue;
            }
        } else if container_id.is_none() {
            container_id = container_from_segment(seg);
        }
    }
    uid.map(|uid| PodRef {
        uid,
        qos,
        container_id,
    })
}

/// `pod<uid>` (cgroupfs) or `kubepods-<qos>-pod<uid_with_underscores>.slice` (systemd); the
/// UID must be a valid pod UID ([`crate::names::is_pod_uid`]).
fn uid_from_segment(seg: &str) -> Option<String> {
    let raw = if let Some(rest) = seg.strip_suffix(".slice") {
        let idx = rest.rfind("-pod")?;
        &rest[idx + 4..]
    } else {
        seg.strip_prefix("pod")?
    };
    let uid = raw.replace('_', "-");
    crate::names::is_pod_uid(&uid).then_some(uid)
}

/// `<id>` (cgroupfs), `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`;
/// the id must be a full container id ([`crate::names::is_container_id`]).
fn container_from_segment(seg: &str) -> Option<String> {
    let base = seg.strip_suffix(".scope").unwrap_or(seg);
    let id = base.rsplit('-').next().unwrap_or(base);
    crate::names::is_container_id(id).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "4d3c2b1a0f9e8d7c6b5a49382716051f4e3d2c1b0a99887766554433221100ff";

    #[test]
    fn cgroup_v1_cgroupfs_burstable() {
        // Docker + kubelet cgroupfs driver, Linux 4.14 (the handbook's TKE nodes).
        let text = format!(
            "12:pids:/kubepods/burstable/pod5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60/{CID}\n\
             11:memory:/kubepods/burstable/pod5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60/{CID}\n\
             1:name=systemd:/kubepods/burstable/pod5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60/{CID}\n"
        );
        let p = parse(&text);
        let pod = p.pod().unwrap();
        assert_eq!(pod.uid, "5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60");
        assert_eq!(pod.qos, QosClass::Burstable);
        assert_eq!(pod.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn procfs_core_refuses_the_file_for_one_bad_line() {
        use procfs_core::FromRead;
        let text = format!(
            "x:pids:/\n11:memory:/kubepods/burstable/pod5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60/{CID}\n"
        );
        assert!(procfs_core::ProcessCGroups::from_read(text.as_bytes()).is_err());
        assert!(parse(&text).is_kubernetes());
    }

    #[test]
    fn cgroup_v1_guaranteed_without_qos_segment() {
        let text =
            format!("4:cpu,cpuacct:/kubepods/pod0a1b2c3d-0000-1111-2222-333344445555/{CID}\n");
        let pod = parse(&text).pod().cloned().unwrap();
        assert_eq!(pod.qos, QosClass::Guaranteed);
        assert_eq!(pod.uid, "0a1b2c3d-0000-1111-2222-333344445555");
    }

    #[test]
    fn cgroup_v2_systemd_containerd() {
        let text = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7c1e2d3f_4a5b_8c9d_0e1f_2a3b4c5d6e7f.slice/cri-containerd-{CID}.scope\n"
        );
        let pod = parse(&text).pod().cloned().unwrap();
        assert_eq!(pod.uid, "7c1e2d3f-4a5b-8c9d-0e1f-2a3b4c5d6e7f");
        assert_eq!(pod.qos, QosClass::BestEffort);
        assert_eq!(pod.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn cgroup_v2_guaranteed_systemd_docker() {
        let text = format!(
            "0::/kubepods.slice/kubepods-pod11111111_2222_3333_4444_555555555555.slice/docker-{CID}.scope\n"
        );
        let pod = parse(&text).pod().cloned().unwrap();
        assert_eq!(pod.qos, QosClass::Guaranteed);
        assert_eq!(pod.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn cgroup_v2_systemd_crio() {
        // CRI-O with the systemd cgroup manager: the scope is `crio-<id>.scope`.
        let text = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_0000_1111_2222_333344445555.slice/crio-{CID}.scope\n"
        );
        let pod = parse(&text).pod().cloned().unwrap();
        assert_eq!(pod.uid, "0a1b2c3d-0000-1111-2222-333344445555");
        assert_eq!(pod.qos, QosClass::Burstable);
        assert_eq!(pod.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn host_processes() {
        assert_eq!(
            parse("0::/system.slice/mysqld.service\n"),
            Placement::Host {
                cgroup: "/system.slice/mysqld.service".into()
            }
        );
        assert!(!parse(
            "12:memory:/user.slice\n1:name=systemd:/user.slice/user-0.slice/session-1.scope\n"
        )
        .is_kubernetes());
        // The pod-level cgroup itself (no container) still names the pod.
        let p = parse(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_0000_1111_2222_333344445555.slice\n",
        );
        assert_eq!(p.pod().unwrap().container_id, None);
        // A pod UID or container id that is not one is not taken for it: the path is a
        // host cgroup, and a short id is no container.
        for bad in [
            "0::/kubepods/burstable/podaaaa_bbbb/x\n",
            "0::/kubepods/burstable/pod$(touch x)/y\n",
            "0::/kubepods/burstable/pod0A1B2C3D-0000-1111-2222-333344445555/z\n",
        ] {
            assert!(!parse(bad).is_kubernetes(), "{bad}");
        }
        let p = parse("0::/kubepods/pod0a1b2c3d-0000-1111-2222-333344445555/4d3c2b1a0f9e\n");
        assert_eq!(p.pod().unwrap().container_id, None);
        // Static pods: the kubelet's 32-hex-digit UID.
        let p = parse("0::/kubepods/burstable/pod6d1b2a3c4d5e6f708192a3b4c5d6e7f8\n");
        assert_eq!(p.pod().unwrap().uid, "6d1b2a3c4d5e6f708192a3b4c5d6e7f8");
        assert_eq!(
            parse(""),
            Placement::Host {
                cgroup: String::new()
            }
        );
    }

    #[test]
    fn controller_paths_of_v1_hybrid_and_v2() {
        // This VM (Linux 6.18, v1 with a v2 hierarchy at unified): the cpu line wins.
        let hybrid = "12:pids:/system.slice/kubelet.service\n4:cpu:/system.slice/kubelet.service\n0::/system.slice/kubelet.service\n";
        assert_eq!(
            controller_path(hybrid, "cpu"),
            Some(("/system.slice/kubelet.service".into(), false))
        );
        let joined = "3:cpu,cpuacct:/kubelet.slice\n";
        assert_eq!(
            controller_path(joined, "cpu"),
            Some(("/kubelet.slice".into(), false))
        );
        assert_eq!(
            controller_path("0::/system.slice/containerd.service\n", "cpu"),
            Some(("/system.slice/containerd.service".into(), true))
        );
        assert_eq!(controller_path("4:cpuacct:/x\nbad\n", "cpu"), None);
        assert_eq!(controller_path("0::relative\n", "cpu"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_kubepods_like(s in "(0::)?/kubepods(\\.slice)?(/[a-z0-9_.:-]{0,40}){0,5}") {
            let _ = parse(&s);
        }
        /// Files as `proc_cgroup_show()` prints them (`%d:%s:%s` per v1 hierarchy, `0::%s`
        /// for v2) for a container placed by the kubelet's cgroupfs or systemd driver, every
        /// QoS class, any runtime's scope name: uid, QoS and container id read back; a host
        /// service reads as the host with its path; each controller finds its own line.
        #[test]
        fn parses_what_the_kernel_prints(
            uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            qos in proptest::sample::select(vec![QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort]),
            container in proptest::option::of("[0-9a-f]{64}"),
            systemd in proptest::bool::ANY,
            runtime in proptest::sample::select(vec!["cri-containerd", "docker", "crio"]),
            v2 in proptest::bool::ANY,
            service in "[a-z][a-z0-9-]{0,15}",
        ) {
            let q = qos.as_str().to_lowercase();
            let mut path = if systemd {
                let pod = uid.replace('-', "_");
                match qos {
                    QosClass::Guaranteed => format!("/kubepods.slice/kubepods-pod{pod}.slice"),
                    _ => format!("/kubepods.slice/kubepods-{q}.slice/kubepods-{q}-pod{pod}.slice"),
                }
            } else {
                match qos {
                    QosClass::Guaranteed => format!("/kubepods/pod{uid}"),
                    _ => format!("/kubepods/{q}/pod{uid}"),
                }
            };
            if let Some(id) = &container {
                path += &if systemd { format!("/{runtime}-{id}.scope") } else { format!("/{id}") };
            }
            let host = format!("/system.slice/{service}.service");
            let file = |p: &str| if v2 {
                format!("0::{p}\n")
            } else {
                format!("12:pids:{p}\n11:memory:{p}\n4:cpu,cpuacct:{p}\n1:name=systemd:{p}\n")
            };
            let want = PodRef { uid, qos, container_id: container };
            proptest::prop_assert_eq!(parse(&file(&path)), Placement::Pod(want));
            proptest::prop_assert_eq!(parse(&file(&host)), Placement::Host { cgroup: host.clone() });
            proptest::prop_assert_eq!(controller_path(&file(&path), "cpuacct"), Some((path.clone(), v2)));
        }
    }
}
