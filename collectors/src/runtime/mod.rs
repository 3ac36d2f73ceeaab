//! Readers of container-runtime and kubelet configuration: where their data lives, how they
//! log, and the kubelet's own disk thresholds.
//!
//! - [`docker`]: `/etc/docker/daemon.json` and a container's `config.v2.json` labels;
//! - [`containerd`]: `root` / `state` of `/etc/containerd/config.toml`;
//! - [`kubelet`]: the running kubelet's flags and its config file (YAML or JSON);
//! - [`discover`]: all of the above together: which runtime and kubelet directories this host
//!   has, by role;
//! - [`health`]: the `runtime` collector (container runtime and kubelet health), built on
//!   the readers above.
//!
//! Each exposes a pure `parse` over the file's text and a thin reader taking [`HostPaths`].
//!
//! [`HostPaths`]: crate::HostPaths

pub mod containerd;
pub mod discover;
pub mod docker;
pub mod health;
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

/// Finds the first running process whose `comm` is `name` and returns its pid and arguments,
/// from the shared process table ([`crate::HostPaths::processes`]; `caller` names the call
/// site). `None` when no such process runs (or `/proc` is unreadable).
pub fn find_process(
    host: &crate::HostPaths,
    caller: &'static str,
    name: &str,
) -> Option<(u32, Vec<String>)> {
    find_processes(host, caller, &[name]).ok()?.remove(name)
}

/// The first running process of each `comm` in `names` (pid and arguments), from the shared
/// process table: no file is read for the processes of other names, and each one returned is
/// confirmed by one read of its `stat` (its arguments are remembered per pid and start time).
/// A process whose arguments cannot be read (it exited meanwhile) is skipped. An error when
/// `<root>/proc` cannot be listed.
pub fn find_processes(
    host: &crate::HostPaths,
    caller: &'static str,
    names: &[&str],
) -> Result<std::collections::HashMap<String, (u32, Vec<String>)>, crate::ReadError> {
    let procs = host.processes();
    let mut out = std::collections::HashMap::new();
    for p in procs.named(caller, names)? {
        if out.contains_key(&*p.comm) {
            continue;
        }
        if let Some(args) = procs.args(&p) {
            out.insert(p.comm.to_string(), (p.pid, args.to_vec()));
        }
    }
    Ok(out)
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
