//! The reporter's own state, for `/metrics` and `/readyz`: counters the driver updates and
//! the encoder and the probe read (no lock on the request path but one short mutex for the
//! last error's text).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Default)]
pub struct Stats {
    /// (request, code) -> count; request is get_node, patch_status, create_event,
    /// patch_event; code the HTTP status or transport/timeout.
    requests: Mutex<BTreeMap<(&'static str, String), u64>>,
    /// Unix seconds of the last successful request (0: none yet).
    pub last_success: AtomicI64,
    pub events_pending: AtomicU64,
    pub events_dropped: AtomicU64,
    /// Unix seconds until which the reporter backs off (0: not backing off).
    pub backoff_until: AtomicI64,
    /// What the reporter is doing, and its last error.
    state: Mutex<(String, String)>,
}

impl Stats {
    pub fn record(&self, request: &'static str, code: &str, now_unix: i64) {
        let mut m = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((request, code.to_string())).or_insert(0) += 1;
        if code.starts_with('2') {
            self.last_success.store(now_unix, Ordering::Relaxed);
        }
    }

    pub fn set_state(&self, state: impl Into<String>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 = state.into();
    }

    pub fn set_error(&self, err: impl Into<String>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = err.into();
    }

    /// Successful writes (status patches and event creates/patches).
    pub fn writes(&self) -> u64 {
        self.count(|r, c| r != "get_node" && c.starts_with('2'))
    }

    /// Failed requests.
    pub fn errors(&self) -> u64 {
        self.count(|_, c| !c.starts_with('2'))
    }

    fn count(&self, f: impl Fn(&str, &str) -> bool) -> u64 {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((r, c), _)| f(r, c))
            .map(|(_, n)| n)
            .sum()
    }

    /// One line for `/readyz`.
    pub fn summary(&self, now_unix: i64) -> String {
        let (state, err) = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let last = self.last_success.load(Ordering::Relaxed);
        let last = if last == 0 {
            "never".to_string()
        } else {
            format!("{}s ago", (now_unix - last).max(0))
        };
        let mut s = format!(
            "kubernetes reporter: {state}; last success {last}; writes {}; errors {}; events pending {}",
            self.writes(),
            self.errors(),
            self.events_pending.load(Ordering::Relaxed)
        );
        let until = self.backoff_until.load(Ordering::Relaxed);
        if until > now_unix {
            s.push_str(&format!("; backing off for {}s", until - now_unix));
        }
        if !err.is_empty() {
            s.push_str("; last error: ");
            s.push_str(&collectors::sanitize::visible(&err));
        }
        s
    }

    /// Registers the reporter's families.
    pub fn register(&self, reg: &mut Registry) {
        type Labels = Vec<(String, String)>;
        let requests = Family::<Labels, Counter<u64, AtomicU64>>::default();
        for ((r, c), n) in self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            requests
                .get_or_create(&vec![
                    ("request".to_string(), r.to_string()),
                    ("code".to_string(), c.clone()),
                ])
                .inc_by(*n);
        }
        reg.register(
            "node_doctor_kube_requests",
            "Requests of the Kubernetes reporter to the API server, by request and answer (HTTP status, transport or timeout)",
            requests,
        );
        let last = Gauge::<i64, AtomicI64>::default();
        last.set(self.last_success.load(Ordering::Relaxed));
        reg.register(
            "node_doctor_kube_last_success_timestamp_seconds",
            "Unix time of the reporter's last successful request to the API server (0: none yet)",
            last,
        );
        let pending = Gauge::<i64, AtomicI64>::default();
        pending.set(i64::try_from(self.events_pending.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
        reg.register(
            "node_doctor_kube_events_pending",
            "Events waiting for the per-node rate limit or a retry",
            pending,
        );
        let dropped = Counter::<u64, AtomicU64>::default();
        dropped.inc_by(self.events_dropped.load(Ordering::Relaxed));
        reg.register(
            "node_doctor_kube_events_dropped",
            "Occurrences the reporter gave up sending (the API server refused the event, or the aggregation cache was full)",
            dropped,
        );
    }
}

static INSTALLED: OnceLock<Arc<Stats>> = OnceLock::new();

/// Makes the running reporter's stats visible to `/metrics` and `/readyz`.
pub fn install(stats: Arc<Stats>) {
    let _ = INSTALLED.set(stats);
}

/// Called by the metrics encoder: the reporter's families when it runs.
pub fn register_metrics(reg: &mut Registry) {
    if let Some(s) = INSTALLED.get() {
        s.register(reg);
    }
}

/// Called by `/readyz`: the reporter's line when it runs.
pub fn readyz_detail() -> Option<String> {
    INSTALLED
        .get()
        .map(|s| s.summary(time::OffsetDateTime::now_utc().unix_timestamp()))
}
