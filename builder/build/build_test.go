package build_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/testtree"
	"bex.co/bex/internal/wheeltest"
	"bex.co/bex/test/platformtest"
)

// registryAddr is the platform registry every test pushes to, served from
// this package's TestMain.
var registryAddr string

// registryToken opens the test registry, as the platform registry's token
// does; registryAuth presents it to go-containerregistry.
const registryToken = "build-test-token"

var registryAuth = remote.WithAuth(registry.Auth(registryToken))

// workRoot and cacheDir are shared by the tests' builders; the cache lives
// in the user's cache directory so that reruns do not compile the standard
// library again. Builders with a sandbox keep their caches in images of
// their own, in sandboxCacheDir: they mount them over the tenants'
// directories.
var workRoot, cacheDir, sandboxCacheDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "bex-build-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	workRoot = filepath.Join(tmp, "work")
	if uc, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(uc, "bex-test", "build-cache")
		sandboxCacheDir = filepath.Join(uc, "bex-test", "build-cache-sandbox")
	}
	reg, err := registry.New(filepath.Join(tmp, "registry"), registryToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	registryAddr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Serve(ctx, l) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func newBuilder(t *testing.T, mod ...func(*build.Options)) *build.Builder {
	t.Helper()
	opts := build.Options{WorkRoot: workRoot, CacheDir: cacheDir, Registry: registryAddr, RegistryAuth: registry.Auth(registryToken)}
	for _, f := range mod {
		f(&opts)
	}
	b, err := build.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// gitRepo commits files with the real git and returns a bare repository
// holding the commit, and the commit's name. Files named *.sh are
// executable.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	return gitTree(t, files, nil)
}

// gitTree is gitRepo with symbolic links as well (path -> target).
func gitTree(t *testing.T, files, links map[string]string) (string, string) {
	t.Helper()
	work := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(work, "init", "-q", "-b", "main")
	testtree.Write(t, work, files, links)
	git(work, "add", "-A")
	git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "app")
	commit := git(work, "rev-parse", "HEAD")
	bare := filepath.Join(t.TempDir(), "app.git")
	git(work, "clone", "-q", "--bare", work, bare)
	return bare, commit
}

func buildRepo(t *testing.T, b *build.Builder, files map[string]string, edit func(*build.Request)) (build.Result, string, error) {
	t.Helper()
	return buildTree(t, b, files, nil, edit)
}

// buildTree is buildRepo with symbolic links in the repository as well.
func buildTree(t *testing.T, b *build.Builder, files, links map[string]string, edit func(*build.Request)) (build.Result, string, error) {
	t.Helper()
	repo, commit := gitTree(t, files, links)
	req := build.Request{Tenant: "acme", App: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), RepoDir: repo, Commit: commit}
	if len(req.App) > 40 {
		req.App = req.App[:40]
	}
	req.App = strings.Trim(strings.ReplaceAll(req.App, "_", "-"), "-")
	if edit != nil {
		edit(&req)
	}
	var log platformtest.SyncBuffer
	res, err := b.Build(context.Background(), req, &log)
	t.Logf("build log:\n%s", log.String())
	return res, log.String(), err
}

// serveApp unpacks res and runs its process proc with PORT set, and returns
// the body of GET /.
func serveApp(t *testing.T, res build.Result, proc string, extraPath ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "release")
	cfg, err := build.Unpack(context.Background(), res.Image, dir, newBuilder(t).Keychain())
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if cfg.Processes[proc] != res.Processes[proc] {
		t.Errorf("image process %s = %q, build result says %q", proc, cfg.Processes[proc], res.Processes[proc])
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()

	env := append([]string{"PORT=" + port, "HOME=" + dir}, cfg.Env...)
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + strings.Join(append([]string{v}, extraPath...), ":")
		}
	}
	cmd := exec.Command("/bin/sh", "-c", cfg.Processes[proc])
	cmd.Dir = cfg.WorkingDir
	cmd.Env = env
	var out platformtest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	var body string
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("process %q to answer on $PORT", cfg.Processes[proc]), func(ctx context.Context) error {
		select {
		case <-exited:
			t.Fatalf("process %q exited before answering: %s", cfg.Processes[proc], out.String())
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out.String())
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
		return nil
	})
	return body
}

const goMod = "module hello\n\ngo 1.22\n"

const goMain = `package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from go", os.Getenv("GREETING"))
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil); err != nil {
		panic(err)
	}
}
`

