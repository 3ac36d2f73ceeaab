//! Whether the EKS node monitoring agent (NMA) runs on this node: under `--kube-names nma`
//! node-doctor writes NMA's condition types, so where NMA itself runs the agent refuses to
//! start — two writers of one type reset each other's `lastTransitionTime`. NMA runs in a
//! pod with the host's pid namespace; its process is found in the host's `/proc` (the
//! DaemonSet's `hostPID`) by its binary's name.

use collectors::proc::pid;
use collectors::HostPaths;

/// NMA's binary (`cmd/eks-node-monitoring-agent` of aws/eks-node-monitoring-agent).
pub const BINARY: &str = "eks-node-monitoring-agent";

/// The first pid in the host's process table that is NMA, if any.
pub fn running(host: &HostPaths) -> Option<u32> {
    let pids = pid::list_pids(host).ok()?;
    pids.into_iter().find(|&p| {
        let comm = pid::comm(host, p).unwrap_or_default();
        let args = pid::args(host, p).unwrap_or_default();
        is_nma(&comm, args.first().map(String::as_str))
    })
}

/// NMA by its command name (the kernel keeps 15 bytes of it) or its first argument's file
/// name.
pub fn is_nma(comm: &str, argv0: Option<&str>) -> bool {
    let short = &BINARY[..15];
    comm == short
        || comm == BINARY
        || argv0
            .and_then(|a| a.rsplit('/').next())
            .is_some_and(|name| name == BINARY)
}
