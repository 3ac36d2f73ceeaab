//! One [`Figure`] as inline SVG for the page: no script, no external asset, a fixed
//! `viewBox` that the page scales to its width. The readings are a line (and dots, where a
//! fit rests on them); the fitted use a dashed line from the first reading to where it meets
//! the threshold; the threshold a red line; the crossing a ring with its time.
//!
//! Every element a test looks for has a class (`series`, `pt`, `fit`, `threshold`,
//! `crossing`) and the crossing its time in `data-t`: the geometry is [`Scale`]'s.

use std::fmt::Write;

use collectors::figure::{Figure, Unit};
use collectors::Lang;

use crate::human;
use crate::markup::escape;
use crate::view::pick;

/// The drawing's size in user units; the page scales it to its width.
pub const WIDTH: f64 = 600.0;
pub const HEIGHT: f64 = 200.0;
/// The plotting area's margins: left for the value labels, bottom for the times.
const LEFT: f64 = 90.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 28.0;
/// A crossing further ahead than this is not drawn (the axis would squeeze the history).
const MAX_AHEAD_SECS: f64 = 86_400.0;

/// Maps times and values to the drawing's coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub t0: f64,
    pub t1: f64,
    pub v0: f64,
    pub v1: f64,
}

impl Scale {
    /// The figure's extent: its readings, the threshold and the crossing when drawn.
    pub fn of(f: &Figure) -> Option<Scale> {
        let (first, last) = (f.points.first()?.0, f.points.last()?.0);
        let t1 = drawn_crossing(f).map_or(last, |c| c.max(last));
        let mut vs: Vec<f64> = f.points.iter().map(|p| p.1).collect();
        if let Some((level, _)) = &f.threshold {
            vs.push(*level);
        }
        if let Some(line) = &f.fit {
            vs.extend([line.at(first), line.at(t1)]);
        }
        let lo = vs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let pad = if hi > lo {
            (hi - lo) * 0.05
        } else {
            lo.abs().max(1.0) * 0.1
        };
        let v0 = if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        };
        Some(Scale {
            t0: first,
            t1: if t1 > first { t1 } else { first + 1.0 },
            v0,
            v1: hi + pad,
        })
    }

    pub fn x(&self, t: f64) -> f64 {
        LEFT + (t - self.t0) / (self.t1 - self.t0) * (WIDTH - LEFT - RIGHT)
    }

    pub fn y(&self, v: f64) -> f64 {
        HEIGHT - BOTTOM - (v - self.v0) / (self.v1 - self.v0) * (HEIGHT - TOP - BOTTOM)
    }
}

/// The crossing, when it is close enough to draw.
fn drawn_crossing(f: &Figure) -> Option<f64> {
    let last = f.points.last()?.0;
    f.crossing
        .filter(|c| *c >= last && *c - last <= MAX_AHEAD_SECS)
}

/// A value in the figure's unit, as a person reads it.
pub fn fmt_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes => human::bytes(v),
        Unit::Count => format!("{}", v.round()),
        Unit::Percent => format!("{}%", human::figure(v)),
        Unit::Seconds if v < 1.0 => format!("{} ms", human::figure(v * 1000.0)),
        Unit::Seconds => format!("{} s", human::figure(v)),
        Unit::PerSecond => format!("{}/s", human::figure(v)),
        Unit::Ratio => human::figure(v),
    }
}

/// `17:30` (UTC; with seconds when the axis spans less than ten minutes).
fn clock(t: f64, seconds: bool) -> String {
    let s = t.floor() as i64;
    let (h, m, sec) = (
        s.rem_euclid(86_400) / 3600,
        s.rem_euclid(3600) / 60,
        s.rem_euclid(60),
    );
    if seconds {
        format!("{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}")
    }
}

