//! The conntrack rules on typed samples, rendered in the built-in words.

use super::*;
use crate::conntrack::kube_proxy::Settings;
use crate::conntrack::sample::TableLog;
use crate::finding::Finding;
use crate::proc::nf_conntrack_stat::NfConntrackStat;

/// The drafts, in the built-in words.
fn judge(s: &Sample, d: Option<&Deltas>, streak: u32, t: &Thresholds, node: &str) -> Vec<Finding> {
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
                ("chainlength", 0),
                ("insert_failed", 100),
                ("drop", 104),
                ("early_drop", 0),
            ],
        ),
        max: Some(max),
        buckets: Some(max),
        mem_total_bytes: Some(8 << 30),
        nodelocal_dns: Some(false),
        table_log: Some(TableLog::default()),
        ..Sample::default()
    }
}

fn find<'a>(f: &'a [Finding], id: &str) -> Option<&'a Finding> {
    f.iter().find(|f| f.id == id && f.subject.is_empty())
}

fn steps(f: &Finding) -> String {
    f.remediation
        .steps
        .iter()
        .map(|s| s.en.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn deltas_and_rates() {
    let a = stat(5, &[("insert_failed", 10), ("drop", 1), ("clashres", 3)]);
    let b = stat(9, &[("insert_failed", 40), ("drop", 31), ("clashres", 13)]);
    let d = Deltas::between(&a, &b, 15.0);
    assert_eq!(d.insert_failed, 30);
    assert_eq!(d.drop, 30);
    assert_eq!(d.clash_resolve, Some(10));
    assert_eq!(d.search_restart, None);
    assert!((d.rate(d.insert_failed) - 2.0).abs() < 1e-9);
    assert!(d.has_races(RaceAccounting::ClashColumn));
    // A counter that went backwards (module reloaded) is not a race.
    let d = Deltas::between(&b, &a, 15.0);
    assert!(!d.has_races(RaceAccounting::ClashColumn));
    assert_eq!(Deltas::default().rate(5), 0.0);
}

/// Each kernel family counts a race and a full table in its own columns (kernel source,
/// `__nf_conntrack_confirm` / `nf_ct_resolve_clash`; the full table measured on 6.18).
#[test]
fn races_and_untracked_drops_by_kernel_family() {
    let with_clashres = stat(1, &[("clashres", 0), ("insert_failed", 0)]);
    let without = stat(1, &[("searched", 0), ("insert_failed", 0)]);
    assert_eq!(
        RaceAccounting::of(&with_clashres, Some("3.10.0")),
        RaceAccounting::ClashColumn
    );
    assert_eq!(
        RaceAccounting::of(&without, Some("4.19.91-27.al7.x86_64")),
        RaceAccounting::ClashInInsertFailed
    );
    assert_eq!(
        RaceAccounting::of(&without, Some("4.10.0")),
        RaceAccounting::ClashInInsertFailed
    );
    assert_eq!(
        RaceAccounting::of(&without, Some("3.10.0-1160.el7.x86_64")),
        RaceAccounting::NoClashResolution
    );
    assert_eq!(
        RaceAccounting::of(&without, None),
        RaceAccounting::NoClashResolution
    );
    let d = |insert_failed, drop, chain| Deltas {
        elapsed_seconds: 15.0,
        insert_failed,
        drop,
        chain_too_long: chain,
        ..Deltas::default()
    };
    use RaceAccounting::*;
    // 6.18: a full table moves drop only (measured: drop +756, insert_failed +0).
    assert_eq!(d(0, 756, Some(0)).lost_races(ClashColumn), 0);
    assert_eq!(d(0, 756, Some(0)).untracked_drops(ClashColumn), 756);
    // 5.x+: an unresolved clash moves insert_failed and drop together.
    assert_eq!(d(5, 5, Some(0)).lost_races(ClashColumn), 5);
    assert_eq!(d(5, 5, Some(0)).untracked_drops(ClashColumn), 0);
    // Both at once.
    assert_eq!(d(5, 12, Some(0)).untracked_drops(ClashColumn), 7);
    // 6.x: a too-long hash chain refuses the insert (insert_failed, chainlength): not a race.
    assert_eq!(d(3, 0, Some(3)).lost_races(ClashColumn), 0);
    // 4.10..5.x: insert_failed counts resolved clashes too; only the dropped ones are lost.
    assert_eq!(d(9, 2, None).lost_races(ClashInInsertFailed), 2);
    assert_eq!(d(9, 2, None).untracked_drops(ClashInInsertFailed), 0);
    assert_eq!(d(0, 40, None).untracked_drops(ClashInInsertFailed), 40);
    // Before 4.10: every clash is dropped and counted in insert_failed only; drop is all
    // untracked packets.
    assert_eq!(d(7, 0, None).lost_races(NoClashResolution), 7);
    assert_eq!(d(7, 3, None).untracked_drops(NoClashResolution), 3);
}

#[test]
fn race_warning_then_critical_when_sustained() {
    let cfg = Thresholds::default();
    let s = sample(100, 262144);
    let d = Deltas {
        elapsed_seconds: 15.0,
        insert_failed: 30,
        drop: 30,
        clash_resolve: Some(6),
        chain_too_long: Some(0),
        ..Deltas::default()
    };
    let f = judge(&s, Some(&d), 1, &cfg, "node-1");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].id, INSERT_RACES);
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].evidence["lost_races"].as_f64(), Some(30.0));
    assert_eq!(
        f[0].evidence["insert_failed_per_second"].as_f64(),
        Some(2.0)
    );
    assert_eq!(f[0].evidence["drop_per_second"].as_f64(), Some(2.0));
    assert_eq!(f[0].evidence["insert_failed_total"].as_f64(), Some(100.0));
    assert_eq!(f[0].evidence["clash_resolve_total"].as_f64(), Some(10.0));
    assert_eq!(
        f[0].evidence["clash_resolve_per_second"].as_f64(),
        Some(0.4)
    );
    assert_eq!(f[0].evidence["kernel_release"].as_str(), Some("6.18.44"));
    assert!(!f[0].evidence.contains_key("untracked_drop_increase"));
    assert!(f[0]
        .summary
        .en
        .starts_with("30 packet(s) lost the conntrack insert race"));
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
    // Clashes the kernel resolved (clashres only) lose no packet: nothing.
    let resolved = Deltas {
        clash_resolve: Some(65),
        ..quiet
    };
    assert!(judge(&s, Some(&resolved), 0, &cfg, "node-1").is_empty());
}

