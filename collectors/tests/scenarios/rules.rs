//! The built-in rule files (`collectors/rules/*.toml`): every rule renders in both languages
//! from its example under every condition, cites a handbook section that exists, and is
//! reported by its collector; converted collectors hold no operator-facing prose.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use collectors::rules::RuleBook;

use crate::support::handbooks_for;

fn book() -> RuleBook {
    RuleBook::load_builtin().unwrap_or_else(|e| panic!("{e}"))
}

/// Every rule, rendered from its example under every severity and combination of its
/// conditions (on, off, each alone, each left out), with and without its optional evidence:
/// no placeholder without a value, no empty title or summary, no step in one language only,
/// a source (or the rule's `none` saying why there is none). With every condition on, at
/// least one step and one command.
#[test]
fn every_rule_renders_in_both_languages_from_its_example() {
    let book = book();
    let mut n = 0;
    for rule in book.rules() {
        let problems = RuleBook::check(rule);
        assert!(
            problems.is_empty(),
            "{} ({}): {problems:#?}",
            rule.id,
            rule.file
        );
        let all: Vec<&str> = rule.conditions().keys().map(String::as_str).collect();
        let f = RuleBook::render_example(rule, &all, "node-1");
        for t in [&f.title, &f.summary]
            .into_iter()
            .chain(f.remediation.steps.iter())
        {
            for s in [&t.en, &t.zh] {
                assert!(!s.trim().is_empty(), "{}: empty text", rule.id);
                assert!(!s.contains('‹'), "{}: {s}", rule.id);
                assert!(
                    !s.contains('{') || s.contains("{{"),
                    "{}: unfilled? {s}",
                    rule.id
                );
            }
            assert!(
                t.zh.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
                "{}: the Chinese text has no Chinese: {}",
                rule.id,
                t.zh
            );
        }
        assert!(
            !f.remediation.commands.is_empty(),
            "{}: no command",
            rule.id
        );
        // A source, unless the rule says no handbook section covers the case.
        assert!(
            f.remediation.source.is_some() || rule.may_cite_nothing(),
            "{}",
            rule.id
        );
        // Every declared condition is tested somewhere, or it is dead weight.
        let used = rule.conditions_used();
        for c in rule.conditions().keys() {
            assert!(
                used.contains(c),
                "{}: condition {c} is never tested",
                rule.id
            );
        }
        n += 1;
    }
    assert!(n >= 4, "{n} rules");
}

/// Every handbook `source` names a handbook file and a section title that is a line of it
/// (external documentation, cited with a `url`, is checked by `citations.rs`).
#[test]
fn rule_sources_are_sections_of_the_handbooks() {
    let dir = handbooks_for(
        "rule_sources_are_sections_of_the_handbooks",
        "checking only that each source names a .txt handbook",
    );
    let book = book();
    for rule in book.rules() {
        for (doc, section) in rule.sources() {
            assert!(
                doc.ends_with(".txt") && !doc.contains('/'),
                "{}: {doc}",
                rule.id
            );
            let Some(dir) = &dir else {
                continue;
            };
            let path = dir.join(doc);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", rule.id, path.display()));
            assert!(
                text.lines().any(|l| l.trim() == section),
                "{}: no line of {doc} reads {section:?}",
                rule.id
            );
        }
    }
}

/// The `.rs` files below `dir`, but test modules in files of their own (`judge/tests.rs`),
/// which may hold any text.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
            out.push(p);
        }
    }
}

/// The source of a file without its `#[cfg(test)]` module (tests may hold any text).
fn without_tests(src: &str) -> &str {
    match src.find("#[cfg(test)]") {
        Some(i) => &src[..i],
        None => src,
    }
}

/// The collectors (the registry's) whose judge returns drafts (`rules::Draft`): converted to
/// rule files. A collector is the folder `src/<name>/`.
fn converted() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: Vec<(String, PathBuf)> = collectors::registry::names()
        .map(|name| (name.to_string(), src.join(name)))
        .filter(|(_, dir)| {
            let judge = dir.join("judge.rs");
            judge.is_file() && std::fs::read_to_string(&judge).unwrap().contains("Draft")
        })
        .collect();
    out.sort();
    out
}

