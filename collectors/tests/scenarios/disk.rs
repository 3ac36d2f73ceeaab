//! Scenarios of the `disk` collector: the handbook's 节点磁盘爆满排障处理 situations on fake
//! host roots (statfs figures injected), plus real tmpfs tests (root).

use std::path::{Path, PathBuf};

use collectors::disk::{DiskCollector, DiskConfig};
use collectors::explain::see_also;
use collectors::sys::statvfs::FsUsage;
use collectors::{Collection, Collector, Finding, Metric, Severity, Status};

use crate::support::{ctx, root_or_skip, FakeHost};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// A docker container id as docker writes them (64 hex digits).
const CID: &str = "dda02c9a7491fa797ab730c1568ba06cba74cecd4e4a82e9d90d00fa11de743c";

/// A node whose system disk `/dev/vda1` holds `/` and whose data disk `/dev/vdb` is mounted
/// at `/var/lib/docker` (TKE's layout with a data disk), Linux 5.4 mountinfo.
const MOUNTINFO_DOCKER_DISK: &str = "\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
24 22 0:23 / /run rw,nosuid,nodev shared:10 - tmpfs tmpfs rw,size=1630212k,mode=755
90 22 253:16 / /var/lib/docker rw,relatime shared:40 - ext4 /dev/vdb rw
";

/// `used_percent` of a fake filesystem of `size` bytes with `avail` bytes available.
fn usage(size: u64, avail: u64) -> FsUsage {
    FsUsage {
        size_bytes: size,
        avail_bytes: avail,
        free_bytes: avail,
        files: 6_553_600,
        files_free: 6_000_000,
    }
}

/// Fake statfs: the figures of the longest host-path prefix of the queried directory.
fn fake_statfs(
    h: &FakeHost,
    table: &[(&str, FsUsage)],
) -> impl Fn(&Path) -> std::io::Result<FsUsage> + Send + 'static {
    let root = h.root().to_path_buf();
    let table: Vec<(PathBuf, FsUsage)> =
        table.iter().map(|(p, u)| (PathBuf::from(p), *u)).collect();
    move |agent: &Path| {
        let host = Path::new("/").join(agent.strip_prefix(&root).unwrap_or(agent));
        table
            .iter()
            .filter(|(p, _)| host.starts_with(p))
            .max_by_key(|(p, _)| p.components().count())
            .map(|(_, u)| *u)
            .ok_or_else(|| std::io::Error::other(format!("no fake statfs for {}", host.display())))
    }
}

fn collect(h: &FakeHost, config: DiskConfig, table: &[(&str, FsUsage)]) -> Collection {
    let mut c = DiskCollector::new(h.node(), config).with_statfs(fake_statfs(h, table));
    crate::support::collect(&mut c, &ctx())
}

fn find<'a>(c: &'a Collection, id: &str, subject: &str) -> &'a Finding {
    c.findings
        .iter()
        .find(|f| f.id == id && f.subject == subject)
        .unwrap_or_else(|| panic!("no {id} for {subject}: {:#?}", c.findings))
}

fn ev_str<'a>(f: &'a Finding, name: &str) -> &'a str {
    f.evidence
        .get(name)
        .and_then(|e| e.as_str())
        .unwrap_or_else(|| panic!("no string evidence {name}: {:?}", f.evidence))
}

fn ev_num(f: &Finding, name: &str) -> f64 {
    f.evidence
        .get(name)
        .and_then(|e| e.as_f64())
        .unwrap_or_else(|| panic!("no numeric evidence {name}: {:?}", f.evidence))
}

fn metric<'a>(c: &'a Collection, name: &str, labels: &[(&str, &str)]) -> &'a Metric {
    crate::support::find_metric(c, name, labels)
        .unwrap_or_else(|| panic!("no metric {name} {labels:?}: {:#?}", c.metrics))
}

/// Complete, with only the note that one run has no history for time to full (every
/// collection of a fresh collector says so: `disk_filling.rs`).
fn only_history_noted(s: &Status) -> bool {
    matches!(s, Status::Noted(m) if m.starts_with("time to full needs history") && !m.contains("; "))
}

/// Stages running daemons: `/proc/<pid>/comm` and `cmdline` for each (name, pid).
fn running(h: &FakeHost, daemons: &[(&str, u32)]) {
    for (name, pid) in daemons {
        h.write(&format!("/proc/{pid}/comm"), format!("{name}\n"))
            .write(
                &format!("/proc/{pid}/cmdline"),
                format!("/usr/bin/{name}\0"),
            );
    }
}

/// A docker node's daemons.
const DOCKER_NODE: &[(&str, u32)] = &[("kubelet", 812), ("dockerd", 1200), ("containerd", 1100)];
/// A containerd node's daemons.
const CONTAINERD_NODE: &[(&str, u32)] = &[("kubelet", 812), ("containerd", 1100)];

fn config_v2(ns: &str, pod: &str, container: &str) -> String {
    format!(
        r#"{{"ID":"{CID}","Config":{{"Labels":{{"io.kubernetes.pod.namespace":"{ns}","io.kubernetes.pod.name":"{pod}","io.kubernetes.container.name":"{container}","io.kubernetes.docker.type":"container"}}}}}}"#
    )
}

