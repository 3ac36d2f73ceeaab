//! The `runtime` collector: container runtime and kubelet health (handbook 002: the
//! ContainerCreating, Terminating and health-check sections, the disk-full and kube-proxy
//! sections; words in `collectors/rules/runtime.toml`, situations in
//! `docs/collectors/runtime.md`).
//!
//! It builds on the readers of the runtimes' and the kubelet's configuration
//! ([`crate::config`]) and the node's discovery of them ([`crate::node::discover`]).
//!
//! One collection:
//! 1. [`procs`]: the daemons' processes, confirmed by pid and start time (a scan of
//!    `/proc` only when one is gone, one is wanted, or every `rescan_samples`);
//! 2. [`runtimes`]: the runtimes this node uses and their sockets;
//! 3. one [`probe::ProbePlan`] for all of them, the kubelet's CRI endpoint and `/healthz`,
//!    asked through the agent's [`probe::RuntimeProbe`] (this crate knows no network
//!    protocol): every target within one short deadline, concurrently;
//! 4. the slower, bounded readings: CNI configuration ([`cni`]), immutable files under pod
//!    and container directories ([`immutable`], a resumable walk), hostNetwork port
//!    conflicts ([`ports`]), kube-proxy's IPVS settings and CPU ([`kube_proxy`]), duplicate
//!    installs ([`install`]);
//! 5. [`judge::judge`] turns the typed [`Sample`] (its types in [`sample`]: what was read,
//!    which tests build directly) into drafts under the [`thresholds`]; `ctx.render` gives
//!    them the rule file's words.
//!
//! The node logs' findings (PLEG, CNI and runtime-not-ready from the kubelet's log,
//! same-name containers, image pulls, ttrpc) are judged by `crate::nodelog`'s judge with
//! what this sample knows live ([`logs`]), and joined to this judge's drafts.

pub mod cni;
pub mod immutable;
pub mod install;
pub mod judge;
pub mod kube_proxy;
pub mod logs;
pub mod ports;
pub mod probe;
pub mod restarts;
pub mod runtimes;
pub mod sample;
pub mod thresholds;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::config::{flag_value, kubelet};
use crate::metric::Metric;
use crate::node::discover::Locations;
use crate::node::follow::{self, Followed, Rescan};
use crate::node::Node;
use crate::nodelog::LogSample;
use crate::pods::{PodDirectory, PodsConfig};
use crate::proc::{cgroup, net_unix, uptime};
use crate::rules::Draft;
use crate::sys::statvfs::StatFsFn;

use probe::{Outcome, ProbePlan, ProbeReport, RuntimeProbe, Target, TaskStatus};
pub use sample::Sample;
use sample::{
    CniSample, Daemon, DiskFill, Healthz, ImmutableFile, KubeProxySample, KubeletSample,
    PortConflict, PortHolder, RuntimeSample, SyncSample,
};
pub use thresholds::Thresholds;

/// At most this many processes per daemon name are followed (a node runs one of each; two
/// containerd are a docker-managed one beside the system's).
const MAX_PER_DAEMON: usize = 4;
/// Configuration of the runtime collector.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    pub thresholds: Thresholds,
    /// Runtime and kubelet configuration files (`--docker-daemon-json`, …).
    pub locations: Locations,
    /// `--docker-socket`: dockerd's API socket (host path); naming it says this node uses
    /// docker there.
    pub docker_socket: Option<String>,
    /// `--containerd-socket`: containerd's socket (host path), likewise.
    pub containerd_socket: Option<String>,
    /// The CNI configuration directory (host path), unless the kubelet's `--cni-conf-dir`.
    pub cni_conf_dir: String,
    /// The deadline of each daemon's calls (all of them together).
    pub probe_timeout: Duration,
    /// Walk the process table at least every this many collections.
    pub rescan_samples: u32,
    /// Entries and time the immutable-file walk may spend per collection.
    pub walk_entries: usize,
    pub walk_time: Duration,
    /// A new pass of the immutable-file walk starts at most this often (files already found
    /// are confirmed every collection).
    pub walk_interval: Duration,
    /// At most this many flagged files are remembered and reported.
    pub max_immutable: usize,
    /// The containerd namespace of docker's containers.
    pub docker_namespace: String,
    /// `/proc/<pid>/fd` links read per collection to find a port's process.
    pub fd_links: usize,
    /// The node's logs: where, how much per collection, the window ([`logs`]).
    pub node_log: crate::nodelog::NodeLogConfig,
    /// When a log finding is current ([`crate::nodelog::judge`]).
    pub log_thresholds: crate::nodelog::Thresholds,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            thresholds: Thresholds::default(),
            locations: Locations::default(),
            docker_socket: None,
            containerd_socket: None,
            cni_conf_dir: "/etc/cni/net.d".to_string(),
            probe_timeout: Duration::from_secs(2),
            rescan_samples: 20,
            walk_entries: 20_000,
            walk_time: Duration::from_millis(200),
            walk_interval: Duration::from_secs(300),
            max_immutable: 32,
            docker_namespace: "moby".to_string(),
            fd_links: 200_000,
            node_log: crate::nodelog::NodeLogConfig::default(),
            log_thresholds: crate::nodelog::Thresholds::default(),
        }
    }
}

/// The `comm` of containerd's shims: `containerd-shim`, `containerd-shim-runc-v2` (cut to 15
/// bytes) and docker 18's `docker-containerd-shim`.
const SHIM_COMMS: &[&str] = &["containerd-shim", "docker-containe"];
/// Shims whose arguments are read per collection, at most (their `cmdline` is remembered per
/// process by the node's table).
const MAX_SHIMS: usize = 256;
/// Entries of `/etc/systemd/system` looked at for `*.wants` directories, at most.
const MAX_UNIT_DIRS: usize = 512;

