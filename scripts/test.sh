#!/usr/bin/env bash
# The one test command (README "Test"; CI runs exactly this via .ci/run).
# Installs what the tests need, then runs the whole workspace's tests, rustfmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use. Each collector adds the tools its real-kernel tests need.
APT_PACKAGES=(
    # e2e tests and the agent itself need nothing beyond the Rust toolchain.
)
# Python tools the tests use (none yet).
PIP_PACKAGES=()

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "test.sh: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    else
        echo "test.sh: missing Debian packages (tests that need them skip): ${missing[*]}" >&2
    fi
fi
if ((${#PIP_PACKAGES[@]})); then
    python3 -m pip install --quiet "${PIP_PACKAGES[@]}"
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "test.sh: not root: real-kernel tests print SKIP and pass" >&2
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
