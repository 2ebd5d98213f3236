package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

func TestSessionSealing(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	s, err := newSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	in := session{Token: "bex_secret", Tenant: "acme", CSRF: "c1", Expires: now.Add(time.Hour).Unix()}
	v, err := s.seal(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, "bex_secret") || strings.Contains(v, "acme") {
		t.Fatalf("the sealed cookie shows its content: %s", v)
	}
	if out, err := s.open(v, now); err != nil || out != in {
		t.Fatalf("open = %+v, %v; want %+v", out, err, in)
	}
	if _, err := s.open(v, now.Add(2*time.Hour)); err == nil {
		t.Error("an expired session opened")
	}
	tampered := []byte(v)
	tampered[len(tampered)/2] ^= 1
	if _, err := s.open(string(tampered), now); err == nil {
		t.Error("a tampered cookie opened")
	}
	other, _ := newSealer([]byte(strings.Repeat("o", 32)))
	if _, err := other.open(v, now); err == nil {
		t.Error("a cookie opened under another key")
	}
	if _, err := newSealer([]byte("short")); err == nil {
		t.Error("a 5-byte key was taken")
	}
	if csrfOK(in, "") || csrfOK(in, "c2") || !csrfOK(in, "c1") {
		t.Error("csrfOK does not compare with the session's secret")
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/apps/x?tab=1": "/apps/x?tab=1", "": "", "https://evil.test/": "", "//evil.test/": "", "/\\evil.test": "", "/signin": "", "apps": "",
		"/%09/evil.example": "", "/\t/evil.example": "", "/%2F/evil.example": "", "/\n/evil.example": "", "/ /evil.example": "",
		"/%5Cevil.example": "", "/apps/%zz": "", "/\u3000/evil.example": "",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{send: func(s string) error { got = append(got, s); return nil }}
	for _, chunk := range []string{"one\ntw", "o\n", "", "three"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "one|two|three" {
		t.Fatalf("lines = %q", got)
	}
}

// TestTimelineRows: three old apiservers on 1.36.3 are replaced one at a
// time; each new one runs 1.37.2 from when it joined, each old one ends at
// the first verifier round that no longer probed it, and each round leaves
// a mark with its most telling outcome.
func TestTimelineRows(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	round := func(s int, probes map[string]map[string]int) apiclient.UpgradeRecordedStep {
		return apiclient.UpgradeRecordedStep{Cluster: "fleet/prod", Kind: "verify", StartedAt: at(s), ProbesByAPIServer: probes}
	}
	ok := map[string]int{"ServedLocally": 4}
	u := apiclient.Upgrade{
		Clusters: []apiclient.UpgradeClusterStatus{{Name: "fleet/prod", FromVersion: "v1.36.3", Steps: []apiclient.UpgradeMachineStep{
			{Machine: "cp-4", NewVersion: "v1.37.2", StartedAt: new(at(10))},
		}}},
		Run: &apiclient.UpgradeRun{StartedAt: t0, Steps: []apiclient.UpgradeRecordedStep{
			{Cluster: "fleet/prod", Kind: "preflight", FromVersion: "v1.36.3", StartedAt: at(1)},
			round(5, map[string]map[string]int{"cp-1": ok, "cp-2": ok, "cp-3": ok}),
			{Cluster: "fleet/prod", Kind: "machine", Machine: "cp-4", ToVersion: "v1.37.2", StartedAt: at(12)},
			round(20, map[string]map[string]int{"cp-2": ok, "cp-3": {"ServedLocally": 3, "Spurious404": 1}, "cp-4": {"Proxied": 2, "ServedLocally": 2}}),
		}},
	}
	rows := timelineRows(u, at(30))
	var got []string
	for _, r := range rows {
		s := r.server + " " + r.segs[0].version + " " + r.segs[0].from.Sub(t0).String() + "-" + r.segs[0].to.Sub(t0).String() + ":"
		for _, m := range r.marks {
			s += " " + m.outcome + "@" + m.at.Sub(t0).String()
		}
		got = append(got, s)
	}
	want := []string{
		"cp-1 v1.36.3 0s-20s: ServedLocally@5s",
		"cp-2 v1.36.3 0s-30s: ServedLocally@5s ServedLocally@20s",
		"cp-3 v1.36.3 0s-30s: ServedLocally@5s Spurious404@20s",
		"cp-4 v1.37.2 10s-30s: Proxied@20s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	svg := string(timeline(u, at(30)))
	if n := strings.Count(svg, `class="probe `); n != 6 {
		t.Errorf("the SVG has %d probe marks, want 6", n)
	}
	if !strings.Contains(svg, "v1.37.2") || strings.Contains(svg, "style=") {
		t.Errorf("the SVG lacks the new version's legend or uses inline style:\n%s", svg)
	}
}

// TestAuditDetails: the audit page writes an entry's details as key=value
// pairs by key, strings unquoted, without nulls or empty strings, so that
// an app.run.end entry says how the run ended at a glance.
func TestAuditDetails(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"run":3,"release":2,"exitCode":143,"ended":"stopped","reason":"stopped by a@b.c","stoppedBy":"a@b.c","detached":true}`,
			"detached=true ended=stopped exitCode=143 reason=stopped by a@b.c release=2 run=3 stoppedBy=a@b.c"},
		{`{"run":4,"exitCode":null,"ended":"lost","tokenID":""}`, "ended=lost run=4"},
		{`{"command":["sh","-c","echo hi"],"terminal":false}`, `command=["sh","-c","echo hi"] terminal=false`},
		{``, ""},
		{`[1]`, "[1]"},
	} {
		if got := auditDetails(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("details %s: %q, want %q", tc.in, got, tc.want)
		}
	}
}
