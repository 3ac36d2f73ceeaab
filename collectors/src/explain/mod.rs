//! `explain`: the handbooks' error codes, event messages, exit codes, signals and pod states,
//! looked up by an exact code or found in pasted text.
//!
//! The data lives in `collectors/catalogue/*.toml` (one file per source document, embedded at
//! compile time, see [`catalogue`]). This module only matches and ranks; rendering (table,
//! JSON, language choice) is the agent's job.
//!
//! Lookup order:
//! 1. a whole-number query is a container exit code: out-of-range values are brought into
//!    0–255 with the handbook's rule, 129–255 also decode the signal `code - 128`; a 4-digit
//!    number that is a TKE code without its letter (`4041`) finds that code too;
//! 2. a query that is a code or key, written the way people retype codes (any case, spaces,
//!    dashes or underscores inside, a `code:` prefix, a known suffix variant such as
//!    `ENIIPCapacityExceeded`), returns every entry with that code — several when a code means
//!    different things in different components (TKE Service E4008 vs Ingress E4008);
//! 3. otherwise the query is pasted text: log and `kubectl` noise is stripped (see [`text`]),
//!    then entries are ranked by what they matched, most specific first — an error code in the
//!    text, a message pattern (longer first), the same after correcting typos, an `Exit Code:
//!    N`, and last generic evidence (an event reason, a Pod state, a bare signal) which never
//!    outranks an entry matched on the message's cause. Hints in the paste (`service/`,
//!    `service-controller`, `ingress/`, `loadbalancer-controller`) pick the component of a
//!    shared code;
//! 4. failing all that, entries whose title contains the query (a weak answer).
//!
//! [`Lookup::confidence`] says what kind of answer that is: one confident entry, a labelled
//! choice between components, only a generic symptom (with candidate causes), a weak title
//! match, or nothing.

pub mod catalogue;
pub mod text;
pub mod vocabulary;

pub use catalogue::{catalogue, normalize, Catalogue, CatalogueError, Entry};

use text::{CodeForm, Compact};
use vocabulary::vocabulary;

/// Keys node findings put in `Finding::see_also` to link to the catalogue entry that shares
/// their cause. Each resolves with [`lookup_key`] (a test checks it).
pub mod see_also {
    /// A full runtime or kubelet disk (`no space left on device`; the handbook's first cause
    /// of a `FailedCreatePodSandBox`, a Pod stuck ContainerCreating or Terminating).
    pub const DISK_FULL: &str = "disk-full";
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
    /// The conntrack table is full: `nf_conntrack: table full, dropping packet`.
    pub const CONNTRACK_TABLE_FULL: &str = "conntrack-table-full";
    /// A process killed by the OOM killer: exit code 137.
    pub const OOM_KILLED: &str = "exit-code:137";
    /// The kernel's system-wide OOM killer (`Out of memory: Killed process`).
    pub const OOM_SYSTEM: &str = "kernel-oom-system";
    /// A container killed at its memory limit (`Memory cgroup out of memory`).
    pub const OOM_CGROUP: &str = "kernel-oom-cgroup";
    /// `INFO: task ... blocked for more than 120 seconds`.
    pub const HUNG_TASK: &str = "kernel-hung-task";
    /// New connections dropped because the SYN backlog is full (`TCPBacklogDrop`).
    pub const SYN_BACKLOG: &str = "syn-backlog-drop";
    /// A container that keeps exiting (OOM kills among the causes) and is restarted.
    pub const CRASH_LOOP: &str = "pod-status:CrashLoopBackOff";
    /// A Pod stuck creating its containers (sandbox or volume setup failing).
    pub const CONTAINER_CREATING: &str = "pod-status:ContainerCreating";
    /// A Pod stuck terminating (its directories cannot be removed).
    pub const TERMINATING: &str = "pod-status:Terminating";
    /// kube-proxy reused a closed HTTP/2 connection to the API server.
    pub const KUBE_PROXY_STALE_CONNECTION: &str = "kube-proxy-http2-stale-connection";
    /// kube-proxy 1.18's nil pointer panic at first start (kubernetes issue 89729).
    pub const KUBE_PROXY_PANIC_NIL_POINTER: &str = "kube-proxy-panic-nil-pointer";
    /// kube-proxy's repeated `slice bounds out of range` panic parsing iptables-save.
    pub const KUBE_PROXY_PANIC_SLICE_BOUNDS: &str = "kube-proxy-panic-slice-bounds";
    /// A memory limit written in the wrong unit (`1024m` is 1.024 bytes, not 1 GiB).
    pub const MEMORY_LIMIT_UNIT: &str = "memory-limit-unit";

