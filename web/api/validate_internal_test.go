package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/web/api/apiclient"
)

func TestNewNamesMissingOptions(t *testing.T) {
	_, err := New(Options{})
	if err == nil || !strings.Contains(err.Error(), "missing AppDomain, Deployer, GitBase, Instances, Kube, Logs, Store") {
		t.Errorf("New(Options{}) = %v, want every missing option named", err)
	}
}

func TestValidateAppName(t *testing.T) {
	for _, tc := range []struct {
		name, tenant string
		ok           bool
	}{
		{"web", "acme", true},
		{"a", "acme", true},
		{"web-2", "acme", true},
		{strings.Repeat("a", 40), "acme", true},
		{strings.Repeat("a", 41), "acme", false},
		{strings.Repeat("a", 40), strings.Repeat("t", 22), true}, // 63
		{strings.Repeat("a", 40), strings.Repeat("t", 23), false},
		{"", "acme", false},
		{"Web", "acme", false},
		{"2web", "acme", false},
		{"web-", "acme", false},
		{"we_b", "acme", false},
	} {
		err := validateAppName(tc.name, tc.tenant)
		var he *httpError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &he) || he.field != "name" || he.status != 422)) {
			t.Errorf("validateAppName(%q, %q) = %v, want ok %v (else 422 on name)", tc.name, tc.tenant, err, tc.ok)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	str := func(s string) *string { return &s }
	env := []platformv1alpha1.EnvVar{
		{Name: "B", Value: str("1")},
		{Name: "SECRET", SecretKeyRef: &platformv1alpha1.SecretKeySelector{Name: "web-env", Key: "SECRET"}},
		{Name: "A", Value: str("2")},
	}
	show := func(env []platformv1alpha1.EnvVar) string {
		var parts []string
		for _, e := range env {
			if e.SecretKeyRef != nil {
				parts = append(parts, e.Name+"->"+e.SecretKeyRef.Name+"/"+e.SecretKeyRef.Key)
			} else {
				parts = append(parts, e.Name+"="+*e.Value)
			}
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		req  apiclient.PatchEnvRequest
		want string
	}{
		// Replaced in place, new ones appended by name.
		{apiclient.PatchEnvRequest{Set: map[string]string{"A": "3", "Z": "", "C": "c"}}, "B=1 SECRET->web-env/SECRET A=3 C=c Z="},
		{apiclient.PatchEnvRequest{Set: map[string]string{"SECRET": "plain"}}, "B=1 SECRET=plain A=2"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"B": "x"}, Secret: true}, "B->web-env/B SECRET->web-env/SECRET A=2"},
		{apiclient.PatchEnvRequest{Unset: []string{"SECRET", "NOPE"}}, "B=1 A=2"},
	} {
		if got := show(mergeEnv("web", env, tc.req)); got != tc.want {
			t.Errorf("mergeEnv(%+v) = %s, want %s", tc.req, got, tc.want)
		}
	}
	if show(env) != "B=1 SECRET->web-env/SECRET A=2" {
		t.Errorf("mergeEnv changed its input: %s", show(env))
	}
}

func TestValidateEnvPatch(t *testing.T) {
	long := strings.Repeat("x", maxEnvValue+1)
	for _, tc := range []struct {
		req   apiclient.PatchEnvRequest
		field string // "" = valid
	}{
		{apiclient.PatchEnvRequest{Set: map[string]string{"OK_1": "v"}}, ""},
		{apiclient.PatchEnvRequest{Unset: []string{"_X"}}, ""},
		{apiclient.PatchEnvRequest{}, "set"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"9A": "v"}}, "set.9A"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"PORT": "1"}}, "set.PORT"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"BIG": long}}, "set.BIG"},
		{apiclient.PatchEnvRequest{Unset: []string{"OK", "a-b"}}, "unset[1]"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"A": ""}, Unset: []string{"A"}}, "unset[0]"},
	} {
		err := validateEnvPatch(tc.req)
		var he *httpError
		got := ""
		if errors.As(err, &he) {
			got = he.field
		} else if err != nil {
			got = fmt.Sprint("unexpected ", err)
		}
		if got != tc.field {
			t.Errorf("validateEnvPatch(%v): field %q, want %q", tc.req.Unset, got, tc.field)
		}
	}
}
