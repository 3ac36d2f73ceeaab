//! The time daemons by process name (`comm`, at most 15 bytes: the kernel's `TASK_COMM_LEN`
//! cuts `systemd-timesyncd` to `systemd-timesyn`).

use super::sample::DaemonKind;

/// Every process name looked for, with its kind. OpenNTPD and NTPsec run as `ntpd` too.
pub const NAMES: &[(&str, DaemonKind)] = &[
    ("chronyd", DaemonKind::Chrony),
    ("ntpd", DaemonKind::Ntpd),
    ("systemd-timesyn", DaemonKind::Timesyncd),
    ("phc2sys", DaemonKind::Ptp),
];

/// The kind of a process name of [`NAMES`], with the name as `'static` text.
pub fn kind_of(comm: &str) -> Option<(&'static str, DaemonKind)> {
    NAMES.iter().find(|(n, _)| *n == comm).copied()
}

/// The names alone, for a lookup in the process table.
pub fn names() -> Vec<&'static str> {
    NAMES.iter().map(|(n, _)| *n).collect()
}
