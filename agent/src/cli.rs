//! The command line. Every flag also reads an environment variable `NODE_DOCTOR_<FLAG>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::timefmt::parse_duration;

/// Exit code for bad usage (sysexits `EX_USAGE`), instead of clap's 2, which `check` uses
/// for "a critical finding".
pub const EXIT_USAGE: i32 = 64;

#[derive(Debug, Parser)]
#[command(
    name = "node-doctor",
    version,
    about = "Per-node Kubernetes diagnostics: explains node failures with evidence and the handbook's remediation",
    propagate_version = true
)]
pub struct Cli {
    /// Where the host's / is mounted (/host in a pod).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_HOST_ROOT",
        default_value = "/",
        value_name = "DIR"
    )]
    pub host_root: PathBuf,

    /// The Kubernetes node name used in findings and commands (default: $NODE_NAME, else the
    /// host's hostname).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_NODE_NAME",
        value_name = "NAME"
    )]
    pub node_name: Option<String>,

    /// Run only these collectors (repeat, or comma-separated).
    #[arg(
        long = "collector",
        global = true,
        env = "NODE_DOCTOR_COLLECTOR",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub collectors: Vec<String>,

    /// How long one collector run may take before it is reported as timed out
    /// (default: the smaller of its interval and 10s).
    #[arg(long, global = true, env = "NODE_DOCTOR_COLLECTOR_TIMEOUT", value_parser = parse_duration, value_name = "DURATION")]
    pub collector_timeout: Option<Duration>,

    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Log level or tracing filter (info, debug, node_doctor=debug) [default: info for
    /// serve, error for check, whose report is on stdout].
    #[arg(long, global = true, env = "NODE_DOCTOR_LOG_LEVEL", value_parser = parse_log_level, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// A rule file of your own (repeat, or comma-separated): overrides the words of built-in
    /// rules (title, summary, steps, commands) or adds steps and commands, e.g. to point at
    /// your runbooks. Checked at start; a bad file exits 64. Format: docs/rules.md.
    #[arg(
        long = "rules-file",
        global = true,
        env = "NODE_DOCTOR_RULES_FILE",
        value_delimiter = ',',
        value_name = "PATH"
    )]
    pub rules_files: Vec<PathBuf>,

    #[command(flatten)]
    pub tuning: CollectorFlags,

    #[command(subcommand)]
    pub command: Command,
}

/// Collector settings (thresholds, paths, bounds). The defaults follow the handbooks and the
/// kubelet; see docs/collectors/<name>.md for what each one changes.
#[derive(Debug, Args)]
pub struct CollectorFlags {
    /// Kernel log: at start, read back records newer than this (memory, conntrack, kernel).
    #[arg(long, global = true, env = "NODE_DOCTOR_KMSG_LOOKBACK", default_value = "1h", value_parser = parse_duration, value_name = "DURATION")]
    pub kmsg_lookback: Duration,

