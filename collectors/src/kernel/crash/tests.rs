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
    // A comm with brackets (runc's children name themselves so; found by the property below).
    let s = stall_line(
        "BUG: soft lockup - CPU#1 stuck for 26s! [runc:[2:INIT]:8812]",
        5,
    )
    .unwrap();
    assert_eq!(
        (s.comm.as_deref(), s.pid),
        (Some("runc:[2:INIT]"), Some(8812))
    );
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

/// A crash or stall printed as the kernel prints it, and the event it must read as.
#[derive(Debug, Clone)]
enum Printed {
    /// The first line's kind, with or without the `Oops:` line after it, the task line, the
    /// panic's reason.
    Oops {
        kind: OopsKind,
        oops_line: bool,
        task: Option<(u32, u32, String, bool)>,
        panic: Option<String>,
    },
    Soft {
        cpu: u32,
        secs: u32,
        comm: String,
        pid: u32,
    },
    Hard {
        cpu: u32,
    },
    /// The flavour, the CPU, and whether it is on its own next line (`rcu: \t3-....`).
    Rcu {
        flavor: &'static str,
        cpu: u32,
        next_line: bool,
    },
}

fn printed() -> impl proptest::strategy::Strategy<Value = Printed> {
    use proptest::prelude::*;
    let kinds = vec![
        OopsKind::NullPointer,
        OopsKind::PagingRequest,
        OopsKind::DivideError,
        OopsKind::GeneralProtection,
        OopsKind::InvalidOpcode,
        OopsKind::KernelBug,
        OopsKind::Oops,
    ];
    prop_oneof![
        (
            prop::sample::select(kinds),
            any::<bool>(),
            proptest::option::of((
                0u32..4096,
                0u32..4_194_304,
                crate::testgen::comm(),
                any::<bool>()
            )),
            proptest::option::of("[A-Za-z][A-Za-z0-9 :_-]{0,40}[a-z]"),
        )
            .prop_map(|(kind, oops_line, task, panic)| Printed::Oops {
                kind,
                oops_line,
                // Without its task line an oops ends at its panic: give it one.
                panic: if task.is_none() && panic.is_none() {
                    Some("Fatal exception".into())
                } else {
                    panic
                },
                task,
            }),
        (
            0u32..4096,
            0u32..100_000,
            crate::testgen::comm(),
            0u32..4_194_304
        )
            .prop_map(|(cpu, secs, comm, pid)| Printed::Soft {
                cpu,
                secs,
                comm,
                pid
            }),
        (0u32..4096).prop_map(|cpu| Printed::Hard { cpu }),
        (
            prop::sample::select(vec!["sched", "preempt", "bh"]),
            0u32..4096,
            any::<bool>()
        )
            .prop_map(|(flavor, cpu, next_line)| Printed::Rcu {
                flavor,
                cpu,
                next_line
            }),
    ]
}

