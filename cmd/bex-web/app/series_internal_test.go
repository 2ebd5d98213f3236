package app

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

var errNotYet = errors.New("not yet")

// TestSeriesSaverOneReplica: two replicas on one Postgres; exactly one
// holds the series lock and saves, the other's saves change nothing (they
// would delete the holder's rows of apps it does not track) and answer
// ErrNotSaved; once the holder stops, the other takes the lock and, after
// an ErrTookOver that makes its sampler merge the saved rows and write
// every app, saves.
func TestSeriesSaverOneReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	open := func() *store.Store {
		st, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	replicas := []*seriesSaver{{st: open(), retry: 100 * time.Millisecond}, {st: open(), retry: 100 * time.Millisecond}}
	stops := make([]func(), len(replicas))
	for i, r := range replicas {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.hold(rctx, logr.Discard()) }()
		stops[i] = func() { stop(); <-done }
		t.Cleanup(stops[i])
	}
	var holder, other int
	platformtest.Eventually(t, time.Minute, "one replica holding the series lock", func(context.Context) error {
		switch a, b := replicas[0].held.Load(), replicas[1].held.Load(); {
		case a && b:
			t.Fatal("both replicas hold the series lock")
		case a:
			holder, other = 0, 1
		case b:
			holder, other = 1, 0
		default:
			return errNotYet
		}
		return nil
	})

	now := time.Now().Truncate(time.Millisecond)
	row := func(app string) store.AppSeries {
		return store.AppSeries{Tenant: "acme", App: app, Interval: 10 * time.Second, LastAt: now, Points: []byte{1, 0}}
	}
	saved := func() []string {
		t.Helper()
		got, err := replicas[0].LoadAppSeries(ctx, []string{"acme", "acme"}, []string{"shop", "blog"}, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var apps []string
		for _, s := range got {
			apps = append(apps, s.App)
		}
		return apps
	}
	// The first save after the lock is taken answers ErrTookOver.
	if err := replicas[holder].SaveAppSeries(ctx, slices.Values([]store.AppSeries{row("shop")})); !errors.Is(err, appmetrics.ErrTookOver) {
		t.Fatalf("first save of the holder = %v, want ErrTookOver", err)
	}
	if err := replicas[holder].SaveAppSeries(ctx, slices.Values([]store.AppSeries{row("shop")})); err != nil {
		t.Fatal(err)
	}
	if err := replicas[other].SaveAppSeries(ctx, slices.Values([]store.AppSeries{row("blog")})); !errors.Is(err, appmetrics.ErrNotSaved) {
		t.Fatalf("save of the replica without the lock = %v, want ErrNotSaved", err)
	}
	if got := saved(); len(got) != 1 || got[0] != "shop" {
		t.Fatalf("saved series %v, want only the holder's shop", got)
	}

	stops[holder]()
	platformtest.Eventually(t, time.Minute, "the other replica taking the series lock", func(context.Context) error {
		if !replicas[other].held.Load() {
			return errNotYet
		}
		return nil
	})
	if err := replicas[other].SaveAppSeries(ctx, slices.Values([]store.AppSeries{row("blog")})); !errors.Is(err, appmetrics.ErrTookOver) {
		t.Fatalf("first save of the new holder = %v, want ErrTookOver", err)
	}
	if err := replicas[other].SaveAppSeries(ctx, slices.Values([]store.AppSeries{row("blog")})); err != nil {
		t.Fatal(err)
	}
	if got := saved(); len(got) != 1 || got[0] != "blog" {
		t.Errorf("saved series %v, want the new holder's blog", got)
	}
}
