//! `GET /`: a small HTML page, no JavaScript, with the node's current findings.

use std::fmt::Write;

use collectors::figure::Figure;
use collectors::{Lang, Severity};

use crate::view::{FindingState, FindingView, View};

/// Percent-encodes a query value (RFC 3986 unreserved characters pass).
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub use crate::markup::escape;

fn colour(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "#b00020",
        Severity::Warning => "#a15c00",
        Severity::Info => "#00639b",
    }
}

/// The page for one view, with the figures that explain its findings drawn on them and all
/// of them under "Figures".
pub fn page(view: &View<'_>, figures: &[Figure]) -> String {
    let mut h = String::with_capacity(8192);
    head(&mut h, view);
    overview(&mut h, view);
    let _ = writeln!(
        h,
        "<h2>{} ({})</h2>",
        view.t("Findings", "发现的问题"),
        view.findings.len()
    );
    if let Some(msg) = view.no_findings() {
        let _ = writeln!(h, "<p>{}</p>", escape(&msg));
    }
    for (i, f) in view.findings.iter().enumerate() {
        finding(&mut h, view, i, f, figures);
    }
    let _ = writeln!(
        h,
        "<h2 id=\"figures\">{} ({})</h2>",
        view.t("Figures", "图表"),
        figures.len()
    );
    if figures.is_empty() {
        let _ = writeln!(
            h,
            "<p>{}</p>",
            view.t(
                "None yet: a figure needs two runs of its collector.",
                "暂无：图表需要采集器至少运行两次。"
            )
        );
    }
    for f in figures {
        h.push_str(&crate::plot::svg(f, view.lang));
    }
    collectors_table(&mut h, view);
    h.push_str(FOOTER);
    h
}

/// The first screen: findings per severity, the collectors that could not look, the titles
/// of the worst findings (linked to their cards).
fn overview(h: &mut String, view: &View<'_>) {
    let t = |en, zh| view.t(en, zh);
    let c = view.counts;
    let _ = writeln!(
        h,
        "<section id=\"overview\"><p class=\"counts\"><b style=\"color:{}\">{} {}</b> · <b style=\"color:{}\">{} {}</b> · <b style=\"color:{}\">{} {}</b></p>",
        colour(Severity::Critical),
        c.critical,
        t("critical", "严重"),
        colour(Severity::Warning),
        c.warning,
        t("warning", "警告"),
        colour(Severity::Info),
        c.info,
        t("info", "提示"),
    );
    let blind: Vec<String> = view
        .incomplete()
        .map(|c| format!("<b>{}</b> ({})", escape(c.name), c.status))
        .collect();
    if blind.is_empty() {
        let _ = writeln!(
            h,
            "<p>{} {}</p>",
            view.collectors.len(),
            t(
                "collectors looked; none was blind.",
                "个采集器均完成了检查。"
            )
        );
    } else {
        let _ = writeln!(
            h,
            "<p class=\"blind\">{}: {}. <a href=\"#collectors\">{}</a></p>",
            t("Could not look", "未能检查"),
            blind.join(", "),
            t("Why", "原因")
        );
    }
    if !view.findings.is_empty() {
        h.push_str("<ol class=\"worst\">");
        for (i, f) in view.findings.iter().take(WORST).enumerate() {
            let _ = write!(
                h,
                "<li><a href=\"#f{i}\">[{}] {}</a>{}</li>",
                f.severity.as_str().to_uppercase(),
                escape(f.title),
                if f.subject.is_empty() {
                    String::new()
                } else {
                    format!(" — <code>{}</code>", escape(f.subject))
                },
            );
        }
        if view.findings.len() > WORST {
            let _ = write!(
                h,
                "<li>{} {}</li>",
                view.findings.len() - WORST,
                t("more below", "条见下文")
            );
        }
        h.push_str("</ol>");
    }
    h.push_str("</section>\n");
}

/// Findings named in the overview, at most.
const WORST: usize = 5;

/// What every page's head holds besides its title: the width of the device (a phone shows the
/// page at its own width, not a desktop's shrunk), and an empty icon (no request for a
/// `/favicon.ico` the agent does not serve, and no error in the browser's console for it).
pub const HEAD_META: &str = "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><link rel=\"icon\" href=\"data:,\">";

/// The page's style. Nothing may push the page wider than the screen: long words and ids wrap
/// anywhere, commands scroll inside their own block, a wide table inside its own box.
pub const STYLE: &str = "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;overflow-wrap:anywhere}\
h1{font-size:1.5em;margin:.3em 0}#overview{border:1px solid #ccc;padding:0 1em;margin:.5em 0}\
#overview p,#overview ol{margin:.4em 0}\
.f{border-left:6px solid;padding:.2em 1em;margin:1em 0;background:#f7f7f7}\
code,pre{background:#eee;padding:.1em .3em}code{overflow-wrap:anywhere}\
pre{overflow-x:auto;white-space:pre;max-width:100%}\
.tw{overflow-x:auto;max-width:100%}table{border-collapse:collapse}\
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;overflow-wrap:anywhere}\
figure{margin:.5em 0}svg.plot{display:block;width:100%;max-width:600px;height:auto}\
figcaption{font-size:.9em;color:#444}";

