//! The kernel's reports of its own failures, in the wordings of 3.10 to 6.x: oopses (and the
//! `BUG:` lines that open them), a panic that a node survived (kdump, `panic=0`), soft and hard
//! lockups, RCU stalls.
//!
//! ```text
//! BUG: unable to handle kernel NULL pointer dereference at 0000000000000008   (≤ 4.19)
//! BUG: kernel NULL pointer dereference, address: 0000000000000008           (4.20+)
//! BUG: unable to handle kernel paging request at ffffc90000a3b000            (≤ 4.19)
//! BUG: unable to handle page fault for address: ffffc90000a3b000            (4.20+)
//! divide error: 0000 [#1] SMP                                                (3.10; later `SMP PTI`, `PREEMPT SMP NOPTI`)
//! general protection fault: 0000 [#1] SMP                                    (≤ 5.7; 5.8+: `general protection fault, probably for non-canonical address …`)
//! kernel BUG at mm/slub.c:3878!                                              (then `invalid opcode: 0000 [#1] SMP`)
//! Oops: 0002 [#1] SMP PTI                                                    (after a `BUG:` line)
//! Oops: general protection fault, probably for non-canonical address 0x…: 0000 [#1] …   (6.10+: `Oops: ` before the trap)
//! CPU: 3 PID: 1234 Comm: java Not tainted 5.4.0-150-generic #167-Ubuntu      (6.12+: `CPU: 3 UID: 1000 PID: 1234 Comm: java …`; RHEL 7: `… Comm: java Kdump: loaded Not tainted …`)
//! Kernel panic - not syncing: Fatal exception
//! BUG: soft lockup - CPU#3 stuck for 22s! [java:1234]                        (3.10; 4.4–4.14 `NMI watchdog: …`, 4.15+ `watchdog: …`)
//! Watchdog detected hard LOCKUP on cpu 5                                     (3.10; 4.x+ `NMI watchdog: …`)
//! INFO: rcu_sched self-detected stall on CPU { 3}  (t=60000 jiffies …)      (3.10)
//! INFO: rcu_sched self-detected stall on CPU                                 (4.x; 5.3+ `rcu: INFO: …`), then `\t3-....: (…)`
//! INFO: rcu_preempt detected stalls on CPUs/tasks:                          (then `\t3-...!: (…)` per CPU)
//! ```
//!
//! One oops prints several of these lines: [`Assembler`] joins them into one [`Oops`] and
//! gives it the task of its `CPU:` line and the panic that may follow it.

use crate::needle::Needle;

/// What opened an oops (its first line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OopsKind {
    NullPointer,
    PagingRequest,
    DivideError,
    GeneralProtection,
    InvalidOpcode,
    KernelBug,
    /// A bare `Oops:` line (no `BUG:` line before it was read).
    Oops,
    /// A `Kernel panic - not syncing` line with no oops before it.
    Panic,
}

impl OopsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OopsKind::NullPointer => "null_pointer_dereference",
            OopsKind::PagingRequest => "paging_request",
            OopsKind::DivideError => "divide_error",
            OopsKind::GeneralProtection => "general_protection_fault",
            OopsKind::InvalidOpcode => "invalid_opcode",
            OopsKind::KernelBug => "kernel_bug",
            OopsKind::Oops => "oops",
            OopsKind::Panic => "panic",
        }
    }
}

/// One oops (or a panic without one), with the task it happened in when its `CPU:` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oops {
    pub kind: OopsKind,
    pub cpu: Option<u32>,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// The text after `Kernel panic - not syncing: `, when the kernel panicked.
    pub panic: Option<String>,
    pub usec: u64,
}

impl Oops {
    /// True when it happened in a task's context (a pid other than 0, not the idle task).
    pub fn process_context(&self) -> bool {
        self.pid.is_some_and(|p| p != 0)
            && !self
                .comm
                .as_deref()
                .is_some_and(|c| c.starts_with("swapper"))
    }
}

/// How a CPU stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallKind {
    SoftLockup,
    HardLockup,
    RcuStall,
}

impl StallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StallKind::SoftLockup => "soft_lockup",
            StallKind::HardLockup => "hard_lockup",
            StallKind::RcuStall => "rcu_stall",
        }
    }
}

