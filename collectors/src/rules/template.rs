//! Text templates of rule files: literal text with named placeholders, `{name}` or
//! `{name:spec}`, and the formatting of the values that fill them.
//!
//! A spec formats a number: `.N` (N decimals), a unit (`kib`, `mib`, `gib`: divided by 1024,
//! 1024², 1024³; `min`: seconds divided by 60) with optional decimals (`mib.1`; none = 0), or
//! `bytes` (a size in the largest binary unit that keeps it at least 1, one decimal:
//! `1.5 GiB`, `512.0 MiB`, `12 B`). `{{` and `}}` are literal braces.

use std::fmt::Write;

use crate::finding::{Evidence, Lang};

/// One piece of a parsed text template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seg {
    Lit(String),
    Hole { name: String, spec: Spec },
}

/// How a placeholder's value is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Spec {
    pub unit: Unit,
    /// Fixed decimals (`.N`); `None` prints the value as it is.
    pub decimals: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Unit {
    #[default]
    None,
    Kib,
    Mib,
    Gib,
    Min,
    Bytes,
}

impl Spec {
    /// True when the spec formats a number (a string value cannot take it).
    pub fn is_numeric(&self) -> bool {
        self.unit != Unit::None || self.decimals.is_some()
    }
}

/// The most decimals a spec may ask for.
const MAX_DECIMALS: u8 = 6;

/// Whether `s` is a placeholder or condition name: `[a-z][a-z0-9_]*`.
pub(crate) fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

fn parse_spec(s: &str) -> Result<Spec, String> {
    let (unit, decimals) = match s.split_once('.') {
        Some((u, d)) => (u, Some(d)),
        None => (s, None),
    };
    let unit = match unit {
        "" => Unit::None,
        "kib" => Unit::Kib,
        "mib" => Unit::Mib,
        "gib" => Unit::Gib,
        "min" => Unit::Min,
        "bytes" => Unit::Bytes,
        other => {
            return Err(format!(
                "unknown format {other:?} (known: .N, kib, mib, gib, min with optional .N, bytes)"
            ))
        }
    };
    let decimals = match decimals {
        None => None,
        Some(d) => match d.parse::<u8>() {
            Ok(n) if n <= MAX_DECIMALS && unit != Unit::Bytes => Some(n),
            _ => {
                return Err(format!(
                    "bad decimals {d:?} (0 to {MAX_DECIMALS}; `bytes` takes none)"
                ))
            }
        },
    };
    if unit == Unit::None && decimals.is_none() {
        return Err("an empty format: write {name} without `:`".into());
    }
    Ok(Spec { unit, decimals })
}

/// Parses a text template.
pub(crate) fn parse(t: &str) -> Result<Vec<Seg>, String> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        lit.push_str(&rest[..i]);
        let c = rest.as_bytes()[i];
        let after = &rest[i + 1..];
        if after.as_bytes().first() == Some(&c) {
            lit.push(c as char);
            rest = &after[1..];
            continue;
        }
        if c == b'}' {
            return Err(format!(
                "a lone `}}` at byte {i} of {t:?}; write `}}}}` for a literal brace"
            ));
        }
        let Some(end) = after.find('}') else {
            return Err(format!("a `{{` is not closed in {t:?}"));
        };
        let inner = &after[..end];
        let (name, spec) = match inner.split_once(':') {
            Some((n, s)) => (n, parse_spec(s).map_err(|e| format!("{{{inner}}}: {e}"))?),
            None => (inner, Spec::default()),
        };
        if !is_name(name) {
            return Err(format!(
                "{{{inner}}}: a placeholder is {{name}} or {{name:format}} (a-z, 0-9, _); write `{{{{` for a literal brace"
            ));
        }
        if !lit.is_empty() {
            out.push(Seg::Lit(std::mem::take(&mut lit)));
        }
        out.push(Seg::Hole {
            name: name.to_string(),
            spec,
        });
        rest = &after[end + 1..];
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        out.push(Seg::Lit(lit));
    }
    Ok(out)
}

/// The placeholder names of a parsed template, with their specs.
pub(crate) fn holes(segs: &[Seg]) -> impl Iterator<Item = (&str, &Spec)> {
    segs.iter().filter_map(|s| match s {
        Seg::Hole { name, spec } => Some((name.as_str(), spec)),
        Seg::Lit(_) => None,
    })
}

