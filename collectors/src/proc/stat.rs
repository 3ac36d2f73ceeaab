//! `/proc/stat`: CPU time per mode (overall and per core) and the running/blocked task counts.
//!
//! Columns after `cpu`: user nice system idle iowait irq softirq steal guest guest_nice, in
//! USER_HZ ticks. Older kernels have fewer columns (iowait/irq/softirq since 2.6.0, steal since
//! 2.6.11, guest since 2.6.24, guest_nice since 2.6.33); missing ones read as zero.
//!
//! Our own parser: `procfs-core`'s `KernelStats` drops the number of each `cpuN` line, so with
//! a CPU offline (`cpu0`, `cpu2`) the per-CPU list no longer says which CPU is which, and the
//! `load` collector pairs CPUs across samples by number; it also refuses a text without the
//! `ctxt`, `btime` and `processes` lines, which we do not use (tests
//! `procfs_core_loses_cpu_numbers`, `procfs_core_needs_lines_we_do_not_use`).

use std::path::Path;

use crate::error::ReadError;
use crate::hostfs::{self, cap};

/// CPU time per mode, in USER_HZ ticks. `user`/`nice` already include `guest`/`guest_nice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    /// All time, without double-counting guest time (it is part of user/nice).
    pub fn total(&self) -> u64 {
        self.user
            .saturating_add(self.nice)
            .saturating_add(self.system)
            .saturating_add(self.idle)
            .saturating_add(self.iowait)
            .saturating_add(self.irq)
            .saturating_add(self.softirq)
            .saturating_add(self.steal)
    }
}

/// The parts of `/proc/stat` the `load` collector uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stat {
    /// The aggregate `cpu` line.
    pub total: CpuTimes,
    /// `cpuN` lines, by CPU number (offline CPUs have no line).
    pub cpus: Vec<(u32, CpuTimes)>,
    /// Runnable tasks right now (`procs_running`).
    pub procs_running: Option<u64>,
    /// Tasks in uninterruptible sleep, D state (`procs_blocked`).
    pub procs_blocked: Option<u64>,
}

fn parse_times(fields: &[&str]) -> Result<CpuTimes, String> {
    if fields.len() < 4 {
        return Err(format!(
            "cpu line has {} columns, need at least 4",
            fields.len()
        ));
    }
    let mut v = [0u64; 10];
    for (slot, f) in v.iter_mut().zip(fields) {
        *slot = f.parse().map_err(|e| format!("cpu column {f:?}: {e}"))?;
    }
    Ok(CpuTimes {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
        guest: v[8],
        guest_nice: v[9],
    })
}

/// Parses the text of `/proc/stat`. The aggregate `cpu` line is required.
pub fn parse(text: &str) -> Result<Stat, String> {
    let mut out = Stat::default();
    let mut have_total = false;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(key) = it.next() else { continue };
        if key == "cpu" {
            let f: Vec<&str> = it.collect();
            out.total = parse_times(&f)?;
            have_total = true;
        } else if let Some(n) = key.strip_prefix("cpu") {
            let n: u32 = n.parse().map_err(|e| format!("{key}: {e}"))?;
            let f: Vec<&str> = it.collect();
            out.cpus.push((n, parse_times(&f)?));
        } else if key == "procs_running" || key == "procs_blocked" {
            let v = it
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("bad {key} line"))?;
            if key == "procs_running" {
                out.procs_running = Some(v);
            } else {
                out.procs_blocked = Some(v);
            }
        }
    }
    if !have_total {
        return Err("no aggregate 'cpu' line".into());
    }
    Ok(out)
}