/// One lockup or RCU stall report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    pub kind: StallKind,
    pub cpu: Option<u32>,
    /// The task running on the CPU (soft lockups name it).
    pub comm: Option<String>,
    pub pid: Option<u32>,
    /// Seconds stuck (soft lockups say).
    pub stuck_seconds: Option<u64>,
    /// `rcu_sched`, `rcu_preempt`, `rcu_bh` (RCU stalls).
    pub rcu_flavor: Option<String>,
    pub usec: u64,
}

/// What the assembler returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Oops(Oops),
    Stall(Stall),
}

/// Longest task name or panic text kept from a line.
const MAX_TEXT: usize = 128;

/// Records after its first line in which an oops still takes its `CPU:` line and its panic.
const OOPS_SPAN: u32 = 120;
/// Records after an RCU stall's first line in which it still takes the CPU line.
const RCU_SPAN: u32 = 4;

/// The opening line of an oops, by its wording (6.10+ prefixes the trap's name with `Oops: `:
/// `Oops: general protection fault, …`, `Oops: divide error: 0000 [#1] …`, `Oops: Oops: 0002`).
pub fn oops_kind(m: &str) -> Option<OopsKind> {
    let m = m.trim_start();
    match m.strip_prefix("Oops: ") {
        Some(rest) => Some(bare_oops_kind(rest).unwrap_or(OopsKind::Oops)),
        None => bare_oops_kind(m),
    }
}

fn bare_oops_kind(m: &str) -> Option<OopsKind> {
    // arm64 (and arm) print `Unable to handle kernel … at virtual address …` without `BUG: `.
    if m.starts_with("BUG: unable to handle kernel NULL pointer dereference")
        || m.starts_with("BUG: kernel NULL pointer dereference")
        || m.starts_with("Unable to handle kernel NULL pointer dereference at virtual address ")
    {
        Some(OopsKind::NullPointer)
    } else if m.starts_with("BUG: unable to handle kernel paging request")
        || m.starts_with("BUG: unable to handle page fault for address")
        || m.starts_with("Unable to handle kernel paging request at virtual address ")
    {
        Some(OopsKind::PagingRequest)
    } else if m.starts_with("divide error: ") {
        Some(OopsKind::DivideError)
    } else if m.starts_with("general protection fault") {
        Some(OopsKind::GeneralProtection)
    } else if m.starts_with("invalid opcode: ") {
        Some(OopsKind::InvalidOpcode)
    } else if m.starts_with("kernel BUG at ") {
        Some(OopsKind::KernelBug)
    } else {
        None
    }
}

/// `CPU: 3 PID: 1234 Comm: java …` (and 6.12+'s `CPU: 3 UID: 0 PID: 1234 Comm: java …`).
pub fn task_line(m: &str) -> Option<(u32, u32, String)> {
    let rest = m.trim_start().strip_prefix("CPU: ")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let cpu: u32 = cpu.parse().ok()?;
    let (_, rest) = rest.split_once("PID: ")?;
    let (pid, rest) = rest.split_once(' ')?;
    let pid: u32 = pid.parse().ok()?;
    let rest = rest.strip_prefix("Comm: ")?;
    // The comm is up to 15 bytes and may hold spaces; the kernel follows it with its taint
    // (`Not tainted` or `Tainted:`) and the release; RHEL 7 with `Kdump: loaded` before them.
    let comm = ["Not tainted", "Tainted:", "Kdump:"]
        .iter()
        .filter_map(|t| rest.find(t))
        .min()
        .map_or(rest, |at| &rest[..at])
        .trim();
    (!comm.is_empty()).then(|| (cpu, pid, text(comm)))
}

/// `Kernel panic - not syncing: <reason>`.
pub fn panic_line(m: &str) -> Option<String> {
    static PANIC: Needle = Needle::new("Kernel panic - not syncing:");
    Some(text(PANIC.after(m)?.trim()))
}

