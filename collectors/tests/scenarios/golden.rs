//! Golden files of what the scenario tests' collections told operators: every finding fully
//! rendered (id, severity, subject, title, summary and steps in English and Chinese,
//! evidence, commands, handbook source, see-also keys) and the collection's status kind, one JSON
//! file per collection under `collectors/tests/golden/<module>/<test>.<n>.json` (`n` counts
//! the collections a test makes, from 0).
//!
//! A test that collects through [`crate::support::collect`] compares each collection with its
//! file and fails with a line diff when they differ; `UPDATE_GOLDEN=1 cargo test -p collectors
//! --test scenarios` (re)writes them instead (and first removes the test's old files). The
//! files are the record of the advice operators received: a change to them is a change to what
//! node-doctor says, reviewed as such.
//!
//! What makes one run differ from the next is normalised away, and only that:
//! - the fake host root, a temp dir (`/tmp/.tmpAbC123`), reads `<root>`;
//! - evidence figures that depend on timing or on the machine ([`VOLATILE_FLOATS`],
//!   [`VOLATILE_VALUES`]) read `<volatile>`; in the finding's text (and commands) a volatile
//!   string or integer reads `<name>`, and a decimal number that prints a volatile figure
//!   reads `#.#` (other numbers stay exact);
//! - numbers a test names with a mask (`support::collect_masked`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use collectors::{Collection, Evidence};
use serde_json::{json, Map, Value};

/// Evidence figures that depend on how fast the test ran, found by recording the suite three
/// times and comparing: rates and intervals over the wall-clock time between two samples
/// (conntrack, kernel listen drops, memory compaction) and the xtables-lock hold and queue
/// times the iptables sampler thread measured.
const VOLATILE_FLOATS: &[&str] = &[
    "clash_resolve_per_second",
    "compaction_interval_seconds",
    "drop_per_second",
    "dropped_per_second",
    "early_drop_per_second",
    "hold_seconds",
    "insert_failed_per_second",
    "interval_seconds",
    "invalid_per_second",
    "kube_proxy_cpu_percent",
    "lost_races_per_second",
    "longest_hold_seconds",
    "queued_seconds",
    "search_restart_per_second",
];

/// Evidence strings and integers that differ between runs or machines: the pid the iptables
/// sampler last saw holding the lock, how many consecutive samples its thread saw a waiter,
/// timestamps the iptables tests write relative to now, the age of a staged crash record (its
/// file's mtime: when the test ran), and the inode numbers (and
/// `/proc/locks` ids, `<dev>:<inode>`) of the fake hosts' lock files.
const VOLATILE_VALUES: &[&str] = &[
    "crash_age_seconds",
    "holder_pid",
    "host_lock_inode",
    "last_seen",
    "lock_proc_locks_id",
    "pod_lock_inode",
    "waiter_streak_samples",
];

fn is_volatile(key: &str) -> bool {
    VOLATILE_FLOATS.contains(&key) || VOLATILE_VALUES.contains(&key)
}

/// Collections made so far per test (thread name), across threads a test spawns.
static COUNTS: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Checks (or, with `UPDATE_GOLDEN=1`, writes) the golden file of the calling test's next
/// collection. `masks` name parts of the text that vary from run to run although no evidence
/// holds them: literal text with `#` where a number stands (`"# consecutive samples"`), or
/// literal text without `#`, replaced whole.
pub fn check(collection: &Collection, masks: &[&str]) {
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(str::to_string)
        .unwrap_or_else(|| {
            panic!(
                "support::collect keys golden files by the test's thread name; name threads a \
                 test spawns after the test (thread::Builder::name)"
            )
        });
    let (module, name) = test
        .split_once("::")
        .unwrap_or_else(|| panic!("test name {test:?} has no module"));
    let n = {
        let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
        let c = counts
            .get_or_insert_with(HashMap::new)
            .entry(test.clone())
            .or_insert(0);
        *c += 1;
        *c - 1
    };
    let dir = golden_dir().join(module);
    let path = dir.join(format!("{}.{n}.json", name.replace("::", "__")));
    let actual = format!(
        "{}\n",
        serde_json::to_string_pretty(&render(collection, masks)).expect("golden JSON")
    );
    if updating() {
        std::fs::create_dir_all(&dir).expect("create golden dir");
        if n == 0 {
            remove_stale(&dir, name);
        }
        std::fs::write(&path, &actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `UPDATE_GOLDEN=1 cargo test -p collectors --test scenarios` to record it",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "collection {n} of {test} differs from {} (- golden, + now); if the change is meant, \
             re-record with UPDATE_GOLDEN=1 and review the diff:\n{}",
            path.display(),
            diff(&expected, &actual)
        );
    }
}