    /// Kernel log: at most this many records per collector run (the rest waits for the next run).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_KMSG_MAX_RECORDS",
        default_value_t = 5000,
        value_name = "N"
    )]
    pub kmsg_max_records: usize,

    /// npd: a node-problem-detector system-log-monitor config (JSON: kmsg, filelog or
    /// journald) whose rules node-doctor matches (repeat, or comma-separated). Checked at
    /// start; a config node-doctor cannot honour exits 64. docs/collectors/npd.md.
    #[arg(
        long = "npd-config",
        global = true,
        env = "NODE_DOCTOR_NPD_CONFIG",
        value_delimiter = ',',
        value_name = "FILE"
    )]
    pub npd_configs: Vec<PathBuf>,

    /// net: interfaces watched whatever they are (repeat, or comma-separated): an uplink
    /// with no `device` link in sysfs (a VLAN, a macvlan) that the node's traffic crosses.
    /// Physical interfaces and bonds are watched without it. docs/collectors/net.md.
    #[arg(
        long = "net-interfaces",
        global = true,
        env = "NODE_DOCTOR_NET_INTERFACES",
        value_delimiter = ',',
        value_name = "IFACE"
    )]
    pub net_interfaces: Vec<String>,

    /// dns, reach: send no active probe from this node (no DNS query, no kube-proxy /healthz,
    /// no API server handshake). Both collectors then touch no network and report "probes are
    /// off". docs/collectors/dns.md, docs/collectors/reach.md.
    #[arg(long = "no-probes", global = true, env = "NODE_DOCTOR_NO_PROBES")]
    pub no_probes: bool,

    /// disk, runtime: docker's daemon.json on the host (data-root, exec-root, log-opts, hosts).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_DOCKER_DAEMON_JSON",
        default_value = "/etc/docker/daemon.json",
        value_name = "PATH"
    )]
    pub docker_daemon_json: String,

    /// disk, runtime: containerd's config.toml on the host (root, state, grpc address).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_CONTAINERD_CONFIG",
        default_value = "/etc/containerd/config.toml",
        value_name = "PATH"
    )]
    pub containerd_config: String,

    /// disk, conntrack, kernel, runtime: the kubelet config file on the host when the running kubelet
    /// has no --config (default /var/lib/kubelet/config.yaml).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_KUBELET_CONFIG",
        value_name = "PATH"
    )]
    pub kubelet_config: Option<String>,

    /// reach: the kubelet's kubeconfig on the host when the running kubelet has no
    /// --kubeconfig (default /etc/kubernetes/kubelet.conf): its API server is probed.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_KUBELET_KUBECONFIG",
        value_name = "PATH"
    )]
    pub kubelet_kubeconfig: Option<String>,

    /// disk: entries the directory walk may visit per run (it resumes next run).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_DISK_WALK_BUDGET_ENTRIES",
        default_value_t = 20_000,
        value_name = "N"
    )]
    pub disk_walk_budget_entries: usize,

    /// load: load1 per CPU at which high load warns (sustained over two samples).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_LOAD_WARNING_PER_CPU",
        default_value_t = 2.0,
        value_name = "RATIO"
    )]
    pub load_warning_per_cpu: f64,

    /// load: load1 per CPU at which high load is critical.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_LOAD_CRITICAL_PER_CPU",
        default_value_t = 4.0,
        value_name = "RATIO"
    )]
    pub load_critical_per_cpu: f64,

    /// load: iowait % thresholds info,warning,critical (the handbook: above 1% sustained means
    /// storage cannot keep up).
    #[arg(long, global = true, env = "NODE_DOCTOR_IOWAIT_PERCENT", default_value = "1,10,30", value_parser = parse_three_percents, value_name = "INFO,WARN,CRIT")]
    pub iowait_percent: (f64, f64, f64),

    /// load: a disk at least this busy (%) over the window is IO-bound.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_DISK_BUSY_PERCENT",
        default_value_t = 90.0,
        value_name = "PERCENT"
    )]
    pub disk_busy_percent: f64,

    /// iptables: the xtables lock file on the host.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_XTABLES_LOCK",
        default_value = "/run/xtables.lock",
        value_name = "PATH"
    )]
    pub xtables_lock: PathBuf,

    /// iptables: how often the lock sampler reads /proc/locks.
    #[arg(long, global = true, env = "NODE_DOCTOR_XTABLES_SAMPLE_PERIOD", default_value = "250ms", value_parser = parse_duration, value_name = "DURATION")]
    pub xtables_sample_period: Duration,

    /// iptables: lock hold warning,critical (critical at kube-proxy's 5 s wait).
    #[arg(long, global = true, env = "NODE_DOCTOR_XTABLES_HOLD", default_value = "2s,5s", value_parser = parse_two_durations, value_name = "WARN,CRIT")]
    pub xtables_hold: (Duration, Duration),

    /// conntrack: read the network namespace of this pid (1 = the host's; needs hostPID).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_CONNTRACK_NETNS_PID",
        default_value_t = 1,
        value_name = "PID"
    )]
    pub conntrack_netns_pid: u32,

    /// conntrack: table fill % warning,critical.
    #[arg(long, global = true, env = "NODE_DOCTOR_CONNTRACK_TABLE_PERCENT", default_value = "75,90", value_parser = parse_two_percents, value_name = "WARN,CRIT")]
    pub conntrack_table_percent: (f64, f64),

    /// runtime: dockerd's API socket on the host. Naming it says this node uses docker there
    /// (default: found from the running dockerd, the kubelet's endpoint, /var/run/docker.sock).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_DOCKER_SOCKET",
        value_name = "PATH"
    )]
    pub docker_socket: Option<String>,

    /// runtime: containerd's socket on the host; naming it says this node uses containerd there
    /// (default: found from the running containerd, the kubelet's endpoint,
    /// /run/containerd/containerd.sock).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_CONTAINERD_SOCKET",
        value_name = "PATH"
    )]
    pub containerd_socket: Option<String>,

    /// runtime: how long each runtime, the CRI endpoint and the kubelet's /healthz may take to
    /// answer (all of a daemon's calls together); longer is "hung".
    #[arg(long, global = true, env = "NODE_DOCTOR_RUNTIME_PROBE_TIMEOUT", default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub runtime_probe_timeout: Duration,

    /// runtime: the CNI configuration directory on the host (unless the kubelet's --cni-conf-dir).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_CNI_CONF_DIR",
        default_value = "/etc/cni/net.d",
        value_name = "PATH"
    )]
    pub cni_conf_dir: String,

    /// conntrack, dns: where a node-local DNS cache listens.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_NODELOCAL_DNS",
        default_value = "169.254.20.10:53",
        value_name = "ADDR"
    )]
    pub nodelocal_dns: SocketAddr,

    /// dns: how long one UDP try of a DNS probe waits for its answer (the second try and the
    /// TCP fallback wait as long).
    #[arg(long, global = true, env = "NODE_DOCTOR_DNS_PROBE_TIMEOUT", default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub dns_probe_timeout: Duration,
}

