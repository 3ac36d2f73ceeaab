//! `/proc/<pid>/net/bonding/<bond>`: the bonding driver's state of one bond
//! (`drivers/net/bonding/bond_procfs.c`, `bond_info_show_master` and `bond_info_show_slave`).
//! The text opens with `Ethernet Channel Bonding Driver: v…`, then the bond's lines
//! (`Bonding Mode: …`, `Currently Active Slave: …`, `MII Status: …`), then one block per slave
//! starting `Slave Interface: <name>` with its own `MII Status:` and `Link Failure Count:`.
//! 802.3ad bonds add `802.3ad info` blocks and per-slave LACP details, which are skipped. The
//! directory is per network namespace: read through pid 1's (the host's).
//!
//! Our own parser: `procfs-core` has no model of the bonding files.

use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::ReadError;

/// Why a bonding file could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no `Bonding Mode:` line: not a bonding driver's file")]
    NoMode,
}

/// One slave of a bond.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slave {
    /// Host text: the slave's interface name as the driver printed it.
    pub name: String,
    /// `up`, `down`, `going down`, `going back` (the driver's words).
    pub mii_status: String,
    /// Times the driver saw this slave's link fail since it was enslaved.
    pub link_failure_count: Option<u64>,
}

impl Slave {
    pub fn is_up(&self) -> bool {
        self.mii_status == "up"
    }
}

/// One bond.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bond {
    /// `fault-tolerance (active-backup)`, `IEEE 802.3ad Dynamic link aggregation`, …
    pub mode: String,
    /// The bond's own MII status (`up` while at least one slave carries it).
    pub mii_status: String,
    /// `Currently Active Slave:` (active-backup, balance-tlb/alb), `None` when it says None.
    pub active_slave: Option<String>,
    pub slaves: Vec<Slave>,
}

/// The most slaves kept per bond (the driver has no limit; real bonds have a handful).
pub const MAX_SLAVES: usize = 64;

/// Parses one bond's file.
pub fn parse(text: &str) -> Result<Bond, ParseError> {
    let mut bond = Bond::default();
    let mut has_mode = false;
    let mut slave: Option<Slave> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match (key, slave.as_mut()) {
            ("Slave Interface", _) => {
                if let Some(s) = slave.take() {
                    push(&mut bond, s);
                }
                slave = Some(Slave {
                    name: value.to_string(),
                    ..Slave::default()
                });
            }
            ("MII Status", Some(s)) => s.mii_status = value.to_string(),
            ("Link Failure Count", Some(s)) => s.link_failure_count = value.parse().ok(),
            ("Bonding Mode", None) => {
                has_mode = true;
                bond.mode = value.to_string();
            }
            ("MII Status", None) => bond.mii_status = value.to_string(),
            ("Currently Active Slave", None) => {
                bond.active_slave = (value != "None" && !value.is_empty()).then(|| value.into())
            }
            _ => {}
        }
    }
    if let Some(s) = slave.take() {
        push(&mut bond, s);
    }
    if !has_mode {
        return Err(ParseError::NoMode);
    }
    Ok(bond)
}

fn push(bond: &mut Bond, s: Slave) {
    if bond.slaves.len() < MAX_SLAVES {
        bond.slaves.push(s);
    }
}

/// `<root>/proc/<pid>/net/bonding`: the bonds of `pid`'s network namespace.
pub fn dir(host: &HostPaths, pid: u32) -> PathBuf {
    host.proc_pid(pid).join("net/bonding")
}

/// Reads and parses one bond's file.
pub fn read(path: &Path) -> Result<Bond, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An active-backup bond as 5.15's driver prints it, its backup slave's link lost.
    pub const ACTIVE_BACKUP_5_15: &str = "\
Ethernet Channel Bonding Driver: v5.15.0-91-generic

Bonding Mode: fault-tolerance (active-backup)
Primary Slave: None
Currently Active Slave: eth0
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0
Peer Notification Delay (ms): 0

Slave Interface: eth0
MII Status: up
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 52:54:00:12:34:56
Slave queue ID: 0

