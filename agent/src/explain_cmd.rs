//! `node-doctor explain <query> [--lang en|zh] [--format table|json]` and `GET /explain?q=&lang=`.
//!
//! Both return the same JSON document ([`explain_json`]); the terminal can have it as a table
//! ([`render_table`]). Matching and the catalogue live in `collectors::explain`; this module
//! only renders.
//!
//! `main.rs` calls [`run`] for the subcommand and exits with its return value (0 on a match,
//! 1 on no match); the router answers `GET /explain` with [`http_response`] (status and JSON
//! body).

use std::fmt::Write as _;
use std::io::Write;

use collectors::explain::{self, Confidence, Lookup};
use collectors::Lang;
use serde_json::{json, Value};

use crate::table::{field, numbered};
use crate::view::pick;

/// Output format of the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
}

/// A short name for where a code is reported, so that a choice between components reads as
/// one (`TKE Service event` vs `TKE Ingress event`).
pub fn component_label(component: &str, lang: Lang) -> &str {
    let (en, zh) = match component {
        "tke-service" => ("TKE Service event", "TKE Service 事件"),
        "tke-ingress" => ("TKE Ingress event", "TKE Ingress 事件"),
        "tke-ingress-controller" => ("TKE Ingress controller log", "TKE Ingress 控制器日志"),
        "ack-ccm" => (
            "ACK LoadBalancer Service event",
            "ACK LoadBalancer Service 事件",
        ),
        "cce-pod" => ("CCE Pod network event", "CCE Pod 网络事件"),
        "cce-node" => ("CCE Node network event", "CCE Node 网络事件"),
        "cce-nrs" => (
            "CCE NetworkResourceSet event",
            "CCE NetworkResourceSet 事件",
        ),
        "exit-code" => ("container exit code", "容器退出码"),
        "signal" => ("signal", "信号"),
        "pod-status" => ("Pod status", "Pod 状态"),
        "pod-event" => ("Pod event reason", "Pod 事件"),
        "pod" => ("Pod", "Pod"),
        "node" => ("node", "节点"),
        other => (other, other),
    };
    pick(lang, en, zh)
}

fn no_match_message(query: &str, lang: Lang) -> String {
    if query.trim().is_empty() {
        return match lang {
            Lang::En => "The query is empty: give explain a code (E4041, 137, CrashLoopBackOff) or paste the whole event message.".to_string(),
            Lang::Zh => "查询内容为空：请输入错误码（E4041、137、CrashLoopBackOff）或粘贴完整的事件信息。".to_string(),
        };
    }
    match lang {
        Lang::En => format!(
            "No catalogue entry matches {query:?}. Try the bare code (E4041, ENIIPCapacityExceed, 137, CrashLoopBackOff) or paste the whole event message."
        ),
        Lang::Zh => format!(
            "目录中没有与 {query:?} 匹配的条目。可以只输入错误码（E4041、ENIIPCapacityExceed、137、CrashLoopBackOff），或粘贴完整的事件信息。"
        ),
    }
}

/// A catalogue entry in brief, for candidate lists.
fn entry_brief(e: &explain::Entry, lang: Lang) -> Value {
    json!({
        "key": e.key,
        "title": e.title.get(lang),
        "component": e.component,
        "findings": e.findings,
        "source": { "doc": e.doc, "section": e.section },
    })
}

/// An exit code brought into 0–255 and the signal behind it.
fn exit_json(d: &explain::ExitDecode) -> Value {
    json!({
        "input": d.input,
        "code": d.code,
        "rule": d.rule,
        "signal": d.signal,
        "signal_name": d.signal_name,
    })
}

