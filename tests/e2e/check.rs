//! `node-doctor check`: exit codes, JSON identical in shape to /findings, table, usage errors.

use serde_json::Value;

use crate::serve::assert_contract;
use crate::support::{run, FakeRoot};

fn expected_exit(v: &Value) -> i32 {
    let sevs: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    let severity = if sevs.contains(&"critical") {
        2
    } else if sevs.contains(&"warning") {
        1
    } else {
        0
    };
    // Bit 2: some collector did not complete; the document says which.
    let incomplete: Vec<&str> = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "ok")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let listed: Vec<&str> = v["incomplete"]
        .as_array()
        .unwrap_or_else(|| panic!("no incomplete list: {v:#}"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(listed, incomplete, "{v:#}");
    assert_eq!(v["complete"], incomplete.is_empty(), "{v:#}");
    if incomplete.is_empty() {
        severity
    } else {
        severity | 4
    }
}

/// The tables collector's sources in `root`, complete (`sockstat` too) or not: `allocated`
/// of fs.file-max 1000 file handles (tables.file_handles: warning from 80 %, critical from
/// 90 %) and `arp_entries` IPv4 neighbours against gc_thresh3 1024.
fn stage_tables(root: &FakeRoot, allocated: u64, arp_entries: u64, complete: bool) {
    root.write("/proc/sys/fs/file-nr", &format!("{allocated}\t0\t1000\n"));
    root.write("/proc/sys/fs/nr_open", "1048576\n");
    root.write(
        "/proc/1/net/stat/arp_cache",
        &format!(
            "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n\
{arp_entries:08x} 00000007 0000000a 00000000   00000012 00000003 00000000   00000000         00000000         000000e3         00000000       00000000            00000000\n"
        ),
    );
    for (i, v) in [128, 512, 1024].iter().enumerate() {
        root.write(
            &format!("/proc/sys/net/ipv4/neigh/default/gc_thresh{}", i + 1),
            &format!("{v}\n"),
        );
    }
    root.write("/proc/sys/net/ipv4/tcp_mem", "288459\t384612\t576918\n");
    root.write("/proc/sys/net/ipv4/tcp_max_orphans", "131072\n");
    root.write("/dev/kmsg", "6,1,1000000,-;Linux version 6.18.44\n");
    let sockstat = root.path("/proc/1/net/sockstat");
    if complete {
        root.write(
            "/proc/1/net/sockstat",
            "sockets: used 31\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 351\n",
        );
    } else {
        let _ = std::fs::remove_file(sockstat);
    }
}

/// The exit code is docs/run.md's table for findings whose worst severity the test staged
/// (file-nr at 10 %, 85 %, 95 % of file-max: nothing, a warning, a critical), with the tables
/// collector complete (0, 1, 2) or missing its `sockstat` (4, 5, 6); and the whole fake host,
/// which has nothing above info and lacks sources by design, exits 4.
#[test]
fn check_json_follows_the_contract_and_the_exit_code_matches() {
    let root = FakeRoot::quiet();
    let r = root.root().to_str().unwrap();
    let check = |collector: &[&str]| {
        let mut args = vec![
            "check",
            "--host-root",
            r,
            "--format",
            "json",
            "--interval",
            "200ms",
            "--node-name",
            "n1",
        ];
        args.extend(collector);
        let out = run(&args, &[]);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_contract(&v, "n1");
        (out.status.code(), v)
    };
    for (complete, allocated, worst, code) in [
        (true, 100, None, 0),
        (true, 850, Some("warning"), 1),
        (true, 950, Some("critical"), 2),
        (false, 100, None, 4),
        (false, 850, Some("warning"), 5),
        (false, 950, Some("critical"), 6),
    ] {
        stage_tables(&root, allocated, 2, complete);
        let (got, v) = check(&["--collector", "tables"]);
        let sevs: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["severity"].as_str().unwrap())
            .collect();
        let case = format!("file-nr {allocated}/1000, complete {complete}: {v:#}");
        assert_eq!(sevs, worst.into_iter().collect::<Vec<_>>(), "{case}");
        assert_eq!(v["complete"], complete, "{case}");
        assert_eq!(got, Some(code), "{case}");
        assert_eq!(got, Some(expected_exit(&v)), "{case}");
    }
    // Every collector on the quiet fake host: nothing above info, several sources absent.
    std::fs::remove_dir_all(root.path("/proc/sys")).unwrap();
    std::fs::remove_dir_all(root.path("/proc/1")).unwrap();
    let (got, v) = check(&[]);
    assert_eq!(got, Some(4), "{v:#}");
    assert_eq!(got, Some(expected_exit(&v)));
    // Every collector ran (twice): none is left "not run yet".
    for c in v["collectors"].as_array().unwrap() {
        assert!(!c["last_run"].is_null(), "{c}");
    }
}

