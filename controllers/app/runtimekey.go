package app

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"bex.co/bex/controllers/privatecache"
	"bex.co/bex/internal/runtime/placed"
)

// runtimeKeySource returns the source that brings back the Apps placed on
// a cluster as soon as its key of RuntimeSecret is written or changes
// (runtimeKeysChanged), and adds to mgr the cache it is read from. That
// cache is the reconciler's own, not the manager's (privatecache): it
// holds RuntimeSecret alone (a field selector on its name, in its
// namespace), so that the manager's cache holds no Secret's data.
func (r *Reconciler) runtimeKeySource(mgr ctrl.Manager) (source.Source, error) {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(ctx context.Context, clusters []string, q queue) {
		for _, c := range clusters {
			for _, req := range r.appsOn(ctx, c) {
				q.Add(req)
			}
		}
	}
	src, err := privatecache.Kind(mgr, privatecache.Selector{
		Namespace: r.RuntimeSecret.Namespace,
		Fields:    fields.OneTermEqualSelector("metadata.name", r.RuntimeSecret.Name),
	}, &corev1.Secret{}, handler.TypedFuncs[*corev1.Secret, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*corev1.Secret], q queue) {
			enqueue(ctx, runtimeKeysChanged(nil, e.Object), q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Secret], q queue) {
			enqueue(ctx, runtimeKeysChanged(e.ObjectOld, e.ObjectNew), q)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching the runtime secret: %w", err)
	}
	return src, nil
}

// runtimeKeysChanged returns the names of the clusters whose key of the
// runtime Secret (NAMESPACE.NAME, placed.RuntimeKubeconfigKey) now holds a
// kubeconfig that old (nil: none) did not hold: the key is new, or was
// renewed. A key removed brings nothing back: its cluster is gone.
func runtimeKeysChanged(old, now *corev1.Secret) []string {
	var clusters []string
	for key, value := range now.Data {
		_, name, ok := placed.ParseRuntimeKubeconfigKey(key)
		if !ok || len(value) == 0 {
			continue
		}
		if old != nil && bytes.Equal(old.Data[key], value) {
			continue
		}
		clusters = append(clusters, name)
	}
	return clusters
}
