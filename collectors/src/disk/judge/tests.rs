use super::*;
use crate::config::kubelet::{effective, parse_config};
use crate::disk::sample::RoleDir;
use crate::finding::Finding;
use crate::sys::statvfs::FsUsage;

const GIB_U: u64 = 1 << 30;

/// Drafts in the built-in words.
fn render(d: Draft) -> Finding {
    crate::rules::RuleBook::builtin().render(d, "node-1")
}

fn fs(roles: &[Role], size: u64, avail: u64) -> FsSample {
    FsSample {
        mount_point: "/var/lib/docker".into(),
        device: "/dev/vdb".into(),
        fstype: "ext4".into(),
        dev: 1,
        roles: roles
            .iter()
            .map(|r| RoleDir {
                role: *r,
                host_path: "/var/lib/docker".into(),
            })
            .collect(),
        usage: FsUsage {
            size_bytes: size,
            avail_bytes: avail,
            free_bytes: avail,
            files: 1000,
            files_free: 900,
        },
        logs: vec![],
        dirs: vec![],
        deleted: vec![],
        trend: Default::default(),
    }
}

#[test]
fn default_thresholds_per_role() {
    let s = Settings::default();
    let t = Thresholds::default();
    // 100 GiB imagefs with 14 GiB free: past imagefs.available<15% -> critical.
    let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 14 * GIB_U), &s, &t);
    assert_eq!(v.severity, Some(Severity::Critical));
    assert_eq!(v.threshold, "imagefs.available<15%");
    assert_eq!(v.origin, "kubelet default");
    assert_eq!(v.why, Some(Why::HardEviction));
    // Same figures on a kubelet-only filesystem: nodefs 10% + 5 points -> warning.
    let v = assess_space(&fs(&[Role::Kubelet], 100 * GIB_U, 14 * GIB_U), &s, &t);
    assert_eq!(v.severity, Some(Severity::Warning));
    assert_eq!(v.threshold, "nodefs.available<10%");
    assert_eq!(v.why, Some(Why::NearHardEviction));
    // 20% free on imagefs: within 5 points of 15% -> warning.
    let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 19 * GIB_U), &s, &t);
    assert_eq!(v.severity, Some(Severity::Warning));
    // Healthy.
    let v = assess_space(
        &fs(&[Role::DockerData, Role::Kubelet], 100 * GIB_U, 50 * GIB_U),
        &s,
        &t,
    );
    assert_eq!(v.severity, None);
    assert_eq!(v.why, None);
}

#[test]
fn exec_root_uses_fixed_limits_only() {
    let s = Settings::default();
    let t = Thresholds::default();
    // A small tmpfs at 90%: no kubelet signal applies, below 95% -> fine.
    let v = assess_space(&fs(&[Role::DockerExec], 512 << 20, 51 << 20), &s, &t);
    assert_eq!(v.severity, None);
    let v = assess_space(&fs(&[Role::DockerExec], 512 << 20, 20 << 20), &s, &t);
    assert_eq!(v.severity, Some(Severity::Critical));
    assert_eq!(v.threshold, "used>=95%");
    assert_eq!(v.why, Some(Why::UsedLimit));
}

#[test]
fn under_one_gib_on_a_big_disk() {
    let mut s = Settings::default();
    s.eviction_hard.clear();
    let t = Thresholds::default();
    // 10 GiB with 0.9 GiB free is 91% used: only the 1 GiB floor applies.
    let f = fs(&[Role::DockerData], 10 * GIB_U, GIB_U * 9 / 10);
    let v = assess_space(&f, &s, &t);
    assert_eq!(v.severity, Some(Severity::Critical));
    assert_eq!(v.threshold, "available<1.0 GiB");
    assert_eq!(v.why, Some(Why::FreeLimit));
    let sample = DiskSample {
        filesystems: vec![f],
        kubelet: Some((s, "/var/lib/kubelet/config.yaml".into())),
        ..DiskSample::default()
    };
    let drafts = judge(&sample, &t);
    assert_eq!(
        drafts.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["disk.filesystem_full", "disk.kubelet_unprotected"]
    );
    let f = render(drafts[0].clone());
    assert!(
        f.summary
            .en
            .ends_with(": under node-doctor's 1.0 GiB free limit."),
        "{}",
        f.summary.en
    );
    assert!(f.summary.zh.contains("node-doctor 的 1.0 GiB 下限"));
}