/// The flags from the environment are honoured: the node name, JSON, Chinese words (the rule
/// file's zh title of the staged neighbour table finding) and the interval, which the
/// tables collector measures between its two samples (`interval_seconds`): at least the 2 s
/// asked for, twice the default.
#[test]
fn check_reads_flags_from_the_environment() {
    let root = FakeRoot::quiet();
    stage_tables(&root, 100, 1000, true);
    let out = run(
        &["check"],
        &[
            ("NODE_DOCTOR_HOST_ROOT", root.root().to_str().unwrap()),
            ("NODE_DOCTOR_FORMAT", "json"),
            ("NODE_DOCTOR_INTERVAL", "2s"),
            ("NODE_DOCTOR_LANG", "zh"),
            ("NODE_NAME", "from-downward-api"),
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON from env flags");
    assert_contract(&v, "from-downward-api");
    let neigh = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "tables.neighbour_table")
        .unwrap_or_else(|| panic!("no neighbour table finding: {v:#}"));
    assert_eq!(neigh["title"], "ipv4 邻居表即将占满", "{neigh:#}");
    let summary = neigh["summary"].as_str().unwrap();
    assert!(summary.contains("1000"), "{summary}");
    let interval = neigh["evidence"]["interval_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("{neigh:#}"));
    assert!(interval >= 2.0, "the samples were {interval} s apart");
}

#[test]
fn node_name_falls_back_to_the_host_hostname() {
    let root = FakeRoot::quiet();
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--interval",
            "100ms",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["node"], "fake-host");
}

#[test]
fn check_table_is_plain_text_when_piped() {
    let root = FakeRoot::quiet();
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--interval",
            "100ms",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("node-doctor "), "{text}");
    assert!(text.contains("collectors:"));
    assert!(text.contains(" critical, "));
    assert!(
        !text.contains('\x1b'),
        "no colour codes when stdout is not a TTY"
    );
    assert!(
        matches!(out.status.code(), Some(0..=2 | 4..=6)),
        "{:?}",
        out.status
    );
    let zh = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--interval",
            "100ms",
            "--lang",
            "zh",
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&zh.stdout).contains("采集器"));
}

