//! The one way collectors read a host file: non-blocking, regular files only, capped.
//!
//! Host files are untrusted input. A broken or hostile host root can put a FIFO, a socket, a
//! device or a directory where `/proc/uptime` should be, or a 200 MB file. Every read here:
//!
//! - opens with `O_NONBLOCK | O_CLOEXEC | O_NOCTTY`, so opening a FIFO or a terminal never
//!   waits and never makes it our controlling terminal;
//! - refuses anything but a regular file ([`ReadError::NotRegular`]): the path is `stat`ed
//!   before it is opened, so a device node is refused without being opened (opening some
//!   devices acts: a watchdog arms, a tape rewinds), and the opened descriptor is `fstat`ed
//!   again, so a file swapped in between is refused too. procfs and sysfs files are regular
//!   files. The readers of per-process records that a pass over every process calls
//!   thousands of times ([`read_pid_record`], [`read_prefix`]) skip the first `stat` (procfs
//!   holds no device nodes, and the extra path walk would cost a syscall per process); the
//!   `fstat` still refuses whatever a fake root puts there. So does every read under the
//!   host's procfs or sysfs once `statfs` has vouched for them ([`vouch_kernel_fs`]), except
//!   through the links that lead out of procfs (`root`, `cwd`, `fd`, `map_files`, `exe`):
//!   about 200 of the 870 `statx` calls of a `check` on this project's VM (issue 32);
//! - reads at most `cap + 1` bytes and refuses a longer file ([`ReadError::TooLarge`]), or,
//!   for the kinds where a prefix is enough ([`read_prefix`]), keeps the first `cap` bytes.
//!   procfs and sysfs report `st_size` 0, so sizes are counted as read, never taken from
//!   `fstat`.
//!
//! The caps per kind of file are in [`cap`], each with the reasoning behind it. Directory
//! listings are bounded by the entry budgets in [`entries`] ([`dir_entries`]).
//!
//! `/dev/kmsg` is a character device by design and is read by [`crate::kmsg`], which bounds
//! its reads itself (records and time per call, line length).

