//! Where the container runtimes and the kubelet keep their data on this host, and how they
//! are configured: the running `kubelet`, `dockerd` and `containerd` (their flags, from the
//! shared process table), their configuration files, and the defaults. Used by the
//! `disk` collector (what fills these directories) and the `kernel` collector (whether a hung
//! task or a failing filesystem backs one of them).

use std::path::PathBuf;

use super::Node;
use crate::config::{containerd, docker, flag_value, kubelet};
use crate::host::HostPaths;

/// Where the runtimes' and the kubelet's configuration files are (host paths), unless the
/// running daemons name others on their command lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Locations {
    /// Docker's daemon config, unless dockerd runs with `--config-file`.
    pub daemon_json: String,
    /// containerd's config, unless containerd runs with `--config`.
    pub containerd_config: String,
    /// The kubelet config file; `None`: `--config` of the running kubelet, else
    /// `/var/lib/kubelet/config.yaml`.
    pub kubelet_config: Option<String>,
}

impl Default for Locations {
    fn default() -> Self {
        Locations {
            daemon_json: docker::DAEMON_JSON.to_string(),
            containerd_config: containerd::CONFIG_PATH.to_string(),
            kubelet_config: None,
        }
    }
}

/// What a directory is for on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    DockerData,
    DockerExec,
    ContainerdRoot,
    ContainerdState,
    Kubelet,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::DockerData => "docker_data",
            Role::DockerExec => "docker_exec",
            Role::ContainerdRoot => "containerd_root",
            Role::ContainerdState => "containerd_state",
            Role::Kubelet => "kubelet",
        }
    }

    /// The kubelet eviction signal family judging a filesystem serving this role.
    pub fn signal(self) -> Option<&'static str> {
        match self {
            Role::Kubelet => Some("nodefs"),
            Role::DockerData | Role::ContainerdRoot => Some("imagefs"),
            Role::DockerExec | Role::ContainerdState => None,
        }
    }

    /// The directory holds container images (the kubelet's imagefs).
    pub fn is_image(self) -> bool {
        matches!(self, Role::DockerData | Role::ContainerdRoot)
    }
}

/// Which of the node's daemons run (by `comm`, from the shared process table). When `/proc`
/// cannot be listed, nothing is known and advice says nothing about them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Daemons {
    /// `<root>/proc` was listed: the flags below are answers, not guesses.
    pub known: bool,
    pub kubelet: bool,
    pub dockerd: bool,
    pub containerd: bool,
}

impl Daemons {
    /// All three running (tests; a node as most findings assume it).
    pub fn all_running() -> Daemons {
        Daemons {
            known: true,
            kubelet: true,
            dockerd: true,
            containerd: true,
        }
    }

    /// The kubelet is known not to run.
    pub fn kubelet_stopped(&self) -> bool {
        self.known && !self.kubelet
    }

    /// dockerd is known not to run.
    pub fn dockerd_stopped(&self) -> bool {
        self.known && !self.dockerd
    }

    /// containerd is known not to run.
    pub fn containerd_stopped(&self) -> bool {
        self.known && !self.containerd
    }
}

/// Where docker's socket is unless dockerd's flags say otherwise (`/var/run` is a link to
/// `/run` on current distributions; both are looked at).
pub const DOCKER_SOCKETS: &[&str] = &["/run/docker.sock", "/var/run/docker.sock"];

/// Subdirectories dockerd creates in its data root when it first starts: a data root holding
/// one of them is docker's; an empty one (a leftover, a mount point made by provisioning) is
/// not.
pub const DOCKER_LAYOUT: &[&str] = &["containers", "image"];

/// Finds the first running process whose `comm` is `name` and returns its pid and arguments,
/// from the shared process table ([`Node::processes`]; `caller` names the call
/// site). `None` when no such process runs (or `/proc` is unreadable).
pub fn find_process(node: &Node, caller: &'static str, name: &str) -> Option<(u32, Vec<String>)> {
    find_processes(node, caller, &[name]).ok()?.remove(name)
}

/// The first running process of each `comm` in `names` (pid and arguments), from the shared
/// process table: no file is read for the processes of other names, and each one returned is
/// confirmed by one read of its `stat` (its arguments are remembered per pid and start time).
/// A process whose arguments cannot be read (it exited meanwhile) is skipped. An error when
/// `<root>/proc` cannot be listed.
pub fn find_processes(
    node: &Node,
    caller: &'static str,
    names: &[&str],
) -> Result<std::collections::HashMap<String, (u32, Vec<String>)>, crate::ReadError> {
    let procs = node.processes();
    let mut out = std::collections::HashMap::new();
    for p in procs.named(caller, names)? {
        if out.contains_key(&*p.comm) {
            continue;
        }
        if let Some(args) = procs.args(&p) {
            out.insert(p.comm.to_string(), (p.pid, args.to_vec()));
        }
    }
    Ok(out)
}

/// Whether docker is on this node: dockerd runs, its socket exists (socket-activated docker
/// starts on the first request), or its data root holds docker's own layout
/// ([`DOCKER_LAYOUT`]). An empty `/var/lib/docker` is not docker.
pub fn docker_present(host: &HostPaths, dockerd_running: bool, data_root: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    if dockerd_running {
        return true;
    }
    let socket = DOCKER_SOCKETS.iter().any(|p| {
        std::fs::symlink_metadata(host.resolve(p)).is_ok_and(|m| m.file_type().is_socket())
    });
    socket
        || DOCKER_LAYOUT
            .iter()
            .any(|d| host.resolve(data_root).join(d).is_dir())
}

