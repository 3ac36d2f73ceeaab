//! The limits of the pressure rules, apart from the judge that uses them.
//!
//! PSI figures are the kernel's running averages (percent of wall time): memory and IO are
//! judged on `full` over 60 s, CPU on `some` over 300 s, so a finding rests on a minute (CPU:
//! five) of stall, not a burst; the rule's `raise_after` adds cycles on top.

/// Thresholds of the pressure rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `pressure.node_stall`/`pod_stall`, memory: `full avg60` at or above this share
    /// (percent) of the time all non-idle tasks stalled on memory warns (the brief of issue
    /// #30; Facebook's oomd kills at `full avg10` 60 % sustained), at or above the next is
    /// critical.
    pub memory_full_warning_percent: f64,
    pub memory_full_critical_percent: f64,
    /// IO: `full avg60`.
    pub io_full_warning_percent: f64,
    pub io_full_critical_percent: f64,
    /// CPU: `some avg300` (at node level `full` is always 0 before Linux 5.13 and means
    /// little after; `some` counts runnable tasks waiting for a CPU).
    pub cpu_some_warning_percent: f64,
    pub cpu_some_critical_percent: f64,
    /// `pressure.pod_throttled`: throttled periods per period (kubernetes-mixin's
    /// CPUThrottlingHigh: 25 %).
    pub pod_throttled_warning_percent: f64,
    /// `pressure.daemon_throttled`: the kubelet's or the runtime's CPU cgroup, warning and
    /// critical (a throttled kubelet misses its sync loop and PLEG deadlines).
    pub daemon_throttled_warning_percent: f64,
    pub daemon_throttled_critical_percent: f64,
    /// Throttling is judged only over at least this many enforcement periods in the window
    /// (100 ms each by default: 100 = 10 s of runnable time).
    pub min_periods: u64,
    /// `pressure.swap_in`: pages swapped in per second, warning and critical (256 pages/s of
    /// 4 KiB = 1 MiB/s: a working set re-read from swap continuously).
    pub swap_in_warning_pages_per_second: f64,
    pub swap_in_critical_pages_per_second: f64,
    /// ... and only when at least this many pages came in during the window.
    pub min_swap_in_pages: u64,
    /// At most this many pods are named per rule (the most affected).
    pub max_pods_named: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            memory_full_warning_percent: 10.0,
            memory_full_critical_percent: 30.0,
            io_full_warning_percent: 20.0,
            io_full_critical_percent: 50.0,
            cpu_some_warning_percent: 50.0,
            cpu_some_critical_percent: 80.0,
            pod_throttled_warning_percent: 25.0,
            daemon_throttled_warning_percent: 10.0,
            daemon_throttled_critical_percent: 50.0,
            min_periods: 100,
            swap_in_warning_pages_per_second: 256.0,
            swap_in_critical_pages_per_second: 2560.0,
            min_swap_in_pages: 1000,
            max_pods_named: 3,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting(
                "memory_full_warning_percent",
                l::percent(self.memory_full_warning_percent),
            ),
            l::setting(
                "memory_full_critical_percent",
                l::percent(self.memory_full_critical_percent),
            ),
            l::setting(
                "io_full_warning_percent",
                l::percent(self.io_full_warning_percent),
            ),
            l::setting(
                "io_full_critical_percent",
                l::percent(self.io_full_critical_percent),
            ),
            l::setting(
                "cpu_some_warning_percent",
                l::percent(self.cpu_some_warning_percent),
            ),
            l::setting(
                "cpu_some_critical_percent",
                l::percent(self.cpu_some_critical_percent),
            ),
            l::setting(
                "pod_throttled_warning_percent",
                l::percent(self.pod_throttled_warning_percent),
            ),
            l::setting(
                "daemon_throttled_warning_percent",
                l::percent(self.daemon_throttled_warning_percent),
            ),
            l::setting(
                "daemon_throttled_critical_percent",
                l::percent(self.daemon_throttled_critical_percent),
            ),
            l::setting("min_periods", self.min_periods.to_string()),
            l::setting(
                "swap_in_warning_pages_per_second",
                l::num(self.swap_in_warning_pages_per_second),
            ),
            l::setting(
                "swap_in_critical_pages_per_second",
                l::num(self.swap_in_critical_pages_per_second),
            ),
            l::setting("min_swap_in_pages", self.min_swap_in_pages.to_string()),
            l::setting("max_pods_named", self.max_pods_named.to_string()),
        ]
    }

    /// The line, window and warning/critical limits a resource is judged by.
    pub fn stall(&self, r: super::sample::Resource) -> Stall {
        use super::sample::Resource::*;
        match r {
            Memory => Stall {
                full: true,
                window: Window::Avg60,
                warning: self.memory_full_warning_percent,
                critical: self.memory_full_critical_percent,
            },
            Io => Stall {
                full: true,
                window: Window::Avg60,
                warning: self.io_full_warning_percent,
                critical: self.io_full_critical_percent,
            },
            Cpu => Stall {
                full: false,
                window: Window::Avg300,
                warning: self.cpu_some_warning_percent,
                critical: self.cpu_some_critical_percent,
            },
        }
    }
}

/// Which PSI average a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Avg60,
    Avg300,
}

/// How one resource is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    /// `full` (else `some`).
    pub full: bool,
    pub window: Window,
    pub warning: f64,
    pub critical: f64,
}
