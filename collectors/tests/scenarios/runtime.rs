//! The `runtime` collector on staged nodes: processes in a fake `/proc`, sockets (real unix
//! socket files nobody listens on), configuration files, and a fake probe standing in for the
//! daemons' answers (the real probes are the agent's; `tests/e2e/real_runtime.rs` runs
//! them against real dockerd and containerd). Every situation of docs/collectors/runtime.md,
//! each followed until the condition ends, and a healthy control node.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use collectors::runtime::probe::{
    ContainerdReply, CriCondition, CriReply, DockerReply, HealthzReply, Outcome, ProbePlan,
    ProbeReport, Reply, RuntimeProbe, Target, Task, TaskStatus,
};
use collectors::runtime::{RuntimeCollector, RuntimeConfig};
use collectors::sys::statvfs::FsUsage;
use collectors::{Collection, Collector, HostNetns, Status};

use crate::support::{collect, collect_masked, ctx, FakeHost};

const UID: &str = "5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f";
const CID: &str = "e890c05ecd92d61fe2e4bb1898a2d78bd5b11b2794f47c805c4033feaa5974cf";
const CID2: &str = "a9a1785b81343c3ad2093ad973f4f8e52dbf54823b8bb089886c8356d4036fe0";

/// Which kind of call a reply answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Docker,
    Containerd,
    Cri,
    Healthz,
}

/// The daemons' answers, set by the test per (kind, socket file name or address); anything
/// not set refuses the connection.
#[derive(Debug, Default)]
pub struct FakeProbe {
    replies: Mutex<BTreeMap<(Kind, String), Reply>>,
    plans: Mutex<Vec<ProbePlan>>,
}

impl FakeProbe {
    fn set(&self, kind: Kind, key: &str, r: Reply) {
        self.replies
            .lock()
            .unwrap()
            .insert((kind, key.to_string()), r);
    }
    fn last_plan(&self) -> ProbePlan {
        self.plans.lock().unwrap().last().cloned().expect("asked")
    }
}

fn key(t: &Target) -> (Kind, String) {
    let name = |p: &std::path::Path| p.file_name().unwrap().to_string_lossy().into_owned();
    match t {
        Target::Docker { socket, .. } => (Kind::Docker, name(socket)),
        Target::Containerd { socket, .. } => (Kind::Containerd, name(socket)),
        Target::Cri { socket } => (Kind::Cri, name(socket)),
        Target::KubeletHealthz { addr } => (Kind::Healthz, addr.to_string()),
    }
}

impl RuntimeProbe for FakeProbe {
    fn probe(&self, plan: &ProbePlan) -> ProbeReport {
        self.plans.lock().unwrap().push(plan.clone());
        let replies = self.replies.lock().unwrap();
        ProbeReport {
            replies: plan
                .targets
                .iter()
                .map(|t| {
                    let k = key(t);
                    replies.get(&k).cloned().unwrap_or(match k.0 {
                        Kind::Docker => docker(Outcome::Refused, None),
                        Kind::Containerd => containerd(Outcome::Refused, None),
                        Kind::Cri => Reply::Cri(CriReply {
                            version_call: Outcome::Refused,
                            runtime: None,
                            conditions: None,
                        }),
                        Kind::Healthz => healthz(Outcome::Refused, None),
                    })
                })
                .collect(),
        }
    }
}

fn ok(ms: u64) -> Outcome {
    Outcome::Answered {
        latency: Duration::from_millis(ms),
    }
}

fn docker(ping: Outcome, running: Option<Vec<&str>>) -> Reply {
    let answered = ping.answered();
    Reply::Docker(DockerReply {
        ping,
        version: answered.then(|| "20.10.24".to_string()),
        running: running.map(|r| r.into_iter().map(String::from).collect()),
    })
}

fn containerd(call: Outcome, tasks: Option<Vec<(&str, TaskStatus)>>) -> Reply {
    let answered = call.answered();
    Reply::Containerd(ContainerdReply {
        version_call: call,
        version: answered.then(|| "1.6.20".to_string()),
        tasks: tasks.map(|t| {
            t.into_iter()
                .map(|(id, status)| Task {
                    container_id: id.to_string(),
                    status,
                })
                .collect()
        }),
    })
}

fn cri(network_ready: bool) -> Reply {
    Reply::Cri(CriReply {
        version_call: ok(2),
        runtime: Some(("containerd".into(), "v1.7.13".into())),
        conditions: Some(vec![
            CriCondition {
                kind: "RuntimeReady".into(),
                status: true,
                reason: String::new(),
                message: String::new(),
            },
            CriCondition {
                kind: "NetworkReady".into(),
                status: network_ready,
                reason: if network_ready {
                    ""
                } else {
                    "NetworkPluginNotReady"
                }
                .into(),
                message: if network_ready {
                    ""
                } else {
                    "Network plugin returns error: cni plugin not initialized"
                }
                .into(),
            },
        ]),
    })
}

fn healthz(outcome: Outcome, status: Option<u16>) -> Reply {
    Reply::Healthz(HealthzReply { outcome, status })
}

const HEALTHZ: &str = "127.0.0.1:10248";

/// A stat line of a process: start time and CPU ticks.
fn stat(pid: u32, comm: &str, start: u64, cpu: u64) -> String {
    format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 {cpu} 0 0 0 20 0 12 0 {start} 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
}

/// Stages process `pid` in the fake `/proc`.
pub fn process(h: &FakeHost, pid: u32, comm: &str, args: &str, start: u64) {
    h.write(&format!("/proc/{pid}/comm"), format!("{comm}\n"))
        .write(&format!("/proc/{pid}/stat"), stat(pid, comm, start, 10))
        .write(
            &format!("/proc/{pid}/cmdline"),
            args.replace(' ', "\0") + "\0",
        )
        .write(
            &format!("/proc/{pid}/cgroup"),
            "0::/system.slice/x.service\n",
        );
}

fn gone(h: &FakeHost, pid: u32) {
    std::fs::remove_dir_all(h.path(&format!("/proc/{pid}"))).unwrap();
}

