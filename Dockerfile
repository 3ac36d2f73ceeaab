# node-doctor container image.
#   docker build -t node-doctor:dev .    (scripts/deploy.sh --dockerfile tags it <version>-g<commit>)
# Stage 1 builds the release binary with the Rust toolchain, statically linked with glibc
# (scripts/release-build.sh); stage 2 is distroless: no shell, no package manager (its glibc
# serves the name-service modules a static glibc may load to resolve a host name).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
# --locked: build exactly the dependency versions in Cargo.lock.
# scripts/release-build.sh: the release profile, statically linked (docs/cost.md, "Memory").
RUN install -D -m 0755 "$(scripts/release-build.sh --locked)" /out/node-doctor

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/node-doctor /usr/local/bin/node-doctor
# The image defaults to the distroless non-root user (65532), so running it anywhere by hand
# grants nothing. The DaemonSet (manifests/base/daemonset.yaml) deliberately runs it as
# uid 0 with all capabilities dropped except SYS_PTRACE, DAC_READ_SEARCH and SYSLOG: the
# kernel only lets root holding those read other processes' /proc/<pid>/{io,fd,root,ns}
# and /dev/kmsg (the ptrace access check compares uids as well as capabilities). As non-root
# the agent still starts and reports those collectors as unavailable, with the reason.
USER 65532:65532
EXPOSE 9808
# Kubernetes ignores HEALTHCHECK and uses the DaemonSet's probes on /healthz and /readyz;
# distroless has no shell or curl to run one with anyway.
HEALTHCHECK NONE
ENTRYPOINT ["/usr/local/bin/node-doctor"]
CMD ["serve", "--listen=0.0.0.0:9808", "--host-root=/host"]
