package install

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	managerapp "bex.co/bex/cmd/bex-controller-manager/app"
	gitapp "bex.co/bex/cmd/bex-git/app"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// chartRBAC is the RBAC of one rendering of the chart.
type chartRBAC struct {
	clusterRoles map[string]rbacv1.ClusterRole
	roles        map[string]rbacv1.Role // by namespace/name
	crbs         []rbacv1.ClusterRoleBinding
	rbs          []rbacv1.RoleBinding
	// args are the args of the bex containers, by image repository.
	args map[string][]string
}

func readRBAC(t *testing.T, objs []*unstructured.Unstructured) chartRBAC {
	t.Helper()
	r := chartRBAC{clusterRoles: map[string]rbacv1.ClusterRole{}, roles: map[string]rbacv1.Role{}, args: map[string][]string{}}
	from := func(o *unstructured.Unstructured, into any) {
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			from(o, &cr)
			r.clusterRoles[cr.Name] = cr
		case "Role":
			var ro rbacv1.Role
			from(o, &ro)
			r.roles[ro.Namespace+"/"+ro.Name] = ro
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			from(o, &b)
			r.crbs = append(r.crbs, b)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			from(o, &b)
			r.rbs = append(r.rbs, b)
		case "Deployment":
			var d appsv1.Deployment
			from(o, &d)
			for _, c := range d.Spec.Template.Spec.Containers {
				repo := c.Image[strings.LastIndex(c.Image, "/")+1:]
				repo, _, _ = strings.Cut(repo, ":")
				r.args[repo] = c.Args
			}
		}
	}
	return r
}

// grantsSecrets reports whether a rule gives any right on Secrets.
func grantsSecrets(rules []rbacv1.PolicyRule) bool {
	for _, rule := range rules {
		core := slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")
		if core && (slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*")) {
			return true
		}
	}
	return false
}

// onlyRuntimeKubeconfigs reports whether every rule that gives a right on
// Secrets gives get (or watch) of the Secret named name only.
func onlyRuntimeKubeconfigs(rules []rbacv1.PolicyRule, name string) bool {
	for _, rule := range rules {
		if !grantsSecrets([]rbacv1.PolicyRule{rule}) {
			continue
		}
		if name == "" || !slices.Equal(rule.ResourceNames, []string{name}) {
			return false
		}
		for _, v := range rule.Verbs {
			if v != "get" && v != "watch" {
				return false
			}
		}
	}
	return true
}

func hasSubject(subjects []rbacv1.Subject, ns, name string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == name
	})
}

