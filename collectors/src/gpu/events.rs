//! The kernel log's accelerator reports, remembered per GPU, per NVSwitch and per PCIe device
//! for the window: counts (a flood is one entry with a count), bursts (lines less than the
//! burst gap apart are one), the latest line, and for a GPU the last time of each Xid class, so
//! that a later Xid 154 "recovery action None" clears what came before it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::kmsg::Record;
use crate::proc::uptime::BootClock;

use super::lines::{AerSeverity, Bdf, LinePart};
use super::pci::Kind;
use super::sample::{AerLines, EarlierBoots, SwitchEvents, XidEvents};
use super::xids::{self, Class};

/// GPUs, switches and devices remembered at most; the stalest go first.
const MAX_SUBJECTS: usize = 256;
/// Distinct Xids remembered per GPU.
const MAX_XIDS: usize = 64;
/// Longest line kept.
const MAX_LINE: usize = 512;
/// The subject of an `RmInitAdapter failed!` line that names no GPU (drivers before R470).
pub const UNNAMED: &str = "unnamed";

/// One GPU's reports of this boot.
#[derive(Debug, Clone, Default)]
struct GpuLog {
    lines: u64,
    bursts: u64,
    serious_bursts: u64,
    last_usec: u64,
    last_serious_usec: Option<u64>,
    xids: BTreeMap<u32, u64>,
    /// Per class: the latest time it was reported and by which Xid.
    classes: BTreeMap<Class, (u64, Option<u32>)>,
    /// The time of the latest "recovery action … to 0x0 (None)".
    cleared_usec: Option<u64>,
    recovery: Option<(u32, String)>,
    fallen_off: Option<u64>,
    init_failed: Option<u64>,
    line: String,
    line_class: Option<Class>,
}

#[derive(Debug, Clone, Default)]
struct SwitchLog {
    fatal: u64,
    nonfatal: u64,
    sxids: BTreeSet<u32>,
    last_usec: u64,
    line: String,
}

#[derive(Debug, Clone, Default)]
struct AerLog {
    /// A root port's "error received" lines, by severity.
    received: [u64; 3],
    /// The device's own "PCIe Bus Error" lines, by severity.
    detail: [u64; 3],
    last_usec: u64,
    line: String,
}

/// What the kernel log said, for the window.
#[derive(Debug, Default)]
pub struct Events {
    gpus: BTreeMap<Bdf, GpuLog>,
    switches: BTreeMap<Bdf, SwitchLog>,
    aer: BTreeMap<Bdf, AerLog>,
    /// `NVRM: The NVIDIA GPU <bdf>` of a split multi-line record, waiting for its end.
    pending_fallen: Option<(Bdf, u64)>,
    /// Lines recognised since start, by kind (a counter for `/metrics`).
    pub totals: BTreeMap<&'static str, u64>,
    /// Xid lines per GPU since start (bounded like the rest).
    pub per_gpu_total: BTreeMap<Bdf, u64>,
    /// An AER report arrived since the collector last read the counters.
    pub aer_since_sweep: bool,
}

fn cut(s: &str) -> String {
    crate::bounded::prefix_owned(s.trim(), MAX_LINE)
}

impl Events {
    /// Notes one recognised part of a record.
    pub fn note(&mut self, part: LinePart, r: &Record, gap: Duration) {
        match part {
            LinePart::Xid { gpu, xid, fatal } => {
                let class = match (xids::class_of(xid), fatal) {
                    (Class::Nvlink5, Some(true)) => Class::Reset,
                    (Class::Nvlink5, Some(false)) | (Class::Recovery, _) => Class::Watch,
                    (c, _) => c,
                };
                let fell = xid == 79;
                self.gpu_line(&gpu, Some(xid), class, r, gap);
                if fell {
                    self.gpu(&gpu).fallen_off = Some(r.usec);
                }
            }
            LinePart::RecoveryAction { gpu, code, name } => {
                let class = match code {
                    0 => Class::Ignore,
                    2 => Class::Reboot,
                    _ => Class::Reset,
                };
                self.gpu_line(&gpu, Some(154), class, r, gap);
                let g = self.gpu(&gpu);
                if code == 0 {
                    g.cleared_usec = Some(r.usec);
                }
                g.recovery = Some((code, name));
            }
            LinePart::FallenOff { gpu } => self.fallen_off(&gpu, r, gap),
            LinePart::FallenOffStart { gpu } => self.pending_fallen = Some((gpu, r.usec)),
            LinePart::FallenOffEnd => {
                if let Some((gpu, _)) = self.pending_fallen.take() {
                    self.fallen_off(&gpu, r, gap);
                }
            }
            LinePart::InitFailed { gpu } => {
                let gpu = gpu.unwrap_or_else(|| UNNAMED.to_string());
                self.gpu_line(&gpu, None, Class::Reboot, r, gap);
                self.gpu(&gpu).init_failed = Some(r.usec);
            }
            LinePart::SXid {
                switch,
                sxid,
                fatal,
            } => self.sxid(switch, sxid, fatal, r),
            LinePart::Aer {
                device,
                severity,
                detail,
            } => self.aer_line(device, severity, detail, r),
        }
    }

