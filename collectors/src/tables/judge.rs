//! The tables rules: a typed [`Sample`] (from [`sample`](super::sample)) -> drafts under the
//! [`Thresholds`] of [`thresholds`](super::thresholds). Their words are in
//! `collectors/rules/tables.toml`. Pure: testable without files.
//!
//! Every level rule has three bars: warning, critical, and a lower clear bar that a finding
//! the previous run raised must fall below before it is dropped (`Sample::raised_before`).

use crate::finding::Severity;
use crate::kmsg::decay::Phase;
use crate::rules::{Draft, Item};

use super::lines::Line;
use super::sample::{Family, NeighTable, Sample};
use super::thresholds::Thresholds;

pub const FILE_HANDLES: &str = "tables.file_handles";
pub const DAEMON_FILE_LIMIT: &str = "tables.daemon_file_limit";
pub const NEIGHBOUR_TABLE: &str = "tables.neighbour_table";
pub const TCP_MEMORY: &str = "tables.tcp_memory";
pub const TCP_ORPHANS: &str = "tables.tcp_orphans";
pub const KERNEL_TABLE_FULL: &str = "tables.kernel_table_full";

/// Holders named in a finding (the scan keeps more for the metrics' sake: none).
const HOLDERS_NAMED: usize = 5;

/// Applies every tables rule.
pub fn judge(s: &Sample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(file_handles(s, t));
    out.extend(daemon_file_limits(s, t));
    out.extend(s.neigh.iter().filter_map(|n| neighbour(s, n, t)));
    out.extend(tcp_memory(s, t));
    out.extend(tcp_orphans(s, t));
    out.extend(kernel_lines(s, t));
    out
}