use std::fs::{DirEntry, File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::RwLock;

use crate::error::ReadError;
use crate::host::HostPaths;

/// Size caps per kind of host file, in bytes. A file longer than its cap is not a real kernel
/// or runtime file of that kind (or it is one this product cannot judge in bounded memory): it
/// is refused and the collector says so in its status. Figures of real files: this project's
/// CI VM (Linux 6.18, 2 vCPUs) unless stated.
pub mod cap {
    /// One value or one short line: `/proc/uptime` (15 B here), `/proc/loadavg` (27 B),
    /// sysctls under `/proc/sys` (a number or a short string; `kernel/osrelease` 16 B),
    /// `/proc/net/ip_tables_names` (at most the 5 table names), `/sys/block/dm-N/dm/name`
    /// (DM_NAME_LEN 128), `/sys/class/block/<dev>/dev` (`259:0`), cgroup limit files
    /// (`memory.max`, `memory.limit_in_bytes`), `etc/hostname` (a DNS name, ≤ 253 B). One
    /// 4 KiB page is over ten times the longest of them.
    pub const VALUE: usize = 4 << 10;

    /// One procfs record of a process or thread: `/proc/<pid>/stat` (300 B here; 52 numbers of
    /// at most 20 digits and a comm of at most 64 B make < 1.2 KB), `io` (94 B), `comm`
    /// (TASK_COMM_LEN 16, 64 for kernel workers), `wchan` (a kernel symbol, KSYM_NAME_LEN
    /// 512). The kernel generates each whole on the first `read`.
    pub const PID_RECORD: usize = 4 << 10;

    /// `/proc/<pid>/cmdline`, where a prefix is enough ([`super::read_prefix`]): the readers
    /// need `argv[0]` and the flags of the kubelet, dockerd and iptables (a few KB), while the
    /// kernel allows a single argument of 128 KiB (MAX_ARG_STRLEN) and a whole command line
    /// of a quarter of the stack limit. The first 128 KiB is kept; the argument it cuts is
    /// dropped.
    pub const CMDLINE: usize = 128 << 10;

    /// `/proc/<pid>/cgroup`: one line per hierarchy (13 with cgroup v1 and every controller,
    /// one with v2), each a cgroup path (a pod container's systemd scope path is ~170 B, at
    /// most PATH_MAX 4 KiB): 16 hierarchies of PATH_MAX.
    pub const PID_CGROUP: usize = 64 << 10;

    /// `/sys/devices/system/cpu/online`: a list of ranges (`0-1` here). The longest possible
    /// list, every other CPU of NR_CPUS's maximum 8,192 (`0,2,4,…,8190`), is ~20 KB.
    pub const CPU_LIST: usize = 64 << 10;

    /// Files of named counters whose length does not grow with CPUs, devices or processes:
    /// `meminfo` (1.5 KB), `vmstat` (3.9 KB), `pressure/*` (~150 B), `net/snmp` (1.2 KB),
    /// `net/netstat` (4.1 KB). `buddyinfo` (300 B here) has a line of ~110 B per NUMA node
    /// and zone: 256 nodes × 5 zones is ~140 KB.
    pub const COUNTERS: usize = 256 << 10;

    /// Tables with a line per CPU or per block device: `/proc/stat` (1.1 KB here: a `cpuN`
    /// line of ≤ 10 counters, ~100 B, ≤ 220 B at 20 digits, per CPU; an `intr` line with a
    /// count per IRQ; ~60 KB on a 256-CPU host), `net/stat/nf_conntrack` (a line of ~160 B per
    /// possible CPU), `diskstats` (~120 B per device). NR_CPUS's maximum 8,192 CPUs × 220 B
    /// is 1.8 MB; 10,000 block devices (loops, device-mapper, partitions) are ~1.5 MB.
    pub const PER_CPU_TABLE: usize = 4 << 20;

    /// `/proc/<pid>/mountinfo`: ~150–300 B per mount (1.6 KB for 21 mounts here), up to a few
    /// KB for an overlay with many layers; a node with thousands of mounts (pods' secrets,
    /// overlays, projected volumes) has a few MB.
    pub const MOUNTINFO: usize = 8 << 20;

    /// `/proc/locks`: ~50–80 B per lock (208 B for 4 locks here); 10,000 locks are ~0.8 MB,
    /// 4 MiB is ~50,000. Read by the iptables lock sampler while the lock file stays open.
    pub const LOCKS: usize = 4 << 20;

    /// `/proc/<pid>/net/udp` and `udp6`: a 128 B (udp) or ~170 B (udp6) line per socket.
    /// 8 MiB is ~50,000 sockets; a prefix is not enough (the listener looked for may be last).
    pub const UDP_TABLE: usize = 8 << 20;

    /// Runtime and kubelet configuration: the kubelet's config file (a few KB of YAML or JSON),
    /// docker's `daemon.json` (< 1 KB), containerd's `config.toml` (`containerd config
    /// default` is ~10 KB), a container's `config.v2.json` (a few KB; [`crate::pods`]
    /// already refused larger ones with its 1 MiB `max_config_bytes`).
    pub const CONFIG: usize = 1 << 20;
}

/// Entry budgets of directory listings: a directory with more entries than this is listed
/// only this far ([`super::dir_entries`]).
pub mod entries {
    /// `<root>/proc`: one entry per process (at most PID_MAX_LIMIT, 4,194,304, on 64-bit)
    /// plus ~60 named entries.
    pub const PROC: usize = 4_194_304 + 1024;
    /// `/proc/<pid>/task`: one entry per thread, at most PID_MAX_LIMIT.
    pub const TASKS: usize = 4_194_304;
    /// `/proc/<pid>/fd`: one entry per descriptor, at most `fs.nr_open` (1,048,576 by default).
    pub const FDS: usize = 1 << 20;
    /// Directories of pods or containers (`/var/log/pods`, the kubelet's `pods`, docker's
    /// `containers`, a pod's container directories): a node runs at most a few hundred pods
    /// (the kubelet's default `maxPods` is 110); exited containers and pods not yet collected
    /// add some thousands at worst.
    pub const PODS: usize = 65_536;
    /// One cgroup directory: its interface files (~30 for cgroup v1's memory controller) and
    /// its child groups (one per pod under `kubepods`, one per container under a pod).
    pub const CGROUP: usize = 65_536;
    /// Log files of one container directory: the current log and its rotations
    /// (`containerLogMaxFiles`, docker's `max-file`, both single digits by default).
    pub const LOG_FILES: usize = 4096;
}

/// What [`read_prefix`] read: at most `cap` bytes and whether the file went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    pub bytes: Vec<u8>,
    /// True when the file is longer than the bytes kept.
    pub truncated: bool,
}

