//! The limits the `dns` collector judges by. No handbook gives figures for DNS latency or
//! loss; these are ours, chosen against what a pod's resolver does (glibc: `timeout:5`,
//! `attempts:2`).

use crate::listing::{setting, Listed};

#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Probes kept per server for the window rules (`dns.five_second_delay`, `dns.slow`): at
    /// the default 15 s interval, 10 probes are two and a half minutes.
    pub window_probes: usize,
    /// `dns.five_second_delay`: this many probes of the window with a query answered only on
    /// its second try. One lost packet in ten probes is noise; two is a pattern.
    pub delay_min_probes: usize,
    /// `dns.slow`: the window's median answer time at or above this, in milliseconds.
    pub slow_ms: u64,
    /// `dns.slow`: judged only once the window holds this many answered probes.
    pub slow_min_probes: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            window_probes: 10,
            delay_min_probes: 2,
            slow_ms: 500,
            slow_min_probes: 5,
        }
    }
}

impl Thresholds {
    pub fn listed(&self) -> Listed {
        vec![
            setting("window_probes", format!("{} probes", self.window_probes)),
            setting(
                "delay_min_probes",
                format!("{} probes", self.delay_min_probes),
            ),
            setting("slow_ms", format!("{} ms", self.slow_ms)),
            setting(
                "slow_min_probes",
                format!("{} probes", self.slow_min_probes),
            ),
        ]
    }
}
