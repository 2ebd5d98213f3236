package fleetstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestNewCluster(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		deletion    *metav1.Time
		cordoned    bool
		deleting    bool
	}{
		{name: "plain"},
		{name: "cordoned", annotations: map[string]string{CordonedAnnotation: "true"}, cordoned: true},
		{name: "cordon annotation not true", annotations: map[string]string{CordonedAnnotation: "yes"}},
		{name: "being deleted", deletion: &now, deleting: true},
		{name: "cordoned and being deleted", annotations: map[string]string{CordonedAnnotation: "true"}, deletion: &now, cordoned: true, deleting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "alpha", Annotations: tc.annotations,
				DeletionTimestamp: tc.deletion, Finalizers: []string{clusterv1.ClusterFinalizer}}}
			fc := newCluster(cl)
			if fc.Cordoned != tc.cordoned || fc.Deleting != tc.deleting || fc.Standby || !fc.Healthy || fc.Source != SourceClusterAPI {
				t.Fatalf("newCluster = %+v, want cordoned=%t deleting=%t", fc, tc.cordoned, tc.deleting)
			}
		})
	}
}

// TestPoolNotReadySince: a pool whose nodes are all not Ready is not
// ready since the last of them left Ready (a node with no Ready condition
// counts from its creation); a pool with a ready node has no such time.
func TestPoolNotReadySince(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 3, 10, min, 0, 0, time.UTC)) }
	node := func(name string, ready corev1.ConditionStatus, since metav1.Time) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(0)}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: since}}
		}
		return n
	}
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Node{}, 0, cache.Indexers{})
	for _, n := range []*corev1.Node{
		node("down-1", corev1.ConditionFalse, at(5)),
		node("down-2", corev1.ConditionUnknown, at(7)),
		node("new", "", metav1.Time{}),
		node("up-1", corev1.ConditionTrue, at(1)),
		node("up-2", corev1.ConditionFalse, at(9)),
	} {
		if err := informer.GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "alpha"}}
	machine := func(pool, node string) clusterv1.Machine {
		return clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: node, Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: pool}},
			Spec:       clusterv1.MachineSpec{ClusterName: "alpha"},
			Status:     clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: node}},
		}
	}
	md := func(name string) clusterv1.MachineDeployment {
		return clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "alpha"}}
	}
	idx := &clusterIndex{
		deployments: deploymentsByCluster([]clusterv1.MachineDeployment{md("down"), md("fresh"), md("up")}),
		machines: machinesByDeployment([]clusterv1.Machine{
			machine("down", "down-1"), machine("down", "down-2"), machine("fresh", "new"), machine("up", "up-1"), machine("up", "up-2"),
		}),
	}
	got := map[string]Pool{}
	for _, p := range pools(idx, cl, &nodeWatch{informer: informer}) {
		got[p.Name] = p
	}
	for name, want := range map[string]time.Time{"down": at(7).Time, "fresh": at(0).Time, "up": {}} {
		if p := got[name]; !p.NotReadySince.Equal(want) {
			t.Errorf("pool %s (%d of %d ready): not ready since %v, want %v", name, p.ReadyNodes, p.Nodes, p.NotReadySince, want)
		}
	}
}
