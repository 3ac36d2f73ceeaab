//! The few task counts the kernel rules need, through the shared `/proc` readers:
//! - `/proc/loadavg` field 4, `running/total`: kernel scheduling entities (threads) that exist;
//! - `/proc/stat` `procs_blocked`: tasks in uninterruptible sleep (D state) right now;
//! - `/proc/sys/...` single-integer sysctls (`kernel/pid_max`, `kernel/threads-max`,
//!   `net/core/somaxconn`, `net/ipv4/tcp_max_syn_backlog`).
//!
//! `/proc/sys/net/*` shows the network namespace of the process reading it (there is no
//! `/proc/<pid>/sys`): those are the host's only when node-doctor is in the host's namespace,
//! which [`net_sysctl`] checks.

use crate::collector::HostNetns;
use crate::host::HostPaths;
use crate::proc::{loadavg, stat};
use crate::ReadError;

/// The `/proc/sys` paths of the limits PID exhaustion is judged against.
pub const PID_MAX: &str = "kernel/pid_max";
pub const THREADS_MAX: &str = "kernel/threads-max";

/// The sysctl(8) name of a `/proc/sys` path: `kernel/pid_max` -> `kernel.pid_max`.
pub fn sysctl_name(path: &str) -> String {
    path.replace('/', ".")
}

/// A single-integer file (sysctl) under `<root>/proc/sys`, `None` when absent or garbage.
pub fn sysctl(host: &HostPaths, rest: &str) -> Option<u64> {
    let text =
        crate::hostfs::read_text(&host.proc_file("sys").join(rest), crate::hostfs::cap::VALUE)
            .ok()?;
    text.trim().parse().ok()
}

/// A per-network-namespace sysctl (`net/...`) of the host: read only when `<root>/proc/sys/net`
/// shows the host's namespace ([`HostNetns::sysctls_are_hosts`]); `None` otherwise, so that
/// node-doctor's own namespace's value is never reported as the node's.
pub fn net_sysctl(host: &HostPaths, host_netns: HostNetns, rest: &str) -> Option<u64> {
    if !host_netns.sysctls_are_hosts() {
        return None;
    }
    sysctl(host, rest)
}

/// Total tasks from `<root>/proc/loadavg`.
pub fn tasks(host: &HostPaths) -> Result<u64, ReadError> {
    loadavg::read(&host.proc_file("loadavg")).map(|l| l.total)
}

/// `procs_blocked` from `<root>/proc/stat` (`None` when the kernel does not print it).
pub fn procs_blocked(host: &HostPaths) -> Result<Option<u64>, ReadError> {
    Ok(stat::read(&host.proc_file("stat"))?.procs_blocked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tasks_blocked_and_sysctls_from_a_host_root() {
        let t = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let path = t.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        // Kernel 6.18.44 (this VM).
        w("proc/loadavg", "0.52 0.41 0.35 2/219 23311\n");
        w("proc/stat", "cpu  10 0 5 100 2 0 0 0 0 0\nintr 1 2\nctxt 333\nbtime 1795152121\nprocesses 23400\nprocs_running 2\nprocs_blocked 7\nsoftirq 1 2\n");
        w("proc/sys/kernel/pid_max", "4194304\n");
        w("proc/sys/kernel/threads-max", "garbage\n");
        let host = HostPaths::new(t.path());
        assert_eq!(tasks(&host).unwrap(), 219);
        assert_eq!(procs_blocked(&host).unwrap(), Some(7));
        assert_eq!(sysctl(&host, "kernel/pid_max"), Some(4194304));
        assert_eq!(sysctl(&host, "kernel/threads-max"), None);
        assert_eq!(sysctl(&host, "net/core/somaxconn"), None);
    }

    #[test]
    fn net_sysctls_only_from_the_hosts_network_namespace() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("proc/sys/net/core/somaxconn");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "4096\n").unwrap();
        let host = HostPaths::new(t.path());
        let read = |n| net_sysctl(&host, n, "net/core/somaxconn");
        assert_eq!(read(HostNetns::Same), Some(4096));
        assert_eq!(read(HostNetns::NotProcfs), Some(4096));
        // The agent's own namespace's value: never reported as the host's.
        assert_eq!(read(HostNetns::Different), None);
        assert_eq!(read(HostNetns::Unknown), None);
    }
}
