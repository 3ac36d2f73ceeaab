#!/usr/bin/env bash
# The cost of `node-doctor fleet` on a staged cluster (docs/cost.md, "fleet"): wall time,
# CPU time, peak RSS and API requests, once against a server that pages (limit 1000) and once
# against one that answers the whole list at once (the watch cache of older API servers for
# resourceVersion=0). The cluster is the stand-in API server's staged one
# (tests/kube-standin/examples/fleet.rs, HTTPS, manifests/fleet's RBAC).
#
#   scripts/bench-fleet.sh [NODES]        # default 5000
#
# Release builds of both; the stand-in runs on the same machine and shares its cores, so the
# wall time includes the stand-in's own work. Needs python3 (for the child's rusage).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-5000}"
cd "$ROOT"
# One build of both (one feature resolution: two builds would each rebuild the other's deps).
cargo build --release -q -p node-doctor -p kube-standin --bin node-doctor --example fleet
BIN="$ROOT/target/release/node-doctor"
STANDIN="$ROOT/target/release/examples/fleet"
DIR="$(mktemp -d)"
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT

# Runs the command, prints "wall cpu maxrss_kib exit" from the child's own rusage (a child
# starts inside its parent's address space and the kernel keeps that peak across exec: the
# parent here is a small python3, ~10 MiB, below what fleet itself reaches).
measure() {
    python3 - "$@" <<'PY'
import os, resource, subprocess, sys, time
t = time.monotonic()
with open(os.environ["OUT"], "wb") as out:
    p = subprocess.Popen(sys.argv[1:], stdout=out, close_fds=True)
    _, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t
print(f"{wall:.2f} {ru.ru_utime + ru.ru_stime:.2f} {ru.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
PY
}

for mode in paged whole; do
    flag=""
    [ "$mode" = whole ] && flag="--ignore-limit"
    "$STANDIN" "$DIR/$mode" "$N" 600 $flag > "$DIR/$mode.log" 2>&1 &
    SPID=$!
    for _ in $(seq 600); do grep -q '^ready' "$DIR/$mode.log" 2>/dev/null && break; sleep 0.1; done
    grep -q '^ready' "$DIR/$mode.log" || { cat "$DIR/$mode.log"; exit 1; }
    read -r wall cpu rss rc < <(OUT="$DIR/$mode.json" measure "$BIN" fleet --kubeconfig "$DIR/$mode/kubeconfig" --format json)
    sleep 1.2
    requests="$(grep '^requests' "$DIR/$mode.log" | tail -1)"
    kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
    printf 'fleet on %s nodes (%s): wall %s s, CPU %s s, max RSS %.1f MiB, exit %s, %s\n' \
        "$N" "$([ "$mode" = paged ] && echo 'paged, 1000 a page' || echo 'whole list at once')" \
        "$wall" "$cpu" "$(awk "BEGIN { print $rss / 1024 }")" "$rc" "$requests"
done