/// Every collector's defaults, with this agent's network probes: the runtime collector's
/// (`probe.rs`), the dns collector's (`dns_probe.rs`) and the reach collector's
/// (`reach_probe.rs`).
pub fn default_options() -> collectors::registry::Options {
    use std::sync::Arc;
    collectors::registry::Options::new(
        Arc::new(crate::probe::HostProbe),
        Arc::new(crate::dns_probe::HostDnsProbe),
        Arc::new(crate::reach_probe::HostReachProbe),
    )
}

/// What `check` changes in the collectors' configurations: its second sample is its last,
/// so `load` reads the processes only when that window can raise a finding that names them
/// (its escalation bars at the rules' limits, `Escalation::at_the_limits`), not when a bar
/// meant to give `serve`'s next run a baseline is reached (a tick of iowait in a one-second
/// window, PSI `some` from other work). Its first sample, which the second follows, reads every
/// process when it shows signs of IO trouble at serve's bars (`Escalation::baseline`), so that
/// the second names the writers over its whole window.
pub fn for_check(mut o: collectors::registry::Options) -> collectors::registry::Options {
    o.load.thresholds.escalation = o.load.thresholds.escalation.at_the_limits();
    o
}

impl CollectorFlags {
    /// The collectors' configurations: defaults with these flags applied.
    pub fn options(&self) -> collectors::registry::Options {
        use collectors::kmsg::KmsgConfig;
        let kmsg = KmsgConfig {
            lookback: self.kmsg_lookback,
            max_records_per_cycle: self.kmsg_max_records.max(1),
            ..KmsgConfig::default()
        };
        let mut o = default_options();
        o.disk.runtime.daemon_json = self.docker_daemon_json.clone();
        o.disk.runtime.containerd_config = self.containerd_config.clone();
        o.disk.runtime.kubelet_config = self.kubelet_config.clone();
        o.disk.walk_budget_entries = self.disk_walk_budget_entries.max(1);
        o.load.thresholds.load_warning_per_cpu = self.load_warning_per_cpu;
        o.load.thresholds.load_critical_per_cpu = self.load_critical_per_cpu;
        (
            o.load.thresholds.iowait_info_percent,
            o.load.thresholds.iowait_warning_percent,
            o.load.thresholds.iowait_critical_percent,
        ) = self.iowait_percent;
        o.load.thresholds.disk_busy_percent = self.disk_busy_percent;
        o.memory.kmsg = kmsg.clone();
        o.net.kmsg = kmsg.clone();
        o.npd.kmsg = kmsg.clone();
        o.iptables.lock_path = self.xtables_lock.clone();
        o.iptables.sample_period = self.xtables_sample_period;
        (
            o.iptables.thresholds.hold_warning,
            o.iptables.thresholds.hold_critical,
        ) = self.xtables_hold;
        o.conntrack.netns_pid = self.conntrack_netns_pid;
        (
            o.conntrack.thresholds.table_warning_percent,
            o.conntrack.thresholds.table_critical_percent,
        ) = self.conntrack_table_percent;
        o.conntrack.nodelocal_dns_address = self.nodelocal_dns;
        if let Some(k) = &self.kubelet_config {
            o.conntrack.kubelet_config = PathBuf::from(k);
        }
        o.kernel.kmsg = kmsg.clone();
        o.kernel.runtime = o.disk.runtime.clone();
        o.runtime.locations = o.disk.runtime.clone();
        o.runtime.docker_socket = self.docker_socket.clone();
        o.runtime.containerd_socket = self.containerd_socket.clone();
        o.runtime.probe_timeout = self.runtime_probe_timeout.max(Duration::from_millis(10));
        o.runtime.cni_conf_dir = self.cni_conf_dir.clone();
        o.hardware.kmsg = kmsg.clone();
        o.gpu.kmsg = kmsg.clone();
        o.pressure.kubelet_config = self.kubelet_config.clone();
        o.tables.kmsg = kmsg.clone();
        o.net.interfaces = self.net_interfaces.clone();
        o.dns.probes = !self.no_probes;
        o.dns.try_timeout = self
            .dns_probe_timeout
            .clamp(Duration::from_millis(10), Duration::from_secs(5));
        o.dns.nodelocal_dns_address = self.nodelocal_dns;
        if let Some(k) = &self.kubelet_config {
            o.dns.kubelet_config = PathBuf::from(k);
        }
        o.reach.probes = !self.no_probes;
        if let Some(k) = &self.kubelet_kubeconfig {
            o.reach.kubeconfig = k.clone();
        }
        o.conntrack.kmsg = kmsg;
        o
    }
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|e| format!("{s:?}: {e}"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s:?}: a percentage must be within 0..=100"))
    }
}

fn parse_ascending<T: PartialOrd + Copy>(
    s: &str,
    n: usize,
    one: fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() != n {
        return Err(format!("{s:?}: expected {n} comma-separated values"));
    }
    let vals = parts.into_iter().map(one).collect::<Result<Vec<T>, _>>()?;
    if vals.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("{s:?}: values must be in ascending order"));
    }
    Ok(vals)
}

