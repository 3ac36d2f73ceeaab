#!/usr/bin/env bash
# Benchmark (not a test): memory and HTTP performance of `node-doctor serve` on this machine.
#
#   scripts/bench-serve.sh            # 5 minutes at default intervals, then wrk
#   SOAK_SECONDS=30 scripts/bench-serve.sh
#   AGENT_CPUS=0 WRK_CPUS=1 WRK_THREADS=1 scripts/bench-serve.sh   # pin with taskset
#
# Prints: RSS after the soak at default intervals (and peak), CPU used by the agent during
# the soak, then /findings and /metrics throughput, p99 latency and errors under
# `wrk -c 64 -d 10s` on loopback. Needs Debian `wrk`. Output also goes to bench-out/.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_SECONDS=${SOAK_SECONDS:-300}
HOST_ROOT=${HOST_ROOT:-/}
PORT=${PORT:-19808}
# Optional CPU pinning (taskset lists), so wrk does not compete with the agent for a CPU.
AGENT_CPUS=${AGENT_CPUS:-}
WRK_CPUS=${WRK_CPUS:-}
WRK_THREADS=${WRK_THREADS:-2}
AGENT_PIN=()
[ -n "$AGENT_CPUS" ] && AGENT_PIN=(taskset -c "$AGENT_CPUS")
WRK_PIN=()
[ -n "$WRK_CPUS" ] && WRK_PIN=(taskset -c "$WRK_CPUS")
OUT=bench-out
mkdir -p "$OUT"

command -v wrk >/dev/null || { echo "bench-serve.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
BIN=$(scripts/release-build.sh --quiet)

"${AGENT_PIN[@]}" "$BIN" serve --listen "127.0.0.1:$PORT" --host-root "$HOST_ROOT" --log-format json \
    2>"$OUT/serve.log" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT

for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 || sleep 1

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$PID/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$PID/status"; }
TCK=$(getconf CLK_TCK)

echo "node-doctor $("$BIN" --version | awk '{print $2}') · $(nproc) CPUs · kernel $(uname -r)"
echo "collectors: $(curl -fsS "http://127.0.0.1:$PORT/findings" | python3 -c 'import json,sys; print(", ".join(c["name"]+"="+c["status"] for c in json.load(sys.stdin)["collectors"]) or "(none)")')"
echo "RSS at start: $(rss_kib) KiB"
c0=$(cpu_ticks)
t=0
while ((t < SOAK_SECONDS)); do
    step=$((SOAK_SECONDS - t < 60 ? SOAK_SECONDS - t : 60))
    sleep "$step"
    t=$((t + step))
    echo "  t=${t}s RSS $(rss_kib) KiB, threads $(threads)"
done
c1=$(cpu_ticks)
RSS_SOAK=$(rss_kib)
echo "RSS after ${SOAK_SECONDS}s at default intervals: ${RSS_SOAK} KiB ($(awk -v k="$RSS_SOAK" 'BEGIN{printf "%.1f", k/1024}') MiB), peak $(hwm_kib) KiB"
echo "CPU during soak: $(awk -v d=$((c1 - c0)) -v tck="$TCK" -v s="$SOAK_SECONDS" 'BEGIN{printf "%.2f s (%.3f%% of one core)", d/tck, 100*d/tck/s}')"

echo "load average before wrk (other work on this machine): $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wrk -t $WRK_THREADS -c 64; agent CPUs: ${AGENT_CPUS:-any}; wrk CPUs: ${WRK_CPUS:-any}"
for path in /findings /metrics; do
    w0=$(cpu_ticks)
    "${WRK_PIN[@]}" wrk -t "$WRK_THREADS" -c 64 -d 10s --latency "http://127.0.0.1:$PORT$path" >"$OUT/wrk${path//\//_}.txt"
    w1=$(cpu_ticks)
    reqs=$(awk '/requests in/ {print $1}' "$OUT/wrk${path//\//_}.txt")
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$OUT/wrk${path//\//_}.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$OUT/wrk${path//\//_}.txt")
    p50=$(awk '$1 == "50%" {print $2}' "$OUT/wrk${path//\//_}.txt")
    errs=$(awk '/Socket errors|Non-2xx/ {print}' "$OUT/wrk${path//\//_}.txt" | tr '\n' ' ')
    bytes=$(curl -fsS "http://127.0.0.1:$PORT$path" | wc -c)
    us_per_req=$(awk -v d=$((w1 - w0)) -v tck="$TCK" -v n="$reqs" 'BEGIN{printf "%.1f", 1e6*d/tck/n}')
    echo "$path ($bytes bytes): ${rps} req/s, p50 ${p50}, p99 ${p99}, errors: ${errs:-none}; agent CPU ${us_per_req} us/request"
done
echo "RSS after wrk: $(rss_kib) KiB, peak $(hwm_kib) KiB"
