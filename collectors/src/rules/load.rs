//! Rule files: TOML -> [`Rule`]s, every template checked against what its rule declares.
//!
//! The walk is by hand over `toml::Table` rather than serde's derive so that an operator's
//! mistake names where it is (`rule memory.fragmentation: steps[2]: unknown key "wen"`).

use std::collections::{BTreeMap, BTreeSet};

use toml::{Table, Value as Toml};

use super::draft::{Draft, Item, Var};
use super::model::{
    CommandT, Cond, Hysteresis, MakesEvent, NmaCondition, NmaMapping, NodeCondition, Piece, Rule,
    RulesError, SeeAlsoT, SetsCondition, SourceT, Term, TextT,
};
use super::template::{self, is_name, Seg};
use crate::finding::{Evidence, Severity};

/// Placeholders every rule may use: the node's name.
pub(crate) const BUILTIN_VALUES: &[&str] = &["node"];
/// Conditions every rule may test: the finding's severity.
pub(crate) const BUILTIN_CONDITIONS: &[&str] = &["info", "warning", "critical"];

/// Where an error is, for messages: `steps[2]`, `commands[0].args.line`.
type At<'a> = &'a str;

fn err(file: &str, id: &str, message: impl Into<String>) -> RulesError {
    RulesError::Invalid {
        file: file.to_string(),
        id: id.to_string(),
        message: message.into(),
    }
}

/// Parses one built-in rule file (full rules with their declarations and example).
pub(crate) fn builtin_file(file: &str, text: &str) -> Result<Vec<Rule>, RulesError> {
    let table = parse_toml(file, text)?;
    let collector = match table.get("collector") {
        Some(Toml::String(s)) => s.clone(),
        _ => {
            return Err(RulesError::Toml {
                file: file.to_string(),
                message: "needs `collector = \"<name>\"`".into(),
            })
        }
    };
    check_keys(&table, &["collector", "rule"]).map_err(|m| RulesError::Toml {
        file: file.to_string(),
        message: m,
    })?;
    let mut out = Vec::new();
    for raw in rule_tables(file, &table)? {
        out.push(collectors_rule(file, &collector, raw)?);
    }
    Ok(out)
}

/// One rule of built-in file `file`, whose rules are `collector`'s.
fn collectors_rule(file: &str, collector: &str, raw: &Table) -> Result<Rule, RulesError> {
    let id = rule_id(file, raw)?;
    if !id.starts_with(&format!("{collector}.")) {
        return Err(err(
            file,
            &id,
            format!("an id of this file starts with `{collector}.`"),
        ));
    }
    full_rule(file, &id, raw)
}

/// One rule of built-in file `file` (of `collector`) from its table as the build script
/// wrote it (JSON, [`super::Builtin`]): what [`builtin_file`] makes of that rule.
pub(crate) fn builtin_rule(file: &str, collector: &str, json: &str) -> Result<Rule, RulesError> {
    let raw: Table = serde_json::from_str(json).map_err(|e| RulesError::Toml {
        file: file.to_string(),
        message: format!("the build script's copy of a rule does not read back: {e}"),
    })?;
    collectors_rule(file, collector, &raw)
}

/// Parses an operator's override file and applies it to copies of `base`'s rules.
pub(crate) fn apply_overrides(
    file: &str,
    text: &str,
    base: &BTreeMap<String, Rule>,
) -> Result<Vec<Rule>, RulesError> {
    let table = parse_toml(file, text)?;
    check_keys(&table, &["rule"]).map_err(|m| RulesError::Toml {
        file: file.to_string(),
        message: format!("{m} (an override file holds only [[rule]] tables)"),
    })?;
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for raw in rule_tables(file, &table)? {
        let id = rule_id(file, raw)?;
        let Some(rule) = base.get(&id) else {
            return Err(RulesError::UnknownId {
                file: file.to_string(),
                id,
                known: base.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        if !seen.insert(id.clone()) {
            return Err(err(file, &id, "given twice in this file"));
        }
        out.push(override_rule(file, rule, raw)?);
    }
    Ok(out)
}

fn parse_toml(file: &str, text: &str) -> Result<Table, RulesError> {
    text.parse::<Table>().map_err(|e| RulesError::Toml {
        file: file.to_string(),
        message: e.to_string().trim().to_string(),
    })
}

fn rule_tables<'a>(file: &str, table: &'a Table) -> Result<Vec<&'a Table>, RulesError> {
    let Some(rules) = table.get("rule") else {
        return Ok(Vec::new());
    };
    let Toml::Array(rules) = rules else {
        return Err(RulesError::Toml {
            file: file.to_string(),
            message: "`rule` is a list of tables: write [[rule]]".into(),
        });
    };
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Toml::Table(t) => Ok(t),
            _ => Err(RulesError::Toml {
                file: file.to_string(),
                message: format!("rule[{i}] is not a table"),
            }),
        })
        .collect()
}

