//! The kernel log through `syslog(2)` (`klogctl(SYSLOG_ACTION_READ_ALL)`): the fallback of
//! [`super::KmsgReader`] when `/dev/kmsg` is a character device that refuses `open()` with a
//! permission error, as the device cgroup of an unprivileged container does even with
//! CAP_SYSLOG, while `syslog(2)` only needs CAP_SYSLOG.
//!
//! `READ_ALL` returns the newest records that fit the buffer, as text, one line per record
//! (a record with embedded newlines gives one line per text line, each with the prefix):
//!
//! ```text
//! <6>[    0.233348] Freeing SMP alternatives memory: 52K
//! <14>[ 1357.918094] ndtest-ml line1
//! <6>[    0.000000][    T0] Linux version ...     (CONFIG_PRINTK_CALLER)
//! <6>Linux version ...                            (printk.time=0)
//! ```
//!
//! `<prio>` is `facility << 3 | level`; `[seconds.micros]` is present when `printk.time=1`
//! (the default). There is no sequence number and no `KEY=value` properties, and distinct
//! records often share a microsecond (early boot, coarse clocks: 18 lines at `0.233348` on
//! this VM), so lines are never merged by timestamp. Which lines are new is decided by
//! [`SyslogCursor`]: after the last lines passed, or by `(usec, message)` when those are gone.
//! Unlike `/dev/kmsg`, `READ_ALL` omits records cleared with `dmesg -C`/`-c`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::libc::c_int;

use super::record::{KmsgBatch, Record};

/// `SYSLOG_ACTION_READ_ALL`: copy the whole ring buffer (newest records that fit) as text.
const SYSLOG_ACTION_READ_ALL: c_int = 3;
/// `SYSLOG_ACTION_SIZE_BUFFER`: the size of the kernel's log buffer (`log_buf_len`).
const SYSLOG_ACTION_SIZE_BUFFER: c_int = 10;
/// The text form is larger than the stored records (a `<6>[ 1234.567890] ` prefix per line):
/// read into twice the kernel's buffer size ...
const TEXT_SIZE_FACTOR: usize = 2;
/// ... but never more than this (memory bound; with a bigger `log_buf_len` we see the newest
/// records that fit, and older ones count as dropped if we had not read them yet).
const MAX_SYSLOG_BUFFER_BYTES: usize = 16 * 1024 * 1024;
const MIN_SYSLOG_BUFFER_BYTES: usize = 4096;
/// The position is also kept as the last lines passed (at most this many).
const TAIL_LINES: usize = 16;

/// Calls `klogctl(2)` (glibc's name for the `syslog(2)` system call).
///
/// Returns the system call's non-negative result: bytes written into `buf` for `READ_ALL`,
/// the buffer size for `SIZE_BUFFER` (which ignores `buf`).
fn klogctl(action: c_int, buf: &mut [u8]) -> std::io::Result<usize> {
    let len = c_int::try_from(buf.len()).unwrap_or(c_int::MAX);
    // SAFETY: `buf` is a live, exclusively borrowed, writable region of `buf.len()` bytes and
    // `len <= buf.len()`; the kernel writes at most `len` bytes into it and keeps no reference
    // after the call returns. `klogctl` has no other memory effects.
    let n = unsafe { nix::libc::klogctl(action, buf.as_mut_ptr().cast(), len) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

/// `log_buf_len` of the running kernel; fails (`EPERM`) without CAP_SYSLOG when
/// `kernel.dmesg_restrict=1`, or when a seccomp profile forbids `syslog(2)`.
pub(crate) fn buffer_size() -> std::io::Result<usize> {
    klogctl(SYSLOG_ACTION_SIZE_BUFFER, &mut [])
}

/// Reads the whole kernel log as text into `buf` (resized and reused across calls); returns
/// the number of bytes filled.
pub(crate) fn read_all(buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let want = buffer_size()?
        .saturating_mul(TEXT_SIZE_FACTOR)
        .clamp(MIN_SYSLOG_BUFFER_BYTES, MAX_SYSLOG_BUFFER_BYTES);
    buf.resize(want, 0);
    let n = klogctl(SYSLOG_ACTION_READ_ALL, buf)?;
    Ok(n.min(buf.len()))
}

/// One line of `syslog(2)` `READ_ALL` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogLine {
    /// Log level 0 (emerg) .. 7 (debug).
    pub level: u8,
    /// Syslog facility (0 kernel, 1 user, ...).
    pub facility: u32,
    /// Microseconds since boot; `None` when the kernel prints no timestamps (`printk.time=0`).
    pub usec: Option<u64>,
    /// The text after the prefix (bytes as the kernel holds them; nothing is escaped).
    pub message: String,
}

/// Why a `syslog(2)` line was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyslogParseError {
    /// No `<prio>` prefix: a fragment of the line before (some older kernels print a
    /// record's continuation fragments on a line of their own without a prefix) or garbage.
    #[error("line does not start with <prio>")]
    NoPrefix,
    #[error("line priority {0:?} is not a number")]
    BadPriority(String),
}

