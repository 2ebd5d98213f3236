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
		Tenant: "acme",
		Quotas: apiclient.Quotas{Apps: 25, Routes: 100, ConcurrentBuilds: 2, RepoBytes: 1 << 30, BuildMinutes: 1000, ConcurrentRuns: 3, Instances: 50,
			MilliCPU: 16000, MemoryBytes: 32 << 30},
		Usage: apiclient.QuotaUsage{Apps: 3, Routes: 1, RunningBuilds: 1, BuildMinutes: 42, RunningRuns: 2, Instances: 7,
			MilliCPU: 2500, MemoryBytes: 3<<30 + 512<<20},
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
cpu               16 CPUs       2.5 CPUs
memory            32 GiB        3584 MiB
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestRenderAdminQuota: bex admin quota shows where each quota comes
// from and the default beside it, cpu and memory as bex quota does.
func TestRenderAdminQuota(t *testing.T) {
	var b strings.Builder
	apps, memory := 40, int64(64<<30)
	err := renderAdminQuota(&b, apiclient.Quota{
		Tenant: "acme",
		Quotas: apiclient.Quotas{Apps: 40, Routes: 100, ConcurrentBuilds: 2, RepoBytes: 1 << 30, BuildMinutes: 1000, ConcurrentRuns: 3, Instances: 50,
			MilliCPU: 16000, MemoryBytes: 64 << 30},
		Defaults: apiclient.Quotas{Apps: 25, Routes: 100, ConcurrentBuilds: 2, RepoBytes: 1 << 30, BuildMinutes: 1000, ConcurrentRuns: 3, Instances: 50,
			MilliCPU: 16000, MemoryBytes: 32 << 30},
		Overrides:         apiclient.QuotaOverrides{Apps: &apps, MemoryBytes: &memory},
		Usage:             apiclient.QuotaUsage{Apps: 3, Instances: 7, MilliCPU: 2500, MemoryBytes: 3<<30 + 512<<20},
		BuildMinutesSince: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `QUOTA             LIMIT         SOURCE    DEFAULT       USED
apps              40            operator  25            3
routes            100           default   100           0
concurrentBuilds  2             default   2             0
buildMinutes      1000 a month  default   1000 a month  0 since 2026-12-01
repoBytes         1 GiB         default   1 GiB         checked at each push
concurrentRuns    3             default   3             0
instances         50            default   50            7
cpu               16 CPUs       default   16 CPUs       2.5 CPUs
memory            64 GiB        operator  32 GiB        3584 MiB
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