    /// Every key above.
    pub const ALL: &[&str] = &[
        DISK_FULL,
        MEMORY_FRAGMENTATION,
        XTABLES_LOCK,
        XTABLES_LOCK_HELD,
        XTABLES_LOCK_NOT_MOUNTED,
        IPTABLES_BACKEND_MISMATCH,
        CONNTRACK_DNS_DELAY,
        CONNTRACK_TABLE_FULL,
        OOM_KILLED,
        OOM_SYSTEM,
        OOM_CGROUP,
        HUNG_TASK,
        SYN_BACKLOG,
        CRASH_LOOP,
        CONTAINER_CREATING,
        TERMINATING,
        KUBE_PROXY_STALE_CONNECTION,
        KUBE_PROXY_PANIC_NIL_POINTER,
        KUBE_PROXY_PANIC_SLICE_BOUNDS,
        MEMORY_LIMIT_UNIT,
    ];
}

/// Component of exit-code entries.
pub const EXIT_CODE_COMPONENT: &str = "exit-code";
/// Component of signal entries (exit codes 129–255 decode to them).
pub const SIGNAL_COMPONENT: &str = "signal";

/// How an entry was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchKind {
    /// The query is one of the entry's codes or its key (case, separators and a known suffix
    /// variant aside).
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
    /// A message pattern occurs once typos in the text are corrected.
    FuzzyPattern,
    /// A code occurs once typos in the text are corrected.
    FuzzyCode,
    /// Generic evidence in the text: an event reason, a Pod state, a signal name.
    Reason,
    /// Fallback: the query occurs in the entry's title.
    Title,
}

impl MatchKind {
    /// The name used in JSON (`code`, `fuzzy_pattern`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Code => "code",
            MatchKind::ExitCode => "exit_code",
            MatchKind::Signal => "signal",
            MatchKind::ExitRange => "exit_range",
            MatchKind::Pattern => "pattern",
            MatchKind::CodeInText => "code_in_text",
            MatchKind::FuzzyPattern => "fuzzy_pattern",
            MatchKind::FuzzyCode => "fuzzy_code",
            MatchKind::Reason => "reason",
            MatchKind::Title => "title",
        }
    }
}

/// What kind of answer a lookup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    /// Nothing matched.
    None,
    /// Only the fallback matched: the query occurs in an entry's title.
    Weak,
    /// Only generic evidence (an event reason, a Pod state, SIGKILL): the paste does not say
    /// which cause it is; [`Lookup::candidates`] lists the handbook's causes.
    Generic,
    /// The best matches are in different components (or the handbook lists the code twice):
    /// a labelled choice.
    Ambiguous,
    /// One entry is the answer.
    Confident,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::None => "none",
            Confidence::Weak => "weak",
            Confidence::Generic => "generic",
            Confidence::Ambiguous => "ambiguous",
            Confidence::Confident => "confident",
        }
    }
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
    /// For fuzzy matches: the typed words and what they were read as.
    pub corrections: Vec<(String, String)>,
}

/// A container exit code brought into 0–255 and, for 129–255, the signal behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// When a hint in the paste broke a tie between component families: the family it
    /// pointed at (`tke-service`, `tke-ingress`) and the hint.
    pub hint: Option<(&'static str, &'static str)>,
    /// For a generic answer: the entries that explain its possible causes.
    pub candidates: Vec<&'a Entry>,
}

/// Components whose codes are one family: the TKE Ingress controller's own code list (000)
/// and the Ingress event table (001) describe the same Ingress codes, so a tie between them
/// is not a choice the operator has to make.
pub fn family(component: &str) -> &str {
    if component.starts_with("tke-ingress") {
        "tke-ingress"
    } else {
        component
    }
}

