package sandboxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"bex.co/bex/internal/sandbox"
)

// Require skips the test when this machine cannot run sandboxes, saying
// why; in CI (CI set) it fails instead, since CI must run them.
func Require(t testing.TB) {
	t.Helper()
	if err := sandbox.Check(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the sandbox tests: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// New returns a Manager for the test, closed at cleanup.
func New(t testing.TB, opts sandbox.Options) *sandbox.Manager {
	t.Helper()
	Require(t)
	m, err := sandbox.New(opts)
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("closing the sandbox manager: %v", err)
		}
	})
	return m
}

// BuildProbe builds the probe, static, into dir as "probe" and returns its
// path.
func BuildProbe(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-o", out, "bex.co/bex/internal/sandbox/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, b)
	}
	return out
}
