//! Docker: `/etc/docker/daemon.json` (data and exec roots, logging options, API sockets, the
//! containerd it uses) and a container's `<data-root>/containers/<id>/config.v2.json` (the
//! Kubernetes labels naming its pod).

use std::path::Path;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

pub const DEFAULT_DATA_ROOT: &str = "/var/lib/docker";
pub const DEFAULT_EXEC_ROOT: &str = "/var/run/docker";
pub const DAEMON_JSON: &str = "/etc/docker/daemon.json";
/// Where dockerd serves its API when neither `-H` nor `hosts` says otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// The keys of `daemon.json` this product uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonConfig {
    /// `data-root` (or the deprecated `graph`).
    pub data_root: Option<String>,
    pub exec_root: Option<String>,
    /// `log-driver`; docker's default is `json-file`.
    pub log_driver: Option<String>,
    /// `log-opts.max-size`, e.g. `100m`.
    pub log_max_size: Option<String>,
    /// `log-opts.max-file`, e.g. `3`.
    pub log_max_file: Option<String>,
    /// `hosts`: where the API listens (`unix:///var/run/docker.sock`, `tcp://…`), as written.
    pub hosts: Vec<String>,
    /// `containerd`: the containerd socket dockerd uses instead of starting its own.
    pub containerd: Option<String>,
}

impl DaemonConfig {
    /// The effective log driver (`json-file` when not set).
    pub fn log_driver(&self) -> &str {
        self.log_driver.as_deref().unwrap_or("json-file")
    }
}

