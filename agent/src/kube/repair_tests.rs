//! Repair automation reading node-doctor's conditions, end to end over HTTPS against the
//! stand-in API server (every object schema-checked), on a simulated clock: the reporters of a
//! pool of nodes write, and a small repair controller written here reads the nodes the way
//! Karpenter's node health controller does (a policy is a condition type, a status and a
//! toleration counted from `lastTransitionTime`; nothing is repaired while more than 20 % of
//! the pool, rounded up, matches a policy), or the way medik8s NodeHealthCheck (`minHealthy`)
//! and Cluster API's MachineHealthCheck (`unhealthyLessThanOrEqualTo`) do, with the conditions
//! and limits of our example manifests (manifests/examples/repair/).

use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::{Collection, Finding, Severity, Status};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::classes::Naming;
use super::client::KubeApi;
use super::planner::{Planner, Settings};
use super::tests::{api_for, kubelet_ready, settings, snapshot, standin_with_rbac, t};
use super::view;
use super::Reporter;
use crate::kube_stats::Stats;
use crate::scheduler::fakes::{finding, with};

/// One collector cycle of the simulation.
const CYCLE: i64 = 15;
/// The collectors whose findings feed the classes these tests touch: all run, so a class is
/// never Unknown for want of its collector.
const COLLECTORS: [&str; 6] = ["kernel", "hardware", "runtime", "clock", "dns", "disk"];

/// A node is unhealthy for a controller when its condition `ctype` has had `status` for at
/// least `after`, counted from the condition's `lastTransitionTime`.
#[derive(Debug, Clone)]
struct Policy {
    ctype: String,
    status: String,
    after: Duration,
}

/// A controller's storm limit, each a percentage of the pool.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// Karpenter: nothing is repaired while more than this share of the pool (rounded up) has
    /// a condition matching a policy, however young.
    MatchingAtMost(u32),
    /// NodeHealthCheck's `minHealthy`: remediation only while at least this share (rounded
    /// up) of the nodes is healthy.
    MinHealthy(u32),
    /// MachineHealthCheck's `unhealthyLessThanOrEqualTo`.
    UnhealthyAtMost(u32),
}

#[derive(Debug, Clone)]
struct Controller {
    name: &'static str,
    naming: Naming,
    policies: Vec<Policy>,
    limit: Limit,
}

fn percent_of(p: u32, n: usize) -> usize {
    (p as usize * n).div_ceil(100)
}

/// `10m`, `300s`, `1h` (the forms our example manifests use).
fn go_duration(s: &str) -> Duration {
    let (n, unit) = s.split_at(s.len() - 1);
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("duration {s:?}"));
    Duration::from_secs(match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => panic!("duration {s:?}"),
    })
}

fn percent(v: &serde_yaml::Value) -> u32 {
    let s = v.as_str().expect("a percentage");
    s.trim_end_matches('%').parse().expect("a percentage")
}

fn example(name: &str) -> serde_yaml::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples/repair")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_yaml::from_str(&text).expect("the example parses")
}

impl Controller {
    /// Karpenter's AWS provider: `RepairPolicies()` of aws/karpenter-provider-aws
    /// (pkg/cloudprovider/cloudprovider.go; commit in tests/manifests/crds/SOURCES.md),
    /// the node monitoring agent's types (the kubelet's Ready is not node-doctor's).
    fn karpenter() -> Controller {
        let p = |t: &str, min: u64| Policy {
            ctype: t.into(),
            status: "False".into(),
            after: Duration::from_secs(min * 60),
        };
        Controller {
            name: "Karpenter",
            naming: Naming::Nma,
            policies: vec![
                p("AcceleratedHardwareReady", 10),
                p("StorageReady", 30),
                p("NetworkingReady", 30),
                p("KernelReady", 30),
                p("ContainerRuntimeReady", 30),
            ],
            limit: Limit::MatchingAtMost(20),
        }
    }