Slave Interface: eth1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 3
Permanent HW addr: 52:54:00:12:34:57
Slave queue ID: 0
";

    /// An 802.3ad bond (3.10's driver, `v3.7.1`), with its LACP blocks.
    const LACP_3_10: &str = "\
Ethernet Channel Bonding Driver: v3.7.1 (April 27, 2011)

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer3+4 (1)
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0

802.3ad info
LACP rate: fast
Min links: 0
Aggregator selection policy (ad_select): stable
Active Aggregator Info:
\tAggregator ID: 1
\tNumber of ports: 2
\tActor Key: 33
\tPartner Key: 1
\tPartner Mac Address: 00:1c:73:aa:bb:cc

Slave Interface: em1
MII Status: up
Speed: 25000 Mbps
Duplex: full
Link Failure Count: 1
Permanent HW addr: 24:6e:96:00:00:01
Aggregator ID: 1
Slave queue ID: 0

Slave Interface: em2
MII Status: up
Speed: 25000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 24:6e:96:00:00:02
Aggregator ID: 1
Slave queue ID: 0
";

    #[test]
    fn active_backup_with_a_slave_down() {
        let b = parse(ACTIVE_BACKUP_5_15).unwrap();
        assert_eq!(b.mode, "fault-tolerance (active-backup)");
        assert_eq!(b.mii_status, "up");
        assert_eq!(b.active_slave.as_deref(), Some("eth0"));
        assert_eq!(b.slaves.len(), 2);
        assert!(b.slaves[0].is_up());
        assert_eq!(b.slaves[1].name, "eth1");
        assert_eq!(b.slaves[1].mii_status, "down");
        assert_eq!(b.slaves[1].link_failure_count, Some(3));
    }

    #[test]
    fn lacp_blocks_are_skipped() {
        let b = parse(LACP_3_10).unwrap();
        assert_eq!(b.mode, "IEEE 802.3ad Dynamic link aggregation");
        assert_eq!(b.active_slave, None);
        assert_eq!(b.slaves.len(), 2);
        assert!(b.slaves.iter().all(Slave::is_up));
        assert_eq!(b.slaves[0].link_failure_count, Some(1));
    }

    #[test]
    fn not_a_bonding_file() {
        assert_eq!(parse("hello\n"), Err(ParseError::NoMode));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        /// Files as `bond_info_show_master()`/`bond_info_show_slave()` print them (the 5.15
        /// layout above): mode, the bond's MII status, the active slave (`None` as none) and
        /// every slave's name, MII status and failure count read back, in order.
        #[test]
        fn parses_what_the_kernel_prints(
            mode in prop::sample::select(vec![
                "load balancing (round-robin)", "fault-tolerance (active-backup)",
                "load balancing (xor)", "fault-tolerance (broadcast)",
                "IEEE 802.3ad Dynamic link aggregation", "transmit load balancing",
                "adaptive load balancing",
            ]),
            status in prop::sample::select(vec!["up", "down", "going down", "going back"]),
            active in prop::option::of(crate::testgen::kernel_name()),
            slaves in prop::collection::vec((
                crate::testgen::kernel_name(),
                prop::sample::select(vec!["up", "down", "going down", "going back"]),
                any::<u32>(),
            ), 0..=4),
        ) {
            let mut text = format!(
                "Ethernet Channel Bonding Driver: v6.18.0\n\nBonding Mode: {mode}\nPrimary Slave: None\n\
                 Currently Active Slave: {}\nMII Status: {status}\nMII Polling Interval (ms): 100\n\
                 Up Delay (ms): 0\nDown Delay (ms): 0\n",
                active.as_deref().unwrap_or("None"),
            );
            for (name, mii, failures) in &slaves {
                text += &format!(
                    "\nSlave Interface: {name}\nMII Status: {mii}\nSpeed: 10000 Mbps\nDuplex: full\n\
                     Link Failure Count: {failures}\nPermanent HW addr: 52:54:00:12:34:56\nSlave queue ID: 0\n"
                );
            }
            let want = Bond {
                mode: mode.to_string(),
                mii_status: status.to_string(),
                active_slave: active,
                slaves: slaves
                    .into_iter()
                    .map(|(name, mii, f)| Slave { name, mii_status: mii.to_string(), link_failure_count: Some(u64::from(f)) })
                    .collect(),
            };
            prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
