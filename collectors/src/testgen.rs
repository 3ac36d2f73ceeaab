//! Generators shared by the readers' well-formed-input properties: each reader's test module
//! builds typed values from these, renders them the way the kernel prints them, parses the
//! text and compares. Random text (`\PC*`) seldom gets past a parser's first check; these
//! inputs exercise the path that reads valid files.

use proptest::prelude::*;

/// A kernel object name as `/proc` prints it: devices (`vda1`, `nvme0n1p2`, `dm-0`), zones,
/// interfaces. Starts with a letter, no spaces.
pub fn kernel_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,11}"
}

/// A fixed-point value the kernel prints as `%lu.%02lu` (load averages, PSI averages,
/// uptime), held as hundredths so the expected `f64` is exact to compare.
pub fn hundredths(max_whole: u64) -> impl Strategy<Value = u64> {
    0..=max_whole * 100 + 99
}

/// `%lu.%02lu` of a value in hundredths.
pub fn fmt_hundredths(h: u64) -> String {
    format!("{}.{:02}", h / 100, h % 100)
}

/// What a parser that reads `%lu.%02lu` into an `f64` should return for it.
pub fn hundredths_f64(h: u64) -> f64 {
    h as f64 / 100.0
}

/// A counter name as `/proc` tables print them (`nr_free_pages`, `pgmajfault`).
pub fn kernel_key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,23}"
}

/// Per-CPU statistics rows as `net/*` statistics files print them: one line per CPU, every
/// column `%08x` (wider values print in full, as `%08lx` does).
pub fn hex_rows(rows: &[Vec<u64>]) -> String {
    let mut text = String::new();
    for row in rows {
        let cols: Vec<String> = row.iter().map(|v| format!("{v:08x}")).collect();
        text += &cols.join(" ");
        text.push('\n');
    }
    text
}

/// A `net/stat/*` table: the header line naming the columns, then [`hex_rows`].
pub fn hex_cpu_table(header: &str, rows: &[Vec<u64>]) -> String {
    format!("{header}\n{}", hex_rows(rows))
}

/// An address as `/proc/net/{tcp,udp}{,6}` print it: each 32-bit word of the network-order
/// address as `%08X` of the word the host reads (bytes swapped on little-endian), `:%04X` port.
pub fn proc_net_address(a: std::net::SocketAddr) -> String {
    let words = |b: &[u8]| -> String {
        b.chunks_exact(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect()
    };
    let ip = match a.ip() {
        std::net::IpAddr::V4(v4) => words(&v4.octets()),
        std::net::IpAddr::V6(v6) => words(&v6.octets()),
    };
    format!("{ip}:{:04X}", a.port())
}

/// A socket address of one family (`v6`): any address and port, no flow or scope.
pub fn socket_addr(v6: bool) -> BoxedStrategy<std::net::SocketAddr> {
    if v6 {
        (any::<std::net::Ipv6Addr>(), any::<u16>())
            .prop_map(|(ip, port)| std::net::SocketAddr::new(ip.into(), port))
            .boxed()
    } else {
        (any::<std::net::Ipv4Addr>(), any::<u16>())
            .prop_map(|(ip, port)| std::net::SocketAddr::new(ip.into(), port))
            .boxed()
    }
}

/// One line of `/proc/net/{tcp,udp}{,6}` up to the inode (`%5d: %s %s %02X %08X:%08X
/// %02X:%08lX %08X %5u %8d %lu`), then `tail`, the protocol's own columns.
pub fn proc_net_socket_line(
    sl: u32,
    (local, remote): (std::net::SocketAddr, std::net::SocketAddr),
    state: u8,
    (uid, inode): (u32, u64),
    tail: &str,
) -> String {
    format!(
        "{sl:5}: {} {} {state:02X} 00000000:00000000 00:00000000 00000000 {uid:5} {:8} {inode} {tail}\n",
        proc_net_address(local),
        proc_net_address(remote),
        0,
    )
}

/// A task's `comm` (at most 15 bytes) in the shapes kernel threads and daemons give it:
/// `kworker/u8:2`, `jbd2/vda1-8`, `runc:[1:CHILD]`, `mysqld`.
pub fn comm() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.-]{1,6}([/:][a-z0-9.-]{1,4}){0,2}|runc:\\[[0-2]:(PARENT|CHILD)\\]"
}

/// A block device name as the drivers make them (`sda1`, `vdb`, `nvme0n1p2`, `dm-0`, `loop3`).
pub fn block_device() -> impl Strategy<Value = String> {
    "(sd|vd|xvd)[a-z][0-9]{0,2}|nvme[0-9]n[1-9](p[1-9])?|dm-[0-9]{1,2}|loop[0-9]{1,2}|md[0-9]{1,3}"
}

