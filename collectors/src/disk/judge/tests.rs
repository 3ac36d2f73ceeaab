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