/// The figure's title in `lang`.
pub fn title(f: &Figure, lang: Lang) -> String {
    let s = f.subject.as_str();
    match (f.kind, lang) {
        ("disk.space", Lang::En) => format!("Space available on {s}"),
        ("disk.space", Lang::Zh) => format!("{s} 的可用空间"),
        ("disk.inodes", Lang::En) => format!("Free inodes on {s}"),
        ("disk.inodes", Lang::Zh) => format!("{s} 的空闲 inode"),
        ("load.per_cpu", Lang::En) => "Load average (1 min) per CPU".into(),
        ("load.per_cpu", Lang::Zh) => "每个 CPU 的 1 分钟平均负载".into(),
        ("load.iowait", Lang::En) => "CPU time waiting for I/O (iowait)".into(),
        ("load.iowait", Lang::Zh) => "CPU 等待 I/O 的时间占比（iowait）".into(),
        ("load.disk_busy", Lang::En) => format!("Busiest disk's busy share (now {s})"),
        ("load.disk_busy", Lang::Zh) => format!("最忙磁盘的繁忙占比（当前为 {s}）"),
        ("conntrack.fill", Lang::En) => "Conntrack table fill".into(),
        ("conntrack.fill", Lang::Zh) => "conntrack 表使用率".into(),
        ("conntrack.insert_failed", Lang::En) => "Conntrack insert failures".into(),
        ("conntrack.insert_failed", Lang::Zh) => "conntrack 插入失败次数".into(),
        ("dns.answer", Lang::En) => format!("DNS answer time of {s}"),
        ("dns.answer", Lang::Zh) => format!("{s} 的 DNS 应答时间"),
        (k, _) => format!("{k} {s}"),
    }
}

/// What the dashed line says, in `lang`: where it meets the threshold, or why there is none.
fn caption(f: &Figure, lang: Lang) -> Option<String> {
    let (_, threshold) = f.threshold.as_ref()?;
    let threshold = escape(threshold);
    let last = f.points.last()?.0;
    Some(match (f.fit, f.crossing) {
        (Some(_), Some(c)) => {
            let when = collectors::disk::trend::utc(c);
            let dur = human::duration(c - last, lang);
            pick(
                lang,
                format!("At the fitted rate it reaches {threshold} at {when} (in {dur})."),
                format!("按拟合的速率，将于 {when}（{dur}后）达到 {threshold}。"),
            )
        }
        (Some(_), None) => pick(
            lang,
            format!("Not filling towards {threshold}."),
            format!("没有朝 {threshold} 增长。"),
        ),
        (None, _) => pick(
            lang,
            format!("Too little history for a fit yet; the threshold is {threshold}."),
            format!("历史数据尚不足以拟合；阈值为 {threshold}。"),
        ),
    })
}

/// The `M x y L x y …` path through `points`.
fn path(s: &Scale, points: impl Iterator<Item = (f64, f64)>) -> String {
    let mut d = String::new();
    for (i, (t, v)) in points.enumerate() {
        let _ = write!(
            d,
            "{}{:.1} {:.1}",
            if i == 0 { "M" } else { " L" },
            s.x(t),
            s.y(v)
        );
    }
    d
}