/// The handbook's case: docker's data disk at 97% because of a 5 GiB rotated log of a
/// named pod.
#[test]
fn docker_root_97_percent_with_rotated_log_of_a_named_pod() {
    let h = FakeHost::new();
    running(&h, DOCKER_NODE);
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .write(
            "/etc/docker/daemon.json",
            r#"{"log-driver":"json-file","log-opts":{"max-size":"100m","max-file":"10"}}"#,
        )
        .mkdir("/var/lib/kubelet/pods")
        .mkdir("/run/docker");
    h.symlink("/run", "/var/run");
    let dir = format!("/var/lib/docker/containers/{CID}");
    h.write(
        &format!("{dir}/config.v2.json"),
        config_v2("prod", "apigateway-6dc48bf8b6-l8xrw", "apigateway"),
    )
    .sparse(&format!("{dir}/{CID}-json.log.9"), 5 * GIB)
    .sparse(&format!("{dir}/{CID}-json.log.1"), 90 * MIB)
    .sparse(&format!("{dir}/{CID}-json.log"), 20 * MIB)
    .write(
        "/var/lib/docker/overlay2/l1/diff/blob",
        vec![0u8; 256 * 1024],
    )
    .mkdir("/var/lib/docker/image/overlay2");
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/docker", usage(100 * GIB, 3 * GIB)),
            ("/run", usage(GIB, GIB - 10 * MIB)),
        ],
    );
    assert!(only_history_noted(&c.status), "{:?}", c.status);
    let f = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(f.severity, Severity::Critical);
    // Linked to the catalogue's "no space left on device" sandbox failure.
    assert_eq!(f.see_also, vec![see_also::DISK_FULL]);
    assert_eq!(ev_str(f, "device"), "/dev/vdb");
    assert_eq!(ev_str(f, "roles"), "docker_data");
    assert_eq!(ev_num(f, "used_percent"), 97.0);
    assert_eq!(ev_num(f, "available_bytes"), (3 * GIB) as f64);
    assert_eq!(ev_str(f, "threshold"), "imagefs.available<15%");
    assert_eq!(ev_str(f, "threshold_source"), "kubelet default");
    assert!(f.summary.en.contains("97.0% used"), "{}", f.summary.en);
    assert!(f
        .summary
        .en
        .contains("imagefs.available<15% (kubelet default)"));
    // What fills it: the pod, the file, its size.
    let log = format!("{dir}/{CID}-json.log.9");
    assert_eq!(ev_str(f, "largest_log_path"), log);
    assert_eq!(ev_num(f, "largest_log_bytes"), (5 * GIB) as f64);
    assert_eq!(ev_str(f, "largest_log_namespace"), "prod");
    assert_eq!(ev_str(f, "largest_log_pod"), "apigateway-6dc48bf8b6-l8xrw");
    assert_eq!(ev_str(f, "largest_log_container"), "apigateway");
    assert_eq!(ev_str(f, "largest_log_rotated"), "true");
    // Top directories from the walk, complete on a tree this small.
    assert!(ev_num(f, "dir_docker_data_overlay2_bytes") >= (256 * 1024) as f64);
    assert!(f.evidence.contains_key("dir_docker_data_containers_bytes"));
    assert_eq!(ev_num(f, "walk_docker_data_complete_ratio"), 1.0);
    // Remediation: empty the oldest rotation first (never rm), drain, restart, uncordon.
    let cmds = &f.remediation.commands;
    let first_truncate = cmds
        .iter()
        .position(|c| c.starts_with("cat /dev/null > "))
        .unwrap();
    assert_eq!(cmds[first_truncate], format!("cat /dev/null > {log}"));
    assert_eq!(
        cmds[first_truncate + 1],
        format!("cat /dev/null > {dir}/{CID}-json.log.1")
    );
    assert!(cmds.iter().all(|c| !c.starts_with("rm ")));
    let pos = |s: &str| {
        cmds.iter()
            .position(|c| c == s)
            .unwrap_or_else(|| panic!("no {s}: {cmds:#?}"))
    };
    assert!(
        pos("kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data")
            < pos("systemctl restart docker")
    );
    assert!(pos("systemctl restart docker") < pos("kubectl uncordon node-1"));
    assert!(cmds.contains(&"df -h /var/lib/docker".to_string()));
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.doc, "002_af370464fa0f13dd.txt");
    assert_eq!(src.section, "节点磁盘爆满排障处理");
    assert!(f
        .remediation
        .steps
        .iter()
        .all(|s| !s.en.is_empty() && !s.zh.is_empty()));
    // The system disk is fine; docker logs are bounded: nothing else fires.
    assert_eq!(c.findings.len(), 1, "{:#?}", c.findings);
    // Metrics: one series per filesystem and role.
    let m = metric(
        &c,
        "node_doctor_disk_avail_bytes",
        &[
            ("mountpoint", "/var/lib/docker"),
            ("role", "docker_data"),
            ("device", "/dev/vdb"),
            ("fstype", "ext4"),
        ],
    );
    assert_eq!(m.value, (3 * GIB) as f64);
    let m = metric(
        &c,
        "node_doctor_disk_size_bytes",
        &[("mountpoint", "/"), ("role", "kubelet")],
    );
    assert_eq!(m.value, (50 * GIB) as f64);
    // /var/run/docker resolves through the /var/run -> /run symlink to the /run tmpfs.
    metric(
        &c,
        "node_doctor_disk_files_free",
        &[
            ("mountpoint", "/run"),
            ("role", "docker_exec"),
            ("fstype", "tmpfs"),
        ],
    );
    let m = metric(
        &c,
        "node_doctor_disk_largest_log_bytes",
        &[
            ("pod", "apigateway-6dc48bf8b6-l8xrw"),
            ("namespace", "prod"),
            ("container", "apigateway"),
        ],
    );
    assert_eq!(m.value, (5 * GIB) as f64);
    metric(
        &c,
        "node_doctor_disk_walk_complete_ratio",
        &[("role", "docker_data")],
    );
}

