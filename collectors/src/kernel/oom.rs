//! OOM-killer lines of the kernel log, old and new formats, and the small state machine that
//! joins the lines of one kill into an [`OomKill`].
//!
//! ```text
//! # 3.10 (CentOS 7), 4.x: the decision, then the victim (possibly a child of the chosen task)
//! Task in /kubepods/burstable/pod<uid>/<cid> killed as a result of limit of /kubepods/burstable/pod<uid>
//! memory: usage 16384kB, limit 16384kB, failcnt 97
//! Memory cgroup out of memory: Kill process 1234 (java) score 1000 or sacrifice child
//! Out of memory: Kill process 1234 (java) score 900 or sacrifice child
//! Killed process 1234 (java) total-vm:4318240kB, anon-rss:2061848kB, file-rss:0kB
//! # 4.19+: one summary line, then the kill
//! oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/ndtest,task_memcg=/ndtest,task=python3,pid=19701,uid=0
//! Memory cgroup out of memory: Killed process 19701 (python3) total-vm:118968kB, anon-rss:16104kB, ...
//! Out of memory: Killed process 812 (mysqld) total-vm:..., UID:27 pgtables:5328kB oom_score_adj:0
//! ```

/// Whether the whole node or one memory cgroup ran out of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OomKind {
    /// The node itself ran out of memory (`Out of memory: ...`, `CONSTRAINT_NONE`).
    System,
    /// A memory cgroup hit its limit (`Memory cgroup out of memory: ...`, `CONSTRAINT_MEMCG`).
    Cgroup,
}

impl OomKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OomKind::System => "oom_system",
            OomKind::Cgroup => "oom_cgroup",
        }
    }
}

/// One OOM-related kernel log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OomLine {
    /// `[Memory cgroup ]out of memory: Kill[ed] process N (comm)`. `decided` is true for the
    /// old `Kill process ... or sacrifice child` form, whose victim follows on its own line.
    Kill {
        kind: OomKind,
        pid: u32,
        comm: String,
        decided: bool,
    },
    /// Bare `Killed process N (comm) ...` (the victim line of old kernels).
    Victim { pid: u32, comm: String },
    /// The 4.19+ `oom-kill:` summary.
    Summary {
        kind: OomKind,
        oom_memcg: Option<String>,
        task_memcg: Option<String>,
        task: Option<String>,
        pid: Option<u32>,
    },
    /// Old kernels' `Task in <task_memcg> killed as a result of limit of <oom_memcg>`.
    TaskIn {
        task_memcg: String,
        oom_memcg: String,
    },
    /// `memory: usage NkB, limit NkB, failcnt N` (the memcg's usage at the kill).
    Usage { usage_kb: u64, limit_kb: u64 },
}

/// Matches one kernel log message; `None` when it is no OOM line we use.
pub fn parse(message: &str) -> Option<OomLine> {
    let m = message.trim();
    if let Some(rest) = m.strip_prefix("oom-kill:") {
        return Some(summary(rest));
    }
    if let Some(rest) = m.strip_prefix("Task in ") {
        let (task, oom) = rest.split_once(" killed as a result of limit of ")?;
        return Some(OomLine::TaskIn {
            task_memcg: task.trim().to_string(),
            oom_memcg: oom.trim().to_string(),
        });
    }
    if let Some(rest) = m.strip_prefix("memory: usage ") {
        let (usage, rest) = rest.split_once("kB, limit ")?;
        let (limit, _) = rest.split_once("kB")?;
        return Some(OomLine::Usage {
            usage_kb: usage.trim().parse().ok()?,
            limit_kb: limit.trim().parse().ok()?,
        });
    }
    if let Some(rest) = m.strip_prefix("Killed process ") {
        let (pid, comm) = pid_comm(rest)?;
        return Some(OomLine::Victim { pid, comm });
    }
    let (kind, rest) = if let Some(r) = m.strip_prefix("Memory cgroup out of memory") {
        (OomKind::Cgroup, r)
    } else if let Some(r) = m.strip_prefix("Out of memory") {
        // Also `Out of memory (oom_kill_allocating_task): Killed process ...`.
        (OomKind::System, r)
    } else {
        return None;
    };
    let (_, after) = rest.split_once(": ")?;
    let (decided, after) = if let Some(a) = after.strip_prefix("Killed process ") {
        (false, a)
    } else if let Some(a) = after.strip_prefix("Kill process ") {
        (true, a)
    } else {
        return None;
    };
    let (pid, comm) = pid_comm(after)?;
    Some(OomLine::Kill {
        kind,
        pid,
        comm,
        decided,
    })
}

