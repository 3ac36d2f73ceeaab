//! The typed reading of the conntrack collector: one [`Sample`] of the table and the facts
//! around it, the kernel log's "table full" messages per table, how this kernel counts insert
//! races ([`RaceAccounting`]) and the counter increases between two samples ([`Deltas`]).
//! The collector reads it; `judge` decides on it; tests build it directly.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::kube_proxy::KubeProxy;
use crate::proc::nf_conntrack_stat::NfConntrackStat;
use crate::proc::snmp::UdpCounters;

/// Where NodeLocal DNSCache listens by default.
pub const DEFAULT_NODELOCAL_DNS: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(169, 254, 20, 10)), 53);

/// What the kernel log said about one table: "table full" messages within the kernel-log
/// window and the age of the last one.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TableLog {
    pub messages: u64,
    /// Seconds since the last message (`None`: no message in the window).
    pub last_seconds_ago: Option<f64>,
}

/// Another network namespace's table that the kernel log says was full (6.17+ names it:
/// `table full in netns N`). Its limit is the same global `nf_conntrack_max`.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherTable {
    /// The namespace's inode; `None` for the initial namespace (an unnamed message on 6.17+
    /// while the collector reads another namespace).
    pub netns: Option<u64>,
    pub log: TableLog,
    /// A process in that namespace, when one was found (none: the namespace is gone, e.g.
    /// its pod was deleted).
    pub pid: Option<u32>,
    /// Its entries now, read through that process.
    pub entries: Option<u64>,
}

/// One sample of the host namespace's conntrack state and the facts around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// `/proc/<pid>/net/stat/nf_conntrack`, summed across CPUs.
    pub stat: NfConntrackStat,
    /// `nf_conntrack_max` (global).
    pub max: Option<u64>,
    /// `nf_conntrack_buckets` (global).
    pub buckets: Option<u64>,
    /// `MemTotal` in bytes, for sizing advice.
    pub mem_total_bytes: Option<u64>,
    /// `Udp:` counters of `/proc/<pid>/net/snmp`.
    pub udp: Option<UdpCounters>,
    /// Whether a UDP socket listens on the node-local DNS address (`None`: unknown).
    pub nodelocal_dns: Option<bool>,
    /// The kubelet's `--cluster-dns` / `clusterDNS` (empty: unknown).
    pub cluster_dns: Vec<String>,
    /// Pods the kubelet has on this node (`/var/lib/kubelet/pods` entries), best effort.
    pub pods_on_node: Option<u64>,
    /// "table full" kernel messages about the table this collector reads (`None` when the
    /// kernel log could not be read).
    pub table_log: Option<TableLog>,
    /// Other namespaces' tables the kernel log says were full.
    pub other_tables: Vec<OtherTable>,
    /// The node's kube-proxy, when the table needs advice (it may own the limit).
    pub kube_proxy: KubeProxy,
    /// Online CPUs (kube-proxy scales the limit by them).
    pub cpus: Option<u64>,
    /// Where a node-local DNS cache would listen (`--nodelocal-dns`).
    pub nodelocal_dns_address: SocketAddr,
}

impl Default for Sample {
    fn default() -> Self {
        Sample {
            kernel_release: None,
            stat: NfConntrackStat::default(),
            max: None,
            buckets: None,
            mem_total_bytes: None,
            udp: None,
            nodelocal_dns: None,
            cluster_dns: Vec::new(),
            pods_on_node: None,
            table_log: None,
            other_tables: Vec::new(),
            kube_proxy: KubeProxy::NotFound,
            cpus: None,
            nodelocal_dns_address: DEFAULT_NODELOCAL_DNS,
        }
    }
}

impl Sample {
    /// Table fill in percent of `nf_conntrack_max`.
    pub fn used_percent(&self) -> Option<f64> {
        self.percent_of_max(self.stat.entries)
    }

    pub(super) fn percent_of_max(&self, entries: u64) -> Option<f64> {
        let max = self.max.filter(|m| *m > 0)?;
        Some(entries as f64 * 100.0 / max as f64)
    }
}

