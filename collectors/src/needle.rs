//! Fixed words looked for in host text over and over: the kernel log's parsers look for the
//! same phrases in every record, a few thousand records per read (issue 32).
//!
//! `str::find` and `str::contains` with a `&str` build a Two-Way searcher for the word on
//! every call, and on a record that does not hold it that preprocessing is most of the call:
//! `StrSearcher::new` was 9 % of a `check --collector kernel` on the bench's node, and the
//! pattern code 17 % of `serve`'s samples. A [`Needle`] builds its `memchr::memmem::Finder`
//! once, the first time it is used, and searches with it from then on; [`Words`] finds which
//! of several words a text holds in one pass (Aho-Corasick), so a record is handed only to
//! the parsers whose words it contains. Both crates were already linked (the `regex` crate's
//! own searchers); nothing new is built.
//!
//! What a `Needle` finds is what `str::find` finds: the first occurrence, at a byte offset
//! that is a character boundary (a match of a UTF-8 word in UTF-8 text starts on one).

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem::Finder;

/// One fixed word and its searcher, built on first use (a `static` of a parser).
pub struct Needle {
    word: &'static str,
    finder: OnceLock<Finder<'static>>,
}

impl Needle {
    /// A needle for `word`; nothing is built until the first search.
    pub const fn new(word: &'static str) -> Needle {
        Needle {
            word,
            finder: OnceLock::new(),
        }
    }

    /// The word.
    pub fn word(&self) -> &'static str {
        self.word
    }

    /// The byte length of the word.
    pub fn len(&self) -> usize {
        self.word.len()
    }

    /// Whether the word is empty (found at 0 in any text).
    pub fn is_empty(&self) -> bool {
        self.word.is_empty()
    }

    /// The byte offset of the first occurrence of the word in `text` (`str::find`).
    pub fn find(&self, text: &str) -> Option<usize> {
        self.finder
            .get_or_init(|| Finder::new(self.word.as_bytes()))
            .find(text.as_bytes())
    }

    /// Whether `text` holds the word (`str::contains`).
    pub fn is_in(&self, text: &str) -> bool {
        self.find(text).is_some()
    }

    /// The text after the first occurrence of the word.
    pub fn after<'t>(&self, text: &'t str) -> Option<&'t str> {
        // A match starts on a character boundary and the word is whole characters, so its end
        // is one too; `get` keeps that a `None`, never a panic, whatever happens.
        self.find(text).and_then(|at| text.get(at + self.len()..))
    }
}

/// Which of up to 64 fixed words a text holds, found in one pass: the prefilter of a parser
/// with several words.
pub struct Words {
    words: &'static [&'static str],
    ascii_case_insensitive: bool,
    /// `None` when the automaton could not be built (it cannot for a few short words; if it
    /// ever did, every text is said to hold every word and the parsers decide as before).
    automaton: OnceLock<Option<AhoCorasick>>,
}

/// The words of [`Words`] found in one text, as bits by their index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hits(u64);

impl Hits {
    /// Whether the word at `index` was found.
    pub fn has(self, index: usize) -> bool {
        index < 64 && self.0 & (1 << index) != 0
    }

    /// Whether any word was found.
    pub fn any(self) -> bool {
        self.0 != 0
    }
}

impl Words {
    /// `words` (at most 64; more are never reported), matched exactly.
    pub const fn new(words: &'static [&'static str]) -> Words {
        Words {
            words,
            ascii_case_insensitive: false,
            automaton: OnceLock::new(),
        }
    }

    /// `words` matched without regard to ASCII case (what `to_ascii_lowercase` and a search
    /// for the lower-case word find).
    pub const fn ascii_case_insensitive(words: &'static [&'static str]) -> Words {
        Words {
            words,
            ascii_case_insensitive: true,
            automaton: OnceLock::new(),
        }
    }

    fn automaton(&self) -> Option<&AhoCorasick> {
        self.automaton
            .get_or_init(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .ascii_case_insensitive(self.ascii_case_insensitive)
                    .build(self.words.iter().take(64))
                    .ok()
            })
            .as_ref()
    }

    /// The words `text` holds.
    pub fn scan(&self, text: &str) -> Hits {
        let Some(ac) = self.automaton() else {
            return Hits(u64::MAX);
        };
        let mut bits = 0u64;
        let all = if self.words.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.words.len()) - 1
        };
        for m in ac.find_overlapping_iter(text) {
            bits |= 1 << m.pattern().as_usize();
            if bits == all {
                break;
            }
        }
        Hits(bits)
    }

    /// Whether `text` holds any of the words.
    pub fn any_in(&self, text: &str) -> bool {
        match self.automaton() {
            Some(ac) => ac.is_match(text),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    static TASK: Needle = Needle::new("task ");
    static PHRASES: Words = Words::new(&["table full", "oom-killer", "é"]);
    static LOWER: Words = Words::ascii_case_insensitive(&["table overflow", "tcp_mem"]);

    #[test]
    fn finds_what_str_finds() {
        assert_eq!(TASK.find("INFO: task kworker/0:1:12 blocked"), Some(6));
        assert_eq!(
            TASK.after("INFO: task kworker:1 blocked"),
            Some("kworker:1 blocked")
        );
        assert_eq!(TASK.find("no such word"), None);
        assert_eq!(TASK.word(), "task ");
        assert_eq!(TASK.len(), 5);
        let h = PHRASES.scan("nf_conntrack: table full, dropping packet; café");
        assert!(h.has(0) && !h.has(1) && h.has(2) && h.any());
        assert!(!PHRASES.scan("nothing here").any());
        assert!(!PHRASES.any_in("nothing here"));
        assert!(LOWER.any_in("Neighbour TABLE Overflow."));
        assert!(LOWER
            .scan("TCP: out of memory -- consider tuning TCP_MEM")
            .has(1));
        assert!(!Hits(1).has(64));
    }

    proptest! {
        /// A needle finds exactly what `str::find` finds, on any text and any word.
        #[test]
        fn same_as_str_find(text in "\\PC{0,40}", at in 0usize..40, len in 0usize..6) {
            let chars: Vec<char> = text.chars().collect();
            let start = at.min(chars.len());
            let end = (start + len).min(chars.len());
            let word: String = chars[start..end].iter().collect();
            let word: &'static str = Box::leak(word.into_boxed_str());
            let n = Needle::new(word);
            prop_assert_eq!(n.find(&text), text.find(word));
            prop_assert_eq!(n.after(&text), text.find(word).map(|i| &text[i + word.len()..]));
        }

        /// The word set says a word is there exactly when `contains` does (case-insensitive:
        /// on the lower-cased text).
        #[test]
        fn same_as_contains(text in "(table|FULL|Table Overflow|tcp_MEM|oom-killer| |x|é){0,8}") {
            let h = PHRASES.scan(&text);
            for (i, w) in ["table full", "oom-killer", "é"].iter().enumerate() {
                prop_assert_eq!(h.has(i), text.contains(w));
            }
            let lower = text.to_ascii_lowercase();
            let h = LOWER.scan(&text);
            prop_assert_eq!(h.has(0), lower.contains("table overflow"));
            prop_assert_eq!(h.has(1), lower.contains("tcp_mem"));
            prop_assert_eq!(LOWER.any_in(&text), h.any());
        }
    }
}