#[test]
fn image_gc_and_soft_thresholds_warn() {
    let c =
        parse_config("imageGCHighThresholdPercent: 70\nevictionSoft:\n  imagefs.available: 25%\n")
            .unwrap();
    let s = effective(&[], Some(&c), "/etc/kubelet.yaml");
    let t = Thresholds::default();
    let f = fs(&[Role::DockerData], 100 * GIB_U, 28 * GIB_U);
    let v = assess_space(&f, &s, &t);
    assert_eq!(v.severity, Some(Severity::Warning));
    assert_eq!(v.why, Some(Why::ImageGc));
    let d = filesystem_full(&f, &v, &s, &t).unwrap();
    let r = render(d);
    assert!(
        r.summary.en.contains(
            "past the kubelet's image GC high threshold 70% (imageGCHighThresholdPercent in /etc/kubelet.yaml)"
        ),
        "{}",
        r.summary.en
    );
    assert!(
        r.summary.zh.contains(
            "镜像回收高水位 70%（来源：imageGCHighThresholdPercent 位于 /etc/kubelet.yaml）"
        ),
        "{}",
        r.summary.zh
    );
    let v = assess_space(&fs(&[Role::DockerData], 100 * GIB_U, 24 * GIB_U), &s, &t);
    assert_eq!(v.severity, Some(Severity::Warning));
    assert_eq!(v.threshold, "imagefs.available<25%");
    assert_eq!(v.origin, "evictionSoft in /etc/kubelet.yaml");
    assert_eq!(v.why, Some(Why::SoftEviction));
}

#[test]
fn origins_are_translated_by_kind() {
    let o = origin("--eviction-hard flag of the running kubelet");
    assert_eq!(
        (o.condition, o.flag, o.setting_in),
        ("origin_flag", Some("--eviction-hard"), None)
    );
    let o = origin("evictionHard in /var/lib/kubelet/config.yaml");
    assert_eq!(
        (o.condition, o.setting_in),
        (
            "origin_file",
            Some(("evictionHard", "/var/lib/kubelet/config.yaml"))
        )
    );
    assert_eq!(origin("kubelet default").condition, "origin_default");
    assert_eq!(origin("node-doctor limit").condition, "origin_other");
    // A flag verdict reads in Chinese as the flag of the running kubelet.
    let s = effective(
        &[
            "kubelet".into(),
            "--eviction-hard=imagefs.available<30%".into(),
        ],
        None,
        "",
    );
    let t = Thresholds::default();
    let f = fs(&[Role::DockerData], 100 * GIB_U, 29 * GIB_U);
    let v = assess_space(&f, &s, &t);
    let r = render(filesystem_full(&f, &v, &s, &t).unwrap());
    assert!(
        r.summary.zh.contains(
            "imagefs.available<30%（来源：--eviction-hard （运行中 kubelet 的启动参数））"
        ),
        "{}",
        r.summary.zh
    );
}

#[test]
fn inodes_use_inode_signals() {
    let s = Settings::default();
    let t = Thresholds::default();
    let mut f = fs(&[Role::Kubelet], 100 * GIB_U, 50 * GIB_U);
    f.usage.files = 1_000_000;
    f.usage.files_free = 30_000;
    let v = assess_inodes(&f, &s, &t);
    assert_eq!(v.severity, Some(Severity::Critical));
    assert_eq!(v.threshold, "nodefs.inodesFree<5%");
    let r = render(inodes_exhausted(&f, &v, &t).unwrap());
    assert_eq!(
        r.remediation.commands[1],
        "du --inodes -x -d 2 /var/lib/docker | sort -n | tail -n 20"
    );
    f.usage.files = 0;
    assert_eq!(assess_inodes(&f, &s, &t).severity, None);
}

