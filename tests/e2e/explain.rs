//! Issues 10 and 21 through the binary: `node-doctor explain` (exact, ambiguous, pasted message,
//! exit codes, no match, both languages, table and JSON; generic answers with candidates,
//! mangled codes, typos, Chinese handbook lines, plain --help, an empty query) and
//! `GET /explain` on a running `serve` (same JSON as the CLI, 404, 400, bearer token). No host
//! is read; traffic is loopback only.

use serde_json::Value;

use crate::support::{run, FakeRoot, Server};

/// `node-doctor explain --format json <query>`: exit code and the parsed document.
/// Flags go before the query: the query takes every word after it.
fn explain_json(query: &str, lang: &str) -> (i32, Value) {
    let out = run(&["explain", "--format", "json", "--lang", lang, query], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "explain {query:?}: not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), v)
}

/// `node-doctor explain <query>` as a table: exit code and stdout.
fn explain_table(args: &[&str]) -> (i32, String) {
    let mut a = vec!["explain"];
    a.extend_from_slice(args);
    let out = run(&a, &[]);
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results array")
}

fn keys(v: &Value) -> Vec<&str> {
    results(v)
        .iter()
        .map(|r| r["key"].as_str().expect("key"))
        .collect()
}

/// Percent-encodes a query-string value (RFC 3986 unreserved characters kept).
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const XTABLES_EVENT: &str = "Warning  FailedSync  3m (x12 over 10m)  kube-proxy  Failed to execute iptables-restore: exit status 4 (Another app is currently holding the xtables lock. Perhaps you want to use the -w option?)";
const VSWITCH_EVENT: &str = "Warning  FailedCreatePodSandBox  2m  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: The specified VSwitch has no available ip";

#[test]
fn explain_exact_codes() {
    // E4041: the TKE Ingress code, defined by both Ingress components' tables.
    let (code, v) = explain_json("E4041", "en");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["matched"], true);
    assert_eq!(v["query"], "E4041");
    assert!(!results(&v).is_empty());
    for r in results(&v) {
        assert_eq!(r["match"]["kind"], "code", "{r:#}");
        assert!(r["codes"].as_array().unwrap().iter().any(|c| c == "E4041"));
        assert!(r["component"].as_str().unwrap().starts_with("tke-ingress"));
        assert!(r["source"]["doc"].as_str().unwrap().ends_with(".txt"));
        assert!(!r["fix"].as_array().unwrap().is_empty());
    }
    let (code, table) = explain_table(&["E4041"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("source: Tencent Cloud TKE, Ingress error codes § E4041 Service Not Found"),
        "{table}"
    );

    // ENIIPCapacityExceed: one entry (CCE), not ambiguous.
    let (code, v) = explain_json("ENIIPCapacityExceed", "en");
    assert_eq!(code, 0);
    assert_eq!(v["ambiguous"], false);
    assert_eq!(v["components"], serde_json::json!(["cce-pod"]));
    assert_eq!(keys(&v)[0], "cce-pod:ENIIPCapacityExceed");
    assert_eq!(results(&v)[0]["match"]["kind"], "code");
    assert_eq!(results(&v)[0]["match"]["score"], 1000);

    // CrashLoopBackOff: the pod state.
    let (code, v) = explain_json("CrashLoopBackOff", "en");
    assert_eq!(code, 0);
    assert_eq!(keys(&v)[0], "pod-status:CrashLoopBackOff");
    assert_eq!(results(&v)[0]["match"]["kind"], "code");
    assert!(results(&v)[0]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "kubectl logs <pod> --previous"));
}

