//! The kernel collector on fake hosts staging the handbook's situations (CrashLoopBackOff:
//! system vs cgroup OOM; ContainerCreating: a `1024m` memory limit; health-check failures:
//! SYN backlog drops; Terminating: the runtime's disk failing), plus a real-kernel cgroup OOM.

use std::path::Path;
use std::time::Duration;

use collectors::explain::see_also;
use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::sys::statvfs::FsUsage;
use collectors::{
    CollectContext, Collection, Collector, Finding, HostNetns, HostPaths, Severity, Status,
};

use crate::support::{self, FakeHost};

const UID: &str = "7c1e2d3f-4a5b-8c9d-0e1f-2a3b4c5d6e7f";
const UID_SYSTEMD: &str = "7c1e2d3f_4a5b_8c9d_0e1f_2a3b4c5d6e7f";
const CID: &str = "4d3c2b1a0f9e8d7c6b5a49382716051f4e3d2c1b0a99887766554433221100ff";
const UID_OLD: &str = "5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60";

/// 16 GiB node.
const MEMINFO: &str =
    "MemTotal:       16384000 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n";

/// A fake node: uptime 7200 s, a kernel log, meminfo, pid counters and an idle netstat.
fn host(kmsg: &str) -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/uptime", "7200.00 14000.00\n")
        .write("/dev/kmsg", kmsg)
        .write("/proc/meminfo", MEMINFO)
        .write("/proc/loadavg", "0.52 0.41 0.35 2/219 23311\n")
        .write(
            "/proc/stat",
            "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 0\n",
        )
        .write("/proc/sys/kernel/pid_max", "32768\n")
        .write("/proc/sys/kernel/threads-max", "191853\n")
        .write("/proc/sys/net/core/somaxconn", "128\n")
        .write("/proc/sys/net/ipv4/tcp_max_syn_backlog", "256\n")
        .write("/proc/1/net/netstat", netstat(0, 0, 0));
    h
}

/// A `/proc/net/netstat` (kernel 3.10 column set) with the three listen counters.
fn netstat(drops: u64, overflows: u64, backlog: u64) -> String {
    format!(
        "TcpExt: SyncookiesSent TW DelayedACKs ListenOverflows ListenDrops TCPBacklogDrop TCPMinTTLDrop\n\
         TcpExt: 0 88123 120033 {overflows} {drops} {backlog} 0\n\
         IpExt: InNoRoutes InOctets\nIpExt: 0 123456\n"
    )
}

fn collector(h: &FakeHost) -> KernelCollector {
    KernelCollector::new(h.node(), KernelConfig::default())
}

fn find<'a>(c: &'a Collection, id: &str, subject: &str) -> Option<&'a Finding> {
    c.findings
        .iter()
        .find(|f| f.id == id && f.subject == subject)
}

fn ids(c: &Collection) -> Vec<(String, String)> {
    c.findings.iter().map(|f| f.key()).collect()
}

fn metric(c: &Collection, name: &str, kind: Option<&str>) -> Option<f64> {
    c.metrics
        .iter()
        .find(|m| {
            m.name == name
                && kind.is_none_or(|k| m.labels.iter().any(|(a, b)| a == "kind" && b == k))
        })
        .map(|m| m.value)
}

fn cmds(f: &Finding) -> &[String] {
    &f.remediation.commands
}

fn section(f: &Finding) -> &str {
    f.remediation.source.as_ref().map_or("", |s| s.section)
}

/// Kernel 6.18-format cgroup OOM of a pod container (systemd driver, cgroup v2), three times
/// (crash loop), 30, 20 and 10 minutes before "now".
fn kmsg_cgroup_oom_new() -> String {
    let mut s = String::from("6,500,100000000,-;eth0: link up\n");
    for (i, t) in [5400u64, 6000, 6600].iter().enumerate() {
        let seq = 600 + i as u64 * 10;
        let pid = 19701 + i as u64;
        let memcg = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope");
        s += &format!("4,{seq},{t}000000,-;java invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=969\n");
        s += &format!(
            "6,{},{t}000100,-;memory: usage 262144kB, limit 262144kB, failcnt 97\n",
            seq + 1
        );
        s += &format!("6,{},{t}000200,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg={memcg},task_memcg={memcg},task=java,pid={pid},uid=1000\n", seq + 2);
        s += &format!("3,{},{t}000300,-;Memory cgroup out of memory: Killed process {pid} (java) total-vm:4118968kB, anon-rss:262104kB, file-rss:6500kB, shmem-rss:0kB, UID:1000 pgtables:880kB oom_score_adj:969\n", seq + 3);
    }
    s
}

#[test]
fn cgroup_oom_new_format_names_pod_and_container() {
    let h = host(&kmsg_cgroup_oom_new());
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    assert_eq!(c.status, Status::Ok, "{:?}", c.status);
    let f = find(&c, "kernel.oom_cgroup", UID).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical, "three kills in the window");
    assert_eq!(f.evidence["kills"].as_f64(), Some(3.0));
    assert_eq!(f.evidence["last_pid"].as_f64(), Some(19703.0));
    assert_eq!(f.evidence["last_comm"].as_str(), Some("java"));
    assert_eq!(f.evidence["container_id"].as_str(), Some(CID));
    assert_eq!(f.evidence["qos_class"].as_str(), Some("Burstable"));
    assert_eq!(
        f.evidence["limit_bytes"].as_f64(),
        Some((256u64 << 20) as f64)
    );
    // 10 minutes ago (the last kill is logged 300 µs after the minute).
    let ago = f.evidence["last_seen_seconds_ago"].as_f64().unwrap();
    assert!((599.0..=600.0).contains(&ago), "{ago}");
    assert!(f.summary.en.contains("256.0 MiB limit"), "{}", f.summary.en);
    assert!(f.summary.en.contains("exit code 137"));
    assert!(
        f.summary.zh.contains(&format!(
            "最后一次：{ago} 秒前，用量 256.0 MiB / 上限 256.0 MiB。"
        )),
        "{}",
        f.summary.zh
    );
    assert!(cmds(f)
        .iter()
        .any(|c| c.contains(&format!("@.metadata.uid==\"{UID}\""))));
    assert_eq!(section(f), "Pod 处于 CrashLoopBackOff 状态");
    assert!(f.see_also.iter().any(|k| k == see_also::OOM_KILLED));
    assert!(find(&c, "kernel.oom_system", "").is_none());
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_cgroup")),
        Some(3.0)
    );
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_system")),
        Some(0.0)
    );
}

/// The describe commands are exact: no `<namespace>`-style placeholder, and `kubectl describe`
/// is given a namespace and a name it can use.
fn assert_exact_describe(f: &Finding, want: &str) {
    assert!(
        cmds(f)
            .iter()
            .all(|c| !c.contains("<namespace>") && !c.contains("<name>")),
        "{:?}",
        cmds(f)
    );
    assert!(
        cmds(f).iter().any(|c| c == want),
        "{want} not in {:?}",
        cmds(f)
    );
}

#[test]
fn cgroup_oom_names_the_pod_from_the_nodes_metadata() {
    // The kubelet's pod log directory and container log symlink name the pod and container.
    let h = host(&kmsg_cgroup_oom_new());
    h.mkdir(&format!(
        "/var/log/pods/shop_orders-7d4b9c-x2x8q_{UID}/java"
    ))
    .write(
        &format!("/var/log/containers/orders-7d4b9c-x2x8q_shop_java-{CID}.log"),
        "",
    );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_cgroup", UID).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["pod"].as_str(), Some("shop/orders-7d4b9c-x2x8q"));
    assert_eq!(f.evidence["container"].as_str(), Some("java"));
    assert!(
        f.summary.en.contains(&format!(
            "container java of pod shop/orders-7d4b9c-x2x8q (uid {UID})"
        )),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.zh.contains("shop/orders-7d4b9c-x2x8q"),
        "{}",
        f.summary.zh
    );
    assert_exact_describe(
        f,
        "kubectl -n shop describe pod orders-7d4b9c-x2x8q | grep -A5 'Last State'",
    );
}

#[test]
fn cgroup_oom_of_an_unnamed_pod_describes_it_through_its_uid() {
    let h = host(&kmsg_cgroup_oom_new());
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_cgroup", UID).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert!(!f.evidence.contains_key("pod"));
    assert_exact_describe(
        f,
        &format!(
            "kubectl get pods -A -o jsonpath='{{range .items[?(@.metadata.uid==\"{UID}\")]}}{{.metadata.namespace}} {{.metadata.name}}{{\"\\n\"}}{{end}}' | while read -r ns name; do kubectl -n \"$ns\" describe pod \"$name\" | grep -A5 'Last State'; done"
        ),
    );
}

#[test]
fn cgroup_oom_old_format_single_kill_is_warning() {
    // Kernel 3.10 (CentOS 7), cgroupfs driver: Task in / Kill process / Killed process, 200 s
    // before now: one recent kill.
    let kmsg = format!(
        "6,10,7000000000,-;Task in /kubepods/burstable/pod{UID_OLD}/{CID} killed as a result of limit of /kubepods/burstable/pod{UID_OLD}/{CID}\n\
         6,11,7000000100,-;memory: usage 1048576kB, limit 1048576kB, failcnt 1204\n\
         3,12,7000000200,-;Memory cgroup out of memory: Kill process 1234 (sh) score 1000 or sacrifice child\n\
         3,13,7000000300,-;Killed process 1240 (java) total-vm:4318240kB, anon-rss:1040000kB, file-rss:0kB\n"
    );
    let h = host(&kmsg);
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_cgroup", UID_OLD).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence["kills"].as_f64(), Some(1.0));
    assert_eq!(
        (
            f.evidence["last_pid"].as_f64(),
            f.evidence["last_comm"].as_str()
        ),
        (Some(1240.0), Some("java"))
    );
    assert_eq!(
        f.evidence["limit_bytes"].as_f64(),
        Some((1u64 << 30) as f64)
    );
    assert_eq!(f.evidence["qos_class"].as_str(), Some("Burstable"));
}

