//! The typed reading of the `net` collector: the softnet counters per CPU, the watched
//! interfaces and the bonds, each with its change since the previous run. The collector reads
//! it; `judge` decides on it; tests build it directly.

/// Everything the rules look at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetSample {
    /// Seconds since the previous run (`None` on the first run: no rate yet).
    pub interval_seconds: Option<f64>,
    /// Per CPU, in CPU order (empty when `softnet_stat` could not be read).
    pub cpus: Vec<CpuSoftnet>,
    /// The watched interfaces, by name.
    pub interfaces: Vec<Interface>,
    /// The bonds of the host's network namespace.
    pub bonds: Vec<Bond>,
    /// `net.core.netdev_max_backlog`, `netdev_budget`, `netdev_budget_usecs` (when readable
    /// and the host's).
    pub sysctls: Sysctls,
    /// The uplink's MTU against the CNI's devices (`None`: no default route, or its MTU
    /// unreadable).
    pub mtu: Option<MtuPath>,
    /// The pods' own network namespaces, one process each (bounded; hostNetwork pods left
    /// out).
    pub pods: Vec<PodNetns>,
    /// Interfaces whose transmit hung, from the kernel log within its lookback window.
    pub tx_timeouts: Vec<TxTimeouts>,
}

/// One interface's transmit hangs in the kernel log (the stack's `NETDEV WATCHDOG` or ENA's
/// missing Tx completions), within the reader's lookback window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TxTimeouts {
    /// The interface named by the lines (validated as the kernel allows names).
    pub interface: String,
    /// The driver the last line named, when it did.
    pub driver: Option<String>,
    /// The transmit queues named, in order (at most a few).
    pub queues: Vec<u32>,
    /// Lines in the window.
    pub events: u64,
    /// Runs of lines less than the burst gap apart (a hang reported every few seconds is one).
    pub bursts: u64,
    /// True when the lines are ENA's missing completions rather than the stack's watchdog.
    pub ena: bool,
    /// Age of the last line (`None`: no clock to date it).
    pub last_seen_seconds_ago: Option<u64>,
    /// The last line, truncated.
    pub line: String,
}

/// One pod's network namespace, read through one of its processes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodNetns {
    /// The pod's UID, from its cgroup's name (validated: [`crate::names::is_pod_uid`]).
    pub uid: String,
    /// Its namespace and name when the kubelet's pod log directories name it (validated).
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The process read (`<root>/proc/<pid>/net/*`) and its network namespace's inode.
    pub pid: u32,
    pub netns: u64,
    pub counters: PodCounters,
    /// The change since the previous run (`None`: this namespace was not read last run).
    pub delta: Option<PodCounters>,
}

impl PodNetns {
    /// How findings and metrics name the pod: `namespace/name`, else `pod <uid>`.
    pub fn label(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            _ => format!("pod {}", self.uid),
        }
    }
}

/// A pod namespace's counters: `net/snmp`'s `Udp:` table (IPv4) plus `net/snmp6`'s `Udp6*`
/// counters (IPv6, when the namespace has it), and the namespace's own
/// conntrack statistics (`net/stat/nf_conntrack`, summed over CPUs; `None` when conntrack is
/// not loaded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodCounters {
    pub udp_in_datagrams: u64,
    pub udp_in_errors: u64,
    pub udp_rcvbuf_errors: u64,
    pub udp_no_ports: u64,
    pub conntrack: Option<PodConntrack>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodConntrack {
    pub insert_failed: u64,
    pub drop: u64,
}

impl PodCounters {
    /// `self - before`, counter by counter; a counter that went back counts from zero.
    pub fn since(&self, before: &PodCounters) -> PodCounters {
        let d = |now: u64, was: u64| if now >= was { now - was } else { now };
        PodCounters {
            udp_in_datagrams: d(self.udp_in_datagrams, before.udp_in_datagrams),
            udp_in_errors: d(self.udp_in_errors, before.udp_in_errors),
            udp_rcvbuf_errors: d(self.udp_rcvbuf_errors, before.udp_rcvbuf_errors),
            udp_no_ports: d(self.udp_no_ports, before.udp_no_ports),
            conntrack: match (self.conntrack, before.conntrack) {
                (Some(now), Some(was)) => Some(PodConntrack {
                    insert_failed: d(now.insert_failed, was.insert_failed),
                    drop: d(now.drop, was.drop),
                }),
                _ => None,
            },
        }
    }

