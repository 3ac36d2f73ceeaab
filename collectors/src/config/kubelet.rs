//! The kubelet's settings that node-doctor judges by: its root dir, eviction thresholds and
//! image GC threshold (disk), and the cluster DNS it hands pods (conntrack), from its command
//! line (`/proc/<pid>/cmdline`) and its config file (`--config`, else
//! `/var/lib/kubelet/config.yaml`; YAML or JSON). Command-line flags win over the file, as in
//! the kubelet.
//!
//! The YAML reader is deliberately small: it reads top-level `key: value` scalars and
//! one level of block (`key:` + indented `k: v` lines) or flow (`{k: v, ...}`) maps, which is
//! all a `KubeletConfiguration` needs for the keys used here. Anything else is skipped.
//! `clusterDNS` (a list) is read by [`cluster_dns_from_config`], a line scanner that accepts a
//! block list, a flow list (possibly over several lines) or JSON.

use std::collections::BTreeMap;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";
pub const DEFAULT_CONFIG: &str = "/var/lib/kubelet/config.yaml";

/// The kubelet's defaults for the disk signals (`pkg/kubelet/apis/config/v1beta1`, Linux).
pub const DEFAULT_EVICTION_HARD: &[(&str, &str)] = &[
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
];
pub const DEFAULT_IMAGE_GC_HIGH_PERCENT: f64 = 85.0;

/// The disk-related keys of a `KubeletConfiguration`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// `evictionSoftGracePeriod`: how long a soft threshold must be crossed before eviction.
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub image_gc_high_threshold_percent: Option<String>,
    pub container_log_max_size: Option<String>,
    /// Kubelet 1.34+: merge unspecified `evictionHard` signals with the defaults.
    pub merge_default_eviction_settings: Option<bool>,
    /// `clusterDNS`: the DNS servers pods are given (empty when not set).
    pub cluster_dns: Vec<String>,
    /// `clusterDomain`: the DNS domain of the cluster's Services (`cluster.local` with most
    /// installers; the kubelet's own default is empty).
    pub cluster_domain: Option<String>,
    /// `containerRuntimeEndpoint` (kubelet 1.27+; earlier only the flag).
    pub container_runtime_endpoint: Option<String>,
    /// `healthzPort` (default 10248; 0 disables the endpoint).
    pub healthz_port: Option<String>,
    /// `healthzBindAddress` (default 127.0.0.1).
    pub healthz_bind_address: Option<String>,
    /// `staticPodPath`: the directory of static pod manifests.
    pub static_pod_path: Option<String>,
    /// `failSwapOn` (default true: the kubelet refuses to start while swap is on).
    pub fail_swap_on: Option<bool>,
    /// `memorySwap.swapBehavior` (`NoSwap`, the default since 1.30, or `LimitedSwap`).
    pub swap_behavior: Option<String>,
}

/// Parses a kubelet config file (YAML, or JSON when it starts with `{`).
pub fn parse_config(text: &str) -> Result<Config, String> {
    if text.trim_start().starts_with('{') {
        return parse_json(text);
    }
    let mut top: BTreeMap<String, Value> = BTreeMap::new();
    let mut current: Option<(String, usize, BTreeMap<String, String>)> = None;
    for raw in text.lines() {
        let line = strip_comment(raw);
        if line.trim().is_empty() || line.trim_start().starts_with("---") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let body = line.trim();
        if indent > 0 {
            // A child line of the open block map; only its first indentation level counts.
            if let Some((_, level, map)) = current.as_mut() {
                if *level == 0 {
                    *level = indent;
                }
                if indent == *level {
                    if let Some((k, v)) = split_key(body) {
                        map.insert(k, unquote(v));
                    }
                }
            }
            continue;
        }
        if let Some((k, _, map)) = current.take() {
            top.insert(k, Value::Map(map));
        }
        let Some((key, value)) = split_key(body) else {
            continue;
        };
        if value.is_empty() {
            current = Some((key, 0, BTreeMap::new()));
        } else if let Some(inner) = value.strip_prefix('{') {
            let inner = inner
                .strip_suffix('}')
                .ok_or_else(|| format!("{key}: unterminated flow map"))?;
            top.insert(key, Value::Map(parse_flow_map(inner)));
        } else {
            top.insert(key, Value::Scalar(unquote(value)));
        }
    }
    if let Some((k, _, m)) = current.take() {
        top.insert(k, Value::Map(m));
    }
    let map = |k: &str| match top.get(k) {
        Some(Value::Map(m)) => Some(m.clone()),
        _ => None,
    };
    let scalar = |k: &str| match top.get(k) {
        Some(Value::Scalar(s)) => Some(s.clone()),
        _ => None,
    };
    Ok(Config {
        eviction_hard: map("evictionHard"),
        eviction_soft: map("evictionSoft"),
        eviction_soft_grace_period: map("evictionSoftGracePeriod"),
        image_gc_high_threshold_percent: scalar("imageGCHighThresholdPercent"),
        container_log_max_size: scalar("containerLogMaxSize"),
        merge_default_eviction_settings: scalar("mergeDefaultEvictionSettings")
            .and_then(|s| yaml_bool(&s)),
        cluster_dns: cluster_dns_from_config(text),
        cluster_domain: scalar("clusterDomain").filter(|s| !s.is_empty()),
        container_runtime_endpoint: scalar("containerRuntimeEndpoint"),
        healthz_port: scalar("healthzPort"),
        healthz_bind_address: scalar("healthzBindAddress"),
        static_pod_path: scalar("staticPodPath"),
        fail_swap_on: scalar("failSwapOn").and_then(|s| yaml_bool(&s)),
        swap_behavior: map("memorySwap")
            .and_then(|m| m.get("swapBehavior").cloned())
            .filter(|s| !s.is_empty()),
    })
}

