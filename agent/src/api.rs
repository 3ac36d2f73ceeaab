//! The public JSON contract (`GET /findings`, `check --format json`), documented in
//! `docs/findings.md`: the serde types of the document and the renderer that fills them from
//! a [`View`]. The collectors' types (`Severity`, `Evidence`, `Source`) carry no serde; how
//! they read in JSON is decided here.

use std::collections::BTreeMap;

use collectors::{Evidence, Source};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::view::View;

#[derive(serde::Serialize)]
pub struct Document<'a> {
    pub node: &'a str,
    pub generated_at: &'a str,
    pub agent_version: &'static str,
    /// False when any collector shown did not complete (timed out, failed, or could not read
    /// all of its sources): the findings are then not the whole picture.
    pub complete: bool,
    /// The collectors shown that did not complete; `collectors[].status`/`message` say why.
    pub incomplete: Vec<&'a str>,
    pub findings: Vec<FindingJson<'a>>,
    pub collectors: Vec<CollectorJson<'a>>,
}

#[derive(serde::Serialize)]
pub struct FindingJson<'a> {
    pub id: &'a str,
    pub collector: &'a str,
    /// What the finding is about (a mount point, a device, a pid); empty when the rule fires
    /// at most once per node.
    pub subject: &'a str,
    /// `info`, `warning` or `critical`.
    pub severity: &'static str,
    pub title: &'a str,
    pub summary: &'a str,
    pub evidence: EvidenceJson<'a>,
    pub remediation: RemediationJson<'a>,
    /// Keys of `explain` catalogue entries.
    pub see_also: Vec<&'a str>,
    pub first_seen: &'a str,
    pub last_seen: &'a str,
    /// `active`, or `clearing` (`serve` only): no longer reported by its collector and shown,
    /// with the evidence of `last_seen`, until its rule's `clear_after` runs have passed.
    pub state: &'static str,
}

/// Evidence by name: a number (integer or float) or a string.
pub struct EvidenceJson<'a>(pub &'a BTreeMap<String, Evidence>);

impl Serialize for EvidenceJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            match value {
                Evidence::Int(i) => map.serialize_entry(name, i)?,
                Evidence::Float(x) => map.serialize_entry(name, x)?,
                Evidence::Str(text) => map.serialize_entry(name, text)?,
            }
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
pub struct RemediationJson<'a> {
    pub steps: &'a [&'a str],
    pub commands: &'a [String],
    pub source: Option<SourceJson>,
}

/// Where a remediation comes from: a handbook section, or external documentation (`url`).
#[derive(serde::Serialize)]
pub struct SourceJson {
    pub doc: &'static str,
    pub section: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<&'static str>,
}

impl From<&Source> for SourceJson {
    fn from(s: &Source) -> Self {
        SourceJson {
            doc: s.doc,
            section: s.section,
            url: s.url,
        }
    }
}

#[derive(serde::Serialize)]
pub struct CollectorJson<'a> {
    pub name: &'a str,
    pub status: &'static str,
    pub last_run: Option<&'a str>,
    pub duration_ms: Option<f64>,
    /// CPU time of all its runs since the agent started (a `check`: its two samples).
    pub cpu_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

