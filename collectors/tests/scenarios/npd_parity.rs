//! node-problem-detector parity: each rule of NPD's shipped `config/kernel-monitor.json`,
//! `config/kernel-monitor-counter.json` and `config/readonly-monitor.json`, by reason, with a
//! line in the kernel's own wording (written here, headers ours), fed through the kernel
//! collector on a fake host: each must raise node-doctor's finding, and with
//! `--kube-npd-names` the rule file must give it NPD's reason (Event) or condition.

use collectors::kernel::{KernelCollector, KernelConfig};
use collectors::{Collector, Finding};

use crate::support::{self, FakeHost};

/// (NPD reason, NPD condition it sets (permanent rules), kmsg records, node-doctor's rule id,
/// its subject). The records end 60 s before the fake host's uptime (7200 s).
const CHECKLIST: &[(&str, Option<&str>, &str, &str, &str)] = &[
    ("OOMKilling", None, "\
4,10,7140000000,-;Out of memory: Killed process 4242 (java) total-vm:4118968kB, anon-rss:3276800kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:6880kB oom_score_adj:0
", "kernel.oom_system", ""),
    ("TaskHung", None, "\
3,10,7140000000,-;INFO: task jbd2/vda1-8:287 blocked for more than 122 seconds.
", "kernel.hung_task", "jbd2/vda1-8"),
    ("UnregisterNetDevice", None, "\
0,10,7140000000,-;unregister_netdevice: waiting for veth9a8b7c6 to become free. Usage count = 1
", "kernel.unregister_netdevice", "veth9a8b7c6"),
    // NPD's first KernelOops pattern: the ≤ 4.19 wording.
    ("KernelOops", None, "\
1,10,7140000000,-;BUG: unable to handle kernel NULL pointer dereference at 0000000000000010
4,11,7140000010,-;Oops: 0000 [#1] SMP PTI
4,12,7140000020,-;CPU: 2 PID: 3141 Comm: envoy Not tainted 4.19.0-25-amd64 #1 Debian 4.19.289-2
", "kernel.oops", "envoy"),
    // NPD's second KernelOops pattern.
    ("KernelOops", None, "\
4,10,7140000000,-;divide error: 0000 [#1] SMP 
4,11,7140000010,-;CPU: 0 PID: 2718 Comm: mysqld Not tainted 3.10.0-1160.el7.x86_64 #1
", "kernel.oops", "mysqld"),
    // 4.20+: NPD's pattern misses this wording; node-doctor does not.
    ("KernelOops", None, "\
1,10,7140000000,-;BUG: kernel NULL pointer dereference, address: 0000000000000010
4,11,7140000010,-;Oops: 0000 [#1] SMP NOPTI
4,12,7140000020,-;CPU: 2 PID: 3141 Comm: envoy Not tainted 5.15.0-91-generic #101-Ubuntu
", "kernel.oops", "envoy"),
    ("Ext4Error", None, "\
3,10,7140000000,-;EXT4-fs error (device vdc): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0
", "kernel.fs_error", "vdc"),
    ("Ext4Warning", None, "\
4,10,7140000000,-;EXT4-fs warning (device vdc): ext4_dx_add_entry:2461: Directory index full!
", "kernel.ext4_warning", "vdc"),
    ("IOError", None, "\
3,10,7140000000,-;Buffer I/O error on dev vdc, logical block 0, async page read
", "kernel.fs_error", "vdc"),
    ("XfsHasShutdown", Some("XfsShutdown"), "\
1,10,7140000000,-;XFS (vdd): Log I/O Error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] (fs/xfs/xfs_log.c:1378).  Shutting down filesystem.
", "kernel.fs_error", "vdd"),
    // MemoryReadError ("CE memory read error"): the hardware collector's (EDAC), not the
    // kernel collector's; wired there.
    ("MemoryReadError", None, "", "hardware collector", ""),
    ("DockerHung", Some("KernelDeadlock"), "\
3,10,7140000000,-;INFO: task docker:1500 blocked for more than 120 seconds.
", "kernel.hung_task", "docker"),
    ("FilesystemIsReadOnly", Some("ReadonlyFilesystem"), "\
2,10,7140000000,-;EXT4-fs (vdc): Remounting filesystem read-only
", "kernel.fs_error", "vdc"),
    ("UnregisterNetDevice", Some("FrequentUnregisterNetDevice"), "\
0,10,7120000000,-;unregister_netdevice: waiting for lo to become free. Usage count = 1
0,11,7130000000,-;unregister_netdevice: waiting for lo to become free. Usage count = 1
0,12,7140000000,-;unregister_netdevice: waiting for lo to become free. Usage count = 1
", "kernel.unregister_netdevice", "lo"),
];

/// What NPD's reason or condition the rule file gives this finding under `--kube-npd-names`:
/// the Event's reason, or the condition types with their reasons.
fn npd_names(f: &Finding) -> (Option<String>, Vec<(String, String)>) {
    use collectors::rules::RuleBook;
    let event = RuleBook::event(f).and_then(|e| e.reason_for(true, f));
    let conditions = RuleBook::cluster(f)
        .into_iter()
        .map(|(class, reason)| (class.ctype(true).to_string(), reason.to_string()))
        .collect();
    (event, conditions)
}

#[test]
fn npd_parity_kernel() {
    let mut recognised = 0;
    let mut checked = 0;
    for &(reason, condition, kmsg, id, subject) in CHECKLIST {
        if id == "hardware collector" {
            eprintln!(
                "skip  {reason:<22} the hardware collector's (EDAC), not the kernel collector's"
            );
            continue;
        }
        checked += 1;
        let h = FakeHost::new();
        h.write("/proc/uptime", "7200.00 14000.00\n")
            .write("/dev/kmsg", kmsg)
            .write(
                "/proc/1/mountinfo",
                "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                 40 22 252:32 / /data rw,relatime - ext4 /dev/vdc ro,errors=remount-ro\n\
                 41 22 252:48 / /xfs rw,relatime - xfs /dev/vdd rw,inode64\n",
            )
            .write("/sys/class/block/vdc/dev", "252:32\n")
            .write("/sys/class/block/vdd/dev", "252:48\n");
        // The XFS mount answers EIO: shut down now.
        let mut k = KernelCollector::new(h.node(), KernelConfig::default()).with_mount_probe(
            |p: &std::path::Path| {
                if p.ends_with("xfs") {
                    Err(std::io::Error::from_raw_os_error(5))
                } else {
                    Ok(0)
                }
            },
        );
        let c = k.collect(&support::ctx());
        let Some(f) = c
            .findings
            .iter()
            .find(|f| f.id == id && (subject.is_empty() || f.subject == subject))
        else {
            eprintln!(
                "MISS  {reason:<22} {id} {subject}: {:?}",
                c.findings.iter().map(|f| f.key()).collect::<Vec<_>>()
            );
            continue;
        };
        let (event, conditions) = npd_names(f);
        let named = match condition {
            Some(cond) => conditions.iter().any(|(t, r)| t == cond && r == reason),
            None => event.as_deref() == Some(reason),
        };
        if named {
            recognised += 1;
            eprintln!("ok    {reason:<22} {id} {} ({:?})", f.subject, f.severity);
        } else {
            eprintln!(
                "NAME  {reason:<22} {id} {}: event {event:?}, conditions {conditions:?}",
                f.subject
            );
        }
    }
    println!("{recognised}/{checked} recognised");
    eprintln!("{recognised}/{checked} recognised (MemoryReadError: the hardware collector's)");
    assert_eq!(recognised, checked);
}
