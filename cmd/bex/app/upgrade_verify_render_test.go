package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"bex.co/bex/internal/upgrade/verify"
)

func TestRenderVerifyReport(t *testing.T) {
	svm := schema.GroupVersionResource{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"}
	apps := schema.GroupVersionResource{Group: "platform.bex.co", Version: "v1alpha1", Resource: "apps"}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	leases := []verify.Lease{{Name: "apiserver-aaa", Hostname: "old", Target: "old"}, {Name: "apiserver-bbb", Hostname: "new", Target: "new", Unrenewed: metav1.Duration{Duration: 4 * time.Second}}}
	for _, tc := range []struct {
		name string
		rep  verify.Report
		want string
	}{{
		name: "passed",
		rep: verify.Report{
			Probes: []verify.Probe{
				{APIServer: "new", Resource: apps, Verb: "create", Status: 201, Outcome: verify.ServedLocally, At: at},
				{APIServer: "old", Resource: svm, Verb: "list", Status: 200, Outcome: verify.Proxied, At: at},
			},
			Discovery: []verify.DiscoveryDiff{{APIServer: "new"}, {APIServer: "old", Proxies: []schema.GroupVersionResource{svm}}},
			Metrics:   []verify.MetricDelta{{APIServer: "new"}, {APIServer: "old", Rerouted: 1}},
			Leases:    leases,
		},
		want: `APISERVER  RESOURCE                                             VERB    STATUS  OUTCOME
new        platform.bex.co/v1alpha1/apps                        create  201     ServedLocally
old        storagemigration.k8s.io/v1/storageversionmigrations  list    200     Proxied

Discovery (merged minus local: what each apiserver proxies):
APISERVER  PROXIES  MISSING  FROM UNKNOWN PEERS
new        0        0        0
old        1        0        0

Proxy counters (rise during the probes):
APISERVER  REROUTED  PEER PROXY ERRORS  PEER DISCOVERY SYNC ERRORS
new        0         0                  0
old        1         0                  0

Identity leases:
LEASE          HOSTNAME  UNRENEWED  STATE
apiserver-aaa  old       0s         live (old)
apiserver-bbb  new       4s         live (new)

PASS: 2 probes on 2 apiservers, none failed
`,
	}, {
		name: "failed",
		rep: verify.Report{
			Probes: []verify.Probe{
				{APIServer: "old", Resource: svm, Verb: "list", Status: 404, Outcome: verify.Spurious404, Message: "404 page not found", At: at},
				{APIServer: "old", Resource: apps, Verb: "create", Outcome: verify.Error, Message: "dial tcp 127.0.0.11:6443: connect: connection refused", At: at},
			},
			Discovery: []verify.DiscoveryDiff{{APIServer: "old", Missing: []schema.GroupVersionResource{svm}}},
			Metrics:   []verify.MetricDelta{{APIServer: "old", Error: "fetching metrics: 403 Forbidden"}},
			Leases:    []verify.Lease{leases[0], {Name: "apiserver-ccc", Hostname: "gone", Unrenewed: metav1.Duration{Duration: 95 * time.Second}, Stale: true, Removed: true}},
			Findings:  []verify.Finding{{APIServer: "old", Reason: verify.ReasonMergedDiscoveryIncomplete, Message: "the peer-merged discovery of old lacks 1 resources"}},
		},
		want: `APISERVER  RESOURCE                                             VERB    STATUS  OUTCOME
old        storagemigration.k8s.io/v1/storageversionmigrations  list    404     Spurious404
old        platform.bex.co/v1alpha1/apps                        create  -       Error

Discovery (merged minus local: what each apiserver proxies):
APISERVER  PROXIES  MISSING  FROM UNKNOWN PEERS
old        0        1        0

Proxy counters (rise during the probes):
APISERVER  REROUTED  PEER PROXY ERRORS  PEER DISCOVERY SYNC ERRORS
old        -         -                  -  (fetching metrics: 403 Forbidden)

Identity leases:
LEASE          HOSTNAME  UNRENEWED  STATE
apiserver-aaa  old       0s         live (old)
apiserver-ccc  gone      1m35s      stale, removed

Findings:
  MergedDiscoveryIncomplete: the peer-merged discovery of old lacks 1 resources

Failed probes:
  old list storagemigration.k8s.io/v1/storageversionmigrations: Spurious404 404 page not found
  old create platform.bex.co/v1alpha1/apps: Error dial tcp 127.0.0.11:6443: connect: connection refused

FAIL: 2 of 2 probes failed; old: Spurious404 list storagemigration.k8s.io/v1/storageversionmigrations, Error create platform.bex.co/v1alpha1/apps; findings: 1
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := renderVerifyReport(&b, tc.rep); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestParseAPIServer(t *testing.T) {
	for _, tc := range []struct{ in, name, url string }{
		{"https://10.0.0.5:6443", "10.0.0.5:6443", "https://10.0.0.5:6443"},
		{"cp-1=https://10.0.0.5:6443", "cp-1", "https://10.0.0.5:6443"},
		{"http://10.0.0.5:6443", "", ""},
		{"10.0.0.5:6443", "", ""},
		{"cp-1=", "", ""},
	} {
		name, u, err := parseAPIServer(tc.in)
		if (err != nil) != (tc.name == "") || name != tc.name || u != tc.url {
			t.Errorf("parseAPIServer(%q) = %q, %q, %v; want %q, %q", tc.in, name, u, err, tc.name, tc.url)
		}
		if err != nil && !strings.Contains(err.Error(), "want https://HOST:PORT") {
			t.Errorf("parseAPIServer(%q): error %v does not say what to give", tc.in, err)
		}
	}
}
