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
//! the kubelet's cluster DNS; [`kube_proxy`] reads kube-proxy's conntrack settings;
//! [`kernel_log`] classifies "table full" messages by table; [`sample`] is the typed reading
//! (what was read, tests build it directly), [`thresholds`] the limits, and [`judge`] holds
//! the rules. This module samples, keeps the previous sample for rates and the kernel-log
//! events per table, and emits metrics.

pub mod judge;
pub mod kernel_log;
pub mod kube_proxy;
pub mod kubelet;
pub mod sample;
pub mod thresholds;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::collector::{CollectContext, Phases, Status};
use crate::error::ReadError;
use crate::hostfs::{self, cap, entries};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::Node;
use crate::proc::uptime::BootClock;
use crate::proc::{meminfo, net_udp, nf_conntrack_stat, ns, snmp};
use crate::rules::Draft;

pub use kernel_log::Table;
pub use sample::{Deltas, OtherTable, RaceAccounting, Sample, TableLog};
pub use thresholds::Thresholds;

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
    /// The kernel-log reader: "table full" messages within its lookback window raise
    /// `conntrack.table_full`, with a severity that decays with their age
    /// (`thresholds.log_critical_seconds`, `log_warning_seconds`, then info until they leave
    /// this window).
    pub kmsg: KmsgConfig,
}

impl Default for ConntrackConfig {
    fn default() -> Self {
        ConntrackConfig {
            netns_pid: 1,
            thresholds: Thresholds::default(),
            nodelocal_dns_address: sample::DEFAULT_NODELOCAL_DNS,
            kubelet_config: PathBuf::from("/var/lib/kubelet/config.yaml"),
            kubelet_pods_dir: PathBuf::from("/var/lib/kubelet/pods"),
            kubelet_rescan_samples: 20,
            kmsg: KmsgConfig::default(),
        }
    }
}

/// Most "table full" message times remembered per table (the kernel rate-limits the
/// message anyway).
const MAX_TABLE_FULL_EVENTS: usize = 4096;
/// Most tables (network namespaces) whose "table full" messages are remembered; beyond it the
/// table whose last message is oldest is forgotten.
const MAX_TABLES: usize = 16;

/// "table full" message times (µs since boot, oldest first) per table, within the kernel-log
/// window.
#[derive(Debug, Default)]
struct TableEvents {
    by_table: BTreeMap<Table, VecDeque<u64>>,
    total: u64,
}

impl TableEvents {
    fn record(&mut self, table: Table, usec: u64) {
        if !self.by_table.contains_key(&table) && self.by_table.len() >= MAX_TABLES {
            let oldest = self
                .by_table
                .iter()
                .min_by_key(|(_, t)| t.back().copied().unwrap_or(0))
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.by_table.remove(&k);
            }
        }
        let times = self.by_table.entry(table).or_default();
        if times.len() >= MAX_TABLE_FULL_EVENTS {
            times.pop_front();
        }
        times.push_back(usec);
        self.total = self.total.saturating_add(1);
    }

    /// Forgets messages older than `window`, and tables left without any.
    fn prune(&mut self, clock: &BootClock, window: Duration) {
        for times in self.by_table.values_mut() {
            while times.front().is_some_and(|t| clock.age(*t) > window) {
                times.pop_front();
            }
        }
        self.by_table.retain(|_, t| !t.is_empty());
    }

    /// The time of the newest message about `table` kept (µs since boot).
    fn last_usec(&self, table: Table) -> Option<u64> {
        self.by_table.get(&table).and_then(|t| t.back().copied())
    }

    fn log(&self, table: Table, clock: Option<&BootClock>) -> TableLog {
        let Some(times) = self.by_table.get(&table) else {
            return TableLog::default();
        };
        TableLog {
            messages: times.len() as u64,
            last_seconds_ago: times
                .back()
                .and_then(|t| clock.map(|c| c.age(*t).as_secs_f64())),
        }
    }
}

/// The conntrack collector. Keeps the previous stat sample (for rates), the race streak,
/// the kubelet's and kube-proxy's pids, the kernel-log events per table and a pid in each
/// other namespace named by them: a bounded amount of state.
pub struct ConntrackCollector {
    node: Node,
    config: ConntrackConfig,
    previous: Option<(Instant, nf_conntrack_stat::NfConntrackStat)>,
    race_streak: u32,
    kubelet: kubelet::KubeletFinder,
    kube_proxy: kube_proxy::KubeProxyFinder,
    kmsg: KmsgReader,
    tables: TableEvents,
    /// A process in each other namespace a message named (inode -> pid).
    netns_pids: BTreeMap<u64, u32>,
    /// Namespaces a whole search of the host's processes found no process in (inode -> the
    /// time of the newest message about it then, µs since boot): not searched for again
    /// while no newer message names them.
    netns_gone: BTreeMap<u64, u64>,
}

