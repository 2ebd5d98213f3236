package store_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestTenantQuotas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")

	o, err := s.TenantQuotas(ctx, acme.ID)
	if err != nil || o != (store.QuotaOverrides{}) {
		t.Fatalf("TenantQuotas of a new tenant = %+v, %v, want none", o, err)
	}
	apps, repo, instances, cpu := 7, int64(5<<30), 12, int64(2500)
	if err := s.SetTenantQuotas(ctx, acme.ID, store.QuotaOverrides{Apps: &apps, RepoBytes: &repo, Instances: &instances, MilliCPU: &cpu}); err != nil {
		t.Fatal(err)
	}
	o, err = s.TenantQuotas(ctx, acme.ID)
	if err != nil || o.Apps == nil || *o.Apps != 7 || o.RepoBytes == nil || *o.RepoBytes != repo || o.Instances == nil || *o.Instances != 12 ||
		o.MilliCPU == nil || *o.MilliCPU != 2500 || o.Routes != nil || o.BuildMinutes != nil || o.MemoryBytes != nil {
		t.Fatalf("TenantQuotas = %+v, %v, want apps 7, repoBytes 5 GiB, instances 12 and cpu 2500m only", o, err)
	}
	defaults := store.Quotas{Apps: 1, Routes: 2, ConcurrentBuilds: 3, RepoBytes: 4, BuildMinutes: 5, Instances: 6, MilliCPU: 7, MemoryBytes: 8}
	if got, want := defaults.With(o), (store.Quotas{Apps: 7, Routes: 2, ConcurrentBuilds: 3, RepoBytes: repo, BuildMinutes: 5, Instances: 12, MilliCPU: 2500, MemoryBytes: 8}); got != want {
		t.Errorf("With = %+v, want %+v", got, want)
	}

	negative, negative64 := -1, int64(-1)
	if err := s.SetTenantQuotas(ctx, acme.ID, store.QuotaOverrides{Routes: &negative}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a negative quota: err = %v, want ErrInvalid", err)
	}
	if err := s.SetTenantQuotas(ctx, acme.ID, store.QuotaOverrides{MemoryBytes: &negative64}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a negative memory quota: err = %v, want ErrInvalid", err)
	}
	if o2, _ := s.TenantQuotas(ctx, acme.ID); o2.Apps == nil || o2.Routes != nil {
		t.Errorf("a refused change changed the quotas: %+v", o2)
	}
	if err := s.SetTenantQuotas(ctx, "00000000-0000-0000-0000-000000000000", store.QuotaOverrides{Apps: &apps}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown tenant: err = %v, want ErrNotFound", err)
	}
	if err := s.SetTenantQuotas(ctx, acme.ID, store.QuotaOverrides{}); err != nil {
		t.Fatal(err)
	}
	if o, err := s.TenantQuotas(ctx, acme.ID); err != nil || o != (store.QuotaOverrides{}) {
		t.Errorf("after clearing: %+v, %v, want none", o, err)
	}
}

