//! Issue 3 on a real kernel, through the binary (root): a 64 MiB tmpfs mounted at
//! `<tmp root>/var/lib/docker`, filled to 97%, and `node-doctor check --host-root <tmp root>`.
//!
//! The tmp root's `proc` is a symlink to the real `/proc`, as in the collector's in-process
//! test: the real pid 1's mountinfo lists the tmpfs at its real path `<tmp root>/var/lib/docker`,
//! and the disk collector, seeing that the host's view (`/var/lib/docker`) has another device,
//! finds the mount by the agent's view of the path and reports it by its host-side path. The
//! processes in the real `/proc` (this test among them) are what the deleted-file scan sees.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::run;

const MIB: u64 = 1024 * 1024;

/// Prints why a real-kernel test does not run; true when it may.
pub fn root_or_skip(name: &str) -> bool {
    if crate::support::is_root() {
        true
    } else {
        collectors::skip!("SKIP {name}: needs root (mounts a tmpfs)");
        false
    }
}

/// The tmpfs root of a test, or `None` after printing why it does not run: not root, or pid 1
/// in another mount namespace than this test (the staged root's `proc` is the real one, so the
/// agent reads the host's mounts as pid 1 sees them, and the tmpfs is not among them).
fn tmpfs_root_or_skip(name: &str, size_mib: u64) -> Option<TmpfsRoot> {
    if !root_or_skip(name) {
        return None;
    }
    let root = TmpfsRoot::new(size_mib).expect("tmpfs root");
    let pid1_sees_it = std::fs::read_to_string("/proc/1/mountinfo")
        .is_ok_and(|m| m.contains(&*root.mnt.to_string_lossy()));
    if !pid1_sees_it {
        collectors::skip!(
            "SKIP {name}: pid 1 is in another mount namespace (the agent reads the host's mounts \
             as pid 1 sees them, and this test's tmpfs is not among them)"
        );
        return None;
    }
    Some(root)
}

/// A tmp host root with a tmpfs at `var/lib/docker` and `proc -> /proc`; unmounted on drop,
/// even when an assertion failed.
struct TmpfsRoot {
    dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl TmpfsRoot {
    fn new(size_mib: u64) -> Result<TmpfsRoot, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mnt = dir.path().join("var/lib/docker");
        std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size_mib}m").as_str()),
        )
        .map_err(|e| format!("mount tmpfs at {}: {e}", mnt.display()))?;
        let root = TmpfsRoot { dir, mnt };
        // docker's own layout: a data root without it (no dockerd runs here) is not docker.
        for d in ["containers", "image"] {
            std::fs::create_dir_all(root.mnt.join(d)).map_err(|e| e.to_string())?;
        }
        std::os::unix::fs::symlink("/proc", root.dir.path().join("proc"))
            .map_err(|e| e.to_string())?;
        Ok(root)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `bytes` of real data to `name` on the tmpfs.
    fn fill(&self, name: &str, bytes: u64) {
        let chunk = vec![0x5au8; MIB as usize];
        let mut f = std::fs::File::create(self.mnt.join(name)).unwrap();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(MIB);
            std::io::Write::write_all(&mut f, &chunk[..n as usize]).unwrap();
            left -= n;
        }
    }

    /// (size, used) of the tmpfs in bytes, as `df` counts them.
    fn usage(&self) -> (u64, u64) {
        let s = nix::sys::statvfs::statvfs(&self.mnt).unwrap();
        let frag = s.fragment_size() as u64;
        let size = s.blocks() as u64 * frag;
        (size, size - s.blocks_free() as u64 * frag)
    }

    /// Fills the tmpfs until `target_percent` of it is used (a new file each time).
    fn fill_to(&self, target_percent: f64) {
        let (size, used) = self.usage();
        let target = (size as f64 * target_percent / 100.0) as u64;
        let name = format!("filler-{used}");
        self.fill(&name, target.saturating_sub(used) / 4096 * 4096);
    }
}

impl Drop for TmpfsRoot {
    fn drop(&mut self) {
        if let Err(e) = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH) {
            eprintln!("umount {}: {e}", self.mnt.display());
        }
    }
}

/// A child process (`sleep`) whose stdin is a file; killed and reaped on drop.
struct Holder(std::process::Child);

impl Holder {
    fn spawn(file: std::fs::File) -> Holder {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::from(file))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn sleep");
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `node-doctor check --host-root <root> --format json --collector disk`.
fn check_disk(root: &TmpfsRoot) -> (i32, Value) {
    let out = run(
        &[
            "check",
            "--host-root",
            root.root().to_str().unwrap(),
            "--format",
            "json",
            "--collector",
            "disk",
            "--interval",
            "100ms",
            // The default timeout is the interval (100 ms); a disk walk on a loaded 2-CPU CI
            // machine can take longer, and a timeout here is not what this test is about.
            "--collector-timeout",
            "20s",
            "--node-name",
            "e2e-node",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), v)
}

fn finding<'a>(v: &'a Value, id: &str, subject: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id && f["subject"] == subject)
        .unwrap_or_else(|| panic!("no {id} for {subject}:\n{v:#}"))
}

