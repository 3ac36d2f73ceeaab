//! Following a growing text file (a syslog file) between cycles, the way the kube-proxy log
//! reader (`iptables/kplog.rs`) follows container logs: per file its device, inode and offset;
//! a file seen for the first time is read from its last `tail` bytes (from the first full
//! line); a new inode or a size below the offset is a rotation or a truncation and restarts at
//! 0. Only complete lines are consumed (a partial last line is read next time, unless one line
//! alone fills the whole budget).
//!
//! One step more than kplog: when a file was rotated by renaming (logrotate's default, and
//! `create` for `/var/log/messages` and `/var/log/syslog`), the lines written to it between the
//! last read and the rename are in the renamed file (`messages-20261123`, `syslog.1`), which
//! is found by its inode among its siblings and read to its end first.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::ReadError;
use crate::hostfs::{self, entries};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileState {
    dev: u64,
    inode: u64,
    offset: u64,
}

/// What one read returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Complete lines (invalid UTF-8 replaced).
    pub text: String,
    /// Bytes read from the file (and from its rotated predecessor).
    pub bytes_read: u64,
    /// The file was rotated or truncated since the last read.
    pub rotated: bool,
    /// Bytes of the file still unread after this read (the budget ran out).
    pub behind_bytes: u64,
}

/// Positions in the followed files, by agent-side path.
#[derive(Debug, Default)]
pub struct Follower {
    files: HashMap<PathBuf, FileState>,
}

impl Follower {
    pub fn new() -> Follower {
        Follower::default()
    }

    /// Forgets files not in `live`.
    pub fn retain(&mut self, live: &[PathBuf]) {
        self.files.retain(|p, _| live.contains(p));
    }

    /// True when `path` has been read before.
    pub fn knows(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    /// Reads the new complete lines of `path`: at most `tail` bytes of a file seen for the
    /// first time, at most `budget` bytes in all. The file is opened without blocking and must
    /// be a regular file.
    pub fn read_new(&mut self, path: &Path, tail: u64, budget: u64) -> Result<Chunk, ReadError> {
        let (mut f, md) = hostfs::open_regular(path)?;
        let mut chunk = Chunk::default();
        let mut budget = budget;
        let state = self.files.get(path).copied();
        let (start, skip_partial) = match state {
            Some(s) if s.inode == md.ino() && s.dev == md.dev() && s.offset <= md.len() => {
                (s.offset, false)
            }
            Some(old) => {
                chunk.rotated = true;
                if old.inode != md.ino() || old.dev != md.dev() {
                    // The rest of the renamed file comes first.
                    if let Some(rotated) = find_rotated(path, old) {
                        if let Ok((mut rf, rmd)) = hostfs::open_regular(&rotated) {
                            if rmd.ino() == old.inode && rmd.len() >= old.offset {
                                let want = (rmd.len() - old.offset).min(budget);
                                if let Ok((buf, consumed)) =
                                    read_lines(&mut rf, old.offset, want, budget)
                                {
                                    chunk.bytes_read += buf.len() as u64;
                                    budget = budget.saturating_sub(buf.len() as u64);
                                    chunk
                                        .text
                                        .push_str(&String::from_utf8_lossy(&buf[..consumed]));
                                }
                            }
                        }
                    }
                }
                (0, false)
            }
            None => {
                let start = md.len().saturating_sub(tail);
                (start, start > 0)
            }
        };
        let want = md.len().saturating_sub(start).min(budget);
        let (buf, consumed) =
            read_lines(&mut f, start, want, budget).map_err(|e| ReadError::io(path, e))?;
        chunk.bytes_read += buf.len() as u64;
        let from = if skip_partial {
            buf.iter()
                .position(|b| *b == b'\n')
                .map(|i| i + 1)
                .unwrap_or(consumed)
                .min(consumed)
        } else {
            0
        };
        chunk
            .text
            .push_str(&String::from_utf8_lossy(&buf[from..consumed]));
        let offset = start + consumed as u64;
        chunk.behind_bytes = md.len().saturating_sub(offset);
        self.files.insert(
            path.to_path_buf(),
            FileState {
                dev: md.dev(),
                inode: md.ino(),
                offset,
            },
        );
        Ok(chunk)
    }
}

/// Reads `want` bytes from `start`; returns them and how many form complete lines. A read
/// that is all one line and fills the whole `budget` is consumed whole to make progress.
fn read_lines(
    f: &mut std::fs::File,
    start: u64,
    want: u64,
    budget: u64,
) -> std::io::Result<(Vec<u8>, usize)> {
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0).min(16 << 20));
    f.by_ref().take(want).read_to_end(&mut buf)?;
    let consumed = match buf.iter().rposition(|b| *b == b'\n') {
        Some(i) => i + 1,
        None if want == budget && want > 0 => buf.len(),
        None => 0,
    };
    Ok((buf, consumed))
}

