//! The problem classes `fleet` reports and the node facts it groups by. A class is one
//! condition type as written on the Node (node-doctor's `NodeDoctor…`, node-problem-detector's
//! name of the same problem, the EKS node monitoring agent's `…Ready`, the kubelet's), or one
//! Event reason of node-doctor's that sets no condition. Which status is the problem differs by
//! writer (`False` for `Ready` and the NMA's types, `True` for the rest): the table says, it is
//! data (`classes.toml`, node-doctor's own classes from `collectors/rules/cluster.toml`).

use std::collections::HashMap;

use collectors::rules::RuleBook;
use collectors::Severity;
use serde::Deserialize;

/// What the nodes are grouped by: a label or a `status.nodeInfo` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    Zone,
    Pool,
    InstanceType,
    Kernel,
    OsImage,
    Runtime,
    Kubelet,
}

impl Dim {
    pub const ALL: [Dim; 7] = [
        Dim::Zone,
        Dim::Pool,
        Dim::InstanceType,
        Dim::Kernel,
        Dim::OsImage,
        Dim::Runtime,
        Dim::Kubelet,
    ];

    /// The name in the report (JSON key, table word).
    pub fn name(self) -> &'static str {
        match self {
            Dim::Zone => "zone",
            Dim::Pool => "node pool",
            Dim::InstanceType => "instance type",
            Dim::Kernel => "kernel",
            Dim::OsImage => "OS image",
            Dim::Runtime => "container runtime",
            Dim::Kubelet => "kubelet",
        }
    }

    /// A label selector for the group, when it is a label (`kubectl get nodes -l …`).
    pub fn label(self, value: &str, pool_label: Option<&str>) -> Option<String> {
        let key = match self {
            Dim::Zone => ZONE_LABELS[0],
            Dim::InstanceType => INSTANCE_TYPE_LABELS[0],
            Dim::Pool => pool_label?,
            _ => return None,
        };
        Some(format!("{key}={value}"))
    }
}

/// The zone: the well-known label, then its deprecated beta name.
pub const ZONE_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
];
pub const INSTANCE_TYPE_LABELS: [&str; 2] = [
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
];
/// The node pool labels of the common providers, the first present wins.
pub const POOL_LABELS: [&str; 6] = [
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node.kubernetes.io/pool",
];

/// Who writes a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Kubelet,
    NodeDoctor,
    Npd,
    Nma,
    /// node-doctor's Events (no condition).
    NodeDoctorEvent,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Kubelet => "kubelet",
            Source::NodeDoctor => "node-doctor",
            Source::Npd => "node-problem-detector",
            Source::Nma => "eks-node-monitoring-agent",
            Source::NodeDoctorEvent => "node-doctor event",
        }
    }
}

/// One problem class.
#[derive(Debug, Clone)]
pub struct Class {
    /// The condition type, or the Event reason.
    pub name: String,
    pub source: Source,
    /// The statuses that are the problem.
    pub problem: Vec<String>,
    pub severity: Severity,
    /// What the nodes share when many hold it at once.
    pub shared: Option<String>,
    /// A command template (`{node}`: the first affected node).
    pub shared_command: Option<String>,
    /// node-doctor's rules that set it, with the reason each sets.
    pub rules: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct File {
    class: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(rename = "type")]
    ctype: String,
    source: Option<String>,
    #[serde(default)]
    problem: Vec<String>,
    severity: String,
    shared: Option<String>,
    shared_command: Option<String>,
}

const TABLE: &str = include_str!("classes.toml");

/// Every class, with an index by condition type and by Event reason.
pub struct Classes {
    pub list: Vec<Class>,
    by_type: HashMap<String, usize>,
    by_event: HashMap<String, usize>,
}

fn severity(s: &str) -> Result<Severity, String> {
    match s {
        "critical" => Ok(Severity::Critical),
        "warning" => Ok(Severity::Warning),
        "info" => Ok(Severity::Info),
        other => Err(format!("severity {other:?}")),
    }
}

impl Classes {
    /// The built-in table. An error is a bug in `classes.toml` (a test loads it).
    pub fn builtin() -> Result<Classes, String> {
        let file: File = toml::from_str(TABLE).map_err(|e| format!("classes.toml: {e}"))?;
        let mut out = Classes {
            list: Vec::new(),
            by_type: HashMap::new(),
            by_event: HashMap::new(),
        };
        let mut extra: HashMap<String, Entry> = HashMap::new();
        for e in file.class {
            let source = match e.source.as_deref() {
                Some("kubelet") => Source::Kubelet,
                Some("eks-node-monitoring-agent") => Source::Nma,
                None => {
                    extra.insert(e.ctype.clone(), e);
                    continue;
                }
                Some(other) => return Err(format!("{}: source {other:?}", e.ctype)),
            };
            out.push(Class {
                name: e.ctype,
                source,
                problem: e.problem,
                severity: severity(&e.severity)?,
                shared: e.shared,
                shared_command: e.shared_command,
                rules: Vec::new(),
            });
        }
        let book = RuleBook::builtin();
        for nc in RuleBook::node_conditions() {
            let e = extra.remove(&nc.ctype);
            let rules: Vec<(String, String)> = book
                .rules()
                .flat_map(|r| {
                    r.cluster_reasons()
                        .filter(|(c, _)| *c == nc.ctype)
                        .map(|(_, reason)| (r.id.clone(), reason.to_string()))
                        .collect::<Vec<_>>()
                })
                .collect();
            let class = Class {
                name: nc.ctype.clone(),
                source: Source::NodeDoctor,
                problem: vec!["True".into()],
                severity: match &e {
                    Some(e) => severity(&e.severity)?,
                    None => Severity::Warning,
                },
                shared: e.as_ref().and_then(|e| e.shared.clone()),
                shared_command: e.and_then(|e| e.shared_command),
                rules,
            };
            if let Some((npd, _)) = &nc.npd {
                out.push(Class {
                    name: npd.clone(),
                    source: Source::Npd,
                    ..class.clone()
                });
            }
            out.push(class);
        }
        if let Some(t) = extra.keys().next() {
            return Err(format!("classes.toml: {t} is no class of cluster.toml"));
        }
        out.add_events(&book);
        Ok(out)
    }

