//! The whole plugin system: one table of the collectors, read by everything that lists them
//! (the agent's CLI and scheduler, the tests, the docs checks). Adding a collector is one row
//! here (and its folder, rule file, docs page and scenario test: ARCHITECTURE.md "How to add a
//! collector").
//!
//! What only the agent has comes in [`Options`]: the runtime, dns and reach collectors' network
//! probes are the agent's (this crate knows no network protocol).

use std::sync::Arc;

use crate::clock::{ClockCollector, ClockConfig};
use crate::collector::Collector;
use crate::conntrack::{ConntrackCollector, ConntrackConfig};
use crate::disk::{DiskCollector, DiskConfig};
use crate::dns::{DnsCollector, DnsConfig, DnsProbe};
use crate::gpu::{GpuCollector, GpuConfig};
use crate::hardware::{HardwareCollector, HardwareConfig};
use crate::iptables::{IptablesCollector, IptablesConfig};
use crate::kernel::{KernelCollector, KernelConfig};
use crate::listing::Listed;
use crate::load::{LoadCollector, LoadConfig};
use crate::memory::{MemoryCollector, MemoryConfig};
use crate::net::{NetCollector, NetConfig};
use crate::node::Node;
use crate::npd::{NpdCollector, NpdConfigs};
use crate::pressure::{PressureCollector, PressureConfig};
use crate::reach::probe::ReachProbe;
use crate::reach::{ReachCollector, ReachConfig};
use crate::runtime::probe::RuntimeProbe;
use crate::runtime::{RuntimeCollector, RuntimeConfig};
use crate::tables::{TablesCollector, TablesConfig};

/// Every collector's configuration: the defaults, with the command line's flags applied by
/// the agent.
#[derive(Clone)]
pub struct Options {
    pub disk: DiskConfig,
    pub load: LoadConfig,
    pub memory: MemoryConfig,
    pub iptables: IptablesConfig,
    pub conntrack: ConntrackConfig,
    pub kernel: KernelConfig,
    pub runtime: RuntimeConfig,
    pub hardware: HardwareConfig,
    pub gpu: GpuConfig,
    pub npd: NpdConfigs,
    pub clock: ClockConfig,
    pub pressure: PressureConfig,
    pub tables: TablesConfig,
    pub net: NetConfig,
    pub dns: DnsConfig,
    pub reach: ReachConfig,
    /// How the runtime collector asks the daemons (the agent's probes; tests' fakes).
    pub runtime_probe: Arc<dyn RuntimeProbe>,
    /// How the dns collector asks the DNS servers (the agent's; tests' fakes).
    pub dns_probe: Arc<dyn DnsProbe>,
    /// How the reach collector probes the control paths (the agent's probes; tests' fakes).
    pub reach_probe: Arc<dyn ReachProbe>,
}

impl Options {
    /// Every collector's defaults, with the agent's (or a test's) network probes: `probe` for
    /// the runtime collector, `dns_probe` for the dns collector, `reach_probe` for the reach
    /// collector.
    pub fn new(
        probe: Arc<dyn RuntimeProbe>,
        dns_probe: Arc<dyn DnsProbe>,
        reach_probe: Arc<dyn ReachProbe>,
    ) -> Options {
        Options {
            disk: DiskConfig::default(),
            load: LoadConfig::default(),
            memory: MemoryConfig::default(),
            iptables: IptablesConfig::default(),
            conntrack: ConntrackConfig::default(),
            kernel: KernelConfig::default(),
            runtime: RuntimeConfig::default(),
            hardware: HardwareConfig::default(),
            gpu: GpuConfig::default(),
            npd: NpdConfigs::default(),
            clock: ClockConfig::default(),
            pressure: PressureConfig::default(),
            tables: TablesConfig::default(),
            net: NetConfig::default(),
            dns: DnsConfig::default(),
            reach: ReachConfig::default(),
            runtime_probe: probe,
            dns_probe,
            reach_probe,
        }
    }
}

/// One row of the table.
pub struct Entry {
    /// The collector's name: `--collector`, `/findings`' `collector`, its rule file's
    /// `collector`, its docs page `docs/collectors/<name>.md`, its metrics'
    /// `node_doctor_<name>_*`.
    pub name: &'static str,
    /// Builds it (cheap: a constructor reads nothing and starts nothing; also called to
    /// rebuild it after a panic).
    pub build: fn(&Node, &Options) -> Box<dyn Collector>,
    /// The command-line flags that configure it, beside the global ones (a test holds the
    /// CLI to it, another its docs page).
    pub flags: &'static [&'static str],
    /// Its thresholds as configured, for the rule pages (`/rules/<id>`).
    pub thresholds: fn(&Options) -> Listed,
}

