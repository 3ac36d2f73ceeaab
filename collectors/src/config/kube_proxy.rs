//! kube-proxy's settings as the collectors need them: its `--config` file (read through the
//! process's own root, `<root>/proc/<pid>/root/<path>`, so a kube-proxy pod's ConfigMap mount,
//! `/var/lib/kube-proxy/config.conf` with kubeadm, is found as the process sees it) and the
//! address of its health endpoint (`--healthz-bind-address`, the separate `--healthz-port` of
//! old releases, or `healthzBindAddress` of the file; default
//! `0.0.0.0:10256`). With `--config`, kube-proxy ignores the flags the file covers.
//!
//! Used by `conntrack` (its conntrack settings) and `reach` (its `/healthz`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Component, Path, PathBuf};

use crate::host::HostPaths;
use crate::hostfs::{self, cap};

/// kube-proxy's default health endpoint (`pkg/proxy/apis/config/v1alpha1/defaults.go`).
pub const DEFAULT_HEALTHZ_PORT: u16 = 10256;

/// `--config`'s value, when given and not empty.
pub fn config_path(args: &[String]) -> Option<String> {
    super::flag_value(args, "--config").filter(|p| !p.is_empty())
}

/// The text of kube-proxy's `--config` file `config` (a path as process `pid` sees it), read
/// through the process's root: the host path read, and its text (`None`: no such file).
/// `Err` names a path that is not absolute or climbs with `..`, or a refused read.
pub fn read_config(
    host: &HostPaths,
    pid: u32,
    config: &str,
) -> Result<(PathBuf, Option<String>), String> {
    let rel = Path::new(config);
    if !rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "--config {config:?} is not an absolute path without `..`"
        ));
    }
    let path = host
        .proc_pid(pid)
        .join("root")
        .join(rel.strip_prefix("/").unwrap_or(rel));
    match hostfs::read_text_optional(&path, cap::CONFIG) {
        Ok(text) => Ok((path, text)),
        Err(e) => Err(e.to_string()),
    }
}

/// Where kube-proxy's `/healthz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Healthz {
    /// At this address (a wildcard bind already turned into the loopback address).
    At(SocketAddr),
    /// Turned off (an empty bind address, or port 0).
    Off,
}

/// The top-level `healthzBindAddress` of a `KubeProxyConfiguration` (YAML or JSON): `None`
/// when absent or null (the default applies), `Some("")` when set empty (off).
pub fn healthz_from_config(text: &str) -> Result<Option<String>, String> {
    if text.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        return match v.get("healthzBindAddress") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("healthzBindAddress: not a string: {other}")),
        };
    }
    let mut found = None;
    for raw in text.lines() {
        if raw.trim_start().starts_with("---") && found.is_some() {
            break;
        }
        // Top level only: no indent.
        if raw.starts_with([' ', '\t', '#', '-']) {
            continue;
        }
        let Some((k, v)) = raw.split_once(':') else {
            continue;
        };
        if k.trim().trim_matches(|c| c == '"' || c == '\'') != "healthzBindAddress" {
            continue;
        }
        let v = match v.find(" #") {
            Some(i) => &v[..i],
            None => v,
        };
        let v = v.trim();
        found = if v == "null" || v == "~" {
            None
        } else {
            Some(v.trim_matches(|c| c == '"' || c == '\'').to_string())
        };
    }
    Ok(found)
}

/// Where the `/healthz` of a kube-proxy started with `args` (and, with `--config`, that
/// file's `healthzBindAddress`, `from_file`) answers. `Err` names a value that is not an
/// address.
pub fn healthz(args: &[String], from_file: Option<Option<String>>) -> Result<Healthz, String> {
    let bind = match from_file {
        Some(file) => file,
        None => super::flag_value(args, "--healthz-bind-address"),
    };
    let bind = match bind {
        None => {
            return Ok(Healthz::At(loopback(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                DEFAULT_HEALTHZ_PORT,
            ))))
        }
        Some(b) if b.trim().is_empty() => return Ok(Healthz::Off),
        Some(b) => b.trim().to_string(),
    };
    let addr = if let Ok(a) = bind.parse::<SocketAddr>() {
        a
    } else if let Ok(ip) = bind.parse::<IpAddr>() {
        // An address without a port: the old `--healthz-port` (default 10256) gives it.
        let port = match super::flag_value(args, "--healthz-port") {
            None => DEFAULT_HEALTHZ_PORT,
            Some(p) => p
                .trim()
                .parse::<u16>()
                .map_err(|_| format!("--healthz-port {p:?} is not a port number"))?,
        };
        SocketAddr::new(ip, port)
    } else {
        return Err(format!(
            "healthz bind address {bind:?} is not an address with a port"
        ));
    };
    if addr.port() == 0 {
        return Ok(Healthz::Off);
    }
    Ok(Healthz::At(loopback(addr)))
}

