//go:build tools

// Package tools pins what `hack/build-test-binaries.sh karmada-e2e` builds: Karmada's karmadactl,
// agent and interpreter webhook example, and the packages its e2e suite (test/e2e/suites/base, built with `go test -c`) imports, so that
// `go mod tidy` keeps the suite's test dependencies.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/agent"
	_ "github.com/karmada-io/karmada/cmd/karmadactl"
	_ "github.com/karmada-io/karmada/examples/customresourceinterpreter/webhook"
	_ "github.com/karmada-io/karmada/test/e2e/framework"
	_ "github.com/karmada-io/karmada/test/helper"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "sigs.k8s.io/kind/pkg/cluster"
)