    fn gpu(&mut self, bdf: &str) -> &mut GpuLog {
        if !self.gpus.contains_key(bdf) && self.gpus.len() >= MAX_SUBJECTS {
            let stalest = self
                .gpus
                .iter()
                .min_by_key(|(_, g)| g.last_usec)
                .map(|(k, _)| k.clone());
            if let Some(k) = stalest {
                self.gpus.remove(&k);
            }
        }
        self.gpus.entry(bdf.to_string()).or_default()
    }

    fn fallen_off(&mut self, gpu: &str, r: &Record, gap: Duration) {
        self.gpu_line(gpu, None, Class::Reboot, r, gap);
        self.gpu(gpu).fallen_off = Some(r.usec);
    }

    fn gpu_line(&mut self, bdf: &str, xid: Option<u32>, class: Class, r: &Record, gap: Duration) {
        *self.totals.entry("xid").or_insert(0) += 1;
        if !self.per_gpu_total.contains_key(bdf) && self.per_gpu_total.len() >= MAX_SUBJECTS {
            return;
        }
        *self.per_gpu_total.entry(bdf.to_string()).or_insert(0) += 1;
        let gap_usec = gap.as_micros() as u64;
        let g = self.gpu(bdf);
        let new_burst = |last: u64| r.usec.saturating_sub(last) > gap_usec || r.usec < last;
        if g.lines == 0 || new_burst(g.last_usec) {
            g.bursts += 1;
        }
        if !class.benign() {
            if g.last_serious_usec.is_none_or(new_burst) {
                g.serious_bursts += 1;
            }
            g.last_serious_usec = Some(r.usec);
        }
        g.lines = g.lines.saturating_add(1);
        g.last_usec = g.last_usec.max(r.usec);
        if let Some(x) = xid {
            if g.xids.len() < MAX_XIDS || g.xids.contains_key(&x) {
                *g.xids.entry(x).or_insert(0) += 1;
            }
        }
        let e = g.classes.entry(class).or_insert((r.usec, xid));
        if r.usec >= e.0 {
            // Xid 154 names the action another Xid asked for: that Xid stays the cause.
            let keep = xid == Some(154) && e.1.is_some();
            *e = (r.usec, if keep { e.1 } else { xid.or(e.1) });
        }
        if g.line_class.is_none_or(|c| class >= c) {
            g.line = cut(&r.message);
            g.line_class = Some(class);
        }
    }

    fn sxid(&mut self, switch: Bdf, sxid: u32, fatal: bool, r: &Record) {
        *self
            .totals
            .entry(if fatal { "sxid_fatal" } else { "sxid_nonfatal" })
            .or_insert(0) += 1;
        if !self.switches.contains_key(&switch) && self.switches.len() >= MAX_SUBJECTS {
            return;
        }
        let s = self.switches.entry(switch).or_default();
        if fatal {
            s.fatal += 1;
        } else {
            s.nonfatal += 1;
        }
        if s.sxids.len() < MAX_XIDS {
            s.sxids.insert(sxid);
        }
        s.last_usec = s.last_usec.max(r.usec);
        if fatal || s.fatal == 0 {
            s.line = cut(&r.message);
        }
    }

