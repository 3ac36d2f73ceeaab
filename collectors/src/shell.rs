//! Commands printed in findings: one renderer fills a command template with arguments and
//! shell-quotes every argument.
//!
//! A person copies these commands into a root shell on the node, and their arguments are
//! host data: pod names and namespaces from log directories, container ids, process names,
//! file names, mount points, device names, the node name. A directory named
//! `x$(touch /tmp/p)`, or one holding `;`, a backtick or a newline, must reach the shell as
//! one word that names it, never as code. So:
//!
//! - The **template** is ours: shell text with named placeholders `{name}` (lower-case
//!   letters, digits and `_`). Pipelines, redirections, globs and quoting stay in the template
//!   (`cat /dev/null > {file}`, `ls -l /proc/{pid}/fd | grep '(deleted)'`,
//!   `du -sh {dir}/containers/*`). `{{` and `}}` are literal braces (for jsonpath
//!   expressions). A placeholder may not stand inside the template's own quotes, nor right
//!   after `$`, `\` or `~`: there the quoted argument would change meaning; nor may a template
//!   use backticks (a backslash means something else inside them: write `$(...)`). The
//!   renderer knows nothing of where a template comes from: code uses [`cmd!`](crate::cmd),
//!   which checks at compile time that the placeholders and the arguments match; a rule file
//!   can hand its template strings to [`placeholders`] and [`render`] at load time.
//! - Every **argument** is quoted by [`quote`], with POSIX single quotes (`'` as `'\''`). A
//!   value made only of `[A-Za-z0-9_./:=@%+,-]` (and not starting with `=`, which zsh expands)
//!   stays bare, so ordinary commands read as a person would type them
//!   (`kubectl -n kube-system describe pod coredns-5d78c9869d-x2x4b`). An empty value is `''`.
//! - A value holding a **control character** (newline, ESC, any C0 or C1 control, DEL) or a
//!   bidirectional override / line separator (see [`crate::sanitize::is_unsafe`]) is written
//!   with ANSI-C quoting, `$'…'`, where those characters are `\xHH` escapes of their UTF-8
//!   bytes, `\` is `\\` and `'` is `\x27`. Single quotes would keep such a value inert too,
//!   but they would carry the raw newline or ESC into the printed text, where it splits one
//!   command into two lines (a person copying "the line" runs half of it) or drives the
//!   terminal. `$'…'` keeps the command on one printable line and yields the exact bytes in
//!   bash, zsh, ksh, busybox ash and every shell of POSIX.1-2024 (which standardised it).
//!   An older dash (Debian 12's 0.5.12) reads `$'a\x0ab'` as `$` followed by the
//!   single-quoted literal `a\x0ab`: a wrong file name, never execution. `'` is `\x27`
//!   rather than `\'` so that bash's interactive history expansion, which does not know
//!   `$'…'`, sees the same quoting as the parser. A NUL cannot be in a file name or an
//!   argument; if a value holds one it is `\x00`, where bash ends the word.
//!
//! [`crate::Finding::command`] accepts only a [`Cmd`] (or a fixed `&'static str`, which
//! cannot carry host data); a `String` built with `format!` does not compile there.

use std::borrow::Cow;
use std::fmt::{self, Write};

use crate::sanitize;

/// Bytes a bare (unquoted) argument may hold: none of them is special to a POSIX shell,
/// bash or zsh inside a word.
const fn is_bare(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'.' | b'/' | b':' | b'=' | b'@' | b'%' | b'+' | b',' | b'-'
        )
}

/// Quotes `s` as one shell word that yields exactly `s` (see the module documentation).
pub fn quote(s: &str) -> Cow<'_, str> {
    if !s.is_empty() && s.bytes().all(is_bare) && !s.starts_with('=') {
        return Cow::Borrowed(s);
    }
    if !s.chars().any(sanitize::is_unsafe) {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('\'');
        for c in s.chars() {
            if c == '\'' {
                out.push_str("'\\''");
            } else {
                out.push(c);
            }
        }
        out.push('\'');
        return Cow::Owned(out);
    }
    let mut out = String::with_capacity(s.len() * 2 + 3);
    out.push_str("$'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\x27"),
            c if sanitize::is_unsafe(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

/// The value of one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// One word.
    Word(String),
    /// Several words, each quoted, separated by spaces (`df -h {dirs}`); a placeholder
    /// given a list should stand alone between spaces.
    Words(Vec<String>),
}

