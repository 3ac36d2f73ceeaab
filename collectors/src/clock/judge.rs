//! The clock rules: a typed [`ClockSample`] -> drafts (id, severity, subject, evidence,
//! conditions) under the [`Thresholds`]. Their words are in `collectors/rules/clock.toml`.
//! Pure: testable without a kernel.
//!
//! - `clock.unsynchronised`: the kernel says the clock is not synchronised (`STA_UNSYNC`),
//!   after the boot grace period. node_exporter's mixin (`NodeClockNotSynchronising`) and
//!   Netdata (`system_clock_sync_state`) alert on the same bit.
//! - `clock.error_large`: synchronised, but the kernel's error bound has grown (the daemon has
//!   not updated it for hours) or the PLL's offset is large and not shrinking.

use crate::finding::Severity;
use crate::rules::Draft;

use super::sample::{ClockSample, TimeDaemon};
use super::thresholds::Thresholds;

/// The subject of every clock finding: there is one clock.
const SUBJECT: &str = "system clock";

/// Applies the clock rules.
pub fn judge(sample: &ClockSample, t: &Thresholds) -> Vec<Draft> {
    if !sample.timex.synchronised() {
        return unsynchronised(sample, t).into_iter().collect();
    }
    error_large(sample, t).into_iter().collect()
}

/// Whether the boot grace period is over (an unknown uptime counts as over).
pub fn past_grace(sample: &ClockSample, t: &Thresholds) -> bool {
    sample
        .uptime_seconds
        .is_none_or(|u| u >= t.boot_grace_seconds as f64)
}

fn unsynchronised(sample: &ClockSample, t: &Thresholds) -> Option<Draft> {
    if !past_grace(sample, t) {
        return None;
    }
    let x = &sample.timex;
    let d = Draft::new("clock.unsynchronised", Severity::Warning)
        .subject(SUBJECT)
        .evidence("status", x.flags())
        .evidence("clock_state", x.state_name())
        .evidence("max_error_seconds", x.max_error_seconds)
        .evidence("est_error_seconds", x.est_error_seconds)
        .evidence_opt("uptime_seconds", sample.uptime_seconds)
        .evidence("boot_grace_seconds", t.boot_grace_seconds);
    Some(with_daemons(d, sample.daemons.as_deref()))
}

fn error_large(sample: &ClockSample, t: &Thresholds) -> Option<Draft> {
    let x = &sample.timex;
    let offset = x.offset_seconds.abs();
    // A correction under way shrinks the offset run after run; one that stays or grows is a
    // clock the daemon cannot steer (the mixin's `deriv(offset) >= 0`).
    let not_shrinking = sample
        .previous_offset_seconds
        .is_none_or(|p| offset >= p.abs());
    let offset_large = offset >= t.offset_seconds && not_shrinking;
    let bound_large = x.max_error_seconds >= t.max_error_seconds;
    if !offset_large && !bound_large {
        return None;
    }
    let severity = if offset_large && offset >= t.offset_critical_seconds {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let d = Draft::new("clock.error_large", severity)
        .subject(SUBJECT)
        .evidence("status", x.flags())
        .evidence("max_error_seconds", x.max_error_seconds)
        .evidence("est_error_seconds", x.est_error_seconds)
        .evidence("offset_seconds", x.offset_seconds)
        .evidence("max_error_threshold_seconds", t.max_error_seconds)
        .evidence("offset_threshold_seconds", t.offset_seconds)
        .when_if("offset_large", offset_large)
        .when_if("bound_large", bound_large);
    Some(with_daemons(d, sample.daemons.as_deref()))
}

/// The daemons found (evidence `time_daemons`, one condition per kind), or `no_daemon` when
/// the table was read and none runs. Not looked for: neither.
fn with_daemons(d: Draft, daemons: Option<&[TimeDaemon]>) -> Draft {
    let Some(found) = daemons else {
        return d;
    };
    if found.is_empty() {
        return d.evidence("time_daemons", "none").when("no_daemon");
    }
    let names: Vec<String> = found
        .iter()
        .map(|p| format!("{} (pid {})", p.comm, p.pid))
        .collect();
    let mut d = d.evidence("time_daemons", names.join(", "));
    for p in found {
        d = d.when(p.kind.condition());
    }
    d
}

#[cfg(test)]
mod tests;