#[test]
fn system_oom_handbook_line_compares_kubepods_limit_with_capacity() {
    // The handbook's "Out of memory: Kill process ..." (3.10) killing a host process, then a
    // 6.x-format system OOM whose victim runs in a pod; kubepods (cgroup v1) may use 15.5 GiB
    // of the node's 16 000 000 KiB.
    let kmsg = format!(
        "3,20,5000000000,-;Out of memory: Kill process 812 (mysqld) score 901 or sacrifice child\n\
         3,21,5000000100,-;Killed process 812 (mysqld) total-vm:8123456kB, anon-rss:6012345kB, file-rss:0kB\n\
         6,22,6900000000,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/kubepods/besteffort/pod{UID_OLD}/{CID},task=python3,pid=4242,uid=0\n\
         3,23,6900000100,-;Out of memory: Killed process 4242 (python3) total-vm:118968kB, anon-rss:16104kB, file-rss:6500kB, shmem-rss:0kB, UID:0 pgtables:88kB oom_score_adj:1000\n"
    );
    let h = host(&kmsg);
    let kubepods = 16_252_928_000u64; // 15 872 000 KiB
    h.write(
        "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes",
        format!("{kubepods}\n"),
    );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_system", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["kills"].as_f64(), Some(2.0));
    assert_eq!(f.evidence["pod_victims"].as_f64(), Some(1.0));
    assert_eq!(f.evidence["last_comm"].as_str(), Some("python3"));
    assert_eq!(f.evidence["last_pid"].as_f64(), Some(4242.0));
    let total = 16_384_000u64 * 1024;
    assert_eq!(f.evidence["mem_total_bytes"].as_f64(), Some(total as f64));
    assert_eq!(
        f.evidence["kubepods_limit_bytes"].as_f64(),
        Some(kubepods as f64)
    );
    assert_eq!(
        f.evidence["reserved_bytes"].as_f64(),
        Some((total - kubepods) as f64)
    );
    assert!(
        f.summary
            .en
            .contains("pods may use 15500 MiB of the node's 16000 MiB, leaving 500 MiB (3.1%)"),
        "{}",
        f.summary.en
    );
    assert!(f.evidence["victims"]
        .as_str()
        .unwrap()
        .contains("mysqld(812)"));
    assert!(cmds(f)
        .iter()
        .any(|c| c.starts_with("cat /sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes")));
    assert!(f
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("--kube-reserved")));
    assert_eq!(section(f), "Pod 处于 CrashLoopBackOff 状态");
    // A system OOM is not a cgroup OOM.
    assert!(c.findings.iter().all(|f| f.id != "kernel.oom_cgroup"));
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_system")),
        Some(2.0)
    );
}

#[test]
fn old_events_outside_the_window_are_not_findings() {
    // Uptime 7200 s, lookback 1 h: an OOM at 600 s is skipped by the reader; the same line
    // at 7000 s (inside the window) is read, so the first is dropped for its age, not its form.
    let old_only = host("3,1,600000000,-;Out of memory: Killed process 9 (x) total-vm:1kB\n");
    let c = crate::support::collect(&mut collector(&old_only), &support::ctx());
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_system")),
        Some(0.0)
    );

    let both = host(
        "3,1,600000000,-;Out of memory: Killed process 9 (x) total-vm:1kB\n\
         3,2,7000000000,-;Out of memory: Killed process 10 (y) total-vm:1kB\n",
    );
    let c = crate::support::collect(&mut collector(&both), &support::ctx());
    let f = find(&c, "kernel.oom_system", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["kills"].as_f64(), Some(1.0));
    assert_eq!(f.evidence["last_pid"].as_f64(), Some(10.0));
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_system")),
        Some(1.0)
    );
}

#[test]
fn tiny_limit_cgroup_v2_systemd_tree() {
    // The handbook's `1024m`: a 1-byte limit on the pod and its containers; a sane pod next to it.
    let h = host("");
    let pod = format!("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice");
    h.write("/sys/fs/cgroup/kubepods.slice/memory.max", "16106127360\n")
        .write("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.max", "max\n")
        .write(&format!("{pod}/memory.max"), "1\n")
        .write(&format!("{pod}/cri-containerd-{CID}.scope/memory.max"), "1\n")
        .write("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice/memory.max", "268435456\n")
        .write("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-aaaaaaaaaaaaaaaaaaaaaaaa.scope/memory.max", "max\n");
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let tiny: Vec<&Finding> = c
        .findings
        .iter()
        .filter(|f| f.id == "kernel.tiny_memory_limit")
        .collect();
    assert_eq!(tiny.len(), 1, "{:?}", ids(&c));
    let f = tiny[0];
    assert_eq!(f.subject, UID);
    assert_eq!(f.severity, Severity::Critical);
    // The handbook's `1024m` mistake, then ContainerCreating (not the disk-full entry).
    assert_eq!(
        f.see_also,
        vec![see_also::MEMORY_LIMIT_UNIT, see_also::CONTAINER_CREATING]
    );
    assert_eq!(f.evidence["limit_bytes"].as_f64(), Some(1.0));
    assert_eq!(
        f.evidence["threshold_bytes"].as_f64(),
        Some((4u64 << 20) as f64)
    );
    let groups = f.evidence["cgroups"].as_str().unwrap();
    assert!(groups.contains("4d3c2b1a0f9e=1B"), "{groups}");
    assert!(f.summary.en.contains("1024m"));
    assert!(cmds(f)
        .iter()
        .any(|c| c.contains(UID) && c.contains("limits.memory")));
    assert!(cmds(f)
        .iter()
        .any(|c| c == &format!("cat {pod}/memory.max")));
    assert_eq!(section(f), "Pod 一直处于 ContainerCreating 或 Waiting 状态");

    // Once the kubelet's pod log directory names the pod, the finding does too.
    h.mkdir(&format!("/var/log/pods/shop_cart-0_{UID}/app"));
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.tiny_memory_limit", UID).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["pod"].as_str(), Some("shop/cart-0"));
    assert!(
        f.summary
            .en
            .starts_with(&format!("Pod shop/cart-0 (uid {UID})")),
        "{}",
        f.summary.en
    );
    assert_exact_describe(
        f,
        "kubectl -n shop describe pod cart-0 | grep -B2 -A3 Limits",
    );
}

#[test]
fn tiny_limit_cgroup_v1_cgroupfs_tree() {
    let h = host("");
    let base = "/sys/fs/cgroup/memory/kubepods";
    h.write(&format!("{base}/memory.limit_in_bytes"), "16106127360\n")
        .write(
            &format!("{base}/besteffort/memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .write(
            &format!("{base}/besteffort/pod{UID_OLD}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .write(
            &format!("{base}/besteffort/pod{UID_OLD}/{CID}/memory.limit_in_bytes"),
            "1\n",
        );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f =
        find(&c, "kernel.tiny_memory_limit", UID_OLD).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["limit_bytes"].as_f64(), Some(1.0));
    assert!(cmds(f)
        .iter()
        .any(|c| c == &format!("cat {base}/besteffort/pod{UID_OLD}/{CID}/memory.limit_in_bytes")));
}

/// A node whose docker data root `/var/lib/docker` lives on `/dev/vdb`.
fn docker_node(kmsg: &str) -> FakeHost {
    let h = host(kmsg);
    h.mkdir("/var/lib/docker/containers").mkdir("/var/lib/kubelet").write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
         40 22 253:16 / /var/lib/docker ro,relatime shared:20 - ext4 /dev/vdb rw,errors=remount-ro\n\
         41 22 8:32 / /data rw,relatime shared:21 - xfs /dev/sdc rw\n\
         42 22 252:0 / /var/lib/kubelet rw,relatime shared:22 - xfs /dev/mapper/vg-kubelet rw\n",
    );
    // dm-0 is the device-mapper volume mounted from /dev/mapper/vg-kubelet.
    h.write("/sys/class/block/dm-0/dev", "252:0\n");
    h
}

#[test]
fn fs_errors_on_the_runtime_disk_are_critical() {
    let kmsg = "\
3,30,6000000000,-;EXT4-fs error (device vdb): ext4_find_entry:1455: inode #2: comm dockerd: reading directory lblock 0
2,31,6000000100,-;EXT4-fs (vdb): Remounting filesystem read-only
3,32,6100000000,-;Buffer I/O error on dev sdc, logical block 0, async page read
3,33,6200000000,-;XFS (dm-0): Corruption of in-memory data detected.  Shutting down filesystem
3,34,6300000000,-;Buffer I/O error on dev sr0, logical block 0, async page read
";
    let h = docker_node(kmsg);
    // Now is 100 to 400 s after the errors: all recent.
    h.write("/proc/uptime", "6400.00 12000.00\n");
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.fs_error", "vdb").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
    assert_eq!(f.evidence["errors"].as_f64(), Some(2.0));
    assert_eq!(
        f.evidence["kinds"].as_str(),
        Some("ext4_error,remounted_read_only")
    );
    assert_eq!(f.evidence["mount_point"].as_str(), Some("/var/lib/docker"));
    assert_eq!(f.evidence["read_only_now"].as_str(), Some("true"));
    assert_eq!(
        f.evidence["roles"].as_str(),
        Some("docker_data /var/lib/docker")
    );
    assert!(
        f.summary
            .en
            .contains("still true now: the filesystem refuses writes"),
        "{}",
        f.summary.en
    );
    assert!(cmds(f)
        .iter()
        .any(|c| c == "umount /var/lib/docker && fsck -fy /dev/vdb"));
    assert!(cmds(f)
        .iter()
        .any(|c| c == "kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data"));
    assert_eq!(section(f), "Pod 一直处于 Terminating 状态");
    // A data disk without runtime directories: a warning.
    let g = find(&c, "kernel.fs_error", "sdc").unwrap();
    assert_eq!(g.severity, Severity::Warning);
    assert_eq!(g.evidence["mount_point"].as_str(), Some("/data"));
    assert_eq!(
        g.evidence["backs_runtime_or_kubelet"].as_str(),
        Some("false")
    );
    // The handbook covers filesystem errors only on the runtime's disks: the kernel's XFS
    // documentation for this XFS data disk.
    assert_eq!(
        g.remediation.source.as_ref().and_then(|s| s.url),
        Some("https://docs.kernel.org/admin-guide/xfs.html#error-handling")
    );
    // dm-0 placed by major:minor through /sys/class/block: the kubelet's XFS volume.
    let x = find(&c, "kernel.fs_error", "dm-0").unwrap();
    assert_eq!(x.severity, Severity::Critical);
    assert_eq!(x.evidence["mount_point"].as_str(), Some("/var/lib/kubelet"));
    assert_eq!(
        x.evidence["roles"].as_str(),
        Some("kubelet /var/lib/kubelet")
    );
    assert!(cmds(x)
        .iter()
        .any(|c| c == "umount /var/lib/kubelet && xfs_repair /dev/dm-0"));
    // An empty CD-ROM drive with I/O errors and no filesystem mounted: information only.
    let r = find(&c, "kernel.fs_error", "sr0").unwrap();
    assert_eq!(r.severity, Severity::Info);
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("fs_error")),
        Some(5.0)
    );
}