fn parse_two_percents(s: &str) -> Result<(f64, f64), String> {
    let v = parse_ascending(s, 2, parse_percent)?;
    Ok((v[0], v[1]))
}

fn parse_three_percents(s: &str) -> Result<(f64, f64, f64), String> {
    let v = parse_ascending(s, 3, parse_percent)?;
    Ok((v[0], v[1], v[2]))
}

fn parse_two_durations(s: &str) -> Result<(Duration, Duration), String> {
    let v = parse_ascending(s, 2, parse_duration)?;
    Ok((v[0], v[1]))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run continuously and serve /findings, /metrics, /healthz, /readyz and / over HTTP.
    Serve(ServeArgs),
    /// Sample the host twice, print a report and exit 0 (nothing above info), 1 (a
    /// warning), 2 (a critical finding), 3 (node-doctor itself failed), or 4-6 (0-2 with at
    /// least one collector that did not complete).
    #[command(after_help = crate::exit::HELP)]
    Check(CheckArgs),
    /// Explain a vendor error code, event message, kernel or runtime log line, exit code or
    /// Pod state from the handbooks (exit 0 when something matched, 1 when nothing did).
    #[command(after_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// The cluster's view (reads the API server, not this host): every problem class the
    /// nodes' conditions and node-doctor's Events show, how many nodes, since when, what those
    /// nodes share, and whether a shared dependency or the nodes are the cause. Exit codes as
    /// check's. Also `kubectl node-doctor fleet` (docs/fleet.md).
    #[command(after_help = FLEET_HELP)]
    Fleet(FleetArgs),
}

const FLEET_HELP: &str = "\
Exit codes: 0 no problem class, 1 the worst is a warning, 2 critical, 3 the nodes could not be
listed, 4-6 as 0-2 but the Events or Prometheus could not be read. RBAC: manifests/fleet/.

Examples:
  node-doctor fleet
  kubectl node-doctor fleet --format html > fleet.html
  node-doctor fleet --format json --prometheus http://localhost:9090";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FleetFormat {
    Table,
    Json,
    Html,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Output: a table for a person, JSON for scripts, or one self-contained HTML page.
    #[arg(long, env = "NODE_DOCTOR_FORMAT", value_enum, default_value = "table")]
    pub format: FleetFormat,

    /// The kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Prometheus' base URL (http://…): adds every active finding with its node and subject,
    /// from node_doctor_finding_info.
    #[arg(long, env = "NODE_DOCTOR_PROMETHEUS", value_name = "URL")]
    pub prometheus: Option<String>,

    /// Objects per list request (the first with resourceVersion=0, from the server's cache).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub chunk_size: u32,

    /// node-doctor's Events newer than this count (the API server keeps them an hour).
    #[arg(long, default_value = "1h", value_parser = parse_duration, value_name = "DURATION")]
    pub events_since: Duration,

    /// How long one request may take to start answering.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
}

impl FleetArgs {
    pub fn settings(&self) -> crate::fleet::Settings {
        crate::fleet::Settings {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            prometheus: self.prometheus.clone(),
            chunk_size: self.chunk_size as usize,
            events_since: self.events_since,
            request_timeout: self.request_timeout,
        }
    }

    pub fn format(&self) -> crate::fleet::Format {
        match self.format {
            FleetFormat::Table => crate::fleet::Format::Table,
            FleetFormat::Json => crate::fleet::Format::Json,
            FleetFormat::Html => crate::fleet::Format::Html,
        }
    }
}

/// What `explain` says when it is given nothing (or only blanks) to explain.
pub const EMPTY_QUERY: &str =
    "the query is empty: give explain a code (E4041), an exit code (137) or a pasted message";

/// Shown after `node-doctor explain --help`.
const EXPLAIN_EXAMPLES: &str = "\
Examples:
  node-doctor explain E4041
  node-doctor explain 'E 4053'               codes as people retype them (E-4027, code: 4041)
  node-doctor explain -1                     an exit code: the modulo rule gives 255
  node-doctor explain --lang zh CrashLoopBackOff
  node-doctor explain \"$(kubectl describe pod web-1 | sed -n '/Events:/,$p')\"

The answer says how sure it is: one entry; a choice between components that use the same
code; or, when only a generic event reason (FailedCreatePodSandBox, CrashLoopBackOff) matched,
the causes the handbook lists for it.";

#[derive(Debug, Args)]
pub struct ExplainArgs {
    // Not `required`: an empty query gets node-doctor's own message (ExplainArgs::normalized)
    // rather than clap's. Every word after the first belongs to the query, dashes included;
    // normalized() takes --format/--lang back out of it.
    /// What to explain: a code (E4041, E 4053, ENIIPCapacityExceed, 137, CrashLoopBackOff) or
    /// pasted text (an event, a log or kernel line, a line of the handbook, in English or
    /// Chinese). Several words are joined with spaces. Words that start with a dash belong to
    /// the query (-1, a pasted "use the -w option"); only --format and --lang are options.
    #[arg(num_args = 0.., allow_hyphen_values = true, value_name = "QUERY")]
    pub query: Vec<String>,

