// Package probing is a stand-in: every probe reports Unknown.
package probing

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
)

type Prober = types.Prober

// And is a list of probes that must all pass.
type And []Prober

func (And) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type ConditionProbe struct {
	Type   string
	Status string
}

func (*ConditionProbe) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type FieldsEqualProbe struct {
	FieldA string
	FieldB string
}

func (*FieldsEqualProbe) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type FieldValueProbe struct {
	FieldPath string
	Value     string
}

func (*FieldValueProbe) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type GroupKindSelector struct {
	GroupKind schema.GroupKind
	Prober    Prober
}

func (*GroupKindSelector) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type LabelSelector struct {
	Selector labels.Selector
	Prober   Prober
}

func (*LabelSelector) Probe(client.Object) types.ProbeResult { return types.Unavailable() }

type ObservedGenerationProbe struct {
	Prober Prober
}

func (*ObservedGenerationProbe) Probe(client.Object) types.ProbeResult {
	return types.Unavailable()
}