#[test]
fn hung_runtime_task_on_a_full_disk_takes_the_disk_full_path() {
    // 3.10 and 6.x forms; the docker data root's filesystem is 97% full.
    let kmsg = "\
3,40,6000000000,-;INFO: task dockerd:1234 blocked for more than 120 seconds.
3,41,6000000100,-;\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
6,42,6000000200,-;task:dockerd         state:D stack:0     pid:1234  ppid:1      flags:0x00000000
3,43,6120000000,-;INFO: task dockerd:1234 blocked for more than 241 seconds.
3,44,6200000000,-;INFO: task jbd2/vdb-8:287 blocked for more than 122 seconds.
";
    let h = docker_node(kmsg);
    h.write(
        "/proc/stat",
        "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 6\n",
    );
    // Both are still in uninterruptible sleep now.
    task(&h, 1234, "dockerd", 'D', true);
    task(&h, 287, "jbd2/vdb-8", 'D', false);
    let mut k = collector(&h).with_statfs(|p: &Path| {
        let full = p.ends_with("var/lib/docker");
        Ok(FsUsage {
            size_bytes: 100 << 30,
            avail_bytes: if full { 3 << 30 } else { 60 << 30 },
            free_bytes: if full { 3 << 30 } else { 60 << 30 },
            files: 1000,
            files_free: 500,
        })
    });
    let c = support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.hung_task", "dockerd").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["reports"].as_f64(), Some(2.0));
    assert_eq!(f.evidence["blocked_seconds"].as_f64(), Some(241.0));
    assert_eq!(f.evidence["path"].as_str(), Some("disk_full"));
    assert_eq!(f.evidence["full_dir"].as_str(), Some("/var/lib/docker"));
    assert_eq!(f.evidence["full_dir_used_percent"].as_f64(), Some(97.0));
    assert_eq!(f.evidence["procs_blocked"].as_f64(), Some(6.0));
    assert!(
        f.summary.en.contains("disk.filesystem_full"),
        "{}",
        f.summary.en
    );
    assert!(cmds(f).iter().any(|c| c == "cat /proc/1234/stack"));
    assert!(cmds(f)
        .iter()
        .any(|c| c.starts_with("df -h ") && c.contains("/var/lib/docker")));
    assert!(f
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("load.io_bound")));
    assert_eq!(section(f), "节点磁盘爆满排障处理");
    assert!(f.see_also.iter().any(|k| k == see_also::TERMINATING));
    let j = find(&c, "kernel.hung_task", "jbd2/vdb-8").unwrap();
    assert_eq!(j.severity, Severity::Warning);
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("hung_task")),
        Some(3.0)
    );
}

#[test]
fn hung_task_with_blocked_io_takes_the_io_path() {
    let h = docker_node(
        "3,40,6000000000,-;INFO: task kubelet:900 blocked for more than 120 seconds.\n",
    );
    h.write(
        "/proc/stat",
        "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 9\n",
    );
    task(&h, 900, "kubelet", 'D', true);
    let mut k = collector(&h).with_statfs(|_: &Path| {
        Ok(FsUsage {
            size_bytes: 100 << 30,
            avail_bytes: 60 << 30,
            free_bytes: 60 << 30,
            files: 1000,
            files_free: 500,
        })
    });
    let c = support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.hung_task", "kubelet").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["path"].as_str(), Some("io"));
    assert!(f.summary.en.contains("9 task(s)"), "{}", f.summary.en);
    assert_eq!(section(f), "节点高负载排障处理");
}

#[test]
fn listen_drops_from_netstat_deltas() {
    let h = host("");
    h.write("/proc/1/net/netstat", netstat(1532, 1532, 77));
    let mut k = collector(&h);
    let first = crate::support::collect(&mut k, &support::ctx());
    assert!(
        first.findings.iter().all(|f| f.id != "kernel.listen_drops"),
        "no rate at the first call"
    );
    std::thread::sleep(Duration::from_millis(200));
    h.write("/proc/1/net/netstat", netstat(1532 + 40, 1532 + 40, 77 + 5));
    let c = crate::support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.listen_drops", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["dropped"].as_f64(), Some(45.0));
    assert_eq!(f.evidence["listen_overflows"].as_f64(), Some(40.0));
    assert_eq!(f.evidence["tcp_backlog_drop"].as_f64(), Some(5.0));
    assert_eq!(f.evidence["tcp_max_syn_backlog"].as_f64(), Some(256.0));
    assert_eq!(f.evidence["somaxconn"].as_f64(), Some(128.0));
    // 45 drops in ~0.2 s is far above 10/s.
    assert_eq!(f.severity, Severity::Critical);
    assert!(cmds(f)
        .iter()
        .any(|c| c == "sysctl -w net.ipv4.tcp_max_syn_backlog=512 net.core.somaxconn=256"));
    assert_eq!(section(f), "Pod 健康检查失败");
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("backlog_drop")),
        Some(45.0)
    );
    // No change: resolved.
    let again = crate::support::collect(&mut k, &support::ctx());
    assert!(again.findings.iter().all(|f| f.id != "kernel.listen_drops"));
    // Missing netstat: degraded with the path, other rules still run.
    std::fs::remove_file(h.path("/proc/1/net/netstat")).unwrap();
    let d = crate::support::collect(&mut k, &support::ctx());
    match &d.status {
        Status::Degraded(m) => assert!(m.contains("net/netstat"), "{m}"),
        s => panic!("{s:?}"),
    }
}

/// node-doctor in a network namespace of its own (a pod without hostNetwork): the listen
/// counters are still the host's (`/proc/1/net/netstat`), but `<root>/proc/sys/net/*` is the
/// pod's own namespace, so its somaxconn is neither reported as the node's nor used for the
/// `sysctl -w` advice, and the status says why.
#[test]
fn sysctls_of_another_network_namespace_are_not_the_hosts() {
    let h = host("");
    h.write("/proc/1/net/netstat", netstat(1532, 1532, 77));
    let ctx = CollectContext {
        host_netns: HostNetns::Different,
        ..support::ctx()
    };
    let mut k = collector(&h);
    let first = crate::support::collect(&mut k, &ctx);
    let reason = match &first.status {
        Status::Degraded(m) => m.clone(),
        s => panic!("{s:?}"),
    };
    assert!(
        reason.contains("node-doctor's own network namespace's, not the host's")
            && reason.contains("hostNetwork: true"),
        "{reason}"
    );
    std::thread::sleep(Duration::from_millis(200));
    h.write("/proc/1/net/netstat", netstat(1532 + 40, 1532 + 40, 77 + 5));
    let c = crate::support::collect(&mut k, &ctx);
    assert_eq!(
        c.status,
        Status::Degraded(reason.clone()),
        "same reason every run"
    );
    let f = find(&c, "kernel.listen_drops", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["dropped"].as_f64(), Some(45.0));
    assert!(!f.evidence.contains_key("somaxconn"), "{:?}", f.evidence);
    assert!(!f.evidence.contains_key("tcp_max_syn_backlog"));
    assert!(
        cmds(f).iter().all(|c| !c.contains("sysctl -w")),
        "{:?}",
        cmds(f)
    );
    // Unknown: not reported as the host's either, with its own reason.
    let unknown = CollectContext {
        host_netns: HostNetns::Unknown,
        ..support::ctx()
    };
    match crate::support::collect(&mut collector(&h), &unknown).status {
        Status::Degraded(m) => assert!(m.contains("cannot tell"), "{m}"),
        s => panic!("{s:?}"),
    }
    // The same host in the host's namespace: ok.
    assert_eq!(
        crate::support::collect(&mut collector(&h), &support::ctx()).status,
        Status::Ok
    );
}

#[test]
fn pid_exhaustion_and_metrics() {
    let h = host("");
    h.write("/proc/loadavg", "3.79 4.83 4.27 3/31500 23120\n");
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.pid_exhaustion", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["tasks"].as_f64(), Some(31500.0));
    assert_eq!(f.evidence["pid_max"].as_f64(), Some(32768.0));
    assert_eq!(f.evidence["used_percent"].as_f64(), Some(96.13));
    assert_eq!(metric(&c, "node_doctor_kernel_pids", None), Some(31500.0));
    assert_eq!(
        metric(&c, "node_doctor_kernel_pid_max", None),
        Some(32768.0)
    );
    assert_eq!(
        metric(&c, "node_doctor_kernel_threads_max", None),
        Some(191853.0)
    );
    for kind in [
        "oom_system",
        "oom_cgroup",
        "hung_task",
        "fs_error",
        "backlog_drop",
    ] {
        assert_eq!(
            metric(&c, "node_doctor_kernel_events_total", Some(kind)),
            Some(0.0),
            "{kind}"
        );
    }
    // A healthy node: nothing.
    let ok = crate::support::collect(&mut collector(&host("")), &support::ctx());
    assert!(ok.findings.is_empty(), "{:?}", ids(&ok));
    assert_eq!(ok.status, Status::Ok);
}

