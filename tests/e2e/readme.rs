//! README.md and the pages of docs/ it sends the reader to, tried as a new user would: every
//! `$ node-doctor …` example in them is run with this build and must print what the page shows
//! (and exit as it says), and the commands the README gives a newcomer exist as written: the
//! run and test commands, the test script's package list, and the deploy script's need of a
//! docker daemon. A page that drifts from the product fails here, not in a user's terminal.
//!
//! An example is a line `$ node-doctor <args>` in a fenced block, followed by its output up to
//! the next `$ ` line or the end of the block. In the output, `…` on a line of its own skips
//! any number of lines; timestamps, durations and the staged root's path are masked on both
//! sides. `check` examples run against the root `scripts/demo-root.sh` stages (the page
//! names where it was staged; the test stages its own and substitutes the path).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::manifests::repo_root;

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("README.md")
}

/// README.md and every page under docs/ (where the README's details moved), as
/// (path from the repository's root, text).
fn documents() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("docs entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = repo_root();
    let mut paths = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.strip_prefix(&root).unwrap_or(&p).to_path_buf(), text)
        })
        .collect()
}

/// One `$ node-doctor …` example: its arguments and the output the page shows.
#[derive(Debug)]
struct Example {
    line: usize,
    command: String,
    output: Vec<String>,
}

fn examples(text: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_block = false;
    let mut current: Option<Example> = None;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            out.extend(current.take());
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.extend(current.take());
            if cmd.starts_with("node-doctor ") {
                current = Some(Example {
                    line: i + 1,
                    command: cmd.to_string(),
                    output: Vec::new(),
                });
            }
        } else if let Some(e) = current.as_mut() {
            e.output.push(line.to_string());
        }
    }
    out.extend(current);
    out
}

/// Timestamps (`2026-11-23T15:53:59Z`) become `<time>`, durations (`1.8 ms`) `<ms>`, runs of
/// spaces one space (the collectors' table is aligned to its widest cell).
fn mask(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let is_ts = |s: &[char]| {
        s.len() >= 20
            && s[..20].iter().enumerate().all(|(k, c)| match k {
                4 | 7 => *c == '-',
                10 => *c == 'T',
                13 | 16 => *c == ':',
                19 => *c == 'Z',
                _ => c.is_ascii_digit(),
            })
    };
    while i < b.len() {
        if is_ts(&b[i..]) {
            out.push_str("<time>");
            i += 20;
            continue;
        }
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == '.') {
                j += 1;
            }
            let rest: String = b[j..].iter().take(3).collect();
            if rest == " ms" {
                out.push_str("<ms>");
                i = j + 3;
                continue;
            }
        }
        if b[i] == ' ' && out.ends_with(' ') {
            i += 1;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out.trim_end().to_string()
}

/// The page's lines, in order, are found in `got`; `…` skips lines.
fn matches(want: &[String], got: &[String]) -> Result<(), String> {
    let mut g = 0;
    let mut skipping = false;
    for w in want {
        if w.trim() == "…" {
            skipping = true;
            continue;
        }
        let w = mask(w);
        if skipping {
            while g < got.len() && mask(&got[g]) != w {
                g += 1;
            }
        }
        match got.get(g) {
            Some(l) if mask(l) == w => g += 1,
            other => {
                return Err(format!(
                    "the page's line\n  {w}\nthis build printed\n  {}",
                    other
                        .map(|l| mask(l))
                        .unwrap_or_else(|| "<end of output>".into())
                ))
            }
        }
        skipping = false;
    }
    if g < got.len() && !skipping {
        return Err(format!(
            "this build printed more than the page shows, from\n  {}",
            mask(&got[g])
        ));
    }
    Ok(())
}

/// Splits an example's command line the way a shell would for the plain words it uses (no quotes
/// are needed by any example; one would fail the test, to be added here).
fn words(cmd: &str) -> Vec<String> {
    assert!(
        !cmd.contains(['\'', '"', '`', '\\', '|', '>', '<', '&']),
        "example needs a shell: {cmd}"
    );
    cmd.split_whitespace().map(String::from).collect()
}

