//go:build tools

// Package tools pins the command this module builds.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
