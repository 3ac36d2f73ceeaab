//! The limits of the load rules and the bars below them at which a run reads per-process
//! detail: the collector's tunables, apart from the judge and the escalation that use them.

/// Thresholds of the load rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `load.high_load` warning when load1 ≥ this × online CPUs on the last two samples.
    pub load_warning_per_cpu: f64,
    /// `load.high_load` critical when load1 ≥ this × online CPUs on the last two samples.
    pub load_critical_per_cpu: f64,
    /// `load.iowait` info above this share of CPU time in iowait, sustained over two windows
    /// (the handbook: `wa` normally 0%, steadily above 1% means storage cannot keep up).
    pub iowait_info_percent: f64,
    pub iowait_warning_percent: f64,
    pub iowait_critical_percent: f64,
    /// `load.io_bound` (at least warning) when a disk is busy ≥ this share of the window.
    pub disk_busy_percent: f64,
    /// `load.io_bound` without a saturated disk when `/proc/pressure/io` full avg10 ≥ this.
    pub psi_io_full_percent: f64,
    /// `load.io_bound` without a saturated disk when D-state tasks ≥ this × CPUs on two samples.
    pub blocked_per_cpu: f64,
    /// `load.cpu_bound` when user+nice+system+irq+softirq ≥ this share of all CPU time.
    pub cpu_busy_percent: f64,
    /// A process is named as a culprit only when it is material: at least this share of the
    /// window's total (IO wait, IO bytes or CPU over all processes)...
    pub culprit_min_share_percent: f64,
    /// ...and at least this IO wait (percent of the window, as iotop's `IO>`, or of the
    /// D-state samples)...
    pub culprit_min_io_wait_percent: f64,
    /// ...or this many storage bytes per second (read + written; 64 KiB/s: the handbook's
    /// mysqld wrote 136.5 KB/s on its saturated disk)...
    pub culprit_min_io_bytes_per_second: f64,
    /// ...or, for CPU, this share of one CPU.
    pub culprit_min_cpu_percent: f64,
    /// The low bars of the whole-node signals above which a run reads per-process detail
    /// (which processes are behind a finding); below all of them no rule can fire.
    pub escalation: Escalation,
    /// The dead band of `io_bound`, `iowait` and `host_process`: the lower levels that keep a
    /// finding the previous window reported.
    pub hold: Hold,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            load_warning_per_cpu: 2.0,
            load_critical_per_cpu: 4.0,
            iowait_info_percent: 1.0,
            iowait_warning_percent: 10.0,
            iowait_critical_percent: 30.0,
            disk_busy_percent: 90.0,
            psi_io_full_percent: 20.0,
            blocked_per_cpu: 1.0,
            cpu_busy_percent: 90.0,
            culprit_min_share_percent: 10.0,
            culprit_min_io_wait_percent: 10.0,
            culprit_min_io_bytes_per_second: 64.0 * 1024.0,
            culprit_min_cpu_percent: 10.0,
            escalation: Escalation::default(),
            hold: Hold::default(),
        }
    }
}

/// The dead band of the rules a steady IO load keeps near their limits (`io_bound`, `iowait`,
/// `host_process`): a finding is raised at its rule's limit, and once the previous window
/// reported it (same rule, same subject), it is kept while its figure stays at or above a
/// lower level, so a figure hovering around a limit does not raise, clear and raise the
/// finding again (issue 28: fio writing steadily to a throttled loop device flipped
/// `io_bound` three times in 40 polls). A clear drop still clears it. Every hold level is at
/// or above the escalation bar of the same signal (`Escalation`), and a held finding needs
/// the previous window's report, which escalates the run anyway (`Reason::FindingReported`).
/// `serve`'s `raise_after`/`clear_after` count cycles on top of this (the rule file).
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// `io_bound` on a disk: kept while the disk is busy ≥ this share of `disk_busy_percent`
    /// (0.8: 72% at the default 90%).
    pub disk_busy_share: f64,
    /// `io_bound` without a busy disk: kept while PSI io `full` avg10 ≥ this share of
    /// `psi_io_full_percent` (0.5: 10% at the default 20%)...
    pub psi_io_full_share: f64,
    /// ...or D-state tasks ≥ this share of its limit (`blocked_per_cpu` × CPUs, at least 1)
    /// on this sample and the previous one (0.5)...
    pub blocked_share: f64,
    /// ...or PSI io `some` avg10 ≥ this many percent (20): tasks still stall on IO a fifth of
    /// the time, while runnable work on the other CPUs keeps `full` (all non-idle tasks
    /// stalled) and iowait (idle time with IO outstanding) low. Also keeps `iowait` at info.
    pub psi_io_some_percent: f64,
    /// `iowait`: a severity is kept while iowait stays above this share of that severity's
    /// limit (0.5: info above 0.5%, warning above 5%, critical above 15% at 1/10/30%).
    pub iowait_share: f64,
    /// `host_process`: a process it named stays named while it is among the IO or CPU
    /// candidates at this share of the culprit floors (0.5: 5% IO wait or 32 KiB/s, or 5% of
    /// a CPU, and 5% of the window's total) and a pressing finding is reported.
    pub culprit_share: f64,
}