#[test]
fn every_node_doctor_example_in_the_readme_and_docs_prints_what_it_shows() {
    let examples: Vec<(PathBuf, Example)> = documents()
        .into_iter()
        .flat_map(|(path, text)| examples(&text).into_iter().map(move |e| (path.clone(), e)))
        .collect();
    let has = |page: &str, command: &str| {
        examples
            .iter()
            .any(|(p, e)| p == Path::new(page) && e.command.starts_with(command))
    };
    // The full report, the explain answers and the README's own finding: where they live.
    assert!(
        has("README.md", "node-doctor check")
            && has("docs/run.md", "node-doctor check")
            && has("docs/explain.md", "node-doctor explain"),
        "README.md, docs/run.md or docs/explain.md lost its check or explain example: {examples:?}"
    );
    // On a tmpfs, as docs/run.md stages it (`/dev/shm`): the disk collector judges the
    // filesystem the root is on, which must be nearly empty for the example's output.
    let shm = Path::new("/dev/shm");
    let staged = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let demo = Command::new("bash")
        .arg(repo_root().join("scripts/demo-root.sh"))
        .arg(staged.path())
        .output()
        .expect("scripts/demo-root.sh");
    assert!(demo.status.success(), "{demo:?}");
    let root = staged.path().join("root");
    let mut failures = Vec::new();
    for (page, e) in &examples {
        let mut cmd = e.command.clone();
        // `; echo $?` prints the exit status as the output's last line.
        let echo_status = cmd.ends_with("; echo $?");
        if echo_status {
            cmd.truncate(cmd.len() - "; echo $?".len());
        }
        let mut args = words(&cmd);
        args.remove(0);
        // The page's staged root (`…/root`) is the test's own.
        let mut readme_root = None;
        for a in args.iter_mut() {
            if a.ends_with("/root") && a.starts_with('/') {
                readme_root = Some(a.trim_end_matches("/root").to_string());
                *a = root.display().to_string();
            }
        }
        let run = Command::new(crate::support::node_doctor_bin())
            .args(&args)
            .env("NO_COLOR", "1")
            .env_remove("NODE_NAME")
            .env_remove("NODE_DOCTOR_HOST_ROOT")
            .output()
            .expect("node-doctor");
        let stdout = String::from_utf8_lossy(&run.stdout);
        let mut got: Vec<String> = stdout
            .lines()
            .map(|l| match &readme_root {
                Some(r) => l.replace(&staged.path().display().to_string(), r),
                None => l.to_string(),
            })
            .collect();
        if echo_status {
            got.push(run.status.code().map(|c| c.to_string()).unwrap_or_default());
        }
        if let Err(why) = matches(&e.output, &got) {
            failures.push(format!(
                "{}:{}: $ {}\n{why}\n(stderr: {})",
                page.display(),
                e.line,
                e.command,
                String::from_utf8_lossy(&run.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The quick start's two commands exist as written: the run command is a cargo invocation of
/// this package's binary, the test command the script CI runs (`.ci/run`).
#[test]
fn the_readmes_two_commands_are_the_ones_that_work() {
    let text = readme();
    let quick = text
        .split("\n## Quick start\n")
        .nth(1)
        .expect("README has a Quick start section")
        .split("\n## ")
        .next()
        .unwrap_or("");
    assert!(
        quick.contains("\ncargo run --release -- check\n"),
        "quick start lost the run command:\n{quick}"
    );
    assert!(
        quick.contains("\nscripts/test.sh\n"),
        "quick start lost the test command:\n{quick}"
    );
    let ci = std::fs::read_to_string(repo_root().join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(
            |l| l.trim_start().starts_with("exec") && l.contains("scripts/test.sh")
                || l.trim() == "scripts/test.sh"
        ),
        ".ci/run does not run scripts/test.sh:\n{ci}"
    );
    let script = repo_root().join("scripts/test.sh");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&script)
            .expect("scripts/test.sh")
            .permissions(),
    );
    assert!(mode & 0o111 != 0, "scripts/test.sh is not executable");
    // `cargo run` at the workspace root needs exactly one binary in the workspace: node-doctor.
    let mut bins = Vec::new();
    let workspace = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    let members: Vec<&str> = workspace
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .expect("the workspace's members line")
        .trim_end_matches(']')
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert_eq!(members, ["collectors", "agent", "tests/kube-standin"]);
    for member in members {
        let dir = repo_root().join(member);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("member manifest");
        let declared: Vec<String> = manifest
            .split("[[bin]]")
            .skip(1)
            .map(|b| format!("{member}: {}", b.lines().nth(1).unwrap_or("").trim()))
            .collect();
        let implicit = dir.join("src/main.rs").exists() || dir.join("src/bin").exists();
        bins.extend(declared.iter().cloned());
        if declared.is_empty() && implicit {
            bins.push(format!("{member}: src/main.rs or src/bin"));
        }
    }
    assert_eq!(bins, ["agent: name = \"node-doctor\""], "{bins:?}");
}

#[test]
fn masking_and_skipping() {
    assert_eq!(
        mask("  conntrack  ok              1.8 ms"),
        " conntrack ok <ms>"
    );
    assert_eq!(
        mask("node-doctor 0.1.0 · node worker-1 · 2026-11-23T15:53:59Z"),
        "node-doctor 0.1.0 · node worker-1 · <time>"
    );
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(matches(&v(&["a", "…", "d"]), &v(&["a", "b", "c", "d"])).is_ok());
    assert!(matches(&v(&["a", "…"]), &v(&["a", "b"])).is_ok());
    assert!(matches(&v(&["a", "c"]), &v(&["a", "b", "c"])).is_err());
    assert!(matches(&v(&["a"]), &v(&["a", "b"])).is_err());
    assert!(matches(&v(&["a", "b"]), &v(&["a"])).is_err());
}

/// The section of the README under `## <title>`, up to the next `## ` heading.
fn readme_section(text: &str, title: &str) -> String {
    text.split(&format!("\n## {title}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("README has no section {title}"))
        .split("\n## ")
        .next()
        .unwrap_or("")
        .to_string()
}

/// The Debian packages `scripts/test.sh` installs: the words of its `APT_PACKAGES=(…)` list
/// (comments dropped) and of every `APT_PACKAGES+=(…)` it adds on a condition.
fn script_packages(script: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut in_list = false;
    for line in script.lines() {
        let code = line.split('#').next().unwrap_or("").trim();
        if let Some(rest) = code.strip_prefix("APT_PACKAGES+=(") {
            out.extend(
                rest.trim_end_matches(')')
                    .split_whitespace()
                    .map(String::from),
            );
        } else if code == "APT_PACKAGES=(" {
            in_list = true;
        } else if in_list && code == ")" {
            in_list = false;
        } else if in_list {
            out.extend(code.split_whitespace().map(String::from));
        }
    }
    out
}

/// The packages the README's Test section names: the `backticked` words of its paragraph
/// that starts "Debian packages".
fn readme_packages(test_section: &str) -> std::collections::BTreeSet<String> {
    let para = test_section
        .split("\n\n")
        .find(|p| p.trim_start().starts_with("Debian packages"))
        .expect("README's Test section has no paragraph starting \"Debian packages\"");
    para.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains('/'))
        .map(String::from)
        .collect()
}

/// The README's Test section lists exactly the Debian packages `scripts/test.sh` installs,
/// so a newcomer preparing a machine by hand installs what the tests use.
#[test]
fn the_readmes_package_list_is_what_test_sh_installs() {
    let script = std::fs::read_to_string(repo_root().join("scripts/test.sh")).expect("test.sh");
    let installed = script_packages(&script);
    assert!(
        installed.contains("fio") && installed.contains("python3-venv"),
        "the parse of test.sh's APT_PACKAGES found {installed:?}"
    );
    let listed = readme_packages(&readme_section(&readme(), "Test"));
    let missing: Vec<_> = installed.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&installed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README's Test section and scripts/test.sh disagree: test.sh installs but README does \
         not list {missing:?}; README lists but test.sh does not install {extra:?}"
    );
}

#[test]
fn package_lists_are_read_from_the_script_and_the_readme() {
    let script = "A=(x)\nAPT_PACKAGES=(\n    fio # load\n    # a comment line\n    dash  xfsprogs\n)\nif x; then\n    APT_PACKAGES+=(python3-venv)\nfi\n";
    let got: Vec<String> = script_packages(script).into_iter().collect();
    assert_eq!(got, ["dash", "fio", "python3-venv", "xfsprogs"]);
    let section = "intro `cargo`\n\nDebian packages it installs (`scripts/test.sh` says):\n`fio`, `dash` and `python3-venv`.\n\nWithout root `SKIP`.\n";
    let got: Vec<String> = readme_packages(section).into_iter().collect();
    assert_eq!(got, ["dash", "fio", "python3-venv"]);
}

/// The README's Deploy block says that `scripts/deploy.sh` needs a running docker daemon and
/// stops at once without one; the script does: with a docker client whose `version` fails it
/// exits 1 naming the daemon, before building or writing anything.
#[test]
fn deploy_needs_a_docker_daemon_as_the_readme_says() {
    let deploy = readme_section(&readme(), "Deploy");
    assert!(
        deploy.contains("docker daemon") && deploy.contains("stops at once"),
        "README's Deploy section no longer says deploy.sh needs a running docker daemon:\n{deploy}"
    );
    let out = tempfile::tempdir().expect("tempdir");
    let run = Command::new("bash")
        .arg(repo_root().join("scripts/deploy.sh"))
        .args(["push", "127.0.0.1:9/team", "--docker", "false"])
        .arg("--out")
        .arg(out.path())
        // A build would take minutes; the check must come first, so a missing binary is
        // never reached.
        .args(["--binary", "/nonexistent/node-doctor"])
        .output()
        .expect("scripts/deploy.sh");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is the docker daemon running"),
        "deploy.sh did not name the docker daemon: {stderr}"
    );
    assert!(
        std::fs::read_dir(out.path()).expect("out").next().is_none(),
        "deploy.sh wrote into --out before finding no docker daemon"
    );
}

/// Text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut in_block = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        } else if !in_block {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The anchors a page offers: its headings as GitHub slugs them (lower case, punctuation but
/// `-` and `_` dropped, spaces as `-`) and its `<a id="…">` tags.
fn anchors(text: &str) -> std::collections::BTreeSet<String> {
    let prose = prose(text);
    let mut out = std::collections::BTreeSet::new();
    for line in prose.lines() {
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim().to_lowercase();
            out.insert(
                h.chars()
                    .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect(),
            );
        }
        for tag in line.split("<a id=\"").skip(1) {
            out.insert(tag.split('"').next().unwrap_or("").to_string());
        }
    }
    out
}

/// The relative links of a page's prose: `](target)` with no scheme.
fn relative_links(text: &str) -> Vec<String> {
    prose(text)
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:") && !t.contains(' '))
        .map(String::from)
        .collect()
}

/// Every relative link of README.md, ARCHITECTURE.md, CONTRIBUTING.md and docs/ names a file
/// that exists and, with `#anchor`, a heading or anchor of that page: text moved between pages
/// leaves no link behind pointing at where it was.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo_root();
    let mut pages = documents();
    for extra in ["ARCHITECTURE.md", "CONTRIBUTING.md"] {
        let text = std::fs::read_to_string(root.join(extra)).expect(extra);
        pages.push((PathBuf::from(extra), text));
    }
    let mut bad = Vec::new();
    let mut checked = 0;
    for (page, text) in &pages {
        for link in relative_links(text) {
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                root.join(page)
            } else {
                root.join(page.parent().unwrap_or(Path::new(""))).join(path)
            };
            checked += 1;
            if !target.exists() {
                bad.push(format!("{}: {link}: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|x| x == "md") {
                let text = std::fs::read_to_string(&target).expect("linked page");
                if !anchors(&text).contains(anchor) {
                    bad.push(format!("{}: {link}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn anchors_and_links_are_read_as_github_renders_them() {
    let page = "# Top\n\n## Network namespace: `hostNetwork: true`\n\n```\n## not a heading\n[x](gone.md)\n```\n\n<a id=\"disk.filesystem_full\"></a>\nSee [a](b.md#c), [d](https://e/f) and [g](#top).\n";
    let a = anchors(page);
    assert!(
        a.contains("top") && a.contains("network-namespace-hostnetwork-true"),
        "{a:?}"
    );
    assert!(
        a.contains("disk.filesystem_full") && !a.contains("not-a-heading"),
        "{a:?}"
    );
    assert_eq!(relative_links(page), ["b.md#c", "#top"]);
}
