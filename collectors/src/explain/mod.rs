//! `explain`: the handbooks' error codes, event messages, exit codes, signals and pod states,
//! looked up by an exact code or found in pasted text.
//!
//! The data lives in `collectors/catalogue/*.toml` (one file per source document, embedded at
//! compile time, see [`catalogue`]). This module only matches and ranks; rendering (table,
//! JSON, language choice) is the agent's job.
//!
//! Lookup order:
//! 1. a whole-number query is a container exit code: out-of-range values are brought into
//!    0–255 with the handbook's rule, 129–255 also decode the signal `code - 128`;
//! 2. a query equal to a code or key (case-insensitive) returns every entry with that code —
//!    several when a code means different things in different components (TKE Service E4008
//!    vs Ingress E4008), which the result reports as ambiguous;
//! 3. otherwise the query is pasted text: entries whose message pattern or code occurs in it,
//!    plus any `Exit Code: N` it contains, ranked (longer, more specific patterns first);
//! 4. failing all that, entries whose title contains the query.

pub mod catalogue;

pub use catalogue::{catalogue, normalize, Catalogue, CatalogueError, Entry};

/// Keys node findings put in `Finding::see_also` to link to the catalogue entry that shares
/// their cause. Each resolves with [`lookup_key`] (a test checks it).
pub mod see_also {
    /// A full runtime or kubelet disk: sandboxes fail with `no space left on device`.
    pub const DISK_FULL: &str = "FailedCreatePodSandBox";
    /// Memory fragmentation: `page allocation failure`, runc `exit status 6`.
    pub const MEMORY_FRAGMENTATION: &str = "page-allocation-failure";
    /// iptables-restore could not take /run/xtables.lock (old iptables without `-w`).
    pub const XTABLES_LOCK: &str = "xtables-lock";
    /// Another process held /run/xtables.lock longer than iptables' wait.
    pub const XTABLES_LOCK_HELD: &str = "xtables-lock-held";
    /// A Pod running iptables does not mount the host's /run/xtables.lock.
    pub const XTABLES_LOCK_NOT_MOUNTED: &str = "xtables-lock-not-mounted";
    /// kube-proxy on the legacy backend while the OS uses nft.
    pub const IPTABLES_BACKEND_MISMATCH: &str = "iptables-backend-mismatch";
    /// conntrack insert races behind 5-second DNS delays.
    pub const CONNTRACK_DNS_DELAY: &str = "conntrack-dns-delay";
    /// A process killed by the OOM killer: exit code 137.
    pub const OOM_KILLED: &str = "exit-code:137";
    /// A container that keeps exiting (OOM kills among the causes) and is restarted.
    pub const CRASH_LOOP: &str = "pod-status:CrashLoopBackOff";
    /// A Pod stuck creating its containers (sandbox or volume setup failing).
    pub const CONTAINER_CREATING: &str = "pod-status:ContainerCreating";
    /// A Pod stuck terminating (its directories cannot be removed).
    pub const TERMINATING: &str = "pod-status:Terminating";
    /// kube-proxy reused a closed HTTP/2 connection to the API server.
    pub const KUBE_PROXY_STALE_CONNECTION: &str = "kube-proxy-http2-stale-connection";

    /// Every key above.
    pub const ALL: &[&str] = &[
        DISK_FULL,
        MEMORY_FRAGMENTATION,
        XTABLES_LOCK,
        XTABLES_LOCK_HELD,
        XTABLES_LOCK_NOT_MOUNTED,
        IPTABLES_BACKEND_MISMATCH,
        CONNTRACK_DNS_DELAY,
        OOM_KILLED,
        CRASH_LOOP,
        CONTAINER_CREATING,
        TERMINATING,
        KUBE_PROXY_STALE_CONNECTION,
    ];
}

/// Component of exit-code entries.
pub const EXIT_CODE_COMPONENT: &str = "exit-code";
/// Component of signal entries (exit codes 129–255 decode to them).
pub const SIGNAL_COMPONENT: &str = "signal";