/// Parses one line, `<prio>[ seconds.micros] message`, the timestamp (and a
/// CONFIG_PRINTK_CALLER `[    T123]` field after it) optional. A bracket that is not a
/// timestamp (`<6>[drm] ...` with `printk.time=0`) belongs to the message.
pub fn parse_syslog_line(line: &str) -> Result<SyslogLine, SyslogParseError> {
    let (prio, usec, message) = split_line(line)?;
    Ok(SyslogLine {
        level: (prio & 7) as u8,
        facility: prio >> 3,
        usec,
        message: message.to_string(),
    })
}

/// [`parse_syslog_line`] without copying: `(prio, usec, message)`.
fn split_line(line: &str) -> Result<(u32, Option<u64>, &str), SyslogParseError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let rest = line.strip_prefix('<').ok_or(SyslogParseError::NoPrefix)?;
    let (prio, rest) = rest.split_once('>').ok_or(SyslogParseError::NoPrefix)?;
    if prio.is_empty() || prio.len() > 10 || !prio.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SyslogParseError::BadPriority(
            crate::bounded::prefix(prio, 16).to_string(),
        ));
    }
    let prio: u32 = prio
        .parse()
        .map_err(|_| SyslogParseError::BadPriority(crate::bounded::prefix(prio, 16).to_string()))?;
    let stamped = bracketed(rest).and_then(|(inner, after)| Some((timestamp(inner)?, after)));
    let Some((usec, after)) = stamped else {
        return Ok((prio, None, rest));
    };
    let after = match bracketed(after) {
        Some((inner, after_caller)) if is_caller(inner) => after_caller,
        _ => after,
    };
    Ok((prio, Some(usec), after.strip_prefix(' ').unwrap_or(after)))
}

/// `[inner]rest` -> `(inner, rest)`, for a short bracket at the start.
fn bracketed(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix('[')?;
    let end = rest.find(']')?;
    (end <= 32).then(|| (&rest[..end], &rest[end + 1..]))
}