/// The kubelet root on its own disk, nearly out of inodes (space is fine).
#[test]
fn kubelet_root_on_its_own_filesystem_nearly_out_of_inodes() {
    let h = FakeHost::new();
    running(&h, CONTAINERD_NODE);
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
         95 22 253:32 / /var/lib/kubelet rw,relatime shared:41 - xfs /dev/vdc rw,attr2,inode64\n",
    )
    .mkdir("/var/lib/kubelet/pods/0f9a/volumes")
    .mkdir("/var/lib/containerd");
    let mut kubelet = usage(200 * GIB, 150 * GIB);
    kubelet.files = 1_000_000;
    kubelet.files_free = 21_000;
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/kubelet", kubelet),
        ],
    );
    let f = find(&c, "disk.inodes_exhausted", "/var/lib/kubelet");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.see_also, vec![see_also::DISK_FULL]);
    assert_eq!(ev_str(f, "threshold"), "nodefs.inodesFree<5%");
    assert_eq!(ev_num(f, "inodes_free"), 21_000.0);
    assert_eq!(ev_num(f, "inodes_used_percent"), 97.9);
    assert_eq!(ev_str(f, "roles"), "kubelet");
    assert!(
        f.summary.en.contains("21000 of 1000000 inodes free"),
        "{}",
        f.summary.en
    );
    let cmds = &f.remediation.commands;
    assert!(cmds.contains(&"df -i /var/lib/kubelet".to_string()));
    assert!(
        cmds.contains(&"du --inodes -x -d 2 /var/lib/kubelet | sort -n | tail -n 20".to_string())
    );
    assert!(cmds
        .contains(&"kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data".to_string()));
    // Space is fine on both filesystems.
    assert!(
        c.findings.iter().all(|f| f.id != "disk.filesystem_full"),
        "{:#?}",
        c.findings
    );
    metric(
        &c,
        "node_doctor_disk_files_free",
        &[
            ("mountpoint", "/var/lib/kubelet"),
            ("device", "/dev/vdc"),
            ("fstype", "xfs"),
            ("role", "kubelet"),
        ],
    );
}

/// containerd with CRI logs under /var/log/pods, everything on the system disk at 96%.
#[test]
fn containerd_with_cri_pod_logs() {
    let h = FakeHost::new();
    running(&h, CONTAINERD_NODE);
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
    )
    .write(
        "/etc/containerd/config.toml",
        "version = 2\nroot = \"/var/lib/containerd\"\n",
    )
    .mkdir("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots")
    .mkdir("/run/containerd")
    .mkdir("/var/lib/kubelet/pods");
    let pod = "/var/log/pods/prod_web-7d9f6b5c4-x2x7k_5f0c2a8e-1b7e-4c61-9d3a-2f6b8e1c0a11/nginx";
    h.sparse(&format!("{pod}/0.log"), 3 * GIB)
        .sparse(&format!("{pod}/0.log.20240105-101010"), 2 * GIB)
        .sparse(&format!("{pod}/0.log.20240104-101010.gz"), 100 * MIB);
    // dockershim-style symlinks are not counted twice.
    h.symlink(&format!("{pod}/0.log"), "/var/log/pods/x_y_z/c/1.log");
    // Make the older rotation older on disk too.
    let older = h.path(&format!("{pod}/0.log.20240104-101010.gz"));
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(86400);
    std::fs::File::options()
        .write(true)
        .open(&older)
        .unwrap()
        .set_modified(t)
        .unwrap();
    let c = collect(
        &h,
        DiskConfig::default(),
        &[("/", usage(100 * GIB, 4 * GIB))],
    );
    let f = find(&c, "disk.filesystem_full", "/");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(
        ev_str(f, "roles"),
        "containerd_root,containerd_state,kubelet"
    );
    assert_eq!(ev_str(f, "largest_log_namespace"), "prod");
    assert_eq!(ev_str(f, "largest_log_pod"), "web-7d9f6b5c4-x2x7k");
    assert_eq!(ev_str(f, "largest_log_container"), "nginx");
    assert_eq!(ev_str(f, "largest_log_path"), format!("{pod}/0.log"));
    assert_eq!(ev_str(f, "largest_log_rotated"), "false");
    let truncs: Vec<&String> = f
        .remediation
        .commands
        .iter()
        .filter(|c| c.starts_with("cat /dev/null > "))
        .collect();
    assert_eq!(
        truncs,
        vec![
            &format!("cat /dev/null > {pod}/0.log.20240104-101010.gz"),
            &format!("cat /dev/null > {pod}/0.log.20240105-101010"),
            &format!("cat /dev/null > {pod}/0.log"),
        ]
    );
    assert!(f
        .remediation
        .commands
        .contains(&"systemctl restart containerd".to_string()));
    assert!(!f.remediation.commands.iter().any(|c| c.contains("docker")));
    assert!(c
        .findings
        .iter()
        .all(|f| f.id != "disk.docker_log_unbounded"));
    let m = metric(
        &c,
        "node_doctor_disk_largest_log_bytes",
        &[("container", "nginx")],
    );
    assert_eq!(m.value, (3 * GIB) as f64);
    metric(
        &c,
        "node_doctor_disk_avail_bytes",
        &[("role", "containerd_state"), ("mountpoint", "/")],
    );
}

