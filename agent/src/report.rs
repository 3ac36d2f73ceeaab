//! The public JSON contract (`GET /findings`, `check --format json`), documented in
//! `docs/findings.md`, and the filters both accept.

use std::collections::BTreeMap;

use collectors::{Evidence, Lang, Severity, Source};
use serde::Serialize;

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

#[derive(Serialize)]
pub struct Document<'a> {
    pub node: &'a str,
    pub generated_at: String,
    pub agent_version: &'static str,
    /// False when any collector shown did not complete (timed out, failed, or could not read
    /// all of its sources): the findings are then not the whole picture.
    pub complete: bool,
    /// The collectors shown that did not complete; `collectors[].status`/`message` say why.
    pub incomplete: Vec<&'a str>,
    pub findings: Vec<FindingJson<'a>>,
    pub collectors: Vec<CollectorJson<'a>>,
}

#[derive(Serialize)]
pub struct FindingJson<'a> {
    pub id: &'a str,
    pub collector: &'a str,
    /// What the finding is about (a mount point, a device, a pid); empty when the rule fires
    /// at most once per node.
    pub subject: &'a str,
    pub severity: Severity,
    pub title: &'a str,
    pub summary: &'a str,
    pub evidence: &'a BTreeMap<String, Evidence>,
    pub remediation: RemediationJson<'a>,
    pub see_also: &'a [String],
    pub first_seen: String,
    pub last_seen: String,
}

#[derive(Serialize)]
pub struct RemediationJson<'a> {
    pub steps: Vec<&'a str>,
    pub commands: &'a [String],
    pub source: Option<&'a Source>,
}

#[derive(Serialize)]
pub struct CollectorJson<'a> {
    pub name: &'a str,
    pub status: &'static str,
    pub last_run: Option<String>,
    pub duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

/// Builds the document for one snapshot and filter.
pub fn document<'a>(snap: &'a Snapshot, filter: &Filter) -> Document<'a> {
    let lang = filter.lang;
    let findings = snap
        .findings
        .iter()
        .filter(|a| filter.keeps(a))
        .map(|a| {
            let f = &a.finding;
            FindingJson {
                id: &f.id,
                collector: &f.collector,
                subject: &f.subject,
                severity: f.severity,
                title: f.title.get(lang),
                summary: f.summary.get(lang),
                evidence: &f.evidence,
                remediation: RemediationJson {
                    steps: f.remediation.steps.iter().map(|s| s.get(lang)).collect(),
                    commands: &f.remediation.commands,
                    source: f.remediation.source.as_ref(),
                },
                see_also: &f.see_also,
                first_seen: rfc3339(a.first_seen),
                last_seen: rfc3339(a.last_seen),
            }
        })
        .collect();
    let collectors = snap
        .collectors
        .iter()
        .filter(|c| filter.keeps_collector(&c.name))
        .map(collector_json)
        .collect();
    let incomplete: Vec<&str> = incomplete(snap, filter)
        .into_iter()
        .map(|c| c.name.as_str())
        .collect();
    Document {
        node: &snap.node,
        generated_at: rfc3339(snap.generated_at),
        agent_version: env!("CARGO_PKG_VERSION"),
        complete: incomplete.is_empty(),
        incomplete,
        findings,
        collectors,
    }
}

fn collector_json(c: &CollectorState) -> CollectorJson<'_> {
    CollectorJson {
        name: &c.name,
        status: c.status.as_str(),
        last_run: c.last_run.map(rfc3339),
        duration_ms: c
            .duration
            .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
        message: c.status.message(),
    }
}

/// The document as pretty JSON bytes, with a trailing newline.
pub fn to_json(snap: &Snapshot, filter: &Filter) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(&document(snap, filter)).unwrap_or_else(|e| {
        // Serialising plain strings and numbers cannot fail; keep the contract if it does.
        format!("{{\"error\":\"{e}\"}}").into_bytes()
    });
    out.push(b'\n');
    out
}

/// The collectors a filter keeps that did not complete (see [`crate::exit::is_incomplete`]).
pub fn incomplete<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<&'a CollectorState> {
    snap.collectors
        .iter()
        .filter(|c| filter.keeps_collector(&c.name) && crate::exit::is_incomplete(&c.status))
        .collect()
}

