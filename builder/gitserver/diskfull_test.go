package gitserver

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"bex.co/bex/internal/loopfs"
)

// smallDisk mounts a file system of 16 MiB at a new directory and returns
// it; it is unmounted at the end of the test.
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the disk-full tests as root (loop devices)")
		}
		t.Skip("skipping: a small file system on a loop device needs root")
	}
	dir := t.TempDir()
	image, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Make(context.Background(), image, loopfs.MinSize); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Mount(image, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := loopfs.Unmount(mnt); err != nil {
			t.Error(err)
		}
	})
	return mnt
}

// fill takes the room of the file system at dir with the file name until
// no more than leave bytes are free, or none when leave is 0.
func fill(t *testing.T, dir, name string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := loopfs.UsageOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	if leave > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, u.Avail-leave); err != nil {
			t.Fatalf("filling %s to leave %d bytes: %v", dir, leave, err)
		}
		return
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); errors.Is(err, syscall.ENOSPC) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// What is left is smaller than a chunk: take it too.
	for {
		if _, err := f.Write(chunk[:512]); errors.Is(err, syscall.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// repoFiles lists the files of a bare repository, but for the ones git
// itself rewrites when it reads it (none, for fsck).
func repoFiles(t *testing.T, repoDir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, strings.TrimPrefix(path, repoDir+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// TestDiskFullPushStoresNothing: a push that finds the repositories' disk
// full is refused with a message saying so, leaves no file behind, does
// not move the branch nor call the Deployer, and the repository passes git
// fsck; the same push works once space is freed. A pack needs its own
// size on the disk once, not twice.
func TestDiskFullPushStoresNothing(t *testing.T) {
	root := smallDisk(t)
	e := newEnv(t, func(o *Options) { o.Root = filepath.Join(root, "repos") })
	dir := e.workTree()
	url := e.remote("http", "web")
	e.mustGit(dir, "push", "-q", url, "main")
	good := e.mustGit(dir, "rev-parse", "HEAD")
	repoDir := e.srv.RepoDir("acme", "web")
	before := repoFiles(t, repoDir)

	const packSize = 4 << 20
	big := make([]byte, packSize) // random: the pack is as large
	_, _ = rand.Read(big)
	e.commit(dir, "blob.bin", string(big))

	fill(t, root, "filler", 0)
	for _, transport := range transports {
		out, err := e.git(dir, "push", e.remote(transport, "web"), "main")
		if err == nil {
			t.Fatalf("%s: a push to a full disk succeeded:\n%s", transport, out)
		}
		assertContains(t, out,
			"remote: Push rejected: the platform's disk is full; the push was not stored and main was not updated",
			"the platform's disk is full; the push was not stored")
		if got := e.lsRemote(url)["refs/heads/main"]; got != good {
			t.Errorf("%s: server main = %s after a push to a full disk, want %s", transport, got, good)
		}
		if after := repoFiles(t, repoDir); !slices.Equal(after, before) {
			t.Errorf("%s: a push to a full disk left files: before %q, after %q", transport, before, after)
		}
		if out, err := e.git(e.home, "--git-dir", repoDir, "fsck", "--strict"); err != nil {
			t.Errorf("%s: git fsck after a push to a full disk: %v\n%s", transport, err, out)
		}
	}
	if n := len(e.deployer.pushes()); n != 1 {
		t.Errorf("Deploy called %d times, want once (the first push)", n)
	}

	// Room for the pack once and a half: it is received, then moved in
	// place, not copied.
	if err := os.Remove(filepath.Join(root, "filler")); err != nil {
		t.Fatal(err)
	}
	fill(t, root, "filler", packSize*3/2)
	if out, err := e.git(dir, "push", url, "main"); err != nil {
		t.Fatalf("push with room for the pack once and a half: %v\n%s", err, out)
	}
	if got, want := e.lsRemote(url)["refs/heads/main"], e.mustGit(dir, "rev-parse", "HEAD"); got != want {
		t.Errorf("server main = %s, want %s", got, want)
	}
	for _, f := range repoFiles(t, repoDir) {
		if strings.Contains(f, "incoming-") || strings.Contains(f, "tmp_") {
			t.Errorf("a temporary file is left in the repository: %s", f)
		}
	}
	if out, err := e.git(e.home, "--git-dir", repoDir, "fsck", "--strict"); err != nil {
		t.Errorf("git fsck after the push: %v\n%s", err, out)
	}
	if out, err := e.git(e.home, "clone", "-q", url, filepath.Join(e.home, "clone")); err != nil {
		t.Errorf("cloning the pushed app: %v\n%s", err, out)
	}
}