// TestPatchTenantQuotas: a patch sets and removes only the quotas it
// names; many patches of different quotas made at once all hold; a patch
// naming an unknown quota or a negative value changes nothing.
func TestPatchTenantQuotas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	n := func(v int64) *int64 { return &v }

	if err := s.PatchTenantQuotas(ctx, acme.ID, store.QuotaPatch{"apps": n(7), "memory": n(64 << 30)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PatchTenantQuotas(ctx, acme.ID, store.QuotaPatch{"routes": n(3), "memory": nil}); err != nil {
		t.Fatal(err)
	}
	o, err := s.TenantQuotas(ctx, acme.ID)
	if err != nil || o.Apps == nil || *o.Apps != 7 || o.Routes == nil || *o.Routes != 3 || o.MemoryBytes != nil || o.MilliCPU != nil {
		t.Fatalf("after two patches: %+v, %v; want apps 7 and routes 3 only", o, err)
	}

	// Each patch of its own quota, all at once, on a tenant without a row.
	beta := newTenant(t, s, "beta")
	keys := []string{"apps", "routes", "concurrentBuilds", "repoBytes", "buildMinutes", "concurrentRuns", "instances", "cpu", "memory"}
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, k := range keys {
		wg.Go(func() { errs[i] = s.PatchTenantQuotas(ctx, beta.ID, store.QuotaPatch{k: n(int64(i + 1))}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	o, err = s.TenantQuotas(ctx, beta.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := store.QuotaOverrides{Apps: new(1), Routes: new(2), ConcurrentBuilds: new(3), RepoBytes: n(4), BuildMinutes: new(5), ConcurrentRuns: new(6),
		Instances: new(7), MilliCPU: n(8), MemoryBytes: n(9)}
	if got, w := (store.Quotas{}).With(o), (store.Quotas{}).With(want); got != w {
		t.Errorf("after %d concurrent patches: %+v, want every one of them", len(keys), got)
	}

	before, err := s.TenantQuotas(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.QuotaPatch{{"apps": n(1), "disk": n(1)}, {"apps": n(1), "cpu": n(-1)}} {
		if err := s.PatchTenantQuotas(ctx, acme.ID, p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("patch %v: err = %v, want ErrInvalid", p, err)
		}
	}
	if o2, _ := s.TenantQuotas(ctx, acme.ID); (store.Quotas{}).With(o2) != (store.Quotas{}).With(before) {
		t.Errorf("a refused patch changed the quotas: %+v", o2)
	}
	if err := s.PatchTenantQuotas(ctx, "00000000-0000-0000-0000-000000000000", store.QuotaPatch{"apps": n(1)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown tenant: err = %v, want ErrNotFound", err)
	}
}

// countBuilds returns how many build rows the tenant has.
func countBuilds(t *testing.T, s *store.Store, tenantID string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(t.Context(), "SELECT count(*) FROM builds WHERE tenant_id = $1", tenantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBuildQuota(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	month := store.MonthStart(time.Now())
	quota := &store.BuildQuota{ConcurrentBuilds: 1, BuildMinutes: 10, Since: month}

	first, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web", Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	// A second build of another app while the first runs: refused, and
	// nothing recorded.
	_, err = s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "api", Quota: quota})
	var qe *store.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, store.ErrQuotaExceeded) || qe.Quota != "concurrentBuilds" || !strings.Contains(err.Error(), "concurrentBuilds quota (1)") {
		t.Fatalf("second build: err = %v, want the concurrentBuilds quota (1)", err)
	}
	if n := countBuilds(t, s, acme.ID); n != 1 {
		t.Errorf("builds after the refusal = %d, want 1", n)
	}
	// Without a quota (or with a larger one) it passes.
	if _, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "api", Quota: &store.BuildQuota{ConcurrentBuilds: 2, BuildMinutes: 10, Since: month}}); err != nil {
		t.Fatalf("under a quota of 2: %v", err)
	}
	if u, err := s.BuildUsage(ctx, acme.ID, month); err != nil || u.Running != 2 {
		t.Errorf("BuildUsage = %+v, %v, want 2 running", u, err)
	}

	// Build minutes: the first build took 12 minutes this month.
	if _, err := s.FinishBuild(ctx, first.ID, store.BuildResult{Status: store.BuildFailed, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "UPDATE builds SET status = 'failed', finished_at = started_at + interval '12 minutes' WHERE tenant_id = $1", acme.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web", Quota: quota})
	if !errors.As(err, &qe) || qe.Quota != "buildMinutes" || !strings.Contains(err.Error(), "buildMinutes quota (10 minutes a month)") {
		t.Fatalf("with 24 minutes used: err = %v, want the buildMinutes quota", err)
	}
	if n := countBuilds(t, s, acme.ID); n != 2 {
		t.Errorf("builds after the refusal = %d, want 2", n)
	}
	// Builds of last month do not count.
	if _, err := s.Pool().Exec(ctx, "UPDATE builds SET started_at = $2, finished_at = $2::timestamptz + interval '12 minutes' WHERE tenant_id = $1", acme.ID, month.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web", Quota: quota}); err != nil {
		t.Errorf("with last month's minutes only: %v", err)
	}
}

// TestBuildQuotaConcurrent starts many builds at once under a quota of two:
// two pass, whatever the interleaving.
// atOnce runs try(0) … try(n-1) at once and counts those that passed and
// those a quota refused; any other error fails t.
func atOnce(t *testing.T, n int, try func(i int) error) (passed, refused int) {
	t.Helper()
	var p, r atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			switch err := try(i); {
			case err == nil:
				p.Add(1)
			case errors.Is(err, store.ErrQuotaExceeded):
				r.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return int(p.Load()), int(r.Load())
}

func TestBuildQuotaConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	quota := &store.BuildQuota{ConcurrentBuilds: 2, BuildMinutes: 100, Since: store.MonthStart(time.Now())}
	passed, refused := atOnce(t, 8, func(i int) error {
		_, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "app" + string(rune('a'+i)), Quota: quota})
		return err
	})
	if passed != 2 || refused != 6 || countBuilds(t, s, acme.ID) != 2 {
		t.Errorf("passed %d, refused %d, rows %d; want 2, 6, 2", passed, refused, countBuilds(t, s, acme.ID))
	}
}

// TestWithTenantLock runs sections under one tenant's lock at once: no two
// are ever inside together. Each section waits a while for another to come
// in, which only a missing lock lets happen. Another tenant's sections do
// not wait for them.
func TestWithTenantLock(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	var inside, overlaps atomic.Int32
	section := func(context.Context) error {
		inside.Add(1)
		defer inside.Add(-1)
		for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
			if inside.Load() > 1 {
				overlaps.Add(1)
				return nil
			}
			runtime.Gosched()
		}
		return nil
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.WithTenantLock(t.Context(), acme.ID, "apps", section); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d sections saw another inside the lock", n)
	}

	// fn's error comes back as it is.
	if err := s.WithTenantLock(t.Context(), other.ID, "apps", func(context.Context) error { return store.ErrQuotaExceeded }); err != store.ErrQuotaExceeded {
		t.Errorf("WithTenantLock err = %v, want fn's", err)
	}
}

// TestPatchTenantQuotasIf: a patch that expects the overrides its sender
// read is made only while they hold. Of two patches expecting the same old
// value, sent at once, exactly one is made; the other changes nothing and
// names the quota, the value it has now and the one expected.
func TestPatchTenantQuotasIf(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	n := func(v int64) *int64 { return &v }
	memory := func() *int64 {
		t.Helper()
		o, err := s.TenantQuotas(ctx, acme.ID)
		if err != nil {
			t.Fatal(err)
		}
		return o.MemoryBytes
	}

	// No row yet: expecting the default holds, expecting a value does not.
	var ce *store.QuotaConflictError
	err := s.PatchTenantQuotasIf(ctx, acme.ID, store.QuotaPatch{"memory": n(32 << 30)}, store.QuotaPatch{"memory": n(16 << 30)})
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Current != nil {
		t.Fatalf("expecting 16 GiB of a tenant with the default: err = %v, want a conflict naming the default", err)
	}
	if m := memory(); m != nil {
		t.Fatalf("a refused patch set memory to %d", *m)
	}
	if err := s.PatchTenantQuotasIf(ctx, acme.ID, store.QuotaPatch{"memory": n(64 << 30), "apps": n(5)}, store.QuotaPatch{"memory": nil}); err != nil {
		t.Fatalf("expecting the default of a tenant with the default: %v", err)
	}

	// Rounds of two patches at once, both expecting what memory has.
	for round := range 10 {
		was := *memory()
		values := []int64{was + 1<<30, was + 2<<30}
		errs := make([]error, len(values))
		var wg sync.WaitGroup
		for i, v := range values {
			wg.Go(func() {
				errs[i] = s.PatchTenantQuotasIf(ctx, acme.ID, store.QuotaPatch{"memory": n(v), "routes": n(int64(i))}, store.QuotaPatch{"memory": n(was)})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case err == nil:
				t.Fatalf("round %d: both patches expecting memory %d were made", round, was)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither patch was made: %v", round, errors.Join(errs...))
		}
		lost := 1 - won
		if !errors.As(errs[lost], &ce) || len(ce.Conflicts) != 1 {
			t.Fatalf("round %d: the losing patch: err = %v, want a *QuotaConflictError", round, errs[lost])
		}
		if c := ce.Conflicts[0]; c.Quota != "memory" || c.Expected == nil || *c.Expected != was || c.Current == nil || *c.Current != values[won] {
			t.Fatalf("round %d: conflict %+v, want memory expected %d, now %d", round, c, was, values[won])
		}
		o, err := s.TenantQuotas(ctx, acme.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o.MemoryBytes == nil || *o.MemoryBytes != values[won] || o.Routes == nil || *o.Routes != won {
			t.Fatalf("round %d: stored %+v, want memory %d and routes %d, the made patch's only", round, o, values[won], won)
		}
	}

	// Every quota that does not hold is named; an unknown one is invalid.
	err = s.PatchTenantQuotasIf(ctx, acme.ID, store.QuotaPatch{"apps": n(6)}, store.QuotaPatch{"apps": n(4), "memory": nil, "cpu": nil})
	if !errors.As(err, &ce) || len(ce.Conflicts) != 2 || ce.Conflicts[0].Quota != "apps" || ce.Conflicts[1].Quota != "memory" {
		t.Errorf("two stale expectations: err = %v, want conflicts on apps and memory", err)
	}
	if err := s.PatchTenantQuotasIf(ctx, acme.ID, store.QuotaPatch{"apps": n(6)}, store.QuotaPatch{"disk": nil}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("expecting an unknown quota: err = %v, want ErrInvalid", err)
	}
	if o, _ := s.TenantQuotas(ctx, acme.ID); o.Apps == nil || *o.Apps != 5 {
		t.Errorf("refused patches changed apps: %+v", o)
	}
}
