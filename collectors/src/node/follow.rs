//! The processes a collector follows between its runs (the daemons: `dockerd`, `containerd`,
//! `cri-dockerd`, `kubelet`, `kube-proxy`), remembered by pid and start time. The cache of
//! the host's processes is the node's table ([`super::processes`]); this is the bounded
//! memory of which of them a collector watches.
//!
//! A refresh first confirms the remembered processes: one read of `/proc/<pid>/stat` each,
//! the start time telling a live process from a recycled pid (and giving its CPU time). It
//! looks the names up in the shared table (which reads nothing for a process it already
//! knows) only when a remembered process is gone, when the caller wants a name it does not
//! know yet, the first time, and then by its [`Rescan`] policy. A healthy node therefore costs
//! a small read per followed process per run.

use std::collections::BTreeMap;

use super::Node;

/// When a refresh looks the names up again although nothing it follows is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rescan {
    /// Every this many refreshes (to see new processes of the names).
    Every(u32),
    /// Only while a name has no process, and then every this many refreshes.
    WhileMissing(u32),
}

/// One followed process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    /// Start time after boot, in clock ticks (`/proc/<pid>/stat` field 22; 0 for a process
    /// known by its `comm` alone, in a staged root).
    pub start_ticks: u64,
    /// The start time as the table read it (`None`: known by `comm` alone).
    start: Option<u64>,
    /// User + system CPU time, in clock ticks, at the last confirmation.
    pub cpu_ticks: u64,
    pub args: Vec<String>,
}

/// The followed processes by name.
#[derive(Debug)]
pub struct Followed {
    /// The names (`comm`) followed.
    names: &'static [&'static str],
    /// At most this many processes per name are kept (a node runs one of each; two
    /// containerd are a docker-managed one beside the system's).
    max_per_name: usize,
    rescan: Rescan,
    /// The call site's name for the shared process table.
    caller: &'static str,
    by_name: BTreeMap<&'static str, Vec<Proc>>,
    since_scan: u32,
    scanned_once: bool,
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh {
    /// The whole process table was walked.
    pub scanned: bool,
    /// `<root>/proc` could not be listed.
    pub unreadable: bool,
}

