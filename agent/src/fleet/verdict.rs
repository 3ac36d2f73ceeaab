//! The verdict per class: **shared** — a dependency the nodes have in common is the likely
//! cause (the class holds on at least half of the nodes, or on the nodes of one zone, pool or
//! kernel and not the others) — or **node-local** (fix these nodes); with the next command to
//! run. One node is never a pattern: a class on one node, or a cluster of one, is node-local.

use collectors::shell::{self, IntoArg};
use collectors::Severity;

use super::classes::{Class, Classes, Dim, Source};
use super::group::{Group, Grouped};
use super::read::Fleet;

/// Share of all nodes from which a class is shared whatever its grouping.
pub const LARGE_SHARE: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    NodeLocal,
    Shared,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NodeLocal => "node-local",
            Verdict::Shared => "shared",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Row {
    pub grouped: Grouped,
    pub name: String,
    pub source: Source,
    pub severity: Severity,
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub because: String,
    /// The commands to run next, shell-quoted.
    pub next: Vec<String>,
}

/// A finding from Prometheus (`node_doctor_finding_info`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct PromFinding {
    pub id: String,
    pub node: String,
    pub subject: String,
    pub severity: String,
    pub title: String,
}

/// The whole report.
pub struct Report {
    pub nodes: usize,
    pub rows: Vec<Row>,
    pub requests: super::read::Requests,
    /// What could not be read (events refused, Prometheus down): the report is partial.
    pub incomplete: Vec<String>,
    pub findings: Option<Vec<PromFinding>>,
    pub generated_at: String,
}

impl Report {
    /// `check`'s codes: the worst severity, plus 4 when something could not be read.
    pub fn exit_code(&self) -> u8 {
        let from_prom = self
            .findings
            .iter()
            .flatten()
            .map(|f| match f.severity.as_str() {
                "critical" => Severity::Critical,
                "warning" => Severity::Warning,
                _ => Severity::Info,
            });
        let worst = self.rows.iter().map(|r| r.severity).chain(from_prom).max();
        crate::exit::code(worst, !self.incomplete.is_empty())
    }
}

fn command(template: &str, node: &str) -> Option<String> {
    let wants_node = shell::placeholders(template)
        .map(|p| p.contains(&"node"))
        .ok()?;
    let args = if wants_node {
        vec![("node", node.into_arg())]
    } else {
        Vec::new()
    };
    shell::render(template, &args).ok()
}

/// The rows, worst first: severity, then how many nodes, then name.
pub fn judge(fleet: &Fleet, classes: &Classes, grouped: Vec<Grouped>) -> Vec<Row> {
    let mut rows: Vec<Row> = grouped
        .into_iter()
        .map(|g| row(fleet, &classes.list[g.class], classes, g))
        .collect();
    rows.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.grouped.nodes.len().cmp(&a.grouped.nodes.len()))
            .then(a.name.cmp(&b.name))
    });
    rows
}

fn group_words(g: &Group) -> String {
    let all = if g.affected == g.total {
        format!("all {} nodes", g.total)
    } else {
        format!("{} of the {} nodes", g.affected, g.total)
    };
    format!("{all} of {} {}", g.dim.name(), g.value)
}

fn row(fleet: &Fleet, class: &Class, classes: &Classes, g: Grouped) -> Row {
    let n = fleet.nodes.len();
    let k = g.nodes.len();
    let first = g
        .worst
        .as_ref()
        .map(|w| w.node.clone())
        .or_else(|| g.nodes.first().map(|&i| fleet.nodes[i].name.to_string()))
        .unwrap_or_default();
    let share = k as f64 / n.max(1) as f64;
    let group = g.shared_by.first();
    let (verdict, because) = if k < 2 || n < 2 {
        (
            Verdict::NodeLocal,
            format!("{k} of {n} nodes: one node is not a pattern"),
        )
    } else if let Some(grp) = group {
        let dep = match grp.dim {
            Dim::Kernel | Dim::OsImage | Dim::Runtime | Dim::Kubelet => {
                format!("their {} {}", grp.dim.name(), grp.value)
            }
            _ => class
                .shared
                .clone()
                .unwrap_or_else(|| format!("what {} {}'s nodes share", grp.dim.name(), grp.value)),
        };
        (
            Verdict::Shared,
            format!("{}, few others: look at {dep}", group_words(grp)),
        )
    } else if share >= LARGE_SHARE {
        let dep = class
            .shared
            .clone()
            .unwrap_or_else(|| "a dependency these nodes have in common".into());
        (
            Verdict::Shared,
            format!("{k} of {n} nodes ({:.0}%): look at {dep}", share * 100.0),
        )
    } else {
        (
            Verdict::NodeLocal,
            format!(
                "{k} of {n} nodes, nothing in common that the healthy nodes lack: fix these nodes"
            ),
        )
    };
    let next = next_commands(class, classes, &g, verdict, &first);
    Row {
        name: class.name.clone(),
        source: class.source,
        severity: class.severity,
        verdict,
        because,
        next,
        grouped: g,
    }
}

fn next_commands(
    class: &Class,
    classes: &Classes,
    g: &Grouped,
    verdict: Verdict,
    first: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    if verdict == Verdict::Shared {
        if let Some(t) = &class.shared_command {
            out.extend(command(t, first));
        }
        if let Some(grp) = g.shared_by.first() {
            match grp.dim.label(&grp.value, grp.label_key) {
                Some(sel) => out.extend(
                    shell::render("kubectl get nodes -l {sel}", &[("sel", sel.into_arg())]).ok(),
                ),
                None => out.push("kubectl get nodes -o wide".into()),
            }
        }
    }
    out.extend(command("kubectl describe node {node}", first));
    let reason = g.worst.as_ref().map(|w| w.reason.as_str()).unwrap_or("");
    if let Some(rule) = classes.rule_for(g.class, reason) {
        out.extend(shell::render("node-doctor explain {rule}", &[("rule", rule.into_arg())]).ok());
    }
    out.dedup();
    out
}
