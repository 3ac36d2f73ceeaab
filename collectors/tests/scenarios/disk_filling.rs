//! Scenarios of the `disk` collector's time to full (`disk.filling_up`,
//! `disk.inodes_filling_up`): a fake host whose statfs figures and clock the test drives, so
//! that one collection stands for a minute of `serve`; and real tmpfs filesystems filled by
//! the test (root).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use collectors::disk::{DiskCollector, DiskConfig, Thresholds};
use collectors::sys::statvfs::FsUsage;
use collectors::{Collection, Collector, Finding, Severity, Status};

use crate::support::{ctx, root_or_skip, FakeHost};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// 2026-11-27T17:00:00Z.
const T0: u64 = 1_795_798_800;
const UID: &str = "6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77";
const EMPTY_DIR: &str =
    "/var/lib/kubelet/pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77/volumes/kubernetes.io~empty-dir/cache";

/// The kubelet root on a disk of its own (`/dev/vdc`, 100 GiB).
const MOUNTINFO_KUBELET_DISK: &str = "\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
95 22 253:32 / /var/lib/kubelet rw,relatime shared:41 - xfs /dev/vdc rw,attr2,inode64
";

fn find<'a>(c: &'a Collection, id: &str) -> Option<&'a Finding> {
    c.findings.iter().find(|f| f.id == id)
}

fn ev_num(f: &Finding, name: &str) -> f64 {
    f.evidence
        .get(name)
        .and_then(|e| e.as_f64())
        .unwrap_or_else(|| panic!("no numeric evidence {name}: {:?}", f.evidence))
}

fn ev_str<'a>(f: &'a Finding, name: &str) -> &'a str {
    f.evidence
        .get(name)
        .and_then(|e| e.as_str())
        .unwrap_or_else(|| panic!("no string evidence {name}: {:?}", f.evidence))
}

/// A node with the kubelet root on its own 100 GiB disk and a pod with an emptyDir volume;
/// the kubelet's config file gives its defaults.
fn kubelet_node() -> FakeHost {
    let h = FakeHost::new();
    h.write("/proc/1/mountinfo", MOUNTINFO_KUBELET_DISK)
        .write(
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\n",
        )
        .write(&format!("{EMPTY_DIR}/seed"), vec![1u8; 4096]);
    h
}

/// A collector on `h` whose kubelet disk has `avail` bytes available (and `files_free`
/// free inodes) and whose clock reads `clock` seconds.
fn driven(
    h: &FakeHost,
    config: DiskConfig,
    avail: &Arc<AtomicU64>,
    files_free: &Arc<AtomicU64>,
    clock: &Arc<AtomicU64>,
) -> DiskCollector {
    let (a, f, c) = (avail.clone(), files_free.clone(), clock.clone());
    let root = h.root().to_path_buf();
    DiskCollector::new(h.node(), config)
        .with_statfs(move |agent: &Path| {
            let host = Path::new("/").join(agent.strip_prefix(&root).unwrap_or(agent));
            if host.starts_with("/var/lib/kubelet") {
                Ok(FsUsage {
                    size_bytes: 100 * GIB,
                    avail_bytes: a.load(Ordering::SeqCst),
                    free_bytes: a.load(Ordering::SeqCst),
                    files: 1_000_000,
                    files_free: f.load(Ordering::SeqCst),
                })
            } else {
                Err(std::io::Error::other("no fake statfs"))
            }
        })
        .with_clock(move || c.load(Ordering::SeqCst) as f64)
}

