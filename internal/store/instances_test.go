package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"bex.co/bex/internal/store"
)

// TestReserveInstances: a deploy that runs more instances is counted
// before it goes out and refused past the tenant's quota, naming it and
// recording nothing; one that runs fewer is counted once SetAppInstances
// says it went out; a limit of nil refuses nothing; another tenant's
// instances do not count; a deleted app counts no more.
func TestReserveInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	limit := &store.Quotas{Instances: 5, MilliCPU: 1 << 40, MemoryBytes: 1 << 50}
	usage := func(tenantID string) int {
		t.Helper()
		n, err := s.TenantInstances(ctx, tenantID)
		if err != nil {
			t.Fatal(err)
		}
		return n.Instances
	}
	n := func(instances int) store.AppSize { return store.AppSize{Instances: instances} }

	if prev, err := s.ReserveInstances(ctx, "other", "big", n(9), nil); err != nil || prev != n(0) {
		t.Fatalf("another tenant's 9 instances without a limit: prev %+v, %v", prev, err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "web", n(3), limit); err != nil || prev != n(0) {
		t.Fatalf("web=3 of 5: prev %+v, %v", prev, err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "worker", n(2), limit); err != nil || prev != n(0) {
		t.Fatalf("worker=2, 5 of 5: prev %+v, %v", prev, err)
	}
	_, err := s.ReserveInstances(ctx, "acme", "worker", n(3), limit)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "instances" || qe.Limit != "5" || !strings.Contains(err.Error(), "worker would run 3 instances and the tenant's other apps run 3") {
		t.Fatalf("worker=3, 6 of 5: %v; want the instances quota named with what runs", err)
	}
	if got := usage(acme.ID); got != 5 {
		t.Errorf("after a refusal the tenant counts %d instances, want 5", got)
	}
	// Fewer: counted once the deploy went out.
	if prev, err := s.ReserveInstances(ctx, "acme", "web", n(1), limit); err != nil || prev != n(3) {
		t.Fatalf("web=1: prev %+v, %v; want 3", prev, err)
	}
	if got := usage(acme.ID); got != 5 {
		t.Errorf("while web=1 rolls out the tenant counts %d, want 5 (web's 3 until it is done)", got)
	}
	if err := s.SetAppInstances(ctx, "acme", "web", n(1)); err != nil {
		t.Fatal(err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "worker", n(4), limit); err != nil || prev != n(2) {
		t.Fatalf("worker=4 once web runs 1: prev %+v, %v", prev, err)
	}
	if got, theirs := usage(acme.ID), usage(other.ID); got != 5 || theirs != 9 {
		t.Errorf("acme counts %d, other %d; want 5 and 9", got, theirs)
	}
	if err := s.ClearAppInstances(ctx, "acme", "worker"); err != nil {
		t.Fatal(err)
	}
	if got := usage(acme.ID); got != 1 {
		t.Errorf("after the worker app's deletion acme counts %d, want 1", got)
	}
	if _, err := s.ReserveInstances(ctx, "nobody", "web", n(1), limit); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown tenant: %v, want ErrNotFound", err)
	}
}

// TestReserveInstancesConcurrent: eight apps that each fit the quota alone
// reserve at once; only as many as it holds pass, whichever of instances,
// cpu and memory holds them.
func TestReserveInstancesConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	app := store.AppSize{Instances: 2, MilliCPU: 2000, MemoryBytes: 2 << 30}
	for _, tc := range []struct {
		quota string
		limit store.Quotas
	}{
		{"instances", store.Quotas{Instances: 6, MilliCPU: 1 << 40, MemoryBytes: 1 << 50}},
		{"cpu", store.Quotas{Instances: 100, MilliCPU: 6000, MemoryBytes: 1 << 50}},
		{"memory", store.Quotas{Instances: 100, MilliCPU: 1 << 40, MemoryBytes: 7 << 30}},
	} {
		tenant := newTenant(t, s, "race-"+tc.quota)
		var quotas []string
		var mu sync.Mutex
		passed, refused := atOnce(t, 8, func(i int) error {
			_, err := s.ReserveInstances(ctx, tenant.Name, "app"+string(rune('a'+i)), app, &tc.limit)
			var qe *store.QuotaError
			if errors.As(err, &qe) {
				mu.Lock()
				quotas = append(quotas, qe.Quota)
				mu.Unlock()
			}
			return err
		})
		got, err := s.TenantInstances(ctx, tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := (store.AppSize{Instances: 6, MilliCPU: 6000, MemoryBytes: 6 << 30}); passed != 3 || refused != 5 || got != want {
			t.Errorf("%s: passed %d, refused %d, counted %+v; want 3, 5, %+v", tc.quota, passed, refused, got, want)
		}
		for _, q := range quotas {
			if q != tc.quota {
				t.Errorf("%s: a refusal names the %s quota", tc.quota, q)
			}
		}
	}
}

// TestReserveInstancesSize: a deploy that requests more CPU or memory (a
// bigger plan) is refused past the tenant's cpu or memory quota, naming
// it with the numbers, while its instances quota would allow it, and
// records nothing; one that grows in one and shrinks in another counts the
// larger of each until it is done; a quota lowered below what runs lets
// the same size through.
func TestReserveInstancesSize(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	limit := &store.Quotas{Instances: 10, MilliCPU: 3000, MemoryBytes: 6 << 30}
	starter := func(n int) store.AppSize {
		return store.AppSize{Instances: n, MilliCPU: int64(n) * 250, MemoryBytes: int64(n) * 512 << 20}
	}
	usage := func() store.AppSize {
		t.Helper()
		n, err := s.TenantInstances(ctx, acme.ID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, app := range []string{"shop", "web"} {
		if _, err := s.ReserveInstances(ctx, "acme", app, starter(2), limit); err != nil {
			t.Fatalf("%s: 2 starter instances: %v", app, err)
		}
	}

	for _, tc := range []struct {
		name  string
		size  store.AppSize
		quota string
		msg   string
	}{
		{"2 pro", store.AppSize{Instances: 2, MilliCPU: 4000, MemoryBytes: 8 << 30}, "cpu",
			"the tenant's cpu quota (3 CPUs) is reached: web would request 4 CPUs for its 2 instances and the tenant's other apps request 0.5 CPUs; " +
				"scale an app down or pick a smaller plan (bex scale --plan) or ask the operator to raise the quota"},
		{"2 of 1 CPU and 3 GiB", store.AppSize{Instances: 2, MilliCPU: 2000, MemoryBytes: 6 << 30}, "memory",
			"the tenant's memory quota (6 GiB) is reached: web would request 6 GiB for its 2 instances and the tenant's other apps request 1 GiB; " +
				"scale an app down or pick a smaller plan (bex scale --plan) or ask the operator to raise the quota"},
	} {
		_, err := s.ReserveInstances(ctx, "acme", "web", tc.size, limit)
		var qe *store.QuotaError
		if !errors.As(err, &qe) || qe.Quota != tc.quota || err.Error() != tc.msg {
			t.Errorf("web on %s: %v; want %q", tc.name, err, tc.msg)
		}
		if got := usage(); got != starter(4) {
			t.Errorf("after web on %s was refused the tenant counts %+v, want %+v", tc.name, got, starter(4))
		}
	}

	standard := store.AppSize{Instances: 2, MilliCPU: 2000, MemoryBytes: 4 << 30}
	if prev, err := s.ReserveInstances(ctx, "acme", "web", standard, limit); err != nil || prev != starter(2) {
		t.Fatalf("web on 2 standard, 2.5 of 3 CPUs: prev %+v, %v", prev, err)
	}
	// More instances of a smaller plan: the larger of each until done.
	if prev, err := s.ReserveInstances(ctx, "acme", "web", starter(4), limit); err != nil || prev != standard {
		t.Fatalf("web on 4 starter: prev %+v, %v", prev, err)
	}
	if got, want := usage(), (store.AppSize{Instances: 6, MilliCPU: 2500, MemoryBytes: 5 << 30}); got != want {
		t.Errorf("while web goes from 2 standard to 4 starter the tenant counts %+v, want %+v", got, want)
	}
	if err := s.SetAppInstances(ctx, "acme", "web", starter(4)); err != nil {
		t.Fatal(err)
	}
	if got := usage(); got != starter(6) {
		t.Errorf("once web runs 4 starter the tenant counts %+v, want %+v", got, starter(6))
	}
	// Lowered below what runs: the same size goes, one CPU more does not.
	limit.MilliCPU, limit.MemoryBytes = 1000, 1<<30
	if _, err := s.ReserveInstances(ctx, "acme", "web", starter(4), limit); err != nil {
		t.Errorf("web's same size under lowered quotas: %v", err)
	}
	if _, err := s.ReserveInstances(ctx, "acme", "web", store.AppSize{Instances: 4, MilliCPU: 1004, MemoryBytes: 2 << 30}, limit); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Errorf("web on 4m more CPU under a lowered quota: %v, want refused", err)
	}
	if _, err := s.ReserveInstances(ctx, "acme", "web", store.AppSize{Instances: 1, MilliCPU: -1}, limit); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a negative CPU: %v, want ErrInvalid", err)
	}
}