/// Every collector, in the order they are listed.
pub const COLLECTORS: &[Entry] = &[
    Entry {
        name: "disk",
        build: |n, o| Box::new(DiskCollector::new(n.clone(), o.disk.clone())),
        flags: &[
            "--docker-daemon-json",
            "--containerd-config",
            "--kubelet-config",
            "--disk-walk-budget-entries",
        ],
        thresholds: |o| o.disk.thresholds.listed(),
    },
    Entry {
        name: "load",
        build: |n, o| Box::new(LoadCollector::new(n.clone(), o.load.clone())),
        flags: &[
            "--load-warning-per-cpu",
            "--load-critical-per-cpu",
            "--iowait-percent",
            "--disk-busy-percent",
        ],
        thresholds: |o| o.load.thresholds.listed(),
    },
    Entry {
        name: "memory",
        build: |n, o| Box::new(MemoryCollector::new(n.clone(), o.memory.clone())),
        flags: &["--kmsg-lookback", "--kmsg-max-records"],
        thresholds: |o| o.memory.thresholds.listed(),
    },
    Entry {
        name: "iptables",
        build: |n, o| Box::new(IptablesCollector::new(n.clone(), o.iptables.clone())),
        flags: &[
            "--xtables-lock",
            "--xtables-sample-period",
            "--xtables-hold",
        ],
        thresholds: |o| o.iptables.thresholds.listed(),
    },
    Entry {
        name: "conntrack",
        build: |n, o| Box::new(ConntrackCollector::new(n.clone(), o.conntrack.clone())),
        flags: &[
            "--conntrack-netns-pid",
            "--conntrack-table-percent",
            "--nodelocal-dns",
            "--kubelet-config",
            "--kmsg-lookback",
            "--kmsg-max-records",
        ],
        thresholds: |o| o.conntrack.thresholds.listed(),
    },
    Entry {
        name: "kernel",
        build: |n, o| Box::new(KernelCollector::new(n.clone(), o.kernel.clone())),
        flags: &[
            "--kmsg-lookback",
            "--kmsg-max-records",
            "--docker-daemon-json",
            "--containerd-config",
            "--kubelet-config",
        ],
        thresholds: |o| o.kernel.thresholds.listed(),
    },
    Entry {
        name: "runtime",
        build: |n, o| {
            Box::new(RuntimeCollector::new(
                n.clone(),
                o.runtime.clone(),
                Arc::clone(&o.runtime_probe),
            ))
        },
        flags: &[
            "--docker-daemon-json",
            "--containerd-config",
            "--kubelet-config",
            "--docker-socket",
            "--containerd-socket",
            "--runtime-probe-timeout",
            "--cni-conf-dir",
        ],
        thresholds: |o| {
            let mut l = o.runtime.thresholds.listed();
            l.extend(o.runtime.log_thresholds.listed().into_iter().map(|mut s| {
                s.name = log_name(s.name);
                s
            }));
            l
        },
    },
    Entry {
        name: "hardware",
        build: |n, o| Box::new(HardwareCollector::new(n.clone(), o.hardware.clone())),
        flags: &["--kmsg-lookback", "--kmsg-max-records"],
        thresholds: |o| o.hardware.thresholds.listed(),
    },
    Entry {
        name: "gpu",
        build: |n, o| Box::new(GpuCollector::new(n.clone(), o.gpu.clone())),
        flags: &["--kmsg-lookback", "--kmsg-max-records"],
        thresholds: |o| o.gpu.thresholds.listed(),
    },
    Entry {
        name: "npd",
        build: |n, o| Box::new(NpdCollector::new(n.clone(), o.npd.clone())),
        flags: &["--npd-config", "--kmsg-max-records"],
        thresholds: |o| o.npd.thresholds.listed(),
    },
    Entry {
        name: "clock",
        build: |n, o| Box::new(ClockCollector::new(n.clone(), o.clock.clone())),
        flags: &[],
        thresholds: |o| o.clock.thresholds.listed(),
    },
    Entry {
        name: "pressure",
        build: |n, o| Box::new(PressureCollector::new(n.clone(), o.pressure.clone())),
        flags: &["--kubelet-config"],
        thresholds: |o| o.pressure.thresholds.listed(),
    },
    Entry {
        name: "tables",
        build: |n, o| Box::new(TablesCollector::new(n.clone(), o.tables.clone())),
        flags: &["--kmsg-lookback", "--kmsg-max-records"],
        thresholds: |o| o.tables.thresholds.listed(),
    },
    Entry {
        name: "net",
        build: |n, o| Box::new(NetCollector::new(n.clone(), o.net.clone())),
        flags: &["--net-interfaces", "--kmsg-lookback", "--kmsg-max-records"],
        thresholds: |o| o.net.thresholds.listed(),
    },
    Entry {
        name: "dns",
        build: |n, o| {
            Box::new(DnsCollector::new(
                n.clone(),
                o.dns.clone(),
                Arc::clone(&o.dns_probe),
            ))
        },
        flags: &[
            "--no-probes",
            "--dns-probe-timeout",
            "--nodelocal-dns",
            "--kubelet-config",
        ],
        thresholds: |o| o.dns.thresholds.listed(),
    },
    Entry {
        name: "reach",
        build: |n, o| {
            Box::new(ReachCollector::new(
                n.clone(),
                o.reach.clone(),
                Arc::clone(&o.reach_probe),
            ))
        },
        flags: &["--no-probes", "--kubelet-kubeconfig"],
        thresholds: |o| o.reach.thresholds.listed(),
    },
];

