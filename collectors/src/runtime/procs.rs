//! The daemons' processes (`dockerd`, `containerd`, `cri-dockerd`, `kubelet`, `kube-proxy`),
//! remembered
//! between collections by pid and start time.
//!
//! A collection first confirms the remembered processes: one read of `/proc/<pid>/stat` each,
//! the start time telling a live process from a recycled pid. It looks the daemons up in the
//! shared process table ([`crate::proc::table`], which reads nothing for a process it already
//! knows) only when a remembered process is gone, when the caller wants a daemon it does not
//! know yet, or every `rescan` collections (to see new daemons). A healthy node therefore
//! costs a small read per daemon per collection.

use std::collections::BTreeMap;

use crate::node::processes as table;
use crate::node::Node;
use crate::proc::pid;

/// The process names (`comm`) followed.
pub const NAMES: &[&str] = crate::names::DAEMONS;

/// At most this many processes per name are kept (a node runs one of each; two containerd
/// are a docker-managed one beside the system's).
const MAX_PER_NAME: usize = 4;

/// One followed process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    /// Start time after boot, in clock ticks (`/proc/<pid>/stat` field 22).
    pub start_ticks: u64,
    /// User + system CPU time, in clock ticks, at the last confirmation.
    pub cpu_ticks: u64,
    pub args: Vec<String>,
}

/// The followed processes by name.
#[derive(Debug, Default)]
pub struct ProcessTable {
    by_name: BTreeMap<&'static str, Vec<Proc>>,
    since_scan: u32,
    scanned_once: bool,
    buf: Vec<u8>,
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh {
    /// The whole process table was walked.
    pub scanned: bool,
    /// `<root>/proc` could not be listed.
    pub unreadable: bool,
}

impl ProcessTable {
    pub fn new() -> ProcessTable {
        ProcessTable::default()
    }

    /// The live processes of `name` (oldest first).
    pub fn get(&self, name: &str) -> &[Proc] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first live process of `name`.
    pub fn first(&self, name: &str) -> Option<&Proc> {
        self.get(name).first()
    }

    /// Confirms the remembered processes; walks `<root>/proc` when one is gone, when `want`
    /// names a daemon not known yet, or every `rescan` refreshes.
    pub fn refresh(&mut self, node: &Node, want: &[&str], rescan: u32) -> Refresh {
        let host = node.host();
        let mut vanished = false;
        let mut buf = std::mem::take(&mut self.buf);
        for procs in self.by_name.values_mut() {
            procs.retain_mut(|p| match pid::stat_with(host, p.pid, &mut buf) {
                Some(st) if st.starttime == p.start_ticks && !is_dead(st.state) => {
                    p.cpu_ticks = st.utime.saturating_add(st.stime);
                    true
                }
                _ => {
                    vanished = true;
                    false
                }
            });
        }
        self.buf = buf;
        self.since_scan = self.since_scan.saturating_add(1);
        let missing = want.iter().any(|n| self.get(n).is_empty());
        let due = self.since_scan >= rescan.max(1);
        if !(vanished || missing || due || !self.scanned_once) {
            return Refresh {
                scanned: false,
                unreadable: false,
            };
        }
        self.since_scan = 0;
        self.scanned_once = true;
        match self.scan(node) {
            Ok(()) => Refresh {
                scanned: true,
                unreadable: false,
            },
            Err(_) => Refresh {
                scanned: true,
                unreadable: true,
            },
        }
    }

