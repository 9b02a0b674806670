//go:build tools

// Package tools pins the promtool command this module builds (the chart's alerting rules are checked
// and unit-tested with it). Not part of the product: see hack/build-test-binaries.sh.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
