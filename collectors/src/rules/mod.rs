//! Rules as data: what node-doctor tells an operator about each finding, kept in reviewed
//! rule files (`collectors/rules/<collector>.toml`, embedded at compile time), apart from the
//! judges that decide when something is wrong.
//!
//! A judge returns a [`Draft`]: the rule id, severity, subject, typed evidence, the named
//! conditions that select optional advice, and template values that are not evidence (lists,
//! derived figures). [`RuleBook::render`] looks the id up and fills the rule's words:
//!
//! ```toml
//! [[rule]]
//! id = "memory.exhaustion"
//! conditions = { order0_failures = "some order-0 page allocation failed in the window" }
//! title = { en = "Node memory is exhausted", zh = "…" }
//! summary = [
//!   { en = "Only {mem_available_bytes:mib} MiB of {mem_total_bytes:mib} MiB is available", zh = "…" },
//!   { when = "order0_failures", en = " and {order0_allocation_failures} order-0 …", zh = "…" },
//!   { en = ".", zh = "。" },
//! ]
//! steps = [{ en = "…", zh = "…" }]
//! commands = ["ps -eo pid,comm,rss --sort=-rss | head -n 15",
//!             { run = "kubectl get pods -A -o wide --field-selector spec.nodeName={node}", when = "…" }]
//! source = { doc = "002_af370464fa0f13dd.txt", section = "…" }
//! see_also = ["kernel-oom-system"]
//!
//! [rule.example]            # the evidence and vars the rule expects, with believable values
//! severity = "critical"
//! evidence = { mem_available_bytes = 104857600, mem_total_bytes = 8589934592, … }
//! ```
//!
//! The format, piece by piece (ARCHITECTURE.md "How to add a rule" walks through it):
//! - **Text** (`title`, `summary`, each step): `{ en, zh }`, or a list of such pieces joined
//!   together. A piece may carry `when`; a step whose pieces are all left out is left out. A
//!   piece `{ each = "list", en, zh, sep = { en, zh } }` (or `parts = [...]` instead of
//!   en/zh) repeats over a list of items the judge gives ([`Var::Items`]), joined with `sep`
//!   (default `, ` / `、`); inside it, placeholders and conditions name the item's own fields
//!   and conditions first (item conditions are declared in `conditions` like the others).
//! - **Placeholders** `{name}` / `{name:format}` name evidence, vars, item fields or the
//!   built-in `{node}`; formats are `.N`, `kib`/`mib`/`gib`/`min` (with optional `.N`) and
//!   `bytes` ([`template`]). Words ([`Var::Words`]) join with `, ` / `、`.
//! - **Conditions** `when = "a and not b and has x"`: `a` is a condition the rule declares
//!   (`conditions = { a = "what it means" }`) and the judge sets, or the built-in `info`,
//!   `warning`, `critical` (the finding's severity); `has x` holds when evidence or var `x`
//!   is present. Evidence the judge sets only sometimes is listed in `optional`, and a
//!   placeholder naming it must stand under a `has` of it: checked when the file loads.
//! - **Commands**: a [`crate::shell`] template (`{name}` placeholders, `{{`/`}}` literal
//!   braces), or `{ run, when, each, args }`. Every argument is quoted by the one shell
//!   renderer; `args = { line = "net.netfilter.nf_conntrack_max = {recommended_max}" }` builds
//!   one argument from a text template. With `each`, one command per item.
//! - **source** `{ doc, section }` (or a list with `when`, first match; the last has none);
//!   where no handbook section covers the case, external documentation
//!   `{ doc, section, url = "https://…", why = "why no handbook section covers it" }` (the
//!   kernel's, the component's; the finding carries the url), or `{ none = "why" }` (the
//!   finding cites nothing); **see_also** keys of the explain catalogue (strings or
//!   `{ key, when }`).
//! - **example**: severity, subject, evidence and vars (scalars, lists of strings, or lists
//!   of tables for items, with `conditions = [...]`). It declares what placeholders exist,
//!   and a test renders every rule from it in both languages under every condition.
//!
//! - **cluster**, **event**: what a warning or critical finding of the rule sets in the
//!   cluster: `cluster = [{ condition, reason, when }]` (NodeCondition classes of
//!   `collectors/rules/cluster.toml`) and `event = { reason, npd_reason, npd_when, when, count,
//!   age, npd_message }` ([`RuleBook::cluster`], [`RuleBook::event`]; docs/kubernetes.md).
//!
//! - **raise_after**, **clear_after** (cycles, 1–100): the rule's hysteresis, applied by the
//!   agent's state in `serve` ([`Hysteresis`]): a finding is raised once its judge has
//!   reported it on `raise_after` successful runs in a row, and cleared once it has been
//!   absent from `clear_after` of them in a row. A rule that omits them gets
//!   [`Hysteresis::DEFAULT`] (1 and 1: raised and cleared as the judge reports).
//!
//! Operators override the words of a rule (`--rules-file`, [`RuleBook::with_overrides`]):
//! `title`, `summary`, `steps`, `commands` replace, `add_steps`, `add_commands` append,
//! `raise_after`, `clear_after` replace; the file is checked against the built-in rule's
//! declarations at start-up.

