//! A bounded, incremental `du -x`: sizes of the top-level directories under a root
//! (`/var/lib/docker/{containers,overlay2,image,volumes}`, `/var/lib/kubelet/pods`), walked a
//! slice at a time. Each cycle spends at most a budget of entries and time, then stops and
//! resumes where it was on the next cycle, so the agent never causes the IO load it diagnoses.
//!
//! Sizes are allocated bytes (`st_blocks * 512`, as `du` reports). The walk stays on the
//! root's filesystem (overlay `merged` mounts and pod volume mounts are skipped). Hard links
//! are counted once per link (no inode set is kept, so memory stays bounded).

use std::fs::ReadDir;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The figures of one walk of a root.
#[derive(Debug, Clone, PartialEq)]
pub struct DirSizes {
    /// Top-level entries with their allocated bytes, largest first.
    pub entries: Vec<(String, u64)>,
    /// 1.0 when these figures come from a complete walk; otherwise the share of top-level
    /// entries fully walked so far (the figures are then lower bounds).
    pub complete_ratio: f64,
    /// Entries (files and directories) counted.
    pub files: u64,
}

/// Per-cycle limits of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub entries: usize,
    pub time: Duration,
}

/// What one call to [`Walker::advance`] spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub entries: usize,
    pub elapsed: Duration,
}

#[derive(Debug)]
struct Top {
    name: String,
    bytes: u64,
    /// Directories of this entry still to read (including one being read).
    pending: usize,
}

#[derive(Debug, Default)]
struct Pass {
    started: bool,
    tops: Vec<Top>,
    /// Directories still to read, with the index of their top-level entry.
    stack: Vec<(PathBuf, usize)>,
    /// The directory being read, with the index of its top-level entry.
    current: Option<(ReadDir, usize)>,
    files: u64,
    /// The root's own listing is finished (all top-level entries are known).
    root_listed: bool,
}

/// Marks the root directory on the stack (its entries become top-level entries).
const ROOT: usize = usize::MAX;

/// The incremental walk of one root directory.
#[derive(Debug)]
pub struct Walker {
    root: PathBuf,
    dev: Option<u64>,
    pass: Pass,
    last_complete: Option<DirSizes>,
    /// Complete passes so far.
    pub passes: u64,
}