#[test]
fn bad_usage_exits_64_with_a_message() {
    for args in [
        &["check", "--format", "xml"][..],
        &["check", "--interval", "soon"],
        &["check", "--lang", "fr"],
        &["check", "--collector", "no-such-collector"],
        &["serve", "--listen", "nowhere"],
        &["serve", "--collector-interval", "no-such-collector=5s"],
        &["serve", "--collector-timeout", "0s"],
        &["--no-such-flag"],
        &[],
    ] {
        let out = run(args, &[]);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: a message");
    }
    let out = run(&["check", "--format", "xml"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
    let env = run(&["check"], &[("NODE_DOCTOR_INTERVAL", "later")]);
    assert_eq!(env.status.code(), Some(64));
    assert_eq!(run(&["--help"], &[]).status.code(), Some(0));
    assert_eq!(run(&["--version"], &[]).status.code(), Some(0));
}

/// A FUSE mount whose daemon never answers: every access to it blocks (killably) until the
/// connection is aborted — what a hung NFS or FUSE mount does to a node agent. Needs root and
/// /dev/fuse. Dropping it aborts the connection (close) and detaches the mount.
struct HungFuse {
    dir: std::path::PathBuf,
    fd: Option<std::os::fd::OwnedFd>,
}

impl HungFuse {
    fn mount(dir: &std::path::Path) -> Result<HungFuse, String> {
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let fd: std::os::fd::OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse: {e}"))?
            .into();
        let data = format!("fd={},rootmode=40000,user_id=0,group_id=0", fd.as_raw_fd());
        nix::mount::mount(
            Some("node-doctor-hung"),
            dir,
            Some("fuse"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(data.as_str()),
        )
        .map_err(|e| format!("mount fuse at {}: {e}", dir.display()))?;
        // Nobody reads the INIT request from `fd`: every request to the mount now waits.
        Ok(HungFuse {
            dir: dir.to_path_buf(),
            fd: Some(fd),
        })
    }
}

impl Drop for HungFuse {
    fn drop(&mut self) {
        // Closing the device aborts the connection: blocked callers get ENOTCONN.
        drop(self.fd.take());
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A collector that hangs on a dead mount (the kubelet's directory on a FUSE mount that never
/// answers) while the others complete: the check finishes within its timeouts and is
/// incomplete, not healthy — exit code bit 4, the JSON and the table name the collector.
#[test]
fn a_hung_collector_makes_the_check_incomplete() {
    if !crate::support::is_root() || !std::path::Path::new("/dev/fuse").exists() {
        collectors::skip!(
            "SKIP a_hung_collector_makes_the_check_incomplete: needs root and /dev/fuse"
        );
        return;
    }
    let root = FakeRoot::quiet();
    let _hung = HungFuse::mount(&root.path("/var/lib/kubelet")).expect("hung FUSE mount");
    let r = root.root().to_str().unwrap();
    let args = [
        "check",
        "--host-root",
        r,
        "--format",
        "json",
        "--interval",
        "100ms",
        "--collector",
        "disk,load",
        "--collector-timeout",
        "2s",
    ];
    // The mount never answers while `_hung` lives: a check that waited on it would never
    // end. The guard's 300 s is there to fail such a check, it is not the claim.
    let guard = std::time::Duration::from_secs(300);
    let (out, _) = crate::support::run_with_timeout(&args, guard)
        .expect("check still running while the mount hung");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let disk = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "disk")
        .unwrap();
    assert_eq!(disk["status"], "error", "{v:#}");
    let msg = disk["message"].as_str().unwrap();
    assert!(msg.contains("timed out after 2s"), "{msg}");
    assert!(v["incomplete"].as_array().unwrap().contains(&"disk".into()));
    assert_eq!(v["complete"], false);
    let code = out.status.code().unwrap();
    assert_eq!(code & 4, 4, "incomplete bit: {code}");
    assert_eq!(code, expected_exit(&v));
    // The table says it too.
    let mut table_args = args.to_vec();
    table_args.retain(|a| *a != "--format" && *a != "json");
    let (out, _) = crate::support::run_with_timeout(&table_args, guard)
        .expect("check still running while the mount hung");
    assert_eq!(out.status.code().unwrap() & 4, 4);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  disk ") && text.contains("timed out"),
        "{text}"
    );
    assert!(!text.contains("nothing needs attention"), "{text}");
}

/// The same fake root with every collector's sources in place for the memory collector:
/// complete, quiet, exit 0 (the control for the test above).
#[test]
fn a_complete_quiet_check_exits_0() {
    let root = FakeRoot::quiet();
    root.write(
        "/proc/buddyinfo",
        "Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3 \n\
Node 0, zone    DMA32   1184   1062    832    612    422    258    140     71     34     20    457 \n\
Node 0, zone   Normal   4411   3868   3114   2347   1619   1009    555    284    133     66   4833 \n",
    );
    root.write("/dev/kmsg", "6,1,1000000,-;Linux version 6.18.44\n");
    root.write(
        "/proc/vmstat",
        "nr_free_pages 5468686\ncompact_stall 0\ncompact_fail 0\ncompact_success 0\n",
    );
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--interval",
            "100ms",
            "--collector",
            "memory",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let memory = &v["collectors"][0];
    if memory["status"] != "ok" {
        panic!("the control needs a complete memory collector: {v:#}");
    }
    assert_eq!(v["complete"], true);
    assert_eq!(out.status.code(), Some(expected_exit(&v)));
    assert_eq!(out.status.code().unwrap() & 4, 0);
}

/// `check --log-level debug` logs each collector run's CPU time, both samples, the figure
/// docs/cost.md's per-collector accounting reads; the default level (error) logs none of it.
#[test]
fn check_logs_each_runs_cpu_at_debug_level() {
    let root = FakeRoot::quiet();
    let args = |level: &'static str| {
        let root = root.root().to_str().unwrap().to_string();
        let mut a = vec![
            "check".to_string(),
            "--host-root".to_string(),
            root,
            "--format".into(),
            "json".into(),
            "--interval".into(),
            "50ms".into(),
            "--collector".into(),
            "load".into(),
        ];
        if !level.is_empty() {
            a.extend(["--log-level".to_string(), level.to_string()]);
        }
        a
    };
    let runs = |level: &'static str| -> Vec<u64> {
        let a = args(level);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = run(&a, &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        err.lines()
            .filter(|l| l.contains("run finished") && l.contains("collector=\"load\""))
            .map(|l| {
                let us = l
                    .split("cpu_total_us=")
                    .nth(1)
                    .unwrap_or_else(|| panic!("{l}"));
                us.split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap_or_else(|e| panic!("{l}: {e}"))
            })
            .collect()
    };
    let debug = runs("debug");
    assert_eq!(debug.len(), 2, "one line per sample: {debug:?}");
    assert!(
        debug[1] >= debug[0],
        "the CPU of all runs so far: {debug:?}"
    );
    assert!(runs("").is_empty());
}

/// An empty directory, a directory without proc/stat, or a file is not a host: exit 3 with a
/// message, never a report of "nothing found".
#[test]
fn an_empty_or_wrong_host_root_is_an_agent_failure() {
    let empty = tempfile::tempdir().unwrap();
    let file = empty.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let no_stat = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(no_stat.path().join("proc/1")).unwrap();
    std::fs::write(no_stat.path().join("etc-hostname"), "x").unwrap();
    for root in [empty.path(), file.as_path(), no_stat.path()] {
        for cmd in [&["check", "--format", "json"][..], &["check"]] {
            let mut args = cmd.to_vec();
            args.extend(["--host-root", root.to_str().unwrap()]);
            let out = run(&args, &[]);
            assert_eq!(out.status.code(), Some(3), "{args:?}");
            assert!(out.stdout.is_empty(), "no report: {args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("host root"), "{err}");
        }
    }
    let out = run(
        &["check", "--host-root", empty.path().to_str().unwrap()],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("proc/stat"), "{err}");
}

#[test]
fn check_help_documents_the_exit_codes() {
    let out = run(&["check", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["Exit codes:", "  4   ", "rc & 4", "  64  "] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
}

#[test]
fn a_missing_host_root_is_an_agent_failure() {
    let out = run(
        &["check", "--host-root", "/nonexistent/node-doctor-root"],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("host root"));
}

/// Issue 28, "honest incomplete": a node whose sources all exist, and which lacks three by
/// design: an nft-only node (pid 1's network view lists no legacy iptables table, and there
/// is no `/run/xtables.lock`: legacy iptables never ran), a kernel without PSI (no
/// `/proc/pressure`), and no container runtime or kubelet (not a node). Every collector
/// completes, each absence is stated in its collector's message with status `ok`, and
/// `check` exits without bit 4.
#[test]
fn a_staged_nft_only_node_without_psi_is_complete_and_exits_without_bit_4() {
    let root = FakeRoot::quiet();
    root.write(
        "/proc/buddyinfo",
        "Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3 \n\
Node 0, zone    DMA32   1184   1062    832    612    422    258    140     71     34     20    457 \n\
Node 0, zone   Normal   4411   3868   3114   2347   1619   1009    555    284    133     66   4833 \n",
    );
    root.write(
        "/proc/vmstat",
        "nr_free_pages 5468686\ncompact_stall 0\ncompact_fail 0\ncompact_success 0\n",
    );
    root.write("/dev/kmsg", "6,1,1000000,-;Linux version 6.18.44\n");
    // Linux 6.18 text (this VM's), trimmed to the columns the readers use where a header names
    // them.
    root.write(
        "/proc/diskstats",
        " 253       0 vda 1000 0 20000 500 2000 0 40000 900 0 1200 1400 0 0 0 0 0 0\n",
    );
    root.write("/proc/locks", "");
    root.write("/proc/sys/kernel/osrelease", "6.18.44\n");
    root.write("/proc/sys/net/netfilter/nf_conntrack_max", "262144\n");
    root.write("/proc/sys/net/netfilter/nf_conntrack_buckets", "65536\n");
    root.write(
        "/proc/1/net/stat/nf_conntrack",
        "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n\
00000010  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000000\n\
00000010  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000000\n",
    );
    root.write(
        "/proc/1/net/snmp",
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 1200 3 17 1300 11 0 0 0 0\n",
    );
    root.write(
        "/proc/1/net/udp",
        "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n",
    );
    root.write(
        "/proc/1/net/netstat",
        "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPBacklogDrop\nTcpExt: 0 0 0 0\n",
    );
    // nft-only: the legacy table lists exist (ip_tables loaded) and are empty.
    root.write("/proc/1/net/ip_tables_names", "");
    root.write("/proc/sys/fs/file-nr", "1184\t0\t2470938\n");
    root.write("/proc/sys/fs/nr_open", "1048576\n");
    root.write("/proc/1/net/stat/arp_cache", "entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n00000002 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         00000000         00000000       00000000            00000000\n");
    root.write("/proc/sys/net/ipv4/neigh/default/gc_thresh1", "128\n");
    root.write("/proc/sys/net/ipv4/neigh/default/gc_thresh2", "512\n");
    root.write("/proc/sys/net/ipv4/neigh/default/gc_thresh3", "1024\n");
    root.write(
        "/proc/1/net/sockstat",
        "sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\n",
    );
    root.write("/proc/sys/net/ipv4/tcp_mem", "288459\t384612\t576918\n");
    root.write("/proc/sys/net/ipv4/tcp_max_orphans", "131072\n");
    root.write("/proc/net/softnet_stat", "002a31dc 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n002dd379 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000\n");
    root.write("/sys/class/net/lo/type", "772\n");
    root.write("/proc/1/net/ip6_tables_names", "");
    let check = |format: Option<&str>| {
        let mut args = vec![
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--interval",
            "100ms",
            "--node-name",
            "nft-1",
        ];
        if let Some(f) = format {
            args.extend(["--format", f]);
        }
        run(&args, &[])
    };
    let out = check(Some("json"));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["complete"], true, "{v:#}");
    assert_eq!(v["incomplete"], serde_json::json!([]), "{v:#}");
    let code = out.status.code().unwrap();
    assert_eq!(code & 4, 0, "no incomplete bit: {code}: {v:#}");
    assert_eq!(code, expected_exit(&v));
    let collectors = v["collectors"].as_array().unwrap();
    assert_eq!(
        collectors.len(),
        collectors::registry::COLLECTORS.len(),
        "{v:#}"
    );
    let message = |name: &str| {
        let c = collectors.iter().find(|c| c["name"] == name).unwrap();
        assert_eq!(c["status"], "ok", "{c}");
        c["message"].as_str().unwrap_or_default().to_string()
    };
    for name in ["conntrack", "kernel", "memory"] {
        message(name);
    }
    let m = message("iptables");
    assert!(m.contains("nft-only") && m.contains("xtables.lock"), "{m}");
    let m = message("load");
    assert!(
        m.contains("/proc/pressure") && m.contains("PSI is off"),
        "{m}"
    );
    let m = message("disk");
    assert!(m.contains("not a node"), "{m}");
    let m = message("runtime");
    assert!(m.contains("no container runtime or kubelet"), "{m}");
    // The table: each note on its collector's line, and no "incomplete" line.
    let out = check(None);
    assert_eq!(out.status.code().unwrap() & 4, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("incomplete"), "{text}");
    assert!(text.contains("an nft-only node has no lock"), "{text}");

    // The same node where pid 1's network view is refused to be read: the iptables
    // collector cannot tell nft-only from a legacy node whose lock is missing, and says so.
    root.fifo("/proc/1/net/ip_tables_names");
    let out = check(Some("json"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["incomplete"], serde_json::json!(["iptables"]), "{v:#}");
    assert_eq!(out.status.code().unwrap() & 4, 4);
}

/// `--no-probes`: the reach collector touches no network and says so. A staged kube-proxy's
/// health endpoint is a listener of this test on 127.0.0.1: with the flag it sees no
/// connection; without it (the control) the probe connects and the check is quiet.
#[test]
fn no_probes_touches_no_network() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&connections);
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let body = r#"{"lastUpdated": "2026-11-27 10:00:00 +0000 UTC","currentTime": "2026-11-27 10:00:00 +0000 UTC", "nodeEligible": true}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let root = FakeRoot::quiet();
    let stat = "4242 (kube-proxy) S 1 4242 4242 0 -1 4194560 100 0 0 0 10 0 0 0 20 0 12 0 500 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    root.write("/proc/4242/comm", "kube-proxy\n");
    root.write("/proc/4242/stat", stat);
    root.write(
        "/proc/4242/cmdline",
        &format!("/usr/local/bin/kube-proxy\0--healthz-bind-address={addr}\0"),
    );
    let reach = |extra: &[&str]| -> Value {
        let mut args = vec![
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--collector",
            "reach",
        ];
        args.extend_from_slice(extra);
        let out = run(&args, &[]);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(v["collectors"][0]["name"], "reach", "{v:#}");
        v
    };
    let v = reach(&["--no-probes"]);
    let c = &v["collectors"][0];
    assert_eq!(c["status"], "ok", "{v:#}");
    assert_eq!(c["message"], "probes are off (--no-probes)", "{v:#}");
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v:#}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    // The control: the same node probed.
    let v = reach(&[]);
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v:#}");
    assert!(connections.load(Ordering::SeqCst) >= 1, "{v:#}");
}

/// Writes a host file of `root` whole (a temporary file renamed over it), so a collector never
/// reads it half written.
fn replace(root: &FakeRoot, host_path: &str, text: &str) {
    let p = root.path(host_path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    let tmp = p.with_extension("staging");
    std::fs::write(&tmp, text).expect("write staged file");
    std::fs::rename(&tmp, &p).expect("rename staged file");
}

const POD_UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";
const CONTAINER: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

/// The handbook's sick node (002, 节点高负载排障处理): 24 CPUs, load 34.6, 7.9% iowait, sda
/// busy 100% over 10 s of the host's clock, 28 tasks blocked, mysqld (a host service) the
/// top writer, php-fpm in a pod writing too, the kubelet, jbd2 in D state. `later`: the
/// second sample, 10 s of uptime after the first.
fn stage_saturated_disk(root: &FakeRoot, later: bool) {
    let k = u64::from(later);
    replace(root, "/sys/devices/system/cpu/online", "0-23\n");
    replace(
        root,
        "/proc/uptime",
        &format!("{}.00 1899800.00\n", 86_340 + 10 * k),
    );
    replace(
        root,
        "/proc/loadavg",
        if later {
            "33.00 35.29 35.59 2/679 31300\n"
        } else {
            "34.64 35.80 35.76 1/679 31245\n"
        },
    );
    // 10 s × 24 CPUs = 24,000 ticks: 15.6% us, 1.7% sy, 74.7% id, 7.9% wa, 0.1% si.
    let t = [
        5_000_000 + 3744 * k,
        1000,
        600_000 + 408 * k,
        20_000_000 + 17_928 * k,
        900_000 + 1896 * k,
        0,
        20_000 + 24 * k,
        0,
    ];
    replace(
        root,
        "/proc/stat",
        &format!(
            "cpu  {} {} {} {} {} {} {} {} 0 0\nctxt 1000\nbtime 1700000000\nprocesses 5000\nprocs_running {}\nprocs_blocked 28\n",
            t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], 1 + k
        ),
    );
    // sda: 4 reads and 1789 writes in the 10 s, busy all of it (atop's DSK line).
    replace(
        root,
        "/proc/diskstats",
        &format!(
            "   8       0 sda {} 70 {} {} {} 50 {} {} 12 {} {}\n",
            231_000 + 4 * k,
            18_610_000 + 32 * k,
            500_000 + 20 * k,
            1_789_000 + 1789 * k,
            28_700_000 + 58_163 * k,
            9_980_000 + 178_900 * k,
            9_990_000 + 10_000 * k,
            34_000_000 + 200_000 * k
        ),
    );
    let pod = format!("/kubepods/burstable/pod{POD_UID}/{CONTAINER}");
    // pid, comm, state, ppid, CPU ticks, (read, written) bytes, block-IO delay ticks, cgroup.
    type Staged<'a> = (u32, &'a str, char, u32, u64, (u64, u64), u64, String);
    let procs: [Staged; 4] = [
        (
            9783,
            "mysqld",
            'S',
            1,
            1_112_256 + 1965 * k,
            (7_618_420_736 + 4096 * k, 224_365_039_616 + 1_376_256 * k),
            50_000 + 400 * k,
            "12:blkio:/system.slice/mysqld.service\n1:name=systemd:/system.slice/mysqld.service\n"
                .to_string(),
        ),
        (
            5596,
            "php-fpm",
            'S',
            5500,
            1200 + 72 * k,
            (0, 2_000_000 + 983_040 * k),
            0,
            format!("12:blkio:{pod}\n1:name=systemd:{pod}\n"),
        ),
        (
            812,
            "kubelet",
            'S',
            1,
            60_000 + 40 * k,
            (0, 4096),
            0,
            "1:name=systemd:/system.slice/kubelet.service\n".to_string(),
        ),
        (
            880,
            "jbd2/sda5-8",
            'D',
            2,
            4000 + k,
            (0, 0),
            20_000 + 350 * k,
            String::new(),
        ),
    ];
    for (pid, comm, state, ppid, ticks, (read, written), blkio, cgroup) in procs {
        let dir = format!("/proc/{pid}");
        replace(
            root,
            &format!("{dir}/stat"),
            &format!(
                "{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 {ticks} 0 0 0 20 0 1 0 4321 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 {blkio} 0 0\n"
            ),
        );
        replace(
            root,
            &format!("{dir}/io"),
            &format!("rchar: {read}\nwchar: {written}\nsyscr: 1\nsyscw: 1\nread_bytes: {read}\nwrite_bytes: {written}\ncancelled_write_bytes: 0\n"),
        );
        replace(root, &format!("{dir}/comm"), &format!("{comm}\n"));
        replace(root, &format!("{dir}/cgroup"), &cgroup);
        replace(
            root,
            &format!("{dir}/wchan"),
            if state == 'D' { "io_schedule" } else { "0" },
        );
    }
    if !later {
        std::fs::create_dir_all(root.path(&format!("/var/log/pods/shop_web-7c9d_{POD_UID}")))
            .expect("mkdir pod log dir");
        let link = root.path(&format!(
            "/var/log/containers/web-7c9d_shop_php-fpm-{CONTAINER}.log"
        ));
        std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(
            format!("/var/log/pods/shop_web-7c9d_{POD_UID}/php-fpm/0.log"),
            link,
        )
        .expect("symlink container log");
    }
}

/// `check --interval 3s` on a staged sick node whose files change between its two samples
/// (the test waits for the first sample's debug line, then stages the second): the saturated
/// disk's finding names mysqld, the top writer, as a host process outside Kubernetes, and
/// php-fpm with its pod. Before the first sample took a baseline, it named no process.
#[test]
fn check_names_the_writer_behind_a_saturated_disk_between_its_samples() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let root = FakeRoot::quiet();
    stage_saturated_disk(&root, false);
    let out_dir = tempfile::tempdir().expect("tempdir");
    let stdout = out_dir.path().join("stdout");
    /// Kills the check when the test returns or panics.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Reaped(
        Command::new(crate::support::shipped_bin())
            .args(["check", "--host-root"])
            .arg(root.root())
            .args([
                "--node-name",
                "e2e-node",
                "--interval",
                "3s",
                "--format",
                "json",
                "--collector",
                "load",
                "--log-level",
                "debug",
            ])
            .env_remove("NODE_NAME")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node-doctor check"),
    );
    let stderr = child.0.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no first sample ({e}): {log:#?}"));
        let first_done = line.contains("run finished") && line.contains("collector=\"load\"");
        log.push(line);
        if first_done {
            break;
        }
    }
    // The second sample comes 3 s after the first finished.
    stage_saturated_disk(&root, true);
    let status = loop {
        if let Some(st) = child.0.try_wait().expect("try_wait") {
            break st;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = reader.join();
    log.extend(rx.try_iter());
    let log = log.join("\n");
    let text = std::fs::read_to_string(&stdout).expect("stdout");
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("check: not JSON ({e}): {text}\nstderr: {log}"));
    assert_eq!(status.code(), Some(expected_exit(&v)), "{v:#}");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "load.io_bound" && f["subject"] == "sda")
        .unwrap_or_else(|| {
            panic!("no load.io_bound on sda (was the second sample staged in time?):\n{v:#}\n{log}")
        });
    assert_eq!(f["severity"], "warning");
    let ev = &f["evidence"];
    assert_eq!(ev["busy_percent"].as_f64(), Some(100.0), "{f:#}");
    assert_eq!(ev["window_seconds"].as_f64(), Some(10.0), "{f:#}");
    assert_eq!(ev["top_io_comm"], "mysqld", "{f:#}\n{log}");
    assert_eq!(ev["top_io_pid"].as_f64(), Some(9783.0));
    assert_eq!(ev["top_io_origin"], "host");
    assert_eq!(
        ev["top_io_write_bytes_per_second"].as_f64(),
        Some(137_625.6)
    );
    assert_eq!(ev["top_io_io_wait_percent"].as_f64(), Some(40.0));
    assert_eq!(ev["top_io_outside_kubernetes"], "mysqld");
    let top = ev["top_io_processes"].as_str().expect("top_io_processes");
    assert!(
        top.starts_with(
            "mysqld (pid 9783, host process outside Kubernetes, cgroup /system.slice/mysqld.service); \
             php-fpm (pid 5596, pod shop/web-7c9d container php-fpm"
        ),
        "{top}"
    );
    let commands: Vec<&str> = f["remediation"]["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(commands.contains(&"systemctl status 9783"), "{commands:?}");
    // The first sample read the processes (28 tasks blocked on IO) for the second.
    assert!(
        log.contains("reading per-process detail") && log.contains("reason=\"procs_blocked\""),
        "{log}"
    );
    let hp = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "load.host_process" && f["subject"] == "mysqld");
    assert!(hp.is_some(), "no load.host_process for mysqld:\n{v:#}");
}
