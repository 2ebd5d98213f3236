package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/test/scheduler/fleettest"
)

// eventTimeout bounds how long a change takes to reach a watch: one
// informer event in bex-apiserver, one computation, one proxied event.
const eventTimeout = 20 * time.Second

// nextEvent reads w until an event of typ for cluster passes check (nil:
// any), and returns it; it fails at the deadline or when the watch ends.
// It reads nothing else of the API, so that no read computes the
// capacities in the watch's place.
func nextEvent(t *testing.T, w watch.Interface, typ watch.EventType, cluster string, check func(*schedulingv1alpha1.ClusterCapacity) error) *schedulingv1alpha1.ClusterCapacity {
	t.Helper()
	deadline := time.After(eventTimeout)
	var last error
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended waiting for %s %s (last: %v)", typ, cluster, last)
			}
			cc, ok := e.Object.(*schedulingv1alpha1.ClusterCapacity)
			if !ok {
				t.Fatalf("event %s of %T: %+v", e.Type, e.Object, e.Object)
			}
			if e.Type != typ || cc.Name != cluster {
				last = fmt.Errorf("%s %s", e.Type, cc.Name)
				continue
			}
			if check != nil {
				if last = check(cc); last != nil {
					continue
				}
			}
			return cc
		case <-deadline:
			t.Fatalf("no %s event for %s within %s (last: %v)", typ, cluster, eventTimeout, last)
		}
	}
}