/// A soft lockup, a hard lockup, or the first line of an RCU stall.
pub fn stall_line(m: &str, usec: u64) -> Option<Stall> {
    let blank = |kind| Stall {
        kind,
        cpu: None,
        comm: None,
        pid: None,
        stuck_seconds: None,
        rcu_flavor: None,
        usec,
    };
    static SOFT: Needle = Needle::new("BUG: soft lockup - CPU#");
    static HARD: Needle = Needle::new("Watchdog detected hard LOCKUP on cpu ");
    if let Some(rest) = SOFT.after(m) {
        let mut s = blank(StallKind::SoftLockup);
        s.cpu = leading_number(rest);
        s.stuck_seconds = rest
            .split_once("stuck for ")
            .and_then(|(_, r)| leading_number(r));
        // `[comm:pid]` at the end; the comm may hold ':' (`kworker/3:1`).
        // `[%s:%d]` after the first `! `: the comm itself may hold brackets (`runc:[1:CHILD]`).
        if let Some((_, who)) = rest.split_once("! [") {
            let who = who.trim_end();
            let who = who.strip_suffix(']').unwrap_or(who);
            if let Some((comm, pid)) = who.rsplit_once(':') {
                s.pid = pid.parse().ok();
                if s.pid.is_some() && !comm.is_empty() {
                    s.comm = Some(text(comm));
                }
            }
        }
        return s.cpu.is_some().then_some(s);
    }
    // powerpc's own watchdog (arch/powerpc/kernel/watchdog.c): `Watchdog CPU:59 Hard LOCKUP`.
    static PPC_HARD: Needle = Needle::new("Watchdog CPU:");
    if let Some(rest) = PPC_HARD.after(m) {
        let mut s = blank(StallKind::HardLockup);
        s.cpu = leading_number(rest);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let hard = rest[digits..].trim_start().starts_with("Hard LOCKUP");
        return (hard && s.cpu.is_some()).then_some(s);
    }
    if let Some(rest) = HARD.after(m) {
        let mut s = blank(StallKind::HardLockup);
        s.cpu = leading_number(rest);
        return s.cpu.is_some().then_some(s);
    }
    let m = m.trim_start();
    let m = m.strip_prefix("rcu: ").unwrap_or(m);
    let rest = m.strip_prefix("INFO: rcu_")?;
    let (flavor, after) = rest.split_once(' ')?;
    // 3.0 – 3.2 named the state (`rcu_sched_state detected stall on CPU 1 (t=…)`).
    let flavor = flavor.strip_suffix("_state").unwrap_or(flavor);
    let old_cpu = after.strip_prefix("detected stall on CPU ");
    if !(after.starts_with("self-detected stall on CPU")
        || after.starts_with("detected stalls on CPUs/tasks:")
        || old_cpu.is_some())
        || flavor.len() > 16
        || !flavor.chars().all(|c| c.is_ascii_lowercase())
    {
        return None;
    }
    let mut s = blank(StallKind::RcuStall);
    s.rcu_flavor = Some(format!("rcu_{flavor}"));
    // 3.10 names the CPU on the same line: `{ 3}` (or `{ 3 5}` for several); 3.0 after `CPU `.
    s.cpu = match old_cpu {
        Some(r) => leading_number(r),
        None => after
            .split_once('{')
            .and_then(|(_, r)| leading_number(r.trim_start())),
    };
    Some(s)
}

/// The per-CPU line after an RCU stall's first line (4.x+): `\t3-....: (20999 ticks this
/// GP) …`, `rcu: \t3-...!: (…)`.
pub fn rcu_cpu_line(m: &str) -> Option<u32> {
    let m = m.strip_prefix("rcu: ").unwrap_or(m);
    let rest = m.trim_start();
    let n = leading_number(rest)?;
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    rest[digits..].starts_with('-').then_some(n)
}

fn leading_number<T: std::str::FromStr>(s: &str) -> Option<T> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 10 {
        return None;
    }
    s[..n].parse().ok()
}

/// Host text kept for evidence: no control characters, bounded.
fn text(s: &str) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    crate::bounded::prefix_owned(&clean, MAX_TEXT)
}

#[derive(Debug)]
enum Pending {
    Oops(Oops, u32),
    /// A stall's first line, the records since, and whether a CPU line of it was emitted
    /// (one stall names every stalled CPU, one line each).
    Rcu(Stall, u32, bool),
}