/// How an entry was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// The query is exactly one of the entry's codes or its key.
    Code,
    /// The query is an exit code and this entry explains that code.
    ExitCode,
    /// The exit code is 128 + this entry's signal.
    Signal,
    /// The exit code falls in this entry's range (`1-128`, `128+n`).
    ExitRange,
    /// One of the entry's message patterns occurs in the pasted text.
    Pattern,
    /// One of the entry's codes occurs as a word in the pasted text.
    CodeInText,
    /// Fallback: the query occurs in the entry's title.
    Title,
}

/// One entry found for a query, with why and how strongly.
#[derive(Debug, Clone, PartialEq)]
pub struct Match<'a> {
    pub entry: &'a Entry,
    pub kind: MatchKind,
    /// The code, pattern or text that matched.
    pub matched: String,
    /// Higher ranks first.
    pub score: u32,
}

/// A container exit code brought into 0–255 and, for 129–255, the signal behind it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExitDecode {
    /// The number as given.
    pub input: i64,
    /// The status a container reports (0–255).
    pub code: u8,
    /// The handbook's conversion applied when `input` was outside 0–255.
    pub rule: Option<&'static str>,
    /// `code - 128` when `code` is 129–255.
    pub signal: Option<u8>,
    /// The signal's name on x86-64 Linux, when it has one.
    pub signal_name: Option<String>,
}

/// The result of one lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup<'a> {
    pub query: String,
    /// Best first.
    pub matches: Vec<Match<'a>>,
    /// Set when the query was, or contained, an exit code.
    pub exit: Option<ExitDecode>,
}

impl Lookup<'_> {
    pub fn is_match(&self) -> bool {
        !self.matches.is_empty()
    }

    /// More than one entry shares the best score: the operator must pick by component.
    pub fn ambiguous(&self) -> bool {
        match self.matches.first() {
            Some(best) => {
                self.matches
                    .iter()
                    .filter(|m| m.score == best.score)
                    .count()
                    > 1
            }
            None => false,
        }
    }

    /// The distinct components among the best-scored matches, in rank order.
    pub fn top_components(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        if let Some(best) = self.matches.first() {
            for m in self.matches.iter().filter(|m| m.score == best.score) {
                if !out.contains(&m.entry.component.as_str()) {
                    out.push(&m.entry.component);
                }
            }
        }
        out
    }
}

/// Looks a query up in the embedded catalogue.
pub fn lookup(query: &str) -> Lookup<'static> {
    lookup_in(catalogue(), query)
}

/// The entry a finding's `see_also` key names: an exact key (`FailedCreatePodSandBox`,
/// `tke-service:E4008`), or a code that only one entry has.
pub fn lookup_key(key: &str) -> Option<&'static Entry> {
    let cat = catalogue();
    if let Some(e) = cat.by_key(key) {
        return Some(e);
    }
    let mut with_code = cat
        .entries
        .iter()
        .filter(|e| e.codes.iter().any(|c| c == key));
    match (with_code.next(), with_code.next()) {
        (Some(e), None) => Some(e),
        _ => None,
    }
}

/// The handbook's rule for exit statuses outside 0–255: a negative `code` becomes
/// `256 - (|code| % 256)`, a positive one `code % 256`. (For a negative multiple of 256 the
/// formula gives 256, which the kernel reports as 0, so the result is taken modulo 256 again.)
pub fn decode_exit_code(input: i64) -> ExitDecode {
    let (code, rule) = if (0..=255).contains(&input) {
        (input as u8, None)
    } else if input > 255 {
        ((input % 256) as u8, Some("code % 256"))
    } else {
        let abs = input.unsigned_abs();
        let v = (256 - (abs % 256)) % 256;
        (v as u8, Some("256 - (|code| % 256)"))
    };
    let signal = (code > 128).then(|| code - 128);
    let signal_name = signal.and_then(signal_name);
    ExitDecode {
        input,
        code,
        rule,
        signal,
        signal_name,
    }
}

/// The name of signal `n` on x86-64 Linux (`signal(7)`); real-time signals as `SIGRTMIN+k`.
pub fn signal_name(n: u8) -> Option<String> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match n {
        1..=31 => NAMES.get(usize::from(n) - 1).map(|s| s.to_string()),
        34..=64 => Some(format!("SIGRTMIN+{}", n - 34)),
        _ => None,
    }
}

