//! The kernel-log lines of accelerators and their PCIe links, every wording the drivers print:
//!
//! ```text
//! NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.   (R470+)
//! NVRM: Xid (0000:03:00): 14, Channel 00000001                                                  (before R400)
//! NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 …)   (NVLink5)
//! NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
//! NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.
//! NVRM: GPU at 0000:01:00.0 has fallen off the bus.                                             (old drivers)
//! NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands.
//! NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)
//! nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
//! nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00
//! pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010                       (before 4.20: id=)
//! pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5
//! pcieport 0000:00:03.1: AER: Correctable error message received from 0000:0b:00.0             (6.x)
//! nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
//! pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e8(Receiver ID)
//! ```
//!
//! The multi-line fallen-off record is one `/dev/kmsg` record whose newlines the kernel
//! escapes as `\x0a` (decoded by the record parser); a syslog file holds it as separate lines,
//! which [`LinePart::FallenOffStart`] and [`LinePart::FallenOffEnd`] let the collector join.
//! A record reaches these parsers only when its first 96 bytes hold `NVRM:`, `AER:`, `SXid (PCI`
//! or `PCIe Bus Error:` (found by the capitals `M`, `R` and `P` with one `memchr3` pass;
//! `collectors/benches/gpu.rs` measures the cost per record against the other kernel-log
//! matchers).

use crate::needle::Needle;

/// A PCI address as `/sys/bus/pci/devices` names it: `0000:3b:00.0`, lower case.
pub type Bdf = String;

/// The severity a PCIe AER line states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AerSeverity {
    Corrected,
    NonFatal,
    Fatal,
}

impl AerSeverity {
    pub fn as_str(self) -> &'static str {
        match self {
            AerSeverity::Corrected => "corrected",
            AerSeverity::NonFatal => "nonfatal",
            AerSeverity::Fatal => "fatal",
        }
    }
}

/// One recognised line (or part of a multi-line record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinePart {
    /// An Xid of a GPU. `fatal` is the line's own Fatal/Nonfatal word (NVLink5's 144–150).
    Xid {
        gpu: Bdf,
        xid: u32,
        fatal: Option<bool>,
    },
    /// Xid 154: the recovery action the driver now asks for (`0x1 (GPU Reset Required)`).
    RecoveryAction { gpu: Bdf, code: u32, name: String },
    /// "GPU has fallen off the bus" without an Xid line (or with one: counted once by the
    /// collector per burst).
    FallenOff { gpu: Bdf },
    /// `NVRM: The NVIDIA GPU <bdf>` alone: the first line of the multi-line record, split.
    FallenOffStart { gpu: Bdf },
    /// `NVRM: fallen off the bus and is not responding to commands.` alone.
    FallenOffEnd,
    /// The driver could not initialise a GPU (`RmInitAdapter failed!`); `gpu` is `None` on
    /// drivers that do not name it.
    InitFailed { gpu: Option<Bdf> },
    /// An NVSwitch SXid's first line, with its Fatal/Non-fatal word; continuation lines
    /// (`Severity …`, `Data {…}`) are not returned.
    SXid { switch: Bdf, sxid: u32, fatal: bool },
    /// A PCIe AER report about `device` (the source a root port names, or the device printing
    /// its own `PCIe Bus Error`).
    Aer {
        device: Bdf,
        severity: AerSeverity,
        /// True for a `PCIe Bus Error` detail line; false for the port's "error received".
        detail: bool,
    },
}

/// Which parsers a message may be for: the words next to one of its colons.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Candidates {
    nvrm: bool,
    sxid: bool,
    aer: bool,
}

/// How far into a message the prefilter looks: every word it looks for comes before this (a
/// dmesg time, a driver name and an address of a 5-digit PCI domain before `AER:`,
/// `[12345678.123456] mlx5_core 10000:0c:00.1: AER: `, take 48 bytes).
const HEAD: usize = 96;

/// The prefilter: every line above holds `NVRM:`, `AER:`, `SXid (PCI` or `PCIe Bus Error:` in
/// its first [`HEAD`] bytes. One `memchr3` pass finds the capitals `M`, `R` and `P` there (rare
/// in kernel messages) and a few byte comparisons at each tell the words. Four substring
/// searches over the whole message, one per word, cost 1.5 times the hardware collector's
/// matcher per record (`collectors/benches/gpu.rs`).
fn candidates(message: &str) -> Candidates {
    let b = message.as_bytes();
    let head = &b[..b.len().min(HEAD)];
    let mut c = Candidates::default();
    for at in memchr::memchr3_iter(b'M', b'R', b'P', head) {
        let colon = b.get(at + 1) == Some(&b':');
        match b[at] {
            // The driver's lines go to every parser: nothing else matters.
            b'M' if colon && b[..at].ends_with(b"NVR") => {
                c.nvrm = true;
                return c;
            }
            b'R' if colon && b[..at].ends_with(b"AE") => c.aer = true,
            b'P' if b[..at].ends_with(b"SXid (") => c.sxid = true,
            b'P' if b[at..].starts_with(b"PCIe Bus Error:") => c.aer = true,
            _ => {}
        }
    }
    c
}