/// A value a placeholder can print.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    One(&'a Evidence),
    Words(&'a [String]),
}

/// Why a value does not print with a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FormatError(pub String);

/// Prints `v` with `spec`. A list of words joins with `, ` in English and `、` in Chinese.
pub(crate) fn format(v: Value<'_>, spec: &Spec, lang: Lang) -> Result<String, FormatError> {
    match v {
        Value::Words(ws) => {
            if spec.is_numeric() {
                return Err(FormatError("a list of words takes no number format".into()));
            }
            Ok(ws.join(match lang {
                Lang::En => ", ",
                Lang::Zh => "、",
            }))
        }
        Value::One(e) => {
            if !spec.is_numeric() {
                return Ok(e.to_string());
            }
            let Some(x) = e.as_f64() else {
                return Err(FormatError(format!("{e:?} is not a number")));
            };
            Ok(number(x, spec))
        }
    }
}

fn number(x: f64, spec: &Spec) -> String {
    let scaled = match spec.unit {
        Unit::None => x,
        Unit::Kib => x / 1024.0,
        Unit::Mib => x / (1024.0 * 1024.0),
        Unit::Gib => x / (1024.0 * 1024.0 * 1024.0),
        Unit::Min => x / 60.0,
        Unit::Bytes => return human_bytes(x),
    };
    let d = usize::from(spec.decimals.unwrap_or(0));
    let mut s = String::new();
    let _ = write!(s, "{scaled:.d$}");
    s
}

/// `1.5 GiB`, `512.0 MiB`, `10.0 KiB`, `12 B`.
pub fn human_bytes(b: f64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(name: &str, unit: Unit, decimals: Option<u8>) -> Seg {
        Seg::Hole {
            name: name.into(),
            spec: Spec { unit, decimals },
        }
    }

    #[test]
    fn parses_placeholders_specs_and_braces() {
        assert_eq!(
            parse("a {x} b {y:.1} {{lit}} {z:mib.2}{w:bytes}").unwrap(),
            vec![
                Seg::Lit("a ".into()),
                hole("x", Unit::None, None),
                Seg::Lit(" b ".into()),
                hole("y", Unit::None, Some(1)),
                Seg::Lit(" {lit} ".into()),
                hole("z", Unit::Mib, Some(2)),
                hole("w", Unit::Bytes, None),
            ]
        );
        assert_eq!(parse("").unwrap(), vec![]);
        for bad in [
            "{X}",
            "{1x}",
            "{x",
            "x}",
            "{x:}",
            "{x:tb}",
            "{x:.9}",
            "{x:bytes.1}",
            "{ x }",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_numbers_units_and_words() {
        let f = |e: Evidence, s: &str| {
            let spec = match parse(&format!("{{v{s}}}")).unwrap().remove(0) {
                Seg::Hole { spec, .. } => spec,
                Seg::Lit(_) => unreachable!(),
            };
            format(Value::One(&e), &spec, Lang::En)
        };
        assert_eq!(f(Evidence::Float(99.0), "").unwrap(), "99");
        assert_eq!(f(Evidence::Float(1.25), ":.1").unwrap(), "1.2");
        assert_eq!(f(Evidence::Int(66445312), ":mib.1").unwrap(), "63.4");
        assert_eq!(f(Evidence::Int(100 << 20), ":mib").unwrap(), "100");
        assert_eq!(f(Evidence::Int(1800), ":min").unwrap(), "30");
        assert_eq!(f(Evidence::Int(3 << 29), ":bytes").unwrap(), "1.5 GiB");
        assert_eq!(f(Evidence::Int(12), ":bytes").unwrap(), "12 B");
        assert!(f(Evidence::Str("x".into()), ":.1").is_err());
        assert_eq!(f(Evidence::Str("x y".into()), "").unwrap(), "x y");
        let w = vec!["runc".to_string(), "dockerd".to_string()];
        let none = Spec::default();
        assert_eq!(
            format(Value::Words(&w), &none, Lang::En).unwrap(),
            "runc, dockerd"
        );
        assert_eq!(
            format(Value::Words(&w), &none, Lang::Zh).unwrap(),
            "runc、dockerd"
        );
    }
}