/// Runtimes remembered from earlier collections, at most.
const MAX_SEEN: usize = 8;

/// The runtime collector.
pub struct RuntimeCollector {
    node: Node,
    config: RuntimeConfig,
    probe: Arc<dyn RuntimeProbe>,
    procs: Followed,
    /// Daemons wanted but not found in the last collection (the next refresh looks for them).
    missing: Vec<&'static str>,
    seen: BTreeMap<(Daemon, String), Option<String>>,
    kubelet_seen: bool,
    /// Restarts of the kubelet and the runtimes, from their processes.
    restarts: restarts::Restarts,
    /// Differences between dockerd and containerd in the last collection: (id, in docker).
    sync_previous: BTreeSet<(String, bool)>,
    kube_proxy_previous: Option<(u32, u64, u64, Instant)>,
    walker: immutable::Walker,
    /// When the current (or last) walk pass started.
    walk_started: Option<Instant>,
    flagged: BTreeMap<PathBuf, immutable::Flagged>,
    /// Socket inode -> pid, for the listeners of declared ports.
    owners: BTreeMap<u64, u32>,
    pods: Option<PodDirectory>,
    ticks: u64,
    statfs: Box<StatFsFn>,
    /// The node's logs, followed across collections.
    logs: crate::nodelog::NodeLogWatcher,
    /// Unix seconds now (the wall clock; tests fix it).
    clock: Box<dyn Fn() -> i64 + Send>,
}

/// The kubelet as one collection sees it.
struct KubeletView {
    proc: Option<follow::Proc>,
    args: Vec<String>,
    conf: Option<kubelet::Config>,
    /// This node runs a kubelet (its process, its configuration, or it was seen before).
    here: bool,
    /// Its container runtime endpoint.
    endpoint: Option<String>,
}

/// What one collection asks the daemons, and where each answer will be.
struct Asked {
    plan: ProbePlan,
    probed: Vec<Probed>,
    cri_target: Option<usize>,
    healthz: Option<Healthz>,
    healthz_target: Option<usize>,
}

/// One runtime as probed: its instance, the target index in the plan (when asked) or the
/// outcome decided before asking (no socket).
struct Probed {
    inst: runtimes::Instance,
    target: Result<usize, Outcome>,
}

impl RuntimeCollector {
    pub fn new(node: Node, config: RuntimeConfig, probe: Arc<dyn RuntimeProbe>) -> Self {
        let logs =
            crate::nodelog::NodeLogWatcher::new(node.host().clone(), config.node_log.clone());
        let procs = Followed::new(
            crate::names::DAEMONS,
            MAX_PER_DAEMON,
            Rescan::Every(config.rescan_samples),
            "runtime/procs",
        );
        let ticks = node.facts().clock_ticks;
        RuntimeCollector {
            logs,
            clock: Box::new(unix_now),
            node,
            config,
            probe,
            procs,
            missing: Vec::new(),
            seen: BTreeMap::new(),
            kubelet_seen: false,
            restarts: restarts::Restarts::default(),
            sync_previous: BTreeSet::new(),
            kube_proxy_previous: None,
            walker: immutable::Walker::new(),
            walk_started: None,
            flagged: BTreeMap::new(),
            owners: BTreeMap::new(),
            pods: None,
            ticks,
            statfs: Box::new(crate::sys::statvfs::usage),
        }
    }

    /// Replaces the wall clock the node's log lines are dated against (Unix seconds).
    pub fn with_clock(mut self, f: impl Fn() -> i64 + Send + 'static) -> Self {
        self.clock = Box::new(f);
        self
    }

    /// Replaces `statvfs(2)` (fake hosts have no real disks to fill).
    pub fn with_statfs(
        mut self,
        f: impl Fn(&std::path::Path) -> std::io::Result<crate::sys::statvfs::FsUsage> + Send + 'static,
    ) -> Self {
        self.statfs = Box::new(f);
        self
    }

