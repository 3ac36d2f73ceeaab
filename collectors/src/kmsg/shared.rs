//! One read of the kernel log for every collector of a host.
//!
//! Three collectors (memory, conntrack, kernel) follow the kernel log. Each owning an open of
//! `/dev/kmsg` made the kernel format, and node-doctor parse, the whole ring buffer (the
//! records within the lookback: a few thousand on a busy node, one `read()` each) three times
//! at start, and every new record three times after: a third of a healthy `check`'s CPU
//! (issue 19). Now the [`KmsgReader`]s of one host ([`crate::HostPaths`] and its clones) that
//! are made before any of them reads share a [`Hub`]: one [`RawReader`] and the records it
//! read that not every reader has taken yet. Each reader keeps its own position, so what each
//! collector sees, call by call, is what its own open of the device would have shown:
//!
//! - a call first pulls what is new from the device (one `read()` returning `EAGAIN` when
//!   nothing is), then hands the caller the records past its position, at most
//!   [`KmsgConfig::max_records_per_cycle`];
//! - the hub keeps at most four times that many records for readers that fall behind; a
//!   reader whose records were let go counts them as dropped, like records the kernel
//!   overwrote;
//! - a reader made after the hub's first read (a collector built later, a test) gets a hub of
//!   its own, which reads the log from its lookback as before.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::device::RawReader;
use super::record::{KmsgBatch, KmsgConfig, KmsgMode, Record};
use crate::collector::Status;
use crate::host::HostPaths;
use crate::metric::Metric;
use crate::proc::uptime::BootClock;

/// Records kept for readers that fall behind, in multiples of the per-call bound.
const KEEP_CALLS: usize = 4;

/// The device reader and the records some reader has not taken yet.
pub(crate) struct Hub {
    raw: RawReader,
    max_records: usize,
    /// Ordinal of the first record in `records`.
    first: u64,
    records: VecDeque<Arc<Record>>,
    /// Per reader: the ordinal of the next record it takes.
    positions: HashMap<u64, u64>,
    /// The device has been read: readers made from now on get a hub of their own.
    pulled: bool,
    /// Records the device reader lost since the start.
    dropped: u64,
}

impl Hub {
    fn next_ordinal(&self) -> u64 {
        self.first + self.records.len() as u64
    }

    /// Reads what is new from the device into the queue; the call's flags and status.
    fn pull(&mut self) -> (Status, bool, u64, u64) {
        self.pulled = true;
        let batch = self.raw.read_new();
        self.dropped += batch.dropped;
        self.records.extend(batch.records);
        (
            batch.status,
            batch.truncated_by_budget,
            batch.skipped_old,
            batch.malformed,
        )
    }

    /// Lets go of records every reader has taken, and of the oldest beyond the bound (the
    /// readers that had not taken those move past them; they count them as dropped).
    fn trim(&mut self) {
        let keep = self.max_records.saturating_mul(KEEP_CALLS).max(1);
        let end = self.next_ordinal();
        let floor = end.saturating_sub(keep as u64);
        let slowest = self.positions.values().copied().min().unwrap_or(end);
        let new_first = slowest.max(floor).max(self.first).min(end);
        while self.first < new_first {
            self.records.pop_front();
            self.first += 1;
        }
    }
}

/// The hubs of one host, by reader configuration (what [`crate::node::Node`] holds).
#[derive(Default)]
pub struct Hubs {
    hubs: Mutex<Vec<(KmsgConfig, Weak<Mutex<Hub>>)>>,
}

impl std::fmt::Debug for Hubs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hubs").finish_non_exhaustive()
    }
}

impl Hubs {
    /// A hub for `config` that has not read yet, or a new one.
    fn hub(&self, host: &HostPaths, config: &KmsgConfig) -> Arc<Mutex<Hub>> {
        let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|(_, w)| w.strong_count() > 0);
        for (c, w) in hubs.iter() {
            if c != config {
                continue;
            }
            if let Some(hub) = w.upgrade() {
                if !lock(&hub).pulled {
                    return hub;
                }
            }
        }
        let hub = Arc::new(Mutex::new(Hub {
            raw: RawReader::new(host, config.clone()),
            max_records: config.max_records_per_cycle,
            first: 0,
            records: VecDeque::new(),
            positions: HashMap::new(),
            pulled: false,
            dropped: 0,
        }));
        hubs.push((config.clone(), Arc::downgrade(&hub)));
        hub
    }
}

