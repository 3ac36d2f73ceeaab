//! The limits of the gpu rules, apart from the judge that uses them.

/// Thresholds of the gpu rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `gpu.xid`: Xid lines of one GPU less than this apart are one burst (60 s): the driver
    /// prints a failure as a few lines within a second (an Xid, then 154, then 45 per
    /// channel), and a flood of one Xid as many lines a second; a new failure of the same GPU
    /// minutes later is a repeat.
    pub burst_gap_seconds: u64,
    /// `gpu.xid`: bursts within the window (or one burst now and one in an earlier boot) that
    /// make a repeat: a `watch`-class Xid then becomes critical, and a reset-class Xid's
    /// advice becomes "the reset did not fix it: hand the GPU to the vendor" (2: NVSentinel's
    /// and NVIDIA's own field guidance: the same error again after a reset is hardware).
    pub repeat_bursts: u64,
    /// `gpu.pcie_errors`: correctable AER errors per hour (between two readings of
    /// `aer_dev_correctable`) at or above which a link is degrading (60: one a minute; a
    /// healthy link has none for days).
    pub corrected_per_hour: f64,
    /// `gpu.pcie_errors`: and at least this many between the two readings (10), so one error
    /// in a short window is not a rate.
    pub corrected_min: u64,
    /// `gpu.pcie_errors`: corrected AER reports about one device in the kernel log within the
    /// window that warn (10; the kernel rate-limits these lines, so a few are already many).
    pub corrected_lines: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            burst_gap_seconds: 60,
            repeat_bursts: 2,
            corrected_per_hour: 60.0,
            corrected_min: 10,
            corrected_lines: 10,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("burst_gap_seconds", l::seconds(self.burst_gap_seconds)),
            l::setting("repeat_bursts", self.repeat_bursts.to_string()),
            l::setting("corrected_per_hour", format!("{}", self.corrected_per_hour)),
            l::setting("corrected_min", self.corrected_min.to_string()),
            l::setting("corrected_lines", self.corrected_lines.to_string()),
        ]
    }
}
