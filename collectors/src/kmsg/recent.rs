//! A bounded window of recent kernel-log events of one kind.

use std::time::Duration;

use crate::proc::uptime::BootClock;

/// A bounded window of recent kernel-log events of one kind (their record times), for rules
/// that fire on "N events within the lookback window" and export a running total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentEvents {
    /// Record times (µs since boot), oldest first; at most `capacity`.
    times: std::collections::VecDeque<u64>,
    capacity: usize,
    total: u64,
}

impl RecentEvents {
    pub fn new(capacity: usize) -> RecentEvents {
        RecentEvents {
            times: std::collections::VecDeque::new(),
            capacity: capacity.max(1),
            total: 0,
        }
    }

    /// Notes one event at a record time.
    pub fn record(&mut self, usec: u64) {
        if self.times.len() == self.capacity {
            self.times.pop_front();
        }
        self.times.push_back(usec);
        self.total = self.total.saturating_add(1);
    }

    /// Forgets events older than `window` by the boot clock.
    pub fn prune(&mut self, clock: &BootClock, window: Duration) {
        while let Some(&t) = self.times.front() {
            if clock.age(t) > window {
                self.times.pop_front();
            } else {
                break;
            }
        }
    }

    /// Events still in the window (capped at the capacity).
    pub fn recent(&self) -> u64 {
        self.times.len() as u64
    }

    /// Events seen since construction (a counter).
    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod recent_events_tests {
    use super::*;
    use crate::proc::uptime::Uptime;
    use std::time::SystemTime;

    #[test]
    fn window_prunes_old_events_and_total_keeps_counting() {
        let mut ev = RecentEvents::new(3);
        for t in [1_000_000u64, 500_000_000, 900_000_000, 990_000_000] {
            ev.record(t);
        }
        assert_eq!((ev.recent(), ev.total()), (3, 4));
        // Boot clock at 1000 s uptime: events at 500 s, 900 s, 990 s; window 200 s keeps two.
        let clock = BootClock::new(
            Uptime {
                since_boot: Duration::from_secs(1000),
            },
            SystemTime::now(),
        );
        ev.prune(&clock, Duration::from_secs(200));
        assert_eq!((ev.recent(), ev.total()), (2, 4));
    }
}
