//! The deployment's promises about the agent (issue 8): the alerts and the dashboard only
//! query metrics the agent exports, and the agent works in the container's read-only world.

use crate::manifests::{
    exported_names, http_get, metric_names, metric_names_used, DOCUMENTED_EXPORTS,
};
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn metric_names_are_extracted_from_promql_yaml_and_json() {
    let text = r#"expr: rate(node_doctor_x_total[5m]) / on(instance) node_doctor_y{a="b"}
      "expr": "100 * (1 - node_doctor_disk_avail_bytes{instance=~\"$node\"})"
      my_node_doctor_z node_doctor_ node-doctor node_doctor_finding == 1"#;
    let got: Vec<String> = metric_names(text).into_iter().collect();
    assert_eq!(
        got,
        [
            "node_doctor_disk_avail_bytes",
            "node_doctor_finding",
            "node_doctor_x_total",
            "node_doctor_y"
        ]
    );
}

#[test]
fn exposition_names_include_samples_and_families() {
    let text = "# HELP node_doctor_finding Active findings.\n\
                # TYPE node_doctor_finding gauge\n\
                node_doctor_finding{collector=\"disk\",id=\"disk.full\"} 1\n\
                # TYPE node_doctor_memory_page_alloc_failures counter\n\
                node_doctor_memory_page_alloc_failures_total{order=\"4\"} 7\n\
                node_doctor_load_load1 0.5\n# EOF\n";
    let got: Vec<String> = exported_names(text).into_iter().collect();
    assert_eq!(
        got,
        [
            "node_doctor_finding",
            "node_doctor_load_load1",
            "node_doctor_memory_page_alloc_failures",
            "node_doctor_memory_page_alloc_failures_total"
        ]
    );
}

#[test]
fn alerts_and_dashboard_use_only_documented_metrics() {
    let used = metric_names_used();
    let documented: BTreeSet<&str> = DOCUMENTED_EXPORTS.iter().copied().collect();
    let unknown: Vec<_> = used
        .iter()
        .filter(|(n, _)| !documented.contains(n.as_str()))
        .collect();
    assert!(unknown.is_empty(), "not exported by the agent: {unknown:?}");
    // Both files really query something, and alerts are on findings.
    for file in crate::manifests::MONITORING_FILES {
        assert!(used.iter().any(|(_, f)| f == file), "{file} uses no metric");
    }
    assert!(used
        .iter()
        .any(|(n, f)| n == "node_doctor_finding" && f.ends_with(".yaml")));
}

fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A fake host root made of this machine's real /proc files (what the agent reads first).
/// A node staged so that every collector exports its metric families: a disk under the
/// kubelet's root, CPU and disk counters (the load collector's rates need two samples), buddy
/// and memory figures with one page allocation failure in the kernel log, and conntrack tables
/// in pid 1's network view.
fn fake_host_root(dir: &Path) {
    let w = |p: &str, text: &str| {
        let dst = dir.join(p);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::write(dst, text).unwrap();
    };
    w("etc/hostname", "test-node\n");
    w("proc/loadavg", "0.52 0.41 0.35 2/219 23311\n");
    w("proc/uptime", "86400.00 170000.00\n");
    w(
        "proc/stat",
        "cpu  1000 0 500 100000 10 0 5 0 0 0\ncpu0 500 0 250 50000 5 0 3 0 0 0\n\
cpu1 500 0 250 50000 5 0 2 0 0 0\nctxt 123456\nbtime 1763798400\nprocesses 22000\n\
procs_running 1\nprocs_blocked 0\n",
    );
    w(
        "proc/diskstats",
        "   8       0 sda 1000 0 20000 500 2000 0 40000 1000 0 1500 1500 0 0 0 0 0 0\n",
    );
    w("sys/devices/system/cpu/online", "0-1\n");
    w(
        "proc/meminfo",
        "MemTotal:       24684084 kB\nMemFree:        21874744 kB\nMemAvailable:   24117824 kB\n",
    );
    w("proc/vmstat", "compact_stall 0\ncompact_fail 0\n");
    w(
        "proc/buddyinfo",
        "Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3\n\
Node 0, zone   Normal   1163   1101    932    222     40     10      2      1      0      0      0\n",
    );
    // One page allocation failure an hour before "now" (uptime 86400 s).
    w(
        "dev/kmsg",
        "4,100,82800000000,-;mysqld: page allocation failure: order:4, mode:0x10c0d0\n",
    );
    w(
        "proc/1/net/stat/nf_conntrack",
        "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n\
00000100  00000000 00000010 00000000 00000002 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000000  00000000 00000000 00000000 00000001\n",
    );
    w("proc/sys/net/netfilter/nf_conntrack_max", "65536\n");
    w("proc/sys/net/netfilter/nf_conntrack_buckets", "16384\n");
    w(
        "proc/1/net/snmp",
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 1200 3 17 1300 11 0 0 0 0\n",
    );
    w(
        "proc/1/net/udp",
        "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n",
    );
    // The tables collector's files (this VM's figures: nothing near a limit).
    w("proc/sys/fs/file-nr", "1184\t0\t2470938\n");
    w("proc/sys/fs/nr_open", "1048576\n");
    w("proc/1/net/stat/arp_cache", "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n00000002 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         00000000         00000000       00000000            00000000\n");
    w("proc/sys/net/ipv4/neigh/default/gc_thresh1", "128\n");
    w("proc/sys/net/ipv4/neigh/default/gc_thresh2", "512\n");
    w("proc/sys/net/ipv4/neigh/default/gc_thresh3", "1024\n");
    w(
        "proc/1/net/sockstat",
        "sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\n",
    );
    w("proc/sys/net/ipv4/tcp_mem", "288459\t384612\t576918\n");
    w("proc/sys/net/ipv4/tcp_max_orphans", "131072\n");
    // The net collector's files (this VM's 6.18 softnet lines; only the loopback interface).
    w("proc/net/softnet_stat", "002a31dc 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n002dd379 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000\n");
    w("sys/class/net/lo/type", "772\n");
    let root_dev = std::fs::metadata(dir)
        .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
        .unwrap();
    w(
        "proc/1/mountinfo",
        &format!(
            "22 1 {}:{} / / rw,relatime shared:1 - ext4 /dev/vda rw\n",
            root_dev >> 8,
            root_dev & 0xff
        ),
    );
    std::fs::create_dir_all(dir.join("var/lib/kubelet/pods")).unwrap();
}