impl Default for Hold {
    fn default() -> Self {
        Hold {
            disk_busy_share: 0.8,
            psi_io_full_share: 0.5,
            blocked_share: 0.5,
            psi_io_some_percent: 20.0,
            iowait_share: 0.5,
            culprit_share: 0.5,
        }
    }
}

impl Hold {
    /// No dead band: every finding is judged on its limits alone.
    pub fn none() -> Self {
        Hold {
            disk_busy_share: 1.0,
            psi_io_full_share: 1.0,
            blocked_share: 1.0,
            psi_io_some_percent: f64::INFINITY,
            iowait_share: 1.0,
            culprit_share: 1.0,
        }
    }
}

/// The low bars of the whole-node signals above which a run reads per-process detail. Each is
/// a share of the limit of the rule the signal feeds (so lowering a rule's limit lowers its
/// bar), except the PSI `some` bar, which no rule uses (an early sign of contention).
#[derive(Debug, Clone, PartialEq)]
pub struct Escalation {
    /// load1 per online CPU ≥ this share of [`Thresholds::load_warning_per_cpu`] (`high_load`;
    /// the lower of the warning and critical limits, should they be set the wrong way round).
    pub load_share: f64,
    /// load1 ≥ the CPU count while the CPUs are busy ≥ this share of
    /// [`Thresholds::cpu_busy_percent`] (`cpu_bound`; at the default limits the load bar,
    /// 1.0 per CPU, is reached first).
    pub cpu_busy_share: f64,
    /// iowait over the window ≥ this share of [`Thresholds::iowait_info_percent`] (`iowait`;
    /// the lowest of its three limits).
    pub iowait_share: f64,
    /// A whole disk busy ≥ this share of [`Thresholds::disk_busy_percent`] (`io_bound`).
    pub disk_busy_share: f64,
    /// PSI io `full` avg10 ≥ this share of [`Thresholds::psi_io_full_percent`] (`io_bound`).
    pub psi_io_full_share: f64,
    /// PSI cpu or io `some` avg10 ≥ this many percent (no rule: tasks already wait for a CPU
    /// or for IO a tenth of the time, before load1, a one-minute average, shows it).
    pub psi_some_avg10_percent: f64,
    /// `procs_blocked` ≥ this on this sample and the previous one (`io_bound` without a busy
    /// disk needs D-state tasks ≥ the CPU count, at least 1, on both).
    pub procs_blocked: u64,
    /// How long the catch-up pass waits: when a run escalates and the previous one read no
    /// per-process detail (the onset of trouble within one interval), the processes are
    /// read twice this far apart (at most a quarter of the window), and the culprits are
    /// measured over that span.
    pub catch_up: std::time::Duration,
    /// The bars of a run without a window (the first) whose next run must measure the
    /// culprits over its whole window: `check`'s first sample ([`Escalation::at_the_limits`]).
    /// `None` (`serve`): the first run uses the bars above.
    pub baseline: Option<Baseline>,
}

/// When a run without a window takes a baseline of every process for the next run: when its
/// one sample shows IO trouble may be at hand (tasks blocked on IO, PSI io). The run then
/// reads `stat` and `io` of every process (and the cgroups' counters), so that the next run, should it escalate, names the culprits
/// from their counters over its whole window. Without it, that run catches up ([`crate::load`]'s onset pass), whose survey ranks processes by state and
/// CPU time and reads no `io`: it finds CPU culprits (every CPU finding needs load1 at the CPU
/// count, and the busiest on a CPU are running when surveyed), not a writer that is neither
/// busy on a CPU nor blocked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    /// PSI io `full` avg10 ≥ this share of [`Thresholds::psi_io_full_percent`].
    pub psi_io_full_share: f64,
    /// PSI io `some` avg10 ≥ this many percent.
    pub psi_io_some_avg10_percent: f64,
    /// `procs_blocked` ≥ this on the one sample.
    pub procs_blocked: u64,
}

impl Default for Escalation {
    fn default() -> Self {
        Escalation {
            load_share: 0.5,
            cpu_busy_share: 0.5,
            iowait_share: 0.5,
            disk_busy_share: 0.5,
            psi_io_full_share: 0.5,
            psi_some_avg10_percent: 10.0,
            procs_blocked: 1,
            catch_up: std::time::Duration::from_secs(1),
            baseline: None,
        }
    }
}

impl Escalation {
    /// Bars no host reaches: per-process detail is never read (benches of the quiet path).
    pub fn never() -> Self {
        Escalation {
            load_share: f64::INFINITY,
            cpu_busy_share: f64::INFINITY,
            iowait_share: f64::INFINITY,
            disk_busy_share: f64::INFINITY,
            psi_io_full_share: f64::INFINITY,
            psi_some_avg10_percent: f64::INFINITY,
            procs_blocked: u64::MAX,
            ..Escalation::default()
        }
    }

