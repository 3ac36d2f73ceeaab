//! The image as a newcomer deploys it (issue 26), as far as this machine allows (no base image
//! can be pulled here, so `docker build` of the Dockerfile is not run):
//!
//! - `scripts/deploy.sh push` builds the image from the release binary and the libraries it
//!   links with the Dockerfile's final-stage settings (`docker import`, real dockerd and
//!   containerd started by the test), tags it `<version>-g<commit>`, pushes it to Debian's
//!   registry (`docker-registry`) listening on 127.0.0.1, and writes an overlay pinned to the
//!   pushed digest; the image is then removed locally and pulled back by that digest.
//! - The pulled image runs `check` and `serve` with the DaemonSet's security context, every
//!   flag derived from `manifests/base/daemonset.yaml` (a field the test cannot map fails it).
//! - `scripts/deploy.sh load --ctr` imports the image into the real containerd's `k8s.io`
//!   namespace (the no-registry path of kind, k3s and containerd nodes).
//! - Both overlays render with `kubectl kustomize` and validate against the Kubernetes schemas
//!   (`tests/manifests/validate.sh --overlay`), deploying exactly the image pushed or loaded.
//!
//! Everything the test starts (daemons, registry, containers) is stopped when it ends, passing
//! or failing. Root only; prints SKIP with the reason otherwise.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::daemons::{program, wait_until, Daemons};
use crate::manifests::{http_get, repo_root};
use crate::support::{free_port, is_root, shipped_bin};

/// Debian's `docker-registry` (distribution) on a loopback port, its storage in a temp dir;
/// killed on drop.
struct Registry {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start(bin: &Path) -> Registry {
        let dir = tempfile::tempdir().expect("temp dir");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let reg = Registry {
            child,
            addr,
            _dir: dir,
        };
        wait_until("the registry answers /v2/", 20, || {
            http_get(addr, "/v2/").is_ok_and(|(status, _)| status == 200)
        });
        reg
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A container of this test, removed on drop (also when an assertion failed).
struct Container<'a> {
    daemons: &'a Daemons,
    name: String,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = Command::new(&self.daemons.docker_cli)
            .arg("-H")
            .arg(format!("unix://{}", self.daemons.docker_sock().display()))
            .args(["rm", "-f", &self.name])
            .output();
    }
}

/// `docker run` flags for the DaemonSet's pod and container security context, read from the
/// shipped manifest. Every field there must be mapped here: a new one fails the test until it
/// is.
fn daemonset_run_flags() -> Vec<String> {
    let path = repo_root().join("manifests/base/daemonset.yaml");
    let text = std::fs::read_to_string(&path).expect("read daemonset.yaml");
    let ds: Value = serde_yaml::from_str(&text).expect("daemonset.yaml is YAML");
    let pod = &ds["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container in the DaemonSet");
    let c = &containers[0];
    let mut flags: Vec<String> = Vec::new();
    let mut add = |f: &str| flags.push(f.to_string());
    let on = |v: &Value| v.as_bool() == Some(true);
    if on(&pod["hostPID"]) {
        add("--pid=host");
    }
    if on(&pod["hostNetwork"]) {
        add("--network=host");
    }
    assert!(!on(&pod["hostIPC"]), "hostIPC: map it to --ipc=host");
    // seccompProfile RuntimeDefault is docker's default profile: no flag.
    for (k, v) in pod["securityContext"].as_object().into_iter().flatten() {
        match (k.as_str(), v) {
            ("seccompProfile", v) if v["type"] == "RuntimeDefault" => {}
            _ => panic!("pod securityContext.{k}: {v}: map it to a docker run flag"),
        }
    }
    let sc = c["securityContext"].as_object().expect("securityContext");
    let uid = sc
        .get("runAsUser")
        .and_then(Value::as_u64)
        .expect("runAsUser");
    let gid = sc.get("runAsGroup").and_then(Value::as_u64).unwrap_or(uid);
    add(&format!("--user={uid}:{gid}"));
    for (k, v) in sc {
        match (k.as_str(), v) {
            ("runAsUser" | "runAsGroup", _) => {}
            ("runAsNonRoot", Value::Bool(false)) | ("privileged", Value::Bool(false)) => {}
            ("allowPrivilegeEscalation", Value::Bool(false)) => {
                add("--security-opt=no-new-privileges")
            }
            ("readOnlyRootFilesystem", Value::Bool(true)) => add("--read-only"),
            ("capabilities", caps) => {
                for d in caps["drop"].as_array().into_iter().flatten() {
                    add(&format!("--cap-drop={}", d.as_str().unwrap()));
                }
                for a in caps["add"].as_array().into_iter().flatten() {
                    add(&format!("--cap-add={}", a.as_str().unwrap()));
                }
            }
            ("appArmorProfile", v) if v["type"] == "Unconfined" => {
                add("--security-opt=apparmor=unconfined")
            }
            _ => panic!("container securityContext.{k}: {v}: map it to a docker run flag"),
        }
    }
    let volumes = pod["volumes"].as_array().expect("volumes");
    for m in c["volumeMounts"].as_array().expect("volumeMounts") {
        let name = m["name"].as_str().unwrap();
        let vol = volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volume {name}"));
        let host = vol["hostPath"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("volume {name} is not a hostPath: map it"));
        let ro = if on(&m["readOnly"]) { ":ro" } else { "" };
        // mountPropagation HostToContainer would be `:rslave`, which docker refuses where the
        // source is a private mount (this machine's /: no systemd to make it shared). The
        // propagation is not exercised here.
        add(&format!(
            "--volume={host}:{}{ro}",
            m["mountPath"].as_str().unwrap()
        ));
    }
    flags
}

