//! The Xid class table: `collectors/rules/gpu_xids.tsv` (one row per Xid of NVIDIA's
//! catalogue, with its source in the file's head), read once, the first time an Xid is met.
//!
//! An Xid the table does not hold (a driver newer than the table) is [`Class::Unknown`]: judged
//! like `watch` (an Event, a warning; repeated, critical), never silently dropped and never a
//! NodeCondition by itself.

use std::collections::HashMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../rules/gpu_xids.tsv");

/// What an Xid asks of the operator (the file's head describes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Ignore,
    App,
    Watch,
    Legacy,
    Unknown,
    Driver,
    Nvlink5,
    Recovery,
    Reset,
    Reboot,
    Hardware,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Ignore => "ignore",
            Class::App => "app",
            Class::Watch => "watch",
            Class::Legacy => "legacy",
            Class::Unknown => "unknown",
            Class::Driver => "driver",
            Class::Nvlink5 => "nvlink5",
            Class::Recovery => "recovery",
            Class::Reset => "reset",
            Class::Reboot => "reboot",
            Class::Hardware => "hardware",
        }
    }

    fn parse(s: &str) -> Option<Class> {
        Some(match s {
            "ignore" => Class::Ignore,
            "app" => Class::App,
            "watch" => Class::Watch,
            "legacy" => Class::Legacy,
            "driver" => Class::Driver,
            "nvlink5" => Class::Nvlink5,
            "recovery" => Class::Recovery,
            "reset" => Class::Reset,
            "reboot" => Class::Reboot,
            "hardware" => Class::Hardware,
            _ => return None,
        })
    }

    /// Whether an Xid of this class leaves the GPU unusable until someone acts: the classes
    /// that set `NodeDoctorAcceleratorFailure`.
    pub fn unusable(self) -> bool {
        matches!(self, Class::Reset | Class::Reboot | Class::Hardware)
    }

    /// Whether the workload owns it: never a NodeCondition, never escalated (13, 31, 43, 45).
    pub fn benign(self) -> bool {
        matches!(self, Class::Ignore | Class::App)
    }
}

/// One row: the class and NVIDIA's mnemonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub class: Class,
    pub mnemonic: &'static str,
}

/// The table's rows by Xid; rows that do not parse are left out (a unit test holds that none
/// is).
pub fn table() -> &'static HashMap<u32, Row> {
    static T: OnceLock<HashMap<u32, Row>> = OnceLock::new();
    T.get_or_init(|| parse(TABLE).0)
}

/// The rows of a table text and the number of lines that did not parse.
fn parse(text: &'static str) -> (HashMap<u32, Row>, usize) {
    let mut rows = HashMap::new();
    let mut bad = 0;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut f = line.split('\t');
        match (
            f.next().and_then(|x| x.parse().ok()),
            f.next().and_then(Class::parse),
            f.next(),
        ) {
            (Some(xid), Some(class), Some(mnemonic)) => {
                rows.insert(xid, Row { class, mnemonic });
            }
            _ => bad += 1,
        }
    }
    (rows, bad)
}

/// The class of an Xid: the table's, [`Class::Unknown`] when it has none.
pub fn class_of(xid: u32) -> Class {
    table().get(&xid).map_or(Class::Unknown, |r| r.class)
}

/// NVIDIA's mnemonic of an Xid, when the table has it.
pub fn mnemonic(xid: u32) -> Option<&'static str> {
    table().get(&xid).map(|r| r.mnemonic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_catalogue_parses() {
        let (rows, bad) = parse(TABLE);
        assert_eq!(bad, 0);
        // NVIDIA's catalogue numbers 1..=172 without gaps.
        assert_eq!(rows.len(), 172);
        assert!((1..=172).all(|x| rows.contains_key(&x)));
    }

    #[test]
    fn the_applications_xids_never_make_a_node_unhealthy() {
        for x in [13, 31, 43, 45] {
            assert_eq!(class_of(x), Class::App, "Xid {x}");
            assert!(class_of(x).benign() && !class_of(x).unusable());
        }
        assert_eq!(class_of(79), Class::Reboot);
        assert_eq!(class_of(119), Class::Reset);
        assert_eq!(class_of(120), Class::Reset);
        assert_eq!(class_of(74), Class::Reset);
        assert_eq!(class_of(154), Class::Recovery);
        assert_eq!(class_of(145), Class::Nvlink5);
        for x in [63, 92, 94] {
            assert_eq!(class_of(x), Class::Watch, "Xid {x}");
        }
        assert_eq!(class_of(9999), Class::Unknown);
        assert_eq!(
            mnemonic(79),
            Some("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS")
        );
    }
}
