//! The conntrack rules: typed sample (+ deltas from the previous sample) -> drafts.
//!
//! Everything here is pure: no files, no clock. The collector builds a [`Sample`], computes
//! [`Deltas`] against its previous sample and counts how many consecutive samples lost
//! insert races; the rules decide severity, evidence and the conditions that pick the advice,
//! whose words are in `collectors/rules/conntrack.toml`.
//!
//! **Which rule a dropped packet belongs to.** The kernel moves different counters for an
//! insert race and for a full table (measured on 6.18, read in the kernel source for the
//! others; docs/collectors/conntrack.md has the table): a full table raises `drop` (and
//! `early_drop` for every entry it evicts to make room) and never `insert_failed`; a lost
//! race raises `insert_failed`, and on kernels that resolve clashes also `drop`
//! ([`RaceAccounting`]). So `conntrack.insert_races` is raised only from the races the
//! kernel's own counters show were lost, and every other dropped packet is the table's
//! (`conntrack.table_full`).
//!
//! **Lifetime of a finding from the kernel log.** A "table full" message is evidence about the
//! past. `conntrack.table_full`'s severity is the worst of what is true now (the fill, packets
//! dropped or entries evicted since the previous sample) and how old the last message is
//! (critical up to `log_critical_seconds`, warning up to `log_warning_seconds`, info after
//! that until the message leaves the kernel-log window): a table that recovered decays
//! instead of staying critical for the whole window.

use super::kernel_log;
use super::kube_proxy::{self, KubeProxy, Origin};
use super::sample::{Deltas, OtherTable, RaceAccounting, Sample};
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::rules::Draft;

/// Rule id: conntrack inserts lost to races (the 5-second DNS delay).
pub const INSERT_RACES: &str = "conntrack.insert_races";
/// Rule id: the table is (nearly) full, or was full recently.
pub const TABLE_FULL: &str = "conntrack.table_full";

/// Approximate kernel memory per conntrack entry (`struct nf_conn` slab object, x86-64),
/// used to price the recommended `nf_conntrack_max`.
pub const BYTES_PER_ENTRY: u64 = 300;

/// Judges one sample. `deltas` is `None` on the first sample; `race_streak` is the number of
/// consecutive samples, this one included, that lost insert races.
pub fn judge(
    sample: &Sample,
    deltas: Option<&Deltas>,
    race_streak: u32,
    t: &Thresholds,
) -> Vec<Draft> {
    let acc = RaceAccounting::of(&sample.stat, sample.kernel_release.as_deref());
    let mut out = Vec::new();
    if let Some(d) = deltas {
        if d.has_races(acc) {
            out.push(insert_races(sample, d, acc, race_streak, t));
        }
    }
    out.extend(table_full(sample, deltas, acc, t));
    out.extend(
        sample
            .other_tables
            .iter()
            .filter_map(|o| other_table(sample, o, t)),
    );
    out
}

