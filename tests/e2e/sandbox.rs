//! A throwaway sandbox that executes printed commands the way an operator pastes them into a
//! shell, to show that host names inside them never run as code.
//!
//! Each command runs as `unshare --mount chroot <dir> /bin/sh -c <command>`: a private mount
//! namespace and a chroot that holds only a static busybox. `/bin/sh` and `/bin/touch` are
//! busybox; every other program a finding names (kubectl, crictl, systemctl, iostat, grep,
//! umount, ...) is a stand-in script that does nothing and exits with `$STANDIN_STATUS`. The
//! shell still parses each command in full (quotes, expansions, command substitutions,
//! pipelines, `;`, `&&`, `||`, newlines), so an argument that escaped its quoting runs its
//! payload, and the payloads of [`hostile`] and [`hostile_word`] touch a marker file
//! `pwned-<tag>` inside the chroot. Nothing of the host is reachable from there.
//!
//! Shared by the collector scenario tests (`collectors/tests/scenarios/hostile.rs`, which
//! include this file by path) and the end-to-end tests (`tests/e2e/hostile.rs`). Needs root
//! and the `busybox-static` Debian package (scripts/test.sh installs it); without them
//! [`Sandbox::new`] prints why and returns `None`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Programs the findings' commands call, replaced by stand-ins in the sandbox.
pub const STANDINS: &[&str] = &[
    "atop",
    "awk",
    "cat",
    "chattr",
    "conntrack",
    "crictl",
    "ctr",
    "curl",
    "df",
    "dmesg",
    "docker",
    "dpkg",
    "du",
    "ethtool",
    "findmnt",
    "fsck",
    "getent",
    "grep",
    "head",
    "iostat",
    "iotop",
    "ip",
    "iptables",
    "iptables-legacy-save",
    "iptables-nft-save",
    "iptables-save",
    "journalctl",
    "kubeadm",
    "kubectl",
    "ls",
    "lsattr",
    "lsblk",
    "mdadm",
    "netstat",
    "nsenter",
    "nstat",
    "nvme",
    "openssl",
    "ps",
    "ras-mc-ctl",
    "rpm",
    "smartctl",
    "sort",
    "ss",
    "stat",
    "swapoff",
    "swapon",
    "sysctl",
    "systemctl",
    "tail",
    "tc",
    "time",
    "timedatectl",
    "timeout",
    "top",
    "tr",
    "umount",
    "uniq",
    "vmstat",
    "xfs_repair",
];

/// A host name carrying every way out of a badly quoted word: command substitution (both
/// forms), `;`, `|`, `&&`, newlines, both quotes, an ESC sequence and a bidi override. Each
/// payload touches `pwned-<tag>`. Pasted unquoted it is valid shell that runs the payloads
/// (the quotes are balanced), which [`Sandbox::assert_executes`] checks. For names that may
/// hold spaces and newlines (directory and file names, node names, process names).
pub fn hostile(tag: &str) -> String {
    format!(
        "x$(touch pwned-{tag})`touch pwned-{tag}`;touch pwned-{tag};touch pwned-{tag}|touch pwned-{tag}&&touch pwned-{tag}\ntouch pwned-{tag}\n'it''s'\"q\"\u{1b}[31m\u{202e}"
    )
}

/// [`hostile`] without whitespace (`${IFS}` instead of spaces, no newline), for names read
/// from whitespace-separated files (`/proc/diskstats`, `/proc/<pid>/cgroup`, the kernel log).
pub fn hostile_word(tag: &str) -> String {
    format!(
        "x$(touch${{IFS}}pwned-{tag})`touch${{IFS}}pwned-{tag}`;touch${{IFS}}pwned-{tag};touch${{IFS}}pwned-{tag}|touch${{IFS}}pwned-{tag}&&touch${{IFS}}pwned-{tag}'it''s'\"q\"\u{1b}[31m\u{202e}"
    )
}

/// What one command did.
#[derive(Debug)]
pub struct Ran {
    pub status: Option<i32>,
    pub stderr: String,
}

pub struct Sandbox {
    dir: tempfile::TempDir,
    unshare: PathBuf,
    chroot: PathBuf,
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    names.iter().map(PathBuf::from).find(|p| p.is_file())
}

