//! Finding the node's daemons (kubelet, the container runtimes, kube-proxy, the time daemons)
//! without a pass over every process: what the process table ([`super::table`]) tries before it lists
//! `/proc` for a caller that asks for processes by name ([`super::table::Processes::named`]).
//!
//! Reading one small file of each of 2,000 processes costs 11–18 ms of CPU (mostly the
//! kernel's path walk in procfs), more than a `check` of a healthy node may spend in all
//! (issue 19). A daemon is cheaper to find where it says it is:
//!
//! 1. **Its systemd unit's cgroup** (`system.slice/<unit>/cgroup.procs` in the unified
//!    hierarchy, the v1 `name=systemd` one, or the hybrid `unified` one): the pids there whose
//!    `stat` names the daemon are it. A kubeadm, EKS, AKS, GKE or ACK node runs the kubelet
//!    and containerd this way.
//! 2. **No sign of its own**: a daemon that runs listens on its unix socket in the host's
//!    network namespace (containerd and dockerd on their API sockets, cri-dockerd on its CRI
//!    socket, the kubelet on its device-plugin and pod-resources sockets), so none of them in
//!    `/proc/1/net/unix` says it is not running (matched by the sockets' file names, whatever
//!    directory a configuration moved them to). kube-proxy listens on TCP only, and
//!    `/proc/net/tcp` is no cheap read (the kernel walks its whole connection hash for it,
//!    ~7 ms on this VM with no socket at all): it runs either as a unit or as a pod, whose
//!    log directory under `/var/log/pods` (`kube-system_kube-proxy-…_<uid>`) is its sign —
//!    and whose cgroup (found by the UID, in the kubelet's cgroupfs or systemd layout) holds
//!    its process. The time daemons (asked for by `clock` when the clock is not synchronised)
//!    show themselves by their sockets too: chronyd binds its command socket
//!    (`chronyd.sock`, a datagram socket) and UDP port 323 (123 as a server), the reference
//!    ntpd and NTPsec UDP port 123, OpenNTPD its control socket `ntpd.sock`; read in
//!    `/proc/1/net/udp` and `udp6` (no hash walk worth the name: ~0.1 ms each here).
//!    systemd-timesyncd runs only as its unit: with systemd's `system.slice` in view, an
//!    empty unit says it is not running. phc2sys needs a PTP hardware clock or a PPS source:
//!    none under `/sys/class/ptp` and `/sys/class/pps` says it is not running.
//!
//! A daemon found in neither way (a listener without a unit: started by hand, in a container,
//! by another init) leaves the answer to the pass over `/proc`, as before. What this cannot
//! see: a daemon that runs without any of its listeners (starting, hung before listening,
//! every port and socket renamed), outside a unit — it is taken for not running.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use super::located::Located;
use super::shared::SharedReads;
use crate::host::HostPaths;
use crate::proc::{net_udp, net_unix};

/// Where one daemon shows itself.
struct Daemon {
    comm: &'static str,
    /// systemd units it runs as.
    units: &'static [&'static str],
    /// File names (`/` and what follows) of the unix sockets it listens on.
    sockets: &'static [&'static str],
    /// What a pod running it has in its log directory's name (`<namespace>_<pod>_<uid>`).
    pod: Option<&'static str>,
    /// File names of unix sockets it binds, listening or not (chronyd's command socket is a
    /// datagram socket).
    bound: &'static [&'static str],
    /// Local UDP ports it binds in the host's network namespace (`/proc/1/net/udp`, `udp6`).
    udp_ports: &'static [u16],
    /// sysfs class directories of the hardware it needs: an entry in one is its sign.
    classes: &'static [&'static str],
    /// It runs only as a systemd unit: its sign is systemd as pid 1 with no `system.slice`
    /// this host root shows (its unit cannot be looked at).
    systemd_only: bool,
}

/// A daemon with no sign of its own but its name (the fields each entry fills are its own).
const NO_SIGN: Daemon = Daemon {
    comm: "",
    units: &[],
    sockets: &[],
    pod: None,
    bound: &[],
    udp_ports: &[],
    classes: &[],
    systemd_only: false,
};

