//! The Kubernetes reporter (`serve --kube-report`, on in the DaemonSet): findings reach the
//! cluster the way node-problem-detector's do — lasting problems as NodeConditions of
//! node-doctor's own types, problems that happen as Events about the Node — without its known
//! faults (conditions that never clear, stale conditions, a restart that resets them, events
//! `kubectl events --for node/…` cannot find, load on the API server at scale).
//!
//! It runs on its own thread with its own single-threaded runtime, reads the latest published
//! snapshot (an `Arc` clone) once a tick and never touches collection or the HTTP server: an
//! API server that is slow, down or refusing costs the reporter, nothing else.
//!
//! - [`classes`]: which finding becomes which condition or event (docs/kubernetes.md);
//! - [`planner`]: the decisions (when to write, what, take-over, aggregation, rate limits);
//! - [`client`]: the four requests over `kube::Client`;
//! - [`stats`]: `/metrics` families and the `/readyz` line.

pub mod classes;
pub mod client;
pub mod nma;
pub mod planner;

#[cfg(test)]
mod repair_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use crate::engine::Shared;
use crate::kube_stats::{self as stats, Stats};
use crate::state::Snapshot;
use client::{Api, ApiError, KubeApi};
use planner::{EventWrite, Jitter, Observed, Planner, Settings, View};

/// The exit code when the reporter refuses to run on this node: the usage error's (64, the
/// CLI's `EXIT_USAGE`; a test holds them equal), as for a refusal at start.
pub const EXIT_REFUSED: i32 = 64;
/// Longest wait after failures (without a `Retry-After`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The reporter's settings (`--kube-*` flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// The names written (`--kube-names`, `--kube-npd-names`).
    pub naming: classes::Naming,
    pub heartbeat: Duration,
    pub clear_after: Duration,
    pub min_write_interval: Duration,
    pub request_timeout: Duration,
    /// How often the reporter looks at the latest snapshot.
    pub tick: Duration,
    /// Where messages link for a rule (`--docs-url`, else this agent's page).
    pub links: crate::links::Links,
}

impl Config {
    pub fn settings(&self, node: &str) -> Settings {
        Settings {
            node: node.to_string(),
            naming: self.naming,
            heartbeat: self.heartbeat,
            clear_after: self.clear_after,
            min_write_interval: self.min_write_interval,
            links: self.links.clone(),
        }
    }
}

/// The planner's view of a snapshot: its findings and the collectors that did not read the
/// host on their latest run.
pub fn view(snap: &Snapshot) -> View<'_> {
    View {
        findings: snap
            .findings
            .iter()
            .map(|a| Observed {
                finding: &a.finding,
                last_seen: a.last_seen,
            })
            .collect(),
        down: snap
            .collectors
            .iter()
            .filter(|c| c.last_run.is_some() && !c.up())
            .map(|c| (c.name.as_str(), c.status.message().unwrap_or("")))
            .collect(),
        running: snap.collectors.iter().map(|c| c.name.as_str()).collect(),
    }
}

/// Exponential backoff with jitter; a `Retry-After` wins.
pub struct Backoff {
    failures: u32,
    until: Option<Instant>,
    jitter: Jitter,
}

impl Backoff {
    pub fn new(seed: &str) -> Backoff {
        Backoff {
            failures: 0,
            until: None,
            jitter: Jitter::new(seed, 0xb0ff),
        }
    }

    pub fn ready(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now >= u)
    }

    /// Records a failure; returns how long to wait.
    pub fn fail(&mut self, err: &ApiError, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let wait = match err {
            ApiError::Status {
                retry_after: Some(d),
                ..
            } => (*d).min(MAX_RETRY_AFTER),
            _ => {
                let exp = Duration::from_secs(1)
                    .saturating_mul(1u32 << self.failures.min(16).saturating_sub(1))
                    .min(MAX_BACKOFF);
                exp.mul_f64(0.5 + 0.5 * self.jitter.next())
            }
        };
        self.until = Some(now + wait);
        wait
    }

    pub fn ok(&mut self) {
        self.failures = 0;
        self.until = None;
    }
}

/// One reporter: the planner, the API, the backoff, the stats.
pub struct Reporter<A: Api> {
    pub planner: Planner,
    pub api: A,
    pub backoff: Backoff,
    pub stats: Arc<Stats>,
    took_over_logged: bool,
    /// Why the reporter must not run on this node (found at take-over), if it must not.
    pub refused: Option<String>,
}

fn unix(t: OffsetDateTime) -> i64 {
    t.unix_timestamp()
}

impl<A: Api> Reporter<A> {
    pub fn new(settings: Settings, api: A, stats: Arc<Stats>) -> Reporter<A> {
        let backoff = Backoff::new(&settings.node);
        Reporter {
            planner: Planner::new(settings),
            api,
            backoff,
            stats,
            took_over_logged: false,
            refused: None,
        }
    }