#[test]
fn unprotected_kubelet() {
    assert!(kubelet_unprotected(&Settings::default(), "/var/lib/kubelet/config.yaml").is_none());
    let c = parse_config("evictionHard:\n  memory.available: 100Mi\n  nodefs.available: \"0%\"\nimageGCHighThresholdPercent: 100\n").unwrap();
    let s = effective(&[], Some(&c), "/var/lib/kubelet/config.yaml");
    let f = render(kubelet_unprotected(&s, "/var/lib/kubelet/config.yaml").unwrap());
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence["problems"].as_f64(), Some(4.0));
    assert!(f
        .summary
        .en
        .contains("nodefs.available hard eviction threshold is 0"));
    assert!(f
        .summary
        .en
        .contains("no hard eviction threshold for imagefs.available"));
    assert!(f.summary.en.contains("image GC high threshold is 100%"));
    assert!(
        f.summary.zh.contains(
            "；镜像回收高水位为 100%，镜像永远不会被回收（imageGCHighThresholdPercent 位于 /var/lib/kubelet/config.yaml）。"
        ),
        "{}",
        f.summary.zh
    );
}

#[test]
fn docker_log_limits() {
    let d = DaemonConfig::default();
    let f = render(
        docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").unwrap(),
    );
    assert_eq!(f.id, "disk.docker_log_unbounded");
    assert!(f
        .summary
        .en
        .contains("/etc/docker/daemon.json sets no log-opts max-size"));
    assert!(f
        .remediation
        .commands
        .contains(&"cat /etc/docker/daemon.json".to_string()));
    assert!(
        !f.evidence.contains_key("log_max_file"),
        "no empty evidence"
    );
    let d = DaemonConfig {
        log_max_size: Some("100m".into()),
        ..Default::default()
    };
    assert!(docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").is_none());
    let d = DaemonConfig {
        log_driver: Some("journald".into()),
        ..Default::default()
    };
    assert!(docker_log_unbounded(Some(&d), "/etc/docker/daemon.json", "/var/lib/docker").is_none());
}

#[test]
fn docker_log_limits_without_a_daemon_json() {
    // No daemon.json: docker's defaults (json-file, unlimited). The finding says the file
    // is missing instead of claiming it lacks a setting, and does not `cat` it.
    let f =
        render(docker_log_unbounded(None, "/etc/docker/daemon.json", "/var/lib/docker").unwrap());
    assert!(
        f.summary.en.contains("there is no /etc/docker/daemon.json"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.zh.contains("节点上没有 /etc/docker/daemon.json"));
    assert_eq!(
        f.evidence["daemon_json_exists"],
        crate::finding::Evidence::from(false)
    );
    assert!(f
        .remediation
        .commands
        .iter()
        .all(|c| !c.starts_with("cat ")));
}

#[test]
fn thresholds_print_as_the_kubelet_writes_them() {
    assert_eq!(fmt_threshold(&Threshold::Percent(10.0)), "10%");
    assert_eq!(fmt_threshold(&Threshold::Quantity(1536.0)), "1.5 KiB");
    assert_eq!(fmt_threshold(&Threshold::Quantity(12.7)), "12 B");
}

// ---- time to full ----

use crate::disk::trend::{self, Point};

const MIB_F: f64 = 1048576.0;
const GIB_F: f64 = 1073741824.0;
/// 2026-11-27T17:00:00Z.
const T0: f64 = 1_795_798_800.0;

/// A kubelet filesystem of 100 GiB (1,000,000 inodes) with a history of `n` readings every
/// `step` seconds: `avail(i)` bytes and `inodes(i)` free inodes at reading `i`; the sample's
/// usage is the last reading.
fn filling(
    roles: &[Role],
    n: usize,
    step: f64,
    avail: impl Fn(usize) -> f64,
    inodes: impl Fn(usize) -> f64,
    t: &Thresholds,
) -> FsSample {
    let points: Vec<Point> = (0..n)
        .map(|i| Point {
            t: T0 + i as f64 * step,
            avail_bytes: avail(i),
            files_free: inodes(i),
        })
        .collect();
    let mut f = fs(roles, 100 * GIB_U, avail(n - 1) as u64);
    f.mount_point = "/var/lib/kubelet".into();
    f.usage.files = 1_000_000;
    f.usage.files_free = inodes(n - 1) as u64;
    f.trend.space = trend::fit(&points, trend::Resource::Space, t);
    f.trend.inodes = trend::fit(&points, trend::Resource::Inodes, t);
    f
}

fn filling_drafts(f: &FsSample, s: &Settings, t: &Thresholds) -> Vec<Draft> {
    let sample = DiskSample {
        filesystems: vec![f.clone()],
        kubelet: Some((s.clone(), "/var/lib/kubelet/config.yaml".into())),
        ..DiskSample::default()
    };
    judge(&sample, t)
        .into_iter()
        .filter(|d| d.id.ends_with("filling_up"))
        .collect()
}

fn num(d: &Draft, name: &str) -> f64 {
    d.evidence
        .get(name)
        .and_then(|e| e.as_f64())
        .unwrap_or_else(|| panic!("no {name}: {:?}", d.evidence))
}

fn text<'a>(d: &'a Draft, name: &str) -> &'a str {
    d.evidence
        .get(name)
        .and_then(|e| e.as_str())
        .unwrap_or_else(|| panic!("no {name}: {:?}", d.evidence))
}

