//! kube-proxy's own words: an incremental scanner of kube-proxy's container logs for the error
//! messages of the handbook's Kube-Proxy chapter (002, lines 1009–1336).
//!
//! Sources (all under the host root):
//! - CRI logs `/var/log/pods/kube-system_kube-proxy-*/<container>/*.log`, lines
//!   `<RFC3339 time> stdout|stderr F|P <message>`; with dockershim these files are symlinks to
//!   docker json-file logs, which is why every line is parsed in either format;
//! - docker json-file logs `/var/lib/docker/containers/<id>/<id>-json.log` of a container whose
//!   `config.v2.json` labels it `io.kubernetes.container.name=kube-proxy`, lines
//!   `{"log":"...\n","stream":"stderr","time":"..."}`.
//!
//! Each file is remembered by its resolved path with its inode and offset; a new inode or a
//! size below the offset is a rotation and restarts at 0. A file seen for the first time is read
//! from its last `tail_bytes`. At most `max_bytes` are read per scan over all files.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};
use crate::ReadError;

/// At most this many timestamps are remembered per kind (for the recent count).
const MAX_RECENT: usize = 4096;
/// At most this many log files are followed.
const MAX_FILES: usize = 64;
/// Bytes of a matching message kept as an example.
const EXAMPLE_BYTES: usize = 300;

/// The handbook's kube-proxy messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogKind {
    /// exit status 4, "Another app is currently holding the xtables lock. Perhaps you want to
    /// use the -w option?": iptables-restore too old to wait for the lock.
    LockNoWait,
    /// exit status 4, "... Stopped waiting after 5s.": another component held the lock longer
    /// than kube-proxy waits.
    LockTimeout,
    /// exit status 1, "iptables-restore: line N failed": a concurrent writer without the lock.
    RestoreLineFailed,
    /// exit status 2, "Couldn't load target `KUBE-MARK-DROP'": legacy kube-proxy on an nft OS.
    MarkDropMissing,
    /// "Stream error http2.StreamError{...} when reading response body": old http2 client bug.
    ApiserverStreamError,
    /// "invalid memory address or nil pointer dereference" at first start.
    PanicNilPointer,
    /// "Observed a panic: "slice bounds out of range"": repeating panic in iptables-save parsing.
    PanicSliceBounds,
}

impl LogKind {
    pub const ALL: [LogKind; 7] = [
        LogKind::LockNoWait,
        LogKind::LockTimeout,
        LogKind::RestoreLineFailed,
        LogKind::MarkDropMissing,
        LogKind::ApiserverStreamError,
        LogKind::PanicNilPointer,
        LogKind::PanicSliceBounds,
    ];

    /// The `kind` label of `node_doctor_iptables_kube_proxy_errors_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::LockNoWait => "lock_no_wait",
            LogKind::LockTimeout => "lock_timeout",
            LogKind::RestoreLineFailed => "restore_line_failed",
            LogKind::MarkDropMissing => "kube_mark_drop_missing",
            LogKind::ApiserverStreamError => "apiserver_stream_error",
            LogKind::PanicNilPointer => "panic_nil_pointer",
            LogKind::PanicSliceBounds => "panic_slice_bounds",
        }
    }

    /// A `grep -E` pattern that finds this message in a log file.
    pub fn grep_pattern(self) -> &'static str {
        match self {
            LogKind::LockNoWait => "holding the xtables lock. Perhaps you want to use the -w",
            LogKind::LockTimeout => "holding the xtables lock. Stopped waiting",
            LogKind::RestoreLineFailed => "iptables-restore: line [0-9]+ failed",
            LogKind::MarkDropMissing => "load target .KUBE-MARK-DROP",
            LogKind::ApiserverStreamError => "http2.StreamError",
            LogKind::PanicNilPointer => "nil pointer dereference",
            LogKind::PanicSliceBounds => "slice bounds out of range",
        }
    }
}

