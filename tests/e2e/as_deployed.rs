//! The product as the DaemonSet runs it (issue 14): the release binary, as uid 0 with only
//! the manifest's capabilities, no new privileges, a read-only root, the host's `/` bound
//! read-only (every mount below it too) at the host root, in a private mount namespace, in the
//! host's pid namespace (hostPID) — once in the host's network namespace (the shipped
//! `hostNetwork: true`) and once in a network namespace of its own (the `hostNetwork: false`
//! variant). Root only; prints SKIP with the reason otherwise.
//!
//! The "node" is staged so that its readings are distinctive and exact: this VM's real pid 1
//! cannot be inspected (`/proc/1/ns/*` refuses even root), so the node's pid 1 is a `sleep`
//! started by `unshare --net --pid --fork --mount-proc`, in a network namespace of its own
//! that plays the host's. The test changes that namespace, never the VM's: `net.core.somaxconn`
//! and `net.ipv4.tcp_max_syn_backlog` set to unusual values, the legacy `raw` table loaded
//! (`iptables-legacy -t raw -L`) and a `-m conntrack` rule (which turns connection tracking on
//! in that namespace), conntrack entries from UDP datagrams over its loopback, and listen-queue
//! drops from a listener nobody accepts on. Everything dies with that pid namespace when the
//! test ends, passing or failing.
//!
//! Expected (a): every per-namespace figure equals the node namespace's, read there
//! independently. (b): the files read through `/proc/1/net` (legacy tables, conntrack entries,
//! listen drops) still equal the node's, and the sysctls are reported as not the host's in the
//! kernel collector's status, never as the pod's values, and give no `sysctl -w` advice.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::manifests::{http_get, repo_root};
use nix::sched::{setns, CloneFlags};
use serde_json::Value;

/// The node's `net.core.somaxconn` and `net.ipv4.tcp_max_syn_backlog` during the test: values
/// no kernel defaults to (4096 and a figure derived from memory).
const NODE_SOMAXCONN: u64 = 5003;
const NODE_SYN_BACKLOG: u64 = 2051;
/// UDP datagrams, each from its own socket: at least this many conntrack entries on the node.
const UDP_FLOWS: usize = 300;
/// The one port the pod listens on (the manifest's, `--listen=0.0.0.0:9808`).
const PORT: u16 = 9808;

/// Statuses other than `ok` that this test accepts, and why each is expected here. Anything
/// else (in particular `error`, a timeout or a panic) fails the test.
const EXPLAINED: &[(&str, &str, &str, &str)] = &[
    (
        "disk",
        "unavailable",
        "no container runtime or kubelet directory under",
        "the test machines run no container runtime or kubelet",
    ),
    (
        "tables",
        "degraded",
        "the agent is not in the host's network namespace",
        "in a pod network namespace gc_thresh*, tcp_mem and tcp_max_orphans (sysctls of the \
         kernel's initial namespace) are not visible",
    ),
];

/// The kernel collector's status in a pod network namespace (variant b): required there.
const KERNEL_NOT_HOSTS: &str =
    "somaxconn/tcp_max_syn_backlog are node-doctor's own network namespace's, not the host's: run with hostNetwork: true";

/// Runs as the pod, mounts and capabilities as the DaemonSet gives them, then execs the agent
/// with its arguments ("$@"). Harness checks exit 96-98 so that a broken harness is not taken
/// for an agent failure.
const POD_SCRIPT: &str = r#"set -euo pipefail
# hostPath / at $HOSTROOT, readOnly. Kubernetes makes only the top mount read-only (its
# readOnly is not recursive); this is stricter: every mount below it too.
mount --rbind / "$HOSTROOT"
findmnt -Rrn -o TARGET "$HOSTROOT" | while IFS= read -r t; do
    mount -o remount,bind,ro "$(printf '%b' "$t")" || exit 98