/// True when `conntrack.table_full` will be raised for the table the collector reads or
/// another namespace's: the collector then looks kube-proxy up for the advice.
pub fn table_needs_advice(sample: &Sample, deltas: Option<&Deltas>, t: &Thresholds) -> bool {
    let acc = RaceAccounting::of(&sample.stat, sample.kernel_release.as_deref());
    table_state(sample, deltas, acc, t).is_some() || !sample.other_tables.is_empty()
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

/// `conntrack.insert_races`: packets lost to insert races between samples.
fn insert_races(
    sample: &Sample,
    d: &Deltas,
    acc: RaceAccounting,
    streak: u32,
    t: &Thresholds,
) -> Draft {
    let stat = &sample.stat;
    let severity = if streak >= t.races_critical_samples {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let lost = d.lost_races(acc);
    let untracked = d.untracked_drops(acc);
    let addr = sample.nodelocal_dns_address;
    let mut f = Draft::new(INSERT_RACES, severity)
        .evidence("lost_races", lost)
        .evidence("lost_races_per_second", d.rate(lost))
        .evidence("race_accounting", acc.as_str())
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
        .evidence_opt(
            "untracked_drop_increase",
            (untracked > 0).then_some(untracked),
        )
        .var("nodelocal_dns_ip", addr.ip().to_string())
        .var("nodelocal_dns_port", u32::from(addr.port()))
        .when(local_dns(sample))
        // Other packets were dropped too, which were not races: the table's finding says why.
        .when_if("drops_not_races", untracked > 0);
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

/// Severity by the age of the last "table full" message.
fn log_severity(age: f64, t: &Thresholds) -> Severity {
    if age <= t.log_critical_seconds {
        Severity::Critical
    } else if age <= t.log_warning_seconds {
        Severity::Warning
    } else {
        Severity::Info
    }
}

/// Why the table this collector reads is judged as it is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TableState {
    severity: Severity,
    used: Option<f64>,
    /// Packets dropped since the previous sample that were not races.
    untracked: u64,
    /// Entries evicted to make room since the previous sample (the table hit its limit).
    evicted: u64,
    /// Age of the last "table full" message.
    last_log_age: Option<f64>,
    /// Nothing is wrong now; only the kernel log says it was full.
    recovered: bool,
    /// Drops that are not races, while neither the fill, evictions nor a recent message
    /// show a full table.
    drops_unexplained: bool,
}

fn table_state(
    sample: &Sample,
    deltas: Option<&Deltas>,
    acc: RaceAccounting,
    t: &Thresholds,
) -> Option<TableState> {
    let used = sample.used_percent();
    let full_now = used.is_some_and(|u| u >= t.table_critical_percent);
    let filling = used.is_some_and(|u| u >= t.table_warning_percent);
    let untracked = deltas.map_or(0, |d| d.untracked_drops(acc));
    let evicted = deltas.map_or(0, |d| d.early_drop);
    let last_log_age = sample.table_log.and_then(|l| l.last_seconds_ago);
    let log_now = last_log_age.is_some_and(|a| a <= t.log_critical_seconds);
    let mut severity: Option<Severity> = None;
    let mut raise = |s: Severity| severity = Some(severity.map_or(s, |cur| cur.max(s)));
    if full_now {
        raise(Severity::Critical);
    } else if filling {
        raise(Severity::Warning);
    }
    // Evicting entries means the count passed the limit in this interval.
    if evicted > 0 {
        raise(Severity::Critical);
    }
    let drops_unexplained = untracked > 0 && !full_now && evicted == 0 && !log_now;
    if untracked > 0 {
        raise(if drops_unexplained {
            Severity::Warning
        } else {
            Severity::Critical
        });
    }
    if let Some(age) = last_log_age {
        raise(log_severity(age, t));
    }
    let recovered = last_log_age.is_some() && !filling && untracked == 0 && evicted == 0;
    Some(TableState {
        severity: severity?,
        used,
        untracked,
        evicted,
        last_log_age,
        recovered,
        drops_unexplained,
    })
}

/// The kube-proxy evidence and conditions of a table-full finding (its advice on where the
/// limit lives).
fn with_kube_proxy(mut f: Draft, sample: &Sample, rec: u64) -> Draft {
    match &sample.kube_proxy {
        KubeProxy::NotFound => f.when("kube_proxy_absent"),
        KubeProxy::Unreadable {
            pid,
            config,
            reason,
        } => {
            f = f
                .evidence("kube_proxy_pid", *pid)
                .evidence("kube_proxy_settings_error", reason.as_str())
                .evidence_opt(
                    "kube_proxy_config",
                    (!config.is_empty()).then(|| config.clone()),
                );
            f.when("kube_proxy_settings_unknown")
        }
        KubeProxy::Found(s) => {
            f = f
                .evidence("kube_proxy_pid", s.pid)
                .evidence("kube_proxy_max_per_core", s.max_per_core)
                .evidence("kube_proxy_min", s.min);
            f = match &s.origin {
                Origin::Flags => f.when("kube_proxy_flags"),
                Origin::ConfigFile(path) => f
                    .evidence("kube_proxy_config", path.as_str())
                    .when("kube_proxy_config_file"),
            };
            match (s.max_per_core, sample.cpus) {
                (0, _) => f.when("kube_proxy_leaves_limit"),
                (_, Some(cpus)) => {
                    let target = s.target(cpus).unwrap_or(0);
                    f.evidence("cpus", cpus)
                        .evidence("kube_proxy_sets_max", target)
                        .when("kube_proxy_sets_limit")
                        .when_if("kube_proxy_target_enough", target >= rec)
                        .when_if("kube_proxy_capped", s.scaled(cpus) > kube_proxy::SCALED_CAP)
                }
                // CPUs unknown: kube-proxy sets the limit, to what cannot be computed.
                (_, None) => f.when("kube_proxy_sets_limit"),
            }
        }
    }
}

/// `conntrack.table_full` for the table the collector reads: its fill now, the packets it
/// dropped or the entries it evicted since the previous sample, and the age of the last
/// "table full" kernel message (decaying).
fn table_full(
    sample: &Sample,
    deltas: Option<&Deltas>,
    acc: RaceAccounting,
    t: &Thresholds,
) -> Option<Draft> {
    let st = table_state(sample, deltas, acc, t)?;
    let rec = recommended_max(sample.max.unwrap_or(0), sample.mem_total_bytes);
    let f = Draft::new(TABLE_FULL, st.severity)
        .evidence("entries", sample.stat.entries)
        .evidence("warning_percent", t.table_warning_percent)
        .evidence("critical_percent", t.table_critical_percent)
        .evidence("recommended_max", rec)
        .evidence(
            "recommended_max_memory_bytes",
            rec.saturating_mul(BYTES_PER_ENTRY),
        )
        .evidence_opt("entries_limit", sample.max)
        .evidence_opt("used_percent", sample.max.map(|_| st.used.unwrap_or(0.0)))
        .evidence_opt("buckets", sample.buckets)
        .evidence_opt("table_full_messages", sample.table_log.map(|l| l.messages))
        .evidence_opt("last_table_full_seconds_ago", st.last_log_age)
        .evidence_opt("mem_total_bytes", sample.mem_total_bytes)
        .evidence_opt("drop_total", sample.stat.get("drop"))
        .evidence_opt("early_drop_total", sample.stat.get("early_drop"))
        // `drop` counts every packet conntrack dropped; `untracked_drop_increase` the ones
        // that were not lost races (no entry could be created); `early_drop` counts entries
        // evicted to make room.
        .evidence_opt("drop_increase", deltas.map(|d| d.drop))
        .evidence_opt("untracked_drop_increase", deltas.map(|_| st.untracked))
        .evidence_opt("early_drop_increase", deltas.map(|_| st.evicted))
        .var("bytes_per_entry", BYTES_PER_ENTRY)
        .var("log_critical_seconds", t.log_critical_seconds)
        .var("log_warning_seconds", t.log_warning_seconds)
        .when_if("logged", sample.table_log.is_some_and(|l| l.messages > 0))
        .when_if("refusing_now", st.untracked > 0)
        .when_if("evicting_now", st.evicted > 0)
        .when_if("recovered", st.recovered)
        .when_if("drops_unexplained", st.drops_unexplained)
        .when_if(
            "seen_seconds_ago",
            st.last_log_age.is_some_and(|a| a < 120.0),
        )
        // The hash table grows with the limit (the kernel's default: one bucket per entry).
        .when_if(
            "hashsize_below_recommended",
            sample.buckets.is_some_and(|b| b < rec),
        );
    Some(with_kube_proxy(f, sample, rec))
}

/// `conntrack.table_full` for another namespace's table (subject `netns <inode>`): what the
/// kernel log said, and its fill now when a process in it was found. Without a process in it
/// the message's age alone decides: a warning up to `log_warning_seconds`, info after.
fn other_table(sample: &Sample, o: &OtherTable, t: &Thresholds) -> Option<Draft> {
    let age = o.log.last_seconds_ago?;
    let used = o.entries.and_then(|e| sample.percent_of_max(e));
    let mut severity = log_severity(age, t);
    if used.is_some_and(|u| u >= t.table_critical_percent) {
        severity = Severity::Critical;
    } else if used.is_some_and(|u| u >= t.table_warning_percent) {
        severity = severity.max(Severity::Warning);
    }
    // No process is left in the namespace (its pod deleted or its sandbox recreated): its
    // table cannot be read, and what the log said decides alone, capped at a warning. Packets
    // were dropped that recently and the pod's replacement may fill its new table the same
    // way, but nothing is left to act on in this namespace.
    if o.pid.is_none() {
        severity = log_severity(age, t).min(Severity::Warning);
    }
    let rec = recommended_max(sample.max.unwrap_or(0), sample.mem_total_bytes);
    let (subject, netns) = match o.netns {
        Some(n) => (format!("netns {n}"), n.to_string()),
        None => ("initial netns".to_string(), "initial".to_string()),
    };
    let f = Draft::new(TABLE_FULL, severity)
        .subject(subject)
        .evidence("netns", netns)
        .evidence("table_full_messages", o.log.messages)
        .evidence("last_table_full_seconds_ago", age)
        .evidence("recommended_max", rec)
        .evidence(
            "recommended_max_memory_bytes",
            rec.saturating_mul(BYTES_PER_ENTRY),
        )
        .evidence("warning_percent", t.table_warning_percent)
        .evidence("critical_percent", t.table_critical_percent)
        .evidence_opt("netns_pid", o.pid)
        .evidence_opt("entries", o.entries)
        .evidence_opt("entries_limit", sample.max)
        .evidence_opt("used_percent", used)
        .evidence_opt("mem_total_bytes", sample.mem_total_bytes)
        .var("bytes_per_entry", BYTES_PER_ENTRY)
        .var("log_critical_seconds", t.log_critical_seconds)
        .var("log_warning_seconds", t.log_warning_seconds)
        .when("other_netns")
        .when_if("logged", o.log.messages > 0)
        .when_if("netns_gone", o.pid.is_none())
        .when_if("seen_seconds_ago", age < 120.0)
        .when_if(
            "recovered",
            o.pid.is_some() && used.is_some_and(|u| u < t.table_warning_percent),
        );
    Some(with_kube_proxy(f, sample, rec))
}

/// Whether an unnamed "table full" message (no `in netns N`) is about the table the
/// collector reads: always before 6.17 (the kernel named no namespace) and when the release
/// is unknown; from 6.17 on only when the collector reads the initial namespace.
pub fn unnamed_message_is_ours(kernel_release: Option<&str>, reads_initial_netns: bool) -> bool {
    reads_initial_netns
        || !kernel_release
            .and_then(kernel_log::names_other_namespaces)
            .unwrap_or(false)
}

#[cfg(test)]
mod tests;