#[test]
fn explain_ambiguous_code_shows_every_component() {
    let (code, v) = explain_json("E4008", "en");
    assert_eq!(code, 0);
    assert_eq!(v["ambiguous"], true, "{v:#}");
    let comps: Vec<&str> = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for c in ["tke-ingress-controller", "tke-ingress", "tke-service"] {
        assert!(comps.contains(&c), "{comps:?}");
    }
    // One result per component, each with its own meaning.
    let titles: std::collections::BTreeSet<&str> = results(&v)
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert!(titles.len() >= 3, "{titles:?}");
    assert!(titles.contains("Subnet out of IPs"), "{titles:?}");
    let (code, table) = explain_table(&["E4008"]);
    assert_eq!(code, 0);
    assert!(
        table.starts_with("Ambiguous: this means different things in"),
        "{table}"
    );
    for c in ["[TKE / tke-ingress-controller]", "[TKE / tke-service]"] {
        assert!(table.contains(c), "{table}");
    }
}

#[test]
fn explain_pasted_event_messages() {
    // A whole `kubectl describe` event line, passed as one argument.
    let (code, v) = explain_json(XTABLES_EVENT, "en");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(keys(&v)[0], "xtables-lock");
    assert_eq!(results(&v)[0]["match"]["kind"], "pattern");
    assert_eq!(
        results(&v)[0]["match"]["text"],
        "Another app is currently holding the xtables lock"
    );
    assert_eq!(
        results(&v)[0]["source"]["section"],
        "集群 Kube-Proxy 异常排障处理 / iptables-restore 版本低导致不支持阻塞写入"
    );
    assert_eq!(v["confidence"], "confident");

    let (code, v) = explain_json(VSWITCH_EVENT, "en");
    assert_eq!(code, 0);
    assert_eq!(keys(&v)[0], "ack-ccm:VSwitchAvailableIpNotExist", "{v:#}");
    assert_eq!(results(&v)[0]["match"]["kind"], "pattern");
    // The event reason in the same line is found too, ranked below the message.
    assert!(keys(&v).contains(&"FailedCreatePodSandBox"));

    // Unquoted words are joined with spaces: the same lookup as one argument.
    let words: Vec<&str> = XTABLES_EVENT.split_whitespace().collect();
    let mut args = vec!["--format", "json"];
    args.extend(&words);
    let mut a = vec!["explain"];
    a.extend(args);
    let out = run(&a, &[]);
    assert_eq!(out.status.code(), Some(0));
    let w: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(keys(&w)[0], "xtables-lock");
}

#[test]
fn explain_exit_codes() {
    let (code, v) = explain_json("137", "en");
    assert_eq!(code, 0);
    assert_eq!(v["exit_code"]["code"], 137);
    assert_eq!(v["exit_code"]["signal"], 9);
    assert_eq!(v["exit_code"]["signal_name"], "SIGKILL");
    assert!(v["exit_code"]["rule"].is_null());
    assert_eq!(keys(&v)[0], "exit-code:137");
    assert!(keys(&v).contains(&"signal:SIGKILL"), "{:?}", keys(&v));
    let (_, table) = explain_table(&["137"]);
    assert!(table.contains("SIGKILL"), "{table}");

    // Out of range: 300 is reported as 300 % 256 = 44.
    let (code, v) = explain_json("300", "en");
    assert_eq!(code, 0);
    assert_eq!(v["exit_code"]["input"], 300);
    assert_eq!(v["exit_code"]["code"], 44);
    assert_eq!(v["exit_code"]["rule"], "code % 256");
    assert_eq!(results(&v)[0]["match"]["text"], "44");
    // Negative: -1 wraps to 255.
    let (code, v) = explain_json("-1", "en");
    assert_eq!(code, 0);
    assert_eq!(v["exit_code"]["code"], 255);
    assert_eq!(keys(&v)[0], "exit-code:255");
}

