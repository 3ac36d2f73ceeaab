//! `<root>/proc/meminfo`: `Key:   value kB` lines.
//!
//! Our own parser: `procfs-core`'s `Meminfo` refuses a text that lacks any of 15 keys the
//! collectors never read (`Buffers`, `Slab`, `VmallocChunk`...), keeps only the keys it has a
//! field for, and panics on a key that ends in a multi-byte character (it cuts the `:` off by
//! byte). Here every `Key: value` line is kept and only `MemTotal` is required (tests
//! `procfs_core_needs_keys_we_do_not_use`, `procfs_core_panics_on_a_non_ascii_key`).

use std::collections::BTreeMap;

use crate::host::HostPaths;
use crate::ReadError;

/// Parsed `/proc/meminfo`: values in bytes for `kB` lines, plain counts otherwise
/// (`HugePages_Total`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meminfo {
    pub values: BTreeMap<String, u64>,
}

impl Meminfo {
    /// A value by its key (`MemTotal`), in bytes for `kB` lines.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.values.get(key).copied()
    }

    pub fn mem_total_bytes(&self) -> Option<u64> {
        self.get("MemTotal")
    }

    pub fn mem_free_bytes(&self) -> Option<u64> {
        self.get("MemFree")
    }

    /// `MemAvailable` (kernel 3.14+); absent on older kernels.
    pub fn mem_available_bytes(&self) -> Option<u64> {
        self.get("MemAvailable")
    }
}

/// Why meminfo text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct MeminfoParseError {
    pub line: usize,
    pub message: String,
}

/// Parses `/proc/meminfo` text. Lines without a number are skipped (future formats); the
/// text must hold `MemTotal`.
pub fn parse(text: &str) -> Result<Meminfo, MeminfoParseError> {
    let mut values = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<u64>) else {
            continue;
        };
        let value = match words.next() {
            Some("kB") => n.checked_mul(1024).ok_or_else(|| MeminfoParseError {
                line: i + 1,
                message: format!("{key} {n} kB overflows"),
            })?,
            _ => n,
        };
        values.insert(key.trim().to_string(), value);
    }
    if !values.contains_key("MemTotal") {
        return Err(MeminfoParseError {
            line: 0,
            message: "no MemTotal line".into(),
        });
    }
    Ok(Meminfo { values })
}

/// Reads `<root>/proc/meminfo`.
pub fn read(host: &HostPaths) -> Result<Meminfo, ReadError> {
    let path = host.proc_file("meminfo");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel 6.18.44 (this VM), first lines plus a hugepage count line.
    const REAL_6_18: &str = "\
MemTotal:       24684084 kB
MemFree:        22933700 kB
MemAvailable:   24068144 kB
Buffers:           16292 kB
Cached:          1228436 kB
SwapCached:            0 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
";

    /// Kernel 3.10 (CentOS 7) has no MemAvailable before 3.14 backports; 2.6.32 shape.
    const OLD_2_6_32: &str = "\
MemTotal:        8061404 kB
MemFree:          123456 kB
Buffers:           10000 kB
Cached:           200000 kB
";

    #[test]
    fn parses_real_6_18() {
        let m = parse(REAL_6_18).unwrap();
        assert_eq!(m.mem_total_bytes(), Some(24_684_084 * 1024));
        assert_eq!(m.mem_available_bytes(), Some(24_068_144 * 1024));
        assert_eq!(m.get("HugePages_Total"), Some(0));
        assert_eq!(m.get("Hugepagesize"), Some(2048 * 1024));
    }

    #[test]
    fn old_kernel_without_mem_available() {
        let m = parse(OLD_2_6_32).unwrap();
        assert_eq!(m.mem_available_bytes(), None);
        assert_eq!(m.mem_free_bytes(), Some(123_456 * 1024));
    }

    #[test]
    fn rejects_text_without_mem_total() {
        assert!(parse("").is_err());
        assert!(parse("MemTotal: x kB").is_err());
        assert!(parse(&format!("MemTotal: {} kB", u64::MAX)).is_err());
    }

    #[test]
    fn procfs_core_needs_keys_we_do_not_use() {
        use procfs_core::FromRead;
        assert!(procfs_core::Meminfo::from_read(REAL_6_18.as_bytes()).is_err());
        assert!(parse(REAL_6_18).is_ok());
    }

    #[test]
    fn procfs_core_panics_on_a_non_ascii_key() {
        let bad = "MemTotal: 1 kB\nMemé 1\n";
        let core = std::panic::catch_unwind(|| {
            use procfs_core::FromRead;
            let _ = procfs_core::Meminfo::from_read(bad.as_bytes());
        });
        assert!(core.is_err(), "procfs-core no longer panics on {bad:?}");
        assert_eq!(parse(bad).unwrap().mem_total_bytes(), Some(1024));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// Lines as `meminfo_proc_show()` prints them (`MemTotal:       %8lu kB`, and the
        /// unitless `HugePages_Total:   %5lu`): every key reads back, kB values in bytes.
        #[test]
        fn parses_what_the_kernel_prints(
            total_kb in 0u64..=u64::MAX >> 10,
            lines in proptest::collection::btree_map(
                "[A-Z][A-Za-z]{1,12}(_[A-Z][a-z]{1,5}|\\((anon|file)\\))?",
                (0u64..=u64::MAX >> 10, proptest::bool::ANY),
                0..30,
            ),
        ) {
            let mut text = format!("{:<15} {total_kb:>8} kB\n", "MemTotal:");
            let mut want = BTreeMap::from([("MemTotal".to_string(), total_kb * 1024)]);
            for (key, (v, kb)) in lines.iter().filter(|(k, _)| *k != "MemTotal") {
                let head = format!("{key}:");
                if *kb {
                    text += &format!("{head:<15} {v:>8} kB\n");
                    want.insert(key.clone(), v * 1024);
                } else {
                    text += &format!("{head:<15} {v:>5}\n");
                    want.insert(key.clone(), *v);
                }
            }
            proptest::prop_assert_eq!(parse(&text), Ok(Meminfo { values: want }));
        }
    }
}
