//! The `net` collector: the node's network data path as the kernel counts it. The softnet
//! backlog per CPU (`/proc/net/softnet_stat`: drops when a CPU's backlog is full, squeezes
//! when the receive softirq runs out of budget, uneven work across CPUs), the physical and
//! bond interfaces' counters and link state (`/sys/class/net/<if>`: errors, drops, misses,
//! carrier changes, operstate) and the bonds' slaves (`/proc/1/net/bonding/<bond>`).
//!
//! Counters are judged as rates over the window between two runs, never as totals since
//! boot: the first run keeps the counters and judges only states (a link down, a bond
//! degraded). The previous counters are kept per CPU, interface and bond, and only for those
//! the last run saw.
//!
//! The pods' own network namespaces (`podns.rs`): one process per pod, found from the pod
//! cgroups and remembered while it stays in its namespace; each namespace's UDP receive
//! errors (`/proc/<pid>/net/snmp`) and its own conntrack's lost packets
//! (`/proc/<pid>/net/stat/nf_conntrack`), judged as rates like the rest. hostNetwork pods
//! share pid 1's namespace and are left out (the `conntrack` collector reads that one).
//!
//! Whose network namespace: `softnet_stat` is per CPU, the same in every namespace; the
//! bonds are read through pid 1's namespace (the host's); `/sys/class/net` shows the
//! namespace of whoever mounted that sysfs (the host's `/sys`, bind-mounted into the
//! DaemonSet's pod, shows the node's); the `net.core` sysctls are read only when
//! `host_netns` says `<root>/proc/sys/net` is the host's.
//!
//! The kernel log, through the node's hub: a NIC whose transmit hung (`NETDEV WATCHDOG`, ENA's
//! missing Tx completions: [`tx_lines`], per interface in [`tx_events`]). Those lines are
//! judged even on a node whose counters cannot be read.
//!
//! No handbook covers these counters: the rules cite the kernel's documentation
//! (`collectors/rules/net.toml`).

pub mod judge;
pub mod podns;
pub mod sample;
pub mod thresholds;
pub mod tx_events;
pub mod tx_lines;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::collector::{CollectContext, Phases, Status};
use crate::hostfs::{self, cap};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::Node;
use crate::pods::{PodDirectory, PodsConfig};
use crate::proc::{net_bonding, net_route, ns, softnet_stat, uptime};
use crate::rules::Draft;
use crate::sys::net_class;

pub use sample::{
    Bond, Counters, CpuSoftnet, Interface, MtuPath, NetSample, PodConntrack, PodCounters, PodNetns,
    Role, SoftnetDelta, Sysctls, TxTimeouts,
};
pub use thresholds::Thresholds;

/// Most bonds read (`/proc/net/bonding` has one file per bond).
const MAX_BONDS: usize = 64;

/// The CNIs' overlay devices whose own MTU is the pods' budget, and the bytes their
/// encapsulation adds to a packet (VXLAN over IPv4: 50). Not listed: Cilium's
/// `cilium_vxlan` (Cilium keeps the device at the uplink's MTU and lowers the routes' MTU
/// instead) and `tunl0` (made by the `ipip` module whenever it loads, CNI or not).
const OVERLAYS: &[(&str, u64)] = &[("flannel.1", 50), ("vxlan.calico", 50)];

/// Name prefixes of pod veths (Docker/flannel/bridge plugin `veth`, Calico `cali`, Cilium
/// `lxc`), and how many of them are read for their MTU.
const POD_VETH_PREFIXES: &[&str] = &["veth", "cali", "lxc"];
const MTU_VETHS: usize = 16;

/// Pods named in the per-pod metric families (those over the rules' floors, worst first).
const METRIC_TOP_PODS: usize = 10;

/// Configuration of the net collector.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    pub thresholds: Thresholds,
    /// Interfaces watched whatever they are (`--net-interfaces`): a VLAN, a macvlan, or an
    /// uplink without a `device` link that the node's traffic crosses.
    pub interfaces: Vec<String>,
    /// The process whose network namespace holds the node's bonds (pid 1: the host's).
    pub netns_pid: u32,
    /// The kernel-log reader (transmit hangs): lookback window and per-cycle bounds.
    pub kmsg: KmsgConfig,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            thresholds: Thresholds::default(),
            interfaces: Vec::new(),
            netns_pid: 1,
            kmsg: KmsgConfig::default(),
        }
    }
}

