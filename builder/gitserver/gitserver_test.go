package gitserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"bex.co/bex/internal/steptime"
	"bex.co/bex/test/platformtest"
)

// waitTimeout bounds every wait in these tests; nothing sleeps.
const waitTimeout = 60 * time.Second

// fakeAuth knows one token and one key per tenant.
type fakeAuth struct {
	tokens map[string]Principal
	keys   map[string]Principal // ssh.PublicKey.Marshal() → principal
}

func (a *fakeAuth) AuthenticatePassword(_ context.Context, _, password string) (Principal, error) {
	if p, ok := a.tokens[password]; ok {
		return p, nil
	}
	return Principal{}, ErrUnauthenticated
}

func (a *fakeAuth) AuthenticatePublicKey(_ context.Context, key ssh.PublicKey) (Principal, error) {
	if p, ok := a.keys[string(key.Marshal())]; ok {
		return p, nil
	}
	return Principal{}, fmt.Errorf("key %s: %w", ssh.FingerprintSHA256(key), ErrUnauthenticated)
}

// fakeRepos holds "tenant/app" → RepoInfo.
type fakeRepos map[string]RepoInfo

func (r fakeRepos) Lookup(_ context.Context, tenant, app string) (RepoInfo, error) {
	if info, ok := r[tenant+"/"+app]; ok {
		return info, nil
	}
	return RepoInfo{}, fmt.Errorf("app %s/%s: %w", tenant, app, ErrNotFound)
}

// deployer records its calls and runs the test's deploy function, which
// defaults to a quick successful release.
type deployer struct {
	mu    sync.Mutex
	calls []Push
	// steps are the receiver's steps each call's context held.
	steps   [][]steptime.Step
	running int
	maxRun  int
	fn      func(ctx context.Context, push Push, log io.Writer) (DeployResult, error)
}

func (d *deployer) Deploy(ctx context.Context, push Push, log io.Writer) (DeployResult, error) {
	d.mu.Lock()
	d.calls = append(d.calls, push)
	var steps []steptime.Step
	if tl := steptime.From(ctx); tl != nil {
		steps = tl.Steps()
	}
	d.steps = append(d.steps, steps)
	n := len(d.calls)
	d.running++
	d.maxRun = max(d.maxRun, d.running)
	fn := d.fn
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
	}()
	if fn != nil {
		return fn(ctx, push, log)
	}
	_, _ = fmt.Fprintf(log, "-----> Building %s\n", push.New[:7])
	return DeployResult{Release: n, URL: "https://" + push.App + "-" + push.Tenant + ".example.test"}, nil
}

func (d *deployer) set(fn func(ctx context.Context, push Push, log io.Writer) (DeployResult, error)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fn = fn
}

func (d *deployer) pushes() []Push {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Push(nil), d.calls...)
}

// stepNames are the names of the receiver's steps call i was given.
func (d *deployer) stepNames(i int) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for _, st := range d.steps[i] {
		names = append(names, st.Name)
	}
	return names
}

// env is a running receiver (HTTP and SSH) with tenant "acme" owning app
// "web" (deploy branch main) and "api" (deploy branch production), and tenant
// "other" owning "site".
type env struct {
	t        *testing.T
	srv      *Server
	deployer *deployer
	httpURL  string
	sshPort  int
	home     string
	sshCmd   string // GIT_SSH_COMMAND with acme's key
	otherSSH string // GIT_SSH_COMMAND with other's key
	// readSSH is GIT_SSH_COMMAND with a key of acme's that may not push.
	readSSH string
}

const (
	acmeToken  = "tok-acme"
	otherToken = "tok-other"
	// readToken is acme's, and may not push.
	readToken = "tok-acme-read"
	// readOnlyReason is why readToken and readSSH's key may not push.
	readOnlyReason = "your role in tenant acme is viewer"
)

func newEnv(t *testing.T, opts ...func(*Options)) *env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("ssh client missing: apt-get install openssh-client")
	}
	e := &env{t: t, deployer: &deployer{}, home: t.TempDir()}
	auth := &fakeAuth{
		tokens: map[string]Principal{
			acmeToken:  {Tenant: "acme", Actor: "alice@acme"},
			otherToken: {Tenant: "other", Actor: "olga@other"},
			readToken:  {Tenant: "acme", Actor: "vic@acme", PushDenied: readOnlyReason},
		},
		keys: map[string]Principal{},
	}
	e.sshCmd = e.sshKey(auth, "acme-key", Principal{Tenant: "acme", Actor: "alice@acme (ssh)"})
	e.otherSSH = e.sshKey(auth, "other-key", Principal{Tenant: "other", Actor: "olga@other (ssh)"})
	e.readSSH = e.sshKey(auth, "read-key", Principal{Tenant: "acme", Actor: "vic@acme (ssh)", PushDenied: readOnlyReason})
	o := Options{
		Root:     filepath.Join(t.TempDir(), "repos"),
		Auth:     auth,
		Repos:    fakeRepos{"acme/web": {DeployBranch: "main"}, "acme/api": {DeployBranch: "production"}, "other/site": {}},
		Deployer: e.deployer,
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	// The server bex-git and make run build, with their timeouts.
	e.httpURL = "http://" + serveHTTP(t, HTTPTimeouts(), srv.HTTPHandler())

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.sshPort = l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeSSH(ctx, l, hostKey) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSSH: %v", err)
		}
	})
	return e
}