/// Values an argument can be made of: anything `Display` (names, paths via `.display()`,
/// numbers), or [`Words`].
pub trait IntoArg {
    fn into_arg(self) -> Arg;
}

impl<T: fmt::Display> IntoArg for T {
    fn into_arg(self) -> Arg {
        Arg::Word(self.to_string())
    }
}

/// A list argument: each item becomes one quoted word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words(pub Vec<String>);

impl<S: fmt::Display> FromIterator<S> for Words {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Words {
        Words(iter.into_iter().map(|s| s.to_string()).collect())
    }
}

impl IntoArg for Words {
    fn into_arg(self) -> Arg {
        Arg::Words(self.0)
    }
}

/// Why a template and its arguments do not make a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("command template {template:?}, byte {at}: {what}")]
    Syntax {
        template: String,
        at: usize,
        what: &'static str,
    },
    #[error("command template {template:?}: no argument for {{{name}}}")]
    Missing { template: String, name: String },
    #[error("command template {template:?}: argument {name:?} has no placeholder")]
    Unused { template: String, name: String },
    #[error("command template {template:?}: argument {name:?} given twice")]
    Duplicate { template: String, name: String },
}

/// A command a finding prints: a template and its arguments, rendered by [`Cmd::render`].
/// Build it with [`cmd!`](crate::cmd), which checks the template at compile time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    template: Cow<'static, str>,
    fixed: bool,
    args: Vec<(Cow<'static, str>, Arg)>,
}

impl Cmd {
    /// A template whose arguments follow with [`Cmd::arg`]. Prefer [`cmd!`](crate::cmd).
    pub fn new(template: &'static str) -> Cmd {
        Cmd {
            template: Cow::Borrowed(template),
            fixed: false,
            args: Vec::new(),
        }
    }

    /// A command of our own text only, printed as written (no placeholders, no arguments).
    pub fn fixed(text: &'static str) -> Cmd {
        Cmd {
            template: Cow::Borrowed(text),
            fixed: true,
            args: Vec::new(),
        }
    }

    /// A template from a rule file ([`crate::rules`]), checked with [`placeholders`] when the
    /// file loaded, and its arguments. Only the rule renderer builds these.
    pub(crate) fn from_rule(template: String, args: Vec<(String, Arg)>) -> Cmd {
        Cmd {
            template: Cow::Owned(template),
            fixed: false,
            args: args.into_iter().map(|(n, a)| (Cow::Owned(n), a)).collect(),
        }
    }

    pub fn arg(mut self, name: &'static str, value: impl IntoArg) -> Cmd {
        self.args.push((Cow::Borrowed(name), value.into_arg()));
        self
    }

    pub fn template(&self) -> &str {
        &self.template
    }

    /// The command text, every argument quoted.
    pub fn render(&self) -> Result<String, TemplateError> {
        if self.fixed {
            return Ok(self.template.to_string());
        }
        render(&self.template, &self.args)
    }
}

impl From<&'static str> for Cmd {
    fn from(text: &'static str) -> Cmd {
        Cmd::fixed(text)
    }
}

