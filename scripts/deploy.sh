#!/usr/bin/env bash
# Build node-doctor's image, put it where the nodes can get it, and write the kustomize
# overlay that deploys exactly that image (docs/deploy.md "Install").
#
#   scripts/deploy.sh push REGISTRY          build, push REGISTRY/node-doctor:<tag>, write the
#                                            overlay pinned to the pushed digest
#   scripts/deploy.sh load --kind [CLUSTER]  build, load into a kind cluster's nodes (no registry)
#   scripts/deploy.sh load --ctr [ADDRESS]   build, import into containerd's k8s.io namespace on
#                                            this machine (k3s: --ctr-cmd "k3s ctr")
#   scripts/deploy.sh load --save FILE       build, write `docker save` output to FILE, to copy
#                                            to each node and import there yourself
#   scripts/deploy.sh image                  build only; print the image reference
#   scripts/deploy.sh overlay IMAGE [DIGEST] write the overlay for an image that exists already
#   then:  kubectl apply -k deploy/
#
# Options (before or after the command's arguments):
#   --out DIR         the overlay's directory (default: deploy/ in this repository, ignored by git)
#   --base DIR        what the overlay deploys (default: manifests; e.g.
#                     manifests/overlays/prometheus-operator or manifests/overlays/k8s-1.25-1.29)
#   --binary FILE     package FILE instead of building it with scripts/release-build.sh
#   --dockerfile      build with the Dockerfile instead (compiles in docker: pulls the rust and
#                     distroless base images, 5-10 minutes on 2 cores)
#   --docker CMD      the docker client, word-split (default: docker; e.g. "docker -H unix:///x")
#   --ctr-cmd CMD     the ctr client, word-split (default: ctr)
#
# The tag is <version>-g<commit> (version from Cargo.toml, the commit's 12-hex abbreviation),
# with -dirty.<id> added when the work tree has uncommitted changes (<id> names that state:
# `git stash create`), so a tag is never reused for different code and imagePullPolicy
# IfNotPresent never runs a stale image.
#
# The default build packages the shipped binary (scripts/release-build.sh: the release profile,
# statically linked) and any shared libraries a given --binary links (ldd) into an image
# with the Dockerfile's final-stage settings (USER, EXPOSE, ENTRYPOINT, CMD read from the
# Dockerfile) via `docker import`: no base image is pulled, a build takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG="scripts/deploy.sh"

die() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 1
}
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 64
}
say() { printf '%s: %s\n' "$PROG" "$*" >&2; }

OUT="$ROOT/deploy"
BASE="$ROOT/manifests"
BINARY=""
DOCKERFILE=0
DOCKER_CMD="docker"
CTR_CMD="ctr"
CMD=""
ARGS=()
LOAD_MODE=""
LOAD_ARG=""

while (($#)); do
    case "$1" in
        --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
        --out=*) OUT="${1#*=}"; shift ;;
        --base) BASE="${2:?--base needs a directory}"; shift 2 ;;
        --base=*) BASE="${1#*=}"; shift ;;
        --binary) BINARY="${2:?--binary needs a file}"; shift 2 ;;
        --binary=*) BINARY="${1#*=}"; shift ;;
        --dockerfile) DOCKERFILE=1; shift ;;
        --docker) DOCKER_CMD="${2:?--docker needs a command}"; shift 2 ;;
        --docker=*) DOCKER_CMD="${1#*=}"; shift ;;
        --ctr-cmd) CTR_CMD="${2:?--ctr-cmd needs a command}"; shift 2 ;;
        --ctr-cmd=*) CTR_CMD="${1#*=}"; shift ;;
        --kind | --ctr | --save)
            LOAD_MODE="${1#--}"
            shift
            if (($#)) && [[ "$1" != --* ]]; then
                LOAD_ARG="$1"
                shift
            fi
            ;;
        -h | --help) usage ;;
        --*) say "unknown option $1"; usage ;;
        *)
            if [[ -z "$CMD" ]]; then CMD="$1"; else ARGS+=("$1"); fi
            shift
            ;;
    esac
done

# shellcheck disable=SC2206 # word-split on purpose: "docker -H unix:///x"
DOCKER=($DOCKER_CMD)
# shellcheck disable=SC2206
CTR=($CTR_CMD)

# --- what is being deployed --------------------------------------------------------------

version() {
    sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' "$ROOT/Cargo.toml" |
        head -n 1
}

