//! The transmit hangs seen in the kernel log, per interface, for the lookback window: counts
//! (a hang reported every few seconds is one entry), bursts (lines less than the burst gap
//! apart are one), the queues and the last line. Bounded: at most [`MAX_INTERFACES`]
//! interfaces, [`MAX_QUEUES`] queues each; an interface whose last line left the window is
//! dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::kmsg::Record;
use crate::proc::uptime::BootClock;

use super::sample::TxTimeouts;
use super::tx_lines::{TxKind, TxLine};

/// Most interfaces kept (the stalest goes first).
pub const MAX_INTERFACES: usize = 64;
/// Most queues listed per interface.
pub const MAX_QUEUES: usize = 8;
/// Longest line kept.
const MAX_LINE: usize = 300;

#[derive(Debug, Clone)]
struct Hang {
    driver: Option<String>,
    queues: Vec<u32>,
    events: u64,
    bursts: u64,
    ena: bool,
    last_usec: u64,
    line: String,
}

/// Per interface: its hangs in the window.
#[derive(Debug, Default)]
pub struct TxEvents {
    hangs: BTreeMap<String, Hang>,
    /// Lines recognised since start (a counter).
    pub total: u64,
}

impl TxEvents {
    /// Notes one recognised line of record `r`; lines more than `gap` after the interface's
    /// last one start a new burst.
    pub fn note(&mut self, line: TxLine, r: &Record, gap: Duration) {
        self.total = self.total.saturating_add(1);
        if !self.hangs.contains_key(&line.interface) && self.hangs.len() >= MAX_INTERFACES {
            self.drop_stalest();
        }
        let h = self.hangs.entry(line.interface).or_insert_with(|| Hang {
            driver: None,
            queues: Vec::new(),
            events: 0,
            bursts: 0,
            ena: false,
            last_usec: r.usec,
            line: String::new(),
        });
        let gap_usec = u64::try_from(gap.as_micros()).unwrap_or(u64::MAX);
        if h.events == 0 || r.usec.saturating_sub(h.last_usec) > gap_usec || r.usec < h.last_usec {
            h.bursts = h.bursts.saturating_add(1);
        }
        h.events = h.events.saturating_add(1);
        h.last_usec = h.last_usec.max(r.usec);
        h.driver = line.driver.or(h.driver.take());
        h.ena |= line.kind == TxKind::EnaMissing;
        if let Some(q) = line.queue {
            if !h.queues.contains(&q) && h.queues.len() < MAX_QUEUES {
                h.queues.push(q);
            }
        }
        h.line = crate::bounded::prefix_owned(r.message.trim(), MAX_LINE);
    }

    fn drop_stalest(&mut self) {
        let stalest = self
            .hangs
            .iter()
            .min_by_key(|(_, h)| h.last_usec)
            .map(|(k, _)| k.clone());
        if let Some(k) = stalest {
            self.hangs.remove(&k);
        }
    }

    /// Forgets the interfaces whose last line is older than `window`.
    pub fn prune(&mut self, clock: Option<&BootClock>, window: Duration) {
        if let Some(c) = clock {
            self.hangs.retain(|_, h| c.age(h.last_usec) <= window);
        }
    }

    /// The sample's view, by interface name.
    pub fn view(&self, clock: Option<&BootClock>) -> Vec<TxTimeouts> {
        self.hangs
            .iter()
            .map(|(name, h)| TxTimeouts {
                interface: name.clone(),
                driver: h.driver.clone(),
                queues: h.queues.clone(),
                events: h.events,
                bursts: h.bursts,
                ena: h.ena,
                last_seen_seconds_ago: clock.map(|c| c.age(h.last_usec).as_secs()),
                line: h.line.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tx_lines::parse;

    fn record(usec: u64, message: &str) -> Record {
        Record {
            seq: usec,
            usec,
            level: 2,
            facility: 0,
            message: message.into(),
            continuation: Vec::new(),
            fragment: false,
            timestamp: None,
        }
    }

    /// The r8125 lines of csrutil/OpenWrt-NIC-Drivers#11: two ports, eth4 hung twice 39 min
    /// apart (two bursts), eth1 once.
    #[test]
    fn counts_lines_and_bursts_per_interface() {
        let mut ev = TxEvents::default();
        for (t, m) in [
            (1356.296930, "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5010 ms"),
            (3651.381145, "r8125 0000:22:01.0 eth1: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5010 ms"),
            (3680.140984, "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5160 ms"),
            (3681.0, "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 1 timed out 5160 ms"),
        ] {
            let r = record((t * 1e6) as u64, m);
            ev.note(parse(m).unwrap(), &r, Duration::from_secs(60));
        }
        let v = ev.view(None);
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].interface.as_str(), v[0].events, v[0].bursts),
            ("eth1", 1, 1)
        );
        assert_eq!(
            (v[1].interface.as_str(), v[1].events, v[1].bursts),
            ("eth4", 3, 2)
        );
        assert_eq!(v[1].queues, vec![0, 1]);
        assert_eq!(v[1].driver.as_deref(), Some("r8125"));
        assert!(v[1].line.contains("queue 1"));
        assert_eq!(ev.total, 4);
    }

    #[test]
    fn keeps_at_most_the_cap_of_interfaces() {
        let mut ev = TxEvents::default();
        for i in 0..(MAX_INTERFACES as u64 + 5) {
            let m = format!("NETDEV WATCHDOG: eth{i} (igb): transmit queue 0 timed out");
            ev.note(parse(&m).unwrap(), &record(i, &m), Duration::from_secs(60));
        }
        let v = ev.view(None);
        assert_eq!(v.len(), MAX_INTERFACES);
        assert!(
            !v.iter().any(|t| t.interface == "eth0"),
            "the stalest went first"
        );
    }
}
