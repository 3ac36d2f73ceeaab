//! A rule's own page: `GET /rules/<id>` (HTML), `GET /rules` (the index) and
//! `node-doctor explain <id>` (text). What the rule means (its words as its file writes them,
//! conditions with their meanings), when it is raised and cleared, what to do, the command
//! templates, the sources by title, what it sets in the cluster, the thresholds of its
//! collector as this agent runs them, and its example rendered. No node data: the pages are
//! the same on every node, which is why they answer without the auth token; NodeConditions,
//! Events and alerts link here (`--docs-url`).

use std::fmt::Write;

use collectors::listing::{Listed, Setting};
use collectors::rules::{Description, Part, RuleBook};
use collectors::Lang;

use crate::html::escape;
use crate::links::path;

/// Every collector's thresholds as configured: `(collector, thresholds)`.
pub type Thresholds = Vec<(&'static str, Listed)>;

/// The thresholds of every collector under `opts`.
pub fn thresholds(opts: &collectors::registry::Options) -> Thresholds {
    collectors::registry::COLLECTORS
        .iter()
        .map(|e| (e.name, (e.thresholds)(opts)))
        .collect()
}

fn t(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// The rules in force, by collector and id.
fn rules_sorted(book: &RuleBook) -> Vec<&collectors::rules::Rule> {
    let mut rules: Vec<_> = book.rules().collect();
    rules.sort_by(|a, b| a.id.cmp(&b.id));
    rules
}

/// Long words, ids and commands wrap (nothing scrolls the page sideways, issue 49).
const STYLE: &str = "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;overflow-wrap:anywhere}\
code,pre{background:#eee;padding:.1em .3em}pre{white-space:pre-wrap;overflow-x:auto}table{border-collapse:collapse}\
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top;overflow-wrap:anywhere}\
.when{color:#555;font-size:90%}.ex{border-left:6px solid #999;padding:.2em 1em;background:#f7f7f7}</style>";

fn head(h: &mut String, lang: Lang, title: &str, other: &str) {
    let (code, name) = match lang {
        Lang::En => ("zh", "中文"),
        Lang::Zh => ("en", "English"),
    };
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"{}\"><head><meta charset=\"utf-8\">{}<title>{}</title>\n{STYLE}</head><body>\n\
<p><a href=\"/rules?lang={}\">{}</a> · <a href=\"{other}?lang={code}\">{name}</a></p>\n",
        lang.as_str(),
        crate::html::HEAD_META,
        escape(title),
        lang.as_str(),
        t(lang, "All rules", "全部规则"),
    );
}

/// `GET /rules`: every rule by collector, with its name and a link to its page.
pub fn index(book: &RuleBook, lang: Lang) -> String {
    let mut h = String::with_capacity(16 * 1024);
    head(
        &mut h,
        lang,
        t(lang, "node-doctor rules", "node-doctor 规则"),
        "/rules",
    );
    let rules = rules_sorted(book);
    let _ = writeln!(
        h,
        "<h1>{} ({})</h1>\n<p>{}</p>",
        t(lang, "node-doctor rules", "node-doctor 规则"),
        rules.len(),
        t(
            lang,
            "Every finding node-doctor reports comes from one of these rules. Each page says what the finding means, when it is raised and cleared, what to do and where the advice comes from.",
            "node-doctor 报告的每个问题都来自以下某条规则。每页说明问题的含义、何时产生与消除、如何处理以及依据出处。"
        ),
    );
    let mut collector = "";
    for r in rules {
        let d = r.describe(lang);
        if d.collector != collector {
            if !collector.is_empty() {
                h.push_str("</table>\n");
            }
            let _ = writeln!(
                h,
                "<h2>{}</h2>\n<table><tr><th>{}</th><th>{}</th></tr>",
                escape(&d.collector),
                t(lang, "rule", "规则"),
                t(lang, "what it reports", "报告内容"),
            );
            collector = r.id.split('.').next().unwrap_or("");
        }
        let _ = writeln!(
            h,
            "<tr><td><a href=\"{}?lang={}\"><code>{}</code></a></td><td>{}</td></tr>",
            escape(&path(&d.id)),
            lang.as_str(),
            escape(&d.id),
            escape(&d.name()),
        );
    }
    if !collector.is_empty() {
        h.push_str("</table>\n");
    }
    h.push_str("</body></html>\n");
    h
}

/// `GET /rules/<id>`: the rule's page, `None` when no rule has that id.
pub fn page(book: &RuleBook, id: &str, lang: Lang, thresholds: &Thresholds) -> Option<String> {
    let d = book.get(id)?.describe(lang);
    let mut h = String::with_capacity(16 * 1024);
    head(
        &mut h,
        lang,
        &format!("{} — node-doctor", d.id),
        &path(&d.id),
    );
    let _ = writeln!(
        h,
        "<h1><code>{}</code>: {}</h1>\n<p>{} <code>{}</code> · {} <code>{}</code></p>",
        escape(&d.id),
        escape(&d.name()),
        t(lang, "collector", "采集器"),
        escape(&d.collector),
        t(lang, "rule file", "规则文件"),
        escape(&d.file),
    );
    what_it_says(&mut h, &d, lang);
    section(
        &mut h,
        t(lang, "When it is raised and cleared", "何时产生与消除"),
    );
    let _ = writeln!(h, "<p>{}</p>", escape(&hysteresis(&d, lang)));
    what_to_do(&mut h, &d, lang);
    sources(&mut h, &d, lang);
    section(&mut h, t(lang, "In the cluster", "在集群中"));
    let _ = writeln!(h, "<p>{}</p>", escape(&cluster(&d, lang)));
    if let Some((_, listed)) = thresholds.iter().find(|(c, _)| *c == d.collector) {
        thresholds_table(&mut h, listed, lang);
    }
    section(&mut h, t(lang, "Example", "示例"));
    example_html(&mut h, &d, lang);
    h.push_str("</body></html>\n");
    Some(h)
}

/// "What it says": the title and summary parts, and the conditions with their meanings.
fn what_it_says(h: &mut String, d: &Description, lang: Lang) {
    section(h, t(lang, "What it says", "报告内容"));
    parts_list(h, lang, t(lang, "Title", "标题"), &d.title);
    parts_list(h, lang, t(lang, "Summary", "摘要"), &d.summary);
    if !d.conditions.is_empty() {
        let _ = writeln!(
            h,
            "<h3>{}</h3>\n<table><tr><th>{}</th><th>{}</th></tr>",
            t(lang, "Conditions", "条件"),
            t(lang, "condition", "条件"),
            t(lang, "meaning", "含义"),
        );
        for (name, meaning) in &d.conditions {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td></tr>",
                escape(name),
                escape(meaning)
            );
        }
        h.push_str("</table>\n");
    }
}

