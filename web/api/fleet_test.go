package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// testFleet: an operator sees each cluster's control-plane machines with
// their versions, and whether MVP is wired, with what is missing when not;
// a tenant is refused.
func testFleet(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	_, tenantToken := e.TenantToken(t, "fleettenant")
	const ns = "fleet-view"
	e.CreateCluster(t, ns, "wired", "v1.36.3", nil)
	e.CreateCluster(t, ns, "stock", "v1.36.3", nil)
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wired"}, kcp); err != nil {
		t.Fatal(err)
	}
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = preflight.WireMVPPatch(kcp, "v1.36.3", true)
	if err := e.Kube.Update(ctx, kcp); err != nil {
		t.Fatal(err)
	}
	// Mid-rollout: one machine runs the new version already.
	for i, v := range []string{"v1.36.3", "v1.36.3", "v1.37.2"} {
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("wired-cp-%d", i+1),
				Labels: map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: "wired", clusterv1.ClusterNameLabel: "wired"}},
			Spec: clusterv1.MachineSpec{ClusterName: "wired", Version: v, Bootstrap: clusterv1.Bootstrap{DataSecretName: new("x")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachine", Name: "m"}},
		}
		if err := e.Kube.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: fmt.Sprintf("10.0.0.%d", i+1)}}
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition, Status: metav1.ConditionTrue, Reason: "PodHealthy"})
		if err := e.Kube.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	a := call(t, e, http.MethodGet, "/fleet", tenantToken, nil)
	if a.status != http.StatusForbidden {
		t.Errorf("a tenant listing the fleet: %d %s, want 403", a.status, a.body)
	}
	a = call(t, e, http.MethodGet, "/fleet", e.OperatorToken, nil)
	wantStatus(t, "listing the fleet", a, http.StatusOK)
	var fleet []apiclient.FleetCluster
	a.decode(t, &fleet)
	byName := map[string]apiclient.FleetCluster{}
	for _, c := range fleet {
		byName[c.Name] = c
	}
	wired, stock := byName[ns+"/wired"], byName[ns+"/stock"]
	var machines []string
	for _, m := range wired.Machines {
		machines = append(machines, fmt.Sprintf("%s@%s/%s/%t", m.Name, m.Version, m.Address, m.Healthy))
	}
	if got, want := strings.Join(machines, " "), "wired-cp-1@v1.36.3/10.0.0.1/true wired-cp-2@v1.36.3/10.0.0.2/true wired-cp-3@v1.37.2/10.0.0.3/true"; got != want {
		t.Errorf("machines of wired = %s, want %s", got, want)
	}
	if wired.ControlPlane != ns+"/wired" || wired.Version != "v1.36.3" || wired.Replicas != 3 || !wired.MVP.Wired {
		t.Errorf("wired cluster = %+v", wired)
	}
	if stock.MVP.Wired || len(stock.Machines) != 0 {
		t.Errorf("stock cluster = %+v; want MVP not wired, no machines", stock)
	}
	var reasons []string
	for _, f := range stock.MVP.Findings {
		if f.Severity == "Blocker" {
			reasons = append(reasons, f.Reason)
		}
	}
	if !strings.Contains(strings.Join(reasons, " "), preflight.ReasonPeerCAFileMissing) {
		t.Errorf("stock cluster's blockers = %v, want %s among them", reasons, preflight.ReasonPeerCAFileMissing)
	}
}

