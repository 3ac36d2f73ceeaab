//! `/proc/<pid>/net/route`: the IPv4 routing table of one network namespace
//! (`net/ipv4/fib_trie.c`, `fib_route_seq_show`): a header line, then one line per route,
//! tab-separated: `Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT`,
//! addresses and flags in hexadecimal. Only the default route's interface is taken here.
//!
//! Our own parser: `procfs-core`'s `RouteEntry` parses the same file, but node-doctor needs
//! one field of it and reads the text through `hostfs` anyway.

use std::path::{Path, PathBuf};

use crate::host::HostPaths;
use crate::ReadError;

/// `RTF_UP`.
const RTF_UP: u64 = 0x1;

/// The interface of the default route (destination and mask 0, up) with the lowest metric,
/// `None` when the table has none. Lines that do not parse are skipped.
pub fn default_interface(text: &str) -> Option<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').map(str::trim).collect();
            let (iface, dest, flags, metric, mask) =
                (*f.first()?, *f.get(1)?, *f.get(3)?, *f.get(6)?, *f.get(7)?);
            let flags = u64::from_str_radix(flags, 16).ok()?;
            let metric: u64 = metric.parse().ok()?;
            (dest == "00000000" && mask == "00000000" && flags & RTF_UP != 0 && !iface.is_empty())
                .then(|| (metric, iface.to_string()))
        })
        .min_by_key(|(metric, _)| *metric)
        .map(|(_, iface)| iface)
}

/// `<root>/proc/<pid>/net/route`.
pub fn path(host: &HostPaths, pid: u32) -> PathBuf {
    host.proc_pid(pid).join("net/route")
}

/// Reads the table at `path` and returns its default route's interface.
pub fn read_default_interface(path: &Path) -> Result<Option<String>, ReadError> {
    let text = crate::hostfs::read_text(path, crate::hostfs::cap::UDP_TABLE)?;
    Ok(default_interface(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// This VM's table (kernel 6.18), and a node's with a second default route of higher
    /// metric and a pod route through flannel.
    const LINUX_6_18: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       \neth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0                                                                               \neth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0                                                                               \n";
    const TWO_DEFAULTS: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\nens4\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\nbond0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\nflannel.1\t0001F40A\t0001F40A\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    #[test]
    fn the_default_route_with_the_lowest_metric() {
        assert_eq!(default_interface(LINUX_6_18).as_deref(), Some("eth0"));
        assert_eq!(default_interface(TWO_DEFAULTS).as_deref(), Some("bond0"));
        assert_eq!(default_interface("Iface\tDestination\n"), None);
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = default_interface(&text);
        }

        /// Tables as `fib_route_seq_show()` prints them (`%s\t%08X\t%08X\t%04X\t%d\t%u\t%d\t
        /// %08X\t%d\t%u\t%u` padded to 127 columns): the interface read back is the one of
        /// the up default route with the lowest metric (the first of equals), none without.
        #[test]
        fn parses_what_the_kernel_prints(
            routes in prop::collection::vec((
                "[a-z][a-z0-9_.-]{0,14}", any::<bool>(), any::<(u32, u32, u32)>(),
                any::<u16>(), 0u32..=i32::MAX as u32,
            ), 0..8),
        ) {
            let mut text = format!("{:<127}\n", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT");
            let mut best: Option<(u32, &str)> = None;
            for (iface, default, (dest, gw, mask), flags, metric) in &routes {
                let (dest, mask) = if *default { (0, 0) } else { (*dest, *mask) };
                let line = format!("{iface}\t{dest:08X}\t{gw:08X}\t{flags:04X}\t0\t0\t{metric}\t{mask:08X}\t0\t0\t0");
                text += &format!("{line:<127}\n");
                let usable = dest == 0 && mask == 0 && flags & 1 != 0;
                if usable && best.is_none_or(|(m, _)| *metric < m) {
                    best = Some((*metric, iface));
                }
            }
            prop_assert_eq!(default_interface(&text), best.map(|(_, i)| i.to_string()));
        }
    }
}
