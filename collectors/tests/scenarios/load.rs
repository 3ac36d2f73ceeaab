//! Scenario tests of the `load` collector: fake hosts staging the handbook's 节点高负载排障处理
//! situations (two samples 10 s apart, timed by /proc/uptime), plus the real-kernel fio test.

use collectors::finding::{Evidence, Severity};
use collectors::load::{Escalation, LoadCollector, LoadConfig, Thresholds};
use collectors::{Collection, Collector, Finding, Status};

use crate::support::{ctx, root_or_skip, FakeHost};

const UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";
const CID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

/// CPU ticks in /proc/stat column order: user nice system idle iowait irq softirq steal.
type Ticks = [u64; 8];

fn stat_text(total: Ticks, cpus: &[Ticks], running: u64, blocked: u64) -> String {
    let line = |name: &str, t: &Ticks| {
        format!(
            "{name} {} {} {} {} {} {} {} {} 0 0\n",
            t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]
        )
    };
    let mut s = line("cpu ", &total);
    for (i, c) in cpus.iter().enumerate() {
        s.push_str(&line(&format!("cpu{i}"), c));
    }
    s.push_str(&format!(
        "intr 0\nctxt 1000\nbtime 1700000000\nprocesses 5000\nprocs_running {running}\nprocs_blocked {blocked}\nsoftirq 0\n"
    ));
    s
}

fn add(a: Ticks, b: Ticks) -> Ticks {
    let mut o = a;
    for i in 0..8 {
        o[i] += b[i];
    }
    o
}

/// A `/proc/<pid>/stat` line (fields 1–22 meaningful, the rest zero).
fn pid_stat(
    pid: u32,
    comm: &str,
    state: char,
    ppid: u32,
    utime: u64,
    stime: u64,
    start: u64,
) -> String {
    pid_stat_blkio(pid, comm, state, ppid, (utime, stime), start, 0)
}

/// Like [`pid_stat`], with field 42 (`delayacct_blkio_ticks`) set.
fn pid_stat_blkio(
    pid: u32,
    comm: &str,
    state: char,
    ppid: u32,
    (utime, stime): (u64, u64),
    start: u64,
    blkio: u64,
) -> String {
    format!(
        "{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 {blkio} 0 0\n"
    )
}

fn pid_io(read: u64, write: u64) -> String {
    format!("rchar: {read}\nwchar: {write}\nsyscr: 1\nsyscw: 1\nread_bytes: {read}\nwrite_bytes: {write}\ncancelled_write_bytes: 0\n")
}

struct Proc<'a> {
    pid: u32,
    comm: &'a str,
    state: char,
    ppid: u32,
    ticks: (u64, u64),
    io: (u64, u64),
    cgroup: &'a str,
    /// Block-IO delay of the main thread (`stat` field 42), clock ticks.
    blkio: u64,
}

fn write_proc(h: &FakeHost, p: &Proc) {
    let dir = format!("/proc/{}", p.pid);
    h.write(
        &format!("{dir}/stat"),
        pid_stat_blkio(p.pid, p.comm, p.state, p.ppid, p.ticks, 4321, p.blkio),
    );
    h.write(&format!("{dir}/io"), pid_io(p.io.0, p.io.1));
    h.write(&format!("{dir}/comm"), format!("{}\n", p.comm));
    h.write(&format!("{dir}/cgroup"), p.cgroup);
    h.write(
        &format!("{dir}/wchan"),
        if p.state == 'D' { "io_schedule" } else { "0" },
    );
}

fn only<'a>(c: &'a Collection, id: &str) -> Vec<&'a Finding> {
    c.findings.iter().filter(|f| f.id == id).collect()
}

fn ev<'a>(f: &'a Finding, k: &str) -> &'a Evidence {
    f.evidence
        .get(k)
        .unwrap_or_else(|| panic!("{} lacks evidence {k}: {:?}", f.id, f.evidence))
}

fn num(f: &Finding, k: &str) -> f64 {
    ev(f, k)
        .as_f64()
        .unwrap_or_else(|| panic!("{k} not a number"))
}

fn text(f: &Finding, k: &str) -> String {
    ev(f, k).to_string()
}

fn metric(c: &Collection, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
    let labels: Vec<(&str, &str)> = label.into_iter().collect();
    crate::support::find_metric(c, name, &labels).map(|m| m.value)
}

/// How php-fpm runs on the handbook's node (its top lists a php-fpm under mysqld).
struct PhpFpm<'a> {
    /// Its `/proc/<pid>/cgroup`.
    cgroup: &'a str,
    /// Bytes it writes per 10 s window.
    writes: u64,
}

/// php-fpm as a quiet systemd service.
const PHP_FPM_SERVICE: PhpFpm = PhpFpm {
    cgroup: "1:name=systemd:/system.slice/php-fpm.service\n",
    writes: 0,
};

/// Stages the handbook's node at its first sample (`later` false) or 10 s later: 24 CPUs,
/// load 34.6, 7.9% wa (17.9% on cpu0/cpu1), sda busy 100% with 4 reads and 1789 writes in
/// 10 s (atop's DSK line), 28 tasks blocked, no PSI, mysqld (a database installed on the host,
/// outside Kubernetes) the top writer, php-fpm as `php` says.
fn stage_handbook(h: &FakeHost, later: bool, php: &PhpFpm) {
    h.write("/sys/devices/system/cpu/online", "0-23\n");
    // top's per-CPU lines of the handbook, ×10 = ticks over 10 s of one CPU.
    let per_cpu_pct: [[u64; 8]; 4] = [
        [295, 0, 37, 488, 179, 0, 1, 0], // cpu0/cpu1: 17.9% wa
        [218, 0, 24, 602, 155, 0, 1, 0], // cpu12/13: ~15% wa
        [240, 0, 28, 683, 49, 0, 0, 0],  // others: ~5% wa
        [208, 0, 19, 744, 28, 0, 1, 0],
    ];
    let pick = |i: usize| match i {
        0 | 1 => per_cpu_pct[0],
        12 | 13 => per_cpu_pct[1],
        2..=11 => per_cpu_pct[2],
        _ => per_cpu_pct[3],
    };
    let base: Ticks = [5_000_000, 1000, 600_000, 20_000_000, 900_000, 0, 20_000, 0];
    let cpus_a: Vec<Ticks> = (0..24)
        .map(|_| [208_000, 40, 25_000, 833_000, 37_500, 0, 800, 0])
        .collect();
    let cpus_b: Vec<Ticks> = cpus_a
        .iter()
        .enumerate()
        .map(|(i, c)| add(*c, pick(i)))
        .collect();
    // Overall over 10 s × 24 CPUs = 24000 ticks: 15.6 us, 1.7 sy, 74.7 id, 7.9 wa, 0.1 si.
    let delta: Ticks = [3744, 0, 408, 17928, 1896, 0, 24, 0];

    let mysqld_cg = "12:blkio:/system.slice/mysqld.service\n11:cpu,cpuacct:/system.slice/mysqld.service\n1:name=systemd:/system.slice/mysqld.service\n";
    let nginx_cg = "1:name=systemd:/system.slice/nginx.service\n";
    let procs = |later: bool| {
        let k = u64::from(later);
        vec![
            Proc {
                pid: 1,
                comm: "systemd",
                state: 'S',
                ppid: 0,
                ticks: (500, 300),
                io: (10_000, 20_000),
                cgroup: "1:name=systemd:/init.scope\n",
                blkio: 0,
            },
            Proc {
                pid: 9783,
                comm: "mysqld",
                state: 'S',
                ppid: 1,
                ticks: (981_254 + 1944 * k, 131_002 + 21 * k),
                io: (7_618_420_736 + 4096 * k, 224_365_039_616 + 1_376_256 * k),
                cgroup: mysqld_cg,
                blkio: 50_000 + 400 * k,
            },
            Proc {
                pid: 1930,
                comm: "flush-8:0",
                state: 'S',
                ppid: 2,
                ticks: (0, 9000 + 3 * k),
                io: (0, 50_000 + 217_088 * k),
                cgroup: "",
                blkio: 10_000 + 833 * k,
            },
            Proc {
                pid: 880,
                comm: "jbd2/sda5-8",
                state: 'D',
                ppid: 2,
                ticks: (0, 4000 + k),
                io: (0, 0),
                cgroup: "",
                blkio: 20_000 + 350 * k,
            },
            Proc {
                pid: 5896,
                comm: "nginx",
                state: 'S',
                ppid: 5890,
                ticks: (2000 + 20 * k, 500 + 4 * k),
                io: (100_000, 300_000 + 155_648 * k),
                cgroup: nginx_cg,
                blkio: 1000 + 69 * k,
            },
            Proc {
                pid: 5596,
                comm: "php-fpm",
                state: 'S',
                ppid: 5500,
                ticks: (1000 + 62 * k, 200 + 10 * k),
                io: (0, 2_000_000 + php.writes * k),
                cgroup: php.cgroup,
                blkio: 0,
            },
            // A Kubernetes node: its kubelet runs.
            Proc {
                pid: 812,
                comm: "kubelet",
                state: 'S',
                ppid: 1,
                ticks: (40_000 + 30 * k, 20_000 + 10 * k),
                io: (0, 4096),
                cgroup: "1:name=systemd:/system.slice/kubelet.service\n",
                blkio: 0,
            },
        ]
    };
    {
        let k = u64::from(later);
        h.write(
            "/proc/uptime",
            if later {
                "86350.00 1900000.00\n"
            } else {
                "86340.00 1899800.00\n"
            },
        );
        h.write(
            "/proc/loadavg",
            if later {
                "33.00 35.29 35.59 2/679 31300\n"
            } else {
                "34.64 35.80 35.76 1/679 31245\n"
            },
        );
        let (total, cpus) = if later {
            (add(base, delta), &cpus_b)
        } else {
            (base, &cpus_a)
        };
        h.write("/proc/stat", stat_text(total, cpus, 1 + k, 28));
        // 14-field lines, as Linux 3.10 prints them. sda: 4 reads, 1789 writes, 2.84 MiB/s
        // written, busy the whole 10 s, avio 5.58 ms (10000 ms / 1793 IOs).
        // Disk counters: reads, sectors read, ms reading, writes, sectors written, ms writing,
        // in flight, io ticks ms, weighted ms.
        let line = |maj: u32, min: u32, name: &str| {
            format!(
                "{maj:>4} {min:>7} {name} {} 70 {} {} {} 50 {} {} 12 {} {}\n",
                231_000 + 4 * k,
                18_610_000 + 32 * k,
                500_000 + 20 * k,
                1_789_000 + 1789 * k,
                28_700_000 + 58_163 * k,
                9_980_000 + 178_900 * k,
                9_990_000 + 10_000 * k,
                34_000_000 + 200_000 * k
            )
        };
        let loop0 = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0\n";
        h.write(
            "/proc/diskstats",
            format!("{}{}{loop0}", line(8, 0, "sda"), line(8, 5, "sda5")),
        );
        for p in procs(later) {
            write_proc(h, &p);
        }
    }
}

