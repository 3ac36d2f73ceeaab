//! Scenarios of the handbook's chapter "集群 Kube-Proxy 异常排障处理" for the `iptables`
//! collector: a component holding the xtables lock for seconds, a pod in the host network that
//! does not mount the host's lock, kube-proxy's own error messages in its logs, a legacy/nft
//! backend mix — on fake host roots — and two real-kernel tests (root): a real `flock` holder
//! with a waiter, and a real `unshare -m` process named kube-proxy with its own lock file.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use collectors::explain::see_also;
use collectors::iptables::{IptablesCollector, IptablesConfig, Thresholds};
use collectors::proc::locks::dev_major_minor;
use collectors::{Collection, Collector, Evidence, Finding, Severity, Status};

use crate::support::{ctx, root_or_skip, tools_or_skip, FakeHost};

const POD_UID: &str = "5d5b3b8a-6c1f-4f7e-9a57-1b2c3d4e5f60";
const CID: &str = "0b3f5c2e9d1a7c4b8e6f2a1d3c5b7e9f0a2c4e6b8d1f3a5c7e9b2d4f6a8c0e1d";

/// A fake host whose network namespace has a legacy iptables table (`filter`): the xtables
/// lock has users, so the sampler reads `/proc/locks` at start and lock files are compared.
fn legacy_node() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/1/net/ip_tables_names", "filter\n");
    h
}

fn find<'a>(c: &'a Collection, id: &str, subject: &str) -> Option<&'a Finding> {
    c.findings
        .iter()
        .find(|f| f.id == id && f.subject == subject)
}

fn ev_f64(f: &Finding, name: &str) -> f64 {
    f.evidence
        .get(name)
        .and_then(Evidence::as_f64)
        .unwrap_or_else(|| panic!("evidence {name} missing in {f:#?}"))
}

fn ev_str<'a>(f: &'a Finding, name: &str) -> &'a str {
    f.evidence
        .get(name)
        .and_then(Evidence::as_str)
        .unwrap_or_else(|| panic!("evidence {name} missing in {f:#?}"))
}

fn metric(c: &Collection, name: &str, label: Option<&str>) -> f64 {
    c.metrics
        .iter()
        .find(|m| m.name == name && label.is_none_or(|l| m.labels.iter().any(|(_, v)| v == l)))
        .unwrap_or_else(|| panic!("metric {name} {label:?} missing"))
        .value
}

/// A quiet config for fake hosts: no reference namespaces to compare unless the test writes
/// them, fast sampling.
fn fast_config() -> IptablesConfig {
    IptablesConfig {
        sample_period: Duration::from_millis(40),
        thresholds: Thresholds {
            hold_warning: Duration::from_millis(300),
            hold_critical: Duration::from_millis(700),
            ..Thresholds::default()
        },
        ..IptablesConfig::default()
    }
}

/// Replaces a fake host file atomically (write + rename), as the kernel's `/proc/locks` never
/// shows a half-written table to the sampler thread reading it concurrently.
fn replace(h: &FakeHost, host_path: &str, text: impl AsRef<[u8]>) {
    let tmp = h.path(&format!("{host_path}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, h.path(host_path)).unwrap();
}

/// The `maj:min:inode` of a file as `/proc/locks` writes it.
fn proc_locks_id(path: &Path) -> String {
    let md = std::fs::metadata(path).unwrap();
    let (maj, min) = dev_major_minor(md.dev());
    format!("{maj:02x}:{min:02x}:{}", md.ino())
}

/// The handbook's "其它组件持有 iptables 锁时间过长": kube-router (in a pod) keeps the lock
/// while kube-proxy's iptables-restore queues behind it. Staged with a fake `/proc/locks`
/// that the collector's own sampler thread reads; thresholds scaled down to keep the test short.
#[test]
fn kube_router_holding_the_lock_is_critical_and_named() {
    let h = legacy_node();
    h.write("/run/xtables.lock", "");
    let id = proc_locks_id(&h.path("/run/xtables.lock"));
    h.write(
        "/proc/locks",
        format!(
            "1: POSIX  ADVISORY  WRITE 900 fe:00:12 0 EOF\n\
             2: FLOCK  ADVISORY  WRITE 31337 {id} 0 EOF\n\
             2: -> FLOCK  ADVISORY  WRITE 4242 {id} 0 EOF\n"
        ),
    );
    h.write("/proc/31337/comm", "kube-router\n");
    h.write(
        "/proc/31337/cmdline",
        "/usr/local/bin/kube-router\0--run-firewall=true\0--run-router=false\0",
    );
    h.write(
        "/proc/31337/cgroup",
        format!("11:memory:/kubepods/burstable/pod{POD_UID}/{CID}\n"),
    );
    h.write("/proc/4242/comm", "iptables-restor\n");
    h.write(
        "/proc/4242/cmdline",
        "iptables-restore\0-w\x005\0--noflush\0--counters\0",
    );
    // The kubelet's pod log directory and container log symlink name the pod and container.
    h.mkdir(&format!(
        "/var/log/pods/kube-system_kube-router-7xk2q_{POD_UID}/kube-router"
    ));
    h.symlink(
        &format!("/var/log/pods/kube-system_kube-router-7xk2q_{POD_UID}/kube-router/0.log"),
        &format!("/var/log/containers/kube-router-7xk2q_kube-system_kube-router-{CID}.log"),
    );
    let mut c = IptablesCollector::new(h.node(), fast_config());
    // The lock is staged before the first collection: watch it from now on.
    c.start_sampler();
    std::thread::sleep(Duration::from_millis(1000));
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "iptables.lock_contention", "pid 31337")
        .unwrap_or_else(|| panic!("no contention finding: {:#?}", out.findings));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.see_also, vec![see_also::XTABLES_LOCK_HELD]);
    assert!(ev_f64(f, "hold_seconds") >= 0.7, "{f:#?}");
    assert_eq!(ev_str(f, "still_held"), "true");
    assert_eq!(ev_f64(f, "holder_pid"), 31337.0);
    assert_eq!(ev_str(f, "holder_comm"), "kube-router");
    assert_eq!(ev_str(f, "holder_pod_uid"), POD_UID);
    assert_eq!(ev_str(f, "holder_container_id"), CID);
    assert_eq!(ev_str(f, "holder_pod_namespace"), "kube-system");
    assert_eq!(ev_str(f, "holder_pod_name"), "kube-router-7xk2q");
    assert_eq!(ev_str(f, "holder_container_name"), "kube-router");
    assert!(
        f.summary.en.contains(&format!(
            "pod kube-system/kube-router-7xk2q, pod UID {POD_UID}"
        )),
        "{}",
        f.summary.en
    );
    assert!(f.summary.zh.contains("Pod kube-system/kube-router-7xk2q"));
    assert!(ev_str(f, "holder_cmdline").starts_with("/usr/local/bin/kube-router --run-firewall"));
    assert_eq!(ev_str(f, "waiter_pids"), "4242");
    assert_eq!(ev_f64(f, "waiters_max"), 1.0);
    assert_eq!(ev_f64(f, "threshold_seconds"), 0.7);
    let cmds = &f.remediation.commands;
    assert!(
        cmds.contains(&format!("grep ' {id} ' /proc/locks")),
        "{cmds:?}"
    );
    assert!(cmds.contains(&"ps -o pid,etimes,args -p 31337".to_string()));
    assert!(cmds.contains(&"kubectl -n kube-system describe pod kube-router-7xk2q".to_string()));
    assert!(cmds
        .iter()
        .any(|c| c.contains("spec.nodeName=node-1") && c.ends_with(POD_UID)));
    assert!(cmds.contains(&"ps -o pid,etimes,args -p 4242".to_string()));
    assert!(f.remediation.steps.iter().any(|s| s.en.contains("v1.3.2")));
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.section, "其它组件持有 iptables 锁时间过长");
    assert_eq!(metric(&out, "node_doctor_iptables_lock_held", None), 1.0);
    assert!(metric(&out, "node_doctor_iptables_lock_hold_seconds", None) >= 0.7);
    assert_eq!(metric(&out, "node_doctor_iptables_lock_waiters", None), 1.0);

    // The holder releases: the hold still shows in the next window as finished, then clears.
    replace(
        &h,
        "/proc/locks",
        "1: POSIX  ADVISORY  WRITE 900 fe:00:12 0 EOF\n",
    );
    std::thread::sleep(Duration::from_millis(200));
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "iptables.lock_contention", "pid 31337").expect("finished hold reported");
    assert_eq!(ev_str(f, "still_held"), "false");
    assert_eq!(metric(&out, "node_doctor_iptables_lock_held", None), 0.0);
    assert!(metric(&out, "node_doctor_iptables_lock_longest_hold_seconds", None) >= 0.7);
    std::thread::sleep(Duration::from_millis(100));
    let out = crate::support::collect(&mut c, &ctx());
    assert!(find(&out, "iptables.lock_contention", "pid 31337").is_none());
    assert_eq!(
        metric(&out, "node_doctor_iptables_lock_longest_hold_seconds", None),
        0.0
    );
}