/// When a reading was taken: the host's uptime (steady, and a staged host's own), else the
/// agent's monotonic clock.
#[derive(Debug, Clone, Copy)]
enum Stamp {
    Uptime(f64),
    Mono(Instant),
}

impl Stamp {
    fn since(&self, before: &Stamp) -> Option<f64> {
        let s = match (self, before) {
            (Stamp::Uptime(now), Stamp::Uptime(was)) => now - was,
            (Stamp::Mono(now), Stamp::Mono(was)) => now.duration_since(*was).as_secs_f64(),
            _ => return None,
        };
        (s > 0.0).then_some(s)
    }
}

/// What the next run compares with: only what this run saw.
#[derive(Debug, Default)]
struct Previous {
    at: Option<Stamp>,
    cpus: BTreeMap<u32, SoftnetDelta>,
    interfaces: BTreeMap<String, Counters>,
    bond_failures: BTreeMap<String, u64>,
    /// Per pod namespace (pod UID, namespace inode): its counters.
    pods: BTreeMap<(String, u64), PodCounters>,
}

/// Reads the softnet counters, the watched interfaces and the bonds each run.
pub struct NetCollector {
    node: Node,
    config: NetConfig,
    kmsg: KmsgReader,
    tx: tx_events::TxEvents,
    previous: Previous,
    pending_at: Option<Stamp>,
    /// One process of each pod, kept while it stays in its namespace (pods seen last run).
    pod_pids: BTreeMap<String, podns::Found>,
    /// Pod UID -> namespace/name, read only when a pod's counters rise.
    pod_names: Option<PodDirectory>,
    /// Pod namespaces in the host's namespace and beyond the cap, last run (for metrics).
    pod_counts: podns::Discovery,
}

impl NetCollector {
    pub fn new(node: Node, config: NetConfig) -> Self {
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        NetCollector {
            node,
            config,
            kmsg,
            tx: tx_events::TxEvents::default(),
            previous: Previous::default(),
            pending_at: None,
            pod_pids: BTreeMap::new(),
            pod_names: None,
            pod_counts: podns::Discovery::default(),
        }
    }

