//! The conntrack rules: typed sample (+ deltas from the previous sample) -> drafts.
//!
//! Everything here is pure: no files, no clock. The collector builds a [`Sample`], computes
//! [`Deltas`] against its previous sample and counts how many consecutive samples showed
//! races; the rules decide severity, evidence and the conditions that pick the advice, whose
//! words (the handbook's cluster DNS section) are in `collectors/rules/conntrack.toml`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::finding::Severity;
use crate::proc::nf_conntrack_stat::NfConntrackStat;
use crate::proc::snmp::UdpCounters;
use crate::rules::Draft;

/// Rule id: insert_failed/drop rising (the 5-second DNS delay).
pub const INSERT_RACES: &str = "conntrack.insert_races";
/// Rule id: the table is (nearly) full.
pub const TABLE_FULL: &str = "conntrack.table_full";

/// Approximate kernel memory per conntrack entry (`struct nf_conn` slab object, x86-64),
/// used to price the recommended `nf_conntrack_max`.
pub const BYTES_PER_ENTRY: u64 = 300;

/// Where NodeLocal DNSCache listens by default.
pub const DEFAULT_NODELOCAL_DNS: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(169, 254, 20, 10)), 53);

/// Thresholds of the conntrack rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Table fill (entries / nf_conntrack_max) at which `conntrack.table_full` warns.
    pub table_warning_percent: f64,
    /// Table fill at which it is critical.
    pub table_critical_percent: f64,
    /// Consecutive samples with insert_failed/drop rising before `conntrack.insert_races`
    /// turns critical (4 samples = one minute at the agent's 15 s interval).
    pub races_critical_samples: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            table_warning_percent: 75.0,
            table_critical_percent: 90.0,
            races_critical_samples: 4,
        }
    }
}

/// One sample of the host namespace's conntrack state and the DNS facts around it.
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
    /// "table full, dropping packet" kernel messages counted by the kernel-log reader
    /// (`None` when no reader is wired in or it could not read the log).
    pub table_full_messages: Option<u64>,
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
            table_full_messages: None,
            nodelocal_dns_address: DEFAULT_NODELOCAL_DNS,
        }
    }
}