mod describe;
mod draft;
mod load;
mod model;
mod render;
pub mod template;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

pub use describe::{Citation, CommandLine, Description, Part, SetsCondition as Sets};
pub use draft::{Draft, Item, Var};
use model::Cond;
pub use model::{
    Cites, Hysteresis, MakesEvent, Naming, NmaCondition, NmaMapping, NodeCondition, Rule,
    RulesError,
};

use crate::finding::Finding;

include!(concat!(env!("OUT_DIR"), "/rule_files.rs"));

/// The file of the NodeCondition classes, among [`FILES`]; every other file holds rules.
const CLUSTER_FILE: &str = "cluster.toml";

/// The built-in rule files (every file but [`CLUSTER_FILE`]).
fn rule_files() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    FILES.iter().filter(|(f, _)| *f != CLUSTER_FILE)
}

/// The built-in rule files, each rule read the first time it is asked for: a `check` of a
/// healthy node renders no finding and reads none. A rule asked for alone is read alone, from
/// the JSON copy of its table the build script wrote ([`BUILTIN_RULES`]): a `check` that
/// renders two of `kernel.toml`'s eleven rules reads those two. The TOML parser read the
/// rules' text at about 40 KB a millisecond here and took over half of a rule's first
/// rendering; `serde_json` reads the same tables about four times as fast. A whole file (every
/// rule: `explain`, the rules page, overrides) is parsed from its TOML text.
struct Builtin {
    files: Vec<(&'static str, OnceLock<BTreeMap<String, Rule>>)>,
    /// Per file: the collector whose rules it holds, copied out of the generated table. Every
    /// lookup compares it; the file names in that table sit beside the files' embedded text,
    /// and reading them at each lookup kept a page of every rule file, and the kernel's
    /// 64 KiB around it, resident in `serve` (issue 43).
    collectors: Vec<String>,
    /// Per file: its rules' JSON by id, each read when asked (`None`: the build script wrote
    /// no JSON for the file; the whole file is parsed).
    alone: Vec<OnceLock<Option<Alone>>>,
}

/// The rules of one built-in file as the build script wrote them: its collector and each
/// rule's table as JSON, by id, each read into a [`Rule`] when asked for.
///
/// The ids are copied out of the generated table: a lookup (every finding of every run asks
/// for its rule) compares ids, and ids borrowed from embedded text kept a page of every rule
/// file resident in `serve` for good (issue 32); the JSON is read only to make the rule.
struct Alone {
    collector: &'static str,
    rules: BTreeMap<String, (&'static str, OnceLock<Option<Rule>>)>,
}

impl Alone {
    fn of(file: &str) -> Option<Alone> {
        let (_, collector, rules) = BUILTIN_RULES.iter().find(|(f, _, _)| *f == file)?;
        Some(Alone {
            collector,
            rules: rules
                .iter()
                .map(|(id, json)| (id.to_string(), (*json, OnceLock::new())))
                .collect(),
        })
    }
}

impl Builtin {
    fn new() -> Builtin {
        let files: Vec<_> = rule_files().map(|(f, _)| (*f, OnceLock::new())).collect();
        let alone = files.iter().map(|_| OnceLock::new()).collect();
        let collectors = files
            .iter()
            .map(|(f, _)| file_collector(f).to_string())
            .collect();
        Builtin {
            files,
            collectors,
            alone,
        }
    }

    fn text(i: usize) -> &'static str {
        rule_files().nth(i).map_or("", |(_, t)| *t)
    }

