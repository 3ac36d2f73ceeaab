//! Collector `iptables`: the xtables lock (`/run/xtables.lock`) — who holds it, for how long,
//! who waits; pods in the host network namespace that do not share the host's lock file;
//! kube-proxy's iptables errors from its container logs; and the iptables backend in use.
//!
//! Handbook: `002_af370464fa0f13dd.txt`, the Kube-Proxy chapter (lines 1009–1336); the words
//! and the sub-sections each finding cites are in `collectors/rules/iptables.toml`.
//!
//! Layout: [`sampler`] (the lock thread and hold tracking), [`lockwatch`] (its inotify watch:
//! when `/proc/locks` is read), [`dirwait`] (waiting for a lock directory that does not
//! exist), [`kplog`]
//! (incremental kube-proxy log scanning), [`backend`] (legacy tables, iptables symlink target),
//! [`sample`] (what a collection read, typed), [`thresholds`] (the limits of the lock rules),
//! [`judge`] (a typed [`Sample`] -> drafts under [`IptablesConfig::thresholds`], and metrics).
//! This file reads the host into a sample; `collect` renders the drafts in the rule file's
//! words ([`CollectContext::render`]) and adds the metrics of the sample.

pub mod backend;
pub mod dirwait;
pub mod judge;
pub mod kplog;
pub mod lockwatch;
pub mod sample;
pub mod sampler;
pub mod thresholds;
pub mod tracker;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::collector::{CollectContext, Phases, Status};
use crate::metric::Metric;
use crate::node::processes::Proc;
use crate::node::Node;
use crate::pods::{PodDirectory, PodsConfig};
use crate::proc::ns;
use crate::rules::Draft;

pub use sample::Sample;
pub use thresholds::Thresholds;

use kplog::{LogScanner, ScanLimits};
use sample::{BackendFacts, LogCount, MountGap};
use sampler::Sampler;
use tracker::{LockId, LockWatch, ProcInfo, SamplerOptions, Tracker, Window};

/// Thresholds, paths and limits of the `iptables` collector.
#[derive(Debug, Clone, PartialEq)]
pub struct IptablesConfig {
    /// The xtables lock file, as a host path.
    pub lock_path: PathBuf,
    /// How often the sampler reads `/proc/locks` while the lock file is open (or always,
    /// without inotify).
    pub sample_period: Duration,
    /// With inotify, `/proc/locks` is read once the lock file has stayed open this long.
    pub lock_open_threshold: Duration,
    /// Watch the lock file with inotify (false: read `/proc/locks` every `sample_period`).
    pub lock_inotify: bool,
    /// A comparison of lock files younger than this is reused ([`MOUNT_SCAN_REUSE`]).
    pub mount_scan_reuse: Duration,
    /// What the lock rules judge by.
    pub thresholds: Thresholds,
    /// Process names that run iptables: exact names, or prefixes ending in `*`. Matched against
    /// `comm` and the base name of `argv[0]`.
    pub iptables_users: Vec<String>,
    /// The process whose namespaces are "the host's" (pid 1 on the host).
    pub reference_pid: u32,
    /// Where the kubelet writes pod logs (host path).
    pub pod_log_dir: PathBuf,
    /// Docker's data root (host path), for json-file logs of a kube-proxy container.
    pub docker_dir: PathBuf,
    /// Bytes read from the end of a kube-proxy log seen for the first time.
    pub log_tail_bytes: u64,
    /// Bytes of kube-proxy logs read per collection, over all files.
    pub log_max_bytes_per_cycle: u64,
    /// kube-proxy errors logged within this window raise findings.
    pub log_recent: Duration,
    /// Host paths of the `iptables` command, looked at in order to tell the backend.
    pub iptables_binaries: Vec<PathBuf>,
}