/// A unix socket file at a host path (nobody listens on it: the fake probe answers).
fn socket(h: &FakeHost, host_path: &str) {
    let p = h.path(host_path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
}

const FLANNEL: &str = r#"{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#;

/// A healthy cri-dockerd node: kubelet, dockerd and containerd running and answering, a CNI
/// configuration, one pod with one container, and benign log lines with an incident from
/// hours ago.
fn docker_node() -> (FakeHost, Arc<FakeProbe>) {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n")
        .write(
            "/proc/1/net/unix",
            // The running daemons listen (not cri-dockerd, whose process is not there).
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             ffff8f0c41d4c800: 00000002 00000000 00010000 0001 01 63302 /var/run/docker.sock\n\
             ffff8f0c41d4c900: 00000002 00000000 00010000 0001 01 63303 /run/containerd/containerd.sock\n\
             ffff8f0c41d4ca00: 00000002 00000000 00010000 0001 01 63304 /var/lib/kubelet/pod-resources/kubelet.sock\n",
        )
        .write(
            "/var/lib/kubelet/config.yaml",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///var/run/cri-dockerd.sock\n",
        )
        .write("/etc/cni/net.d/10-flannel.conflist", FLANNEL)
        .write(&format!("/var/lib/kubelet/pods/{UID}/etc-hosts"), "127.0.0.1 localhost\n")
        .mkdir(&format!("/var/log/pods/shop_web-1_{UID}"))
        .mkdir("/var/lib/docker/containers")
        .mkdir("/var/lib/containerd");
    process(
        &h,
        100,
        "kubelet",
        "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml",
        5_000,
    );
    process(&h, 150, "containerd", "/usr/bin/containerd", 4_000);
    process(
        &h,
        200,
        "dockerd",
        "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
        4_500,
    );
    socket(&h, "/var/run/docker.sock");
    socket(&h, "/run/containerd/containerd.sock");
    socket(&h, "/var/run/cri-dockerd.sock");
    // Benign kubelet lines, and a PLEG incident from hours ago: history, not a finding.
    h.write(
        "/var/log/messages",
        "Nov 23 03:02:11 node-1 kubelet[100]: I1123 03:02:11.101010     100 kubelet.go:2342] \"SyncLoop (PLEG): event for pod\" pod=\"shop/web-1\"\n\
         Nov 23 03:05:40 node-1 kubelet[100]: E1123 03:05:40.303030     100 kubelet.go:2190] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m5.1s ago; threshold is 3m0s\"\n\
         Nov 23 09:14:02 node-1 kubelet[100]: I1123 09:14:02.121212     100 kubelet_node_status.go:70] \"Attempting to register node\" node=\"node-1\"\n",
    );
    let probe = Arc::new(FakeProbe::default());
    probe.set(Kind::Docker, "docker.sock", docker(ok(1), Some(vec![CID])));
    probe.set(
        Kind::Containerd,
        "containerd.sock",
        containerd(ok(1), Some(vec![(CID, TaskStatus::Running)])),
    );
    probe.set(Kind::Cri, "cri-dockerd.sock", cri(true));
    probe.set(Kind::Healthz, HEALTHZ, healthz(ok(1), Some(200)));
    (h, probe)
}

/// A filesystem 40% used, or 99% when `full`.
fn disk(full: bool) -> impl Fn(&std::path::Path) -> std::io::Result<FsUsage> + Send + 'static {
    move |_| {
        let size = 100u64 << 30;
        let used = if full { 99 } else { 40 } * (size / 100);
        Ok(FsUsage {
            size_bytes: size,
            avail_bytes: size - used,
            free_bytes: size - used,
            files: 1_000_000,
            files_free: 900_000,
        })
    }
}

/// The wall clock of the staged nodes: 2026-11-23T12:00:00Z (their `/var/log/messages` is in
/// UTC, no `etc/localtime`; the PLEG incident at 03:05 is hours old).
const NOW: i64 = 1_795_435_200;

fn collector(h: &FakeHost, probe: &Arc<FakeProbe>, config: RuntimeConfig) -> RuntimeCollector {
    RuntimeCollector::new(h.node(), config, probe.clone() as Arc<dyn RuntimeProbe>)
        .with_statfs(disk(false))
        .with_clock(|| NOW)
}

fn ids(c: &Collection) -> Vec<(String, String)> {
    c.findings
        .iter()
        .map(|f| (f.id.clone(), f.subject.clone()))
        .collect()
}

fn only(c: &Collection, id: &str, subject: &str) {
    assert_eq!(
        ids(c),
        vec![(id.to_string(), subject.to_string())],
        "{:?}",
        c.status
    );
}

#[test]
fn a_healthy_docker_node_with_benign_lines_and_old_incidents_is_quiet() {
    let (h, probe) = docker_node();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    for _ in 0..2 {
        let out = collect(&mut c, &ctx());
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        assert_eq!(out.status, Status::Ok);
    }
    // What was asked: both runtimes (docker's running list, containerd's tasks in moby),
    // the kubelet's CRI endpoint and its health endpoint.
    let plan = probe.last_plan();
    let kinds: Vec<(Kind, String)> = plan.targets.iter().map(key).collect();
    assert_eq!(
        kinds,
        vec![
            (Kind::Docker, "docker.sock".into()),
            (Kind::Containerd, "containerd.sock".into()),
            (Kind::Cri, "cri-dockerd.sock".into()),
            (Kind::Healthz, HEALTHZ.into()),
        ]
    );
    assert!(matches!(
        &plan.targets[0],
        Target::Docker {
            list_running: true,
            ..
        }
    ));
    assert!(
        matches!(&plan.targets[1], Target::Containerd { tasks_namespace: Some(ns), .. } if ns == "moby")
    );
    assert_eq!(plan.timeout, Duration::from_secs(2));
}

#[test]
fn dockerd_hung_slow_stopped_crashed_and_restarted() {
    let (h, probe) = docker_node();
    let mut c = collector(&h, &probe, RuntimeConfig::default()).with_statfs(disk(true));
    // Hung on a full disk (the handbook's first cause).
    probe.set(
        Kind::Docker,
        "docker.sock",
        docker(
            Outcome::Timeout {
                after: Duration::from_secs(2),
                connected: true,
            },
            None,
        ),
    );
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.hung", "/var/run/docker.sock");
    let f = &out.findings[0];
    assert!(f.summary.en.contains("99.0% full"), "{}", f.summary.en);
    assert_eq!(
        f.remediation.source.as_ref().map(|s| s.section),
        Some("节点磁盘爆满排障处理")
    );
    // Answering, slowly.
    probe.set(
        Kind::Docker,
        "docker.sock",
        docker(ok(1800), Some(vec![CID])),
    );
    only(
        &collect(&mut c, &ctx()),
        "runtime.slow",
        "/var/run/docker.sock",
    );
    // Stopped: no process, the socket removed.
    gone(&h, 200);
    std::fs::remove_file(h.path("/var/run/docker.sock")).unwrap();
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.not_running", "/var/run/docker.sock");
    assert_eq!(
        out.findings[0].evidence["expected_because"].as_str(),
        Some("kubelet, seen_earlier")
    );
    // Crashed: the socket left behind, refusing.
    socket(&h, "/var/run/docker.sock");
    probe.set(Kind::Docker, "docker.sock", docker(Outcome::Refused, None));
    only(
        &collect(&mut c, &ctx()),
        "runtime.crashed",
        "/var/run/docker.sock",
    );
    // Restarted under a new pid: answered, nothing to say.
    process(
        &h,
        201,
        "dockerd",
        "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
        9_000,
    );
    probe.set(Kind::Docker, "docker.sock", docker(ok(1), Some(vec![CID])));
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    // Running, but its socket deleted under it.
    std::fs::remove_file(h.path("/var/run/docker.sock")).unwrap();
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.unreachable", "/var/run/docker.sock");
    assert!(out.findings[0].summary.en.contains("does not exist"));
}

