// Package ownerhandling is a stand-in.
package ownerhandling

import "k8s.io/apimachinery/pkg/runtime"

// Native would set native owner references.
type Native struct{ scheme *runtime.Scheme }

func NewNative(scheme *runtime.Scheme) *Native { return &Native{scheme: scheme} }
