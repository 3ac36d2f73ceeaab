//! Per-process files under `<root>/proc/<pid>/`: listing pids, `comm`, `cmdline`, `stat`.
//!
//! `stat` is parsed by `procfs-core` (after a shape check, see [`parse_stat`]). `comm`,
//! `cmdline` and `wchan` are one value each, which `procfs-core` does not model (its
//! `procfs` half reads them from the agent's own `/proc`): they are read here directly.
//!
//! A pid can exit between listing and reading: readers return `None` for a vanished pid
//! instead of an error (as `below` does).

use std::path::Path;

use crate::host::HostPaths;
use crate::hostfs::{self, cap, entries};

/// Lists the numeric entries of `<root>/proc`, sorted (at most [`entries::PROC`]). An
/// unreadable `/proc` gives an error.
pub fn list_pids(host: &HostPaths) -> Result<Vec<u32>, crate::ReadError> {
    let mut pids: Vec<u32> = hostfs::dir_entries(&host.proc(), entries::PROC)?
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// Reads a per-pid record file (at most [`cap::PID_RECORD`]); `None` when the pid vanished or
/// the file is unreadable, not a regular file or too large.
fn read_pid_file(host: &HostPaths, pid: u32, name: &str) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    hostfs::read_pid_record(&host.proc_pid(pid).join(name), cap::PID_RECORD, &mut buf).ok()?;
    Some(buf)
}

/// Reads a procfs record file of at most [`cap::PID_RECORD`] bytes into `buf` (cleared
/// first), the way a pass over every pid needs it: no `stat` before `open`, no size probe,
/// and a short read ends it (see [`hostfs::read_pid_record`]).
pub fn read_proc_file(path: &Path, buf: &mut Vec<u8>) -> Result<(), crate::ReadError> {
    hostfs::read_pid_record(path, cap::PID_RECORD, buf)
}

/// Like [`stat`], reusing `buf` for the file's bytes.
pub fn stat_with(host: &HostPaths, pid: u32, buf: &mut Vec<u8>) -> Option<PidStat> {
    read_proc_file(&host.proc_pid(pid).join("stat"), buf).ok()?;
    parse_stat(std::str::from_utf8(buf).ok()?).ok()
}

/// Reads `<root>/proc/<pid>/cmdline`, at most [`cap::CMDLINE`] bytes (a prefix is enough; an
/// argument cut by the cap is dropped). `None` when the pid vanished or the file is unreadable.
fn read_cmdline(host: &HostPaths, pid: u32) -> Option<Vec<u8>> {
    let p = hostfs::read_prefix(&host.proc_pid(pid).join("cmdline"), cap::CMDLINE).ok()?;
    let mut raw = p.bytes;
    if p.truncated {
        // Keep whole arguments only: cut after the last NUL.
        let end = raw.iter().rposition(|b| *b == 0).map_or(0, |i| i + 1);
        raw.truncate(end);
    }
    Some(raw)
}

/// `<root>/proc/<pid>/comm` without the trailing newline.
pub fn comm(host: &HostPaths, pid: u32) -> Option<String> {
    let raw = read_pid_file(host, pid, "comm")?;
    Some(
        String::from_utf8_lossy(&raw)
            .trim_end_matches('\n')
            .to_string(),
    )
}

/// Like [`comm`], reading into `buf` (a pass over every pid reuses it): the name without its
/// newline; `None` when the pid vanished, the file is unreadable or the name is not UTF-8.
pub fn comm_with<'b>(host: &HostPaths, pid: u32, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    read_proc_file(&host.proc_pid(pid).join("comm"), buf).ok()?;
    std::str::from_utf8(buf)
        .ok()
        .map(|s| s.strip_suffix('\n').unwrap_or(s))
}

/// `<root>/proc/<pid>/cmdline` with NULs turned into spaces, cut to `max_bytes`.
pub fn cmdline(host: &HostPaths, pid: u32, max_bytes: usize) -> Option<String> {
    let raw = read_cmdline(host, pid)?;
    Some(parse_cmdline(&raw, max_bytes))
}