#[test]
fn older_kernel_without_clashres_says_so() {
    let cfg = Thresholds::default();
    let mut s = sample(100, 65536);
    s.kernel_release = Some("3.10.0-1160.el7.x86_64".into());
    s.stat = stat(100, &[("searched", 1), ("insert_failed", 7), ("drop", 0)]);
    let d = Deltas {
        elapsed_seconds: 1.0,
        insert_failed: 7,
        ..Deltas::default()
    };
    let f = judge(&s, Some(&d), 1, &cfg, "n");
    assert_eq!(f[0].evidence["lost_races"].as_f64(), Some(7.0));
    assert_eq!(
        f[0].evidence["kernel_counts_clash_resolution"].as_str(),
        Some("no")
    );
    assert!(!f[0].evidence.contains_key("clash_resolve_total"));
}

/// The figures: a table filled for real on 6.18 (drop 651 -> 1407, early_drop
/// 39 -> 93, insert_failed 0 -> 0, entries = max) is a full table, not a race.
#[test]
fn a_full_table_is_not_a_race() {
    let cfg = Thresholds::default();
    let prev = stat(
        200,
        &[
            ("clashres", 0),
            ("chainlength", 0),
            ("insert_failed", 0),
            ("drop", 651),
            ("early_drop", 39),
        ],
    );
    let cur = stat(
        200,
        &[
            ("clashres", 0),
            ("chainlength", 0),
            ("insert_failed", 0),
            ("drop", 1407),
            ("early_drop", 93),
        ],
    );
    let d = Deltas::between(&prev, &cur, 15.0);
    let mut s = sample(200, 200);
    s.stat = cur;
    s.table_log = Some(TableLog {
        messages: 10,
        last_seconds_ago: Some(3.0),
    });
    let f = judge(&s, Some(&d), 1, &cfg, "n");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].id, TABLE_FULL);
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(
        f[0].evidence["untracked_drop_increase"].as_f64(),
        Some(756.0)
    );
    assert_eq!(f[0].evidence["early_drop_increase"].as_f64(), Some(54.0));
    assert_eq!(f[0].evidence["used_percent"].as_f64(), Some(100.0));
    let sum = &f[0].summary.en;
    assert!(
        sum.contains("200 of 200 conntrack entries in use (100.0%"),
        "{sum}"
    );
    assert!(
        sum.contains("756 packet(s) dropped since the previous sample were not insert races"),
        "{sum}"
    );
    assert!(sum.contains("54 entries were evicted"), "{sum}");
    assert!(
        sum.contains("10 \"table full\" kernel message(s), the last 3 s ago"),
        "{sum}"
    );
    assert!(!sum.contains("DNS delay"));
    assert_eq!(
        f[0].title.en,
        "conntrack table full: packets needing new connections are dropped"
    );
    // The same drops while insert_failed also rose: the races are reported for what they
    // are, the rest stays the table's.
    let d2 = Deltas {
        insert_failed: 5,
        drop: d.drop + 5,
        ..d.clone()
    };
    let f = judge(&s, Some(&d2), 1, &cfg, "n");
    let races = find(&f, INSERT_RACES).expect("races");
    assert_eq!(races.evidence["lost_races"].as_f64(), Some(5.0));
    assert_eq!(
        races.evidence["untracked_drop_increase"].as_f64(),
        Some(756.0)
    );
    assert!(
        races
            .summary
            .en
            .contains("Another 756 dropped packet(s) were not races"),
        "{}",
        races.summary.en
    );
    assert!(steps(races).contains("a bigger conntrack table does nothing for them"));
    let table = find(&f, TABLE_FULL).expect("table");
    assert_eq!(
        table.evidence["untracked_drop_increase"].as_f64(),
        Some(756.0)
    );
}

