//! The one renderer: a [`Draft`] and its [`Rule`] -> a [`Finding`].

use std::collections::BTreeSet;

use super::draft::{Draft, Item, Var};
use super::model::{Cond, Piece, Rule, Term, TextT};
use super::template::{self, Seg, Value};
use crate::finding::{Evidence, Finding, Lang, Severity, Text};
use crate::shell::{Arg, Cmd};

/// What a template sees: the draft, the node's name and, inside an `each`, the item.
struct Env<'a> {
    d: &'a Draft,
    node: &'a Evidence,
    item: Option<&'a Item>,
}

impl<'a> Env<'a> {
    fn with_item(&self, item: &'a Item) -> Env<'a> {
        Env {
            d: self.d,
            node: self.node,
            item: Some(item),
        }
    }

    fn flag(&self, name: &str) -> bool {
        match name {
            "info" => self.d.severity == Severity::Info,
            "warning" => self.d.severity == Severity::Warning,
            "critical" => self.d.severity == Severity::Critical,
            n => {
                self.d.conditions.contains(n) || self.item.is_some_and(|i| i.conditions.contains(n))
            }
        }
    }

    fn has(&self, name: &str) -> bool {
        self.value(name).is_some() || matches!(self.d.vars.get(name), Some(Var::Items(_)))
    }

    fn holds(&self, c: &Cond) -> bool {
        c.is_always()
            || c.0.iter().any(|alt| {
                alt.iter().all(|t| match t {
                    Term::Flag(n) => self.flag(n),
                    Term::NotFlag(n) => !self.flag(n),
                    Term::Has(n) => self.has(n),
                    Term::NotHas(n) => !self.has(n),
                })
            })
    }

    fn value(&self, name: &str) -> Option<Value<'a>> {
        if let Some(v) = self.item.and_then(|i| i.values.get(name)) {
            return Some(Value::One(v));
        }
        if let Some(v) = self.d.evidence.get(name) {
            return Some(Value::One(v));
        }
        match self.d.vars.get(name) {
            Some(Var::One(v)) => return Some(Value::One(v)),
            Some(Var::Words(w)) => return Some(Value::Words(w)),
            Some(Var::Items(_)) => return None,
            None => {}
        }
        (name == "node").then_some(Value::One(self.node))
    }

    fn items(&self, list: &str) -> &'a [Item] {
        match self.d.vars.get(list) {
            Some(Var::Items(items)) => items,
            _ => &[],
        }
    }

    fn segs(&self, segs: &[Seg], lang: Lang, out: &mut String, problems: &mut Vec<String>) {
        for s in segs {
            match s {
                Seg::Lit(l) => out.push_str(l),
                Seg::Hole { name, spec } => match self.value(name) {
                    Some(v) => match template::format(v, spec, lang) {
                        Ok(text) => out.push_str(&text),
                        Err(e) => {
                            problems.push(format!("{{{name}}}: {}", e.0));
                            out.push_str(&format!("‹bad value: {name}›"));
                        }
                    },
                    None => {
                        problems.push(format!("{{{name}}} has no value"));
                        out.push_str(&format!("‹missing: {name}›"));
                    }
                },
            }
        }
    }

    fn pieces(&self, ps: &[Piece], lang: Lang, out: &mut String, problems: &mut Vec<String>) {
        for p in ps {
            match p {
                Piece::Text { when, en, zh } => {
                    if self.holds(when) {
                        let segs = match lang {
                            Lang::En => en,
                            Lang::Zh => zh,
                        };
                        self.segs(segs, lang, out, problems);
                    }
                }
                Piece::Group {
                    when,
                    each,
                    sep,
                    parts,
                } => {
                    if !self.holds(when) {
                        continue;
                    }
                    let Some(list) = each else {
                        self.pieces(parts, lang, out, problems);
                        continue;
                    };
                    let sep = match lang {
                        Lang::En => &sep.0,
                        Lang::Zh => &sep.1,
                    };
                    let mut first = true;
                    for item in self.items(list) {
                        let mut one = String::new();
                        self.with_item(item).pieces(parts, lang, &mut one, problems);
                        if one.is_empty() {
                            continue;
                        }
                        if !first {
                            out.push_str(sep);
                        }
                        out.push_str(&one);
                        first = false;
                    }
                }
            }
        }
    }

    fn text(&self, t: &TextT, problems: &mut Vec<String>) -> Text {
        let mut en = String::new();
        let mut zh = String::new();
        self.pieces(&t.0, Lang::En, &mut en, problems);
        self.pieces(&t.0, Lang::Zh, &mut zh, problems);
        Text::new(en, zh)
    }
}

