package dashboard_test

import (
	"crypto/rand"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard"
)

// TestConsoleLocalClusters: on a platform with a local fleet the operator
// creates a local cluster from the console, cordons and uncordons it, and
// deletes it by typing its name; the API's refusals (a bad name, the fleet
// still starting, a cluster that does not exist) come back on the form
// with what was typed and change nothing; a tenant is refused; a platform
// without a local fleet shows no form.
func TestConsoleLocalClusters(t *testing.T) {
	cp := cptest.Start(t)
	fleet := &apitest.LocalFleet{}
	e := apitest.StartWith(t, cp, apitest.Options{LocalFleet: fleet})
	ctx := t.Context()
	serve := func(versions []string) string {
		key := make([]byte, 32)
		rand.Read(key)
		d, err := dashboard.New(dashboard.Options{API: e.URL, CookieKey: key, LocalFleetVersions: versions, Log: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(d.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	withFleet, without := serve(kubebin.KubeVersions()), serve(nil)
	clusters := func() []string {
		t.Helper()
		var list clusterv1.ClusterList
		if err := e.Kube.List(ctx, &list, client.InNamespace(apiclient.LocalClusterNamespace)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list.Items {
			if c.DeletionTimestamp.IsZero() {
				out = append(out, c.Name)
			}
		}
		return out
	}

	plain := newUser(t, without)
	signIn(t, plain, e.OperatorToken)
	if p := plain.get("/console"); p.status != http.StatusOK || strings.Contains(p.body, "create-local-cluster") {
		t.Errorf("the console of a platform without a local fleet = %d, want no create form:\n%s", p.status, p.body)
	}

	_, tenantToken := e.TenantToken(t, "consoletenant")
	tenant := newUser(t, withFleet)
	signIn(t, tenant, tenantToken)
	tenantCSRF := tenant.get("/apps").csrf(t)
	if p := tenant.post("/console/local-clusters", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "csrf": {tenantCSRF}}); p.status != http.StatusForbidden {
		t.Errorf("a tenant creating a local cluster = %d, want 403", p.status)
	}

	op := newUser(t, withFleet)
	signIn(t, op, e.OperatorToken)
	console := op.get("/console")
	if console.status != http.StatusOK || !strings.Contains(console.body, `id="create-local-cluster"`) {
		t.Fatalf("the console = %d, want the create form:\n%s", console.status, console.body)
	}
	for _, v := range kubebin.KubeVersions() {
		if !strings.Contains(console.body, `<option value="v`+v+`"`) {
			t.Errorf("the version list lacks v%s", v)
		}
	}
	if !strings.Contains(console.body, `name="workers" type="number" min="0" max="4" value="0"`) {
		t.Errorf("the create form lacks a workers field of 0 to 4, 0 by default:\n%s", console.body)
	}
	csrf := console.csrf(t)
	if p := op.post("/console/local-clusters", url.Values{"name": {"dev-2"}, "version": {"v1.36.3"}}); p.status != http.StatusForbidden {
		t.Errorf("creating without the CSRF field = %d, want 403", p.status)
	}

	// Refusals come back on the form, with what was typed.
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		says   string
	}{
		{"a bad name", url.Values{"name": {"Dev_1"}, "version": {"v1.36.3"}}, http.StatusUnprocessableEntity, "lower-case letters"},
		{"two machines", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "replicas": {"2"}}, http.StatusUnprocessableEntity, "want at least 3"},
		{"replicas not a number", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "replicas": {"three"}}, http.StatusUnprocessableEntity, `"three" is not a number`},
		{"five workers", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "workers": {"5"}}, http.StatusUnprocessableEntity, "5 worker machines: want 0 to 4"},
		{"workers not a number", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "workers": {"two"}}, http.StatusUnprocessableEntity, `workers: "two" is not a number; give 0 to 4`},
		{"a version not pinned", url.Values{"name": {"dev-1"}, "version": {"v1.30.0"}}, http.StatusUnprocessableEntity, "is not pinned"},
	} {
		tc.form.Set("csrf", csrf)
		p := op.post("/console/local-clusters", tc.form)
		msg := formError(p)
		if p.status != tc.status || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, p.status, msg, tc.status, tc.says)
		}
		if !strings.Contains(p.body, `value="`+html.EscapeString(tc.form.Get("name"))+`"`) {
			t.Errorf("%s: the form lost the name typed", tc.name)
		}
		if w := tc.form.Get("workers"); w != "" && !strings.Contains(p.body, `name="workers" type="number" min="0" max="4" value="`+w+`"`) {
			t.Errorf("%s: the form lost the workers typed", tc.name)
		}
	}
	fleet.SetNotReady(errors.New("Cluster API's managers are being built"))
	if p := op.post("/console/local-clusters", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "csrf": {csrf}}); p.status != http.StatusServiceUnavailable ||
		!strings.Contains(formError(p), "the local fleet is not ready: Cluster API's managers are being built") {
		t.Errorf("creating while the fleet starts: %d %q, want 503 with the reason", p.status, formError(p))
	}
	fleet.SetNotReady(nil)
	if got := clusters(); len(got) != 0 {
		t.Fatalf("refused forms made clusters %v", got)
	}

	// Created, with a worker: the console says what happens next and
	// lists it with a delete form.
	p := op.post("/console/local-clusters", url.Values{"name": {"dev-1"}, "version": {"v1.36.3"}, "replicas": {"3"}, "workers": {"1"}, "csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console?notice=") {
		t.Fatalf("creating dev-1 = %d to %q:\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if got := clusters(); len(got) != 1 || got[0] != "dev-1" {
		t.Fatalf("clusters after creating dev-1: %v", got)
	}
	md := &clusterv1.MachineDeployment{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: apiclient.LocalClusterNamespace, Name: "dev-1-md-0"}, md); err != nil || ptr.Deref(md.Spec.Replicas, 0) != 1 {
		t.Errorf("dev-1's workers: %v, %v; want a MachineDeployment of one", md.Spec.Replicas, err)
	}
	after := op.get(p.header.Get("Location"))
	if notice := between(after.body, `id="notice">`, "</p>"); !strings.Contains(notice, "bex fleet list") {
		t.Errorf("the notice after creating = %q, want what to watch", notice)
	}
	if !strings.Contains(after.body, `data-cluster="default/dev-1"`) || !strings.Contains(after.body, `action="/console/local-clusters/dev-1/delete"`) {
		t.Errorf("the console after creating lacks dev-1 or its delete form:\n%s", after.body)
	}
	if !strings.Contains(after.body, `<div class="workers">Workers, 1 wanted: </div>`) {
		t.Errorf("dev-1's row does not say it wants a worker:\n%s", after.body)
	}

	// Cordon and uncordon: a tenant cannot, nor a form without the CSRF
	// field; a cluster gone is the API's 404 on the console.
	cordoned := func() string {
		t.Helper()
		cl := &clusterv1.Cluster{}
		if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: apiclient.LocalClusterNamespace, Name: "dev-1"}, cl); err != nil {
			t.Fatal(err)
		}
		return cl.Annotations["scheduling.bex.co/cordoned"]
	}
	if !strings.Contains(after.body, `action="/console/clusters/default/dev-1/cordon"`) || strings.Contains(after.body, `action="/console/clusters/default/dev-1/uncordon"`) {
		t.Errorf("dev-1's row lacks its cordon form, or has an uncordon one:\n%s", after.body)
	}
	if p := tenant.post("/console/clusters/default/dev-1/cordon", url.Values{"csrf": {tenantCSRF}}); p.status != http.StatusForbidden {
		t.Errorf("a tenant cordoning a cluster = %d, want 403", p.status)
	}
	if p := op.post("/console/clusters/default/dev-1/cordon", url.Values{}); p.status != http.StatusForbidden {
		t.Errorf("cordoning without the CSRF field = %d, want 403", p.status)
	}
	if p := op.post("/console/clusters/default/nope/cordon", url.Values{"csrf": {csrf}}); p.status != http.StatusNotFound || formError(p) != "no cluster default/nope: bex fleet list shows the clusters" {
		t.Errorf("cordoning a cluster that does not exist = %d %q, want 404 with the API's message", p.status, formError(p))
	}
	if got := cordoned(); got != "" {
		t.Fatalf("dev-1 after refused cordons: annotation %q", got)
	}
	p = op.post("/console/clusters/default/dev-1/cordon", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console?notice=") {
		t.Fatalf("cordoning dev-1 = %d to %q:\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if got := cordoned(); got != "true" {
		t.Errorf("dev-1 after its cordon: annotation %q, want true", got)
	}
	after = op.get(p.header.Get("Location"))
	if notice := html.UnescapeString(between(after.body, `id="notice">`, "</p>")); !strings.HasPrefix(notice, "Cluster default/dev-1 cordoned: ") {
		t.Errorf("the notice after cordoning = %q", notice)
	}
	if !strings.Contains(after.body, `<span class="badge cordoned"`) || !strings.Contains(after.body, `action="/console/clusters/default/dev-1/uncordon"`) {
		t.Errorf("the console after the cordon lacks dev-1's badge or its uncordon form:\n%s", after.body)
	}
	p = op.post("/console/clusters/default/dev-1/uncordon", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || cordoned() != "" {
		t.Errorf("uncordoning dev-1 = %d, annotation %q after", p.status, cordoned())
	}

	// Deleting needs the name typed again; a tenant cannot.
	if p := tenant.post("/console/local-clusters/dev-1/delete", url.Values{"confirm": {"dev-1"}, "csrf": {tenantCSRF}}); p.status != http.StatusForbidden {
		t.Errorf("a tenant deleting a local cluster = %d, want 403", p.status)
	}
	if p := op.post("/console/local-clusters/dev-1/delete", url.Values{"confirm": {"dev"}, "csrf": {csrf}}); p.status != http.StatusUnprocessableEntity ||
		!strings.Contains(formError(p), "Type the cluster's name, dev-1, to delete it.") {
		t.Errorf("deleting without the name = %d %q, want 422", p.status, formError(p))
	}
	if p := op.post("/console/local-clusters/nope/delete", url.Values{"confirm": {"nope"}, "csrf": {csrf}}); p.status != http.StatusNotFound || formError(p) == "" {
		t.Errorf("deleting a cluster that does not exist = %d %q, want 404 with the API's message", p.status, formError(p))
	}
	if got := clusters(); len(got) != 1 {
		t.Fatalf("clusters after refused deletions: %v", got)
	}
	p = op.post("/console/local-clusters/dev-1/delete", url.Values{"confirm": {"dev-1"}, "csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console?notice=") {
		t.Fatalf("deleting dev-1 = %d to %q:\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if got := clusters(); len(got) != 0 {
		t.Errorf("clusters after deleting dev-1: %v", got)
	}
	cl := &clusterv1.Cluster{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: apiclient.LocalClusterNamespace, Name: "dev-1"}, cl); err == nil && cl.DeletionTimestamp.IsZero() {
		t.Error("dev-1's Cluster is not being deleted")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// formError is the console's local-cluster error, unescaped.
func formError(p page) string {
	return html.UnescapeString(between(p.body, `id="local-cluster-error">`, "</p>"))
}

// between returns the text of s between the first from and the next to.
func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}