const DAEMONS: &[Daemon] = &[
    Daemon {
        comm: "kubelet",
        units: &["kubelet.service"],
        sockets: &[
            "/device-plugins/kubelet.sock",
            "/pod-resources/kubelet.sock",
        ],
        ..NO_SIGN
    },
    Daemon {
        comm: "containerd",
        units: &["containerd.service"],
        sockets: &["/containerd.sock"],
        ..NO_SIGN
    },
    Daemon {
        comm: "dockerd",
        units: &["docker.service"],
        sockets: &["/docker.sock"],
        ..NO_SIGN
    },
    Daemon {
        comm: "cri-dockerd",
        units: &["cri-docker.service"],
        sockets: &["/cri-dockerd.sock"],
        ..NO_SIGN
    },
    Daemon {
        // CRI-O: its unit, and its API socket (`/var/run/crio/crio.sock`).
        comm: "crio",
        units: &["crio.service"],
        sockets: &["/crio.sock"],
        ..NO_SIGN
    },
    Daemon {
        comm: "kube-proxy",
        units: &["kube-proxy.service"],
        sockets: &[],
        pod: Some("_kube-proxy"),
        ..NO_SIGN
    },
    // The time daemons (the clock collector asks for them when the clock is not
    // synchronised). chronyd binds its command socket (`/run/chrony/chronyd.sock`, datagram)
    // and UDP port 323 on the loopback addresses unless told not to, 123 as a server.
    Daemon {
        comm: "chronyd",
        units: &["chrony.service", "chronyd.service"],
        bound: &["/chronyd.sock"],
        udp_ports: &[323, 123],
        ..NO_SIGN
    },
    // ntpd: the reference implementation and NTPsec bind UDP port 123 on every address;
    // OpenNTPD listens on its control socket (`/var/run/ntpd.sock`, for `ntpctl`).
    Daemon {
        comm: "ntpd",
        units: &[
            "ntp.service",
            "ntpd.service",
            "ntpsec.service",
            "openntpd.service",
        ],
        sockets: &["/ntpd.sock"],
        udp_ports: &[123],
        ..NO_SIGN
    },
    // systemd-timesyncd (`comm` cut to 15 bytes) is systemd's own and runs as its unit only.
    Daemon {
        comm: "systemd-timesyn",
        units: &["systemd-timesyncd.service"],
        systemd_only: true,
        ..NO_SIGN
    },
    // phc2sys sets the system clock from a PTP hardware clock or a PPS source: without one
    // on the node it has nothing to run with.
    Daemon {
        comm: "phc2sys",
        units: &["phc2sys.service", "timemaster.service"],
        classes: &["/sys/class/ptp", "/sys/class/pps"],
        ..NO_SIGN
    },
];

/// At most this many pids of a unit's cgroup are confirmed (a unit that also holds its
/// children, such as an old docker.service with shims, lists the daemon first).
const MAX_UNIT_PIDS: usize = 64;

/// The unix sockets bound in the host's network namespace (pid 1's) and the pod log
/// directories, read once; the UDP ports, the hardware classes and pid 1's name are read the
/// first time a daemon needs them.
#[derive(Debug, Default)]
struct Signs {
    sockets: std::sync::Arc<Vec<net_unix::Bound>>,
    pods: Vec<String>,
    udp_ports: OnceCell<Vec<u16>>,
    classes: OnceCell<Vec<&'static str>>,
    systemd_unseen: OnceCell<bool>,
}