/// "What to do": the steps, and the command templates with when each applies.
fn what_to_do(h: &mut String, d: &Description, lang: Lang) {
    section(h, t(lang, "What to do", "处理步骤"));
    h.push_str("<ol>");
    for step in &d.steps {
        h.push_str("<li>");
        parts_inline(h, lang, step);
        h.push_str("</li>");
    }
    h.push_str("</ol>\n");
    if !d.commands.is_empty() {
        let _ = writeln!(
            h,
            "<h3>{}</h3>\n<p class=\"when\">{}</p>\n<table>",
            t(lang, "Commands", "命令"),
            t(
                lang,
                "Templates: {name} is filled from the finding's evidence, every argument quoted for the shell.",
                "模板：{name} 由问题的证据填入，每个参数都按 shell 规则加引号。"
            ),
        );
        for c in &d.commands {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"when\">{}</td></tr>",
                escape(&c.run),
                escape(&when_words(c.when.as_deref(), c.each.as_deref(), lang)),
            );
        }
        h.push_str("</table>\n");
    }
}

/// "Sources": the citations, and the see-also links to `/explain`.
fn sources(h: &mut String, d: &Description, lang: Lang) {
    section(h, t(lang, "Sources", "出处"));
    h.push_str("<ul>");
    for line in citations(d, lang) {
        let _ = write!(h, "<li>{}</li>", escape(&line));
    }
    h.push_str("</ul>\n");
    if !d.see_also.is_empty() {
        let links: Vec<String> = d
            .see_also
            .iter()
            .map(|k| {
                format!(
                    "<a href=\"/explain?q={0}&amp;lang={1}\"><code>{0}</code></a>",
                    escape(k),
                    lang.as_str()
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<p>{}: {}</p>",
            t(lang, "See also", "另见"),
            links.join(", ")
        );
    }
}

/// The thresholds of the rule's collector, as this agent runs them.
fn thresholds_table(h: &mut String, listed: &[Setting], lang: Lang) {
    section(
        h,
        t(
            lang,
            "Thresholds of this collector, as this agent runs",
            "本采集器的阈值（本 agent 当前配置）",
        ),
    );
    h.push_str("<table>");
    for s in listed {
        let _ = write!(
            h,
            "<tr title=\"{}\"><th>{}</th><td>{}</td></tr>",
            escape(s.name),
            escape(&s.name.replace(['_', '.'], " ")),
            escape(&s.value)
        );
    }
    h.push_str("</table>\n");
}

fn section(h: &mut String, title: &str) {
    let _ = writeln!(h, "<h2>{}</h2>", escape(title));
}

fn when_words(when: Option<&str>, each: Option<&str>, lang: Lang) -> String {
    let mut out = Vec::new();
    if let Some(w) = when {
        out.push(format!("{} {w}", t(lang, "when", "当")));
    }
    if let Some(e) = each {
        out.push(format!("{} {e}", t(lang, "for each of", "逐项：")));
    }
    out.join("; ")
}

fn parts_list(h: &mut String, lang: Lang, label: &str, parts: &[Part]) {
    let _ = writeln!(h, "<h3>{}</h3>\n<table>", escape(label));
    for p in parts {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"when\">{}</td></tr>",
            escape(&p.text),
            escape(&when_words(p.when.as_deref(), p.each.as_deref(), lang))
        );
    }
    h.push_str("</table>\n");
}

fn parts_inline(h: &mut String, lang: Lang, parts: &[Part]) {
    for p in parts {
        let w = when_words(p.when.as_deref(), p.each.as_deref(), lang);
        if w.is_empty() {
            h.push_str(&escape(&p.text));
        } else {
            let _ = write!(
                h,
                "<span class=\"when\">[{}]</span> {}",
                escape(&w),
                escape(&p.text)
            );
        }
    }
}

/// The rule's hysteresis in words.
fn hysteresis(d: &Description, lang: Lang) -> String {
    let (r, c) = (d.hysteresis.raise_after, d.hysteresis.clear_after);
    match lang {
        Lang::En => format!(
            "The agent (serve) raises it once {r} successful run(s) in a row have reported it, and clears it once {c} in a row have not (raise_after = {r}, clear_after = {c}). `node-doctor check` shows what one run sees."
        ),
        Lang::Zh => format!(
            "agent（serve）在连续 {r} 次成功采集报告后产生该问题，连续 {c} 次未报告后消除（raise_after = {r}，clear_after = {c}）。`node-doctor check` 只显示单次采集所见。"
        ),
    }
}

/// Each citation as a line: the handbook by title, or the external document with its
/// address, or why nothing is cited; with the condition under which it is cited.
fn citations(d: &Description, lang: Lang) -> Vec<String> {
    d.citations
        .iter()
        .map(|c| {
            let what = match c.cites {
                Some(cites) => {
                    let mut s = collectors::handbooks::cite(
                        &collectors::finding::Source {
                            doc: cites.doc,
                            section: cites.section,
                            url: cites.url,
                        },
                        lang,
                    );
                    if let Some(url) = cites.url {
                        s.push_str(&format!(" ({url})"));
                    }
                    if let Some(why) = cites.why {
                        s.push_str(&format!(" — {why}"));
                    }
                    s
                }
                None => t(lang, "no document covers this case", "没有文档涵盖这种情况").to_string(),
            };
            match &c.when {
                Some(w) => format!("{what} [{} {w}]", t(lang, "when", "当")),
                None => what,
            }
        })
        .collect()
}

/// What a warning or critical finding of the rule sets in the cluster.
fn cluster(d: &Description, lang: Lang) -> String {
    let mut out = Vec::new();
    for s in &d.sets {
        let when = s
            .when
            .as_deref()
            .map(|w| format!(" [{} {w}]", t(lang, "when", "当")))
            .unwrap_or_default();
        out.push(format!(
            "{} {} ({} {}){when}",
            t(lang, "NodeCondition", "NodeCondition"),
            s.condition,
            t(lang, "reason", "原因"),
            s.reason
        ));
    }
    if let Some(reason) = &d.event {
        out.push(format!("{} {reason}", t(lang, "Event", "Event")));
    }
    if out.is_empty() {
        return t(
            lang,
            "Nothing: it is reported in /findings, /metrics and check only.",
            "不写入集群：只在 /findings、/metrics 和 check 中报告。",
        )
        .to_string();
    }
    format!(
        "{}: {}.",
        t(
            lang,
            "A warning or critical finding sets (serve --kube-report)",
            "warning 或 critical 级别的问题会写入（serve --kube-report）"
        ),
        out.join("; ")
    )
}

fn example_html(h: &mut String, d: &Description, lang: Lang) {
    let f = &d.example;
    let _ = write!(
        h,
        "<div class=\"ex\"><h3>[{}] {}{}</h3>\n<p>{}</p>\n",
        f.severity.as_str().to_uppercase(),
        escape(f.title.get(lang)),
        if f.subject.is_empty() {
            String::new()
        } else {
            format!(" — <code>{}</code>", escape(&f.subject))
        },
        escape(f.summary.get(lang)),
    );
    crate::html::evidence_table(h, &f.evidence, lang);
    let cmds: Vec<String> = f.remediation.commands.iter().map(|c| escape(c)).collect();
    if !cmds.is_empty() {
        let _ = writeln!(h, "<pre>{}</pre>", cmds.join("\n"));
    }
    h.push_str("</div>\n");
}

/// `node-doctor explain <id>`: the rule's page as text, `None` when no rule has that id.
pub fn text(book: &RuleBook, id: &str, lang: Lang, thresholds: &Thresholds) -> Option<String> {
    let d = book.get(id)?.describe(lang);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}  [{} {}, {} {}]\n{}",
        d.id,
        t(lang, "collector", "采集器"),
        d.collector,
        t(lang, "rule file", "规则文件"),
        d.file,
        d.name()
    );
    let part_lines = |o: &mut String, label: &str, parts: &[Part]| {
        let _ = writeln!(o, "{label}:");
        for p in parts {
            let w = when_words(p.when.as_deref(), p.each.as_deref(), lang);
            if w.is_empty() {
                let _ = writeln!(o, "  {}", p.text);
            } else {
                let _ = writeln!(o, "  [{w}] {}", p.text);
            }
        }
    };
    part_lines(&mut o, t(lang, "title", "标题"), &d.title);
    part_lines(&mut o, t(lang, "summary", "摘要"), &d.summary);
    if !d.conditions.is_empty() {
        let _ = writeln!(o, "{}:", t(lang, "conditions", "条件"));
        for (n, m) in &d.conditions {
            let _ = writeln!(o, "  {n}: {m}");
        }
    }
    let _ = writeln!(
        o,
        "{}: {}",
        t(lang, "raised and cleared", "产生与消除"),
        hysteresis(&d, lang)
    );
    let _ = writeln!(o, "{}:", t(lang, "what to do", "处理步骤"));
    for (i, step) in d.steps.iter().enumerate() {
        let text: Vec<String> = step
            .iter()
            .map(|p| {
                let w = when_words(p.when.as_deref(), p.each.as_deref(), lang);
                if w.is_empty() {
                    p.text.clone()
                } else {
                    format!("[{w}] {}", p.text)
                }
            })
            .collect();
        let _ = writeln!(o, "  {}. {}", i + 1, text.join(""));
    }
    if !d.commands.is_empty() {
        let _ = writeln!(o, "{}:", t(lang, "commands", "命令"));
        for c in &d.commands {
            let w = when_words(c.when.as_deref(), c.each.as_deref(), lang);
            if w.is_empty() {
                let _ = writeln!(o, "  $ {}", c.run);
            } else {
                let _ = writeln!(o, "  $ {}    [{w}]", c.run);
            }
        }
    }
    for line in citations(&d, lang) {
        let _ = writeln!(o, "{}: {line}", t(lang, "source", "出处"));
    }
    for k in &d.see_also {
        let _ = writeln!(
            o,
            "{}: node-doctor explain {k}",
            t(lang, "see also", "另见")
        );
    }
    let _ = writeln!(
        o,
        "{}: {}",
        t(lang, "in the cluster", "在集群中"),
        cluster(&d, lang)
    );
    if let Some((_, listed)) = thresholds.iter().find(|(c, _)| *c == d.collector) {
        let l: Vec<String> = listed
            .iter()
            .map(|s| format!("{} {}", s.name.replace(['_', '.'], " "), s.value))
            .collect();
        let _ = writeln!(
            o,
            "{}: {}",
            t(lang, "thresholds of the collector", "采集器阈值"),
            l.join("; ")
        );
    }
    let _ = writeln!(
        o,
        "{}: /rules/{} {}",
        t(lang, "page", "页面"),
        d.id,
        t(lang, "on the agent (port 9808)", "（agent 的 9808 端口）")
    );
    // Rule files are configuration (an operator's override may hold anything): each line
    // printed with its control characters made visible.
    let lines: Vec<String> = o
        .lines()
        .map(|l| collectors::sanitize::visible(l).into_owned())
        .collect();
    Some(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> std::sync::Arc<RuleBook> {
        RuleBook::builtin()
    }

    fn defaults() -> Thresholds {
        thresholds(&crate::cli::default_options())
    }

    #[test]
    fn index_links_every_rule_in_both_languages() {
        let b = book();
        for lang in [Lang::En, Lang::Zh] {
            let h = index(&b, lang);
            let mut n = 0;
            for r in b.rules() {
                assert!(
                    h.contains(&format!(
                        "<a href=\"/rules/{}?lang={}\">",
                        r.id,
                        lang.as_str()
                    )),
                    "{}",
                    r.id
                );
                n += 1;
            }
            assert!(n > 40);
            assert!(h.starts_with("<!doctype html>") && h.ends_with("</body></html>\n"));
        }
    }

    #[test]
    fn a_rule_page_says_everything_the_rule_file_does() {
        let b = book();
        let p = page(&b, "conntrack.table_full", Lang::En, &defaults()).expect("a page");
        // Title variants with their conditions, the conditions' meanings.
        assert!(
            p.contains("conntrack table of another network namespace full"),
            "{p}"
        );
        assert!(
            p.contains("<td class=\"when\">when critical and other_netns</td>"),
            "{p}"
        );
        assert!(p.contains("<td><code>other_netns</code></td>"), "{p}");
        // Hysteresis, commands, the handbook by title, the thresholds as configured.
        assert!(p.contains("raise_after = "), "{p}");
        assert!(p.contains("sysctl"), "{p}");
        assert!(
            p.contains("Linux kernel documentation § Netfilter Conntrack Sysfs variables"),
            "{p}"
        );
        assert!(p.contains("(https://docs.kernel.org/networking/nf_conntrack-sysctl.html)"));
        let races = page(&b, "conntrack.insert_races", Lang::En, &defaults()).expect("page");
        assert!(
            races.contains(
                "Tencent Cloud TKE, Node and Pod troubleshooting handbook § 集群 DNS 解析异常排障处理"
            ),
            "{races}"
        );
        assert!(!races.contains("002_af370464fa0f13dd.txt"), "{races}");
        assert!(
            p.contains("<th>table critical percent</th><td>90 %</td>"),
            "{p}"
        );
        // The example rendered, evidence in words.
        assert!(p.contains("<div class=\"ex\"><h3>[CRITICAL]"), "{p}");
        // Self-contained: no external asset (the one link is the empty icon, a data: URL).
        assert_eq!(p.matches("<link").count(), 1);
        assert!(p.contains("<link rel=\"icon\" href=\"data:,\">"));
        let p = p.replace(crate::html::HEAD_META, "");
        assert!(![" src=\"", "<script", "<link", "<img", "url("]
            .iter()
            .any(|x| p.contains(x)));
        let zh = page(&b, "conntrack.table_full", Lang::Zh, &defaults()).expect("a page");
        assert!(
            zh.contains("<html lang=\"zh\">") && zh.contains("处理步骤"),
            "{zh}"
        );
        assert!(page(&b, "conntrack.nope", Lang::En, &defaults()).is_none());
    }

    #[test]
    fn every_rule_has_a_page_and_a_text() {
        let b = book();
        let th = defaults();
        for r in b.rules() {
            let p = page(&b, &r.id, Lang::En, &th).expect("page");
            assert!(p.contains(&format!("<code>{}</code>", r.id)), "{}", r.id);
            let x = text(&b, &r.id, Lang::Zh, &th).expect("text");
            assert!(x.starts_with(&r.id), "{x}");
            assert!(x.contains("处理步骤:"), "{x}");
        }
    }

    #[test]
    fn thresholds_follow_the_agents_configuration() {
        let mut opts = crate::cli::default_options();
        opts.conntrack.thresholds.table_critical_percent = 80.0;
        let p = page(
            &book(),
            "conntrack.table_full",
            Lang::En,
            &thresholds(&opts),
        )
        .expect("page");
        assert!(
            p.contains("<th>table critical percent</th><td>80 %</td>"),
            "{p}"
        );
    }
}
