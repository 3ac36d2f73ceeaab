//! The `tables` collector: kernel tables that run out. The open-file table
//! (`/proc/sys/fs/file-nr` against `file-max`, and the processes holding the most
//! descriptors when it is high), the container runtime's and the kubelet's descriptors
//! against their own `RLIMIT_NOFILE`, the IPv4 and IPv6 neighbour tables against
//! `gc_thresh1..3`, TCP sockets' memory against `tcp_mem` and orphans against
//! `tcp_max_orphans`, and the kernel-log lines that say one of them ran out
//! (`neighbor table overflow!`, `TCP: out of memory -- consider tuning tcp_mem`,
//! `TCP: too many orphaned sockets`; [`lines`]).
//!
//! Whose figures: `file-nr`, `file-max` and `nr_open` are global. The neighbour tables are
//! shared by every network namespace; their statistics (`/proc/net/stat/arp_cache`,
//! `ndisc_cache`) exist only in the initial namespace's `/proc/net` and are read through pid 1;
//! `gc_thresh*` (`net.ipv{4,6}.neigh.default`), `tcp_mem` and `tcp_max_orphans` are global
//! sysctls registered in the initial namespace only (a new namespace has none of them on 6.18),
//! so they are read from `<root>/proc/sys` only when the agent is in the host's network
//! namespace ([`HostNetns::sysctls_are_hosts`]), else the status says they are not judged.
//! `sockstat`'s `orphan`, `alloc` and `mem` are global, `inuse` and `tw` per namespace (read
//! through pid 1: the host's).
//!
//! Cost: a healthy run reads `file-nr`, `nr_open`, two neighbour stat files and six sysctls,
//! `sockstat`, the kernel-log hub's new records, and per followed daemon its `stat`, `status`
//! (`FDSize`) and `limits`; descriptors are listed only for a daemon whose table size reaches
//! its clear bar, and other processes' only when `file-nr` reaches the scan bar.

pub mod judge;
pub mod lines;
pub mod sample;
pub mod thresholds;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::collector::{CollectContext, HostNetns, Phases, Status};
use crate::kmsg::{KmsgConfig, KmsgReader};
use crate::metric::Metric;
use crate::node::follow::{Followed, Rescan};
use crate::node::Node;
use crate::proc::{file_nr, limits, neigh_stat, pid_fds, sockstat};
use crate::rules::Draft;

pub use lines::Line;
pub use sample::{
    DaemonFds, Family, FileHandles, Holder, Holders, LineLog, NeighTable, Sample, Tcp,
};
pub use thresholds::Thresholds;

/// What a run could not read (`degraded`) and what this host does not have by design
/// (`noted`: a "host" whose pid 1 is not in the kernel's initial network namespace, as in a
/// kind node or a test's staged node, has no neighbour statistics and none of the initial
/// namespace's sysctls).
#[derive(Debug, Default)]
struct Notes {
    could_not: Vec<String>,
    absent: Vec<String>,
}

impl Notes {
    /// Files of the kernel's initial network namespace that are missing: absent by design;
    /// anything else could not be read.
    fn initial_netns_file(&mut self, e: &crate::ReadError, what: &str) {
        if e.is_not_found() {
            self.absent.push(format!(
                "no {}: not the kernel's initial network namespace (a nested node?); {what}",
                e.path().display()
            ));
        } else {
            self.could_not.push(format!("{e}; {what}"));
        }
    }
}

/// The daemons whose descriptor limits are judged.
pub const DAEMONS: &[&str] = &["containerd", "dockerd", "cri-dockerd", "kubelet"];

/// Kernel-log line times remembered per kind (the kernel rate-limits them anyway).
const MAX_LINE_TIMES: usize = 4096;
/// Longest `comm` kept for a holder.
const MAX_COMM_BYTES: usize = 64;

/// Configuration of the tables collector.
#[derive(Debug, Clone, PartialEq)]
pub struct TablesConfig {
    pub thresholds: Thresholds,
    /// The kernel-log reader: lines within its lookback window raise
    /// `tables.kernel_table_full`, decaying with their age.
    pub kmsg: KmsgConfig,
    /// The holder scan counts the descriptors of at most this many processes...
    pub max_scan_processes: usize,
    /// ... at most this many per process ...
    pub max_fds_per_process: usize,
    /// ... and stops after this long.
    pub max_scan_millis: u64,
    /// Holders kept (most first).
    pub top_holders: usize,
}

