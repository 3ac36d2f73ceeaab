//! What the deployment files ask of the agent: the metric names the PrometheusRule and the
//! Grafana dashboard query, and small helpers to compare them with what a running agent
//! exports (`/metrics`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// The files whose queries must only use metrics the agent exports. This list is the ONE
/// place naming them; add a file here when another dashboard or rule file is shipped.
pub const MONITORING_FILES: &[&str] = &[
    "manifests/overlays/prometheus-operator/prometheusrule.yaml",
    "manifests/grafana/node-doctor.json",
];

/// The metric names the agent documents (the lead's list for issue 8). A live scrape is the
/// authority; this list lets the deployment be checked without a running agent.
pub const DOCUMENTED_EXPORTS: &[&str] = &[
    "node_doctor_finding",
    "node_doctor_finding_info",
    "node_doctor_build_info",
    "node_doctor_collector_up",
    "node_doctor_collector_duration_seconds",
    "node_doctor_collector_duration_seconds_bucket",
    "node_doctor_collector_duration_seconds_sum",
    "node_doctor_collector_duration_seconds_count",
    "node_doctor_collector_cpu_seconds_total",
    "node_doctor_disk_size_bytes",
    "node_doctor_disk_avail_bytes",
    "node_doctor_disk_files",
    "node_doctor_disk_files_free",
    "node_doctor_load_load1",
    "node_doctor_load_cpus",
    "node_doctor_load_cpu_percent",
    "node_doctor_load_disk_busy_percent",
    "node_doctor_load_procs_blocked",
    "node_doctor_memory_highest_free_order",
    "node_doctor_memory_page_alloc_failures_total",
    "node_doctor_iptables_lock_hold_seconds",
    "node_doctor_iptables_lock_waiters",
    "node_doctor_conntrack_entries",
    "node_doctor_conntrack_entries_limit",
    "node_doctor_conntrack_stat_insert_failed_total",
];

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `node_doctor_*` metric name occurring in `text` (PromQL, YAML or JSON alike).
pub fn metric_names(text: &str) -> BTreeSet<String> {
    const PREFIX: &str = "node_doctor_";
    let bytes = text.as_bytes();
    let mut names = BTreeSet::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find(PREFIX) {
        let start = from + pos;
        // Not the tail of a longer identifier (e.g. `my_node_doctor_x`).
        let boundary = start == 0 || !is_name_byte(bytes[start - 1]);
        let mut end = start + PREFIX.len();
        while end < bytes.len() && is_name_byte(bytes[end]) {
            end += 1;
        }
        if boundary && end > start + PREFIX.len() {
            names.insert(text[start..end].to_string());
        }
        from = end;
    }
    names
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// The metric names used by [`MONITORING_FILES`], with the file each was found in.
pub fn metric_names_used() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for file in MONITORING_FILES {
        let path = repo_root().join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        out.extend(metric_names(&text).into_iter().map(|n| (n, *file)));
    }
    out
}

/// Metric names present in a Prometheus / OpenMetrics text exposition: the sample names,
/// and the family names of `# TYPE` lines (a counter family `x` exposes samples `x_total`).
pub fn exported_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(family) = rest.split_whitespace().next() {
                names.insert(family.to_string());
            }
        } else if !line.is_empty() && !line.starts_with('#') {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// A plain HTTP/1.0 GET (no client crate needed): (status, body).
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status in {head:?}")))?;
    Ok((status, body.to_string()))
}
