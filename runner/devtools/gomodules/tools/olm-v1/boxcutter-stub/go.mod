// A stand-in for pkg.package-operator.run/boxcutter, which the Go module proxy here does
// not serve. operator-controller uses boxcutter for two things: the BoxcutterRuntime
// feature gate (alpha, off by default and never turned on by ansible-operator), and the
// tracking cache behind its Helm applier's drift-detection watches. This module declares
// only what operator-controller v1.11.0 refers to; every engine call fails with
// ErrUnavailable and the tracking cache watches nothing (see docs/olm.md).
module pkg.package-operator.run/boxcutter

go 1.24

require (
	github.com/go-logr/logr v1.4.3
	k8s.io/apimachinery v0.36.2
	k8s.io/client-go v0.36.2
	sigs.k8s.io/controller-runtime v0.24.1
)
