package pipeline_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/buildkitd/buildkitdtest"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/test/platformtest"
)

// recorder is the runtime a sandboxing driver will be: it takes every
// release and keeps the last, so the test reads what the pipeline handed
// over. Everything else goes to the process driver.
type recorder struct {
	runtime.Driver
	mu   sync.Mutex
	last runtime.Release
}

func (r *recorder) Deploy(_ context.Context, rel runtime.Release, _ io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = rel
	return rel.Validate()
}

func (r *recorder) release() runtime.Release {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// commitFiles writes files into the work tree, commits and pushes them to
// the bare repository, and returns the push of it. Files named tool are
// executable.
func (e *env) commitFiles(t *testing.T, files map[string]string) gitserver.Push {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.repo, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	platformtest.Git(t, e.repo, "add", "-A")
	platformtest.Git(t, e.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "dockerfile")
	platformtest.Git(t, e.repo, "push", "-q", e.bare, "main")
	return gitserver.Push{
		Tenant: e.tenant, App: e.name, Branch: "main", Actor: "user:test",
		New: platformtest.Git(t, e.repo, "rev-parse", "HEAD")[:40], RepoDir: e.bare,
	}
}

// A Dockerfile app, FROM an image in the platform registry and FROM
// scratch, built by a real buildkitd: the pipeline hands the runtime a
// release of the image's whole root filesystem, its working directory, its
// own environment, and its ENTRYPOINT and CMD as the web process's
// arguments. The process driver refuses it, saying it needs the sandbox,
// and the failure is the build's.
func TestDockerfileRelease(t *testing.T) {
	d := buildkitdtest.Start(t)
	e := newEnv(t, func(o *build.Options) { o.BuildKitAddr, o.BuildCtl = d.Addr, d.BuildCtl })
	base := buildkitdtest.PushBase(t, e.registry+"/base/tool:v1", remote.WithAuth(registry.Auth(registryToken)))
	tool, err := os.ReadFile(buildkitdtest.Tool(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Driver: e.rt}
	const binDir = "/platform/bin"
	sandboxed := e.pipelineWith(rec, binDir)

	for _, tc := range []struct {
		name       string
		dockerfile string
		workDir    string
		args       []string
		env        map[string]string
		files      []string
	}{
		{
			name:       "FROM the platform registry",
			dockerfile: "FROM " + base + "\nENV GREETING=hi\nCOPY Dockerfile /srv/Dockerfile\nENTRYPOINT [\"tool\"]\nCMD [\"serve\"]\n",
			workDir:    buildkitdtest.BaseWorkDir,
			args:       []string{"tool", "serve"},
			env:        map[string]string{"PATH": "/bin", "GREETING": "hi"},
			files:      []string{"bin/tool", "srv/Dockerfile", "srv/old.txt"},
		},
		{
			name:       "FROM scratch",
			dockerfile: "FROM scratch\nCOPY tool /app/tool\nWORKDIR /app\nCMD [\"/app/tool\", \"serve\"]\n",
			workDir:    "/app",
			args:       []string{"/app/tool", "serve"},
			// BuildKit gives an image FROM scratch the default PATH.
			env:   map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			files: []string{"app/tool"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			push := e.commitFiles(t, map[string]string{"Dockerfile": tc.dockerfile, "tool": string(tool)})

			_, err := e.a.Deploy(t.Context(), push, testWriter{t})
			if err == nil || !strings.Contains(err.Error(), "a Dockerfile image needs the sandbox") {
				t.Fatalf("the process driver ran a Dockerfile image: err %v", err)
			}
			if lb, err := e.a.LastBuild(t.Context(), e.tenant, e.name); err != nil || !lb.Failed || !strings.Contains(lb.Message, "needs the sandbox") {
				t.Errorf("last build %+v (%v), want it failed with the refusal", lb, err)
			}

			if _, err := sandboxed.Deploy(t.Context(), push, testWriter{t}); err != nil {
				t.Fatalf("deploying to the recording runtime: %v", err)
			}
			rel := rec.release()
			if rel.RootFS == "" || rel.Dir != "" {
				t.Fatalf("release RootFS %q, Dir %q: want the root filesystem and no app directory", rel.RootFS, rel.Dir)
			}
			if rel.WorkDir != tc.workDir {
				t.Errorf("WorkDir %q, want %q", rel.WorkDir, tc.workDir)
			}
			web := rel.Processes[runtime.WebProcess]
			if !slices.Equal(web.Args, tc.args) || web.Command != "" || web.Replicas != 1 || len(rel.Processes) != 1 {
				t.Errorf("processes %+v, want web running %q once, with no shell", rel.Processes, tc.args)
			}
			if len(rel.ImageEnv) != len(tc.env) {
				t.Errorf("ImageEnv %v, want the image's own %v", rel.ImageEnv, tc.env)
			}
			for k, v := range tc.env {
				if rel.ImageEnv[k] != v {
					t.Errorf("ImageEnv %v, want the image's own %v (the platform's %s kept out)", rel.ImageEnv, tc.env, binDir)
				}
			}
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(rel.RootFS, f)); err != nil {
					t.Errorf("the release's root lacks %s: %v", f, err)
				}
			}
			if !strings.HasPrefix(rel.Image, e.registry+"/"+e.tenant+"/"+e.name+"@sha256:") {
				t.Errorf("release image %q is not the app's image in the platform registry", rel.Image)
			}
		})
	}
}
