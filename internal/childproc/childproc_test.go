package childproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/childproc"
)

// TestStopEndsTheProcessGroup: a child that ignores SIGTERM, and its own
// child, are killed after the grace period.
func TestStopEndsTheProcessGroup(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	p, err := childproc.Start(childproc.Options{Name: "sh", LogFile: log,
		Args: []string{"sh", "-c", `trap "" TERM; sleep 300 & echo started; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx, "sh", 20*time.Millisecond, func(context.Context) error {
		if p.Tail(1) != "started" {
			return errors.New("not started yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.Stop(200 * time.Millisecond)
	if !p.Exited() {
		t.Fatal("the process runs after Stop")
	}
	if p.Err() == nil || !strings.Contains(p.Err().Error(), "killed") {
		t.Errorf("exit = %v, want killed after ignoring SIGTERM", p.Err())
	}
}

// TestWaitReadyStopsWhenTheProcessExits: a process that exits before it
// is ready ends the wait at once, with check's last error.
func TestWaitReadyStopsWhenTheProcessExits(t *testing.T) {
	p, err := childproc.Start(childproc.Options{Name: "false", LogFile: filepath.Join(t.TempDir(), "false.log"), Args: []string{"false"}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), "false", 20*time.Millisecond, func(context.Context) error { return errors.New("no answer") })
	if err == nil || !strings.Contains(err.Error(), "false exited before it was ready") || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("WaitReady = %v, want the exit and check's last error", err)
	}
}

// TestFreePortsAreDistinct: ports picked together are never the same port,
// though the kernel hands a just-closed port out again (the webhook and
// health ports of a Cluster API manager once were).
func TestFreePortsAreDistinct(t *testing.T) {
	const n = 400
	ports, err := childproc.FreePorts("", n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d picked twice among %d", p, n)
		}
		seen[p] = true
	}
	if len(ports) != n {
		t.Fatalf("got %d ports, want %d", len(ports), n)
	}
}

// TestFreePortsBelowTheEphemeralRange: the ports are not of the range the
// kernel hands to listeners on port 0 and to outgoing connections, where
// another process could take one before the child binds it.
func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to read: %v", err)
	}
	var first int
	if _, err := fmt.Sscan(string(data), &first); err != nil {
		t.Fatal(err)
	}
	if first < 10000+4096 {
		t.Skipf("the ephemeral range starts at %d, which leaves no room below it", first)
	}
	ports, err := childproc.FreePorts("127.0.0.1", 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < 10000 || p >= first {
			t.Errorf("port %d, want one of 10000 to %d", p, first-1)
		}
	}
}