/// `1234 (java) ...` -> (1234, "java"). The comm may contain spaces and parentheses; it ends
/// at the last `)` before ` total-vm`/` score` or the end.
fn pid_comm(s: &str) -> Option<(u32, String)> {
    let (pid, rest) = s.split_once(' ')?;
    let pid: u32 = pid.trim().parse().ok()?;
    let rest = rest.strip_prefix('(')?;
    let end = [") total-vm", ") score", "), "]
        .iter()
        .filter_map(|t| rest.find(t))
        .min()
        .or_else(|| rest.rfind(')'))?;
    Some((pid, rest[..end].to_string()))
}

fn summary(rest: &str) -> OomLine {
    let mut kind = OomKind::System;
    let (mut oom_memcg, mut task_memcg, mut task, mut pid) = (None, None, None, None);
    // Values never contain ',' except `nodemask=(null)`-like lists, which we do not use.
    for field in rest.split(',') {
        let (k, v) = field.split_once('=').unwrap_or((field, ""));
        match k.trim() {
            "constraint" if v == "CONSTRAINT_MEMCG" => kind = OomKind::Cgroup,
            "oom_memcg" => oom_memcg = Some(v.to_string()),
            "task_memcg" => task_memcg = Some(v.to_string()),
            "task" => task = Some(v.to_string()),
            "pid" => pid = v.parse().ok(),
            _ => {}
        }
    }
    OomLine::Summary {
        kind,
        oom_memcg,
        task_memcg,
        task,
        pid,
    }
}

/// One process killed by the OOM killer, with what the log said about its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomKill {
    pub kind: OomKind,
    pub pid: u32,
    pub comm: String,
    /// The victim's memory cgroup (`/kubepods/burstable/pod<uid>/<cid>`), when printed.
    pub task_memcg: Option<String>,
    /// The cgroup whose limit was hit (cgroup OOM), when printed.
    pub oom_memcg: Option<String>,
    /// The limit and usage of that cgroup (`memory: usage ..., limit ...`), in bytes.
    pub limit_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    /// Kernel log time of the kill (µs since boot).
    pub usec: u64,
}

/// The fields of an `oom-kill:` summary kept for the kill line that follows it.
#[derive(Debug, Clone)]
struct Summary {
    oom_memcg: Option<String>,
    task_memcg: Option<String>,
    pid: Option<u32>,
}

/// Joins consecutive OOM lines into kills. Context lines (summary, `Task in`, usage) are kept
/// until the kill line that follows them; the state is a handful of fields (bounded).
#[derive(Debug, Default, Clone)]
pub struct Assembler {
    summary: Option<Summary>,
    task_in: Option<(String, String)>,
    usage: Option<(u64, u64)>,
    /// An old-format decision waiting for its `Killed process` victim line.
    decided: Option<OomKill>,
}