fn rule_id(file: &str, raw: &Table) -> Result<String, RulesError> {
    match raw.get("id") {
        Some(Toml::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(RulesError::Toml {
            file: file.to_string(),
            message: "every [[rule]] needs `id = \"<collector>.<rule>\"`".into(),
        }),
    }
}

fn check_keys(t: &Table, allowed: &[&str]) -> Result<(), String> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "unknown key {k:?} (expected one of: {})",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

const RULE_KEYS: &[&str] = &[
    "id",
    "conditions",
    "optional",
    "title",
    "summary",
    "steps",
    "commands",
    "source",
    "see_also",
    "example",
    "raise_after",
    "clear_after",
    "cluster",
    "event",
];

const OVERRIDE_KEYS: &[&str] = &[
    "id",
    "title",
    "summary",
    "steps",
    "commands",
    "add_steps",
    "add_commands",
    "raise_after",
    "clear_after",
];

fn full_rule(file: &str, id: &str, raw: &Table) -> Result<Rule, RulesError> {
    let e = |m: String| err(file, id, m);
    check_keys(raw, RULE_KEYS).map_err(e)?;
    let conditions = match raw.get("conditions") {
        None => BTreeMap::new(),
        Some(Toml::Table(t)) => {
            let mut out = BTreeMap::new();
            for (k, v) in t {
                if !is_name(k) || BUILTIN_CONDITIONS.contains(&k.as_str()) {
                    return Err(e(format!(
                        "conditions.{k}: a condition is a name (a-z, 0-9, _) other than info, warning, critical"
                    )));
                }
                let Toml::String(meaning) = v else {
                    return Err(e(format!(
                        "conditions.{k}: say what the condition means, as a string"
                    )));
                };
                out.insert(k.clone(), meaning.clone());
            }
            out
        }
        Some(_) => return Err(e("`conditions` is a table: name = \"what it means\"".into())),
    };
    let optional: BTreeSet<String> = strings(raw.get("optional"), "optional").map_err(e)?;
    let example = example(raw.get("example"), id).map_err(e)?;
    let mut rule = Rule {
        id: id.to_string(),
        file: file.to_string(),
        conditions,
        optional,
        example,
        title: TextT::default(),
        summary: TextT::default(),
        steps: Vec::new(),
        commands: Vec::new(),
        sources: Vec::new(),
        see_also: Vec::new(),
        hysteresis: hysteresis(raw, Hysteresis::DEFAULT).map_err(e)?,
        cluster: Vec::new(),
        event: None,
    };
    for c in rule.item_conditions() {
        if !rule.conditions.contains_key(c) {
            return Err(e(format!(
                "example: item condition {c:?} is not declared in `conditions` (say what it means there)"
            )));
        }
    }
    for name in &rule.optional {
        if !rule.declares(name) {
            return Err(e(format!(
                "optional: {name:?} is not in the example's evidence, vars or item fields"
            )));
        }
    }
    rule.title = required_text(&rule, raw, "title").map_err(e)?;
    rule.summary = required_text(&rule, raw, "summary").map_err(e)?;
    rule.steps = texts(&rule, raw.get("steps"), "steps").map_err(e)?;
    rule.commands = commands(&rule, raw.get("commands"), "commands").map_err(e)?;
    rule.sources = sources(&rule, raw.get("source")).map_err(e)?;
    rule.see_also = see_also(&rule, raw.get("see_also")).map_err(e)?;
    rule.cluster = cluster(&rule, raw.get("cluster")).map_err(e)?;
    rule.event = event(&rule, raw.get("event")).map_err(e)?;
    if rule.steps.is_empty() {
        return Err(e("a rule needs at least one step".into()));
    }
    Ok(rule)
}

fn override_rule(file: &str, base: &Rule, raw: &Table) -> Result<Rule, RulesError> {
    let id = base.id.as_str();
    let e = |m: String| err(file, id, m);
    check_keys(raw, OVERRIDE_KEYS).map_err(|m| {
        e(format!(
            "{m}; an override changes the words and the hysteresis only (conditions, evidence, source and see_also are the built-in rule's)"
        ))
    })?;
    let mut rule = base.clone();
    rule.file = format!("{} + {file}", base.file);
    rule.hysteresis = hysteresis(raw, base.hysteresis).map_err(e)?;
    if raw.contains_key("title") {
        rule.title = required_text(base, raw, "title").map_err(e)?;
    }
    if raw.contains_key("summary") {
        rule.summary = required_text(base, raw, "summary").map_err(e)?;
    }
    if raw.contains_key("steps") {
        rule.steps = texts(base, raw.get("steps"), "steps").map_err(e)?;
    }
    if raw.contains_key("commands") {
        rule.commands = commands(base, raw.get("commands"), "commands").map_err(e)?;
    }
    rule.steps
        .extend(texts(base, raw.get("add_steps"), "add_steps").map_err(e)?);
    rule.commands
        .extend(commands(base, raw.get("add_commands"), "add_commands").map_err(e)?);
    if rule.steps.is_empty() {
        return Err(e("the rule would have no step left".into()));
    }
    Ok(rule)
}

/// `raise_after` / `clear_after` of a rule table, each replacing the one of `base` when given.
fn hysteresis(raw: &Table, base: Hysteresis) -> Result<Hysteresis, String> {
    let cycles = |key: &str, base: u32| -> Result<u32, String> {
        match raw.get(key) {
            None => Ok(base),
            Some(Toml::Integer(n)) if (1..=i64::from(Hysteresis::MAX_CYCLES)).contains(n) => {
                Ok(*n as u32)
            }
            Some(_) => Err(format!(
                "{key}: a number of collection cycles from 1 to {} (1: as the judge reports)",
                Hysteresis::MAX_CYCLES
            )),
        }
    };
    Ok(Hysteresis {
        raise_after: cycles("raise_after", base.raise_after)?,
        clear_after: cycles("clear_after", base.clear_after)?,
    })
}

fn strings(v: Option<&Toml>, at: At) -> Result<BTreeSet<String>, String> {
    match v {
        None => Ok(BTreeSet::new()),
        Some(Toml::Array(a)) => a
            .iter()
            .map(|x| match x {
                Toml::String(s) => Ok(s.clone()),
                _ => Err(format!("{at}: a list of strings")),
            })
            .collect(),
        Some(_) => Err(format!("{at}: a list of strings")),
    }
}

// ---------------------------------------------------------------- example

fn evidence_value(v: &Toml, at: At) -> Result<Evidence, String> {
    match v {
        Toml::Integer(i) => Ok(Evidence::Int(*i)),
        Toml::Float(f) => Ok(Evidence::from(*f)),
        Toml::String(s) => Ok(Evidence::Str(s.clone())),
        Toml::Boolean(b) => Ok(Evidence::from(*b)),
        _ => Err(format!("{at}: a number, string or boolean")),
    }
}

fn example(v: Option<&Toml>, id: &str) -> Result<Draft, String> {
    let Some(Toml::Table(t)) = v else {
        return Err(
            "needs an [rule.example]: the evidence and vars it expects, with believable values"
                .into(),
        );
    };
    check_keys(t, &["severity", "subject", "evidence", "vars"])
        .map_err(|m| format!("example: {m}"))?;
    let severity = match t.get("severity") {
        Some(Toml::String(s)) => Severity::parse(s)
            .ok_or_else(|| format!("example.severity: {s:?} is not a severity"))?,
        None => Severity::Warning,
        Some(_) => return Err("example.severity: a string".into()),
    };
    let mut d = Draft::new(id, severity);
    match t.get("subject") {
        Some(Toml::String(s)) => d = d.subject(s.as_str()),
        None => {}
        Some(_) => return Err("example.subject: a string".into()),
    }
    if let Some(ev) = t.get("evidence") {
        let Toml::Table(ev) = ev else {
            return Err("example.evidence: a table".into());
        };
        for (k, v) in ev {
            let at = format!("example.evidence.{k}");
            d.evidence.insert(k.clone(), evidence_value(v, &at)?);
        }
    }
    if let Some(vars) = t.get("vars") {
        let Toml::Table(vars) = vars else {
            return Err("example.vars: a table".into());
        };
        for (k, v) in vars {
            let at = format!("example.vars.{k}");
            if !is_name(k) {
                return Err(format!("{at}: a var is a name (a-z, 0-9, _)"));
            }
            if d.evidence.contains_key(k) || super::load::BUILTIN_VALUES.contains(&k.as_str()) {
                return Err(format!("{at}: the name is taken by evidence or a built-in"));
            }
            let var = match v {
                Toml::Array(a) if a.is_empty() => {
                    return Err(format!("{at}: give at least one example item"))
                }
                Toml::Array(a) if a.iter().all(|x| matches!(x, Toml::String(_))) => Var::Words(
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect(),
                ),
                Toml::Array(a) => {
                    let mut items = Vec::new();
                    for (i, x) in a.iter().enumerate() {
                        let Toml::Table(x) = x else {
                            return Err(format!(
                                "{at}[{i}]: items are tables (or the list is all strings)"
                            ));
                        };
                        let mut item = Item::new();
                        for (fk, fv) in x {
                            if fk == "conditions" {
                                for c in strings(Some(fv), &format!("{at}[{i}].conditions"))? {
                                    item = item.when(&c);
                                }
                            } else if is_name(fk) {
                                item.values.insert(
                                    fk.clone(),
                                    evidence_value(fv, &format!("{at}[{i}].{fk}"))?,
                                );
                            } else {
                                return Err(format!("{at}[{i}].{fk}: a field is a name"));
                            }
                        }
                        items.push(item);
                    }
                    Var::Items(items)
                }
                other => Var::One(evidence_value(other, &at)?),
            };
            d.vars.insert(k.clone(), var);
        }
    }
    Ok(d)
}

// ---------------------------------------------------------------- scope checks

/// What a template may name where it stands: the list an `each` repeats over, and the
/// values a `has` of an enclosing `when` guarantees.
#[derive(Clone, Default)]
struct Scope {
    each: Option<String>,
    guards: BTreeSet<String>,
}

impl Scope {
    fn with(&self, when: &Cond) -> Scope {
        let mut s = self.clone();
        s.guards.extend(when.guards());
        s
    }
}

/// The kind of value a name stands for.
enum Kind<'a> {
    Value(Option<&'a Evidence>),
    Words,
    Items,
}

impl Rule {
    /// The item fields (from the example's items) of list `list`.
    pub(crate) fn item_fields(&self, list: &str) -> BTreeMap<&str, &Evidence> {
        let mut out = BTreeMap::new();
        if let Some(Var::Items(items)) = self.example.vars.get(list) {
            for i in items {
                for (k, v) in &i.values {
                    out.entry(k.as_str()).or_insert(v);
                }
            }
        }
        out
    }

    fn item_conditions(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        for v in self.example.vars.values() {
            if let Var::Items(items) = v {
                for i in items {
                    out.extend(i.conditions.iter().map(String::as_str));
                }
            }
        }
        out
    }

    /// True when `name` is evidence, a var or an item field of the example.
    pub(crate) fn declares(&self, name: &str) -> bool {
        if let Some((list, field)) = name.split_once('.') {
            return self.item_fields(list).contains_key(field);
        }
        self.example.evidence.contains_key(name) || self.example.vars.contains_key(name)
    }

    fn kind(&self, name: &str, scope: &Scope) -> Result<(Kind<'_>, String), String> {
        if let Some(list) = &scope.each {
            if let Some(v) = self.item_fields(list).get(name) {
                return Ok((Kind::Value(Some(v)), format!("{list}.{name}")));
            }
        }
        if BUILTIN_VALUES.contains(&name) {
            return Ok((Kind::Value(None), name.to_string()));
        }
        if let Some(v) = self.example.evidence.get(name) {
            return Ok((Kind::Value(Some(v)), name.to_string()));
        }
        match self.example.vars.get(name) {
            Some(Var::One(v)) => Ok((Kind::Value(Some(v)), name.to_string())),
            Some(Var::Words(_)) => Ok((Kind::Words, name.to_string())),
            Some(Var::Items(_)) => Ok((Kind::Items, name.to_string())),
            None => {
                let mut known: Vec<&str> = self
                    .example
                    .evidence
                    .keys()
                    .chain(self.example.vars.keys())
                    .map(String::as_str)
                    .chain(BUILTIN_VALUES.iter().copied())
                    .collect();
                if let Some(list) = &scope.each {
                    known.extend(self.item_fields(list).keys());
                }
                known.sort_unstable();
                Err(format!(
                    "unknown placeholder {{{name}}} (this rule knows: {})",
                    known.join(", ")
                ))
            }
        }
    }

    /// A placeholder that names optional evidence must stand under `when = "has <name>"`.
    fn check_guard(&self, qualified: &str, bare: &str, scope: &Scope) -> Result<(), String> {
        if self.optional.contains(qualified)
            && !scope.guards.contains(bare)
            && !scope.guards.contains(qualified)
        {
            return Err(format!(
                "{{{bare}}} is optional: put the text or command under when = \"has {bare}\""
            ));
        }
        Ok(())
    }

    fn check_segs(&self, segs: &[Seg], scope: &Scope, at: At) -> Result<(), String> {
        for (name, spec) in template::holes(segs) {
            let (kind, q) = self.kind(name, scope).map_err(|m| format!("{at}: {m}"))?;
            match kind {
                Kind::Items => {
                    return Err(format!(
                        "{at}: {{{name}}} is a list of items: repeat over it with each = \"{name}\""
                    ))
                }
                Kind::Words if spec.is_numeric() => {
                    return Err(format!("{at}: {{{name}}} is a list of words, not a number"))
                }
                Kind::Value(Some(Evidence::Str(_))) if spec.is_numeric() => {
                    return Err(format!(
                    "{at}: {{{name}}} is a string in the example; a number format does not apply"
                ))
                }
                _ => {}
            }
            self.check_guard(&q, name, scope)
                .map_err(|m| format!("{at}: {m}"))?;
        }
        Ok(())
    }

    fn check_cond(&self, c: &Cond, scope: &Scope, at: At) -> Result<(), String> {
        for t in c.terms() {
            match t {
                Term::Flag(n) | Term::NotFlag(n) => {
                    let known =
                        BUILTIN_CONDITIONS.contains(&n.as_str()) || self.conditions.contains_key(n);
                    if !known {
                        let mut names: Vec<&str> =
                            self.conditions.keys().map(String::as_str).collect();
                        names.extend(BUILTIN_CONDITIONS);
                        return Err(format!(
                            "{at}: unknown condition {n:?} (this rule's: {})",
                            names.join(", ")
                        ));
                    }
                }
                Term::Has(n) | Term::NotHas(n) => {
                    self.kind(n, scope)
                        .map_err(|m| format!("{at}: when: {m}"))?;
                }
            }
        }
        Ok(())
    }
}

fn cond(v: Option<&Toml>, at: At) -> Result<Cond, String> {
    match v {
        None => Ok(Cond::default()),
        Some(Toml::String(s)) => parse_cond(s).map_err(|m| format!("{at}.when: {m}")),
        Some(_) => Err(format!(
            "{at}.when: a string such as \"name and not other\""
        )),
    }
}

/// `a and not b and has c`, alternatives joined by ` or ` (`and` binds tighter).
pub(crate) fn parse_cond(s: &str) -> Result<Cond, String> {
    let mut alts = Vec::new();
    for alt in s.split(" or ") {
        let mut terms = Vec::new();
        for term in alt.split(" and ") {
            let words: Vec<&str> = term.split_whitespace().collect();
            let (t, name) = match words.as_slice() {
                [n] => (Term::Flag(n.to_string()), *n),
                ["not", n] => (Term::NotFlag(n.to_string()), *n),
                ["has", n] => (Term::Has(n.to_string()), *n),
                ["not", "has", n] => (Term::NotHas(n.to_string()), *n),
                _ => {
                    return Err(format!(
                        "{term:?}: a term is `name`, `not name`, `has name` or `not has name`, joined by ` and ` or ` or `"
                    ))
                }
            };
            if !is_name(name) || ["and", "or", "not", "has"].contains(&name) {
                return Err(format!("{name:?} is not a name (a-z, 0-9, _)"));
            }
            terms.push(t);
        }
        alts.push(terms);
    }
    Ok(Cond(alts))
}

// ---------------------------------------------------------------- text

fn required_text(rule: &Rule, raw: &Table, key: &str) -> Result<TextT, String> {
    match raw.get(key) {
        None => Err(format!("needs `{key}`")),
        Some(v) => text(rule, v, &Scope::default(), key),
    }
}

fn texts(rule: &Rule, v: Option<&Toml>, at: At) -> Result<Vec<TextT>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Toml::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, x)| text(rule, x, &Scope::default(), &format!("{at}[{i}]")))
            .collect(),
        Some(_) => Err(format!("{at}: a list")),
    }
}

