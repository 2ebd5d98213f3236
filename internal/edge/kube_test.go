package edge_test

import (
	"context"
	"fmt"
	"strings"
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

// startWatch starts a real apiserver with the namespace acme, and answers
// a client of it and a started cache of it, both stopped with the test (or
// after two minutes), and their context.
func startWatch(t *testing.T) (context.Context, client.Client, cache.Cache) {
	t.Helper()
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
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
	return ctx, c, rc
}

// TestWatchRoutesFollowsEntriesOnly runs WatchRoutes on a real apiserver:
// the table follows a Route's admission, and twenty changes of a Route's
// status that leave its entry as it is rebuild nothing. Before, every
// change of any Route listed and copied them all and rebuilt the table:
// with ten thousand Routes whose statuses the controller writes, the edge
// spent its time relisting.
func TestWatchRoutesFollowsEntriesOnly(t *testing.T) {
	ctx, c, rc := startWatch(t)
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

// TestWatchMaintenancePages runs WatchMaintenance on a real apiserver: the
// table holds a suspended App's spec.maintenancePage, follows a change of
// it, and drops it when the App leaves maintenance mode or is deleted; an
// App that is not suspended has no page in the table, whatever its spec
// says. The App CRD refuses a page over 65536 bytes, in ASCII or in
// characters of several bytes.
func TestWatchMaintenancePages(t *testing.T) {
	ctx, c, rc := startWatch(t)
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.example.com", Apps: apps{}}}

	app := func(name string, suspended bool, page string) *platformv1alpha1.App {
		t.Helper()
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: platformv1alpha1.AppSpec{Suspended: suspended, MaintenancePage: page}}
		if err := c.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	shopPage := "<h1>Closed for stock-taking</h1><script>alert(1)</script>"
	shop := app("shop", true, shopPage)
	app("blog", true, "")
	app("web", false, "<h1>not in maintenance</h1>")
	if err := edge.WatchMaintenance(ctx, rc, table, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	// serves waits until the table answers app's default hostname in
	// maintenance mode (with page) or not at all.
	serves := func(name string, maintenance bool, page string) {
		t.Helper()
		platformtest.Eventually(t, time.Minute, fmt.Sprintf("%s in maintenance %v with page %q", name, maintenance, page), func(context.Context) error {
			r, _, ok := table.Resolve(name+"-acme.apps.example.com", "/")
			if ok != maintenance || r.Maintenance != maintenance || r.MaintenancePage != page {
				return fmt.Errorf("resolved %v, maintenance %v, page %q", ok, r.Maintenance, r.MaintenancePage)
			}
			return nil
		})
	}
	serves("shop", true, shopPage)
	serves("blog", true, "")
	serves("web", false, "")

	before := shop.DeepCopy()
	shop.Spec.MaintenancePage = "<h1>Back at noon</h1>"
	if err := c.Patch(ctx, shop, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	serves("shop", true, "<h1>Back at noon</h1>")
	before = shop.DeepCopy()
	shop.Spec.Suspended = false
	if err := c.Patch(ctx, shop, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	serves("shop", false, "")
	if err := c.Delete(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "blog"}}); err != nil {
		t.Fatal(err)
	}
	serves("blog", false, "")

	for name, page := range map[string]string{
		"ascii": strings.Repeat("a", platformv1alpha1.MaxMaintenancePage+1),
		// 32769 characters, 65538 bytes.
		"accents": strings.Repeat("é", platformv1alpha1.MaxMaintenancePage/2+1),
	} {
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "big-" + name},
			Spec: platformv1alpha1.AppSpec{Suspended: true, MaintenancePage: page}}
		if err := c.Create(ctx, a); err == nil || !strings.Contains(err.Error(), "spec.maintenancePage") {
			t.Errorf("an App with a page of %d bytes (%s): err = %v, want the CRD to refuse spec.maintenancePage", len(page), name, err)
		}
	}
	if err := c.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "full"},
		Spec: platformv1alpha1.AppSpec{MaintenancePage: strings.Repeat("é", platformv1alpha1.MaxMaintenancePage/2)}}); err != nil {
		t.Errorf("an App with a page of 65536 bytes: %v", err)
	}
}
