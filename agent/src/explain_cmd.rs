//! `node-doctor explain <query> [--lang en|zh] [--format table|json]` and `GET /explain?q=&lang=`.
//!
//! Both return the same JSON document ([`explain_json`]); the terminal can have it as a table
//! ([`render_table`]). Matching and the catalogue live in `collectors::explain`; this module
//! only renders.
//!
//! Wiring (done in main.rs by the lead): the clap subcommand calls [`run`] and exits with its
//! return value (0 on a match, 1 on no match); the router answers `GET /explain` with
//! [`http_response`] (status and JSON body).
// Until the lead wires `run` and `http_response` into main.rs, nothing in the binary calls them.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::Write;

use collectors::explain::{self, Lookup, MatchKind};
use collectors::Lang;
use serde_json::{json, Value};

/// Output format of the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "table" | "text" => Some(Format::Table),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

fn kind_str(k: MatchKind) -> &'static str {
    match k {
        MatchKind::Code => "code",
        MatchKind::ExitCode => "exit_code",
        MatchKind::Signal => "signal",
        MatchKind::ExitRange => "exit_range",
        MatchKind::Pattern => "pattern",
        MatchKind::CodeInText => "code_in_text",
        MatchKind::Title => "title",
    }
}

fn no_match_message(query: &str, lang: Lang) -> String {
    match lang {
        Lang::En => format!(
            "No catalogue entry matches {query:?}. Try the bare code (E4041, ENIIPCapacityExceed, 137, CrashLoopBackOff) or paste the whole event message."
        ),
        Lang::Zh => format!(
            "目录中没有与 {query:?} 匹配的条目。可以只输入错误码（E4041、ENIIPCapacityExceed、137、CrashLoopBackOff），或粘贴完整的事件信息。"
        ),
    }
}

/// The JSON document of one lookup, shared by the CLI (`--format json`) and `GET /explain`.
pub fn lookup_json(l: &Lookup<'_>, lang: Lang) -> Value {
    let results: Vec<Value> = l
        .matches
        .iter()
        .map(|m| {
            let e = m.entry;
            json!({
                "key": e.key,
                "codes": e.codes,
                "vendor": e.vendor,
                "component": e.component,
                "match": { "kind": kind_str(m.kind), "text": m.matched, "score": m.score },
                "title": e.title.get(lang),
                "cause": e.cause.get(lang),
                "fix": e.fix.iter().map(|t| t.get(lang)).collect::<Vec<_>>(),
                "risk": e.risk.as_ref().map(|t| t.get(lang)),
                "commands": e.commands,
                "source": { "doc": e.doc, "section": e.section },
            })
        })
        .collect();
    let mut doc = json!({
        "query": l.query,
        "lang": lang.as_str(),
        "matched": l.is_match(),
        "ambiguous": l.ambiguous(),
        "components": l.top_components(),
        "exit_code": l.exit,
        "results": results,
    });
    if !l.is_match() {
        doc["message"] = Value::String(no_match_message(&l.query, lang));
    }
    doc
}

/// Looks `query` up and returns the JSON document.
pub fn explain_json(query: &str, lang: Lang) -> Value {
    lookup_json(&explain::lookup(query), lang)
}

/// The catalogue entries a finding links to (`Finding::see_also`), for `/findings` and
/// `node-doctor check` output: `[{key, title, source: {doc, section}}]`. Unknown keys are
/// skipped (and logged), never an error.
pub fn see_also_json(keys: &[String], lang: Lang) -> Value {
    let items: Vec<Value> = keys
        .iter()
        .filter_map(|k| {
            let e = explain::lookup_key(k);
            if e.is_none() {
                tracing::warn!(key = %k, "A finding links to an explain key the catalogue does not have.");
            }
            e
        })
        .map(|e| {
            json!({
                "key": e.key,
                "title": e.title.get(lang),
                "source": { "doc": e.doc, "section": e.section },
            })
        })
        .collect();
    Value::Array(items)
}