impl Walker {
    /// A walker of `root` (agent-side path).
    pub fn new(root: PathBuf) -> Walker {
        Walker {
            root,
            dev: None,
            pass: Pass::default(),
            last_complete: None,
            passes: 0,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Walks for at most `budget` (entries and time). Returns what it spent. A pass that
    /// completes publishes its figures; the next pass starts on the following call.
    pub fn advance(&mut self, budget: Budget) -> Spent {
        let start = Instant::now();
        let mut spent = 0usize;
        if !self.pass.started && !self.start_pass() {
            return Spent::default();
        }
        let Some(dev) = self.dev else {
            return Spent::default();
        };
        let mut since_check = 0usize;
        while spent < budget.entries {
            // The clock is read every 32 entries and before opening each directory.
            if (since_check >= 32 || self.pass.current.is_none()) && start.elapsed() >= budget.time
            {
                break;
            }
            if since_check >= 32 {
                since_check = 0;
            }
            // The directory being read, or the next one from the stack.
            if self.pass.current.is_none() {
                let Some((dir, top)) = self.pass.stack.pop() else {
                    self.finish_pass();
                    break;
                };
                match std::fs::read_dir(&dir) {
                    Ok(rd) => self.pass.current = Some((rd, top)),
                    Err(_) => {
                        // Vanished or unreadable: count nothing more for it.
                        self.dir_done(top);
                        continue;
                    }
                }
            }
            let Some((rd, top)) = self.pass.current.as_mut() else {
                continue;
            };
            let top = *top;
            match rd.next() {
                None => {
                    self.pass.current = None;
                    self.dir_done(top);
                }
                Some(Err(_)) => {}
                Some(Ok(entry)) => {
                    spent += 1;
                    since_check += 1;
                    self.pass.files += 1;
                    let Ok(md) = entry.metadata() else { continue };
                    if md.dev() != dev {
                        continue;
                    }
                    if top == ROOT {
                        // A top-level entry of the root.
                        let idx = self.pass.tops.len();
                        self.pass.tops.push(Top {
                            name: entry.file_name().to_string_lossy().into_owned(),
                            bytes: md.blocks().saturating_mul(512),
                            pending: usize::from(md.is_dir()),
                        });
                        if md.is_dir() {
                            self.pass.stack.push((entry.path(), idx));
                        }
                    } else if let Some(t) = self.pass.tops.get_mut(top) {
                        t.bytes = t.bytes.saturating_add(md.blocks().saturating_mul(512));
                        if md.is_dir() {
                            t.pending += 1;
                            self.pass.stack.push((entry.path(), top));
                        }
                    }
                }
            }
        }
        Spent {
            entries: spent,
            elapsed: start.elapsed(),
        }
    }

    /// Starts a pass at the root (its listing is walked like any directory, within the
    /// budget). False when the root is unreadable.
    fn start_pass(&mut self) -> bool {
        let Ok(root_md) = std::fs::metadata(&self.root) else {
            return false;
        };
        self.dev = Some(root_md.dev());
        self.pass = Pass {
            started: true,
            stack: vec![(self.root.clone(), ROOT)],
            ..Pass::default()
        };
        true
    }

    fn dir_done(&mut self, top: usize) {
        if top == ROOT {
            self.pass.root_listed = true;
        }
        if let Some(t) = self.pass.tops.get_mut(top) {
            t.pending = t.pending.saturating_sub(1);
        }
    }

    fn finish_pass(&mut self) {
        let pass = std::mem::take(&mut self.pass);
        let mut entries: Vec<(String, u64)> =
            pass.tops.into_iter().map(|t| (t.name, t.bytes)).collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        self.last_complete = Some(DirSizes {
            entries,
            complete_ratio: 1.0,
            files: pass.files,
        });
        self.passes += 1;
    }

    /// The best figures so far: the last complete pass, else the running one (partial).
    pub fn sizes(&self) -> Option<DirSizes> {
        if let Some(done) = &self.last_complete {
            return Some(done.clone());
        }
        if !self.pass.started {
            return None;
        }
        let total = self.pass.tops.len();
        let done = self.pass.tops.iter().filter(|t| t.pending == 0).count();
        let mut entries: Vec<(String, u64)> = self
            .pass
            .tops
            .iter()
            .map(|t| (t.name.clone(), t.bytes))
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Some(DirSizes {
            entries,
            complete_ratio: if !self.pass.root_listed {
                0.0
            } else if total == 0 {
                1.0
            } else {
                done as f64 / total as f64
            },
            files: self.pass.files,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in 0..10 {
            let dir = r.join("overlay2").join(format!("layer{d}")).join("diff");
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..20 {
                std::fs::write(dir.join(format!("f{f}")), vec![1u8; 4096]).unwrap();
            }
        }
        std::fs::create_dir_all(r.join("containers/abc")).unwrap();
        std::fs::write(r.join("containers/abc/abc-json.log"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::create_dir_all(r.join("image")).unwrap();
        t
    }

    const BIG: Budget = Budget {
        entries: 1_000_000,
        time: Duration::from_secs(10),
    };

    #[test]
    fn full_walk_sizes_top_dirs() {
        let t = tree();
        let mut w = Walker::new(t.path().to_path_buf());
        w.advance(BIG);
        let s = w.sizes().unwrap();
        assert_eq!(s.complete_ratio, 1.0);
        assert_eq!(w.passes, 1);
        let get = |n: &str| s.entries.iter().find(|e| e.0 == n).unwrap().1;
        // 200 files of 4 KiB (plus directory blocks).
        assert!(get("overlay2") >= 200 * 4096, "{}", get("overlay2"));
        assert!(get("containers") >= 64 * 1024);
        assert_eq!(s.entries[0].0, "overlay2");
        // 3 tops + 10 layers + 10 diffs + 200 files + abc + log.
        assert_eq!(s.files, 3 + 20 + 200 + 2);
    }

    #[test]
    fn small_budget_resumes_and_never_exceeds() {
        let t = tree();
        let mut w = Walker::new(t.path().to_path_buf());
        let b = Budget {
            entries: 7,
            time: Duration::from_secs(10),
        };
        let mut cycles = 0;
        while w.passes == 0 {
            let spent = w.advance(b);
            assert!(spent.entries <= 7, "spent {}", spent.entries);
            cycles += 1;
            if cycles == 3 {
                let partial = w.sizes().unwrap();
                assert!(partial.complete_ratio < 1.0);
            }
            assert!(cycles < 100);
        }
        assert!(cycles > 20, "took {cycles} cycles");
        let mut full = Walker::new(t.path().to_path_buf());
        full.advance(BIG);
        assert_eq!(w.sizes(), full.sizes());
    }

    #[test]
    fn missing_root_yields_nothing() {
        let mut w = Walker::new(PathBuf::from("/nonexistent/node-doctor/x"));
        assert_eq!(w.advance(BIG), Spent::default());
        assert_eq!(w.sizes(), None);
    }
}
