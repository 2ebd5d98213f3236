package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestBuildLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")

	b1, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web", Commit: "abc1234"})
	if err != nil {
		t.Fatal(err)
	}
	if b1.Number != 1 || b1.Status != store.BuildRunning || b1.Done() || b1.FinishedAt != nil || b1.Commit != "abc1234" {
		t.Fatalf("first build = %+v, want number 1, running", b1)
	}
	b2, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	// Numbers are per app and per tenant.
	api, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "api"})
	if err != nil {
		t.Fatal(err)
	}
	otherWeb, err := s.CreateBuild(ctx, store.NewBuild{TenantID: other.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if b2.Number != 2 || api.Number != 1 || otherWeb.Number != 1 {
		t.Errorf("numbers = %d, %d, %d, want 2 (acme/web), 1 (acme/api), 1 (other/web)", b2.Number, api.Number, otherWeb.Number)
	}

	if err := s.AppendBuildLog(ctx, b1.ID, "-----> Go app detected\n", "go: downloading"); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendBuildLog(ctx, b1.ID, "./main.go:3:1: syntax error"); err != nil {
		t.Fatal(err)
	}
	failed, err := s.FinishBuild(ctx, b1.ID, store.BuildResult{Status: store.BuildFailed, Stack: "go", Error: "compilation failed"})
	if err != nil {
		t.Fatal(err)
	}
	if failed.Status != store.BuildFailed || failed.FinishedAt == nil || failed.Stack != "go" || failed.Error != "compilation failed" || failed.LogLines != 3 {
		t.Errorf("finished build = %+v", failed)
	}

	// The log of a failed build is kept and read back in order.
	lines, err := s.BuildLogs(ctx, b1.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinLines(lines); got != "1 -----> Go app detected|2 go: downloading|3 ./main.go:3:1: syntax error" {
		t.Errorf("log = %q", got)
	}
	lines, err = s.BuildLogs(ctx, b1.ID, 2)
	if err != nil || joinLines(lines) != "3 ./main.go:3:1: syntax error" {
		t.Errorf("log after 2 = %q, %v", joinLines(lines), err)
	}

	// A finished build is closed: no more lines, no second result.
	if err := s.AppendBuildLog(ctx, b1.ID, "late"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("AppendBuildLog after finish: err = %v, want ErrConflict", err)
	}
	if _, err := s.FinishBuild(ctx, b1.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/acme/web@sha256:00"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second FinishBuild: err = %v, want ErrConflict", err)
	}
	got, err := s.GetBuild(ctx, b1.ID)
	if err != nil || got.Status != store.BuildFailed || got.Image != "" {
		t.Errorf("after refused changes the build is %+v, %v", got, err)
	}

	ok, err := s.FinishBuild(ctx, b2.ID, store.BuildResult{Status: store.BuildSucceeded, Stack: "go", Image: "registry.local/acme/web@sha256:ab"})
	if err != nil || ok.Image != "registry.local/acme/web@sha256:ab" {
		t.Fatalf("FinishBuild succeeded = %+v, %v", ok, err)
	}

	latest, err := s.GetBuildByNumber(ctx, acme.ID, "web", 0)
	if err != nil || latest.ID != b2.ID {
		t.Errorf("latest build = %+v, %v, want build 2", latest, err)
	}
	if byName, err := s.LatestBuildOf(ctx, "acme", "web"); err != nil || byName.ID != b2.ID {
		t.Errorf("latest build of acme/web by name = %+v, %v, want build 2", byName, err)
	}
	if byName, err := s.LatestBuildOf(ctx, "other", "web"); err != nil || byName.ID != otherWeb.ID {
		t.Errorf("latest build of other/web by name = %+v, %v, want other's build 1", byName, err)
	}
	for _, missing := range [][2]string{{"acme", "nope"}, {"nobody", "web"}} {
		if _, err := s.LatestBuildOf(ctx, missing[0], missing[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("latest build of %s/%s: err = %v, want ErrNotFound", missing[0], missing[1], err)
		}
	}
	first, err := s.GetBuildByNumber(ctx, acme.ID, "web", 1)
	if err != nil || first.ID != b1.ID {
		t.Errorf("build 1 = %+v, %v", first, err)
	}
	if _, err := s.GetBuildByNumber(ctx, other.ID, "api", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's build: err = %v, want ErrNotFound", err)
	}

	list, err := s.ListBuilds(ctx, acme.ID, "web", 0)
	if err != nil || len(list) != 2 || list[0].Number != 2 || list[1].Number != 1 {
		t.Errorf("ListBuilds(acme, web) = %+v, %v, want 2, 1", list, err)
	}
	all, err := s.ListBuilds(ctx, acme.ID, "", 0)
	if err != nil || len(all) != 3 {
		t.Errorf("ListBuilds(acme) = %d builds, %v, want 3", len(all), err)
	}

	for _, bad := range []store.BuildResult{
		{Status: store.BuildSucceeded},
		{Status: store.BuildFailed, Image: "x@sha256:1"},
		{Status: store.BuildRunning},
	} {
		if _, err := s.FinishBuild(ctx, api.ID, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("FinishBuild(%+v): err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.CreateBuild(ctx, store.NewBuild{TenantID: "00000000-0000-0000-0000-000000000000", App: "web"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateBuild for a missing tenant: err = %v, want ErrNotFound", err)
	}
	if err := s.AppendBuildLog(ctx, "00000000-0000-0000-0000-000000000000", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendBuildLog to a missing build: err = %v, want ErrNotFound", err)
	}
}

func TestBuildNumbersUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	wantDenseNumbers(t, 10, func(int) (int, error) {
		b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
		return b.Number, err
	})
}

// wantDenseNumbers calls create n times at once and fails t unless the
// numbers it returns are 1..n, each once.
func wantDenseNumbers(t *testing.T, n int, create func(i int) (int, error)) {
	t.Helper()
	numbers := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { numbers[i], errs[i] = create(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	sort.Ints(numbers)
	for i, got := range numbers {
		if got != i+1 {
			t.Fatalf("numbers = %v, want 1..%d exactly", numbers, n)
		}
	}
}

func TestBuildLogConcurrentAppendsKeepSeqDense(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.AppendBuildLog(ctx, b.ID, fmt.Sprintf("%d-a", i), fmt.Sprintf("%d-b", i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	lines, err := s.BuildLogs(ctx, b.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 16 {
		t.Fatalf("%d lines, want 16", len(lines))
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d", i, l.Seq)
		}
		// The two lines of one call stay together.
		if strings.HasSuffix(l.Line, "-a") && lines[i+1].Line != strings.TrimSuffix(l.Line, "a")+"b" {
			t.Errorf("lines of one call were split: %q then %q", l.Line, lines[i+1].Line)
		}
	}
}

func TestFollowBuildLogs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendBuildLog(ctx, b.ID, "one"); err != nil {
		t.Fatal(err)
	}

	got := make(chan store.BuildLogLine)
	done := make(chan error, 1)
	var final store.Build
	go func() {
		var err error
		final, err = s.FollowBuildLogs(ctx, b.ID, 0, func(l store.BuildLogLine) error {
			got <- l
			return nil
		})
		close(got)
		done <- err
	}()
	next := func(want string) {
		t.Helper()
		select {
		case l := <-got:
			if l.Line != want {
				t.Fatalf("followed line = %q, want %q", l.Line, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no line %q within 30s", want)
		}
	}
	next("one")
	// Each line reaches the follower before the next is appended: it
	// is streamed, not collected at the end.
	for _, l := range []string{"two", "three"} {
		if err := s.AppendBuildLog(ctx, b.ID, l); err != nil {
			t.Fatal(err)
		}
		next(l)
	}
	if _, err := s.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildFailed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("FollowBuildLogs did not return after the build finished")
	}
	if final.Status != store.BuildFailed || final.Error != "boom" {
		t.Errorf("FollowBuildLogs returned %+v, want the failed build", final)
	}

	// Following a finished build replays its log and returns.
	var replay []store.BuildLogLine
	if _, err := s.FollowBuildLogs(ctx, b.ID, 1, func(l store.BuildLogLine) error { replay = append(replay, l); return nil }); err != nil {
		t.Fatal(err)
	}
	if joinLines(replay) != "2 two|3 three" {
		t.Errorf("replay after 1 = %q", joinLines(replay))
	}

	// Cancelling stops a follower of a running build.
	b2, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.FollowBuildLogs(cctx, b2.ID, 0, func(store.BuildLogLine) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("FollowBuildLogs with a cancelled context: err = %v", err)
	}
	if _, err := s.FollowBuildLogs(ctx, "00000000-0000-0000-0000-000000000000", 0, func(store.BuildLogLine) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FollowBuildLogs of a missing build: err = %v, want ErrNotFound", err)
	}
}

func joinLines(lines []store.BuildLogLine) string {
	var parts []string
	for _, l := range lines {
		parts = append(parts, fmt.Sprintf("%d %s", l.Seq, l.Line))
	}
	return strings.Join(parts, "|")
}

// TestFollowersDoNotStarveWriters follows one build with more followers
// than the store's pool has connections: the builder must still be able to
// append and finish, and every follower must see the end.
func TestFollowersDoNotStarveWriters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	n := int(s.Pool().Config().MaxConns) + 2
	started := make(chan struct{}, n)
	results := make(chan string, n)
	for range n {
		go func() {
			var got []string
			_, err := s.FollowBuildLogs(ctx, b.ID, 0, func(l store.BuildLogLine) error {
				if l.Line == "ready" {
					started <- struct{}{}
				}
				got = append(got, l.Line)
				return nil
			})
			results <- fmt.Sprint(got, err)
		}()
	}
	if err := s.AppendBuildLog(ctx, b.ID, "ready"); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("followers did not all start within 30s")
		}
	}
	// Every follower is now waiting on a notification.
	appendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.AppendBuildLog(appendCtx, b.ID, "done"); err != nil {
		t.Fatalf("appending while %d followers wait: %v", n, err)
	}
	if _, err := s.FinishBuild(appendCtx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/acme/web@sha256:1"}); err != nil {
		t.Fatalf("finishing while %d followers wait: %v", n, err)
	}
	for range n {
		select {
		case got := <-results:
			if got != "[ready done] <nil>" {
				t.Errorf("a follower saw %s", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("followers did not all end within 30s")
		}
	}
}

// TestBuildLogKeepsTheTail: a build that writes more lines than the limit
// keeps exactly the last ones, after a line that says how many were dropped
// and names the limit; a line longer than the line limit is cut and says so.
func TestBuildLogKeepsTheTail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t).WithLimits(store.Limits{BuildLogLines: 50})
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	// 120 lines: one at a time, then in a batch larger than the limit.
	for i := 1; i <= 40; i++ {
		if err := s.AppendBuildLog(ctx, b.ID, fmt.Sprintf("line %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var batch []string
	for i := 41; i <= 120; i++ {
		batch = append(batch, fmt.Sprintf("line %d", i))
	}
	if err := s.AppendBuildLog(ctx, b.ID, batch...); err != nil {
		t.Fatal(err)
	}
	lines, err := s.BuildLogs(ctx, b.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 51 {
		t.Fatalf("%d lines kept, want the notice and the last 50", len(lines))
	}
	const notice = "[bex] The first 70 lines of this build's log were dropped: a build keeps its last 50 lines."
	if lines[0].Line != notice || lines[0].Seq != 70 {
		t.Errorf("first line = %d %q, want 70 %q", lines[0].Seq, lines[0].Line, notice)
	}
	for i, l := range lines[1:] {
		if want := fmt.Sprintf("line %d", 71+i); l.Line != want || l.Seq != int64(71+i) {
			t.Errorf("line %d = %d %q, want %d %q", i+1, l.Seq, l.Line, 71+i, want)
		}
	}
	if got, err := s.GetBuild(ctx, b.ID); err != nil || got.LogLines != 120 {
		t.Errorf("build log_lines = %d (%v), want 120", got.LogLines, err)
	}

	long := strings.Repeat("é", store.MaxBuildLogLineBytes) // twice the limit in bytes
	if err := s.AppendBuildLog(ctx, b.ID, long); err != nil {
		t.Fatal(err)
	}
	lines, err = s.BuildLogs(ctx, b.ID, 120)
	if err != nil || len(lines) != 1 {
		t.Fatalf("lines after 120: %v (%v), want one", lines, err)
	}
	got := lines[0].Line
	want := fmt.Sprintf(" [bex: line cut: a log line keeps %d bytes]", store.MaxBuildLogLineBytes)
	if !strings.HasSuffix(got, want) || !strings.HasPrefix(got, strings.Repeat("é", store.MaxBuildLogLineBytes/2)) ||
		len(got) != store.MaxBuildLogLineBytes+len(want) {
		t.Errorf("long line stored as %d bytes ending %q, want the first %d bytes and %q",
			len(got), got[max(0, len(got)-80):], store.MaxBuildLogLineBytes, want)
	}
}