#[test]
fn state_stays_bounded() {
    let mut kmsg = String::new();
    for i in 0..600u64 {
        kmsg += &format!(
            "3,{},{}000000,-;INFO: task worker{i}:{i} blocked for more than 120 seconds.\n",
            100 + 2 * i,
            6000 + i
        );
        kmsg += &format!(
            "3,{},{}000000,-;Buffer I/O error on dev sd{i}, logical block 0, async page read\n",
            101 + 2 * i,
            6000 + i
        );
    }
    let h = host(&kmsg);
    let mut k = KernelCollector::new(
        h.node(),
        KernelConfig {
            max_groups: 50,
            // All 1,200 records in one cycle however busy the machine is (the 50 ms default
            // budget cut the first read short under a parallel test run: other survivors).
            kmsg: collectors::kmsg::KmsgConfig {
                max_millis_per_cycle: 60_000,
                ..KernelConfig::default().kmsg
            },
            ..KernelConfig::default()
        },
    );
    let c = crate::support::collect(&mut k, &support::ctx());
    let (oom, hung, fs) = k.state_sizes();
    assert_eq!((oom, hung, fs), (0, 50, 50));
    // The newest survive.
    assert!(find(&c, "kernel.hung_task", "worker599").is_some());
    assert!(find(&c, "kernel.hung_task", "worker0").is_none());
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("hung_task")),
        Some(600.0)
    );
}

/// Removes the test cgroups (deepest first) after the process in them has exited.
struct CgroupGuard(Vec<std::path::PathBuf>);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Real kernel: a memory cgroup named like a kubepods container cgroup, 16 MiB limit, a
/// process with a unique name that reads /dev/zero into memory until the cgroup OOM killer
/// stops it; the collector reading the real /dev/kmsg must report that process, that pod UID
/// and container, and the limit. Then a burst: 25 such processes at once, more kills than the
/// kernel reports in 5 s (it prints 10 reports, then only the kill lines), and one more kill
/// 5 s later, which makes the kernel print `oom_kill_process: N callbacks suppressed`: still
/// one finding for the pod, every kill counted once, the unreported ones among them.
#[test]
fn real_kernel_cgroup_oom_names_the_process() {
    if !support::root_or_skip("real_kernel_cgroup_oom_names_the_process") {
        return;
    }
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .map(|c| c.split_whitespace().any(|w| w == "memory"))
        .unwrap_or(false);
    let base = if v2 {
        std::path::PathBuf::from("/sys/fs/cgroup")
    } else {
        std::path::PathBuf::from("/sys/fs/cgroup/memory")
    };
    if !base.join("cgroup.procs").exists() {
        collectors::skip!(
            "SKIP real_kernel_cgroup_oom_names_the_process: no memory cgroup controller mounted"
        );
        return;
    }
    let me = std::process::id();
    let uid = format!("0000abcd-0000-4000-8000-{me:012}");
    let cid = format!("c0ffee{:058x}", u64::from(me) * 7919);
    let top = base.join(format!("node-doctor-test-{me}"));
    let dirs = vec![
        top.clone(),
        top.join("kubepods"),
        top.join("kubepods/burstable"),
        top.join(format!("kubepods/burstable/pod{uid}")),
        top.join(format!("kubepods/burstable/pod{uid}/{cid}")),
    ];
    let guard = CgroupGuard(Vec::new());
    let mut guard = guard;
    for d in &dirs {
        if v2 {
            if let Some(parent) = d.parent() {
                // Delegate the memory controller down the new subtree.
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+memory");
            }
        }
        std::fs::create_dir(d).expect("create test cgroup");
        guard.0.push(d.clone());
    }
    let leaf = dirs.last().unwrap().clone();
    if v2 {
        std::fs::write(leaf.join("memory.max"), "16M").expect("memory.max");
        let _ = std::fs::write(leaf.join("memory.swap.max"), "0");
    } else {
        std::fs::write(leaf.join("memory.limit_in_bytes"), "16M").expect("memory.limit_in_bytes");
        let _ = std::fs::write(leaf.join("memory.memsw.limit_in_bytes"), "16M");
    }
    // A unique comm: the process runs `tail` through a symlink with a unique name.
    let name = format!("ndoom{}", me % 1_000_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let tail = ["/usr/bin/tail", "/bin/tail"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("tail");
    let link = tmp.path().join(&name);
    std::os::unix::fs::symlink(tail, &link).unwrap();

    // The reader starts now: only records from the last minute are read.
    let mut k = KernelCollector::new(
        collectors::Node::new(HostPaths::new("/")),
        KernelConfig {
            kmsg: collectors::kmsg::KmsgConfig {
                lookback: Duration::from_secs(60),
                ..Default::default()
            },
            ..KernelConfig::default()
        },
    );
    let _ = k.collect(&support::ctx());

    let script = format!(
        "echo $$ > {} && exec {} /dev/zero",
        leaf.join("cgroup.procs").display(),
        link.display()
    );
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .spawn()
        .expect("spawn");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let status = status.expect("the process should have been OOM-killed within 15 s");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status:?}");

    let mut found = None;
    for _ in 0..20 {
        let c = k.collect(&support::ctx());
        if let Some(f) = c.findings.into_iter().find(|f| {
            f.id == "kernel.oom_cgroup"
                && f.evidence.get("last_comm").and_then(|e| e.as_str()) == Some(name.as_str())
        }) {
            found = Some(f);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let f = found.unwrap_or_else(|| panic!("no kernel.oom_cgroup finding naming {name}"));
    assert_eq!(f.subject, uid);
    assert_eq!(f.evidence["pod_uid"].as_str(), Some(uid.as_str()));
    assert_eq!(f.evidence["container_id"].as_str(), Some(cid.as_str()));
    assert_eq!(
        f.evidence["limit_bytes"].as_f64(),
        Some((16u64 << 20) as f64)
    );
    assert!(f.evidence["kills"].as_f64().unwrap() >= 1.0);
    assert!(f.summary.en.contains(&name));
    let single = f.evidence["kills"].as_f64().unwrap();

    // The burst, read by a second reader of the real kernel log for the suppressed count.
    let mut log = collectors::kmsg::KmsgReader::alone(
        &HostPaths::new("/"),
        collectors::kmsg::KmsgConfig {
            lookback: Duration::from_secs(1),
            ..Default::default()
        },
    );
    let _ = log.read_new();
    let run_in_cgroup = |script: String| {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {} && {script}",
                leaf.join("cgroup.procs").display()
            ))
            .spawn()
            .expect("spawn");
        let started = std::time::Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the burst did not end within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let burst_started = std::time::Instant::now();
    let link = link.display().to_string();
    run_in_cgroup(format!(
        "i=0; while [ $i -lt 25 ]; do {link} /dev/zero & i=$((i+1)); done; wait"
    ));
    // After the kernel's 5 s rate-limit interval, one more kill prints the suppressed count.
    std::thread::sleep(Duration::from_secs(6).saturating_sub(burst_started.elapsed()));
    run_in_cgroup(format!("exec {link} /dev/zero"));
    let mut suppressed = 0u64;
    for _ in 0..20 {
        for r in log.read_new().records {
            if let Some(n) = r
                .message
                .strip_prefix("oom_kill_process: ")
                .and_then(|m| m.strip_suffix(" callbacks suppressed"))
            {
                suppressed += n.parse::<u64>().unwrap_or(0);
            }
        }
        if suppressed > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = k.collect(&support::ctx());
    let ours: Vec<&Finding> = c
        .findings
        .iter()
        .filter(|f| {
            f.id == "kernel.oom_cgroup"
                && f.evidence.get("last_comm").and_then(|e| e.as_str()) == Some(name.as_str())
        })
        .collect();
    assert_eq!(ours.len(), 1, "one finding for the pod: {:?}", ids(&c));
    let f = ours[0];
    assert_eq!(f.subject, uid);
    let kills = f.evidence["kills"].as_f64().unwrap();
    let unreported = f
        .evidence
        .get("unreported_kills")
        .and_then(|e| e.as_f64())
        .unwrap_or(0.0);
    eprintln!(
        "real OOM burst: {kills} kills of {name} ({single} before the burst), {unreported} tied by name; the kernel said {suppressed} reports were suppressed"
    );
    assert!(kills >= single + 26.0, "every kill counted: {kills}");
    if suppressed > 0 {
        assert!(
            unreported >= 1.0,
            "the rate-limited kills are the pod's: {f:?}"
        );
    } else {
        eprintln!("the kernel did not rate-limit this burst: nothing to tie by name");
    }
    drop(guard);
    assert!(!top.exists(), "test cgroup removed");
}

#[test]
fn fs_errors_old_kernel_format() {
    // Kernel 3.10 (CentOS 7) forms: `Buffer I/O error on device`, XFS `I/O Error Detected`;
    // 20 minutes ago, and the XFS on /data still answers every access with EIO.
    let h = docker_node(include_str!("../fixtures/kmsg/fs-errors.linux-3.10.kmsg"));
    let mut k = collector(&h).with_mount_probe(eio_at("/data"));
    let c = crate::support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.fs_error", "vdb").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Critical, "vdb holds /var/lib/docker");
    assert_eq!(f.evidence["kinds"].as_str(), Some("buffer_io_error"));
    let x = find(&c, "kernel.fs_error", "sdc").unwrap();
    assert_eq!(x.severity, Severity::Warning);
    assert_eq!(x.evidence["errors"].as_f64(), Some(1.0));
    assert_eq!(x.evidence["mount_point"].as_str(), Some("/data"));
    assert_eq!(x.evidence["shut_down_now"].as_str(), Some("true"));
    assert!(x.summary.en.contains("refuses writes"), "{}", x.summary.en);
    assert!(cmds(x)
        .iter()
        .any(|c| c == "umount /data && xfs_repair /dev/sdc"));
}

/// A task on the fake host as `/proc` shows it: its `stat` in `state`, `comm`, and a
/// `cmdline` (`comm` as its only argument; empty for a kernel thread, as the kernel shows it).
fn task(h: &FakeHost, pid: u32, comm: &str, state: char, user_space: bool) {
    let cmdline = if user_space {
        format!("{comm}\0")
    } else {
        String::new()
    };
    h.write(&format!("/proc/{pid}/stat"), task_stat(pid, comm, state))
        .write(&format!("/proc/{pid}/comm"), format!("{comm}\n"))
        .write(&format!("/proc/{pid}/cmdline"), cmdline);
}

/// `/proc/<pid>/stat` of a task in `state` (the field layout of kernel 6.18.44, this VM).
fn task_stat(pid: u32, comm: &str, state: char) -> String {
    format!("{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560 102 0 0 0 0 0 0 0 20 0 1 0 1023184 3133440 412 18446744073709551615 94207089307648 94207089327529 140728339263008 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94207089343536 94207089345152 94207874502656 140728339270160 140728339270180 140728339270180 140728339271659 0\n")
}

/// A mount probe that answers EIO (a shut-down XFS) for the host path `mount_point`, and the
/// fake root's own device for everything else (which is not the mount's: "cannot tell").
fn eio_at(mount_point: &'static str) -> impl Fn(&Path) -> std::io::Result<u64> + Send {
    move |p: &Path| {
        if p.ends_with(mount_point.trim_start_matches('/')) {
            Err(std::io::Error::from_raw_os_error(5))
        } else {
            Ok(0)
        }
    }
}

/// The findings of one id.
fn all<'a>(c: &'a Collection, id: &str) -> Vec<&'a Finding> {
    c.findings.iter().filter(|f| f.id == id).collect()
}

/// Renumbers kmsg records 1, 2, 3, ... (keeping their times), so that records can be inserted
/// between real ones as another CPU's messages would be.
fn renumbered(records: &[String]) -> String {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (hdr, msg) = r.split_once(';').expect("record");
            let f: Vec<&str> = hdr.split(',').collect();
            format!("{},{},{},{};{msg}\n", f[0], i + 1, f[2], f[3])
        })
        .collect()
}

