//! The kernel log, `<root>/dev/kmsg`: a pure record parser ([`parse_record`]) and a bounded,
//! non-blocking reader ([`KmsgReader`]). Each collector owns a reader with its own position,
//! and the readers of one host made before its first read share one open of the device
//! ([`shared`]): the ring buffer is read and parsed once for all of them.
//!
//! Record format (Documentation/ABI/testing/dev-kmsg):
//!
//! ```text
//! 6,339,1392374,-;tokio-rt-worker (70): drop_caches: 3
//! 6,191,269498,-;acpi PNP0A08:00: _OSC: OS supports [ExtendedConfig ASPM ClockPM]
//!  SUBSYSTEM=acpi
//!  DEVICE=+acpi:PNP0A08:00
//! ```
//!
//! `prio,seq,usec,flags[,...];message`, where `prio` is `facility << 3 | level`, `seq` a 64-bit
//! sequence number, `usec` microseconds since boot; non-printable bytes in the message are
//! escaped as `\xNN`; continuation lines starting with a space carry `KEY=value` properties.
//!
//! On the character device each `read()` returns exactly one record, `EAGAIN` when there are
//! no more, and `EPIPE` when records were overwritten before we read them (the position then
//! jumps to the oldest record still held). A regular file in a fake root (one record per
//! line, as scenario tests write it) is read line by line and ends in EOF instead of `EAGAIN`.
//!
//! When `/dev/kmsg` is the character device (1:11) but `open()` is refused with a permission error
//! (the device cgroup of an unprivileged container refuses it even with CAP_SYSLOG), the
//! reader falls back to `syslog(2)` (`SYSLOG_ACTION_READ_ALL`, which only needs CAP_SYSLOG;
//! see [`syslog`]) and produces the same [`Record`]s; [`KmsgReader::mode`] tells which.

pub mod decay;
mod device;
mod recent;
mod record;
mod shared;
mod syslog;
pub use recent::RecentEvents;
pub use record::{parse_record, KmsgBatch, KmsgConfig, KmsgMode, KmsgParseError, Record};
pub use shared::{Hubs, KmsgReader};
pub use syslog::{parse_syslog_line, SyslogLine, SyslogParseError};