/// The finding of a draft whose rule is missing: its id and evidence, no words.
pub(crate) fn without_rule(d: Draft) -> Finding {
    let title = Text::new(d.id.clone(), d.id.clone());
    let summary = Text::new(
        format!("{}: no rule text", d.id),
        format!("{}: no rule text", d.id),
    );
    let mut f = Finding::new(&d.id, d.severity, title, summary).subject(d.subject);
    f.evidence = d.evidence;
    f.conditions = d.conditions;
    f
}

/// A judge that sets a condition or var its rule does not declare has a typo or a stale rule:
/// nothing in the text would ever test it.
fn undeclared(rule: &Rule, d: &Draft, problems: &mut Vec<String>) {
    let items = d.vars.values().flat_map(|v| match v {
        Var::Items(items) => items.as_slice(),
        _ => &[],
    });
    let conditions = d
        .conditions
        .iter()
        .chain(items.flat_map(|i| i.conditions.iter()));
    for c in conditions {
        if !rule.conditions.contains_key(c) {
            problems.push(format!(
                "the judge sets condition {c:?}, which the rule does not declare"
            ));
        }
    }
    for v in d.vars.keys() {
        if !rule.example.vars.contains_key(v) {
            problems.push(format!(
                "the judge sets var {v:?}, which the rule's example does not declare"
            ));
        }
    }
}

pub(crate) fn build(rule: &Rule, d: &Draft, node: &str, problems: &mut Vec<String>) -> Finding {
    undeclared(rule, d, problems);
    let node = Evidence::from(node);
    let env = Env {
        d,
        node: &node,
        item: None,
    };
    let title = env.text(&rule.title, problems);
    let summary = env.text(&rule.summary, problems);
    for (what, t) in [("title", &title), ("summary", &summary)] {
        if t.en.is_empty() || t.zh.is_empty() {
            problems.push(format!("the {what} renders empty"));
        }
    }
    let mut f = Finding::new(&d.id, d.severity, title, summary).subject(d.subject.clone());
    f.evidence = d.evidence.clone();
    for (i, s) in rule.steps.iter().enumerate() {
        let t = env.text(s, problems);
        match (t.en.is_empty(), t.zh.is_empty()) {
            (true, true) => {}
            (false, false) => f = f.step(t),
            _ => problems.push(format!("steps[{i}] renders in one language only")),
        }
    }
    for c in &rule.commands {
        let envs: Vec<Env> = match &c.each {
            Some(list) => env.items(list).iter().map(|i| env.with_item(i)).collect(),
            None => vec![Env {
                d,
                node: &node,
                item: None,
            }],
        };
        for e in envs.iter().filter(|e| e.holds(&c.when)) {
            let names = crate::shell::placeholders(&c.run).unwrap_or_default();
            let mut args: Vec<(String, Arg)> = Vec::new();
            let mut complete = true;
            for n in names {
                if args.iter().any(|(a, _)| a == n) {
                    continue;
                }
                let arg = if let Some((_, segs)) = c.args.iter().find(|(a, _)| a == n) {
                    let mut s = String::new();
                    e.segs(segs, Lang::En, &mut s, problems);
                    Arg::Word(s)
                } else {
                    match e.value(n) {
                        Some(Value::One(v)) => Arg::Word(v.to_string()),
                        Some(Value::Words(w)) => Arg::Words(w.to_vec()),
                        None => {
                            problems.push(format!("command {:?}: {{{n}}} has no value", c.run));
                            complete = false;
                            break;
                        }
                    }
                };
                args.push((n.to_string(), arg));
            }
            if complete {
                f = f.command(Cmd::from_rule(c.run.clone(), args));
            }
        }
    }
    match rule.sources.iter().find(|s| env.holds(&s.when)) {
        Some(s) => match s.cites {
            Some(super::model::Cites {
                doc,
                section,
                url: Some(url),
                ..
            }) => f = f.source_external(doc, section, url),
            Some(c) => f = f.source(c.doc, c.section),
            None => {}
        },
        None => problems.push("no source applies".into()),
    }
    for s in rule.see_also.iter().filter(|s| env.holds(&s.when)) {
        f = f.see_also(s.key.clone());
    }
    f.conditions = d.conditions.clone();
    f
}