fn num(f: &Value, key: &str) -> f64 {
    f["evidence"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("evidence {key} is not a number: {f:#}"))
}

fn commands(f: &Value) -> Vec<&str> {
    f["remediation"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

#[test]
fn real_check_tmpfs_docker_root_at_97_percent_is_critical_exit_2() {
    let Some(root) = tmpfs_root_or_skip(
        "real_check_tmpfs_docker_root_at_97_percent_is_critical_exit_2",
        64,
    ) else {
        return;
    };
    root.fill_to(97.5);
    let (size, used) = root.usage();
    let (code, v) = check_disk(&root);
    crate::serve::assert_contract(&v, "e2e-node");
    let disk = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "disk")
        .expect("disk collector ran");
    assert_eq!(disk["status"], "ok", "{disk}");
    let f = finding(&v, "disk.filesystem_full", "/var/lib/docker");
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert_eq!(f["collector"], "disk");
    assert_eq!(f["evidence"]["fstype"], "tmpfs");
    assert_eq!(f["evidence"]["mount_point"], "/var/lib/docker", "{f:#}");
    assert_eq!(num(f, "size_bytes"), (64 * MIB) as f64);
    assert_eq!(num(f, "size_bytes"), size as f64);
    let pct = num(f, "used_percent");
    assert!((97.0..=100.0).contains(&pct), "{pct}");
    assert!(
        (pct - used as f64 * 100.0 / size as f64).abs() < 0.5,
        "used_percent {pct} vs statvfs {used}/{size}"
    );
    assert_eq!(f["evidence"]["threshold"], "imagefs.available<15%");
    assert_eq!(
        f["remediation"]["source"]["section"],
        "节点磁盘爆满排障处理"
    );
    assert!(!commands(f).is_empty());
    // Linked to the catalogue's "no space left on device" sandbox failure.
    assert_eq!(crate::see_also::assert_links_resolve(f), vec!["disk-full"]);
    // Critical finding: exit code 2.
    assert_eq!(code, 2, "{v:#}");
}

#[test]
fn real_check_deleted_but_open_file_names_the_holder_pid_and_size() {
    let Some(root) = tmpfs_root_or_skip(
        "real_check_deleted_but_open_file_names_the_holder_pid_and_size",
        64,
    ) else {
        return;
    };
    root.fill("held.log", 16 * MIB);
    // This test process keeps the file open after unlinking it; the binary sees it in /proc.
    let held = std::fs::OpenOptions::new()
        .append(true)
        .open(root.mnt.join("held.log"))
        .unwrap();
    std::fs::remove_file(root.mnt.join("held.log")).unwrap();
    root.fill_to(97.0);
    let (code, v) = check_disk(&root);
    assert_eq!(code, 2);
    let me = std::process::id();
    let f = finding(&v, "disk.deleted_open_files", "/var/lib/docker");
    assert_eq!(f["severity"], "critical", "{f:#}");
    assert_eq!(num(f, "top_pid"), f64::from(me), "{f:#}");
    assert_eq!(num(f, "top_bytes"), (16 * MIB) as f64);
    assert_eq!(num(f, "deleted_open_bytes"), (16 * MIB) as f64);
    assert!(f["evidence"]["top_path"]
        .as_str()
        .unwrap()
        .ends_with("/var/lib/docker/held.log"));
    let fd = num(f, "top_fd") as u32;
    assert!(
        commands(f).contains(&format!("cat /dev/null > /proc/{me}/fd/{fd}").as_str()),
        "{:?}",
        commands(f)
    );
    let summary = f["summary"].as_str().unwrap();
    assert!(summary.contains(&me.to_string()), "{summary}");
    // Closed: the finding is gone on the next check.
    drop(held);
    let (_, v) = check_disk(&root);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "disk.deleted_open_files"),
        "{v:#}"
    );

    // The same with another process as the holder: a child whose stdin is the deleted file
    // (this process keeps no descriptor of it).
    root.fill("child.log", 8 * MIB);
    let file = std::fs::File::open(root.mnt.join("child.log")).unwrap();
    let holder = Holder::spawn(file);
    std::fs::remove_file(root.mnt.join("child.log")).unwrap();
    root.fill_to(97.0);
    let child = holder.0.id();
    let (code, v) = check_disk(&root);
    assert_eq!(code, 2);
    let f = finding(&v, "disk.deleted_open_files", "/var/lib/docker");
    assert_eq!(num(f, "top_pid"), f64::from(child), "{f:#}");
    assert_eq!(f["evidence"]["top_comm"], "sleep", "{f:#}");
    assert_eq!(num(f, "top_fd"), 0.0);
    assert_eq!(num(f, "top_bytes"), (8 * MIB) as f64);
    assert!(commands(f).contains(&format!("cat /dev/null > /proc/{child}/fd/0").as_str()));
    drop(holder);
}
