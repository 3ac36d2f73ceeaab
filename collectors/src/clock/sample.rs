//! The typed reading of the `clock` collector: the kernel clock's discipline ([`Timex`]), the
//! time since boot, and — only when the clock needs a word — the time daemons running. The
//! collector reads it; `judge` decides on it; tests build it directly.

pub use super::timex::Timex;

/// The kinds of time daemon node-doctor knows the commands of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DaemonKind {
    /// chrony (`chronyd`): RHEL, Amazon Linux, Ubuntu 25.10+, most cloud images.
    Chrony,
    /// ntpd (the reference implementation, NTPsec, OpenNTPD).
    Ntpd,
    /// systemd-timesyncd (its `comm` is cut to `systemd-timesyn`): Debian, older Ubuntu.
    Timesyncd,
    /// linuxptp's `phc2sys`, steering the system clock from a PTP hardware clock.
    Ptp,
}

impl DaemonKind {
    /// The condition of the rule file that selects this daemon's advice.
    pub fn condition(self) -> &'static str {
        match self {
            DaemonKind::Chrony => "chronyd",
            DaemonKind::Ntpd => "ntpd",
            DaemonKind::Timesyncd => "timesyncd",
            DaemonKind::Ptp => "ptp",
        }
    }
}

/// A time daemon found running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeDaemon {
    pub kind: DaemonKind,
    /// Its process name (one of [`super::daemons::NAMES`]: never host text beyond those).
    pub comm: &'static str,
    pub pid: u32,
}

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockSample {
    pub timex: Timex,
    /// The previous run's offset (seconds), to tell a correction under way from a clock
    /// drifting away.
    pub previous_offset_seconds: Option<f64>,
    /// Time since boot; `None` when `/proc/uptime` could not be read (the grace period is
    /// then taken as over).
    pub uptime_seconds: Option<f64>,
    /// The time daemons running, in pid order; `None` when not looked for (the clock is fine)
    /// or when the process table could not be read.
    pub daemons: Option<Vec<TimeDaemon>>,
}
