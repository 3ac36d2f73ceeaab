//! The parsed form of a rule file: what [`super::load`] builds from the TOML and
//! [`super::render`] fills, and the errors of loading. No logic of either lives here.

use std::collections::{BTreeMap, BTreeSet};

use super::draft::Draft;
use super::template;
use crate::error::ReadError;

/// Why rule files do not load.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("rule file {file}: {message}")]
    Toml { file: String, message: String },
    #[error("rule file {file}: rule {id}: {message}")]
    Invalid {
        file: String,
        id: String,
        message: String,
    },
    #[error("rule file {file}: no built-in rule has the id {id:?} (an override changes the words of an existing rule; ids: {known})")]
    UnknownId {
        file: String,
        id: String,
        known: String,
    },
    #[error("rule file: {0}")]
    Read(#[from] ReadError),
    #[error("rule file {file}: {message}")]
    NotUtf8 { file: String, message: String },
}

/// A condition of a `when`: any of the alternatives (`or`), each a list of terms that must
/// all hold (`and`). No alternative at all: always holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Cond(pub Vec<Vec<Term>>);

impl Cond {
    /// Whether it holds for a finding of `severity` whose rule conditions `held` and whose
    /// evidence has the names `has` answers for.
    pub(crate) fn holds_for(
        &self,
        severity: &str,
        held: &BTreeSet<String>,
        has: &dyn Fn(&str) -> bool,
    ) -> bool {
        let flag = |n: &str| n == severity || held.contains(n);
        self.is_always()
            || self.0.iter().any(|alt| {
                alt.iter().all(|t| match t {
                    Term::Flag(n) => flag(n),
                    Term::NotFlag(n) => !flag(n),
                    Term::Has(n) => has(n),
                    Term::NotHas(n) => !has(n),
                })
            })
    }

    pub(crate) fn terms(&self) -> impl Iterator<Item = &Term> {
        self.0.iter().flatten()
    }

    pub(crate) fn is_always(&self) -> bool {
        self.0.is_empty()
    }

    /// Names every alternative guarantees present (`has x` in each).
    pub(crate) fn guards(&self) -> BTreeSet<String> {
        let mut alts = self.0.iter().map(|alt| {
            alt.iter()
                .filter_map(|t| match t {
                    Term::Has(n) => Some(n.clone()),
                    _ => None,
                })
                .collect::<BTreeSet<String>>()
        });
        let Some(first) = alts.next() else {
            return BTreeSet::new();
        };
        alts.fold(first, |acc, g| acc.intersection(&g).cloned().collect())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Term {
    Flag(String),
    NotFlag(String),
    Has(String),
    NotHas(String),
}

/// A text template: pieces joined.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TextT(pub Vec<Piece>);

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Text {
        when: Cond,
        en: Vec<template::Seg>,
        zh: Vec<template::Seg>,
    },
    /// Pieces under one `when`, or repeated over a list's items (`each`), joined with `sep`.
    Group {
        when: Cond,
        each: Option<String>,
        sep: (String, String),
        parts: Vec<Piece>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandT {
    pub when: Cond,
    pub each: Option<String>,
    pub run: String,
    /// Arguments built from text templates.
    pub args: Vec<(String, Vec<template::Seg>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SourceT {
    pub when: Cond,
    /// What the finding cites, leaked once when the built-in files load (a
    /// [`crate::finding::Source`] holds `&'static str`; overrides cannot change sources).
    /// `None` for `{ none = "why" }`: no handbook section covers the case, and the finding
    /// cites none.
    pub cites: Option<Cites>,
}

/// One citation of a rule file: a handbook section (`url` is `None`), or external
/// documentation (the kernel's, a component's) with its address and the reason no handbook
/// section covers the case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cites {
    pub doc: &'static str,
    pub section: &'static str,
    /// External documentation: `https://…`.
    pub url: Option<&'static str>,
    /// External documentation: why no handbook section covers the case.
    pub why: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SeeAlsoT {
    pub when: Cond,
    pub key: String,
}

/// How many successful runs in a row a finding must be reported to be raised, and absent to
/// be cleared (the agent's state applies it in `serve`; `check` shows what it sees now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    pub raise_after: u32,
    pub clear_after: u32,
}

impl Hysteresis {
    /// What a rule that states no `raise_after`/`clear_after` gets: raised on the first run
    /// that reports it, cleared on the first that does not (the judge's word as it is). Rules
    /// judging rates or top-N lists state their own.
    pub const DEFAULT: Hysteresis = Hysteresis {
        raise_after: 1,
        clear_after: 1,
    };
    /// The largest number of cycles a rule may state.
    pub const MAX_CYCLES: u32 = 100;
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis::DEFAULT
    }
}

/// One rule: its words and what it declares (conditions, optional evidence, an example).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    /// The file(s) it comes from: `memory.toml`, or `memory.toml + /etc/x.toml`.
    pub file: String,
    pub(crate) conditions: BTreeMap<String, String>,
    pub(crate) optional: BTreeSet<String>,
    pub(crate) example: Draft,
    pub(crate) title: TextT,
    pub(crate) summary: TextT,
    pub(crate) steps: Vec<TextT>,
    pub(crate) commands: Vec<CommandT>,
    pub(crate) sources: Vec<SourceT>,
    pub(crate) see_also: Vec<SeeAlsoT>,
    pub(crate) hysteresis: Hysteresis,
    /// The NodeConditions its finding sets ([`SetsCondition`]).
    pub(crate) cluster: Vec<SetsCondition>,
    /// The Event its finding makes ([`MakesEvent`]).
    pub(crate) event: Option<MakesEvent>,
}

/// Which names the Kubernetes reporter writes (`--kube-names`, docs/kubernetes.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Naming {
    /// node-doctor's own `NodeDoctor…` types (True: a problem holds).
    #[default]
    Own,
    /// node-problem-detector's types where a class has one (`--kube-npd-names`).
    Npd,
    /// The EKS node monitoring agent's types for repair-worthy classes, with its polarity
    /// (True: healthy, False: a problem); advisory classes keep node-doctor's own types.
    Nma,
}

impl Naming {
    /// node-problem-detector's names or node-doctor's own (`--kube-npd-names`).
    pub fn npd(on: bool) -> Naming {
        if on {
            Naming::Npd
        } else {
            Naming::Own
        }
    }

