#!/usr/bin/env bash
# Builds the test binaries (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok, metrics-server,
# test-proxy, promtool, crane) from their official Go modules (hack/tools/*), once, into a cache folder named after their versions:
#   ${KARMADA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karmada-rs}/test-binaries/k8s-<v>_etcd-<v>_kwok-<v>/
# A binary already present in $KUBEBUILDER_ASSETS is used from there and not built.
# Prints the cache folder on stdout; progress goes to stderr.
#
# `hack/build-test-binaries.sh karmada` instead builds Karmada's own Go controller-manager, scheduler and
# webhook (the peer the benchmark measures against; `make karmada-binaries`), its scheduler-estimator (one
# per member in the accurate-estimator test), and its aggregated API server
# (serves cluster.karmada.io and clusters/proxy in the test environment's `aggregated_apiserver` option)
# from hack/tools/karmada into
#   .../test-binaries/karmada-<v>/
# and prints that folder. `hack/build-test-binaries.sh karmada-e2e` builds, into the same folder, Karmada's
# e2e suite, the Go karmadactl and karmada-agent, and the interpreter webhook example its
# resource-interpreter specs call, with that example's Workload CRD (`make karmada-e2e-binaries`).
# Plain `make test` never builds them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/test-binaries.env
source "$root/hack/test-binaries.env"

die() { echo "build-test-binaries: $*" >&2; exit 1; }

# The versions in test-binaries.env name the cache folder; the go.mod files are what gets built. Keep them equal.
check_pin() { # module-dir module version
  grep -qE "^(require |[[:space:]]+)$2 $3\$" "$root/hack/tools/$1/go.mod" ||
    die "hack/tools/$1/go.mod does not require $2 $3 (as hack/test-binaries.env says); update one to match the other"
}
check_pin kubernetes k8s.io/kubernetes "$KUBERNETES_VERSION"
check_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
check_pin kwok sigs.k8s.io/kwok "$KWOK_VERSION"
check_pin metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION"
check_pin promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION"
check_pin crane github.com/google/go-containerregistry "$CRANE_VERSION"
check_pin karmada github.com/karmada-io/karmada "$KARMADA_VERSION"
[ "${1:-}" = karmada-e2e ] && check_pin karmada-e2e github.com/karmada-io/karmada "$KARMADA_VERSION"

cache=${KARMADA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karmada-rs}
out="$cache/test-binaries/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
# Where an already-built binary may be found instead (Karmada's are never in an envtest folder).
assets=${KUBEBUILDER_ASSETS:-}
if [ "${1:-}" = karmada ] || [ "${1:-}" = karmada-e2e ]; then
  out="$cache/test-binaries/karmada-${KARMADA_VERSION}"
  assets=""
fi
mkdir -p "$out"

have() { [ -x "$out/$1" ] || { [ -n "$assets" ] && [ -x "$assets/$1" ]; }; }