/// The kubelet disk fills at 1 MiB/s from 22 GiB available (12 GiB above
/// `nodefs.available<10%`, about 3.4 h), one collection a minute: nothing is said (and
/// nothing walked) until 30 minutes of history exist; then a warning with the rate, the
/// estimate, the threshold and when; the next walk names the pod's emptyDir that grows; when
/// the growth stops the finding clears and the walk stops.
#[test]
fn a_kubelet_disk_filling_at_a_steady_rate_is_announced_with_its_eta() {
    let h = kubelet_node();
    let avail = Arc::new(AtomicU64::new(22 * GIB));
    let files_free = Arc::new(AtomicU64::new(900_000));
    let clock = Arc::new(AtomicU64::new(T0));
    let mut c = driven(&h, DiskConfig::default(), &avail, &files_free, &clock);
    let tick = |minute: u64, filling: bool| {
        clock.store(T0 + minute * 60, Ordering::SeqCst);
        if filling && minute > 0 {
            avail.fetch_sub(60 * MIB, Ordering::SeqCst);
        }
    };
    tick(0, true);
    let first = crate::support::collect(&mut c, &ctx());
    assert!(first.findings.is_empty(), "{:#?}", first.findings);
    assert!(
        matches!(&first.status, Status::Noted(m) if m.contains("time to full needs history") && m.contains("serve")),
        "{:?}",
        first.status
    );
    assert!(first.status.is_complete());
    // 30 minutes of history (and 11 points 3 min apart) are needed: silent until then.
    for minute in 1..30 {
        tick(minute, true);
        let out = c.collect(&ctx());
        assert!(
            out.findings.is_empty(),
            "minute {minute}: {:#?}",
            out.findings
        );
        assert_eq!(
            c.walker_count(),
            0,
            "walked at minute {minute} before growth was seen"
        );
    }
    tick(30, true);
    // The announcement as the operator reads it (golden `.1`).
    let out = crate::support::collect(&mut c, &ctx());
    let f = find(&out, "disk.filling_up")
        .expect("announced at minute 30")
        .clone();
    assert_eq!(out.status, Status::Ok);
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.subject, "/var/lib/kubelet");
    // 12 GiB - 30 min at 1 MiB/s = 10,488 s left.
    let eta = ev_num(&f, "seconds_to_threshold");
    assert!((eta - 10_488.0).abs() < 10_488.0 * 0.02, "{eta}");
    assert!((ev_num(&f, "fill_rate_bytes_per_second") - MIB as f64).abs() < 1.0);
    assert_eq!(ev_str(&f, "threshold"), "nodefs.available<10%");
    assert_eq!(ev_str(&f, "threshold_signal"), "nodefs.available");
    assert_eq!(ev_str(&f, "threshold_kind"), "hard");
    assert_eq!(ev_num(&f, "threshold_free_bytes"), (10 * GIB) as f64);
    // 17:30 + 10,488 s = 20:24:48.
    assert_eq!(ev_str(&f, "threshold_at"), "2026-11-27T20:24:48Z");
    assert_eq!(ev_num(&f, "history_seconds"), 1800.0);
    assert!(
        f.summary.en.contains("filling at 1.0 MiB/s"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary.en.contains("hard eviction threshold nodefs.available<10% (kubelet default) in about 175 min, at 2026-11-27T20:24:48Z"),
        "{}",
        f.summary.en
    );
    assert!(f.remediation.steps[0].en.contains("forecast"));
    let m = crate::support::find_metric(
        &out,
        "node_doctor_disk_seconds_to_threshold",
        &[
            ("mountpoint", "/var/lib/kubelet"),
            ("resource", "space"),
            ("signal", "nodefs.available"),
        ],
    )
    .expect("seconds_to_threshold");
    assert!((m.value - eta).abs() < 1.0);
    crate::support::find_metric(
        &out,
        "node_doctor_disk_fill_rate_per_second",
        &[("mountpoint", "/var/lib/kubelet"), ("resource", "inodes")],
    )
    .expect("inode rate");
    // The walk started with the growth; the pod's emptyDir grows 256 KiB a minute, and the
    // next complete walk names it.
    assert_eq!(c.walker_count(), 1);
    let mut named = None;
    for minute in 31..=35 {
        h.write(&format!("{EMPTY_DIR}/data-{minute}"), vec![7u8; 256 * 1024]);
        tick(minute, true);
        let out = c.collect(&ctx());
        let f = find(&out, "disk.filling_up").expect("still filling");
        if f.evidence.contains_key("grower_path") {
            named = Some(f.clone());
            break;
        }
    }
    let f = named.expect("no grower named");
    assert_eq!(ev_str(&f, "grower_path"), EMPTY_DIR);
    assert_eq!(ev_str(&f, "grower_kind"), "empty_dir");
    assert_eq!(ev_str(&f, "grower_pod_uid"), UID);
    let rate = ev_num(&f, "grower_bytes_per_second");
    assert!(rate >= 256.0 * 1024.0 / 60.0 * 0.9, "{rate}");
    assert!(f
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("sizeLimit")));
    // The path is one quoted word (`~` is not bare).
    assert!(
        f.remediation
            .commands
            .contains(&format!("du -sh '{EMPTY_DIR}'")),
        "{:?}",
        f.remediation.commands
    );
    // The growth stops: the recent trend no longer agrees, the finding clears, the walk ends.
    let mut cleared = None;
    for minute in 36..=60 {
        tick(minute, false);
        let out = c.collect(&ctx());
        if find(&out, "disk.filling_up").is_none() {
            cleared = Some(minute);
            break;
        }
    }
    let cleared = cleared.expect("never cleared");
    assert!(cleared <= 50, "cleared at minute {cleared}");
    assert_eq!(c.walker_count(), 0);
    assert_eq!(c.history_count(), 1);
}

