//! Where the kubelet points pods for DNS: `--cluster-dns` on its command line, else
//! `clusterDNS` in its configuration file (`--config`, by default
//! `/var/lib/kubelet/config.yaml`). Command-line flags win over the file, as in the kubelet.
//!
//! Best effort: the YAML is scanned line by line for the top-level `clusterDNS` key (block
//! list or flow list; JSON configuration files work too), which is all this needs.

use std::path::PathBuf;

use crate::host::HostPaths;
use crate::proc::pid;

/// The value of a `--flag=value` or `--flag value` argument (the last one wins).
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(rest) = a.strip_prefix(flag) {
            if let Some(v) = rest.strip_prefix('=') {
                out = Some(v.to_string());
            } else if rest.is_empty() {
                if let Some(v) = it.next() {
                    out = Some(v.clone());
                }
            }
        }
    }
    out
}

/// `--cluster-dns` addresses (comma separated) from the kubelet's arguments.
pub fn cluster_dns_from_args(args: &[String]) -> Option<Vec<String>> {
    let v = flag_value(args, "--cluster-dns")?;
    let list: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The `--config` path from the kubelet's arguments.
pub fn config_path_from_args(args: &[String]) -> Option<String> {
    flag_value(args, "--config").filter(|s| !s.is_empty())
}

fn clean_item(s: &str) -> Option<String> {
    // Drop a trailing YAML comment first, then separators and quotes.
    let s = s.split(" #").next().unwrap_or(s);
    let s = s
        .trim()
        .trim_end_matches(',')
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// `clusterDNS` addresses from a kubelet configuration file (YAML or JSON).
pub fn cluster_dns_from_config(text: &str) -> Vec<String> {
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let key_rest = trimmed
            .strip_prefix("clusterDNS:")
            .or_else(|| trimmed.strip_prefix("\"clusterDNS\":"));
        let Some(rest) = key_rest else { continue };
        let rest = rest.trim();
        if let Some(flow) = rest.strip_prefix('[') {
            // Flow list, possibly spanning lines until `]`.
            let mut body = flow.to_string();
            while !body.contains(']') {
                match lines.next() {
                    Some(l) => body.push_str(l),
                    None => break,
                }
            }
            let body = body.split(']').next().unwrap_or("");
            return body.split(',').filter_map(clean_item).collect();
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            return clean_item(rest).into_iter().collect();
        }
        // Block list: following `- item` lines.
        let mut out = Vec::new();
        while let Some(next) = lines.peek() {
            let t = next.trim_start();
            if let Some(item) = t.strip_prefix("- ") {
                out.extend(clean_item(item));
                lines.next();
            } else if t.is_empty() || t.starts_with('#') {
                lines.next();
            } else {
                break;
            }
        }
        return out;
    }
    Vec::new()
}

/// What was found about the kubelet's DNS setting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeletDns {
    /// The pid of the running kubelet, when found.
    pub pid: Option<u32>,
    /// The host path of the configuration file consulted, when one was read.
    pub config_path: Option<String>,
    /// The cluster DNS addresses pods are given (empty when unknown).
    pub cluster_dns: Vec<String>,
}

/// Finds the kubelet among the host's processes and keeps its pid between samples, so the
/// process list is walked only when the kubelet is not known (and then at most every
/// `rescan_every` samples).
#[derive(Debug)]
pub struct KubeletFinder {
    pid: Option<u32>,
    samples_since_scan: u32,
    rescan_every: u32,
    default_config: PathBuf,
}

impl KubeletFinder {
    pub fn new(default_config: PathBuf, rescan_every: u32) -> KubeletFinder {
        KubeletFinder {
            pid: None,
            samples_since_scan: u32::MAX,
            rescan_every: rescan_every.max(1),
            default_config,
        }
    }

    fn is_kubelet(host: &HostPaths, p: u32) -> bool {
        pid::comm(host, p).is_some_and(|c| c == "kubelet")
    }

