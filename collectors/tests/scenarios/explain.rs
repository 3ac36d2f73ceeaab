//! `explain` lookups against the embedded catalogue, and the completeness test: every code of
//! the handbooks' code tables, exit-code section and pod-state table has an entry.
//!
//! The completeness test extracts the codes from `../shared/docs` beside the repository when
//! that directory exists (it does on developer machines and in CI); otherwise it checks the
//! list committed below, which was extracted the same way.

use std::collections::BTreeSet;

use collectors::explain::{self, lookup, lookup_key, MatchKind};

use crate::support::handbooks_for;

fn keys(q: &str) -> Vec<String> {
    lookup(q)
        .matches
        .iter()
        .map(|m| m.entry.key.clone())
        .collect()
}

// ---------------------------------------------------------------- exact codes

#[test]
fn exact_code_finds_the_entry_in_both_languages() {
    let l = lookup("ENIIPCapacityExceed");
    assert_eq!(l.matches.len(), 1);
    assert!(!l.ambiguous());
    let e = l.matches[0].entry;
    assert_eq!(
        (e.vendor.as_str(), e.component.as_str()),
        ("CCE", "cce-pod")
    );
    assert_eq!(e.doc, "004_1b2d8382b40eb2b4.txt");
    assert_eq!(e.section, "1.1.1 VPC-ENI 模式");
    assert!(e.title.en.contains("Secondary IP quota"), "{}", e.title.en);
    assert!(e.title.zh.contains("辅助 IP"), "{}", e.title.zh);
    assert!(e.fix[0].en.contains("Add nodes") && e.fix[0].zh.contains("扩容节点"));
    // Case does not matter for an exact code.
    assert_eq!(keys("eniipcapacityexceed"), keys("ENIIPCapacityExceed"));
}

#[test]
fn a_code_with_different_meanings_is_ambiguous_and_shows_every_component() {
    // E4008: subnet out of IPs on a Service, authorisation deleted on an Ingress (001), and
    // the Ingress controller's "Norm AssumeTkeCredential -8002 Data is nil" (000).
    let l = lookup("E4008");
    assert!(l.ambiguous());
    let comps = l.top_components();
    for c in ["tke-service", "tke-ingress", "tke-ingress-controller"] {
        assert!(comps.contains(&c), "{comps:?}");
    }
    let svc = l
        .matches
        .iter()
        .find(|m| m.entry.component == "tke-service")
        .unwrap();
    let ing = l
        .matches
        .iter()
        .find(|m| m.entry.component == "tke-ingress")
        .unwrap();
    assert!(
        svc.entry.title.en.contains("Subnet"),
        "{}",
        svc.entry.title.en
    );
    assert!(
        ing.entry.title.en.contains("TKE_QCSRole"),
        "{}",
        ing.entry.title.en
    );
    // 001 gives the risk of leaving each code unfixed.
    assert!(svc.entry.risk.as_ref().unwrap().en.contains("no traffic"));
    assert!(ing.entry.risk.as_ref().unwrap().zh.contains("集群"));
}

#[test]
fn pod_states_are_exact_codes() {
    let l = lookup("CrashLoopBackOff");
    assert_eq!(l.matches[0].entry.key, "pod-status:CrashLoopBackOff");
    assert_eq!(l.matches[0].kind, MatchKind::Code);
    // The handbook's misspelling and the real spelling both work.
    assert_eq!(keys("Unkown"), keys("Unknown"));
    assert_eq!(keys("Pending"), vec!["pod-status:Pending".to_string()]);
}

// ---------------------------------------------------------------- exit codes

#[test]
fn exit_code_137_is_sigkill_with_oom_advice() {
    let l = lookup("137");
    let d = l.exit.as_ref().unwrap();
    assert_eq!(
        (d.code, d.signal, d.signal_name.as_deref()),
        (137, Some(9), Some("SIGKILL"))
    );
    assert_eq!(d.rule, None);
    let k = keys("137");
    assert_eq!(
        k[..2],
        ["exit-code:137".to_string(), "signal:SIGKILL".to_string()]
    );
    assert!(k.contains(&"exit-code:128+n".to_string()));
    let e = l.matches[0].entry;
    assert!(e.cause.en.contains("OOMKilled"));
    assert!(e.commands.iter().any(|c| c.starts_with("journalctl -k")));
}

#[test]
fn exit_code_outside_0_255_uses_the_modulo_rule() {
    // exit(-1) -> 255, the handbook's own example.
    let l = lookup("-1");
    let d = l.exit.as_ref().unwrap();
    assert_eq!(
        (d.input, d.code, d.rule),
        (-1, 255, Some("256 - (|code| % 256)"))
    );
    assert_eq!(l.matches[0].entry.key, "exit-code:255");
    // 265 % 256 = 9: an ordinary program error, no signal.
    let l = lookup("265");
    let d = l.exit.as_ref().unwrap();
    assert_eq!((d.code, d.rule, d.signal), (9, Some("code % 256"), None));
    assert_eq!(keys("265"), vec!["exit-code:1-128".to_string()]);
    // 393 % 256 = 137.
    assert_eq!(lookup("393").matches[0].entry.key, "exit-code:137");
}