    /// medik8s NodeHealthCheck as our example manifest configures it.
    fn node_health_check() -> Controller {
        let m = example("nodehealthcheck.yaml");
        let spec = &m["spec"];
        Controller {
            name: "NodeHealthCheck",
            naming: Naming::Own,
            policies: spec["unhealthyConditions"]
                .as_sequence()
                .expect("unhealthyConditions")
                .iter()
                .map(|c| Policy {
                    ctype: c["type"].as_str().unwrap().into(),
                    status: c["status"].as_str().unwrap().into(),
                    after: go_duration(c["duration"].as_str().unwrap()),
                })
                .collect(),
            limit: Limit::MinHealthy(percent(&spec["minHealthy"])),
        }
    }

    /// Cluster API's MachineHealthCheck (v1beta2) as our example manifest configures it.
    fn machine_health_check() -> Controller {
        let m = example("machinehealthcheck.yaml");
        let spec = &m["spec"];
        Controller {
            name: "MachineHealthCheck",
            naming: Naming::Own,
            policies: spec["checks"]["unhealthyNodeConditions"]
                .as_sequence()
                .expect("unhealthyNodeConditions")
                .iter()
                .map(|c| Policy {
                    ctype: c["type"].as_str().unwrap().into(),
                    status: c["status"].as_str().unwrap().into(),
                    after: Duration::from_secs(c["timeoutSeconds"].as_u64().unwrap()),
                })
                .collect(),
            limit: Limit::UnhealthyAtMost(percent(
                &spec["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"],
            )),
        }
    }

    /// The lastTransitionTime of each condition of `node` that matches a policy (type and
    /// status), with the policy.
    fn matching<'a>(&'a self, node: &Value) -> Vec<(&'a Policy, OffsetDateTime)> {
        let conds = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.policies
            .iter()
            .filter_map(|p| {
                let c = conds.iter().find(|c| c["type"] == p.ctype.as_str())?;
                (c["status"] == p.status.as_str()).then_some(())?;
                let at = super::planner::parse_time(c["lastTransitionTime"].as_str()?)?;
                Some((p, at))
            })
            .collect()
    }

    /// Whether a policy's toleration has run out on `node` at `now`.
    fn due(&self, node: &Value, now: OffsetDateTime) -> bool {
        self.matching(node).iter().any(|(p, at)| {
            now - *at >= time::Duration::try_from(p.after).unwrap_or(time::Duration::MAX)
        })
    }

    /// The nodes this controller repairs at `now`, and how many count against its limit.
    fn decide(&self, nodes: &[Value], now: OffsetDateTime) -> (Vec<String>, usize) {
        let due: Vec<&Value> = nodes.iter().filter(|n| self.due(n, now)).collect();
        let (counted, allowed) = match self.limit {
            Limit::MatchingAtMost(p) => {
                let matching = nodes.iter().filter(|n| !self.matching(n).is_empty());
                let m = matching.count();
                (m, m <= percent_of(p, nodes.len()))
            }
            Limit::MinHealthy(p) => (
                due.len(),
                nodes.len() - due.len() >= percent_of(p, nodes.len()),
            ),
            Limit::UnhealthyAtMost(p) => (due.len(), due.len() <= percent_of(p, nodes.len())),
        };
        let names = if allowed {
            due.iter()
                .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        };
        (names, counted)
    }
}

/// A pool of nodes, each with its own reporter over one client, on a simulated clock.
struct Pool {
    s: kube_standin::StandIn,
    api: KubeApi,
    naming: Naming,
    names: Vec<String>,
    reporters: Vec<Reporter<KubeApi>>,
    start: OffsetDateTime,
    mono: Instant,
    _dir: tempfile::TempDir,
}

impl Pool {
    async fn new(size: usize, naming: Naming) -> Pool {
        let s = standin_with_rbac();
        let names: Vec<String> = (0..size).map(|i| format!("pool-node-{i:02}")).collect();
        for n in &names {
            s.add_node(n, vec![kubelet_ready()]);
        }
        let dir = tempfile::tempdir().unwrap();
        let api = api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await;
        let mut pool = Pool {
            s,
            api,
            naming,
            names,
            reporters: Vec::new(),
            start: t(0),
            mono: Instant::now(),
            _dir: dir,
        };
        pool.reporters = (0..size).map(|i| pool.reporter(i)).collect();
        pool
    }