/// Parses `daemon.json`.
pub fn parse_daemon_json(text: &str) -> Result<DaemonConfig, String> {
    if text.trim().is_empty() {
        return Ok(DaemonConfig::default());
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let s = |k: &str| obj.get(k).and_then(|v| v.as_str()).map(String::from);
    let opts = obj.get("log-opts").and_then(|v| v.as_object());
    // Docker accepts log-opts values as strings only, but be tolerant of numbers.
    let opt = |k: &str| {
        opts.and_then(|o| o.get(k)).and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    };
    Ok(DaemonConfig {
        data_root: s("data-root").or_else(|| s("graph")),
        exec_root: s("exec-root"),
        log_driver: s("log-driver"),
        log_max_size: opt("max-size"),
        log_max_file: opt("max-file"),
        hosts: match obj.get("hosts") {
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            Some(serde_json::Value::String(h)) => vec![h.clone()],
            _ => Vec::new(),
        },
        containerd: s("containerd"),
    })
}

/// The unix socket path of a docker `-H`/`hosts` value (`unix:///run/docker.sock`, or a bare
/// absolute path); `None` for `tcp://`, `fd://` (systemd socket activation) and others.
pub fn unix_socket(host: &str) -> Option<String> {
    let path = host.strip_prefix("unix://").unwrap_or(host);
    (path.starts_with('/') && !path.contains("://")).then(|| path.to_string())
}

/// The unix sockets a dockerd serves its API on: its `-H`/`--host` flags (all of them), else
/// `hosts` of its daemon config, else the default socket. `fd://` (systemd socket
/// activation) stands for the default socket, where `docker.socket` listens.
pub fn api_sockets(args: &[String], config: Option<&DaemonConfig>) -> Vec<String> {
    let mut hosts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(v) = a.strip_prefix("--host=").or_else(|| a.strip_prefix("-H=")) {
            hosts.push(v.to_string());
        } else if a == "-H" || a == "--host" {
            if let Some(v) = args.get(i + 1) {
                hosts.push(v.clone());
                i += 1;
            }
        } else if let Some(v) = a.strip_prefix("-H").filter(|v| !v.is_empty()) {
            hosts.push(v.to_string());
        }
        i += 1;
    }
    if hosts.is_empty() {
        hosts = config.map(|c| c.hosts.clone()).unwrap_or_default();
    }
    let mut out: Vec<String> = Vec::new();
    for h in &hosts {
        let s = if h.starts_with("fd://") {
            Some(DEFAULT_SOCKET.to_string())
        } else {
            unix_socket(h)
        };
        if let Some(s) = s {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    if hosts.is_empty() {
        out.push(DEFAULT_SOCKET.to_string());
    }
    out
}

/// Reads `daemon.json` under the host root; `Ok(None)` when it does not exist.
pub fn read_daemon_json(
    host: &HostPaths,
    host_path: &str,
) -> Result<Option<DaemonConfig>, ReadError> {
    let path = host.resolve(host_path);
    match hostfs::read_text_optional(&path, cap::CONFIG)? {
        None => Ok(None),
        Some(text) => parse_daemon_json(&text)
            .map(Some)
            .map_err(|e| ReadError::parse(&path, e)),
    }
}

/// The pod a docker container belongs to, from the labels kubelet (dockershim) sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLabels {
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    /// `io.kubernetes.pod.uid`, as written (not validated here).
    pub pod_uid: Option<String>,
}

/// Parses the `Config.Labels` of a container's `config.v2.json`: the one reader of these
/// labels (disk names log owners with it, [`crate::pods`] indexes pods, iptables spots
/// kube-proxy).
pub fn parse_config_v2(text: &str) -> Result<PodLabels, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let labels = v.get("Config").and_then(|c| c.get("Labels"));
    let l = |k: &str| {
        labels
            .and_then(|m| m.get(k))
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    Ok(PodLabels {
        namespace: l("io.kubernetes.pod.namespace"),
        pod: l("io.kubernetes.pod.name"),
        container: l("io.kubernetes.container.name"),
        pod_uid: l("io.kubernetes.pod.uid"),
    })
}

/// Reads `<container dir>/config.v2.json` (agent-side directory), at most [`cap::CONFIG`]
/// bytes. `None` when absent, bad, not a regular file or larger.
pub fn read_pod_labels(container_dir: &Path) -> Option<PodLabels> {
    read_pod_labels_limited(container_dir, cap::CONFIG as u64)
}

/// [`read_pod_labels`] for files of at most `max_bytes` (a few KB in practice); a larger file
/// is not read and gives `None`.
pub fn read_pod_labels_limited(container_dir: &Path, max_bytes: u64) -> Option<PodLabels> {
    let path = container_dir.join("config.v2.json");
    let cap = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let text = hostfs::read_text(&path, cap).ok()?;
    parse_config_v2(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The daemon.json TKE writes on its docker nodes (docker 19.03/20.10), with a data disk.
    const TKE_DAEMON_JSON: &str = r#"{
  "data-root": "/data/docker",
  "exec-root": "/var/run/docker",
  "log-driver": "json-file",
  "log-opts": {"max-size": "100m", "max-file": "10"},
  "registry-mirrors": ["https://mirror.ccs.tencentyun.com"],
  "storage-driver": "overlay2"
}"#;

    #[test]
    fn reads_roots_and_log_options() {
        let c = parse_daemon_json(TKE_DAEMON_JSON).unwrap();
        assert_eq!(c.data_root.as_deref(), Some("/data/docker"));
        assert_eq!(c.exec_root.as_deref(), Some("/var/run/docker"));
        assert_eq!(c.log_driver(), "json-file");
        assert_eq!(c.log_max_size.as_deref(), Some("100m"));
        assert_eq!(c.log_max_file.as_deref(), Some("10"));
    }

    #[test]
    fn api_sockets_from_flags_config_and_default() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(api_sockets(&a("dockerd"), None), vec![DEFAULT_SOCKET]);
        // systemd's unit: `dockerd -H fd:// --containerd=/run/containerd/containerd.sock`.
        assert_eq!(
            api_sockets(
                &a("/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock"),
                None
            ),
            vec![DEFAULT_SOCKET]
        );
        assert_eq!(
            api_sockets(
                &a("dockerd -H unix:///tmp/d.sock --host=tcp://0.0.0.0:2375 -Hunix:///x.sock"),
                None
            ),
            vec!["/tmp/d.sock", "/x.sock"]
        );
        let c = parse_daemon_json(r#"{"hosts": ["unix:///run/a.sock", "tcp://127.0.0.1:2375"], "containerd": "/run/c.sock"}"#).unwrap();
        assert_eq!(api_sockets(&a("dockerd"), Some(&c)), vec!["/run/a.sock"]);
        assert_eq!(c.containerd.as_deref(), Some("/run/c.sock"));
        // Only tcp hosts: no unix socket to probe.
        let c = parse_daemon_json(r#"{"hosts": "tcp://127.0.0.1:2375"}"#).unwrap();
        assert!(api_sockets(&a("dockerd"), Some(&c)).is_empty());
        assert_eq!(
            unix_socket("/var/run/docker.sock").as_deref(),
            Some("/var/run/docker.sock")
        );
        assert_eq!(unix_socket("npipe://x"), None);
    }

    #[test]
    fn defaults_and_old_graph_key() {
        let c = parse_daemon_json("{\"graph\": \"/opt/docker\"}").unwrap();
        assert_eq!(c.data_root.as_deref(), Some("/opt/docker"));
        assert_eq!(c.log_driver(), "json-file");
        assert_eq!(c.log_max_size, None);
        assert_eq!(parse_daemon_json("  \n").unwrap(), DaemonConfig::default());
        assert!(parse_daemon_json("[1]").is_err());
        assert!(parse_daemon_json("{").is_err());
    }

    // Trimmed config.v2.json of a dockershim-created container (docker 20.10).
    const CONFIG_V2: &str = r#"{"StreamConfig":{},"State":{"Running":true,"Pid":4242},"ID":"dda02c9a7491","Config":{"Hostname":"apigateway-6dc48bf8b6-l8xrw","Labels":{"annotation.io.kubernetes.container.restartCount":"0","io.kubernetes.container.logpath":"/var/log/pods/prod_apigateway-6dc48bf8b6-l8xrw_5f0c/apigateway/0.log","io.kubernetes.container.name":"apigateway","io.kubernetes.docker.type":"container","io.kubernetes.pod.name":"apigateway-6dc48bf8b6-l8xrw","io.kubernetes.pod.namespace":"prod","io.kubernetes.pod.uid":"5f0c"}},"LogPath":"/var/lib/docker/containers/dda02c9a7491/dda02c9a7491-json.log"}"#;

    #[test]
    fn reads_pod_labels() {
        let l = parse_config_v2(CONFIG_V2).unwrap();
        assert_eq!(l.namespace.as_deref(), Some("prod"));
        assert_eq!(l.pod.as_deref(), Some("apigateway-6dc48bf8b6-l8xrw"));
        assert_eq!(l.container.as_deref(), Some("apigateway"));
        assert_eq!(l.pod_uid.as_deref(), Some("5f0c"));
        // A container docker ran by hand has no Kubernetes labels.
        let l = parse_config_v2(r#"{"Config":{"Labels":{}}}"#).unwrap();
        assert_eq!(l, PodLabels::default());
    }

    #[test]
    fn reads_labels_from_a_container_dir_within_a_size_limit() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("config.v2.json"), CONFIG_V2).unwrap();
        let l = read_pod_labels(t.path()).unwrap();
        assert_eq!(l.pod.as_deref(), Some("apigateway-6dc48bf8b6-l8xrw"));
        let len = CONFIG_V2.len() as u64;
        assert_eq!(read_pod_labels_limited(t.path(), len), Some(l));
        assert_eq!(read_pod_labels_limited(t.path(), len - 1), None);
        assert_eq!(read_pod_labels(&t.path().join("gone")), None);
        // Without an explicit limit the config cap applies, and a FIFO is refused at once.
        let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(cap::CONFIG));
        std::fs::write(t.path().join("config.v2.json"), big).unwrap();
        assert_eq!(read_pod_labels(t.path()), None);
        std::fs::remove_file(t.path().join("config.v2.json")).unwrap();
        nix::unistd::mkfifo(
            &t.path().join("config.v2.json"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        assert_eq!(read_pod_labels(t.path()), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_daemon_json(&s);
            let _ = parse_config_v2(&s);
        }
        /// `daemon.json` and `config.v2.json` written by serde_json from typed values (as
        /// an operator's editor or dockerd would write them; any string, `hosts` as a list or
        /// a single string, log-opts as strings): every key we use reads back.
        #[test]
        fn parses_what_docker_writes(
            [data_root, exec_root, driver, size, files, containerd] in proptest::array::uniform6("\\PC{0,24}"),
            hosts in proptest::collection::vec("(unix://|tcp://|fd://)\\PC{0,20}", 0..4),
            single_host in proptest::bool::ANY,
            [ns, pod, container, uid] in proptest::array::uniform4("\\PC{0,24}"),
        ) {
            let hosts_json = if single_host && hosts.len() == 1 { serde_json::json!(hosts[0]) } else { serde_json::json!(hosts) };
            let daemon = serde_json::json!({
                "data-root": data_root, "exec-root": exec_root, "log-driver": driver,
                "log-opts": { "max-size": size, "max-file": files }, "hosts": hosts_json,
                "containerd": containerd, "live-restore": true,
            });
            let want = DaemonConfig {
                data_root: Some(data_root), exec_root: Some(exec_root), log_driver: Some(driver),
                log_max_size: Some(size), log_max_file: Some(files), hosts, containerd: Some(containerd),
            };
            proptest::prop_assert_eq!(parse_daemon_json(&serde_json::to_string_pretty(&daemon).unwrap_or_default()), Ok(want));
            let v2 = serde_json::json!({ "ID": "4d3c", "Config": { "Hostname": "x", "Labels": {
                "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod,
                "io.kubernetes.container.name": container, "io.kubernetes.pod.uid": uid,
                "io.kubernetes.docker.type": "container",
            } } });
            let labels = PodLabels { namespace: Some(ns), pod: Some(pod), container: Some(container), pod_uid: Some(uid) };
            proptest::prop_assert_eq!(parse_config_v2(&v2.to_string()), Ok(labels));
        }
    }
}