done
# readOnlyRootFilesystem: the container's own / (and /tmp, when it is a mount of its own).
mount -o remount,bind,ro /
if mountpoint -q /tmp; then mount -o remount,bind,ro /tmp; fi
for p in "$HOSTROOT/.nd-w" "$HOSTROOT/tmp/.nd-w" /.nd-w /tmp/.nd-w; do
    if touch "$p" 2>/dev/null; then echo "harness: $p is writable" >&2; exit 97; fi
done
# A pod's own network namespace has its loopback up.
if [ -n "$OWN_NETNS" ]; then ip link set lo up; fi
cd /
# runAsUser, capabilities drop ALL + add, allowPrivilegeEscalation: false.
priv=(setpriv --reuid="$RUN_AS" --regid="$RUN_AS" --clear-groups --inh-caps=-all,"$CAPS"
      --ambient-caps=-all,"$CAPS" --bounding-set=-all,"$CAPS" --no-new-privs)
eff=$("${priv[@]}" -- grep '^CapEff:' /proc/self/status)
if [ "$eff" != "CapEff:	$WANT_CAPEFF" ]; then echo "harness: $eff, want $WANT_CAPEFF" >&2; exit 96; fi
exec "${priv[@]}" -- "$@"
"#;

/// What the shipped DaemonSet says about how the agent runs.
struct Manifest {
    host_network: bool,
    run_as_user: String,
    caps: Vec<String>,
}

/// Reads the facts from `manifests/base/daemonset.yaml` (the source, not a rendering).
fn manifest() -> Manifest {
    let path = repo_root().join("manifests/base/daemonset.yaml");
    let text = std::fs::read_to_string(&path).expect("read daemonset.yaml");
    let value = |key: &str| {
        let found: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix(key))
            .map(str::trim)
            .collect();
        assert_eq!(found.len(), 1, "{key} in {}", path.display());
        found[0].to_string()
    };
    let mut caps = Vec::new();
    let mut in_add = false;
    for line in text.lines().map(str::trim) {
        if line == "add:" {
            in_add = true;
            continue;
        }
        // The list under `add:`, with a justification comment before each entry.
        if !in_add || line.starts_with('#') {
            continue;
        }
        match line.strip_prefix("- ") {
            Some(cap) => caps.push(cap.to_string()),
            None => in_add = false,
        }
    }
    assert!(
        !caps.is_empty(),
        "no capabilities: add list in {}",
        path.display()
    );
    Manifest {
        host_network: value("hostNetwork:") == "true",
        run_as_user: value("runAsUser:"),
        caps,
    }
}

/// A capability's bit number (linux/capability.h).
fn cap_bit(name: &str) -> u32 {
    match name {
        "DAC_READ_SEARCH" => 2,
        "SYS_PTRACE" => 19,
        "SYSLOG" => 34,
        other => panic!("capability {other} in the manifest: add its number here"),
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Why this test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    if !crate::support::is_root() {
        return Some("needs root (namespaces, mounts, capabilities)".into());
    }
    let missing: Vec<&str> = [
        "unshare",
        "nsenter",
        "setpriv",
        "findmnt",
        "mount",
        "mountpoint",
        "bash",
        "ip",
        "iptables-legacy",
    ]
    .into_iter()
    .filter(|t| !on_path(t))
    .collect();
    if !missing.is_empty() {
        return Some(format!(
            "missing {} (Debian util-linux, mount, bash, iproute2, iptables)",
            missing.join(", ")
        ));
    }
    None
}

/// Runs `f` on a thread inside the network namespace at `netns` (`/proc/<pid>/ns/net`).
/// `/proc/sys/net` and `/proc/thread-self/net` then show that namespace, and sockets live in it.
fn in_netns<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let file = File::open(netns).unwrap_or_else(|e| panic!("open {}: {e}", netns.display()));
    std::thread::spawn(move || {
        setns(&file, CloneFlags::CLONE_NEWNET).expect("setns(CLONE_NEWNET)");
        f()
    })
    .join()
    .expect("thread in the network namespace panicked")
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .trim()
        .to_string()
}

