//! Renders what the stand-in stored the way `kubectl describe node` shows conditions and
//! `kubectl get events` lists events, for docs/kubernetes.md's example and for people reading a test's
//! output. Columns are padded to their widest cell as kubectl's tab writer does.

use serde_json::Value;

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn table(rows: &[Vec<String>], indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        out.push_str(indent);
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The `Conditions:` block of `kubectl describe node`.
pub fn conditions(node: &Value) -> String {
    let mut rows = vec![
        [
            "Type",
            "Status",
            "LastHeartbeatTime",
            "LastTransitionTime",
            "Reason",
            "Message",
        ]
        .map(String::from)
        .to_vec(),
        [
            "----",
            "------",
            "-----------------",
            "------------------",
            "------",
            "-------",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for c in node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        rows.push(vec![
            s(c, "/type").into(),
            s(c, "/status").into(),
            s(c, "/lastHeartbeatTime").into(),
            s(c, "/lastTransitionTime").into(),
            s(c, "/reason").into(),
            s(c, "/message").into(),
        ]);
    }
    format!("Conditions:\n{}", table(&rows, "  "))
}

/// `kubectl get events --field-selector involvedObject.kind=Node` (columns of kubectl 1.30).
pub fn events(events: &[Value]) -> String {
    let mut rows = vec![
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"]
            .map(String::from)
            .to_vec(),
    ];
    let mut sorted: Vec<&Value> = events.iter().collect();
    sorted.sort_by_key(|e| s(e, "/lastTimestamp").to_string());
    for e in sorted {
        rows.push(vec![
            s(e, "/lastTimestamp").into(),
            s(e, "/type").into(),
            s(e, "/reason").into(),
            format!("node/{}", s(e, "/involvedObject/name")),
            e.get("count")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .to_string(),
            s(e, "/message").into(),
        ]);
    }
    table(&rows, "")
}