/// The document for one view.
pub fn document<'a>(view: &'a View<'_>) -> Document<'a> {
    let findings = view
        .findings
        .iter()
        .map(|f| FindingJson {
            id: f.id,
            collector: f.collector,
            subject: f.subject,
            severity: f.severity.as_str(),
            title: f.title,
            summary: f.summary,
            evidence: EvidenceJson(f.evidence),
            remediation: RemediationJson {
                steps: &f.steps,
                commands: f.commands,
                source: f.source.map(SourceJson::from),
            },
            see_also: f.see_also.iter().map(|s| s.key).collect(),
            first_seen: &f.first_seen,
            last_seen: &f.last_seen,
            state: f.state.as_str(),
        })
        .collect();
    let collectors = view
        .collectors
        .iter()
        .map(|c| CollectorJson {
            name: c.name,
            status: c.status,
            last_run: c.last_run.as_deref(),
            duration_ms: c
                .duration
                .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
            cpu_ms: (c.cpu.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
            message: c.message,
        })
        .collect();
    Document {
        node: view.node,
        generated_at: &view.generated_at,
        agent_version: view.agent_version,
        complete: view.is_complete(),
        incomplete: view.incomplete().map(|c| c.name).collect(),
        findings,
        collectors,
    }
}

/// The document as pretty JSON bytes, with a trailing newline.
pub fn to_json(view: &View<'_>) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(&document(view)).unwrap_or_else(|e| {
        // Serialising plain strings and numbers cannot fail; keep the contract if it does.
        format!("{{\"error\":\"{e}\"}}").into_bytes()
    });
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::fakes::finding;
    use crate::scheduler::Outcome;
    use crate::view::fixtures::snapshot;
    use crate::view::Filter;
    use collectors::{Lang, Severity};
    use std::time::Duration;

    /// A handbook source reads `{doc, section}` as it always did; external documentation adds
    /// its address (`url`), so the contract only grows.
    #[test]
    fn source_json_adds_the_address_of_external_documentation() {
        let handbook = Source {
            doc: "002_af370464fa0f13dd.txt",
            section: "节点磁盘爆满排障处理",
            url: None,
        };
        assert_eq!(
            serde_json::to_value(SourceJson::from(&handbook)).unwrap(),
            serde_json::json!({"doc": "002_af370464fa0f13dd.txt", "section": "节点磁盘爆满排障处理"})
        );
        let external = Source {
            doc: "Linux kernel documentation",
            section: "Netfilter Conntrack Sysfs variables",
            url: Some("https://docs.kernel.org/networking/nf_conntrack-sysctl.html"),
        };
        assert_eq!(
            serde_json::to_value(SourceJson::from(&external)).unwrap(),
            serde_json::json!({
                "doc": "Linux kernel documentation",
                "section": "Netfilter Conntrack Sysfs variables",
                "url": "https://docs.kernel.org/networking/nf_conntrack-sysctl.html"
            })
        );
    }

    fn json(snap: &crate::state::Snapshot, filter: &Filter) -> serde_json::Value {
        serde_json::from_slice(&to_json(&View::new(snap, filter))).unwrap()
    }

    fn snap() -> crate::state::Snapshot {
        snapshot(
            "node-a",
            vec![
                finding(
                    "disk.filesystem_full",
                    "/var/lib/docker",
                    Severity::Critical,
                )
                .evidence("devices", 2u64)
                .evidence("fstype", "xfs"),
                finding("disk.inodes_low", "/", Severity::Info),
            ],
            Outcome::TimedOut {
                timeout: Duration::from_secs(2),
            },
        )
    }

    #[test]
    fn document_follows_the_contract() {
        let s = snap();
        let v = json(&s, &Filter::default());
        assert_eq!(v["node"], "node-a");
        assert_eq!(v["generated_at"], "2027-01-15T08:00:03Z");
        assert_eq!(v["agent_version"], env!("CARGO_PKG_VERSION"));
        let f = &v["findings"][0];
        assert_eq!(f["id"], "disk.filesystem_full");
        assert_eq!(f["collector"], "disk");
        assert_eq!(f["subject"], "/var/lib/docker");
        assert_eq!(f["severity"], "critical");
        assert_eq!(f["title"], "disk.filesystem_full title");
        assert_eq!(f["state"], "active");
        // Evidence: an integer, a float and a string, as they are.
        assert_eq!(
            f["evidence"],
            serde_json::json!({"devices": 2, "fstype": "xfs", "used_percent": 97.5})
        );
        assert!(f["evidence"]["devices"].is_i64());
        assert_eq!(f["remediation"]["steps"][0], "free space");
        assert_eq!(f["remediation"]["commands"][0], "df -h /var/lib/docker");
        assert_eq!(
            f["remediation"]["source"],
            serde_json::json!({"doc": "002_af370464fa0f13dd.txt", "section": "节点磁盘爆满排障处理"})
        );
        assert_eq!(f["see_also"], serde_json::json!([]));
        assert_eq!(f["first_seen"], "2027-01-15T08:00:00Z");
        assert_eq!(v["findings"][1]["severity"], "info");
        let c = &v["collectors"];
        assert_eq!(c[0]["name"], "disk");
        assert_eq!(c[0]["status"], "ok");
        assert_eq!(c[0]["last_run"], "2027-01-15T08:00:00Z");
        assert_eq!(c[0]["duration_ms"], 1.3);
        assert_eq!(c[0]["cpu_ms"], 0.85);
        assert!(c[0].get("message").is_none());
        assert_eq!(c[1]["status"], "error");
        assert_eq!(c[1]["message"], "timed out after 2s");
        assert_eq!(v["complete"], false);
        assert_eq!(v["incomplete"], serde_json::json!(["load"]));
        let disk_only = Filter {
            collectors: vec!["disk".into()],
            ..Filter::default()
        };
        let v = json(&s, &disk_only);
        assert_eq!(v["complete"], true, "load is filtered out");
        assert_eq!(v["incomplete"], serde_json::json!([]));
    }

    #[test]
    fn filters_severity_collector_and_language() {
        let s = snap();
        let f = Filter::from_query(Some("severity=warning&lang=zh")).unwrap();
        let v = json(&s, &f);
        assert_eq!(v["findings"].as_array().unwrap().len(), 1);
        assert_eq!(v["findings"][0]["title"], "disk.filesystem_full 标题");
        assert_eq!(v["findings"][0]["remediation"]["steps"][0], "清理空间");
        let v = json(&s, &Filter::from_query(Some("collector=load")).unwrap());
        assert!(v["findings"].as_array().unwrap().is_empty());
        assert_eq!(v["collectors"].as_array().unwrap().len(), 1);
        let zh = Filter {
            lang: Lang::Zh,
            ..Filter::default()
        };
        assert_eq!(
            json(&s, &zh)["findings"][1]["summary"],
            "/ 上的 disk.inodes_low"
        );
    }

    #[test]
    fn collectors_types_serialise_only_here() {
        // Non-finite floats never reach evidence as numbers (they become strings), so every
        // evidence map is valid JSON.
        let e: BTreeMap<String, Evidence> = [
            ("inf".to_string(), Evidence::from(f64::INFINITY)),
            ("neg".to_string(), Evidence::from(-3i64)),
        ]
        .into();
        assert_eq!(
            serde_json::to_value(EvidenceJson(&e)).unwrap(),
            serde_json::json!({"inf": "inf", "neg": -3})
        );
    }
}