/// `    1.392374` (`%5lu.%06lu`) -> microseconds.
fn timestamp(inner: &str) -> Option<u64> {
    let (secs, micros) = inner.trim_start().split_once('.')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(secs) || !all_digits(micros) || micros.len() > 6 {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let scale = 10u64.pow(6 - micros.len() as u32);
    let micros: u64 = micros.parse::<u64>().ok()?.checked_mul(scale)?;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// `    T123` or `C1`: the CONFIG_PRINTK_CALLER field.
fn is_caller(inner: &str) -> bool {
    let t = inner.trim_start();
    let mut b = t.bytes();
    matches!(b.next(), Some(b'T' | b'C')) && t.len() > 1 && b.all(|c| c.is_ascii_digit())
}

/// Limits of one pass over a snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Lines older than this (microseconds since boot) are skipped (counted as old).
    pub cutoff_usec: u64,
    /// The boot clock now, in microseconds, to date lines without a timestamp.
    pub now_usec: Option<u64>,
    pub max_records: usize,
    pub started: Instant,
    pub budget: Duration,
}

/// Remembers where the last call stopped in the kernel log, so that each record is returned
/// once across `READ_ALL` snapshots. Pure: fed with text, testable without the system call.
///
/// The position is anchored twice:
/// - by the last lines passed (raw text, timestamps included): the new lines start after the
///   latest run of them in the next snapshot. This holds even when timestamps go backwards
///   (printk takes its timestamp before reserving its slot, so concurrent CPUs can store a
///   slightly older time after a newer one);
/// - by time, when those lines are gone (the ring buffer wrapped past them, `dmesg -C`, or a
///   line was extended by a continuation fragment on older kernels): lines after the
///   last timestamp seen are new, and at that same timestamp those whose message was not seen
///   as many times yet.
#[derive(Debug, Default)]
pub(crate) struct SyslogCursor {
    /// Timestamp of the newest line seen.
    last_usec: Option<u64>,
    /// How many times each message was seen at `last_usec` (several records share a
    /// microsecond; cleared when time moves on, so bounded by one snapshot's lines).
    at_last: HashMap<String, u32>,
    /// The last raw lines passed (at most [`TAIL_LINES`]).
    tail: Vec<String>,
    /// Whether `tail` came from a log with timestamps.
    tail_timed: bool,
    /// Synthesized sequence number of the last record returned (this format has none).
    seq: u64,
}

/// Where the new lines of a snapshot start, and how to tell them.
enum Start {
    /// After the remembered lines: everything from this index is new.
    After(usize),
    /// The remembered lines are gone: from the start, new by `(usec, message)`.
    ByTime,
}

impl SyslogCursor {
    /// Adds the records of `text` (one `READ_ALL` snapshot) not seen before to `batch`, within
    /// the limits; lines seen but older than the cutoff are counted in `batch.skipped_old`.
    pub(crate) fn take_new(&mut self, text: &str, limits: &Limits, batch: &mut KmsgBatch) {
        let lines: Vec<&str> = text.split('\n').filter(|l| !l.is_empty()).collect();
        let timed = lines
            .iter()
            .rev()
            .find_map(|l| split_line(l).ok())
            .is_some_and(|(_, usec, _)| usec.is_some());
        if self.tail_timed != timed {
            // printk.time was toggled: the remembered lines cannot match any more.
            self.tail.clear();
            self.tail_timed = timed;
        }
        let start = match self.tail_end(&lines) {
            Some(end) => Start::After(end),
            None if timed => Start::ByTime,
            None if self.tail.is_empty() => {
                // First sight of an untimed log: the age of what it holds is unknown, so it
                // is not reported (it could be days old); only lines arriving from now on are.
                batch.skipped_old += lines.iter().filter(|l| split_line(l).is_ok()).count() as u64;
                self.remember(&lines, 0, lines.len());
                return;
            }
            None => {
                // Untimed, and our last lines are gone: the buffer wrapped past them.
                batch.dropped += 1;
                Start::After(0)
            }
        };
        let (from, stop) = self.scan(&lines, start, timed, limits, batch);
        self.remember(&lines, from, stop);
    }

    /// Goes through the lines from `start`; returns the index it started at and the index it
    /// stopped at (the end, or the first line a bound kept it from taking).
    fn scan(
        &mut self,
        lines: &[&str],
        start: Start,
        timed: bool,
        limits: &Limits,
        batch: &mut KmsgBatch,
    ) -> (usize, usize) {
        let (from, by_time) = match start {
            Start::After(i) => (i, false),
            Start::ByTime => (0, true),
        };
        // By time, lines are compared with the position the previous calls left, not with
        // lines of this snapshot (which may be out of order).
        let (last_before, seen_before) = if by_time {
            (self.last_usec, self.at_last.clone())
        } else {
            (None, HashMap::new())
        };
        // Occurrences of each message at `last_before` in this snapshot.
        let mut here: HashMap<&str, u32> = HashMap::new();
        let mut first = by_time;
        let mut returned_prev = false;
        for (i, raw) in lines.iter().enumerate().skip(from) {
            let (prio, usec, message) = match split_line(raw) {
                Ok(l) => l,
                Err(SyslogParseError::NoPrefix) => {
                    // A fragment of the line before: kept with it when that was returned in
                    // this batch, else it was seen already; at the very start of the buffer
                    // it is what is left of a cut record.
                    if !Self::continue_last(raw, returned_prev, batch) && i == 0 {
                        batch.malformed += 1;
                    }
                    continue;
                }
                Err(_) => {
                    batch.malformed += 1;
                    returned_prev = false;
                    continue;
                }
            };
            returned_prev = false;
            let usec = match usec {
                Some(u) => u,
                None if timed => {
                    // A line without a timestamp in a timestamped log: not understood.
                    batch.malformed += 1;
                    continue;
                }
                // Untimed: dated when first seen.
                None => limits.now_usec.unwrap_or(0),
            };
            if by_time {
                if std::mem::take(&mut first) && last_before.is_some_and(|last| usec > last) {
                    // The oldest line held is newer than the last one seen: the ring buffer
                    // wrapped past our position. How many were lost is unknown.
                    batch.dropped += 1;
                }
                match last_before {
                    Some(last) if usec < last => continue,
                    Some(last) if usec == last => {
                        let occurrence = here.entry(message).or_insert(0);
                        *occurrence += 1;
                        if *occurrence <= seen_before.get(message).copied().unwrap_or(0) {
                            continue;
                        }
                    }
                    _ => {}
                }
            }
            if Self::over_budget(limits, batch) {
                return (from, i);
            }
            if timed {
                self.note_time(usec, message);
                if usec < limits.cutoff_usec {
                    batch.skipped_old += 1;
                    continue;
                }
            }
            self.push(prio, message, usec, batch);
            returned_prev = true;
        }
        (from, lines.len())
    }

    /// Notes a line taken at `usec` for the position by time (the newest timestamp seen and
    /// how often each message was seen at it; an older timestamp leaves it as it is).
    fn note_time(&mut self, usec: u64, message: &str) {
        match self.last_usec {
            Some(last) if usec < last => {}
            Some(last) if usec == last => {
                *self.at_last.entry(message.to_string()).or_insert(0) += 1;
            }
            _ => {
                self.last_usec = Some(usec);
                self.at_last.clear();
                self.at_last.insert(message.to_string(), 1);
            }
        }
    }

    fn over_budget(limits: &Limits, batch: &mut KmsgBatch) -> bool {
        if batch.records.len() >= limits.max_records || limits.started.elapsed() >= limits.budget {
            batch.truncated_by_budget = true;
            return true;
        }
        false
    }

    fn push(&mut self, prio: u32, message: &str, usec: u64, batch: &mut KmsgBatch) {
        self.seq += 1;
        batch.records.push(std::sync::Arc::new(Record {
            seq: self.seq,
            usec,
            level: (prio & 7) as u8,
            facility: prio >> 3,
            message: message.to_string(),
            continuation: Vec::new(),
            fragment: false,
            timestamp: None,
        }));
    }

    /// Appends a prefix-less line to the record just returned (older kernels' continuation
    /// fragments); `false` when there is none.
    fn continue_last(line: &str, returned_prev: bool, batch: &mut KmsgBatch) -> bool {
        match batch.records.last_mut() {
            Some(r) if returned_prev => {
                // Just made: the only reference, so no copy.
                let r = std::sync::Arc::make_mut(r);
                if r.message.len() < super::record::MAX_LINE_BYTES {
                    r.message.push('\n');
                    r.message.push_str(line);
                }
                true
            }
            _ => false,
        }
    }

    /// Remembers the lines before `stop` as the position, unless nothing was passed.
    fn remember(&mut self, lines: &[&str], from: usize, stop: usize) {
        if stop == from && !self.tail.is_empty() {
            return;
        }
        self.tail = lines[stop.saturating_sub(TAIL_LINES)..stop]
            .iter()
            .map(|l| l.to_string())
            .collect();
    }

    /// Where the new lines of a snapshot start: just after the latest run of lines equal to
    /// the remembered tail, or, when the buffer wrapped into the tail, after the longest end
    /// of the tail that the snapshot starts with. `None` when none of it is left (or nothing
    /// is remembered).
    fn tail_end(&self, lines: &[&str]) -> Option<usize> {
        let k = self.tail.len();
        if k == 0 {
            return None;
        }
        let same =
            |ls: &[&str], tail: &[String]| ls.iter().zip(tail).all(|(l, t)| *l == t.as_str());
        (k..=lines.len())
            .rev()
            .find(|&end| same(&lines[end - k..end], &self.tail))
            .or_else(|| {
                (1..k.min(lines.len() + 1))
                    .rev()
                    .find(|&j| same(&lines[..j], &self.tail[k - j..]))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::Status;

    /// Kernel 6.18.44 (this VM): `klogctl(SYSLOG_ACTION_READ_ALL)` output, excerpts. Note the
    /// literal tab (the device escapes it as `\x09`), several records in one microsecond, and
    /// user-space records (facility 1) written to /dev/kmsg.
    const REAL_6_18: &str = "<5>[    0.000000] Linux version 6.18.44-fc-v669 (builder@sandboxing) (gcc (GCC) 15.3.0, GNU ld (GNU Binutils) 2.46) #1 SMP PREEMPT_DYNAMIC @0
<6>[    0.220602] rcu: \tRCU restricting CPUs from NR_CPUS=256 to nr_cpu_ids=2.
<6>[    0.233348] Freeing SMP alternatives memory: 52K
<6>[    0.233348] pid_max: default: 32768 minimum: 301
<6>[    0.269498] acpi PNP0A08:00: _OSC: OS supports [ExtendedConfig ASPM ClockPM Segments MSI HPX-Type3]
<6>[    1.392374] tokio-rt-worker (70): drop_caches: 3
<14>[ 1357.918094] ndtest-ml line1
<12>[ 1357.918098] line2 after newline
<12>[ 1357.918108] ndtest-tab a\tb\\c
";

    #[test]
    fn parses_real_lines() {
        let lines: Vec<SyslogLine> = REAL_6_18
            .lines()
            .map(|l| parse_syslog_line(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 9);
        assert_eq!(
            (lines[0].level, lines[0].facility, lines[0].usec),
            (5, 0, Some(0))
        );
        assert!(lines[0].message.starts_with("Linux version 6.18.44"));
        assert_eq!(lines[1].usec, Some(220_602));
        assert_eq!(
            lines[1].message,
            "rcu: \tRCU restricting CPUs from NR_CPUS=256 to nr_cpu_ids=2."
        );
        assert_eq!(lines[2].usec, lines[3].usec);
        assert_eq!(
            lines[4].message,
            "acpi PNP0A08:00: _OSC: OS supports [ExtendedConfig ASPM ClockPM Segments MSI HPX-Type3]"
        );
        assert_eq!(lines[5].usec, Some(1_392_374));
        assert_eq!((lines[6].level, lines[6].facility), (6, 1));
        assert_eq!(lines[6].usec, Some(1_357_918_094));
        assert_eq!((lines[7].level, lines[7].facility), (4, 1));
        assert_eq!(lines[8].message, "ndtest-tab a\tb\\c");
    }

    #[test]
    fn parses_older_and_other_forms() {
        // Kernel 3.10 (CentOS 7), the handbook's example message (002, 节点内存碎片化排障处理).
        let l = parse_syslog_line(
            "<4>[5012345.678901] runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0",
        )
        .unwrap();
        assert_eq!((l.level, l.usec), (4, Some(5_012_345_678_901)));
        assert_eq!(
            l.message,
            "runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0"
        );
        // CONFIG_PRINTK_CALLER (5.1+): a caller field after the timestamp.
        let l = parse_syslog_line("<6>[    0.000000][    T0] Linux version 5.10.0").unwrap();
        assert_eq!(
            (l.usec, l.message.as_str()),
            (Some(0), "Linux version 5.10.0")
        );
        let l = parse_syslog_line("<6>[   12.500000][   C1] hello").unwrap();
        assert_eq!((l.usec, l.message.as_str()), (Some(12_500_000), "hello"));
        // printk.time=0: no timestamp; a bracket in the message stays in the message.
        let l = parse_syslog_line("<6>[drm] Initialized").unwrap();
        assert_eq!((l.usec, l.message.as_str()), (None, "[drm] Initialized"));
        let l = parse_syslog_line("<3>nf_conntrack: table full, dropping packet\n").unwrap();
        assert_eq!((l.level, l.usec), (3, None));
        assert_eq!(l.message, "nf_conntrack: table full, dropping packet");
        // A bracket after the timestamp that is not a caller field is message text.
        let l = parse_syslog_line("<6>[    1.000000] [drm] x").unwrap();
        assert_eq!((l.usec, l.message.as_str()), (Some(1_000_000), "[drm] x"));
        // Empty message.
        let l = parse_syslog_line("<6>[    1.000001] ").unwrap();
        assert_eq!((l.usec, l.message.as_str()), (Some(1_000_001), ""));
    }

    #[test]
    fn rejects_lines_without_priority() {
        assert_eq!(parse_syslog_line(""), Err(SyslogParseError::NoPrefix));
        assert_eq!(
            parse_syslog_line(" continued text"),
            Err(SyslogParseError::NoPrefix)
        );
        assert_eq!(parse_syslog_line("<6"), Err(SyslogParseError::NoPrefix));
        assert!(matches!(
            parse_syslog_line("<x>[    1.000000] m"),
            Err(SyslogParseError::BadPriority(_))
        ));
        assert!(matches!(
            parse_syslog_line("<99999999999>m"),
            Err(SyslogParseError::BadPriority(_))
        ));
        // A malformed timestamp is message text, not an error.
        assert_eq!(parse_syslog_line("<6>[ 1.2.3] m").unwrap().usec, None);
        assert_eq!(parse_syslog_line("<6>[ 1.1234567] m").unwrap().usec, None);
    }

    fn limits(cutoff_usec: u64, max_records: usize) -> Limits {
        Limits {
            cutoff_usec,
            now_usec: Some(5_000_000_000),
            max_records,
            started: Instant::now(),
            budget: Duration::from_secs(60),
        }
    }

    fn take(c: &mut SyslogCursor, text: &str, l: &Limits) -> KmsgBatch {
        let mut b = KmsgBatch::new();
        c.take_new(text, l, &mut b);
        assert_eq!(b.status, Status::Ok);
        b
    }

    fn messages(b: &KmsgBatch) -> Vec<&str> {
        b.records.iter().map(|r| r.message.as_str()).collect()
    }

    #[test]
    fn returns_each_record_once_across_snapshots() {
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        let b = take(&mut c, REAL_6_18, &l);
        assert_eq!(b.records.len(), 9);
        assert_eq!((b.dropped, b.skipped_old, b.malformed), (0, 0, 0));
        assert_eq!(
            b.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=9).collect::<Vec<_>>()
        );
        assert_eq!(b.records[8].usec, 1_357_918_108);
        // The same snapshot again: nothing new.
        assert!(take(&mut c, REAL_6_18, &l).records.is_empty());
        // Two more records, one at the same microsecond as the last one seen.
        let more = format!(
            "{REAL_6_18}<12>[ 1357.918108] same usec, other text\n<6>[ 1400.000000] later\n"
        );
        let b = take(&mut c, &more, &l);
        assert_eq!(messages(&b), vec!["same usec, other text", "later"]);
        assert_eq!(b.records[0].seq, 10);
        assert_eq!(b.dropped, 0);
        assert!(take(&mut c, &more, &l).records.is_empty());
    }

    #[test]
    fn identical_records_in_one_microsecond_are_each_returned() {
        let mut c = SyslogCursor::default();
        let l = limits(0, 2);
        let text = "<6>[    2.000000] a\n<6>[    2.000000] b\n<6>[    2.000000] a\n";
        let b1 = take(&mut c, text, &l);
        assert_eq!(messages(&b1), vec!["a", "b"]);
        assert!(b1.truncated_by_budget);
        // The second "a" is a record of its own: returned next, once.
        let b2 = take(&mut c, text, &l);
        assert_eq!(messages(&b2), vec!["a"]);
        assert!(!b2.truncated_by_budget);
        let more = format!("{text}<6>[    2.000000] a\n");
        assert_eq!(messages(&take(&mut c, &more, &l)), vec!["a"]);
        assert!(take(&mut c, &more, &l).records.is_empty());
    }

    #[test]
    fn lookback_applies_at_start_and_old_lines_are_counted_once() {
        let mut c = SyslogCursor::default();
        // Cutoff at 1000 s after boot.
        let l = limits(1_000_000_000, 100);
        let text = "<6>[    5.000000] old\n<6>[  999.999999] old too\n<4>[ 1000.000000] recent\n";
        let b = take(&mut c, text, &l);
        assert_eq!(messages(&b), vec!["recent"]);
        assert_eq!(b.skipped_old, 2);
        let b = take(&mut c, text, &l);
        assert_eq!((b.records.len(), b.skipped_old), (0, 0));
    }

    #[test]
    fn wrapped_buffer_counts_an_unknown_loss() {
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        take(&mut c, "<6>[   10.000000] a\n<6>[   11.000000] b\n", &l);
        // The ring buffer overwrote b's successors before we read them: the oldest line held
        // is newer than b.
        let b = take(&mut c, "<6>[   30.000000] x\n<6>[   31.000000] y\n", &l);
        assert_eq!(messages(&b), vec!["x", "y"]);
        assert_eq!(b.dropped, 1);
        // No loss when the oldest held is the last one seen or older.
        let b = take(&mut c, "<6>[   31.000000] y\n<6>[   32.000000] z\n", &l);
        assert_eq!((messages(&b), b.dropped), (vec!["z"], 0));
    }

    #[test]
    fn a_record_stored_with_an_older_timestamp_is_not_lost() {
        // printk takes the time before reserving the slot: a CPU can store 15 after 20.
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        let text = "<6>[   10.000000] a\n<6>[   20.000000] b\n";
        assert_eq!(messages(&take(&mut c, text, &l)), vec!["a", "b"]);
        let more = format!("{text}<6>[   15.000000] c\n");
        let b = take(&mut c, &more, &l);
        assert_eq!((messages(&b), b.dropped), (vec!["c"], 0));
        assert_eq!(b.records[0].usec, 15_000_000);
        assert!(take(&mut c, &more, &l).records.is_empty());
    }

    #[test]
    fn a_changed_last_line_falls_back_to_time() {
        // Older kernels may print a line again longer (a continuation fragment joined
        // it): the remembered lines no longer match, so new lines are told by time.
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        take(
            &mut c,
            "<6>[   10.000000] a\n<4>[   20.000000] Call Trace:\n",
            &l,
        );
        let b = take(
            &mut c,
            "<6>[   10.000000] a\n<4>[   20.000000] Call Trace: more\n<6>[   30.000000] c\n",
            &l,
        );
        assert_eq!(messages(&b), vec!["Call Trace: more", "c"]);
        assert_eq!(b.dropped, 0);
    }

    #[test]
    fn budget_stops_and_the_rest_comes_next_time() {
        let text: String = (1..=25)
            .map(|i| format!("<6>[{i:5}.000000] m{i}\n"))
            .collect();
        let mut c = SyslogCursor::default();
        let l = limits(0, 10);
        let b1 = take(&mut c, &text, &l);
        let b2 = take(&mut c, &text, &l);
        let b3 = take(&mut c, &text, &l);
        assert!(b1.truncated_by_budget && b2.truncated_by_budget && !b3.truncated_by_budget);
        let all: Vec<&str> = [&b1, &b2, &b3].into_iter().flat_map(messages).collect();
        let want: Vec<String> = (1..=25).map(|i| format!("m{i}")).collect();
        assert_eq!(all, want);
        // A time budget already spent returns nothing and says so.
        let spent = Limits {
            budget: Duration::ZERO,
            ..limits(0, 10)
        };
        let mut c = SyslogCursor::default();
        let b = take(&mut c, &text, &spent);
        assert!(b.records.is_empty() && b.truncated_by_budget);
    }

    #[test]
    fn prefixless_lines_continue_the_record_before() {
        // Some older kernels print a record's continuation fragments without a prefix.
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        let text = "cut tail of an overwritten record\n<4>[    1.000000] Call Trace:\n [<ffffffff8163e6a8>] dump_stack+0x19/0x1b\n<6>[    2.000000] next\n";
        let b = take(&mut c, text, &l);
        assert_eq!(
            messages(&b),
            vec![
                "Call Trace:\n [<ffffffff8163e6a8>] dump_stack+0x19/0x1b",
                "next"
            ]
        );
        assert_eq!(b.malformed, 1);
        // Seen again: nothing returned, nothing counted again.
        let b = take(&mut c, text, &l);
        assert!(b.records.is_empty());
        assert_eq!(b.malformed, 0);
    }

    #[test]
    fn untimed_log_is_followed_by_its_last_lines() {
        // printk.time=0: ages unknown, so what is held at start is not reported.
        let mut c = SyslogCursor::default();
        let l = limits(0, 100);
        let text = "<6>boot line\n<6>[drm] Initialized\n";
        let b = take(&mut c, text, &l);
        assert!(b.records.is_empty());
        assert_eq!(b.skipped_old, 2);
        let more = format!("{text}<3>nf_conntrack: table full, dropping packet\n");
        let b = take(&mut c, &more, &l);
        assert_eq!(
            messages(&b),
            vec!["nf_conntrack: table full, dropping packet"]
        );
        // Dated when first seen: the boot clock now.
        assert_eq!(b.records[0].usec, 5_000_000_000);
        assert!(take(&mut c, &more, &l).records.is_empty());
        // Our last lines were overwritten: everything held is new, one unknown loss.
        let b = take(&mut c, "<6>x\n<6>y\n", &l);
        assert_eq!((messages(&b), b.dropped), (vec!["x", "y"], 1));
        // The buffer wrapped into the lines remembered (only y is left of them): the new
        // lines start after it, and nothing was lost.
        let b = take(&mut c, "<6>y\n<6>z\n", &l);
        assert_eq!((messages(&b), b.dropped), (vec!["z"], 0));
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = parse_syslog_line(&s);
        }

        #[test]
        fn parse_never_panics_on_line_like_text(
            prio in "[0-9x]{0,12}", ts in "\\[?[ 0-9.TC\\]\\[]{0,16}", msg in ".{0,32}"
        ) {
            let line = format!("<{prio}>{ts}{msg}");
            if let Ok(l) = parse_syslog_line(&line) {
                proptest::prop_assert_eq!(l.level as u32, prio.parse::<u32>().unwrap() & 7);
            }
        }

        /// Lines as `syslog(2)` `READ_ALL` prints them (`info_print_prefix()`: `<%u>`, then
        /// with `printk.time=1` `[%5lu.%06lu]`, a CONFIG_PRINTK_CALLER `[%6s]`, and one space):
        /// priority, timestamp and message read back. Messages never start with `[` here:
        /// without a timestamp such a line is ambiguous by design (`<6>[drm] …`).
        #[test]
        fn parses_what_the_kernel_prints(
            facility in 0u32..256, level in 0u8..8,
            time in proptest::option::of((0u64..=10_000_000_000, 0u64..1_000_000)),
            caller in proptest::option::of(("[TC]", 0u32..4_194_304)),
            message in "([^\\[\\p{Cc}][^\\p{Cc}]{0,40})?",
        ) {
            let mut line = format!("<{}>", (facility << 3) | u32::from(level));
            if let Some((secs, micros)) = time {
                line += &format!("[{secs:5}.{micros:06}]");
                if let Some((k, id)) = &caller {
                    line += &format!("[{:>6}]", format!("{k}{id}"));
                }
                line.push(' ');
            }
            line += &message;
            let want = SyslogLine {
                level, facility, usec: time.map(|(s, m)| s * 1_000_000 + m), message,
            };
            proptest::prop_assert_eq!(parse_syslog_line(&format!("{line}\n")), Ok(want));
        }

        #[test]
        fn cursor_returns_each_line_once_whatever_the_timestamps(
            lines in proptest::collection::vec((0u64..5, "[ab]{0,2}"), 0..30),
            cut in 0usize..30, max in 1usize..8, cutoff in 0u64..3
        ) {
            // Timestamps in any order (concurrent CPUs), a cutoff at start, small budgets.
            let text: String = lines
                .iter()
                .enumerate()
                .map(|(i, (t, m))| format!("<6>[{t:5}.000000] {m}{i}\n"))
                .collect();
            let mut c = SyslogCursor::default();
            let l = limits(cutoff * 1_000_000, max);
            let mut got = Vec::new();
            let mut old = 0;
            let end = text.match_indices('\n').nth(cut).map_or(text.len(), |(i, _)| i + 1);
            for snapshot in [&text[..end], &text[..], &text[..]] {
                for _ in 0..40 {
                    let b = take(&mut c, snapshot, &l);
                    old += b.skipped_old;
                    got.extend(b.records.iter().map(|r| r.message.clone()));
                    if !b.truncated_by_budget {
                        break;
                    }
                }
            }
            // Lines older than the cutoff are skipped (counted once), all others returned once.
            let want: Vec<String> = lines
                .iter()
                .enumerate()
                .filter(|(_, (t, _))| *t >= cutoff)
                .map(|(i, (_, m))| format!("{m}{i}"))
                .collect();
            proptest::prop_assert_eq!(old as usize, lines.len() - want.len());
            proptest::prop_assert_eq!(got, want);
        }

        #[test]
        fn cursor_never_panics_and_never_repeats(
            lines in proptest::collection::vec(("[0-9]{1,2}", "[ab]{0,2}"), 0..30),
            cut in 0usize..30, max in 1usize..8
        ) {
            // A growing log read in snapshots with small budgets: each line returned once.
            let text: String = lines
                .iter()
                .enumerate()
                .map(|(i, (p, m))| format!("<{p}>[{:5}.000000] {m}{i}\n", i / 3))
                .collect();
            let mut c = SyslogCursor::default();
            let l = limits(0, max);
            let mut got = Vec::new();
            let end = text.match_indices('\n').nth(cut).map_or(text.len(), |(i, _)| i + 1);
            for snapshot in [&text[..end], &text[..], &text[..], &text[..], &text[..]] {
                for _ in 0..40 {
                    let b = take(&mut c, snapshot, &l);
                    got.extend(b.records.iter().map(|r| r.message.clone()));
                    if !b.truncated_by_budget {
                        break;
                    }
                }
            }
            let want: Vec<String> = lines.iter().enumerate().map(|(i, (_, m))| format!("{m}{i}")).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