    /// Every process whose `comm` is one of [`NAMES`], from the shared process table
    /// ([`crate::proc::table`], which may find them without listing `/proc`,
    /// [`crate::proc::daemons`]): no file is read for other processes; each match not confirmed
    /// by this refresh is read once (`stat`: its start time, state and CPU) and its arguments
    /// come from the table.
    fn scan(&mut self, node: &Node) -> Result<(), crate::ReadError> {
        let host = node.host();
        let procs = node.processes();
        let named = procs.named_unconfirmed("runtime/procs", NAMES)?;
        let mut found: BTreeMap<&'static str, Vec<Proc>> = BTreeMap::new();
        let mut buf = std::mem::take(&mut self.buf);
        for p in &named {
            let Some(name) = NAMES.iter().find(|n| **n == &*p.comm) else {
                continue;
            };
            let list = found.entry(name).or_default();
            if list.len() >= MAX_PER_NAME {
                continue;
            }
            // Confirmed by this refresh already: no second read.
            if let Some(known) = self.by_name.get(name).and_then(|l| {
                l.iter()
                    .find(|k| k.pid == p.pid && Some(k.start_ticks) == p.start)
            }) {
                list.push(known.clone());
                continue;
            }
            let Some(st) = pid::stat_with(host, p.pid, &mut buf) else {
                continue;
            };
            if is_dead(st.state) || st.comm != *name {
                continue;
            }
            // The table's arguments belong to the process of this start time only.
            let now = table::Proc {
                start: Some(st.starttime),
                ..p.clone()
            };
            let Some(args) = procs.args(&now) else {
                continue;
            };
            list.push(Proc {
                pid: p.pid,
                start_ticks: st.starttime,
                cpu_ticks: st.utime.saturating_add(st.stime),
                args: args.to_vec(),
            });
        }
        self.buf = buf;
        for list in found.values_mut() {
            list.sort_by_key(|p| (p.start_ticks, p.pid));
        }
        self.by_name = found;
        Ok(())
    }
}

/// A zombie (`Z`, exited and not reaped) or dead (`X`) process is not a running daemon.
fn is_dead(state: char) -> bool {
    matches!(state, 'Z' | 'X')
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`sysconf(_SC_CLK_TCK)`; the host's
/// kernel is the agent's).
pub fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(pid: u32, comm: &str, start: u64) -> String {
        format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 12 0 {start} 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    }

    fn proc_dir(root: &std::path::Path, pid: u32, comm: &str, start: u64, args: &str) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(d.join("stat"), stat_line(pid, comm, start)).unwrap();
        std::fs::write(d.join("cmdline"), args.replace(' ', "\0") + "\0").unwrap();
    }

    #[test]
    fn confirms_by_start_time_and_rescans_when_one_is_gone() {
        let t = tempfile::tempdir().unwrap();
        let host = crate::node::Node::new(crate::HostPaths::new(t.path()));
        proc_dir(t.path(), 10, "dockerd", 500, "/usr/bin/dockerd -H fd://");
        proc_dir(t.path(), 11, "containerd", 400, "/usr/bin/containerd");
        proc_dir(t.path(), 12, "sleep", 400, "sleep 1");
        let mut table = ProcessTable::new();
        let r = table.refresh(&host, &[], 20);
        assert!(r.scanned && !r.unreadable);
        assert_eq!(table.first("dockerd").unwrap().pid, 10);
        assert_eq!(table.first("dockerd").unwrap().cpu_ticks, 10);
        assert_eq!(
            table.first("containerd").unwrap().args[0],
            "/usr/bin/containerd"
        );
        assert!(table.first("sleep").is_none());
        // Nothing changed: confirmed without a scan; a wanted name that does not run does
        // cause one.
        assert!(!table.refresh(&host, &[], 20).scanned);
        assert!(table.refresh(&host, &["kubelet"], 20).scanned);
        // dockerd restarted under a new pid; the old pid reused by another process with
        // another start time.
        proc_dir(t.path(), 10, "dockerd", 900, "/usr/bin/dockerd -H fd://");
        proc_dir(t.path(), 13, "dockerd", 800, "/usr/bin/dockerd");
        let r = table.refresh(&host, &[], 20);
        assert!(r.scanned);
        let d: Vec<(u32, u64)> = table
            .get("dockerd")
            .iter()
            .map(|p| (p.pid, p.start_ticks))
            .collect();
        assert_eq!(d, vec![(13, 800), (10, 900)]);
        // A daemon that exited but was not reaped (a zombie) is gone.
        let zombie = stat_line(13, "dockerd", 800).replace(") S ", ") Z ");
        std::fs::write(t.path().join("proc/13/stat"), zombie).unwrap();
        assert!(table.refresh(&host, &[], 20).scanned);
        assert_eq!(
            table
                .get("dockerd")
                .iter()
                .map(|p| p.pid)
                .collect::<Vec<_>>(),
            vec![10]
        );
        // Rescan every N refreshes.
        for _ in 0..2 {
            assert!(!table.refresh(&host, &[], 3).scanned);
        }
        assert!(table.refresh(&host, &[], 3).scanned);
    }

    #[test]
    fn an_unreadable_proc_says_so() {
        let host = crate::node::Node::new(crate::HostPaths::new("/nonexistent-root"));
        let mut table = ProcessTable::new();
        assert!(table.refresh(&host, &[], 1).unreadable);
        assert!(ticks_per_second() >= 1);
    }
}
