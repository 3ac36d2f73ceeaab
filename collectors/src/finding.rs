//! The one `Finding` type of the product: what a rule concluded, with evidence and remediation.
//!
//! Text a person reads is kept in both languages ([`Text`]); the agent picks one when it renders.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::shell::Cmd;

/// How bad a finding is. Ordered: `Info < Warning < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "info" => Some(Severity::Info),
            "warning" | "warn" => Some(Severity::Warning),
            "critical" | "crit" => Some(Severity::Critical),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The language remediation and summaries are rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    pub fn parse(s: &str) -> Option<Lang> {
        match s.trim().to_ascii_lowercase().as_str() {
            "en" | "en-us" | "english" => Some(Lang::En),
            "zh" | "zh-cn" | "cn" | "chinese" => Some(Lang::Zh),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }
}

/// A piece of text in English and Chinese, both written in our own words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text {
    pub en: String,
    pub zh: String,
}

impl Text {
    pub fn new(en: impl Into<String>, zh: impl Into<String>) -> Text {
        Text {
            en: en.into(),
            zh: zh.into(),
        }
    }

    pub fn get(&self, lang: Lang) -> &str {
        match lang {
            Lang::En => &self.en,
            Lang::Zh => &self.zh,
        }
    }
}

/// One evidence figure: a number or a string. Names carry their unit (`available_bytes`).
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    Int(i64),
    Float(f64),
    Str(String),
}

impl From<i64> for Evidence {
    fn from(v: i64) -> Self {
        Evidence::Int(v)
    }
}
impl From<u64> for Evidence {
    fn from(v: u64) -> Self {
        Evidence::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Evidence {
    fn from(v: u32) -> Self {
        Evidence::Int(i64::from(v))
    }
}
impl From<i32> for Evidence {
    fn from(v: i32) -> Self {
        Evidence::Int(i64::from(v))
    }
}
impl From<usize> for Evidence {
    fn from(v: usize) -> Self {
        Evidence::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for Evidence {
    fn from(v: f64) -> Self {
        // Round to 3 decimals so evidence reads cleanly; NaN/inf become strings.
        if v.is_finite() {
            Evidence::Float((v * 1000.0).round() / 1000.0)
        } else {
            Evidence::Str(v.to_string())
        }
    }
}
/// Evidence strings carry host text (paths, names, command lines): cut to
/// [`crate::bounded::EVIDENCE_BYTES`] with a marker.
impl From<String> for Evidence {
    fn from(v: String) -> Self {
        Evidence::Str(crate::bounded::truncate(v, crate::bounded::EVIDENCE_BYTES))
    }
}
impl From<&str> for Evidence {
    fn from(v: &str) -> Self {
        Evidence::from(v.to_string())
    }
}
impl From<bool> for Evidence {
    fn from(v: bool) -> Self {
        Evidence::Str(v.to_string())
    }
}

impl Evidence {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Evidence::Int(i) => Some(*i as f64),
            Evidence::Float(f) => Some(*f),
            Evidence::Str(_) => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Evidence::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Int(i) => write!(f, "{i}"),
            Evidence::Float(x) => write!(f, "{x}"),
            Evidence::Str(s) => f.write_str(s),
        }
    }
}

/// Where a remediation comes from: a handbook section, or (where no handbook covers the case)
/// the kernel's or the component's own documentation, with its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// A handbook: the file name under `shared/docs`, e.g. `002_af370464fa0f13dd.txt`.
    /// External documentation: its name (`Linux kernel documentation`).
    pub doc: &'static str,
    /// The section title as the document spells it (Chinese for the TKE handbook).
    pub section: &'static str,
    /// External documentation only: the address of the page (`https://docs.kernel.org/…`).
    pub url: Option<&'static str>,
}

/// The node handbook (TKE), the heart of the product.
pub const HANDBOOK: &str = "002_af370464fa0f13dd.txt";

/// What to do about a finding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Remediation {
    /// Steps in order, in both languages.
    pub steps: Vec<Text>,
    /// Exact shell commands, naming the real paths, devices and processes found, rendered by
    /// [`crate::shell`] (every argument quoted; one line each).
    pub commands: Vec<String>,
    /// The handbook section the advice comes from.
    pub source: Option<Source>,
}

