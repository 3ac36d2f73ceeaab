//! Which findings reach the cluster, and as what: problems that last become NodeConditions
//! (one per problem class), problems that happen become Events. The table is documented in
//! docs/kubernetes.md; a test checks that every id named here is a rule some collector has.

use collectors::{Evidence, Finding, Severity};

/// A lasting problem class: one NodeCondition.
#[derive(Debug, PartialEq, Eq)]
pub struct ConditionClass {
    /// node-doctor's own condition type (prefixed, so it never clashes with the kubelet's
    /// `DiskPressure`/`MemoryPressure`/`PIDPressure` or another agent's).
    pub ctype: &'static str,
    /// The reason while the class holds no problem.
    pub healthy_reason: &'static str,
    pub healthy_message: &'static str,
    /// node-problem-detector's condition type and healthy reason, used instead with
    /// `--kube-npd-names`.
    pub npd: Option<(&'static str, &'static str)>,
    /// Collectors whose findings feed the class: when none of them is running, the status is
    /// `Unknown`, never a healthy `False`.
    pub collectors: &'static [&'static str],
}

pub const FILESYSTEM_FULL: ConditionClass = ConditionClass {
    ctype: "NodeDoctorFilesystemFull",
    healthy_reason: "FilesystemHasSpace",
    healthy_message:
        "node-doctor: the runtime's and the kubelet's filesystems have space and inodes left",
    npd: None,
    collectors: &["disk"],
};
pub const READONLY_FILESYSTEM: ConditionClass = ConditionClass {
    ctype: "NodeDoctorReadonlyFilesystem",
    healthy_reason: "FilesystemIsNotReadOnly",
    healthy_message: "node-doctor: no filesystem was remounted read-only after an error",
    npd: Some(("ReadonlyFilesystem", "FilesystemIsNotReadOnly")),
    collectors: &["kernel"],
};
pub const KERNEL_DEADLOCK: ConditionClass = ConditionClass {
    ctype: "NodeDoctorKernelDeadlock",
    healthy_reason: "KernelHasNoDeadlock",
    healthy_message: "node-doctor: no container runtime or kubelet task is hung in the kernel",
    npd: Some(("KernelDeadlock", "KernelHasNoDeadlock")),
    collectors: &["kernel"],
};
pub const RUNTIME_UNHEALTHY: ConditionClass = ConditionClass {
    ctype: "NodeDoctorContainerRuntimeUnhealthy",
    healthy_reason: "ContainerRuntimeIsHealthy",
    healthy_message:
        "node-doctor: the container runtimes the node uses run and answer, and none of their tasks is hung",
    npd: Some(("ContainerRuntimeUnhealthy", "ContainerRuntimeIsHealthy")),
    collectors: &["kernel", "runtime"],
};
pub const KUBELET_UNHEALTHY: ConditionClass = ConditionClass {
    ctype: "NodeDoctorKubeletUnhealthy",
    healthy_reason: "KubeletIsHealthy",
    healthy_message:
        "node-doctor: the kubelet runs, its /healthz answers ok and none of its tasks is hung",
    npd: Some(("KubeletUnhealthy", "KubeletIsHealthy")),
    collectors: &["kernel", "runtime"],
};
/// node-problem-detector's `FrequentKubeletRestart` (its systemd monitor counts kubelet starts
/// in the journal); node-doctor counts the kubelet's process start-time changes instead
/// (`runtime.kubelet_restarts`, `serve` only — the reporter runs only there).
pub const FREQUENT_KUBELET_RESTART: ConditionClass = ConditionClass {
    ctype: "NodeDoctorFrequentKubeletRestart",
    healthy_reason: "NoFrequentKubeletRestart",
    healthy_message: "node-doctor: the kubelet has not restarted repeatedly in the last 30 minutes",
    npd: Some(("FrequentKubeletRestart", "NoFrequentKubeletRestart")),
    collectors: &["runtime"],
};
pub const MEMORY_PRESSURE: ConditionClass = ConditionClass {
    ctype: "NodeDoctorMemoryPressure",
    healthy_reason: "MemoryIsAvailable",
    healthy_message: "node-doctor: memory is neither exhausted nor fragmented",
    npd: None,
    collectors: &["memory"],
};
pub const PID_PRESSURE: ConditionClass = ConditionClass {
    ctype: "NodeDoctorPIDPressure",
    healthy_reason: "PIDsAreAvailable",
    healthy_message: "node-doctor: tasks are well below pid_max and threads-max",
    npd: None,
    collectors: &["kernel"],
};
pub const HIGH_LOAD: ConditionClass = ConditionClass {
    ctype: "NodeDoctorHighLoad",
    healthy_reason: "LoadIsNormal",
    healthy_message: "node-doctor: load, iowait and disk use are within their thresholds",
    npd: None,
    collectors: &["load"],
};
pub const CONNTRACK_PRESSURE: ConditionClass = ConditionClass {
    ctype: "NodeDoctorConntrackPressure",
    healthy_reason: "ConntrackIsHealthy",
    healthy_message: "node-doctor: the conntrack table has room and inserts do not race",
    npd: None,
    collectors: &["conntrack"],
};
pub const IPTABLES_UNHEALTHY: ConditionClass = ConditionClass {
    ctype: "NodeDoctorIptablesUnhealthy",
    healthy_reason: "IptablesIsHealthy",
    healthy_message: "node-doctor: the xtables lock is free, one iptables backend is in use, kube-proxy's rules apply",
    npd: None,
    collectors: &["iptables"],
};