/// Removes the golden files of test `name` (all its collections) before they are re-recorded.
fn remove_stale(dir: &Path, name: &str) {
    let prefix = format!("{}.", name.replace("::", "__"));
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let file = e.file_name();
        let file = file.to_string_lossy();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let is_ours = rest
            .strip_suffix(".json")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if is_ours {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The collection as the golden file holds it.
fn render(c: &Collection, masks: &[&str]) -> Value {
    let findings: Vec<Value> = c
        .findings
        .iter()
        .map(|f| {
            let floats: Vec<f64> = f
                .evidence
                .iter()
                .filter(|(k, _)| VOLATILE_FLOATS.contains(&k.as_str()))
                .filter_map(|(_, v)| v.as_f64())
                .collect();
            // Short values ("0") would replace unrelated text.
            let values: Vec<(&str, String)> = f
                .evidence
                .iter()
                .filter(|(k, _)| VOLATILE_VALUES.contains(&k.as_str()))
                .map(|(k, v)| (k.as_str(), v.to_string()))
                .filter(|(_, v)| v.len() >= 3)
                .collect();
            let text = |s: &str| {
                let mut s = replace_temp_roots(s);
                for (k, v) in &values {
                    s = replace_whole(&s, v, &format!("<{k}>"));
                }
                s = mask_decimals_near(&s, &floats);
                for m in masks {
                    s = mask_numbers_in(&s, m);
                }
                Value::String(s)
            };
            let both = |t: &collectors::Text| json!({ "en": text(&t.en), "zh": text(&t.zh) });
            let evidence: Map<String, Value> = f
                .evidence
                .iter()
                .map(|(k, v)| {
                    let v = if is_volatile(k) {
                        Value::String("<volatile>".into())
                    } else {
                        match v {
                            Evidence::Int(i) => json!(i),
                            Evidence::Float(x) => json!(x),
                            Evidence::Str(s) => text(s),
                        }
                    };
                    (k.clone(), v)
                })
                .collect();
            json!({
                "id": f.id,
                "collector": f.collector,
                "severity": f.severity.as_str(),
                "subject": text(&f.subject),
                "title": both(&f.title),
                "summary": both(&f.summary),
                "steps": f.remediation.steps.iter().map(both).collect::<Vec<_>>(),
                "commands": f.remediation.commands.iter().map(|s| text(s)).collect::<Vec<_>>(),
                "evidence": evidence,
                "source": f.remediation.source.as_ref().map(|s| match s.url {
                    Some(url) => json!({ "doc": s.doc, "section": s.section, "url": url }),
                    None => json!({ "doc": s.doc, "section": s.section }),
                }),
                "see_also": f.see_also,
            })
        })
        .collect();
    // The status's kind only: its message quotes parser and reader errors, which are not
    // what this record is about.
    json!({ "status": c.status.as_str(), "findings": findings })
}

/// `s` with each occurrence of `value` that does not continue a word or number on either
/// side replaced by `with`: a pid that happens to be the tail of a lock's inode number
/// (`fe:00:98817`) leaves the inode whole for its own mask.
fn replace_whole(s: &str, value: &str, with: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (at, _) in s.match_indices(value) {
        if at < copied {
            continue;
        }
        let end = at + value.len();
        if word(s[..at].chars().next_back()) || word(s[end..].chars().next()) {
            continue;
        }
        out.push_str(&s[copied..at]);
        out.push_str(with);
        copied = end;
    }
    out.push_str(&s[copied..]);
    out
}

/// The numbers of `s` as (start, end, value, decimals): runs of digits with an optional
/// fraction that do not continue a word (`x86` holds none).
fn numbers(s: &str) -> Vec<(usize, usize, f64, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let mut decimals = 0;
        if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
            let mut k = j + 1;
            while k < b.len() && b[k].is_ascii_digit() {
                k += 1;
            }
            decimals = k - j - 1;
            j = k;
        }
        if let Ok(v) = s[i..j].parse::<f64>() {
            out.push((i, j, v, decimals));
        }
        i = j;
    }
    out
}

