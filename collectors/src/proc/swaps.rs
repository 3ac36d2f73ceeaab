//! `/proc/swaps`: the swap areas in use (`swapon --show` reads the same file).
//!
//! Our own parser: `procfs-core` has no model of this file.

use crate::error::ReadError;
use crate::host::HostPaths;

/// Longest swap-area name kept (the kernel prints the path with spaces escaped as `\040`).
const MAX_NAME_BYTES: usize = 256;

/// One swap area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapArea {
    /// Its path (`/swapfile`, `/dev/zram0`), cut to 256 bytes.
    pub name: String,
    /// `partition` or `file`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
}

/// Parses the text of `/proc/swaps`: a header line, then `name type size used priority`
/// (sizes in KiB). Lines that do not read as an area are skipped.
pub fn parse(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip_while(|l| l.starts_with("Filename"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [name, kind, size, used, ..] = w.as_slice() else {
                return None;
            };
            Some(SwapArea {
                name: crate::bounded::prefix_owned(name, MAX_NAME_BYTES),
                kind: crate::bounded::prefix_owned(kind, 32),
                size_bytes: size.parse::<u64>().ok()?.saturating_mul(1024),
                used_bytes: used.parse::<u64>().ok()?.saturating_mul(1024),
            })
        })
        .collect()
}

/// Reads `<root>/proc/swaps`; an empty list when the file does not exist (no swap support).
pub fn read(host: &HostPaths) -> Result<Vec<SwapArea>, ReadError> {
    let path = host.proc_file("swaps");
    Ok(
        crate::hostfs::read_text_optional(&path, crate::hostfs::cap::COUNTERS)?
            .map(|t| parse(&t))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_areas_and_the_empty_file() {
        // Linux 6.18 with no swap (this VM): the header alone.
        assert_eq!(
            parse("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"),
            vec![]
        );
        // Linux 6.1 (Debian 12) with a swap file and zram.
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile                               file\t\t2097148\t\t524288\t\t-2\n/dev/zram0                              partition\t4194300\t\t0\t\t100\n";
        let a = parse(t);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].name, "/swapfile");
        assert_eq!(a[0].kind, "file");
        assert_eq!(a[0].size_bytes, 2097148 * 1024);
        assert_eq!(a[0].used_bytes, 524288 * 1024);
        assert_eq!(a[1].kind, "partition");
        assert_eq!(parse("garbage\n/x file y 0 -2\n"), vec![]);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// `swap_show()`'s table: the tab-separated header, then the path padded to 40
        /// columns, type, size and used in KiB (an extra tab under 10 000 000), priority.
        #[test]
        fn parses_what_the_kernel_prints(
            areas in proptest::collection::vec(
                (
                    "/dev/(zram|sd[a-z]|dm-)[0-9]{1,2}|/[a-z0-9_.]{1,12}(/[a-z0-9_.-]{1,12}){0,3}",
                    proptest::bool::ANY,
                    0u64..=u64::MAX >> 10, 0u64..=u64::MAX >> 10, proptest::num::i16::ANY,
                ),
                0..5,
            ),
        ) {
            let mut text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n".to_string();
            let mut want = Vec::new();
            for (name, partition, size, used, prio) in areas {
                let kind = if partition { "partition" } else { "file" };
                let tab = |n: u64| if n < 10_000_000 { "\t" } else { "" };
                text += &format!(
                    "{name}{:pad$}{kind}\t{size}\t{}{used}\t{}{prio}\n",
                    " ", tab(size), tab(used), pad = 40usize.saturating_sub(name.len()).max(1),
                );
                want.push(SwapArea { name, kind: kind.to_string(), size_bytes: size * 1024, used_bytes: used * 1024 });
            }
            proptest::prop_assert_eq!(parse(&text), want);
        }
    }
}
