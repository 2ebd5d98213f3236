package api_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// appScale reads the App's spec: its plan and the replicas of each process
// that says.
func appScale(t *testing.T, e *apitest.Env, tenant, name string) (string, map[string]int) {
	t.Helper()
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(t.Context(), client.ObjectKey{Namespace: tenant, Name: name}, app); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, p := range app.Spec.Processes {
		if p.Replicas != nil {
			counts[p.Name] = int(*p.Replicas)
		}
	}
	return string(app.Spec.Plan), counts
}

// TestScale: POST .../scale stores the counts and the plan in the App's
// spec (an app with no release only that), records no release, is
// audited; bad counts get a 422 on processes or plan, counts over the
// limit or past the tenant's instances quota a 403 naming the quota, and
// neither changes the spec.
func TestScale(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "scale")
	createApp(t, e, token, "web")
	e.Releaser.SetProcesses("web", "worker")

	a := call(t, e, http.MethodPost, "/apps/web/scale", token, apiclient.ScaleRequest{Processes: map[string]int{"web": 2}})
	wantStatus(t, "scaling an app without a release", a, http.StatusOK)
	var r apiclient.Scale
	a.decode(t, &r)
	if r.Release != 0 || r.Processes["web"] != 2 {
		t.Errorf("scale without a release = %+v, want release 0 and web 2", r)
	}
	if _, counts := appScale(t, e, "scale", "web"); counts["web"] != 2 {
		t.Errorf("the App's spec says %v, want web 2", counts)
	}

	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: "r/scale/web@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "scale", "web", 1)
	auditBefore := countRows(t, e, "audit_log")
	planBefore, countsBefore := appScale(t, e, "scale", "web")
	for _, tc := range []struct {
		name   string
		body   any
		status int
		field  string
		want   string
	}{
		{"nothing", map[string]any{}, 422, "processes", "nothing to scale"},
		{"negative", map[string]any{"processes": map[string]any{"web": -1}}, 422, "processes", "web=-1: the count of instances is 0 or more"},
		{"not a number", map[string]any{"processes": map[string]any{"web": "three"}}, 422, "processes", `web="three": the count of instances is a whole number, 0 to 20`},
		{"a fraction", map[string]any{"processes": map[string]any{"web": 1.5}}, 422, "processes", "web=1.5: the count of instances is a whole number"},
		{"bad name", map[string]any{"processes": map[string]any{"Web!": 1}}, 422, "processes", `process "Web!": a process type is a lowercase name`},
		{"unknown process", map[string]any{"processes": map[string]any{"clock": 1}}, 422, "processes", "process clock: release v1 of web has web, worker"},
		{"unknown plan", map[string]any{"plan": "huge"}, 422, "plan", `plan "huge": the plans are starter, standard, pro`},
		{"over the limit", map[string]any{"processes": map[string]any{"web": 21}}, 403, "", "the tenant's instancesPerProcess quota (20) is reached: web=21"},
	} {
		a := call(t, e, http.MethodPost, "/apps/web/scale", token, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.want) {
			t.Errorf("%s: %d %s, want %d on %q saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.want)
		}
		if tc.status == 403 && a.err().Quota != "instancesPerProcess" {
			t.Errorf("%s: quota %q, want instancesPerProcess", tc.name, a.err().Quota)
		}
	}
	// The runtime's Releaser refuses a scale past the tenant's instances
	// quota (builder/pipeline's TestInstancesQuota): a 403 naming it.
	e.Releaser.FailRollouts(&store.QuotaError{Quota: "instances", Limit: "4", Detail: "web would run 5 instances and the tenant's other apps run 0"})
	a = call(t, e, http.MethodPost, "/apps/web/scale", token, apiclient.ScaleRequest{Processes: map[string]int{"web": 5}})
	if a.status != 403 || a.err().Quota != "instances" || !strings.Contains(a.err().Message, "scaling v1 failed, what ran keeps running: the tenant's instances quota (4) is reached") {
		t.Errorf("a scale past the instances quota: %d %s, want 403 naming it", a.status, a.body)
	}
	e.Releaser.FailRollouts(nil)
	if plan, counts := appScale(t, e, "scale", "web"); plan != planBefore || !maps.Equal(counts, countsBefore) {
		t.Errorf("refused scales changed the spec: plan %q, %v; want %q, %v", plan, counts, planBefore, countsBefore)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after refused scales, want %d", n, auditBefore)
	}

	a = call(t, e, http.MethodPost, "/apps/web/scale", token, apiclient.ScaleRequest{Processes: map[string]int{"web": 3, "worker": 1}, Plan: "standard"})
	wantStatus(t, "scaling web=3 worker=1 --plan standard", a, http.StatusOK)
	a.decode(t, &r)
	if r.Release != 1 || r.Processes["web"] != 3 || r.Processes["worker"] != 1 || r.Plan != "standard" {
		t.Errorf("scale = %+v, want release 1, web 3, worker 1, standard", r)
	}
	if plan, counts := appScale(t, e, "scale", "web"); plan != "standard" || !maps.Equal(counts, map[string]int{"web": 3, "worker": 1}) {
		t.Errorf("the App's spec says plan %q, %v", plan, counts)
	}
	if got := releaseDescriptions(t, e, token, "web"); len(got) != 1 {
		t.Errorf("a scale made a release: %q", got)
	}
	var scales []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if en.Action == "app.scale" {
			scales = append(scales, string(en.Details))
		}
	}
	if len(scales) != 2 || !strings.Contains(scales[1], `"plan": "standard"`) || !strings.Contains(scales[1], `"worker": 1`) {
		t.Errorf("app.scale audit entries = %q, want the two scales that were done", scales)
	}
}