/// Recognises a handbook message in one log message.
pub fn classify(msg: &str) -> Option<LogKind> {
    if msg.contains("holding the xtables lock") {
        if msg.contains("Stopped waiting") {
            return Some(LogKind::LockTimeout);
        }
        return Some(LogKind::LockNoWait);
    }
    if let Some(i) = msg.find("iptables-restore: line ") {
        let rest = &msg[i + "iptables-restore: line ".len()..];
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && rest[digits..].trim_start().starts_with("failed") {
            return Some(LogKind::RestoreLineFailed);
        }
    }
    if msg.contains("Couldn't load target") && msg.contains("KUBE-MARK-DROP") {
        return Some(LogKind::MarkDropMissing);
    }
    if msg.contains("http2.StreamError") {
        return Some(LogKind::ApiserverStreamError);
    }
    if msg.contains("invalid memory address or nil pointer dereference") {
        return Some(LogKind::PanicNilPointer);
    }
    if msg.contains("slice bounds out of range") {
        return Some(LogKind::PanicSliceBounds);
    }
    None
}

/// One line of a container log, in either format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Unix seconds of the line's timestamp, when it has a readable one.
    pub time: Option<i64>,
    /// The timestamp text as written.
    pub time_text: String,
    pub message: String,
}

/// Parses a CRI line (`2024-05-01T10:00:00.123456789+08:00 stderr F msg`) or a docker
/// json-file line. Anything else is taken whole as the message, without a time.
pub fn parse_line(line: &str) -> LogLine {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.starts_with('{') {
        #[derive(serde::Deserialize)]
        struct Json {
            #[serde(default)]
            log: String,
            #[serde(default)]
            time: String,
        }
        if let Ok(j) = serde_json::from_str::<Json>(line) {
            return LogLine {
                time: parse_rfc3339(&j.time),
                time_text: j.time,
                message: j.log.trim_end_matches('\n').to_string(),
            };
        }
    }
    let mut parts = line.splitn(4, ' ');
    if let (Some(ts), Some(stream), Some(tag), Some(msg)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    {
        if (stream == "stdout" || stream == "stderr") && (tag == "F" || tag == "P") {
            return LogLine {
                time: parse_rfc3339(ts),
                time_text: ts.to_string(),
                message: msg.to_string(),
            };
        }
    }
    LogLine {
        time: None,
        time_text: String::new(),
        message: line.to_string(),
    }
}

/// Parses an RFC 3339 timestamp (`2024-05-01T10:00:00.5Z`, `...+08:00`) into Unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if !matches!(b.get(10), Some(b'T') | Some(b't') | Some(b' ')) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(|c| c.is_ascii_digit()).count();
        rest = &frac[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    Some(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// What is known about one kind of message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KindStats {
    /// Matches since the agent started (including the initial tail).
    pub total: u64,
    /// Unix seconds of the recent matches (bounded).
    pub recent: VecDeque<i64>,
    /// The latest match: its timestamp text, message (cut) and host-side log path.
    pub last_time: String,
    pub last_message: String,
    pub last_file: String,
}

impl KindStats {
    /// Matches at or after `since` (Unix seconds).
    pub fn recent_count(&self, since: i64) -> usize {
        self.recent.iter().filter(|t| **t >= since).count()
    }
}

#[derive(Debug, Clone)]
struct FileState {
    inode: u64,
    offset: u64,
}

/// The result of one scan.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScanReport {
    /// Host-side paths of the log files followed.
    pub files: Vec<String>,
    pub bytes_read: u64,
    /// Files that could not be read, with the reason.
    pub errors: Vec<String>,
}

/// Incremental scanner state: per-file offsets and per-kind statistics.
#[derive(Debug, Default)]
pub struct LogScanner {
    files: HashMap<PathBuf, FileState>,
    docker_kube_proxy: HashMap<String, bool>,
    pub stats: BTreeMap<LogKind, KindStats>,
}

/// Where to look and how much to read.
#[derive(Debug, Clone)]
pub struct ScanLimits {
    pub pod_log_dir: PathBuf,
    pub docker_dir: PathBuf,
    /// Bytes read from the end of a file seen for the first time.
    pub tail_bytes: u64,
    /// Bytes read per scan over all files.
    pub max_bytes: u64,
    /// Matches older than this many seconds are dropped from `recent`.
    pub recent_seconds: i64,
}

impl LogScanner {
    pub fn new() -> LogScanner {
        LogScanner::default()
    }

    /// Finds kube-proxy's log files: `(host-side path, agent-side resolved path)`.
    pub fn discover(&mut self, host: &HostPaths, limits: &ScanLimits) -> Vec<(String, PathBuf)> {
        let mut out: Vec<(String, PathBuf)> = Vec::new();
        let pods = host.resolve(&limits.pod_log_dir);
        for pod in sorted_dir(&pods) {
            let name = pod.file_name().map(|n| n.to_string_lossy().into_owned());
            let meta = name.as_deref().and_then(crate::pods::parse_pod_log_dir);
            if !meta
                .is_some_and(|p| p.namespace == "kube-system" && p.name.starts_with("kube-proxy-"))
            {
                continue;
            }
            for container in sorted_dir(&pod) {
                for file in sorted_dir(&container) {
                    if file.extension().is_some_and(|e| e == "log") {
                        let host_path = host
                            .host_side(&file)
                            .unwrap_or_else(|| file.clone())
                            .to_string_lossy()
                            .into_owned();
                        out.push((host_path.clone(), host.resolve(&host_path)));
                    }
                }
            }
        }
        let containers = host.resolve(limits.docker_dir.join("containers"));
        let mut live = HashSet::new();
        for dir in sorted_dir(&containers) {
            let Some(id) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            live.insert(id.clone());
            let is_kp = *self
                .docker_kube_proxy
                .entry(id.clone())
                .or_insert_with(|| docker_is_kube_proxy(&dir));
            if is_kp {
                let file = dir.join(format!("{id}-json.log"));
                let host_path = host
                    .host_side(&file)
                    .unwrap_or_else(|| file.clone())
                    .to_string_lossy()
                    .into_owned();
                out.push((host_path, file));
            }
        }
        self.docker_kube_proxy.retain(|id, _| live.contains(id));
        // The same file reached twice (a dockershim symlink) is read once.
        let mut seen = HashSet::new();
        out.retain(|(_, p)| seen.insert(p.clone()));
        out.truncate(MAX_FILES);
        out
    }

    /// Reads what is new in every kube-proxy log and counts the handbook's messages.
    /// `now` is Unix seconds.
    pub fn scan(&mut self, host: &HostPaths, limits: &ScanLimits, now: i64) -> ScanReport {
        let files = self.discover(host, limits);
        let mut report = ScanReport::default();
        let mut budget = limits.max_bytes;
        let live: HashSet<PathBuf> = files.iter().map(|(_, p)| p.clone()).collect();
        self.files.retain(|p, _| live.contains(p));
        for (host_path, path) in files {
            report.files.push(host_path.clone());
            if budget == 0 {
                continue;
            }
            match self.read_new(&path, limits.tail_bytes, budget) {
                Ok(text) => {
                    budget = budget.saturating_sub(text.len() as u64);
                    report.bytes_read += text.len() as u64;
                    self.count(&text, &host_path, now);
                }
                Err(e) => report.errors.push(format!("{host_path}: {e}")),
            }
        }
        let since = now - limits.recent_seconds;
        for s in self.stats.values_mut() {
            while s.recent.front().is_some_and(|t| *t < since) {
                s.recent.pop_front();
            }
        }
        report
    }

    /// Returns the complete new lines of one file and advances its offset past them: at most
    /// `tail` bytes of a file seen for the first time and `budget` bytes in all. The file is
    /// opened without blocking and must be a regular file (a FIFO there is refused).
    fn read_new(&mut self, path: &Path, tail: u64, budget: u64) -> Result<String, ReadError> {
        let (mut f, md) = hostfs::open_regular(path)?;
        self.read_from(&mut f, &md, path, tail, budget)
            .map_err(|e| ReadError::io(path, e))
    }

    fn read_from(
        &mut self,
        f: &mut std::fs::File,
        md: &std::fs::Metadata,
        path: &Path,
        tail: u64,
        budget: u64,
    ) -> std::io::Result<String> {
        use std::os::unix::fs::MetadataExt;
        let size = md.len();
        let state = self.files.get(path).cloned();
        let (start, skip_partial) = match state {
            Some(s) if s.inode == md.ino() && s.offset <= size => (s.offset, false),
            // Rotated (new inode) or truncated: read the new file from its start.
            Some(_) => (0, false),
            // First sight: only the tail, from the first full line.
            None => {
                let start = size.saturating_sub(tail);
                (start, start > 0)
            }
        };
        let want = (size - start).min(budget);
        f.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        f.by_ref().take(want).read_to_end(&mut buf)?;
        // Consume only complete lines; a partial last line is read next time, unless one line
        // alone fills the whole read, which is then consumed to make progress.
        let mut consumed = match buf.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if want == budget && want > 0 => buf.len(),
            None => 0,
        };
        let mut from = 0;
        if skip_partial {
            from = buf
                .iter()
                .position(|b| *b == b'\n')
                .map(|i| i + 1)
                .unwrap_or(consumed)
                .min(consumed);
        }
        consumed = consumed.max(from);
        self.files.insert(
            path.to_path_buf(),
            FileState {
                inode: md.ino(),
                offset: start + consumed as u64,
            },
        );
        Ok(String::from_utf8_lossy(&buf[from..consumed]).into_owned())
    }

    /// Counts the handbook's messages in a chunk of complete lines.
    pub fn count(&mut self, text: &str, host_path: &str, now: i64) {
        for raw in text.lines() {
            // Cheap pre-filter before JSON decoding.
            if !(raw.contains("xtables")
                || raw.contains("iptables-restore")
                || raw.contains("KUBE-MARK-DROP")
                || raw.contains("StreamError")
                || raw.contains("panic")
                || raw.contains("nil pointer")
                || raw.contains("slice bounds"))
            {
                continue;
            }
            let line = parse_line(raw);
            let Some(kind) = classify(&line.message) else {
                continue;
            };
            let s = self.stats.entry(kind).or_default();
            s.total += 1;
            s.recent.push_back(line.time.unwrap_or(now));
            if s.recent.len() > MAX_RECENT {
                s.recent.pop_front();
            }
            s.last_time = line.time_text;
            s.last_message = crate::bounded::prefix_owned(&line.message, EXAMPLE_BYTES);
            s.last_file = host_path.to_string();
        }
    }
}

