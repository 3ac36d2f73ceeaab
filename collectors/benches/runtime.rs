//! Bench (not a test): what one collection of the `runtime` collector costs on a staged busy
//! node (2,000 processes, 300 pods with 40 files each under their pod directories), with the
//! probe answering at once (the network calls are the agent's and take what the daemons
//! take). Prints the measured CPU time of the first collection (a walk of the process table
//! and of the pod directories), of the steady collections (the remembered daemons confirmed;
//! no walk pass due: one starts every 5 minutes), and of a collection that walks the whole
//! pod tree.
//!
//! Run: `cargo bench -p collectors --bench runtime`

use std::sync::Arc;
use std::time::Duration;

use collectors::runtime::probe::{
    ContainerdReply, DockerReply, HealthzReply, Outcome, ProbePlan, ProbeReport, Reply,
    RuntimeProbe, Target,
};
use collectors::runtime::{RuntimeCollector, RuntimeConfig};
use collectors::{CollectContext, Collector, HostNetns, HostPaths};
use nix::sys::resource::{getrusage, UsageWho};

const PROCESSES: u32 = 2_000;
const PODS: u32 = 300;
const FILES_PER_POD: u32 = 40;

fn cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// Answers every target at once, healthy.
#[derive(Debug)]
struct Instant;

impl RuntimeProbe for Instant {
    fn probe(&self, plan: &ProbePlan) -> ProbeReport {
        let ok = Outcome::Answered {
            latency: Duration::from_millis(1),
        };
        ProbeReport {
            replies: plan
                .targets
                .iter()
                .map(|t| match t {
                    Target::Docker { .. } => Reply::Docker(DockerReply {
                        ping: ok.clone(),
                        version: Some("20.10.24".into()),
                        running: Some(Vec::new()),
                    }),
                    Target::Containerd { .. } | Target::Cri { .. } => {
                        Reply::Containerd(ContainerdReply {
                            version_call: ok.clone(),
                            version: Some("1.6.20".into()),
                            tasks: Some(Vec::new()),
                        })
                    }
                    Target::KubeletHealthz { .. } => Reply::Healthz(HealthzReply {
                        outcome: ok.clone(),
                        status: Some(200),
                    }),
                })
                .collect(),
        }
    }
}

fn write(root: &std::path::Path, p: &str, text: &str) {
    let p = root.join(p.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn node() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("temp dir");
    let r = t.path();
    write(r, "/proc/uptime", "86400.00 1.00\n");
    write(
        r,
        "/var/lib/kubelet/config.yaml",
        "kind: KubeletConfiguration\n",
    );
    write(
        r,
        "/etc/cni/net.d/10-flannel.conflist",
        r#"{"name":"cbr0","plugins":[{"type":"flannel"}]}"#,
    );
    for pid in 100..100 + PROCESSES {
        let comm = match pid {
            100 => "kubelet",
            101 => "dockerd",
            102 => "containerd",
            _ => "java",
        };
        write(r, &format!("/proc/{pid}/comm"), &format!("{comm}\n"));
        write(
            r,
            &format!("/proc/{pid}/stat"),
            &format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 {pid}00 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
        );
        write(
            r,
            &format!("/proc/{pid}/cmdline"),
            &format!("/usr/bin/{comm}\0"),
        );
    }
    for p in 0..PODS {
        for f in 0..FILES_PER_POD {
            write(
                r,
                &format!("/var/lib/kubelet/pods/pod-{p}/volumes/kubernetes.io~empty-dir/d/f{f}"),
                "x",
            );
        }
    }
    for s in ["/var/run/docker.sock", "/run/containerd/containerd.sock"] {
        let p = r.join(s.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        drop(std::os::unix::net::UnixListener::bind(&p).expect("bind"));
    }
    t
}

fn main() {
    let t = node();
    let ctx = CollectContext::new("node-1", HostNetns::NotProcfs);
    let collector = |walk_interval: Duration| {
        RuntimeCollector::new(
            collectors::Node::new(HostPaths::new(t.path())),
            RuntimeConfig {
                walk_interval,
                ..RuntimeConfig::default()
            },
            Arc::new(Instant),
        )
    };
    let timed = |c: &mut RuntimeCollector| {
        let before = cpu();
        let out = c.collect(&ctx);
        assert!(out.findings.is_empty(), "{:#?}", out.findings);
        cpu() - before
    };
    // Default pacing: the first collection walks the process table and starts a walk pass;
    // the next ones confirm the daemons and wait for the next pass (every 5 minutes).
    let mut c = collector(RuntimeConfig::default().walk_interval);
    let first = timed(&mut c);
    let mut steady: Vec<Duration> = (0..40).map(|_| timed(&mut c)).collect();
    steady.sort();
    // A walk pass on every collection: what one pass costs.
    let mut w = collector(Duration::ZERO);
    timed(&mut w);
    let mut pass: Vec<Duration> = (0..10).map(|_| timed(&mut w)).collect();
    pass.sort();
    let entries = PODS * (FILES_PER_POD + 4);
    println!(
        "runtime: {PROCESSES} processes, {PODS} pods x {FILES_PER_POD} files (~{entries} walk entries)"
    );
    println!("  first collection (process table walked, a walk pass): {first:?} CPU");
    println!(
        "  steady collections (daemons confirmed by pid, no walk due): median {:?}, max {:?} CPU",
        steady[steady.len() / 2],
        steady[steady.len() - 1]
    );
    println!(
        "  a collection with a whole walk pass (one pass fits the 20,000-entry budget): median {:?} CPU",
        pass[pass.len() / 2]
    );
}