    /// Output format.
    #[arg(long, env = "NODE_DOCTOR_FORMAT", value_enum, default_value = "table")]
    pub format: Format,

    /// Language of the explanation.
    #[arg(long, env = "NODE_DOCTOR_LANG", value_enum, default_value = "en")]
    pub lang: LangArg,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "NODE_DOCTOR_LISTEN",
        default_value = "0.0.0.0:9808",
        value_name = "ADDR"
    )]
    pub listen: SocketAddr,

    /// How often every collector runs.
    #[arg(long, env = "NODE_DOCTOR_INTERVAL", default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Per-collector interval, e.g. disk=60s (repeat, or comma-separated).
    #[arg(
        long = "collector-interval",
        env = "NODE_DOCTOR_COLLECTOR_INTERVAL",
        value_delimiter = ',',
        value_parser = parse_named_duration,
        value_name = "NAME=DURATION"
    )]
    pub collector_intervals: Vec<(String, Duration)>,

    /// File holding a bearer token (one line, at least 16 bytes, re-read on SIGHUP); when
    /// set, /findings, /metrics, /explain and / require "Authorization: Bearer <token>"
    /// (/healthz and /readyz stay open).
    #[arg(long, env = "NODE_DOCTOR_AUTH_TOKEN_FILE", value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// Base URL of the rule pages that NodeConditions, Events and the alerts link to
    /// (<URL>/rules/<id>): a mirror of the agent's /rules pages, or an agent behind a Service
    /// or Ingress that people reach (the pages are the same on every node and need no
    /// token). Unset or empty: they link to this agent's own page (the pod IP from $POD_IP,
    /// else the listen address) and name `node-doctor explain <id>`.
    #[arg(long = "docs-url", env = "NODE_DOCTOR_DOCS_URL", default_value = "", value_parser = parse_docs_url, value_name = "URL")]
    pub docs_url: String,

    #[command(flatten)]
    pub kube: KubeFlags,
}

fn parse_docs_url(s: &str) -> Result<String, String> {
    crate::links::Links::docs_url(s).map(Option::unwrap_or_default)
}

/// The Kubernetes reporter (docs/kubernetes.md): findings as NodeConditions and Events.
#[derive(Debug, Args)]
pub struct KubeFlags {
    /// Report findings to the Kubernetes API server as NodeConditions and Events about this
    /// node (off by default; the DaemonSet turns it on). The cluster is found through
    /// KUBECONFIG, else the in-cluster ServiceAccount.
    #[arg(long = "kube-report", env = "NODE_DOCTOR_KUBE_REPORT")]
    pub report: bool,

    /// Also use node-problem-detector's names where one fits (ReadonlyFilesystem,
    /// KernelDeadlock, ContainerRuntimeUnhealthy, KubeletUnhealthy; events OOMKilling,
    /// TaskHung, Ext4Error, ConntrackFull). Off by default: NPD may run on the same node.
    #[arg(
        long = "kube-npd-names",
        env = "NODE_DOCTOR_KUBE_NPD_NAMES",
        conflicts_with = "names"
    )]
    pub npd_names: bool,

    /// Which condition names to write: `node-doctor` (its own NodeDoctor… types, the
    /// default), `npd` (node-problem-detector's where one fits; the same as
    /// --kube-npd-names), or `nma` (the EKS node monitoring agent's StorageReady, KernelReady,
    /// ContainerRuntimeReady, NetworkingReady, AcceleratedHardwareReady for repair-worthy
    /// problems, False when unhealthy, so Karpenter and EKS node auto repair act on them;
    /// refused where that agent runs on the node or another writer owns those types).
    #[arg(long = "kube-names", env = "NODE_DOCTOR_KUBE_NAMES", value_parser = parse_naming, value_name = "NAMING")]
    pub names: Option<crate::kube::classes::Naming>,

    /// Rewrite unchanged conditions (a heartbeat) this often, plus up to 10% jitter; at least 5m.
    #[arg(long = "kube-heartbeat", env = "NODE_DOCTOR_KUBE_HEARTBEAT", default_value = "5m", value_parser = parse_heartbeat, value_name = "DURATION")]
    pub heartbeat: Duration,

    /// A condition clears (False) once its problem has been gone this long.
    #[arg(long = "kube-clear-after", env = "NODE_DOCTOR_KUBE_CLEAR_AFTER", default_value = "2m", value_parser = parse_duration_or_zero, value_name = "DURATION")]
    pub clear_after: Duration,

    /// Status writes are at least this far apart; changes in between are written together.
    #[arg(long = "kube-write-interval", env = "NODE_DOCTOR_KUBE_WRITE_INTERVAL", default_value = "10s", value_parser = parse_duration_or_zero, value_name = "DURATION")]
    pub min_write_interval: Duration,

    /// How long one request to the API server may take.
    #[arg(long = "kube-request-timeout", env = "NODE_DOCTOR_KUBE_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
}