/// A kubelet config with a custom evictionHard changes the verdict, and the summary says
/// where the threshold came from. The kubelet is found by its process and flags.
#[test]
fn custom_eviction_hard_changes_the_threshold() {
    let build = |with_config: bool| {
        let h = FakeHost::new();
        running(&h, &[("dockerd", 1200)]);
        h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
            .write("/etc/docker/daemon.json", r#"{"log-opts":{"max-size":"50m"}}"#)
            .mkdir("/var/lib/docker/containers")
            .mkdir("/data/kubelet/pods")
            .write("/proc/812/comm", "kubelet\n")
            .write(
                "/proc/812/cmdline",
                "/usr/bin/kubelet\0--config=/etc/kubernetes/kubelet.yaml\0--root-dir=/data/kubelet\0--v=2\0",
            );
        if with_config {
            h.write(
                "/etc/kubernetes/kubelet.yaml",
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  imagefs.available: \"30%\"\n  nodefs.available: 10%\n  nodefs.inodesFree: 5%\n  memory.available: 100Mi\n",
            );
        }
        // 25% available: fine for the default imagefs.available<15% (+5 points).
        let c = collect(
            &h,
            DiskConfig::default(),
            &[
                ("/", usage(50 * GIB, 30 * GIB)),
                ("/var/lib/docker", usage(100 * GIB, 25 * GIB)),
            ],
        );
        (h, c)
    };
    let (_h, c) = build(false);
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    let (_h, c) = build(true);
    let f = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(ev_str(f, "threshold"), "imagefs.available<30%");
    assert_eq!(
        ev_str(f, "threshold_source"),
        "evictionHard in /etc/kubernetes/kubelet.yaml"
    );
    assert!(
        f.summary
            .en
            .contains("imagefs.available<30% (evictionHard in /etc/kubernetes/kubelet.yaml)"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.zh.contains(
            "imagefs.available<30%（来源：evictionHard 位于 /etc/kubernetes/kubelet.yaml）"
        ),
        "{}",
        f.summary.zh
    );
    // --root-dir from the kubelet's command line is the kubelet role's directory.
    metric(
        &c,
        "node_doctor_disk_size_bytes",
        &[("role", "kubelet"), ("mountpoint", "/")],
    );
    assert_eq!(c.findings.len(), 1, "{:#?}", c.findings);
}

/// docker's data-root moved by daemon.json to a data disk mounted at /data.
#[test]
fn custom_data_root_from_daemon_json() {
    let h = FakeHost::new();
    running(&h, DOCKER_NODE);
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
         91 22 253:16 / /data rw,relatime shared:40 - xfs /dev/vdb1 rw\n",
    )
    .write(
        "/etc/docker/daemon.json",
        r#"{"data-root": "/data/docker", "log-driver": "json-file"}"#,
    )
    .mkdir("/var/lib/kubelet");
    let dir = format!("/data/docker/containers/{CID}");
    h.write(
        &format!("{dir}/config.v2.json"),
        config_v2("kube-system", "coredns-5d78c9869d-x7k2p", "coredns"),
    )
    .sparse(&format!("{dir}/{CID}-json.log"), 7 * GIB);
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/data", usage(500 * GIB, 15 * GIB)),
        ],
    );
    let f = find(&c, "disk.filesystem_full", "/data");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(ev_str(f, "device"), "/dev/vdb1");
    assert_eq!(ev_str(f, "roles"), "docker_data");
    assert_eq!(ev_str(f, "largest_log_pod"), "coredns-5d78c9869d-x7k2p");
    assert!(f
        .remediation
        .commands
        .contains(&format!("cat /dev/null > {dir}/{CID}-json.log")));
    assert!(f
        .remediation
        .commands
        .contains(&"du -sh /data/docker/containers/* | sort -h | tail -n 20".to_string()));
    // No log-opts max-size: the prevention finding names the daemon.json and the data root.
    let p = find(&c, "disk.docker_log_unbounded", "docker");
    assert_eq!(p.severity, Severity::Warning);
    assert!(p.summary.en.contains("/etc/docker/daemon.json"));
    assert!(p.summary.en.contains("/data/docker"));
    assert_eq!(
        p.remediation.source.as_ref().unwrap().section,
        "如何规避磁盘爆满？"
    );
    // /var/lib/docker does not exist: no series for it.
    assert!(!c
        .metrics
        .iter()
        .any(|m| m.labels.iter().any(|(_, v)| v == "/var/lib/docker")));
}

