//go:build tools

// Package tools pins the crane command this module builds (hack/image.sh packs the release binaries
// into an image archive with it, without a container daemon). Not part of the product: see
// hack/build-test-binaries.sh.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
)