/// The final stage of the Dockerfile: (USER, EXPOSE, ENTRYPOINT, CMD) as they read.
fn dockerfile_final_stage() -> (String, String, Value, Value) {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
    let lines: Vec<&str> = text.lines().collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    let mut user = String::new();
    let mut expose = String::new();
    let (mut entrypoint, mut cmd) = (Value::Null, Value::Null);
    for l in &lines[last_from + 1..] {
        if let Some(v) = l.strip_prefix("USER ") {
            user = v.trim().to_string();
        } else if let Some(v) = l.strip_prefix("EXPOSE ") {
            expose = v.trim().to_string();
        } else if let Some(v) = l.strip_prefix("ENTRYPOINT ") {
            entrypoint = serde_json::from_str(v).expect("ENTRYPOINT in exec form");
        } else if let Some(v) = l.strip_prefix("CMD ") {
            cmd = serde_json::from_str(v).expect("CMD in exec form");
        }
    }
    (user, expose, entrypoint, cmd)
}

fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo_root())
        .args(args)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs `scripts/deploy.sh`; it must succeed. Returns its last line of output.
fn deploy(args: &[&str]) -> String {
    let out = Command::new(repo_root().join("scripts/deploy.sh"))
        .args(args)
        .output()
        .expect("run scripts/deploy.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "scripts/deploy.sh {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().to_string()
}

/// True when `tag` is `<version>-g<12 hex>` or that with `-dirty.<12 hex>`.
fn tag_names_version_and_commit(tag: &str, version: &str, commit: &str) -> bool {
    let Some(rest) = tag.strip_prefix(&format!("{version}-g{commit}")) else {
        return false;
    };
    rest.is_empty()
        || rest
            .strip_prefix("-dirty.")
            .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn the_tag_names_the_version_and_the_commit() {
    let c = "0123456789ab";
    assert!(tag_names_version_and_commit(
        "0.2.0-g0123456789ab",
        "0.2.0",
        c
    ));
    assert!(tag_names_version_and_commit(
        "0.2.0-g0123456789ab-dirty.aaaaaaaaaaaa",
        "0.2.0",
        c
    ));
    assert!(!tag_names_version_and_commit("0.2.0", "0.2.0", c));
    assert!(!tag_names_version_and_commit(
        "0.1.0-g0123456789ab",
        "0.2.0",
        c
    ));
    assert!(!tag_names_version_and_commit(
        "0.2.0-g0123456789ab-dirty.",
        "0.2.0",
        c
    ));
}

/// Whether `.dockerignore` keeps `path` (relative to the repository) out of `docker build`'s
/// context: its patterns in order, the last that matches decides, `!` keeps. Only the forms
/// the file uses are understood (a path or directory, `**/*.suffix`); another form fails.
fn docker_ignores(ignore: &str, path: &str) -> bool {
    let mut ignored = false;
    for line in ignore.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (keep, pat) = match line.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, line),
        };
        let pat = pat.trim_end_matches('/');
        let hit = if let Some(suffix) = pat.strip_prefix("**/*") {
            path.ends_with(suffix)
        } else {
            assert!(
                !pat.contains(['*', '?', '[']),
                "a .dockerignore form this test does not read: {line}"
            );
            path == pat || path.starts_with(&format!("{pat}/"))
        };
        if hit {
            ignored = !keep;
        }
    }
    ignored
}

