//! The words operators put around codes in pasted text (`code: 4041`, `Exit Code: 137`, and
//! their Chinese forms): input vocabulary, kept as data in
//! `collectors/catalogue/vocabulary.toml` beside the catalogue, loaded once.

use std::sync::OnceLock;

use serde::Deserialize;

/// The lists of `vocabulary.toml`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Vocabulary {
    /// Prefixes written before a code at the start of a query.
    pub code_prefixes: Vec<String>,
    /// Words that make the 4-digit number right after them a TKE code.
    pub code_words: Vec<String>,
    /// Markers after which a number is a container exit code, longest first.
    pub exit_code_markers: Vec<String>,
}

const FILE: &str = include_str!("../../catalogue/vocabulary.toml");

/// The embedded vocabulary (empty lists, and an error log, if the file were broken; a unit
/// test makes sure it is not).
pub fn vocabulary() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| match toml::from_str(FILE) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "collectors/catalogue/vocabulary.toml does not load");
            Vocabulary::default()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_loads_and_is_lower_case() {
        let v: Vocabulary = toml::from_str(FILE).expect("vocabulary.toml loads");
        for list in [&v.code_prefixes, &v.code_words, &v.exit_code_markers] {
            assert!(!list.is_empty());
            for w in list {
                assert_eq!(w, &w.to_lowercase(), "{w}: matching is on lower-cased text");
                assert!(!w.trim().is_empty());
            }
        }
        // Longer exit-code markers come before their own prefixes.
        for (i, a) in v.exit_code_markers.iter().enumerate() {
            for b in &v.exit_code_markers[..i] {
                assert!(!a.starts_with(b.as_str()), "{a} after its prefix {b}");
            }
        }
    }
}
