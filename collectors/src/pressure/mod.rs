//! The `pressure` collector: stall (PSI) of the node and of the pods, CPU throttling of the
//! kubelet, the container runtime and the pods, and swap.
//!
//! - PSI: `/proc/pressure/{memory,io,cpu}` for the node; the kubepods cgroup's
//!   `*.pressure` in the v2 hierarchy (`<cgroup>/kubepods.slice`, `<cgroup>/kubepods`, or
//!   under `unified` on a v1 host), and its pods' only when the kubepods cgroup's `some`
//!   reaches a rule's limit (a pod's `some` and `full` never exceed its parent's `some`):
//!   a healthy node reads three files for its pods. PSI off in the kernel (`psi=0`, before
//!   4.20: the files missing, or reads failing with `EOPNOTSUPP`) is a `Noted` status.
//! - Throttling: `cpu.stat` (`nr_periods`, `nr_throttled`, throttled time; v2 or v1's cpu
//!   controller) of the daemons' cgroups (`/proc/<pid>/cgroup` of the processes the node's
//!   table finds) and of the pods' and their containers' cgroups (a walk of at most
//!   `max_cgroups` directories per run), as rates over the window since the previous run.
//! - Swap: `/proc/meminfo` `SwapTotal`/`SwapFree`, `/proc/swaps`, `/proc/vmstat`
//!   `pswpin`/`pswpout`; while swap is on, the kubelet's `failSwapOn` and
//!   `memorySwap.swapBehavior` (its flags and config file, [`crate::config::kubelet`]).
//!
//! No handbook covers these: the rules cite the kernel's PSI and cgroup-v2 documentation and
//! Kubernetes' swap documentation (`collectors/rules/pressure.toml`).

pub mod cgroups;
pub mod judge;
pub mod sample;
pub mod thresholds;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::collector::{CollectContext, Phases, Status};
use crate::config::{flag_value, kubelet};
use crate::metric::Metric;
use crate::node::{discover, Node};
use crate::pods::{PodDirectory, PodsConfig};
use crate::proc::cgroup::PodRef;
use crate::proc::{meminfo, swaps, uptime, vmstat};
use crate::rules::Draft;
use crate::sys::cgroup_io::Throttling;

pub use sample::{
    DaemonThrottle, KubeletSwap, PodIdentity, PodPsi, PodThrottle, PressureSample, Psi, Resource,
    Swap, SwapRate, ThrottleWindow,
};
pub use thresholds::Thresholds;

/// The daemons whose CPU cgroups are judged (the kubelet and every container runtime).
const DAEMONS: &[&str] = &["kubelet", "containerd", "dockerd", "crio", "cri-dockerd"];

/// The call site's name for the node's process table.
const CALLER: &str = "pressure";

/// Configuration of the pressure collector.
#[derive(Debug, Clone, PartialEq)]
pub struct PressureConfig {
    pub thresholds: Thresholds,
    /// The kubelet's config file when its command line has no `--config` (`--kubelet-config`;
    /// else `/var/lib/kubelet/config.yaml`).
    pub kubelet_config: Option<String>,
    /// At most this many kubepods cgroup directories are listed per run for throttling (a
    /// node of 110 pods with two containers each has ~330; each costs a listing and one
    /// `cpu.stat` read).
    pub max_cgroups: usize,
}

impl Default for PressureConfig {
    fn default() -> Self {
        PressureConfig {
            thresholds: Thresholds::default(),
            kubelet_config: None,
            max_cgroups: 512,
        }
    }
}

/// Samples PSI, throttling and swap each run; keeps the counters the next run compares with.
pub struct PressureCollector {
    node: Node,
    config: PressureConfig,
    /// Throttling counters of the previous run by agent-side cgroup directory, with the
    /// host's uptime (seconds) they were read at: the host's clock, so that a staged host's
    /// windows are what it says (replaced each run: bounded by what one run reads).
    previous: HashMap<PathBuf, (f64, Throttling)>,
    /// `pswpin`/`pswpout` of the previous run.
    previous_swap: Option<(f64, u64, u64)>,
    /// Pod names from the node's pod log directories, made at the first pod finding.
    pods: Option<PodDirectory>,
}

impl PressureCollector {
    pub fn new(node: Node, config: PressureConfig) -> Self {
        PressureCollector {
            node,
            config,
            previous: HashMap::new(),
            previous_swap: None,
            pods: None,
        }
    }

