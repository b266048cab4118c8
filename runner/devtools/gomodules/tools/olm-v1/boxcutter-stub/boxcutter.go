// Package boxcutter is a stand-in: see go.mod.
package boxcutter

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
)

type (
	Phase                   = types.Phase
	RevisionBuilder         = types.Revision
	RevisionReconcileOption = types.RevisionReconcileOption
	WithCollisionProtection = types.WithCollisionProtection
	WithSiblingOwners       = types.WithSiblingOwners
)

const ProgressProbeType = types.ProgressProbeType

var (
	WithProbe                         = types.WithProbe
	WithAggregatePhaseReconcileErrors = types.WithAggregatePhaseReconcileErrors
	WithObjectReconcileOptions        = types.WithObjectReconcileOptions
)

type phase struct {
	name    string
	objects []client.Object
}

func (p phase) GetName() string             { return p.name }
func (p phase) GetObjects() []client.Object { return p.objects }

// NewPhase groups objects under a name.
func NewPhase(name string, objects []client.Object) Phase {
	return phase{name: name, objects: objects}
}

type revision struct {
	name   string
	number int64
	phases []Phase
}

func (r revision) GetName() string          { return r.name }
func (r revision) GetRevisionNumber() int64 { return r.number }
func (r revision) GetPhases() []Phase       { return r.phases }

// NewRevisionWithOwner records the phases of a revision; the owner and its strategy
// are not used by this stand-in.
func NewRevisionWithOwner(
	name string, number int64, phases []Phase, _ client.Object, _ any,
) RevisionBuilder {
	return revision{name: name, number: number, phases: phases}
}
