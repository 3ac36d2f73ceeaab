//! The report as a table for a person (worst first, as `check` prints), as JSON for scripts,
//! and as one self-contained HTML page (no script, no external asset; each class row has the
//! id `class-<name>` and the classes `fleet-class sev-<severity> verdict-<verdict>` for tests
//! and style sheets). Every text from the cluster passes through
//! [`collectors::sanitize::visible`] (the table) or [`crate::html::escape`] (the page).

use std::fmt::Write;

use collectors::sanitize::visible as v;

use crate::table::paint;
use collectors::Severity;
use serde_json::{json, Value};

use super::read::Fleet;
use super::verdict::{PromFinding, Report, Row, Verdict};
use crate::html::escape;

/// Node names shown in the table and the page; JSON has them all.
const SHOWN_NODES: usize = 5;

fn when(t: Option<i64>) -> String {
    t.and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
        .map(crate::timefmt::rfc3339)
        .unwrap_or_else(|| "-".into())
}

fn names(fleet: &Fleet, row: &Row, max: usize) -> Vec<String> {
    row.grouped
        .nodes
        .iter()
        .take(max)
        .map(|&i| fleet.nodes[i].name.to_string())
        .collect()
}

fn shown_nodes(fleet: &Fleet, row: &Row) -> String {
    let k = row.grouped.nodes.len();
    let mut s = names(fleet, row, SHOWN_NODES).join(", ");
    if k > SHOWN_NODES {
        let _ = write!(s, " … and {} more", k - SHOWN_NODES);
    }
    s
}