// sshKey generates a key pair with ssh-keygen, registers its public half for
// p and returns the GIT_SSH_COMMAND that uses it.
func (e *env) sshKey(auth *fakeAuth, name string, p Principal) string {
	e.t.Helper()
	path := filepath.Join(e.home, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		e.t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		e.t.Fatal(err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		e.t.Fatal(err)
	}
	auth.keys[string(key.Marshal())] = p
	return "ssh -F /dev/null -i " + path + " -o IdentitiesOnly=yes -o BatchMode=yes" +
		" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
}

func (e *env) httpRemote(token, tenant, app string) string {
	return strings.Replace(e.httpURL, "http://", "http://git:"+token+"@", 1) + "/" + tenant + "/" + app + ".git"
}

func (e *env) sshRemote(tenant, app string) string {
	return fmt.Sprintf("ssh://git@127.0.0.1:%d/%s/%s.git", e.sshPort, tenant, app)
}

// remote returns the URL of acme's app over the transport ("http" or "ssh").
func (e *env) remote(transport, app string) string {
	if transport == "ssh" {
		return e.sshRemote("acme", app)
	}
	return e.httpRemote(acmeToken, "acme", app)
}

// gitCmd prepares git in dir, isolated from the machine's configuration.
func (e *env) gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+e.home, "XDG_CONFIG_HOME="+e.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@acme.test",
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@acme.test",
		"GIT_SSH_COMMAND="+e.sshCmd, "LC_ALL=C", "GIT_PROTOCOL=",
	)
	return cmd
}

// git runs git and returns its combined output and error.
func (e *env) git(dir string, args ...string) (string, error) {
	out, err := e.gitCmd(dir, args...).CombinedOutput()
	return string(out), err
}

// mustGit runs git and fails the test when it fails.
func (e *env) mustGit(dir string, args ...string) string {
	e.t.Helper()
	out, err := e.git(dir, args...)
	if err != nil {
		e.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// workTree creates a local repository on branch main with one commit.
func (e *env) workTree() string {
	e.t.Helper()
	dir := e.t.TempDir()
	e.mustGit(dir, "init", "-q", "-b", "main")
	e.commit(dir, "main.go", "package main\n\nfunc main() {}\n")
	return dir
}

// commit writes file and commits it, returning the new commit's hash.
func (e *env) commit(dir, file, content string) string {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.mustGit(dir, "add", file)
	e.mustGit(dir, "commit", "-q", "-m", "change "+file)
	return e.mustGit(dir, "rev-parse", "HEAD")
}

// lsRemote returns the server's refs as name → hash, read with git itself.
func (e *env) lsRemote(url string) map[string]string {
	e.t.Helper()
	refs := map[string]string{}
	for _, line := range strings.Split(e.mustGit(e.home, "ls-remote", url), "\n") {
		if hash, name, ok := strings.Cut(line, "\t"); ok {
			refs[name] = hash
		}
	}
	return refs
}

// started is a git command running in the background.
type started struct {
	cmd  *exec.Cmd
	out  platformtest.SyncBuffer
	done chan error
}

// waitFor returns once git's output contains want, or fails t after
// waitTimeout.
func (s *started) waitFor(t *testing.T, want string) {
	t.Helper()
	platformtest.Eventually(t, waitTimeout, fmt.Sprintf("%q in git's output", want), func(context.Context) error {
		if out := s.out.String(); !strings.Contains(out, want) {
			return fmt.Errorf("output so far:\n%s", out)
		}
		return nil
	})
}

func (e *env) start(dir string, args ...string) *started {
	e.t.Helper()
	cmd := e.gitCmd(dir, args...)
	s := &started{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill() reaches ssh and git-remote-http too
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	return s
}

// kill ends git and the helpers it started, as a user's Ctrl-C does.
func (s *started) kill() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) }

func (s *started) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("git did not finish; output so far:\n%s", s.out.String())
		return nil
	}
}

