//! The node's logs as kubelet, dockerd and containerd write them, in each place real nodes keep
//! them: `/var/log/messages` (CentOS/TencentOS, TKE nodes; the traditional format in local
//! time), `/var/log/syslog` (Ubuntu; rsyslog's RFC 3339 format), and the systemd journal
//! (`/var/log/journal`, `/run/log/journal`, real journal files written by systemd 252). Each
//! staged node's `etc/localtime` is Asia/Shanghai (UTC+8), so the syslog lines below read
//! eight hours ahead of UTC, as they do on a TKE node.
//!
//! The findings are the `runtime` collector's log-derived ones: the reader
//! (`nodelog::NodeLogWatcher`), the judge (`nodelog::judge`) and the rule file
//! (`collectors/rules/runtime_logs.toml`), run here as the collector runs them; every
//! collection is recorded in `collectors/tests/golden/nodelog/`.

use collectors::nodelog::registry;
use collectors::nodelog::{judge, LiveFacts, NodeLogConfig, NodeLogWatcher, Thresholds};
use collectors::rules::RuleBook;
use collectors::{Collection, Status};

use crate::support::FakeHost;

/// 2026-11-23T12:05:00+08:00.
const NOW: i64 = 1_795_406_700;
const MID: &str = "5e8c2a0d4b3f4f6e9a1c7d2e3f405162";

fn node() -> FakeHost {
    let h = FakeHost::new();
    h.write(
        "/usr/share/zoneinfo/Asia/Shanghai",
        include_bytes!("../fixtures/zoneinfo/Asia/Shanghai"),
    );
    h.symlink("/usr/share/zoneinfo/Asia/Shanghai", "/etc/localtime");
    h
}

fn unxz(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut &b[..], &mut out).unwrap();
    out
}

/// The civil time in UTC+8 of Unix seconds `t`.
fn utc8(t: i64) -> jiff::civil::DateTime {
    jiff::tz::TimeZone::fixed(jiff::tz::offset(8))
        .to_datetime(jiff::Timestamp::from_second(t).unwrap())
}

/// A local (UTC+8) traditional syslog timestamp `secs_ago` before [`NOW`].
fn local(secs_ago: i64) -> String {
    utc8(NOW - secs_ago).strftime("%b %e %H:%M:%S").to_string()
}

/// rsyslog's high-precision timestamp `secs_ago` before [`NOW`], in UTC+8.
fn iso(secs_ago: i64) -> String {
    utc8(NOW - secs_ago)
        .strftime("%Y-%m-%dT%H:%M:%S.123456+08:00")
        .to_string()
}

/// Runs the reader and the judge as the collector does at `now`, renders the findings in the
/// rule file's words and records the collection in the golden file.
fn collect(h: &FakeHost, w: &mut NodeLogWatcher, now: i64, live: &LiveFacts) -> Collection {
    let sample = w.sample(now);
    let mut live = live.clone();
    let (dj, cc) = registry::default_paths();
    live.registries = collectors::nodelog::registry_facts(&h.host(), &sample.incidents, dj, cc, 20);
    let rules = RuleBook::builtin();
    let findings = judge::judge(&sample, &live, &Thresholds::default())
        .into_iter()
        .map(|d| rules.render(d, "node-1"))
        .collect();
    let status = if sample.report.errors.is_empty() {
        Status::Ok
    } else {
        Status::Degraded(sample.report.errors.join("; "))
    };
    let c = Collection {
        status,
        findings,
        metrics: w.metrics("runtime", &sample),
        figures: Vec::new(),
    };
    crate::golden::check(&c, &[]);
    c
}

fn ids(c: &Collection) -> Vec<&str> {
    c.findings.iter().map(|f| f.id.as_str()).collect()
}

fn watcher(h: &FakeHost) -> NodeLogWatcher {
    NodeLogWatcher::new(h.host(), NodeLogConfig::default())
}

