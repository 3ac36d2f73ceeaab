//! Evidence as a person reads it on the page and in the table: keys in words, sizes in
//! binary units, durations and ages in seconds, minutes, hours or days. `/findings` keeps the
//! raw names and figures (their units are in the names: docs/findings.md); this is only how
//! the human outputs print them. The unit comes from the evidence name's suffix.

use collectors::finding::Evidence;
use collectors::Lang;

/// How a value is printed, from its name's suffix (the longest that matches).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    BytesPerSecond,
    Bytes,
    Ago,
    Seconds,
    Minutes,
    Millis,
    Percent,
    PerSecond,
    Plain,
}

/// Suffix, unit: the first that matches wins, so longer suffixes come first.
const SUFFIXES: &[(&str, Unit)] = &[
    ("_bytes_per_second", Unit::BytesPerSecond),
    ("_seconds_ago", Unit::Ago),
    ("_per_second", Unit::PerSecond),
    ("_percent_now", Unit::Percent),
    ("_bytes", Unit::Bytes),
    ("_seconds", Unit::Seconds),
    ("_minutes", Unit::Minutes),
    ("_percent", Unit::Percent),
    ("_ms", Unit::Millis),
];

fn split(key: &str) -> (&str, Unit) {
    for (suffix, unit) in SUFFIXES {
        if let Some(stem) = key.strip_suffix(suffix).filter(|s| !s.is_empty()) {
            return (stem, *unit);
        }
    }
    (key, Unit::Plain)
}

/// The evidence name in words: its unit suffix left to the value, underscores as spaces
/// (`mem_total_bytes` → "mem total", `last_table_full_seconds_ago` → "last table full").
pub fn key(k: &str) -> String {
    let (stem, _) = split(k);
    let mut w = stem.replace('_', " ");
    // `mem_available_percent_now`: "mem available now" (the `_now` stays in words).
    if k.ends_with("_percent_now") {
        w.push_str(" now");
    }
    w
}

/// The value with its unit, in the language's words for ages.
pub fn value(k: &str, v: &Evidence, lang: Lang) -> String {
    let (_, unit) = split(k);
    let Some(n) = number(v) else {
        return v.to_string();
    };
    match unit {
        Unit::BytesPerSecond => format!("{}/s", bytes(n)),
        Unit::Bytes => bytes(n),
        Unit::Ago => match lang {
            Lang::En => format!("{} ago", duration(n, lang)),
            Lang::Zh => format!("{}前", duration(n, lang)),
        },
        Unit::Seconds => duration(n, lang),
        Unit::Minutes => duration(n * 60.0, lang),
        Unit::Millis => format!("{} ms", figure(n)),
        Unit::Percent => format!("{} %", figure(n)),
        Unit::PerSecond => format!("{}/s", figure(n)),
        Unit::Plain => v.to_string(),
    }
}

fn number(v: &Evidence) -> Option<f64> {
    match v {
        Evidence::Int(i) => Some(*i as f64),
        Evidence::Float(f) if f.is_finite() => Some(*f),
        _ => None,
    }
}

/// A figure with at most two decimals, trailing zeros dropped (`97.5`, `3`, `0.01`).
pub fn figure(n: f64) -> String {
    let s = format!("{n:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A size in the largest binary unit that keeps it at least 1 (`16.0 GiB`, `512 B`).
pub fn bytes(n: f64) -> String {
    if n < 0.0 {
        return format!("-{}", bytes(-n));
    }
    collectors::rules::template::human_bytes(n.round())
}

/// A duration in the largest unit that keeps it at least 1, a second unit where it says
/// more (`45 s`, `2.5 s`, `7 min`, `2 h 5 min`, `3 d 4 h`; `7 分钟` in Chinese).
pub fn duration(secs: f64, lang: Lang) -> String {
    if secs < 0.0 {
        return format!("-{}", duration(-secs, lang));
    }
    let [us, um, uh, ud] = match lang {
        Lang::En => ["s", "min", "h", "d"],
        Lang::Zh => ["秒", "分钟", "小时", "天"],
    };
    if secs < 10.0 && secs.fract() != 0.0 {
        return format!("{} {us}", figure(secs));
    }
    let s = secs.round() as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec} {us}"),
        (0, 0, m) if m < 10 && sec != 0 => format!("{m} {um} {sec} {us}"),
        (0, 0, m) => format!("{m} {um}"),
        (0, h, 0) => format!("{h} {uh}"),
        (0, h, m) => format!("{h} {uh} {m} {um}"),
        (d, 0, _) => format!("{d} {ud}"),
        (d, h, _) => format!("{d} {ud} {h} {uh}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(k: &str, e: impl Into<Evidence>) -> String {
        value(k, &e.into(), Lang::En)
    }

    #[test]
    fn keys_read_as_words_with_the_unit_left_to_the_value() {
        assert_eq!(key("mem_total_bytes"), "mem total");
        assert_eq!(key("last_table_full_seconds_ago"), "last table full");
        assert_eq!(key("used_percent"), "used");
        assert_eq!(key("mem_available_percent_now"), "mem available now");
        assert_eq!(key("write_bytes_per_second"), "write");
        assert_eq!(key("drop_per_second"), "drop");
        assert_eq!(key("await_ms"), "await");
        assert_eq!(key("holder_pod_name"), "holder pod name");
        assert_eq!(key("load1"), "load1");
    }

    #[test]
    fn values_in_human_units() {
        assert_eq!(v("mem_total_bytes", 17_179_869_184_i64), "16.0 GiB");
        assert_eq!(v("last_table_full_seconds_ago", 400_i64), "6 min 40 s ago");
        assert_eq!(v("last_failure_seconds_ago", 3600_i64), "1 h ago");
        assert_eq!(v("lookback_seconds", 90_000_i64), "1 d 1 h");
        assert_eq!(v("hold_seconds", 2.5), "2.5 s");
        assert_eq!(v("window_minutes", 10_i64), "10 min");
        assert_eq!(v("used_percent", 97.5), "97.5 %");
        assert_eq!(v("await_ms", 12.345), "12.35 ms");
        assert_eq!(v("write_bytes_per_second", 4_194_304.0), "4.0 MiB/s");
        assert_eq!(v("drop_per_second", 3.0), "3/s");
        assert_eq!(v("kernel_release", "6.18.0"), "6.18.0");
        assert_eq!(v("path_bytes", "not a number"), "not a number");
        assert_eq!(v("size_bytes", 512_i64), "512 B");
        assert_eq!(
            value("last_seen_seconds_ago", &Evidence::Int(420), Lang::Zh),
            "7 分钟前"
        );
    }
}