/// The build stage runs from a context `.dockerignore` trims: every file of every workspace
/// member, the workspace's own files and the scripts its RUN lines call must be in it (the
/// image is not built here: no base image can be pulled; this is what would fail first).
#[test]
fn the_build_context_holds_what_the_build_stage_needs() {
    let root = repo_root();
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).expect(".dockerignore");
    assert!(docker_ignores(&ignore, "target/debug/x"));
    assert!(docker_ignores(&ignore, "agent/src/x.rs.bk"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    let build_stage: Vec<&str> = dockerfile
        .lines()
        .skip_while(|l| !l.starts_with("FROM "))
        .skip(1)
        .take_while(|l| !l.starts_with("FROM "))
        .collect();
    let mut needed: Vec<String> = vec!["Cargo.toml".into(), "Cargo.lock".into()];
    for l in build_stage.iter().filter(|l| l.starts_with("RUN ")) {
        needed.extend(
            l.split(|c: char| c.is_whitespace() || c == '"' || c == '(' || c == ')')
                .filter(|w| w.starts_with("scripts/"))
                .map(str::to_string),
        );
    }
    assert!(
        needed.len() > 2,
        "the build stage runs no script: {build_stage:?}"
    );
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = workspace
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .expect("members");
    for m in members.trim_end_matches(']').split(',') {
        let m = m.trim().trim_matches('"');
        let files = git(&["ls-files", m]);
        assert!(!files.trim().is_empty(), "no tracked file in member {m}");
        needed.extend(files.lines().map(str::to_string));
    }
    let missing: Vec<&String> = needed
        .iter()
        .filter(|p| docker_ignores(&ignore, p))
        .collect();
    assert!(
        missing.is_empty(),
        ".dockerignore leaves these out of the build context: {missing:?}"
    );
}

fn why_skip() -> Option<String> {
    if !is_root() {
        return Some("needs root (starts containerd, dockerd and a registry)".into());
    }
    let need = [
        (
            "containerd",
            &["/usr/bin/containerd", "/usr/local/bin/containerd"][..],
        ),
        ("dockerd", &["/usr/sbin/dockerd", "/usr/bin/dockerd"]),
        ("runc", &["/usr/sbin/runc", "/usr/bin/runc"]),
        ("ctr", &["/usr/bin/ctr", "/usr/local/bin/ctr"]),
        ("docker-registry", &["/usr/bin/docker-registry"]),
        ("docker", &["/usr/bin/docker", "/usr/local/bin/docker"]),
    ];
    let missing: Vec<&str> = need
        .iter()
        .filter(|(_, paths)| program(paths).is_none())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "needs {} (scripts/test.sh installs docker.io and docker-registry)",
            missing.join(", ")
        ));
    }
    if !repo_root().join(".git").exists() {
        return Some("the repository is not a git clone: the image tag names the commit".into());
    }
    None
}