impl KubeFlags {
    /// The names written: `--kube-names`, else `--kube-npd-names`, else node-doctor's own.
    pub fn naming(&self) -> crate::kube::classes::Naming {
        self.names
            .unwrap_or(crate::kube::classes::Naming::npd(self.npd_names))
    }

    pub fn config(&self, links: crate::links::Links) -> crate::kube::Config {
        crate::kube::Config {
            naming: self.naming(),
            heartbeat: self.heartbeat,
            clear_after: self.clear_after,
            min_write_interval: self.min_write_interval,
            request_timeout: self.request_timeout,
            tick: Duration::from_secs(1),
            links,
        }
    }
}

fn parse_naming(s: &str) -> Result<crate::kube::classes::Naming, String> {
    use crate::kube::classes::Naming;
    match s.trim() {
        "node-doctor" | "own" => Ok(Naming::Own),
        "npd" => Ok(Naming::Npd),
        "nma" => Ok(Naming::Nma),
        other => Err(format!("{other:?}: one of node-doctor, npd, nma")),
    }
}

/// A duration that may be zero (`0`, `0s`): no hold-down, no spacing.
fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    match s.trim() {
        "0" | "0s" | "0ms" => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
}

fn parse_heartbeat(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(300) {
        return Err(format!(
            "{s:?}: at least 5m (one status write per node per 5 minutes keeps a large cluster's API server quiet)"
        ));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Output format: a table for a person, or the /findings JSON document.
    #[arg(long, env = "NODE_DOCTOR_FORMAT", value_enum, default_value = "table")]
    pub format: Format,

    /// Time between the two samples (rates need two).
    #[arg(long, env = "NODE_DOCTOR_INTERVAL", default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Language of titles, summaries and remediation steps.
    #[arg(long, env = "NODE_DOCTOR_LANG", value_enum, default_value = "en")]
    pub lang: LangArg,
}

impl ExplainArgs {
    /// Takes `--format X`, `--format=X`, `--lang X` and `--lang=X` that follow the query out of
    /// its words (clap hands everything after the first word to the query, so that pasted
    /// text with `-w` in it still parses). Unknown values are usage errors.
    pub fn normalized(mut self) -> Result<ExplainArgs, String> {
        let mut words = Vec::with_capacity(self.query.len());
        let mut it = std::mem::take(&mut self.query).into_iter();
        while let Some(w) = it.next() {
            let (flag, inline) = match w.split_once('=') {
                Some((f, v)) if f == "--format" || f == "--lang" => {
                    (f.to_string(), Some(v.to_string()))
                }
                _ if w == "--format" || w == "--lang" => (w.clone(), None),
                _ => {
                    words.push(w);
                    continue;
                }
            };
            let value = inline
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value"))?;
            if flag == "--format" {
                self.format = Format::from_str(&value, true)
                    .map_err(|_| format!("--format {value:?}: use table or json"))?;
            } else {
                self.lang = LangArg::from_str(&value, true)
                    .map_err(|_| format!("--lang {value:?}: use en or zh"))?;
            }
        }
        if words.iter().all(|w| w.trim().is_empty()) {
            return Err(EMPTY_QUERY.into());
        }
        self.query = words;
        Ok(self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    Zh,
}

impl From<LangArg> for collectors::Lang {
    fn from(l: LangArg) -> Self {
        match l {
            LangArg::En => collectors::Lang::En,
            LangArg::Zh => collectors::Lang::Zh,
        }
    }
}

fn parse_named_duration(s: &str) -> Result<(String, Duration), String> {
    let (name, d) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=DURATION, e.g. disk=60s"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: missing collector name"));
    }
    Ok((name.to_string(), parse_duration(d)?))
}

