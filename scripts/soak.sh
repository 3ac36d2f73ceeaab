#!/bin/sh
# The idle-node soak of issue 16: `node-doctor serve` on this host (--host-root /) for
# SOAK_SECONDS (default 600) at SOAK_INTERVAL (default 5s), then its flap counter per rule
# (node_doctor_finding_transitions_total) and the CPU busy share of the node meanwhile. Exits 1
# when a finding was raised again after it cleared (reraised > 0), unless the node was busy
# (CPUs more than 25% busy), where only the rules outside `load` are held to it.
#
#   scripts/soak.sh                      # release build, 10 minutes
#   SOAK_SECONDS=90 SOAK_INTERVAL=2s scripts/soak.sh
#   NODE_DOCTOR_BIN=target/debug/node-doctor scripts/soak.sh
set -eu
cd "$(dirname "$0")/.."
seconds=${SOAK_SECONDS:-600}
interval=${SOAK_INTERVAL:-5s}
port=${SOAK_PORT:-19818}
bin=${NODE_DOCTOR_BIN:-}
if [ -z "$bin" ]; then
    bin=$(scripts/release-build.sh)
fi
log=$(mktemp)
metrics=$(mktemp)
"$bin" serve --host-root / --listen "127.0.0.1:$port" --interval "$interval" --log-format json >/dev/null 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log" "$metrics"' EXIT INT TERM
cpu() { awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat; }
sleep 2
set -- $(cpu)
busy0=$1 total0=$2
echo "soak: $bin serve --interval $interval for $seconds s (pid $pid)" >&2
sleep "$seconds"
set -- $(cpu)
busy=$(( ($1 - busy0) * 1000 / ($2 - total0) ))
curl -sf "http://127.0.0.1:$port/metrics" >"$metrics"
printf 'CPUs %d.%d%% busy over the soak; load average %s\n' $((busy / 10)) $((busy % 10)) "$(cut -d' ' -f1-3 /proc/loadavg)"
awk -v busy="$busy" '
/^node_doctor_finding_transitions_total/ {
    match($0, /id="[^"]*"/); id = substr($0, RSTART + 4, RLENGTH - 5)
    match($0, /transition="[^"]*"/); t = substr($0, RSTART + 12, RLENGTH - 13)
    n[id, t] = $NF; ids[id] = 1
}
END {
    printf "%-45s %7s %7s %10s %8s\n", "rule", "raised", "cleared", "suppressed", "reraised"
    bad = 0
    for (id in ids) {
        printf "%-45s %7d %7d %10d %8d\n", id, n[id, "raised"], n[id, "cleared"], n[id, "suppressed"], n[id, "reraised"]
        if (n[id, "reraised"] > 0 && (busy <= 250 || id !~ /^load\./)) bad = 1
    }
    if (busy > 250) print "the node was busy: load.* rules follow that work and are not held to it"
    exit bad
}' "$metrics"
