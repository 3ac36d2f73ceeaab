//! The kernel-log seam of the conntrack collector: which kernel messages say that a
//! conntrack table was full, and whose table it was.
//!
//! When a table is full and no entry can be evicted (`early_drop`), the kernel drops the
//! packet that needed a new entry and logs it, rate limited (`net_ratelimit: N callbacks
//! suppressed`). The wording by kernel (fixtures in `tests/fixtures/conntrack/kmsg/`, one per
//! wording):
//!
//! | kernel | message |
//! |---|---|
//! | 2.6.18 (`ip_conntrack` module) | `ip_conntrack: table full, dropping packet.` |
//! | 2.6.32 | `nf_conntrack: table full, dropping packet.` |
//! | 3.10 | `nf_conntrack: table full, dropping packet` |
//! | 4.x to 6.16 (`pr_fmt` adds the module name again) | `nf_conntrack: nf_conntrack: table full, dropping packet` |
//! | 6.17 and later, the initial network namespace | `nf_conntrack: nf_conntrack: table full, dropping packet` |
//! | 6.17 and later, any other namespace | `nf_conntrack: nf_conntrack: table full in netns 4026532177, dropping packet` |
//!
//! The last form names the namespace by its inode number (the `4026532177` of
//! `readlink /proc/<pid>/ns/net` = `net:[4026532177]`, read by `proc::ns`), so a message can be attributed to
//! the table the collector reads or to another namespace's. `nf_conntrack: expectation table
//! full` is a different table (helpers' expectations) and is not matched.
//!
//! Reading the kernel log is the shared reader's job (`kmsg/`); this module only
//! classifies message strings, so it is tested on plain strings.

use crate::needle::Needle;

/// Which table a "table full" message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// The message names no namespace: before 6.17, any namespace's table; from 6.17 on,
    /// the initial network namespace's.
    Unnamed,
    /// `table full in netns <inode>`: the namespace with this inode number (6.17+).
    Netns(u64),
}

/// Classifies one kernel message: `Some(table)` when it is a conntrack "table full,
/// dropping packet" message of any kernel's wording.
pub fn table_full(message: &str) -> Option<Table> {
    // The module prefix (`nf_conntrack: `, doubled on 4.x+, or `ip_conntrack: `) and then
    // the text; anything before the prefix (a dmesg timestamp, a record header) is ignored.
    static MODULE: Needle = Needle::new("conntrack: ");
    static FULL: Needle = Needle::new("table full");
    // The rarer word first: most records hold neither.
    if !FULL.is_in(message) {
        return None;
    }
    let at = MODULE.find(message)?;
    let rest = &message[at..];
    let full = FULL.find(rest)?;
    let before = &rest[..full];
    // `nf_conntrack: expectation table full`: another table.
    if before.trim_end().ends_with("expectation") {
        return None;
    }
    let after = &rest[full + "table full".len()..];
    if after.starts_with(", dropping packet") {
        return Some(Table::Unnamed);
    }
    let digits = after.strip_prefix(" in netns ")?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 || !digits[end..].starts_with(", dropping packet") {
        return None;
    }
    digits[..end].parse().ok().map(Table::Netns)
}

/// True when one kernel message is a conntrack "table full" message (any wording, any
/// namespace).
pub fn is_table_full(message: &str) -> bool {
    table_full(message).is_some()
}

/// Counts conntrack "table full" messages (every wording, each message once).
pub fn count_table_full<I, S>(messages: I) -> u64
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    messages
        .into_iter()
        .filter(|m| is_table_full(m.as_ref()))
        .count() as u64
}

/// Whether the kernel names the initial namespace's table in its messages: from 6.17 on it
/// writes `in netns N` for every other namespace, so an unnamed message is the initial
/// namespace's. `None` when the release cannot be read.
pub fn names_other_namespaces(kernel_release: &str) -> Option<bool> {
    let mut parts = kernel_release.trim().split(['.', '-', '+']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some((major, minor) >= (6, 17))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_wording_and_nothing_else() {
        let cases: &[(&str, Option<Table>)] = &[
            // 2.6.18, the old module name.
            ("ip_conntrack: table full, dropping packet.", Some(Table::Unnamed)),
            // 2.6.32 (printk with a full stop).
            ("nf_conntrack: table full, dropping packet.", Some(Table::Unnamed)),
            // 3.10.
            ("nf_conntrack: table full, dropping packet", Some(Table::Unnamed)),
            // 4.x to 6.16, and the initial namespace on 6.17+.
            (
                "nf_conntrack: nf_conntrack: table full, dropping packet",
                Some(Table::Unnamed),
            ),
            // 6.17+, another namespace: the record this machine's 6.18 kernel wrote.
            (
                "nf_conntrack: nf_conntrack: table full in netns 4026532177, dropping packet",
                Some(Table::Netns(4026532177)),
            ),
            // A /dev/kmsg record and a dmesg line, as other readers may hand them over.
            (
                "4,7296,9255837675,-;nf_conntrack: nf_conntrack: table full in netns 4026532177, dropping packet",
                Some(Table::Netns(4026532177)),
            ),
            (
                "[ 9123.456789] nf_conntrack: nf_conntrack: table full, dropping packet",
                Some(Table::Unnamed),
            ),
            // Not ours.
            ("nf_conntrack: expectation table full", None),
            ("nf_conntrack: nf_conntrack: expectation table full", None),
            ("net_ratelimit: 1234 callbacks suppressed", None),
            (
                "nf_conntrack: default automatic helper assignment has been turned off for security reasons",
                None,
            ),
            ("nf_conntrack version 0.5.0 (65536 buckets, 262144 max)", None),
            ("nf_conntrack: table full in netns , dropping packet", None),
            ("nf_conntrack: table full in netns 12x, dropping packet", None),
            ("nf_conntrack: table full in netns 99999999999999999999999, dropping packet", None),
            ("table full, dropping packet", None),
            ("", None),
        ];
        for (m, want) in cases {
            assert_eq!(table_full(m), *want, "{m:?}");
        }
        assert_eq!(
            count_table_full(cases.iter().map(|(m, _)| *m)),
            cases.iter().filter(|(_, w)| w.is_some()).count() as u64
        );
    }

    #[test]
    fn releases_that_name_other_namespaces() {
        assert_eq!(names_other_namespaces("6.18.44-fc-v657"), Some(true));
        assert_eq!(names_other_namespaces("6.17.0"), Some(true));
        assert_eq!(names_other_namespaces("6.16.9-arch1-1"), Some(false));
        assert_eq!(names_other_namespaces("5.15.0-91-generic"), Some(false));
        assert_eq!(
            names_other_namespaces("3.10.0-1160.el7.x86_64"),
            Some(false)
        );
        assert_eq!(names_other_namespaces("7.1"), Some(true));
        assert_eq!(names_other_namespaces("garbage"), None);
        assert_eq!(names_other_namespaces(""), None);
    }

    proptest! {
        #[test]
        fn never_panics_and_never_exceeds_message_count(msgs in proptest::collection::vec("\\PC*", 0..20)) {
            let n = count_table_full(&msgs);
            prop_assert!(n <= msgs.len() as u64);
        }

        #[test]
        fn netns_numbers_round_trip(n in any::<u64>(), doubled in any::<bool>()) {
            let prefix = if doubled { "nf_conntrack: nf_conntrack: " } else { "nf_conntrack: " };
            let m = format!("{prefix}table full in netns {n}, dropping packet");
            prop_assert_eq!(table_full(&m), Some(Table::Netns(n)));
        }
    }
}