impl Sample {
    /// Table fill in percent of `nf_conntrack_max`.
    pub fn used_percent(&self) -> Option<f64> {
        let max = self.max.filter(|m| *m > 0)?;
        Some(self.stat.entries as f64 * 100.0 / max as f64)
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

    /// True when this interval lost insert races (insert_failed or drop rose).
    pub fn has_races(&self) -> bool {
        self.insert_failed > 0 || self.drop > 0
    }
}

/// Judges one sample. `deltas` is `None` on the first sample; `race_streak` is the number of
/// consecutive samples, this one included, whose deltas had races.
pub fn judge(
    sample: &Sample,
    deltas: Option<&Deltas>,
    race_streak: u32,
    t: &Thresholds,
) -> Vec<Draft> {
    let mut out = Vec::new();
    if let Some(d) = deltas {
        if d.has_races() {
            out.push(insert_races(sample, d, race_streak, t));
        }
    }
    out.extend(table_full(sample, deltas, t));
    out
}

fn yes_no_unknown(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

/// What the node-local DNS situation means for the advice: the condition the rule file
/// tests.
fn local_dns(sample: &Sample) -> &'static str {
    let ip = sample.nodelocal_dns_address.ip().to_string();
    match sample.nodelocal_dns {
        Some(false) => "dns_cache_absent",
        None => "dns_cache_unknown",
        Some(true) if sample.cluster_dns.is_empty() => "dns_cache_wiring_unknown",
        Some(true) if sample.cluster_dns.contains(&ip) => "dns_cache_in_use",
        Some(true) => "dns_cache_not_used",
    }
}

/// `conntrack.insert_races`: insert_failed (or drop) rose between samples.
fn insert_races(sample: &Sample, d: &Deltas, streak: u32, t: &Thresholds) -> Draft {
    let stat = &sample.stat;
    let severity = if streak >= t.races_critical_samples {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let addr = sample.nodelocal_dns_address;
    let mut f = Draft::new(INSERT_RACES, severity)
        .evidence("insert_failed_per_second", d.rate(d.insert_failed))
        .evidence("insert_failed_increase", d.insert_failed)
        .evidence(
            "insert_failed_total",
            stat.get("insert_failed").unwrap_or(0),
        )
        .evidence("drop_per_second", d.rate(d.drop))
        .evidence("drop_increase", d.drop)
        .evidence("drop_total", stat.get("drop").unwrap_or(0))
        .evidence("early_drop_per_second", d.rate(d.early_drop))
        .evidence("interval_seconds", d.elapsed_seconds)
        .evidence("consecutive_samples", streak)
        .evidence("critical_after_samples", t.races_critical_samples)
        .evidence(
            "kernel_release",
            sample.kernel_release.as_deref().unwrap_or("unknown"),
        )
        .evidence(
            "nodelocal_dns_listening",
            yes_no_unknown(sample.nodelocal_dns),
        )
        .evidence("nodelocal_dns_address", addr.to_string())
        .var("nodelocal_dns_ip", addr.ip().to_string())
        .var("nodelocal_dns_port", u32::from(addr.port()))
        .when(local_dns(sample))
        // Only drop rose: the kernel also counts packets it could not track at all.
        .when_if("only_drop", d.insert_failed == 0);
    // Kernels that resolve UDP clashes print `clashres`: report it so the reader sees how
    // many races the kernel already absorbed.
    match (stat.get("clashres"), d.clash_resolve) {
        (Some(total), Some(inc)) => {
            f = f
                .evidence("clash_resolve_total", total)
                .evidence("clash_resolve_per_second", d.rate(inc))
                .evidence("kernel_counts_clash_resolution", "yes");
        }
        _ => f = f.evidence("kernel_counts_clash_resolution", "no"),
    }
    f.evidence_opt(
        "search_restart_per_second",
        d.search_restart.map(|v| d.rate(v)),
    )
    .evidence_opt("invalid_per_second", d.invalid.map(|v| d.rate(v)))
    .evidence_opt(
        "kubelet_cluster_dns",
        (!sample.cluster_dns.is_empty()).then(|| sample.cluster_dns.join(",")),
    )
    .evidence_opt("pods_on_node", sample.pods_on_node)
    .evidence_opt(
        "udp_rcvbuf_errors_total",
        sample.udp.and_then(|u| u.rcvbuf_errors),
    )
    .evidence_opt("udp_in_errors_total", sample.udp.and_then(|u| u.in_errors))
}

/// The recommended `nf_conntrack_max`: the larger of the classic netfilter sizing
/// (`MemTotal / 16384 / (64 / 32)` = `MemTotal / 32768` on 64-bit) and twice the current
/// limit, rounded up to a multiple of 65536. Falls back to twice the limit when memory is
/// unknown.
pub fn recommended_max(current_max: u64, mem_total_bytes: Option<u64>) -> u64 {
    const STEP: u64 = 65536;
    let by_memory = mem_total_bytes.map(|m| m / 32768).unwrap_or(0);
    let target = by_memory.max(current_max.saturating_mul(2)).max(STEP);
    target.div_ceil(STEP).saturating_mul(STEP)
}

/// `conntrack.table_full`: table >= warning % (warning), >= critical % or kernel "table full"
/// messages (critical).
fn table_full(sample: &Sample, deltas: Option<&Deltas>, t: &Thresholds) -> Option<Draft> {
    let used = sample.used_percent();
    let messages = sample.table_full_messages.unwrap_or(0);
    let severity = if messages > 0 || used.is_some_and(|u| u >= t.table_critical_percent) {
        Severity::Critical
    } else if used.is_some_and(|u| u >= t.table_warning_percent) {
        Severity::Warning
    } else {
        return None;
    };
    let rec = recommended_max(sample.max.unwrap_or(0), sample.mem_total_bytes);
    Some(
        Draft::new(TABLE_FULL, severity)
            .evidence("entries", sample.stat.entries)
            .evidence("warning_percent", t.table_warning_percent)
            .evidence("critical_percent", t.table_critical_percent)
            .evidence("recommended_max", rec)
            .evidence(
                "recommended_max_memory_bytes",
                rec.saturating_mul(BYTES_PER_ENTRY),
            )
            .evidence_opt("entries_limit", sample.max)
            .evidence_opt("used_percent", sample.max.map(|_| used.unwrap_or(0.0)))
            .evidence_opt("buckets", sample.buckets)
            .evidence_opt("table_full_messages", sample.table_full_messages)
            .evidence_opt("mem_total_bytes", sample.mem_total_bytes)
            .evidence_opt("drop_total", sample.stat.get("drop"))
            .evidence_opt("early_drop_total", sample.stat.get("early_drop"))
            // `drop` counts packets the kernel could not track (a full table among the
            // causes); `early_drop` counts entries evicted to make room.
            .evidence_opt("drop_increase", deltas.map(|d| d.drop))
            .evidence_opt("early_drop_increase", deltas.map(|d| d.early_drop))
            .var("bytes_per_entry", BYTES_PER_ENTRY)
            // The hash table grows with the limit (the kernel's default: one bucket per entry).
            .when_if(
                "hashsize_below_recommended",
                sample.buckets.is_some_and(|b| b < rec),
            ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Finding;

    /// The drafts, in the built-in words.
    fn judge(
        s: &Sample,
        d: Option<&Deltas>,
        streak: u32,
        t: &Thresholds,
        node: &str,
    ) -> Vec<Finding> {
        let rules = crate::rules::RuleBook::builtin();
        super::judge(s, d, streak, t)
            .into_iter()
            .map(|d| rules.render(d, node))
            .collect()
    }

    fn stat(entries: u64, cols: &[(&str, u64)]) -> NfConntrackStat {
        NfConntrackStat {
            entries,
            counters: cols.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            cpus: 2,
        }
    }

    fn sample(entries: u64, max: u64) -> Sample {
        Sample {
            kernel_release: Some("6.18.44".into()),
            stat: stat(
                entries,
                &[
                    ("clashres", 10),
                    ("insert_failed", 100),
                    ("drop", 4),
                    ("early_drop", 0),
                ],
            ),
            max: Some(max),
            buckets: Some(max),
            mem_total_bytes: Some(8 << 30),
            nodelocal_dns: Some(false),
            ..Sample::default()
        }
    }

    #[test]
    fn deltas_and_rates() {
        let a = stat(5, &[("insert_failed", 10), ("drop", 1), ("clashres", 3)]);
        let b = stat(9, &[("insert_failed", 40), ("drop", 1), ("clashres", 13)]);
        let d = Deltas::between(&a, &b, 15.0);
        assert_eq!(d.insert_failed, 30);
        assert_eq!(d.drop, 0);
        assert_eq!(d.clash_resolve, Some(10));
        assert_eq!(d.search_restart, None);
        assert!((d.rate(d.insert_failed) - 2.0).abs() < 1e-9);
        assert!(d.has_races());
        // A counter that went backwards (module reloaded) is not a race.
        let d = Deltas::between(&b, &a, 15.0);
        assert!(!d.has_races());
        assert_eq!(Deltas::default().rate(5), 0.0);
    }

    #[test]
    fn race_warning_then_critical_when_sustained() {
        let cfg = Thresholds::default();
        let s = sample(100, 262144);
        let d = Deltas {
            elapsed_seconds: 15.0,
            insert_failed: 30,
            drop: 3,
            clash_resolve: Some(6),
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "node-1");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, INSERT_RACES);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].evidence["insert_failed_per_second"].as_f64(),
            Some(2.0)
        );
        assert_eq!(f[0].evidence["drop_per_second"].as_f64(), Some(0.2));
        assert_eq!(f[0].evidence["insert_failed_total"].as_f64(), Some(100.0));
        assert_eq!(f[0].evidence["clash_resolve_total"].as_f64(), Some(10.0));
        assert_eq!(
            f[0].evidence["clash_resolve_per_second"].as_f64(),
            Some(0.4)
        );
        assert_eq!(f[0].evidence["kernel_release"].as_str(), Some("6.18.44"));
        assert!(f[0]
            .remediation
            .commands
            .iter()
            .any(|c| c.contains("spec.nodeName=node-1")));
        let f = judge(&s, Some(&d), cfg.races_critical_samples, &cfg, "node-1");
        assert_eq!(f[0].severity, Severity::Critical);
        // No increase: nothing.
        let quiet = Deltas {
            elapsed_seconds: 15.0,
            ..Deltas::default()
        };
        assert!(judge(&s, Some(&quiet), 0, &cfg, "node-1").is_empty());
        assert!(judge(&s, None, 0, &cfg, "node-1").is_empty());
    }

    #[test]
    fn older_kernel_without_clashres_says_so() {
        let cfg = Thresholds::default();
        let mut s = sample(100, 65536);
        s.stat = stat(100, &[("searched", 1), ("insert_failed", 7), ("drop", 0)]);
        let d = Deltas {
            elapsed_seconds: 1.0,
            insert_failed: 7,
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        assert_eq!(
            f[0].evidence["kernel_counts_clash_resolution"].as_str(),
            Some("no")
        );
        assert!(!f[0].evidence.contains_key("clash_resolve_total"));
    }

    #[test]
    fn drop_only_points_at_the_table() {
        let cfg = Thresholds::default();
        let s = sample(250000, 262144);
        let d = Deltas {
            elapsed_seconds: 15.0,
            drop: 9,
            early_drop: 4,
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        let races = f.iter().find(|f| f.id == INSERT_RACES).unwrap();
        assert!(races
            .remediation
            .steps
            .iter()
            .any(|t| t.en.starts_with("Only `drop` rose")));
        let table = f.iter().find(|f| f.id == TABLE_FULL).unwrap();
        assert_eq!(table.evidence["drop_increase"].as_f64(), Some(9.0));
        assert_eq!(table.evidence["early_drop_increase"].as_f64(), Some(4.0));
        // With insert_failed rising too, the drop-only hint is not given.
        let d = Deltas {
            insert_failed: 1,
            ..d
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        assert!(!f[0]
            .remediation
            .steps
            .iter()
            .any(|t| t.en.starts_with("Only `drop` rose")));
    }

    #[test]
    fn table_thresholds() {
        let cfg = Thresholds::default();
        assert!(judge(&sample(196607, 262144), None, 0, &cfg, "n").is_empty()); // 74.99%
        let f = judge(&sample(196608, 262144), None, 0, &cfg, "n"); // 75%
        assert_eq!(f[0].id, TABLE_FULL);
        assert_eq!(f[0].severity, Severity::Warning);
        let f = judge(&sample(241173, 262144), None, 0, &cfg, "n"); // 92%
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].evidence["used_percent"].as_f64(), Some(92.0));
        // Kernel log says full while the count is low (entries expired since): critical.
        let mut s = sample(1000, 262144);
        s.table_full_messages = Some(3);
        let f = judge(&s, None, 0, &cfg, "n");
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].evidence["table_full_messages"].as_f64(), Some(3.0));
        s.table_full_messages = Some(0);
        assert!(judge(&s, None, 0, &cfg, "n").is_empty());
    }

    #[test]
    fn sizing_formula() {
        // 8 GiB: MemTotal/32768 = 262144, twice 65536 = 131072 -> 262144.
        assert_eq!(recommended_max(65536, Some(8 << 30)), 262144);
        // 24 GiB host with the 6.18 default limit 262144: 786432 by memory.
        assert_eq!(recommended_max(262144, Some(24 << 30)), 786432);
        // Limit already above the memory formula: double it.
        assert_eq!(recommended_max(1_048_576, Some(8 << 30)), 2_097_152);
        // Rounded up to a multiple of 65536; unknown memory.
        assert_eq!(recommended_max(100_000, None), 262144);
        assert_eq!(recommended_max(0, None), 65536);
    }
}
