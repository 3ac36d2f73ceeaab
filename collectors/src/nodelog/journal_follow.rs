//! Following the system journal between cycles: its files under `<dir>/<machine-id>/` (and
//! directly under `<dir>`), each remembered by its file id (which a rotation's rename keeps)
//! with the entry array and index of the next entry to read.
//!
//! A file seen for the first time is read from the first entry of the lookback window (found
//! by a search over its entry arrays, not by reading what is older); a file whose last entry
//! is older than the window is only positioned at its end. Only `system*.journal` files are
//! read: kubelet and the runtimes are system services, and users' journals would only spend the
//! budget. Files named `*.journal~` (journald's copies of files it found unclean) are skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::journal::{Entry, JournalFile, Position, ReadStats};
use crate::host::HostPaths;
use crate::hostfs::{self, entries};

/// Journal files looked at per directory (journald keeps ~100 by default `SystemMaxFiles`).
const MAX_FILES: usize = 1024;

/// What one pass over the journal read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalReport {
    /// Host-side paths of the files read this cycle.
    pub files: Vec<String>,
    pub stats: ReadStats,
    /// Files that could not be read, with the reason.
    pub errors: Vec<String>,
    /// A budget ran out before every file was read to its end.
    pub behind: bool,
    /// Which file the entries appended to `out` came from: `(end, host path)`, the entries
    /// before index `end` (and after the previous span's end) being that file's.
    pub spans: Vec<(usize, String)>,
}

impl JournalReport {
    /// The host path of the file entry `index` of `out` came from.
    pub fn file_of(&self, index: usize) -> Option<&str> {
        self.spans
            .iter()
            .find(|(end, _)| index < *end)
            .map(|(_, p)| p.as_str())
    }
}

#[derive(Debug, Default)]
pub struct JournalFollower {
    positions: HashMap<[u8; 16], Position>,
}

/// A journal file found in a directory.
struct Found {
    host_path: String,
    path: PathBuf,
}

impl JournalFollower {
    pub fn new() -> JournalFollower {
        JournalFollower::default()
    }

    /// Files remembered (for tests and metrics).
    pub fn tracked(&self) -> usize {
        self.positions.len()
    }

    /// Reads new entries of every system journal file under `dirs` into `out`: entries at or
    /// after `since_usec` from files seen for the first time, everything new from known ones,
    /// at most `max_entries` and `max_bytes` in all.
    #[allow(clippy::too_many_arguments)]
    pub fn read_new(
        &mut self,
        host: &HostPaths,
        dirs: &[String],
        since_usec: u64,
        max_entries: usize,
        max_bytes: u64,
        keep: &dyn Fn(&Entry) -> bool,
        out: &mut Vec<Entry>,
    ) -> JournalReport {
        let mut report = JournalReport::default();
        let mut found = Vec::new();
        for d in dirs {
            discover(host, d, &mut found);
        }
        // Archived files (system@…) before the active one of a directory; the name of an
        // archived file carries its head sequence number and realtime in hex, so by name is
        // oldest first.
        found.sort_by(|a, b| {
            let active = |f: &Found| f.path.file_name().is_some_and(|n| n == "system.journal");
            (active(a), &a.path).cmp(&(active(b), &b.path))
        });
        let mut seen = Vec::new();
        for f in found {
            let used = report.stats.bytes_read;
            let examined = report.stats.entries as usize;
            if examined >= max_entries || used >= max_bytes {
                report.behind = true;
                break;
            }
            let (file, md) = match hostfs::open_regular(&f.path) {
                Ok(x) => x,
                Err(e) => {
                    report.errors.push(e.to_string());
                    continue;
                }
            };
            let mut jf = match JournalFile::open(&file, md.len()) {
                Ok(j) => j,
                Err(e) => {
                    report.errors.push(format!("{}: {e}", f.host_path));
                    continue;
                }
            };
            let id = jf.header.file_id;
            seen.push(id);
            let pos = match self.positions.get(&id) {
                Some(p) => Ok(*p),
                None if jf.header.tail_entry_realtime < since_usec => jf.seek_end(),
                None => jf.seek_realtime(since_usec),
            };
            let pos = match pos {
                Ok(p) => p,
                Err(e) => {
                    report.errors.push(format!("{}: {e}", f.host_path));
                    report.stats = add(report.stats, jf.stats);
                    continue;
                }
            };
            let (pos, err) =
                jf.read_forward_filtered(pos, max_entries - examined, max_bytes - used, keep, out);
            self.positions.insert(id, pos);
            if let Some(e) = err {
                report.errors.push(format!("{}: {e}", f.host_path));
            }
            report.stats = add(report.stats, jf.stats);
            report.spans.push((out.len(), f.host_path.clone()));
            report.files.push(f.host_path);
        }
        self.positions.retain(|id, _| seen.contains(id));
        report
    }
}

fn add(a: ReadStats, b: ReadStats) -> ReadStats {
    ReadStats {
        bytes_read: a.bytes_read + b.bytes_read,
        entries: a.entries + b.entries,
        undecodable_fields: a.undecodable_fields + b.undecodable_fields,
        oversized_fields: a.oversized_fields + b.oversized_fields,
    }
}

fn is_system_journal(name: &str) -> bool {
    name.starts_with("system") && name.ends_with(".journal")
}

