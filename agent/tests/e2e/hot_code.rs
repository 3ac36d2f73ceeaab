//! The release binary's hot code is linked together (issue 32; agent/build.rs says why): the
//! functions `agent/hot-code.txt` lists must still be in the binary (else the list is stale:
//! `scripts/bench-cost.sh --hot-code` regenerates it) and must sit together in `.text` (else
//! the binary was linked without the list, and `serve` maps most of its code again).

use std::collections::HashMap;
use std::process::Command;

use crate::manifests::repo_root;
use crate::support::bin_from_env;

/// Of the listed functions, the share the binary must still have.
const MIN_FOUND: f64 = 0.8;
/// How far the listed functions may spread, as a multiple of their total size.
const MAX_SPREAD: f64 = 1.25;

/// Code symbols of `binary` by name: (address, size), from `nm -S`.
fn code_symbols(binary: &std::path::Path) -> HashMap<String, (u64, u64)> {
    let out = Command::new("nm")
        .arg("-S")
        .arg(binary)
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success(), "nm -S {}", binary.display());
    let mut syms = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let p: Vec<&str> = line.split_whitespace().collect();
        if let [addr, size, kind, name] = p[..] {
            if matches!(kind, "t" | "T" | "w" | "W") {
                if let (Ok(a), Ok(s)) =
                    (u64::from_str_radix(addr, 16), u64::from_str_radix(size, 16))
                {
                    syms.entry(name.to_string()).or_insert((a, s));
                }
            }
        }
    }
    syms
}

/// (share of the list found, total size, address span) of `wanted` in `syms`.
fn placement(wanted: &[&str], syms: &HashMap<String, (u64, u64)>) -> (f64, u64, u64) {
    let found: Vec<(u64, u64)> = wanted
        .iter()
        .filter_map(|w| syms.get(*w).copied())
        .collect();
    let size = found.iter().map(|(_, s)| s).sum();
    let span = match (
        found.iter().map(|(a, _)| *a).min(),
        found.iter().map(|(a, s)| a + s).max(),
    ) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0,
    };
    (found.len() as f64 / wanted.len().max(1) as f64, size, span)
}

#[test]
fn placement_tells_together_from_spread() {
    let syms: HashMap<String, (u64, u64)> = [("a", (0, 10)), ("b", (10, 10)), ("c", (1000, 10))]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    assert_eq!(placement(&["a", "b"], &syms), (1.0, 20, 20));
    assert_eq!(placement(&["a", "c", "x", "y"], &syms), (0.5, 20, 1010));
}

#[test]
fn the_release_binary_links_its_hot_code_together() {
    // Only the release build is linked with the list (agent/build.rs); scripts/test.sh
    // builds it and names it in NODE_DOCTOR_BIN.
    let Some(bin) = bin_from_env("NODE_DOCTOR_BIN") else {
        eprintln!("SKIP: NODE_DOCTOR_BIN is unset (scripts/test.sh sets it to the release build)");
        return;
    };
    let list = std::fs::read_to_string(repo_root().join("agent/hot-code.txt"))
        .expect("agent/hot-code.txt");
    let wanted: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        wanted.len() > 500,
        "the list names {} functions",
        wanted.len()
    );
    let syms = code_symbols(&bin);
    let total: u64 = syms.values().map(|(_, s)| s).sum();
    let (share, size, span) = placement(&wanted, &syms);
    eprintln!(
        "hot code: {:.0} % of {} listed functions in {}, {} KiB of {} KiB of code, over {} KiB",
        share * 100.0,
        wanted.len(),
        bin.display(),
        size / 1024,
        total / 1024,
        span / 1024
    );
    assert!(
        share >= MIN_FOUND,
        "agent/hot-code.txt is stale: {:.0} % of it is in the binary; regenerate it with \
         scripts/bench-cost.sh --hot-code",
        share * 100.0
    );
    assert!(
        span as f64 <= MAX_SPREAD * size as f64,
        "the listed functions are spread over {span} bytes for {size} bytes of code: the binary \
         was not linked with agent/hot-code.txt (agent/build.rs)"
    );
}