/// An RFC 3339 timestamp of Unix second `t` in the fixed zone `offset_hours`, with `frac`
/// (`""`, `".123"`, `".123456789"`) after the seconds and `Z` for UTC when `zulu`.
pub fn rfc3339(t: i64, frac: &str, offset_hours: i8, zulu: bool) -> String {
    let tz = jiff::tz::TimeZone::fixed(jiff::tz::offset(offset_hours));
    let dt = jiff::Timestamp::from_second(t)
        .map_or_else(|_| jiff::civil::DateTime::ZERO, |ts| tz.to_datetime(ts));
    let zone = if zulu && offset_hours == 0 {
        "Z".to_string()
    } else {
        let sign = if offset_hours < 0 { '-' } else { '+' };
        format!("{sign}{:02}:00", offset_hours.unsigned_abs())
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{frac}{zone}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
    )
}

/// A DNS-1123 label as Kubernetes names namespaces and containers (`kube-system`, `app2`).
pub fn dns_label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?"
}

/// A DNS-1123 subdomain as Kubernetes names pods (`coredns-5d78c9869d-x7k2p`, `web.v2`).
pub fn dns_subdomain() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?){0,2}"
}

/// A pod UID as the API server makes it (`8-4-4-4-12` hex) or as the kubelet writes a static
/// pod's (32 hex digits, no dashes).
pub fn pod_uid() -> impl Strategy<Value = String> {
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"
}

/// A container id: 64 hex digits.
pub fn container_id() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

/// A duration as Go's `time.Duration.String()` prints it, of `quarter_secs` quarters of a
/// second (quarters, so the value read back through an `f64` is exact): `0s`, `250ms`,
/// `1.5s`, `1m30.25s`, `2h0m0s`.
pub fn go_duration_string(quarter_secs: u64) -> String {
    let (secs, q) = (quarter_secs / 4, quarter_secs % 4);
    if secs == 0 {
        return if q == 0 {
            "0s".into()
        } else {
            format!("{}ms", q * 250)
        };
    }
    let frac = ["", ".25", ".5", ".75"][q as usize];
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}{frac}s"),
        (0, _) => format!("{m}m{s}{frac}s"),
        _ => format!("{h}h{m}m{s}{frac}s"),
    }
}

/// The keys of a `KubeProxyConfiguration` the collectors read (`healthzBindAddress`, `mode`,
/// `conntrack.maxPerCore`/`min`, `ipvs.syncPeriod`/`minSyncPeriod`), each unset when `None`.
#[derive(Debug, Clone)]
pub struct KubeProxyFile {
    pub healthz: Option<String>,
    pub mode: Option<String>,
    pub max_per_core: Option<u64>,
    pub conntrack_min: Option<u64>,
    /// In quarters of a second, see [`go_duration_string`].
    pub sync_period: Option<u64>,
    pub min_sync_period: Option<u64>,
}

/// A [`KubeProxyFile`] with any of its keys set.
pub fn kube_proxy_file() -> impl Strategy<Value = KubeProxyFile> {
    let quarters = proptest::option::of(0u64..4 * 86_400);
    (
        proptest::option::of(
            (socket_addr(false), socket_addr(true), any::<bool>())
                .prop_map(|(a4, a6, v6)| if v6 { a6 } else { a4 }.to_string()),
        ),
        proptest::option::of("iptables|ipvs|nftables"),
        proptest::option::of(0u64..=1 << 40),
        proptest::option::of(0u64..=1 << 40),
        quarters.clone(),
        quarters,
    )
        .prop_map(
            |(healthz, mode, max_per_core, conntrack_min, sync_period, min_sync_period)| {
                KubeProxyFile {
                    healthz,
                    mode,
                    max_per_core,
                    conntrack_min,
                    sync_period,
                    min_sync_period,
                }
            },
        )
}

/// How a [`KubeProxyFile`] is written: kubeadm's YAML (keys sorted, blocks indented two
/// spaces, strings quoted or not, a comment after a value), the same with flow maps and
/// four-space indents, or JSON (`kubectl get -o json`).
#[derive(Debug, Clone, Copy)]
pub enum KubeProxyShape {
    Yaml { quoted: bool, comments: bool },
    YamlFlow,
    Json,
}

/// Any [`KubeProxyShape`].
pub fn kube_proxy_shape() -> impl Strategy<Value = KubeProxyShape> {
    prop_oneof![
        (any::<bool>(), any::<bool>())
            .prop_map(|(quoted, comments)| KubeProxyShape::Yaml { quoted, comments }),
        Just(KubeProxyShape::YamlFlow),
        Just(KubeProxyShape::Json),
    ]
}

