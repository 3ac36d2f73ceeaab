//! What `explain` does to pasted text before matching: strip log and `kubectl` noise, reduce
//! the rest to a compact form that ignores case, spacing, punctuation and PDF line wrapping
//! (Chinese included), and correct typos against the catalogue's own words.
//!
//! The compact form keeps only letters, digits and CJK characters, lower-cased, and remembers
//! where the original text had a break (whitespace, punctuation, a CJK character's edge). A
//! pattern matches when its compact form occurs between two breaks, so `no space\n left on
//! device`, `sandbo\nx` (a PDF wrap), `Couldn't load target \`KUBE-MARK-DROP'` and
//! `'KUBE-MARK-DROP'`, `E 4053` and `E-4053` all match, while `E4041` does not match inside
//! `E40410` nor `oomkilled` inside `roomkilled`.
//!
//! Edit distance is hand-written (optimal string alignment, a few lines) rather than taken from
//! a crate: only this one function is needed, on short ASCII words.

use std::borrow::Cow;
use std::collections::HashMap;

/// Text reduced to lower-cased letters, digits and CJK characters, with the break positions of
/// the original.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compact {
    pub s: String,
    /// Indexed by byte offset `0..=s.len()`: true where the original had a break there (start
    /// and end included). Only offsets on char boundaries are meaningful.
    brk: Vec<bool>,
}

/// A run of compact text between two breaks: an ASCII word (`e4041`, `quota`) or one CJK
/// character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub start: usize,
    pub end: usize,
}

/// A CJK ideograph, kana or hangul: each is a word of its own (no spaces in Chinese).
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30ff}'
        | '\u{3400}'..='\u{4dbf}'
        | '\u{4e00}'..='\u{9fff}'
        | '\u{ac00}'..='\u{d7af}'
        | '\u{f900}'..='\u{faff}')
}

/// Full-width ASCII forms (`０`–`９`, `Ａ`–`Ｚ`, `：`) as their ASCII counterparts.
fn fold_width(c: char) -> char {
    match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
        _ => c,
    }
}

impl Compact {
    pub fn new(text: &str) -> Compact {
        let mut s = String::with_capacity(text.len());
        let mut brk = Vec::with_capacity(text.len() + 1);
        let mut pending = true; // the start is a break
        for c in text.chars().map(fold_width) {
            if !c.is_alphanumeric() {
                pending = true;
                continue;
            }
            let cjk = is_cjk(c);
            let at = s.len();
            for l in c.to_lowercase() {
                s.push(l);
            }
            brk.resize(s.len(), false);
            brk[at] = pending || cjk;
            pending = cjk;
        }
        brk.push(true); // the end is a break
        Compact { s, brk }
    }

    /// A break at byte offset `i` (false for offsets that are not char boundaries).
    pub fn is_break(&self, i: usize) -> bool {
        self.brk.get(i).copied().unwrap_or(false)
    }

    /// The runs between breaks.
    pub fn tokens(&self) -> Vec<Token> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, _) in self.s.char_indices().skip(1) {
            if self.brk[i] {
                out.push(Token { start, end: i });
                start = i;
            }
        }
        if start < self.s.len() {
            out.push(Token {
                start,
                end: self.s.len(),
            });
        }
        out
    }

    pub fn token_str(&self, t: Token) -> &str {
        &self.s[t.start..t.end]
    }

    /// Rebuilds the compact text with some tokens replaced (typo corrections); breaks stay at
    /// token edges.
    pub fn with_replacements(&self, repl: &[(Token, &str)]) -> Compact {
        let mut s = String::with_capacity(self.s.len() + 16);
        let mut brk = Vec::with_capacity(self.s.len() + 17);
        let mut at = 0;
        let copy = |s: &mut String, brk: &mut Vec<bool>, from: usize, to: usize| {
            s.push_str(&self.s[from..to]);
            brk.extend_from_slice(&self.brk[from..to]);
        };
        for (t, new) in repl {
            copy(&mut s, &mut brk, at, t.start);
            let start = s.len();
            s.push_str(new);
            brk.resize(s.len(), false);
            if let Some(b) = brk.get_mut(start) {
                *b = true;
            }
            at = t.end;
        }
        copy(&mut s, &mut brk, at, self.s.len());
        brk.push(true);
        Compact { s, brk }
    }
}

