//! The previous boots' crash records: what pstore kept (`/sys/fs/pstore`: `dmesg-efi-<id>`,
//! `dmesg-erst-<id>`, `dmesg-ramoops-<n>`, `console-ramoops-<n>`; `Documentation/admin-guide/
//! ramoops.rst`, `pstore-blk.rst`) and kdump's `/var/crash/<dir>/vmcore-dmesg.txt`
//! (`Documentation/admin-guide/kdump/kdump.rst`). Each file's head is read (capped), and
//! [`scan`] finds the line that says how the kernel died:
//!
//! ```text
//! Kernel panic - not syncing: Fatal machine check
//! Oops: 0000 [#1] SMP PTI                                   (4.x+: "Oops: general protection fault, ...")
//! BUG: unable to handle kernel NULL pointer dereference at 0000000000000010
//! ```
//!
//! pstore's dmesg records carry a header (`Panic#1 Part1`, `Oops#1 Part1`) and each line a
//! `<N>[ time]` prefix; both are tolerated.

use std::path::Path;
use std::time::SystemTime;

use crate::host::HostPaths;
use crate::hostfs;

/// Bytes read from a pstore record (EFI variables hold ~1 KiB per part; ramoops records are
/// `record_size`, 4-64 KiB by default).
const PSTORE_CAP: usize = 256 << 10;
/// Bytes read from a `vmcore-dmesg.txt` (the whole log buffer: `log_buf_len`, 128 KiB - 4 MiB).
const KDUMP_CAP: usize = 4 << 20;
/// Entries listed in `/sys/fs/pstore` and `/var/crash`.
const MAX_ENTRIES: usize = 256;
/// Longest crash line kept.
const MAX_LINE: usize = 256;

/// How the kernel died, worst last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CrashKind {
    /// `BUG:` (the kernel hit a BUG() or a bad access and went on or killed the task).
    Bug,
    /// `Oops`.
    Oops,
    /// `Kernel panic - not syncing:` (the node stopped).
    Panic,
}

impl CrashKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CrashKind::Bug => "bug",
            CrashKind::Oops => "oops",
            CrashKind::Panic => "panic",
        }
    }
}

/// One crash record found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashRecord {
    /// The host path of the file (`/sys/fs/pstore/dmesg-efi-170…`).
    pub file: String,
    /// `pstore` or `kdump`.
    pub source: &'static str,
    pub kind: CrashKind,
    /// The line that said so, without its log prefix, control characters left out, capped.
    pub line: String,
    /// Seconds since the file was written (its mtime), when the clock allows.
    pub age_seconds: Option<u64>,
}

/// The worst crash line of a record's text, and that line.
pub fn scan(text: &str) -> Option<(CrashKind, String)> {
    let mut best: Option<(CrashKind, String)> = None;
    for raw in text.lines() {
        let line = strip_prefix(raw);
        let kind = if line.starts_with("Kernel panic - not syncing:") {
            CrashKind::Panic
        } else if line.starts_with("Oops:") || line.starts_with("Oops ") {
            CrashKind::Oops
        } else if line.starts_with("BUG: ") {
            CrashKind::Bug
        } else {
            continue;
        };
        if best.as_ref().is_none_or(|(k, _)| kind > *k) {
            let clean: String = line
                .chars()
                .filter(|c| !c.is_control() && !crate::sanitize::is_unsafe(*c))
                .collect();
            best = Some((kind, crate::bounded::prefix_owned(&clean, MAX_LINE)));
        }
    }
    best
}

/// `<0>[ 1234.567890] text` or `[ 1234.567890] text` -> `text`.
fn strip_prefix(line: &str) -> &str {
    let mut l = line.trim_start();
    if l.starts_with('<') {
        if let Some(end) = l.find('>') {
            l = &l[end + 1..];
        }
    }
    if l.starts_with('[') {
        if let Some(end) = l.find(']') {
            l = &l[end + 1..];
        }
    }
    l.trim()
}

fn age(meta: &std::fs::Metadata, now: SystemTime) -> Option<u64> {
    let m = meta.modified().ok()?;
    Some(now.duration_since(m).map(|d| d.as_secs()).unwrap_or(0))
}