/// Joins the lines of one oops or RCU stall into one event.
#[derive(Debug, Default)]
pub struct Assembler {
    pending: Option<Pending>,
}

impl Assembler {
    /// Feeds one kernel log message; returns the events it completes.
    pub fn feed(&mut self, m: &str, usec: u64) -> Vec<Event> {
        let mut out = Vec::new();
        // Count this record against the pending event's span.
        match &mut self.pending {
            Some(Pending::Oops(_, n)) | Some(Pending::Rcu(_, n, _)) => *n += 1,
            None => {}
        }
        if let Some(kind) = oops_kind(m) {
            match &mut self.pending {
                // A later line of the same oops (`Oops:` after `BUG:`, `invalid opcode` after
                // `kernel BUG at`), before its `CPU:` line: the same oops.
                Some(Pending::Oops(o, _)) if o.pid.is_none() && o.panic.is_none() => {
                    if o.kind == OopsKind::Oops {
                        o.kind = kind;
                    }
                }
                _ => {
                    out.extend(self.flush());
                    self.pending = Some(Pending::Oops(
                        Oops {
                            kind,
                            cpu: None,
                            pid: None,
                            comm: None,
                            panic: None,
                            usec,
                        },
                        0,
                    ));
                }
            }
        } else if let Some(reason) = panic_line(m) {
            match self.pending.take() {
                Some(Pending::Oops(mut o, _)) => {
                    o.panic = Some(reason);
                    out.push(Event::Oops(o));
                }
                other => {
                    if let Some(Pending::Rcu(s, _, false)) = other {
                        out.push(Event::Stall(s));
                    }
                    // A panic without an oops before it (a hard or soft lockup's panic)
                    // prints its `CPU:` line next: wait for it, as for an oops.
                    self.pending = Some(Pending::Oops(
                        Oops {
                            kind: OopsKind::Panic,
                            cpu: None,
                            pid: None,
                            comm: None,
                            panic: Some(reason),
                            usec,
                        },
                        0,
                    ));
                }
            }
        } else if let Some(s) = stall_line(m, usec) {
            // 4.x prints `self-detected stall on CPU` and then `detected stalls on
            // CPUs/tasks:` for one stall: a CPU-less first line still waiting is the same one.
            let same = s.kind == StallKind::RcuStall
                && s.cpu.is_none()
                && matches!(&self.pending, Some(Pending::Rcu(p, _, false)) if p.cpu.is_none());
            if same {
                self.pending = None;
            }
            out.extend(self.flush());
            if s.kind == StallKind::RcuStall && s.cpu.is_none() {
                self.pending = Some(Pending::Rcu(s, 0, false));
            } else {
                out.push(Event::Stall(s));
            }
        } else {
            // The follow-up lines are looked for only while an event waits for them.
            match &mut self.pending {
                Some(Pending::Oops(o, _)) if o.pid.is_none() => {
                    if let Some((cpu, pid, comm)) = task_line(m) {
                        o.cpu = Some(cpu);
                        o.pid = Some(pid);
                        o.comm = Some(comm);
                    }
                }
                Some(Pending::Rcu(s, _, emitted)) => {
                    if let Some(cpu) = rcu_cpu_line(m) {
                        let mut one = s.clone();
                        one.cpu = Some(cpu);
                        out.push(Event::Stall(one));
                        *emitted = true;
                    }
                }
                _ => {}
            }
        }
        // Past its span, a pending event is complete.
        let expired = match &self.pending {
            Some(Pending::Oops(_, n)) => *n > OOPS_SPAN,
            Some(Pending::Rcu(_, n, _)) => *n > RCU_SPAN,
            None => false,
        };
        if expired {
            out.extend(self.flush());
        }
        out
    }

    /// Completes the pending event (at the end of what the kernel holds).
    pub fn flush(&mut self) -> Vec<Event> {
        match self.pending.take() {
            Some(Pending::Oops(o, _)) => vec![Event::Oops(o)],
            Some(Pending::Rcu(s, _, false)) => vec![Event::Stall(s)],
            Some(Pending::Rcu(_, _, true)) | None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
