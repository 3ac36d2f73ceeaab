#!/bin/sh
# The binary node-doctor ships (the image's, the one scripts/test.sh runs as deployed, the one
# the benches measure): the release profile, statically linked with glibc (crt-static), for
# this machine's target triple. Prints its path on stdout; cargo's output goes to stderr.
#
#   scripts/release-build.sh             # e.g. target/x86_64-unknown-linux-gnu/release/node-doctor
#   scripts/release-build.sh --locked    # extra arguments go to cargo build
#
# Why static (issue 32, docs/cost.md "Memory"): a dynamically linked agent maps libc, libm,
# libgcc_s and the loader, 1.9 MiB of its resident memory on this VM; linked statically it
# carries only the few functions it calls. The target triple is named because crt-static with
# no --target would apply to proc-macro crates too, which cannot be linked statically.
# `cargo run --release` (README's quick start) builds the same code, dynamically linked.
set -eu
cd "$(dirname "$0")/.."
triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release -p node-doctor --target "$triple" "$@" >&2
echo "$(realpath -m "${CARGO_TARGET_DIR:-target}")/$triple/release/node-doctor"
