package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/controlplane/cptest"
)

// TestRefusedStream: an apiserver without PodLogsQuerySplitStreams (off
// by default) refuses a log request that names a stream, before it asks
// any node; the driver takes that as the cluster's word and reads the
// merged log from then on, every line stdout. Another refusal of a log
// request (a container the Pod does not have) is not taken for it.
func TestRefusedStream(t *testing.T) {
	cp := cptest.StartBare(t)
	ctx := t.Context()
	d, err := New(cp.RESTConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the controller manager, which does not run here, would make.
	if _, err := d.cs.CoreV1().ServiceAccounts("acme").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.test/web:1"}}}}
	if _, err := d.cs.CoreV1().Pods("acme").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	_, err = d.cs.CoreV1().Pods("acme").GetLogs("web-1", &corev1.PodLogOptions{Container: "worker"}).Stream(ctx)
	if !apierrors.IsBadRequest(err) || d.refusedStream(err) || !d.splitStreams() {
		t.Fatalf("the log of a container the Pod does not have: %v; refused as a stream: %v", err, !d.splitStreams())
	}
	_, err = d.cs.CoreV1().Pods("acme").GetLogs("web-1", &corev1.PodLogOptions{Container: "web", Stream: new(corev1.LogStreamStderr)}).Stream(ctx)
	if !d.refusedStream(err) {
		t.Fatalf("stderr alone: %v; want it refused as a stream", err)
	}
	if d.splitStreams() {
		t.Error("the driver asks for a stream apart after the cluster refused")
	}
}
