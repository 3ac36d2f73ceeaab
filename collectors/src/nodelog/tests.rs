//! The reader of every source together: the window, the program filter, the de-duplication
//! across sources, the incidents' bounds.

use super::*;
use crate::nodelog::patterns::Detail;

const NOW: i64 = 1_795_406_700;

fn host_with(messages: &str) -> (tempfile::TempDir, HostPaths) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("var/log")).unwrap();
    std::fs::write(dir.path().join("var/log/messages"), messages).unwrap();
    let host = HostPaths::new(dir.path());
    (dir, host)
}

#[test]
fn keeps_the_programs_asked_for_inside_the_window() {
    // No etc/localtime: UTC. NOW is 2026-11-23T04:05:00Z.
    let (_d, host) = host_with(
        "Nov 23 04:04:00 n kubelet[1]: recent\n\
         Nov 23 02:00:00 n kubelet[1]: two hours ago\n\
         Nov 23 04:04:01 n sshd[2]: other program\n\
         Nov 23 04:04:02 n kubeletx[3]: not kubelet\n\
         garbage kubelet line\n\
         Nov 23 04:04:03 n dockerd[4]: recent too\n",
    );
    let mut log = NodeLog::new(host, NodeLogConfig::default());
    let (records, report) = log.read_new(NOW);
    let msgs: Vec<&str> = records.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(msgs, ["recent", "recent too"]);
    assert_eq!(report.outside_window, 1);
    assert_eq!(report.unparsed, 1);
    assert_eq!(report.records_read[&SourceKind::Syslog], 6);
    assert_eq!(report.zone, "UTC");
    assert_eq!(records[0].time, NOW - 60);
    assert_eq!(records[0].file, "/var/log/messages");
    // Nothing new: nothing read again.
    let (records, _) = log.read_new(NOW + 15);
    assert!(records.is_empty());
}

#[test]
fn the_same_line_from_two_sources_is_kept_once() {
    let mut seen = Seen::default();
    let mut take = |t, ident, m| seen.insert(Seen::key(t, ident, m), t);
    assert!(take(100, "kubelet", "PLEG is not healthy"));
    assert!(!take(100, "kubelet", "PLEG is not healthy\n"));
    assert!(take(101, "kubelet", "PLEG is not healthy"));
    assert!(take(100, "dockerd", "PLEG is not healthy"));
    seen.prune(101);
    assert!(seen.insert(Seen::key(100, "kubelet", "PLEG is not healthy"), 100));
}

fn record(time: i64) -> LogRecord {
    LogRecord {
        time,
        source: SourceKind::Syslog,
        file: "/var/log/messages".into(),
        ident: "kubelet".into(),
        pid: None,
        message: format!("line at {time}"),
        boot_id: None,
    }
}

#[test]
fn incidents_count_keep_the_latest_and_stay_bounded() {
    let mut inc = Incidents::new();
    let e = |subject: &str| Event {
        kind: EventKind::PullNotFound,
        subject: subject.into(),
        detail: Detail::default(),
    };
    inc.add(&record(NOW - 50), e("a:1"));
    inc.add(&record(NOW - 10), e("a:1"));
    // An older line read later (another source) does not replace the latest.
    inc.add(&record(NOW - 30), e("a:1"));
    let l = inc.list();
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].count, l[0].first_seen, l[0].last_seen),
        (3, NOW - 50, NOW - 10)
    );
    assert_eq!(l[0].example, format!("line at {}", NOW - 10));
    for n in 0..(MAX_INCIDENTS + 10) {
        inc.add(&record(NOW - 1000 + n as i64), e(&format!("img:{n}")));
    }
    inc.prune(NOW - 3600);
    assert_eq!(inc.list().len(), MAX_INCIDENTS);
    inc.prune(NOW);
    assert!(inc.list().is_empty());
}

#[test]
fn metrics_name_the_collector_and_the_sources() {
    let (_d, host) = host_with("Nov 23 04:04:00 n kubelet[1]: x509: certificate signed by unknown authority image=\"r.example.com/a:1\"\n");
    let mut w = NodeLogWatcher::new(host, NodeLogConfig::default());
    let s = w.sample(NOW);
    let m = w.metrics("runtime", &s);
    let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
    assert!(
        names.contains(&"node_doctor_runtime_node_log_bytes_read"),
        "{names:?}"
    );
    assert!(names.contains(&"node_doctor_runtime_node_log_behind"));
    assert!(names.contains(&"node_doctor_runtime_node_log_matches_total"));
}

#[test]
fn a_small_budget_reads_the_rest_next_cycle() {
    let mut text = String::new();
    for i in 0..100 {
        text += &format!("Nov 23 04:04:{:02} n kubelet[1]: line {i}\n", i % 60);
    }
    let (_d, host) = host_with(&text);
    let config = NodeLogConfig {
        max_bytes_per_cycle: 1000,
        ..NodeLogConfig::default()
    };
    let mut log = NodeLog::new(host, config);
    let mut total = 0;
    let mut cycles = 0;
    loop {
        let (records, report) = log.read_new(NOW);
        total += records.len();
        cycles += 1;
        assert!(report.bytes_read[&SourceKind::Syslog] <= 1000);
        if !report.behind {
            break;
        }
    }
    // Lines of the same second and text would be one: each line's text differs.
    assert_eq!(total, 100);
    assert!(cycles > 3, "{cycles}");
}