    /// Packets the namespace's conntrack lost: the larger of `insert_failed` and `drop` (a
    /// lost clash counts in both on 5.x+ kernels, in one of them on older ones).
    pub fn conntrack_lost(&self) -> u64 {
        self.conntrack.map_or(0, |c| c.insert_failed.max(c.drop))
    }
}

/// The MTUs on the pods' path out of the node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MtuPath {
    /// Host text: the interface of the host's default route, and its MTU.
    pub uplink: String,
    pub uplink_mtu: u64,
    /// The CNI's overlay device found (`flannel.1`, `vxlan.calico`, …), its MTU and the bytes
    /// its encapsulation adds to every packet.
    pub overlay: Option<(String, u64, u64)>,
    /// The pods' side: the CNI's bridge (`cni0`, `cbr0`) and the first pod veths by name,
    /// with their MTUs (bounded).
    pub pod_side: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sysctls {
    pub netdev_max_backlog: Option<u64>,
    pub netdev_budget: Option<u64>,
    pub netdev_budget_usecs: Option<u64>,
}

/// The softnet counters of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuSoftnet {
    pub cpu: u32,
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    /// The change since the previous run (the kernel's 32-bit counters unwrapped).
    pub delta: Option<SoftnetDelta>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SoftnetDelta {
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
}

/// Why an interface is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A bus device backs it (`/sys/class/net/<if>/device`).
    Physical,
    /// A bond master.
    Bond,
    /// Named by the operator (`--net-interfaces`).
    Configured,
}

/// An interface's counters (`statistics/*`); a counter the driver does not keep is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_missed: u64,
    pub rx_fifo: u64,
    pub tx_fifo: u64,
    pub rx_crc: u64,
    pub rx_frame: u64,
    pub rx_over: u64,
    pub carrier_changes: u64,
}

impl Counters {
    /// `self - before`, counter by counter; a counter that went back (the device was
    /// re-created, a driver reset) counts from zero.
    pub fn since(&self, before: &Counters) -> Counters {
        let d = |now: u64, was: u64| if now >= was { now - was } else { now };
        Counters {
            rx_packets: d(self.rx_packets, before.rx_packets),
            tx_packets: d(self.tx_packets, before.tx_packets),
            rx_errors: d(self.rx_errors, before.rx_errors),
            tx_errors: d(self.tx_errors, before.tx_errors),
            rx_dropped: d(self.rx_dropped, before.rx_dropped),
            tx_dropped: d(self.tx_dropped, before.tx_dropped),
            rx_missed: d(self.rx_missed, before.rx_missed),
            rx_fifo: d(self.rx_fifo, before.rx_fifo),
            tx_fifo: d(self.tx_fifo, before.tx_fifo),
            rx_crc: d(self.rx_crc, before.rx_crc),
            rx_frame: d(self.rx_frame, before.rx_frame),
            rx_over: d(self.rx_over, before.rx_over),
            carrier_changes: d(self.carrier_changes, before.carrier_changes),
        }
    }
}

/// One watched interface.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Interface {
    /// Host text: the directory name under `/sys/class/net`.
    pub name: String,
    pub role: Option<Role>,
    /// `operstate` (`up`, `down`, `lowerlayerdown`, `unknown`, …).
    pub operstate: String,
    /// `flags` has `IFF_UP`: someone set it up, so it should carry traffic.
    pub admin_up: bool,
    /// `speed` in Mb/s (`None` without carrier or for virtual NICs: -1).
    pub speed_mbps: Option<u64>,
    pub duplex: Option<String>,
    pub mtu: Option<u64>,
    pub counters: Counters,
    /// The change since the previous run.
    pub delta: Option<Counters>,
}

impl Interface {
    /// Administratively up, but the link is not (`NO-CARRIER` in `ip link`).
    pub fn link_down(&self) -> bool {
        self.admin_up && matches!(self.operstate.as_str(), "down" | "lowerlayerdown")
    }
}

/// One bond, from `/proc/net/bonding/<bond>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bond {
    /// Host text: the file's name.
    pub name: String,
    pub bond: crate::proc::net_bonding::Bond,
    /// Link failures of all slaves since the previous run.
    pub link_failures_delta: Option<u64>,
}
