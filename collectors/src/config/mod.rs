//! Readers of the container runtimes' and the kubelet's configuration: where their data
//! lives, how they log, and the kubelet's own disk thresholds.
//!
//! - [`docker`]: `/etc/docker/daemon.json` and a container's `config.v2.json` labels;
//! - [`containerd`]: `root` / `state` of `/etc/containerd/config.toml`;
//! - [`kubelet`]: the running kubelet's flags and its config file (YAML or JSON);
//! - [`kubeconfig`]: the API server a kubeconfig points at (server, CA, TLS server name);
//! - [`kube_proxy`]: kube-proxy's `--config` file and its health endpoint's address.
//!
//! Each exposes a pure `parse` over the file's text and a thin reader taking [`HostPaths`];
//! which of them a node runs, and where, is [`crate::node::discover`]'s.
//!
//! [`HostPaths`]: crate::HostPaths

pub mod containerd;
pub mod docker;
pub mod go_duration;
pub mod kube_proxy;
pub mod kubeconfig;
pub mod kubelet;

/// The value of a command-line flag in `args`: `--name=value` or `--name value`. The last
/// occurrence wins, as with Go's `flag` and `pflag` packages.
pub fn flag_value(args: &[String], name: &str) -> Option<String> {
    let mut found = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(rest) = a.strip_prefix(name) {
            if let Some(v) = rest.strip_prefix('=') {
                found = Some(v.to_string());
            } else if rest.is_empty() {
                if let Some(v) = args.get(i + 1) {
                    found = Some(v.clone());
                    i += 1;
                }
            }
        }
        i += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn flag_forms() {
        let a = args(
            "/usr/bin/kubelet --root-dir=/data/kubelet --config /etc/k/c.yaml --v=2 --root-dir2=x",
        );
        assert_eq!(
            flag_value(&a, "--root-dir").as_deref(),
            Some("/data/kubelet")
        );
        assert_eq!(flag_value(&a, "--config").as_deref(), Some("/etc/k/c.yaml"));
        assert_eq!(flag_value(&a, "--missing"), None);
        let a = args("dockerd --data-root=/a --data-root=/b");
        assert_eq!(flag_value(&a, "--data-root").as_deref(), Some("/b"));
        // A flag at the end without a value is absent.
        assert_eq!(flag_value(&args("kubelet --config"), "--config"), None);
    }
}
