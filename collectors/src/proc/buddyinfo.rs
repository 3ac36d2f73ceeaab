//! `<root>/proc/buddyinfo`: free blocks per NUMA node, zone and order.
//!
//! ```text
//! Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3
//! Node 0, zone   Normal   2431   1434    901   1074    574    355    392    249    135    112   1490
//! ```
//!
//! Column `i` counts free blocks of `2^i` contiguous pages. The number of orders depends on the
//! kernel configuration (`MAX_ORDER`: 11 on x86-64, up to 14 elsewhere): any number is accepted.
//!
//! Our own parser: `procfs-core` has no model of `buddyinfo`.

use crate::host::HostPaths;
use crate::ReadError;

/// Orders beyond this are ignored (no architecture has more; keeps shifts in range).
pub const MAX_ORDERS: usize = 32;

/// Free blocks of one zone of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneFree {
    /// NUMA node number.
    pub node: u32,
    /// `DMA`, `DMA32`, `Normal`, `HighMem`, `Movable`, `Device`.
    pub zone: String,
    /// `blocks[i]`: free blocks of order `i` (`2^i` pages each).
    pub blocks: Vec<u64>,
}

impl ZoneFree {
    /// Free pages in blocks of order `order` or larger.
    pub fn free_pages_at_or_above(&self, order: usize) -> u64 {
        self.blocks
            .iter()
            .enumerate()
            .skip(order)
            .fold(0u64, |acc, (i, n)| {
                acc.saturating_add(n.saturating_mul(1u64 << i))
            })
    }

    /// All free pages of the zone.
    pub fn free_pages(&self) -> u64 {
        self.free_pages_at_or_above(0)
    }

    /// The highest order with at least one free block; `None` when the zone has none.
    pub fn highest_free_order(&self) -> Option<usize> {
        self.blocks.iter().rposition(|n| *n > 0)
    }

    /// The unusable free space index for `order` (the kernel's `extfrag/unusable_index`):
    /// the share of free memory, 0..=1, in blocks too small for an order-`order` request.
    /// A zone with no free memory counts as entirely unusable (1.0), as in the kernel.
    pub fn unusable_index(&self, order: usize) -> f64 {
        let free = self.free_pages();
        if free == 0 {
            return 1.0;
        }
        let usable = self.free_pages_at_or_above(order);
        (free - usable.min(free)) as f64 / free as f64
    }
}

/// Parsed `/proc/buddyinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Buddyinfo {
    pub zones: Vec<ZoneFree>,
}

/// Why buddyinfo text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct BuddyinfoParseError {
    pub line: usize,
    pub message: String,
}

/// Parses `/proc/buddyinfo` text. Blank lines are skipped; any other line that is not
/// `Node <n>, zone <name> <counts...>` is an error.
pub fn parse(text: &str) -> Result<Buddyinfo, BuddyinfoParseError> {
    let mut zones = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| BuddyinfoParseError {
            line: i + 1,
            message,
        };
        let rest = line
            .trim_start()
            .strip_prefix("Node")
            .ok_or_else(|| err("does not start with \"Node\"".into()))?;
        let (node, rest) = rest
            .split_once(',')
            .ok_or_else(|| err("no ',' after the node number".into()))?;
        let node: u32 = node
            .trim()
            .parse()
            .map_err(|_| err(format!("node {:?} is not a number", node.trim())))?;
        let mut words = rest.split_whitespace();
        if words.next() != Some("zone") {
            return Err(err("no \"zone\" after the node".into()));
        }
        let zone = words
            .next()
            .ok_or_else(|| err("no zone name".into()))?
            .to_string();
        let blocks = words
            .take(MAX_ORDERS)
            .map(|w| {
                w.parse::<u64>()
                    .map_err(|_| err(format!("count {w:?} is not a number")))
            })
            .collect::<Result<Vec<u64>, _>>()?;
        if blocks.is_empty() {
            return Err(err(format!("zone {zone} has no counts")));
        }
        zones.push(ZoneFree { node, zone, blocks });
    }
    Ok(Buddyinfo { zones })
}