fn record(
    host: &HostPaths,
    path: &Path,
    cap: usize,
    source: &'static str,
    now: SystemTime,
) -> Option<CrashRecord> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let prefix = hostfs::read_prefix(path, cap).ok()?;
    let text = String::from_utf8_lossy(&prefix.bytes);
    let (kind, line) = scan(&text)?;
    Some(CrashRecord {
        file: host
            .host_side(path)
            .unwrap_or_else(|| path.to_path_buf())
            .display()
            .to_string(),
        source,
        kind,
        line,
        age_seconds: age(&meta, now),
    })
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match hostfs::dir_entries(dir, MAX_ENTRIES) {
        Ok(it) => it
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Every crash record under `<root>/sys/fs/pstore` and `<root>/var/crash/*/vmcore-dmesg.txt`.
pub fn read(host: &HostPaths, now: SystemTime) -> Vec<CrashRecord> {
    let mut out = Vec::new();
    let pstore = host.sys_file("fs/pstore");
    for n in listing(&pstore) {
        if n.starts_with("dmesg-") || n.starts_with("console-") {
            out.extend(record(host, &pstore.join(&n), PSTORE_CAP, "pstore", now));
        }
    }
    let crash = host.join("/var/crash");
    for n in listing(&crash) {
        let dir = crash.join(&n);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            out.extend(record(
                host,
                &dir.join("vmcore-dmesg.txt"),
                KDUMP_CAP,
                "kdump",
                now,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_worst_line() {
        let efi = "Panic#1 Part1\n<4>[ 8120.112233] mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: be00000000800400\n<0>[ 8120.112301] Kernel panic - not syncing: Fatal machine check\n";
        assert_eq!(
            scan(efi),
            Some((
                CrashKind::Panic,
                "Kernel panic - not syncing: Fatal machine check".into()
            ))
        );
        let oops = "Oops#1 Part1\n<1>[  512.000001] BUG: unable to handle kernel NULL pointer dereference at 0000000000000010\n<4>[  512.000100] Oops: 0000 [#1] SMP PTI\n";
        assert_eq!(scan(oops).map(|(k, _)| k), Some(CrashKind::Oops));
        assert_eq!(
            scan("[ 1.0] BUG: soft lockup - CPU#0 stuck for 22s!").map(|(k, _)| k),
            Some(CrashKind::Bug)
        );
        assert_eq!(scan("nothing here\n"), None);
        assert_eq!(strip_prefix("<0>[ 1.0] x"), "x");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = scan(&s);
            let _ = strip_prefix(&s);
        }

        /// A pstore or kdump `dmesg` as the kernel writes it (`<level>[seconds] message`, or
        /// the bare message of a console log), crash lines among other lines: the scan gives
        /// the first line of the worst kind, as written.
        #[test]
        fn finds_the_worst_line_it_was_given(
            lines in proptest::collection::vec((
                proptest::option::of(proptest::sample::select(vec![CrashKind::Bug, CrashKind::Oops, CrashKind::Panic])),
                "[A-Za-z0-9][A-Za-z0-9 :#,_/.()-]{0,60}",
                "(<[0-7]>)?(\\[ *[0-9]{1,6}\\.[0-9]{6}\\] )?",
            ), 0..12),
        ) {
            let mut text = String::from("Panic#1 Part1\n");
            let mut want: Option<(CrashKind, String)> = None;
            for (kind, tail, prefix) in &lines {
                let message = match kind {
                    Some(CrashKind::Panic) => format!("Kernel panic - not syncing: {tail}"),
                    Some(CrashKind::Oops) => format!("Oops: {tail}"),
                    Some(CrashKind::Bug) => format!("BUG: {tail}"),
                    // Other lines of a crash dump: none starts with a marker.
                    None => format!("RIP: 0010:{tail}"),
                };
                text += &format!("{prefix}{message}\n");
                if let Some(k) = *kind {
                    if want.as_ref().is_none_or(|(w, _)| k > *w) {
                        want = Some((k, message.trim().to_string()));
                    }
                }
            }
            proptest::prop_assert_eq!(scan(&text), want, "{}", text);
        }
    }
}
