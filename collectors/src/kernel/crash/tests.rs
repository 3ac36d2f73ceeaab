use super::*;

fn feed_all(lines: &[&str]) -> Vec<Event> {
    let mut a = Assembler::default();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        out.extend(a.feed(l, i as u64));
    }
    out.extend(a.flush());
    out
}

#[test]
fn one_oops_of_several_lines_names_its_task_and_panic() {
    // 4.19 wording: BUG, Oops, the CPU line, the trace's end, the panic.
    let ev = feed_all(&[
        "BUG: unable to handle kernel NULL pointer dereference at 0000000000000008",
        "PGD 0 P4D 0 ",
        "Oops: 0000 [#1] SMP PTI",
        "CPU: 3 PID: 1234 Comm: java Not tainted 4.19.0-25-amd64 #1 Debian 4.19.289-2",
        "---[ end trace 3c8e1ac0fbc7a8e5 ]---",
        "Kernel panic - not syncing: Fatal exception",
    ]);
    assert_eq!(
        ev,
        vec![Event::Oops(Oops {
            kind: OopsKind::NullPointer,
            cpu: Some(3),
            pid: Some(1234),
            comm: Some("java".into()),
            panic: Some("Fatal exception".into()),
            usec: 0,
        })]
    );
}

#[test]
fn kernel_bug_then_invalid_opcode_is_one_oops_and_6_12_uid() {
    let ev = feed_all(&[
        "kernel BUG at mm/slub.c:3878!",
        "invalid opcode: 0000 [#1] PREEMPT SMP NOPTI",
        "CPU: 0 UID: 0 PID: 77 Comm: kworker/0:2 Tainted: G        W          6.18.0 #1",
        "divide error: 0000 [#2] PREEMPT SMP NOPTI",
        "CPU: 1 PID: 0 Comm: swapper/1 Tainted: G      D            6.8.0-31-generic #31-Ubuntu",
    ]);
    assert_eq!(ev.len(), 2, "{ev:?}");
    let Event::Oops(a) = &ev[0] else { panic!() };
    assert_eq!(a.kind, OopsKind::KernelBug);
    assert_eq!(
        (a.cpu, a.pid, a.comm.as_deref()),
        (Some(0), Some(77), Some("kworker/0:2"))
    );
    assert!(a.process_context());
    let Event::Oops(b) = &ev[1] else { panic!() };
    assert_eq!(b.kind, OopsKind::DivideError);
    assert!(!b.process_context());
}

#[test]
fn six_ten_oops_prefix_and_rhel_kdump() {
    assert_eq!(
        oops_kind("Oops: divide error: 0000 [#1] PREEMPT SMP NOPTI"),
        Some(OopsKind::DivideError)
    );
    assert_eq!(oops_kind("Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] SMP NOPTI"), Some(OopsKind::GeneralProtection));
    assert_eq!(
        oops_kind("Oops: Oops: 0002 [#1] SMP NOPTI"),
        Some(OopsKind::Oops)
    );
    assert_eq!(
        task_line(
            "CPU: 3 PID: 1234 Comm: java Kdump: loaded Not tainted 3.10.0-1160.el7.x86_64 #1"
        ),
        Some((3, 1234, "java".to_string()))
    );
}

#[test]
fn lockups_and_rcu_stalls() {
    let s = stall_line(
        "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [java:1234]",
        5,
    )
    .unwrap();
    assert_eq!(
        (s.kind, s.cpu, s.stuck_seconds, s.comm.as_deref(), s.pid),
        (
            StallKind::SoftLockup,
            Some(3),
            Some(23),
            Some("java"),
            Some(1234)
        )
    );
    let s = stall_line(
        "BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:45]",
        5,
    )
    .unwrap();
    assert_eq!((s.comm.as_deref(), s.pid), (Some("kworker/0:1"), Some(45)));
    let s = stall_line("NMI watchdog: Watchdog detected hard LOCKUP on cpu 5", 5).unwrap();
    assert_eq!((s.kind, s.cpu), (StallKind::HardLockup, Some(5)));
    let s = stall_line(
        "INFO: rcu_sched self-detected stall on CPU { 3}  (t=60000 jiffies g=1 c=0 q=9)",
        5,
    )
    .unwrap();
    assert_eq!(
        (s.kind, s.cpu, s.rcu_flavor.as_deref()),
        (StallKind::RcuStall, Some(3), Some("rcu_sched"))
    );
    let ev = feed_all(&[
        "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
        "rcu: \t6-...!: (1 GPs behind) idle=2a4/1/0x4000000000000000 softirq=1/1 fqs=0",
    ]);
    let Event::Stall(s) = &ev[0] else { panic!() };
    assert_eq!(
        (s.cpu, s.rcu_flavor.as_deref()),
        (Some(6), Some("rcu_preempt"))
    );
    assert_eq!(
        stall_line("rcu: INFO: rcu_sched detected expedited stalls", 0),
        None
    );
    assert_eq!(
        stall_line(
            "traps: java[12] trap divide error ip:4005 sp:7ffd error:0",
            0
        ),
        None
    );
    assert_eq!(
        oops_kind("traps: java[12] general protection fault ip:7f sp:7ffd error:0 in libc.so.6"),
        None
    );
}

