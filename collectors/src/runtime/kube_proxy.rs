//! kube-proxy's proxy mode and IPVS sync periods: its flags (`--proxy-mode`,
//! `--ipvs-sync-period`, `--ipvs-min-sync-period`) over its configuration file (`--config`,
//! a `KubeProxyConfiguration`: top-level `mode` and the `ipvs:` block's `syncPeriod` and
//! `minSyncPeriod`). The file is read through `/proc/<pid>/root`, since kube-proxy usually
//! runs in a container and names a path inside it.

use std::time::Duration;

use crate::config::flag_value;
use crate::hostfs::{self, cap};

/// kube-proxy's IPVS settings as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub mode: Option<String>,
    pub sync_period: Option<Duration>,
    pub min_sync_period: Option<Duration>,
}

/// Parses a Go duration (`30s`, `1m0s`, `500ms`, `1h`, `0`), quoted or not; `None` when it
/// is not one.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    crate::config::go_duration::parse(s.trim().trim_matches(|c| c == '"' || c == '\''))
}

/// The keys of a `KubeProxyConfiguration` (YAML or JSON) this module needs: top-level `mode`
/// and `ipvs.syncPeriod` / `ipvs.minSyncPeriod`. A line scanner, like the kubelet config
/// reader: enough for the files kubeadm and installers write.
pub fn parse_config(text: &str) -> Settings {
    if text.trim_start().starts_with('{') {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
            return Settings::default();
        };
        let s = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(String::from);
        return Settings {
            mode: s(v.get("mode")).filter(|m| !m.is_empty()),
            sync_period: s(v.pointer("/ipvs/syncPeriod")).and_then(|d| parse_go_duration(&d)),
            min_sync_period: s(v.pointer("/ipvs/minSyncPeriod"))
                .and_then(|d| parse_go_duration(&d)),
        };
    }
    let mut out = Settings::default();
    let mut in_ipvs = false;
    for raw in text.lines() {
        let line = raw.split(" #").next().unwrap_or(raw);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let indented = line.starts_with(' ') || line.starts_with('\t');
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        if !indented {
            in_ipvs = key == "ipvs";
            if key == "mode" && !value.is_empty() {
                out.mode = Some(value.to_string());
            }
            continue;
        }
        if in_ipvs {
            match key {
                "syncPeriod" => out.sync_period = parse_go_duration(value),
                "minSyncPeriod" => out.min_sync_period = parse_go_duration(value),
                _ => {}
            }
        }
    }
    out
}

/// kube-proxy's settings from its arguments, over the config file its `--config` names (read
/// through `proc_root`, `<root>/proc/<pid>/root`, at most [`cap::CONFIG`]). Returns the
/// settings and where they came from (`flags`, or the file's path as kube-proxy names it).
pub fn settings(args: &[String], proc_root: &std::path::Path) -> (Settings, String) {
    let mut from = Vec::new();
    let mut s = Settings::default();
    if let Some(path) = flag_value(args, "--config") {
        let agent = proc_root.join(path.trim_start_matches('/'));
        if let Ok(text) = hostfs::read_text(&agent, cap::CONFIG) {
            s = parse_config(&text);
            from.push(path);
        }
    }
    let mut flags = false;
    if let Some(m) = flag_value(args, "--proxy-mode").filter(|m| !m.is_empty()) {
        s.mode = Some(m);
        flags = true;
    }
    if let Some(d) = flag_value(args, "--ipvs-sync-period").and_then(|d| parse_go_duration(&d)) {
        s.sync_period = Some(d);
        flags = true;
    }
    if let Some(d) = flag_value(args, "--ipvs-min-sync-period").and_then(|d| parse_go_duration(&d))
    {
        s.min_sync_period = Some(d);
        flags = true;
    }
    if flags {
        from.push("flags".to_string());
    }
    (s, from.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("0s"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("\"5s\""), Some(Duration::from_secs(5)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        for bad in ["", "s", "5", "5x", "-1s", "1e400s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    // A kube-proxy ConfigMap's config.conf (kubeadm 1.28), IPVS mode with the old periods.
    const KUBEADM: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
iptables:
  syncPeriod: 30s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 1s   # old default
  scheduler: \"\"
  syncPeriod: 5s
kind: KubeProxyConfiguration
mode: \"ipvs\"
";

    #[test]
    fn config_file_and_flags() {
        let s = parse_config(KUBEADM);
        assert_eq!(s.mode.as_deref(), Some("ipvs"));
        assert_eq!(s.sync_period, Some(Duration::from_secs(5)));
        assert_eq!(s.min_sync_period, Some(Duration::from_secs(1)));
        let j = parse_config(
            r#"{"mode": "ipvs", "ipvs": {"syncPeriod": "30s", "minSyncPeriod": "0s"}}"#,
        );
        assert_eq!(j.sync_period, Some(Duration::from_secs(30)));
        assert_eq!(j.min_sync_period, Some(Duration::ZERO));
        assert_eq!(parse_config("mode: \"\"\n"), Settings::default());

        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("var/lib/kube-proxy")).unwrap();
        std::fs::write(t.path().join("var/lib/kube-proxy/config.conf"), KUBEADM).unwrap();
        let args: Vec<String> = "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf --ipvs-sync-period=10s"
            .split(' ')
            .map(String::from)
            .collect();
        let (s, from) = settings(&args, t.path());
        assert_eq!(s.mode.as_deref(), Some("ipvs"));
        assert_eq!(s.sync_period, Some(Duration::from_secs(10)));
        assert_eq!(s.min_sync_period, Some(Duration::from_secs(1)));
        assert_eq!(from, "/var/lib/kube-proxy/config.conf + flags");
        let args: Vec<String> =
            "kube-proxy --proxy-mode=ipvs --ipvs-sync-period=5s --ipvs-min-sync-period=1s"
                .split(' ')
                .map(String::from)
                .collect();
        let (s, from) = settings(&args, t.path());
        assert_eq!(
            (s.sync_period, from.as_str()),
            (Some(Duration::from_secs(5)), "flags")
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_config(&s);
            let _ = parse_go_duration(&s);
        }

        /// A `KubeProxyConfiguration` (kubeadm's YAML, flow maps, JSON) reads back its `mode`
        /// and IPVS periods, each written as Go's `Duration.String()` prints it.
        #[test]
        fn reads_the_mode_and_periods_it_was_given(
            file in crate::testgen::kube_proxy_file(),
            shape in crate::testgen::kube_proxy_shape(),
        ) {
            let text = file.render(shape);
            let quarters = |q: Option<u64>| q.map(|q| Duration::from_millis(q * 250));
            let want = Settings {
                mode: file.mode.clone(),
                sync_period: quarters(file.sync_period),
                min_sync_period: quarters(file.min_sync_period),
            };
            proptest::prop_assert_eq!(parse_config(&text), want, "{}", text);
        }
    }
}
