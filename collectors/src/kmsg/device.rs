//! The device reader: `<root>/dev/kmsg` opened non-blocking (the character device, one
//! record per `read()`, or a regular file in a fake root, one record per line), or
//! `syslog(2)` when the device refuses `open()` ([`super::syslog`]). What the
//! [`super::KmsgReader`]s of a host share ([`super::shared`]).

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::record::{parse_record, KmsgBatch, KmsgConfig, KmsgMode, MAX_LINE_BYTES};
use super::syslog;
use crate::collector::Status;
use crate::host::HostPaths;
use crate::proc::uptime::BootClock;

/// Read buffer for one device record. The kernel caps a record's text at 1 KiB (plus its
/// properties); a buffer that is too small makes `read()` fail with `EINVAL`.
const RECORD_BUFFER_BYTES: usize = 16 * 1024;
/// Records read between two looks at the clock for the per-call time bound.
const CLOCK_EVERY: usize = 32;

/// The device number of `/dev/kmsg` (drivers/char/mem.c: `mem` major 1, minor 11).
const KMSG_MAJOR: u64 = 1;
const KMSG_MINOR: u64 = 11;

enum Source {
    /// Not opened yet, or the last open failed (retried next call).
    Closed,
    /// The character device: one record per `read()`.
    Device(File),
    /// A regular file (fake roots): records one per line plus continuation lines.
    Stream {
        reader: BufReader<File>,
        /// A line read without its newline yet (a writer is mid-append).
        partial: String,
        /// The record being assembled: its continuation lines may still follow.
        pending: Option<String>,
    },
    /// `syslog(2)` snapshots of the whole ring buffer (the device refused `open()`). Once
    /// chosen it is kept: its position is not comparable with the device's.
    Syslog(syslog::SyslogCursor),
}

/// A non-blocking reader of `<root>/dev/kmsg` that returns each record once, bounded per call
/// (what the [`KmsgReader`]s of a host share).
pub(crate) struct RawReader {
    path: PathBuf,
    host: HostPaths,
    config: KmsgConfig,
    source: Source,
    /// Records before this (microseconds since boot) are skipped; set at first open.
    cutoff_usec: Option<u64>,
    last_seq: Option<u64>,
    clock: Option<BootClock>,
    /// Reason of the last failed open, to log transitions only.
    open_failure: Option<String>,
    buf: Vec<u8>,
}

enum Step {
    /// One record's text.
    Text(String),
    /// One record of the device, its `n` bytes at the start of the reader's buffer (parsed
    /// from there: no copy of the text before the record's own).
    Read(usize),
    /// `EPIPE`: records were overwritten; the position moved to the oldest one held.
    Overrun,
    /// No more records for now (`EAGAIN` or EOF).
    Done,
    /// A read error that ends this call.
    Failed(String),
}

impl RawReader {
    /// A reader of `<root>/dev/kmsg`. Nothing is opened until the first [`Self::read_new`].
    pub(crate) fn new(host: &HostPaths, config: KmsgConfig) -> RawReader {
        RawReader {
            path: host.join("/dev/kmsg"),
            host: host.clone(),
            config,
            source: Source::Closed,
            cutoff_usec: None,
            last_seq: None,
            clock: None,
            open_failure: None,
            buf: Vec::new(),
        }
    }

    /// The agent-side path read.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// How the kernel log is read: [`KmsgMode::Syslog`] once `/dev/kmsg` refused `open()` and
    /// `syslog(2)` worked instead, else [`KmsgMode::Kmsg`] (also before the first call).
    pub(crate) fn mode(&self) -> KmsgMode {
        match self.source {
            Source::Syslog(_) => KmsgMode::Syslog,
            _ => KmsgMode::Kmsg,
        }
    }

    /// The boot clock taken at the last call, to date records or compute their age.
    pub(crate) fn clock(&self) -> Option<BootClock> {
        self.clock
    }