/// The staged node: pid 1 of a new pid namespace (`sleep`), in a new network namespace that
/// plays the host's. Dropping it kills `unshare`, whose `--kill-child` kills pid 1 and with it
/// every process in the pid namespace (the agents included); the network namespace goes with
/// its last process.
struct Node {
    holder: Child,
    init: u32,
    dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let holder = Command::new("unshare")
            .args([
                "--net",
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                "sleep",
                "900",
            ])
            .stdin(Stdio::null())
            .spawn()
            .expect("run unshare");
        let mut node = Node {
            init: 0,
            holder,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        let children = format!("/proc/{0}/task/{0}/children", node.holder.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.init == 0 {
            assert!(Instant::now() < deadline, "unshare started no sleep");
            let child = std::fs::read_to_string(&children)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok());
            if let Some(pid) = child {
                if std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
                {
                    node.init = pid;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::create_dir(node.host_root()).expect("mkdir host root");
        node
    }

    fn netns(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.init))
    }

    fn host_root(&self) -> PathBuf {
        self.dir.path().join("host")
    }

    /// Runs a command in the node's network namespace; it must succeed.
    fn run(&self, args: &[&str]) {
        let out = Command::new("nsenter")
            .arg(format!("--net={}", self.netns().display()))
            .arg("--")
            .args(args)
            .output()
            .expect("run nsenter");
        assert!(
            out.status.success(),
            "{args:?} in the node's network namespace: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Makes the node's per-namespace readings distinctive.
    fn stage(&self) {
        self.run(&["ip", "link", "set", "lo", "up"]);
        // A legacy table in use (as an old kube-proxy leaves it), and connection tracking on.
        self.run(&["iptables-legacy", "-w", "-t", "raw", "-L", "-n"]);
        self.run(&[
            "iptables-legacy",
            "-w",
            "-A",
            "OUTPUT",
            "-o",
            "lo",
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-j",
            "ACCEPT",
        ]);
        in_netns(&self.netns(), || {
            std::fs::write("/proc/sys/net/core/somaxconn", NODE_SOMAXCONN.to_string())
                .expect("set somaxconn");
            std::fs::write(
                "/proc/sys/net/ipv4/tcp_max_syn_backlog",
                NODE_SYN_BACKLOG.to_string(),
            )
            .expect("set tcp_max_syn_backlog");
        });
        let (somaxconn, syn) = in_netns(&self.netns(), || {
            (
                read_trim("/proc/sys/net/core/somaxconn"),
                read_trim("/proc/sys/net/ipv4/tcp_max_syn_backlog"),
            )
        });
        assert_eq!(somaxconn, NODE_SOMAXCONN.to_string());
        assert_eq!(syn, NODE_SYN_BACKLOG.to_string());
    }

    /// The legacy tables of the node's namespace, read there as `/proc/net/ip_tables_names`.
    fn legacy_tables(&self) -> String {
        in_netns(&self.netns(), || {
            read_trim("/proc/thread-self/net/ip_tables_names")
                .lines()
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// Conntrack entries of the node's namespace (`nf_conntrack_count` read there).
    fn conntrack_count(&self) -> u64 {
        in_netns(&self.netns(), || {
            read_trim("/proc/sys/net/netfilter/nf_conntrack_count")
                .parse()
                .expect("nf_conntrack_count")
        })
    }

    /// `ListenDrops` of the node's namespace.
    fn listen_drops(&self) -> u64 {
        in_netns(&self.netns(), || {
            let text = read_trim("/proc/thread-self/net/netstat");
            let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
            let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
            names
                .split_whitespace()
                .zip(values.split_whitespace())
                .find(|(n, _)| *n == "ListenDrops")
                .and_then(|(_, v)| v.parse().ok())
                .expect("ListenDrops in netstat")
        })
    }

    /// UDP datagrams over the node's loopback, each from its own port: one conntrack entry
    /// each (unreplied UDP entries live 30 s).
    fn udp_flows(&self, n: usize) {
        in_netns(&self.netns(), move || {
            let sink = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
            let to = sink.local_addr().expect("addr");
            for _ in 0..n {
                let s = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
                s.send_to(b"node-doctor e2e", to).expect("send udp");
            }
        });
    }

    /// The pod: `nsenter` into the node's pid and mount namespaces (hostPID; the mount
    /// namespace whose /proc shows that pid namespace) and its network namespace, then a
    /// private mount namespace, and for `own_netns` a network namespace of its own.
    fn pod(&self, m: &Manifest, own_netns: bool, bin: &Path, args: &[&str]) -> Command {
        let caps: Vec<String> = m
            .caps
            .iter()
            .map(|c| format!("+{}", c.to_ascii_lowercase()))
            .collect();
        let want: u64 = m.caps.iter().map(|c| 1u64 << cap_bit(c)).sum();
        let mut c = Command::new("nsenter");
        c.arg(format!("--target={}", self.init))
            .args(["--pid", "--mount", "--net", "--"])
            .args(["unshare", "--mount", "--propagation", "private"]);
        if own_netns {
            c.arg("--net");
        }
        c.args(["--", "bash", "-c", POD_SCRIPT, "pod"])
            .arg(bin)
            .args(args)
            .env("HOSTROOT", self.host_root())
            .env("CAPS", caps.join(","))
            .env("WANT_CAPEFF", format!("{want:016x}"))
            .env("RUN_AS", &m.run_as_user)
            .env("OWN_NETNS", if own_netns { "1" } else { "" })
            .env("NODE_NAME", "as-deployed-node")
            .stdin(Stdio::null());
        c
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A process the test started: killed and reaped on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Keeps the node's listen queue overflowing: a listener nobody accepts on, its accept queue
/// filled, then connection attempts whose SYNs the kernel drops (ListenOverflows/ListenDrops
/// of the node's namespace). Stopped on drop.
struct ListenDrops {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ListenDrops {
    fn start(node: &Node) -> ListenDrops {
        let stop = Arc::new(AtomicBool::new(false));
        let netns = File::open(node.netns()).expect("open netns");
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let mut held = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) {
                    if held.len() < 1024 {
                        held.push(s);
                    }
                }
            }
            drop(held);
            drop(listener);
        });
        ListenDrops {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ListenDrops {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs a command to completion within `secs`, killing it otherwise; returns its output.
fn output_within(mut cmd: Command, secs: u64) -> std::process::Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut p = Proc(child);
    let mut stdout = p.0.stdout.take().expect("stdout");
    let mut stderr = p.0.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(st) = p.0.try_wait().expect("try_wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "did not finish within {secs} s");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    }
}

/// Every collector completed; each status that is not `ok` is one this test explains, and in
/// a pod network namespace the kernel collector says its sysctls are not the host's.
fn assert_statuses(doc: &Value, own_netns: bool, context: &str) {
    let collectors = doc["collectors"].as_array().expect("collectors");
    let names: Vec<&str> = collectors
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for want in [
        "conntrack",
        "disk",
        "iptables",
        "kernel",
        "load",
        "memory",
        "runtime",
    ] {
        assert!(names.contains(&want), "{context}: no {want} in {names:?}");
    }
    for c in collectors {
        let name = c["name"].as_str().unwrap_or("");
        let status = c["status"].as_str().unwrap_or("");
        let message = c["message"].as_str().unwrap_or("");
        assert!(
            c["last_run"].is_string(),
            "{context}: {name} never completed a run: {c}"
        );
        if name == "kernel" && own_netns {
            assert_eq!(status, "degraded", "{context}: {c}");
            assert!(message.contains(KERNEL_NOT_HOSTS), "{context}: {c}");
            continue;
        }
        if status == "ok" {
            continue;
        }
        assert!(
            EXPLAINED
                .iter()
                .any(|(n, s, m, _)| *n == name && *s == status && message.contains(m)),
            "{context}: collector {name} is {status} for a reason this test does not expect: {message}"
        );
    }
}

fn finding<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding in {doc}"))
}

fn commands(f: &Value) -> Vec<String> {
    f["remediation"]["commands"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Variant (a) or (b), end to end: `check --format json`, then `serve` and its `/metrics` and
/// `/findings`.
fn run_as_deployed(own_netns: bool) {
    let name = if own_netns {
        "as_deployed_in_its_own_network_namespace"
    } else {
        "as_deployed_in_the_host_network_namespace"
    };
    if let Some(why) = skip_reason() {
        collectors::skip!("SKIP {name}: {why}");
        return;
    }
    let m = manifest();
    assert!(
        m.host_network,
        "the shipped DaemonSet runs with hostNetwork: true, which variant (a) reproduces"
    );
    assert_eq!(m.run_as_user, "0");
    let bin = crate::support::shipped_bin();
    let node = Node::start();
    node.stage();
    let host_root = node.host_root();
    let host_root_arg = format!("--host-root={}", host_root.display());
    let tables = node.legacy_tables();
    assert!(
        tables.split(',').any(|t| t == "raw"),
        "harness: raw not loaded in the node's namespace: {tables:?}"
    );

    // check --format json, while the node's listen queue overflows.
    let drops_before = node.listen_drops();
    let drops = ListenDrops::start(&node);
    std::thread::sleep(Duration::from_millis(300));
    let out = output_within(
        node.pod(
            &m,
            own_netns,
            &bin,
            &[
                "check",
                "--format",
                "json",
                &host_root_arg,
                "--interval",
                "2s",
            ],
        ),
        120,
    );
    drop(drops);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2 | 4..=6)),
        "check exited with {}: {stderr}",
        out.status
    );
    assert!(
        node.listen_drops() > drops_before,
        "harness: no listen drops in the node's namespace"
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check output is not JSON ({e}): {stderr}"));
    assert_statuses(&doc, own_netns, "check");
    // Exit code bit 4 exactly when a collector did not complete (the accepted, explained
    // non-ok statuses above still make the check incomplete, and say so).
    assert_eq!(
        code.unwrap_or(0) & 4 == 4,
        doc["complete"] == false,
        "exit {code:?} vs complete={}",
        doc["complete"]
    );

    // The legacy tables are the node's, not the pod's (which has none in variant b).
    assert_eq!(
        finding(&doc, "iptables.backend")["evidence"]["legacy_tables"],
        tables.as_str()
    );
    // Listen drops of the node's namespace, with its sysctls only when they are the node's.
    let f = finding(&doc, "kernel.listen_drops");
    let evidence = &f["evidence"];
    assert!(evidence["dropped"].as_f64().unwrap_or(0.0) >= 1.0, "{f}");
    let advice: Vec<String> = commands(f)
        .into_iter()
        .filter(|c| c.starts_with("sysctl -w"))
        .collect();
    if own_netns {
        assert!(evidence.get("somaxconn").is_none(), "{f}");
        assert!(evidence.get("tcp_max_syn_backlog").is_none(), "{f}");
        assert!(advice.is_empty(), "advice from a guess: {advice:?}");
    } else {
        assert_eq!(evidence["somaxconn"].as_u64(), Some(NODE_SOMAXCONN), "{f}");
        assert_eq!(
            evidence["tcp_max_syn_backlog"].as_u64(),
            Some(NODE_SYN_BACKLOG),
            "{f}"
        );
        assert_eq!(
            advice,
            vec![format!(
                "sysctl -w net.ipv4.tcp_max_syn_backlog={} net.core.somaxconn={}",
                NODE_SYN_BACKLOG * 2,
                NODE_SOMAXCONN * 2
            )]
        );
    }

    // serve, as the manifest's args say, scraped from inside the pod's network namespace.
    let serve = node.pod(
        &m,
        own_netns,
        &bin,
        &[
            "serve",
            &format!("--listen=0.0.0.0:{PORT}"),
            &host_root_arg,
            "--interval=1s",
        ],
    );
    let nsenter = Proc(
        {
            let mut serve = serve;
            serve.stdout(Stdio::null()).stderr(Stdio::null());
            serve
        }
        .spawn()
        .expect("spawn serve"),
    );
    let agent_pid = agent_pid(&nsenter);
    let pod_netns = PathBuf::from(format!("/proc/{agent_pid}/ns/net"));
    let get = |path: &'static str| {
        in_netns(&pod_netns, move || {
            http_get(SocketAddr::from(([127, 0, 0, 1], PORT)), path)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(get("/readyz"), Ok((200, _))) {
        assert!(Instant::now() < deadline, "serve not ready within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    if own_netns {
        // The pod's own namespace really differs from the node's in what is compared.
        let (somaxconn, tables) = in_netns(&pod_netns, || {
            (
                read_trim("/proc/sys/net/core/somaxconn"),
                std::fs::read_to_string("/proc/thread-self/net/ip_tables_names")
                    .unwrap_or_default(),
            )
        });
        assert_ne!(somaxconn, NODE_SOMAXCONN.to_string(), "harness");
        assert!(tables.trim().is_empty(), "harness: pod has tables {tables}");
    }
    node.udp_flows(UDP_FLOWS);
    // Conntrack entries: the agent's latest figure equals the node's count read at a moment
    // when nothing changed since the agent's run (a scrape over the node's loopback is itself
    // one more tracked connection in variant a; entries of the listen-drop phase expire).
    let mut seen = Vec::new();
    let matched = (0..15).any(|_| {
        std::thread::sleep(Duration::from_millis(1200));
        let node_count = node.conntrack_count();
        let (status, metrics) = get("/metrics").expect("GET /metrics");
        assert_eq!(status, 200);
        let agent = metric_value(&metrics, "node_doctor_conntrack_entries");
        seen.push((agent, node_count));
        agent == Some(node_count as f64)
    });
    assert!(matched, "conntrack entries (agent, node): {seen:?}");
    let last = seen.last().map(|s| s.1).unwrap_or(0);
    assert!(
        last >= UDP_FLOWS as u64,
        "harness: only {last} conntrack entries on the node"
    );
    let (status, body) = get("/findings").expect("GET /findings");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).expect("/findings JSON");
    assert_statuses(&doc, own_netns, "serve");
    assert_eq!(
        finding(&doc, "iptables.backend")["evidence"]["legacy_tables"],
        tables.as_str()
    );
    drop(nsenter);
    drop(node);
}

/// The host pid of the agent `nsenter` started: its one child, once that has exec'd
/// node-doctor (unshare, bash and setpriv all exec in place).
fn agent_pid(nsenter: &Proc) -> u32 {
    let children = format!("/proc/{0}/task/{0}/children", nsenter.0.id());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let child = std::fs::read_to_string(&children)
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok());
        if let Some(pid) = child {
            if std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "node-doctor")
            {
                return pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the pod did not start node-doctor within 15 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of an unlabelled sample in a Prometheus text exposition.
fn metric_value(exposition: &str, name: &str) -> Option<f64> {
    let samples: BTreeMap<&str, &str> = exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .collect();
    samples.get(name)?.trim().parse().ok()
}

/// (a) The shipped DaemonSet: `hostNetwork: true`.
#[test]
fn as_deployed_in_the_host_network_namespace() {
    run_as_deployed(false);
}

/// (b) The `hostNetwork: false` variant: a network namespace of its own.
#[test]
fn as_deployed_in_its_own_network_namespace() {
    run_as_deployed(true);
}