/// A TKE CentOS node: kubelet's PLEG lines in /var/log/messages, and dockerd's line from the
/// handbook when its disk filled ("Failed to log msg ... no space left on device").
#[test]
fn centos_messages_pleg_unhealthy_on_a_full_runtime_disk() {
    let h = node();
    let mut text = String::new();
    for ago in [250, 190, 130, 70, 10] {
        text += &format!(
            "{} VM-0-7-centos kubelet[14109]: E1123 {} 14109 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m{}s ago; threshold is 3m0s\"\n",
            local(ago),
            &local(ago)[7..],
            ago % 60,
        );
    }
    text += &format!("{} VM-0-7-centos dockerd[4822]: time=\"2026-11-23T12:03:00.903943652+08:00\" level=error msg=\"Failed to log msg \\\"\\\" for logger json-file: write /opt/docker/containers/54922ec8b1863bcc504f6dac41e40139047f7a84ff09175d2800100aaccbad1f/54922ec8b1863bcc504f6dac41e40139047f7a84ff09175d2800100aaccbad1f-json.log: no space left on device\"\n", local(120));
    h.write("/var/log/messages", text);
    let mut w = watcher(&h);
    let live = LiveFacts {
        full_runtime_dirs: vec!["/opt/docker".into()],
        ..LiveFacts::default()
    };
    let c = collect(&h, &mut w, NOW, &live);
    assert_eq!(ids(&c), ["runtime.pleg_unhealthy"]);
    let f = &c.findings[0];
    assert_eq!(f.evidence["lines_in_window"].as_f64(), Some(5.0));
    assert_eq!(f.evidence["last_seen_seconds_ago"].as_f64(), Some(10.0));
    assert_eq!(f.evidence["log_file"].as_str(), Some("/var/log/messages"));
    assert!(f.summary.en.contains("/opt/docker") && f.summary.en.contains("no space left"));
    assert!(f.see_also.iter().any(|k| k == "disk-full"));
    assert!(f
        .remediation
        .commands
        .iter()
        .any(|c| c == "grep -i pleg /var/log/messages | tail -n 20"));
    // Five minutes without a new line: the condition has ended.
    let c = collect(&h, &mut w, NOW + 300, &LiveFacts::default());
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
}

/// kubelet says the runtime is down; once the runtime answers again and kubelet has stopped
/// saying so for a minute, the finding clears without waiting for the window.
#[test]
fn centos_messages_runtime_not_ready_until_the_runtime_answers() {
    let h = node();
    h.write(
        "/var/log/messages",
        format!(
            "{} VM-0-7-centos kubelet[14109]: E1123 12:04:55.100000   14109 kubelet.go:2373] \"Container runtime not ready\" runtimeReady=\"RuntimeReady=false reason:DockerDaemonNotReady message:docker: failed to get docker version: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\"\n{} VM-0-7-centos kubelet[14109]: E1123 12:04:58.000000   14109 kubelet.go:2059] \"Skipping pod synchronization\" err=\"container runtime is down\"\n",
            local(5),
            local(2),
        ),
    );
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    assert_eq!(ids(&c), ["runtime.kubelet_runtime_not_ready"]);
    assert_eq!(
        c.findings[0].evidence["reason"].as_str(),
        Some("DockerDaemonNotReady")
    );
    let answering = LiveFacts {
        runtime_responding: Some(true),
        ..LiveFacts::default()
    };
    let c = collect(&h, &mut w, NOW + 90, &answering);
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
}

