//! One kernel log record and what a read returns: the pure parser of `/dev/kmsg` records
//! ([`parse_record`]), the readers' configuration and the batch of one call.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::collector::Status;
use crate::needle::Needle;

/// The longest line kept from a regular-file source; longer lines are cut (bounded memory).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024;

/// One kernel log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Sequence number: increases by one per record since boot. In [`KmsgMode::Syslog`] the
    /// format has none: a number synthesized by the reader, increasing by one per record it
    /// returns.
    pub seq: u64,
    /// Microseconds since boot (the kernel log clock).
    pub usec: u64,
    /// Log level 0 (emerg) .. 7 (debug).
    pub level: u8,
    /// Syslog facility (0 kernel, 1 user, ...).
    pub facility: u32,
    /// The message with `\xNN` escapes decoded (invalid UTF-8 replaced).
    pub message: String,
    /// Continuation lines (`SUBSYSTEM=acpi`, `DEVICE=+acpi:...`), leading space removed.
    /// Always empty in [`KmsgMode::Syslog`] (`syslog(2)` does not carry them).
    pub continuation: Vec<String>,
    /// The header's flags field is `c` or `+`: since 4.9 `c` marks text a `pr_cont()` added
    /// after another message had come in between, so the kernel stored it as a record of its
    /// own (e.g. the rest of an `oom-kill:` summary); before 4.9 `c` marked a line's first
    /// fragment and `+` the following ones. A hint for joining a line's pieces, never proof:
    /// readers check the text too. Always false in [`KmsgMode::Syslog`] (no flags).
    pub fragment: bool,
    /// Wall-clock estimate from `/proc/uptime`; `None` when uptime could not be read (and
    /// always `None` from [`parse_record`], which is pure).
    pub timestamp: Option<SystemTime>,
}

impl Record {
    /// The value of a continuation property, e.g. `property("SUBSYSTEM")`.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.continuation.iter().find_map(|line| {
            let (k, v) = line.split_once('=')?;
            (k == key).then_some(v)
        })
    }
}

/// Why a record's text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KmsgParseError {
    #[error("record has no ';' between header and message")]
    NoSeparator,
    #[error("record header {0:?} has fewer than 3 fields")]
    ShortHeader(String),
    #[error("record header field {field} is not a number: {value:?}")]
    BadNumber { field: &'static str, value: String },
}

/// Parses one record: the header line and any continuation lines (each starting with a space),
/// with or without the trailing newline.
pub fn parse_record(text: &str) -> Result<Record, KmsgParseError> {
    let mut lines = text.split('\n');
    let first = lines.next().unwrap_or("");
    let (header, message) = first.split_once(';').ok_or(KmsgParseError::NoSeparator)?;
    let mut fields = header.split(',');
    let (prio, seq, usec) = match (fields.next(), fields.next(), fields.next()) {
        (Some(p), Some(s), Some(u)) => (p, s, u),
        _ => {
            return Err(KmsgParseError::ShortHeader(
                crate::bounded::prefix(header, 64).to_string(),
            ))
        }
    };
    let prio: u32 = number("prio", prio)?;
    let seq: u64 = number("seq", seq)?;
    let usec: u64 = number("usec", usec)?;
    let fragment = matches!(fields.next().map(str::trim), Some("c" | "+"));
    let continuation = lines
        .filter_map(|l| l.strip_prefix(' '))
        .map(str::to_string)
        .collect();
    Ok(Record {
        seq,
        usec,
        level: (prio & 7) as u8,
        facility: prio >> 3,
        message: unescape(message),
        continuation,
        fragment,
        timestamp: None,
    })
}

fn number<T: std::str::FromStr>(field: &'static str, s: &str) -> Result<T, KmsgParseError> {
    s.trim().parse().map_err(|_| KmsgParseError::BadNumber {
        field,
        value: crate::bounded::prefix(s, 32).to_string(),
    })
}

/// Decodes the kernel's `\xNN` escapes (it escapes control bytes and `\` itself).
fn unescape(s: &str) -> String {
    static ESCAPE: Needle = Needle::new("\\x");
    if !ESCAPE.is_in(s) {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() && b[i + 1] == b'x' {
            let hex = std::str::from_utf8(&b[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Bounds and start point of a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgConfig {
    /// At start, records older than this are skipped (`--kmsg-lookback`, default 1 h).
    pub lookback: Duration,
    /// At most this many records are returned per [`KmsgReader::read_new`] call.
    pub max_records_per_cycle: usize,
    /// At most this much time is spent per call (checked between records).
    pub max_millis_per_cycle: u64,
}

impl Default for KmsgConfig {
    fn default() -> Self {
        KmsgConfig {
            lookback: Duration::from_secs(3600),
            max_records_per_cycle: 5000,
            max_millis_per_cycle: 50,
        }
    }
}

/// What one [`KmsgReader::read_new`] call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct KmsgBatch {
    /// New records, oldest first, each returned once.
    /// Shared, not copied: the readers of one hub are handed the same records (issue 32: a
    /// copy of each record's text per reader was a sixth of the log's cost in a `check`).
    pub records: Vec<Arc<Record>>,
    /// Records lost before we could read them (overwritten in the ring buffer: sequence gaps
    /// and `EPIPE`), counted from the gap in sequence numbers.
    pub dropped: u64,
    /// True when the per-cycle record or time bound stopped the read; the rest is read next
    /// call (if the kernel has not overwritten it by then, which `dropped` then counts).
    pub truncated_by_budget: bool,
    /// Records older than the lookback window, skipped at start.
    pub skipped_old: u64,
    /// Records whose text could not be parsed (skipped).
    pub malformed: u64,
    /// `Ok`, or `Degraded` with a reason a person can act on ("/dev/kmsg needs CAP_SYSLOG").
    pub status: Status,
}

impl KmsgBatch {
    pub(crate) fn new() -> KmsgBatch {
        KmsgBatch {
            records: Vec::new(),
            dropped: 0,
            truncated_by_budget: false,
            skipped_old: 0,
            malformed: 0,
            status: Status::Ok,
        }
    }
}

/// How a [`KmsgReader`] reads the kernel log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KmsgMode {
    /// `<root>/dev/kmsg` (the character device, or a regular file in a fake root).
    Kmsg,
    /// `syslog(2)` `SYSLOG_ACTION_READ_ALL`: `/dev/kmsg` refused `open()`.
    Syslog,
}

impl KmsgMode {
    /// `"kmsg"` or `"syslog"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KmsgMode::Kmsg => "kmsg",
            KmsgMode::Syslog => "syslog",
        }
    }
}

impl std::fmt::Display for KmsgMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
