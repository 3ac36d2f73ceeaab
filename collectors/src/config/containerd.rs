//! `/etc/containerd/config.toml`: the top-level `root` (persistent data, default
//! `/var/lib/containerd`) and `state` (runtime state, default `/run/containerd`), and the
//! `[grpc]` table's `address` (the API socket, default `/run/containerd/containerd.sock`).
//!
//! A tiny reader, not a TOML parser: it reads `key = "value"` lines before the first table
//! header, which is where containerd (v1, v2 and v3 config versions) keeps `root` and
//! `state`, and the same lines inside `[grpc]`.

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs::{self, cap};

pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
pub const DEFAULT_STATE: &str = "/run/containerd";
pub const CONFIG_PATH: &str = "/etc/containerd/config.toml";
pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";

/// The keys of containerd's config this product uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub root: Option<String>,
    pub state: Option<String>,
    /// `[grpc] address`.
    pub grpc_address: Option<String>,
}

/// Parses the top-level `root` and `state` of a containerd `config.toml`.
pub fn parse(text: &str) -> Result<Config, String> {
    let mut cfg = Config::default();
    // The table the lines belong to: "" before the first header.
    let mut table = String::new();
    for line in text.lines() {
        let line = strip_comment(line).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let value = unquote(value.trim());
        match (table.as_str(), key) {
            ("", "root") => cfg.root = Some(value.ok_or("root is not a string")?),
            ("", "state") => cfg.state = Some(value.ok_or("state is not a string")?),
            ("grpc", "address") => {
                cfg.grpc_address = Some(value.ok_or("grpc.address is not a string")?)
            }
            _ => {}
        }
    }
    Ok(cfg)
}

/// Cuts a `#` comment that is not inside a quoted string.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"') | (None, '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

/// A TOML basic (`"..."`, simple escapes) or literal (`'...'`) string.
fn unquote(v: &str) -> Option<String> {
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return Some(v[1..v.len() - 1].to_string());
    }
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        let inner = &v[1..v.len() - 1];
        return Some(inner.replace("\\\\", "\\").replace("\\\"", "\""));
    }
    None
}

/// Reads `<root>/etc/containerd/config.toml`; `Ok(None)` when it does not exist.
pub fn read(host: &HostPaths, config_path: &str) -> Result<Option<Config>, ReadError> {
    let path = host.resolve(config_path);
    match hostfs::read_text_optional(&path, cap::CONFIG)? {
        None => Ok(None),
        Some(text) => parse(&text)
            .map(Some)
            .map_err(|e| ReadError::parse(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `containerd config default` of containerd 1.7 (head), as shipped on TKE containerd nodes
    // with a data disk.
    const V2_CONFIG: &str = r#"disabled_plugins = []
imports = []
oom_score = 0
plugin_dir = ""
required_plugins = []
root = "/data/containerd" # moved to the data disk
state = "/run/containerd"
temp = ""
version = 2

[cgroup]
  path = ""

[grpc]
  address = "/run/containerd/containerd.sock"
  uid = 0

[plugins."io.containerd.grpc.v1.cri"]
  root = "/not/this/one"
  address = "/not/this/either"
"#;

    #[test]
    fn reads_top_level_keys_only() {
        let c = parse(V2_CONFIG).unwrap();
        assert_eq!(c.root.as_deref(), Some("/data/containerd"));
        assert_eq!(c.state.as_deref(), Some("/run/containerd"));
        assert_eq!(
            c.grpc_address.as_deref(),
            Some("/run/containerd/containerd.sock")
        );
    }

    #[test]
    fn defaults_absent_and_literal_strings() {
        assert_eq!(
            parse("version = 3\n[plugins]\n").unwrap(),
            Config::default()
        );
        let c = parse("root = '/x#y'\n# state = \"/no\"\n").unwrap();
        assert_eq!(c.root.as_deref(), Some("/x#y"));
        assert_eq!(c.state, None);
        assert!(parse("root = 5\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// `config.toml` written by the `toml` crate from typed values (version 2 layout, the
        /// CRI plugin's table after `[grpc]`, paths with spaces and `#`): root, state and the
        /// gRPC address read back.
        #[test]
        fn parses_what_a_toml_writer_writes(
            [root, state, address] in proptest::array::uniform3("/[a-zA-Z0-9._ #-]{1,12}(/[a-zA-Z0-9._ #-]{1,12}){0,3}"),
            image in "[a-z.]{1,12}/pause:3\\.[0-9]{1,2}",
        ) {
            let mut grpc = toml::Table::new();
            grpc.insert("address".into(), address.clone().into());
            grpc.insert("max_recv_message_size".into(), 16_777_216.into());
            let mut cri = toml::Table::new();
            cri.insert("sandbox_image".into(), image.into());
            let mut plugins = toml::Table::new();
            plugins.insert("io.containerd.grpc.v1.cri".into(), cri.into());
            let mut doc = toml::Table::new();
            doc.insert("version".into(), 2.into());
            doc.insert("root".into(), root.clone().into());
            doc.insert("state".into(), state.clone().into());
            doc.insert("grpc".into(), grpc.into());
            doc.insert("plugins".into(), plugins.into());
            let text = toml::to_string(&doc).unwrap_or_default();
            let want = Config { root: Some(root), state: Some(state), grpc_address: Some(address) };
            proptest::prop_assert_eq!(parse(&text), Ok(want), "{}", text);
        }
    }
}
