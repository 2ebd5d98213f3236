package runtimecreds

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestClusterOfKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		secret string
		want   string // "" for no Cluster
	}{
		{"w1-kubeconfig", "w1"},
		{"w1-kubeconfig-kubeconfig", "w1-kubeconfig"},
		{"w1-ca", ""},
		{"w1-etcd", ""},
		{"w1-md-0-x7k2p", ""},
		{"-kubeconfig", ""},
		{"kubeconfig", ""},
	} {
		s := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: tc.secret}}
		reqs := clusterOfKubeconfig(t.Context(), s)
		switch {
		case tc.want == "" && len(reqs) != 0:
			t.Errorf("%s: got %v, want no Cluster", tc.secret, reqs)
		case tc.want != "" && (len(reqs) != 1 || reqs[0].NamespacedName != types.NamespacedName{Namespace: "fleet", Name: tc.want}):
			t.Errorf("%s: got %v, want fleet/%s", tc.secret, reqs, tc.want)
		}
	}
}
