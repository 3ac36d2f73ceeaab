//! The catalogue: one TOML data file per source document, embedded at compile time.
//!
//! Each file names its document and vendor once, then lists `[[entry]]` tables. An entry is
//! looked up by its `codes` (an error code, an exit code, a signal or pod state name) or by
//! its `patterns` (message fragments found in pasted event text; `*` separates fragments that
//! must occur in order, `#` stands for a number). All text a person reads is bilingual and
//! written in our own words.
//!
//! An entry may be `generic`: it names a symptom many causes share (an event reason such as
//! `FailedCreatePodSandBox`, a Pod state, SIGKILL). Found inside pasted text it is weak evidence
//! that never outranks an entry matched on the message's cause, and when it is all that matched
//! the lookup says so and lists its `causes` (keys of the specific entries) as candidates.
//! `findings` names the node-doctor finding ids that detect the entry's situation on a node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

use super::text::{CodeForm, Pattern};
use crate::finding::Text;

/// The embedded data files, by file name (for error messages).
const FILES: &[(&str, &str)] = &[
    (
        "tke_ingress_000.toml",
        include_str!("../../catalogue/tke_ingress_000.toml"),
    ),
    (
        "tke_events_001.toml",
        include_str!("../../catalogue/tke_events_001.toml"),
    ),
    (
        "ack_ccm_003.toml",
        include_str!("../../catalogue/ack_ccm_003.toml"),
    ),
    (
        "cce_network_004.toml",
        include_str!("../../catalogue/cce_network_004.toml"),
    ),
    (
        "exit_codes_002.toml",
        include_str!("../../catalogue/exit_codes_002.toml"),
    ),
    (
        "pod_states_002.toml",
        include_str!("../../catalogue/pod_states_002.toml"),
    ),
    (
        "node_causes_002.toml",
        include_str!("../../catalogue/node_causes_002.toml"),
    ),
    (
        "pod_causes_002.toml",
        include_str!("../../catalogue/pod_causes_002.toml"),
    ),
];