    /// The rules of built-in file `i`, parsed now if not yet. A broken embedded file (the
    /// unit tests guard against it) is logged and holds no rule: its findings render with
    /// their ids only.
    fn file(&self, i: usize) -> &BTreeMap<String, Rule> {
        let (name, cell) = &self.files[i];
        cell.get_or_init(|| {
            crate::embedded::note_bulk_read();
            Self::parse_file(name, i)
        })
    }

    /// Built-in file `i` parsed, by id.
    fn parse_file(name: &str, i: usize) -> BTreeMap<String, Rule> {
        match load::builtin_file(name, Self::text(i)) {
            Ok(rules) => rules.into_iter().map(|r| (r.id.clone(), r)).collect(),
            Err(e) => {
                tracing::error!(error = %e, "a built-in rule file does not load; its findings will carry their ids only");
                BTreeMap::new()
            }
        }
    }

    /// The rule `id` of file `i` read alone from its JSON: `Some(None)` when the file has no
    /// such rule, `None` when only the whole file can tell (no JSON for the file, or the JSON
    /// does not make a rule: the whole file's parse says why).
    fn alone(&self, i: usize, id: &str) -> Option<Option<&Rule>> {
        let name = self.files[i].0;
        let alone = self.alone[i].get_or_init(|| Alone::of(name)).as_ref()?;
        let Some((json, cell)) = alone.rules.get(id) else {
            return Some(None);
        };
        cell.get_or_init(|| {
            crate::embedded::note_bulk_read();
            load::builtin_rule(name, alone.collector, json).ok()
        })
        .as_ref()
        .map(Some)
    }

    /// The rule `id`: only the files of its collector (the id's first segment) are looked
    /// at, and of those only the rule's own text is parsed when the file's cut finds it.
    fn get(&self, id: &str) -> Option<&Rule> {
        let collector = id.split('.').next().unwrap_or(id);
        (0..self.files.len())
            .filter(|i| self.collectors[*i] == collector)
            .find_map(|i| match self.alone(i, id) {
                Some(found) => found,
                None => self.file(i).get(id),
            })
    }

    /// Every built-in rule (parses every file).
    fn all(&self) -> impl Iterator<Item = &Rule> {
        (0..self.files.len()).flat_map(|i| self.file(i).values())
    }
}

/// The collector whose rules a built-in file holds: its name up to the first `_` or `.`
/// (`runtime_logs.toml` holds `runtime.` rules; a unit test checks every file says so).
fn file_collector(file: &str) -> &str {
    file.split(['_', '.']).next().unwrap_or(file)
}

/// The rules in force: the built-in files, with the operator's overrides applied.
#[derive(Clone, Default)]
pub struct RuleBook {
    /// The built-in files, parsed lazily ([`RuleBook::builtin`]); `None` when `rules` holds
    /// the whole book ([`RuleBook::load_builtin`], tests).
    builtin: Option<Arc<Builtin>>,
    /// Rules that take precedence over the built-in ones: the overridden rules.
    rules: BTreeMap<String, Rule>,
    /// The override files applied, in order.
    overrides: Vec<String>,
}

// Rules compare by content; their evidence floats come from `Evidence::from`, never NaN.
impl PartialEq for RuleBook {
    fn eq(&self, other: &RuleBook) -> bool {
        self.rules().eq(other.rules()) && self.overrides == other.overrides
    }
}
impl Eq for RuleBook {}

impl fmt::Debug for RuleBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleBook")
            .field("builtin", &self.builtin.is_some())
            .field("rules", &self.rules.len())
            .field("overrides", &self.overrides)
            .finish()
    }
}

static BUILTIN: OnceLock<Arc<RuleBook>> = OnceLock::new();

impl RuleBook {
    /// A book of exactly these rules (the demo rule files of the unit tests).
    pub fn from_rules(rules: impl IntoIterator<Item = Rule>) -> RuleBook {
        RuleBook {
            builtin: None,
            rules: rules.into_iter().map(|r| (r.id.clone(), r)).collect(),
            overrides: Vec::new(),
        }
    }

