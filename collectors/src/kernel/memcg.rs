//! Memory limits of the kubepods cgroup tree: the limit of `kubepods` itself (what all pods may
//! use together) and a bounded walk for container and pod limits too small to run anything.
//!
//! - cgroup v2: `<root>/sys/fs/cgroup/kubepods.slice/**/memory.max` (systemd driver) or
//!   `.../kubepods/**/memory.max` (cgroupfs driver); `max` means unlimited.
//! - cgroup v1: `<root>/sys/fs/cgroup/memory/kubepods{.slice,}/**/memory.limit_in_bytes`;
//!   unlimited is a huge number (`9223372036854771712` on x86-64).

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;

use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};

/// v1 "unlimited" is `PAGE_COUNTER_MAX * PAGE_SIZE`, about 2^63; anything above 2^62 is treated
/// as no limit.
const UNLIMITED_ABOVE: u64 = 1 << 62;

/// Parses the text of `memory.max` / `memory.limit_in_bytes`: `Ok(None)` when unlimited.
pub fn parse_limit(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    let v: u64 = t.parse().map_err(|_| {
        format!(
            "memory limit {:?} is not a number",
            t.chars().take(32).collect::<String>()
        )
    })?;
    Ok((v < UNLIMITED_ABOVE).then_some(v))
}

/// The kubepods roots we look for, with the file that holds a group's limit.
fn roots(host: &HostPaths) -> Vec<(PathBuf, &'static str, &'static str)> {
    let cg = host.sys_file("fs/cgroup");
    vec![
        (cg.join("kubepods.slice"), "memory.max", "v2"),
        (cg.join("kubepods"), "memory.max", "v2"),
        (
            cg.join("memory/kubepods.slice"),
            "memory.limit_in_bytes",
            "v1",
        ),
        (cg.join("memory/kubepods"), "memory.limit_in_bytes", "v1"),
    ]
}

/// The memory limit of the kubepods cgroup (node allocatable for pods), with the agent-side
/// file it came from. `None` when no kubepods cgroup exists or it is unlimited.
pub fn kubepods_limit(host: &HostPaths) -> Option<(u64, PathBuf)> {
    roots(host).into_iter().find_map(|(dir, file, _)| {
        let p = dir.join(file);
        let text = hostfs::read_text(&p, cap::VALUE).ok()?;
        parse_limit(&text).ok().flatten().map(|v| (v, p))
    })
}

/// A cgroup of the kubepods tree with a limit below the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TinyLimit {
    /// The cgroup path inside its hierarchy, e.g.
    /// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`.
    pub cgroup: String,
    pub limit_bytes: u64,
    /// `v1` or `v2`.
    pub version: &'static str,
    /// Agent-side path of the limit file.
    pub file: PathBuf,
}

/// What one walk saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub tiny: Vec<TinyLimit>,
    /// Cgroup directories visited.
    pub groups: usize,
    /// True when the entry bound stopped the walk before the end.
    pub truncated: bool,
    /// True when at least one kubepods root exists.
    pub found_root: bool,
    /// UIDs of the pods whose cgroups the walk visited (the pods on the node now).
    pub pods: BTreeSet<String>,
}

impl Scan {
    /// Whether a pod is on the node now: known only when a kubepods tree was walked to the end.
    pub fn pod_present(&self, uid: &str) -> Option<bool> {
        (self.found_root && !self.truncated).then(|| self.pods.contains(uid))
    }
}

/// Walks the kubepods trees breadth-first (at most `max_groups` directories, `max_depth`
/// levels below the root) and returns the limits below `threshold_bytes`.
pub fn scan(host: &HostPaths, threshold_bytes: u64, max_groups: usize, max_depth: usize) -> Scan {
    let mut out = Scan::default();
    let cg_root = host.sys_file("fs/cgroup");
    for (root, file, version) in roots(host) {
        if !root.is_dir() {
            continue;
        }
        out.found_root = true;
        // The v1 hierarchy's own root is `<cgroup>/memory`, the v2 one `<cgroup>`.
        let hierarchy = if version == "v1" {
            cg_root.join("memory")
        } else {
            cg_root.clone()
        };
        let mut queue: VecDeque<(PathBuf, usize)> = VecDeque::from([(root, 0)]);
        while let Some((dir, depth)) = queue.pop_front() {
            if out.groups >= max_groups {
                out.truncated = true;
                return out;
            }
            out.groups += 1;
            let rel = dir.strip_prefix(&hierarchy).unwrap_or(&dir);
            if let Some(pod) = crate::proc::cgroup::pod_from_path(&rel.to_string_lossy()) {
                out.pods.insert(pod.uid);
            }
            let limit_file = dir.join(file);
            if let Ok(text) = hostfs::read_text(&limit_file, cap::VALUE) {
                if let Ok(Some(v)) = parse_limit(&text) {
                    if v < threshold_bytes {
                        out.tiny.push(TinyLimit {
                            cgroup: format!("/{}", rel.to_string_lossy()),
                            limit_bytes: v,
                            version,
                            file: limit_file,
                        });
                    }
                }
            }
            if depth >= max_depth {
                continue;
            }
            let Ok(entries) = hostfs::dir_entries(&dir, entries::CGROUP) else {
                continue;
            };
            for e in entries {
                // Cgroup directories are real directories; never follow symlinks.
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    // The queue never holds more directories than the walk may still visit,
                    // so a directory with a million children costs no more than the bound.
                    if out.groups + queue.len() >= max_groups {
                        out.truncated = true;
                        break;
                    }
                    queue.push_back((e.path(), depth + 1));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        // Kernel 6.18.44 (this VM), cgroup v1 root group, and v2 forms.
        assert_eq!(parse_limit("9223372036854771712\n"), Ok(None));
        assert_eq!(parse_limit("max\n"), Ok(None));
        assert_eq!(parse_limit("16777216\n"), Ok(Some(16 << 20)));
        // The handbook's `1024m`: Kubernetes turns it into 1 byte (rounded up), which the
        // kernel stores as one page.
        assert_eq!(parse_limit("4096\n"), Ok(Some(4096)));
        assert!(parse_limit("").is_err());
        assert!(parse_limit("-1").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_limit(&s);
        }
        /// `memory.max` (`max` or `%llu`) and v1 `memory.limit_in_bytes` (`%llu`, the
        /// unlimited value `PAGE_COUNTER_MAX * PAGE_SIZE`): limits read back, unlimited as none.
        #[test]
        fn parses_what_the_kernel_prints(limit in 0u64..UNLIMITED_ABOVE) {
            proptest::prop_assert_eq!(parse_limit(&format!("{limit}\n")), Ok(Some(limit)));
            proptest::prop_assert_eq!(parse_limit("max\n"), Ok(None));
            proptest::prop_assert_eq!(parse_limit("9223372036854771712\n"), Ok(None));
        }
    }
}