# <version>-g<commit>[-dirty.<state>]: a tag per state of the code, never reused.
image_tag() {
    local v sha dirty
    v="$(version)"
    [[ -n "$v" ]] || die "no version in $ROOT/Cargo.toml [workspace.package]"
    sha="$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null)" ||
        die "$ROOT is not a git clone: the image tag names the commit"
    if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
        # The tree of the work tree's state: `git stash create` makes a new commit object at
        # every call, but the same content has the same tree.
        dirty="$(git -C "$ROOT" stash create 2>/dev/null)" || die "git stash create failed"
        dirty="$(git -C "$ROOT" rev-parse --short=12 "$dirty^{tree}")"
        printf '%s-g%s-dirty.%s\n' "$v" "$sha" "$dirty"
    else
        printf '%s-g%s\n' "$v" "$sha"
    fi
}

# The image name the manifests use, from manifests/base/kustomization.yaml's `images:`.
manifest_image_name() {
    sed -n 's/^  - name: *\([^ #]*\).*/\1/p' "$ROOT/manifests/base/kustomization.yaml" | head -n 1
}

# The final stage of the Dockerfile: the lines after its last FROM that set the image's
# configuration, as `docker import --change` arguments.
dockerfile_changes() {
    awk '/^FROM /{n=NR} {line[NR]=$0} END {for (i = n + 1; i <= NR; i++) print line[i]}' \
        "$ROOT/Dockerfile" |
        grep -E '^(USER|EXPOSE|ENTRYPOINT|CMD|ENV|WORKDIR|LABEL) ' || true
}

# --- building ----------------------------------------------------------------------------