/// The highest severity among the findings a filter keeps.
pub fn worst(snap: &Snapshot, filter: &Filter) -> Option<Severity> {
    snap.findings
        .iter()
        .filter(|a| filter.keeps(a))
        .map(|a| a.finding.severity)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::{finding, with};
    use crate::scheduler::{Outcome, RunReport};
    use crate::state::State;
    use collectors::Status;
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
                    vec![
                        finding(
                            "disk.filesystem_full",
                            "/var/lib/docker",
                            Severity::Critical,
                        ),
                        finding("disk.inodes_low", "/", Severity::Info),
                    ],
                )),
                duration: Duration::from_micros(1300),
            },
            t0,
        );
        st.apply(
            "load",
            RunReport {
                outcome: Outcome::TimedOut {
                    timeout: Duration::from_secs(2),
                },
                duration: Duration::from_secs(2),
            },
            t0,
        );
        st.snapshot(t0 + Duration::from_secs(3))
    }

    #[test]
    fn document_follows_the_contract() {
        let s = snap();
        let v: serde_json::Value =
            serde_json::from_slice(&to_json(&s, &Filter::default())).unwrap();
        assert_eq!(v["node"], "node-a");
        assert_eq!(v["generated_at"], "2027-01-15T08:00:03Z");
        assert_eq!(v["agent_version"], env!("CARGO_PKG_VERSION"));
        let f = &v["findings"][0];
        assert_eq!(f["id"], "disk.filesystem_full");
        assert_eq!(f["collector"], "disk");
        assert_eq!(f["subject"], "/var/lib/docker");
        assert_eq!(f["severity"], "critical");
        assert_eq!(f["title"], "disk.filesystem_full title");
        assert_eq!(f["evidence"]["used_percent"], 97.5);
        assert_eq!(f["remediation"]["steps"][0], "free space");
        assert_eq!(f["remediation"]["commands"][0], "df -h /var/lib/docker");
        assert_eq!(
            f["remediation"]["source"]["doc"],
            "002_af370464fa0f13dd.txt"
        );
        assert_eq!(
            f["remediation"]["source"]["section"],
            "节点磁盘爆满排障处理"
        );
        assert_eq!(f["first_seen"], "2027-01-15T08:00:00Z");
        assert_eq!(v["findings"][1]["severity"], "info");
        let c = &v["collectors"];
        assert_eq!(c[0]["name"], "disk");
        assert_eq!(c[0]["status"], "ok");
        assert_eq!(c[0]["duration_ms"], 1.3);
        assert!(c[0].get("message").is_none());
        assert_eq!(c[1]["status"], "error");
        assert_eq!(c[1]["message"], "timed out after 2s");
        assert_eq!(v["complete"], false);
        assert_eq!(v["incomplete"], serde_json::json!(["load"]));
        let disk_only = Filter {
            collectors: vec!["disk".into()],
            ..Filter::default()
        };
        let v: serde_json::Value = serde_json::from_slice(&to_json(&s, &disk_only)).unwrap();
        assert_eq!(v["complete"], true, "load is filtered out");
        assert_eq!(v["incomplete"], serde_json::json!([]));
    }

    #[test]
    fn filters_severity_collector_and_language() {
        let s = snap();
        let f = Filter::from_query(Some("severity=warning&lang=zh")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&to_json(&s, &f)).unwrap();
        assert_eq!(v["findings"].as_array().unwrap().len(), 1);
        assert_eq!(v["findings"][0]["title"], "disk.filesystem_full 标题");
        assert_eq!(v["findings"][0]["remediation"]["steps"][0], "清理空间");
        let f = Filter::from_query(Some("collector=load")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&to_json(&s, &f)).unwrap();
        assert!(v["findings"].as_array().unwrap().is_empty());
        assert_eq!(v["collectors"].as_array().unwrap().len(), 1);
        assert_eq!(worst(&s, &f), None);
        assert_eq!(worst(&s, &Filter::default()), Some(Severity::Critical));
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
    }
}
