//! `/proc/diskstats`: per block device IO counters (the source of `iostat -x` and atop's DSK).
//!
//! Line formats: 14 fields (up to 4.17), 18 (4.18+: discards), 20 (5.5+: flushes). Linux 2.6
//! printed partitions with only 7 fields; those lines are skipped (partitions are not judged).
//! Fields: major minor name, reads, reads merged, sectors read, ms reading, writes, writes
//! merged, sectors written, ms writing, in flight, ms doing IO (io_ticks), weighted ms, then
//! discards (4), then flushes (2). Sectors are 512 bytes whatever the device's block size.
//!
//! Each line is parsed by `procfs-core` ([`procfs_core::DiskStat::from_line`]); the 7-field
//! partition lines of 2.6 kernels, which it refuses, are skipped here first (test
//! `procfs_core_refuses_2_6_partition_lines`).

use std::path::Path;

use crate::error::ReadError;
use crate::hostfs::{self, cap};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiskStat {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub reads: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    pub in_flight: u64,
    /// Milliseconds during which at least one request was in flight.
    pub io_ticks_ms: u64,
    /// Milliseconds of in-flight time summed over requests (queue size × time).
    pub weighted_ms: u64,
    /// Discard counters (4.18+): completed, ms spent.
    pub discards: Option<u64>,
    pub discard_ms: Option<u64>,
    /// Flush counters (5.5+): completed, ms spent.
    pub flushes: Option<u64>,
    pub flush_ms: Option<u64>,
}

/// Parses one line; `Ok(None)` for the old 7-field partition lines.
pub fn parse_line(line: &str) -> Result<Option<DiskStat>, String> {
    let fields = line.split_whitespace().count();
    if fields == 7 {
        return Ok(None);
    }
    if fields < 14 {
        return Err(format!("{fields} fields, need 14, 18 or 20"));
    }
    let d = procfs_core::DiskStat::from_line(line).map_err(|e| super::core_error(&e))?;
    let dev = |what: &str, n: i32| -> Result<u32, String> {
        u32::try_from(n).map_err(|_| format!("{what} {n} is negative"))
    };
    Ok(Some(DiskStat {
        major: dev("major", d.major)?,
        minor: dev("minor", d.minor)?,
        name: d.name,
        reads: d.reads,
        reads_merged: d.merged,
        sectors_read: d.sectors_read,
        read_ms: d.time_reading,
        writes: d.writes,
        writes_merged: d.writes_merged,
        sectors_written: d.sectors_written,
        write_ms: d.time_writing,
        in_flight: d.in_progress,
        io_ticks_ms: d.time_in_progress,
        weighted_ms: d.weighted_time_in_progress,
        discards: d.discards,
        discard_ms: d.time_discarding,
        flushes: d.flushes,
        flush_ms: d.time_flushing,
    }))
}

/// Parses the whole file. A malformed line is an error naming the line.
pub fn parse(text: &str) -> Result<Vec<DiskStat>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(d) = parse_line(line).map_err(|e| format!("line {}: {e}", i + 1))? {
            out.push(d);
        }
    }
    Ok(out)
}