impl Assembler {
    /// Feeds one message logged at `usec`; returns the kills it completes (at most two: a
    /// decision left without victim line, and the new kill).
    pub fn feed(&mut self, message: &str, usec: u64) -> Vec<OomKill> {
        let Some(line) = parse(message) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match line {
            OomLine::Summary {
                oom_memcg,
                task_memcg,
                pid,
                ..
            } => {
                out.extend(self.decided.take());
                self.summary = Some(Summary {
                    oom_memcg,
                    task_memcg,
                    pid,
                });
            }
            OomLine::TaskIn {
                task_memcg,
                oom_memcg,
            } => {
                out.extend(self.decided.take());
                self.task_in = Some((task_memcg, oom_memcg));
            }
            OomLine::Usage { usage_kb, limit_kb } => {
                out.extend(self.decided.take());
                self.usage = Some((usage_kb, limit_kb));
            }
            OomLine::Kill {
                kind,
                pid,
                comm,
                decided,
            } => {
                out.extend(self.decided.take());
                let kill = self.complete(kind, pid, comm, usec);
                if decided {
                    self.decided = Some(kill);
                } else {
                    out.push(kill);
                }
            }
            OomLine::Victim { pid, comm } => {
                if let Some(mut kill) = self.decided.take() {
                    // The victim may be a child of the chosen task: it is the one killed.
                    kill.pid = pid;
                    kill.comm = comm;
                    kill.usec = usec;
                    out.push(kill);
                }
            }
        }
        out
    }

    /// Takes a decision still waiting for its victim line (end of input).
    pub fn flush(&mut self) -> Option<OomKill> {
        self.decided.take()
    }

