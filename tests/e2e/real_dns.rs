//! The dns collector as deployed: the binary's `check`, in a network namespace of the test's
//! own (playing the node's), asks a DNS server of the test's own on the far side of a veth in a
//! second namespace — the kubelet's `clusterDNS` as a Service address reached over the node's
//! network. The server (Python, `DNS_SERVER` below) answers, drops UDP while TCP answers, or
//! holds every other AAAA query for 5 s (the first try of each probe lost, as the conntrack
//! race loses it). The host root is a directory whose `proc` is this machine's procfs and whose
//! kubelet config names the server; no other address is asked. Nothing outside the two
//! namespaces is touched, and both are deleted (with the veth) even when the test fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::support::{is_root, shipped_bin};

/// The test's DNS server (`scripts/dns-test-server.py`: `answer`, `drop` — UDP dropped, TCP
/// answered — or `delay-aaaa` — every odd AAAA query answered after 5 s); prints `ready` once
/// bound.
const DNS_SERVER: &str = include_str!("../../scripts/dns-test-server.py");

const SERVER_IP: &str = "10.254.53.2";

/// Two network namespaces joined by a veth: `node` (10.254.53.1) and `dns` (10.254.53.2).
struct Namespaces {
    node: String,
    dns: String,
    server: Option<Child>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Namespaces {
    fn new(tag: &str) -> Namespaces {
        let id = std::process::id();
        let ns = Namespaces {
            node: format!("nd-node-{tag}-{id}"),
            dns: format!("nd-dns-{tag}-{id}"),
            server: None,
        };
        ip(&["netns", "add", &ns.node]);
        ip(&["netns", "add", &ns.dns]);
        // Made inside the node namespace, so no interface ever appears in this machine's.
        let (a, b) = ("ndv-node", "ndv-dns");
        ip(&[
            "-n", &ns.node, "link", "add", a, "type", "veth", "peer", "name", b, "netns", &ns.dns,
        ]);
        ip(&["-n", &ns.node, "addr", "add", "10.254.53.1/24", "dev", a]);
        ip(&["-n", &ns.dns, "addr", "add", "10.254.53.2/24", "dev", b]);
        for (n, dev) in [(&ns.node, a), (&ns.dns, b)] {
            ip(&["-n", n, "link", "set", "lo", "up"]);
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        ns
    }

    /// Starts the DNS server in the `dns` namespace and waits for it to bind.
    fn serve(&mut self, mode: &str) {
        let mut child = Command::new("ip")
            .args([
                "netns", "exec", &self.dns, "python3", "-c", DNS_SERVER, SERVER_IP, mode,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the DNS server");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read ready");
        self.server = Some(child);
        assert_eq!(line.trim(), "ready", "the DNS server did not start");
    }

    /// `node-doctor check --collector dns` in the node namespace, on `root`.
    fn check(&self, root: &std::path::Path) -> serde_json::Value {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.node])
            .arg(shipped_bin())
            .args([
                "check",
                "--format",
                "json",
                "--collector",
                "dns",
                "--dns-probe-timeout",
                "1s",
            ])
            .arg("--host-root")
            .arg(root)
            .env_remove("NODE_NAME")
            .output()
            .expect("run node-doctor");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        for n in [&self.node, &self.dns] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// A host root whose `proc` is this machine's procfs (the agent judges it as a real node's)
/// and whose kubelet names the test's server as the cluster DNS.
fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/proc", d.path().join("proc")).expect("symlink proc");
    let kubelet = d.path().join("var/lib/kubelet");
    std::fs::create_dir_all(&kubelet).expect("mkdir");
    std::fs::write(
        kubelet.join("config.yaml"),
        format!("kind: KubeletConfiguration\nclusterDNS:\n- {SERVER_IP}\nclusterDomain: cluster.local\n"),
    )
    .expect("write kubelet config");
    d
}

fn skip() -> bool {
    if !is_root() {
        collectors::skip!("SKIP real_dns: needs root (network namespaces)");
        return true;
    }
    if Command::new("python3").arg("-V").output().is_err() {
        collectors::skip!("SKIP real_dns: needs python3");
        return true;
    }
    false
}

fn dns_findings(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["collector"] == "dns")
        .collect()
}

fn status(v: &serde_json::Value) -> String {
    let c = v["collectors"]
        .as_array()
        .expect("collectors")
        .iter()
        .find(|c| c["name"] == "dns")
        .expect("the dns collector");
    format!("{} {}", c["status"], c["message"])
}

#[test]
fn real_dns_answering_is_quiet() {
    if skip() {
        return;
    }
    let mut ns = Namespaces::new("ok");
    ns.serve("answer");
    let r = root();
    let v = ns.check(r.path());
    assert!(status(&v).starts_with("\"ok\""), "{}", status(&v));
    assert!(dns_findings(&v).is_empty(), "{:#?}", dns_findings(&v));
}

#[test]
fn real_dns_udp_dropped_while_tcp_answers() {
    if skip() {
        return;
    }
    let mut ns = Namespaces::new("drop");
    ns.serve("drop");
    let r = root();
    let v = ns.check(r.path());
    let f = dns_findings(&v);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0]["id"], "dns.no_answer");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(f[0]["subject"], format!("{SERVER_IP}:53"));
    assert_eq!(f[0]["evidence"]["tcp"], "answered");
    assert_eq!(f[0]["evidence"]["unanswered_probes"], 2);
    // That the probe waits its 1 s try and no more is shown by ordering, not a wall clock:
    // in `real_dns_first_try_held_for_5s_is_the_five_second_delay` an answer held 5 s must
    // come after the try gave up (it is counted as lost and retried).
}

#[test]
fn real_dns_first_try_held_for_5s_is_the_five_second_delay() {
    if skip() {
        return;
    }
    let mut ns = Namespaces::new("delay");
    ns.serve("delay-aaaa");
    let r = root();
    let v = ns.check(r.path());
    let f = dns_findings(&v);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0]["id"], "dns.five_second_delay");
    assert_eq!(f[0]["severity"], "warning");
    assert_eq!(f[0]["evidence"]["retried_probes"], 2);
    assert_eq!(f[0]["evidence"]["pair_lost_probes"], 2);
    let summary = f[0]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("exactly one of the A/AAAA pair"),
        "{summary}"
    );
}
