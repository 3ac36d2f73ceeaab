//! Container log files: docker's `<data-root>/containers/<id>/<id>-json.log[.N]` and the CRI
//! layout `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log[.<timestamp>][.gz]`.
//!
//! Listing costs one `readdir` per container directory and one `lstat` per file; pod names
//! for docker logs come from `config.v2.json`, read only for the largest logs and cached.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::config::docker::{self, PodLabels};
use crate::hostfs::{self, entries};
use crate::pods::parse_pod_log_dir;

/// Which layout a log comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    Docker,
    Cri,
}

/// One container log file.
#[derive(Debug, Clone, PartialEq)]
pub struct LogFile {
    /// Agent-side path.
    pub path: PathBuf,
    pub kind: LogKind,
    /// Apparent size (what `ls -l` shows).
    pub size_bytes: u64,
    /// A rotated file (`-json.log.3`, `0.log.20240101-101010`), not the one being written.
    pub rotated: bool,
    /// Age order among the rotations of one container: larger is older (docker's `.N`);
    /// 0 for the live file.
    pub age_rank: u64,
    /// Docker container id (the directory name) for docker logs.
    pub container_id: Option<String>,
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
}

/// Classifies a docker log file name for container `id`: `Some(rank)` (0 = live).
pub fn docker_log_rank(id: &str, name: &str) -> Option<u64> {
    let rest = name.strip_prefix(id)?.strip_prefix("-json.log")?;
    if rest.is_empty() {
        return Some(0);
    }
    let n = rest.strip_prefix('.')?;
    // Compressed rotations are `-json.log.N.gz`.
    let n = n.strip_suffix(".gz").unwrap_or(n);
    n.parse::<u64>().ok()
}

/// Classifies a CRI log file name: `Some(rotated)` for `<n>.log` (live) and
/// `<n>.log.<timestamp>[.gz]` (rotated); `None` for other files.
pub fn cri_log_rotated(name: &str) -> Option<bool> {
    let (stem, rest) = name.split_once(".log")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if rest.is_empty() {
        Some(false)
    } else if rest.starts_with('.') {
        Some(true)
    } else {
        None
    }
}

/// Lists docker logs under `<containers dir>` (agent-side), skipping symlinks.
pub fn list_docker(containers_dir: &Path, out: &mut Vec<LogFile>) {
    DockerDirCache::default().list(containers_dir, out);
}

/// The log file names of each docker container directory, keyed by container id and valid
/// while the directory's mtime is unchanged (docker's rotation renames files, which updates
/// it). A cached container costs one `stat` of its directory plus one per log file instead
/// of reading the directory. Entries of containers that disappear are dropped.
#[derive(Debug, Default)]
pub struct DockerDirCache {
    dirs: HashMap<String, CachedDir>,
}

#[derive(Debug)]
struct CachedDir {
    mtime: (i64, i64),
    logs: Vec<(std::ffi::OsString, u64)>,
}

