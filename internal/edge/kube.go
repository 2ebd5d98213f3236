package edge

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime/kube"
)

// WatchRoutes keeps table's Routes equal to the admitted Routes in c (the
// Route controller decides admission: one Route per hostname across
// tenants). A Route's tenant is its namespace. It returns once the first
// full set is in the table; updates follow until ctx is done. c must be
// started by the caller.
func WatchRoutes(ctx context.Context, c cache.Cache, table *Table, log logr.Logger) error {
	return watchKeyed(ctx, c, &platformv1alpha1.Route{}, "Routes", func(o client.Object) (RouteEntry, bool) {
		r, ok := o.(*platformv1alpha1.Route)
		if !ok {
			return RouteEntry{}, false
		}
		return routeEntry(r)
	}, table.SetRoutes, log)
}

// watchKeyed keeps, for each object of obj's kind in c, what value makes
// of it (nothing when ok is false), and calls publish with all of them once
// the informer's first list is in, and again after each change to one of
// them, until ctx is done: changes that come while publish runs, or
// within publishGap of it, make one more call, not one each. An event that changes no object's value (a
// status the edge does not read) costs a comparison: with ten thousand
// Routes or Apps whose statuses the controllers write, the edge neither
// lists nor copies them per event. It returns once the first publish has
// run. kind names the objects in errors ("Routes") and in log's lines.
func watchKeyed[V comparable](ctx context.Context, c cache.Cache, obj client.Object, kind string,
	value func(client.Object) (V, bool), publish func([]V), log logr.Logger) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("watching %s: %w", kind, err)
	}
	var mu sync.Mutex
	values := map[types.NamespacedName]V{}
	kick := make(chan struct{}, 1)
	update := func(o any, deleted bool) {
		o, deleted = unwrap(o, deleted)
		obj, ok := o.(client.Object)
		if !ok {
			return
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		v, keep := value(obj)
		keep = keep && !deleted
		mu.Lock()
		old, had := values[key]
		changed := had != keep || (keep && old != v)
		if keep {
			values[key] = v
		} else {
			delete(values, key)
		}
		mu.Unlock()
		if changed {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { update(o, false) },
		UpdateFunc: func(_, o any) { update(o, false) },
		DeleteFunc: func(o any) { update(o, true) },
	})
	if err != nil {
		return fmt.Errorf("watching %s: %w", kind, err)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("watching %s: the cache did not sync: %w", kind, ctx.Err())
	}
	publishAll := func() {
		mu.Lock()
		all := make([]V, 0, len(values))
		for _, v := range values {
			all = append(all, v)
		}
		mu.Unlock()
		publish(all)
		log.V(1).Info("Table updated", "kind", kind, "objects", len(all))
	}
	select {
	case <-kick: // the first list's
	default:
	}
	publishAll()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				publishAll()
			}
			// Changes in the next moment make one more publish.
			select {
			case <-ctx.Done():
				return
			case <-time.After(publishGap):
			}
		}
	}()
	return nil
}

// publishGap is the least time between two publishes of watchKeyed: a
// table of ten thousand Routes takes milliseconds to build, and while the
// Route controller admits them one after the other each admission would
// rebuild it (4,084 times, 11 s of CPU, for 10,000 Routes). A change waits
// for it at most.
const publishGap = 100 * time.Millisecond

// RouteEntries returns the table entries of the admitted Routes among
// routes whose tenant proved it owns the hostname (DomainVerified): the
// edge routes and obtains certificates for those names only.
func RouteEntries(routes []platformv1alpha1.Route) []RouteEntry {
	var out []RouteEntry
	for i := range routes {
		if e, ok := routeEntry(&routes[i]); ok {
			out = append(out, e)
		}
	}
	return out
}

// routeEntry returns r's table entry, when r is admitted and its tenant
// proved its hostname.
func routeEntry(r *platformv1alpha1.Route) (RouteEntry, bool) {
	if r.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteAdmittedCondition) ||
		!meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition) {
		return RouteEntry{}, false
	}
	return RouteEntry{
		Hostname: r.Spec.Hostname, PathPrefix: r.Spec.PathPrefix,
		Tenant: r.Namespace, App: r.Spec.AppRef.Name,
		PlainHTTP: r.Spec.TLS.Mode == platformv1alpha1.TLSModeNone,
	}, true
}

// EndpointSliceApps is the routing table of a Kubernetes workload cluster:
// an app's upstreams are the ready endpoints of the EndpointSlices of its
// Service (named after the app, in the tenant's namespace), as ingress
// controllers read them, so that the edge stops sending to a pod the moment
// it is not ready and a cut-over follows readiness.
//
// Only the Services the kube runtime made for apps count, in the
// namespaces it prepared for tenants (kube.AppServiceSelector,
// kube.TenantNamespaceSelector): the kubernetes Service of default, the
// Services of kube-system or of the platform's own namespace, or a Service
// a tenant's namespace holds beside its apps' are never routed to and never
// get a certificate. The caches it reads should be made with
// SliceCacheOptions, so that they do not even hold other objects; it checks
// the labels of every object again all the same.
//
// An event changes the entries of its own app (of its namespace's apps for
// a Namespace) and no other: with ten thousand apps, the first list of
// their slices when the edge starts must not copy the table once per
// slice (that took 11 s of CPU).
type EndpointSliceApps struct {
	mu       sync.Mutex
	tenants  map[string]bool // tenant namespaces
	services map[string]bool // namespace/service of apps' Services
	// slices: namespace → service → slice name → slice.
	slices map[string]map[string]map[string]*discoveryv1.EndpointSlice
	// table: namespace/service → ready addresses ([]string, never
	// modified once stored); read without a lock.
	table sync.Map
}

var _ Apps = (*EndpointSliceApps)(nil)