// gate blocks a deploy until the test opens it.
func gate(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(waitTimeout):
		return errors.New("test never opened the gate")
	}
}

func assertContains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// remoteLines returns what the server printed, without git's "remote: "
// prefix and the padding it adds.
func remoteLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "remote: "); ok {
			lines = append(lines, strings.TrimRight(rest, " "))
		}
	}
	return lines
}

var transports = []string{"http", "ssh"}

func TestPushStreamsDeployLogAndReleases(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			seen := make(chan struct{})
			e.deployer.set(func(ctx context.Context, push Push, log io.Writer) (DeployResult, error) {
				_, _ = io.WriteString(log, "-----> Go app detected\n")
				// Block until the pusher's terminal shows the line above:
				// only a streamed log lets this deploy finish.
				if err := gate(ctx, seen); err != nil {
					return DeployResult{}, err
				}
				_, _ = io.WriteString(log, "-----> Compiling\n-----> Image pushed\n")
				return DeployResult{Release: 3, URL: "https://web-acme.example.test"}, nil
			})
			dir := e.workTree()
			head := e.mustGit(dir, "rev-parse", "HEAD")
			push := e.start(dir, "push", e.remote(transport, "web"), "main")
			push.waitFor(t, "remote: -----> Go app detected")
			close(seen)
			if err := push.wait(t); err != nil {
				t.Fatalf("push failed: %v\n%s", err, push.out.String())
			}
			out := push.out.String()
			assertContains(t, out, "remote: -----> Compiling", "remote: -----> Image pushed",
				"remote: Released v3: https://web-acme.example.test", "* [new branch]      main -> main")

			if got := e.lsRemote(e.remote(transport, "web"))["refs/heads/main"]; got != head {
				t.Errorf("server main = %q, want %s", got, head)
			}
			pushes := e.deployer.pushes()
			if len(pushes) != 1 {
				t.Fatalf("Deploy called %d times, want 1", len(pushes))
			}
			want := Push{Tenant: "acme", App: "web", Branch: "main", Old: strings.Repeat("0", 40), New: head,
				RepoDir: e.srv.RepoDir("acme", "web")}
			got := pushes[0]
			if !strings.HasPrefix(got.Actor, "alice@acme") {
				t.Errorf("Actor = %q", got.Actor)
			}
			got.Actor = ""
			if got != want {
				t.Errorf("Push = %+v, want %+v", got, want)
			}
		})
	}
}

// The Deployer gets the push's timeline with the receiver's steps, in the
// order they ran: the pipeline prints and records them ahead of its own.
func TestPushTimesReceiverSteps(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			dir := e.workTree()
			e.mustGit(dir, "push", "-q", e.remote(transport, "web"), "main")
			e.commit(dir, "README", "a second push, onto a branch that exists\n")
			e.mustGit(dir, "push", "-q", e.remote(transport, "web"), "main")
			e.deployer.mu.Lock()
			steps := slices.Clone(e.deployer.steps)
			e.deployer.mu.Unlock()
			if len(steps) != 2 {
				t.Fatalf("Deploy called %d times, want 2", len(steps))
			}
			for i, push := range steps {
				var names []string
				for _, st := range push {
					names = append(names, st.Name)
					if st.Seconds < 0 {
						t.Errorf("push %d: step %s took %fs", i+1, st.Name, st.Seconds)
					}
				}
				if want := []string{stepAuth, stepReceive, stepStore, stepRefs}; !slices.Equal(names, want) {
					t.Errorf("push %d: the Deployer's timeline holds %q, want %q", i+1, names, want)
				}
			}
		})
	}
}

func TestFailedDeployRejectsPushAndKeepsRef(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			dir := e.workTree()
			url := e.remote(transport, "web")
			e.mustGit(dir, "push", "-q", url, "main")
			good := e.mustGit(dir, "rev-parse", "HEAD")

			e.deployer.set(func(_ context.Context, _ Push, log io.Writer) (DeployResult, error) {
				_, _ = io.WriteString(log, "-----> Compiling\n./main.go:3:2: undefined: fmt\n")
				return DeployResult{}, errors.New("go build exited with status 1")
			})
			e.commit(dir, "main.go", "package main\n\nfunc main() { fmt.Println() }\n")
			out, err := e.git(dir, "push", url, "main")
			if err == nil {
				t.Fatalf("push of a failing build succeeded:\n%s", out)
			}
			assertContains(t, out, "remote: ./main.go:3:2: undefined: fmt",
				"remote: Build failed: go build exited with status 1",
				"! [remote rejected] main -> main (build failed)")
			if got := e.lsRemote(url)["refs/heads/main"]; got != good {
				t.Errorf("server main = %s after a failed build, want it left at %s", got, good)
			}
		})
	}
}

