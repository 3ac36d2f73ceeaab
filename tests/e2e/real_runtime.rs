//! Issue 17 against real daemons (root; Debian's `docker.io`, `containerd` and `runc`, which
//! `scripts/test.sh` installs): containerd and dockerd started by hand with every root,
//! socket and pidfile in a temp dir (no systemd; `bridge: none`, iptables off,
//! live-restore), a container run from an image imported from a tarball of the static
//! busybox (no registry), then dockerd stopped (`SIGSTOP`: hung), terminated (`SIGTERM`:
//! not running), killed (`SIGKILL`: its socket left behind) and containerd killed. Each state
//! gives its finding in one `node-doctor check`, and each restart clears it.
//!
//! And a real ext4 filesystem (a loop device) under a staged host root's pod directory with
//! a `chattr +i` file: `runtime.immutable_file` names it, and after `chattr -i` it is gone
//! while the kubelet log line about it stays.
//!
//! Run with `--nocapture` to see the timings (daemon start, each phase).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::daemons::{alive, ping, program, settled, wait_until, Daemons};
use crate::support::{is_root, run};

impl Daemons {
    /// `node-doctor check` of the runtime collector against these daemons (host root `/`).
    fn check(&self) -> Value {
        let (d, c) = (self.docker_sock(), self.containerd_sock());
        let out = run(
            &[
                "check",
                "--host-root",
                "/",
                "--collector",
                "runtime",
                "--format",
                "json",
                "--interval",
                "200ms",
                "--node-name",
                "rt-1",
                "--docker-socket",
                d.to_str().unwrap(),
                "--containerd-socket",
                c.to_str().unwrap(),
            ],
            &[],
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

/// An image made here (the static busybox and two applet links, imported from a tarball: no
/// registry) and a container `nd-runtime-test` running `sleep` from it, with no network.
fn run_busybox(d: &mut Daemons, busybox: &std::path::Path) {
    let img = d.dir().join("img");
    std::fs::create_dir_all(img.join("bin")).unwrap();
    std::fs::copy(busybox, img.join("bin/busybox")).unwrap();
    for applet in ["sh", "sleep"] {
        std::os::unix::fs::symlink("busybox", img.join("bin").join(applet)).unwrap();
    }
    let tar = d.dir().join("img.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&img)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .expect("tar");
    assert!(st.success());
    let started = Instant::now();
    d.docker(&["import", tar.to_str().unwrap(), "nd-busybox:test"]);
    d.docker(&[
        "run",
        "-d",
        "--name",
        "nd-runtime-test",
        "--network",
        "none",
        "nd-busybox:test",
        "/bin/sleep",
        "100000",
    ]);
    let pid = d.docker(&["inspect", "--format", "{{.State.Pid}}", "nd-runtime-test"]);
    d.container_pid = String::from_utf8_lossy(&pid.stdout).trim().parse().ok();
    println!(
        "image imported and container running in {:?}",
        started.elapsed()
    );
}

/// The runtime findings of a check: (id, subject).
fn findings(v: &Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn assert_complete(v: &Value) {
    assert_eq!(v["complete"], true, "{v:#}");
}

#[test]
fn real_dockerd_and_containerd_hung_stopped_crashed_and_restarted() {
    let name = "real_dockerd_and_containerd_hung_stopped_crashed_and_restarted";
    if !is_root() {
        collectors::skip!("SKIP {name}: needs root (starts containerd and dockerd)");
        return;
    }
    let (Some(_), Some(_), Some(_), Some(busybox)) = (
        program(&["/usr/bin/containerd", "/usr/local/bin/containerd"]),
        program(&["/usr/sbin/dockerd", "/usr/bin/dockerd"]),
        program(&["/usr/sbin/runc", "/usr/bin/runc"]),
        program(&["/bin/busybox", "/usr/bin/busybox"]),
    ) else {
        collectors::skip!("SKIP {name}: needs containerd, dockerd, runc and busybox-static (scripts/test.sh installs docker.io and busybox-static)");
        return;
    };
    let Some(cli) = program(&["/usr/bin/docker", "/usr/local/bin/docker"]) else {
        collectors::skip!("SKIP {name}: no docker client");
        return;
    };
    let mut d = Daemons::new(cli);
    let t_containerd = d.start_containerd();
    let t_dockerd = d.start_dockerd();
    println!("containerd up in {t_containerd:?}, dockerd up in {t_dockerd:?}");
    run_busybox(&mut d, &busybox);

    let dsock = d.docker_sock().to_string_lossy().into_owned();
    let csock = d.containerd_sock().to_string_lossy().into_owned();
    let phase = |d: &Daemons, what: &str, want: &[(&str, &str)]| {
        let t = Instant::now();
        let v = d.check();
        let took = t.elapsed();
        assert_complete(&v);
        let got = findings(&v);
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(i, s)| (i.to_string(), s.to_string()))
            .collect();
        assert_eq!(got, want, "{what}: {v:#}\n{}", d.logs());
        println!("{what}: {got:?} in one check of {took:?}");
        v
    };

    // Healthy: both answer, they agree on the running container.
    let v = phase(&d, "healthy", &[]);
    let metrics: Vec<&Value> = v["collectors"].as_array().unwrap().iter().collect();
    assert_eq!(metrics[0]["status"], "ok", "{v:#}");

    // SIGSTOP: the socket accepts, nothing answers.
    d.signal_dockerd(Signal::SIGSTOP);
    let v = phase(&d, "dockerd stopped (SIGSTOP)", &[("runtime.hung", &dsock)]);
    let f = &v["findings"][0];
    assert_eq!(f["severity"], "critical");
    assert_eq!(f["evidence"]["daemon"], "dockerd");
    assert_eq!(f["evidence"]["pid"], d.dockerd_pid().as_raw());
    assert!(
        f["remediation"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c
                .as_str()
                .unwrap()
                .contains(&format!("docker -H unix://{dsock} ps"))),
        "{f:#}"
    );
    d.signal_dockerd(Signal::SIGCONT);
    let t = wait_until("dockerd answers after SIGCONT", 10, || {
        ping(&d.docker_sock())
    });
    let s = wait_until("dockerd settles after SIGCONT", 20, || {
        settled(&d.docker_sock())
    });
    println!("dockerd answered {t:?} after SIGCONT, settled {s:?} later");
    phase(&d, "dockerd continued (SIGCONT)", &[]);

    // SIGTERM: dockerd removes its socket and exits (live-restore keeps the container).
    d.signal_dockerd(Signal::SIGTERM);
    assert!(!d.docker_sock().exists());
    phase(
        &d,
        "dockerd terminated (SIGTERM)",
        &[("runtime.not_running", &dsock)],
    );
    let t = d.start_dockerd();
    println!("dockerd restarted in {t:?}");
    phase(&d, "dockerd restarted", &[]);

    // SIGKILL: the socket stays, nobody listens.
    d.signal_dockerd(Signal::SIGKILL);
    assert!(d.docker_sock().exists());
    phase(
        &d,
        "dockerd killed (SIGKILL)",
        &[("runtime.crashed", &dsock)],
    );
    let t = d.start_dockerd();
    println!("dockerd restarted in {t:?}");
    phase(&d, "dockerd restarted after SIGKILL", &[]);

    // containerd killed: its socket stays; dockerd (live-restore) answers on.
    d.kill_containerd();
    phase(
        &d,
        "containerd killed (SIGKILL)",
        &[("runtime.crashed", &csock)],
    );
    let t = d.start_containerd();
    println!("containerd restarted in {t:?}");
    // dockerd reconnects to containerd on its own; the container runs on.
    wait_until("dockerd lists the container again", 30, || {
        let out = Command::new(&d.docker_cli)
            .arg("-H")
            .arg(format!("unix://{dsock}"))
            .args(["ps", "-q", "--filter", "name=nd-runtime-test"])
            .output();
        out.is_ok_and(|o| !o.stdout.is_empty())
    });
    phase(&d, "containerd restarted", &[]);
    assert!(d.container_pid.is_some_and(alive), "the container survived");
}

/// Issue 28, "Runtime, docker stopped": dockerd terminated cleanly (`SIGTERM`: it removes its
/// socket and pid file) while live-restore keeps its container, and node-doctor is told
/// nothing about docker (no `--docker-socket`, no kubelet, no docker unit on this VM): the
/// shim of docker's container (`containerd-shim-runc-v2 -namespace moby`) and its task
/// directory in containerd's state are the signs, and the check warns that dockerd is not
/// running. Restarted, dockerd takes the container over and the warning is gone.
#[test]
fn real_dockerd_terminated_with_live_restore_warns_naming_docker_from_its_shims() {
    let name = "real_dockerd_terminated_with_live_restore_warns_naming_docker_from_its_shims";
    if !is_root() {
        collectors::skip!("SKIP {name}: needs root (starts containerd and dockerd)");
        return;
    }
    let (Some(_), Some(_), Some(_), Some(busybox), Some(cli)) = (
        program(&["/usr/bin/containerd", "/usr/local/bin/containerd"]),
        program(&["/usr/sbin/dockerd", "/usr/bin/dockerd"]),
        program(&["/usr/sbin/runc", "/usr/bin/runc"]),
        program(&["/bin/busybox", "/usr/bin/busybox"]),
        program(&["/usr/bin/docker", "/usr/local/bin/docker"]),
    ) else {
        collectors::skip!("SKIP {name}: needs containerd, dockerd, runc, the docker client and busybox-static (scripts/test.sh installs docker.io and busybox-static)");
        return;
    };
    if std::path::Path::new("/var/run/docker.sock").exists() {
        collectors::skip!("SKIP {name}: this machine has a docker socket at /var/run/docker.sock");
        return;
    }
    let mut d = Daemons::new(cli);
    d.start_containerd();
    d.start_dockerd();
    run_busybox(&mut d, &busybox);
    // Nothing about docker on the command line: what the node shows is all there is.
    let check = || {
        let out = run(
            &[
                "check",
                "--host-root",
                "/",
                "--collector",
                "runtime",
                "--format",
                "json",
                "--interval",
                "200ms",
                "--node-name",
                "rt-2",
            ],
            &[],
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, out.status.code())
    };
    let docker_findings = |v: &Value| -> Vec<Value> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["evidence"]["daemon"] == "dockerd")
            .cloned()
            .collect()
    };
    let (v, _) = check();
    assert!(docker_findings(&v).is_empty(), "dockerd runs: {v:#}");

    d.signal_dockerd(Signal::SIGTERM);
    assert!(!d.docker_sock().exists());
    assert!(!d.dir().join("d/docker.pid").exists(), "pid file removed");
    assert!(d.container_pid.is_some_and(alive), "live-restore kept it");
    let t = Instant::now();
    let (v, code) = check();
    println!("dockerd terminated: one check in {:?}", t.elapsed());
    assert_complete(&v);
    let found = docker_findings(&v);
    assert_eq!(found.len(), 1, "{v:#}\n{}", d.logs());
    let f = &found[0];
    assert_eq!(f["id"], "runtime.not_running", "{f:#}");
    assert_eq!(f["severity"], "warning", "{f:#}");
    assert_eq!(f["subject"], "/var/run/docker.sock", "{f:#}");
    assert_eq!(f["evidence"]["expected_because"], "moby_shims", "{f:#}");
    assert!(f["evidence"]["moby_shims"].as_u64() >= Some(1), "{f:#}");
    assert!(f["title"].as_str().unwrap().contains("dockerd"), "{f:#}");
    assert!(
        f["summary"].as_str().unwrap().contains("live-restore"),
        "{f:#}"
    );
    assert_eq!(
        code.map(|c| c & 3),
        Some(1),
        "a warning is the worst: {v:#}"
    );

    d.start_dockerd();
    let (v, _) = check();
    assert!(docker_findings(&v).is_empty(), "dockerd back: {v:#}");
    assert!(d.container_pid.is_some_and(alive), "the container survived");
}

/// A loop-mounted ext4 filesystem at `<root>/var/lib/kubelet/pods`; unmounted on drop.
struct Ext4Pods {
    root: tempfile::TempDir,
    mnt: PathBuf,
    locked: Option<PathBuf>,
}

impl Drop for Ext4Pods {
    fn drop(&mut self) {
        if let Some(f) = &self.locked {
            let _ = Command::new("chattr").arg("-i").arg(f).status();
        }
        let _ = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH);
        let _ = self.root.path();
    }
}

#[test]
fn an_immutable_file_under_a_pod_directory_on_real_ext4() {
    let name = "an_immutable_file_under_a_pod_directory_on_real_ext4";
    if !is_root() {
        collectors::skip!("SKIP {name}: needs root (mounts a loop device)");
        return;
    }
    let (Some(mkfs), Some(chattr)) = (
        program(&["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]),
        program(&["/usr/bin/chattr", "/bin/chattr"]),
    ) else {
        collectors::skip!("SKIP {name}: needs e2fsprogs (mkfs.ext4, chattr)");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let mnt = root.path().join("var/lib/kubelet/pods");
    std::fs::create_dir_all(&mnt).unwrap();
    let image = root.path().join("pods.img");
    let f = std::fs::File::create(&image).unwrap();
    f.set_len(16 << 20).unwrap();
    let st = Command::new(mkfs)
        .args(["-q", "-F"])
        .arg(&image)
        .status()
        .expect("mkfs.ext4");
    assert!(st.success());
    let st = Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&mnt)
        .status()
        .expect("mount -o loop");
    if !st.success() {
        collectors::skip!("SKIP {name}: cannot mount a loop device here");
        return;
    }
    let mut guard = Ext4Pods {
        root,
        mnt: mnt.clone(),
        locked: None,
    };
    let root = guard.root.path().to_path_buf();
    std::os::unix::fs::symlink("/proc", root.join("proc")).unwrap();
    std::fs::write(
        root.join("var/lib/kubelet/config.yaml"),
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
    )
    .unwrap();
    let uid = "65046a06-f795-11e9-9bb6-b67fb7a70bad";
    let dir = mnt.join(format!("{uid}/volumes/kubernetes.io~empty-dir/data"));
    std::fs::create_dir_all(&dir).unwrap();
    let locked = dir.join("locked.txt");
    std::fs::write(&locked, "x").unwrap();
    std::fs::write(dir.join("plain.txt"), "y").unwrap();
    let st = Command::new(&chattr)
        .arg("+i")
        .arg(&locked)
        .status()
        .unwrap();
    assert!(st.success());
    guard.locked = Some(locked.clone());
    let host_path =
        format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~empty-dir/data/locked.txt");
    // The kubelet's complaint about it stays in the log throughout.
    let log = format!(
        "Sep 27 14:37:21 node-1 kubelet[14109]: E0927 14:37:21.922965 14109 kubelet_pods.go:1120] failed to remove pod directory: unlinkat {host_path}: operation not permitted\n"
    );
    std::fs::create_dir_all(root.join("var/log")).unwrap();
    std::fs::write(root.join("var/log/messages"), &log).unwrap();

    let check = || immutable_findings(&root);
    let found = check();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f["subject"], host_path.as_str());
    assert_eq!(f["evidence"]["attributes"], "i");
    assert_eq!(f["evidence"]["pod_uid"], uid);
    let commands: Vec<&str> = f["remediation"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    // `~` is not a bare shell word: the path is one quoted argument.
    assert!(
        commands.contains(&format!("chattr -i '{host_path}'").as_str()),
        "{commands:?}"
    );
    assert!(
        commands.contains(&format!("lsattr -d '{host_path}'").as_str()),
        "{commands:?}"
    );

    let st = Command::new(&chattr)
        .arg("-i")
        .arg(&locked)
        .status()
        .unwrap();
    assert!(st.success());
    guard.locked = None;
    assert!(check().is_empty());
    assert_eq!(
        std::fs::read_to_string(root.join("var/log/messages")).unwrap(),
        log,
        "the log is unchanged"
    );
}

/// A loop device with an ext4 filesystem mounted at `mnt`; on drop (also after a failed
/// assertion) the attribute is cleared, the filesystem unmounted and the loop device
/// detached.
struct Ext4Loop {
    mnt: PathBuf,
    loop_dev: Option<String>,
    locked: Option<PathBuf>,
}

impl Drop for Ext4Loop {
    fn drop(&mut self) {
        if let Some(f) = self.locked.take() {
            let _ = Command::new("chattr").arg("-i").arg(f).status();
        }
        let _ = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH);
        if let Some(dev) = self.loop_dev.take() {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

/// Issue 28, "immutable file under data-root": docker's `data-root` is `/data/docker`
/// (daemon.json), a real ext4 filesystem on a loop device, and a file of a writable layer
/// there has `chattr +i`; the kubelet's log has the handbook's line naming it
/// (`RemoveContainer … failed to remove root filesystem: remove
/// /data/docker/overlay2/<layer>/diff/usr/bin/bash: operation not permitted`). No layer
/// database names the layer, no dockerd runs: the log line alone makes the collector look,
/// and `runtime.immutable_file` names the file. After `chattr -i` it is gone.
#[test]
fn an_immutable_file_the_kubelet_log_names_under_docker_data_root_on_real_ext4() {
    let name = "an_immutable_file_the_kubelet_log_names_under_docker_data_root_on_real_ext4";
    if !is_root() {
        collectors::skip!("SKIP {name}: needs root (mounts a loop device)");
        return;
    }
    let (Some(mkfs), Some(chattr), Some(losetup)) = (
        program(&["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]),
        program(&["/usr/bin/chattr", "/bin/chattr"]),
        program(&["/usr/sbin/losetup", "/sbin/losetup"]),
    ) else {
        collectors::skip!("SKIP {name}: needs e2fsprogs (mkfs.ext4, chattr) and losetup");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let mnt = root.path().join("data/docker");
    std::fs::create_dir_all(&mnt).unwrap();
    let image = root.path().join("data-root.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let st = Command::new(mkfs)
        .args(["-q", "-F"])
        .arg(&image)
        .status()
        .expect("mkfs.ext4");
    assert!(st.success());
    let mut guard = Ext4Loop {
        mnt: mnt.clone(),
        loop_dev: None,
        locked: None,
    };
    let out = Command::new(&losetup)
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .expect("losetup");
    if !out.status.success() {
        collectors::skip!(
            "SKIP {name}: cannot attach a loop device here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    guard.loop_dev = Some(dev.clone());
    let st = Command::new("mount")
        .arg(&dev)
        .arg(&mnt)
        .status()
        .expect("mount");
    assert!(st.success(), "mount {dev}");

    let layer = "b1aea29c590aa9abda79f7cf3976422073fb3652757f0391db88534027546868";
    let host_path = format!("/data/docker/overlay2/{layer}/diff/usr/bin/bash");
    let file = root.path().join(host_path.trim_start_matches('/'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "elf").unwrap();
    let st = Command::new(&chattr).arg("+i").arg(&file).status().unwrap();
    assert!(st.success());
    guard.locked = Some(file.clone());
    assert!(
        std::fs::remove_file(&file).is_err(),
        "an immutable file cannot be removed, even by root"
    );

    let r = root.path();
    std::os::unix::fs::symlink("/proc", r.join("proc")).unwrap();
    std::fs::create_dir_all(r.join("etc/docker")).unwrap();
    std::fs::write(
        r.join("etc/docker/daemon.json"),
        r#"{"data-root": "/data/docker", "storage-driver": "overlay2"}"#,
    )
    .unwrap();
    // The handbook's kubelet line, dated now (syslog format, UTC: no etc/localtime).
    let now = Command::new("date")
        .args(["-u", "+%b %e %H:%M:%S"])
        .output()
        .expect("date");
    let now = String::from_utf8_lossy(&now.stdout).trim().to_string();
    let cid = "19d837c77a3c294052a99ff9347c520bc8acb7b8b9a9dc9fab281fc09df38257";
    let log = format!(
        "{now} node-1 kubelet[14109]: E0927 14:37:21.922965 14109 remote_runtime.go:250] RemoveContainer \"{cid}\" from runtime service failed: rpc error: code = Unknown desc = failed to remove container \"{cid}\": Error response from daemon: container {cid}: driver \"overlay2\" failed to remove root filesystem: remove {host_path}: operation not permitted\n"
    );
    std::fs::create_dir_all(r.join("var/log")).unwrap();
    std::fs::write(r.join("var/log/messages"), &log).unwrap();

    let check = || immutable_findings(r);
    let found = check();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f["subject"], host_path.as_str());
    assert_eq!(f["evidence"]["file"], host_path.as_str());
    assert_eq!(f["evidence"]["attributes"], "i");
    assert_eq!(f["evidence"]["log_program"], "kubelet");
    assert_eq!(f["evidence"]["log_file"], "/var/log/messages");
    let commands: Vec<&str> = f["remediation"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        commands.contains(&format!("chattr -i {host_path}").as_str()),
        "{commands:?}"
    );

    let st = Command::new(&chattr).arg("-i").arg(&file).status().unwrap();
    assert!(st.success());
    guard.locked = None;
    assert!(
        check().is_empty(),
        "cleared: no finding though the log line stays"
    );
}

/// `check --collector runtime` on `root`: its `runtime.immutable_file` findings.
fn immutable_findings(root: &std::path::Path) -> Vec<Value> {
    let out = run(
        &[
            "check",
            "--host-root",
            root.to_str().unwrap(),
            "--collector",
            "runtime",
            "--format",
            "json",
            "--interval",
            "100ms",
            "--node-name",
            "node-1",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "runtime.immutable_file")
        .cloned()
        .collect()
}
