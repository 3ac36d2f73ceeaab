//! The kernel clock's discipline state, as `adjtimex(2)` reports it with `modes = 0` (a read:
//! no privilege needed, allowed by the container runtimes' default seccomp profiles).
//!
//! Not a file: the kernel's NTP state (`kernel/time/ntp.c`) is global, the same from the host
//! and from any pod (time namespaces offset only CLOCK_MONOTONIC and CLOCK_BOOTTIME). So the
//! state is read from the machine the agent runs on, and [`from_raw`] (pure) turns the kernel's
//! structure into a typed [`Timex`] that tests build directly.
//!
//! Units (include/uapi/linux/timex.h): `maxerror`/`esterror` in µs; `offset` in µs, or ns
//! when `STA_NANO` is set; `freq` in ppm scaled by 2^16. The kernel grows `maxerror` by
//! 500 µs every second nobody updates it and, at 16 s (`NTP_PHASE_LIMIT`), sets
//! `STA_UNSYNC` itself (`second_overflow`): a daemon that stops updating the kernel leaves an
//! unsynchronised clock within at most 9 h.

/// The clock is not synchronised (set at boot, by the kernel when `maxerror` reaches 16 s, or
/// by a daemon that lost its sources).
pub const STA_UNSYNC: u32 = 0x0040;
/// `offset` is in nanoseconds, not microseconds.
pub const STA_NANO: u32 = 0x2000;
/// The status bits by name, lowest first (what `adjtimex --print` and ntptime show).
const FLAGS: &[(u32, &str)] = &[
    (0x0001, "PLL"),
    (0x0002, "PPSFREQ"),
    (0x0004, "PPSTIME"),
    (0x0008, "FLL"),
    (0x0010, "INS"),
    (0x0020, "DEL"),
    (STA_UNSYNC, "UNSYNC"),
    (0x0080, "FREQHOLD"),
    (0x0100, "PPSSIGNAL"),
    (0x0200, "PPSJITTER"),
    (0x0400, "PPSWANDER"),
    (0x0800, "PPSERROR"),
    (0x1000, "CLOCKERR"),
    (STA_NANO, "NANO"),
    (0x4000, "MODE"),
    (0x8000, "CLK"),
];

/// The clock states `adjtimex` returns (`TIME_OK` … `TIME_ERROR`).
const STATES: &[&str] = &[
    "TIME_OK",
    "TIME_INS",
    "TIME_DEL",
    "TIME_OOP",
    "TIME_WAIT",
    "TIME_ERROR",
];

/// One reading of the kernel clock's discipline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timex {
    /// `STA_*` bits.
    pub status: u32,
    /// The call's result: 0 `TIME_OK` … 5 `TIME_ERROR` (the clock is unsynchronised).
    pub state: i32,
    /// The kernel's bound on the clock's error, seconds (grows 500 ppm between updates).
    pub max_error_seconds: f64,
    /// The error the time daemon estimated at its last update, seconds.
    pub est_error_seconds: f64,
    /// The phase offset the kernel's PLL is still slewing away, seconds (0 with daemons that
    /// steer the frequency themselves, chronyd among them).
    pub offset_seconds: f64,
    /// The frequency correction in force, ppm.
    pub frequency_ppm: f64,
}

impl Timex {
    /// Whether the kernel considers the clock synchronised (`STA_UNSYNC` clear).
    pub fn synchronised(&self) -> bool {
        self.status & STA_UNSYNC == 0
    }

    /// The status bits by name (`UNSYNC|NANO`), `-` when none is set.
    pub fn flags(&self) -> String {
        let names: Vec<&str> = FLAGS
            .iter()
            .filter(|(bit, _)| self.status & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        if names.is_empty() {
            "-".into()
        } else {
            names.join("|")
        }
    }

    /// The clock state's name (`TIME_ERROR`), or the number when the kernel returned another.
    pub fn state_name(&self) -> String {
        usize::try_from(self.state)
            .ok()
            .and_then(|i| STATES.get(i))
            .map_or_else(|| self.state.to_string(), |s| (*s).to_string())
    }
}

/// The kernel's fields, as `adjtimex(2)` fills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawTimex {
    pub status: i64,
    pub offset: i64,
    pub freq: i64,
    pub maxerror: i64,
    pub esterror: i64,
}

