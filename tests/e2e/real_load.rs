//! Issue 4 on a real kernel, through the binary (root, `fio` and `iostat` from the Debian
//! packages `fio` and `sysstat`): `fio` does direct writes to a file on a block-device-backed
//! filesystem while `node-doctor check --interval 3s --format json --collector load` runs on the
//! real host (`--host-root /`), and `iostat -dx <disk> 3 2` measures the same window.
//!
//! How the per-disk figures reach the JSON: `check --format json` prints the /findings
//! document, which has no metrics; the load collector names a disk, its busy share, its w/s
//! and the top IO processes in a `load.io_bound` finding, which fires when a disk is busy at
//! least `--disk-busy-percent` of the window (default 90). A VM disk under fio is not always
//! that busy, so the test lowers the threshold to 1% with that documented flag: the finding
//! then carries the collector's own measurement of the disk whatever its level, and the test
//! compares that measurement with iostat's.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The directory for fio's file: `/var/tmp` (kept on disk across reboots, unlike /tmp which
/// may be a tmpfs).
const FIO_DIR: &str = "/var/tmp";

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
    })
}

/// Why this test cannot run here, if it cannot.
fn skip_reason(dir: &Path) -> Option<String> {
    if !crate::support::is_root() {
        return Some("needs root (reads every process's /proc/<pid>/io)".into());
    }
    for (tool, package) in [("fio", "fio"), ("iostat", "sysstat")] {
        if !on_path(tool) {
            return Some(format!(
                "needs `{tool}` (Debian package {package}: apt-get install {package})"
            ));
        }
    }
    if disk_of(dir).is_none() {
        return Some(format!(
            "{} is not on a block device (tmpfs/overlay?): no disk to measure",
            dir.display()
        ));
    }
    None
}