/// Drops that are not races while the table is not full now and no message explains them:
/// a warning that says what is known, not a race.
#[test]
fn drops_without_a_full_table_warn_and_say_so() {
    let cfg = Thresholds::default();
    let s = sample(1000, 262144);
    let d = Deltas {
        elapsed_seconds: 15.0,
        drop: 9,
        chain_too_long: Some(0),
        ..Deltas::default()
    };
    let f = judge(&s, Some(&d), 0, &cfg, "n");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].id, TABLE_FULL);
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(
        f[0].title.en,
        "conntrack dropped packets it could not track"
    );
    assert!(
        f[0].summary
            .en
            .contains("filled and drained between samples"),
        "{}",
        f[0].summary.en
    );
    // Evictions in the same interval show the table hit its limit: critical.
    let d = Deltas { early_drop: 2, ..d };
    let f = judge(&s, Some(&d), 0, &cfg, "n");
    assert_eq!(f[0].severity, Severity::Critical);
    assert!(!f[0].summary.en.contains("drained"));
}

#[test]
fn table_thresholds() {
    let cfg = Thresholds::default();
    assert!(judge(&sample(196607, 262144), None, 0, &cfg, "n").is_empty()); // 74.99%
    let f = judge(&sample(196608, 262144), None, 0, &cfg, "n"); // 75%
    assert_eq!(f[0].id, TABLE_FULL);
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].title.en, "conntrack table filling up");
    let f = judge(&sample(241173, 262144), None, 0, &cfg, "n"); // 92%
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].evidence["used_percent"].as_f64(), Some(92.0));
}

