//! Page allocation failure lines of the kernel log (`warn_alloc`), old and new formats:
//!
//! ```text
//! mysqld: page allocation failure. order:4, mode:0x10c0d0                          (2.6.x)
//! runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0                  (2.6.33-4.6)
//! kworker/u16:2: page allocation failure: order:0, mode:0x1080020(GFP_ATOMIC|__GFP_ZERO), nodemask=(null)
//! kworker/0:1: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), nodemask=(null),cpuset=/,mems_allowed=0
//! ```

use crate::needle::Needle;

/// One `page allocation failure` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocFailure {
    /// The task that asked for memory (`runc:[1:CHILD]`, `mysqld`).
    pub comm: String,
    /// The request was for `2^order` contiguous pages.
    pub order: u32,
    /// The GFP mask as printed (`0x10c0d0`).
    pub mode: Option<String>,
    /// Decoded GFP flags printed by newer kernels (`GFP_KERNEL|__GFP_COMP`).
    pub gfp_flags: Option<String>,
}

static MARKER: Needle = Needle::new("page allocation failure");

/// Parses a kernel log message; `None` when it is not a page allocation failure.
pub fn parse(message: &str) -> Option<AllocFailure> {
    let at = MARKER.find(message)?;
    let comm = message[..at]
        .trim_end()
        .trim_end_matches(':')
        .trim()
        .to_string();
    let rest = &message[at + MARKER.len()..];
    let order_at = rest.find("order:")?;
    let digits: String = rest[order_at + "order:".len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let order: u32 = digits.parse().ok()?;
    let mut mode = None;
    let mut gfp_flags = None;
    if let Some(m) = rest.find("mode:") {
        let after = &rest[m + "mode:".len()..];
        let end = after
            .find(|c: char| c == ',' || c == '(' || c.is_whitespace())
            .unwrap_or(after.len());
        if end > 0 {
            mode = Some(after[..end].to_string());
        }
        if after[end..].starts_with('(') {
            if let Some(close) = after[end..].find(')') {
                gfp_flags = Some(after[end + 1..end + close].to_string());
            }
        }
    }
    Some(AllocFailure {
        comm,
        order,
        mode,
        gfp_flags,
    })
}

/// `warn_alloc: N callbacks suppressed` (4.10+; `warn_alloc_failed:` before): the kernel
/// rate-limits failure reports (10 per 5 s) and says later how many it did not print.
pub fn parse_suppressed(message: &str) -> Option<u64> {
    let rest = message
        .trim()
        .strip_prefix("warn_alloc: ")
        .or_else(|| message.trim().strip_prefix("warn_alloc_failed: "))?;
    let (n, tail) = rest.split_once(' ')?;
    (tail == "callbacks suppressed").then(|| n.parse().ok())?
}

/// True for a task of a container runtime: its allocation failures leave pods stuck in
/// ContainerCreating (creating the sandbox's network namespace needs high-order pages).
pub fn is_container_runtime(comm: &str) -> bool {
    let base = comm.split(':').next().unwrap_or(comm);
    matches!(
        base,
        "runc" | "crun" | "conmon" | "dockerd" | "containerd" | "crio" | "docker-runc"
    ) || base.starts_with("containerd-shim")
        || base.starts_with("docker-containerd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_handbook_lines() {
        // The handbook (节点内存碎片化排障处理), both punctuations it shows.
        let f = parse("mysqld: page allocation failure. order:4, mode:0x10c0d0").unwrap();
        assert_eq!(
            f,
            AllocFailure {
                comm: "mysqld".into(),
                order: 4,
                mode: Some("0x10c0d0".into()),
                gfp_flags: None
            }
        );
        let f = parse("runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0").unwrap();
        assert_eq!((f.comm.as_str(), f.order), ("runc:[1:CHILD]", 6));
        assert!(is_container_runtime(&f.comm));
        assert!(!is_container_runtime("mysqld"));
    }

    #[test]
    fn parses_newer_kernel_lines() {
        // Kernel 4.14 / 5.4 format.
        let f = parse("kworker/u16:2: page allocation failure: order:0, mode:0x1080020(GFP_ATOMIC|__GFP_ZERO), nodemask=(null)").unwrap();
        assert_eq!((f.comm.as_str(), f.order), ("kworker/u16:2", 0));
        assert_eq!(f.mode.as_deref(), Some("0x1080020"));
        assert_eq!(f.gfp_flags.as_deref(), Some("GFP_ATOMIC|__GFP_ZERO"));
        // Kernel 5.10+ appends cpuset and mems_allowed.
        let f = parse("containerd-shim: page allocation failure: order:5, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), nodemask=(null),cpuset=/,mems_allowed=0").unwrap();
        assert_eq!(f.order, 5);
        assert_eq!(f.gfp_flags.as_deref(), Some("GFP_KERNEL|__GFP_COMP"));
        assert!(is_container_runtime(&f.comm));
        // Kernel 6.x prints nodemask as a list.
        let f = parse(
            "runc:[2:INIT]: page allocation failure: order:7, mode:0xcc0(GFP_KERNEL), nodemask=0-1",
        )
        .unwrap();
        assert_eq!((f.order, f.mode.as_deref()), (7, Some("0xcc0")));
    }

    #[test]
    fn ignores_other_messages() {
        assert_eq!(parse("Out of memory: Killed process 1234 (java)"), None);
        assert_eq!(parse("page allocation failure: order:x"), None);
        assert_eq!(parse("warn_alloc: 3 callbacks suppressed"), None);
    }

    #[test]
    fn suppressed_reports() {
        // 4.10+ (mm/page_alloc.c warn_alloc's nopage_rs) and 3.x .. 4.9 (warn_alloc_failed).
        assert_eq!(
            parse_suppressed("warn_alloc: 3 callbacks suppressed"),
            Some(3)
        );
        assert_eq!(
            parse_suppressed("warn_alloc_failed: 41 callbacks suppressed"),
            Some(41)
        );
        assert_eq!(
            parse_suppressed("net_ratelimit: 3 callbacks suppressed"),
            None
        );
        assert_eq!(parse_suppressed("warn_alloc: x callbacks suppressed"), None);
        assert_eq!(parse_suppressed("warn_alloc: 3 callbacks"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_near_the_marker(pre in "\\PC{0,12}", post in "[ .:]{0,2}(order:[0-9]{0,12})?[,. ]{0,2}(mode:[0-9a-fx(|)_A-Z]{0,16})?\\PC{0,8}") {
            let _ = parse(&format!("{pre}page allocation failure{post}"));
        }

        /// `warn_alloc()`'s line in its three wordings (2.6: `. order:%d, mode:0x%x`; 2.6.33 to
        /// 4.6: `: order:%d, mode:0x%x`; 4.7+: `: order:%u, mode:%#x(%pGg), nodemask=…`):
        /// comm, order, mode and the decoded flags read back.
        #[test]
        fn parses_what_the_kernel_prints(
            comm in crate::testgen::comm(), order in 0u32..=10, mode in proptest::num::u32::ANY,
            flags in "(GFP_KERNEL|GFP_ATOMIC|GFP_NOWAIT)(\\|__GFP_(COMP|ZERO|NOWARN|HARDWALL)){0,3}",
            wording in 0u8..3,
        ) {
            let (line, gfp_flags) = match wording {
                0 => (format!("{comm}: page allocation failure. order:{order}, mode:{mode:#x}"), None),
                1 => (format!("{comm}: page allocation failure: order:{order}, mode:{mode:#x}"), None),
                _ => (
                    format!("{comm}: page allocation failure: order:{order}, mode:{mode:#x}({flags}), nodemask=(null),cpuset=/,mems_allowed=0"),
                    Some(flags),
                ),
            };
            let want = AllocFailure { comm, order, mode: Some(format!("{mode:#x}")), gfp_flags };
            proptest::prop_assert_eq!(parse(&line), Some(want));
        }
    }
}
