package edge_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/edge"
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
