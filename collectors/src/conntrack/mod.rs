//! The `conntrack` collector: conntrack table pressure and the insert races behind the
//! 5-second DNS delay (handbook 002, its cluster DNS section; `collectors/rules/conntrack.toml`).
//!
//! conntrack state is per network namespace and `/proc/net/...` shows the namespace of
//! whoever opens it, so the host's view is read through a host process:
//! `<root>/proc/<netns_pid>/net/stat/nf_conntrack`, `.../net/snmp`, `.../net/udp` (pid 1 by
//! default). That works from a pod with `hostPID: true` and without `hostNetwork`.
//! `nf_conntrack_max` and `nf_conntrack_buckets` are global and read from `<root>/proc/sys`.
//!
//! Layers: `proc::nf_conntrack_stat`, `proc::snmp`, `proc::net_udp` parse; [`kubelet`] finds
//! the kubelet's cluster DNS; [`kernel_log`] counts "table full" messages; [`judge`] holds the
//! rules. This module samples, keeps the previous sample for rates, and emits metrics.

pub mod judge;
pub mod kernel_log;
pub mod kubelet;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use crate::collector::{CollectContext, Collection, Collector, Status, TransitionLog};
use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};
use crate::kmsg::{KmsgConfig, KmsgReader, RecentEvents};
use crate::metric::Metric;
use crate::proc::{meminfo, net_udp, nf_conntrack_stat, snmp};

pub use judge::{Deltas, Sample, Thresholds};

/// Thresholds and paths of the conntrack collector.
#[derive(Debug, Clone, PartialEq)]
pub struct ConntrackConfig {
    /// The process whose network namespace is read (`--netns-pid`); 1 = the host's.
    pub netns_pid: u32,
    /// What the rules judge by.
    pub thresholds: Thresholds,
    /// Where a node-local DNS cache listens (NodeLocal DNSCache's default 169.254.20.10:53).
    pub nodelocal_dns_address: SocketAddr,
    /// The kubelet configuration file read when the kubelet's command line has no `--config`.
    pub kubelet_config: PathBuf,
    /// The kubelet's pod directory; its entries are counted as the pods on this node.
    pub kubelet_pods_dir: PathBuf,
    /// When the kubelet process is not found, look for it again every this many samples.
    pub kubelet_rescan_samples: u32,
    /// The kernel-log reader: "table full, dropping packet" messages within its lookback
    /// window make `conntrack.table_full` critical.
    pub kmsg: KmsgConfig,
}

impl Default for ConntrackConfig {
    fn default() -> Self {
        ConntrackConfig {
            netns_pid: 1,
            thresholds: Thresholds::default(),
            nodelocal_dns_address: judge::DEFAULT_NODELOCAL_DNS,
            kubelet_config: PathBuf::from("/var/lib/kubelet/config.yaml"),
            kubelet_pods_dir: PathBuf::from("/var/lib/kubelet/pods"),
            kubelet_rescan_samples: 20,
            kmsg: KmsgConfig::default(),
        }
    }
}

/// Most "table full" message times remembered (the kernel rate-limits the message anyway).
const MAX_TABLE_FULL_EVENTS: usize = 4096;

/// The conntrack collector. Keeps the previous stat sample (for rates), the race streak and
/// the kubelet pid between calls: a fixed amount of state.
pub struct ConntrackCollector {
    host: HostPaths,
    config: ConntrackConfig,
    previous: Option<(Instant, nf_conntrack_stat::NfConntrackStat)>,
    race_streak: u32,
    kubelet: kubelet::KubeletFinder,
    kmsg: KmsgReader,
    table_full: RecentEvents,
    transitions: TransitionLog,
}

impl ConntrackCollector {
    pub fn new(host: HostPaths, config: ConntrackConfig) -> Self {
        let kubelet = kubelet::KubeletFinder::new(
            config.kubelet_config.clone(),
            config.kubelet_rescan_samples,
        );
        let kmsg = KmsgReader::new(&host, config.kmsg.clone());
        ConntrackCollector {
            host,
            config,
            previous: None,
            race_streak: 0,
            kubelet,
            kmsg,
            table_full: RecentEvents::new(MAX_TABLE_FULL_EVENTS),
            transitions: TransitionLog::new("conntrack"),
        }
    }

    /// Reads new kernel-log records and counts "table full, dropping packet" messages within
    /// the lookback window. `None` when the kernel log cannot be read (the reason goes to
    /// `degraded`).
    fn table_full_messages(&mut self, degraded: &mut Vec<String>) -> Option<u64> {
        let batch = self.kmsg.read_new();
        for r in &batch.records {
            if kernel_log::is_table_full(&r.message) {
                self.table_full.record(r.usec);
            }
        }
        if let Some(clock) = self.kmsg.clock() {
            self.table_full.prune(&clock, self.config.kmsg.lookback);
        }
        match batch.status {
            Status::Ok => Some(self.table_full.recent()),
            other => {
                degraded.extend(other.message().map(str::to_string));
                None
            }
        }
    }