/// Every condition class, in the order they are written.
pub const CONDITIONS: &[&ConditionClass] = &[
    &FILESYSTEM_FULL,
    &READONLY_FILESYSTEM,
    &KERNEL_DEADLOCK,
    &RUNTIME_UNHEALTHY,
    &KUBELET_UNHEALTHY,
    &FREQUENT_KUBELET_RESTART,
    &MEMORY_PRESSURE,
    &PID_PRESSURE,
    &HIGH_LOAD,
    &CONNTRACK_PRESSURE,
    &IPTABLES_UNHEALTHY,
];

impl ConditionClass {
    /// The condition type written, in the chosen naming.
    pub fn ctype(&self, npd: bool) -> &'static str {
        match (npd, self.npd) {
            (true, Some((t, _))) => t,
            _ => self.ctype,
        }
    }
    pub fn healthy_reason(&self, npd: bool) -> &'static str {
        match (npd, self.npd) {
            (true, Some((_, r))) => r,
            _ => self.healthy_reason,
        }
    }
}

/// A happening problem: an Event.
#[derive(Debug, PartialEq, Eq)]
pub struct EventClass {
    pub reason: &'static str,
    /// node-problem-detector's event reason (`--kube-npd-names`).
    pub npd_reason: Option<&'static str>,
    /// The evidence that counts occurrences in the finding's window.
    pub count_key: &'static str,
    /// The evidence that says how long ago the latest occurrence was.
    pub age_key: Option<&'static str>,
}

pub const OOM_KILL: EventClass = EventClass {
    reason: "NodeDoctorOOMKill",
    npd_reason: Some("OOMKilling"),
    count_key: "kills",
    age_key: Some("last_seen_seconds_ago"),
};
pub const SYSTEM_OOM: EventClass = EventClass {
    reason: "NodeDoctorSystemOOM",
    npd_reason: Some("OOMKilling"),
    count_key: "kills",
    age_key: Some("last_seen_seconds_ago"),
};
pub const TASK_HUNG: EventClass = EventClass {
    reason: "NodeDoctorTaskHung",
    npd_reason: Some("TaskHung"),
    count_key: "reports",
    age_key: Some("last_seen_seconds_ago"),
};
pub const FILESYSTEM_ERROR: EventClass = EventClass {
    reason: "NodeDoctorFilesystemError",
    // NPD's Ext4Error matches ext4's messages only: other filesystems keep our reason.
    npd_reason: Some("Ext4Error"),
    count_key: "errors",
    age_key: Some("last_seen_seconds_ago"),
};
pub const PAGE_ALLOCATION_FAILURE: EventClass = EventClass {
    reason: "NodeDoctorPageAllocationFailure",
    npd_reason: None,
    count_key: "failures_in_window",
    age_key: Some("last_failure_seconds_ago"),
};
pub const CONNTRACK_FULL: EventClass = EventClass {
    reason: "NodeDoctorConntrackFull",
    npd_reason: Some("ConntrackFull"),
    count_key: "table_full_messages",
    age_key: None,
};

/// Every event class (docs/kubernetes.md lists them; a test checks the list).
#[cfg(test)]
pub const EVENTS: &[&EventClass] = &[
    &OOM_KILL,
    &SYSTEM_OOM,
    &TASK_HUNG,
    &FILESYSTEM_ERROR,
    &PAGE_ALLOCATION_FAILURE,
    &CONNTRACK_FULL,
];

impl EventClass {
    pub fn reason(&self, npd: bool, f: &Finding) -> &'static str {
        match (npd, self.npd_reason) {
            (true, Some("Ext4Error")) if text(f, "fstype") != Some("ext4") => self.reason,
            (true, Some(r)) => r,
            _ => self.reason,
        }
    }
}

/// Finding ids the table names (a test checks each is a real rule).
#[cfg(test)]
pub const MAPPED_IDS: &[&str] = &[
    "disk.filesystem_full",
    "disk.inodes_exhausted",
    "kernel.fs_error",
    "kernel.hung_task",
    "kernel.oom_cgroup",
    "kernel.oom_system",
    "kernel.pid_exhaustion",
    "memory.exhaustion",
    "memory.fragmentation",
    "memory.page_allocation_failure",
    "load.high_load",
    "load.cpu_bound",
    "load.io_bound",
    "load.iowait",
    "conntrack.table_full",
    "conntrack.insert_races",
    "iptables.lock_contention",
    "iptables.lock_waiters",
    "iptables.lock_not_mounted",
    "iptables.backend_mismatch",
    "iptables.backend_mixed",
    "iptables.kube_proxy_lock_error",
    "iptables.kube_proxy_restore_failed",
    "runtime.not_running",
    "runtime.crashed",
    "runtime.hung",
    "runtime.unreachable",
    "runtime.kubelet_not_running",
    "runtime.kubelet_unhealthy",
    "runtime.kubelet_restarts",
];

