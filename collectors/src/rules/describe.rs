//! A rule as its own page reads (`/rules/<id>`, `node-doctor explain <id>`): its words as
//! written in the rule file, placeholders and conditions kept, with what each condition means,
//! its hysteresis, what it sets in the cluster and its example rendered. Nothing here decides
//! anything; the agent lays it out.

use super::model::{Cond, Piece, Rule, Term, TextT};
use super::template::{Seg, Spec, Unit};
use crate::finding::{Finding, Lang};

/// One piece of a text as written: its words with `{placeholders}`, and the condition under
/// which it is said (`None`: always), or the list it repeats over.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub when: Option<String>,
    pub each: Option<String>,
    pub text: String,
}

/// A command template and when it is given.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLine {
    pub when: Option<String>,
    pub each: Option<String>,
    pub run: String,
}

/// A citation and when it is made (`cites` `None`: the rule says why no document covers the
/// case, `why`).
#[derive(Debug, Clone, PartialEq)]
pub struct Citation {
    pub when: Option<String>,
    pub cites: Option<super::Cites>,
}

/// A NodeCondition the rule's finding sets, with its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct SetsCondition {
    pub condition: String,
    pub reason: String,
    pub when: Option<String>,
}

/// A rule, described in one language.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    pub id: String,
    /// The collector whose rule it is (the id's first segment).
    pub collector: String,
    /// The file(s) it comes from (an operator's override file appended).
    pub file: String,
    pub title: Vec<Part>,
    pub summary: Vec<Part>,
    /// Each step's parts.
    pub steps: Vec<Vec<Part>>,
    pub commands: Vec<CommandLine>,
    /// The conditions its `when`s name, with what each means.
    pub conditions: Vec<(String, String)>,
    pub citations: Vec<Citation>,
    pub see_also: Vec<String>,
    pub hysteresis: super::Hysteresis,
    pub sets: Vec<SetsCondition>,
    /// The Event its finding makes: the reason.
    pub event: Option<String>,
    /// The rule's example, rendered with the conditions it declares.
    pub example: Finding,
}

impl Rule {
    /// The rule as its page reads, in `lang`.
    pub fn describe(&self, lang: Lang) -> Description {
        let example = super::render::render(Some(self), self.example.clone(), "node-1");
        Description {
            id: self.id.clone(),
            collector: self.id.split('.').next().unwrap_or("").to_string(),
            file: self.file.clone(),
            title: parts(&self.title, lang),
            summary: parts(&self.summary, lang),
            steps: self.steps.iter().map(|s| parts(s, lang)).collect(),
            commands: self
                .commands
                .iter()
                .map(|c| CommandLine {
                    when: cond(&c.when),
                    each: c.each.clone(),
                    run: c.run.clone(),
                })
                .collect(),
            conditions: self
                .conditions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            citations: self
                .sources
                .iter()
                .map(|s| Citation {
                    when: cond(&s.when),
                    cites: s.cites,
                })
                .collect(),
            see_also: self.see_also.iter().map(|s| s.key.clone()).collect(),
            hysteresis: self.hysteresis,
            sets: self
                .cluster
                .iter()
                .map(|c| SetsCondition {
                    condition: c.condition.clone(),
                    reason: c.reason.clone(),
                    when: cond(&c.when),
                })
                .collect(),
            event: self.event.as_ref().map(|e| e.reason.clone()),
            example,
        }
    }
}

impl Description {
    /// The title as said when no condition holds, or its first piece: the rule's name in an
    /// index.
    pub fn name(&self) -> String {
        let always: String = self
            .title
            .iter()
            .filter(|p| p.when.is_none() && p.each.is_none())
            .map(|p| p.text.as_str())
            .collect();
        if always.is_empty() {
            self.title
                .first()
                .map(|p| p.text.clone())
                .unwrap_or_default()
        } else {
            always
        }
    }
}

