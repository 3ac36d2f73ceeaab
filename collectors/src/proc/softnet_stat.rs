//! `/proc/net/softnet_stat`: the receive path's per-CPU counters (`net/core/net-procfs.c`,
//! `softnet_seq_show`). One line per online CPU, every value `%08x` (the kernel's `unsigned
//! int`, so each wraps at 2^32). The columns by kernel:
//!
//! - 3.10: 10 — `processed dropped time_squeeze 0 0 0 0 0 cpu_collision received_rps`;
//! - 3.11 to 5.9 (and RHEL 7's 3.10, which took the patch): 11 — `flow_limit_count` added;
//! - 5.10 to 6.8: 13 — the backlog length and the CPU's number added (`seq->index - 1`): a line
//!   is only printed for an online CPU, so before this column the line number is not the CPU
//!   number when CPUs are offline;
//! - 6.9 on: 15 — the CPU's number is `seq->index` and the backlog length is split into the
//!   input and process queues after it.
//!
//! The softnet data is per CPU, not per network namespace: every namespace's file shows the
//! same lines, so the agent's own namespace reads the node's.
//!
//! Our own parser: `procfs-core` has no model of `softnet_stat`.

use std::path::Path;

use crate::host::HostPaths;
use crate::ReadError;

/// Why a `softnet_stat` text could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: {found} values, at least 3 expected")]
    TooFewColumns { line: usize, found: usize },
    #[error("line {line}: `{value}` is not a hexadecimal number")]
    BadNumber { line: usize, value: String },
    #[error("no CPU lines")]
    NoCpuLines,
}

/// One CPU's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SoftnetCpu {
    /// The CPU's number: the kernel's column on 5.10+, the line's position before.
    pub cpu: u32,
    /// Frames taken off this CPU's backlog or polled by NAPI on it.
    pub processed: u64,
    /// Frames dropped because this CPU's backlog was full (`net.core.netdev_max_backlog`).
    pub dropped: u64,
    /// Times `net_rx_action` stopped with work left (budget or time used up).
    pub time_squeeze: u64,
    /// Frames steered to this CPU by RPS/RFS (inter-processor interrupts received).
    pub received_rps: u64,
    /// Frames dropped by the flow limit (3.11+; `None` on 3.10).
    pub flow_limit_count: Option<u64>,
    /// Frames waiting in the backlog when read (5.10+).
    pub backlog_len: Option<u64>,
}

/// Parses the text of `softnet_stat`.
pub fn parse(text: &str) -> Result<Vec<SoftnetCpu>, ParseError> {
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        if cols.len() < 3 {
            return Err(ParseError::TooFewColumns {
                line: line_no,
                found: cols.len(),
            });
        }
        let mut values = Vec::with_capacity(cols.len());
        for raw in &cols {
            values.push(
                u64::from_str_radix(raw, 16).map_err(|_| ParseError::BadNumber {
                    line: line_no,
                    value: raw.chars().take(32).collect(),
                })?,
            );
        }
        let at = |i: usize| values.get(i).copied();
        let position = out.len() as u32;
        // 5.10+: the backlog length, then the CPU (6.9+ adds the two queues after it).
        let (cpu, backlog_len) = if values.len() >= 13 {
            (at(12), at(11))
        } else {
            (None, None)
        };
        out.push(SoftnetCpu {
            cpu: cpu.and_then(|c| u32::try_from(c).ok()).unwrap_or(position),
            processed: values[0],
            dropped: values[1],
            time_squeeze: values[2],
            received_rps: at(9).unwrap_or(0),
            flow_limit_count: at(10),
            backlog_len,
        });
    }
    if out.is_empty() {
        return Err(ParseError::NoCpuLines);
    }
    Ok(out)
}

/// `<root>/proc/net/softnet_stat` (the same in every network namespace).
pub fn path(host: &HostPaths) -> std::path::PathBuf {
    host.proc_file("net/softnet_stat")
}

