//! Hostile host names: directories, files, mount points, devices, processes and node names
//! made to break out of a printed command (`$(...)`, backticks, `;`, `|`, `&&`, quotes,
//! newlines, ESC sequences, bidi overrides), staged wherever each collector takes names from.
//!
//! Every command of every finding then runs in the busybox sandbox (`tests/e2e/sandbox.rs`,
//! root and busybox-static): none may run a payload. As a control, the same names pasted
//! unquoted do run theirs. Without root the sandbox part prints SKIP, and the checks that
//! need no sandbox still run: the names reached the commands, quoted, on one printable line;
//! names that are not Kubernetes names were not taken for pod names.

use std::path::Path;

use collectors::disk::{DiskCollector, DiskConfig};
use collectors::iptables::{IptablesCollector, IptablesConfig};
use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::load::{LoadCollector, LoadConfig};
use collectors::memory::{MemoryCollector, MemoryConfig};
use collectors::sys::statvfs::FsUsage;
use collectors::{CollectContext, Collection, Collector};

use crate::sandbox::{hostile, hostile_word, Sandbox};
use crate::support::FakeHost;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";
const CID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

/// A node named to break out of `kubectl drain <node>`.
fn hostile_ctx() -> CollectContext {
    CollectContext::new(hostile("node"), collectors::HostNetns::NotProcfs)
}

/// `/proc/<pid>/mountinfo` escaping (space, tab, newline, backslash as octal).
fn mountinfo_escape(s: &str) -> String {
    s.replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

fn commands(c: &Collection) -> Vec<String> {
    c.findings
        .iter()
        .flat_map(|f| f.remediation.commands.iter().cloned())
        .collect()
}

fn ids(c: &Collection) -> Vec<&str> {
    c.findings.iter().map(|f| f.id.as_str()).collect()
}

/// Some command names the place `tag` (its payload text is in it, quoted).
fn assert_reached(cmds: &[String], tag: &str) {
    assert!(
        cmds.iter().any(|c| c.contains(&format!("pwned-{tag}"))),
        "no command names the hostile {tag}: {cmds:#?}"
    );
}

/// Every command is one line of printable text; in the sandbox none runs a payload, while
/// each raw name pasted unquoted does.
fn assert_inert(test: &str, cmds: &[String], raw: &[String]) {
    for c in cmds {
        assert!(
            !c.chars().any(collectors::sanitize::is_unsafe),
            "a command holds a control character or bidi override: {c:?}"
        );
    }
    let Some(sb) = Sandbox::new(test) else {
        return;
    };
    for r in raw {
        sb.assert_executes(r);
    }
    sb.assert_inert(cmds);
}

/// Fake statfs: `full` host-path prefixes are 97% used with almost no inodes left.
fn statfs(
    h: &FakeHost,
    full: Vec<String>,
) -> impl Fn(&Path) -> std::io::Result<FsUsage> + Send + 'static {
    let root = h.root().to_path_buf();
    move |agent: &Path| {
        let host = Path::new("/").join(agent.strip_prefix(&root).unwrap_or(agent));
        let is_full = full.iter().any(|p| host.starts_with(p));
        Ok(FsUsage {
            size_bytes: 100 * GIB,
            avail_bytes: if is_full { 3 * GIB } else { 60 * GIB },
            free_bytes: if is_full { 3 * GIB } else { 60 * GIB },
            files: 1_000_000,
            files_free: if is_full { 1000 } else { 900_000 },
        })
    }
}

