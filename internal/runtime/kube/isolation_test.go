package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/test/platformtest"
)

// The secrets of vaultRelease: none may show in a Deployment.
const (
	secret1 = "postgres://vault:hunter2@db/vault"
	secret2 = "postgres://vault:correct-horse@db/vault"
	secret3 = "postgres://vault:tr0ub4dor@db/vault"
)

func vaultRelease(number int, image, dbURL string) runtime.Release {
	rel := shopRelease(number, image)
	rel.App = "vault"
	rel.Env = map[string]string{"DATABASE_URL": dbURL, "PORT": "9999", "HOME": "/app"}
	rel.Processes = map[string]runtime.Process{
		runtime.WebProcess: {Command: "./testapp", Replicas: 1},
		"worker":           {Command: "./testapp worker", Replicas: 1},
	}
	return rel
}

// testEnvSecrets: a release's environment lives in a Secret of its own,
// never as values in the pod spec; the release before it keeps its Secret
// until the new one has rolled out; a failed release's Secret goes with it;
// Remove deletes them all.
func testEnvSecrets(t *testing.T, k *cluster, d *kube.Driver) {
	ctx := context.Background()
	c := k.c
	var log platformtest.SyncBuffer
	remove(t, d, "acme", "vault")
	done := deploy(d, vaultRelease(1, k.image1, secret1), &log)
	web1 := getDeployment(t, c, "vault-web", release("1"))
	getDeployment(t, c, "vault-worker", release("1"))
	if err := <-done; err != nil {
		t.Fatalf("Deploy: %v\n%s", err, log.String())
	}
	for _, name := range []string{"vault-web", "vault-worker"} {
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: name}, &dep); err != nil {
			t.Fatal(err)
		}
		noSecretIn(t, &dep, secret1)
		ctr := dep.Spec.Template.Spec.Containers[0]
		for _, e := range ctr.Env {
			if e.Name == "HOME" {
				t.Errorf("%s: the driver set HOME=%s over the app's own", name, e.Value)
			}
		}
		if len(ctr.EnvFrom) != 1 || ctr.EnvFrom[0].SecretRef == nil || ctr.EnvFrom[0].SecretRef.Name != "vault-env-1" {
			t.Errorf("%s: envFrom %+v, want the Secret vault-env-1", name, ctr.EnvFrom)
		}
	}
	wantSecret(t, c, "vault-env-1", secret1)

	// Release 2, mid-rollout (its app listens 5 s after it starts, the
	// variable set by its command, not its environment): the pods of
	// release 1 still read their own Secret, unchanged.
	rel2 := vaultRelease(2, k.image2, secret2)
	rel2.Processes[runtime.WebProcess] = runtime.Process{Command: "LISTEN_DELAY=5s ./testapp", Replicas: 1}
	done = deploy(d, rel2, &log)
	web2 := getDeployment(t, c, "vault-web", release("2"))
	noSecretIn(t, web2, secret2)
	if got := web2.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name; got != "vault-env-2" {
		t.Errorf("release 2 reads %s, want vault-env-2", got)
	}
	wantSecret(t, c, "vault-env-2", secret2)
	wantSecret(t, c, web1.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name, secret1)
	if err := <-done; err != nil {
		t.Fatalf("Deploy of release 2: %v\n%s", err, log.String())
	}
	gone(t, c, "vault-env-1")
	wantSecret(t, c, "vault-env-2", secret2)

	// Release 3 fails (its app fails its health check, the variable set
	// by its command): its Secret goes, release 2's stays.
	rel3 := vaultRelease(3, k.image1, secret3)
	rel3.Processes[runtime.WebProcess] = runtime.Process{Command: runtimetest.EnvFailHealth + "=1 ./testapp", Replicas: 1}
	done = deploy(d, rel3, &log)
	getDeployment(t, c, "vault-web", release("3"))
	wantSecret(t, c, "vault-env-3", secret3)
	if err := <-done; err == nil {
		t.Fatal("Deploy succeeded although the rollout failed")
	}
	web := getDeployment(t, c, "vault-web", release("2"))
	if got := web.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name; got != "vault-env-2" {
		t.Errorf("restored release reads %s, want vault-env-2", got)
	}
	gone(t, c, "vault-env-3")
	wantSecret(t, c, "vault-env-2", secret2)

	if err := d.Remove(ctx, "acme", "vault"); err != nil {
		t.Fatal(err)
	}
	var left corev1.SecretList
	if err := c.List(ctx, &left, client.InNamespace("acme"), client.MatchingLabels{kube.LabelApp: "vault"}); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("secrets after Remove: %d, first %s", len(left.Items), left.Items[0].Name)
	}
}

