//! Scoring: an expectation is met by a finding of the same rule, subject and severity (each
//! finding meets at most one); a finding above info that meets none is a false alarm. Per
//! collector: precision = met / (met + false alarms), recall = met / expected.

use std::collections::BTreeMap;

use collectors::{Finding, Severity};

use crate::excerpt::{collector_of, Excerpt, Expect};

#[derive(Debug, Default)]
pub struct Outcome {
    pub met: Vec<Expect>,
    pub missed: Vec<Expect>,
    /// Findings above info that no expectation asked for: (rule, severity, subject).
    pub extra: Vec<Expect>,
    /// Everything raised, for the report of a failure.
    pub raised: Vec<Expect>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.missed.is_empty() && self.extra.is_empty()
    }

    pub fn describe(&self) -> String {
        format!(
            "missed {}; extra {}; raised {}",
            list(&self.missed),
            list(&self.extra),
            list(&self.raised)
        )
    }
}

fn list(v: &[Expect]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|e| format!("{} {} {:?}", e.rule, e.severity, e.subject))
        .collect::<Vec<_>>()
        .join(", ")
}

fn as_expect(f: &Finding) -> Expect {
    Expect {
        rule: f.id.clone(),
        severity: f.severity.as_str().to_string(),
        subject: f.subject.clone(),
    }
}

pub fn score(ex: &Excerpt, findings: &[Finding]) -> Outcome {
    let mut left: Vec<Expect> = findings.iter().map(as_expect).collect();
    let mut o = Outcome {
        raised: left.clone(),
        ..Outcome::default()
    };
    for e in &ex.expect {
        match left.iter().position(|f| f == e) {
            Some(i) => {
                left.remove(i);
                o.met.push(e.clone());
            }
            None => o.missed.push(e.clone()),
        }
    }
    o.extra = findings
        .iter()
        .filter(|f| f.severity > Severity::Info)
        .map(as_expect)
        .filter(|f| left.contains(f))
        .collect();
    o
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    met: usize,
    missed: usize,
    extra: usize,
}

#[derive(Debug, Default)]
pub struct Tally {
    by_collector: BTreeMap<String, Counts>,
    excerpts: usize,
    passed: usize,
    misses: Vec<String>,
    pub pending: Vec<(String, String)>,
}

impl Tally {
    pub fn add(&mut self, ex: &Excerpt, o: Outcome) {
        self.excerpts += 1;
        for e in &o.met {
            self.counts(&e.rule).met += 1;
        }
        for e in &o.missed {
            self.counts(&e.rule).missed += 1;
        }
        for e in &o.extra {
            self.counts(&e.rule).extra += 1;
        }
        if o.passed() {
            self.passed += 1;
        } else {
            let known = ex
                .known_miss
                .as_deref()
                .map_or(String::new(), |w| format!(" (known miss: {w})"));
            self.misses
                .push(format!("{}: {}{known}", ex.name, o.describe()));
        }
    }

    fn counts(&mut self, rule: &str) -> &mut Counts {
        self.by_collector
            .entry(collector_of(rule).to_string())
            .or_default()
    }

    /// Precision and recall over every collector.
    pub fn overall(&self) -> (f64, f64) {
        let c = self.total();
        ratios(c)
    }

    fn total(&self) -> Counts {
        self.by_collector
            .values()
            .fold(Counts::default(), |a, c| Counts {
                met: a.met + c.met,
                missed: a.missed + c.missed,
                extra: a.extra + c.extra,
            })
    }

    /// The per-collector table (Markdown), the misses and the pending excerpts.
    pub fn report(&self) -> String {
        let mut s = format!(
            "\n{} excerpts scored, {} pass; {} pending a collector this build lacks\n\n",
            self.excerpts,
            self.passed,
            self.pending.len()
        );
        s += "| collector | expected | met | missed | false alarms | precision | recall |\n";
        s += "|---|---:|---:|---:|---:|---:|---:|\n";
        let rows = self.by_collector.iter().map(|(k, c)| (k.as_str(), *c));
        for (name, c) in rows.chain([("**all**", self.total())]) {
            let (p, r) = ratios(c);
            s += &format!(
                "| {name} | {} | {} | {} | {} | {p:.3} | {r:.3} |\n",
                c.met + c.missed,
                c.met,
                c.missed,
                c.extra
            );
        }
        for m in &self.misses {
            s += &format!("MISS {m}\n");
        }
        for (name, c) in &self.pending {
            s += &format!("PENDING {name}: needs the {c} collector\n");
        }
        s
    }
}

fn ratios(c: Counts) -> (f64, f64) {
    let p = if c.met + c.extra == 0 {
        1.0
    } else {
        c.met as f64 / (c.met + c.extra) as f64
    };
    let r = if c.met + c.missed == 0 {
        1.0
    } else {
        c.met as f64 / (c.met + c.missed) as f64
    };
    (p, r)
}
