package store_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"bex.co/bex/internal/pgserver"
	"bex.co/bex/internal/store"
)

// A database that went away is told apart from an answer of the database:
// the first is Unavailable, a missing or taken name is not.
func TestUnavailableTellsAnOutageFromAnAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "store-unavailable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The server runs as the postgres user when the test is root.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "data"), Ephemeral: true})
	if err != nil {
		t.Skipf("no private PostgreSQL server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s, err := store.Open(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	tenant, err := s.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateTenant(ctx, "acme")
	if !errors.Is(err, store.ErrConflict) || store.Unavailable(err) {
		t.Fatalf("a taken name: %v, Unavailable = %v; want ErrConflict, not unavailable", err, store.Unavailable(err))
	}
	_, err = s.GetTenant(ctx, "00000000-0000-0000-0000-000000000000")
	if !errors.Is(err, store.ErrNotFound) || store.Unavailable(err) {
		t.Fatalf("a missing tenant: %v, Unavailable = %v; want ErrNotFound, not unavailable", err, store.Unavailable(err))
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetTenant(ctx, tenant.ID)
	if err == nil || !store.Unavailable(err) {
		t.Fatalf("GetTenant with the server stopped: %v, Unavailable = %v; want an unavailable error", err, store.Unavailable(err))
	}
}

// A server that takes connections and never answers fails a call as
// unavailable once the connect timeout passes, while the caller's context
// still has time: the API answers 503 rather than holding the request until
// its write timeout cuts the connection.
func TestConnectingToAServerThatNeverAnswersTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		// Take each connection and say nothing.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*store.DefaultConnectTimeout)
	defer cancel()
	_, err = store.Open(ctx, "postgres://bex:secret@"+ln.Addr().String()+"/bex?sslmode=disable")
	if err == nil || !store.Unavailable(err) {
		t.Fatalf("Open on a server that never answers: %v; want an unavailable error", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Open returned only when the caller's context ended: %v; want the connect timeout to end it first", err)
	}
}