/// The file type a refused path has, in words.
fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

fn refuse_unless_regular(path: &Path, md: &Metadata) -> Result<(), ReadError> {
    if md.file_type().is_file() {
        Ok(())
    } else {
        Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(md.file_type()),
        })
    }
}

/// The agent-side directories where a procfs or a sysfs is mounted, as `statfs` found them
/// ([`vouch_kernel_fs`]): a file under one is the kernel's, never a device node or a FIFO.
static KERNEL_FS: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// The entries of `/proc/<pid>/` (and of `task/<tid>/`) that lead out of procfs, into a
/// process's root, working directory, open files or mapped files: a path through one of them
/// is `stat`ed before it is opened, as any other host file.
const LEAVES_PROCFS: [&str; 5] = ["root", "cwd", "fd", "map_files", "exe"];

/// Looks at `<root>/proc` and `<root>/sys` of `host` with `statfs`; those that are a procfs
/// and a sysfs are read from then on without the `stat` before `open` ([`open`]). A fake
/// root's directories are not: their files are `stat`ed first as before. Called when a node
/// context is made ([`crate::node::Node`]); two `statfs` calls.
pub fn vouch_kernel_fs(host: &HostPaths) {
    use nix::sys::statfs::{statfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    for (dir, magic) in [
        (host.proc(), PROC_SUPER_MAGIC),
        (host.sys_file(""), SYSFS_MAGIC),
    ] {
        let dir: PathBuf = dir.components().collect();
        if !statfs(&dir).is_ok_and(|s| s.filesystem_type() == magic) {
            continue;
        }
        let mut known = KERNEL_FS.write().unwrap_or_else(|e| e.into_inner());
        if !known.contains(&dir) {
            known.push(dir);
        }
    }
}

/// True when `path` is under a vouched procfs or sysfs and does not pass through a link that
/// leads out of it, nor climb out with `..`.
fn on_kernel_fs(path: &Path) -> bool {
    let known = KERNEL_FS.read().unwrap_or_else(|e| e.into_inner());
    known.iter().any(|root| {
        path.strip_prefix(root).is_ok_and(|rest| {
            rest.components().all(|c| match c {
                Component::Normal(name) => !LEAVES_PROCFS.iter().any(|l| name == *l),
                Component::CurDir => true,
                _ => false,
            })
        })
    })
}

/// Opens a host file for reading without blocking and checks that the opened descriptor is a
/// regular file. With `prestat`, the path is `stat`ed first and a non-regular file is refused
/// without being opened. Returns the file and its metadata (`len()` is 0 for procfs/sysfs).
fn open(path: &Path, prestat: bool) -> Result<(File, Metadata), ReadError> {
    if prestat {
        #[cfg(test)]
        tests::PRESTATS.with(|n| n.set(n.get() + 1));
        let md = std::fs::metadata(path).map_err(|e| ReadError::io(path, e))?;
        refuse_unless_regular(path, &md)?;
    }
    let flags = nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC | nix::libc::O_NOCTTY;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // `open` of a socket fails with ENXIO: name it as what it is.
            if e.raw_os_error() == Some(nix::libc::ENXIO) {
                if let Ok(md) = std::fs::metadata(path) {
                    if !md.file_type().is_file() {
                        return ReadError::NotRegular {
                            path: path.to_path_buf(),
                            kind: kind_of(md.file_type()),
                        };
                    }
                }
            }
            ReadError::io(path, e)
        })?;
    let md = file.metadata().map_err(|e| ReadError::io(path, e))?;
    refuse_unless_regular(path, &md)?;
    Ok((file, md))
}

/// Opens a regular host file without blocking, for readers that read it incrementally and
/// bound their reads themselves (kube-proxy's logs: an offset, a tail and a byte budget).
/// Refuses FIFOs, sockets, devices and directories like every read of this module.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), ReadError> {
    open(path, true)
}

