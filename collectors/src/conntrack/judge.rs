//! The conntrack rules: typed sample (+ deltas from the previous sample) -> findings.
//!
//! Everything here is pure: no files, no clock. The collector builds a [`Sample`], computes
//! [`Deltas`] against its previous sample and counts how many consecutive samples showed
//! races; the rules and their remediation text live below, each beside its rule.

use std::net::SocketAddr;

use crate::cmd;
use crate::explain::see_also;
use crate::finding::{Finding, Severity, Text, HANDBOOK};
use crate::proc::nf_conntrack_stat::NfConntrackStat;
use crate::proc::snmp::UdpCounters;

use super::ConntrackConfig;

/// The handbook section behind both rules (the 5-second delay and its conntrack cause).
pub const SECTION: &str = "集群 DNS 解析异常排障处理";

/// Rule id: insert_failed/drop rising (the 5-second DNS delay).
pub const INSERT_RACES: &str = "conntrack.insert_races";
/// Rule id: the table is (nearly) full.
pub const TABLE_FULL: &str = "conntrack.table_full";

/// Approximate kernel memory per conntrack entry (`struct nf_conn` slab object, x86-64),
/// used to price the recommended `nf_conntrack_max`.
pub const BYTES_PER_ENTRY: u64 = 300;

/// One sample of the host namespace's conntrack state and the DNS facts around it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// `/proc/<pid>/net/stat/nf_conntrack`, summed across CPUs.
    pub stat: NfConntrackStat,
    /// `nf_conntrack_max` (global).
    pub max: Option<u64>,
    /// `nf_conntrack_buckets` (global).
    pub buckets: Option<u64>,
    /// `MemTotal` in bytes, for sizing advice.
    pub mem_total_bytes: Option<u64>,
    /// `Udp:` counters of `/proc/<pid>/net/snmp`.
    pub udp: Option<UdpCounters>,
    /// Whether a UDP socket listens on the node-local DNS address (`None`: unknown).
    pub nodelocal_dns: Option<bool>,
    /// The kubelet's `--cluster-dns` / `clusterDNS` (empty: unknown).
    pub cluster_dns: Vec<String>,
    /// Pods the kubelet has on this node (`/var/lib/kubelet/pods` entries), best effort.
    pub pods_on_node: Option<u64>,
    /// "table full, dropping packet" kernel messages counted by the kernel-log reader
    /// (`None` when no reader is wired in or it could not read the log).
    pub table_full_messages: Option<u64>,
}

impl Sample {
    /// Table fill in percent of `nf_conntrack_max`.
    pub fn used_percent(&self) -> Option<f64> {
        let max = self.max.filter(|m| *m > 0)?;
        Some(self.stat.entries as f64 * 100.0 / max as f64)
    }
}

/// Counter increases between two samples and the time between them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Deltas {
    pub elapsed_seconds: f64,
    pub insert_failed: u64,
    pub drop: u64,
    pub early_drop: u64,
    /// `clashres` (kernels that resolve UDP clashes count it); `None` when not printed.
    pub clash_resolve: Option<u64>,
    pub search_restart: Option<u64>,
    pub invalid: Option<u64>,
}

impl Deltas {
    /// Increases from `prev` to `cur`; a counter that went down (module reload) counts 0.
    pub fn between(prev: &NfConntrackStat, cur: &NfConntrackStat, elapsed_seconds: f64) -> Deltas {
        let d = |name: &str| match (prev.get(name), cur.get(name)) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Deltas {
            elapsed_seconds,
            insert_failed: d("insert_failed").unwrap_or(0),
            drop: d("drop").unwrap_or(0),
            early_drop: d("early_drop").unwrap_or(0),
            clash_resolve: d("clashres"),
            search_restart: d("search_restart"),
            invalid: d("invalid"),
        }
    }

    /// A per-second rate of one increase (0 when no time passed).
    pub fn rate(&self, increase: u64) -> f64 {
        if self.elapsed_seconds > 0.0 {
            increase as f64 / self.elapsed_seconds
        } else {
            0.0
        }
    }

    /// True when this interval lost insert races (insert_failed or drop rose).
    pub fn has_races(&self) -> bool {
        self.insert_failed > 0 || self.drop > 0
    }
}