    fn push(&mut self, c: Class) {
        self.by_type.insert(c.name.clone(), self.list.len());
        self.list.push(c);
    }

    /// node-doctor's Event reasons: one of a rule that also sets a condition counts toward
    /// that condition's class; the others are classes of their own.
    fn add_events(&mut self, book: &RuleBook) {
        for r in book.rules() {
            let Some(ev) = r.event() else { continue };
            let condition = r
                .cluster_reasons()
                .find_map(|(c, _)| self.by_type.get(c).copied());
            let idx = match condition {
                Some(i) => i,
                None => match self.by_event.get(&ev.reason) {
                    Some(i) => *i,
                    None => {
                        self.list.push(Class {
                            name: ev.reason.clone(),
                            source: Source::NodeDoctorEvent,
                            problem: Vec::new(),
                            severity: Severity::Warning,
                            shared: None,
                            shared_command: None,
                            rules: Vec::new(),
                        });
                        self.list.len() - 1
                    }
                },
            };
            self.by_event.insert(ev.reason.clone(), idx);
            if self.list[idx].source == Source::NodeDoctorEvent
                && !self.list[idx].rules.iter().any(|(id, _)| *id == r.id)
            {
                self.list[idx].rules.push((r.id.clone(), ev.reason.clone()));
            }
        }
    }

    /// The class a condition of this type and status is a problem of.
    pub fn of_condition(&self, ctype: &str, status: &str) -> Option<usize> {
        let i = *self.by_type.get(ctype)?;
        self.list[i]
            .problem
            .iter()
            .any(|p| p == status)
            .then_some(i)
    }

    /// The class a node-doctor Event reason counts toward.
    pub fn of_event(&self, reason: &str) -> Option<usize> {
        self.by_event.get(reason).copied()
    }

    /// The rule of `class` that sets `reason` (for `node-doctor explain`).
    pub fn rule_for(&self, class: usize, reason: &str) -> Option<&str> {
        let rules = &self.list[class].rules;
        rules
            .iter()
            .find(|(_, r)| r == reason)
            .or(rules.first())
            .map(|(id, _)| id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_loads_and_reads_each_writers_polarity() {
        let c = Classes::builtin().unwrap();
        assert!(c.of_condition("Ready", "False").is_some());
        assert!(c.of_condition("Ready", "Unknown").is_some());
        assert!(c.of_condition("Ready", "True").is_none());
        assert!(c.of_condition("KernelReady", "False").is_some());
        assert!(c.of_condition("KernelReady", "True").is_none());
        assert!(c.of_condition("DiskPressure", "True").is_some());
        assert!(c.of_condition("NodeDoctorDNSUnhealthy", "True").is_some());
        assert!(c.of_condition("NodeDoctorDNSUnhealthy", "False").is_none());
        // node-problem-detector's name of a node-doctor class.
        let npd = c.of_condition("KernelDeadlock", "True").unwrap();
        assert_eq!(c.list[npd].source, Source::Npd);
        assert_eq!(c.list[npd].severity, Severity::Critical);
        assert!(c.of_condition("SomeoneElsesType", "True").is_none());
    }

    #[test]
    fn events_join_the_class_their_rule_sets() {
        let c = Classes::builtin().unwrap();
        let cond = c
            .of_condition("NodeDoctorFrequentUnregisterNetDevice", "True")
            .unwrap();
        assert_eq!(c.of_event("NodeDoctorUnregisterNetDevice"), Some(cond));
        let oom = c.of_event("NodeDoctorOOMKill").unwrap();
        assert_eq!(c.list[oom].source, Source::NodeDoctorEvent);
        assert_eq!(
            c.rule_for(oom, "NodeDoctorOOMKill"),
            Some("kernel.oom_cgroup")
        );
        let hw = c.of_condition("NodeDoctorHardwareFailure", "True").unwrap();
        assert_eq!(
            c.rule_for(hw, "UncorrectableMemoryError"),
            Some("hardware.memory_uncorrected")
        );
    }
}