impl<'a> Lookup<'a> {
    pub fn is_match(&self) -> bool {
        !self.matches.is_empty()
    }

    fn top(&self) -> impl Iterator<Item = &Match<'a>> {
        let best = self.matches.first().map(|m| m.score);
        self.matches
            .iter()
            .take_while(move |m| Some(m.score) == best)
    }

    /// The best matches are a real choice: entries in different component families share the
    /// best score (E4008 on a Service or an Ingress), or one component lists the code twice
    /// (000's two E4038s).
    pub fn ambiguous(&self) -> bool {
        let top: Vec<&Match<'a>> = self.top().collect();
        if top.len() < 2 {
            return false;
        }
        let first = family(&top[0].entry.component);
        let families = top.iter().any(|m| family(&m.entry.component) != first);
        let repeated = top.iter().enumerate().any(|(i, m)| {
            top[..i]
                .iter()
                .any(|n| n.entry.component == m.entry.component)
        });
        families || repeated
    }

    /// The distinct components among the best-scored matches, in rank order.
    pub fn top_components(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for m in self.top() {
            if !out.contains(&m.entry.component.as_str()) {
                out.push(&m.entry.component);
            }
        }
        out
    }

    /// Whether the best match is a generic symptom rather than a cause.
    pub fn generic(&self) -> bool {
        self.matches.first().is_some_and(|m| m.entry.generic)
    }

    /// What kind of answer this is.
    pub fn confidence(&self) -> Confidence {
        match self.matches.first() {
            None => Confidence::None,
            Some(m) if m.kind == MatchKind::Title => Confidence::Weak,
            Some(m) if m.entry.generic => Confidence::Generic,
            Some(_) if self.ambiguous() => Confidence::Ambiguous,
            Some(_) => Confidence::Confident,
        }
    }
}

/// Looks a query up in the embedded catalogue.
pub fn lookup(query: &str) -> Lookup<'static> {
    lookup_in(catalogue(), query)
}

/// The entry a finding's `see_also` key names: an exact key (`FailedCreatePodSandBox`,
/// `tke-service:E4008`), looked for first in the data files that name it alone
/// ([`catalogue::by_key_in_files`]), or a code that only one entry has.
pub fn lookup_key(key: &str) -> Option<&'static Entry> {
    if let Some(e) = catalogue::by_key_in_files(key) {
        return Some(e);
    }
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

/// Score bands (higher ranks first). An exact code beats anything found inside text. In text,
/// an error code beats a message pattern (a TKE event carries its code; its message may
/// resemble another code's), a longer pattern beats a shorter one, an exact pattern beats one
/// found only after correcting typos, and all of them beat an `Exit Code: N` and generic
/// evidence (event reasons, Pod states, signal names), which is capped below every specific
/// band so it can never come first when the cause matched.
const SCORE_CODE: u32 = 1000;
/// A bare 4-digit number that is a TKE code's digits (`4041`).
const SCORE_CODE_NUMBER: u32 = 950;
const SCORE_EXIT: u32 = 900;
const SCORE_SIGNAL: u32 = 850;
const SCORE_CODE_IN_TEXT: u32 = 800;
const SCORE_RANGE: u32 = 700;
const SCORE_FUZZY_CODE: u32 = 700;
const SCORE_PATTERN: u32 = 600;
const SCORE_FUZZY_PATTERN: u32 = 450;
/// Highest score a fuzzy pattern match reaches, extra evidence included: below any exact one.
const CAP_FUZZY_PATTERN: u32 = SCORE_PATTERN - 1;
/// How far below its exact-query score an exit code found in text ranks: under message
/// patterns, since in a describe dump the message says more (137 → 400, its signal 350, the
/// `128+n` range 200).
const EXIT_IN_TEXT_PENALTY: u32 = 500;
const SCORE_GENERIC: u32 = 300;
/// Highest score generic evidence reaches: below an exit code's signal found in text.
const CAP_GENERIC: u32 = SCORE_SIGNAL - EXIT_IN_TEXT_PENALTY - 1;
const SCORE_TITLE: u32 = 100;
/// Added for each further piece of evidence for an entry already found.
const EXTRA_EVIDENCE: u32 = 10;
/// Added to entries of the component family a hint in the paste points at.
const HINT_BONUS: u32 = 5;