/// Weight of matched text for ranking: a CJK character says about as much as two letters.
pub fn weight(s: &str) -> usize {
    s.chars().map(|c| if is_cjk(c) { 2 } else { 1 }).sum()
}

/// One piece of a compiled pattern fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Compact literal text.
    Lit(String),
    /// `#` in a pattern: one or more ASCII digits.
    Num,
}

/// A catalogue pattern compiled for matching against [`Compact`] text: `*`-separated fragments
/// that must occur in order, each starting and ending at a break. A trailing `*` lets the last
/// word run on (`Code: Throttling*` matches `Throttling.User` and `Throttlingxxx`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub source: String,
    pub fragments: Vec<Vec<Piece>>,
    /// The pattern ends with `*`: no break needed after its last fragment.
    pub open_end: bool,
    /// Ranking weight of the literal text (see [`weight`]), plus one per number.
    pub weight: usize,
}

impl Pattern {
    /// `None` when the pattern has no literal text, or a fragment begins with a number.
    pub fn compile(source: &str) -> Option<Pattern> {
        let mut fragments = Vec::new();
        let mut w = 0;
        for frag in source.split('*') {
            let mut pieces = Vec::new();
            for (i, lit) in frag.split('#').enumerate() {
                if i > 0 {
                    pieces.push(Piece::Num);
                    w += 1;
                }
                let c = Compact::new(lit).s;
                if !c.is_empty() {
                    w += weight(&c);
                    pieces.push(Piece::Lit(c));
                }
            }
            match pieces.first() {
                None => continue,
                Some(Piece::Num) => return None,
                Some(Piece::Lit(_)) => fragments.push(pieces),
            }
        }
        (!fragments.is_empty()).then_some(Pattern {
            source: source.to_string(),
            fragments,
            open_end: source.trim_end().ends_with('*'),
            weight: w,
        })
    }

    /// Whether every fragment occurs in `text`, in order, each between breaks.
    pub fn matches(&self, text: &Compact) -> bool {
        let mut from = 0;
        let last = self.fragments.len().saturating_sub(1);
        for (i, frag) in self.fragments.iter().enumerate() {
            match find_fragment(text, frag, from, self.open_end && i == last) {
                Some(end) => from = end,
                None => return false,
            }
        }
        true
    }
}

