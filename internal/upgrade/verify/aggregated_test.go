package verify_test

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/apiserver/local"
	"bex.co/bex/apiserver/registration"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/upgrade/verify"
)

var clusterCapacities = schema.GroupVersionResource{Group: "scheduling.bex.co", Version: "v1alpha1", Resource: "clustercapacities"}

// TestAggregatedAndCRDFailures shows that what an apiserver must serve
// itself fails with the server's answer as evidence: the aggregated
// scheduler API while its APIService points at a backend nobody listens on
// (the aggregator's 503), and an App created in a namespace that does not
// exist (the CRD's 404). Once the real bex-apiserver backs the APIService,
// the same probe is served.
func TestAggregatedAndCRDFailures(t *testing.T) {
	cp := cptest.Start(t)
	ctx := t.Context()
	admin := cp.RESTConfig()
	cs := kubernetes.NewForConfigOrDie(admin)

	// An APIService whose backend is unreachable: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registration.DefaultNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(registration.DefaultNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: registration.DefaultServiceName},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(deadPort)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": registration.APIServiceName},
		"spec": map[string]any{
			"group": clusterCapacities.Group, "version": clusterCapacities.Version,
			"service":               map[string]any{"namespace": registration.DefaultNamespace, "name": registration.DefaultServiceName, "port": int64(deadPort)},
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dynamic.NewForConfigOrDie(admin).Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	server := cp.APIServers()[0]
	targets := targetsOf(cp, server.Name)
	opts := verify.Options{
		Aggregated: []schema.GroupVersionResource{clusterCapacities},
		CRDs:       []verify.CRDProbe{verify.AppProbe()},
		Namespace:  "bex-verify-missing",
	}
	probeOf := func(rep verify.Report, gvr schema.GroupVersionResource, verb string) verify.Probe {
		t.Helper()
		for _, p := range rep.Probes {
			if p.Resource == gvr && p.Verb == verb {
				return p
			}
		}
		t.Fatalf("no %s probe of %v in %+v", verb, gvr, rep.Probes)
		return verify.Probe{}
	}
	// The aggregator answers 503 once it has found the backend unreachable.
	rep := runUntil(t, time.Minute, targets, opts, func(r verify.Report) bool {
		return probeOf(r, clusterCapacities, verify.VerbList).Status == 503
	})
	agg := probeOf(rep, clusterCapacities, verify.VerbList)
	t.Logf("aggregated API with an unreachable backend: %d %s: %s", agg.Status, agg.Outcome, agg.Message)
	if agg.Outcome != verify.Error || agg.Status != 503 || agg.Message == "" {
		t.Errorf("aggregated probe %+v, want an Error with the aggregator's 503 as evidence", agg)
	}
	create := probeOf(rep, apps, verify.VerbCreate)
	t.Logf("App in a missing namespace: %d %s: %s", create.Status, create.Outcome, create.Message)
	if create.Outcome != verify.Error || create.Status != 404 || !strings.Contains(create.Message, `namespaces \"bex-verify-missing\" not found`) {
		t.Errorf("create probe %+v, want an Error with the server's 404 naming the namespace", create)
	}
	for _, p := range rep.Probes {
		if p.Resource == apps && (p.Verb == verify.VerbGet || p.Verb == verify.VerbDelete) {
			t.Errorf("%s probed after a failed create: %+v", p.Verb, p)
		}
	}
	if rep.Passed() {
		t.Fatal("the verdict passed with failing probes")
	}

	// The real bex-apiserver behind the same APIService.
	srv, err := local.Start(ctx, local.Options{ControlPlane: cp, Dir: t.TempDir(), Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("starting bex-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	opts.Namespace = "default"
	// A round reads the server's local discovery, then its merged one:
	// when the aggregator's cache of the APIService's discovery turns
	// over between the two reads, that round sees the group in the merged
	// view only and probes it as a peer's (Proxied, a pass). The next
	// round sees both.
	rep = runUntil(t, time.Minute, targets, opts, func(r verify.Report) bool {
		return r.Passed() && !slices.ContainsFunc(r.Probes, func(p verify.Probe) bool { return p.Resource == clusterCapacities && p.Outcome != verify.ServedLocally })
	})
	if !rep.Passed() {
		t.Fatalf("with bex-apiserver running: failures %+v, findings %+v", rep.Failures(), rep.Findings)
	}
	if p := probeOf(rep, clusterCapacities, verify.VerbList); p.Outcome != verify.ServedLocally {
		t.Errorf("aggregated probe %+v, want ServedLocally", p)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "bex-verify-missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the probe created the namespace: %v", err)
	}
}
