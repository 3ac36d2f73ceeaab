//! Every finding cites where its advice comes from, in every rule file
//! (`collectors/rules/*.toml`), under every condition:
//! - a handbook section that exists: the document is listed in `shared/docs/INDEX.md`, the
//!   section title is a line of the document, and (for 002, which INDEX.md maps by line) that
//!   line lies in one of the sections INDEX.md lists;
//! - or, where no handbook covers the case, the kernel's or the component's own
//!   documentation: an `https://` address on one of their documentation sites, with the
//!   reason the handbooks do not apply (the rule format requires it).
//!
//! No rule may cite nothing: `{ none = "…" }` is for a case with no documentation at all,
//! and every built-in case has some.

use std::collections::BTreeSet;
use std::path::Path;

use collectors::rules::RuleBook;

use crate::support::handbooks_for;

/// Where external citations may point: the kernel's and Kubernetes' own documentation.
const DOCUMENTATION_SITES: &[&str] = &[
    "https://docs.kernel.org/",
    "https://www.kernel.org/doc/",
    "https://kubernetes.io/docs/",
    // The component's own rules where node-doctor follows them (FrequentKubeletRestart).
    "https://github.com/kubernetes/node-problem-detector/",
    // The system-call and /proc manual pages (adjtimex(2), proc(5)) and the time daemons' own.
    "https://man7.org/linux/man-pages/",
    "https://chrony-project.org/doc/",
    // The GPU vendor's own documentation (the Xid catalogue, debug guidelines, Fabric Manager).
    "https://docs.nvidia.com/deploy/",
    "https://docs.nvidia.com/datacenter/tesla/",
];

/// One row of INDEX.md's "Sections of 002 by line" table.
#[derive(Debug)]
struct IndexSection {
    first: usize,
    last: usize,
    title: String,
}

/// The documents INDEX.md lists (`| 002_….txt | TKE | … |`) and the sections of 002 by line
/// (`| 886–1008 | 集群 DNS 解析异常排障处理 — … | collector `conntrack` |`).
fn read_index(text: &str) -> (BTreeSet<String>, Vec<IndexSection>) {
    let mut docs = BTreeSet::new();
    let mut sections = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 3 {
            continue;
        }
        if cells[0].ends_with(".txt") && !cells[0].contains(' ') {
            docs.insert(cells[0].to_string());
        }
        let range = cells[0].replace('–', "-");
        if let Some((a, b)) = range.split_once('-') {
            if let (Ok(first), Ok(last)) = (a.trim().parse(), b.trim().parse()) {
                sections.push(IndexSection {
                    first,
                    last,
                    title: cells[1].to_string(),
                });
            }
        }
    }
    (docs, sections)
}

#[test]
fn the_index_is_read() {
    let (docs, sections) = read_index(
        "| 002_af370464fa0f13dd.txt | TKE | The node handbook |\n\
         | lines | section | area |\n|---|---|---|\n\
         | 886–1008 | 集群 DNS 解析异常排障处理 — cluster DNS | collector `conntrack` |\n",
    );
    assert_eq!(
        docs.into_iter().collect::<Vec<_>>(),
        ["002_af370464fa0f13dd.txt"]
    );
    assert_eq!(sections.len(), 1);
    assert_eq!((sections[0].first, sections[0].last), (886, 1008));
    assert!(sections[0].title.starts_with("集群 DNS 解析异常排障处理"));
}

/// `collectors/catalogue/handbooks.toml` titles exactly the documents INDEX.md lists.
#[test]
fn every_indexed_document_has_a_title() {
    let Some(dir) = handbooks_for("every_indexed_document_has_a_title", "") else {
        return;
    };
    let index = dir.join("INDEX.md");
    let text =
        std::fs::read_to_string(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    let (indexed, _) = read_index(&text);
    let titled: BTreeSet<String> = collectors::handbooks::all()
        .iter()
        .map(|h| h.doc.clone())
        .collect();
    assert_eq!(titled, indexed, "{}", index.display());
}

/// The rule files on disk are the built-in ones (build.rs embeds every `rules/*.toml`): each
/// holds rules, but `cluster.toml`, which holds the NodeCondition classes.
#[test]
fn every_rules_file_is_built_in() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml") && n != "cluster.toml")
        .collect();
    assert!(
        !RuleBook::node_conditions().is_empty(),
        "cluster.toml is built in"
    );
    let book = RuleBook::load_builtin().unwrap_or_else(|e| panic!("{e}"));
    let built_in: BTreeSet<String> = book.rules().map(|r| r.file.clone()).collect();
    assert_eq!(on_disk, built_in, "{}", dir.display());
    assert!(on_disk.len() >= 6, "{on_disk:?}");
}

