//! The registry is the one list of collectors (ARCHITECTURE.md "How to add a collector"):
//! every collector in it has its folder (`mod.rs`, `sample.rs`, `thresholds.rs`, `judge.rs`),
//! rule file, docs page (naming its flags), scenario test module and README row; and no
//! other file keeps a list of them or names their types.

use std::path::{Path, PathBuf};

use collectors::registry::{self, COLLECTORS};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_collector_has_its_folder_rule_file_docs_page_scenarios_and_readme_row() {
    let repo = repo();
    let readme = read(&repo.join("README.md"));
    let rules_dir = repo.join("collectors/rules");
    let rule_files: Vec<String> = std::fs::read_dir(&rules_dir)
        .unwrap()
        .map(|e| read(&e.unwrap().path()))
        .collect();
    for e in COLLECTORS {
        let name = e.name;
        let dir = repo.join("collectors/src").join(name);
        // One layout: the collector, what it read, its limits, its decisions.
        for file in ["mod.rs", "sample.rs", "thresholds.rs", "judge.rs"] {
            assert!(
                dir.join(file).is_file(),
                "{name}: no collectors/src/{name}/{file}"
            );
        }
        assert!(
            rule_files.iter().any(|t| t
                .lines()
                .any(|l| l.trim() == format!("collector = \"{name}\""))),
            "{name}: no rule file in collectors/rules says collector = \"{name}\""
        );
        let page = repo.join("docs/collectors").join(format!("{name}.md"));
        let page_text = read(&page);
        for flag in e.flags {
            assert!(
                page_text.contains(flag),
                "{}: does not mention the flag {flag}",
                page.display()
            );
        }
        assert!(
            repo.join("collectors/tests/scenarios")
                .join(format!("{name}.rs"))
                .is_file(),
            "{name}: no collectors/tests/scenarios/{name}.rs"
        );
        let row = format!("| `{name}` |");
        assert!(
            readme.lines().any(|l| l.starts_with(&row)),
            "{name}: no row in README's collector table"
        );
    }
}

/// Every `.rs` file below `dir`, skipping `tests/` and `benches/` folders.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            if n != "tests" && n != "benches" && n != "target" {
                sources(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("tests.rs"))
        {
            out.push(p);
        }
    }
}

/// The code of a file without its comments and its test module.
fn code(src: &str) -> String {
    let src = src.split("#[cfg(test)]").next().unwrap_or("");
    src.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Outside the registry (and each collector's own folder), no non-test file names a
/// collector's type, and none holds a literal list of three or more collector names: adding
/// a collector touches the registry row, not lists elsewhere.
#[test]
fn collectors_are_listed_and_named_in_the_registry_only() {
    let repo = repo();
    let mut files = Vec::new();
    sources(&repo.join("collectors/src"), &mut files);
    sources(&repo.join("agent/src"), &mut files);
    let names: Vec<&str> = registry::names().collect();
    let types: Vec<String> = names
        .iter()
        .map(|n| {
            let mut c = n.chars();
            let first = c.next().unwrap().to_ascii_uppercase();
            format!("{first}{}Collector", c.as_str())
        })
        .collect();
    let registry_file = repo.join("collectors/src/registry.rs");
    let mut found = Vec::new();
    for f in files {
        if f == registry_file {
            continue;
        }
        let text = code(&read(&f));
        let own = |name: &str| f.starts_with(repo.join("collectors/src").join(name));
        for (name, ty) in names.iter().zip(&types) {
            if !own(name) && text.contains(ty.as_str()) {
                found.push(format!("{}: names {ty}", f.display()));
            }
        }
        // A list: three collector names as string literals within five lines.
        let lines: Vec<&str> = text.lines().collect();
        for (i, _) in lines.iter().enumerate() {
            let window = lines[i..(i + 5).min(lines.len())].join("\n");
            let n = names
                .iter()
                .filter(|n| window.contains(&format!("\"{n}\"")))
                .count();
            if n >= 3 {
                found.push(format!(
                    "{}:{}: a list of collector names",
                    f.display(),
                    i + 1
                ));
                break;
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// pid 1's unix socket and mount tables are read through the node only
/// (`collectors::node::shared`), so that the collectors of one `check` sample share one read
/// of each: no other non-test file calls their readers.
#[test]
fn pid_1s_unix_and_mount_tables_are_read_through_the_node_only() {
    let repo = repo();
    let mut files = Vec::new();
    sources(&repo.join("collectors/src"), &mut files);
    sources(&repo.join("agent/src"), &mut files);
    let allowed = [
        repo.join("collectors/src/node/shared.rs"),
        repo.join("collectors/src/proc/net_unix.rs"),
        repo.join("collectors/src/proc/mountinfo.rs"),
    ];
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !allowed.contains(f)) {
        let text = code(&read(f));
        for reader in ["net_unix::read", "mountinfo::read("] {
            if text.contains(reader) {
                found.push(format!("{}: calls {reader}", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
