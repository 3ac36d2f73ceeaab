//! `/proc/uptime`: seconds since boot, the clock the `load` collector measures windows with
//! (it advances with the same kernel that fills `/proc/stat` and `/proc/diskstats`).

use std::path::Path;

use crate::error::{read_to_string, ReadError};

/// Parses `/proc/uptime` (`448.74 688.71`) into the uptime in seconds.
pub fn parse(text: &str) -> Result<f64, String> {
    let v = text
        .split_whitespace()
        .next()
        .ok_or("empty uptime")?
        .parse::<f64>()
        .map_err(|e| format!("uptime: {e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err("uptime out of range".into())
    }
}

pub fn read(path: &Path) -> Result<f64, ReadError> {
    let text = read_to_string(path)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_line() {
        // Linux 6.18.
        assert_eq!(parse("448.74 688.71\n").unwrap(), 448.74);
        assert!(parse("").is_err());
        assert!(parse("inf 1").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
    }
}