impl Printed {
    /// The lines (the event starts at the first) and the event they say.
    fn render(&self) -> (Vec<String>, Event) {
        let first = |kind: OopsKind| {
            match kind {
            OopsKind::NullPointer => "BUG: kernel NULL pointer dereference, address: 0000000000000008",
            OopsKind::PagingRequest => "BUG: unable to handle page fault for address: ffffb1e0c0a3f000",
            OopsKind::DivideError => "divide error: 0000 [#1] PREEMPT SMP NOPTI",
            OopsKind::GeneralProtection => "general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] SMP PTI",
            OopsKind::InvalidOpcode => "invalid opcode: 0000 [#1] SMP PTI",
            OopsKind::KernelBug => "kernel BUG at mm/slub.c:3878!",
            _ => "Oops: 0000 [#1] SMP PTI",
        }
        };
        match self {
            Printed::Oops {
                kind,
                oops_line,
                task,
                panic,
            } => {
                let mut lines = vec![first(*kind).to_string(), "PGD 0 P4D 0 ".into()];
                if *oops_line && *kind != OopsKind::Oops {
                    lines.push("Oops: 0002 [#1] SMP NOPTI".into());
                }
                if let Some((cpu, pid, comm, uid)) = task {
                    let uid = if *uid { "UID: 0 " } else { "" };
                    lines.push(format!("CPU: {cpu} {uid}PID: {pid} Comm: {comm} Not tainted 6.1.0-18-amd64 #1 Debian 6.1.76-1"));
                }
                lines.push("RIP: 0010:kmem_cache_alloc+0x8c/0x2c0".into());
                lines.push("---[ end trace 0000000000000000 ]---".into());
                if let Some(p) = panic {
                    lines.push(format!("Kernel panic - not syncing: {p}"));
                }
                let ev = Event::Oops(Oops {
                    kind: *kind,
                    cpu: task.as_ref().map(|t| t.0),
                    pid: task.as_ref().map(|t| t.1),
                    comm: task.as_ref().map(|t| t.2.clone()),
                    panic: panic.clone(),
                    usec: 0,
                });
                (lines, ev)
            }
            Printed::Soft {
                cpu,
                secs,
                comm,
                pid,
            } => (
                vec![format!(
                    "watchdog: BUG: soft lockup - CPU#{cpu} stuck for {secs}s! [{comm}:{pid}]"
                )],
                Event::Stall(Stall {
                    kind: StallKind::SoftLockup,
                    cpu: Some(*cpu),
                    comm: Some(comm.clone()),
                    pid: Some(*pid),
                    stuck_seconds: Some(u64::from(*secs)),
                    rcu_flavor: None,
                    usec: 0,
                }),
            ),
            Printed::Hard { cpu } => (
                vec![format!(
                    "NMI watchdog: Watchdog detected hard LOCKUP on cpu {cpu}"
                )],
                Event::Stall(Stall {
                    kind: StallKind::HardLockup,
                    cpu: Some(*cpu),
                    comm: None,
                    pid: None,
                    stuck_seconds: None,
                    rcu_flavor: None,
                    usec: 0,
                }),
            ),
            Printed::Rcu {
                flavor,
                cpu,
                next_line,
            } => {
                let lines = if *next_line {
                    vec![
                        format!("rcu: INFO: rcu_{flavor} self-detected stall on CPU"),
                        format!("rcu: \t{cpu}-....: (20999 ticks this GP) idle=4a6/1/0x4000000000000002"),
                    ]
                } else {
                    vec![format!("INFO: rcu_{flavor} self-detected stall on CPU {{ {cpu}}}  (t=60000 jiffies g=1 c=0 q=9)")]
                };
                (
                    lines,
                    Event::Stall(Stall {
                        kind: StallKind::RcuStall,
                        cpu: Some(*cpu),
                        comm: None,
                        pid: None,
                        stuck_seconds: None,
                        rcu_flavor: Some(format!("rcu_{flavor}")),
                        usec: 0,
                    }),
                )
            }
        }
    }
}

proptest::proptest! {
    /// Oopses, lockups and RCU stalls in the wordings of kernels 4.19 to 6.18, one after
    /// another with the trace lines between them: each reads back as the event it was
    /// built from, stamped with its first line.
    #[test]
    fn reads_the_events_it_was_given(events in proptest::collection::vec(printed(), 0..6)) {
        let mut a = Assembler::default();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut usec = 0u64;
        for p in &events {
            let (lines, mut ev) = p.render();
            match &mut ev {
                Event::Oops(o) => o.usec = usec,
                Event::Stall(s) => s.usec = usec,
            }
            want.push(ev);
            for l in lines.iter().chain(["Call Trace:".to_string(), " <TASK>".into()].iter()) {
                got.extend(a.feed(l, usec));
                usec += 1;
            }
        }
        got.extend(a.flush());
        proptest::prop_assert_eq!(got, want);
    }
}