/// Reads from `file` into `buf` (appending) until EOF or until `buf` holds `limit` bytes.
/// With `short_read_ends`, a read that returns less than asked also ends it: a procfs record
/// file (`stat`, `io`) is generated whole on the first `read`, so this saves the `read` that
/// would return 0. The buffer grows geometrically from 4 KiB, so a small file costs one
/// buffer, and is zeroed once as it grows: a procfs table hands out a page per `read`, and
/// zeroing the spare room again after each page made a 280 KB `/proc/1/net/unix` cost 10 MB
/// of `memset`.
fn read_up_to(
    file: &mut File,
    limit: usize,
    buf: &mut Vec<u8>,
    short_read_ends: bool,
) -> std::io::Result<()> {
    const FIRST: usize = 4096;
    let mut filled = buf.len();
    let result = loop {
        if filled >= limit {
            break Ok(());
        }
        if filled == buf.len() {
            let grow = (limit - filled).min(filled.max(FIRST));
            buf.resize(filled + grow, 0);
        }
        let asked = buf.len() - filled;
        let n = match file.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        filled += n;
        if n == 0 || (short_read_ends && n < asked) {
            break Ok(());
        }
    };
    buf.truncate(filled);
    result
}

/// Reads up to `cap + 1` bytes of an opened file into `buf` (cleared first) and refuses the
/// file when it has more than `cap`.
fn read_capped(
    path: &Path,
    mut file: File,
    cap: usize,
    buf: &mut Vec<u8>,
    short_read_ends: bool,
) -> Result<(), ReadError> {
    buf.clear();
    read_up_to(&mut file, cap.saturating_add(1), buf, short_read_ends)
        .map_err(|e| ReadError::io(path, e))?;
    if buf.len() > cap {
        buf.clear();
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            cap,
        });
    }
    Ok(())
}

/// Reads a whole regular host file of at most `cap` bytes.
pub fn read_bytes(path: &Path, cap: usize) -> Result<Vec<u8>, ReadError> {
    let (file, _) = open(path, !on_kernel_fs(path))?;
    let mut buf = Vec::new();
    read_capped(path, file, cap, &mut buf, false)?;
    Ok(buf)
}