# module-dir name=package... : builds, from hack/tools/<module-dir>, each named binary that is missing.
build() {
  local dir=$1; shift
  local names=() pkgs=() spec
  for spec in "$@"; do
    have "${spec%%=*}" && continue
    names+=("${spec%%=*}"); pkgs+=("${spec#*=}")
  done
  [ ${#pkgs[@]} -eq 0 ] && return 0
  command -v go >/dev/null 2>&1 ||
    die "Go is not installed, and it is needed to build ${names[*]}: install Go >= 1.26 (e.g. 'apt-get install golang-go' or from go.dev), or set KUBEBUILDER_ASSETS to a folder holding these binaries"
  local gov; gov=$(go env GOVERSION | sed 's/^go//')
  [ "$(printf '%s\n' 1.26 "$gov" | sort -V | head -n1)" = 1.26 ] ||
    die "Go $gov is too old to build ${names[*]}: Go >= 1.26 is required"
  local tmp; tmp=$(mktemp -d "$out/.build.XXXXXX")
  echo "build-test-binaries: building ${names[*]} from hack/tools/$dir (first time only; cached in $out)" >&2
  local start=$SECONDS i
  for i in "${!pkgs[@]}"; do
    (cd "$root/hack/tools/$dir" && go build -mod=readonly -trimpath -tags "${go_tags:-}" -ldflags "-s -w ${karmada_ldflags:-}" -o "$tmp/${names[$i]}" "${pkgs[$i]}") ||
      { rm -rf "$tmp"; die "building ${names[$i]} (${pkgs[$i]}) in hack/tools/$dir failed: see the Go errors above"; }
  done
  mv "$tmp"/* "$out/"
  rmdir "$tmp"
  echo "build-test-binaries: built ${names[*]} in $((SECONDS - start))s" >&2
}

if [ "${1:-}" = karmada-e2e ]; then
  # Karmada's e2e suite (a Ginkgo test binary), and the Go karmadactl and karmada-agent it and the
  # baseline run, from hack/tools/karmada-e2e (the same Karmada version, plus the suite's test deps).
  karmada_ldflags="-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"
  build karmada-e2e \
    karmadactl=github.com/karmada-io/karmada/cmd/karmadactl \
    karmada-agent=github.com/karmada-io/karmada/cmd/agent \
    karmada-interpreter-webhook-example=github.com/karmada-io/karmada/examples/customresourceinterpreter/webhook
  # The example's Workload CRD, which the suite's interpreter-webhook specs propagate (Karmada's e2e
  # setup installs it on the control plane and every member).
  if [ ! -f "$out/e2e-crds/workload.example.io_workloads.yaml" ]; then
    karmada_src=$(cd "$root/hack/tools/karmada-e2e" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada) ||
      die "cannot find the github.com/karmada-io/karmada module source (go list -m failed)"
    tmp=$(mktemp -d "$out/.crds.XXXXXX")
    cp "$karmada_src"/examples/customresourceinterpreter/apis/workload.example.io_workloads.yaml "$tmp/"
    chmod u+w "$tmp"/*
    rm -rf "$out/e2e-crds"
    mv "$tmp" "$out/e2e-crds"
  fi
  if ! have karmada-e2e-base.test; then
    echo "build-test-binaries: building Karmada's e2e suite from hack/tools/karmada-e2e (first time only)" >&2
    tmp=$(mktemp -d "$out/.build.XXXXXX")
    (cd "$root/hack/tools/karmada-e2e" &&
      go test -c -mod=readonly -trimpath -o "$tmp/karmada-e2e-base.test" github.com/karmada-io/karmada/test/e2e/suites/base) ||
      { rm -rf "$tmp"; die "building Karmada's e2e suite in hack/tools/karmada-e2e failed: see the Go errors above"; }
    mv "$tmp/karmada-e2e-base.test" "$out/"
    rmdir "$tmp"
  fi
  echo "$out"
  exit 0
fi

if [ "${1:-}" = karmada ]; then
  # The version stamp Karmada's own release build sets, so the binaries' logs and --version say what they are.
  karmada_ldflags="-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"
  build karmada \
    karmada-controller-manager=github.com/karmada-io/karmada/cmd/controller-manager \
    karmada-scheduler=github.com/karmada-io/karmada/cmd/scheduler \
    karmada-scheduler-estimator=github.com/karmada-io/karmada/cmd/scheduler-estimator \
    karmada-descheduler=github.com/karmada-io/karmada/cmd/descheduler \
    karmada-webhook=github.com/karmada-io/karmada/cmd/webhook \
    karmada-aggregated-apiserver=github.com/karmada-io/karmada/cmd/aggregated-apiserver
  # Karmada's own CRDs, as its chart installs them: the peer's harness adds those our crds/ lack (the
  # Go controllers and webhook watch some of them, e.g. config.karmada.io's interpreter customizations).
  if [ ! -d "$out/crds" ]; then
    karmada_src=$(cd "$root/hack/tools/karmada" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada) ||
      die "cannot find the github.com/karmada-io/karmada module source (go list -m failed)"
    tmp=$(mktemp -d "$out/.crds.XXXXXX")
    cp "$karmada_src"/charts/karmada/_crds/bases/*/*.yaml "$tmp/"
    chmod u+w "$tmp"/*
    mv "$tmp" "$out/crds"
  fi
  echo "$out"
  exit 0
fi

build kubernetes \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
build etcd etcd=.
build kwok kwok=sigs.k8s.io/kwok/cmd/kwok
build metrics-server metrics-server=sigs.k8s.io/metrics-server/cmd/metrics-server
# promtool checks and unit-tests the chart's alerting rules (tests/tests/integration/chart_monitoring.rs). Without
# Prometheus's service-discovery plugins (cloud SDKs), which rule checks and tests never use: a third of
# the build.
go_tags=remove_all_sd build promtool promtool=github.com/prometheus/prometheus/cmd/promtool
# crane packs the image archive without a container daemon (hack/image.sh, `make image-archive`,
# tests/tests/integration/image.rs).
build crane crane=github.com/google/go-containerregistry/cmd/crane
# The HTTP CONNECT / SOCKS5 proxy members are reached through in tests/tests/integration/member_proxy.rs.
build test-proxy test-proxy=.

# kwok needs Stage configs to drive nodes and pods (kwokctl normally supplies them). Take the ones the
# pinned kwok module ships: nodes become Ready and heartbeat through leases; pods become Ready, complete, and
# go away on deletion; the chaos stages only act on pods annotated to fail.
if [ ! -d "$out/kwok-stages" ] && ! { [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -d "$KUBEBUILDER_ASSETS/kwok-stages" ]; }; then
  kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) ||
    die "cannot find the sigs.k8s.io/kwok module source (go list -m failed)"
  tmp=$(mktemp -d "$out/.stages.XXXXXX")
  cp "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml \
     "$kwok_dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
     "$kwok_dir"/kustomize/stage/pod/fast/pod-ready.yaml \
     "$kwok_dir"/kustomize/stage/pod/fast/pod-complete.yaml \
     "$kwok_dir"/kustomize/stage/pod/fast/pod-delete.yaml \
     "$kwok_dir"/kustomize/stage/pod/chaos/pod-container-running-failed.yaml "$tmp/"
  chmod u+w "$tmp"/*
  mv "$tmp" "$out/kwok-stages"
fi

# Module sources some tests read rather than build: Karmada's third-party customizations and their
# testdata (the interpreter's proof test, karmadactl interpret's), and gopkg.in/yaml.v3 (karmadactl's YAML
# output is checked against it). Downloaded once into the Go module cache; a no-op when present.
if [ "${1:-}" != karmada ]; then
  command -v go >/dev/null 2>&1 || die "Go is not installed, and it is needed to fetch the Karmada module the tests read"
  (cd "$root/hack/tools/karmada" && go mod download github.com/karmada-io/karmada) ||
    die "cannot download github.com/karmada-io/karmada $KARMADA_VERSION (go mod download failed in hack/tools/karmada)"
  (cd "$root/hack/tools/yaml-v3-check" && go mod download) ||
    die "cannot download hack/tools/yaml-v3-check's modules (go mod download failed)"
fi

# Cluster API's Cluster CRD, for the Cluster API detector's test (a management cluster serving
# cluster.x-k8s.io/v1beta1 Clusters), from the sigs.k8s.io/cluster-api module Karmada pins.
if [ "${1:-}" != karmada ] && [ ! -d "$out/cluster-api-crds" ] &&
  ! { [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -d "$KUBEBUILDER_ASSETS/cluster-api-crds" ]; }; then
  command -v go >/dev/null 2>&1 || die "Go is not installed, and it is needed to fetch Cluster API's CRDs"
  capi_dir=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cluster-api@$CLUSTER_API_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') ||
    die "cannot download the sigs.k8s.io/cluster-api@$CLUSTER_API_VERSION module (go mod download failed)"
  [ -f "$capi_dir/config/crd/bases/cluster.x-k8s.io_clusters.yaml" ] ||
    die "sigs.k8s.io/cluster-api@$CLUSTER_API_VERSION has no config/crd/bases/cluster.x-k8s.io_clusters.yaml"
  tmp=$(mktemp -d "$out/.capi.XXXXXX")
  cp "$capi_dir/config/crd/bases/cluster.x-k8s.io_clusters.yaml" "$tmp/"
  mv "$tmp" "$out/cluster-api-crds"
fi

# kwok's metrics emulation, for environments that run metrics-server: the Metric serving the kubelet's
# /metrics/resource endpoint per node, and the ClusterResourceUsage that reads each pod's usage from its
# kwok.x-k8s.io/usage-cpu and usage-memory annotations.
if [ ! -d "$out/kwok-metrics" ] && ! { [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -d "$KUBEBUILDER_ASSETS/kwok-metrics" ]; }; then
  kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) ||
    die "cannot find the sigs.k8s.io/kwok module source (go list -m failed)"
  tmp=$(mktemp -d "$out/.metrics.XXXXXX")
  cp "$kwok_dir"/kustomize/metrics/resource/metrics-resource.yaml \
     "$kwok_dir"/kustomize/metrics/usage/usage-from-annotation.yaml "$tmp/"
  chmod u+w "$tmp"/*
  mv "$tmp" "$out/kwok-metrics"
fi

echo "$out"