impl KubeProxyFile {
    /// The file's text in `shape`, with the keys kubeadm writes around ours.
    pub fn render(&self, shape: KubeProxyShape) -> String {
        let dur = |q: Option<u64>| q.map(go_duration_string);
        match shape {
            KubeProxyShape::Json => {
                let mut v = serde_json::json!({
                    "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                    "kind": "KubeProxyConfiguration",
                    "bindAddress": "0.0.0.0",
                    "clientConnection": {"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"},
                    "iptables": {"syncPeriod": "30s", "minSyncPeriod": "1s"},
                    "conntrack": {"tcpEstablishedTimeout": "24h0m0s"},
                    "ipvs": {"scheduler": ""},
                });
                let set = |v: &mut serde_json::Value, path: &[&str], x: serde_json::Value| {
                    let mut at = v;
                    for p in &path[..path.len() - 1] {
                        at = &mut at[*p];
                    }
                    at[path[path.len() - 1]] = x;
                };
                if let Some(h) = &self.healthz {
                    set(&mut v, &["healthzBindAddress"], h.clone().into());
                }
                if let Some(m) = &self.mode {
                    set(&mut v, &["mode"], m.clone().into());
                }
                if let Some(n) = self.max_per_core {
                    set(&mut v, &["conntrack", "maxPerCore"], n.into());
                }
                if let Some(n) = self.conntrack_min {
                    set(&mut v, &["conntrack", "min"], n.into());
                }
                if let Some(d) = dur(self.sync_period) {
                    set(&mut v, &["ipvs", "syncPeriod"], d.into());
                }
                if let Some(d) = dur(self.min_sync_period) {
                    set(&mut v, &["ipvs", "minSyncPeriod"], d.into());
                }
                serde_json::to_string_pretty(&v).unwrap_or_default()
            }
            KubeProxyShape::Yaml { quoted, comments } => {
                let q = |s: &str| {
                    if quoted {
                        format!("\"{s}\"")
                    } else {
                        s.to_string()
                    }
                };
                let c = if comments {
                    "   # set by the installer"
                } else {
                    ""
                };
                let mut t = String::from(
                    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nbindAddress: 0.0.0.0\n",
                );
                t += "clientConnection:\n  acceptContentTypes: \"\"\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n";
                t += "conntrack:\n";
                if let Some(n) = self.max_per_core {
                    t += &format!("  maxPerCore: {n}{c}\n");
                }
                if let Some(n) = self.conntrack_min {
                    t += &format!("  min: {n}\n");
                }
                t += "  tcpCloseWaitTimeout: 1h0m0s\n";
                if let Some(h) = &self.healthz {
                    // A YAML writer quotes what would read as a flow list (`[::]:10256`).
                    let h = if h.starts_with('[') {
                        format!("\"{h}\"")
                    } else {
                        q(h)
                    };
                    t += &format!("healthzBindAddress: {h}{c}\n");
                }
                t += "iptables:\n  masqueradeAll: false\n  syncPeriod: 30s\nipvs:\n  excludeCIDRs: null\n";
                if let Some(d) = dur(self.min_sync_period) {
                    t += &format!("  minSyncPeriod: {}{c}\n", q(&d));
                }
                t += "  scheduler: \"\"\n";
                if let Some(d) = dur(self.sync_period) {
                    t += &format!("  syncPeriod: {}\n", q(&d));
                }
                t += "kind: KubeProxyConfiguration\nmetricsBindAddress: \"\"\n";
                if let Some(m) = &self.mode {
                    t += &format!("mode: {}{c}\n", q(m));
                }
                t += "nodePortAddresses: null\n";
                t
            }
            KubeProxyShape::YamlFlow => {
                let mut t = String::from("kind: KubeProxyConfiguration\n");
                let mut ct = vec!["tcpEstablishedTimeout: 24h0m0s".to_string()];
                if let Some(n) = self.max_per_core {
                    ct.push(format!("maxPerCore: {n}"));
                }
                if let Some(n) = self.conntrack_min {
                    ct.push(format!("min: {n}"));
                }
                t += &format!("conntrack: {{{}}}\n", ct.join(", "));
                if let Some(h) = &self.healthz {
                    t += &format!("healthzBindAddress: '{h}'\n");
                }
                t += "ipvs:\n    strictARP: true\n";
                if let Some(d) = dur(self.sync_period) {
                    t += &format!("    syncPeriod: {d}\n");
                }
                if let Some(d) = dur(self.min_sync_period) {
                    t += &format!("    minSyncPeriod: '{d}'\n");
                }
                if let Some(m) = &self.mode {
                    t += &format!("mode: {m}\n");
                }
                t
            }
        }
    }
}
