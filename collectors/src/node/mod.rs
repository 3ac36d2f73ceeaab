//! The node context: what every collector of one agent shares about the node it runs on. The
//! agent builds one [`Node`] at start and hands a clone to each collector; tests build their
//! own. It is the floor between the readers (`proc/`, `sys/`, `config/`, which take a
//! [`HostPaths`] and machine facts and parse files) and the collectors:
//!
//! - the host's paths ([`HostPaths`]: a root and path joins, nothing else);
//! - the one process table ([`processes`]): `<root>/proc` listed at most once a second for
//!   every collector, a process examined once, the daemons found where they show themselves
//!   ([`daemons`]);
//! - the kernel-log hub ([`crate::kmsg`]): one read of the log for its readers;
//! - the machine facts ([`Facts`]): page size and clock ticks, and the online CPUs;
//! - pid 1's unix socket and mount tables, read once a round for every collector when the
//!   agent turns sharing on ([`shared`]).
//!
//! Clones share the table, the hub and the tables: that is what makes them one node.

pub mod daemons;
pub mod discover;
pub mod follow;
pub mod kubelet;
pub mod located;
pub mod processes;
pub mod shared;

use std::sync::Arc;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::kmsg::{Hubs, KmsgConfig, KmsgReader};
use crate::proc::{mountinfo, net_unix};
use processes::{ProcessTable, Processes};
use shared::SharedReads;

/// Facts about the machine that readers need to turn what the kernel reports into units: the
/// host's kernel is the agent's, so these are the agent's own `sysconf` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Bytes per page (`sysconf(_SC_PAGESIZE)`): `buddyinfo` counts pages.
    pub page_size: u64,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`): `/proc/<pid>/stat` times and start
    /// times count them.
    pub clock_ticks: u64,
}

impl Facts {
    /// This machine's, from `sysconf` (4096 and 100 where it cannot tell).
    pub fn of_this_machine() -> Facts {
        use nix::unistd::{sysconf, SysconfVar};
        let positive = |v: SysconfVar, default: u64| match sysconf(v) {
            Ok(Some(n)) if n > 0 => n as u64,
            _ => default,
        };
        Facts {
            page_size: positive(SysconfVar::PAGE_SIZE, 4096),
            clock_ticks: positive(SysconfVar::CLK_TCK, 100),
        }
    }
}

/// The node context (see the module documentation).
#[derive(Debug, Clone)]
pub struct Node {
    host: HostPaths,
    facts: Facts,
    processes: Arc<ProcessTable>,
    kmsg: Arc<Hubs>,
    shared: Arc<SharedReads>,
}

/// Two nodes are the same node when their hosts are.
impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.host == other.host
    }
}

impl Eq for Node {}

impl Node {
    /// The node whose `/` is at `host`'s root, with this machine's facts.
    pub fn new(host: HostPaths) -> Node {
        Node::with_facts(host, Facts::of_this_machine())
    }

    /// The node with the given machine facts (tests).
    pub fn with_facts(host: HostPaths, facts: Facts) -> Node {
        crate::hostfs::vouch_kernel_fs(&host);
        Node {
            processes: Arc::new(ProcessTable::new(processes::DEFAULT_CAP, facts.clock_ticks)),
            host,
            facts,
            kmsg: Arc::default(),
            shared: Arc::default(),
        }
    }

    /// The node with a process table of its own (tests of the table's bounds).
    pub fn with_table(host: HostPaths, table: ProcessTable) -> Node {
        crate::hostfs::vouch_kernel_fs(&host);
        Node {
            host,
            facts: Facts::of_this_machine(),
            processes: Arc::new(table),
            kmsg: Arc::default(),
            shared: Arc::default(),
        }
    }

    /// This node with pid 1's unix socket and mount tables shared by its clones: a table read
    /// within `window` serves every caller ([`shared`]). Call before cloning the node for
    /// its collectors; a zero window (the default) shares nothing.
    pub fn sharing_reads(mut self, window: std::time::Duration) -> Node {
        self.shared = Arc::new(SharedReads::new(window));
        self
    }

    /// The host's paths.
    pub fn host(&self) -> &HostPaths {
        &self.host
    }

    /// How many `<root>/proc/<pid>` paths were built ([`HostPaths::per_process_paths`]).
    pub fn per_process_paths(&self) -> u64 {
        self.host.per_process_paths()
    }

    /// The machine facts.
    pub fn facts(&self) -> Facts {
        self.facts
    }

    /// The host's processes, through the table this node's clones share.
    pub fn processes(&self) -> Processes<'_> {
        Processes::new(&self.host, &self.processes, &self.shared)
    }

    /// The unix sockets of pid 1's network namespace bound to a path
    /// ([`net_unix::read_bound`]), shared within the window of [`Node::sharing_reads`].
    pub fn unix_sockets(&self) -> Result<Arc<Vec<net_unix::Bound>>, ReadError> {
        self.shared.unix_sockets(&self.host)
    }

    /// pid 1's mounts ([`mountinfo::read`]), shared within the window of
    /// [`Node::sharing_reads`].
    pub fn mounts(&self) -> Result<Arc<Vec<mountinfo::Mount>>, ReadError> {
        self.shared.mounts(&self.host)
    }

    /// Reads made of pid 1's unix socket table and of its mount table through this node.
    pub fn shared_reads(&self) -> (u64, u64) {
        self.shared.reads()
    }

    /// Answers the daemon locator found through this node (not taken from a shared one).
    pub fn daemons_located(&self) -> u64 {
        self.shared.located()
    }

    /// A reader of the kernel log with its own position; the readers of this node made
    /// before the first read share one read of the device ([`crate::kmsg`]).
    pub fn kmsg_reader(&self, config: KmsgConfig) -> KmsgReader {
        KmsgReader::new(&self.host, &self.kmsg, config)
    }

    /// The online CPUs' numbers (`<root>/sys/devices/system/cpu/online`), read at each call:
    /// CPUs can be brought online and offline.
    pub fn online_cpus(&self) -> Result<Vec<u32>, ReadError> {
        crate::sys::cpu_online::read(&self.host)
    }
}