/// The sibling of `path` that is the file `old` was before a rename: a regular file named
/// `<name>.N`, `<name>-<date>` or `<name>.<anything>` with the same device and inode.
fn find_rotated(path: &Path, old: FileState) -> Option<PathBuf> {
    let dir = path.parent()?;
    let name = path.file_name()?.to_str()?;
    let it = hostfs::dir_entries(dir, entries::LOG_FILES).ok()?;
    for e in it {
        let fname = e.file_name();
        let Some(fname) = fname.to_str() else {
            continue;
        };
        let Some(rest) = fname.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('.') || rest.starts_with('-')) {
            continue;
        }
        let Ok(md) = e.metadata() else {
            continue;
        };
        if md.file_type().is_file() && md.ino() == old.inode && md.dev() == old.dev {
            return Some(e.path());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(p: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    #[test]
    fn tail_then_new_lines_then_partial() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("messages");
        append(&p, "old 1\nold 2\nold 3\n");
        let mut f = Follower::new();
        // First sight: the last 8 bytes, from the first full line.
        let c = f.read_new(&p, 8, 1 << 20).unwrap();
        assert_eq!(c.text, "old 3\n");
        append(&p, "new 1\nnew 2 part");
        let c = f.read_new(&p, 8, 1 << 20).unwrap();
        assert_eq!(c.text, "new 1\n");
        append(&p, "ial\n");
        let c = f.read_new(&p, 8, 1 << 20).unwrap();
        assert_eq!(c.text, "new 2 partial\n");
        assert_eq!(f.read_new(&p, 8, 1 << 20).unwrap().text, "");
    }

    #[test]
    fn budget_and_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("syslog");
        append(&p, "");
        let mut f = Follower::new();
        f.read_new(&p, 0, 100).unwrap();
        append(&p, "aaaa\nbbbb\ncccc\n");
        let c = f.read_new(&p, 0, 11).unwrap();
        assert_eq!((c.text.as_str(), c.behind_bytes), ("aaaa\nbbbb\n", 5));
        assert_eq!(f.read_new(&p, 0, 11).unwrap().text, "cccc\n");
        // One line longer than the budget is consumed in pieces, never stuck.
        append(&p, &"x".repeat(25));
        append(&p, "\n");
        let mut got = String::new();
        for _ in 0..4 {
            got.push_str(&f.read_new(&p, 0, 10).unwrap().text);
        }
        assert_eq!(got.len(), 26);
    }

    #[test]
    fn rename_rotation_reads_the_rest_of_the_old_file_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("messages");
        append(&p, "a\n");
        let mut f = Follower::new();
        f.read_new(&p, 1 << 20, 1 << 20).unwrap();
        append(&p, "b before rotation\n");
        std::fs::rename(&p, dir.path().join("messages-20261123")).unwrap();
        append(&p, "c after rotation\n");
        let c = f.read_new(&p, 1 << 20, 1 << 20).unwrap();
        assert!(c.rotated);
        assert_eq!(c.text, "b before rotation\nc after rotation\n");
    }

    #[test]
    fn truncation_restarts_at_zero() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("syslog");
        append(&p, "one\ntwo\n");
        let mut f = Follower::new();
        f.read_new(&p, 1 << 20, 1 << 20).unwrap();
        std::fs::write(&p, "x\n").unwrap();
        let c = f.read_new(&p, 1 << 20, 1 << 20).unwrap();
        assert!(c.rotated);
        assert_eq!(c.text, "x\n");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("messages");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = Follower::new().read_new(&p, 10, 10).unwrap_err();
        assert!(matches!(e, ReadError::NotRegular { .. }), "{e}");
    }
}
