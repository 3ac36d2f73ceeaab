//! Go's duration strings (`time.ParseDuration`: `30s`, `1m0s`, `1h30m`, `500ms`, `0`), as the
//! kubelet's and kube-proxy's configurations and node-problem-detector's configs write them.

use std::time::Duration;

/// The duration `s` spells, `None` when it is not one (or is 31 years or more).
pub fn parse(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|n| *n > 0)?;
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_spellings() {
        assert_eq!(parse("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(parse("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        for bad in ["", "m", "5", "5 minutes", "-5s", "10d", "99999999999h"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