/// The kernel's structure in units (pure). Negative errors (never written by a kernel) read
/// as 0; a status outside 16 bits keeps only the defined bits.
pub fn from_raw(raw: RawTimex, state: i32) -> Timex {
    let status = u32::try_from(raw.status & 0xffff).unwrap_or(0);
    let offset_unit = if status & STA_NANO != 0 { 1e-9 } else { 1e-6 };
    Timex {
        status,
        state,
        max_error_seconds: raw.maxerror.max(0) as f64 * 1e-6,
        est_error_seconds: raw.esterror.max(0) as f64 * 1e-6,
        offset_seconds: raw.offset as f64 * offset_unit,
        frequency_ppm: raw.freq as f64 / 65536.0,
    }
}

/// Reads the running kernel's clock state: `adjtimex(2)` with `modes = 0` changes nothing.
pub fn read() -> std::io::Result<Timex> {
    // SAFETY: an all-zero `timex` is a valid value of this plain C structure (integers and a
    // `timeval`); `modes = 0` asks the kernel only to fill it in.
    let mut t: nix::libc::timex = unsafe { std::mem::zeroed() };
    t.modes = 0;
    // SAFETY: `t` is a live, exclusively borrowed `timex`; the kernel writes into it and keeps
    // no reference after the call returns.
    let state = unsafe { nix::libc::adjtimex(&mut t) };
    if state < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let raw = RawTimex {
        status: i64::from(t.status),
        offset: t.offset,
        freq: t.freq,
        maxerror: t.maxerror,
        esterror: t.esterror,
    };
    Ok(from_raw(raw, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_of_an_unsynchronised_boot_clock() {
        // This VM's kernel (6.18) with no daemon, as Debian's `adjtimex --print` shows it:
        // status 64 (UNSYNC), maxerror 16000000, esterror 16000000, return value 5; with a
        // daemon's PLL bits and STA_NANO beside it.
        let t = from_raw(
            RawTimex {
                status: 0x2041,
                offset: 0,
                freq: 0,
                maxerror: 16_000_000,
                esterror: 16_000_000,
            },
            5,
        );
        assert!(!t.synchronised());
        assert_eq!(t.flags(), "PLL|UNSYNC|NANO");
        assert_eq!(t.state_name(), "TIME_ERROR");
        assert!((t.max_error_seconds - 16.0).abs() < 1e-9);
        assert!((t.est_error_seconds - 16.0).abs() < 1e-9);
    }

    #[test]
    fn offset_in_nanoseconds_only_with_sta_nano() {
        let raw = RawTimex {
            status: 0x0001,
            offset: 250_000,
            freq: -655_360,
            maxerror: 12_000,
            esterror: 500,
        };
        let us = from_raw(raw, 0);
        assert!(us.synchronised());
        assert!((us.offset_seconds - 0.25).abs() < 1e-12);
        assert!((us.frequency_ppm + 10.0).abs() < 1e-12);
        assert_eq!(us.state_name(), "TIME_OK");
        let ns = from_raw(
            RawTimex {
                status: 0x2001,
                ..raw
            },
            0,
        );
        assert!((ns.offset_seconds - 0.000_25).abs() < 1e-12);
    }

    #[test]
    fn garbage_is_bounded_not_trusted() {
        let t = from_raw(
            RawTimex {
                status: -1,
                offset: i64::MIN,
                freq: i64::MAX,
                maxerror: -5,
                esterror: i64::MIN,
            },
            42,
        );
        assert_eq!(t.status, 0xffff);
        assert_eq!(t.max_error_seconds, 0.0);
        assert_eq!(t.est_error_seconds, 0.0);
        assert_eq!(t.state_name(), "42");
        assert!(t.offset_seconds.is_finite() && t.frequency_ppm.is_finite());
        assert_eq!(from_raw(RawTimex::default(), 0).flags(), "-");
    }

    #[test]
    fn the_running_kernel_answers_without_privilege_checks() {
        // modes = 0 is a read: it works as any user and the figures are in range.
        let t = read().expect("adjtimex(2) with modes 0");
        assert!((0..=5).contains(&t.state), "{t:?}");
        assert!(
            t.max_error_seconds >= 0.0 && t.max_error_seconds <= 16.5,
            "{t:?}"
        );
        // The state agrees with the status bit (the kernel returns TIME_ERROR when unsynced).
        if !t.synchronised() {
            assert_eq!(t.state, 5, "{t:?}");
        }
    }
}