pub fn read(path: &Path) -> Result<Vec<DiskStat>, ReadError> {
    let text = hostfs::read_text(path, cap::PER_CPU_TABLE)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18 (20 fields), this project's CI VM.
    const DS_618: &str = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 11369 5506 2657002 10591 4389 35587 12680472 59747 0 5860 70730 3692 130 44840 390 18 1
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";
    // Linux 4.19 (18 fields, discards but no flushes), a CVM node with a partition.
    const DS_419: &str = " 253       0 vda 65536 1024 4194304 30000 120000 80000 9600000 600000 2 400000 630000 0 0 0 0
 253       1 vda1 65000 1020 4190000 29900 119000 79900 9590000 599000 2 399000 628900 0 0 0 0
";
    // Linux 3.10 (14 fields, CentOS 7), the handbook's era; sda busy with writes.
    const DS_310: &str =
        "   8       0 sda 231 70 18610 500 1789000 50 28700000 9980000 12 9990000 34000000
   8       5 sda5 200 60 18000 450 1788000 50 28690000 9970000 12 9980000 33990000
";
    // Linux 2.6.18 partition line (7 fields).
    const DS_2618_PART: &str = "   8    1 sda1 4 8 12 16\n";

    #[test]
    fn parses_20_fields() {
        let v = parse(DS_618).unwrap();
        assert_eq!(v.len(), 3);
        let vda = &v[1];
        assert_eq!((vda.major, vda.minor, vda.name.as_str()), (254, 0, "vda"));
        assert_eq!(vda.reads, 11369);
        assert_eq!(vda.sectors_written, 12680472);
        assert_eq!(vda.io_ticks_ms, 5860);
        assert_eq!(vda.weighted_ms, 70730);
        assert_eq!(vda.discards, Some(3692));
        assert_eq!(vda.discard_ms, Some(390));
        assert_eq!(vda.flushes, Some(18));
        assert_eq!(vda.flush_ms, Some(1));
    }

    #[test]
    fn parses_18_and_14_fields() {
        let v = parse(DS_419).unwrap();
        assert_eq!(v[0].discards, Some(0));
        assert_eq!(v[0].flushes, None);
        assert_eq!(v[1].name, "vda1");
        let old = parse(DS_310).unwrap();
        assert_eq!(old[0].writes, 1789000);
        assert_eq!(old[0].in_flight, 12);
        assert_eq!(old[0].discards, None);
        assert_eq!(parse(DS_2618_PART).unwrap(), vec![]);
    }

    #[test]
    fn bad_lines_are_errors() {
        for bad in [
            "8 0 sda 1 2 3",
            "8 0 sda x 0 0 0 0 0 0 0 0 0 0",
            "99999999999 0 sda 0 0 0 0 0 0 0 0 0 0 0",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn procfs_core_refuses_2_6_partition_lines() {
        // Why parse_line skips 7-field lines before handing a line to procfs-core.
        assert!(procfs_core::DiskStat::from_line(DS_2618_PART.trim_end()).is_err());
        assert_eq!(parse_line(DS_2618_PART).unwrap(), None);
    }

    #[test]
    fn a_negative_device_number_is_an_error() {
        assert!(parse("-8 0 sda 0 0 0 0 0 0 0 0 0 0 0").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_fields(f in proptest::collection::vec("[0-9]{0,22}|sd[a-z]|-1", 0..24)) {
            let _ = parse(&f.join(" "));
        }
        /// Lines as `diskstats_show()` prints them (`%4d %7d %pg` then the counters): 14
        /// fields before 4.18, 18 with discards, 20 with flushes (5.5+); every counter lands
        /// in its own field, the ones the kernel did not print read as `None`.
        #[test]
        fn parses_what_the_kernel_prints(
            disks in proptest::collection::vec(
                (0u32..4096, 0u32..1 << 20, crate::testgen::kernel_name(),
                 proptest::array::uniform17(proptest::num::u64::ANY),
                 proptest::sample::select(vec![14usize, 18, 20])),
                0..6,
            ),
        ) {
            let mut text = String::new();
            let mut want = Vec::new();
            for (major, minor, name, c, fields) in disks {
                let counters = &c[..fields - 3];
                let cols: Vec<String> = counters.iter().map(u64::to_string).collect();
                text += &format!("{major:>4} {minor:>7} {name} {}\n", cols.join(" "));
                let opt = |i: usize| counters.get(i).copied();
                want.push(DiskStat {
                    major, minor, name,
                    reads: c[0], reads_merged: c[1], sectors_read: c[2], read_ms: c[3],
                    writes: c[4], writes_merged: c[5], sectors_written: c[6], write_ms: c[7],
                    in_flight: c[8], io_ticks_ms: c[9], weighted_ms: c[10],
                    discards: opt(11), discard_ms: opt(14),
                    flushes: opt(15), flush_ms: opt(16),
                });
            }
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