/// One conclusion of one rule about this node.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Stable rule id `<collector>.<rule>`, e.g. `disk.filesystem_full`.
    pub id: String,
    /// The collector that produced it (`disk`, `load`, ...).
    pub collector: String,
    /// What the finding is about when a rule can fire for several things at once (a mount
    /// point, a device, a pid). Empty when the rule fires at most once per node. Together with
    /// `id` it identifies the finding across runs (first/last seen).
    pub subject: String,
    pub severity: Severity,
    pub title: Text,
    /// One sentence with the key figures.
    pub summary: Text,
    /// Figures behind the finding; names carry units (`used_percent`, `available_bytes`).
    pub evidence: BTreeMap<String, Evidence>,
    pub remediation: Remediation,
    /// Keys of `explain` catalogue entries that share this finding's cause
    /// (e.g. `FailedCreatePodSandBox` for a full kubelet disk).
    pub see_also: Vec<String>,
    /// The conditions of its rule that held (set by the judge; the words were chosen by them,
    /// and what the finding sets in the cluster is too: [`crate::rules::RuleBook::cluster`]).
    pub conditions: BTreeSet<String>,
}

impl Finding {
    /// Starts a finding; `collector` is taken from the part of `id` before the first dot.
    pub fn new(id: &str, severity: Severity, title: Text, summary: Text) -> Finding {
        let collector = id.split('.').next().unwrap_or(id).to_string();
        Finding {
            id: id.to_string(),
            collector,
            subject: String::new(),
            severity,
            title,
            summary,
            evidence: BTreeMap::new(),
            remediation: Remediation::default(),
            see_also: Vec::new(),
            conditions: BTreeSet::new(),
        }
    }

    /// Marks a condition of its rule as held (a finding built without the renderer).
    pub fn condition(mut self, name: &str) -> Finding {
        self.conditions.insert(name.to_string());
        self
    }

    /// Sets the subject, cut to [`crate::bounded::SUBJECT_BYTES`] with a marker (it names
    /// host things: mount points, devices, pods, cgroups).
    pub fn subject(mut self, subject: impl Into<String>) -> Finding {
        self.subject = crate::bounded::truncate(subject.into(), crate::bounded::SUBJECT_BYTES);
        self
    }

    /// Caps every piece of host text this finding carries: subject, evidence strings, and
    /// title, summary and steps in both languages ([`crate::bounded`]). Builders already cap
    /// subjects and evidence; this also catches fields set directly.
    pub fn bounded(mut self) -> Finding {
        use crate::bounded::{truncate_in_place, EVIDENCE_BYTES, SUBJECT_BYTES, TEXT_BYTES};
        truncate_in_place(&mut self.subject, SUBJECT_BYTES);
        for v in self.evidence.values_mut() {
            if let Evidence::Str(s) = v {
                truncate_in_place(s, EVIDENCE_BYTES);
            }
        }
        let texts = std::iter::once(&mut self.title)
            .chain(std::iter::once(&mut self.summary))
            .chain(self.remediation.steps.iter_mut());
        for t in texts {
            truncate_in_place(&mut t.en, TEXT_BYTES);
            truncate_in_place(&mut t.zh, TEXT_BYTES);
        }
        self
    }

    pub fn evidence(mut self, name: &str, value: impl Into<Evidence>) -> Finding {
        self.evidence.insert(name.to_string(), value.into());
        self
    }

    pub fn step(mut self, step: Text) -> Finding {
        self.remediation.steps.push(step);
        self
    }

    /// Adds a command: a [`Cmd`] template whose arguments are shell-quoted (build it with
    /// [`cmd!`](crate::cmd)), or a fixed `&'static str` of our own. A `String` is refused, so
    /// host data cannot be pasted into shell text:
    ///
    /// ```compile_fail
    /// # use collectors::{Finding, Severity, Text};
    /// let pod = String::from("x$(reboot)");
    /// Finding::new("a.b", Severity::Info, Text::default(), Text::default())
    ///     .command(format!("kubectl describe pod {pod}"));
    /// ```
    ///
    /// ```
    /// # use collectors::{Finding, Severity, Text};
    /// let pod = String::from("x$(reboot)");
    /// let f = Finding::new("a.b", Severity::Info, Text::default(), Text::default())
    ///     .command(collectors::cmd!("kubectl describe pod {pod}", pod = &pod));
    /// assert_eq!(f.remediation.commands, ["kubectl describe pod 'x$(reboot)'"]);
    /// ```
    ///
    /// A template whose placeholders and arguments do not match is a programming error:
    /// debug builds panic, release builds log it and leave the command out.
    pub fn command(mut self, command: impl Into<Cmd>) -> Finding {
        let command = command.into();
        match command.render() {
            Ok(text) => self.remediation.commands.push(text),
            Err(e) => {
                debug_assert!(false, "{e}");
                tracing::error!(id = self.id.as_str(), error = %e, "a command template does not render; left out");
            }
        }
        self
    }

