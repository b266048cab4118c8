// Package machinery is a stand-in: its engines fail with types.ErrUnavailable.
package machinery

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
)

// Action is what the object engine did to an object.
type Action string

const ActionCollision Action = "Collision"

type ObjectResult interface {
	Action() Action
	String() string
	ProbeResults() map[string]types.ProbeResult
	Object() client.Object
}

type PhaseResult interface {
	GetValidationError() error
	GetObjects() []ObjectResult
	IsComplete() bool
}

type RevisionResult interface {
	String() string
	GetValidationError() error
	GetPhases() []PhaseResult
	InTransition() bool
	IsComplete() bool
}

type RevisionTeardownResult interface {
	IsComplete() bool
}

type Comparator struct{}

// NewComparator takes a discovery client, a scheme and a field owner.
func NewComparator(_ any, _ *runtime.Scheme, _ string) *Comparator { return &Comparator{} }

type ObjectEngine struct{}

// NewObjectEngine takes a scheme, a cache, a writer, a comparator, the field owner,
// the system prefix, the managed-by value and a reader.
func NewObjectEngine(
	_ *runtime.Scheme, _ any, _ any, _ *Comparator, _, _, _ string, _ any,
) *ObjectEngine {
	return &ObjectEngine{}
}

type PhaseEngine struct{}

// NewPhaseEngine takes an object engine and a phase validator.
func NewPhaseEngine(_ *ObjectEngine, _ any) *PhaseEngine { return &PhaseEngine{} }

type RevisionEngine struct{}

// NewRevisionEngine takes a phase engine, a revision validator and a writer.
func NewRevisionEngine(_ *PhaseEngine, _ any, _ any) *RevisionEngine { return &RevisionEngine{} }

func (*RevisionEngine) Reconcile(
	context.Context, types.Revision, ...types.RevisionReconcileOption,
) (RevisionResult, error) {
	return nil, types.ErrUnavailable
}

func (*RevisionEngine) Teardown(
	context.Context, types.Revision, ...types.RevisionTeardownOption,
) (RevisionTeardownResult, error) {
	return nil, types.ErrUnavailable
}