/// The JSON document of one lookup, shared by the CLI (`--format json`) and `GET /explain`.
/// Fields added by issue 21 (all additive): `confidence`, `generic`, `candidates`, `hint`, and
/// per result `label`, `generic`, `causes`, `findings`, `match.corrections`.
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
                "label": component_label(&e.component, lang),
                "match": {
                    "kind": m.kind.as_str(),
                    "text": m.matched,
                    "score": m.score,
                    "corrections": m.corrections,
                },
                "generic": e.generic,
                "title": e.title.get(lang),
                "cause": e.cause.get(lang),
                "fix": e.fix.iter().map(|t| t.get(lang)).collect::<Vec<_>>(),
                "risk": e.risk.as_ref().map(|t| t.get(lang)),
                "commands": e.commands,
                "causes": e.causes,
                "findings": e.findings,
                "source": { "doc": e.doc, "section": e.section },
            })
        })
        .collect();
    let mut doc = json!({
        "query": l.query,
        "lang": lang.as_str(),
        "matched": l.is_match(),
        "confidence": l.confidence().as_str(),
        "ambiguous": l.ambiguous(),
        "generic": l.generic(),
        "components": l.top_components(),
        "hint": l.hint.map(|(family, word)| json!({ "component": family, "word": word })),
        "exit_code": l.exit.as_ref().map(exit_json),
        "candidates": l.candidates.iter().map(|e| entry_brief(e, lang)).collect::<Vec<_>>(),
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

/// Most entries the table shows; JSON has them all.
const MAX_TABLE_ENTRIES: usize = 8;

/// A terminal rendering of one lookup: what kind of answer it is, then one block per entry,
/// best first.
pub fn render_table(l: &Lookup<'_>, lang: Lang) -> String {
    let mut out = String::new();
    if let Some(d) = &l.exit {
        exit_code_line(&mut out, d, lang);
    }
    if !l.is_match() {
        out.push_str(&no_match_message(&l.query, lang));
        out.push('\n');
        return out;
    }
    let mut head = answer_kind(&mut out, l, lang);
    head |= ranking_hint(&mut out, l, lang);
    let ambiguous = l.ambiguous();
    let best = l.matches.first().map_or(0, |m| m.score);
    for (i, m) in l.matches.iter().take(MAX_TABLE_ENTRIES).enumerate() {
        if i > 0 || l.exit.is_some() || head {
            out.push('\n');
        }
        // Where a choice between components is left to the reader, each best entry is
        // labelled with its component.
        let choice =
            (ambiguous && m.score == best).then(|| component_label(&m.entry.component, lang));
        entry_block(&mut out, m, choice, lang);
    }
    more_matches(&mut out, l.matches.len(), lang);
    out
}

/// `exit code 137 = 128 + 9 (SIGKILL)`, or `exit code -1 -> 255 (rule: …)`.
fn exit_code_line(out: &mut String, d: &explain::ExitDecode, lang: Lang) {
    let _ = write!(out, "{} {}", pick(lang, "exit code", "退出码"), d.input);
    if let Some(rule) = d.rule {
        let _ = write!(
            out,
            " -> {} ({}: {rule})",
            d.code,
            pick(lang, "rule", "规则")
        );
    }
    if let Some(sig) = d.signal {
        let name = d.signal_name.as_deref().unwrap_or("?");
        let _ = write!(out, " = 128 + {sig} ({name})");
    }
    out.push('\n');
}

/// What kind of answer it is, when it is not one confident answer: a generic symptom, an
/// ambiguous code, or titles that merely contain the query. True when it wrote a line.
fn answer_kind(out: &mut String, l: &Lookup<'_>, lang: Lang) -> bool {
    match l.confidence() {
        Confidence::Generic => generic_head(out, l, lang),
        Confidence::Ambiguous => ambiguous_head(out, l, lang),
        Confidence::Weak => {
            let _ = writeln!(
                out,
                "{}",
                pick(
                    lang,
                    "No code or message matched; these entries' titles contain the query:",
                    "没有匹配的错误码或消息；以下条目的标题包含查询内容："
                )
            );
        }
        Confidence::Confident | Confidence::None => return false,
    }
    true
}

/// A symptom reported for several causes: says so, and lists the causes the handbook names.
fn generic_head(out: &mut String, l: &Lookup<'_>, lang: Lang) {
    let what = l.matches.first().map_or("", |m| m.matched.as_str());
    let _ = writeln!(
        out,
        "{} {what:?} {}",
        pick(lang, "Generic:", "通用症状："),
        pick(
            lang,
            "is reported for several causes and the paste does not say which.",
            "有多种可能原因，粘贴的内容未指明是哪一种。"
        )
    );
    if l.candidates.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{}",
        pick(
            lang,
            "Causes the handbook lists (check each; node-doctor explain <key> for details):",
            "手册列出的原因（逐一排查；node-doctor explain <key> 查看详情）："
        )
    );
    for c in &l.candidates {
        let _ = writeln!(out, "  - {:<34} {}", c.key, c.title.get(lang));
    }
}

/// A code listed more than once: the components it is listed for, and how to choose
/// between them when there are several.
fn ambiguous_head(out: &mut String, l: &Lookup<'_>, lang: Lang) {
    let comps = l.top_components();
    let text = if comps.len() > 1 {
        pick(
            lang,
            "Ambiguous: this means different things in",
            "有歧义：以下组件中含义不同：",
        )
    } else {
        pick(
            lang,
            "Ambiguous: the handbook lists this more than once for",
            "有歧义：手册中对以下组件列出了多条：",
        )
    };
    let names: Vec<String> = comps
        .iter()
        .map(|c| format!("{c} ({})", component_label(c, lang)))
        .collect();
    let _ = writeln!(out, "{text} {}", names.join(", "));
    if comps.len() > 1 {
        let _ = writeln!(
            out,
            "{}",
            pick(
                lang,
                "Pick by where it was reported (the event's object service/... or ingress/..., or its source).",
                "请按报错来源选择（事件对象 service/... 或 ingress/...，或事件来源组件）。"
            )
        );
    }
}

/// The component a word of the paste pointed to, when it ranked several entries. True when
/// it wrote the line.
fn ranking_hint(out: &mut String, l: &Lookup<'_>, lang: Lang) -> bool {
    let Some((family, word)) = l.hint else {
        return false;
    };
    if l.matches.len() <= 1 {
        return false;
    }
    let _ = writeln!(
        out,
        "{} {} ({word:?}).",
        pick(lang, "Ranked for", "按提示优先"),
        component_label(family, lang)
    );
    true
}

/// One entry: its code, vendor, component and title (after `[choice] ` when it is one of
/// several to choose from), then how the query was read, cause, fix, risk, commands, the
/// findings of `check` that detect it, and its source.
fn entry_block(out: &mut String, m: &explain::Match<'_>, choice: Option<&str>, lang: Lang) {
    let e = m.entry;
    let code = e.codes.first().map_or(e.key.as_str(), String::as_str);
    let choice = choice.map(|c| format!("[{c}] ")).unwrap_or_default();
    let _ = writeln!(
        out,
        "{choice}{code}  [{} / {}]  {}",
        e.vendor,
        e.component,
        e.title.get(lang)
    );
    if !m.corrections.is_empty() {
        let read: Vec<String> = m
            .corrections
            .iter()
            .map(|(typed, fixed)| format!("{typed} -> {fixed}"))
            .collect();
        field(out, pick(lang, "read as", "按此理解"), read.join(", "));
    }
    field(out, pick(lang, "cause", "原因"), e.cause.get(lang));
    numbered(
        out,
        pick(lang, "fix", "处理"),
        e.fix.iter().map(|step| step.get(lang)),
    );
    if let Some(risk) = &e.risk {
        field(
            out,
            pick(lang, "risk if unfixed", "不处理的风险"),
            risk.get(lang),
        );
    }
    for c in &e.commands {
        let _ = writeln!(out, "  $ {c}");
    }
    if !e.findings.is_empty() {
        field(
            out,
            pick(
                lang,
                "node-doctor check detects it as",
                "node-doctor check 对应的结论",
            ),
            e.findings.join(", "),
        );
    }
    field(
        out,
        pick(lang, "source", "出处"),
        format_args!(
            "{} § {}",
            collectors::handbooks::name(&e.doc, lang),
            e.section
        ),
    );
}

/// How many weaker matches the table left out, when it left any.
fn more_matches(out: &mut String, total: usize, lang: Lang) {
    if total <= MAX_TABLE_ENTRIES {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} {}",
        total - MAX_TABLE_ENTRIES,
        pick(
            lang,
            "more (weaker) matches: use --format json to see them.",
            "条较弱的匹配：使用 --format json 查看。"
        )
    );
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

/// `node-doctor explain <rule id>`: the rule's own text (its page, `/rules/<id>`) on stdout,
/// `None` when no rule in force has that id (the query then goes to the catalogue).
pub fn run_rule(
    book: &collectors::rules::RuleBook,
    id: &str,
    lang: Lang,
    format: Format,
    thresholds: &crate::rules_page::Thresholds,
) -> Option<i32> {
    let text = crate::rules_page::text(book, id, lang, thresholds)?;
    let out = match format {
        Format::Table => text,
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&json!({
                "query": id,
                "matched": true,
                "rule": id,
                "page": crate::links::path(id),
                "text": text,
            }))
            .unwrap_or_default();
            s.push('\n');
            s
        }
    };
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Some(0)
}