/// Words in a paste that tell the TKE Service and Ingress meanings of a shared code apart:
/// the object column of `kubectl get events`, the event source of `kubectl describe`, the
/// service controller's message.
const HINTS: &[(&str, &[&str])] = &[
    (
        "tke-service",
        &[
            "service-controller",
            "error syncing load balancer",
            "service/",
            "services/",
            "svc/",
            "kind: service",
            "describe svc",
            "describe service",
        ],
    ),
    (
        "tke-ingress",
        &[
            "loadbalancer-controller",
            "l7-lb-controller",
            "ingress-controller",
            "ingress/",
            "ingresses/",
            "kind: ingress",
            "describe ingress",
            "describe ing ",
        ],
    ),
];

/// Within one family, which component's entry comes first on a tie: the Ingress controller's
/// own list (000) has the fuller steps.
fn preference(component: &str) -> u8 {
    match component {
        "tke-ingress-controller" => 0,
        _ => 1,
    }
}

/// Looks a query up in `cat`. Never panics, whatever the query.
pub fn lookup_in<'a>(cat: &'a Catalogue, query: &str) -> Lookup<'a> {
    let q = query.trim();
    let mut matches: Vec<Match<'a>> = Vec::new();
    let mut exit = None;
    let mut hint = None;

    if q.is_empty() {
        return Lookup {
            query: q.to_string(),
            matches,
            exit,
            hint,
            candidates: Vec::new(),
        };
    }

    if let Some(n) = parse_int(q) {
        let d = decode_exit_code(n);
        exit_matches(cat, &d, 0, &mut matches);
        exit = Some(d);
        if q.len() == 4 && q.bytes().all(|b| b.is_ascii_digit()) {
            tke_number_matches(cat, q, SCORE_CODE_NUMBER, &mut matches);
        }
    } else {
        exact_matches(cat, q, &mut matches);
        if matches.is_empty() {
            text_matches(cat, q, &mut matches, &mut exit);
        }
        if matches.is_empty() && q.chars().count() >= 3 {
            title_matches(cat, q, &mut matches);
        }
    }

    // A hint only breaks a choice: it counts when the matches span the hinted family and
    // another one a hint could name.
    if let Some((fam, h)) = find_hint(q) {
        let hinted = |m: &Match<'_>| family(&m.entry.component) == fam;
        let other = |m: &Match<'_>| {
            let f = family(&m.entry.component);
            f != fam && HINTS.iter().any(|(hf, _)| *hf == f)
        };
        if matches.iter().any(hinted) && matches.iter().any(other) {
            hint = Some((fam, h));
            for m in matches.iter_mut().filter(|m| hinted(m)) {
                m.score += HINT_BONUS;
            }
        }
    }

    matches.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| preference(&a.entry.component).cmp(&preference(&b.entry.component)))
            .then_with(|| a.entry.key.cmp(&b.entry.key))
    });

    let mut candidates: Vec<&'a Entry> = Vec::new();
    if let Some(best) = matches.first().filter(|m| m.entry.generic).map(|m| m.score) {
        for m in matches.iter().take_while(|m| m.score == best) {
            for key in &m.entry.causes {
                if let Some(e) = cat.by_key(key) {
                    if !candidates.iter().any(|c| std::ptr::eq(*c, e)) {
                        candidates.push(e);
                    }
                }
            }
        }
    }

    Lookup {
        query: q.to_string(),
        matches,
        exit,
        hint,
        candidates,
    }
}

/// Words a title search ignores.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "that", "this", "was", "are", "not",
];