/// A healthy node: bounded docker logs, default kubelet thresholds, disks half empty.
#[test]
fn healthy_node_yields_no_disk_finding() {
    let h = FakeHost::new();
    running(&h, DOCKER_NODE);
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .write(
            "/etc/docker/daemon.json",
            r#"{"log-driver":"json-file","log-opts":{"max-size":"100m","max-file":"3"}}"#,
        )
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 85\n",
        );
    let dir = format!("/var/lib/docker/containers/{CID}");
    h.write(
        &format!("{dir}/config.v2.json"),
        config_v2("prod", "web-1", "web"),
    )
    .sparse(&format!("{dir}/{CID}-json.log"), 30 * MIB);
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/docker", usage(100 * GIB, 55 * GIB)),
        ],
    );
    assert!(only_history_noted(&c.status), "{:?}", c.status);
    assert!(c.findings.is_empty(), "{:#?}", c.findings);
    // Metrics still flow, and nothing was walked on a healthy node.
    metric(
        &c,
        "node_doctor_disk_avail_bytes",
        &[("role", "docker_data")],
    );
    metric(
        &c,
        "node_doctor_disk_largest_log_bytes",
        &[("pod", "web-1")],
    );
    assert!(!c
        .metrics
        .iter()
        .any(|m| m.name == "node_doctor_disk_walk_complete_ratio"));
}

/// A kubelet config whose partial evictionHard drops the disk signals and disables image GC.
#[test]
fn kubelet_config_that_leaves_the_disk_unprotected() {
    let h = FakeHost::new();
    running(&h, CONTAINERD_NODE);
    h.write("/proc/1/mountinfo", "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\nimageGCHighThresholdPercent: 100\n",
        )
        .mkdir("/var/lib/containerd");
    let c = collect(
        &h,
        DiskConfig::default(),
        &[("/", usage(100 * GIB, 12 * GIB))],
    );
    let f = find(&c, "disk.kubelet_unprotected", "kubelet");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.summary.en.contains("no hard eviction threshold for nodefs.available (evictionHard in /var/lib/kubelet/config.yaml)"), "{}", f.summary.en);
    assert!(f
        .summary
        .en
        .contains("no hard eviction threshold for imagefs.available"));
    assert!(f.summary.en.contains("image GC high threshold is 100%"));
    assert!(f
        .remediation
        .commands
        .contains(&"systemctl restart kubelet".to_string()));
    // 88% used: no kubelet threshold and no GC to compare with, below 95%: not full.
    assert!(
        c.findings.iter().all(|f| f.id != "disk.filesystem_full"),
        "{:#?}",
        c.findings
    );
}

/// Deleted-but-open files on a fake host: the fd link of a "dockerd" points to a file whose
/// name ends in " (deleted)", as readlink shows an unlinked file.
#[test]
fn deleted_open_file_held_by_dockerd_on_a_fake_host() {
    let h = FakeHost::new();
    running(&h, &[("kubelet", 812)]);
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .write(
            "/etc/docker/daemon.json",
            r#"{"log-opts":{"max-size":"100m"}}"#,
        )
        .write("/proc/4242/comm", "dockerd\n")
        .write("/proc/4242/cmdline", "/usr/bin/dockerd\0");
    let gone = format!("/var/lib/docker/containers/{CID}/{CID}-json.log (deleted)");
    h.write(&gone, vec![7u8; 3 * MIB as usize]);
    h.symlink(h.path(&gone).to_str().unwrap(), "/proc/4242/fd/17");
    h.symlink("/dev/null", "/proc/4242/fd/0");
    let mut config = DiskConfig::default();
    config.thresholds.deleted_min_bytes = MIB;
    let c = collect(
        &h,
        config,
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/docker", usage(100 * GIB, 2 * GIB)),
        ],
    );
    let f = find(&c, "disk.deleted_open_files", "/var/lib/docker");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.see_also, vec![see_also::DISK_FULL]);
    assert_eq!(ev_num(f, "top_pid"), 4242.0);
    assert_eq!(ev_str(f, "top_comm"), "dockerd");
    assert_eq!(ev_num(f, "top_fd"), 17.0);
    assert!(ev_num(f, "deleted_open_bytes") >= (3 * MIB) as f64);
    assert!(f.summary.en.contains("rm frees nothing"));
    assert!(f
        .remediation
        .commands
        .contains(&"cat /dev/null > /proc/4242/fd/17".to_string()));
    let full = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert!(full
        .remediation
        .commands
        .contains(&"ls -l /proc/4242/fd | grep '(deleted)'".to_string()));
}

#[test]
fn no_runtime_or_kubelet_is_complete_with_a_note() {
    // Not a node: nothing to judge, by design. Complete, and the message says so.
    let h = FakeHost::new();
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw - ext4 /dev/vda1 rw\n",
    );
    let c = collect(&h, DiskConfig::default(), &[]);
    assert!(
        matches!(c.status, Status::Noted(ref m) if m.contains("kubelet") && m.contains("not a node")),
        "{:?}",
        c.status
    );
    assert!(c.status.is_complete());
    assert!(c.findings.is_empty());
    // A configuration file that should name the directories but cannot be read: could not
    // look.
    h.write("/etc/docker/daemon.json", "{ not json");
    let c = collect(&h, DiskConfig::default(), &[]);
    assert!(
        matches!(c.status, Status::Unavailable(ref m) if m.contains("daemon.json")),
        "{:?}",
        c.status
    );
}