impl Default for TablesConfig {
    fn default() -> Self {
        TablesConfig {
            thresholds: Thresholds::default(),
            kmsg: KmsgConfig::default(),
            max_scan_processes: 4096,
            max_fds_per_process: 1 << 20,
            max_scan_millis: 200,
            top_holders: 10,
        }
    }
}

/// The tables collector: the daemons it follows, the previous neighbour counters (for
/// increases), the kernel-log line times per kind, and what its judge raised last.
pub struct TablesCollector {
    node: Node,
    config: TablesConfig,
    kmsg: KmsgReader,
    daemons: Followed,
    previous_neigh: BTreeMap<Family, (Instant, Option<u64>, Option<u64>)>,
    lines: BTreeMap<Line, VecDeque<u64>>,
    lines_total: BTreeMap<Line, u64>,
    raised: BTreeSet<(String, String)>,
}

impl TablesCollector {
    pub fn new(node: Node, config: TablesConfig) -> Self {
        let kmsg = node.kmsg_reader(config.kmsg.clone());
        TablesCollector {
            node,
            config,
            kmsg,
            daemons: Followed::new(DAEMONS, 2, Rescan::WhileMissing(20), "tables/daemons"),
            previous_neigh: BTreeMap::new(),
            lines: BTreeMap::new(),
            lines_total: Line::ALL.iter().map(|l| (*l, 0)).collect(),
            raised: BTreeSet::new(),
        }
    }

    /// `file-nr` and `nr_open`.
    fn read_files(&self, notes: &mut Notes) -> Option<FileHandles> {
        let host = self.node.host();
        match file_nr::read(host) {
            Ok(f) => Some(FileHandles {
                allocated: f.allocated,
                max: f.max,
                nr_open: file_nr::read_value(host, "nr_open").ok(),
            }),
            Err(e) => {
                notes
                    .could_not
                    .push(format!("{e}; the open-file table is not judged"));
                None
            }
        }
    }

    /// The processes holding the most descriptors: a bounded scan of the node's process
    /// table, one listing of `/proc/<pid>/fd` each.
    fn scan_holders(&self) -> Holders {
        let started = Instant::now();
        let budget = Duration::from_millis(self.config.max_scan_millis);
        let mut out = Holders::default();
        let Ok(snap) = self.node.processes().snapshot("tables/holders") else {
            out.partial = true;
            return out;
        };
        out.partial = snap.truncated;
        let mut all: Vec<Holder> = Vec::new();
        for p in snap.procs.iter().filter(|p| !p.is_dead()) {
            if out.scanned as usize >= self.config.max_scan_processes || started.elapsed() > budget
            {
                out.partial = true;
                break;
            }
            let cap = self.config.max_fds_per_process;
            let Ok((fds, at_least)) = pid_fds::count(self.node.host(), p.pid, cap) else {
                continue;
            };
            out.scanned += 1;
            if fds > 0 {
                all.push(Holder {
                    pid: p.pid,
                    comm: crate::bounded::prefix_owned(&p.comm, MAX_COMM_BYTES),
                    fds,
                    at_least,
                });
            }
        }
        all.sort_by(|a, b| b.fds.cmp(&a.fds).then(a.pid.cmp(&b.pid)));
        all.truncate(self.config.top_holders);
        out.top = all;
        out
    }

