//! What a report shows: one [`View`] of a [`Snapshot`] with the filter and the language
//! applied once, which the three renderers only format — the JSON contract ([`crate::api`]),
//! the HTML page ([`crate::html`]) and the `check` table ([`crate::table`]).
//!
//! The view decides which findings and collectors are shown, in which language their text
//! reads, which collectors did not complete, the counts and the worst severity (the `check`
//! exit code), what to say when nothing is found, and the catalogue titles of `see_also`
//! keys. A renderer adds its own layout and labels, never another filter or translation.

use std::collections::BTreeMap;
use std::time::Duration;

use collectors::{Evidence, Lang, Severity, Source};

pub use crate::state::FindingState;
use crate::state::{Active, CollectorState, Snapshot};
use crate::timefmt::rfc3339;

/// `?severity=warning&collector=disk&lang=zh`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Keep findings at this severity and above.
    pub min_severity: Option<Severity>,
    /// Keep these collectors only (empty: all).
    pub collectors: Vec<String>,
    pub lang: Lang,
}

impl Filter {
    /// Parses a URL query string. Unknown keys are ignored; bad values are an error a
    /// person can read.
    pub fn from_query(query: Option<&str>) -> Result<Filter, String> {
        let mut f = Filter::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v);
            match k {
                "severity" => {
                    f.min_severity =
                        Some(Severity::parse(&v).ok_or_else(|| {
                            format!("severity={v:?}: use info, warning or critical")
                        })?)
                }
                "collector" => f.collectors.extend(
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(|s| s.trim().to_string()),
                ),
                "lang" => {
                    f.lang = Lang::parse(&v).ok_or_else(|| format!("lang={v:?}: use en or zh"))?
                }
                _ => {}
            }
        }
        Ok(f)
    }

    /// True when the filter keeps this collector.
    pub fn keeps_collector(&self, name: &str) -> bool {
        self.collectors.is_empty() || self.collectors.iter().any(|c| c == name)
    }

    /// True when the filter keeps this finding.
    pub fn keeps(&self, a: &Active) -> bool {
        self.keeps_collector(&a.finding.collector)
            && self
                .min_severity
                .is_none_or(|min| a.finding.severity >= min)
    }

    /// True when nothing is filtered out (only the language may differ).
    pub fn is_unfiltered(&self) -> bool {
        self.min_severity.is_none() && self.collectors.is_empty()
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `en` or `zh`, whichever `lang` reads: a renderer's own labels ([`View::t`], and
/// `explain`'s table, which has no view).
pub fn pick<T>(lang: Lang, en: T, zh: T) -> T {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// One snapshot as a report shows it: filtered, in one language.
#[derive(Debug, Clone, PartialEq)]
pub struct View<'a> {
    pub node: &'a str,
    /// RFC 3339.
    pub generated_at: String,
    pub agent_version: &'static str,
    pub lang: Lang,
    /// The findings the filter keeps, most severe first (the snapshot's order).
    pub findings: Vec<FindingView<'a>>,
    /// The collectors the filter keeps, by name.
    pub collectors: Vec<CollectorView<'a>>,
    /// Shown findings per severity.
    pub counts: Counts,
}

/// Shown findings per severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub critical: usize,
    pub warning: usize,
    pub info: usize,
}

/// One finding, its text in the view's language.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingView<'a> {
    pub id: &'a str,
    pub collector: &'a str,
    /// Empty when the rule fires at most once per node.
    pub subject: &'a str,
    pub severity: Severity,
    pub title: &'a str,
    pub summary: &'a str,
    pub evidence: &'a BTreeMap<String, Evidence>,
    pub steps: Vec<&'a str>,
    pub commands: &'a [String],
    pub source: Option<&'a Source>,
    pub see_also: Vec<SeeAlso<'a>>,
    /// RFC 3339.
    pub first_seen: String,
    pub last_seen: String,
    /// Active, or clearing: no longer reported, shown until its rule's `clear_after`.
    pub state: FindingState,
}

