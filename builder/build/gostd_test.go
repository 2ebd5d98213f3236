package build_test

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
)

// goStdDir is where the tests keep the warmed standard library, in the
// user's cache directory so that reruns do not compile it again.
func goStdDir(t *testing.T) string {
	t.Helper()
	uc, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(uc, "bex-test", "go-std")
}

// warmGo runs b's warm-up and returns the warmed go-build directory.
func warmGo(t *testing.T, b *build.Builder, std string) string {
	t.Helper()
	var progress platformtest.SyncBuffer
	if err := b.WarmGo(t.Context(), &progress); err != nil {
		t.Fatalf("WarmGo: %v\n%s", err, progress.String())
	}
	t.Logf("warm-up:\n%s", progress.String())
	dirs, _ := filepath.Glob(filepath.Join(std, "go-*", "go-build"))
	if len(dirs) == 0 {
		t.Fatalf("no warmed cache under %s", std)
	}
	if !strings.Contains(progress.String(), "Go standard library cache ready") {
		t.Errorf("the warm-up did not say it was ready:\n%s", progress.String())
	}
	return dirs[0]
}

// files lists the regular files under dir by their path relative to it.
func files(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A tenant's first Go build after the warm-up compiles none of the
// standard library: the packages it needs are in its cache already, so
// what the build adds is the app's own package and the link. Without the
// copy, the build adds the compiled standard library (hundreds of files).
func TestFirstGoBuildUsesTheWarmedStandardLibrary(t *testing.T) {
	std := goStdDir(t)
	cacheDir := t.TempDir()
	b := newBuilder(t, func(o *build.Options) { o.CacheDir = cacheDir; o.GoStdCacheDir = std })
	warmed := warmGo(t, b, std)
	shared := files(t, warmed)

	_, log, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(log, "-----> Go's standard library:") {
		t.Errorf("the build log does not say the standard library was copied")
	}
	tenant := files(t, filepath.Join(cacheDir, "tenants", "acme", "go-build"))
	var added []string
	for f := range tenant {
		if !shared[f] && !strings.HasPrefix(filepath.Base(f), ".bex-std-") && f != "trim.txt" {
			added = append(added, f)
		}
	}
	if len(tenant) < len(shared) {
		t.Errorf("the tenant's cache holds %d files, fewer than the %d warmed", len(tenant), len(shared))
	}
	// The app's package and the link: a handful of entries; the standard
	// library net/http needs is several hundred.
	if len(added) > 40 {
		t.Errorf("the first build compiled %d cache entries of its own; want the standard library from the warmed cache", len(added))
	}
	t.Logf("warmed %d files; the build added %d", len(shared), len(added))

	// Once copied, not again.
	_, log, err = buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain + "\n// again\n"}, nil)
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if strings.Contains(log, "-----> Go's standard library:") {
		t.Errorf("the second build copied the standard library again")
	}
}

// The tenant's cache is written by its own builds, in their sandbox: a
// directory of it that is a link to elsewhere on the machine does not make
// the copy, which the builder makes as root, write there. The rest is
// copied.
func TestGoStdCopyStaysInTheTenantsCache(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	std := goStdDir(t)
	cacheDir := t.TempDir()
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m; o.CacheDir = cacheDir; o.GoStdCacheDir = std })
	warmed := warmGo(t, b, std)
	var sub string
	for f := range files(t, warmed) {
		if d := filepath.Dir(f); d != "." {
			sub = d
			break
		}
	}
	victim := t.TempDir()
	// A build of another stack plants the link in the tenant's cache (on
	// the tenant's cache disk, which only its builds mount) before its
	// first Go build.
	plant := `mkdir -p "$GOCACHE" && ln -s ` + victim + ` "$GOCACHE/` + sub + `" && ls -l "$GOCACHE"`
	_, log, err := buildRepo(t, b, map[string]string{"index.html": "hi"}, func(r *build.Request) { r.Tenant, r.Command = "mallory", plant })
	if err != nil {
		t.Fatalf("the build that plants the link: %v", err)
	}
	if !strings.Contains(log, victim) {
		t.Fatalf("the link was not planted:\n%s", log)
	}
	_, log, err = buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, func(r *build.Request) { r.Tenant = "mallory" })
	if err != nil {
		t.Logf("Build: %v", err)
	}
	if !strings.Contains(log, "-----> Go's standard library:") {
		t.Errorf("the Go build did not copy the rest of the standard library")
	}
	if got := files(t, victim); len(got) > 0 {
		t.Errorf("the copy wrote %d files through the tenant's link into %s", len(got), victim)
	}
}

// digest hashes every file under dir, by name and content.
func digest(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		io.WriteString(h, p+"\n")
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// A hostile tenant's build overwrites every compiled package in its Go
// cache: the warmed standard library, which the next tenant's build copies,
// stays as it was, and that tenant's app builds and runs.
func TestGoStdCannotBePoisonedByATenant(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	std := goStdDir(t)
	cacheDir := t.TempDir()
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m; o.CacheDir = cacheDir; o.GoStdCacheDir = std })
	warmed := warmGo(t, b, std)
	before := digest(t, warmed)

	poison := `n=0; for f in "$GOCACHE"/*/*-d; do echo poisoned > "$f" && n=$((n+1)); done; echo "poisoned $n"; ` +
		`mkdir -p bin && printf '#!/bin/sh\nexit 0\n' > bin/app && chmod +x bin/app`
	_, log, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, func(r *build.Request) {
		r.Tenant, r.Command = "mallory", poison
	})
	if err != nil {
		t.Fatalf("the hostile build: %v", err)
	}
	if !strings.Contains(log, "poisoned ") || strings.Contains(log, "poisoned 0\n") {
		t.Fatalf("the hostile build found nothing to overwrite in its cache:\n%s", log)
	}
	if digest(t, warmed) != before {
		t.Fatalf("a tenant's build changed the warmed standard library in %s", warmed)
	}
	res, _, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, func(r *build.Request) { r.Tenant = "acme" })
	if err != nil {
		t.Fatalf("Build after the hostile one: %v", err)
	}
	if body := serveApp(t, res, "web"); body != "hello from go" {
		t.Errorf("GET / = %q, want %q", body, "hello from go")
	}
}