pub fn read(path: &Path) -> Result<Stat, ReadError> {
    let text = hostfs::read_text(path, cap::PER_CPU_TABLE)?;
    parse(&text).map_err(|m| ReadError::parse(path, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18 (2 vCPU VM), cut after `softirq`.
    const STAT_618: &str = "cpu  9865 0 4229 63419 248 0 35 38 0 0
cpu0 4695 0 1933 32215 32 0 7 17 0 0
cpu1 5169 0 2295 31203 215 0 27 20 0 0
intr 146023 0 0 0 0 0 0 0 0 0 0 0
ctxt 255582
btime 1795335051
processes 9546
procs_running 3
procs_blocked 0
softirq 72976 0 11675 4 1226 10308 0 82 19608 0 30073
";
    // Linux 2.6.18 (RHEL 5): 8 cpu columns (no guest), the oldest format still in the wild.
    const STAT_2618: &str = "cpu  1212 34 890 99812 412 12 40 0
cpu0 1212 34 890 99812 412 12 40 0
intr 1234 0
ctxt 98765
btime 1300000000
processes 4242
procs_running 1
procs_blocked 2
";

    #[test]
    fn parses_618() {
        let s = parse(STAT_618).unwrap();
        assert_eq!(s.total.user, 9865);
        assert_eq!(s.total.iowait, 248);
        assert_eq!(s.total.steal, 38);
        assert_eq!(s.total.total(), 9865 + 4229 + 63419 + 248 + 35 + 38);
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[1].0, 1);
        assert_eq!(s.cpus[1].1.iowait, 215);
        assert_eq!((s.procs_running, s.procs_blocked), (Some(3), Some(0)));
    }

    #[test]
    fn parses_old_format() {
        let s = parse(STAT_2618).unwrap();
        assert_eq!(s.total.softirq, 40);
        assert_eq!(s.total.guest, 0);
        assert_eq!(s.procs_blocked, Some(2));
    }

    #[test]
    fn bad_text_is_an_error() {
        for bad in [
            "",
            "cpu 1 2",
            "cpu a b c d",
            "intr 1\n",
            "cpu 1 2 3 4\ncpux 1 2 3 4",
            "cpu 1 2 3 4\nprocs_blocked x",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    /// procfs-core's `KernelStats` with this machine's facts (only ticks matter to it).
    fn core_stat(text: &str) -> procfs_core::ProcResult<procfs_core::KernelStats> {
        use procfs_core::FromReadSI;
        let si = procfs_core::ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: cfg!(target_endian = "little"),
        };
        procfs_core::KernelStats::from_read(text.as_bytes(), &si)
    }

    #[test]
    fn procfs_core_loses_cpu_numbers() {
        // Linux 6.18 with CPU 1 offline (`echo 0 > /sys/devices/system/cpu/cpu1/online`):
        // no `cpu1` line.
        let text = "cpu  300 0 60 9000 9 0 3 0 0 0\ncpu0 100 0 20 3000 3 0 1 0 0 0\n\
                    cpu2 200 0 40 6000 6 0 2 0 0 0\nctxt 1\nbtime 1\nprocesses 1\n";
        let core = core_stat(text).unwrap();
        assert_eq!(core.cpu_time.len(), 2);
        assert_eq!(core.cpu_time[1].user, 200); // the second line, but which CPU?
        let ours = parse(text).unwrap();
        assert_eq!(ours.cpus[1].0, 2);
        assert_eq!(ours.cpus[1].1.user, 200);
    }

    #[test]
    fn procfs_core_needs_lines_we_do_not_use() {
        let text = "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 0\n";
        assert!(core_stat(text).is_err());
        assert_eq!(parse(text).unwrap().procs_running, Some(2));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_cpu_lines(cols in proptest::collection::vec("[0-9]{0,25}|x", 0..14)) {
            let _ = parse(&format!("cpu {}\ncpu0 {}\nprocs_blocked {}", cols.join(" "), cols.join(" "), cols.first().cloned().unwrap_or_default()));
        }
        /// Well-formed text, printed as `show_stat()` prints it (`cpu  %llu …`, `cpu%d %llu …`,
        /// `procs_running %u`), with 7 to 10 columns (2.6.0 to today): parses to the values
        /// it was printed from, missing columns as zero, CPU numbers kept with gaps.
        #[test]
        fn parses_what_the_kernel_prints(
            ncols in 7usize..=10,
            total in proptest::array::uniform10(proptest::num::u64::ANY),
            cpus in proptest::collection::btree_map(0u32..4096, proptest::array::uniform10(proptest::num::u64::ANY), 0..6),
            running in proptest::num::u32::ANY,
            blocked in proptest::num::u32::ANY,
        ) {
            let row = |v: &[u64; 10]| v[..ncols].iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
            let times = |v: &[u64; 10]| {
                let mut c = [0u64; 10];
                c[..ncols].copy_from_slice(&v[..ncols]);
                CpuTimes {
                    user: c[0], nice: c[1], system: c[2], idle: c[3], iowait: c[4],
                    irq: c[5], softirq: c[6], steal: c[7], guest: c[8], guest_nice: c[9],
                }
            };
            let mut text = format!("cpu  {}\n", row(&total));
            for (n, v) in &cpus {
                text += &format!("cpu{n} {}\n", row(v));
            }
            text += &format!("intr 146023 0 0\nctxt 255582\nbtime 1795335051\nprocesses 9546\n\
                              procs_running {running}\nprocs_blocked {blocked}\nsoftirq 72976 0 11675\n");
            let want = Stat {
                total: times(&total),
                cpus: cpus.iter().map(|(n, v)| (*n, times(v))).collect(),
                procs_running: Some(u64::from(running)),
                procs_blocked: Some(u64::from(blocked)),
            };
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
