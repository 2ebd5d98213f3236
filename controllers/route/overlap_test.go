package route

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/edge"
)

// TestWildcardOverlap runs the Route controller against a real apiserver
// and a real DNS server on loopback, with Routes made as kubectl would
// (the API's own check never runs): a wildcard of one tenant and a name it
// covers of another are arbitrated like two Routes for one name. Each
// tenant proved its own hostname; the earlier Route holds, whichever of
// the two is the wildcard, and the later one is not admitted and says
// which name holds it; the edge serves only the holder's. A tenant's own
// wildcard and names under it do not compete; a Route that lost holds
// nothing against later ones; a holder removed hands the name over.
func TestWildcardOverlap(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dns := dnstest.Start(t)

	c, create := runController(ctx, t, cp.RESTConfig(), &Reconciler{
		DNS: dns.Resolver(), AppDomain: appDomain,
		PendingRecheck: 200 * time.Millisecond, ReadyRecheck: 200 * time.Millisecond,
	})
	// route makes a Route of tenant ns for host, proved by ns.
	route := func(ns, name, host string) *platformv1alpha1.Route {
		t.Helper()
		prove(dns, host, ns)
		rt := &platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}},
		}
		create(rt)
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteTXTRecordFoundReason, "")
		return rt
	}
	admitted := func(rt *platformv1alpha1.Route) {
		t.Helper()
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	}
	taken := func(rt *platformv1alpha1.Route, holder string) {
		t.Helper()
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameClaimedReason,
			"another tenant holds "+holder+", which overlaps it")
	}
	// served reports whether the edge's table, made from the Routes as the
	// edge reads them, has tenant's entry for host.
	served := func(tenant, host string) bool {
		t.Helper()
		var list platformv1alpha1.RouteList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(edge.RouteEntries(list.Items), func(e edge.RouteEntry) bool {
			return e.Tenant == tenant && e.Hostname == host
		})
	}
	for _, ns := range []string{"ov-a", "ov-b", "ov-c"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	}

	// A's wildcard first: B's name under it is taken, and says by what.
	wildA := route("ov-a", "wild", "*.wild.test")
	admitted(wildA)
	wwwB := route("ov-b", "www", "www.wild.test")
	taken(wwwB, "*.wild.test")
	admitted(wildA)
	if served("ov-b", "www.wild.test") || !served("ov-a", "*.wild.test") {
		t.Errorf("the edge serves B's www.wild.test under A's older wildcard, or not A's wildcard")
	}
	// A's own name under its wildcard does not compete with it.
	ownA := route("ov-a", "own", "own.wild.test")
	admitted(ownA)
	admitted(wildA)

	// The reverse: A's name first, B's wildcard over it is taken. (The
	// tenants are named in the order their Routes are made: Routes made
	// within one second are ordered by namespace.)
	apiA := route("ov-a", "api", "api.rev.test")
	admitted(apiA)
	wildB := route("ov-b", "rev", "*.rev.test")
	taken(wildB, "api.rev.test")
	admitted(apiA)
	if served("ov-b", "*.rev.test") {
		t.Errorf("the edge serves B's *.rev.test over A's older api.rev.test")
	}
	// A wildcard that lost holds nothing: C's later name under it is
	// admitted.
	docsC := route("ov-c", "docs", "docs.rev.test")
	admitted(docsC)
	taken(wildB, "api.rev.test")

	// A's name goes: B's wildcard holds now, and C's name, made after it,
	// is taken.
	if err := c.Delete(ctx, apiA); err != nil {
		t.Fatal(err)
	}
	admitted(wildB)
	taken(docsC, "*.rev.test")
	if !served("ov-b", "*.rev.test") || served("ov-c", "docs.rev.test") {
		t.Errorf("once A's route went, the edge does not serve B's *.rev.test alone")
	}
}

// listCounter is a client that counts the Routes its List calls return.
type listCounter struct {
	client.Client
	routes atomic.Int64
}

func (c *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Client.List(ctx, list, opts...)
	if l, ok := list.(*platformv1alpha1.RouteList); ok {
		c.routes.Add(int64(len(l.Items)))
	}
	return err
}

// TestManyNamesUnderOneDomain gives 50 tenants a Route each for a name of
// their own under one domain, each proved: all are admitted, and
// reconciling one of them reads the Routes of its own hostname (and of the
// wildcard above it), not the 50 that share the domain, which made a
// reconcile cost as much as the domain has names (ten thousand tenants'
// names under one domain made each of their reconciles read ten thousand
// Routes). A wildcard over the domain that proved nothing changes neither:
// it cannot hold anything.
func TestManyNamesUnderOneDomain(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dns := dnstest.Start(t)
	r := &Reconciler{DNS: dns.Resolver(), AppDomain: appDomain, PendingRecheck: time.Hour, ReadyRecheck: time.Hour}
	c, create := runController(ctx, t, cp.RESTConfig(), r)

	const n = 50
	var routes []*platformv1alpha1.Route
	for i := range n {
		ns, host := fmt.Sprintf("one-%02d", i), fmt.Sprintf("n%02d.one.test", i)
		prove(dns, host, ns)
		rt := &platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "www"},
			Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}},
		}
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, rt)
		routes = append(routes, rt)
	}
	for _, rt := range routes {
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	}

	// read reconciles the first Route once more, through a client that
	// counts the Routes it lists; the manager's cache has every Route.
	read := func() int64 {
		t.Helper()
		probe := &Reconciler{DNS: r.DNS, AppDomain: r.AppDomain, Client: &listCounter{Client: r.Client}}
		if _, err := probe.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(routes[0])}); err != nil {
			t.Fatal(err)
		}
		return probe.Client.(*listCounter).routes.Load()
	}
	if got := read(); got > 1 {
		t.Errorf("reconciling n00.one.test read %d Routes, want its own only (1): every name under the domain is read", got)
	}

	wild := &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Namespace: "one-wild", Name: "wild"},
		Spec:       platformv1alpha1.RouteSpec{Hostname: "*.one.test", AppRef: platformv1alpha1.AppReference{Name: "web"}},
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "one-wild"}}, wild)
	waitCondition(ctx, t, c, wild, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteAwaitingTXTRecordReason, "")
	if got := read(); got > 2 {
		t.Errorf("with an unproved wildcard over the domain, reconciling n00.one.test read %d Routes, want 2", got)
	}
	for _, rt := range routes {
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	}
}
