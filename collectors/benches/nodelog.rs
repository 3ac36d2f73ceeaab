//! Cost of reading the node's logs (`collectors::nodelog`): syslog line parsing in a local
//! zone, the first read of a busy `/var/log/messages` (an hour of a node's lines), an
//! incremental cycle, and the journal reader on a journal file written by systemd's own code
//! (`systemd-journal-remote`, when installed; skipped otherwise).
//!
//! Reports CPU time (getrusage, user+sys) and the bytes and records each read took.
//!
//! `cargo bench -p collectors --bench nodelog`

use std::io::Write;
use std::time::Duration;

use collectors::nodelog::journal::JournalFile;
use collectors::nodelog::{classify, syslog, NodeLogConfig, NodeLogWatcher};
use nix::sys::resource::{getrusage, UsageWho};

fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

/// 2026-11-23T12:05:00+08:00.
const NOW: i64 = 1_795_406_700;

/// A node's syslog mix: mostly other programs, kubelet's routine lines, a few problems.
fn line(i: i64, ago: i64) -> String {
    let t = jiff::tz::TimeZone::fixed(jiff::tz::offset(8))
        .to_datetime(jiff::Timestamp::from_second(NOW - ago).unwrap())
        .strftime("%b %e %H:%M:%S")
        .to_string();
    let body = match i % 10 {
        0 => format!("kubelet[14109]: I1123 12:00:00.000000   14109 kubelet.go:2000] \"SyncLoop (PLEG): event for pod\" pod=\"shop/web-{i}\" event={{ID:65046a06-f795-11e9-9bb6-b67fb7a70bad Type:ContainerStarted}}"),
        1 => "containerd[700]: time=\"2026-11-23T12:00:00.000000000+08:00\" level=info msg=\"StartContainer for \\\"6c4f1e2b\\\" returns successfully\"".to_string(),
        2 => "dockerd[4822]: time=\"2026-11-23T12:01:40.000000000+08:00\" level=info msg=\"ignoring event\" container=6c4f1e2b module=libcontainerd namespace=moby topic=/tasks/delete type=\"*events.TaskDelete\"".to_string(),
        3 if i % 1000 == 3 => "kubelet[14109]: E1123 12:00:00.000000   14109 kubelet.go:2059] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s\"".to_string(),
        4 => "systemd[1]: Started Session 40 of user root.".to_string(),
        5 => "kernel: IPVS: rr: TCP 172.16.0.10:80 - no destination available".to_string(),
        _ => format!("sshd[{i}]: Accepted publickey for root from 10.0.0.1 port 5{i} ssh2: RSA SHA256:abcdef"),
    };
    format!("{t} VM-0-7-centos {body}\n")
}