/// The figure as a `<figure>` with its SVG and caption; nothing with no readings.
pub fn svg(f: &Figure, lang: Lang) -> String {
    let Some(s) = Scale::of(f) else {
        return String::new();
    };
    let title = escape(&title(f, lang));
    let mut h = String::with_capacity(2048 + f.points.len() * 40);
    let _ = write!(
        h,
        "<figure class=\"plot\"><svg class=\"plot\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{title}\" data-kind=\"{}\" data-subject=\"{}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{title}</title>",
        f.kind,
        escape(&f.subject),
    );
    axes(&mut h, f, &s);
    if let Some((level, _)) = &f.threshold {
        let y = s.y(*level);
        let _ = write!(
            h,
            "<path class=\"threshold\" d=\"M{LEFT} {y:.1} L{:.1} {y:.1}\" stroke=\"#b00020\" stroke-width=\"1.5\"/>",
            WIDTH - RIGHT
        );
    }
    let _ = write!(
        h,
        "<path class=\"series\" d=\"{}\" fill=\"none\" stroke=\"#00639b\" stroke-width=\"2\"/>",
        path(&s, f.points.iter().copied())
    );
    if let Some(line) = f.fit {
        for (t, v) in &f.points {
            let _ = write!(
                h,
                "<circle class=\"pt\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#00639b\"/>",
                s.x(*t),
                s.y(*v)
            );
        }
        let end = drawn_crossing(f).unwrap_or(s.t1);
        let _ = write!(
            h,
            "<path class=\"fit\" d=\"{}\" fill=\"none\" stroke=\"#a15c00\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>",
            path(&s, [(s.t0, line.at(s.t0)), (end, line.at(end))].into_iter())
        );
    }
    if let (Some(c), Some((level, _))) = (drawn_crossing(f), &f.threshold) {
        let _ = write!(
            h,
            "<circle class=\"crossing\" data-t=\"{c:.0}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"none\" stroke=\"#b00020\" stroke-width=\"2\"/>",
            s.x(c),
            s.y(*level)
        );
    }
    h.push_str("</svg>");
    let _ = write!(h, "<figcaption>{title}");
    if let Some(c) = caption(f, lang) {
        let _ = write!(h, ". {c}");
    }
    h.push_str("</figcaption></figure>\n");
    h
}

