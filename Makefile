# karmada-rs — run `make help` for the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every binary (debug).
	$(CARGO) build --workspace --bins

.PHONY: test-binaries
test-binaries: ## Build the test binaries (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok) from their Go modules, once; cached.
	hack/build-test-binaries.sh >/dev/null

.PHONY: test
test: test-binaries ## Run every test in the workspace against real API servers (builds what is missing first).
	$(CARGO) test --workspace --no-fail-fast

.PHONY: lint
lint: ## cargo fmt --check and clippy with warnings denied.
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

.PHONY: crds
crds: ## Regenerate crds/ from the Rust API types.
	$(CARGO) run -q -p crdgen

.PHONY: env-up
env-up: test-binaries ## Bring up a host + 2 members (first one full) by hand; Ctrl-C stops them.
	$(CARGO) run -q -p testenv -- up --members 2 --full --install-crds