/// An Ubuntu node (rsyslog's RFC 3339 format in /var/log/syslog): kubelet says the network
/// is not ready although a CNI configuration is in place (the plugin itself fails); once the
/// CRI reports the network ready and kubelet has been quiet for a minute, the finding clears.
/// With no configuration at all, the probes' `runtime.cni_not_ready` says it: no second
/// finding from the log.
#[test]
fn ubuntu_syslog_kubelet_network_not_ready_until_it_stops() {
    let h = node();
    let mut text = String::new();
    for ago in [65, 35, 5] {
        text += &format!(
            "{} node-1 kubelet[2054]: E1123 12:04:00.000000    2054 kubelet.go:2373] \"Container runtime network not ready\" networkReady=\"NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized\"\n",
            iso(ago)
        );
    }
    text += &format!(
        "{} node-1 systemd[1]: Started Session 12 of User ubuntu.\n",
        iso(4)
    );
    h.write("/var/log/syslog", text);
    let mut w = watcher(&h);
    let config_present = LiveFacts {
        cni_config_present: Some(true),
        ..LiveFacts::default()
    };
    let c = collect(&h, &mut w, NOW, &config_present);
    assert_eq!(ids(&c), ["runtime.kubelet_network_not_ready"]);
    let f = &c.findings[0];
    assert_eq!(f.evidence["lines_in_window"].as_f64(), Some(3.0));
    assert_eq!(f.evidence["log_file"].as_str(), Some("/var/log/syslog"));
    assert!(f.summary.en.contains("plugin itself"));
    let ready = LiveFacts {
        cni_config_present: Some(true),
        cri_network_ready: Some(true),
        ..LiveFacts::default()
    };
    let c = collect(&h, &mut w, NOW + 70, &ready);
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
    // The same lines on a node without any CNI configuration: the probes' finding.
    let h = node();
    h.write(
        "/var/log/syslog",
        format!(
            "{} node-1 kubelet[2054]: E1123 12:04:55.000000    2054 kubelet.go:2373] \"Container runtime network not ready\" networkReady=\"NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized\"\n",
            iso(5)
        ),
    );
    let no_config = LiveFacts {
        cni_config_present: Some(false),
        ..LiveFacts::default()
    };
    let c = collect(&h, &mut watcher(&h), NOW, &no_config);
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
}

/// The handbook's two ContainerCreating causes from the runtime: a container name already in
/// use (its FailedCreatePodSandBox event, as dockerd logs it) and docker installed twice (the
/// ttrpc error, as kubelet relays it).
#[test]
fn same_name_container_and_duplicate_docker_from_the_handbook() {
    let h = node();
    h.write(
        "/var/log/messages",
        format!(
            "{} VM-8-91-centos dockerd[1121]: time=\"2026-11-23T12:04:00.000000000+08:00\" level=error msg=\"Handler for POST /v1.40/containers/create returned error: Conflict. The container name \\\"/k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0\\\" is already in use by container \\\"30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2\\\". You have to remove (or rename) that container to be able to reuse that name.\"\n\
             {} VM-8-91-centos kubelet[1302]: E1123 12:04:30.000000    1302 remote_runtime.go:116] \"RunPodSandbox from runtime service failed\" err=\"rpc error: code = Unknown desc = failed to start sandbox container for pod \\\"nginx-7db9fccd9b-2j6dh\\\": Error response from daemon: ttrpc: client shutting down: read unix @->@/containerd-shim/moby/de2bfeefc999af42783115acca62745e6798981dff75f4148fae8c086668f667/shim.sock: read: connection reset by peer: unknown\"\n",
            local(60),
            local(30),
        ),
    );
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    assert_eq!(
        ids(&c),
        [
            "runtime.container_name_conflict",
            "runtime.ttrpc_shim_errors"
        ]
    );
    let f = &c.findings[0];
    assert_eq!(
        f.subject,
        "k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0"
    );
    assert!(f.remediation.commands.iter().any(|c| c
        == "docker ps -a --filter name='^/k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0$'"));
    assert!(
        f.remediation
            .commands
            .iter()
            .any(|c| c
                == "docker rm 30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2")
    );
    assert!(c.findings[1]
        .remediation
        .commands
        .iter()
        .any(|c| c == "rpm -qa | grep -i docker"));
}

