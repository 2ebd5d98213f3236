package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// TestImageGC runs a Pod of image A, replaces it with a Pod of image B and
// checks that A's unpacked directory goes once unused for the minimum age
// while B's, in use, stays; and that A, used again, is unpacked anew and
// runs.
func TestImageGC(t *testing.T) {
	f := start(t, func(_ *fixture, o *node.Options) {
		o.ImageMinimumGCAge = 3 * time.Second
		o.ImageGCPeriod = 500 * time.Millisecond
	})
	ctx := context.Background()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)
	if _, err := f.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "env"}, StringData: map[string]string{"VERSION": "gc"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(f.StateDir, "images")
	unpacked := func(t *testing.T) []string {
		t.Helper()
		entries, err := os.ReadDir(images)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	// runs creates the Pod and waits until it serves.
	runs := func(t *testing.T, p *corev1.Pod) {
		t.Helper()
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 90*time.Second, p.Name+" is Ready and serves", func(ctx context.Context) error {
			got, err := f.getPod(ctx, ns, p.Name)
			if err != nil {
				return err
			}
			if !podReady(got) || got.Status.PodIP == "" {
				return fmt.Errorf("phase %s, containers %+v", got.Status.Phase, got.Status.ContainerStatuses)
			}
			code, body, err := nodetest.Get(ctx, "http://"+got.Status.PodIP+":8080/")
			if err != nil || code != 200 || strings.TrimSpace(body) != "gc" {
				return fmt.Errorf("GET /: %d %q %v", code, body, err)
			}
			return nil
		})
	}

	runs(t, f.webPod(ns, "a-1", pull))
	afterA := unpacked(t)
	if len(afterA) != 1 {
		t.Fatalf("unpacked images after A: %v, want one", afterA)
	}
	a := afterA[0]

	// B: the same app as a stack image, a release's image as the kube
	// driver runs it.
	b1 := f.webPod(ns, "b-1", pull)
	b1.Spec.Containers[0].Image = f.AppImage
	runs(t, b1)
	var b string
	for _, n := range unpacked(t) {
		if n != a {
			b = n
		}
	}
	if b == "" {
		t.Fatalf("unpacked images after B: %v, want A's and B's", unpacked(t))
	}

	if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "a-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 60*time.Second, "A's unpacked image is deleted, B's stays", func(ctx context.Context) error {
		if _, err := f.getPod(ctx, ns, "a-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a-1 still there: %v", err)
		}
		if got := unpacked(t); !slices.Equal(got, []string{b}) {
			return fmt.Errorf("unpacked images %v, want B's only (%s)", got, b)
		}
		return nil
	})

	// A again: unpacked anew, where it was, and running.
	runs(t, f.webPod(ns, "a-2", pull))
	if got := unpacked(t); !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Fatalf("unpacked images %v, want A's (%s) and B's (%s)", got, a, b)
	}
}