    /// The followed daemons' descriptors against their limits. A daemon's descriptors are
    /// counted only when its table size (`FDSize`) reaches the clear bar of its limit.
    fn read_daemons(&mut self) -> Vec<DaemonFds> {
        self.daemons.refresh(&self.node, &[]);
        let host = self.node.host();
        let bar = self.config.thresholds.daemon_clear_percent;
        let mut out = Vec::new();
        for name in DAEMONS {
            for p in self.daemons.get(name) {
                let Ok(lim) = limits::read(host, p.pid) else {
                    continue;
                };
                let table_size = pid_fds::fd_size(host, p.pid);
                let worth = match (lim.soft, table_size) {
                    (Some(soft), Some(size)) => size as f64 * 100.0 >= bar * soft as f64,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                let open = if worth {
                    let cap = lim.soft.map_or(hostfs_fds(), |s| s as usize + 1);
                    pid_fds::count(host, p.pid, cap).ok().map(|(n, _)| n)
                } else {
                    None
                };
                out.push(DaemonFds {
                    name: name.to_string(),
                    pid: p.pid,
                    open,
                    table_size,
                    soft_limit: lim.soft,
                    hard_limit: lim.hard,
                });
            }
        }
        out
    }

    /// Both neighbour tables: entries and counters through pid 1, thresholds from the host
    /// namespace's sysctls.
    fn read_neigh(&mut self, host_netns: HostNetns, notes: &mut Notes) -> Vec<NeighTable> {
        let host = self.node.host();
        let now = Instant::now();
        let mut out = Vec::new();
        for family in [Family::Ipv4, Family::Ipv6] {
            let stat = match neigh_stat::read(host, family.table()) {
                Ok(s) => s,
                // No IPv6 (ipv6.disable=1): nothing to judge.
                Err(e) if e.is_not_found() && family == Family::Ipv6 => continue,
                Err(e) => {
                    let what = format!("the {} neighbour table is not judged", family.as_str());
                    notes.initial_netns_file(&e, &what);
                    continue;
                }
            };
            let gc_thresh = if host_netns.sysctls_are_hosts() {
                match neigh_stat::read_gc_thresh(host, family.as_str()) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        let what = format!(
                            "the {} neighbour table's fill is not judged",
                            family.as_str()
                        );
                        notes.initial_netns_file(&e, &what);
                        None
                    }
                }
            } else {
                None
            };
            let previous = self
                .previous_neigh
                .insert(family, (now, stat.table_fulls, stat.forced_gc_runs));
            let inc = |now: Option<u64>, then: Option<u64>| match (now, then) {
                (Some(n), Some(t)) => Some(n.saturating_sub(t)),
                _ => None,
            };
            let (fulls_inc, forced_inc, interval) = match previous {
                Some((then, fulls, forced)) => (
                    inc(stat.table_fulls, fulls),
                    inc(stat.forced_gc_runs, forced),
                    Some(now.duration_since(then).as_secs_f64()),
                ),
                None => (None, None, None),
            };
            out.push(NeighTable {
                family,
                entries: stat.entries,
                gc_thresh,
                table_fulls_increase: fulls_inc,
                forced_gc_increase: forced_inc,
                table_fulls_total: stat.table_fulls,
                forced_gc_total: stat.forced_gc_runs,
                interval_seconds: interval,
            });
        }
        if !host_netns.sysctls_are_hosts() && !out.is_empty() {
            notes.could_not.push(format!(
                "the agent is not in the host's network namespace ({}): gc_thresh*, tcp_mem and \
                 tcp_max_orphans are visible there only (run with hostNetwork); the neighbour \
                 tables' fill and TCP limits are not judged",
                host_netns.as_str()
            ));
        }
        out
    }

    /// `sockstat` through pid 1 and the TCP limits from the host namespace's sysctls.
    fn read_tcp(&self, host_netns: HostNetns, notes: &mut Notes) -> Option<Tcp> {
        let host = self.node.host();
        let stat = match sockstat::read(host) {
            Ok(s) => s,
            Err(e) => {
                notes
                    .could_not
                    .push(format!("{e}; TCP memory and orphans are not judged"));
                return None;
            }
        };
        let (tcp_mem, max_orphans) = if host_netns.sysctls_are_hosts() {
            let mem = sockstat::read_tcp_mem(host)
                .map_err(|e| notes.initial_netns_file(&e, "TCP memory is not judged"))
                .ok();
            let orphans = sockstat::read_max_orphans(host)
                .map_err(|e| notes.initial_netns_file(&e, "TCP orphans are not judged"))
                .ok();
            (mem, orphans)
        } else {
            (None, None)
        };
        Some(Tcp {
            mem_pages: stat.mem_pages,
            tcp_mem,
            orphans: stat.orphan,
            max_orphans,
            inuse: stat.inuse,
            inuse6: sockstat::read_tcp6_inuse(host),
            time_wait: stat.tw,
            alloc: stat.alloc,
        })
    }

    /// New kernel-log records into the line times per kind; the reader's status.
    fn read_kernel_log(&mut self) -> (Vec<LineLog>, Status) {
        let batch = self.kmsg.read_new();
        for r in &batch.records {
            let Some(line) = lines::classify(&r.message) else {
                continue;
            };
            let times = self.lines.entry(line).or_default();
            if times.len() >= MAX_LINE_TIMES {
                times.pop_front();
            }
            times.push_back(r.usec);
            *self.lines_total.entry(line).or_insert(0) += 1;
        }
        let clock = self.kmsg.clock();
        if let Some(c) = &clock {
            let window = self.config.kmsg.lookback;
            for times in self.lines.values_mut() {
                while times.front().is_some_and(|t| c.age(*t) > window) {
                    times.pop_front();
                }
            }
            self.lines.retain(|_, t| !t.is_empty());
        }
        let logs = self
            .lines
            .iter()
            .map(|(line, times)| LineLog {
                line: *line,
                count: times.len() as u64,
                last_seconds_ago: times
                    .back()
                    .and_then(|t| clock.as_ref().map(|c| c.age(*t).as_secs())),
            })
            .collect();
        (logs, batch.status)
    }
}