/// A condition as written: `a and not b or has c`; `None` for "always". The `has x` guards
/// of an alternative that also names a condition are left out: they only say the evidence
/// its words print is there.
fn cond(c: &Cond) -> Option<String> {
    if c.is_always() {
        return None;
    }
    let alts: Vec<String> =
        c.0.iter()
            .map(|alt| {
                let flags = alt
                    .iter()
                    .any(|t| matches!(t, Term::Flag(_) | Term::NotFlag(_)));
                alt.iter()
                    .filter(|t| !flags || matches!(t, Term::Flag(_) | Term::NotFlag(_)))
                    .map(|t| match t {
                        Term::Flag(n) => n.clone(),
                        Term::NotFlag(n) => format!("not {n}"),
                        Term::Has(n) => format!("has {n}"),
                        Term::NotHas(n) => format!("not has {n}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .collect();
    Some(alts.join(" or "))
}

/// A text's pieces, groups flattened (their conditions joined with `and`).
fn parts(t: &TextT, lang: Lang) -> Vec<Part> {
    let mut out = Vec::new();
    flatten(&t.0, lang, None, None, &mut out);
    out
}

fn flatten(ps: &[Piece], lang: Lang, outer: Option<&str>, each: Option<&str>, out: &mut Vec<Part>) {
    let both = |inner: Option<String>| match (outer, inner) {
        (None, i) => i,
        (Some(o), None) => Some(o.to_string()),
        (Some(o), Some(i)) => Some(format!("{o} and {i}")),
    };
    for p in ps {
        match p {
            Piece::Text { when, en, zh } => out.push(Part {
                when: both(cond(when)),
                each: each.map(str::to_string),
                text: segs(match lang {
                    Lang::En => en,
                    Lang::Zh => zh,
                }),
            }),
            Piece::Group {
                when,
                each: list,
                parts,
                ..
            } => {
                let w = both(cond(when));
                flatten(parts, lang, w.as_deref(), list.as_deref().or(each), out);
            }
        }
    }
}

/// Template segments as written: `{name}` or `{name:spec}`.
fn segs(s: &[Seg]) -> String {
    let mut out = String::new();
    for seg in s {
        match seg {
            Seg::Lit(l) => out.push_str(l),
            Seg::Hole { name, spec } => {
                out.push('{');
                out.push_str(name);
                if let Some(f) = spec_text(spec) {
                    out.push(':');
                    out.push_str(&f);
                }
                out.push('}');
            }
        }
    }
    out
}

fn spec_text(s: &Spec) -> Option<String> {
    let unit = match s.unit {
        Unit::None => "",
        Unit::Kib => "kib",
        Unit::Mib => "mib",
        Unit::Gib => "gib",
        Unit::Min => "min",
        Unit::Bytes => "bytes",
    };
    match (unit, s.decimals) {
        ("", None) => None,
        (u, None) => Some(u.to_string()),
        (u, Some(d)) => Some(format!("{u}.{d}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleBook;

    /// Every built-in rule describes itself in both languages: a name, a summary, steps, a
    /// rendered example of its own id, and conditions that are the ones its file declares.
    #[test]
    fn every_rule_describes_itself() {
        let book = RuleBook::load_builtin().expect("built-in rules");
        let mut n = 0;
        for rule in book.rules() {
            for lang in [Lang::En, Lang::Zh] {
                let d = rule.describe(lang);
                assert!(!d.name().is_empty(), "{}", rule.id);
                assert!(!d.summary.is_empty(), "{}", rule.id);
                assert!(!d.steps.is_empty(), "{}", rule.id);
                assert_eq!(d.example.id, rule.id);
                assert_eq!(d.conditions.len(), rule.conditions().len());
                assert!(d.id.starts_with(&format!("{}.", d.collector)), "{}", d.id);
            }
            n += 1;
        }
        assert!(n > 40, "{n} rules");
    }

    #[test]
    fn placeholders_and_conditions_read_as_written() {
        let book = RuleBook::load_builtin().expect("built-in rules");
        let rule = book.get("load.io_bound").expect("load.io_bound");
        let d = rule.describe(Lang::En);
        assert!(
            d.title
                .iter()
                .any(|p| p.when.as_deref() == Some("not disk_saturated")
                    && p.text == "Tasks are stalled on IO"),
            "{:?}",
            d.title
        );
        assert!(
            d.summary
                .iter()
                .any(|p| p.text.contains("{busy_percent:.0}%")
                    && p.when.as_deref() == Some("disk_saturated")),
            "{:?}",
            d.summary
        );
        let disk = book.get("disk.filesystem_full").expect("disk rule");
        let d = disk.describe(Lang::Zh);
        assert!(d
            .citations
            .iter()
            .any(|c| c.cites.is_some_and(|c| c.section == "节点磁盘爆满排障处理")));
    }
}
