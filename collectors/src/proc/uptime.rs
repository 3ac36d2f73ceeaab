//! `<root>/proc/uptime`: seconds since boot (and idle seconds), used to turn kernel-log
//! timestamps (microseconds since boot) into wall-clock estimates.
//!
//! Parsed by `procfs-core` ([`procfs_core::Uptime`]); the range check is ours.

use std::time::{Duration, SystemTime};

use procfs_core::FromRead;

use crate::host::HostPaths;
use crate::ReadError;

/// Parsed `/proc/uptime`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uptime {
    /// Time since boot (CLOCK_BOOTTIME), including time suspended.
    pub since_boot: Duration,
}

/// Why `/proc/uptime` text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UptimeParseError(String);

/// Parses `/proc/uptime` text, e.g. `390.44 633.27\n` (kernel 6.18; unchanged since 2.6).
pub fn parse(text: &str) -> Result<Uptime, UptimeParseError> {
    let u = procfs_core::Uptime::from_read(text.as_bytes())
        .map_err(|e| UptimeParseError(format!("{} in {text:?}", super::core_error(&e))))?;
    let secs = u.uptime;
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(UptimeParseError(format!(
            "uptime in {text:?} is out of range"
        )));
    }
    Ok(Uptime {
        since_boot: Duration::from_secs_f64(secs),
    })
}

/// Reads `<root>/proc/uptime`.
pub fn read(host: &HostPaths) -> Result<Uptime, ReadError> {
    let path = host.proc_file("uptime");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

/// Maps "microseconds since boot" (kernel log timestamps) to wall-clock time, assuming the
/// host booted at `now - uptime`. An estimate: the kernel log clock does not advance while
/// the machine is suspended, so records from before a suspend look older than they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootClock {
    /// Estimated wall-clock time of boot.
    pub boot: SystemTime,
    /// Time since boot when the clock was taken.
    pub uptime: Duration,
}

impl BootClock {
    /// A clock from an uptime reading taken at wall-clock `now`.
    pub fn new(uptime: Uptime, now: SystemTime) -> BootClock {
        let boot = now.checked_sub(uptime.since_boot).unwrap_or(now);
        BootClock {
            boot,
            uptime: uptime.since_boot,
        }
    }

    /// Reads `<root>/proc/uptime` now.
    pub fn read(host: &HostPaths) -> Result<BootClock, ReadError> {
        Ok(BootClock::new(read(host)?, SystemTime::now()))
    }

    /// Wall-clock estimate of a time `usec` microseconds after boot.
    pub fn wall_clock(&self, usec: u64) -> SystemTime {
        self.boot
            .checked_add(Duration::from_micros(usec))
            .unwrap_or(self.boot)
    }

    /// How long before the clock was taken `usec` happened (zero if after).
    pub fn age(&self, usec: u64) -> Duration {
        self.uptime.saturating_sub(Duration::from_micros(usec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_uptime() {
        // Kernel 6.18.44 (this VM).
        let u = parse("390.44 633.27\n").unwrap();
        assert_eq!(u.since_boot, Duration::from_millis(390_440));
        // Kernel 3.10 (CentOS 7) has the same format.
        assert_eq!(
            parse("8812345.67 17000000.01\n").unwrap().since_boot,
            Duration::from_millis(8_812_345_670)
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("").is_err());
        assert!(parse("abc 1").is_err());
        assert!(parse("-1 1").is_err());
        assert!(parse("NaN 1").is_err());
        assert!(parse("1e300 1").is_err());
    }

    #[test]
    fn boot_clock_maps_usec_to_wall_clock() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let c = BootClock::new(
            Uptime {
                since_boot: Duration::from_secs(100),
            },
            now,
        );
        assert_eq!(
            c.wall_clock(40_000_000),
            SystemTime::UNIX_EPOCH + Duration::from_secs(999_940)
        );
        assert_eq!(c.age(40_000_000), Duration::from_secs(60));
        assert_eq!(c.age(200_000_000), Duration::ZERO);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// `%lu.%02lu %lu.%02lu` as `uptime_proc_show()` prints it, up to 31 years: the uptime
        /// reads back to the hundredth (f64 keeps no more past ~10^8 s).
        #[test]
        fn parses_what_the_kernel_prints(
            up in crate::testgen::hundredths(999_999_999),
            idle in crate::testgen::hundredths(999_999_999),
        ) {
            use crate::testgen::fmt_hundredths;
            let text = format!("{} {}\n", fmt_hundredths(up), fmt_hundredths(idle));
            let u = parse(&text).map(|u| (u.since_boot.as_secs_f64() * 100.0).round() as u64);
            proptest::prop_assert_eq!(u, Ok(up));
        }
    }
}