/// Score bands: an exact code beats anything found inside text. In text, an error code beats
/// a message pattern (a TKE event carries its code; the message may resemble another code's),
/// a longer pattern beats a shorter one, and a pattern beats an event reason or exit code.
const SCORE_CODE: u32 = 1000;
const SCORE_EXIT: u32 = 900;
const SCORE_SIGNAL: u32 = 850;
const SCORE_RANGE: u32 = 700;
const SCORE_CODE_IN_TEXT: u32 = 800;
const SCORE_PATTERN: u32 = 600;
const SCORE_REASON_IN_TEXT: u32 = 300;
/// How far below its exact-query score an exit code found in text ranks: under message
/// patterns, since in a describe dump the message says more.
const EXIT_IN_TEXT_PENALTY: u32 = 500;
const SCORE_TITLE: u32 = 100;

/// Looks a query up in `cat`. Never panics, whatever the query.
pub fn lookup_in<'a>(cat: &'a Catalogue, query: &str) -> Lookup<'a> {
    let q = query.trim();
    let mut matches: Vec<Match<'a>> = Vec::new();
    let mut exit = None;

    if q.is_empty() {
        return Lookup {
            query: q.to_string(),
            matches,
            exit,
        };
    }

    if let Some(n) = parse_int(q) {
        let d = decode_exit_code(n);
        exit_matches(cat, &d, 0, &mut matches);
        exit = Some(d);
    } else {
        // An exact code or key.
        for e in &cat.entries {
            let hit = e
                .codes
                .iter()
                .chain(e.reasons.iter())
                .find(|c| c.eq_ignore_ascii_case(q));
            if let Some(c) = hit {
                push(&mut matches, e, MatchKind::Code, c, SCORE_CODE);
            } else if e.key.eq_ignore_ascii_case(q) {
                push(&mut matches, e, MatchKind::Code, &e.key, SCORE_CODE);
            }
        }
        if matches.is_empty() {
            text_matches(cat, q, &mut matches, &mut exit);
        }
        if matches.is_empty() && q.chars().count() >= 3 {
            let nq = normalize(q);
            for e in &cat.entries {
                if normalize(&e.title.en).contains(&nq) || normalize(&e.title.zh).contains(&nq) {
                    push(&mut matches, e, MatchKind::Title, q, SCORE_TITLE);
                }
            }
        }
    }

    matches.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.entry.key.cmp(&b.entry.key))
    });
    Lookup {
        query: q.to_string(),
        matches,
        exit,
    }
}

/// Adds a match, or raises an entry already found: its best score plus a little for each
/// further piece of evidence.
fn push<'a>(out: &mut Vec<Match<'a>>, e: &'a Entry, kind: MatchKind, matched: &str, score: u32) {
    if let Some(m) = out.iter_mut().find(|m| std::ptr::eq(m.entry, e)) {
        if score > m.score {
            m.kind = kind;
            m.matched = matched.to_string();
            m.score = score + 10;
        } else {
            m.score += 10;
        }
        return;
    }
    out.push(Match {
        entry: e,
        kind,
        matched: matched.to_string(),
        score,
    });
}

fn exit_matches<'a>(cat: &'a Catalogue, d: &ExitDecode, lower: u32, out: &mut Vec<Match<'a>>) {
    let code = d.code.to_string();
    for e in cat
        .entries
        .iter()
        .filter(|e| e.component == EXIT_CODE_COMPONENT || e.component == SIGNAL_COMPONENT)
    {
        if e.codes.contains(&code) {
            push(out, e, MatchKind::ExitCode, &code, SCORE_EXIT - lower);
        }
        if let (Some(sig), Some(want)) = (e.signal, d.signal) {
            if sig == want {
                push(out, e, MatchKind::Signal, &code, SCORE_SIGNAL - lower);
            }
        }
        if let Some((lo, hi)) = e.exit_range {
            if (lo..=hi).contains(&d.code) {
                push(out, e, MatchKind::ExitRange, &code, SCORE_RANGE - lower);
            }
        }
    }
}