    /// The flag's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Naming::Own => "node-doctor",
            Naming::Npd => "npd",
            Naming::Nma => "nma",
        }
    }
}

/// A NodeCondition class (`collectors/rules/cluster.toml`): one lasting problem class.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCondition {
    /// node-doctor's own condition type (`NodeDoctor…`).
    pub ctype: String,
    /// The reason and message while no problem of the class holds.
    pub healthy_reason: String,
    pub healthy_message: String,
    /// node-problem-detector's condition type and healthy reason (`--kube-npd-names`).
    pub npd: Option<(String, String)>,
    /// Repair-worthy (the node cannot do its job until it is rebooted or replaced, and the
    /// cause is the node's own) or advisory (`repair` in the file; docs/kubernetes.md).
    pub repair: bool,
    /// The EKS node monitoring agent's type and this class's stable reason when unhealthy
    /// (`--kube-names nma`); repair-worthy classes only.
    pub nma: Option<NmaMapping>,
    /// The collectors whose rules set it: when none of them runs, its status is unknown.
    pub collectors: Vec<String>,
}

/// Where a repair-worthy class goes under the node monitoring agent's names.
#[derive(Debug, Clone, PartialEq)]
pub struct NmaMapping {
    /// One of the [`NmaCondition`] types (`StorageReady`, `KernelReady`, …).
    pub ctype: String,
    /// The reason written while this class's problem makes the type False.
    pub reason: String,
}

/// One of the node monitoring agent's condition types (`[[nma_condition]]` of
/// `cluster.toml`): True with its healthy reason while none of the classes mapped onto it has
/// a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct NmaCondition {
    pub ctype: String,
    pub healthy_reason: String,
    pub healthy_message: String,
}

impl NodeCondition {
    /// The condition type written, node-doctor's or node-problem-detector's (`npd`); the
    /// node monitoring agent's naming is [`NodeCondition::written_type`].
    pub fn ctype(&self, npd: bool) -> &str {
        match (npd, &self.npd) {
            (true, Some((t, _))) => t,
            _ => &self.ctype,
        }
    }

    pub fn healthy_reason(&self, npd: bool) -> &str {
        match (npd, &self.npd) {
            (true, Some((_, r))) => r,
            _ => &self.healthy_reason,
        }
    }

    /// The node monitoring agent's type this class is written as, under that naming.
    pub fn nma_for(&self, naming: Naming) -> Option<&NmaMapping> {
        self.nma.as_ref().filter(|_| naming == Naming::Nma)
    }

    /// The condition type written under `naming`.
    pub fn written_type(&self, naming: Naming) -> &str {
        match self.nma_for(naming) {
            Some(m) => &m.ctype,
            None => self.ctype(naming == Naming::Npd),
        }
    }