    /// Parses every built-in rule file now (what [`RuleBook::builtin`] holds), failing on the
    /// first that does not load or on an id two files define.
    pub fn load_builtin() -> Result<RuleBook, RulesError> {
        let mut rules = Vec::new();
        let mut ids = BTreeMap::new();
        for (file, text) in rule_files() {
            for r in load::builtin_file(file, text)? {
                if let Some(old) = ids.insert(r.id.clone(), *file) {
                    return Err(RulesError::Invalid {
                        file: file.to_string(),
                        id: r.id.clone(),
                        message: format!("also defined in {old}"),
                    });
                }
                rules.push(r);
            }
        }
        Ok(RuleBook::from_rules(rules))
    }

    /// The built-in rules, each file parsed the first time one of its collector's rules is
    /// asked for.
    pub fn builtin() -> Arc<RuleBook> {
        BUILTIN
            .get_or_init(|| {
                Arc::new(RuleBook {
                    builtin: Some(Arc::new(Builtin::new())),
                    rules: BTreeMap::new(),
                    overrides: Vec::new(),
                })
            })
            .clone()
    }

    /// The built-in book, for as long as the program runs (what the cluster mapping is read
    /// from: an override changes words and hysteresis, not what a rule sets in the cluster).
    fn builtin_static() -> &'static RuleBook {
        let _ = RuleBook::builtin();
        BUILTIN
            .get()
            .map_or_else(|| unreachable!("initialised above"), |b| &**b)
    }

    /// The NodeCondition classes (`collectors/rules/cluster.toml`), each with the collectors
    /// whose rules set it. Parses every built-in rule file the first time.
    pub fn node_conditions() -> &'static [NodeCondition] {
        &Self::cluster_file().0
    }

    /// The node monitoring agent's condition types (`[[nma_condition]]` of `cluster.toml`)
    /// that repair-worthy classes map onto under `--kube-names nma`.
    pub fn nma_conditions() -> &'static [NmaCondition] {
        &Self::cluster_file().1
    }

    fn cluster_file() -> &'static (Vec<NodeCondition>, Vec<NmaCondition>) {
        static CLASSES: OnceLock<(Vec<NodeCondition>, Vec<NmaCondition>)> = OnceLock::new();
        CLASSES.get_or_init(|| match load_node_conditions(RuleBook::builtin_static()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "the built-in NodeCondition classes do not load; no condition is written");
                (Vec::new(), Vec::new())
            }
        })
    }

    /// Registers the condition classes an operator's configuration names (the conditions of
    /// `--npd-config` files), once, at start: a rule whose `cluster` entry takes its condition
    /// from evidence (`condition = "{condition}"`) sets one of these. Refused: a type that is
    /// not UpperCamelCase, one defined twice, or a type node-doctor's own classes are written
    /// as under `naming` (their node-problem-detector or node monitoring agent types).
    pub fn set_operator_conditions(
        classes: Vec<NodeCondition>,
        naming: Naming,
    ) -> Result<(), String> {
        let builtin = RuleBook::node_conditions();
        for (i, c) in classes.iter().enumerate() {
            for n in [&c.ctype, &c.healthy_reason] {
                if !load::is_camel(n) {
                    return Err(format!(
                        "condition {:?}: {:?} is not UpperCamelCase, which a NodeCondition needs",
                        c.ctype, n
                    ));
                }
            }
            if classes[..i].iter().any(|o| o.ctype == c.ctype) {
                return Err(format!("condition {} is named twice", c.ctype));
            }
            if let Some(b) = builtin
                .iter()
                .find(|b| b.ctype == c.ctype || b.written_type(naming) == c.ctype)
            {
                return Err(format!(
                    "condition {} is also written by node-doctor's own class {}{}",
                    c.ctype,
                    b.ctype,
                    match naming {
                        Naming::Own => "",
                        Naming::Npd => " under --kube-npd-names",
                        Naming::Nma => " under --kube-names nma",
                    }
                ));
            }
        }
        OPERATOR_CONDITIONS
            .set(classes)
            .map_err(|_| "operator conditions are registered once".to_string())
    }

    /// The operator's condition classes ([`RuleBook::set_operator_conditions`]), if any.
    pub fn operator_conditions() -> &'static [NodeCondition] {
        OPERATOR_CONDITIONS.get().map_or(&[], Vec::as_slice)
    }

    /// Every condition class written: the built-in ones, then the operator's.
    pub fn all_node_conditions() -> Vec<&'static NodeCondition> {
        RuleBook::node_conditions()
            .iter()
            .chain(RuleBook::operator_conditions())
            .collect()
    }

    /// The NodeConditions a finding sets, each with its reason: its rule's `cluster` entries
    /// whose `when` holds for the finding (its severity, conditions and evidence). Whether a
    /// finding of its severity sets any is the reporter's matter. An entry that takes its
    /// condition from evidence sets one of the operator's classes, never a built-in one.
    pub fn cluster(f: &Finding) -> Vec<(&'static NodeCondition, String)> {
        let Some(rule) = RuleBook::builtin_static().get(&f.id) else {
            return Vec::new();
        };
        rule.cluster
            .iter()
            .filter(|c| holds(&c.when, f))
            .filter_map(|c| {
                let class = match load::evidence_ref(&c.condition) {
                    Some(n) => {
                        let t = f.evidence.get(n)?.to_string();
                        RuleBook::operator_conditions()
                            .iter()
                            .find(|k| k.ctype == t)?
                    }
                    None => RuleBook::node_conditions()
                        .iter()
                        .find(|k| k.ctype == c.condition)?,
                };
                Some((class, from_evidence(&c.reason, f)?))
            })
            .collect()
    }

    /// The Event a finding makes, if its rule has one whose `when` holds.
    pub fn event(f: &Finding) -> Option<&'static MakesEvent> {
        let rule = RuleBook::builtin_static().get(&f.id)?;
        rule.event.as_ref().filter(|e| holds(&e.when, f))
    }

    /// A rule by id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules
            .get(id)
            .or_else(|| self.builtin.as_ref()?.get(id))
    }

    /// The hysteresis of the rule `id` ([`Hysteresis::DEFAULT`] for an id without a rule).
    pub fn hysteresis(&self, id: &str) -> Hysteresis {
        self.get(id).map_or(Hysteresis::DEFAULT, Rule::hysteresis)
    }

    /// Every rule in force, by id (parses every built-in file).
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        let mut all: BTreeMap<&str, &Rule> = BTreeMap::new();
        if let Some(b) = &self.builtin {
            all.extend(b.all().map(|r| (r.id.as_str(), r)));
        }
        all.extend(self.rules.values().map(|r| (r.id.as_str(), r)));
        all.into_values()
    }

    /// The override files applied, in order.
    pub fn overrides(&self) -> &[String] {
        &self.overrides
    }

    /// These rules with the overrides of `text` (an operator's rule file named `file`)
    /// applied. Every overridden rule is rendered from its example under every condition:
    /// a file that would print a broken finding is refused.
    pub fn with_overrides(&self, file: &str, text: &str) -> Result<RuleBook, RulesError> {
        let mut out = self.clone();
        let base: BTreeMap<String, Rule> =
            self.rules().map(|r| (r.id.clone(), r.clone())).collect();
        for rule in load::apply_overrides(file, text, &base)? {
            let problems = render::check(&rule);
            if let Some(p) = problems.first() {
                return Err(RulesError::Invalid {
                    file: file.to_string(),
                    id: rule.id.clone(),
                    message: p.clone(),
                });
            }
            out.rules.insert(rule.id.clone(), rule);
        }
        out.overrides.push(file.to_string());
        Ok(out)
    }

    /// The built-in rules with the operator's files applied in order, each read with the
    /// same caps as any configuration file (a regular file of at most 1 MiB,
    /// [`crate::hostfs::cap::CONFIG`]).
    pub fn with_override_files(&self, paths: &[impl AsRef<Path>]) -> Result<RuleBook, RulesError> {
        let mut book = self.clone();
        for p in paths {
            let p = p.as_ref();
            let bytes = crate::hostfs::read_bytes(p, crate::hostfs::cap::CONFIG)?;
            let text = String::from_utf8(bytes).map_err(|e| RulesError::NotUtf8 {
                file: p.display().to_string(),
                message: e.to_string(),
            })?;
            book = book.with_overrides(&p.display().to_string(), &text)?;
        }
        Ok(book)
    }

    /// The finding `draft` describes, in the words of its rule, `{node}` being `node`.
    ///
    /// A draft whose rule is missing, or that lacks a value its rule's text names, is a
    /// programming error the golden and scenario tests catch: debug builds panic; release
    /// builds log it and print the gap visibly (`‹missing: name›`, the command left out).
    pub fn render(&self, draft: Draft, node: &str) -> Finding {
        render::render(self.get(&draft.id), draft, node)
    }

    /// Problems rendering `rule` from its example under every combination of conditions
    /// (for tests and override checks); empty when it renders cleanly.
    pub fn check(rule: &Rule) -> Vec<String> {
        render::check(rule)
    }

    /// Renders `rule`'s example once with exactly `conditions` set (for tests).
    pub fn render_example(rule: &Rule, conditions: &[&str], node: &str) -> Finding {
        let mut d = rule.example.clone();
        d.conditions = conditions.iter().map(|c| c.to_string()).collect();
        render::render(Some(rule), d, node)
    }
}