fn lock(hub: &Mutex<Hub>) -> MutexGuard<'_, Hub> {
    // A panic while holding it leaves whole records and positions: keep using it.
    hub.lock().unwrap_or_else(|e| e.into_inner())
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A collector's reader of `<root>/dev/kmsg`: each record once, bounded per call (see the
/// module documentation for what readers of one host share).
pub struct KmsgReader {
    hub: Arc<Mutex<Hub>>,
    id: u64,
    max_records: usize,
    path: std::path::PathBuf,
    clock: Option<BootClock>,
    mode: KmsgMode,
    /// The hub's dropped count at this reader's last call.
    dropped_seen: u64,
    records_total: u64,
    dropped_total: u64,
}

impl std::fmt::Debug for KmsgReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsgReader")
            .field("path", &self.path)
            .field("records_total", &self.records_total)
            .finish_non_exhaustive()
    }
}

impl KmsgReader {
    /// A reader of `<root>/dev/kmsg` sharing the device with the other readers of `hubs` made
    /// before their first read ([`crate::node::Node::kmsg_reader`]). Nothing is opened until
    /// the first [`Self::read_new`].
    pub(crate) fn new(host: &HostPaths, hubs: &Hubs, config: KmsgConfig) -> KmsgReader {
        let hub = hubs.hub(host, &config);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let path = {
            let mut h = lock(&hub);
            let start = h.next_ordinal();
            h.positions.insert(id, start);
            h.raw.path().to_path_buf()
        };
        KmsgReader {
            hub,
            id,
            max_records: config.max_records_per_cycle,
            path,
            clock: None,
            mode: KmsgMode::Kmsg,
            dropped_seen: 0,
            records_total: 0,
            dropped_total: 0,
        }
    }

    /// A reader of `<root>/dev/kmsg` of its own, sharing nothing (a bench, a one-off read).
    pub fn alone(host: &HostPaths, config: KmsgConfig) -> KmsgReader {
        KmsgReader::new(host, &Hubs::default(), config)
    }

    /// The agent-side path read.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Records returned since construction.
    pub fn records_total(&self) -> u64 {
        self.records_total
    }

    /// Records lost (overwritten before being read) since construction.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }

    /// How the kernel log is read: [`KmsgMode::Syslog`] once `/dev/kmsg` refused `open()` and
    /// `syslog(2)` worked instead, else [`KmsgMode::Kmsg`] (also before the first call).
    pub fn mode(&self) -> KmsgMode {
        self.mode
    }

    /// The boot clock taken at the last call, to date records or compute their age.
    pub fn clock(&self) -> Option<BootClock> {
        self.clock
    }

    /// Reads the records that arrived since the last call (at the first call: those within the
    /// lookback window), within the per-call bounds.
    pub fn read_new(&mut self) -> KmsgBatch {
        let mut hub = lock(&self.hub);
        let (status, truncated, skipped_old, malformed) = hub.pull();
        self.clock = hub.raw.clock();
        self.mode = hub.raw.mode();
        let mut dropped = hub.dropped.saturating_sub(self.dropped_seen);
        self.dropped_seen = hub.dropped;
        let first = hub.first;
        let end = hub.next_ordinal();
        let mut pos = hub.positions.get(&self.id).copied().unwrap_or(end);
        if pos < first {
            // Let go of by the hub while this reader lagged.
            dropped += first - pos;
            pos = first;
        }
        let take = ((end - pos) as usize).min(self.max_records);
        let from = (pos - first) as usize;
        let records: Vec<Arc<Record>> = hub.records.range(from..from + take).cloned().collect();
        let pos = pos + take as u64;
        hub.positions.insert(self.id, pos);
        hub.trim();
        drop(hub);
        self.records_total += records.len() as u64;
        self.dropped_total += dropped;
        KmsgBatch {
            truncated_by_budget: truncated || pos < end,
            records,
            dropped,
            skipped_old,
            malformed,
            status,
        }
    }

    /// `node_doctor_kmsg_records_total{collector}` and `node_doctor_kmsg_dropped_total{collector}`.
    pub fn metrics(&self, collector: &str) -> Vec<Metric> {
        vec![
            Metric::counter(
                "node_doctor_kmsg_records_total",
                "Kernel log records read by a collector's /dev/kmsg reader.",
                self.records_total as f64,
            )
            .label("collector", collector),
            Metric::counter(
                "node_doctor_kmsg_dropped_total",
                "Kernel log records overwritten before a collector's reader could read them.",
                self.dropped_total as f64,
            )
            .label("collector", collector),
            Metric::gauge(
                "node_doctor_kmsg_syslog_fallback",
                "1 when a collector reads the kernel log with syslog(2) because /dev/kmsg refused open(), else 0.",
                if self.mode() == KmsgMode::Syslog { 1.0 } else { 0.0 },
            )
            .label("collector", collector),
        ]
    }
}

