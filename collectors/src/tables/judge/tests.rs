use super::*;
use crate::tables::sample::{DaemonFds, FileHandles, Holder, Holders, LineLog, Tcp};

fn files(allocated: u64, max: u64) -> Sample {
    Sample {
        files: Some(FileHandles {
            allocated,
            max,
            nr_open: Some(1 << 20),
        }),
        page_size_bytes: 4096,
        lookback_seconds: 3600,
        ..Sample::default()
    }
}

fn neigh(family: Family, entries: u64, fulls: Option<u64>) -> NeighTable {
    NeighTable {
        family,
        entries,
        gc_thresh: Some([128, 512, 1024]),
        table_fulls_increase: fulls,
        forced_gc_increase: Some(3),
        table_fulls_total: Some(10),
        forced_gc_total: Some(40),
        interval_seconds: Some(15.0),
    }
}

fn tcp(mem: u64, orphans: u64) -> Tcp {
    Tcp {
        mem_pages: Some(mem),
        tcp_mem: Some([288459, 384612, 576918]),
        orphans: Some(orphans),
        max_orphans: Some(131072),
        inuse: Some(100),
        inuse6: Some(2),
        time_wait: Some(5),
        alloc: Some(120),
    }
}

fn ids(d: &[Draft]) -> Vec<(&str, Severity, &str)> {
    d.iter()
        .map(|d| (d.id.as_str(), d.severity, d.subject.as_str()))
        .collect()
}

#[test]
fn file_handles_by_level_with_a_clear_bar() {
    let t = Thresholds::default();
    assert!(judge(&files(790, 1000), &t).is_empty());
    assert_eq!(
        ids(&judge(&files(850, 1000), &t)),
        [(FILE_HANDLES, Severity::Warning, "file-max")]
    );
    assert_eq!(
        ids(&judge(&files(950, 1000), &t)),
        [(FILE_HANDLES, Severity::Critical, "file-max")]
    );
    // Raised before: held down to the clear bar (75 %), dropped below it.
    let mut s = files(770, 1000);
    s.raised_before
        .insert((FILE_HANDLES.into(), "file-max".into()));
    assert_eq!(judge(&s, &t).len(), 1);
    s.files.as_mut().unwrap().allocated = 740;
    assert!(judge(&s, &t).is_empty());
    // An empty or absurd file-max judges nothing.
    assert!(judge(&files(5, 0), &t).is_empty());
}

#[test]
fn file_handles_names_the_top_holders() {
    let mut s = files(950, 1000);
    s.holders = Some(Holders {
        top: vec![
            Holder {
                pid: 42,
                comm: "leaky".into(),
                fds: 800,
                at_least: false,
            },
            Holder {
                pid: 7,
                comm: "sshd".into(),
                fds: 12,
                at_least: true,
            },
        ],
        scanned: 30,
        partial: false,
    });
    let d = &judge(&s, &Thresholds::default())[0];
    assert_eq!(
        d.evidence["top_holders"].as_str(),
        Some("leaky (pid 42) 800, sshd (pid 7) 12+")
    );
    assert_eq!(d.evidence["top_holders_fds"].as_f64(), Some(812.0));
    assert_eq!(
        d.vars["suggested_file_max"],
        crate::rules::Var::One(2048u64.into())
    );
}

#[test]
fn daemon_near_its_limit() {
    let t = Thresholds::default();
    let mut s = files(100, 1_000_000);
    let daemon = |open| DaemonFds {
        name: "containerd".into(),
        pid: 900,
        open,
        table_size: Some(1024),
        soft_limit: Some(1024),
        hard_limit: Some(524288),
    };
    s.daemons = vec![daemon(Some(1000))];
    let d = judge(&s, &t);
    assert_eq!(
        ids(&d),
        [(DAEMON_FILE_LIMIT, Severity::Critical, "containerd")]
    );
    assert_eq!(d[0].evidence["open_fds"].as_f64(), Some(1000.0));
    assert_eq!(
        d[0].vars["suggested_limit"],
        crate::rules::Var::One((1u64 << 20).into())
    );
    assert_eq!(
        d[0].vars["unit"],
        crate::rules::Var::One("containerd".into())
    );
    s.daemons = vec![daemon(Some(850))];
    assert_eq!(judge(&s, &t)[0].severity, Severity::Warning);
    // Not counted (its table is far below the limit), or unlimited: nothing.
    s.daemons = vec![daemon(None)];
    assert!(judge(&s, &t).is_empty());
}

#[test]
fn neighbour_table_levels_and_refusals() {
    let t = Thresholds::default();
    let s = |n| Sample {
        neigh: vec![n],
        ..Sample::default()
    };
    assert!(judge(&s(neigh(Family::Ipv4, 800, Some(0))), &t).is_empty());
    let d = judge(&s(neigh(Family::Ipv4, 950, Some(0))), &t);
    assert_eq!(ids(&d), [(NEIGHBOUR_TABLE, Severity::Warning, "ipv4")]);
    assert!(d[0].is("above_thresh2"));
    // At gc_thresh3: critical, and suggested thresholds above the entries seen.
    let d = judge(&s(neigh(Family::Ipv4, 1024, Some(0))), &t);
    assert_eq!(d[0].severity, Severity::Critical);
    use crate::rules::Var::One;
    assert_eq!(d[0].vars["suggested_thresh3"], One(2048u64.into()));
    assert_eq!(d[0].vars["suggested_thresh2"], One(1024u64.into()));
    assert_eq!(d[0].vars["suggested_thresh1"], One(256u64.into()));
    // Refusals since the previous sample: critical whatever the fill.
    let d = judge(&s(neigh(Family::Ipv6, 300, Some(4))), &t);
    assert_eq!(ids(&d), [(NEIGHBOUR_TABLE, Severity::Critical, "ipv6")]);
    assert!(d[0].is("refusing") && d[0].is("ipv6"));
    // No thresholds (not the host's namespace): nothing judged on fill.
    let mut n = neigh(Family::Ipv4, 5000, Some(0));
    n.gc_thresh = None;
    assert!(judge(&s(n), &t).is_empty());
}

