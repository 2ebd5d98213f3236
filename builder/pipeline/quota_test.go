package pipeline_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/store"
)

// TestBuildQuotas: a push while the tenant's concurrent builds or build
// minutes are at their quota is refused as a RefusedError naming the quota
// and its value, before a build is recorded; raising the quota lets the
// same push build and release.
func TestBuildQuotas(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tenantID := mustTenantID(t, e.st, e.tenant)
	push := e.commit(t, "v1", "")
	builds := func() int {
		t.Helper()
		var n int
		if err := e.st.Pool().QueryRow(ctx, "SELECT count(*) FROM builds WHERE tenant_id = $1", tenantID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		overrides store.QuotaOverrides
		want      string
	}{
		{"concurrentBuilds", store.QuotaOverrides{ConcurrentBuilds: ptr.To(0)}, "the tenant's concurrentBuilds quota (0) is reached"},
		{"buildMinutes", store.QuotaOverrides{BuildMinutes: ptr.To(0)}, "the tenant's buildMinutes quota (0 minutes a month) is reached"},
	} {
		if err := e.st.SetTenantQuotas(ctx, tenantID, tc.overrides); err != nil {
			t.Fatal(err)
		}
		_, err := e.a.Deploy(ctx, push, testWriter{t})
		var refused *gitserver.RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, store.ErrQuotaExceeded) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Deploy err = %v, want a refusal saying %q", tc.name, err, tc.want)
		}
		if n := builds(); n != 0 {
			t.Errorf("%s: %d builds recorded for a refused push, want none", tc.name, n)
		}
	}
	if e.app(t).Status.CurrentRelease != 0 {
		t.Errorf("a refused push released v%d", e.app(t).Status.CurrentRelease)
	}

	if err := e.st.SetTenantQuotas(ctx, tenantID, store.QuotaOverrides{ConcurrentBuilds: ptr.To(1), BuildMinutes: ptr.To(10)}); err != nil {
		t.Fatal(err)
	}
	if got := e.deploy(t, e.a, push); got != 1 {
		t.Errorf("under raised quotas the push made release v%d, want v1", got)
	}
}