// testCordon: an operator cordons a cluster of any provider and
// uncordons it, each twice: the Cluster's annotation is set and removed,
// and nothing else of it changes; GET /fleet shows the cordon; the second
// call changes nothing and is not audited; a missing cluster is a 404
// that names it; a tenant's token and a viewer's are refused and change
// nothing.
func testCordon(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	_, tenantToken := e.TenantToken(t, "cordontenant")
	viewer := e.Member(t, tenantToken, "vic@cordon.test", "viewer")
	const ns = "fleet-cordon"
	e.CreateCluster(t, ns, "alpha", "v1.36.3", map[string]string{"region": "eu"})
	e.CreateCluster(t, ns, "beta", "v1.36.3", nil)
	alpha := &clusterv1.Cluster{}
	get := func() {
		t.Helper()
		if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, alpha); err != nil {
			t.Fatal(err)
		}
	}
	get()
	alpha.Annotations = map[string]string{"owner": "team-eu"}
	if err := e.Kube.Update(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	const path = "/fleet/clusters/" + ns + "/alpha/cordon"
	annotations := func() string {
		t.Helper()
		get()
		return fmt.Sprint(alpha.Annotations)
	}

	for _, tc := range []struct{ who, token string }{{"a tenant", tenantToken}, {"a viewer", viewer}} {
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			if a := call(t, e, method, path, tc.token, nil); a.status != http.StatusForbidden {
				t.Errorf("%s: %s %s: %d %s, want 403", tc.who, method, path, a.status, a.body)
			}
		}
	}
	if got := annotations(); got != "map[owner:team-eu]" {
		t.Errorf("alpha's annotations after refused cordons: %s", got)
	}
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		a := call(t, e, method, "/fleet/clusters/"+ns+"/nope/cordon", e.OperatorToken, nil)
		if a.status != http.StatusNotFound || a.err().Message != "no cluster fleet-cordon/nope: bex fleet list shows the clusters" {
			t.Errorf("%s of a missing cluster: %d %s, want 404 naming it", method, a.status, a.body)
		}
	}

	change := func(method string, wantCordoned, wantChanged bool, wantAnnotations string) {
		t.Helper()
		a := call(t, e, method, path, e.OperatorToken, nil)
		wantStatus(t, method+" "+path, a, http.StatusOK)
		var cc apiclient.ClusterCordon
		a.decode(t, &cc)
		if cc.Name != ns+"/alpha" || cc.Cordoned != wantCordoned || cc.Changed != wantChanged || cc.Message == "" {
			t.Errorf("%s %s = %+v, want cordoned %t, changed %t", method, path, cc, wantCordoned, wantChanged)
		}
		if got := annotations(); got != wantAnnotations {
			t.Errorf("after %s %s, alpha's annotations = %s, want %s", method, path, got, wantAnnotations)
		}
		if alpha.Labels["region"] != "eu" || alpha.Spec.ControlPlaneRef.Name != "alpha" {
			t.Errorf("after %s %s, alpha's labels %v and control plane %+v changed", method, path, alpha.Labels, alpha.Spec.ControlPlaneRef)
		}
	}
	cordoned := func() string {
		t.Helper()
		a := call(t, e, http.MethodGet, "/fleet", e.OperatorToken, nil)
		wantStatus(t, "listing the fleet", a, http.StatusOK)
		var fleet []apiclient.FleetCluster
		a.decode(t, &fleet)
		var out []string
		for _, c := range fleet {
			if strings.HasPrefix(c.Name, ns+"/") {
				out = append(out, fmt.Sprintf("%s:%t", c.Name, c.Cordoned))
			}
		}
		return strings.Join(out, " ")
	}
	const cordonedAlpha = "map[owner:team-eu scheduling.bex.co/cordoned:true]"
	change(http.MethodPut, true, true, cordonedAlpha)
	change(http.MethodPut, true, false, cordonedAlpha)
	if got, want := cordoned(), "fleet-cordon/alpha:true fleet-cordon/beta:false"; got != want {
		t.Errorf("the fleet's cordons = %s, want %s", got, want)
	}
	change(http.MethodDelete, false, true, "map[owner:team-eu]")
	change(http.MethodDelete, false, false, "map[owner:team-eu]")
	if got, want := cordoned(), "fleet-cordon/alpha:false fleet-cordon/beta:false"; got != want {
		t.Errorf("the fleet's cordons after the uncordon = %s, want %s", got, want)
	}

	var actions []string
	for _, x := range auditActions(t, e, "") {
		if strings.HasPrefix(x.Action, "fleet.") {
			actions = append(actions, x.Action+":"+x.Target)
		}
	}
	if got, want := strings.Join(actions, " "), "fleet.cordon:fleet-cordon/alpha fleet.uncordon:fleet-cordon/alpha"; got != want {
		t.Errorf("audit = %s, want %s", got, want)
	}
}

// testAudit: an operator reads the audit log filtered by tenant, action
// and time; a tenant is refused; a bad filter is a 422 on its field.
func testAudit(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, ann := e.TenantToken(t, "auditann")
	_, bob := e.TenantToken(t, "auditbob")
	createApp(t, e, ann, "shop")
	createApp(t, e, bob, "blog")
	wantStatus(t, "deleting", call(t, e, http.MethodDelete, "/apps/blog", bob, nil), http.StatusNoContent)

	a := call(t, e, http.MethodGet, "/admin/audit", ann, nil)
	if a.status != http.StatusForbidden {
		t.Errorf("a tenant reading the audit log: %d %s, want 403", a.status, a.body)
	}
	entries := func(query string) []apiclient.AuditEntry {
		t.Helper()
		a := call(t, e, http.MethodGet, "/admin/audit"+query, e.OperatorToken, nil)
		wantStatus(t, "audit "+query, a, http.StatusOK)
		var out []apiclient.AuditEntry
		a.decode(t, &out)
		return out
	}
	describe := func(es []apiclient.AuditEntry) string {
		var s []string
		for _, x := range es {
			s = append(s, x.Tenant+":"+x.Action+":"+x.Target)
		}
		return strings.Join(s, " ")
	}
	if got, want := describe(entries("?tenant=auditbob")), "auditbob:app.delete:blog auditbob:app.create:blog"; got != want {
		t.Errorf("bob's entries = %q, want %q", got, want)
	}
	if got, want := describe(entries("?tenant=auditann&action=app.create&since=1h")), "auditann:app.create:shop"; got != want {
		t.Errorf("ann's app.create entries = %q, want %q", got, want)
	}
	if got := entries("?action=app.create&since=2000-01-01T00:00:00Z&limit=1"); len(got) != 1 || got[0].Target != "blog" {
		t.Errorf("newest app.create = %q, want bob's blog only", describe(got))
	}
	if got := entries("?tenant=auditbob&since=" + "2999-01-01T00:00:00Z"); len(got) != 0 {
		t.Errorf("entries from the future = %q", describe(got))
	}
	for query, field := range map[string]string{"?since=yesterday": "since", "?tenant=nobody": "tenant", "?before=x": "before", "?limit=0": "limit"} {
		a := call(t, e, http.MethodGet, "/admin/audit"+query, e.OperatorToken, nil)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != field {
			t.Errorf("audit %s: %d %s, want 422 on %s", query, a.status, a.body, field)
		}
	}
}
