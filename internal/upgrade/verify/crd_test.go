package verify

import (
	"regexp"
	"strings"
	"testing"
)

func TestProbeName(t *testing.T) {
	// The App CRD's rule: a DNS label of at most 40 characters.
	label := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	for _, server := range []string{"old", "cp-1.example.com", "https://127.0.0.11:6443", "A-Very-Long-Machine-Name-Of-Some-Control-Plane-0", "---", ""} {
		name := probeName(server)
		if len(name) > 40 || !label.MatchString(name) || !strings.HasPrefix(name, "bex-verify-") {
			t.Errorf("probeName(%q) = %q: not a DNS label of at most 40 characters starting bex-verify-", server, name)
		}
	}
	if a, b := probeName("old"), probeName("old"); a == b {
		t.Errorf("two probe names for one server are equal: %q", a)
	}
}

func TestEvidence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  404 page not found\n", "404 page not found"},
		{"{\n  \"kind\": \"Status\",\n  \"code\": 503\n}", `{ "kind": "Status", "code": 503 }`},
		{strings.Repeat("a", 600), strings.Repeat("a", 512) + "…"},
		{strings.Repeat("a", 511) + "é", strings.Repeat("a", 511) + "…"},
	} {
		if got := Evidence([]byte(tc.in)); got != tc.want {
			t.Errorf("Evidence(%.20q…) = %.40q…, want %.40q…", tc.in, got, tc.want)
		}
	}
}