#[test]
fn unreadable_mountinfo_degrades_but_still_judges() {
    let h = FakeHost::new();
    h.mkdir("/var/lib/docker/containers");
    let c = collect(
        &h,
        DiskConfig::default(),
        &[("/", usage(100 * GIB, 2 * GIB))],
    );
    assert!(
        matches!(c.status, Status::Degraded(ref m) if m.contains("mountinfo")),
        "{:?}",
        c.status
    );
    let f = c
        .findings
        .iter()
        .find(|f| f.id == "disk.filesystem_full")
        .unwrap();
    assert_eq!(f.subject, "/var/lib/docker");
    assert_eq!(ev_str(f, "device"), "unknown");
}

// ---- real kernel: tmpfs mounts (root) ----

/// A tmpfs mounted at `<tmp root>/var/lib/docker`, unmounted when dropped (even when the
/// test fails), with a `<tmp root>/proc` of the real kernel's files of this test's process:
/// its own `/proc/<pid>` (the deleted-file scan reads its `fd/`), and as pid 1's mount table
/// its own (`proc/1/mountinfo`, which is where the collector reads the host's mounts), so
/// that the tmpfs is found in the mount namespace the test runs in, whether or not that is
/// the machine's first (a test run inside `unshare -m` is not).
struct TmpfsRoot {
    dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl TmpfsRoot {
    fn new(size_mib: u64) -> TmpfsRoot {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("var/lib/docker");
        std::fs::create_dir_all(&mnt).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size_mib}m").as_str()),
        )
        .expect("mount tmpfs");
        // docker's own layout: a data root without it (no dockerd runs here) is not docker.
        std::fs::create_dir_all(mnt.join("containers")).unwrap();
        std::fs::create_dir_all(mnt.join("image")).unwrap();
        let me = std::process::id();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(proc.join("1")).unwrap();
        std::os::unix::fs::symlink(format!("/proc/{me}"), proc.join(me.to_string())).unwrap();
        std::os::unix::fs::symlink(format!("/proc/{me}/mountinfo"), proc.join("1/mountinfo"))
            .unwrap();
        TmpfsRoot { dir, mnt }
    }

    /// Writes a file of real bytes on the tmpfs.
    fn fill(&self, name: &str, bytes: u64) {
        let chunk = vec![0x5au8; MIB as usize];
        let mut f = std::fs::File::create(self.mnt.join(name)).unwrap();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(MIB);
            std::io::Write::write_all(&mut f, &chunk[..n as usize]).unwrap();
            left -= n;
        }
    }

    /// Fills the tmpfs until `target_percent` is used.
    fn fill_to(&self, target_percent: f64) {
        let u = collectors::sys::statvfs::usage(&self.mnt).unwrap();
        let used_target = (u.size_bytes as f64 * target_percent / 100.0) as u64;
        let used_now = u.size_bytes - u.free_bytes;
        self.fill("filler", used_target.saturating_sub(used_now) / 4096 * 4096);
    }
}

impl Drop for TmpfsRoot {
    fn drop(&mut self) {
        if let Err(e) = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH) {
            eprintln!("umount {}: {e}", self.mnt.display());
        }
    }
}

fn real_collect(root: &TmpfsRoot) -> Collection {
    let host = collectors::HostPaths::new(root.dir.path());
    DiskCollector::new(collectors::Node::new(host), DiskConfig::default()).collect(&ctx())
}

#[test]
fn real_tmpfs_docker_root_at_97_percent_is_critical() {
    if !root_or_skip("real_tmpfs_docker_root_at_97_percent_is_critical") {
        return;
    }
    let root = TmpfsRoot::new(64);
    root.fill_to(97.5);
    let c = real_collect(&root);
    let f = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(ev_str(f, "fstype"), "tmpfs");
    assert_eq!(ev_num(f, "size_bytes"), (64 * MIB) as f64);
    assert!(ev_num(f, "used_percent") >= 97.0, "{:?}", f.evidence);
    assert_eq!(ev_str(f, "threshold"), "imagefs.available<15%");
    metric(
        &c,
        "node_doctor_disk_size_bytes",
        &[
            ("mountpoint", "/var/lib/docker"),
            ("fstype", "tmpfs"),
            ("role", "docker_data"),
        ],
    );
}

#[test]
fn real_deleted_but_open_file_names_the_test_pid_and_size() {
    if !root_or_skip("real_deleted_but_open_file_names_the_test_pid_and_size") {
        return;
    }
    let root = TmpfsRoot::new(64);
    root.fill("held.log", 16 * MIB);
    let held = std::fs::OpenOptions::new()
        .append(true)
        .open(root.mnt.join("held.log"))
        .unwrap();
    std::fs::remove_file(root.mnt.join("held.log")).unwrap();
    root.fill_to(97.0);
    let c = real_collect(&root);
    let f = find(&c, "disk.deleted_open_files", "/var/lib/docker");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(ev_num(f, "top_pid"), f64::from(std::process::id()));
    assert_eq!(ev_num(f, "top_bytes"), (16 * MIB) as f64);
    assert_eq!(ev_num(f, "deleted_open_bytes"), (16 * MIB) as f64);
    assert!(ev_str(f, "top_path").ends_with("/var/lib/docker/held.log"));
    let fd = ev_num(f, "top_fd") as u32;
    assert!(f.remediation.commands.contains(&format!(
        "cat /dev/null > /proc/{}/fd/{fd}",
        std::process::id()
    )));
    drop(held);
    // Closed: the space is back and the finding is gone.
    let c = real_collect(&root);
    assert!(c.findings.iter().all(|f| f.id != "disk.deleted_open_files"));
}

