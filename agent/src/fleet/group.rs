//! Per problem class: the nodes that hold it, since when, the worst message, and what those
//! nodes share that the healthy ones do not. A value of a dimension (a zone, a kernel) is
//! named only when it covers most of the class's nodes *and* most of its own nodes hold the
//! class *and* the nodes outside it mostly do not: three nodes with a broken disk that happen
//! to share a node pool of 1,250 name no pool.

use std::collections::BTreeSet;

use super::classes::Dim;
use super::read::{EventRow, Fleet};

/// Share of the class's nodes a value must hold to be named.
pub const COVERAGE: f64 = 0.8;
/// Share of the value's own nodes that must hold the class.
pub const PURITY: f64 = 0.5;
/// The rate outside the value is at most this fraction of the rate inside it.
pub const CONTRAST: f64 = 0.25;

/// A value the class's nodes are concentrated on.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub dim: Dim,
    pub value: String,
    /// The label key, for a node pool.
    pub label_key: Option<&'static str>,
    /// The class's nodes with this value, and all nodes with it.
    pub affected: usize,
    pub total: usize,
}

impl Group {
    pub fn purity(&self) -> f64 {
        self.affected as f64 / self.total.max(1) as f64
    }
}

/// The message shown for a class: the worst status, then the longest-standing.
#[derive(Debug, Clone)]
pub struct Worst {
    pub node: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// One class, grouped.
#[derive(Debug, Clone)]
pub struct Grouped {
    pub class: usize,
    /// Indices into `fleet.nodes`, in name order.
    pub nodes: Vec<usize>,
    /// The earliest `lastTransitionTime` (or Event) among them.
    pub since: Option<i64>,
    pub worst: Option<Worst>,
    /// node-doctor's recent Events of the class: how many (their counts summed), on how many
    /// nodes.
    pub events: u64,
    pub event_nodes: usize,
    pub shared_by: Vec<Group>,
}

/// Ranks a problem status: `Unknown` (the writer stopped reporting) over `False` over `True`.
fn status_rank(s: &str) -> u8 {
    match s {
        "Unknown" => 2,
        "False" => 1,
        _ => 0,
    }
}

/// Every class some node holds.
pub fn group(fleet: &Fleet, classes: usize) -> Vec<Grouped> {
    let mut out: Vec<Grouped> = Vec::new();
    let names: std::collections::HashMap<&str, usize> = fleet
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (&*n.name, i))
        .collect();
    for class in 0..classes {
        let mut members = BTreeSet::new();
        let mut since: Option<i64> = None;
        let mut worst: Option<(u8, i64, usize, &str, &str, &str)> = None;
        for (i, n) in fleet.nodes.iter().enumerate() {
            for p in n.problems.iter().filter(|p| p.class == class) {
                members.insert(i);
                since = min_opt(since, p.since);
                let key = (status_rank(&p.status), -p.since.unwrap_or(i64::MAX), i);
                if worst.is_none_or(|w| (key.0, key.1) > (w.0, w.1)) {
                    worst = Some((key.0, key.1, i, &p.status, &p.reason, &p.message));
                }
            }
        }
        let evs: Vec<&EventRow> = fleet.events.iter().filter(|e| e.class == class).collect();
        let mut event_nodes = BTreeSet::new();
        for e in &evs {
            if let Some(i) = names.get(&*e.node) {
                members.insert(*i);
                event_nodes.insert(*i);
                since = min_opt(since, e.last);
            }
        }
        if members.is_empty() {
            continue;
        }
        let worst = match worst {
            Some((_, _, i, status, reason, message)) => Some(Worst {
                node: fleet.nodes[i].name.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
            }),
            None => evs.iter().max_by_key(|e| (e.count, e.last)).map(|e| Worst {
                node: e.node.to_string(),
                status: String::new(),
                reason: e.reason.to_string(),
                message: e.message.to_string(),
            }),
        };
        let nodes: Vec<usize> = members.into_iter().collect();
        let shared_by = concentrated(fleet, &nodes);
        out.push(Grouped {
            class,
            since,
            worst,
            events: evs.iter().map(|e| e.count).sum(),
            event_nodes: event_nodes.len(),
            shared_by,
            nodes,
        });
    }
    out
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The values the `affected` nodes are concentrated on (see the module's comment), the
/// purest first.
pub fn concentrated(fleet: &Fleet, affected: &[usize]) -> Vec<Group> {
    let n = fleet.nodes.len();
    let k = affected.len();
    let mut out = Vec::new();
    if k < 2 {
        return out;
    }
    for (d, dim) in Dim::ALL.iter().enumerate() {
        let values = fleet.values[d].len();
        let mut total = vec![0usize; values];
        let mut hit = vec![0usize; values];
        for node in &fleet.nodes {
            if let Some(v) = node.dims[d] {
                total[v as usize] += 1;
            }
        }
        for &i in affected {
            if let Some(v) = fleet.nodes[i].dims[d] {
                hit[v as usize] += 1;
            }
        }
        for v in 0..values {
            let (a, t) = (hit[v], total[v]);
            if t == n || a == 0 {
                continue;
            }
            let coverage = a as f64 / k as f64;
            let purity = a as f64 / t as f64;
            let outside = (k - a) as f64 / (n - t) as f64;
            if coverage >= COVERAGE && purity >= PURITY && outside <= purity * CONTRAST {
                out.push(Group {
                    dim: *dim,
                    value: fleet.values[d][v].clone(),
                    label_key: match dim {
                        Dim::Pool => fleet.pool_keys.get(v).copied(),
                        _ => None,
                    },
                    affected: a,
                    total: t,
                });
            }
        }
    }
    out.sort_by(|a, b| b.purity().total_cmp(&a.purity()).then(a.dim.cmp(&b.dim)));
    out
}
