//! Readers of the host's `/proc`: one module per source file, each a pure `parse` plus a thin
//! reader that adds the path to errors.
//!
//! Where the `procfs-core` crate (the parse-only half of `procfs`: it parses any `Read`, so
//! the host root stays ours to choose) models a file the way we need it, `parse` hands the
//! text to it and maps its types into ours: `loadavg`, `uptime`, `vmstat`, `diskstats`,
//! `/proc/<pid>/stat` and `/proc/<pid>/io`. Every other module is our own parser, and its
//! first comment says why: `procfs-core` has no model of the file, or its model is wrong for
//! our need, shown by a test named `procfs_core_*` on the input it gets wrong. Reading stays
//! ours in every case ([`crate::hostfs`]: capped, non-blocking, regular files only); the crate's
//! `current()`/`from_file` paths are never used, since they name the agent's own `/proc`.

pub mod boot_id;
pub mod buddyinfo;
pub mod cgroup;
pub mod delayacct;
pub mod diskstats;
pub mod file_nr;
pub mod limits;
pub mod loadavg;
pub mod locks;
pub mod meminfo;
pub mod mountinfo;
pub mod neigh_stat;
pub mod net_bonding;
pub mod net_listen;
pub mod net_route;
pub mod net_udp;
pub mod net_unix;
pub mod netstat;
pub mod nf_conntrack_stat;
pub mod ns;
pub mod pid;
pub mod pid_fds;
pub mod pid_io;
pub mod pressure;
pub mod snmp;
pub mod snmp6;
pub mod sockstat;
pub mod softnet_stat;
pub mod stat;
pub mod swaps;
pub mod uptime;
pub mod vmstat;

/// A `procfs-core` parse error in words for a status message. Its internal errors print the
/// crate's source path and "please report this procfs bug" on a second line, and a missing
/// field reads `NoneError`; a person reading why a collector is degraded needs neither.
pub(crate) fn core_error(e: &procfs_core::ProcError) -> String {
    match e {
        procfs_core::ProcError::InternalError(i) => {
            let msg = i
                .msg
                .strip_prefix("Internal Unwrap Error: ")
                .unwrap_or(&i.msg);
            msg.replace("NoneError", "a field is missing")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use procfs_core::FromRead;

    #[test]
    fn core_errors_read_as_sentences() {
        let e = procfs_core::LoadAverage::from_read("0.1 0.2".as_bytes()).unwrap_err();
        assert_eq!(super::core_error(&e), "a field is missing");
        let e = procfs_core::LoadAverage::from_read("0.1 0.2 0.3 1/x 5".as_bytes()).unwrap_err();
        let m = super::core_error(&e);
        assert!(!m.contains("procfs bug") && !m.contains('\n'), "{m}");
    }
}