/// The handbook's node: io_bound on sda naming mysqld, a host process, over the window
/// between the two samples (`serve`'s bars: load1 at 1.4 per CPU reaches the first run's).
#[test]
fn handbook_atop_example_is_io_bound_on_sda_with_mysqld_on_the_host() {
    let h = FakeHost::new();
    let stage = |later: bool| stage_handbook(&h, later, &PHP_FPM_SERVICE);
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage(false);
    let first = crate::support::collect(&mut c, &ctx());
    assert!(
        first.findings.is_empty(),
        "no rates on the first run: {:?}",
        first.findings
    );
    assert_eq!(metric(&first, "node_doctor_load_load1", None), Some(34.64));
    assert_eq!(metric(&first, "node_doctor_load_cpus", None), Some(24.0));
    assert_eq!(
        metric(
            &first,
            "node_doctor_load_cpu_percent",
            Some(("mode", "iowait"))
        ),
        None
    );
    stage(true);
    let out = crate::support::collect(&mut c, &ctx());
    // PSI absent (pre-4.20 kernel, or psi=0): complete, and the message says so.
    assert!(out.status.is_complete(), "{:?}", out.status);
    assert!(
        matches!(&out.status, Status::Noted(m) if m.contains("/proc/pressure") && m.contains("PSI is off")),
        "{:?}",
        out.status
    );

    // The IO-bound finding names sda and mysqld, a host process.
    let io = only(&out, "load.io_bound");
    assert_eq!(
        io.len(),
        1,
        "only the whole disk sda, not sda5 or loop0: {io:?}"
    );
    let f = io[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "sda");
    assert_eq!(num(f, "busy_percent"), 100.0);
    assert_eq!(num(f, "writes_per_second"), 178.9);
    assert_eq!(num(f, "reads_per_second"), 0.4);
    assert!((num(f, "write_bytes_per_second") / 1048576.0 - 2.84).abs() < 0.01);
    assert!((num(f, "service_ms") - 5.577).abs() < 0.01);
    assert_eq!(num(f, "queue_size"), 20.0);
    assert_eq!(num(f, "cpu_iowait_percent"), 7.9);
    assert_eq!(text(f, "top_io_comm"), "mysqld");
    assert_eq!(num(f, "top_io_pid"), 9783.0);
    assert_eq!(text(f, "top_io_origin"), "host");
    assert_eq!(text(f, "top_io_cgroup"), "/system.slice/mysqld.service");
    assert_eq!(num(f, "top_io_write_bytes_per_second"), 137625.6);
    // A 4.14 kernel has no task_delayacct sysctl: delay accounting is on, and ranks by the
    // time each process waited for IO (iotop's IO>): mysqld 40%, then the kernel threads
    // flush-8:0 83.3% and jbd2 35% (named after the processes); nginx's 6.9% and 15 KB/s
    // are not material.
    assert_eq!(text(f, "io_wait_method"), "delayacct");
    assert_eq!(num(f, "top_io_io_wait_percent"), 40.0);
    assert_eq!(text(f, "top_io_outside_kubernetes"), "mysqld");
    assert_eq!(
        text(f, "top_io_processes"),
        "mysqld (pid 9783, host process outside Kubernetes, cgroup /system.slice/mysqld.service); \
         flush-8:0 (pid 1930, kernel thread); jbd2/sda5-8 (pid 880, kernel thread)"
    );
    assert_eq!(text(f, "kubelet_running"), "true");
    assert_eq!(text(f, "blocked_tasks"), "jbd2/sda5-8(880) in io_schedule");
    assert!(
        f.summary.en.contains("Disk sda was busy 100%"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary
            .en
            .contains("mysqld (pid 9783, host process outside Kubernetes"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.zh.contains("磁盘 sda"));
    for cmd in [
        "top",
        "atop",
        "iotop -oPa",
        "iostat -dx 2 5 /dev/sda",
        "cat /proc/9783/io",
        "systemctl status 9783",
        "kubectl cordon node-1",
    ] {
        assert!(
            f.remediation.commands.iter().any(|c| c == cmd),
            "missing {cmd:?} in {:?}",
            f.remediation.commands
        );
    }
    let src = f.remediation.source.as_ref().unwrap();
    assert_eq!(
        (src.doc, src.section),
        ("002_af370464fa0f13dd.txt", "节点高负载排障处理")
    );

    // wa 7.9% over the only window: info (above 1%, below the 10% warning); cpu0 at 17.9%.
    let wa = only(&out, "load.iowait");
    assert_eq!(wa.len(), 1);
    assert_eq!(wa[0].severity, Severity::Info);
    assert_eq!(num(wa[0], "iowait_percent"), 7.9);
    assert_eq!(num(wa[0], "max_cpu_iowait_percent"), 17.9);
    assert_eq!(num(wa[0], "max_iowait_cpu"), 0.0);
    assert_eq!(
        text(wa[0], "cpus_above_warning"),
        "cpu0 17.9%, cpu1 17.9%, cpu12 15.5%, cpu13 15.5%"
    );

    // The handbook's other cause: mysqld runs outside Kubernetes.
    let hp = only(&out, "load.host_process");
    let mysqld = hp
        .iter()
        .find(|f| f.subject == "mysqld")
        .expect("mysqld named as host process");
    assert_eq!(mysqld.severity, Severity::Warning);
    assert_eq!(num(mysqld, "pid"), 9783.0);
    assert!(mysqld
        .remediation
        .commands
        .contains(&"systemctl status 9783".to_string()));
    assert!(
        hp.iter()
            .all(|f| f.subject != "flush-8:0" && f.subject != "jbd2/sda5-8"),
        "kernel threads are not services: {hp:?}"
    );

    // 34.6 on 24 CPUs is 1.4× — under the 2× limit; us+sy 17% is not CPU-bound.
    assert!(only(&out, "load.high_load").is_empty());
    assert!(only(&out, "load.cpu_bound").is_empty());

    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_busy_percent",
            Some(("device", "sda"))
        ),
        Some(100.0)
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_busy_percent",
            Some(("device", "sda5"))
        ),
        None
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_writes_per_second",
            Some(("device", "sda"))
        ),
        Some(178.9)
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_queue_size",
            Some(("device", "sda"))
        ),
        Some(20.0)
    );
    assert!(
        (metric(
            &out,
            "node_doctor_load_cpu_percent",
            Some(("mode", "iowait"))
        )
        .unwrap()
            - 7.9)
            .abs()
            < 1e-9
    );
    assert_eq!(
        metric(&out, "node_doctor_load_procs_blocked", None),
        Some(28.0)
    );
}

