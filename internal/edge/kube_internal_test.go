package edge

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"bex.co/bex/internal/runtime/kube"
)

// sliceEvents returns the informer events of n apps' Services and
// EndpointSlices over tenants namespaces, as the kube runtime labels them.
func sliceEvents(n, tenants int) (nss []*corev1.Namespace, svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) {
	for t := range tenants {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", t),
			Labels: map[string]string{kube.LabelManagedBy: "bex", kube.LabelTenant: fmt.Sprintf("t%d", t)}}})
	}
	for i := range n {
		ns, app := fmt.Sprintf("t%d", i%tenants), fmt.Sprintf("app%d", i)
		labels := map[string]string{kube.LabelManagedBy: "bex", kube.LabelApp: app}
		svcs = append(svcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, Labels: labels}})
		sl := map[string]string{kube.LabelManagedBy: "bex", kube.LabelApp: app, discoveryv1.LabelServiceName: app}
		slices = append(slices, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-x", Labels: sl},
			Ports:      []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250)}}},
		})
	}
	return nss, svcs, slices
}

// BenchmarkEndpointSliceSync feeds the first list of 10,000 apps'
// Namespaces, Services and EndpointSlices to an EndpointSliceApps, as its
// informers do when the edge starts, then one readiness change.
func BenchmarkEndpointSliceSync(b *testing.B) {
	nss, svcs, slices := sliceEvents(10_000, 1_000)
	for b.Loop() {
		a := newEndpointSliceApps()
		for _, ns := range nss {
			a.updateNamespace(ns, false)
		}
		for _, s := range svcs {
			a.updateService(s, false)
		}
		for _, s := range slices {
			a.updateSlice(s, false)
		}
		if len(a.Upstreams("t1", "app1")) != 1 {
			b.Fatal("app1 has no upstream")
		}
	}
}

// TestEndpointSliceAppsUpstreams: an app's upstreams follow its slices,
// and go with its Service or its tenant's namespace label.
func TestEndpointSliceAppsUpstreams(t *testing.T) {
	nss, svcs, slices := sliceEvents(20, 2)
	a := newEndpointSliceApps()
	for _, s := range slices {
		a.updateSlice(s, false)
	}
	for _, s := range svcs {
		a.updateService(s, false)
	}
	if a.Runs("t1", "app1") {
		t.Fatal("app1 runs before its tenant's namespace is known")
	}
	for _, ns := range nss {
		a.updateNamespace(ns, false)
	}
	if got := a.Upstreams("t1", "app1"); len(got) != 1 || got[0] != "10.0.0.1:8080" {
		t.Fatalf("app1's upstreams %q", got)
	}
	a.updateService(svcs[1], true)
	if a.Runs("t1", "app1") || !a.Runs("t1", "app3") {
		t.Errorf("after app1's Service went: app1 runs %v, app3 runs %v", a.Runs("t1", "app1"), a.Runs("t1", "app3"))
	}
	a.updateNamespace(nss[0], true)
	if a.Runs("t0", "app0") || !a.Runs("t1", "app3") {
		t.Errorf("after t0's namespace went: app0 runs %v, app3 runs %v", a.Runs("t0", "app0"), a.Runs("t1", "app3"))
	}
}
