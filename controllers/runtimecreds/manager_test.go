package runtimecreds_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
// the controller manager does (its watches): a Cluster whose kubeconfig
// Secret appears after it was looked at gets its key at once, though its
// next look would be Resync (10 minutes) away; a tenant's App placed on
// the cluster has its namespace prepared there at once, and a tenant whose
// App is placed nowhere has none until it is placed; the key goes with the Cluster; a
// kubeconfig Secret without Cluster API's label brings nothing, until it
// is labelled.
func TestRuntimeCredentialsInAManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	mgmt, work, m, w := startFleet(ctx, t, "fleet", "bex", "globex", "initech")
	secret := types.NamespacedName{Namespace: "bex", Name: "bex-runtime-kubeconfigs"}
	mgr, err := ctrl.NewManager(mgmt.RESTConfig(), ctrl.Options{Scheme: controllers.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	reader := &lookups{Reader: mgr.GetAPIReader(), missing: map[types.NamespacedName]bool{}}
	rc := &runtimecreds.Reconciler{Client: mgr.GetClient(), Reader: reader, Events: mgr.GetEventRecorder(runtimecreds.ControllerName),
		Secret: secret, FleetNamespace: "fleet"}
	if err := rc.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	kubeconfig, err := os.ReadFile(work.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	// kubeconfigSecret is the Secret of cluster as Cluster API writes it,
	// labelled with the cluster's name, or without that label.
	kubeconfigSecret := func(cluster string, labelled bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: cluster + "-kubeconfig"},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{placed.KubeconfigKey: kubeconfig}}
		if labelled {
			s.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
		}
		return s
	}
	hasKey := func(ctx context.Context, cluster string) (bool, error) {
		var s corev1.Secret
		if err := m.Get(ctx, secret, &s); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return len(s.Data["fleet."+cluster]) > 0, nil
	}
	waitKey := func(cluster string) {
		t.Helper()
		platformtest.Eventually(t, 2*time.Minute, "the key of "+cluster, func(ctx context.Context) error {
			if ok, err := hasKey(ctx, cluster); !ok {
				return errors.Join(errors.New("no key"), err)
			}
			return nil
		})
	}
	// waitLookedAt waits until the reconciler found the cluster's
	// kubeconfig Secret missing: its next look is Resync away, and only
	// the Secret's watch brings it back sooner.
	waitLookedAt := func(cluster string) {
		t.Helper()
		platformtest.Eventually(t, time.Minute, cluster+" looked at without its Secret", func(context.Context) error {
			if !reader.foundMissing(types.NamespacedName{Namespace: "fleet", Name: cluster + "-kubeconfig"}) {
				return errors.New("not yet")
			}
			return nil
		})
	}

	w1 := platformtest.CreateCluster(ctx, t, m, "fleet", "w1")
	waitLookedAt("w1")
	if err := m.Create(ctx, kubeconfigSecret("w1", true)); err != nil {
		t.Fatal(err)
	}
	waitKey("w1")

	// initech's app is made first, and placed nowhere yet; globex's is
	// placed on w1. Only globex's namespace is prepared on w1, until
	// initech's app is placed there too.
	initech := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "initech", Name: "api"}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
	if err := m.Create(ctx, initech); err != nil {
		t.Fatal(err)
	}
	placeApp(ctx, t, m, "globex", "web", "w1")
	prepared := func(tenant string) {
		t.Helper()
		platformtest.Eventually(t, time.Minute, tenant+" prepared on w1", func(ctx context.Context) error {
			var n corev1.Namespace
			if err := w.Get(ctx, client.ObjectKey{Name: tenant}, &n); err != nil {
				return err
			}
			if n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
				return errors.New("not restricted")
			}
			return nil
		})
	}
	prepared("globex")
	if err := w.Get(ctx, client.ObjectKey{Name: "initech"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("w1 has the namespace of initech, whose app is placed nowhere: %v", err)
	}
	setCluster(ctx, t, m, initech, "w1")
	prepared("initech")

	if err := m.Delete(ctx, w1); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "w1's key gone", func(ctx context.Context) error {
		if ok, err := hasKey(ctx, "w1"); ok || err != nil {
			return errors.Join(errors.New("still there"), err)
		}
		return nil
	})

	// w2's Secret, without Cluster API's label, is created before w3's,
	// which has it: were w2's watched, its event would come first and the
	// one worker would write w2's key before w3's.
	platformtest.CreateCluster(ctx, t, m, "fleet", "w2")
	waitLookedAt("w2")
	w2Secret := kubeconfigSecret("w2", false)
	if err := m.Create(ctx, w2Secret); err != nil {
		t.Fatal(err)
	}
	platformtest.CreateCluster(ctx, t, m, "fleet", "w3")
	waitLookedAt("w3")
	if err := m.Create(ctx, kubeconfigSecret("w3", true)); err != nil {
		t.Fatal(err)
	}
	waitKey("w3")
	if ok, err := hasKey(ctx, "w2"); err != nil {
		t.Fatal(err)
	} else if ok {
		t.Fatal("w2 has a key: its Secret without Cluster API's label brought it back")
	}
	base := w2Secret.DeepCopy()
	w2Secret.Labels = map[string]string{clusterv1.ClusterNameLabel: "w2"}
	if err := m.Patch(ctx, w2Secret, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitKey("w2")
}

// lookups is the reconciler's Reader, which remembers the Secrets it
// found missing.
type lookups struct {
	client.Reader
	mu      sync.Mutex
	missing map[types.NamespacedName]bool
}

func (l *lookups) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := l.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*corev1.Secret); ok && apierrors.IsNotFound(err) {
		l.mu.Lock()
		l.missing[key] = true
		l.mu.Unlock()
	}
	return err
}

func (l *lookups) foundMissing(key types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.missing[key]
}
