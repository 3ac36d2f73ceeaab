//! Caps on host text copied into output: finding subjects, evidence strings, summaries and
//! status messages carry names and file contents from the host, and a hostile or broken host
//! must not turn them into megabytes of `/findings` (a 10 MB `/proc/uptime` once made a
//! 10.5 MB document). Text over its cap is cut on a character boundary and ends with a
//! visible marker, `…[truncated N bytes]`, that says how much was dropped; the result,
//! marker included, is at most the cap.
//!
//! [`Finding::subject`](crate::Finding::subject) and `Evidence::from` cap as findings are
//! built; [`Collection::bounded`](crate::Collection::bounded), which the agent's scheduler
//! applies to every collection it receives, is the final safety net over everything.

/// A finding's subject: a mount point, a device, a pod UID, a cgroup path. The longest real
/// ones are a CSI volume's mount path (`/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/
/// <pv name>/mount`, ~350 B with a 253 B name) and a pod container's systemd cgroup scope
/// (~170 B). It also keys the finding across runs, so it stays short.
pub const SUBJECT_BYTES: usize = 512;

/// One evidence string: a path, a command-line prefix (200 B), a log line example (300 B),
/// or a joined list of a few of them (a pod's container cgroups, the top processes). 2 KiB
/// holds ten cgroup scope paths; the figures a rule relies on are numbers, not these.
pub const EVIDENCE_BYTES: usize = 2 << 10;

/// A collector's status message: a sentence naming the files it could not read and why,
/// often several joined with `; ` (each ~150–250 B with its path). 2 KiB holds eight.
pub const MESSAGE_BYTES: usize = 2 << 10;

/// A finding's title, summary or one remediation step (each language): one or two sentences
/// with the key figures and a few names. 4 KiB is ten times the longest the rules write with
/// real names.
pub const TEXT_BYTES: usize = 4 << 10;

/// Cuts `s` to at most `max` bytes, ending with `…[truncated N bytes]` when anything was cut
/// (N counts the bytes dropped). Text within the cap is returned unchanged.
pub fn truncate(mut s: String, max: usize) -> String {
    truncate_in_place(&mut s, max);
    s
}

/// [`truncate`] on a `String` in place.
pub fn truncate_in_place(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    // The marker is longest when N has as many digits as the whole length.
    let longest_marker = marker(s.len()).len();
    let mut keep = max.saturating_sub(longest_marker);
    while keep > 0 && !s.is_char_boundary(keep) {
        keep -= 1;
    }
    let dropped = s.len() - keep;
    s.truncate(keep);
    let m = marker(dropped);
    if s.len() + m.len() <= max {
        s.push_str(&m);
    } else {
        // A cap smaller than the marker: keep what fits of the marker alone.
        let mut end = m.len().min(max);
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        s.clear();
        s.push_str(&m[..end]);
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary: host
/// text kept to a size where no marker is wanted (a name, a value quoted in an error).
pub fn prefix(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// [`prefix`] as an owned string.
pub fn prefix_owned(s: &str, max: usize) -> String {
    prefix(s, max).to_string()
}

/// `s` within `max` bytes, with `…` in place of what was cut (one line of a message read by
/// a person; [`truncate`] says how much was cut).
pub fn ellipsis(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    const MARK: &str = "…";
    let mut out = prefix(s, max.saturating_sub(MARK.len())).to_string();
    out.push_str(MARK);
    out
}

fn marker(dropped: usize) -> String {
    format!("…[truncated {dropped} bytes]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_ellipses_end_on_character_boundaries() {
        assert_eq!(prefix("abc", 10), "abc");
        assert_eq!(prefix("abc", 2), "ab");
        assert_eq!(prefix("日本", 4), "日");
        assert_eq!(prefix("日本", 0), "");
        assert_eq!(ellipsis("abc", 3), "abc");
        assert_eq!(ellipsis("abcdef", 5), "ab…");
        assert_eq!(ellipsis("日本語", 7), "日…");
        assert!(ellipsis(&"x".repeat(100), 10).len() <= 10);
    }

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(truncate("node0".into(), SUBJECT_BYTES), "node0");
        let exact = "x".repeat(SUBJECT_BYTES);
        assert_eq!(truncate(exact.clone(), SUBJECT_BYTES), exact);
    }

    #[test]
    fn long_text_is_cut_with_a_marker_counting_the_dropped_bytes() {
        let s = "9".repeat(10_485_760);
        let t = truncate(s, MESSAGE_BYTES);
        assert!(t.len() <= MESSAGE_BYTES, "{}", t.len());
        let (kept, marker) = t.split_once('…').unwrap();
        assert!(kept.bytes().all(|b| b == b'9'));
        assert_eq!(
            marker,
            format!("[truncated {} bytes]", 10_485_760 - kept.len())
        );
        assert!(kept.len() > MESSAGE_BYTES - 40);
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        // 3-byte characters: the cut never splits one.
        let s = "节".repeat(1000);
        for max in [40, 41, 42, 43, 100, 257] {
            let t = truncate(s.clone(), max);
            assert!(t.len() <= max, "{max}: {}", t.len());
            assert!(t.contains("…[truncated "), "{t}");
            let kept = t.split('…').next().unwrap();
            assert_eq!(kept.len() % 3, 0);
            let dropped: usize = t
                .rsplit("truncated ")
                .next()
                .unwrap()
                .trim_end_matches(" bytes]")
                .parse()
                .unwrap();
            assert_eq!(kept.len() + dropped, s.len());
        }
    }

    #[test]
    fn a_cap_smaller_than_the_marker_still_holds() {
        for max in 0..30 {
            let t = truncate("y".repeat(100), max);
            assert!(t.len() <= max, "{max}: {t:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_longer_than_the_cap(s in ".{0,300}", max in 0usize..400) {
            let t = truncate(s.clone(), max);
            proptest::prop_assert!(t.len() <= max.max(s.len().min(max)));
            if s.len() <= max {
                proptest::prop_assert_eq!(t, s);
            } else {
                proptest::prop_assert!(t.len() <= max);
            }
        }
    }
}