/// Reads and parses the file at `path`.
pub fn read(path: &Path) -> Result<Vec<SoftnetCpu>, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::PER_CPU_TABLE)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Read on this machine (kernel 6.18.44, 2 CPUs): 15 columns, the CPU in the 13th.
    const LINUX_6_18: &str = "\
0026d611 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
002827ef 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000
";
    /// 5.15's format (13 columns), CPU 1 offline: the lines are CPUs 0, 2 and 3.
    const LINUX_5_15: &str = "\
01a2b3c4 00000010 00000200 00000000 00000000 00000000 00000000 00000000 00000000 00000005 00000000 00000003 00000000
00000100 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002
00000100 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000003
";
    /// 4.19's format (11 columns: flow_limit_count last).
    const LINUX_4_19: &str = "\
7f3e2a10 0000002a 000013ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000004
00001000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
";
    /// 3.10's format (10 columns: no flow limit).
    const LINUX_3_10: &str = "\
0000ffff 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000007
";

    #[test]
    fn kernel_6_18_numbers_cpus_from_its_column() {
        let s = parse(LINUX_6_18).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].cpu, 0);
        assert_eq!(s[1].cpu, 1);
        assert_eq!(s[0].processed, 0x26d611);
        assert_eq!(s[1].backlog_len, Some(0));
        assert_eq!(s[1].flow_limit_count, Some(0));
    }

    #[test]
    fn kernel_5_15_skips_an_offline_cpu_by_number() {
        let s = parse(LINUX_5_15).unwrap();
        assert_eq!(s.iter().map(|c| c.cpu).collect::<Vec<_>>(), [0, 2, 3]);
        assert_eq!(s[0].dropped, 0x10);
        assert_eq!(s[0].time_squeeze, 0x200);
        assert_eq!(s[0].received_rps, 5);
        assert_eq!(s[0].backlog_len, Some(3));
    }

    #[test]
    fn kernel_4_19_and_3_10_number_cpus_by_line() {
        let s = parse(LINUX_4_19).unwrap();
        assert_eq!(s[0].cpu, 0);
        assert_eq!(s[1].cpu, 1);
        assert_eq!(s[0].dropped, 42);
        assert_eq!(s[0].flow_limit_count, Some(4));
        assert_eq!(s[0].backlog_len, None);
        let s = parse(LINUX_3_10).unwrap();
        assert_eq!(s[0].time_squeeze, 2);
        assert_eq!(s[0].received_rps, 7);
        assert_eq!(s[0].flow_limit_count, None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(parse(""), Err(ParseError::NoCpuLines));
        assert!(matches!(
            parse("0001 0002\n"),
            Err(ParseError::TooFewColumns { line: 1, found: 2 })
        ));
        assert!(matches!(
            parse("0001 zz 0003\n"),
            Err(ParseError::BadNumber { line: 1, .. })
        ));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        /// Lines as `softnet_seq_show()` prints them, `%08x` per column: 10 columns (3.10),
        /// 11 (flow limit, 3.11+), 13 (backlog and CPU, 5.10+), 15 (queue lengths, 6.9+), with
        /// gaps in the CPU numbers (offline CPUs). The CPU is the kernel's column where it
        /// prints one, the line's position before.
        #[test]
        fn parses_what_the_kernel_prints(
            columns in prop::sample::select(vec![10usize, 11, 13, 15]),
            cpus in prop::collection::btree_map(0u32..4096, prop::array::uniform15(any::<u32>()), 1..6),
        ) {
            let mut rows = Vec::new();
            let mut want = Vec::new();
            for (position, (cpu, v)) in cpus.iter().enumerate() {
                let mut row: Vec<u64> = v.iter().map(|x| u64::from(*x)).collect();
                row[12] = u64::from(*cpu);
                row.truncate(columns);
                want.push(SoftnetCpu {
                    cpu: if columns >= 13 { *cpu } else { position as u32 },
                    processed: row[0],
                    dropped: row[1],
                    time_squeeze: row[2],
                    received_rps: row[9],
                    flow_limit_count: row.get(10).copied(),
                    backlog_len: (columns >= 13).then(|| row[11]),
                });
                rows.push(row);
            }
            prop_assert_eq!(parse(&crate::testgen::hex_rows(&rows)), Ok(want));
        }
    }
}
