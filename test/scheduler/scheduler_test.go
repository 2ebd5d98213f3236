package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/test/scheduler/fleettest"
)

const timeout = 30 * time.Second

// wantFleet is the ClusterCapacity list the seeded fleet and placements
// must produce, figure for figure.
func wantFleet() []string {
	return []string{
		"alpha source=ClusterAPI region=eu-central plans=[] versions=[1.37.2] mid=false healthy=true accepts=true reason=Accepting" +
			" alloc=[" + want("24", "96Gi", 470) + "] req=[" + want("3", "6Gi", 3) + "]" +
			// alpha-b-2 is NotReady: counted as a node, not in allocatable.
			" | big nodes=2 ready=1 alloc=[" + want("16", "64Gi", 250) + "] req=[" + want("2", "4Gi", 1) + "]" +
			" | workers nodes=2 ready=2 alloc=[" + want("8", "32Gi", 220) + "] req=[" + want("1", "2Gi", 2) + "]",
		"beta source=ClusterAPI region=eu-central plans=[] versions=[1.36.3 1.37.2] mid=true healthy=true accepts=false reason=MidUpgrade" +
			" alloc=[" + want("32", "128Gi", 110) + "] req=[" + want("0", "0", 0) + "]" +
			" | workers nodes=1 ready=1 alloc=[" + want("32", "128Gi", 110) + "] req=[" + want("0", "0", 0) + "]",
		"delta source=ClusterAPI region=eu-central plans=[] versions=[1.37.2] mid=false healthy=false accepts=false reason=Unhealthy" +
			" alloc=[" + want("8", "32Gi", 110) + "] req=[" + want("0", "0", 0) + "]" +
			" | workers nodes=1 ready=1 alloc=[" + want("8", "32Gi", 110) + "] req=[" + want("0", "0", 0) + "]",
		"gamma source=ClusterAPI region=us-east plans=[pro] versions=[1.37.2] mid=false healthy=true accepts=true reason=Accepting" +
			" alloc=[" + want("2", "4Gi", 110) + "] req=[" + want("0", "0", 0) + "]" +
			" | workers nodes=1 ready=1 alloc=[" + want("2", "4Gi", 110) + "] req=[" + want("0", "0", 0) + "]",
		// On standby (local.DefaultLocalCluster): the Cluster API clusters
		// run apps.
		"local source=Static region=local plans=[] versions=[] mid=false healthy=true accepts=false reason=Standby" +
			" alloc=[" + want("4", "8Gi", 110) + "] req=[" + want("250m", "512Mi", 1) + "]" +
			" | default nodes=1 ready=1 alloc=[" + want("4", "8Gi", 110) + "] req=[" + want("250m", "512Mi", 1) + "]",
	}
}

func listSummaries(ctx context.Context, c client.Client) ([]string, error) {
	var list schedulingv1alpha1.ClusterCapacityList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		out = append(out, summary(&list.Items[i]))
	}
	return out, nil
}

func TestClusterCapacityMatchesSeededFleet(t *testing.T) {
	platformtest.Eventually(t, timeout, "the clustercapacities of the seeded fleet", func(ctx context.Context) error {
		got, err := listSummaries(ctx, env.admin)
		if err != nil {
			return err
		}
		if w := wantFleet(); !slices.Equal(got, w) {
			return fmt.Errorf("clustercapacities:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(w, "\n     "))
		}
		return nil
	})
	// Get by name agrees with the list.
	cc := &schedulingv1alpha1.ClusterCapacity{}
	if err := env.admin.Get(context.Background(), client.ObjectKey{Name: "beta"}, cc); err != nil {
		t.Fatal(err)
	}
	if got := summary(cc); got != wantFleet()[1] {
		t.Fatalf("get beta: %s", got)
	}
	if !strings.Contains(cc.Status.Message, "v1.36.3") {
		t.Errorf("beta's message does not name the versions: %q", cc.Status.Message)
	}
	// The standby cluster names the Cluster API clusters that run apps: a
	// pool with a ready node, not being deleted (mid-upgrade, unavailable
	// or not, they still run theirs).
	if err := env.admin.Get(context.Background(), client.ObjectKey{Name: "local"}, cc); err != nil {
		t.Fatal(err)
	}
	if s := cc.Status; !s.Standby || !strings.HasSuffix(s.Message, "): alpha, beta, delta, gamma") {
		t.Errorf("local: standby=%t, message %q", s.Standby, s.Message)
	}
	err := env.admin.Get(context.Background(), client.ObjectKey{Name: "nope"}, cc)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get of an unknown cluster: want 404, got %v", err)
	}
}