const FLAT_INODES: fn(usize) -> f64 = |_| 900_000.0;

#[test]
fn steady_growth_gives_the_eta_to_the_hard_threshold() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 1 MiB/s for 2 h (a reading every 3 min), 20 GiB left: 10 GiB above nodefs.available<10%.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 20.0 * GIB_F + (40 - i) as f64 * 180.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.id, "disk.filling_up");
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.subject, "/var/lib/kubelet");
    let eta = num(d, "seconds_to_threshold");
    assert!((eta - 10240.0).abs() < 10240.0 * 0.02, "{eta}");
    assert!((num(d, "fill_rate_bytes_per_second") - MIB_F).abs() < MIB_F * 0.01);
    assert_eq!(text(d, "threshold"), "nodefs.available<10%");
    assert_eq!(text(d, "threshold_signal"), "nodefs.available");
    assert_eq!(text(d, "threshold_kind"), "hard");
    assert_eq!(num(d, "threshold_free_bytes"), (10.0 * GIB_F).round());
    assert_eq!(text(d, "threshold_source"), "kubelet default");
    // The last reading is T0 + 120 min = 19:00; + 10240 s = 21:50:40.
    assert_eq!(text(d, "threshold_at"), "2026-11-27T21:50:40Z");
    assert_eq!(num(d, "history_seconds"), 7200.0);
    assert!(d.is("hard_eviction") && d.is("origin_default"));
    // In the built-in words.
    let f = render(d.clone());
    assert!(
        f.summary.en.contains("nodefs.available<10%"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.en.contains("1.0 MiB/s"), "{}", f.summary.en);
    assert!(
        f.summary
            .en
            .contains("in about 171 min, at 2026-11-27T21:50:40Z"),
        "{}",
        f.summary.en
    );
    assert!(f.summary.zh.contains("硬驱逐阈值"), "{}", f.summary.zh);
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "du -xh -d 3 /var/lib/kubelet | sort -h | tail -n 20"));
}

#[test]
fn within_the_critical_horizon_is_critical() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 10 MiB/s with 15 GiB left: 5 GiB above the threshold, 512 s.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 15.0 * GIB_F + (40 - i) as f64 * 1800.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(d[0].severity, Severity::Critical);
    assert!((num(&d[0], "seconds_to_threshold") - 512.0).abs() < 15.0);
}