/// A 12 GiB file written and deleted three minutes later, on a disk otherwise steady at
/// 30 GiB available, over two hours of one-minute cycles: never a forecast, never a walk.
/// One disk holds everything (the kubelet root and `/var/log/pods`), and what fills it is a
/// pod's log: 1 MiB/s into `0.log` (a sparse file the test lengthens each minute), outside
/// every walked root. The announcement names that log, its rate and its pod, and tells to
/// bound the kubelet's logs.
#[test]
fn a_pods_log_filling_the_disk_is_named() {
    let h = FakeHost::new();
    h.write(
        "/proc/1/mountinfo",
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
    )
    .write(
        "/var/lib/kubelet/config.yaml",
        "kind: KubeletConfiguration\n",
    )
    .mkdir("/var/lib/kubelet/pods");
    let log = format!("/var/log/pods/default_web-1_{UID}/app/0.log");
    // Another pod's log, large and still.
    h.sparse(
        "/var/log/pods/default_db-0_0b6e2f4c-3d1a-4f6e-9c2b-7a8d9e0f1a2b/db/0.log",
        3 * GIB,
    );
    let avail = Arc::new(AtomicU64::new(22 * GIB));
    let clock = Arc::new(AtomicU64::new(T0));
    let (a, c) = (avail.clone(), clock.clone());
    let mut col = DiskCollector::new(h.node(), DiskConfig::default())
        .with_statfs(move |_: &Path| {
            Ok(FsUsage {
                size_bytes: 100 * GIB,
                avail_bytes: a.load(Ordering::SeqCst),
                free_bytes: a.load(Ordering::SeqCst),
                files: 1_000_000,
                files_free: 900_000,
            })
        })
        .with_clock(move || c.load(Ordering::SeqCst) as f64);
    let mut announced = None;
    for minute in 0..=32u64 {
        clock.store(T0 + minute * 60, Ordering::SeqCst);
        avail.store(22 * GIB - minute * 60 * MIB, Ordering::SeqCst);
        h.sparse(&log, GIB + minute * 60 * MIB);
        let out = col.collect(&ctx());
        if let Some(f) = find(&out, "disk.filling_up") {
            announced = Some(f.clone());
            break;
        }
    }
    let f = announced.expect("announced within 32 minutes");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(ev_str(&f, "grower_kind"), "pod_log");
    assert_eq!(ev_str(&f, "grower_path"), log);
    assert_eq!(ev_str(&f, "grower_pod_uid"), UID);
    let rate = ev_num(&f, "grower_bytes_per_second");
    assert!((rate - MIB as f64).abs() < 1.0, "{rate}");
    assert!(
        f.summary
            .en
            .contains(&format!("Fastest grower now: {log} (+1.0 MiB/s)")),
        "{}",
        f.summary.en
    );
    let steps: Vec<&str> = f.remediation.steps.iter().map(|s| s.en.as_str()).collect();
    assert!(
        steps
            .iter()
            .any(|s| s.contains("A container's log grows fastest")
                && s.contains("containerLogMaxSize")),
        "{steps:#?}"
    );
    assert!(
        f.remediation
            .commands
            .iter()
            .any(|c| c == &format!("du -sh {log}")),
        "{:?}",
        f.remediation.commands
    );
    assert!(
        f.remediation
            .commands
            .iter()
            .any(|c| c.ends_with(&format!("grep -- {UID}"))),
        "{:?}",
        f.remediation.commands
    );
}

