//! The limits of the conntrack rules: the collector's tunables, apart from the judge that uses
//! them.

/// Thresholds of the conntrack rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Table fill (entries / nf_conntrack_max) at which `conntrack.table_full` warns.
    pub table_warning_percent: f64,
    /// Table fill at which it is critical.
    pub table_critical_percent: f64,
    /// Consecutive samples with lost insert races before `conntrack.insert_races` turns
    /// critical (4 samples = one minute at the agent's 15 s interval).
    pub races_critical_samples: u32,
    /// A "table full" kernel message at most this old keeps `conntrack.table_full`
    /// critical, whatever the table looks like now (the kernel dropped packets that
    /// recently; two minutes = eight samples at 15 s).
    pub log_critical_seconds: f64,
    /// A message at most this old (and older than `log_critical_seconds`) leaves a warning
    /// when nothing else is wrong; older ones leave info until they leave the kernel-log
    /// window (`--kmsg-lookback`).
    ///
    /// It is also how long another network namespace's table stays a warning once no process
    /// is left in it (its pod deleted, or its sandbox recreated): packets were dropped that
    /// recently, and a controller's replacement pod, in a new namespace, tends to fill its
    /// table the same way; only the critical step is left out, as nothing is left to read or
    /// act on in that namespace. Ten minutes (40 samples at 15 s) is the node's own table's
    /// warning window, so both decay alike, and it outlasts the kubelet's longest restart
    /// back-off (5 min): a workload that fills its table again on its next start keeps one
    /// warning instead of falling to info in between.
    pub log_warning_seconds: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            table_warning_percent: 75.0,
            table_critical_percent: 90.0,
            races_critical_samples: 4,
            log_critical_seconds: 120.0,
            log_warning_seconds: 600.0,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting(
                "table_warning_percent",
                l::percent(self.table_warning_percent),
            ),
            l::setting(
                "table_critical_percent",
                l::percent(self.table_critical_percent),
            ),
            l::setting(
                "races_critical_samples",
                self.races_critical_samples.to_string(),
            ),
            l::setting(
                "log_critical_seconds",
                l::duration(std::time::Duration::from_secs_f64(
                    self.log_critical_seconds.max(0.0),
                )),
            ),
            l::setting(
                "log_warning_seconds",
                l::duration(std::time::Duration::from_secs_f64(
                    self.log_warning_seconds.max(0.0),
                )),
            ),
        ]
    }
}
