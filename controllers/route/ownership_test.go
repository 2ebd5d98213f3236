package route

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
)

// TestDomainOwnership runs the Route controller against a real apiserver
// and a real DNS server on loopback, rechecking every 200ms as it would
// every 15s: a custom hostname is admitted (and in the edge's table) only
// once its TXT record holds the tenant's token; wildcards over public
// suffixes and the platform's own names are refused; a Route made with
// kubectl by a tenant that did not prove the name does not take it from
// the tenant that did, however old it is.
func TestDomainOwnership(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dns := dnstest.Start(t)

	c, create := runController(ctx, t, cp.RESTConfig(), &Reconciler{
		DNS: dns.Resolver(), AppDomain: appDomain,
		ReservedHostnames: []string{"registry.bex.test", "*.console.bex.test"},
		PendingRecheck:    200 * time.Millisecond, ReadyRecheck: 200 * time.Millisecond,
	})
	route := func(ns, name, host string) *platformv1alpha1.Route {
		return &platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}},
		}
	}
	// served reports whether the edge's table, made from the Routes as
	// the edge reads them, serves host.
	served := func(host string) bool {
		t.Helper()
		var list platformv1alpha1.RouteList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(edge.RouteEntries(list.Items), func(e edge.RouteEntry) bool { return e.Hostname == host })
	}
	create(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own-b"}},
		&platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "own-a", Name: "web"}},
		&platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "own-b", Name: "web"}},
	)

	// A custom hostname without its TXT record: not admitted, not served,
	// and the status says which record to create.
	const shop = "shop.example.test"
	tokenA := domains.Token(appDomain, "own-a", shop)
	shopA := route("own-a", "shop", shop)
	create(shopA)
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteAwaitingTXTRecordReason,
		"create a DNS TXT record _bex-challenge.shop.example.test with the value "+tokenA)
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteDomainNotVerifiedReason, tokenA)
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteNotServingReason, "Admitted is False (DomainNotVerified)")
	if served(shop) {
		t.Errorf("the edge serves %s before its TXT record exists", shop)
	}

	// Another tenant's value at the name proves nothing for this one.
	dns.SetTXT(domains.ChallengeName(shop), domains.Token(appDomain, "own-b", shop))
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteAwaitingTXTRecordReason, "not this tenant's value")

	// The record appears: seen on a recheck, verified, admitted, served.
	prove(dns, shop, "own-a")
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteTXTRecordFoundReason, tokenA)
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	if !served(shop) {
		t.Errorf("the edge does not serve %s once verified", shop)
	}

	// Tenant B, through kubectl, made a Route for a name before tenant A
	// did, without proof; A proves the name: A holds it, B's is taken.
	const squat = "www.squat.test"
	squatB := route("own-b", "squat", squat)
	create(squatB)
	waitCondition(ctx, t, c, squatB, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteDomainNotVerifiedReason, "")
	squatA := route("own-a", "squat", squat)
	create(squatA)
	prove(dns, squat, "own-a")
	waitCondition(ctx, t, c, squatA, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	waitCondition(ctx, t, c, squatB, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameClaimedReason, "is taken")
	// A later Route of B on A's verified name is taken as well.
	late := route("own-b", "late", shop)
	create(late)
	waitCondition(ctx, t, c, late, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameClaimedReason, "is taken")
	var list platformv1alpha1.RouteList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range edge.RouteEntries(list.Items) {
		if e.Tenant == "own-b" {
			t.Errorf("the edge serves tenant B's %s", e.Hostname)
		}
	}

	// Wildcards: over a public suffix, refused for good; under a
	// registrable domain, proved at the domain's challenge name.
	overSuffix := route("own-a", "co-uk", "*.co.uk")
	wild := route("own-a", "wild", "*.example.co.uk")
	create(overSuffix, wild)
	waitCondition(ctx, t, c, overSuffix, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameNotRegistrableReason, "public suffix")
	waitCondition(ctx, t, c, wild, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteAwaitingTXTRecordReason, "_bex-challenge.example.co.uk with the value")
	prove(dns, "*.example.co.uk", "own-a")
	waitCondition(ctx, t, c, wild, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")

	// The platform's names: refused even with a TXT record. A tenant's own
	// default hostname needs no record; another tenant's is refused.
	reserved := []*platformv1alpha1.Route{
		route("own-a", "apex", "apps.bex.test"),
		route("own-a", "apps-wild", "*.apps.bex.test"),
		route("own-a", "registry", "registry.bex.test"),
		route("own-a", "console", "admin.console.bex.test"),
		route("own-a", "other-default", "web-own-b.apps.bex.test"),
	}
	for _, rt := range reserved {
		prove(dns, rt.Spec.Hostname, "own-a")
		create(rt)
	}
	own := route("own-a", "own-default", "web-own-a.apps.bex.test")
	create(own)
	for _, rt := range reserved {
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameReservedReason, "cannot be used")
		waitCondition(ctx, t, c, rt, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteHostnameReservedReason, "")
	}
	waitCondition(ctx, t, c, own, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteDefaultHostnameReason, "no TXT record is needed")
	waitCondition(ctx, t, c, own, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	for _, rt := range reserved {
		if served(rt.Spec.Hostname) {
			t.Errorf("the edge serves the platform's %s", rt.Spec.Hostname)
		}
	}

	// The record goes away: the name is no longer proved, and not served.
	dns.SetTXT(domains.ChallengeName(shop))
	waitCondition(ctx, t, c, shopA, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteDomainNotVerifiedReason, "")
	if served(shop) {
		t.Errorf("the edge serves %s after its TXT record went away", shop)
	}
}
