//! EDAC memory-controller counters in sysfs (`Documentation/admin-guide/ras.rst`, "EDAC"):
//!
//! ```text
//! /sys/devices/system/edac/mc/mc0/ce_count                    corrected errors since boot (or reset)
//! /sys/devices/system/edac/mc/mc0/ue_count                    uncorrected errors
//! /sys/devices/system/edac/mc/mc0/dimm0/dimm_ce_count         per DIMM (3.6+; rank*/ on rank-based drivers)
//! /sys/devices/system/edac/mc/mc0/dimm0/dimm_ue_count
//! /sys/devices/system/edac/mc/mc0/dimm0/dimm_label            "CPU_SrcID#0_Ha#0_Chan#0_DIMM#0"
//! /sys/devices/system/edac/mc/mc0/csrow0/ch0_ce_count         legacy layout (2.6 .. CONFIG_EDAC_LEGACY_SYSFS)
//! /sys/devices/system/edac/mc/mc0/csrow0/ch0_dimm_label
//! ```
//!
//! Every file is one decimal number or one label line; a counter that does not parse is left
//! out rather than guessed. Labels are host text: control characters are dropped and the
//! length capped.

use crate::error::ReadError;
use crate::host::HostPaths;
use crate::hostfs;

/// Longest DIMM label kept (the kernel's `EDAC_MC_LABEL_LEN` is 31; room for garbage is not).
const MAX_LABEL: usize = 64;
/// Memory controllers and DIMM directories listed at most (a 2-socket server has 2-4
/// controllers and 24-32 DIMMs).
const MAX_ENTRIES: usize = 1024;

/// One DIMM (or, in the legacy layout, one channel of a chip-select row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimm {
    /// `dimm0`, `rank3` or `csrow0/ch1`.
    pub name: String,
    /// The motherboard silkscreen name the driver or the operator set (`dimm_label`).
    pub label: Option<String>,
    pub ce: u64,
    /// Not in the legacy layout (only per chip-select row there).
    pub ue: Option<u64>,
}

/// One memory controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// `mc0`.
    pub name: String,
    pub ce: u64,
    pub ue: u64,
    pub dimms: Vec<Dimm>,
}

/// A counter file's text: one decimal number.
pub fn parse_count(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A label file's text: the first line, visible characters only, capped; `None` when empty.
pub fn parse_label(text: &str) -> Option<String> {
    let line = text.lines().next().unwrap_or("");
    let clean: String = line
        .chars()
        .filter(|c| !c.is_control() && !crate::sanitize::is_unsafe(*c))
        .collect();
    let clean = crate::bounded::prefix_owned(clean.trim(), MAX_LABEL);
    (!clean.is_empty()).then_some(clean)
}

fn count(dir: &std::path::Path, file: &str) -> Option<u64> {
    hostfs::read_text(&dir.join(file), hostfs::cap::VALUE)
        .ok()
        .and_then(|t| parse_count(&t))
}

fn label(dir: &std::path::Path, file: &str) -> Option<String> {
    hostfs::read_text(&dir.join(file), hostfs::cap::VALUE)
        .ok()
        .and_then(|t| parse_label(&t))
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = match hostfs::dir_entries(dir, MAX_ENTRIES) {
        Ok(it) => it
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort_by_key(|n| natural_key(n));
    v
}

/// `mc10` after `mc2`.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &name[..name.len() - digits.len()];
    (prefix.to_string(), digits.parse().unwrap_or(u64::MAX))
}

fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The DIMMs of one controller: `dimm*`/`rank*` where present, else the legacy `csrow*`.
fn dimms(mc: &std::path::Path) -> Vec<Dimm> {
    let entries = names(mc);
    let mut out = Vec::new();
    for n in entries
        .iter()
        .filter(|n| numbered(n, "dimm") || numbered(n, "rank"))
    {
        let d = mc.join(n);
        let Some(ce) = count(&d, "dimm_ce_count") else {
            continue;
        };
        out.push(Dimm {
            name: n.clone(),
            label: label(&d, "dimm_label"),
            ce,
            ue: count(&d, "dimm_ue_count"),
        });
    }
    if !out.is_empty() {
        return out;
    }
    for row in entries.iter().filter(|n| numbered(n, "csrow")) {
        let d = mc.join(row);
        for ch in 0..16 {
            let Some(ce) = count(&d, &format!("ch{ch}_ce_count")) else {
                continue;
            };
            out.push(Dimm {
                name: format!("{row}/ch{ch}"),
                label: label(&d, &format!("ch{ch}_dimm_label")),
                ce,
                ue: None,
            });
        }
    }
    out
}

/// Reads every controller under `<root>/sys/devices/system/edac/mc`; `Ok(None)` when the
/// directory does not exist (no EDAC driver loaded: a VM, or a platform without one).
pub fn read(host: &HostPaths) -> Result<Option<Vec<Controller>>, ReadError> {
    let base = host.sys_file("devices/system/edac/mc");
    if let Err(e) = std::fs::symlink_metadata(&base) {
        let e = ReadError::io(&base, e);
        return if e.is_not_found() { Ok(None) } else { Err(e) };
    }
    let mut out = Vec::new();
    for n in names(&base).iter().filter(|n| numbered(n, "mc")) {
        let mc = base.join(n);
        let (Some(ce), Some(ue)) = (count(&mc, "ce_count"), count(&mc, "ue_count")) else {
            continue;
        };
        out.push(Controller {
            name: n.clone(),
            ce,
            ue,
            dimms: dimms(&mc),
        });
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_labels() {
        assert_eq!(parse_count("12\n"), Some(12));
        assert_eq!(parse_count("-1\n"), None);
        assert_eq!(parse_count(""), None);
        assert_eq!(
            parse_label("CPU_SrcID#0_Ha#0_Chan#0_DIMM#0\n").as_deref(),
            Some("CPU_SrcID#0_Ha#0_Chan#0_DIMM#0")
        );
        assert_eq!(parse_label("A1\x1b[31m\n").as_deref(), Some("A1[31m"));
        assert_eq!(parse_label("\n"), None);
        assert!(natural_key("mc10") > natural_key("mc2"));
        assert!(numbered("csrow12", "csrow") && !numbered("csrow", "csrow"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_count(&s);
            let _ = parse_label(&s);
            let _ = natural_key(&s);
        }
        /// Counter files (`%u\n`, `ce_count`, `ue_count`) and label files (`%s\n`, at most
        /// `EDAC_MC_LABEL_LEN` 31 bytes, as drivers and `dmidecode`-derived tools name DIMMs):
        /// the number and the label read back.
        #[test]
        fn parses_what_the_kernel_prints(
            count in proptest::num::u32::ANY,
            label in "CPU_SrcID#[0-3]_(Ha|MC)#[0-3]_Chan#[0-3]_DIMM#[0-2]|DIMM_[A-H][0-9]|[A-Za-z0-9_#]([A-Za-z0-9_# -]{0,10}[A-Za-z0-9_#])?",
        ) {
            proptest::prop_assert_eq!(parse_count(&format!("{count}\n")), Some(u64::from(count)));
            proptest::prop_assert_eq!(parse_label(&format!("{label}\n")), Some(label));
        }
    }
}
