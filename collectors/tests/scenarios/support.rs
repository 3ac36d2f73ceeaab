//! Builders for fake host roots and helpers for real-kernel tests.

use std::path::{Path, PathBuf};

use collectors::node::Facts;
use collectors::{CollectContext, Collection, Collector, HostPaths, Metric, Node};

/// The machine facts of fake nodes ([`FakeHost::node`]).
pub const FACTS: Facts = Facts {
    page_size: 4096,
    clock_ticks: 100,
};

/// A fake host root in a temporary directory: `proc/`, `sys/`, `var/lib/docker/...` written by
/// the test.
pub struct FakeHost {
    dir: tempfile::TempDir,
}

impl FakeHost {
    pub fn new() -> FakeHost {
        FakeHost {
            dir: tempfile::tempdir().expect("create temp host root"),
        }
    }

    /// The agent-side root directory.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The host's paths.
    pub fn host(&self) -> HostPaths {
        HostPaths::new(self.dir.path())
    }

    /// The node a collector is given: this host with a process table and kernel-log hub of
    /// its own (every call a new one, as an agent makes one at start), and the facts of a
    /// 4 KiB-page, 100-tick x86 machine so that figures do not depend on the test machine.
    pub fn node(&self) -> Node {
        Node::with_facts(self.host(), FACTS)
    }

    /// Agent-side path of a host path (`/proc/loadavg` -> `<tmp>/proc/loadavg`).
    pub fn path(&self, host_path: &str) -> PathBuf {
        self.dir.path().join(host_path.trim_start_matches('/'))
    }

    /// Writes a file at a host path, creating parent directories.
    pub fn write(&self, host_path: &str, contents: impl AsRef<[u8]>) -> &FakeHost {
        let p = self.path(host_path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&p, contents).expect("write fake host file");
        self
    }

    pub fn mkdir(&self, host_path: &str) -> &FakeHost {
        std::fs::create_dir_all(self.path(host_path)).expect("create dir");
        self
    }

    /// Creates a symlink at `host_path` pointing to `target` (written as given).
    pub fn symlink(&self, target: &str, host_path: &str) -> &FakeHost {
        let p = self.path(host_path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::os::unix::fs::symlink(target, &p).expect("create symlink");
        self
    }

    /// Replaces a host file by a FIFO with no writer: a blocking `open` of it waits forever.
    pub fn fifo(&self, host_path: &str) -> &FakeHost {
        let p = self.path(host_path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        let _ = std::fs::remove_file(&p);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .unwrap_or_else(|e| panic!("mkfifo {}: {e}", p.display()));
        self
    }

    /// Writes `prefix` (believable text) and extends the file sparsely to `len` bytes: the
    /// rest reads as zeros, and the whole file reads as `len` bytes.
    pub fn oversized(&self, host_path: &str, prefix: &str, len: u64) -> &FakeHost {
        self.write(host_path, prefix);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.path(host_path))
            .expect("open oversized file");
        f.set_len(len).expect("extend oversized file");
        self
    }

    /// Creates a sparse file of `len` bytes (takes no disk space).
    pub fn sparse(&self, host_path: &str, len: u64) -> &FakeHost {
        let p = self.path(host_path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        let f = std::fs::File::create(&p).expect("create sparse file");
        f.set_len(len).expect("set sparse length");
        self
    }
}

/// Runs one collection and checks what it tells operators against the calling test's golden
/// file (`crate::golden`; `UPDATE_GOLDEN=1` re-records). Staged-host tests collect through
/// this; real-kernel tests, whose findings depend on the machine, call `collect` directly.
pub fn collect<C: Collector + ?Sized>(c: &mut C, ctx: &CollectContext) -> Collection {
    collect_masked(c, ctx, &[])
}

/// [`collect`] for a collection whose text holds parts that vary from run to run (a count of
/// samples a sampler thread took, a fake file's inode) with no evidence naming them: each mask
/// is literal text with `#` where such a number stands (`"# consecutive samples"`), or literal
/// text without `#`, replaced whole.
pub fn collect_masked<C: Collector + ?Sized>(
    c: &mut C,
    ctx: &CollectContext,
    masks: &[&str],
) -> Collection {
    let out = c.collect(ctx);
    crate::golden::check(&out, masks);
    out
}

pub fn ctx() -> CollectContext {
    // Staged host roots: their files are what they are.
    CollectContext::new("node-1", collectors::HostNetns::NotProcfs)
}

/// True when running as root; otherwise prints why the calling test skips.
pub fn root_or_skip(test: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    if !root {
        collectors::skip!("SKIP {test}: needs root (real kernel test)");
    }
    root
}

/// True when every command of `tools` is on the PATH; else prints `SKIP <test>: needs …`
/// naming the missing ones (a test that cannot run says so, never passes silently).
pub fn tools_or_skip(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !missing.is_empty() {
        collectors::skip!("SKIP {test}: needs {}", missing.join(", "));
    }
    missing.is_empty()
}

/// The first metric of a collection named `name` carrying every `(label, value)` pair.
pub fn find_metric<'a>(
    c: &'a Collection,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a Metric> {
    c.metrics.iter().find(|m| {
        m.name == name
            && labels
                .iter()
                .all(|(k, v)| m.labels.iter().any(|(mk, mv)| mk == k && mv == v))
    })
}

/// The handbooks: `shared/docs` beside the repository (`<repo>/../shared/docs`, as in CI and
/// /work/main), or one level further up for a git worktree kept under a directory of
/// worktrees; the `NODE_DOCTOR_DOCS` environment variable overrides both. `Err` says why there
/// are none: a clone of the repository alone has no `shared/docs` beside it.
pub fn handbooks_dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("NODE_DOCTOR_DOCS") {
        let d = PathBuf::from(d);
        return if d.is_dir() {
            Ok(d)
        } else {
            Err(format!(
                "NODE_DOCTOR_DOCS={} is not a directory",
                d.display()
            ))
        };
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let beside = repo.join("../shared/docs");
    let above = repo.join("../../shared/docs");
    if beside.is_dir() {
        Ok(beside)
    } else if above.is_dir() {
        Ok(above)
    } else {
        Err(format!(
            "no handbooks at {} (shared/docs beside the repository, which a clone alone does \
             not have; NODE_DOCTOR_DOCS names another place)",
            beside.display()
        ))
    }
}

/// The handbooks for `test`, or `None` after printing `SKIP <test>: <why>`. `without` says
/// what the test still checks without them (empty when it checks nothing and returns).
pub fn handbooks_for(test: &str, without: &str) -> Option<PathBuf> {
    match handbooks_dir() {
        Ok(d) => Some(d),
        Err(why) if without.is_empty() => {
            collectors::skip!("SKIP {test}: {why}");
            None
        }
        Err(why) => {
            collectors::skip!("SKIP {test} (in part): {why}; {without}");
            None
        }
    }
}

/// The one finding of a collection, which must have `id`.
pub fn only<'a>(c: &'a Collection, id: &str) -> &'a collectors::Finding {
    assert_eq!(c.findings.len(), 1, "{:#?}", c.findings);
    assert_eq!(c.findings[0].id, id);
    &c.findings[0]
}

/// A finding's English words: title, summary, steps and commands, for assertions on cause
/// and remediation.
pub fn words(f: &collectors::Finding) -> String {
    let mut s = format!("{} {}", f.title.en, f.summary.en);
    for step in &f.remediation.steps {
        s.push(' ');
        s.push_str(&step.en);
    }
    for c in &f.remediation.commands {
        s.push(' ');
        s.push_str(c);
    }
    s
}
