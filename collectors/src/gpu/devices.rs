//! The PCIe devices the collector watches: found by one walk of `/sys/bus/pci/devices`
//! (vendor and class of each, then the port above each device that carries work), kept until
//! the next walk; read on each sweep (AER counters, current link) with rises computed against
//! the previous sweep. A device with neither AER counters nor link files (virtio, legacy PCI)
//! is not watched: a node with none watches nothing and reads nothing per cycle.

use std::collections::BTreeMap;

use crate::error::ReadError;
use crate::host::HostPaths;

use super::lines::Bdf;
use super::pci::{self, AerCounts, Kind};
use super::sample::{AerDelta, DeviceState};

/// A device found by the walk.
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    pub bdf: Bdf,
    pub kind: Kind,
    pub below: Option<(Kind, Bdf)>,
    pub has_aer: bool,
    pub has_link: bool,
    /// The most the link can train at: the smaller of the device's and its port's.
    pub max_speed: Option<f64>,
    pub max_width: Option<u32>,
}

/// What one walk found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovery {
    /// NVIDIA GPUs on the bus (watched or not).
    pub gpus: Vec<Bdf>,
    /// Devices with AER counters or link files.
    pub watched: Vec<Watched>,
    /// Devices listed.
    pub listed: usize,
}

fn min_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y < x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A device found by the walk: its kind, the device below it (for a port) and its port.
type Found = (Kind, Option<(Kind, Bdf)>, Option<Bdf>);

/// Walks `/sys/bus/pci/devices` once.
pub fn discover(host: &HostPaths) -> Result<Discovery, ReadError> {
    let listed = pci::list(host)?;
    let mut d = Discovery {
        listed: listed.len(),
        ..Discovery::default()
    };
    // Each device that carries work, and the port above it (whose AER counters see the
    // link's errors from the other end).
    let mut found: BTreeMap<Bdf, Found> = BTreeMap::new();
    for bdf in &listed {
        let Some((vendor, class)) = pci::identity(host, bdf) else {
            continue;
        };
        let Some(kind) = Kind::of(vendor, class) else {
            continue;
        };
        if kind == Kind::Gpu {
            d.gpus.push(bdf.clone());
        }
        let port = pci::upstream(host, bdf);
        if let Some(p) = &port {
            found
                .entry(p.clone())
                .or_insert((Kind::Port, Some((kind, bdf.clone())), None));
        }
        found.insert(bdf.clone(), (kind, None, port));
    }
    for (bdf, (kind, below, port)) in &found {
        let has_aer = pci::aer(host, bdf).any();
        // A port's link is its device's: judged once, on the device, against both ends.
        let (mut max_speed, mut max_width) = match kind {
            Kind::Port => (None, None),
            _ => pci::max_link(host, bdf),
        };
        let has_link = max_speed.is_some() || max_width.is_some();
        if !has_aer && !has_link {
            continue;
        }
        // The link's other end: the port above (a Gen5 card in a Gen4 slot trains at Gen4).
        if let Some(p) = port.as_ref().filter(|_| has_link) {
            let (ps, pw) = pci::max_link(host, p);
            max_speed = min_opt(max_speed, ps);
            max_width = min_opt(max_width, pw);
        }
        d.watched.push(Watched {
            bdf: bdf.clone(),
            kind: *kind,
            below: below.clone(),
            has_aer,
            has_link,
            max_speed,
            max_width,
        });
    }
    Ok(d)
}

/// The counters of the previous sweep, by device.
pub type Previous = BTreeMap<Bdf, (f64, AerCounts)>;

/// Reads the watched devices' counters and links at `now` (seconds), against `previous`
/// (updated in place; devices no longer watched are dropped from it).
pub fn sweep(
    host: &HostPaths,
    watched: &[Watched],
    previous: &mut Previous,
    now: f64,
) -> Vec<DeviceState> {
    let mut out = Vec::with_capacity(watched.len());
    let mut next = Previous::new();
    for w in watched {
        let counts = if w.has_aer {
            pci::aer(host, &w.bdf)
        } else {
            AerCounts::default()
        };
        let delta = previous
            .get(&w.bdf)
            .and_then(|(then, before)| rises(*then, before, now, &counts));
        if counts.any() {
            next.insert(w.bdf.clone(), (now, counts));
        }
        // A GPU's speed is not judged (it lowers it when idle): its width is read alone.
        let gpu_link =
            w.kind == Kind::Gpu || w.below.as_ref().is_some_and(|(k, _)| *k == Kind::Gpu);
        let (speed, width) = match (w.has_link, gpu_link) {
            (false, _) => (None, None),
            (true, true) => (None, pci::current_width(host, &w.bdf)),
            (true, false) => pci::current_link(host, &w.bdf),
        };
        out.push(DeviceState {
            bdf: w.bdf.clone(),
            kind: w.kind,
            below: w.below.as_ref().map(|(_, b)| b.clone()),
            below_kind: w.below.as_ref().map(|(k, _)| *k),
            aer: delta,
            aer_totals: [counts.correctable, counts.nonfatal, counts.fatal],
            speed,
            max_speed: w.max_speed,
            width,
            max_width: w.max_width,
        });
    }
    *previous = next;
    out
}

/// The rises of every counter between two readings; `None` when a counter is missing from
/// either or went down (the device was reset or re-enumerated: start over).
fn rises(then: f64, before: &AerCounts, now: f64, after: &AerCounts) -> Option<AerDelta> {
    let d = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if b >= a => Some(b - a),
        (None, None) => Some(0),
        _ => None,
    };
    Some(AerDelta {
        seconds: (now - then).max(0.0),
        correctable: d(before.correctable, after.correctable)?,
        nonfatal: d(before.nonfatal, after.nonfatal)?,
        fatal: d(before.fatal, after.fatal)?,
    })
}
