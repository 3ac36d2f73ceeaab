//! Which container runtimes this node really uses, where their API sockets are, and why the
//! node is taken to use each: the kubelet's `--container-runtime-endpoint`, the running
//! daemons (their flags and configuration files), the operator's `--docker-socket` /
//! `--containerd-socket`, what this agent saw earlier, a daemon's socket left in `/run`
//! with nothing listening on it, and, for a dockerd that does not run, the shims of its
//! containers (live-restore) or its systemd unit enabled on a host booted with systemd.
//! Installed packages, unit files that are not enabled and an empty `/var/lib/docker` are no
//! reason: a node with docker installed but unused has no docker findings.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileTypeExt;

use super::sample::{Daemon, Why};
use crate::config::{containerd, docker, flag_value};
use crate::host::HostPaths;
use crate::node::discover::Locations;
use crate::node::follow::Followed;

/// One runtime daemon the node uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub daemon: Daemon,
    /// Host path of its API socket.
    pub socket: String,
    pub why: BTreeSet<Why>,
    /// Its running process.
    pub pid: Option<u32>,
    /// Host path of its data directory (docker's data root, containerd's root).
    pub data_dir: Option<String>,
    /// dockerd only: the containerd socket it uses.
    pub containerd: Option<String>,
    /// dockerd only: shims of its containers running without it.
    pub moby_shims: u32,
}

/// Signs that docker is used here although no dockerd runs ([`docker_signs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerSigns {
    /// `containerd-shim… -namespace <docker's namespace>` processes running.
    pub moby_shims: u32,
    /// The enabled unit's link (host path), on a host booted with systemd.
    pub unit: Option<String>,
}

/// What [`find`] works from.
pub struct Inputs<'a> {
    pub procs: &'a Followed,
    pub locations: &'a Locations,
    /// `--docker-socket` / `--containerd-socket` (host paths).
    pub docker_socket: Option<&'a str>,
    pub containerd_socket: Option<&'a str>,
    /// The kubelet's runtime endpoint as written (`unix:///run/containerd/containerd.sock`).
    pub kubelet_endpoint: Option<&'a str>,
    /// The docker socket the kubelet's dockershim or cri-dockerd talks to.
    pub kubelet_docker_endpoint: Option<String>,
    /// Runtimes seen in earlier collections: (daemon, socket) -> data directory.
    pub seen: &'a BTreeMap<(Daemon, String), Option<String>>,
    /// Signs of docker when no dockerd runs.
    pub docker_signs: &'a DockerSigns,
}

/// The socket path of an endpoint (`unix:///x.sock` or `/x.sock`); `None` for others.
pub fn endpoint_path(endpoint: &str) -> Option<String> {
    docker::unix_socket(endpoint.trim())
}

/// Whether a host path is a unix socket (not following a final symlink; `/var/run` itself
/// may be one, which [`HostPaths::resolve`] follows).
pub fn is_socket(host: &HostPaths, host_path: &str) -> bool {
    std::fs::symlink_metadata(host.resolve(host_path)).is_ok_and(|m| m.file_type().is_socket())
}

/// A path a daemon was given on its command line, as a host path: a relative one is relative
/// to the daemon's working directory, which `/proc/<pid>/cwd` names (resolved under the
/// host root like any host path).
fn in_cwd(pid: u32, path: String) -> String {
    if path.starts_with('/') {
        path
    } else {
        format!("/proc/{pid}/cwd/{path}")
    }
}

/// cri-dockerd's default socket.
pub const CRI_DOCKERD_SOCKET: &str = "/var/run/cri-dockerd.sock";

struct Found {
    list: Vec<Instance>,
}

