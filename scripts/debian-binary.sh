#!/usr/bin/env bash
# Prints the path of one file of a Debian package, unpacked into the download cache on first
# use (`apt-get download` + `dpkg -x`: not installed, so no maintainer script runs and no
# service starts; the packages used this way start Prometheus, or set the clock's tick and
# frequency, when installed).
#
#   scripts/debian-binary.sh PACKAGE PATH     e.g. scripts/debian-binary.sh prometheus usr/bin/promtool
#
# The cache is tests/manifests/validate.sh's: $ND_CACHE_DIR (default
# ~/.cache/node-doctor-validate, or $XDG_CACHE_HOME/node-doctor-validate), the package under
# deb/PACKAGE. Used by tests/manifests/validate.sh and by the tests that run a Debian tool
# beside node-doctor (tests/e2e/debian.rs). Progress and errors go to stderr; on failure (no
# apt-get, no network, no candidate) it exits non-zero with the reason on its last line.
set -euo pipefail

pkg="${1:?usage: $0 PACKAGE PATH}"
bin="${2:?usage: $0 PACKAGE PATH}"
# ND_TOOLS_DIR is the cache's former name, still honoured.
cache="${ND_CACHE_DIR:-${ND_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-doctor-validate}}"
dir="$cache/deb/$pkg"
mkdir -p "$cache/deb"
# One fetch of a package at a time (tests run in parallel, and tests/manifests/validate.sh
# beside them).
exec 9>"$dir.lock"
flock 9
if [ ! -x "$dir/pkg/$bin" ]; then
    command -v apt-get >/dev/null || { echo "no apt-get to fetch Debian package $pkg" >&2; exit 1; }
    echo "    fetching Debian package $pkg (for $(basename "$bin"))" >&2
    # (Captured first: `apt-cache ... | grep -q` under pipefail fails when grep quits early,
    # which ran apt-get update for every package.)
    policy="$(apt-cache policy "$pkg" 2>/dev/null || true)"
    if ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
        echo "    apt-get update" >&2
        apt-get update -qq >&2 || { echo "apt-get update failed (not root?): cannot fetch $pkg" >&2; exit 1; }
    fi
    rm -rf "$dir" && mkdir -p "$dir/pkg"
    (cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >&2) \
        || { echo "apt-get download $pkg failed" >&2; exit 1; }
    dpkg -x "$dir"/*.deb "$dir/pkg"
fi
[ -x "$dir/pkg/$bin" ] || { echo "no $bin in Debian package $pkg" >&2; exit 1; }
echo "$dir/pkg/$bin"