/// Fills `template` with `args` (name, value), quoting every value. Every placeholder must
/// have exactly one argument and every argument a placeholder.
pub fn render<N: AsRef<str>>(template: &str, args: &[(N, Arg)]) -> Result<String, TemplateError> {
    for (i, (a, _)) in args.iter().enumerate() {
        if args[..i].iter().any(|(b, _)| b.as_ref() == a.as_ref()) {
            return Err(TemplateError::Duplicate {
                template: template.to_string(),
                name: a.as_ref().to_string(),
            });
        }
    }
    let t = template.as_bytes();
    let mut used = vec![false; args.len()];
    let mut out = String::with_capacity(template.len() + 32);
    let (mut i, mut q) = (0, Quote::None);
    loop {
        match step(t, i, q) {
            Step::Done => break,
            Step::Error { at, what } => {
                return Err(TemplateError::Syntax {
                    template: template.to_string(),
                    at,
                    what,
                })
            }
            Step::Text {
                start,
                end,
                next,
                quote,
            } => {
                out.push_str(&template[start..end]);
                (i, q) = (next, quote);
            }
            Step::Hole { start, end, next } => {
                let name = &template[start..end];
                let Some(k) = args.iter().position(|(n, _)| n.as_ref() == name) else {
                    return Err(TemplateError::Missing {
                        template: template.to_string(),
                        name: name.to_string(),
                    });
                };
                used[k] = true;
                match &args[k].1 {
                    Arg::Word(w) => out.push_str(&quote(w)),
                    Arg::Words(ws) => {
                        for (j, w) in ws.iter().enumerate() {
                            if j > 0 {
                                out.push(' ');
                            }
                            out.push_str(&quote(w));
                        }
                    }
                }
                i = next;
            }
        }
    }
    if let Some(k) = used.iter().position(|u| !u) {
        return Err(TemplateError::Unused {
            template: template.to_string(),
            name: args[k].0.as_ref().to_string(),
        });
    }
    Ok(out)
}

/// The placeholder names of a template, in order (repeats included), or its syntax error.
pub fn placeholders(template: &str) -> Result<Vec<&str>, TemplateError> {
    let t = template.as_bytes();
    let mut names = Vec::new();
    let (mut i, mut q) = (0, Quote::None);
    loop {
        match step(t, i, q) {
            Step::Done => return Ok(names),
            Step::Error { at, what } => {
                return Err(TemplateError::Syntax {
                    template: template.to_string(),
                    at,
                    what,
                })
            }
            Step::Text { next, quote, .. } => (i, q) = (next, quote),
            Step::Hole { start, end, next } => {
                names.push(&template[start..end]);
                i = next;
            }
        }
    }
}

/// Compile-time check behind [`cmd!`](crate::cmd): the template's syntax, and that its
/// placeholders and `names` are the same set (no name twice). `None` when it is fine.
pub const fn check(template: &str, names: &[&str]) -> Option<&'static str> {
    const MAX: usize = 16;
    if names.len() > MAX {
        return Some("a command takes at most 16 arguments");
    }
    let mut a = 0;
    while a < names.len() {
        let mut b = a + 1;
        while b < names.len() {
            if bytes_eq(names[a].as_bytes(), names[b].as_bytes()) {
                return Some("an argument is given twice");
            }
            b += 1;
        }
        a += 1;
    }
    let t = template.as_bytes();
    let mut used = [false; MAX];
    let mut i = 0;
    let mut q = Quote::None;
    loop {
        match step(t, i, q) {
            Step::Done => break,
            Step::Error { what, .. } => return Some(what),
            Step::Text { next, quote, .. } => {
                i = next;
                q = quote;
            }
            Step::Hole { start, end, next } => {
                let mut k = 0;
                let mut found = false;
                while k < names.len() {
                    if range_eq(t, start, end, names[k].as_bytes()) {
                        used[k] = true;
                        found = true;
                    }
                    k += 1;
                }
                if !found {
                    return Some("a placeholder of the template has no argument");
                }
                i = next;
            }
        }
    }
    let mut k = 0;
    while k < names.len() {
        if !used[k] {
            return Some("an argument has no placeholder in the template");
        }
        k += 1;
    }
    None
}

