//go:build tools

// Package tools pins the commands this module builds: OLM v1's operator-controller and
// catalogd.
package tools

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