    fn aer_line(&mut self, device: Bdf, severity: AerSeverity, detail: bool, r: &Record) {
        *self.totals.entry(severity_total(severity)).or_insert(0) += 1;
        if !self.aer.contains_key(&device) && self.aer.len() >= MAX_SUBJECTS {
            return;
        }
        self.aer_since_sweep = true;
        let a = self.aer.entry(device).or_default();
        // A root port's "error received" and the device's own "PCIe Bus Error" describe one
        // error (or the port's line stands alone): the larger of the two counts is reported.
        let i = severity as usize;
        if detail {
            a.detail[i] += 1;
        } else {
            a.received[i] += 1;
        }
        a.last_usec = a.last_usec.max(r.usec);
        a.line = cut(&r.message);
    }

    /// Forgets what is older than the window.
    pub fn prune(&mut self, clock: Option<&BootClock>, window: Duration) {
        let Some(c) = clock else {
            return;
        };
        self.gpus.retain(|_, g| c.age(g.last_usec) <= window);
        self.switches.retain(|_, s| c.age(s.last_usec) <= window);
        self.aer.retain(|_, a| c.age(a.last_usec) <= window);
        if self
            .pending_fallen
            .as_ref()
            .is_some_and(|(_, u)| c.age(*u) > window)
        {
            self.pending_fallen = None;
        }
    }

    /// The GPUs with reports.
    pub fn gpu_names(&self) -> impl Iterator<Item = &Bdf> {
        self.gpus.keys()
    }

    /// One GPU's reports as the sample holds them.
    pub fn xid_events(&self, bdf: &str, clock: Option<&BootClock>) -> Option<XidEvents> {
        let g = self.gpus.get(bdf)?;
        let cleared = g.cleared_usec;
        // A class reported before the latest "recovery action None" no longer holds.
        let (worst, worst_xid) = g
            .classes
            .iter()
            .filter(|(c, (usec, _))| !(c.unusable() && cleared.is_some_and(|u| *usec <= u)))
            .map(|(c, (_, x))| (*c, *x))
            .max_by_key(|(c, _)| *c)
            .unwrap_or((Class::Ignore, None));
        let in_force = |t: Option<u64>| t.is_some_and(|u| cleared.is_none_or(|c| u > c));
        Some(XidEvents {
            lines: g.lines,
            bursts: if g.serious_bursts > 0 {
                g.serious_bursts
            } else {
                g.bursts
            },
            xids: g.xids.iter().map(|(k, v)| (*k, *v)).collect(),
            worst,
            worst_xid,
            fallen_off: in_force(g.fallen_off),
            init_failed: in_force(g.init_failed),
            recovery_action: g.recovery.clone().filter(|(c, _)| *c != 0),
            last_seen_seconds_ago: clock.map(|c| c.age(g.last_usec).as_secs()),
            line: g.line.clone(),
        })
    }

    pub fn switch_events(&self, clock: Option<&BootClock>) -> Vec<SwitchEvents> {
        self.switches
            .iter()
            .map(|(b, s)| SwitchEvents {
                bdf: b.clone(),
                fatal: s.fatal,
                nonfatal: s.nonfatal,
                sxids: s.sxids.iter().copied().collect(),
                last_seen_seconds_ago: clock.map(|c| c.age(s.last_usec).as_secs()),
                line: s.line.clone(),
            })
            .collect()
    }

    pub fn aer_lines(
        &self,
        clock: Option<&BootClock>,
        kind: impl Fn(&str) -> Option<Kind>,
    ) -> Vec<AerLines> {
        self.aer
            .iter()
            .map(|(b, a)| AerLines {
                bdf: b.clone(),
                kind: kind(b),
                corrected: a.count(AerSeverity::Corrected),
                nonfatal: a.count(AerSeverity::NonFatal),
                fatal: a.count(AerSeverity::Fatal),
                last_seen_seconds_ago: clock.map(|c| c.age(a.last_usec).as_secs()),
                line: a.line.clone(),
            })
            .collect()
    }
}

impl AerLog {
    fn count(&self, s: AerSeverity) -> u64 {
        self.received[s as usize].max(self.detail[s as usize])
    }
}