# A root filesystem of the binary, the libraries it links and the few files the distroless
# base gives (passwd/group with the nonroot user, CA certificates, /tmp), as a tar on stdout.
binary_rootfs_tar() {
    local bin="$1" fs
    fs="$(mktemp -d)"
    # shellcheck disable=SC2064 # expand now: the trap must remove this directory
    trap "rm -rf '$fs'" RETURN
    install -D -m 0755 "$bin" "$fs/usr/local/bin/node-doctor"
    local libs
    if libs="$(ldd "$bin" 2>/dev/null)"; then
        # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
        while read -r lib; do
            [[ -n "$lib" && -e "$lib" ]] || continue
            mkdir -p "$fs$(dirname "$lib")"
            cp -L "$lib" "$fs$lib"
        done < <(printf '%s\n' "$libs" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
    fi
    mkdir -p "$fs/etc" "$fs/tmp" "$fs/home/nonroot" "$fs/root"
    chmod 1777 "$fs/tmp"
    chown 65532:65532 "$fs/home/nonroot"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
        >"$fs/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$fs/etc/group"
    if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
        install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$fs/etc/ssl/certs/ca-certificates.crt"
    fi
    tar -C "$fs" --numeric-owner -cf - .
}

build_image() {
    local ref="$1" tag="$2" sha
    sha="$(git -C "$ROOT" rev-parse HEAD)"
    local labels=(
        "org.opencontainers.image.title=node-doctor"
        "org.opencontainers.image.version=$tag"
        "org.opencontainers.image.revision=$sha"
        "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    )
    if ((DOCKERFILE)); then
        local largs=()
        for l in "${labels[@]}"; do largs+=(--label "$l"); done
        say "docker build -t $ref (the Dockerfile: compiles in docker)"
        "${DOCKER[@]}" build "${largs[@]}" -t "$ref" "$ROOT" >&2
        return
    fi
    local bin="$BINARY"
    if [[ -z "$bin" ]]; then
        say "scripts/release-build.sh (release profile, static)"
        bin=$("$ROOT/scripts/release-build.sh")
    fi
    [[ -f "$bin" && -x "$bin" ]] || die "$bin is not an executable file"
    local changes=()
    while IFS= read -r line; do
        [[ -n "$line" ]] && changes+=(--change "$line")
    done < <(dockerfile_changes)
    for l in "${labels[@]}"; do changes+=(--change "LABEL $l"); done
    say "docker import $ref ($bin and the libraries it links; the Dockerfile's final-stage settings)"
    binary_rootfs_tar "$bin" | "${DOCKER[@]}" import "${changes[@]}" - "$ref" >/dev/null
}

# --- the overlay -------------------------------------------------------------------------

# overlay NEW_NAME TAG [DIGEST]: <out>/kustomization.yaml deploying <base> with that image.
write_overlay() {
    local name="$1" tag="$2" digest="${3:-}" rel from
    [[ -d "$BASE" ]] || die "--base $BASE is not a directory"
    [[ -f "$BASE/kustomization.yaml" ]] || die "--base $BASE has no kustomization.yaml"
    mkdir -p "$OUT"
    rel="$(realpath --relative-to="$(realpath "$OUT")" "$(realpath "$BASE")")"
    from="$(manifest_image_name)"
    [[ -n "$from" ]] || die "no image name in manifests/base/kustomization.yaml"
    {
        printf '# Written by %s on %s, commit %s.\n' "$PROG" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
            "$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
        printf '# Deploy: kubectl apply -k %s\n' "$OUT"
        printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
        printf 'resources:\n  - %s\n' "$rel"
        printf 'images:\n  - name: %s\n    newName: %s\n' "$from" "$name"
        if [[ -n "$digest" ]]; then
            printf '    # %s pinned by its digest\n    digest: %s\n' "${tag:+tag $tag,}" "$digest"
        else
            printf '    newTag: "%s"\n' "$tag"
        fi
    } >"$OUT/kustomization.yaml.tmp"
    mv "$OUT/kustomization.yaml.tmp" "$OUT/kustomization.yaml"
    say "wrote $OUT/kustomization.yaml: kubectl apply -k $OUT"
}

# --- commands ----------------------------------------------------------------------------

need_docker() {
    command -v "${DOCKER[0]}" >/dev/null || die "no docker client (${DOCKER[0]}): install docker, or pass --docker"
    "${DOCKER[@]}" version >/dev/null 2>&1 || die "'${DOCKER[*]} version' fails: is the docker daemon running and reachable?"
}

TAG=""
LOCAL_REF=""
build() {
    need_docker
    TAG="$(image_tag)"
    LOCAL_REF="node-doctor:$TAG"
    build_image "$LOCAL_REF" "$TAG"
    say "built $LOCAL_REF"
}

case "$CMD" in
    image)
        ((${#ARGS[@]} == 0)) || usage
        build
        printf '%s\n' "$LOCAL_REF"
        ;;
    push)
        ((${#ARGS[@]} == 1)) || { say "push needs the registry (e.g. registry.example.com/team)"; usage; }
        registry="${ARGS[0]%/}"
        build
        remote="$registry/node-doctor"
        "${DOCKER[@]}" tag "$LOCAL_REF" "$remote:$TAG"
        say "docker push $remote:$TAG"
        "${DOCKER[@]}" push "$remote:$TAG" >&2
        digest="$("${DOCKER[@]}" image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$remote:$TAG" |
            sed -n "s|^$remote@\(sha256:[0-9a-f]\{64\}\)\$|\1|p" | head -n 1)"
        [[ -n "$digest" ]] || die "docker push gave $remote:$TAG no digest"
        write_overlay "$remote" "$TAG" "$digest"
        printf '%s@%s\n' "$remote:$TAG" "$digest"
        ;;
    load)
        ((${#ARGS[@]} == 0)) || usage
        [[ -n "$LOAD_MODE" ]] || { say "load needs --kind, --ctr or --save"; usage; }
        build
        case "$LOAD_MODE" in
            kind)
                command -v kind >/dev/null || die "no kind on PATH"
                say "kind load docker-image $LOCAL_REF --name ${LOAD_ARG:-kind}"
                kind load docker-image "$LOCAL_REF" --name "${LOAD_ARG:-kind}" >&2
                ;;
            ctr)
                command -v "${CTR[0]}" >/dev/null || die "no ${CTR[0]} on PATH (k3s: --ctr-cmd 'k3s ctr')"
                addr=()
                [[ -n "$LOAD_ARG" ]] && addr=(--address "$LOAD_ARG")
                say "${CTR[*]} ${addr[*]} -n k8s.io images import (docker save $LOCAL_REF)"
                "${DOCKER[@]}" save "$LOCAL_REF" | "${CTR[@]}" "${addr[@]}" -n k8s.io images import - >&2
                ;;
            save)
                [[ -n "$LOAD_ARG" ]] || die "--save needs a file"
                "${DOCKER[@]}" save -o "$LOAD_ARG" "$LOCAL_REF"
                say "saved $LOCAL_REF to $LOAD_ARG: on each node, ctr -n k8s.io images import $LOAD_ARG"
                ;;
        esac
        # docker save names the image docker.io/library/node-doctor:<tag>, which is what the
        # kubelet asks the runtime for when a pod says node-doctor:<tag>.
        write_overlay "docker.io/library/node-doctor" "$TAG"
        printf 'docker.io/library/%s\n' "$LOCAL_REF"
        ;;
    overlay)
        ((${#ARGS[@]} >= 1 && ${#ARGS[@]} <= 2)) || usage
        ref="${ARGS[0]}"
        # name[:tag]; a registry host may carry a port (host:5000/name:tag).
        name="$ref"
        tag=""
        if [[ "${ref##*/}" == *:* ]]; then
            name="${ref%:*}"
            tag="${ref##*:}"
        fi
        [[ -n "$tag" || ${#ARGS[@]} -eq 2 ]] || die "overlay needs IMAGE:TAG or IMAGE DIGEST"
        write_overlay "$name" "$tag" "${ARGS[1]:-}"
        ;;
    "") usage ;;
    *) say "unknown command $CMD"; usage ;;
esac
