//! Which findings reach the cluster, and as what: problems that last become NodeConditions
//! (one per problem class), problems that happen become Events. What a rule sets is data, on
//! the rule in its rule file (`cluster`, `event`), and the classes are
//! `collectors/rules/cluster.toml` (docs/kubernetes.md lists them); this module only asks the
//! rule book. It holds no finding id.

use collectors::rules::RuleBook;
use collectors::{Evidence, Finding, Severity};

pub use collectors::rules::{
    MakesEvent as EventClass, Naming, NmaCondition, NodeCondition as ConditionClass,
};

/// Every condition class, in the order they are written: node-doctor's, then those of the
/// operator's `--npd-config` files.
pub fn conditions() -> Vec<&'static ConditionClass> {
    RuleBook::all_node_conditions()
}

/// The node monitoring agent's type `t` (its healthy reason and message), if it is one.
pub fn nma_condition(t: &str) -> Option<&'static NmaCondition> {
    RuleBook::nma_conditions().iter().find(|n| n.ctype == t)
}

/// The condition classes a finding sets to True, each with its problem reason. Info findings
/// never set a condition.
pub fn conditions_of(f: &Finding) -> Vec<(&'static ConditionClass, String)> {
    if f.severity < Severity::Warning {
        return Vec::new();
    }
    RuleBook::cluster(f)
}

/// The event class of a happening finding, if it is one.
pub fn event_of(f: &Finding) -> Option<&'static EventClass> {
    RuleBook::event(f)
}

/// A number from the evidence.
pub fn number(f: &Finding, key: &str) -> Option<f64> {
    f.evidence.get(key).and_then(Evidence::as_f64)
}