impl Drop for KmsgReader {
    fn drop(&mut self) {
        let mut hub = lock(&self.hub);
        hub.positions.remove(&self.id);
        hub.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose kernel log holds `lines`.
    fn host_with(lines: &[String]) -> (tempfile::TempDir, crate::node::Node) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("dev")).unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/uptime"), "100.00 1.00\n").unwrap();
        std::fs::write(t.path().join("dev/kmsg"), lines.concat()).unwrap();
        let node = crate::node::Node::new(HostPaths::new(t.path()));
        (t, node)
    }

    fn line(seq: u64, msg: &str) -> String {
        format!("6,{seq},{},-;{msg}\n", 90_000_000 + seq)
    }

    fn append(t: &tempfile::TempDir, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(t.path().join("dev/kmsg"))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn messages(b: &KmsgBatch) -> Vec<&str> {
        b.records.iter().map(|r| r.message.as_str()).collect()
    }

    /// Three readers of one host share one device reader; each sees every record once, in
    /// order, whatever the order of their calls.
    #[test]
    fn readers_of_one_host_each_see_every_record_once() {
        let lines: Vec<String> = (1..=3).map(|i| line(i, &format!("m{i}"))).collect();
        let (t, node) = host_with(&lines);
        let mut a = node.kmsg_reader(KmsgConfig::default());
        let mut b = node.kmsg_reader(KmsgConfig::default());
        let mut c = node.kmsg_reader(KmsgConfig::default());
        assert!(Arc::ptr_eq(&a.hub, &b.hub) && Arc::ptr_eq(&b.hub, &c.hub));
        assert_eq!(messages(&a.read_new()), ["m1", "m2", "m3"]);
        append(&t, &line(4, "m4"));
        assert_eq!(messages(&b.read_new()), ["m1", "m2", "m3", "m4"]);
        assert_eq!(messages(&a.read_new()), ["m4"]);
        assert!(a.read_new().records.is_empty());
        assert_eq!(messages(&c.read_new()), ["m1", "m2", "m3", "m4"]);
        // Everything taken by everyone: nothing kept.
        assert!(lock(&a.hub).records.is_empty());
        assert_eq!(a.records_total(), 4);
        // A reader made after the first read has a hub of its own, from its lookback.
        let mut late = node.kmsg_reader(KmsgConfig::default());
        assert!(!Arc::ptr_eq(&late.hub, &a.hub));
        assert_eq!(messages(&late.read_new()), ["m1", "m2", "m3", "m4"]);
        // A dropped reader holds nothing back.
        drop(c);
        append(&t, &line(5, "m5"));
        assert_eq!(messages(&a.read_new()), ["m5"]);
        assert_eq!(messages(&b.read_new()), ["m5"]);
        assert!(lock(&a.hub).records.is_empty());
    }

    /// Readers of one hub are handed the same records, not copies of their text.
    #[test]
    fn readers_share_records_not_copies() {
        let (_t, node) = host_with(&[line(1, "m1"), line(2, "m2")]);
        let mut a = node.kmsg_reader(KmsgConfig::default());
        let mut b = node.kmsg_reader(KmsgConfig::default());
        let (ra, rb) = (a.read_new().records, b.read_new().records);
        assert_eq!(ra.len(), 2);
        assert!(ra.iter().zip(&rb).all(|(x, y)| Arc::ptr_eq(x, y)));
    }

    /// A reader that falls more than four calls' worth behind loses the oldest records and
    /// counts them as dropped; the per-call bound holds for each reader.
    #[test]
    fn a_reader_far_behind_counts_what_was_let_go() {
        let lines: Vec<String> = (1..=10).map(|i| line(i, &format!("m{i}"))).collect();
        let (_t, node) = host_with(&lines);
        let cfg = KmsgConfig {
            max_records_per_cycle: 2,
            ..KmsgConfig::default()
        };
        let mut fast = node.kmsg_reader(cfg.clone());
        let mut slow = node.kmsg_reader(cfg);
        for _ in 0..5 {
            assert_eq!(fast.read_new().records.len(), 2);
        }
        // 10 read, at most 8 kept for the slow one: m1 and m2 are gone.
        let b = slow.read_new();
        assert_eq!(b.dropped, 2);
        assert_eq!(messages(&b), ["m3", "m4"]);
        assert!(b.truncated_by_budget);
        assert_eq!(slow.dropped_total(), 2);
    }

    /// Readers with another configuration (lookback, bounds) do not share.
    #[test]
    fn other_configurations_read_on_their_own() {
        let (_t, node) = host_with(&[line(1, "m1")]);
        let a = node.kmsg_reader(KmsgConfig::default());
        let b = node.kmsg_reader(KmsgConfig {
            max_records_per_cycle: 7,
            ..KmsgConfig::default()
        });
        assert!(!Arc::ptr_eq(&a.hub, &b.hub));
    }
}