/// The frame, the value labels (top, bottom, threshold) and the time labels (first, last).
fn axes(h: &mut String, f: &Figure, s: &Scale) {
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    let _ = write!(
        h,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fafafa\" stroke=\"#ccc\"/>",
        right - LEFT,
        bottom - TOP
    );
    let label = |h: &mut String, x: f64, y: f64, anchor: &str, text: &str| {
        let _ = write!(
            h,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"15\" text-anchor=\"{anchor}\" fill=\"#444\">{}</text>",
            escape(text)
        );
    };
    label(h, LEFT - 4.0, TOP + 10.0, "end", &fmt_value(f.unit, s.v1));
    label(h, LEFT - 4.0, bottom, "end", &fmt_value(f.unit, s.v0));
    if let Some((level, _)) = &f.threshold {
        label(
            h,
            LEFT - 4.0,
            s.y(*level) + 4.0,
            "end",
            &fmt_value(f.unit, *level),
        );
    }
    let seconds = s.t1 - s.t0 < 600.0;
    label(h, LEFT, HEIGHT - 6.0, "start", &clock(s.t0, seconds));
    label(
        h,
        right,
        HEIGHT - 6.0,
        "end",
        &format!("{} UTC", clock(s.t1, seconds)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use collectors::figure::Line;

    /// 1 GiB available falling 1 MiB/s over 10 min, threshold at 100 MiB.
    pub(crate) fn filling() -> Figure {
        let mib = 1024.0 * 1024.0;
        let points: Vec<(f64, f64)> = (0..=10)
            .map(|i| {
                (
                    1000.0 + 60.0 * i as f64,
                    1024.0 * mib - 60.0 * mib * i as f64,
                )
            })
            .collect();
        let last = *points.last().unwrap();
        Figure {
            kind: "disk.space",
            subject: "/var/lib/<kubelet>".into(),
            unit: Unit::Bytes,
            fit: Some(Line {
                t: last.0,
                value: last.1,
                slope: -mib,
            }),
            threshold: Some((100.0 * mib, "nodefs.available<10%".into())),
            crossing: Some(last.0 + (last.1 - 100.0 * mib) / mib),
            points,
        }
    }

    fn attr(svg: &str, class: &str, name: &str) -> f64 {
        let at = svg
            .find(&format!("class=\"{class}\""))
            .unwrap_or_else(|| panic!("no {class} in {svg}"));
        let rest = &svg[at..];
        let v = rest.split(&format!(" {name}=\"")).nth(1).unwrap();
        v[..v.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn the_crossing_is_where_the_fit_meets_the_threshold() {
        let f = filling();
        let svg = svg(&f, Lang::En);
        let s = Scale::of(&f).unwrap();
        let c = f.crossing.unwrap();
        assert_eq!(s.t1, c, "the axis reaches the crossing");
        assert_eq!(attr(&svg, "crossing", "data-t"), c.round());
        assert!((attr(&svg, "crossing", "cx") - s.x(c)).abs() < 0.1);
        assert!((attr(&svg, "crossing", "cy") - s.y(100.0 * 1024.0 * 1024.0)).abs() < 0.1);
        // 11 dots, the dashed fit ending at the crossing, the threshold line.
        assert_eq!(svg.matches("class=\"pt\"").count(), 11);
        assert!(svg.contains(&format!(
            " L{:.1} {:.1}\"",
            s.x(c),
            s.y(100.0 * 1024.0 * 1024.0)
        )));
        assert!(svg.contains("class=\"threshold\""));
        assert!(svg.contains("reaches nodefs.available&lt;10% at"), "{svg}");
        assert!(svg.contains("/var/lib/&lt;kubelet&gt;"));
        assert!(!svg.contains("<kubelet>"));
        assert!(!svg.contains("<script"));
    }

    #[test]
    fn a_ring_is_a_line_without_dots_or_fit() {
        let f = Figure {
            kind: "conntrack.fill",
            subject: String::new(),
            unit: Unit::Percent,
            points: vec![(0.0, 10.0), (15.0, 20.0), (30.0, 20.0)],
            fit: None,
            threshold: None,
            crossing: None,
        };
        let svg = svg(&f, Lang::Zh);
        assert!(svg.contains("conntrack 表使用率"));
        assert!(svg.contains("class=\"series\" d=\"M90.0 "));
        assert!(!svg.contains("class=\"pt\"") && !svg.contains("class=\"fit\""));
        // A flat series still gets a height.
        let flat = Figure {
            points: vec![(0.0, 5.0), (15.0, 5.0)],
            ..f
        };
        let s = Scale::of(&flat).unwrap();
        assert!(s.v1 > s.v0);
        assert!(svg.len() > 100);
    }

    /// A tmpfs mounted at `<dir>/var/lib/kubelet`, unmounted on drop (also when a test fails).
    struct KubeletTmpfs {
        dir: tempfile::TempDir,
        mnt: std::path::PathBuf,
    }

    impl Drop for KubeletTmpfs {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    /// Issue 49 on a real kernel (root): a 128 MiB tmpfs kubelet root written 2 MiB per cycle,
    /// the disk collector's clock a second per cycle (as the collector's own real test). Once
    /// `disk.filling_up` is raised, the figure the agent keeps for that filesystem is drawn
    /// with every reading as a dot, the dashed fit ending on the threshold line, and the
    /// crossing ring where the finding's estimate puts it.
    #[test]
    fn a_real_tmpfs_filling_is_plotted_with_its_crossing_at_the_findings_estimate() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let is_root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
        if !is_root {
            collectors::skip!("SKIP a_real_tmpfs_filling_is_plotted_with_its_crossing_at_the_findings_estimate: needs root (mounts a tmpfs)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&mnt).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("size=128m"),
        )
        .expect("mount tmpfs");
        let fs = KubeletTmpfs { dir, mnt };
        let proc1 = fs.dir.path().join("proc/1");
        std::fs::create_dir_all(&proc1).unwrap();
        std::os::unix::fs::symlink(
            format!("/proc/{}/mountinfo", std::process::id()),
            proc1.join("mountinfo"),
        )
        .unwrap();
        let data = fs.mnt.join(
            "pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77/volumes/kubernetes.io~empty-dir/cache/data",
        );
        std::fs::create_dir_all(data.parent().unwrap()).unwrap();
        let mut file = std::fs::File::create(&data).unwrap();
        let mib = vec![0x5au8; 1 << 20];
        let now = Arc::new(AtomicU64::new(1_800_000_000));
        let clock = Arc::clone(&now);
        let config = collectors::disk::DiskConfig {
            thresholds: collectors::disk::Thresholds {
                fill_min_history_secs: 8.0,
                fill_min_points: 6,
                ..collectors::disk::Thresholds::default()
            },
            history_window: std::time::Duration::from_secs(600),
            history_points: 600,
            ..collectors::disk::DiskConfig::default()
        };
        let node = collectors::Node::new(collectors::HostPaths::new(fs.dir.path()));
        let mut c = collectors::disk::DiskCollector::new(node, config)
            .with_clock(move || clock.load(Ordering::SeqCst) as f64);
        let mut history = crate::history::History::default();
        let mut raised = None;
        for _ in 0..40 {
            let out = collectors::Collector::collect(&mut c, &crate::scheduler::fakes::ctx());
            let t = now.load(Ordering::SeqCst) as f64;
            let f = out
                .findings
                .iter()
                .find(|f| f.id == "disk.filling_up")
                .cloned();
            history.record("disk", &out.metrics, out.figures, t);
            if let Some(f) = f {
                raised = Some(f);
                break;
            }
            for _ in 0..2 {
                std::io::Write::write_all(&mut file, &mib).unwrap();
            }
            now.fetch_add(1, Ordering::SeqCst);
        }
        let f = raised.expect("disk.filling_up never raised");
        let ev = |k: &str| {
            f.evidence
                .get(k)
                .and_then(|e| e.as_f64())
                .unwrap_or_else(|| panic!("{k}: {:?}", f.evidence))
        };
        let figures = history.figures();
        let fig = figures
            .iter()
            .find(|g| g.kind == "disk.space" && g.subject == "/var/lib/kubelet")
            .unwrap_or_else(|| panic!("{figures:#?}"));
        assert!(crate::history::explains(fig, &f.id, &f.subject));
        let svg = svg(fig, Lang::En);
        let s = Scale::of(fig).unwrap();
        // Every reading the fit rests on is a dot.
        assert_eq!(
            svg.matches("class=\"pt\"").count() as f64,
            ev("history_points")
        );
        // The crossing: at the finding's estimate, on the threshold's level.
        let last = fig.points.last().unwrap().0;
        let t_cross = attr(&svg, "crossing", "data-t");
        assert!(
            (t_cross - (last + ev("seconds_to_threshold"))).abs() <= 1.0,
            "{t_cross} vs {}",
            last + ev("seconds_to_threshold")
        );
        let (cx, cy) = (attr(&svg, "crossing", "cx"), attr(&svg, "crossing", "cy"));
        // Within the second the evidence is rounded to.
        let est = last + ev("seconds_to_threshold");
        let one_second = s.x(est + 1.0) - s.x(est);
        assert!((cx - s.x(est)).abs() <= one_second, "{cx} vs {}", s.x(est));
        assert!((cy - s.y(ev("threshold_free_bytes"))).abs() < 0.5, "{cy}");
        // The dashed fit ends there, and the threshold line runs at that height.
        let fit = &svg[svg.find("class=\"fit\"").unwrap()..];
        let d = fit.split(" d=\"").nth(1).unwrap();
        let end: Vec<f64> = d[..d.find('"').unwrap()]
            .rsplit('L')
            .next()
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert!(
            (end[0] - cx).abs() < 0.2 && (end[1] - cy).abs() < 0.2,
            "{end:?} vs {cx} {cy}"
        );
        assert!(
            svg.contains(&format!("class=\"threshold\" d=\"M{LEFT} {cy:.1} ")),
            "{svg}"
        );
        assert!(
            svg.contains(&format!(
                "reaches nodefs.available&lt;10% at {}",
                f.evidence
                    .get("threshold_at")
                    .and_then(|e| e.as_str())
                    .unwrap()
            )),
            "{svg}"
        );
    }
}