/// The fallback: entries whose title contains the query, or every word of it (3+ letters,
/// stop words aside) as the start of a title word (`disk full`, `kube-proxy panic`).
fn title_matches<'a>(cat: &'a Catalogue, q: &str, out: &mut Vec<Match<'a>>) {
    let nq = normalize(q);
    let cq = Compact::new(q).s;
    let lower = q.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() >= 3 && !STOP_WORDS.contains(w))
        .collect();
    let only_ascii_words = lower
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || !c.is_alphanumeric());
    let cjk = q.chars().any(text::is_cjk) && cq.chars().count() >= 2;
    for e in &cat.entries {
        let hit = [&e.title.en, &e.title.zh].iter().any(|t| {
            // Chinese needs no spaces, so it is compared in compact form; ASCII as typed
            // (else `-x -y` would be found in "proxy").
            let compact_hit = cjk && Compact::new(t).s.contains(&cq);
            if normalize(t).contains(&nq) || compact_hit {
                return true;
            }
            if !only_ascii_words || words.is_empty() {
                return false;
            }
            let tl = t.to_lowercase();
            let title_words: Vec<&str> = tl.split(|c: char| !c.is_ascii_alphanumeric()).collect();
            words
                .iter()
                .all(|w| title_words.iter().any(|tw| tw.starts_with(w)))
        });
        if hit {
            push(out, e, MatchKind::Title, q, SCORE_TITLE, &[]);
        }
    }
}

/// The one component family the paste hints at, and the hint; `None` when it hints at none or
/// at both.
fn find_hint(q: &str) -> Option<(&'static str, &'static str)> {
    let text = normalize(q);
    let mut found = None;
    for (fam, words) in HINTS {
        if let Some(w) = words.iter().find(|w| text.contains(*w)) {
            if found.is_some() {
                return None;
            }
            found = Some((*fam, *w));
        }
    }
    found
}

/// Adds a match, or raises an entry already found: its best score plus a little for each
/// further piece of evidence of another kind (a code and a pattern; several patterns of one
/// entry usually overlap on the same words, so they count once). Generic and fuzzy evidence
/// stay below their caps.
fn push<'a>(
    out: &mut Vec<Match<'a>>,
    e: &'a Entry,
    kind: MatchKind,
    matched: &str,
    score: u32,
    corrections: &[(String, String)],
) {
    let cap = |kind: MatchKind, s: u32| match kind {
        MatchKind::Reason => s.min(CAP_GENERIC),
        MatchKind::FuzzyPattern => s.min(CAP_FUZZY_PATTERN),
        _ => s,
    };
    if let Some(m) = out.iter_mut().find(|m| std::ptr::eq(m.entry, e)) {
        let same = m.kind == kind && matches!(kind, MatchKind::Pattern | MatchKind::FuzzyPattern);
        if same {
            if score > m.score {
                m.matched = matched.to_string();
                m.corrections = corrections.to_vec();
                m.score = cap(kind, score);
            }
            return;
        }
        if score > m.score {
            m.kind = kind;
            m.matched = matched.to_string();
            m.corrections = corrections.to_vec();
            m.score = cap(kind, score + EXTRA_EVIDENCE);
        } else {
            m.score = cap(m.kind, m.score + EXTRA_EVIDENCE);
        }
        return;
    }
    out.push(Match {
        entry: e,
        kind,
        matched: matched.to_string(),
        score: cap(kind, score),
        corrections: corrections.to_vec(),
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
            push(out, e, MatchKind::ExitCode, &code, SCORE_EXIT - lower, &[]);
        }
        if let (Some(sig), Some(want)) = (e.signal, d.signal) {
            if sig == want {
                push(out, e, MatchKind::Signal, &code, SCORE_SIGNAL - lower, &[]);
            }
        }
        if let Some((lo, hi)) = e.exit_range {
            if (lo..=hi).contains(&d.code) {
                push(
                    out,
                    e,
                    MatchKind::ExitRange,
                    &code,
                    SCORE_RANGE - lower,
                    &[],
                );
            }
        }
    }
}

/// TKE codes whose digits are `digits` (`4041` → E4041, W-codes likewise).
fn tke_number_matches<'a>(cat: &'a Catalogue, digits: &str, score: u32, out: &mut Vec<Match<'a>>) {
    for e in &cat.entries {
        for c in &e.codes {
            let b = c.as_bytes();
            if b.len() == 5 && matches!(b[0], b'E' | b'W') && &c[1..] == digits {
                push(out, e, MatchKind::Code, c, score, &[]);
            }
        }
    }
}