/// The most descriptors one process may have (`fs.nr_open`'s ceiling): the count's cap for
/// an unlimited soft limit.
fn hostfs_fds() -> usize {
    crate::hostfs::entries::FDS
}

impl Phases for TablesCollector {
    const NAME: &'static str = "tables";
    type Sample = Sample;

    fn sample(&mut self, ctx: &CollectContext) -> Result<(Sample, Status), Status> {
        let mut notes = Notes::default();
        let files = self.read_files(&mut notes);
        let t = &self.config.thresholds;
        let holders = files
            .as_ref()
            .filter(|f| {
                f.max > 0 && f.allocated as f64 * 100.0 >= t.files_scan_percent * f.max as f64
            })
            .map(|_| self.scan_holders());
        let daemons = self.read_daemons();
        let neigh = self.read_neigh(ctx.host_netns, &mut notes);
        let tcp = self.read_tcp(ctx.host_netns, &mut notes);
        let (lines, kmsg_status) = self.read_kernel_log();
        let status = Status::from_notes(notes.could_not, notes.absent).worst(kmsg_status);
        if files.is_none() && neigh.is_empty() && tcp.is_none() {
            return Err(Status::Unavailable(
                status
                    .message()
                    .unwrap_or("no kernel table is readable")
                    .to_string(),
            ));
        }
        let sample = Sample {
            files,
            holders,
            daemons,
            neigh,
            tcp,
            lines,
            page_size_bytes: self.node.facts().page_size,
            lookback_seconds: self.config.kmsg.lookback.as_secs(),
            raised_before: self.raised.clone(),
        };
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &Sample) -> Vec<Draft> {
        let drafts = judge::judge(sample, &self.config.thresholds);
        self.raised = drafts
            .iter()
            .map(|d| (d.id.clone(), d.subject.clone()))
            .collect();
        drafts
    }

    fn metrics(&self, s: &Sample) -> Vec<Metric> {
        let mut m = Vec::new();
        file_metrics(s, &mut m);
        daemon_metrics(s, &mut m);
        neighbour_metrics(s, &mut m);
        tcp_metrics(s, &mut m);
        for (line, n) in &self.lines_total {
            m.push(
                Metric::counter(
                    "node_doctor_tables_kernel_lines_total",
                    "Kernel-log lines saying a table ran out, read by this agent (including its start-up lookback), by table.",
                    *n as f64,
                )
                .label("table", line.as_str()),
            );
        }
        m.extend(self.kmsg.metrics("tables"));
        m
    }
}