/// A short hold is a warning (between the thresholds), and a lock on another file is ignored.
#[test]
fn hold_between_thresholds_is_a_warning() {
    let h = legacy_node();
    h.write("/run/xtables.lock", "");
    let id = proc_locks_id(&h.path("/run/xtables.lock"));
    h.write(
        "/proc/locks",
        format!(
            "1: FLOCK  ADVISORY  WRITE 77 {id} 0 EOF\n2: FLOCK  ADVISORY  WRITE 78 00:99:1 0 EOF\n"
        ),
    );
    h.write("/proc/77/comm", "calico-node\n");
    h.write("/proc/77/cgroup", "0::/system.slice/calico.service\n");
    let fast = fast_config();
    let cfg = IptablesConfig {
        thresholds: Thresholds {
            hold_critical: Duration::from_secs(60),
            ..fast.thresholds.clone()
        },
        ..fast
    };
    let mut c = IptablesCollector::new(h.node(), cfg);
    // The lock is staged before the first collection: watch it from now on.
    c.start_sampler();
    std::thread::sleep(Duration::from_millis(600));
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "iptables.lock_contention", "pid 77").expect("warning");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(ev_str(f, "holder_cgroup"), "/system.slice/calico.service");
    assert!(find(&out, "iptables.lock_contention", "pid 78").is_none());
    assert_eq!(out.status, collectors::Status::Degraded(
        "cannot read /proc/1/ns/net (node-doctor needs hostPID and CAP_SYS_PTRACE to compare namespaces)".into()
    ));
}

/// Waiters queued on consecutive samples with only short holds: `iptables.lock_waiters`.
#[test]
fn queued_waiters_without_a_long_hold_warn() {
    let h = legacy_node();
    h.write("/run/xtables.lock", "");
    let id = proc_locks_id(&h.path("/run/xtables.lock"));
    h.write("/proc/10/comm", "iptables\n");
    h.write("/proc/11/comm", "kube-proxy\n");
    let mut c = IptablesCollector::new(h.node(), fast_config());
    // The lock is staged before the first collection: watch it from now on.
    c.start_sampler();
    // Holders change every sample (short holds) while pid 11 keeps waiting.
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_millis(500) {
        replace(
            &h,
            "/proc/locks",
            format!(
                "1: FLOCK  ADVISORY  WRITE {} {id} 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 11 {id} 0 EOF\n",
                1000 + n
            ),
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(30));
    }
    // How many samples saw the queue depends on the sampler thread's timing; the lock's
    // /proc/locks id on the temp file's inode.
    let masks = ["# consecutive samples", "连续 # 次采样", id.as_str()];
    let out = crate::support::collect_masked(&mut c, &ctx(), &masks);
    let f =
        find(&out, "iptables.lock_waiters", "").unwrap_or_else(|| panic!("{:#?}", out.findings));
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.see_also, vec![see_also::XTABLES_LOCK_HELD]);
    assert_eq!(ev_str(f, "waiter_pids"), "11");
    assert!(out
        .findings
        .iter()
        .all(|f| f.id != "iptables.lock_contention"));
}

/// No lock file on the host: the collector says so instead of pretending all is well.
#[test]
fn missing_lock_file_degrades() {
    // pid 1's network view is not visible here: whether legacy iptables (and so a lock) is
    // in use is unknown, and the missing lock is a source that could not be looked at.
    let h = FakeHost::new();
    h.write("/proc/locks", "");
    let mut c = IptablesCollector::new(h.node(), fast_config());
    std::thread::sleep(Duration::from_millis(100));
    let out = crate::support::collect(&mut c, &ctx());
    let msg = out.status.message().unwrap_or_default().to_string();
    assert!(
        msg.contains("xtables lock not watched") && msg.contains("xtables.lock"),
        "{msg}"
    );
    assert!(!out.status.is_complete(), "{:?}", out.status);
    assert_eq!(metric(&out, "node_doctor_iptables_lock_held", None), 0.0);
}

/// An nft-only node: pid 1's network view lists no legacy table and there is no
/// `/run/xtables.lock` (legacy iptables never ran). Nothing can contend for a lock that does
/// not exist: the collector is complete, and its message says why.
#[test]
fn an_nft_only_node_without_a_lock_file_is_complete_with_a_note() {
    let h = FakeHost::new();
    h.write("/proc/locks", "");
    h.write("/proc/1/net/ip_tables_names", "");
    h.write("/proc/1/net/ip6_tables_names", "");
    let mut c = IptablesCollector::new(h.node(), fast_config());
    std::thread::sleep(Duration::from_millis(100));
    let out = crate::support::collect(&mut c, &ctx());
    assert!(
        matches!(&out.status, Status::Noted(m) if m.contains("nft-only") && m.contains("xtables.lock")),
        "{:?}",
        out.status
    );
    assert_eq!(out.status.as_str(), "ok");
    assert!(
        out.findings.iter().all(|f| f.severity == Severity::Info),
        "{:#?}",
        out.findings
    );
    // Legacy tables appear (kube-proxy in legacy mode) and still no lock: could not look.
    h.write("/proc/1/net/ip_tables_names", "filter\nnat\n");
    let out = crate::support::collect(&mut c, &ctx());
    assert!(
        matches!(out.status, Status::Degraded(_)),
        "{:?}",
        out.status
    );
}

/// Stages a process on the fake host: comm, cmdline, cgroup, namespace links.
fn fake_proc(h: &FakeHost, pid: u32, comm: &str, net: u64, mnt: u64, cgroup: &str) {
    h.write(&format!("/proc/{pid}/comm"), format!("{comm}\n"));
    h.write(&format!("/proc/{pid}/cmdline"), format!("{comm}\0"));
    h.write(&format!("/proc/{pid}/cgroup"), cgroup);
    h.mkdir(&format!("/proc/{pid}/ns"));
    h.symlink(&format!("net:[{net}]"), &format!("/proc/{pid}/ns/net"));
    h.symlink(&format!("mnt:[{mnt}]"), &format!("/proc/{pid}/ns/mnt"));
}

