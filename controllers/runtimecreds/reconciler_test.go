package runtimecreds_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers/runtimecreds"
	"bex.co/bex/controllers/scheme"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/test/platformtest"
)

// startFleet starts a management apiserver with the platform's and
// Cluster API's CRDs and the namespaces, and a bare workload apiserver:
// both, and a client of each.
func startFleet(ctx context.Context, t *testing.T, namespaces ...string) (mgmt, work *controlplane.ControlPlane, m, w client.Client) {
	t.Helper()
	mgmt = cptest.Start(t)
	work = cptest.StartBare(t)
	if _, err := kubeapply.InstallCRDs(ctx, mgmt.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	m, err := client.New(mgmt.RESTConfig(), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	w, err = client.New(work.RESTConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		if err := m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return mgmt, work, m, w
}

// placeApp creates the App tenant/name placed on cluster.
func placeApp(ctx context.Context, t *testing.T, m client.Client, tenant, name, cluster string) {
	t.Helper()
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
	if err := m.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	setCluster(ctx, t, m, app, cluster)
}

// setCluster places app on cluster, as the App controller does.
func setCluster(ctx context.Context, t *testing.T, m client.Client, app *platformv1alpha1.App, cluster string) {
	t.Helper()
	base := app.DeepCopy()
	app.Status.Cluster = cluster
	if err := m.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// TestRuntimeCredentials runs the reconciler on a management apiserver
// whose Cluster w1 has, as Cluster API's <cluster>-kubeconfig, the admin
// kubeconfig of a second apiserver. The Secret gets w1's key; with that
// kubeconfig placed.KubeClusters connects to w1 (the edge's EndpointSlice
// table syncs) and the kube driver deploys into the tenant namespace the
// controller prepared (of the tenant whose app is placed on w1, not of
// one whose app is placed elsewhere), with nothing forbidden; the same token cannot read
// a Secret of kube-system, make a ClusterRole, bind itself cluster-admin
// in its tenant namespace or relabel it (each of which cluster-admin
// could), and it may attach to Pods (a run with input) in the tenant
// namespace only; a token near its end is renewed, one that is not is kept; a key
// past the Secret's size limit is refused and changes nothing; w1's key
// goes with w1.
func TestRuntimeCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	_, work, m, w := startFleet(ctx, t, "fleet", "bex", "acme", "initech")
	// acme's app is placed on w1, initech's on w2: only acme's namespace
	// is prepared on w1.
	placeApp(ctx, t, m, "acme", "shop", "w1")
	placeApp(ctx, t, m, "initech", "api", "w2")
	w1 := platformtest.CreateCluster(ctx, t, m, "fleet", "w1")
	adminKubeconfig, err := os.ReadFile(work.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "w1-kubeconfig"}, Data: map[string][]byte{placed.KubeconfigKey: adminKubeconfig}}); err != nil {
		t.Fatal(err)
	}
	platformSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-keys"}, StringData: map[string]string{"key": "not for tenants"}}
	if err := w.Create(ctx, platformSecret); err != nil {
		t.Fatal(err)
	}

	secret := types.NamespacedName{Namespace: "bex", Name: "bex-runtime-kubeconfigs"}
	now := time.Now()
	r := &runtimecreds.Reconciler{Client: m, Reader: m, Secret: secret, FleetNamespace: "fleet", Lifetime: runtimecreds.DefaultLifetime, Now: func() time.Time { return now }}
	reconcile := func(name string) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "fleet", Name: name}})
		if err != nil {
			t.Fatalf("reconciling %s: %v", name, err)
		}
		return res
	}
	key := func() []byte {
		t.Helper()
		var s corev1.Secret
		if err := m.Get(ctx, secret, &s); err != nil {
			t.Fatal(err)
		}
		return s.Data["fleet.w1"]
	}

	res := reconcile("w1")
	if err := w.Get(ctx, client.ObjectKey{Name: "initech"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("w1 has the namespace of initech, whose only app is placed on w2: %v", err)
	}
	first := key()
	if len(first) == 0 {
		t.Fatal("no key fleet.w1 after a reconcile")
	}
	t.Logf("a runtime kubeconfig takes %d bytes: %d fit in a Secret", len(first), corev1.MaxSecretSize/len(first))
	if res.RequeueAfter <= 0 || res.RequeueAfter > runtimecreds.Resync {
		t.Errorf("requeued after %v, want within %v", res.RequeueAfter, runtimecreds.Resync)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(first)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != work.RESTConfig().Host || len(cfg.CAData) == 0 || cfg.BearerToken == "" || len(cfg.CertData) > 0 {
		t.Errorf("runtime kubeconfig: server %s (want %s), CA %d bytes, token %t, client certificate %t",
			cfg.Host, work.RESTConfig().Host, len(cfg.CAData), cfg.BearerToken != "", len(cfg.CertData) > 0)
	}

	// What the platform's processes do with it: KubeClusters connects
	// (the EndpointSlice table syncs), and the kube driver deploys into
	// the prepared tenant namespace.
	k, err := placed.NewKubeClusters(ctx, placed.KubeOptions{
		Client: m, Namespace: "fleet", RuntimeSecret: secret, Recheck: 100 * time.Millisecond,
		Driver: kube.Options{PreparedNamespaces: true, RolloutTimeout: 2 * time.Second, PollInterval: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	drv, err := k.Driver(ctx, "w1")
	if err != nil {
		t.Fatalf("connecting with the runtime kubeconfig: %v", err)
	}
	rel := runtime.Release{Tenant: "acme", App: "shop", Number: 1, Image: "registry.example.com/acme/shop:1",
		Env: map[string]string{"K": "v"}, Processes: map[string]runtime.Process{runtime.WebProcess: {Command: "./server", Replicas: 2}}}
	err = drv.Deploy(ctx, rel, nil)
	if err == nil || !strings.Contains(err.Error(), "not rolled out before the deadline") || strings.Contains(err.Error(), "forbidden") {
		t.Errorf("deploying with the runtime kubeconfig: %v, want it to wait for the rollout, with nothing forbidden", err)
	}
	rc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	sel := map[string]string{"app": "x"}
	if err := rc.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "x"}, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}},
	}}); err != nil {
		t.Errorf("creating a Deployment in the tenant namespace: %v", err)
	}

	// A one-off run with input attaches to its Pod: in tenant
	// namespaces only.
	attach := func(ns string) bool {
		t.Helper()
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "attach"}}}
		if err := rc.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	if !attach("acme") || attach("kube-system") {
		t.Errorf("the runtime token may create pods/attach in acme: %t, in kube-system: %t; want true, false", attach("acme"), attach("kube-system"))
	}

	// The attack: the same token, stolen.
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("the runtime token: %s: %v, want forbidden", what, err)
		}
	}
	forbidden("reading a Secret of kube-system", rc.Get(ctx, client.ObjectKeyFromObject(platformSecret), &corev1.Secret{}))
	forbidden("listing Secrets of kube-system", rc.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")))
	forbidden("listing Secrets everywhere", rc.List(ctx, &corev1.SecretList{}))
	forbidden("creating a ClusterRole", rc.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}))
	forbidden("binding itself cluster-admin in its tenant namespace", rc.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "more"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: runtimecreds.Namespace, Name: runtimecreds.ServiceAccount}},
	}))
	forbidden("relabelling its tenant namespace privileged", rc.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`))))
	forbidden("creating a namespace", rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}))
	forbidden("creating a Pod in kube-system", rc.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "shell"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox"}}}}))

	// Not near its end: kept. A third of its life left: renewed.
	reconcile("w1")
	if string(key()) != string(first) {
		t.Error("a token far from its end was replaced")
	}
	now = now.Add(17 * time.Hour)
	reconcile("w1")
	renewed := key()
	if string(renewed) == string(first) {
		t.Fatal("a token with less than a third of its life left was not renewed")
	}
	if c, err := clientcmd.RESTConfigFromKubeConfig(renewed); err != nil || c.BearerToken == cfg.BearerToken {
		t.Errorf("the renewed kubeconfig has the old token (%v)", err)
	}

	// A key that would pass the Secret's limit is refused, and the
	// Secret stays as it was.
	platformtest.CreateCluster(ctx, t, m, "fleet", "big")
	var s corev1.Secret
	if err := m.Get(ctx, secret, &s); err != nil {
		t.Fatal(err)
	}
	delete(s.Data, "fleet.w1")
	s.Data["fleet.big"] = make([]byte, corev1.MaxSecretSize-len(renewed)/2)
	if err := m.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	reconcile("w1")
	if got := key(); got != nil {
		t.Errorf("a key past the Secret's limit was written (%d bytes)", len(got))
	}
	if err := m.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}}); err != nil {
		t.Fatal(err)
	}
	reconcile("w1")
	if key() == nil {
		t.Fatal("no key once the Secret had room again")
	}

	// The Cluster goes: its key with it.
	if err := m.Delete(ctx, w1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := m.Get(ctx, client.ObjectKeyFromObject(w1), &clusterv1.Cluster{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster is not gone: %v", err)
		}
	}
	reconcile("w1")
	if got := key(); got != nil {
		t.Error("the key of a deleted Cluster is still there")
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := k.Driver(ctx, "w1")
		if errors.Is(err, placed.ErrNoCluster) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted cluster's driver: %v, want ErrNoCluster", err)
		}
	}
}