func TestGoApp(t *testing.T) {
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackGo {
		t.Errorf("stack %q, want go", res.Stack)
	}
	if want := registryAddr + "/acme/testgoapp@" + res.Digest; res.Image != want {
		t.Errorf("image %q, want %q", res.Image, want)
	}
	if res.Processes["web"] != "./bin/app" {
		t.Errorf("web process %q, want ./bin/app", res.Processes["web"])
	}
	for _, line := range []string{"-----> Go app detected", "-----> Building with go build"} {
		if !strings.Contains(log, line+"\n") {
			t.Errorf("log lacks %q", line)
		}
	}
	if body := serveApp(t, res, "web"); body != "hello from go" {
		t.Errorf("GET / = %q, want %q", body, "hello from go")
	}
	if entries, err := os.ReadDir(filepath.Join(workRoot, "builds")); err != nil || len(entries) != 0 {
		t.Errorf("work directories left behind: %v %v", entries, err)
	}
}

func TestGoCompileError(t *testing.T) {
	b := newBuilder(t)
	broken := strings.Replace(goMain, `fmt.Fprint(w,`, `fmt.Fprint(w, undefinedThing,`, 1)
	res, log, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": broken}, nil)
	if err == nil {
		t.Fatal("Build of code that does not compile succeeded")
	}
	if res.Stack != "go" || res.Image != "" {
		t.Errorf("the failed build's result is %+v, want only its stack, go", res)
	}
	for _, want := range []string{"go build -o bin/app .", "undefined: undefinedThing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if !strings.Contains(log, "undefined: undefinedThing") {
		t.Errorf("log lacks the compiler's message")
	}
	if !strings.Contains(log, " !     Build failed: go build -o bin/app . failed") {
		t.Errorf("log does not end with the failure")
	}
	var ce *build.CommandError
	if !errors.As(err, &ce) {
		t.Errorf("error is %T, want *build.CommandError", err)
	}
}

func TestProcfileOverridesCommand(t *testing.T) {
	b := newBuilder(t)
	res, _, err := buildRepo(t, b, map[string]string{
		"go.mod":   goMod,
		"main.go":  goMain,
		"Procfile": "# processes\nweb: GREETING=' via Procfile' ./bin/app\nworker: ./bin/app\n",
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	want := map[string]string{"web": "GREETING=' via Procfile' ./bin/app", "worker": "./bin/app"}
	if len(res.Processes) != 2 || res.Processes["web"] != want["web"] || res.Processes["worker"] != want["worker"] {
		t.Errorf("processes %v, want %v", res.Processes, want)
	}
	if body := serveApp(t, res, "web"); body != "hello from go via Procfile" {
		t.Errorf("GET / = %q", body)
	}
}

func TestStaticSite(t *testing.T) {
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "bex-static"), "bex.co/bex/cmd/bex-static")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building bex-static: %v\n%s", err, out)
	}
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, map[string]string{"index.html": "<h1>static</h1>\n", ".env": "SECRET=1\n"}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackStatic || res.Processes["web"] != "bex-static" {
		t.Errorf("stack %q processes %v, want static with web = bex-static", res.Stack, res.Processes)
	}
	if !strings.Contains(log, "-----> Static site detected") {
		t.Errorf("log lacks the detected stack")
	}
	if body := serveApp(t, res, "web", bin); body != "<h1>static</h1>\n" {
		t.Errorf("GET / = %q", body)
	}
}

