package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAdminQuotaCLI: against the real API and Postgres, the operator
// reads a tenant's quotas with bex admin quota, sets some with bex admin
// quota set (the others keep their values), clears one with KEY=default,
// and each change is audited as the API's; a value bex cannot read, an
// unknown quota, an unknown tenant and a tenant's token exit with their
// codes and change nothing.
func TestAdminQuotaCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "cliquota")
	operator := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}[k]
	}}
	asTenant := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}[k]
	}}
	overrides := func() store.QuotaOverrides {
		t.Helper()
		o, err := e.Store.TenantQuotas(ctx, tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	out, stderr, code := bexRun(t, operator, "admin", "quota", "cliquota")
	if code != 0 {
		t.Fatalf("admin quota: exit %d: %s", code, stderr)
	}
	for _, line := range []string{
		`QUOTA +LIMIT +SOURCE +DEFAULT +USED`,
		`apps +25 +default +25 +0`,
		`buildMinutes +1000 a month +default +1000 a month +0 since \d{4}-\d\d-01`,
		`cpu +16 CPUs +default +16 CPUs +0 CPUs`,
		`memory +32 GiB +default +32 GiB +0 bytes`,
	} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("admin quota printed\n%s\nwithout a line %q", out, line)
		}
	}

	out, stderr, code = bexRun(t, operator, "admin", "quota", "set", "cliquota", "apps=40", "memory=64Gi", "cpu=2500m", "routes=7")
	if code != 0 {
		t.Fatalf("admin quota set: exit %d: %s", code, stderr)
	}
	for _, line := range []string{`Set the quotas of tenant cliquota\.`, `apps +40 +operator +25 +0`, `routes +7 +operator +100 +0`,
		`cpu +2\.5 CPUs +operator +16 CPUs +0 CPUs`, `memory +64 GiB +operator +32 GiB +0 bytes`, `instances +50 +default +50 +0`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("admin quota set printed\n%s\nwithout a line %q", out, line)
		}
	}
	o := overrides()
	if o.Apps == nil || *o.Apps != 40 || o.MemoryBytes == nil || *o.MemoryBytes != 64<<30 || o.MilliCPU == nil || *o.MilliCPU != 2500 || o.Routes == nil || *o.Routes != 7 || o.Instances != nil {
		t.Fatalf("stored overrides %+v", o)
	}

	// KEY=default clears one; the others stay.
	out, stderr, code = bexRun(t, operator, "admin", "quota", "set", "cliquota", "memory=default", "routes=default", "-o", "json")
	if code != 0 {
		t.Fatalf("admin quota set memory=default: exit %d: %s", code, stderr)
	}
	var q apiclient.Quota
	if err := json.Unmarshal([]byte(out), &q); err != nil || q.Tenant != "cliquota" || q.Overrides.MemoryBytes != nil || q.Quotas.MemoryBytes != 32<<30 ||
		q.Overrides.Apps == nil || *q.Overrides.Apps != 40 || q.Defaults.Apps != 25 {
		t.Errorf("-o json printed %s (%v)", out, err)
	}
	o = overrides()
	if o.MemoryBytes != nil || o.Routes != nil || o.Apps == nil || *o.Apps != 40 || o.MilliCPU == nil || *o.MilliCPU != 2500 {
		t.Errorf("after memory=default routes=default: stored %+v", o)
	}

	before := overrides()
	for _, tc := range []struct {
		name string
		io   app.IO
		args []string
		code int
		want app.Error
	}{
		{"memory without a unit", operator, []string{"memory=64"}, 2,
			app.Error{Kind: app.KindUsage, Field: "memory", Message: `quota memory: "64" has no unit: give one, such as 64Gi or 64Mi`}},
		{"memory in an unknown unit", operator, []string{"apps=30", "memory=64GQ"}, 2,
			app.Error{Kind: app.KindUsage, Field: "memory", Message: `quota memory: "64GQ": the unit GQ is not one bex knows: give Ki, Mi, Gi, Ti or Pi (or k, M, G, T, P)`}},
		{"cpu in bytes", operator, []string{"cpu=4Gi"}, 2,
			app.Error{Kind: app.KindUsage, Field: "cpu", Message: `quota cpu: "4Gi": the unit Gi is not one of CPU: give CPUs, such as 16 or 2.5, or millicores, such as 2500m`}},
		{"negative", operator, []string{"apps=-3"}, 2,
			app.Error{Kind: app.KindUsage, Field: "apps", Message: `quota apps: "-3" is negative: give a whole number from 0 to 2147483647, or default`}},
		{"not a number", operator, []string{"instances=lots"}, 2,
			app.Error{Kind: app.KindUsage, Field: "instances", Message: `quota instances: "lots" is not a number: give a whole number from 0 to 2147483647, or default`}},
		{"unknown quota", operator, []string{"disk=1Gi"}, 2,
			app.Error{Kind: app.KindUsage, Field: "disk", Message: "quota disk: no such quota: give one of apps, routes, concurrentBuilds, buildMinutes, repoBytes, concurrentRuns, instances, cpu, memory"}},
		{"no value", operator, []string{"apps"}, 2,
			app.Error{Kind: app.KindUsage, Message: `"apps": give KEY=VALUE, such as apps=40 or memory=default`}},
		{"twice", operator, []string{"apps=1", "apps=2"}, 2,
			app.Error{Kind: app.KindUsage, Message: "quota apps is given twice: give it once"}},
		{"nothing to set", operator, nil, 2,
			app.Error{Kind: app.KindUsage, Message: "give the quotas to set as KEY=VALUE after the tenant, such as apps=40 or memory=default"}},
		{"a tenant's token", asTenant, []string{"apps=100"}, 5,
			app.Error{Kind: app.KindForbidden, Status: 403, Message: "not allowed: this needs an operator's token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"admin", "quota", "set", "cliquota"}, tc.args...)
			stdout, stderr, code := bexRun(t, tc.io, append(args, "-o", "json")...)
			var got struct{ Error app.Error }
			if code != tc.code || stdout != "" || json.Unmarshal([]byte(stderr), &got) != nil || got.Error != tc.want {
				t.Errorf("bex %s: exit %d, stdout %q, stderr %s; want exit %d and %+v", strings.Join(args, " "), code, stdout, stderr, tc.code, tc.want)
			}
		})
	}
	if o := overrides(); !equalOverrides(o, before) {
		t.Errorf("refused commands changed the overrides: %+v, were %+v", o, before)
	}
	for _, args := range [][]string{{"admin", "quota", "nope"}, {"admin", "quota", "set", "nope", "apps=1"}} {
		if _, stderr, code := bexRun(t, operator, args...); code != 3 || stderr != "bex: tenant \"nope\" not found\n" {
			t.Errorf("bex %s: exit %d, %q; want 3 and tenant not found", strings.Join(args, " "), code, stderr)
		}
	}

	// Each change is audited as the API's admin quota call is.
	entries, err := e.Store.ListAudit(ctx, store.AuditFilter{Action: "tenant.quota"})
	if err != nil {
		t.Fatal(err)
	}
	var ours int
	for _, entry := range entries {
		if entry.Target == "cliquota" {
			ours++
			if entry.Actor != "ops@bex.test" { // apitest's operator
				t.Errorf("audit entry by %q", entry.Actor)
			}
		}
	}
	if ours != 2 {
		t.Errorf("tenant.quota audit entries for cliquota: %d, want 2", ours)
	}
}

