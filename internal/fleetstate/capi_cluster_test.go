package fleetstate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