/// A finding from a past kernel message decays with its age while the table is fine now:
/// critical under two minutes, a warning under ten, info after that ("last seen 58 min ago;
/// table at 10 % now"), and it says so.
#[test]
fn kernel_log_findings_decay_with_age() {
    let cfg = Thresholds::default();
    let mut s = sample(26214, 262144); // 10.0 %
    let at = |age: f64, s: &mut Sample| {
        s.table_log = Some(TableLog {
            messages: 3,
            last_seconds_ago: Some(age),
        });
        judge(s, None, 0, &cfg, "n")
    };
    let f = at(30.0, &mut s);
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].title.en, "conntrack table was full recently");
    assert!(
        f[0].summary
            .en
            .contains("the last 30 s ago; table at 10.0% now"),
        "{}",
        f[0].summary.en
    );
    let f = at(300.0, &mut s);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].summary
            .en
            .contains("the last 5 min ago; table at 10.0% now"),
        "{}",
        f[0].summary.en
    );
    assert!(
        f[0].summary
            .en
            .contains("critical while it is under 120 s old, a warning under 10 min"),
        "{}",
        f[0].summary.en
    );
    let f = at(3480.0, &mut s);
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].summary.en.contains(
            "3 \"table full\" kernel message(s), the last 58 min ago; table at 10.0% now."
        ),
        "{}",
        f[0].summary.en
    );
    assert_eq!(
        f[0].evidence["last_table_full_seconds_ago"].as_f64(),
        Some(3480.0)
    );
    // A table still full now stays critical whatever the message's age.
    let mut full = sample(250000, 262144);
    let f = at(3480.0, &mut full);
    assert_eq!(f[0].severity, Severity::Critical);
    assert_ne!(f[0].title.en, "conntrack table was full recently");
    // No message and a quiet table: nothing.
    s.table_log = Some(TableLog::default());
    assert!(judge(&s, None, 0, &cfg, "n").is_empty());
}

/// Another namespace's table (6.17+ names it): its own subject, severity by the message's
/// age and its fill now; without a process in it, a warning while the message is recent.
#[test]
fn other_namespaces_tables_have_their_own_finding() {
    let cfg = Thresholds::default();
    let mut s = sample(1000, 262144);
    s.other_tables = vec![
        OtherTable {
            netns: Some(4026532246),
            log: TableLog {
                messages: 10,
                last_seconds_ago: Some(5.0),
            },
            pid: Some(48211),
            entries: Some(262144),
        },
        OtherTable {
            netns: Some(4026532999),
            log: TableLog {
                messages: 2,
                last_seconds_ago: Some(30.0),
            },
            pid: None,
            entries: None,
        },
    ];
    let f = judge(&s, None, 0, &cfg, "n");
    assert!(
        find(&f, TABLE_FULL).is_none(),
        "the node's own table is fine: {f:#?}"
    );
    let a = f.iter().find(|f| f.subject == "netns 4026532246").unwrap();
    assert_eq!(a.severity, Severity::Critical);
    assert_eq!(a.evidence["netns"].as_str(), Some("4026532246"));
    assert_eq!(a.evidence["used_percent"].as_f64(), Some(100.0));
    assert!(a.summary.en.starts_with("The conntrack table of network namespace 4026532246 (not the one node-doctor reads) was full; it holds 262144 of 262144 entries now"), "{}", a.summary.en);
    assert!(a
        .remediation
        .commands
        .contains(&"lsns -t net -o NS,PID,COMMAND | grep -w 4026532246".to_string()));
    assert!(a
        .remediation
        .commands
        .contains(&"nsenter -t 48211 -n conntrack -S".to_string()));
    // No process left in it, its last message 30 s old: packets were dropped seconds ago, a
    // warning (never critical: nothing in that namespace can be read or acted on).
    let gone = f.iter().find(|f| f.subject == "netns 4026532999").unwrap();
    assert_eq!(gone.severity, Severity::Warning);
    assert!(gone
        .summary
        .en
        .contains("no process is left in that namespace"));
    // The initial namespace's (an unnamed message while reading another namespace on 6.17+).
    s.other_tables = vec![OtherTable {
        netns: None,
        log: TableLog {
            messages: 1,
            last_seconds_ago: Some(200.0),
        },
        pid: Some(1),
        entries: Some(100),
    }];
    let f = judge(&s, None, 0, &cfg, "n");
    assert_eq!(f[0].subject, "initial netns");
    assert_eq!(f[0].severity, Severity::Warning);
}

fn found(max_per_core: u64, min: u64, origin: Origin) -> KubeProxy {
    KubeProxy::Found(Settings {
        pid: 2231,
        origin,
        max_per_core,
        min,
    })
}