/// Whether a rule's `when` holds for a finding.
fn holds(c: &Cond, f: &Finding) -> bool {
    c.holds_for(f.severity.as_str(), &f.conditions, &|n| {
        f.evidence.contains_key(n)
    })
}

impl MakesEvent {
    /// The event's reason, node-problem-detector's with `npd` where the rule has one and its
    /// `npd_when` holds (NPD's `Ext4Error` is ext4's only).
    /// With `npd`, the first entry of `npd_reason` whose `when` holds, else the reason. A
    /// reason taken from evidence (`reason = "{reason}"`) is the finding's, or `None` when the
    /// finding lacks it or it is not UpperCamelCase.
    pub fn reason_for(&self, npd: bool, f: &Finding) -> Option<String> {
        if npd {
            if let Some(r) = self.npd_entry(f) {
                return from_evidence(r, f);
            }
        }
        from_evidence(&self.reason, f)
    }

    /// The entry of `npd_reason` that names the finding's Event, if one holds.
    fn npd_entry(&self, f: &Finding) -> Option<&String> {
        self.npd
            .iter()
            .find(|(_, when)| holds(when, f))
            .map(|(r, _)| r)
    }

    /// Whether, with `npd`, the Event is node-problem-detector's (one of `npd_reason` holds):
    /// NPD writes every temporary rule's Event as `Warning`, whatever node-doctor's severity.
    pub fn is_npd_for(&self, npd: bool, f: &Finding) -> bool {
        npd && self.npd_entry(f).is_some()
    }