// TestAdminQuotaSetTogetherCLI: two operators set different quotas of one
// tenant at the same time, Bob's bex admin quota set made while Ann's is
// under way (after anything it read, before its change arrives); both
// quotas hold. A read of the overrides written back whole lost Bob's.
func TestAdminQuotaSetTogetherCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	tenant, _ := e.TenantToken(t, "clitogether")
	operatorAt := func(url string) app.IO {
		return app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
			return map[string]string{"BEX_API": url, "BEX_TOKEN": e.OperatorToken}[k]
		}}
	}
	target, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Ann's requests pass a proxy that, at her first change, lets Bob's
	// whole command run before hers goes on.
	var bob sync.Once
	proxy := httputil.NewSingleHostReverseProxy(target)
	ann := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			bob.Do(func() {
				if _, stderr, code := bexRun(t, operatorAt(e.URL), "admin", "quota", "set", "clitogether", "routes=7"); code != 0 {
					t.Errorf("bob's admin quota set: exit %d: %s", code, stderr)
				}
			})
		}
		proxy.ServeHTTP(w, r)
	}))
	defer ann.Close()

	out, stderr, code := bexRun(t, operatorAt(ann.URL), "admin", "quota", "set", "clitogether", "apps=40")
	if code != 0 {
		t.Fatalf("ann's admin quota set: exit %d: %s", code, stderr)
	}
	for _, line := range []string{`apps +40 +operator +25 +0`, `routes +7 +operator +100 +0`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("ann's admin quota set printed\n%s\nwithout a line %q", out, line)
		}
	}
	o, err := e.Store.TenantQuotas(t.Context(), tenant.ID)
	if err != nil || o.Apps == nil || *o.Apps != 40 || o.Routes == nil || *o.Routes != 7 {
		t.Errorf("stored after both: %+v, %v; want apps 40 (ann's) and routes 7 (bob's)", o, err)
	}
}

func equalOverrides(a, b store.QuotaOverrides) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