impl DockerDirCache {
    /// Lists docker logs under `<containers dir>` (agent-side), skipping symlinks.
    pub fn list(&mut self, containers_dir: &Path, out: &mut Vec<LogFile>) {
        let Ok(rd) = hostfs::dir_entries(containers_dir, entries::PODS) else {
            self.dirs.clear();
            return;
        };
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        let now_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        for c in rd {
            let id = c.file_name().to_string_lossy().into_owned();
            let dir = c.path();
            let Ok(dmd) = std::fs::metadata(&dir) else {
                continue;
            };
            if !dmd.is_dir() {
                continue;
            }
            seen.insert(id.clone());
            let mtime = (dmd.mtime(), dmd.mtime_nsec());
            // A directory changed in the last two seconds may change again within the same
            // timestamp tick (coarse-timestamp filesystems): do not trust the cache for it.
            let settled = now_secs.saturating_sub(mtime.0) >= 2;
            let fresh = settled && self.dirs.get(&id).is_some_and(|d| d.mtime == mtime);
            if !fresh {
                let Ok(files) = hostfs::dir_entries(&dir, entries::LOG_FILES) else {
                    continue;
                };
                let logs: Vec<(std::ffi::OsString, u64)> = files
                    .filter_map(|f| {
                        let name = f.file_name();
                        let rank = docker_log_rank(&id, &name.to_string_lossy())?;
                        Some((name, rank))
                    })
                    .collect();
                self.dirs.insert(id.clone(), CachedDir { mtime, logs });
            }
            let Some(cached) = self.dirs.get(&id) else {
                continue;
            };
            for (name, rank) in &cached.logs {
                let path = dir.join(name);
                let Ok(md) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if !md.is_file() {
                    continue;
                }
                out.push(LogFile {
                    path,
                    kind: LogKind::Docker,
                    size_bytes: md.size(),
                    rotated: *rank > 0,
                    age_rank: *rank,
                    container_id: Some(id.clone()),
                    namespace: None,
                    pod: None,
                    container: None,
                });
            }
        }
        self.dirs.retain(|id, _| seen.contains(id));
    }

    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// Lists CRI logs under the pod log dir (agent-side `/var/log/pods`), skipping symlinks
/// (dockershim links `0.log` to docker's own file, which is listed by [`list_docker`]).
pub fn list_cri(pods_dir: &Path, out: &mut Vec<LogFile>) {
    let Ok(rd) = hostfs::dir_entries(pods_dir, entries::PODS) else {
        return;
    };
    for p in rd {
        let dir_name = p.file_name().to_string_lossy().into_owned();
        let (ns, pod) = match parse_pod_log_dir(&dir_name) {
            Some(p) => (Some(p.namespace), Some(p.name)),
            None => (None, None),
        };
        let Ok(containers) = hostfs::dir_entries(&p.path(), entries::PODS) else {
            continue;
        };
        for c in containers {
            let name = c.file_name().to_string_lossy().into_owned();
            // A container name only when it is one (the directory name is host data).
            let container = crate::names::is_dns_label(&name).then_some(name);
            let Ok(files) = hostfs::dir_entries(&c.path(), entries::LOG_FILES) else {
                continue;
            };
            for f in files {
                let Some(rotated) = cri_log_rotated(&f.file_name().to_string_lossy()) else {
                    continue;
                };
                let Ok(md) = f.metadata() else { continue };
                if !md.is_file() {
                    continue;
                }
                out.push(LogFile {
                    path: f.path(),
                    kind: LogKind::Cri,
                    size_bytes: md.size(),
                    rotated,
                    // Rotations carry their time in the name: older sorts first by mtime.
                    age_rank: if rotated {
                        u64::try_from(i64::MAX.saturating_sub(md.mtime())).unwrap_or(0)
                    } else {
                        0
                    },
                    container_id: None,
                    namespace: ns.clone(),
                    pod: pod.clone(),
                    container: container.clone(),
                });
            }
        }
    }
}

/// The largest `n` logs, largest first.
pub fn largest(mut logs: Vec<LogFile>, n: usize) -> Vec<LogFile> {
    logs.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.path.cmp(&b.path))
    });
    logs.truncate(n);
    logs
}

/// Pod labels of docker containers, read on demand and kept only for containers still seen.
#[derive(Debug, Default)]
pub struct LabelCache {
    labels: HashMap<String, PodLabels>,
}

impl LabelCache {
    /// Fills namespace/pod/container of docker logs from their `config.v2.json`.
    pub fn annotate(&mut self, logs: &mut [LogFile]) {
        for log in logs.iter_mut() {
            let (Some(id), Some(dir)) = (log.container_id.clone(), log.path.parent()) else {
                continue;
            };
            let labels = self.labels.entry(id).or_insert_with(|| {
                crate::pods::valid_labels(docker::read_pod_labels(dir).unwrap_or_default())
            });
            log.namespace = labels.namespace.clone();
            log.pod = labels.pod.clone();
            log.container = labels.container.clone();
        }
    }