/// A catalogue data file that does not load (a broken edit of the TOML).
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("catalogue file {file}: {message}")]
    Toml { file: &'static str, message: String },
    #[error("catalogue file {file}: entry {key}: {message}")]
    Invalid {
        file: &'static str,
        key: String,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawText {
    en: String,
    zh: String,
}

impl From<RawText> for Text {
    fn from(r: RawText) -> Text {
        Text::new(r.en, r.zh)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    doc: String,
    vendor: String,
    #[serde(default)]
    component: Option<String>,
    #[serde(default)]
    section: Option<String>,
    /// Default of every entry's `generic`.
    #[serde(default)]
    generic: bool,
    entry: Vec<RawEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    codes: Vec<String>,
    #[serde(default)]
    reasons: Vec<String>,
    #[serde(default)]
    patterns: Vec<String>,
    #[serde(default)]
    component: Option<String>,
    #[serde(default)]
    section: Option<String>,
    title: RawText,
    cause: RawText,
    #[serde(default)]
    fix: Vec<RawText>,
    #[serde(default)]
    risk: Option<RawText>,
    #[serde(default)]
    commands: Vec<String>,
    #[serde(default)]
    signal: Option<u8>,
    #[serde(default)]
    exit_range: Option<[u8; 2]>,
    #[serde(default)]
    exact_only: bool,
    #[serde(default)]
    generic: Option<bool>,
    #[serde(default)]
    causes: Vec<String>,
    #[serde(default)]
    findings: Vec<String>,
}

/// One explained code or message.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Unique, stable key (`tke-ingress:E4008`, `FailedCreatePodSandBox`); findings link to it
    /// through `Finding::see_also`.
    pub key: String,
    /// Codes this entry explains: error codes, exit codes (`"137"`), signal names, pod states.
    pub codes: Vec<String>,
    /// Kubernetes event reasons (`FailedCreatePodSandBox`) that many causes share: an exact
    /// query finds the entry, but inside pasted text a reason is weaker evidence than a code or
    /// a message pattern.
    pub reasons: Vec<String>,
    /// Message patterns matched in pasted text (case-insensitive, whitespace-insensitive;
    /// `*` separates fragments that must occur in order).
    pub patterns: Vec<String>,
    /// `TKE`, `ACK`, `CCE`, `Linux`, `Kubernetes`.
    pub vendor: String,
    /// Where the code is reported: `tke-ingress`, `tke-service`, `ack-ccm`, `cce-pod`, ...
    pub component: String,
    /// File name under `shared/docs`.
    pub doc: String,
    /// The section title as the document spells it.
    pub section: String,
    /// What the code or message says, in a few words.
    pub title: Text,
    /// Why it happens.
    pub cause: Text,
    /// What to do, in order.
    pub fix: Vec<Text>,
    /// What happens if it is left unfixed, where the source says.
    pub risk: Option<Text>,
    /// Commands that help to confirm or fix it.
    pub commands: Vec<String>,
    /// For signal entries: the signal number on x86-64 Linux.
    pub signal: Option<u8>,
    /// For exit-code range entries (`1-128`, `128+n`): the inclusive range covered.
    pub exit_range: Option<(u8, u8)>,
    /// Generic words (`Error`, `Pending`) that match only a whole query, never inside text.
    pub exact_only: bool,
    /// A symptom many causes share (event reason, Pod state, SIGKILL): weak evidence in text,
    /// and a lookup whose best match is generic lists `causes` instead of asserting one.
    pub generic: bool,
    /// Keys of the entries that explain the causes of a generic entry, most common first.
    pub causes: Vec<String>,
    /// Ids of node-doctor findings (`disk.filesystem_full`) that detect this situation.
    pub findings: Vec<String>,
    /// `patterns`, compiled.
    pub(crate) compiled: Vec<Pattern>,
    /// `codes` that are not plain numbers, compiled for finding them in text.
    pub(crate) code_forms: Vec<(String, CodeForm)>,
}

/// All entries of all data files.
#[derive(Debug, Default)]
pub struct Catalogue {
    pub entries: Vec<Entry>,
    /// Every lower-case ASCII word of 4+ letters in the patterns and codes, sorted and unique:
    /// what a typo in pasted text is corrected to.
    pub(crate) vocab: Vec<String>,
}

fn parse_file(file: &'static str, text: &str) -> Result<Vec<Entry>, CatalogueError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| CatalogueError::Toml {
        file,
        message: e.to_string(),
    })?;
    let mut out = Vec::with_capacity(raw.entry.len());
    for e in raw.entry {
        let component = e
            .component
            .or_else(|| raw.component.clone())
            .unwrap_or_default();
        let section = e
            .section
            .or_else(|| raw.section.clone())
            .unwrap_or_default();
        let key = match e.key {
            Some(k) => k,
            None => match e.codes.first() {
                Some(code) => format!("{component}:{code}"),
                None => String::new(),
            },
        };
        let invalid = |message: &str| CatalogueError::Invalid {
            file,
            key: key.clone(),
            message: message.to_string(),
        };
        if key.is_empty() {
            return Err(invalid("needs a key or at least one code"));
        }
        if e.codes.is_empty()
            && e.reasons.is_empty()
            && e.patterns.is_empty()
            && e.exit_range.is_none()
        {
            return Err(invalid("needs codes, reasons, patterns or an exit_range"));
        }
        if component.is_empty() || section.is_empty() {
            return Err(invalid("needs a component and a section"));
        }
        let title: Text = e.title.into();
        let cause: Text = e.cause.into();
        let fix: Vec<Text> = e.fix.into_iter().map(Text::from).collect();
        let risk: Option<Text> = e.risk.map(Text::from);
        let texts = [&title, &cause]
            .into_iter()
            .chain(fix.iter())
            .chain(risk.iter());
        for t in texts {
            if t.en.trim().is_empty() || t.zh.trim().is_empty() {
                return Err(invalid("a text is missing its English or Chinese version"));
            }
        }
        if e.patterns.iter().any(|p| normalize(p).trim().len() < 4) {
            return Err(invalid("a pattern is too short to be specific"));
        }
        let mut compiled = Vec::with_capacity(e.patterns.len());
        for p in &e.patterns {
            match Pattern::compile(p) {
                Some(c) => compiled.push(c),
                None => {
                    return Err(invalid(&format!(
                        "pattern {p:?} has no text or starts a fragment with a number (#)"
                    )))
                }
            }
        }
        let code_forms = e
            .codes
            .iter()
            .filter(|c| !c.bytes().all(|b| b.is_ascii_digit()))
            .map(|c| (c.clone(), CodeForm::new(c)))
            .collect();
        if let Some(bad) = e.findings.iter().find(|f| !is_finding_id(f)) {
            return Err(invalid(&format!(
                "finding id {bad:?} is not of the form collector.rule"
            )));
        }
        let generic = e.generic.unwrap_or(raw.generic);
        if !e.causes.is_empty() && !generic {
            return Err(invalid("only a generic entry lists causes"));
        }
        out.push(Entry {
            key,
            codes: e.codes,
            reasons: e.reasons,
            patterns: e.patterns,
            vendor: raw.vendor.clone(),
            component,
            doc: raw.doc.clone(),
            section,
            title,
            cause,
            fix,
            risk,
            commands: e.commands,
            signal: e.signal,
            exit_range: e.exit_range.map(|[a, b]| (a, b)),
            exact_only: e.exact_only,
            generic,
            causes: e.causes,
            findings: e.findings,
            compiled,
            code_forms,
        });
    }
    Ok(out)
}

