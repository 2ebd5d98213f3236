package buildkitd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/buildkitd"
	"bex.co/bex/internal/buildkitd/buildkitdtest"
)

// The daemon listens on a socket only its user can open, in a directory
// only its user can enter, answers buildctl there with its runc worker, and
// is gone after Stop.
func TestStart(t *testing.T) {
	bin, ctl := buildkitdtest.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "buildkit")
	d, err := buildkitd.Start(ctx, buildkitd.Options{Dir: dir, BuildKitd: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	sock := filepath.Join(dir, "buildkitd.sock")
	if d.Addr() != "unix://"+sock {
		t.Errorf("Addr() = %q, want unix://%s", d.Addr(), sock)
	}
	for path, want := range map[string]os.FileMode{sock: 0o600, dir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %o, want %o", path, got, want)
		}
	}
	out, err := exec.Command(ctl, "--addr", d.Addr(), "debug", "workers", "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("buildctl debug workers: %v\n%s", err, out)
	}
	fields := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{"BuildKit: github.com/moby/buildkit v0.34.2", "worker.executor: oci", "worker.oci.process-mode: sandbox"} {
		if !strings.Contains(fields, want) {
			t.Errorf("buildctl debug workers lacks %q:\n%s", want, out)
		}
	}
	d.Stop()
	if _, err := exec.Command(ctl, "--addr", d.Addr(), "--timeout", "2", "debug", "workers").CombinedOutput(); err == nil {
		t.Error("buildkitd still answers after Stop")
	}
}

func TestMissingRunc(t *testing.T) {
	m := buildkitd.Missing("/nonexistent/runc")
	if !strings.Contains(m, "apt-get install runc") {
		t.Errorf("Missing = %q, want it to say how to install runc", m)
	}
	if _, err := buildkitd.Start(context.Background(), buildkitd.Options{Dir: t.TempDir(), BuildKitd: "/nonexistent/buildkitd", Runc: "/nonexistent/runc"}); err == nil || !strings.Contains(err.Error(), "runc") {
		t.Errorf("Start without runc: err = %v, want it to name runc", err)
	}
}