fn parse_log_level(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag the registry says configures a collector is a flag of this command line
    /// (the registry's list is what the collectors' docs pages are checked against).
    #[test]
    fn the_registry_names_real_flags() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let longs: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for e in collectors::registry::COLLECTORS {
            for flag in e.flags {
                assert!(
                    longs.iter().any(|l| l == flag),
                    "{}: {flag} is not a flag",
                    e.name
                );
            }
        }
    }

    #[test]
    fn check_reads_the_load_collectors_processes_only_at_the_rules_limits() {
        let serve = default_options();
        let check = for_check(default_options());
        let (s, c) = (&serve.load.thresholds, &check.load.thresholds);
        assert_eq!(s.escalation.iowait_share, 0.5);
        assert_eq!(c.escalation, s.escalation.at_the_limits());
        assert_eq!(c.escalation.psi_some_avg10_percent, f64::INFINITY);
        // The first sample takes its baseline at serve's bars for the IO signs.
        assert_eq!(s.escalation.baseline, None);
        let first = c
            .escalation
            .baseline
            .expect("check's first sample has baseline bars");
        assert_eq!(
            first.psi_io_some_avg10_percent,
            s.escalation.psi_some_avg10_percent
        );
        let rest = collectors::load::Thresholds {
            escalation: s.escalation.clone(),
            ..c.clone()
        };
        assert_eq!(&rest, s, "only the bars change");
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("node-doctor").chain(args.iter().copied()))
    }

    #[test]
    fn kube_names_choose_the_naming_and_npd_names_still_work() {
        use crate::kube::classes::Naming;
        let naming = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Serve(s)) => Ok(s.kube.naming()),
            Ok(_) => panic!("serve"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(crate::kube::EXIT_REFUSED, EXIT_USAGE);
        assert_eq!(naming(&["serve"]), Ok(Naming::Own));
        assert_eq!(naming(&["serve", "--kube-npd-names"]), Ok(Naming::Npd));
        assert_eq!(naming(&["serve", "--kube-names", "npd"]), Ok(Naming::Npd));
        assert_eq!(naming(&["serve", "--kube-names=nma"]), Ok(Naming::Nma));
        assert_eq!(
            naming(&["serve", "--kube-names", "node-doctor"]),
            Ok(Naming::Own)
        );
        assert!(naming(&["serve", "--kube-names", "eks"]).is_err());
        assert!(
            naming(&["serve", "--kube-npd-names", "--kube-names", "nma"]).is_err(),
            "two namings at once is a usage error"
        );
    }

    #[test]
    fn defaults() {
        let cli = parse(&["serve"]).unwrap();
        assert_eq!(cli.host_root, PathBuf::from("/"));
        match cli.command {
            Command::Serve(s) => {
                assert_eq!(s.listen, "0.0.0.0:9808".parse().unwrap());
                assert_eq!(s.interval, Duration::from_secs(15));
                assert!(s.auth_token_file.is_none());
                assert!(!s.kube.report, "the reporter is off unless asked for");
                assert!(!s.kube.npd_names);
                assert_eq!(s.kube.heartbeat, Duration::from_secs(300));
                assert_eq!(s.kube.clear_after, Duration::from_secs(120));
                assert_eq!(s.kube.min_write_interval, Duration::from_secs(10));
            }
            _ => panic!("serve"),
        }
        let cli = parse(&["check"]).unwrap();
        match cli.command {
            Command::Check(c) => {
                assert_eq!(c.format, Format::Table);
                assert_eq!(c.interval, Duration::from_secs(1));
                assert_eq!(c.lang, LangArg::En);
            }
            _ => panic!("check"),
        }
    }

    #[test]
    fn flags_parse() {
        let cli = parse(&[
            "serve",
            "--host-root",
            "/host",
            "--collector",
            "disk,load",
            "--collector",
            "memory",
            "--collector-interval",
            "disk=60s",
            "--collector-timeout",
            "2s",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.collectors, vec!["disk", "load", "memory"]);
        assert_eq!(cli.collector_timeout, Some(Duration::from_secs(2)));
        match cli.command {
            Command::Serve(s) => assert_eq!(
                s.collector_intervals,
                vec![("disk".to_string(), Duration::from_secs(60))]
            ),
            _ => panic!("serve"),
        }
    }

    #[test]
    fn collector_flags_reach_the_collectors_configs() {
        let cli = parse(&[
            "check",
            "--kmsg-lookback",
            "10m",
            "--iowait-percent",
            "2,12,40",
            "--xtables-hold",
            "1s,3s",
            "--xtables-lock",
            "/var/run/xtables.lock",
            "--conntrack-table-percent",
            "70,85",
            "--conntrack-netns-pid",
            "42",
            "--kubelet-config",
            "/etc/kubernetes/kubelet.yaml",
            "--docker-socket",
            "/run/d/docker.sock",
            "--runtime-probe-timeout",
            "500ms",
            "--net-interfaces",
            "bond0.100,macvlan0",
        ])
        .unwrap();
        let o = cli.tuning.options();
        assert_eq!(o.net.interfaces, ["bond0.100", "macvlan0"]);
        assert_eq!(o.memory.kmsg.lookback, Duration::from_secs(600));
        assert_eq!(o.conntrack.kmsg.lookback, Duration::from_secs(600));
        assert_eq!(o.kernel.kmsg.lookback, Duration::from_secs(600));
        assert_eq!(o.hardware.kmsg.lookback, Duration::from_secs(600));
        assert_eq!(o.net.kmsg.lookback, Duration::from_secs(600));
        assert_eq!(
            (
                o.load.thresholds.iowait_info_percent,
                o.load.thresholds.iowait_warning_percent,
                o.load.thresholds.iowait_critical_percent
            ),
            (2.0, 12.0, 40.0)
        );
        assert_eq!(o.iptables.thresholds.hold_warning, Duration::from_secs(1));
        assert_eq!(o.iptables.thresholds.hold_critical, Duration::from_secs(3));
        assert_eq!(o.iptables.lock_path, PathBuf::from("/var/run/xtables.lock"));
        assert_eq!(
            (
                o.conntrack.thresholds.table_warning_percent,
                o.conntrack.thresholds.table_critical_percent
            ),
            (70.0, 85.0)
        );
        assert_eq!(o.conntrack.netns_pid, 42);
        assert_eq!(
            o.disk.runtime.kubelet_config.as_deref(),
            Some("/etc/kubernetes/kubelet.yaml")
        );
        assert_eq!(o.kernel.runtime, o.disk.runtime);
        assert_eq!(o.runtime.locations, o.disk.runtime);
        assert_eq!(
            o.runtime.docker_socket.as_deref(),
            Some("/run/d/docker.sock")
        );
        assert_eq!(o.runtime.containerd_socket, None);
        assert_eq!(o.runtime.probe_timeout, Duration::from_millis(500));
        assert_eq!(
            o.conntrack.kubelet_config,
            PathBuf::from("/etc/kubernetes/kubelet.yaml")
        );
        // Defaults equal the collectors' own defaults.
        let d = parse(&["check"]).unwrap().tuning.options();
        let base = super::default_options();
        assert_eq!(
            d.load.thresholds.iowait_warning_percent,
            base.load.thresholds.iowait_warning_percent
        );
        assert_eq!(d.iptables.lock_path, base.iptables.lock_path);
        assert_eq!(
            d.iptables.thresholds.hold_critical,
            base.iptables.thresholds.hold_critical
        );
        assert_eq!(
            d.conntrack.nodelocal_dns_address,
            base.conntrack.nodelocal_dns_address
        );
        assert_eq!(d.memory.kmsg, base.memory.kmsg);
        assert_eq!(d.disk.runtime, base.disk.runtime);
        assert_eq!(d.disk.walk_budget_entries, base.disk.walk_budget_entries);
        assert_eq!(d.runtime, base.runtime);
        assert_eq!(d.reach, base.reach);
        assert_eq!(d.dns, base.dns);
        assert!(d.reach.probes && d.dns.probes);
        let off = parse(&[
            "check",
            "--no-probes",
            "--dns-probe-timeout",
            "500ms",
            "--kubelet-kubeconfig",
            "/etc/kubernetes/bootstrap.conf",
        ])
        .unwrap()
        .tuning
        .options();
        assert!(!off.reach.probes && !off.dns.probes);
        assert_eq!(off.dns.try_timeout, Duration::from_millis(500));
        assert_eq!(off.reach.kubeconfig, "/etc/kubernetes/bootstrap.conf");
    }

    #[test]
    fn explain_takes_hyphenated_and_multi_word_queries() {
        let cli = parse(&["explain", "-1"]).unwrap();
        match cli.command {
            Command::Explain(e) => assert_eq!(e.query, vec!["-1"]),
            _ => panic!("explain"),
        }
        let cli = parse(&["explain", "--lang", "zh", "Another", "app", "is"]).unwrap();
        match cli.command {
            Command::Explain(e) => {
                assert_eq!(e.query.join(" "), "Another app is");
                assert_eq!(e.lang, LangArg::Zh);
            }
            _ => panic!("explain"),
        }
        // Flags after the query are flags, not words of the query; other hyphenated words
        // (a pasted "use the -w option") stay in the query.
        let cli = parse(&["explain", "137", "--format", "json", "--lang=zh"]).unwrap();
        match cli.command {
            Command::Explain(e) => {
                let e = e.normalized().unwrap();
                assert_eq!(e.query, vec!["137"]);
                assert_eq!(e.format, Format::Json);
                assert_eq!(e.lang, LangArg::Zh);
            }
            _ => panic!("explain"),
        }
        let cli = parse(&["explain", "use", "the", "-w", "option", "--format"]).unwrap();
        match cli.command {
            Command::Explain(e) => assert!(e.normalized().is_err()),
            _ => panic!("explain"),
        }
        let cli = parse(&["explain", "use", "the", "-w", "option", "--lang", "fr"]).unwrap();
        match cli.command {
            Command::Explain(e) => assert!(e.normalized().is_err()),
            _ => panic!("explain"),
        }
        let cli = parse(&["explain", "use", "the", "-w", "option"]).unwrap();
        match cli.command {
            Command::Explain(e) => {
                assert_eq!(e.normalized().unwrap().query.join(" "), "use the -w option")
            }
            _ => panic!("explain"),
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for args in [
            &["check", "--format", "xml"][..],
            &["check", "--interval", "soon"],
            &["serve", "--listen", "nowhere"],
            &["serve", "--collector-interval", "disk"],
            &["check", "--log-level", "a=b=c"],
            &["frobnicate"],
            &[],
            &["check", "--iowait-percent", "10,1,30"],
            &["check", "--iowait-percent", "1,10"],
            &["check", "--conntrack-table-percent", "75,190"],
            &["check", "--xtables-hold", "5s,2s"],
            &["serve", "--kube-heartbeat", "1m"],
            &["check", "--kube-report"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
        // explain with nothing (or blanks) to explain: node-doctor's own message.
        for args in [
            &["explain"][..],
            &["explain", ""],
            &["explain", "  ", ""],
            &["explain", "--"],
        ] {
            match parse(args).map(|c| c.command) {
                Ok(Command::Explain(e)) => {
                    assert_eq!(e.normalized().unwrap_err(), EMPTY_QUERY, "{args:?}")
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