/// The end of the first occurrence of `frag` at or after `from` that starts and ends at a break
/// (`open`: need not end at one).
fn find_fragment(text: &Compact, frag: &[Piece], from: usize, open: bool) -> Option<usize> {
    let Some(Piece::Lit(first)) = frag.first() else {
        return None;
    };
    let s = text.s.as_str();
    let mut search = from;
    while let Some(at) = s.get(search..).and_then(|rest| rest.find(first.as_str())) {
        let start = search + at;
        if text.is_break(start) {
            if let Some(end) = match_rest(s, start + first.len(), &frag[1..]) {
                if open || text.is_break(end) {
                    return Some(end);
                }
            }
        }
        search = start + s[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

fn match_rest(s: &str, mut at: usize, pieces: &[Piece]) -> Option<usize> {
    for p in pieces {
        match p {
            Piece::Lit(l) => {
                if !s.get(at..)?.starts_with(l.as_str()) {
                    return None;
                }
                at += l.len();
            }
            Piece::Num => {
                let n = s.get(at..)?.bytes().take_while(u8::is_ascii_digit).count();
                if n == 0 {
                    return None;
                }
                at += n;
            }
        }
    }
    Some(at)
}

/// Endings a code may carry when people retype it (`ENIIPCapacityExceeded` for
/// `ENIIPCapacityExceed`, `VSwitchAvailableIpNotExists`).
pub const CODE_SUFFIXES: &[&str] = &["ed", "d", "s", "es"];

/// A code compiled for finding it inside text: its compact form, and where a break may occur
/// inside it (where the code itself has a separator, and between a letter prefix and its
/// number: `E 4053`, `E-4053`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeForm {
    pub compact: String,
    inner_breaks: Vec<usize>,
}

impl CodeForm {
    pub fn new(code: &str) -> CodeForm {
        let c = Compact::new(code);
        let mut inner_breaks: Vec<usize> = (1..c.s.len()).filter(|&i| c.is_break(i)).collect();
        let b = c.s.as_bytes();
        if let Some(i) = b.iter().position(u8::is_ascii_digit) {
            if i > 0 && b[..i].iter().all(u8::is_ascii_alphabetic) {
                inner_breaks.push(i);
            }
        }
        CodeForm {
            compact: c.s,
            inner_breaks,
        }
    }

    /// Where the code occurs in `text` as a word of its own (breaks allowed only where the code
    /// allows them; a known suffix may follow).
    pub fn find_in(&self, text: &Compact) -> bool {
        if self.compact.is_empty() {
            return false;
        }
        let s = text.s.as_str();
        let mut search = 0;
        while let Some(at) = s
            .get(search..)
            .and_then(|rest| rest.find(self.compact.as_str()))
        {
            let start = search + at;
            let end = start + self.compact.len();
            let inner_ok = (start + 1..end)
                .filter(|&i| s.is_char_boundary(i))
                .all(|i| !text.is_break(i) || self.inner_breaks.contains(&(i - start)));
            let end_ok = text.is_break(end)
                || CODE_SUFFIXES
                    .iter()
                    .any(|suf| s[end..].starts_with(suf) && text.is_break(end + suf.len()));
            if text.is_break(start) && inner_ok && end_ok {
                return true;
            }
            search = start + s[start..].chars().next().map_or(1, char::len_utf8);
        }
        false
    }

    /// Whether a whole query, reduced to compact form, is this code (or it with a known suffix
    /// added or dropped).
    pub fn equals(&self, query: &str) -> bool {
        let c = self.compact.as_str();
        if c.is_empty() {
            return false;
        }
        query == c
            || CODE_SUFFIXES
                .iter()
                .any(|suf| query.strip_suffix(suf) == Some(c) || c.strip_suffix(suf) == Some(query))
    }
}

/// Optimal string alignment distance (insertions, deletions, substitutions and transpositions
/// of neighbours each cost 1), on bytes; gives up (returns `max + 1`) once it exceeds `max`.
pub fn edit_distance(a: &[u8], b: &[u8], max: usize) -> usize {
    if a.len().abs_diff(b.len()) > max {
        return max + 1;
    }
    let n = b.len();
    let mut prev2 = vec![0usize; n + 1];
    let mut prev: Vec<usize> = (0..=n).collect();
    let mut cur = vec![0usize; n + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=n {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
            row_min = row_min.min(v);
        }
        if row_min > max {
            return max + 1;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[n]
}

/// How many edits a word of `len` letters may carry and still count as that word: none up to
/// 3 letters, 1 up to 8, 2 up to 15, 3 beyond (a search box's tolerance, relative to length).
pub fn tolerance(len: usize) -> usize {
    match len {
        0..=3 => 0,
        4..=8 => 1,
        9..=15 => 2,
        _ => 3,
    }
}

/// Corrects the all-letter words of `text` that the catalogue does not know to the closest
/// word it does know (`vocab`: sorted, unique, lower-case ASCII words of at least 4 letters).
/// Returns the corrected text and the `(typed, corrected)` pairs, or `None` when nothing was
/// corrected.
pub fn correct(text: &Compact, vocab: &[String]) -> Option<(Compact, Vec<(String, String)>)> {
    let mut repl: Vec<(Token, &str)> = Vec::new();
    let mut pairs: Vec<(String, String)> = Vec::new();
    // Each distinct word is looked up once (a describe dump repeats its words many times).
    let mut seen: HashMap<&str, Option<&str>> = HashMap::new();
    for t in text.tokens() {
        let w = text.token_str(t);
        if w.len() < 4 || w.len() > 40 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
            continue;
        }
        let fix = *seen.entry(w).or_insert_with(|| {
            let f = closest(w, vocab);
            if let Some(f) = f {
                pairs.push((w.to_string(), f.to_string()));
            }
            f
        });
        if let Some(f) = fix {
            repl.push((t, f));
        }
    }
    if repl.is_empty() {
        return None;
    }
    Some((text.with_replacements(&repl), pairs))
}

/// The vocabulary word closest to `w` within its tolerance, if `w` is not a word itself and
/// exactly one word is closest. Only words sharing the first letter (or with the first two
/// letters swapped) are compared: typos rarely hit the first letter, and it keeps a long paste
/// fast.
fn closest<'v>(w: &str, vocab: &'v [String]) -> Option<&'v str> {
    if vocab.binary_search_by(|v| v.as_str().cmp(w)).is_ok() {
        return None;
    }
    let b = w.as_bytes();
    let tol = tolerance(b.len());
    let mut best: Option<(usize, &str)> = None;
    let mut tie = false;
    let firsts: &[u8] = if b.len() > 1 && b[1] != b[0] {
        &b[..2]
    } else {
        &b[..1]
    };
    for (k, &first) in firsts.iter().enumerate() {
        let from = vocab.partition_point(|v| v.as_bytes().first() < Some(&first));
        for v in vocab[from..]
            .iter()
            .take_while(|v| v.as_bytes().first() == Some(&first))
        {
            let vb = v.as_bytes();
            // Via the second letter only for a swap of the first two.
            if k == 1 && !(vb.len() > 1 && vb[1] == b[0]) {
                continue;
            }
            let t = tol.min(tolerance(vb.len()));
            if t == 0 || vb.len().abs_diff(b.len()) > t {
                continue;
            }
            let d = edit_distance(b, vb, t);
            if d > t {
                continue;
            }
            match best {
                Some((bd, _)) if d > bd => {}
                Some((bd, _)) if d == bd => tie = true,
                _ => {
                    best = Some((d, v.as_str()));
                    tie = false;
                }
            }
        }
    }
    match best {
        Some((_, v)) if !tie => Some(v),
        _ => None,
    }
}

/// Removes what logs and `kubectl` wrap around a message: klog headers (`E1123 12:00:00.123456
/// 1234 file.go:123] `, whose `W1001` would otherwise read as a TKE code), journal prefixes
/// (`Nov 23 12:00:00 node-1 kubelet[1234]: `), dmesg stamps (`[12345.678901] `), event repeat
/// counts (`(x4307 over 16h)`) and `(combined from similar events):`.
pub fn strip_noise(text: &str) -> Cow<'_, str> {
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut l = line;
        let mut again = true;
        while again {
            again = false;
            let t = l.trim_start();
            for strip in [journal_prefix, dmesg_stamp, kernel_tag] {
                if let Some(rest) = strip(t) {
                    l = rest;
                    again = true;
                    changed = true;
                    break;
                }
            }
            if !again {
                if let Some(rest) = klog_header(t) {
                    l = rest;
                    changed = true;
                    again = true;
                }
            }
        }
        out.push_str(l);
    }
    for noise in ["(combined from similar events)"] {
        if out.contains(noise) {
            out = out.replace(noise, " ");
            changed = true;
        }
    }
    if out.contains("(x") {
        let cleaned = strip_repeat_counts(&out);
        if cleaned != out {
            out = cleaned;
            changed = true;
        }
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// `(x4307 over 16h)` → ` `.
fn strip_repeat_counts(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("(x") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let close = tail.find(')');
        match close {
            Some(c) if digits > 0 && c < 40 && tail[digits..].starts_with(" over ") => {
                out.push(' ');
                rest = &tail[c + 1..];
            }
            _ => {
                out.push_str("(x");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn take_digits(s: &str, min: usize, max: usize) -> Option<&str> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    (min..=max).contains(&n).then(|| &s[n..])
}

/// `HH:MM:SS`
fn clock(s: &str) -> Option<&str> {
    let s = take_digits(s, 2, 2)?.strip_prefix(':')?;
    let s = take_digits(s, 2, 2)?.strip_prefix(':')?;
    take_digits(s, 2, 2)
}

/// `E1123 12:00:00.123456    1234 proxier.go:1562] `
fn klog_header(s: &str) -> Option<&str> {
    let s = s.strip_prefix(['I', 'W', 'E', 'F'])?;
    let s = take_digits(s, 4, 4)?.strip_prefix(' ')?;
    let s = clock(s)?;
    let s = s.strip_prefix('.').and_then(|r| take_digits(r, 1, 9))?;
    let s = s.trim_start();
    let s = take_digits(s, 1, 10)?.strip_prefix(' ')?;
    let end = s.find("] ").or_else(|| s.find(']'))?;
    (end < 80 && !s[..end].contains(' ')).then(|| s[end + 1..].trim_start())
}

/// `Nov 23 12:00:00 node-1 kubelet[1234]: ` (the host and tag have no spaces).
fn journal_prefix(s: &str) -> Option<&str> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = s.get(..3)?;
    if !MONTHS.contains(&m) {
        return None;
    }
    let s = s[3..].trim_start();
    let s = take_digits(s, 1, 2)?.strip_prefix(' ')?;
    let s = clock(s)?.strip_prefix(' ')?;
    let (_host, s) = s.split_once(' ')?;
    let (tag, rest) = s.split_once(": ")?;
    (!tag.contains(' ') && !tag.is_empty() && tag.len() < 64).then_some(rest)
}

/// `[12345.678901] ` or `[ 2418.123456] `.
fn dmesg_stamp(s: &str) -> Option<&str> {
    let s = s.strip_prefix('[')?.trim_start();
    let s = take_digits(s, 1, 12)?.strip_prefix('.')?;
    let s = take_digits(s, 1, 9)?.strip_prefix(']')?;
    Some(s.trim_start())
}

/// `kernel: ` after a journal prefix was removed.
fn kernel_tag(s: &str) -> Option<&str> {
    s.strip_prefix("kernel: ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Pattern::compile(pattern)
            .unwrap()
            .matches(&Compact::new(text))
    }

    #[test]
    fn compact_ignores_case_spacing_punctuation_and_wrapping() {
        assert_eq!(
            Compact::new("No  space\nleft, ON device!").s,
            "nospaceleftondevice"
        );
        assert!(m(
            "no space left on device",
            "mkdir x: no space\n left on device"
        ));
        // A PDF wraps a word in the middle.
        assert!(m(
            "Failed create pod sandbox",
            "Failed create pod sandbo\n\nx: rpc"
        ));
        // Backtick or apostrophe around the chain name.
        assert!(m(
            "Couldn't load target 'KUBE-MARK-DROP'",
            "Couldn't load target `KUBE-MARK-DROP':No such file"
        ));
        // Chinese with or without spaces and full-width punctuation.
        assert!(m("发生系统 OOM", "如果发生系统OOM，Pod 中容器"));
        assert!(m("kube-proxy 不间断 panic", " kube-proxy 不间断 panic"));
        assert_eq!(Compact::new("ＡＢＣ１２３").s, "abc123");
    }

    #[test]
    fn patterns_start_and_end_at_word_edges() {
        assert!(!m("oomkilled", "roomkilled"));
        assert!(!m("no space left on device", "no space left on devices"));
        assert!(m("a * c", "a b c"));
        assert!(!m("c * a", "a b c"));
        assert!(m("Code: Throttling*", "Code: Throttling.User"));
        assert!(m("Code: Throttling*", "Code: Throttlingxxx"));
        assert!(!m("Code: Throttling", "Code: Throttlingxxx"));
        // `#` is a number.
        assert!(m("memory: #m", "limits:\n  memory:  1024m\n"));
        assert!(!m("memory: #m", "memory: 1024Mi"));
        assert!(!m("memory: #m", "memory: m"));
        assert!(Pattern::compile("#m").is_none());
        assert!(Pattern::compile("***").is_none());
        assert_eq!(Pattern::compile("ab 子网").unwrap().weight, 6);
    }

    #[test]
    fn codes_as_words_with_the_breaks_people_type() {
        let c = CodeForm::new("E4053");
        for yes in [
            "E4053",
            "e 4053",
            "code E-4053 here",
            "错误码E4053。",
            "(E_4053)",
        ] {
            assert!(c.find_in(&Compact::new(yes)), "{yes}");
        }
        for no in ["E40531", "XE4053", "the 4053", "E4 053"] {
            assert!(!c.find_in(&Compact::new(no)), "{no}");
        }
        let c = CodeForm::new("ENIIPCapacityExceed");
        assert!(c.find_in(&Compact::new("reason ENIIPCapacityExceeded now")));
        assert!(!c.find_in(&Compact::new("ENI IP Capacity Exceed")));
        assert!(c.equals("eniipcapacityexceeded"));
        assert!(CodeForm::new("failed to set bandwidth")
            .find_in(&Compact::new("cni: failed to set\nbandwidth: x")));
    }

    #[test]
    fn edit_distance_counts_swaps_as_one() {
        assert_eq!(edit_distance(b"qouta", b"quota", 3), 1);
        assert_eq!(edit_distance(b"availabel", b"available", 3), 1);
        assert_eq!(edit_distance(b"allocaton", b"allocation", 3), 1);
        assert_eq!(edit_distance(b"kitten", b"sitting", 5), 3);
        assert_eq!(edit_distance(b"abc", b"abcdefgh", 2), 3);
        assert_eq!(edit_distance(b"", b"", 0), 0);
    }

    #[test]
    fn typos_are_corrected_to_known_words_only() {
        let vocab: Vec<String> = ["allocation", "available", "quota", "table", "memory"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (c, pairs) = correct(&Compact::new("page allocaton, qouta, tabel"), &vocab).unwrap();
        assert_eq!(c.s, "pageallocationquotatable");
        assert_eq!(pairs.len(), 3);
        // Breaks survive the correction.
        assert!(Pattern::compile("allocation quota").unwrap().matches(&c));
        // Short words and words far from any known word stay.
        assert!(correct(&Compact::new("tbl qxyz memroyyyyy"), &vocab).is_none());
        // First letters swapped.
        assert_eq!(
            correct(&Compact::new("uqota"), &vocab).unwrap().0.s,
            "quota"
        );
    }

    proptest::proptest! {
        /// Any text: tokens tile the compact form, breaks sit on char boundaries, and matching,
        /// code search, correction and noise stripping never panic.
        #[test]
        fn any_text_is_handled(t in ".{0,300}", p in "[a-z #*子网]{0,20}") {
            let c = Compact::new(&t);
            let joined: String = c.tokens().iter().map(|k| c.token_str(*k)).collect();
            proptest::prop_assert_eq!(&joined, &c.s);
            proptest::prop_assert!(c.is_break(0) && c.is_break(c.s.len()));
            if let Some(pat) = Pattern::compile(&p) {
                let _ = pat.matches(&c);
            }
            let _ = CodeForm::new(&p).find_in(&c);
            let vocab = vec!["allocation".to_string(), "quota".to_string()];
            if let Some((fixed, _)) = correct(&c, &vocab) {
                proptest::prop_assert!(fixed.is_break(fixed.s.len()));
            }
            let _ = strip_noise(&t);
        }
    }

    #[test]
    fn noise_prefixes_are_stripped() {
        let t = strip_noise(
            "W1001 12:00:00.123456       1 reflector.go:424] watch ended\n\
             Nov 23 12:00:00 node-1 kubelet[1234]: I1123 12:00:00.000001 1234 kubelet.go:1] PLEG\n\
             Nov 23 10:41:07 node-3 kernel: [981234.552110] nf_conntrack: table full\n\
             [ 2418.123456] INFO: task\n\
             Warning  X  2m (x4307 over 16h)  kubelet, 10.0.0.1  (combined from similar events): msg (x) (x12 y)",
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "watch ended");
        assert_eq!(lines[1], "PLEG");
        assert_eq!(lines[2], "nf_conntrack: table full");
        assert_eq!(lines[3], "INFO: task");
        assert!(!lines[4].contains("x4307") && !lines[4].contains("combined"));
        assert!(lines[4].ends_with("msg (x) (x12 y)"), "{}", lines[4]);
        assert!(matches!(strip_noise("plain text"), Cow::Borrowed(_)));
    }
}