impl Signs {
    /// `None` when the unix socket table cannot be read.
    fn read(host: &HostPaths, shared: &SharedReads) -> Option<Signs> {
        let sockets = shared.unix_sockets(host).ok()?;
        let pods =
            crate::hostfs::dir_entries(&host.join("/var/log/pods"), crate::hostfs::entries::PODS)
                .map(|rd| {
                    rd.filter_map(|e| e.file_name().to_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
        Some(Signs {
            sockets,
            pods,
            ..Signs::default()
        })
    }

    fn show(&self, host: &HostPaths, d: &Daemon) -> bool {
        let socket = |names: &[&str], listening_only: bool| {
            self.sockets.iter().any(|b| {
                (b.listening || !listening_only) && names.iter().any(|s| b.path.ends_with(s))
            })
        };
        socket(d.sockets, true)
            || socket(d.bound, false)
            || d.pod
                .is_some_and(|pod| self.pods.iter().any(|p| p.contains(pod)))
            || (!d.udp_ports.is_empty()
                && self
                    .udp_ports
                    .get_or_init(|| udp_ports(host))
                    .iter()
                    .any(|p| d.udp_ports.contains(p)))
            || (!d.classes.is_empty()
                && self
                    .classes
                    .get_or_init(|| populated_classes(host))
                    .iter()
                    .any(|c| d.classes.contains(c)))
            || (d.systemd_only && *self.systemd_unseen.get_or_init(|| systemd_unseen(host)))
    }
}

/// The local ports of the UDP sockets of the host's network namespace; a table that cannot
/// be read (other than absent: no IPv6) stands for every port a daemon of [`DAEMONS`] binds.
fn udp_ports(host: &HostPaths) -> Vec<u16> {
    let mut ports = Vec::new();
    for path in [net_udp::path_v4(host, 1), net_udp::path_v6(host, 1)] {
        match net_udp::read(&path) {
            Ok(sockets) => ports.extend(sockets.iter().map(|s| s.local.port())),
            // No IPv6 on this kernel: nothing bound there.
            Err(e) if e.is_not_found() => {}
            // Unreadable: any port may be bound; every daemon with a port shows.
            Err(_) => return DAEMONS.iter().flat_map(|d| d.udp_ports).copied().collect(),
        }
    }
    ports
}

/// The sysfs class directories of [`DAEMONS`] that hold an entry (or cannot be listed for
/// another reason than not existing: then they may).
fn populated_classes(host: &HostPaths) -> Vec<&'static str> {
    DAEMONS
        .iter()
        .flat_map(|d| d.classes.iter().copied())
        .filter(|c| {
            match crate::hostfs::dir_entries(&host.join(c), crate::hostfs::entries::CGROUP) {
                Ok(mut rd) => rd.next().is_some(),
                Err(e) => !e.is_not_found(),
            }
        })
        .collect()
}

/// systemd is pid 1 and no hierarchy this host root shows has its `system.slice`: a unit's
/// cgroup cannot tell whether the unit runs. Pid 1's name unreadable counts as systemd.
fn systemd_unseen(host: &HostPaths) -> bool {
    let systemd = crate::proc::pid::comm(host, 1).is_none_or(|c| c == "systemd");
    let root = host.join("/sys/fs/cgroup");
    systemd
        && !["", "systemd", "unified"]
            .iter()
            .any(|h| root.join(h).join("system.slice").is_dir())
}

/// The unit cgroup directories that may hold `unit` on this host (the ones that exist).
fn unit_dirs(host: &HostPaths, unit: &str) -> Vec<PathBuf> {
    let root = host.join("/sys/fs/cgroup");
    ["", "systemd", "unified"]
        .iter()
        .map(|h| root.join(h).join("system.slice").join(unit))
        .filter(|d| d.is_dir())
        .collect()
}

/// The pids of a pod's cgroup and of its containers' (one level below), by pod UID, in the
/// layouts the kubelet makes: the cgroupfs driver (`kubepods[/<qos>]/pod<uid>`) and the
/// systemd driver (`kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid with _>.slice`),
/// under the unified, `pids` or `name=systemd` hierarchy. A UID that is not one (a hostile
/// directory name) finds nothing.
fn pod_pids(host: &HostPaths, uid: &str) -> Vec<u32> {
    if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Vec::new();
    }
    let u = uid.replace('-', "_");
    let mut rel = vec![
        format!("kubepods/pod{uid}"),
        format!("kubepods.slice/kubepods-pod{u}.slice"),
    ];
    for qos in ["besteffort", "burstable"] {
        rel.push(format!("kubepods/{qos}/pod{uid}"));
        rel.push(format!(
            "kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice"
        ));
    }
    let root = host.join("/sys/fs/cgroup");
    let mut out = Vec::new();
    for h in ["", "unified", "pids", "systemd"] {
        for r in &rel {
            let dir = root.join(h).join(r);
            if !dir.is_dir() {
                continue;
            }
            let children = crate::hostfs::dir_entries(&dir, crate::hostfs::entries::CGROUP)
                .map(|rd| {
                    rd.filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            for d in std::iter::once(dir).chain(children) {
                out.extend(crate::sys::cgroup_io::procs(&d).unwrap_or_default());
            }
            if !out.is_empty() {
                return out;
            }
        }
    }
    out
}

/// What the cheap ways say of each of `names` (see the module documentation). Reads each
/// known name's unit cgroups, then, for the names without a unit, the host's listening unix
/// sockets and the pod log directories once.
pub fn locate(host: &HostPaths, shared: &SharedReads, names: &[&str]) -> BTreeMap<String, Located> {
    let mut out = BTreeMap::new();
    let window = shared.window();
    let mut answers = shared.answers();
    let mut signs: Option<Option<Signs>> = None;
    for name in names {
        if let Some(l) = answers.get(name, window) {
            out.insert(name.to_string(), l);
            continue;
        }
        let l = locate_one(host, shared, name, &mut signs);
        answers.keep(name, &l, window);
        out.insert(name.to_string(), l);
    }
    out
}

/// What the cheap ways say of `name`; `signs` are the listeners and pod directories, read
/// by the first name that needs them.
fn locate_one(
    host: &HostPaths,
    shared: &SharedReads,
    name: &str,
    signs: &mut Option<Option<Signs>>,
) -> Located {
    let Some(d) = DAEMONS.iter().find(|d| d.comm == name) else {
        return Located::Unknown;
    };
    let units = d
        .units
        .iter()
        .flat_map(|u| unit_dirs(host, u))
        .filter_map(|dir| crate::sys::cgroup_io::procs(&dir).ok())
        .flatten();
    if let Some(found) = in_cgroup(units) {
        return found;
    }
    match signs.get_or_insert_with(|| Signs::read(host, shared)) {
        Some(l) if !l.show(host, d) => Located::Absent,
        // A pod of it: the processes of that pod's cgroup.
        Some(l) => in_cgroup(
            d.pod
                .map(|pod| l.pods.iter().filter(move |p| p.contains(pod)))
                .into_iter()
                .flatten()
                .filter_map(|dir| dir.rsplit('_').next())
                .flat_map(|uid| pod_pids(host, uid)),
        )
        .unwrap_or(Located::Unknown),
        None => Located::Unknown,
    }
}

/// The first [`MAX_UNIT_PIDS`] distinct pids, in order, when there are any.
fn in_cgroup(pids: impl Iterator<Item = u32>) -> Option<Located> {
    let mut pids: Vec<u32> = pids.collect();
    pids.sort_unstable();
    pids.dedup();
    pids.truncate(MAX_UNIT_PIDS);
    (!pids.is_empty()).then_some(Located::InCgroup(pids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc/1/net")).unwrap();
        std::fs::write(
            t.path().join("proc/1/net/unix"),
            "Num       RefCount Protocol Flags    Type St Inode Path\n",
        )
        .unwrap();
        let h = HostPaths::new(t.path());
        (t, h)
    }

    fn unix_listener(t: &tempfile::TempDir, path: &str) {
        let p = t.path().join("proc/1/net/unix");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(&format!(
            "0000000000000000: 00000002 00000000 00010000 0001 01 4242 {path}\n"
        ));
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_unit_cgroup_finds_and_no_listener_rules_out() {
        let (t, h) = host();
        // kubelet in its unit (v1 name=systemd hierarchy), containerd listening by hand.
        let unit = t
            .path()
            .join("sys/fs/cgroup/systemd/system.slice/kubelet.service");
        std::fs::create_dir_all(&unit).unwrap();
        std::fs::write(unit.join("cgroup.procs"), "812\n").unwrap();
        unix_listener(&t, "/run/containerd/containerd.sock");
        // A docker.service unit without tasks (stopped) says nothing.
        let docker = t.path().join("sys/fs/cgroup/system.slice/docker.service");
        std::fs::create_dir_all(&docker).unwrap();
        std::fs::write(docker.join("cgroup.procs"), "").unwrap();
        let got = locate(
            &h,
            &SharedReads::default(),
            &[
                "kubelet",
                "containerd",
                "dockerd",
                "kube-proxy",
                "crio",
                "sshd",
            ],
        );
        assert_eq!(got["kubelet"], Located::InCgroup(vec![812]));
        assert_eq!(got["containerd"], Located::Unknown, "a listener, no unit");
        assert_eq!(got["dockerd"], Located::Absent);
        assert_eq!(got["kube-proxy"], Located::Absent);
        // CRI-O (the pressure collector asks for it): no unit, no socket, so not running —
        // told without a pass over /proc.
        assert_eq!(got["crio"], Located::Absent);
        assert_eq!(got["sshd"], Located::Unknown, "not a daemon of this module");
    }

    #[test]
    fn signs_are_matched_by_socket_file_name_and_pod_directory() {
        let (t, h) = host();
        // k3s moves containerd's socket; the kubelet's pod-resources socket is enough.
        unix_listener(&t, "/run/k3s/containerd/containerd.sock");
        unix_listener(&t, "/data/kubelet/pod-resources/kubelet.sock");
        std::fs::create_dir_all(t.path().join(
            "var/log/pods/kube-system_kube-proxy-x7k2p_9a8b7c6d-1111-2222-3333-444455556666",
        ))
        .unwrap();
        let got = locate(
            &h,
            &SharedReads::default(),
            &[
                "kubelet",
                "containerd",
                "dockerd",
                "cri-dockerd",
                "kube-proxy",
            ],
        );
        assert_eq!(got["kubelet"], Located::Unknown);
        assert_eq!(got["containerd"], Located::Unknown);
        assert_eq!(
            got["dockerd"],
            Located::Absent,
            "containerd.sock is not docker.sock"
        );
        assert_eq!(got["cri-dockerd"], Located::Absent);
        assert_eq!(
            got["kube-proxy"],
            Located::Unknown,
            "its pod's log directory"
        );
        // A connected (not listening) socket at the path is not a listener.
        let (t, h) = host();
        let p = t.path().join("proc/1/net/unix");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(
            "0000000000000000: 00000002 00000000 00000000 0001 03 4243 /run/docker.sock\n",
        );
        std::fs::write(p, text).unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["dockerd"])["dockerd"],
            Located::Absent
        );
    }

    const TIME_DAEMONS: [&str; 4] = ["chronyd", "ntpd", "systemd-timesyn", "phc2sys"];
    const UDP_HEADER: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n";

    /// A host root whose pid 1 is `init` (not systemd), with empty UDP tables.
    fn time_host() -> (tempfile::TempDir, HostPaths) {
        let (t, h) = host();
        std::fs::write(t.path().join("proc/1/comm"), "init\n").unwrap();
        for f in ["udp", "udp6"] {
            std::fs::write(t.path().join("proc/1/net").join(f), UDP_HEADER).unwrap();
        }
        (t, h)
    }

    fn udp_bound(t: &tempfile::TempDir, file: &str, local: &str) {
        let p = t.path().join("proc/1/net").join(file);
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(&format!(
            "  1: {local} 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5001 2 0000000000000000 0\n"
        ));
        std::fs::write(p, text).unwrap();
    }

    fn located(h: &HostPaths) -> Vec<(String, Located)> {
        locate(h, &SharedReads::default(), &TIME_DAEMONS)
            .into_iter()
            .collect()
    }

    #[test]
    fn no_time_daemon_sign_rules_them_all_out() {
        let (_t, h) = time_host();
        for (name, how) in located(&h) {
            assert_eq!(how, Located::Absent, "{name}");
        }
    }

    #[test]
    fn each_time_daemon_sign_leaves_it_to_the_pass() {
        // chronyd's command socket is a bound datagram socket, not a listener.
        let (t, h) = time_host();
        let p = t.path().join("proc/1/net/unix");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(
            "0000000000000000: 00000002 00000000 00000000 0002 01 4244 /run/chrony/chronyd.sock\n",
        );
        std::fs::write(p, text).unwrap();
        let got = locate(&h, &SharedReads::default(), &TIME_DAEMONS);
        assert_eq!(got["chronyd"], Located::Unknown);
        assert_eq!(
            got["ntpd"],
            Located::Absent,
            "chronyd.sock is not ntpd.sock"
        );
        // chronyd's command port on ::1 (323 = 0x0143).
        let (t, h) = time_host();
        udp_bound(&t, "udp6", "00000000000000000000000001000000:0143");
        let got = locate(&h, &SharedReads::default(), &TIME_DAEMONS);
        assert_eq!(got["chronyd"], Located::Unknown);
        assert_eq!(got["ntpd"], Located::Absent);
        // Port 123 on 0.0.0.0: an NTP server, ntpd's or chronyd's.
        let (t, h) = time_host();
        udp_bound(&t, "udp", "00000000:007B");
        let got = locate(&h, &SharedReads::default(), &TIME_DAEMONS);
        assert_eq!(got["chronyd"], Located::Unknown);
        assert_eq!(got["ntpd"], Located::Unknown);
        assert_eq!(got["phc2sys"], Located::Absent);
        // OpenNTPD's control socket.
        let (t, h) = time_host();
        unix_listener(&t, "/var/run/ntpd.sock");
        assert_eq!(
            locate(&h, &SharedReads::default(), &["ntpd"])["ntpd"],
            Located::Unknown
        );
        // A PTP hardware clock: phc2sys may run.
        let (t, h) = time_host();
        std::fs::create_dir_all(t.path().join("sys/class/ptp/ptp0")).unwrap();
        let got = locate(&h, &SharedReads::default(), &TIME_DAEMONS);
        assert_eq!(got["phc2sys"], Located::Unknown);
        assert_eq!(got["chronyd"], Located::Absent);
        // An unreadable UDP table (a directory where the file should be) may hide any port.
        let (t, h) = time_host();
        std::fs::remove_file(t.path().join("proc/1/net/udp")).unwrap();
        std::fs::create_dir(t.path().join("proc/1/net/udp")).unwrap();
        let got = locate(&h, &SharedReads::default(), &TIME_DAEMONS);
        assert_eq!(got["chronyd"], Located::Unknown);
        assert_eq!(got["ntpd"], Located::Unknown);
        // No IPv6 (no udp6 file) hides nothing.
        let (t, h) = time_host();
        std::fs::remove_file(t.path().join("proc/1/net/udp6")).unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["chronyd"])["chronyd"],
            Located::Absent
        );
    }

    #[test]
    fn timesyncd_is_told_by_its_unit_where_systemd_units_are_in_view() {
        let (t, h) = time_host();
        std::fs::write(t.path().join("proc/1/comm"), "systemd\n").unwrap();
        // systemd runs but none of its units can be seen: only the pass can tell.
        assert_eq!(
            locate(&h, &SharedReads::default(), &["systemd-timesyn"])["systemd-timesyn"],
            Located::Unknown
        );
        // Its units are in view (the v1 name=systemd hierarchy), timesyncd's not among them.
        let slice = t.path().join("sys/fs/cgroup/systemd/system.slice");
        std::fs::create_dir_all(slice.join("cron.service")).unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["systemd-timesyn"])["systemd-timesyn"],
            Located::Absent
        );
        let unit = slice.join("systemd-timesyncd.service");
        std::fs::create_dir_all(&unit).unwrap();
        std::fs::write(unit.join("cgroup.procs"), "431\n").unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["systemd-timesyn"])["systemd-timesyn"],
            Located::InCgroup(vec![431])
        );
        // chronyd as its unit (cgroup v2).
        let unit = t.path().join("sys/fs/cgroup/system.slice/chrony.service");
        std::fs::create_dir_all(&unit).unwrap();
        std::fs::write(unit.join("cgroup.procs"), "602\n").unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["chronyd"])["chronyd"],
            Located::InCgroup(vec![602])
        );
    }

    #[test]
    fn unreadable_listeners_leave_it_to_the_pass() {
        let t = tempfile::tempdir().unwrap();
        let h = HostPaths::new(t.path());
        let got = locate(&h, &SharedReads::default(), &["kubelet"]);
        assert_eq!(got["kubelet"], Located::Unknown);
    }

    /// kube-proxy as a pod: its process is in the pod's cgroup, found by the UID of its log
    /// directory, in the systemd driver's layout (v2) and the cgroupfs driver's (v1 `pids`).
    #[test]
    fn a_pod_of_it_is_looked_up_in_the_pods_cgroup() {
        const UID: &str = "9a8b7c6d-1111-2222-3333-444455556666";
        let u = UID.replace('-', "_");
        for (dir, pid) in [
            (
                format!("sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/cri-containerd-abc.scope"),
                2100,
            ),
            (format!("sys/fs/cgroup/pids/kubepods/burstable/pod{UID}/abc"), 2200),
        ] {
            let (t, h) = host();
            std::fs::create_dir_all(
                t.path()
                    .join(format!("var/log/pods/kube-system_kube-proxy-x7k2p_{UID}")),
            )
            .unwrap();
            assert_eq!(locate(&h, &SharedReads::default(), &["kube-proxy"])["kube-proxy"], Located::Unknown);
            std::fs::create_dir_all(t.path().join(&dir)).unwrap();
            std::fs::write(t.path().join(&dir).join("cgroup.procs"), format!("{pid}\n")).unwrap();
            assert_eq!(
                locate(&h, &SharedReads::default(), &["kube-proxy"])["kube-proxy"],
                Located::InCgroup(vec![pid])
            );
        }
        // A directory name whose last part is no UID finds nothing.
        let (t, h) = host();
        std::fs::create_dir_all(t.path().join("var/log/pods/kube-system_kube-proxy-x_..")).unwrap();
        assert_eq!(
            locate(&h, &SharedReads::default(), &["kube-proxy"])["kube-proxy"],
            Located::Unknown
        );
        assert!(pod_pids(&h, "../../etc").is_empty());
    }
}