func TestNodeAppWithoutDependencies(t *testing.T) {
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, map[string]string{
		"package.json": `{"name": "hello", "version": "1.0.0", "main": "server.js",
			"scripts": {"build": "node -e \"require('fs').writeFileSync('built.txt', 'built by npm run build')\""}}`,
		"server.js": `const fs = require('fs');
require('http').createServer((req, res) => res.end('hello from node, ' + fs.readFileSync('built.txt')))
  .listen(process.env.PORT, '127.0.0.1');
`,
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackNode || res.Processes["web"] != "node server.js" {
		t.Errorf("stack %q processes %v, want node with web = node server.js", res.Stack, res.Processes)
	}
	if !strings.Contains(log, "-----> Building with npm run build") {
		t.Errorf("log lacks the build script")
	}
	if body := serveApp(t, res, "web"); body != "hello from node, built by npm run build" {
		t.Errorf("GET / = %q", body)
	}
}

func TestPythonAppWithEmptyRequirements(t *testing.T) {
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, map[string]string{
		"requirements.txt": "# nothing yet\n",
		"app.py":           pythonServer("import sys", `"hello from python in " + os.path.basename(os.environ["VIRTUAL_ENV"]) + " " + str(sys.prefix == os.environ["VIRTUAL_ENV"])`),
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Stack != platformv1alpha1.StackPython || res.Processes["web"] != "python app.py" {
		t.Errorf("stack %q processes %v, want python with web = python app.py", res.Stack, res.Processes)
	}
	if !strings.Contains(log, "-----> Python app detected") {
		t.Errorf("log lacks the detected stack")
	}
	// The unpacked venv is used, from wherever it was unpacked.
	if body := serveApp(t, res, "web"); body != "hello from python in .venv True" {
		t.Errorf("GET / = %q", body)
	}
}

// pythonServer is an app.py that answers every GET with the value of
// body, a Python expression, after the imports.
func pythonServer(imports, body string) string {
	return `import os
from http.server import BaseHTTPRequestHandler, HTTPServer
` + imports + `

class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        body = (` + body + `).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Hello).serve_forever()
`
}

// TestPythonAppWithARequirement installs a requirement from a local wheel
// directory into the app's virtualenv with the toolchain's pip: the app
// imports it, and the virtualenv holds no pip of its own.
func TestPythonAppWithARequirement(t *testing.T) {
	wheels := t.TempDir()
	greeting := wheeltest.Wheel{Project: "bex-greeting", Module: "bex_greeting", Version: "1.0", Source: "def greet():\n    return 'hello from a wheel'\n"}
	if _, err := greeting.Write(wheels); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PIP_FIND_LINKS", wheels)
	t.Setenv("PIP_NO_INDEX", "1")
	b := newBuilder(t)
	res, log, err := buildRepo(t, b, map[string]string{
		"requirements.txt": "bex-greeting==1.0\n",
		"app.py":           pythonServer("import importlib.util\nfrom bex_greeting import greet", `greet() + ", pip in the venv: " + str(importlib.util.find_spec("pip") is not None)`),
	}, nil)
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log)
	}
	if !strings.Contains(log, "Installing requirements with pip") {
		t.Errorf("log lacks the pip step")
	}
	if body := serveApp(t, res, "web"); body != "hello from a wheel, pip in the venv: False" {
		t.Errorf("GET / = %q", body)
	}
}

func TestPythonIndexUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	t.Setenv("PIP_INDEX_URL", "http://"+closed+"/simple")
	t.Setenv("PIP_RETRIES", "1")
	t.Setenv("PIP_FIND_LINKS", "")
	t.Setenv("PIP_NO_INDEX", "")
	b := newBuilder(t)
	_, log, err := buildRepo(t, b, map[string]string{"requirements.txt": "left-pad-that-does-not-exist==1.0\n", "app.py": "print(1)\n"}, nil)
	if err == nil {
		t.Fatal("Build succeeded without a reachable index")
	}
	for _, want := range []string{"pip install -r requirements.txt failed", "pip could not reach its package index (http://" + closed + "/simple)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if !strings.Contains(log, "Installing requirements with pip") {
		t.Errorf("log lacks the pip step")
	}
}

func TestDockerfileWithoutBuildKit(t *testing.T) {
	b := newBuilder(t)
	_, log, err := buildRepo(t, b, map[string]string{"Dockerfile": "FROM scratch\n", "go.mod": goMod, "main.go": goMain}, nil)
	if !errors.Is(err, build.ErrNoBuildKit) {
		t.Fatalf("error %v, want the BuildKit refusal", err)
	}
	const want = "Dockerfile builds need BuildKit: set --buildkit-addr; or remove the Dockerfile to use stack detection"
	if err.Error() != want || !strings.Contains(log, want) {
		t.Errorf("error %q, want %q in the error and the log", err, want)
	}
}

