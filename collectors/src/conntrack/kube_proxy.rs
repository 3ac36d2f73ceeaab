//! kube-proxy's say over `nf_conntrack_max`.
//!
//! On a Kubernetes node kube-proxy sets the limit itself when it starts
//! (`pkg/proxy/conntrack/sysctls.go`, earlier `cmd/kube-proxy/app/conntrack.go`): with
//! `conntrack.maxPerCore` > 0 it computes
//!
//! ```text
//! target = max(maxPerCore × CPUs, min)      (defaults: maxPerCore 32768, min 131072)
//! ```
//!
//! and writes it to `net.netfilter.nf_conntrack_max` (releases before kubernetes#142035 write
//! it whenever the current value differs, lowering a larger one; later releases only when the
//! current value is lower; 1.36 and later cap `maxPerCore × CPUs` at 1048576). With
//! `maxPerCore: 0` it leaves the limit alone. So on a node where kube-proxy runs, a
//! `sysctl -w` or a sysctl.d file is not where the limit lives: kube-proxy's own setting is.
//!
//! The settings come from its command line (`--conntrack-max-per-core`, `--conntrack-min`),
//! or, when it runs with `--config`, from that file only (kube-proxy ignores those flags
//! then). The file is read through the process's own root, `<root>/proc/<pid>/root/<path>`,
//! so a kube-proxy pod's ConfigMap mount (`/var/lib/kube-proxy/config.conf` with kubeadm) is
//! found as the process sees it. The YAML reader is deliberately small: the top-level
//! `conntrack:` map's `maxPerCore` and `min` (block or flow map), or the same keys in JSON.

use crate::config::kube_proxy;
use crate::host::HostPaths;
use crate::node::follow::{Followed, Rescan};
use crate::node::Node;

/// kube-proxy's defaults (`pkg/proxy/apis/config/v1alpha1/defaults.go`).
pub const DEFAULT_MAX_PER_CORE: u64 = 32768;
pub const DEFAULT_MIN: u64 = 131072;
/// kube-proxy 1.36 and later cap `maxPerCore × CPUs` at this (kubernetes#137002).
pub const SCALED_CAP: u64 = 1_048_576;

/// Where kube-proxy's conntrack settings were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Its command line (flags, or kube-proxy's defaults for flags not given).
    Flags,
    /// Its `--config` file, at this path as the process sees it.
    ConfigFile(String),
}

/// kube-proxy's conntrack settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub pid: u32,
    pub origin: Origin,
    pub max_per_core: u64,
    pub min: u64,
}

impl Settings {
    /// What kube-proxy writes to `nf_conntrack_max` at start on a node with `cpus` CPUs
    /// (before the 1.36 cap); `None` when `maxPerCore` is 0 (it leaves the limit alone).
    pub fn target(&self, cpus: u64) -> Option<u64> {
        (self.max_per_core > 0).then(|| self.scaled(cpus).max(self.min))
    }

    /// `maxPerCore × CPUs`.
    pub fn scaled(&self, cpus: u64) -> u64 {
        self.max_per_core.saturating_mul(cpus)
    }
}

/// What the node's kube-proxy means for the limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KubeProxy {
    /// Not looked up (the table needs no advice), or no process named kube-proxy runs.
    #[default]
    NotFound,
    /// Running, with these settings.
    Found(Settings),
    /// Running, but its `--config` file could not be read or understood.
    Unreadable {
        pid: u32,
        config: String,
        reason: String,
    },
}

/// The value of a `--flag=value` or `--flag value` argument (the last one given wins, as in
/// pflag).
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut out = None;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix(name) {
            if let Some(v) = v.strip_prefix('=') {
                out = Some(v);
            } else if v.is_empty() {
                if let Some(next) = it.peek() {
                    out = Some(next.as_str());
                    it.next();
                }
            }
        }
    }
    out
}

fn number(s: &str, what: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| format!("{what}: not a non-negative integer: {:?}", s.trim()))
}

