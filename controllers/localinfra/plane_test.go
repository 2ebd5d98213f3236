package localinfra_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/test/platformtest"
)

// TestPlaneTakenOver has Cluster API take over the control plane it runs
// on, as make run's platform plane is: a LocalCluster with spec.plane
// adopts the plane's etcd and load balancer, the real KubeadmControlPlane
// makes three machines that join that load balancer with the plane's own
// authorities, and the plane's first kube-apiserver leaves. What the
// plane issued before (the admin's client certificate, a ServiceAccount
// token) and what it stored stay valid on the machines.
func TestPlaneTakenOver(t *testing.T) {
	t.Parallel() // on a management plane of its own
	versions := kubebin.KubeVersions()
	from := versions[len(versions)-2]
	f := localinfratest.Start(t, localinfratest.Options{Version: from, Plane: true})
	t.Cleanup(func() { noSecretLists(t, f) })
	ctx := context.Background()
	plane := f.Mgmt
	admin, err := kubernetes.NewForConfig(plane.RESTConfig()) // through the load balancer
	if err != nil {
		t.Fatal(err)
	}

	// What the plane holds and issued before Cluster API takes it over.
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before-takeover"}, Data: map[string]string{"k": "v"}}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant-tool"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "tenant-tool",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token

	authorities, err := plane.Authorities()
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "default", "management"
	o := localinfra.ClusterOptions{Namespace: ns, Name: name, Version: "v" + from, ControlPlaneReplicas: 3,
		Plane: localinfratest.PlaneName, PlaneEtcdURL: plane.Etcd().URL(), PlaneAuthorities: &authorities}
	o.APIServerExtraArgs = localinfratest.WireMVPArgs(o)
	f.CreateCluster(t, o)
	start := time.Now()
	f.WaitControlPlane(t, ns, name, "v"+from, 3, 10*time.Minute)
	t.Logf("three machines joined the plane in %s", time.Since(start).Round(time.Second))

	machines := planeMachines(t, f, ns, name)
	addrs := slices.Sorted(maps.Values(machines))
	if got, want := slices.Sorted(slices.Values(plane.LoadBalancer().Backends())), slices.Sorted(slices.Values(append(slices.Clone(addrs), plane.APIServer("bootstrap").Addr()))); !slices.Equal(got, want) {
		t.Errorf("the plane's load balancer sends to %v, want the three machines and the first apiserver %v", got, want)
	}
	// The plane's first kube-apiserver leaves: the machines serve it.
	if err := plane.StopAPIServer("bootstrap"); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(plane.LoadBalancer().Backends())); !slices.Equal(got, addrs) {
		t.Errorf("after the first apiserver left, the load balancer sends to %v, want the machines %v", got, addrs)
	}
	checkPlane(t, admin, plane.RESTConfig(), token, from)

	// The roll of the plane it runs on, by a FleetUpgrade and the real
	// KubeadmControlPlane under a tenant's load, is the continuity suite's
	// (test/continuity, wired).
}

// planeMachines returns the address (host:port) of each of the cluster's
// machines, by name: the host runs the three LocalMachines.
func planeMachines(t *testing.T, f *localinfratest.Fleet, ns, name string) map[string]string {
	t.Helper()
	addrs := map[string]string{}
	for _, m := range f.Host.Cluster(ns, name).Machines() {
		addrs[m.Name()] = m.Addr()
	}
	var lms infrav1.LocalMachineList
	if err := f.Client.List(context.Background(), &lms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lm := range lms.Items {
		names = append(names, lm.Name)
	}
	if got := slices.Sorted(maps.Keys(addrs)); len(got) != 3 || !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Fatalf("the host runs machines %v, the LocalMachines are %v: want the same three", got, names)
	}
	return addrs
}

// checkPlane checks through the plane's endpoint that what it stored and
// issued before the takeover is still there and valid, and that its
// machines of version run the control-plane components.
func checkPlane(t *testing.T, admin kubernetes.Interface, cfg *rest.Config, token, version string) {
	t.Helper()
	ctx := context.Background()
	// Every machine answers: each request goes to the next backend.
	for range 6 {
		cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "before-takeover", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "v" {
			t.Fatalf("the ConfigMap stored before the takeover: %v, %v", cm, err)
		}
	}
	tokenCfg := rest.AnonymousClientConfig(cfg)
	tokenCfg.BearerToken = token
	tool, err := kubernetes.NewForConfig(tokenCfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		review, err := tool.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the ServiceAccount token issued before the takeover: %v", err)
		}
		if got := review.Status.UserInfo.Username; got != "system:serviceaccount:default:tenant-tool" {
			t.Fatalf("the token authenticates as %q", got)
		}
	}
	platformtest.Eventually(t, time.Minute, "the plane's apiserver identity leases to be the machines'", func(ctx context.Context) error {
		leases, err := admin.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
		if err != nil {
			return err
		}
		if len(leases.Items) != 3 {
			var names []string
			for _, l := range leases.Items {
				names = append(names, ptr.Deref(l.Spec.HolderIdentity, ""))
			}
			return fmt.Errorf("%d identity leases: %v", len(leases.Items), names)
		}
		return nil
	})
	checkComponents(t, admin, "v"+version)
}