    /// `check`'s bars: its second sample is its last, so a run with a window reads the
    /// processes only when that window can raise a finding that names them: each bar at its
    /// rule's limit (share 1), and no PSI `some` bar, which feeds no rule (a bar below the
    /// limit only gives the next run a baseline and keeps culprits current while trouble
    /// builds). Every finding still implies a bar (the property test
    /// `every_finding_implies_escalation` runs with these too); `procs_blocked` and
    /// `catch_up` are kept. The first sample, which has no window and is followed by the
    /// second, reads every process for it when its IO signs reach this escalation's bars
    /// (PSI io; `procs_blocked` on its one sample): its [`Baseline`].
    pub fn at_the_limits(&self) -> Self {
        Escalation {
            load_share: 1.0,
            cpu_busy_share: 1.0,
            iowait_share: 1.0,
            disk_busy_share: 1.0,
            psi_io_full_share: 1.0,
            psi_some_avg10_percent: f64::INFINITY,
            baseline: Some(Baseline {
                psi_io_full_share: self.psi_io_full_share,
                psi_io_some_avg10_percent: self.psi_some_avg10_percent,
                procs_blocked: self.procs_blocked,
            }),
            ..self.clone()
        }
    }

    /// Bars every host reaches: per-process detail on every run, as before escalation.
    pub fn always() -> Self {
        Escalation {
            load_share: 0.0,
            ..Escalation::default()
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        let mut out = vec![
            l::setting("load_warning_per_cpu", l::num(self.load_warning_per_cpu)),
            l::setting("load_critical_per_cpu", l::num(self.load_critical_per_cpu)),
            l::setting("iowait_info_percent", l::percent(self.iowait_info_percent)),
            l::setting(
                "iowait_warning_percent",
                l::percent(self.iowait_warning_percent),
            ),
            l::setting(
                "iowait_critical_percent",
                l::percent(self.iowait_critical_percent),
            ),
            l::setting("disk_busy_percent", l::percent(self.disk_busy_percent)),
            l::setting("psi_io_full_percent", l::percent(self.psi_io_full_percent)),
            l::setting("blocked_per_cpu", l::num(self.blocked_per_cpu)),
            l::setting("cpu_busy_percent", l::percent(self.cpu_busy_percent)),
            l::setting(
                "culprit_min_share_percent",
                l::percent(self.culprit_min_share_percent),
            ),
            l::setting(
                "culprit_min_io_wait_percent",
                l::percent(self.culprit_min_io_wait_percent),
            ),
            l::setting(
                "culprit_min_io_bytes_per_second",
                format!(
                    "{}/s",
                    l::bytes(self.culprit_min_io_bytes_per_second.max(0.0) as u64)
                ),
            ),
            l::setting(
                "culprit_min_cpu_percent",
                l::percent(self.culprit_min_cpu_percent),
            ),
            l::setting("escalation.load_share", l::num(self.escalation.load_share)),
            l::setting(
                "escalation.cpu_busy_share",
                l::num(self.escalation.cpu_busy_share),
            ),
            l::setting(
                "escalation.iowait_share",
                l::num(self.escalation.iowait_share),
            ),
            l::setting(
                "escalation.disk_busy_share",
                l::num(self.escalation.disk_busy_share),
            ),
            l::setting(
                "escalation.psi_io_full_share",
                l::num(self.escalation.psi_io_full_share),
            ),
            l::setting(
                "escalation.psi_some_avg10_percent",
                l::percent(self.escalation.psi_some_avg10_percent),
            ),
            l::setting(
                "escalation.procs_blocked",
                self.escalation.procs_blocked.to_string(),
            ),
            l::setting("escalation.catch_up", l::duration(self.escalation.catch_up)),
            l::setting("hold.disk_busy_share", l::num(self.hold.disk_busy_share)),
            l::setting(
                "hold.psi_io_full_share",
                l::num(self.hold.psi_io_full_share),
            ),
            l::setting("hold.blocked_share", l::num(self.hold.blocked_share)),
            l::setting(
                "hold.psi_io_some_percent",
                l::percent(self.hold.psi_io_some_percent),
            ),
            l::setting("hold.iowait_share", l::num(self.hold.iowait_share)),
            l::setting("hold.culprit_share", l::num(self.hold.culprit_share)),
        ];
        // `check`'s first run: when it reads every process for the second ([`Baseline`]).
        out.extend(match &self.escalation.baseline {
            None => vec![l::setting(
                "escalation.baseline",
                "none: the first run uses the bars above".to_string(),
            )],
            Some(b) => vec![
                l::setting(
                    "escalation.baseline.psi_io_full_share",
                    l::num(b.psi_io_full_share),
                ),
                l::setting(
                    "escalation.baseline.psi_io_some_avg10_percent",
                    l::percent(b.psi_io_some_avg10_percent),
                ),
                l::setting(
                    "escalation.baseline.procs_blocked",
                    b.procs_blocked.to_string(),
                ),
            ],
        });
        out
    }
}