    fn unavailable_reason(&self, e: &ReadError) -> Option<String> {
        if e.is_refused() {
            // A FIFO or an oversized file where the kernel's stat file should be.
            return Some(e.to_string());
        }
        let pid = self.config.netns_pid;
        let pid_dir = self.host.proc_pid(pid);
        if e.is_not_found() {
            if !pid_dir.exists() {
                return Some(format!(
                    "{} does not exist: the process whose network namespace should be read (pid {pid}) is not \
                     visible; run the agent with hostPID and the host's /proc mounted, or choose a running pid",
                    pid_dir.display()
                ));
            }
            return Some(format!(
                "nf_conntrack is not loaded ({} does not exist): connection tracking is off in that network \
                 namespace, so there is nothing to check",
                e.path().display()
            ));
        }
        if e.is_permission_denied() {
            return Some(format!(
                "{}: permission denied; reading another process's network view needs root \
                 (CAP_SYS_PTRACE/CAP_DAC_READ_SEARCH)",
                e.path().display()
            ));
        }
        None
    }

    fn read_u64(&self, path: PathBuf, degraded: &mut Vec<String>) -> Option<u64> {
        match hostfs::read_text_optional(&path, cap::VALUE) {
            Ok(Some(text)) => match text.trim().parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    degraded.push(format!("{}: not a number", path.display()));
                    None
                }
            },
            Ok(None) => {
                degraded.push(format!("{} missing", path.display()));
                None
            }
            Err(e) => {
                degraded.push(e.to_string());
                None
            }
        }
    }

    /// `MemTotal` for sizing advice; best effort (the advice omits sizing without it).
    fn mem_total_bytes(&self) -> Option<u64> {
        meminfo::read(&self.host).ok()?.mem_total_bytes()
    }

    fn nodelocal_listening(&self, degraded: &mut Vec<String>) -> Option<bool> {
        let pid = self.config.netns_pid;
        let addr = self.config.nodelocal_dns_address;
        let path = if addr.is_ipv4() {
            net_udp::path_v4(&self.host, pid)
        } else {
            net_udp::path_v6(&self.host, pid)
        };
        match net_udp::read(&path) {
            Ok(sockets) => Some(net_udp::listens_on(&sockets, addr)),
            Err(e) => {
                degraded.push(e.to_string());
                None
            }
        }
    }

    fn pods_on_node(&self) -> Option<u64> {
        let dir = self.host.resolve(&self.config.kubelet_pods_dir);
        let rd = hostfs::dir_entries(&dir, entries::PODS).ok()?;
        Some(
            rd.filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .count() as u64,
        )
    }

    /// Reads everything but the conntrack stat file into a sample. The kubelet's cluster DNS
    /// and the pod count only serve the race finding, so they are looked up (walking the
    /// process table when the kubelet is not yet known) only when `races` is true.
    fn sample(
        &mut self,
        stat: nf_conntrack_stat::NfConntrackStat,
        races: bool,
        degraded: &mut Vec<String>,
    ) -> Sample {
        let pid = self.config.netns_pid;
        let sys = |name: &str| self.host.proc_file("sys/net/netfilter").join(name);
        let max = self.read_u64(sys("nf_conntrack_max"), degraded);
        let buckets = self.read_u64(sys("nf_conntrack_buckets"), degraded);
        let udp = match snmp::read(&snmp::path(&self.host, pid)) {
            Ok(s) => s.udp(),
            Err(e) => {
                degraded.push(e.to_string());
                None
            }
        };
        let osrelease = self.host.proc_file("sys/kernel/osrelease");
        let kernel_release = hostfs::read_text(&osrelease, cap::VALUE)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let nodelocal_dns = self.nodelocal_listening(degraded);
        let (cluster_dns, pods_on_node) = if races {
            let dns = self.kubelet.lookup(&self.host);
            if let Some(e) = dns.config_error {
                degraded.push(format!("{e}; the kubelet's cluster DNS is unknown"));
            }
            (dns.cluster_dns, self.pods_on_node())
        } else {
            (Vec::new(), None)
        };
        let table_full_messages = self.table_full_messages(degraded);
        Sample {
            kernel_release,
            stat,
            max,
            buckets,
            mem_total_bytes: self.mem_total_bytes(),
            udp,
            nodelocal_dns,
            cluster_dns,
            pods_on_node,
            table_full_messages,
            nodelocal_dns_address: self.config.nodelocal_dns_address,
        }
    }
}