fn shared_by(row: &Row) -> String {
    row.grouped
        .shared_by
        .iter()
        .map(|g| {
            format!(
                "{} {} ({} of {})",
                g.dim.name(),
                g.value,
                g.affected,
                g.total
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The table: a summary line per class, then a block per class.
pub fn table(report: &Report, fleet: &Fleet, colour: bool) -> String {
    let mut o = String::with_capacity(4096);
    let _ = writeln!(
        o,
        "node-doctor fleet · {} nodes · {} · {} requests ({} node pages, {} event pages)",
        report.nodes,
        report.generated_at,
        report.requests.nodes + report.requests.events,
        report.requests.nodes,
        report.requests.events
    );
    for why in &report.incomplete {
        let _ = writeln!(o, "incomplete: {}", v(why));
    }
    if report.rows.is_empty() {
        let _ = writeln!(
            o,
            "\nNo node holds a problem condition or a recent node-doctor event."
        );
    } else {
        let width = report
            .rows
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            o,
            "\n{:<8}  {:<width$}  {:>11}  {:<20}  {:<10}  SHARED BY",
            "SEVERITY", "CLASS", "NODES", "SINCE", "VERDICT"
        );
        for r in &report.rows {
            let sev = format!("{:<8}", r.severity.as_str());
            let group = r
                .grouped
                .shared_by
                .first()
                .map(|g| format!("{} {}", g.dim.name(), g.value))
                .unwrap_or_else(|| match r.verdict {
                    Verdict::Shared => format!(
                        "{:.0}% of the nodes",
                        100.0 * r.grouped.nodes.len() as f64 / report.nodes.max(1) as f64
                    ),
                    Verdict::NodeLocal => "-".into(),
                });
            let _ = writeln!(
                o,
                "{}  {:<width$}  {:>11}  {:<20}  {:<10}  {}",
                paint(&sev, r.severity, colour),
                v(&r.name),
                format!("{}/{}", r.grouped.nodes.len(), report.nodes),
                when(r.grouped.since),
                r.verdict.as_str(),
                v(&group)
            );
        }
    }
    for r in &report.rows {
        block(&mut o, fleet, r, report.nodes, colour);
    }
    if let Some(findings) = &report.findings {
        prom_table(&mut o, findings);
    }
    o
}

fn block(o: &mut String, fleet: &Fleet, r: &Row, total: usize, colour: bool) {
    let sev = format!("{:<8}", r.severity.as_str().to_uppercase());
    let _ = writeln!(
        o,
        "\n{} {} ({})  {} of {} nodes  since {}",
        paint(&sev, r.severity, colour),
        v(&r.name),
        r.source.as_str(),
        r.grouped.nodes.len(),
        total,
        when(r.grouped.since)
    );
    let _ = writeln!(o, "  nodes: {}", v(&shown_nodes(fleet, r)));
    if let Some(w) = &r.grouped.worst {
        let _ = writeln!(
            o,
            "  worst: {} {}: {}",
            v(&w.node),
            v(&w.reason),
            v(&w.message)
        );
    }
    if r.grouped.events > 0 {
        let _ = writeln!(
            o,
            "  events: {} in the window, on {} nodes",
            r.grouped.events, r.grouped.event_nodes
        );
    }
    if !r.grouped.shared_by.is_empty() {
        let _ = writeln!(o, "  shared by: {}", v(&shared_by(r)));
    }
    let _ = writeln!(o, "  verdict: {} — {}", r.verdict.as_str(), v(&r.because));
    crate::table::numbered(o, "next", r.next.iter().map(|c| v(c).into_owned()));
}

fn prom_table(o: &mut String, findings: &[PromFinding]) {
    let _ = writeln!(
        o,
        "\nFindings from Prometheus (node_doctor_finding_info): {}",
        findings.len()
    );
    let mut last = "";
    for f in findings {
        if f.id != last {
            let _ = writeln!(o, "  {} {}  {}", f.severity, v(&f.id), v(&f.title));
            last = &f.id;
        }
        let subject = if f.subject.is_empty() {
            String::new()
        } else {
            format!("  {}", v(&f.subject))
        };
        let _ = writeln!(o, "    {}{subject}", v(&f.node));
    }
}

/// The JSON document.
pub fn json(report: &Report, fleet: &Fleet) -> Vec<u8> {
    let classes: Vec<Value> = report
        .rows
        .iter()
        .map(|r| {
            json!({
                "class": r.name,
                "source": r.source.as_str(),
                "severity": r.severity.as_str(),
                "nodes": r.grouped.nodes.len(),
                "share": r.grouped.nodes.len() as f64 / report.nodes.max(1) as f64,
                "node_names": names(fleet, r, usize::MAX),
                "since": r.grouped.since.map(|_| when(r.grouped.since)),
                "worst": r.grouped.worst.as_ref().map(|w| json!({
                    "node": w.node, "status": w.status, "reason": w.reason, "message": w.message
                })),
                "events": r.grouped.events,
                "event_nodes": r.grouped.event_nodes,
                "shared_by": r.grouped.shared_by.iter().map(|g| json!({
                    "dimension": g.dim.name(), "value": g.value,
                    "nodes": g.affected, "of": g.total
                })).collect::<Vec<_>>(),
                "verdict": r.verdict,
                "because": r.because,
                "next": r.next,
            })
        })
        .collect();
    let doc = json!({
        "generated_at": report.generated_at,
        "nodes": report.nodes,
        "requests": report.requests,
        "incomplete": report.incomplete,
        "classes": classes,
        "findings": report.findings,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

fn sev_colour(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "#b00020",
        Severity::Warning => "#a15c00",
        Severity::Info => "#00639b",
    }
}

/// The id of a class's row: `class-` and the name, kept to `[A-Za-z0-9-]`.
pub fn row_id(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("class-{safe}")
}

/// The page.
pub fn html(report: &Report, fleet: &Fleet) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>node-doctor fleet: {} nodes</title><style>\
body{{font-family:system-ui,sans-serif;margin:1.5rem;color:#1b1b1b}}\
.tw{{overflow-x:auto;max-width:100%}}.tw table{{min-width:56rem}}td code{{overflow-wrap:anywhere}}table{{border-collapse:collapse;width:100%}}th,td{{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #ddd;vertical-align:top}}\
.sev{{font-weight:600}}code{{font-family:ui-monospace,monospace;font-size:.9em}}\
details summary{{cursor:pointer}}.incomplete{{color:#b00020}}\
</style></head><body>\n",
        report.nodes
    );
    let _ = writeln!(
        h,
        "<h1>node-doctor fleet</h1>\n<p id=\"fleet-summary\" data-nodes=\"{}\" data-classes=\"{}\">{} nodes · {} · {} requests</p>",
        report.nodes,
        report.rows.len(),
        report.nodes,
        escape(&report.generated_at),
        report.requests.nodes + report.requests.events
    );
    for why in &report.incomplete {
        let _ = writeln!(h, "<p class=\"incomplete\">incomplete: {}</p>", escape(why));
    }
    if report.rows.is_empty() {
        let _ = writeln!(
            h,
            "<p id=\"fleet-none\">No node holds a problem condition or a recent node-doctor event.</p>"
        );
    } else {
        let _ = writeln!(
            h,
            "<div class=\"tw\"><table id=\"fleet-classes\"><thead><tr><th>Severity</th><th>Class</th><th>Nodes</th>\
<th>Since</th><th>Shared by</th><th>Verdict</th><th>Next</th></tr></thead><tbody>"
        );
        for r in &report.rows {
            html_row(&mut h, fleet, r, report.nodes);
        }
        let _ = writeln!(h, "</tbody></table></div>");
    }
    if let Some(findings) = &report.findings {
        html_findings(&mut h, findings);
    }
    let _ = writeln!(h, "</body></html>");
    h
}

fn html_row(h: &mut String, fleet: &Fleet, r: &Row, total: usize) {
    let sev = r.severity.as_str();
    let _ = write!(
        h,
        "<tr id=\"{}\" class=\"fleet-class sev-{sev} verdict-{}\" data-class=\"{}\" data-nodes=\"{}\" data-verdict=\"{}\">",
        row_id(&r.name),
        r.verdict.as_str(),
        escape(&r.name),
        r.grouped.nodes.len(),
        r.verdict.as_str()
    );
    let _ = write!(
        h,
        "<td class=\"sev\" style=\"color:{}\">{sev}</td><td><code>{}</code><br><small>{}</small></td>",
        sev_colour(r.severity),
        escape(&r.name),
        r.source.as_str()
    );
    let _ = write!(
        h,
        "<td class=\"nodes\">{} of {total}<details><summary>which</summary>{}</details></td>",
        r.grouped.nodes.len(),
        escape(&names(fleet, r, 200).join(", "))
    );
    let worst = r
        .grouped
        .worst
        .as_ref()
        .map(|w| {
            format!(
                "<br><small class=\"worst\">{}: {}</small>",
                escape(&w.node),
                escape(&w.message)
            )
        })
        .unwrap_or_default();
    let _ = write!(
        h,
        "<td class=\"since\">{}{worst}</td><td class=\"shared-by\">{}</td><td class=\"verdict\">{}<br><small>{}</small></td><td class=\"next\">",
        when(r.grouped.since),
        escape(&shared_by(r)),
        r.verdict.as_str(),
        escape(&r.because)
    );
    for c in &r.next {
        let _ = write!(h, "<code>{}</code><br>", escape(c));
    }
    let _ = writeln!(h, "</td></tr>");
}

fn html_findings(h: &mut String, findings: &[PromFinding]) {
    let _ = writeln!(
        h,
        "<h2>Findings from Prometheus</h2>\n<div class=\"tw\"><table id=\"fleet-findings\"><thead><tr><th>Severity</th><th>Finding</th><th>Node</th><th>Subject</th></tr></thead><tbody>"
    );
    for f in findings {
        let _ = writeln!(
            h,
            "<tr class=\"fleet-finding\" data-id=\"{}\"><td>{}</td><td><code>{}</code> {}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.id),
            escape(&f.severity),
            escape(&f.id),
            escape(&f.title),
            escape(&f.node),
            escape(&f.subject)
        );
    }
    let _ = writeln!(h, "</tbody></table></div>");
}
