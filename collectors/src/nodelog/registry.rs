//! What the runtime's registry configuration says about one registry, to confirm an image
//! pull failure's cause (handbook 002, the ImagePullBackOff section):
//!
//! - docker: `insecure-registries` of `/etc/docker/daemon.json` (a `host:port` or an IPv4
//!   CIDR; docker always treats `127.0.0.0/8` as insecure) and the registry's CA at
//!   `/etc/docker/certs.d/<registry:port>/ca.crt` (docker loads every `*.crt` there);
//! - containerd: `config.toml`'s CRI registry section (`mirrors."<r>".endpoint` with an
//!   `http://` endpoint, `configs."<r>".tls.ca_file` / `insecure_skip_verify`, config versions
//!   2 and 3) and the `hosts.toml` of its `config_path` (`/etc/containerd/certs.d/<r>/`):
//!   `server`/`[host."http://…"]`, `ca`, `skip_verify`.
//!
//! Every file through [`crate::hostfs`] with the configuration cap.

use crate::config::{containerd, docker};
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

/// containerd 2.x's default `config_path` (1.x has none unless configured).
const CONTAINERD_DEFAULT_CONFIG_PATH: &str = "/etc/containerd/certs.d";

/// The registry configuration facts for one registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryFacts {
    pub registry: String,
    /// `daemon.json` exists and parses.
    pub docker_config: bool,
    /// The registry is in `insecure-registries` (or a CIDR there, or loopback).
    pub docker_insecure: bool,
    /// `/etc/docker/certs.d/<registry>/` holds a `*.crt`.
    pub docker_ca: bool,
    /// containerd's `config.toml` exists and parses as TOML.
    pub containerd_config: bool,
    /// Host path of the registry's `hosts.toml`, when there is one.
    pub containerd_hosts_file: Option<String>,
    /// A plain-HTTP endpoint is configured for it (mirror endpoint or hosts.toml).
    pub containerd_http: bool,
    /// A CA is configured for it (`tls.ca_file`, hosts.toml `ca`).
    pub containerd_ca: bool,
    /// TLS verification is off for it.
    pub containerd_skip_verify: bool,
}

/// Reads the facts of `registry` (`host[:port]`, already validated) from the runtime
/// configuration under the host root. Files that are absent leave their facts false.
pub fn facts(
    host: &HostPaths,
    registry: &str,
    daemon_json: &str,
    containerd_config: &str,
) -> RegistryFacts {
    let mut f = RegistryFacts {
        registry: registry.to_string(),
        ..RegistryFacts::default()
    };
    if let Ok(Some(text)) = hostfs::read_text_optional(&host.resolve(daemon_json), cap::CONFIG) {
        if let Some(list) = insecure_registries(&text) {
            f.docker_config = true;
            f.docker_insecure = is_insecure(registry, &list);
        }
    }
    f.docker_ca = has_crt(host, &format!("/etc/docker/certs.d/{registry}"));
    let mut config_paths = Vec::new();
    if let Ok(Some(text)) =
        hostfs::read_text_optional(&host.resolve(containerd_config), cap::CONFIG)
    {
        if let Ok(t) = text.parse::<toml::Table>() {
            f.containerd_config = true;
            for reg in cri_registry_tables(&t) {
                if let Some(p) = reg.get("config_path").and_then(|v| v.as_str()) {
                    config_paths.extend(p.split(':').filter(|s| !s.is_empty()).map(String::from));
                }
                let mirror = reg
                    .get("mirrors")
                    .and_then(|m| m.get(registry))
                    .and_then(|m| m.get("endpoint"))
                    .and_then(|e| e.as_array());
                if mirror.is_some_and(|eps| {
                    eps.iter()
                        .filter_map(|e| e.as_str())
                        .any(|e| e.starts_with("http://"))
                }) {
                    f.containerd_http = true;
                }
                if let Some(tls) = reg
                    .get("configs")
                    .and_then(|c| c.get(registry))
                    .and_then(|c| c.get("tls"))
                {
                    if tls
                        .get("ca_file")
                        .and_then(|v| v.as_str())
                        .is_some_and(|s| !s.is_empty())
                    {
                        f.containerd_ca = true;
                    }
                    if tls.get("insecure_skip_verify").and_then(|v| v.as_bool()) == Some(true) {
                        f.containerd_skip_verify = true;
                    }
                }
            }
        }
    }
    if config_paths.is_empty() {
        config_paths.push(CONTAINERD_DEFAULT_CONFIG_PATH.to_string());
    }
    for dir in config_paths {
        let hp = format!("{}/{registry}/hosts.toml", dir.trim_end_matches('/'));
        let Ok(Some(text)) = hostfs::read_text_optional(&host.resolve(&hp), cap::CONFIG) else {
            continue;
        };
        f.containerd_hosts_file = Some(hp);
        if let Ok(t) = text.parse::<toml::Table>() {
            let server_http = t
                .get("server")
                .and_then(|v| v.as_str())
                .is_some_and(|s| s.starts_with("http://"));
            let mut any_ca = t.get("ca").is_some();
            let mut skip = t.get("skip_verify").and_then(|v| v.as_bool()) == Some(true);
            let mut host_http = false;
            if let Some(hosts) = t.get("host").and_then(|h| h.as_table()) {
                for (url, h) in hosts {
                    host_http |= url.starts_with("http://");
                    any_ca |= h.get("ca").is_some();
                    skip |= h.get("skip_verify").and_then(|v| v.as_bool()) == Some(true);
                }
            }
            f.containerd_http |= server_http || host_http;
            f.containerd_ca |= any_ca;
            f.containerd_skip_verify |= skip;
        }
        break;
    }
    f
}