// noSecretIn fails when value shows anywhere in the Deployment.
func noSecretIn(t *testing.T, dep *appsv1.Deployment, value string) {
	t.Helper()
	b, err := json.Marshal(dep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), value) {
		t.Errorf("deployment %s carries a config value in clear: %s", dep.Name, b)
	}
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name != "PORT" && e.Name != "HOME" {
				t.Errorf("deployment %s: container %s has env %s (only PORT and HOME are the driver's)", dep.Name, ctr.Name, e.Name)
			}
		}
	}
}

func wantSecret(t *testing.T, c client.Client, name, dbURL string) {
	t.Helper()
	var sec corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "acme", Name: name}, &sec); err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	if got := string(sec.Data["DATABASE_URL"]); got != dbURL || string(sec.Data["HOME"]) != "/app" || len(sec.Data) != 2 {
		t.Errorf("secret %s: DATABASE_URL %q (%d keys), want %q and HOME (PORT is the driver's)", name, got, len(sec.Data), dbURL)
	}
}

func gone(t *testing.T, c client.Client, name string) {
	t.Helper()
	platformtest.Eventually(t, 30*time.Second, "secret "+name+" deleted", func(context.Context) error {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: "acme", Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// testTenantNamespace: the namespace a tenant's apps run in enforces Pod
// Security's restricted profile, which the driver's pods pass and a
// privileged pod does not, and has a NetworkPolicy that denies everything
// but the edge's connections to the web port and DNS.
func testTenantNamespace(t *testing.T, k *cluster, newDriver func(*testing.T, kube.Options) *kube.Driver) {
	ctx := context.Background()
	c := k.c
	edge := map[string]string{"app.kubernetes.io/component": "edge"}
	gitReceiver := map[string]string{"app.kubernetes.io/component": "git-receiver"}
	opts := kube.Options{Network: kube.TenantNetwork{IngressNamespace: "bex-system", IngressPodLabels: edge, EgressCIDRs: []string{"203.0.113.0/24"},
		Builds: kube.BuildNetwork{IngressNamespace: "bex-system", IngressPodLabels: gitReceiver,
			EgressCIDRs: []string{"0.0.0.0/0"}, EgressExceptCIDRs: []string{"10.0.0.0/8", "fd00::/8"}}}}
	d := newDriver(t, opts)

	var log platformtest.SyncBuffer
	rel := shopRelease(1, k.image1)
	rel.App = "guard"
	remove(t, d, "acme", "guard")
	done := deploy(d, rel, &log)
	web := getDeployment(t, c, "guard-web", release("1"))
	getDeployment(t, c, "guard-worker", release("1"))
	if err := <-done; err != nil {
		t.Fatalf("Deploy: %v\n%s", err, log.String())
	}

	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &ns); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
		"pod-security.kubernetes.io/audit": "restricted", "bex.co/tenant": "acme",
	} {
		if ns.Labels[k] != v {
			t.Errorf("namespace label %s=%q, want %q", k, ns.Labels[k], v)
		}
	}

	// The real apiserver's Pod Security admission takes the driver's pods
	// and refuses a privileged one.
	defaultServiceAccount(t, c, "acme")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "guard-web-dry", Labels: web.Spec.Template.Labels}, Spec: web.Spec.Template.Spec}
	if err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("a pod of the driver's template was refused: %v", err)
	}
	privileged := pod.DeepCopy()
	yes := true
	privileged.Spec.Containers[0].SecurityContext.Privileged = &yes
	privileged.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
	err := c.Create(ctx, privileged, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a privileged pod in a tenant namespace: %v, want refused by PodSecurity", err)
	}
	root := pod.DeepCopy()
	zero := int64(0)
	root.Spec.SecurityContext.RunAsUser, root.Spec.SecurityContext.RunAsNonRoot = &zero, nil
	if err := c.Create(ctx, root, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a pod running as root in a tenant namespace: %v, want refused by PodSecurity", err)
	}

	var np networkingv1.NetworkPolicy
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.TenantPolicyName}, &np); err != nil {
		t.Fatal(err)
	}
	spec := np.Spec
	if len(spec.PodSelector.MatchLabels) != 0 || len(spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("policy selects %v, want every pod", spec.PodSelector)
	}
	if len(spec.PolicyTypes) != 2 {
		t.Errorf("policy types %v, want Ingress and Egress", spec.PolicyTypes)
	}
	if len(spec.Ingress) != 1 || len(spec.Ingress[0].From) != 1 || len(spec.Ingress[0].Ports) != 1 {
		t.Fatalf("ingress %+v, want one rule from the edge to the web port", spec.Ingress)
	}
	from, port := spec.Ingress[0].From[0], spec.Ingress[0].Ports[0]
	if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "bex-system" ||
		from.PodSelector == nil || from.PodSelector.MatchLabels["app.kubernetes.io/component"] != "edge" || from.IPBlock != nil {
		t.Errorf("ingress from %+v, want the edge's pods in bex-system", from)
	}
	if port.Port == nil || port.Port.IntValue() != kube.WebPort || *port.Protocol != corev1.ProtocolTCP {
		t.Errorf("ingress port %+v, want TCP %d", port, kube.WebPort)
	}
	if len(spec.Egress) != 2 {
		t.Fatalf("egress %+v, want DNS and the configured CIDRs", spec.Egress)
	}
	dns := spec.Egress[0]
	if len(dns.To) != 1 || dns.To[0].NamespaceSelector == nil || dns.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" ||
		len(dns.Ports) != 2 || dns.Ports[0].Port.IntValue() != 53 || dns.Ports[1].Port.IntValue() != 53 {
		t.Errorf("DNS egress %+v", dns)
	}
	if out := spec.Egress[1]; len(out.To) != 1 || out.To[0].IPBlock == nil || out.To[0].IPBlock.CIDR != "203.0.113.0/24" || len(out.Ports) != 0 {
		t.Errorf("egress %+v, want 203.0.113.0/24", out)
	}

	// Build Pods, and only they, may also be reached by the git
	// receiver's pods on the agent's port, and reach out beyond the
	// cluster's networks.
	var bp networkingv1.NetworkPolicy
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.BuildPolicyName}, &bp); err != nil {
		t.Fatal(err)
	}
	if sel := bp.Spec.PodSelector.MatchLabels; sel["app.kubernetes.io/component"] != "build" || len(bp.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("build policy selects %v, want the build pods", bp.Spec.PodSelector)
	}
	if in := bp.Spec.Ingress; len(in) != 1 || len(in[0].From) != 1 || in[0].From[0].PodSelector == nil ||
		in[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "git-receiver" ||
		len(in[0].Ports) != 1 || in[0].Ports[0].Port.IntValue() != kube.BuildAgentPort {
		t.Errorf("build ingress %+v, want the git receiver's pods to port %d", in, kube.BuildAgentPort)
	}
	if out := bp.Spec.Egress; len(out) != 1 || len(out[0].To) != 1 || out[0].To[0].IPBlock == nil ||
		out[0].To[0].IPBlock.CIDR != "0.0.0.0/0" || len(out[0].To[0].IPBlock.Except) != 1 || out[0].To[0].IPBlock.Except[0] != "10.0.0.0/8" {
		t.Errorf("build egress %+v, want 0.0.0.0/0 except 10.0.0.0/8 (the IPv6 exception left out)", out)
	}

	// Labels and policy changed by hand are put back (by a driver that has
	// not just prepared the namespace: the controller manager's, next time
	// it reconciles an App there).
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	if err := c.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &np); err != nil {
		t.Fatal(err)
	}
	if err := newDriver(t, opts).PrepareNamespace(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &ns); err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("enforce label after PrepareNamespace: %q, %v", ns.Labels["pod-security.kubernetes.io/enforce"], err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.TenantPolicyName}, &np); err != nil {
		t.Errorf("policy after PrepareNamespace: %v", err)
	}

	// Without Network options nothing may connect in.
	if err := newDriver(t, kube.Options{}).PrepareNamespace(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.TenantPolicyName}, &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 1 {
		t.Errorf("default policy: ingress %+v egress %+v, want none and DNS", np.Spec.Ingress, np.Spec.Egress)
	}
	if err := d.Remove(ctx, "acme", "guard"); err != nil {
		t.Fatal(err)
	}
}