    /// A new agent on node `i` (a start, or a restart: its planner knows nothing).
    fn reporter(&self, i: usize) -> Reporter<KubeApi> {
        Reporter::new(
            Settings {
                node: self.names[i].clone(),
                naming: self.naming,
                // The defaults of the flags: the hold-down is the hysteresis a flap meets.
                clear_after: Duration::from_secs(120),
                min_write_interval: Duration::from_secs(10),
                ..settings()
            },
            self.api.clone(),
            Arc::new(Stats::default()),
        )
    }

    fn restart(&mut self, i: usize) {
        self.reporters[i] = self.reporter(i);
    }

    fn at(&self, secs: i64) -> OffsetDateTime {
        self.start + time::Duration::seconds(secs)
    }

    /// One collector cycle: node `i` has the findings `findings(i)`.
    async fn cycle(&mut self, secs: i64, findings: impl Fn(usize) -> Vec<Finding>) {
        let now = self.at(secs);
        for i in 0..self.reporters.len() {
            let fs = findings(i);
            let runs: Vec<(&str, Collection)> = COLLECTORS
                .iter()
                .map(|c| {
                    let mine = fs
                        .iter()
                        .filter(|f| f.id.starts_with(&format!("{c}.")))
                        .cloned()
                        .collect();
                    (*c, with(Status::Ok, mine))
                })
                .collect();
            let snap = snapshot(now, &runs);
            let mono = self.mono + Duration::from_secs(secs.max(0) as u64);
            self.reporters[i].tick(now, mono, Some(&snap)).await;
        }
    }

    fn nodes(&self) -> Vec<Value> {
        self.names.iter().filter_map(|n| self.s.node(n)).collect()
    }

    fn condition(&self, i: usize, ctype: &str) -> Option<Value> {
        self.s.condition(&self.names[i], ctype)
    }
}

fn hardware_failure() -> Finding {
    finding("hardware.memory_uncorrected", "mc0", Severity::Critical)
}

fn clock_and_dns() -> Vec<Finding> {
    vec![
        finding("clock.unsynchronised", "", Severity::Warning),
        finding("dns.no_answer", "10.96.0.10", Severity::Warning),
    ]
}

/// The type and the problem status node 0's hardware failure is written as.
fn hardware_condition(naming: Naming) -> (&'static str, &'static str) {
    match naming {
        Naming::Nma => ("KernelReady", "False"),
        _ => ("NodeDoctorHardwareFailure", "True"),
    }
}

/// What a run of one scenario saw.
#[derive(Debug)]
struct Seen {
    /// When the controller first repaired node 0 (seconds), if it did.
    repaired_at: Option<i64>,
    /// Each distinct lastTransitionTime node 0's hardware condition had while a problem.
    problem_since: Vec<String>,
    /// Node 0's hardware condition at the end.
    last: Option<Value>,
}

