package kubebin

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/test/platformtest"
)

// helloRecipe is a build module with no dependencies, so the cache and lock
// logic can be tested without building Kubernetes.
func helloRecipe(greeting string) *recipe {
	return &recipe{
		name: "hello", version: "v1", pkg: ".", ldflags: "-s -w", estimate: "seconds",
		files: map[string][]byte{
			"go.mod":  []byte("module example.com/hello\n\ngo 1.22\n"),
			"main.go": []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"" + greeting + "\") }\n"),
		},
	}
}

func TestConcurrentCallersBuildOnce(t *testing.T) {
	cache := t.TempDir()
	var progress platformtest.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		// Separate Builders, as separate processes would have.
		b, err := NewBuilder(Options{CacheDir: cache, Progress: &progress})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = b.build(ctx, helloRecipe("hi"))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if paths[i] != paths[0] {
			t.Fatalf("callers got different paths: %q and %q", paths[0], paths[i])
		}
	}
	if n := strings.Count(progress.String(), "building hello v1 from"); n != 1 {
		t.Fatalf("%d builds started, want 1; progress:\n%s", n, progress.String())
	}
	if out, err := exec.Command(paths[0]).Output(); err != nil || string(out) != "hi" {
		t.Fatalf("built binary printed %q (%v), want \"hi\"", out, err)
	}
}

func TestChangedRecipeRebuilds(t *testing.T) {
	cache := t.TempDir()
	var progress platformtest.SyncBuffer
	b, err := NewBuilder(Options{CacheDir: cache, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.build(ctx, helloRecipe("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.build(ctx, helloRecipe("one")); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "building hello v1 from"); n != 1 {
		t.Fatalf("an unchanged recipe was built %d times, want once", n)
	}
	p, err := b.build(ctx, helloRecipe("two"))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(p).Output(); string(out) != "two" {
		t.Fatalf("after a recipe change the binary prints %q, want \"two\"", out)
	}
}

func TestFailedBuildReportsCompilerOutput(t *testing.T) {
	b, err := NewBuilder(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := helloRecipe("x")
	r.files["main.go"] = []byte("package main\n\nfunc main() { undefinedThing() }\n")
	_, err = b.build(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("err = %v, want the compiler's message naming undefinedThing", err)
	}
}

func TestPinnedVersions(t *testing.T) {
	got := strings.Join(KubeVersions(), ",")
	if got != "1.35.4,1.36.3,1.37.2" {
		t.Fatalf("KubeVersions() = %s", got)
	}
	b, _ := NewBuilder(Options{CacheDir: t.TempDir()})
	if _, err := b.KubeAPIServer(context.Background(), "1.30.0"); err == nil || !strings.Contains(err.Error(), "not pinned") {
		t.Fatalf("unpinned version: err = %v", err)
	}
}

// TestKubeComponents: kube-controller-manager and kube-scheduler come from
// the pinned kube-apiserver sources, at the pinned versions only, and a
// component bex does not build is refused before anything is built.
func TestKubeComponents(t *testing.T) {
	b, _ := NewBuilder(Options{CacheDir: t.TempDir()})
	ctx := context.Background()
	if _, err := b.KubeComponent(ctx, "kube-proxy", "1.37.2"); err == nil || !strings.Contains(err.Error(), "kube-controller-manager, kube-scheduler") {
		t.Fatalf("unknown component: err = %v", err)
	}
	for _, c := range KubeComponents() {
		if _, err := b.KubeComponent(ctx, c, "1.30.0"); err == nil || !strings.Contains(err.Error(), c+" 1.30.0 is not pinned") {
			t.Fatalf("%s at an unpinned version: err = %v", c, err)
		}
	}
}
