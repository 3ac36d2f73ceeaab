//! `check --format table`: one block per finding for a person at a terminal.
//!
//! Every piece of text that is not this file's own passes through
//! [`collectors::sanitize::visible`]: host names, messages, evidence and commands may hold
//! newlines, terminal escape sequences or bidi overrides, which are printed as visible escapes
//! (`\n`, `\x1b`, `\u{202e}`). The only control characters in the output are its own line
//! breaks and, on a terminal, its own colour codes.

use std::fmt::{self, Write};

use collectors::sanitize::visible as v;
use collectors::{Lang, Severity};

use crate::view::View;

/// `s` in its severity's colour when `colour` (a terminal); as it is otherwise.
pub(crate) fn paint(s: &str, sev: Severity, colour: bool) -> String {
    if !colour {
        return s.to_string();
    }
    let code = match sev {
        Severity::Critical => "1;31",
        Severity::Warning => "1;33",
        Severity::Info => "1;36",
    };
    format!("\x1b[{code}m{s}\x1b[0m")
}

/// One `  name: value` line of a block (a finding here, a catalogue entry in `explain`'s
/// table).
pub(crate) fn field(o: &mut String, name: &str, value: impl fmt::Display) {
    let _ = writeln!(o, "  {name}: {value}");
}

/// `  heading:` and the items under it numbered from 1 (`    1. …`), in a block; nothing
/// when there are no items.
pub(crate) fn numbered<T: fmt::Display>(
    o: &mut String,
    heading: &str,
    items: impl IntoIterator<Item = T>,
) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return;
    }
    let _ = writeln!(o, "  {heading}:");
    for (i, item) in items.enumerate() {
        let _ = writeln!(o, "    {}. {item}", i + 1);
    }
}