/// The settings a kube-proxy started with `args` uses when it has no `--config`.
pub fn from_flags(pid: u32, args: &[String]) -> Result<Settings, String> {
    let max_per_core = match flag(args, "--conntrack-max-per-core") {
        Some(v) => number(v, "--conntrack-max-per-core")?,
        None => DEFAULT_MAX_PER_CORE,
    };
    let min = match flag(args, "--conntrack-min") {
        Some(v) => number(v, "--conntrack-min")?,
        None => DEFAULT_MIN,
    };
    Ok(Settings {
        pid,
        origin: Origin::Flags,
        max_per_core,
        min,
    })
}

pub use crate::config::kube_proxy::config_path;

/// `maxPerCore` and `min` of a `KubeProxyConfiguration`'s `conntrack` map (YAML or JSON);
/// `None` for a key that is absent or `null` (kube-proxy's default applies).
pub fn parse_config(text: &str) -> Result<(Option<u64>, Option<u64>), String> {
    if text.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let key = |k: &str| -> Result<Option<u64>, String> {
            match v.get("conntrack").and_then(|c| c.get(k)) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::Number(n)) => n
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("conntrack.{k}: not a non-negative integer: {n}")),
                Some(other) => Err(format!("conntrack.{k}: not a number: {other}")),
            }
        };
        return Ok((key("maxPerCore")?, key("min")?));
    }
    let mut in_conntrack = false;
    let mut child_indent: Option<usize> = None;
    let mut max_per_core = None;
    let mut min = None;
    let mut set = |k: &str, v: &str| -> Result<(), String> {
        // Only our two keys are numbers: the block's timeouts (`tcpEstablishedTimeout:
        // 24h0m0s`) are durations and are not read.
        let slot = match k {
            "maxPerCore" => &mut max_per_core,
            "min" => &mut min,
            _ => return Ok(()),
        };
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
        *slot = if v.is_empty() || v == "null" || v == "~" {
            None
        } else {
            Some(number(v, &format!("conntrack.{k}"))?)
        };
        Ok(())
    };
    for raw in text.lines() {
        let line = match raw.find(" #") {
            Some(i) => &raw[..i],
            None => raw,
        };
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.trim_start().starts_with("---") {
            in_conntrack = false;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let body = line.trim();
        if indent == 0 {
            in_conntrack = false;
            let Some((k, v)) = body.split_once(':') else {
                continue;
            };
            if k.trim().trim_matches('"') != "conntrack" {
                continue;
            }
            let v = v.trim();
            if v.is_empty() {
                in_conntrack = true;
                child_indent = None;
            } else if let Some(inner) = v.strip_prefix('{') {
                let inner = inner
                    .strip_suffix('}')
                    .ok_or("conntrack: unterminated flow map")?;
                for kv in inner.split(',') {
                    if let Some((k, v)) = kv.split_once(':') {
                        set(k.trim().trim_matches('"'), v)?;
                    }
                }
            }
            continue;
        }
        if !in_conntrack {
            continue;
        }
        let level = *child_indent.get_or_insert(indent);
        if indent != level {
            continue;
        }
        if let Some((k, v)) = body.split_once(':') {
            set(k.trim().trim_matches('"'), v)?;
        }
    }
    Ok((max_per_core, min))
}

/// The settings from a `--config` file's text.
pub fn from_config(pid: u32, path: &str, text: &str) -> Result<Settings, String> {
    let (max_per_core, min) = parse_config(text)?;
    Ok(Settings {
        pid,
        origin: Origin::ConfigFile(path.to_string()),
        max_per_core: max_per_core.unwrap_or(DEFAULT_MAX_PER_CORE),
        min: min.unwrap_or(DEFAULT_MIN),
    })
}

