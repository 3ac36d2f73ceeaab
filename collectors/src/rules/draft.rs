//! What a judge returns: a finding without words.

use std::collections::{BTreeMap, BTreeSet};

use crate::finding::{Evidence, Severity};

/// A judge's conclusion: the rule id, severity, subject and typed evidence, plus the named
/// conditions that select optional advice and the template values that are not evidence
/// (lists, derived figures). The rule file supplies every word; [`super::RuleBook::render`]
/// fills them in.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub id: String,
    pub severity: Severity,
    pub subject: String,
    /// Published with the finding (`evidence` in the JSON); also fills placeholders.
    pub evidence: BTreeMap<String, Evidence>,
    /// Fill placeholders only: figures derived for the text, lists.
    pub vars: BTreeMap<String, Var>,
    /// Conditions the rule file's `when` tests.
    pub conditions: BTreeSet<String>,
}

/// A template value that is not evidence.
#[derive(Debug, Clone, PartialEq)]
pub enum Var {
    /// One figure or string.
    One(Evidence),
    /// Words: in a command each is one quoted argument; in text they join with `, ` (`、` in
    /// Chinese).
    Words(Vec<String>),
    /// Records a rule file repeats over (`each = "name"`): per item, text pieces and commands.
    Items(Vec<Item>),
}

/// One record of a [`Var::Items`] list: its own values and conditions, which inside an
/// `each` come before the finding's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Item {
    pub values: BTreeMap<String, Evidence>,
    pub conditions: BTreeSet<String>,
}

impl Item {
    pub fn new() -> Item {
        Item::default()
    }

    pub fn value(mut self, name: &str, v: impl Into<Evidence>) -> Item {
        self.values.insert(name.to_string(), v.into());
        self
    }

    /// Sets `name` when `v` is `Some`.
    pub fn value_opt<T: Into<Evidence>>(self, name: &str, v: Option<T>) -> Item {
        match v {
            Some(v) => self.value(name, v),
            None => self,
        }
    }

    pub fn when(mut self, condition: &str) -> Item {
        self.conditions.insert(condition.to_string());
        self
    }

    pub fn when_if(self, condition: &str, holds: bool) -> Item {
        if holds {
            self.when(condition)
        } else {
            self
        }
    }
}

impl Draft {
    pub fn new(id: &str, severity: Severity) -> Draft {
        Draft {
            id: id.to_string(),
            severity,
            subject: String::new(),
            evidence: BTreeMap::new(),
            vars: BTreeMap::new(),
            conditions: BTreeSet::new(),
        }
    }

    /// Sets the subject, cut to [`crate::bounded::SUBJECT_BYTES`] with a marker.
    pub fn subject(mut self, subject: impl Into<String>) -> Draft {
        self.subject = crate::bounded::truncate(subject.into(), crate::bounded::SUBJECT_BYTES);
        self
    }

    pub fn evidence(mut self, name: &str, value: impl Into<Evidence>) -> Draft {
        self.evidence.insert(name.to_string(), value.into());
        self
    }

    /// Sets evidence `name` when `value` is `Some`; the rule file lists it as `optional` and
    /// guards text that prints it with `when = "has <name>"`.
    pub fn evidence_opt<T: Into<Evidence>>(self, name: &str, value: Option<T>) -> Draft {
        match value {
            Some(v) => self.evidence(name, v),
            None => self,
        }
    }

    /// A figure or string for the text only (not published as evidence).
    pub fn var(mut self, name: &str, value: impl Into<Evidence>) -> Draft {
        self.vars.insert(name.to_string(), Var::One(value.into()));
        self
    }

    pub fn words<S: ToString>(mut self, name: &str, words: impl IntoIterator<Item = S>) -> Draft {
        let ws = words
            .into_iter()
            .map(|w| crate::bounded::truncate(w.to_string(), crate::bounded::EVIDENCE_BYTES))
            .collect();
        self.vars.insert(name.to_string(), Var::Words(ws));
        self
    }

    pub fn items(mut self, name: &str, items: Vec<Item>) -> Draft {
        self.vars.insert(name.to_string(), Var::Items(items));
        self
    }

    /// Sets a condition.
    pub fn when(mut self, condition: &str) -> Draft {
        self.conditions.insert(condition.to_string());
        self
    }

    /// Sets a condition when `holds`.
    pub fn when_if(self, condition: &str, holds: bool) -> Draft {
        if holds {
            self.when(condition)
        } else {
            self
        }
    }

    /// True when the condition is set (for tests of judges).
    pub fn is(&self, condition: &str) -> bool {
        self.conditions.contains(condition)
    }
}