// checkTenantRBAC: no ClusterRole bound cluster-wide to the git receiver
// grants anything on Secrets, nor does any Role the chart binds it to; the
// git receiver only checks tenant namespaces (--prepared-namespaces); the
// controller manager is told to bind to it in tenant namespaces ClusterRoles
// the chart has, which grant it nothing but what the tenant's namespace
// holds (they are never bound cluster-wide).
func checkTenantRBAC(t *testing.T, name string, r chartRBAC) {
	t.Helper()
	git := "bex-git-receiver"
	for _, b := range r.crbs {
		if !hasSubject(b.Subjects, releaseNamespace, git) {
			continue
		}
		cr, ok := r.clusterRoles[b.RoleRef.Name]
		if !ok {
			t.Errorf("%s: ClusterRoleBinding %s binds the git receiver to %s, which the chart does not have", name, b.Name, b.RoleRef.Name)
			continue
		}
		if grantsSecrets(cr.Rules) {
			t.Errorf("%s: ClusterRole %s grants the git receiver rights on Secrets cluster-wide (ClusterRoleBinding %s)", name, cr.Name, b.Name)
		}
	}
	flag := func(repo, f string) string {
		for _, a := range r.args[repo] {
			if v, ok := strings.CutPrefix(a, "--"+f+"="); ok {
				return v
			}
		}
		return ""
	}
	// With --follow-placement, the git receiver may get the runtime
	// kubeconfigs Secret of the release namespace: that one, nothing else.
	runtimeSecret := flag("bex-git", "runtime-kubeconfigs-secret")
	ns, runtimeName, _ := strings.Cut(runtimeSecret, "/")
	if runtimeSecret != "" && ns != releaseNamespace {
		t.Errorf("%s: the git receiver's --runtime-kubeconfigs-secret %s is not in the release namespace", name, runtimeSecret)
	}
	for _, b := range r.rbs {
		if !hasSubject(b.Subjects, releaseNamespace, git) {
			continue
		}
		rules := r.roles[b.Namespace+"/"+b.RoleRef.Name].Rules
		if b.RoleRef.Kind == "ClusterRole" {
			rules = r.clusterRoles[b.RoleRef.Name].Rules
		}
		if b.Namespace == releaseNamespace && b.RoleRef.Kind == "Role" && runtimeName != "" {
			if !onlyRuntimeKubeconfigs(rules, runtimeName) {
				t.Errorf("%s: RoleBinding %s/%s grants the git receiver more on Secrets than get of %s", name, b.Namespace, b.Name, runtimeSecret)
			}
			continue
		}
		if grantsSecrets(rules) {
			t.Errorf("%s: RoleBinding %s/%s grants the git receiver rights on Secrets in %s", name, b.Namespace, b.Name, b.Namespace)
		}
	}
	if !slices.Contains(r.args["bex-git"], "--prepared-namespaces") {
		t.Errorf("%s: the git receiver may prepare tenant namespaces (no --prepared-namespaces): %q", name, r.args["bex-git"])
	}
	if got := flag("bex-controller-manager", "tenant-role-service-accounts"); got != releaseNamespace+"/"+git {
		t.Errorf("%s: the controller manager binds tenant roles to %q, want the git receiver", name, got)
	}
	for _, f := range []string{"tenant-config-role", "tenant-role"} {
		role := flag("bex-controller-manager", f)
		if role == "" {
			if f == "tenant-config-role" {
				t.Errorf("%s: the controller manager has no --%s", name, f)
			}
			continue
		}
		if _, ok := r.clusterRoles[role]; !ok {
			t.Errorf("%s: --%s=%s names no ClusterRole of the chart", name, f, role)
		}
		for _, b := range r.crbs {
			if b.RoleRef.Name == role {
				t.Errorf("%s: %s, meant for tenant namespaces only, is bound cluster-wide by %s", name, role, b.Name)
			}
		}
	}
	// Every process that runs the kube driver keeps the same tenant
	// namespace objects: else they fight over them.
	var want []string
	for _, a := range r.args["bex-controller-manager"] {
		if strings.HasPrefix(a, "--tenant-") {
			want = append(want, a)
		}
	}
	for _, repo := range []string{"bex-web", "bex-git"} {
		var got []string
		for _, a := range r.args[repo] {
			if strings.HasPrefix(a, "--tenant-") {
				got = append(got, a)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s's tenant flags %q differ from the controller manager's %q", name, repo, got, want)
		}
	}
}

// TestTenantRBAC installs the chart's RBAC (default values: the workload
// cluster is this one) in a real apiserver and acts as its service
// accounts: the controller manager prepares a tenant namespace with the
// flags the chart gives it; the git receiver, with its own, deploys there
// and runs a release phase, as the controller manager's runtime role (bex
// run's) does;
// and the git receiver's token, which tenant build code runs next to, reads
// no Secret outside tenant namespaces, cannot relabel a namespace or bind
// itself more rights, and has nothing in a tenant namespace nobody prepared.
func TestTenantRBAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	out, err := runHelm(ctx, helm, "template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	rbac := readRBAC(t, objs)

	cp := cptest.Start(t)
	cfg := cp.RESTConfig()
	admin, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{releaseNamespace, "acme", "globex"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if o.GetNamespace() != "" && o.GetNamespace() != releaseNamespace && o.GetNamespace() != "kube-system" {
			continue
		}
		if err := admin.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	platformSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: "bex-postgres"}, StringData: map[string]string{"url": "postgres://bex:platform-password@db/bex"}}
	otherTenantSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "globex", Name: "db"}, StringData: map[string]string{"password": "globex-password"}}
	for _, s := range []*corev1.Secret{platformSecret, otherTenantSecret} {
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	as := func(component string) *rest.Config {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + releaseNamespace + ":bex-" + component,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
		}
		return c
	}
	// tenantOptions parses the chart's arguments of repo as its command
	// does: the kube driver's options, and the role bound in tenant
	// namespaces of the management cluster.
	tenantOptions := func(repo string, args []string) (kube.Options, string) {
		fs := pflag.NewFlagSet(repo, pflag.ContinueOnError)
		parse := func() {
			if err := fs.Parse(args); err != nil {
				t.Fatalf("%s: %v", repo, err)
			}
		}
		switch repo {
		case "bex-controller-manager":
			o := managerapp.NewOptions()
			o.AddFlags(fs)
			parse()
			return o.Runtime.Tenants.KubeOptions(), o.Runtime.Tenants.ConfigRole
		case "bex-git":
			o := gitapp.NewOptions()
			o.AddFlags(fs)
			parse()
			return o.Runtime.Tenants.KubeOptions(), o.Runtime.Tenants.ConfigRole
		}
		t.Fatalf("no command %s", repo)
		return kube.Options{}, ""
	}

	// The git receiver's token, which tenant build code runs next to.
	git, err := client.New(as("git-receiver"), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("the git receiver's token: %s: %v, want forbidden", what, err)
		}
	}
	forbidden("reading the platform's Postgres Secret", git.Get(ctx, client.ObjectKeyFromObject(platformSecret), &corev1.Secret{}))
	forbidden("reading a Secret of a tenant namespace nobody prepared", git.Get(ctx, client.ObjectKeyFromObject(otherTenantSecret), &corev1.Secret{}))
	forbidden("listing Secrets cluster-wide", git.List(ctx, &corev1.SecretList{}))
	forbidden("listing Secrets in kube-system", git.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")))
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`))
	forbidden("relabelling its tenant namespace", git.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}, patch))
	forbidden("binding itself more rights", git.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "more"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bex-controller-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: releaseNamespace, Name: "bex-git-receiver"}},
	}))
	forbidden("deleting the tenant NetworkPolicy", git.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: kube.TenantPolicyName}}))
	forbidden("creating a pod in a tenant namespace nobody prepared", git.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "shell"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox"}}},
	}))
	// The controller manager, as the App controller does for an App of acme.
	cmKubeOptions, cmConfigRole := tenantOptions("bex-controller-manager", rbac.args["bex-controller-manager"])
	cmDriver, err := kube.New(as("controller-manager"), cmKubeOptions)
	if err != nil {
		t.Fatal(err)
	}
	cmClient, err := client.New(as("controller-manager"), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The kube driver's Usage (the apps' CPU and memory) reads the nodes'
	// stats summaries through the node proxy: the controller manager and
	// web may, the git receiver, which deploys but samples nothing, may not.
	cmCore, err := client.New(as("controller-manager"), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]client.Client{"controller manager": cmCore, "git receiver": git} {
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "worker-1"}}}
		if err := c.Create(ctx, ssar); err != nil || ssar.Status.Allowed != (who == "controller manager") {
			t.Errorf("the %s may get nodes/proxy: %v (%v)", who, ssar.Status.Allowed, err)
		}
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: releaseNamespace, Name: "bex-git-receiver"}}
	releases := managerapp.Releases{Driver: cmDriver, Kube: cmClient, ConfigRole: cmConfigRole, Subjects: subjects}
	if err := releases.PrepareNamespace(ctx, "acme"); err != nil {
		t.Fatalf("the controller manager cannot prepare a tenant namespace: %v", err)
	}

	// The git receiver deploys into it: every object the driver writes is
	// allowed (the rollout itself waits for a kubelet this test has not).
	gitOpts, _ := tenantOptions("bex-git", rbac.args["bex-git"])
	gitOpts.RolloutTimeout, gitOpts.PollInterval = 2*time.Second, 100*time.Millisecond
	gitDriver, err := kube.New(as("git-receiver"), gitOpts)
	if err != nil {
		t.Fatal(err)
	}
	rel := runtime.Release{
		Tenant: "acme", App: "shop", Number: 1, Image: "registry.example.com/acme/shop:1",
		Env:       map[string]string{"DATABASE_URL": "postgres://acme:tenant-password@db/acme"},
		Processes: map[string]runtime.Process{runtime.WebProcess: {Command: "./server", Replicas: 2}},
	}
	err = gitDriver.Deploy(ctx, rel, nil)
	if err == nil || !strings.Contains(err.Error(), "not rolled out before the deadline") || strings.Contains(err.Error(), "forbidden") {
		t.Errorf("the git receiver's deploy: %v, want it to wait for the rollout, with nothing forbidden", err)
	}
	if _, err := gitDriver.Status(ctx, "acme", "shop"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status after the rolled-back first release: %v", err)
	}

	// The release phase (the git receiver) and bex run (bex-web, whose
	// runtime role the controller manager shares) make a run's Secret and
	// Pod and delete them: allowed (the Pod waits for a scheduler this test
	// has not), and nothing is left.
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for component, opts := range map[string]kube.Options{"git-receiver": gitOpts, "controller-manager": cmKubeOptions} {
		opts.RunStartTimeout, opts.PollInterval = 2*time.Second, 100*time.Millisecond
		d, err := kube.New(as(component), opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Run(ctx, rel, runtime.Command{Args: []string{"./migrate"}, Name: "release", Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{}, nil
		}})
		if err == nil || !strings.Contains(err.Error(), "not started after 2s") || strings.Contains(err.Error(), "forbidden") {
			t.Errorf("a run as the %s: %v, want it to wait for a scheduler, with nothing forbidden", component, err)
		}
		var pods corev1.PodList
		var secrets corev1.SecretList
		left := client.MatchingLabels{kube.LabelRunOf: "shop"}
		if err := admin.List(ctx, &pods, client.InNamespace("acme"), left); err != nil || len(pods.Items) != 0 {
			t.Errorf("run pods left by the %s: %d, %v", component, len(pods.Items), err)
		}
		if err := admin.List(ctx, &secrets, client.InNamespace("acme"), left); err != nil || len(secrets.Items) != 0 {
			t.Errorf("run secrets left by the %s: %d, %v", component, len(secrets.Items), err)
		}
	}

	// With the namespace prepared the git receiver may make Pods (a release
	// phase runs in one), but the namespace's Pod Security profile refuses
	// a Pod that asks for more than an app's container.
	err = git.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "shell"},
		Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "sh", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("the git receiver's token: creating a privileged pod in a prepared namespace: %v, want refused by Pod Security", err)
	}

	// What it does need, within the tenant's namespace.
	if err := git.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.TenantPolicyName}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("the git receiver cannot read the tenant NetworkPolicy it checks: %v", err)
	}

	// With followPlacement the processes read the runtime kubeconfigs
	// Secret, which the controller manager writes: the git receiver gets
	// that one Secret and still no other.
	out, err = runHelm(ctx, helm, "template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion,
		"--set", "followPlacement.enabled=true")
	if err != nil {
		t.Fatalf("helm template (followPlacement): %v\n%s", err, out)
	}
	if objs, err = decode(out); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if o.GetNamespace() != "" && o.GetNamespace() != releaseNamespace && o.GetNamespace() != "kube-system" {
			continue
		}
		o := o.DeepCopy()
		if err := admin.Patch(ctx, o, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	cm, err := client.New(as("controller-manager"), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	runtimeKubeconfigs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: "bex-runtime-kubeconfigs"}, Data: map[string][]byte{"fleet.w1": []byte("kubeconfig")}}
	if err := cm.Create(ctx, runtimeKubeconfigs); err != nil {
		t.Fatalf("the controller manager cannot create the runtime kubeconfigs Secret: %v", err)
	}
	runtimeKubeconfigs.Data["fleet.w2"] = []byte("kubeconfig")
	if err := cm.Update(ctx, runtimeKubeconfigs); err != nil {
		t.Errorf("the controller manager cannot update the runtime kubeconfigs Secret: %v", err)
	}
	for _, component := range []string{"git-receiver", "web", "edge"} {
		c, err := client.New(as(component), client.Options{Scheme: clientgoscheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(runtimeKubeconfigs), &corev1.Secret{}); err != nil {
			t.Errorf("the %s cannot read the runtime kubeconfigs: %v", component, err)
		}
	}
	sameNameElsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "globex", Name: "bex-runtime-kubeconfigs"}}
	if err := admin.Create(ctx, sameNameElsewhere); err != nil {
		t.Fatal(err)
	}
	forbidden("reading the platform's Postgres Secret (followPlacement)", git.Get(ctx, client.ObjectKeyFromObject(platformSecret), &corev1.Secret{}))
	forbidden("reading a Secret of the same name in another namespace", git.Get(ctx, client.ObjectKeyFromObject(sameNameElsewhere), &corev1.Secret{}))
	forbidden("listing the Secrets of the release namespace", git.List(ctx, &corev1.SecretList{}, client.InNamespace(releaseNamespace)))
	forbidden("listing Secrets cluster-wide (followPlacement)", git.List(ctx, &corev1.SecretList{}))
	forbidden("updating the runtime kubeconfigs", git.Update(ctx, runtimeKubeconfigs.DeepCopy()))
	forbidden("deleting the runtime kubeconfigs", git.Delete(ctx, runtimeKubeconfigs.DeepCopy()))
	forbidden("creating a Secret in the release namespace", git.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: "mine"}}))
	// Every Secret of the apiserver, as the git receiver sees it: the one
	// it may get, no other (an access review per Secret).
	var all corev1.SecretList
	if err := admin.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	for _, s := range all.Items {
		for _, verb := range []string{"get", "list", "watch"} {
			ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "secrets", Namespace: s.Namespace, Name: s.Name}}}
			if err := git.Create(ctx, ssar); err != nil {
				t.Fatal(err)
			}
			want := verb == "get" && s.Namespace == releaseNamespace && s.Name == runtimeKubeconfigs.Name
			if s.Namespace == "acme" {
				continue // the tenant's own, through tenant-config
			}
			if ssar.Status.Allowed != want {
				t.Errorf("the git receiver may %s Secret %s/%s: %t, want %t", verb, s.Namespace, s.Name, ssar.Status.Allowed, want)
			}
		}
	}
}