pub(crate) fn render(rule: Option<&Rule>, d: Draft, node: &str) -> Finding {
    let Some(rule) = rule else {
        tracing::error!(id = d.id.as_str(), "no rule text for this finding");
        debug_assert!(false, "no rule for {}", d.id);
        return without_rule(d);
    };
    let mut problems = Vec::new();
    let f = build(rule, &d, node, &mut problems);
    for p in &problems {
        tracing::error!(
            id = d.id.as_str(),
            rule_file = rule.file.as_str(),
            problem = p.as_str(),
            "a finding's text does not render cleanly"
        );
    }
    debug_assert!(
        problems.is_empty(),
        "rule {} ({}) does not render {d:?}: {problems:?}",
        rule.id,
        rule.file
    );
    f
}

/// The example without the evidence, vars and item fields the rule lists as optional.
fn without_optional(rule: &Rule) -> Draft {
    let mut d = rule.example.clone();
    for name in &rule.optional {
        match name.split_once('.') {
            Some((list, field)) => {
                if let Some(Var::Items(items)) = d.vars.get_mut(list) {
                    for i in items {
                        i.values.remove(field);
                    }
                }
            }
            None => {
                d.evidence.remove(name);
                d.vars.remove(name);
            }
        }
    }
    d
}

/// Renders `rule` from its example under every severity, with every condition on, off, each
/// alone and each left out, with and without its optional values and with its lists empty;
/// returns what went wrong (empty when nothing did).
pub(crate) fn check(rule: &Rule) -> Vec<String> {
    let names: Vec<&String> = rule.conditions.keys().collect();
    let all: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
    let mut sets = vec![all.clone(), BTreeSet::new()];
    for n in &names {
        sets.push(std::iter::once(n.to_string()).collect());
        let mut but = all.clone();
        but.remove(*n);
        sets.push(but);
    }
    let full = rule.example.clone();
    let lean = without_optional(rule);
    let mut empty_lists = lean.clone();
    for v in empty_lists.vars.values_mut() {
        if let Var::Items(items) = v {
            items.clear();
        }
    }
    let mut out = Vec::new();
    for base in [&full, &lean, &empty_lists] {
        for sev in [Severity::Info, Severity::Warning, Severity::Critical] {
            for set in &sets {
                let mut d = base.clone();
                d.severity = sev;
                d.conditions = set.clone();
                let mut problems = Vec::new();
                let f = build(rule, &d, "node-1", &mut problems);
                if std::ptr::eq(base, &full) && set == &all && f.remediation.steps.is_empty() {
                    problems.push("no step renders with every condition on".into());
                }
                for p in problems {
                    let which = if std::ptr::eq(base, &full) {
                        "the example"
                    } else if std::ptr::eq(base, &lean) {
                        "the example without its optional values"
                    } else {
                        "the example with empty lists"
                    };
                    let msg = format!(
                        "{p} (rendering {which} as {sev} with conditions {:?})",
                        set.iter().collect::<Vec<_>>()
                    );
                    if !out.contains(&msg) {
                        out.push(msg);
                    }
                }
            }
        }
    }
    out
}
