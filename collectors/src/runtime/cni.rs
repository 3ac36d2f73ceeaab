//! The CNI configuration directory (`/etc/cni/net.d`): whether the runtime has a network
//! configuration to load. containerd and the kubelet's dockershim load the first file in name
//! order with the extension `.conf`, `.conflist` or `.json` that parses; with none, the
//! runtime reports `NetworkReady=false` ("cni plugin not initialized") and the node stays
//! NotReady.

use std::path::Path;

use super::sample::CniDir;
use crate::hostfs::{self, cap};

/// At most this many directory entries are looked at.
const MAX_ENTRIES: usize = 1024;

/// Whether a configuration file's text is one a runtime can load: JSON naming a plugin
/// (`type`) or a list of plugins (`plugins`), with a `cniVersion`-style object shape.
pub fn is_valid(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    let Some(o) = v.as_object() else {
        return false;
    };
    match o.get("plugins") {
        Some(serde_json::Value::Array(p)) => {
            !p.is_empty()
                && p.iter()
                    .all(|p| p.get("type").is_some_and(|t| t.is_string()))
        }
        Some(_) => false,
        None => o.get("type").is_some_and(|t| t.is_string()),
    }
}

/// Judges the directory at `dir` (agent-side), naming files by their host path under
/// `host_dir`.
pub fn check(dir: &Path, host_dir: &str) -> CniDir {
    let entries = match hostfs::dir_entries(dir, MAX_ENTRIES) {
        Ok(e) => e,
        Err(_) => return CniDir::Missing,
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| {
            [".conf", ".conflist", ".json"]
                .iter()
                .any(|x| n.ends_with(x))
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return CniDir::Empty;
    }
    let host_dir = host_dir.trim_end_matches('/');
    let mut invalid = Vec::new();
    for n in names {
        let ok = hostfs::read_text(&dir.join(&n), cap::CONFIG).is_ok_and(|t| is_valid(&t));
        let host_path = format!("{host_dir}/{n}");
        if ok {
            return CniDir::Valid { file: host_path };
        }
        invalid.push(host_path);
    }
    CniDir::Invalid { files: invalid }
}

#[cfg(test)]
mod tests {
    use super::*;

    // flannel's 10-flannel.conflist as its DaemonSet writes it.
    const FLANNEL: &str = r#"{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    { "type": "flannel", "delegate": { "hairpinMode": true, "isDefaultGateway": true } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}"#;

    #[test]
    fn config_files() {
        assert!(is_valid(FLANNEL));
        assert!(is_valid(
            r#"{"cniVersion":"0.4.0","name":"tke-bridge","type":"bridge"}"#
        ));
        assert!(!is_valid(r#"{"plugins": []}"#));
        assert!(!is_valid(r#"{"plugins": [{"name": "x"}]}"#));
        assert!(!is_valid("{"));
        assert!(!is_valid("[1]"));

        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("net.d");
        assert_eq!(check(&d, "/etc/cni/net.d"), CniDir::Missing);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("README"), "not a config").unwrap();
        assert_eq!(check(&d, "/etc/cni/net.d"), CniDir::Empty);
        std::fs::write(d.join("05-broken.conf"), "{").unwrap();
        assert_eq!(
            check(&d, "/etc/cni/net.d/"),
            CniDir::Invalid {
                files: vec!["/etc/cni/net.d/05-broken.conf".into()]
            }
        );
        std::fs::write(d.join("10-flannel.conflist"), FLANNEL).unwrap();
        assert_eq!(
            check(&d, "/etc/cni/net.d"),
            CniDir::Valid {
                file: "/etc/cni/net.d/10-flannel.conflist".into()
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = is_valid(&s);
        }

        /// A configuration as a CNI plugin's installer writes it, a single plugin (`.conf`)
        /// or a list (`.conflist`), is valid; the same without a plugin's `type`, or with an
        /// empty list, is not.
        #[test]
        fn the_configs_installers_write_are_valid(
            name in "[a-z][a-z0-9-]{0,15}",
            version in "0\\.[1-4]\\.[0-9]|1\\.[01]\\.0",
            types in proptest::collection::vec("bridge|flannel|calico|portmap|bandwidth|tuning|cilium-cni|[a-z][a-z0-9-]{0,12}", 1..5),
            drop in proptest::option::of(0usize..5),
            list in proptest::bool::ANY,
        ) {
            let plugin = |t: &str| serde_json::json!({"type": t, "capabilities": {"portMappings": true}, "ipam": {"type": "host-local"}});
            let mut plugins: Vec<_> = types.iter().map(|t| plugin(t)).collect();
            let broken = drop.map(|d| d % plugins.len());
            if let Some(d) = broken {
                plugins[d].as_object_mut().map(|o| o.remove("type"));
            }
            let text = if list {
                serde_json::json!({"name": name, "cniVersion": version, "plugins": plugins})
            } else {
                let mut one = plugins.swap_remove(broken.unwrap_or(0));
                one["name"] = name.into();
                one["cniVersion"] = version.into();
                one
            };
            proptest::prop_assert_eq!(is_valid(&serde_json::to_string_pretty(&text).unwrap_or_default()), broken.is_none(), "{}", text);
            if list {
                let empty = serde_json::json!({"name": "x", "cniVersion": "1.0.0", "plugins": []});
                proptest::prop_assert!(!is_valid(&empty.to_string()));
            }
        }
    }
}
