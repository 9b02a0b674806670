//go:build tools

// Package tools pins the Karmada commands this module builds: the controller-manager, scheduler and
// webhook the benchmark runs as a peer, and the aggregated API server (cluster.karmada.io), the
// scheduler-estimator and the descheduler some tests run.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/aggregated-apiserver"
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/descheduler"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
	_ "github.com/karmada-io/karmada/cmd/scheduler-estimator"
	_ "github.com/karmada-io/karmada/cmd/webhook"
)
