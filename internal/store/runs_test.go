package store_test

import (
	"errors"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
)

// TestRuns: runs are numbered per app, recorded running, ended once with
// their exit status, and listed newest first; a run past the tenant's
// concurrent runs, or with a command no process takes, is refused and
// recorded nowhere; concurrent runs cannot pass the quota together; a
// quota override of concurrentRuns is kept.
func TestRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	newRun := func(tenantID, app string, quota int) (store.Run, error) {
		return s.CreateRun(ctx, store.NewRun{TenantID: tenantID, App: app, Release: 4, Command: []string{"sh", "-c", "echo hi"}, CreatedBy: "a@b.c", ConcurrentRuns: ptr(quota)})
	}

	first, err := newRun(acme.ID, "web", 2)
	if err != nil || first.Number != 1 || first.Status != store.RunRunning || first.ExitCode != nil || first.FinishedAt != nil || strings.Join(first.Command, " ") != "sh -c echo hi" {
		t.Fatalf("first run: %+v, %v", first, err)
	}
	if _, err := newRun(acme.ID, "api", 2); err != nil {
		t.Fatal(err)
	}
	_, err = newRun(acme.ID, "web", 2)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "concurrentRuns" || !strings.Contains(err.Error(), "2 of its one-off runs are running") {
		t.Fatalf("a third run under a quota of 2: %v", err)
	}
	if n, err := s.RunningRuns(ctx, acme.ID); err != nil || n != 2 {
		t.Errorf("RunningRuns = %d, %v; want 2: the refused run is not recorded", n, err)
	}
	if _, err := newRun(other.ID, "web", 2); err != nil {
		t.Errorf("another tenant's run: %v; its quota is its own", err)
	}
	for _, bad := range [][]string{nil, {""}, {"echo", "a\x00b"}, {"echo", "\xff"}, make([]string, store.MaxRunArgs+1), {strings.Repeat("x", store.MaxRunCommandBytes+1)}} {
		if _, err := s.CreateRun(ctx, store.NewRun{TenantID: acme.ID, App: "web", Release: 4, Command: bad, CreatedBy: "a@b.c"}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("command %q: %v, want ErrInvalid", bad, err)
		}
	}

	ended, err := s.FinishRun(ctx, first.ID, store.RunResult{ExitCode: ptr(7)})
	if err != nil || ended.Status != store.RunFailed || ended.ExitCode == nil || *ended.ExitCode != 7 || ended.FinishedAt == nil {
		t.Fatalf("FinishRun with 7: %+v, %v", ended, err)
	}
	if _, err := s.FinishRun(ctx, first.ID, store.RunResult{ExitCode: ptr(0)}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second FinishRun: %v, want ErrConflict", err)
	}
	if _, err := s.FinishRun(ctx, "00000000-0000-0000-0000-000000000000", store.RunResult{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FinishRun of no run: %v, want ErrNotFound", err)
	}
	second, err := newRun(acme.ID, "web", 2)
	if err != nil || second.Number != 2 {
		t.Fatalf("a run once one ended: %+v, %v; want run 2 of web", second, err)
	}
	if r, err := s.FinishRun(ctx, second.ID, store.RunResult{ExitCode: ptr(0)}); err != nil || r.Status != store.RunSucceeded {
		t.Errorf("FinishRun with 0: %+v, %v", r, err)
	}
	runs, err := s.ListRuns(ctx, acme.ID, "web", 0)
	if err != nil || len(runs) != 2 || runs[0].Number != 2 || runs[1].Number != 1 || runs[1].CreatedBy != "a@b.c" || runs[1].Release != 4 {
		t.Errorf("ListRuns = %+v, %v; want run 2 then 1", runs, err)
	}

	if err := s.SetTenantQuotas(ctx, acme.ID, store.QuotaOverrides{ConcurrentRuns: ptr(9)}); err != nil {
		t.Fatal(err)
	}
	if o, err := s.TenantQuotas(ctx, acme.ID); err != nil || o.ConcurrentRuns == nil || *o.ConcurrentRuns != 9 {
		t.Errorf("the concurrentRuns override: %+v, %v", o, err)
	}
}

func TestRunQuotaConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	passed, refused := atOnce(t, 8, func(int) error {
		_, err := s.CreateRun(t.Context(), store.NewRun{TenantID: acme.ID, App: "web", Release: 1, Command: []string{"true"}, CreatedBy: "x", ConcurrentRuns: ptr(3)})
		return err
	})
	if n, _ := s.RunningRuns(t.Context(), acme.ID); passed != 3 || refused != 5 || n != 3 {
		t.Errorf("passed %d, refused %d, running %d; want 3, 5, 3", passed, refused, n)
	}
}

// TestRunStops: a stop asked of a running run is recorded with who asked,
// once (asked again, the first asker stays), and StopRequestedRuns
// returns it among the runs it is given until the run has ended; a stop
// of an ended run is a conflict, of no run (or another tenant's) not
// found, and neither changes anything.
func TestRunStops(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	newRun := func() store.Run {
		t.Helper()
		r, err := s.CreateRun(ctx, store.NewRun{TenantID: acme.ID, App: "web", Release: 1, Command: []string{"sleep", "600"}, CreatedBy: "a@b.c"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	held, asked := newRun(), newRun()
	if stops, err := s.StopRequestedRuns(ctx, []string{held.ID, asked.ID, "not-an-id"}); err != nil || len(stops) != 0 {
		t.Errorf("StopRequestedRuns before any stop: %v, %v; want none", stops, err)
	}
	r, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "b@b.c")
	if err != nil || r.Status != store.RunRunning || r.StopRequestedAt == nil || r.StopRequestedBy != "b@b.c" || r.Number != asked.Number {
		t.Fatalf("RequestRunStop: %+v, %v; want run.%d running, asked by b@b.c", r, err, asked.Number)
	}
	if again, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "c@b.c"); err != nil || again.StopRequestedBy != "b@b.c" || !again.StopRequestedAt.Equal(*r.StopRequestedAt) {
		t.Errorf("a second stop of a running run: %+v, %v; want the first asker kept", again, err)
	}
	if stops, err := s.StopRequestedRuns(ctx, []string{held.ID, asked.ID}); err != nil || len(stops) != 1 || stops[asked.ID] != "b@b.c" {
		t.Errorf("StopRequestedRuns: %v, %v; want run.%d by b@b.c alone", stops, err, asked.Number)
	}
	if _, err := s.FinishRun(ctx, asked.ID, store.RunResult{ExitCode: ptr(143), Reason: "stopped by b@b.c"}); err != nil {
		t.Fatal(err)
	}
	if stops, err := s.StopRequestedRuns(ctx, []string{held.ID, asked.ID}); err != nil || len(stops) != 0 {
		t.Errorf("StopRequestedRuns once the run ended: %v, %v; want none", stops, err)
	}
	if r, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "c@b.c"); !errors.Is(err, store.ErrConflict) || r.Reason != "stopped by b@b.c" || r.FinishedAt == nil {
		t.Errorf("a stop of an ended run: %+v, %v; want ErrConflict with the ended run", r, err)
	}
	for name, tc := range map[string]struct {
		tenant, app string
		number      int
	}{
		"no such number":   {acme.ID, "web", 99},
		"another app":      {acme.ID, "api", held.Number},
		"another tenant's": {other.ID, "web", held.Number},
		"no tenant":        {"x", "web", held.Number},
	} {
		if _, err := s.RequestRunStop(ctx, tc.tenant, tc.app, tc.number, "b@b.c"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.RequestRunStop(ctx, acme.ID, "web", held.Number, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a stop that says not who asks: %v, want ErrInvalid", err)
	}
	runs, err := s.ListRuns(ctx, acme.ID, "web", 0)
	if err != nil || len(runs) != 2 || runs[1].Number != held.Number || runs[1].StopRequestedAt != nil || runs[1].Status != store.RunRunning {
		t.Errorf("the run never asked to stop: %+v, %v; want it untouched", runs, err)
	}
}