/// A text: one piece (`{ en, zh }`) or a list of pieces joined together.
fn text(rule: &Rule, v: &Toml, scope: &Scope, at: At) -> Result<TextT, String> {
    let pieces = match v {
        Toml::Table(_) => vec![piece(rule, v, scope, at)?],
        Toml::Array(a) if !a.is_empty() => a
            .iter()
            .enumerate()
            .map(|(i, x)| piece(rule, x, scope, &format!("{at}[{i}]")))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(format!(
                "{at}: a text is {{ en = \"…\", zh = \"…\" }} or a list of such pieces"
            ))
        }
    };
    Ok(TextT(pieces))
}

fn lang_pair(t: &Table, at: At) -> Result<Option<(String, String)>, String> {
    match (t.get("en"), t.get("zh")) {
        (None, None) => Ok(None),
        (Some(Toml::String(en)), Some(Toml::String(zh))) => {
            if en.trim().is_empty() || zh.trim().is_empty() {
                return Err(format!("{at}: empty en or zh text"));
            }
            Ok(Some((en.clone(), zh.clone())))
        }
        (Some(_), None) => Err(format!("{at}: en without zh (both languages are required)")),
        (None, Some(_)) => Err(format!("{at}: zh without en (both languages are required)")),
        _ => Err(format!("{at}: en and zh are strings")),
    }
}

