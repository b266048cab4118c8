//go:build tools

// Package tools pins the commands this module builds (the operators and the helpers of
// OLM's images) and the module that carries
// OLM's CustomResourceDefinitions (github.com/operator-framework/api/crds).
package tools

import (
	_ "github.com/operator-framework/api/crds"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
)