/// Pull failures by cause, each confirmed in the runtime's registry configuration: an HTTP
/// registry docker does not list as insecure, a self-signed registry without its CA under
/// /etc/docker/certs.d, a private image without credentials, and the handbook's missing image
/// (`manifest for imroc/test:v0.2 not found`); and containerd's HTTP registry with no http://
/// endpoint in its config.
#[test]
fn image_pulls_by_cause_confirmed_in_the_runtime_config() {
    let h = node();
    h.write(
        "/etc/docker/daemon.json",
        r#"{"insecure-registries": ["192.168.0.0/16"], "registry-mirrors": ["https://mirror.ccs.tencentyun.com"]}"#,
    );
    h.write("/etc/docker/certs.d/harbor.example.com/client.key", "key");
    h.write(
        "/etc/containerd/config.toml",
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
    );
    let lines = [
        (
            300,
            r#"kubelet[1302]: E1123 12:00:00.000000    1302 remote_image.go:180] "PullImage from image service failed" err="rpc error: code = Unknown desc = Error response from daemon: Get \"https://10.0.0.5:5000/v2/\": http: server gave HTTP response to HTTPS client" image="10.0.0.5:5000/shop/web:v1""#,
        ),
        (
            240,
            r#"kubelet[1302]: E1123 12:01:00.000000    1302 kuberuntime_image.go:53] "Failed to pull image" err="rpc error: code = Unknown desc = Error response from daemon: Get \"https://harbor.example.com/v2/\": x509: certificate signed by unknown authority" image="harbor.example.com/shop/api:v3""#,
        ),
        (
            180,
            r#"kubelet[1302]: E1123 12:02:00.000000    1302 remote_image.go:180] "PullImage from image service failed" err="rpc error: code = Unknown desc = Error response from daemon: pull access denied for private/app, repository does not exist or may require 'docker login': denied: requested access to the resource is denied" image="private/app:v1""#,
        ),
        (
            120,
            r#"kubelet[1302]: E1123 12:03:00.000000    1302 remote_image.go:113] PullImage "imroc/test:v0.2" from image service failed: rpc error: code = Unknown desc = Error response from daemon: manifest for imroc/test:v0.2 not found"#,
        ),
        (
            60,
            r#"containerd[700]: time="2026-11-23T12:04:00.100000000+08:00" level=error msg="PullImage \"172.16.0.9:5000/batch/job:v2\" failed" error="failed to pull and unpack image \"172.16.0.9:5000/batch/job:v2\": failed to resolve reference \"172.16.0.9:5000/batch/job:v2\": failed to do request: Head \"https://172.16.0.9:5000/v2/batch/job/manifests/v2\": http: server gave HTTP response to HTTPS client""#,
        ),
    ];
    let text: String = lines
        .iter()
        .map(|(ago, l)| format!("{} VM-0-7-centos {l}\n", local(*ago)))
        .collect();
    h.write("/var/log/messages", text);
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    let mut got: Vec<(&str, &str)> = c
        .findings
        .iter()
        .map(|f| (f.id.as_str(), f.subject.as_str()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("runtime.image_not_found", "imroc/test:v0.2"),
            ("runtime.image_pull_auth", "private/app:v1"),
            (
                "runtime.image_pull_http_registry",
                "10.0.0.5:5000/shop/web:v1"
            ),
            (
                "runtime.image_pull_http_registry",
                "172.16.0.9:5000/batch/job:v2"
            ),
            (
                "runtime.image_pull_unknown_ca",
                "harbor.example.com/shop/api:v3"
            ),
        ]
    );
    let by = |subject: &str| c.findings.iter().find(|f| f.subject == subject).unwrap();
    let http = by("10.0.0.5:5000/shop/web:v1");
    assert!(
        http.summary.en.contains("does not list 10.0.0.5:5000"),
        "{}",
        http.summary.en
    );
    let ctd = by("172.16.0.9:5000/batch/job:v2");
    assert!(
        ctd.summary.en.contains("no http:// endpoint"),
        "{}",
        ctd.summary.en
    );
    let ca = by("harbor.example.com/shop/api:v3");
    assert!(
        ca.summary.en.contains("holds no CA certificate"),
        "{}",
        ca.summary.en
    );
    assert!(ca
        .remediation
        .commands
        .iter()
        .any(|c| c == "ls -l /etc/docker/certs.d/harbor.example.com"));
}

