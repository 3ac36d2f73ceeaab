//! The real-log corpus: excerpts of kernel and daemon logs that people posted in public issue
//! trackers, mailing lists and Q&A pages (`excerpts/*.toml`, format in `README.md`), each
//! staged on a fake host where node-doctor reads it and scored against what a competent SRE
//! sees in it. The test fails when an excerpt that is not a listed known miss fails, when a
//! listed known miss passes (the list must stay true), or when precision or recall over the
//! corpus falls below the bars; it prints the per-collector table and the misses
//! (`cargo test -p collectors --test corpus -- --nocapture`, or `scripts/corpus-report.sh`).

mod excerpt;
mod score;
mod stage;

use excerpt::Excerpt;
use score::{Outcome, Tally};

/// The bars of issue 45.
const MIN_PRECISION: f64 = 0.98;
const MIN_RECALL: f64 = 0.95;
/// The corpus's shape (issue 45): its size, its share of benign noise and of excerpts with
/// several problems or a problem among other lines.
const MIN_EXCERPTS: usize = 200;
const MIN_MIXED: usize = 30;

fn corpus_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/excerpts")
}

#[test]
fn the_corpus_scores_above_the_bars() {
    let excerpts = excerpt::load_all(&corpus_dir());
    let known = stage::known_collectors();
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for ex in &excerpts {
        if let Some(missing) = ex.pending(&known) {
            tally.pending.push((ex.name.clone(), missing));
            continue;
        }
        let findings = stage::run(ex);
        let outcome = score::score(ex, &findings);
        if let Some(why) = check(ex, &outcome) {
            failures.push(why);
        }
        tally.add(ex, outcome);
    }
    print!("{}", tally.report());
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    shape(&excerpts);
    let (p, r) = tally.overall();
    assert!(p >= MIN_PRECISION, "precision {p:.3} below {MIN_PRECISION}");
    assert!(r >= MIN_RECALL, "recall {r:.3} below {MIN_RECALL}");
}

/// Why an excerpt's result is wrong for the test: a failure not listed as a known miss, or a
/// known miss that passes now.
fn check(ex: &Excerpt, o: &Outcome) -> Option<String> {
    match (&ex.known_miss, o.passed()) {
        (None, false) => Some(format!("FAIL {}: {}", ex.name, o.describe())),
        (Some(_), true) => Some(format!(
            "PASSES NOW {}: remove its known_miss and its line in the README",
            ex.name
        )),
        _ => None,
    }
}

/// The corpus has the size and the mix issue 45 asks for.
fn shape(excerpts: &[Excerpt]) {
    let benign = excerpts.iter().filter(|e| e.benign()).count();
    let mixed = excerpts.iter().filter(|e| e.mixed()).count();
    println!(
        "corpus: {} excerpts, {benign} benign, {mixed} with several problems or a problem among other lines",
        excerpts.len()
    );
    assert!(
        excerpts.len() >= MIN_EXCERPTS,
        "{} excerpts",
        excerpts.len()
    );
    assert!(benign * 3 >= excerpts.len(), "{benign} benign");
    assert!(mixed >= MIN_MIXED, "{mixed} mixed");
}