/// Where kube-proxy runs it sets the limit at start: the advice moves to its settings.
#[test]
fn kube_proxy_owns_the_limit() {
    let cfg = Thresholds::default();
    let mut s = sample(131072, 131072);
    s.cpus = Some(2);
    // No kube-proxy: sysctl and a sysctl.d file; the kernel's documentation.
    let f = judge(&s, None, 0, &cfg, "node-1");
    let cmds = &f[0].remediation.commands;
    assert!(cmds.contains(&"sysctl -w net.netfilter.nf_conntrack_max=262144".to_string()));
    assert!(cmds
        .iter()
        .any(|c| c.contains("/etc/sysctl.d/90-node-doctor-conntrack.conf")));
    let src = f[0].remediation.source.as_ref().unwrap();
    assert_eq!(
        src.url,
        Some("https://docs.kernel.org/networking/nf_conntrack-sysctl.html")
    );
    // kubeadm's kube-proxy (config file, defaults) on 2 CPUs: it sets 131072 at start.
    s.kube_proxy = found(
        32768,
        131072,
        Origin::ConfigFile("/var/lib/kube-proxy/config.conf".into()),
    );
    let f = judge(&s, None, 0, &cfg, "node-1");
    let st = steps(&f[0]);
    assert!(
        st.contains("max(maxPerCore 32768 × 2 CPUs, min 131072) = 131072"),
        "{st}"
    );
    assert!(st.contains("set `conntrack.min: 262144` in kube-proxy's configuration file /var/lib/kube-proxy/config.conf"), "{st}");
    assert!(!st.contains("sysctl.d file, and raise"), "{st}");
    let cmds = &f[0].remediation.commands;
    assert!(
        !cmds.iter().any(|c| c.contains("/etc/sysctl.d/")),
        "{cmds:?}"
    );
    assert!(
        cmds.contains(
            &"grep -A3 conntrack: /proc/2231/root/var/lib/kube-proxy/config.conf".to_string()
        ),
        "{cmds:?}"
    );
    assert!(cmds.contains(&"kubectl -n kube-system delete pod -l k8s-app=kube-proxy --field-selector spec.nodeName=node-1".to_string()));
    assert_eq!(
        f[0].evidence["kube_proxy_sets_max"].as_f64(),
        Some(131072.0)
    );
    let src = f[0].remediation.source.as_ref().unwrap();
    assert!(src.url.unwrap().starts_with(
        "https://kubernetes.io/docs/reference/config-api/kube-proxy-config.v1alpha1/"
    ));
    // From flags: the flag to change.
    s.kube_proxy = found(32768, 131072, Origin::Flags);
    let st = steps(&judge(&s, None, 0, &cfg, "n")[0]);
    assert!(st.contains("`--conntrack-min=262144`"), "{st}");
    // Its own value already covers the recommendation: restart it, find what lowered it.
    s.kube_proxy = found(131072, 131072, Origin::Flags);
    let st = steps(&judge(&s, None, 0, &cfg, "n")[0]);
    assert!(
        st.contains("kube-proxy's own value (262144) is at least the recommended 262144"),
        "{st}"
    );
    // maxPerCore 0: it leaves the limit alone; sysctl.d is right.
    s.kube_proxy = found(0, 131072, Origin::Flags);
    let f = judge(&s, None, 0, &cfg, "n");
    assert!(steps(&f[0]).contains("leaves nf_conntrack_max to the node"));
    assert!(f[0]
        .remediation
        .commands
        .iter()
        .any(|c| c.contains("/etc/sysctl.d/")));
    // Many CPUs: the 1.36 cap.
    s.cpus = Some(64);
    s.kube_proxy = found(32768, 131072, Origin::Flags);
    assert!(steps(&judge(&s, None, 0, &cfg, "n")[0]).contains("cap maxPerCore × CPUs at 1048576"));
    // Settings unreadable: say so, and point at its configuration anyway.
    s.kube_proxy = KubeProxy::Unreadable {
        pid: 2231,
        config: "/var/lib/kube-proxy/config.conf".into(),
        reason: "permission denied".into(),
    };
    let st = steps(&judge(&s, None, 0, &cfg, "n")[0]);
    assert!(
        st.contains("its conntrack settings could not be read (permission denied)"),
        "{st}"
    );
}

