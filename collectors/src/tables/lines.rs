//! The kernel-log lines of the tables this collector watches, in every wording the kernels
//! node-doctor meets print them (from the printk calls of each version):
//!
//! | table | message | kernels |
//! |---|---|---|
//! | neighbour | `Neighbour table overflow.` | 2.6 (`neigh_alloc`, no table named) |
//! | neighbour | `neighbor table overflow!` | 3.x to 4.x (`net_info_ratelimited`, no table named) |
//! | neighbour | `arp_cache: neighbor table overflow!`, `ndisc_cache: neighbor table overflow!` | 4.x and later (`"%s: neighbor table overflow!\n", tbl->id`) |
//! | neighbour | `neighbour: arp_cache: neighbor table overflow!` | 5.x and later with `pr_fmt` |
//! | TCP memory | `TCP: out of memory -- consider tuning tcp_mem` | 3.x and later (`tcp_check_oom`) |
//! | TCP memory | `Out of socket memory` | 2.6 |
//! | orphans | `TCP: too many orphaned sockets` | 4.x and later |
//! | orphans | `TCP: too many of orphaned sockets` | 2.6 to 3.x |
//!
//! The module only classifies message strings (the shared reader reads the log), so it is
//! tested on plain strings.

use crate::needle::Words;

/// Which table a kernel message says ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Line {
    /// The IPv4 neighbour (ARP) table.
    ArpOverflow,
    /// The IPv6 neighbour (NDP) table.
    NdiscOverflow,
    /// A neighbour table the message does not name (older kernels).
    NeighbourOverflow,
    /// TCP sockets' memory went above `tcp_mem`'s maximum.
    TcpOutOfMemory,
    /// More orphaned sockets than `tcp_max_orphans` allows (after the penalty shift).
    TcpTooManyOrphans,
}

impl Line {
    /// The subject of the finding and the `kind` label of the metric.
    pub fn as_str(self) -> &'static str {
        match self {
            Line::ArpOverflow => "neighbour-ipv4",
            Line::NdiscOverflow => "neighbour-ipv6",
            Line::NeighbourOverflow => "neighbour",
            Line::TcpOutOfMemory => "tcp-memory",
            Line::TcpTooManyOrphans => "tcp-orphans",
        }
    }

    /// Every kind, in order.
    pub const ALL: [Line; 5] = [
        Line::ArpOverflow,
        Line::NdiscOverflow,
        Line::NeighbourOverflow,
        Line::TcpOutOfMemory,
        Line::TcpTooManyOrphans,
    ];
}

/// What every line below holds, whatever its case: a message with none of them is no line of
/// ours, and is not lower-cased (a copy of each record) to find that out.
static WORDS: Words = Words::ascii_case_insensitive(&[
    "table overflow",
    "tcp_mem",
    "out of socket memory",
    "orphaned sockets",
]);

/// Classifies one kernel message.
pub fn classify(message: &str) -> Option<Line> {
    if !WORDS.any_in(message) {
        return None;
    }
    let lower = message.to_ascii_lowercase();
    let overflow = lower
        .find("neighbor table overflow")
        .or_else(|| lower.find("neighbour table overflow"));
    if let Some(at) = overflow {
        let before = &lower[..at];
        return Some(if before.contains("arp_cache") {
            Line::ArpOverflow
        } else if before.contains("ndisc_cache") {
            Line::NdiscOverflow
        } else {
            Line::NeighbourOverflow
        });
    }
    if lower.contains("out of memory -- consider tuning tcp_mem")
        || lower.trim_end().ends_with("out of socket memory")
    {
        return Some(Line::TcpOutOfMemory);
    }
    if lower.contains("too many orphaned sockets") || lower.contains("too many of orphaned sockets")
    {
        return Some(Line::TcpTooManyOrphans);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wording_and_nothing_else() {
        let cases: &[(&str, Option<Line>)] = &[
            ("Neighbour table overflow.", Some(Line::NeighbourOverflow)),
            ("neighbor table overflow!", Some(Line::NeighbourOverflow)),
            (
                "arp_cache: neighbor table overflow!",
                Some(Line::ArpOverflow),
            ),
            (
                "ndisc_cache: neighbor table overflow!",
                Some(Line::NdiscOverflow),
            ),
            (
                "neighbour: arp_cache: neighbor table overflow!",
                Some(Line::ArpOverflow),
            ),
            (
                "neighbour: ndisc_cache: neighbor table overflow!",
                Some(Line::NdiscOverflow),
            ),
            (
                "TCP: out of memory -- consider tuning tcp_mem",
                Some(Line::TcpOutOfMemory),
            ),
            ("Out of socket memory", Some(Line::TcpOutOfMemory)),
            (
                "TCP: too many orphaned sockets",
                Some(Line::TcpTooManyOrphans),
            ),
            (
                "TCP: too many of orphaned sockets",
                Some(Line::TcpTooManyOrphans),
            ),
            // Not ours.
            ("Out of memory: Killed process 1234 (java)", None),
            ("nf_conntrack: table full, dropping packet", None),
            (
                "TCP: request_sock_TCP: Possible SYN flooding on port 80.",
                None,
            ),
            ("net_ratelimit: 3 callbacks suppressed", None),
            ("", None),
        ];
        for (m, want) in cases {
            assert_eq!(classify(m), *want, "{m}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = classify(&s);
            let _ = classify(&format!("{s}neighbor table overflow!{s}"));
        }

        /// Every wording of each kind (the table above), with or without the `pr_fmt` prefix
        /// and the trailing text some kernels add, classifies as that kind.
        #[test]
        fn every_printed_wording_reads_as_its_kind(
            (want, wording) in proptest::sample::select(vec![
                (Line::NeighbourOverflow, "Neighbour table overflow."),
                (Line::NeighbourOverflow, "neighbor table overflow!"),
                (Line::ArpOverflow, "arp_cache: neighbor table overflow!"),
                (Line::NdiscOverflow, "ndisc_cache: neighbor table overflow!"),
                (Line::ArpOverflow, "neighbour: arp_cache: neighbor table overflow!"),
                (Line::NdiscOverflow, "neighbour: ndisc_cache: neighbor table overflow!"),
                (Line::TcpOutOfMemory, "TCP: out of memory -- consider tuning tcp_mem"),
                (Line::TcpOutOfMemory, "Out of socket memory"),
                (Line::TcpTooManyOrphans, "TCP: too many orphaned sockets"),
                (Line::TcpTooManyOrphans, "TCP: too many of orphaned sockets"),
            ]),
            prefix in "(\\[ *[0-9]{1,6}\\.[0-9]{6}\\] )?",
            trailing_space in proptest::bool::ANY,
        ) {
            let line = format!("{prefix}{wording}{}", if trailing_space { " " } else { "" });
            proptest::prop_assert_eq!(classify(&line), Some(want), "{}", line);
        }
    }
}