/// The runtime collector's node-log thresholds, named apart from its own.
fn log_name(name: &'static str) -> &'static str {
    match name {
        "state_window_seconds" => "logs.state_window_seconds",
        "event_window_seconds" => "logs.event_window_seconds",
        "settle_seconds" => "logs.settle_seconds",
        "max_subjects" => "logs.max_subjects",
        other => other,
    }
}

/// The collectors' names, in the table's order.
pub fn names() -> impl Iterator<Item = &'static str> {
    COLLECTORS.iter().map(|e| e.name)
}

/// The row of a collector.
pub fn entry(name: &str) -> Option<&'static Entry> {
    COLLECTORS.iter().find(|e| e.name == name)
}

/// Every collector, built for `node`.
pub fn all(node: &Node, opts: &Options) -> Vec<Box<dyn Collector>> {
    COLLECTORS.iter().map(|e| (e.build)(node, opts)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reach::probe::{ReachPlan, ReachReport};
    use crate::runtime::probe::{ProbePlan, ProbeReport};

    #[derive(Debug)]
    struct NoProbe;
    impl RuntimeProbe for NoProbe {
        fn probe(&self, _plan: &ProbePlan) -> ProbeReport {
            ProbeReport::default()
        }
    }
    impl DnsProbe for NoProbe {
        fn probe(&self, _plan: &crate::dns::DnsPlan) -> crate::dns::DnsReport {
            crate::dns::DnsReport::default()
        }
    }
    impl ReachProbe for NoProbe {
        fn probe(&self, _plan: &ReachPlan) -> ReachReport {
            ReachReport::default()
        }
    }

    fn options() -> Options {
        Options::new(Arc::new(NoProbe), Arc::new(NoProbe), Arc::new(NoProbe))
    }

    /// Every collector lists every field of its thresholds, each once, with a value.
    #[test]
    fn thresholds_list_every_field() {
        use crate::listing::assert_lists_every_field as every;
        let o = options();
        every(
            &format!("{:?}", o.disk.thresholds),
            &o.disk.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.load.thresholds),
            &o.load.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.memory.thresholds),
            &o.memory.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.iptables.thresholds),
            &o.iptables.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.conntrack.thresholds),
            &o.conntrack.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.kernel.thresholds),
            &o.kernel.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.runtime.thresholds),
            &o.runtime.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.hardware.thresholds),
            &o.hardware.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.gpu.thresholds),
            &o.gpu.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.npd.thresholds),
            &o.npd.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.clock.thresholds),
            &o.clock.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.pressure.thresholds),
            &o.pressure.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.tables.thresholds),
            &o.tables.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.net.thresholds),
            &o.net.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.dns.thresholds),
            &o.dns.thresholds.listed(),
        );
        every(
            &format!("{:?}", o.reach.thresholds),
            &o.reach.thresholds.listed(),
        );
        let logs = &o.runtime.log_thresholds;
        every(&format!("{logs:?}"), &logs.listed());
        for e in COLLECTORS {
            let listed = (e.thresholds)(&o);
            let mut names: Vec<&str> = listed.iter().map(|s| s.name).collect();
            assert!(!names.is_empty(), "{}", e.name);
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "{}: a threshold listed twice", e.name);
        }
    }

    /// Each row builds the collector of its name, and no two rows share one.
    #[test]
    fn rows_build_the_collector_they_name() {
        let node = Node::new(crate::HostPaths::new("/nonexistent-host-root"));
        let opts = options();
        let built: Vec<&str> = all(&node, &opts).iter().map(|c| c.name()).collect();
        let named: Vec<&str> = names().collect();
        assert_eq!(built, named);
        let mut unique = named.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), named.len(), "{named:?}");
        assert!(entry("disk").is_some() && entry("nope").is_none());
    }

    /// Building a collector on this machine's real root looks at no process (no per-process
    /// path built, none examined); the iptables collector starts its sampler thread at its
    /// first collection (its scenario tests check that).
    #[test]
    fn constructors_read_nothing() {
        let node = Node::new(crate::HostPaths::new("/"));
        let opts = options();
        let built = all(&node, &opts);
        assert_eq!(built.len(), COLLECTORS.len());
        assert_eq!(node.per_process_paths(), 0);
        assert_eq!(node.processes().examined(), 0);
    }

    /// A node whose pid 1 has a unix socket table and a mount table, and a filesystem for
    /// `disk` to judge: the tables several collectors read.
    fn node_with_pid1_tables() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let w = |p: &str, text: &str| {
            let p = t.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "proc/1/net/unix",
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             0000000000000000: 00000002 00000000 00010000 0001 01 1001 /run/dbus/system_bus_socket\n",
        );
        w(
            "proc/1/mountinfo",
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n",
        );
        w(
            "proc/1/stat",
            "1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n",
        );
        w("proc/uptime", "10000.00 1.00\n");
        w(
            "etc/containerd/config.toml",
            "root = \"/var/lib/containerd\"\n",
        );
        std::fs::create_dir_all(t.path().join("var/lib/containerd")).unwrap();
        // containerd's socket, with nothing listening on it in pid 1's table: `runtime` reads
        // the table to tell a socket left behind; and PSI files, so `pressure` looks for the
        // daemons it watches (the runtime's and the kubelet's) where `disk` looks for them
        // too. Without them only `disk` read the table and asked for the daemons, and the test
        // passed or failed with this machine's state (its clock, its kernel log).
        std::fs::create_dir_all(t.path().join("run/containerd")).unwrap();
        drop(
            std::os::unix::net::UnixListener::bind(t.path().join("run/containerd/containerd.sock"))
                .unwrap(),
        );
        t
    }

    /// Run once each, as one of `check`'s samples runs them: on a node sharing its reads, pid
    /// 1's unix socket and mount tables are read once for every collector that needs them
    /// (on one that does not, more than once: the collectors do read them).
    #[test]
    fn one_round_of_every_collector_reads_pid_1s_tables_once_when_shared() {
        let t = node_with_pid1_tables();
        let round = |node: &Node| {
            let ctx = crate::CollectContext::new("node-1", crate::HostNetns::NotProcfs);
            for mut c in all(node, &options()) {
                c.collect(&ctx);
            }
            node.shared_reads()
        };
        let host = crate::HostPaths::new(t.path());
        let apart = Node::new(host.clone());
        let (unix, mounts) = round(&apart);
        assert!(
            unix > 1 && mounts > 1,
            "not shared: {unix} and {mounts} reads"
        );
        let node = Node::new(host).sharing_reads(std::time::Duration::from_secs(60));
        assert_eq!(round(&node), (1, 1));
        // The daemon locator: each daemon's answer found once for all the collectors that
        // ask, and a second round (check's second sample) finds none anew.
        // Which collectors ask the locator in a round depends on what this machine's own
        // state makes them look for (its clock through adjtimex, its kernel log): on this
        // staged node only `disk` is sure to, and `disk` keeps its discovery across rounds.
        // So the count compared is the shared node's: its answers, and none anew in a second
        // round. That an answer is kept for the window only, and asked again after it, is
        // `node::shared::the_daemon_locators_answers_are_kept_for_the_window_only`.
        let found = node.daemons_located();
        assert!(found >= 3, "{found} answers shared");
        assert_eq!(round(&node), (1, 1));
        assert_eq!(node.daemons_located(), found);
    }
}
