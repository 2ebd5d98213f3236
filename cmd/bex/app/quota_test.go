package app

import (
	"strings"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

func TestRenderQuota(t *testing.T) {
	var b strings.Builder
	err := renderQuota(&b, apiclient.Quota{
		Tenant:            "acme",
		Quotas:            apiclient.Quotas{Apps: 25, Routes: 100, ConcurrentBuilds: 2, RepoBytes: 1 << 30, BuildMinutes: 1000, ConcurrentRuns: 3, Instances: 50},
		Usage:             apiclient.QuotaUsage{Apps: 3, Routes: 1, RunningBuilds: 1, BuildMinutes: 42, RunningRuns: 2, Instances: 7},
		BuildMinutesSince: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `QUOTA             LIMIT         USED
apps              25            3
routes            100           1
concurrentBuilds  2             1
buildMinutes      1000 a month  42 since 2026-12-01
repoBytes         1 GiB         checked at each push
concurrentRuns    3             2
instances         50            7
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
