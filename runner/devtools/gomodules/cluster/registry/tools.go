//go:build tools

// Package tools pins the command this module builds.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