/// Runs `node-doctor explain` on stdout.
pub fn run(query: &str, lang: Lang, format: Format) -> i32 {
    run_to(&mut std::io::stdout().lock(), query, lang, format)
}

/// Longest `q` the HTTP route accepts: a lookup scans the text once per catalogue pattern and
/// code and corrects its unknown words (about 0.2-0.5 ms of CPU per KiB, docs/explain.md), so
/// the endpoint bounds it.
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
            out.contains(
                "source: Tencent Cloud TKE, Ingress error codes § E4041 Service Not Found"
            ),
            "{out}"
        );
        assert!(out.contains("risk if unfixed: Synchronisation"), "{out}");
        let (code, out) = run_str("E4041", Lang::Zh, Format::Table);
        assert_eq!(code, 0);
        assert!(out.contains("后端 Service 不存在"), "{out}");
        assert!(
            out.contains(
                "出处: 腾讯云 TKE《Service/Ingress 事件错误码》 § Ingress Event 报错原因和处理办法"
            ),
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
            "集群 Kube-Proxy 异常排障处理 / iptables-restore 版本低导致不支持阻塞写入"
        );
        assert_eq!(v["exit_code"], Value::Null);
        assert_eq!(v["confidence"], "confident");
        assert_eq!(
            v["results"][0]["findings"][0],
            "iptables.kube_proxy_lock_error"
        );
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
    fn generic_answer_lists_candidates_instead_of_one_cause() {
        let paste = "Warning  FailedCreatePodSandBox  2m  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: context canceled";
        let (code, out) = run_str(paste, Lang::En, Format::Table);
        assert_eq!(code, 0);
        assert!(out.starts_with("Generic: \"Failed"), "{out}");
        assert!(out.contains("  - disk-full "), "{out}");
        assert!(out.contains("  - page-allocation-failure "), "{out}");
        let v = explain_json(paste, Lang::Zh);
        assert_eq!(v["confidence"], "generic");
        assert_eq!(v["generic"], true);
        assert_eq!(v["results"][0]["key"], "FailedCreatePodSandBox");
        assert_eq!(v["results"][0]["generic"], true);
        assert_eq!(v["candidates"][0]["key"], "disk-full");
        assert_eq!(
            v["candidates"][0]["title"],
            "节点磁盘已满（no space left on device）"
        );
        assert_eq!(v["candidates"][0]["findings"][0], "disk.filesystem_full");
        // With the cause in the message: one confident answer, the generic reason below it.
        let v = explain_json(&format!("{paste}: no space left on device"), Lang::En);
        assert_eq!(v["confidence"], "confident");
        assert_eq!(v["generic"], false);
        assert_eq!(v["results"][0]["key"], "disk-full");
        assert_eq!(v["candidates"], json!([]));
    }

    #[test]
    fn a_choice_between_components_is_labelled_and_a_hint_decides_it() {
        let (_, out) = run_str("E4008", Lang::En, Format::Table);
        assert!(out.contains("[TKE Service event] E4008"), "{out}");
        assert!(out.contains("[TKE Ingress controller log] E4008"), "{out}");
        assert!(out.contains("Pick by where it was reported"), "{out}");
        let v = explain_json("E4008", Lang::En);
        assert_eq!(v["confidence"], "ambiguous");
        assert_eq!(v["hint"], Value::Null);
        let paste = "Warning  SyncLoadBalancerFailed  3m  service-controller  Error syncing load balancer: E4008";
        let v = explain_json(paste, Lang::En);
        assert_eq!(v["confidence"], "confident");
        assert_eq!(v["results"][0]["key"], "tke-service:E4008");
        assert_eq!(v["results"][0]["label"], "TKE Service event");
        assert_eq!(v["hint"]["component"], "tke-service");
        assert_eq!(v["hint"]["word"], "service-controller");
        let (_, out) = run_str(paste, Lang::En, Format::Table);
        assert!(
            out.starts_with("Ranked for TKE Service event (\"service-controller\")."),
            "{out}"
        );
    }

    #[test]
    fn typos_are_shown_as_read() {
        let v = explain_json("The specified VSwitch has no availabel ip.", Lang::En);
        assert_eq!(v["results"][0]["key"], "ack-ccm:VSwitchAvailableIpNotExist");
        assert_eq!(v["results"][0]["match"]["kind"], "fuzzy_pattern");
        assert_eq!(
            v["results"][0]["match"]["corrections"],
            json!([["availabel", "available"]])
        );
        let (_, out) = run_str("page allocaton failure", Lang::En, Format::Table);
        assert!(
            out.contains("  read as: allocaton -> allocation\n"),
            "{out}"
        );
    }

    #[test]
    fn an_empty_query_says_it_is_empty() {
        for q in ["", "   ", "\n\t"] {
            let (code, out) = run_str(q, Lang::En, Format::Table);
            assert_eq!(code, 1);
            assert!(out.starts_with("The query is empty"), "{out}");
            let (_, zh) = run_str(q, Lang::Zh, Format::Json);
            let v: Value = serde_json::from_str(&zh).unwrap();
            assert_eq!(v["confidence"], "none");
            assert!(v["message"].as_str().unwrap().starts_with("查询内容为空"));
        }
    }

    #[test]
    fn table_never_prints_control_characters_from_the_paste() {
        let paste = "\u{1b}[31mno space lfet on device\u{7}\u{202e}";
        for lang in [Lang::En, Lang::Zh] {
            let (_, out) = run_str(paste, lang, Format::Table);
            assert!(
                !out.chars()
                    .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
                "{out:?}"
            );
            let (_, out) = run_str("\u{1b}[2Jnothing\u{7}", lang, Format::Table);
            assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        }
    }
}
