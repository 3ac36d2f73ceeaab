//! Wires the registry, runners, state and published snapshot together for `serve` and `check`.

use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use collectors::registry::{self, Options};
use collectors::{CollectContext, Node};
use hyper::body::Bytes;
use time::OffsetDateTime;

use crate::api;
use crate::history::History;
use crate::links::Links;
use crate::metrics;
use crate::scheduler::{Factory, RunReport, Runner};
use crate::state::{Snapshot, State};
use crate::view::{Filter, View};

/// The longest default timeout of one run.
pub const MAX_DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the collectors are chosen and scheduled.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Only these collectors (empty: all).
    pub only: Vec<String>,
    pub interval: Duration,
    pub intervals: Vec<(String, Duration)>,
    /// Overrides the default timeout (the smaller of the interval and 10 s).
    pub timeout: Option<Duration>,
}

/// Builds one runner per selected collector of the registry. An unknown name is a usage
/// error.
pub fn runners(node: &Node, opts: &Options, plan: &Plan) -> Result<Vec<Runner>, String> {
    let entries = registry::COLLECTORS
        .iter()
        .map(|e| {
            let (node, opts, build) = (node.clone(), opts.clone(), e.build);
            let factory: Factory = Arc::new(move || Some(build(&node, &opts)));
            (e.name, factory)
        })
        .collect();
    build(entries, plan)
}