/// Renders the view; `colour` only when stdout is a terminal.
pub fn render(view: &View<'_>, colour: bool) -> String {
    let zh = view.lang == Lang::Zh;
    let t = |en, zh| view.t(en, zh);
    let mut o = String::with_capacity(4096);
    let _ = writeln!(
        o,
        "node-doctor {} · {} {} · {}",
        view.agent_version,
        t("node", "节点"),
        v(view.node),
        view.generated_at
    );
    if let Some(msg) = view.no_findings() {
        let _ = writeln!(o, "\n{msg}");
    }
    for f in &view.findings {
        let sev = format!("{:<8}", f.severity.as_str().to_uppercase());
        let _ = writeln!(
            o,
            "\n{} {}{}",
            paint(&sev, f.severity, colour),
            v(f.id),
            if f.subject.is_empty() {
                String::new()
            } else {
                format!("  {}", v(f.subject))
            }
        );
        let _ = writeln!(o, "  {}", v(f.title));
        let _ = writeln!(o, "  {}", v(f.summary));
        if !f.evidence.is_empty() {
            let ev: Vec<String> = f
                .evidence
                .iter()
                .map(|(k, e)| {
                    let words = crate::human::key(k);
                    format!("{} {}", v(&words), v(&crate::human::value(k, e, view.lang)))
                })
                .collect();
            field(&mut o, t("evidence", "证据"), ev.join("; "));
        }
        numbered(
            &mut o,
            t("what to do", "处理步骤"),
            f.steps.iter().map(|s| v(s)),
        );
        if !f.commands.is_empty() {
            let _ = writeln!(o, "  {}:", t("commands", "命令"));
            for c in f.commands {
                let _ = writeln!(o, "    $ {}", v(c));
            }
        }
        if let Some(src) = f.source {
            let url = src.url.map(|u| format!(" ({})", v(u))).unwrap_or_default();
            field(
                &mut o,
                t("source", "出处"),
                format_args!("{}{url}", v(&collectors::handbooks::cite(src, view.lang))),
            );
        }
        for s in &f.see_also {
            let title = s
                .title
                .map(|title| format!(" ({})", v(title)))
                .unwrap_or_default();
            field(
                &mut o,
                t("see also", "另见"),
                format_args!("node-doctor explain {}{title}", v(s.key)),
            );
        }
        let _ = writeln!(
            o,
            "  {} {}, {} {}",
            t("first seen", "首次发现"),
            f.first_seen,
            t("last seen", "最近确认"),
            f.last_seen
        );
    }
    let _ = writeln!(o, "\n{}:", t("collectors", "采集器"));
    let width = view
        .collectors
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &view.collectors {
        let line = format!(
            "  {:<width$}  {:<11}  {:>9}  {}",
            v(c.name),
            c.status,
            c.duration
                .map(|d| format!("{:.1} ms", d.as_secs_f64() * 1000.0))
                .unwrap_or_default(),
            v(c.message.unwrap_or(""))
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
    if view.collectors.is_empty() {
        let _ = writeln!(
            o,
            "  {}",
            t("(no collectors in this build)", "（本版本未包含采集器）")
        );
    }
    let n = view.counts;
    let (crit, warn, info) = (n.critical, n.warning, n.info);
    let _ = if zh {
        writeln!(o, "\n汇总: 严重 {crit}，警告 {warn}，提示 {info}")
    } else {
        writeln!(o, "\nsummary: {crit} critical, {warn} warning, {info} info")
    };
    if let Some(line) = view.incomplete_line() {
        let _ = writeln!(o, "{}", v(&line));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Snapshot;
    use crate::view::fixtures::{disk_full, nasty, only_visible};
    use crate::view::Filter;

    fn table(snap: &Snapshot, filter: &Filter, colour: bool) -> String {
        render(&View::new(snap, filter), colour)
    }

    /// Everything, in Chinese.
    fn in_chinese() -> Filter {
        Filter {
            lang: Lang::Zh,
            ..Filter::default()
        }
    }

    #[test]
    fn no_findings_is_not_called_healthy_when_a_collector_could_not_check() {
        let only_load = Filter {
            collectors: vec!["load".to_string()],
            ..Filter::default()
        };
        let out = table(&disk_full(), &only_load, false);
        assert!(!out.contains("nothing needs attention"), "{out}");
        assert!(
            out.contains("No findings, but 1 of 1 collectors could not check everything"),
            "{out}"
        );
        // The column fits the collectors shown.
        assert!(out.contains("\n  load  unavailable  "), "{out}");
        let zh = table(
            &disk_full(),
            &Filter {
                lang: Lang::Zh,
                ..only_load
            },
            false,
        );
        assert!(zh.contains("1 个采集器中有 1 个未能完整检查"), "{zh}");
    }

    /// The line under the summary names every collector that did not complete, how, and the
    /// exit code `check` returns; a complete check prints none.
    #[test]
    fn an_incomplete_check_says_so_under_the_summary_with_its_exit_code() {
        use crate::scheduler::Outcome;
        use crate::view::fixtures::snapshot;
        use collectors::{Collection, Status};
        let out = table(&disk_full(), &Filter::default(), false);
        let last = out.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            "incomplete, exit code 6 (2 for critical, plus 4 for incomplete): load found none \
             of its sources. Each one's line under \"collectors\" says why.",
            "{out}"
        );
        assert_eq!(View::new(&disk_full(), &Filter::default()).exit_code(), 6);
        let zh = table(&disk_full(), &in_chinese(), false);
        assert!(
            zh.lines().last().unwrap_or_default().starts_with(
                "检查不完整，退出码 6（2 = 最严重为严重，加 4 表示不完整）：load 找不到其数据源"
            ),
            "{zh}"
        );
        // Degraded and timed out, nothing found: 4.
        let degraded = Outcome::Completed(Collection::new(Status::Degraded("part".into())));
        let snap = snapshot("n", vec![], degraded);
        let out = table(&snap, &Filter::default(), false);
        assert!(
            out.ends_with(
                "incomplete, exit code 4 (0 for nothing above info, plus 4 for incomplete): \
                 load could not read all of its sources. Each one's line under \"collectors\" \
                 says why.\n"
            ),
            "{out}"
        );
        let timed_out =
            Outcome::Completed(Collection::new(Status::Error("timed out after 10s".into())));
        let out = table(&snapshot("n", vec![], timed_out), &Filter::default(), false);
        assert!(out.contains(": load timed out. "), "{out}");
        // Complete: the summary is the last line.
        let complete = Outcome::Completed(Collection::new(Status::Ok));
        let snap = snapshot("n", vec![], complete);
        let out = table(&snap, &Filter::default(), false);
        assert!(
            out.ends_with("summary: 0 critical, 0 warning, 0 info\n"),
            "{out}"
        );
        assert!(!out.contains("incomplete"), "{out}");
    }

    #[test]
    fn host_text_is_printed_with_visible_escapes() {
        for lang in [Lang::En, Lang::Zh] {
            let filter = Filter {
                lang,
                ..Filter::default()
            };
            let out = table(&nasty(), &filter, false);
            assert!(only_visible(&out), "{out:?}");
            assert!(!out.bytes().any(|b| b < 0x20 && b != b'\n'), "{out:?}");
            // What was there is still readable.
            assert!(out.contains("\\x1b[31mred"), "{out}");
            assert!(out.contains("gpj.\\u{202e}exe"), "{out}");
            assert!(out.contains("x\\n$(touch /tmp/p)"), "{out}");
            assert!(out.contains("cannot read x\\n"), "{out}");
            // The command the renderer produced is one line, with `$'...'` escapes.
            assert!(out.contains("    $ df -h $'x\\x0a$(touch"), "{out}");
            // Colour codes are the table's own, and only around the severity.
            let coloured = table(&nasty(), &filter, true);
            assert_eq!(coloured.matches('\x1b').count(), 2, "{coloured:?}");
        }
    }

    #[test]
    fn table_shows_evidence_commands_and_statuses() {
        let out = table(&disk_full(), &Filter::default(), false);
        assert!(
            out.contains("CRITICAL disk.filesystem_full  /var/lib/docker"),
            "{out}"
        );
        assert!(out.contains("evidence: used 97.5 %"), "{out}");
        assert!(out.contains("    $ df -h /var/lib/docker"));
        assert!(out.contains(
            "source: Tencent Cloud TKE, Node and Pod troubleshooting handbook § 节点磁盘爆满排障处理"
        ));
        assert!(
            !out.contains("002_af370464fa0f13dd.txt"),
            "the file name is a machine field"
        );
        let link = out
            .lines()
            .find(|l| l.starts_with("  see also: node-doctor explain disk-full ("))
            .unwrap_or_else(|| panic!("no see-also line naming the catalogue entry:\n{out}"));
        assert!(link.ends_with(')') && link.len() > 60, "{link}");
        assert!(out.contains("unavailable  "));
        assert!(out.contains("no /proc/loadavg"));
        assert!(out.contains("1 critical, 0 warning, 0 info"));
        assert!(!out.contains('\x1b'), "no colour when not a TTY");
        assert!(table(&disk_full(), &Filter::default(), true).contains("\x1b[1;31mCRITICAL"));
        let zh = table(&disk_full(), &in_chinese(), false);
        assert!(zh.contains("处理步骤") && zh.contains("清理空间"));
        assert!(zh.contains("汇总: 严重 1，警告 0，提示 0"), "{zh}");
    }
}
