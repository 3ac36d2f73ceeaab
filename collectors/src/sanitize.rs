//! Host text made safe to show to a person: the one sanitiser of the human formats.
//!
//! Names and messages read from the host (pod and process names, file names, mount points,
//! kernel log lines) may carry characters that act on a terminal or a reader instead of being
//! shown: C0 controls (a newline splits one printed line into two, ESC starts a terminal
//! escape sequence that can recolour, retitle or rewrite the screen), DEL, C1 controls (8-bit
//! CSI `U+009B` is an escape sequence on some terminals), the bidirectional overrides,
//! embeddings, isolates and marks (`U+202E` makes `gpj.exe` read as `exe.jpg`; "Trojan
//! Source"), and the Unicode line and paragraph separators (a line break to some viewers).
//!
//! [`visible`] replaces each of them with a visible escape: `\n`, `\r`, `\t`, `\x1b` for the
//! other C0 controls and DEL, `\u{202e}` for the rest. Everything else, other scripts
//! included, is kept. Backslashes are not doubled: the escapes are for a person to read, not
//! to decode, and doubling would garble commands that contain `\n` on purpose.
//!
//! The `check` table and the HTML page pass every piece of host text through [`visible`]; the
//! JSON contract keeps the exact text (JSON escapes control characters itself), and printed
//! commands never contain these characters (see [`crate::shell`], which renders them with
//! `$'\x..'` escapes).

use std::borrow::Cow;
use std::fmt::Write;

/// True for a character that must not reach a terminal or a page as is.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'          // C0 controls, newline and ESC among them
        | '\u{7f}'                  // DEL
        | '\u{80}'..='\u{9f}'       // C1 controls (8-bit CSI is U+009B)
        | '\u{061c}'                // ARABIC LETTER MARK
        | '\u{200e}' | '\u{200f}'   // LRM, RLM
        | '\u{2028}' | '\u{2029}'   // LINE and PARAGRAPH SEPARATOR
        | '\u{202a}'..='\u{202e}'   // LRE, RLE, PDF, LRO, RLO
        | '\u{2066}'..='\u{2069}' // LRI, RLI, FSI, PDI
    )
}

/// `s` with every [`is_unsafe`] character replaced by a visible escape; borrowed when there
/// is none.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_visible(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if is_unsafe(c) && (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if is_unsafe(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_become_visible_escapes() {
        assert_eq!(
            visible("a\nb\r\tc\x1b[31md\x07\x7f"),
            "a\\nb\\r\\tc\\x1b[31md\\x07\\x7f"
        );
        assert_eq!(visible("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(
            visible("gpj.\u{202e}exe \u{2066}i\u{2069} \u{200e}\u{200f}\u{61c}"),
            "gpj.\\u{202e}exe \\u{2066}i\\u{2069} \\u{200e}\\u{200f}\\u{61c}"
        );
        assert_eq!(visible("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}");
        assert_eq!(visible("\0"), "\\x00");
    }

    #[test]
    fn ordinary_text_is_kept_and_borrowed() {
        for s in [
            "",
            "/var/lib/docker",
            "kube-system/coredns-5d78c9869d-x2x4b",
            "节点磁盘爆满排障处理",
            "naïve café — ok",
            "a\\nb (a literal backslash)",
            "$(touch x); `y` | z && 'q' \"r\"",
        ] {
            assert!(matches!(visible(s), Cow::Borrowed(_)), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn output_has_no_unsafe_character(s in proptest::prelude::any::<String>()) {
            let v = visible(&s);
            proptest::prop_assert!(!v.chars().any(is_unsafe), "{v:?}");
            // Safe text is unchanged.
            if !s.chars().any(is_unsafe) {
                proptest::prop_assert_eq!(v.as_ref(), s.as_str());
            }
        }
    }
}