const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn range_eq(t: &[u8], start: usize, end: usize, name: &[u8]) -> bool {
    if end - start != name.len() {
        return false;
    }
    let mut i = 0;
    while i < name.len() {
        if t[start + i] != name[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The template's quoting state at a point: where a placeholder may stand (`None` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
    AnsiC,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// `template[start..end]` is literal text; continue at `next` in state `quote`.
    Text {
        start: usize,
        end: usize,
        next: usize,
        quote: Quote,
    },
    /// A placeholder named `template[start..end]`; continue at `next`.
    Hole {
        start: usize,
        end: usize,
        next: usize,
    },
    Done,
    Error {
        at: usize,
        what: &'static str,
    },
}

const BAD_HOLE: &str =
    "a placeholder is {name} (a-z, 0-9, _, starting with a letter); write {{ for a literal {";

/// One step of the template grammar, shared by the compile-time check and the renderer.
const fn step(t: &[u8], i: usize, quote: Quote) -> Step {
    if i >= t.len() {
        return end_of_template(t.len(), quote);
    }
    match t[i] {
        b'{' => open_brace(t, i, quote),
        b'}' => close_brace(t, i, quote),
        _ => literal_run(t, i, quote),
    }
}

/// The end of the template at byte `n`: done, unless a quote is still open.
const fn end_of_template(n: usize, quote: Quote) -> Step {
    if matches!(quote, Quote::None) {
        Step::Done
    } else {
        Step::Error {
            at: n,
            what: "a quote of the template is not closed",
        }
    }
}

/// A doubled brace at `i` (`{{` or `}}`): one literal brace.
const fn literal_brace(i: usize, quote: Quote) -> Step {
    Step::Text {
        start: i,
        end: i + 1,
        next: i + 2,
        quote,
    }
}

/// `{` at `i`: a literal `{{`, or a placeholder `{name}` where one may stand.
const fn open_brace(t: &[u8], i: usize, quote: Quote) -> Step {
    let n = t.len();
    if i + 1 < n && t[i + 1] == b'{' {
        return literal_brace(i, quote);
    }
    let mut j = i + 1;
    if j >= n || !t[j].is_ascii_lowercase() {
        return Step::Error {
            at: i,
            what: BAD_HOLE,
        };
    }
    while j < n && (t[j].is_ascii_lowercase() || t[j].is_ascii_digit() || t[j] == b'_') {
        j += 1;
    }
    if j >= n || t[j] != b'}' {
        return Step::Error {
            at: i,
            what: BAD_HOLE,
        };
    }
    if !matches!(quote, Quote::None) {
        return Step::Error {
            at: i,
            what: "a placeholder inside the template's quotes (the renderer quotes the argument: close the quote around it)",
        };
    }
    if i > 0 && matches!(t[i - 1], b'$' | b'\\' | b'~') {
        return Step::Error {
            at: i,
            what: "a placeholder right after $, \\ or ~ (the quoted argument would change meaning)",
        };
    }
    Step::Hole {
        start: i + 1,
        end: j,
        next: j + 1,
    }
}

/// `}` at `i`: a literal `}}`, or an error.
const fn close_brace(t: &[u8], i: usize, quote: Quote) -> Step {
    if i + 1 < t.len() && t[i + 1] == b'}' {
        return literal_brace(i, quote);
    }
    Step::Error {
        at: i,
        what: "a lone } (write }} for a literal })",
    }
}

/// A run of literal text from `i` up to the next brace, tracking the shell's quoting.
const fn literal_run(t: &[u8], i: usize, quote: Quote) -> Step {
    let mut j = i;
    let mut q = quote;
    while j < t.len() && t[j] != b'{' && t[j] != b'}' {
        // Inside backticks a backslash means something else, which would change what a
        // quoted argument yields: templates use `$(...)`.
        if t[j] == b'`' && matches!(q, Quote::None | Quote::Double) {
            return Step::Error {
                at: j,
                what: "a backtick in the template (write $(...) instead)",
            };
        }
        let (after, len) = quote_after(t, j, q);
        q = after;
        j += len;
    }
    Step::Text {
        start: i,
        end: j,
        next: j,
        quote: q,
    }
}

/// The quoting state after the literal byte at `j` in state `q`, and how many bytes it
/// takes: 2 for a backslash and the byte it escapes (a brace is never escaped: it is the
/// template's), and for the `$'` that opens ANSI-C quoting; else 1.
const fn quote_after(t: &[u8], j: usize, q: Quote) -> (Quote, usize) {
    let c = t[j];
    let escapes_next = j + 1 < t.len() && t[j + 1] != b'{' && t[j + 1] != b'}';
    match q {
        Quote::None => match c {
            b'\\' if escapes_next => (q, 2),
            b'\'' => (Quote::Single, 1),
            b'"' => (Quote::Double, 1),
            b'$' if j + 1 < t.len() && t[j + 1] == b'\'' => (Quote::AnsiC, 2),
            _ => (q, 1),
        },
        Quote::Single if c == b'\'' => (Quote::None, 1),
        Quote::Single => (q, 1),
        // The same rules inside "..." and $'...': a backslash escapes the next byte, and
        // the quote that opened it closes it.
        Quote::Double | Quote::AnsiC => {
            let close = if matches!(q, Quote::Double) {
                b'"'
            } else {
                b'\''
            };
            if c == b'\\' && escapes_next {
                (q, 2)
            } else if c == close {
                (Quote::None, 1)
            } else {
                (q, 1)
            }
        }
    }
}

/// A checked command: `cmd!("kubectl -n {ns} describe pod {pod}", ns = ns, pod = name)`.
///
/// The template must be a string literal; its syntax, and that its placeholders are exactly
/// the named arguments, are checked at compile time (a mismatch does not compile). Each
/// value is anything `Display`, or [`shell::Words`](crate::shell::Words) for a list; every
/// value is quoted by [`shell::quote`](crate::shell::quote) when the command is rendered.
#[macro_export]
macro_rules! cmd {
    ($template:literal $(, $name:ident = $value:expr)* $(,)?) => {{
        const _: () = if let Some(e) = $crate::shell::check($template, &[$(stringify!($name)),*]) {
            panic!("{}", e)
        };
        $crate::shell::Cmd::new($template)$(.arg(stringify!($name), $value))*
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_bare() {
        for s in [
            "coredns-5d78c9869d-x2x4b",
            "/var/lib/docker",
            "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b",
            "node-1.example.com",
            "spec.nodeName=x",
            "a,b:c@d%e+f",
            "4242",
        ] {
            assert_eq!(quote(s), s);
        }
    }

    #[test]
    fn metacharacters_and_quotes_are_single_quoted() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(
            quote("x$(touch /tmp/p)`id`;|&&<>*?~#!{}[]()"),
            "'x$(touch /tmp/p)`id`;|&&<>*?~#!{}[]()'"
        );
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("'"), "''\\'''");
        assert_eq!(quote("\"q\""), "'\"q\"'");
        assert_eq!(quote("a\\b"), "'a\\b'");
        // zsh expands a word starting with `=`; a leading `-` is no shell matter.
        assert_eq!(quote("=ls"), "'=ls'");
        assert_eq!(quote("-rf"), "-rf");
        // Other scripts are kept as they are, inside quotes.
        assert_eq!(quote("café"), "'café'");
        assert_eq!(quote("节点"), "'节点'");
    }

    #[test]
    fn control_characters_and_bidi_use_ansi_c_quoting_on_one_line() {
        assert_eq!(quote("a\nb"), "$'a\\x0ab'");
        assert_eq!(quote("\x1b[31mred"), "$'\\x1b[31mred'");
        assert_eq!(quote("x\ty'z\\"), "$'x\\x09y\\x27z\\\\'");
        assert_eq!(quote("gpj.\u{202e}exe"), "$'gpj.\\xe2\\x80\\xaeexe'");
        assert_eq!(quote("\u{9b}"), "$'\\xc2\\x9b'");
        assert_eq!(quote("\u{7f}é"), "$'\\x7fé'");
        for s in ["a\nb", "\r", "\x1b", "\u{2066}", "\u{2028}", "\0"] {
            let q = quote(s);
            assert!(!q.chars().any(sanitize::is_unsafe), "{q:?}");
        }
    }

    #[test]
    fn templates_render_with_quoted_arguments() {
        let c = cmd!(
            "kubectl -n {ns} describe pod {pod} | grep -A5 'Last State'",
            ns = "shop",
            pod = "x$(touch /tmp/p)"
        );
        assert_eq!(
            c.render().unwrap(),
            "kubectl -n shop describe pod 'x$(touch /tmp/p)' | grep -A5 'Last State'"
        );
        let c = cmd!("ls -l /proc/{pid}/fd | grep '(deleted)'", pid = 42u32);
        assert_eq!(c.render().unwrap(), "ls -l /proc/42/fd | grep '(deleted)'");
        let c = cmd!(
            "df -h {dirs}",
            dirs = Words(vec!["/a".into(), "/b c".into()])
        );
        assert_eq!(c.render().unwrap(), "df -h /a '/b c'");
        // Literal braces inside the template's quotes (jsonpath), the argument outside.
        let c = cmd!(
            "kubectl get ds -o jsonpath='{{.spec}}' {name}",
            name = "kube-proxy"
        );
        assert_eq!(
            c.render().unwrap(),
            "kubectl get ds -o jsonpath='{.spec}' kube-proxy"
        );
        // A fixed command is printed as written.
        assert_eq!(
            Cmd::from("jsonpath='{.x}' | grep {y}").render().unwrap(),
            "jsonpath='{.x}' | grep {y}"
        );
    }

    #[test]
    fn mismatched_arguments_are_errors() {
        let e = Cmd::new("cat {file}").render().unwrap_err();
        assert!(matches!(e, TemplateError::Missing { ref name, .. } if name == "file"));
        let e = Cmd::new("cat {file}")
            .arg("file", "a")
            .arg("other", "b")
            .render()
            .unwrap_err();
        assert!(matches!(e, TemplateError::Unused { ref name, .. } if name == "other"));
        let e = Cmd::new("cat {file}")
            .arg("file", "a")
            .arg("file", "b")
            .render()
            .unwrap_err();
        assert!(matches!(e, TemplateError::Duplicate { .. }));
        // The same placeholder twice takes one argument.
        assert_eq!(
            Cmd::new("stat {p} /proc/1/root{p}")
                .arg("p", "/run/x")
                .render()
                .unwrap(),
            "stat /run/x /proc/1/root/run/x"
        );
    }

    #[test]
    fn the_compile_time_check_matches_the_renderer() {
        assert_eq!(check("cat {file}", &["file"]), None);
        assert_eq!(check("echo hi", &[]), None);
        assert!(check("cat {file}", &[]).is_some());
        assert!(check("cat {file}", &["file", "x"]).is_some());
        assert!(check("cat {a} {b}", &["a", "a"]).is_some());
        for bad in [
            "grep '{pattern}' f",    // inside single quotes
            "echo \"{name}\"",       // inside double quotes
            "echo $'{name}'",        // inside ANSI-C quotes
            "echo ${name}",          // after $
            "echo \\{name}",         // after a backslash
            "ls ~{user}",            // after ~
            "echo {Name}",           // not a placeholder name
            "echo {1x}",             // idem
            "echo {name",            // not closed
            "echo }",                // lone brace
            "echo 'unterminated {{", // quote left open
            "echo \"a\\\" {name}\"", // an escaped quote does not close
            "echo `cat {name}`",     // backticks
        ] {
            let names: &[&str] = if bad.contains("user") {
                &["user"]
            } else {
                &["name"]
            };
            assert!(check(bad, names).is_some(), "{bad}");
            let args: Vec<(&str, Arg)> =
                names.iter().map(|n| (*n, Arg::Word("v".into()))).collect();
            assert!(render(bad, &args).is_err(), "{bad}");
        }
        // Closing the template's quote around a placeholder is fine.
        assert_eq!(check("grep ' '{k}' ' /proc/locks", &["k"]), None);
        assert_eq!(check("echo 'it'\\''s' {x}", &["x"]), None);
        assert_eq!(check("echo $'a\\'b' {x}", &["x"]), None);
        assert_eq!(
            placeholders("a {x} 'q' \"{{\" {y}{x}").unwrap(),
            vec!["x", "y", "x"]
        );
    }

    /// A word of `shell` with the rendered argument inside (`x<arg>y`), through printf.
    fn through_shell(shell: &[&str], arg: &str) -> Option<Vec<u8>> {
        let script = format!("printf '%s\\0' {} x{}y", quote(arg), quote(arg));
        let out = std::process::Command::new(shell[0])
            .args(&shell[1..])
            .arg("-c")
            .arg(&script)
            .env("LC_ALL", "C")
            .output()
            .ok()?;
        Some(out.stdout)
    }

    fn have(shell: &[&str]) -> bool {
        std::process::Command::new(shell[0])
            .args(&shell[1..])
            .arg("-c")
            .arg("true")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn expected(arg: &str) -> Vec<u8> {
        format!("{arg}\0x{arg}y\0").into_bytes()
    }

    #[test]
    fn real_shells_yield_the_exact_argument() {
        let hostile = [
            "",
            "x$(touch /tmp/pwned)",
            "a`id`b",
            "; rm -rf / ;",
            "a | b && c || d & e",
            "it's \"quoted\"",
            "line1\nline2",
            "\x1b[31mred\x1b[0m",
            "tab\there",
            "back\\slash\\",
            "trailing\\",
            "gpj.\u{202e}exe",
            "\u{9b}31m",
            "*?[a-z]{a,b}~root",
            "$HOME ${IFS} $((1+1))",
            "#comment",
            "=ls",
            "naïve 节点",
            "\\x41\\n",
        ];
        let mut shells: Vec<&[&str]> = vec![&["bash"]];
        if have(&["busybox", "sh"]) {
            shells.push(&["busybox", "sh"]);
        } else {
            eprintln!("busybox not installed: only bash is checked here");
        }
        for sh in shells {
            for s in hostile {
                assert_eq!(
                    through_shell(sh, s).unwrap_or_default(),
                    expected(s),
                    "{sh:?} with {s:?} rendered as {}",
                    quote(s)
                );
            }
        }
    }

    #[test]
    fn an_old_dash_reads_ansi_c_quoting_as_an_inert_literal() {
        if !have(&["dash"]) {
            crate::skip!(
                "SKIP an_old_dash_reads_ansi_c_quoting_as_an_inert_literal: dash not installed"
            );
            return;
        }
        // Without control characters dash yields the argument itself.
        for s in ["x$(touch /tmp/pwned)", "it's", "a b"] {
            assert_eq!(through_shell(&["dash"], s).unwrap(), expected(s));
        }
        // With them, dash 0.5.12 sees `$` and a single-quoted literal: text, not code.
        let s = "a\nb$(touch /tmp/pwned)";
        let q = quote(s);
        let out = through_shell(&["dash"], s).unwrap();
        let text = String::from_utf8_lossy(&out);
        let supported = out == expected(s);
        let inert = text.starts_with(&format!("${}\0", &q[2..q.len() - 1]));
        assert!(supported || inert, "{text:?}");
    }

    /// The string literals that follow `marker` in Rust source (`cmd!("...")`,
    /// `.command("...")`), unescaped; raw strings included.
    fn literals_after(src: &str, marker: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (at, _) in src.match_indices(marker) {
            let rest = src[at + marker.len()..].trim_start();
            if let Some(raw) = rest.strip_prefix("r#\"") {
                if let Some(end) = raw.find("\"#") {
                    out.push(raw[..end].to_string());
                }
                continue;
            }
            let Some(body) = rest.strip_prefix('"') else {
                continue;
            };
            let mut s = String::new();
            let mut chars = body.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('\n') => {
                            // A line continuation: the next line's indentation is skipped.
                            let rest: String = chars.clone().collect();
                            let skip = rest.len() - rest.trim_start().len();
                            for _ in 0..skip {
                                chars.next();
                            }
                        }
                        Some(other) => s.push(other),
                        None => break,
                    },
                    c => s.push(c),
                }
            }
            out.push(s);
        }
        out
    }

    fn sources() -> Vec<(std::path::PathBuf, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut out,
        );
        out
    }

    /// Every command template in the crate and in the rule files, filled with a hostile value
    /// for each placeholder, renders to one printable line that bash parses (`bash -n`);
    /// every fixed command parses too. Templates in code are built only with `cmd!` (checked
    /// at compile time); rule files are checked when they load.
    #[test]
    fn every_template_in_the_code_renders_to_valid_shell() {
        let hostile = "x$(touch /tmp/p)`id`;a|b&&c 'q' \"d\"\n\u{1b}[31m\u{202e}";
        let mut templates = 0;
        let mut fixed = 0;
        for (path, src) in sources() {
            if path.ends_with("shell.rs") {
                continue;
            }
            assert!(
                !src.contains("Cmd::new("),
                "{}: build commands with cmd! (checked at compile time), not Cmd::new",
                path.display()
            );
            assert!(
                path.ends_with("finding.rs") || !src.contains("commands.push("),
                "{}: add commands with Finding::command, which renders them",
                path.display()
            );
            let mut rendered = Vec::new();
            for t in literals_after(&src, "cmd!(") {
                let names = placeholders(&t).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let mut args: Vec<(&str, Arg)> = Vec::new();
                for n in names {
                    if !args.iter().any(|(a, _)| *a == n) {
                        args.push((n, Arg::Word(hostile.to_string())));
                    }
                }
                rendered.push(render(&t, &args).unwrap());
                templates += 1;
            }
            for marker in [".command(", "Cmd::fixed(", "_CMD: &str ="] {
                for c in literals_after(&src, marker) {
                    rendered.push(c);
                    fixed += 1;
                }
            }
            for r in rendered {
                assert!(!r.chars().any(sanitize::is_unsafe), "{r:?}");
                let st = std::process::Command::new("bash")
                    .args(["-n", "-c", &r])
                    .status()
                    .unwrap();
                assert!(st.success(), "{}: bash cannot parse {r:?}", path.display());
            }
        }
        // The rule files' commands, likewise (their syntax is also checked when they load).
        let book = crate::rules::RuleBook::load_builtin().unwrap();
        for rule in book.rules() {
            for t in rule.command_templates() {
                let names = placeholders(t).unwrap_or_else(|e| panic!("{}: {e}", rule.file));
                let mut args: Vec<(&str, Arg)> = Vec::new();
                for n in &names {
                    if !args.iter().any(|(a, _)| a == n) {
                        args.push((n, Arg::Word(hostile.to_string())));
                    }
                }
                let r = render(t, &args).unwrap();
                if names.is_empty() {
                    fixed += 1;
                } else {
                    templates += 1;
                }
                assert!(!r.chars().any(sanitize::is_unsafe), "{r:?}");
                let st = std::process::Command::new("bash")
                    .args(["-n", "-c", &r])
                    .status()
                    .unwrap();
                assert!(st.success(), "{}: bash cannot parse {r:?}", rule.file);
            }
        }
        eprintln!("{templates} templates, {fixed} fixed commands");
        // The judges and rule files print about 60 templated and 50 fixed commands.
        assert!(
            templates >= 50 && fixed >= 40,
            "{templates} templates, {fixed} fixed"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// For any argument, bash (and busybox sh when installed) parse the rendered word
        /// back into exactly that argument, alone and inside a larger word.
        #[test]
        fn rendered_arguments_round_trip_through_a_real_shell(
            s in proptest::prop_oneof![
                "[a-z0-9 $`'\"\\\\;|&<>(){}\\[\\]*?~#=!%\n\t\x1b\u{7f}\u{9b}\u{202e}\u{2066}é节]{0,24}",
                proptest::prelude::any::<String>(),
            ]
        ) {
            proptest::prop_assume!(!s.contains('\0'));
            let q = quote(&s);
            proptest::prop_assert!(!q.chars().any(sanitize::is_unsafe), "{q:?}");
            proptest::prop_assert_eq!(through_shell(&["bash"], &s).unwrap_or_default(), expected(&s));
            if have(&["busybox", "sh"]) {
                proptest::prop_assert_eq!(
                    through_shell(&["busybox", "sh"], &s).unwrap_or_default(),
                    expected(&s)
                );
            }
        }
    }
}