/// `<root>/proc/<pid>/cmdline` as its NUL-separated arguments.
pub fn args(host: &HostPaths, pid: u32) -> Option<Vec<String>> {
    let raw = read_cmdline(host, pid)?;
    Some(split_args(&raw))
}

/// Splits a raw `cmdline` into arguments.
pub fn split_args(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Joins a raw `cmdline` with spaces, cut to at most `max_bytes` bytes (on a char boundary).
pub fn parse_cmdline(raw: &[u8], max_bytes: usize) -> String {
    let joined = split_args(raw).join(" ");
    if joined.len() <= max_bytes {
        return joined;
    }
    let mut end = max_bytes;
    while end > 0 && !joined.is_char_boundary(end) {
        end -= 1;
    }
    joined[..end].to_string()
}

/// The fields of `/proc/<pid>/stat` the collectors use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidStat {
    pub pid: u32,
    /// The command name between the parentheses (may itself contain spaces and parentheses).
    pub comm: String,
    /// Single-letter state: R, S, D, Z, T, I, ...
    pub state: char,
    pub ppid: u32,
    /// User and system CPU time in clock ticks.
    pub utime: u64,
    pub stime: u64,
    pub num_threads: u64,
    /// Start time after boot, in clock ticks.
    pub starttime: u64,
    /// Time this task (the main thread, for `/proc/<pid>/stat`: the kernel does not add up a
    /// process's threads here) spent waiting for block IO, in clock ticks (field 42,
    /// `delayacct_blkio_ticks`): what iotop's `IO>` column shows. Counted only while delay
    /// accounting is on (`kernel.task_delayacct`, off by default since Linux 5.14); `None` on
    /// kernels that do not print it (before 2.6.18).
    pub blkio_ticks: Option<u64>,
}

/// Parses `/proc/<pid>/stat` with `procfs-core` ([`procfs_core::process::Stat`]), which finds
/// the comm field by the last `)`, as the kernel writes it.
///
/// `procfs-core` slices the text around the parentheses without checking its shape, so a
/// text that is not `<pid> (<comm>) <fields>` (a truncated read, a fake root's garbage) would
/// panic it (test `procfs_core_panics_on_a_malformed_stat`); that shape is checked here first.
pub fn parse_stat(text: &str) -> Result<PidStat, String> {
    use procfs_core::FromRead;

    let t = text.trim();
    let open = t.find('(').ok_or("no '(' before comm")?;
    let close = t.rfind(')').ok_or("no ')' after comm")?;
    if close < open {
        return Err("')' before '('".into());
    }
    // procfs-core takes the pid from `t[..open - 1]` and the fields from `t[close + 2..]`:
    // both must be ASCII spaces, or those indices panic.
    let b = t.as_bytes();
    if open == 0 || b[open - 1] != b' ' || b.get(close + 1) != Some(&b' ') {
        return Err("not `<pid> (<comm>) <fields>`".into());
    }
    let s =
        procfs_core::process::Stat::from_read(t.as_bytes()).map_err(|e| super::core_error(&e))?;
    Ok(PidStat {
        pid: u32::try_from(s.pid).map_err(|e| format!("pid {}: {e}", s.pid))?,
        comm: s.comm,
        state: s.state,
        ppid: u32::try_from(s.ppid).map_err(|e| format!("ppid {}: {e}", s.ppid))?,
        utime: s.utime,
        stime: s.stime,
        num_threads: u64::try_from(s.num_threads)
            .map_err(|e| format!("num_threads {}: {e}", s.num_threads))?,
        starttime: s.starttime,
        blkio_ticks: s.delayacct_blkio_ticks,
    })
}

/// Reads and parses `<root>/proc/<pid>/stat`; `None` when the pid vanished or the text is bad.
pub fn stat(host: &HostPaths, pid: u32) -> Option<PidStat> {
    let raw = read_pid_file(host, pid, "stat")?;
    parse_stat(&String::from_utf8_lossy(&raw)).ok()
}

/// `<root>/proc/<pid>/wchan`: the kernel function a sleeping task waits in. `None` when the
/// pid vanished, the file is unreadable, or the kernel hides it (it prints `0`).
pub fn wchan(host: &HostPaths, pid: u32) -> Option<String> {
    let raw = read_pid_file(host, pid, "wchan")?;
    parse_wchan(&raw)
}

