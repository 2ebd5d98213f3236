package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
// once (asked again, the first asker stays), and RunsToEnd returns it
// among the runs it is given until the run has ended; a stop
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
	if stops, err := s.RunsToEnd(ctx, []string{held.ID, asked.ID, "not-an-id"}); err != nil || len(stops) != 0 {
		t.Errorf("RunsToEnd before any stop: %v, %v; want none", stops, err)
	}
	r, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "b@b.c")
	if err != nil || r.Status != store.RunRunning || r.StopRequestedAt == nil || r.StopRequestedBy != "b@b.c" || r.Number != asked.Number {
		t.Fatalf("RequestRunStop: %+v, %v; want run.%d running, asked by b@b.c", r, err, asked.Number)
	}
	if again, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "c@b.c"); err != nil || again.StopRequestedBy != "b@b.c" || !again.StopRequestedAt.Equal(*r.StopRequestedAt) {
		t.Errorf("a second stop of a running run: %+v, %v; want the first asker kept", again, err)
	}
	if stops, err := s.RunsToEnd(ctx, []string{held.ID, asked.ID}); err != nil || len(stops) != 1 || stops[0].ID != asked.ID || stops[0].StopRequestedBy != "b@b.c" {
		t.Errorf("RunsToEnd: %+v, %v; want run.%d asked by b@b.c alone", stops, err, asked.Number)
	}
	if _, err := s.FinishRun(ctx, asked.ID, store.RunResult{ExitCode: ptr(143), Reason: "stopped by b@b.c"}); err != nil {
		t.Fatal(err)
	}
	if stops, err := s.RunsToEnd(ctx, []string{held.ID, asked.ID}); err != nil || len(stops) != 0 {
		t.Errorf("RunsToEnd once the run ended: %v, %v; want none", stops, err)
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

// TestRunsLost: a run whose server stops heartbeating is marked lost by
// the sweep once the deadline has passed — no exit status, the reason
// saying why, its end recorded — and the quota stops counting it at once,
// asked to stop or not; the runs of a server that heartbeats stay running
// through every sweep across the deadline, as do runs without a server;
// a lost run keeps its end (FinishRun and RequestRunStop are conflicts)
// and is among the runs its server must end (RunsToEnd).
func TestRunsLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	live, dead := uuid.NewString(), uuid.NewString()
	const lostAfter = 500 * time.Millisecond
	newRun := func(server string, quota *int) (store.Run, error) {
		return s.CreateRun(ctx, store.NewRun{TenantID: acme.ID, App: "web", Release: 1, Command: []string{"sleep", "600"}, CreatedBy: "a@b.c", ServerID: server, ConcurrentRuns: quota})
	}
	mustRun := func(server string) store.Run {
		t.Helper()
		r, err := newRun(server, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.ServerID != server || r.Status != store.RunRunning {
			t.Fatalf("a new run of server %q: %+v", server, r)
		}
		return r
	}
	if err := s.HeartbeatRunServer(ctx, live); err != nil {
		t.Fatal(err)
	}
	kept, orphan, asked, unserved := mustRun(live), mustRun(dead), mustRun(dead), mustRun("")
	if _, err := s.RequestRunStop(ctx, acme.ID, "web", asked.Number, "b@b.c"); err != nil {
		t.Fatal(err)
	}
	if _, err := newRun(dead, ptr(4)); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Fatalf("a fifth run under a quota of 4 while 4 run: %v, want ErrQuotaExceeded", err)
	}
	if _, err := newRun("server-1", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a run of a server that is no UUID: %v, want ErrInvalid", err)
	}

	// Sweep as every live replica does, the live server heartbeating
	// before each, until the dead server's runs are lost and for three
	// deadlines more.
	start := time.Now()
	lost := map[string]store.Run{}
	ticker := time.NewTicker(lostAfter / 10)
	defer ticker.Stop()
	sweeps := 0
	for len(lost) < 2 || time.Since(start) < 3*lostAfter {
		if time.Since(start) > time.Minute {
			t.Fatalf("the dead server's runs not lost after a minute of sweeps: %v", lost)
		}
		<-ticker.C
		if err := s.HeartbeatRunServer(ctx, live); err != nil {
			t.Fatal(err)
		}
		ended, err := s.MarkLostRuns(ctx, lostAfter)
		if err != nil {
			t.Fatal(err)
		}
		sweeps++
		for _, r := range ended {
			if _, again := lost[r.ID]; again {
				t.Errorf("run.%d marked lost twice", r.Number)
			}
			lost[r.ID] = r
		}
	}
	if len(lost) != 2 || lost[orphan.ID].Number != orphan.Number || lost[asked.ID].Number != asked.Number {
		t.Fatalf("after %d sweeps the lost runs are %+v; want run.%d and run.%d, the dead server's", sweeps, lost, orphan.Number, asked.Number)
	}
	for _, r := range lost {
		if r.Status != store.RunLost || r.ExitCode != nil || r.Reason != store.LostRunReason || r.FinishedAt == nil || r.ServerID != dead {
			t.Errorf("lost run.%d: %+v; want lost, no exit status, the reason, finished", r.Number, r)
		}
	}
	runs, err := s.ListRuns(ctx, acme.ID, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		want := store.RunRunning
		if _, ok := lost[r.ID]; ok {
			want = store.RunLost
		}
		if r.Status != want {
			t.Errorf("run.%d after %d sweeps: %s, want %s", r.Number, sweeps, r.Status, want)
		}
	}
	if asked := runs[len(runs)-asked.Number]; asked.StopRequestedBy != "b@b.c" {
		t.Errorf("the lost run asked to stop: %+v; want its asker kept", asked)
	}
	if n, err := s.RunningRuns(ctx, acme.ID); err != nil || n != 2 {
		t.Errorf("RunningRuns = %d, %v; want 2, the live server's and the one without a server", n, err)
	}
	if _, err := newRun(live, ptr(4)); err != nil {
		t.Errorf("a run under a quota of 4 once two were lost: %v", err)
	}

	if _, err := s.FinishRun(ctx, orphan.ID, store.RunResult{ExitCode: ptr(0)}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("FinishRun of a lost run: %v, want ErrConflict", err)
	}
	if r, err := s.RequestRunStop(ctx, acme.ID, "web", orphan.Number, "b@b.c"); !errors.Is(err, store.ErrConflict) || r.Status != store.RunLost {
		t.Errorf("a stop of a lost run: %+v, %v; want ErrConflict with the lost run", r, err)
	}
	toEnd, err := s.RunsToEnd(ctx, []string{kept.ID, orphan.ID, unserved.ID})
	if err != nil || len(toEnd) != 1 || toEnd[0].ID != orphan.ID || toEnd[0].Status != store.RunLost {
		t.Errorf("RunsToEnd of a live, a lost and a serverless run: %+v, %v; want the lost one", toEnd, err)
	}
	if _, err := s.MarkLostRuns(ctx, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("MarkLostRuns with no deadline: %v, want ErrInvalid", err)
	}
}