/// A YAML 1.1 boolean as the kubelet's decoder (sigs.k8s.io/yaml, a fork of go-yaml v2)
/// reads one into a bool field: `failSwapOn: no` is false there, not a string. Anything else
/// is no value (the kubelet would refuse the file).
fn yaml_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            Some(true)
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            Some(false)
        }
        _ => None,
    }
}

enum Value {
    Scalar(String),
    Map(BTreeMap<String, String>),
}

fn parse_json(text: &str) -> Result<Config, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let scalar = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let map = |k: &str| {
        v.get(k).and_then(|m| m.as_object()).map(|o| {
            o.iter()
                .filter_map(|(k, v)| scalar(v).map(|s| (k.clone(), s)))
                .collect::<BTreeMap<_, _>>()
        })
    };
    Ok(Config {
        eviction_hard: map("evictionHard"),
        eviction_soft: map("evictionSoft"),
        eviction_soft_grace_period: map("evictionSoftGracePeriod"),
        image_gc_high_threshold_percent: v.get("imageGCHighThresholdPercent").and_then(scalar),
        container_log_max_size: v.get("containerLogMaxSize").and_then(scalar),
        merge_default_eviction_settings: v
            .get("mergeDefaultEvictionSettings")
            .and_then(|b| b.as_bool()),
        cluster_dns: cluster_dns_from_config(text),
        cluster_domain: v
            .get("clusterDomain")
            .and_then(scalar)
            .filter(|s| !s.is_empty()),
        container_runtime_endpoint: v.get("containerRuntimeEndpoint").and_then(scalar),
        healthz_port: v.get("healthzPort").and_then(scalar),
        healthz_bind_address: v.get("healthzBindAddress").and_then(scalar),
        static_pod_path: v.get("staticPodPath").and_then(scalar),
        fail_swap_on: v.get("failSwapOn").and_then(|b| b.as_bool()),
        swap_behavior: v
            .get("memorySwap")
            .and_then(|m| m.get("swapBehavior"))
            .and_then(scalar)
            .filter(|s| !s.is_empty()),
    })
}

/// `key: value` -> (key, value) with the key unquoted.
fn split_key(body: &str) -> Option<(String, &str)> {
    let body = body.strip_prefix("- ").unwrap_or(body);
    let (k, v) = body.split_once(':')?;
    let k = unquote(k.trim());
    if k.is_empty() {
        return None;
    }
    Some((k, v.trim()))
}

fn parse_flow_map(inner: &str) -> BTreeMap<String, String> {
    inner
        .split(',')
        .filter_map(|kv| split_key(kv.trim()).map(|(k, v)| (k, unquote(v))))
        .collect()
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

/// Cuts a YAML comment: `#` at the start or after whitespace, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') if prev_space => return &line[..i],
            (None, '"') | (None, '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// Parses the `--eviction-hard` / `--eviction-soft` flag form:
/// `memory.available<100Mi,nodefs.available<10%`.
pub fn parse_eviction_flag(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('<')
            .ok_or_else(|| format!("{part:?} has no '<'"))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Parses the `--eviction-soft-grace-period` flag form: `nodefs.available=1m30s,...`.
pub fn parse_grace_flag(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// An eviction threshold: a percentage of capacity or an absolute quantity (bytes for
/// `*.available`, a count for `*.inodesFree`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Percent(f64),
    Quantity(f64),
}

impl Threshold {
    /// Parses `10%`, `1Gi`, `500M`, `100000`.
    pub fn parse(s: &str) -> Result<Threshold, String> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{s:?}: percentage out of range"));
            }
            return Ok(Threshold::Percent(v));
        }
        parse_quantity(s).map(Threshold::Quantity)
    }

    /// The free amount (bytes or inodes) below which the threshold is crossed.
    pub fn min_free(&self, capacity: f64) -> f64 {
        match *self {
            Threshold::Percent(p) => capacity * p / 100.0,
            Threshold::Quantity(q) => q,
        }
    }

    /// A threshold of zero disables the signal.
    pub fn is_zero(&self) -> bool {
        match *self {
            Threshold::Percent(p) => p <= 0.0,
            Threshold::Quantity(q) => q <= 0.0,
        }
    }
}

/// Parses a Kubernetes resource quantity (`1Gi`, `500M`, `1.5G`, `100`) to a number.
pub fn parse_quantity(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().map_err(|e| format!("{s:?}: {e}"))?;
    let mult = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "m" => 1e-3,
        other => return Err(format!("{s:?}: unknown suffix {other:?}")),
    };
    let v = n * mult;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s:?}: out of range"));
    }
    Ok(v)
}

/// Where a setting came from, for the summary ("evictionHard in /var/lib/kubelet/config.yaml").
pub type Origin = String;

/// The kubelet settings that judge a disk, after flags, config file and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Disk signals (`nodefs.available`, ...) with thresholds; a signal missing here has no
    /// hard eviction threshold.
    pub eviction_hard: BTreeMap<String, Threshold>,
    pub hard_origin: Origin,
    pub eviction_soft: BTreeMap<String, Threshold>,
    pub soft_origin: Origin,
    /// The grace period of each soft threshold (`evictionSoftGracePeriod`,
    /// `--eviction-soft-grace-period`): the kubelet evicts once the signal has stayed past
    /// the soft threshold that long.
    pub eviction_soft_grace: BTreeMap<String, std::time::Duration>,
    pub image_gc_high_percent: f64,
    pub gc_origin: Origin,
    pub container_log_max_size: Option<String>,
    /// Values that could not be parsed (`name: reason`), reported in the collector status.
    pub errors: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        effective(&[], None, "")
    }
}

/// Disk signals the product judges.
pub const DISK_SIGNALS: &[&str] = &[
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
];