fn piece(rule: &Rule, v: &Toml, scope: &Scope, at: At) -> Result<Piece, String> {
    let Toml::Table(t) = v else {
        return Err(format!(
            "{at}: a piece is a table {{ en = \"…\", zh = \"…\" }}"
        ));
    };
    check_keys(t, &["when", "en", "zh", "each", "sep", "parts"])
        .map_err(|m| format!("{at}: {m}"))?;
    let when = cond(t.get("when"), at)?;
    rule.check_cond(&when, scope, at)?;
    let mut inner = scope.with(&when);
    let each = match t.get("each") {
        None => None,
        Some(Toml::String(list)) => {
            if scope.each.is_some() {
                return Err(format!("{at}: an each inside an each"));
            }
            match rule.example.vars.get(list) {
                Some(Var::Items(_)) => {}
                _ => {
                    return Err(format!(
                        "{at}: each = {list:?} names no list of items in the example's vars"
                    ))
                }
            }
            inner.each = Some(list.clone());
            Some(list.clone())
        }
        Some(_) => return Err(format!("{at}: each names a list")),
    };
    let sep = match (t.get("sep"), &each) {
        (None, _) => (", ".to_string(), "、".to_string()),
        (Some(Toml::Table(s)), Some(_)) => {
            check_keys(s, &["en", "zh"]).map_err(|m| format!("{at}.sep: {m}"))?;
            match (s.get("en"), s.get("zh")) {
                (Some(Toml::String(en)), Some(Toml::String(zh))) => (en.clone(), zh.clone()),
                _ => return Err(format!("{at}.sep: {{ en = \"…\", zh = \"…\" }}")),
            }
        }
        (Some(_), None) => return Err(format!("{at}: sep goes with each")),
        (Some(_), Some(_)) => return Err(format!("{at}.sep: {{ en = \"…\", zh = \"…\" }}")),
    };
    let words = lang_pair(t, at)?;
    let parts = match (t.get("parts"), words) {
        (Some(p), None) => text(rule, p, &inner, &format!("{at}.parts"))?.0,
        (None, Some((en, zh))) => {
            let en = template::parse(&en).map_err(|m| format!("{at}.en: {m}"))?;
            let zh = template::parse(&zh).map_err(|m| format!("{at}.zh: {m}"))?;
            rule.check_segs(&en, &inner, &format!("{at}.en"))?;
            rule.check_segs(&zh, &inner, &format!("{at}.zh"))?;
            if each.is_none() {
                // A plain piece.
                return Ok(Piece::Text { when, en, zh });
            }
            vec![Piece::Text {
                when: Cond::default(),
                en,
                zh,
            }]
        }
        (Some(_), Some(_)) => return Err(format!("{at}: either en/zh or parts, not both")),
        (None, None) => return Err(format!("{at}: needs en and zh (or parts)")),
    };
    Ok(Piece::Group {
        when,
        each,
        sep,
        parts,
    })
}