/// A `see_also` key and the title of the catalogue entry it names (`None`: the catalogue
/// has no such key).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeeAlso<'a> {
    pub key: &'a str,
    pub title: Option<&'static str>,
}

/// One collector's latest word.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorView<'a> {
    pub name: &'a str,
    /// `ok`, `degraded`, `unavailable` or `error`.
    pub status: &'static str,
    pub message: Option<&'a str>,
    /// RFC 3339 start of its latest run; `None` before the first run finished.
    pub last_run: Option<String>,
    pub duration: Option<Duration>,
    /// CPU time (user + system) of all its runs so far, on their own thread.
    pub cpu: Duration,
    /// It did not judge everything it is meant to ([`crate::exit::is_incomplete`]).
    pub incomplete: bool,
}

impl<'a> View<'a> {
    pub fn new(snap: &'a Snapshot, filter: &Filter) -> View<'a> {
        let lang = filter.lang;
        let findings: Vec<FindingView<'a>> = snap
            .findings
            .iter()
            .filter(|a| filter.keeps(a))
            .map(|a| finding_view(a, lang))
            .collect();
        let collectors = snap
            .collectors
            .iter()
            .filter(|c| filter.keeps_collector(&c.name))
            .map(collector_view)
            .collect();
        let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        let counts = Counts {
            critical: count(Severity::Critical),
            warning: count(Severity::Warning),
            info: count(Severity::Info),
        };
        View {
            node: &snap.node,
            generated_at: rfc3339(snap.generated_at),
            agent_version: env!("CARGO_PKG_VERSION"),
            lang,
            findings,
            collectors,
            counts,
        }
    }

    /// The shown collectors that did not complete.
    pub fn incomplete(&self) -> impl Iterator<Item = &CollectorView<'a>> {
        self.collectors.iter().filter(|c| c.incomplete)
    }

    /// Every shown collector completed: the findings are the whole picture.
    pub fn is_complete(&self) -> bool {
        self.incomplete().next().is_none()
    }

    /// The highest severity among the shown findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// `en` or `zh`, in the view's language (for a renderer's own labels).
    pub fn t(&self, en: &'static str, zh: &'static str) -> &'static str {
        pick(self.lang, en, zh)
    }

    /// `check`'s exit code for this view ([`crate::exit::code`]).
    pub fn exit_code(&self) -> u8 {
        crate::exit::code(self.worst(), !self.is_complete())
    }

    /// One line saying that the check is incomplete, naming each collector that did not
    /// complete and in what way, and the exit code that results (`None` when complete). The
    /// reasons themselves are each collector's status message.
    pub fn incomplete_line(&self) -> Option<String> {
        let zh = self.lang == Lang::Zh;
        let parts: Vec<String> = self
            .incomplete()
            .map(|c| {
                let how = match (c.status, zh) {
                    ("degraded", false) => "could not read all of its sources",
                    ("degraded", true) => "未能读取全部数据源",
                    ("unavailable", false) => "found none of its sources",
                    ("unavailable", true) => "找不到其数据源",
                    (_, false) if c.message.is_some_and(|m| m.starts_with("timed out")) => {
                        "timed out"
                    }
                    (_, true) if c.message.is_some_and(|m| m.starts_with("timed out")) => "超时",
                    (_, false) => "failed",
                    (_, true) => "失败",
                };
                format!("{} {how}", c.name)
            })
            .collect();
        if parts.is_empty() {
            return None;
        }
        let code = self.exit_code();
        let worst = code & 3;
        Some(if zh {
            let sev = ["无 info 以上的问题", "最严重为警告", "最严重为严重"][usize::from(worst)];
            format!(
                "检查不完整，退出码 {code}（{worst} = {sev}，加 4 表示不完整）：{}。原因见上方各采集器的一行。",
                parts.join("；")
            )
        } else {
            let sev = ["nothing above info", "a warning", "critical"][usize::from(worst)];
            format!(
                "incomplete, exit code {code} ({worst} for {sev}, plus 4 for incomplete): {}. Each one's line under \"collectors\" says why.",
                parts.join("; ")
            )
        })
    }

    /// What to say when no finding is shown (`None` when some are): silence from collectors
    /// that could not read their sources is not health, so it says how many of them there
    /// are.
    pub fn no_findings(&self) -> Option<String> {
        if !self.findings.is_empty() {
            return None;
        }
        let not_ok = self.incomplete().count();
        let shown = self.collectors.len();
        Some(match (not_ok, self.lang) {
            (0, Lang::En) => "No findings: nothing needs attention on this node.".to_string(),
            (0, Lang::Zh) => "没有发现问题：该节点目前无需处理。".to_string(),
            (_, Lang::En) => format!(
                "No findings, but {not_ok} of {shown} collectors could not check everything (see the collector statuses below)."
            ),
            (_, Lang::Zh) => format!(
                "没有发现问题，但 {shown} 个采集器中有 {not_ok} 个未能完整检查（原因见下方采集器状态）。"
            ),
        })
    }
}