    /// The outcome without asking, when the socket is not there to ask.
    fn socket_precheck(&self, host_path: &str) -> Result<PathBuf, Outcome> {
        use std::os::unix::fs::FileTypeExt;
        let agent = self.node.host().resolve(host_path);
        match std::fs::symlink_metadata(&agent) {
            Ok(m) if m.file_type().is_socket() => Ok(agent),
            Ok(_) => Err(Outcome::NotSocket),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Outcome::NoSocket),
            // Permission denied on the way: let the probe say what it gets.
            Err(_) => Ok(agent),
        }
    }

    /// Reads the host and asks the daemons: the sample and the reasons for a degraded
    /// status.
    fn read_host(&mut self, host_netns: HostNetns, node: &str) -> (Sample, Vec<String>) {
        let mut notes = Vec::new();
        let t0 = Instant::now();
        let refresh = self.procs.refresh(&self.node, &self.missing);
        if refresh.unreadable {
            notes.push(format!(
                "{} cannot be listed: the daemons' processes are unknown (run with hostPID and the host's /proc)",
                self.node.host().proc().display()
            ));
        }
        let up = uptime::read(self.node.host())
            .ok()
            .map(|u| u.since_boot.as_secs_f64());
        let k = self.kubelet_view(&mut notes);
        let instances = self.find_runtimes(&k, &mut notes);
        let asked = self.plan(&instances, &k, host_netns, &mut notes);
        let report = if asked.plan.targets.is_empty() {
            ProbeReport::default()
        } else {
            self.probe.probe(&asked.plan)
        };

        let mut sample = Sample {
            runtimes: self.runtime_samples(&asked.probed, &report, &mut notes),
            ..Sample::default()
        };
        self.count_restarts(&mut sample.runtimes, up);
        self.missing = sample
            .runtimes
            .iter()
            .filter(|r| r.pid.is_none())
            .map(|r| r.daemon.as_str())
            .collect();
        if k.here && k.proc.is_none() {
            self.missing.push("kubelet");
        }
        sample.sync = self.sync(&asked.probed, &report);
        if asked
            .probed
            .iter()
            .any(|p| p.inst.daemon == Daemon::Dockerd)
        {
            sample.duplicates = self.duplicates();
        }
        if k.here {
            sample.kubelet = Some(self.kubelet(
                k.proc.as_ref(),
                asked.healthz,
                asked.healthz_target,
                &report,
                up,
            ));
            sample.cni = Some(self.cni(&k.args, asked.cri_target, &report));
        }
        let kubelet_root = flag_value(&k.args, "--root-dir")
            .unwrap_or_else(|| kubelet::DEFAULT_ROOT_DIR.to_string());
        sample.immutable = self.immutable(&asked.probed, k.here.then_some(kubelet_root.as_str()));
        let static_dir = kubelet::static_pod_path(&k.args, k.conf.as_ref())
            .or_else(|| k.here.then(|| kubelet::DEFAULT_STATIC_POD_PATH.to_string()));
        sample.port_conflicts = self.ports(&asked.probed, static_dir.as_deref(), node, &mut notes);
        sample.kube_proxy = self.kube_proxy();

        tracing::trace!(
            elapsed_ms = t0.elapsed().as_millis() as u64,
            "runtime sampled"
        );
        (sample, notes)
    }

    /// The kubelet as this collection sees it: its process, flags and configuration file.
    fn kubelet_view(&mut self, notes: &mut Vec<String>) -> KubeletView {
        let proc = self.procs.first("kubelet").cloned();
        let args = proc.as_ref().map(|p| p.args.clone()).unwrap_or_default();
        let conf_path = self
            .config
            .locations
            .kubelet_config
            .clone()
            .or_else(|| flag_value(&args, "--config"))
            .unwrap_or_else(|| kubelet::DEFAULT_CONFIG.to_string());
        let conf = match kubelet::read_config(self.node.host(), &conf_path) {
            Ok(c) => c,
            Err(e) => {
                notes.push(format!(
                    "{e}; the kubelet's settings are its flags and defaults"
                ));
                None
            }
        };
        let here = proc.is_some() || conf.is_some() || self.kubelet_seen;
        self.kubelet_seen |= proc.is_some();
        let endpoint = kubelet::runtime_endpoint(&args, conf.as_ref());
        KubeletView {
            proc,
            args,
            conf,
            here,
            endpoint,
        }
    }

    /// The runtimes this node uses ([`runtimes::find`]).
    fn find_runtimes(&self, k: &KubeletView, notes: &mut Vec<String>) -> Vec<runtimes::Instance> {
        let inputs = runtimes::Inputs {
            procs: &self.procs,
            locations: &self.config.locations,
            docker_socket: self.config.docker_socket.as_deref(),
            containerd_socket: self.config.containerd_socket.as_deref(),
            kubelet_endpoint: k.endpoint.as_deref(),
            kubelet_docker_endpoint: flag_value(&k.args, "--docker-endpoint"),
            seen: &self.seen,
            docker_signs: &self.docker_signs(),
        };
        let node = &self.node;
        let mut listening = || {
            node.unix_sockets().ok().map(|sockets| {
                net_unix::listening(&sockets)
                    .map(str::to_string)
                    .collect::<BTreeSet<String>>()
            })
        };
        runtimes::find(self.node.host(), &inputs, &mut listening, notes)
    }

    /// Files the node's logs name as impossible to remove (`remove <path>: operation not
    /// permitted`), checked for the attribute wherever they lie under the host root: docker's
    /// `data-root` from daemon.json (`/data/docker` in the handbook) as much as the
    /// kubelet's and the runtimes' default directories. Paths are host text: resolved under
    /// the root only, regular files only ([`immutable::named_file`]), at most
    /// [`immutable::MAX_NAMED`] per collection.
    fn named_in_logs(&self, log: &LogSample, sample: &mut Sample) {
        use crate::nodelog::patterns::EventKind;
        let mut named: Vec<&crate::nodelog::sample::Incident> = log
            .incidents
            .iter()
            .filter(|i| i.kind == EventKind::RemoveNotPermitted)
            .collect();
        named.sort_by_key(|i| std::cmp::Reverse(i.last_seen));
        for inc in named.into_iter().take(immutable::MAX_NAMED) {
            let by = Some((inc.ident.clone(), inc.file.clone()));
            if let Some(f) = sample.immutable.iter_mut().find(|f| f.path == inc.subject) {
                f.named_by = by;
                continue;
            }
            let Some(agent) = immutable::named_file(self.node.host(), &inc.subject) else {
                continue;
            };
            let Some((i, a)) = immutable::attributes(&agent) else {
                continue;
            };
            if !(i || a) {
                continue;
            }
            let pod_uid = inc
                .subject
                .split("/pods/")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .filter(|u| crate::names::is_pod_uid(u))
                .map(String::from);
            sample.immutable.push(ImmutableFile {
                path: inc.subject.clone(),
                immutable: i,
                append_only: a,
                is_dir: false,
                pod_uid,
                pod: None,
                container_id: None,
                named_by: by,
            });
        }
    }

    /// Signs of docker when no dockerd runs: the shims of its containers (`-namespace moby`,
    /// live-restore keeps them) and its unit enabled on a host booted with systemd
    /// (`/run/systemd/system`, what `sd_booted()` tests). Nothing is read while dockerd runs.
    ///
    /// The process table is listed for the shims only when containerd's state holds task
    /// directories in docker's namespace (`<state>/io.containerd.runtime.v2.task/moby/<id>`,
    /// one per live task, on a tmpfs): a containerd-only node pays nothing.
    fn docker_signs(&self) -> runtimes::DockerSigns {
        if self.procs.first("dockerd").is_some() {
            return runtimes::DockerSigns::default();
        }
        let unit = enabled_unit(self.node.host(), "docker.service");
        let ns = self.config.docker_namespace.as_str();
        if self.moby_task_dirs(ns) == 0 {
            return runtimes::DockerSigns {
                moby_shims: 0,
                unit,
            };
        }
        let procs = self.node.processes();
        let moby_shims = procs
            .named("runtime/shims", SHIM_COMMS)
            .unwrap_or_default()
            .iter()
            .take(MAX_SHIMS)
            .filter(|p| {
                procs
                    .args(p)
                    .is_some_and(|a| flag_value(&a, "-namespace").as_deref() == Some(ns))
            })
            .count() as u32;
        runtimes::DockerSigns { moby_shims, unit }
    }

    /// Task directories of containerd namespace `ns` under the states of the containerds
    /// this node may run: the default, docker's own (`/var/run/docker/containerd/daemon`),
    /// the configured one's and each running one's (`--state`, its `--config`).
    fn moby_task_dirs(&self, ns: &str) -> usize {
        use crate::config::containerd;
        let host = self.node.host();
        let state_of = |conf: &str| {
            containerd::read(host, conf)
                .ok()
                .flatten()
                .and_then(|c| c.state)
        };
        let mut states: BTreeSet<String> = BTreeSet::from([
            containerd::DEFAULT_STATE.to_string(),
            format!(
                "{}/containerd/daemon",
                crate::config::docker::DEFAULT_EXEC_ROOT
            ),
        ]);
        states.extend(state_of(&self.config.locations.containerd_config));
        for p in self.procs.get("containerd") {
            let conf = flag_value(&p.args, "--config").or_else(|| flag_value(&p.args, "-c"));
            states
                .extend(flag_value(&p.args, "--state").or_else(|| conf.and_then(|c| state_of(&c))));
        }
        states
            .iter()
            .flat_map(|st| {
                let st = st.trim_end_matches('/');
                [
                    format!("{st}/io.containerd.runtime.v2.task/{ns}"),
                    format!("{st}/io.containerd.runtime.v1.linux/{ns}"),
                ]
            })
            .map(|d| {
                dir_names(&host.resolve(d), MAX_SHIMS)
                    .iter()
                    .filter(|id| crate::names::is_container_id(id))
                    .count()
            })
            .sum()
    }

    /// One plan for everything to ask: each runtime, the kubelet's CRI endpoint (once,
    /// cri-dockerd's own target when it is that) and its `/healthz`.
    fn plan(
        &self,
        instances: &[runtimes::Instance],
        k: &KubeletView,
        host_netns: HostNetns,
        notes: &mut Vec<String>,
    ) -> Asked {
        let mut plan = ProbePlan {
            targets: Vec::new(),
            timeout: self.config.probe_timeout,
        };
        let containerd_sockets: BTreeSet<&str> = instances
            .iter()
            .filter(|i| i.daemon == Daemon::Containerd)
            .map(|i| i.socket.as_str())
            .collect();
        let docker_uses: BTreeSet<&str> = instances
            .iter()
            .filter(|i| i.daemon == Daemon::Dockerd)
            .filter_map(|i| i.containerd.as_deref())
            .collect();
        let mut probed = Vec::new();
        for inst in instances {
            let target = self.socket_precheck(&inst.socket).map(|agent| {
                plan.targets.push(match inst.daemon {
                    Daemon::Dockerd => Target::Docker {
                        socket: agent,
                        list_running: inst
                            .containerd
                            .as_deref()
                            .is_some_and(|c| containerd_sockets.contains(c)),
                    },
                    Daemon::Containerd => Target::Containerd {
                        socket: agent,
                        tasks_namespace: docker_uses
                            .contains(inst.socket.as_str())
                            .then(|| self.config.docker_namespace.clone()),
                    },
                    Daemon::CriDockerd => Target::Cri { socket: agent },
                });
                plan.targets.len() - 1
            });
            probed.push(Probed {
                inst: inst.clone(),
                target,
            });
        }
        let cri_socket = k
            .here
            .then(|| {
                k.endpoint
                    .as_deref()
                    .and_then(runtimes::endpoint_path)
                    .or_else(|| {
                        containerd_sockets
                            .contains(crate::config::containerd::DEFAULT_SOCKET)
                            .then(|| crate::config::containerd::DEFAULT_SOCKET.to_string())
                    })
            })
            .flatten();
        let shim = cri_socket.as_deref().and_then(|s| {
            probed.iter().find_map(|p| {
                (p.inst.daemon == Daemon::CriDockerd && p.inst.socket == s)
                    .then_some(p.target.as_ref().ok().copied())
                    .flatten()
            })
        });
        let cri_target = shim.or_else(|| {
            let agent = self.socket_precheck(cri_socket.as_deref()?).ok()?;
            plan.targets.push(Target::Cri { socket: agent });
            Some(plan.targets.len() - 1)
        });
        let healthz = k
            .here
            .then(|| self.healthz(k, host_netns, &mut plan, notes));
        let healthz_target = match healthz {
            Some(Healthz::Probed { .. }) => Some(plan.targets.len() - 1),
            _ => None,
        };
        Asked {
            plan,
            probed,
            cri_target,
            healthz,
            healthz_target,
        }
    }

    /// The kubelet's `/healthz`: planned when it is on and reachable from here.
    fn healthz(
        &self,
        k: &KubeletView,
        host_netns: HostNetns,
        plan: &mut ProbePlan,
        notes: &mut Vec<String>,
    ) -> Healthz {
        match kubelet::healthz(&k.args, k.conf.as_ref()) {
            Err(e) => Healthz::BadConfig(e),
            Ok(None) => Healthz::Disabled,
            Ok(Some(_)) if !host_netns.sysctls_are_hosts() => {
                notes.push(format!(
                    "the kubelet's /healthz was not checked: node-doctor is not in the host's network namespace ({}), so 127.0.0.1 is not the node's; run the DaemonSet with hostNetwork: true",
                    host_netns.as_str()
                ));
                Healthz::NotFromHere
            }
            Ok(Some(addr)) => {
                plan.targets.push(Target::KubeletHealthz { addr });
                Healthz::Probed {
                    addr: addr.to_string(),
                    outcome: Outcome::Failed("not asked".into()),
                    status: None,
                }
            }
        }
    }

    /// Each runtime's answer, version and data directory's fill; the ones that answered
    /// or run are remembered.
    fn runtime_samples(
        &mut self,
        probed: &[Probed],
        report: &ProbeReport,
        notes: &mut Vec<String>,
    ) -> Vec<RuntimeSample> {
        let no_answer = || Outcome::Failed("no answer from the probe".into());
        let mut out = Vec::new();
        for p in probed {
            let (outcome, version) = match p.target {
                Err(ref o) => (o.clone(), None),
                Ok(i) => match p.inst.daemon {
                    Daemon::Dockerd => report
                        .docker(i)
                        .map_or((no_answer(), None), |d| (d.ping.clone(), d.version.clone())),
                    Daemon::Containerd => report.containerd(i).map_or((no_answer(), None), |c| {
                        (c.version_call.clone(), c.version.clone())
                    }),
                    Daemon::CriDockerd => report.cri(i).map_or((no_answer(), None), |c| {
                        (c.version_call.clone(), c.runtime.clone().map(|v| v.1))
                    }),
                },
            };
            if let Outcome::Failed(why) = &outcome {
                notes.push(format!(
                    "{} at {} could not be asked: {why}",
                    p.inst.daemon.as_str(),
                    p.inst.socket
                ));
            }
            if p.inst.pid.is_some() || outcome.answered() {
                self.remember(p.inst.daemon, &p.inst.socket, p.inst.data_dir.clone());
            }
            let data_dir = p.inst.data_dir.as_ref().and_then(|d| {
                let u = (self.statfs)(&self.node.host().resolve(d)).ok()?;
                Some(DiskFill {
                    path: d.clone(),
                    used_percent: u.used_percent(),
                })
            });
            out.push(RuntimeSample {
                daemon: p.inst.daemon,
                socket: p.inst.socket.clone(),
                why: p.inst.why.iter().copied().collect(),
                pid: p.inst.pid,
                outcome,
                timeout: self.config.probe_timeout,
                version,
                data_dir,
                moby_shims: p.inst.moby_shims,
                restarts_in_window: 0,
            });
        }
        out
    }

    /// Each runtime's restarts in the window, from its process's pid and start time; forgets
    /// every daemon's restarts older than the window (the kubelet's too).
    fn count_restarts(&mut self, runtimes: &mut [RuntimeSample], uptime: Option<f64>) {
        let ticks = self.ticks as f64;
        for r in runtimes.iter_mut() {
            let name = r.daemon.as_str();
            let proc = r.pid.and_then(|pid| {
                self.procs
                    .get(name)
                    .iter()
                    .find(|p| p.pid == pid)
                    .map(|p| (p.pid, p.start_ticks))
            });
            self.restarts.observe(name, proc, ticks);
        }
        let window = self.config.thresholds.kubelet_restart_window.as_secs_f64();
        self.restarts.prune(uptime, window);
        for r in runtimes.iter_mut() {
            r.restarts_in_window = self.restarts.count(r.daemon.as_str());
        }
    }

    /// Duplicate installs of dockerd and containerd beside the running ones.
    fn duplicates(&self) -> Vec<sample::DuplicateInstall> {
        let mut running = Vec::new();
        for (name, comm) in [("dockerd", "dockerd"), ("containerd", "containerd")] {
            if let Some(exe) = self
                .procs
                .first(comm)
                .and_then(|p| install::exe(self.node.host(), p.pid))
            {
                running.push((name, exe));
            }
        }
        install::duplicates(self.node.host(), &running)
    }

    /// The kubelet's CNI configuration and the runtime's NetworkReady condition.
    fn cni(&self, k_args: &[String], cri_target: Option<usize>, report: &ProbeReport) -> CniSample {
        let plugin = flag_value(k_args, "--network-plugin");
        let conf_dir = flag_value(k_args, "--cni-conf-dir")
            .unwrap_or_else(|| self.config.cni_conf_dir.clone());
        let dir = match plugin.as_deref() {
            Some(p) if !p.is_empty() && p != "cni" => sample::CniDir::NotUsed,
            _ => cni::check(&self.node.host().resolve(&conf_dir), &conf_dir),
        };
        let network_ready = cri_target
            .and_then(|i| report.cri(i))
            .and_then(|c| c.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.kind == "NetworkReady").cloned());
        CniSample {
            conf_dir,
            dir,
            network_ready,
        }
    }

    fn remember(&mut self, daemon: Daemon, socket: &str, data_dir: Option<String>) {
        let key = (daemon, socket.to_string());
        if !self.seen.contains_key(&key) && self.seen.len() >= MAX_SEEN {
            return;
        }
        self.seen.insert(key, data_dir);
    }

    /// dockerd's running containers against containerd's tasks in docker's namespace; a
    /// difference is reported when it held in the previous collection too (a container
    /// starting or stopping between the two calls is not one).
    fn sync(&mut self, probed: &[Probed], report: &ProbeReport) -> Option<SyncSample> {
        let docker = probed.iter().find_map(|p| {
            let i = *p.target.as_ref().ok()?;
            (p.inst.daemon == Daemon::Dockerd)
                .then(|| report.docker(i))
                .flatten()
                .and_then(|d| d.running.clone())
                .map(|r| (p, r))
        });
        let Some((d, running)) = docker else {
            self.sync_previous.clear();
            return None;
        };
        let uses = d.inst.containerd.as_deref()?;
        let tasks = probed.iter().find_map(|p| {
            let i = *p.target.as_ref().ok()?;
            (p.inst.daemon == Daemon::Containerd && p.inst.socket == uses)
                .then(|| report.containerd(i))
                .flatten()
                .and_then(|c| c.tasks.clone())
        });
        let Some(tasks) = tasks else {
            self.sync_previous.clear();
            return None;
        };
        let live = |s: TaskStatus| {
            matches!(
                s,
                TaskStatus::Running | TaskStatus::Paused | TaskStatus::Pausing
            )
        };
        let running: BTreeSet<String> = running.into_iter().collect();
        let task_status: BTreeMap<&str, TaskStatus> = tasks
            .iter()
            .map(|t| (t.container_id.as_str(), t.status))
            .collect();
        let mut now = BTreeSet::new();
        for id in &running {
            if !task_status.get(id.as_str()).is_some_and(|s| live(*s)) {
                now.insert((id.clone(), true));
            }
        }
        for t in &tasks {
            if live(t.status) && !running.contains(&t.container_id) {
                now.insert((t.container_id.clone(), false));
            }
        }
        let held: Vec<(String, bool)> = now.intersection(&self.sync_previous).cloned().collect();
        self.sync_previous = now;
        let mut s = SyncSample {
            docker_socket: d.inst.socket.clone(),
            containerd_socket: uses.to_string(),
            namespace: self.config.docker_namespace.clone(),
            ..SyncSample::default()
        };
        for (id, in_docker) in held {
            if !crate::names::is_container_id(&id) {
                continue;
            }
            if in_docker {
                let st = task_status.get(id.as_str()).copied();
                s.docker_only.push((id, st));
            } else {
                s.containerd_only.push(id);
            }
        }
        Some(s)
    }

    fn kubelet(
        &mut self,
        proc: Option<&follow::Proc>,
        healthz: Option<Healthz>,
        target: Option<usize>,
        report: &ProbeReport,
        uptime: Option<f64>,
    ) -> KubeletSample {
        let ticks = self.ticks as f64;
        // Restarts older than the window were forgotten this collection by `count_restarts`.
        self.restarts
            .observe("kubelet", proc.map(|p| (p.pid, p.start_ticks)), ticks);
        let healthz = match (healthz, target) {
            (Some(Healthz::Probed { addr, .. }), Some(i)) => match report.healthz(i) {
                Some(h) => Healthz::Probed {
                    addr,
                    outcome: h.outcome.clone(),
                    status: h.status,
                },
                None => Healthz::Probed {
                    addr,
                    outcome: Outcome::Failed("no answer from the probe".into()),
                    status: None,
                },
            },
            (Some(h), _) => h,
            (None, _) => Healthz::Disabled,
        };
        KubeletSample {
            pid: proc.map(|p| p.pid),
            healthz,
            restarts_in_window: self.restarts.count("kubelet"),
            started_seconds_ago: proc
                .zip(uptime)
                .map(|(p, up)| (up - p.start_ticks as f64 / ticks).max(0.0) as u64),
        }
    }

    /// The walk roots: pod directories, docker's container directories and writable layers,
    /// containerd's snapshots.
    fn walk_roots(&self, probed: &[Probed], kubelet_root: Option<&str>) -> Vec<immutable::Root> {
        use immutable::{Owner, Root};
        let mut roots = Vec::new();
        let mut add = |host_path: String, owner: Owner| {
            let agent = self.node.host().resolve(&host_path);
            if !roots.iter().any(|r: &Root| r.agent == agent) {
                roots.push(Root {
                    agent,
                    host: host_path,
                    owner,
                });
            }
        };
        if let Some(k) = kubelet_root {
            add(format!("{}/pods", k.trim_end_matches('/')), Owner::Pods);
        }
        for p in probed {
            let Some(data) = p.inst.data_dir.as_deref().map(|d| d.trim_end_matches('/')) else {
                continue;
            };
            match p.inst.daemon {
                Daemon::Dockerd => {
                    add(format!("{data}/containers"), Owner::DockerContainers);
                    // Writable layers: image/<driver>/layerdb/mounts/<container>/mount-id.
                    let image = self.node.host().resolve(format!("{data}/image"));
                    for driver in dir_names(&image, 16) {
                        let mounts = image.join(&driver).join("layerdb/mounts");
                        for id in dir_names(&mounts, crate::hostfs::entries::PODS) {
                            if !crate::names::is_container_id(&id) {
                                continue;
                            }
                            let Ok(mount_id) = crate::hostfs::read_text(
                                &mounts.join(&id).join("mount-id"),
                                crate::hostfs::cap::VALUE,
                            ) else {
                                continue;
                            };
                            let mount_id = mount_id.trim();
                            if mount_id.is_empty()
                                || !mount_id
                                    .bytes()
                                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                            {
                                continue;
                            }
                            add(
                                format!("{data}/{driver}/{mount_id}/diff"),
                                Owner::DockerLayer { container_id: id },
                            );
                        }
                    }
                }
                Daemon::Containerd => add(
                    format!("{data}/io.containerd.snapshotter.v1.overlayfs/snapshots"),
                    Owner::ContainerdSnapshots,
                ),
                Daemon::CriDockerd => {}
            }
        }
        roots
    }

    fn immutable(&mut self, probed: &[Probed], kubelet_root: Option<&str>) -> Vec<ImmutableFile> {
        let due = self
            .walk_started
            .is_none_or(|t| t.elapsed() >= self.config.walk_interval);
        if self.walker.idle() && due {
            self.walk_started = Some(Instant::now());
            let roots = self.walk_roots(probed, kubelet_root);
            let skip: BTreeSet<PathBuf> = self
                .node
                .mounts()
                .map(|ms| {
                    ms.iter()
                        .map(|m| self.node.host().join(&m.mount_point))
                        .collect()
                })
                .unwrap_or_default();
            self.walker.start(roots, skip);
        }
        for f in self
            .walker
            .walk(self.config.walk_entries, self.config.walk_time)
        {
            if self.flagged.len() < self.config.max_immutable || self.flagged.contains_key(&f.agent)
            {
                self.flagged.insert(f.agent.clone(), f);
            }
        }
        // Confirmed again now: a file that lost the attribute (or is gone) is dropped.
        let mut out = Vec::new();
        let mut gone = Vec::new();
        let mut names: Option<&mut PodDirectory> = None;
        let want_names = self.flagged.values().any(|f| f.pod_uid.is_some());
        if want_names {
            let pods = self.pods.get_or_insert_with(|| {
                PodDirectory::new(self.node.host().clone(), PodsConfig::default())
            });
            pods.refresh_if_stale(Instant::now());
            names = Some(pods);
        }
        for (agent, f) in &self.flagged {
            match immutable::attributes(agent) {
                Some((i, a)) if i || a => {
                    let pod = f
                        .pod_uid
                        .as_deref()
                        .and_then(|u| names.as_ref().and_then(|n| n.pod(u)))
                        .map(|m| (m.namespace.clone(), m.name.clone()));
                    out.push(ImmutableFile {
                        path: f.host.clone(),
                        immutable: i,
                        append_only: a,
                        is_dir: f.is_dir,
                        pod_uid: f.pod_uid.clone(),
                        pod,
                        container_id: f.container_id.clone(),
                        named_by: None,
                    });
                }
                _ => gone.push(agent.clone()),
            }
        }
        for g in gone {
            self.flagged.remove(&g);
        }
        out
    }

    fn ports(
        &mut self,
        probed: &[Probed],
        static_dir: Option<&str>,
        node: &str,
        notes: &mut Vec<String>,
    ) -> Vec<PortConflict> {
        let mut declared = Vec::new();
        if let Some(d) = static_dir {
            declared.extend(ports::static_pods(&self.node.host().resolve(d), d, node));
        }
        for p in probed.iter().filter(|p| p.inst.daemon == Daemon::Dockerd) {
            if let Some(data) = &p.inst.data_dir {
                let dir = self
                    .node
                    .host()
                    .resolve(format!("{}/containers", data.trim_end_matches('/')));
                declared.extend(ports::docker_sandboxes(&dir));
            }
        }
        if declared.is_empty() {
            self.owners.clear();
            return Vec::new();
        }
        let groups = ports::group(declared);
        let listeners = match ports::listeners(self.node.host()) {
            Ok(l) => l,
            Err(e) => {
                notes.push(format!("{e}; hostNetwork port conflicts are not judged"));
                return Vec::new();
            }
        };
        let wanted: Vec<_> = listeners
            .iter()
            .filter(|l| groups.contains_key(&(l.protocol, l.local.port())))
            .collect();
        let inodes: HashSet<u64> = wanted.iter().map(|l| l.inode).collect();
        // A remembered owner holds while its socket listens and its process lives.
        let host = self.node.host();
        self.owners
            .retain(|i, pid| inodes.contains(i) && host.proc_pid(*pid).is_dir());
        let unknown: HashSet<u64> = inodes
            .iter()
            .filter(|i| !self.owners.contains_key(i))
            .copied()
            .collect();
        if !unknown.is_empty() {
            for (i, pid) in ports::socket_owners(&self.node, &unknown, self.config.fd_links) {
                self.owners.insert(i, pid);
            }
        }
        let mut pods = None;
        let mut out = Vec::new();
        for ((protocol, port), claimants) in groups {
            let holder = wanted
                .iter()
                .filter(|l| l.protocol == protocol && l.local.port() == port)
                .find_map(|l| self.owners.get(&l.inode).copied())
                .map(|pid| {
                    let placement = cgroup::read(self.node.host(), pid);
                    let uid = placement
                        .as_ref()
                        .and_then(|p| p.pod())
                        .map(|p| p.uid.clone());
                    let name = uid.as_deref().and_then(|u| {
                        let dir = pods.get_or_insert_with(|| {
                            let mut d =
                                PodDirectory::new(self.node.host().clone(), PodsConfig::default());
                            d.refresh();
                            d
                        });
                        dir.pod(u).map(|m| format!("{}/{}", m.namespace, m.name))
                    });
                    PortHolder {
                        pid,
                        comm: crate::proc::pid::comm(self.node.host(), pid).unwrap_or_default(),
                        pod: name,
                        in_pod: placement.as_ref().is_some_and(|p| p.is_kubernetes()),
                        pod_uid: uid,
                    }
                });
            out.push(PortConflict {
                protocol: protocol.as_str(),
                port,
                pods: claimants,
                holder,
            });
        }
        out
    }

    fn kube_proxy(&mut self) -> Option<KubeProxySample> {
        let Some(p) = self.procs.first("kube-proxy").cloned() else {
            self.kube_proxy_previous = None;
            return None;
        };
        let now = Instant::now();
        let cpu_cores = match self.kube_proxy_previous {
            Some((pid, start, ticks, at)) if pid == p.pid && start == p.start_ticks => {
                let secs = now.duration_since(at).as_secs_f64();
                (secs > 0.0)
                    .then(|| p.cpu_ticks.saturating_sub(ticks) as f64 / self.ticks as f64 / secs)
            }
            _ => None,
        };
        self.kube_proxy_previous = Some((p.pid, p.start_ticks, p.cpu_ticks, now));
        let (s, origin) =
            kube_proxy::settings(&p.args, &self.node.host().proc_pid(p.pid).join("root"));
        Some(KubeProxySample {
            pid: p.pid,
            mode: s.mode,
            sync_period: s.sync_period,
            min_sync_period: s.min_sync_period,
            origin,
            cpu_cores,
        })
    }
}

