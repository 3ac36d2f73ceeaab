//! The limits of the hardware rules, apart from the judge that uses them.

use crate::kmsg::decay;

/// Thresholds of the hardware rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `hardware.memory_corrected`: corrected memory errors on one controller (or DIMM)
    /// within `corrected_window_seconds` that make a burst. mcelog's default DIMM threshold
    /// (`[dimm] ce-error-threshold = 10 / 24h`, mcelog.conf): below it ECC corrects
    /// occasional cosmic-ray flips that need nothing; at it a DIMM is degrading and the next
    /// error may be uncorrected. Also the count of CPER `corrected` records in the kernel-log
    /// lookback that makes `hardware.cper` warn.
    pub corrected_burst: u64,
    /// The window of `corrected_burst` (24 h, mcelog's).
    pub corrected_window_seconds: u64,
    /// `hardware.poisoned_pages`: `HardwareCorrupted` at or above this is critical (1 MiB =
    /// 256 pages of 4 KiB; each poisoned page is one the kernel took out of use after an
    /// uncorrected or repeatedly corrected error: a few are a failing cell, hundreds a failing
    /// DIMM).
    pub poisoned_critical_bytes: u64,
    /// `hardware.previous_crash`: a crash record at most this old (by its file's time: the
    /// boot after the crash) is news; older is history (24 h).
    pub crash_recent_seconds: u64,
    /// Kernel-log findings (machine checks, CPER, NVMe, I/O errors): at most this old is
    /// recent, older is history ([`decay::DEFAULT_RECENT_SECONDS`]).
    pub recent_seconds: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            corrected_burst: 10,
            corrected_window_seconds: 24 * 3600,
            poisoned_critical_bytes: 1 << 20,
            crash_recent_seconds: 24 * 3600,
            recent_seconds: decay::DEFAULT_RECENT_SECONDS,
        }
    }
}

impl Thresholds {
    /// Every threshold with its value, for the rule pages ([`crate::listing`]).
    pub fn listed(&self) -> crate::listing::Listed {
        use crate::listing as l;
        vec![
            l::setting("corrected_burst", self.corrected_burst.to_string()),
            l::setting(
                "corrected_window_seconds",
                l::seconds(self.corrected_window_seconds),
            ),
            l::setting(
                "poisoned_critical_bytes",
                l::bytes(self.poisoned_critical_bytes),
            ),
            l::setting(
                "crash_recent_seconds",
                l::seconds(self.crash_recent_seconds),
            ),
            l::setting("recent_seconds", l::seconds(self.recent_seconds)),
        ]
    }
}