/// Reads a whole regular host file of at most `cap` bytes as UTF-8 text (text that is not
/// UTF-8 is a parse error naming the path).
pub fn read_text(path: &Path, cap: usize) -> Result<String, ReadError> {
    let bytes = read_bytes(path, cap)?;
    String::from_utf8(bytes).map_err(|e| {
        ReadError::parse(
            path,
            format!(
                "not UTF-8 text (invalid byte at {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// [`read_text`], with `Ok(None)` when the file does not exist.
pub fn read_text_optional(path: &Path, cap: usize) -> Result<Option<String>, ReadError> {
    match read_text(path, cap) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a file under `/proc/<pid>/` of at most `cap` bytes into `buf` (cleared first),
/// without the `stat` before `open` (see the module documentation) and ending at the first
/// short read: for files the kernel generates whole on the first `read` (`stat`, `io`,
/// `comm`, `wchan`). Reuse `buf` across a pass over every process.
pub fn read_pid_record(path: &Path, cap: usize, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    let (file, _) = open(path, false)?;
    read_capped(path, file, cap, buf, true)
}

/// Reads the first `cap` bytes of a file under `/proc/<pid>/` for kinds where a prefix is
/// enough (`cmdline`, [`cap::CMDLINE`]); `truncated` says whether the file went on.
pub fn read_prefix(path: &Path, cap: usize) -> Result<Prefix, ReadError> {
    let (mut file, _) = open(path, false)?;
    let mut bytes = Vec::new();
    read_up_to(&mut file, cap.saturating_add(1), &mut bytes, false)
        .map_err(|e| ReadError::io(path, e))?;
    let truncated = bytes.len() > cap;
    bytes.truncate(cap);
    Ok(Prefix { bytes, truncated })
}

/// The entries of a directory, at most `max` of them (an unreadable entry counts against the
/// budget and is skipped). Entry budgets per kind of directory are in [`entries`].
pub fn dir_entries(path: &Path, max: usize) -> Result<impl Iterator<Item = DirEntry>, ReadError> {
    let rd = std::fs::read_dir(path).map_err(|e| ReadError::io(path, e))?;
    Ok(rd.take(max).filter_map(Result::ok))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    thread_local! {
        /// The paths `stat`ed before `open` on this thread.
        pub(super) static PRESTATS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn prestats() -> u64 {
        PRESTATS.with(|n| n.get())
    }

    /// Files under the host's procfs and sysfs are opened without the `stat` before, once
    /// `statfs` vouched for them; a fake root's `proc` is not vouched for, and a path through a
    /// link out of procfs, or climbing out, is `stat`ed first as any host file.
    #[test]
    fn only_files_of_a_vouched_procfs_or_sysfs_skip_the_stat_before_open() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/meminfo"), "MemTotal: 1 kB\n").unwrap();
        vouch_kernel_fs(&HostPaths::new(t.path()));
        assert!(!on_kernel_fs(&t.path().join("proc/meminfo")), "a fake root");
        if !Path::new("/proc/self/stat").exists() || !Path::new("/sys/kernel").exists() {
            crate::skip!(
                "SKIP only_files_of_a_vouched_procfs_or_sysfs_skip_the_stat_before_open: no procfs or sysfs at /proc, /sys"
            );
            return;
        }
        vouch_kernel_fs(&HostPaths::new("/"));
        for (path, blind) in [
            ("/proc/meminfo", true),
            ("/proc/1/net/udp", true),
            ("/proc/self/stat", true),
            ("/sys/devices/system/cpu/online", true),
            ("/proc/1/root/etc/hostname", false),
            ("/proc/self/cwd/x", false),
            ("/proc/self/fd/0", false),
            ("/proc/self/task/1/exe", false),
            ("/proc/self/map_files/x", false),
            ("/proc/../etc/hostname", false),
            ("/etc/hostname", false),
            ("/procfoo/meminfo", false),
        ] {
            assert_eq!(on_kernel_fs(Path::new(path)), blind, "{path}");
        }
        let before = prestats();
        read_text(Path::new("/proc/meminfo"), cap::COUNTERS).unwrap();
        read_text(Path::new("/sys/devices/system/cpu/online"), cap::CPU_LIST).unwrap();
        assert_eq!(
            prestats(),
            before,
            "procfs and sysfs reads stat nothing first"
        );
        read_text(&t.path().join("proc/meminfo"), cap::COUNTERS).unwrap();
        let _ = read_text(Path::new("/proc/self/root/etc/hostname"), cap::VALUE);
        assert_eq!(
            prestats(),
            before + 2,
            "the fake root and the way out are stat-ed"
        );
    }

    /// A source that hands out a page per `read`, as a procfs table does (`/proc/1/net/unix`,
    /// `mountinfo`): every page lands once, in order, up to the limit and no further.
    #[test]
    fn a_page_per_read_is_gathered_whole_up_to_the_limit() {
        use std::io::Write;
        let text: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for (limit, want) in [(1 << 20, text.len()), (100_000, 100_000)] {
            let (r, w) = nix::unistd::pipe().unwrap();
            let mut reader = File::from(r);
            let body = text.clone();
            let writer = std::thread::spawn(move || {
                let mut w = File::from(w);
                for page in body.chunks(4096) {
                    // The reader takes what is there: a page, or less while we write.
                    if w.write_all(page).is_err() {
                        return;
                    }
                }
            });
            let mut buf = b"kept".to_vec();
            read_up_to(&mut reader, limit + 4, &mut buf, false).unwrap();
            drop(reader);
            writer.join().unwrap();
            assert_eq!(&buf[..4], b"kept");
            assert_eq!(buf.len(), 4 + want, "limit {limit}");
            assert!(buf[4..] == text[..want], "limit {limit}");
        }
    }

    /// Runs `f` on a thread and fails the test if it does not return within 5 s (a read that
    /// blocks on a FIFO would hang the test forever otherwise).
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the read did not return within 5 s: it blocked")
    }

    fn fifo(dir: &Path, name: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        p
    }

    #[test]
    fn reads_a_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("uptime");
        std::fs::write(&p, "390.44 633.27\n").unwrap();
        assert_eq!(read_text(&p, cap::VALUE).unwrap(), "390.44 633.27\n");
        assert_eq!(read_bytes(&p, cap::VALUE).unwrap(), b"390.44 633.27\n");
        let mut buf = b"old".to_vec();
        read_pid_record(&p, cap::VALUE, &mut buf).unwrap();
        assert_eq!(buf, b"390.44 633.27\n");
        // An empty file is fine too.
        std::fs::write(&p, "").unwrap();
        assert_eq!(read_text(&p, cap::VALUE).unwrap(), "");
    }

    #[test]
    fn a_fifo_without_writer_is_refused_at_once() {
        let t = tempfile::tempdir().unwrap();
        let p = fifo(t.path(), "uptime");
        let q = p.clone();
        let e = within_5s(move || read_text(&q, cap::VALUE).unwrap_err());
        assert!(
            matches!(&e, ReadError::NotRegular { path, kind: "FIFO" } if *path == p),
            "{e:?}"
        );
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        assert!(e.to_string().contains("FIFO"), "{e}");
        // The per-process readers (no stat before open) refuse it too, after a non-blocking
        // open.
        let (q, r) = (p.clone(), p.clone());
        let e = within_5s(move || read_pid_record(&q, cap::PID_RECORD, &mut Vec::new()));
        assert!(matches!(e, Err(ReadError::NotRegular { kind: "FIFO", .. })));
        let e = within_5s(move || read_prefix(&r, cap::CMDLINE));
        assert!(matches!(e, Err(ReadError::NotRegular { kind: "FIFO", .. })));
        assert!(matches!(
            open_regular(&p),
            Err(ReadError::NotRegular { kind: "FIFO", .. })
        ));
    }

    #[test]
    fn a_fifo_with_a_silent_writer_is_refused_at_once() {
        // A writer that holds the FIFO open and writes nothing: a blocking read would wait.
        let t = tempfile::tempdir().unwrap();
        let p = fifo(t.path(), "loadavg");
        let writer = std::fs::OpenOptions::new()
            .read(true) // O_RDWR: opening does not wait for a reader
            .write(true)
            .open(&p)
            .unwrap();
        let q = p.clone();
        let e = within_5s(move || read_pid_record(&q, cap::PID_RECORD, &mut Vec::new()));
        assert!(matches!(e, Err(ReadError::NotRegular { kind: "FIFO", .. })));
        drop(writer);
    }

    #[test]
    fn a_socket_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        let e = read_text(&p, cap::VALUE).unwrap_err();
        assert!(
            matches!(e, ReadError::NotRegular { kind: "socket", .. }),
            "{e:?}"
        );
        // Without the stat before open, `open` fails with ENXIO and is named the same way.
        let e = read_pid_record(&p, cap::VALUE, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(e, ReadError::NotRegular { kind: "socket", .. }),
            "{e:?}"
        );
    }

    #[test]
    fn a_character_device_is_refused() {
        // /dev/null reads as empty and /dev/zero never ends: neither is a host file.
        for dev in ["/dev/null", "/dev/zero"] {
            let p = Path::new(dev);
            if !p.exists() {
                // Part of the test only: the other devices are still checked.
                eprintln!("{dev}: not present, not checked");
                continue;
            }
            let e = read_text(p, cap::VALUE).unwrap_err();
            assert!(
                matches!(
                    e,
                    ReadError::NotRegular {
                        kind: "character device",
                        ..
                    }
                ),
                "{dev}: {e:?}"
            );
            let e = read_pid_record(p, cap::VALUE, &mut Vec::new()).unwrap_err();
            assert!(
                matches!(
                    e,
                    ReadError::NotRegular {
                        kind: "character device",
                        ..
                    }
                ),
                "{dev}: {e:?}"
            );
        }
    }

    #[test]
    fn a_directory_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let e = read_text(t.path(), cap::VALUE).unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotRegular {
                    kind: "directory",
                    ..
                }
            ),
            "{e:?}"
        );
        let e = read_prefix(t.path(), cap::CMDLINE).unwrap_err();
        assert!(matches!(
            e,
            ReadError::NotRegular {
                kind: "directory",
                ..
            }
        ));
    }

    #[test]
    fn a_file_exactly_at_the_cap_is_read_and_one_byte_more_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        for cap in [0usize, 1, 100, 4095, 4096, 4097, 10_000, 70_000] {
            std::fs::write(&p, vec![b'7'; cap]).unwrap();
            assert_eq!(read_bytes(&p, cap).unwrap().len(), cap, "cap {cap}");
            let mut buf = Vec::new();
            read_pid_record(&p, cap, &mut buf).unwrap();
            assert_eq!(buf.len(), cap);
            std::fs::write(&p, vec![b'7'; cap + 1]).unwrap();
            let e = read_bytes(&p, cap).unwrap_err();
            assert!(
                matches!(&e, ReadError::TooLarge { path, cap: c } if *path == p && *c == cap),
                "cap {cap}: {e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&p.display().to_string()) && msg.contains(&cap.to_string()),
                "{msg}"
            );
            assert!(matches!(
                read_pid_record(&p, cap, &mut buf),
                Err(ReadError::TooLarge { .. })
            ));
            assert!(buf.is_empty(), "a refused file leaves nothing behind");
        }
    }

    #[test]
    fn a_huge_file_is_refused_after_reading_at_most_cap_plus_one_bytes() {
        // A sparse 200 MB file reads as 200 MB of zeros: refused without reading it all.
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("uptime");
        let f = File::create(&p).unwrap();
        f.set_len(200 << 20).unwrap();
        // The bytes this thread read (`rchar`), from the kernel's own count: the first read of
        // the counter is counted in the second, nothing of any other test's thread is.
        let rchar = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            let n: u64 = io
                .lines()
                .find_map(|l| l.strip_prefix("rchar: "))
                .and_then(|v| v.parse().ok())
                .unwrap();
            (n, io.len() as u64)
        };
        let (before, counter_text) = rchar();
        assert!(matches!(
            read_text(&p, cap::VALUE),
            Err(ReadError::TooLarge {
                cap: cap::VALUE,
                ..
            })
        ));
        let read = rchar().0 - before - counter_text;
        assert!(
            read <= cap::VALUE as u64 + 1,
            "read {read} bytes of a 200 MB file with a cap of {}",
            cap::VALUE
        );
    }

    #[test]
    fn a_prefix_read_keeps_the_first_cap_bytes() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("cmdline");
        std::fs::write(&p, b"kubelet\0--v=2\0").unwrap();
        let r = read_prefix(&p, 100).unwrap();
        assert_eq!(
            (r.bytes.as_slice(), r.truncated),
            (&b"kubelet\0--v=2\0"[..], false)
        );
        let r = read_prefix(&p, 14).unwrap();
        assert!(!r.truncated);
        let r = read_prefix(&p, 9).unwrap();
        assert_eq!(
            (r.bytes.as_slice(), r.truncated),
            (&b"kubelet\0-"[..], true)
        );
    }

    #[test]
    fn proc_files_that_report_size_zero_are_read_whole() {
        // procfs reports st_size 0; the reader counts what it reads. This test reads the
        // test process's own files: the one place a /proc/self path is right.
        let stat = Path::new("/proc/self/stat");
        if !stat.exists() {
            crate::skip!("SKIP proc_files_that_report_size_zero_are_read_whole: no /proc");
            return;
        }
        assert_eq!(std::fs::metadata(stat).unwrap().len(), 0);
        let mut buf = Vec::new();
        read_pid_record(stat, cap::PID_RECORD, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.ends_with('\n') && text.split_whitespace().count() >= 44,
            "{text}"
        );
        // A multi-page seq_file (short reads do not mean EOF there): read to the end.
        let maps = read_text(Path::new("/proc/self/maps"), cap::MOUNTINFO).unwrap();
        assert!(maps.lines().count() > 5 && maps.ends_with('\n'));
        let uptime = read_text(Path::new("/proc/uptime"), cap::VALUE).unwrap();
        assert!(crate::proc::uptime::parse(&uptime).is_ok(), "{uptime}");
        // A cap smaller than the real file refuses it.
        assert!(matches!(
            read_text(Path::new("/proc/self/maps"), 16),
            Err(ReadError::TooLarge { cap: 16, .. })
        ));
    }

    #[test]
    fn not_found_is_an_io_error_and_optional_reads_give_none() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("missing");
        assert!(read_text(&p, cap::VALUE).unwrap_err().is_not_found());
        assert!(read_pid_record(&p, cap::VALUE, &mut Vec::new())
            .unwrap_err()
            .is_not_found());
        assert_eq!(read_text_optional(&p, cap::VALUE).unwrap(), None);
        let d = fifo(t.path(), "fifo");
        assert!(read_text_optional(&d, cap::VALUE).is_err());
    }

    #[test]
    fn text_that_is_not_utf8_is_a_parse_error_naming_the_path() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"ok\xff").unwrap();
        let e = read_text(&p, cap::VALUE).unwrap_err();
        assert!(matches!(e, ReadError::Parse { .. }), "{e:?}");
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }

    #[test]
    fn directory_listings_stop_at_their_budget() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(t.path().join(i.to_string()), "").unwrap();
        }
        assert_eq!(dir_entries(t.path(), 4).unwrap().count(), 4);
        assert_eq!(dir_entries(t.path(), 100).unwrap().count(), 10);
        assert!(dir_entries(&t.path().join("missing"), 4)
            .err()
            .is_some_and(|e| e.is_not_found()));
    }
}