/// Node 0 of a pool of 10 for `minutes`: `has(secs)` says whether its hardware failure is
/// found in the cycle at `secs`; its agent restarts at `restarts`.
async fn scenario(
    c: &Controller,
    minutes: i64,
    has: impl Fn(i64) -> bool,
    restarts: &[i64],
) -> Seen {
    let mut pool = Pool::new(10, c.naming).await;
    let (ctype, bad) = hardware_condition(c.naming);
    let mut seen = Seen {
        repaired_at: None,
        problem_since: Vec::new(),
        last: None,
    };
    for step in 0..=(minutes * 60 / CYCLE) {
        let secs = step * CYCLE;
        if restarts.contains(&secs) {
            pool.restart(0);
        }
        let on = has(secs);
        pool.cycle(secs, |i| {
            if i == 0 && on {
                vec![hardware_failure()]
            } else {
                vec![]
            }
        })
        .await;
        if let Some(cond) = pool.condition(0, ctype) {
            if cond["status"] == bad {
                let since = cond["lastTransitionTime"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                if !seen.problem_since.contains(&since) {
                    seen.problem_since.push(since);
                }
            }
            seen.last = Some(cond);
        }
        let (repair, _) = c.decide(&pool.nodes(), pool.at(secs));
        if seen.repaired_at.is_none() && repair.iter().any(|n| n == &pool.names[0]) {
            seen.repaired_at = Some(secs);
        }
    }
    assert!(
        pool.s.schema_errors().is_empty(),
        "{:#?}",
        pool.s.schema_errors()
    );
    seen
}

/// The hardware policy's toleration.
fn toleration(c: &Controller) -> i64 {
    let (ctype, _) = hardware_condition(c.naming);
    c.policies
        .iter()
        .find(|p| p.ctype == ctype)
        .unwrap_or_else(|| panic!("{}: no policy for {ctype}", c.name))
        .after
        .as_secs() as i64
}

fn controllers() -> [Controller; 3] {
    [
        Controller::karpenter(),
        Controller::node_health_check(),
        Controller::machine_health_check(),
    ]
}

/// A hardware failure found from minute 1 is repaired once its toleration has run from the
/// condition's lastTransitionTime — the first cycle at or after it — and not before; with
/// two agent restarts during the toleration, the same.
#[tokio::test]
async fn a_hardware_failure_is_repaired_after_its_toleration_even_across_two_restarts() {
    for c in controllers() {
        let tol = toleration(&c);
        let due = 60 + tol;
        let cycle_at = |secs: i64| secs / CYCLE * CYCLE;
        for restarts in [
            &[][..],
            &[cycle_at(60 + tol / 3), cycle_at(60 + 2 * tol / 3)],
        ] {
            let seen = scenario(&c, (due + 120) / 60, |secs| secs >= 60, restarts).await;
            assert_eq!(
                seen.problem_since.len(),
                1,
                "{}: restarts {restarts:?}: the timer was reset: {:?}",
                c.name,
                seen.problem_since
            );
            assert_eq!(
                seen.repaired_at,
                Some(due),
                "{}: restarts {restarts:?}: {seen:?}",
                c.name
            );
        }
    }
}

/// A finding that comes and goes within the hold-down (`--kube-clear-after`, 2 minutes) never
/// clears its condition, so the timer keeps running and repair comes on time.
#[tokio::test]
async fn a_finding_flapping_within_the_hold_down_does_not_reset_the_timer() {
    for c in controllers() {
        let due = 60 + toleration(&c);
        // Found for 45 s, missing for 60 s, again and again.
        let seen = scenario(
            &c,
            (due + 120) / 60,
            |secs| secs >= 60 && (secs - 60) % 105 < 45,
            &[],
        )
        .await;
        assert_eq!(seen.problem_since.len(), 1, "{}: {seen:?}", c.name);
        assert_eq!(seen.repaired_at, Some(due), "{}: {seen:?}", c.name);
    }
}

/// A node whose failure is gone before its toleration is set healthy after the hold-down and
/// never repaired.
#[tokio::test]
async fn a_healed_node_is_set_healthy_and_not_repaired() {
    for c in controllers() {
        let tol = toleration(&c);
        let seen = scenario(
            &c,
            (60 + 2 * tol) / 60,
            |secs| (60..60 + tol / 2).contains(&secs),
            &[],
        )
        .await;
        assert_eq!(seen.repaired_at, None, "{}: {seen:?}", c.name);
        assert_eq!(
            seen.problem_since.len(),
            1,
            "{}: it was a problem once",
            c.name
        );
        let last = seen.last.expect("the condition is written");
        let healthy = if c.naming == Naming::Nma {
            "True"
        } else {
            "False"
        };
        assert_eq!(last["status"], healthy, "{}: {last:#}", c.name);
    }
}

/// An advisory problem (the clock, DNS) on a node for an hour: its own NodeDoctor… conditions
/// say so, no repair-worthy type is a problem, no controller repairs.
#[tokio::test]
async fn an_advisory_problem_is_never_repaired() {
    for c in controllers() {
        let mut pool = Pool::new(10, c.naming).await;
        for step in 0..=(3600 / CYCLE) {
            let secs = step * CYCLE;
            pool.cycle(secs, |i| if i == 0 { clock_and_dns() } else { vec![] })
                .await;
            let (repair, matching) = c.decide(&pool.nodes(), pool.at(secs));
            assert!(
                repair.is_empty() && matching == 0,
                "{}: {repair:?} at {secs}",
                c.name
            );
        }
        for t in ["NodeDoctorClockUnsynchronised", "NodeDoctorDNSUnhealthy"] {
            let cond = pool
                .condition(0, t)
                .expect("advisory conditions are written");
            assert_eq!(cond["status"], "True", "{}: {cond:#}", c.name);
        }
        assert!(pool.s.schema_errors().is_empty());
    }
}

/// A cluster-wide cause — the same clock and DNS problem on 40 of 50 nodes — reaches no
/// repair-worthy condition under any naming: no controller counts a node against its limit
/// or repairs one. The controllers' limits themselves hold: 15 of 50 nodes with a hardware
/// failure are more than Karpenter's 20 % (none repaired), 5 of 50 are not (all repaired).
#[tokio::test]
async fn a_cluster_wide_cause_on_40_of_50_nodes_starts_no_repair_storm() {
    for c in controllers() {
        let mut pool = Pool::new(50, c.naming).await;
        // 40 minutes: past every toleration of the three controllers.
        for step in 0..=(2400 / CYCLE) {
            let secs = step * CYCLE;
            pool.cycle(secs, |i| if i < 40 { clock_and_dns() } else { vec![] })
                .await;
            let (repair, counted) = c.decide(&pool.nodes(), pool.at(secs));
            assert!(
                repair.is_empty() && counted == 0,
                "{}: at {secs} s {counted} node(s) count against the limit: {repair:?}",
                c.name
            );
        }
        let clock_true = (0..50)
            .filter(|&i| {
                pool.condition(i, "NodeDoctorClockUnsynchronised")
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        assert_eq!(
            clock_true, 40,
            "{}: the advisory condition is written",
            c.name
        );
        assert!(pool.s.schema_errors().is_empty());
    }
    let k = Controller::karpenter();
    for (failing, repaired) in [(15, 0), (5, 5)] {
        let mut pool = Pool::new(50, Naming::Nma).await;
        let mut got = Vec::new();
        for step in 0..=(2100 / CYCLE) {
            let secs = step * CYCLE;
            pool.cycle(secs, |i| {
                if i < failing {
                    vec![hardware_failure()]
                } else {
                    vec![]
                }
            })
            .await;
            got = k.decide(&pool.nodes(), pool.at(secs)).0;
        }
        assert_eq!(got.len(), repaired, "{failing} failing of 50: {got:?}");
    }
}

/// A planner under `naming` that took over `node`.
fn planner_on(naming: Naming, node: &Value) -> Planner {
    let mut p = Planner::new(Settings {
        naming,
        clear_after: Duration::from_secs(120),
        ..settings()
    });
    p.take_over(node, t(0)).expect("take-over");
    p
}

fn observe(p: &mut Planner, secs: i64, findings: Vec<Finding>) {
    let runs: Vec<(&str, Collection)> = COLLECTORS
        .iter()
        .map(|c| {
            let mine = findings
                .iter()
                .filter(|f| f.id.starts_with(&format!("{c}.")))
                .cloned()
                .collect();
            (*c, with(Status::Ok, mine))
        })
        .collect();
    let snap = snapshot(t(secs), &runs);
    p.observe(t(secs), &view(&snap));
}

fn desired(p: &Planner, ctype: &str) -> super::planner::Condition {
    p.desired()
        .find(|c| c.ctype == ctype)
        .unwrap_or_else(|| {
            panic!(
                "{ctype} not desired: {:#?}",
                p.desired().collect::<Vec<_>>()
            )
        })
        .clone()
}

/// Under the node monitoring agent's naming: repair-worthy classes are its five types with
/// its polarity (True healthy, False a problem) and the class's stable reason; advisory
/// classes keep their NodeDoctor… types; no class's own type of a mapped class is written.
#[test]
fn nma_names_map_repair_worthy_classes_with_nmas_polarity() {
    let mut p = planner_on(Naming::Nma, &json!({"metadata": {"uid": "u"}}));
    observe(&mut p, 0, vec![]);
    let types = p.own_types();
    for t in ["StorageReady", "KernelReady", "ContainerRuntimeReady"] {
        assert!(types.contains(&t), "{t}: {types:?}");
        let c = desired(&p, t);
        assert_eq!(c.status, "True", "{c:?}");
    }
    assert_eq!(desired(&p, "KernelReady").reason, "KernelIsReady");
    assert_eq!(desired(&p, "StorageReady").reason, "DiskIsReady");
    for own in [
        "NodeDoctorHardwareFailure",
        "NodeDoctorKernelDeadlock",
        "NodeDoctorReadonlyFilesystem",
        "NodeDoctorKubeletUnhealthy",
    ] {
        assert!(!types.contains(&own), "{own} is written as an NMA type");
    }
    for advisory in [
        "NodeDoctorClockUnsynchronised",
        "NodeDoctorDNSUnhealthy",
        "NodeDoctorFilesystemFull",
        "NodeDoctorNetworkDegraded",
    ] {
        assert!(types.contains(&advisory), "{advisory}: {types:?}");
    }
    // No class maps onto NetworkingReady or AcceleratedHardwareReady yet: not written.
    assert!(!types.contains(&"NetworkingReady"));
    observe(&mut p, 15, vec![hardware_failure()]);
    let k = desired(&p, "KernelReady");
    assert_eq!(
        (k.status.as_str(), k.reason.as_str()),
        ("False", "HardwareFailure")
    );
    assert!(
        k.message.starts_with("hardware.memory_uncorrected"),
        "{}",
        k.message
    );
    // The same finding under node-doctor's own names: True, the finding's reason.
    let mut own = planner_on(Naming::Own, &json!({"metadata": {"uid": "u"}}));
    observe(&mut own, 15, vec![hardware_failure()]);
    let h = desired(&own, "NodeDoctorHardwareFailure");
    assert_eq!(
        (h.status.as_str(), h.reason.as_str()),
        ("True", "UncorrectableMemoryError")
    );
    assert!(!own.own_types().contains(&"KernelReady"));
}

/// Classes sharing a type combine: a second problem while the first holds keeps the timer and
/// the reason; the first leaving keeps the type False (timer and all) for the second; the
/// type is True again only when none remains, and only then does the timer move.
#[test]
fn a_second_problem_of_the_same_type_keeps_the_timer() {
    let mut p = planner_on(Naming::Nma, &json!({"metadata": {"uid": "u"}}));
    let runtime = || finding("runtime.not_running", "containerd", Severity::Critical);
    let kubelet = || finding("runtime.kubelet_not_running", "kubelet", Severity::Critical);
    observe(&mut p, 0, vec![]);
    observe(&mut p, 15, vec![runtime()]);
    let first = desired(&p, "ContainerRuntimeReady");
    assert_eq!(
        (first.status.as_str(), first.reason.as_str()),
        ("False", "ContainerRuntimeUnhealthy")
    );
    assert_eq!(first.last_transition, t(15));
    observe(&mut p, 300, vec![runtime(), kubelet()]);
    let both = desired(&p, "ContainerRuntimeReady");
    assert_eq!(
        both.last_transition,
        t(15),
        "a second problem keeps the timer"
    );
    assert_eq!(both.reason, "ContainerRuntimeUnhealthy", "and the reason");
    assert!(
        both.message.contains("runtime.kubelet_not_running"),
        "{}",
        both.message
    );
    // The first problem goes; past the hold-down only the second holds the type.
    observe(&mut p, 600, vec![kubelet()]);
    observe(&mut p, 900, vec![kubelet()]);
    let second = desired(&p, "ContainerRuntimeReady");
    assert_eq!(second.status, "False");
    assert_eq!(second.last_transition, t(15), "the type never flipped");
    // Gone altogether, past the hold-down: True, and only now the timer moves.
    observe(&mut p, 1000, vec![]);
    observe(&mut p, 1200, vec![]);
    let healed = desired(&p, "ContainerRuntimeReady");
    assert_eq!(
        (healed.status.as_str(), healed.reason.as_str()),
        ("True", "ContainerRuntimeIsReady")
    );
    assert_eq!(healed.last_transition, t(1200));
}

/// Under every naming a reason or message change alone keeps lastTransitionTime, and a
/// restart (take-over of what the node says) keeps it too.
#[test]
fn the_timer_moves_only_when_the_status_flips_under_every_naming() {
    for naming in [Naming::Own, Naming::Npd, Naming::Nma] {
        let mut p = planner_on(naming, &json!({"metadata": {"uid": "u"}}));
        let hung = |subject: &str| finding("runtime.hung", subject, Severity::Critical);
        let crashed = || finding("runtime.crashed", "containerd", Severity::Critical);
        observe(&mut p, 0, vec![hung("containerd")]);
        let t0 = p.status_patch(t(0)).expect("a first write");
        p.status_written(t(0));
        observe(&mut p, 30, vec![crashed()]);
        observe(&mut p, 60, vec![hung("dockerd"), crashed()]);
        let body = p.status_patch(t(60)).unwrap_or(t0);
        let ctype = match naming {
            Naming::Nma => "ContainerRuntimeReady",
            Naming::Npd => "ContainerRuntimeUnhealthy",
            Naming::Own => "NodeDoctorContainerRuntimeUnhealthy",
        };
        let c = desired(&p, ctype);
        assert_eq!(c.last_transition, t(0), "{naming:?}: {c:?}");
        // A restart: a new planner takes over what the node says.
        let mut node = json!({"metadata": {"uid": "u"}, "status": {"conditions": []}});
        kube_standin::patch::strategic(&mut node, &body).unwrap();
        let mut again = planner_on(naming, &node);
        observe(&mut again, 120, vec![crashed()]);
        let c = desired(&again, ctype);
        assert_eq!(c.last_transition, t(0), "{naming:?} after a restart: {c:?}");
    }
}

/// Types node-doctor wrote under a naming it no longer uses are removed at start when the
/// node's managedFields say node-doctor alone owns them; the same names owned by another
/// manager (node-problem-detector, the node monitoring agent) are kept (NPD #470).
#[test]
fn types_of_a_naming_no_longer_used_are_removed_only_when_ours() {
    let cond = |t: &str, s: &str| {
        json!({"type": t, "status": s, "reason": "R", "message": "m",
               "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    let fields = |types: &[&str]| {
        let mut m = serde_json::Map::new();
        for t in types {
            m.insert(format!("k:{}", json!({"type": t})), json!({".": {}}));
        }
        json!({"f:status": {"f:conditions": m}})
    };
    let node = json!({
        "metadata": {"uid": "u", "managedFields": [
            {"manager": "node-doctor", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": fields(&["KernelReady", "StorageReady", "KernelDeadlock", "NodeDoctorGone"])},
            {"manager": "node-problem-detector", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": fields(&["ReadonlyFilesystem"])},
            {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": fields(&["Ready"])},
        ]},
        "status": {"conditions": [
            kubelet_ready(),
            cond("KernelReady", "True"),
            cond("StorageReady", "True"),
            cond("KernelDeadlock", "False"),
            cond("ReadonlyFilesystem", "False"),
            cond("NodeDoctorGone", "True"),
            cond("SomeoneElsesType", "True"),
        ]}
    });
    let mut p = planner_on(Naming::Own, &node);
    observe(&mut p, 0, vec![]);
    let body = p.status_patch(t(0)).expect("a write");
    let deleted: Vec<&str> = body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["$patch"] == "delete")
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        deleted,
        ["KernelReady", "StorageReady", "KernelDeadlock", "NodeDoctorGone"],
        "ours alone are removed; NPD's ReadonlyFilesystem, the kubelet's Ready and unknown types stay"
    );
    // Without managedFields nothing but node-doctor's own prefix is removed.
    let mut bare = node.clone();
    bare["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    let mut p = planner_on(Naming::Own, &bare);
    observe(&mut p, 0, vec![]);
    let body = p.status_patch(t(0)).unwrap();
    let deleted: Vec<&str> = body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["$patch"] == "delete")
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(deleted, ["NodeDoctorGone"]);
}

/// Under the node monitoring agent's naming the agent refuses to start where another field
/// manager owns one of those types on its node (the NMA itself, or another agent), and says
/// which; its own earlier writes and other types' owners are no reason.
#[tokio::test]
async fn nma_names_are_refused_where_another_manager_owns_those_types() {
    let s = standin_with_rbac();
    s.add_node(super::tests::NODE, vec![kubelet_ready()]);
    s.set_condition_as(
        super::tests::NODE,
        "eks-node-monitoring-agent",
        json!({"type": "StorageReady", "status": "True", "reason": "DiskIsReady", "message": "ok",
               "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut r = Reporter::new(
        Settings {
            naming: Naming::Nma,
            ..settings()
        },
        api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
        Arc::new(Stats::default()),
    );
    let snap = snapshot(
        t(0),
        &[("hardware", with(Status::Ok, vec![hardware_failure()]))],
    );
    r.tick(t(0), Instant::now(), Some(&snap)).await;
    let why = r.refused.clone().expect("refused");
    assert!(
        why.contains("StorageReady") && why.contains("eks-node-monitoring-agent"),
        "{why}"
    );
    assert!(
        s.requests().iter().all(|q| q.method == "GET"),
        "nothing written: {:#?}",
        s.requests()
    );
    // Under node-doctor's own names the same node is fine.
    let mut own = Reporter::new(
        settings(),
        api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
        Arc::new(Stats::default()),
    );
    own.tick(t(0), Instant::now(), Some(&snap)).await;
    assert!(own.refused.is_none());
    assert_eq!(
        s.condition(super::tests::NODE, "NodeDoctorHardwareFailure")
            .unwrap()["status"],
        "True"
    );
    // A node where node-doctor itself wrote the NMA types before: taken over, not refused.
    let s = standin_with_rbac();
    s.add_node(super::tests::NODE, vec![kubelet_ready()]);
    for _ in 0..2 {
        let mut r = Reporter::new(
            Settings {
                naming: Naming::Nma,
                ..settings()
            },
            api_for(&s, dir.path(), kube_standin::DEFAULT_TOKEN).await,
            Arc::new(Stats::default()),
        );
        r.tick(t(0), Instant::now(), Some(&snap)).await;
        assert!(r.refused.is_none(), "{:?}", r.refused);
    }
    assert_eq!(
        s.condition(super::tests::NODE, "KernelReady").unwrap()["status"],
        "False"
    );
    assert!(s.schema_errors().is_empty());
}

#[test]
fn the_nma_process_is_known_by_its_command_name_or_binary() {
    use super::nma::is_nma;
    assert!(is_nma("eks-node-monito", None));
    assert!(is_nma(
        "x",
        Some("/usr/local/bin/eks-node-monitoring-agent")
    ));
    assert!(!is_nma("node-doctor", Some("/node-doctor")));
    assert!(!is_nma("eks-node-monitor", None));
    let dir = tempfile::tempdir().unwrap();
    let host = collectors::HostPaths::new(dir.path());
    std::fs::create_dir_all(dir.path().join("proc/1")).unwrap();
    std::fs::write(dir.path().join("proc/1/comm"), "systemd\n").unwrap();
    assert_eq!(super::nma::running(&host), None);
    std::fs::create_dir_all(dir.path().join("proc/4242")).unwrap();
    std::fs::write(dir.path().join("proc/4242/comm"), "eks-node-monito\n").unwrap();
    assert_eq!(super::nma::running(&host), Some(4242));
}
