#!/usr/bin/env bash
# Benchmark (not a test): node-doctor's own cost next to node_exporter's, side by side on
# this machine (issue 19). Root. Prints one markdown table with the issue's targets.
#
#   scripts/bench-cost.sh            # ~4-5 min: 60 scrapes, a 60 s window, 3 checks, trouble
#   scripts/bench-cost.sh --quick    # ~3 min: 20 scrapes, a 30 s window, 3 checks, trouble
#   scripts/bench-cost.sh --check-only   # ~20 s: only `check`, 7 times, on the same idle node
#   scripts/bench-cost.sh --memory [SECONDS]   # memory: serve and node_exporter side by side
#       for SECONDS (default 600; 3600 is the soak), both scraped every 15 s, RSS and CPU
#       of both every minute
#   scripts/bench-cost.sh --hot-code   # ~8 min: serve on the same staged node under callgrind,
#       then natively under perf (CPU samples, instruction-fetch page faults); writes the
#       functions it runs to agent/hot-code.txt (agent/build.rs links them together)
#   scripts/bench-cost.sh --lock-hosts   # ~1 min: only serve on three xtables lock host kinds
#       at once (the lock file there, absent, its directory absent; issue 43), 30 s window:
#       each one's share of a core and its lock sampler thread's CPU (also in the full runs)
#   scripts/bench-cost.sh --gpu-hosts   # ~2.5 min: only `serve --collector gpu` on two staged
#       host roots at once (collectors/examples/stage_gpu_node: 8 GPUs and 64 PCI devices, and
#       the same 64 devices without the GPUs; issue 46), 120 s window (--quick after it: 60 s):
#       the gpu collector's CPU per run on each and the difference, what the GPUs add
#   scripts/bench-cost.sh --check-per-collector  # ~2 min: --check-only, then each collector's
#                                        # `check --collector C` and the start-up alone, 5 times
#   scripts/bench-cost.sh --check-against OTHER  # ~40 s: BENCH_ROUNDS (15) pairs of checks,
#       NODE_DOCTOR's (else the release build) and OTHER's in turn on the same staged node:
#       both medians and the median of the pairs' differences (A/B of a change)
#
# In a new pid namespace (`unshare --pid --fork --mount-proc`, so pid 1 is readable, as with
# hostPID) and network namespace (loopback only, no legacy iptables table: an nft node;
# BENCH_LEGACY=1 adds a legacy filter table to it; BENCH_HOST_NET=1 keeps the host's) it
# starts BENCH_PROCS (2000) idle processes and holds BENCH_FLOCKS (10000) flocks (on request
# also BENCH_UNIX_SOCKETS listening unix sockets in its network namespace and BENCH_MOUNTS
# tmpfs mounts in its mount namespace, pid 1's tables as on a node running pods; none by
# default), and reports the kernel log records within the last hour (`check` reads them all;
# the log is the machine's, not staged),
# runs Debian's prometheus-node-exporter (default collectors) and `node-doctor serve`
# (release build, default interval, --host-root /, a containerd config whose root and state
# are directories on a 1 GiB tmpfs of the namespace's own, so `disk` judges a healthy
# runtime filesystem as on a node, whatever this machine's disk holds; a kubelet config whose
# clusterDNS is 127.0.83.53, where scripts/dns-test-server.py answers, so `dns` probes each
# run as on a node; a process named kube-proxy answering /healthz on 127.0.0.1:10256 and a TLS
# listener on 127.0.0.1:16443 named by a kubelet kubeconfig (--kubelet-kubeconfig), so
# `reach` probes as on a node) on 127.0.0.1,
# and measures:
#   - node_exporter: CPU per /metrics scrape (its threads' schedstat run time over N scrapes);
#   - node-doctor: every collector's CPU per run at rest (node_doctor_collector_cpu_seconds_total
#     and the duration histogram's _count, deltas over the window), serve's share of a core
#     over the window, one `check` (user+sys of the child from wait4, and its wall time);
#     serve's share of a core on the same node with the xtables lock file there, absent, and
#     its directory absent (three more serves at once, each its own --xtables-lock, over one
#     window; and the lock sampler thread's CPU in each);
#   - trouble, one after the other: fio on a loop device throttled to 1 MiB/s (cgroup v1
#     blkio.throttle, else v2 io.max), a held xtables lock (a lock file in the temp dir, given
#     to serve with --xtables-lock), a full conntrack table in a network namespace it creates
#     (nf_conntrack_max lowered to 200 for the second the datagrams take): how many runs of
#     the collector until /findings shows the finding, and all collectors' CPU per cycle;
#   - BENCH_TROUBLE=hogs (not in the default): four shells in a busy loop in the bench's own
#     (here the root) cgroup, a busy host whose cgroups cannot name the culprit: runs of `load`
#     until a finding names a hog, all collectors' CPU per cycle from the start and per
#     escalated cycle after it, and load's CPU per run.
# The measuring program is scripts/bench-cost.py (pid 1 of the namespace: everything it
# starts dies with it). It writes only under a temp dir, removed at exit (BENCH_KEEP=1 keeps
# it: serve.log, node_exporter.log). Whatever it changed on the host (loop device, cgroup,
# netns, nf_conntrack_max) is undone here too, also when it fails or is interrupted.
#
# node_exporter: $NODE_EXPORTER, else prometheus-node-exporter on PATH, else Debian's package
# fetched with `apt-get download` and unpacked into the temp dir (not installed: no service
# starts). node-doctor: $NODE_DOCTOR, else scripts/release-build.sh (the shipped binary).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QUICK=()
case "${1:-}" in
"") ;;
--quick) QUICK=(--quick) ;;
--check-only) QUICK=(--check-only) ;;
--lock-hosts) QUICK=(--lock-hosts) ;;
--gpu-hosts)
    # The gpu collector's own staging, written by a small example program (a debug build).
    cargo build -q --manifest-path "$ROOT/Cargo.toml" -p collectors --example stage_gpu_node >&2
    QUICK=(--gpu-hosts "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/stage_gpu_node")
    [ "${2:-}" = --quick ] && QUICK+=(--quick)
    ;;