#[test]
fn exit_code_128_plus_n_decodes_signals_without_own_entry() {
    let k = keys("143");
    assert_eq!(k[0], "signal:SIGTERM");
    assert_eq!(k[1], "exit-code:128+n");
    // 135 = 128 + 7 (SIGBUS): not in the handbook's table; named, explained by the range.
    let l = lookup("135");
    assert_eq!(
        l.exit.as_ref().unwrap().signal_name.as_deref(),
        Some("SIGBUS")
    );
    assert_eq!(keys("135"), vec!["exit-code:128+n".to_string()]);
    // sysexits.h codes
    assert_eq!(keys("78")[0], "exit-code:78");
    assert!(lookup("78").matches[0]
        .entry
        .codes
        .contains(&"EX_CONFIG".to_string()));
    assert_eq!(keys("EX_TEMPFAIL"), vec!["exit-code:75".to_string()]);
}

// ---------------------------------------------------------------- pasted messages

#[test]
fn pasted_xtables_lock_line_finds_the_kube_proxy_entry() {
    let line = "E1122 09:12:01.123 1 proxier.go:1458] Failed to execute iptables-restore: exit \
                status 4 (Another app is currently holding the xtables lock. Perhaps you want \
                to use the -w option?)";
    let l = lookup(line);
    assert_eq!(l.matches[0].entry.key, "xtables-lock");
    assert_eq!(l.matches[0].kind, MatchKind::Pattern);
    assert!(l.matches[0]
        .entry
        .section
        .starts_with("集群 Kube-Proxy 异常排障处理 / "));
    // The "held too long" variant wins when its own words are there.
    let held = "error creating chain \"KUBE-EXTERNAL-SERVICES\": exit status 4: Another app is \
                currently holding the xtables lock. Stopped waiting after 5s.";
    assert_eq!(lookup(held).matches[0].entry.key, "xtables-lock-held");
}

#[test]
fn pasted_ack_event_finds_the_vswitch_entry() {
    let line = "Warning  SyncLoadBalancerFailed  2m  service-controller  Error syncing load \
                balancer: failed to ensure load balancer: Status Code: 400 Code: \
                VSwitchAvailableIpNotExist Message: The specified VSwitch has no available ip.";
    let l = lookup(line);
    let top = l.matches[0].entry;
    assert_eq!(top.key, "ack-ccm:VSwitchAvailableIpNotExist");
    assert_eq!(top.vendor, "ACK");
    assert!(top.fix[0].en.contains("vswitch-id"));
    assert!(!l.ambiguous());
}

#[test]
fn pasted_sandbox_event_ranks_the_specific_cause_first() {
    // The handbook's disk-full event, wrapped as the PDF wraps it.
    let disk = "Warning FailedCreatePodSandBox 2m (x4307 over 16h) kubelet, 10.179.80.31 \
                (combined from similar events): Failed create pod sandbox: rpc error: code = \
                Unknown desc = failed to create a sandbox for pod \"apigateway-6dc48bf8b6-l8xrw\": \
                Error response from daemon: mkdir /var/lib/docker/aufs/mnt/1f09d6c1-init: no \
                space\n left on device";
    let l = lookup(disk);
    assert_eq!(l.matches[0].entry.key, "disk-full");
    assert_eq!(l.matches[0].entry.section, "节点磁盘爆满排障处理");
    assert_eq!(l.confidence(), explain::Confidence::Confident);
    // The generic reason is there too, but below the cause.
    let k = keys(disk);
    let generic = k
        .iter()
        .position(|k| k == "FailedCreatePodSandBox")
        .unwrap();
    assert!(generic > 0, "{k:?}");
    // "Unknown" and "Error" in the text do not drag in the generic pod states.
    assert!(!k
        .iter()
        .any(|k| k == "pod-status:Unknown" || k == "pod-status:Error"));
    // The handbook's other disk-full symptom: the runtime hangs and CRI calls time out.
    let hang = "Warning FailedCreatePodSandBox 53m kubelet, 172.22.0.44 Failed create pod sandbo\n\
                x: rpc error: code = DeadlineExceeded desc = context deadline exceeded";
    assert_eq!(keys(hang)[0], "runtime-hung");
    // The bare event reason is an exact query, answered as generic with the causes.
    let l = lookup("FailedCreatePodSandBox");
    assert_eq!(
        keys("FailedCreatePodSandBox"),
        vec!["FailedCreatePodSandBox".to_string()]
    );
    assert_eq!(l.confidence(), explain::Confidence::Generic);
    let causes: Vec<&str> = l.candidates.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(causes[0], "disk-full");
    assert!(causes.contains(&"page-allocation-failure") && causes.contains(&"memory-limit-unit"));
    // The fragmentation variant of a sandbox failure: fragmentation first, never disk full.
    let frag = "Warning FailedCreatePodSandBox kubelet Failed create pod sandbox: rpc error: \
                code = 2 desc = failed to start sandbox container: oci runtime error: \
                container_linux.go:247: starting container process caused \"process_linux.go:245: \
                running exec setns process for init caused \\\"exit status 6\\\"\"";
    let k = keys(frag);
    assert_eq!(k[0], "page-allocation-failure");
    assert!(!k.contains(&"disk-full".to_string()), "{k:?}");
    // A sandbox event whose message names no known cause: generic, with the candidates, and
    // never "the disk is full".
    let unknown = "Warning  FailedCreatePodSandBox  2m  kubelet  Failed to create pod sandbox: \
                   rpc error: code = Unknown desc = failed to create containerd task: context canceled";
    let l = lookup(unknown);
    assert_eq!(l.confidence(), explain::Confidence::Generic);
    assert_eq!(l.matches[0].entry.key, "FailedCreatePodSandBox");
    assert!(l.candidates.len() >= 5);
    // The causes the issue found answered "disk full": each has its own entry now.
    for (text, want) in [
        ("Failed create pod sandbox: ... fork/exec /proc/self/exe: cannot allocate memory", "page-allocation-failure"),
        ("Failed create pod sandbox: Error response from daemon: Conflict. The container name \"/k8s_POD_x\" is already in use by container \"30aa\"", "container-name-conflict"),
        ("Failed create pod sandbox: running exec setns process for init caused \"signal: killed\"", "memory-limit-unit"),
    ] {
        let l = lookup(&format!("Warning  FailedCreatePodSandBox  1m  kubelet  {text}"));
        assert_eq!(l.matches[0].entry.key, want, "{text}");
        assert_eq!(l.confidence(), explain::Confidence::Confident, "{text}");
    }
}