/// `check`'s load collector (`Escalation::at_the_limits`, what `node-doctor check` runs) on
/// the handbook's node, with php-fpm in a pod writing 96 KiB/s: its two samples are 10 s
/// apart and the host files change only between them (a staged root stands still during any
/// catch-up). The first sample has no window, but 28 tasks blocked on IO are a sign of IO
/// trouble (load1 at 1.4 per CPU is none: under the limit, and the catch-up finds CPU
/// culprits): it reads every process as a baseline, so the second, which escalates on the
/// saturated disk, names mysqld over the whole window. Before, the first read
/// no process and the second's catch-up over unchanged files named none ("no process
/// accounts for a material share").
#[test]
fn check_names_the_writer_behind_a_saturated_disk_and_the_pod_beside_it() {
    let h = FakeHost::new();
    h.mkdir(&format!("/var/log/pods/shop_web-7c9d_{UID}"));
    h.symlink(
        &format!("/var/log/pods/shop_web-7c9d_{UID}/php-fpm/0.log"),
        &format!("/var/log/containers/web-7c9d_shop_php-fpm-{CID}.log"),
    );
    let in_pod = format!(
        "12:blkio:/kubepods/burstable/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}\n1:name=systemd:/kubepods/burstable/pod{UID}/{CID}\n"
    );
    let php = PhpFpm {
        cgroup: &in_pod,
        writes: 983_040,
    };
    let host = h.node();
    let mut c = LoadCollector::new(host.clone(), check_config());
    stage_handbook(&h, false, &php);
    let (first, built) = collect_counting(&mut c, &host);
    assert!(first.findings.is_empty(), "{:?}", first.findings);
    assert!(
        built > 0,
        "the first sample reads the processes as a baseline"
    );
    assert_eq!(c.tracked_processes(), 7);
    stage_handbook(&h, true, &php);
    let out = c.collect(&ctx());
    assert_eq!(
        c.catch_up_span(),
        None,
        "measured over the window, no catch-up"
    );

    let io = only(&out, "load.io_bound");
    assert_eq!(io.len(), 1, "{:?}", out.findings);
    let f = io[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "sda");
    assert_eq!(num(f, "busy_percent"), 100.0);
    assert_eq!(num(f, "window_seconds"), 10.0);
    assert!(
        f.conditions.contains("disk_saturated"),
        "{:?}",
        f.conditions
    );
    assert!(f.conditions.contains("by_delayacct"), "{:?}", f.conditions);
    // mysqld, the top writer, outside Kubernetes: 1,376,256 bytes written and 4 KiB read in
    // the 10 s, 40% of the window waiting for IO (400 of 1,000 ticks).
    assert_eq!(text(f, "top_io_comm"), "mysqld");
    assert_eq!(num(f, "top_io_pid"), 9783.0);
    assert_eq!(text(f, "top_io_origin"), "host");
    assert_eq!(text(f, "top_io_cgroup"), "/system.slice/mysqld.service");
    assert_eq!(num(f, "top_io_write_bytes_per_second"), 137625.6);
    assert_eq!(num(f, "top_io_read_bytes_per_second"), 409.6);
    assert_eq!(num(f, "top_io_io_wait_percent"), 40.0);
    assert_eq!(text(f, "top_io_outside_kubernetes"), "mysqld");
    // Its share of the processes' bytes: mysqld 138,035 B/s of 138,035 + php-fpm 98,304 +
    // flush 21,709 + nginx 15,565 = 273,613 B/s (50%); php-fpm 36%, material.
    let mysqld_bps =
        num(f, "top_io_write_bytes_per_second") + num(f, "top_io_read_bytes_per_second");
    let share = mysqld_bps / (mysqld_bps + 98_304.0 + 21_708.8 + 15_564.8);
    assert!((share - 0.504).abs() < 0.001, "{share}");
    // php-fpm is named with its pod; the kernel threads after the processes.
    assert_eq!(
        text(f, "top_io_processes"),
        format!(
            "mysqld (pid 9783, host process outside Kubernetes, cgroup /system.slice/mysqld.service); \
             php-fpm (pid 5596, pod shop/web-7c9d container php-fpm uid {UID}); \
             flush-8:0 (pid 1930, kernel thread); jbd2/sda5-8 (pid 880, kernel thread)"
        )
    );
    assert_eq!(
        text(f, "process_scope"),
        "all processes (cgroup counters unavailable: no cgroup IO or CPU counters under /sys/fs/cgroup): 7 read"
    );
    assert!(
        f.summary.en.contains("Disk sda was busy 100%"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary
            .en
            .contains("mysqld (pid 9783, host process outside Kubernetes"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.en.contains("pod shop/web-7c9d"),
        "{}",
        f.summary.en
    );
    for cmd in [
        "iotop -oPa",
        "iostat -dx 2 5 /dev/sda",
        "cat /proc/9783/io",
        "systemctl status 9783",
        "kubectl cordon node-1",
    ] {
        assert!(
            f.remediation.commands.iter().any(|c| c == cmd),
            "missing {cmd:?} in {:?}",
            f.remediation.commands
        );
    }
    // mysqld, a service outside Kubernetes, is the handbook's other cause; php-fpm, in a
    // pod, is not one.
    let hp = only(&out, "load.host_process");
    assert_eq!(hp.len(), 1, "{hp:?}");
    assert_eq!(hp[0].subject, "mysqld");
    assert_eq!(hp[0].severity, Severity::Warning);
    assert_eq!(text(hp[0], "resource"), "io");
    assert_eq!(num(hp[0], "io_wait_percent"), 40.0);
    assert!(hp[0]
        .remediation
        .commands
        .contains(&"systemctl status 9783".to_string()));
}

/// The load collector as `node-doctor check` configures it (`agent/src/cli.rs`'s `for_check`).
fn check_config() -> LoadConfig {
    LoadConfig {
        thresholds: Thresholds {
            escalation: Escalation::default().at_the_limits(),
            ..Thresholds::default()
        },
        ..LoadConfig::default()
    }
}

/// A healthy node under `check`'s bars: neither sample reads a process file (the first
/// sample's baseline costs nothing without a sign of IO trouble), nor does a first sample
/// whose load1 is past serve's bar (1.2 per CPU); a task blocked on the first sample is
/// enough for it to read them.
#[test]
fn a_quiet_check_reads_no_process_file_and_a_blocked_task_takes_a_baseline() {
    let mut node = Node::new();
    let host = node.h.node();
    let mut c = LoadCollector::new(host.clone(), check_config());
    for sample in 0..2 {
        node.advance(0.30, 5, 0, 0, 1);
        let (out, built) = collect_counting(&mut c, &host);
        assert_eq!(built, 0, "sample {sample}");
        assert!(out.findings.is_empty(), "{:?}", out.findings);
    }
    let mut c = LoadCollector::new(host.clone(), check_config());
    node.advance(2.40, 60, 0, 0, 2);
    let (_, built) = collect_counting(&mut c, &host);
    assert_eq!(built, 0, "load1 1.2 per CPU on the first sample");
    let mut c = LoadCollector::new(host.clone(), check_config());
    node.advance(0.30, 5, 0, 1, 1);
    let (_, built) = collect_counting(&mut c, &host);
    assert!(built > 0, "one blocked task on the first sample");
    assert_eq!(c.tracked_processes(), 3);
}

/// A pod's java process burns three of four CPUs: CPU-bound, naming the pod by UID and name.
#[test]
fn cpu_bound_names_the_pods_process_with_its_uid() {
    let out = cpu_busy_pod_node("9.10 8.00 5.90 8/410 6990\n", "9.50 8.10 6.00 9/412 7000\n");
    cpu_bound_assertions(&out);
}

/// CPUs 95% busy while the run queue stays below one task per CPU: busy, not saturated — no
/// `load.cpu_bound` (a short `check` window on a busy but healthy host must not warn).
#[test]
fn busy_cpus_without_a_queue_are_not_cpu_bound() {
    let out = cpu_busy_pod_node("2.10 2.00 1.90 3/410 6990\n", "2.50 2.10 2.00 4/412 7000\n");
    assert!(
        only(&out, "load.cpu_bound").is_empty(),
        "{:?}",
        out.findings
    );
    assert!(only(&out, "load.high_load").is_empty());
}

/// A 4-CPU node whose CPUs are 95% busy for 10 s (80% us, 15% sy), java in a pod the top
/// consumer; `loadavg` as given for the first and second sample.
fn cpu_busy_pod_node(load_first: &str, load_later: &str) -> Collection {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-3\n");
    h.mkdir(&format!("/var/log/pods/shop_web-7c9d_{UID}"));
    h.symlink(
        &format!("/var/log/pods/shop_web-7c9d_{UID}/java/0.log"),
        &format!("/var/log/containers/web-7c9d_shop_java-{CID}.log"),
    );
    let cg = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope\n",
        UID.replace('-', "_")
    );
    let base: Ticks = [100_000, 0, 20_000, 400_000, 1000, 0, 500, 0];
    // 10 s × 4 CPUs = 4000 ticks: 80% us, 15% sy, 5% id.
    let delta: Ticks = [3200, 0, 600, 200, 0, 0, 0, 0];
    let stage = |later: bool| {
        let k = u64::from(later);
        h.write(
            "/proc/uptime",
            if later {
                "1010.00 10.00\n"
            } else {
                "1000.00 10.00\n"
            },
        );
        h.write("/proc/loadavg", if later { load_later } else { load_first });
        let t = if later { add(base, delta) } else { base };
        h.write("/proc/stat", stat_text(t, &[], 9, 0));
        h.write(
            "/proc/diskstats",
            format!(
                " 253 0 vda 100 0 800 10 {} 0 {} 100 0 {} 200\n",
                500 + 10 * k,
                4000 + 80 * k,
                300 + 20 * k
            ),
        );
        write_proc(
            &h,
            &Proc {
                pid: 4242,
                comm: "java",
                state: 'R',
                ppid: 4200,
                ticks: (50_000 + 2700 * k, 5000 + 300 * k),
                io: (0, 0),
                cgroup: &cg,
                blkio: 0,
            },
        );
        write_proc(
            &h,
            &Proc {
                pid: 4200,
                comm: "containerd-shim",
                state: 'S',
                ppid: 1,
                ticks: (100 + 5 * k, 100),
                io: (0, 0),
                cgroup: "0::/system.slice/containerd.service\n",
                blkio: 0,
            },
        );
        write_proc(
            &h,
            &Proc {
                pid: 812,
                comm: "kubelet",
                state: 'S',
                ppid: 1,
                ticks: (9000 + 40 * k, 3000 + 10 * k),
                io: (0, 4096 * k),
                cgroup: "0::/system.slice/kubelet.service\n",
                blkio: 0,
            },
        );
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage(false);
    crate::support::collect(&mut c, &ctx());
    stage(true);
    crate::support::collect(&mut c, &ctx())
}

fn cpu_bound_assertions(out: &Collection) {
    let cb = only(out, "load.cpu_bound");
    assert_eq!(cb.len(), 1, "{:?}", out.findings);
    let f = cb[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(num(f, "cpu_busy_percent"), 95.0);
    assert_eq!(text(f, "top_cpu_comm"), "java");
    assert_eq!(num(f, "top_cpu_cpu_percent"), 300.0);
    assert_eq!(text(f, "top_cpu_origin"), "pod");
    assert_eq!(text(f, "top_cpu_pod_uid"), UID);
    assert_eq!(text(f, "top_cpu_pod"), "shop/web-7c9d");
    assert_eq!(text(f, "top_cpu_container_id"), CID);
    assert!(
        f.summary.en.contains(&format!(
            "java (pid 4242, pod shop/web-7c9d container java uid {UID})"
        )),
        "{}",
        f.summary.en
    );
    assert!(f
        .remediation
        .commands
        .contains(&"kubectl -n shop describe pod web-7c9d".to_string()));
    assert!(f.remediation.commands.contains(&"top -p 4242".to_string()));

    // load1 9.5 and 9.1 on 4 CPUs: ≥2× on both samples -> warning, cause cpu.
    let hl = only(out, "load.high_load");
    assert_eq!(hl.len(), 1);
    assert_eq!(hl[0].severity, Severity::Warning);
    assert_eq!(num(hl[0], "load1_per_cpu"), 2.275);
    assert_eq!(text(hl[0], "cause"), "cpu");
    // The pod and the node's own Kubernetes components are not "outside Kubernetes".
    assert!(
        only(out, "load.host_process").is_empty(),
        "{:?}",
        only(out, "load.host_process")
    );
    assert!(only(out, "load.io_bound").is_empty());
    assert!(only(out, "load.iowait").is_empty());
}

/// An idle node: nothing to report, metrics still there.
#[test]
fn idle_node_yields_nothing() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    h.write("/proc/pressure/io", "some avg10=0.10 avg60=0.05 avg300=0.01 total=2000\nfull avg10=0.10 avg60=0.05 avg300=0.01 total=1500\n");
    h.write("/proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    let stage = |later: bool| {
        let k = u64::from(later);
        h.write("/proc/uptime", format!("{}.00 1.00\n", 500 + 15 * k));
        h.write("/proc/loadavg", "0.08 0.10 0.09 1/120 3000\n");
        // 15 s × 2 CPUs = 3000 ticks: 2% us, 1% sy, 97% id.
        let t = add(
            [9865, 0, 4229, 63419, 248, 0, 35, 38],
            [60 * k, 0, 30 * k, 2910 * k, 0, 0, 0, 0],
        );
        h.write("/proc/stat", stat_text(t, &[], 1, 0));
        h.write("/proc/diskstats", format!(" 254 0 vda 11369 5506 2657002 10591 {} 35587 {} 59747 0 {} 70730 3692 130 44840 390 18 1\n 253 0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 4389 + 6 * k, 12680472 + 96 * k, 5860 + 30 * k));
        write_proc(
            &h,
            &Proc {
                pid: 1,
                comm: "systemd",
                state: 'S',
                ppid: 0,
                ticks: (100 + k, 50),
                io: (0, 0),
                cgroup: "0::/init.scope\n",
                blkio: 0,
            },
        );
        write_proc(
            &h,
            &Proc {
                pid: 733,
                comm: "sshd",
                state: 'S',
                ppid: 1,
                ticks: (20 + 2 * k, 10),
                io: (0, 8192 * k),
                cgroup: "0::/system.slice/ssh.service\n",
                blkio: 0,
            },
        );
    };
    let host = h.node();
    let mut c = LoadCollector::new(host.clone(), LoadConfig::default());
    stage(false);
    crate::support::collect(&mut c, &ctx());
    stage(true);
    let out = crate::support::collect(&mut c, &ctx());
    assert_eq!(out.status, Status::Ok);
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_busy_percent",
            Some(("device", "vda"))
        ),
        Some(0.2)
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_disk_busy_percent",
            Some(("device", "zram0"))
        ),
        None
    );
    assert_eq!(
        metric(&out, "node_doctor_load_cpu_percent", Some(("mode", "idle"))),
        Some(97.0)
    );
    assert_eq!(
        metric(
            &out,
            "node_doctor_load_pressure_avg10_percent",
            Some(("resource", "io"))
        ),
        Some(0.1)
    );
    assert_eq!(
        out.metrics
            .iter()
            .filter(|m| m.name == "node_doctor_load_pressure_avg60_percent")
            .count(),
        6
    );
    // Every whole-node signal under its bar: no process file was read on either run (sshd's
    // 8 KiB are not looked at), and the metric says so.
    assert_eq!(host.per_process_paths(), 0);
    assert_eq!(
        metric(&out, "node_doctor_load_process_detail", None),
        Some(0.0)
    );
    let obs = c.last_observation().unwrap();
    assert!(obs.top_io.is_empty(), "{:?}", obs.top_io);
    assert_eq!(obs.kubelet_running, None);
    assert_eq!(c.tracked_processes(), 0);
}

/// A pid that exits between samples, one that appears, and a pid reused by a new process.
#[test]
fn pids_that_exit_or_are_reused_between_samples_are_not_errors() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/loadavg", "0.10 0.10 0.10 1/100 100\n");
    h.write("/proc/diskstats", "");
    // An idle node: the passes over the processes this test is about are made on every run.
    let mut c = LoadCollector::new(h.node(), always_read_processes());
    h.write("/proc/uptime", "100.00 1.00\n");
    h.write(
        "/proc/stat",
        stat_text([100, 0, 100, 1000, 0, 0, 0, 0], &[], 1, 0),
    );
    write_proc(
        &h,
        &Proc {
            pid: 500,
            comm: "old",
            state: 'S',
            ppid: 1,
            ticks: (9000, 9000),
            io: (1 << 30, 1 << 30),
            cgroup: "0::/user.slice\n",
            blkio: 0,
        },
    );
    write_proc(
        &h,
        &Proc {
            pid: 501,
            comm: "exits",
            state: 'S',
            ppid: 1,
            ticks: (10, 10),
            io: (0, 0),
            cgroup: "0::/user.slice\n",
            blkio: 0,
        },
    );
    let first = crate::support::collect(&mut c, &ctx());
    assert!(first.status.is_complete(), "{:?}", first.status);
    assert_eq!(c.tracked_processes(), 2);

    std::fs::remove_dir_all(h.path("/proc/501")).unwrap();
    // pid 500 now belongs to a new process (new start time, smaller counters).
    h.write("/proc/500/stat", pid_stat(500, "new", 'R', 1, 5, 5, 9999));
    h.write("/proc/500/io", pid_io(4096, 0));
    write_proc(
        &h,
        &Proc {
            pid: 502,
            comm: "born",
            state: 'R',
            ppid: 1,
            ticks: (50, 0),
            io: (0, 8192),
            cgroup: "0::/user.slice\n",
            blkio: 0,
        },
    );
    // A pid listed but gone before its files are read: a directory without files.
    h.mkdir("/proc/503");
    h.write("/proc/uptime", "110.00 2.00\n");
    h.write(
        "/proc/stat",
        stat_text([200, 0, 150, 2950, 0, 0, 0, 0], &[], 1, 0),
    );
    let out = crate::support::collect(&mut c, &ctx());
    assert!(
        out.status.is_complete(),
        "vanished pids are not errors: {:?}",
        out.status
    );
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    assert_eq!(c.tracked_processes(), 2, "501 and 503 are not kept");
    let obs = c.last_observation().unwrap();
    assert!(
        obs.top_io.is_empty() && obs.top_cpu.is_empty(),
        "no deltas for a reused or new pid: {:?} {:?}",
        obs.top_io,
        obs.top_cpu
    );
}

