// Package managedcache is a stand-in for boxcutter's tracking cache. operator-controller
// creates one at start whatever its feature gates, and its Helm applier asks it to
// watch the objects of each installed bundle for drift. This one runs until stopped and
// watches nothing: Watch returns an error, which the Helm applier logs ("drift detection
// disabled") and otherwise ignores, so an object changed by hand is put back at the
// ClusterExtension's next reconcile instead of at once.
package managedcache

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

var errNoWatches = errors.New("object watches are not available in this build")

// TrackingCache watches objects on behalf of their users and reads them back.
type TrackingCache interface {
	client.Reader
	Start(ctx context.Context) error
	Source(h handler.EventHandler, predicates ...predicate.Predicate) source.Source
	Watch(ctx context.Context, user client.Object, gvks sets.Set[schema.GroupVersionKind]) error
	Free(ctx context.Context, user client.Object) error
}

// NewTrackingCache returns a cache that watches nothing.
func NewTrackingCache(_ logr.Logger, _ *rest.Config, _ cache.Options) (TrackingCache, error) {
	return idleCache{}, nil
}

type idleCache struct{}

func (idleCache) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (idleCache) Source(handler.EventHandler, ...predicate.Predicate) source.Source {
	return idleSource{}
}

func (idleCache) Watch(context.Context, client.Object, sets.Set[schema.GroupVersionKind]) error {
	return errNoWatches
}

func (idleCache) Free(context.Context, client.Object) error { return nil }

func (idleCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errNoWatches
}

func (idleCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errNoWatches
}

// idleSource never enqueues anything.
type idleSource struct{}

func (idleSource) Start(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return nil
}