    fn find_pid(&mut self, host: &HostPaths) -> Option<u32> {
        if let Some(p) = self.pid {
            if Self::is_kubelet(host, p) {
                return Some(p);
            }
            self.pid = None;
            self.samples_since_scan = u32::MAX;
        }
        self.samples_since_scan = self.samples_since_scan.saturating_add(1);
        if self.samples_since_scan < self.rescan_every {
            return None;
        }
        self.samples_since_scan = 0;
        let pids = pid::list_pids(host).ok()?;
        self.pid = pids.into_iter().find(|p| Self::is_kubelet(host, *p));
        self.pid
    }

    /// Looks up the kubelet's cluster DNS on the host.
    pub fn lookup(&mut self, host: &HostPaths) -> KubeletDns {
        let pid = self.find_pid(host);
        let args = pid.and_then(|p| pid::args(host, p)).unwrap_or_default();
        let config = config_path_from_args(&args)
            .unwrap_or_else(|| self.default_config.to_string_lossy().into_owned());
        let mut out = KubeletDns {
            pid,
            config_path: None,
            cluster_dns: Vec::new(),
        };
        if let Some(list) = cluster_dns_from_args(&args) {
            out.cluster_dns = list;
            return out;
        }
        if let Ok(text) = std::fs::read_to_string(host.resolve(&config)) {
            out.cluster_dns = cluster_dns_from_config(&text);
            out.config_path = Some(config);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn flags_in_both_forms() {
        // The handbook's example: `/usr/bin/kubelet --cluster-dns=172.16.14.217 ...`.
        let a = args("/usr/bin/kubelet --cluster-dns=172.16.14.217 --v=2");
        assert_eq!(
            cluster_dns_from_args(&a),
            Some(vec!["172.16.14.217".to_string()])
        );
        let a =
            args("/usr/bin/kubelet --cluster-dns 169.254.20.10,10.96.0.10 --config /etc/k/c.yaml");
        assert_eq!(
            cluster_dns_from_args(&a),
            Some(vec!["169.254.20.10".to_string(), "10.96.0.10".to_string()])
        );
        assert_eq!(config_path_from_args(&a), Some("/etc/k/c.yaml".into()));
        let a = args("/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml --cluster-dns-x=1");
        assert_eq!(cluster_dns_from_args(&a), None);
        assert_eq!(
            config_path_from_args(&a),
            Some("/var/lib/kubelet/config.yaml".into())
        );
        assert_eq!(cluster_dns_from_args(&args("kubelet --cluster-dns")), None);
    }

    #[test]
    fn config_block_flow_and_json() {
        let yaml = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 169.254.20.10 # node-local\n  - \"10.96.0.10\"\nclusterDomain: cluster.local\n";
        assert_eq!(
            cluster_dns_from_config(yaml),
            vec!["169.254.20.10".to_string(), "10.96.0.10".to_string()]
        );
        let flow = "clusterDomain: cluster.local\nclusterDNS: [10.96.0.10, '10.96.0.11']\n";
        assert_eq!(
            cluster_dns_from_config(flow),
            vec!["10.96.0.10".to_string(), "10.96.0.11".to_string()]
        );
        let json = "{\n  \"kind\": \"KubeletConfiguration\",\n  \"clusterDNS\": [\n    \"10.96.0.10\"\n  ],\n  \"clusterDomain\": \"cluster.local\"\n}";
        assert_eq!(
            cluster_dns_from_config(json),
            vec!["10.96.0.10".to_string()]
        );
        assert!(cluster_dns_from_config("kind: KubeletConfiguration\n").is_empty());
    }

    proptest! {
        #[test]
        fn config_scan_never_panics(text in "(clusterDNS:|\\[|\\]|- |,|\"|'| |#|[0-9.]{1,8}|\n){0,40}") {
            let _ = cluster_dns_from_config(&text);
        }

        #[test]
        fn config_scan_never_panics_on_anything(text in "\\PC*") {
            let _ = cluster_dns_from_config(&text);
        }
    }
}