/// The severity of a level: critical at `critical`, warning at `warning`, and warning down to
/// `clear` for a finding raised before.
pub fn level(percent: f64, warning: f64, critical: f64, clear: f64, was: bool) -> Option<Severity> {
    if percent >= critical {
        Some(Severity::Critical)
    } else if percent >= warning || (was && percent >= clear) {
        Some(Severity::Warning)
    } else {
        None
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The next power of two at or above `n` (saturating).
fn pow2_at_least(n: u64) -> u64 {
    n.checked_next_power_of_two().unwrap_or(u64::MAX)
}

/// `tables.file_handles`: the kernel's open-file table near `fs.file-max`.
fn file_handles(s: &Sample, t: &Thresholds) -> Option<Draft> {
    let f = s.files.as_ref()?;
    if f.max == 0 {
        return None;
    }
    let used = percent(f.allocated, f.max);
    let severity = level(
        used,
        t.files_warning_percent,
        t.files_critical_percent,
        t.files_clear_percent,
        s.was_raised(FILE_HANDLES, "file-max"),
    )?;
    let mut d = Draft::new(FILE_HANDLES, severity)
        .subject("file-max")
        .evidence("allocated_handles", f.allocated)
        .evidence("file_max", f.max)
        .evidence("used_percent", used)
        .evidence("threshold_percent", t.files_warning_percent)
        .evidence_opt("nr_open", f.nr_open)
        .var(
            "suggested_file_max",
            pow2_at_least(f.allocated.saturating_mul(2)).max(f.max.saturating_mul(2)),
        );
    let top: Vec<_> = s
        .holders
        .iter()
        .flat_map(|h| h.top.iter().take(HOLDERS_NAMED))
        .collect();
    if let Some(h) = &s.holders {
        d = d
            .evidence("scanned_processes", h.scanned)
            .when_if("scan_partial", h.partial);
    }
    if !top.is_empty() {
        let listed = top
            .iter()
            .map(|p| {
                let plus = if p.at_least { "+" } else { "" };
                format!("{} (pid {}) {}{plus}", p.comm, p.pid, p.fds)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let held: u64 = top.iter().map(|p| p.fds).sum();
        d = d
            .evidence("top_holders", listed)
            .evidence("top_holders_fds", held);
    }
    // One command per holder named (none when the scan did not run).
    d = d.items(
        "holders",
        top.iter()
            .map(|p| Item::new().value("pid", p.pid))
            .collect(),
    );
    Some(d)
}

/// `tables.daemon_file_limit`: a container runtime or the kubelet near its own
/// `RLIMIT_NOFILE`.
fn daemon_file_limits(s: &Sample, t: &Thresholds) -> Vec<Draft> {
    let nr_open = s.files.as_ref().and_then(|f| f.nr_open);
    let mut out = Vec::new();
    for d in &s.daemons {
        let (Some(open), Some(soft)) = (d.open, d.soft_limit) else {
            continue;
        };
        if soft == 0 {
            continue;
        }
        let used = percent(open, soft);
        let Some(severity) = level(
            used,
            t.daemon_warning_percent,
            t.daemon_critical_percent,
            t.daemon_clear_percent,
            s.was_raised(DAEMON_FILE_LIMIT, &d.name),
        ) else {
            continue;
        };
        let ceiling = nr_open.unwrap_or(1 << 20);
        let suggested = soft.saturating_mul(4).max(1 << 20).min(ceiling).max(soft);
        out.push(
            Draft::new(DAEMON_FILE_LIMIT, severity)
                .subject(d.name.clone())
                .evidence("daemon", d.name.as_str())
                .evidence("pid", d.pid)
                .evidence("open_fds", open)
                .evidence("soft_limit", soft)
                .evidence_opt("hard_limit", d.hard_limit)
                .evidence("used_percent", used)
                .evidence("threshold_percent", t.daemon_warning_percent)
                .evidence_opt("nr_open", nr_open)
                .var("unit", unit_of(&d.name))
                .var("suggested_limit", suggested)
                .when_if("at_ceiling", suggested <= soft)
                .when_if("kubelet", d.name == "kubelet"),
        );
    }
    out
}

/// The systemd unit a daemon usually runs as.
fn unit_of(name: &str) -> &'static str {
    match name {
        "dockerd" => "docker",
        "cri-dockerd" => "cri-docker",
        "kubelet" => "kubelet",
        _ => "containerd",
    }
}

/// Whether a neighbour table refuses entries now: at `gc_thresh3`, or `table_fulls` rose.
fn neighbour_full_now(n: &NeighTable) -> Option<bool> {
    let rose = n.table_fulls_increase.map(|i| i > 0);
    let at = n.gc_thresh.map(|g| g[2] > 0 && n.entries >= g[2]);
    match (rose, at) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (None, None) => None,
        _ => Some(false),
    }
}

/// `tables.neighbour_table`: a neighbour table near `gc_thresh3`, or refusing entries.
fn neighbour(s: &Sample, n: &NeighTable, t: &Thresholds) -> Option<Draft> {
    let g = n.gc_thresh?;
    if g[2] == 0 {
        return None;
    }
    let used = percent(n.entries, g[2]);
    let refusing = n.table_fulls_increase.is_some_and(|i| i > 0);
    let by_level = level(
        used,
        t.neigh_warning_percent,
        t.neigh_critical_percent,
        t.neigh_clear_percent,
        s.was_raised(NEIGHBOUR_TABLE, n.family.as_str()),
    );
    let severity = if refusing {
        Severity::Critical
    } else {
        by_level?
    };
    let t3 = pow2_at_least(n.entries.saturating_mul(2)).max(g[2].saturating_mul(2));
    let t2 = (t3 / 2).max(g[1]);
    let t1 = (t3 / 8).max(g[0]);
    Some(
        Draft::new(NEIGHBOUR_TABLE, severity)
            .subject(n.family.as_str())
            .evidence("family", n.family.as_str())
            .evidence("table", n.family.table())
            .evidence("entries", n.entries)
            .evidence("gc_thresh1", g[0])
            .evidence("gc_thresh2", g[1])
            .evidence("gc_thresh3", g[2])
            .evidence("used_percent", used)
            .evidence("threshold_percent", t.neigh_warning_percent)
            .evidence_opt("table_fulls_increase", n.table_fulls_increase)
            .evidence_opt("forced_gc_increase", n.forced_gc_increase)
            .evidence_opt("interval_seconds", n.interval_seconds)
            .var("suggested_thresh1", t1)
            .var("suggested_thresh2", t2)
            .var("suggested_thresh3", t3)
            .when_if("refusing", refusing)
            .when_if("above_thresh2", n.entries > g[1])
            .when_if("ipv6", n.family == Family::Ipv6),
    )
}

/// `tables.tcp_memory`: TCP sockets' memory at `tcp_mem`'s pressure value or above its
/// maximum.
fn tcp_memory(s: &Sample, t: &Thresholds) -> Option<Draft> {
    let tcp = s.tcp.as_ref()?;
    let (mem, [min, pressure, max]) = (tcp.mem_pages?, tcp.tcp_mem?);
    if pressure == 0 || max == 0 {
        return None;
    }
    let of_pressure = percent(mem, pressure);
    let above_max = mem > max;
    let severity = if above_max {
        Severity::Critical
    } else {
        level(
            of_pressure,
            t.tcp_mem_warning_percent_of_pressure,
            f64::INFINITY,
            t.tcp_mem_clear_percent_of_pressure,
            s.was_raised(TCP_MEMORY, "tcp_mem"),
        )?
    };
    let page = s.page_size_bytes.max(1);
    let new_pressure = pressure.saturating_mul(2);
    let new_max = max.saturating_mul(2);
    Some(
        Draft::new(TCP_MEMORY, severity)
            .subject("tcp_mem")
            .evidence("mem_pages", mem)
            .evidence("mem_bytes", mem.saturating_mul(page))
            .evidence("tcp_mem_min", min)
            .evidence("tcp_mem_pressure", pressure)
            .evidence("tcp_mem_max", max)
            .evidence("percent_of_max", percent(mem, max))
            .evidence_opt("sockets_inuse", tcp.inuse)
            .evidence_opt("orphans", tcp.orphans)
            .evidence_opt("time_wait", tcp.time_wait)
            .var("max_bytes", max.saturating_mul(page))
            .var("suggested_min", min)
            .var("suggested_pressure", new_pressure)
            .var("suggested_max", new_max)
            .var("suggested_max_bytes", new_max.saturating_mul(page))
            .when_if("above_max", above_max),
    )
}

/// `tables.tcp_orphans`: orphaned sockets against `tcp_max_orphans`.
fn tcp_orphans(s: &Sample, t: &Thresholds) -> Option<Draft> {
    let tcp = s.tcp.as_ref()?;
    let (orphans, max) = (tcp.orphans?, tcp.max_orphans?);
    if max == 0 {
        return None;
    }
    let used = percent(orphans, max);
    let severity = level(
        used,
        t.orphans_warning_percent,
        t.orphans_critical_percent,
        t.orphans_clear_percent,
        s.was_raised(TCP_ORPHANS, "tcp_max_orphans"),
    )?;
    Some(
        Draft::new(TCP_ORPHANS, severity)
            .subject("tcp_max_orphans")
            .evidence("orphans", orphans)
            .evidence("max_orphans", max)
            .evidence("used_percent", used)
            .evidence("threshold_percent", t.orphans_warning_percent)
            .evidence_opt("time_wait", tcp.time_wait)
            .evidence_opt("sockets_inuse", tcp.inuse)
            .var(
                "suggested_max_orphans",
                pow2_at_least(max.saturating_mul(2)),
            )
            .when_if("all_reset", orphans > max),
    )
}

/// Whether what a kernel line reported holds now, from the live figures.
fn still_true(s: &Sample, line: Line) -> Option<bool> {
    let any = |it: &mut dyn Iterator<Item = Option<bool>>| {
        let v: Vec<Option<bool>> = it.collect();
        if v.contains(&Some(true)) {
            Some(true)
        } else if v.iter().all(Option::is_none) {
            None
        } else {
            Some(false)
        }
    };
    match line {
        Line::ArpOverflow | Line::NdiscOverflow => any(&mut s
            .neigh
            .iter()
            .filter(|n| n.family.line() == line)
            .map(neighbour_full_now)),
        Line::NeighbourOverflow => any(&mut s.neigh.iter().map(neighbour_full_now)),
        Line::TcpOutOfMemory => {
            let tcp = s.tcp.as_ref()?;
            Some(tcp.mem_pages? > tcp.tcp_mem?[2])
        }
        Line::TcpTooManyOrphans => {
            let tcp = s.tcp.as_ref()?;
            // The kernel resets the most penalised orphans from a quarter of the limit on.
            Some(tcp.orphans?.saturating_mul(4) > tcp.max_orphans?)
        }
    }
}

/// `tables.kernel_table_full`: the kernel logged that one of these tables ran out.
fn kernel_lines(s: &Sample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for log in s.lines.iter().filter(|l| l.count > 0) {
        let phase = Phase::of(
            still_true(s, log.line),
            log.last_seconds_ago,
            t.recent_seconds,
        );
        let severity = match phase {
            Phase::Ongoing => Severity::Critical,
            Phase::Recent => Severity::Warning,
            Phase::Past => Severity::Info,
        };
        let kind = match log.line {
            Line::ArpOverflow | Line::NdiscOverflow | Line::NeighbourOverflow => {
                "neighbour_overflow"
            }
            Line::TcpOutOfMemory => "tcp_out_of_memory",
            Line::TcpTooManyOrphans => "tcp_too_many_orphans",
        };
        out.push(
            Draft::new(KERNEL_TABLE_FULL, severity)
                .subject(log.line.as_str())
                .evidence("table", log.line.as_str())
                .evidence("messages", log.count)
                .evidence("lookback_seconds", s.lookback_seconds)
                .evidence("phase", phase.as_str())
                .evidence_opt("last_seen_seconds_ago", log.last_seconds_ago)
                .var("recent_seconds", t.recent_seconds)
                .when(kind)
                .when(phase.as_str()),
        );
    }
    out
}

#[cfg(test)]
mod tests;