func review(t *testing.T, spec schedulingv1alpha1.PlacementReviewSpec) *schedulingv1alpha1.PlacementReview {
	t.Helper()
	r := &schedulingv1alpha1.PlacementReview{Spec: spec}
	if err := env.admin.Create(context.Background(), r); err != nil {
		t.Fatalf("creating placementreview: %v", err)
	}
	return r
}

func res(cpu, mem string) schedulingv1alpha1.Resources {
	return schedulingv1alpha1.Resources{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
}

func TestPlacementReviewChoosesAndExplains(t *testing.T) {
	// BinPack: after placing 1 cpu / 2Gi, alpha/workers is at (2/8 cpu,
	// 4/32 memory) → 19, alpha/big at (3/16, 6/64) → 14.
	r := review(t, schedulingv1alpha1.PlacementReviewSpec{
		App: "shop", Replicas: 1, Resources: res("1", "2Gi"),
		Constraints: schedulingv1alpha1.PlacementConstraints{Region: "eu-central", Plan: "standard"},
	})
	st := &r.Status
	if !st.Schedulable || st.Cluster != "alpha" || st.Pool != "workers" || st.Score != 19 || st.Strategy != schedulingv1alpha1.StrategyBinPack {
		t.Fatalf("want alpha/workers score 19 by BinPack, got %+v", st)
	}
	wantV := []string{"alpha/big=LowerScore", "alpha/workers=Chosen", "beta=MidUpgrade", "delta=Unhealthy", "gamma=RegionMismatch", "local=RegionMismatch"}
	if got := verdicts(st); !slices.Equal(got, wantV) {
		t.Fatalf("verdicts:\n got %v\nwant %v", got, wantV)
	}
	if c := st.Candidates[0]; c.Score != 14 || !strings.Contains(c.Message, "14 < 19") {
		t.Errorf("alpha/big: %+v", c)
	}
	// Deterministic: the same question, the same answer.
	again := review(t, r.Spec)
	if fmt.Sprint(again.Status) != fmt.Sprint(r.Status) {
		t.Errorf("a second review differs:\n%+v\n%+v", again.Status, r.Status)
	}
	// Replicas default to 1 and the plan sizes a replica: pro is 2 cpu / 4Gi.
	r = review(t, schedulingv1alpha1.PlacementReviewSpec{Constraints: schedulingv1alpha1.PlacementConstraints{Plan: "pro", Region: "us-east"}})
	if !r.Status.Schedulable || r.Status.Cluster != "gamma" || r.Spec.Replicas != 1 ||
		r.Status.Resources.CPU.Cmp(resource.MustParse("2")) != 0 || r.Status.Resources.Memory.Cmp(resource.MustParse("4Gi")) != 0 {
		t.Fatalf("pro in us-east: want gamma with 1 × 2 cpu / 4Gi, got spec %+v status %+v", r.Spec, r.Status)
	}
}

func TestPlacementReviewUnschedulableExplainsEachCluster(t *testing.T) {
	r := review(t, schedulingv1alpha1.PlacementReviewSpec{App: "huge", Replicas: 1, Resources: res("64", "1Gi")})
	st := &r.Status
	if st.Schedulable || st.Cluster != "" {
		t.Fatalf("want unschedulable, got %+v", st)
	}
	wantV := []string{"alpha/big=InsufficientCPU", "alpha/workers=InsufficientCPU", "beta=MidUpgrade", "delta=Unhealthy", "gamma/workers=InsufficientCPU", "local=Standby"}
	if got := verdicts(st); !slices.Equal(got, wantV) {
		t.Fatalf("verdicts:\n got %v\nwant %v", got, wantV)
	}
	// alpha/big has 16 cpu, 2 requested: 14 free.
	if m := st.Candidates[0].Message; m != "cpu: needs 64, 14 free" {
		t.Errorf("alpha/big message: %q", m)
	}
	for _, c := range wantV {
		if !strings.Contains(st.Message, strings.Split(c, "=")[0]+": ") {
			t.Errorf("summary message does not explain %s: %q", c, st.Message)
		}
	}
	// A plan the only cluster of the region does not host.
	r = review(t, schedulingv1alpha1.PlacementReviewSpec{Constraints: schedulingv1alpha1.PlacementConstraints{Plan: "starter", Region: "us-east"}})
	if r.Status.Schedulable || !slices.Contains(verdicts(&r.Status), "gamma=PlanNotOffered") {
		t.Fatalf("starter in us-east: want gamma=PlanNotOffered, got %v", verdicts(&r.Status))
	}
	// Invalid reviews are refused with the field.
	bad := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{Replicas: 1, Constraints: schedulingv1alpha1.PlacementConstraints{Plan: "gold"}}}
	err := env.admin.Create(context.Background(), bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.constraints.plan") {
		t.Fatalf("plan gold: want 422 naming spec.constraints.plan, got %v", err)
	}
}

