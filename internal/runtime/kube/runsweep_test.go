package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

// runPod is a run Pod as the driver makes one, planted by a test: name
// in ns, of app, with extra labels, its status set to phase with its
// container terminated finished ago when finished is not zero; with
// build, a build Pod of app.
type runPod struct {
	ns, name, app string
	labels        map[string]string
	phase         corev1.PodPhase
	finished      time.Duration
	build         bool
}

func plantRunPod(t *testing.T, c client.Client, p runPod) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{kube.LabelRunOf: p.app, kube.LabelRun: p.name, kube.LabelManagedBy: "bex", kube.LabelComponent: "run"}
	if p.build {
		labels = map[string]string{kube.LabelBuildOf: p.app, kube.LabelManagedBy: "bex", kube.LabelComponent: "build"}
	}
	if p.app == "" {
		labels = map[string]string{}
	}
	for k, v := range p.labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: labels},
		Spec:       restrictedPodSpec("run", "registry.bex.test/acme/shop:1", 3600),
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("planting pod %s/%s: %v", p.ns, p.name, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: labels}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatalf("planting secret %s/%s: %v", p.ns, p.name, err)
	}
	if p.phase == "" {
		return
	}
	pod.Status.Phase = p.phase
	started := metav1.NewTime(time.Now().Add(-p.finished - time.Second))
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	if p.finished != 0 {
		code := int32(0)
		if p.phase == corev1.PodFailed {
			code = 143
		}
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, StartedAt: started, FinishedAt: metav1.NewTime(time.Now().Add(-p.finished))}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "run", Image: pod.Spec.Containers[0].Image, State: state}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatalf("setting the status of pod %s/%s: %v", p.ns, p.name, err)
	}
}

// restrictedPodSpec is the spec of a Pod the restricted profile admits,
// of one container name running image, with activeDeadlineSeconds
// deadline and no grace period: what a test plants as a Pod the driver
// left.
func restrictedPodSpec(name, image string, deadline int64) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{Name: name, Image: image, SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(10000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		ActiveDeadlineSeconds:         ptr.To(deadline),
		TerminationGracePeriodSeconds: ptr.To(int64(0)),
		AutomountServiceAccountToken:  ptr.To(false),
	}
}

// podsLeft returns which of names are still Pods in ns, and what
// activeDeadlineSeconds each has.
func podsLeft(t *testing.T, c client.Client, ns string, names ...string) map[string]int64 {
	t.Helper()
	left := map[string]int64{}
	for _, n := range names {
		var pod corev1.Pod
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, &pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			left[n] = ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0)
		}
	}
	return left
}

