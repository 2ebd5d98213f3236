package apiclient_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"bex.co/bex/web/api/apiclient"
)

// TestSetQuota: each quota is read as bex admin quota set and the console
// take it, "default" removes it, and what cannot be read is refused
// saying what to type, leaving the overrides as they were.
func TestSetQuota(t *testing.T) {
	var o apiclient.QuotaOverrides
	for _, kv := range [][2]string{{"apps", "40"}, {"memory", "64Gi"}, {"cpu", "2500m"}, {"repoBytes", "2 GiB"}, {"instances", "0"}} {
		if err := o.SetQuota(kv[0], kv[1]); err != nil {
			t.Fatalf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	if *o.Apps != 40 || *o.MemoryBytes != 64<<30 || *o.MilliCPU != 2500 || *o.RepoBytes != 2<<30 || *o.Instances != 0 || o.Routes != nil {
		t.Fatalf("overrides %+v", o)
	}
	if err := o.SetQuota("apps", "default"); err != nil || o.Apps != nil {
		t.Errorf("apps=default: %v, %v", o.Apps, err)
	}
	before := o
	for _, tc := range []struct{ key, value, want string }{
		{"apps", "-1", `quota apps: "-1" is negative`},
		{"apps", "many", `quota apps: "many" is not a number: give a whole number from 0 to 2147483647, or default`},
		{"routes", "2147483648", "the largest it may be"},
		{"memory", "64", `quota memory: "64" has no unit`},
		{"memory", "64Qi", "the unit Qi is not one bex knows"},
		{"cpu", "4Gi", "the unit Gi is not one of CPU"},
		{"cpu", "-4", "negative"},
		{"disk", "1Gi", "quota disk: no such quota: give one of apps, routes, concurrentBuilds, buildMinutes, repoBytes, concurrentRuns, instances, cpu, memory"},
	} {
		err := o.SetQuota(tc.key, tc.value)
		var qe *apiclient.QuotaInputError
		if !errors.As(err, &qe) || qe.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v; want %q", tc.key, tc.value, err, tc.want)
		}
		if o != before {
			t.Errorf("%s=%s changed the overrides", tc.key, tc.value)
		}
	}
	rows := apiclient.Quota{Quotas: apiclient.Quotas{MilliCPU: 2500, MemoryBytes: 64 << 30}, Defaults: apiclient.Quotas{MilliCPU: 16000, MemoryBytes: 32 << 30}, Overrides: o}.Rows()
	for _, r := range rows {
		switch r.Key {
		case "cpu":
			if r.Limit != "2.5 CPUs" || r.Default != "16 CPUs" || !r.Set || r.Input != "2500m" {
				t.Errorf("cpu row %+v", r)
			}
		case "memory":
			if r.Limit != "64 GiB" || r.Default != "32 GiB" || !r.Set || r.Input != "64Gi" {
				t.Errorf("memory row %+v", r)
			}
		case "apps":
			if r.Set || r.Input != "" {
				t.Errorf("apps row %+v", r)
			}
		}
	}
}

// TestQuotaPatchSet: a patch holds only the quotas set on it, in the
// units the API takes (millicores, bytes), null for default; a value that
// cannot be read leaves it as it was.
func TestQuotaPatchSet(t *testing.T) {
	p := apiclient.QuotaPatch{}
	for _, kv := range [][2]string{{"apps", "40"}, {"cpu", "2.5"}, {"memory", "64Gi"}, {"routes", "default"}} {
		if err := p.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	got, err := json.Marshal(p)
	if want := `{"apps":40,"cpu":2500,"memory":68719476736,"routes":null}`; err != nil || string(got) != want {
		t.Errorf("patch %s (%v), want %s", got, err, want)
	}
	if err := p.Set("memory", "64"); err == nil || string(p["memory"]) != "68719476736" {
		t.Errorf("memory=64: %v, memory now %s; want an error and 64Gi kept", err, p["memory"])
	}
	if err := p.Set("disk", "1Gi"); err == nil || len(p) != 4 {
		t.Errorf("disk=1Gi: %v, patch %v; want an error and nothing added", err, p)
	}
}

// TestQuotaPatchExpect: the expectations go under "expect", in the units
// the API takes, null for default, beside the quotas set; QuotaInput
// reads them back as a form shows them.
func TestQuotaPatchExpect(t *testing.T) {
	p := apiclient.QuotaPatch{}
	for _, kv := range [][3]string{{"memory", "128Gi", "65536Mi"}, {"cpu", "4", "default"}} {
		if err := p.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
		if err := p.Expect(kv[0], kv[2]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := json.Marshal(p)
	if want := `{"cpu":4000,"expect":{"cpu":null,"memory":68719476736},"memory":137438953472}`; err != nil || string(got) != want {
		t.Errorf("patch %s (%v), want %s", got, err, want)
	}
	if err := p.Expect("memory", "64"); err == nil {
		t.Errorf("expecting memory 64: no error")
	}
	v := int64(96 << 30)
	if got := apiclient.QuotaInput("memory", &v); got != "96Gi" {
		t.Errorf("QuotaInput(memory, 96 GiB) = %q", got)
	}
	if got := apiclient.QuotaInput("cpu", nil); got != "default" {
		t.Errorf("QuotaInput(cpu, nil) = %q", got)
	}
}
