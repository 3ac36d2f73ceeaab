//! A bounded, incremental `du -x`: sizes of the top-level directories under a root
//! (`/var/lib/docker/{containers,overlay2,image,volumes}`, `/var/lib/kubelet/pods`), walked a
//! slice at a time. Each cycle spends at most a budget of entries and time, then stops and
//! resumes where it was on the next cycle, so the agent never causes the IO load it diagnoses.
//!
//! Besides the top-level entries, a pass sizes the *items* that say who fills a disk (the
//! [`ITEMS`] patterns: a pod's directory and each of its emptyDir volumes under the kubelet
//! root, a container's directory (its logs) and each layer under docker's root, containerd's
//! snapshots and content store), each byte counted in its deepest item, at most
//! [`MAX_ITEMS`] per pass; the collector compares the items of two complete passes to name
//! the fastest grower.
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

/// Item patterns, relative to a walked root (`*`: any name), with the kind they name. The
/// deepest pattern that matches a directory makes it an item; a top-level entry that matches
/// none is an item of kind `dir`.
pub const ITEMS: &[(&[&str], &str)] = &[
    (
        &["pods", "*", "volumes", "kubernetes.io~empty-dir", "*"],
        "empty_dir",
    ),
    (&["pods", "*"], "pod_dir"),
    (&["containers", "*"], "container_dir"),
    (&["overlay2", "*"], "layer"),
    (&["image"], "image"),
    (&["volumes", "*"], "volume"),
    (
        &["io.containerd.snapshotter.v1.overlayfs", "snapshots", "*"],
        "layer",
    ),
    (&["io.containerd.content.v1.content"], "image_content"),
];

/// Items sized per pass, at most (further matches count in their parent item).
pub const MAX_ITEMS: usize = 4096;

/// Deepest item pattern.
const ITEM_DEPTH: usize = 5;

/// One item of a complete pass: its path relative to the root, kind, allocated bytes and
/// entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemSize {
    pub key: String,
    pub kind: &'static str,
    pub bytes: u64,
    pub entries: u64,
}

/// The kind of the item at relative path `rel` (its components), if it is one.
pub fn item_kind(rel: &[&str]) -> Option<&'static str> {
    let matched = ITEMS.iter().find(|(pat, _)| {
        pat.len() == rel.len() && pat.iter().zip(rel).all(|(p, r)| *p == "*" || p == r)
    });
    match matched {
        Some((_, kind)) => Some(kind),
        None if rel.len() == 1 => Some("dir"),
        None => None,
    }
}

/// A directory still to read: its path, top-level entry, item and depth below the root.
type Pending = (PathBuf, usize, Option<usize>, usize);

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
    stack: Vec<Pending>,
    /// The directory being read, with the index of its top-level entry, its item and depth.
    current: Option<(ReadDir, usize, Option<usize>, usize)>,
    items: Vec<ItemSize>,
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
    last_items: Vec<ItemSize>,
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
            last_items: Vec::new(),
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
                let Some((dir, top, item, depth)) = self.pass.stack.pop() else {
                    self.finish_pass();
                    break;
                };
                match std::fs::read_dir(&dir) {
                    Ok(rd) => self.pass.current = Some((rd, top, item, depth)),
                    Err(_) => {
                        // Vanished or unreadable: count nothing more for it.
                        self.dir_done(top);
                        continue;
                    }
                }
            }
            let Some((rd, top, item, depth)) = self.pass.current.as_mut() else {
                continue;
            };
            let (top, parent_item, depth) = (*top, *item, *depth);
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
                    let bytes = md.blocks().saturating_mul(512);
                    let path = entry.path();
                    let item = self.item_of(&path, depth + 1, md.is_dir()).or(parent_item);
                    if let Some(it) = item.and_then(|i| self.pass.items.get_mut(i)) {
                        it.bytes = it.bytes.saturating_add(bytes);
                        it.entries += 1;
                    }
                    if top == ROOT {
                        // A top-level entry of the root.
                        let idx = self.pass.tops.len();
                        self.pass.tops.push(Top {
                            name: entry.file_name().to_string_lossy().into_owned(),
                            bytes,
                            pending: usize::from(md.is_dir()),
                        });
                        if md.is_dir() {
                            self.pass.stack.push((path, idx, item, depth + 1));
                        }
                    } else if let Some(t) = self.pass.tops.get_mut(top) {
                        t.bytes = t.bytes.saturating_add(bytes);
                        if md.is_dir() {
                            t.pending += 1;
                            self.pass.stack.push((path, top, item, depth + 1));
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
            stack: vec![(self.root.clone(), ROOT, None, 0)],
            ..Pass::default()
        };
        true
    }

    /// A new item for the entry at `path` (`depth` below the root) when a pattern names it
    /// (directories, and any top-level entry), while there is room for one.
    fn item_of(&mut self, path: &Path, depth: usize, is_dir: bool) -> Option<usize> {
        if depth > ITEM_DEPTH || (!is_dir && depth > 1) || self.pass.items.len() >= MAX_ITEMS {
            return None;
        }
        let rel = path.strip_prefix(&self.root).ok()?;
        let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        if parts.len() != depth {
            return None;
        }
        let kind = item_kind(&parts)?;
        self.pass.items.push(ItemSize {
            key: parts.join("/"),
            kind,
            bytes: 0,
            entries: 0,
        });
        Some(self.pass.items.len() - 1)
    }

    /// The items of the last complete pass (empty before the first).
    pub fn items(&self) -> &[ItemSize] {
        &self.last_items
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
        let mut pass = std::mem::take(&mut self.pass);
        self.last_items = std::mem::take(&mut pass.items);
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
    fn items_count_each_byte_in_the_deepest_one() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let pod = r.join("pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77");
        let vol = pod.join("volumes/kubernetes.io~empty-dir/cache");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::write(vol.join("a"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::write(pod.join("etc-hosts"), vec![1u8; 4096]).unwrap();
        std::fs::create_dir_all(r.join("plugins")).unwrap();
        let mut w = Walker::new(r.to_path_buf());
        assert!(w.items().is_empty());
        w.advance(BIG);
        let get = |key: &str| {
            w.items()
                .iter()
                .find(|i| i.key == key)
                .unwrap_or_else(|| panic!("{key}: {:?}", w.items()))
                .clone()
        };
        let v =
            get("pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77/volumes/kubernetes.io~empty-dir/cache");
        assert_eq!(v.kind, "empty_dir");
        // The volume directory and its file.
        assert!(v.bytes >= 64 * 1024 && v.entries == 2, "{v:?}");
        let p = get("pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77");
        assert_eq!(p.kind, "pod_dir");
        // The pod's own files and directories, not its emptyDir's data.
        assert!(p.bytes >= 4096 && p.bytes < 64 * 1024, "{p:?}");
        assert_eq!(get("plugins").kind, "dir");
        assert_eq!(get("pods").kind, "dir");
        assert_eq!(item_kind(&["overlay2", "abc"]), Some("layer"));
        assert_eq!(item_kind(&["overlay2", "abc", "diff"]), None);
    }

    #[test]
    fn missing_root_yields_nothing() {
        let mut w = Walker::new(PathBuf::from("/nonexistent/node-doctor/x"));
        assert_eq!(w.advance(BIG), Spent::default());
        assert_eq!(w.sizes(), None);
    }
}