/// Reads `<root>/proc/buddyinfo`.
pub fn read(host: &HostPaths) -> Result<Buddyinfo, ReadError> {
    let path = host.proc_file("buddyinfo");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::COUNTERS)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel 6.18.44 (this VM, 2 vCPU, x86-64), healthy.
    const REAL_6_18: &str = "\
Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 
Node 0, zone    DMA32      1      1      4      2      5      4      3      3      4      2    752 
Node 0, zone   Normal   2431   1434    901   1074    574    355    392    249    135    112   1490 
";

    /// The handbook's fragmented node (节点内存碎片化排障处理), kernel 3.10 era.
    pub const HANDBOOK: &str = "\
Node 0, zone DMA 1 0 1 0 2 1 1 0 1 1 3
Node 0, zone DMA32 2725 624 489 178 0 0 0 0 0 0 0
Node 0, zone Normal 1163 1101 932 222 0 0 0 0 0 0 0
";

    /// Two NUMA nodes, arm64 with 64 KiB pages (MAX_ORDER 14 columns), kernel 5.10.
    const ARM64_TWO_NODES: &str = "\
Node 0, zone   Normal    120     80     40     20     10      5      3      2      1      1      0      0      1      2 
Node 1, zone   Normal      3      0      0      0      0      0      0      0      0      0      0      0      0      0 
";

    #[test]
    fn parses_real_6_18() {
        let b = parse(REAL_6_18).unwrap();
        assert_eq!(b.zones.len(), 3);
        let n = &b.zones[2];
        assert_eq!((n.node, n.zone.as_str(), n.blocks.len()), (0, "Normal", 11));
        assert_eq!(n.blocks[0], 2431);
        assert_eq!(n.blocks[10], 1490);
        assert_eq!(n.highest_free_order(), Some(10));
        // Free pages below order 4: 2431 + 1434*2 + 901*4 + 1074*8.
        let small = 2431.0 + 2868.0 + 3604.0 + 8592.0;
        let expect = small / n.free_pages() as f64;
        assert!((n.unusable_index(4) - expect).abs() < 1e-12);
        assert!(expect > 0.01 && expect < 0.011, "{expect}");
        let dma = &b.zones[0];
        assert_eq!(dma.free_pages(), 256 + 512 + 3 * 1024);
    }

    #[test]
    fn handbook_zones_have_nothing_at_order_4() {
        let b = parse(HANDBOOK).unwrap();
        let normal = &b.zones[2];
        assert_eq!(normal.free_pages(), 1163 + 1101 * 2 + 932 * 4 + 222 * 8);
        assert_eq!(normal.free_pages_at_or_above(4), 0);
        assert_eq!(normal.free_pages_at_or_above(3), 222 * 8);
        assert_eq!(normal.highest_free_order(), Some(3));
        assert_eq!(normal.unusable_index(4), 1.0);
        let dma32 = &b.zones[1];
        assert_eq!(dma32.highest_free_order(), Some(3));
        // Order 3: only the 178 order-3 blocks are usable.
        let free = dma32.free_pages() as f64;
        assert!((dma32.unusable_index(3) - (free - 178.0 * 8.0) / free).abs() < 1e-12);
    }

    #[test]
    fn parses_multiple_nodes_and_more_orders() {
        let b = parse(ARM64_TWO_NODES).unwrap();
        assert_eq!(b.zones.len(), 2);
        assert_eq!(b.zones[0].blocks.len(), 14);
        assert_eq!(b.zones[0].highest_free_order(), Some(13));
        assert_eq!(b.zones[1].node, 1);
        assert_eq!(b.zones[1].highest_free_order(), Some(0));
    }

    #[test]
    fn empty_zone_is_entirely_unusable() {
        let z = ZoneFree {
            node: 0,
            zone: "Normal".into(),
            blocks: vec![0; 11],
        };
        assert_eq!(z.highest_free_order(), None);
        assert_eq!(z.unusable_index(4), 1.0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("Node x, zone Normal 1 2").is_err());
        assert!(parse("Node 0 zone Normal 1 2").is_err());
        assert!(parse("Node 0, zone Normal").is_err());
        assert!(parse("Node 0, zone Normal 1 -2").is_err());
        assert!(parse("hello").is_err());
        assert_eq!(parse("\n\n").unwrap().zones.len(), 0);
    }

    #[test]
    fn huge_counts_saturate() {
        let line = format!(
            "Node 0, zone Normal {}",
            vec![u64::MAX.to_string(); 40].join(" ")
        );
        let b = parse(&line).unwrap();
        assert_eq!(b.zones[0].blocks.len(), MAX_ORDERS);
        assert_eq!(b.zones[0].free_pages(), u64::MAX);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_buddyinfo_like(
            node in "[0-9]{0,12}", zone in "[A-Za-z0-9]{0,8}",
            counts in proptest::collection::vec("[0-9]{0,21}", 0..40)
        ) {
            let text = format!("Node {node}, zone {zone} {}\n", counts.join(" "));
            if let Ok(b) = parse(&text) {
                for z in &b.zones {
                    let u = z.unusable_index(4);
                    proptest::prop_assert!((0.0..=1.0).contains(&u));
                    let _ = z.highest_free_order();
                }
            }
        }
        /// Lines as `frag_show_print()` prints them (`Node %d, zone %8s ` then `%6lu ` per
        /// order, 11 orders on x86-64, up to 14 with 64 KiB pages): nodes, zone names and
        /// every count read back in order.
        #[test]
        fn parses_what_the_kernel_prints(
            zones in proptest::collection::vec(
                (0u32..1024, "(DMA|DMA32|Normal|Movable|HighMem|Device)",
                 proptest::collection::vec(proptest::num::u64::ANY, 11..=14)),
                0..8,
            ),
        ) {
            let mut text = String::new();
            for (node, zone, blocks) in &zones {
                text += &format!("Node {node}, zone {zone:>8} ");
                for b in blocks {
                    text += &format!("{b:>6} ");
                }
                text += "\n";
            }
            let want = zones
                .into_iter()
                .map(|(node, zone, blocks)| ZoneFree { node, zone, blocks })
                .collect();
            proptest::prop_assert_eq!(parse(&text), Ok(Buddyinfo { zones: want }));
        }
    }
}
