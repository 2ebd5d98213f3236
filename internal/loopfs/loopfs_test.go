package loopfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

// fill writes path in 1 MiB chunks until it holds limit bytes or the
// write fails with ENOSPC (any other error fails the test), and returns
// the bytes written.
func fill(t *testing.T, path string, limit int64) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var written int64
	for written < limit {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("writing: %v, want ENOSPC", err)
			}
			break
		}
	}
	return written
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

	written := fill(t, filepath.Join(mnt, "big"), 4*size)
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

// A copy of an empty image takes on its disk what the template does, not
// its size; two copies mount at once, empty, each bounded by the size;
// what is written into one reaches neither the other nor the template,
// and a copy over an image that held data leaves none of it.
func TestCopiesAreEmptySparseAndApart(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	const size = 64 << 20
	template := filepath.Join(dir, "empty.ext4")
	if err := loopfs.Make(t.Context(), template, size); err != nil {
		t.Fatal(err)
	}
	onDisk := func(path string) int64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	templateOnDisk := onDisk(template)
	mounts := map[string]string{}
	for _, name := range []string{"a", "b"} {
		image, mnt := filepath.Join(dir, name+".ext4"), filepath.Join(dir, name)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := loopfs.Copy(template, image); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(image); err != nil || st.Size() != size {
			t.Fatalf("copy %s: %v, %v; want %d bytes", name, st, err, size)
		}
		if got, want := onDisk(image), onDisk(template); got > want || got == 0 {
			t.Errorf("copy %s takes %d bytes on its disk, the template %d", name, got, want)
		}
		if err := loopfs.Mount(image, mnt); err != nil {
			t.Fatalf("mounting copy %s: %v", name, err)
		}
		t.Cleanup(func() { _ = loopfs.Unmount(mnt) })
		mounts[name] = mnt
	}
	if err := os.WriteFile(filepath.Join(mounts["a"], "only-a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if written := fill(t, filepath.Join(mounts["a"], "big"), 2*size); written >= size {
		t.Errorf("wrote %d bytes into a copy of %d", written, size)
	}
	if entries, err := os.ReadDir(mounts["b"]); err != nil || slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != "lost+found" }) {
		t.Errorf("copy b holds %v, %v; want it empty", entries, err)
	}
	if err := loopfs.Unmount(mounts["a"]); err != nil {
		t.Fatal(err)
	}
	// a's image, copied over again, is empty.
	if err := loopfs.Copy(template, filepath.Join(dir, "a.ext4")); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Mount(filepath.Join(dir, "a.ext4"), mounts["a"]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mounts["a"], "only-a")); !os.IsNotExist(err) {
		t.Errorf("a copy over a used image kept its files: %v", err)
	}
	if u, err := loopfs.UsageOf(mounts["a"]); err != nil || u.Used() > 0.1 {
		t.Errorf("a copy over a used image: usage %+v, %v; want it empty", u, err)
	}
	if got := onDisk(template); got != templateOnDisk {
		t.Errorf("the template takes %d bytes on its disk after its copies were used, %d before", got, templateOnDisk)
	}
}

// BenchmarkMakeOrCopy makes an empty 4 GiB file system with Make and with
// Copy of a template, each iteration, and reports their ratio
// (make/copy): how much cheaper a build's work disk is copied.
func BenchmarkMakeOrCopy(b *testing.B) {
	dir := b.TempDir()
	const size = 4 << 30
	template := filepath.Join(dir, "empty.ext4")
	if err := loopfs.Make(b.Context(), template, size); err != nil {
		b.Fatal(err)
	}
	image := filepath.Join(dir, "image.ext4")
	var made, copied time.Duration
	for b.Loop() {
		start := time.Now()
		if err := loopfs.Make(b.Context(), image, size); err != nil {
			b.Fatal(err)
		}
		made += time.Since(start)
		start = time.Now()
		if err := loopfs.Copy(template, image); err != nil {
			b.Fatal(err)
		}
		copied += time.Since(start)
	}
	b.ReportMetric(float64(made.Microseconds())/float64(b.N), "make-µs/op")
	b.ReportMetric(float64(copied.Microseconds())/float64(b.N), "copy-µs/op")
	b.ReportMetric(float64(made)/float64(copied), "make/copy")
}