/// The real 6.18 burst (`fixtures/kmsg/oom-burst.linux-6.18.kmsg`: 26 kills of one pod's
/// container, 15 of them with their report rate-limited, then `oom_kill_process: 15 callbacks
/// suppressed`) as a busy node logs it: `net_ratelimit: N callbacks suppressed` records of
/// another CPU in between, one of them inside the third kill's `oom-kill:` summary, whose rest
/// the kernel then stores as records of their own (flag `c`).
fn busy_burst() -> (String, u64) {
    let real = include_str!("../fixtures/kmsg/oom-burst.linux-6.18.kmsg");
    let mut out: Vec<String> = Vec::new();
    let mut summaries = 0;
    let mut last_usec = 0;
    for (i, line) in real.lines().enumerate() {
        let (hdr, msg) = line.split_once(';').expect("record");
        let usec: u64 = hdr.split(',').nth(2).unwrap().parse().unwrap();
        last_usec = usec;
        if msg.starts_with("oom-kill:") {
            summaries += 1;
            if summaries == 3 {
                let (head, rest) = msg.split_once(",oom_memcg=").unwrap();
                let (oom, task) = rest.split_once(",task_memcg=").unwrap();
                out.push(format!("{hdr};{head}"));
                out.push(format!(
                    "4,0,{usec},-;net_ratelimit: 41 callbacks suppressed"
                ));
                out.push(format!("4,0,{usec},c;,oom_memcg={oom}"));
                out.push(format!(
                    "4,0,{usec},-;IPv4: martian source 10.244.1.7 from 10.244.2.9, on dev cni0"
                ));
                out.push(format!("4,0,{usec},c;,task_memcg={task}"));
                continue;
            }
        }
        out.push(line.to_string());
        if i % 40 == 17 {
            out.push(format!(
                "4,0,{usec},-;net_ratelimit: {} callbacks suppressed",
                i % 7 + 1
            ));
        }
    }
    (renumbered(&out), last_usec / 1_000_000)
}

/// A real 6.18 OOM burst whose later reports the kernel rate-limited, with other CPUs'
/// messages in between (one splitting a summary), is one finding naming the pod: each kill
/// counted once, the unreported ones tied to the pod by their task name.
#[test]
fn real_6_18_oom_burst_with_suppressed_reports_is_one_finding_naming_the_pod() {
    let (kmsg, last_s) = busy_burst();
    let h = host(&kmsg);
    // A minute after the last kill; the pod is still on the node and named in its metadata.
    h.write("/proc/uptime", format!("{}.00 1.00\n", last_s + 60))
        .write(
            &format!(
                "/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/{CID}/memory.limit_in_bytes"
            ),
            "268435456\n",
        )
        .mkdir(&format!(
            "/var/log/pods/shop_orders-7d4b9c-x2x8q_{UID}/java"
        ))
        .write(
            &format!("/var/log/containers/orders-7d4b9c-x2x8q_shop_java-{CID}.log"),
            "",
        );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let ooms = all(&c, "kernel.oom_cgroup");
    assert_eq!(ooms.len(), 1, "one pod, one finding: {:?}", ids(&c));
    let f = ooms[0];
    assert_eq!(f.subject, UID);
    assert_eq!(f.severity, Severity::Critical, "a crash loop going on");
    assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
    assert_eq!(f.evidence["kills"].as_f64(), Some(26.0));
    assert_eq!(f.evidence["unreported_kills"].as_f64(), Some(15.0));
    assert_eq!(f.evidence["pod"].as_str(), Some("shop/orders-7d4b9c-x2x8q"));
    assert_eq!(f.evidence["container"].as_str(), Some("java"));
    assert_eq!(f.evidence["container_id"].as_str(), Some(CID));
    assert_eq!(f.evidence["pod_present_now"].as_str(), Some("true"));
    assert_eq!(
        f.evidence["limit_bytes"].as_f64(),
        Some((256u64 << 20) as f64)
    );
    assert!(
        f.summary
            .en
            .contains("the kernel rate-limited the report of 15 of these kills"),
        "{}",
        f.summary.en
    );
    assert!(find(&c, "kernel.oom_system", "").is_none());
    assert_eq!(
        metric(&c, "node_doctor_kernel_events_total", Some("oom_cgroup")),
        Some(26.0)
    );
}

/// One fixture per kernel version's OOM wording (tests/fixtures/kmsg/README.md): each kill is
/// one kill of the right kind, attributed to the pod a line of it names.
#[test]
fn oom_wordings_of_each_kernel_version_name_the_victim() {
    struct Case {
        fixture: &'static str,
        uptime_s: u64,
        id: &'static str,
        subject: &'static str,
        pid: f64,
        comm: &'static str,
        processes: Option<f64>,
    }
    let cases = [
        // 3.10: the decision names a thread (26074), the victim line the process killed.
        Case {
            fixture: include_str!("../fixtures/kmsg/oom-cgroup.linux-3.10.kmsg"),
            uptime_s: 148_000,
            id: "kernel.oom_cgroup",
            subject: "bee65b57-7e71-11e8-9ced-d24398b14524",
            pid: 24518.0,
            comm: "monocular",
            processes: None,
        },
        Case {
            fixture: include_str!("../fixtures/kmsg/oom-cgroup.linux-4.15.kmsg"),
            uptime_s: 6_686_800,
            id: "kernel.oom_cgroup",
            subject: "465a9fc1-0de9-44cd-b22c-7e6b23fd75f8",
            pid: 28285.0,
            comm: "calloc",
            processes: None,
        },
        // 5.x, memory.oom.group: the victim's line printed twice is one kill of one process.
        Case {
            fixture: include_str!("../fixtures/kmsg/oom-group.linux-5.x.aks.kmsg"),
            uptime_s: 8_400,
            id: "kernel.oom_cgroup",
            subject: "10d16a28-60ff-475f-a631-510d9792219f",
            pid: 68061.0,
            comm: "stress",
            processes: None,
        },
    ];
    for case in cases {
        let h = host(case.fixture);
        h.write("/proc/uptime", format!("{}.00 1.00\n", case.uptime_s));
        let c = collector(&h).collect(&support::ctx());
        let found = all(&c, case.id);
        assert_eq!(found.len(), 1, "{}: {:?}", case.comm, ids(&c));
        let f = found[0];
        assert_eq!(f.subject, case.subject, "{}", case.comm);
        assert_eq!(f.evidence["kills"].as_f64(), Some(1.0), "{}", case.comm);
        assert_eq!(f.evidence["last_pid"].as_f64(), Some(case.pid));
        assert_eq!(f.evidence["last_comm"].as_str(), Some(case.comm));
        assert_eq!(
            f.evidence.get("processes_killed").and_then(|e| e.as_f64()),
            case.processes
        );
        assert_eq!(c.findings.len(), 1, "{:?}", ids(&c));
    }

    // 4.19, memory.oom.group outside pods: one system OOM kill of four processes.
    let h = host(include_str!("../fixtures/kmsg/oom-group.linux-4.19.kmsg"));
    h.write("/proc/uptime", "100.00 1.00\n");
    let c = collector(&h).collect(&support::ctx());
    let f = find(&c, "kernel.oom_system", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["kills"].as_f64(), Some(1.0));
    assert_eq!(f.evidence["last_pid"].as_f64(), Some(1221.0));

    // 5.x on k3s: a system OOM whose report is missing; the group line names the pod.
    let h = host(include_str!(
        "../fixtures/kmsg/oom-system-group.linux-5.x.k3s.kmsg"
    ));
    h.write("/proc/uptime", "3500.00 1.00\n");
    let c = collector(&h).collect(&support::ctx());
    let f = find(&c, "kernel.oom_system", "").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["kills"].as_f64(), Some(1.0));
    assert_eq!(f.evidence["pod_victims"].as_f64(), Some(1.0));
    assert!(f.evidence["victims"]
        .as_str()
        .unwrap()
        .contains("pod 3902af1e-8ce1-42e1-a2a5-dc04f4240c4f"));
}

/// The AKS kill hit `/kubepods.slice`, the limit of all pods together: the advice says so.
#[test]
fn a_kill_at_the_limit_of_all_pods_says_the_container_was_only_the_victim() {
    let h = host(include_str!(
        "../fixtures/kmsg/oom-group.linux-5.x.aks.kmsg"
    ));
    h.write("/proc/uptime", "8400.00 1.00\n");
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(
        &c,
        "kernel.oom_cgroup",
        "10d16a28-60ff-475f-a631-510d9792219f",
    )
    .unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["oom_memcg"].as_str(), Some("/kubepods.slice"));
    assert!(
        f.summary
            .en
            .contains("the limit hit was /kubepods.slice's, not the pod's own"),
        "{}",
        f.summary.en
    );
    assert!(f
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("allocatable")));
    assert_eq!(f.severity, Severity::Warning, "one recent kill");
}