func TestDetectionFailureNamesFiles(t *testing.T) {
	b := newBuilder(t)
	_, _, err := buildRepo(t, b, map[string]string{"README.md": "hi\n"}, nil)
	if err == nil {
		t.Fatal("Build of an undetectable repository succeeded")
	}
	for _, f := range []string{"Dockerfile", "go.mod", "package.json", "requirements.txt", "pyproject.toml", "index.html", "Procfile"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
}

func TestStackOverrideTheRepoCannotSatisfy(t *testing.T) {
	b := newBuilder(t)
	_, _, err := buildRepo(t, b, map[string]string{"index.html": "hi\n"}, func(r *build.Request) { r.Stack = platformv1alpha1.StackGo })
	if err == nil || !strings.Contains(err.Error(), "the app's stack is go, but the repository has no go.mod") {
		t.Fatalf("error %v, want the unsatisfied stack named", err)
	}
}

func TestTimeoutKillsTheBuild(t *testing.T) {
	b := newBuilder(t, func(o *build.Options) { o.Timeout = 3 * time.Second })
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The command starts a grandchild that would outlive a kill of the
	// shell alone.
	command := "sleep 600 & echo $! > " + pidFile + "; echo started; wait"
	_, log, err := buildRepo(t, b, map[string]string{"index.html": "hi\n"}, func(r *build.Request) { r.Command = command })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a timeout", err)
	}
	if !strings.HasPrefix(err.Error(), "build exceeded 3s") {
		t.Errorf("error %q, want it to start with \"build exceeded 3s\"", err)
	}
	if !strings.Contains(log, "started") {
		t.Errorf("log lacks the command's output")
	}
	b2, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b2)))
	platformtest.Eventually(t, 10*time.Second, "the build's background process to end with the build", func(context.Context) error {
		if platformtest.ProcessAlive(pid) {
			return fmt.Errorf("process %d survived the timeout", pid)
		}
		return nil
	})
}

// signalWriter is a build log that closes seen once it has a line
// containing want.
type signalWriter struct {
	platformtest.SyncBuffer
	want string
	seen chan struct{}
	once sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	n, err := s.SyncBuffer.Write(p)
	if strings.Contains(string(p), s.want) {
		s.once.Do(func() { close(s.seen) })
	}
	return n, err
}

// startBuild starts building req and returns once the build's log has a
// line with want; the build's error comes on errc when it ends.
func startBuild(t *testing.T, b *build.Builder, req build.Request, want string) (log *signalWriter, errc <-chan error) {
	t.Helper()
	log = &signalWriter{want: want, seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := b.Build(context.Background(), req, log)
		done <- err
	}()
	select {
	case <-log.seen:
	case err := <-done:
		t.Fatalf("the build ended before its log said %q: %v\n%s", want, err, log.String())
	}
	return log, done
}

func TestLogStreamsWhileTheBuildRuns(t *testing.T) {
	b := newBuilder(t, func(o *build.Options) { o.Timeout = 2 * time.Minute })
	gate := filepath.Join(t.TempDir(), "gate")
	repo, commit := gitRepo(t, map[string]string{"index.html": "hi\n"})
	// The build waits for a file the test creates only once it has read
	// the build's first line from the log.
	req := build.Request{Tenant: "acme", App: "streams", RepoDir: repo, Commit: commit,
		Command: "echo waiting for the gate; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo through"}
	log, errc := startBuild(t, b, req, "waiting for the gate\n")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(log.String(), "\nthrough\n") {
		t.Errorf("log lacks the line after the gate:\n%s", log.String())
	}
}

// TestCheckoutExpansionLimit: a push of a few KiB whose tree checks out to
// more than the limit fails the build with the limit named, whether the
// blobs themselves are too large (a file of zeros compresses about a
// thousandfold) or the repository's attributes make the files written larger
// than their blobs (eol=crlf doubles a file of empty lines).
func TestCheckoutExpansionLimit(t *testing.T) {
	b := newBuilder(t, func(o *build.Options) { o.MaxCheckoutBytes = 1 << 20 })
	const want = "the pushed tree checks out to more than 1 MiB"
	for name, files := range map[string]map[string]string{
		"blobs": {"index.html": "hi\n", "zeros.bin": strings.Repeat("\x00", 4<<20)},
		"attributes": {
			"index.html": "hi\n", ".gitattributes": "*.txt text eol=crlf\n",
			"lines.txt": strings.Repeat("\n", 700<<10),
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, log, err := buildRepo(t, b, files, nil)
			var tooLarge *build.CheckoutTooLargeError
			if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q", err, want)
			}
			if !strings.Contains(log, "Build failed: "+want) {
				t.Errorf("log does not say %q", want)
			}
		})
	}
	// Within the limit the same kind of tree builds.
	if _, _, err := buildRepo(t, b, map[string]string{"index.html": "hi\n", "zeros.bin": strings.Repeat("\x00", 512<<10)}, nil); err != nil {
		t.Fatalf("a tree within the limit: %v", err)
	}
}