/// `code: 4041`, `error code 4041`: the prefix people put before a code (the list is
/// `vocabulary.toml`'s `code_prefixes`).
fn strip_code_prefix(q: &str) -> Option<&str> {
    let lower = q.to_ascii_lowercase();
    for p in &vocabulary().code_prefixes {
        let p = p.as_str();
        if lower.starts_with(p) {
            let rest = &q[p.len()..];
            let sep = rest.chars().next();
            // A prefix in letters needs a separator after it; one in CJK does not.
            if sep.is_some_and(|c| !c.is_ascii_alphanumeric()) || !p.is_ascii() {
                let rest = rest.trim_start_matches(|c: char| !c.is_alphanumeric());
                return (!rest.is_empty()).then_some(rest);
            }
        }
    }
    None
}

/// A whole query that is a code, a key or an event reason, however it was retyped.
fn exact_matches<'a>(cat: &'a Catalogue, q: &str, out: &mut Vec<Match<'a>>) {
    let bare = q.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '“' | '”' | '。' | '.'));
    let prefixed = strip_code_prefix(bare);
    let qc = Compact::new(prefixed.unwrap_or(bare)).s;
    if qc.is_empty() {
        return;
    }
    for e in &cat.entries {
        if e.key.eq_ignore_ascii_case(bare) {
            push(out, e, MatchKind::Code, &e.key, SCORE_CODE, &[]);
            continue;
        }
        if let Some((c, _)) = e.code_forms.iter().find(|(_, f)| f.equals(&qc)) {
            push(out, e, MatchKind::Code, c, SCORE_CODE, &[]);
            continue;
        }
        if let Some(r) = e.reasons.iter().find(|r| CodeForm::new(r).equals(&qc)) {
            push(out, e, MatchKind::Code, r, SCORE_CODE, &[]);
        }
    }
    if out.is_empty()
        && prefixed.is_some()
        && qc.len() == 4
        && qc.bytes().all(|b| b.is_ascii_digit())
    {
        tke_number_matches(cat, &qc, SCORE_CODE, out);
    }
}

/// Evidence an entry's codes, reasons and patterns find in `text`; `fixed` marks text read
/// after typo correction.
fn scan<'a>(
    cat: &'a Catalogue,
    text: &Compact,
    fixed: Option<(&Compact, &[(String, String)])>,
    out: &mut Vec<Match<'a>>,
) {
    for e in &cat.entries {
        let weak = e.generic || e.component == SIGNAL_COMPONENT;
        if !e.exact_only {
            for (code, form) in &e.code_forms {
                if !code.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    continue; // `1-128`, `128+n`: whole-query only
                }
                let bonus = u32::try_from(code.len().min(99)).unwrap_or(99);
                let found = form.find_in(text);
                if weak {
                    if found {
                        push(
                            out,
                            e,
                            MatchKind::Reason,
                            code,
                            SCORE_GENERIC + bonus.min(39),
                            &[],
                        );
                    }
                } else if found {
                    push(
                        out,
                        e,
                        MatchKind::CodeInText,
                        code,
                        SCORE_CODE_IN_TEXT + bonus,
                        &[],
                    );
                } else if let Some((f, pairs)) = fixed {
                    if form.find_in(f) {
                        let pairs = relevant(pairs, code);
                        push(
                            out,
                            e,
                            MatchKind::FuzzyCode,
                            code,
                            SCORE_FUZZY_CODE + bonus,
                            &pairs,
                        );
                    }
                }
            }
            for r in &e.reasons {
                if CodeForm::new(r).find_in(text) {
                    push(out, e, MatchKind::Reason, r, SCORE_GENERIC, &[]);
                }
            }
        }
        for p in &e.compiled {
            let bonus = u32::try_from(p.weight.min(199)).unwrap_or(199);
            if p.matches(text) {
                let (kind, score) = if e.generic {
                    (MatchKind::Reason, SCORE_GENERIC + bonus.min(39))
                } else {
                    (MatchKind::Pattern, SCORE_PATTERN + bonus)
                };
                push(out, e, kind, &p.source, score, &[]);
            } else if let Some((f, pairs)) = fixed {
                if p.matches(f) {
                    let pairs = relevant(pairs, &p.source);
                    let (kind, score) = if e.generic {
                        (MatchKind::Reason, SCORE_GENERIC + bonus.min(39))
                    } else {
                        (MatchKind::FuzzyPattern, SCORE_FUZZY_PATTERN + bonus)
                    };
                    push(out, e, kind, &p.source, score, &pairs);
                }
            }
        }
    }
}

