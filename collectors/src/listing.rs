//! A collector's thresholds as a reader sees them: name and value, in the units a person
//! reads (the rule pages, `/rules/<id>`, list the thresholds the agent runs with). Each
//! collector's `Thresholds::listed` gives its own, every field of it (a unit test compares the
//! names with the struct's fields), so a new threshold cannot be left off the pages.

use std::time::Duration;

/// One threshold: its field name (`escalation.load_share` for a nested one) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub name: &'static str,
    pub value: String,
}

/// A collector's thresholds, in field order.
pub type Listed = Vec<Setting>;

/// Builds one [`Setting`].
pub fn setting(name: &'static str, value: impl Into<String>) -> Setting {
    Setting {
        name,
        value: value.into(),
    }
}

/// A plain number without trailing zeros: `4`, `0.5`, `1.25`.
pub fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A percentage: `90 %`.
pub fn percent(v: f64) -> String {
    format!("{} %", num(v))
}

/// A duration in the largest unit that keeps it whole: `500 ms`, `5 s`, `2 min`, `1 h`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms} ms");
    }
    seconds(d.as_secs())
}

/// Seconds in the largest unit that keeps them whole.
pub fn seconds(s: u64) -> String {
    if s != 0 && s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s != 0 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

/// Bytes in binary units: `512 B`, `1.0 GiB`.
pub fn bytes(b: u64) -> String {
    crate::rules::template::human_bytes(b as f64)
}

/// The field names of a struct's `Debug` output (`Name { a: 1, b: Inner { c: 2 } }` gives
/// `a`, `b`, `c`): what the tests compare each `listed()` with.
#[cfg(test)]
pub fn debug_field_names(debug: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    let mut chars = debug.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if c == ':' && chars.peek() == Some(&' ') && !word.is_empty() {
            names.push(std::mem::take(&mut word));
        }
        word.clear();
    }
    names
}

/// Asserts `listed` names every field of `debug` (nested fields as `outer.inner`) and
/// nothing else.
#[cfg(test)]
pub fn assert_lists_every_field(debug: &str, listed: &[Setting]) {
    let fields = debug_field_names(debug);
    for f in &fields {
        assert!(
            listed.iter().any(|s| s.name.split('.').any(|p| p == f)),
            "threshold {f} is not listed: {debug}"
        );
    }
    for s in listed {
        assert!(
            s.name.split('.').all(|p| fields.iter().any(|f| f == p)),
            "listed {} is not a field: {debug}",
            s.name
        );
        assert!(!s.value.is_empty(), "{} has no value", s.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_a_person_reads() {
        assert_eq!(num(4.0), "4");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(0.0), "0");
        assert_eq!(percent(90.0), "90 %");
        assert_eq!(duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(duration(Duration::from_secs(5)), "5 s");
        assert_eq!(duration(Duration::from_secs(120)), "2 min");
        assert_eq!(seconds(3600), "1 h");
        assert_eq!(seconds(0), "0 s");
        assert_eq!(bytes(1 << 30), "1.0 GiB");
    }

    #[test]
    fn debug_names_nested_fields() {
        #[derive(Debug)]
        #[allow(dead_code)] // read through Debug only
        struct Inner {
            c: u32,
        }
        #[derive(Debug)]
        #[allow(dead_code)] // read through Debug only
        struct Outer {
            a: f64,
            b: Inner,
        }
        let d = format!(
            "{:?}",
            Outer {
                a: 1.0,
                b: Inner { c: 2 }
            }
        );
        assert_eq!(debug_field_names(&d), ["a", "b", "c"]);
    }
}
