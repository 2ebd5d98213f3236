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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

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

// unplaceable asks, for the Pod's container, more CPU than the node
// has: the scheduler leaves the Pod pending, and no node stops it at its
// deadline.
func unplaceable(spec corev1.PodSpec) corev1.PodSpec {
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	return spec
}

// podsLeft returns which of names are still Pods in ns, not being
// deleted, and what activeDeadlineSeconds each has.
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
		case pod.DeletionTimestamp == nil:
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

// runPodOf returns the name of the Pod of run.<index> of the app in ns,
// once there is one.
func runPodOf(t *testing.T, c client.Client, ns, app string, index int) string {
	t.Helper()
	var name string
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("the pod of run.%d of %s", index, app), func(ctx context.Context) error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{kube.LabelRunOf: app, kube.LabelRunInstance: fmt.Sprintf("run.%d", index)}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		name = pods.Items[0].Name
		return nil
	})
	return name
}

// detached runs args as run.<index> of rel, its output to the app's log,
// in the background until ctx ends; the channel gets Run's error.
func detached(ctx context.Context, d *kube.Driver, rel runtime.Release, index int, runID string, args ...string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := d.Run(ctx, rel, runtime.Command{Args: args, Name: fmt.Sprintf("run.%d", index), Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{Log: &runtime.LogAs{Process: "run", Index: index}, RunID: runID}, nil
		}})
		done <- err
	}()
	return done
}

// ended waits until the Pod has ended (Succeeded or Failed, its
// container terminated) and returns when.
func ended(t *testing.T, c client.Client, ns, name string) time.Time {
	t.Helper()
	var at time.Time
	platformtest.Eventually(t, time.Minute, "pod "+name+" ended", func(ctx context.Context) error {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				at = term.FinishedAt.Time
				return nil
			}
		}
		return fmt.Errorf("no container terminated: %+v", pod.Status.ContainerStatuses)
	})
	return at
}

// testRunSweep, with d keeping a detached run's Pod retention after its
// command ended: SweepRuns deletes, in every namespace and without a new
// run, the kept Pods whose command ended longer ago, and keeps the
// younger ones, the runs that run and the Pods that are no run's; and
// the build Pods past their deadline that no node stopped, keeping one
// that ended and one that builds. The runs and builds run on the node.
func testRunSweep(t *testing.T, k *cluster, d *kube.Driver, retention time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := k.c
	for _, ns := range []string{"sweep-a", "sweep-b"} {
		if err := d.PrepareNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		defaultServiceAccount(t, c, ns)
	}
	rel := func(ns, app string) runtime.Release {
		r := shopRelease(1, k.image1)
		r.Tenant, r.App = ns, app
		return r
	}
	// Runs whose command ended before the retention: one on its own, one
	// stopped.
	stopCtx, stop := context.WithCancelCause(ctx)
	var old []<-chan error
	old = append(old, detached(ctx, d, rel("sweep-a", "shop"), 1, "", "true"))
	old = append(old, detached(stopCtx, d, rel("sweep-a", "shop"), 2, "", "sleep", "600"))
	old = append(old, detached(ctx, d, rel("sweep-b", "blog"), 5, "", "true"))
	run1, run2, run5 := runPodOf(t, c, "sweep-a", "shop", 1), runPodOf(t, c, "sweep-a", "shop", 2), runPodOf(t, c, "sweep-b", "blog", 5)
	platformtest.Eventually(t, time.Minute, "run.2 running", func(ctx context.Context) error {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "sweep-a", Name: run2}, &pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	stop(errors.New("stopped by the user"))
	for _, done := range old {
		if err := <-done; err != nil {
			t.Fatalf("an old run: %v", err)
		}
	}
	last := ended(t, c, "sweep-a", run1)
	for _, p := range []struct{ ns, name string }{{"sweep-a", run2}, {"sweep-b", run5}} {
		if at := ended(t, c, p.ns, p.name); at.After(last) {
			last = at
		}
	}
	// A Pod that is no run's, ended.
	notARun := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "sweep-a", Name: "not-a-run"}, Spec: restrictedPodSpec("c", k.image1, 3600)}
	notARun.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "true"}
	notARun.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := c.Create(ctx, notARun); err != nil {
		t.Fatal(err)
	}
	ended(t, c, "sweep-a", "not-a-run")
	// Past the retention of the old ones (the node's clock is this one).
	time.Sleep(time.Until(last.Add(retention + time.Second)))

	// Builds of blog: one whose agent ended (idle 3 s), one that
	// builds.
	spec := kube.BuildSpec{Tenant: "sweep-b", App: "blog", Image: k.image1, Timeout: time.Minute}
	idle := spec
	idle.IdleTimeout = 3 * time.Second
	if _, err := d.StartBuild(ctx, idle); err != nil {
		t.Fatal(err)
	}
	builds := func() []string {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("sweep-b"), client.MatchingLabels{kube.LabelBuildOf: "blog"}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return names
	}
	ended(t, c, "sweep-b", builds()[0])
	if _, err := d.StartBuild(ctx, spec); err != nil {
		t.Fatal(err)
	}
	kept := builds()

	// Younger runs, of other apps: a run of shop or blog would delete
	// their old ones itself.
	if err := <-detached(ctx, d, rel("sweep-a", "cart"), 3, "", "true"); err != nil {
		t.Fatal(err)
	}
	if err := <-detached(ctx, d, rel("sweep-b", "news"), 6, "", "sh", "-c", "exit 1"); err != nil {
		t.Fatal(err)
	}
	running := detached(ctx, d, rel("sweep-a", "cart"), 4, "", "sleep", "600")
	run3, run4, run6 := runPodOf(t, c, "sweep-a", "cart", 3), runPodOf(t, c, "sweep-a", "cart", 4), runPodOf(t, c, "sweep-b", "news", 6)
	ended(t, c, "sweep-a", run3)
	ended(t, c, "sweep-b", run6)

	// Then a build Pod past its deadline that no node stopped (after the
	// other builds: their StartBuild would delete it).
	plant := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sweep-b", Name: "blog-build-old", Labels: map[string]string{
			kube.LabelBuildOf: "blog", kube.LabelManagedBy: "bex", kube.LabelComponent: "build"}},
		Spec: unplaceable(restrictedPodSpec("build", k.image1, 1)),
	}
	if err := c.Create(ctx, plant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-running
		for _, app := range []struct{ ns, app string }{{"sweep-a", "shop"}, {"sweep-a", "cart"}, {"sweep-b", "blog"}, {"sweep-b", "news"}} {
			_ = d.Remove(context.Background(), app.ns, app.app)
		}
		_ = c.Delete(context.Background(), notARun)
	})
	// Past its deadline of 1 s (and its grace period of none).
	time.Sleep(2 * time.Second)

	if err := d.SweepRuns(ctx); err != nil {
		t.Fatal(err)
	}
	got := podsLeft(t, c, "sweep-a", run1, run2, run3, run4, "not-a-run")
	for n, v := range podsLeft(t, c, "sweep-b", append([]string{run5, run6, "blog-build-old"}, kept...)...) {
		got[n] = v
	}
	for _, n := range []string{run1, run2, run5, "blog-build-old"} {
		if _, ok := got[n]; ok {
			t.Errorf("pod %s, kept past its time, is left after a sweep", n)
		}
	}
	for _, n := range append([]string{run3, run4, "not-a-run", run6}, kept...) {
		if _, ok := got[n]; !ok {
			t.Errorf("pod %s was deleted by a sweep; want it kept", n)
		}
	}
}