fn severity_total(s: AerSeverity) -> &'static str {
    match s {
        AerSeverity::Corrected => "aer_corrected",
        AerSeverity::NonFatal => "aer_nonfatal",
        AerSeverity::Fatal => "aer_fatal",
    }
}

/// How a line of the node's logs is told to be from an earlier boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootSplit {
    /// This boot's id (`/proc/sys/kernel/random/boot_id`), when it could be read.
    pub current: Option<[u8; 16]>,
    /// This boot's start by the wall clock (Unix seconds: now less the uptime).
    pub boot_unix: i64,
}

impl BootSplit {
    /// A line that names its boot (a journal entry) is an earlier boot's when that boot is not
    /// this one, whatever its time says: a clock that jumped (no NTP yet at boot, a wrong RTC)
    /// stamps one boot's lines inside another's. A syslog line names none: it is an earlier
    /// boot's when it was written before this boot started by the clock.
    pub fn is_earlier(&self, time: i64, boot_id: Option<[u8; 16]>) -> bool {
        match (boot_id, self.current) {
            (Some(line), Some(now)) => line != now,
            _ => time < self.boot_unix,
        }
    }
}

/// Xid reports of earlier boots, per GPU, from lines of the node's logs: `(unix seconds, boot
/// id where the log names it, message)`; this boot's lines (the kernel log holds them) are
/// skipped, as [`BootSplit::is_earlier`] tells them.
pub fn earlier_boots<'a>(
    lines: impl Iterator<Item = (i64, Option<[u8; 16]>, &'a str)>,
    split: BootSplit,
) -> BTreeMap<Bdf, EarlierBoots> {
    let mut out: BTreeMap<Bdf, EarlierBoots> = BTreeMap::new();
    for (time, boot_id, message) in lines {
        if !split.is_earlier(time, boot_id) {
            continue;
        }
        let (gpu, xid, class) = match super::lines::parse(message) {
            Some(LinePart::Xid { gpu, xid, fatal }) => {
                let class = match (xids::class_of(xid), fatal) {
                    (Class::Nvlink5, Some(true)) => Class::Reset,
                    (Class::Nvlink5 | Class::Recovery, _) => Class::Watch,
                    (c, _) => c,
                };
                (gpu, Some(xid), class)
            }
            Some(LinePart::FallenOff { gpu }) => (gpu, Some(79), Class::Reboot),
            _ => continue,
        };
        if !out.contains_key(&gpu) && out.len() >= MAX_SUBJECTS {
            continue;
        }
        let e = out.entry(gpu).or_insert(EarlierBoots {
            lines: 0,
            xids: Vec::new(),
            worst: Class::Ignore,
        });
        e.lines += 1;
        if let Some(x) = xid {
            if !e.xids.contains(&x) && e.xids.len() < MAX_XIDS {
                e.xids.push(x);
                e.xids.sort_unstable();
            }
        }
        e.worst = e.worst.max(class);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS: [u8; 16] = [7; 16];
    const EARLIER: [u8; 16] = [3; 16];
    const XID: &str = "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).";

    /// A journal line's boot id decides, whatever its time; a syslog line's time decides.
    #[test]
    fn the_boot_id_decides_where_the_log_names_it() {
        let split = BootSplit {
            current: Some(THIS),
            boot_unix: 1_000,
        };
        // An earlier boot's entry stamped after this boot began (its clock ran ahead).
        assert!(split.is_earlier(2_000, Some(EARLIER)));
        // This boot's entry stamped before it began (the clock was set back after boot).
        assert!(!split.is_earlier(500, Some(THIS)));
        assert!(split.is_earlier(500, None));
        assert!(!split.is_earlier(1_000, None));
        // This boot's id unknown: the time decides for every line.
        let blind = BootSplit {
            current: None,
            ..split
        };
        assert!(!blind.is_earlier(2_000, Some(EARLIER)));
        let lines = [
            (2_000, Some(EARLIER), XID),
            (2_001, Some(EARLIER), XID),
            (500, Some(THIS), XID),
            (400, None, XID),
        ];
        let got = earlier_boots(lines.into_iter(), split);
        assert_eq!(got["0000:9b:00.0"].lines, 3);
        assert_eq!(got["0000:9b:00.0"].xids, [119]);
    }
}