impl ConntrackCollector {
    pub fn new(node: Node, config: ConntrackConfig) -> Self {
        let kubelet = kubelet::KubeletFinder::new(
            config.kubelet_config.clone(),
            config.kubelet_rescan_samples,
        );
        let kube_proxy = kube_proxy::KubeProxyFinder::new(config.kubelet_rescan_samples);
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        ConntrackCollector {
            node,
            config,
            previous: None,
            race_streak: 0,
            kubelet,
            kube_proxy,
            kmsg,
            tables: TableEvents::default(),
            netns_pids: BTreeMap::new(),
            netns_gone: BTreeMap::new(),
        }
    }

    /// Reads new kernel-log records and keeps the "table full" messages within the lookback
    /// window, per table. `false` when the kernel log cannot be read (the reason goes to
    /// `degraded`).
    fn read_kernel_log(&mut self, degraded: &mut Vec<String>) -> bool {
        let batch = self.kmsg.read_new();
        for r in &batch.records {
            if let Some(table) = kernel_log::table_full(&r.message) {
                self.tables.record(table, r.usec);
            }
        }
        if let Some(clock) = self.kmsg.clock() {
            self.tables.prune(&clock, self.config.kmsg.lookback);
        }
        match batch.status {
            Status::Ok => true,
            other => {
                degraded.extend(other.message().map(str::to_string));
                false
            }
        }
    }

    /// The table this collector reads and the other tables the kernel log named, from the
    /// events kept: an unnamed message is ours unless the kernel (6.17+) names every other
    /// namespace and we read one of those; a named one is ours when it names our namespace.
    fn table_logs(
        &mut self,
        kernel_release: Option<&str>,
        readable: bool,
    ) -> (Option<TableLog>, Vec<OtherTable>) {
        let clock = self.kmsg.clock();
        let netns_pid = self.config.netns_pid;
        let ours = ns::inode(self.node.host(), netns_pid, "net");
        let reads_initial = netns_pid == 1
            || ours.is_some_and(|o| ns::inode(self.node.host(), 1, "net") == Some(o));
        let unnamed_ours = judge::unnamed_message_is_ours(kernel_release, reads_initial);
        let mut mine = TableLog::default();
        let mut others = Vec::new();
        let tables: Vec<Table> = self.tables.by_table.keys().copied().collect();
        for table in tables {
            let log = self.tables.log(table, clock.as_ref());
            match table {
                Table::Unnamed if unnamed_ours => mine = merge(mine, log),
                Table::Netns(n) if ours == Some(n) => mine = merge(mine, log),
                Table::Unnamed => others.push(OtherTable {
                    netns: None,
                    log,
                    pid: Some(1),
                    entries: None,
                }),
                Table::Netns(n) => others.push(OtherTable {
                    netns: Some(n),
                    log,
                    pid: None,
                    entries: None,
                }),
            }
        }
        let named: Vec<(u64, u64)> = others
            .iter()
            .filter_map(|o| o.netns)
            .map(|n| (n, self.tables.last_usec(Table::Netns(n)).unwrap_or(0)))
            .collect();
        self.find_netns_pids(&named);
        for o in &mut others {
            if let Some(n) = o.netns {
                o.pid = self.netns_pids.get(&n).copied();
            }
            o.entries = o.pid.and_then(|p| {
                nf_conntrack_stat::read(&nf_conntrack_stat::path(self.node.host(), p))
                    .ok()
                    .map(|s| s.entries)
            });
        }
        (readable.then_some(mine), others)
    }