/// Every folder of `src/` whose judge returns drafts: the collectors', and shared ones whose
/// judge a collector calls (`nodelog`: the runtime collector's log rules).
fn judges() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let dir = e.unwrap().path();
        let judge = dir.join("judge.rs");
        if judge.is_file() && std::fs::read_to_string(&judge).unwrap().contains("Draft") {
            out.push((dir.file_name().unwrap().to_str().unwrap().to_string(), dir));
        }
    }
    out.sort();
    out
}

/// Both directions: every id a converted judge reports (a `"<collector>.<rule>"` literal in
/// its module) has a rule, and every rule's id is reported by its collector's module.
#[test]
fn every_reported_id_has_a_rule_and_every_rule_is_reported() {
    let book = book();
    let converted = judges();
    assert!(
        converted.iter().any(|(n, _)| n == "memory")
            && converted.iter().any(|(n, _)| n == "nodelog"),
        "{converted:?}"
    );
    // A module reports its own collector's ids, or (a shared module such as `nodelog`, whose
    // judge the `runtime` collector calls) the ids of a collector that has a rule file.
    let collectors: BTreeSet<String> = book
        .rules()
        .filter_map(|r| r.id.split('.').next().map(String::from))
        .collect();
    let mut reported = BTreeSet::new();
    for (name, dir) in &converted {
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // A collector's module reports its own ids only ("memory.limit_in_bytes" in the
            // kernel collector is a file name); a shared module, any collector's.
            let prefixes: Vec<&String> = if collectors.contains(name) {
                vec![name]
            } else {
                collectors.iter().collect()
            };
            for c in prefixes {
                let prefix = format!("\"{c}.");
                for (i, _) in without_tests(&text).match_indices(&prefix) {
                    let rest = &text[i + prefix.len()..];
                    let rule = &rest[..rest.find('"').unwrap_or(0)];
                    if !rule.is_empty()
                        && rule
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                    {
                        reported.insert(format!("{c}.{rule}"));
                    }
                }
            }
        }
    }
    for id in &reported {
        assert!(book.get(id).is_some(), "{id} is reported but has no rule");
    }
    for rule in book.rules() {
        assert!(
            reported.contains(&rule.id),
            "{}: no converted collector reports it",
            rule.id
        );
    }
}

/// A converted collector holds no operator-facing prose: no Chinese outside its tests, no
/// bilingual `Text` and no finding built by hand. (Once every collector is converted this
/// holds for all of `collectors/src` but the rules module's tests.)
#[test]
fn converted_collectors_hold_no_prose() {
    for (name, dir) in judges() {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let code = without_tests(&text);
            if let Some(l) = code
                .lines()
                .find(|l| l.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)))
            {
                panic!("{name}: {}: Chinese outside tests: {l}", f.display());
            }
            for banned in ["Text::new(", "Finding::new(", ".step(", "cmd!("] {
                assert!(
                    !code.contains(banned),
                    "{name}: {} builds text with {banned}; the words belong in collectors/rules/{name}.toml",
                    f.display()
                );
            }
        }
    }
}

/// Issue 15's end state: every collector's judge returns drafts (no judge builds its own
/// words), and no Chinese is left in `collectors/src` outside tests — the words are in
/// `collectors/rules/*.toml`, the catalogue and its vocabulary in `collectors/catalogue/`.
#[test]
fn every_judge_is_converted_and_no_chinese_is_left_in_the_code() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let converted: Vec<String> = converted().into_iter().map(|(n, _)| n).collect();
    // Every judge returns drafts, a collector's or a shared one (nodelog: the runtime
    // collector's log rules).
    for e in std::fs::read_dir(&src).unwrap() {
        let dir = e.unwrap().path();
        let judge = dir.join("judge.rs");
        if judge.is_file() {
            assert!(
                std::fs::read_to_string(&judge).unwrap().contains("Draft"),
                "{}: its judge does not return drafts",
                dir.display()
            );
        }
    }
    for must in collectors::registry::names() {
        assert!(converted.iter().any(|c| c == must), "{must} not converted");
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, l) in without_tests(&text).lines().enumerate() {
            assert!(
                !l.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
                "{}:{}: Chinese outside tests: {l}",
                f.display(),
                i + 1
            );
        }
    }
}