/// The document's head and style, the node's name, when and by which agent, and the link
/// to the page in the other language.
fn head(h: &mut String, view: &View<'_>) {
    let node = escape(view.node);
    let (other_lang, other_name) = match view.lang {
        Lang::En => ("zh", "中文"),
        Lang::Zh => ("en", "English"),
    };
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"{}\"><head><meta charset=\"utf-8\">{HEAD_META}<title>node-doctor: {node}</title>\n\
<style>{STYLE}</style></head><body>\n",
        view.lang.as_str()
    );
    let _ = write!(
        h,
        "<h1>node-doctor: {node}</h1>\n<p>{} {} · agent {} · <a href=\"?lang={}\">{}</a></p>\n",
        view.t("Snapshot of", "快照时间"),
        view.generated_at,
        view.agent_version,
        other_lang,
        other_name,
    );
}

/// One finding's block: its heading, whether it is clearing, its evidence, steps and
/// commands, where the advice comes from and what to read next.
fn finding(h: &mut String, view: &View<'_>, i: usize, f: &FindingView<'_>, figures: &[Figure]) {
    let t = |en, zh| view.t(en, zh);
    let _ = write!(
        h,
        "<div class=\"f\" id=\"f{i}\" data-finding=\"{}\" style=\"border-color:{}\"><h3>[{}] {}{}</h3>\n<p>{}</p>\n<p><small><code>{}</code> · {} {} · {} {}</small></p>\n",
        escape(f.id),
        colour(f.severity),
        f.severity.as_str().to_uppercase(),
        escape(f.title),
        if f.subject.is_empty() {
            String::new()
        } else {
            format!(" — <code>{}</code>", escape(f.subject))
        },
        escape(f.summary),
        escape(f.id),
        t("first seen", "首次发现"),
        f.first_seen,
        t("last seen", "最近确认"),
        f.last_seen,
    );
    if let FindingState::Clearing {
        missing,
        clear_after,
    } = f.state
    {
        let _ = writeln!(
            h,
            "<p><small>{} {missing}/{clear_after}</small></p>",
            t(
                "clearing: not reported by the latest runs; the evidence is from the last run that reported it; runs without it",
                "正在消除：最近的采集未再报告；以下为最后一次报告时的证据；未报告的次数"
            ),
        );
    }
    for fig in figures
        .iter()
        .filter(|fig| crate::history::explains(fig, f.id, f.subject))
    {
        h.push_str(&crate::plot::svg(fig, view.lang));
    }
    remediation(h, f, view.lang);
    if let Some(src) = f.source {
        let _ = write!(
            h,
            "<p><small>{}: {}",
            t("Source", "出处"),
            escape(&collectors::handbooks::cite(src, view.lang))
        );
        // External documentation: the rule file's own https:// address, a link.
        if let Some(url) = src.url {
            let _ = write!(h, " (<a href=\"{0}\">{0}</a>)", escape(url));
        }
        h.push_str("</small></p>\n");
    }
    for s in &f.see_also {
        let _ = writeln!(
            h,
            "<p><small>{}: <a href=\"/explain?q={}&amp;lang={}\">{}</a> (<code>node-doctor explain {}</code>)</small></p>",
            t("See also", "另见"),
            query_escape(s.key),
            view.lang.as_str(),
            escape(s.title.unwrap_or(s.key)),
            escape(s.key)
        );
    }
    h.push_str("</div>\n");
}

/// A finding's evidence (a table, keys in words and values in human units, the raw name as
/// the row's tooltip), steps (a numbered list) and commands (preformatted, one a line); each
/// left out when empty.
fn remediation(h: &mut String, f: &FindingView<'_>, lang: Lang) {
    evidence_table(h, f.evidence, lang);
    if !f.steps.is_empty() {
        h.push_str("<ol>");
        for s in &f.steps {
            let _ = write!(h, "<li>{}</li>", escape(s));
        }
        h.push_str("</ol>\n");
    }
    if !f.commands.is_empty() {
        let cmds: Vec<String> = f.commands.iter().map(|c| escape(c)).collect();
        let _ = writeln!(h, "<pre>{}</pre>", cmds.join("\n"));
    }
}

/// Evidence as a table: keys in words, values in human units, the raw name as the row's
/// tooltip; nothing when there is none.
pub fn evidence_table(
    h: &mut String,
    evidence: &std::collections::BTreeMap<String, collectors::finding::Evidence>,
    lang: Lang,
) {
    if evidence.is_empty() {
        return;
    }
    h.push_str("<div class=\"tw\"><table>");
    for (k, v) in evidence {
        let _ = write!(
            h,
            "<tr title=\"{}\"><th>{}</th><td>{}</td></tr>",
            escape(k),
            escape(&crate::human::key(k)),
            escape(&crate::human::value(k, v, lang))
        );
    }
    h.push_str("</table></div>\n");
}