fn text<'a>(f: &'a Finding, key: &str) -> Option<&'a str> {
    match f.evidence.get(key) {
        Some(Evidence::Str(s)) => Some(s.as_str()),
        _ => None,
    }
}

/// A number from the evidence.
pub fn number(f: &Finding, key: &str) -> Option<f64> {
    f.evidence.get(key).and_then(Evidence::as_f64)
}

/// The condition classes a finding sets to True, each with its problem reason. Info findings
/// never set a condition.
pub fn conditions_of(f: &Finding) -> Vec<(&'static ConditionClass, &'static str)> {
    if f.severity < Severity::Warning {
        return Vec::new();
    }
    let id = f.id.as_str();
    match id {
        "disk.filesystem_full" => vec![(&FILESYSTEM_FULL, "FilesystemFull")],
        "disk.inodes_exhausted" => vec![(&FILESYSTEM_FULL, "InodesExhausted")],
        "kernel.fs_error" if text(f, "read_only_now") == Some("true") => {
            vec![(&READONLY_FILESYSTEM, "FilesystemIsReadOnly")]
        }
        "kernel.hung_task" if text(f, "runtime_or_kubelet") == Some("true") => {
            let comm = text(f, "comm").unwrap_or(&f.subject);
            let mut out = vec![(
                &KERNEL_DEADLOCK,
                if comm.starts_with("docker") {
                    "DockerHung"
                } else {
                    "TaskHung"
                },
            )];
            if comm == "kubelet" {
                out.push((&KUBELET_UNHEALTHY, "KubeletHung"));
            } else if collectors::names::is_runtime(comm) {
                out.push((&RUNTIME_UNHEALTHY, "ContainerRuntimeHung"));
            }
            out
        }
        "runtime.not_running" => vec![(&RUNTIME_UNHEALTHY, "ContainerRuntimeNotRunning")],
        "runtime.crashed" => vec![(&RUNTIME_UNHEALTHY, "ContainerRuntimeCrashed")],
        "runtime.hung" => vec![(&RUNTIME_UNHEALTHY, "ContainerRuntimeHung")],
        "runtime.unreachable" => vec![(&RUNTIME_UNHEALTHY, "ContainerRuntimeUnreachable")],
        "runtime.kubelet_not_running" => vec![(&KUBELET_UNHEALTHY, "KubeletNotRunning")],
        "runtime.kubelet_unhealthy" => vec![(&KUBELET_UNHEALTHY, "KubeletHealthzFailed")],
        "runtime.kubelet_restarts" => {
            vec![(&FREQUENT_KUBELET_RESTART, "FrequentKubeletRestart")]
        }
        "kernel.pid_exhaustion" => vec![(&PID_PRESSURE, "PIDsExhausted")],
        "memory.exhaustion" => vec![(&MEMORY_PRESSURE, "MemoryExhausted")],
        "memory.fragmentation" => vec![(&MEMORY_PRESSURE, "MemoryFragmented")],
        "load.high_load" => vec![(&HIGH_LOAD, "LoadHigh")],
        "load.cpu_bound" => vec![(&HIGH_LOAD, "CPUBound")],
        "load.io_bound" | "load.iowait" => vec![(&HIGH_LOAD, "IOBound")],
        "conntrack.table_full" => vec![(&CONNTRACK_PRESSURE, "ConntrackTableFull")],
        "conntrack.insert_races" => vec![(&CONNTRACK_PRESSURE, "ConntrackInsertRaces")],
        "iptables.lock_contention" | "iptables.lock_waiters" | "iptables.lock_not_mounted" => {
            vec![(&IPTABLES_UNHEALTHY, "XtablesLockContention")]
        }
        "iptables.backend_mismatch" | "iptables.backend_mixed" => {
            vec![(&IPTABLES_UNHEALTHY, "IptablesBackendMismatch")]
        }
        "iptables.kube_proxy_lock_error" | "iptables.kube_proxy_restore_failed" => {
            vec![(&IPTABLES_UNHEALTHY, "KubeProxyRulesFailing")]
        }
        _ => Vec::new(),
    }
}

/// The event class of a happening finding, if it is one.
pub fn event_of(f: &Finding) -> Option<&'static EventClass> {
    match f.id.as_str() {
        "kernel.oom_cgroup" => Some(&OOM_KILL),
        "kernel.oom_system" => Some(&SYSTEM_OOM),
        "kernel.hung_task" => Some(&TASK_HUNG),
        "kernel.fs_error" if f.severity >= Severity::Warning => Some(&FILESYSTEM_ERROR),
        "memory.page_allocation_failure" => Some(&PAGE_ALLOCATION_FAILURE),
        "conntrack.table_full" if number(f, "table_full_messages").unwrap_or(0.0) > 0.0 => {
            Some(&CONNTRACK_FULL)
        }
        _ => None,
    }
}