#[test]
fn tcp_memory_and_orphans() {
    let t = Thresholds::default();
    let s = |tcp| Sample {
        tcp: Some(tcp),
        page_size_bytes: 4096,
        ..Sample::default()
    };
    assert!(judge(&s(tcp(102, 0)), &t).is_empty());
    let d = judge(&s(tcp(400_000, 0)), &t);
    assert_eq!(ids(&d), [(TCP_MEMORY, Severity::Warning, "tcp_mem")]);
    let d = judge(&s(tcp(600_000, 0)), &t);
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(d[0].is("above_max"));
    assert_eq!(
        d[0].evidence["mem_bytes"].as_f64(),
        Some(600_000.0 * 4096.0)
    );
    // Orphans: a quarter of the limit warns, half is critical.
    let d = judge(&s(tcp(0, 40_000)), &t);
    assert_eq!(
        ids(&d),
        [(TCP_ORPHANS, Severity::Warning, "tcp_max_orphans")]
    );
    let d = judge(&s(tcp(0, 70_000)), &t);
    assert_eq!(d[0].severity, Severity::Critical);
}

#[test]
fn kernel_lines_decay_unless_the_table_is_full_now() {
    let t = Thresholds::default();
    let log = |line, ago| LineLog {
        line,
        count: 3,
        last_seconds_ago: Some(ago),
    };
    let mut s = Sample {
        neigh: vec![neigh(Family::Ipv4, 1024, Some(0))],
        tcp: Some(tcp(100, 0)),
        lines: vec![
            log(Line::ArpOverflow, 2000),
            log(Line::TcpOutOfMemory, 60),
            log(Line::TcpTooManyOrphans, 2000),
        ],
        lookback_seconds: 3600,
        ..Sample::default()
    };
    let d: Vec<_> = judge(&s, &t)
        .into_iter()
        .filter(|d| d.id == KERNEL_TABLE_FULL)
        .collect();
    assert_eq!(
        ids(&d),
        [
            (KERNEL_TABLE_FULL, Severity::Critical, "neighbour-ipv4"),
            (KERNEL_TABLE_FULL, Severity::Warning, "tcp-memory"),
            (KERNEL_TABLE_FULL, Severity::Info, "tcp-orphans"),
        ]
    );
    assert!(d[0].is("neighbour_overflow") && d[0].is("ongoing"));
    assert!(d[1].is("tcp_out_of_memory") && d[1].is("recent"));
    s.neigh[0].entries = 10;
    let d = judge(&s, &t);
    assert_eq!(d[0].severity, Severity::Info);
}

#[test]
fn every_draft_renders_in_the_builtin_words() {
    // The expected words are copied from collectors/rules/tables.toml (the rule file is the
    // independent read): a draft whose id has no rule, a placeholder left unfilled or the
    // wrong branch of a title would each change one of these strings.
    let rules = crate::rules::RuleBook::builtin();
    let mut s = files(950, 1000);
    s.neigh = vec![neigh(Family::Ipv4, 1024, Some(2))];
    s.tcp = Some(tcp(600_000, 70_000));
    s.lines = vec![LineLog {
        line: Line::NeighbourOverflow,
        count: 1,
        last_seconds_ago: None,
    }];
    let mut got: Vec<(String, String, String, String, String)> = judge(&s, &Thresholds::default())
        .into_iter()
        .map(|d| {
            let f = rules.render(d, "node-1");
            (f.id, f.title.en, f.title.zh, f.summary.en, f.summary.zh)
        })
        .collect();
    got.sort();
    let titles: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|(id, en, zh, _, _)| (id.as_str(), en.as_str(), zh.as_str()))
        .collect();
    assert_eq!(
        titles,
        [
            (
                "tables.file_handles",
                "The kernel's open-file table is nearly full",
                "内核文件句柄表即将耗尽"
            ),
            (
                "tables.kernel_table_full",
                "The kernel's neighbour table overflowed",
                "内核邻居表溢出"
            ),
            (
                "tables.neighbour_table",
                "The ipv4 neighbour table is nearly full",
                "ipv4 邻居表即将占满"
            ),
            (
                "tables.tcp_memory",
                "TCP sockets are short of memory",
                "TCP 套接字内存不足"
            ),
            (
                "tables.tcp_orphans",
                "Many orphaned TCP sockets",
                "孤儿 TCP 套接字过多"
            ),
        ]
    );
    // The summaries carry the staged figures in both languages.
    let (_, _, _, en, zh) = &got[0];
    assert!(
        en.starts_with("950 file handles are allocated of fs.file-max 1000 (95.0%, threshold 80%)"),
        "{en}"
    );
    assert!(
        zh.starts_with("已分配 950 个文件句柄，fs.file-max 为 1000（95.0%，阈值 80%）"),
        "{zh}"
    );
    let (_, _, _, en, zh) = &got[4];
    assert!(
        en.starts_with("70000 TCP sockets are orphaned (closed by their process, still sending) against tcp_max_orphans 131072"),
        "{en}"
    );
    assert!(zh.starts_with("当前有 70000 个孤儿 TCP 套接字"), "{zh}");
    for (id, en, zh, sen, szh) in &got {
        for text in [en, zh, sen, szh] {
            assert!(
                !text.contains('{'),
                "{id}: unfilled placeholder in {text:?}"
            );
        }
    }
}
