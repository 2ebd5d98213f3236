package app_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestRoutesCLI runs bex routes against the real API: what add prints
// (the DNS records to create), how list shows what the Route controller
// observed, and remove.
func TestRoutesCLI(t *testing.T) {
	cp := cptest.Start(t)
	e := apitest.Start(t, cp)
	ctx := t.Context()
	_, token := e.TenantToken(t, "clirt")
	_, otherToken := e.TenantToken(t, "clirtother")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	other := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": otherToken}
	for _, args := range [][]string{{"apps", "create", "web"}} {
		if _, err := bex(t, dir, env, "", args...); err != nil {
			t.Fatal(err)
		}
		if _, err := bex(t, dir, other, "", args...); err != nil {
			t.Fatal(err)
		}
	}

	// markNotServing writes conditions on www.example.test's Route as the
	// Route controller would.
	markNotServing := func(t *testing.T) {
		var list platformv1alpha1.RouteList
		if err := e.Kube.List(ctx, &list, client.InNamespace("clirt")); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			r := &list.Items[i]
			if r.Spec.Hostname != "www.example.test" || r.Spec.PathPrefix != "/" {
				continue
			}
			for _, c := range []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotServing", Message: "DNSReady is False (DNSNotPointingHere): DNS not pointing here: www.example.test resolves to 1.2.3.4: create a CNAME record"},
				{Type: "Admitted", Status: metav1.ConditionTrue, Reason: "Accepted"},
				{Type: "DNSReady", Status: metav1.ConditionFalse, Reason: "DNSNotPointingHere", Message: "DNS not pointing here"},
				{Type: "CertificateReady", Status: metav1.ConditionFalse, Reason: "CertificatePending"},
			} {
				meta.SetStatusCondition(&r.Status.Conditions, c)
			}
			if err := e.Kube.Status().Update(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}

	// markVerified writes DomainVerified=True on www.example.test's Route
	// for / as the Route controller would once it found the TXT record.
	markVerified := func(t *testing.T) {
		var list platformv1alpha1.RouteList
		if err := e.Kube.List(ctx, &list, client.InNamespace("clirt")); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if r := &list.Items[i]; r.Spec.Hostname == "www.example.test" && r.Spec.PathPrefix == "/" {
				meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: "DomainVerified", Status: metav1.ConditionTrue, Reason: "TXTRecordFound"})
				if err := e.Kube.Status().Update(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	txtValue := domains.Token(apitest.AppDomain, "clirt", "www.example.test")

	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		before  func(*testing.T)
		want    string
		match   string
		wantErr string
		json    func(t *testing.T, out []byte)
	}{
		{name: "empty list", args: []string{"routes", "list", "--app", "web"},
			want: "App web has no custom hostnames: add one with bex routes add HOSTNAME --app web\n"},
		{name: "add", args: []string{"routes", "add", "WWW.example.test", "--app", "web"}, want: "" +
			"Added www.example.test/ to app web (TLS Auto).\n\n" +
			"Prove the domain is yours: create this DNS record (keep it; the hostname is served only while it is there):\n" +
			"  _bex-challenge.www.example.test  TXT    " + txtValue + "\n\n" +
			"Create this DNS record at your DNS provider:\n" +
			"  www.example.test  CNAME  web-clirt.apps.bex.test\n" +
			"or, at the apex of a zone (such as example.com), where a CNAME is not allowed:\n" +
			"  www.example.test  A      192.0.2.10\n\n" +
			"Once the TXT record is found and DNS points here, a certificate is obtained on the first HTTPS request. Follow it with:\n" +
			"  bex routes list --app web\n"},
		{name: "add a prefix without TLS, json", args: []string{"routes", "add", "www.example.test", "--app", "web", "--path", "/api", "--tls", "none", "-o", "json"},
			json: func(t *testing.T, out []byte) {
				var r apiclient.Route
				if err := json.Unmarshal(out, &r); err != nil || r.PathPrefix != "/api" || r.TLS != "None" || r.DNSTarget.CNAME != "web-clirt.apps.bex.test" {
					t.Errorf("route = %s, %v", out, err)
				}
			}},
		{name: "taken by another tenant", env: other, before: markVerified, args: []string{"routes", "add", "www.example.test", "--app", "web"},
			wantErr: "hostname www.example.test is already in use by another tenant: if it is yours, remove it from the app that has it there, or use another hostname (field hostname)"},
		{name: "invalid", args: []string{"routes", "add", "bad_name.example", "--app", "web"}, wantErr: "must be a DNS name of at least two labels"},
		{name: "no app flag", args: []string{"routes", "list"}, wantErr: "which app? add --app APP"},
		{name: "list", before: markNotServing, args: []string{"routes", "list", "--app", "web"}, want: "" +
			"HOSTNAME          PATH  TLS   STATUS     CONDITIONS\n" +
			"www.example.test  /     Auto  not ready  Admitted=Accepted DomainVerified=TXTRecordFound DNSReady=DNSNotPointingHere CertificateReady=CertificatePending\n" +
			"www.example.test  /api  None  pending    -\n" +
			"\nwww.example.test/: DNSReady is False (DNSNotPointingHere): DNS not pointing here: www.example.test resolves to 1.2.3.4: create a CNAME record\n" +
			"\nwww.example.test: not verified: create the DNS record  _bex-challenge.www.example.test  TXT  " + txtValue + "\n"},
		{name: "list json", args: []string{"routes", "list", "--app", "web", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rs []apiclient.Route
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 2 || rs[0].Conditions[0].Type != "Ready" {
				t.Fatalf("routes = %s, %v", out, err)
			}
			reasons := map[string]string{}
			for _, c := range rs[0].Conditions {
				reasons[c.Type] = c.Reason
			}
			if reasons["DNSReady"] != "DNSNotPointingHere" || reasons["DomainVerified"] != "TXTRecordFound" {
				t.Errorf("conditions of %s: %v, want DNSReady DNSNotPointingHere and DomainVerified TXTRecordFound", rs[0].Hostname, reasons)
			}
		}},
		{name: "other tenant cannot remove", env: other, args: []string{"routes", "remove", "www.example.test", "--app", "web"},
			wantErr: `app "web" has no route for www.example.test/`},
		{name: "remove a prefix", args: []string{"routes", "remove", "www.example.test", "--app", "web", "--path", "/api"},
			want: "Removed www.example.test/api from app web. Its DNS record can go too.\n"},
		{name: "remove", args: []string{"routes", "remove", "www.example.test", "--app", "web", "-o", "json"},
			match: `"removed": "www.example.test"`},
		{name: "empty again json", args: []string{"routes", "list", "--app", "web", "-o", "json"}, want: "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			if tc.env == nil {
				tc.env = env
			}
			out, err := bex(t, dir, tc.env, "", tc.args...)
			if !checkRun(t, tc.args, out, err, tc.wantErr, tc.want, tc.match) {
				return
			}
			if tc.json != nil {
				tc.json(t, []byte(out))
			}
		})
	}
}