impl Sandbox {
    /// Builds the chroot; `None` (after printing why `test` skips) without root, a static
    /// busybox, `unshare` or `chroot`.
    pub fn new(test: &str) -> Option<Sandbox> {
        let skip = |why: &str| {
            collectors::skip!("SKIP {test}: {why}");
            None
        };
        if !is_root() {
            return skip("needs root (a private mount namespace and a chroot)");
        }
        let Some(busybox) = find_program(&["/bin/busybox", "/usr/bin/busybox"]) else {
            return skip("no busybox: install the busybox-static package (scripts/test.sh does)");
        };
        let (Some(unshare), Some(chroot)) = (
            find_program(&["/usr/bin/unshare", "/bin/unshare"]),
            find_program(&["/usr/sbin/chroot", "/sbin/chroot", "/usr/bin/chroot"]),
        ) else {
            return skip("no unshare or chroot (util-linux, coreutils)");
        };
        let dir = tempfile::tempdir().expect("sandbox dir");
        let bin = dir.path().join("bin");
        for d in ["bin", "tmp", "dev"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("sandbox dirs");
        }
        // A file stands in for /dev/null (`2>/dev/null` in some commands).
        std::fs::write(dir.path().join("dev/null"), "").expect("dev/null");
        std::fs::copy(&busybox, bin.join("busybox")).expect("copy busybox");
        for applet in ["sh", "touch"] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).expect("applet link");
        }
        for name in STANDINS {
            let p = bin.join(name);
            std::fs::write(&p, "#!/bin/sh\nexit \"${STANDIN_STATUS:-0}\"\n").expect("stand-in");
            let mut perm = std::fs::metadata(&p).expect("stand-in").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).expect("chmod stand-in");
        }
        let sb = Sandbox {
            dir,
            unshare,
            chroot,
        };
        // A dynamically linked busybox cannot run in the chroot.
        let probe = sb.run("touch probe && kubectl version", 0);
        if probe.status != Some(0) || !sb.dir.path().join("probe").exists() {
            return skip(&format!(
                "busybox does not run in a chroot (not the static build?): {probe:?}"
            ));
        }
        let _ = std::fs::remove_file(sb.dir.path().join("probe"));
        Some(sb)
    }

    /// Runs `command` with `sh -c` in the sandbox, stand-ins exiting with `status`.
    pub fn run(&self, command: &str, status: u8) -> Ran {
        let mut child = Command::new(&self.unshare)
            .arg("--mount")
            .arg(&self.chroot)
            .arg(self.dir.path())
            .args(["/bin/sh", "-c", command])
            .env_clear()
            .env("PATH", "/bin")
            .env("STANDIN_STATUS", status.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare chroot sh");
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st.code(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("command did not finish in 20 s in the sandbox: {command:?}");
                }
            }
        };
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        Ran { status, stderr }
    }

    /// Marker files (`pwned-*`) anywhere in the chroot.
    pub fn markers(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            for e in rd.flatten() {
                let p = e.path();
                if e.file_name().to_string_lossy().starts_with("pwned-") {
                    out.push(p.clone());
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&p, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }

    pub fn clear_markers(&self) {
        for m in self.markers() {
            let _ = std::fs::remove_file(m);
        }
    }

    /// Runs every command (stand-ins exiting 0, then 1, so both sides of `&&` and `||` are
    /// reached) and panics when one of them left a marker, or called a program the sandbox
    /// has no stand-in for. Also checks each command is one line of printable text.
    pub fn assert_inert<S: AsRef<str>>(&self, commands: &[S]) {
        assert!(!commands.is_empty(), "no commands to run");
        self.clear_markers();
        for c in commands {
            let c = c.as_ref();
            assert!(
                !c.chars().any(|ch| ch.is_control()
                    || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
                "a printed command holds a control character or bidi override: {c:?}"
            );
            for status in [0, 1] {
                let ran = self.run(c, status);
                let markers = self.markers();
                assert!(
                    markers.is_empty(),
                    "INJECTION: running {c:?} (stand-ins exiting {status}) created {markers:?}; stderr: {}",
                    ran.stderr
                );
                assert!(
                    !ran.stderr.contains("not found"),
                    "{c:?} calls a program the sandbox lacks (add it to STANDINS): {}",
                    ran.stderr
                );
            }
        }
    }

    /// The control: `raw` pasted without quoting into a command does run its payload here,
    /// so the sandbox would see an injection.
    pub fn assert_executes(&self, raw: &str) {
        self.clear_markers();
        let ran = self.run(&format!("kubectl describe pod {raw}"), 0);
        assert!(
            !self.markers().is_empty(),
            "the control payload did not run unquoted: {raw:?}: {ran:?}"
        );
        self.clear_markers();
    }
}