    /// Reads the records that arrived since the last call (at the first call: those within the
    /// lookback window), within the per-call bounds.
    pub(crate) fn read_new(&mut self) -> KmsgBatch {
        let mut batch = KmsgBatch::new();
        let started = Instant::now();
        self.clock = BootClock::read(&self.host).ok();
        if self.stream_was_truncated() {
            tracing::info!(path = %self.path.display(), "kernel log file shrank; reading it again from the start");
            self.source = Source::Closed;
        }
        if matches!(self.source, Source::Closed) {
            if let Err(reason) = self.open() {
                batch.status = Status::Degraded(reason);
                return batch;
            }
        }
        let budget = Duration::from_millis(self.config.max_millis_per_cycle);
        if matches!(self.source, Source::Syslog(_)) {
            self.read_syslog(&mut batch, started, budget);
        } else {
            self.read_records(&mut batch, started, budget);
        }
        if batch.truncated_by_budget {
            tracing::debug!(
                path = %self.path.display(),
                records = batch.records.len(),
                "kernel log read stopped at its per-cycle bound; continuing next cycle"
            );
        }
        batch
    }

    /// Reads device records (or file lines) one by one until none is left or a bound is hit.
    /// The time bound is looked at every [`CLOCK_EVERY`] records (a record costs about a
    /// microsecond, a clock read a tenth of that).
    fn read_records(&mut self, batch: &mut KmsgBatch, started: Instant, budget: Duration) {
        let mut taken = 0usize;
        loop {
            if batch.records.len() >= self.config.max_records_per_cycle
                || (taken.is_multiple_of(CLOCK_EVERY) && started.elapsed() >= budget)
            {
                batch.truncated_by_budget = true;
                break;
            }
            taken += 1;
            match self.next_text() {
                Step::Text(text) => self.accept(&text, batch),
                Step::Read(n) => {
                    let buf = std::mem::take(&mut self.buf);
                    self.accept(&String::from_utf8_lossy(&buf[..n]), batch);
                    self.buf = buf;
                }
                Step::Overrun => {
                    tracing::debug!(path = %self.path.display(), "kernel log records were overwritten before they were read");
                }
                Step::Done => break,
                Step::Failed(reason) => {
                    tracing::warn!(path = %self.path.display(), error = %reason, "kernel log read failed; reopening next cycle");
                    self.source = Source::Closed;
                    batch.status = Status::Degraded(reason);
                    break;
                }
            }
        }
    }