/// One stall naming two CPUs (harvester/harvester#564, Linux 5.3): a stall for each.
#[test]
fn an_rcu_stall_names_every_stalled_cpu() {
    let ev = feed_all(&[
        "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
        "rcu:         9-...!: (0 ticks this GP) idle=850/0/0x0 softirq=354327/354327 fqs=1",
        "rcu:         11-...!: (0 ticks this GP) idle=dd0/0/0x0 softirq=363050/363050 fqs=1",
        "     (detected by 2, t=663225 jiffies, g=890229, q=72)",
    ]);
    let cpus: Vec<_> = ev
        .iter()
        .map(|e| match e {
            Event::Stall(s) => s.cpu,
            Event::Oops(_) => None,
        })
        .collect();
    assert_eq!(cpus, [Some(9), Some(11)]);
}

/// docker 1.12's node (moby/moby#34293, 4.9): `self-detected stall on CPU` then `detected
/// stalls on CPUs/tasks:` with two CPU lines is one stall of CPUs 0 and 1, not a third without
/// a CPU; 3.0's `rcu_sched_state detected stall on CPU 1 (t=…)` (openzfs/zfs#557) names its CPU.
#[test]
fn rcu_stall_wordings_of_real_reports() {
    let ev = feed_all(&[
        "INFO: rcu_sched self-detected stall on CPU",
        "INFO: rcu_sched detected stalls on CPUs/tasks:",
        "        0-...: (1 GPs behind) idle=fcd/140000000000001/0 softirq=392901330/392901331 fqs=0",
        "        1-...: (1 GPs behind) idle=2d1/140000000000000/0 softirq=335319685/335319685 fqs=0",
    ]);
    let cpus: Vec<_> = ev
        .iter()
        .map(|e| match e {
            Event::Stall(s) => s.cpu,
            Event::Oops(_) => None,
        })
        .collect();
    assert_eq!(cpus, [Some(0), Some(1)]);
    let s = stall_line(
        "INFO: rcu_sched_state detected stall on CPU 1 (t=15000 jiffies)",
        0,
    )
    .unwrap();
    assert_eq!(
        (s.cpu, s.rcu_flavor.as_deref()),
        (Some(1), Some("rcu_sched"))
    );
}

/// A lockup's panic names its task on the `CPU:` line after it (sonic-net/sonic-buildimage
/// #17358, 5.10; RedPill-TTG/redpill-lkm#21, 3.10).
#[test]
fn a_panic_without_an_oops_names_the_task_of_its_cpu_line() {
    let ev = feed_all(&[
        "watchdog: BUG: soft lockup - CPU#2 stuck for 23s! [kworker/2:1:25629]",
        "Kernel panic - not syncing: softlockup: hung tasks",
        "CPU: 2 PID: 25629 Comm: kworker/2:1 Tainted: G OEL 5.10.0-18-2-amd64 #1 Debian 5.10.140-1",
    ]);
    let oops: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Oops(o) => Some((o.kind, o.comm.clone(), o.panic.is_some())),
            Event::Stall(_) => None,
        })
        .collect();
    assert_eq!(
        oops,
        [(OopsKind::Panic, Some("kworker/2:1".to_string()), true)]
    );
}

/// powerpc's watchdog wording (open-power/skiboot#194, 4.15 on POWER9).
#[test]
fn powerpc_hard_lockup_wording() {
    let s = stall_line("Watchdog CPU:59 Hard LOCKUP", 0).unwrap();
    assert_eq!((s.kind, s.cpu), (StallKind::HardLockup, Some(59)));
    assert_eq!(
        stall_line("Watchdog CPU:59 detected Hard LOCKUP other CPUs 2-3", 0),
        None
    );
}

/// arm64's oops wording (apple/container#614): no `BUG: ` before it.
#[test]
fn arm64_oops_wordings() {
    assert_eq!(
        oops_kind(
            "Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000"
        ),
        Some(OopsKind::NullPointer)
    );
    assert_eq!(
        oops_kind("Unable to handle kernel paging request at virtual address ffff800012345678"),
        Some(OopsKind::PagingRequest)
    );
}

proptest::proptest! {
    #[test]
    fn never_panics(lines in proptest::collection::vec("\\PC{0,80}", 0..20)) {
        let mut a = Assembler::default();
        for l in &lines {
            let _ = a.feed(l, 1);
        }
        let _ = a.flush();
    }
    #[test]
    fn never_panics_near_wordings(s in "(CPU: [0-9a]{0,3} (UID: 0 )?PID: [0-9]{0,3} Comm: ?[a-z :]{0,8}|BUG: soft lockup - CPU#[0-9]{0,3} stuck for [0-9]{0,3}s! \\[[a-z:0-9]{0,8}\\]?|rcu: \t[0-9]{0,2}-?.*)") {
        let _ = task_line(&s);
        let _ = stall_line(&s, 0);
        let _ = rcu_cpu_line(&s);
    }
}
