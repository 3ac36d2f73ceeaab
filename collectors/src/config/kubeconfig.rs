//! The API server a kubeconfig points at: `current-context` → its `cluster` → `server`, the CA
//! that signs the server's certificate (`certificate-authority-data`, base64 PEM, or the
//! `certificate-authority` file), `tls-server-name` and `insecure-skip-tls-verify`. The
//! kubelet's (`--kubeconfig`, `/etc/kubernetes/kubelet.conf` with kubeadm) is the node's link
//! to the control plane. Users and credentials are not read.
//!
//! The YAML reader is small: block maps and block lists (list items at their key's indent or
//! deeper, as `kubectl` and kubeadm write them), plain and quoted scalars, `{}`/`[]`; JSON is
//! read with serde. Anything else is skipped.

use std::path::Path;

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

/// kubeadm's kubelet kubeconfig, the default of the `reach` collector when the kubelet's
/// `--kubeconfig` is not known.
pub const DEFAULT_KUBELET_KUBECONFIG: &str = "/etc/kubernetes/kubelet.conf";

/// Where the CA that signs the API server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ca {
    /// `certificate-authority-data`, decoded (PEM text).
    Data(Vec<u8>),
    /// `certificate-authority`: a file, as written (relative to the kubeconfig's directory).
    File(String),
    /// Neither: the system's roots.
    System,
}

/// The cluster of a kubeconfig's current context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// `server` as written.
    pub server: String,
    /// Its host (a name or an IP address, without brackets) and port (443 when not given).
    pub host: String,
    pub port: u16,
    /// The name the certificate must carry: `tls-server-name`, else the host.
    pub server_name: String,
    pub ca: Ca,
    /// `insecure-skip-tls-verify: true`.
    pub insecure: bool,
}

/// A parsed YAML or JSON value (the subset a kubeconfig uses).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Map(Vec<(String, Value)>),
    List(Vec<Value>),
    Scalar(String),
}

impl Value {
    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }
    fn list(&self, key: &str) -> &[Value] {
        match self.get(key) {
            Some(Value::List(l)) => l,
            _ => &[],
        }
    }
}

/// The cluster of the current context of a kubeconfig's text.
pub fn parse(text: &str) -> Result<Cluster, String> {
    let doc = if text.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        from_json(&v)
    } else {
        parse_yaml(text)?
    };
    let clusters = doc.list("clusters");
    let named = |list: &[Value], name: &str, inner: &str| -> Option<Value> {
        list.iter()
            .find(|e| e.str("name") == Some(name))
            .and_then(|e| e.get(inner).cloned())
    };
    let cluster = match doc.str("current-context").filter(|c| !c.is_empty()) {
        Some(ctx) => {
            let context = named(doc.list("contexts"), ctx, "context")
                .ok_or_else(|| format!("current-context {ctx:?} is not among its contexts"))?;
            let name = context
                .str("cluster")
                .ok_or_else(|| format!("context {ctx:?} names no cluster"))?
                .to_string();
            named(clusters, &name, "cluster")
                .ok_or_else(|| format!("cluster {name:?} is not among its clusters"))?
        }
        // No current context: a file with one cluster means it.
        None => match clusters {
            [one] => one
                .get("cluster")
                .cloned()
                .ok_or("its one cluster has no `cluster` map")?,
            _ => return Err("no current-context".into()),
        },
    };
    let server = cluster
        .str("server")
        .filter(|s| !s.is_empty())
        .ok_or("the cluster has no server")?
        .to_string();
    let (host, port) = parse_server(&server)?;
    let ca = match (
        cluster
            .str("certificate-authority-data")
            .filter(|s| !s.is_empty()),
        cluster
            .str("certificate-authority")
            .filter(|s| !s.is_empty()),
    ) {
        (Some(data), _) => {
            Ca::Data(base64(data).ok_or("certificate-authority-data is not base64")?)
        }
        (None, Some(file)) => Ca::File(file.to_string()),
        (None, None) => Ca::System,
    };
    let server_name = cluster
        .str("tls-server-name")
        .filter(|s| !s.is_empty())
        .unwrap_or(&host)
        .to_string();
    let insecure = cluster
        .str("insecure-skip-tls-verify")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    Ok(Cluster {
        server,
        host,
        port,
        server_name,
        ca,
        insecure,
    })
}

/// The host and port of an `https://` server URL (port 443 when not given).
pub fn parse_server(url: &str) -> Result<(String, u16), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("server {url:?} is not an https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("server {url:?}: unclosed `[`"))?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_' | '%'))
    {
        return Err(format!("server {url:?} has no valid host"));
    }
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("server {url:?}: {p:?} is not a port"))?,
    };
    Ok((host.to_string(), port))
}