// sliceSelector selects the EndpointSlices of apps' Services: those of the
// kube runtime's Services (the EndpointSlice controller copies a Service's
// labels onto its slices) that name their Service.
func sliceSelector() labels.Selector {
	svc, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	if err != nil {
		panic(err) // constant arguments
	}
	return kube.AppServiceSelector().Add(*svc)
}

// SliceCacheOptions returns the options of the cache WatchEndpointSlices
// reads: its Namespaces, Services and EndpointSlices are the tenants' and
// their apps' only, selected by label on the API server.
func SliceCacheOptions(scheme *runtime.Scheme) cache.Options {
	return cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Namespace{}:          {Label: kube.TenantNamespaceSelector()},
		&corev1.Service{}:            {Label: kube.AppServiceSelector()},
		&discoveryv1.EndpointSlice{}: {Label: sliceSelector()},
	}}
}

// WatchEndpointSlices returns an EndpointSliceApps fed from c's Namespace,
// Service and EndpointSlice informers, synced once before it returns. c
// must be started by the caller.
func WatchEndpointSlices(ctx context.Context, c cache.Cache) (*EndpointSliceApps, error) {
	a := newEndpointSliceApps()
	for _, w := range []struct {
		obj    client.Object
		what   string
		update func(o any, deleted bool)
	}{
		{&corev1.Namespace{}, "Namespaces", a.updateNamespace},
		{&corev1.Service{}, "Services", a.updateService},
		{&discoveryv1.EndpointSlice{}, "EndpointSlices", a.updateSlice},
	} {
		inf, err := c.GetInformer(ctx, w.obj)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", w.what, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.update(o, false) },
			UpdateFunc: func(_, o any) { w.update(o, false) },
			DeleteFunc: func(o any) { w.update(o, true) },
		}); err != nil {
			return nil, fmt.Errorf("watching %s: %w", w.what, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watching EndpointSlices: the cache did not sync: %w", ctx.Err())
	}
	return a, nil
}

func newEndpointSliceApps() *EndpointSliceApps {
	return &EndpointSliceApps{
		tenants:  map[string]bool{},
		services: map[string]bool{},
		slices:   map[string]map[string]map[string]*discoveryv1.EndpointSlice{},
	}
}

// unwrap returns the object of an informer event, and whether it is gone.
func unwrap(o any, deleted bool) (any, bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj, true
	}
	return o, deleted
}

func (a *EndpointSliceApps) updateNamespace(o any, deleted bool) {
	o, deleted = unwrap(o, deleted)
	ns, ok := o.(*corev1.Namespace)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if deleted || !kube.TenantNamespaceSelector().Matches(labels.Set(ns.Labels)) {
		delete(a.tenants, ns.Name)
	} else {
		a.tenants[ns.Name] = true
	}
	for svc := range a.slices[ns.Name] {
		a.publish(ns.Name, svc)
	}
}

func (a *EndpointSliceApps) updateService(o any, deleted bool) {
	o, deleted = unwrap(o, deleted)
	svc, ok := o.(*corev1.Service)
	if !ok {
		return
	}
	key := svc.Namespace + "/" + svc.Name
	a.mu.Lock()
	defer a.mu.Unlock()
	// The runtime names an app's Service after the app.
	if deleted || !kube.AppServiceSelector().Matches(labels.Set(svc.Labels)) || svc.Labels[kube.LabelApp] != svc.Name {
		delete(a.services, key)
	} else {
		a.services[key] = true
	}
	a.publish(svc.Namespace, svc.Name)
}

func (a *EndpointSliceApps) updateSlice(o any, deleted bool) {
	o, deleted = unwrap(o, deleted)
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	byService := a.slices[s.Namespace]
	if deleted || !sliceSelector().Matches(labels.Set(s.Labels)) {
		delete(byService[svc], s.Name)
		if len(byService[svc]) == 0 {
			delete(byService, svc)
		}
		if len(byService) == 0 {
			delete(a.slices, s.Namespace)
		}
	} else {
		if byService == nil {
			byService = map[string]map[string]*discoveryv1.EndpointSlice{}
			a.slices[s.Namespace] = byService
		}
		if byService[svc] == nil {
			byService[svc] = map[string]*discoveryv1.EndpointSlice{}
		}
		byService[svc][s.Name] = s
	}
	a.publish(s.Namespace, svc)
}

// publish recomputes the table's entry of the namespace's service: it
// exists when the namespace is a tenant's, the Service an app's, and it has
// slices. a.mu must be held.
func (a *EndpointSliceApps) publish(ns, svc string) {
	key := ns + "/" + svc
	if ss, ok := a.slices[ns][svc]; ok && a.tenants[ns] && a.services[key] {
		a.table.Store(key, readyAddresses(ss))
	} else {
		a.table.Delete(key)
	}
}

// readyAddresses returns host:port of every ready endpoint of the slices
// (the first port of each slice: the Service's web port).
func readyAddresses(ss map[string]*discoveryv1.EndpointSlice) []string {
	out := []string{}
	for _, s := range ss {
		if len(s.Ports) == 0 || s.Ports[0].Port == nil {
			continue
		}
		port := strconv.Itoa(int(*s.Ports[0].Port))
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
				continue
			}
			for _, addr := range ep.Addresses {
				out = append(out, net.JoinHostPort(addr, port))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Upstreams implements Apps.
func (a *EndpointSliceApps) Upstreams(tenant, app string) []string {
	ups, _ := a.table.Load(tenant + "/" + app)
	addrs, _ := ups.([]string)
	return addrs
}

// Runs implements Apps: the app has a Service with endpoint slices.
func (a *EndpointSliceApps) Runs(tenant, app string) bool {
	_, ok := a.table.Load(tenant + "/" + app)
	return ok
}