    /// With `npd` and NPD's reason, NPD's message: the log line the evidence `npd_message`
    /// names holds (what NPD writes for a temporary rule), when the finding has it.
    pub fn npd_message_for(&self, npd: bool, f: &Finding) -> Option<String> {
        if !self.is_npd_for(npd, f) {
            return None;
        }
        let key = self.npd_message.as_deref()?;
        Some(f.evidence.get(key)?.to_string()).filter(|m| !m.is_empty())
    }
}

/// A reason or type as written, or the finding's evidence it names (`{name}`), which must be
/// UpperCamelCase to be written.
fn from_evidence(s: &str, f: &Finding) -> Option<String> {
    match load::evidence_ref(s) {
        Some(n) => Some(f.evidence.get(n)?.to_string()).filter(|v| load::is_camel(v)),
        None => Some(s.to_string()),
    }
}

/// The operator's condition classes, registered at start.
static OPERATOR_CONDITIONS: OnceLock<Vec<NodeCondition>> = OnceLock::new();

/// The classes of `cluster.toml`, their collectors filled from the rules of `book` that name
/// them; a rule naming a class that does not exist is an error.
fn load_node_conditions(
    book: &RuleBook,
) -> Result<(Vec<NodeCondition>, Vec<NmaCondition>), RulesError> {
    let text = FILES
        .iter()
        .find(|(f, _)| *f == CLUSTER_FILE)
        .map_or("", |(_, t)| *t);
    let (mut classes, nma) = load::node_conditions(CLUSTER_FILE, text)?;
    for rule in book.rules() {
        for c in &rule.cluster {
            if load::evidence_ref(&c.condition).is_some() {
                // One of the operator's classes, registered at start.
                continue;
            }
            let Some(class) = classes.iter_mut().find(|k| k.ctype == c.condition) else {
                return Err(RulesError::Invalid {
                    file: rule.file.clone(),
                    id: rule.id.clone(),
                    message: format!(
                        "cluster: {:?} is not a NodeCondition of {CLUSTER_FILE}",
                        c.condition
                    ),
                });
            };
            let collector = rule.id.split('.').next().unwrap_or("").to_string();
            if !class.collectors.contains(&collector) {
                class.collectors.push(collector);
                class.collectors.sort();
            }
        }
    }
    Ok((classes, nma))
}

#[cfg(test)]
mod tests;