#[test]
fn a_burst_followed_by_a_delete_is_not_filling() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 30 GiB free for 2 h, except 3 readings where a 12 GiB file came and went.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| {
            if (20..23).contains(&i) {
                18.0 * GIB_F
            } else {
                30.0 * GIB_F
            }
        },
        FLAT_INODES,
        &t,
    );
    assert!(f.trend.space.is_some_and(|fit| !fit.filling));
    assert!(filling_drafts(&f, &s, &t).is_empty());
    // A burst that stopped: 10 GiB written in 10 minutes, then flat for 40 min.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| {
            if i < 25 {
                25.0 * GIB_F
            } else if i < 28 {
                25.0 * GIB_F - (i - 24) as f64 * 3.3 * GIB_F
            } else {
                15.0 * GIB_F
            }
        },
        FLAT_INODES,
        &t,
    );
    assert!(filling_drafts(&f, &s, &t).is_empty(), "{:?}", f.trend.space);
}

#[test]
fn a_noisy_flat_line_is_not_filling() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 12 GiB free (2 GiB above the threshold) give or take 300 MiB of noise.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let noise: Vec<f64> = (0..41)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 600) as f64 - 300.0
        })
        .collect();
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 12.0 * GIB_F + noise[i] * MIB_F,
        FLAT_INODES,
        &t,
    );
    assert!(f.trend.space.is_some());
    assert!(filling_drafts(&f, &s, &t).is_empty(), "{:?}", f.trend.space);
}

#[test]
fn shrinking_use_is_not_filling() {
    let t = Thresholds::default();
    let s = Settings::default();
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 12.0 * GIB_F + i as f64 * 180.0 * MIB_F,
        |i| 100_000.0 + i as f64 * 100.0,
        &t,
    );
    assert!(f
        .trend
        .space
        .is_some_and(|fit| fit.rate < 0.0 && !fit.filling));
    assert!(filling_drafts(&f, &s, &t).is_empty());
}

#[test]
fn too_little_history_gives_no_fit() {
    let t = Thresholds::default();
    let s = Settings::default();
    // Fast growth, but 9 readings over 24 min: not enough (30 min, 10 points).
    let f = filling(
        &[Role::Kubelet],
        9,
        180.0,
        |i| 15.0 * GIB_F - i as f64 * 180.0 * 10.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    assert_eq!(f.trend.space, None);
    assert!(filling_drafts(&f, &s, &t).is_empty());
    // Ten readings 15 s apart: enough points, too short a span.
    let f = filling(
        &[Role::Kubelet],
        10,
        15.0,
        |i| 15.0 * GIB_F - i as f64 * 15.0 * 10.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    assert_eq!(f.trend.space, None);
}

#[test]
fn a_soft_threshold_counts_its_grace_period() {
    let t = Thresholds::default();
    let cfg = parse_config(
        "evictionSoft:\n  nodefs.available: \"30%\"\nevictionSoftGracePeriod:\n  nodefs.available: 1m30s\n",
    )
    .unwrap();
    let s = effective(&[], Some(&cfg), "/var/lib/kubelet/config.yaml");
    assert_eq!(
        s.eviction_soft_grace.get("nodefs.available"),
        Some(&std::time::Duration::from_secs(90))
    );
    // 40 GiB free at 1 MiB/s: 10 GiB above the soft 30% (10240 s + 90 s of grace), 30 GiB
    // above the hard 10%.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 40.0 * GIB_F + (40 - i) as f64 * 180.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(text(d, "threshold_kind"), "soft");
    assert_eq!(text(d, "threshold"), "nodefs.available<30%");
    assert_eq!(num(d, "grace_period_seconds"), 90.0);
    assert!((num(d, "seconds_to_threshold") - 10330.0).abs() < 10330.0 * 0.02);
    assert!(d.is("soft_eviction") && d.is("origin_file"));
    let f = render(d.clone());
    assert!(
        f.summary.en.contains("grace period of 1.5 min"),
        "{}",
        f.summary.en
    );
    assert!(
        f.summary
            .en
            .contains("evictionSoft in /var/lib/kubelet/config.yaml"),
        "{}",
        f.summary.en
    );
    // The flag form wins over the file.
    let s = effective(
        &["--eviction-soft-grace-period=nodefs.available=2m".to_string()],
        Some(&cfg),
        "/var/lib/kubelet/config.yaml",
    );
    assert_eq!(
        s.eviction_soft_grace.get("nodefs.available"),
        Some(&std::time::Duration::from_secs(120))
    );
}

#[test]
fn inodes_fill_towards_inodes_free() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 5 inodes/s, 100,000 free: 50,000 above nodefs.inodesFree<5% -> 10,000 s.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |_| 50.0 * GIB_F,
        |i| 100_000.0 + (40 - i) as f64 * 180.0 * 5.0,
        &t,
    );
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.id, "disk.inodes_filling_up");
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(text(d, "threshold"), "nodefs.inodesFree<5%");
    assert!((num(d, "seconds_to_threshold") - 10_000.0).abs() < 200.0);
    assert!((num(d, "fill_rate_inodes_per_second") - 5.0).abs() < 0.05);
    assert_eq!(num(d, "threshold_free_inodes"), 50_000.0);
    let f = render(d.clone());
    assert!(f.summary.en.contains("5.0 inodes/s"), "{}", f.summary.en);
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "df -i /var/lib/kubelet"));
}