// ---------------------------------------------------------------- commands

fn commands(rule: &Rule, v: Option<&Toml>, at: At) -> Result<Vec<CommandT>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Toml::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, x)| command(rule, x, &format!("{at}[{i}]")))
            .collect(),
        Some(_) => Err(format!("{at}: a list")),
    }
}

fn command(rule: &Rule, v: &Toml, at: At) -> Result<CommandT, String> {
    let (run, when, each, raw_args) = match v {
        Toml::String(s) => (s.clone(), Cond::default(), None, None),
        Toml::Table(t) => {
            check_keys(t, &["run", "when", "each", "args"]).map_err(|m| format!("{at}: {m}"))?;
            let Some(Toml::String(run)) = t.get("run") else {
                return Err(format!("{at}: needs run = \"<command template>\""));
            };
            let each = match t.get("each") {
                None => None,
                Some(Toml::String(l)) => Some(l.clone()),
                Some(_) => return Err(format!("{at}.each: names a list")),
            };
            (run.clone(), cond(t.get("when"), at)?, each, t.get("args"))
        }
        _ => return Err(format!("{at}: a command template or {{ run = \"…\", … }}")),
    };
    // With `each`, the command's `when` is tested per item (item conditions count).
    let mut scope = Scope::default();
    if let Some(list) = &each {
        if !matches!(rule.example.vars.get(list), Some(Var::Items(_))) {
            return Err(format!(
                "{at}: each = {list:?} names no list of items in the example's vars"
            ));
        }
        scope.each = Some(list.clone());
    }
    rule.check_cond(&when, &scope, at)?;
    let scope = scope.with(&when);
    let names = crate::shell::placeholders(&run).map_err(|e| format!("{at}: {e}"))?;
    let mut args = Vec::new();
    if let Some(raw) = raw_args {
        let Toml::Table(raw) = raw else {
            return Err(format!("{at}.args: a table name = \"text template\""));
        };
        for (k, v) in raw {
            let Toml::String(t) = v else {
                return Err(format!("{at}.args.{k}: a text template"));
            };
            if !names.contains(&k.as_str()) {
                return Err(format!(
                    "{at}.args.{k}: the command template has no {{{k}}}"
                ));
            }
            let segs = template::parse(t).map_err(|m| format!("{at}.args.{k}: {m}"))?;
            rule.check_segs(&segs, &scope, &format!("{at}.args.{k}"))?;
            args.push((k.clone(), segs));
        }
    }
    for n in &names {
        if args.iter().any(|(k, _)| k == n) {
            continue;
        }
        let (kind, q) = rule.kind(n, &scope).map_err(|m| format!("{at}: {m}"))?;
        if matches!(kind, Kind::Items) {
            return Err(format!(
                "{at}: {{{n}}} is a list of items: repeat the command with each = \"{n}\""
            ));
        }
        rule.check_guard(&q, n, &scope)
            .map_err(|m| format!("{at}: {m}"))?;
    }
    Ok(CommandT {
        when,
        each,
        run,
        args,
    })
}

