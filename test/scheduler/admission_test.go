package scheduler

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/internal/controlplane"
)

// A management cluster that does not serve
// admissionregistration.k8s.io/v1 mutatingadmissionpolicies (a 1.35
// kube-apiserver; here 1.37 with the resource turned off) must not keep
// bex-apiserver from becoming ready: the generic apiserver's
// MutatingAdmissionPolicy plugin would wait for that resource for ever.
func TestReadyOnAManagementClusterWithoutMutatingAdmissionPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr, APIServers: []controlplane.APIServerSpec{{
		NoMVP:         true,
		RuntimeConfig: "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false",
		// kube-apiserver's own plugin would wait for the resource too.
		ExtraArgs: []string{"--disable-admission-plugins=MutatingAdmissionPolicy"},
	}}})
	if err != nil {
		t.Fatalf("starting a control plane: %v", err)
	}
	defer cp.Stop()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			t.Fatal("the control plane still serves mutatingadmissionpolicies: the test would not test anything")
		}
	}

	srv, err := local.Start(ctx, local.Options{ControlPlane: cp, Dir: t.TempDir(), Timeout: 90 * time.Second})
	if err != nil {
		t.Fatalf("bex-apiserver on a cluster without mutatingadmissionpolicies: %v", err)
	}
	defer srv.Stop()
	c, err := newClient(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var caps schedulingv1alpha1.ClusterCapacityList
	if err := c.List(ctx, &caps); err != nil {
		t.Fatalf("listing ClusterCapacities through the aggregator: %v", err)
	}
	if len(caps.Items) == 0 {
		t.Error("no ClusterCapacity: the static cluster is missing")
	}
}