#[test]
fn a_burst_followed_by_a_delete_is_not_announced() {
    let h = kubelet_node();
    let avail = Arc::new(AtomicU64::new(30 * GIB));
    let files_free = Arc::new(AtomicU64::new(900_000));
    let clock = Arc::new(AtomicU64::new(T0));
    let mut c = driven(&h, DiskConfig::default(), &avail, &files_free, &clock);
    for minute in 0..=120u64 {
        clock.store(T0 + minute * 60, Ordering::SeqCst);
        let burst = (60..63).contains(&minute);
        avail.store(if burst { 18 * GIB } else { 30 * GIB }, Ordering::SeqCst);
        let out = c.collect(&ctx());
        assert!(
            out.findings.is_empty(),
            "minute {minute}: {:#?}",
            out.findings
        );
        assert_eq!(c.walker_count(), 0, "walked at minute {minute}");
    }
}

/// Inodes used at 5 a second (a cache of small files) towards `nodefs.inodesFree<5%`.
#[test]
fn inodes_used_at_a_steady_rate_are_announced() {
    let h = kubelet_node();
    let avail = Arc::new(AtomicU64::new(60 * GIB));
    let files_free = Arc::new(AtomicU64::new(110_000));
    let clock = Arc::new(AtomicU64::new(T0));
    let mut c = driven(&h, DiskConfig::default(), &avail, &files_free, &clock);
    let mut seen = None;
    for minute in 0..=40u64 {
        clock.store(T0 + minute * 60, Ordering::SeqCst);
        if minute > 0 {
            files_free.fetch_sub(300, Ordering::SeqCst);
        }
        let out = c.collect(&ctx());
        if let Some(f) = find(&out, "disk.inodes_filling_up") {
            seen = Some(f.clone());
            break;
        }
    }
    let f = seen.expect("never announced");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(ev_str(&f, "threshold"), "nodefs.inodesFree<5%");
    // 110,000 - 9,000 - 50,000 = 51,000 inodes at 5/s.
    assert!((ev_num(&f, "seconds_to_threshold") - 10_200.0).abs() < 200.0);
    assert!(f.summary.en.contains("5.0 inodes/s"), "{}", f.summary.en);
    assert!(f
        .remediation
        .commands
        .contains(&"df -i /var/lib/kubelet".to_string()));
}

/// The bounded state: the history of a filesystem no longer seen is dropped.
#[test]
fn history_of_a_filesystem_gone_is_dropped() {
    let h = kubelet_node();
    let avail = Arc::new(AtomicU64::new(60 * GIB));
    let files_free = Arc::new(AtomicU64::new(900_000));
    let clock = Arc::new(AtomicU64::new(T0));
    let mut c = driven(&h, DiskConfig::default(), &avail, &files_free, &clock);
    c.collect(&ctx());
    assert_eq!(c.history_count(), 1);
    std::fs::remove_dir_all(h.path("/var/lib/kubelet")).unwrap();
    clock.store(T0 + 60, Ordering::SeqCst);
    c.collect(&ctx());
    assert_eq!(c.history_count(), 0);
}

// ---- real kernel: a tmpfs kubelet root filled by the test (root) ----