/// The text of a `wchan` file, or `None` for the kernel's "nothing to show" (`0`, empty).
pub fn parse_wchan(raw: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(raw);
    let s = s.trim();
    (!s.is_empty() && s != "0").then(|| s.chars().take(64).collect())
}

/// Lists the thread ids of a process (`<root>/proc/<pid>/task`, at most [`entries::TASKS`]);
/// empty when the pid vanished.
pub fn list_tasks(host: &HostPaths, pid: u32) -> Vec<u32> {
    let Ok(rd) = hostfs::dir_entries(&host.proc_pid(pid).join("task"), entries::TASKS) else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = rd
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .collect();
    tids.sort_unstable();
    tids
}

/// `<root>/proc/<pid>/task/<tid>/stat`; `None` when the thread vanished or the text is bad.
pub fn task_stat(host: &HostPaths, pid: u32, tid: u32) -> Option<PidStat> {
    let raw = read_task_file(host, pid, tid, "stat")?;
    parse_stat(&String::from_utf8_lossy(&raw)).ok()
}

/// `<root>/proc/<pid>/task/<tid>/wchan`.
pub fn task_wchan(host: &HostPaths, pid: u32, tid: u32) -> Option<String> {
    let raw = read_task_file(host, pid, tid, "wchan")?;
    parse_wchan(&raw)
}

/// A record file of one thread, `<root>/proc/<pid>/task/<tid>/<name>`.
fn read_task_file(host: &HostPaths, pid: u32, tid: u32, name: &str) -> Option<Vec<u8>> {
    let path = host
        .proc_pid(pid)
        .join("task")
        .join(tid.to_string())
        .join(name);
    let mut buf = Vec::new();
    hostfs::read_pid_record(&path, cap::PID_RECORD, &mut buf).ok()?;
    Some(buf)
}