/// `collector.rule`: lower-case letters, digits and `_`, one dot.
fn is_finding_id(s: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    matches!(s.split_once('.'), Some((a, b)) if ok(a) && ok(b))
}

/// The lower-case ASCII words of at least 4 letters in `s`.
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() >= 4 && w.bytes().all(|b| b.is_ascii_alphabetic()))
        .map(str::to_ascii_lowercase)
}

impl Catalogue {
    /// Parses every embedded data file and checks that keys are unique.
    pub fn load() -> Result<Catalogue, CatalogueError> {
        crate::embedded::note_bulk_read();
        let mut entries = Vec::new();
        for (file, text) in FILES {
            entries.extend(parse_file(file, text)?);
        }
        let mut seen = BTreeSet::new();
        for e in &entries {
            if !seen.insert(e.key.as_str()) {
                return Err(CatalogueError::Invalid {
                    file: "catalogue",
                    key: e.key.clone(),
                    message: "duplicate key".into(),
                });
            }
        }
        for e in &entries {
            if let Some(c) = e.causes.iter().find(|c| !seen.contains(c.as_str())) {
                return Err(CatalogueError::Invalid {
                    file: "catalogue",
                    key: e.key.clone(),
                    message: format!("cause {c:?} is not an entry key"),
                });
            }
        }
        let mut vocab = BTreeSet::new();
        for e in entries.iter().filter(|e| !e.exact_only) {
            for p in &e.patterns {
                vocab.extend(words(p));
            }
            for c in &e.code_forms {
                let w = &c.1.compact;
                if w.len() >= 4 && w.bytes().all(|b| b.is_ascii_lowercase()) {
                    vocab.insert(w.clone());
                }
            }
        }
        Ok(Catalogue {
            entries,
            vocab: vocab.into_iter().collect(),
        })
    }

    /// The entry with this exact key.
    pub fn by_key(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }
}

static CATALOGUE: OnceLock<Result<Catalogue, CatalogueError>> = OnceLock::new();
static EMPTY: Catalogue = Catalogue {
    entries: Vec::new(),
    vocab: Vec::new(),
};

/// The embedded catalogue, parsed once. If the embedded data were broken (a unit test guards
/// against it), the error is logged and lookups find nothing rather than panicking.
pub fn catalogue() -> &'static Catalogue {
    match CATALOGUE.get_or_init(Catalogue::load) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "The explain catalogue does not load; lookups will find nothing.");
            &EMPTY
        }
    }
}