/// Metrics of one sample (no rates: those are for PromQL).
pub fn metrics(sample: &Sample) -> Vec<Metric> {
    let mut out = vec![Metric::gauge(
        "node_doctor_conntrack_entries",
        "Entries in the conntrack table of the host network namespace.",
        sample.stat.entries as f64,
    )];
    if let Some(m) = sample.max {
        out.push(Metric::gauge(
            "node_doctor_conntrack_entries_limit",
            "nf_conntrack_max: the most entries the conntrack table may hold.",
            m as f64,
        ));
    }
    if let Some(b) = sample.buckets {
        out.push(Metric::gauge(
            "node_doctor_conntrack_buckets",
            "nf_conntrack_buckets: size of the conntrack hash table.",
            b as f64,
        ));
    }
    for (name, value) in &sample.stat.counters {
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        out.push(Metric::counter(
            &format!("node_doctor_conntrack_stat_{clean}_total"),
            "A /proc/net/stat/nf_conntrack column of the host network namespace, summed across CPUs.",
            *value as f64,
        ));
    }
    if let Some(u) = sample.udp {
        if let Some(v) = u.rcvbuf_errors {
            out.push(Metric::counter(
                "node_doctor_conntrack_udp_rcvbuf_errors_total",
                "UDP datagrams dropped because a socket receive buffer was full (host namespace, /proc/net/snmp RcvbufErrors).",
                v as f64,
            ));
        }
        if let Some(v) = u.in_errors {
            out.push(Metric::counter(
                "node_doctor_conntrack_udp_in_errors_total",
                "UDP datagrams that could not be delivered (host namespace, /proc/net/snmp InErrors).",
                v as f64,
            ));
        }
    }
    if let Some(l) = sample.nodelocal_dns {
        out.push(Metric::gauge(
            "node_doctor_conntrack_nodelocal_dns",
            "1 when a UDP socket listens on the node-local DNS cache address in the host namespace.",
            if l { 1.0 } else { 0.0 },
        ));
    }
    out
}

/// sample -> judge -> findings (in the rule file's words) + metrics.
impl Collector for ConntrackCollector {
    fn name(&self) -> &'static str {
        "conntrack"
    }

    fn collect(&mut self, ctx: &CollectContext) -> Collection {
        let c = match self.observe() {
            Err(status) => Collection::new(status),
            Ok((sample, deltas, status)) => {
                let drafts = judge::judge(
                    &sample,
                    deltas.as_ref(),
                    self.race_streak,
                    &self.config.thresholds,
                );
                Collection {
                    status,
                    findings: ctx.render(drafts),
                    metrics: self.metrics(&sample),
                }
            }
        };
        self.transitions.observe(&c);
        c
    }
}

impl ConntrackCollector {
    /// Reads the stat file and everything around it, and the deltas against the previous
    /// sample. `Err` is the status when the stat file itself cannot be read.
    fn observe(&mut self) -> Result<(Sample, Option<Deltas>, Status), Status> {
        let stat_path = nf_conntrack_stat::path(&self.host, self.config.netns_pid);
        let now = Instant::now();
        let stat = match nf_conntrack_stat::read(&stat_path) {
            Ok(s) => s,
            Err(e) => {
                // The namespace may come back (module loaded later): forget the old sample.
                self.previous = None;
                self.race_streak = 0;
                return Err(match self.unavailable_reason(&e) {
                    Some(reason) => Status::Unavailable(reason),
                    None => Status::Error(e.to_string()),
                });
            }
        };
        let mut degraded = Vec::new();
        let deltas = self
            .previous
            .as_ref()
            .map(|(at, prev)| Deltas::between(prev, &stat, now.duration_since(*at).as_secs_f64()));
        self.race_streak = match &deltas {
            Some(d) if d.has_races() => self.race_streak.saturating_add(1),
            _ => 0,
        };
        self.previous = Some((now, stat.clone()));
        let races = deltas.as_ref().is_some_and(Deltas::has_races);
        let sample = self.sample(stat, races, &mut degraded);
        let status = if degraded.is_empty() {
            Status::Ok
        } else {
            Status::Degraded(degraded.join("; "))
        };
        Ok((sample, deltas, status))
    }

    /// The metrics of a sample, plus the kernel-log counters.
    fn metrics(&self, sample: &Sample) -> Vec<Metric> {
        let mut out = metrics(sample);
        if sample.table_full_messages.is_some() {
            out.push(Metric::counter(
                "node_doctor_conntrack_table_full_messages_total",
                "Kernel log messages \"nf_conntrack: table full, dropping packet\" seen since the agent started (including its lookback).",
                self.table_full.total() as f64,
            ));
        }
        out.extend(self.kmsg.metrics("conntrack"));
        out
    }
}