/// The host path of `unit`'s link in a `*.wants` directory of `/etc/systemd/system` (what
/// `systemctl enable` makes), when the host was booted with systemd; `None` otherwise (an
/// installed unit that is not enabled, or a host systemd does not run).
fn enabled_unit(host: &crate::HostPaths, unit: &str) -> Option<String> {
    let booted =
        std::fs::symlink_metadata(host.resolve("/run/systemd/system")).is_ok_and(|m| m.is_dir());
    if !booted {
        return None;
    }
    let etc = host.resolve("/etc/systemd/system");
    dir_names(&etc, MAX_UNIT_DIRS)
        .into_iter()
        .filter(|d| d.ends_with(".wants"))
        .find(|d| std::fs::symlink_metadata(etc.join(d).join(unit)).is_ok())
        .map(|d| format!("/etc/systemd/system/{d}/{unit}"))
}

fn dir_names(dir: &std::path::Path, max: usize) -> Vec<String> {
    crate::hostfs::dir_entries(dir, max)
        .map(|it| {
            it.filter_map(|e| e.file_name().to_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The metrics of a sample.
pub fn metrics(s: &Sample) -> Vec<Metric> {
    let mut out = Vec::new();
    for r in &s.runtimes {
        out.push(
            Metric::gauge(
                "node_doctor_runtime_up",
                "1 when the container runtime answered its cheap read-only API call (docker /_ping, containerd Version) within the probe timeout.",
                if r.outcome.answered() { 1.0 } else { 0.0 },
            )
            .label("daemon", r.daemon.as_str())
            .label("socket", r.socket.clone()),
        );
        if let Some(l) = r.outcome.latency() {
            out.push(
                Metric::gauge(
                    "node_doctor_runtime_probe_seconds",
                    "How long the container runtime took to answer its cheap API call.",
                    l.as_secs_f64(),
                )
                .label("daemon", r.daemon.as_str())
                .label("socket", r.socket.clone()),
            );
        }
    }
    if let Some(k) = &s.kubelet {
        if let Healthz::Probed { outcome, .. } = &k.healthz {
            out.push(Metric::gauge(
                "node_doctor_runtime_kubelet_healthy",
                "1 when the kubelet's /healthz answered ok.",
                if outcome.answered() { 1.0 } else { 0.0 },
            ));
        }
        out.push(Metric::gauge(
            "node_doctor_runtime_kubelet_restarts",
            "Kubelet restarts (its process start time changing) seen within the restart window.",
            k.restarts_in_window as f64,
        ));
    }
    if let Some(c) = &s.cni {
        if let Some(n) = &c.network_ready {
            out.push(Metric::gauge(
                "node_doctor_runtime_network_ready",
                "The CRI NetworkReady condition of the kubelet's runtime (1 ready, 0 not).",
                if n.status { 1.0 } else { 0.0 },
            ));
        }
    }
    out.push(Metric::gauge(
        "node_doctor_runtime_immutable_files",
        "Files with the immutable or append-only attribute found under pod and container directories (confirmed this collection).",
        s.immutable.len() as f64,
    ));
    out
}

/// Unix seconds of the wall clock.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One run's reading: the daemons' sample and the node logs' incidents.
pub struct Reading {
    pub sample: Sample,
    pub log: LogSample,
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for RuntimeCollector {
    const NAME: &'static str = "runtime";
    type Sample = Reading;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(Reading, Status), Status> {
        let (mut sample, mut notes) = self.read_host(ctx.host_netns, &ctx.node_name);
        let log = self.logs.sample((self.clock)());
        notes.extend(logs::notes(&log));
        self.named_in_logs(&log, &mut sample);
        // No runtime and no kubelet: a machine that is not a node, by design.
        let absent = (sample.runtimes.is_empty() && sample.kubelet.is_none())
            .then(|| {
                "no container runtime or kubelet on this host: none runs or is configured, and no \
                 socket, docker shim or enabled docker unit is left; nothing to judge"
                    .to_string()
            })
            .into_iter()
            .collect();
        Ok((Reading { sample, log }, Status::from_notes(notes, absent)))
    }

    /// The daemons' rules and the node logs' (which see what the probes know now).
    fn judge(&mut self, r: &Reading) -> Vec<Draft> {
        let mut drafts = judge::judge(&r.sample, &self.config.thresholds);
        drafts.extend(logs::judge(
            self.node.host(),
            &r.sample,
            &self.config.thresholds,
            &r.log,
            &self.config.log_thresholds,
            &self.config.locations,
        ));
        drafts
    }

    fn metrics(&self, r: &Reading) -> Vec<Metric> {
        let mut out = metrics(&r.sample);
        out.push(Metric::counter(
            "node_doctor_runtime_walk_passes_total",
            "Complete passes of the immutable-file walk over pod and container directories.",
            self.walker.passes as f64,
        ));
        out.extend(self.logs.metrics("runtime", &r.log));
        out
    }

    /// A hung daemon is waited for up to the probe timeout, plus the bounded walks: the
    /// shortest run that still gives its finding (also in `check`).
    fn min_timeout(&self) -> Option<Duration> {
        Some(self.config.probe_timeout + self.config.walk_time + Duration::from_secs(2))
    }
}