// TestClusterCapacityWatch watches ClusterCapacities through the
// aggregator, as kubectl get -w and informers do: a Cluster API cluster
// seeded is ADDED, its cordon and its node's allocatable shrinking are
// MODIFIED, so is a Placement on it, and its deletion DELETED, each with a
// resourceVersion above the last; a watch from a resourceVersion no longer
// held gets 410 Gone.
func TestClusterCapacityWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc, err := client.NewWithWatch(env.mgmt.RESTConfig(), client.Options{Scheme: fleettest.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	var list schedulingv1alpha1.ClusterCapacityList
	if err := wc.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion == "" || len(list.Items) == 0 || list.Items[0].ResourceVersion == "" {
		t.Fatalf("list: resourceVersion %q, %d items", list.ResourceVersion, len(list.Items))
	}
	w, err := wc.Watch(ctx, &schedulingv1alpha1.ClusterCapacityList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatalf("watching clustercapacities: %v", err)
	}
	defer w.Stop()
	rv := mustRV(t, list.ResourceVersion)
	newer := func(cc *schedulingv1alpha1.ClusterCapacity) {
		t.Helper()
		got := mustRV(t, cc.ResourceVersion)
		if got <= rv {
			t.Fatalf("%s at resourceVersion %d, not above %d", cc.Name, got, rv)
		}
		rv = got
	}

	kubeconfig, err := os.ReadFile(env.work.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	epsilon := fleettest.Cluster{
		Name: "epsilon", Namespace: "fleet-epsilon", Region: "ap-south", SpecVersion: "v1.37.2",
		Versions: []fleettest.Version{{Version: "v1.37.2", Replicas: 1}},
		Pools:    []fleettest.Pool{{Name: "workers", Nodes: []fleettest.Node{{Name: "epsilon-w-1", CPU: "8", Memory: "16Gi", Pods: 110, Ready: true}}}},
	}
	if err := fleettest.Seed(ctx, env.admin, env.work8s, kubeconfig, epsilon); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.admin.Delete(context.Background(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-epsilon", Name: "epsilon"}})
	})
	newer(nextEvent(t, w, watch.Added, "epsilon", nil))
	// Its nodes are read after the Cluster shows: a change of its own.
	newer(nextEvent(t, w, watch.Modified, "epsilon", func(cc *schedulingv1alpha1.ClusterCapacity) error {
		if !cc.Status.AcceptsPlacements || cc.Status.Allocatable.CPU.Cmp(resource.MustParse("8")) != 0 {
			return fmt.Errorf("epsilon: accepts=%t (%s), cpu %s", cc.Status.AcceptsPlacements, cc.Status.Message, cc.Status.Allocatable.CPU.String())
		}
		return nil
	}))

	// Cordoned: the Cluster's annotation.
	cl := &clusterv1.Cluster{}
	if err := env.admin.Get(ctx, client.ObjectKey{Namespace: "fleet-epsilon", Name: "epsilon"}, cl); err != nil {
		t.Fatal(err)
	}
	base := cl.DeepCopy()
	if cl.Annotations == nil {
		cl.Annotations = map[string]string{}
	}
	cl.Annotations[schedulingv1alpha1.CordonedAnnotation] = "true"
	if err := env.admin.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	newer(nextEvent(t, w, watch.Modified, "epsilon", func(cc *schedulingv1alpha1.ClusterCapacity) error {
		if !cc.Status.Cordoned || cc.Status.Reason != schedulingv1alpha1.ReasonCordoned {
			return fmt.Errorf("epsilon: cordoned=%t reason=%s", cc.Status.Cordoned, cc.Status.Reason)
		}
		return nil
	}))

	// The workload cluster's node shrinks: an event of that cluster's own
	// apiserver.
	node := &corev1.Node{}
	if err := env.work8s.Get(ctx, client.ObjectKey{Name: "epsilon-w-1"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("6")
	if err := env.work8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	newer(nextEvent(t, w, watch.Modified, "epsilon", func(cc *schedulingv1alpha1.ClusterCapacity) error {
		if got := cc.Status.Pools[0].Allocatable.CPU; got.Cmp(resource.MustParse("6")) != 0 {
			return fmt.Errorf("epsilon/workers cpu %s", got.String())
		}
		return nil
	}))

	// A Placement on it: what it requests is part of its capacity.
	p := &schedulingv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "watched"},
		Spec:       schedulingv1alpha1.PlacementSpec{App: "watched", Cluster: "epsilon", Pool: "workers", Replicas: 2, Resources: res("1", "1Gi")},
	}
	if err := env.admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.admin.Delete(context.Background(), p) })
	newer(nextEvent(t, w, watch.Modified, "epsilon", func(cc *schedulingv1alpha1.ClusterCapacity) error {
		if got := figures(cc.Status.Requested); got != want("2", "2Gi", 2) {
			return fmt.Errorf("epsilon requested %s", got)
		}
		return nil
	}))

	// Deleted, with no finalizer to hold it: gone from the fleet.
	if err := env.admin.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-epsilon", Name: "epsilon"}}); err != nil {
		t.Fatal(err)
	}
	newer(nextEvent(t, w, watch.Deleted, "epsilon", nil))

	// A watch from a resourceVersion older than any held: 410 Gone, and
	// an informer lists again.
	_, err = wc.Watch(ctx, &schedulingv1alpha1.ClusterCapacityList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "1"}})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from resourceVersion 1: want 410 Gone, got %v", err)
	}
	// One watch per cluster, from "" with a field selector, as kubectl
	// get clustercapacity NAME -w: the current state, ADDED.
	one, err := wc.Watch(ctx, &schedulingv1alpha1.ClusterCapacityList{}, client.MatchingFields{"metadata.name": "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Stop()
	nextEvent(t, one, watch.Added, "alpha", nil)

	// kubectl get clustercapacities -w asks for tables: each event's
	// object is one.
	cs, err := kubernetes.NewForConfig(env.mgmt.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/scheduling.bex.co/v1alpha1/clustercapacities").
		Param("watch", "true").Param("timeoutSeconds", "2").Param("fieldSelector", "metadata.name=alpha").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("watching as a table: %v", err)
	}
	for _, s := range []string{`"type":"ADDED"`, `"kind":"Table"`, `"name":"Accepts"`, `"alpha"`} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("the table watch lacks %s: %s", s, raw)
		}
	}
}

func mustRV(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return v
}