/// Docker's data root, its mount point, a container directory, CRI pod and container log
/// directories, the kubelet's config path and the node name are all hostile.
#[test]
fn disk_commands_with_hostile_paths_are_inert() {
    let h = FakeHost::new();
    let data_root = format!("/data/{}", hostile("dataroot"));
    h.write(
        "/proc/1/mountinfo",
        format!(
            "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
             90 22 253:16 / {} rw,relatime shared:40 - ext4 /dev/vdb rw\n",
            mountinfo_escape(&data_root)
        ),
    )
    // No log size limit: docker_log_unbounded prints `cat <daemon.json>`.
    .write(
        "/etc/docker/daemon.json",
        serde_json::json!({ "data-root": data_root }).to_string(),
    )
    .mkdir(&format!("{data_root}/image/overlay2"))
    .mkdir("/var/lib/kubelet/pods");
    let container = hostile("container");
    let cdir = format!("{data_root}/containers/{container}");
    h.sparse(&format!("{cdir}/{container}-json.log.3"), 5 * GIB)
        .sparse(&format!("{cdir}/{container}-json.log"), 10 * MIB);
    let pod_dir = format!(
        "/var/log/pods/{}/{}",
        hostile("poddir"),
        hostile("podcontainer")
    );
    h.sparse(&format!("{pod_dir}/0.log.20240105-101010"), 2 * GIB)
        .sparse(&format!("{pod_dir}/0.log"), 5 * MIB);
    // The kubelet runs with a config file whose path is hostile and which sets no disk
    // eviction: disk.kubelet_unprotected prints `grep ... <config>`.
    let kubelet_config = format!("/etc/{}/kubelet.yaml", hostile("kubeletconfig"));
    h.write("/proc/812/comm", "kubelet\n")
        .write(
            "/proc/812/cmdline",
            format!("/usr/bin/kubelet\0--config={kubelet_config}\0"),
        )
        .write(
            &kubelet_config,
            "kind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\n",
        );
    let mut c = DiskCollector::new(h.node(), DiskConfig::default())
        .with_statfs(statfs(&h, vec![data_root.clone(), "/".to_string()]));
    let out = crate::support::collect(&mut c, &hostile_ctx());
    let cmds = commands(&out);
    for id in [
        "disk.filesystem_full",
        "disk.inodes_exhausted",
        "disk.kubelet_unprotected",
        "disk.docker_log_unbounded",
    ] {
        assert!(
            ids(&out).contains(&id),
            "no {id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    for tag in [
        "dataroot",
        "container",
        "poddir",
        "podcontainer",
        "kubeletconfig",
        "node",
    ] {
        assert_reached(&cmds, tag);
    }
    // The log owner is not taken from names that are not Kubernetes names.
    let full = out
        .findings
        .iter()
        .find(|f| f.id == "disk.filesystem_full" && f.subject == "/")
        .expect("the root filesystem is full");
    for key in [
        "largest_log_namespace",
        "largest_log_pod",
        "largest_log_container",
    ] {
        assert!(
            !full.evidence.contains_key(key),
            "{key}: {:?}",
            full.evidence
        );
    }
    assert_inert(
        "disk_commands_with_hostile_paths_are_inert",
        &cmds,
        &[hostile("dataroot"), hostile("node")],
    );
}

/// A busy disk with a hostile name (as `/proc/diskstats` prints it), a pod whose log
/// directory names are hostile (not taken for its name), and a hostile node name.
#[test]
fn load_commands_with_hostile_device_and_pod_names_are_inert() {
    let h = FakeHost::new();
    let device = hostile_word("device");
    h.write("/sys/devices/system/cpu/online", "0-3\n");
    // Log directories and symlinks that claim the pod's UID and container id under hostile
    // names: the pod stays known by its UID only.
    h.mkdir(&format!(
        "/var/log/pods/{}_web_{UID}",
        hostile_word("podns")
    ));
    h.mkdir(&format!(
        "/var/log/pods/shop_{}_{UID}",
        hostile_word("podname")
    ));
    h.write(
        &format!(
            "/var/log/containers/web_shop_{}-{CID}.log",
            hostile_word("cname")
        ),
        "",
    );
    let cg = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope\n",
        UID.replace('-', "_")
    );
    let stage = |later: bool| {
        let k = u64::from(later);
        h.write(
            "/proc/uptime",
            if later {
                "1010.00 10.00\n"
            } else {
                "1000.00 10.00\n"
            },
        );
        h.write(
            "/proc/loadavg",
            if later {
                "12.50 8.10 6.00 9/412 7000\n"
            } else {
                "12.10 8.00 5.90 8/410 6990\n"
            },
        );
        // 10 s × 4 CPUs = 4000 ticks: 10% user, 5% system, 80% iowait, 5% idle.
        let t = 100_000 + 400 * k;
        let sys = 20_000 + 200 * k;
        let idle = 400_000 + 200 * k;
        let wa = 1000 + 3200 * k;
        h.write(
            "/proc/stat",
            format!(
                "cpu  {t} 0 {sys} {idle} {wa} 0 0 0 0 0\nctxt 1000\nbtime 1700000000\nprocesses 5000\nprocs_running 2\nprocs_blocked 6\n"
            ),
        );
        // The disk had IO in flight the whole 10 s (io_ticks +10000 ms).
        h.write(
            "/proc/diskstats",
            format!(
                " 253 0 {device} 100 0 800 10 {} 0 {} {} 8 {} {}\n",
                500 + 3000 * k,
                4000 + 800_000 * k,
                300 + 90_000 * k,
                1000 + 10_000 * k,
                2000 + 90_000 * k
            ),
        );
        let pid = 4242;
        h.write(
            &format!("/proc/{pid}/stat"),
            format!(
                "{pid} (java) D 4200 {pid} {pid} 0 -1 4194560 100 0 0 0 {} {} 0 0 20 0 1 0 4321 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
                50_000 + 100 * k,
                5000 + 100 * k
            ),
        )
        .write(
            &format!("/proc/{pid}/io"),
            format!(
                "rchar: 0\nwchar: {w}\nsyscr: 1\nsyscw: 1\nread_bytes: 0\nwrite_bytes: {w}\ncancelled_write_bytes: 0\n",
                w = 1_000_000 + 400_000_000 * k
            ),
        )
        .write(&format!("/proc/{pid}/comm"), "java\n")
        .write(&format!("/proc/{pid}/cgroup"), cg.as_str())
        .write(&format!("/proc/{pid}/wchan"), "io_schedule");
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage(false);
    crate::support::collect(&mut c, &hostile_ctx());
    stage(true);
    let out = crate::support::collect(&mut c, &hostile_ctx());
    let cmds = commands(&out);
    assert!(
        ids(&out).contains(&"load.io_bound"),
        "{:?} {:?}",
        ids(&out),
        out.status
    );
    assert_reached(&cmds, "device");
    assert_reached(&cmds, "node");
    // The pod is looked up by its UID: no name from the hostile directories.
    assert!(
        cmds.iter().any(|c| c.contains(&format!("grep {UID}"))),
        "{cmds:#?}"
    );
    for tag in ["podns", "podname", "cname"] {
        assert!(
            !cmds.iter().any(|c| c.contains(&format!("pwned-{tag}"))),
            "{tag} taken for a Kubernetes name: {cmds:#?}"
        );
    }
    assert_inert(
        "load_commands_with_hostile_device_and_pod_names_are_inert",
        &cmds,
        &[hostile_word("device")],
    );
}

/// Kernel findings: a tiny memory limit on a container cgroup with a hostile directory name,
/// filesystem errors on a device mounted at a hostile mount point, a hung task while docker's
/// hostile data root is full, and the node name.
#[test]
fn kernel_commands_with_hostile_cgroups_and_mount_points_are_inert() {
    let data_root = format!("/data/{}", hostile("hungdir"));
    let mount_point = format!("/mnt/{}", hostile("mountpoint"));
    let kmsg = format!(
        "3,30,6000000000,-;EXT4-fs error (device vdc): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0\n\
         2,31,6000000100,-;EXT4-fs (vdc): Remounting filesystem read-only\n\
         3,40,6100000000,-;INFO: task {}:1234 blocked for more than 120 seconds.\n",
        hostile_word("hungcomm")
    );
    let h = FakeHost::new();
    h.write("/proc/uptime", "7200.00 14000.00\n")
        .write("/dev/kmsg", kmsg)
        .write(
            "/proc/meminfo",
            "MemTotal:       16384000 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n",
        )
        .write(
            "/proc/stat",
            "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 6\n",
        )
        .write(
            "/proc/1/mountinfo",
            format!(
                "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                 41 22 8:32 / {} ro,relatime shared:21 - ext4 /dev/vdc rw\n",
                mountinfo_escape(&mount_point)
            ),
        )
        .write(
            "/etc/docker/daemon.json",
            serde_json::json!({ "data-root": data_root }).to_string(),
        )
        .mkdir(&format!("{data_root}/containers"));
    let pod = format!(
        "/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/{}",
        hostile("cgroup")
    );
    h.write(
        "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes",
        "16106127360\n",
    )
    .write(&format!("{pod}/memory.limit_in_bytes"), "1\n");
    let full = data_root.clone();
    let mut c =
        KernelCollector::new(h.node(), KernelConfig::default()).with_statfs(move |p: &Path| {
            let is_full = p.to_string_lossy().contains(&full);
            Ok(FsUsage {
                size_bytes: 100 * GIB,
                avail_bytes: if is_full { GIB } else { 60 * GIB },
                free_bytes: if is_full { GIB } else { 60 * GIB },
                files: 1000,
                files_free: 500,
            })
        });
    let out = crate::support::collect(&mut c, &hostile_ctx());
    let cmds = commands(&out);
    for id in [
        "kernel.tiny_memory_limit",
        "kernel.fs_error",
        "kernel.hung_task",
    ] {
        assert!(
            ids(&out).contains(&id),
            "no {id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    for tag in ["cgroup", "mountpoint", "hungdir", "node"] {
        assert_reached(&cmds, tag);
    }
    assert_inert(
        "kernel_commands_with_hostile_cgroups_and_mount_points_are_inert",
        &cmds,
        &[hostile("mountpoint"), hostile("cgroup")],
    );
}

/// kube-proxy's log file under a hostile container directory of a kube-proxy pod.
#[test]
fn iptables_commands_with_a_hostile_log_path_are_inert() {
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "").write("/proc/locks", "");
    let ts = crate::iptables::rfc3339_now(-30);
    let log = format!(
        "/var/log/pods/kube-system_kube-proxy-x7k2p_{UID}/{}/0.log",
        hostile("kplog")
    );
    h.write(
        &log,
        format!("{ts} stderr F {}\n", crate::iptables::RESTORE_FAILED),
    );
    let config = IptablesConfig {
        sample_period: std::time::Duration::from_millis(50),
        ..IptablesConfig::default()
    };
    let mut c = IptablesCollector::new(h.node(), config);
    let out = crate::support::collect(&mut c, &hostile_ctx());
    let cmds = commands(&out);
    assert!(
        ids(&out).contains(&"iptables.kube_proxy_restore_failed"),
        "{:?} {:?}",
        ids(&out),
        out.status
    );
    assert_reached(&cmds, "kplog");
    assert_inert(
        "iptables_commands_with_a_hostile_log_path_are_inert",
        &cmds,
        &[hostile("kplog")],
    );
}

/// The node name in the memory collector's `kubectl get pods --field-selector` command, and
/// a hostile task name in the kernel log.
#[test]
fn memory_commands_with_a_hostile_node_name_are_inert() {
    let kmsg = format!(
        "4,901,6600000000,-;{}: page allocation failure: order:4, mode:0x10c0d0\n\
         4,903,6900000000,-;runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0\n",
        hostile_word("task")
    );
    let h = FakeHost::new();
    h.write(
        "/proc/buddyinfo",
        "Node 0, zone Normal 1163 1101 932 222 0 0 0 0 0 0 0\n",
    )
    .write(
        "/proc/meminfo",
        "MemTotal:        8009924 kB\nMemFree:          312000 kB\nMemAvailable:    4100000 kB\n",
    )
    .write("/proc/vmstat", "compact_stall 1\ncompact_fail 1\n")
    .write("/proc/uptime", "7200.00 14000.00\n")
    .write("/dev/kmsg", kmsg);
    let out = crate::support::collect(
        &mut MemoryCollector::new(h.node(), MemoryConfig::default()),
        &hostile_ctx(),
    );
    let cmds = commands(&out);
    assert!(
        ids(&out).contains(&"memory.page_allocation_failure"),
        "{:?} {:?}",
        ids(&out),
        out.status
    );
    assert_reached(&cmds, "node");
    assert_inert(
        "memory_commands_with_a_hostile_node_name_are_inert",
        &cmds,
        &[hostile("node")],
    );
}

/// The runtime collector: a dockerd whose configuration names a hostile socket path, a
/// kubelet whose CNI directory is hostile, and (as root, where `chattr` works) an immutable
/// file with a hostile name in a pod directory.
#[test]
fn runtime_commands_with_hostile_sockets_directories_and_files_are_inert() {
    use crate::runtime::{process, FakeProbe};
    use collectors::runtime::{RuntimeCollector, RuntimeConfig};
    let test = "runtime_commands_with_hostile_sockets_directories_and_files_are_inert";
    let h = FakeHost::new();
    let conf = serde_json::json!({
        "hosts": [format!("unix:///run/{}/docker.sock", hostile("sock"))],
    });
    h.write("/proc/uptime", "600.00 1100.00\n")
        .write("/etc/docker/daemon.json", conf.to_string())
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\n",
        );
    process(&h, 200, "dockerd", "/usr/bin/dockerd", 4_000);
    // The CNI directory comes from the kubelet's flags (one argument, NUL-separated).
    let cni = format!("/etc/{}", hostile("cni"));
    let mut args = b"/usr/bin/kubelet\0--cni-conf-dir\0".to_vec();
    args.extend_from_slice(cni.as_bytes());
    args.push(0);
    process(&h, 100, "kubelet", "/usr/bin/kubelet", 3_000);
    h.write("/proc/100/cmdline", args);
    let mut raw = vec![hostile("sock"), hostile("cni")];
    let uid = UID;
    let file = h.path(&format!("/var/lib/kubelet/pods/{uid}/{}", hostile("file")));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "x").unwrap();
    let locked = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&file)
        .output()
        .is_ok_and(|o| o.status.success());
    struct Unlock(std::path::PathBuf, bool);
    impl Drop for Unlock {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("chattr")
                    .arg("-i")
                    .arg(&self.0)
                    .status();
            }
        }
    }
    let _unlock = Unlock(file.clone(), locked);
    // A file the kubelet's log names as not removable (issue 28): a path is log text, so no
    // control character reaches it (the reader refuses those); every other payload does.
    let named_name = hostile_word("named").replace("\u{1b}[31m", "");
    let named_host = format!("/data/docker/overlay2/l1/diff/{named_name}");
    let named = h.path(&named_host);
    std::fs::create_dir_all(named.parent().unwrap()).unwrap();
    std::fs::write(&named, "x").unwrap();
    let named_locked = locked
        && std::process::Command::new("chattr")
            .arg("+i")
            .arg(&named)
            .output()
            .is_ok_and(|o| o.status.success());
    let _unlock_named = Unlock(named.clone(), named_locked);
    let now = std::process::Command::new("date")
        .args(["-u", "+%b %e %H:%M:%S"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    h.write(
        "/var/log/messages",
        format!("{now} node-1 kubelet[100]: E1123 remote_runtime.go:250] RemoveContainer failed: driver \"overlay2\" failed to remove root filesystem: remove {named_host}: operation not permitted\n"),
    );
    let probe: std::sync::Arc<FakeProbe> = std::sync::Arc::default();
    let mut c = RuntimeCollector::new(h.node(), RuntimeConfig::default(), probe);
    // Not recorded as a golden file: what is found depends on chattr working here.
    let out = collectors::Collector::collect(&mut c, &hostile_ctx());
    let cmds = commands(&out);
    let got = ids(&out);
    for want in ["runtime.unreachable", "runtime.cni_not_ready"] {
        assert!(got.contains(&want), "{got:?} {:?}", out.status);
    }
    assert_reached(&cmds, "sock");
    assert_reached(&cmds, "cni");
    if locked {
        assert!(got.contains(&"runtime.immutable_file"), "{got:?}");
        assert_reached(&cmds, "file");
        raw.push(hostile("file"));
    }
    if named_locked {
        assert_reached(&cmds, "named");
        raw.push(named_name.clone());
    } else {
        println!("NOTE {test}: chattr +i did not work here; the immutable file is not staged");
    }
    assert_inert(test, &cmds, &raw);
}

/// The node's logs (the runtime collector's log findings): a syslog file with a hostile name
/// (its path is printed in `grep … <file>` commands), a hostile node name, and log lines whose
/// container, image and registry names are shell payloads. The payload names are not valid
/// names of their kind, so they make no finding; the file and node names reach the commands,
/// quoted.
#[test]
fn node_log_commands_with_hostile_file_node_and_line_names_are_inert() {
    use collectors::nodelog::{judge, LiveFacts, NodeLogConfig, NodeLogWatcher, Thresholds};
    let h = FakeHost::new();
    let file = format!("/var/log/{}", hostile("logfile").replace('/', "_"));
    let now = 1_795_406_700; // 2026-11-23T04:05:00Z; no etc/localtime: UTC
    let lines = format!(
        "Nov 23 04:04:50 node-1 kubelet[1]: E1123 04:04:50.000000 1 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s\"\n\
         Nov 23 04:04:51 node-1 dockerd[2]: level=error msg=\"Conflict. The container name \\\"/k8s_POD_{c}_default_{UID}_0\\\" is already in use by container \\\"{CID}\\\".\"\n\
         Nov 23 04:04:52 node-1 kubelet[1]: E1123 04:04:52.000000 1 remote_image.go:180] \"PullImage from image service failed\" err=\"x509: certificate signed by unknown authority\" image=\"{img}\"\n\
         Nov 23 04:04:53 node-1 dockerd[2]: level=error msg=\"Get \\\"https://{reg}/v2/\\\": http: server gave HTTP response to HTTPS client\"\n\
         Nov 23 04:04:54 node-1 kubelet[1]: E1123 04:04:54.000000 1 remote_image.go:180] \"PullImage from image service failed\" err=\"Error response from daemon: pull access denied for private/app, repository does not exist or may require 'docker login'\" image=\"private/app:v1\"\n",
        c = hostile_word("container"),
        img = hostile_word("image"),
        reg = hostile_word("registry"),
    );
    h.write(&file, lines);
    let config = NodeLogConfig {
        syslog_files: vec![file.clone()],
        ..NodeLogConfig::default()
    };
    let mut w = NodeLogWatcher::new(h.host(), config);
    let sample = w.sample(now);
    let node = hostile("node");
    let rules = collectors::rules::RuleBook::builtin();
    let findings: Vec<_> = judge::judge(&sample, &LiveFacts::default(), &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, &node))
        .collect();
    let out = Collection {
        status: collectors::Status::Ok,
        findings,
        metrics: Vec::new(),
        figures: Vec::new(),
    };
    assert_eq!(
        ids(&out),
        ["runtime.pleg_unhealthy", "runtime.image_pull_auth"],
        "{:?}",
        sample.report
    );
    let cmds = commands(&out);
    assert_reached(&cmds, "logfile");
    assert_reached(&cmds, "node");
    assert_inert(
        "node_log_commands_with_hostile_file_node_and_line_names_are_inert",
        &cmds,
        &[hostile("node")],
    );
}