#[test]
fn a_raised_forecast_clears_only_past_one_and_a_half_horizons() {
    let t = Thresholds::default();
    let s = Settings::default();
    // 5 h to the threshold: past the 4 h horizon, within 6 h.
    let f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 10.0 * GIB_F + 18_000.0 * MIB_F + (40 - i) as f64 * 180.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    assert!(filling_drafts(&f, &s, &t).is_empty());
    assert!(growing(&f, &s, &t));
    let mut raised = f.clone();
    raised.trend.raised_space = true;
    let d = filling_drafts(&raised, &s, &t);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Warning);
}

#[test]
fn without_a_kubelet_threshold_the_used_limit_applies() {
    let t = Thresholds::default();
    let s = Settings::default();
    // docker's exec root has no kubelet signal: 95% used of 100 GiB is 5 GiB available.
    let f = filling(
        &[Role::DockerExec],
        41,
        180.0,
        |i| 8.0 * GIB_F + (40 - i) as f64 * 180.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(text(&d[0], "threshold"), "used>=95%");
    assert_eq!(text(&d[0], "threshold_kind"), "node-doctor");
    assert!((num(&d[0], "seconds_to_threshold") - 3072.0).abs() < 60.0);
    assert!(d[0].is("used_limit"));
    let f = render(d[0].clone());
    assert!(
        f.summary.en.contains("no kubelet threshold applies"),
        "{}",
        f.summary.en
    );
}

#[test]
fn the_fastest_grower_is_named_with_its_advice() {
    let t = Thresholds::default();
    let s = Settings::default();
    let mut f = filling(
        &[Role::Kubelet],
        41,
        180.0,
        |i| 20.0 * GIB_F + (40 - i) as f64 * 180.0 * MIB_F,
        FLAT_INODES,
        &t,
    );
    let uid = "6f1cbb31-4ad5-4b8e-9b2e-8d3c1f0f8a77";
    f.trend.growers = vec![
        crate::disk::Grower {
            path: format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~empty-dir/cache"),
            kind: "empty_dir",
            pod_uid: Some(uid.into()),
            bytes_per_second: MIB_F,
            entries_per_second: 0.1,
            bytes: 3 << 30,
        },
        crate::disk::Grower {
            path: "/var/lib/kubelet/pods/x".into(),
            kind: "pod_dir",
            pod_uid: None,
            bytes_per_second: 10.0,
            entries_per_second: 0.0,
            bytes: 4096,
        },
    ];
    let d = filling_drafts(&f, &s, &t);
    assert_eq!(text(&d[0], "grower_kind"), "empty_dir");
    assert_eq!(text(&d[0], "grower_pod_uid"), uid);
    assert!(d[0].is("grower_empty_dir"));
    let r = render(d[0].clone());
    assert!(
        r.summary
            .en
            .contains("kubernetes.io~empty-dir/cache (+1.0 MiB/s)"),
        "{}",
        r.summary.en
    );
    assert!(r
        .remediation
        .steps
        .iter()
        .any(|s| s.en.contains("sizeLimit")));
    assert!(r
        .remediation
        .commands
        .iter()
        .any(|c| c.ends_with(&format!("| grep -- {uid}"))));
}