/// Parses one kernel log message; `None` when it is none of the lines above.
pub fn parse(message: &str) -> Option<LinePart> {
    let c = candidates(message);
    if c.nvrm {
        let m = message.trim();
        return nvrm(m).or_else(|| sxid(m)).or_else(|| aer(m));
    }
    if c.sxid {
        return sxid(message.trim());
    }
    if c.aer {
        return aer(message.trim());
    }
    None
}

/// `0000:3b:00.0`, `0000:3b:00` (function 0), `PCI:0000:3b:00`; `None` for anything else.
pub fn normalize_bdf(s: &str) -> Option<Bdf> {
    let s = s.trim().strip_prefix("PCI:").unwrap_or(s.trim());
    let (head, func) = match s.rsplit_once('.') {
        Some((h, f)) => (h, f),
        None => (s, "0"),
    };
    let (rest, dev) = head.rsplit_once(':')?;
    let (domain, bus) = match rest.split_once(':') {
        Some((d, b)) => (d, b),
        None => ("0000", rest),
    };
    let hex = |x: &str, max: usize| {
        !x.is_empty() && x.len() <= max && x.bytes().all(|c| c.is_ascii_hexdigit())
    };
    if !hex(domain, 8) || !hex(bus, 2) || !hex(dev, 2) || func.len() != 1 || !hex(func, 1) {
        return None;
    }
    let n = |x: &str| u32::from_str_radix(x, 16).ok();
    let (d, b, v, f) = (n(domain)?, n(bus)?, n(dev)?, n(func)?);
    if v > 0x1f || f > 7 {
        return None;
    }
    // `{d:04x}:{b:02x}:{v:02x}.{f}`, written by hand: `format!` was most of a matched line's cost.
    let mut out = String::with_capacity(16);
    let hex_digits = |out: &mut String, x: u32, width: usize| {
        let digits = (8 - x.leading_zeros() as usize / 4).max(width);
        for i in (0..digits).rev() {
            out.push(char::from(
                b"0123456789abcdef"[((x >> (4 * i)) & 0xf) as usize],
            ));
        }
    };
    hex_digits(&mut out, d, 4);
    out.push(':');
    hex_digits(&mut out, b, 2);
    out.push(':');
    hex_digits(&mut out, v, 2);
    out.push('.');
    hex_digits(&mut out, f, 1);
    Some(out)
}

fn leading_u32(s: &str) -> Option<(u32, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 9 {
        return None;
    }
    Some((s[..n].parse().ok()?, &s[n..]))
}

/// The lines of the NVIDIA driver (`NVRM: …`).
fn nvrm(m: &str) -> Option<LinePart> {
    static NVRM: Needle = Needle::new("NVRM: ");
    let rest = NVRM.after(m)?;
    if let Some(r) = rest.strip_prefix("Xid (") {
        return xid(r);
    }
    if let Some(r) = rest.strip_prefix("The NVIDIA GPU ") {
        let gpu = normalize_bdf(r.split(|c: char| c.is_whitespace()).next()?)?;
        return Some(if r.contains("fallen off the bus") {
            LinePart::FallenOff { gpu }
        } else {
            LinePart::FallenOffStart { gpu }
        });
    }
    if rest.starts_with("fallen off the bus and is not responding") {
        return Some(LinePart::FallenOffEnd);
    }
    static INIT: Needle = Needle::new("RmInitAdapter failed");
    if INIT.is_in(rest) {
        let gpu = rest
            .strip_prefix("GPU ")
            .and_then(|r| r.split_once(": "))
            .and_then(|(b, _)| normalize_bdf(b));
        return Some(LinePart::InitFailed { gpu });
    }
    // `GPU 0000:2b:00.0: GPU has fallen off the bus.` / `GPU at 0000:01:00.0 has fallen off the bus.`
    let r = rest.strip_prefix("GPU ")?;
    if !r.contains("has fallen off the bus") {
        return None;
    }
    let r = r.strip_prefix("at ").unwrap_or(r);
    let word = r.split(|c: char| c.is_whitespace()).next()?;
    let gpu = normalize_bdf(word.trim_end_matches(':'))?;
    Some(LinePart::FallenOff { gpu })
}

