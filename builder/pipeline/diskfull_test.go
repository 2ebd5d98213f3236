package pipeline_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"bex.co/bex/internal/loopfs"
)

// TestDiskFullUnderReleases: a release that the releases directory's full
// disk has no room for fails saying so, leaves nothing half unpacked, and
// the previous release keeps serving; once there is room again, the next
// push releases.
func TestDiskFullUnderReleases(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	ctx := t.Context()
	e := newEnv(t)
	pl, releases := e.retaining(20)
	if err := os.MkdirAll(releases, 0o755); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(t.TempDir(), "releases.ext4")
	if err := loopfs.Make(ctx, image, loopfs.MinSize); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Mount(image, releases); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := loopfs.Unmount(releases); err != nil {
			t.Error(err)
		}
	})
	if _, err := pl.Deploy(ctx, e.commit(t, "v1", ""), io.Discard); err != nil {
		t.Fatalf("deploying v1: %v", err)
	}

	// Fill the disk: a file larger than it, written until no block is
	// left, then small files and directories for what the file system
	// frees once it is synced.
	filler := filepath.Join(releases, "filler")
	if err := os.Mkdir(filler, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(filler, "big"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 2*loopfs.MinSize))
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the releases disk: %v, want ENOSPC", err)
	}
	syscall.Sync()
	for i := 0; ; i++ {
		err := os.WriteFile(filepath.Join(filler, fmt.Sprintf("small-%d", i)), make([]byte, 4096), 0o644)
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatal(err)
		}
		syscall.Sync()
		if err := os.Mkdir(filepath.Join(filler, fmt.Sprintf("dir-%d", i)), 0o755); err == nil {
			continue
		}
		break
	}

	_, err = pl.Deploy(ctx, e.commit(t, "v2", ""), io.Discard)
	if err == nil {
		t.Fatal("a release went live on a full disk")
	}
	if want := "the platform's disk is full: release v2 could not be unpacked"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(releases, e.tenant, e.name, "v2")); err == nil {
		t.Error("the half-unpacked v2 is left in the releases directory")
	}
	if got := e.serving(t); got != 1 {
		t.Errorf("after the failed release the runtime serves v%d, want v1", got)
	}

	if err := os.RemoveAll(filler); err != nil {
		t.Fatal(err)
	}
	res, err := pl.Deploy(ctx, e.commit(t, "v3", ""), io.Discard)
	if err != nil {
		t.Fatalf("deploying once there is room: %v", err)
	}
	if got := e.serving(t); got != res.Release {
		t.Errorf("the runtime serves v%d, want v%d", got, res.Release)
	}
}