// ---------------------------------------------------------------- source, see_also

fn sources(rule: &Rule, v: Option<&Toml>) -> Result<Vec<SourceT>, String> {
    let list: Vec<&Toml> = match v {
        None => {
            return Err(
                "needs `source = { doc = \"…\", section = \"…\" }` (or external documentation `{ doc, section, url, why }`, or `{ none = \"why no handbook section covers it\" }`)"
                    .into(),
            )
        }
        Some(Toml::Array(a)) => a.iter().collect(),
        Some(t @ Toml::Table(_)) => vec![t],
        Some(_) => return Err("source: a table { doc, section } or a list of them".into()),
    };
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let at = format!("source[{i}]");
        let Toml::Table(t) = s else {
            return Err(format!("{at}: a table {{ doc, section }}"));
        };
        check_keys(t, &["doc", "section", "when", "none", "url", "why"])
            .map_err(|m| format!("{at}: {m}"))?;
        let external = match (t.get("url"), t.get("why")) {
            (None, None) => None,
            (Some(Toml::String(url)), Some(Toml::String(why))) => {
                if !url.starts_with("https://") || url.contains(char::is_whitespace) {
                    return Err(format!(
                        "{at}.url: an https:// address of the documentation, got {url:?}"
                    ));
                }
                if why.trim().is_empty() {
                    return Err(format!(
                        "{at}.why: say why no handbook section covers the case"
                    ));
                }
                Some((leak(url), leak(why)))
            }
            _ => {
                return Err(format!(
                    "{at}: external documentation needs url = \"https://…\" and why = \"why no handbook section covers the case\""
                ))
            }
        };
        let cites = match (t.get("doc"), t.get("section"), t.get("none")) {
            (Some(Toml::String(doc)), Some(Toml::String(section)), None)
                if !doc.trim().is_empty() && !section.trim().is_empty() =>
            {
                Some(super::model::Cites {
                    doc: leak(doc),
                    section: leak(section),
                    url: external.map(|(u, _)| u),
                    why: external.map(|(_, w)| w),
                })
            }
            (None, None, Some(_)) if external.is_some() => {
                return Err(format!(
                    "{at}: external documentation needs doc (its name) and section, not none"
                ))
            }
            (None, None, Some(Toml::String(why))) if !why.trim().is_empty() => None,
            (None, None, Some(_)) => {
                return Err(format!(
                    "{at}.none: say why no handbook section covers the case, as a string"
                ))
            }
            _ => {
                return Err(format!(
                    "{at}: needs doc and section, or none = \"why no section applies\""
                ))
            }
        };
        let when = cond(t.get("when"), &at)?;
        rule.check_cond(&when, &Scope::default(), &at)?;
        out.push(SourceT { when, cites });
    }
    if out.last().is_some_and(|s| !s.when.is_always()) {
        return Err(
            "source: the last source has no `when` (the one that applies otherwise)".into(),
        );
    }
    Ok(out)
}

/// Built-in rule files load once per process (and in tests a few times), so their sources
/// are leaked rather than making every `Source` own its strings.
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// The `see_also` keys of `rules` that are not entries of the explain catalogue, as
/// "file: rule id: key" (empty when all resolve). Parses the catalogue. The unit tests run it on
/// the built-in files (an override cannot change `see_also`).
#[cfg(test)]
pub(crate) fn unknown_see_also<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Vec<String> {
    let mut out = Vec::new();
    for rule in rules {
        for (i, s) in rule.see_also.iter().enumerate() {
            if crate::explain::lookup_key(&s.key).is_none() {
                out.push(format!(
                    "rule file {}: rule {}: see_also[{i}]: {:?} is not an entry of the explain catalogue",
                    rule.file, rule.id, s.key
                ));
            }
        }
    }
    out
}

fn see_also(rule: &Rule, v: Option<&Toml>) -> Result<Vec<SeeAlsoT>, String> {
    let list = match v {
        None => return Ok(Vec::new()),
        Some(Toml::Array(a)) => a,
        Some(_) => return Err("see_also: a list".into()),
    };
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let at = format!("see_also[{i}]");
        let (key, when) = match s {
            Toml::String(k) => (k.clone(), Cond::default()),
            Toml::Table(t) => {
                check_keys(t, &["key", "when"]).map_err(|m| format!("{at}: {m}"))?;
                let Some(Toml::String(k)) = t.get("key") else {
                    return Err(format!("{at}: needs key"));
                };
                (k.clone(), cond(t.get("when"), &at)?)
            }
            _ => return Err(format!("{at}: a key or {{ key, when }}")),
        };
        rule.check_cond(&when, &Scope::default(), &at)?;
        // Whether `key` names an entry of the explain catalogue is checked by
        // [`unknown_see_also`], not here: the built-in files cannot change after the build (a
        // unit test runs it on them), and parsing the whole catalogue on every start would
        // double what a `check` spends before it reads the host.
        out.push(SeeAlsoT { when, key });
    }
    Ok(out)
}

// ---------------------------------------------------------------- cluster, event