impl Found {
    fn get(&mut self, daemon: Daemon, socket: &str) -> &mut Instance {
        let i = match self
            .list
            .iter()
            .position(|i| i.daemon == daemon && i.socket == socket)
        {
            Some(i) => i,
            None => {
                self.list.push(Instance {
                    daemon,
                    socket: socket.to_string(),
                    why: BTreeSet::new(),
                    pid: None,
                    data_dir: None,
                    containerd: None,
                    moby_shims: 0,
                });
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }
}

/// The runtimes of this node. `listening` lists the unix socket paths something listens on
/// (read only when a default socket exists without a daemon); `notes` gets the
/// configuration files that could not be read.
pub fn find(
    host: &HostPaths,
    inp: &Inputs,
    listening: &mut dyn FnMut() -> Option<BTreeSet<String>>,
    notes: &mut Vec<String>,
) -> Vec<Instance> {
    let mut f = Found { list: Vec::new() };
    f.running_dockerd(host, inp, notes);
    f.running_containerd(host, inp, notes);
    f.running_cri_dockerd(inp);
    if let Some(s) = inp.docker_socket {
        f.get(Daemon::Dockerd, s).why.insert(Why::Configured);
    }
    if let Some(s) = inp.containerd_socket {
        f.get(Daemon::Containerd, s).why.insert(Why::Configured);
    }
    f.kubelet_endpoint(inp);
    f.seen_earlier(inp);
    f.sockets_left(host, listening);
    f.docker_signs(host, inp);
    f.default_data_dirs(host, inp);
    f.list.retain(|i| !i.why.is_empty());
    f.list
        .sort_by(|a, b| (a.daemon, &a.socket).cmp(&(b.daemon, &b.socket)));
    f.list
}

impl Found {
    /// Running dockerd daemons: their API sockets, data root, and the containerd they use.
    fn running_dockerd(&mut self, host: &HostPaths, inp: &Inputs, notes: &mut Vec<String>) {
        for p in inp.procs.get("dockerd") {
            let conf_path = flag_value(&p.args, "--config-file")
                .map(|c| in_cwd(p.pid, c))
                .unwrap_or_else(|| inp.locations.daemon_json.clone());
            let conf = match docker::read_daemon_json(host, &conf_path) {
                Ok(c) => c,
                Err(e) => {
                    notes.push(e.to_string());
                    None
                }
            };
            let data = flag_value(&p.args, "--data-root")
                .or_else(|| flag_value(&p.args, "--graph"))
                .or_else(|| conf.as_ref().and_then(|c| c.data_root.clone()))
                .unwrap_or_else(|| docker::DEFAULT_DATA_ROOT.to_string());
            let exec = flag_value(&p.args, "--exec-root")
                .or_else(|| conf.as_ref().and_then(|c| c.exec_root.clone()))
                .unwrap_or_else(|| docker::DEFAULT_EXEC_ROOT.to_string());
            let managed = format!("{}/containerd/containerd.sock", exec.trim_end_matches('/'));
            let uses = flag_value(&p.args, "--containerd")
                .or_else(|| conf.as_ref().and_then(|c| c.containerd.clone()))
                .or_else(|| is_socket(host, &managed).then_some(managed))
                .unwrap_or_else(|| containerd::DEFAULT_SOCKET.to_string());
            for socket in docker::api_sockets(&p.args, conf.as_ref()) {
                let i = self.get(Daemon::Dockerd, &socket);
                i.why.insert(Why::Running);
                i.pid.get_or_insert(p.pid);
                i.data_dir = Some(data.clone());
                i.containerd = Some(uses.clone());
            }
            let c = self.get(Daemon::Containerd, &uses);
            c.why.insert(Why::UsedByDocker);
        }
    }

    /// Running containerd daemons: their socket and root.
    fn running_containerd(&mut self, host: &HostPaths, inp: &Inputs, notes: &mut Vec<String>) {
        for p in inp.procs.get("containerd") {
            let conf_path = flag_value(&p.args, "--config")
                .or_else(|| flag_value(&p.args, "-c"))
                .map(|c| in_cwd(p.pid, c))
                .unwrap_or_else(|| inp.locations.containerd_config.clone());
            let conf = match containerd::read(host, &conf_path) {
                Ok(c) => c.unwrap_or_default(),
                Err(e) => {
                    notes.push(e.to_string());
                    containerd::Config::default()
                }
            };
            let socket = flag_value(&p.args, "--address")
                .or_else(|| flag_value(&p.args, "-a"))
                .or(conf.grpc_address)
                .unwrap_or_else(|| containerd::DEFAULT_SOCKET.to_string());
            let root = flag_value(&p.args, "--root")
                .or(conf.root)
                .unwrap_or_else(|| containerd::DEFAULT_ROOT.to_string());
            let i = self.get(Daemon::Containerd, &socket);
            i.why.insert(Why::Running);
            i.pid.get_or_insert(p.pid);
            i.data_dir = Some(root);
        }
    }

    /// Running cri-dockerd daemons. cri-dockerd listens on its --container-runtime-endpoint
    /// (default unix:///var/run/cri-dockerd.sock) and talks to dockerd at its
    /// --docker-endpoint.
    fn running_cri_dockerd(&mut self, inp: &Inputs) {
        for p in inp.procs.get("cri-dockerd") {
            let socket = flag_value(&p.args, "--container-runtime-endpoint")
                .and_then(|e| endpoint_path(&e))
                .unwrap_or_else(|| CRI_DOCKERD_SOCKET.to_string());
            let i = self.get(Daemon::CriDockerd, &socket);
            i.why.insert(Why::Running);
            i.pid.get_or_insert(p.pid);
        }
    }

    /// The runtime the kubelet's `--container-runtime-endpoint` names.
    fn kubelet_endpoint(&mut self, inp: &Inputs) {
        let Some(path) = inp.kubelet_endpoint.and_then(endpoint_path) else {
            return;
        };
        let name = path.rsplit('/').next().unwrap_or("");
        if let Some(i) = self
            .list
            .iter_mut()
            .find(|i| i.daemon == Daemon::Containerd && i.socket == path)
        {
            i.why.insert(Why::Kubelet);
        } else if name == "containerd.sock" {
            self.get(Daemon::Containerd, &path).why.insert(Why::Kubelet);
        } else if name == "cri-dockerd.sock" || name == "dockershim.sock" {
            let d = inp
                .kubelet_docker_endpoint
                .as_deref()
                .and_then(endpoint_path)
                .unwrap_or_else(|| docker::DEFAULT_SOCKET.to_string());
            self.get(Daemon::Dockerd, &d).why.insert(Why::Kubelet);
            // cri-dockerd is a daemon of its own (dockershim lived inside the kubelet).
            if name == "cri-dockerd.sock" {
                self.get(Daemon::CriDockerd, &path).why.insert(Why::Kubelet);
            }
        }
    }

    /// The runtimes this agent saw in earlier collections, with their data directories.
    fn seen_earlier(&mut self, inp: &Inputs) {
        for ((daemon, socket), data) in inp.seen {
            let i = self.get(*daemon, socket);
            i.why.insert(Why::SeenEarlier);
            if i.data_dir.is_none() {
                i.data_dir = data.clone();
            }
        }
    }

    /// A daemon's socket in /run with nothing listening on it: it ran since boot and died.
    fn sockets_left(
        &mut self,
        host: &HostPaths,
        listening: &mut dyn FnMut() -> Option<BTreeSet<String>>,
    ) {
        let mut listeners: Option<Option<BTreeSet<String>>> = None;
        for (daemon, socket) in [
            (Daemon::Dockerd, docker::DEFAULT_SOCKET),
            (Daemon::Containerd, containerd::DEFAULT_SOCKET),
        ] {
            if self
                .list
                .iter()
                .any(|i| i.daemon == daemon && i.socket == socket)
            {
                continue;
            }
            if !is_socket(host, socket) {
                continue;
            }
            let l = listeners.get_or_insert_with(&mut *listening);
            // Unknown (unreadable table): say nothing rather than risk waking a
            // socket-activated daemon or calling a live one dead.
            if let Some(l) = l {
                let other = if socket.starts_with("/var/run/") {
                    socket.replacen("/var/run/", "/run/", 1)
                } else {
                    socket.replacen("/run/", "/var/run/", 1)
                };
                if !l.contains(socket) && !l.contains(&other) {
                    self.get(daemon, socket).why.insert(Why::SocketLeft);
                }
            }
        }
    }

    /// A dockerd that does not run, known by the shims of its containers or its enabled
    /// unit: expected at the socket another reason names, else at daemon.json's first host
    /// (the default). Nothing is added when that socket exists but no other reason names it:
    /// something listens there (systemd's `docker.socket` starts dockerd on demand; a socket
    /// nobody listens on is already [`Why::SocketLeft`]), and asking would wake it.
    fn docker_signs(&mut self, host: &HostPaths, inp: &Inputs) {
        let signs = inp.docker_signs;
        if signs.moby_shims == 0 && signs.unit.is_none() {
            return;
        }
        if self
            .list
            .iter()
            .any(|i| i.daemon == Daemon::Dockerd && i.pid.is_some())
        {
            return;
        }
        let known = self
            .list
            .iter()
            .find(|i| i.daemon == Daemon::Dockerd)
            .map(|i| i.socket.clone());
        let socket = match known {
            Some(s) => s,
            None => {
                let conf = docker::read_daemon_json(host, &inp.locations.daemon_json)
                    .ok()
                    .flatten();
                let s = docker::api_sockets(&[], conf.as_ref())
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| docker::DEFAULT_SOCKET.to_string());
                if is_socket(host, &s) {
                    return;
                }
                s
            }
        };
        let i = self.get(Daemon::Dockerd, &socket);
        if signs.moby_shims > 0 {
            i.why.insert(Why::MobyShims);
            i.moby_shims = signs.moby_shims;
        }
        if signs.unit.is_some() {
            i.why.insert(Why::SystemdUnit);
        }
    }

    /// Data directories of runtimes known only by their socket: the defaults.
    fn default_data_dirs(&mut self, host: &HostPaths, inp: &Inputs) {
        for i in &mut self.list {
            if i.data_dir.is_none() && i.daemon != Daemon::CriDockerd {
                i.data_dir = Some(match i.daemon {
                    Daemon::Dockerd => docker::read_daemon_json(host, &inp.locations.daemon_json)
                        .ok()
                        .flatten()
                        .and_then(|c| c.data_root)
                        .unwrap_or_else(|| docker::DEFAULT_DATA_ROOT.to_string()),
                    Daemon::Containerd | Daemon::CriDockerd => {
                        containerd::read(host, &inp.locations.containerd_config)
                            .ok()
                            .flatten()
                            .and_then(|c| c.root)
                            .unwrap_or_else(|| containerd::DEFAULT_ROOT.to_string())
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::follow::Rescan;

    fn proc_dir(root: &std::path::Path, pid: u32, comm: &str, args: &str) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 {pid}00 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
        )
        .unwrap();
        std::fs::write(d.join("cmdline"), args.replace(' ', "\0") + "\0").unwrap();
    }

    fn find_all(
        root: &std::path::Path,
        endpoint: Option<&str>,
        seen: &BTreeMap<(Daemon, String), Option<String>>,
        listening: Option<BTreeSet<String>>,
    ) -> Vec<Instance> {
        find_signs(root, endpoint, seen, listening, &DockerSigns::default())
    }

    fn find_signs(
        root: &std::path::Path,
        endpoint: Option<&str>,
        seen: &BTreeMap<(Daemon, String), Option<String>>,
        listening: Option<BTreeSet<String>>,
        signs: &DockerSigns,
    ) -> Vec<Instance> {
        let host = crate::node::Node::new(crate::HostPaths::new(root));
        let mut procs = Followed::new(crate::names::DAEMONS, 4, Rescan::Every(1), "test");
        procs.refresh(&host, &[]);
        let locations = Locations::default();
        let signs = signs.clone();
        let inp = Inputs {
            procs: &procs,
            locations: &locations,
            docker_socket: None,
            containerd_socket: None,
            kubelet_endpoint: endpoint,
            kubelet_docker_endpoint: None,
            seen,
            docker_signs: &signs,
        };
        let mut notes = Vec::new();
        find(host.host(), &inp, &mut || listening.clone(), &mut notes)
    }

    #[test]
    fn a_docker_node_with_system_containerd() {
        let t = tempfile::tempdir().unwrap();
        proc_dir(t.path(), 100, "containerd", "/usr/bin/containerd");
        proc_dir(
            t.path(),
            200,
            "dockerd",
            "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
        );
        std::fs::create_dir_all(t.path().join("etc/docker")).unwrap();
        std::fs::write(
            t.path().join("etc/docker/daemon.json"),
            r#"{"data-root": "/data/docker"}"#,
        )
        .unwrap();
        let got = find_all(
            t.path(),
            Some("unix:///var/run/cri-dockerd.sock"),
            &BTreeMap::new(),
            None,
        );
        assert_eq!(got.len(), 3, "{got:#?}");
        let d = &got[0];
        assert_eq!(
            (d.daemon, d.socket.as_str(), d.pid),
            (Daemon::Dockerd, "/var/run/docker.sock", Some(200))
        );
        assert_eq!(d.why, BTreeSet::from([Why::Running, Why::Kubelet]));
        assert_eq!(d.data_dir.as_deref(), Some("/data/docker"));
        assert_eq!(
            d.containerd.as_deref(),
            Some("/run/containerd/containerd.sock")
        );
        let c = &got[1];
        assert_eq!(
            (c.daemon, c.socket.as_str(), c.pid),
            (
                Daemon::Containerd,
                "/run/containerd/containerd.sock",
                Some(100)
            )
        );
        assert_eq!(c.why, BTreeSet::from([Why::Running, Why::UsedByDocker]));
        assert_eq!(c.data_dir.as_deref(), Some("/var/lib/containerd"));
        // The kubelet's endpoint is cri-dockerd: a daemon of its own, not running here.
        let s = &got[2];
        assert_eq!(
            (s.daemon, s.socket.as_str(), s.pid, s.data_dir.as_deref()),
            (Daemon::CriDockerd, "/var/run/cri-dockerd.sock", None, None)
        );
        assert_eq!(s.why, BTreeSet::from([Why::Kubelet]));
    }

    #[test]
    fn containerd_only_nodes_have_no_docker() {
        let t = tempfile::tempdir().unwrap();
        proc_dir(
            t.path(),
            100,
            "containerd",
            "/usr/bin/containerd --config /etc/c.toml",
        );
        std::fs::create_dir_all(t.path().join("etc")).unwrap();
        std::fs::write(
            t.path().join("etc/c.toml"),
            "root = \"/data/containerd\"\n[grpc]\n  address = \"/run/k8s/containerd.sock\"\n",
        )
        .unwrap();
        let got = find_all(
            t.path(),
            Some("unix:///run/k8s/containerd.sock"),
            &BTreeMap::new(),
            None,
        );
        assert_eq!(got.len(), 1, "{got:#?}");
        assert_eq!(got[0].socket, "/run/k8s/containerd.sock");
        assert_eq!(got[0].data_dir.as_deref(), Some("/data/containerd"));
        assert_eq!(got[0].why, BTreeSet::from([Why::Kubelet, Why::Running]));
        // Nothing runs and nothing names a runtime: nothing to judge.
        let empty = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(empty.path().join("proc")).unwrap();
        assert!(find_all(empty.path(), None, &BTreeMap::new(), None).is_empty());
        // The kubelet names containerd that does not run: expected all the same.
        let got = find_all(
            empty.path(),
            Some("unix:///run/containerd/containerd.sock"),
            &BTreeMap::new(),
            None,
        );
        assert_eq!(got[0].why, BTreeSet::from([Why::Kubelet]));
        assert_eq!(got[0].pid, None);
    }

    #[test]
    fn remembered_and_left_behind_sockets() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::create_dir_all(t.path().join("var/run")).unwrap();
        let sock = t.path().join("var/run/docker.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // Something listens (systemd's docker.socket, say): not a reason.
        let listening = BTreeSet::from(["/run/docker.sock".to_string()]);
        assert!(find_all(t.path(), None, &BTreeMap::new(), Some(listening)).is_empty());
        // The table could not be read: not a reason either.
        assert!(find_all(t.path(), None, &BTreeMap::new(), None).is_empty());
        // Nobody listens: docker ran and died.
        let got = find_all(t.path(), None, &BTreeMap::new(), Some(BTreeSet::new()));
        assert_eq!(got[0].why, BTreeSet::from([Why::SocketLeft]));
        let seen = BTreeMap::from([(
            (Daemon::Containerd, "/tmp/c.sock".to_string()),
            Some("/tmp/croot".to_string()),
        )]);
        let got = find_all(t.path(), None, &seen, None);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].why, BTreeSet::from([Why::SeenEarlier]));
        assert_eq!(got[0].data_dir.as_deref(), Some("/tmp/croot"));
        assert_eq!(
            endpoint_path("unix:///run/x.sock").as_deref(),
            Some("/run/x.sock")
        );
        assert_eq!(endpoint_path("npipe:////./pipe/x"), None);
    }

    #[test]
    fn a_stopped_dockerd_known_by_its_shims_or_its_enabled_unit() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::create_dir_all(t.path().join("var/lib/docker")).unwrap();
        let none = DockerSigns::default();
        // An empty /var/lib/docker is no sign.
        assert!(find_signs(t.path(), None, &BTreeMap::new(), None, &none).is_empty());
        let shims = DockerSigns {
            moby_shims: 2,
            unit: None,
        };
        let got = find_signs(t.path(), None, &BTreeMap::new(), None, &shims);
        assert_eq!(got.len(), 1, "{got:#?}");
        assert_eq!(
            (got[0].daemon, got[0].socket.as_str(), got[0].moby_shims),
            (Daemon::Dockerd, docker::DEFAULT_SOCKET, 2)
        );
        assert_eq!(got[0].why, BTreeSet::from([Why::MobyShims]));
        // daemon.json's host is where it is expected.
        std::fs::create_dir_all(t.path().join("etc/docker")).unwrap();
        std::fs::write(
            t.path().join("etc/docker/daemon.json"),
            r#"{"hosts": ["unix:///run/d/docker.sock"], "data-root": "/data/docker"}"#,
        )
        .unwrap();
        let unit = DockerSigns {
            moby_shims: 0,
            unit: Some("/etc/systemd/system/multi-user.target.wants/docker.service".into()),
        };
        let got = find_signs(t.path(), None, &BTreeMap::new(), None, &unit);
        assert_eq!(got[0].socket, "/run/d/docker.sock");
        assert_eq!(got[0].why, BTreeSet::from([Why::SystemdUnit]));
        assert_eq!(got[0].data_dir.as_deref(), Some("/data/docker"));
        // The kubelet names cri-dockerd: the signs join that reason, at that socket.
        let got = find_signs(
            t.path(),
            Some("unix:///var/run/cri-dockerd.sock"),
            &BTreeMap::new(),
            None,
            &shims,
        );
        let d = got.iter().find(|i| i.daemon == Daemon::Dockerd).unwrap();
        assert_eq!(d.socket, docker::DEFAULT_SOCKET);
        assert_eq!(d.why, BTreeSet::from([Why::Kubelet, Why::MobyShims]));
        // Its socket exists and something listens (socket activation): not asked, not added.
        std::fs::create_dir_all(t.path().join("run/d")).unwrap();
        let _l =
            std::os::unix::net::UnixListener::bind(t.path().join("run/d/docker.sock")).unwrap();
        assert!(find_signs(t.path(), None, &BTreeMap::new(), None, &unit).is_empty());
    }
}
