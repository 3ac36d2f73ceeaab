//! `check --format table`: one block per finding for a person at a terminal.
//!
//! Every piece of text that is not this file's own passes through
//! [`collectors::sanitize::visible`]: host names, messages, evidence and commands may hold
//! newlines, terminal escape sequences or bidi overrides, which are printed as visible escapes
//! (`\n`, `\x1b`, `\u{202e}`). The only control characters in the output are its own line
//! breaks and, on a terminal, its own colour codes.

use std::fmt::Write;

use collectors::sanitize::visible as v;
use collectors::{Lang, Severity};

use crate::report::Filter;
use crate::state::Snapshot;
use crate::timefmt::rfc3339;

fn paint(s: &str, sev: Severity, colour: bool) -> String {
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

/// Renders the report; `colour` only when stdout is a terminal.
pub fn render(snap: &Snapshot, filter: &Filter, colour: bool) -> String {
    let zh = filter.lang == Lang::Zh;
    let t = |en: &'static str, zh_s: &'static str| if zh { zh_s } else { en };
    let mut o = String::with_capacity(4096);
    let _ = writeln!(
        o,
        "node-doctor {} · {} {} · {}",
        env!("CARGO_PKG_VERSION"),
        t("node", "节点"),
        v(&snap.node),
        rfc3339(snap.generated_at)
    );
    let findings: Vec<_> = snap.findings.iter().filter(|a| filter.keeps(a)).collect();
    let shown: Vec<_> = snap
        .collectors
        .iter()
        .filter(|c| filter.keeps_collector(&c.name))
        .collect();
    let not_ok = shown.iter().filter(|c| c.status.as_str() != "ok").count();
    if findings.is_empty() && not_ok == 0 {
        let _ = writeln!(
            o,
            "\n{}",
            t(
                "No findings: nothing needs attention on this node.",
                "没有发现问题：该节点目前无需处理。"
            )
        );
    } else if findings.is_empty() {
        // Silence from collectors that could not read their sources is not health.
        let _ = writeln!(
            o,
            "\n{}",
            if zh {
                format!(
                    "没有发现问题，但 {} 个采集器中有 {not_ok} 个未能完整检查（原因见下方采集器状态）。",
                    shown.len()
                )
            } else {
                format!(
                    "No findings, but {not_ok} of {} collectors could not check everything (see the collector statuses below).",
                    shown.len()
                )
            }
        );
    }
    for a in &findings {
        let f = &a.finding;
        let sev = format!("{:<8}", f.severity.as_str().to_uppercase());
        let _ = writeln!(
            o,
            "\n{} {}{}",
            paint(&sev, f.severity, colour),
            v(&f.id),
            if f.subject.is_empty() {
                String::new()
            } else {
                format!("  {}", v(&f.subject))
            }
        );
        let _ = writeln!(o, "  {}", v(f.title.get(filter.lang)));
        let _ = writeln!(o, "  {}", v(f.summary.get(filter.lang)));
        if !f.evidence.is_empty() {
            let ev: Vec<String> = f
                .evidence
                .iter()
                .map(|(k, e)| format!("{}={}", v(k), v(&e.to_string())))
                .collect();
            let _ = writeln!(o, "  {}: {}", t("evidence", "证据"), ev.join("  "));
        }
        if !f.remediation.steps.is_empty() {
            let _ = writeln!(o, "  {}:", t("what to do", "处理步骤"));
            for (i, s) in f.remediation.steps.iter().enumerate() {
                let _ = writeln!(o, "    {}. {}", i + 1, v(s.get(filter.lang)));
            }
        }
        if !f.remediation.commands.is_empty() {
            let _ = writeln!(o, "  {}:", t("commands", "命令"));
            for c in &f.remediation.commands {
                let _ = writeln!(o, "    $ {}", v(c));
            }
        }
        if let Some(src) = &f.remediation.source {
            let _ = writeln!(
                o,
                "  {}: {} § {}",
                t("source", "出处"),
                v(src.doc),
                v(src.section)
            );
        }
        for key in &f.see_also {
            // The symptom the operator meets elsewhere (an event, an exit code), explained.
            let title = collectors::explain::lookup_key(key)
                .map(|e| format!(" ({})", v(e.title.get(filter.lang))))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  {}: node-doctor explain {}{title}",
                t("see also", "另见"),
                v(key)
            );
        }
        let _ = writeln!(
            o,
            "  {} {}, {} {}",
            t("first seen", "首次发现"),
            rfc3339(a.first_seen),
            t("last seen", "最近确认"),
            rfc3339(a.last_seen)
        );
    }
    let _ = writeln!(o, "\n{}:", t("collectors", "采集器"));
    let width = snap
        .collectors
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &shown {
        let line = format!(
            "  {:<width$}  {:<11}  {:>9}  {}",
            v(&c.name),
            c.status.as_str(),
            c.duration
                .map(|d| format!("{:.1} ms", d.as_secs_f64() * 1000.0))
                .unwrap_or_default(),
            v(c.status.message().unwrap_or(""))
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
    if snap.collectors.is_empty() {
        let _ = writeln!(
            o,
            "  {}",
            t("(no collectors in this build)", "（本版本未包含采集器）")
        );
    }
    let count = |s: Severity| findings.iter().filter(|a| a.finding.severity == s).count();
    let (crit, warn, info) = (
        count(Severity::Critical),
        count(Severity::Warning),
        count(Severity::Info),
    );
    let _ = if zh {
        writeln!(o, "\n汇总: 严重 {crit}，警告 {warn}，提示 {info}")
    } else {
        writeln!(o, "\nsummary: {crit} critical, {warn} warning, {info} info")
    };
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scheduler::fakes::{finding, with};
    use crate::scheduler::{Outcome, RunReport};
    use crate::state::State;
    use collectors::{Status, Text};
    use std::time::Duration;
    use time::OffsetDateTime;

    fn snap() -> Snapshot {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new("node-a", &names);
        let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::Completed(with(
                    Status::Ok,
                    vec![finding(
                        "disk.filesystem_full",
                        "/var/lib/docker",
                        Severity::Critical,
                    )
                    .see_also(collectors::explain::see_also::DISK_FULL)],
                )),
                duration: Duration::from_millis(1),
            },
            t0,
        );
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::Completed(collectors::Collection::unavailable(
                    "no /proc/loadavg",
                )),
                duration: Duration::from_millis(1),
            },
            t0,
        );
        st.snapshot(t0)
    }

    #[test]
    fn no_findings_is_not_called_healthy_when_a_collector_could_not_check() {
        let only_load = Filter {
            collectors: vec!["load".to_string()],
            ..Filter::default()
        };
        let out = render(&snap(), &only_load, false);
        assert!(!out.contains("nothing needs attention"), "{out}");
        assert!(
            out.contains("No findings, but 1 of 1 collectors could not check everything"),
            "{out}"
        );
        let zh = render(
            &snap(),
            &Filter {
                lang: Lang::Zh,
                ..only_load
            },
            false,
        );
        assert!(zh.contains("1 个采集器中有 1 个未能完整检查"), "{zh}");
    }

    /// Host text full of terminal controls: newlines, ESC sequences, C1 CSI, bidi overrides.
    pub(crate) const NASTY: &str =
        "x\n$(touch /tmp/p)\x1b[31mred\x1b]0;title\x07\u{9b}2J gpj.\u{202e}exe\u{2066}\r\t\u{7f}";

    /// A snapshot whose every host-derived field carries [`NASTY`].
    pub(crate) fn nasty_snapshot() -> Snapshot {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new(format!("node{NASTY}"), &names);
        let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let mut f = finding("disk.filesystem_full", NASTY, Severity::Critical)
            .evidence("mount_point", NASTY)
            .step(Text::new(format!("step {NASTY}"), format!("步骤 {NASTY}")))
            .command(collectors::cmd!("df -h {mount_point}", mount_point = NASTY));
        f.title = Text::new(format!("title {NASTY}"), format!("标题 {NASTY}"));
        f.summary = Text::new(format!("summary {NASTY}"), format!("摘要 {NASTY}"));
        // A command that did not come through the renderer is shown escaped all the same.
        f.remediation.commands.push(format!("echo {NASTY}"));
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::Completed(with(Status::Ok, vec![f])),
                duration: Duration::from_millis(1),
            },
            t0,
        );
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::Completed(collectors::Collection::unavailable(format!(
                    "cannot read {NASTY}"
                ))),
                duration: Duration::from_millis(1),
            },
            t0,
        );
        st.snapshot(t0)
    }

    /// True when `out` holds no control character but its own line breaks, and no bidi
    /// override or other character [`collectors::sanitize::is_unsafe`] names.
    pub(crate) fn only_visible(out: &str) -> bool {
        out.chars()
            .all(|c| c == '\n' || !collectors::sanitize::is_unsafe(c))
    }

    #[test]
    fn host_text_is_printed_with_visible_escapes() {
        for lang in [Lang::En, Lang::Zh] {
            let filter = Filter {
                lang,
                ..Filter::default()
            };
            let out = render(&nasty_snapshot(), &filter, false);
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
            let coloured = render(&nasty_snapshot(), &filter, true);
            assert_eq!(coloured.matches('\x1b').count(), 2, "{coloured:?}");
        }
    }

    #[test]
    fn table_shows_evidence_commands_and_statuses() {
        let out = render(&snap(), &Filter::default(), false);
        assert!(
            out.contains("CRITICAL disk.filesystem_full  /var/lib/docker"),
            "{out}"
        );
        assert!(out.contains("evidence: used_percent=97.5"));
        assert!(out.contains("    $ df -h /var/lib/docker"));
        assert!(out.contains("source: 002_af370464fa0f13dd.txt § 节点磁盘爆满排障处理"));
        let link = out
            .lines()
            .find(|l| l.starts_with("  see also: node-doctor explain disk-full ("))
            .unwrap_or_else(|| panic!("no see-also line naming the catalogue entry:\n{out}"));
        assert!(link.ends_with(')') && link.len() > 60, "{link}");
        assert!(out.contains("unavailable  "));
        assert!(out.contains("no /proc/loadavg"));
        assert!(out.contains("1 critical, 0 warning, 0 info"));
        assert!(!out.contains('\x1b'), "no colour when not a TTY");
        assert!(render(&snap(), &Filter::default(), true).contains("\x1b[1;31mCRITICAL"));
        let zh = render(
            &snap(),
            &Filter {
                lang: Lang::Zh,
                ..Filter::default()
            },
            false,
        );
        assert!(zh.contains("处理步骤") && zh.contains("清理空间"));
        assert!(zh.contains("汇总: 严重 1，警告 0，提示 0"), "{zh}");
    }
}