/// After `Xid (`: `PCI:0000:05:00): 79, pid=…` or `0000:03:00): 14, Channel …`.
fn xid(r: &str) -> Option<LinePart> {
    static CLOSE: Needle = Needle::new("): ");
    let at = CLOSE.find(r)?;
    let (addr, tail) = (&r[..at], &r[at + CLOSE.len()..]);
    let gpu = normalize_bdf(addr)?;
    let (xid, after) = leading_u32(tail)?;
    // The number ends the line, or a comma or a space follows it.
    if !(after.is_empty() || after.starts_with(',') || after.starts_with(' ')) {
        return None;
    }
    let text = after.trim_start_matches(',').trim_start();
    if xid == 154 {
        if let Some(to) = text
            .strip_prefix("GPU recovery action changed from ")
            .and_then(|t| t.split_once(" to "))
            .map(|(_, to)| to)
        {
            let (code, name) = to.split_once(" (")?;
            let code = u32::from_str_radix(code.trim().strip_prefix("0x")?, 16).ok()?;
            let name = name.split(')').next().unwrap_or("").trim();
            return Some(LinePart::RecoveryAction {
                gpu,
                code,
                name: crate::bounded::prefix_owned(name, 64),
            });
        }
    }
    let fatal = if (144..=150).contains(&xid) {
        let mut words = text.split_whitespace().take(4);
        words.find_map(|w| match w {
            "Fatal" => Some(true),
            "Nonfatal" | "Non-fatal" => Some(false),
            _ => None,
        })
    } else {
        None
    };
    Some(LinePart::Xid { gpu, xid, fatal })
}

/// `nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 …`.
fn sxid(m: &str) -> Option<LinePart> {
    static SXID: Needle = Needle::new("SXid (");
    let r = SXID.after(m)?;
    let (addr, tail) = r.split_once("): ")?;
    let switch = normalize_bdf(addr)?;
    let (sxid, after) = leading_u32(tail)?;
    let text = after.strip_prefix(", ")?;
    let fatal = if text.starts_with("Fatal,") {
        true
    } else if text.starts_with("Non-fatal,") {
        false
    } else {
        // `Severity 0 Engine instance …`, `Data {…}`: the report's continuation lines.
        return None;
    };
    Some(LinePart::SXid {
        switch,
        sxid,
        fatal,
    })
}

fn severity_word(s: &str) -> Option<AerSeverity> {
    let s = s.trim();
    if s.starts_with("Corrected")
        || s.starts_with("Correctable")
        || s.starts_with("Multiple Corrected")
        || s.starts_with("Multiple Correctable")
    {
        Some(AerSeverity::Corrected)
    } else if s.contains("(Fatal)") {
        Some(AerSeverity::Fatal)
    } else if s.contains("(Non-Fatal)") {
        Some(AerSeverity::NonFatal)
    } else {
        None
    }
}

/// `<driver> <bdf>: [AER: ]…`: the device printing the line and the rest.
fn device_prefix(m: &str) -> Option<(Bdf, &str)> {
    static COLON: Needle = Needle::new(": ");
    let (_, r) = m.split_once(' ')?;
    let at = COLON.find(r)?;
    let (addr, rest) = (&r[..at], &r[at + COLON.len()..]);
    Some((normalize_bdf(addr)?, rest))
}

/// An AER `error received` line (the root port names the source) or a `PCIe Bus Error` line.
fn aer(m: &str) -> Option<LinePart> {
    let (printer, rest) = device_prefix(m)?;
    let rest = rest.strip_prefix("AER: ").unwrap_or(rest);
    if let Some(sev) = rest.strip_prefix("PCIe Bus Error: severity=") {
        let word = sev.split(", type=").next()?;
        return Some(LinePart::Aer {
            device: printer,
            severity: severity_word(word)?,
            detail: true,
        });
    }
    static RECEIVED: Needle = Needle::new(" error received: ");
    static MESSAGE: Needle = Needle::new(" error message received from ");
    let (what, source) = if let Some(at) = RECEIVED.find(rest) {
        (&rest[..at], &rest[at + RECEIVED.len()..])
    } else if let Some(at) = MESSAGE.find(rest) {
        (&rest[..at], &rest[at + MESSAGE.len()..])
    } else {
        return None;
    };
    let severity = severity_word(what)?;
    let source = source.trim();
    // Before 4.20 the source is `id=0010` (bus << 8 | devfn) on the port's domain.
    let device = match source.strip_prefix("id=") {
        Some(id) => {
            let id = u32::from_str_radix(id.get(..4)?, 16).ok()?;
            let domain = printer.split(':').next()?;
            format!(
                "{domain}:{:02x}:{:02x}.{}",
                id >> 8,
                (id >> 3) & 0x1f,
                id & 7
            )
        }
        None => normalize_bdf(source.split_whitespace().next()?)?,
    };
    Some(LinePart::Aer {
        device,
        severity,
        detail: false,
    })
}

#[cfg(test)]
mod tests;