/// The corrections whose corrected word is part of `matched`.
fn relevant(pairs: &[(String, String)], matched: &str) -> Vec<(String, String)> {
    let m = Compact::new(matched).s;
    pairs
        .iter()
        .filter(|(_, to)| m.contains(to.as_str()))
        .cloned()
        .collect()
}

fn text_matches<'a>(
    cat: &'a Catalogue,
    q: &str,
    out: &mut Vec<Match<'a>>,
    exit: &mut Option<ExitDecode>,
) {
    let clean = text::strip_noise(q);
    let compact = Compact::new(&clean);
    let fixed = text::correct(&compact, &cat.vocab);
    scan(
        cat,
        &compact,
        fixed.as_ref().map(|(c, p)| (c, p.as_slice())),
        out,
    );
    // `code: 4041`: a TKE code written without its letter (`vocabulary.toml`'s `code_words`).
    let tokens = compact.tokens();
    let code_words = &vocabulary().code_words;
    for w in tokens.windows(2) {
        let (a, b) = (compact.token_str(w[0]), compact.token_str(w[1]));
        if code_words.iter().any(|c| c == a)
            && b.len() == 4
            && b.bytes().all(|c| c.is_ascii_digit())
        {
            tke_number_matches(cat, b, SCORE_CODE_IN_TEXT + 5, out);
        }
    }
    if let Some(n) = exit_code_in_text(&normalize(&clean)) {
        let d = decode_exit_code(n);
        exit_matches(cat, &d, EXIT_IN_TEXT_PENALTY, out);
        *exit = Some(d);
    }
}