    /// Takes a `syslog(2)` snapshot of the ring buffer and adds the records not seen before.
    /// A failed call leaves the position as it was: the next call retries.
    fn read_syslog(&mut self, batch: &mut KmsgBatch, started: Instant, budget: Duration) {
        let Source::Syslog(cursor) = &mut self.source else {
            return;
        };
        let filled = match syslog::read_all(&mut self.buf) {
            Ok(n) => n,
            Err(e) => {
                let reason = format!(
                    "syslog(2) READ_ALL failed ({e}); it needs CAP_SYSLOG (and syslog allowed by the seccomp profile); kernel log rules are off until it works again"
                );
                if self.open_failure.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(error = %e, "reading the kernel log with syslog(2) failed");
                    self.open_failure = Some(reason.clone());
                }
                batch.status = Status::Degraded(reason);
                return;
            }
        };
        if self.open_failure.take().is_some() {
            tracing::info!("kernel log readable with syslog(2) again");
        }
        let text = String::from_utf8_lossy(&self.buf[..filled]);
        let limits = syslog::Limits {
            cutoff_usec: self.cutoff_usec.unwrap_or(0),
            now_usec: self.clock.map(|c| micros(c.uptime)),
            max_records: self.config.max_records_per_cycle,
            started,
            budget,
        };
        cursor.take_new(&text, &limits, batch);
        if let Some(clock) = self.clock {
            for r in &mut batch.records {
                // Just made: the only reference, so no copy.
                std::sync::Arc::make_mut(r).timestamp = Some(clock.wall_clock(r.usec));
            }
        }
        if batch.dropped > 0 {
            tracing::debug!("kernel log records were overwritten before syslog(2) read them");
        }
    }

    /// True when `<root>/dev/kmsg` is the kernel log's character device (1:11), not a fake
    /// root's file or another device, whether or not we may open it.
    fn is_kmsg_device(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.path).is_ok_and(|m| {
            m.file_type().is_char_device()
                && nix::sys::stat::major(m.rdev()) == KMSG_MAJOR
                && nix::sys::stat::minor(m.rdev()) == KMSG_MINOR
        })
    }

    /// Sets the lookback cutoff at the first successful open.
    fn ensure_cutoff(&mut self) {
        if self.cutoff_usec.is_none() {
            let lookback = micros(self.config.lookback);
            // Without uptime we cannot place records in time: read everything held.
            let now_usec = self.clock.map(|c| micros(c.uptime));
            self.cutoff_usec = Some(now_usec.map_or(0, |n| n.saturating_sub(lookback)));
        }
    }

    /// True when a regular-file source is now shorter than our position (rewritten); records
    /// already returned are still skipped by sequence number after the reopen.
    fn stream_was_truncated(&mut self) -> bool {
        use std::io::Seek;
        let Source::Stream { reader, .. } = &mut self.source else {
            return false;
        };
        match (
            reader.stream_position(),
            reader.get_ref().metadata().map(|m| m.len()),
        ) {
            (Ok(pos), Ok(len)) => len < pos,
            _ => false,
        }
    }

    fn open(&mut self) -> Result<(), String> {
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&self.path)
            .and_then(|f| f.metadata().map(|m| (f, m)));
        let (file, meta) = match opened {
            Ok(ok) => ok,
            Err(e) if e.kind() == ErrorKind::PermissionDenied && self.is_kmsg_device() => {
                return self.fall_back_to_syslog(&e);
            }
            Err(e) => {
                let reason = match e.kind() {
                    ErrorKind::PermissionDenied => format!(
                        "/dev/kmsg needs CAP_SYSLOG (open {}: {e}); kernel log rules are off",
                        self.path.display()
                    ),
                    ErrorKind::NotFound => format!(
                        "{} does not exist; mount the host's /dev to read the kernel log",
                        self.path.display()
                    ),
                    _ => format!("cannot open {}: {e}", self.path.display()),
                };
                if self.open_failure.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(path = %self.path.display(), error = %e, "kernel log unavailable");
                    self.open_failure = Some(reason.clone());
                }
                return Err(reason);
            }
        };
        if self.open_failure.take().is_some() {
            tracing::info!(path = %self.path.display(), "kernel log readable again");
        }
        self.ensure_cutoff();
        self.source = if meta.file_type().is_char_device() {
            Source::Device(file)
        } else {
            Source::Stream {
                reader: BufReader::with_capacity(64 * 1024, file),
                partial: String::new(),
                pending: None,
            }
        };
        Ok(())
    }

    /// `/dev/kmsg` refused `open()` with a permission error: read with `syslog(2)` if we may.
    fn fall_back_to_syslog(&mut self, open_error: &std::io::Error) -> Result<(), String> {
        match syslog::buffer_size() {
            Ok(_) => {
                tracing::info!(
                    path = %self.path.display(),
                    error = %open_error,
                    "kernel log device refused open(); reading the kernel log with syslog(2) instead"
                );
                self.open_failure = None;
                self.ensure_cutoff();
                self.source = Source::Syslog(syslog::SyslogCursor::default());
                Ok(())
            }
            Err(e) => {
                let reason = format!(
                    "{}: permission denied (open: {open_error}; refused by the device cgroup of an unprivileged container even with CAP_SYSLOG, or for lack of CAP_SYSLOG) and the syslog(2) fallback failed ({e}): it needs CAP_SYSLOG, and syslog allowed by the seccomp profile; kernel log rules are off",
                    self.path.display()
                );
                if self.open_failure.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(path = %self.path.display(), error = %open_error, syslog_error = %e, "kernel log unavailable: /dev/kmsg and syslog(2) both refused");
                    self.open_failure = Some(reason.clone());
                }
                Err(reason)
            }
        }
    }

    fn next_text(&mut self) -> Step {
        match &mut self.source {
            Source::Closed | Source::Syslog(_) => Step::Done,
            Source::Device(file) => {
                if self.buf.len() < RECORD_BUFFER_BYTES {
                    self.buf.resize(RECORD_BUFFER_BYTES, 0);
                }
                loop {
                    match file.read(&mut self.buf) {
                        Ok(0) => return Step::Done,
                        Ok(n) => return Step::Read(n),
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Done,
                        Err(e) if e.kind() == ErrorKind::BrokenPipe => return Step::Overrun,
                        Err(e) => {
                            return Step::Failed(format!("read {}: {e}", self.path.display()))
                        }
                    }
                }
            }
            Source::Stream {
                reader,
                partial,
                pending,
            } => loop {
                match read_line_bounded(reader, partial) {
                    Ok(0) => {
                        // EOF. A record without a newline yet stays partial; an assembled
                        // record is complete (continuation lines are written with it).
                        return match pending.take() {
                            Some(t) => Step::Text(t),
                            None => Step::Done,
                        };
                    }
                    Ok(_) if !partial.ends_with('\n') => {
                        // EOF inside a line: a writer is mid-append; the line waits for its
                        // newline. A new header line means the pending record is complete.
                        if !partial.starts_with(' ') {
                            if let Some(t) = pending.take() {
                                return Step::Text(t);
                            }
                        }
                        return Step::Done;
                    }
                    Ok(_) => {
                        let line = std::mem::take(partial);
                        if line.starts_with(' ') {
                            if let Some(p) = pending.as_mut() {
                                if p.len() < MAX_LINE_BYTES * 4 {
                                    p.push_str(&line);
                                }
                            }
                            continue;
                        }
                        if line.trim().is_empty() {
                            continue;
                        }
                        if let Some(done) = pending.replace(line) {
                            return Step::Text(done);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Done,
                    Err(e) => return Step::Failed(format!("read {}: {e}", self.path.display())),
                }
            },
        }
    }

    fn accept(&mut self, text: &str, batch: &mut KmsgBatch) {
        let mut record = match parse_record(text.trim_end_matches('\n')) {
            Ok(r) => r,
            Err(e) => {
                batch.malformed += 1;
                tracing::trace!(error = %e, "skipping a kernel log record that does not parse");
                return;
            }
        };
        if let Some(last) = self.last_seq {
            if record.seq <= last {
                // Already returned (a reopen re-reads from the start).
                return;
            }
            batch.dropped += record.seq - last - 1;
        }
        self.last_seq = Some(record.seq);
        if record.usec < self.cutoff_usec.unwrap_or(0) {
            batch.skipped_old += 1;
            return;
        }
        record.timestamp = self.clock.map(|c| c.wall_clock(record.usec));
        batch.records.push(std::sync::Arc::new(record));
    }
}

/// A duration in whole microseconds, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// `read_line` that never keeps more than [`MAX_LINE_BYTES`] of one line (the rest of an
/// overlong line is discarded), so a garbage file cannot grow memory without bound.
fn read_line_bounded(reader: &mut BufReader<File>, out: &mut String) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let (consumed, done) = {
            let available = reader.fill_buf()?;
            if available.is_empty() {
                return Ok(total);
            }
            let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (&available[..=i], true),
                None => (available, false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(out.len());
            let keep = &chunk[..chunk.len().min(room)];
            out.push_str(&String::from_utf8_lossy(keep));
            if done && keep.len() < chunk.len() {
                out.push('\n');
            }
            (chunk.len(), done)
        };
        reader.consume(consumed);
        total += consumed;
        if done {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmsg::{KmsgParseError, KmsgReader};

    // Kernel 6.18.44 (this VM), read from /dev/kmsg.
    const REAL_6_18: &str = "6,191,269498,-;acpi PNP0A08:00: _OSC: OS supports [ExtendedConfig ASPM ClockPM Segments MSI HPX-Type3]\n SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A08:00\n";

    #[test]
    fn parses_real_record_with_properties() {
        let r = parse_record(REAL_6_18).unwrap();
        assert_eq!(r.seq, 191);
        assert_eq!(r.usec, 269_498);
        assert_eq!(r.level, 6);
        assert_eq!(r.facility, 0);
        assert_eq!(
            r.message,
            "acpi PNP0A08:00: _OSC: OS supports [ExtendedConfig ASPM ClockPM Segments MSI HPX-Type3]"
        );
        assert_eq!(
            r.continuation,
            vec!["SUBSYSTEM=acpi", "DEVICE=+acpi:PNP0A08:00"]
        );
        assert_eq!(r.property("DEVICE"), Some("+acpi:PNP0A08:00"));
        assert_eq!(r.property("NOPE"), None);
    }

    #[test]
    fn parses_user_facility_and_escapes() {
        // Kernel 6.18.44: a record written by userspace (`echo "<6>..." > /dev/kmsg`).
        let r = parse_record("14,341,407790632,-;node-doctor-probe: hello").unwrap();
        assert_eq!((r.level, r.facility, r.seq), (6, 1, 341));
        // Kernel 6.18.44: a tab escaped as \x09.
        let r = parse_record("6,89,220602,-;rcu: \\x09RCU restricting CPUs").unwrap();
        assert_eq!(r.message, "rcu: \tRCU restricting CPUs");
        // A literal backslash is escaped as \x5c; a lone "\x" is left as is.
        let r = parse_record("6,1,2,-;a\\x5cb \\xzz \\x").unwrap();
        assert_eq!(r.message, "a\\b \\xzz \\x");
    }

    #[test]
    fn parses_older_kernel_header_forms() {
        // Kernel 3.10 (CentOS 7), the handbook's era: same header, 'c' continuation flag.
        let r = parse_record(
            "4,2817,5012345678,c;runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0",
        )
        .unwrap();
        assert_eq!((r.level, r.seq, r.usec), (4, 2817, 5_012_345_678));
        assert!(r
            .message
            .starts_with("runc:[1:CHILD]: page allocation failure"));
        assert!(r.fragment, "3.10 marks a first fragment 'c'");
        // Kernel 5.10+ with CONFIG_PRINTK_CALLER adds a fifth header field.
        let r = parse_record("6,1000,123,-,caller=T1;hello").unwrap();
        assert_eq!((r.seq, r.message.as_str()), (1000, "hello"));
        assert!(!r.fragment);
        // Kernel 4.9+: the rest of an `oom-kill:` summary that another CPU's message cut off,
        // stored as its own record with flag 'c' at the default level 4 (KERN_CONT).
        let r = parse_record("4,7593,9479996125,c;,oom_memcg=/kubepods/burstable/pod1,task_memcg=/kubepods/burstable/pod1/c1,task=java,pid=42,uid=0").unwrap();
        assert!(r.fragment);
        assert!(r.message.starts_with(",oom_memcg="));
        // Kernel 3.10: '+' marks the following fragments of a line.
        assert!(parse_record("4,2818,5012345679,+;more").unwrap().fragment);
        // A ';' inside the message belongs to the message.
        let r = parse_record("6,1,2,-;a;b").unwrap();
        assert_eq!(r.message, "a;b");
    }

    #[test]
    fn rejects_malformed_records() {
        assert_eq!(
            parse_record("no separator"),
            Err(KmsgParseError::NoSeparator)
        );
        assert!(matches!(
            parse_record("6,1;x"),
            Err(KmsgParseError::ShortHeader(_))
        ));
        assert!(matches!(
            parse_record("6,x,3,-;m"),
            Err(KmsgParseError::BadNumber { field: "seq", .. })
        ));
        assert!(parse_record("").is_err());
    }

    /// A fake root with `proc/uptime` and `dev/kmsg` as a regular file.
    fn fake_root(uptime_secs: u64, kmsg: &str) -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::create_dir_all(t.path().join("dev")).unwrap();
        std::fs::write(
            t.path().join("proc/uptime"),
            format!("{uptime_secs}.00 1.00\n"),
        )
        .unwrap();
        std::fs::write(t.path().join("dev/kmsg"), kmsg).unwrap();
        let h = HostPaths::new(t.path());
        (t, h)
    }

    fn append(h: &HostPaths, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(h.join("/dev/kmsg"))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn seqs(b: &KmsgBatch) -> Vec<u64> {
        b.records.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn reader_skips_records_older_than_lookback_and_resumes() {
        // Uptime 2 h; lookback 1 h: the record at 10 min after boot is too old.
        let (_t, h) = fake_root(
            7200,
            "6,1,600000000,-;old\n6,2,3700000000,-;recent\n SUBSYSTEM=x\n6,3,7100000000,-;newest\n",
        );
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        let b = r.read_new();
        assert_eq!(b.status, Status::Ok);
        assert_eq!(seqs(&b), vec![2, 3]);
        assert_eq!(b.skipped_old, 1);
        assert_eq!(b.records[0].continuation, vec!["SUBSYSTEM=x"]);
        // Dated by the boot clock the reader took: the staged uptime, and the record 7,100 s
        // after that boot, 100 s before the clock was read.
        let clock = r.clock().unwrap();
        assert_eq!(clock.uptime, Duration::from_secs(7200));
        assert_eq!(
            b.records[1].timestamp,
            Some(clock.boot + Duration::from_secs(7100))
        );
        assert_eq!(clock.age(b.records[1].usec), Duration::from_secs(100));
        // Nothing new: nothing returned, not even again.
        assert!(r.read_new().records.is_empty());
        // Appended records (one partial) come next; the partial one waits for its newline.
        append(&h, "6,4,7150000000,-;four\n6,5,7160000000,-;fi");
        assert_eq!(seqs(&r.read_new()), vec![4]);
        append(&h, "ve\n");
        let b = r.read_new();
        assert_eq!(seqs(&b), vec![5]);
        assert_eq!(b.records[0].message, "five");
        assert_eq!(r.records_total(), 4);
    }

    #[test]
    fn reader_counts_sequence_gaps_as_dropped() {
        let (_t, h) = fake_root(
            100,
            "6,10,1,-;a\n6,11,2,-;b\n6,15,3,-;c\ngarbage\n6,16,4,-;d\n",
        );
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        let b = r.read_new();
        assert_eq!(seqs(&b), vec![10, 11, 15, 16]);
        assert_eq!(b.dropped, 3);
        assert_eq!(b.malformed, 1);
        let m = r.metrics("memory");
        assert_eq!(m[0].name, "node_doctor_kmsg_records_total");
        assert_eq!(m[0].value, 4.0);
        assert_eq!(m[1].value, 3.0);
        assert_eq!(
            m[1].labels,
            vec![("collector".to_string(), "memory".to_string())]
        );
    }

    #[test]
    fn reader_stops_at_record_budget_and_continues() {
        let text: String = (1..=25).map(|i| format!("6,{i},{i},-;m{i}\n")).collect();
        let (_t, h) = fake_root(100, &text);
        let cfg = KmsgConfig {
            max_records_per_cycle: 10,
            ..KmsgConfig::default()
        };
        let mut r = KmsgReader::alone(&h, cfg);
        let b1 = r.read_new();
        assert!(b1.truncated_by_budget);
        assert_eq!(seqs(&b1), (1..=10).collect::<Vec<_>>());
        let b2 = r.read_new();
        assert_eq!(seqs(&b2), (11..=20).collect::<Vec<_>>());
        let b3 = r.read_new();
        assert!(!b3.truncated_by_budget);
        assert_eq!(seqs(&b3), (21..=25).collect::<Vec<_>>());
        assert_eq!(b1.dropped + b2.dropped + b3.dropped, 0);
    }

    #[test]
    fn reader_without_uptime_reads_everything_held() {
        let (t, h) = fake_root(100, "6,1,1,-;a\n");
        std::fs::remove_file(t.path().join("proc/uptime")).unwrap();
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        let b = r.read_new();
        assert_eq!(seqs(&b), vec![1]);
        assert_eq!(b.records[0].timestamp, None);
    }

    #[test]
    fn missing_kmsg_is_degraded_with_reason() {
        let (t, h) = fake_root(100, "");
        std::fs::remove_file(t.path().join("dev/kmsg")).unwrap();
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        let b = r.read_new();
        match &b.status {
            Status::Degraded(m) => assert!(m.contains("does not exist"), "{m}"),
            s => panic!("expected degraded, got {s:?}"),
        }
        // Appears later: picked up on the next call.
        std::fs::write(t.path().join("dev/kmsg"), "6,1,1,-;a\n").unwrap();
        let b = r.read_new();
        assert_eq!((b.status.clone(), seqs(&b)), (Status::Ok, vec![1]));
    }

    #[test]
    fn rewritten_shorter_file_is_read_again_without_repeats() {
        let (t, h) = fake_root(100, "6,1,1,-;a\n6,2,2,-;b\n6,3,3,-;c\n");
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        assert_eq!(seqs(&r.read_new()), vec![1, 2, 3]);
        // Rewritten (shorter): old records are not returned again, new ones are.
        std::fs::write(t.path().join("dev/kmsg"), "6,3,3,-;c\n6,4,4,-;d\n").unwrap();
        assert_eq!(seqs(&r.read_new()), vec![4]);
    }

    #[test]
    fn overlong_lines_are_cut() {
        let long = "x".repeat(MAX_LINE_BYTES * 3);
        let (_t, h) = fake_root(100, &format!("6,1,1,-;{long}\n6,2,2,-;b\n"));
        let mut r = KmsgReader::alone(&h, KmsgConfig::default());
        let b = r.read_new();
        assert_eq!(seqs(&b), vec![1, 2]);
        assert!(b.records[0].message.len() < MAX_LINE_BYTES);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = parse_record(&s);
        }

        #[test]
        fn parse_never_panics_on_record_like_text(
            prio in "[0-9x]{0,4}", seq in "[0-9]{0,22}", usec in "[0-9-]{0,12}",
            msg in "(\\\\x?[0-9a-fA-F]{0,2}|[^\\\\]{0,8}){0,8}", cont in "( [A-Z]+=.{0,8}\n){0,3}"
        ) {
            let text = format!("{prio},{seq},{usec},-;{msg}\n{cont}");
            if let Ok(r) = parse_record(&text) {
                proptest::prop_assert_eq!(r.level as u32, prio.parse::<u32>().unwrap() & 7);
            }
        }

        /// Records as `/dev/kmsg` prints them (`info_print_ext_header()`: `%u,%llu,%llu,%c`
        /// with an optional `,caller=T%u`; the body with every byte below space, from 127 up
        /// and `\\` as `\\x%02x`; dictionary lines after a space): every field reads back, the
        /// message decoded to the text it was built from, continuation lines in order.
        #[test]
        fn parses_what_the_kernel_prints(
            facility in 0u32..256, level in 0u8..8, seq in proptest::num::u64::ANY,
            usec in proptest::num::u64::ANY,
            flag in proptest::sample::select(vec!['-', 'c', '+']),
            caller in proptest::option::of(("[TC]", 0u32..4_194_304)),
            message in "[^\n]{0,40}|[a-z \\\\\t\u{1b}\u{7f}é]{0,40}",
            dict in proptest::collection::vec("(SUBSYSTEM=[a-z]{1,8}|DEVICE=[+a-z:0-9]{1,12})", 0..3),
        ) {
            let prio = (facility << 3) | u32::from(level);
            let caller = caller.map_or(String::new(), |(k, id)| format!(",caller={k}{id}"));
            let mut text = format!("{prio},{seq},{usec},{flag}{caller};");
            for b in message.bytes() {
                if !(b' '..127).contains(&b) || b == b'\\' {
                    text += &format!("\\x{b:02x}");
                } else {
                    text.push(char::from(b));
                }
            }
            text.push('\n');
            for d in &dict {
                text += &format!(" {d}\n");
            }
            let want = crate::kmsg::Record {
                seq, usec, level, facility, message, continuation: dict,
                fragment: flag != '-', timestamp: None,
            };
            proptest::prop_assert_eq!(parse_record(&text), Ok(want));
        }
    }
}