/// A node that keeps only the systemd journal (real journal files written by systemd 252:
/// compact, keyed hash, ZSTD; tests/fixtures/journal): kubelet's PLEG lines, dockerd's name
/// conflict and a ZSTD-compressed kubelet line about a self-signed registry, found through
/// /var/log/journal/<machine-id>/system.journal; and the same from /run/log/journal.
#[test]
fn journal_only_node() {
    for dir in ["/var/log/journal", "/run/log/journal"] {
        let h = node();
        h.write(
            &format!("{dir}/{MID}/system.journal"),
            unxz(include_bytes!(
                "../fixtures/journal/compact-zstd.journal.xz"
            )),
        );
        let mut w = watcher(&h);
        // The fixture's entries run from 04:00:00Z to 04:06:30Z, one every 10 s.
        let now = 1_795_406_400 + 400;
        let c = collect(&h, &mut w, now, &LiveFacts::default());
        let mut got = ids(&c);
        got.sort();
        assert_eq!(
            got,
            [
                "runtime.container_name_conflict",
                "runtime.image_pull_unknown_ca",
                "runtime.pleg_unhealthy"
            ],
            "{dir}"
        );
        let pleg = c
            .findings
            .iter()
            .find(|f| f.id == "runtime.pleg_unhealthy")
            .unwrap();
        assert_eq!(pleg.evidence["lines_in_window"].as_f64(), Some(10.0));
        assert_eq!(pleg.evidence["log_source"].as_str(), Some("journal"));
        assert!(pleg.remediation.commands[0].starts_with("journalctl -u kubelet"));
    }
}

/// journald forwards every line to rsyslog on CentOS: the same line is in the journal and in
/// /var/log/messages, and counts once.
#[test]
fn a_line_in_the_journal_and_in_messages_counts_once() {
    let h = node();
    h.write(
        &format!("/run/log/journal/{MID}/system.journal"),
        unxz(include_bytes!(
            "../fixtures/journal/regular-plain.journal.xz"
        )),
    );
    // The journal's ten PLEG lines (04:00:00Z + 40 s × k) as rsyslog wrote them, in UTC+8.
    let mut text = String::new();
    for k in 0..10 {
        let stamp = utc8(1_795_406_400 + 40 * k)
            .strftime("%b %e %H:%M:%S")
            .to_string();
        text += &format!("{stamp} node-1 kubelet[1234]: E1123 12:00:00.000000    1234 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s\"\n");
    }
    h.write("/var/log/messages", text);
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, 1_795_406_400 + 400, &LiveFacts::default());
    let pleg = c
        .findings
        .iter()
        .find(|f| f.id == "runtime.pleg_unhealthy")
        .unwrap();
    assert_eq!(pleg.evidence["lines_in_window"].as_f64(), Some(10.0));
}

