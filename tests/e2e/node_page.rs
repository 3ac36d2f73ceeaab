//! Issue 49: the node page (`GET /`, `?lang=zh`) and a rule page opened in a real browser
//! (headless chromium, [`crate::browser`]) from a running agent on a staged node with
//! findings, at a laptop's and a phone's width: every finding is on the page, the figures
//! are drawn, the Chinese text is drawn with a font that has its glyphs, nothing is logged to
//! the console, no request leaves the agent, nothing scrolls sideways, and the overview is on
//! the first screen. Screenshots stay in `target/browser-screenshots/`. The checker itself is
//! shown failing on broken copies of the page.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::browser::{self, check_node_page, check_page, Browser, Expect, DESKTOP, PHONE};
use crate::support::{shipped_bin, FakeRoot, Server};

/// A node in trouble: memory nearly gone, load 5 on 2 CPUs, a kubelet root, an OOM kill and a filesystem
/// remounted read-only in the kernel log, the conntrack table 95% full.
fn staged() -> FakeRoot {
    let root = FakeRoot::quiet();
    root.write(
        "/proc/meminfo",
        "MemTotal:       24684084 kB\nMemFree:          100000 kB\nMemAvailable:     200000 kB\n",
    );
    root.write("/proc/loadavg", "5.00 4.00 3.00 3/94 21971\n");
    // A kubelet root (on the temp dir's filesystem): the disk collector keeps its history.
    root.write(
        "/var/lib/kubelet/config.yaml",
        "kind: KubeletConfiguration\n",
    );
    root.write(
        "/proc/diskstats",
        " 253       0 vda 1000 0 20000 500 2000 0 40000 900 0 1200 1400 0 0 0 0 0 0\n",
    );
    root.write(
        "/dev/kmsg",
        "\
2,11,86300000100,-;EXT4-fs (sda1): Remounting filesystem read-only
3,12,86350000000,-;Out of memory: Killed process 4211 (java) total-vm:812kB, anon-rss:401kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:40kB oom_score_adj:999
3,13,86350000100,-;Memory cgroup out of memory: Killed process 4300 (python3) total-vm:9812kB, anon-rss:8401kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:40kB oom_score_adj:999
",
    );
    root.write("/proc/sys/net/netfilter/nf_conntrack_max", "1000\n");
    root.write("/proc/sys/net/netfilter/nf_conntrack_count", "950\n");
    root.write("/proc/sys/net/netfilter/nf_conntrack_buckets", "256\n");
    root.write(
        "/proc/1/net/stat/nf_conntrack",
        "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n\
000003b6  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000000\n",
    );
    root
}

