//! Links the release binary's hot code together (issue 32; docs/cost.md, "Memory").
//!
//! `hot-code.txt` lists, by symbol, the functions `serve` runs on a healthy node (every
//! collector and probe, the HTTP server, the renderers), as `scripts/bench-cost.sh
//! --hot-code` recorded them under callgrind. LLD (the linker of `x86_64-unknown-linux-gnu`
//! since Rust 1.90) places them first and together in `.text`: the kernel maps a binary's
//! code into a process 64 KiB around each page it runs (fault-around), so code spread over
//! the whole binary made nearly all of it resident, while the code a cycle runs is a third
//! of it. A symbol the list names that the build no longer has is skipped; one it lacks is
//! placed as before (the e2e test `hot_code` fails when the list has gone stale or the release
//! binary was linked without it).
use std::path::Path;

fn main() {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("hot-code.txt");
    println!("cargo:rerun-if-changed={}", list.display());
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // Other targets link with other linkers, which may not read a symbol ordering file.
    let lld_target = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    if release && lld_target && list.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=node-doctor=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bin=node-doctor=-Wl,--no-warn-symbol-ordering");
    }
}
