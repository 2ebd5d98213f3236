package runtimecreds_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/runtimecreds"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/test/platformtest"
)

// TestRuntimeCredentialsInAManager runs the controller in a manager, as
// the controller manager does (its watches): a Cluster whose kubeconfig Secret
// appears after it gets its key; a tenant's first App has its namespace
// prepared on the cluster; the key goes with the Cluster.
func TestRuntimeCredentialsInAManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	mgmt, work, m, w := startFleet(ctx, t, "fleet", "bex", "globex")
	secret := types.NamespacedName{Namespace: "bex", Name: "bex-runtime-kubeconfigs"}
	mgr, err := ctrl.NewManager(mgmt.RESTConfig(), ctrl.Options{Scheme: controllers.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &runtimecreds.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Events: mgr.GetEventRecorder(runtimecreds.ControllerName),
		Secret: secret, FleetNamespace: "fleet"}
	if err := rc.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	w1 := newCluster(ctx, t, m, "w1")
	kubeconfig, err := os.ReadFile(work.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "w1-kubeconfig"}, Data: map[string][]byte{placed.KubeconfigKey: kubeconfig}}); err != nil {
		t.Fatal(err)
	}
	hasKey := func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := m.Get(ctx, secret, &s); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return len(s.Data["fleet.w1"]) > 0, nil
	}
	platformtest.Eventually(t, 2*time.Minute, "the key of w1", func(ctx context.Context) error {
		if ok, err := hasKey(ctx); !ok {
			return errors.Join(errors.New("no key"), err)
		}
		return nil
	})

	if err := m.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "globex", Name: "web"}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "globex prepared on w1", func(ctx context.Context) error {
		var n corev1.Namespace
		if err := w.Get(ctx, client.ObjectKey{Name: "globex"}, &n); err != nil {
			return err
		}
		if n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			return errors.New("not restricted")
		}
		return nil
	})

	if err := m.Delete(ctx, w1); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "w1's key gone", func(ctx context.Context) error {
		if ok, err := hasKey(ctx); ok || err != nil {
			return errors.Join(errors.New("still there"), err)
		}
		return nil
	})
}
