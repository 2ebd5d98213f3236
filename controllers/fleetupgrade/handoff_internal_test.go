package fleetupgrade

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/upgrade/preflight"
)

func TestHetznerClusterLoadBalancer(t *testing.T) {
	hc := func(spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}, "status": map[string]any{}}}
		u.SetKind(HetznerClusterKind)
		u.SetNamespace("fleet")
		u.SetName("c1")
		if spec != nil {
			u.Object["spec"] = map[string]any{"controlPlaneLoadBalancer": spec}
		}
		if status != nil {
			u.Object["status"] = map[string]any{"controlPlaneLoadBalancer": status}
		}
		return u
	}
	for _, tc := range []struct {
		name string
		hc   *unstructured.Unstructured
		want string
		err  string
	}{
		{name: "the ID CAPH recorded", hc: hc(map[string]any{"enabled": true, "name": "c1-api"}, map[string]any{"id": int64(4711)}), want: "4711"},
		{name: "the name in spec before the ID is known", hc: hc(map[string]any{"name": "c1-api"}, nil), want: "c1-api"},
		{name: "disabled", hc: hc(map[string]any{"enabled": false, "name": "c1-api"}, map[string]any{"id": int64(4711)}), want: ""},
		{name: "neither yet", hc: hc(map[string]any{"enabled": true}, nil), err: "HetznerCluster fleet/c1 has no load balancer yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hetznerClusterLoadBalancer(tc.hc)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("= %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestServerRef(t *testing.T) {
	machine := func(kind, infra, node string) *clusterv1.Machine {
		m := &clusterv1.Machine{}
		m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{Kind: kind, Name: infra}
		m.Status.NodeRef.Name = node
		return m
	}
	for _, tc := range []struct {
		m    *clusterv1.Machine
		want string
	}{
		{machine("HCloudMachine", "c1-cp-abcde", "c1-cp-xyz"), "c1-cp-abcde"},
		{machine("HetznerBareMetalMachine", "c1-bm-1", "bm-node"), "bm-node"},
		{machine("HetznerBareMetalMachine", "c1-bm-1", ""), "c1-bm-1"},
	} {
		if got := serverRef(tc.m); got != (hetzner.ServerRef{Name: tc.want}) {
			t.Errorf("serverRef(%s %s, node %q) = %+v, want %q", tc.m.Spec.InfrastructureRef.Kind, tc.m.Spec.InfrastructureRef.Name, tc.m.Status.NodeRef.Name, got, tc.want)
		}
	}
}

// The backoff doubles per failure up to the maximum, holds the cluster
// with the last failure while it runs, and records a failure once per
// distinct message.
func TestRetries(t *testing.T) {
	var b retries
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var waits []time.Duration
	for range 5 {
		waits = append(waits, b.fail("remove/u1", now, time.Second, 5*time.Second, "forbidden"))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
	s := &scope{now: now.Add(time.Second)}
	cs := &clusterScope{}
	if !b.holding("remove/u1", s, cs) || !strings.Contains(cs.handoffFailed, "forbidden (next try in 4s)") || s.requeue != 4*time.Second {
		t.Errorf("holding: handoffFailed %q, requeue %s", cs.handoffFailed, s.requeue)
	}
	if b.holding("remove/u1", &scope{now: now.Add(5 * time.Second)}, &clusterScope{}) {
		t.Error("still holding after the wait")
	}
	if msg, ok := b.unrecorded("remove/u1"); !ok || msg != "forbidden" {
		t.Errorf("unrecorded = %q, %t", msg, ok)
	}
	if _, ok := b.unrecorded("remove/u1"); ok {
		t.Error("the same failure recorded twice")
	}
	b.fail("remove/u1", now, time.Second, 5*time.Second, "locked")
	if msg, ok := b.unrecorded("remove/u1"); !ok || msg != "locked" {
		t.Errorf("a new failure: unrecorded = %q, %t", msg, ok)
	}
	b.forget("remove/u1")
	if b.holding("remove/u1", &scope{now: now}, &clusterScope{}) {
		t.Error("holding after forget")
	}
	if w := b.fail("remove/u1", now, time.Second, 5*time.Second, "x"); w != time.Second {
		t.Errorf("after forget the backoff starts again: %s", w)
	}
}

// TestHandsOff: a cluster's stopping apiservers are out of its load
// balancer before they stop with the Hetzner hand-off, and on a
// LocalCluster, whose load balancer drains a deleted machine itself; then
// the wire-MVP step sets no shutdown delay.
func TestHandsOff(t *testing.T) {
	cluster := func(group, kind string) *clusterv1.Cluster {
		return &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: "c1"}}}
	}
	for _, tc := range []struct {
		name string
		cs   clusterScope
		want bool
	}{
		{name: "Hetzner with its load balancer", cs: clusterScope{cluster: cluster("infrastructure.cluster.x-k8s.io", HetznerClusterKind), loadBalancer: "lb-1"}, want: true},
		{name: "Hetzner without a load balancer", cs: clusterScope{cluster: cluster("infrastructure.cluster.x-k8s.io", HetznerClusterKind)}},
		{name: "LocalCluster", cs: clusterScope{cluster: cluster("infrastructure.bex.co", "LocalCluster")}, want: true},
		{name: "a LocalCluster kind of another group", cs: clusterScope{cluster: cluster("infrastructure.example.com", "LocalCluster")}},
		{name: "no Cluster", cs: clusterScope{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cs.handsOff(); got != tc.want {
				t.Errorf("handsOff() = %v, want %v", got, tc.want)
			}
			kcp := &controlplanev1.KubeadmControlPlane{}
			delay := ""
			for _, a := range preflight.WireMVPPatch(kcp, "v1.36.3", tc.cs.handsOff()) {
				if a.Name == "shutdown-delay-duration" && a.Value != nil {
					delay = *a.Value
				}
			}
			if want := map[bool]string{true: "0s", false: "5s"}[tc.want]; delay != want {
				t.Errorf("the wire-MVP patch sets --shutdown-delay-duration=%q, want %q", delay, want)
			}
		})
	}
}