fn main() {
    let dir = tempfile::tempdir().expect("temp root");
    let root = dir.path();
    std::fs::create_dir_all(root.join("usr/share/zoneinfo/Asia")).unwrap();
    std::fs::write(
        root.join("usr/share/zoneinfo/Asia/Shanghai"),
        include_bytes!("../tests/fixtures/zoneinfo/Asia/Shanghai"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/share/zoneinfo/Asia/Shanghai",
        root.join("etc/localtime"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("var/log")).unwrap();

    parsing();
    file_reads(root);
    journal(root);
}

/// Step 1: parsing, lines per second of the traditional format in a TZif zone.
fn parsing() {
    let tz = jiff::tz::TimeZone::tzif(
        "Asia/Shanghai",
        include_bytes!("../tests/fixtures/zoneinfo/Asia/Shanghai"),
    )
    .unwrap();
    let lines: Vec<String> = (0..10_000).map(|i| line(i, 3600 - i / 3)).collect();
    let n = 30;
    let c0 = cpu();
    let mut ok = 0usize;
    for _ in 0..n {
        for l in &lines {
            if let Some(p) = syslog::parse(l, &tz, NOW) {
                ok += 1;
                std::hint::black_box(classify(p.ident, p.message));
            }
        }
    }
    let per = (cpu() - c0) / (n * lines.len() as u32);
    println!(
        "syslog parse + classify: {:.2} us CPU per line ({} of {} lines parsed)",
        per.as_secs_f64() * 1e6,
        ok / n as usize,
        lines.len()
    );
}

/// Steps 2 and 3: the syslog file: a first read of an hour, then one cycle's new lines.
fn file_reads(root: &std::path::Path) {
    // 2. First read of an hour of a busy node's /var/log/messages (30 lines/s: 108,000 lines).
    let path = root.join("var/log/messages");
    let mut f = std::fs::File::create(&path).unwrap();
    let total = 108_000i64;
    for i in 0..total {
        f.write_all(line(i, 3600 - i * 3600 / total).as_bytes())
            .unwrap();
    }
    drop(f);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut w = NodeLogWatcher::new(collectors::HostPaths::new(root), NodeLogConfig::default());
    let c0 = cpu();
    let s = w.sample(NOW);
    let used = cpu() - c0;
    println!(
        "first read: {size} B file, {} B read, {} lines, {} kept, {} incidents: {:.1} ms CPU",
        s.report.bytes_read.values().sum::<u64>(),
        s.report.records_read.values().sum::<u64>(),
        s.report.records_kept,
        s.incidents.len(),
        used.as_secs_f64() * 1e3
    );

    // 3. A 15 s cycle later: 450 new lines.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    for i in 0..450 {
        f.write_all(line(i, -(i / 30)).as_bytes()).unwrap();
    }
    drop(f);
    let c0 = cpu();
    let s = w.sample(NOW + 15);
    let used = cpu() - c0;
    println!(
        "incremental cycle: {} B read, {} lines: {:.2} ms CPU",
        s.report.bytes_read.values().sum::<u64>(),
        s.report.records_read.values().sum::<u64>(),
        used.as_secs_f64() * 1e3
    );
}

/// Step 4: the journal reader on a file systemd wrote.
fn journal(root: &std::path::Path) {
    // 4. The journal reader on a file systemd wrote: 100,000 entries.
    let remote = std::path::Path::new("/lib/systemd/systemd-journal-remote");
    if !remote.exists() {
        println!("journal: SKIP (systemd-journal-remote not installed)");
        return;
    }
    let export = root.join("in.export");
    let mut f = std::fs::File::create(&export).unwrap();
    let base = (NOW - 3600) as u64 * 1_000_000;
    let entries = 100_000u64;
    for i in 0..entries {
        let msg = line(i as i64, 0);
        let (_, body) = msg.split_once(" VM-0-7-centos ").unwrap();
        let (tag, m) = body.split_once(": ").unwrap();
        let ident = tag.split('[').next().unwrap();
        write!(
            f,
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=5e8c2a0d4b3f4f6e9a1c7d2e3f405162\n_HOSTNAME=VM-0-7-centos\n_TRANSPORT=stdout\nPRIORITY=6\nSYSLOG_IDENTIFIER={ident}\n_COMM={ident}\n_PID=1234\n_SYSTEMD_UNIT={ident}.service\nMESSAGE={}\n\n",
            base + i * 36_000,
            1_000_000 + i,
            m.trim_end()
        )
        .unwrap();
    }
    drop(f);
    let jpath = root.join("system.journal");
    let st = std::process::Command::new(remote)
        .arg("-o")
        .arg(&jpath)
        .arg(&export)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let file = std::fs::File::open(&jpath).unwrap();
    let len = file.metadata().unwrap().len();
    let c0 = cpu();
    let mut jf = JournalFile::open(&file, len).unwrap();
    let pos = jf.seek_realtime(0).unwrap();
    let mut out = Vec::new();
    let (_, err) = jf.read_forward(pos, usize::MAX, u64::MAX, &mut out);
    let used = cpu() - c0;
    assert!(err.is_none(), "{err:?}");
    println!(
        "journal: {} entries of a {len} B file (compact, zstd), {} B read: {:.1} ms CPU, {:.2} us per entry",
        out.len(),
        jf.stats.bytes_read,
        used.as_secs_f64() * 1e3,
        used.as_secs_f64() * 1e6 / out.len().max(1) as f64
    );
    // Seeking the last ten minutes without reading what is older.
    let mut jf = JournalFile::open(&file, len).unwrap();
    let c0 = cpu();
    let pos = jf.seek_realtime(base + 3000 * 1_000_000).unwrap();
    let mut out = Vec::new();
    jf.read_forward(pos, usize::MAX, u64::MAX, &mut out);
    let used = cpu() - c0;
    println!(
        "journal: seek to the last 10 min + read {} entries: {} B read, {:.1} ms CPU",
        out.len(),
        jf.stats.bytes_read,
        used.as_secs_f64() * 1e3
    );
}