fn text_matches<'a>(
    cat: &'a Catalogue,
    q: &str,
    out: &mut Vec<Match<'a>>,
    exit: &mut Option<ExitDecode>,
) {
    let text = normalize(q);
    for e in &cat.entries {
        for p in &e.patterns {
            if let Some(len) = pattern_match(&text, p) {
                let bonus = u32::try_from(len.min(199)).unwrap_or(199);
                push(out, e, MatchKind::Pattern, p, SCORE_PATTERN + bonus);
            }
        }
        if e.exact_only {
            continue;
        }
        for c in &e.codes {
            let lc = c.to_lowercase();
            if lc.chars().all(|ch| ch.is_ascii_digit()) {
                continue; // bare numbers in text are exit codes only after "exit code"
            }
            if contains_word(&text, &lc) {
                let bonus = u32::try_from(lc.len().min(99)).unwrap_or(99);
                push(out, e, MatchKind::CodeInText, c, SCORE_CODE_IN_TEXT + bonus);
            }
        }
        for r in &e.reasons {
            if contains_word(&text, &r.to_lowercase()) {
                push(out, e, MatchKind::CodeInText, r, SCORE_REASON_IN_TEXT);
            }
        }
    }
    // `kubectl get events` names the object as `service/<name>` or `ingress/<name>`: that
    // tells the TKE Service and Ingress meanings of a shared code apart.
    let hint = match (text.contains("service/"), text.contains("ingress/")) {
        (true, false) => Some(&["tke-service"][..]),
        (false, true) => Some(&["tke-ingress", "tke-ingress-controller"][..]),
        _ => None,
    };
    if let Some(components) = hint {
        for m in out.iter_mut() {
            if components.contains(&m.entry.component.as_str()) {
                m.score += 5;
            }
        }
    }
    if let Some(n) = exit_code_in_text(&text) {
        let d = decode_exit_code(n);
        exit_matches(cat, &d, EXIT_IN_TEXT_PENALTY, out);
        *exit = Some(d);
    }
}

/// `Some(number of pattern characters matched)` when every `*`-separated fragment of the
/// pattern occurs in `text` (already normalized), in order.
fn pattern_match(text: &str, pattern: &str) -> Option<usize> {
    let mut rest = text;
    let mut matched = 0;
    for frag in pattern.split('*') {
        let f = normalize(frag);
        if f.is_empty() {
            continue;
        }
        let at = rest.find(&f)?;
        rest = &rest[at + f.len()..];
        matched += f.chars().count();
    }
    (matched > 0).then_some(matched)
}