#[test]
fn pasted_codes_inside_event_text_are_found() {
    let line = "Warning  SyncLoadBalancerFailed  ingress/web  E4041 Service Not Found: default/api";
    let k = keys(line);
    assert!(
        k.contains(&"tke-ingress-controller:E4041".to_string()),
        "{k:?}"
    );
    assert!(k.contains(&"tke-ingress:E4041".to_string()), "{k:?}");
    // The message pattern adds weight to the controller's entry, which has it.
    assert_eq!(k[0], "tke-ingress-controller:E4041");
    // A longer code that merely starts with a known one does not match it.
    assert!(keys("event E40410 happened").is_empty());
}

#[test]
fn the_object_kind_in_an_event_line_picks_the_component() {
    // `kubectl get events` lines: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE.
    let svc = "2m  Warning  SyncLoadBalancerFailed  service/web  E4008 create loadbalancer failed";
    let l = lookup(svc);
    assert_eq!(l.matches[0].entry.key, "tke-service:E4008");
    assert!(!l.ambiguous());
    let ing = "2m  Warning  SyncLoadBalancerFailed  ingress/web  E4008 sync failed";
    let k = keys(ing);
    assert_ne!(k[0], "tke-service:E4008");
    assert_eq!(k.last().unwrap(), "tke-service:E4008");
    // Without a kind, all three stay level.
    assert!(lookup("E4008 sync failed").ambiguous());
}

#[test]
fn pasted_describe_output_with_exit_code_is_decoded() {
    let text =
        "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n";
    let l = lookup(text);
    assert_eq!(l.exit.as_ref().unwrap().code, 137);
    assert_eq!(l.matches[0].entry.key, "exit-code:137");
    let text = "Last State: Terminated Reason: Error Exit Code: 255";
    assert_eq!(lookup(text).matches[0].entry.key, "exit-code:255");
}

#[test]
fn chinese_title_words_find_entries() {
    let k = keys("子网 IP 不足");
    assert!(k.contains(&"tke-service:E4008".to_string()), "{k:?}");
}

