package mvp

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPath(t *testing.T) {
	apps := schema.GroupVersionResource{Group: "platform.bex.co", Version: "v1alpha1", Resource: "apps"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range []struct {
		gvr             schema.GroupVersionResource
		namespace, name string
		want            string
	}{
		{apps, "", "", "/apis/platform.bex.co/v1alpha1/apps"},
		{apps, "t1", "", "/apis/platform.bex.co/v1alpha1/namespaces/t1/apps"},
		{apps, "t1", "web", "/apis/platform.bex.co/v1alpha1/namespaces/t1/apps/web"},
		{pods, "", "", "/api/v1/pods"},
		{pods, "kube-system", "p", "/api/v1/namespaces/kube-system/pods/p"},
	} {
		if got := Path(tc.gvr, tc.namespace, tc.name); got != tc.want {
			t.Errorf("Path(%v, %q, %q) = %q, want %q", tc.gvr, tc.namespace, tc.name, got, tc.want)
		}
	}
	if ListPath(apps) != Path(apps, "", "") {
		t.Error("ListPath differs from Path with no namespace and name")
	}
}