/// The entries [`by_key_in_files`] has found (or not), by key. Only the entries asked for
/// are kept: keeping each parsed file whole held 250 KB of entries in `serve` to title a
/// few findings' `see_also`, and scanning the files' text at every lookup (each published
/// snapshot looked up every `see_also`) kept 240 KB of embedded text resident (issue 32).
static FOUND: OnceLock<Mutex<BTreeMap<String, Option<&'static Entry>>>> = OnceLock::new();

/// At most this many keys are remembered: the keys asked for are the rules' `see_also`
/// keys (a few hundred with an operator's rule files); past it a lookup parses again.
const MAX_FOUND: usize = 2048;

#[cfg(test)]
thread_local! {
    /// Files [`by_key_in_files`] parsed on this thread.
    static PARSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The entry with this exact key, from the data files whose text names it (the key in
/// quotes, or the code of a key made of a component and a code, `exit-code:137`), each
/// parsed alone: a finding's `see_also` titled without parsing the whole catalogue (240 KB
/// of TOML, about 4 ms here, which a `check` paid for a single finding). `None` when those
/// files do not have it: the whole catalogue decides then ([`super::lookup_key`]). Keys are
/// unique across the files (a unit test of the whole catalogue), so the entry found is the
/// one the whole catalogue has. Each key is looked for once; the entry found is kept for
/// good (leaked: at most [`MAX_FOUND`] of them, each a few hundred bytes); past that many
/// keys, `None` sends the caller to the whole catalogue.
pub fn by_key_in_files(key: &str) -> Option<&'static Entry> {
    let found = FOUND.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(hit) = found.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
        return *hit;
    }
    let entry = find_in_files(key);
    let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hit) = found.get(key) {
        // Another thread looked it up meanwhile: keep one.
        return *hit;
    }
    if found.len() >= MAX_FOUND {
        // Not kept: the whole catalogue (parsed once, kept) answers for the caller instead.
        return None;
    }
    let entry: Option<&'static Entry> = entry.map(|e| &*Box::leak(Box::new(e)));
    found.insert(key.to_string(), entry);
    entry
}

/// [`by_key_in_files`]'s search, without its memory.
fn find_in_files(key: &str) -> Option<Entry> {
    crate::embedded::note_bulk_read();
    let quoted = format!("\"{key}\"");
    let code = key.rsplit_once(':').map(|(_, c)| format!("\"{c}\""));
    // memchr's SIMD search: each lookup scans the 240 KB of embedded text for two needles.
    let quoted = memchr::memmem::Finder::new(quoted.as_bytes());
    let code = code
        .as_ref()
        .map(|c| memchr::memmem::Finder::new(c.as_bytes()));
    let names = |text: &str| {
        quoted.find(text.as_bytes()).is_some()
            || code
                .as_ref()
                .is_some_and(|c| c.find(text.as_bytes()).is_some())
    };
    let parse = |file: &'static str, text: &str| {
        #[cfg(test)]
        PARSED.with(|n| n.set(n.get() + 1));
        parse_file(file, text)
            .ok()?
            .into_iter()
            .find(|e| e.key == key)
    };
    FILES
        .iter()
        .filter(|(_, text)| names(text))
        .find_map(|(file, text)| {
            // The blocks that name it, each parsed with the file's header (a few hundred
            // bytes of TOML, not the file's 10-45 KB). An entry's own block names it (its
            // `key`, or the code its key is made of), so no other part of the file can hold
            // it; most blocks that name a key are other entries' `causes` or `see_also`.
            let (header, blocks) = entry_blocks(text);
            blocks
                .filter(|b| names(b))
                .find_map(|b| parse(file, &format!("{header}{b}")))
        })
}

/// A data file's header (what precedes its first `[[entry]]` line: the file's defaults) and
/// its `[[entry]]` blocks, each from its `[[entry]]` line to the next one.
fn entry_blocks(text: &str) -> (&str, impl Iterator<Item = &str>) {
    const HEAD: &str = "\n[[entry]]";
    let first = text.find(HEAD).map_or(text.len(), |i| i + 1);
    let (header, mut rest) = text.split_at(first);
    let blocks = std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest[1..].find(HEAD).map_or(rest.len(), |i| i + 2);
        let (block, after) = rest.split_at(end);
        rest = after;
        Some(block)
    });
    (header, blocks)
}

