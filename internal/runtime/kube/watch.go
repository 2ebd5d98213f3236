package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"bex.co/bex/internal/runtime"
)

var _ runtime.Watcher = (*Driver)(nil)

// watchErrorGrace is how long after a failed list or watch of the
// Deployments the driver says it does not see its apps' changes: they
// may have been missed meanwhile.
const watchErrorGrace = time.Minute

// deploymentWatch is one call of Watch: an informer on the Deployments
// the driver made, in every namespace.
type deploymentWatch struct {
	informer cache.SharedIndexInformer
	done     atomic.Bool

	mu      sync.Mutex
	erredAt time.Time
}

// seeing reports whether the watch runs, has listed every Deployment and
// has not failed lately.
func (w *deploymentWatch) seeing() bool {
	if w.done.Load() || !w.informer.HasSynced() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.erredAt) >= watchErrorGrace
}

// Watch implements runtime.Watcher: a watch of the Deployments the driver
// made (label app.kubernetes.io/managed-by=bex, with bex.co/app), in
// every namespace, calls changed with the tenant and app of each one
// added, changed (its status included: a rollout's progress, an instance
// that stops being available) or deleted. The driver's identity needs
// list and watch of Deployments in every namespace. A Status is
// Deployments' only (statusFrom), so what it reports changes only with
// them.
func (d *Driver) Watch(ctx context.Context, changed func(tenant, app string)) {
	sel := LabelManagedBy + "=" + managedBy + "," + LabelApp
	f := informers.NewSharedInformerFactoryWithOptions(d.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = sel
	}))
	w := &deploymentWatch{informer: f.Apps().V1().Deployments().Informer()}
	// Only the labels and the status are read: the rest of each
	// Deployment (its pod template above all) need not be kept.
	_ = w.informer.SetTransform(func(obj any) (any, error) {
		if dep, ok := obj.(*appsv1.Deployment); ok {
			dep.ManagedFields = nil
			dep.Spec.Template = corev1.PodTemplateSpec{}
		}
		return obj, nil
	})
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		w.erredAt = time.Now()
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	tell := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if dep, ok := obj.(*appsv1.Deployment); ok && dep.Labels[LabelTenant] != "" && dep.Labels[LabelApp] != "" {
			changed(dep.Labels[LabelTenant], dep.Labels[LabelApp])
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tell,
		UpdateFunc: func(_, obj any) { tell(obj) },
		DeleteFunc: tell,
	})
	d.watchMu.Lock()
	d.watches = append(d.watches, w)
	d.watchMu.Unlock()
	go func() {
		w.informer.RunWithContext(ctx)
		w.done.Store(true)
		d.watchMu.Lock()
		defer d.watchMu.Unlock()
		for i, o := range d.watches {
			if o == w {
				d.watches = append(d.watches[:i], d.watches[i+1:]...)
				break
			}
		}
	}()
}

// Watches implements runtime.Watcher: the changes of every app the driver
// runs are seen while a Watch runs, has listed the Deployments, and has
// not failed within the last minute.
func (d *Driver) Watches(string, string) bool {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	for _, w := range d.watches {
		if w.seeing() {
			return true
		}
	}
	return false
}