/// A string field of a table, non-empty.
fn field(t: &Table, key: &str, at: At) -> Result<String, String> {
    match t.get(key) {
        Some(Toml::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(format!("{at}.{key}: a non-empty string")),
    }
}

/// A Kubernetes reason or condition type: `UpperCamelCase` letters and digits, at most 128.
pub(crate) fn is_camel(s: &str) -> bool {
    s.len() <= 128
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// `{name}`: a condition type or reason taken from the finding's evidence `name` (what an
/// operator's configuration names: the npd collector's rules), not written in the rule file.
pub(crate) fn evidence_ref(s: &str) -> Option<&str> {
    s.strip_prefix('{')?.strip_suffix('}')
}

/// An evidence reference names evidence of the rule's example.
fn evidence_ref_checked(rule: &Rule, s: &str, at: At) -> Result<(), String> {
    match evidence_ref(s) {
        Some(n) if !rule.example.evidence.contains_key(n) => {
            Err(format!("{at}: {{{n}}} is not the rule's evidence"))
        }
        _ => Ok(()),
    }
}

/// A `when` of a cluster entry: the rule's conditions, severities and `has` of evidence (a
/// finding carries its conditions and evidence, not the vars its words were built with).
fn finding_cond(rule: &Rule, t: &Table, key: &str, at: At) -> Result<Cond, String> {
    let c = match t.get(key) {
        None => Cond::default(),
        Some(Toml::String(s)) => parse_cond(s).map_err(|m| format!("{at}.{key}: {m}"))?,
        Some(_) => {
            return Err(format!(
                "{at}.{key}: a string such as \"name and not other\""
            ))
        }
    };
    rule.check_cond(&c, &Scope::default(), at)?;
    for t in c.terms() {
        if let Term::Has(n) | Term::NotHas(n) = t {
            if !rule.example.evidence.contains_key(n) {
                return Err(format!(
                    "{at}.{key}: has {n}: a cluster entry tests evidence only"
                ));
            }
        }
    }
    Ok(c)
}

/// `cluster = [{ condition, reason, when }]`: the NodeConditions the rule's finding sets.
fn cluster(rule: &Rule, v: Option<&Toml>) -> Result<Vec<SetsCondition>, String> {
    let list = match v {
        None => return Ok(Vec::new()),
        Some(Toml::Array(a)) => a,
        Some(_) => return Err("cluster: a list of { condition, reason, when }".into()),
    };
    let mut out = Vec::new();
    for (i, x) in list.iter().enumerate() {
        let at = format!("cluster[{i}]");
        let Toml::Table(t) = x else {
            return Err(format!("{at}: a table {{ condition, reason, when }}"));
        };
        check_keys(t, &["condition", "reason", "when"]).map_err(|m| format!("{at}: {m}"))?;
        let reason = field(t, "reason", &at)?;
        let condition = field(t, "condition", &at)?;
        for (key, v) in [("reason", &reason), ("condition", &condition)] {
            evidence_ref_checked(rule, v, &format!("{at}.{key}"))?;
        }
        if evidence_ref(&reason).is_none() && !is_camel(&reason) {
            return Err(format!(
                "{at}.reason: {reason:?} is not a reason (UpperCamelCase)"
            ));
        }
        out.push(SetsCondition {
            condition,
            reason,
            when: finding_cond(rule, t, "when", &at)?,
        });
    }
    Ok(out)
}

/// `event = { reason, npd_reason, npd_when, when, count, age, npd_message }`: the Event the
/// rule's finding makes (`npd_reason` also a list of `{ reason, when }`).
fn event(rule: &Rule, v: Option<&Toml>) -> Result<Option<MakesEvent>, String> {
    let t = match v {
        None => return Ok(None),
        Some(Toml::Table(t)) => t,
        Some(_) => return Err("event: a table { reason, count, age, when, npd_reason }".into()),
    };
    let at = "event";
    check_keys(
        t,
        &[
            "reason",
            "npd_reason",
            "npd_when",
            "when",
            "count",
            "age",
            "npd_message",
        ],
    )
    .map_err(|m| format!("{at}: {m}"))?;
    let reason = field(t, "reason", at)?;
    // `npd_reason = "R"` (with `npd_when`), or a list `[{ reason = "R", when = "…" }, …]`
    // whose first entry that holds names the Event (NPD's Ext4Error and IOError split what is
    // one node-doctor finding).
    let npd: Vec<(String, Cond)> = match t.get("npd_reason") {
        None => Vec::new(),
        Some(Toml::Array(list)) => {
            if t.contains_key("npd_when") {
                return Err(format!(
                    "{at}: npd_when goes inside each npd_reason entry of a list"
                ));
            }
            let mut out = Vec::new();
            for (i, e) in list.iter().enumerate() {
                let eat = format!("{at}.npd_reason[{i}]");
                let Toml::Table(e) = e else {
                    return Err(format!("{eat}: a table {{ reason, when }}"));
                };
                check_keys(e, &["reason", "when"]).map_err(|m| format!("{eat}: {m}"))?;
                out.push((
                    field(e, "reason", &eat)?,
                    finding_cond(rule, e, "when", &eat)?,
                ));
            }
            out
        }
        Some(_) => vec![(
            field(t, "npd_reason", at)?,
            finding_cond(rule, t, "npd_when", at)?,
        )],
    };
    evidence_ref_checked(rule, &reason, &format!("{at}.reason"))?;
    for r in std::iter::once(&reason).chain(npd.iter().map(|(r, _)| r)) {
        if evidence_ref(r).is_none() && !is_camel(r) {
            return Err(format!("{at}: {r:?} is not a reason (UpperCamelCase)"));
        }
    }
    let evidence = |key: &str| -> Result<Option<String>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(_) => {
                let name = field(t, key, at)?;
                if !rule.example.evidence.contains_key(&name) {
                    return Err(format!("{at}.{key}: {name:?} is not the rule's evidence"));
                }
                Ok(Some(name))
            }
        }
    };
    let Some(count) = evidence("count")? else {
        return Err(format!("{at}.count: the evidence that counts occurrences"));
    };
    Ok(Some(MakesEvent {
        reason,
        npd,
        when: finding_cond(rule, t, "when", at)?,
        count,
        age: evidence("age")?,
        npd_message: evidence("npd_message")?,
    }))
}

