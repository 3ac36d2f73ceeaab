#!/usr/bin/env bash
# Benchmark (not a test): `/findings` of a running `serve` against nginx serving the same
# bytes (issue 43: "/findings req/s at least nginx's on the same bytes").
#
#   scripts/bench-findings-vs-nginx.sh                 # 5 rounds of 5 s each, alternating
#   ROUNDS=9 SECONDS_EACH=10 scripts/bench-findings-vs-nginx.sh
#   AGENT_CPUS=any WRK_CPUS=any scripts/bench-findings-vs-nginx.sh   # unpinned
#
# Where they run: by default the server (the agent, or nginx) is pinned to CPU 0 and wrk to
# the other CPUs (taskset), as a server benchmark keeps its client off the server's CPU. Left
# unpinned on a 2-CPU machine, the server's two workers and wrk's two threads share both CPUs
# and the figure measures where the scheduler put them as much as the server (measured on this
# VM: 0.88-1.32x from run to run). AGENT_CPUS / WRK_CPUS name other CPU lists, `any` none.
#
# How they are compared: `serve --host-root $HOST_ROOT` (default /) runs until ready; its
# unfiltered `/findings` body is saved once and nginx serves that file (same bytes, same
# content type) from a configuration of its own in a temp dir: two worker processes (the
# agent has two HTTP worker threads), `sendfile on`, no access log (the agent logs no
# request), keep-alive without a request limit (wrk's connections stay open for both). Then
# `wrk -t $WRK_THREADS -c 64 -d $SECONDS_EACH` runs against each in turn, ROUNDS times,
# starting with a different one each round, so both see the same machine; prints each
# round (name, req/s, the server's CPU µs per request, wrk's CPU µs per response, the
# machine's idle %), the medians of each: the server's CPU is utime+stime of the process, or
# of nginx's master and workers, over the round; wrk's is its own rusage. Both listen on 127.0.0.1 only.
# Needs Debian's `wrk` and `nginx` (apt-get install wrk nginx-light; the package's own
# service is not used).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
SECONDS_EACH=${SECONDS_EACH:-5}
HOST_ROOT=${HOST_ROOT:-/}
WRK_THREADS=${WRK_THREADS:-2}
NCPU=$(nproc)
if [ "$NCPU" -ge 2 ]; then
    AGENT_CPUS=${AGENT_CPUS:-0}
    WRK_CPUS=${WRK_CPUS:-1-$((NCPU - 1))}
fi
AGENT_PIN=()
[ -n "${AGENT_CPUS:-}" ] && [ "$AGENT_CPUS" != any ] && AGENT_PIN=(taskset -c "$AGENT_CPUS")
WRK_PIN=()
[ -n "${WRK_CPUS:-}" ] && [ "$WRK_CPUS" != any ] && WRK_PIN=(taskset -c "$WRK_CPUS")
for t in wrk nginx curl python3; do
    command -v "$t" >/dev/null || { echo "bench-findings-vs-nginx.sh: needs $t" >&2; exit 1; }
done
BIN=${NODE_DOCTOR:-$(scripts/release-build.sh --quiet)}
TMP=$(mktemp -d /var/tmp/nd-vs-nginx.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AGENT_PORT=$(free_port)
NGINX_PORT=$(free_port)

"${AGENT_PIN[@]}" "$BIN" serve --listen "127.0.0.1:$AGENT_PORT" --host-root "$HOST_ROOT" 2>"$TMP/serve.log" &
AGENT=$!
PIDS+=("$AGENT")
for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$AGENT_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$AGENT_PORT/findings" >"$TMP/findings"

cat >"$TMP/nginx.conf" <<CONF
worker_processes 2;
daemon off;
master_process on;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path $TMP; proxy_temp_path $TMP; fastcgi_temp_path $TMP;
    uwsgi_temp_path $TMP; scgi_temp_path $TMP;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location = /findings { default_type application/json; alias $TMP/findings; }
    }
}
CONF
"${AGENT_PIN[@]}" nginx -c "$TMP/nginx.conf" &
NGINX=$!
PIDS+=("$NGINX")
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$NGINX_PORT/findings" >/dev/null 2>&1 && break
    sleep 0.1