fn finding_view(a: &Active, lang: Lang) -> FindingView<'_> {
    let f = &a.finding;
    FindingView {
        id: &f.id,
        collector: &f.collector,
        subject: &f.subject,
        severity: f.severity,
        title: f.title.get(lang),
        summary: f.summary.get(lang),
        evidence: &f.evidence,
        steps: f.remediation.steps.iter().map(|s| s.get(lang)).collect(),
        commands: &f.remediation.commands,
        source: f.remediation.source.as_ref(),
        see_also: f
            .see_also
            .iter()
            .map(|key| SeeAlso {
                key,
                // The symptom the operator meets elsewhere (an event, an exit code), explained.
                title: collectors::explain::lookup_key(key).map(|e| e.title.get(lang)),
            })
            .collect(),
        first_seen: rfc3339(a.first_seen),
        last_seen: rfc3339(a.last_seen),
        state: a.state,
    }
}

fn collector_view(c: &CollectorState) -> CollectorView<'_> {
    CollectorView {
        name: &c.name,
        status: c.status.as_str(),
        message: c.status.message(),
        last_run: c.last_run.map(rfc3339),
        duration: c.duration,
        cpu: c.cost.cpu,
        incomplete: crate::exit::is_incomplete(&c.status),
    }
}

/// Snapshots the renderers' tests share.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::time::Duration;

    use collectors::{Collection, Finding, Severity, Status, Text};
    use time::OffsetDateTime;

    use crate::scheduler::fakes::{finding, with};
    use crate::scheduler::{Outcome, RunReport};
    use crate::state::{Snapshot, State};

    /// 2027-01-15T08:00:00Z.
    pub(crate) fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    /// Collectors `disk` (ok, reporting `disk`, a 1.3 ms run of 0.85 ms CPU) and `load` (the outcome
    /// `load`, a 2 s run), both started at [`t0`]; the snapshot is taken 3 s later.
    pub(crate) fn snapshot(node: &str, disk: Vec<Finding>, load: Outcome) -> Snapshot {
        let names = vec!["disk".to_string(), "load".to_string()];
        let mut st = State::new(node, &names);
        st.apply(
            "disk",
            RunReport {
                outcome: Outcome::Completed(with(Status::Ok, disk)),
                duration: Duration::from_micros(1300),
                cpu_total: Duration::from_micros(850),
            },
            t0(),
        );
        st.apply(
            "load",
            RunReport {
                outcome: load,
                duration: Duration::from_secs(2),
                cpu_total: Duration::ZERO,
            },
            t0(),
        );
        st.snapshot(t0() + Duration::from_secs(3))
    }

    /// `load` could not read its sources.
    pub(crate) fn unavailable(why: impl Into<String>) -> Outcome {
        Outcome::Completed(Collection::unavailable(why))
    }

    /// A critical `disk.filesystem_full` on `/var/lib/docker` linking to the `disk-full`
    /// catalogue entry, and `load` unavailable.
    pub(crate) fn disk_full() -> Snapshot {
        snapshot(
            "node-a",
            vec![finding(
                "disk.filesystem_full",
                "/var/lib/docker",
                Severity::Critical,
            )
            .see_also(collectors::explain::see_also::DISK_FULL)],
            unavailable("no /proc/loadavg"),
        )
    }

    /// Host text full of terminal controls: newlines, ESC sequences, C1 CSI, bidi overrides.
    pub(crate) const NASTY: &str =
        "x\n$(touch /tmp/p)\x1b[31mred\x1b]0;title\x07\u{9b}2J gpj.\u{202e}exe\u{2066}\r\t\u{7f}";

    /// A snapshot whose every host-derived field carries [`NASTY`].
    pub(crate) fn nasty() -> Snapshot {
        let mut f = finding("disk.filesystem_full", NASTY, Severity::Critical)
            .evidence("mount_point", NASTY)
            .step(Text::new(format!("step {NASTY}"), format!("步骤 {NASTY}")))
            .command(collectors::cmd!("df -h {mount_point}", mount_point = NASTY));
        f.title = Text::new(format!("title {NASTY}"), format!("标题 {NASTY}"));
        f.summary = Text::new(format!("summary {NASTY}"), format!("摘要 {NASTY}"));
        // A command that did not come through the renderer is shown escaped all the same.
        f.remediation.commands.push(format!("echo {NASTY}"));
        snapshot(
            &format!("node{NASTY}"),
            vec![f],
            unavailable(format!("cannot read {NASTY}")),
        )
    }

    /// True when `out` holds no control character but its own line breaks, and no bidi
    /// override or other character [`collectors::sanitize::is_unsafe`] names.
    pub(crate) fn only_visible(out: &str) -> bool {
        out.chars()
            .all(|c| c == '\n' || !collectors::sanitize::is_unsafe(c))
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{disk_full, snapshot, unavailable};
    use super::*;
    use crate::scheduler::fakes::finding;
    use crate::scheduler::Outcome;

    #[test]
    fn filter_and_language_are_applied_once() {
        let s = snapshot(
            "n",
            vec![
                finding("disk.filesystem_full", "/", Severity::Critical)
                    .see_also(collectors::explain::see_also::DISK_FULL)
                    .see_also("no-such-key"),
                finding("disk.inodes_low", "/", Severity::Info),
            ],
            Outcome::TimedOut {
                timeout: Duration::from_secs(2),
            },
        );
        let v = View::new(&s, &Filter::from_query(Some("lang=zh")).unwrap());
        assert_eq!(v.findings.len(), 2);
        let f = &v.findings[0];
        assert_eq!(f.title, "disk.filesystem_full 标题");
        assert_eq!(f.steps, vec!["清理空间"]);
        assert_eq!(f.see_also[0].key, "disk-full");
        let entry = collectors::explain::lookup_key("disk-full").unwrap();
        assert_eq!(f.see_also[0].title, Some(entry.title.zh.as_str()));
        assert_eq!(f.see_also[1].title, None, "an unknown key has no title");
        assert_eq!(
            v.counts,
            Counts {
                critical: 1,
                warning: 0,
                info: 1
            }
        );
        assert_eq!(v.worst(), Some(Severity::Critical));
        assert_eq!(v.incomplete().map(|c| c.name).collect::<Vec<_>>(), ["load"]);
        assert!(!v.is_complete());
        assert_eq!(v.no_findings(), None);

        let warn = View::new(&s, &Filter::from_query(Some("severity=warning")).unwrap());
        assert_eq!(warn.findings.len(), 1);
        assert_eq!(warn.counts.info, 0);
        assert_eq!(warn.collectors.len(), 2, "severity filters findings only");

        let disk = View::new(&s, &Filter::from_query(Some("collector=disk")).unwrap());
        assert_eq!(disk.collectors.len(), 1);
        assert!(disk.is_complete(), "load is filtered out");
        let load = View::new(&s, &Filter::from_query(Some("collector=load")).unwrap());
        assert!(load.findings.is_empty());
        assert_eq!(load.worst(), None);
        assert_eq!(
            load.no_findings().as_deref(),
            Some("No findings, but 1 of 1 collectors could not check everything (see the collector statuses below).")
        );
    }

    #[test]
    fn no_findings_says_whether_every_collector_could_check() {
        let s = snapshot("n", vec![], unavailable("no /proc/loadavg"));
        let en = View::new(&s, &Filter::default());
        assert_eq!(
            en.no_findings().as_deref(),
            Some("No findings, but 1 of 2 collectors could not check everything (see the collector statuses below).")
        );
        let zh = View::new(
            &s,
            &Filter {
                lang: Lang::Zh,
                ..Filter::default()
            },
        );
        assert!(zh
            .no_findings()
            .unwrap()
            .contains("2 个采集器中有 1 个未能完整检查"));
        let disk = View::new(&s, &Filter::from_query(Some("collector=disk")).unwrap());
        assert_eq!(
            disk.no_findings().as_deref(),
            Some("No findings: nothing needs attention on this node.")
        );
        assert!(View::new(&disk_full(), &Filter::default())
            .no_findings()
            .is_none());
    }

    #[test]
    fn filters_parse_from_the_query() {
        let f = Filter::from_query(Some("severity=warning&lang=zh")).unwrap();
        assert_eq!(f.min_severity, Some(Severity::Warning));
        assert_eq!(f.lang, Lang::Zh);
        assert!(!f.is_unfiltered());
        assert!(Filter::from_query(Some("lang=zh")).unwrap().is_unfiltered());
        assert!(Filter::from_query(Some("severity=bad")).is_err());
        assert!(Filter::from_query(Some("lang=fr")).is_err());
        assert_eq!(
            Filter::from_query(Some("collector=disk%2Cload&x=1"))
                .unwrap()
                .collectors,
            vec!["disk", "load"]
        );
    }

    #[test]
    fn percent_decoding_is_total() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%e4%b8%ad"), "中");
    }

    proptest::proptest! {
        #[test]
        fn query_parsing_never_panics(q in "\\PC{0,40}") {
            let _ = Filter::from_query(Some(&q));
        }

        /// A query a browser or `curl` builds from a filter (each byte of a value
        /// percent-encoded or not, collectors in one comma list or repeated keys, other keys
        /// between, any order) parses back to that filter.
        #[test]
        fn a_query_built_from_a_filter_parses_back(
            severity in proptest::option::of(proptest::sample::select(vec![Severity::Info, Severity::Warning, Severity::Critical])),
            lang in proptest::sample::select(vec![Lang::En, Lang::Zh]),
            collectors in proptest::collection::vec("[a-z][a-z0-9_.-]{0,12}", 0..4),
            encode in proptest::collection::vec(proptest::bool::ANY, 64),
            repeat in proptest::bool::ANY,
            order in proptest::collection::vec(0u8..4, 0..8),
        ) {
            let mut coin = encode.iter().cycle();
            let mut enc = |v: &str| -> String {
                v.bytes().map(|b| if *coin.next().unwrap_or(&false) { format!("%{b:02X}") } else { (b as char).to_string() }).collect()
            };
            let mut pairs = vec![format!("lang={}", enc(lang.as_str()))];
            if let Some(s) = severity {
                pairs.push(format!("severity={}", enc(s.as_str())));
            }
            if repeat {
                pairs.extend(collectors.iter().map(|c| format!("collector={}", enc(c))));
            } else if !collectors.is_empty() {
                pairs.push(format!("collector={}", enc(&collectors.join(","))));
            }
            // Unknown keys and empty pairs anywhere: ignored.
            for (i, o) in order.iter().enumerate() {
                let at = (usize::from(*o) * 7 + i) % (pairs.len() + 1);
                pairs.insert(at, if o % 2 == 0 { format!("refresh={o}") } else { String::new() });
            }
            let q = pairs.join("&");
            let want = Filter { min_severity: severity, collectors, lang };
            proptest::prop_assert_eq!(Filter::from_query(Some(&q)), Ok(want), "{}", q);
        }
    }
}