/// Combines the kubelet's flags (`args` of its process; empty when not running), its config
/// file (if read, with its host path) and the defaults, the way the kubelet does: a flag
/// beats the file, the file beats the default, and an `evictionHard` map given at all
/// replaces the default map (unless `mergeDefaultEvictionSettings`).
pub fn effective(args: &[String], config: Option<&Config>, config_path: &str) -> Settings {
    let mut errors = Vec::new();
    let mut convert = |map: &BTreeMap<String, String>| -> BTreeMap<String, Threshold> {
        map.iter()
            .filter(|(k, _)| DISK_SIGNALS.contains(&k.as_str()))
            .filter_map(|(k, v)| match Threshold::parse(v) {
                Ok(t) => Some((k.clone(), t)),
                Err(e) => {
                    errors.push(format!("{k}: {e}"));
                    None
                }
            })
            .collect()
    };
    let defaults: BTreeMap<String, String> = DEFAULT_EVICTION_HARD
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();

    let flag_hard = super::flag_value(args, "--eviction-hard");
    let (hard_raw, hard_origin) = if let Some(f) = flag_hard {
        (
            parse_eviction_flag(&f).unwrap_or_default(),
            "--eviction-hard flag of the running kubelet".to_string(),
        )
    } else if let Some(m) = config.and_then(|c| c.eviction_hard.clone()) {
        let merge = config
            .and_then(|c| c.merge_default_eviction_settings)
            .unwrap_or(false);
        let mut m2 = if merge {
            defaults.clone()
        } else {
            BTreeMap::new()
        };
        m2.extend(m);
        (m2, format!("evictionHard in {config_path}"))
    } else {
        (defaults, "kubelet default".to_string())
    };
    let eviction_hard = convert(&hard_raw);

    let (soft_raw, soft_origin) = if let Some(f) = super::flag_value(args, "--eviction-soft") {
        (
            parse_eviction_flag(&f).unwrap_or_default(),
            "--eviction-soft flag of the running kubelet".to_string(),
        )
    } else if let Some(m) = config.and_then(|c| c.eviction_soft.clone()) {
        (m, format!("evictionSoft in {config_path}"))
    } else {
        (BTreeMap::new(), "kubelet default (none)".to_string())
    };
    let eviction_soft = convert(&soft_raw);
    let grace_raw = match super::flag_value(args, "--eviction-soft-grace-period") {
        Some(f) => parse_grace_flag(&f),
        None => config
            .and_then(|c| c.eviction_soft_grace_period.clone())
            .unwrap_or_default(),
    };
    let eviction_soft_grace = grace_raw
        .iter()
        .filter(|(k, _)| DISK_SIGNALS.contains(&k.as_str()))
        .filter_map(|(k, v)| match super::go_duration::parse(v) {
            Some(d) => Some((k.clone(), d)),
            None => {
                errors.push(format!("{k}: grace period {v:?} is not a duration"));
                None
            }
        })
        .collect();

    let gc_raw = super::flag_value(args, "--image-gc-high-threshold")
        .map(|v| {
            (
                v,
                "--image-gc-high-threshold flag of the running kubelet".to_string(),
            )
        })
        .or_else(|| {
            config
                .and_then(|c| c.image_gc_high_threshold_percent.clone())
                .map(|v| (v, format!("imageGCHighThresholdPercent in {config_path}")))
        });
    let (image_gc_high_percent, gc_origin) = match gc_raw {
        Some((v, origin)) => match v.trim().parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => (p, origin),
            _ => {
                errors.push(format!("image GC high threshold {v:?} is not a percentage"));
                (DEFAULT_IMAGE_GC_HIGH_PERCENT, "kubelet default".to_string())
            }
        },
        None => (DEFAULT_IMAGE_GC_HIGH_PERCENT, "kubelet default".to_string()),
    };
    let container_log_max_size = super::flag_value(args, "--container-log-max-size")
        .or_else(|| config.and_then(|c| c.container_log_max_size.clone()));
    Settings {
        eviction_hard,
        hard_origin,
        eviction_soft,
        soft_origin,
        eviction_soft_grace,
        image_gc_high_percent,
        gc_origin,
        container_log_max_size,
        errors,
    }
}

/// `--cluster-dns` addresses (comma separated) from the kubelet's arguments.
pub fn cluster_dns_from_args(args: &[String]) -> Option<Vec<String>> {
    let v = super::flag_value(args, "--cluster-dns")?;
    let list: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!list.is_empty()).then_some(list)
}

