//! The four patch content types the API server accepts, with the semantics it gives them for
//! the objects node-doctor writes.
//!
//! - `application/strategic-merge-patch+json`: maps merge recursively (`null` deletes a key);
//!   lists that the Go types tag `patchStrategy:"merge"` merge by their key (a Node's
//!   `status.conditions` and `status.addresses` by `type`, `status.volumesAttached` by `name`), an item with `"$patch": "delete"`
//!   removes the item with its key; every other list is replaced. `$setElementOrder/<list>`
//!   directives are accepted and dropped (they only order the merged list).
//! - `application/merge-patch+json` (RFC 7386): maps merge, every list is replaced whole — so
//!   a merge patch of `status.conditions` drops every other writer's conditions.
//! - `application/json-patch+json` (RFC 6902): `add`, `remove`, `replace`, `move`, `copy`,
//!   `test` on JSON pointers.
//! - `application/apply-patch+yaml` (server-side apply): handled in `lib.rs`, which tracks
//!   field managers; [`apply_merge`] is its merge.

use serde_json::{Map, Value};

/// Lists merged by a key under strategic merge patch, by their path in the object (the
/// `patchMergeKey` tags of the core/v1 Go types for the fields node-doctor's objects have).
pub fn merge_key(path: &[&str]) -> Option<&'static str> {
    match path {
        ["status", "conditions"] => Some("type"),
        ["status", "addresses"] => Some("type"),
        ["status", "volumesAttached"] => Some("name"),
        _ => None,
    }
}

/// A patch that cannot be applied: the API server answers 422 (or 400 for a body that is not
/// a patch at all).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchError {
    pub code: u16,
    pub message: String,
}

fn invalid(msg: impl Into<String>) -> PatchError {
    PatchError {
        code: 422,
        message: msg.into(),
    }
}

/// Strategic merge patch of `patch` into `target`.
pub fn strategic(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_object() {
        return Err(PatchError {
            code: 400,
            message: "strategic merge patch: the body is not a JSON object".into(),
        });
    }
    smp_map(target, patch, &mut Vec::new())
}

fn smp_map(target: &mut Value, patch: &Value, path: &mut Vec<String>) -> Result<(), PatchError> {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return Ok(());
    };
    for (k, v) in patch {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" {
            continue;
        }
        if k.starts_with('$') {
            return Err(invalid(format!(
                "unsupported strategic merge directive {k}"
            )));
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        path.push(k.clone());
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        match (v, merge_key(&p)) {
            (Value::Array(items), Some(key)) => {
                let list = t
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !list.is_array() {
                    *list = Value::Array(Vec::new());
                }
                if let Value::Array(list) = list {
                    merge_list_by_key(list, items, key, path)?;
                }
            }
            (Value::Object(_), _) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                smp_map(slot, v, path)?;
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
        path.pop();
    }
    Ok(())
}

fn merge_list_by_key(
    list: &mut Vec<Value>,
    items: &[Value],
    key: &str,
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    for item in items {
        let Some(obj) = item.as_object() else {
            return Err(invalid(format!(
                "{}: an item of a list merged by {key} is not an object",
                path.join(".")
            )));
        };
        let Some(k) = obj.get(key) else {
            return Err(invalid(format!(
                "{}: map: {item} does not contain declared merge key: {key}",
                path.join(".")
            )));
        };
        let pos = list.iter().position(|e| e.get(key) == Some(k));
        match obj.get("$patch").and_then(Value::as_str) {
            Some("delete") => {
                if let Some(i) = pos {
                    list.remove(i);
                }
            }
            Some(other) => {
                return Err(invalid(format!("unsupported $patch directive {other:?}")));
            }
            None => match pos {
                Some(i) => smp_map(&mut list[i], item, path)?,
                None => {
                    let mut fresh = Value::Object(Map::new());
                    smp_map(&mut fresh, item, path)?;
                    list.push(fresh);
                }
            },
        }
    }
    Ok(())
}

/// JSON merge patch (RFC 7386).
pub fn merge(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Some(t) = target.as_object_mut() {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(ptr: &str) -> Result<Vec<String>, PatchError> {
    if ptr.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = ptr.strip_prefix('/') else {
        return Err(invalid(format!("invalid JSON pointer {ptr:?}")));
    };
    Ok(rest.split('/').map(unescape).collect())
}

fn parent_mut<'a>(
    doc: &'a mut Value,
    tokens: &[String],
) -> Result<(&'a mut Value, String), PatchError> {
    let Some((last, parents)) = tokens.split_last() else {
        return Err(invalid("the whole document cannot be the target"));
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(t)
                .ok_or_else(|| invalid(format!("missing path element {t:?}")))?,
            Value::Array(a) => {
                let i: usize = t
                    .parse()
                    .map_err(|_| invalid(format!("bad array index {t:?}")))?;
                a.get_mut(i)
                    .ok_or_else(|| invalid(format!("array index {i} out of range")))?
            }
            _ => return Err(invalid(format!("path element {t:?} is not a container"))),
        };
    }
    Ok((cur, last.clone()))
}

fn get_ptr<'a>(doc: &'a Value, ptr: &str) -> Result<&'a Value, PatchError> {
    doc.pointer(ptr)
        .ok_or_else(|| invalid(format!("path {ptr:?} does not exist")))
}

fn add(doc: &mut Value, ptr: &str, value: Value) -> Result<(), PatchError> {
    let tokens = split_pointer(ptr)?;
    if tokens.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent_mut(doc, &tokens)?;
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i: usize = last
                    .parse()
                    .map_err(|_| invalid(format!("bad array index {last:?}")))?;
                if i > a.len() {
                    return Err(invalid(format!("array index {i} out of range")));
                }
                a.insert(i, value);
            }
        }
        _ => return Err(invalid("add: the parent is not a container")),
    }
    Ok(())
}

