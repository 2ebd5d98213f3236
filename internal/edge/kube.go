package edge

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// WatchRoutes keeps table's Routes equal to the admitted Routes in c (the
// Route controller decides admission: one Route per hostname across
// tenants). A Route's tenant is its namespace. It returns once the first
// full set is in the table; updates follow until ctx is done. c must be
// started by the caller.
func WatchRoutes(ctx context.Context, c cache.Cache, table *Table, log logr.Logger) error {
	inf, err := c.GetInformer(ctx, &platformv1alpha1.Route{})
	if err != nil {
		return fmt.Errorf("watching Routes: %w", err)
	}
	kick := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}); err != nil {
		return fmt.Errorf("watching Routes: %w", err)
	}
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("watching Routes: the cache did not sync: %w", ctx.Err())
	}
	sync := func() error {
		var list platformv1alpha1.RouteList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		table.SetRoutes(RouteEntries(list.Items))
		return nil
	}
	if err := sync(); err != nil {
		return fmt.Errorf("listing Routes: %w", err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				if err := sync(); err != nil && ctx.Err() == nil {
					log.Error(err, "Listing Routes")
				}
			}
		}
	}()
	return nil
}

// RouteEntries returns the table entries of the admitted Routes among
// routes whose tenant proved it owns the hostname (DomainVerified): the
// edge routes and obtains certificates for those names only.
func RouteEntries(routes []platformv1alpha1.Route) []RouteEntry {
	var out []RouteEntry
	for _, r := range routes {
		if r.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteAdmittedCondition) ||
			!meta.IsStatusConditionTrue(r.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition) {
			continue
		}
		out = append(out, RouteEntry{
			Hostname: r.Spec.Hostname, PathPrefix: r.Spec.PathPrefix,
			Tenant: r.Namespace, App: r.Spec.AppRef.Name,
			PlainHTTP: r.Spec.TLS.Mode == platformv1alpha1.TLSModeNone,
		})
	}
	return out
}

// EndpointSliceApps is the routing table of a Kubernetes workload cluster:
// an app's upstreams are the ready endpoints of the EndpointSlices of its
// Service (named after the app, in the tenant's namespace), as ingress
// controllers read them, so that the edge stops sending to a pod the moment
// it is not ready and a cut-over follows readiness.
type EndpointSliceApps struct {
	mu     sync.Mutex
	slices map[string]map[string]*discoveryv1.EndpointSlice // namespace/service → slice name → slice
	table  atomic.Pointer[map[string][]string]              // namespace/service → ready addresses
}

var _ Apps = (*EndpointSliceApps)(nil)

// WatchEndpointSlices returns an EndpointSliceApps fed from c's
// EndpointSlice informer, synced once before it returns. c must be started
// by the caller.
func WatchEndpointSlices(ctx context.Context, c cache.Cache) (*EndpointSliceApps, error) {
	a := &EndpointSliceApps{slices: map[string]map[string]*discoveryv1.EndpointSlice{}}
	empty := map[string][]string{}
	a.table.Store(&empty)
	inf, err := c.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return nil, fmt.Errorf("watching EndpointSlices: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.update(o, false) },
		UpdateFunc: func(_, o any) { a.update(o, false) },
		DeleteFunc: func(o any) { a.update(o, true) },
	}); err != nil {
		return nil, fmt.Errorf("watching EndpointSlices: %w", err)
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watching EndpointSlices: the cache did not sync: %w", ctx.Err())
	}
	return a, nil
}

func (a *EndpointSliceApps) update(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	key := s.Namespace + "/" + svc
	a.mu.Lock()
	defer a.mu.Unlock()
	if deleted {
		delete(a.slices[key], s.Name)
		if len(a.slices[key]) == 0 {
			delete(a.slices, key)
		}
	} else {
		if a.slices[key] == nil {
			a.slices[key] = map[string]*discoveryv1.EndpointSlice{}
		}
		a.slices[key][s.Name] = s
	}
	old := *a.table.Load()
	next := make(map[string][]string, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	if ss, ok := a.slices[key]; ok {
		next[key] = readyAddresses(ss)
	} else {
		delete(next, key)
	}
	a.table.Store(&next)
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
	return (*a.table.Load())[tenant+"/"+app]
}

// Runs implements Apps: the app has a Service with endpoint slices.
func (a *EndpointSliceApps) Runs(tenant, app string) bool {
	_, ok := (*a.table.Load())[tenant+"/"+app]
	return ok
}
