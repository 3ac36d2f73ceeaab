#!/usr/bin/env bash
# The Kubernetes reporter's scale simulation (docs/kubernetes.md "At scale"): N simulated
# nodes' reporters against the stand-in API server for a simulated hour, flapping and steady
# findings; prints API writes per second per 1,000 nodes beside node-problem-detector's
# steady rate. Usage: scripts/bench-kube.sh [NODES] [SIMULATED_SECONDS]   (default 1000 3600)
set -euo pipefail
cd "$(dirname "$0")/.."
ND_SIM_NODES="${1:-1000}" ND_SIM_SECONDS="${2:-3600}" \
    cargo test --release -p node-doctor --bin node-doctor -- \
    --ignored --exact kube::tests::scale_simulation --nocapture