impl Followed {
    /// Follows up to `max_per_name` processes of each of `names`; `caller` names the call site
    /// for the shared table.
    pub fn new(
        names: &'static [&'static str],
        max_per_name: usize,
        rescan: Rescan,
        caller: &'static str,
    ) -> Followed {
        Followed {
            names,
            max_per_name: max_per_name.max(1),
            rescan,
            caller,
            by_name: BTreeMap::new(),
            since_scan: 0,
            scanned_once: false,
        }
    }

    /// The live processes of `name` (oldest first).
    pub fn get(&self, name: &str) -> &[Proc] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first live process of `name`.
    pub fn first(&self, name: &str) -> Option<&Proc> {
        self.get(name).first()
    }

    /// Confirms the remembered processes; looks the names up when one is gone, when `want`
    /// names one not known yet, the first time, and by the [`Rescan`] policy.
    pub fn refresh(&mut self, node: &Node, want: &[&str]) -> Refresh {
        let procs = node.processes();
        let mut vanished = false;
        for (name, list) in self.by_name.iter_mut() {
            list.retain_mut(|p| match procs.reread(p.pid) {
                Some(now) if now.start == p.start && &*now.comm == *name && !now.is_dead() => {
                    p.cpu_ticks = now.cpu_ticks.unwrap_or(0);
                    // Remembered by the table for a settled process (no read); read again
                    // for one it cannot key (a young process may still exec).
                    if let Some(args) = procs.args(&now) {
                        p.args = args.to_vec();
                    }
                    true
                }
                _ => {
                    vanished = true;
                    false
                }
            });
        }
        self.since_scan = self.since_scan.saturating_add(1);
        let missing = want.iter().any(|n| self.get(n).is_empty());
        let due = match self.rescan {
            Rescan::Every(n) => self.since_scan >= n.max(1),
            Rescan::WhileMissing(n) => {
                self.since_scan >= n.max(1) && self.names.iter().any(|n| self.get(n).is_empty())
            }
        };
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

    /// Every process whose `comm` is one of the names, from the shared process table (which
    /// may find them without listing `/proc`, [`super::daemons`]): no file is read for other
    /// processes; each match not confirmed by this refresh is read once (`stat`: its start
    /// time, state and CPU) and its arguments come from the table.
    fn scan(&mut self, node: &Node) -> Result<(), crate::ReadError> {
        let procs = node.processes();
        let named = procs.named_unconfirmed(self.caller, self.names)?;
        let mut found: BTreeMap<&'static str, Vec<Proc>> = BTreeMap::new();
        for p in &named {
            let Some(name) = self.names.iter().find(|n| **n == &*p.comm) else {
                continue;
            };
            let list = found.entry(name).or_default();
            if list.len() >= self.max_per_name {
                continue;
            }
            // Confirmed by this refresh already: no second read.
            if let Some(known) = self
                .by_name
                .get(name)
                .and_then(|l| l.iter().find(|k| k.pid == p.pid && k.start == p.start))
            {
                list.push(known.clone());
                continue;
            }
            // The process now (one `stat`); the table's arguments belong to it only.
            let Some(now) = procs.reread(p.pid) else {
                continue;
            };
            if now.is_dead() || &*now.comm != *name {
                continue;
            }
            let Some(args) = procs.args(&now) else {
                continue;
            };
            list.push(Proc {
                pid: p.pid,
                start_ticks: now.start.unwrap_or(0),
                start: now.start,
                cpu_ticks: now.cpu_ticks.unwrap_or(0),
                args: args.to_vec(),
            });
        }
        for list in found.values_mut() {
            list.sort_by_key(|p| (p.start_ticks, p.pid));
        }
        self.by_name = found;
        Ok(())
    }
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
        let mut table = Followed::new(crate::names::DAEMONS, 4, Rescan::Every(20), "test");
        let r = table.refresh(&host, &[]);
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
        assert!(!table.refresh(&host, &[]).scanned);
        assert!(table.refresh(&host, &["kubelet"]).scanned);
        // dockerd restarted under a new pid; the old pid reused by another process with
        // another start time.
        proc_dir(t.path(), 10, "dockerd", 900, "/usr/bin/dockerd -H fd://");
        proc_dir(t.path(), 13, "dockerd", 800, "/usr/bin/dockerd");
        let r = table.refresh(&host, &[]);
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
        assert!(table.refresh(&host, &[]).scanned);
        assert_eq!(
            table
                .get("dockerd")
                .iter()
                .map(|p| p.pid)
                .collect::<Vec<_>>(),
            vec![10]
        );
        // Rescan every N refreshes.
        let mut every3 = Followed::new(crate::names::DAEMONS, 4, Rescan::Every(3), "test");
        assert!(every3.refresh(&host, &[]).scanned);
        for _ in 0..2 {
            assert!(!every3.refresh(&host, &[]).scanned);
        }
        assert!(every3.refresh(&host, &[]).scanned);
        // Only while one is missing: a name found is not looked up again.
        let mut one = Followed::new(&["dockerd"], 1, Rescan::WhileMissing(2), "test");
        assert!(one.refresh(&host, &[]).scanned);
        for _ in 0..4 {
            assert!(!one.refresh(&host, &[]).scanned);
        }
        let mut none = Followed::new(&["kubelet"], 1, Rescan::WhileMissing(2), "test");
        assert!(none.refresh(&host, &[]).scanned);
        assert!(!none.refresh(&host, &[]).scanned);
        assert!(
            none.refresh(&host, &[]).scanned,
            "every 2 while it is missing"
        );
    }

    #[test]
    fn an_unreadable_proc_says_so() {
        let host = crate::node::Node::new(crate::HostPaths::new("/nonexistent-root"));
        let mut table = Followed::new(crate::names::DAEMONS, 4, Rescan::Every(20), "test");
        assert!(table.refresh(&host, &[]).unreadable);
    }
}