/// Builds the runners of the selected collectors: each is built by its factory (called again
/// to re-create it after it panicked; only the selected ones are built). A collector's
/// [`collectors::Collector::min_timeout`] puts a floor under its default timeout.
pub fn build(entries: Vec<(&'static str, Factory)>, plan: &Plan) -> Result<Vec<Runner>, String> {
    let known: Vec<&'static str> = entries.iter().map(|(n, _)| *n).collect();
    let unknown = |n: &str| {
        format!(
            "unknown collector {n:?}; known collectors: {}",
            if known.is_empty() {
                "(none in this build)".to_string()
            } else {
                known.join(", ")
            }
        )
    };
    for n in plan
        .only
        .iter()
        .chain(plan.intervals.iter().map(|(n, _)| n))
    {
        if !known.contains(&n.as_str()) {
            return Err(unknown(n));
        }
    }
    let mut out = Vec::new();
    for (name, factory) in entries {
        if !plan.only.is_empty() && !plan.only.iter().any(|n| n == name) {
            continue;
        }
        let Some(c) = factory() else {
            return Err(format!("collector {name:?} could not be built"));
        };
        let interval = plan
            .intervals
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
            .unwrap_or(plan.interval);
        let timeout = plan.timeout.unwrap_or_else(|| {
            let t = interval.min(MAX_DEFAULT_TIMEOUT);
            c.min_timeout().map_or(t, |m| t.max(m))
        });
        out.push(Runner::new(c, factory, interval, timeout));
    }
    Ok(out)
}

/// A snapshot with its renderings, each rendered the first time a request asks for it and
/// then shared by every request of that snapshot.
///
/// Every collector run publishes a snapshot (15 a cycle at the defaults) while Prometheus
/// scrapes once a cycle: rendering `/metrics` and both `/findings` bodies at each publish
/// cost the renderings and their transient heap 15 times over (issue 32: the heap's high
/// water, and with it `serve`'s resident memory, was set by renderings nobody read). The
/// bodies are reference-counted [`Bytes`]: a response takes a cheap handle on them instead
/// of copying them (a busy node's `/findings` is tens of KiB; copying it per request was the
/// largest user-space cost of serving it).
#[derive(Debug)]
pub struct Published {
    /// Increases with every applied run; an older rendering never replaces a newer one.
    pub generation: u64,
    pub snapshot: Snapshot,
    links: Links,
    /// `/metrics` body (UTF-8 text), rendered on first use.
    metrics: OnceLock<Bytes>,
    /// Unfiltered `/findings` bodies, rendered on first use.
    json_en: OnceLock<Bytes>,
    json_zh: OnceLock<Bytes>,
}

impl Published {
    pub fn new(generation: u64, snapshot: Snapshot, links: &Links) -> Published {
        Published {
            generation,
            snapshot,
            links: links.clone(),
            metrics: OnceLock::new(),
            json_en: OnceLock::new(),
            json_zh: OnceLock::new(),
        }
    }

    /// The `/metrics` body of this snapshot (rendered by the first caller).
    pub fn metrics(&self) -> &Bytes {
        self.metrics
            .get_or_init(|| Bytes::from(metrics::encode_snapshot(&self.snapshot, &self.links)))
    }

    /// The unfiltered `/findings` body in `lang` (rendered by the first caller).
    pub fn json(&self, lang: collectors::Lang) -> &Bytes {
        let cell = match lang {
            collectors::Lang::En => &self.json_en,
            collectors::Lang::Zh => &self.json_zh,
        };
        cell.get_or_init(|| {
            Bytes::from(api::to_json(&View::new(
                &self.snapshot,
                &Filter {
                    lang,
                    ..Filter::default()
                },
            )))
        })
    }

    /// How many of the three bodies have been rendered (tests).
    #[cfg(test)]
    fn rendered(&self) -> usize {
        [&self.metrics, &self.json_en, &self.json_zh]
            .iter()
            .filter(|c| c.get().is_some())
            .count()
    }
}

/// State shared by the scheduler threads and the HTTP server.
pub struct Shared {
    /// The state and the generation of its latest change.
    state: Mutex<(State, u64)>,
    published: RwLock<Arc<Published>>,
    /// Where `/metrics`' `node_doctor_finding_info{runbook}` points.
    links: Links,
    /// What the page draws and `/history` returns (its own lock: a request copies it).
    history: Mutex<History>,
}

impl Shared {
    #[cfg(test)]
    pub fn new(state: State) -> Shared {
        Shared::with_links(state, Links::default())
    }

    pub fn with_links(state: State, links: Links) -> Shared {
        let first = Arc::new(Published::new(
            0,
            state.snapshot(OffsetDateTime::now_utc()),
            &links,
        ));
        Shared {
            state: Mutex::new((state, 0)),
            published: RwLock::new(first),
            links,
            history: Mutex::new(History::default()),
        }
    }

    /// Records a run and publishes a new snapshot. Rendering happens outside the state lock;
    /// when two collectors finish together, the later generation wins.
    pub fn apply(&self, collector: &str, mut report: RunReport, started: OffsetDateTime) {
        if let crate::scheduler::Outcome::Completed(c) = &mut report.outcome {
            let ended = started + report.duration;
            let t = ended.unix_timestamp_nanos() as f64 / 1e9;
            let figures = std::mem::take(&mut c.figures);
            self.history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(collector, &c.metrics, figures, t);
        }
        let (generation, snapshot) = {
            let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let (st, generation) = &mut *guard;
            st.apply(collector, report, started);
            *generation += 1;
            (*generation, st.snapshot(OffsetDateTime::now_utc()))
        };
        let rendered = Arc::new(Published::new(generation, snapshot, &self.links));
        let mut published = self.published.write().unwrap_or_else(|e| e.into_inner());
        if rendered.generation > published.generation {
            *published = rendered;
        }
    }

    /// The figures kept ([`History::figures`]), copied.
    pub fn figures(&self) -> Vec<collectors::figure::Figure> {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .figures()
    }

    /// The latest snapshot (cheap: one `Arc` clone).
    pub fn latest(&self) -> Arc<Published> {
        Arc::clone(&self.published.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Tells scheduler threads to stop sleeping and exit.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Sleeps until `deadline`; true when asked to stop.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *stopped {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            stopped = self
                .cv
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Starts one scheduler thread per runner: run, publish, sleep until the next interval.
/// After every collector's first run, the program's start-up pages are released
/// ([`crate::image`]).
pub fn spawn_schedulers(
    runners: Vec<Runner>,
    ctx: CollectContext,
    shared: Arc<Shared>,
    stop: Arc<Stop>,
) -> std::io::Result<()> {
    // Once every collector has run, start-up is over: its code and data pages go back; and
    // again after any run that follows a bulk read of embedded text.
    let image = Arc::new(ImagePages::default());
    for runner in runners {
        let ctx = ctx.clone();
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&stop);
        let image = Arc::clone(&image);
        std::thread::Builder::new()
            .name(format!("sched-{}", runner.name()))
            .spawn(move || loop {
                let start = Instant::now();
                let started = OffsetDateTime::now_utc();
                let report = runner.run_once(&ctx);
                shared.apply(runner.name(), report, started);
                crate::heap::release_free_pages();
                image.after_run(shared.latest().snapshot.ready);
                if stop.wait_until(start + runner.interval) {
                    break;
                }
            })?;
    }
    Ok(())
}

/// When `serve` hands its program's read-only pages back ([`crate::image`]): once every
/// collector has run (start-up's code and data), and after any later run once embedded text
/// was read in bulk since the last time ([`collectors::embedded`]: a rule's first rendering,
/// a `see_also` key's first title, `/explain`'s first catalogue). Those reads happen once per
/// rule, key or file, so the releases are few; what a cycle runs faults back in from the
/// page cache.
#[derive(Default)]
struct ImagePages {
    /// The bulk-read count at the last release; `None` before start-up is over.
    released_at: Mutex<Option<u64>>,
}

impl ImagePages {
    fn after_run(&self, ready: bool) {
        let mut at = self.released_at.lock().unwrap_or_else(|e| e.into_inner());
        let reads = collectors::embedded::bulk_reads();
        let why = match *at {
            None if ready => "start-up over",
            Some(last) if reads != last => "embedded text read",
            _ => return,
        };
        *at = Some(reads);
        let bytes = crate::image::release_startup_pages();
        tracing::debug!(bytes, why, "released the program's read-only pages");
    }
}

/// Runs every runner once, in parallel, and records the results in `state`. Nothing is
/// rendered: `check` renders its one report from the final state (publishing a snapshot per
/// run, as `serve` does, rendered `/metrics` and two `/findings` bodies nobody read, twice per
/// collector). Every run is started first, then each is waited for on this thread (at most
/// its own timeout from its start): one thread per collector, the worker.
pub fn run_all_once(runners: &[Runner], ctx: &CollectContext, state: &Mutex<State>) {
    let started: Vec<_> = runners
        .iter()
        .map(|r| (r, OffsetDateTime::now_utc(), r.start(ctx)))
        .collect();
    for (r, at, run) in started {
        let report = run.finish();
        tracing::debug!(
            collector = r.name(),
            cpu_total_us = report.cpu_total.as_micros() as u64,
            "run finished"
        );
        state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .apply(r.name(), report, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::{ctx, finding, no_factory, with, Scripted, Slow};
    use crate::scheduler::Factory;
    use collectors::{Collector, Severity, Status};

    fn runner(c: Box<dyn Collector>, interval_ms: u64, timeout_ms: u64) -> Runner {
        Runner::new(
            c,
            no_factory(),
            Duration::from_millis(interval_ms),
            Duration::from_millis(timeout_ms),
        )
    }

    /// Fake collectors disk, load and memory; `load` asks for at least `load_floor`.
    fn fakes_with(load_floor: Option<Duration>) -> Vec<(&'static str, Factory)> {
        ["disk", "load", "memory"]
            .into_iter()
            .map(|name| {
                let floor = (name == "load").then_some(load_floor).flatten();
                let factory: Factory = Arc::new(move || {
                    Some(Box::new(Floored {
                        inner: Slow {
                            name,
                            delay: Duration::ZERO,
                            runs: 0,
                        },
                        floor,
                    }) as Box<dyn Collector>)
                });
                (name, factory)
            })
            .collect()
    }

    /// A run publishes its snapshot without rendering it; the first request renders each
    /// body once, and the bodies are what a rendering at publish time gave.
    #[test]
    fn publishing_renders_nothing_until_asked() {
        let names = vec!["disk".to_string()];
        let shared = Shared::new(State::new("n", &names));
        let report = RunReport {
            outcome: crate::scheduler::Outcome::Completed(with(
                Status::Ok,
                vec![finding("disk.x", "/a", Severity::Warning)],
            )),
            duration: Duration::from_millis(2),
            cpu_total: Duration::ZERO,
        };
        shared.apply("disk", report, OffsetDateTime::now_utc());
        let p = shared.latest();
        assert_eq!(p.generation, 1);
        assert_eq!(p.rendered(), 0, "nothing rendered at publish");
        let m = p.metrics().clone();
        assert_eq!(p.rendered(), 1);
        assert!(
            std::ptr::eq(p.metrics().as_ptr(), m.as_ptr()),
            "rendered once"
        );
        // prometheus-client's families keep their series in a hash map: compare the lines.
        let lines = |b: &[u8]| {
            let mut l: Vec<String> = String::from_utf8_lossy(b)
                .lines()
                .map(String::from)
                .collect();
            l.sort();
            l
        };
        assert_eq!(
            lines(&m),
            lines(metrics::encode_snapshot(&p.snapshot, &Links::default()).as_bytes())
        );
        let zh = Filter {
            lang: collectors::Lang::Zh,
            ..Filter::default()
        };
        assert_eq!(
            p.json(collectors::Lang::Zh),
            &Bytes::from(api::to_json(&View::new(&p.snapshot, &zh)))
        );
        assert_eq!(
            p.rendered(),
            2,
            "the English body is not rendered for a Chinese request"
        );
        assert_eq!(
            p.json(collectors::Lang::En),
            &Bytes::from(api::to_json(&View::new(&p.snapshot, &Filter::default())))
        );
        assert_ne!(p.json(collectors::Lang::En), p.json(collectors::Lang::Zh));
    }

    fn fakes() -> Vec<(&'static str, Factory)> {
        fakes_with(None)
    }

    /// A fake with a floor under its default timeout.
    struct Floored {
        inner: Slow,
        floor: Option<Duration>,
    }
    impl Collector for Floored {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn min_timeout(&self) -> Option<Duration> {
            self.floor
        }
        fn collect(&mut self, ctx: &CollectContext) -> collectors::Collection {
            self.inner.collect(ctx)
        }
    }

    fn plan() -> Plan {
        Plan {
            only: vec![],
            interval: Duration::from_secs(15),
            intervals: vec![],
            timeout: None,
        }
    }

    #[test]
    fn plan_filters_and_sets_intervals_and_timeouts() {
        let rs = build(fakes(), &plan()).unwrap();
        let names: Vec<&str> = rs.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["disk", "load", "memory"]);
        assert!(
            rs.iter()
                .all(|r| r.interval == Duration::from_secs(15)
                    && r.timeout == Duration::from_secs(10))
        );

        let p = Plan {
            only: vec!["memory".into(), "disk".into()],
            intervals: vec![
                ("disk".into(), Duration::from_secs(60)),
                ("memory".into(), Duration::from_secs(2)),
            ],
            ..plan()
        };
        let rs = build(fakes(), &p).unwrap();
        let got: Vec<(&str, u64, u64)> = rs
            .iter()
            .map(|r| (r.name(), r.interval.as_secs(), r.timeout.as_secs()))
            .collect();
        // Default timeout: the smaller of the interval and 10 s.
        assert_eq!(got, [("disk", 60, 10), ("memory", 2, 2)]);

        let p = Plan {
            timeout: Some(Duration::from_millis(1500)),
            ..plan()
        };
        assert!(build(fakes(), &p)
            .unwrap()
            .iter()
            .all(|r| r.timeout == Duration::from_millis(1500)));

        // A collector with a floor under its default timeout (the runtime collector's probe
        // deadline) keeps it under `check`'s 1 s interval; an explicit timeout still wins.
        let p = Plan {
            interval: Duration::from_secs(1),
            ..plan()
        };
        let rs = build(fakes_with(Some(Duration::from_secs(4))), &p).unwrap();
        let got: Vec<(&str, u64)> = rs.iter().map(|r| (r.name(), r.timeout.as_secs())).collect();
        assert_eq!(got, [("disk", 1), ("load", 4), ("memory", 1)]);
        let p = Plan {
            timeout: Some(Duration::from_millis(1500)),
            ..p
        };
        assert!(build(fakes_with(Some(Duration::from_secs(4))), &p)
            .unwrap()
            .iter()
            .all(|r| r.timeout == Duration::from_millis(1500)));

        for bad in [
            Plan {
                only: vec!["nope".into()],
                ..plan()
            },
            Plan {
                intervals: vec![("nope".into(), Duration::from_secs(1))],
                ..plan()
            },
        ] {
            let err = build(fakes(), &bad).err().unwrap();
            assert!(err.contains("unknown collector \"nope\""), "{err}");
            assert!(err.contains("disk, load, memory"), "{err}");
        }
    }

    #[test]
    fn unknown_collectors_are_usage_errors() {
        let host = Node::new(collectors::HostPaths::new("/nonexistent"));
        let plan = Plan {
            only: vec!["nope".into()],
            interval: Duration::from_secs(15),
            intervals: vec![],
            timeout: None,
        };
        let err = runners(&host, &crate::cli::default_options(), &plan)
            .err()
            .unwrap();
        assert!(err.contains("unknown collector \"nope\""), "{err}");
        let plan = Plan {
            only: vec![],
            ..plan
        };
        let rs = runners(&host, &crate::cli::default_options(), &plan).unwrap();
        // Default timeout: the smaller of the interval and 10 s.
        assert!(rs
            .iter()
            .all(|r| r.timeout == Duration::from_secs(10) && r.interval == plan.interval));
    }

    /// Polls `cond` on the latest snapshot every 5 ms. The 60 s are a failure guard, not a
    /// claim: what the tests show is the order the conditions come in, on a loaded machine too.
    fn eventually(shared: &Shared, what: &str, cond: impl Fn(&Published) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if cond(&shared.latest()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "timed out waiting for: {what}\n{:#?}",
            shared.latest().snapshot
        );
    }

    #[test]
    fn schedulers_keep_reporting_while_one_collector_hangs() {
        // `gated` holds its first run until the test opens it (its timeout, 60 s, is only a
        // hang stopper): while it is held the node cannot be ready, whatever the machine's
        // load, so "alt reports before the node is ready" is an ordering, not a race with a
        // wall clock.
        let (gate, gated) = crate::scheduler::fakes::Gate::new("gated");
        let gated = runner(gated, 50, 60_000);
        let hung = runner(
            Box::new(Slow {
                name: "hung",
                delay: Duration::from_secs(3600),
                runs: 0,
            }),
            50,
            700,
        );
        // Reports the finding on its first 10 runs, then nothing.
        let mut script = vec![with(Status::Ok, vec![finding("alt.x", "a", Severity::Warning)]); 10];
        script.push(with(Status::Ok, vec![]));
        let alternating = runner(
            Box::new(Scripted {
                name: "alt",
                script,
                i: 0,
            }),
            20,
            1000,
        );
        let names = vec!["hung".to_string(), "alt".to_string(), "gated".to_string()];
        let shared = Arc::new(Shared::new(State::new("n", &names)));
        assert!(!shared.latest().snapshot.ready);
        let stop = Arc::new(Stop::default());
        spawn_schedulers(
            vec![hung, alternating, gated],
            ctx(),
            Arc::clone(&shared),
            Arc::clone(&stop),
        )
        .unwrap();
        eventually(&shared, "alt reports its finding", |p| {
            p.snapshot.findings.len() == 1
        });
        assert_eq!(gate.finished.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(
            !shared.latest().snapshot.ready,
            "ready while gated's first run is held"
        );
        gate.open();
        eventually(&shared, "ready once hung timed out and gated ran", |p| {
            p.snapshot.ready
        });
        let p = shared.latest();
        let hung = p
            .snapshot
            .collectors
            .iter()
            .find(|c| c.name == "hung")
            .unwrap();
        assert!(hung
            .status
            .message()
            .unwrap()
            .starts_with("timed out after 700ms"));
        assert!(String::from_utf8_lossy(p.metrics())
            .contains("node_doctor_collector_up{collector=\"hung\"} 0.0"));
        eventually(&shared, "alt's finding resolves after its 10th run", |p| {
            p.snapshot.findings.is_empty()
        });
        let alt = shared.latest();
        let alt = alt
            .snapshot
            .collectors
            .iter()
            .find(|c| c.name == "alt")
            .unwrap();
        assert_eq!(alt.status, Status::Ok);
        eventually(&shared, "hung reports it is still stuck", |p| {
            p.snapshot.collectors.iter().any(|c| {
                c.name == "hung"
                    && c.status
                        .message()
                        .is_some_and(|m| m.contains("no new run was started"))
            })
        });
        // Stopping does not wait for the hung run (an hour's sleep).
        crate::scheduler::fakes::within_30s("stop beside a hung run", move || stop.stop());
    }

    #[test]
    fn concurrent_runs_never_publish_an_older_snapshot() {
        let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        let shared = Shared::new(State::new("n", &names));
        std::thread::scope(|s| {
            for name in &names {
                let shared = &shared;
                s.spawn(move || {
                    for _ in 0..50 {
                        shared.apply(
                            name,
                            RunReport {
                                outcome: crate::scheduler::Outcome::Completed(with(
                                    Status::Ok,
                                    vec![],
                                )),
                                duration: Duration::ZERO,
                                cpu_total: Duration::ZERO,
                            },
                            OffsetDateTime::now_utc(),
                        );
                    }
                });
            }
        });
        let p = shared.latest();
        assert_eq!(p.generation, 8 * 50);
        assert!(p.snapshot.ready);
        assert!(p.snapshot.collectors.iter().all(|c| c.last_run.is_some()));
    }

    #[test]
    fn run_all_once_records_every_runner_in_the_state() {
        let rs = build(fakes(), &plan()).unwrap();
        let names: Vec<String> = rs.iter().map(|r| r.name().to_string()).collect();
        let state = Mutex::new(State::new("n", &names));
        run_all_once(&rs, &ctx(), &state);
        run_all_once(&rs, &ctx(), &state);
        let snap = state
            .into_inner()
            .unwrap()
            .snapshot(OffsetDateTime::now_utc());
        assert!(snap.ready);
        for c in &snap.collectors {
            assert_eq!(c.status, Status::Ok, "{}", c.name);
            // The second run's metrics (the fake counts its runs), two runs in the histogram.
            assert_eq!(c.metrics[0].value, 2.0, "{}", c.name);
            assert_eq!(c.cost.durations.count, 2, "{}", c.name);
        }
    }

    #[test]
    fn stop_wakes_sleepers() {
        let stop = Arc::new(Stop::default());
        let s2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || s2.wait_until(Instant::now() + Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        stop.stop();
        assert!(h.join().unwrap());
        assert!(!Stop::default().wait_until(Instant::now()));
    }
}