    /// The window of one cgroup's counters since the previous run (`None` the first time).
    fn window(
        &self,
        next: &mut HashMap<PathBuf, (f64, Throttling)>,
        dir: &Path,
        now: Option<f64>,
        t: Throttling,
    ) -> Option<ThrottleWindow> {
        let now = now?;
        next.insert(dir.to_path_buf(), (now, t));
        let (then, p) = self.previous.get(dir)?;
        let secs = now - then;
        // A counter that went back is a new cgroup of the same name.
        (secs > 0.0 && t.periods >= p.periods && t.throttled >= p.throttled).then(|| {
            ThrottleWindow {
                periods: t.periods - p.periods,
                throttled: t.throttled - p.throttled,
                throttled_usec: t.throttled_usec.saturating_sub(p.throttled_usec),
                window_seconds: secs,
            }
        })
    }

    /// The host-side path of an agent-side one (for evidence and commands).
    fn host_side(&self, p: &Path) -> String {
        self.node
            .host()
            .host_side(p)
            .unwrap_or_else(|| p.to_path_buf())
            .to_string_lossy()
            .into_owned()
    }

    /// Names a pod from the node's pod log directories (read at most once a refresh
    /// interval, only when a pod is to be named).
    fn identity(&mut self, p: &PodRef) -> PodIdentity {
        let host = self.node.host().clone();
        let dir = self
            .pods
            .get_or_insert_with(|| PodDirectory::new(host, PodsConfig::default()));
        dir.refresh_if_stale(Instant::now());
        let meta = dir.pod(&p.uid);
        PodIdentity {
            uid: p.uid.clone(),
            qos: p.qos,
            namespace: meta.map(|m| m.namespace.clone()),
            name: meta.map(|m| m.name.clone()),
        }
    }

    /// Node PSI; `Ok(None)` when PSI is off (every file absent).
    fn node_psi(&self) -> Result<Option<Psi>, String> {
        let psi = cgroups::read_psi(&self.node.host().proc_file("pressure"), "")?;
        Ok((psi.memory.is_some() || psi.io.is_some() || psi.cpu.is_some()).then_some(psi))
    }

    /// The kubepods cgroup's PSI, and its pods' when the kubepods `some` reaches a limit.
    fn pods_psi(
        &mut self,
        hierarchy: Option<&Path>,
        notes: &mut Vec<String>,
    ) -> (Option<Psi>, Vec<PodPsi>) {
        let Some(h) = hierarchy else {
            return (None, Vec::new());
        };
        let Some(kp) = cgroups::kubepods(h) else {
            return (None, Vec::new());
        };
        let kubepods = match cgroups::read_psi(&kp, ".pressure") {
            Ok(p) => p,
            Err(e) => {
                notes.push(format!("{e}; pod stall is not judged"));
                return (None, Vec::new());
            }
        };
        let t = &self.config.thresholds;
        let escalate = Resource::ALL.iter().any(|&r| {
            let stall = t.stall(r);
            kubepods
                .some(r)
                .is_some_and(|l| l.avg60.max(l.avg300).max(l.avg10) >= stall.warning)
        });
        if !escalate {
            return (Some(kubepods), Vec::new());
        }
        let walk = cgroups::walk(h, &kp, false, self.config.max_cgroups);
        let mut pods = Vec::new();
        for d in walk.pods {
            match cgroups::read_psi(&d.dir, ".pressure") {
                Ok(psi) => {
                    let pod = self.identity(&d.pod);
                    pods.push(PodPsi {
                        pod,
                        cgroup_dir: self.host_side(&d.dir),
                        psi,
                    });
                }
                Err(_) => continue, // a pod removed meanwhile
            }
        }
        (Some(kubepods), pods)
    }

    /// The daemons' CPU cgroups and their throttling windows.
    fn daemons(
        &self,
        cpu: Option<&(PathBuf, bool)>,
        now: Option<f64>,
        next: &mut HashMap<PathBuf, (f64, Throttling)>,
        found: &HashMap<String, (u32, Vec<String>)>,
    ) -> Vec<DaemonThrottle> {
        let Some((hier, v2)) = cpu else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut names: Vec<&String> = found.keys().collect();
        names.sort();
        for name in names {
            let (pid, _) = found[name];
            let path = self.node.host().proc_pid(pid).join("cgroup");
            let Ok(text) = crate::hostfs::read_text(&path, crate::hostfs::cap::PID_CGROUP) else {
                continue;
            };
            let Some((cg, is_v2)) = crate::proc::cgroup::controller_path(&text, "cpu") else {
                continue;
            };
            // The daemon's line must be of the hierarchy we read.
            if is_v2 != *v2 {
                continue;
            }
            let rel = cg.trim_start_matches('/');
            if rel.split('/').any(|s| s == "..") {
                continue;
            }
            let dir = if rel.is_empty() {
                hier.clone()
            } else {
                hier.join(rel)
            };
            let Ok(t) = cgroups::read_throttling(&dir) else {
                continue;
            };
            let window = self.window(next, &dir, now, t);
            out.push(DaemonThrottle {
                daemon: name.clone(),
                pid,
                cgroup: crate::bounded::prefix_owned(&cg, 512),
                cgroup_dir: self.host_side(&dir),
                window,
            });
        }
        out
    }

