package store_test

import (
	"errors"
	"strings"
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
	limit := 5
	usage := func(tenantID string) int {
		t.Helper()
		n, err := s.TenantInstances(ctx, tenantID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if prev, err := s.ReserveInstances(ctx, "other", "big", 9, nil); err != nil || prev != 0 {
		t.Fatalf("another tenant's 9 instances without a limit: prev %d, %v", prev, err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "web", 3, &limit); err != nil || prev != 0 {
		t.Fatalf("web=3 of 5: prev %d, %v", prev, err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "worker", 2, &limit); err != nil || prev != 0 {
		t.Fatalf("worker=2, 5 of 5: prev %d, %v", prev, err)
	}
	_, err := s.ReserveInstances(ctx, "acme", "worker", 3, &limit)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "instances" || qe.Limit != "5" || !strings.Contains(err.Error(), "worker would run 3 instances and the tenant's other apps run 3") {
		t.Fatalf("worker=3, 6 of 5: %v; want the instances quota named with what runs", err)
	}
	if got := usage(acme.ID); got != 5 {
		t.Errorf("after a refusal the tenant counts %d instances, want 5", got)
	}
	// Fewer: counted once the deploy went out.
	if prev, err := s.ReserveInstances(ctx, "acme", "web", 1, &limit); err != nil || prev != 3 {
		t.Fatalf("web=1: prev %d, %v; want 3", prev, err)
	}
	if got := usage(acme.ID); got != 5 {
		t.Errorf("while web=1 rolls out the tenant counts %d, want 5 (web's 3 until it is done)", got)
	}
	if err := s.SetAppInstances(ctx, "acme", "web", 1); err != nil {
		t.Fatal(err)
	}
	if prev, err := s.ReserveInstances(ctx, "acme", "worker", 4, &limit); err != nil || prev != 2 {
		t.Fatalf("worker=4 once web runs 1: prev %d, %v", prev, err)
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
	if _, err := s.ReserveInstances(ctx, "nobody", "web", 1, &limit); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown tenant: %v, want ErrNotFound", err)
	}
}

// TestReserveInstancesConcurrent: eight apps that each fit the quota alone
// reserve at once; only as many as it holds pass.
func TestReserveInstancesConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	limit := 6
	passed, refused := atOnce(t, 8, func(i int) error {
		_, err := s.ReserveInstances(ctx, "acme", "app"+string(rune('a'+i)), 2, &limit)
		return err
	})
	n, err := s.TenantInstances(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if passed != 3 || refused != 5 || n != 6 {
		t.Errorf("passed %d, refused %d, counted %d; want 3, 5, 6", passed, refused, n)
	}
}