// testEndRun: EndRun deletes the Pod of an attached run marked with the
// run's ID, with its Secret; lowers a detached run's Pod's
// activeDeadlineSeconds to 1, keeping the Pod for its lines, which the
// node stops at that deadline, and deletes its Secret; leaves other runs
// alone. A Run whose streams carry a run ID labels its Pod so, and
// EndRun finds it while the Run waits for it to start (the scheduler
// cannot place it).
func testEndRun(t *testing.T, k *cluster, d *kube.Driver) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := k.c
	const ns = "endrun"
	if err := d.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, ns)
	rel := shopRelease(1, k.image1)
	rel.Tenant = ns
	attached := func(index int, runID string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := d.Run(ctx, rel, runtime.Command{Args: []string{"sleep", "600"}, Name: fmt.Sprintf("run.%d", index), Attach: func(int) (runtime.Streams, error) {
				return runtime.Streams{Stdout: &platformtest.SyncBuffer{}, RunID: runID}, nil
			}})
			done <- err
		}()
		return done
	}
	runs := []<-chan error{attached(1, "id-1"), detached(ctx, d, rel, 2, "id-2", "sleep", "600"), attached(3, "id-3")}
	t.Cleanup(func() {
		cancel()
		for _, done := range runs {
			<-done
		}
		_ = d.Remove(context.Background(), ns, "shop")
	})
	names := map[string]string{} // run ID → pod
	platformtest.Eventually(t, time.Minute, "the three runs running", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{kube.LabelRunOf: "shop"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s %s", p.Name, p.Status.Phase)
			}
			names[p.Labels[kube.LabelRunID]] = p.Name
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	deadline3 := podsLeft(t, c, ns, names["id-3"])[names["id-3"]]
	for _, runID := range []string{"id-1", "id-2", "id-1", "id-unknown"} {
		if err := d.EndRun(ctx, ns, "shop", runID); err != nil {
			t.Fatalf("EndRun %s: %v", runID, err)
		}
	}
	if err := d.EndRun(ctx, ns, "shop", "not a label value"); err == nil {
		t.Error("EndRun with an ID no pod can be labelled with: no error")
	}
	left := podsLeft(t, c, ns, names["id-1"], names["id-2"], names["id-3"])
	if _, ok := left[names["id-1"]]; ok {
		t.Error("the attached lost run's pod is left after EndRun")
	}
	if left[names["id-2"]] != 1 {
		t.Errorf("the detached lost run's pod after EndRun: deadline %d (0: gone); want kept with 1", left[names["id-2"]])
	}
	if left[names["id-3"]] != deadline3 {
		t.Errorf("another run's pod after EndRun: deadline %d (0: gone); want %d", left[names["id-3"]], deadline3)
	}
	for id, want := range map[string]bool{"id-1": false, "id-2": false, "id-3": true} {
		if got := secretLeft(t, c, ns, names[id]); got != want {
			t.Errorf("secret of %s left: %v, want %v", id, got, want)
		}
	}
	// The node stops the detached run at its lowered deadline; its Pod
	// stays, with its lines.
	platformtest.Eventually(t, time.Minute, "the detached run's pod stopped at its deadline, kept", func(ctx context.Context) error {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names["id-2"]}, &pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodFailed || pod.Status.Reason != "DeadlineExceeded" || pod.DeletionTimestamp != nil {
			return fmt.Errorf("phase %s, reason %s, deleted %v", pod.Status.Phase, pod.Status.Reason, pod.DeletionTimestamp)
		}
		return nil
	})

	// A Run's Pod, labelled with the ID its caller gave, ended by EndRun
	// while the Run waits for it to start.
	waiting := rel
	waiting.Resources.CPU = "64"
	done := make(chan error, 1)
	go func() {
		_, err := d.Run(ctx, waiting, runtime.Command{Args: []string{"sleep", "600"}, Name: "run.4", Attach: func(int) (runtime.Streams, error) {
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