/// What [`discover`] found about the container runtimes and the kubelet.
pub struct Discovery {
    /// Directories that exist: role, host-side path (symlinks resolved), agent-side path.
    pub dirs: Vec<(Role, String, PathBuf)>,
    /// The kubelet's effective disk settings and its config path, when a kubelet is present.
    pub kubelet: Option<(kubelet::Settings, String)>,
    /// Docker's daemon config (`None` when the file does not exist), its path, and the data
    /// root, when docker is present and its config file is absent or readable (a config that
    /// exists but was refused or is garbage says nothing about log limits; `notes` says why).
    pub docker: Option<(Option<docker::DaemonConfig>, String, String)>,
    /// Why some configuration could not be read.
    pub notes: Vec<String>,
    /// Which daemons run.
    pub daemons: Daemons,
    /// Docker is on this node ([`docker_present`]); without it, docker's directories are not
    /// listed in `dirs` and `docker` is `None`.
    pub docker_present: bool,
}

/// Finds the container runtimes' and the kubelet's directories on the host: from the running
/// processes' flags (the shared process table), their configuration files, and the
/// defaults. Used by the `disk` collector and by the `kernel` collector (which asks whether a
/// failing filesystem backs one of these directories).
///
/// The daemons come from the shared process table ([`crate::proc::table`]; `caller` names the
/// call site): a cycle on a node whose processes did not change reads one `stat` per running
/// daemon (its confirmation), nothing per other process.
pub fn discover(node: &Node, config: &Locations, caller: &'static str) -> Discovery {
    let host = node.host();
    let mut notes = Vec::new();
    let found = find_processes(node, caller, &["kubelet", "dockerd", "containerd"]);
    let known = found.is_ok();
    let procs = found.unwrap_or_default();
    let daemons = Daemons {
        known,
        kubelet: procs.contains_key("kubelet"),
        dockerd: procs.contains_key("dockerd"),
        containerd: procs.contains_key("containerd"),
    };
    let none: Vec<String> = Vec::new();
    let args = |name: &str| procs.get(name).map_or(&none, |(_, a)| a);
    let k_args = args("kubelet");
    let d_args = args("dockerd");
    let c_args = args("containerd");

    // docker
    let daemon_json =
        flag_value(d_args, "--config-file").unwrap_or_else(|| config.daemon_json.clone());
    let mut daemon_readable = true;
    let daemon = match docker::read_daemon_json(host, &daemon_json) {
        Ok(d) => d,
        Err(e) => {
            notes.push(e.to_string());
            daemon_readable = false;
            None
        }
    };
    let d = daemon.clone().unwrap_or_default();
    let data_root = flag_value(d_args, "--data-root")
        .or_else(|| flag_value(d_args, "--graph"))
        .or(d.data_root.clone())
        .unwrap_or_else(|| docker::DEFAULT_DATA_ROOT.to_string());
    let exec_root = flag_value(d_args, "--exec-root")
        .or(d.exec_root.clone())
        .unwrap_or_else(|| docker::DEFAULT_EXEC_ROOT.to_string());

    // containerd
    let c_conf_path = flag_value(c_args, "--config")
        .or_else(|| flag_value(c_args, "-c"))
        .unwrap_or_else(|| config.containerd_config.clone());
    let c_conf = match containerd::read(host, &c_conf_path) {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            notes.push(e.to_string());
            containerd::Config::default()
        }
    };
    let c_root = flag_value(c_args, "--root")
        .or(c_conf.root)
        .unwrap_or_else(|| containerd::DEFAULT_ROOT.to_string());
    let c_state = flag_value(c_args, "--state")
        .or(c_conf.state)
        .unwrap_or_else(|| containerd::DEFAULT_STATE.to_string());

    // kubelet
    let k_root =
        flag_value(k_args, "--root-dir").unwrap_or_else(|| kubelet::DEFAULT_ROOT_DIR.to_string());
    let k_conf_path = config
        .kubelet_config
        .clone()
        .or_else(|| flag_value(k_args, "--config"))
        .unwrap_or_else(|| kubelet::DEFAULT_CONFIG.to_string());
    let k_conf = match kubelet::read_config(host, &k_conf_path) {
        Ok(c) => c,
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    let settings = kubelet::effective(k_args, k_conf.as_ref(), &k_conf_path);
    for e in &settings.errors {
        notes.push(format!("kubelet setting {e}"));
    }

    let docker_present = docker_present(host, daemons.dockerd, &data_root);
    let mut dirs = Vec::new();
    for (role, p) in [
        (Role::DockerData, data_root.clone()),
        (Role::DockerExec, exec_root),
        (Role::ContainerdRoot, c_root),
        (Role::ContainerdState, c_state),
        (Role::Kubelet, k_root),
    ] {
        if matches!(role, Role::DockerData | Role::DockerExec) && !docker_present {
            continue;
        }
        let agent = host.resolve(&p);
        if agent.is_dir() {
            let host_side = host
                .host_side(&agent)
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or(p);
            dirs.push((role, host_side, agent));
        }
    }
    let has_kubelet =
        !k_args.is_empty() || k_conf.is_some() || dirs.iter().any(|d| d.0 == Role::Kubelet);
    let docker_dir = dirs
        .iter()
        .find(|d| d.0 == Role::DockerData)
        .map(|d| d.1.clone());
    Discovery {
        kubelet: has_kubelet.then_some((settings, k_conf_path)),
        docker: docker_dir
            .filter(|_| daemon_readable)
            .map(|dr| (daemon, daemon_json, dr)),
        dirs,
        notes,
        daemons,
        docker_present,
    }
}