#[test]
fn the_image_is_pushed_loaded_and_runs_check_and_serve_as_the_daemonset() {
    let name = "the_image_is_pushed_loaded_and_runs_check_and_serve_as_the_daemonset";
    if let Some(why) = why_skip() {
        collectors::skip!("SKIP {name}: {why}");
        return;
    }
    let bin = shipped_bin();
    let cli = program(&["/usr/bin/docker", "/usr/local/bin/docker"]).unwrap();
    let mut d = Daemons::new(cli.clone());
    let t = d.start_containerd();
    let u = d.start_dockerd();
    println!("containerd up in {t:?}, dockerd in {u:?}");
    let registry = Registry::start(&program(&["/usr/bin/docker-registry"]).unwrap());
    let docker = format!("{} -H unix://{}", cli.display(), d.docker_sock().display());
    let work = tempfile::tempdir().unwrap();
    let overlay_push = work.path().join("pushed");
    let overlay_load = work.path().join("loaded");
    let bin_arg = bin.to_str().unwrap();

    // Push: the reference printed is <registry>/node-doctor:<tag>@<digest>.
    let started = Instant::now();
    let pushed = deploy(&[
        "push",
        &registry.addr.to_string(),
        "--binary",
        bin_arg,
        "--docker",
        &docker,
        "--out",
        overlay_push.to_str().unwrap(),
    ]);
    println!("built and pushed {pushed} in {:?}", started.elapsed());
    let (tagged, digest) = pushed.split_once('@').expect("ref@digest");
    let repo = format!("{}/node-doctor", registry.addr);
    let tag = tagged
        .strip_prefix(&format!("{repo}:"))
        .unwrap_or_else(|| panic!("{pushed} is not in {repo}"));
    let version = env!("CARGO_PKG_VERSION");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    assert!(
        tag_names_version_and_commit(tag, version, &commit),
        "tag {tag}: want {version}-g{commit}[-dirty.<tree>]"
    );
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    let (status, tags) = http_get(registry.addr, "/v2/node-doctor/tags/list").unwrap();
    assert_eq!(status, 200, "{tags}");
    let tags: Value = serde_json::from_str(&tags).unwrap();
    assert!(
        tags["tags"].as_array().unwrap().iter().any(|t| t == tag),
        "{tags}"
    );
    let overlay = std::fs::read_to_string(overlay_push.join("kustomization.yaml")).unwrap();
    assert!(
        overlay.contains(&format!("    newName: {repo}\n")),
        "{overlay}"
    );
    assert!(
        overlay.contains(&format!("    digest: {digest}\n")),
        "{overlay}"
    );

    // The registry serves it: gone locally, pulled back by its digest.
    let by_digest = format!("{repo}@{digest}");
    d.docker(&["rmi", &format!("node-doctor:{tag}"), tagged]);
    d.docker(&["pull", &by_digest]);

    // The image's configuration is the Dockerfile's final stage.
    let inspect = d.docker(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        &by_digest,
    ]);
    let config: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let (user, expose, entrypoint, cmd) = dockerfile_final_stage();
    assert_eq!(config["User"], user.as_str(), "{config}");
    assert!(
        config["ExposedPorts"]
            .get(format!("{expose}/tcp"))
            .is_some(),
        "{config}"
    );
    assert_eq!(config["Entrypoint"], entrypoint, "{config}");
    assert_eq!(config["Cmd"], cmd, "{config}");
    assert_eq!(
        config["Labels"]["org.opencontainers.image.revision"],
        git(&["rev-parse", "HEAD"]).as_str()
    );

    // `check` as the DaemonSet runs it.
    let flags = daemonset_run_flags();
    println!("docker run {}", flags.join(" "));
    let run = |extra: &[&str], args: &[&str]| -> Output {
        Command::new(&cli)
            .arg("-H")
            .arg(format!("unix://{}", d.docker_sock().display()))
            .arg("run")
            .args(&flags)
            .args(extra)
            .arg("--env=NODE_NAME=img-1")
            .arg(&by_digest)
            .args(args)
            .output()
            .expect("docker run")
    };
    let check = run(
        &["--rm"],
        &["check", "--host-root=/host", "--format", "json"],
    );
    let code = check.status.code().unwrap_or(-1);
    let report: Value = serde_json::from_slice(&check.stdout).unwrap_or_else(|e| {
        panic!(
            "check in the container (exit {code}): {e}: {}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        )
    });
    assert!(
        (0..=6).contains(&code) && code != 3,
        "exit {code}: {report}"
    );
    assert_eq!(report["node"], "img-1");
    assert_eq!(report["agent_version"], version);
    let collectors = report["collectors"].as_array().unwrap();
    assert!(collectors.len() >= 7, "{report}");
    for c in collectors {
        assert_ne!(c["status"], "error", "{c}");
    }
    for reader in ["kernel", "memory"] {
        let c = collectors.iter().find(|c| c["name"] == reader).unwrap();
        assert_eq!(
            c["status"], "ok",
            "{reader} reads the kernel log in the container: {c}"
        );
    }

    // adjtimex(2) from the pod (the runtime's default seccomp profile, no CAP_SYS_TIME): the
    // clock collector reads the node's clock there, and says what this kernel says.
    let clock = collectors.iter().find(|c| c["name"] == "clock").unwrap();
    assert_eq!(
        clock["status"], "ok",
        "adjtimex(2) in the container: {clock}"
    );
    let here = collectors::clock::timex::read().expect("adjtimex(2) on the host");
    let boot_grace_over = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok())
        .is_some_and(|u| u > 1300.0);
    if boot_grace_over || here.synchronised() {
        let reported = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "clock.unsynchronised");
        assert_eq!(reported, !here.synchronised(), "{report}");
    }

    // `serve` as the DaemonSet runs it (on a loopback port of the host's network namespace:
    // hostNetwork), stopped with SIGTERM as the kubelet stops it.
    let port = free_port();
    let container = Container {
        daemons: &d,
        name: format!("nd-image-{}", std::process::id()),
    };
    let listen = format!("--listen=127.0.0.1:{port}");
    let started = run(
        &["--detach", &format!("--name={}", container.name)],
        &["serve", &listen, "--host-root=/host", "--interval=1s"],
    );
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_until("serve in the container is ready", 30, || {
        http_get(addr, "/readyz").is_ok_and(|(s, _)| s == 200)
    });
    let (s, findings) = http_get(addr, "/findings").unwrap();
    assert_eq!(s, 200);
    let findings: Value = serde_json::from_str(&findings).unwrap();
    assert_eq!(findings["node"], "img-1");
    let (s, metrics) = http_get(addr, "/metrics").unwrap();
    assert_eq!(s, 200);
    assert!(
        metrics.contains(&format!(
            "node_doctor_build_info{{version=\"{version}\"}} 1"
        )),
        "{metrics}"
    );
    // The unprivileged container's device cgroup refuses /dev/kmsg: the kernel log is read
    // with syslog(2) and CAP_SYSLOG, as docs/deploy.md says of the pod.
    assert!(
        metrics.contains("node_doctor_kmsg_syslog_fallback{collector=\"kernel\"} 1"),
        "{metrics}"
    );
    d.docker(&["stop", "--time=10", &container.name]);
    let exit = d.docker(&[
        "inspect",
        "--format",
        "{{.State.ExitCode}}",
        &container.name,
    ]);
    assert_eq!(String::from_utf8_lossy(&exit.stdout).trim(), "0");
    drop(container);

    // No registry: imported into containerd's k8s.io namespace, where the kubelet looks.
    let loaded = deploy(&[
        "load",
        "--ctr",
        d.containerd_sock().to_str().unwrap(),
        "--binary",
        bin_arg,
        "--docker",
        &docker,
        "--out",
        overlay_load.to_str().unwrap(),
    ]);
    assert_eq!(loaded, format!("docker.io/library/node-doctor:{tag}"));
    let images = Command::new(program(&["/usr/bin/ctr", "/usr/local/bin/ctr"]).unwrap())
        .arg("--address")
        .arg(d.containerd_sock())
        .args(["-n", "k8s.io", "images", "ls", "-q"])
        .output()
        .expect("ctr images ls");
    let images = String::from_utf8_lossy(&images.stdout);
    assert!(images.lines().any(|l| l == loaded), "{images}");

    // Both overlays render and validate, deploying exactly these images.
    let validate = repo_root().join("tests/manifests/validate.sh");
    let out = Command::new(validate)
        .args(["--overlay", overlay_push.to_str().unwrap()])
        .args(["--image", &by_digest])
        .args(["--overlay", overlay_load.to_str().unwrap()])
        .args(["--image", &loaded])
        .output()
        .expect("run tests/manifests/validate.sh");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    drop(registry);
    drop(d);
}