/// `needle` occurs in `hay` with no ASCII letter, digit or `_` right before or after it
/// (Chinese text may touch a code directly).
fn contains_word(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = hay[from..].find(needle) {
        let start = from + at;
        let end = start + needle.len();
        let before = hay[..start].chars().next_back();
        let after = hay[end..].chars().next();
        if !before.is_some_and(word) && !after.is_some_and(word) {
            return true;
        }
        // Advance by one character (not one byte) to stay on a char boundary.
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// An integer written the way people paste them: `137`, `-1`, `+300`.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || digits.len() > 18 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The number after `exit code` (`Exit Code: 137`, `exit code 1`) in normalized text.
fn exit_code_in_text(text: &str) -> Option<i64> {
    let at = text.find("exit code")?;
    let rest = text[at + "exit code".len()..].trim_start_matches([':', ' ', '=']);
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    parse_int(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn modulo_rule_follows_the_handbook() {
        // exit(-1) shows as 255 (the handbook's own example).
        let d = decode_exit_code(-1);
        assert_eq!((d.code, d.rule), (255, Some("256 - (|code| % 256)")));
        assert_eq!(d.signal, Some(127));
        assert_eq!(d.signal_name, None);
        assert_eq!(decode_exit_code(-255).code, 1);
        assert_eq!(decode_exit_code(-256).code, 0);
        let d = decode_exit_code(300);
        assert_eq!((d.code, d.rule), (44, Some("code % 256")));
        assert_eq!(decode_exit_code(256).code, 0);
        assert_eq!(decode_exit_code(i64::MIN).code, 0);
        assert_eq!(decode_exit_code(i64::MAX).code, 255);
        let d = decode_exit_code(137);
        assert_eq!(d.rule, None);
        assert_eq!(
            (d.signal, d.signal_name.as_deref()),
            (Some(9), Some("SIGKILL"))
        );
        assert_eq!(
            decode_exit_code(143).signal_name.as_deref(),
            Some("SIGTERM")
        );
        assert_eq!(decode_exit_code(128).signal, None);
        assert_eq!(signal_name(34).as_deref(), Some("SIGRTMIN+0"));
    }

    #[test]
    fn words_and_patterns() {
        assert!(contains_word("code e4041 here", "e4041"));
        assert!(!contains_word("code e40411 here", "e4041"));
        assert!(!contains_word("xe4041", "e4041"));
        // Chinese text around a code is not part of the word.
        assert!(contains_word("错误码e4041。", "e4041"));
        assert_eq!(
            pattern_match("a secret foo not found", "Secret * not found"),
            Some(15)
        );
        assert_eq!(
            pattern_match("not found secret", "Secret * not found"),
            None
        );
        assert_eq!(
            exit_code_in_text("reason: error exit code: 255 started"),
            Some(255)
        );
        assert_eq!(exit_code_in_text("exit code -1"), Some(-1));
        assert_eq!(exit_code_in_text("exit code: none"), None);
        assert_eq!(parse_int("+300"), Some(300));
        assert_eq!(parse_int("99999999999999999999"), None);
        assert_eq!(parse_int("-"), None);
    }

    #[test]
    fn see_also_keys_resolve() {
        for key in see_also::ALL {
            let e = lookup_key(key).unwrap_or_else(|| panic!("{key} does not resolve"));
            assert_eq!(e.key, *key);
        }
    }

    /// `pub const NAME: &str = "value";` lines of the `see_also` module, from this file.
    fn see_also_constants() -> Vec<(String, String)> {
        let src = include_str!("mod.rs");
        let start = src.find("pub mod see_also {").unwrap();
        let end = start + src[start..].find("\n}\n").unwrap();
        src[start..end]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter_map(|l| {
                let (name, rest) = l.split_once(": &str = \"")?;
                Some((name.to_string(), rest.strip_suffix("\";")?.to_string()))
            })
            .collect()
    }

    #[test]
    fn every_see_also_constant_is_listed_in_all() {
        let consts = see_also_constants();
        assert!(consts.len() >= 8, "{consts:?}");
        for (name, value) in &consts {
            assert!(
                see_also::ALL.contains(&value.as_str()),
                "see_also::{name} = {value:?} is missing from see_also::ALL"
            );
        }
        assert_eq!(consts.len(), see_also::ALL.len());
    }

    /// Every `.see_also(..)` in the collectors names a `see_also` constant or a literal key
    /// that resolves in the catalogue.
    #[test]
    fn every_see_also_a_collector_sets_resolves() {
        fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    // The catalogue module itself (this test) sets no key.
                    if !p.ends_with("explain") {
                        rust_files(&p, out);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let names: Vec<String> = see_also_constants().into_iter().map(|c| c.0).collect();
        let mut files = Vec::new();
        rust_files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut uses = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, _) in text.match_indices(".see_also(") {
                let arg = &text[i + ".see_also(".len()..];
                let arg = arg[..arg.find(')').unwrap()].trim();
                let at = format!("{}: .see_also({arg})", file.display());
                if let Some(name) = arg.strip_prefix("see_also::") {
                    assert!(names.iter().any(|n| n == name), "{at}: no such constant");
                } else if let Some(lit) = arg.strip_prefix('"') {
                    let key = lit.trim_end_matches('"');
                    assert!(lookup_key(key).is_some(), "{at}: does not resolve");
                } else {
                    // A variable (a rule table's `see_also` field), filled from constants.
                    assert!(
                        arg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{at}"
                    );
                }
                uses += 1;
            }
        }
        assert!(uses >= 15, "only {uses} .see_also( calls found");
    }

    proptest! {
        #[test]
        fn lookup_never_panics(q in "\\PC{0,200}") {
            let _ = lookup(&q);
        }

        #[test]
        fn decode_is_always_in_range(n in any::<i64>()) {
            let d = decode_exit_code(n);
            prop_assert_eq!(i64::from(d.code), n.rem_euclid(256));
        }
    }
}