/// The hardware collector: a pstore record, a RAID array and a disk with hostile names (read
/// from directory listings and `/proc/mdstat`), and the node name in `kubectl drain`.
#[test]
fn hardware_commands_with_hostile_record_array_and_disk_names_are_inert() {
    use collectors::hardware::{HardwareCollector, HardwareConfig};
    let h = FakeHost::new();
    let mc = "/sys/devices/system/edac/mc/mc0";
    h.write("/proc/uptime", "7200.00 14000.00\n")
        .write("/proc/meminfo", "MemTotal: 8009924 kB\n")
        .write("/proc/sys/kernel/tainted", "0\n")
        .write("/dev/kmsg", "")
        .write(&format!("{mc}/ce_count"), "0\n")
        .write(&format!("{mc}/ue_count"), "1\n")
        .write(
            &format!("/sys/fs/pstore/dmesg-efi-{}", hostile("pstore")),
            "Panic#1 Part1\n<0>[ 1.0] Kernel panic - not syncing: Fatal machine check\n",
        )
        .write(
            "/proc/mdstat",
            format!(
                "Personalities : [raid1]\nmd{} : active raid1 sdb1[1](F) sda1[0]\n      1048512 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n",
                hostile_word("array")
            ),
        )
        .write(&format!("/sys/block/{}/badblocks", hostile("disk")), "1234 8\n");
    let out = crate::support::collect(
        &mut HardwareCollector::new(h.node(), HardwareConfig::default()),
        &hostile_ctx(),
    );
    let cmds = commands(&out);
    for id in [
        "hardware.memory_uncorrected",
        "hardware.previous_crash",
        "hardware.raid_degraded",
        "hardware.bad_blocks",
    ] {
        assert!(
            ids(&out).contains(&id),
            "{id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    for tag in ["node", "pstore", "array", "disk"] {
        assert_reached(&cmds, tag);
    }
    assert_inert(
        "hardware_commands_with_hostile_record_array_and_disk_names_are_inert",
        &cmds,
        &[
            hostile("node"),
            hostile("pstore"),
            hostile_word("array"),
            hostile("disk"),
        ],
    );
}

/// A container cgroup directory, the kubelet's `--config` path and the node name are hostile:
/// a throttled container, swap on under that kubelet, and node memory stall name all three.
#[test]
fn pressure_commands_with_a_hostile_cgroup_config_and_node_are_inert() {
    use collectors::pressure::{PressureCollector, PressureConfig};
    let quiet = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n";
    let config = format!("/etc/{}", hostile("config"));
    let pod = format!("/sys/fs/cgroup/cpu/kubepods/pod{UID}");
    let container = format!("{pod}/{}", hostile("cgroup"));
    let stat = |p: u64, t: u64| {
        format!(
            "nr_periods {p}\nnr_throttled {t}\nthrottled_time {}\n",
            t * 1_000_000
        )
    };
    let h = FakeHost::new();
    h.write("/proc/pressure/cpu", quiet)
        .write("/proc/pressure/io", quiet)
        .write(
            "/proc/pressure/memory",
            "some avg10=50.00 avg60=50.00 avg300=20.00 total=9\nfull avg10=40.00 avg60=40.00 avg300=15.00 total=5\n",
        )
        .write("/proc/uptime", "1000.00 1.00\n")
        .write(
            "/proc/meminfo",
            "MemTotal: 8009924 kB\nSwapTotal: 1048576 kB\nSwapFree: 1048576 kB\n",
        )
        .write("/proc/vmstat", "pswpin 0\npswpout 0\n")
        .write("/sys/fs/cgroup/cpu/cpu.stat", stat(0, 0))
        .write(&format!("{pod}/cpu.stat"), stat(0, 0))
        .write(&format!("{container}/cpu.stat"), stat(0, 0))
        .write(&config, "failSwapOn: true\n")
        .write("/proc/700/comm", "kubelet\n")
        .write(
            "/proc/700/stat",
            "700 (kubelet) S 1 700 700 0 -1 4194560 100 0 0 0 10 0 0 0 20 0 12 0 100 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .write("/proc/700/cmdline", format!("/usr/bin/kubelet\0--config={config}\0"))
        .write("/proc/700/cgroup", "0::/system.slice/kubelet.service\n");
    let mut c = PressureCollector::new(h.node(), PressureConfig::default());
    let _ = c.collect(&hostile_ctx());
    h.write("/proc/uptime", "1030.00 1.00\n")
        .write(&format!("{container}/cpu.stat"), stat(300, 200));
    let out = crate::support::collect(&mut c, &hostile_ctx());
    for id in [
        "pressure.node_stall",
        "pressure.pod_throttled",
        "pressure.swap_fail_swap_on",
    ] {
        assert!(
            ids(&out).contains(&id),
            "no {id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    let cmds = commands(&out);
    for tag in ["cgroup", "config", "node"] {
        assert_reached(&cmds, tag);
    }
    assert_inert(
        "pressure_commands_with_a_hostile_cgroup_config_and_node_are_inert",
        &cmds,
        &[hostile("cgroup"), hostile("config")],
    );
}

/// Time to full names what grows: a pod directory and an emptyDir volume with hostile names
/// under the kubelet root grow while the disk fills (statfs and clock driven, a cycle a
/// minute); `du -sh <grower>` names them quoted, and the pod directory is no pod uid.
#[test]
fn disk_filling_commands_with_a_hostile_grower_are_inert() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let h = FakeHost::new();
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
         95 22 253:32 / /var/lib/kubelet rw,relatime shared:41 - xfs /dev/vdc rw\n",
    );
    let volume = format!(
        "/var/lib/kubelet/pods/{}/volumes/kubernetes.io~empty-dir/{}",
        hostile("poduid"),
        hostile("emptydir")
    );
    h.write(&format!("{volume}/seed"), vec![1u8; 4096]);
    let avail = Arc::new(AtomicU64::new(22 * GIB));
    let clock = Arc::new(AtomicU64::new(1_795_798_800));
    let (a, k) = (avail.clone(), clock.clone());
    let mut c = DiskCollector::new(h.node(), DiskConfig::default())
        .with_statfs(move |_| {
            Ok(FsUsage {
                size_bytes: 100 * GIB,
                avail_bytes: a.load(Ordering::SeqCst),
                free_bytes: a.load(Ordering::SeqCst),
                files: 1_000_000,
                files_free: 900_000,
            })
        })
        .with_clock(move || k.load(Ordering::SeqCst) as f64);
    let mut last = None;
    for minute in 0..40u64 {
        clock.fetch_add(60, Ordering::SeqCst);
        avail.fetch_sub(60 * MIB, Ordering::SeqCst);
        h.write(&format!("{volume}/data-{minute}"), vec![7u8; 64 * 1024]);
        let out = c.collect(&hostile_ctx());
        let named = out
            .findings
            .iter()
            .any(|f| f.id == "disk.filling_up" && f.evidence.contains_key("grower_path"));
        if named {
            last = Some(out);
            break;
        }
    }
    let out = last.expect("no grower named");
    let f = out
        .findings
        .iter()
        .find(|f| f.id == "disk.filling_up")
        .unwrap();
    assert!(
        !f.evidence.contains_key("grower_pod_uid"),
        "{:?}",
        f.evidence
    );
    let cmds = commands(&out);
    assert_reached(&cmds, "emptydir");
    assert_reached(&cmds, "poduid");
    assert_inert(
        "disk_filling_commands_with_a_hostile_grower_are_inert",
        &cmds,
        &[hostile("emptydir")],
    );
}

/// The net collector: a NIC and a bond whose names are shell payloads (sysfs directory names,
/// `/proc/net/bonding` file names), and a bond slave's name from the bonding file's text (one
/// line, so without a newline), and the default route's interface from the route table's
/// text (one word). The link-down, flapping, bond and MTU findings print them in commands.
#[test]
fn net_commands_with_hostile_interface_bond_and_slave_names_are_inert() {
    use collectors::net::{NetCollector, NetConfig};
    let h = FakeHost::new();
    let nic = hostile("nic");
    let bond = hostile("bond");
    let slave = hostile_word("slave");
    h.write("/proc/uptime", "1000.00 1000.00\n")
        .mkdir("/sys/devices/pci0000:00/0000:00:03.0");
    let stage = |name: &str, carrier: u64| {
        let d = format!("/sys/class/net/{name}");
        h.write(&format!("{d}/type"), "1\n")
            .write(&format!("{d}/flags"), "0x1003\n")
            .write(&format!("{d}/operstate"), "down\n")
            .write(&format!("{d}/carrier_changes"), format!("{carrier}\n"));
    };
    stage(&nic, 1);
    h.symlink(
        "/sys/devices/pci0000:00/0000:00:03.0",
        &format!("/sys/class/net/{nic}/device"),
    )
    .mkdir(&format!("/sys/class/net/{bond}/bonding"));
    stage(&bond, 1);
    h.write(
        &format!("/proc/1/net/bonding/{bond}"),
        format!(
            "Ethernet Channel Bonding Driver: v5.15.0-91-generic\n\nBonding Mode: fault-tolerance (active-backup)\nCurrently Active Slave: None\nMII Status: down\n\nSlave Interface: {slave}\nMII Status: down\nLink Failure Count: 2\n"
        ),
    );
    // The default route's interface (from the route table's text: one word) at MTU 1400, under
    // a CNI bridge at 1500.
    let uplink = hostile_word("uplink");
    h.write(
        "/proc/1/net/route",
        format!("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n{uplink}\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"),
    )
    .write(&format!("/sys/class/net/{uplink}/mtu"), "1400\n")
    .mkdir("/sys/class/net/cni0/bridge")
    .write("/sys/class/net/cni0/mtu", "1500\n");
    let mut c = NetCollector::new(h.node(), NetConfig::default());
    crate::support::collect(&mut c, &hostile_ctx());
    stage(&nic, 5);
    h.write("/proc/uptime", "1015.00 1000.00\n");
    let out = crate::support::collect(&mut c, &hostile_ctx());
    for id in [
        "net.link_flapping",
        "net.link_down",
        "net.bond_degraded",
        "net.mtu_mismatch",
    ] {
        assert!(
            ids(&out).contains(&id),
            "{id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    let cmds = commands(&out);
    for tag in ["nic", "bond", "slave", "uplink", "node"] {
        assert_reached(&cmds, tag);
    }
    assert_inert(
        "net_commands_with_hostile_interface_bond_and_slave_names_are_inert",
        &cmds,
        &[nic, bond, slave, uplink, hostile("node")],
    );
}

/// The pods' own network namespaces: a pod whose log directories carry hostile names (its
/// namespace, its name: not taken), a pod cgroup whose UID is hostile (not a pod: never read,
/// though its process's counters rise) and a container cgroup with a hostile name under a
/// valid pod (its process is read; the name is never printed). The pod is named by its UID.
#[test]
fn net_pod_commands_with_hostile_pod_names_and_uids_are_inert() {
    use collectors::net::{NetCollector, NetConfig};
    let h = FakeHost::new();
    h.write("/proc/uptime", "1000.00 1000.00\n")
        .symlink("net:[4026531840]", "/proc/1/ns/net")
        .write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
    h.mkdir(&format!(
        "/var/log/pods/{}_web_{UID}",
        hostile_word("podns")
    ));
    h.mkdir(&format!(
        "/var/log/pods/shop_{}_{UID}",
        hostile_word("podname")
    ));
    let qos = "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice";
    h.write(
        &format!(
            "{qos}/kubepods-burstable-pod{}.slice/{}/cgroup.procs",
            UID.replace('-', "_"),
            hostile_word("container")
        ),
        "4242\n",
    );
    h.write(
        &format!(
            "{qos}/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope/cgroup.procs",
            hostile_word("uid")
        ),
        "4343\n",
    );
    let snmp = |errors: u64| {
        format!(
            "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 5000 0 {errors} 10 {errors} 0 0 0 0\n"
        )
    };
    for (pid, ns) in [(4242, 4026532712u64), (4343, 4026532713)] {
        h.symlink(&format!("net:[{ns}]"), &format!("/proc/{pid}/ns/net"))
            .write(&format!("/proc/{pid}/net/snmp"), snmp(0));
    }
    let mut c = NetCollector::new(h.node(), NetConfig::default());
    crate::support::collect(&mut c, &hostile_ctx());
    h.write("/proc/uptime", "1015.00 1000.00\n");
    for pid in [4242, 4343] {
        h.write(&format!("/proc/{pid}/net/snmp"), snmp(600));
    }
    let out = crate::support::collect(&mut c, &hostile_ctx());
    let subjects: Vec<&str> = out.findings.iter().map(|f| f.subject.as_str()).collect();
    assert_eq!(subjects, [format!("pod {UID}")], "{:?}", out.status);
    assert_eq!(ids(&out), ["net.pod_udp_errors"]);
    let cmds = commands(&out);
    assert!(
        cmds.iter()
            .any(|c| c == "nsenter -t 4242 -n cat /proc/net/snmp"),
        "{cmds:#?}"
    );
    for tag in ["podns", "podname", "container", "uid"] {
        assert!(
            !cmds.iter().any(|c| c.contains(&format!("pwned-{tag}"))),
            "{tag} reached a command: {cmds:#?}"
        );
    }
    let f = &out.findings[0];
    for text in [&f.summary.en, &f.title.en] {
        assert!(!text.contains("pwned"), "{text}");
    }
    assert_inert(
        "net_pod_commands_with_hostile_pod_names_and_uids_are_inert",
        &cmds,
        &[hostile_word("podns"), hostile_word("podname")],
    );
}

/// The reach collector prints the kubeconfig's `tls-server-name` (`openssl s_client
/// -servername`) and the node's name (`kubectl ... spec.nodeName=`): both host data, staged
/// with shell payloads (the server's host itself is refused unless it is a host name or an
/// address, so it cannot carry one).
#[test]
fn reach_commands_with_a_hostile_tls_server_name_and_node_are_inert() {
    use std::sync::Arc;
    use std::time::Duration;

    use collectors::reach::probe::{ApiAnswer, Outcome, ReachProbe, ReachTarget, TlsFailure};
    use collectors::reach::{ReachCollector, ReachConfig};

    use crate::reach::{process, FakeReach};

    let name = hostile("servername");
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n");
    process(&h, 2231, "kube-proxy", "/usr/local/bin/kube-proxy --v=2");
    process(
        &h,
        1187,
        "kubelet",
        "/usr/bin/kubelet --kubeconfig=/etc/kubernetes/kubelet.conf",
    );
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "k", "cluster": {
            "server": "https://10.0.0.10:6443",
            "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
            "tls-server-name": name,
        }}],
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "current-context": "c",
    });
    h.write("/etc/kubernetes/kubelet.conf", kubeconfig.to_string());
    let probe = Arc::new(FakeReach::default());
    probe.api(ApiAnswer {
        outcome: Outcome::Tls {
            connect: Duration::from_millis(2),
            kind: TlsFailure::NameMismatch,
            detail: "invalid peer certificate: NotValidForName".into(),
        },
        handshake: None,
    });
    let mut c = ReachCollector::new(
        h.node(),
        ReachConfig::default(),
        probe.clone() as Arc<dyn ReachProbe>,
    );
    let out = crate::support::collect(&mut c, &hostile_ctx());
    // The name went to the probe as written (the agent refuses it as a TLS name).
    assert!(probe.plans()[0]
        .targets
        .iter()
        .any(|t| matches!(t, ReachTarget::ApiServer { server_name, .. } if *server_name == name)));
    for id in [
        "reach.kube_proxy_not_answering",
        "reach.api_server_tls_failed",
    ] {
        assert!(
            ids(&out).contains(&id),
            "{id}: {:?} {:?}",
            ids(&out),
            out.status
        );
    }
    let cmds = commands(&out);
    for tag in ["servername", "node"] {
        assert_reached(&cmds, tag);
    }
    assert_inert(
        "reach_commands_with_a_hostile_tls_server_name_and_node_are_inert",
        &cmds,
        &[name, hostile("node")],
    );
}
