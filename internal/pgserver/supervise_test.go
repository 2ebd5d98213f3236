package pgserver

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server killed under its Supervisor comes back on the same URL with its
// data; one stopped by Stop stays stopped.
func TestSupervisorRestartsAKilledServer(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := reachableTempDir(t)
	events := make(chan Event, 16)
	sv, err := Supervise(ctx, Options{DataDir: filepath.Join(dir, "data")}, func(e Event) { events <- e })
	if err != nil {
		t.Fatalf("Supervise: %v", err)
	}
	t.Cleanup(func() { _ = sv.Stop() })
	url := sv.URL("postgres")
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	for round := 1; round <= 2; round++ {
		if err := syscall.Kill(sv.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var exited bool
		for back := false; !back; {
			select {
			case e := <-events:
				if e.Err != nil {
					exited = true
					continue
				}
				back = true
				if e.Restarts != round || e.Port != sv.Port() {
					t.Fatalf("back after round %d: %+v, want restart %d on port %d", round, e, round, sv.Port())
				}
			case <-ctx.Done():
				t.Fatalf("round %d: the killed server did not come back", round)
			}
		}
		if !exited {
			t.Fatalf("round %d: no event said the server exited", round)
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("round %d: connecting to the URL handed out before: %v", round, err)
		}
		var v int
		err = conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v)
		conn.Close(ctx)
		if err != nil || v != 42 {
			t.Fatalf("round %d: SELECT v FROM kept = %d, %v; want 42", round, v, err)
		}
	}

	if err := sv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	if conn, err := pgx.Connect(ctx2, url); err == nil {
		conn.Close(ctx)
		t.Fatal("the server answers after Stop: the supervisor started it again")
	}
	select {
	case e := <-events:
		t.Fatalf("event after Stop: %+v", e)
	default:
	}
}