/// The NodeCondition classes of `cluster.toml` (`[[node_condition]]`) and the node
/// monitoring agent's types they may map onto (`[[nma_condition]]`); the classes' collectors
/// are filled in by the book from the rules that name them.
pub(crate) fn node_conditions(
    file: &str,
    text: &str,
) -> Result<(Vec<NodeCondition>, Vec<NmaCondition>), RulesError> {
    let table = parse_toml(file, text)?;
    let toml_err = |m: String| RulesError::Toml {
        file: file.to_string(),
        message: m,
    };
    check_keys(&table, &["node_condition", "nma_condition"]).map_err(toml_err)?;
    let nma = nma_conditions(&table).map_err(toml_err)?;
    let Some(Toml::Array(list)) = table.get("node_condition") else {
        return Err(toml_err("needs [[node_condition]] tables".into()));
    };
    let mut out: Vec<NodeCondition> = Vec::new();
    for (i, x) in list.iter().enumerate() {
        let at = format!("node_condition[{i}]");
        let Toml::Table(t) = x else {
            return Err(toml_err(format!("{at}: a table")));
        };
        let class = node_condition(t, &at, &nma).map_err(toml_err)?;
        if out.iter().any(|c| c.ctype == class.ctype) {
            return Err(toml_err(format!("{at}: {} is defined twice", class.ctype)));
        }
        out.push(class);
    }
    Ok((out, nma))
}

/// One `[[node_condition]]`.
fn node_condition(t: &Table, at: &str, nma: &[NmaCondition]) -> Result<NodeCondition, String> {
    check_keys(
        t,
        &[
            "type",
            "healthy_reason",
            "healthy_message",
            "npd",
            "repair",
            "nma",
        ],
    )
    .map_err(|m| format!("{at}: {m}"))?;
    let ctype = field(t, "type", at)?;
    let healthy_reason = field(t, "healthy_reason", at)?;
    let npd = match t.get("npd") {
        None => None,
        Some(Toml::Table(n)) => {
            let f = |k: &str| field(n, k, &format!("{at}.npd"));
            Some((f("type")?, f("healthy_reason")?))
        }
        Some(_) => return Err(format!("{at}.npd: {{ type, healthy_reason }}")),
    };
    let repair = match t.get("repair") {
        Some(Toml::Boolean(b)) => *b,
        _ => {
            return Err(format!(
                "{at} ({ctype}): needs `repair = true` (repair-worthy: the node cannot do its job until rebooted or replaced, and the cause is its own) or `repair = false` (advisory); docs/kubernetes.md"
            ))
        }
    };
    let nma_map = match t.get("nma") {
        None => None,
        Some(Toml::Table(n)) => {
            let f = |k: &str| field(n, k, &format!("{at}.nma"));
            Some(NmaMapping {
                ctype: f("type")?,
                reason: f("reason")?,
            })
        }
        Some(_) => return Err(format!("{at}.nma: {{ type, reason }}")),
    };
    if let Some(m) = &nma_map {
        if !repair {
            return Err(format!(
                "{at} ({ctype}): an advisory class (repair = false) has no nma type: repair automation acts on those"
            ));
        }
        if !nma.iter().any(|n| n.ctype == m.ctype) {
            return Err(format!(
                "{at}.nma: {:?} is not one of the [[nma_condition]] types",
                m.ctype
            ));
        }
    }
    let names = [&ctype, &healthy_reason]
        .into_iter()
        .chain(npd.iter().flat_map(|(a, b)| [a, b]))
        .chain(nma_map.iter().flat_map(|m| [&m.ctype, &m.reason]));
    for n in names {
        if !is_camel(n) {
            return Err(format!("{at}: {n:?} is not UpperCamelCase"));
        }
    }
    Ok(NodeCondition {
        ctype,
        healthy_reason,
        healthy_message: field(t, "healthy_message", at)?,
        npd,
        repair,
        nma: nma_map,
        collectors: Vec::new(),
    })
}

/// The `[[nma_condition]]` tables: the node monitoring agent's types, each with its healthy
/// reason and a message.
fn nma_conditions(table: &Table) -> Result<Vec<NmaCondition>, String> {
    let mut out: Vec<NmaCondition> = Vec::new();
    let list = match table.get("nma_condition") {
        None => return Ok(out),
        Some(Toml::Array(l)) => l,
        Some(_) => return Err("nma_condition: [[nma_condition]] tables".into()),
    };
    for (i, x) in list.iter().enumerate() {
        let at = format!("nma_condition[{i}]");
        let Toml::Table(t) = x else {
            return Err(format!("{at}: a table"));
        };
        check_keys(t, &["type", "healthy_reason", "healthy_message"])
            .map_err(|m| format!("{at}: {m}"))?;
        let c = NmaCondition {
            ctype: field(t, "type", &at)?,
            healthy_reason: field(t, "healthy_reason", &at)?,
            healthy_message: field(t, "healthy_message", &at)?,
        };
        for n in [&c.ctype, &c.healthy_reason] {
            if !is_camel(n) {
                return Err(format!("{at}: {n:?} is not UpperCamelCase"));
            }
        }
        if out.iter().any(|o| o.ctype == c.ctype) {
            return Err(format!("{at}: {} is defined twice", c.ctype));
        }
        out.push(c);
    }
    Ok(out)
}