    /// Phase 5: the pods' own network namespaces, one process each, and their counters.
    fn pods(&mut self, notes: &mut Vec<String>) -> Vec<PodNetns> {
        self.pod_counts = podns::Discovery::default();
        let host = self.node.host().clone();
        let Some(host_netns) = ns::inode(&host, self.config.netns_pid, "net") else {
            if podns::kubepods_dir(&host).is_some() {
                notes.push(format!(
                    "cannot read {}; the pods' own network namespaces are not read",
                    host.proc_pid(self.config.netns_pid)
                        .join("ns/net")
                        .display()
                ));
            }
            self.pod_pids.clear();
            return Vec::new();
        };
        let max = self.config.thresholds.max_pod_namespaces;
        let found = podns::discover(&host, host_netns, max, &mut self.pod_pids);
        if found.skipped > 0 {
            notes.push(format!(
                "{} pods beyond the first {max} pod network namespaces are not read",
                found.skipped
            ));
        }
        let mut out = Vec::new();
        let mut refused = 0usize;
        let mut first_error = None;
        for (uid, f) in &found.pods {
            match podns::read_counters(&host, f.pid) {
                Ok(Some(counters)) => {
                    let delta = self
                        .previous
                        .pods
                        .get(&(uid.clone(), f.netns))
                        .map(|was| counters.since(was));
                    out.push(PodNetns {
                        uid: uid.clone(),
                        namespace: None,
                        name: None,
                        pid: f.pid,
                        netns: f.netns,
                        counters,
                        delta,
                    });
                }
                // The process exited since it was found: found again next run.
                Ok(None) => {
                    self.pod_pids.remove(uid);
                }
                Err(e) => {
                    refused += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            notes.push(format!(
                "{e}; {refused} pod network namespaces are not judged"
            ));
        }
        self.pod_counts = podns::Discovery {
            pods: Vec::new(),
            ..found
        };
        self.name_pods(&mut out);
        out
    }

    /// Names the pods whose counters rose (the only ones a finding or metric can name),
    /// through the kubelet's pod log directories; the others keep their UID.
    fn name_pods(&mut self, pods: &mut [PodNetns]) {
        let rising = |p: &PodNetns| {
            p.delta
                .is_some_and(|d| d.udp_in_errors > 0 || d.conntrack_lost() > 0)
        };
        if !pods.iter().any(rising) {
            return;
        }
        let host = self.node.host().clone();
        let dir = self
            .pod_names
            .get_or_insert_with(|| PodDirectory::new(host, PodsConfig::default()));
        dir.refresh_if_stale(Instant::now());
        for p in pods.iter_mut().filter(|p| rising(p)) {
            if let Some(meta) = dir.pod(&p.uid) {
                p.namespace = Some(meta.namespace.clone());
                p.name = Some(meta.name.clone());
            }
        }
    }

    /// Phase 0: new kernel-log records, the transmit hangs per interface; returns the
    /// reader's status and the hangs in the window.
    fn read_kernel_log(&mut self) -> (Status, Vec<TxTimeouts>) {
        let batch = self.kmsg.read_new();
        let gap = Duration::from_secs(self.config.thresholds.tx_timeout_burst_gap_seconds);
        for r in &batch.records {
            if let Some(line) = tx_lines::parse(&r.message) {
                self.tx.note(line, r, gap);
            }
        }
        let clock = self.kmsg.clock();
        self.tx.prune(clock.as_ref(), self.config.kmsg.lookback);
        (batch.status, self.tx.view(clock.as_ref()))
    }

    fn stamp(&self) -> Stamp {
        match uptime::read(self.node.host()) {
            Ok(u) => Stamp::Uptime(u.since_boot.as_secs_f64()),
            Err(_) => Stamp::Mono(Instant::now()),
        }
    }

    /// Phase 1: the softnet counters per CPU, with their change since the last run.
    fn softnet(&self, notes: &mut Vec<String>) -> Vec<CpuSoftnet> {
        let path = softnet_stat::path(self.node.host());
        match softnet_stat::read(&path) {
            Ok(cpus) => cpus
                .iter()
                .map(|c| CpuSoftnet {
                    cpu: c.cpu,
                    processed: c.processed,
                    dropped: c.dropped,
                    time_squeeze: c.time_squeeze,
                    delta: self.previous.cpus.get(&c.cpu).map(|was| SoftnetDelta {
                        processed: wrap32(c.processed, was.processed),
                        dropped: wrap32(c.dropped, was.dropped),
                        time_squeeze: wrap32(c.time_squeeze, was.time_squeeze),
                    }),
                })
                .collect(),
            Err(e) => {
                notes.push(format!("{e}; the softnet backlog is not judged"));
                Vec::new()
            }
        }
    }

    /// Phase 2: the interfaces to watch and their counters.
    fn interfaces(&self, notes: &mut Vec<String>) -> (Vec<Interface>, Vec<String>) {
        let host = self.node.host();
        let (names, cut) = match net_class::list(host) {
            Ok(l) => l,
            Err(e) => {
                notes.push(format!("{e}; no interface is judged"));
                return (Vec::new(), Vec::new());
            }
        };
        if cut {
            notes.push(format!(
                "{} lists more than {} entries; the rest are not looked at",
                net_class::dir(host).display(),
                net_class::MAX_LISTED
            ));
        }
        let max = self.config.thresholds.max_interfaces;
        let mut out = Vec::new();
        let mut skipped = 0usize;
        for name in &names {
            let Some(role) = self.role(name) else {
                continue;
            };
            if out.len() >= max {
                skipped += 1;
                continue;
            }
            out.push(self.interface(name.clone(), role));
        }
        if skipped > 0 {
            notes.push(format!(
                "{skipped} interfaces beyond the first {max} are not watched"
            ));
        }
        (out, names)
    }

    /// Phase 4: the MTUs on the pods' way out: the default route's interface (pid 1's
    /// namespace), the CNI's overlay device and the pods' side (the CNI bridge and the first
    /// [`MTU_VETHS`] pod veths by name: one read each).
    fn mtu(&self, names: &[String]) -> Option<MtuPath> {
        let host = self.node.host();
        let uplink =
            net_route::read_default_interface(&net_route::path(host, self.config.netns_pid))
                .ok()??;
        let uplink_mtu = net_class::value(host, &uplink, "mtu")?;
        let mtu_of = |n: &str| net_class::value::<u64>(host, n, "mtu");
        let overlay = OVERLAYS.iter().find_map(|(name, overhead)| {
            names
                .iter()
                .any(|n| n == name)
                .then(|| mtu_of(name).map(|m| (name.to_string(), m, *overhead)))
                .flatten()
        });
        let mut pod_side: Vec<(String, u64)> = ["cni0", "cbr0"]
            .iter()
            .filter(|b| names.iter().any(|n| n == *b))
            .filter_map(|b| mtu_of(b).map(|m| (b.to_string(), m)))
            .collect();
        pod_side.extend(
            names
                .iter()
                .filter(|n| POD_VETH_PREFIXES.iter().any(|p| n.starts_with(p)))
                .take(MTU_VETHS)
                .filter_map(|n| mtu_of(n).map(|m| (n.clone(), m))),
        );
        Some(MtuPath {
            uplink,
            uplink_mtu,
            overlay,
            pod_side,
        })
    }

    /// Whether `name` is watched, and why: named by the operator, backed by a device, or a
    /// bond. Loopback, veths, bridges, tunnels and the CNIs' devices have no `device` link and
    /// are not bonds: two `stat`s each, no read (a node has thousands of veths).
    fn role(&self, name: &str) -> Option<Role> {
        if self.config.interfaces.iter().any(|n| n == name) {
            return Some(Role::Configured);
        }
        let host = self.node.host();
        if net_class::has_device(host, name) {
            return Some(Role::Physical);
        }
        net_class::is_bond(host, name).then_some(Role::Bond)
    }

    fn interface(&self, name: String, role: Role) -> Interface {
        let host = self.node.host();
        let stat = |c: &str| net_class::statistic(host, &name, c).unwrap_or(0);
        let counters = Counters {
            rx_packets: stat("rx_packets"),
            tx_packets: stat("tx_packets"),
            rx_errors: stat("rx_errors"),
            tx_errors: stat("tx_errors"),
            rx_dropped: stat("rx_dropped"),
            tx_dropped: stat("tx_dropped"),
            rx_missed: stat("rx_missed_errors"),
            rx_fifo: stat("rx_fifo_errors"),
            tx_fifo: stat("tx_fifo_errors"),
            rx_crc: stat("rx_crc_errors"),
            rx_frame: stat("rx_frame_errors"),
            rx_over: stat("rx_over_errors"),
            carrier_changes: net_class::value(host, &name, "carrier_changes").unwrap_or(0),
        };
        let delta = self
            .previous
            .interfaces
            .get(&name)
            .map(|was| counters.since(was));
        Interface {
            operstate: net_class::text(host, &name, "operstate").unwrap_or_default(),
            admin_up: net_class::flags(host, &name).is_some_and(|f| f & net_class::IFF_UP != 0),
            speed_mbps: net_class::value::<i64>(host, &name, "speed")
                .and_then(|s| u64::try_from(s).ok()),
            duplex: net_class::text(host, &name, "duplex"),
            mtu: net_class::value(host, &name, "mtu"),
            counters,
            delta,
            role: Some(role),
            name,
        }
    }

    /// Phase 3: the bonds of the host's namespace.
    fn bonds(&self, notes: &mut Vec<String>) -> Vec<Bond> {
        let dir = net_bonding::dir(self.node.host(), self.config.netns_pid);
        // No bonding directory: the module is not loaded, no bond exists.
        let Ok(entries) = hostfs::dir_entries(&dir, MAX_BONDS) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            match net_bonding::read(&dir.join(&name)) {
                Ok(bond) => {
                    let failures: u64 = bond
                        .slaves
                        .iter()
                        .filter_map(|s| s.link_failure_count)
                        .sum();
                    let link_failures_delta = self
                        .previous
                        .bond_failures
                        .get(&name)
                        .map(|was| failures.saturating_sub(*was));
                    out.push(Bond {
                        name,
                        bond,
                        link_failures_delta,
                    });
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => notes.push(format!("{e}; this bond is not judged")),
            }
        }
        out
    }

    fn sysctls(&self, ctx: &CollectContext) -> Sysctls {
        if !ctx.host_netns.sysctls_are_hosts() {
            return Sysctls::default();
        }
        let read = |name: &str| -> Option<u64> {
            let p = self.node.host().proc_file(format!("sys/net/core/{name}"));
            hostfs::read_text(&p, cap::VALUE).ok()?.trim().parse().ok()
        };
        Sysctls {
            netdev_max_backlog: read("netdev_max_backlog"),
            netdev_budget: read("netdev_budget"),
            netdev_budget_usecs: read("netdev_budget_usecs"),
        }
    }
}

/// The change of a kernel `unsigned int` counter (`softnet_stat` prints 32 bits) that may
/// have wrapped since.
fn wrap32(now: u64, was: u64) -> u64 {
    if now >= was {
        now - was
    } else if was <= u64::from(u32::MAX) {
        now + (1u64 << 32) - was
    } else {
        now
    }
}

impl Phases for NetCollector {
    const NAME: &'static str = "net";
    type Sample = NetSample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(NetSample, Status), Status> {
        let at = self.stamp();
        let mut notes = Vec::new();
        let (kmsg_status, tx_timeouts) = self.read_kernel_log();
        let cpus = self.softnet(&mut notes);
        let (interfaces, names) = self.interfaces(&mut notes);
        let node_unreadable = cpus.is_empty() && interfaces.is_empty() && notes.len() >= 2;
        let pods = self.pods(&mut notes);
        if node_unreadable && pods.is_empty() && tx_timeouts.is_empty() {
            return Err(Status::Unavailable(notes.join("; ")));
        }
        let bonds = self.bonds(&mut notes);
        let interval_seconds = self.previous.at.as_ref().and_then(|was| at.since(was));
        self.pending_at = Some(at);
        let sample = NetSample {
            interval_seconds,
            cpus,
            interfaces,
            bonds,
            sysctls: self.sysctls(ctx),
            mtu: self.mtu(&names),
            pods,
            tx_timeouts,
        };
        let status = if notes.is_empty() {
            Status::Ok
        } else {
            Status::Degraded(notes.join("; "))
        }
        .worst(kmsg_status);
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &NetSample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &NetSample) -> Vec<Metric> {
        let mut out = metrics(sample);
        out.extend(pod_metrics(
            sample,
            &self.pod_counts,
            &self.config.thresholds,
        ));
        out
    }

    fn keep(&mut self, sample: NetSample) {
        self.previous = Previous {
            at: self.pending_at.take(),
            cpus: sample
                .cpus
                .iter()
                .map(|c| {
                    (
                        c.cpu,
                        SoftnetDelta {
                            processed: c.processed,
                            dropped: c.dropped,
                            time_squeeze: c.time_squeeze,
                        },
                    )
                })
                .collect(),
            bond_failures: sample
                .bonds
                .iter()
                .map(|b| {
                    let f = b
                        .bond
                        .slaves
                        .iter()
                        .filter_map(|s| s.link_failure_count)
                        .sum();
                    (b.name.clone(), f)
                })
                .collect(),
            interfaces: sample
                .interfaces
                .into_iter()
                .map(|i| (i.name, i.counters))
                .collect(),
            pods: sample
                .pods
                .into_iter()
                .map(|p| ((p.uid, p.netns), p.counters))
                .collect(),
        };
    }
}

/// The `node_doctor_net_*` families of one sample.
fn metrics(sample: &NetSample) -> Vec<Metric> {
    let mut out = Vec::new();
    for c in &sample.cpus {
        let cpu = c.cpu.to_string();
        out.push(
            Metric::counter(
                "node_doctor_net_softnet_processed_total",
                "Frames this CPU's receive softirq processed (softnet_stat column 1; 32-bit, wraps).",
                c.processed as f64,
            )
            .label("cpu", cpu.clone()),
        );
        out.push(
            Metric::counter(
                "node_doctor_net_softnet_dropped_total",
                "Frames dropped because this CPU's backlog was full (net.core.netdev_max_backlog).",
                c.dropped as f64,
            )
            .label("cpu", cpu.clone()),
        );
        out.push(
            Metric::counter(
                "node_doctor_net_softnet_time_squeeze_total",
                "Times this CPU's receive softirq stopped with work left (net.core.netdev_budget, netdev_budget_usecs).",
                c.time_squeeze as f64,
            )
            .label("cpu", cpu),
        );
    }
    for i in &sample.interfaces {
        let c = &i.counters;
        let per_if = [
            (
                "node_doctor_net_interface_packets_total",
                "Packets through the interface (statistics/rx_packets, tx_packets).",
                c.rx_packets,
                c.tx_packets,
            ),
            (
                "node_doctor_net_interface_errors_total",
                "Packets the interface counted as errors (statistics/rx_errors, tx_errors).",
                c.rx_errors,
                c.tx_errors,
            ),
            (
                "node_doctor_net_interface_dropped_total",
                "Packets the interface dropped (statistics/rx_dropped, tx_dropped).",
                c.rx_dropped,
                c.tx_dropped,
            ),
        ];
        for (name, help, rx, tx) in per_if {
            for (dir, v) in [("receive", rx), ("transmit", tx)] {
                out.push(
                    Metric::counter(name, help, v as f64)
                        .label("interface", i.name.clone())
                        .label("direction", dir),
                );
            }
        }
        out.push(
            Metric::counter(
                "node_doctor_net_interface_missed_total",
                "Frames the NIC could not place in its receive ring (statistics/rx_missed_errors).",
                c.rx_missed as f64,
            )
            .label("interface", i.name.clone()),
        );
        out.push(
            Metric::counter(
                "node_doctor_net_interface_carrier_changes_total",
                "Times the interface's link went up or down since it was created (carrier_changes).",
                c.carrier_changes as f64,
            )
            .label("interface", i.name.clone()),
        );
        out.push(
            Metric::gauge(
                "node_doctor_net_interface_link_up",
                "1 when the interface's operstate is up, else 0.",
                if i.operstate == "up" { 1.0 } else { 0.0 },
            )
            .label("interface", i.name.clone()),
        );
    }
    for b in &sample.bonds {
        let up = b.bond.slaves.iter().filter(|s| s.is_up()).count();
        for (state, n) in [("up", up), ("down", b.bond.slaves.len() - up)] {
            out.push(
                Metric::gauge(
                    "node_doctor_net_bond_slaves",
                    "The bond's slaves by MII status (/proc/net/bonding).",
                    n as f64,
                )
                .label("bond", b.name.clone())
                .label("state", state),
            );
        }
    }
    out
}

/// The `node_doctor_net_pod_*` families: how many pod namespaces were read, and the pods
/// over the rules' floors (at most [`METRIC_TOP_PODS`] per family, worst first), so the label
/// sets stay few whatever the node runs.
fn pod_metrics(sample: &NetSample, counts: &podns::Discovery, t: &Thresholds) -> Vec<Metric> {
    let mut out = Vec::new();
    for (state, n) in [
        ("read", sample.pods.len()),
        ("host_network", counts.host_network),
        ("skipped", counts.skipped),
        ("no_process", counts.no_process),
    ] {
        out.push(
            Metric::gauge(
                "node_doctor_net_pod_namespaces",
                "Pods by their network namespace this run: read, in the host's namespace (hostNetwork), skipped beyond the cap, or with no process found in their cgroups.",
                n as f64,
            )
            .label("state", state),
        );
    }
    let Some(seconds) = sample.interval_seconds.filter(|s| *s > 0.0) else {
        return out;
    };
    type Rate = fn(&PodCounters) -> (u64, bool);
    let families: [(&str, &str, Rate); 2] = [
        (
            "node_doctor_net_pod_udp_receive_errors_per_second",
            "UDP receive errors per second (Udp InErrors) in a pod's own network namespace; only pods over net.pod_udp_errors' floor, at most 10.",
            |d| (d.udp_in_errors, true),
        ),
        (
            "node_doctor_net_pod_conntrack_lost_per_second",
            "Packets per second lost by the conntrack of a pod's own network namespace (insert_failed or drop); only pods over net.pod_conntrack_races' floor, at most 10.",
            |d| (d.conntrack_lost(), d.conntrack.is_some()),
        ),
    ];
    for (i, (name, help, f)) in families.into_iter().enumerate() {
        let floor = if i == 0 {
            (t.pod_udp_errors_min, t.pod_udp_errors_per_second)
        } else {
            (t.pod_conntrack_lost_min.max(1), 0.0)
        };
        let mut over: Vec<(&PodNetns, f64)> = sample
            .pods
            .iter()
            .filter_map(|p| {
                let (n, present) = f(&p.delta?);
                let rate = n as f64 / seconds;
                (present && n >= floor.0 && rate >= floor.1).then_some((p, rate))
            })
            .collect();
        over.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.uid.cmp(&b.0.uid)));
        for (p, rate) in over.into_iter().take(METRIC_TOP_PODS) {
            out.push(
                Metric::gauge(name, help, rate)
                    .label("namespace", p.namespace.clone().unwrap_or_default())
                    .label("pod", p.name.clone().unwrap_or_default())
                    .label("uid", p.uid.clone()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap32;

    #[test]
    fn a_32_bit_counter_that_wrapped_still_counts_forward() {
        assert_eq!(wrap32(10, 4), 6);
        assert_eq!(wrap32(5, 0xffff_fffb), 10);
        // A counter wider than 32 bits that went back: counted from zero.
        assert_eq!(wrap32(5, 1 << 40), 5);
    }
}
