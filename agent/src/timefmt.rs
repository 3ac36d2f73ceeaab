//! Time and duration text shared by the CLI, the scheduler and the renderers: RFC 3339
//! timestamps and the `15s` / `250ms` / `1h30m` durations of flags and status messages.

use std::time::Duration;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// RFC 3339 in UTC, seconds precision.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t
        .to_offset(time::UtcOffset::UTC)
        .replace_nanosecond(0)
        .unwrap_or(t);
    t.format(&Rfc3339).unwrap_or_default()
}

/// `2s`, `1.5s`, `250ms`, `2m`, `1h30m`.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        // Sub-millisecond budgets (`--collector-timeout 500us`) must not read as "0ms".
        let us = d.as_micros();
        return if us == 0 {
            format!("{}ns", d.as_nanos())
        } else {
            format!("{us}us")
        };
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    if !ms.is_multiple_of(1000) && secs < 60 {
        return format!("{:.1}s", d.as_secs_f64());
    }
    if secs < 60 {
        return format!("{secs}s");
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Parses `250ms`, `2s`, `1.5s`, `2m`, `1h`, `1h30m` or a plain number of seconds; `us`
/// (`µs`) and `ns` are accepted as in Go's `time.ParseDuration`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(n) = s.parse::<f64>() {
        return secs(n, s);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{s:?}: missing unit (use ms, s, m or h)"))?;
        if num_end == 0 {
            return Err(format!("{s:?}: expected a number, e.g. 15s, 500ms, 2m"));
        }
        let n: f64 = rest[..num_end]
            .parse()
            .map_err(|_| format!("{s:?}: bad number"))?;
        let after = &rest[num_end..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let mult = match &after[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("{s:?}: unknown unit {u:?} (use ms, s, m or h)")),
        };
        total += n * mult;
        rest = &after[unit_end..];
    }
    secs(total, s)
}

fn secs(n: f64, s: &str) -> Result<Duration, String> {
    if !n.is_finite() || !(0.0..=365.0 * 86400.0).contains(&n) {
        return Err(format!("{s:?}: out of range"));
    }
    let d = Duration::from_secs_f64(n);
    if d.is_zero() {
        return Err(format!("{s:?}: must be greater than zero"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1ns"), Ok(Duration::from_nanos(1)));
        assert_eq!(fmt_duration(Duration::from_nanos(1)), "1ns");
        assert_eq!(fmt_duration(Duration::from_micros(250)), "250us");
        for bad in ["", "0s", "-1s", "abc", "5x", "s", "1e400"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(fmt_duration(Duration::from_secs(2)), "2s");
        assert_eq!(fmt_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_secs(3720)), "1h2m");
    }

    proptest::proptest! {
        #[test]
        fn parse_duration_never_panics(s in "\\PC{0,12}") {
            let _ = parse_duration(&s);
        }
        /// What `fmt_duration` writes parses back to the duration written, for durations it
        /// writes exactly (whole ns, us and ms below their next unit, whole seconds up to a
        /// year), and Go-style `1h30m5s` built from its parts parses to their sum.
        #[test]
        fn parses_what_it_formats(
            nanos in 1u64..1000, micros in 1u64..1000, millis in 1u64..1000,
            secs in 1u64..=365 * 86_400, (h, m, s) in (0u64..24, 0u64..60, 1u64..60),
        ) {
            for d in [
                Duration::from_nanos(nanos),
                Duration::from_micros(micros),
                Duration::from_millis(millis),
                Duration::from_secs(secs),
            ] {
                proptest::prop_assert_eq!(parse_duration(&fmt_duration(d)), Ok(d), "{}", fmt_duration(d));
            }
            proptest::prop_assert_eq!(parse_duration(&format!("{h}h{m}m{s}s")), Ok(Duration::from_secs(h * 3600 + m * 60 + s)));
        }
    }

    #[test]
    fn rfc3339_is_utc_to_the_second() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_800_000_000_987_654_321)
            .unwrap()
            .to_offset(time::UtcOffset::from_hms(8, 0, 0).unwrap());
        assert_eq!(rfc3339(t), "2027-01-15T08:00:00Z");
    }
}