#[test]
fn unnamed_messages_belong_to_the_initial_namespace_from_6_17() {
    assert!(unnamed_message_is_ours(Some("6.18.44"), true));
    assert!(!unnamed_message_is_ours(Some("6.18.44"), false));
    assert!(unnamed_message_is_ours(Some("6.16.2"), false));
    assert!(unnamed_message_is_ours(Some("5.15.0-91-generic"), false));
    assert!(unnamed_message_is_ours(None, false));
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

/// Another namespace with no process left in it: the last message's age alone decides, a
/// warning up to `log_warning_seconds` (600 s) and info after, never critical; the node's own
/// table with a message of the same age is critical (kept). The finding says how long ago and
/// how many, why it decays, and what to do when the namespace's pod is gone.
#[test]
fn a_namespace_without_processes_warns_while_recent_and_decays_to_info() {
    let cfg = Thresholds::default();
    let gone_at = |age: f64| {
        let mut s = sample(1000, 262144);
        s.other_tables = vec![OtherTable {
            netns: Some(4026532177),
            log: TableLog {
                messages: 7,
                last_seconds_ago: Some(age),
            },
            pid: None,
            entries: None,
        }];
        let f = judge(&s, None, 0, &cfg, "node-1");
        assert_eq!(f.len(), 1, "{f:#?}");
        f.into_iter().next().unwrap()
    };
    for (age, want) in [
        (4.0, Severity::Warning),
        (119.0, Severity::Warning),
        (600.0, Severity::Warning),
        (601.0, Severity::Info),
        (3000.0, Severity::Info),
    ] {
        let f = gone_at(age);
        assert_eq!(f.severity, want, "{age} s: {f:#?}");
        assert_eq!(f.subject, "netns 4026532177");
        assert_eq!(f.evidence["table_full_messages"].as_f64(), Some(7.0));
        assert_eq!(
            f.evidence["last_table_full_seconds_ago"].as_f64(),
            Some(age)
        );
        assert!(!f.evidence.contains_key("netns_pid"), "{f:#?}");
        assert!(f.conditions.contains("netns_gone"));
        assert_eq!(
            f.title.en,
            "conntrack table of another network namespace was full"
        );
    }
    let fresh = gone_at(4.0);
    assert_eq!(
        fresh.summary.en,
        "The conntrack table of network namespace 4026532177 (not the one node-doctor reads) \
         was full; no process is left in that namespace (its pod is gone); 7 \"table full\" \
         kernel message(s), the last 4 s ago. That namespace dropped packets then; with nothing \
         left in it to read, the finding is a warning until it has been quiet for 10 min, then \
         info until the message leaves the kernel-log window."
    );
    let old = gone_at(900.0);
    assert!(
        old.summary
            .en
            .contains("7 \"table full\" kernel message(s), the last 15 min ago."),
        "{}",
        old.summary.en
    );
    for f in [&fresh, &old] {
        let steps: Vec<&str> = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
        assert!(
            steps[0].starts_with("No process is left in that namespace: the pod that owned it was deleted or its sandbox recreated"),
            "{steps:#?}"
        );
        assert!(!steps
            .iter()
            .any(|s| s.contains("the commands list its processes")));
        let cmds = &f.remediation.commands;
        assert!(cmds.contains(&"kubectl get pods -A -o wide --sort-by=.metadata.creationTimestamp --field-selector spec.nodeName=node-1".to_string()), "{cmds:#?}");
        assert!(
            !cmds
                .iter()
                .any(|c| c.starts_with("lsns") || c.starts_with("nsenter")),
            "{cmds:#?}"
        );
    }
    // The node's own table, its last message as fresh: critical, as before.
    let mut own = sample(1000, 262144);
    own.table_log = Some(TableLog {
        messages: 7,
        last_seconds_ago: Some(4.0),
    });
    let f = judge(&own, None, 0, &cfg, "node-1");
    assert_eq!(f[0].severity, Severity::Critical);
    assert!(f[0].subject.is_empty());
}