// TestPlacementReviewWithoutCandidates asks for the verdict alone, as the
// App controller does: the same answer and message, no candidates; an
// unknown listing is refused naming the field.
func TestPlacementReviewWithoutCandidates(t *testing.T) {
	for _, spec := range []schedulingv1alpha1.PlacementReviewSpec{
		{App: "shop", Replicas: 1, Resources: res("1", "2Gi"), Constraints: schedulingv1alpha1.PlacementConstraints{Region: "eu-central", Plan: "standard"}},
		{App: "huge", Replicas: 1, Resources: res("64", "1Gi")},
	} {
		all := review(t, spec)
		if all.Spec.Candidates != schedulingv1alpha1.CandidatesAll || len(all.Status.Candidates) == 0 {
			t.Fatalf("%s: by default want candidates All and a list, got %q and %d", spec.App, all.Spec.Candidates, len(all.Status.Candidates))
		}
		spec.Candidates = schedulingv1alpha1.CandidatesNone
		none := review(t, spec)
		if len(none.Status.Candidates) != 0 {
			t.Errorf("%s: candidates None listed %d", spec.App, len(none.Status.Candidates))
		}
		a, n := all.Status, none.Status
		if a.Schedulable != n.Schedulable || a.Cluster != n.Cluster || a.Pool != n.Pool || a.Score != n.Score || a.Message != n.Message {
			t.Errorf("%s: the verdict differs without candidates:\nAll:  %v %s/%s %d %q\nNone: %v %s/%s %d %q",
				spec.App, a.Schedulable, a.Cluster, a.Pool, a.Score, a.Message, n.Schedulable, n.Cluster, n.Pool, n.Score, n.Message)
		}
	}
	bad := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{Replicas: 1, Resources: res("1", "1Gi"), Candidates: "Some"}}
	if err := env.admin.Create(context.Background(), bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.candidates") {
		t.Fatalf("candidates Some: want 422 naming spec.candidates, got %v", err)
	}
}