--check-per-collector) QUICK=(--check-only --check-per-collector) ;;
--check-against)
    [ -x "${2:-}" ] || { echo "bench-cost.sh: --check-against needs an executable" >&2; exit 2; }
    QUICK=(--check-only --check-against "$(realpath "$2")" --rounds "${BENCH_ROUNDS:-15}")
    ;;
--memory) QUICK=(--memory "${2:-600}") ;;
--hot-code)
    for t in valgrind perf nm; do
        command -v "$t" >/dev/null || { echo "bench-cost.sh: --hot-code needs $t" >&2; exit 1; }
    done
    QUICK=(--hot-code "$ROOT/agent/hot-code.txt")
    ;;
*)
    echo "usage: scripts/bench-cost.sh [--quick | --check-only | --lock-hosts | --gpu-hosts [--quick] | --check-per-collector | --check-against OTHER | --memory [SECONDS] | --hot-code]" >&2
    exit 2
    ;;
esac
[ "$(id -u)" = 0 ] || { echo "bench-cost.sh: run as root (pid namespace, loop device, cgroup, netns)" >&2; exit 1; }
TOOLS=(unshare ip openssl /usr/bin/python3)
# The trouble phases' tools (a throttled loop device, the lock holder); --lock-hosts and
# --gpu-hosts have none.
case "${QUICK[0]:-}" in --lock-hosts | --gpu-hosts) ;; *) TOOLS+=(losetup fio iptables) ;; esac
for tool in "${TOOLS[@]}"; do
    command -v "$tool" >/dev/null || { echo "bench-cost.sh: needs $tool" >&2; exit 1; }
done