/// Every TKE code, retyped the ways people do, finds the same entries as the code itself.
#[test]
fn mangled_codes_find_the_same_entries() {
    let mut checked = 0;
    let codes: BTreeSet<String> = explain::catalogue()
        .entries
        .iter()
        .flat_map(|e| e.codes.iter())
        .filter(|c| {
            c.len() == 5 && c.starts_with(['E', 'W']) && c[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .cloned()
        .collect();
    for code in &codes {
        let want = keys(code);
        assert!(!want.is_empty(), "{code}");
        let (l, d) = code.split_at(1);
        for variant in [
            format!("{l} {d}"),
            format!("{l}-{d}"),
            format!("{l}_{d}"),
            code.to_lowercase(),
            format!("code: {code}"),
            format!("错误码 {code}"),
            format!("`{code}`"),
        ] {
            assert_eq!(keys(&variant), want, "{variant}");
        }
        if l == "E" {
            assert_eq!(keys(&format!("code: {d}")), want, "code: {d}");
            assert_eq!(keys(&format!("Error Code={d}")), want, "Error Code={d}");
        }
        // Inside an event line, spaced or dashed, the code is found too.
        let line = format!("Warning  SyncLoadBalancerFailed  2m  ingress/web  {l} {d} sync failed");
        assert!(
            keys(&line).iter().any(|k| want.contains(k)),
            "{line}: {:?}",
            keys(&line)
        );
        checked += 1;
    }
    assert!(checked >= 75, "{checked}");
    // Suffix variants and separators of the named codes.
    for (q, want) in [
        ("ENIIPCapacityExceeded", "cce-pod:ENIIPCapacityExceed"),
        ("eni-ip-capacity-exceed", "cce-pod:ENIIPCapacityExceed"),
        (
            "VSwitchAvailableIpNotExists",
            "ack-ccm:VSwitchAvailableIpNotExist",
        ),
        ("VPCQuotaLimitExceed", "cce-nrs:VPCQuotaLimitExceeded"),
        ("ex_tempfail", "exit-code:75"),
        ("SubnetNoMoerIP", "cce-pod:SubnetNoMoreIP"),
    ] {
        assert_eq!(keys(q).first().map(String::as_str), Some(want), "{q}");
    }
    // Digits are never fuzzy: a neighbouring code is not an answer.
    assert!(!keys("E4099").iter().any(|k| k.ends_with("E4098")));
}

/// A generic event reason, Pod state or bare signal never outranks an entry matched on the
/// message's cause: every pattern of every specific entry, pasted next to each generic
/// fragment, comes first.
#[test]
fn generic_evidence_never_outranks_a_cause() {
    let generic = [
        "Warning  FailedCreatePodSandBox  2m  kubelet  Failed create pod sandbox:",
        "Warning  BackOff  1m  kubelet  Back-off restarting failed container; CrashLoopBackOff",
        "caused \"signal: killed\" SIGKILL",
        "Pod sandbox changed, it will be killed and re-created. ContainerCreating",
        "Warning  Failed  1m  kubelet  Failed to pull image \"x\": ErrImagePull ImagePullBackOff",
        "Warning  FailedScheduling  1m  default-scheduler  0/3 nodes are available:",
    ];
    let mut checked = 0;
    for e in explain::catalogue().entries.iter().filter(|e| !e.generic) {
        for p in &e.patterns {
            let text = p.replace('*', " x ").replace('#', "42");
            for g in generic {
                let l = lookup(&format!("{g} {text}"));
                let top = l.matches.first().unwrap();
                assert!(
                    !top.entry.generic,
                    "{g} + {p:?} ({}): {}",
                    e.key, top.entry.key
                );
                assert!(
                    l.matches
                        .iter()
                        .take_while(|m| m.score == top.score)
                        .any(|m| m.entry.key == e.key)
                        || top.kind != MatchKind::Reason,
                    "{g} + {p:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 2000, "{checked}");
}

/// The node and Pod cause entries (not the generic event reasons) carry the handbook's own
/// Chinese wording: each has at least one Chinese pattern, and every Chinese pattern occurs in
/// the document (spacing and punctuation aside), so a line copied from the handbook finds its
/// entry.
#[test]
fn handbook_entries_carry_the_handbooks_own_chinese_wording() {
    let doc = handbooks_for(
        "handbook_entries_carry_the_handbooks_own_chinese_wording",
        "checking only that the patterns exist",
    )
    .map(|dir| compact(&std::fs::read_to_string(dir.join("002_af370464fa0f13dd.txt")).unwrap()));
    let is_zh = |p: &str| p.chars().any(explain::text::is_cjk);
    let mut checked = 0;
    for e in explain::catalogue()
        .entries
        .iter()
        .filter(|e| matches!(e.component.as_str(), "node" | "pod") && !e.generic)
    {
        let zh: Vec<&String> = e.patterns.iter().filter(|p| is_zh(p)).collect();
        // Kernel lines the handbook does not quote (node-doctor's kernel and conntrack
        // collectors detect them), and the registry's rate limit, which its ImagePullBackOff
        // section does not list: English patterns only.
        let not_in_handbook = [
            "kernel-hung-task",
            "conntrack-table-full",
            "registry-rate-limited",
        ];
        assert_eq!(
            zh.is_empty(),
            not_in_handbook.contains(&e.key.as_str()),
            "{}: Chinese patterns {zh:?}",
            e.key
        );
        if let Some(doc) = &doc {
            for p in zh {
                for frag in p.split('*') {
                    assert!(
                        doc.contains(&compact(frag)),
                        "{}: {p:?} is not in the handbook",
                        e.key
                    );
                }
                checked += 1;
            }
        }
    }
    if doc.is_some() {
        assert!(checked >= 60, "{checked}");
    }
}

// ---------------------------------------------------------------- no match, links

#[test]
fn no_match_is_empty() {
    for q in [
        "",
        "   ",
        "hello there",
        "E9999",
        "SIGFOO",
        "Error response from daemon",
    ] {
        let l = lookup(q);
        assert!(!l.is_match(), "{q:?} matched {:?}", keys(q));
        assert!(!l.ambiguous());
    }
}

#[test]
fn finding_see_also_keys_resolve() {
    for (key, section) in [
        (
            "FailedCreatePodSandBox",
            "Pod 一直处于 ContainerCreating 或 Waiting 状态",
        ),
        ("disk-full", "节点磁盘爆满排障处理"),
        (
            "kernel-oom-cgroup",
            "Pod 处于 CrashLoopBackOff 状态 / 检查是否发生 cgroup OOM",
        ),
        ("page-allocation-failure", "节点内存碎片化排障处理"),
        (
            "xtables-lock",
            "集群 Kube-Proxy 异常排障处理 / iptables-restore 版本低导致不支持阻塞写入",
        ),
        ("conntrack-dns-delay", "集群 DNS 解析异常排障处理"),
        ("tke-service:E4008", "Service Event 报错原因和处理办法"),
    ] {
        let e = lookup_key(key).unwrap_or_else(|| panic!("{key}"));
        assert_eq!(e.section, section);
        assert!(!e.fix.is_empty() && !e.fix[0].zh.is_empty());
    }
    // A code that several components share is not a key.
    assert!(lookup_key("E4008").is_none());
    // A code only one entry has is.
    assert_eq!(lookup_key("NoMoreIP").unwrap().key, "cce-pod:NoMoreIP");
    assert!(lookup_key("nope").is_none());
}

// ---------------------------------------------------------------- completeness

/// `(component, code)` pairs and exit codes the handbooks define, as extracted from the docs
/// on 2026-11-22 by `extract_from_docs` (kept for machines without `shared/docs`).
const COMMITTED_000: &str = "E4000 E4003 E4004 E4005 E4006 E4007 E4008 E4009 E4010 E4011 E4012 \
E4013 E4017 E4018 E4019 E4020 E4021 E4022 E4023 E4024 E4025 E4026 E4027 E4030 E4031 E4032 E4033 \
E4034 E4035 E4036 E4037 E4038 E4039 E4040 E4041 E4042 E4043 E4044 E4045 E4046 E4047 E4048 E4049 \
E4050 E4051 E4052 E4053 E4091 E5003 E5004 E5005 E5007 E5008 E5009 E6001 E6002 E6006 E6007 E6009 \
W1000 W1001 W1002";
const COMMITTED_001_SERVICE: &str = "E4001 E4004 E4005 E4008 E4009 E4011 E4012 E4013 E4014 E4016 \
E4026 E4033 E4036 E4037 E4062 E4075";
const COMMITTED_001_INGRESS: &str = "E4003 E4005 E4008 E4009 E4010 E4011 E4012 E4018 E4019 E4020 \
E4021 E4022 E4023 E4027 E4031 E4034 E4035 E4039 E4040 E4041 E4042 E4043 E4044 E4046 E4047 E4048 \
E4049 E4051 E4052 E4053 E4054 E4055 E4060 E4066 E4068 E4071 E4074 E4081 E4082 E4084 E4098 E4101";
const COMMITTED_004: &str = "ENIIPCapacityExceed|ENICapacityExceed|WaitCreateMoreENI|\
IPPoolExhausted|NoAvailableSubnet|SubnetNoMoreIP|OpenAPIError|failed to set bandwidth|NoMoreIP|\
MetaAPIError01|MetaAPIError02|VPCQuotaLimitExceeded|CreateRouteRuleFailed";
const COMMITTED_SIGNALS: &str =
    "SIGHUP:1 SIGINT:2 SIGQUIT:3 SIGILL:4 SIGABRT:6 SIGFPE:8 SIGKILL:9 \
SIGSEGV:11 SIGPIPE:13 SIGALRM:14 SIGTERM:15 SIGUSR1:30,10,16 SIGUSR2:31,12,17 SIGCHLD:20,17,18 \
SIGCONT:19,18,25 SIGSTOP:17,19,23 SIGTSTP:18,20,24 SIGTTIN:21,21,26 SIGTTOU:22,22,27";
const COMMITTED_SYSEXITS: &str = "EX_OK:0 EX_USAGE:64 EX_DATAERR:65 EX_NOINPUT:66 EX_NOUSER:67 \
EX_NOHOST:68 EX_UNAVAILABLE:69 EX_SOFTWARE:70 EX_OSERR:71 EX_OSFILE:72 EX_CANTCREAT:73 EX_IOERR:74 \
EX_TEMPFAIL:75 EX_PROTOCOL:76 EX_NOPERM:77 EX_CONFIG:78";
const COMMITTED_EXIT_TABLE: &str = "1 2 126 127 128 128+n 130 255 137";
const COMMITTED_POD_STATES: &str = "Error NodeLost Unkown Waiting Pending ContainerCreating \
Terminating CrashLoopBackOff InvalidImageName ImageInspectError ErrImageNeverPull ImagePullBackOff \
RegistryUnavailable ErrImagePull CreateContainerConfigError CreateContainerError RunContainerError \
PreStartHookError PostStartHookError ContainersNotInitialized ContainersNotReady PodInitializing \
DockerDaemonNotReady NetworkPluginNotReady";
const COMMITTED_003_MESSAGES: usize = 20;

#[derive(Debug, Default, PartialEq)]
struct Codes {
    ingress_000: BTreeSet<String>,
    service_001: BTreeSet<String>,
    ingress_001: BTreeSet<String>,
    cce_004: BTreeSet<String>,
    /// (name, the numbers the handbook lists for it)
    signals: Vec<(String, Vec<u8>)>,
    sysexits: Vec<(String, u8)>,
    exit_table: BTreeSet<String>,
    pod_states: BTreeSet<String>,
    /// ACK messages of 003, looked up as pasted text.
    messages_003: Vec<String>,
}

fn set(s: &str, sep: char) -> BTreeSet<String> {
    s.split(sep)
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

fn committed() -> Codes {
    Codes {
        ingress_000: set(COMMITTED_000, ' '),
        service_001: set(COMMITTED_001_SERVICE, ' '),
        ingress_001: set(COMMITTED_001_INGRESS, ' '),
        cce_004: set(COMMITTED_004, '|'),
        signals: COMMITTED_SIGNALS
            .split_whitespace()
            .map(|s| {
                let (n, v) = s.split_once(':').unwrap();
                (
                    n.to_string(),
                    v.split(',').map(|x| x.parse().unwrap()).collect(),
                )
            })
            .collect(),
        sysexits: COMMITTED_SYSEXITS
            .split_whitespace()
            .map(|s| {
                let (n, v) = s.split_once(':').unwrap();
                (n.to_string(), v.parse().unwrap())
            })
            .collect(),
        exit_table: set(COMMITTED_EXIT_TABLE, ' '),
        pod_states: set(COMMITTED_POD_STATES, ' '),
        messages_003: Vec::new(),
    }
}

/// Tokens like E4041 / W1000 in a line.
fn e_codes(line: &str) -> Vec<String> {
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| {
            t.len() == 5
                && (t.starts_with('E') || t.starts_with('W'))
                && t[1..].chars().all(|c| c.is_ascii_digit())
        })
        .map(String::from)
        .collect()
}

fn extract_from_docs(dir: &std::path::Path) -> Codes {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let mut c = Codes::default();

    for line in read("000_fc34186b6df04717.txt").lines() {
        if let Some(h) = line.strip_prefix("## ") {
            c.ingress_000.extend(e_codes(h));
        }
    }

    let mut table = None;
    for line in read("001_003e6d03f71f65c9.txt").lines() {
        if line.starts_with("## Service Event") {
            table = Some(true);
        } else if line.starts_with("## Ingress Event") {
            table = Some(false);
        } else if let (Some(svc), Some(row)) = (table, line.strip_prefix('|')) {
            let first = row.split('|').next().unwrap_or("").trim();
            if !e_codes(first).is_empty() {
                let s = if svc {
                    &mut c.service_001
                } else {
                    &mut c.ingress_001
                };
                s.insert(first.to_string());
            }
        }
    }

    for line in read("004_1b2d8382b40eb2b4.txt").lines() {
        if let Some(row) = line.strip_prefix('|') {
            let first = row.split('|').next().unwrap_or("").trim();
            if !first.is_empty() && first != "错误代码" && !first.starts_with("---") {
                c.cce_004.insert(first.to_string());
            }
        }
    }

    let mut on = false;
    for line in read("003_67815219e7ddede9.txt").lines() {
        let t = line.trim().trim_start_matches('•').trim();
        if t == "Service异常事件及处理方式" {
            on = true;
        } else if t == "排查思路" {
            on = false;
        } else if on
            && t.starts_with(|ch: char| ch.is_ascii_alphabetic())
            && t.is_ascii()
            && t.contains(' ')
            && !t.starts_with("kubectl")
        {
            c.messages_003.push(t.to_string());
        }
    }

    let doc002 = read("002_af370464fa0f13dd.txt");
    let lines: Vec<&str> = doc002.lines().collect();
    let exit_section = &lines[3030..3303];
    let mut in_ref = false;
    for line in exit_section {
        let t = line.trim();
        let mut words = t.split_whitespace();
        let (first, second) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        if first.starts_with("SIG") && second.chars().next().is_some_and(|ch| ch.is_ascii_digit()) {
            let nums = second.split(',').map(|n| n.parse().unwrap()).collect();
            c.signals.push((first.to_string(), nums));
        }
        if first == "#define" && second.starts_with("EX_") && !second.starts_with("EX__") {
            let n = words.next().unwrap().parse().unwrap();
            c.sysexits.push((second.to_string(), n));
        }
        if t == "状态码参考" {
            in_ref = true;
        } else if in_ref && first.starts_with(|ch: char| ch.is_ascii_digit()) {
            c.exit_table.insert(first.trim_end_matches('*').to_string());
        }
        if let Some((n, _)) = t.split_once("：表示程序被") {
            c.exit_table.insert(n.to_string());
        }
    }

    let states = &lines[2616..2732];
    let mut on = false;
    for line in states {
        let t = line.trim();
        if t == "状态 描述" {
            on = true;
        } else if t == "问题定位" {
            on = false;
        } else if on {
            let first = t.split_whitespace().next().unwrap_or("");
            let is_state = first.len() > 3
                && first.starts_with(|ch: char| ch.is_ascii_uppercase())
                && first.chars().all(|ch| ch.is_ascii_alphabetic())
                && first != "Pod";
            if is_state {
                c.pod_states.insert(first.to_string());
            }
        }
    }
    c
}

fn has_code(component: &str, code: &str) -> bool {
    explain::catalogue()
        .entries
        .iter()
        .any(|e| e.component == component && e.codes.iter().any(|c| c == code))
}

#[test]
fn every_code_of_the_handbooks_has_an_entry() {
    let dir = handbooks_for(
        "every_code_of_the_handbooks_has_an_entry",
        "checking the committed list",
    );
    let codes = if let Some(dir) = dir {
        let c = extract_from_docs(&dir);
        // The extraction must keep finding what the committed list holds; if a doc changes,
        // update both the list and the catalogue.
        let mut k = committed();
        k.messages_003 = c.messages_003.clone();
        assert_eq!(c, k, "the docs changed: update the committed lists");
        assert_eq!(
            c.messages_003.len(),
            COMMITTED_003_MESSAGES,
            "{:#?}",
            c.messages_003
        );
        c
    } else {
        committed()
    };
    let mut missing = Vec::new();
    for code in &codes.ingress_000 {
        if !has_code("tke-ingress-controller", code) {
            missing.push(format!("000 {code}"));
        }
    }
    for code in &codes.service_001 {
        if !has_code("tke-service", code) {
            missing.push(format!("001 Service {code}"));
        }
    }
    for code in &codes.ingress_001 {
        if !has_code("tke-ingress", code) {
            missing.push(format!("001 Ingress {code}"));
        }
    }
    for code in &codes.cce_004 {
        let found = lookup(code)
            .matches
            .iter()
            .any(|m| m.entry.vendor == "CCE" && m.kind == MatchKind::Code);
        if !found {
            missing.push(format!("004 {code}"));
        }
    }
    for (name, nums) in &codes.signals {
        let l = lookup(name);
        match l.matches.first() {
            Some(m) if m.entry.component == "signal" => {
                let n = m.entry.signal.unwrap();
                assert!(nums.contains(&n), "{name}: {n} not in {nums:?}");
                // And the exit code 128 + n leads back to it.
                let via_exit = keys(&(128 + u32::from(n)).to_string());
                assert!(via_exit.contains(&m.entry.key), "{name}: {via_exit:?}");
            }
            _ => missing.push(format!("signal {name}")),
        }
    }
    for (name, n) in &codes.sysexits {
        let l = lookup(&n.to_string());
        if !l.matches.iter().any(|m| m.entry.codes.contains(name)) {
            missing.push(format!("sysexits {name} {n}"));
        }
    }
    for code in &codes.exit_table {
        let direct = has_code("exit-code", code);
        if !direct {
            missing.push(format!("exit code {code}"));
        }
    }
    for state in &codes.pod_states {
        if !has_code("pod-status", state) {
            missing.push(format!("pod state {state}"));
        }
    }
    for msg in &codes.messages_003 {
        let l = lookup(msg);
        if l.matches.first().map(|m| m.entry.component.as_str()) != Some("ack-ccm") {
            missing.push(format!("003 message {msg:?}"));
        }
    }
    assert!(missing.is_empty(), "no entry for: {missing:#?}");
}

#[test]
fn every_000_heading_pasted_as_text_ranks_its_own_code_first() {
    // A TKE Ingress event carries the code and the controller's message; the code decides
    // even when the message resembles another code's (the handbook's E4023 heading repeats
    // the E4025 message).
    let Some(dir) = handbooks_for(
        "every_000_heading_pasted_as_text_ranks_its_own_code_first",
        "",
    ) else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("000_fc34186b6df04717.txt")).unwrap();
    let mut checked = 0;
    for heading in text.lines().filter_map(|l| l.strip_prefix("## ")) {
        let codes = e_codes(heading);
        if codes.is_empty() {
            continue;
        }
        let l = lookup(heading);
        let top = l
            .matches
            .first()
            .unwrap_or_else(|| panic!("{heading}: no match"));
        assert_eq!(top.entry.component, "tke-ingress-controller", "{heading}");
        assert!(
            top.entry.codes.iter().any(|c| codes.contains(c)),
            "{heading}: top is {}",
            top.entry.key
        );
        checked += 1;
    }
    assert!(checked >= 60, "{checked}");
}

#[test]
fn every_entry_names_a_section_its_document_really_has() {
    let Some(dir) = handbooks_for("every_entry_names_a_section_its_document_really_has", "") else {
        return;
    };
    let mut wrong = Vec::new();
    for e in &explain::catalogue().entries {
        let text = std::fs::read_to_string(dir.join(&e.doc)).unwrap();
        // "Title / Subtitle" names a subsection; E4038's heading itself contains " / ".
        let whole = text.contains(&e.section);
        let parts = e.section.split(" / ").all(|p| text.contains(p));
        if !(whole || parts) {
            wrong.push(format!("{}: {:?} not in {}", e.key, e.section, e.doc));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

// ---------------------------------------------------------------- the paste corpus

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    paste: Vec<Paste>,
}

/// One paste of `tests/fixtures/explain/corpus.toml` (the file explains the fields).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Paste {
    id: String,
    doc: String,
    form: String,
    text: String,
    #[serde(default)]
    expect: Option<String>,
    #[serde(default)]
    generic: Option<String>,
    #[serde(default)]
    choice: Option<Vec<String>>,
}

fn corpus() -> Vec<Paste> {
    let c: Corpus = toml::from_str(include_str!("../fixtures/explain/corpus.toml"))
        .expect("corpus.toml parses");
    c.paste
}

/// How a lookup did on one paste.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// The expected answer, in the expected form.
    Right,
    /// A confident answer that is not the expected one (a wrong answer first).
    WrongConfident(String),
    /// Not confident where a confident answer was expected, or the wrong generic/choice.
    Missed(String),
    /// A negative paste without a confident answer.
    Rejected,
}

fn judge(p: &Paste) -> Outcome {
    use explain::Confidence;
    let l = lookup(&p.text);
    let conf = l.confidence();
    let top = l
        .matches
        .first()
        .map(|m| m.entry.key.clone())
        .unwrap_or_default();
    let seen = format!("{top:?} ({})", conf.as_str());
    if let Some(want) = &p.expect {
        return match conf {
            Confidence::Confident if &top == want => Outcome::Right,
            Confidence::Confident => Outcome::WrongConfident(seen),
            _ => Outcome::Missed(seen),
        };
    }
    if let Some(want) = &p.generic {
        return match conf {
            Confidence::Generic if &top == want && !l.candidates.is_empty() => Outcome::Right,
            Confidence::Confident => Outcome::WrongConfident(seen),
            _ => Outcome::Missed(seen),
        };
    }
    if let Some(want) = &p.choice {
        let best = l.matches.first().map_or(0, |m| m.score);
        let tied: Vec<&str> = l
            .matches
            .iter()
            .filter(|m| m.score == best)
            .map(|m| m.entry.key.as_str())
            .collect();
        return match conf {
            Confidence::Ambiguous if want.iter().all(|w| tied.contains(&w.as_str())) => {
                Outcome::Right
            }
            Confidence::Confident => Outcome::WrongConfident(seen),
            _ => Outcome::Missed(format!("{seen} tied {tied:?}")),
        };
    }
    match conf {
        Confidence::Confident => Outcome::WrongConfident(seen),
        _ => Outcome::Rejected,
    }
}

/// The acceptance corpus: every paste gets its expected entry first (in the expected
/// form: confident, generic with candidates, or a labelled choice), and no negative paste gets
/// a confident answer. Prints precision (right confident answers / all confident answers) and
/// recall (pastes answered as expected / positive pastes), overall and per form; the figures
/// are quoted in docs/explain.md (`cargo test -p collectors --test scenarios
/// explain_corpus -- --nocapture`).
#[test]
fn explain_corpus_precision_and_recall() {
    let pastes = corpus();
    let positives = pastes.iter().filter(|p| p.form != "negative").count();
    let negatives = pastes.len() - positives;
    assert!(positives >= 60, "{positives} positive pastes");
    assert!(negatives >= 10, "{negatives} negative pastes");
    // Every seed document and every form is represented.
    for doc in ["000", "001", "002", "003", "004"] {
        assert!(pastes.iter().any(|p| p.doc == doc), "no paste from {doc}");
    }
    let forms = [
        "zh", "event", "log", "kernel", "typo", "code", "exit", "hint", "negative",
    ];
    for f in forms {
        assert!(pastes.iter().any(|p| p.form == f), "no {f} paste");
    }
    let mut ids = BTreeSet::new();
    let (mut right, mut confident, mut confident_right) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut per_form: Vec<(&str, usize, usize)> = forms.iter().map(|f| (*f, 0, 0)).collect();
    for p in &pastes {
        assert!(ids.insert(p.id.as_str()), "duplicate id {}", p.id);
        assert!(
            forms.contains(&p.form.as_str()),
            "{}: form {}",
            p.id,
            p.form
        );
        let expectations = [p.expect.is_some(), p.generic.is_some(), p.choice.is_some()];
        let n = expectations.iter().filter(|x| **x).count();
        assert_eq!(
            n,
            usize::from(p.form != "negative"),
            "{}: expectations",
            p.id
        );
        for key in p
            .expect
            .iter()
            .chain(p.generic.iter())
            .chain(p.choice.iter().flatten())
        {
            assert!(
                explain::catalogue().by_key(key).is_some(),
                "{}: no entry {key}",
                p.id
            );
        }
        let l = lookup(&p.text);
        let is_confident = l.confidence() == explain::Confidence::Confident;
        let outcome = judge(p);
        if is_confident {
            confident += 1;
            if outcome == Outcome::Right {
                confident_right += 1;
            }
        }
        let form = per_form.iter_mut().find(|f| f.0 == p.form).unwrap();
        form.1 += 1;
        match outcome {
            Outcome::Right | Outcome::Rejected => {
                form.2 += 1;
                if p.form != "negative" {
                    right += 1;
                }
            }
            other => failures.push(format!("{:<30} {:<8} {other:?}", p.id, p.form)),
        }
    }
    let precision = confident_right as f64 / confident.max(1) as f64;
    let recall = right as f64 / positives as f64;
    println!(
        "explain corpus: {} pastes ({positives} positive, {negatives} negative)",
        pastes.len()
    );
    for (f, n, ok) in &per_form {
        println!("  {f:<9} {ok:>3}/{n:<3}");
    }
    println!(
        "  precision {precision:.3} ({confident_right}/{confident} confident answers right), \
         recall {recall:.3} ({right}/{positives} answered as expected)"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `form = "zh"` pastes are lines copied from the handbook: each really occurs in its document
/// (ignoring spacing and punctuation, as matching does).
#[test]
fn corpus_chinese_pastes_are_verbatim_handbook_text() {
    let Some(dir) = handbooks_for("corpus_chinese_pastes_are_verbatim_handbook_text", "") else {
        return;
    };
    let mut checked = 0;
    for p in corpus().iter().filter(|p| p.form == "zh") {
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{}_", p.doc)))
            })
            .unwrap_or_else(|| panic!("{}: no document {}", p.id, p.doc));
        let doc = compact(&std::fs::read_to_string(&file).unwrap());
        let text = compact(&p.text);
        // Quote marks and the "故障原因:" label aside, the paste is a piece of the document.
        assert!(doc.contains(&text), "{}: not in {}", p.id, file.display());
        checked += 1;
    }
    assert!(checked >= 25, "{checked}");
}

fn compact(s: &str) -> String {
    explain::text::Compact::new(s).s
}
