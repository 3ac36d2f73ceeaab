//! containerd and dockerd started by hand for a test, with every root, socket and pidfile in
//! a temp dir (no systemd; `bridge: none`, iptables off, live-restore, the `vfs` storage
//! driver), and everything they started stopped and unmounted when the test ends, passing or
//! failing. Used by `real_runtime.rs` (the runtime collector against real daemons) and
//! `image.rs` (the image built, pushed, loaded and run as the DaemonSet runs it).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub fn program(names: &[&str]) -> Option<PathBuf> {
    names.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// `GET /_ping` on a docker socket: true when it answers `OK` within a second.
pub fn ping(sock: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.0 200") && out.ends_with("OK")
}

/// Three pings in a row, each answered within 250 ms: dockerd is up and has caught up (after
/// `SIGCONT` a stopped Go process first runs the timers and work that piled up).
pub fn settled(sock: &Path) -> bool {
    (0..3).all(|_| {
        let t = Instant::now();
        ping(sock) && t.elapsed() < Duration::from_millis(250)
    })
}

pub fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

pub fn alive(pid: u32) -> bool {
    // A zombie is gone for us (its parent, this test, reaps it in `Child::wait`).
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// containerd and dockerd in a temp dir, and the container they run. Everything is stopped
/// and unmounted on drop, even when an assertion failed.
pub struct Daemons {
    dir: tempfile::TempDir,
    containerd: Option<Child>,
    dockerd: Option<Child>,
    pub docker_cli: PathBuf,
    /// The container's process and its shim (live-restore keeps them past dockerd).
    pub container_pid: Option<u32>,
    /// One set of daemons at a time in this test process: two dockerds share a few
    /// machine-wide paths and would compete for the 2 CPUs their start-up timing assumes.
    /// Released after `Drop` has stopped everything.
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

impl Daemons {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    pub fn containerd_sock(&self) -> PathBuf {
        self.dir().join("c/containerd.sock")
    }
    pub fn docker_sock(&self) -> PathBuf {
        self.dir().join("d/docker.sock")
    }

    pub fn new(docker_cli: PathBuf) -> Daemons {
        // Short paths: unix socket paths are limited to 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("ndrt")
            .tempdir_in("/tmp")
            .expect("temp dir");
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let d = Daemons {
            dir,
            containerd: None,
            dockerd: None,
            docker_cli,
            container_pid: None,
            _one_at_a_time: ONE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
        let t = d.dir().to_path_buf();
        for sub in ["c/root", "c/state", "d/data", "d/exec"] {
            std::fs::create_dir_all(t.join(sub)).unwrap();
        }
        std::fs::write(
            t.join("c/config.toml"),
            format!(
                "version = 2\nroot = \"{0}/c/root\"\nstate = \"{0}/c/state\"\n\n[grpc]\n  address = \"{0}/c/containerd.sock\"\n\n[ttrpc]\n  address = \"{0}/c/containerd.sock.ttrpc\"\n",
                t.display()
            ),
        )
        .unwrap();
        std::fs::write(
            t.join("d/daemon.json"),
            serde_json::json!({
                "bridge": "none",
                "iptables": false,
                "ip6tables": false,
                "live-restore": true,
                "storage-driver": "vfs",
                "data-root": t.join("d/data"),
                "exec-root": t.join("d/exec"),
                "pidfile": t.join("d/docker.pid"),
                "hosts": [format!("unix://{}", t.join("d/docker.sock").display())],
                "containerd": t.join("c/containerd.sock"),
            })
            .to_string(),
        )
        .unwrap();
        d
    }

    pub fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir().join(name))
            .unwrap()
    }

    /// Starts containerd and waits for its socket; returns how long that took.
    pub fn start_containerd(&mut self) -> Duration {
        let start = Instant::now();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(self.dir().join("c/config.toml"))
            .stdin(Stdio::null())
            .stdout(self.log("c/log"))
            .stderr(self.log("c/log"))
            .spawn()
            .expect("start containerd");
        self.containerd = Some(child);
        let sock = self.containerd_sock();
        wait_until("containerd's socket", 20, || {
            UnixStream::connect(&sock).is_ok()
        });
        start.elapsed()
    }

    /// Starts dockerd and waits until it answers `/_ping`; returns how long that took.
    pub fn start_dockerd(&mut self) -> Duration {
        let start = Instant::now();
        let child = Command::new("dockerd")
            .arg("--config-file")
            .arg(self.dir().join("d/daemon.json"))
            .stdin(Stdio::null())
            .stdout(self.log("d/log"))
            .stderr(self.log("d/log"))
            .spawn()
            .expect("start dockerd");
        self.dockerd = Some(child);
        let sock = self.docker_sock();
        wait_until("dockerd's /_ping", 30, || ping(&sock));
        let up = start.elapsed();
        wait_until("dockerd settles", 20, || settled(&sock));
        up
    }

    pub fn docker(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new(&self.docker_cli)
            .arg("-H")
            .arg(format!("unix://{}", self.docker_sock().display()))
            .args(args)
            .output()
            .expect("run docker");
        assert!(
            out.status.success(),
            "docker {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        out
    }

    pub fn logs(&self) -> String {
        let tail = |f: &str| {
            let t = std::fs::read_to_string(self.dir().join(f)).unwrap_or_default();
            let lines: Vec<&str> = t.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        format!(
            "--- containerd\n{}\n--- dockerd\n{}",
            tail("c/log"),
            tail("d/log")
        )
    }

    pub fn dockerd_pid(&self) -> Pid {
        Pid::from_raw(self.dockerd.as_ref().expect("dockerd").id() as i32)
    }

    /// Signals dockerd; for a signal that ends it, waits for the exit.
    pub fn signal_dockerd(&mut self, sig: Signal) {
        kill(self.dockerd_pid(), sig).expect("signal dockerd");
        if matches!(sig, Signal::SIGTERM | Signal::SIGKILL) {
            let mut c = self.dockerd.take().expect("dockerd");
            c.wait().expect("wait dockerd");
        }
    }

    pub fn kill_containerd(&mut self) {
        let mut c = self.containerd.take().expect("containerd");
        c.kill().expect("kill containerd");
        c.wait().expect("wait containerd");
    }

    /// Processes whose command line names this test's temp dir (shims), besides the daemons.
    pub fn descendants(&self) -> Vec<i32> {
        let needle = self.dir().to_string_lossy().into_owned();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                if String::from_utf8_lossy(&cmd).contains(&needle) {
                    out.push(pid);
                }
            }
        }
        out
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        if let Some(pid) = self.container_pid {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        for c in [self.dockerd.take(), self.containerd.take()]
            .into_iter()
            .flatten()
        {
            let mut c = c;
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
        for pid in self.descendants() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        // Mounts the daemons left under the temp dir (netns, shm, rootfs), deepest first.
        let dir = self.dir().to_string_lossy().into_owned();
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .filter(|m| m.starts_with(&dir))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
    }
}