#[test]
fn cri_dockerd_crashed_while_dockerd_runs_on() {
    let (h, probe) = docker_node();
    process(
        &h,
        300,
        "cri-dockerd",
        "/usr/bin/cri-dockerd --container-runtime-endpoint fd://",
        4_800,
    );
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    assert!(collect(&mut c, &ctx()).findings.is_empty());
    // Killed: its socket left behind, refusing; the kubelet cannot reach docker through it.
    gone(&h, 300);
    probe.set(
        Kind::Cri,
        "cri-dockerd.sock",
        Reply::Cri(CriReply {
            version_call: Outcome::Refused,
            runtime: None,
            conditions: None,
        }),
    );
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.crashed", "/var/run/cri-dockerd.sock");
    let f = &out.findings[0];
    assert_eq!(f.evidence["daemon"].as_str(), Some("cri-dockerd"));
    assert!(f
        .remediation
        .commands
        .contains(&"systemctl restart cri-docker".to_string()));
    // Restarted.
    process(
        &h,
        301,
        "cri-dockerd",
        "/usr/bin/cri-dockerd --container-runtime-endpoint fd://",
        9_800,
    );
    probe.set(Kind::Cri, "cri-dockerd.sock", cri(true));
    assert!(collect(&mut c, &ctx()).findings.is_empty());
}

#[test]
fn a_containerd_node_without_its_kubelet_and_network() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "600.00 1100.00\n")
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n",
        )
        .mkdir("/etc/cni/net.d");
    process(&h, 150, "containerd", "/usr/bin/containerd", 4_000);
    socket(&h, "/run/containerd/containerd.sock");
    let probe = Arc::new(FakeProbe::default());
    probe.set(Kind::Containerd, "containerd.sock", containerd(ok(1), None));
    probe.set(Kind::Cri, "containerd.sock", cri(false));
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    let got = ids(&out);
    // No docker here: nothing about docker. The kubelet is configured but not running, and
    // the network is not ready (no configuration, and containerd says so).
    assert_eq!(
        got,
        vec![
            ("runtime.kubelet_not_running".into(), "kubelet".into()),
            ("runtime.cni_not_ready".into(), "/etc/cni/net.d".into()),
        ],
        "{:?}",
        out.status
    );
    let cni = &out.findings[1];
    assert!(
        cni.summary.en.contains("cni plugin not initialized"),
        "{}",
        cni.summary.en
    );
    assert_eq!(cni.severity, collectors::Severity::Critical);
    // The network plugin writes its configuration and the runtime turns ready; the kubelet
    // starts: all clear.
    h.write("/etc/cni/net.d/10-flannel.conflist", FLANNEL);
    probe.set(Kind::Cri, "containerd.sock", cri(true));
    process(
        &h,
        100,
        "kubelet",
        "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml",
        50_000,
    );
    probe.set(Kind::Healthz, HEALTHZ, healthz(ok(1), Some(200)));
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

#[test]
fn a_socket_left_with_nothing_listening_is_a_crash_one_held_by_systemd_is_not() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "600.00 1100.00\n").mkdir("/proc/2");
    socket(&h, "/var/run/docker.sock");
    // systemd's docker.socket holds it: dockerd is started on demand, nothing is wrong (and
    // nothing connects to it, which would start dockerd).
    h.write(
        "/proc/1/net/unix",
        "Num       RefCount Protocol Flags    Type St Inode Path\nffff8f0c41d4c800: 00000002 00000000 00010000 0001 01 63302 /run/docker.sock\n",
    );
    let probe = Arc::new(FakeProbe::default());
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    assert!(probe.plans.lock().unwrap().is_empty(), "nothing was asked");
    // Nobody listens: dockerd died and left it.
    h.write(
        "/proc/1/net/unix",
        "Num       RefCount Protocol Flags    Type St Inode Path\n",
    );
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.crashed", "/var/run/docker.sock");
    assert_eq!(
        out.findings[0].evidence["expected_because"].as_str(),
        Some("socket_left")
    );
}

#[test]
fn dockerd_and_containerd_out_of_sync_for_two_checks_then_pruned() {
    let (h, probe) = docker_node();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    // dockerd says CID2 runs; containerd has it stopped (the handbook's picture).
    probe.set(
        Kind::Docker,
        "docker.sock",
        docker(ok(1), Some(vec![CID, CID2])),
    );
    probe.set(
        Kind::Containerd,
        "containerd.sock",
        containerd(
            ok(1),
            Some(vec![
                (CID, TaskStatus::Running),
                (CID2, TaskStatus::Stopped),
            ]),
        ),
    );
    // One check could be a container stopping between the two calls: not yet.
    assert!(collect(&mut c, &ctx()).findings.is_empty());
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.out_of_sync", "/var/run/docker.sock");
    let f = &out.findings[0];
    assert!(
        f.summary
            .en
            .contains("a9a1785b8134 is running in dockerd but stopped in containerd"),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.commands.contains(
        &"ctr --address /run/containerd/containerd.sock --namespace moby task ls".to_string()
    ));
    // docker container prune: both agree again.
    probe.set(Kind::Docker, "docker.sock", docker(ok(1), Some(vec![CID])));
    assert!(collect(&mut c, &ctx()).findings.is_empty());
}

#[test]
fn kubelet_unhealthy_then_restarting_again_and_again() {
    let (h, probe) = docker_node();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    probe.set(
        Kind::Healthz,
        HEALTHZ,
        healthz(
            Outcome::BadAnswer {
                latency: Duration::from_millis(3),
                detail: "HTTP 500: [-]syncloop failed: reason withheld".into(),
            },
            Some(500),
        ),
    );
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.kubelet_unhealthy", "kubelet");
    assert_eq!(out.findings[0].severity, collectors::Severity::Critical);
    probe.set(Kind::Healthz, HEALTHZ, healthz(ok(1), Some(200)));
    // Three restarts, each seen by its new start time (ticks after boot; uptime 86400 s).
    for (i, pid) in [101u32, 102, 103].into_iter().enumerate() {
        gone(&h, 100 + i as u32);
        process(
            &h,
            pid,
            "kubelet",
            "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml",
            8_600_000 + i as u64 * 1000,
        );
        let out = collect(&mut c, &ctx());
        if i < 2 {
            assert!(out.findings.is_empty(), "{:#?}", out.findings);
        } else {
            only(&out, "runtime.kubelet_restarts", "kubelet");
            assert_eq!(out.findings[0].evidence["restarts"].as_f64(), Some(3.0));
        }
    }
}