    fn complete(&mut self, kind: OomKind, pid: u32, comm: String, usec: u64) -> OomKill {
        let mut kill = OomKill {
            kind,
            pid,
            comm,
            task_memcg: None,
            oom_memcg: None,
            limit_bytes: None,
            usage_bytes: None,
            usec,
        };
        if let Some(sum) = self.summary.take() {
            // The summary names the same pid (4.19+); a stale one from another kill does not.
            if sum.pid.is_none() || sum.pid == Some(pid) {
                kill.task_memcg = sum.task_memcg;
                kill.oom_memcg = sum.oom_memcg;
            }
        }
        if let Some((task, oom)) = self.task_in.take() {
            kill.task_memcg = kill.task_memcg.or(Some(task));
            kill.oom_memcg = kill.oom_memcg.or(Some(oom));
        }
        if let Some((usage, limit)) = self.usage.take() {
            if kind == OomKind::Cgroup {
                kill.usage_bytes = Some(usage.saturating_mul(1024));
                kill.limit_bytes = Some(limit.saturating_mul(1024));
            }
        }
        if kill.oom_memcg.as_deref() == Some("") {
            kill.oom_memcg = None;
        }
        kill
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Kernel 6.18.44 (this VM), a cgroup v1 group with a 16 MiB limit.
    const K618_SUMMARY: &str = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/ndtest,task_memcg=/ndtest,task=python3,pid=19701,uid=0";
    const K618_KILL: &str = "Memory cgroup out of memory: Killed process 19701 (python3) total-vm:118968kB, anon-rss:16104kB, file-rss:6500kB, shmem-rss:0kB, UID:0 pgtables:88kB oom_score_adj:0";
    const K618_USAGE: &str = "memory: usage 16384kB, limit 16384kB, failcnt 97";

    #[test]
    fn new_format_cgroup_oom() {
        assert_eq!(
            parse(K618_KILL),
            Some(OomLine::Kill {
                kind: OomKind::Cgroup,
                pid: 19701,
                comm: "python3".into(),
                decided: false
            })
        );
        assert_eq!(
            parse(K618_USAGE),
            Some(OomLine::Usage {
                usage_kb: 16384,
                limit_kb: 16384
            })
        );
        let mut a = Assembler::default();
        assert!(a
            .feed(
                "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
                1
            )
            .is_empty());
        assert!(a.feed(K618_USAGE, 2).is_empty());
        assert!(a.feed(K618_SUMMARY, 3).is_empty());
        let k = a.feed(K618_KILL, 4);
        assert_eq!(
            k,
            vec![OomKill {
                kind: OomKind::Cgroup,
                pid: 19701,
                comm: "python3".into(),
                task_memcg: Some("/ndtest".into()),
                oom_memcg: Some("/ndtest".into()),
                limit_bytes: Some(16 << 20),
                usage_bytes: Some(16 << 20),
                usec: 4
            }]
        );
    }

    #[test]
    fn new_format_system_oom_names_pod_victim() {
        // Kernel 5.10 (Ubuntu 20.04 HWE): a global OOM whose victim runs in a pod.
        let mut a = Assembler::default();
        a.feed("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=cri-containerd-4d3c.scope,mems_allowed=0,global_oom,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e_2d3f.slice/cri-containerd-4d3c.scope,task=java,pid=4242,uid=1000", 10);
        let k = a.feed("Out of memory: Killed process 4242 (java) total-vm:8123456kB, anon-rss:6012345kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:12345kB oom_score_adj:969", 11);
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].kind, OomKind::System);
        assert_eq!(k[0].oom_memcg, None);
        assert!(k[0].task_memcg.as_deref().unwrap().contains("pod7c1e_2d3f"));
        assert_eq!(k[0].limit_bytes, None);
    }

    #[test]
    fn old_format_decision_then_child_victim() {
        // Kernel 3.10.0-957 (CentOS 7), the handbook's era.
        let mut a = Assembler::default();
        a.feed("Task in /kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e killed as a result of limit of /kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e", 1);
        a.feed("memory: usage 1048576kB, limit 1048576kB, failcnt 1204", 2);
        assert!(a
            .feed(
                "Memory cgroup out of memory: Kill process 1234 (sh) score 1000 or sacrifice child",
                3
            )
            .is_empty());
        let k = a.feed(
            "Killed process 1240 (java) total-vm:4318240kB, anon-rss:1040000kB, file-rss:0kB",
            4,
        );
        assert_eq!(k.len(), 1);
        assert_eq!((k[0].pid, k[0].comm.as_str()), (1240, "java"));
        assert_eq!(k[0].kind, OomKind::Cgroup);
        assert_eq!(
            k[0].task_memcg.as_deref(),
            Some("/kubepods/burstable/pod5d5b3b8a-6c1f/4d3c2b1a0f9e")
        );
        assert_eq!(k[0].limit_bytes, Some(1 << 30));
        // The handbook's system OOM line (old form) without a victim line yet: flushed.
        assert!(a
            .feed(
                "Out of memory: Kill process 812 (mysqld) score 901 or sacrifice child",
                5
            )
            .is_empty());
        let f = a.flush().unwrap();
        assert_eq!(
            (f.kind, f.pid, f.comm.as_str()),
            (OomKind::System, 812, "mysqld")
        );
        // A bare victim line without a decision is ignored.
        assert!(a.feed("Killed process 1 (x) total-vm:1kB", 6).is_empty());
    }

    #[test]
    fn comm_with_spaces_and_parens_and_allocating_task_form() {
        assert_eq!(
            parse("Out of memory (oom_kill_allocating_task): Killed process 77 (Web Content (x)) total-vm:1kB"),
            Some(OomLine::Kill {
                kind: OomKind::System,
                pid: 77,
                comm: "Web Content (x)".into(),
                decided: false
            })
        );
        assert_eq!(parse("Out of memory and no killable processes..."), None);
        assert_eq!(
            parse("oom_reaper: reaped process 19701 (python3), now anon-rss:0kB"),
            None
        );
    }

    #[test]
    fn stale_summary_of_another_pid_is_not_used() {
        let mut a = Assembler::default();
        a.feed(K618_SUMMARY, 1);
        let k = a.feed(
            "Memory cgroup out of memory: Killed process 5 (other) total-vm:1kB",
            2,
        );
        assert_eq!(k[0].task_memcg, None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let mut a = Assembler::default();
            let _ = a.feed(&s, 0);
        }
        #[test]
        fn never_panics_on_oom_like(s in "(Memory cgroup o|O)ut of memory[^:]{0,5}: Kill(ed)? process [0-9 ]{0,12}\\(?[a-z() ]{0,10}\\)?( total-vm| score)?.{0,10}") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_summary_like(s in "oom-kill:([a-z_]{0,10}=?[A-Za-z_/0-9()]{0,12},?){0,8}") {
            let _ = parse(&s);
        }
    }
}