    /// The pods' and containers' throttling windows (bounded walk).
    fn pods_throttling(
        &mut self,
        cpu: Option<&(PathBuf, bool)>,
        now: Option<f64>,
        next: &mut HashMap<PathBuf, (f64, Throttling)>,
        notes: &mut Vec<String>,
    ) -> Vec<PodThrottle> {
        let Some((hier, _)) = cpu else {
            return Vec::new();
        };
        let Some(kp) = cgroups::kubepods(hier) else {
            return Vec::new();
        };
        let walk = cgroups::walk(hier, &kp, true, self.config.max_cgroups);
        if walk.truncated {
            notes.push(format!(
                "the kubepods tree has more than {} cgroups: throttling is judged on the first {} in name order",
                self.config.max_cgroups, walk.visited
            ));
        }
        let mut found = Vec::new();
        for d in &walk.pods {
            let dirs = std::iter::once((&d.dir, None))
                .chain(d.children.iter().map(|(dir, id)| (dir, id.clone())));
            for (dir, id) in dirs {
                let Ok(t) = cgroups::read_throttling(dir) else {
                    continue;
                };
                if let Some(w) = self.window(next, dir, now, t) {
                    found.push((d.pod.clone(), dir.clone(), id, w));
                }
            }
        }
        // Only cgroups that could matter are named (pod names cost a directory read).
        let (floor, limit) = (
            self.config.thresholds.min_periods,
            self.config.thresholds.pod_throttled_warning_percent,
        );
        found
            .into_iter()
            .filter(|(_, _, _, w)| w.periods >= floor && w.percent() >= limit)
            .map(|(pod, dir, id, w)| PodThrottle {
                pod: self.identity(&pod),
                cgroup_dir: self.host_side(&dir),
                container_id: id,
                window: w,
            })
            .collect()
    }