    /// Drops entries of containers not in `live` (bounded state).
    pub fn retain(&mut self, live: &std::collections::HashSet<String>) {
        self.labels.retain(|id, _| live.contains(id));
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_names() {
        let id = "dda02c9a7491";
        assert_eq!(docker_log_rank(id, "dda02c9a7491-json.log"), Some(0));
        assert_eq!(docker_log_rank(id, "dda02c9a7491-json.log.9"), Some(9));
        assert_eq!(docker_log_rank(id, "dda02c9a7491-json.log.2.gz"), Some(2));
        assert_eq!(docker_log_rank(id, "config.v2.json"), None);
        assert_eq!(docker_log_rank(id, "dda02c9a7491-json.logx"), None);
        assert_eq!(docker_log_rank(id, "other-json.log"), None);
    }

    #[test]
    fn cri_names() {
        assert_eq!(cri_log_rotated("0.log"), Some(false));
        assert_eq!(cri_log_rotated("3.log.20240105-101010"), Some(true));
        assert_eq!(cri_log_rotated("3.log.20240105-101010.gz"), Some(true));
        assert_eq!(cri_log_rotated("0.log.tmp"), Some(true));
        assert_eq!(cri_log_rotated("x.log"), None);
        assert_eq!(cri_log_rotated("0.logs"), None);
        // Pod directory names are parsed by `pods::parse_pod_log_dir`.
        let p = parse_pod_log_dir(
            "kube-system_coredns-5d78c9869d-x7k2p_0f9a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b",
        )
        .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
            (
                "kube-system",
                "coredns-5d78c9869d-x7k2p",
                "0f9a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
            )
        );
        assert_eq!(parse_pod_log_dir("nounderscore"), None);
        assert_eq!(parse_pod_log_dir("kube-system_coredns_0f9a-11"), None);
    }

    #[test]
    fn docker_cache_follows_rotation_and_prunes() {
        let t = tempfile::tempdir().unwrap();
        let c = t.path().join("abc");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("abc-json.log"), b"0123456789").unwrap();
        std::fs::write(c.join("config.v2.json"), b"{}").unwrap();
        let mut cache = DockerDirCache::default();
        let mut out = Vec::new();
        cache.list(t.path(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].size_bytes, 10);
        // Growth without a rename is seen through the cached name.
        std::fs::write(c.join("abc-json.log"), b"0123456789abcdef").unwrap();
        out.clear();
        cache.list(t.path(), &mut out);
        assert_eq!(out[0].size_bytes, 16);
        // Rotation renames (directory mtime changes): the new names are listed.
        std::fs::rename(c.join("abc-json.log"), c.join("abc-json.log.1")).unwrap();
        std::fs::write(c.join("abc-json.log"), b"x").unwrap();
        out.clear();
        cache.list(t.path(), &mut out);
        out.sort_by_key(|l| l.age_rank);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!((out[1].age_rank, out[1].size_bytes), (1, 16));
        std::fs::remove_dir_all(&c).unwrap();
        out.clear();
        cache.list(t.path(), &mut out);
        assert!(out.is_empty());
        assert!(cache.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = docker_log_rank("abc", &s);
            let _ = cri_log_rotated(&s);
        }
        /// File names as the runtimes make them: docker's json-file `<id>-json.log` and its
        /// rotations `<id>-json.log.N[.gz]`, the kubelet's `<restart>.log` and its rotations
        /// `<restart>.log.<YYYYMMDD-hhmmss>[.gz]`: the rank and the rotation read back.
        #[test]
        fn names_the_runtimes_make_read_back(
            id in "[0-9a-f]{64}", n in 1u64..1000, gz in proptest::bool::ANY,
            restart in 0u32..1000, stamp in "20[0-9]{2}[01][0-9][0-3][0-9]-[0-2][0-9][0-5][0-9][0-5][0-9]",
        ) {
            let z = if gz { ".gz" } else { "" };
            proptest::prop_assert_eq!(docker_log_rank(&id, &format!("{id}-json.log")), Some(0));
            proptest::prop_assert_eq!(docker_log_rank(&id, &format!("{id}-json.log.{n}{z}")), Some(n));
            proptest::prop_assert_eq!(cri_log_rotated(&format!("{restart}.log")), Some(false));
            proptest::prop_assert_eq!(cri_log_rotated(&format!("{restart}.log.{stamp}{z}")), Some(true));
        }
    }
}
