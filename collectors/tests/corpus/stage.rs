//! Stages an excerpt on a fake host as a node would hold it and runs what reads it: the kernel
//! lines as `/dev/kmsg` records for every collector that reads the kernel log, the daemons'
//! lines in `/var/log/syslog` for the runtime collector's log reader (`nodelog`). The host
//! around them is a quiet, healthy node, so that every finding comes from the excerpt.
//!
//! Time: the excerpt's last line is staged [`LAST_AGE`] before now and the others keep their
//! distance from it (from the syslog or `dmesg -T` clock when the excerpt shows one, else the
//! kernel's uptime stamps, else 1 ms apart), so a line more than the readers' lookback (1 h)
//! before the last is history, as on the node. Nothing live is staged: no process is in D
//! state, no filesystem is read-only now; the expected severities are those of a problem
//! the log shows as just past.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use collectors::nodelog::{judge, LiveFacts, NodeLogConfig, NodeLogWatcher, Thresholds};
use collectors::registry::{Options, COLLECTORS};
use collectors::rules::RuleBook;
use collectors::{CollectContext, Finding, HostNetns, HostPaths, Node};

use crate::excerpt::{self, Excerpt, Line, Stage};

/// The collectors that read the kernel log (the `gpu` one runs once the build has it).
const KMSG_READERS: &[&str] = &[
    "kernel",
    "memory",
    "conntrack",
    "hardware",
    "tables",
    "gpu",
    "net",
];
/// The staged node's uptime, seconds: longer than any excerpt's span.
const UPTIME: f64 = 10_000_000.0;
/// How long before now the excerpt's last line is staged, seconds.
const LAST_AGE: f64 = 30.0;

/// The collector names this build has, with `runtime` (the log reader's).
pub fn known_collectors() -> Vec<&'static str> {
    COLLECTORS.iter().map(|e| e.name).collect()
}

/// Stages `ex` and returns every finding the log readers raise on it.
pub fn run(ex: &Excerpt) -> Vec<Finding> {
    let dir = tempfile::tempdir().expect("temp host root");
    let root = dir.path();
    quiet_node(root);
    let lines: Vec<Line> = ex
        .log
        .lines()
        .filter(|l| !l.trim().is_empty() && !excerpt::is_wall_header(l))
        .map(excerpt::split)
        .collect();
    let ages = ages(&lines);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (kmsg, syslog) = place(ex, &lines, &ages, now);
    write(root, "dev/kmsg", &kmsg);
    write(root, "var/log/syslog", &syslog);
    for p in &ex.processes {
        let stat = format!(
            "{} ({}) {} 1 {0} {0} 0 -1 4194560 100 0 0 0 10 5 0 0 20 0 1 0 100 1000000 200 \
             18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            p.pid, p.comm, p.state
        );
        write(root, &format!("proc/{}/stat", p.pid), &stat);
        write(
            root,
            &format!("proc/{}/comm", p.pid),
            &format!("{}\n", p.comm),
        );
    }
    let mut findings = kernel_log_findings(root);
    findings.extend(daemon_log_findings(root, now));
    findings
}

/// The kmsg records and the syslog text of the excerpt's lines.
fn place(ex: &Excerpt, lines: &[Line], ages: &[f64], now: i64) -> (String, String) {
    let (mut kmsg, mut syslog) = (String::new(), String::new());
    for (i, (l, age)) in lines.iter().zip(ages).enumerate() {
        let ident = l.ident.clone().unwrap_or_else(|| match ex.stage {
            Stage::Kmsg => "kernel".into(),
            Stage::Syslog => ex.ident.clone(),
        });
        if ident == "kernel" {
            let usec = ((UPTIME - age) * 1e6) as u64;
            let level = l.level.unwrap_or(6);
            kmsg += &format!("{level},{},{usec},-;{}\n", 1000 + i, l.message);
        } else {
            let t = now - age.round() as i64;
            let stamp = jiff::tz::TimeZone::UTC
                .to_datetime(jiff::Timestamp::from_second(t).expect("a time"))
                .strftime("%b %e %H:%M:%S")
                .to_string();
            let pid = l.pid.unwrap_or(4242);
            syslog += &format!("{stamp} node-1 {ident}[{pid}]: {}\n", l.message);
        }
    }
    (kmsg, syslog)
}