impl Default for IptablesConfig {
    fn default() -> Self {
        IptablesConfig {
            lock_path: PathBuf::from("/run/xtables.lock"),
            sample_period: Duration::from_millis(250),
            lock_open_threshold: Duration::from_millis(500),
            lock_inotify: true,
            mount_scan_reuse: MOUNT_SCAN_REUSE,
            thresholds: Thresholds::default(),
            iptables_users: [
                "iptables*",
                "ip6tables*",
                "kube-proxy",
                "kube-router",
                "calico-node",
                "cilium-agent",
                "flanneld",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            reference_pid: 1,
            pod_log_dir: PathBuf::from("/var/log/pods"),
            docker_dir: PathBuf::from("/var/lib/docker"),
            log_tail_bytes: 256 * 1024,
            log_max_bytes_per_cycle: 1024 * 1024,
            log_recent: Duration::from_secs(30 * 60),
            iptables_binaries: vec![
                PathBuf::from("/usr/sbin/iptables"),
                PathBuf::from("/sbin/iptables"),
            ],
        }
    }
}

/// `comm` of multi-call binaries that run iptables under another name (`comm` is the binary's
/// name, cut to 15 bytes; the command is their first argument).
const MULTI_CALL: &[&str] = &[
    "busybox",
    "xtables-multi",
    "xtables-nft-mul",
    "xtables-legacy-",
];

/// True when a process name matches one of the iptables-user patterns. `comm` is cut by the
/// kernel to 15 bytes, so a 15-byte name also matches a longer pattern it starts.
pub fn is_iptables_user(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| {
        if let Some(prefix) = p.strip_suffix('*') {
            name.starts_with(prefix) || (name.len() == 15 && prefix.starts_with(name))
        } else {
            name == p || (name.len() == 15 && p.starts_with(name))
        }
    })
}

/// The `iptables` collector. Its first collection starts the lock sampler thread; dropping
/// the collector stops it.
pub struct IptablesCollector {
    node: Node,
    config: IptablesConfig,
    /// Started at the first collection (constructors read nothing and start nothing).
    sampler: Option<Sampler>,
    /// Used only when the sampler thread could not be started: one sample per collection.
    fallback: Option<Tracker>,
    logs: LogScanner,
    /// Pod names for the UIDs and container ids found in cgroups (the shared pod index),
    /// refreshed only when a pod process is to be named, and then at most once a minute.
    pods: PodDirectory,
    /// The last comparison of iptables users' lock files with the host's, when it was made,
    /// and against which host lock ([`MOUNT_SCAN_REUSE`]).
    last_scan: Option<(Instant, Option<LockId>, MountScan)>,
    /// The lock sampler's clock ([`sampler::monotonic`] but in tests).
    sampler_clock: sampler::SamplerClock,
}

/// A comparison of lock files younger than this (against the same host lock) is reused:
/// `check`'s two samples a second apart make one, an agent's cycles (15 s) one each.
pub const MOUNT_SCAN_REUSE: Duration = Duration::from_secs(5);

impl IptablesCollector {
    pub fn new(node: Node, config: IptablesConfig) -> Self {
        let pods = PodDirectory::new(
            node.host().clone(),
            PodsConfig {
                pod_log_dir: config.pod_log_dir.clone(),
                docker_roots: vec![config.docker_dir.clone()],
                ..PodsConfig::default()
            },
        );
        IptablesCollector {
            node,
            config,
            sampler: None,
            fallback: None,
            logs: LogScanner::new(),
            pods,
            last_scan: None,
            sampler_clock: sampler::monotonic(),
        }
    }

    /// The same collector with a lock sampler that takes the time from `clock` (tests: how
    /// long a hold lasts is then what the test says, not what the scheduler made of it).
    pub fn with_sampler_clock(mut self, clock: sampler::SamplerClock) -> Self {
        self.sampler_clock = clock;
        self
    }

