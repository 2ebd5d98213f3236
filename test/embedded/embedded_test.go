package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/pgtest"
)

// TestMakeRun starts the embedded platform, checks what it serves through
// the kubeconfig in its env file, stops it with SIGINT, starts it again on
// the same state directory and finds the App created in the first run.
func TestMakeRun(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bex-embedded")
	build := exec.Command("go", "build", "-o", bin, "bex.co/bex/cmd/bex-embedded")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building bex-embedded: %v\n%s", err, out)
	}
	state := t.TempDir()
	dbURL := pgtest.NewDatabase(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	p := start(ctx, t, bin, state, dbURL)
	env := p.waitEnv(ctx, t)
	for _, k := range []string{"BEX_KUBECONFIG", "BEX_DATABASE_URL", "BEX_APISERVER", "BEX_STATE_DIR"} {
		if env[k] == "" {
			t.Fatalf("env file lacks %s: %v", k, env)
		}
	}
	if env["BEX_DATABASE_URL"] != dbURL {
		t.Fatalf("BEX_DATABASE_URL = %q, want the DATABASE_URL given, %q", env["BEX_DATABASE_URL"], dbURL)
	}
	c := clientFor(t, env["BEX_KUBECONFIG"])

	// The apiserver serves the App and Route resources.
	cfg, _ := clientcmd.BuildConfigFromFlags("", env["BEX_KUBECONFIG"])
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	res, err := dc.ServerResourcesForGroupVersion("platform.bex.co/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range res.APIResources {
		names[r.Name] = true
	}
	if !names["apps"] || !names["routes"] {
		t.Fatalf("platform.bex.co/v1alpha1 serves %v, want apps and routes", names)
	}

	// An App with an invalid name is refused, with the field named.
	bad := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "Not_A_Label"}}
	err = c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("creating App %q: err = %v, want Invalid naming metadata.name", bad.Name, err)
	}

	good := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}}
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	// The controller manager runs: the App gets its conditions.
	waitFor(ctx, t, "the App's Ready condition", func() bool {
		got := &platformv1alpha1.App{}
		return c.Get(ctx, client.ObjectKeyFromObject(good), got) == nil && len(got.Status.Conditions) > 0
	})

	pids := p.children(t)
	p.interrupt(t)
	if _, err := os.Stat(filepath.Join(state, "env")); !os.IsNotExist(err) {
		t.Fatalf("env file still there after the platform stopped: %v", err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("process %d of the platform is still alive after it stopped", pid)
		}
	}

	p = start(ctx, t, bin, state, dbURL)
	env2 := p.waitEnv(ctx, t)
	if env2["BEX_APISERVER"] != env["BEX_APISERVER"] {
		t.Fatalf("apiserver address moved across restarts: %s → %s", env["BEX_APISERVER"], env2["BEX_APISERVER"])
	}
	c = clientFor(t, env2["BEX_KUBECONFIG"])
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), &platformv1alpha1.App{}); err != nil {
		t.Fatalf("App created before the restart: %v", err)
	}
	p.interrupt(t)
}

type platform struct {
	cmd   *exec.Cmd
	state string
	mu    sync.Mutex
	out   bytes.Buffer
	done  chan error
}

func start(ctx context.Context, t *testing.T, bin, state, dbURL string) *platform {
	t.Helper()
	p := &platform{state: state, done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, bin, "--state-dir", state)
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	p.cmd.Stdout = &lockedWriter{p: p}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.done:
			case <-time.After(time.Minute):
				_ = p.cmd.Process.Kill()
			}
		}
	})
	return p
}

type lockedWriter struct{ p *platform }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *platform) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitEnv waits for the env file and parses it.
func (p *platform) waitEnv(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	path := filepath.Join(p.state, "env")
	for {
		if data, err := os.ReadFile(path); err == nil {
			return parseEnv(string(data))
		}
		select {
		case err := <-p.done:
			t.Fatalf("bex-embedded exited before it was ready: %v\n%s", err, p.output())
		case <-ctx.Done():
			t.Fatalf("bex-embedded not ready: %v\n%s", ctx.Err(), p.output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// interrupt sends SIGINT, as Ctrl-C does, and waits for a clean exit.
func (p *platform) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("bex-embedded exited with %v after SIGINT\n%s", err, p.output())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("bex-embedded did not stop within 2 minutes of SIGINT\n%s", p.output())
	}
}

// children lists the processes whose parent is the platform.
func (p *platform) children(t *testing.T) []int {
	t.Helper()
	out, err := exec.Command("pgrep", "-P", strconv.Itoa(p.cmd.Process.Pid)).Output()
	if err != nil {
		t.Fatalf("listing the platform's processes: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) < 2 {
		t.Fatalf("the platform runs %d child processes, want etcd and kube-apiserver at least", len(pids))
	}
	return pids
}

func parseEnv(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[k] = strings.Trim(v, "'")
	}
	return out
}

func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