// testPreparedNamespaces: a driver that may not prepare namespaces (the git
// receiver's) refuses to deploy into one nobody prepared within its
// NamespaceWait, and a deploy that waits goes on once a preparing driver
// (the controller manager's) made it ready, with the tenant role bound
// there: a tenant's first push may come before its first App's namespace
// is prepared.
func testPreparedNamespaces(t *testing.T, k *cluster, newDriver func(*testing.T, kube.Options) *kube.Driver) {
	ctx := context.Background()
	c := k.c
	checking := newDriver(t, kube.Options{PreparedNamespaces: true, NamespaceWait: time.Second})
	rel := shopRelease(1, k.image1)
	rel.Tenant = "initech"
	err := checking.Deploy(ctx, rel, nil)
	if err == nil || !strings.Contains(err.Error(), "namespace initech is not ready for apps (it does not exist)") {
		t.Fatalf("Deploy into a namespace nobody prepared: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "initech"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the checking driver created the namespace: %v", err)
	}

	// A namespace that exists but was not prepared (made by hand) is refused too.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "initech"}}); err != nil {
		t.Fatal(err)
	}
	if err := checking.Deploy(ctx, rel, nil); err == nil || !strings.Contains(err.Error(), "pod-security.kubernetes.io/enforce is not restricted") {
		t.Fatalf("Deploy into an unlabelled namespace: %v", err)
	}

	// A deploy that waits for the namespace, saying so, while it is
	// prepared.
	defaultServiceAccount(t, c, "initech")
	waiting := newDriver(t, kube.Options{PreparedNamespaces: true, NamespaceWait: 2 * time.Minute, PollInterval: 100 * time.Millisecond})
	var log platformtest.SyncBuffer
	deployed := deploy(waiting, rel, &log)
	platformtest.Eventually(t, 30*time.Second, "the deploy waits for the namespace", func(context.Context) error {
		select {
		case err := <-deployed:
			t.Fatalf("the deploy ended before the namespace was prepared: %v", err)
		default:
		}
		if !strings.Contains(log.String(), "waiting for namespace initech to be prepared for apps (pod-security.kubernetes.io/enforce is not restricted)") {
			return fmt.Errorf("deploy output %q", log.String())
		}
		return nil
	})
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "bex-system", Name: "bex-git-receiver"}
	preparing := newDriver(t, kube.Options{TenantRole: "bex-tenant-runtime", TenantSubjects: []rbacv1.Subject{subject}})
	if err := preparing.PrepareNamespace(ctx, "initech"); err != nil {
		t.Fatal(err)
	}
	if err := <-deployed; err != nil {
		t.Fatalf("the deploy that waited for the namespace: %v", err)
	}
	var rb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: "initech", Name: kube.TenantRoleBindingName}, &rb); err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != "bex-tenant-runtime" || len(rb.Subjects) != 1 || rb.Subjects[0] != subject {
		t.Errorf("role binding %+v %+v", rb.RoleRef, rb.Subjects)
	}
	if err := checking.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("Deploy into a prepared namespace: %v", err)
	}
	if err := checking.Remove(ctx, "initech", "shop"); err != nil {
		t.Fatal(err)
	}
}