/// Decimal numbers of `s` that print one of `values` (to their own precision, allowing for
/// evidence being rounded to 3 decimals) become `#.#`. Integers stay.
fn mask_decimals_near(s: &str, values: &[f64]) -> String {
    if values.is_empty() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (start, end, t, decimals) in numbers(s) {
        if decimals == 0 {
            continue;
        }
        let tolerance = 0.5 * 10f64.powi(-(decimals as i32)) + 0.0005 + 1e-9;
        if values.iter().any(|v| (t - v).abs() <= tolerance) {
            out.push_str(&s[copied..start]);
            out.push_str("#.#");
            copied = end;
        }
    }
    out.push_str(&s[copied..]);
    out
}

/// `mask` is literal text with one `#` where a number stands; that number becomes `#`
/// wherever the text occurs in `s`. A mask without `#` is replaced whole by `<masked>`.
fn mask_numbers_in(s: &str, mask: &str) -> String {
    let Some((before, after)) = mask.split_once('#') else {
        return s.replace(mask, "<masked>");
    };
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (start, end, _, _) in numbers(s) {
        if s[..start].ends_with(before) && s[end..].starts_with(after) {
            out.push_str(&s[copied..start]);
            out.push('#');
            copied = end;
        }
    }
    out.push_str(&s[copied..]);
    out
}

/// `<temp_dir>/.tmpXXXXXX` (tempfile's names: `.tmp` and six alphanumerics) -> `<root>`.
fn replace_temp_roots(s: &str) -> String {
    let tmp = std::env::temp_dir();
    let prefix = format!("{}/.tmp", tmp.display().to_string().trim_end_matches('/'));
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(&prefix) {
        let after = &rest[at + prefix.len()..];
        let suffix = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        out.push_str(&rest[..at]);
        if suffix == 6 {
            out.push_str("<root>");
        } else {
            out.push_str(&prefix);
            out.push_str(&after[..suffix]);
        }
        rest = &after[suffix..];
    }
    out.push_str(rest);
    out
}

/// A line diff (longest common subsequence) with a few lines of context around each change.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // (tag, line): ' ' same, '-' only in the golden file, '+' only now.
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(ops.len());
        ops[lo..hi].iter().any(|(t, _)| *t != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (tag, line)) in ops.iter().enumerate() {
        if *tag == ' ' && !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push_str("   …\n");
            skipped = false;
        }
        out.push_str(&format!("{tag}  {line}\n"));
    }
    out
}

#[test]
fn golden_normalisation_and_diff() {
    let tmp = std::env::temp_dir();
    let tmp = tmp.display().to_string();
    let tmp = tmp.trim_end_matches('/');
    let root = format!("{tmp}/.tmpAb3xZ9");
    assert_eq!(
        replace_temp_roots(&format!("du -sh {root}/var/lib '{root}/a b' {root}:")),
        "du -sh <root>/var/lib '<root>/a b' <root>:"
    );
    // Not a tempfile name (six alphanumerics): left alone.
    for other in [".tmpAb/x", ".tmpAb3xZ9x"] {
        let other = format!("{tmp}/{other}");
        assert_eq!(replace_temp_roots(&other), other);
    }
    assert_eq!(
        mask_decimals_near(
            "rose by 37 (648.57/s) in 0.1 s, 100.0% used, v6.18",
            &[648.571, 0.057]
        ),
        "rose by 37 (#.#/s) in #.# s, 100.0% used, v6.18"
    );
    assert_eq!(
        mask_numbers_in(
            "for 0.5 s (12 consecutive samples, threshold 2)",
            "# consecutive samples"
        ),
        "for 0.5 s (# consecutive samples, threshold 2)"
    );
    assert_eq!(
        mask_numbers_in("grep ' fe:00:1234 ' /proc/locks", "fe:00:1234"),
        "grep ' <masked> ' /proc/locks"
    );
    // A pid that is the inode's tail is not replaced inside it; standing alone it is.
    assert_eq!(
        replace_whole(
            "pid 8817 holds it: grep ' fe:00:98817 ' /proc/locks; kill 8817",
            "8817",
            "<holder_pid>"
        ),
        "pid <holder_pid> holds it: grep ' fe:00:98817 ' /proc/locks; kill <holder_pid>"
    );
    assert_eq!(
        replace_whole("fe:00:98817", "fe:00:98817", "<host_lock_inode>"),
        "<host_lock_inode>"
    );
    assert!(is_volatile("insert_failed_per_second") && !is_volatile("insert_failed_total"));
    let d = diff("a\nb\nc\n", "a\nB\nc\n");
    assert!(d.contains("-  b\n") && d.contains("+  B\n"), "{d}");
}