/// Lower-cases and collapses every run of whitespace to one space, so that text wrapped by a
/// terminal or copied from a PDF still matches.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalogue_loads_with_unique_keys() {
        let c = Catalogue::load().unwrap();
        assert!(c.entries.len() > 150, "only {} entries", c.entries.len());
    }

    /// Every entry found by its key in the files that name it is the whole catalogue's; a key
    /// no entry has (a code alone, an unknown key) is left to the whole catalogue.
    #[test]
    fn an_entry_by_key_from_its_own_file_is_the_catalogues() {
        let c = Catalogue::load().unwrap();
        for e in &c.entries {
            assert_eq!(by_key_in_files(&e.key), Some(e), "{}", e.key);
        }
        assert_eq!(by_key_in_files("137"), None, "a code, not a key");
        assert_eq!(by_key_in_files("no-such-entry"), None);
        assert_eq!(by_key_in_files("exit-code:9999"), None);
    }

    /// A key is looked for once: asked again, no file is parsed, and the entry is the same.
    #[test]
    fn a_key_found_once_is_not_parsed_again() {
        let first = by_key_in_files("disk-full").expect("disk-full is a catalogue key");
        let before = PARSED.with(|n| n.get());
        for _ in 0..3 {
            assert!(std::ptr::eq(by_key_in_files("disk-full").unwrap(), first));
            assert_eq!(by_key_in_files("no-such-entry"), None);
        }
        assert_eq!(PARSED.with(|n| n.get()), before, "parsed again");
    }

    #[test]
    fn a_file_splits_into_its_header_and_entry_blocks() {
        let text =
            "doc = \"d\"\n\n[[entry]]\nkey = \"a\"\n\n[[entry]]\nkey = \"b\"\nx = \"[[entry]]\"\n";
        let (header, blocks) = entry_blocks(text);
        assert_eq!(header, "doc = \"d\"\n\n");
        assert_eq!(
            blocks.collect::<Vec<_>>(),
            [
                "[[entry]]\nkey = \"a\"\n\n",
                "[[entry]]\nkey = \"b\"\nx = \"[[entry]]\"\n"
            ]
        );
        let (header, blocks) = entry_blocks("doc = 1\n");
        assert_eq!(header, "doc = 1\n");
        assert_eq!(blocks.count(), 0);
    }

    /// Looking a key up parses the blocks that name it, not whole files.
    #[test]
    fn a_key_is_found_by_parsing_only_the_blocks_that_name_it() {
        let before = PARSED.with(|n| n.get());
        let e = find_in_files("exit-code:137").expect("exit-code:137 is a catalogue key");
        assert_eq!(e.key, "exit-code:137");
        let parsed = PARSED.with(|n| n.get()) - before;
        let blocks: usize = FILES
            .iter()
            .map(|(_, t)| entry_blocks(t).1.filter(|b| b.contains("\"137\"")).count())
            .sum();
        assert!(
            parsed >= 1 && parsed <= blocks,
            "{parsed} parses for {blocks} blocks"
        );
    }

    #[test]
    fn normalize_collapses_whitespace_and_case() {
        assert_eq!(
            normalize("  Another  app\n is\tHolding "),
            "another app is holding"
        );
    }

    #[test]
    fn broken_entries_are_rejected_with_file_and_key() {
        let missing_zh = r#"
doc = "x.txt"
vendor = "TKE"
component = "c"
section = "s"
[[entry]]
codes = ["E1"]
title = { en = "t", zh = "" }
cause = { en = "c", zh = "c" }
"#;
        let err = parse_file("x.toml", missing_zh).unwrap_err().to_string();
        assert!(err.contains("x.toml") && err.contains("c:E1"), "{err}");
        let unknown_field = "doc = \"x\"\nvendor = \"v\"\nbogus = 1\nentry = []\n";
        assert!(parse_file("y.toml", unknown_field).is_err());
    }
}