// TestMarkLostRunsConcurrent: sweeps of many replicas at once end each
// lost run once, none of them failing.
func TestMarkLostRunsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	const runs = 12
	for i := range runs {
		if _, err := s.CreateRun(ctx, store.NewRun{TenantID: acme.ID, App: "web", Release: 1, Command: []string{"true"}, CreatedBy: "x", ServerID: uuid.NewString()}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	var mu sync.Mutex
	ended := map[int]int{}
	// Any deadline has passed for servers last seen a microsecond ago.
	passed, _ := atOnce(t, 8, func(int) error {
		lost, err := s.MarkLostRuns(ctx, time.Microsecond)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range lost {
			ended[r.Number]++
		}
		return err
	})
	if passed != 8 || len(ended) != runs {
		t.Errorf("8 sweeps at once: %d passed, %d runs ended; want 8 and %d", passed, len(ended), runs)
	}
	for n, times := range ended {
		if times != 1 {
			t.Errorf("run.%d ended by %d sweeps", n, times)
		}
	}
	if n, err := s.RunningRuns(ctx, acme.ID); err != nil || n != 0 {
		t.Errorf("RunningRuns = %d, %v; want 0", n, err)
	}
	audited, err := s.ListAudit(ctx, store.AuditFilter{TenantID: acme.ID, Action: store.RunEndAction})
	if err != nil || len(audited) != runs {
		t.Errorf("app.run.end entries after 8 sweeps at once: %d, %v; want one per run, %d", len(audited), err, runs)
	}
}

// runEnds reads the tenant's app.run.end entries, oldest first, by run
// number, failing on a run audited twice.
func runEnds(t *testing.T, s *store.Store, tenantID string) (map[int]store.AuditEntry, map[int]store.RunEndDetails) {
	t.Helper()
	entries, err := s.ListAudit(t.Context(), store.AuditFilter{TenantID: tenantID, Action: store.RunEndAction})
	if err != nil {
		t.Fatal(err)
	}
	byRun, details := map[int]store.AuditEntry{}, map[int]store.RunEndDetails{}
	for _, e := range entries {
		var d store.RunEndDetails
		if err := json.Unmarshal(e.Details, &d); err != nil {
			t.Fatalf("details of entry %d: %v: %s", e.ID, err, e.Details)
		}
		if _, twice := byRun[d.Run]; twice {
			t.Errorf("run.%d's end audited twice", d.Run)
		}
		byRun[d.Run], details[d.Run] = e, d
	}
	return byRun, details
}

// TestRunEndsAudited: every run's end is audited once as app.run.end,
// under the one who started it (the platform for a lost run), with its
// number, exit status and how it ended, who stopped a stopped one; an
// end recorded twice, or refused, audits nothing more; RunningRunsOf
// lists the app's running runs alone, oldest first.
func TestRunEndsAudited(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	newRun := func(tenantID, app, by, server string, detached bool) store.Run {
		t.Helper()
		r, err := s.CreateRun(ctx, store.NewRun{TenantID: tenantID, App: app, Release: 3, Command: []string{"sleep", "600"}, CreatedBy: by, ServerID: server, Detached: detached})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dead := uuid.NewString()
	exited, failed, stopped, timedOut, gone, notStarted, lost, running := newRun(acme.ID, "web", "a@b.c", "", false), newRun(acme.ID, "web", "token:ci", "", true),
		newRun(acme.ID, "web", "a@b.c", "", true), newRun(acme.ID, "web", "a@b.c", "", false), newRun(acme.ID, "web", "a@b.c", "", false),
		newRun(acme.ID, "web", "a@b.c", "", false), newRun(acme.ID, "web", "c@b.c", dead, false), newRun(acme.ID, "web", "a@b.c", "", false)
	otherApp, otherTenant := newRun(acme.ID, "api", "a@b.c", "", false), newRun(other.ID, "web", "a@b.c", "", false)

	if got, err := s.RunningRunsOf(ctx, acme.ID, "web"); err != nil || len(got) != 8 || got[0].Number != 1 || got[7].Number != 8 {
		t.Fatalf("RunningRunsOf before any end: %d runs, %v; want web's 8, oldest first", len(got), err)
	}
	if _, err := s.RequestRunStop(ctx, acme.ID, "web", stopped.Number, "b@b.c"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		run store.Run
		res store.RunResult
	}{
		{exited, store.RunResult{ExitCode: ptr(0)}},
		{failed, store.RunResult{ExitCode: ptr(3)}},
		{stopped, store.RunResult{ExitCode: ptr(143), Reason: "stopped by b@b.c", End: store.RunStopped}},
		{timedOut, store.RunResult{ExitCode: ptr(143), Reason: "timed out after 1s", End: store.RunTimedOut}},
		{gone, store.RunResult{ExitCode: ptr(143), Reason: "the client went away", End: store.RunDisconnected}},
		{notStarted, store.RunResult{Reason: "the command could not start: no such file"}},
	} {
		if _, err := s.FinishRun(ctx, tc.run.ID, tc.res); err != nil {
			t.Fatalf("FinishRun of run.%d: %v", tc.run.Number, err)
		}
	}
	// Refused ends audit nothing: an end twice, a lost end, one unknown.
	if _, err := s.FinishRun(ctx, exited.ID, store.RunResult{ExitCode: ptr(1)}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second FinishRun: %v, want ErrConflict", err)
	}
	for _, end := range []store.RunEnd{store.RunEndLost, "crashed"} {
		if _, err := s.FinishRun(ctx, running.ID, store.RunResult{ExitCode: ptr(1), End: end}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("FinishRun ended %q: %v, want ErrInvalid", end, err)
		}
	}
	if swept, err := s.MarkLostRuns(ctx, time.Microsecond); err != nil || len(swept) != 1 || swept[0].ID != lost.ID {
		t.Fatalf("MarkLostRuns: %+v, %v; want run.%d", swept, err, lost.Number)
	}
	if again, err := s.MarkLostRuns(ctx, time.Microsecond); err != nil || len(again) != 0 {
		t.Errorf("a second sweep: %+v, %v; want none", again, err)
	}

	entries, details := runEnds(t, s, acme.ID)
	for _, tc := range []struct {
		run                        store.Run
		actor, ended, reason, stop string
		exit                       *int
	}{
		{exited, "a@b.c", "exited", "", "", ptr(0)},
		{failed, "token:ci", "exited", "", "", ptr(3)},
		{stopped, "a@b.c", "stopped", "stopped by b@b.c", "b@b.c", ptr(143)},
		{timedOut, "a@b.c", "timedOut", "timed out after 1s", "", ptr(143)},
		{gone, "a@b.c", "disconnected", "the client went away", "", ptr(143)},
		{notStarted, "a@b.c", "notStarted", "the command could not start: no such file", "", nil},
		{lost, store.PlatformActor, "lost", store.LostRunReason, "", nil},
	} {
		e, ok := entries[tc.run.Number]
		if !ok {
			t.Errorf("run.%d's end (%s) is not audited", tc.run.Number, tc.ended)
			continue
		}
		d := details[tc.run.Number]
		if e.Actor != tc.actor || e.Target != "web" || e.TenantID != acme.ID || string(d.Ended) != tc.ended || d.Reason != tc.reason ||
			d.StoppedBy != tc.stop || d.Release != 3 || d.StartedBy != tc.run.CreatedBy || d.Detached != tc.run.Detached {
			t.Errorf("run.%d's end: %+v %s; want by %s, ended %s, reason %q, stopped by %q", tc.run.Number, e, e.Details, tc.actor, tc.ended, tc.reason, tc.stop)
		}
		if (d.ExitCode == nil) != (tc.exit == nil) || d.ExitCode != nil && *d.ExitCode != *tc.exit {
			t.Errorf("run.%d's end: exit code %v, want %v", tc.run.Number, d.ExitCode, tc.exit)
		}
	}
	if len(entries) != 7 {
		t.Errorf("%d app.run.end entries, want 7: the running run's end is not audited yet", len(entries))
	}
	if got, err := s.RunningRunsOf(ctx, acme.ID, "web"); err != nil || len(got) != 1 || got[0].ID != running.ID {
		t.Errorf("RunningRunsOf once the others ended: %+v, %v; want run.%d alone", got, err, running.Number)
	}
	if got, err := s.RunningRunsOf(ctx, other.ID, "web"); err != nil || len(got) != 1 || got[0].ID != otherTenant.ID {
		t.Errorf("RunningRunsOf of another tenant: %+v, %v; want its own run", got, err)
	}
	if got, err := s.RunningRunsOf(ctx, acme.ID, "api"); err != nil || len(got) != 1 || got[0].ID != otherApp.ID {
		t.Errorf("RunningRunsOf of another app: %+v, %v; want its own run", got, err)
	}
	if _, err := s.RunningRunsOf(ctx, "x", "web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunningRunsOf of no tenant: %v, want ErrNotFound", err)
	}
}