/// The handbook's "其它组件未挂载 iptables 锁导致并发写入失败": a hostNetwork kube-proxy pod
/// with its own `/run/xtables.lock`, next to a kube-router pod that mounts the host's file (same
/// inode), a calico-node in its own network namespace, a node-binary kube-proxy in the host's
/// mount namespace, and an iptables-restore child sharing kube-proxy's mount namespace
/// (reported once).
#[test]
fn host_network_pod_without_the_lock_mount_is_named() {
    const HOST_NET: u64 = 4026531840;
    const HOST_MNT: u64 = 4026531841;
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    // Legacy tables in the host's namespace: the lock has users (without them nothing is
    // compared: `a_node_without_legacy_tables_compares_no_process`).
    h.write("/proc/1/net/ip_tables_names", "nat\nfilter\n");
    fake_proc(&h, 1, "systemd", HOST_NET, HOST_MNT, "0::/init.scope\n");
    let kp_cg = format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{CID}.scope\n", POD_UID.replace('-', "_"));
    fake_proc(&h, 2100, "kube-proxy", HOST_NET, 4026532500, &kp_cg);
    h.write("/proc/2100/root/run/xtables.lock", "");
    fake_proc(&h, 2101, "iptables-restor", HOST_NET, 4026532500, &kp_cg);
    // kube-router mounts the host file: a hard link is the same inode.
    fake_proc(
        &h,
        2200,
        "kube-router",
        HOST_NET,
        4026532600,
        "0::/kubepods.slice/x\n",
    );
    h.mkdir("/proc/2200/root/run");
    std::fs::hard_link(
        h.path("/run/xtables.lock"),
        h.path("/proc/2200/root/run/xtables.lock"),
    )
    .unwrap();
    // calico-node in its own network namespace: not the handbook's case.
    fake_proc(&h, 2300, "calico-node", 4026532999, 4026532700, "0::/x\n");
    // kube-proxy installed as a node binary: the host's own mount namespace, nothing to mount
    // (its root is not staged, so it would look lockless if it were wrongly compared).
    fake_proc(
        &h,
        2000,
        "kube-proxy",
        HOST_NET,
        HOST_MNT,
        "0::/system.slice/kube-proxy.service\n",
    );
    // A kube-router that exited while being looked at: its root is gone, it is not reported.
    fake_proc(&h, 2600, "kube-router", HOST_NET, 4026533000, "0::/x\n");
    // A host process that is not an iptables user.
    fake_proc(&h, 2400, "nginx", HOST_NET, 4026532800, "0::/x\n");
    // flanneld in a pod without any lock file at all.
    fake_proc(&h, 2500, "flanneld", HOST_NET, 4026532900, "0::/x\n");
    h.mkdir("/proc/2500/root/run");
    // containerd node: the pod log directory names the kube-proxy pod; no container symlink,
    // so the container name stays unknown.
    h.mkdir(&format!(
        "/var/log/pods/kube-system_kube-proxy-x7k2p_{POD_UID}/kube-proxy"
    ));

    let mut c = IptablesCollector::new(h.node(), fast_config());
    let out = crate::support::collect(&mut c, &ctx());
    let gaps: Vec<&Finding> = out
        .findings
        .iter()
        .filter(|f| f.id == "iptables.lock_not_mounted")
        .collect();
    assert_eq!(gaps.len(), 2, "{gaps:#?}");
    let f = find(&out, "iptables.lock_not_mounted", &format!("pod {POD_UID}")).unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.see_also, vec![see_also::XTABLES_LOCK_NOT_MOUNTED]);
    assert_eq!(ev_f64(f, "process_pid"), 2100.0);
    assert_eq!(ev_str(f, "process_comm"), "kube-proxy");
    assert_eq!(ev_str(f, "process_container_id"), CID);
    assert_eq!(ev_str(f, "process_pod_namespace"), "kube-system");
    assert_eq!(ev_str(f, "process_pod_name"), "kube-proxy-x7k2p");
    assert!(!f.evidence.contains_key("process_container_name"));
    assert!(
        f.summary.en.starts_with(&format!(
            "kube-proxy[2100] (pod kube-system/kube-proxy-x7k2p, pod UID {POD_UID})"
        )),
        "{}",
        f.summary.en
    );
    assert!(f
        .remediation
        .commands
        .contains(&"kubectl -n kube-system describe pod kube-proxy-x7k2p".to_string()));
    let host_ino = std::fs::metadata(h.path("/run/xtables.lock"))
        .unwrap()
        .ino();
    assert_eq!(ev_str(f, "host_lock_inode"), host_ino.to_string());
    assert_ne!(ev_str(f, "pod_lock_inode"), host_ino.to_string());
    let yaml = &f.remediation.steps[0].en;
    for line in [
        "- mountPath: /run/xtables.lock",
        "  name: xtables-lock",
        "- hostPath:",
        "    path: /run/xtables.lock",
        "    type: FileOrCreate",
    ] {
        assert!(yaml.contains(line), "{yaml}");
    }
    assert!(f.remediation.commands.contains(
        &"stat -c '%d:%i %n' /run/xtables.lock /proc/2100/root/run/xtables.lock".to_string()
    ));
    assert_eq!(
        f.remediation.source.as_ref().unwrap().section,
        "其它组件未挂载 iptables 锁导致并发写入失败"
    );
    assert!(
        f.summary
            .zh
            .contains("其挂载命名空间中的 /run/xtables.lock 是另一个文件"),
        "{}",
        f.summary.zh
    );
    let fl = find(&out, "iptables.lock_not_mounted", "pid 2500").unwrap();
    assert_eq!(ev_str(fl, "pod_lock_inode"), "missing");
    assert!(
        fl.summary
            .zh
            .contains("其挂载命名空间中根本没有 /run/xtables.lock"),
        "{}",
        fl.summary.zh
    );
    assert_eq!(out.status, collectors::Status::Ok);
}

const LOCK_NO_WAIT: &str = "E0501 10:00:00.000000       1 proxier.go:1422] Failed to execute iptables-restore: exit status 4 (Another app is currently holding the xtables lock. Perhaps you want to use the -w option?)";
const LOCK_TIMEOUT: &str = "E0501 10:00:01.000000       1 proxier.go:1123] Failed to ensure that filter chain KUBE-SERVICES exists: error creating chain \"KUBE-EXTERNAL-SERVICES\": exit status 4: Another app is currently holding the xtables lock. Stopped waiting after 5s.";
pub(crate) const RESTORE_FAILED: &str = "E0501 10:00:02.000000       1 proxier.go:1422] Failed to execute iptables-restore: exit status 1 (iptables-restore: line 42 failed)";
const MARK_DROP: &str = "E0501 10:00:03.000000       1 proxier.go:1422] Failed to execute iptables-restore: exit status 2 (iptables-restore v1.8.4 (legacy): Couldn't load target `KUBE-MARK-DROP':No such file or directory";
const STREAM: &str = "E0501 10:00:04.000000       1 reflector.go:127] Failed to list *core.Endpoints: Stream error http2.StreamError{StreamID:0xea1, Code:0x2, Cause:error(nil)} when reading response body, may be caused by closed connection. Please retry.";
const PANIC_NIL: &str = "panic: runtime error: invalid memory address or nil pointer dereference";
const PANIC_SLICE: &str = "E0501 10:00:06.000000       1 runtime.go:69] Observed a panic: \"slice bounds out of range\" (runtime error: slice bounds out of range)";

pub(crate) fn rfc3339_now(offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + offset_secs;
    let out = Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("@{now}"),
            "+%Y-%m-%dT%H:%M:%S.123456789Z",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn cri(ts: &str, msg: &str) -> String {
    format!("{ts} stderr F {msg}\n")
}

fn docker(ts: &str, msg: &str) -> String {
    format!(
        "{}\n",
        serde_json::json!({"log": format!("{msg}\n"), "stream": "stderr", "time": ts})
    )
}

const KP_LOG: &str = "/var/log/pods/kube-system_kube-proxy-x7k2p_9a8b7c6d-1111-2222-3333-444455556666/kube-proxy/0.log";

/// Each handbook message in kube-proxy's CRI log maps to its finding, severity, section and
/// upgrade path.
#[test]
fn every_kube_proxy_message_maps_to_its_fix() {
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    let ts = rfc3339_now(-60);
    let mut log = cri(
        &ts,
        "I0501 10:00:00.000000       1 server.go:650] Version: v1.18.4-tke.6",
    );
    for m in [
        LOCK_NO_WAIT,
        LOCK_TIMEOUT,
        RESTORE_FAILED,
        MARK_DROP,
        STREAM,
        PANIC_NIL,
        PANIC_SLICE,
    ] {
        log.push_str(&cri(&ts, m));
    }
    log.push_str(&cri(&ts, LOCK_NO_WAIT));
    h.write(KP_LOG, &log);
    // A pod that is not kube-proxy is not read.
    h.write(
        "/var/log/pods/default_web-1_0000abcd-0000-4000-8000-00000000abcd/web/0.log",
        cri(&ts, LOCK_NO_WAIT),
    );
    let mut c = IptablesCollector::new(h.node(), fast_config());
    let out = crate::support::collect(&mut c, &ctx());
    let expect = [
        (
            "iptables.kube_proxy_lock_error",
            "lock_no_wait",
            Severity::Warning,
            "iptables-restore 版本低导致不支持阻塞写入",
            "v1.12.4-tke.31",
            2.0,
            Some(see_also::XTABLES_LOCK),
        ),
        (
            "iptables.kube_proxy_lock_error",
            "lock_timeout",
            Severity::Critical,
            "其它组件持有 iptables 锁时间过长",
            "v1.3.2",
            1.0,
            Some(see_also::XTABLES_LOCK_HELD),
        ),
        (
            "iptables.kube_proxy_restore_failed",
            "",
            Severity::Critical,
            "其它组件未挂载 iptables 锁导致并发写入失败",
            "FileOrCreate",
            1.0,
            Some(see_also::XTABLES_LOCK_NOT_MOUNTED),
        ),
        (
            "iptables.backend_mismatch",
            "",
            Severity::Critical,
            "kube-proxy 未能正确适配节点 iptables 后端",
            "v1.16.3-tke.28",
            1.0,
            Some(see_also::IPTABLES_BACKEND_MISMATCH),
        ),
        (
            "iptables.kube_proxy_apiserver_stream_error",
            "",
            Severity::Warning,
            "kube-proxy 到 kube-apiserver 连接异常",
            "v1.18.4-tke.26",
            1.0,
            Some(see_also::KUBE_PROXY_STALE_CONNECTION),
        ),
        (
            "iptables.kube_proxy_panic",
            "nil_pointer",
            Severity::Warning,
            "kube-proxy 首次启动发生 panic，重启后正常",
            "v1.18.4-tke.26",
            1.0,
            Some(see_also::KUBE_PROXY_PANIC_NIL_POINTER),
        ),
        (
            "iptables.kube_proxy_panic",
            "slice_bounds",
            Severity::Critical,
            "kube-proxy 不间断 panic",
            "v1.14.3-tke.27",
            1.0,
            Some(see_also::KUBE_PROXY_PANIC_SLICE_BOUNDS),
        ),
    ];
    for (id, subject, sev, section, fix, count, key) in expect {
        let f = find(&out, id, subject)
            .unwrap_or_else(|| panic!("{id}/{subject} missing: {:#?}", out.findings));
        assert_eq!(f.severity, sev, "{id}/{subject}");
        // The catalogue entry `node-doctor explain` gives for the same message.
        assert_eq!(
            f.see_also,
            key.into_iter().collect::<Vec<_>>(),
            "{id}/{subject}"
        );
        assert_eq!(f.remediation.source.as_ref().unwrap().section, section);
        assert!(
            f.remediation
                .steps
                .iter()
                .any(|s| s.en.contains(fix) && s.zh.contains(fix)),
            "{id}/{subject}: {:#?}",
            f.remediation.steps
        );
        assert_eq!(ev_f64(f, "matches_recent"), count, "{id}/{subject}");
        assert_eq!(ev_str(f, "log_file"), KP_LOG);
        assert_eq!(ev_str(f, "last_seen"), ts);
        assert!(f
            .remediation
            .commands
            .iter()
            // The pattern is one argument, quoted when it holds spaces.
            .any(|c| c.starts_with("grep -cE ") && c.ends_with(&format!(" {KP_LOG}"))));
    }
    let no_wait = find(&out, "iptables.kube_proxy_lock_error", "lock_no_wait").unwrap();
    assert!(ev_str(no_wait, "last_message").contains("Perhaps you want to use the -w option"));
    assert_eq!(
        metric(
            &out,
            "node_doctor_iptables_kube_proxy_errors_total",
            Some("lock_no_wait")
        ),
        2.0
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_iptables_kube_proxy_errors_total",
            Some("panic_slice_bounds")
        ),
        1.0
    );
}

