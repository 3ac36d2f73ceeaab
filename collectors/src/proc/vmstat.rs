//! `<root>/proc/vmstat`: `name value` counters (compaction stalls and failures, ...).
//!
//! Parsed by `procfs-core` ([`procfs_core::VmStat`]), which reads every line as `name <i64>`
//! and refuses the file on any other line. The collectors read event counters, which are
//! never negative; our type keeps the values that are not.

use std::collections::BTreeMap;

use procfs_core::FromRead;

use crate::host::HostPaths;
use crate::ReadError;

/// Parsed `/proc/vmstat`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vmstat {
    pub values: BTreeMap<String, u64>,
}

impl Vmstat {
    pub fn get(&self, key: &str) -> Option<u64> {
        self.values.get(key).copied()
    }
}

/// Why vmstat text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VmstatParseError(String);

/// Parses `/proc/vmstat` text. Every line must be `name <integer>`; an empty file is an
/// error.
pub fn parse(text: &str) -> Result<Vmstat, VmstatParseError> {
    let all = procfs_core::VmStat::from_read(text.as_bytes())
        .map_err(|e| VmstatParseError(super::core_error(&e)))?;
    let values: BTreeMap<String, u64> = all
        .0
        .into_iter()
        .filter_map(|(k, v)| Some((k, u64::try_from(v).ok()?)))
        .collect();
    if values.is_empty() {
        return Err(VmstatParseError("no counters in /proc/vmstat".into()));
    }
    Ok(Vmstat { values })
}

/// Reads `<root>/proc/vmstat`.
pub fn read(host: &HostPaths) -> Result<Vmstat, ReadError> {
    let path = host.proc_file("vmstat");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel 6.18.44 (this VM), an excerpt.
    const REAL_6_18: &str = "\
nr_free_pages 5733425
allocstall_normal 0
compact_stall 0
compact_fail 0
compact_success 0
";

    /// Kernel 3.10 (CentOS 7) names are the same for compaction.
    const OLD_3_10: &str =
        "nr_free_pages 20123\ncompact_stall 1520\ncompact_fail 1377\ncompact_success 143\n";

    #[test]
    fn parses_real_and_old() {
        let v = parse(REAL_6_18).unwrap();
        assert_eq!(v.get("nr_free_pages"), Some(5_733_425));
        assert_eq!(v.get("compact_stall"), Some(0));
        let v = parse(OLD_3_10).unwrap();
        assert_eq!(
            (v.get("compact_stall"), v.get("compact_fail")),
            (Some(1520), Some(1377))
        );
        assert_eq!(v.get("missing"), None);
    }

    #[test]
    fn rejects_empty() {
        assert!(parse("").is_err());
        assert!(parse("garbage").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// `%s %lu` lines as `vmstat_show()` prints them: every counter reads back by name.
        #[test]
        fn parses_what_the_kernel_prints(
            values in proptest::collection::btree_map(crate::testgen::kernel_key(), 0..=i64::MAX as u64, 1..40),
        ) {
            let text: String = values.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            proptest::prop_assert_eq!(parse(&text), Ok(Vmstat { values }));
        }
    }
}