    pub fn source(mut self, doc: &'static str, section: &'static str) -> Finding {
        self.remediation.source = Some(Source {
            doc,
            section,
            url: None,
        });
        self
    }

    /// Cites external documentation (the kernel's, a component's) where no handbook section
    /// covers the case.
    pub fn source_external(
        mut self,
        doc: &'static str,
        section: &'static str,
        url: &'static str,
    ) -> Finding {
        self.remediation.source = Some(Source {
            doc,
            section,
            url: Some(url),
        });
        self
    }

    pub fn see_also(mut self, key: impl Into<String>) -> Finding {
        self.see_also.push(key.into());
        self
    }

    /// The identity of this finding across runs.
    pub fn key(&self) -> (String, String) {
        (self.id.clone(), self.subject.clone())
    }
}

/// Sorts findings the way every output shows them: most severe first, then by id and subject.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.subject.cmp(&b.subject))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_orders_and_sorts() {
        let mk = |id: &str, s| Finding::new(id, s, Text::default(), Text::default());
        let mut v = vec![
            mk("load.high", Severity::Info),
            mk("disk.b", Severity::Critical),
            mk("disk.a", Severity::Warning),
            mk("disk.a", Severity::Critical),
        ];
        sort_findings(&mut v);
        let got: Vec<_> = v.iter().map(|f| (f.id.as_str(), f.severity)).collect();
        assert_eq!(
            got,
            vec![
                ("disk.a", Severity::Critical),
                ("disk.b", Severity::Critical),
                ("disk.a", Severity::Warning),
                ("load.high", Severity::Info)
            ]
        );
        assert_eq!(v[0].collector, "disk");
    }

    #[test]
    fn host_text_in_subjects_and_evidence_is_capped() {
        use crate::bounded::{EVIDENCE_BYTES, SUBJECT_BYTES, TEXT_BYTES};
        let huge = "a".repeat(10 << 20);
        let f = Finding::new("disk.x", Severity::Info, Text::default(), Text::default())
            .subject(huge.as_str())
            .evidence("path", huge.as_str())
            .evidence("owned", huge.clone())
            .evidence("short", "/var/lib/docker");
        assert!(f.subject.len() <= SUBJECT_BYTES && f.subject.contains("…[truncated "));
        for k in ["path", "owned"] {
            let s = f.evidence[k].as_str().unwrap();
            assert!(s.len() <= EVIDENCE_BYTES, "{k}: {}", s.len());
            assert!(
                s.ends_with(&format!(
                    "[truncated {} bytes]",
                    huge.len() - s.find('…').unwrap()
                )),
                "{k}"
            );
        }
        assert_eq!(f.evidence["short"].as_str(), Some("/var/lib/docker"));
        // Fields set directly are caught by bounded().
        let mut g = Finding::new(
            "disk.x",
            Severity::Info,
            Text::new(huge.clone(), "t"),
            Text::new(huge.clone(), huge.clone()),
        )
        .step(Text::new("ok", huge.clone()));
        g.subject = huge.clone();
        g.evidence.insert("raw".into(), Evidence::Str(huge.clone()));
        let g = g.bounded();
        assert!(g.subject.len() <= SUBJECT_BYTES);
        assert!(g.evidence["raw"].as_str().unwrap().len() <= EVIDENCE_BYTES);
        for t in [&g.title, &g.summary, &g.remediation.steps[0]] {
            assert!(t.en.len() <= TEXT_BYTES && t.zh.len() <= TEXT_BYTES);
        }
        assert_eq!(
            (g.title.zh.as_str(), g.remediation.steps[0].en.as_str()),
            ("t", "ok")
        );
    }

    #[test]
    fn evidence_floats_are_rounded_and_finite() {
        assert_eq!(Evidence::from(1.23456), Evidence::Float(1.235));
        assert_eq!(Evidence::from(f64::NAN), Evidence::Str("NaN".into()));
        assert_eq!(Evidence::from(u64::MAX), Evidence::Int(i64::MAX));
    }
}