done
cmp -s "$TMP/findings" <(curl -fsS "http://127.0.0.1:$NGINX_PORT/findings") ||
    { echo "bench-findings-vs-nginx.sh: nginx does not serve the same bytes" >&2; exit 1; }

# CPU ticks of a process and its children's threads (nginx: the master and its workers).
ticks() { # pid...
    local sum=0 p
    for p in "$@"; do
        for s in /proc/"$p"/task/*/stat; do
            sum=$((sum + $(awk '{print $14 + $15}' "$s" 2>/dev/null || echo 0)))
        done
    done
    echo "$sum"
}
# Idle and iowait ticks of all CPUs (/proc/stat's first line): was the machine saturated?
idle_ticks() { awk '/^cpu / {print $5 + $6; exit}' /proc/stat; }
nginx_pids() { echo "$NGINX" $(pgrep -P "$NGINX"); }
TCK=$(getconf CLK_TCK)

round() { # name port pids...
    local name=$1 port=$2
    shift 2
    local c0 c1 i0 i1 out
    c0=$(ticks "$@")
    i0=$(idle_ticks)
    # wrk's own CPU (user and system seconds, bash's `time`): what the client spends per
    # response, which differs with how the server writes it.
    out=$( { TIMEFORMAT='wrk-cpu %U %S'; time "${WRK_PIN[@]}" wrk -t "$WRK_THREADS" -c 64 -d "${SECONDS_EACH}s" "http://127.0.0.1:$port/findings"; } 2>&1 )
    c1=$(ticks "$@")
    i1=$(idle_ticks)
    local rps reqs errs
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    errs=$(awk '/Socket errors|Non-2xx/' <<<"$out" | tr '\n' ' ')
    local us wrk_us idle
    us=$(awk -v d=$((c1 - c0)) -v t="$TCK" -v n="$reqs" 'BEGIN{printf "%.1f", 1e6*d/t/n}')
    wrk_us=$(awk -v n="$reqs" '/^wrk-cpu/ {printf "%.1f", 1e6*($2+$3)/n}' <<<"$out")
    idle=$(awk -v d=$((i1 - i0)) -v t="$TCK" -v s="$SECONDS_EACH" -v c="$(nproc)" 'BEGIN{printf "%.0f", 100*d/t/s/c}')
    echo "$name $rps $us $wrk_us $idle ${errs:-}"
}

echo "node-doctor $("$BIN" --version | awk '{print $2}') vs $(nginx -v 2>&1 | sed 's/.*: //'); $(nproc) CPUs; kernel $(uname -r); /findings $(wc -c <"$TMP/findings") bytes"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); wrk -t $WRK_THREADS -c 64 -d ${SECONDS_EACH}s, $ROUNDS rounds; server CPUs: ${AGENT_CPUS:-any}; wrk CPUs: ${WRK_CPUS:-any}"
: >"$TMP/rounds"
for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then
        round agent "$AGENT_PORT" "$AGENT" | tee -a "$TMP/rounds"
        round nginx "$NGINX_PORT" $(nginx_pids) | tee -a "$TMP/rounds"
    else
        round nginx "$NGINX_PORT" $(nginx_pids) | tee -a "$TMP/rounds"
        round agent "$AGENT_PORT" "$AGENT" | tee -a "$TMP/rounds"
    fi
done
python3 - "$TMP/rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = lambda name, i: statistics.median(float(r[i]) for r in rows if r[0] == name)
a, n = med("agent", 1), med("nginx", 1)
print(f"median req/s: agent {a:,.0f}, nginx {n:,.0f} ({a / n:.2f}x); "
      f"CPU per request: agent {med('agent', 2):.1f} us, nginx {med('nginx', 2):.1f} us; "
      f"wrk's CPU per response: {med('agent', 3):.1f} us from the agent, "
      f"{med('nginx', 3):.1f} us from nginx; idle: {med('agent', 4):.0f} % and {med('nginx', 4):.0f} %")
print(f"target (agent >= nginx): {'met' if a >= n else 'not met'}")
PY