/// A terminal rendering of one lookup: one block per entry, best first.
pub fn render_table(l: &Lookup<'_>, lang: Lang) -> String {
    let zh = lang == Lang::Zh;
    let label = |en: &'static str, cn: &'static str| if zh { cn } else { en };
    let mut out = String::new();
    if let Some(d) = &l.exit {
        let _ = write!(out, "{} {}", label("exit code", "退出码"), d.input);
        if let Some(rule) = d.rule {
            let _ = write!(out, " -> {} ({}: {rule})", d.code, label("rule", "规则"));
        }
        if let Some(sig) = d.signal {
            let name = d.signal_name.as_deref().unwrap_or("?");
            let _ = write!(out, " = 128 + {sig} ({name})");
        }
        out.push('\n');
    }
    if !l.is_match() {
        out.push_str(&no_match_message(&l.query, lang));
        out.push('\n');
        return out;
    }
    if l.ambiguous() {
        let comps = l.top_components();
        let head = if comps.len() > 1 {
            label(
                "Ambiguous: this means different things in",
                "有歧义：以下组件中含义不同：",
            )
        } else {
            label(
                "Ambiguous: the handbook lists this more than once for",
                "有歧义：手册中对以下组件列出了多条：",
            )
        };
        let _ = writeln!(out, "{head} {}", comps.join(", "));
    }
    for (i, m) in l.matches.iter().enumerate() {
        let e = m.entry;
        if i > 0 || l.exit.is_some() || l.ambiguous() {
            out.push('\n');
        }
        let code = e.codes.first().map_or(e.key.as_str(), String::as_str);
        let _ = writeln!(
            out,
            "{code}  [{} / {}]  {}",
            e.vendor,
            e.component,
            e.title.get(lang)
        );
        let _ = writeln!(out, "  {}: {}", label("cause", "原因"), e.cause.get(lang));
        if !e.fix.is_empty() {
            let _ = writeln!(out, "  {}:", label("fix", "处理"));
        }
        for (n, step) in e.fix.iter().enumerate() {
            let _ = writeln!(out, "    {}. {}", n + 1, step.get(lang));
        }
        if let Some(risk) = &e.risk {
            let _ = writeln!(
                out,
                "  {}: {}",
                label("risk if unfixed", "不处理的风险"),
                risk.get(lang)
            );
        }
        for c in &e.commands {
            let _ = writeln!(out, "  $ {c}");
        }
        let _ = writeln!(
            out,
            "  {}: {} § {}",
            label("source", "出处"),
            e.doc,
            e.section
        );
    }
    out
}

/// Runs `node-doctor explain`, writing to `out`. Returns the process exit code: 0 when
/// something matched, 1 when nothing did.
pub fn run_to(out: &mut dyn Write, query: &str, lang: Lang, format: Format) -> i32 {
    let l = explain::lookup(query);
    let text = match format {
        Format::Table => render_table(&l, lang),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&lookup_json(&l, lang))
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
            s.push('\n');
            s
        }
    };
    let _ = out.write_all(text.as_bytes());
    if l.is_match() {
        0
    } else {
        1
    }
}

/// Runs `node-doctor explain` on stdout.
pub fn run(query: &str, lang: Lang, format: Format) -> i32 {
    run_to(&mut std::io::stdout().lock(), query, lang, format)
}

/// Longest `q` the HTTP route accepts: a lookup scans the text once per catalogue code
/// (about 0.1 ms per KB), so an unauthenticated endpoint bounds it.
pub const MAX_HTTP_QUERY_BYTES: usize = 16 * 1024;

/// Answers `GET /explain?q=...&lang=...` given the raw query string (without `?`): the HTTP
/// status and the JSON body. 200 with results, 404 when nothing matches (same document, with
/// `matched: false`), 400 when `q` is missing or `lang` is unknown.
pub fn http_response(query_string: &str) -> (u16, Value) {
    let mut q = None;
    let mut lang = Lang::En;
    for pair in query_string.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_decode(v);
        match k {
            "q" => q = Some(v),
            "lang" => match Lang::parse(&v) {
                Some(l) => lang = l,
                None => {
                    return (
                        400,
                        json!({ "error": format!("unknown lang {v:?}: use en or zh") }),
                    )
                }
            },
            _ => {}
        }
    }
    if q.as_ref().is_some_and(|q| q.len() > MAX_HTTP_QUERY_BYTES) {
        return (
            400,
            json!({ "error": format!("q is longer than {MAX_HTTP_QUERY_BYTES} bytes: paste the relevant event lines only") }),
        );
    }
    let Some(q) = q.filter(|q| !q.trim().is_empty()) else {
        return (
            400,
            json!({ "error": "missing q: GET /explain?q=<code or message>&lang=en|zh" }),
        );
    };
    let doc = explain_json(&q, lang);
    let status = if doc["matched"] == Value::Bool(true) {
        200
    } else {
        404
    };
    (status, doc)
}