#[test]
fn a_kubelet_not_in_our_network_namespace_is_not_called_down() {
    let (h, probe) = docker_node();
    gone(&h, 100);
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let ctx = collectors::CollectContext::new("node-1", HostNetns::Different);
    let out = collect(&mut c, &ctx);
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    match &out.status {
        Status::Degraded(m) => assert!(m.contains("/healthz was not checked"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!probe
        .last_plan()
        .targets
        .iter()
        .any(|t| matches!(t, Target::KubeletHealthz { .. })));
}

#[test]
fn a_hostnetwork_port_taken_by_a_host_process_and_two_static_pods_on_one_port() {
    let (h, probe) = docker_node();
    // A running hostNetwork sandbox exposing 9100/tcp.
    let sandbox = "8f3e2a1b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f";
    h.write(
        &format!("/var/lib/docker/containers/{sandbox}/config.v2.json"),
        format!(r#"{{"ID":"{sandbox}","State":{{"Running":true}},"Config":{{"ExposedPorts":{{"9100/tcp":{{}}}},"Labels":{{"io.kubernetes.docker.type":"podsandbox","io.kubernetes.pod.name":"node-exporter-abcde","io.kubernetes.pod.namespace":"monitoring","io.kubernetes.pod.uid":"{UID}"}}}}}}"#),
    )
    .write(
        &format!("/var/lib/docker/containers/{sandbox}/hostconfig.json"),
        r#"{"NetworkMode":"host"}"#,
    );
    // Two static pods want 8443.
    for name in ["gw-a", "gw-b"] {
        h.write(
            &format!("/etc/kubernetes/manifests/{name}.yaml"),
            format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n  hostNetwork: true\n  containers:\n  - name: gw\n    ports:\n    - containerPort: 8443\n"),
        );
    }
    // 9100 is bound by a node_exporter started by hand on the host (pid 700).
    h.write(
        "/proc/1/net/tcp",
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:238C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 55501 1 0000000000000000 100 0 0 10 0\n",
    );
    process(
        &h,
        700,
        "node_exporter",
        "/usr/local/bin/node_exporter",
        7_000,
    );
    h.mkdir("/proc/700/fd");
    std::os::unix::fs::symlink("socket:[55501]", h.path("/proc/700/fd/3")).unwrap();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    assert_eq!(
        ids(&out),
        vec![
            ("runtime.host_port_conflict".into(), "tcp/8443".into()),
            ("runtime.host_port_conflict".into(), "tcp/9100".into()),
        ],
        "{:?}",
        out.status
    );
    let f = &out.findings[1];
    assert_eq!(f.evidence["holder_comm"].as_str(), Some("node_exporter"));
    assert!(
        f.summary.en.contains("a process outside any pod"),
        "{}",
        f.summary.en
    );
    // The host process stops (its socket closes); the two static pods still clash.
    gone(&h, 700);
    h.write(
        "/proc/1/net/tcp",
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
    );
    let out = collect(&mut c, &ctx());
    assert_eq!(
        ids(&out),
        vec![("runtime.host_port_conflict".into(), "tcp/8443".into())]
    );
}

#[test]
fn kube_proxy_in_ipvs_mode_resyncing_every_5s_burns_cpu() {
    let (h, probe) = docker_node();
    let args = "/usr/local/bin/kube-proxy --proxy-mode=ipvs --ipvs-sync-period=5s --ipvs-min-sync-period=1s";
    process(&h, 800, "kube-proxy", args, 6_000);
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    assert!(collect(&mut c, &ctx()).findings.is_empty(), "no rate yet");
    // A great deal of CPU since the last check (any elapsed time of a test run).
    h.write("/proc/800/stat", stat(800, "kube-proxy", 6_000, 10_000_000));
    let out = collect_masked(&mut c, &ctx(), &[]);
    only(&out, "runtime.kube_proxy_ipvs_sync", "kube-proxy");
    let f = &out.findings[0];
    assert_eq!(f.evidence["sync_period_seconds"].as_f64(), Some(5.0));
    assert_eq!(f.evidence["settings_from"].as_str(), Some("flags"));
    // Idle afterwards: the CPU is no longer high.
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

#[test]
fn docker_installed_twice() {
    let (h, probe) = docker_node();
    h.write("/usr/sbin/runc", "elf")
        .write("/usr/libexec/docker/docker-runc-current", "elf");
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.duplicate_install", "runc");
    assert!(out.findings[0]
        .remediation
        .commands
        .contains(&"rpm -qf /usr/sbin/runc /usr/libexec/docker/docker-runc-current".to_string()));
    std::fs::remove_file(h.path("/usr/libexec/docker/docker-runc-current")).unwrap();
    assert!(collect(&mut c, &ctx()).findings.is_empty());
}

/// Clears the immutable flag of a file on drop (a left `+i` file cannot be removed).
struct Unlock(std::path::PathBuf);

impl Drop for Unlock {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .args(["-i", "-a"])
            .arg(&self.0)
            .status();
    }
}

#[test]
fn an_immutable_file_in_a_docker_layer_and_a_pod_directory() {
    let test = "an_immutable_file_in_a_docker_layer_and_a_pod_directory";
    if !crate::support::root_or_skip(test) {
        return;
    }
    let (h, probe) = docker_node();
    let cid = "19d837c77a3c294052a99ff9347c520bc8acb7b8b9a9dc9fab281fc09df38257";
    let mount = "b1aea29c590aa9abda79f7cf3976422073fb3652757f0391db88534027546868";
    h.write(
        &format!("/var/lib/docker/image/overlay2/layerdb/mounts/{cid}/mount-id"),
        mount,
    )
    .write(
        &format!("/var/lib/docker/overlay2/{mount}/diff/usr/bin/bash"),
        "elf",
    )
    .write(
        &format!("/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~empty-dir/d/a.log"),
        "x",
    );
    let files = [
        h.path(&format!(
            "/var/lib/docker/overlay2/{mount}/diff/usr/bin/bash"
        )),
        h.path(&format!(
            "/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~empty-dir/d/a.log"
        )),
    ];
    let mut locks = Vec::new();
    for (f, flag) in files.iter().zip(["+i", "+a"]) {
        let st = std::process::Command::new("chattr")
            .arg(flag)
            .arg(f)
            .status();
        if !st.is_ok_and(|s| s.success()) {
            collectors::skip!("SKIP {test}: chattr {flag} does not work on this filesystem");
            return;
        }
        locks.push(Unlock(f.clone()));
    }
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    let got = ids(&out);
    assert_eq!(got.len(), 2, "{got:#?}");
    let layer = out
        .findings
        .iter()
        .find(|f| f.subject.ends_with("/diff/usr/bin/bash"))
        .unwrap();
    assert_eq!(layer.evidence["container_id"].as_str(), Some(cid));
    assert!(layer
        .remediation
        .commands
        .iter()
        .any(|c| c.starts_with("chattr -i ")));
    let pod = out
        .findings
        .iter()
        .find(|f| f.subject.ends_with("/a.log"))
        .unwrap();
    assert_eq!(pod.evidence["attributes"].as_str(), Some("a"));
    assert_eq!(pod.evidence["pod_namespace"].as_str(), Some("shop"));
    assert!(pod
        .remediation
        .commands
        .iter()
        .any(|c| c.starts_with("chattr -a ")));
    // The attribute cleared: gone at the next check, without another walk.
    drop(locks);
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

/// Hostile files (issue 14) where the runtime collector reads configuration: FIFOs and a
/// huge file. Nothing blocks, each refusal is named, and no finding rests on refused text.
#[test]
fn fifos_and_huge_files_where_configuration_is_expected_block_nothing() {
    let (h, probe) = docker_node();
    let cid = "8f3e2a1b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f";
    process(
        &h,
        200,
        "dockerd",
        "/usr/bin/dockerd --config-file /etc/docker/daemon.json",
        4_500,
    );
    process(
        &h,
        800,
        "kube-proxy",
        "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf",
        6_000,
    );
    h.mkdir("/proc/800/root/var/lib/kube-proxy");
    for p in [
        "/etc/docker/daemon.json",
        "/etc/containerd/config.toml",
        "/etc/cni/net.d/05-first.conf",
        "/etc/kubernetes/manifests/static.yaml",
        "/proc/1/net/unix",
        "/proc/800/root/var/lib/kube-proxy/config.conf",
    ] {
        h.fifo(p);
    }
    h.fifo(&format!("/var/lib/docker/containers/{cid}/config.v2.json"))
        .write(
            &format!("/var/lib/docker/containers/{cid}/hostconfig.json"),
            r#"{"NetworkMode":"host"}"#,
        )
        .oversized(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\n",
            200 << 20,
        );
    let (tx, rx) = std::sync::mpsc::channel();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let root = h.root().to_path_buf();
    std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let out = collectors::Collector::collect(&mut c, &ctx());
        let _ = tx.send((out, started.elapsed(), root));
    });
    let (out, took, root) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the runtime collector blocked on a FIFO");
    println!("runtime: {took:?}: {:?}", out.status);
    let m = out.status.message().unwrap_or("").to_string();
    let refused = |p: &str, why: &str| format!("refusing to read {}{p}: {why}", root.display());
    assert!(
        m.contains(&refused("/etc/docker/daemon.json", "it is a FIFO")),
        "{m}"
    );
    assert!(
        m.contains(&refused(
            "/var/lib/kubelet/config.yaml",
            "it is larger than"
        )),
        "{m}"
    );
    // The FIFO among the CNI files is passed over for the next valid one, as the runtime
    // does; nothing else rests on refused text: no finding.
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

/// The node's logs joined to the probes (collectors/src/runtime/logs.rs): kubelet's
/// PLEG lines on a full docker disk name it; kubelet saying the network is not ready while the
/// CNI configuration is there and the CRI says ready is a log finding until kubelet has been
/// quiet for a minute; a same-name container is named; once the CRI itself reports the network
/// not ready, that is the probes' `runtime.cni_not_ready`, with no second finding from the log.
#[test]
fn the_node_logs_join_the_probes() {
    let (h, probe) = docker_node();
    let clock = Arc::new(std::sync::atomic::AtomicI64::new(NOW));
    let at = clock.clone();
    let mut c = collector(&h, &probe, RuntimeConfig::default())
        .with_statfs(disk(true))
        .with_clock(move || at.load(std::sync::atomic::Ordering::Relaxed));
    let mut lines = String::new();
    for t in ["11:59:30", "11:59:40", "11:59:50"] {
        lines += &format!("Nov 23 {t} node-1 kubelet[100]: E1123 {t}.000000     100 kubelet.go:2190] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m10s ago; threshold is 3m0s\"\n");
    }
    lines += "Nov 23 11:59:55 node-1 kubelet[100]: E1123 11:59:55.000000     100 kubelet.go:2373] \"Container runtime network not ready\" networkReady=\"NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized\"\n";
    lines += "Nov 23 11:59:58 node-1 dockerd[200]: time=\"2026-11-23T11:59:58.000000000Z\" level=error msg=\"Handler for POST /v1.41/containers/create returned error: Conflict. The container name \\\"/k8s_POD_web-1_shop_5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f_0\\\" is already in use by container \\\"e890c05ecd92d61fe2e4bb1898a2d78bd5b11b2794f47c805c4033feaa5974cf\\\". You have to remove (or rename) that container to be able to reuse that name.\"\n";
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, lines.as_bytes()).unwrap();
    let out = collect(&mut c, &ctx());
    let got = ids(&out);
    assert_eq!(
        got,
        vec![
            ("runtime.pleg_unhealthy".to_string(), "kubelet".to_string()),
            (
                "runtime.kubelet_network_not_ready".to_string(),
                "kubelet".to_string()
            ),
            (
                "runtime.container_name_conflict".to_string(),
                "k8s_POD_web-1_shop_5f0c6b4e-1d2a-4c3b-9e8f-0a1b2c3d4e5f_0".to_string()
            ),
        ],
        "{:?}",
        out.status
    );
    let pleg = &out.findings[0];
    assert_eq!(
        pleg.evidence["full_runtime_dirs"].as_str(),
        Some("/var/lib/containerd, /var/lib/docker")
    );
    assert!(out
        .metrics
        .iter()
        .any(|m| m.name == "node_doctor_runtime_node_log_matches_total"));
    // Two minutes on, nothing new: the network lines have settled (configuration there, CRI
    // ready); PLEG and the conflict are still current.
    clock.store(NOW + 120, std::sync::atomic::Ordering::Relaxed);
    let out = collect(&mut c, &ctx());
    let got: Vec<String> = ids(&out).into_iter().map(|(i, _)| i).collect();
    assert_eq!(
        got,
        ["runtime.pleg_unhealthy", "runtime.container_name_conflict"]
    );
    // The CRI now says the network is not ready and kubelet says so again: the probes' finding.
    probe.set(Kind::Cri, "cri-dockerd.sock", cri(false));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"Nov 23 12:01:58 node-1 kubelet[100]: E1123 12:01:58.000000     100 kubelet.go:2373] \"Container runtime network not ready\" networkReady=\"NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized\"\n").unwrap();
    let out = collect(&mut c, &ctx());
    let got: Vec<String> = ids(&out).into_iter().map(|(i, _)| i).collect();
    assert!(
        got.contains(&"runtime.cni_not_ready".to_string()),
        "{got:?}"
    );
    assert!(
        !got.contains(&"runtime.kubelet_network_not_ready".to_string()),
        "{got:?}"
    );
}

/// Stages `n` idle processes (`java`, settled: started long before the fake uptime) from pid
/// `from`, with namespace links `net`/`mnt`: what a busy quiet node adds to the process table.
pub fn idle_processes(h: &FakeHost, from: u32, n: u32, net: u64, mnt: u64) {
    for pid in from..from + n {
        process(h, pid, "java", "java -jar /app/app.jar", 100);
        h.mkdir(&format!("/proc/{pid}/ns"));
        h.symlink(&format!("net:[{net}]"), &format!("/proc/{pid}/ns/net"));
        h.symlink(&format!("mnt:[{mnt}]"), &format!("/proc/{pid}/ns/mnt"));
    }
}

/// Cost and escalation (docs/collectors/runtime.md, `node/daemons.rs`): the same healthy
/// docker node run by systemd (each daemon in its unit's cgroup, cgroup v2) finds its daemons
/// there and never lists `/proc`: nothing of the 200 other processes is read, and the
/// findings are those of the node found by listing. Then a node where nothing listens on a
/// daemon's socket or port (no runtime, no kubelet) does not list either.
#[test]
fn a_systemd_node_finds_its_daemons_without_listing_proc() {
    let build = |h: &FakeHost, probe: &Arc<FakeProbe>| {
        let host = h.node();
        let c = RuntimeCollector::new(
            host.clone(),
            RuntimeConfig::default(),
            probe.clone() as Arc<dyn RuntimeProbe>,
        )
        .with_statfs(disk(false))
        .with_clock(|| NOW);
        (host, c)
    };
    let (listed, probe) = docker_node();
    idle_processes(&listed, 1000, 200, 4026531840, 4026531841);
    let (host, mut c) = build(&listed, &probe);
    let by_listing = c.collect(&ctx());
    assert!(host.processes().examined() >= 200);

    let (h, probe) = docker_node();
    idle_processes(&h, 1000, 200, 4026531840, 4026531841);
    for (unit, pid) in [
        ("kubelet.service", 100),
        ("containerd.service", 150),
        ("docker.service", 200),
    ] {
        h.write(
            &format!("/sys/fs/cgroup/system.slice/{unit}/cgroup.procs"),
            format!("{pid}\n"),
        );
    }
    let (host, mut c) = build(&h, &probe);
    let out = c.collect(&ctx());
    assert_eq!(ids(&out), ids(&by_listing));
    assert_eq!(out.status, by_listing.status);
    assert_eq!(host.processes().examined(), 0, "/proc was not listed");
    let read = host.per_process_paths();
    assert!(
        read < 40,
        "{read} per-process paths (pid 1's tables, the daemons' files)"
    );

    // No runtime, no kubelet: nothing listens, nothing is listed.
    let bare = FakeHost::new();
    bare.write("/proc/uptime", "86400.00 170000.00\n").write(
        "/proc/1/net/unix",
        "Num       RefCount Protocol Flags    Type St Inode Path\n",
    );
    idle_processes(&bare, 1000, 200, 4026531840, 4026531841);
    let (host, mut c) = build(&bare, &Arc::new(FakeProbe::default()));
    c.collect(&ctx());
    assert_eq!(host.processes().examined(), 0, "/proc was not listed");
    assert!(
        host.per_process_paths() < 10,
        "{}",
        host.per_process_paths()
    );
}

/// Cost and escalation (docs/collectors/runtime.md): on a healthy node with 200 more
/// processes, the first cycle examines every process once (the shared process table); the
/// next cycle reads one `stat` per remembered daemon (kubelet, containerd, dockerd) and the
/// `exe` link of dockerd and containerd (duplicate installs): no file of any other process. (cri-dockerd's socket is there and
/// its process is not: the daemons are looked up in the table every cycle, which reads
/// nothing more.)
#[test]
fn a_quiet_node_costs_one_read_per_daemon_per_cycle() {
    let (h, probe) = docker_node();
    idle_processes(&h, 1000, 200, 4026531840, 4026531841);
    let host = h.node();
    let mut c = RuntimeCollector::new(
        host.clone(),
        RuntimeConfig::default(),
        probe.clone() as Arc<dyn RuntimeProbe>,
    )
    .with_statfs(disk(false))
    .with_clock(|| NOW);
    let first = c.collect(&ctx());
    let after_first = host.per_process_paths();
    assert!(
        after_first >= 200,
        "the first cycle examines every process: {after_first}"
    );
    let second = c.collect(&ctx());
    assert_eq!(ids(&second), ids(&first));
    assert_eq!(second.status, first.status);
    assert_eq!(
        host.per_process_paths() - after_first,
        5,
        "one stat per daemon and two exe links; nothing of the 200 others"
    );
}

/// A docker node (no kubelet here: a plain docker host) after `systemctl stop docker` or a
/// clean SIGTERM: no dockerd process, its socket and pid file gone. What says docker is used:
/// `live`: live-restore kept two containers, each with its shim (`-namespace moby`) and its
/// task directory in containerd's state; `unit`: docker.service enabled on a host booted with
/// systemd.
fn docker_stopped(live: bool, unit: bool) -> (FakeHost, Arc<FakeProbe>) {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n")
        .write(
            "/proc/1/net/unix",
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             ffff8f0c41d4c900: 00000002 00000000 00010000 0001 01 63303 /run/containerd/containerd.sock\n",
        )
        .write(
            "/etc/docker/daemon.json",
            r#"{"data-root": "/data/docker", "live-restore": true}"#,
        )
        .mkdir("/data/docker/containers")
        .mkdir("/var/lib/containerd");
    process(&h, 150, "containerd", "/usr/bin/containerd", 4_000);
    socket(&h, "/run/containerd/containerd.sock");
    if live {
        for (pid, id) in [(300, CID), (301, CID2)] {
            process(
                &h,
                pid,
                "containerd-shim",
                &format!("/usr/bin/containerd-shim-runc-v2 -namespace moby -id {id} -address /run/containerd/containerd.sock"),
                4_600,
            );
            h.mkdir(&format!(
                "/run/containerd/io.containerd.runtime.v2.task/moby/{id}"
            ));
        }
    }
    if unit {
        h.mkdir("/run/systemd/system").symlink(
            "/lib/systemd/system/docker.service",
            "/etc/systemd/system/multi-user.target.wants/docker.service",
        );
    }
    let probe = Arc::new(FakeProbe::default());
    probe.set(Kind::Containerd, "containerd.sock", containerd(ok(1), None));
    (h, probe)
}

/// Issue 28, "Runtime": dockerd stopped cleanly on a node that uses it is a warning naming
/// docker, whether live-restore kept its containers or not; an empty `/var/lib/docker` or an
/// installed-but-not-enabled unit is no sign of use.
#[test]
fn a_stopped_dockerd_is_a_warning_whether_its_containers_run_on_or_not() {
    use collectors::Severity;
    for (live, unit) in [(true, false), (false, true), (true, true)] {
        let (h, probe) = docker_stopped(live, unit);
        let mut c = collector(&h, &probe, RuntimeConfig::default());
        let out = collect(&mut c, &ctx());
        only(&out, "runtime.not_running", "/var/run/docker.sock");
        let f = &out.findings[0];
        assert_eq!(f.severity, Severity::Warning, "live {live} unit {unit}");
        assert_eq!(f.evidence["daemon"].as_str(), Some("dockerd"));
        assert_eq!(f.evidence["outcome"].as_str(), Some("no_socket"));
        let because = f.evidence["expected_because"].as_str().unwrap();
        assert_eq!(because.contains("moby_shims"), live, "{because}");
        assert_eq!(because.contains("systemd_unit"), unit, "{because}");
        // The data root of daemon.json, not the default.
        assert_eq!(f.evidence["data_dir"].as_str(), Some("/data/docker"));
        assert!(f.title.en.contains("dockerd"), "{}", f.title.en);
        if live {
            assert_eq!(f.evidence["moby_shims"], collectors::Evidence::from(2u32));
            assert!(
                f.summary
                    .en
                    .contains("2 of its containers still run without it (live-restore)"),
                "{}",
                f.summary.en
            );
            assert!(f
                .remediation
                .steps
                .iter()
                .any(|s| s.en.contains("live-restore")));
        } else {
            assert!(!f.evidence.contains_key("moby_shims"));
            assert!(
                f.summary.en.contains("none of its containers runs now"),
                "{}",
                f.summary.en
            );
        }
        assert!(f
            .remediation
            .commands
            .contains(&"systemctl start docker".to_string()));
        let src = f.remediation.source.as_ref().unwrap();
        assert_eq!(
            (src.doc, src.section),
            ("002_af370464fa0f13dd.txt", "Pod 异常排查概述")
        );
        assert_eq!(out.status, Status::Ok, "{:?}", out.status);
    }
}

#[test]
fn an_empty_var_lib_docker_or_an_installed_unit_is_no_sign_of_docker() {
    let h = FakeHost::new();
    h.write("/proc/uptime", "86400.00 170000.00\n")
        .mkdir("/proc/1")
        .mkdir("/var/lib/docker")
        .write("/lib/systemd/system/docker.service", "[Service]\n")
        // Enabled, but systemd does not run this host (no /run/systemd/system).
        .symlink(
            "/lib/systemd/system/docker.service",
            "/etc/systemd/system/multi-user.target.wants/docker.service",
        );
    let probe = Arc::new(FakeProbe::default());
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    // Not a node: complete, and the message says why nothing was judged.
    assert!(
        matches!(&out.status, Status::Noted(m) if m.contains("nothing to judge")),
        "{:?}",
        out.status
    );
    assert_eq!(out.status.as_str(), "ok");
}

/// Issue 28, "immutable file under data-root": the handbook's kubelet line names a file in
/// docker's writable layer under `data-root` `/data/docker` (daemon.json), a container no
/// longer in docker's layer database (the walk does not reach it). The file named is checked
/// where it lies; a path that climbs out with `..`, a symlink pointing out of the root, a FIFO
/// and a file without the attribute named the same way give nothing.
#[test]
fn a_file_the_kubelet_log_names_under_docker_data_root_is_checked_where_it_lies() {
    let test = "a_file_the_kubelet_log_names_under_docker_data_root_is_checked_where_it_lies";
    if !crate::support::root_or_skip(test) {
        return;
    }
    let (h, probe) = docker_node();
    h.write(
        "/etc/docker/daemon.json",
        r#"{"data-root": "/data/docker"}"#,
    );
    let layer = "b1aea29c590aa9abda79f7cf3976422073fb3652757f0391db88534027546868";
    let bash = format!("/data/docker/overlay2/{layer}/diff/usr/bin/bash");
    let plain = format!("/data/docker/overlay2/{layer}/diff/usr/bin/sh");
    h.write(&bash, "elf").write(&plain, "elf");
    h.symlink(
        "/etc/shadow",
        &format!("/data/docker/overlay2/{layer}/diff/etc-link"),
    );
    h.fifo(&format!("/data/docker/overlay2/{layer}/diff/fifo"));
    let st = std::process::Command::new("chattr")
        .arg("+i")
        .arg(h.path(&bash))
        .status();
    if !st.is_ok_and(|s| s.success()) {
        collectors::skip!("SKIP {test}: chattr +i does not work on this filesystem");
        return;
    }
    let _unlock = Unlock(h.path(&bash));
    let line = |path: &str| {
        format!("Nov 23 11:59:50 node-1 kubelet[100]: E1123 11:59:50.000000     100 remote_runtime.go:250] RemoveContainer \"{CID}\" from runtime service failed: rpc error: code = Unknown desc = failed to remove container \"{CID}\": Error response from daemon: container {CID}: driver \"overlay2\" failed to remove root filesystem: remove {path}: operation not permitted\n")
    };
    let mut lines = line(&bash);
    for p in [
        plain.clone(),
        format!("/data/docker/overlay2/{layer}/diff/../../../../../etc/passwd"),
        format!("/data/docker/overlay2/{layer}/diff/etc-link"),
        format!("/data/docker/overlay2/{layer}/diff/fifo"),
        "/nonexistent/file".to_string(),
    ] {
        lines += &line(&p);
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, lines.as_bytes()).unwrap();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    only(&out, "runtime.immutable_file", &bash);
    let f = &out.findings[0];
    assert_eq!(f.severity, collectors::Severity::Warning);
    assert_eq!(f.evidence["file"].as_str(), Some(bash.as_str()));
    assert_eq!(f.evidence["attributes"].as_str(), Some("i"));
    assert_eq!(f.evidence["log_program"].as_str(), Some("kubelet"));
    assert_eq!(f.evidence["log_file"].as_str(), Some("/var/log/messages"));
    assert!(
        f.summary
            .en
            .contains("kubelet's log (/var/log/messages) names it"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.en.contains("Terminating"), "{}", f.summary.en);
    assert!(f
        .remediation
        .commands
        .contains(&format!("chattr -i {bash}")));
    assert!(f
        .remediation
        .commands
        .contains(&format!("lsattr -d {bash}")));
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(src.section, "检查是否存在 “i” 文件属性");
    // Cleared: gone at the next collection, though the log line stays.
    drop(_unlock);
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
}

/// node-problem-detector's FrequentDockerRestart / FrequentContainerdRestart, from the
/// processes: dockerd replaced three times (a new pid and start time each) is
/// `runtime.daemon_restarts` for dockerd; containerd, steady, is not.
#[test]
fn dockerd_restarting_again_and_again() {
    let (h, probe) = docker_node();
    let mut c = collector(&h, &probe, RuntimeConfig::default());
    let out = collect(&mut c, &ctx());
    assert!(out.findings.is_empty(), "{:#?}", out.findings);
    for (i, pid) in [201u32, 202, 203].into_iter().enumerate() {
        gone(&h, if i == 0 { 200 } else { pid - 1 });
        process(
            &h,
            pid,
            "dockerd",
            "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
            8_600_000 + i as u64 * 1000,
        );
        let out = collect(&mut c, &ctx());
        if i < 2 {
            assert!(out.findings.is_empty(), "{:#?}", out.findings);
            continue;
        }
        only(&out, "runtime.daemon_restarts", "dockerd");
        let f = &out.findings[0];
        assert_eq!(f.severity, collectors::Severity::Warning);
        assert_eq!(f.evidence["restarts"].as_f64(), Some(3.0));
        assert_eq!(f.evidence["restarts_threshold"].as_f64(), Some(3.0));
        assert_eq!(f.evidence["window_minutes"].as_f64(), Some(30.0));
        assert_eq!(f.evidence["pid"].as_f64(), Some(203.0));
        assert!(
            f.summary
                .en
                .starts_with("dockerd restarted 3 times in the last 30 minutes"),
            "{}",
            f.summary.en
        );
        assert!(f.summary.en.contains("live-restore"), "{}", f.summary.en);
        assert!(f
            .remediation
            .commands
            .iter()
            .any(|c| c == "systemctl show docker -p NRestarts"));
        assert!(f
            .remediation
            .source
            .as_ref()
            .is_some_and(|s| s.section.contains("FrequentDockerRestart")));
    }
}

/// node-problem-detector's docker monitor, in dockerd's own wording (logrus lines in the
/// syslog file): a broken overlay2 layer under a data-root of its own, a half-written image
/// layer, a container whose process died before its start. One finding each, with the layer,
/// the line and the counts; the overlay2 one sets NPD's CorruptDockerOverlay2.
#[test]
fn dockerds_store_and_start_failures_from_its_log() {
    let (h, probe) = docker_node();
    let clock = Arc::new(std::sync::atomic::AtomicI64::new(NOW));
    let at = clock.clone();
    let mut c = collector(&h, &probe, RuntimeConfig::default())
        .with_clock(move || at.load(std::sync::atomic::Ordering::Relaxed));
    let layer =
        "/data/docker/overlay2/3b1f0c9e8d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c";
    let mut lines = String::new();
    for t in ["11:59:20", "11:59:40"] {
        lines += &format!("Nov 23 {t} node-1 dockerd[200]: time=\"2026-11-23T{t}.000000000Z\" level=error msg=\"Handler for GET /v1.41/containers/json returned error: readlink {layer}: invalid argument\"\n");
    }
    lines += "Nov 23 11:59:45 node-1 dockerd[200]: time=\"2026-11-23T11:59:45.000000000Z\" level=error msg=\"Error trying v2 registry: failed to register layer: rename /data/docker/image/overlay2/layerdb/tmp/write-set-771204 /data/docker/image/overlay2/layerdb/sha256/5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29180716f5e4d3c2b1: directory not empty\"\n";
    lines += "Nov 23 11:59:50 node-1 dockerd[200]: time=\"2026-11-23T11:59:50.000000000Z\" level=error msg=\"Handler for POST /v1.41/containers/9a8b7c6d5e4f/start returned error: OCI runtime start failed: container process is already dead: unknown\"\n";
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, lines.as_bytes()).unwrap();
    let out = collect(&mut c, &ctx());
    let got = ids(&out);
    for want in [
        ("runtime.overlay2_corrupt", layer),
        ("runtime.image_layer_corrupt", "dockerd"),
        ("runtime.container_start_dead", "dockerd"),
    ] {
        assert!(
            got.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} not in {got:?}"
        );
    }
    let find = |id: &str| out.findings.iter().find(|f| f.id == id).unwrap();
    let o = find("runtime.overlay2_corrupt");
    assert_eq!(o.severity, collectors::Severity::Warning);
    assert_eq!(o.evidence["layer"].as_str(), Some(layer));
    assert_eq!(o.evidence["lines_in_window"].as_f64(), Some(2.0));
    assert_eq!(o.evidence["last_seen_seconds_ago"].as_f64(), Some(20.0));
    assert!(
        o.summary.en.contains("missing or not a symlink"),
        "{}",
        o.summary.en
    );
    assert!(o
        .remediation
        .commands
        .iter()
        .any(|c| c == &format!("ls -l {layer}/link {layer}/lower")));
    let sets = collectors::rules::RuleBook::cluster(o);
    assert_eq!(sets[0].0.ctype(true), "CorruptDockerOverlay2");
    let i = find("runtime.image_layer_corrupt");
    assert!(i.evidence["last_line"]
        .as_str()
        .is_some_and(|l| l.contains("failed to register layer")));
    assert!(i.summary.en.contains("half") || i.summary.en.contains("interrupted pull"));
    assert_eq!(
        collectors::rules::RuleBook::event(i).and_then(|e| e.reason_for(true, i)),
        Some("CorruptDockerImage".to_string())
    );
    let d = find("runtime.container_start_dead");
    assert_eq!(d.evidence["runtime"].as_str(), Some("dockerd"));
    assert!(d.remediation.steps.iter().any(|s| s.en.contains("OOM")));
    assert_eq!(
        collectors::rules::RuleBook::event(d).and_then(|e| e.reason_for(true, d)),
        Some("DockerContainerStartupFailure".to_string())
    );
}

