package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAppsSetMaintenancePageCLI: bex apps set --maintenance-page sends the
// file (or standard input) as the app's maintenance page and says which
// page browsers get; --no-maintenance-page removes it. A file over 64 KiB,
// not UTF-8 or empty, and an empty flag, are refused by the CLI itself,
// before any request: the App's spec stays as it was.
func TestAppsSetMaintenancePageCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	_, token := e.TenantToken(t, "clipage")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, err := bex(t, dir, env, "", "apps", "create", "shop"); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	page := "<!doctype html><h1>Closed for stock-taking</h1>\n"
	other := "<!doctype html><h1>Closed until noon, see you!</h1>\n"
	big := file("big.html", strings.Repeat("x", apiclient.MaxMaintenancePage+1))
	for _, tc := range []cliCase{
		{name: "a page", args: []string{"apps", "set", "shop", "--maintenance-page", file("page.html", page)},
			want: fmt.Sprintf("Changed shop:\n  Page:         the platform's -> its own (%d bytes)\nIt has no release yet: its first push runs with these settings.\n"+
				"Browsers get this maintenance page while maintenance mode is on.\n", len(page))},
		{name: "the same page", args: []string{"apps", "set", "shop", "--maintenance-page", "-"}, stdin: page,
			want: "Nothing changed: shop has these settings already.\n"},
		{name: "another page from stdin, in maintenance", args: []string{"apps", "set", "shop", "--maintenance-page", "-", "--maintenance", "on"}, stdin: other,
			want: fmt.Sprintf("Changed shop:\n  Maintenance:  off -> on\n  Page:         its own (%d bytes) -> its own (%d bytes)\nIt has no release yet: its first push runs with these settings.\n"+
				"Browsers get the new maintenance page now.\n", len(page), len(other))},
		{name: "json", args: []string{"apps", "set", "shop", "--maintenance-page", file("page.html", page), "-o", "json"}, json: func(t *testing.T, out []byte) {
			var a apiclient.App
			if err := json.Unmarshal(out, &a); err != nil || a.MaintenancePage != page || a.MaintenancePageBytes != len(page) {
				t.Errorf("apps set -o json = %s, %v", out, err)
			}
		}},
		{name: "over 64 KiB", args: []string{"apps", "set", "shop", "--maintenance-page", big}, wantErr: "--maintenance-page " + big + " is over 65536 bytes (64 KiB)"},
		{name: "over 64 KiB from stdin", args: []string{"apps", "set", "shop", "--maintenance-page", "-"}, stdin: strings.Repeat("y", 70000), wantErr: "--maintenance-page - is over 65536 bytes"},
		{name: "not UTF-8", args: []string{"apps", "set", "shop", "--maintenance-page", file("latin1.html", "<h1>Ferm\xe9</h1>")}, wantErr: "is not valid UTF-8"},
		{name: "an empty file", args: []string{"apps", "set", "shop", "--maintenance-page", file("empty.html", "")}, wantErr: "is empty: give an HTML page, or --no-maintenance-page"},
		{name: "an empty flag", args: []string{"apps", "set", "shop", "--maintenance-page", ""}, wantErr: "--maintenance-page is empty: give an HTML file"},
		{name: "no such file", args: []string{"apps", "set", "shop", "--maintenance-page", filepath.Join(files, "nope.html")}, wantErr: "no such file"},
		{name: "set and remove", args: []string{"apps", "set", "shop", "--no-maintenance-page", "--maintenance-page", big}, wantErr: "--no-maintenance-page removes the maintenance page"},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, env) })
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "clipage", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.MaintenancePage != page || !app.Spec.Suspended {
		t.Errorf("after the refused pages the App's spec has page %.100q, suspended %v", app.Spec.MaintenancePage, app.Spec.Suspended)
	}

	(cliCase{name: "remove", args: []string{"apps", "set", "shop", "--no-maintenance-page"},
		want: fmt.Sprintf("Changed shop:\n  Page:         its own (%d bytes) -> the platform's\nIt has no release yet: its first push runs with these settings.\n"+
			"Browsers get the platform's maintenance page now.\n", len(page))}).run(t, dir, env)
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "clipage", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.MaintenancePage != "" {
		t.Errorf("after --no-maintenance-page the App's spec has a page of %d bytes", len(app.Spec.MaintenancePage))
	}
}
