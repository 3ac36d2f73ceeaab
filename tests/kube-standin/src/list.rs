//! Collection reads (`GET /api/v1/nodes`, `GET …/events`) as the real server answers them:
//! `limit` and an opaque `continue` in key order, `fieldSelector` on the fields the real
//! server indexes. The one thing a reader gets wrong without it: a `continue` carries the
//! list's position, not a resourceVersion, and the real server refuses both together (unless
//! the resourceVersion is `0`).

use std::io::Write;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::{failure, query_param, Resp};

/// One `fieldSelector` term: field, wanted value, and whether it must equal (`=`, `==`) or
/// differ (`!=`).
struct Term {
    field: String,
    value: String,
    equal: bool,
}

/// The value of a selectable field of an object, or `None` when the field is not selectable.
pub type FieldOf = fn(&Value, &str) -> Option<String>;

/// Nodes' selectable fields (the real server: `metadata.name`, `spec.unschedulable`).
pub fn node_field(v: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(str_at(v, "/metadata/name")),
        "spec.unschedulable" => Some(
            v.pointer("/spec/unschedulable")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string(),
        ),
        _ => None,
    }
}

/// Core events' selectable fields (pkg/registry/core/event: `source` is `source.component`).
pub fn event_field(v: &Value, field: &str) -> Option<String> {
    let path = match field {
        "metadata.name" => "/metadata/name",
        "involvedObject.kind" => "/involvedObject/kind",
        "involvedObject.name" => "/involvedObject/name",
        "involvedObject.namespace" => "/involvedObject/namespace",
        "involvedObject.uid" => "/involvedObject/uid",
        "reason" => "/reason",
        "reportingComponent" => "/reportingComponent",
        "source" => "/source/component",
        "type" => "/type",
        _ => return None,
    };
    Some(str_at(v, path))
}