/// Offsets are remembered (a line is counted once), appended lines are read, a rotated file
/// (new inode) and a truncated file are read from the start, and old messages count in the
/// counter but raise no finding.
#[test]
fn log_scanning_is_incremental_and_survives_rotation() {
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    let old = rfc3339_now(-3 * 3600);
    let ts = rfc3339_now(-5);
    h.write(KP_LOG, cri(&old, LOCK_TIMEOUT));
    let mut c = IptablesCollector::new(h.node(), fast_config());
    let out = crate::support::collect(&mut c, &ctx());
    let kind = Some("lock_timeout");
    let total = |o: &Collection| metric(o, "node_doctor_iptables_kube_proxy_errors_total", kind);
    assert_eq!(total(&out), 1.0);
    assert!(
        find(&out, "iptables.kube_proxy_lock_error", "lock_timeout").is_none(),
        "3 h old"
    );
    // Nothing new: nothing counted twice.
    assert_eq!(total(&crate::support::collect(&mut c, &ctx())), 1.0);
    // Appended: a recent one, plus half a line that is completed later.
    let path = h.path(KP_LOG);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    let line = cri(&ts, LOCK_TIMEOUT);
    f.write_all(line.as_bytes()).unwrap();
    f.write_all(&line.as_bytes()[..40]).unwrap();
    let out = crate::support::collect(&mut c, &ctx());
    assert_eq!(total(&out), 2.0);
    let fnd = find(&out, "iptables.kube_proxy_lock_error", "lock_timeout").expect("recent");
    assert_eq!(ev_f64(fnd, "matches_recent"), 1.0);
    f.write_all(&line.as_bytes()[40..]).unwrap();
    drop(f);
    assert_eq!(total(&crate::support::collect(&mut c, &ctx())), 3.0);
    // Rotation: the kubelet renames 0.log and starts a new file (new inode).
    std::fs::rename(&path, path.with_extension("log.20240501-100000")).unwrap();
    h.write(KP_LOG, cri(&ts, LOCK_TIMEOUT));
    assert_eq!(total(&crate::support::collect(&mut c, &ctx())), 4.0);
    // copytruncate: same inode, shorter than the offset.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::write(&path, cri(&ts, LOCK_NO_WAIT)).unwrap();
    let out = crate::support::collect(&mut c, &ctx());
    assert_eq!(total(&out), 4.0);
    assert_eq!(
        metric(
            &out,
            "node_doctor_iptables_kube_proxy_errors_total",
            Some("lock_no_wait")
        ),
        1.0
    );
}

/// A kube-proxy container of docker (json-file log, found by its kube-proxy label), reached both
/// directly and through a dockershim symlink under /var/log/pods: read once, in json format.
#[test]
fn docker_json_file_logs_of_kube_proxy_are_read_once() {
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    let ts = rfc3339_now(-30);
    let dir = format!("/var/lib/docker/containers/{CID}");
    h.write(
        &format!("{dir}/config.v2.json"),
        r#"{"ID":"x","Config":{"Labels":{"io.kubernetes.container.name":"kube-proxy","io.kubernetes.pod.namespace":"kube-system"}}}"#,
    );
    let json_log = format!("{dir}/{CID}-json.log");
    h.write(
        &json_log,
        docker(&ts, RESTORE_FAILED) + &docker(&ts, "I0501 fine"),
    );
    h.symlink(
        &json_log,
        "/var/log/pods/kube-system_kube-proxy-abcde_1234abcd-0000-4000-8000-00000000abcd/kube-proxy/0.log",
    );
    // Another container with the same message is ignored.
    let other = "1111111111111111111111111111111111111111111111111111111111111111";
    h.write(
        &format!("/var/lib/docker/containers/{other}/config.v2.json"),
        r#"{"Config":{"Labels":{"io.kubernetes.container.name":"coredns"}}}"#,
    );
    h.write(
        &format!("/var/lib/docker/containers/{other}/{other}-json.log"),
        docker(&ts, RESTORE_FAILED),
    );
    let mut c = IptablesCollector::new(h.node(), fast_config());
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "iptables.kube_proxy_restore_failed", "").expect("finding");
    assert_eq!(ev_f64(f, "matches_total"), 1.0);
    assert_eq!(ev_str(f, "last_seen"), ts);
    assert!(ev_str(f, "last_message").ends_with("(iptables-restore: line 42 failed)"));
}