/// Reads a kubeconfig under the host root; `Ok(None)` when it does not exist.
pub fn read(host: &HostPaths, host_path: &str) -> Result<Option<Cluster>, ReadError> {
    let path = host.resolve(host_path);
    match hostfs::read_text_optional(&path, cap::CONFIG)? {
        None => Ok(None),
        Some(text) => parse(&text)
            .map(Some)
            .map_err(|e| ReadError::parse(&path, e)),
    }
}

/// The host path of a `certificate-authority` file named in the kubeconfig at `kubeconfig`
/// (a relative name is relative to the kubeconfig's directory, as in client-go).
pub fn ca_file_path(kubeconfig: &str, file: &str) -> String {
    if file.starts_with('/') {
        return file.to_string();
    }
    let dir = Path::new(kubeconfig).parent().unwrap_or(Path::new("/"));
    dir.join(file).to_string_lossy().into_owned()
}

/// Decodes standard base64 (whitespace ignored, padding optional).
fn base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut padded = false;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padded = true;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padded {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Object(m) => {
            Value::Map(m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
        }
        serde_json::Value::Array(a) => Value::List(a.iter().map(from_json).collect()),
        serde_json::Value::String(s) => Value::Scalar(s.clone()),
        serde_json::Value::Null => Value::Scalar(String::new()),
        other => Value::Scalar(other.to_string()),
    }
}

/// The lines of the first YAML document: (indent, text without comment).
fn yaml_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for raw in text.lines() {
        if raw.starts_with("---") {
            if out.is_empty() {
                continue;
            }
            break;
        }
        let line = match raw.find(" #") {
            Some(i) => &raw[..i],
            None => raw,
        };
        let body = line.trim_start_matches(' ');
        if body.trim().is_empty() || body.starts_with('#') {
            continue;
        }
        out.push((line.len() - body.len(), body.trim_end().to_string()));
    }
    out
}

/// Nesting deeper than this is not a kubeconfig.
const MAX_DEPTH: usize = 32;

fn parse_yaml(text: &str) -> Result<Value, String> {
    let mut lines = yaml_lines(text);
    let mut i = 0;
    let Some(&(indent, _)) = lines.first() else {
        return Ok(Value::Map(Vec::new()));
    };
    block(&mut lines, &mut i, indent, 0)
}

fn scalar(v: &str) -> Value {
    let v = v.trim();
    match v {
        "{}" => Value::Map(Vec::new()),
        "[]" => Value::List(Vec::new()),
        "null" | "~" => Value::Scalar(String::new()),
        _ => {
            let unq = v
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                .unwrap_or(v);
            Value::Scalar(unq.to_string())
        }
    }
}

/// The block (map or list) whose lines start at `*i` with this indent.
fn block(
    lines: &mut [(usize, String)],
    i: &mut usize,
    indent: usize,
    depth: usize,
) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err("nested too deeply".into());
    }
    let is_item = |s: &str| s == "-" || s.starts_with("- ");
    if lines.get(*i).is_some_and(|(_, s)| is_item(s)) {
        let mut items = Vec::new();
        while let Some((n, s)) = lines.get(*i).cloned() {
            if n != indent || !is_item(&s) {
                break;
            }
            let rest = s[1..].trim_start();
            if rest.is_empty() {
                *i += 1;
                match lines.get(*i) {
                    Some(&(m, _)) if m > indent => items.push(block(lines, i, m, depth + 1)?),
                    _ => items.push(Value::Scalar(String::new())),
                }
                continue;
            }
            if key_value(rest).is_none() {
                items.push(scalar(rest));
                *i += 1;
                continue;
            }
            // `- key: value`: the item is a map whose keys stand where `key` stands.
            let inner = indent + (s.len() - rest.len());
            lines[*i] = (inner, rest.to_string());
            items.push(block(lines, i, inner, depth + 1)?);
        }
        return Ok(Value::List(items));
    }
    let mut map = Vec::new();
    while let Some((n, s)) = lines.get(*i).cloned() {
        if n < indent {
            break;
        }
        if n > indent {
            // A line deeper than its map's keys without a key above it: skipped.
            *i += 1;
            continue;
        }
        if is_item(&s) {
            break;
        }
        let Some((k, v)) = key_value(&s) else {
            *i += 1;
            continue;
        };
        *i += 1;
        let value = if v.is_empty() {
            match lines.get(*i) {
                Some((m, _)) if *m > indent => {
                    let m = *m;
                    block(lines, i, m, depth + 1)?
                }
                // A list at its key's indent.
                Some((m, t)) if *m == indent && is_item(t) => block(lines, i, indent, depth + 1)?,
                _ => Value::Scalar(String::new()),
            }
        } else {
            scalar(v)
        };
        map.push((k, value));
    }
    Ok(Value::Map(map))
}