func TestMidUpgradeClusterTakesNoNewPlacement(t *testing.T) {
	ctx := context.Background()
	// 20 cpu fit only beta (32 free), which is mid-upgrade.
	big := schedulingv1alpha1.PlacementReviewSpec{App: "batch", Replicas: 1, Resources: res("20", "10Gi")}
	r := review(t, big)
	if r.Status.Schedulable || !slices.Contains(verdicts(&r.Status), "beta=MidUpgrade") {
		t.Fatalf("mid-upgrade beta: want no placement, got %+v", r.Status)
	}
	// Meanwhile the other clusters take placements.
	small := review(t, schedulingv1alpha1.PlacementReviewSpec{App: "small", Replicas: 1, Resources: res("1", "1Gi")})
	if !small.Status.Schedulable || small.Status.Cluster == "beta" {
		t.Fatalf("small app: want a placement off beta, got %+v", small.Status)
	}

	// The rollout finishes: beta takes the app.
	if err := fleettest.SetVersions(ctx, env.admin, "fleet-beta", "beta", "v1.37.2", fleettest.Version{Version: "v1.37.2", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := fleettest.SetVersions(ctx, env.admin, "fleet-beta", "beta", "v1.37.2",
			fleettest.Version{Version: "v1.36.3", Replicas: 2}, fleettest.Version{Version: "v1.37.2", Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, timeout, "beta to be mid-upgrade again", func(ctx context.Context) error {
			cc := &schedulingv1alpha1.ClusterCapacity{}
			if err := env.admin.Get(ctx, client.ObjectKey{Name: "beta"}, cc); err != nil {
				return err
			}
			if !cc.Status.MidUpgrade {
				return errors.New("beta not mid-upgrade again")
			}
			return nil
		})
	})
	platformtest.Eventually(t, timeout, "the big app placed on beta/workers after the rollout", func(ctx context.Context) error {
		r := &schedulingv1alpha1.PlacementReview{Spec: big}
		if err := env.admin.Create(ctx, r); err != nil {
			return err
		}
		if r.Status.Cluster != "beta" || r.Status.Pool != "workers" {
			return fmt.Errorf("after the rollout: want beta/workers, got %s", r.Status.Message)
		}
		return nil
	})

	// A new version requested but not rolled out yet counts as mid-upgrade too.
	if err := fleettest.SetVersions(ctx, env.admin, "fleet-beta", "beta", "v1.38.0", fleettest.Version{Version: "v1.37.2", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, timeout, "beta refused as mid-upgrade once an upgrade is requested", func(ctx context.Context) error {
		r := &schedulingv1alpha1.PlacementReview{Spec: big}
		if err := env.admin.Create(ctx, r); err != nil {
			return err
		}
		if r.Status.Schedulable || !slices.Contains(verdicts(&r.Status), "beta=MidUpgrade") {
			return fmt.Errorf("upgrade requested: want beta=MidUpgrade, got %v", verdicts(&r.Status))
		}
		return nil
	})
}

func capacityOf(ctx context.Context, cluster string) (*schedulingv1alpha1.ClusterCapacity, error) {
	cc := &schedulingv1alpha1.ClusterCapacity{}
	return cc, env.admin.Get(ctx, client.ObjectKey{Name: cluster}, cc)
}

func wantRequested(t *testing.T, cluster, fig string) {
	t.Helper()
	platformtest.Eventually(t, timeout, cluster+"'s requested resources", func(ctx context.Context) error {
		cc, err := capacityOf(ctx, cluster)
		if err != nil {
			return err
		}
		if got := figures(cc.Status.Requested); got != fig {
			return fmt.Errorf("%s requested: got %s, want %s", cluster, got, fig)
		}
		return nil
	})
}

func TestPlacementCRUD(t *testing.T) {
	ctx := context.Background()
	p := &schedulingv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "crud"},
		Spec:       schedulingv1alpha1.PlacementSpec{App: "crud", Cluster: "gamma", Pool: "workers", Plan: "pro", Replicas: 1, Resources: res("500m", "1Gi")},
	}
	if err := env.admin.Create(ctx, p); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &schedulingv1alpha1.Placement{}
	if err := env.admin.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.Cluster != "gamma" || got.Spec.Resources.CPU.Cmp(resource.MustParse("500m")) != 0 || got.UID == "" {
		t.Fatalf("get: %+v", got)
	}
	var list schedulingv1alpha1.PlacementList
	if err := env.admin.List(ctx, &list, client.InNamespace("tenant-a")); err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, i := range list.Items {
		names = append(names, i.Name)
	}
	if !slices.Equal(names, []string{"api", "crud", "web"}) {
		t.Fatalf("list tenant-a: %v", names)
	}
	wantRequested(t, "gamma", want("500m", "1Gi", 1))

	got.Spec.Replicas = 2
	if err := env.admin.Update(ctx, got); err != nil {
		t.Fatalf("update: %v", err)
	}
	wantRequested(t, "gamma", want("1", "2Gi", 2))

	moved := got.DeepCopy()
	moved.Spec.App = "other"
	if err := env.admin.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.app") {
		t.Fatalf("changing spec.app: want 422 naming spec.app, got %v", err)
	}
	bad := &schedulingv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "bad"},
		Spec:       schedulingv1alpha1.PlacementSpec{App: "bad", Pool: "workers", Replicas: -1},
	}
	err := env.admin.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.cluster") || !strings.Contains(err.Error(), "spec.replicas") {
		t.Fatalf("invalid placement: want 422 naming spec.cluster and spec.replicas, got %v", err)
	}
	missing := p.DeepCopy()
	missing.ResourceVersion, missing.Namespace = "", "no-such-tenant"
	if err := env.admin.Create(ctx, missing); !apierrors.IsNotFound(err) {
		t.Fatalf("placement in a missing namespace: want 404, got %v", err)
	}

	if err := env.admin.Delete(ctx, got); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := env.admin.Get(ctx, client.ObjectKeyFromObject(p), got); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: want 404, got %v", err)
	}
	wantRequested(t, "gamma", want("0", "0", 0))
}

