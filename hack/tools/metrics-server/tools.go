//go:build tools

// Builds the metrics-server test binary (serves metrics.k8s.io from kubelets' resource metrics; kwok's
// emulated kubelets in the tests) from the official sigs.k8s.io/metrics-server module.
// Not part of the product: see hack/build-test-binaries.sh.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