struct Agent(Child);
impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_healthy(addr: SocketAddr, agent: &mut Agent) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = agent.0.try_wait() {
            panic!("agent exited early with {status}");
        }
        if matches!(http_get(addr, "/healthz"), Ok((200, _))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The container runs with a read-only root filesystem, the host's `/` bound read-only at
/// `/host`, and a working directory it cannot write. Reproduce that in a private mount
/// namespace (root only): the fake host root is a read-only bind mount, `/` (and `/tmp`) are
/// remounted read-only for the agent, its working directory is read-only; it must serve.
#[test]
fn agent_serves_from_a_read_only_host_root_and_working_directory() {
    if !crate::support::is_root() {
        collectors::skip!("SKIP agent_serves_from_a_read_only_host_root_and_working_directory: needs root (mount namespace)");
        return;
    }
    let bin = crate::support::shipped_bin();
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("fake-root");
    let host = tmp.path().join("host");
    let wd = tmp.path().join("wd");
    fake_host_root(&fake);
    std::fs::create_dir_all(&host).unwrap();
    std::fs::create_dir_all(&wd).unwrap();
    let addr = free_port();
    let script = r#"set -e
mount --bind "$FAKE" "$HOSTROOT"
mount -o remount,bind,ro "$HOSTROOT"
mount -o remount,bind,ro /
if mountpoint -q /tmp; then mount -o remount,bind,ro /tmp; fi
for p in "$HOSTROOT/.w" "$WD/.w" /tmp/.node-doctor-w; do
  if touch "$p" 2>/dev/null; then echo "harness: $p is writable" >&2; exit 97; fi
done
cd "$WD"
exec "$BIN" serve --listen="$LISTEN" --host-root="$HOSTROOT"
"#;
    let child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .env("FAKE", &fake)
        .env("HOSTROOT", &host)
        .env("WD", &wd)
        .env("BIN", &bin)
        .env("LISTEN", addr.to_string())
        .env("NODE_NAME", "test-node")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run unshare (util-linux)");
    let mut agent = Agent(child);
    assert!(
        wait_healthy(addr, &mut agent),
        "agent not healthy within 15 s"
    );
    let (status, body) = http_get(addr, "/findings").unwrap();
    assert_eq!(status, 200, "/findings: {body}");
    assert!(
        body.trim_start().starts_with('{') || body.trim_start().starts_with('['),
        "/findings is not JSON: {body}"
    );
    let (status, metrics) = http_get(addr, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        exported_names(&metrics).contains("node_doctor_collector_up"),
        "{metrics}"
    );
    // Still running after serving: nothing it tried to write brought it down.
    assert!(agent.0.try_wait().unwrap().is_none(), "agent exited");
    // And the host root really was read-only for it: nothing appeared in the fake root.
    assert!(!fake.join(".w").exists());
}

/// Every metric the alerts and the dashboard use is in a live scrape of the agent.
#[test]
fn alerts_and_dashboard_metrics_are_in_a_live_scrape() {
    let bin = crate::support::shipped_bin();
    let tmp = tempfile::tempdir().unwrap();
    fake_host_root(tmp.path());
    let addr = free_port();
    let child = Command::new(&bin)
        .arg("serve")
        .arg(format!("--listen={addr}"))
        .arg(format!("--host-root={}", tmp.path().display()))
        .arg("--interval=1s")
        .env("NODE_NAME", "test-node")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut agent = Agent(child);
    assert!(wait_healthy(addr, &mut agent));
    // Two collections (1 s apart), so rate-based families have a sample.
    std::thread::sleep(Duration::from_millis(2500));
    let (status, metrics) = http_get(addr, "/metrics").unwrap();
    assert_eq!(status, 200);
    let exported = exported_names(&metrics);
    let missing: Vec<_> = metric_names_used()
        .into_iter()
        .filter(|(n, _)| !exported.contains(n))
        .collect();
    assert!(missing.is_empty(), "used but not exported: {missing:?}");
}