/// Directory entries sorted by name, at most [`entries::PODS`] (empty when unreadable).
fn sorted_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match hostfs::dir_entries(dir, entries::PODS) {
        Ok(rd) => rd.map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// True when a docker container's `config.v2.json` labels it as kube-proxy.
fn docker_is_kube_proxy(container_dir: &Path) -> bool {
    // config.v2.json is a few KB; refuse anything huge.
    crate::config::docker::read_pod_labels_limited(container_dir, cap::CONFIG as u64)
        .and_then(|l| l.container)
        .is_some_and(|n| n == "kube-proxy")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_handbook_message() {
        let cases = [
            ("Failed to execute iptables-restore: exit status 4 (Another app is currently holding the xtables lock. Perhaps you want to use the -w option?)", LogKind::LockNoWait),
            ("Failed to ensure that filter chain KUBE-SERVICES exists: error creating chain \"KUBE-EXTERNAL-SERVICES\": exit status 4: Another app is currently holding the xtables lock. Stopped waiting after 5s.", LogKind::LockTimeout),
            ("Failed to execute iptables-restore: exit status 1 (iptables-restore: line 7 failed)", LogKind::RestoreLineFailed),
            ("Failed to execute iptables-restore: exit status 2 (iptables-restore v1.8.4 (legacy): Couldn't load target `KUBE-MARK-DROP':No such file or directory", LogKind::MarkDropMissing),
            ("Failed to list *core.Endpoints: Stream error http2.StreamError{StreamID:0xea1, Code:0x2, Cause:error(nil)} when reading response body, may be caused by closed connection. Please retry.", LogKind::ApiserverStreamError),
            ("panic: runtime error: invalid memory address or nil pointer dereference", LogKind::PanicNilPointer),
            ("Observed a panic: \"slice bounds out of range\" (runtime error: slice bounds out of range)", LogKind::PanicSliceBounds),
        ];
        for (msg, kind) in cases {
            assert_eq!(classify(msg), Some(kind), "{msg}");
        }
        assert_eq!(classify("Restoring iptables rules: 1025 bytes"), None);
        assert_eq!(classify("iptables-restore: line failed"), None);
    }

    #[test]
    fn parses_cri_and_docker_lines() {
        let cri = parse_line("2024-05-01T10:00:00.123456789+08:00 stderr F E0501 10:00:00.1 1 proxier.go:1234] boom\n");
        assert_eq!(cri.time, Some(1714528800));
        assert_eq!(cri.message, "E0501 10:00:00.1 1 proxier.go:1234] boom");
        let docker = parse_line(
            r#"{"log":"E0501 boom \"x\"\n","stream":"stderr","time":"2024-05-01T02:00:00.5Z"}"#,
        );
        assert_eq!(docker.time, Some(1714528800));
        assert_eq!(docker.message, "E0501 boom \"x\"");
        let plain = parse_line("just text");
        assert_eq!((plain.time, plain.message.as_str()), (None, "just text"));
    }

    #[test]
    fn rfc3339_edges() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951868800));
        assert_eq!(parse_rfc3339("2024-02-29T23:59:59-01:00"), Some(1709254799));
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2024-01-01T00:00:00",
            "x024-01-01T00:00:00Z",
            "2024-01-01T00:00:00+0800",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn line_parsing_never_panics(s in ".*") {
            let l = parse_line(&s);
            let _ = classify(&l.message);
            let _ = parse_rfc3339(&s);
        }
        #[test]
        fn timestamps_never_panic(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,9})?(Z|[+-][0-9]{2}:?[0-9]{0,2})?") {
            let _ = parse_rfc3339(&s);
        }
        /// Lines as the runtimes write them: the CRI format (`RFC3339Nano stream P|F msg`,
        /// containerd and CRI-O, local offset) and docker's json-file (serde_json writes the
        /// line, `log` ending in a newline, `time` in UTC): time, time text and message read
        /// back, whatever characters the message holds (a trailing space included).
        #[test]
        fn parses_what_the_runtimes_write(
            t in 0i64..4_102_444_800, frac in "(\\.[0-9]{1,9})?", zone in -12i8..=14,
            stream in "stdout|stderr", tag in "F|P", message in "\\PC{0,60} ?", docker in proptest::bool::ANY,
        ) {
            let ts = crate::testgen::rfc3339(t, &frac, if docker { 0 } else { zone }, docker);
            let line = if docker {
                serde_json::json!({ "log": format!("{message}\n"), "stream": stream, "time": ts }).to_string()
            } else {
                format!("{ts} {stream} {tag} {message}")
            };
            let want = LogLine { time: Some(t), time_text: ts.clone(), message };
            proptest::prop_assert_eq!(parse_line(&format!("{line}\n")), want);
        }
    }
}