/// A wildcard bind (0.0.0.0, ::) answers on loopback too: probe it there.
fn loopback(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), a.port())
        }
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn healthz_from_flags() {
        let at = |s: &str| Healthz::At(s.parse().unwrap());
        assert_eq!(
            healthz(&args("kube-proxy --v=2"), None),
            Ok(at("127.0.0.1:10256"))
        );
        assert_eq!(
            healthz(
                &args("kube-proxy --healthz-bind-address=10.0.0.5:10266"),
                None
            ),
            Ok(at("10.0.0.5:10266"))
        );
        assert_eq!(
            healthz(&args("kube-proxy --healthz-bind-address [::]:10256"), None),
            Ok(at("[::1]:10256"))
        );
        // The old pair: an address and a port.
        assert_eq!(
            healthz(
                &args("kube-proxy --healthz-bind-address=0.0.0.0 --healthz-port=10249"),
                None
            ),
            Ok(at("127.0.0.1:10249"))
        );
        assert_eq!(
            healthz(&args("kube-proxy --healthz-bind-address="), None),
            Ok(Healthz::Off)
        );
        assert_eq!(
            healthz(&args("kube-proxy --healthz-bind-address=0.0.0.0:0"), None),
            Ok(Healthz::Off)
        );
        assert!(healthz(&args("kube-proxy --healthz-bind-address=nowhere"), None).is_err());
        assert!(healthz(
            &args("kube-proxy --healthz-bind-address=0.0.0.0 --healthz-port=x"),
            None
        )
        .is_err());
        // With --config the file decides, whatever the flags say.
        assert_eq!(
            healthz(
                &args("kube-proxy --config=/c --healthz-bind-address=1.2.3.4:1"),
                Some(None)
            ),
            Ok(at("127.0.0.1:10256"))
        );
        assert_eq!(
            healthz(&args("kube-proxy"), Some(Some("192.168.1.2:10256".into()))),
            Ok(at("192.168.1.2:10256"))
        );
    }

    #[test]
    fn healthz_in_config_files() {
        // kubeadm 1.28's ConfigMap writes `healthzBindAddress: ""` only when set; this is a
        // customised one.
        let yaml = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nbindAddress: 0.0.0.0\n\
                    clientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n\
                    healthzBindAddress: \"0.0.0.0:10256\"   # all interfaces\nkind: KubeProxyConfiguration\n";
        assert_eq!(
            healthz_from_config(yaml),
            Ok(Some("0.0.0.0:10256".to_string()))
        );
        assert_eq!(
            healthz_from_config("kind: KubeProxyConfiguration\n"),
            Ok(None)
        );
        assert_eq!(healthz_from_config("healthzBindAddress: null\n"), Ok(None));
        assert_eq!(
            healthz_from_config("healthzBindAddress: ''\n"),
            Ok(Some(String::new()))
        );
        // Nested keys are not the top-level one.
        assert_eq!(
            healthz_from_config("other:\n  healthzBindAddress: 1.1.1.1:1\n"),
            Ok(None)
        );
        assert_eq!(
            healthz_from_config(r#"{"healthzBindAddress":"[::]:10256"}"#),
            Ok(Some("[::]:10256".to_string()))
        );
        assert!(healthz_from_config(r#"{"healthzBindAddress":5}"#).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*", a in proptest::collection::vec("\\PC*", 0..6)) {
            let _ = healthz_from_config(&s);
            let _ = healthz(&a, None);
            let _ = healthz(&a, Some(Some(s.clone())));
            let _ = config_path(&a);
        }

        /// A `KubeProxyConfiguration` written as kubeadm (YAML), an operator (flow maps,
        /// quotes, comments) or `kubectl -o json` would: its `healthzBindAddress` reads back,
        /// and so does the same address given as a flag, either spelling.
        #[test]
        fn reads_the_bind_address_it_was_given(
            file in crate::testgen::kube_proxy_file(),
            shape in crate::testgen::kube_proxy_shape(),
            joined in proptest::bool::ANY,
        ) {
            let text = file.render(shape);
            proptest::prop_assert_eq!(healthz_from_config(&text), Ok(file.healthz.clone()), "{}", text);
            let want = match file.healthz.as_deref().map(|h| h.parse::<SocketAddr>()) {
                None => Healthz::At(SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_HEALTHZ_PORT))),
                Some(Ok(a)) if a.port() == 0 => Healthz::Off,
                Some(Ok(a)) => Healthz::At(loopback(a)),
                Some(Err(e)) => return Err(proptest::test_runner::TestCaseError::fail(e.to_string())),
            };
            let config = vec!["kube-proxy".to_string(), "--config=/var/lib/kube-proxy/config.conf".into()];
            proptest::prop_assert_eq!(healthz(&config, Some(file.healthz.clone())), Ok(want.clone()));
            let mut flags = vec!["kube-proxy".to_string(), "--v=2".into()];
            if let Some(h) = &file.healthz {
                if joined {
                    flags.push(format!("--healthz-bind-address={h}"));
                } else {
                    flags.extend(["--healthz-bind-address".to_string(), h.clone()]);
                }
            }
            proptest::prop_assert_eq!(healthz(&flags, None), Ok(want));
        }
    }
}
