package sandbox_test

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
)

// TestKeptContainerRunsOnForTheNextManager releases a Manager of an
// Owner with a container's process running, as a node agent that stops
// does: the process runs on, what it writes meanwhile waits in its pipe,
// another owner's Manager does not take the slot, and the next Manager of
// the owner finds the container (same id and address) and its process,
// reads what it wrote and gets its exit status.
func TestKeptContainerRunsOnForTheNextManager(t *testing.T) {
	state, owner, ctl := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Chmod(ctl, 0o777); err != nil {
		t.Fatal(err)
	}
	opts := sandbox.Options{StateDir: state, Owner: owner}
	m1 := sandboxtest.New(t, opts)
	c, err := m1.Create(sandbox.Spec{Tenant: "acme", Hostname: "web-0", AppDir: appDir(t),
		Binds: []sandbox.Bind{{Path: ctl, Target: "/ctl"}},
		Args:  []string{"/bin/sh", "-c", `echo before; until [ -e /ctl/go ]; do sleep 0.1; done; echo after; until [ -e /ctl/stop ]; do sleep 0.1; done; exit 7`}})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	r1 := bufio.NewReader(p1.Stdout())
	if line, err := r1.ReadString('\n'); err != nil || line != "before\n" {
		t.Fatalf("first line %q %v, want before", line, err)
	}
	p1.Close()
	m1.Release()

	// Nothing reads: the process writes on.
	if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	if other.Slot() == m1.Slot() {
		t.Fatalf("a Manager of no owner took slot %d, kept for its owner", other.Slot())
	}
	other.Close()

	m2 := sandboxtest.New(t, opts)
	if m2.Slot() != m1.Slot() {
		t.Fatalf("the owner's next Manager has slot %d, not %d", m2.Slot(), m1.Slot())
	}
	kept := m2.Kept()
	if len(kept) != 1 || kept[0].ID() != c.ID() || kept[0].Addr() != c.Addr() {
		t.Fatalf("kept %v, want container %s at %s", kept, c.ID(), c.Addr())
	}
	t.Cleanup(func() { kept[0].Destroy() })
	p2, err := kept[0].Resume()
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	select {
	case <-p2.Done():
		t.Fatal("the resumed process has ended")
	default:
	}
	r2 := bufio.NewReader(p2.Stdout())
	if line, err := r2.ReadString('\n'); err != nil || line != "after\n" {
		t.Fatalf("line written while no Manager held the slot: %q %v, want after", line, err)
	}
	if err := os.WriteFile(filepath.Join(ctl, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p2.Wait(); code != 7 {
		t.Fatalf("exit status %d, want 7", code)
	}
	if line, err := r2.ReadString('\n'); line != "" || err == nil {
		t.Fatalf("after the end: %q %v, want EOF", line, err)
	}
}