/// The whole disk (`vda`, `sda`, `nvme0n1`, `dm-0`) holding `path`, from its device number
/// through /sys/dev/block (a partition's parent directory is its disk).
fn disk_of(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sys.join("partition").exists() {
        sys.parent()?.to_path_buf()
    } else {
        sys
    };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// A child process killed and reaped on drop (also when an assertion failed).
struct Reaped(Option<Child>);

impl Reaped {
    fn pid(&self) -> u32 {
        self.0.as_ref().map(Child::id).unwrap_or(0)
    }
    fn wait_output(mut self) -> std::process::Output {
        self.0
            .take()
            .expect("child")
            .wait_with_output()
            .expect("wait")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One device line of `iostat -dx`: (w/s, %util) from its last report.
fn iostat_last(text: &str, disk: &str) -> Option<(f64, f64)> {
    let mut header: Option<Vec<&str>> = None;
    let mut last = None;
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.first() {
            Some(&"Device") | Some(&"Device:") => header = Some(cols),
            Some(d) if *d == disk => {
                let h = header.as_ref()?;
                let at = |name: &str| -> Option<f64> {
                    let i = h.iter().position(|c| *c == name)?;
                    cols.get(i)?.replace(',', ".").parse().ok()
                };
                last = Some((at("w/s")?, at("%util")?));
            }
            _ => {}
        }
    }
    last
}

#[test]
fn iostat_parser_reads_the_last_report() {
    // sysstat 12.6 (Debian 12) on kernel 6.18, `iostat -dx vda 1 2`.
    let text = "Linux 6.18.44-fc-v669 (vm) \t11/22/26 \t_x86_64_\t(2 CPU)\n\n\
Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util\n\
vda            484.37  12733.89    17.34   3.46    1.54    26.29 1011.94  19862.20   146.92  12.68    0.23    19.63   43.07   4558.26     0.05   0.12    0.17   105.82    0.67    0.06    0.98   8.22\n\n\n\
Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util\n\
vda              0.00      0.00     0.00   0.00    0.00     0.00 2345.50      0.00     0.00   0.00    0.00     0.00    0.00      0.00     0.00   0.00    0.00     0.00    0.00    0.00    0.00  97.40\n";
    assert_eq!(iostat_last(text, "vda"), Some((2345.5, 97.4)));
    assert_eq!(iostat_last(text, "sda"), None);
}

#[test]
fn real_fio_direct_writes_show_in_check_and_agree_with_iostat() {
    let _machine = crate::support::exclusive();
    let name = "real_fio_direct_writes_show_in_check_and_agree_with_iostat";
    let dir = Path::new(FIO_DIR);
    if let Some(why) = skip_reason(dir) {
        collectors::skip!("SKIP {name}: {why}");
        return;
    }
    let disk = disk_of(dir).expect("disk");
    let file = TempFile(dir.join(format!("node-doctor-e2e-fio-{}.dat", std::process::id())));

    // Direct (O_DIRECT) 4 KiB random writes, one job as a thread of the fio process, ~10 s.
    let fio = Reaped(Some(
        Command::new("fio")
            .args([
                "--name=node-doctor-e2e",
                "--rw=randwrite",
                "--bs=4k",
                "--direct=1",
                "--ioengine=psync",
                "--size=64m",
                "--time_based",
                "--runtime=10",
                "--thread",
                "--output-format=terse",
            ])
            .arg(format!("--filename={}", file.0.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fio"),
    ));
    let fio_pid = fio.pid();
    // Let fio lay out its file and start writing.
    std::thread::sleep(Duration::from_millis(1500));

    // The same 3 s window for both: iostat's second report and check's second sample.
    let iostat = Reaped(Some(
        Command::new("iostat")
            .args(["-dx", &disk, "3", "2"])
            .env("LC_ALL", "C")
            .env("S_COLORS", "never")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iostat"),
    ));
    let check_started = std::time::Instant::now();
    let check = Reaped(Some(
        Command::new(crate::support::node_doctor_bin())
            .args([
                "check",
                "--host-root",
                "/",
                "--node-name",
                "e2e-node",
                "--interval",
                "3s",
                "--format",
                "json",
                "--collector",
                "load",
                "--disk-busy-percent",
                "1",
            ])
            .env_remove("NODE_NAME")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node-doctor check"),
    ));
    let check_out = check.wait_output();
    let check_ran = check_started.elapsed().as_secs_f64();
    let iostat_out = iostat.wait_output();
    let fio_alive = {
        let mut fio = fio;
        let alive = fio
            .0
            .as_mut()
            .and_then(|c| c.try_wait().ok())
            .flatten()
            .is_none();
        drop(fio);
        alive
    };
    assert!(fio_alive, "fio exited before the measurement window ended");

    let v: Value = serde_json::from_slice(&check_out.stdout).unwrap_or_else(|e| {
        panic!(
            "check: not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&check_out.stdout),
            String::from_utf8_lossy(&check_out.stderr)
        )
    });
    crate::serve::assert_contract(&v, "e2e-node");
    let load = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "load")
        .expect("load collector ran");
    assert!(
        load["status"] == "ok" || load["status"] == "degraded",
        "{load}"
    );
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "load.io_bound" && f["subject"] == disk.as_str())
        .unwrap_or_else(|| panic!("no load.io_bound for {disk}:\n{v:#}"));
    let ev = &f["evidence"];
    let busy = ev["busy_percent"].as_f64().expect("busy_percent");
    let wps = ev["writes_per_second"].as_f64().expect("writes_per_second");
    let window = ev["window_seconds"].as_f64().expect("window_seconds");
    assert!(busy > 0.0, "{disk} shows no busy time under fio: {f:#}");
    assert!(wps > 0.0, "{f:#}");
    // Its two samples are the interval (3 s) apart, and both inside check's run: a busy
    // machine may stretch the window, never beyond that run (/proc/uptime's 10 ms steps).
    assert!(
        window >= 2.5 && window <= check_ran + 0.02,
        "window {window} s, check ran {check_ran:.2} s"
    );

    // fio among the top IO processes, marked as a host process outside Kubernetes.
    let top = ev["top_io_processes"].as_str().expect("top_io_processes");
    let fio_entry = format!("fio (pid {fio_pid}, host process outside Kubernetes");
    assert!(top.contains(&fio_entry), "{fio_entry:?} not in {top:?}");
    let outside = ev["top_io_outside_kubernetes"].as_str().unwrap_or("");
    assert!(outside.split(',').any(|c| c == "fio"), "{outside:?}");
    if ev["top_io_pid"].as_f64() == Some(f64::from(fio_pid)) {
        assert_eq!(ev["top_io_origin"], "host", "{f:#}");
    }

    // Cross-check with iostat over the same window.
    let iostat_text = String::from_utf8_lossy(&iostat_out.stdout);
    let (io_wps, io_util) = iostat_last(&iostat_text, &disk).unwrap_or_else(|| {
        panic!(
            "no {disk} line in iostat output:\n{iostat_text}\n{}",
            String::from_utf8_lossy(&iostat_out.stderr)
        )
    });
    println!(
        "{disk}: node-doctor busy {busy:.1}% w/s {wps:.0} over {window:.2}s; iostat %util {io_util:.1} w/s {io_wps:.0}"
    );
    assert!(
        (busy - io_util).abs() <= 15.0,
        "busy {busy:.1}% vs iostat %util {io_util:.1}"
    );
    // w/s: within 15% of iostat's figure (a few tens of ms separate the two windows).
    let rel = (wps - io_wps).abs() / io_wps.max(1.0) * 100.0;
    assert!(
        rel <= 15.0,
        "w/s {wps:.0} vs iostat {io_wps:.0} ({rel:.1}% apart)"
    );
}
