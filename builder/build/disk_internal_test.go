package build

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"

	"bex.co/bex/internal/loopfs"
)

// TestWorkDiskThatCannotBeMadeUndoes: a work disk whose file system
// cannot be made (the build's context ended) fails the call with nothing
// to release, and leaves no image behind; it used to call the release it
// had just returned as nil, and panic.
func TestWorkDiskThatCannotBeMadeUndoes(t *testing.T) {
	d := &disks{builds: t.TempDir(), workSize: loopfs.MinSize, log: testr.New(t)}
	dir := filepath.Join(d.builds, "b1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	release, err := d.work(ctx, dir)
	if err == nil || release != nil {
		t.Fatalf("work with an ended context = %v, %v; want an error and no release", release != nil, err)
	}
	if _, err := os.Stat(dir + diskImageSuffix); !os.IsNotExist(err) {
		t.Errorf("the disk image is left behind: %v", err)
	}
}