/// The default paths of the two configuration files.
pub fn default_paths() -> (&'static str, &'static str) {
    (docker::DAEMON_JSON, containerd::CONFIG_PATH)
}

/// `insecure-registries` of a `daemon.json` (`None` when it is not a JSON object).
pub fn insecure_registries(text: &str) -> Option<Vec<String>> {
    if text.trim().is_empty() {
        return Some(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let obj = v.as_object()?;
    Some(
        obj.get("insecure-registries")
            .and_then(|l| l.as_array())
            .map(|l| {
                l.iter()
                    .filter_map(|s| s.as_str())
                    .take(1024)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Docker's rule: the registry `host[:port]` is listed as it is, or its host is an IPv4
/// address inside a listed CIDR (loopback always is).
pub fn is_insecure(registry: &str, list: &[String]) -> bool {
    let bare = |s: &str| {
        s.trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string()
    };
    if list.iter().any(|l| bare(l) == registry) {
        return true;
    }
    let host = registry.rsplit_once(':').map_or(registry, |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            registry
        }
    });
    let Ok(ip) = host.parse::<std::net::Ipv4Addr>() else {
        return false;
    };
    if ip.is_loopback() {
        return true;
    }
    list.iter().any(|l| {
        let Some((net, bits)) = l.split_once('/') else {
            return false;
        };
        let (Ok(net), Ok(bits)) = (net.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
            return false;
        };
        if bits > 32 {
            return false;
        }
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits)
        };
        (u32::from(ip) & mask) == (u32::from(net) & mask)
    })
}

/// The CRI registry tables of a containerd config: version 2's
/// `plugins."io.containerd.grpc.v1.cri".registry` and version 3's
/// `plugins."io.containerd.cri.v1.images".registry`.
fn cri_registry_tables(t: &toml::Table) -> Vec<&toml::Table> {
    let plugins = t.get("plugins").and_then(|p| p.as_table());
    ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images"]
        .iter()
        .filter_map(|k| plugins?.get(*k)?.get("registry")?.as_table())
        .collect()
}

/// A directory (host path) that holds a `*.crt` file.
fn has_crt(host: &HostPaths, dir: &str) -> bool {
    let Ok(it) = hostfs::dir_entries(&host.resolve(dir), 256) else {
        return false;
    };
    it.into_iter().any(|e| {
        e.file_name().to_str().is_some_and(|n| n.ends_with(".crt"))
            && e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &std::path::Path, p: &str, text: &str) {
        let p = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn docker_insecure_and_certs() {
        let list = vec!["harbor.local:5000".to_string(), "10.0.0.0/8".to_string()];
        assert!(is_insecure("harbor.local:5000", &list));
        assert!(!is_insecure("harbor.local", &list));
        assert!(is_insecure("10.1.2.3:5000", &list));
        assert!(!is_insecure("192.168.1.1:5000", &list));
        assert!(is_insecure("127.0.0.1:5000", &[]));
        assert_eq!(insecure_registries("not json"), None);
        let dir = tempfile::tempdir().unwrap();
        let host = HostPaths::new(dir.path());
        write(
            dir.path(),
            "/etc/docker/daemon.json",
            r#"{"insecure-registries": ["10.0.0.5:5000"]}"#,
        );
        write(
            dir.path(),
            "/etc/docker/certs.d/harbor.example.com/ca.crt",
            "-----BEGIN CERTIFICATE-----",
        );
        let (dj, cc) = default_paths();
        let f = facts(&host, "10.0.0.5:5000", dj, cc);
        assert!(f.docker_config && f.docker_insecure && !f.docker_ca);
        let f = facts(&host, "harbor.example.com", dj, cc);
        assert!(f.docker_config && !f.docker_insecure && f.docker_ca);
        assert!(!f.containerd_config);
    }

    #[test]
    fn containerd_mirrors_configs_and_hosts_toml() {
        let dir = tempfile::tempdir().unwrap();
        let host = HostPaths::new(dir.path());
        write(
            dir.path(),
            "/etc/containerd/config.toml",
            r#"version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."10.0.0.5:5000"]
  endpoint = ["http://10.0.0.5:5000"]
[plugins."io.containerd.grpc.v1.cri".registry.configs."harbor.example.com".tls]
  ca_file = "/etc/containerd/harbor-ca.crt"
"#,
        );
        write(
            dir.path(),
            "/etc/containerd/certs.d/registry.internal:8443/hosts.toml",
            "server = \"https://registry.internal:8443\"\n[host.\"https://registry.internal:8443\"]\n  ca = \"/etc/containerd/certs.d/registry.internal:8443/ca.crt\"\n",
        );
        let (dj, cc) = default_paths();
        let f = facts(&host, "10.0.0.5:5000", dj, cc);
        assert!(f.containerd_config && f.containerd_http && !f.containerd_ca);
        let f = facts(&host, "harbor.example.com", dj, cc);
        assert!(f.containerd_ca && !f.containerd_http);
        let f = facts(&host, "registry.internal:8443", dj, cc);
        assert_eq!(
            f.containerd_hosts_file.as_deref(),
            Some("/etc/containerd/certs.d/registry.internal:8443/hosts.toml")
        );
        assert!(f.containerd_ca && !f.containerd_http);
        let f = facts(&host, "other.example.com", dj, cc);
        assert!(!f.containerd_http && !f.containerd_ca && f.containerd_hosts_file.is_none());
    }
}
