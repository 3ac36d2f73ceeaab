//! RBAC as the API server's authorizer applies it, from the shipped manifests: the rules of
//! every Role/ClusterRole bound (RoleBinding/ClusterRoleBinding) to a ServiceAccount.
//!
//! A ClusterRoleBinding grants its ClusterRole's rules in every namespace and on cluster-scoped
//! resources; a RoleBinding grants its Role's (or a ClusterRole's) rules in its own namespace
//! only. A rule matches when its `apiGroups`, `resources` (`nodes/status` names the
//! subresource; `*` matches any) and `verbs` match, and `resourceNames`, when present, name the
//! object (never matched by `create`, which has no name yet).

use std::path::Path;

use serde_json::Value;

/// What one request asks for, as the authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub api_group: String,
    /// `nodes`, `events`, or `nodes/status` for a subresource.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

impl Rule {
    fn allows(&self, a: &Attributes) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        any(&self.api_groups, &a.api_group)
            && any(&self.resources, &a.resource)
            && any(&self.verbs, &a.verb)
            && (self.resource_names.is_empty()
                || a.name
                    .as_deref()
                    .is_some_and(|n| self.resource_names.iter().any(|x| x == n)))
    }
}

/// The rules granted to one ServiceAccount.
#[derive(Debug, Clone, Default)]
pub struct Rbac {
    /// (namespace the grant is limited to, or None for cluster-wide; rule)
    grants: Vec<(Option<String>, Rule)>,
    /// The objects the grants came from, `Kind/name`, for messages.
    pub sources: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| Rule {
                    api_groups: strings(r, "apiGroups"),
                    resources: strings(r, "resources"),
                    verbs: strings(r, "verbs"),
                    resource_names: strings(r, "resourceNames"),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn name(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Rbac {
    /// Reads every `*.yaml` in `dir` (one or more documents each); namespaced objects without
    /// a namespace get `default_namespace` (what the kustomization sets). Grants to the
    /// ServiceAccount `sa_namespace/sa_name`.
    pub fn from_manifests(
        dir: &Path,
        default_namespace: &str,
        sa_namespace: &str,
        sa_name: &str,
    ) -> Result<Rbac, String> {
        let mut docs = Vec::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        entries.sort();
        for path in entries {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let v: Value = serde::Deserialize::deserialize(doc)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if !v.is_null() {
                    docs.push(v);
                }
            }
        }
        Ok(Rbac::from_objects(
            &docs,
            default_namespace,
            sa_namespace,
            sa_name,
        ))
    }

    pub fn from_objects(
        docs: &[Value],
        default_namespace: &str,
        sa_namespace: &str,
        sa_name: &str,
    ) -> Rbac {
        let kind = |d: &Value| {
            d.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let ns_of = |d: &Value| {
            d.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(default_namespace)
                .to_string()
        };
        let mut out = Rbac::default();
        for b in docs {
            let k = kind(b);
            if k != "RoleBinding" && k != "ClusterRoleBinding" {
                continue;
            }
            let binding_ns = ns_of(b);
            let subject_matches = b
                .get("subjects")
                .and_then(Value::as_array)
                .is_some_and(|subs| {
                    subs.iter().any(|s| {
                        s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                            && s.get("name").and_then(Value::as_str) == Some(sa_name)
                            && s.get("namespace")
                                .and_then(Value::as_str)
                                .unwrap_or(&binding_ns)
                                == sa_namespace
                    })
                });
            if !subject_matches {
                continue;
            }
            let role_kind = b
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role_name = b
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role = docs.iter().find(|d| {
                kind(d) == role_kind
                    && name(d) == role_name
                    && (role_kind == "ClusterRole" || ns_of(d) == binding_ns)
            });
            let Some(role) = role else { continue };
            let scope = if k == "ClusterRoleBinding" {
                None
            } else {
                Some(binding_ns.clone())
            };
            out.sources
                .push(format!("{k}/{} -> {role_kind}/{role_name}", name(b)));
            for r in rules_of(role) {
                out.grants.push((scope.clone(), r));
            }
        }
        out
    }

    /// True when some grant allows the request.
    pub fn allows(&self, a: &Attributes) -> bool {
        self.grants.iter().any(|(scope, rule)| {
            let in_scope = match scope {
                None => true,
                Some(ns) => a.namespace.as_deref() == Some(ns.as_str()),
            };
            in_scope && rule.allows(a)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(verb: &str, resource: &str, ns: Option<&str>, name: Option<&str>) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: String::new(),
            resource: resource.into(),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn bindings_scope_their_rules() {
        let docs = vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "cr"},
                   "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "crb"},
                   "roleRef": {"kind": "ClusterRole", "name": "cr"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"kind": "Role", "metadata": {"name": "r", "namespace": "default"},
                   "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "default"},
                   "roleRef": {"kind": "Role", "name": "r"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"kind": "Role", "metadata": {"name": "other"},
                   "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "other"},
                   "roleRef": {"kind": "Role", "name": "other"},
                   "subjects": [{"kind": "ServiceAccount", "name": "someone-else"}]}),
        ];
        let r = Rbac::from_objects(&docs, "ns", "ns", "sa");
        assert!(r.allows(&attrs("get", "nodes", None, Some("n1"))));
        assert!(!r.allows(&attrs("list", "nodes", None, None)));
        assert!(!r.allows(&attrs("patch", "nodes/status", None, Some("n1"))));
        assert!(r.allows(&attrs("create", "events", Some("default"), None)));
        assert!(!r.allows(&attrs("create", "events", Some("kube-system"), None)));
        assert!(!r.allows(&attrs("patch", "events", Some("default"), Some("e"))));
        assert_eq!(r.sources.len(), 2);
    }
}