/// An integer written the way people paste them: `137`, `-1`, `+300`.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || digits.len() > 18 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The number after `exit code` (`Exit Code: 137`, `exitCode: 143`, `exit code 1`, and the
/// Chinese forms) in normalized text; the markers are `vocabulary.toml`'s
/// `exit_code_markers`.
fn exit_code_in_text(text: &str) -> Option<i64> {
    for marker in &vocabulary().exit_code_markers {
        let marker = marker.as_str();
        let mut from = 0;
        while let Some(at) = text[from..].find(marker) {
            let start = from + at + marker.len();
            // ASCII and full-width separators (U+FF1A FULLWIDTH COLON).
            let rest = text[start..].trim_start_matches([':', ' ', '=', '\u{ff1a}']);
            let end = rest
                .char_indices()
                .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
                .map_or(rest.len(), |(i, _)| i);
            if let Some(n) = parse_int(&rest[..end]) {
                return Some(n);
            }
            from = start;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

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
    fn exit_codes_and_code_prefixes_in_text() {
        assert_eq!(
            exit_code_in_text("reason: error exit code: 255 started"),
            Some(255)
        );
        assert_eq!(exit_code_in_text("exit code -1"), Some(-1));
        assert_eq!(exit_code_in_text("exitcode: 143"), Some(143));
        assert_eq!(exit_code_in_text("容器退出状态码为137，表示"), Some(137));
        assert_eq!(exit_code_in_text("exit code: none, exit code 3"), Some(3));
        assert_eq!(exit_code_in_text("exit code: none"), None);
        assert_eq!(parse_int("+300"), Some(300));
        assert_eq!(parse_int("99999999999999999999"), None);
        assert_eq!(parse_int("-"), None);
        assert_eq!(strip_code_prefix("code: 4041"), Some("4041"));
        assert_eq!(strip_code_prefix("Error Code=E4041"), Some("E4041"));
        assert_eq!(strip_code_prefix("错误码 E4041"), Some("E4041"));
        assert_eq!(strip_code_prefix("CodeNotFound"), None);
        assert_eq!(strip_code_prefix("code:"), None);
    }

    #[test]
    fn hints_pick_one_family_or_none() {
        assert_eq!(
            find_hint("Warning x service-controller E4008"),
            Some(("tke-service", "service-controller"))
        );
        assert_eq!(
            find_hint("2m Warning X ingress/web E4008"),
            Some(("tke-ingress", "ingress/"))
        );
        assert_eq!(find_hint("service/a and ingress/b E4008"), None);
        assert_eq!(find_hint("E4008"), None);
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
                    // The catalogue module itself (this test) sets no key; the rule renderer
                    // sets the keys of rule files, which are checked when they load.
                    if !p.ends_with("explain") && !p.ends_with("rules") {
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
        // Rule files name their keys as data; they must resolve to load at all.
        let book = crate::rules::RuleBook::load_builtin().unwrap();
        uses += book
            .rules()
            .map(|r| r.see_also_keys().count())
            .sum::<usize>();
        assert!(
            uses >= 15,
            "only {uses} .see_also( calls and rule-file keys found"
        );
    }

    /// The rule ids the collectors report (`disk.filesystem_full`): the ids of the rule files,
    /// and string literals `<collector>.<rule>` in the sources of every collector that has a
    /// `judge.rs`.
    fn finding_ids() -> BTreeSet<String> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut ids: BTreeSet<String> = crate::rules::RuleBook::load_builtin()
            .unwrap()
            .rules()
            .map(|r| r.id.clone())
            .collect();
        for dir in std::fs::read_dir(&src).unwrap() {
            let dir = dir.unwrap().path();
            if !dir.join("judge.rs").is_file() {
                continue;
            }
            let name = dir.file_name().unwrap().to_str().unwrap().to_string();
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&f).unwrap();
                let prefix = format!("\"{name}.");
                for (i, _) in text.match_indices(&prefix) {
                    let rest = &text[i + prefix.len()..];
                    let end = rest.find('"').unwrap_or(0);
                    let rule = &rest[..end];
                    if !rule.is_empty()
                        && rule
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                    {
                        ids.insert(format!("{name}.{rule}"));
                    }
                }
            }
        }
        ids
    }

    /// Both directions of the link between findings and entries resolve: every `see_also` key
    /// is an entry (see_also_keys_resolve, every_see_also_a_collector_sets_resolves), and every
    /// finding id an entry names is one a collector reports.
    #[test]
    fn every_finding_an_entry_names_exists() {
        let ids = finding_ids();
        for want in [
            "disk.filesystem_full",
            "kernel.oom_system",
            "iptables.kube_proxy_panic",
        ] {
            assert!(ids.contains(want), "the scan misses {want}: {ids:?}");
        }
        let mut named = 0;
        for e in &catalogue().entries {
            for f in &e.findings {
                assert!(ids.contains(f), "{}: no collector reports {f}", e.key);
                named += 1;
            }
        }
        assert!(named >= 30, "{named}");
    }

    /// A finding's link lands on an entry that names findings back: directly, or for a generic
    /// entry (a Pod state, FailedCreatePodSandBox) through one of its candidate causes.
    #[test]
    fn see_also_targets_point_back_at_findings() {
        for key in see_also::ALL {
            let e = lookup_key(key).unwrap();
            let back = !e.findings.is_empty()
                || (e.generic
                    && e.causes
                        .iter()
                        .filter_map(|c| catalogue().by_key(c))
                        .any(|c| !c.findings.is_empty()));
            assert!(
                back,
                "{key}: names no finding, directly or through its causes"
            );
        }
    }

    proptest! {
        #[test]
        fn lookup_never_panics(q in "\\PC{0,200}") {
            let _ = lookup(&q);
        }

        /// Control characters, CJK, klog-like prefixes and codes mixed: never a panic, and a
        /// generic best match always comes with its confidence said.
        #[test]
        fn lookup_never_panics_on_any_chars(
            q in "(E1123 12:00:00\\.123456 +1 f\\.go:1\\] |\\[ *[0-9]+\\.[0-9]+\\] )?[\\x00-\\x7f子网磁盘爆满E4 0-]{0,120}"
        ) {
            let l = lookup(&q);
            if l.generic() {
                // Generic, or weaker still when only a title matched ("磁盘!"): never an
                // answer that reads as confident.
                prop_assert!(
                    matches!(l.confidence(), Confidence::Generic | Confidence::Weak),
                    "{:?}",
                    l.confidence()
                );
            }
        }

        #[test]
        fn decode_is_always_in_range(n in any::<i64>()) {
            let d = decode_exit_code(n);
            prop_assert_eq!(i64::from(d.code), n.rem_euclid(256));
        }
    }
}
