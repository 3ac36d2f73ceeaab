//! `node-doctor fleet` (also `kubectl node-doctor fleet`): which nodes hold which problem,
//! since when, and is it the nodes at all. It reads every Node and node-doctor's recent
//! Events about Nodes from the API server (and, with `--prometheus`, every active finding),
//! groups each problem class's nodes by zone, node pool, instance type, kernel, OS image,
//! runtime and kubelet version, and says per class whether a shared dependency is the likely
//! cause or the nodes themselves (docs/fleet.md).
//!
//! - [`classes`]: which condition types and Event reasons are problems (`classes.toml`);
//! - [`read`]: the paginated, streamed lists, kept to the facts the report needs;
//! - [`group`]: nodes per class and what they share; [`verdict`]: shared or node-local;
//! - [`render`]: table, JSON, HTML; [`prom`]: the per-finding view from Prometheus.

pub mod classes;
pub mod group;
pub mod prom;
pub mod read;
pub mod render;
pub mod verdict;

#[cfg(test)]
mod tests;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::kube::client::KubeApi;
use classes::Classes;
use read::Fleet;
use verdict::Report;

/// What `fleet` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Html,
}

/// The command's settings (its flags).
#[derive(Debug, Clone)]
pub struct Settings {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub prometheus: Option<String>,
    /// Objects per list request.
    pub chunk_size: usize,
    /// node-doctor's Events this recent count.
    pub events_since: Duration,
    pub request_timeout: Duration,
}

/// Reads the cluster and judges it: the report and what it was built from. `Err` when the
/// nodes cannot be listed (nothing to report); what else fails makes the report incomplete.
pub async fn collect(s: &Settings) -> anyhow::Result<(Report, Fleet)> {
    let classes = Arc::new(Classes::builtin().map_err(anyhow::Error::msg)?);
    let api = KubeApi::for_person(
        s.kubeconfig.as_deref(),
        s.context.as_deref(),
        "fleet",
        s.request_timeout,
    )
    .await?;
    let chunk = s.chunk_size.max(1);
    let mut fleet = read::nodes(&api, Arc::clone(&classes), chunk)
        .await
        .map_err(|e| anyhow::anyhow!("listing the nodes at {}: {e}", api.server))?;
    let mut incomplete = Vec::new();
    let now = time::OffsetDateTime::now_utc();
    let since = now.unix_timestamp() - s.events_since.as_secs() as i64;
    match read::events(&api, Arc::clone(&classes), chunk, since).await {
        Ok((rows, n)) => {
            fleet.events = rows;
            fleet.requests.events = n;
        }
        Err(e) => incomplete.push(format!("node-doctor's Events were not read: {e}")),
    }
    let findings = match &s.prometheus {
        None => None,
        Some(url) => match prom::findings(url, s.request_timeout).await {
            Ok(f) => Some(f),
            Err(e) => {
                incomplete.push(format!("{e:#}"));
                None
            }
        },
    };
    let grouped = group::group(&fleet, classes.list.len());
    let rows = verdict::judge(&fleet, &classes, grouped);
    let report = Report {
        nodes: fleet.nodes.len(),
        rows,
        requests: fleet.requests,
        incomplete,
        findings,
        generated_at: crate::timefmt::rfc3339(now),
    };
    Ok((report, fleet))
}

/// The report in `format`.
pub fn render(report: &Report, fleet: &Fleet, format: Format, colour: bool) -> Vec<u8> {
    match format {
        Format::Table => render::table(report, fleet, colour).into_bytes(),
        Format::Json => render::json(report, fleet),
        Format::Html => render::html(report, fleet).into_bytes(),
    }
}

/// `node-doctor fleet`: prints the report, returns `check`'s exit code (3 when the nodes
/// could not be listed).
pub fn run(s: &Settings, format: Format) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("node-doctor fleet: {e:#}");
            return crate::exit::AGENT_FAILED;
        }
    };
    let (report, fleet) = match rt.block_on(collect(s)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("node-doctor fleet: {e:#}");
            return crate::exit::AGENT_FAILED;
        }
    };
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let out = render(&report, &fleet, format, colour);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&out).and_then(|_| stdout.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("node-doctor fleet: writing the report: {e}");
            return crate::exit::AGENT_FAILED;
        }
    }
    for why in &report.incomplete {
        tracing::warn!(reason = why.as_str(), "fleet report incomplete");
    }
    report.exit_code()
}