func TestHTTPAuthentication(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()

	out, err := e.git(dir, "push", e.httpRemote("wrong-token", "acme", "web"), "main")
	if err == nil {
		t.Fatalf("push with a wrong token succeeded:\n%s", out)
	}
	assertContains(t, out, "Authentication failed")
	out, err = e.git(dir, "push", e.httpURL+"/acme/web.git", "main")
	if err == nil {
		t.Fatalf("push without credentials succeeded:\n%s", out)
	}

	for _, token := range []string{"", "wrong-token"} {
		req, _ := http.NewRequest(http.MethodGet, e.httpURL+"/acme/web.git/info/refs?service=git-receive-pack", nil)
		if token != "" {
			req.SetBasicAuth("git", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="bex"` {
			t.Errorf("token %q: status %d, WWW-Authenticate %q; want 401 with the bex realm",
				token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if _, err := os.Stat(filepath.Join(e.srv.RepoDir("acme", "web"), "..")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unauthenticated pushes created something on disk: %v", err)
	}
	if len(e.deployer.pushes()) != 0 {
		t.Error("Deploy called for an unauthenticated push")
	}
}

func TestOtherTenantGetsNotFound(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()

	out, err := e.git(dir, "push", e.httpRemote(otherToken, "acme", "web"), "main")
	if err == nil {
		t.Fatalf("other tenant's push succeeded:\n%s", out)
	}
	assertContains(t, out, "remote: repository not found", "not found")
	if strings.Contains(out, "does not exist") {
		t.Errorf("the answer tells the app exists or not:\n%s", out)
	}

	req, _ := http.NewRequest(http.MethodGet, e.httpURL+"/acme/web.git/info/refs?service=git-upload-pack", nil)
	req.SetBasicAuth("git", otherToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != "repository not found" {
		t.Errorf("got %d %q, want 404 repository not found", resp.StatusCode, body)
	}

	cmd := e.gitCmd(dir, "push", e.sshRemote("acme", "web"), "main")
	cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND="+e.otherSSH)
	sshOut, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("other tenant's ssh push succeeded:\n%s", sshOut)
	}
	assertContains(t, string(sshOut), "remote error: repository not found")

	if _, err := os.Stat(e.srv.RepoDir("acme", "web")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another tenant's push created the repository: %v", err)
	}
}

// TestPushDenied: a credential that may not push fetches, and its push is
// refused with its reason over HTTP and SSH, before anything is stored.
func TestPushDenied(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()
	e.mustGit(dir, "push", "-q", e.remote("http", "web"), "main")
	before := e.lsRemote(e.remote("http", "web"))
	e.commit(dir, "b.txt", "b\n")

	out, err := e.git(dir, "push", e.httpRemote(readToken, "acme", "web"), "main")
	if err == nil {
		t.Fatalf("a push with a read-only token succeeded:\n%s", out)
	}
	assertContains(t, out, "remote: push refused: "+readOnlyReason, "403")
	cmd := e.gitCmd(dir, "push", e.sshRemote("acme", "web"), "main")
	cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND="+e.readSSH)
	sshOut, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a push with a read-only key succeeded:\n%s", sshOut)
	}
	assertContains(t, string(sshOut), "remote error: push refused: "+readOnlyReason)

	if got := e.lsRemote(e.httpRemote(readToken, "acme", "web")); !maps.Equal(got, before) {
		t.Errorf("after the refused pushes the refs are %v, want %v", got, before)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	e.mustGit(e.home, "clone", "-q", e.httpRemote(readToken, "acme", "web"), clone)
	if n := len(e.deployer.pushes()); n != 1 {
		t.Errorf("%d deploys, want the first push's only", n)
	}
}

func TestUnknownAppSaysSo(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			out, err := e.git(e.workTree(), "push", e.remote(transport, "nope"), "main")
			if err == nil {
				t.Fatalf("push to a missing app succeeded:\n%s", out)
			}
			assertContains(t, out, "app nope does not exist: create it with `bex apps create nope`")
			if _, err := os.Stat(e.srv.RepoDir("acme", "nope")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a push to a missing app created a repository: %v", err)
			}
		})
	}
}

func TestNonFastForwardRefusedForcePushAccepted(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()
	url := e.remote("http", "web")
	base := e.mustGit(dir, "rev-parse", "HEAD")
	first := e.commit(dir, "a.txt", "a\n")
	e.mustGit(dir, "push", "-q", url, "main")

	e.mustGit(dir, "reset", "-q", "--hard", base)
	rewritten := e.commit(dir, "b.txt", "b\n")
	out, err := e.git(dir, "push", url, "main")
	if err == nil {
		t.Fatalf("non-fast-forward push succeeded:\n%s", out)
	}
	assertContains(t, out, "[rejected]")
	if got := e.lsRemote(url)["refs/heads/main"]; got != first {
		t.Fatalf("server main = %s after a refused push, want %s", got, first)
	}

	out = e.mustGit(dir, "push", "--force", url, "main")
	assertContains(t, out, "(forced update)", "remote: Released v2:")
	if got := e.lsRemote(url)["refs/heads/main"]; got != rewritten {
		t.Errorf("server main = %s after a force push, want %s", got, rewritten)
	}
	if p := e.deployer.pushes(); len(p) != 2 || p[1].Old != first || p[1].New != rewritten {
		t.Errorf("deploys = %+v, want the force push deployed from %s to %s", p, first, rewritten)
	}
}

// TestPushUpToDate: pushing again what the server has is git's
// "Everything up-to-date" and exit 0, as on Heroku, and builds nothing.
// Over SSH the client has its connection open by then and sends a flush
// alone, which the receiver once answered with "decoding update request:
// capabilities delimiter not found" and git with "failed to push some
// refs".
func TestPushUpToDate(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			dir := e.workTree()
			e.mustGit(dir, "push", e.remote(transport, "web"), "main")
			out, err := e.git(dir, "push", e.remote(transport, "web"), "main")
			if err != nil {
				t.Fatalf("pushing again what the server has: %v\n%s", err, out)
			}
			assertContains(t, out, "Everything up-to-date")
			if n := len(e.deployer.pushes()); n != 1 {
				t.Errorf("Deploy called %d times, want 1 (the first push)", n)
			}
		})
	}
}

func TestOnlyDeployBranchBuilds(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()
	url := e.remote("ssh", "api") // deploy branch "production"
	head := e.mustGit(dir, "rev-parse", "HEAD")

	out := e.mustGit(dir, "push", url, "main", "main:refs/tags/v1")
	assertContains(t, out, "remote: Branch main is not the deploy branch (production); nothing to build.")
	if n := len(e.deployer.pushes()); n != 0 {
		t.Fatalf("Deploy called %d times for a non-deploy branch", n)
	}
	refs := e.lsRemote(url)
	if refs["refs/heads/main"] != head || refs["refs/tags/v1"] != head {
		t.Errorf("refs = %v, want main and v1 at %s", refs, head)
	}

	out = e.mustGit(dir, "push", url, "main:production")
	assertContains(t, out, "remote: Released v1:")
	if p := e.deployer.pushes(); len(p) != 1 || p[0].Branch != "production" {
		t.Errorf("deploys = %+v, want one of production", p)
	}

	out, err := e.git(dir, "push", url, ":production")
	if err == nil {
		t.Fatalf("deleting the deploy branch succeeded:\n%s", out)
	}
	assertContains(t, out, "deleting the deploy branch is not allowed")
	e.mustGit(dir, "push", "-q", url, ":main")
	if refs := e.lsRemote(url); refs["refs/heads/main"] != "" || refs["refs/heads/production"] != head {
		t.Errorf("refs = %v, want main deleted and production kept", refs)
	}
}

func TestPushSizeLimit(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxPushBytes = 64 << 10 })
	dir := e.workTree()
	big := make([]byte, 256<<10)
	_, _ = rand.Read(big)
	e.commit(dir, "blob.bin", string(big))

	for _, transport := range transports {
		url := e.remote(transport, "web")
		out, err := e.git(dir, "push", url, "main")
		if err == nil {
			t.Fatalf("%s: oversized push succeeded:\n%s", transport, out)
		}
		assertContains(t, out, "remote: Push rejected: the pushed pack is larger than the 64 KiB limit.",
			"pack exceeds the maximum push size of 64 KiB")
		if refs := e.lsRemote(url); len(refs) != 0 {
			t.Errorf("%s: refs after an oversized push: %v", transport, refs)
		}
	}
	var stored []string
	_ = filepath.Walk(filepath.Join(e.srv.RepoDir("acme", "web"), "objects"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			stored = append(stored, path)
		}
		return nil
	})
	if len(stored) != 0 {
		t.Errorf("an oversized push stored objects: %v", stored)
	}
	if n := len(e.deployer.pushes()); n != 0 {
		t.Errorf("Deploy called %d times for an oversized push", n)
	}
}

// TestConcurrentPushesSerialise: a push arriving while another one deploys
// waits for it, then is judged against the branch as that push left it.
func TestConcurrentPushesSerialise(t *testing.T) {
	e := newEnv(t)
	url := e.remote("http", "web")
	base := e.workTree()
	e.mustGit(base, "push", "-q", url, "main")
	baseHead := e.mustGit(base, "rev-parse", "HEAD")

	// first: base → A. second: base → A → B (contains A, so it fast-forwards
	// what first leaves). third: base → C (does not).
	first := e.t.TempDir()
	e.mustGit(first, "clone", "-q", base, ".")
	a := e.commit(first, "a.txt", "a\n")
	second := e.t.TempDir()
	e.mustGit(second, "clone", "-q", first, ".")
	b := e.commit(second, "b.txt", "b\n")
	third := e.t.TempDir()
	e.mustGit(third, "clone", "-q", base, ".")
	e.commit(third, "c.txt", "c\n")

	deployed, release := make(chan string, 3), make(chan struct{})
	e.deployer.set(func(ctx context.Context, push Push, log io.Writer) (DeployResult, error) {
		deployed <- push.New
		if push.New == a {
			if err := gate(ctx, release); err != nil {
				return DeployResult{}, err
			}
		}
		return DeployResult{Release: 9, URL: "https://web-acme.example.test"}, nil
	})

	p1 := e.start(first, "push", url, "main")
	if got := <-deployed; got != a {
		t.Fatalf("first deploy is %s, want %s", got, a)
	}
	p2 := e.start(second, "push", "--progress", url, "main")
	p2.waitFor(t, "Another push to web is in progress; waiting for it to finish...")
	p3 := e.start(third, "push", "--progress", e.remote("ssh", "web"), "main")
	p3.waitFor(t, "Another push to web is in progress; waiting for it to finish...")
	if n := len(e.deployer.pushes()); n != 2 {
		t.Fatalf("Deploy called %d times while the first push held the lock, want 2 (base, A)", n)
	}
	close(release)
	for i, p := range []*started{p1, p2} {
		if err := p.wait(t); err != nil {
			t.Fatalf("push %d failed: %v\n%s", i+1, err, p.out.String())
		}
	}
	if err := p3.wait(t); err == nil {
		t.Fatalf("stale push succeeded:\n%s", p3.out.String())
	}
	assertContains(t, p3.out.String(), "main moved to", "(non-fast-forward)")

	deploys := e.deployer.pushes()
	if len(deploys) != 3 || deploys[2].Old != a || deploys[2].New != b {
		t.Errorf("deploys = %+v; want base, A, then B deployed over A", deploys)
	}
	if deploys[1].Old != baseHead {
		t.Errorf("A deployed over %s, want %s", deploys[1].Old, baseHead)
	}
	// The push that waited says so in its times; the first did not wait.
	if got := e.deployer.stepNames(2); !slices.Contains(got, stepLockWait) {
		t.Errorf("B's steps are %q, want one %q", got, stepLockWait)
	}
	if got := e.deployer.stepNames(1); slices.Contains(got, stepLockWait) {
		t.Errorf("A's steps are %q, want no %q", got, stepLockWait)
	}
	e.deployer.mu.Lock()
	maxRun := e.deployer.maxRun
	e.deployer.mu.Unlock()
	if maxRun != 1 {
		t.Errorf("%d deploys ran at once, want 1", maxRun)
	}
	if got := e.lsRemote(url)["refs/heads/main"]; got != b {
		t.Errorf("server main = %s, want %s", got, b)
	}
}

func TestCloneAndFetch(t *testing.T) {
	e := newEnv(t)
	out := e.mustGit(t.TempDir(), "clone", e.remote("ssh", "web"), "empty")
	assertContains(t, out, "You appear to have cloned an empty repository")

	dir := e.workTree()
	var lines strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&lines, "line %d of a file that deltas well\n", i)
	}
	e.commit(dir, "big.txt", lines.String())
	e.mustGit(dir, "push", "-q", e.remote("http", "web"), "main")

	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			clone := t.TempDir()
			e.mustGit(clone, "clone", "-q", e.remote(transport, "web"), ".")
			want, _ := os.ReadFile(filepath.Join(dir, "big.txt"))
			if b, err := os.ReadFile(filepath.Join(clone, "big.txt")); err != nil || !bytes.Equal(b, want) {
				t.Fatalf("clone's big.txt differs from the pushed one (%v)", err)
			}
			if br := e.mustGit(clone, "branch", "--show-current"); br != "main" {
				t.Errorf("clone checked out %q, want main", br)
			}

			// A second push that changes a stored file (a delta against an
			// object the server has) then a fetch of it into the clone.
			more := string(want) + "one more line from " + transport + "\n"
			head := e.commit(dir, "big.txt", more)
			e.mustGit(dir, "push", "-q", e.remote(transport, "web"), "main")
			e.mustGit(clone, "pull", "-q", "--ff-only")
			if got := e.mustGit(clone, "rev-parse", "HEAD"); got != head {
				t.Errorf("after pull HEAD = %s, want %s", got, head)
			}
			e.mustGit(clone, "fsck", "--no-progress")
		})
	}
	e.mustGit(e.srv.RepoDir("acme", "web"), "fsck", "--no-progress")
}

func TestDeleteRepo(t *testing.T) {
	e := newEnv(t)
	e.mustGit(e.workTree(), "push", "-q", e.remote("http", "web"), "main")
	if err := e.srv.DeleteRepo("acme", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.srv.RepoDir("acme", "web")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("repository still there: %v", err)
	}
	if err := e.srv.DeleteRepo("acme", "../x"); err == nil {
		t.Error("DeleteRepo accepted a path outside Root")
	}
}

// TestKeepAliveDuringSilentDeploy: a deploy that stays silent gets
// keep-alive packets sent for it, and git prints nothing for them.
func TestKeepAliveDuringSilentDeploy(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			e.srv.keepAlive = 20 * time.Millisecond
			e.deployer.set(func(ctx context.Context, _ Push, log io.Writer) (DeployResult, error) {
				_, _ = io.WriteString(log, "-----> Quiet build\n")
				sw := log.(*sidebandWriter)
				deadline := time.Now().Add(waitTimeout)
				for {
					sw.mu.Lock()
					pings := sw.pings
					sw.mu.Unlock()
					if pings >= 3 {
						break
					}
					if time.Now().After(deadline) || ctx.Err() != nil {
						return DeployResult{}, errors.New("no keep-alive sent")
					}
					runtime.Gosched()
				}
				_, _ = io.WriteString(log, "-----> Done\n")
				return DeployResult{Release: 1, URL: "https://web-acme.example.test"}, nil
			})
			out := e.mustGit(e.workTree(), "push", "--progress", e.remote(transport, "web"), "main")
			want := []string{"-----> Quiet build", "-----> Done", "Released v1: https://web-acme.example.test"}
			if got := remoteLines(out); !slices.Equal(got, want) {
				t.Errorf("remote lines = %q, want %q (keep-alives must print nothing)", got, want)
			}
		})
	}
}

// TestDisconnectCancelsDeploy: a pusher that goes away mid-build cancels the
// deploy, and the branch stays where it was.
func TestDisconnectCancelsDeploy(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			cancelled := make(chan struct{})
			e.deployer.set(func(ctx context.Context, _ Push, log io.Writer) (DeployResult, error) {
				_, _ = io.WriteString(log, "-----> Building forever\n")
				if err := gate(ctx, nil); err != nil {
					close(cancelled)
					return DeployResult{}, err
				}
				return DeployResult{}, nil
			})
			push := e.start(e.workTree(), "push", e.remote(transport, "web"), "main")
			push.waitFor(t, "remote: -----> Building forever")
			push.kill()
			_ = push.wait(t)
			select {
			case <-cancelled:
			case <-time.After(waitTimeout):
				t.Fatal("the deploy was not cancelled when the pusher disconnected")
			}
			if refs := e.lsRemote(e.remote(transport, "web")); len(refs) != 0 {
				t.Errorf("refs after an abandoned push: %v", refs)
			}
		})
	}
}

func TestPanickingDeployerFailsPush(t *testing.T) {
	e := newEnv(t)
	e.deployer.set(func(context.Context, Push, io.Writer) (DeployResult, error) { panic("boom") })
	out, err := e.git(e.workTree(), "push", e.remote("ssh", "web"), "main")
	if err == nil {
		t.Fatalf("push succeeded:\n%s", out)
	}
	assertContains(t, out, "remote: Build failed: internal error in the build service", "(build failed)")
}

func TestNewRequiresDependencies(t *testing.T) {
	ok := Options{Root: t.TempDir(), Auth: &fakeAuth{}, Repos: fakeRepos{}, Deployer: &deployer{}}
	for name, mutate := range map[string]func(*Options){
		"root":     func(o *Options) { o.Root = "" },
		"auth":     func(o *Options) { o.Auth = nil },
		"repos":    func(o *Options) { o.Repos = nil },
		"deployer": func(o *Options) { o.Deployer = nil },
		"size":     func(o *Options) { o.MaxPushBytes = -1 },
	} {
		o := ok
		mutate(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("New: %v", err)
	}
}

func TestParseSSHCommand(t *testing.T) {
	for cmd, want := range map[string][3]string{
		"git-receive-pack '/acme/web.git'": {serviceReceivePack, "acme", "web"},
		"git-upload-pack 'acme/web.git'":   {serviceUploadPack, "acme", "web"},
		"git receive-pack '/acme/web'":     {serviceReceivePack, "acme", "web"},
		"git-receive-pack '/acme/a/b.git'": {},
		"ls -la":                           {},
	} {
		svc, tenant, app, ok := parseSSHCommand(cmd)
		if got := [3]string{svc, tenant, app}; got != want || ok != (want[0] != "") {
			t.Errorf("parseSSHCommand(%q) = %v %v, want %v", cmd, got, ok, want)
		}
	}
}

// TestGzipBombIsRefused: a gzip body that inflates past the limits is
// answered 413 with the limit named, after reading no more than the limit,
// and stores nothing: a push whose "pack" is 64 MiB of zeros (64 KiB
// compressed), and a fetch request of a million wants.
func TestGzipBombIsRefused(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxPushBytes = 64 << 10 })
	post := func(service string, body func(io.Writer)) (int, string) {
		t.Helper()
		var buf bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		body(gz)
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes of gzip", service, buf.Len())
		req, err := http.NewRequest(http.MethodPost, e.httpURL+"/acme/web.git/"+service, &buf)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("git", acmeToken)
		req.Header.Set("Content-Type", "application/x-"+service+"-request")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}
	pkt := func(w io.Writer, s string) { fmt.Fprintf(w, "%04x%s", len(s)+4, s) }
	zero := strings.Repeat("0", 40)
	commit := strings.Repeat("1", 40)

	status, msg := post(serviceReceivePack, func(w io.Writer) {
		pkt(w, zero+" "+commit+" refs/heads/main\x00report-status side-band-64k\n")
		_, _ = io.WriteString(w, "0000PACK")
		_, _ = io.CopyN(w, zeroReader{}, 64<<20)
	})
	const wantPush = "the push, once decompressed, is larger than the 64 KiB limit of a push"
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, wantPush) {
		t.Errorf("push: %d %q, want 413 %q", status, msg, wantPush)
	}

	status, msg = post(serviceUploadPack, func(w io.Writer) {
		for range 1 << 20 {
			pkt(w, "want "+commit+"\n")
		}
		_, _ = io.WriteString(w, "00000009done\n")
	})
	const wantFetch = "the fetch request is larger than the 16 MiB limit"
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, wantFetch) {
		t.Errorf("fetch: %d %q, want 413 %q", status, msg, wantFetch)
	}

	var stored []string
	_ = filepath.Walk(e.srv.RepoDir("acme", "web"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && (strings.Contains(path, "/objects/") || strings.Contains(path, "incoming-")) {
			stored = append(stored, path)
		}
		return nil
	})
	if len(stored) != 0 {
		t.Errorf("a refused body stored files: %v", stored)
	}
	if refs := e.lsRemote(e.remote("http", "web")); len(refs) != 0 {
		t.Errorf("refs after a refused push: %v", refs)
	}
	if n := len(e.deployer.pushes()); n != 0 {
		t.Errorf("Deploy called %d times", n)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// unavailableAuth answers every credential as the authenticator of a
// platform whose database is out of reach does.
type unavailableAuth struct{}

func (unavailableAuth) AuthenticatePassword(context.Context, string, string) (Principal, error) {
	return Principal{}, fmt.Errorf("looking up the token: %w", ErrUnavailable)
}

func (unavailableAuth) AuthenticatePublicKey(context.Context, ssh.PublicKey) (Principal, error) {
	return Principal{}, fmt.Errorf("looking up the key: %w", ErrUnavailable)
}

// While the database is away, a push over either transport is refused with
// words that say so: over SSH, not as a key that is not registered.
func TestPushDuringDatabaseOutageSaysSo(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.Auth = unavailableAuth{} })
			cmd := e.gitCmd(e.workTree(), "push", e.remote(transport, "web"), "main")
			// ssh's own default log level, at which it prints banners.
			cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND="+strings.Replace(e.sshCmd, "LogLevel=ERROR", "LogLevel=INFO", 1))
			b, err := cmd.CombinedOutput()
			out := string(b)
			if err == nil {
				t.Fatalf("push with the database away succeeded:\n%s", out)
			}
			assertContains(t, out, "the platform's database is unavailable")
			if strings.Contains(out, "not registered") {
				t.Errorf("the refusal blames the key:\n%s", out)
			}
			if _, err := os.Stat(e.srv.RepoDir("acme", "web")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused push created the repository: %v", err)
			}
		})
	}
}