TMP="$(mktemp -d /var/tmp/nd-bench-cost.XXXXXX)"
NS_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$NS_PID" ] && kill -0 "$NS_PID" 2>/dev/null; then
        kill -TERM "$NS_PID" 2>/dev/null || true
        sleep 2
        kill -KILL "$NS_PID" 2>/dev/null || true
    fi
    wait 2>/dev/null || true
    # What the measuring program may have left on the host if it was killed.
    if [ -s "$TMP/cleanup.ctmax" ]; then
        cat "$TMP/cleanup.ctmax" >/proc/sys/net/netfilter/nf_conntrack_max 2>/dev/null || true
    fi
    if [ -f "$TMP/cleanup.netns" ]; then
        while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done <"$TMP/cleanup.netns"
    fi
    if [ -f "$TMP/cleanup.cgroup" ]; then
        while read -r cg; do
            [ -d "$cg" ] || continue
            for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do
                echo "$pid" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null || true
            done
            rmdir "$cg" 2>/dev/null || true
        done <"$TMP/cleanup.cgroup"
    fi
    if [ -f "$TMP/cleanup.loop" ]; then
        while read -r dev; do
            losetup -j "$TMP/loop.img" 2>/dev/null | grep -q "^$dev:" && losetup -d "$dev" 2>/dev/null || true
        done <"$TMP/cleanup.loop"
    fi
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        echo "bench-cost.sh: kept $TMP" >&2
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

NE="${NODE_EXPORTER:-$(command -v prometheus-node-exporter || true)}"
case "${QUICK[0]:-}" in --check-only | --hot-code | --lock-hosts | --gpu-hosts) NE=- ;; esac
if [ -z "$NE" ]; then
    echo "bench-cost.sh: fetching Debian's prometheus-node-exporter into $TMP (not installed)" >&2
    (cd "$TMP" && apt-get download -q -o APT::Sandbox::User=root prometheus-node-exporter >/dev/null)
    dpkg -x "$TMP"/prometheus-node-exporter_*.deb "$TMP/ne"
    NE="$TMP/ne/usr/bin/prometheus-node-exporter"
fi
BIN="${NODE_DOCTOR:-}"
if [ -z "$BIN" ]; then
    BIN=$("$ROOT/scripts/release-build.sh" --quiet)
fi
[ "$NE" = - ] || echo "node_exporter: $("$NE" --version 2>&1 | head -1)" >&2
echo "node-doctor: $("$BIN" --version)" >&2

# BENCH_TROUBLE picks the trouble phases (default fio,xtables,conntrack; also hogs; the conntrack phase
# leaves "table full" records in the kernel log, which a run within the next hour sees).
# Its own network namespace too (BENCH_HOST_NET=1: the host's): a node whose host namespace
# has no legacy iptables table, as one on the nft backend (this VM's has the legacy tables
# the test suite's iptables-legacy calls left, and they cannot be unloaded). BENCH_LEGACY=1:
# the legacy backend's node, staged in that namespace (iptables-legacy adds a rule to its
# filter table; it goes with the namespace). nf_conntrack_max is writable from the initial
# namespace only: opened here, passed as descriptor 9.
NET=(--net)
PYNET=(--own-net)
if [ "${BENCH_LEGACY:-0}" = 1 ]; then
    command -v iptables-legacy >/dev/null || { echo "bench-cost.sh: BENCH_LEGACY=1 needs iptables-legacy" >&2; exit 1; }
    PYNET+=(--legacy)
fi
if [ "${BENCH_HOST_NET:-0}" = 1 ]; then
    NET=()
    PYNET=()
fi
if [ -w /proc/sys/net/netfilter/nf_conntrack_max ]; then
    exec 9<>/proc/sys/net/netfilter/nf_conntrack_max
    PYNET+=(--ct-max-fd 9)
fi
unshare --pid --fork --mount-proc "${NET[@]}" /usr/bin/python3 "$ROOT/scripts/bench-cost.py" \
    --bin "$BIN" --node-exporter "$NE" --tmp "$TMP" "${PYNET[@]}" \
    --trouble "${BENCH_TROUBLE:-fio,xtables,conntrack}" \
    --procs "${BENCH_PROCS:-2000}" --flocks "${BENCH_FLOCKS:-10000}" \
    --unix-sockets "${BENCH_UNIX_SOCKETS:-0}" --mounts "${BENCH_MOUNTS:-0}" "${QUICK[@]}" &
NS_PID=$!
wait "$NS_PID"
