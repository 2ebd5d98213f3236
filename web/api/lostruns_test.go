package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apitest"
)

// TestLostRunsPodsStopped: the API server that marks runs lost stops
// their Pods on the workload cluster through its RunReaper (the placed
// driver over a kube driver on a real apiserver, where no node runs the
// Pods): an attached
// lost run's Pod is deleted, a detached one's is stopped at once by its
// activeDeadlineSeconds lowered to 1 and kept for its lines, and the Pod
// of a run that is not lost runs on.
func TestLostRunsPodsStopped(t *testing.T) {
	cp := cptest.Start(t)
	drv, err := kube.New(cp.RESTConfig(), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewDatabase(t)
	st, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	// As the embedded platform has it: the placed driver, which forwards
	// to every cluster at hand.
	clusters, err := placed.New(t.Context(), placed.Options{Clusters: placed.Static{"workload": {Driver: drv}}, Ledger: st})
	if err != nil {
		t.Fatal(err)
	}
	e := apitest.StartWith(t, cp, apitest.Options{DatabaseURL: dbURL, RunHeartbeat: 200 * time.Millisecond, RunLostAfter: time.Second, RunReaper: clusters})
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "reaped")
	createApp(t, e, token, "web")
	if err := e.Kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Name, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The runs of a server that died, whose Pods run on: one attached,
	// one detached.
	dead := uuid.NewString()
	attached, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 1, Command: []string{"sleep", "600"}, CreatedBy: "a@reaped.test", ServerID: dead})
	if err != nil {
		t.Fatal(err)
	}
	detached, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 1, Command: []string{"sleep", "600"}, CreatedBy: "a@reaped.test", ServerID: dead, Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	plant := func(name, runID string, logged bool) {
		t.Helper()
		labels := map[string]string{kube.LabelRunOf: "web", kube.LabelRun: name, kube.LabelManagedBy: "bex", kube.LabelRunID: runID}
		if logged {
			labels[kube.LabelRunInstance] = "run.2"
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Name, Name: name, Labels: labels},
			Spec: corev1.PodSpec{
				RestartPolicy:         corev1.RestartPolicyNever,
				Containers:            []corev1.Container{{Name: "run", Image: "registry.bex.test/reaped/web:1", Command: []string{"sleep", "600"}}},
				ActiveDeadlineSeconds: ptr.To(int64(3600)),
			},
		}
		if err := e.Kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	plant("web-run-1-lost", attached.ID, false)
	plant("web-run-2-lost", detached.ID, true)
	plant("web-run-3-live", uuid.NewString(), false)

	deadline := func(name string) (int64, error) {
		var pod corev1.Pod
		if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: tenant.Name, Name: name}, &pod); err != nil {
			return 0, err
		}
		return ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0), nil
	}
	platformtest.Eventually(t, time.Minute, "the lost runs' pods stopped", func(context.Context) error {
		if running, err := e.Store.RunningRunsOf(ctx, tenant.ID, "web"); err != nil || len(running) != 0 {
			return fmt.Errorf("%d runs running (%v); want both lost", len(running), err)
		}
		if _, err := deadline("web-run-1-lost"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the attached lost run's pod: %v", err)
		}
		if d, err := deadline("web-run-2-lost"); err != nil || d != 1 {
			return fmt.Errorf("the detached lost run's pod: deadline %d, %v; want 1", d, err)
		}
		return nil
	})
	if d, err := deadline("web-run-3-live"); err != nil || d != 3600 {
		t.Errorf("the pod of a run that is not lost: deadline %d, %v; want it running on with 3600", d, err)
	}
}
