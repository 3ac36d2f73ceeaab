//! `/sys/devices/system/cpu/online`: the online CPUs as a list of ranges (`0-3,8-11`).

use std::path::Path;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

/// Host path of the file, relative to `/sys`.
pub const SYS_PATH: &str = "devices/system/cpu/online";

/// The largest CPU number accepted (Linux's NR_CPUS maximum is 8192).
const MAX_CPU: u32 = 8192;

/// Parses a CPU list into the sorted, de-duplicated CPU numbers.
pub fn parse(text: &str) -> Result<Vec<u32>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty CPU list".into());
    }
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a.trim().parse().map_err(|e| format!("{part:?}: {e}"))?;
        let b: u32 = b.trim().parse().map_err(|e| format!("{part:?}: {e}"))?;
        if a > b || b > MAX_CPU {
            return Err(format!("bad range {part:?}"));
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

pub fn read_path(path: &Path) -> Result<Vec<u32>, ReadError> {
    let text = hostfs::read_text(path, cap::CPU_LIST)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

/// Reads `<root>/sys/devices/system/cpu/online`.
pub fn read(host: &HostPaths) -> Result<Vec<u32>, ReadError> {
    read_path(&host.sys_file(SYS_PATH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        // Linux 6.18, 2 vCPUs.
        assert_eq!(parse("0-1\n").unwrap(), vec![0, 1]);
        assert_eq!(parse("0\n").unwrap(), vec![0]);
        // A 24-CPU node like the handbook's, with CPUs 8-11 taken offline.
        assert_eq!(parse("0-7,12-23\n").unwrap().len(), 20);
        assert_eq!(parse("0-3,8-11").unwrap(), vec![0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!(parse("2,0-1").unwrap(), vec![0, 1, 2]);
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in ["", "\n", "a", "3-1", "0-", "-1", "0,,1", "0-99999999"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_ranges(s in "[0-9,\\-]{0,30}") {
            if let Ok(v) = parse(&s) { proptest::prop_assert!(v.len() <= 8193); }
        }
        /// Lists as `%*pbl` prints a CPU mask (`0-3,5,7-9`): the CPUs read back, in order.
        #[test]
        fn parses_what_the_kernel_prints(cpus in proptest::collection::btree_set(0u32..=MAX_CPU, 1..64)) {
            let cpus: Vec<u32> = cpus.into_iter().collect();
            let mut ranges: Vec<(u32, u32)> = Vec::new();
            for &c in &cpus {
                match ranges.last_mut() {
                    Some((_, end)) if *end + 1 == c => *end = c,
                    _ => ranges.push((c, c)),
                }
            }
            let text: Vec<String> = ranges
                .iter()
                .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
                .collect();
            proptest::prop_assert_eq!(parse(&format!("{}\n", text.join(","))), Ok(cpus));
        }
    }
}
