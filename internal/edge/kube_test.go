package edge_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/edge"
	"bex.co/bex/test/platformtest"
)

// TestRouteEntriesNeedVerifiedDomains: the edge's table holds a Route only
// when it is admitted and its hostname verified, so that an unproved name
// is neither routed nor given a certificate, whatever else its status says.
func TestRouteEntriesNeedVerifiedDomains(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "Test"}
	}
	route := func(host string, conds ...metav1.Condition) platformv1alpha1.Route {
		return platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: host},
			Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}},
			Status:     platformv1alpha1.RouteStatus{Conditions: conds},
		}
	}
	admitted := cond(platformv1alpha1.RouteAdmittedCondition, metav1.ConditionTrue)
	entries := edge.RouteEntries([]platformv1alpha1.Route{
		route("verified.example.test", admitted, cond(platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue)),
		route("unverified.example.test", admitted, cond(platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionFalse)),
		route("unknown.example.test", admitted),
		route("refused.example.test", cond(platformv1alpha1.RouteAdmittedCondition, metav1.ConditionFalse), cond(platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue)),
	})
	if len(entries) != 1 || entries[0].Hostname != "verified.example.test" {
		t.Errorf("entries %+v, want verified.example.test alone", entries)
	}
	table := &edge.Table{}
	table.SetRoutes(entries)
	for host, want := range map[string]bool{"verified.example.test": true, "unverified.example.test": false, "unknown.example.test": false} {
		if got := table.Claimed(host); got != want {
			t.Errorf("Claimed(%s) = %v, want %v: certificates only for verified names", host, got, want)
		}
	}
}

// TestWatchRoutesFollowsEntriesOnly runs WatchRoutes on a real apiserver:
// the table follows a Route's admission, and twenty changes of a Route's
// status that leave its entry as it is rebuild nothing. Before, every
// change of any Route listed and copied them all and rebuilt the table:
// with ten thousand Routes whose statuses the controller writes, the edge
// spent its time relisting.
func TestWatchRoutesFollowsEntriesOnly(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := platformv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}); err != nil {
		t.Fatal(err)
	}
	rc, err := cache.New(cp.RESTConfig(), cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rc.Start(ctx) }()
	table := &edge.Table{}
	if err := edge.WatchRoutes(ctx, rc, table, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	var updates atomic.Int64
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-table.Changed():
				updates.Add(1)
			}
		}
	}()

	// route creates a Route for host and gives it status conds, as the
	// Route controller would.
	route := func(name, host string, conds ...metav1.Condition) *platformv1alpha1.Route {
		t.Helper()
		rt := &platformv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "web"}}}
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		rt.Status.Conditions = conds
		if err := c.Status().Update(ctx, rt); err != nil {
			t.Fatal(err)
		}
		return rt
	}
	routed := func(host string, want bool) {
		t.Helper()
		platformtest.Eventually(t, time.Minute, fmt.Sprintf("%s routed: %v", host, want), func(context.Context) error {
			if _, ok := table.Entry(host, "/"); ok != want {
				return fmt.Errorf("routed: %v", ok)
			}
			return nil
		})
	}
	cond := func(typ string, s metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "Test", Message: msg, LastTransitionTime: metav1.Now()}
	}
	admitted := []metav1.Condition{
		cond(platformv1alpha1.RouteAdmittedCondition, metav1.ConditionTrue, ""),
		cond(platformv1alpha1.RouteDomainVerifiedCondition, metav1.ConditionTrue, ""),
	}
	a := route("a", "a.example.test", admitted...)
	routed("a.example.test", true)

	before := updates.Load()
	for i := range 20 {
		a.Status.Conditions = append(admitted, cond(platformv1alpha1.RouteDNSReadyCondition, metav1.ConditionFalse, fmt.Sprintf("look %d", i)))
		if err := c.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, time.Minute, "the edge's cache has the status", func(ctx context.Context) error {
			var got platformv1alpha1.Route
			if err := rc.Get(ctx, client.ObjectKeyFromObject(a), &got); err != nil || got.ResourceVersion != a.ResourceVersion {
				return fmt.Errorf("resourceVersion %s, want %s (%v)", got.ResourceVersion, a.ResourceVersion, err)
			}
			return nil
		})
	}
	route("b", "b.example.test", admitted...)
	routed("b.example.test", true)
	if n := updates.Load() - before; n > 2 {
		t.Errorf("20 status changes that leave the entries alone and one new Route rebuilt the table %d times, want at most 2", n)
	}

	a.Status.Conditions = admitted[:1]
	if err := c.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	routed("a.example.test", false)
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := &platformv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "b"}}
	if err := c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	routed("b.example.test", false)
}