fn is_machine_id(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The system journal files under one journal directory.
fn discover(host: &HostPaths, dir: &str, out: &mut Vec<Found>) {
    let root = host.resolve(dir);
    let mut dirs = vec![root.clone()];
    if let Ok(it) = hostfs::dir_entries(&root, entries::LOG_FILES) {
        let mut subs: Vec<PathBuf> = it
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| e.file_name().to_str().is_some_and(is_machine_id))
            .map(|e| e.path())
            .collect();
        subs.sort();
        dirs.extend(subs);
    }
    for d in dirs {
        let Ok(it) = hostfs::dir_entries(&d, MAX_FILES) else {
            continue;
        };
        for e in it {
            let Some(name) = e.file_name().to_str().map(String::from) else {
                continue;
            };
            if !is_system_journal(&name) || !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let path = e.path();
            let host_path = host
                .host_side(&path)
                .unwrap_or_else(|| path.clone())
                .to_string_lossy()
                .into_owned();
            out.push(Found { host_path, path });
        }
    }
}

/// For tests: a path's file name is a journal file this follower reads.
pub fn reads_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_system_journal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodelog::journal::tests::{fixture_compact_zstd, fixture_regular_plain};

    const BASE_USEC: u64 = 1_795_406_400 * 1_000_000;
    const MID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn first_sight_reads_the_window_then_only_what_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let host = HostPaths::new(dir.path());
        let jd = dir.path().join("var/log/journal").join(MID);
        std::fs::create_dir_all(&jd).unwrap();
        std::fs::write(jd.join("system.journal"), fixture_compact_zstd()).unwrap();
        // A user's journal and a damaged copy are not read.
        std::fs::write(jd.join("user-1000.journal"), fixture_regular_plain()).unwrap();
        std::fs::write(jd.join("system@0001.journal~"), b"junk").unwrap();
        let mut f = JournalFollower::new();
        let dirs = vec![
            "/var/log/journal".to_string(),
            "/run/log/journal".to_string(),
        ];
        let mut out = Vec::new();
        // Window from 300 s: entries 31..40.
        let r = f.read_new(
            &host,
            &dirs,
            BASE_USEC + 300_000_000,
            10_000,
            1 << 30,
            &|_| true,
            &mut out,
        );
        assert_eq!(r.errors, Vec::<String>::new());
        assert_eq!(
            r.files,
            vec![format!("/var/log/journal/{MID}/system.journal")]
        );
        assert_eq!(
            out.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
            (31..=40).collect::<Vec<_>>()
        );
        // Nothing new next time.
        out.clear();
        f.read_new(
            &host,
            &dirs,
            BASE_USEC + 300_000_000,
            10_000,
            1 << 30,
            &|_| true,
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(f.tracked(), 1);
        // Rotation: the file is renamed (same file id) and a new one appears: the renamed one
        // has nothing new; the new one is read from the window.
        std::fs::rename(jd.join("system.journal"), jd.join("system@abc-1-2.journal")).unwrap();
        std::fs::write(jd.join("system.journal"), fixture_regular_plain()).unwrap();
        out.clear();
        let r = f.read_new(
            &host,
            &dirs,
            BASE_USEC + 390_000_000,
            10_000,
            1 << 30,
            &|_| true,
            &mut out,
        );
        assert_eq!(r.files.len(), 2, "{r:?}");
        assert_eq!(out.iter().map(|e| e.seqnum).collect::<Vec<_>>(), vec![40]);
        // Old files are positioned at their end, not read.
        std::fs::remove_file(jd.join("system@abc-1-2.journal")).unwrap();
        let mut g = JournalFollower::new();
        out.clear();
        g.read_new(
            &host,
            &dirs,
            BASE_USEC + 3_600_000_000,
            10_000,
            1 << 30,
            &|_| true,
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(g.tracked(), 1);
    }

    #[test]
    fn budgets_carry_over_to_the_next_cycle() {
        let dir = tempfile::tempdir().unwrap();
        let host = HostPaths::new(dir.path());
        let jd = dir.path().join("run/log/journal").join(MID);
        std::fs::create_dir_all(&jd).unwrap();
        std::fs::write(jd.join("system.journal"), fixture_regular_plain()).unwrap();
        let dirs = vec!["/run/log/journal".to_string()];
        let mut f = JournalFollower::new();
        let mut all = Vec::new();
        for _ in 0..5 {
            let mut out = Vec::new();
            f.read_new(&host, &dirs, 0, 9, 1 << 30, &|_| true, &mut out);
            assert!(out.len() <= 9);
            all.extend(out);
        }
        assert_eq!(all.len(), 40);
        assert!(reads_file(Path::new("system@x.journal")) && !reads_file(Path::new("a.journal~")));
    }

    #[test]
    fn a_fifo_named_like_a_journal_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let jd = dir.path().join("var/log/journal").join(MID);
        std::fs::create_dir_all(&jd).unwrap();
        nix::unistd::mkfifo(
            &jd.join("system.journal"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let mut out = Vec::new();
        let r = JournalFollower::new().read_new(
            &HostPaths::new(dir.path()),
            &["/var/log/journal".to_string()],
            0,
            10,
            1 << 20,
            &|_| true,
            &mut out,
        );
        assert!(out.is_empty() && r.files.is_empty());
    }
}
