package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestLocalFleet: an operator creates a local cluster (its four objects,
// in a free address block) and deletes it; bad requests, a fleet still
// starting, taken names and clusters of other providers or under a fleet
// upgrade are refused with what to do, and change nothing; tenants are
// refused; a platform without a local fleet answers 501. It has a control
// plane of its own: it writes in namespace default and makes fleet
// upgrades, which TestAPI's scenarios count.
func TestLocalFleet(t *testing.T) {
	cp := cptest.Start(t)
	ctx := t.Context()
	const ns = api.LocalClusterNamespace

	none := apitest.Start(t, cp)
	for _, r := range []struct{ method, path string }{{http.MethodPost, "/fleet/local-clusters"}, {http.MethodDelete, "/fleet/local-clusters/dev-1"}} {
		a := call(t, none, r.method, r.path, none.OperatorToken, apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3"})
		if a.status != http.StatusNotImplemented || !strings.Contains(a.err().Message, "this platform has no local fleet") {
			t.Errorf("%s %s without a local fleet: %d %s, want 501", r.method, r.path, a.status, a.body)
		}
	}

	fleet := &apitest.LocalFleet{}
	e := apitest.StartWith(t, cp, apitest.Options{LocalFleet: fleet})
	_, tenantToken := e.TenantToken(t, "localfleettenant")
	op := e.OperatorToken
	create := func(req apiclient.CreateLocalClusterRequest) answer {
		t.Helper()
		return call(t, e, http.MethodPost, "/fleet/local-clusters", op, req)
	}
	// objects lists what exists of the cluster name.
	objects := func(name string) []string {
		t.Helper()
		var out []string
		for _, o := range []client.Object{&clusterv1.Cluster{}, &controlplanev1.KubeadmControlPlane{}, &infrav1.LocalCluster{}, &infrav1.LocalMachineTemplate{}} {
			key := client.ObjectKey{Namespace: ns, Name: name}
			if _, ok := o.(*controlplanev1.KubeadmControlPlane); ok {
				key.Name += "-control-plane"
			}
			if _, ok := o.(*infrav1.LocalMachineTemplate); ok {
				key.Name += "-control-plane"
			}
			err := e.Kube.Get(ctx, key, o)
			if err == nil {
				out = append(out, fmt.Sprintf("%T", o))
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		return out
	}

	// Refusals: tenants, bad fields (422 on the field), a fleet starting.
	if a := call(t, e, http.MethodPost, "/fleet/local-clusters", tenantToken, apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3"}); a.status != http.StatusForbidden {
		t.Errorf("a tenant creating a local cluster: %d %s, want 403", a.status, a.body)
	}
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/dev-1", tenantToken, nil); a.status != http.StatusForbidden {
		t.Errorf("a tenant deleting a local cluster: %d %s, want 403", a.status, a.body)
	}
	long := strings.Repeat("a", 44)
	for _, tc := range []struct {
		name  string
		req   apiclient.CreateLocalClusterRequest
		field string
		says  string
	}{
		{"no name", apiclient.CreateLocalClusterRequest{Version: "v1.36.3"}, "name", "needs a name"},
		{"bad name", apiclient.CreateLocalClusterRequest{Name: "Dev_1", Version: "v1.36.3"}, "name", "lower-case letters"},
		{"long name", apiclient.CreateLocalClusterRequest{Name: long, Version: "v1.36.3"}, "name", "at most 43"},
		{"no version", apiclient.CreateLocalClusterRequest{Name: "dev-1"}, "version", "which Kubernetes version? give one of v1.35.4, v1.36.3, v1.37.2"},
		{"version not pinned", apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.0"}, "version", `version "v1.36.0" is not pinned`},
		{"two machines", apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3", ControlPlaneReplicas: 2}, "controlPlaneReplicas", "want at least 3"},
		{"six machines", apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3", ControlPlaneReplicas: 6}, "controlPlaneReplicas", "want at most 5"},
		{"five workers", apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3", WorkerReplicas: 5}, "workerReplicas", "5 worker machines: want 0 to 4"},
		{"negative workers", apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3", WorkerReplicas: -1}, "workerReplicas", "want 0 to 4"},
	} {
		a := create(tc.req)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.says) {
			t.Errorf("%s: %d %s, want 422 on %s saying %q", tc.name, a.status, a.body, tc.field, tc.says)
		}
	}
	fleet.SetNotReady(errors.New("Cluster API's managers are being built"))
	if a := create(apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.36.3"}); a.status != http.StatusServiceUnavailable ||
		a.err().Message != "the local fleet is not ready: Cluster API's managers are being built" || a.header.Get("Retry-After") == "" {
		t.Errorf("creating while the fleet starts: %d %s (Retry-After %q), want 503", a.status, a.body, a.header.Get("Retry-After"))
	}
	fleet.SetNotReady(nil)
	if got := objects("dev-1"); len(got) != 0 {
		t.Fatalf("refused requests wrote %v", got)
	}

	// Two clusters, each in its own block; versions without their v.
	a := create(apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "1.36.3"})
	wantStatus(t, "creating dev-1", a, http.StatusCreated)
	var dev1 apiclient.LocalCluster
	a.decode(t, &dev1)
	a = create(apiclient.CreateLocalClusterRequest{Name: "dev-2", Version: "v1.37.2", ControlPlaneReplicas: 5, WorkerReplicas: 2})
	wantStatus(t, "creating dev-2", a, http.StatusCreated)
	var dev2 apiclient.LocalCluster
	a.decode(t, &dev2)
	if dev1.Name != ns+"/dev-1" || dev1.Version != "v1.36.3" || dev1.ControlPlaneReplicas != 3 || dev2.ControlPlaneReplicas != 5 || dev2.WorkerReplicas != 2 ||
		dev1.AddressBlock == dev2.AddressBlock || !strings.Contains(dev1.Message, "bex fleet list") {
		t.Errorf("created %+v and %+v", dev1, dev2)
	}
	block := netip.MustParsePrefix(dev1.AddressBlock)
	if want := netip.AddrPortFrom(block.Addr().Next(), 6443).String(); dev1.Endpoint != want {
		t.Errorf("dev-1's endpoint %s, want %s", dev1.Endpoint, want)
	}
	cl := &clusterv1.Cluster{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1"}, cl); err != nil {
		t.Fatal(err)
	}
	if ir, cr := cl.Spec.InfrastructureRef, cl.Spec.ControlPlaneRef; ir.APIGroup != infrav1.GroupVersion.Group || ir.Kind != "LocalCluster" || ir.Name != "dev-1" ||
		cr.Kind != "KubeadmControlPlane" || cr.Name != "dev-1-control-plane" {
		t.Errorf("dev-1's Cluster refs: infrastructure %+v, control plane %+v", ir, cr)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	if ms := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; kcp.Spec.Version != "v1.36.3" || ptr.Deref(kcp.Spec.Replicas, 0) != 3 || ms == nil || *ms != intstr.FromInt32(0) ||
		kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Kind != "LocalMachineTemplate" {
		t.Errorf("dev-1's KubeadmControlPlane: version %s, replicas %v, maxSurge %v, template %+v", kcp.Spec.Version, kcp.Spec.Replicas, ms, kcp.Spec.MachineTemplate.Spec.InfrastructureRef)
	}
	if args := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs; len(args) != 1 || args[0].Name != "feature-gates" || ptr.Deref(args[0].Value, "") != "PodLogsQuerySplitStreams=true" {
		t.Errorf("dev-1's apiserver extraArgs: %+v, want the gate that splits a log's streams", args)
	}
	lc := &infrav1.LocalCluster{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1"}, lc); err != nil {
		t.Fatal(err)
	}
	if lc.Spec.AddressBlock != dev1.AddressBlock {
		t.Errorf("dev-1's LocalCluster block %s, answered %s", lc.Spec.AddressBlock, dev1.AddressBlock)
	}

	// dev-2's workers: a MachineDeployment of two, whose Nodes get no
	// label or taint, as a kubeadm worker's (none of the bootstrap
	// template's nodeRegistration is set).
	md := &clusterv1.MachineDeployment{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-2-md-0"}, md); err != nil {
		t.Fatal(err)
	}
	if md.Spec.ClusterName != "dev-2" || ptr.Deref(md.Spec.Replicas, 0) != 2 || md.Spec.Template.Spec.Version != "v1.37.2" ||
		md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind != "KubeadmConfigTemplate" || md.Spec.Template.Spec.InfrastructureRef.Kind != "LocalMachineTemplate" {
		t.Errorf("dev-2's MachineDeployment: %+v", md.Spec)
	}
	kct := &bootstrapv1.KubeadmConfigTemplate{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-2-md-0"}, kct); err != nil {
		t.Fatal(err)
	}
	if nr := kct.Spec.Template.Spec.JoinConfiguration.NodeRegistration; len(nr.KubeletExtraArgs) != 0 || nr.Taints != nil {
		t.Errorf("dev-2's workers get node labels or taints: %+v", nr)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1-md-0"}, &clusterv1.MachineDeployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("dev-1, made without workers, has a MachineDeployment: %v", err)
	}

	// Taken names: the Cluster's, or an object left from another cluster.
	a = create(apiclient.CreateLocalClusterRequest{Name: "dev-1", Version: "v1.37.2"})
	if a.status != http.StatusConflict || a.err().Field != "name" || !strings.Contains(a.err().Message, "cluster default/dev-1 exists already") {
		t.Errorf("creating dev-1 again: %d %s, want 409", a.status, a.body)
	}
	if err := e.Kube.Get(ctx, client.ObjectKeyFromObject(kcp), kcp); err != nil || kcp.Spec.Version != "v1.36.3" {
		t.Errorf("dev-1's KubeadmControlPlane after a refused create: %s, %v", kcp.Spec.Version, err)
	}
	left := &infrav1.LocalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-3-control-plane"}}
	if err := e.Kube.Create(ctx, left); err != nil {
		t.Fatal(err)
	}
	a = create(apiclient.CreateLocalClusterRequest{Name: "dev-3", Version: "v1.37.2"})
	if a.status != http.StatusConflict || !strings.Contains(a.err().Message, "a LocalMachineTemplate default/dev-3-control-plane exists already") {
		t.Errorf("creating dev-3 over a left template: %d %s, want 409", a.status, a.body)
	}
	if got := objects("dev-3"); len(got) != 1 {
		t.Errorf("a refused dev-3 left %v, want the template only", got)
	}

	// The fleet shows them as local clusters.
	a = call(t, e, http.MethodGet, "/fleet", op, nil)
	wantStatus(t, "listing the fleet", a, http.StatusOK)
	var list []apiclient.FleetCluster
	a.decode(t, &list)
	var names []string
	for _, c := range list {
		names = append(names, fmt.Sprintf("%s:%s:%s:%d", c.Name, c.Infrastructure, c.Version, c.Replicas))
	}
	if got, want := strings.Join(names, " "), "default/dev-1:LocalCluster:v1.36.3:3 default/dev-2:LocalCluster:v1.37.2:5"; got != want {
		t.Errorf("fleet = %s, want %s", got, want)
	}
	if list[0].WorkerReplicas != 0 || list[1].WorkerReplicas != 2 || len(list[1].Workers) != 0 {
		t.Errorf("workers: dev-1 wants %d, dev-2 wants %d and has %+v; want 0, 2 and none yet", list[0].WorkerReplicas, list[1].WorkerReplicas, list[1].Workers)
	}
	// The workers' Machines, as Cluster API makes them: one's Node is
	// ready, the other's not yet. They are workers, not control-plane
	// machines.
	for i, ready := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("dev-2-md-0-x-%d", i),
				Labels: map[string]string{clusterv1.ClusterNameLabel: "dev-2", clusterv1.MachineDeploymentNameLabel: "dev-2-md-0"}},
			Spec: clusterv1.MachineSpec{ClusterName: "dev-2", Version: "v1.37.2", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("x")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "LocalMachine", Name: "x"}},
		}
		if err := e.Kube.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineNodeReadyCondition, Status: ready, Reason: "NodeReady"})
		m.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: fmt.Sprintf("127.77.9.%d", 20+i)}}
		if err := e.Kube.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	a = call(t, e, http.MethodGet, "/fleet", op, nil)
	list = nil
	a.decode(t, &list)
	var workers []string
	for _, w := range list[1].Workers {
		workers = append(workers, fmt.Sprintf("%s:%s:%s:%t", w.Name, w.Version, w.Address, w.Healthy))
	}
	if got, want := strings.Join(workers, " "), "dev-2-md-0-x-0:v1.37.2:127.77.9.20:true dev-2-md-0-x-1:v1.37.2:127.77.9.21:false"; got != want || len(list[1].Machines) != 0 || len(list[0].Workers) != 0 {
		t.Errorf("dev-2's workers = %s (control plane %+v, dev-1's workers %+v), want %s", got, list[1].Machines, list[0].Workers, want)
	}

	// Deletion: only local clusters, none a fleet upgrade rolls, none
	// while the fleet starts.
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/nope", op, nil); a.status != http.StatusNotFound || !strings.Contains(a.err().Message, "no cluster default/nope") {
		t.Errorf("deleting a missing cluster: %d %s, want 404", a.status, a.body)
	}
	e.CreateCluster(t, ns, "hetzner-1", "v1.36.3", nil)
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/hetzner-1", op, nil); a.status != http.StatusConflict || !strings.Contains(a.err().Message, "is not a local cluster") {
		t.Errorf("deleting a cluster of another provider: %d %s, want 409", a.status, a.body)
	}
	// The local cluster that took the platform's own plane over serves
	// the platform: deleting it would stop it.
	for _, o := range localinfra.ClusterObjects(localinfra.ClusterOptions{Namespace: ns, Name: "management", Version: "v1.36.3", ControlPlaneReplicas: 3,
		Block: netip.MustParsePrefix("127.77.250.0/24"), Plane: "management", PlaneEtcdURL: "https://127.0.0.1:2379"}) {
		if err := e.Kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/management", op, nil); a.status != http.StatusConflict ||
		!strings.Contains(a.err().Message, "serves the platform's own control plane") {
		t.Errorf("deleting the cluster that serves the platform's plane: %d %s, want 409", a.status, a.body)
	}
	if got := objects("management"); len(got) != 4 {
		t.Errorf("a refused deletion of the plane's cluster left %v", got)
	}
	fu := &fleetv1.FleetUpgrade{ObjectMeta: metav1.ObjectMeta{Name: "local-to-137"}, Spec: fleetv1.FleetUpgradeSpec{TargetVersion: "v1.37.2"}}
	if err := e.Kube.Create(ctx, fu); err != nil {
		t.Fatal(err)
	}
	fu.Status = fleetv1.FleetUpgradeStatus{Phase: fleetv1.FleetUpgradePhaseRolling, Clusters: []fleetv1.ClusterUpgradeStatus{
		{Name: ns + "/dev-1", Phase: fleetv1.ClusterUpgradePhaseUpgrading, FromVersion: "v1.36.3", ToVersion: "v1.37.2"},
		{Name: ns + "/dev-2", Phase: fleetv1.ClusterUpgradePhaseSkipped},
	}}
	if err := e.Kube.Status().Update(ctx, fu); err != nil {
		t.Fatal(err)
	}
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/dev-1", op, nil); a.status != http.StatusConflict ||
		!strings.Contains(a.err().Message, "fleet upgrade local-to-137 is rolling cluster default/dev-1") {
		t.Errorf("deleting a cluster under a fleet upgrade: %d %s, want 409", a.status, a.body)
	}
	fleet.SetNotReady(errors.New("Cluster API's managers are starting"))
	if a := call(t, e, http.MethodDelete, "/fleet/local-clusters/dev-2", op, nil); a.status != http.StatusServiceUnavailable {
		t.Errorf("deleting while the fleet starts: %d %s, want 503", a.status, a.body)
	}
	fleet.SetNotReady(nil)
	if got := objects("dev-1"); len(got) != 4 {
		t.Fatalf("refused deletions left %v of dev-1", got)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-2"}, cl); err != nil || !cl.DeletionTimestamp.IsZero() {
		t.Fatalf("dev-2 after a refused deletion: %v, deleting %v", err, cl.DeletionTimestamp)
	}

	// The upgrade is done with dev-1; an aborted upgrade left it paused.
	// Cluster API's finalizer keeps the Cluster until its machines are
	// gone; this test plays its part.
	fu.Status.Phase = fleetv1.FleetUpgradePhaseAborted
	if err := e.Kube.Status().Update(ctx, fu); err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1"}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.Paused = ptr.To(true)
	cl.Finalizers = append(cl.Finalizers, clusterv1.ClusterFinalizer)
	if err := e.Kube.Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	a = call(t, e, http.MethodDelete, "/fleet/local-clusters/dev-1", op, nil)
	wantStatus(t, "deleting dev-1", a, http.StatusAccepted)
	var del apiclient.LocalClusterDeletion
	a.decode(t, &del)
	if del.Name != ns+"/dev-1" || !del.Unpaused || !strings.HasPrefix(del.Message, "unpaused") {
		t.Errorf("deletion = %+v", del)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-1"}, cl); err != nil || cl.DeletionTimestamp.IsZero() || ptr.Deref(cl.Spec.Paused, true) {
		t.Errorf("dev-1 after its deletion: %v, deleting at %v, paused %v", err, cl.DeletionTimestamp, cl.Spec.Paused)
	}
	a = call(t, e, http.MethodDelete, "/fleet/local-clusters/dev-1", op, nil)
	wantStatus(t, "deleting dev-1 again", a, http.StatusAccepted)
	del = apiclient.LocalClusterDeletion{}
	a.decode(t, &del)
	if del.Unpaused || !strings.HasPrefix(del.Message, "being deleted already") {
		t.Errorf("second deletion = %+v", del)
	}
	a = call(t, e, http.MethodGet, "/fleet", op, nil)
	a.decode(t, &list)
	for _, c := range list {
		if (c.Name == ns+"/dev-1") != c.Deleting {
			t.Errorf("fleet shows %s deleting: %t", c.Name, c.Deleting)
		}
	}
	cl.Finalizers = nil
	if err := e.Kube.Update(ctx, cl); err != nil {
		t.Fatal(err)
	}

	var actions []string
	for _, x := range auditActions(t, e, "") {
		actions = append(actions, x.Action+":"+x.Target)
	}
	if got, want := strings.Join(actions, " "), "fleet.create:default/dev-1 fleet.create:default/dev-2 fleet.delete:default/dev-1"; got != want {
		t.Errorf("audit = %s, want %s", got, want)
	}
}