/// Judges one sample. `deltas` is `None` on the first sample; `race_streak` is the number of
/// consecutive samples, this one included, whose deltas had races.
pub fn judge(
    sample: &Sample,
    deltas: Option<&Deltas>,
    race_streak: u32,
    config: &ConntrackConfig,
    node: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(d) = deltas {
        if d.has_races() {
            out.push(insert_races(sample, d, race_streak, config, node));
        }
    }
    if let Some(f) = table_full(sample, deltas, config) {
        out.push(f);
    }
    out
}

fn yes_no_unknown(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

/// What the node-local DNS situation means for the advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocalDns {
    /// No cache listens on the local address.
    Absent,
    /// A cache listens and the kubelet points pods at it.
    InUse,
    /// A cache listens but the kubelet hands pods another server.
    NotWired,
    /// A cache listens; the kubelet's setting is unknown.
    PresentUnknownWiring,
    /// We could not tell.
    Unknown,
}

fn local_dns(sample: &Sample, addr: &SocketAddr) -> LocalDns {
    let ip = addr.ip().to_string();
    match sample.nodelocal_dns {
        Some(false) => LocalDns::Absent,
        None => LocalDns::Unknown,
        Some(true) if sample.cluster_dns.is_empty() => LocalDns::PresentUnknownWiring,
        Some(true) if sample.cluster_dns.contains(&ip) => LocalDns::InUse,
        Some(true) => LocalDns::NotWired,
    }
}