/// Legacy tables loaded while the host's iptables points at the nft backend: a mix, reported,
/// and its evidence joins the KUBE-MARK-DROP log finding.
#[test]
fn legacy_tables_on_an_nft_host() {
    let h = FakeHost::new();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    // Tables are per network namespace: pid 1's are the host's; /proc/net is the reader's own
    // (a pod without hostNetwork has none) and must not be what is reported.
    h.write("/proc/1/net/ip_tables_names", "nat\nfilter\n");
    h.write("/proc/net/ip_tables_names", "");
    h.write("/usr/sbin/xtables-nft-multi", "");
    h.symlink("xtables-nft-multi", "/usr/sbin/iptables-nft");
    h.symlink("/usr/sbin/iptables-nft", "/etc/alternatives/iptables");
    h.symlink("/etc/alternatives/iptables", "/usr/sbin/iptables");
    h.write(KP_LOG, cri(&rfc3339_now(-1), MARK_DROP));
    let mut c = IptablesCollector::new(h.node(), fast_config());
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "iptables.backend_mixed", "").expect("mix");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.see_also, vec![see_also::IPTABLES_BACKEND_MISMATCH]);
    assert_eq!(ev_str(f, "host_iptables_backend"), "nft");
    assert_eq!(ev_str(f, "legacy_tables"), "nat,filter");
    assert_eq!(
        ev_str(f, "host_iptables_links"),
        "/etc/alternatives/iptables -> /usr/sbin/iptables-nft -> xtables-nft-multi"
    );
    let m = find(&out, "iptables.backend_mismatch", "").expect("log finding");
    assert_eq!(ev_str(m, "host_iptables_backend"), "nft");
    assert_eq!(
        metric(&out, "node_doctor_iptables_legacy_tables", None),
        2.0
    );
    // A legacy host with legacy tables is consistent.
    let h2 = FakeHost::new();
    h2.write("/run/xtables.lock", "");
    h2.write("/proc/locks", "");
    h2.write("/proc/1/net/ip_tables_names", "filter\n");
    h2.write("/usr/sbin/xtables-multi", "");
    h2.symlink("xtables-multi", "/usr/sbin/iptables");
    let out = crate::support::collect(
        &mut IptablesCollector::new(h2.node(), fast_config()),
        &ctx(),
    );
    assert!(find(&out, "iptables.backend_mixed", "").is_none());
    let info = find(&out, "iptables.backend", "").expect("backend info");
    assert_eq!(info.severity, Severity::Info);
    assert_eq!(ev_str(info, "host_iptables_backend"), "legacy");
    assert_eq!(ev_str(info, "legacy_tables"), "filter");
    // Nothing known (no binary, no ip_tables module): no info finding either.
    let h3 = FakeHost::new();
    h3.write("/run/xtables.lock", "");
    h3.write("/proc/locks", "");
    let out = crate::support::collect(
        &mut IptablesCollector::new(h3.node(), fast_config()),
        &ctx(),
    );
    assert!(find(&out, "iptables.backend", "").is_none());
    // ip_tables loaded but no table in use (this machine, kernel 6.18, nft host): the
    // evidence says so rather than being an empty string.
    let h4 = FakeHost::new();
    h4.write("/run/xtables.lock", "");
    h4.write("/proc/locks", "");
    h4.write("/proc/1/net/ip_tables_names", "");
    let out = crate::support::collect(
        &mut IptablesCollector::new(h4.node(), fast_config()),
        &ctx(),
    );
    let info = find(&out, "iptables.backend", "").expect("backend info");
    assert_eq!(
        ev_str(info, "legacy_tables"),
        "none (ip_tables loaded, no table in use)"
    );
    // No iptables binary under the root: the backend is unknown, and the summary says it
    // could not be determined rather than "uses the unknown backend".
    assert!(
        info.summary
            .en
            .starts_with("The host's iptables backend could not be determined"),
        "{}",
        info.summary.en
    );
    assert!(
        info.summary.zh.starts_with("无法确定"),
        "{}",
        info.summary.zh
    );
}

/// Kills and reaps a child process when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A fake host root whose `proc` is the real `/proc`, so the collector reads the real kernel's
/// lock table and processes while the lock file lives in the temp root.
fn real_proc_host() -> FakeHost {
    let h = FakeHost::new();
    h.symlink("/proc", "/proc");
    h.write("/run/xtables.lock", "");
    h
}

