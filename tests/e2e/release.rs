//! Release hygiene (issue 26, CONTRIBUTING.md "Versions and releases"): one version in
//! `Cargo.toml`, the manifests' image tag and version labels, and `CHANGELOG.md`. A release
//! that bumps one and forgets another fails here.

use crate::manifests::repo_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The values of every line `<key> <value>` (after trimming), quotes removed.
fn values(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().trim_matches('"').to_string())
        .collect()
}

/// The versions of `CHANGELOG.md`'s release sections (`## [X.Y.Z] - YYYY-MM-DD`), newest
/// first, and whether `## [Unreleased]` comes before them.
fn changelog(text: &str) -> (bool, Vec<(String, String)>) {
    let mut unreleased_first = false;
    let mut releases = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("## [") else {
            continue;
        };
        let Some((version, date)) = rest.split_once("] - ") else {
            if rest == "Unreleased]" && releases.is_empty() {
                unreleased_first = true;
            }
            continue;
        };
        releases.push((version.to_string(), date.to_string()));
    }
    (unreleased_first, releases)
}

fn is_date(s: &str) -> bool {
    s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        })
}

#[test]
fn the_changelog_parser_reads_sections() {
    let (u, r) =
        changelog("# C\n## [Unreleased]\n- x\n## [0.2.0] - 2026-11-27\n## [0.1.0] - 2026-11-01\n");
    assert!(u);
    assert_eq!(
        r,
        [
            ("0.2.0".to_string(), "2026-11-27".to_string()),
            ("0.1.0".to_string(), "2026-11-01".to_string())
        ]
    );
    let (u, _) = changelog("## [0.2.0] - 2026-11-27\n## [Unreleased]\n");
    assert!(!u, "Unreleased must come first");
    assert!(is_date("2026-11-27") && !is_date("2026-1-27"));
}

#[test]
fn the_version_is_the_same_everywhere() {
    let version = env!("CARGO_PKG_VERSION");
    let cargo = read("Cargo.toml");
    assert_eq!(
        values(&cargo, "version = ").first().map(String::as_str),
        Some(version),
        "[workspace.package] version in Cargo.toml"
    );
    let kustomization = read("manifests/base/kustomization.yaml");
    assert_eq!(
        values(&kustomization, "newTag:"),
        [version],
        "manifests/base/kustomization.yaml newTag"
    );
    let daemonset = read("manifests/base/daemonset.yaml");
    let labels = values(&daemonset, "app.kubernetes.io/version:");
    assert_eq!(
        labels.len(),
        2,
        "the DaemonSet's and its pods' version labels"
    );
    assert!(
        labels.iter().all(|l| l == version),
        "{labels:?} != {version}"
    );
    let images = values(&daemonset, "image:");
    assert_eq!(
        images,
        [format!("ghcr.io/node-doctor/node-doctor:{version}")],
        "the DaemonSet's image (kustomize's images: entry replaces it)"
    );
    let (unreleased_first, releases) = changelog(&read("CHANGELOG.md"));
    assert!(unreleased_first, "CHANGELOG.md opens with ## [Unreleased]");
    let (newest, date) = releases.first().expect("a release section in CHANGELOG.md");
    assert_eq!(newest, version, "CHANGELOG.md's newest release");
    assert!(is_date(date), "{newest}'s date {date:?}");
    let mut seen = std::collections::BTreeSet::new();
    assert!(
        releases.iter().all(|(v, _)| seen.insert(v.clone())),
        "a version listed twice: {releases:?}"
    );
}