/// A tmpfs mounted at `<tmp root>/var/lib/kubelet`, unmounted when dropped (even when the
/// test fails), with `<tmp root>/proc/1/mountinfo` this process's own mount table (see the
/// disk module's `TmpfsRoot`).
struct KubeletTmpfs {
    dir: tempfile::TempDir,
    mnt: std::path::PathBuf,
}

impl KubeletTmpfs {
    fn new(size_mib: u64) -> KubeletTmpfs {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("var/lib/kubelet");
        std::fs::create_dir_all(&mnt).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size_mib}m").as_str()),
        )
        .expect("mount tmpfs");
        let guard = KubeletTmpfs { dir, mnt };
        let proc = guard.dir.path().join("proc/1");
        std::fs::create_dir_all(&proc).unwrap();
        std::os::unix::fs::symlink(
            format!("/proc/{}/mountinfo", std::process::id()),
            proc.join("mountinfo"),
        )
        .unwrap();
        guard
    }

    /// Appends `bytes` of real data to `rel` under the kubelet root.
    fn append(&self, rel: &str, bytes: u64) {
        let path = self.mnt.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        std::io::Write::write_all(&mut f, &vec![0x5au8; bytes as usize]).unwrap();
    }

    fn used_percent(&self) -> f64 {
        collectors::sys::statvfs::usage(&self.mnt)
            .unwrap()
            .used_percent()
    }
}

impl Drop for KubeletTmpfs {
    fn drop(&mut self) {
        if let Err(e) = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH) {
            eprintln!("umount {}: {e}", self.mnt.display());
        }
    }
}

/// What a real test lowers: a fit after 8 s and 6 points, cycles of about a second.
fn quick() -> DiskConfig {
    DiskConfig {
        thresholds: Thresholds {
            fill_min_history_secs: 8.0,
            fill_min_points: 6,
            ..Thresholds::default()
        },
        history_window: std::time::Duration::from_secs(600),
        history_points: 600,
        ..DiskConfig::default()
    }
}

const REAL_EMPTY_DIR: &str =
    "pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77/volumes/kubernetes.io~empty-dir/cache";

/// A real 128 MiB tmpfs as the kubelet root, its pod's emptyDir written 2 MiB per cycle
/// (a second apart by the collector's clock, which the test moves): announced, with an estimate, before the disk is 80% used (its
/// threshold nodefs.available<10% is at 90%), and the walk names the emptyDir.
#[test]
fn real_tmpfs_filled_at_a_steady_rate_is_announced_before_80_percent() {
    if !root_or_skip("real_tmpfs_filled_at_a_steady_rate_is_announced_before_80_percent") {
        return;
    }
    let fs = KubeletTmpfs::new(128);
    fs.append("pods/6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77/etc-hosts", 4096);
    fs.append(&format!("{REAL_EMPTY_DIR}/data"), 16 * MIB);
    let host = collectors::HostPaths::new(fs.dir.path());
    let now = Arc::new(AtomicU64::new(1_800_000_000));
    let clock = Arc::clone(&now);
    let mut c = DiskCollector::new(collectors::Node::new(host), quick())
        .with_clock(move || clock.load(Ordering::SeqCst) as f64);
    let mut announced = None;
    let mut named = None;
    for cycle in 0..40 {
        let out = c.collect(&ctx());
        if let Some(f) = find(&out, "disk.filling_up") {
            let used = fs.used_percent();
            assert!(used < 80.0, "announced only at {used:.1}% used");
            if announced.is_none() {
                assert_figure_matches_the_estimate(&out, f);
                announced = Some((cycle, used, f.clone()));
            }
            if f.evidence.contains_key("grower_path") {
                named = Some(f.clone());
                break;
            }
        }
        assert!(
            fs.used_percent() < 80.0,
            "reached 80% unannounced (cycle {cycle})"
        );
        fs.append(&format!("{REAL_EMPTY_DIR}/data"), 2 * MIB);
        now.fetch_add(1, Ordering::SeqCst);
    }
    let (cycle, used, f) = announced.expect("never announced");
    eprintln!(
        "announced at cycle {cycle}, {used:.1}% used: {}",
        f.summary.en
    );
    assert_eq!(ev_str(&f, "fstype"), "tmpfs");
    assert_eq!(ev_str(&f, "threshold"), "nodefs.available<10%");
    // 2 MiB/s by the clock (the tmpfs also counts its own pages, hence not exactly): the
    // estimate is the space left above 10% at that rate.
    let rate = ev_num(&f, "fill_rate_bytes_per_second");
    assert!(rate > 1.5 * MIB as f64 && rate < 2.5 * MIB as f64, "{rate}");
    let eta = ev_num(&f, "seconds_to_threshold");
    assert!(eta > 0.0 && eta < 4.0 * 3600.0, "{eta}");
    let f = named.expect("the walk named no grower");
    assert!(
        ev_str(&f, "grower_path").ends_with(&format!("/var/lib/kubelet/{REAL_EMPTY_DIR}")),
        "{:?}",
        f.evidence
    );
    assert_eq!(ev_str(&f, "grower_kind"), "empty_dir");
    assert!(ev_num(&f, "grower_bytes_per_second") > 0.5 * MIB as f64);
}