/// Real kernel: `flock` holds the lock file for 6 s while a second `flock` waits on it; the
/// collector (default 250 ms sampler, 2 s / 5 s thresholds) names the holder, critical, with
/// the hold at least 5 s, and the waiter.
#[test]
fn real_flock_holder_and_waiter() {
    if !root_or_skip("real_flock_holder_and_waiter") {
        return;
    }
    if !have("flock") {
        collectors::skip!("SKIP real_flock_holder_and_waiter: needs flock (util-linux)");
        return;
    }
    let h = real_proc_host();
    let lock = h.path("/run/xtables.lock");
    let node = NodeNetns::start(false);
    let cfg = IptablesConfig {
        // A node namespace of the test's own without legacy tables: what the watch sees must
        // not depend on this machine's namespace (the nft backend's node).
        reference_pid: node.pid(),
        ..IptablesConfig::default()
    };
    let mut c = IptablesCollector::new(h.node(), cfg);
    // The lock is staged before the first collection: watch it from now on.
    c.start_sampler();
    let holder = ChildGuard(
        Command::new("flock")
            .arg("-x")
            .arg(&lock)
            .args(["sleep", "6"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(400));
    let waiter = ChildGuard(
        Command::new("flock")
            .args(["-x", "-w", "20"])
            .arg(&lock)
            .arg("true")
            .spawn()
            .unwrap(),
    );
    // Collect once the 6 s hold is over (as `node-doctor check --interval 6s` would): the
    // window keeps the finished hold and the waiter that queued behind it.
    let mut holder = holder;
    let start = Instant::now();
    while holder.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "flock holder did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let out = c.collect(&ctx());
    let subject = format!("pid {}", holder.0.id());
    let f = find(&out, "iptables.lock_contention", &subject)
        .unwrap_or_else(|| panic!("no finding for {subject}: {:#?}", out.findings));
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
    assert!(ev_f64(f, "hold_seconds") >= 5.0, "{f:#?}");
    assert_eq!(ev_str(f, "still_held"), "false");
    assert_eq!(ev_f64(f, "holder_pid"), f64::from(holder.0.id()));
    assert_eq!(ev_str(f, "holder_comm"), "flock");
    assert!(ev_str(f, "holder_cmdline").ends_with("sleep 6"));
    assert_eq!(ev_str(f, "waiter_pids"), waiter.0.id().to_string());
    assert!(ev_f64(f, "waiters_max") >= 1.0);
    assert!(metric(&out, "node_doctor_iptables_lock_longest_hold_seconds", None) >= 5.0);
    assert!(metric(&out, "node_doctor_iptables_lock_waiters", None) >= 1.0);
    drop(waiter);
    drop(holder);
}

/// Real kernel: a process named kube-proxy in a new mount namespace (`unshare -m`) sharing the
/// network namespace of the node (here one the test makes, `unshare -n`, whose process is the
/// reference pid), with its own tmpfs file at /run/xtables.lock, is reported as not mounting
/// the node's lock once the namespace has a legacy table (`iptables-legacy -L` makes
/// `filter`), and not looked at while it has none (the nft backend takes no lock).
#[test]
fn real_unshared_kube_proxy_without_the_host_lock() {
    if !root_or_skip("real_unshared_kube_proxy_without_the_host_lock") {
        return;
    }
    if !have("unshare") || !have("nsenter") || !have("iptables-legacy") {
        collectors::skip!(
            "SKIP real_unshared_kube_proxy_without_the_host_lock: needs unshare, nsenter (util-linux) and iptables-legacy"
        );
        return;
    }
    for legacy in [false, true] {
        unshared_kube_proxy(legacy);
    }
}

/// The node's network namespace, made by the test (`unshare -n`) and held by a sleeping
/// process, with the legacy `filter` table (`iptables-legacy -L` creates it, as an old
/// kube-proxy's first run does) or none: what the collector finds in the host's namespace
/// never depends on what earlier tests or sessions left in this machine's own.
struct NodeNetns {
    holder: ChildGuard,
}

impl NodeNetns {
    fn start(legacy: bool) -> NodeNetns {
        let script = if legacy {
            "iptables-legacy -w -t filter -L -n >/dev/null && exec sleep 60"
        } else {
            "exec sleep 60"
        };
        let holder = ChildGuard(
            Command::new("unshare")
                .args(["-n", "sh", "-c", script])
                .spawn()
                .unwrap(),
        );
        let pid = holder.0.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n"
        {
            assert!(Instant::now() < deadline, "the node process did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let tables =
            std::fs::read_to_string(format!("/proc/{pid}/net/ip_tables_names")).unwrap_or_default();
        assert_eq!(tables.contains("filter"), legacy, "{tables:?}");
        NodeNetns { holder }
    }

    /// The holder's pid: the collector's `reference_pid`, whose namespace is the node's.
    fn pid(&self) -> u32 {
        self.holder.0.id()
    }
}

fn unshared_kube_proxy(legacy: bool) {
    let h = real_proc_host();
    // The node: a network namespace of its own, with a legacy table or none.
    let node = NodeNetns::start(legacy);
    let node_pid = node.pid();
    let bin = tempfile::tempdir().unwrap();
    let kp = bin.path().join("kube-proxy");
    std::fs::copy("/bin/sleep", &kp).unwrap();
    let script = format!(
        "mount -t tmpfs node-doctor-test /run && touch /run/xtables.lock && exec {} 30",
        kp.display()
    );
    let child = ChildGuard(
        Command::new("nsenter")
            .arg(format!("--net=/proc/{node_pid}/ns/net"))
            .args([
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let pid = loop {
        // nsenter execs unshare, which forks nothing: the same pid runs kube-proxy.
        let pid = child.0.id();
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default()
            == "kube-proxy\n"
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "kube-proxy did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let cfg = IptablesConfig {
        reference_pid: node_pid,
        ..IptablesConfig::default()
    };
    let mut c = IptablesCollector::new(h.node(), cfg);
    let out = c.collect(&ctx());
    if !legacy {
        assert!(
            !out.findings
                .iter()
                .any(|f| f.id == "iptables.lock_not_mounted"),
            "{:#?}",
            out.findings
        );
        drop(child);
        drop(node);
        return;
    }
    let f = out
        .findings
        .iter()
        .find(|f| {
            f.id == "iptables.lock_not_mounted"
                && f.evidence.get("process_pid") == Some(&Evidence::Int(i64::from(pid)))
        })
        .unwrap_or_else(|| {
            panic!(
                "pid {pid} not reported: {:#?} {:?}",
                out.findings, out.status
            )
        });
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(ev_str(f, "process_comm"), "kube-proxy");
    let host_ino = std::fs::metadata(h.path("/run/xtables.lock"))
        .unwrap()
        .ino();
    assert_eq!(ev_str(f, "host_lock_inode"), host_ino.to_string());
    assert_ne!(ev_str(f, "pod_lock_inode"), "missing");
    assert!(f.remediation.commands.contains(&format!(
        "stat -c '%d:%i %n' /run/xtables.lock /proc/{pid}/root/run/xtables.lock"
    )));
    drop(child);
}

/// A node with legacy tables, `idle` idle processes in the host's namespaces and, as pid
/// 2200, `comm` in a hostNetwork pod (a mount namespace of its own) whose
/// `/run/xtables.lock` is the host's file when `shares_lock`, else a file of its own.
fn legacy_node_with_a_host_network_pod(idle: u32, comm: &str, shares_lock: bool) -> FakeHost {
    const HOST_NET: u64 = 4026531840;
    const HOST_MNT: u64 = 4026531841;
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 1.00\n");
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    crate::runtime::idle_processes(&h, 1, 1, HOST_NET, HOST_MNT);
    h.write("/proc/1/net/ip_tables_names", "filter\n");
    crate::runtime::idle_processes(&h, 3000, idle, HOST_NET, HOST_MNT);
    crate::runtime::process(&h, 2200, comm, &format!("/usr/local/bin/{comm}"), 100);
    h.mkdir("/proc/2200/ns");
    h.symlink(&format!("net:[{HOST_NET}]"), "/proc/2200/ns/net");
    h.symlink("mnt:[4026532600]", "/proc/2200/ns/mnt");
    h.mkdir("/proc/2200/root/run");
    let pod_lock = h.path("/proc/2200/root/run/xtables.lock");
    if shares_lock {
        std::fs::hard_link(h.path("/run/xtables.lock"), pod_lock).unwrap();
    } else {
        std::fs::write(pod_lock, "").unwrap();
    }
    h
}

/// Cost and escalation (docs/collectors/iptables.md): the comparison of lock files goes
/// through the shared process table. On a node with 200 more processes in the host's
/// namespaces and a hostNetwork kube-router pod that mounts the host's lock, the first cycle
/// reads namespace links (no `stat`), the second lists the table (one `stat` of each), and a
/// cycle after those reads pid 1's two namespace links and its table lists, and the lock
/// file seen from the one process in a mount namespace of its own: nothing of the others.
#[test]
fn a_quiet_node_reads_no_file_of_other_processes() {
    let h = legacy_node_with_a_host_network_pod(200, "kube-router", true);
    let host = h.node();
    let config = IptablesConfig {
        mount_scan_reuse: Duration::ZERO,
        ..fast_config()
    };
    let mut c = IptablesCollector::new(host.clone(), config);
    // Only the backend's info finding (legacy tables on a host whose binary is unknown).
    let problems = |c: &Collection| -> Vec<String> {
        c.findings
            .iter()
            .filter(|f| f.id != "iptables.backend")
            .map(|f| f.id.clone())
            .collect()
    };
    let procs = host.processes();
    let first = c.collect(&ctx());
    assert!(problems(&first).is_empty(), "{:#?}", first.findings);
    let after_first = host.per_process_paths();
    assert!(
        after_first >= 200,
        "the first cycle reads every process's links: {after_first}"
    );
    assert_eq!(procs.examined(), 0, "and no stat: {after_first}");
    let second = c.collect(&ctx());
    assert!(problems(&second).is_empty(), "{:#?}", second.findings);
    assert!(procs.examined() >= 200, "the second examines every process");
    let after_second = host.per_process_paths();
    let third = c.collect(&ctx());
    assert!(problems(&third).is_empty(), "{:#?}", third.findings);
    assert_eq!(third.status, first.status);
    // Pid 1's two namespace links, its IPv4 table list twice (legacy in use: the IPv6 one is
    // not needed; then the backend's look), and the lock file seen from kube-router.
    assert_eq!(host.per_process_paths() - after_second, 5);
}

/// `check` samples twice a second apart: the second sample reuses the first's comparison of
/// lock files (made less than `mount_scan_reuse` before, against the same host lock) and
/// reads no process's file; a new host lock file is compared again at once.
#[test]
fn a_second_sample_within_seconds_reuses_the_comparison() {
    // kube-proxy in a hostNetwork pod without the host's lock file.
    let h = legacy_node_with_a_host_network_pod(50, "kube-proxy", false);
    let host = h.node();
    let mut c = IptablesCollector::new(host.clone(), fast_config());
    let gaps = |c: &Collection| -> Vec<(String, String)> {
        c.findings
            .iter()
            .filter(|f| f.id == "iptables.lock_not_mounted")
            .map(|f| (f.subject.clone(), ev_str(f, "host_lock_inode").to_string()))
            .collect()
    };
    let first = c.collect(&ctx());
    let found = gaps(&first);
    assert_eq!(found.len(), 1, "{:#?}", first.findings);
    assert_eq!(found[0].0, "pid 2200");
    let before = host.per_process_paths();
    let second = c.collect(&ctx());
    assert_eq!(
        gaps(&second),
        found,
        "the same finding from the reused comparison"
    );
    // Pid 1's IPv4 table list (legacy in use, and the backend's look): no other process.
    assert_eq!(host.per_process_paths() - before, 2);
    // The host's lock file replaced (a new inode): compared again, against the new one.
    std::fs::remove_file(h.path("/run/xtables.lock")).unwrap();
    h.write("/run/xtables.lock", "");
    let new_ino = std::fs::metadata(h.path("/run/xtables.lock"))
        .unwrap()
        .ino();
    let third = c.collect(&ctx());
    let again = gaps(&third);
    assert_eq!(again.len(), 1, "{:#?}", third.findings);
    assert_eq!(again[0].1, new_ino.to_string());
}

/// Escalation (docs/collectors/iptables.md): only a legacy iptables user takes the xtables
/// lock, so on a node whose host network namespace has no legacy table (the nft backend) a
/// hostNetwork pod with its own lock file misses nothing: no process is looked at, and the
/// lock sampler does not read `/proc/locks` at start. Once a legacy table exists, the same
/// node is compared and the pod named.
#[test]
fn a_node_without_legacy_tables_compares_no_process() {
    const HOST_NET: u64 = 4026531840;
    const HOST_MNT: u64 = 4026531841;
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 1.00\n");
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    crate::runtime::idle_processes(&h, 1, 1, HOST_NET, HOST_MNT);
    h.write("/proc/1/net/ip_tables_names", "");
    crate::runtime::idle_processes(&h, 3000, 200, HOST_NET, HOST_MNT);
    fake_proc(
        &h,
        2100,
        "kube-proxy",
        HOST_NET,
        4026532500,
        "0::/kubepods.slice/x\n",
    );
    h.write("/proc/2100/root/run/xtables.lock", "");
    let host = h.node();
    let mut c = IptablesCollector::new(host.clone(), fast_config());
    std::thread::sleep(Duration::from_millis(100));
    let out = c.collect(&ctx());
    assert!(
        !out.findings
            .iter()
            .any(|f| f.id == "iptables.lock_not_mounted"),
        "{:#?}",
        out.findings
    );
    assert_eq!(locks_reads(&out), 0.0, "no read of /proc/locks at start");
    // Pid 1's two table lists when the sampler starts, and again in the cycle, with the
    // backend's look at the IPv4 list: nothing of any other process.
    assert_eq!(host.per_process_paths(), 5, "only pid 1's table lists");
    // kube-proxy switches to the legacy backend: the next cycle compares and names it.
    h.write("/proc/1/net/ip_tables_names", "nat\nfilter\n");
    let out = c.collect(&ctx());
    let gaps: Vec<&str> = out
        .findings
        .iter()
        .filter(|f| f.id == "iptables.lock_not_mounted")
        .map(|f| f.subject.as_str())
        .collect();
    assert_eq!(gaps, ["pid 2100"], "{:#?}", out.findings);
}

/// `node_doctor_iptables_lock_reads_total`: reads of `/proc/locks` since the sampler started.
fn locks_reads(c: &Collection) -> f64 {
    metric(c, "node_doctor_iptables_lock_reads_total", None)
}

/// Runs `flock -x <lock> <args…>` to its end and returns its pid.
fn flock_run(lock: &Path, args: &[&str]) -> u32 {
    let mut child = ChildGuard(
        Command::new("flock")
            .arg("-x")
            .arg(lock)
            .args(args)
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let st = child.0.wait().unwrap();
    assert!(st.success(), "flock {args:?}: {st}");
    pid
}

/// Real kernel, default thresholds (2 s warning, 5 s critical), default watch (inotify, 500 ms
/// open threshold): a 2 s hold (`flock -x <lock> sleep 2.05`) is caught and its holder named,
/// although the sampler read `/proc/locks` only while the lock file was open. The hold is
/// measured from the sampler's wake-up on the open to its read after the close; the 50 ms
/// over 2 s cover a late wake-up on the open on a loaded machine (a bare `sleep 2` holds
/// 2 s plus the few ms of fork, exec and exit, and is caught unless the wake-up on the open
/// was later than that). The 250 ms polling before the watch measured such a hold as 1.75–2 s.
#[test]
fn real_two_second_hold_is_caught_and_named_by_the_watch() {
    let test = "real_two_second_hold_is_caught_and_named_by_the_watch";
    if !root_or_skip(test) || !tools_or_skip(test, &["flock"]) {
        return;
    }
    let h = real_proc_host();
    let lock = h.path("/run/xtables.lock");
    let node = NodeNetns::start(false);
    let cfg = IptablesConfig {
        // A node namespace of the test's own without legacy tables: what the watch sees must
        // not depend on this machine's namespace (the nft backend's node).
        reference_pid: node.pid(),
        ..IptablesConfig::default()
    };
    let mut c = IptablesCollector::new(h.node(), cfg);
    std::thread::sleep(Duration::from_millis(200));
    let out = c.collect(&ctx());
    assert_eq!(metric(&out, "node_doctor_iptables_lock_inotify", None), 1.0);
    let before = locks_reads(&out);
    let pid = flock_run(&lock, &["sleep", "2.05"]);
    std::thread::sleep(Duration::from_millis(100));
    let out = c.collect(&ctx());
    let f = find(&out, "iptables.lock_contention", &format!("pid {pid}")).unwrap_or_else(|| {
        panic!(
            "2 s hold of pid {pid} not caught (longest hold {} s, {} reads): {:#?}",
            metric(&out, "node_doctor_iptables_lock_longest_hold_seconds", None),
            locks_reads(&out) - before,
            out.findings
        )
    });
    assert_eq!(f.severity, Severity::Warning, "{f:#?}");
    let held = ev_f64(f, "hold_seconds");
    assert!((2.0..3.0).contains(&held), "{f:#?}");
    assert_eq!(ev_str(f, "holder_comm"), "flock");
    assert!(ev_str(f, "holder_cmdline").ends_with("sleep 2.05"));
    assert_eq!(ev_str(f, "still_held"), "false");
    // One read of /proc/locks 500 ms after the open; then the holder was confirmed every
    // 250 ms through its fdinfo, and its close, the last open of the file, ended the hold
    // without another read.
    let reads = locks_reads(&out) - before;
    assert_eq!(reads, 1.0, "reads of /proc/locks");
    assert!(
        metric(
            &out,
            "node_doctor_iptables_lock_sampler_cpu_seconds_total",
            None
        ) >= 0.0
    );
}

/// Real kernel: a burst of short holds (each shorter than the 500 ms open threshold) costs no
/// read of `/proc/locks` and no per-process path: the sampler only counted opens and closes.
/// The node's network namespace is the test's own, once with a legacy table (one read of
/// `/proc/locks` at start, for a hold already in progress) and once without (no read at all:
/// the nft backend takes no lock), so the outcome never depends on this machine's own
/// namespace. The sampler's clock is the test's ([`TestClock`]): a hold lasts, for the
/// sampler, what the test says, however late a holder runs on a loaded machine (a `flock`
/// holding `sleep 0.2` once outlasted the 500 ms threshold when it was descheduled).
#[test]
fn real_short_holds_read_nothing() {
    let test = "real_short_holds_read_nothing";
    if !root_or_skip(test) || !tools_or_skip(test, &["flock", "unshare"]) {
        return;
    }
    short_holds_read_nothing(false);
    if have("iptables-legacy") {
        short_holds_read_nothing(true);
    } else {
        collectors::skip!(
            "SKIP {test} with a legacy table: needs iptables-legacy (Debian iptables)"
        );
    }
}

/// A clock that moves only when the test moves it (the lock sampler's, through
/// [`IptablesCollector::with_sampler_clock`]).
#[derive(Clone)]
struct TestClock(std::sync::Arc<std::sync::Mutex<Instant>>);

impl TestClock {
    fn new() -> TestClock {
        TestClock(std::sync::Arc::new(std::sync::Mutex::new(Instant::now())))
    }

    fn advance(&self, d: Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t += d;
    }

    fn sampler(&self) -> collectors::iptables::sampler::SamplerClock {
        let t = self.clone();
        std::sync::Arc::new(move || *t.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Opens the lock file and takes the lock (blocking) from this process.
fn take_lock(lock: &Path) -> nix::fcntl::Flock<std::fs::File> {
    let f = std::fs::File::open(lock).unwrap();
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .unwrap()
}

fn short_holds_read_nothing(legacy: bool) {
    let node = NodeNetns::start(legacy);
    let h = real_proc_host();
    let host = h.host();
    let lock = h.path("/run/xtables.lock");
    let cfg = IptablesConfig {
        reference_pid: node.pid(),
        ..IptablesConfig::default()
    };
    let clock = TestClock::new();
    let mut c = IptablesCollector::new(h.node(), cfg).with_sampler_clock(clock.sampler());
    std::thread::sleep(Duration::from_millis(200));
    let out = c.collect(&ctx());
    let before = locks_reads(&out);
    let at_start = if legacy { 1.0 } else { 0.0 };
    assert_eq!(before, at_start, "reads at start, legacy table: {legacy}");
    let paths = host.per_process_paths();
    // `flock` processes, however long the machine takes to run them: no time passes on the
    // sampler's clock.
    for _ in 0..20 {
        flock_run(&lock, &["true"]);
    }
    flock_run(&lock, &["sleep", "0.2"]);
    let a = ChildGuard(
        Command::new("flock")
            .arg("-x")
            .arg(&lock)
            .args(["sleep", "0.15"])
            .spawn()
            .unwrap(),
    );
    flock_run(&lock, &["true"]);
    drop(a);
    // Holds of this process that last what the test says: 200 ms (held for 700 ms of real
    // time: a sampler on any other clock would read), then two overlapping ones (150 ms, and
    // one waiting for it from its open), all within the threshold.
    let held = take_lock(&lock);
    clock.advance(Duration::from_millis(200));
    std::thread::sleep(Duration::from_millis(700));
    drop(held);
    let first = take_lock(&lock);
    let waiting = std::fs::File::open(&lock).unwrap();
    let waiter = std::thread::spawn(move || {
        drop(nix::fcntl::Flock::lock(
            waiting,
            nix::fcntl::FlockArg::LockExclusive,
        ));
    });
    clock.advance(Duration::from_millis(150));
    drop(first);
    waiter.join().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(host.per_process_paths(), paths, "no holder was looked up");
    let out = c.collect(&ctx());
    assert_eq!(locks_reads(&out), before, "short holds read /proc/locks");
    assert!(find(&out, "iptables.lock_contention", "").is_none());
    assert!(out
        .findings
        .iter()
        .all(|f| !f.id.starts_with("iptables.lock")));
    // The same watch on the same clock reads once a hold outlasts the threshold.
    let held = take_lock(&lock);
    let t0 = Instant::now();
    let mut reads = before;
    while reads == before && t0.elapsed() < Duration::from_secs(20) {
        clock.advance(Duration::from_millis(100));
        std::thread::sleep(Duration::from_millis(50));
        reads = locks_reads(&c.collect(&ctx()));
    }
    drop(held);
    assert!(reads > before, "a hold past the threshold was not read");
}

/// Without inotify (turned off here; the same path runs when inotify refuses, e.g. the
/// fs.inotify.max_user_instances limit), the sampler reads `/proc/locks` every period as
/// before, and the status says the lock is polled. The staged hold is written into a fake
/// `/proc/locks` without the lock file ever being opened: only polling can see it (the watch,
/// counting opens, would not).
#[test]
fn polling_fallback_reads_every_period_and_says_so() {
    for inotify in [false, true] {
        let h = legacy_node();
        h.write("/run/xtables.lock", "");
        h.write("/proc/locks", "");
        h.write("/proc/77/comm", "calico-node\n");
        let id = proc_locks_id(&h.path("/run/xtables.lock"));
        let cfg = IptablesConfig {
            lock_inotify: inotify,
            ..fast_config()
        };
        let mut c = IptablesCollector::new(h.node(), cfg);
        // The lock is staged before the first collection: watch it from now on.
        c.start_sampler();
        std::thread::sleep(Duration::from_millis(100));
        replace(
            &h,
            "/proc/locks",
            format!("1: FLOCK  ADVISORY  WRITE 77 {id} 0 EOF\n"),
        );
        std::thread::sleep(Duration::from_millis(600));
        let out = c.collect(&ctx());
        let msg = out.status.message().unwrap_or_default().to_string();
        let caught = find(&out, "iptables.lock_contention", "pid 77");
        if inotify {
            assert!(!msg.contains("polled"), "{msg}");
            assert_eq!(metric(&out, "node_doctor_iptables_lock_inotify", None), 1.0);
            assert_eq!(locks_reads(&out), 1.0, "only the read at start");
            assert!(caught.is_none(), "the file was never opened");
        } else {
            assert!(
                msg.contains(
                    "xtables lock polled through /proc/locks, not watched with inotify: \
                     inotify is turned off in the configuration"
                ),
                "{msg}"
            );
            assert_eq!(metric(&out, "node_doctor_iptables_lock_inotify", None), 0.0);
            assert!(locks_reads(&out) >= 10.0, "{}", locks_reads(&out));
            let f = caught.unwrap_or_else(|| panic!("{:#?}", out.findings));
            assert_eq!(ev_str(f, "holder_comm"), "calico-node");
        }
    }
}

/// Real kernel: the lock file's directory and the file appear after the collector started
/// (iptables creates the file on its first run), and the file is later replaced by another
/// one (rename over it): each time the watch follows, and a hold on the file of the moment is
/// caught.
#[test]
fn real_lock_file_that_appears_later_or_is_replaced_is_watched() {
    let test = "real_lock_file_that_appears_later_or_is_replaced_is_watched";
    if !root_or_skip(test) || !tools_or_skip(test, &["flock"]) {
        return;
    }
    let h = FakeHost::new();
    h.symlink("/proc", "/proc");
    let lock = h.path("/run/xtables.lock");
    let node = NodeNetns::start(false);
    let cfg = IptablesConfig {
        // A node namespace of the test's own without legacy tables: what the watch sees must
        // not depend on this machine's namespace (the nft backend's node).
        reference_pid: node.pid(),
        ..fast_config()
    };
    let mut c = IptablesCollector::new(h.node(), cfg);
    std::thread::sleep(Duration::from_millis(100));
    let out = c.collect(&ctx());
    let msg = out.status.message().unwrap_or_default().to_string();
    // No lock yet and no legacy table in the node's namespace: an nft-only node, complete
    // with a note (not exit bit 4) that says the directory is missing and how it is awaited.
    assert!(
        msg.contains("no xtables lock at /run/xtables.lock: its directory does not exist")
            && msg.contains("waiting for it: inotify on")
            && msg.contains("nft-only"),
        "{msg}"
    );
    assert!(out.status.is_complete(), "{:?}", out.status);
    assert_eq!(metric(&out, "node_doctor_iptables_lock_inotify", None), 0.0);
    // The directory appears (an event of the wait on the host root), then the file, created
    // by flock.
    h.mkdir("/run");
    std::thread::sleep(Duration::from_millis(200));
    let out = c.collect(&ctx());
    assert_eq!(metric(&out, "node_doctor_iptables_lock_inotify", None), 1.0);
    let pid = flock_run(&lock, &["sleep", "1"]);
    std::thread::sleep(Duration::from_millis(100));
    let out = c.collect(&ctx());
    let f = find(&out, "iptables.lock_contention", &format!("pid {pid}"))
        .unwrap_or_else(|| panic!("hold on the new file: {:#?}", out.findings));
    assert_eq!(f.severity, Severity::Critical, "{f:#?}");
    assert!(!out
        .status
        .message()
        .unwrap_or_default()
        .contains("not watched"));
    // Replaced by a new file (another inode): the watch moves to it.
    let tmp = h.path("/run/xtables.lock.new");
    std::fs::write(&tmp, "").unwrap();
    std::fs::rename(&tmp, &lock).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let pid = flock_run(&lock, &["sleep", "1"]);
    std::thread::sleep(Duration::from_millis(100));
    let out = c.collect(&ctx());
    let f = find(&out, "iptables.lock_contention", &format!("pid {pid}"))
        .unwrap_or_else(|| panic!("hold on the replaced file: {:#?}", out.findings));
    assert_eq!(
        ev_str(f, "lock_proc_locks_id"),
        proc_locks_id(&lock),
        "{f:#?}"
    );
}

/// Once the process table is listed, the lock-file comparison filters by name before it
/// reads anything (`comm` came with the table's one `stat` read): a process that is no
/// iptables user costs nothing more, even in the host's network namespace and a mount
/// namespace of its own (namespaces first would read its two links); a
/// multi-call binary (busybox) running `iptables-restore` is recognised by its first
/// argument and compared.
#[test]
fn the_name_filter_comes_first_and_knows_multi_call_binaries() {
    const HOST_NET: u64 = 4026531840;
    const HOST_MNT: u64 = 4026531841;
    let node = |with_nginx: bool| {
        let h = FakeHost::new();
        h.write("/run/xtables.lock", "");
        h.write("/proc/locks", "");
        let proc_in = |pid: u32, comm: &str, args: &str, mnt: u64| {
            crate::runtime::process(&h, pid, comm, args, 100);
            h.mkdir(&format!("/proc/{pid}/ns"));
            h.symlink(&format!("net:[{HOST_NET}]"), &format!("/proc/{pid}/ns/net"));
            h.symlink(&format!("mnt:[{mnt}]"), &format!("/proc/{pid}/ns/mnt"));
            h.mkdir(&format!("/proc/{pid}/root/run"));
        };
        proc_in(1, "systemd", "/sbin/init", HOST_MNT);
        h.write("/proc/1/net/ip_tables_names", "filter\n");
        // busybox running iptables-restore in a hostNetwork pod without the lock.
        proc_in(3100, "busybox", "iptables-restore --noflush", 4026532600);
        if with_nginx {
            // An nginx in the same situation: not an iptables user.
            proc_in(3200, "nginx", "nginx -g daemon off;", 4026532700);
        }
        let host = h.node();
        // An agent's table, listed by another collector before.
        host.processes().snapshot("another collector").unwrap();
        let before = host.per_process_paths();
        let mut c = IptablesCollector::new(host.clone(), fast_config());
        let out = c.collect(&ctx());
        let gaps: Vec<String> = out
            .findings
            .iter()
            .filter(|f| f.id == "iptables.lock_not_mounted")
            .map(|f| f.subject.clone())
            .collect();
        assert_eq!(gaps, ["pid 3100"], "{:#?}", out.findings);
        host.per_process_paths() - before
    };
    let without = node(false);
    let with = node(true);
    assert_eq!(with, without, "nginx cost {} paths", with - without);
}

/// Constructing the collector reads nothing and starts nothing (the registry rebuilds a
/// collector with its constructor after a panic): the lock sampler thread starts at the first
/// collection, which takes the read at start of a legacy node then, not at construction.
#[test]
fn the_sampler_starts_at_the_first_collection_not_at_construction() {
    let h = legacy_node();
    h.write("/run/xtables.lock", "");
    h.write("/proc/locks", "");
    let node = h.node();
    let mut c = IptablesCollector::new(node.clone(), fast_config());
    assert!(!c.sampler_started());
    assert_eq!(node.per_process_paths(), 0, "nothing read at construction");
    let out = c.collect(&ctx());
    assert!(c.sampler_started());
    assert_eq!(
        locks_reads(&out),
        1.0,
        "the read at start, at the first collection"
    );
}