/// A kill an hour ago of a pod no longer on the node (its cgroup is gone from the kubepods
/// tree): history. The same kill of a pod still there, 58 minutes ago: history too, and a
/// crash loop 2 minutes ago: critical.
#[test]
fn a_past_oom_kill_is_history() {
    let kmsg = format!(
        "6,1,3720000000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/burstable/pod{UID}/{CID},task_memcg=/kubepods/burstable/pod{UID}/{CID},task=java,pid=100,uid=0\n\
         3,2,3720000100,-;Memory cgroup out of memory: Killed process 100 (java) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0\n"
    );
    let h = host(&kmsg);
    h.write(
        "/sys/fs/cgroup/memory/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/memory.limit_in_bytes",
        "268435456\n",
    );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_cgroup", UID).unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(f.evidence["pod_present_now"].as_str(), Some("false"));
    assert!(
        f.summary
            .en
            .ends_with("The pod is no longer on this node: history."),
        "{}",
        f.summary.en
    );
    // The pod is still there: the kill is 58 minutes old, one kill: history as well.
    h.write(
        &format!("/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/memory.limit_in_bytes"),
        "268435456\n",
    );
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let f = find(&c, "kernel.oom_cgroup", UID).unwrap();
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary.en.contains("None in the last 15 min: history"),
        "{}",
        f.summary.en
    );
}

/// Hung-task reports of 3.10, 5.10 and 6.18 (a real capture): critical for the runtime while a
/// task of that name is still in D state now, however old the report; otherwise it decays.
#[test]
fn hung_task_wordings_and_decay() {
    for (fixture, uptime, comm, pid) in [
        (
            include_str!("../fixtures/kmsg/hung-task.linux-3.10.kmsg"),
            "6060.00",
            "dockerd",
            1234,
        ),
        (
            include_str!("../fixtures/kmsg/hung-task.linux-5.10.kmsg"),
            "300.00",
            "jbd2/sda1-8",
            512,
        ),
        (
            include_str!("../fixtures/kmsg/hung-task.linux-6.18.kmsg"),
            "9520.00",
            "ndhung",
            15156,
        ),
    ] {
        let h = host(fixture);
        h.write("/proc/uptime", format!("{uptime} 1.00\n"));
        task(&h, pid, comm, 'D', true);
        let mut k = collector(&h);
        let c = k.collect(&support::ctx());
        let f =
            find(&c, "kernel.hung_task", comm).unwrap_or_else(|| panic!("{comm}: {:?}", ids(&c)));
        assert_eq!(
            f.evidence["last_pid"].as_f64(),
            Some(f64::from(pid)),
            "{comm}"
        );
        assert_eq!(f.evidence["reports"].as_f64(), Some(1.0), "{comm}");
        assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"), "{comm}");
        assert_eq!(f.evidence["blocked_now_pid"].as_f64(), Some(f64::from(pid)));
        // The task runs again: the same report, now only recent.
        h.write(&format!("/proc/{pid}/stat"), task_stat(pid, comm, 'S'));
        let f = k
            .collect(&support::ctx())
            .findings
            .into_iter()
            .find(|f| f.id == "kernel.hung_task")
            .unwrap();
        assert_eq!(f.evidence["phase"].as_str(), Some("recent"), "{comm}");
        assert_eq!(f.evidence["blocked_now"].as_str(), Some("false"));
    }
    // dockerd (the runtime): critical while blocked, warning once it runs, info when old.
    let h = host(include_str!("../fixtures/kmsg/hung-task.linux-3.10.kmsg"));
    h.write("/proc/uptime", "6060.00 1.00\n");
    task(&h, 1234, "dockerd", 'D', true);
    let mut k = collector(&h);
    let sev = |k: &mut KernelCollector| {
        crate::support::collect(k, &support::ctx())
            .findings
            .into_iter()
            .find(|f| f.id == "kernel.hung_task")
            .map(|f| f.severity)
    };
    assert_eq!(sev(&mut k), Some(Severity::Critical));
    // Still blocked 70 minutes later, past the 1 h window: still reported, still critical.
    h.write("/proc/uptime", "10260.00 1.00\n");
    assert_eq!(sev(&mut k), Some(Severity::Critical));
    // The pid is gone now: the report is older than the window: dropped.
    std::fs::remove_file(h.path("/proc/1234/stat")).unwrap();
    assert_eq!(sev(&mut k), None);
    // A fresh collector on the same log, the pid gone, 15 min 1 s later: history.
    h.write("/proc/uptime", "6901.00 1.00\n");
    let mut k = collector(&h);
    assert_eq!(sev(&mut k), Some(Severity::Info));
    h.write("/proc/uptime", "6300.00 1.00\n");
    let mut k = collector(&h);
    assert_eq!(sev(&mut k), Some(Severity::Warning));
}

/// ext4 on 6.18 (a real capture): `errors=remount-ro` leaves the mount `rw` and says
/// `emergency_ro` in the superblock options: still read-only now. After a repair and a
/// remount: recovered, information only.
#[test]
fn ext4_remounted_read_only_on_6_18_and_recovered() {
    let h = host(include_str!("../fixtures/kmsg/ext4-error.linux-6.18.kmsg"));
    // 6.18.44's mountinfo line of that mount after the error (this VM), placed on the
    // kubelet's directory.
    h.mkdir("/var/lib/kubelet")
        .write("/proc/uptime", "9600.00 1.00\n")
        .write(
            "/proc/1/mountinfo",
            "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
             43 22 7:0 / /var/lib/kubelet rw,relatime - ext4 /dev/loop0 rw,errors=remount-ro,emergency_ro\n",
        )
        .write("/sys/fs/ext4/loop0/errors_count", "2\n")
        .write("/proc/1/cmdline", "/sbin/init\0");
    let mut k = collector(&h);
    let c = crate::support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.fs_error", "loop0").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(f.evidence["read_only_now"].as_str(), Some("true"));
    assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
    // The capture's `Aborting journal on device loop0-8.` lines are the journal's abort.
    assert_eq!(
        f.evidence["kinds"].as_str(),
        Some("ext4_error,remounted_read_only,mounted_with_errors,journal_aborted")
    );
    assert_eq!(f.evidence["errors_count_now"].as_f64(), Some(2.0));
    // fsck'd and mounted read-write again.
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
         44 22 7:0 / /var/lib/kubelet rw,relatime - ext4 /dev/loop0 rw,errors=remount-ro\n",
    )
    .write("/sys/fs/ext4/loop0/errors_count", "0\n");
    let c = crate::support::collect(&mut k, &support::ctx());
    let f = find(&c, "kernel.fs_error", "loop0").unwrap();
    assert_eq!(f.severity, Severity::Info);
    assert!(
        f.summary.en.contains("it accepts writes again now"),
        "{}",
        f.summary.en
    );
}

/// XFS shutdowns of 5.19 and 6.18 (real text): while the mount answers EIO the finding keeps
/// its severity; once it answers, it has recovered.
#[test]
fn xfs_shutdown_wordings_and_recovery() {
    for (fixture, dev, uptime) in [
        (
            include_str!("../fixtures/kmsg/xfs-shutdown.linux-6.18.kmsg"),
            "loop0",
            "9550.00",
        ),
        (
            include_str!("../fixtures/kmsg/fs-errors.linux-5.19.kmsg"),
            "dm-0",
            "6100.00",
        ),
    ] {
        let h = host(fixture);
        h.write("/proc/uptime", format!("{uptime} 1.00\n")).write(
            "/proc/1/mountinfo",
            format!("22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                     41 22 7:0 / /data rw,relatime - xfs /dev/{dev} rw,inode64,logbufs=8,logbsize=32k,noquota\n"),
        );
        let mut k = collector(&h).with_mount_probe(eio_at("/data"));
        let c = k.collect(&support::ctx());
        let f = find(&c, "kernel.fs_error", dev).unwrap_or_else(|| panic!("{dev}: {:?}", ids(&c)));
        assert!(
            f.evidence["kinds"]
                .as_str()
                .unwrap()
                .contains("xfs_shutdown"),
            "{dev}"
        );
        assert_eq!(f.evidence["shut_down_now"].as_str(), Some("true"), "{dev}");
        assert_eq!(f.severity, Severity::Warning, "{dev}: not a runtime disk");
        // Remounted after xfs_repair: the probe answers with the mount's own device (7:0).
        let mut k = collector(&h).with_mount_probe(|_: &Path| Ok(nix::sys::stat::makedev(7, 0)));
        let c = k.collect(&support::ctx());
        let f = find(&c, "kernel.fs_error", dev).unwrap();
        assert_eq!(f.evidence["shut_down_now"].as_str(), Some("false"), "{dev}");
        assert_eq!(f.severity, Severity::Info, "{dev}: recovered");
    }
}

/// Unmounts and detaches a test's loop-device filesystem, even when the test fails.
struct LoopMount {
    mount_point: std::path::PathBuf,
    device: Option<String>,
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let quiet = |c: &mut std::process::Command| {
            let _ = c.stderr(std::process::Stdio::null()).status();
        };
        quiet(std::process::Command::new("umount").arg(&self.mount_point));
        if let Some(d) = &self.device {
            quiet(std::process::Command::new("losetup").args(["-d", d]));
        }
    }
}