/// Tasks stuck in D state on remote storage: no local disk busy, PSI io high, D tasks with wchan.
#[test]
fn blocked_tasks_on_slow_storage_are_io_bound_without_a_busy_disk() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/pressure/io", "some avg10=61.20 avg60=55.00 avg300=40.00 total=99999999\nfull avg10=48.50 avg60=40.00 avg300=30.00 total=88888888\n");
    let stage = |later: bool| {
        let k = u64::from(later);
        h.write("/proc/uptime", format!("{}.00 1.00\n", 100 + 10 * k));
        h.write("/proc/loadavg", "6.10 5.00 3.00 1/200 900\n");
        h.write(
            "/proc/stat",
            stat_text(
                add(
                    [100, 0, 100, 1000, 500, 0, 0, 0],
                    [40 * k, 0, 20 * k, 1540 * k, 400 * k, 0, 0, 0],
                ),
                &[],
                1,
                5,
            ),
        );
        h.write(
            "/proc/diskstats",
            " 253 0 vda 100 0 800 10 500 0 4000 100 0 300 200\n",
        );
        for pid in 600..605 {
            write_proc(
                &h,
                &Proc {
                    pid,
                    comm: "rsync",
                    state: 'D',
                    ppid: 1,
                    ticks: (10, 10),
                    io: (0, 0),
                    cgroup: "0::/system.slice/backup.service\n",
                    blkio: 0,
                },
            );
            h.write(&format!("/proc/{pid}/wchan"), "nfs_wait_bit_killable");
        }
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage(false);
    crate::support::collect(&mut c, &ctx());
    stage(true);
    let out = crate::support::collect(&mut c, &ctx());
    let io = only(&out, "load.io_bound");
    assert_eq!(io.len(), 1, "{:?}", out.findings);
    assert_eq!(io[0].subject, "");
    assert_eq!(io[0].severity, Severity::Warning);
    assert_eq!(num(io[0], "procs_blocked"), 5.0);
    assert_eq!(num(io[0], "psi_io_full_avg10_percent"), 48.5);
    assert!(text(io[0], "blocked_tasks").contains("rsync(600) in nfs_wait_bit_killable"));
    // iowait 20% -> warning; load 6.1 on 2 CPUs = 3× -> warning, cause io.
    assert_eq!(only(&out, "load.iowait")[0].severity, Severity::Warning);
    let hl = only(&out, "load.high_load");
    assert_eq!(text(hl[0], "cause"), "io");
    // No task_delayacct sysctl (a pre-5.14 kernel: delay accounting on by default), yet no
    // delay at all while five tasks sit in D state (NFS waits are not block IO): the IO wait
    // is sampled instead, and the rsyncs, in D state in every sample, are named.
    assert_eq!(text(io[0], "io_wait_method"), "d_state_sampling");
    assert_eq!(text(io[0], "top_io_comm"), "rsync");
    assert_eq!(num(io[0], "top_io_io_wait_percent"), 100.0);
    // No kubelet process on this host: the cordon advice says so.
    assert_eq!(text(io[0], "kubelet_running"), "false");
    assert!(io[0].remediation.commands.ends_with(&[
        "kubectl cordon node-1".to_string(),
        "systemctl status kubelet".to_string()
    ]));
    assert!(io[0]
        .remediation
        .steps
        .iter()
        .any(|s| s.en.starts_with("No kubelet process runs on this node")));
}

/// How the kernel accounts IO wait in [`throttled_storage`].
#[derive(Clone, Copy, PartialEq)]
enum Accounting {
    /// `kernel.task_delayacct=1` before the jobs started: field 42 tells their wait.
    On,
    /// Off: D states are sampled.
    Off,
    /// Turned on after the fio jobs started: the kernel accounts only the `dd` forked later
    /// (a little delay), the jobs show none while they sit in D state.
    OnAfterTheJobsStarted,
}