/// The table of the collectors shown: name, status, latest run, its duration, its message.
fn collectors_table(h: &mut String, view: &View<'_>) {
    let t = |en, zh| view.t(en, zh);
    let _ = write!(
        h,
        "<h2 id=\"collectors\">{}</h2>\n<div class=\"tw\"><table><tr><th>{}</th><th>{}</th><th>{}</th><th>ms</th><th>{}</th></tr>\n",
        t("Collectors", "采集器"),
        t("name", "名称"),
        t("status", "状态"),
        t("last run", "最近运行"),
        t("message", "说明"),
    );
    for c in &view.collectors {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(c.name),
            c.status,
            c.last_run.as_deref().unwrap_or_default(),
            c.duration
                .map(|d| format!("{:.1}", d.as_secs_f64() * 1000.0))
                .unwrap_or_default(),
            escape(c.message.unwrap_or("")),
        );
    }
    h.push_str("</table></div>\n");
}

/// The links to the agent's other endpoints, and the end of the document.
const FOOTER: &str = "<p><a href=\"/findings\">/findings</a> · <a href=\"/history\">/history</a> · <a href=\"/findings?lang=zh\">/findings?lang=zh</a> · <a href=\"/metrics\">/metrics</a> · <a href=\"/explain?q=137\">/explain?q=137</a> · <a href=\"/healthz\">/healthz</a> · <a href=\"/readyz\">/readyz</a></p>\n</body></html>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::finding;
    use crate::view::fixtures::{nasty, only_visible, snapshot, unavailable};
    use crate::view::Filter;

    fn render(snap: &crate::state::Snapshot, filter: &Filter) -> String {
        page(&View::new(snap, filter), &[])
    }

    #[test]
    fn page_escapes_and_shows_remediation() {
        let mut f = finding("disk.filesystem_full", "/var/<x>", Severity::Critical)
            .see_also(collectors::explain::see_also::DISK_FULL)
            .see_also("exit-code:137");
        f.remediation.commands = vec!["du -sh /var/<x> | sort".into()];
        let s = snapshot("<node>", vec![f], unavailable("no /proc/loadavg"));
        let p = render(&s, &Filter::default());
        assert!(p.contains("node-doctor: &lt;node&gt;"));
        assert!(p.contains("du -sh /var/&lt;x&gt; | sort"));
        assert!(p.contains("节点磁盘爆满排障处理"));
        assert!(p.contains("[CRITICAL]"));
        assert!(!p.contains("<script"));
        assert!(
            p.contains("<a href=\"/explain?q=disk-full&amp;lang=en\">"),
            "{p}"
        );
        assert!(p.contains("<a href=\"/explain?q=exit-code%3A137&amp;lang=en\">"));
        assert!(p.contains("<code>node-doctor explain exit-code:137</code>"));
        let zh = render(
            &s,
            &Filter {
                lang: Lang::Zh,
                ..Filter::default()
            },
        );
        assert!(zh.contains("清理空间"));
    }

    #[test]
    fn evidence_reads_in_words_and_human_units() {
        let mut f = finding("memory.exhaustion", "", Severity::Critical);
        f.evidence
            .insert("mem_total_bytes".into(), 17_179_869_184_i64.into());
        f.evidence
            .insert("last_table_full_seconds_ago".into(), 400_i64.into());
        let s = snapshot("n", vec![f], unavailable("x"));
        let p = render(&s, &Filter::default());
        assert!(
            p.contains("<tr title=\"mem_total_bytes\"><th>mem total</th><td>16.0 GiB</td></tr>"),
            "{p}"
        );
        assert!(
            p.contains("<th>last table full</th><td>6 min 40 s ago</td>"),
            "{p}"
        );
        assert!(!p.contains("17179869184"), "{p}");
    }

    #[test]
    fn host_text_is_escaped_and_made_visible() {
        let p = render(&nasty(), &Filter::default());
        // The page's own line breaks only; no control character or bidi override from the host.
        assert!(only_visible(&p), "{p:?}");
        assert!(p.contains("gpj.\\u{202e}exe"), "{p}");
        assert!(p.contains("\\x1b[31mred"), "{p}");
        assert!(p.contains("df -h $&#39;x\\x0a$(touch"), "{p}");
    }

    #[test]
    fn no_findings_is_not_called_healthy_when_a_collector_could_not_check() {
        let s = snapshot("n", vec![], unavailable("no /proc/loadavg"));
        let p = render(&s, &Filter::default());
        assert!(!p.contains("nothing needs attention"), "{p}");
        assert!(p.contains("No findings, but 1 of 2 collectors could not check everything"));
        // Only the healthy collector shown: then nothing needs attention, and the table of
        // collectors shows only that one.
        let disk_only = Filter {
            collectors: vec!["disk".to_string()],
            ..Filter::default()
        };
        let p = render(&s, &disk_only);
        assert!(p.contains("nothing needs attention"), "{p}");
        assert!(p.contains("<tr><td>disk</td>"), "{p}");
        assert!(!p.contains("<tr><td>load</td>"), "{p}");
    }
}