#[test]
fn explain_no_match_exits_1_and_says_so() {
    let (code, v) = explain_json("nothing-like-this-here", "en");
    assert_eq!(code, 1);
    assert_eq!(v["matched"], false);
    assert!(results(&v).is_empty());
    assert!(v["message"]
        .as_str()
        .unwrap()
        .starts_with("No catalogue entry matches"));
    let (code, table) = explain_table(&["nothing-like-this-here"]);
    assert_eq!(code, 1);
    assert!(
        table.contains("No catalogue entry matches \"nothing-like-this-here\""),
        "{table}"
    );
    let (code, zh) = explain_table(&["--lang", "zh", "nothing-like-this-here"]);
    assert_eq!(code, 1);
    assert!(zh.contains("目录中没有"), "{zh}");
    // A query is required: bad usage, and the message says the query is empty.
    for args in [
        &["explain"][..],
        &["explain", ""],
        &["explain", "  "],
        &["explain", "--"],
    ] {
        let out = run(args, &[]);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("the query is empty"), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// Issue 21: `explain --help` is plain text, and dashes in a query are not clap errors.
#[test]
fn explain_help_is_plain_text_and_dashes_are_query_words() {
    let out = run(&["explain", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Usage: node-doctor explain [OPTIONS] [QUERY]..."),
        "{help}"
    );
    assert!(help.contains("Examples:") && help.contains("node-doctor explain 'E 4053'"));
    // No rustdoc link syntax or code spans in what explain itself says.
    let own: String = help
        .lines()
        .take_while(|l| !l.starts_with("Options:"))
        .chain(help.lines().skip_while(|l| !l.starts_with("Examples:")))
        .collect::<Vec<_>>()
        .join("\n");
    for bad in ["[`", "`]", "`", "ExplainArgs", "::"] {
        assert!(!own.contains(bad), "{bad:?} in help:\n{own}");
    }
    for args in [
        &["explain", "-1"][..],
        &["explain", "--lang", "zh", "-1"],
        &["explain", "-1", "--format", "json"],
        &["explain", "--", "-1"],
    ] {
        let out = run(args, &[]);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("255"), "{args:?}: {text}");
    }
    // An unknown option-looking word is a word of the query, answered like any other.
    let out = run(&["explain", "--bogus"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("No catalogue entry matches \"--bogus\"")
    );
    let out = run(&["explain", "E4041", "--lang"], &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lang needs a value"));
}

/// Issue 21: what operators paste, through the binary.
#[test]
fn explain_answers_what_operators_paste() {
    // A sandbox event whose message names no cause: generic, with the candidates.
    let generic = "  Warning  FailedCreatePodSandBox  2m (x3 over 4m)  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: context canceled";
    let (code, v) = explain_json(generic, "en");
    assert_eq!(code, 0);
    assert_eq!(v["confidence"], "generic", "{v:#}");
    assert_eq!(keys(&v)[0], "FailedCreatePodSandBox");
    let candidates: Vec<&str> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(candidates[0], "disk-full");
    assert!(
        candidates.contains(&"page-allocation-failure"),
        "{candidates:?}"
    );
    let (_, table) = explain_table(&[generic]);
    assert!(table.starts_with("Generic: "), "{table}");
    // Disk full is a candidate to check, not the answer.
    assert!(table.contains("\n  - disk-full "), "{table}");
    assert!(
        !table.contains("cause: The disk holding the runtime"),
        "{table}"
    );

    // The causes that used to be answered "disk full".
    for (paste, want) in [
        ("Failed create pod sandbox: ... Error response from daemon: fork/exec /proc/self/exe: cannot allocate memory", "page-allocation-failure"),
        ("Failed create pod sandbox: rpc error: code = Unknown desc = failed to create a sandbox for pod \"lomp-ext-d8c8b8c46-4v8tl\": Error response from daemon: Conflict. The container name \"/k8s_POD_lomp\" is already in use by container \"30aa3f\". You have to remove (or rename) that container to be able to reuse that name.", "container-name-conflict"),
        ("    Limits:\n      memory:  1024m\n  Normal  SandboxChanged  12s (x9 over 2m)  kubelet  Pod sandbox changed, it will be killed and re-created.", "memory-limit-unit"),
        // Mangled codes, a typo, a kernel line, a Chinese line of the handbook.
        ("E 4053", "tke-ingress-controller:E4053"),
        ("code: 4041", "tke-ingress-controller:E4041"),
        ("ENIIPCapacityExceeded", "cce-pod:ENIIPCapacityExceed"),
        ("The specified VSwitch has no availabel ip.", "ack-ccm:VSwitchAvailableIpNotExist"),
        ("[981234.552110] nf_conntrack: nf_conntrack: table full, dropping packet", "conntrack-table-full"),
        ("E1123 08:15:02.437119       1 proxier.go:1562] Failed to execute iptables-restore: exit status 2 (iptables-restore v1.8.4 (legacy): Couldn't load target `KUBE-MARK-DROP':No such file or directory", "iptables-backend-mismatch"),
        ("如果发生系统 OOM，Pod 中容器退出状态码为137，表示其被  SIGKILL  信号停止，同时内核将会出现以下报错", "kernel-oom-system"),
    ] {
        let (code, v) = explain_json(paste, "en");
        assert_eq!(code, 0, "{paste}");
        assert_eq!(keys(&v)[0], want, "{paste}: {v:#}");
        assert_eq!(v["confidence"], "confident", "{paste}");
    }
    // A shared code with a hint picks the component; without one it is a labelled choice.
    let (_, v) = explain_json("Warning  SyncLoadBalancerFailed  3m  service-controller  Error syncing load balancer: E4008", "en");
    assert_eq!(keys(&v)[0], "tke-service:E4008");
    assert_eq!(v["hint"]["word"], "service-controller");
    let (_, table) = explain_table(&["E4008"]);
    assert!(table.contains("[TKE Service event] E4008"), "{table}");
    // A klog warning header is not a TKE code (W1001 = a warning on October 1st).
    let (code, v) = explain_json("W1001 12:00:00.123456       1 reflector.go:424] watch of *v1.Pod ended with: too old resource version", "en");
    assert_eq!(code, 1, "{v:#}");
}

#[test]
fn explain_in_chinese() {
    let (code, table) = explain_table(&["--lang", "zh", "CrashLoopBackOff"]);
    assert_eq!(code, 0);
    assert!(table.contains("容器反复退出并被重启"), "{table}");
    assert!(table.contains("原因:") && table.contains("处理:") && table.contains("出处:"));
    assert!(!table.contains("cause:"), "{table}");
    let (_, v) = explain_json("E4041", "zh");
    assert_eq!(v["lang"], "zh");
    for r in results(&v) {
        let t = r["title"].as_str().unwrap();
        assert!(
            t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{t}"
        );
    }
    // The same entries in both languages, only the text differs.
    let (_, en) = explain_json("E4041", "en");
    assert_eq!(keys(&en), keys(&v));
    assert_ne!(results(&en)[0]["title"], results(&v)[0]["title"]);
}

#[test]
fn http_explain_returns_the_cli_document() {
    let root = FakeRoot::quiet();
    // No collector needs to run for /explain; `load` keeps the server light.
    let s = Server::start(root.root(), &["--collector", "load"]);
    for (q, lang) in [
        ("E4041", "zh"),
        ("E4008", "en"),
        ("137", "zh"),
        ("300", "en"),
        ("CrashLoopBackOff", "zh"),
        (XTABLES_EVENT, "zh"),
        (VSWITCH_EVENT, "en"),
        ("E 4053", "en"),
        ("FailedCreatePodSandBox", "zh"),
        ("子网 IP 不足", "zh"),
    ] {
        let r = s.get(&format!("/explain?q={}&lang={lang}", pct(q)));
        assert_eq!(r.status, 200, "{q}: {}", r.text());
        assert!(r.header("content-type").starts_with("application/json"));
        let http: Value = serde_json::from_slice(&r.body).unwrap();
        let (code, cli) = explain_json(q, lang);
        assert_eq!(code, 0);
        assert_eq!(
            http, cli,
            "GET /explain and the CLI differ for {q:?} ({lang})"
        );
    }
    // Without lang: English.
    let http = s.get("/explain?q=ENIIPCapacityExceed").json();
    assert_eq!(http, explain_json("ENIIPCapacityExceed", "en").1);

    // No match: 404 with the same document as the CLI (which exits 1).
    let r = s.get("/explain?q=nothing-like-this-here&lang=zh");
    assert_eq!(r.status, 404);
    let http: Value = serde_json::from_slice(&r.body).unwrap();
    let (code, cli) = explain_json("nothing-like-this-here", "zh");
    assert_eq!(code, 1);
    assert_eq!(http, cli);

    // Without q, empty q, unknown language: 400.
    for bad in [
        "/explain",
        "/explain?",
        "/explain?q=",
        "/explain?lang=zh",
        "/explain?q=137&lang=fr",
    ] {
        assert_eq!(s.get(bad).status, 400, "{bad}");
    }
}

#[test]
fn http_explain_requires_the_bearer_token_when_set() {
    let root = FakeRoot::quiet();
    let token_file = root.path("/token");
    std::fs::write(&token_file, "expl41n-token-0123\n").unwrap();
    let s = Server::start(
        root.root(),
        &[
            "--collector",
            "load",
            "--auth-token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let req = |auth: Option<&str>| {
        let h = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        s.raw(&format!(
            "GET /explain?q=137 HTTP/1.1\r\nHost: x\r\n{h}Connection: close\r\n\r\n"
        ))
    };
    let r = req(None);
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").starts_with("Bearer"));
    assert_eq!(req(Some("Bearer wrong")).status, 401);
    assert_eq!(req(Some("Basic expl41n-token-0123")).status, 401);
    let ok = req(Some("Bearer expl41n-token-0123"));
    assert_eq!(ok.status, 200);
    let v: Value = serde_json::from_slice(&ok.body).unwrap();
    assert_eq!(v, explain_json("137", "en").1);
    // Unauthorised requests learn nothing about the query either way.
    let r = s.raw("GET /explain?q=nothing-here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 401);
}

/// `node-doctor explain <rule id>`: the rule's own text, with the thresholds of the flags
/// given and the words of `--rules-file`; an id-shaped word naming no rule goes to the
/// catalogue.
#[test]
fn a_rule_id_prints_the_rules_own_text() {
    let out = run(
        &[
            "--conntrack-table-percent",
            "70,85",
            "explain",
            "conntrack.table_full",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("conntrack.table_full  [collector conntrack, rule file conntrack.toml]\n"),
        "{text}"
    );
    for want in [
        "  [when critical and other_netns] conntrack table of another network namespace full",
        "conditions:\n",
        "  other_netns: ",
        "raise_after = ",
        "what to do:\n  1. ",
        "commands:\n",
        "source: Linux kernel documentation § Netfilter Conntrack Sysfs variables",
        "table warning percent 70 %; table critical percent 85 %",
        "page: /rules/conntrack.table_full",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );

    // An operator's words are the rule's words here too.
    let root = FakeRoot::quiet();
    root.write(
        "/rules.toml",
        "[[rule]]\nid = \"disk.filesystem_full\"\ntitle = { en = \"Our own title\", zh = \"我们的标题\" }\n",
    );
    let rules = root.path("/rules.toml");
    let out = run(
        &[
            "--rules-file",
            rules.to_str().unwrap(),
            "explain",
            "--lang",
            "zh",
            "disk.filesystem_full",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("\n我们的标题\n"), "{text}");
    assert!(text.contains("处理步骤:"), "{text}");

    // Shaped like an id, no such rule: the catalogue answers (no match here).
    let (code, text) = explain_table(&["disk.nope"]);
    assert_eq!(code, 1, "{text}");
}