/// node-problem-detector parity for its docker and systemd monitors
/// (`config/docker-monitor.json`, `config/systemd-monitor-counter.json`), by reason: each
/// raises node-doctor's finding, and with `--kube-npd-names` the rule file gives NPD's reason
/// (Event) or condition. The docker lines are dockerd's own wording (written here); the
/// systemd monitor's "Started …" lines are counted by NPD, node-doctor sees the restarts in the
/// processes themselves (three replacements of each daemon, as a crash loop leaves them).
#[test]
fn npd_parity_docker_and_systemd_monitors() {
    let (h, probe) = docker_node();
    let clock = Arc::new(std::sync::atomic::AtomicI64::new(NOW));
    let at = clock.clone();
    let mut c = collector(&h, &probe, RuntimeConfig::default())
        .with_clock(move || at.load(std::sync::atomic::Ordering::Relaxed));
    collect(&mut c, &ctx());
    for i in 0..3u32 {
        for (old, pid, comm, args) in [
            (
                100,
                300,
                "kubelet",
                "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml",
            ),
            (150, 400, "containerd", "/usr/bin/containerd"),
            (
                200,
                500,
                "dockerd",
                "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
            ),
        ] {
            gone(&h, if i == 0 { old } else { pid + i - 1 });
            process(&h, pid + i, comm, args, 8_600_000 + u64::from(i) * 1000);
        }
        collect(&mut c, &ctx());
    }
    let lines = "Nov 23 11:59:40 node-1 dockerd[502]: time=\"2026-11-23T11:59:40.000000000Z\" level=error msg=\"Error trying v2 registry: failed to register layer: rename /var/lib/docker/image/overlay2/layerdb/tmp/write-set-99 /var/lib/docker/image/overlay2/layerdb/sha256/77aa: directory not empty\"\n\
Nov 23 11:59:45 node-1 dockerd[502]: time=\"2026-11-23T11:59:45.000000000Z\" level=error msg=\"Handler for POST /v1.41/containers/77aa/start returned error: OCI runtime start failed: container process is already dead: unknown\"\n\
Nov 23 11:59:50 node-1 dockerd[502]: time=\"2026-11-23T11:59:50.000000000Z\" level=error msg=\"Handler for GET /v1.41/containers/json returned error: readlink /var/lib/docker/overlay2/77aa66bb: invalid argument\"\n";
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, lines.as_bytes()).unwrap();
    let out = collect(&mut c, &ctx());
    // (NPD reason, NPD condition or None for an Event, node-doctor's rule, subject)
    let checklist: [(&str, Option<&str>, &str, &str); 6] = [
        (
            "CorruptDockerImage",
            None,
            "runtime.image_layer_corrupt",
            "dockerd",
        ),
        (
            "DockerContainerStartupFailure",
            None,
            "runtime.container_start_dead",
            "dockerd",
        ),
        (
            "CorruptDockerOverlay2",
            Some("CorruptDockerOverlay2"),
            "runtime.overlay2_corrupt",
            "/var/lib/docker/overlay2/77aa66bb",
        ),
        (
            "FrequentKubeletRestart",
            Some("FrequentKubeletRestart"),
            "runtime.kubelet_restarts",
            "kubelet",
        ),
        (
            "FrequentDockerRestart",
            Some("FrequentDockerRestart"),
            "runtime.daemon_restarts",
            "dockerd",
        ),
        (
            "FrequentContainerdRestart",
            Some("FrequentContainerdRestart"),
            "runtime.daemon_restarts",
            "containerd",
        ),
    ];
    let mut recognised = 0;
    for (reason, condition, id, subject) in checklist {
        let Some(f) = out
            .findings
            .iter()
            .find(|f| f.id == id && f.subject == subject)
        else {
            eprintln!("MISS  {reason:<30} {id} {subject}: {:?}", ids(&out));
            continue;
        };
        let named = match condition {
            Some(cond) => collectors::rules::RuleBook::cluster(f)
                .iter()
                .any(|(class, r)| class.ctype(true) == cond && r == reason),
            None => {
                collectors::rules::RuleBook::event(f).and_then(|e| e.reason_for(true, f))
                    == Some(reason.to_string())
            }
        };
        if named {
            recognised += 1;
            eprintln!("ok    {reason:<30} {id} {subject} ({:?})", f.severity);
        } else {
            eprintln!("NAME  {reason:<30} {id} {subject}");
        }
    }
    eprintln!(
        "node-problem-detector docker and systemd monitors: {recognised}/{} recognised",
        checklist.len()
    );
    assert_eq!(recognised, checklist.len());
}