/// How this kernel counts insert races in `/proc/net/stat/nf_conntrack` (kernel source,
/// `__nf_conntrack_confirm` and `nf_ct_resolve_clash`):
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceAccounting {
    /// The stat file has a `clashres` column (5.x and later): a clash the kernel resolved
    /// counts in `clashres` only; one it could not resolve counts in `insert_failed` **and**
    /// `drop` (the packet is dropped). On 6.x `insert_failed` also counts inserts refused for
    /// a too-long hash chain (`chainlength` column), which are not races.
    ClashColumn,
    /// No `clashres` column, kernel 4.10 or later: every clash counts in `insert_failed`,
    /// resolved or not; the unresolved ones (dropped) also in `drop`.
    ClashInInsertFailed,
    /// Kernels before 4.10 resolve no clash: every clash drops its packet and counts in
    /// `insert_failed` only, not in `drop`. Also assumed when the release is unknown.
    NoClashResolution,
}

impl RaceAccounting {
    pub fn of(stat: &NfConntrackStat, kernel_release: Option<&str>) -> RaceAccounting {
        if stat.has("clashres") {
            return RaceAccounting::ClashColumn;
        }
        let version = kernel_release.and_then(|r| {
            let mut p = r.trim().split(['.', '-', '+']);
            Some((
                p.next()?.parse::<u32>().ok()?,
                p.next()?.parse::<u32>().ok()?,
            ))
        });
        match version {
            Some(v) if v >= (4, 10) => RaceAccounting::ClashInInsertFailed,
            _ => RaceAccounting::NoClashResolution,
        }
    }

    /// Evidence text.
    pub fn as_str(self) -> &'static str {
        match self {
            RaceAccounting::ClashColumn => "clashres: insert_failed counts dropped clashes",
            RaceAccounting::ClashInInsertFailed => {
                "no clashres: insert_failed counts every clash, drop the dropped ones"
            }
            RaceAccounting::NoClashResolution => {
                "no clash resolution: insert_failed counts dropped clashes, drop does not"
            }
        }
    }
}

/// Counter increases between two samples and the time between them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Deltas {
    pub elapsed_seconds: f64,
    pub insert_failed: u64,
    pub drop: u64,
    pub early_drop: u64,
    /// `clashres` (kernels that resolve UDP clashes count it); `None` when not printed.
    pub clash_resolve: Option<u64>,
    /// `chainlength` (6.x: inserts refused for a too-long hash chain, `chaintoolong` in
    /// `conntrack -S`); `None` when not printed.
    pub chain_too_long: Option<u64>,
    pub search_restart: Option<u64>,
    pub invalid: Option<u64>,
}

impl Deltas {
    /// Increases from `prev` to `cur`; a counter that went down (module reload) counts 0.
    pub fn between(prev: &NfConntrackStat, cur: &NfConntrackStat, elapsed_seconds: f64) -> Deltas {
        let d = |name: &str| match (prev.get(name), cur.get(name)) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Deltas {
            elapsed_seconds,
            insert_failed: d("insert_failed").unwrap_or(0),
            drop: d("drop").unwrap_or(0),
            early_drop: d("early_drop").unwrap_or(0),
            clash_resolve: d("clashres"),
            chain_too_long: d("chainlength"),
            search_restart: d("search_restart"),
            invalid: d("invalid"),
        }
    }

    /// A per-second rate of one increase (0 when no time passed).
    pub fn rate(&self, increase: u64) -> f64 {
        if self.elapsed_seconds > 0.0 {
            increase as f64 / self.elapsed_seconds
        } else {
            0.0
        }
    }

    /// Packets dropped because they lost an insert race in this interval.
    pub fn lost_races(&self, acc: RaceAccounting) -> u64 {
        match acc {
            RaceAccounting::ClashColumn => self
                .insert_failed
                .saturating_sub(self.chain_too_long.unwrap_or(0)),
            RaceAccounting::ClashInInsertFailed => self.insert_failed.min(self.drop),
            RaceAccounting::NoClashResolution => self.insert_failed,
        }
    }

    /// Packets conntrack dropped in this interval that were not lost races: it could not
    /// create an entry for them (a full table, or no memory for one).
    pub fn untracked_drops(&self, acc: RaceAccounting) -> u64 {
        match acc {
            RaceAccounting::NoClashResolution => self.drop,
            _ => self.drop.saturating_sub(self.lost_races(acc)),
        }
    }

    /// True when this interval lost insert races.
    pub fn has_races(&self, acc: RaceAccounting) -> bool {
        self.lost_races(acc) > 0
    }
}
