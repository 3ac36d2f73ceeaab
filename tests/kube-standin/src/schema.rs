//! Validation of stored objects against the official Kubernetes OpenAPI schemas: the strict
//! JSON schemas of the `kubernetes-validate` package (`additionalProperties: false`, so a
//! misspelt or unknown field fails), for the oldest and the newest Kubernetes version the
//! manifests support, vendored in `schemas/` by `schemas/vendor.py`.

use serde_json::Value;

/// (Kubernetes version, kind, schema text).
const SCHEMAS: &[(&str, &str, &str)] = &[
    (
        "1.30.0",
        "Node",
        include_str!("../schemas/v1.30.0/node-v1.json"),
    ),
    (
        "1.30.0",
        "Event",
        include_str!("../schemas/v1.30.0/event-v1.json"),
    ),
    (
        "1.37.0",
        "Node",
        include_str!("../schemas/v1.37.0/node-v1.json"),
    ),
    (
        "1.37.0",
        "Event",
        include_str!("../schemas/v1.37.0/event-v1.json"),
    ),
];

pub struct Schemas {
    validators: Vec<(&'static str, &'static str, jsonschema::Validator)>,
}

impl Schemas {
    pub fn load() -> Schemas {
        let validators = SCHEMAS
            .iter()
            .map(|(version, kind, text)| {
                let schema: Value = serde_json::from_str(text).expect("vendored schema is JSON");
                let v = jsonschema::options()
                    .should_validate_formats(true)
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("schema {kind} {version}: {e}"));
                (*version, *kind, v)
            })
            .collect();
        Schemas { validators }
    }

    /// Validates `obj` as `kind` against every vendored version; the first errors found.
    pub fn check(&self, kind: &str, obj: &Value) -> Result<(), String> {
        for (version, k, v) in &self.validators {
            if *k != kind {
                continue;
            }
            let errors: Vec<String> = v
                .iter_errors(obj)
                .take(5)
                .map(|e| format!("{} at {}", e, e.instance_path))
                .collect();
            if !errors.is_empty() {
                return Err(format!(
                    "Kubernetes {version} schema: {}",
                    errors.join("; ")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_accept_a_valid_event_and_reject_misspelt_fields_and_bad_times() {
        let s = Schemas::load();
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "u"},
            "reason": "X", "message": "m", "type": "Warning", "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "source": {"component": "node-doctor", "host": "n1"}
        });
        s.check("Event", &ev).unwrap();
        let mut bad = ev.clone();
        bad["involvedObject"]["apiversion"] = json!("v1");
        assert!(s.check("Event", &bad).is_err());
        let mut bad = ev.clone();
        bad["lastTimestamp"] = json!("yesterday");
        assert!(s.check("Event", &bad).is_err());
        let mut bad = ev;
        bad["count"] = json!("2");
        assert!(s.check("Event", &bad).is_err());
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "A", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}});
        s.check("Node", &node).unwrap();
        let mut bad = node;
        bad["status"]["conditions"][0]["lastHeartbeat"] = json!("2026-01-01T00:00:00Z");
        assert!(s.check("Node", &bad).is_err());
    }
}