/// Reads the settings of the kube-proxy process `pid` started with `args`.
pub fn settings(host: &HostPaths, pid: u32, args: &[String]) -> KubeProxy {
    let Some(config) = config_path(args) else {
        return match from_flags(pid, args) {
            Ok(s) => KubeProxy::Found(s),
            Err(reason) => KubeProxy::Unreadable {
                pid,
                config: String::new(),
                reason,
            },
        };
    };
    let unreadable = |reason: String| KubeProxy::Unreadable {
        pid,
        config: config.clone(),
        reason,
    };
    match kube_proxy::read_config(host, pid, &config) {
        Ok((path, Some(text))) => match from_config(pid, &config, &text) {
            Ok(s) => KubeProxy::Found(s),
            Err(e) => unreadable(format!("{}: {e}", path.display())),
        },
        Ok((path, None)) => unreadable(format!("{} does not exist", path.display())),
        Err(e) => unreadable(e),
    }
}

/// Finds the kube-proxy process and keeps its pid between samples (the shared process table
/// is searched only when it is not known, and then at most every `rescan_every` lookups).
#[derive(Debug)]
pub struct KubeProxyFinder {
    finder: Followed,
}

impl KubeProxyFinder {
    pub fn new(rescan_every: u32) -> KubeProxyFinder {
        KubeProxyFinder {
            finder: Followed::new(
                &["kube-proxy"],
                1,
                Rescan::WhileMissing(rescan_every),
                "conntrack/kube-proxy",
            ),
        }
    }