    /// Keeps a process in each other namespace named by a message (`named`: inode and the time
    /// of its newest message): the remembered one while it is still there, else one search of
    /// the host's processes for all missing ([`crate::node::processes::Processes::in_netns`]:
    /// one `ns/net` link per process, stopping when every one is found).
    ///
    /// A namespace that search does not find is remembered as gone and not searched for again
    /// (a search is a link read of every process: 2,000 on the bench's node, for a namespace
    /// whose pod is usually deleted) until a message newer than that search names it: the
    /// kernel gives a new namespace the number of a freed one, and a newer message is about
    /// the namespace that has the number now. A process that enters a namespace kept only by a
    /// bind mount (`ip netns exec`) after a search found none is therefore not looked for.
    fn find_netns_pids(&mut self, named: &[(u64, u64)]) {
        let host = self.node.host();
        self.netns_pids.retain(|n, p| {
            named.iter().any(|(w, _)| w == n) && ns::inode(host, *p, "net") == Some(*n)
        });
        self.netns_gone
            .retain(|n, seen| named.iter().any(|(w, last)| w == n && last <= seen));
        let missing: Vec<u64> = named
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !self.netns_pids.contains_key(n) && !self.netns_gone.contains_key(n))
            .collect();
        if missing.is_empty() {
            return;
        }
        let Ok(found) = self.node.processes().in_netns("conntrack/netns", &missing) else {
            return;
        };
        for (n, last) in named {
            if missing.contains(n) && !found.contains_key(n) {
                self.netns_gone.insert(*n, *last);
            }
        }
        self.netns_pids.extend(found);
    }

    /// The status of a run whose stat file cannot be read: `nf_conntrack` not loaded is a
    /// node without connection tracking, by design (complete, with a note); a pid that is not
    /// visible, a refused file or a permission error could not be looked at.
    fn unavailable_status(&self, e: &ReadError) -> Status {
        let not_loaded =
            e.is_not_found() && self.node.host().proc_pid(self.config.netns_pid).exists();
        match self.unavailable_reason(e) {
            Some(reason) if not_loaded => Status::Noted(reason),
            Some(reason) => Status::Unavailable(reason),
            None => Status::Error(e.to_string()),
        }
    }

    fn unavailable_reason(&self, e: &ReadError) -> Option<String> {
        if e.is_refused() {
            // A FIFO or an oversized file where the kernel's stat file should be.
            return Some(e.to_string());
        }
        let pid = self.config.netns_pid;
        let pid_dir = self.node.host().proc_pid(pid);
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
        meminfo::read(self.node.host()).ok()?.mem_total_bytes()
    }

    fn nodelocal_listening(&self, degraded: &mut Vec<String>) -> Option<bool> {
        let pid = self.config.netns_pid;
        let addr = self.config.nodelocal_dns_address;
        let path = if addr.is_ipv4() {
            net_udp::path_v4(self.node.host(), pid)
        } else {
            net_udp::path_v6(self.node.host(), pid)
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
        let dir = self.node.host().resolve(&self.config.kubelet_pods_dir);
        let rd = hostfs::dir_entries(&dir, entries::PODS).ok()?;
        Some(
            rd.filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .count() as u64,
        )
    }

    /// The kernel release (`/proc/sys/kernel/osrelease`), best effort.
    fn kernel_release(&self) -> Option<String> {
        let osrelease = self.node.host().proc_file("sys/kernel/osrelease");
        hostfs::read_text(&osrelease, cap::VALUE)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Reads everything but the conntrack stat file into a sample. The kubelet's cluster DNS
    /// and the pod count only serve the race finding, so they are looked up (walking the
    /// process table when the kubelet is not yet known) only when `races` is true.
    fn read_around(
        &mut self,
        stat: nf_conntrack_stat::NfConntrackStat,
        kernel_release: Option<String>,
        races: bool,
        degraded: &mut Vec<String>,
    ) -> Sample {
        let pid = self.config.netns_pid;
        let sys = |name: &str| self.node.host().proc_file("sys/net/netfilter").join(name);
        let max = self.read_u64(sys("nf_conntrack_max"), degraded);
        let buckets = self.read_u64(sys("nf_conntrack_buckets"), degraded);
        let udp = match snmp::read(&snmp::path(self.node.host(), pid)) {
            Ok(s) => s.udp(),
            Err(e) => {
                degraded.push(e.to_string());
                None
            }
        };
        let nodelocal_dns = self.nodelocal_listening(degraded);
        let (cluster_dns, pods_on_node) = if races {
            let dns = self.kubelet.lookup(&self.node);
            if let Some(e) = dns.config_error {
                degraded.push(format!("{e}; the kubelet's cluster DNS is unknown"));
            }
            (dns.cluster_dns, self.pods_on_node())
        } else {
            (Vec::new(), None)
        };
        let readable = self.read_kernel_log(degraded);
        let (table_log, other_tables) = self.table_logs(kernel_release.as_deref(), readable);
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
            table_log,
            other_tables,
            kube_proxy: kube_proxy::KubeProxy::NotFound,
            cpus: None,
            nodelocal_dns_address: self.config.nodelocal_dns_address,
        }
    }
}

