// Package buildkitdtest starts a real buildkitd with runc for tests of
// Dockerfile builds, and gives them a static test program and a base image
// made of it in the platform registry, so Dockerfiles can RUN steps and
// start FROM a registry image without a network beyond the machine.
package buildkitdtest

import (
	"bytes"
	"context"
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"bex.co/bex/internal/buildkitd"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/testlayer"
)

// Daemon is a buildkitd started for one test.
type Daemon struct {
	// Addr is the daemon's address, for build.Options.BuildKitAddr.
	Addr string
	// BuildCtl is the pinned buildctl, for build.Options.BuildCtl.
	BuildCtl string
}

// Binaries returns the pinned buildkitd and buildctl, built first when the
// cache lacks them. It skips the test when not root (buildkitd with runc
// needs root; CI runs as root) and fails it when runc is missing.
func Binaries(t testing.TB) (buildkitdPath, buildctlPath string) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("skipping: buildkitd with runc runs as root, and this test runs as uid %d (CI runs it as root)", uid)
	}
	if m := buildkitd.Missing(""); m != "" {
		t.Fatalf("cannot run buildkitd: %s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b, err := kubebin.NewBuilder(kubebin.Options{Progress: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := b.Tool(ctx, kubebin.BuildKitd)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := b.Tool(ctx, kubebin.BuildCtl)
	if err != nil {
		t.Fatal(err)
	}
	return bin, ctl
}

// Start starts a buildkitd in a directory of the test's, stopped when the
// test ends, as Binaries says.
func Start(t testing.TB) Daemon {
	t.Helper()
	bin, ctl := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := buildkitd.Start(ctx, buildkitd.Options{Dir: filepath.Join(t.TempDir(), "buildkit"), BuildKitd: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(d.Log()); err == nil {
				t.Logf("buildkitd log:\n%s", b)
			}
		}
	})
	return Daemon{Addr: d.Addr(), BuildCtl: ctl}
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

//go:embed tool.go.txt
var toolSource []byte

// Tool returns a static program (no libc, so it runs in an image FROM
// scratch) whose first argument says what it does:
//
//	tool echo WORDS...   prints WORDS
//	tool rm PATH         removes PATH
//	tool dial HOST:PORT  connects over TCP, exits 1 when it cannot
//	tool fail            prints "tool fails on purpose" and exits 3
//	tool serve           answers HTTP on $PORT with "hello from tool"
//	tool alloc N         allocates and touches N MiB of memory
//	tool threads N       starts N operating-system threads at once
//
// It is built in a directory of the test's (the Go build cache makes every
// build after the first quick).
func Tool(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for n, data := range map[string][]byte{"go.mod": []byte("module example.com/tool\n\ngo 1.22\n"), "main.go": toolSource} {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "tool", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test tool: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tool")
}

// What PushBase puts in the registry.
const (
	// BaseToolPath is where the base image keeps Tool.
	BaseToolPath = "/bin/tool"
	// BaseOldFile is a file of the base image, for a Dockerfile to remove.
	BaseOldFile = "/srv/old.txt"
	// BaseWorkDir is the base image's working directory.
	BaseWorkDir = "/srv"
	// BaseProcessLabel is a process label the base image carries, as an
	// image bex built would; a Dockerfile image inherits it, and must not
	// run it.
	BaseProcessLabel = "co.bex.process.web"
	BaseProcess      = "inherited from the base image"
)

// PushBase pushes to ref (registry/repository:tag) a base image of one
// layer: Tool at BaseToolPath, BaseOldFile, a working directory
// BaseWorkDir, PATH=/bin and the label BaseProcessLabel. It returns the
// reference by digest.
func PushBase(t testing.TB, ref string, opts ...remote.Option) string {
	t.Helper()
	tool, err := os.ReadFile(Tool(t))
	if err != nil {
		t.Fatal(err)
	}
	layer := testlayer.Layer(t, []testlayer.Entry{
		testlayer.Dir("bin"), testlayer.File("bin/tool", 0o755, tool),
		testlayer.Dir("srv"), testlayer.File("srv/old.txt", 0o644, []byte("from the base image\n")),
	})
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/bin"}, WorkingDir: BaseWorkDir, Labels: map[string]string{BaseProcessLabel: BaseProcess}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		t.Fatalf("pushing the base image: %v", err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return tag.Context().Digest(d.String()).String()
}
