package build_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/internal/steptime"
)

// mountsUnder lists the mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// loopsUnder lists the loop devices whose backing file is below dir.
func loopsUnder(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir+"/") {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}

// wrote is the byte count a step's "wrote N bytes" line reports.
var wrote = regexp.MustCompile(`wrote (\d+) bytes`)

// A build step that writes without end, in the build's work directory or
// in the tenant's caches, stops at the bound of that disk and fails the
// build saying so; the disks go with the build, and the tenant's next
// build works, on emptied caches.
func TestBuildThatFillsItsDiskFails(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	caches := t.TempDir()
	const bound = 64 << 20
	b := newBuilder(t, func(o *build.Options) {
		o.Sandbox = m
		o.CacheDir = caches
		o.WorkDiskSize = bound
		o.CacheDiskSize = bound
	})
	// 256 MiB, four times the bound; the step reports what it wrote.
	fill := func(path string) string {
		return "head -c 268435456 /dev/zero > " + path + "; echo wrote $(wc -c < " + path + ") bytes; test $(wc -c < " + path + ") -eq 268435456"
	}
	for _, c := range []struct{ name, path, says string }{
		{"work directory", "big", "the build wrote more than 64 MiB to its work directory"},
		{"caches", "$GOCACHE-big", "the build wrote more than 64 MiB to the tenant's build caches"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, log, err := buildRepo(t, b, map[string]string{"index.html": "hi\n"}, func(r *build.Request) { r.Command = fill(c.path) })
			var de *build.DiskFullError
			if !errors.As(err, &de) {
				t.Fatalf("Build: %v, want a *DiskFullError", err)
			}
			if !strings.Contains(log, " !     Build failed: "+c.says) {
				t.Errorf("the build log does not say %q", c.says)
			}
			sm := wrote.FindStringSubmatch(log)
			if sm == nil {
				t.Fatalf("the step did not report what it wrote")
			}
			if n, _ := strconv.ParseInt(sm[1], 10, 64); n >= bound {
				t.Errorf("the step wrote %d bytes, past the bound of %d", n, bound)
			}
		})
	}
	for _, dir := range []string{workRoot, caches} {
		if l := mountsUnder(t, dir); len(l) > 0 {
			t.Errorf("mounts left after the builds: %v", l)
		}
		if l := loopsUnder(t, dir); len(l) > 0 {
			t.Errorf("loop devices left after the builds: %v", l)
		}
	}
	if images, _ := filepath.Glob(filepath.Join(workRoot, "builds", "*.ext4")); len(images) > 0 {
		t.Errorf("builds' disk images left: %v", images)
	}

	res, log, err := buildRepo(t, b, map[string]string{"index.html": "hi\n"}, func(r *build.Request) { r.Command = "echo fine > out" })
	if err != nil {
		t.Fatalf("the next build: %v", err)
	}
	if !strings.Contains(log, "The build caches were full: starting with empty ones") {
		t.Errorf("the next build does not say its caches were emptied")
	}
	if res.Image == "" {
		t.Error("the next build has no image")
	}
}

// A checkout larger than the work directory's disk fails the build with
// the same message.
func TestCheckoutPastTheWorkDiskFails(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	b := newBuilder(t, func(o *build.Options) {
		o.Sandbox = m
		o.CacheDir = t.TempDir()
		o.WorkDiskSize = loopfs.MinSize
	})
	// A repeated byte compresses in git's objects to almost nothing: 24 MiB
	// of it expand past a 16 MiB disk at checkout. (Not zeros: git checks
	// runs of zeros out as holes.)
	files := map[string]string{"index.html": "hi\n"}
	for i := range 3 {
		files["blob"+strconv.Itoa(i)] = strings.Repeat("a", 8<<20)
	}
	_, log, err := buildRepo(t, b, files, nil)
	var de *build.DiskFullError
	if !errors.As(err, &de) {
		t.Fatalf("Build: %v, want a *DiskFullError", err)
	}
	if !strings.Contains(log, "the build wrote more than 16 MiB to its work directory") {
		t.Errorf("the build log does not say the checkout went past the disk")
	}
}

// What a builder that died left mounted, a new one unmounts and removes.
func TestNewSweepsDisksOfDeadBuilds(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	work, caches := t.TempDir(), t.TempDir()
	dir := filepath.Join(work, "builds", "acme-dead-1")
	cache := filepath.Join(caches, "tenants", "acme")
	for _, d := range []string{dir, cache, filepath.Join(caches, "disks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for image, at := range map[string]string{dir + ".ext4": dir, filepath.Join(caches, "disks", "acme.ext4"): cache} {
		if err := loopfs.Make(t.Context(), image, loopfs.MinSize); err != nil {
			t.Fatal(err)
		}
		if err := loopfs.Mount(image, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := build.New(build.Options{WorkRoot: work, CacheDir: caches, Registry: registryAddr, Sandbox: m}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{work, caches} {
		if l := mountsUnder(t, d); len(l) > 0 {
			t.Errorf("mounts left after New: %v", l)
		}
		if l := loopsUnder(t, d); len(l) > 0 {
			t.Errorf("loop devices left after New: %v", l)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dead build's work directory: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(caches, "disks", "acme.ext4")); err != nil {
		t.Errorf("the tenant's cache image: %v, want it kept", err)
	}
}

// A build's disks are a step of the push (made and mounted before the
// checkout, unmounted at the end), and its work directory, removed after
// the build, is mounted without flushes to the disk, unlike the tenant's
// caches, which outlive it.
func TestBuildDisksAreTimedAndScratch(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m; o.CacheDir = t.TempDir() })
	repo, commit := gitTree(t, map[string]string{"index.html": "hi\n"}, nil)
	ctx, tl := steptime.New(t.Context())
	var log strings.Builder
	_, err := b.Build(ctx, build.Request{
		Tenant: "acme", App: "disks", RepoDir: repo, Commit: commit,
		Command: `grep " ext4 " /proc/self/mountinfo; echo "GOCACHE=$GOCACHE"`,
	}, &log)
	t.Logf("build log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range tl.Steps() {
		names = append(names, st.Name)
	}
	if i, j := slices.Index(names, "disks"), slices.Index(names, "checkout"); i < 0 || j < 0 || i > j {
		t.Errorf("the build's steps are %q, want disks before checkout", names)
	}
	// mountinfo: id parent dev root mountpoint options ... - ext4 source
	// superoptions; the loop devices' are the build's disks.
	super := map[string]string{}
	var gocache string
	for _, line := range strings.Split(log.String(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "GOCACHE="); ok {
			gocache = v
		}
		pre, post, ok := strings.Cut(line, " - ext4 ")
		f, p := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(p) >= 2 && strings.HasPrefix(p[0], "/dev/loop") {
			super[f[4]] = p[1]
		}
	}
	if len(super) != 2 || gocache == "" {
		t.Fatalf("the build saw the loop mounts %v and GOCACHE %q, want two mounts (work directory, caches)", super, gocache)
	}
	for at, o := range super {
		caches := strings.HasPrefix(gocache, at+"/")
		if scratch := slices.Contains(strings.Split(o, ","), "nobarrier"); scratch == caches {
			t.Errorf("%s (caches: %v) is mounted %q: want nobarrier on the work directory only", at, caches, o)
		}
	}
}