fn remove(doc: &mut Value, ptr: &str) -> Result<Value, PatchError> {
    let tokens = split_pointer(ptr)?;
    let (parent, last) = parent_mut(doc, &tokens)?;
    match parent {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| invalid(format!("remove: {ptr:?} does not exist"))),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| invalid(format!("bad array index {last:?}")))?;
            if i >= a.len() {
                return Err(invalid(format!("remove: array index {i} out of range")));
            }
            Ok(a.remove(i))
        }
        _ => Err(invalid("remove: the parent is not a container")),
    }
}

/// JSON patch (RFC 6902). The document is left unchanged when an operation fails.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let Some(ops) = ops.as_array() else {
        return Err(PatchError {
            code: 400,
            message: "json patch: the body is not a JSON array of operations".into(),
        });
    };
    let mut doc = target.clone();
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("json patch: an operation has no path"))?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| invalid(format!("json patch: {name} needs a value")))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("json patch: {name} needs from")))
        };
        match name {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                get_ptr(&doc, path)?;
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let v = remove(&mut doc, from()?)?;
                add(&mut doc, path, v)?;
            }
            "copy" => {
                let v = get_ptr(&doc, from()?)?.clone();
                add(&mut doc, path, v)?;
            }
            "test" => {
                if get_ptr(&doc, path)? != &value()? {
                    return Err(invalid(format!("json patch: test failed at {path:?}")));
                }
            }
            other => return Err(invalid(format!("json patch: unknown operation {other:?}"))),
        }
    }
    *target = doc;
    Ok(())
}

/// The merge of server-side apply for the fields node-doctor's objects have: maps merge,
/// `status.conditions` (`x-kubernetes-list-type: map`, key `type`) merges by key, other lists
/// are atomic (replaced). Ownership and removal of a manager's dropped items are handled by
/// the caller.
pub fn apply_merge(target: &mut Value, applied: &Value) {
    fn go(target: &mut Value, applied: &Value, path: &mut Vec<String>) {
        let Some(a) = applied.as_object() else {
            *target = applied.clone();
            return;
        };
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let Some(t) = target.as_object_mut() else {
            return;
        };
        for (k, v) in a {
            path.push(k.clone());
            let p: Vec<&str> = path.iter().map(String::as_str).collect();
            match (v, merge_key(&p)) {
                (Value::Array(items), Some(key)) => {
                    let list = t
                        .entry(k.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if !list.is_array() {
                        *list = Value::Array(Vec::new());
                    }
                    if let Value::Array(list) = list {
                        for item in items {
                            match list
                                .iter()
                                .position(|e| e.get(key).is_some() && e.get(key) == item.get(key))
                            {
                                Some(i) => go(&mut list[i], item, path),
                                None => list.push(item.clone()),
                            }
                        }
                    }
                }
                (Value::Object(_), _) => go(t.entry(k.clone()).or_insert(Value::Null), v, path),
                _ => {
                    t.insert(k.clone(), v.clone());
                }
            }
            path.pop();
        }
    }
    go(target, applied, &mut Vec::new());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            {"type": "Other", "status": "False", "reason": "Fine"}
        ]}})
    }

    #[test]
    fn strategic_merges_conditions_by_type_and_deletes_with_the_directive() {
        let mut n = node();
        strategic(
            &mut n,
            &json!({"status": {"conditions": [
                {"type": "Other", "status": "True", "reason": "Bad"},
                {"type": "Mine", "status": "False"}
            ]}}),
        )
        .unwrap();
        let c = &n["status"]["conditions"];
        assert_eq!(c.as_array().unwrap().len(), 3);
        assert_eq!(c[0]["reason"], "KubeletReady");
        assert_eq!(c[1]["reason"], "Bad");
        assert_eq!(c[2]["type"], "Mine");
        strategic(
            &mut n,
            &json!({"status": {"conditions": [{"type": "Mine", "$patch": "delete"}]}}),
        )
        .unwrap();
        assert_eq!(n["status"]["conditions"].as_array().unwrap().len(), 2);
        let err = strategic(
            &mut n,
            &json!({"status": {"conditions": [{"status": "x"}]}}),
        );
        assert_eq!(err.unwrap_err().code, 422);
    }

    #[test]
    fn merge_patch_replaces_the_whole_list() {
        let mut n = node();
        merge(
            &mut n,
            &json!({"status": {"conditions": [{"type": "Mine", "status": "True"}]}}),
        );
        assert_eq!(n["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn json_patch_ops_and_atomicity() {
        let mut n = node();
        json_patch(
            &mut n,
            &json!([
                {"op": "test", "path": "/status/conditions/0/type", "value": "Ready"},
                {"op": "add", "path": "/status/conditions/-", "value": {"type": "Mine"}},
                {"op": "replace", "path": "/status/conditions/1/status", "value": "True"}
            ]),
        )
        .unwrap();
        assert_eq!(n["status"]["conditions"][2]["type"], "Mine");
        assert_eq!(n["status"]["conditions"][1]["status"], "True");
        let before = n.clone();
        let err = json_patch(
            &mut n,
            &json!([
                {"op": "remove", "path": "/status/conditions/2"},
                {"op": "test", "path": "/status/conditions/0/type", "value": "Nope"}
            ]),
        );
        assert_eq!(err.unwrap_err().code, 422);
        assert_eq!(n, before, "a failed patch changes nothing");
    }
}