/// Real kernel: an ext4 image on a loop device mounted `errors=remount-ro`, an error raised
/// through `/sys/fs/ext4/<dev>/trigger_fs_error`: the kernel logs the error and the remount,
/// and the collector reading the real kernel log and the real mountinfo sees the filesystem
/// read-only now (6.6+ shows it as `emergency_ro` in the superblock options, keeping `rw`),
/// with the error count ext4 keeps until fsck.
#[test]
fn real_kernel_ext4_error_is_read_only_now() {
    if !support::root_or_skip("real_kernel_ext4_error_is_read_only_now") {
        return;
    }
    let tools = ["mkfs.ext4", "losetup", "mount", "umount"];
    if let Some(t) = tools.iter().find(|t| {
        !std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }) {
        collectors::skip!("SKIP real_kernel_ext4_error_is_read_only_now: {t} is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("ext4.img");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    std::fs::File::create(&image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let ok = |cmd: &mut std::process::Command| cmd.status().is_ok_and(|s| s.success());
    assert!(ok(std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image)));
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .unwrap();
    let loop_dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !loop_dev.starts_with("/dev/loop") {
        collectors::skip!(
            "SKIP real_kernel_ext4_error_is_read_only_now: no loop device ({loop_dev})"
        );
        return;
    }
    let mut guard = LoopMount {
        mount_point: mnt.clone(),
        device: Some(loop_dev.clone()),
    };
    let dev = loop_dev.trim_start_matches("/dev/").to_string();
    assert!(ok(std::process::Command::new("mount")
        .args(["-o", "errors=remount-ro", &loop_dev])
        .arg(&mnt)));
    let pid1_sees_it = std::fs::read_to_string("/proc/1/mountinfo")
        .is_ok_and(|m| m.contains(&*mnt.to_string_lossy()));
    if !pid1_sees_it {
        collectors::skip!(
            "SKIP real_kernel_ext4_error_is_read_only_now: pid 1 is in another mount namespace (the collector reads the host's mounts as pid 1 sees them, and this test's mount is not among them)"
        );
        return;
    }
    let mut k = KernelCollector::new(
        collectors::Node::new(HostPaths::new("/")),
        KernelConfig {
            kmsg: collectors::kmsg::KmsgConfig {
                lookback: Duration::from_secs(30),
                ..Default::default()
            },
            ..KernelConfig::default()
        },
    );
    let _ = k.collect(&support::ctx());
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "node-doctor real-kernel test\n",
    )
    .expect("trigger_fs_error");
    let mut found = None;
    for _ in 0..30 {
        let c = k.collect(&support::ctx());
        if let Some(f) = c
            .findings
            .into_iter()
            .find(|f| f.id == "kernel.fs_error" && f.subject == dev)
        {
            if f.evidence.get("read_only_now").and_then(|e| e.as_str()) == Some("true") {
                found = Some(f);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let f = found.unwrap_or_else(|| panic!("no read-only kernel.fs_error finding for {dev}"));
    eprintln!("real ext4 error: {}", f.summary.en);
    assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
    assert!(f.evidence["kinds"]
        .as_str()
        .unwrap()
        .contains("remounted_read_only"));
    assert!(f.evidence["errors_count_now"].as_f64().unwrap() >= 1.0);
    assert_eq!(
        f.evidence["mount_point"].as_str(),
        Some(&*mnt.to_string_lossy())
    );
    // Unmounted: the device holds no mounted filesystem; the error is only recent now.
    assert!(ok(std::process::Command::new("umount").arg(&mnt)));
    let c = k.collect(&support::ctx());
    let f = c
        .findings
        .iter()
        .find(|f| f.id == "kernel.fs_error" && f.subject == dev)
        .expect("still in the window");
    assert_eq!(f.evidence["phase"].as_str(), Some("recent"));
    assert!(!f.evidence.contains_key("read_only_now"));
    guard.device.take();
    assert!(ok(
        std::process::Command::new("losetup").args(["-d", &loop_dev])
    ));
}

/// An oops expected: task, opening kind, pid, CPU, in a task's context, panic text.
type ExpectedOops = (
    &'static str,
    &'static str,
    u32,
    u32,
    bool,
    Option<&'static str>,
);

/// One kernel version's wordings of the kernel's own failures (`fixtures/kmsg/crash.linux-*`):
/// the oopses expected (task, opening kind, pid, CPU, in a task's context, panic text), the
/// soft lockup's seconds and task, the RCU flavour, the device that cannot be freed.
struct CrashWordings {
    fixture: &'static str,
    version: &'static str,
    oopses: &'static [ExpectedOops],
    soft: (u64, &'static str),
    rcu: &'static str,
    netdev: (&'static str, u64),
}

const CRASH_WORDINGS: &[CrashWordings] = &[
    CrashWordings {
        fixture: include_str!("../fixtures/kmsg/crash.linux-3.10.kmsg"),
        version: "3.10",
        oopses: &[
            ("java", "null_pointer_dereference", 1234, 3, true, None),
            ("nginx", "divide_error", 2345, 5, true, None),
        ],
        soft: (22, "java"),
        rcu: "rcu_sched",
        netdev: ("lo", 1),
    },
    CrashWordings {
        fixture: include_str!("../fixtures/kmsg/crash.linux-5.4.kmsg"),
        version: "5.4",
        oopses: &[
            ("java", "null_pointer_dereference", 1234, 3, true, None),
            (
                "kworker/1:2",
                "general_protection_fault",
                2345,
                1,
                true,
                None,
            ),
        ],
        soft: (23, "java"),
        rcu: "rcu_sched",
        netdev: ("veth3f2a1b4", 2),
    },
    CrashWordings {
        fixture: include_str!("../fixtures/kmsg/crash.linux-5.15.kmsg"),
        version: "5.15",
        oopses: &[
            ("containerd", "paging_request", 1234, 3, true, None),
            (
                "kworker/1:2",
                "general_protection_fault",
                2345,
                1,
                true,
                None,
            ),
        ],
        soft: (26, "containerd"),
        rcu: "rcu_preempt",
        netdev: ("eth0", 3),
    },
    CrashWordings {
        fixture: include_str!("../fixtures/kmsg/crash.linux-6.8.kmsg"),
        version: "6.8",
        oopses: &[
            (
                "python3",
                "kernel_bug",
                1234,
                3,
                true,
                Some("Fatal exception"),
            ),
            ("kubelet", "null_pointer_dereference", 2345, 1, true, None),
        ],
        soft: (26, "java"),
        rcu: "rcu_preempt",
        netdev: ("lo", 1),
    },
    CrashWordings {
        fixture: include_str!("../fixtures/kmsg/crash.linux-6.18.kmsg"),
        version: "6.18",
        oopses: &[
            ("java", "null_pointer_dereference", 1234, 3, true, None),
            ("swapper/1", "divide_error", 0, 1, false, None),
        ],
        soft: (23, "java"),
        rcu: "rcu_preempt",
        netdev: ("veth7c1e2d3", 2),
    },
];

/// Every wording of every kernel version: oopses (with the task of their `CPU:` line and a
/// panic that followed), soft and hard lockups, RCU stalls, `unregister_netdevice` waits, ext4
/// warnings and the hung task, 100 to 600 s old: all recent.
#[test]
fn kernel_failures_in_every_wording_from_3_10_to_6_18() {
    for w in CRASH_WORDINGS {
        let v = w.version;
        let h = host(w.fixture);
        let c = crate::support::collect(&mut collector(&h), &support::ctx());
        let all_ids = ids(&c);
        assert_eq!(
            all(&c, "kernel.oops").len(),
            w.oopses.len(),
            "{v}: {all_ids:?}"
        );
        for &(comm, kind, pid, cpu, in_task, panic) in w.oopses {
            let f =
                find(&c, "kernel.oops", comm).unwrap_or_else(|| panic!("{v} {comm}: {all_ids:?}"));
            assert_eq!(f.severity, Severity::Critical, "{v} {comm}: recent");
            assert_eq!(f.evidence["kind"].as_str(), Some(kind), "{v} {comm}");
            assert_eq!(
                f.evidence["pid"].as_f64(),
                Some(f64::from(pid)),
                "{v} {comm}"
            );
            assert_eq!(
                f.evidence["cpu"].as_f64(),
                Some(f64::from(cpu)),
                "{v} {comm}"
            );
            assert_eq!(
                f.evidence["oopses"].as_f64(),
                Some(1.0),
                "{v} {comm}: one oops of several lines"
            );
            assert_eq!(
                f.evidence["process_context"].as_str(),
                Some(if in_task { "true" } else { "false" }),
                "{v} {comm}"
            );
            assert_eq!(
                f.evidence.get("panic").and_then(|p| p.as_str()),
                panic,
                "{v} {comm}"
            );
            if in_task {
                assert!(
                    f.summary.en.contains(&format!(
                        "in task {comm} (pid {pid}) on CPU {cpu}: the kernel killed that task"
                    )),
                    "{v}: {}",
                    f.summary.en
                );
            }
            assert!(
                f.summary
                    .en
                    .contains("treat the node as broken until it is rebooted"),
                "{v}: {}",
                f.summary.en
            );
            assert!(cmds(f).iter().any(|c| c == "kubectl cordon node-1"), "{v}");
            assert!(
                f.remediation
                    .steps
                    .iter()
                    .any(|s| s.en.contains("drain it, then reboot it")),
                "{v}"
            );
            assert_eq!(
                f.remediation.source.as_ref().and_then(|s| s.url),
                Some("https://docs.kernel.org/admin-guide/bug-hunting.html")
            );
            if panic.is_some() {
                assert_eq!(f.title.en, "The kernel panicked", "{v}");
            }
        }
        // Soft lockup on CPU 3, naming its task and seconds.
        let s = find(&c, "kernel.cpu_stall", "cpu3").unwrap_or_else(|| panic!("{v}: {all_ids:?}"));
        assert_eq!(s.severity, Severity::Critical, "{v}");
        assert_eq!(s.evidence["kinds"].as_str(), Some("soft_lockup"), "{v}");
        assert_eq!(
            s.evidence["stuck_seconds"].as_f64(),
            Some(w.soft.0 as f64),
            "{v}"
        );
        assert_eq!(s.evidence["comm"].as_str(), Some(w.soft.1), "{v}");
        assert_eq!(s.evidence["pid"].as_f64(), Some(1234.0), "{v}");
        assert!(
            s.summary.en.contains(&format!(
                "stuck for up to {} s running {} (pid 1234)",
                w.soft.0, w.soft.1
            )),
            "{v}: {}",
            s.summary.en
        );
        assert_eq!(
            s.remediation.source.as_ref().map(|s| s.section),
            Some("Softlockup detector and hardlockup detector (aka nmi_watchdog)")
        );
        // Hard lockup on CPU 5.
        let hl = find(&c, "kernel.cpu_stall", "cpu5").unwrap_or_else(|| panic!("{v}: {all_ids:?}"));
        assert_eq!(hl.evidence["kinds"].as_str(), Some("hard_lockup"), "{v}");
        assert_eq!(hl.severity, Severity::Critical, "{v}");
        // RCU stall on CPU 2: the kernel's RCU stall documentation.
        let r = find(&c, "kernel.cpu_stall", "cpu2").unwrap_or_else(|| panic!("{v}: {all_ids:?}"));
        assert_eq!(r.evidence["kinds"].as_str(), Some("rcu_stall"), "{v}");
        assert_eq!(r.evidence["rcu_flavor"].as_str(), Some(w.rcu), "{v}");
        assert_eq!(
            r.remediation.source.as_ref().and_then(|s| s.url),
            Some("https://docs.kernel.org/RCU/stallwarn.html")
        );
        // Three waits 10 s apart: frequent, critical.
        let n = find(&c, "kernel.unregister_netdevice", w.netdev.0)
            .unwrap_or_else(|| panic!("{v}: {all_ids:?}"));
        assert_eq!(n.severity, Severity::Critical, "{v}: 3 waits in 20 min");
        assert_eq!(n.evidence["waits"].as_f64(), Some(3.0), "{v}");
        assert_eq!(
            n.evidence["usage_count"].as_f64(),
            Some(w.netdev.1 as f64),
            "{v}"
        );
        assert!(
            n.summary
                .en
                .contains("3 waits in the last 20 min (from 3: frequent)"),
            "{v}: {}",
            n.summary.en
        );
        assert!(
            cmds(n)
                .iter()
                .any(|c| c == "kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data"),
            "{v}"
        );
        // The ext4 warning, and the hung task every version words the same.
        let e =
            find(&c, "kernel.ext4_warning", "sda1").unwrap_or_else(|| panic!("{v}: {all_ids:?}"));
        assert_eq!(e.severity, Severity::Warning, "{v}");
        assert_eq!(
            e.evidence["function"].as_str(),
            Some("ext4_dx_add_entry"),
            "{v}"
        );
        assert!(
            e.summary
                .en
                .contains("ext4 logged 1 warning(s) for device sda1"),
            "{v}: {}",
            e.summary.en
        );
        assert!(
            cmds(e).iter().any(|c| c == "dmesg -T | grep -w sda1"),
            "{v}"
        );
        assert!(
            find(&c, "kernel.hung_task", "dockerd").is_some(),
            "{v}: {all_ids:?}"
        );
        assert_eq!(
            metric(&c, "node_doctor_kernel_events_total", Some("oops")),
            Some(w.oopses.len() as f64),
            "{v}"
        );
        assert_eq!(
            metric(&c, "node_doctor_kernel_events_total", Some("cpu_stall")),
            Some(3.0),
            "{v}"
        );
    }
}

/// The decay: an hour-old oops stays a warning (the kernel that oopsed still runs), a lockup
/// and an ext4 warning become history (info), a single `unregister_netdevice` wait is a
/// warning while recent and not frequent.
#[test]
fn kernel_failures_decay_with_age() {
    let kmsg = "\
1,10,3700000000,-;BUG: kernel NULL pointer dereference, address: 0000000000000008
4,11,3700000010,-;Oops: 0000 [#1] SMP PTI
4,12,3700000020,-;CPU: 3 PID: 1234 Comm: java Not tainted 5.4.0-150-generic #167-Ubuntu
0,20,3800000000,-;watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [java:1234]
4,30,3900000000,-;EXT4-fs warning (device sda1): ext4_dx_add_entry:2348: Directory index full!
0,40,7100000000,-;unregister_netdevice: waiting for lo to become free. Usage count = 1
";
    let h = host(kmsg);
    let c = crate::support::collect(&mut collector(&h), &support::ctx());
    let o = find(&c, "kernel.oops", "java").unwrap_or_else(|| panic!("{:?}", ids(&c)));
    assert_eq!(o.severity, Severity::Warning);
    assert_eq!(o.evidence["phase"].as_str(), Some("past"));
    assert!(
        o.summary.en.contains("the kernel that oopsed still runs"),
        "{}",
        o.summary.en
    );
    let s = find(&c, "kernel.cpu_stall", "cpu3").unwrap();
    assert_eq!(s.severity, Severity::Info);
    assert!(s.summary.en.contains("history"), "{}", s.summary.en);
    assert_eq!(
        find(&c, "kernel.ext4_warning", "sda1").unwrap().severity,
        Severity::Info
    );
    let n = find(&c, "kernel.unregister_netdevice", "lo").unwrap();
    assert_eq!(n.severity, Severity::Warning);
    assert_eq!(n.evidence["node_waits_recent"].as_f64(), Some(1.0));
    assert!(n.summary.en.contains("every 10 s"), "{}", n.summary.en);
    assert!(!cmds(n).iter().any(|c| c.starts_with("kubectl drain")));
}

/// Real kernel: an XFS image on a loop device shut down with `xfs_io -x -c shutdown`: the
/// collector reading the real kernel log and mountinfo raises `kernel.fs_error` for the loop
/// device with `xfs_shutdown`, confirmed now (`lstat` of the mount point answers EIO), and
/// the finding sets NodeDoctorXfsShutdown (node-problem-detector's XfsShutdown /
/// XfsHasShutdown). Needs `mkfs.xfs` and `xfs_io` (xfsprogs), `losetup`, `mount`.
#[test]
fn real_kernel_xfs_shutdown_is_shut_down_now() {
    let name = "real_kernel_xfs_shutdown_is_shut_down_now";
    if !support::root_or_skip(name) {
        return;
    }
    let tools = ["mkfs.xfs", "xfs_io", "losetup", "mount", "umount"];
    if let Some(t) = tools.iter().find(|t| {
        !std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }) {
        collectors::skip!("SKIP {name}: {t} is not installed (xfsprogs)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("xfs.img");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // xfsprogs 5.19+ refuses filesystems under 300 MiB; the file is sparse.
    std::fs::File::create(&image)
        .unwrap()
        .set_len(320 << 20)
        .unwrap();
    let ok = |cmd: &mut std::process::Command| {
        cmd.stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok(std::process::Command::new("mkfs.xfs")
        .args(["-q", "-f"])
        .arg(&image))
    {
        collectors::skip!("SKIP {name}: mkfs.xfs failed on a 320 MiB image");
        return;
    }
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .unwrap();
    let loop_dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !loop_dev.starts_with("/dev/loop") {
        collectors::skip!("SKIP {name}: no loop device ({loop_dev})");
        return;
    }
    let mut guard = LoopMount {
        mount_point: mnt.clone(),
        device: Some(loop_dev.clone()),
    };
    let dev = loop_dev.trim_start_matches("/dev/").to_string();
    if !ok(std::process::Command::new("mount").arg(&loop_dev).arg(&mnt)) {
        collectors::skip!("SKIP {name}: this kernel cannot mount XFS (no xfs module?)");
        return;
    }
    let pid1_sees_it = std::fs::read_to_string("/proc/1/mountinfo")
        .is_ok_and(|m| m.contains(&*mnt.to_string_lossy()));
    if !pid1_sees_it {
        collectors::skip!("SKIP {name}: pid 1 is in another mount namespace (the collector reads the host's mounts as pid 1 sees them)");
        return;
    }
    let mut k = KernelCollector::new(
        collectors::Node::new(HostPaths::new("/")),
        KernelConfig {
            kmsg: collectors::kmsg::KmsgConfig {
                lookback: Duration::from_secs(30),
                // The whole log in one cycle however busy the machine is (the 50 ms default
                // budget leaves the rest to later cycles under a parallel test run).
                max_millis_per_cycle: 60_000,
                ..Default::default()
            },
            ..KernelConfig::default()
        },
    );
    let _ = k.collect(&support::ctx());
    assert!(ok(std::process::Command::new("xfs_io")
        .args(["-x", "-c", "shutdown"])
        .arg(&mnt)));
    // Up to 10 s: other real-kernel tests (OOM bursts) may be writing the log at the same time.
    let mut found = None;
    let mut last = String::new();
    for _ in 0..100 {
        let c = k.collect(&support::ctx());
        last = format!(
            "{:?} {:?}",
            c.status,
            c.findings
                .iter()
                .map(|f| (f.key(), f.evidence.clone()))
                .collect::<Vec<_>>()
        );
        if let Some(f) = c
            .findings
            .into_iter()
            .find(|f| f.id == "kernel.fs_error" && f.subject == dev)
        {
            if f.evidence.get("shut_down_now").and_then(|e| e.as_str()) == Some("true") {
                found = Some(f);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let f = found.unwrap_or_else(|| {
        panic!("no shut-down kernel.fs_error finding for {dev}; last collection: {last}")
    });
    eprintln!("real XFS shutdown: {}", f.summary.en);
    assert_eq!(f.evidence["phase"].as_str(), Some("ongoing"));
    assert_eq!(f.evidence["fstype"].as_str(), Some("xfs"));
    assert!(f.evidence["kinds"]
        .as_str()
        .unwrap()
        .contains("xfs_shutdown"));
    assert_eq!(
        f.severity,
        Severity::Warning,
        "a test disk: no runtime directory on it"
    );
    assert!(cmds(&f)
        .iter()
        .any(|c| c == &format!("umount {} && xfs_repair /dev/{dev}", mnt.display())));
    let sets: Vec<(String, String)> = collectors::rules::RuleBook::cluster(&f)
        .into_iter()
        .map(|(class, reason)| (class.ctype(true).to_string(), reason))
        .collect();
    assert!(
        sets.contains(&("XfsShutdown".to_string(), "XfsHasShutdown".to_string())),
        "{sets:?}"
    );
    assert!(ok(std::process::Command::new("umount").arg(&mnt)));
    guard.device.take();
    assert!(ok(
        std::process::Command::new("losetup").args(["-d", &loop_dev])
    ));
}
