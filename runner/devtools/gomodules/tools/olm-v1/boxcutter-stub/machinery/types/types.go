// Package types declares the revision, phase, option and probe types that
// operator-controller passes between the boxcutter packages.
package types

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrUnavailable is what every engine of this stand-in returns.
var ErrUnavailable = errors.New(
	"boxcutter runtime not available in this build (the BoxcutterRuntime feature gate must stay off)",
)

// Phase is a named group of objects.
type Phase interface {
	GetName() string
	GetObjects() []client.Object
}

// Revision is a numbered list of phases.
type Revision interface {
	GetName() string
	GetRevisionNumber() int64
	GetPhases() []Phase
}

// RevisionReconcileOption, RevisionTeardownOption and ObjectReconcileOption are
// accepted and ignored.
type (
	RevisionReconcileOption interface{}
	RevisionTeardownOption  interface{}
	ObjectReconcileOption   interface{}
)

// WithCollisionProtection names how an object already on the cluster is treated.
type WithCollisionProtection string

// WithSiblingOwners lists the other revisions of the same owner.
type WithSiblingOwners []client.Object

type objectOptions struct {
	object  client.Object
	options []ObjectReconcileOption
}

type probeOption struct {
	kind  string
	probe Prober
}

type aggregateErrors struct{}

// WithObjectReconcileOptions applies options to one object only.
func WithObjectReconcileOptions(obj client.Object, opts ...ObjectReconcileOption) RevisionReconcileOption {
	return objectOptions{object: obj, options: opts}
}

// WithProbe registers a probe of the given kind.
func WithProbe(kind string, probe Prober) RevisionReconcileOption {
	return probeOption{kind: kind, probe: probe}
}

// WithAggregatePhaseReconcileErrors collects the errors of a phase's objects.
func WithAggregatePhaseReconcileErrors() RevisionReconcileOption {
	return aggregateErrors{}
}

// ProgressProbeType is the kind of probe that gates phase progression.
const ProgressProbeType = "progress"

// ProbeStatus is the outcome of a probe.
type ProbeStatus string

const (
	ProbeStatusTrue    ProbeStatus = "True"
	ProbeStatusFalse   ProbeStatus = "False"
	ProbeStatusUnknown ProbeStatus = "Unknown"
)

// ProbeResult is a probe's status with its messages.
type ProbeResult struct {
	Status   ProbeStatus
	Messages []string
}

// Prober evaluates an object.
type Prober interface {
	Probe(obj client.Object) ProbeResult
}

// Unavailable is the result of every probe of this stand-in.
func Unavailable() ProbeResult {
	return ProbeResult{Status: ProbeStatusUnknown, Messages: []string{ErrUnavailable.Error()}}
}
