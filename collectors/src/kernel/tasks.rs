//! The few task counts the kernel rules need, from two `/proc` files:
//! - `/proc/loadavg` field 4, `running/total`: kernel scheduling entities (threads) that exist;
//! - `/proc/stat` `procs_blocked`: tasks in uninterruptible sleep (D state) right now;
//! - `/proc/sys/...` single-integer sysctls (`kernel/pid_max`, `kernel/threads-max`,
//!   `net/core/somaxconn`, `net/ipv4/tcp_max_syn_backlog`).
//!
//! Deliberately tiny: the `load` collector's full `proc/loadavg.rs` and `proc/stat.rs` readers
//! (not merged when this was written) supersede the two parsers here once they land.

use crate::host::HostPaths;

/// The total task count of a `/proc/loadavg` text (`0.12 0.08 0.02 1/234 5678`).
pub fn parse_loadavg_tasks(text: &str) -> Option<u64> {
    let field = text.split_whitespace().nth(3)?;
    let (_, total) = field.split_once('/')?;
    total.parse().ok()
}

/// `procs_blocked N` of a `/proc/stat` text.
pub fn parse_procs_blocked(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == "procs_blocked").then_some(())?;
        it.next()?.parse().ok()
    })
}

/// A single-integer file (sysctl) under `<root>/proc/sys`, `None` when absent or garbage.
pub fn sysctl(host: &HostPaths, rest: &str) -> Option<u64> {
    let text = std::fs::read_to_string(host.proc_file("sys").join(rest)).ok()?;
    text.trim().parse().ok()
}

/// Total tasks from `<root>/proc/loadavg`.
pub fn tasks(host: &HostPaths) -> Option<u64> {
    let text = std::fs::read_to_string(host.proc_file("loadavg")).ok()?;
    parse_loadavg_tasks(&text)
}

/// `procs_blocked` from `<root>/proc/stat`.
pub fn procs_blocked(host: &HostPaths) -> Option<u64> {
    let text = std::fs::read_to_string(host.proc_file("stat")).ok()?;
    parse_procs_blocked(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_files() {
        // Kernel 6.18.44 (this VM).
        assert_eq!(
            parse_loadavg_tasks("0.52 0.41 0.35 2/219 23311\n"),
            Some(219)
        );
        // Kernel 3.10 (CentOS 7): same format.
        assert_eq!(
            parse_loadavg_tasks("34.64 35.80 35.76 3/1580 98765\n"),
            Some(1580)
        );
        assert_eq!(parse_loadavg_tasks("0.1 0.2 0.3\n"), None);
        let stat = "cpu  10 0 5 100 2 0 0 0 0 0\nintr 1 2\nctxt 333\nbtime 1795152121\nprocesses 23400\nprocs_running 2\nprocs_blocked 7\nsoftirq 1 2\n";
        assert_eq!(parse_procs_blocked(stat), Some(7));
        assert_eq!(parse_procs_blocked("cpu 1 2 3\n"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_loadavg_tasks(&s);
            let _ = parse_procs_blocked(&s);
        }
    }
}