/// Each line's age before now, seconds: the distance from the last line on the clock the
/// excerpt shows (syslog or `dmesg -T` time of day, rolling over midnight; else the kernel's
/// uptime stamps; a line without a stamp keeps the one before it), plus [`LAST_AGE`].
fn ages(lines: &[Line]) -> Vec<f64> {
    let use_clock = lines.iter().any(|l| l.clock.is_some());
    let use_uptime = !use_clock && lines.iter().any(|l| l.uptime.is_some());
    let mut times = Vec::with_capacity(lines.len());
    // A first line without a stamp takes the first stamp that follows (a console line that a
    // shell's output interrupted, say); later ones keep the stamp before them.
    let first_stamp = lines.iter().find_map(|l| {
        if use_clock {
            l.clock
        } else if use_uptime {
            l.uptime
        } else {
            None
        }
    });
    let (mut prev, mut day) = (first_stamp, 0.0);
    for (i, l) in lines.iter().enumerate() {
        let t = if use_clock {
            l.clock
        } else if use_uptime {
            l.uptime
        } else {
            Some(i as f64 * 0.001)
        };
        let t = match (t, prev) {
            (Some(t), Some(p)) if use_clock && t + day < p - 43_200.0 => {
                day += 86_400.0;
                t + day
            }
            (Some(t), _) if use_clock => t + day,
            (Some(t), _) => t,
            (None, p) => p.unwrap_or(0.0),
        };
        prev = Some(t);
        times.push(t);
    }
    let last = times.iter().copied().fold(f64::MIN, f64::max);
    times.iter().map(|t| last - t + LAST_AGE).collect()
}

fn write(root: &std::path::Path, path: &str, text: &str) {
    let p = root.join(path);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).expect("create dirs");
    }
    std::fs::write(&p, text).expect("write staged file");
}

/// `net/stat/arp_cache` (and `ndisc_cache`) of two CPUs, 4 entries, no table full.
const NEIGH: &str = "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n\
00000004 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         000005c7         00000000       00000000            00000000\n\
00000004 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         000005c7         00000000       00000000            00000000\n";

/// A healthy, idle 16 GiB, 4-CPU node: nothing in these files is a problem.
fn quiet_node(root: &std::path::Path) {
    let files: &[(&str, &str)] = &[
        ("proc/uptime", "10000000.00 30000000.00\n"),
        ("proc/meminfo", "MemTotal:       16384000 kB\nMemFree:         8000000 kB\nMemAvailable:   12000000 kB\nBuffers:          200000 kB\nCached:          3000000 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nHardwareCorrupted:     0 kB\n"),
        ("proc/buddyinfo", "Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3\nNode 0, zone    DMA32   3000   2500   2000   1500   1000    600    300    150     80     40    300\nNode 0, zone   Normal  20000  15000  10000   8000   5000   3000   1500    800    400    200   1000\n"),
        ("proc/vmstat", "nr_free_pages 2000000\npgscan_kswapd 0\npgscan_direct 0\npgsteal_kswapd 0\npgsteal_direct 0\ncompact_stall 0\ncompact_fail 0\ncompact_success 0\nallocstall_normal 0\n"),
        ("proc/loadavg", "0.52 0.41 0.35 2/219 23311\n"),
        ("proc/stat", "cpu  1 2 3 4 5 6 7 8 0 0\nprocs_running 2\nprocs_blocked 0\n"),
        ("proc/sys/kernel/pid_max", "4194304\n"),
        ("proc/sys/kernel/threads-max", "191853\n"),
        ("proc/sys/kernel/tainted", "0\n"),
        ("proc/sys/kernel/osrelease", "6.18.44\n"),
        ("proc/sys/net/core/somaxconn", "4096\n"),
        ("proc/sys/net/ipv4/tcp_max_syn_backlog", "1024\n"),
        ("proc/1/net/netstat", "TcpExt: SyncookiesSent TW ListenOverflows ListenDrops TCPBacklogDrop\nTcpExt: 0 100 0 0 0\nIpExt: InNoRoutes InOctets\nIpExt: 0 123456\n"),
        ("proc/sys/fs/file-nr", "2048\t0\t2470938\n"),
        ("proc/sys/fs/nr_open", "1048576\n"),
        ("proc/1/net/sockstat", "sockets: used 300\nTCP: inuse 20 orphan 0 tw 10 alloc 25 mem 5\nUDP: inuse 4 mem 1\n"),
        ("proc/1/net/sockstat6", "TCP6: inuse 0\nUDP6: inuse 0\n"),
        ("proc/sys/net/ipv4/tcp_mem", "288459\t384612\t576918\n"),
        ("proc/sys/net/ipv4/tcp_max_orphans", "131072\n"),
        ("proc/sys/net/netfilter/nf_conntrack_max", "262144\n"),
        ("proc/sys/net/netfilter/nf_conntrack_buckets", "65536\n"),
        ("proc/sys/net/netfilter/nf_conntrack_count", "1200\n"),
        ("proc/1/comm", "systemd\n"),
        ("proc/1/net/stat/nf_conntrack", "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n000004b0  00000000 00001000 00000000 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000001\n000004b0  00000000 00001000 00000000 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000001\n"),
        ("proc/1/net/snmp", "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 1200 3 0 1300 0 0 0 0 0\n"),
        ("proc/1/net/udp", "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n"),
        ("proc/1/net/stat/arp_cache", NEIGH),
        ("proc/1/net/stat/ndisc_cache", NEIGH),
        ("proc/sys/net/ipv4/neigh/default/gc_thresh1", "128\n"),
        ("proc/sys/net/ipv4/neigh/default/gc_thresh2", "512\n"),
        ("proc/sys/net/ipv4/neigh/default/gc_thresh3", "1024\n"),
        ("proc/sys/net/ipv6/neigh/default/gc_thresh1", "128\n"),
        ("proc/sys/net/ipv6/neigh/default/gc_thresh2", "512\n"),
        ("proc/sys/net/ipv6/neigh/default/gc_thresh3", "1024\n"),
        ("sys/devices/system/cpu/online", "0-3\n"),
    ];
    for (p, text) in files {
        write(root, p, text);
    }
}

