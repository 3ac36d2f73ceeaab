//! Restarts of the node's daemons (the kubelet, dockerd, containerd, cri-dockerd): a process
//! of the name whose pid or start time differs from the one the last collection saw is a
//! restart, dated by its start time. What node-problem-detector's systemd monitor counts from
//! systemd's "Started …" / "Starting …" journal lines (`Frequent{Kubelet,Docker,Containerd}Restart`),
//! seen here from the processes themselves, so it works without systemd's journal too. A
//! daemon that restarts twice between two collections counts once: the interval (15 s) is
//! shorter than systemd's restart back-off with its default start limits.

use std::collections::{BTreeMap, VecDeque};

/// At most this many restart times are kept per daemon.
const MAX_RESTARTS: usize = 64;

/// The restarts seen, per daemon name.
#[derive(Debug, Default)]
pub struct Restarts {
    /// The process last seen: pid and start time in clock ticks.
    last: BTreeMap<&'static str, (u32, u64)>,
    /// Start times (seconds after boot) of the processes that replaced another.
    times: BTreeMap<&'static str, VecDeque<f64>>,
}

impl Restarts {
    /// Records the daemon's process now (`None`: not running; its last process is kept, so
    /// one that comes back counts as a restart). `ticks` is the clock-tick rate.
    pub fn observe(&mut self, name: &'static str, proc: Option<(u32, u64)>, ticks: f64) {
        let Some(now) = proc else {
            return;
        };
        if let Some(last) = self.last.insert(name, now) {
            if last != now {
                let times = self.times.entry(name).or_default();
                times.push_back(now.1 as f64 / ticks.max(1.0));
                while times.len() > MAX_RESTARTS {
                    times.pop_front();
                }
            }
        }
    }

    /// Forgets restarts older than `window` seconds before `uptime` (seconds since boot).
    pub fn prune(&mut self, uptime: Option<f64>, window: f64) {
        if let Some(up) = uptime {
            for times in self.times.values_mut() {
                times.retain(|s| up - s <= window);
            }
        }
    }

    /// The daemon's restarts in the window.
    pub fn count(&self, name: &str) -> u32 {
        self.times
            .get(name)
            .map_or(0, |t| u32::try_from(t.len()).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_pid_or_start_time_is_a_restart_and_old_ones_leave_the_window() {
        let mut r = Restarts::default();
        r.observe("dockerd", Some((100, 1_000)), 100.0);
        assert_eq!(r.count("dockerd"), 0, "the first sighting is no restart");
        r.observe("dockerd", Some((100, 1_000)), 100.0);
        assert_eq!(r.count("dockerd"), 0);
        // Gone for a while, then back with a new pid: one restart, dated by its start.
        r.observe("dockerd", None, 100.0);
        r.observe("dockerd", Some((200, 50_000)), 100.0);
        // Same pid reused, new start time: another.
        r.observe("dockerd", Some((200, 90_000)), 100.0);
        assert_eq!(r.count("dockerd"), 2);
        assert_eq!(r.count("containerd"), 0);
        // 500 s and 900 s after boot; at 1,000 s a 30-minute window keeps both, a
        // 5-minute one only the second.
        r.prune(Some(1_000.0), 1_800.0);
        assert_eq!(r.count("dockerd"), 2);
        r.prune(Some(1_000.0), 300.0);
        assert_eq!(r.count("dockerd"), 1);
        r.prune(None, 0.0);
        assert_eq!(r.count("dockerd"), 1, "no uptime, nothing forgotten");
    }
}