    fn failed(&mut self, what: &'static str, e: &ApiError, now: OffsetDateTime, mono: Instant) {
        self.stats.record(what, &e.label(), unix(now));
        let wait = self.backoff.fail(e, mono);
        self.stats.backoff_until.store(
            unix(now) + wait.as_secs() as i64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let msg = format!("{what}: {e}");
        if self.backoff.failures == 1 {
            tracing::warn!(request = what, error = %e, retry_in_seconds = wait.as_secs_f64(), "Kubernetes API request failed; backing off");
        }
        self.stats.set_state("backing off");
        self.stats.set_error(msg);
    }

    fn succeeded(&mut self, what: &'static str, now: OffsetDateTime) {
        self.stats.record(what, "200", unix(now));
        if self.backoff.failures > 0 {
            tracing::info!(request = what, "Kubernetes API reachable again");
        }
        self.backoff.ok();
        self.stats
            .backoff_until
            .store(0, std::sync::atomic::Ordering::Relaxed);
        self.stats.set_state("ok");
    }

    /// One tick: take over the node if not done, look at the latest findings, write what is
    /// due. `now` is the wall clock (timestamps), `mono` the monotonic one (backoff).
    pub async fn tick(&mut self, now: OffsetDateTime, mono: Instant, snap: Option<&Snapshot>) {
        if !self.backoff.ready(mono) {
            if let Some(s) = snap.filter(|s| s.ready) {
                self.planner.observe(now, &view(s));
            }
            return;
        }
        if !self.planner.took_over() {
            let node = self.planner.s.node.clone();
            match self.api.get_node(&node).await {
                Ok(n) => {
                    self.succeeded("get_node", now);
                    if let Err(why) = self.planner.take_over(&n, now) {
                        self.stats.set_state("refused");
                        self.stats.set_error(why.clone());
                        self.refused = Some(why);
                        return;
                    }
                    if !self.took_over_logged {
                        tracing::info!(
                            node = node.as_str(),
                            conditions = self.planner.desired().count(),
                            "Kubernetes reporter took over the node's conditions"
                        );
                        self.took_over_logged = true;
                    }
                }
                Err(e) => {
                    self.failed("get_node", &e, now, mono);
                    return;
                }
            }
        }
        if let Some(s) = snap.filter(|s| s.ready) {
            self.planner.observe(now, &view(s));
        }
        if let Some(body) = self.planner.status_patch(now) {
            let node = self.planner.s.node.clone();
            match self.api.patch_node_status(&node, &body).await {
                Ok(()) => {
                    self.succeeded("patch_status", now);
                    self.planner.status_written(now);
                }
                Err(e) => {
                    if e.code() == Some(404) {
                        // The node was deleted and may come back with a new uid.
                        self.planner = Planner::new(self.planner.s.clone());
                    }
                    self.failed("patch_status", &e, now, mono);
                    return;
                }
            }
        }
        while let Some(w) = self.planner.next_event(now) {
            let (what, result) = match &w {
                EventWrite::Create { body, .. } => {
                    ("create_event", self.api.create_event(body).await)
                }
                EventWrite::Patch { name, body, .. } => {
                    ("patch_event", self.api.patch_event(name, body).await)
                }
            };
            match result {
                Ok(name) => {
                    self.succeeded(what, now);
                    self.planner.event_written(&w, Ok(name));
                }
                Err(e) => {
                    let code = e.code().unwrap_or(0);
                    self.planner.event_written(&w, Err(code));
                    match code {
                        // Fixed by the planner (new object, new name) or dropped: no backoff.
                        404 | 409 | 400 | 422 => {
                            self.stats.record(what, &e.label(), unix(now));
                            if code == 400 || code == 422 {
                                tracing::warn!(error = %e, "the API server refused an event; dropped");
                            }
                        }
                        _ => {
                            self.failed(what, &e, now, mono);
                            break;
                        }
                    }
                }
            }
        }
        self.stats.events_pending.store(
            self.planner.events_pending() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.stats.events_dropped.store(
            self.planner.events_dropped,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// Starts the reporter on its own thread (`kube-reporter`). The cluster is found there; if
/// it cannot be, the reporter says so in its log, `/readyz` and `/metrics`, and tries again.
pub fn spawn(config: Config, node: String, shared: Arc<Shared>) -> std::io::Result<Arc<Stats>> {
    let stats = Arc::new(Stats::default());
    stats.set_state("starting");
    stats::install(Arc::clone(&stats));
    let st = Arc::clone(&stats);
    std::thread::Builder::new()
        .name("kube-reporter".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "Kubernetes reporter: cannot start its runtime");
                    st.set_state("stopped");
                    st.set_error(e.to_string());
                    return;
                }
            };
            rt.block_on(run(config, node, shared, st));
        })?;
    Ok(stats)
}

async fn run(config: Config, node: String, shared: Arc<Shared>, stats: Arc<Stats>) {
    let api = loop {
        match KubeApi::from_environment(&node, config.request_timeout).await {
            Ok(api) => {
                tracing::info!(
                    server = api.server.as_str(),
                    source = api.source.as_str(),
                    node = node.as_str(),
                    naming = config.naming.as_str(),
                    "Kubernetes reporter started"
                );
                break api;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                tracing::error!(
                    error = msg.as_str(),
                    "Kubernetes reporter cannot find the cluster; retrying in 5 minutes"
                );
                stats.set_state("no cluster configuration");
                stats.set_error(msg);
                tokio::time::sleep(MAX_BACKOFF).await;
            }
        }
    };
    stats.set_state("connecting");
    let mut reporter = Reporter::new(config.settings(&node), api, stats);
    loop {
        if let Some(why) = &reporter.refused {
            // Refusing to run is the operator's to fix; the exit makes it seen (the pod
            // restarts and shows it) rather than two writers quietly fighting over a type.
            tracing::error!(error = why.as_str(), "Kubernetes reporter refused to run");
            eprintln!("node-doctor: {why}");
            std::process::exit(EXIT_REFUSED);
        }
        let published = shared.latest();
        reporter
            .tick(
                OffsetDateTime::now_utc(),
                Instant::now(),
                Some(&published.snapshot),
            )
            .await;
        drop(published);
        tokio::time::sleep(config.tick).await;
    }
}