    /// Every type this class has under any naming (a type written under a naming no longer
    /// used is removed at start, when node-doctor owns it).
    pub fn all_types(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.ctype.as_str())
            .chain(self.npd.iter().map(|(t, _)| t.as_str()))
            .chain(self.nma.iter().map(|m| m.ctype.as_str()))
    }
}

/// A NodeCondition a rule's finding sets, and with which reason, when `when` holds (the
/// rule's `cluster` entries; the reporter sets it for warning and critical findings only).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetsCondition {
    pub condition: String,
    pub reason: String,
    pub when: Cond,
}

/// The Event a rule's finding makes (a problem that happens: an OOM kill, a hung task), when
/// `when` holds (the rule's `event`).
#[derive(Debug, Clone, PartialEq)]
pub struct MakesEvent {
    pub reason: String,
    /// node-problem-detector's reasons (`--kube-npd-names`), each with the condition under
    /// which it is the one (the first that holds).
    pub(crate) npd: Vec<(String, Cond)>,
    pub(crate) when: Cond,
    /// The evidence that counts occurrences in the finding's window.
    pub count: String,
    /// The evidence that says how long ago the latest occurrence was.
    pub age: Option<String>,
    /// The evidence holding the log line node-problem-detector would write as the Event's
    /// message (its temporary rules write the matched line), used with NPD's reason.
    pub npd_message: Option<String>,
}

impl Rule {
    /// Its hysteresis: stated in its file, or [`Hysteresis::DEFAULT`].
    pub fn hysteresis(&self) -> Hysteresis {
        self.hysteresis
    }

    /// The conditions the rule declares, with what each means.
    pub fn conditions(&self) -> &BTreeMap<String, String> {
        &self.conditions
    }

    /// The example draft the rule file gives.
    pub fn example(&self) -> &Draft {
        &self.example
    }

    /// Every command template of the rule (for the shell test).
    pub fn command_templates(&self) -> impl Iterator<Item = &str> {
        self.commands.iter().map(|c| c.run.as_str())
    }

    /// `(doc, section)` of every handbook section the rule may cite.
    pub fn sources(&self) -> impl Iterator<Item = (&str, &str)> {
        self.sources
            .iter()
            .filter_map(|s| s.cites)
            .filter(|c| c.url.is_none())
            .map(|c| (c.doc, c.section))
    }

    /// Every citation the rule may make (handbook sections and external documentation), in
    /// the order of its `source` list.
    pub fn citations(&self) -> impl Iterator<Item = Cites> + '_ {
        self.sources.iter().filter_map(|s| s.cites)
    }

    /// True when the rule says (`{ none = "why" }`) that under some conditions no handbook
    /// section covers its finding, which then cites none.
    pub fn may_cite_nothing(&self) -> bool {
        self.sources.iter().any(|s| s.cites.is_none())
    }

    /// Every explain key the rule may link to.
    pub fn see_also_keys(&self) -> impl Iterator<Item = &str> {
        self.see_also.iter().map(|s| s.key.as_str())
    }

    /// Every condition name a `when` of the rule tests (built-ins included).
    /// The NodeConditions and reasons its `cluster` entries name (under whatever `when`).
    pub fn cluster_reasons(&self) -> impl Iterator<Item = (&str, &str)> {
        self.cluster
            .iter()
            .map(|c| (c.condition.as_str(), c.reason.as_str()))
    }

    /// The Event its finding makes, if any.
    pub fn event(&self) -> Option<&MakesEvent> {
        self.event.as_ref()
    }

    pub fn conditions_used(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut add = |c: &Cond| {
            for t in c.terms() {
                if let Term::Flag(n) | Term::NotFlag(n) = t {
                    out.insert(n.clone());
                }
            }
        };
        fn pieces(ps: &[Piece], add: &mut dyn FnMut(&Cond)) {
            for p in ps {
                match p {
                    Piece::Text { when, .. } => add(when),
                    Piece::Group { when, parts, .. } => {
                        add(when);
                        pieces(parts, add);
                    }
                }
            }
        }
        for t in [&self.title, &self.summary].into_iter().chain(&self.steps) {
            pieces(&t.0, &mut add);
        }
        for c in &self.commands {
            add(&c.when);
        }
        for s in &self.sources {
            add(&s.when);
        }
        for s in &self.see_also {
            add(&s.when);
        }
        for c in &self.cluster {
            add(&c.when);
        }
        if let Some(e) = &self.event {
            add(&e.when);
            for (_, w) in &e.npd {
                add(w);
            }
        }
        out
    }
}