/// The walk resumes across cycles within a tiny budget, reports partial figures meanwhile,
/// and its state is dropped once the disk is healthy again.
#[test]
fn walk_resumes_within_budget_and_is_dropped_when_healthy() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let h = FakeHost::new();
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK).write(
        "/etc/docker/daemon.json",
        r#"{"log-opts":{"max-size":"100m"}}"#,
    );
    for l in 0..6 {
        for f in 0..5 {
            h.write(
                &format!("/var/lib/docker/overlay2/l{l}/diff/f{f}"),
                vec![1u8; 8192],
            );
        }
    }
    h.mkdir("/var/lib/docker/containers")
        .mkdir("/var/lib/docker/image");
    let avail = Arc::new(AtomicU64::new(2 * GIB));
    let a = avail.clone();
    let config = DiskConfig {
        walk_budget_entries: 5,
        ..DiskConfig::default()
    };
    let mut c = DiskCollector::new(h.node(), config)
        .with_statfs(move |_| Ok(usage(100 * GIB, a.load(Ordering::SeqCst))));
    let first = crate::support::collect(&mut c, &ctx());
    let f = find(&first, "disk.filesystem_full", "/var/lib/docker");
    assert!(ev_num(f, "walk_docker_data_complete_ratio") < 1.0);
    assert!(c.last_walk().entries <= 5);
    let mut cycles = 1;
    loop {
        let out = crate::support::collect(&mut c, &ctx());
        assert!(c.last_walk().entries <= 5, "{:?}", c.last_walk());
        cycles += 1;
        let f = find(&out, "disk.filesystem_full", "/var/lib/docker");
        if ev_num(f, "walk_docker_data_complete_ratio") == 1.0 {
            // 3 tops + 6 layers + 6 diffs + 30 files = 45 entries at 5 per cycle.
            assert_eq!(ev_num(f, "walk_docker_data_entries"), 45.0);
            assert!(ev_num(f, "dir_docker_data_overlay2_bytes") >= (30 * 8192) as f64);
            break;
        }
        assert!(cycles < 20, "walk never completed");
    }
    assert!(cycles >= 9, "finished in {cycles} cycles");
    assert_eq!(c.walker_count(), 1);
    avail.store(60 * GIB, Ordering::SeqCst);
    let out = crate::support::collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    assert_eq!(c.walker_count(), 0);
}

#[test]
fn log_of_an_unknown_owner_and_no_daemon_json_leave_no_empty_evidence() {
    // A docker root at 97% whose largest log has no config.v2.json (a container docker
    // started outside Kubernetes), on a node without /etc/docker/daemon.json.
    let h = FakeHost::new();
    running(&h, DOCKER_NODE);
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .mkdir("/run/docker");
    h.symlink("/run", "/var/run");
    h.sparse(
        &format!("/var/lib/docker/containers/{CID}/{CID}-json.log.1"),
        2 * GIB,
    );
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/docker", usage(100 * GIB, 3 * GIB)),
            ("/run", usage(GIB, GIB - 10 * MIB)),
        ],
    );
    let f = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(ev_num(f, "largest_log_bytes"), (2 * GIB) as f64);
    for key in [
        "largest_log_namespace",
        "largest_log_pod",
        "largest_log_container",
    ] {
        assert!(!f.evidence.contains_key(key), "{key}: {:?}", f.evidence);
    }
    for f in &c.findings {
        for (k, v) in &f.evidence {
            assert_ne!(v.as_str(), Some(""), "{} has an empty {k}", f.id);
        }
    }
    let logs = find(&c, "disk.docker_log_unbounded", "docker");
    assert!(
        logs.summary
            .en
            .contains("there is no /etc/docker/daemon.json"),
        "{}",
        logs.summary.en
    );
    assert!(logs
        .remediation
        .commands
        .iter()
        .all(|c| c != "cat /etc/docker/daemon.json"));
}

/// The issue's node: no docker, but an empty `/var/lib/docker` (left by provisioning). It is
/// not docker: no docker role, no docker finding, no docker command. A docker socket makes
/// docker present (socket-activated: installed, not running), and then the advice says that
/// dockerd does not run.
#[test]
fn an_empty_var_lib_docker_without_dockerd_is_not_docker() {
    let h = FakeHost::new();
    running(&h, CONTAINERD_NODE);
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
    )
    .mkdir("/var/lib/docker")
    .mkdir("/var/lib/containerd/io.containerd.content.v1.content")
    .mkdir("/var/lib/kubelet/pods");
    h.symlink("/run", "/var/run");
    h.mkdir("/run/containerd");
    let table = [("/", usage(100 * GIB, 3 * GIB))];
    let c = collect(&h, DiskConfig::default(), &table);
    let f = find(&c, "disk.filesystem_full", "/");
    assert_eq!(
        ev_str(f, "roles"),
        "containerd_root,containerd_state,kubelet"
    );
    assert!(
        c.findings
            .iter()
            .all(|f| f.id != "disk.docker_log_unbounded"),
        "{:#?}",
        c.findings
    );
    for f in &c.findings {
        for cmd in &f.remediation.commands {
            assert!(!cmd.contains("docker"), "{}: {cmd}", f.id);
        }
    }
    assert!(f
        .remediation
        .commands
        .contains(&"systemctl restart containerd".to_string()));
    assert!(!c
        .metrics
        .iter()
        .any(|m| m.labels.iter().any(|(_, v)| v == "docker_data")));

    // docker's socket (socket activation): docker is installed, and dockerd does not run.
    let sock = h.path("/run/docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind docker.sock");
    let c = collect(&h, DiskConfig::default(), &table);
    let f = find(&c, "disk.filesystem_full", "/");
    assert_eq!(
        ev_str(f, "roles"),
        "docker_data,containerd_root,containerd_state,kubelet"
    );
    assert_eq!(ev_str(f, "runtime_running"), "false");
    assert!(f
        .remediation
        .commands
        .contains(&"systemctl start docker".to_string()));
    assert!(!f
        .remediation
        .commands
        .contains(&"systemctl restart docker".to_string()));
    assert!(f.remediation.steps.iter().any(|s| s
        .en
        .starts_with("docker is not running (no dockerd process")));
    let logs = find(&c, "disk.docker_log_unbounded", "docker");
    assert!(logs.remediation.steps.iter().any(|s| s
        .en
        .contains("docker is not running now (no dockerd process)")));
    assert!(logs
        .remediation
        .commands
        .contains(&"systemctl status docker".to_string()));
}