/// Decodes `application/x-www-form-urlencoded` text: `+` is a space, `%XX` a byte; invalid
/// escapes are kept as they are, invalid UTF-8 is replaced.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_str(q: &str, lang: Lang, format: Format) -> (i32, String) {
        let mut buf = Vec::new();
        let code = run_to(&mut buf, q, lang, format);
        (code, String::from_utf8(buf).unwrap())
    }

    #[test]
    fn cli_table_exact_code_english_and_chinese() {
        let (code, out) = run_str("E4041", Lang::En, Format::Table);
        assert_eq!(code, 0);
        assert!(out.contains("Backend Service not found"), "{out}");
        assert!(
            out.contains("source: 000_fc34186b6df04717.txt § E4041 Service Not Found"),
            "{out}"
        );
        assert!(out.contains("risk if unfixed: Synchronisation"), "{out}");
        let (code, out) = run_str("E4041", Lang::Zh, Format::Table);
        assert_eq!(code, 0);
        assert!(out.contains("后端 Service 不存在"), "{out}");
        assert!(
            out.contains("出处: 001_003e6d03f71f65c9.txt § Ingress Event 报错原因和处理办法"),
            "{out}"
        );
        assert!(!out.contains("Backend Service not found"), "{out}");
    }

    #[test]
    fn cli_table_ambiguous_names_the_components() {
        let (_, out) = run_str("E4008", Lang::En, Format::Table);
        assert!(
            out.starts_with("Ambiguous: this means different things in"),
            "{out}"
        );
        assert!(
            out.contains("tke-service") && out.contains("tke-ingress-controller"),
            "{out}"
        );
        assert!(
            out.contains("Subnet out of IPs") && out.contains("TKE_QCSRole authorisation deleted")
        );
        // 000 lists E4038 twice for the same component.
        let (_, out) = run_str("E4038", Lang::En, Format::Table);
        assert!(
            out.starts_with(
                "Ambiguous: the handbook lists this more than once for tke-ingress-controller"
            ),
            "{out}"
        );
        assert!(
            out.contains("Certificate expired") && out.contains("client certificate"),
            "{out}"
        );
    }

    #[test]
    fn cli_exit_codes() {
        let (code, out) = run_str("-1", Lang::En, Format::Table);
        assert_eq!(code, 0);
        assert!(
            out.starts_with("exit code -1 -> 255 (rule: 256 - (|code| % 256))"),
            "{out}"
        );
        let (_, out) = run_str("137", Lang::Zh, Format::Table);
        assert!(out.starts_with("退出码 137 = 128 + 9 (SIGKILL)"), "{out}");
        assert!(
            out.contains("$ journalctl -k | grep -i -E 'oom|killed process'"),
            "{out}"
        );
    }

    #[test]
    fn cli_json_pasted_message() {
        let msg = "Failed to execute iptables-restore: exit status 4 (Another app is currently holding the xtables lock. Perhaps you want to use the -w option?)";
        let (code, out) = run_str(msg, Lang::En, Format::Json);
        assert_eq!(code, 0);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["matched"], true);
        assert_eq!(v["results"][0]["key"], "xtables-lock");
        assert_eq!(v["results"][0]["match"]["kind"], "pattern");
        assert_eq!(
            v["results"][0]["source"]["section"],
            "集群 Kube-Proxy 异常排障处理"
        );
        assert_eq!(v["exit_code"], Value::Null);
    }

    #[test]
    fn cli_no_match_exits_1_and_says_so() {
        let (code, out) = run_str("definitely not a code", Lang::En, Format::Table);
        assert_eq!(code, 1);
        assert!(out.starts_with("No catalogue entry matches"), "{out}");
        let (code, out) = run_str("E9999", Lang::Zh, Format::Json);
        assert_eq!(code, 1);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["matched"], false);
        assert_eq!(v["results"], json!([]));
        assert!(v["message"].as_str().unwrap().starts_with("目录中没有"));
    }

    #[test]
    fn json_document_shape() {
        let v = explain_json("137", Lang::Zh);
        assert_eq!(v["lang"], "zh");
        assert_eq!(v["exit_code"]["code"], 137);
        assert_eq!(v["exit_code"]["signal"], 9);
        assert_eq!(v["exit_code"]["signal_name"], "SIGKILL");
        assert_eq!(v["results"][0]["key"], "exit-code:137");
        assert_eq!(v["results"][1]["key"], "signal:SIGKILL");
        assert!(v["results"][0]["title"]
            .as_str()
            .unwrap()
            .contains("SIGKILL 杀死"));
        assert!(v["results"][0]["fix"].as_array().unwrap().len() >= 2);
        assert_eq!(v["results"][0]["risk"], Value::Null);
    }

    #[test]
    fn http_same_json_as_cli() {
        let q = "The%20specified+VSwitch%20has%20no%20available%20ip.";
        let (status, body) = http_response(&format!("q={q}&lang=zh"));
        assert_eq!(status, 200);
        assert_eq!(
            body,
            explain_json("The specified VSwitch has no available ip.", Lang::Zh)
        );
        assert_eq!(
            body["results"][0]["key"],
            "ack-ccm:VSwitchAvailableIpNotExist"
        );
        assert_eq!(body["results"][0]["title"], "虚拟交换机没有可用 IP");
        let (status, body) = http_response("q=E4008");
        assert_eq!(status, 200);
        assert_eq!(body["ambiguous"], true);
        assert_eq!(body["lang"], "en");
    }

    #[test]
    fn http_errors_and_no_match() {
        assert_eq!(http_response("").0, 400);
        assert_eq!(http_response("q=").0, 400);
        assert_eq!(http_response("q=E4041&lang=fr").0, 400);
        let long = format!("q={}", "a".repeat(MAX_HTTP_QUERY_BYTES + 1));
        assert_eq!(http_response(&long).0, 400);
        let (status, body) = http_response("q=nothing%20here");
        assert_eq!(status, 404);
        assert_eq!(body["matched"], false);
        // Chinese query text, percent-encoded UTF-8.
        let (status, body) = http_response("q=%E5%AD%90%E7%BD%91%20IP%20%E4%B8%8D%E8%B6%B3");
        assert_eq!(status, 200, "{body}");
    }

    #[test]
    fn percent_decoding_is_total() {
        assert_eq!(percent_decode("a+b%20c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%E5%AD%90"), "子");
        assert_eq!(percent_decode("%FF"), "\u{fffd}");
    }

    proptest::proptest! {
        #[test]
        fn http_never_panics_and_status_matches_body(qs in "[a-z=&%+0-9A-F\\PC]{0,120}") {
            let (status, body) = http_response(&qs);
            proptest::prop_assert!(matches!(status, 200 | 400 | 404));
            if status == 200 {
                proptest::prop_assert_eq!(&body["matched"], &Value::Bool(true));
            }
        }
    }

    #[test]
    fn see_also_resolves_finding_keys() {
        let keys = vec![
            collectors::explain::see_also::DISK_FULL.to_string(),
            "no-such-key".to_string(),
        ];
        let v = see_also_json(&keys, Lang::Zh);
        assert_eq!(v.as_array().unwrap().len(), 1);
        assert_eq!(v[0]["key"], "FailedCreatePodSandBox");
        assert_eq!(v[0]["title"], "Pod 沙箱创建失败：节点磁盘已满");
        assert_eq!(v[0]["source"]["section"], "节点磁盘爆满排障处理");
    }

    #[test]
    fn format_parse() {
        assert_eq!(Format::parse("JSON"), Some(Format::Json));
        assert_eq!(Format::parse("table"), Some(Format::Table));
        assert_eq!(Format::parse("yaml"), None);
    }
}