/// Two logs of one table (an unnamed and a named message stream that are both ours).
fn merge(a: TableLog, b: TableLog) -> TableLog {
    TableLog {
        messages: a.messages + b.messages,
        last_seconds_ago: match (a.last_seconds_ago, b.last_seconds_ago) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
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

/// One run's reading: the sample and the counters' deltas against the previous run.
pub struct Reading {
    pub sample: Sample,
    /// `None` on the first run.
    pub deltas: Option<Deltas>,
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for ConntrackCollector {
    const NAME: &'static str = "conntrack";
    type Sample = Reading;

    /// Reads the stat file and everything around it, and the deltas against the previous
    /// sample. `Err` is the status when the stat file itself cannot be read.
    fn sample(&mut self, _ctx: &CollectContext) -> Result<(Reading, Status), Status> {
        let stat_path = nf_conntrack_stat::path(self.node.host(), self.config.netns_pid);
        let now = Instant::now();
        let stat = match nf_conntrack_stat::read(&stat_path) {
            Ok(s) => s,
            Err(e) => {
                // The namespace may come back (module loaded later): forget the old sample.
                self.previous = None;
                self.race_streak = 0;
                return Err(self.unavailable_status(&e));
            }
        };
        let mut degraded = Vec::new();
        let kernel_release = self.kernel_release();
        let acc = RaceAccounting::of(&stat, kernel_release.as_deref());
        let deltas = self
            .previous
            .as_ref()
            .map(|(at, prev)| Deltas::between(prev, &stat, now.duration_since(*at).as_secs_f64()));
        let races = deltas.as_ref().is_some_and(|d| d.has_races(acc));
        self.race_streak = if races {
            self.race_streak.saturating_add(1)
        } else {
            0
        };
        self.previous = Some((now, stat.clone()));
        let mut sample = self.read_around(stat, kernel_release, races, &mut degraded);
        // kube-proxy owns the limit on most nodes: the table's advice needs its settings.
        if judge::table_needs_advice(&sample, deltas.as_ref(), &self.config.thresholds) {
            sample.kube_proxy = self.kube_proxy.lookup(&self.node);
            if !matches!(sample.kube_proxy, kube_proxy::KubeProxy::NotFound) {
                sample.cpus = crate::sys::cpu_online::read(self.node.host())
                    .ok()
                    .map(|c| c.len() as u64);
            }
        }
        let status = if degraded.is_empty() {
            Status::Ok
        } else {
            Status::Degraded(degraded.join("; "))
        };
        Ok((Reading { sample, deltas }, status))
    }

    fn judge(&mut self, r: &Reading) -> Vec<Draft> {
        judge::judge(
            &r.sample,
            r.deltas.as_ref(),
            self.race_streak,
            &self.config.thresholds,
        )
    }

    /// The metrics of a sample, plus the kernel-log counters.
    fn metrics(&self, r: &Reading) -> Vec<Metric> {
        let sample = &r.sample;
        let mut out = metrics(sample);
        if sample.table_log.is_some() {
            out.push(Metric::counter(
                "node_doctor_conntrack_table_full_messages_total",
                "Kernel log messages \"nf_conntrack: table full, dropping packet\" (any wording, any network namespace) seen since the agent started (including its lookback).",
                self.tables.total as f64,
            ));
        }
        out.extend(self.kmsg.metrics("conntrack"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::uptime::Uptime;
    use std::time::SystemTime;

    fn clock(uptime_secs: u64) -> BootClock {
        BootClock::new(
            Uptime {
                since_boot: Duration::from_secs(uptime_secs),
            },
            SystemTime::now(),
        )
    }

    /// Per-table message times stay bounded (16 tables, the oldest forgotten first), age out
    /// of the window, and report the age of the last one.
    #[test]
    fn table_events_are_bounded_per_table_and_age_out() {
        let mut ev = TableEvents::default();
        for n in 0..17u64 {
            ev.record(Table::Netns(n), (100 + n) * 1_000_000);
        }
        assert_eq!(ev.by_table.len(), MAX_TABLES);
        assert!(!ev.by_table.contains_key(&Table::Netns(0)));
        assert_eq!(ev.total, 17);
        ev.record(Table::Unnamed, 1_000 * 1_000_000);
        ev.record(Table::Unnamed, 1_990 * 1_000_000);
        let c = clock(2_000);
        let log = ev.log(Table::Unnamed, Some(&c));
        assert_eq!(log.messages, 2);
        assert_eq!(log.last_seconds_ago, Some(10.0));
        assert_eq!(ev.log(Table::Netns(99), Some(&c)), TableLog::default());
        // A 500 s window keeps the unnamed table's last message only.
        ev.prune(&c, Duration::from_secs(500));
        assert_eq!(ev.by_table.len(), 1);
        assert_eq!(ev.log(Table::Unnamed, Some(&c)).messages, 1);
        assert_eq!(ev.log(Table::Unnamed, None).last_seconds_ago, None);
        for _ in 0..MAX_TABLE_FULL_EVENTS + 5 {
            ev.record(Table::Unnamed, 1_995 * 1_000_000);
        }
        assert_eq!(
            ev.log(Table::Unnamed, Some(&c)).messages,
            MAX_TABLE_FULL_EVENTS as u64
        );
    }
}