#[test]
fn every_finding_cites_an_existing_section_or_external_documentation() {
    let Some(dir) = handbooks_for(
        "every_finding_cites_an_existing_section_or_external_documentation",
        "checking external citations only",
    ) else {
        return check_without_handbooks();
    };
    let index = dir.join("INDEX.md");
    let index_text =
        std::fs::read_to_string(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    let (docs, sections) = read_index(&index_text);
    assert!(
        !docs.is_empty() && !sections.is_empty(),
        "INDEX.md not understood"
    );
    let book = RuleBook::load_builtin().unwrap_or_else(|e| panic!("{e}"));
    let mut handbook = 0;
    let mut external = 0;
    for rule in book.rules() {
        assert!(
            !rule.may_cite_nothing(),
            "{} ({}): cites nothing under some condition; where no handbook section covers the case, cite the kernel's or the component's documentation ({{ doc, section, url, why }})",
            rule.id,
            rule.file
        );
        let cites: Vec<_> = rule.citations().collect();
        assert!(!cites.is_empty(), "{}: no source", rule.id);
        for c in cites {
            match c.url {
                Some(url) => {
                    external += 1;
                    assert!(
                        DOCUMENTATION_SITES.iter().any(|s| url.starts_with(s)),
                        "{}: {url} is not on a documentation site of the kernel or Kubernetes ({DOCUMENTATION_SITES:?})",
                        rule.id
                    );
                    assert!(
                        c.why.is_some_and(|w| !w.trim().is_empty()),
                        "{}: says why no handbook applies",
                        rule.id
                    );
                    assert!(
                        !c.doc.ends_with(".txt"),
                        "{}: an external citation names its documentation, not a handbook file",
                        rule.id
                    );
                }
                None => {
                    handbook += 1;
                    assert!(
                        docs.contains(c.doc),
                        "{}: {} is not a document listed in INDEX.md ({docs:?})",
                        rule.id,
                        c.doc
                    );
                    let text = std::fs::read_to_string(dir.join(c.doc))
                        .unwrap_or_else(|e| panic!("{}: {}: {e}", rule.id, c.doc));
                    let line = text
                        .lines()
                        .position(|l| l.trim() == c.section)
                        .map(|i| i + 1)
                        .unwrap_or_else(|| {
                            panic!("{}: no line of {} reads {:?}", rule.id, c.doc, c.section)
                        });
                    // INDEX.md maps 002's sections by line; the other documents are short and
                    // read whole.
                    if c.doc.starts_with("002_") {
                        assert!(
                            sections.iter().any(|s| (s.first..=s.last).contains(&line)),
                            "{}: {} § {:?} (line {line}) lies in no section INDEX.md lists",
                            rule.id,
                            c.doc,
                            c.section
                        );
                    }
                }
            }
        }
        // What the rule's own example renders with every condition on and off cites something.
        let all: Vec<&str> = rule.conditions().keys().map(String::as_str).collect();
        for on in [all.clone(), Vec::new()] {
            let f = RuleBook::render_example(rule, &on, "node-1");
            assert!(
                f.remediation.source.is_some(),
                "{}: renders no source",
                rule.id
            );
        }
    }
    assert!(
        handbook >= 20 && external >= 4,
        "{handbook} handbook, {external} external"
    );
}

/// Without the handbooks checked out (a bare crate checkout), the external citations and the
/// rule that every finding cites something still hold.
fn check_without_handbooks() {
    let book = RuleBook::load_builtin().unwrap_or_else(|e| panic!("{e}"));
    for rule in book.rules() {
        assert!(!rule.may_cite_nothing(), "{}", rule.id);
        for c in rule.citations() {
            if let Some(url) = c.url {
                assert!(
                    DOCUMENTATION_SITES.iter().any(|s| url.starts_with(s)),
                    "{}: {url}",
                    rule.id
                );
            }
        }
    }
}

/// The cases the issue named: a full conntrack table, PID exhaustion and filesystem errors on
/// a data disk are not in the handbooks, and cite the kernel's or Kubernetes' documentation;
/// the 5-second DNS delay cites the handbook section that explains it.
#[test]
fn the_cases_the_handbooks_do_not_cover_cite_their_own_documentation() {
    let book = RuleBook::load_builtin().unwrap_or_else(|e| panic!("{e}"));
    let urls = |id: &str| -> Vec<&str> {
        book.get(id)
            .unwrap_or_else(|| panic!("{id}"))
            .citations()
            .filter_map(|c| c.url)
            .collect()
    };
    assert_eq!(
        urls("conntrack.table_full"),
        [
            "https://kubernetes.io/docs/reference/config-api/kube-proxy-config.v1alpha1/#kubeproxy-config-k8s-io-v1alpha1-KubeProxyConntrackConfiguration",
            "https://docs.kernel.org/networking/nf_conntrack-sysctl.html",
        ]
    );
    assert!(book
        .get("conntrack.table_full")
        .unwrap()
        .sources()
        .next()
        .is_none());
    assert_eq!(
        urls("kernel.pid_exhaustion"),
        ["https://kubernetes.io/docs/concepts/policy/pid-limiting/"]
    );
    assert_eq!(urls("kernel.fs_error").len(), 2);
    assert_eq!(
        book.get("conntrack.insert_races")
            .unwrap()
            .sources()
            .collect::<Vec<_>>(),
        [("002_af370464fa0f13dd.txt", "集群 DNS 解析异常排障处理")]
    );
}