fn str_at(v: &Value, path: &str) -> String {
    v.pointer(path)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `%XX` and `+` of a query value decoded.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn selector(raw: &str, field_of: FieldOf) -> Result<Vec<Term>, String> {
    let mut terms = Vec::new();
    for part in raw.split(',').filter(|p| !p.is_empty()) {
        let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = part.split_once("==") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once('=') {
            (f, v, true)
        } else {
            return Err(format!(
                "invalid selector: '{raw}'; can't understand '{part}'"
            ));
        };
        if field_of(&Value::Null, field).is_none() {
            return Err(format!("field label not supported: {field}"));
        }
        terms.push(Term {
            field: field.to_string(),
            value: value.to_string(),
            equal,
        });
    }
    Ok(terms)
}

fn selected(v: &Value, terms: &[Term], field_of: FieldOf) -> bool {
    terms
        .iter()
        .all(|t| (field_of(v, &t.field).as_deref() == Some(t.value.as_str())) == t.equal)
}

/// The position after `key`, as an opaque token (hex of the key).
fn token(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn untoken(t: &str) -> Option<String> {
    if !t.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(t.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The answer to a list request over `items` (in key order).
pub fn answer<'a>(
    kind: &str,
    rv: u64,
    items: impl Iterator<Item = (&'a str, &'a Value)>,
    query: &str,
    ignore_limit: bool,
    field_of: FieldOf,
) -> Resp {
    let q = |k: &str| query_param(query, k).map(|v| decode(&v));
    let resource_version = q("resourceVersion").unwrap_or_default();
    let cont = q("continue").unwrap_or_default();
    if !cont.is_empty() && !resource_version.is_empty() && resource_version != "0" {
        return failure(
            400,
            "BadRequest",
            "specifying resource version is not allowed when using continue",
        );
    }
    let limit = match q("limit").filter(|l| !l.is_empty()) {
        None => 0,
        Some(l) => match l.parse::<i64>() {
            Ok(n) => n.max(0) as usize,
            Err(_) => return failure(400, "BadRequest", &format!("invalid limit {l:?}")),
        },
    };
    let terms = match selector(&q("fieldSelector").unwrap_or_default(), field_of) {
        Ok(t) => t,
        Err(e) => return failure(400, "BadRequest", &e),
    };
    let after = if cont.is_empty() {
        None
    } else {
        match untoken(&cont) {
            Some(k) => Some(k),
            None => return failure(400, "BadRequest", "continue key is not valid"),
        }
    };
    // The watch cache of older servers serves resourceVersion=0 whole.
    let limit = if ignore_limit && resource_version == "0" && after.is_none() {
        0
    } else {
        limit
    };
    let mut matching = items
        .filter(|(k, _)| after.as_deref().is_none_or(|a| *k > a))
        .filter(|(_, v)| selected(v, &terms, field_of))
        .peekable();
    let mut out = Vec::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "{{\"kind\":\"{kind}\",\"apiVersion\":\"v1\",\"items\":["
    );
    let mut n = 0usize;
    let mut last = "";
    for (k, v) in matching.by_ref() {
        if n > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, v);
        n += 1;
        last = k;
        if limit > 0 && n == limit {
            break;
        }
    }
    let remaining = matching.count();
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    if limit > 0 && remaining > 0 {
        meta["continue"] = Value::String(token(last));
        meta["remainingItemCount"] = Value::from(remaining);
    }
    let _ = write!(out, "],\"metadata\":{meta}}}");
    let mut r = Response::new(Full::new(Bytes::from(out)));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use serde_json::json;

    fn body(r: Resp) -> (u16, Value) {
        let status = r.status().as_u16();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let b = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
        (status, serde_json::from_slice(&b).unwrap())
    }

    fn nodes(n: usize) -> Vec<(String, Value)> {
        (0..n)
            .map(|i| {
                let name = format!("n{i:03}");
                (name.clone(), json!({"metadata": {"name": name}}))
            })
            .collect()
    }

    fn list(items: &[(String, Value)], query: &str, ignore: bool) -> (u16, Value) {
        body(answer(
            "NodeList",
            7,
            items.iter().map(|(k, v)| (k.as_str(), v)),
            query,
            ignore,
            node_field,
        ))
    }

    #[test]
    fn pages_cover_every_item_once_in_order() {
        let items = nodes(25);
        let mut seen = Vec::new();
        let mut query = "limit=10&resourceVersion=0".to_string();
        let mut pages = 0;
        loop {
            let (status, v) = list(&items, &query, false);
            assert_eq!(status, 200, "{v}");
            pages += 1;
            for i in v["items"].as_array().unwrap() {
                seen.push(i["metadata"]["name"].as_str().unwrap().to_string());
            }
            match v["metadata"]["continue"].as_str() {
                Some(c) => {
                    assert!(v["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                    query = format!("limit=10&continue={c}");
                }
                None => break,
            }
        }
        assert_eq!(pages, 3);
        let want: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn the_watch_cache_answers_resource_version_0_whole() {
        let items = nodes(25);
        let (_, v) = list(&items, "limit=10&resourceVersion=0", true);
        assert_eq!(v["items"].as_array().unwrap().len(), 25);
        assert!(v["metadata"].get("continue").is_none());
        // Without resourceVersion=0 the limit holds.
        let (_, v) = list(&items, "limit=10", true);
        assert_eq!(v["items"].as_array().unwrap().len(), 10);
    }

    #[test]
    fn refusals_are_the_real_servers() {
        let items = nodes(3);
        let (s, _) = list(&items, "limit=1&continue=6e303030&resourceVersion=5", false);
        assert_eq!(s, 400);
        let (s, _) = list(&items, "limit=1&continue=6e303030&resourceVersion=0", false);
        assert_eq!(s, 200);
        let (s, _) = list(&items, "limit=x", false);
        assert_eq!(s, 400);
        let (s, v) = list(&items, "fieldSelector=status.phase%3DReady", false);
        assert_eq!(s, 400);
        assert!(v["message"].as_str().unwrap().contains("not supported"));
    }

    #[test]
    fn events_are_selected_by_their_fields() {
        let evs: Vec<(String, Value)> = vec![
            (
                "a".into(),
                json!({"involvedObject": {"kind": "Node"}, "source": {"component": "node-doctor"}}),
            ),
            (
                "b".into(),
                json!({"involvedObject": {"kind": "Pod"}, "source": {"component": "node-doctor"}}),
            ),
            (
                "c".into(),
                json!({"involvedObject": {"kind": "Node"}, "source": {"component": "kubelet"}}),
            ),
        ];
        let r = answer(
            "EventList",
            1,
            evs.iter().map(|(k, v)| (k.as_str(), v)),
            "fieldSelector=involvedObject.kind%3DNode%2Csource%3Dnode-doctor",
            false,
            event_field,
        );
        let (_, v) = body(r);
        assert_eq!(v["items"].as_array().unwrap().len(), 1);
        let r = answer(
            "EventList",
            1,
            evs.iter().map(|(k, v)| (k.as_str(), v)),
            "fieldSelector=source!%3Dnode-doctor",
            false,
            event_field,
        );
        assert_eq!(body(r).1["items"].as_array().unwrap().len(), 1);
    }
}