/// File handles: allocated, fs.file-max, fs.nr_open.
fn file_metrics(s: &Sample, m: &mut Vec<Metric>) {
    if let Some(f) = &s.files {
        m.push(Metric::gauge(
            "node_doctor_tables_file_handles_allocated",
            "File handles allocated by the kernel (/proc/sys/fs/file-nr, first field).",
            f.allocated as f64,
        ));
        m.push(Metric::gauge(
            "node_doctor_tables_file_handles_max",
            "fs.file-max: the most file handles the kernel allocates.",
            f.max as f64,
        ));
        if let Some(n) = f.nr_open {
            m.push(Metric::gauge(
                "node_doctor_tables_nr_open",
                "fs.nr_open: the highest RLIMIT_NOFILE a process may set.",
                n as f64,
            ));
        }
    }
}

/// The runtimes' and the kubelet's descriptors and limits.
fn daemon_metrics(s: &Sample, m: &mut Vec<Metric>) {
    for d in &s.daemons {
        if let Some(open) = d.open.or(d.table_size) {
            m.push(
                Metric::gauge(
                    "node_doctor_tables_daemon_open_fds",
                    "A runtime's or the kubelet's open descriptors; its descriptor-table size (an upper bound) when far below its limit.",
                    open as f64,
                )
                .label("daemon", d.name.clone()),
            );
        }
        if let Some(soft) = d.soft_limit {
            m.push(
                Metric::gauge(
                    "node_doctor_tables_daemon_fd_limit",
                    "A runtime's or the kubelet's soft RLIMIT_NOFILE (/proc/<pid>/limits).",
                    soft as f64,
                )
                .label("daemon", d.name.clone()),
            );
        }
    }
}

/// Neighbour tables: entries, gc_thresh1..3, table-full and forced-GC counters.
fn neighbour_metrics(s: &Sample, m: &mut Vec<Metric>) {
    for n in &s.neigh {
        let fam = n.family.as_str();
        m.push(
            Metric::gauge(
                "node_doctor_tables_neighbour_entries",
                "Entries in a neighbour table, all network namespaces (/proc/net/stat/arp_cache, ndisc_cache).",
                n.entries as f64,
            )
            .label("family", fam),
        );
        if let Some(g) = n.gc_thresh {
            for (i, v) in g.iter().enumerate() {
                m.push(
                    Metric::gauge(
                        "node_doctor_tables_neighbour_gc_thresh",
                        "A neighbour table's gc_thresh1..3 (net.ipv4/ipv6.neigh.default).",
                        *v as f64,
                    )
                    .label("family", fam)
                    .label("level", (i + 1).to_string()),
                );
            }
        }
        if let Some(v) = n.table_fulls_total {
            m.push(
                Metric::counter(
                    "node_doctor_tables_neighbour_table_fulls_total",
                    "Neighbour entries refused because the table was full (table_fulls, summed over CPUs).",
                    v as f64,
                )
                .label("family", fam),
            );
        }
        if let Some(v) = n.forced_gc_total {
            m.push(
                Metric::counter(
                    "node_doctor_tables_neighbour_forced_gc_runs_total",
                    "Forced garbage collections of a neighbour table (forced_gc_runs, summed over CPUs).",
                    v as f64,
                )
                .label("family", fam),
            );
        }
    }
}

/// TCP memory and orphans, with their limits.
fn tcp_metrics(s: &Sample, m: &mut Vec<Metric>) {
    if let Some(t) = &s.tcp {
        if let Some(p) = t.mem_pages {
            m.push(Metric::gauge(
                "node_doctor_tables_tcp_memory_pages",
                "Memory of all TCP sockets in pages (/proc/net/sockstat TCP mem; global).",
                p as f64,
            ));
        }
        if let Some(l) = t.tcp_mem {
            for (name, v) in ["min", "pressure", "max"].iter().zip(l) {
                m.push(
                    Metric::gauge(
                        "node_doctor_tables_tcp_mem_limit_pages",
                        "net.ipv4.tcp_mem in pages (min, pressure, max).",
                        v as f64,
                    )
                    .label("level", *name),
                );
            }
        }
        if let Some(o) = t.orphans {
            m.push(Metric::gauge(
                "node_doctor_tables_tcp_orphans",
                "Orphaned TCP sockets (/proc/net/sockstat; global).",
                o as f64,
            ));
        }
        if let Some(o) = t.max_orphans {
            m.push(Metric::gauge(
                "node_doctor_tables_tcp_max_orphans",
                "net.ipv4.tcp_max_orphans.",
                o as f64,
            ));
        }
    }
}