/// A docker node where nothing runs: dockerd stopped (its data root holds containers) and no
/// kubelet. The advice starts what is stopped instead of restarting it, and says that a drain
/// stops nothing here while the kubelet is down.
#[test]
fn runtime_and_kubelet_not_running_are_said() {
    let h = FakeHost::new();
    h.write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\n",
        )
        .mkdir("/var/lib/docker/image/overlay2");
    h.sparse(
        &format!("/var/lib/docker/containers/{CID}/{CID}-json.log.1"),
        2 * GIB,
    );
    let c = collect(
        &h,
        DiskConfig::default(),
        &[
            ("/", usage(50 * GIB, 30 * GIB)),
            ("/var/lib/docker", usage(100 * GIB, 3 * GIB)),
        ],
    );
    let f = find(&c, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(ev_str(f, "kubelet_running"), "false");
    assert_eq!(ev_str(f, "runtime_running"), "false");
    let cmds = &f.remediation.commands;
    let pos = |cmd: &str| {
        cmds.iter()
            .position(|c| c == cmd)
            .unwrap_or_else(|| panic!("no {cmd:?} in {cmds:?}"))
    };
    assert!(
        pos("kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data")
            < pos("systemctl status kubelet")
    );
    assert!(pos("systemctl start docker") < pos("kubectl uncordon node-1"));
    assert!(!cmds.contains(&"systemctl restart docker".to_string()));
    let steps: Vec<&str> = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("No kubelet process runs on this node: a drain")),
        "{steps:#?}"
    );
    assert!(
        f.remediation
            .steps
            .iter()
            .any(|s| s.zh.starts_with("docker 当前没有运行（没有 dockerd 进程")),
        "{:#?}",
        f.remediation.steps
    );
    let k = find(&c, "disk.kubelet_unprotected", "kubelet");
    assert!(k
        .remediation
        .commands
        .contains(&"systemctl start kubelet".to_string()));
    assert!(!k
        .remediation
        .commands
        .contains(&"systemctl restart kubelet".to_string()));
    assert!(k
        .remediation
        .steps
        .iter()
        .any(|s| s.en.starts_with("No kubelet process runs on this node")));
}

/// Cost and escalation (docs/collectors/disk.md): on a docker node whose filesystems are far
/// from full, with 200 more processes, a cycle after the first reads one `stat` per running
/// daemon (their confirmation in the shared process table) and the host's mount table
/// (`/proc/1/mountinfo`): no file of any other process, and no descriptor (the
/// deleted-but-open scan is for filesystems that need attention).
#[test]
fn a_quiet_node_reads_no_file_of_other_processes() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 1.00\n")
        .write("/proc/1/mountinfo", MOUNTINFO_DOCKER_DISK)
        .mkdir("/var/lib/kubelet/pods")
        .mkdir("/var/lib/docker/containers")
        .mkdir("/var/lib/containerd")
        .write(
            "/etc/docker/daemon.json",
            r#"{"log-driver":"json-file","log-opts":{"max-size":"100m","max-file":"3"}}"#,
        );
    for (name, pid) in DOCKER_NODE {
        crate::runtime::process(&h, *pid, name, &format!("/usr/bin/{name}"), 100);
    }
    crate::runtime::idle_processes(&h, 3000, 200, 4026531840, 4026531841);
    let host = h.node();
    let mut c = DiskCollector::new(host.clone(), DiskConfig::default()).with_statfs(fake_statfs(
        &h,
        &[
            ("/", usage(100 * GIB, 70 * GIB)),
            ("/var/lib/docker", usage(500 * GIB, 400 * GIB)),
        ],
    ));
    let first = c.collect(&ctx());
    assert!(only_history_noted(&first.status), "{:?}", first.status);
    assert!(first.findings.is_empty(), "{:#?}", first.findings);
    let after_first = host.per_process_paths();
    assert!(
        after_first >= 200,
        "the first cycle examines every process: {after_first}"
    );
    let second = c.collect(&ctx());
    assert_eq!(second.findings, first.findings);
    assert_eq!(
        host.per_process_paths() - after_first,
        4,
        "three daemons confirmed and /proc/1/mountinfo, nothing of the 200 others"
    );
}