/// A healthy node: kubelet, dockerd and containerd at work, and the incidents of earlier
/// today (a PLEG episode two hours ago, a failed pull twenty minutes ago, a conflict from last
/// night): history, not findings.
#[test]
fn healthy_node_with_benign_lines_and_old_incidents() {
    let h = node();
    let lines = [
        (
            7200,
            r#"kubelet[14109]: E1123 10:05:00.000000   14109 kubelet.go:2059] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s""#,
        ),
        (
            1200,
            r#"kubelet[14109]: E1123 11:45:00.000000   14109 remote_image.go:113] PullImage "imroc/test:v0.2" from image service failed: rpc error: code = Unknown desc = Error response from daemon: manifest for imroc/test:v0.2 not found"#,
        ),
        (
            3000,
            r#"dockerd[4822]: time="2026-11-23T11:15:00+08:00" level=error msg="Handler for POST /v1.40/containers/create returned error: Conflict. The container name \"/k8s_POD_web-0_shop_65046a06-f795-11e9-9bb6-b67fb7a70bad_0\" is already in use by container \"30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2\". You have to remove (or rename) that container to be able to reuse that name.""#,
        ),
        (
            400,
            r#"kubelet[14109]: I1123 11:58:20.000000   14109 kubelet.go:2000] "SyncLoop (PLEG): event for pod" pod="shop/web-0" event={ID:65046a06-f795-11e9-9bb6-b67fb7a70bad Type:ContainerStarted}"#,
        ),
        (
            300,
            r#"containerd[700]: time="2026-11-23T12:00:00.000000000+08:00" level=info msg="StartContainer for \"6c4f1e2b\" returns successfully""#,
        ),
        (
            200,
            r#"dockerd[4822]: time="2026-11-23T12:01:40.000000000+08:00" level=info msg="ignoring event" container=6c4f1e2b module=libcontainerd namespace=moby topic=/tasks/delete type="*events.TaskDelete""#,
        ),
        (
            100,
            r#"kubelet[14109]: I1123 12:03:20.000000   14109 kuberuntime_manager.go:1000] "Container runtime network ready""#,
        ),
        (
            50,
            r#"kubelet[14109]: I1123 12:04:10.000000   14109 image_gc_manager.go:300] "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold""#,
        ),
        (20, r#"systemd[1]: Started Session 40 of user root."#),
    ];
    let text: String = lines
        .iter()
        .map(|(ago, l)| format!("{} VM-0-7-centos {l}\n", local(*ago)))
        .collect();
    h.write("/var/log/messages", text);
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    assert!(c.findings.is_empty(), "{:?}", ids(&c));
    assert_eq!(c.status, Status::Ok);
}

/// Syslog's traditional lines carry no year: read on New Year's morning, a line of 31
/// December is last year's (40 s ago, a current PLEG finding), not next December's.
#[test]
fn new_years_morning_reads_last_nights_lines() {
    let h = node();
    h.write(
        "/var/log/messages",
        "Dec 31 23:59:50 VM-0-7-centos kubelet[14109]: E1231 23:59:50.000000   14109 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s\"\n",
    );
    let mut w = watcher(&h);
    // 2027-01-01T00:00:30+08:00.
    let now = 1_798_732_830;
    let c = collect(&h, &mut w, now, &LiveFacts::default());
    assert_eq!(ids(&c), ["runtime.pleg_unhealthy"]);
    assert_eq!(
        c.findings[0].evidence["last_seen_seconds_ago"].as_f64(),
        Some(40.0)
    );
}

/// logrotate renames /var/log/messages between two cycles: the line written just before the
/// rename is still read (from messages-20261123), then the new file.
#[test]
fn rotation_between_cycles_loses_no_line() {
    let h = node();
    h.write(
        "/var/log/messages",
        format!("{} VM-0-7-centos systemd[1]: Started kubelet.\n", local(30)),
    );
    let mut w = watcher(&h);
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    assert!(c.findings.is_empty());
    let before = format!(
        "{} VM-0-7-centos kubelet[14109]: E1123 12:05:10.000000   14109 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s\"\n",
        local(-10)
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(h.path("/var/log/messages"))
        .unwrap();
    std::io::Write::write_all(&mut f, before.as_bytes()).unwrap();
    std::fs::rename(
        h.path("/var/log/messages"),
        h.path("/var/log/messages-20261123"),
    )
    .unwrap();
    h.write(
        "/var/log/messages",
        format!(
            "{} VM-0-7-centos rsyslogd: [origin software=\"rsyslogd\"] rsyslogd was HUPed\n",
            local(-12)
        ),
    );
    let c = collect(&h, &mut w, NOW + 15, &LiveFacts::default());
    assert_eq!(ids(&c), ["runtime.pleg_unhealthy"]);
}

/// No syslog file and no journal: nothing to read, nothing claimed; a FIFO where a log file
/// should be is refused without blocking and said in the status.
#[test]
fn no_logs_and_a_fifo_where_a_log_should_be() {
    let h = node();
    let mut w = watcher(&h);
    let s = w.sample(NOW);
    assert!(s.report.no_source() && s.incidents.is_empty());
    h.fifo("/var/log/messages");
    let c = collect(&h, &mut w, NOW, &LiveFacts::default());
    match &c.status {
        Status::Degraded(why) => assert!(why.contains("FIFO"), "{why}"),
        other => panic!("{other:?}"),
    }
}