/// One `clusterDNS` list item without comment, separators and quotes.
fn clean_dns_item(s: &str) -> Option<String> {
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

/// `clusterDNS` addresses from a kubelet configuration file (YAML or JSON), scanned line by
/// line for the `clusterDNS` key: block list, flow list (possibly spanning lines) or JSON
/// array. Never fails; empty when the key is absent.
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
            return body.split(',').filter_map(clean_dns_item).collect();
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            return clean_dns_item(rest).into_iter().collect();
        }
        // Block list: following `- item` lines.
        let mut out = Vec::new();
        while let Some(next) = lines.peek() {
            let t = next.trim_start();
            if let Some(item) = t.strip_prefix("- ") {
                out.extend(clean_dns_item(item));
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

/// The cluster DNS servers the kubelet hands pods: `--cluster-dns` when given, else
/// `clusterDNS` of its config file (empty when unknown).
pub fn cluster_dns(args: &[String], config: Option<&Config>) -> Vec<String> {
    cluster_dns_from_args(args)
        .or_else(|| config.map(|c| c.cluster_dns.clone()))
        .unwrap_or_default()
}

/// The cluster's DNS domain: `--cluster-domain` when given, else `clusterDomain` of its config
/// file; `None` when neither sets one (the kubelet then gives pods no cluster search domain).
/// A trailing dot is dropped.
pub fn cluster_domain(args: &[String], config: Option<&Config>) -> Option<String> {
    super::flag_value(args, "--cluster-domain")
        .or_else(|| config.and_then(|c| c.cluster_domain.clone()))
        .map(|d| d.trim().trim_end_matches('.').to_string())
        .filter(|d| !d.is_empty())
}

/// The kubelet's default healthz port.
pub const DEFAULT_HEALTHZ_PORT: u16 = 10248;
/// Where kubeadm and most installers put static pod manifests.
pub const DEFAULT_STATIC_POD_PATH: &str = "/etc/kubernetes/manifests";

/// Where the kubelet's own health endpoint listens: `--healthz-port`/`--healthz-bind-address`,
/// else `healthzPort`/`healthzBindAddress` of its config, else 127.0.0.1:10248. `Ok(None)`
/// when the port is 0 (the endpoint is off); `Err` names a value that is not a port or an
/// address.
pub fn healthz(
    args: &[String],
    config: Option<&Config>,
) -> Result<Option<std::net::SocketAddr>, String> {
    let port = super::flag_value(args, "--healthz-port")
        .or_else(|| config.and_then(|c| c.healthz_port.clone()));
    let port = match port {
        None => DEFAULT_HEALTHZ_PORT,
        Some(p) => p
            .trim()
            .parse::<u16>()
            .map_err(|_| format!("healthz port {p:?} is not a port number"))?,
    };
    if port == 0 {
        return Ok(None);
    }
    let bind = super::flag_value(args, "--healthz-bind-address")
        .or_else(|| config.and_then(|c| c.healthz_bind_address.clone()))
        .unwrap_or_else(|| "127.0.0.1".to_string());
    let ip: std::net::IpAddr = bind
        .trim()
        .parse()
        .map_err(|_| format!("healthz bind address {bind:?} is not an IP address"))?;
    // A wildcard bind answers on loopback too.
    let ip = if ip.is_unspecified() {
        match ip {
            std::net::IpAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        ip
    };
    Ok(Some(std::net::SocketAddr::new(ip, port)))
}

/// The kubelet's container runtime endpoint as written (`unix:///run/containerd/containerd.sock`):
/// `--container-runtime-endpoint`, else `containerRuntimeEndpoint` of its config. `None` when
/// neither is set (the kubelet's default then depends on its version: dockershim before 1.24,
/// containerd's socket from 1.27).
pub fn runtime_endpoint(args: &[String], config: Option<&Config>) -> Option<String> {
    super::flag_value(args, "--container-runtime-endpoint")
        .or_else(|| config.and_then(|c| c.container_runtime_endpoint.clone()))
        .filter(|e| !e.trim().is_empty())
}

/// Static pod manifests: `--pod-manifest-path`, else `staticPodPath` of the config. `None` when
/// neither is set (the kubelet then runs no static pods).
pub fn static_pod_path(args: &[String], config: Option<&Config>) -> Option<String> {
    super::flag_value(args, "--pod-manifest-path")
        .or_else(|| config.and_then(|c| c.static_pod_path.clone()))
        .filter(|p| !p.trim().is_empty())
}

/// Where the kubelet's `failSwapOn` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapOrigin {
    Flag,
    ConfigFile,
    Default,
}

/// The kubelet's swap settings: `failSwapOn` (`--fail-swap-on` wins over the file; default
/// true) and `memorySwap.swapBehavior` (file only; `None` when not set).
pub fn swap_settings(
    args: &[String],
    config: Option<&Config>,
) -> (bool, SwapOrigin, Option<String>) {
    let behavior = config.and_then(|c| c.swap_behavior.clone());
    // A Go bool flag: `--fail-swap-on` alone is true, a value needs `=`; the last one wins.
    let flag = args.iter().rev().find_map(|a| {
        let rest = a.strip_prefix("--fail-swap-on")?;
        match rest.strip_prefix('=') {
            Some(v) => Some(!v.eq_ignore_ascii_case("false")),
            None => rest.is_empty().then_some(true),
        }
    });
    if let Some(v) = flag {
        return (v, SwapOrigin::Flag, behavior);
    }
    match config.and_then(|c| c.fail_swap_on) {
        Some(b) => (b, SwapOrigin::ConfigFile, behavior),
        None => (true, SwapOrigin::Default, behavior),
    }
}

/// Reads a kubelet config file under the host root; `Ok(None)` when it does not exist.
pub fn read_config(host: &HostPaths, host_path: &str) -> Result<Option<Config>, ReadError> {
    let path = host.resolve(host_path);
    match hostfs::read_text_optional(&path, cap::CONFIG)? {
        None => Ok(None),
        Some(text) => parse_config(&text)
            .map(Some)
            .map_err(|e| ReadError::parse(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A kubeadm-generated /var/lib/kubelet/config.yaml (kubeadm 1.28) with custom disk settings.
    const KUBEADM_CONFIG: &str = r#"apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
healthzBindAddress: 127.0.0.1
healthzPort: 10248
staticPodPath: /etc/kubernetes/manifests
clusterDNS:
- 10.96.0.10
containerLogMaxSize: 50Mi   # rotate early
evictionHard:
  imagefs.available: "20%"
  memory.available: 100Mi
  nodefs.available: 2Gi
  nodefs.inodesFree: '5%'
evictionSoft: {nodefs.available: "15%", imagefs.available: 25%}
imageGCHighThresholdPercent: 80
kind: KubeletConfiguration
"#;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn cluster_dns_flags_in_both_forms() {
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
        assert_eq!(
            super::super::flag_value(&a, "--config").as_deref(),
            Some("/etc/k/c.yaml")
        );
        let a = args("/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml --cluster-dns-x=1");
        assert_eq!(cluster_dns_from_args(&a), None);
        assert_eq!(cluster_dns_from_args(&args("kubelet --cluster-dns")), None);
        // The flag beats the file.
        let c = parse_config("clusterDNS:\n- 10.96.0.10\n").unwrap();
        assert_eq!(
            cluster_dns(&args("kubelet --cluster-dns=1.2.3.4"), Some(&c)),
            vec!["1.2.3.4".to_string()]
        );
        assert_eq!(cluster_dns(&[], Some(&c)), vec!["10.96.0.10".to_string()]);
        assert!(cluster_dns(&[], None).is_empty());
    }

    #[test]
    fn cluster_dns_config_block_flow_and_json() {
        let yaml = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 169.254.20.10 # node-local\n  - \"10.96.0.10\"\nclusterDomain: cluster.local\n";
        assert_eq!(
            cluster_dns_from_config(yaml),
            vec!["169.254.20.10".to_string(), "10.96.0.10".to_string()]
        );
        assert_eq!(
            parse_config(yaml).unwrap().cluster_dns,
            cluster_dns_from_config(yaml)
        );
        let flow = "clusterDomain: cluster.local\nclusterDNS: [10.96.0.10, '10.96.0.11']\n";
        assert_eq!(
            cluster_dns_from_config(flow),
            vec!["10.96.0.10".to_string(), "10.96.0.11".to_string()]
        );
        assert_eq!(
            parse_config(flow).unwrap().cluster_dns,
            cluster_dns_from_config(flow)
        );
        let json = "{\n  \"kind\": \"KubeletConfiguration\",\n  \"clusterDNS\": [\n    \"10.96.0.10\"\n  ],\n  \"clusterDomain\": \"cluster.local\"\n}";
        assert_eq!(
            cluster_dns_from_config(json),
            vec!["10.96.0.10".to_string()]
        );
        assert_eq!(
            parse_config(json).unwrap().cluster_dns,
            vec!["10.96.0.10".to_string()]
        );
        assert!(cluster_dns_from_config("kind: KubeletConfiguration\n").is_empty());
        assert_eq!(
            parse_config(KUBEADM_CONFIG).unwrap().cluster_dns,
            vec!["10.96.0.10".to_string()]
        );
    }

    #[test]
    fn cluster_domain_from_flag_else_config() {
        let json = "{\"clusterDomain\": \"cluster.local.\"}";
        let c = parse_config(json).unwrap();
        assert_eq!(
            cluster_domain(&[], Some(&c)).as_deref(),
            Some("cluster.local")
        );
        let y = parse_config("clusterDomain: corp.example\n").unwrap();
        assert_eq!(
            cluster_domain(&[], Some(&y)).as_deref(),
            Some("corp.example")
        );
        let args = vec![
            "kubelet".to_string(),
            "--cluster-domain=k8s.test".to_string(),
        ];
        assert_eq!(cluster_domain(&args, Some(&y)).as_deref(), Some("k8s.test"));
        let empty = parse_config("clusterDomain: \"\"\n").unwrap();
        assert_eq!(cluster_domain(&[], Some(&empty)), None);
        assert_eq!(cluster_domain(&[], None), None);
    }

    #[test]
    fn health_endpoint_runtime_endpoint_and_static_pods() {
        let c = parse_config(KUBEADM_CONFIG).unwrap();
        assert_eq!(
            c.static_pod_path.as_deref(),
            Some("/etc/kubernetes/manifests")
        );
        assert_eq!(
            healthz(&[], Some(&c)).unwrap(),
            Some("127.0.0.1:10248".parse().unwrap())
        );
        assert_eq!(
            runtime_endpoint(&[], Some(&c)).as_deref(),
            Some("unix:///run/containerd/containerd.sock")
        );
        let a = args("kubelet --healthz-port=10250 --healthz-bind-address=0.0.0.0 --container-runtime-endpoint unix:///var/run/cri-dockerd.sock --pod-manifest-path=/etc/k8s/static");
        assert_eq!(
            healthz(&a, Some(&c)).unwrap(),
            Some("127.0.0.1:10250".parse().unwrap())
        );
        assert_eq!(
            runtime_endpoint(&a, Some(&c)).as_deref(),
            Some("unix:///var/run/cri-dockerd.sock")
        );
        assert_eq!(
            static_pod_path(&a, Some(&c)).as_deref(),
            Some("/etc/k8s/static")
        );
        assert_eq!(
            healthz(&args("kubelet --healthz-port=0"), None).unwrap(),
            None
        );
        assert!(healthz(&args("kubelet --healthz-port=http"), None).is_err());
        assert!(healthz(&args("kubelet --healthz-bind-address=localhost"), None).is_err());
        let j = parse_config(r#"{"healthzPort": 10249, "healthzBindAddress": "::1", "containerRuntimeEndpoint": "unix:///run/crio/crio.sock"}"#).unwrap();
        assert_eq!(
            healthz(&[], Some(&j)).unwrap(),
            Some("[::1]:10249".parse().unwrap())
        );
        assert_eq!(
            j.container_runtime_endpoint.as_deref(),
            Some("unix:///run/crio/crio.sock")
        );
        assert_eq!(runtime_endpoint(&[], None), None);
        assert_eq!(static_pod_path(&[], None), None);
    }

    #[test]
    fn reads_kubeadm_yaml() {
        let c = parse_config(KUBEADM_CONFIG).unwrap();
        let hard = c.eviction_hard.clone().unwrap();
        assert_eq!(hard.get("imagefs.available").unwrap(), "20%");
        assert_eq!(hard.get("nodefs.available").unwrap(), "2Gi");
        assert_eq!(hard.get("nodefs.inodesFree").unwrap(), "5%");
        assert_eq!(hard.len(), 4);
        let soft = c.eviction_soft.clone().unwrap();
        assert_eq!(soft.get("imagefs.available").unwrap(), "25%");
        assert_eq!(c.image_gc_high_threshold_percent.as_deref(), Some("80"));
        assert_eq!(c.container_log_max_size.as_deref(), Some("50Mi"));
        // Nested maps under other keys do not leak into the top level.
        assert!(!hard.contains_key("enabled"));

        let s = effective(&[], Some(&c), "/var/lib/kubelet/config.yaml");
        assert_eq!(
            s.eviction_hard.get("nodefs.available"),
            Some(&Threshold::Quantity(2.0 * 1024f64.powi(3)))
        );
        assert_eq!(
            s.hard_origin,
            "evictionHard in /var/lib/kubelet/config.yaml"
        );
        assert_eq!(s.image_gc_high_percent, 80.0);
        assert_eq!(
            s.eviction_soft.get("nodefs.available"),
            Some(&Threshold::Percent(15.0))
        );
    }

    #[test]
    fn partial_eviction_hard_drops_defaults_unless_merged() {
        let c = parse_config("evictionHard:\n  memory.available: 200Mi\n").unwrap();
        let s = effective(&[], Some(&c), "/x.yaml");
        assert!(s.eviction_hard.is_empty());
        let c = parse_config(
            "mergeDefaultEvictionSettings: true\nevictionHard:\n  imagefs.available: 30%\n",
        )
        .unwrap();
        let s = effective(&[], Some(&c), "/x.yaml");
        assert_eq!(
            s.eviction_hard.get("imagefs.available"),
            Some(&Threshold::Percent(30.0))
        );
        assert_eq!(
            s.eviction_hard.get("nodefs.available"),
            Some(&Threshold::Percent(10.0))
        );
    }

    #[test]
    fn defaults_without_config_and_flags_win() {
        let s = Settings::default();
        assert_eq!(
            s.eviction_hard.get("nodefs.available"),
            Some(&Threshold::Percent(10.0))
        );
        assert_eq!(
            s.eviction_hard.get("nodefs.inodesFree"),
            Some(&Threshold::Percent(5.0))
        );
        assert_eq!(
            s.eviction_hard.get("imagefs.available"),
            Some(&Threshold::Percent(15.0))
        );
        assert_eq!(s.image_gc_high_percent, 85.0);
        assert_eq!(s.hard_origin, "kubelet default");

        let c = parse_config(KUBEADM_CONFIG).unwrap();
        let args: Vec<String> = [
            "/usr/bin/kubelet",
            "--eviction-hard=nodefs.available<5%,imagefs.available<7%",
            "--image-gc-high-threshold",
            "90",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = effective(&args, Some(&c), "/c.yaml");
        assert_eq!(
            s.eviction_hard.get("imagefs.available"),
            Some(&Threshold::Percent(7.0))
        );
        assert_eq!(s.hard_origin, "--eviction-hard flag of the running kubelet");
        assert_eq!(s.image_gc_high_percent, 90.0);
    }

    #[test]
    fn swap_settings_from_flag_file_and_default() {
        let yaml = "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n";
        let c = parse_config(yaml).unwrap();
        assert_eq!(
            swap_settings(&args("/usr/bin/kubelet"), Some(&c)),
            (false, SwapOrigin::ConfigFile, Some("LimitedSwap".into()))
        );
        assert!(swap_settings(&args("/usr/bin/kubelet --fail-swap-on=true"), Some(&c)).0);
        assert_eq!(
            swap_settings(&args("/usr/bin/kubelet --fail-swap-on=false"), None),
            (false, SwapOrigin::Flag, None)
        );
        // YAML 1.1's spellings, as the kubelet's decoder reads them.
        assert_eq!(
            parse_config("failSwapOn: no\n").unwrap().fail_swap_on,
            Some(false)
        );
        assert_eq!(
            parse_config("failSwapOn: On\n").unwrap().fail_swap_on,
            Some(true)
        );
        // A bool flag takes no separate value.
        assert!(swap_settings(&args("/usr/bin/kubelet --fail-swap-on false"), None).0);
        let kubeadm = parse_config(KUBEADM_CONFIG).unwrap();
        assert_eq!(
            swap_settings(&[], Some(&kubeadm)),
            (true, SwapOrigin::Default, None)
        );
        let json =
            parse_config(r#"{"failSwapOn": false, "memorySwap": {"swapBehavior": "NoSwap"}}"#)
                .unwrap();
        assert_eq!(json.fail_swap_on, Some(false));
        assert_eq!(json.swap_behavior.as_deref(), Some("NoSwap"));
    }

    #[test]
    fn reads_json_config() {
        let c = parse_config(
            r#"{"kind":"KubeletConfiguration","evictionHard":{"nodefs.available":"0%"},"imageGCHighThresholdPercent":100}"#,
        )
        .unwrap();
        assert_eq!(c.image_gc_high_threshold_percent.as_deref(), Some("100"));
        let s = effective(&[], Some(&c), "/c.json");
        assert!(s.eviction_hard.get("nodefs.available").unwrap().is_zero());
    }

    #[test]
    fn quantities_and_thresholds() {
        assert_eq!(parse_quantity("1Gi").unwrap(), 1073741824.0);
        assert_eq!(parse_quantity("500M").unwrap(), 5e8);
        assert_eq!(parse_quantity("1.5Ki").unwrap(), 1536.0);
        assert_eq!(parse_quantity("100000").unwrap(), 1e5);
        assert!(parse_quantity("12XB").is_err());
        assert!(parse_quantity("").is_err());
        assert!(Threshold::parse("120%").is_err());
        assert_eq!(Threshold::parse("10%").unwrap().min_free(200.0), 20.0);
        assert_eq!(Threshold::parse("1Gi").unwrap().min_free(1.0), 1073741824.0);
        assert!(Threshold::parse("0").unwrap().is_zero());
        let m = parse_eviction_flag("memory.available<100Mi, nodefs.available<10%").unwrap();
        assert_eq!(m.get("nodefs.available").unwrap(), "10%");
        assert!(parse_eviction_flag("nodefs.available=10%").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            if let Ok(c) = parse_config(&s) {
                let _ = effective(&[], Some(&c), "/x");
            }
            let _ = parse_eviction_flag(&s);
            let _ = Threshold::parse(&s);
            let _ = cluster_dns_from_config(&s);
        }

        #[test]
        fn cluster_dns_scan_never_panics(text in "(clusterDNS:|\\[|\\]|- |,|\"|'| |#|[0-9.]{1,8}|\n){0,40}") {
            let _ = cluster_dns_from_config(&text);
        }

        #[test]
        fn never_panics_on_yaml_like_text(s in "([a-zA-Z.]{1,12}:( [\"'{}a-z0-9%,:. ]{0,12})?\n(  [a-z.]{1,8}: [0-9%MGi\"]{0,5}\n){0,3}){0,4}") {
            let _ = parse_config(&s);
        }

        /// A `KubeletConfiguration` as kubeadm or a person writes it (YAML: a `---` start or
        /// not, block maps indented two or four spaces, flow maps, bare, double- or
        /// single-quoted values, booleans in any of YAML 1.1's spellings, block or flow
        /// `clusterDNS`, comments after values and on lines of their own, an empty
        /// `clusterDomain` or `swapBehavior`) or as JSON: every key this module reads comes
        /// back as written, an empty string as unset; the eviction flags read back too.
        #[test]
        fn reads_the_config_it_was_given(
            c in config(),
            shape in shape(),
            json in proptest::bool::ANY,
        ) {
            let text = if json { render_json(&c, shape.empty) } else { render_yaml(&c, shape) };
            proptest::prop_assert_eq!(parse_config(&text), Ok(c.clone()), "{}", text);
            if let Some(hard) = &c.eviction_hard {
                let flag: Vec<String> = hard.iter().map(|(k, v)| format!("{k}<{v}")).collect();
                proptest::prop_assert_eq!(parse_eviction_flag(&flag.join(",")), Ok(hard.clone()));
            }
        }
    }

    use proptest::prelude::*;

    fn signals() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
        prop::option::of(prop::collection::btree_map(
            "memory\\.available|nodefs\\.available|nodefs\\.inodesFree|imagefs\\.available|imagefs\\.inodesFree|pid\\.available",
            "[0-9]{1,3}%|[0-9]{1,4}(Ki|Mi|Gi)?|[0-9]m[0-9]{1,2}s",
            1..4,
        ))
    }

    fn config() -> impl Strategy<Value = Config> {
        let word = || prop::option::of("[A-Za-z0-9][A-Za-z0-9_./-]{0,20}");
        (
            (
                signals(),
                signals(),
                signals(),
                prop::option::of("[1-9][0-9]?"),
                prop::option::of("[0-9]{1,3}(Ki|Mi)"),
            ),
            (
                prop::option::of(any::<bool>()),
                prop::collection::vec(any::<std::net::IpAddr>().prop_map(|a| a.to_string()), 0..3),
            ),
            (
                word(),
                prop::option::of("unix:///run/(containerd/containerd|crio/crio)\\.sock"),
                prop::option::of("[1-9][0-9]{0,4}"),
            ),
            (
                prop::option::of(any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string())),
                prop::option::of("/etc/kubernetes/[a-z]{1,10}"),
            ),
            (
                prop::option::of(any::<bool>()),
                prop::option::of("NoSwap|LimitedSwap"),
            ),
        )
            .prop_map(
                |(
                    (hard, soft, grace, gc, log),
                    (merge, dns),
                    (domain, endpoint, port),
                    (bind, pods),
                    (swap_on, swap),
                )| Config {
                    eviction_hard: hard,
                    eviction_soft: soft,
                    eviction_soft_grace_period: grace,
                    image_gc_high_threshold_percent: gc,
                    container_log_max_size: log,
                    merge_default_eviction_settings: merge,
                    cluster_dns: dns,
                    cluster_domain: domain,
                    container_runtime_endpoint: endpoint,
                    healthz_port: port,
                    healthz_bind_address: bind,
                    static_pod_path: pods,
                    fail_swap_on: swap_on,
                    swap_behavior: swap,
                },
            )
    }

    /// How a config is written besides its values.
    #[derive(Debug, Clone, Copy)]
    struct Shape {
        flow: bool,
        /// `None`, `Some('"')` or `Some('\'')` around every string value.
        quote: Option<char>,
        /// Which of YAML 1.1's eleven spellings of a boolean (`true`, `Yes`, `ON`, `n`…).
        bool_form: usize,
        /// Spaces per block level.
        indent: usize,
        /// A comment after each scalar, a comment line between keys, a `---` first.
        comments: bool,
        /// An unset `clusterDomain` / `swapBehavior` written as an empty string.
        empty: bool,
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (
            any::<bool>(),
            prop_oneof![Just(None), Just(Some('"')), Just(Some('\''))],
            0usize..11,
            prop_oneof![Just(2usize), Just(4)],
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(flow, quote, bool_form, indent, comments, empty)| Shape {
                flow,
                quote,
                bool_form,
                indent,
                comments,
                empty,
            })
    }

    /// `b` in YAML 1.1 spelling number `form` (go-yaml v2's resolve table).
    fn yaml_bool_text(b: bool, form: usize) -> &'static str {
        const YES: [&str; 11] = [
            "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y",
        ];
        const NO: [&str; 11] = [
            "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N",
        ];
        if b {
            YES[form % 11]
        } else {
            NO[form % 11]
        }
    }

    fn render_yaml(c: &Config, shape: Shape) -> String {
        let Shape {
            flow,
            quote,
            bool_form,
            indent,
            comments,
            empty,
        } = shape;
        let q = |v: &str| match quote {
            Some(q) => format!("{q}{v}{q}"),
            None => v.to_string(),
        };
        let pad = " ".repeat(indent);
        let note = if comments {
            "  # set by the installer"
        } else {
            ""
        };
        let mut t = String::new();
        if comments {
            t += "---\n# kubelet configuration\n";
        }
        t += &format!("apiVersion: kubelet.config.k8s.io/v1beta1\nauthentication:\n{pad}anonymous:\n{pad}{pad}enabled: false\n");
        let map = |t: &mut String, key: &str, m: &Option<BTreeMap<String, String>>| {
            let Some(m) = m else { return };
            if flow {
                let kv: Vec<String> = m.iter().map(|(k, v)| format!("{k}: {}", q(v))).collect();
                *t += &format!("{key}: {{{}}}{note}\n", kv.join(", "));
            } else {
                *t += &format!("{key}:   # thresholds\n");
                for (k, v) in m {
                    *t += &format!("{pad}{k}: {}{note}\n", q(v));
                }
            }
        };
        let scalar = |t: &mut String, key: &str, v: &Option<String>| {
            if let Some(v) = v {
                *t += &format!("{key}: {}{note}\n", q(v));
            }
        };
        let boolean = |t: &mut String, key: &str, b: Option<bool>| {
            if let Some(b) = b {
                *t += &format!("{key}: {}{note}\n", yaml_bool_text(b, bool_form));
            }
        };
        let empty_text = match quote {
            Some(q) => format!("{q}{q}"),
            None => "\"\"".to_string(),
        };
        match &c.cluster_domain {
            Some(d) => t += &format!("clusterDomain: {}{note}\n", q(d)),
            None if empty => t += &format!("clusterDomain: {empty_text}\n"),
            None => {}
        }
        if !c.cluster_dns.is_empty() {
            if flow {
                let items: Vec<String> = c.cluster_dns.iter().map(|d| q(d)).collect();
                t += &format!("clusterDNS: [{}]{note}\n", items.join(", "));
            } else {
                t += "clusterDNS:\n";
                for d in &c.cluster_dns {
                    t += &format!("- {}{note}\n", q(d));
                }
            }
        }
        scalar(&mut t, "containerLogMaxSize", &c.container_log_max_size);
        scalar(
            &mut t,
            "containerRuntimeEndpoint",
            &c.container_runtime_endpoint,
        );
        map(&mut t, "evictionHard", &c.eviction_hard);
        map(&mut t, "evictionSoft", &c.eviction_soft);
        map(
            &mut t,
            "evictionSoftGracePeriod",
            &c.eviction_soft_grace_period,
        );
        boolean(&mut t, "failSwapOn", c.fail_swap_on);
        if comments {
            t += "# health\n";
        }
        scalar(&mut t, "healthzBindAddress", &c.healthz_bind_address);
        scalar(&mut t, "healthzPort", &c.healthz_port);
        scalar(
            &mut t,
            "imageGCHighThresholdPercent",
            &c.image_gc_high_threshold_percent,
        );
        t += "kind: KubeletConfiguration\n";
        match &c.swap_behavior {
            Some(s) => t += &format!("memorySwap:\n{pad}swapBehavior: {}{note}\n", q(s)),
            None if empty => t += &format!("memorySwap:\n{pad}swapBehavior: {empty_text}\n"),
            None => {}
        }
        boolean(
            &mut t,
            "mergeDefaultEvictionSettings",
            c.merge_default_eviction_settings,
        );
        scalar(&mut t, "staticPodPath", &c.static_pod_path);
        t
    }

    fn render_json(c: &Config, empty: bool) -> String {
        let mut v = serde_json::json!({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "authentication": {"anonymous": {"enabled": false}}});
        let num_or_str = |s: &str| {
            s.parse::<u64>()
                .map_or_else(|_| s.into(), serde_json::Value::from)
        };
        for (k, m) in [
            ("evictionHard", &c.eviction_hard),
            ("evictionSoft", &c.eviction_soft),
            ("evictionSoftGracePeriod", &c.eviction_soft_grace_period),
        ] {
            if let Some(m) = m {
                v[k] = serde_json::json!(m);
            }
        }
        for (k, s, number) in [
            (
                "imageGCHighThresholdPercent",
                &c.image_gc_high_threshold_percent,
                true,
            ),
            ("containerLogMaxSize", &c.container_log_max_size, false),
            ("clusterDomain", &c.cluster_domain, false),
            (
                "containerRuntimeEndpoint",
                &c.container_runtime_endpoint,
                false,
            ),
            ("healthzPort", &c.healthz_port, true),
            ("healthzBindAddress", &c.healthz_bind_address, false),
            ("staticPodPath", &c.static_pod_path, false),
        ] {
            if let Some(s) = s {
                v[k] = if number {
                    num_or_str(s)
                } else {
                    s.clone().into()
                };
            }
        }
        if let Some(b) = c.merge_default_eviction_settings {
            v["mergeDefaultEvictionSettings"] = b.into();
        }
        if let Some(b) = c.fail_swap_on {
            v["failSwapOn"] = b.into();
        }
        if let Some(s) = &c.swap_behavior {
            v["memorySwap"] = serde_json::json!({"swapBehavior": s});
        } else if empty {
            v["memorySwap"] = serde_json::json!({"swapBehavior": ""});
        }
        if c.cluster_domain.is_none() && empty {
            v["clusterDomain"] = "".into();
        }
        if !c.cluster_dns.is_empty() {
            v["clusterDNS"] = serde_json::json!(c.cluster_dns);
        }
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }
}