/// Each collector page's "Raise, clear and hysteresis" table lists every rule of its
/// collector with the `raise_after` / `clear_after` its rule file states (or the default), and
/// names no rule that does not exist; every collector's page has the section.
#[test]
fn collector_pages_state_each_rules_hysteresis() {
    let book = book();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/collectors");
    let mut pages = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(collector) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(section) = text.split("\n## Raise, clear and hysteresis\n").nth(1) else {
            continue;
        };
        pages += 1;
        let section = section.split("\n## ").next().unwrap_or("");
        let mut listed = BTreeSet::new();
        for row in section.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            let id = cells[0].trim_matches('`');
            let rule = book
                .get(id)
                .unwrap_or_else(|| panic!("{}: {id} is not a rule", path.display()));
            let h = rule.hysteresis();
            assert_eq!(
                (cells[cells.len() - 2], cells[cells.len() - 1]),
                (
                    h.raise_after.to_string().as_str(),
                    h.clear_after.to_string().as_str()
                ),
                "{}: {id}: the table says raise/clear {} / {}, its rule file {} / {}",
                path.display(),
                cells[cells.len() - 2],
                cells[cells.len() - 1],
                h.raise_after,
                h.clear_after
            );
            listed.insert(id.to_string());
        }
        let rules: BTreeSet<String> = book
            .rules()
            .filter(|r| r.id.starts_with(&format!("{collector}.")))
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(
            listed,
            rules,
            "{}: the table lists other rules than the rule file",
            path.display()
        );
    }
    // Every collector with a rule file has its page with the table.
    let collectors: BTreeSet<&str> = book
        .rules()
        .filter_map(|r| r.id.split('.').next())
        .collect();
    assert_eq!(
        pages,
        collectors.len(),
        "every collector's page ({collectors:?}) needs the table"
    );
}

/// The rule ids in the findings table of a docs page's first screen: the rows (`| `id` |`)
/// before the page's first `## ` heading, which must also say what the collector answers
/// (`Answers: **…**`).
fn first_screen_findings(text: &str) -> Result<BTreeSet<String>, String> {
    let top = text.split("\n## ").next().unwrap_or("");
    if !top.contains("\nAnswers: **") {
        return Err("no `Answers: **…**` before the first `## ` heading".into());
    }
    let ids: BTreeSet<String> = top
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect();
    if ids.is_empty() {
        return Err("no findings table before the first `## ` heading".into());
    }
    Ok(ids)
}

/// The first screen of every collector's page says what the collector answers and lists every
/// finding it can report, and no other (STYLE.md: a docs page's first screen says what it
/// answers and lists its findings; the method follows).
#[test]
fn collector_pages_open_with_their_question_and_every_finding() {
    let book = book();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/collectors");
    for name in collectors::registry::names() {
        let path = dir.join(format!("{name}.md"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let listed =
            first_screen_findings(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rules: BTreeSet<String> = book
            .rules()
            .filter(|r| r.id.split('.').next() == Some(name))
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(
            listed,
            rules,
            "{}: the first screen's findings table lists other findings than the rule files",
            path.display()
        );
    }
}

#[test]
fn a_first_screen_without_its_question_or_table_is_refused() {
    let good = "# Collector `x`\n\nAnswers: **is x ok?**\n\n| Finding | What |\n|---|---|\n| `x.a` | a |\n| `x.b` | b |\n\n## Details\n\n| `x.c` | later |\n";
    let ids: Vec<String> = first_screen_findings(good).unwrap().into_iter().collect();
    assert_eq!(
        ids,
        ["x.a", "x.b"],
        "rows after the first heading are not the first screen"
    );
    let no_question = good.replace("Answers: **is x ok?**", "Reads x.");
    assert!(first_screen_findings(&no_question).is_err());
    let table_late = "# Collector `x`\n\nAnswers: **is x ok?**\n\n## Findings\n\n| `x.a` | a |\n";
    assert!(first_screen_findings(table_late).is_err());
}