/// Slow storage as in the issue: four fio jobs blocked in D state on a throttled disk, a few
/// KiB/s each, and a `dd` writing 1.6 MB/s through the page cache. Returns the second
/// collection.
fn throttled_storage(accounting: Accounting) -> Collection {
    let delayacct = accounting == Accounting::On;
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write(
        "/proc/sys/kernel/task_delayacct",
        if accounting == Accounting::Off {
            "0\n"
        } else {
            "1\n"
        },
    );
    let dd_blkio = if accounting == Accounting::OnAfterTheJobsStarted {
        5
    } else {
        0
    };
    let stage = |later: bool| {
        let k = u64::from(later);
        h.write("/proc/uptime", format!("{}.00 1.00\n", 500 + 10 * k));
        h.write("/proc/loadavg", "5.20 4.80 3.00 1/200 900\n");
        // 2 CPUs over 10 s: 2000 ticks, 81% iowait.
        h.write(
            "/proc/stat",
            stat_text(
                add(
                    [1000, 0, 500, 10_000, 5000, 0, 0, 0],
                    [40 * k, 0, 40 * k, 300 * k, 1620 * k, 0, 0, 0],
                ),
                &[],
                1,
                4,
            ),
        );
        h.write(
            "/proc/diskstats",
            " 253 0 vda 100 0 800 10 500 0 4000 100 0 300 200\n",
        );
        let mut procs = vec![
            Proc {
                pid: 1,
                comm: "init",
                state: 'S',
                ppid: 0,
                ticks: (100 + k, 100),
                io: (0, 4096 + 4096 * k),
                cgroup: "0::/init.scope\n",
                blkio: 0,
            },
            Proc {
                pid: 700,
                comm: "dd",
                state: 'R',
                ppid: 1,
                ticks: (10 + 20 * k, 10 + 150 * k),
                io: (0, 16_000_000 * k),
                cgroup: "0::/user.slice\n",
                blkio: dd_blkio * k,
            },
            Proc {
                pid: 812,
                comm: "kubelet",
                state: 'S',
                ppid: 1,
                ticks: (4000 + 5 * k, 2000 + 2 * k),
                io: (0, 0),
                cgroup: "0::/system.slice/kubelet.service\n",
                blkio: 0,
            },
        ];
        for pid in 801..=804u32 {
            procs.push(Proc {
                pid,
                comm: "fio",
                state: 'D',
                ppid: 800,
                ticks: (5 + k, 5 + k),
                io: (0, 655_360 * k),
                cgroup: "0::/user.slice\n",
                // 9.8 s of the 10 s waiting for block IO, when delay accounting counts it.
                blkio: if delayacct { 100 + 980 * k } else { 0 },
            });
        }
        for p in procs {
            write_proc(&h, &p);
            if p.comm == "fio" {
                h.write(&format!("/proc/{}/wchan", p.pid), "blkdev_direct_IO");
            }
        }
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage(false);
    crate::support::collect(&mut c, &ctx());
    stage(true);
    crate::support::collect(&mut c, &ctx())
}

#[test]
fn delay_accounting_names_the_blocked_fio_jobs_over_a_page_cache_writer() {
    let out = throttled_storage(Accounting::On);
    let io = only(&out, "load.io_bound");
    assert_eq!(io.len(), 1, "{:?}", out.findings);
    let f = io[0];
    assert_eq!(text(f, "io_wait_method"), "delayacct");
    assert_eq!(text(f, "top_io_comm"), "fio");
    assert_eq!(num(f, "top_io_pid"), 801.0);
    assert_eq!(num(f, "top_io_io_wait_percent"), 98.0);
    // dd (1.6 MB/s, no wait) is named after the four fio jobs; pid 1 (410 B/s) not at all.
    let named = text(f, "top_io_processes");
    assert!(named.starts_with("fio (pid 801, "), "{named}");
    assert!(
        named.ends_with("dd (pid 700, host process outside Kubernetes, cgroup /user.slice)"),
        "{named}"
    );
    assert!(!named.contains("init"), "{named}");
    assert!(text(f, "blocked_tasks").contains("fio(801) in blkdev_direct_IO"));
    assert!(
        f.summary.en.contains(
            "top IO by time waiting for IO (delay accounting, as iotop's IO> column): fio (pid 801, host process outside Kubernetes, cgroup /user.slice, waiting for IO 98% of the time, 64.0 KiB/s)"
        ),
        "{}",
        f.summary.en
    );
    assert!(f
        .remediation
        .commands
        .contains(&"cat /proc/801/io".to_string()));
    // The iowait finding and the high-load finding point at the same process.
    assert_eq!(num(only(&out, "load.iowait")[0], "top_io_pid"), 801.0);
    assert_eq!(num(only(&out, "load.high_load")[0], "top_pid"), 801.0);
    // Host processes: fio for its IO; dd only for its CPU (17% of a CPU while the load is
    // high), never as an IO culprit; init not at all.
    let hp: Vec<(String, String)> = only(&out, "load.host_process")
        .iter()
        .map(|f| (f.subject.clone(), text(f, "resource")))
        .collect();
    assert_eq!(
        hp,
        [("fio".into(), "io".into()), ("dd".into(), "cpu".into())],
        "{hp:?}"
    );
}

#[test]
fn without_delay_accounting_d_state_samples_name_the_blocked_fio_jobs() {
    let out = throttled_storage(Accounting::Off);
    let f = only(&out, "load.io_bound")[0];
    assert_eq!(text(f, "io_wait_method"), "d_state_sampling");
    assert_eq!(text(f, "top_io_comm"), "fio");
    assert_eq!(
        num(f, "top_io_io_wait_percent"),
        100.0,
        "in D state in every sample"
    );
    assert!(
        f.summary
            .en
            .contains("top IO by time in D state (sampled, as delay accounting is off or counted no delay): fio (pid 801,"),
        "{}",
        f.summary.en
    );
    assert!(f
        .remediation
        .commands
        .contains(&"sysctl -w kernel.task_delayacct=1".to_string()));
    assert_eq!(text(f, "kubelet_running"), "true");
}

/// The idle VM: iowait just over 1% on two windows in a row, and the only IO is
/// pid 1's, a few KiB/s: no culprit is named, and no host-process finding.
#[test]
fn pid_1_with_near_zero_io_is_never_named() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/sys/kernel/task_delayacct", "0\n");
    let stage = |n: u64| {
        h.write("/proc/uptime", format!("{}.00 1.00\n", 1000 + 10 * n));
        h.write("/proc/loadavg", "0.40 0.30 0.20 1/120 900\n");
        // 2000 ticks per window: 3% iowait.
        h.write(
            "/proc/stat",
            stat_text(
                add(
                    [1000, 0, 500, 10_000, 300, 0, 0, 0],
                    [20 * n, 0, 20 * n, 1900 * n, 60 * n, 0, 0, 0],
                ),
                &[],
                1,
                0,
            ),
        );
        h.write(
            "/proc/diskstats",
            " 253 0 vda 100 0 800 10 500 0 4000 100 0 300 200\n",
        );
        write_proc(
            &h,
            &Proc {
                pid: 1,
                comm: "process_api",
                state: 'S',
                ppid: 0,
                ticks: (100 + 3 * n, 100 + 2 * n),
                io: (0, 40_960 * n),
                cgroup: "0::/\n",
                blkio: 0,
            },
        );
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    for n in 0..3 {
        stage(n);
        let out = crate::support::collect(&mut c, &ctx());
        if n == 2 {
            let wa = only(&out, "load.iowait");
            assert_eq!(wa.len(), 1, "{:?}", out.findings);
            assert!(
                !wa[0].evidence.contains_key("top_io_pid"),
                "{:?}",
                wa[0].evidence
            );
            assert!(
                only(&out, "load.host_process").is_empty(),
                "{:?}",
                out.findings
            );
        }
    }
}

#[test]
fn missing_proc_stat_is_unavailable() {
    let h = FakeHost::new();
    h.write("/proc/loadavg", "0.10 0.10 0.10 1/100 100\n");
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    let out = crate::support::collect(&mut c, &ctx());
    assert!(
        matches!(out.status, Status::Unavailable(ref m) if m.contains("stat")),
        "{:?}",
        out.status
    );
}

/// The whole disk under `path` (`vda` for a file on `/dev/vda` or `/dev/vda1`), from the file's
/// st_dev and `/sys/dev/block/<major>:<minor>`; `None` for tmpfs/overlay (no block device).
fn disk_under(path: &std::path::Path) -> Option<String> {
    let st = nix::sys::stat::stat(path).ok()?;
    let (major, minor) = (
        nix::sys::stat::major(st.st_dev),
        nix::sys::stat::minor(st.st_dev),
    );
    if major == 0 {
        return None;
    }
    let dev = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if dev.join("partition").exists() {
        dev.parent()?.to_path_buf()
    } else {
        dev
    };
    disk.file_name()?.to_str().map(str::to_string)
}

fn have(tool: &str) -> bool {
    std::process::Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Kills the child when the test ends, even on a failed assertion.
struct KillOnDrop(std::process::Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Real kernel: fio writes with direct IO to a file on a real disk while the collector takes
/// two samples 3 s apart; `iostat -dx` measures the same window. Needs root, fio and sysstat.
#[test]
fn real_kernel_fio_direct_writes_show_busy_disk_and_fio_as_host_process() {
    let name = "real_kernel_fio_direct_writes_show_busy_disk_and_fio_as_host_process";
    if !root_or_skip(name) {
        return;
    }
    if !have("fio") || !have("iostat") {
        collectors::skip!("SKIP {name}: needs fio and iostat (Debian packages fio, sysstat)");
        return;
    }
    // /tmp may be tmpfs: use the target directory, which lives on a real filesystem.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(dev) = disk_under(dir.path()) else {
        collectors::skip!(
            "SKIP {name}: {} is not on a block device",
            dir.path().display()
        );
        return;
    };
    let file = dir.path().join("fio.dat");
    let fio = std::process::Command::new("fio")
        .args([
            "--name=node-doctor-load",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=psync",
            "--size=32M",
            "--time_based",
            "--runtime=9",
            "--output=/dev/null",
        ])
        .arg(format!("--filename={}", file.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn fio");
    let fio = KillOnDrop(fio);
    let fio_pid = fio.0.id();
    // Let fio lay out its file and start the timed writes.
    std::thread::sleep(std::time::Duration::from_millis(2500));

    // Other builds on a shared CI machine also write: look at the top 10.
    let config = LoadConfig {
        top_processes: 10,
        ..LoadConfig::default()
    };
    let mut c = LoadCollector::new(
        collectors::Node::new(collectors::HostPaths::new("/")),
        config,
    );
    let iostat = std::process::Command::new("iostat")
        .args(["-dx", "-y", "-o", "JSON", &dev, "3", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn iostat");
    c.collect(&ctx());
    std::thread::sleep(std::time::Duration::from_secs(3));
    let out = c.collect(&ctx());
    let iostat = iostat.wait_with_output().expect("iostat output");
    drop(fio);

    assert!(
        !matches!(out.status, Status::Unavailable(_) | Status::Error(_)),
        "{:?}",
        out.status
    );
    let obs = c.last_observation().expect("second run has a window");
    let disk = obs
        .disks
        .iter()
        .find(|d| d.name == dev)
        .unwrap_or_else(|| panic!("{dev} not among {:?}", obs.disks));
    assert!(disk.busy_percent > 0.0, "{disk:?}");
    assert!(disk.writes_per_second > 0.0, "{disk:?}");
    let fio_c = obs
        .top_io
        .iter()
        .find(|p| p.comm == "fio")
        .unwrap_or_else(|| panic!("fio not among top IO processes: {:?}", obs.top_io));
    assert!(fio_c.write_bytes_per_second > 0.0);
    assert!(
        fio_c.origin.is_outside_kubernetes(),
        "fio runs on the host: {:?}",
        fio_c.origin
    );
    assert_ne!(fio_c.pid, std::process::id());
    eprintln!("fio parent pid {fio_pid}, writer pid {}", fio_c.pid);

    // Cross-check against iostat over the same window.
    let v: serde_json::Value = serde_json::from_slice(&iostat.stdout).expect("iostat JSON");
    let stats = &v["sysstat"]["hosts"][0]["statistics"];
    let d = stats
        .as_array()
        .and_then(|s| s.last())
        .and_then(|s| s["disk"].as_array())
        .and_then(|ds| ds.iter().find(|x| x["disk_device"] == dev.as_str()))
        .unwrap_or_else(|| panic!("{dev} not in iostat output {v}"));
    let util = d["util"].as_f64().unwrap();
    let wps = d["w/s"].as_f64().unwrap();
    eprintln!(
        "{dev}: ours busy {:.1}% w/s {:.1}; iostat util {util:.1}% w/s {wps:.1}",
        disk.busy_percent, disk.writes_per_second
    );
    assert!(
        (disk.busy_percent - util).abs() <= 15.0,
        "busy {} vs iostat {util}",
        disk.busy_percent
    );
    let rel = (disk.writes_per_second - wps).abs() * 100.0 / wps.max(1.0);
    assert!(
        rel <= 15.0,
        "w/s {} vs iostat {wps} ({rel:.1}% apart)",
        disk.writes_per_second
    );
    if disk.busy_percent >= 90.0 {
        let f = out
            .findings
            .iter()
            .find(|f| f.id == "load.io_bound" && f.subject == dev)
            .expect("a ≥90% busy disk is at least a warning");
        assert!(f.severity >= Severity::Warning);
        assert!(
            text(f, "top_io_processes").contains("fio ("),
            "{:?}",
            f.evidence
        );
    }
}

/// A host root whose `/proc/uptime` stands still between samples (a frozen copy of /proc):
/// the window is timed by the agent's clock instead, so rates and the per-mode CPU metrics
/// still appear; an uptime that advances is used as it is.
#[test]
fn frozen_uptime_times_the_window_with_the_agents_clock() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/uptime", "500.00 1.00\n");
    h.write("/proc/loadavg", "0.08 0.10 0.09 1/120 3000\n");
    h.write(
        "/proc/diskstats",
        " 8 0 sda 1000 0 20000 500 2000 0 40000 1000 0 1500 1500 0 0 0 0 0 0\n",
    );
    let before = [9865, 0, 4229, 63419, 248, 0, 35, 38];
    h.write("/proc/stat", stat_text(before, &[], 1, 0));
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    let first = crate::support::collect(&mut c, &ctx());
    assert_eq!(
        metric(
            &first,
            "node_doctor_load_cpu_percent",
            Some(("mode", "user"))
        ),
        None
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    // 60 user ticks of 300 in the window: 20% user, whatever the clock says.
    h.write(
        "/proc/stat",
        stat_text(add(before, [60, 0, 0, 240, 0, 0, 0, 0]), &[], 1, 0),
    );
    let second = crate::support::collect(&mut c, &ctx());
    let user = metric(
        &second,
        "node_doctor_load_cpu_percent",
        Some(("mode", "user")),
    )
    .expect("per-mode CPU metric after two samples");
    assert!((user - 20.0).abs() < 0.01, "user {user}");
    assert!(
        metric(
            &second,
            "node_doctor_load_disk_busy_percent",
            Some(("device", "sda"))
        )
        .is_some(),
        "{:?}",
        second.metrics
    );
}

/// Delay accounting turned on after the jobs started covers only the `dd` forked later: the
/// jobs in D state without any delay are sampled, and still named first.
#[test]
fn tasks_delay_accounting_does_not_cover_are_sampled() {
    let out = throttled_storage(Accounting::OnAfterTheJobsStarted);
    let f = only(&out, "load.io_bound")[0];
    assert_eq!(text(f, "io_wait_method"), "delayacct_and_d_state_sampling");
    assert_eq!(text(f, "top_io_comm"), "fio");
    assert_eq!(num(f, "top_io_io_wait_percent"), 100.0);
    assert!(
        f.summary.en.contains(
            "top IO by time waiting for IO (delay accounting, as iotop's IO> column, and D-state samples for the tasks it does not cover): fio (pid 801,"
        ),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps.iter().any(|s| s
        .en
        .starts_with("Delay accounting covers only the tasks forked after it was turned on")));
}

/// One run of `c`, and how many `<root>/proc/<pid>` paths it built (the processes it read).
fn collect_counting(c: &mut LoadCollector, host: &collectors::node::Node) -> (Collection, u64) {
    let before = host.per_process_paths();
    let out = c.collect(&ctx());
    (out, host.per_process_paths() - before)
}

/// The default config without the catch-up wait (the staged files do not change meanwhile).
fn no_catch_up() -> LoadConfig {
    LoadConfig {
        thresholds: Thresholds {
            escalation: Escalation {
                catch_up: std::time::Duration::ZERO,
                ..Escalation::default()
            },
            ..Thresholds::default()
        },
        ..LoadConfig::default()
    }
}

/// A config that reads every process on every run, as before escalation.
fn always_read_processes() -> LoadConfig {
    LoadConfig {
        thresholds: Thresholds {
            escalation: Escalation::always(),
            ..Thresholds::default()
        },
        ..LoadConfig::default()
    }
}

/// A 2-CPU node whose whole-node files a test advances 10 s per step, with three processes
/// that keep running: `stress` (a host service using 1.5 CPUs whenever `stress_runs`), `sshd`
/// (idle, a little IO) and the kubelet.
struct Node {
    h: FakeHost,
    step: u64,
    ticks: Ticks,
    disk_ms: u64,
    stress_ticks: u64,
}

impl Node {
    fn new() -> Node {
        let h = FakeHost::new();
        h.write("/sys/devices/system/cpu/online", "0-1\n");
        h.write("/proc/sys/kernel/task_delayacct", "0\n");
        Node {
            h,
            step: 0,
            ticks: [10_000, 0, 5000, 100_000, 100, 0, 10, 0],
            disk_ms: 5000,
            stress_ticks: 1000,
        }
    }

    /// The next 10 s: load1, the window's user and iowait shares of the 2000 CPU ticks (the
    /// rest idle), `procs_blocked`, and the disk's busy share of the window (percent).
    fn advance(&mut self, load1: f64, user: u64, iowait: u64, blocked: u64, busy: u64) {
        let h = &self.h;
        self.step += 1;
        let delta: Ticks = [
            20 * user,
            0,
            0,
            20 * (100 - user - iowait),
            20 * iowait,
            0,
            0,
            0,
        ];
        self.ticks = add(self.ticks, delta);
        self.disk_ms += 100 * busy;
        h.write(
            "/proc/uptime",
            format!("{}.00 1.00\n", 1000 + 10 * self.step),
        );
        h.write(
            "/proc/loadavg",
            format!("{load1:.2} {load1:.2} {load1:.2} 1/150 4000\n"),
        );
        h.write("/proc/stat", stat_text(self.ticks, &[], 1, blocked));
        h.write(
            "/proc/diskstats",
            format!(
                " 253 0 vda 100 0 800 10 {} 0 {} {} 0 {} {}\n",
                500 + self.step * busy,
                4000 + 8 * self.step * busy,
                self.disk_ms,
                self.disk_ms,
                self.disk_ms
            ),
        );
        // stress uses 15 s of CPU per 10 s window while the CPUs are busy.
        if user >= 50 {
            self.stress_ticks += 1500;
        }
        let n = self.step;
        for p in [
            Proc {
                pid: 4100,
                comm: "stress",
                state: 'R',
                ppid: 1,
                ticks: (self.stress_ticks, 0),
                io: (0, 0),
                cgroup: "0::/system.slice/stress.service\n",
                blkio: 0,
            },
            Proc {
                pid: 733,
                comm: "sshd",
                state: 'S',
                ppid: 1,
                ticks: (20 + n, 10),
                io: (0, 8192 * n),
                cgroup: "0::/system.slice/ssh.service\n",
                blkio: 0,
            },
            Proc {
                pid: 812,
                comm: "kubelet",
                state: 'S',
                ppid: 1,
                ticks: (4000 + 5 * n, 2000 + 2 * n),
                io: (0, 0),
                cgroup: "0::/system.slice/kubelet.service\n",
                blkio: 0,
            },
        ] {
            write_proc(h, &p);
        }
    }
}

/// (id, severity, top culprit pid) of every finding, sorted: what a run detected.
fn detected(c: &Collection) -> Vec<(String, Severity, String)> {
    let mut v: Vec<(String, Severity, String)> = c
        .findings
        .iter()
        .map(|f| {
            let top = ["top_pid", "top_cpu_pid", "top_io_pid"]
                .iter()
                .find_map(|k| f.evidence.get(*k).map(|e| e.to_string()))
                .unwrap_or_default();
            (format!("{} {}", f.id, f.subject), f.severity, top)
        })
        .collect();
    v.sort();
    v
}

/// Escalation on a staged node: while every whole-node signal is under its bar no process
/// file is read (the per-process paths counted by `HostPaths`); a run whose load1 reaches
/// half the warning limit reads them, the runs after it judge with culprits; a finding keeps
/// the next run escalated, and the run after that is quiet again. A collector that reads
/// every process on every run, fed the same files, detects the same findings on the same
/// runs, naming the same processes.
#[test]
fn a_quiet_node_reads_no_process_file_until_a_signal_reaches_its_bar() {
    let mut node = Node::new();
    let host = node.h.node();
    let config = no_catch_up();
    let mut c = LoadCollector::new(host.clone(), config);
    let mut every_run = LoadCollector::new(node.h.node(), always_read_processes());
    // (load1, user %, iowait %, procs_blocked, disk busy %), whether this run reads the
    // processes, and what it detects.
    type Step = ((f64, u64, u64, u64, u64), bool, &'static [&'static str]);
    let steps: [Step; 9] = [
        // First run and a quiet window: 0.3 on 2 CPUs, 5% user, a few D-state flickers.
        ((0.30, 5, 0, 0, 1), false, &[]),
        ((0.35, 5, 0, 1, 1), false, &[]),
        // load1 1.2 per CPU: at its bar (half the 2× warning); nothing to report yet.
        ((2.40, 60, 0, 0, 2), true, &[]),
        // 2.3 per CPU, CPUs 95% busy: cpu_bound now (high_load needs two samples), naming
        // stress, a service outside Kubernetes.
        (
            (4.60, 95, 0, 0, 2),
            true,
            &["load.cpu_bound", "load.host_process"],
        ),
        (
            (4.80, 95, 0, 0, 2),
            true,
            &["load.cpu_bound", "load.high_load", "load.host_process"],
        ),
        // Quiet again: the run after a finding still reads the processes...
        ((0.50, 5, 0, 0, 1), true, &[]),
        // ...and the next one does not.
        ((0.40, 5, 0, 0, 1), false, &[]),
        // iowait 15% in one window: iowait warning on the same run, read on that run.
        ((0.40, 5, 15, 0, 30), true, &["load.iowait"]),
        ((0.40, 5, 0, 0, 1), true, &[]),
    ];
    for (i, ((load1, user, iowait, blocked, busy), reads, expect)) in steps.iter().enumerate() {
        node.advance(*load1, *user, *iowait, *blocked, *busy);
        let (out, built) = collect_counting(&mut c, &host);
        assert_eq!(built > 0, *reads, "step {i}: {built} per-process paths");
        assert_eq!(
            metric(&out, "node_doctor_load_process_detail", None),
            Some(if *reads { 1.0 } else { 0.0 }),
            "step {i}"
        );
        if !reads {
            assert_eq!(c.tracked_processes(), 0, "step {i}: nothing kept");
        }
        let mut ids: Vec<&str> = out.findings.iter().map(|f| f.id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, *expect, "step {i}: {:?}", out.findings);
        let reference = every_run.collect(&ctx());
        assert_eq!(out.status, reference.status, "step {i}");
        assert_eq!(detected(&out), detected(&reference), "step {i}");
    }
}

/// The onset of trouble within one interval: the previous run read no process, so the run
/// that sees CPUs saturated reads them twice, `catch_up` apart, and names the process that
/// burns a CPU over that span, on that run. The node's whole-node files are staged; its one
/// process is real (a shell busy loop, `<root>/proc/<pid>` a link to the real `/proc/<pid>`).
#[test]
fn the_onset_run_names_the_process_over_a_catch_up_span() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/sys/kernel/task_delayacct", "0\n");
    let burner = KillOnDrop(
        std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn sh"),
    );
    let pid = burner.0.id();
    h.symlink(&format!("/proc/{pid}"), &format!("/proc/{pid}"));
    let stage = |n: u64, load1: &str, busy: u64| {
        h.write("/proc/uptime", format!("{}.00 1.00\n", 1000 + 10 * n));
        h.write("/proc/loadavg", format!("{load1} 1/150 4000\n"));
        let t: Ticks = [
            10_000 + 20 * busy * n,
            0,
            5000,
            100_000 + 20 * (100 - busy) * n,
            0,
            0,
            0,
            0,
        ];
        h.write("/proc/stat", stat_text(t, &[], 1, 0));
    };
    let host = h.node();
    let config = LoadConfig {
        thresholds: Thresholds {
            escalation: Escalation {
                catch_up: std::time::Duration::from_millis(500),
                ..Escalation::default()
            },
            ..Thresholds::default()
        },
        ..LoadConfig::default()
    };
    let mut c = LoadCollector::new(host.clone(), config);
    stage(0, "0.20 0.20 0.20", 5);
    c.collect(&ctx());
    stage(1, "0.20 0.20 0.20", 5);
    let quiet = c.collect(&ctx());
    assert!(quiet.findings.is_empty(), "{:?}", quiet.findings);
    assert_eq!(host.per_process_paths(), 0, "quiet runs read no process");
    // 2.5 on 2 CPUs, 95% busy over the last 10 s: CPU-bound, decided on this run.
    stage(2, "2.50 1.00 0.50", 95);
    let out = c.collect(&ctx());
    assert!(host.per_process_paths() > 0);
    let f = only(&out, "load.cpu_bound");
    assert_eq!(f.len(), 1, "{:?}", out.findings);
    assert_eq!(num(f[0], "top_cpu_pid"), f64::from(pid));
    assert_eq!(text(f[0], "top_cpu_comm"), "sh");
    let cpu = num(f[0], "top_cpu_cpu_percent");
    assert!(
        (10.0..=105.0).contains(&cpu),
        "cpu {cpu}% over the catch-up span"
    );
    assert_eq!(
        c.catch_up_span(),
        Some(std::time::Duration::from_millis(500))
    );
    // The next run follows one that read the processes: no catch-up.
    stage(3, "2.60 1.10 0.60", 95);
    c.collect(&ctx());
    assert_eq!(c.catch_up_span(), None);
    drop(burner);
}

/// `check` samples 1 s apart by default, with a collector timeout of that interval: the
/// catch-up of an onset in its second sample waits a quarter of the window, not 1 s.
#[test]
fn the_catch_up_wait_is_at_most_a_quarter_of_the_window() {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    let stage = |uptime: &str, iowait: u64| {
        h.write("/proc/uptime", format!("{uptime} 1.00\n"));
        h.write("/proc/loadavg", "0.20 0.20 0.20 1/150 4000\n");
        let t: Ticks = [10_000, 0, 5000, 100_000 + 200 - iowait, iowait, 0, 0, 0];
        h.write("/proc/stat", stat_text(t, &[], 1, 0));
    };
    let mut c = LoadCollector::new(h.node(), LoadConfig::default());
    stage("1000.00", 0);
    c.collect(&ctx());
    assert_eq!(
        c.catch_up_span(),
        None,
        "a first run has nothing to catch up"
    );
    // One second later, 15% iowait over that second.
    stage("1001.00", 30);
    let out = c.collect(&ctx());
    assert_eq!(only(&out, "load.iowait").len(), 1, "{:?}", out.findings);
    assert_eq!(
        c.catch_up_span(),
        Some(std::time::Duration::from_millis(250))
    );
}

/// How a cgroup scenario's hierarchy is laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    /// cgroup v2 at /sys/fs/cgroup (recursive `io.stat`, `cpu.stat`).
    V2,
    /// cgroup v1: `blkio` and `cpuacct` mounted apart (this VM), v2 at `unified` without io.
    V1,
}

/// What a cgroup scenario stages besides the throttled pod.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Extra {
    Nothing,
    /// 10 MB/s written on vda that no cgroup below the root accounts for.
    UnattributedWriter,
    /// No block IO in any cgroup; two tasks sit in D state on NFS.
    NfsHang,
}

const POD_CGROUP: &str =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8f2a1c4e_3b7d_4e8f_9a0b_1c2d3e4f5a6b.slice";
/// Quiet processes in the root cgroup (the bench's 2,000 `sleep`s, fewer).
const QUIET: u32 = 200;

/// A node with a cgroup tree: `QUIET` sleeping processes and the kubelet, quiet; a pod's
/// container whose four fio jobs sit in D state writing 64 KiB/s each (2.6 MB over the 10 s
/// window, accounted in the container's cgroup and on vda); `extra`. Three runs 10 s apart
/// (the first is the cgroups' baseline; the second reads the candidates' tasks for the
/// first time, twice `catch_up` apart, here 0 s on staged files that do not change; the
/// third measures them over the window). Returns the collections and the per-process paths
/// built by each run.
fn cgroup_node(layout: Layout, extra: Extra, config: LoadConfig) -> (Vec<Collection>, Vec<u64>) {
    let h = FakeHost::new();
    h.write("/sys/devices/system/cpu/online", "0-1\n");
    h.write("/proc/sys/kernel/task_delayacct", "0\n");
    h.write("/sys/block/vda/dev", "253:0\n");
    let container = format!("{POD_CGROUP}/cri-containerd-{CID}.scope");
    let fio_pids: Vec<u32> = (801..=804).collect();
    let quiet_pids: Vec<u32> = (2000..2000 + QUIET).collect();
    let nfs_pid = 900u32;
    let stage = |k: u64| {
        h.write("/proc/uptime", format!("{}.00 1.00\n", 500 + 10 * k));
        h.write("/proc/loadavg", "5.20 4.80 3.00 1/200 900\n");
        let blocked = if extra == Extra::NfsHang { 2 } else { 4 };
        h.write(
            "/proc/stat",
            stat_text(
                add(
                    [1000, 0, 500, 10_000, 5000, 0, 0, 0],
                    [40 * k, 0, 40 * k, 300 * k, 1620 * k, 0, 0, 0],
                ),
                &[],
                1,
                blocked,
            ),
        );
        // vda: the pod's 2.6 MB per window (5,120 sectors), and the unattributed writer's.
        let fio_bytes = if extra == Extra::NfsHang {
            0
        } else {
            2_621_440 * k
        };
        let extra_bytes = if extra == Extra::UnattributedWriter {
            100_000_000 * k
        } else {
            0
        };
        h.write(
            "/proc/diskstats",
            format!(
                " 253 0 vda 100 0 800 10 500 0 {} 100 0 300 200\n",
                4000 + (fio_bytes + extra_bytes) / 512
            ),
        );
        let cg = |path: &str| match layout {
            Layout::V2 => format!("0::{path}\n"),
            Layout::V1 => format!("9:blkio:{path}\n4:cpuacct:{path}\n1:name=systemd:{path}\n"),
        };
        let mut procs = vec![
            Proc {
                pid: 1,
                comm: "init",
                state: 'S',
                ppid: 0,
                ticks: (100, 100),
                io: (0, 0),
                cgroup: "0::/\n",
                blkio: 0,
            },
            Proc {
                pid: 812,
                comm: "kubelet",
                state: 'S',
                ppid: 1,
                ticks: (4000, 2000),
                io: (0, 0),
                cgroup: "0::/system.slice/kubelet.service\n",
                blkio: 0,
            },
        ];
        for &pid in &quiet_pids {
            procs.push(Proc {
                pid,
                comm: "sleep",
                state: 'S',
                ppid: 1,
                ticks: (1, 1),
                io: (0, 0),
                cgroup: "0::/\n",
                blkio: 0,
            });
        }
        for pid in [nfs_pid, nfs_pid + 1]
            .into_iter()
            .filter(|_| extra == Extra::NfsHang)
        {
            procs.push(Proc {
                pid,
                comm: "rsync",
                state: 'D',
                ppid: 1,
                ticks: (3, 3),
                io: (0, 0),
                cgroup: "0::/\n",
                blkio: 0,
            });
        }
        let container_cg = cg(&container);
        for &pid in &fio_pids {
            procs.push(Proc {
                pid,
                comm: "fio",
                state: if extra == Extra::NfsHang { 'S' } else { 'D' },
                ppid: 800,
                ticks: (5 + k, 5 + k),
                io: (
                    0,
                    if extra == Extra::NfsHang {
                        0
                    } else {
                        655_360 * k
                    },
                ),
                cgroup: &container_cg,
                blkio: 0,
            });
        }
        for p in &procs {
            write_proc(&h, p);
        }
        // The hierarchy: the root holds init, the sleeps and the NFS task; the kubelet has
        // its service; the pod's container the fio jobs.
        let quiet_list = |extra_pids: &[u32]| -> String {
            std::iter::once(1)
                .chain(quiet_pids.iter().copied())
                .chain(extra_pids.iter().copied())
                .map(|p| format!("{p}\n"))
                .collect()
        };
        let root_tasks = if extra == Extra::NfsHang {
            quiet_list(&[nfs_pid, nfs_pid + 1])
        } else {
            quiet_list(&[])
        };
        let fio_tasks: String = fio_pids.iter().map(|p| format!("{p}\n")).collect();
        let cpu_usec = |base: u64| base + 40_000 * k;
        match layout {
            Layout::V2 => {
                let r = "/sys/fs/cgroup";
                h.write(
                    &format!("{r}/cgroup.controllers"),
                    "cpuset cpu io memory pids\n",
                );
                h.write(&format!("{r}/cgroup.procs"), root_tasks);
                h.write(
                    &format!("{r}/cpu.stat"),
                    format!("usage_usec {}\n", cpu_usec(9_000_000) + 800_000 * k),
                );
                let io = |bytes: u64| {
                    format!(
                        "253:0 rbytes=0 wbytes={bytes} rios=0 wios={} dbytes=0 dios=0\n",
                        bytes / 4096
                    )
                };
                for (dir, tasks, bytes, usec) in [
                    ("/system.slice", String::new(), 0, 2_000_000),
                    (
                        "/system.slice/kubelet.service",
                        "812\n".to_string(),
                        0,
                        2_000_000,
                    ),
                    (
                        "/kubepods.slice",
                        String::new(),
                        fio_bytes,
                        cpu_usec(1_000_000),
                    ),
                    (
                        "/kubepods.slice/kubepods-burstable.slice",
                        String::new(),
                        fio_bytes,
                        cpu_usec(1_000_000),
                    ),
                    (POD_CGROUP, String::new(), fio_bytes, cpu_usec(1_000_000)),
                    (
                        container.as_str(),
                        fio_tasks.clone(),
                        fio_bytes,
                        cpu_usec(1_000_000),
                    ),
                ] {
                    h.write(&format!("{r}{dir}/cgroup.procs"), tasks);
                    h.write(&format!("{r}{dir}/io.stat"), io(bytes));
                    h.write(
                        &format!("{r}{dir}/cpu.stat"),
                        format!("usage_usec {usec}\n"),
                    );
                }
            }
            Layout::V1 => {
                h.write("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
                // blkio: not recursive; the root's own tasks did no IO on vda (throttled,
                // so the kernel lists it).
                let b = "/sys/fs/cgroup/blkio";
                let blkio = |bytes: u64| {
                    format!("253:0 Read 0\n253:0 Write {bytes}\n253:0 Sync {bytes}\n253:0 Async 0\n253:0 Discard 0\n253:0 Total {bytes}\nTotal {bytes}\n")
                };
                h.write(&format!("{b}/blkio.throttle.io_service_bytes"), blkio(0));
                h.write(&format!("{b}/cgroup.procs"), root_tasks.clone());
                for (dir, tasks, bytes) in [
                    ("/system.slice", String::new(), 0),
                    ("/system.slice/kubelet.service", "812\n".to_string(), 0),
                    ("/kubepods.slice", String::new(), 0),
                    ("/kubepods.slice/kubepods-burstable.slice", String::new(), 0),
                    (POD_CGROUP, String::new(), 0),
                    (container.as_str(), fio_tasks.clone(), fio_bytes),
                ] {
                    h.write(&format!("{b}{dir}/cgroup.procs"), tasks);
                    h.write(
                        &format!("{b}{dir}/blkio.throttle.io_service_bytes"),
                        blkio(bytes),
                    );
                }
                // cpuacct: recursive nanoseconds.
                let c = "/sys/fs/cgroup/cpuacct";
                h.write(&format!("{c}/cgroup.procs"), root_tasks);
                h.write(
                    &format!("{c}/cpuacct.usage"),
                    format!("{}\n", (cpu_usec(12_000_000) + 800_000 * k) * 1000),
                );
                h.write(&format!("{c}{container}/cgroup.procs"), fio_tasks.clone());
                h.write(
                    &format!("{c}{container}/cpuacct.usage"),
                    format!("{}\n", cpu_usec(1_000_000) * 1000),
                );
            }
        }
    };
    let host = h.node();
    let mut c = LoadCollector::new(host.clone(), config);
    let mut outs = Vec::new();
    let mut built = Vec::new();
    for k in 0..3 {
        stage(k);
        let before = host.per_process_paths();
        // Not recorded as golden files: each test runs the node under several layouts.
        outs.push(c.collect(&ctx()));
        built.push(host.per_process_paths() - before);
    }
    (outs, built)
}

/// `LoadConfig` of the cgroup scenarios: no catch-up wait (the staged files do not change),
/// and the same with cgroup-first attribution off (every process, as before it).
fn cgroup_configs() -> (LoadConfig, LoadConfig) {
    let first = LoadConfig {
        io_wait_sample_interval: std::time::Duration::ZERO,
        ..no_catch_up()
    };
    let every = LoadConfig {
        cgroups: None,
        ..first.clone()
    };
    (first, every)
}

/// The evidence a person acts on, of the io_bound finding.
fn io_culprit_evidence(c: &Collection) -> Vec<(String, String)> {
    let f = only(c, "load.io_bound")[0];
    [
        "io_wait_method",
        "top_io_pid",
        "top_io_comm",
        "top_io_origin",
        "top_io_pod_uid",
        "top_io_container_id",
        "top_io_io_wait_percent",
        "top_io_write_bytes_per_second",
        "top_io_processes",
        "blocked_tasks",
        "kubelet_running",
    ]
    .iter()
    .map(|k| {
        (
            k.to_string(),
            f.evidence
                .get(*k)
                .map(|e| e.to_string())
                .unwrap_or_default(),
        )
    })
    .collect()
}

/// (a, d) A quiet tree and one IO-heavy pod container, cgroup v2 and v1: after the baseline,
/// only the container's four fio jobs are read (stat, io, D-state samples, their cgroup
/// and wchan), not the 200 sleeping processes, and the io_bound finding names the same
/// culprit with the same evidence as a pass over every process.
#[test]
fn a_quiet_tree_and_one_io_heavy_cgroup_reads_only_its_tasks() {
    for layout in [Layout::V2, Layout::V1] {
        let (first, every) = cgroup_configs();
        let (outs, built) = cgroup_node(layout, Extra::Nothing, first);
        let (reference, reference_built) = cgroup_node(layout, Extra::Nothing, every);
        // The first run read the cgroups only; the others the four fio jobs (stat and io,
        // twice on the second run, and 11 D-state samples, cgroup and wchan of each).
        assert_eq!(built[0], 0, "{layout:?}: {built:?}");
        assert!(built[1] < 100 && built[2] < 100, "{layout:?}: {built:?}");
        assert!(
            reference_built.iter().all(|b| *b > u64::from(QUIET)),
            "{layout:?}: {reference_built:?}"
        );
        let scope = text(only(&outs[2], "load.io_bound")[0], "process_scope");
        assert!(
            scope.starts_with(&format!(
                "cgroups {POD_CGROUP}/cri-containerd-{CID}.scope (256 KiB/s IO"
            )),
            "{layout:?}: {scope}"
        );
        assert!(scope.ends_with(": 4 process(es) read"), "{scope}");
        let mine = io_culprit_evidence(&outs[2]);
        assert_eq!(mine, io_culprit_evidence(&reference[2]), "{layout:?}");
        assert!(
            mine.contains(&("top_io_comm".into(), "fio".into())),
            "{mine:?}"
        );
        assert!(
            mine.contains(&("top_io_pod_uid".into(), UID.into())),
            "{mine:?}"
        );
        assert!(
            mine.contains(&("kubelet_running".into(), "true".into())),
            "{mine:?}"
        );
        assert_eq!(detected(&outs[2]), detected(&reference[2]), "{layout:?}");
    }
}

/// (b) 10 MB/s on vda that no cgroup below the root accounts for (the root's own tasks, or
/// writeback): the unattributed remainder is material, every process is read, and the
/// evidence says why.
/// `check` on a node with cgroups: its first sample (four tasks blocked) reads the cgroups'
/// counters and every process as a baseline; its second reads only the IO-heavy container's
/// tasks and measures them over the whole window (a tracker holding every process is a
/// baseline for any cgroup's tasks), naming the pod's fio with the figures of a collector
/// that reads every process on every run. Before, the second caught up over a wait, which
/// on files that stand still found no bytes.
#[test]
fn check_measures_the_candidate_cgroups_tasks_over_its_window() {
    for layout in [Layout::V2, Layout::V1] {
        let check = LoadConfig {
            io_wait_sample_interval: std::time::Duration::ZERO,
            ..check_config()
        };
        let (outs, built) = cgroup_node(layout, Extra::Nothing, check);
        let (reference, _) = cgroup_node(layout, Extra::Nothing, cgroup_configs().1);
        assert!(built[0] > u64::from(QUIET), "{layout:?}: {built:?}");
        assert!(built[1] < 100, "{layout:?}: {built:?}");
        let scope = text(only(&outs[1], "load.io_bound")[0], "process_scope");
        assert!(
            scope.starts_with(&format!("cgroups {POD_CGROUP}/cri-containerd-{CID}.scope")),
            "{layout:?}: {scope}"
        );
        let mine = io_culprit_evidence(&outs[1]);
        assert_eq!(mine, io_culprit_evidence(&reference[1]), "{layout:?}");
        assert!(
            mine.contains(&("top_io_write_bytes_per_second".into(), "65536".into())),
            "{mine:?}"
        );
        assert!(
            mine.contains(&("top_io_pod_uid".into(), UID.into())),
            "{mine:?}"
        );
    }
}

#[test]
fn material_unattributed_io_reads_every_process() {
    for layout in [Layout::V2, Layout::V1] {
        let (first, _) = cgroup_configs();
        let (outs, built) = cgroup_node(layout, Extra::UnattributedWriter, first);
        assert!(built[2] > u64::from(QUIET), "{layout:?}: {built:?}");
        let f = only(&outs[2], "load.io_bound")[0];
        let scope = text(f, "process_scope");
        assert!(
            scope.starts_with("all processes (9.5 MiB/s of IO (97% of the disks' traffic) is not explained by a candidate cgroup)"),
            "{layout:?}: {scope}"
        );
        assert_eq!(text(f, "top_io_comm"), "fio");
    }
}

/// (c) Two tasks hang in D state on NFS and no cgroup did block IO: the candidates cannot
/// explain it, every process is read and the hung task is listed.
#[test]
fn blocked_tasks_without_cgroup_io_read_every_process() {
    for layout in [Layout::V2, Layout::V1] {
        let (first, _) = cgroup_configs();
        let (outs, built) = cgroup_node(layout, Extra::NfsHang, first);
        assert!(built[2] > u64::from(QUIET), "{layout:?}: {built:?}");
        let f = only(&outs[2], "load.io_bound")[0];
        assert!(
            text(f, "process_scope").starts_with(
                "all processes (2 task(s) in D state and no candidate cgroup did block IO"
            ),
            "{layout:?}: {}",
            text(f, "process_scope")
        );
        assert!(
            text(f, "blocked_tasks").contains("rsync(900)"),
            "{:?}",
            f.evidence
        );
    }
}

/// A busy host whose cgroups say nothing (no cgroup files: every process is read): `QUIET_FLAT`
/// sleeping processes with a little CPU each, and two `burn` processes (pids 4201, 4202)
/// that keep a CPU busy each while `burning`. The whole-node files say the same: the CPUs
/// are `busy` percent busy. 10 s per step; `idle` is a quiet process that starts burning a
/// CPU (in place of 4202) from step 4.
struct FlatHost {
    h: FakeHost,
    step: u64,
    ticks: Ticks,
    burn: [u64; 3],
}

const QUIET_FLAT: u32 = 300;
const BURNERS: [u32; 2] = [4201, 4202];
/// A quiet process that wakes up and burns a CPU at step 4.
const WAKER: u32 = 5150;

impl FlatHost {
    fn new() -> FlatHost {
        let h = FakeHost::new();
        h.write("/sys/devices/system/cpu/online", "0-1\n");
        h.write("/proc/sys/kernel/task_delayacct", "0\n");
        for i in 0..QUIET_FLAT {
            let pid = 5000 + i;
            write_proc(
                &h,
                &Proc {
                    pid,
                    comm: "sleep",
                    state: 'S',
                    ppid: 1,
                    ticks: (u64::from(i % 7), 1),
                    io: (0, 0),
                    cgroup: "0::/\n",
                    blkio: 0,
                },
            );
        }
        FlatHost {
            h,
            step: 0,
            ticks: [10_000, 0, 5000, 100_000, 100, 0, 10, 0],
            burn: [50_000, 50_000, 6],
        }
    }

    /// The next 10 s: load1 and the CPUs' busy share; which of (4201, 4202, WAKER) burn 95%
    /// of a CPU over it.
    fn advance(&mut self, load1: f64, busy: u64, burning: [bool; 3]) {
        self.advance_softirq(load1, busy, 0, burning);
    }

    /// [`FlatHost::advance`] with `softirq` percent of the CPUs in softirq (of `busy`).
    fn advance_softirq(&mut self, load1: f64, busy: u64, softirq: u64, burning: [bool; 3]) {
        let h = &self.h;
        self.step += 1;
        let user = busy - softirq;
        self.ticks = add(
            self.ticks,
            [20 * user, 0, 0, 20 * (100 - busy), 0, 0, 20 * softirq, 0],
        );
        h.write(
            "/proc/uptime",
            format!("{}.00 1.00\n", 1000 + 10 * self.step),
        );
        h.write(
            "/proc/loadavg",
            format!("{load1:.2} {load1:.2} {load1:.2} 3/310 4000\n"),
        );
        h.write("/proc/stat", stat_text(self.ticks, &[], 2, 0));
        h.write(
            "/proc/diskstats",
            " 253 0 vda 100 0 800 10 500 0 4000 100 0 100 110\n",
        );
        let pids = [BURNERS[0], BURNERS[1], WAKER];
        for (i, pid) in pids.into_iter().enumerate() {
            if burning[i] {
                self.burn[i] += 950;
            }
            write_proc(
                h,
                &Proc {
                    pid,
                    comm: if pid == WAKER { "sleep" } else { "burn" },
                    state: if burning[i] { 'R' } else { 'S' },
                    ppid: 1,
                    ticks: (self.burn[i], 0),
                    io: (0, 0),
                    cgroup: "0::/\n",
                    blkio: 0,
                },
            );
        }
    }
}

/// One run of a busy flat host: load1, the CPUs' busy share and of it in softirq (percent),
/// which of (4201, 4202, WAKER) burn, and the range of per-process paths the run builds.
type FlatStep = (f64, u64, u64, [bool; 3], std::ops::Range<u64>);

/// Runs a collector of `node` (made by `make` from the node whose paths it counts) once per
/// step: every run builds a number of per-process paths in its step's range, and from step
/// `from` on `load.cpu_bound` names `pid`.
fn run_flat(
    node: &mut FlatHost,
    make: impl FnOnce(collectors::node::Node) -> LoadCollector,
    steps: &[FlatStep],
    from: usize,
    pid: u32,
) {
    let host = node.h.node();
    let mut c = make(host.clone());
    for (i, (load1, busy, softirq, burning, paths)) in steps.iter().enumerate() {
        node.advance_softirq(*load1, *busy, *softirq, *burning);
        let (out, built) = collect_counting(&mut c, &host);
        assert!(
            paths.contains(&built),
            "step {i}: {built} per-process paths, expected {paths:?}"
        );
        if i >= from {
            let f = only(&out, "load.cpu_bound");
            assert_eq!(f.len(), 1, "step {i}: {:?}", out.findings);
            let named = text(f[0], "top_cpu_processes");
            assert!(named.contains(&format!("pid {pid}")), "step {i}: {named}");
        }
    }
}

/// A busy flat host whose CPU is not all in the processes it lists (processes that come
/// and go between two runs, or beyond this view of `/proc`): the steady pass reads the idle
/// processes for it, finds less than a culprit's CPU among them, and leaves them to their
/// turns (one in eight per run) for the next `idle_reread_every` passes before it looks
/// among them again. CPU in softirq, which is charged to no process, does not make it look
/// at all. The burner is named on every run.
#[test]
fn cpu_the_idle_processes_do_not_hold_is_looked_for_among_them_once_in_eight_passes() {
    let mut node = FlatHost::new();
    let config = no_catch_up();
    assert_eq!(config.idle_reread_every, 8);
    let all = u64::from(QUIET_FLAT) + 3;
    let eighth = 30..all / 8 + 40;
    let everyone = all..all + 60;
    let one = [true, false, false];
    let mut steps: Vec<FlatStep> = vec![
        (0.3, 5, 0, one, 0..1),
        (0.3, 5, 0, one, 0..1),
        // The onset.
        (2.5, 95, 0, one, all..all + 120),
        // 95% of the node's 190% unexplained: the idle ones are read, in vain...
        (2.6, 95, 0, one, everyone.clone()),
    ];
    // ...and for seven passes only their turns are.
    steps.extend(std::iter::repeat_n((2.6, 95, 0, one, eighth.clone()), 7));
    // Eight passes on, they are read for it again.
    steps.push((2.6, 95, 0, one, everyone.clone()));
    // Due again after eight more, but what the burner leaves unexplained is in softirq.
    steps.extend(std::iter::repeat_n((2.6, 95, 45, one, eighth.clone()), 8));
    run_flat(
        &mut node,
        |n| LoadCollector::new(n, config),
        &steps,
        3,
        BURNERS[0],
    );
}

/// While the idle processes wait their turns after a read that found nothing among them, a
/// process among them that starts to burn a CPU is not left to its turn: the CPU left
/// unexplained grows by more than a culprit's, the others are read on that run, and it is
/// named; from then on it is active and read on every run.
#[test]
fn a_process_that_starts_to_spin_while_the_idle_ones_wait_their_turns_is_named_at_once() {
    let mut node = FlatHost::new();
    let all = u64::from(QUIET_FLAT) + 3;
    let eighth = 30..all / 8 + 40;
    let everyone = all..all + 60;
    let (one, and_waker) = ([true, false, false], [true, false, true]);
    let steps: Vec<FlatStep> = vec![
        (0.3, 5, 0, [false; 3], 0..1),
        (0.3, 5, 0, [false; 3], 0..1),
        (2.5, 95, 0, one, all..all + 120),
        // Read in vain: 95% of the node's 190% is in no process it lists.
        (2.6, 95, 0, one, everyone.clone()),
        (2.6, 95, 0, one, eighth.clone()),
        // The waker (idle, not its turn) burns: 105% unexplained, 10% more than in vain.
        (2.6, 100, 0, and_waker, everyone.clone()),
        // Now active: read with the burner and the turns.
        (2.6, 100, 0, and_waker, eighth.clone()),
    ];
    let make = |n| LoadCollector::new(n, no_catch_up());
    run_flat(&mut node, make, &steps, 5, WAKER);
}

/// A busy host whose processes are all in the root cgroup: the onset run reads each
/// process's `stat` once (and again only its candidates: the two burners, running), not every
/// process twice and every `io`; the steady runs after it read the burners and an eighth of
/// the others; when a process that sat idle starts burning a CPU, the CPU time the processes
/// read leave unexplained makes that run read the rest and name it. Every run's findings
/// (ids, severities, named pids) equal those of a collector that reads every process on
/// every run.
#[test]
fn a_busy_flat_host_reads_each_process_once_at_the_onset_and_the_active_ones_after() {
    let mut node = FlatHost::new();
    let host = node.h.node();
    let config = no_catch_up();
    let mut c = LoadCollector::new(host.clone(), config);
    let mut every_run = LoadCollector::new(
        node.h.node(),
        LoadConfig {
            idle_reread_every: 1,
            ..always_read_processes()
        },
    );
    let all = u64::from(QUIET_FLAT) + 3;
    // (load1, busy %, burning), and the range of per-process paths the run builds.
    type Step = (f64, u64, [bool; 3], std::ops::Range<u64>);
    let steps: [Step; 6] = [
        (0.3, 5, [false, false, false], 0..1),
        (0.3, 5, [false, false, false], 0..1),
        // The onset: 2.5 on 2 CPUs, 95% busy. One `stat` of each, the candidates again
        // (with `io`), the named processes' `cgroup`: before, 2 x 303 `stat` and 303 `io`.
        (2.5, 95, [true, true, false], all..all + 120),
        // Steady: the burners (running), one in eight of the others.
        (2.6, 95, [true, true, false], 30..all / 8 + 40),
        (2.6, 95, [true, true, false], 30..all / 8 + 40),
        // 4202 stops, the waker burns: unexplained CPU, the rest is read.
        (2.6, 95, [true, false, true], all..all + 60),
    ];
    for (i, (load1, busy, burning, paths)) in steps.iter().enumerate() {
        node.advance(*load1, *busy, *burning);
        let (out, built) = collect_counting(&mut c, &host);
        assert!(
            paths.contains(&built),
            "step {i}: {built} per-process paths, expected {paths:?}"
        );
        let reference = every_run.collect(&ctx());
        assert_eq!(out.status, reference.status, "step {i}");
        if i >= 3 {
            // The onset's culprits are measured over a catch-up of 0 s on files that do not
            // change: named from the next run.
            assert_eq!(detected(&out), detected(&reference), "step {i}");
            let f = only(&out, "load.cpu_bound");
            assert_eq!(f.len(), 1, "step {i}: {:?}", out.findings);
            let named = text(f[0], "top_cpu_processes");
            let expect = if i == 5 {
                vec![BURNERS[0], WAKER]
            } else {
                BURNERS.to_vec()
            };
            for pid in expect {
                assert!(named.contains(&format!("pid {pid}")), "step {i}: {named}");
            }
        }
        if i == 2 {
            assert_eq!(only(&out, "load.cpu_bound").len(), 1, "{:?}", out.findings);
        }
    }
}