/// True when `path` names an existing pid directory.
pub fn exists(path: &Path) -> bool {
    path.is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real line from Linux 6.1 (Debian 12): a kernel thread with spaces and parens in comm.
    const STAT_KWORKER: &str = "42 (kworker/1:1-events (x)) I 2 0 0 0 -1 69238880 0 0 0 0 0 17 0 0 0 20 0 1 0 96 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    // Real line of mysqld in D state (Linux 4.14, the handbook's era).
    const STAT_MYSQLD: &str = "1847 (mysqld) D 1 1847 1847 0 -1 4194560 2210933 0 1075 0 981254 1310021 0 0 20 0 37 0 4321 2393489408 98765 18446744073709551615 1 1 0 0 0 0 543239 4096 26345 0 0 0 17 3 0 0 1234 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_stat_with_awkward_comm() {
        let s = parse_stat(STAT_KWORKER).unwrap();
        assert_eq!(s.pid, 42);
        assert_eq!(s.comm, "kworker/1:1-events (x)");
        assert_eq!(s.state, 'I');
        assert_eq!(s.ppid, 2);
        let m = parse_stat(STAT_MYSQLD).unwrap();
        assert_eq!(
            (m.state, m.utime, m.stime, m.num_threads, m.starttime),
            ('D', 981254, 1310021, 37, 4321)
        );
    }

    #[test]
    fn reads_the_blkio_delay_of_field_42() {
        // Linux 6.18.44 with kernel.task_delayacct=1: `dd oflag=direct,sync` 1.5 s in, 12
        // ticks (120 ms) waiting for block IO.
        let dd = "27180 (dd) R 27178 27178 25996 0 -1 4194304 162 0 1 0 0 5 0 0 20 0 1 0 970892 3039232 445 18446744073709551615 93826353721344 93826353774873 140730447106144 0 0 0 0 6 512 0 0 0 17 1 0 0 12 0 0 93826353802480 93826353804072 93826535043072 140730447112677 140730447112754 140730447112754 140730447114220 0\n";
        assert_eq!(parse_stat(dd).unwrap().blkio_ticks, Some(12));
        assert_eq!(parse_stat(STAT_MYSQLD).unwrap().blkio_ticks, Some(1234));
        assert_eq!(parse_stat(STAT_KWORKER).unwrap().blkio_ticks, Some(0));
        // A 2.6.9 kernel's 41 fields: no blkio delay.
        let old = "1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 16 0 1 0 5 1000 100 4294967295 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0\n";
        assert_eq!(parse_stat(old).unwrap().blkio_ticks, None);
    }

    #[test]
    fn stat_garbage_is_an_error_not_a_panic() {
        for bad in ["", "(", ")(", "12 (x)", "x (y) R", "1 (a) R 1"] {
            assert!(parse_stat(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn procfs_core_panics_on_a_malformed_stat() {
        // Why parse_stat checks the shape first: each of these panics procfs-core (a pid
        // slice before the text, a comm range that runs backwards, fields past the end),
        // and each is an error here.
        for bad in ["(x) R 1", ")(", "12 (x)", "é(x) R"] {
            let core = std::panic::catch_unwind(|| {
                use procfs_core::FromRead;
                let _ = procfs_core::process::Stat::from_read(bad.as_bytes());
            });
            assert!(core.is_err(), "procfs-core no longer panics on {bad:?}");
            assert!(parse_stat(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cmdline_is_cut_on_char_boundary() {
        let raw =
            "kube-proxy\0--config=/var/lib/kube-proxy/config.conf\0--hostname-override=节点\0"
                .as_bytes();
        assert_eq!(
            parse_cmdline(raw, 1000),
            "kube-proxy --config=/var/lib/kube-proxy/config.conf --hostname-override=节点"
        );
        let cut = parse_cmdline(raw, 73);
        assert!(cut.len() <= 73 && cut.starts_with("kube-proxy --config"));
        assert_eq!(split_args(raw).len(), 3);
    }

    #[test]
    fn wchan_hides_zero() {
        // Linux 6.18 prints `0` for a task that is not sleeping (or when hidden).
        assert_eq!(parse_wchan(b"0"), None);
        assert_eq!(parse_wchan(b""), None);
        // Linux 4.14, mysqld waiting for a journal commit.
        assert_eq!(
            parse_wchan(b"jbd2_log_wait_commit").as_deref(),
            Some("jbd2_log_wait_commit")
        );
    }

    #[test]
    fn read_proc_file_reads_whole_records_up_to_the_cap() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("big");
        let text: String = (0..3000).map(|i| format!("{i}\n")).collect();
        std::fs::write(&p, &text[..cap::PID_RECORD]).unwrap();
        let mut buf = b"stale".to_vec();
        read_proc_file(&p, &mut buf).unwrap();
        assert_eq!(buf, &text.as_bytes()[..cap::PID_RECORD]);
        std::fs::write(&p, STAT_MYSQLD).unwrap();
        read_proc_file(&p, &mut buf).unwrap();
        assert_eq!(buf, STAT_MYSQLD.as_bytes());
        assert!(read_proc_file(&t.path().join("gone"), &mut buf).is_err());
        // A "stat" of 14 KB is no kernel's: refused, and the pid reads as unknown.
        std::fs::write(&p, &text).unwrap();
        assert!(matches!(
            read_proc_file(&p, &mut buf),
            Err(crate::ReadError::TooLarge { .. })
        ));
    }

    #[test]
    fn per_pid_readers_refuse_fifos_and_oversized_files_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        let dir = t.path().join("proc/42");
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["stat", "comm", "wchan", "cmdline"] {
            nix::unistd::mkfifo(
                &dir.join(f),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .unwrap();
        }
        // Each returns at once (a blocking open would hang this test).
        assert_eq!(stat(&host, 42), None);
        assert_eq!(comm(&host, 42), None);
        assert_eq!(wchan(&host, 42), None);
        assert_eq!(args(&host, 42), None);
        std::fs::remove_file(dir.join("comm")).unwrap();
        std::fs::write(dir.join("comm"), "x".repeat(cap::PID_RECORD + 1)).unwrap();
        assert_eq!(comm(&host, 42), None);
    }

    #[test]
    fn a_command_line_over_its_cap_keeps_whole_arguments() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        let dir = t.path().join("proc/7");
        std::fs::create_dir_all(&dir).unwrap();
        // argv[0], a flag, then one argument running past the cap.
        let mut raw = b"/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0".to_vec();
        raw.extend(vec![b'a'; cap::CMDLINE]);
        raw.push(0);
        std::fs::write(dir.join("cmdline"), &raw).unwrap();
        assert_eq!(
            args(&host, 7).unwrap(),
            vec![
                "/usr/bin/kubelet".to_string(),
                "--config=/var/lib/kubelet/config.yaml".to_string()
            ]
        );
        assert_eq!(
            cmdline(&host, 7, 200).unwrap(),
            "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml"
        );
    }

    proptest::proptest! {
        #[test]
        fn stat_never_panics(s in ".*") {
            let _ = parse_stat(&s);
        }
        #[test]
        fn stat_never_panics_on_near_valid(
            pre in "[0-9 é(]{0,4}",
            comm in "[a-z ()é\n]{0,6}",
            post in "[ )é]{0,2}",
            cut in 0usize..200,
        ) {
            let line = format!("{pre}({comm}){post}{}", &STAT_MYSQLD[13..]);
            let end = (0..=cut.min(line.len())).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
            let _ = parse_stat(&line[..end]);
        }
        #[test]
        fn wchan_never_panics(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            if let Some(w) = parse_wchan(&raw) { proptest::prop_assert!(w.chars().count() <= 64); }
        }
        #[test]
        fn cmdline_never_panics(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..300), max in 0usize..300) {
            let out = parse_cmdline(&raw, max);
            proptest::prop_assert!(out.len() <= max);
        }
        /// Lines as `do_task_stat()` prints them (`%d (%s) %c` then the numbers; 52 fields
        /// today, 41 before `delayacct_blkio_ticks`), comm as the task named itself (spaces and
        /// parentheses included, up to 15 bytes): the fields we use read back.
        #[test]
        fn stat_parses_what_the_kernel_prints(
            pid in 1u32..=4_194_304, ppid in 0u32..=4_194_304,
            comm in "[a-zA-Z0-9 ()/:._-]{0,15}",
            state in proptest::sample::select(vec!['R', 'S', 'D', 'Z', 'T', 't', 'X', 'I']),
            [utime, stime, starttime, blkio] in proptest::array::uniform4(proptest::num::u64::ANY),
            threads in 1u64..=i64::MAX as u64,
            old in proptest::bool::ANY,
        ) {
            let mut f: Vec<String> = STAT_MYSQLD.split_whitespace().map(str::to_string).collect();
            f[0] = pid.to_string();
            f[1] = format!("({comm})");
            f[2] = state.to_string();
            f[3] = ppid.to_string();
            f[13] = utime.to_string();
            f[14] = stime.to_string();
            f[19] = threads.to_string();
            f[21] = starttime.to_string();
            f[41] = blkio.to_string();
            if old {
                f.truncate(41);
            }
            let want = PidStat {
                pid, comm, state, ppid, utime, stime, num_threads: threads, starttime,
                blkio_ticks: (!old).then_some(blkio),
            };
            proptest::prop_assert_eq!(parse_stat(&format!("{}\n", f.join(" "))), Ok(want));
        }
        /// `wchan` as the kernel prints it (`%ps`, a symbol, or `0` when hidden).
        #[test]
        fn wchan_parses_what_the_kernel_prints(symbol in "[a-z_][a-z0-9_.]{0,40}") {
            proptest::prop_assert_eq!(parse_wchan(symbol.as_bytes()), Some(symbol.clone()));
            proptest::prop_assert_eq!(parse_wchan(b"0"), None);
        }
        /// `cmdline` as the kernel hands it out: each argument followed by a NUL. The
        /// arguments split back, and join with spaces when nothing is cut.
        #[test]
        fn cmdline_parses_what_the_kernel_prints(args in proptest::collection::vec("[^\\x00]{1,20}", 0..8)) {
            let raw: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
            proptest::prop_assert_eq!(split_args(&raw), args.clone());
            proptest::prop_assert_eq!(parse_cmdline(&raw, raw.len()), args.join(" "));
        }
    }
}