#[derive(Debug)]
struct NoProbe;
impl collectors::runtime::probe::RuntimeProbe for NoProbe {
    fn probe(
        &self,
        _: &collectors::runtime::probe::ProbePlan,
    ) -> collectors::runtime::probe::ProbeReport {
        Default::default()
    }
}
impl collectors::dns::DnsProbe for NoProbe {
    fn probe(&self, _: &collectors::dns::DnsPlan) -> collectors::dns::DnsReport {
        Default::default()
    }
    fn real_network(&self) -> bool {
        false
    }
}
impl collectors::reach::probe::ReachProbe for NoProbe {
    fn probe(
        &self,
        _: &collectors::reach::probe::ReachPlan,
    ) -> collectors::reach::probe::ReachReport {
        Default::default()
    }
}

/// One collection of every kernel-log reader the build has, on one node (one shared read of
/// the device, as an agent does).
fn kernel_log_findings(root: &std::path::Path) -> Vec<Finding> {
    let node = Node::with_facts(
        HostPaths::new(root),
        collectors::node::Facts {
            page_size: 4096,
            clock_ticks: 100,
        },
    );
    let options = Options::new(Arc::new(NoProbe), Arc::new(NoProbe), Arc::new(NoProbe));
    let ctx = CollectContext::new("node-1", HostNetns::NotProcfs);
    let mut built: Vec<_> = COLLECTORS
        .iter()
        .filter(|e| KMSG_READERS.contains(&e.name))
        .map(|e| (e.build)(&node, &options))
        .collect();
    let debug = std::env::var_os("CORPUS_DEBUG").is_some();
    built
        .iter_mut()
        .flat_map(|c| {
            let out = c.collect(&ctx);
            if debug {
                eprintln!("{}: {:?}", c.name(), out.status);
            }
            out.findings
        })
        .collect()
}

/// The runtime collector's findings from the node's logs (its `nodelog` reader and judge,
/// as `collectors/tests/scenarios/nodelog.rs` runs them), with nothing known live.
fn daemon_log_findings(root: &std::path::Path, now: i64) -> Vec<Finding> {
    let mut w = NodeLogWatcher::new(HostPaths::new(root), NodeLogConfig::default());
    let sample = w.sample(now);
    let rules = RuleBook::builtin();
    judge::judge(&sample, &LiveFacts::default(), &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, "node-1"))
        .collect()
}