    /// Starts the lock sampler; the first collection does (constructors start nothing): its
    /// thread watches the lock file from then on (a `check` samples twice, so a hold between
    /// the two is seen whole). The first read of `/proc/locks`, when a legacy table makes a
    /// hold possible, is taken before this returns. Tests and benches that stage a hold before
    /// the first collection call it themselves.
    pub fn start_sampler(&mut self) {
        if self.sampler.is_some() || self.fallback.is_some() {
            return;
        }
        let host = self.node.host().clone();
        let lock = host.resolve(&self.config.lock_path);
        let legacy = backend::legacy_use(&host, self.config.reference_pid);
        let options = SamplerOptions {
            period: self.config.sample_period,
            open_threshold: self.config.lock_open_threshold,
            inotify: self.config.lock_inotify,
            read_at_start: legacy.lock_users_possible(),
        };
        match Sampler::start(
            host,
            lock,
            options,
            std::sync::Arc::clone(&self.sampler_clock),
        ) {
            Ok(s) => self.sampler = Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the xtables lock sampler thread; sampling once per collection");
                let mut tr = Tracker::new(Instant::now());
                tr.set_watch(LockWatch::Polling {
                    reason: format!(
                        "cannot start the sampler thread ({e}); /proc/locks is read once per collection"
                    ),
                });
                self.fallback = Some(tr);
            }
        }
    }

    /// The lock sampler runs (from the first collection on).
    pub fn sampler_started(&self) -> bool {
        self.sampler.is_some() || self.fallback.is_some()
    }

    fn lock_agent_path(&self) -> PathBuf {
        self.node.host().resolve(&self.config.lock_path)
    }

    fn window(&mut self) -> Window {
        self.start_sampler();
        if let Some(s) = &self.sampler {
            return s.drain();
        }
        let path = self.lock_agent_path();
        let tr = self
            .fallback
            .get_or_insert_with(|| Tracker::new(Instant::now()));
        tracker::sample_once(self.node.host(), &path, tr);
        tr.drain(Instant::now())
    }

    /// [`IptablesCollector::mount_gaps`], or its last result when younger than
    /// [`IptablesConfig::mount_scan_reuse`] and made against the same host lock.
    fn recent_mount_gaps(&mut self, host_lock: Option<LockId>) -> Result<MountScan, String> {
        let now = Instant::now();
        if let Some((at, lock, scan)) = &self.last_scan {
            if *lock == host_lock
                && now.saturating_duration_since(*at) < self.config.mount_scan_reuse
            {
                return Ok(scan.clone());
            }
        }
        let scan = self.mount_gaps(host_lock);
        self.last_scan = scan.as_ref().ok().map(|s| (now, host_lock, s.clone()));
        scan
    }

    /// Processes in the host network namespace, in their own mount namespace, that run
    /// iptables and do not see the host's lock file at the lock path.
    fn mount_gaps(&self, host_lock: Option<LockId>) -> Result<MountScan, String> {
        let host = self.node.host();
        let r = self.config.reference_pid;
        let hint = "node-doctor needs hostPID and CAP_SYS_PTRACE to compare namespaces";
        let host_net = ns::inode(host, r, "net")
            .ok_or_else(|| format!("cannot read /proc/{r}/ns/net ({hint})"))?;
        let host_mnt = ns::inode(host, r, "mnt")
            .ok_or_else(|| format!("cannot read /proc/{r}/ns/mnt ({hint})"))?;
        let procs = self.node.processes();
        // An iptables user by its `comm` (from the `stat` the table read); only a multi-call
        // binary (busybox, xtables-*-multi, whose `comm` is not the command it runs) has its
        // first argument read.
        let users = &self.config.iptables_users;
        let runs_iptables = |proc: &Proc| {
            if is_iptables_user(&proc.comm, users) {
                return true;
            }
            if !MULTI_CALL.contains(&&*proc.comm) {
                return false;
            }
            let args = procs.args(proc);
            let argv0 = args.as_deref().and_then(|a| a.first());
            let base = argv0.map(|a| a.rsplit('/').next().unwrap_or(a));
            base.is_some_and(|b| is_iptables_user(b, users))
        };
        // Only a process in the host's network namespace and in a mount namespace of its own
        // can miss the host's lock: the table filters by name or by namespace first,
        // whichever costs no read ([`Processes::apart_in_netns`]).
        let candidates = procs
            .apart_in_netns("iptables/mount_gaps", host_net, host_mnt, runs_iptables)
            .map_err(|e| e.to_string())?;
        let rel = self
            .config
            .lock_path
            .strip_prefix("/")
            .unwrap_or(&self.config.lock_path)
            .to_path_buf();
        let mut seen_mnt = HashSet::new();
        let mut gaps = Vec::new();
        let mut unreadable: Vec<String> = Vec::new();
        for (proc, mnt) in candidates {
            if !seen_mnt.insert(mnt) {
                continue;
            }
            let p = proc.pid;
            let root = host.proc_pid(p).join("root");
            let pod_lock = match LockId::of_path(&root.join(&rel)) {
                Ok(id) => Some(id),
                // Missing only if the process's root itself is still there (not an exited pid).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && root.metadata().is_ok() => {
                    None
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    unreadable.push(format!("{}: {e}", root.join(&rel).display()));
                    continue;
                }
            };
            let shared = match (pod_lock, host_lock) {
                (Some(a), Some(b)) => a == b,
                (None, None) => true,
                _ => false,
            };
            if !shared {
                gaps.push(MountGap {
                    proc: ProcInfo::read(host, Some(p)),
                    mnt_ns: mnt,
                    host_lock,
                    pod_lock,
                });
            }
        }
        Ok(MountScan { gaps, unreadable })
    }

    fn backend_facts(&self) -> BackendFacts {
        BackendFacts {
            legacy_tables: backend::legacy_tables(self.node.host(), self.config.reference_pid),
            binary: self
                .config
                .iptables_binaries
                .iter()
                .find_map(|p| backend::binary_backend(self.node.host(), p)),
        }
    }
}