/// `key: value` or `key:` (a key may be quoted; a value may hold colons, as a URL does).
fn key_value(s: &str) -> Option<(String, &str)> {
    let (k, v) = if let Some(k) = s.strip_suffix(':') {
        (k, "")
    } else {
        let at = s.find(": ")?;
        (&s[..at], &s[at + 2..])
    };
    let k = k.trim();
    if k.is_empty() || k.contains(' ') && !(k.starts_with('"') || k.starts_with('\'')) {
        return None;
    }
    Some((k.trim_matches(|c| c == '"' || c == '\'').to_string(), v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubeadm 1.28's `/etc/kubernetes/kubelet.conf` (the CA shortened: "LS0tLS1CRUdJTiBDRVJU"
    /// is base64 of "-----BEGIN CERT").
    const KUBELET_CONF: &str = "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJU
    server: https://10.0.0.10:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: system:node:node-1
  name: system:node:node-1@kubernetes
current-context: system:node:node-1@kubernetes
kind: Config
preferences: {}
users:
- name: system:node:node-1
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
";

    #[test]
    fn kubeadm_kubelet_conf() {
        let c = parse(KUBELET_CONF).unwrap();
        assert_eq!(c.server, "https://10.0.0.10:6443");
        assert_eq!((c.host.as_str(), c.port), ("10.0.0.10", 6443));
        assert_eq!(c.server_name, "10.0.0.10");
        assert_eq!(c.ca, Ca::Data(b"-----BEGIN CERT".to_vec()));
        assert!(!c.insecure);
    }

    #[test]
    fn several_clusters_and_indented_lists() {
        let text = "apiVersion: v1
kind: Config
clusters:
  - name: other
    cluster:
      server: https://other:443
  - name: prod
    cluster:
      server: \"https://api.prod.example:6443/\"
      certificate-authority: pki/ca.crt   # beside the file
      tls-server-name: kubernetes.default.svc
contexts:
  - name: c
    context: {cluster: ignored}
  - name: node
    context:
      cluster: prod
current-context: node
";
        let c = parse(text).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("api.prod.example", 6443));
        assert_eq!(c.server_name, "kubernetes.default.svc");
        assert_eq!(c.ca, Ca::File("pki/ca.crt".into()));
        assert_eq!(
            ca_file_path("/etc/kubernetes/kubelet.conf", "pki/ca.crt"),
            "/etc/kubernetes/pki/ca.crt"
        );
        assert_eq!(ca_file_path("/x/k.conf", "/etc/ca.pem"), "/etc/ca.pem");
    }

    #[test]
    fn json_insecure_and_errors() {
        let json = r#"{"clusters":[{"name":"k","cluster":{"server":"https://[fd00::1]","insecure-skip-tls-verify":true}}],
            "contexts":[{"name":"x","context":{"cluster":"k"}}],"current-context":"x"}"#;
        let c = parse(json).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("fd00::1", 443));
        assert!(c.insecure);
        assert_eq!(c.ca, Ca::System);
        assert!(parse("current-context: nope\ncontexts: []\n").is_err());
        assert!(parse(&KUBELET_CONF.replace("https://10.0.0.10:6443", "http://x:8080")).is_err());
        assert!(parse(&KUBELET_CONF.replace("LS0tLS1CRUdJTiBDRVJU", "LS0t!!")).is_err());
        assert!(parse_server("https://host:99999").is_err());
        assert!(parse_server("https://ho st:1").is_err());
        assert!(parse_server("https://$(reboot):6443").is_err());
        assert_eq!(
            parse_server("https://user@h.example:6443/x"),
            Ok(("h.example".into(), 6443))
        );
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(base64("aGVs\nbG8").as_deref(), Some(&b"hello"[..]));
        assert_eq!(base64("aA=x"), None);
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = parse_server(&s);
        }

        #[test]
        fn yaml_shapes_never_panic(s in "([ -]{0,4}[a-z:{}\\[\\]\"' ]{0,8}\n){0,12}") {
            let _ = parse(&s);
        }

        /// A kubeconfig as kubeadm or `kubectl config view --raw` writes it (YAML, lists at
        /// the key's indent or indented, or JSON), with several clusters and contexts: the
        /// current context's cluster reads back, server, CA, server name and all.
        #[test]
        fn reads_the_cluster_it_was_given(
            (clusters, current) in proptest::collection::vec(cluster(), 1..4)
                .prop_flat_map(|c| { let n = c.len(); (proptest::strategy::Just(c), 0..n) }),
            named_context in proptest::bool::ANY,
            json in proptest::bool::ANY,
            indent in proptest::bool::ANY,
        ) {
            // With one cluster a kubeconfig may name no context at all.
            let named_context = named_context || clusters.len() > 1;
            let text = if json { render_json(&clusters, current, named_context) } else { render_yaml(&clusters, current, named_context, indent) };
            proptest::prop_assert_eq!(parse(&text), Ok(clusters[current].1.clone()), "{}", text);
        }
    }

    use proptest::prelude::*;

    /// A cluster entry: its fields as written (server, CA data, CA file, server name,
    /// insecure) and what they mean.
    type Written = (String, Option<String>, Option<String>, Option<String>, bool);

    fn cluster() -> impl Strategy<Value = (Written, Cluster)> {
        let host = prop_oneof![
            any::<std::net::Ipv4Addr>().prop_map(|a| (a.to_string(), a.to_string())),
            any::<std::net::Ipv6Addr>().prop_map(|a| (format!("[{a}]"), a.to_string())),
            "[a-z][a-z0-9-]{0,10}(\\.[a-z][a-z0-9-]{0,10}){0,3}".prop_map(|h| (h.clone(), h)),
        ];
        let ca = prop_oneof![
            prop::collection::vec(any::<u8>(), 1..64).prop_map(Ca::Data),
            "(/etc/kubernetes/)?pki/[a-z]{1,8}\\.crt".prop_map(Ca::File),
            Just(Ca::System),
        ];
        (
            host,
            prop::option::of(1u16..),
            "|/|/k8s",
            ca,
            prop::option::of("[a-z][a-z.]{0,20}[a-z]"),
            any::<bool>(),
        )
            .prop_map(|((shown, host), port, path, ca, sni, insecure)| {
                let server = match port {
                    Some(p) => format!("https://{shown}:{p}{path}"),
                    None => format!("https://{shown}{path}"),
                };
                let (data, file) = match &ca {
                    Ca::Data(d) => (Some(b64(d)), None),
                    Ca::File(f) => (None, Some(f.clone())),
                    Ca::System => (None, None),
                };
                let c = Cluster {
                    server: server.clone(),
                    port: port.unwrap_or(443),
                    server_name: sni.clone().unwrap_or_else(|| host.clone()),
                    host,
                    ca,
                    insecure,
                };
                ((server, data, file, sni, insecure), c)
            })
    }

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..4 {
                out.push(if i <= chunk.len() {
                    A[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        out
    }

    fn render_yaml(
        clusters: &[(Written, Cluster)],
        current: usize,
        named: bool,
        indent: bool,
    ) -> String {
        let pad = if indent { "  " } else { "" };
        let mut t = String::from("apiVersion: v1\nclusters:\n");
        for (i, ((server, data, file, sni, insecure), _)) in clusters.iter().enumerate() {
            t += &format!("{pad}- cluster:\n");
            if let Some(d) = data {
                t += &format!("{pad}    certificate-authority-data: {d}\n");
            }
            if let Some(f) = file {
                t += &format!("{pad}    certificate-authority: {f}   # beside the file\n");
            }
            if *insecure {
                t += &format!("{pad}    insecure-skip-tls-verify: true\n");
            }
            t += &format!("{pad}    server: \"{server}\"\n");
            if let Some(s) = sni {
                t += &format!("{pad}    tls-server-name: {s}\n");
            }
            t += &format!("{pad}  name: cluster-{i}\n");
        }
        if named {
            t += "contexts:\n";
            for i in (0..clusters.len()).rev() {
                t += &format!("{pad}- context:\n{pad}    cluster: cluster-{i}\n{pad}    user: admin\n{pad}  name: ctx-{i}@cluster\n");
            }
            t += &format!("current-context: ctx-{current}@cluster\n");
        }
        t += "kind: Config\npreferences: {}\nusers:\n- name: admin\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n";
        t
    }

    fn render_json(clusters: &[(Written, Cluster)], current: usize, named: bool) -> String {
        let cs: Vec<_> = clusters
            .iter()
            .enumerate()
            .map(|(i, ((server, data, file, sni, insecure), _))| {
                let mut c =
                    serde_json::json!({"server": server, "insecure-skip-tls-verify": insecure});
                if let Some(d) = data {
                    c["certificate-authority-data"] = d.clone().into();
                }
                if let Some(f) = file {
                    c["certificate-authority"] = f.clone().into();
                }
                if let Some(s) = sni {
                    c["tls-server-name"] = s.clone().into();
                }
                serde_json::json!({"name": format!("cluster-{i}"), "cluster": c})
            })
            .collect();
        let mut v = serde_json::json!({"apiVersion": "v1", "kind": "Config", "clusters": cs});
        if named {
            let ctx: Vec<_> = (0..clusters.len()).map(|i| serde_json::json!({"name": format!("ctx-{i}@cluster"), "context": {"cluster": format!("cluster-{i}"), "user": "admin"}})).collect();
            v["contexts"] = ctx.into();
            v["current-context"] = format!("ctx-{current}@cluster").into();
        }
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }
}
