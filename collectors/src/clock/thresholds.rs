//! The limits of the clock rules, apart from the judge that uses them.

/// Thresholds of the clock rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `clock.unsynchronised` is not judged in the first this many seconds after boot: a time
    /// daemon needs a few polls (chronyd with `iburst` about 10 s, ntpd up to 10 min) before
    /// the kernel's clock is marked synchronised.
    pub boot_grace_seconds: u64,
    /// `clock.error_large`: a synchronised clock whose kernel error bound (`maxerror`) reached
    /// this many seconds. The kernel adds 0.5 ms to it every second without an update, so 4 s
    /// is about 2 h without word from the daemon (a daemon at its longest poll, 1024–2048 s,
    /// stays under 1.1 s); at 16 s the kernel marks the clock unsynchronised itself.
    pub max_error_seconds: f64,
    /// `clock.error_large`: the kernel PLL's remaining offset at or above this (seconds) and
    /// not shrinking since the previous run. 0.05 s is node_exporter's mixin's
    /// `NodeClockSkewDetected`.
    pub offset_seconds: f64,
    /// ... critical from this offset (seconds): TLS handshakes, token lifetimes and
    /// leader-election leases compare clocks across nodes at second granularity.
    pub offset_critical_seconds: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            boot_grace_seconds: 1200,
            max_error_seconds: 4.0,
            offset_seconds: 0.05,
            offset_critical_seconds: 1.0,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("boot_grace_seconds", l::seconds(self.boot_grace_seconds)),
            l::setting(
                "max_error_seconds",
                format!("{} s", l::num(self.max_error_seconds)),
            ),
            l::setting(
                "offset_seconds",
                format!("{} s", l::num(self.offset_seconds)),
            ),
            l::setting(
                "offset_critical_seconds",
                format!("{} s", l::num(self.offset_critical_seconds)),
            ),
        ]
    }
}
