package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// TestUsageOfUnreadableNodes: an app without Pods has no usage
// (ErrNotFound), and an app whose running Pod is on a node that does not
// answer gets an error naming the node, not an empty usage. The usage of
// a node that answers is TestKubeUsage in node/, with bex-node.
func TestUsageOfUnreadableNodes(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	cp := cptest.StartBare(t)
	c := newClient(t, cp.RESTConfig())
	d, err := kube.New(cp.RESTConfig(), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tenant, app, nodeName = "usage", "web-app", "gone-1"
	// No controller manager makes the ServiceAccount that admission wants.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "default"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := d.Usage(ctx, tenant, app); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("the usage of an app without pods: %v, want ErrNotFound", err)
	}

	// A Node whose kubelet port nothing listens on, at a loopback
	// address (read directly: the apiserver proxies to none).
	ports, err := childproc.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(ports[0])
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: app + "-web-1", Labels: map[string]string{
			kube.LabelApp: app, kube.LabelManagedBy: "bex", kube.LabelProcess: runtime.WebProcess, kube.LabelRelease: "1"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: runtime.WebProcess, Image: "registry.bex.test/usage/web-app:1"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	u, err := d.Usage(ctx, tenant, app)
	if err == nil || !strings.Contains(err.Error(), "node "+nodeName) {
		t.Errorf("the usage of an app on a node that does not answer: %+v, %v; want an error naming node %s", u, err, nodeName)
	}
}
