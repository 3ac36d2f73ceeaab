//! The kubelet as the collectors see it: its process, followed between runs ([`Followed`]:
//! confirmed with one `stat` per run, looked up only while it is not known, at most every
//! `rescan_every` runs), its command line, and its configuration file (`--config`, else the
//! configured default), parsed by [`crate::config::kubelet`]. Flags win over the file, as in
//! the kubelet; the callers apply that through the `config::kubelet` functions that take both.

use std::path::PathBuf;

use crate::config::{self, kubelet};
use crate::node::follow::{Followed, Rescan};
use crate::node::Node;

/// What one lookup found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeletView {
    /// The pid of the running kubelet, when found.
    pub pid: Option<u32>,
    /// Its command line (empty when it does not run).
    pub args: Vec<String>,
    /// The host path of the configuration file consulted, when one was read.
    pub config_path: Option<String>,
    pub config: Option<kubelet::Config>,
    /// Why the configuration file could not be read, when it exists but was refused or is
    /// not understood (a missing file is not an error: flags and defaults apply).
    pub config_error: Option<String>,
}

/// Follows the kubelet among the host's processes and reads its settings.
#[derive(Debug)]
pub struct KubeletFinder {
    finder: Followed,
    default_config: PathBuf,
}

impl KubeletFinder {
    /// `caller` names the call site for the shared process table.
    pub fn new(default_config: PathBuf, rescan_every: u32, caller: &'static str) -> Self {
        KubeletFinder {
            finder: Followed::new(&["kubelet"], 1, Rescan::WhileMissing(rescan_every), caller),
            default_config,
        }
    }

    /// The followed processes (the kubelet's, by name).
    pub fn followed(&self) -> &Followed {
        &self.finder
    }

    /// Looks the kubelet up; `read_config` false skips its configuration file (the caller's
    /// answer is already in the flags).
    pub fn lookup_with(
        &mut self,
        node: &Node,
        read_config: impl FnOnce(&[String]) -> bool,
    ) -> KubeletView {
        self.finder.refresh(node, &[]);
        let (pid, args) = match self.finder.first("kubelet") {
            Some(p) => (Some(p.pid), p.args.clone()),
            None => (None, Vec::new()),
        };
        let mut out = KubeletView {
            pid,
            args,
            ..KubeletView::default()
        };
        if !read_config(&out.args) {
            return out;
        }
        let path = config::flag_value(&out.args, "--config")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.default_config.to_string_lossy().into_owned());
        match kubelet::read_config(node.host(), &path) {
            Ok(Some(c)) => {
                out.config = Some(c);
                out.config_path = Some(path);
            }
            Ok(None) => {}
            Err(e) => out.config_error = Some(e.to_string()),
        }
        out
    }

    /// Looks the kubelet up and reads its configuration file.
    pub fn lookup(&mut self, node: &Node) -> KubeletView {
        self.lookup_with(node, |_| true)
    }
}