/// The result of comparing iptables users' lock files with the host's.
#[derive(Clone)]
struct MountScan {
    gaps: Vec<MountGap>,
    /// Lock paths inside processes that could not be checked (permission), with the error.
    unreadable: Vec<String>,
}

/// Whether the lock file is absent (not there at all, as opposed to refused).
fn lock_absent(agent: &Path) -> bool {
    matches!(std::fs::symlink_metadata(agent), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Why there is no lock to watch, when its directory is missing: the lock path (host path),
/// and how the sampler waits for the directory.
struct MissingDir<'a> {
    lock_path: &'a str,
    how: &'a str,
}

/// The status of a lock that could not be watched. An nft-only node (no legacy table in the
/// host's network namespace) that never ran legacy iptables has no lock file by design:
/// nothing can hold it, so the check is complete and the note says why. Anything else
/// (refused, unreadable, or absent while legacy tables are in use) could not be looked at.
/// A missing lock directory is named as such, with how the sampler waits for it: a node
/// always has `/run`, so it is more likely the host root than the node.
fn lock_status(
    err: &str,
    no_lock: bool,
    absent: bool,
    nft_only: bool,
    dir: Option<MissingDir>,
) -> Status {
    let what = match &dir {
        Some(d) => format!(
            "at {}: its directory does not exist ({err}; waiting for it: {})",
            d.lock_path, d.how
        ),
        None => format!("({err})"),
    };
    if no_lock && (absent || dir.is_some()) && nft_only {
        return Status::Noted(format!(
            "no xtables lock {what} and no legacy iptables table in the host's network \
             namespace: an nft-only node has no lock to contend for"
        ));
    }
    Status::Degraded(match dir {
        Some(_) => format!(
            "xtables lock not watched: no lock {what}; legacy iptables tables are in use here \
             (or whether they are is unknown), and legacy iptables takes its lock there: does \
             the host root show the host's directory?"
        ),
        None if no_lock => format!(
            "xtables lock not watched: {err} (it appears once iptables has run on the host)"
        ),
        None => format!("xtables lock not watched: {err}"),
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// sample -> judge (in the rule file's words, rendered by the agent's context) + metrics.
impl Phases for IptablesCollector {
    const NAME: &'static str = "iptables";
    type Sample = Sample;

    /// Reads everything the rules look at; the status says what could not be read.
    fn sample(&mut self, _ctx: &CollectContext) -> Result<(Sample, Status), Status> {
        let mut status = Status::Ok;
        let lock_path = display(&self.config.lock_path);
        let mut window = self.window();
        let legacy = backend::legacy_use(self.node.host(), self.config.reference_pid);
        if let Some(err) = &window.error {
            // Known nft-only: the reference process's network view is visible and lists no
            // legacy table (a pid that is not visible tells nothing).
            let net_visible = self
                .node
                .host()
                .proc_pid(self.config.reference_pid)
                .join("net")
                .is_dir();
            let dir = match &window.watch {
                LockWatch::AwaitingDir { how, .. } => Some(MissingDir {
                    lock_path: &lock_path,
                    how,
                }),
                _ => None,
            };
            status = status.worst(lock_status(
                err,
                window.lock.is_none(),
                lock_absent(&self.lock_agent_path()),
                net_visible && legacy == backend::LegacyUse::NotInUse,
                dir,
            ));
        }
        if let LockWatch::Polling { reason } = &window.watch {
            // Still looked at, every sample period: complete, with a note.
            status = status.worst(Status::Noted(format!(
                "xtables lock polled through /proc/locks, not watched with inotify: {reason}"
            )));
        }
        let host_lock = LockId::of_path(&self.lock_agent_path()).ok();
        // Only a legacy iptables user takes the lock: with no legacy table in the host's
        // network namespace nobody can miss it, and no process is looked at.
        let mut gaps = if legacy.lock_users_possible() {
            self.recent_mount_gaps(host_lock)
        } else {
            Ok(MountScan {
                gaps: Vec::new(),
                unreadable: Vec::new(),
            })
        };
        // Name the pods of the processes found (namespace/name), from the shared pod index.
        let gap_procs = gaps
            .iter_mut()
            .flat_map(|s| s.gaps.iter_mut().map(|g| &mut g.proc));
        let mut in_pods: Vec<&mut ProcInfo> = window
            .procs_mut()
            .chain(gap_procs)
            .filter(|p| p.in_pod())
            .collect();
        if !in_pods.is_empty() {
            self.pods.refresh_if_stale(Instant::now());
            for p in in_pods.iter_mut() {
                p.name_pod(&self.pods);
            }
        }
        let mount_gaps = match gaps {
            Ok(scan) => {
                if !scan.unreadable.is_empty() {
                    status = status.worst(Status::Degraded(format!(
                        "cannot see the lock file inside {} process(es) ({}; node-doctor needs CAP_SYS_PTRACE)",
                        scan.unreadable.len(),
                        scan.unreadable.join("; ")
                    )));
                }
                scan.gaps
            }
            Err(reason) => {
                status = status.worst(Status::Degraded(reason));
                Vec::new()
            }
        };

        let limits = ScanLimits {
            pod_log_dir: self.config.pod_log_dir.clone(),
            docker_dir: self.config.docker_dir.clone(),
            tail_bytes: self.config.log_tail_bytes,
            max_bytes: self.config.log_max_bytes_per_cycle,
            recent_seconds: i64::try_from(self.config.log_recent.as_secs()).unwrap_or(i64::MAX),
        };
        let now = unix_now();
        let report = self.logs.scan(self.node.host(), &limits, now);
        if !report.errors.is_empty() {
            status = status.worst(Status::Degraded(format!(
                "cannot read kube-proxy logs: {}",
                report.errors.join("; ")
            )));
        }
        let since = now.saturating_sub(limits.recent_seconds);
        let logs = self
            .logs
            .stats
            .iter()
            .map(|(kind, s)| LogCount {
                kind: *kind,
                recent: s.recent_count(since) as u64,
                total: s.total,
                last_time: s.last_time.clone(),
                last_message: s.last_message.clone(),
                last_file: s.last_file.clone(),
            })
            .collect();
        let sample = Sample {
            lock_path,
            window,
            sample_period: self.config.sample_period,
            mount_gaps,
            logs,
            log_window: self.config.log_recent,
            backend: self.backend_facts(),
        };
        Ok((sample, status))
    }

    fn judge(&mut self, sample: &Sample) -> Vec<Draft> {
        judge::judge(sample, &self.config.thresholds)
    }

    fn metrics(&self, sample: &Sample) -> Vec<Metric> {
        judge::metrics(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_lock_on_an_nft_only_node_is_a_note_not_incomplete() {
        let err = "cannot stat /run/xtables.lock: No such file or directory (os error 2)";
        let s = lock_status(err, true, true, true, None);
        assert!(s.is_complete(), "{s:?}");
        assert!(s.message().unwrap().contains("nft-only"), "{s:?}");
        // Legacy tables in use (or unknown: unreadable, the pid not visible), the lock
        // absent: could not look.
        assert!(matches!(
            lock_status(err, true, true, false, None),
            Status::Degraded(_)
        ));
        // There but refused (permission, a FIFO): could not look.
        assert!(matches!(
            lock_status("permission denied", true, false, true, None),
            Status::Degraded(_)
        ));
        assert!(matches!(
            lock_status("inotify: too many watches", false, false, true, None),
            Status::Degraded(_)
        ));
    }

    /// A missing lock directory is named as such, with how it is waited for, not as a lock
    /// file that "appears once iptables has run" (it cannot, without its directory).
    #[test]
    fn a_missing_lock_directory_says_so_and_how_it_is_waited_for() {
        let err = "cannot stat /h/run: No such file or directory (os error 2)";
        let dir = || {
            Some(MissingDir {
                lock_path: "/run/xtables.lock",
                how: "inotify on /h, looked at every 5 s",
            })
        };
        // nft-only: complete, the note says both. `absent` is false when a component on the
        // way is a file (ENOTDIR): still no lock. An absent lock file alone reads as before.
        assert_eq!(
            lock_status(err, true, true, true, None).message(),
            Some(
                "no xtables lock (cannot stat /h/run: No such file or directory (os error 2)) \
                 and no legacy iptables table in the host's network namespace: an nft-only \
                 node has no lock to contend for"
            )
        );
        for absent in [true, false] {
            let s = lock_status(err, true, absent, true, dir());
            let m = s.message().unwrap();
            assert!(s.is_complete(), "{s:?}");
            assert!(
                m.contains("no xtables lock at /run/xtables.lock: its directory does not exist")
                    && m.contains("waiting for it: inotify on /h")
                    && m.contains("nft-only"),
                "{m}"
            );
        }
        let s = lock_status(err, true, true, false, dir());
        let m = s.message().unwrap();
        assert!(matches!(s, Status::Degraded(_)), "{s:?}");
        assert!(
            m.contains("its directory does not exist") && !m.contains("once iptables has run"),
            "{m}"
        );
    }

    #[test]
    fn iptables_user_patterns() {
        let p = IptablesConfig::default().iptables_users;
        for yes in [
            "iptables",
            "iptables-restor",
            "ip6tables-save",
            "kube-proxy",
            "kube-router",
            "calico-node",
            "cilium-agent",
            "flanneld",
        ] {
            assert!(is_iptables_user(yes, &p), "{yes}");
        }
        for no in ["kube-proxyx", "sleep", "kubelet", "ipset", ""] {
            assert!(!is_iptables_user(no, &p), "{no}");
        }
        let long = vec!["my-very-long-iptables-agent".to_string()];
        assert!(is_iptables_user("my-very-long-ip", &long));
        assert!(!is_iptables_user("my-very-long", &long));
    }
}
