package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// smallServerMaxConnections is max_connections of the private servers of
// the tests below: far fewer than their followers and locks.
const smallServerMaxConnections = 30

// sessions counts the client sessions of pool's database other than the
// caller's own.
func sessions(ctx context.Context, t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatalf("counting sessions: %v", err)
	}
	return n
}

// maxSessions is the most connections one store may open: its pool, the
// followers' readers (4), the notifier (1), the lock holder (1) and the
// lock waiters (2).
func maxSessions(s *store.Store) int { return int(s.Pool().Config().MaxConns) + 4 + 1 + 1 + 2 }

// 150 followers of one build and 40 app locks, in one process, on a server
// that takes 30 connections: every follower gets every line, a slow one
// included, the builder still appends and a push still creates its build,
// and the process stays within its few connections.
func TestFollowersAndLocksShareFewConnections(t *testing.T) {
	const followers, locks = 150, 40
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewServerDatabase(t, map[string]string{"max_connections": fmt.Sprint(smallServerMaxConnections)})
	s, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}

	// Each follower says when it has seen "ready", then collects the rest.
	// The slow one blocks in emit until every other follower is done.
	started := make(chan struct{}, followers)
	results := make(chan string, followers)
	release := make(chan struct{})
	follow := func(slow bool) {
		var got []string
		_, err := s.FollowBuildLogs(ctx, b.ID, 0, func(l store.BuildLogLine) error {
			got = append(got, l.Line)
			if l.Line == "ready" {
				started <- struct{}{}
				if slow {
					<-release
				}
			}
			return nil
		})
		results <- fmt.Sprint(strings.Join(got, ","), " ", err)
	}
	go follow(true)
	for range followers - 1 {
		go follow(false)
	}
	if err := s.AppendBuildLog(ctx, b.ID, "ready"); err != nil {
		t.Fatal(err)
	}
	for range followers {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the followers did not all start")
		}
	}

	// App locks of as many apps, held at once.
	var unlocks []func()
	for i := range locks {
		unlock, err := s.LockApp(ctx, "acme", fmt.Sprintf("app-%d", i))
		if err != nil {
			t.Fatalf("LockApp %d: %v", i, err)
		}
		unlocks = append(unlocks, unlock)
	}
	if n, most := sessions(ctx, t, s.Pool()), maxSessions(s); n > most {
		t.Errorf("%d followers and %d locks hold %d connections, want at most %d", followers, locks, n, most)
	}

	// A push of another app still gets its build.
	if _, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "api"}); err != nil {
		t.Fatalf("creating a build while %d followers wait: %v", followers, err)
	}
	var want []string
	want = append(want, "ready")
	for i := range 5 {
		batch := []string{fmt.Sprintf("step %d", i), fmt.Sprintf("step %d done", i)}
		if err := s.AppendBuildLog(ctx, b.ID, batch...); err != nil {
			t.Fatalf("appending while %d followers wait: %v", followers, err)
		}
		want = append(want, batch...)
	}
	if _, err := s.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/acme/web@sha256:1"}); err != nil {
		t.Fatal(err)
	}
	wantResult := strings.Join(want, ",") + " <nil>"
	for range followers - 1 {
		select {
		case got := <-results:
			if got != wantResult {
				t.Fatalf("a follower got %q, want %q", got, wantResult)
			}
		case <-ctx.Done():
			t.Fatal("the followers did not all finish")
		}
	}
	close(release)
	select {
	case got := <-results:
		if got != wantResult {
			t.Fatalf("the slow follower got %q, want %q", got, wantResult)
		}
	case <-ctx.Done():
		t.Fatal("the slow follower did not finish")
	}
	for _, unlock := range unlocks {
		unlock()
	}
	if n, most := sessions(ctx, t, s.Pool()), maxSessions(s); n > most {
		t.Errorf("the store holds %d connections after it all, want at most %d", n, most)
	}
}

// The connection that listens for followers breaks: the store listens
// again and its followers miss nothing.
func TestFollowersResumeAfterTheListenerBreaks(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.StartFollowingBuildLog(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		_, err := f.Follow(ctx, 0, func(l store.BuildLogLine) error { lines <- l.Line; return nil })
		done <- err
	}()
	listener := func() (pid int) {
		err := s.Pool().QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN bex_build_logs'`).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := listener()
	if first == 0 {
		t.Fatal("no session listens for build logs while a follower waits")
	}
	if _, err := s.Pool().Exec(ctx, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 2*time.Minute, "a new session to listen", func(context.Context) error {
		if p := listener(); p == 0 || p == first {
			return fmt.Errorf("the listening session is %d, the broken one was %d", p, first)
		}
		return nil
	})
	if err := s.AppendBuildLog(ctx, b.ID, "after"); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if l != "after" {
			t.Fatalf("followed %q, want after", l)
		}
	case err := <-done:
		t.Fatalf("the follow ended: %v", err)
	case <-ctx.Done():
		t.Fatal("the line appended after the listener broke did not arrive")
	}
	if _, err := s.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildFailed, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Follow: %v", err)
	}
}
