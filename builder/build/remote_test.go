package build_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/buildagent"
)

// loopAgent is a build agent served on loopback from a directory of its
// own: the real agent, without the Pod around it.
type loopAgent struct {
	*buildagent.Client
	srv    *httptest.Server
	closed *atomic.Int32
}

func (a loopAgent) Close() error {
	a.srv.Close()
	a.closed.Add(1)
	return nil
}

// remoteBuilder is a builder whose steps run in agents of dir's: each
// build's in a directory of its own, dir/<n>.
func remoteBuilder(t *testing.T, dir string, mod ...func(*build.Options)) (*build.Builder, *atomic.Int32) {
	t.Helper()
	var started, closed atomic.Int32
	remote := func(ctx context.Context, tenant, app string) (build.RemoteAgent, error) {
		work := filepath.Join(dir, tenant+"-"+app+"-"+string(rune('a'+started.Add(1))))
		a, err := buildagent.New(buildagent.Options{Dir: work, Token: "build-token"})
		if err != nil {
			return nil, err
		}
		srv := httptest.NewServer(a.Handler())
		return loopAgent{Client: &buildagent.Client{URL: srv.URL, Token: "build-token", Dir: work}, srv: srv, closed: &closed}, nil
	}
	b := newBuilder(t, append([]func(*build.Options){func(o *build.Options) { o.Remote = remote }}, mod...)...)
	return b, &closed
}

// A Go app's steps run in the agent's directory, with its HOME and Go
// cache, and the image holds what they built there.
func TestGoAppBuildsThroughAnAgent(t *testing.T) {
	dir := t.TempDir()
	b, closed := remoteBuilder(t, dir)
	// A program of the runtime alone: an agent's Go cache starts empty,
	// and net/http's packages would take a minute to compile.
	const small = "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"built in the agent\\n\") }\n"
	res, log, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": small}, func(r *build.Request) {
		r.Command = `echo "$PWD $HOME" > where.txt && go build -o bin/app .`
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(log, "-----> Starting the build's pod\n") {
		t.Errorf("the log does not say the steps went to an agent")
	}
	unpacked := filepath.Join(t.TempDir(), "release")
	if _, err := build.Unpack(t.Context(), res.Image, unpacked, b.Keychain()); err != nil {
		t.Fatal(err)
	}
	where, err := os.ReadFile(filepath.Join(unpacked, "where.txt"))
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "acme-testgoappbuildsthroughanagent-b")
	if want := agent + "/app " + agent + "/home\n"; string(where) != want {
		t.Errorf("the step ran in %q, want %q (the agent's)", where, want)
	}
	if out, err := exec.Command(filepath.Join(unpacked, "bin", "app")).CombinedOutput(); err != nil || string(out) != "built in the agent\n" {
		t.Errorf("the built program: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(agent, "cache", "go-build")); err != nil {
		t.Errorf("the Go build cache is not the agent's: %v", err)
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("the agent was closed %d times, want once", n)
	}
}

// A Python app's virtualenv, made in the agent's directory, runs from
// where its image is unpacked.
func TestPythonAppBuildsThroughAnAgent(t *testing.T) {
	b, _ := remoteBuilder(t, t.TempDir())
	res, _, err := buildRepo(t, b, map[string]string{
		"requirements.txt": "# nothing yet\n",
		"app.py":           pythonServer("import sys", `"hello from python in " + os.path.basename(os.environ["VIRTUAL_ENV"]) + " " + str(sys.prefix == os.environ["VIRTUAL_ENV"])`),
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if body := serveApp(t, res, "web"); body != "hello from python in .venv True" {
		t.Errorf("GET / = %q", body)
	}
}

// A step that fails in the agent fails the build as on the host: the
// command, its exit status, the end of its output; the agent is closed.
func TestStepFailureThroughAnAgent(t *testing.T) {
	b, closed := remoteBuilder(t, t.TempDir())
	_, _, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, func(r *build.Request) {
		r.Command = "echo boom; exit 3"
	})
	var ce *build.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("Build: %v; want a CommandError", err)
	}
	if ce.Command != "echo boom; exit 3" || !strings.Contains(ce.Tail, "boom") || ce.Err.Error() != "exit status 3" {
		t.Errorf("command %q, tail %q, err %v", ce.Command, ce.Tail, ce.Err)
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("the agent was closed %d times, want once", n)
	}
}

// The tree a build leaves is bounded as it comes back: a step that writes
// past WorkDiskSize fails the build saying so.
func TestTreeFromTheAgentIsBounded(t *testing.T) {
	b, _ := remoteBuilder(t, t.TempDir(), func(o *build.Options) { o.WorkDiskSize = 16 << 20 })
	_, _, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, func(r *build.Request) {
		r.Command = "head -c 20000000 /dev/zero > big"
	})
	if err == nil || !strings.Contains(err.Error(), "more than 16777216 bytes") {
		t.Fatalf("Build: %v; want the tree's limit", err)
	}
}
