package loopfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"bex.co/bex/internal/loopfs"
)

// loopsBacking lists the loop devices whose backing file is image.
func loopsBacking(t *testing.T, image string) []string {
	t.Helper()
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), image) {
			out = append(out, p)
		}
	}
	return out
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the loop device tests as root")
		}
		t.Skip("skipping: loop devices need root")
	}
}

// A writer below the mount runs out of space at the image's size, the
// image takes on its disk no more than that, and unmounting detaches the
// loop device.
func TestWritesStopAtTheImagesSize(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	image, mnt := filepath.Join(dir, "fs.ext4"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	if err := loopfs.Make(t.Context(), image, size); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Mount(image, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Unmount(mnt) })
	if ok, err := loopfs.Mounted(mnt); err != nil || !ok {
		t.Fatalf("Mounted = %v, %v after Mount", ok, err)
	}
	if n := len(loopsBacking(t, image)); n != 1 {
		t.Fatalf("%d loop devices back the image, want 1", n)
	}

	f, err := os.Create(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var written int64
	for written < 4*size {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("writing: %v, want ENOSPC", err)
			}
			break
		}
	}
	f.Close()
	if written >= size {
		t.Fatalf("wrote %d bytes into a file system of %d", written, size)
	}
	u, err := loopfs.UsageOf(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Full() {
		t.Errorf("usage after ENOSPC = %+v, want full", u)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(image, &st); err != nil {
		t.Fatal(err)
	}
	if onDisk := st.Blocks * 512; onDisk > size+size/8 {
		t.Errorf("the image takes %d bytes on its disk, past its size %d", onDisk, size)
	}

	if err := loopfs.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	if ok, _ := loopfs.Mounted(mnt); ok {
		t.Error("still mounted after Unmount")
	}
	if l := loopsBacking(t, image); len(l) != 0 {
		t.Errorf("loop devices still back the image after Unmount: %v", l)
	}
	// The file system keeps what was written: mounted again, it is full.
	if err := loopfs.Mount(image, mnt); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(mnt, "big")); err != nil || st.Size() != written {
		t.Errorf("after a second mount: %v, %v; want the %d bytes written", st, err, written)
	}
	if err := loopfs.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
}

// A scratch mount never flushes to the disk (nobarrier), a plain one
// does; both are nosuid and nodev.
func TestMountScratchSkipsFlushes(t *testing.T) {
	requireRoot(t)
	for _, c := range []struct {
		name      string
		mount     func(image, dir string) error
		nobarrier bool
	}{{"Mount", loopfs.Mount, false}, {"MountScratch", loopfs.MountScratch, true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			image, mnt := filepath.Join(dir, "fs.ext4"), filepath.Join(dir, "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := loopfs.Make(t.Context(), image, loopfs.MinSize); err != nil {
				t.Fatal(err)
			}
			if err := c.mount(image, mnt); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = loopfs.Unmount(mnt) })
			opts := mountOptions(t, mnt)
			if got := slices.Contains(opts, "nobarrier"); got != c.nobarrier {
				t.Errorf("the mount's options are %q: nobarrier %v, want %v", opts, got, c.nobarrier)
			}
			for _, want := range []string{"nosuid", "nodev"} {
				if !slices.Contains(opts, want) {
					t.Errorf("the mount's options are %q, want %s", opts, want)
				}
			}
			if err := loopfs.Unmount(mnt); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// mountOptions are the options, the mount's and its file system's, that
// /proc/self/mountinfo gives the mount at dir.
func mountOptions(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [tags] - type source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		fields, super := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || fields[4] != dir || len(super) < 3 {
			continue
		}
		return append(strings.Split(fields[5], ","), strings.Split(super[2], ",")...)
	}
	t.Fatalf("nothing is mounted at %s", dir)
	return nil
}

// Make refuses an image too small to hold ext4's tables, saying so.
func TestMakeRefusesATinyImage(t *testing.T) {
	err := loopfs.Make(t.Context(), filepath.Join(t.TempDir(), "fs.ext4"), 1<<20)
	if err == nil || !strings.Contains(err.Error(), "too small") {
		t.Fatalf("Make of 1 MiB: %v, want too small", err)
	}
}
