//go:build tools

// Package tools pins the Karmada commands this module builds.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
	_ "github.com/karmada-io/karmada/cmd/webhook"
)