/// The figure the page draws for a filling filesystem (issue 49) is the finding's estimate:
/// every reading the fit rests on, the fitted rate through the latest one, the threshold's
/// level, and the crossing at the finding's `threshold_at`.
fn assert_figure_matches_the_estimate(out: &Collection, f: &Finding) {
    let fig = out
        .figures
        .iter()
        .find(|g| g.kind == "disk.space" && g.subject == f.subject)
        .unwrap_or_else(|| panic!("no disk.space figure for {}: {:#?}", f.subject, out.figures));
    assert_eq!(fig.points.len() as f64, ev_num(f, "history_points"));
    let (first, last) = (fig.points[0], *fig.points.last().unwrap());
    assert_eq!(last.0 - first.0, ev_num(f, "history_seconds"));
    let line = fig.fit.expect("a fitted line");
    assert_eq!(
        (line.t, line.value),
        last,
        "the line runs through the latest reading"
    );
    assert_eq!(-line.slope, ev_num(f, "fill_rate_bytes_per_second"));
    let (level, label) = fig.threshold.clone().expect("a threshold");
    // The evidence is rounded to whole bytes.
    assert!((level - ev_num(f, "threshold_free_bytes")).abs() <= 0.5);
    assert_eq!(label, ev_str(f, "threshold"));
    let crossing = fig.crossing.expect("a crossing");
    assert!(
        (line.at(crossing) - level).abs() < 1.0,
        "the line meets the level there"
    );
    assert!((crossing - last.0 - ev_num(f, "seconds_to_threshold")).abs() <= 0.5);
    assert_eq!(
        collectors::disk::trend::utc(crossing),
        ev_str(f, "threshold_at")
    );
}

/// The same tmpfs, steady at 40% but for 48 MiB written and deleted within two cycles:
/// never announced.
#[test]
fn real_tmpfs_burst_followed_by_a_delete_is_not_announced() {
    if !root_or_skip("real_tmpfs_burst_followed_by_a_delete_is_not_announced") {
        return;
    }
    let fs = KubeletTmpfs::new(128);
    fs.append(&format!("{REAL_EMPTY_DIR}/base"), 50 * MIB);
    let host = collectors::HostPaths::new(fs.dir.path());
    let mut c = DiskCollector::new(collectors::Node::new(host), quick());
    for cycle in 0..24 {
        if cycle == 10 {
            fs.append(&format!("{REAL_EMPTY_DIR}/burst"), 48 * MIB);
        }
        if cycle == 12 {
            std::fs::remove_file(fs.mnt.join(REAL_EMPTY_DIR).join("burst")).unwrap();
        }
        let out = c.collect(&ctx());
        assert!(
            out.findings.iter().all(|f| !f.id.ends_with("filling_up")),
            "cycle {cycle}: {:#?}",
            out.findings
        );
        std::thread::sleep(std::time::Duration::from_millis(700));
    }
}