/// `conntrack.insert_races`: insert_failed (or drop) rose between samples.
fn insert_races(
    sample: &Sample,
    d: &Deltas,
    streak: u32,
    config: &ConntrackConfig,
    node: &str,
) -> Finding {
    let stat = &sample.stat;
    let sustained = streak >= config.races_critical_samples;
    let severity = if sustained {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let failed_rate = d.rate(d.insert_failed);
    let drop_rate = d.rate(d.drop);
    let addr = config.nodelocal_dns_address;
    let local = local_dns(sample, &addr);
    let local_en = match local {
        LocalDns::Absent => format!("no node-local DNS cache listens on {addr}"),
        LocalDns::InUse => {
            format!("a node-local DNS cache listens on {addr} and kubelet points pods at it")
        }
        LocalDns::NotWired => format!(
            "a node-local DNS cache listens on {addr} but kubelet points pods at {}",
            sample.cluster_dns.join(",")
        ),
        LocalDns::PresentUnknownWiring => format!("a node-local DNS cache listens on {addr}"),
        LocalDns::Unknown => "whether a node-local DNS cache runs is unknown".to_string(),
    };
    let local_zh = match local {
        LocalDns::Absent => format!("节点上没有本地 DNS 缓存监听 {addr}"),
        LocalDns::InUse => format!("本地 DNS 缓存监听 {addr}，kubelet 也已把 Pod 指向它"),
        LocalDns::NotWired => format!(
            "本地 DNS 缓存监听 {addr}，但 kubelet 仍把 Pod 指向 {}",
            sample.cluster_dns.join(",")
        ),
        LocalDns::PresentUnknownWiring => format!("本地 DNS 缓存监听 {addr}"),
        LocalDns::Unknown => "无法确定是否有本地 DNS 缓存".to_string(),
    };
    let secs = d.elapsed_seconds;
    let summary = Text::new(
        format!(
            "conntrack insert_failed rose by {} ({:.2}/s) and drop by {} ({:.2}/s) in the last {:.1} s \
             (rising in {} consecutive sample(s); critical from {}); UDP DNS queries that lose this race are \
             dropped and the resolver retries only after 5 s; {}.",
            d.insert_failed,
            failed_rate,
            d.drop,
            drop_rate,
            secs,
            streak,
            config.races_critical_samples,
            local_en
        ),
        format!(
            "最近 {:.1} 秒内 conntrack insert_failed 增加 {}（{:.2}/秒），drop 增加 {}（{:.2}/秒），\
             已连续 {} 个采样（达到 {} 个即为严重）；在这种竞争中落败的 UDP DNS 查询被丢弃，\
             解析器要等 5 秒超时后才重试；{}。",
            secs,
            d.insert_failed,
            failed_rate,
            d.drop,
            drop_rate,
            streak,
            config.races_critical_samples,
            local_zh
        ),
    );
    let mut f = Finding::new(
        INSERT_RACES,
        severity,
        Text::new(
            "conntrack insert races: the 5-second DNS delay",
            "conntrack 插入冲突：DNS 解析 5 秒延时",
        ),
        summary,
    )
    .evidence("insert_failed_per_second", failed_rate)
    .evidence("insert_failed_increase", d.insert_failed)
    .evidence(
        "insert_failed_total",
        stat.get("insert_failed").unwrap_or(0),
    )
    .evidence("drop_per_second", drop_rate)
    .evidence("drop_increase", d.drop)
    .evidence("drop_total", stat.get("drop").unwrap_or(0))
    .evidence("early_drop_per_second", d.rate(d.early_drop))
    .evidence("interval_seconds", secs)
    .evidence("consecutive_samples", streak)
    .evidence("critical_after_samples", config.races_critical_samples)
    .evidence(
        "kernel_release",
        sample.kernel_release.as_deref().unwrap_or("unknown"),
    )
    .evidence(
        "nodelocal_dns_listening",
        yes_no_unknown(sample.nodelocal_dns),
    )
    .evidence("nodelocal_dns_address", addr.to_string());
    // Kernels that resolve UDP clashes print `clashres`: report it so the reader sees how
    // many races the kernel already absorbed.
    match (stat.get("clashres"), d.clash_resolve) {
        (Some(total), Some(inc)) => {
            f = f
                .evidence("clash_resolve_total", total)
                .evidence("clash_resolve_per_second", d.rate(inc))
                .evidence("kernel_counts_clash_resolution", "yes");
        }
        _ => f = f.evidence("kernel_counts_clash_resolution", "no"),
    }
    if let Some(v) = d.search_restart {
        f = f.evidence("search_restart_per_second", d.rate(v));
    }
    if let Some(v) = d.invalid {
        f = f.evidence("invalid_per_second", d.rate(v));
    }
    if !sample.cluster_dns.is_empty() {
        f = f.evidence("kubelet_cluster_dns", sample.cluster_dns.join(","));
    }
    if let Some(n) = sample.pods_on_node {
        f = f.evidence("pods_on_node", n);
    }
    if let Some(u) = sample.udp {
        if let Some(v) = u.rcvbuf_errors {
            f = f.evidence("udp_rcvbuf_errors_total", v);
        }
        if let Some(v) = u.in_errors {
            f = f.evidence("udp_in_errors_total", v);
        }
    }

    // Remediation (handbook: 集群 DNS 解析异常排障处理, "5秒延时" and "规避方法").
    let ip = addr.ip();
    f = match local {
        LocalDns::Absent | LocalDns::Unknown => f.step(Text::new(
            format!(
                "Run a DNS cache on every node (NodeLocal DNSCache / LocalDNS, listening on {ip}) and give pods that \
                 address as their nameserver (kubelet clusterDNS). Queries to a cache on the node itself need no DNAT \
                 to the cluster DNS Service, so they create no conntrack entries that can race, and the cluster DNS \
                 stops being a bottleneck."
            ),
            format!(
                "在每个节点运行 DNS 缓存（NodeLocal DNSCache / LocalDNS，监听 {ip}），并把这个地址作为 Pod 的 \
                 nameserver（kubelet 的 clusterDNS）。发往本机缓存的查询不需要 DNAT 到集群 DNS Service，\
                 也就不会产生会发生冲突的 conntrack 记录，集群 DNS 也不再是性能瓶颈。"
            ),
        )),
        LocalDns::NotWired => f.step(Text::new(
            format!(
                "A node-local DNS cache already listens on {ip}, but kubelet still gives pods {} as nameserver, so \
                 their queries still go through DNAT and conntrack. Set kubelet clusterDNS (or --cluster-dns) to {ip} \
                 and recreate the pods, or run the cache in the mode where it also answers on the kube-dns Service IP.",
                sample.cluster_dns.join(",")
            ),
            format!(
                "节点上已有本地 DNS 缓存监听 {ip}，但 kubelet 仍把 {} 作为 Pod 的 nameserver，查询依旧经过 DNAT 和 \
                 conntrack。把 kubelet 的 clusterDNS（或 --cluster-dns）改为 {ip} 并重建 Pod，或让缓存以同时监听 \
                 kube-dns Service IP 的方式运行。",
                sample.cluster_dns.join(",")
            ),
        )),
        LocalDns::InUse | LocalDns::PresentUnknownWiring => f.step(Text::new(
            format!(
                "A node-local DNS cache is present on {ip}; pod queries sent to it skip DNAT and conntrack. The races \
                 counted here therefore come from other UDP flows: pods with their own dnsConfig nameservers, \
                 hostNetwork pods using the Service IP, or other UDP Services. Find them in the conntrack table."
            ),
            format!(
                "节点上已有本地 DNS 缓存（{ip}），发往它的 Pod 查询不经过 DNAT 和 conntrack。因此这里统计到的冲突来自\
                 其他 UDP 流量：自定义 dnsConfig nameserver 的 Pod、使用 Service IP 的 hostNetwork Pod，或其他 UDP \
                 Service。请在 conntrack 表中找出它们。"
            ),
        )),
    };
    if d.insert_failed == 0 {
        f = f.step(Text::new(
            "Only `drop` rose, not `insert_failed`: the kernel also counts packets it could not track at all \
             (table full, no memory). Check the conntrack.table_full finding and the kernel log for \
             \"table full, dropping packet\".",
            "只有 `drop` 上升而 `insert_failed` 未变：内核无法跟踪的报文（表满、内存不足）也计入 drop。\
             请查看 conntrack.table_full 结果，并在内核日志中查找 \"table full, dropping packet\"。",
        ));
    }
    f = f
        .step(Text::new(
            "For pods that must keep querying the Service IP, set resolver options in the pod spec's dnsConfig: \
             `single-request-reopen` (glibc sends A and AAAA from different sockets, so they no longer share one \
             5-tuple) or `use-vc` (DNS over TCP). musl-based images (Alpine) ignore these options; they need the \
             node-local cache.",
            "对必须继续访问 Service IP 的 Pod，在 Pod spec 的 dnsConfig 中设置解析选项：`single-request-reopen`\
             （glibc 用不同 socket 发送 A 和 AAAA 查询，不再共用同一个五元组）或 `use-vc`（改用 TCP 查询）。\
             基于 musl 的镜像（Alpine）会忽略这些选项，只能依靠节点本地 DNS 缓存。",
        ))
        .step(Text::new(
            "kube-proxy in ipvs mode also uses conntrack, so switching modes does not avoid the race.",
            "kube-proxy 的 ipvs 模式同样依赖 conntrack，切换模式无法规避该问题。",
        ))
        .command("conntrack -S")
        .command("conntrack -L -p udp --dport 53 2>/dev/null | head -n 20")
        .command(cmd!("ss -ulpn {filter}", filter = format!("sport = :{}", addr.port())))
        .command("ps -ef | grep [k]ubelet | grep -o -- '--cluster-dns=[^ ]*'")
        .command(cmd!(
            "kubectl get pods -A -o wide --field-selector spec.nodeName={node}",
            node = node
        ))
        .source(HANDBOOK, SECTION)
        .see_also(see_also::CONNTRACK_DNS_DELAY);
    f
}

/// The recommended `nf_conntrack_max`: the larger of the classic netfilter sizing
/// (`MemTotal / 16384 / (64 / 32)` = `MemTotal / 32768` on 64-bit) and twice the current
/// limit, rounded up to a multiple of 65536. Falls back to twice the limit when memory is
/// unknown.
pub fn recommended_max(current_max: u64, mem_total_bytes: Option<u64>) -> u64 {
    const STEP: u64 = 65536;
    let by_memory = mem_total_bytes.map(|m| m / 32768).unwrap_or(0);
    let target = by_memory.max(current_max.saturating_mul(2)).max(STEP);
    target.div_ceil(STEP).saturating_mul(STEP)
}

/// `conntrack.table_full`: table >= warning % (warning), >= critical % or kernel "table full"
/// messages (critical).
fn table_full(
    sample: &Sample,
    deltas: Option<&Deltas>,
    config: &ConntrackConfig,
) -> Option<Finding> {
    let used = sample.used_percent();
    let messages = sample.table_full_messages.unwrap_or(0);
    let severity = if messages > 0 || used.is_some_and(|u| u >= config.table_critical_percent) {
        Severity::Critical
    } else if used.is_some_and(|u| u >= config.table_warning_percent) {
        Severity::Warning
    } else {
        return None;
    };
    let entries = sample.stat.entries;
    let max = sample.max.unwrap_or(0);
    let used_pct = used.unwrap_or(0.0);
    let rec = recommended_max(max, sample.mem_total_bytes);
    let rec_buckets = rec;
    let (title_en, title_zh) = if severity == Severity::Critical {
        (
            "conntrack table full: packets needing new connections are dropped",
            "conntrack 表已满：需要新建连接的报文被丢弃",
        )
    } else {
        ("conntrack table filling up", "conntrack 表即将写满")
    };
    let limit_en = if sample.max.is_some() {
        format!(
            "{entries} of {max} conntrack entries in use ({used_pct:.1}%; warning at {}%, critical at {}%)",
            config.table_warning_percent, config.table_critical_percent
        )
    } else {
        format!("{entries} conntrack entries in use (nf_conntrack_max unreadable)")
    };
    let limit_zh = if sample.max.is_some() {
        format!(
            "conntrack 表已用 {entries}/{max}（{used_pct:.1}%；{}% 告警，{}% 严重）",
            config.table_warning_percent, config.table_critical_percent
        )
    } else {
        format!("conntrack 表已用 {entries} 条（无法读取 nf_conntrack_max）")
    };
    let kmsg_en = match sample.table_full_messages {
        Some(n) => format!("; {n} \"table full, dropping packet\" kernel messages"),
        None => String::new(),
    };
    let kmsg_zh = match sample.table_full_messages {
        Some(n) => format!("；内核日志中有 {n} 条 \"table full, dropping packet\""),
        None => String::new(),
    };
    let mut f = Finding::new(
        TABLE_FULL,
        severity,
        Text::new(title_en, title_zh),
        Text::new(
            format!("{limit_en}{kmsg_en}; a full table drops packets of every kind, not only DNS."),
            format!("{limit_zh}{kmsg_zh}；表满时所有类型的新连接报文都会被丢弃，不只是 DNS。"),
        ),
    )
    .evidence("entries", entries)
    .evidence("warning_percent", config.table_warning_percent)
    .evidence("critical_percent", config.table_critical_percent)
    .evidence("recommended_max", rec)
    .evidence(
        "recommended_max_memory_bytes",
        rec.saturating_mul(BYTES_PER_ENTRY),
    );
    if let Some(m) = sample.max {
        f = f
            .evidence("entries_limit", m)
            .evidence("used_percent", used_pct);
    }
    if let Some(b) = sample.buckets {
        f = f.evidence("buckets", b);
    }
    if let Some(n) = sample.table_full_messages {
        f = f.evidence("table_full_messages", n);
    }
    if let Some(m) = sample.mem_total_bytes {
        f = f.evidence("mem_total_bytes", m);
    }
    if let Some(v) = sample.stat.get("drop") {
        f = f.evidence("drop_total", v);
    }
    if let Some(v) = sample.stat.get("early_drop") {
        f = f.evidence("early_drop_total", v);
    }
    if let Some(d) = deltas {
        // `drop` counts packets the kernel could not track (a full table among the causes);
        // `early_drop` counts entries evicted to make room.
        f = f
            .evidence("drop_increase", d.drop)
            .evidence("early_drop_increase", d.early_drop);
    }
    let mem_mib = rec.saturating_mul(BYTES_PER_ENTRY) / (1024 * 1024);
    f = f
        .step(Text::new(
            format!(
                "Raise the limit now to {rec} entries (the larger of MemTotal/32768 and twice the current \
                 limit); at about {BYTES_PER_ENTRY} bytes per entry a full table would then hold about {mem_mib} MiB \
                 of kernel memory."
            ),
            format!(
                "立即把上限提高到 {rec}（取 MemTotal/32768 与当前上限两倍中的较大者）；按每条约 {BYTES_PER_ENTRY} \
                 字节估算，表满时约占 {mem_mib} MiB 内核内存。"
            ),
        ))
        .step(Text::new(
            "Make it survive a reboot with a sysctl.d file, and raise the hash table size with it so lookups stay \
             short (the kernel's own default is one bucket per allowed entry).",
            "写入 sysctl.d 配置使其重启后仍然生效，并同步调大哈希桶数量以保持查找链短\
             （内核默认每个允许的条目对应一个桶）。",
        ))
        .step(Text::new(
            "Find what fills the table (a client opening many short connections, a scan, UDP without replies) and \
             fix that too: a bigger table only buys time.",
            "找出占满表的流量（大量短连接的客户端、扫描、没有回包的 UDP）并一并处理：扩大表只能争取时间。",
        ))
        .command(cmd!(
            "sysctl -w net.netfilter.nf_conntrack_max={max}",
            max = rec
        ))
        .command(cmd!(
            "echo {line} > /etc/sysctl.d/90-node-doctor-conntrack.conf",
            line = format!("net.netfilter.nf_conntrack_max = {rec}")
        ));
    if sample.buckets.is_some_and(|b| b < rec_buckets) {
        f = f.command(cmd!(
            "echo {buckets} > /sys/module/nf_conntrack/parameters/hashsize",
            buckets = rec_buckets
        ));
    }
    f = f
        .command("conntrack -C")
        .command(
            "conntrack -L 2>/dev/null | awk '{print $1}' | sort | uniq -c | sort -rn",
        )
        .command(
            "conntrack -L 2>/dev/null | grep -o 'src=[^ ]*' | sort | uniq -c | sort -rn | head -n 20",
        );
    if sample.table_full_messages.is_some() {
        f = f.command("dmesg -T | grep -c 'table full, dropping packet'");
    }
    Some(
        f.source(HANDBOOK, SECTION)
            .see_also(see_also::CONNTRACK_TABLE_FULL),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(entries: u64, cols: &[(&str, u64)]) -> NfConntrackStat {
        NfConntrackStat {
            entries,
            counters: cols.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            cpus: 2,
        }
    }

    fn sample(entries: u64, max: u64) -> Sample {
        Sample {
            kernel_release: Some("6.18.44".into()),
            stat: stat(
                entries,
                &[
                    ("clashres", 10),
                    ("insert_failed", 100),
                    ("drop", 4),
                    ("early_drop", 0),
                ],
            ),
            max: Some(max),
            buckets: Some(max),
            mem_total_bytes: Some(8 << 30),
            nodelocal_dns: Some(false),
            ..Sample::default()
        }
    }

    #[test]
    fn deltas_and_rates() {
        let a = stat(5, &[("insert_failed", 10), ("drop", 1), ("clashres", 3)]);
        let b = stat(9, &[("insert_failed", 40), ("drop", 1), ("clashres", 13)]);
        let d = Deltas::between(&a, &b, 15.0);
        assert_eq!(d.insert_failed, 30);
        assert_eq!(d.drop, 0);
        assert_eq!(d.clash_resolve, Some(10));
        assert_eq!(d.search_restart, None);
        assert!((d.rate(d.insert_failed) - 2.0).abs() < 1e-9);
        assert!(d.has_races());
        // A counter that went backwards (module reloaded) is not a race.
        let d = Deltas::between(&b, &a, 15.0);
        assert!(!d.has_races());
        assert_eq!(Deltas::default().rate(5), 0.0);
    }

    #[test]
    fn race_warning_then_critical_when_sustained() {
        let cfg = ConntrackConfig::default();
        let s = sample(100, 262144);
        let d = Deltas {
            elapsed_seconds: 15.0,
            insert_failed: 30,
            drop: 3,
            clash_resolve: Some(6),
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "node-1");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, INSERT_RACES);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].evidence["insert_failed_per_second"].as_f64(),
            Some(2.0)
        );
        assert_eq!(f[0].evidence["drop_per_second"].as_f64(), Some(0.2));
        assert_eq!(f[0].evidence["insert_failed_total"].as_f64(), Some(100.0));
        assert_eq!(f[0].evidence["clash_resolve_total"].as_f64(), Some(10.0));
        assert_eq!(
            f[0].evidence["clash_resolve_per_second"].as_f64(),
            Some(0.4)
        );
        assert_eq!(f[0].evidence["kernel_release"].as_str(), Some("6.18.44"));
        assert!(f[0]
            .remediation
            .commands
            .iter()
            .any(|c| c.contains("spec.nodeName=node-1")));
        let f = judge(&s, Some(&d), cfg.races_critical_samples, &cfg, "node-1");
        assert_eq!(f[0].severity, Severity::Critical);
        // No increase: nothing.
        let quiet = Deltas {
            elapsed_seconds: 15.0,
            ..Deltas::default()
        };
        assert!(judge(&s, Some(&quiet), 0, &cfg, "node-1").is_empty());
        assert!(judge(&s, None, 0, &cfg, "node-1").is_empty());
    }

    #[test]
    fn older_kernel_without_clashres_says_so() {
        let cfg = ConntrackConfig::default();
        let mut s = sample(100, 65536);
        s.stat = stat(100, &[("searched", 1), ("insert_failed", 7), ("drop", 0)]);
        let d = Deltas {
            elapsed_seconds: 1.0,
            insert_failed: 7,
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        assert_eq!(
            f[0].evidence["kernel_counts_clash_resolution"].as_str(),
            Some("no")
        );
        assert!(!f[0].evidence.contains_key("clash_resolve_total"));
    }

    #[test]
    fn drop_only_points_at_the_table() {
        let cfg = ConntrackConfig::default();
        let s = sample(250000, 262144);
        let d = Deltas {
            elapsed_seconds: 15.0,
            drop: 9,
            early_drop: 4,
            ..Deltas::default()
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        let races = f.iter().find(|f| f.id == INSERT_RACES).unwrap();
        assert!(races
            .remediation
            .steps
            .iter()
            .any(|t| t.en.starts_with("Only `drop` rose")));
        let table = f.iter().find(|f| f.id == TABLE_FULL).unwrap();
        assert_eq!(table.evidence["drop_increase"].as_f64(), Some(9.0));
        assert_eq!(table.evidence["early_drop_increase"].as_f64(), Some(4.0));
        // With insert_failed rising too, the drop-only hint is not given.
        let d = Deltas {
            insert_failed: 1,
            ..d
        };
        let f = judge(&s, Some(&d), 1, &cfg, "n");
        assert!(!f[0]
            .remediation
            .steps
            .iter()
            .any(|t| t.en.starts_with("Only `drop` rose")));
    }

    #[test]
    fn table_thresholds() {
        let cfg = ConntrackConfig::default();
        assert!(judge(&sample(196607, 262144), None, 0, &cfg, "n").is_empty()); // 74.99%
        let f = judge(&sample(196608, 262144), None, 0, &cfg, "n"); // 75%
        assert_eq!(f[0].id, TABLE_FULL);
        assert_eq!(f[0].severity, Severity::Warning);
        let f = judge(&sample(241173, 262144), None, 0, &cfg, "n"); // 92%
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].evidence["used_percent"].as_f64(), Some(92.0));
        // Kernel log says full while the count is low (entries expired since): critical.
        let mut s = sample(1000, 262144);
        s.table_full_messages = Some(3);
        let f = judge(&s, None, 0, &cfg, "n");
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].evidence["table_full_messages"].as_f64(), Some(3.0));
        s.table_full_messages = Some(0);
        assert!(judge(&s, None, 0, &cfg, "n").is_empty());
    }

    #[test]
    fn sizing_formula() {
        // 8 GiB: MemTotal/32768 = 262144, twice 65536 = 131072 -> 262144.
        assert_eq!(recommended_max(65536, Some(8 << 30)), 262144);
        // 24 GiB host with the 6.18 default limit 262144: 786432 by memory.
        assert_eq!(recommended_max(262144, Some(24 << 30)), 786432);
        // Limit already above the memory formula: double it.
        assert_eq!(recommended_max(1_048_576, Some(8 << 30)), 2_097_152);
        // Rounded up to a multiple of 65536; unknown memory.
        assert_eq!(recommended_max(100_000, None), 262144);
        assert_eq!(recommended_max(0, None), 65536);
    }
}