func secretLeft(t *testing.T, c client.Client, ns, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// testRunSweep, on an apiserver where no node runs Pods and d keeps a
// detached run's Pod 10 minutes: SweepRuns deletes, in every namespace
// and without a new run, the kept Pods whose command ended longer ago,
// and keeps the younger ones, the runs that run and the Pods that are no
// run's; and the build Pods that ended more than a minute ago, keeping a
// younger one and one that builds.
func testRunSweep(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	for _, ns := range []string{"sweep-a", "sweep-b"} {
		if err := d.PrepareNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		defaultServiceAccount(t, c, ns)
	}
	logged := func(n int) map[string]string {
		return map[string]string{kube.LabelRunInstance: fmt.Sprintf("run.%d", n)}
	}
	for _, p := range []runPod{
		{ns: "sweep-a", name: "shop-run-1-old", app: "shop", labels: logged(1), phase: corev1.PodSucceeded, finished: 20 * time.Minute},
		{ns: "sweep-a", name: "shop-run-2-stopped", app: "shop", labels: logged(2), phase: corev1.PodFailed, finished: 11 * time.Minute},
		{ns: "sweep-a", name: "shop-run-3-young", app: "shop", labels: logged(3), phase: corev1.PodSucceeded, finished: 5 * time.Minute},
		{ns: "sweep-a", name: "shop-run-4-running", app: "shop", labels: logged(4), phase: corev1.PodRunning},
		{ns: "sweep-a", name: "not-a-run", phase: corev1.PodSucceeded, finished: time.Hour},
		{ns: "sweep-b", name: "blog-run-5-old", app: "blog", labels: logged(5), phase: corev1.PodSucceeded, finished: time.Hour},
		{ns: "sweep-b", name: "blog-run-6-young", app: "blog", labels: logged(6), phase: corev1.PodFailed, finished: time.Minute},
		{ns: "sweep-b", name: "blog-build-old", app: "blog", build: true, phase: corev1.PodFailed, finished: 5 * time.Minute},
		{ns: "sweep-b", name: "blog-build-young", app: "blog", build: true, phase: corev1.PodSucceeded, finished: 10 * time.Second},
		{ns: "sweep-b", name: "blog-build-running", app: "blog", build: true, phase: corev1.PodRunning},
	} {
		plantRunPod(t, c, p)
	}
	if err := d.SweepRuns(ctx); err != nil {
		t.Fatal(err)
	}
	got := podsLeft(t, c, "sweep-a", "shop-run-1-old", "shop-run-2-stopped", "shop-run-3-young", "shop-run-4-running", "not-a-run")
	for n, v := range podsLeft(t, c, "sweep-b", "blog-run-5-old", "blog-run-6-young", "blog-build-old", "blog-build-young", "blog-build-running") {
		got[n] = v
	}
	for _, n := range []string{"shop-run-1-old", "shop-run-2-stopped", "blog-run-5-old", "blog-build-old"} {
		if _, ok := got[n]; ok {
			t.Errorf("pod %s, kept past its time, is left after a sweep", n)
		}
	}
	for _, n := range []string{"shop-run-3-young", "shop-run-4-running", "not-a-run", "blog-run-6-young", "blog-build-young", "blog-build-running"} {
		if _, ok := got[n]; !ok {
			t.Errorf("pod %s was deleted by a sweep; want it kept", n)
		}
	}
}

// testEndRun, on an apiserver where no node runs Pods: EndRun deletes
// the Pod of an attached run marked with the run's ID, with its Secret;
// lowers a detached run's Pod's activeDeadlineSeconds to 1, keeping the
// Pod for its lines, and deletes its Secret; leaves other runs alone;
// and a sweep deletes a Pod past its lowered deadline that no kubelet
// stopped. A Run whose streams carry a run ID labels its Pod so, and
// EndRun finds it while the Run waits for it to start.
func testEndRun(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	const ns = "endrun"
	if err := d.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, ns)
	id := func(s string) map[string]string { return map[string]string{kube.LabelRunID: s} }
	detached := id("id-2")
	detached[kube.LabelRunInstance] = "run.2"
	for _, p := range []runPod{
		{ns: ns, name: "shop-run-1", app: "shop", labels: id("id-1"), phase: corev1.PodRunning},
		{ns: ns, name: "shop-run-2", app: "shop", labels: detached, phase: corev1.PodRunning},
		{ns: ns, name: "shop-run-3", app: "shop", labels: id("id-3"), phase: corev1.PodRunning},
	} {
		plantRunPod(t, c, p)
	}
	for _, runID := range []string{"id-1", "id-2", "id-1", "id-unknown"} {
		if err := d.EndRun(ctx, ns, "shop", runID); err != nil {
			t.Fatalf("EndRun %s: %v", runID, err)
		}
	}
	if err := d.EndRun(ctx, ns, "shop", "not a label value"); err == nil {
		t.Error("EndRun with an ID no pod can be labelled with: no error")
	}
	left := podsLeft(t, c, ns, "shop-run-1", "shop-run-2", "shop-run-3")
	if _, ok := left["shop-run-1"]; ok {
		t.Error("the attached lost run's pod is left after EndRun")
	}
	if left["shop-run-2"] != 1 {
		t.Errorf("the detached lost run's pod after EndRun: deadline %d (0: gone); want kept with 1", left["shop-run-2"])
	}
	if left["shop-run-3"] != 3600 {
		t.Errorf("another run's pod after EndRun: deadline %d (0: gone); want 3600", left["shop-run-3"])
	}
	for name, want := range map[string]bool{"shop-run-1": false, "shop-run-2": false, "shop-run-3": true} {
		if got := secretLeft(t, c, ns, name); got != want {
			t.Errorf("secret %s left: %v, want %v", name, got, want)
		}
	}
	// No kubelet stops it at its deadline: the sweep deletes it past it.
	platformtest.Eventually(t, 30*time.Second, "the sweep to delete the pod past its lowered deadline", func(context.Context) error {
		if err := d.SweepRuns(ctx); err != nil {
			return err
		}
		if _, ok := podsLeft(t, c, ns, "shop-run-2")["shop-run-2"]; ok {
			return errors.New("still there")
		}
		return nil
	})

	// A Run's Pod, labelled with the ID its caller gave, ended by EndRun
	// while the Run waits for it to start.
	rel := shopRelease(1, "registry.bex.test/endrun/shop:1")
	rel.Tenant = ns
	done := make(chan error, 1)
	go func() {
		_, err := d.Run(ctx, rel, runtime.Command{Args: []string{"sleep", "600"}, Name: "run.4", Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{RunID: "id-4"}, nil
		}})
		done <- err
	}()
	platformtest.Eventually(t, 30*time.Second, "the run's pod labelled with its ID", func(context.Context) error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{kube.LabelRunID: "id-4", kube.LabelRunOf: "shop"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	if err := d.EndRun(ctx, ns, "shop", "id-4"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "was deleted before it was started") {
			t.Errorf("Run whose pod EndRun deleted: %v; want it deleted before it started", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not end once EndRun deleted its pod")
	}
}
