//! Where the kubelet points pods for DNS: `--cluster-dns` on its command line, else
//! `clusterDNS` in its configuration file (`--config`, by default
//! `/var/lib/kubelet/config.yaml`). Command-line flags win over the file, as in the kubelet.
//!
//! Parsing is [`crate::config::kubelet`]'s (the same reader the disk collector uses); this
//! module only follows the kubelet's process between samples so the process table is searched
//! rarely.

use std::path::PathBuf;

use crate::config::kubelet;
use crate::node::follow::Followed;
use crate::node::{self, Node};

pub use crate::config::kubelet::{cluster_dns_from_args, cluster_dns_from_config};

/// What was found about the kubelet's DNS setting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeletDns {
    /// The pid of the running kubelet, when found.
    pub pid: Option<u32>,
    /// The host path of the configuration file consulted, when one was read.
    pub config_path: Option<String>,
    /// The cluster DNS addresses pods are given (empty when unknown).
    pub cluster_dns: Vec<String>,
    /// Why the configuration file could not be read, when it exists but was refused or is
    /// not understood (a missing file is not an error: flags and defaults apply).
    pub config_error: Option<String>,
}

/// The first process of a followed name: its pid and arguments.
pub(crate) fn first(f: &Followed, name: &str) -> Option<(u32, Vec<String>)> {
    f.first(name).map(|p| (p.pid, p.args.clone()))
}

/// Follows the kubelet among the host's processes ([`node::kubelet::KubeletFinder`]) and
/// reads its DNS setting (the configuration file only when `--cluster-dns` is not given).
#[derive(Debug)]
pub struct KubeletFinder {
    finder: node::kubelet::KubeletFinder,
}

impl KubeletFinder {
    pub fn new(default_config: PathBuf, rescan_every: u32) -> KubeletFinder {
        KubeletFinder {
            finder: node::kubelet::KubeletFinder::new(
                default_config,
                rescan_every,
                "conntrack/kubelet",
            ),
        }
    }

    /// Looks up the kubelet's cluster DNS on the host.
    pub fn lookup(&mut self, node: &Node) -> KubeletDns {
        let v = self
            .finder
            .lookup_with(node, |args| cluster_dns_from_args(args).is_none());
        KubeletDns {
            pid: v.pid,
            cluster_dns: kubelet::cluster_dns(&v.args, v.config.as_ref()),
            config_path: v.config_path,
            config_error: v.config_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn keeps_the_pid_and_rescans_only_every_n_samples() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        write(
            root,
            "var/lib/kubelet/config.yaml",
            "clusterDNS:\n- 10.96.0.10\n",
        );
        let host = crate::node::Node::new(crate::HostPaths::new(root));
        let mut f = KubeletFinder::new(PathBuf::from("/var/lib/kubelet/config.yaml"), 3);
        // No kubelet: the first call walks /proc, the next two do not.
        let d = f.lookup(&host);
        assert_eq!((d.pid, d.cluster_dns.len()), (None, 1));
        assert_eq!(
            d.config_path.as_deref(),
            Some("/var/lib/kubelet/config.yaml")
        );
        write(root, "proc/77/comm", "kubelet\n");
        write(
            root,
            "proc/77/cmdline",
            "/usr/bin/kubelet\0--cluster-dns=169.254.20.10\0",
        );
        assert_eq!(f.lookup(&host).pid, None);
        assert_eq!(f.lookup(&host).pid, None);
        let d = f.lookup(&host);
        assert_eq!(d.pid, Some(77));
        assert_eq!(d.cluster_dns, vec!["169.254.20.10".to_string()]);
        assert_eq!(d.config_path, None);
        // The remembered pid is checked, not rediscovered; when it exits, the scan restarts.
        std::fs::remove_dir_all(root.join("proc/77")).unwrap();
        write(root, "proc/78/comm", "kubelet\n");
        write(root, "proc/78/cmdline", "/usr/bin/kubelet\0");
        assert_eq!(f.lookup(&host).pid, Some(78));
    }
}