/// `/findings?lang=..`'s finding ids, in order.
fn ids(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["id"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The kinds of `/history`'s series with two points or more.
fn drawn_kinds(h: &Value) -> Vec<String> {
    h["series"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["points"].as_array().is_some_and(|p| p.len() >= 2))
                .map(|s| s["kind"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the agent shows findings and has the load and disk figures to draw.
fn wait_for_figures(s: &Server) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let h = s.get("/history").json();
        let kinds = drawn_kinds(&h);
        let findings = ids(&s.get("/findings").json());
        if findings.len() >= 3
            && ["load.per_cpu", "disk.space"]
                .iter()
                .all(|k| kinds.iter().any(|x| x == k))
        {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "no figures: {kinds:?}, findings {findings:?}\n{}",
            s.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `/history` counts its points, and no ring holds more than `ring_points`.
fn assert_history_is_bounded(h: &Value) {
    let series = h["series"].as_array().expect("series");
    let lens: Vec<(String, usize)> = series
        .iter()
        .map(|s| {
            let kind = s["kind"].as_str().unwrap_or_default().to_string();
            (kind, s["points"].as_array().map_or(0, Vec::len))
        })
        .collect();
    assert_eq!(
        h["points"].as_u64(),
        Some(lens.iter().map(|l| l.1).sum::<usize>() as u64),
        "{h:#}"
    );
    let ring = h["ring_points"].as_u64().expect("ring_points") as usize;
    for (kind, n) in &lens {
        assert!(
            kind.starts_with("disk.") || *n <= ring,
            "{kind}: {n} points"
        );
    }
}

#[test]
fn the_node_page_in_a_real_browser_shows_every_finding_and_figure_without_sideways_scroll() {
    let name =
        "the_node_page_in_a_real_browser_shows_every_finding_and_figure_without_sideways_scroll";
    let mut b = match Browser::launch() {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!("SKIP {name}: {why}");
            return;
        }
    };
    let root = staged();
    let s = Server::start_bin(
        &shipped_bin(),
        root.root(),
        &["--interval", "1s", "--collector-timeout", "10s"],
    );
    let history = wait_for_figures(&s);
    assert_history_is_bounded(&history);
    let origin = format!("http://{}", s.addr);
    let dir = browser::artefacts();
    let mut problems = Vec::new();
    for (path, lang, cjk) in [("/", "en", None), ("/?lang=zh", "zh", Some("发现的问题"))] {
        for size in [DESKTOP, PHONE] {
            let before = ids(&s.get(&format!("/findings?lang={lang}")).json());
            let shot = dir.join(format!("node-{lang}-{}.png", size.0));
            let f = b
                .open(&format!("{origin}{path}"), size, Some(&shot))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            // The findings listed both before and after the page was read: one of the real
            // machine's own (its disk's fill) may come or go meanwhile.
            let after = ids(&s.get(&format!("/findings?lang={lang}")).json());
            let want = Expect {
                findings: before.into_iter().filter(|id| after.contains(id)).collect(),
                figures: drawn_kinds(&history),
                cjk: cjk.map(String::from),
                origin: origin.clone(),
            };
            assert!(want.findings.len() >= 3, "{want:?}");
            assert_eq!(f.lang, lang);
            assert_eq!(f.title, "node-doctor: e2e-node");
            let figures = if lang == "zh" { "图表" } else { "Figures" };
            assert!(
                f.headings.iter().any(|h| h.starts_with(figures)),
                "{:?}",
                f.headings
            );
            problems.extend(check_node_page(&f, &want));
            // A minute of history: no fit yet, so no dots and no crossing; a filesystem's
            // figure names its mount point.
            for svg in &f.svgs {
                assert!(svg.dots == 0 && svg.crossing.is_none(), "{svg:?}");
                assert!(
                    !svg.kind.starts_with("disk.") || svg.subject.starts_with('/'),
                    "{svg:?}"
                );
            }
        }
    }
    drop(b);
    for lang in ["en", "zh"] {
        let url = format!("{origin}/rules/memory.exhaustion?lang={lang}");
        let stem = format!("rule-{lang}");
        let pages = browser::render(&url, &[DESKTOP, PHONE], Some((&dir, &stem)))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        for f in pages {
            assert!(f.title.contains("memory.exhaustion"), "{}", f.title);
            problems.extend(check_page(&f, &origin));
            if lang == "zh" {
                problems.extend(browser::check_cjk(&f, "内存"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The checker on broken copies of a real page (saved to files): a finding's card removed,
/// a figure's path emptied, the Chinese text gone: each is named. The page as served
/// passes the same checks, so the failures are the breakage's.
#[test]
fn the_page_checker_fails_on_a_missing_finding_plot_or_chinese_text() {
    let name = "the_page_checker_fails_on_a_missing_finding_plot_or_chinese_text";
    let mut b = match Browser::launch() {
        Ok(b) => b,
        Err(why) => {
            collectors::skip!("SKIP {name}: {why}");
            return;
        }
    };
    let root = staged();
    let s = Server::start_bin(
        &shipped_bin(),
        root.root(),
        &["--interval", "1s", "--collector-timeout", "10s"],
    );
    let history = wait_for_figures(&s);
    let page = s.get("/?lang=zh").text();
    let want = Expect {
        findings: ids(&s.get("/findings?lang=zh").json()),
        figures: drawn_kinds(&history),
        cjk: Some("发现的问题".into()),
        origin: "file://".into(),
    };
    let dir = tempfile::tempdir().unwrap();
    let mut check = |label: &str, html: &str| {
        let path = dir.path().join(format!("{label}.html"));
        std::fs::write(&path, html).unwrap();
        let f = b.open(path.to_str().unwrap(), DESKTOP, None).unwrap();
        check_node_page(&f, &want)
    };
    assert_eq!(check("served", &page), Vec::<String>::new());

    // A finding's card gone (its data-finding attribute renamed).
    let first = &want.findings[0];
    let attr = format!("data-finding=\"{first}\"");
    assert!(page.contains(&attr));
    let no_finding = page.replacen(&attr, "data-finding=\"removed\"", 1);
    let bad = check("no-finding", &no_finding);
    assert!(
        bad.iter()
            .any(|p| p.contains(&format!("finding {first} is not on the page"))),
        "{bad:#?}"
    );

    // Every series path emptied.
    let no_plot = page.replace(
        "class=\"series\" d=\"M",
        "class=\"series\" d=\"\" data-was=\"",
    );
    let bad = check("no-plot", &no_plot);
    assert!(
        bad.iter()
            .any(|p| p.contains("no drawn figure load.per_cpu")),
        "{bad:#?}"
    );

    // The Chinese text gone (every CJK character taken out).
    let no_cjk: String = page
        .chars()
        .filter(|c| !('\u{3400}'..='\u{9fff}').contains(c))
        .collect();
    let bad = check("no-chinese", &no_cjk);
    assert!(
        bad.iter()
            .any(|p| p.contains("the Chinese text \"发现的问题\" is not on the page")),
        "{bad:#?}"
    );
    assert!(
        bad.iter().any(|p| p.contains("no Chinese text rendered")),
        "{bad:#?}"
    );

    // A line that cannot wrap, and a request to another origin (loopback, where nothing
    // listens on the discard port).
    let wide = page.replacen(
        "</h1>",
        &format!(
            "<span style=\"white-space:nowrap\">{}</span></h1><img src=\"http://127.0.0.2:9/x.png\" alt=\"\">",
            "x".repeat(400)
        ),
        1,
    );
    let bad = check("wide", &wide);
    assert!(
        bad.iter().any(|p| p.contains("scrolls sideways")),
        "{bad:#?}"
    );
    assert!(
        bad.iter()
            .any(|p| p.contains("a request left the agent: http://127.0.0.2:9/x.png")),
        "{bad:#?}"
    );
}