    /// What the node's kube-proxy means for the limit now.
    pub fn lookup(&mut self, node: &Node) -> KubeProxy {
        self.finder.refresh(node, &[]);
        match super::kubelet::first(&self.finder, "kube-proxy") {
            Some((pid, args)) => settings(node.host(), pid, &args),
            None => KubeProxy::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn flags_and_defaults() {
        let s = from_flags(7, &args("/usr/local/bin/kube-proxy --v=2")).unwrap();
        assert_eq!((s.max_per_core, s.min), (32768, 131072));
        assert_eq!(s.origin, Origin::Flags);
        // 2 CPUs: 65536 < 131072, so the floor.
        assert_eq!(s.target(2), Some(131072));
        // 8 CPUs: 262144.
        assert_eq!(s.target(8), Some(262144));
        let s = from_flags(
            7,
            &args("kube-proxy --conntrack-max-per-core=0 --conntrack-min 524288"),
        )
        .unwrap();
        assert_eq!((s.max_per_core, s.min), (0, 524288));
        assert_eq!(s.target(64), None);
        // The last flag wins.
        let s = from_flags(
            7,
            &args("kube-proxy --conntrack-min=1 --conntrack-min=200000"),
        )
        .unwrap();
        assert_eq!(s.min, 200000);
        assert!(from_flags(7, &args("kube-proxy --conntrack-min=-5")).is_err());
        assert!(from_flags(7, &args("kube-proxy --conntrack-max-per-core=lots")).is_err());
        assert_eq!(
            config_path(&args("kube-proxy --config=/var/lib/kube-proxy/config.conf")).as_deref(),
            Some("/var/lib/kube-proxy/config.conf")
        );
        assert_eq!(
            config_path(&args("kube-proxy --config /etc/kp.yaml --v=2")).as_deref(),
            Some("/etc/kp.yaml")
        );
        // `--config-sync-period` is another flag.
        assert_eq!(
            config_path(&args("kube-proxy --config-sync-period=15m")),
            None
        );
    }

    /// The `config.conf` key of kubeadm 1.28's `kube-system/kube-proxy` ConfigMap (the
    /// conntrack map as kubeadm writes it: every field null, kube-proxy's defaults apply).
    const KUBEADM_CONFIG: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: \"\"
  burst: 0
  contentType: \"\"
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
detectLocal:
  bridgeInterface: \"\"
  interfaceNamePrefix: \"\"
enableProfiling: false
kind: KubeProxyConfiguration
mode: \"\"
";

    #[test]
    fn config_files() {
        assert_eq!(parse_config(KUBEADM_CONFIG), Ok((None, None)));
        let s = from_config(9, "/var/lib/kube-proxy/config.conf", KUBEADM_CONFIG).unwrap();
        assert_eq!((s.max_per_core, s.min), (32768, 131072));
        assert_eq!(
            s.origin,
            Origin::ConfigFile("/var/lib/kube-proxy/config.conf".into())
        );
        let custom = KUBEADM_CONFIG
            .replace("maxPerCore: null", "maxPerCore: 8192   # small nodes")
            .replace("min: null", "min: \"4096\"");
        assert_eq!(parse_config(&custom), Ok((Some(8192), Some(4096))));
        // The block's timeouts are durations, not ours to read (they failed the whole file
        // until the property test below wrote one).
        let timeouts = custom.replace(
            "tcpEstablishedTimeout: null",
            "tcpEstablishedTimeout: 24h0m0s",
        );
        assert_ne!(timeouts, custom);
        assert_eq!(parse_config(&timeouts), Ok((Some(8192), Some(4096))));
        assert_eq!(
            parse_config("conntrack: {tcpCloseWaitTimeout: 1h0m0s, min: 7}\n"),
            Ok((None, Some(7)))
        );
        // A nested `min` elsewhere is not conntrack's.
        let other = "iptables:\n  min: 5\nconntrack:\n  maxPerCore: 0\n";
        assert_eq!(parse_config(other), Ok((Some(0), None)));
        // Flow map, JSON, a document separator.
        assert_eq!(
            parse_config("conntrack: {maxPerCore: 65536, min: 262144}\n"),
            Ok((Some(65536), Some(262144)))
        );
        assert_eq!(
            parse_config(
                r#"{"kind":"KubeProxyConfiguration","conntrack":{"maxPerCore":0,"min":null}}"#
            ),
            Ok((Some(0), None))
        );
        assert_eq!(
            parse_config("conntrack:\n  maxPerCore: 1\n---\nmin: 3\n"),
            Ok((Some(1), None))
        );
        assert!(parse_config("conntrack:\n  maxPerCore: many\n").is_err());
        assert!(parse_config(r#"{"conntrack":{"min":-1}}"#).is_err());
        assert!(parse_config("conntrack: {maxPerCore: 1\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*", a in proptest::collection::vec("\\PC*", 0..6)) {
            let _ = parse_config(&s);
            let _ = from_flags(1, &a);
            let _ = config_path(&a);
        }

        /// A `KubeProxyConfiguration` (kubeadm's YAML, flow maps, JSON) reads back its
        /// `conntrack.maxPerCore` and `min`, and the flags give the same settings.
        #[test]
        fn reads_the_conntrack_settings_it_was_given(
            file in crate::testgen::kube_proxy_file(),
            shape in crate::testgen::kube_proxy_shape(),
            joined in proptest::bool::ANY,
            pid in 1u32..4_194_304,
        ) {
            let text = file.render(shape);
            proptest::prop_assert_eq!(parse_config(&text), Ok((file.max_per_core, file.conntrack_min)), "{}", text);
            let want = Settings {
                pid,
                origin: Origin::Flags,
                max_per_core: file.max_per_core.unwrap_or(DEFAULT_MAX_PER_CORE),
                min: file.conntrack_min.unwrap_or(DEFAULT_MIN),
            };
            proptest::prop_assert_eq!(
                from_config(pid, "/var/lib/kube-proxy/config.conf", &text),
                Ok(Settings { origin: Origin::ConfigFile("/var/lib/kube-proxy/config.conf".into()), ..want.clone() })
            );
            let mut args = vec!["kube-proxy".to_string(), "--v=2".into()];
            for (name, v) in [("--conntrack-max-per-core", file.max_per_core), ("--conntrack-min", file.conntrack_min)] {
                if let Some(v) = v {
                    if joined {
                        args.push(format!("{name}={v}"));
                    } else {
                        args.extend([name.to_string(), v.to_string()]);
                    }
                }
            }
            proptest::prop_assert_eq!(from_flags(pid, &args), Ok(want));
        }
    }
}