func TestTenantRBAC(t *testing.T) {
	ctx := context.Background()
	if err := fleettest.GrantNamespaceRole(ctx, env.admin, "tenant-a", "alice", "get", "list", "watch", "create", "update", "delete"); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.mgmt.UserConfig("alice", "tenants")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, timeout, "alice to see the placements of tenant-a", func(ctx context.Context) error {
		var list schedulingv1alpha1.PlacementList
		if err := alice.List(ctx, &list, client.InNamespace("tenant-a")); err != nil {
			return fmt.Errorf("alice lists tenant-a: %w", err)
		}
		if len(list.Items) < 2 {
			return fmt.Errorf("alice sees %d placements in tenant-a", len(list.Items))
		}
		return nil
	})
	var list schedulingv1alpha1.PlacementList
	if err := alice.List(ctx, &list, client.InNamespace("tenant-b")); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists tenant-b: want 403, got %v", err)
	}
	if err := alice.List(ctx, &list); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists every namespace: want 403, got %v", err)
	}
	var caps schedulingv1alpha1.ClusterCapacityList
	if err := alice.List(ctx, &caps); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists clustercapacities: want 403, got %v", err)
	}
	if err := alice.Create(ctx, &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{Replicas: 1, Resources: res("1", "1Gi")}}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice creates a placementreview: want 403, got %v", err)
	}

	// bex-apiserver authorizes on its own too (delegated, by
	// SubjectAccessReview): straight to it, alice gets the same answers.
	aliceDirect, err := newClient(env.srv.DirectConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := aliceDirect.List(ctx, &list, client.InNamespace("tenant-a")); err != nil {
		t.Fatalf("alice lists tenant-a directly: %v", err)
	}
	if err := aliceDirect.List(ctx, &list, client.InNamespace("tenant-b")); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists tenant-b directly: want 403 from bex-apiserver, got %v", err)
	}
	if err := aliceDirect.List(ctx, &caps); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists clustercapacities directly: want 403 from bex-apiserver, got %v", err)
	}

	// Granted, alice reads the fleet's capacity (once bex-apiserver's
	// cached denial, 10 s by default, expired).
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "capacity-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{schedulingv1alpha1.GroupName}, Resources: []string{"clustercapacities"}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capacity-reader-alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	platformtest.Eventually(t, timeout, "alice to list clustercapacities after the grant", func(ctx context.Context) error {
		var caps schedulingv1alpha1.ClusterCapacityList
		if err := alice.List(ctx, &caps); err != nil {
			return fmt.Errorf("alice lists clustercapacities after the grant: %w", err)
		}
		if len(caps.Items) != len(wantFleet()) {
			return fmt.Errorf("alice sees %d clusters", len(caps.Items))
		}
		return nil
	})
}

func TestKubectlTableAndOpenAPI(t *testing.T) {
	cs, err := kubernetes.NewForConfig(env.mgmt.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/scheduling.bex.co/v1alpha1/clustercapacities").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("table: %v", err)
	}
	for _, col := range []string{`"name":"Accepts"`, `"name":"Versions"`, `"name":"CPU"`, `"beta"`, `"MidUpgrade"`} {
		if !strings.Contains(string(raw), col) {
			t.Errorf("clustercapacities table lacks %s: %s", col, raw)
		}
	}
	raw, err = cs.Discovery().RESTClient().Get().AbsPath("/apis/scheduling.bex.co/v1alpha1/namespaces/tenant-a/placements").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), `"name":"Cluster"`) || !strings.Contains(string(raw), `"workers"`) {
		t.Errorf("placements table: %v %s", err, raw)
	}
	platformtest.Eventually(t, timeout, "the scheduling API in openapi v3", func(ctx context.Context) error {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/scheduling.bex.co/v1alpha1").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("openapi v3: %w", err)
		}
		for _, s := range []string{"ClusterCapacity", "PlacementReview", "acceptsPlacements"} {
			if !strings.Contains(string(raw), s) {
				return fmt.Errorf("openapi v3 lacks %s", s)
			}
		}
		return nil
	})
}