    /// Swap and its rate; the kubelet's swap settings only while swap is on.
    fn swap(
        &mut self,
        now: Option<f64>,
        found: &HashMap<String, (u32, Vec<String>)>,
        notes: &mut Vec<String>,
    ) -> (Option<Swap>, Option<KubeletSwap>) {
        let host = self.node.host();
        let mem = match meminfo::read(host) {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("{e}; swap is not judged"));
                return (None, None);
            }
        };
        let total = mem.get("SwapTotal").unwrap_or(0);
        let free = mem.get("SwapFree").unwrap_or(0);
        let rate = vmstat::read(host).ok().and_then(|vm| {
            let (i, o, now) = (vm.get("pswpin")?, vm.get("pswpout")?, now?);
            let prev = self.previous_swap.replace((now, i, o));
            let (then, pi, po) = prev?;
            let secs = now - then;
            (secs > 0.0).then(|| SwapRate {
                pages_in: i.saturating_sub(pi),
                pages_out: o.saturating_sub(po),
                window_seconds: secs,
            })
        });
        if total == 0 {
            return (
                Some(Swap {
                    total_bytes: 0,
                    free_bytes: free,
                    areas: Vec::new(),
                    rate,
                }),
                None,
            );
        }
        let areas = swaps::read(host)
            .map(|a| a.into_iter().map(|a| a.name).take(16).collect())
            .unwrap_or_default();
        let kubelet = found.get("kubelet");
        let none = Vec::new();
        let args = kubelet.map_or(&none, |(_, a)| a);
        let path = flag_value(args, "--config")
            .or_else(|| self.config.kubelet_config.clone())
            .unwrap_or_else(|| kubelet::DEFAULT_CONFIG.to_string());
        let config = match kubelet::read_config(host, &path) {
            Ok(c) => c,
            Err(e) => {
                notes.push(format!("{e}; the kubelet's swap settings are the defaults"));
                None
            }
        };
        let settings = (kubelet.is_some() || config.is_some()).then(|| {
            let (fail, origin, behavior) = kubelet::swap_settings(args, config.as_ref());
            KubeletSwap {
                running: kubelet.is_some(),
                fail_swap_on: fail,
                origin,
                behavior: behavior.map(|b| crate::bounded::prefix_owned(&b, 64)),
                config_path: crate::bounded::prefix_owned(&path, 512),
            }
        });
        (
            Some(Swap {
                total_bytes: total,
                free_bytes: free,
                areas,
                rate,
            }),
            settings,
        )
    }
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for PressureCollector {
    const NAME: &'static str = "pressure";
    type Sample = PressureSample;

    fn sample(&mut self, _ctx: &CollectContext) -> Result<(PressureSample, Status), Status> {
        let mut could_not = Vec::new();
        let mut absent = Vec::new();
        let node = match self.node_psi() {
            Ok(Some(p)) => Some(p),
            Ok(None) => {
                absent.push(
                    "no /proc/pressure: PSI is off in this kernel (psi=0, or before 4.20), so node and pod stall are not judged"
                        .to_string(),
                );
                None
            }
            Err(e) => {
                could_not.push(format!("{e}; node stall is not judged"));
                None
            }
        };
        let hierarchies = cgroups::detect(self.node.host());
        let (kubepods, pods) = if node.is_some() {
            self.pods_psi(hierarchies.psi.as_deref(), &mut could_not)
        } else {
            (None, Vec::new())
        };
        // The host's clock for every rate of this run.
        let now = match uptime::read(self.node.host()) {
            Ok(u) => Some(u.since_boot.as_secs_f64()),
            Err(e) => {
                could_not.push(format!("{e}; throttling and swap-in rates are not judged"));
                None
            }
        };
        let found = discover::find_processes(&self.node, CALLER, DAEMONS).unwrap_or_default();
        let mut next = HashMap::new();
        let daemons = self.daemons(hierarchies.cpu.as_ref(), now, &mut next, &found);
        let pod_throttling =
            self.pods_throttling(hierarchies.cpu.as_ref(), now, &mut next, &mut absent);
        self.previous = next;
        let (swap, kubelet) = self.swap(now, &found, &mut could_not);
        let sample = PressureSample {
            node,
            kubepods,
            pods,
            daemons,
            pod_throttling,
            swap,
            kubelet,
            page_size_bytes: self.node.facts().page_size,
        };
        Ok((sample, Status::from_notes(could_not, absent)))
    }

    fn judge(&mut self, sample: &PressureSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, s: &PressureSample) -> Vec<Metric> {
        let mut m = Vec::new();
        m.push(Metric::gauge(
            "node_doctor_pressure_psi_available",
            "1 when the kernel reports pressure stall information (/proc/pressure), 0 when PSI is off.",
            if s.node.is_some() { 1.0 } else { 0.0 },
        ));
        let psi_metrics = |m: &mut Vec<Metric>, name: &str, help: &'static str, psi: &Psi| {
            for r in Resource::ALL {
                let Some(p) = psi.get(r) else { continue };
                for (kind, line) in [("some", Some(p.some)), ("full", p.full)] {
                    let Some(l) = line else { continue };
                    for (window, v) in
                        [("avg10", l.avg10), ("avg60", l.avg60), ("avg300", l.avg300)]
                    {
                        m.push(
                            Metric::gauge(name, help, v)
                                .label("resource", r.as_str())
                                .label("kind", kind)
                                .label("window", window),
                        );
                    }
                }
            }
        };
        if let Some(n) = &s.node {
            psi_metrics(
                &mut m,
                "node_doctor_pressure_node_stall_percent",
                "Share of time (percent) tasks of the node stalled on a resource, by PSI line and averaging window (/proc/pressure).",
                n,
            );
        }
        if let Some(k) = &s.kubepods {
            psi_metrics(
                &mut m,
                "node_doctor_pressure_kubepods_stall_percent",
                "Share of time (percent) tasks of the kubepods cgroup stalled on a resource (its *.pressure files).",
                k,
            );
        }
        for d in &s.daemons {
            if let Some(w) = d.window {
                m.push(
                    Metric::gauge(
                        "node_doctor_pressure_daemon_throttled_percent",
                        "Throttled CPU periods per period (percent) of a node daemon's cgroup over the last window (cpu.stat).",
                        w.percent(),
                    )
                    .label("daemon", d.daemon.clone()),
                );
            }
        }
        m.push(Metric::gauge(
            "node_doctor_pressure_pods_throttled",
            "Pod or container cgroups throttled at or above the pod_throttled warning share over the last window.",
            s.pod_throttling.len() as f64,
        ));
        if let Some(sw) = &s.swap {
            m.push(Metric::gauge(
                "node_doctor_pressure_swap_total_bytes",
                "SwapTotal from /proc/meminfo.",
                sw.total_bytes as f64,
            ));
            m.push(Metric::gauge(
                "node_doctor_pressure_swap_used_bytes",
                "SwapTotal - SwapFree from /proc/meminfo.",
                sw.total_bytes.saturating_sub(sw.free_bytes) as f64,
            ));
            if let Some(r) = sw.rate {
                m.push(Metric::gauge(
                    "node_doctor_pressure_swap_in_pages_per_second",
                    "Pages swapped in per second over the last window (/proc/vmstat pswpin).",
                    r.pages_in as f64 / r.window_seconds,
                ));
            }
        }
        if let Some(k) = &s.kubelet {
            m.push(Metric::gauge(
                "node_doctor_pressure_kubelet_fail_swap_on",
                "The kubelet's failSwapOn (1: it refuses to start while swap is on); reported while swap is on.",
                if k.fail_swap_on { 1.0 } else { 0.0 },
            ));
        }
        m
    }
}
