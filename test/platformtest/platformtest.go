package platformtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers/scheme"
	"bex.co/bex/internal/pgserver"
)

// BinDirEnv names a directory where BuildBinaries keeps the commands it
// built for every test process of one run (make test sets it to a new
// directory): each command is then built once for the whole suite, not
// once per test that runs it. Unset, each call builds its own.
const BinDirEnv = "BEX_TEST_BIN"

// BuildBinaries builds the platform's commands into a directory of the
// test's own (as make build does into bin/) and returns it. The binaries
// carry no DWARF (-ldflags=-w, a fifth less CPU to link); a panic's stack
// still names files and lines. With BinDirEnv set, a command another test
// or test process of the run built is linked into the test's directory
// (copied across file systems) instead of built again.
func BuildBinaries(t testing.TB, cmds ...string) string {
	t.Helper()
	dir := t.TempDir()
	shared := os.Getenv(BinDirEnv)
	for _, c := range cmds {
		if shared == "" {
			if err := build(dir, c); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := buildShared(shared, c); err != nil {
			t.Fatal(err)
		}
		if err := linkOrCopy(filepath.Join(shared, c), filepath.Join(dir, c)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func build(dir, cmd string) error {
	out, err := exec.Command("go", "build", "-ldflags=-w", "-o", dir+"/", "bex.co/bex/cmd/"+cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building %s: %v\n%s", cmd, err, out)
	}
	return nil
}

// buildShared builds cmd into dir unless it is there, under a lock on
// <dir>/<cmd>.lock that test processes of the run share; the binary is
// built beside and renamed into place, so no one runs half of it.
func buildShared(dir, cmd string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, cmd+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(filepath.Join(dir, cmd)); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(dir, cmd+".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := build(tmp, cmd); err != nil {
		return err
	}
	return os.Rename(filepath.Join(tmp, cmd), filepath.Join(dir, cmd))
}

// Platform is a running bex-embedded.
type Platform struct {
	cmd   *exec.Cmd
	State string
	out   SyncBuffer
	done  chan error
}

// PID is the process id of the platform's bex-embedded.
func (p *Platform) PID() int { return p.cmd.Process.Pid }

// Start runs binDir/bex-embedded on state with DATABASE_URL=dbURL (empty:
// its private Postgres) and the extra flags args. The platform is
// interrupted at the end of the test if it still runs.
func Start(ctx context.Context, t testing.TB, binDir, state, dbURL string, args ...string) *Platform {
	t.Helper()
	p := &Platform{State: state, done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, filepath.Join(binDir, "bex-embedded"), append([]string{"--state-dir", state}, args...)...)
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
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
		// A platform killed (by the end of ctx, which most tests cancel
		// before their cleanups run) leaves its private Postgres to a fast
		// shutdown of its own: the state directory's removal must wait
		// for it, or it races with the server's last writes.
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgserver.WaitStopped(stopCtx, filepath.Join(state, "postgres")); err != nil {
			t.Errorf("the platform's private Postgres: %v", err)
		}
		resetNodes(t, binDir, state)
		if t.Failed() {
			t.Logf("bex-embedded output:\n%s", p.Output())
		}
	})
	return p
}

// resetNodes removes the containers the node agents of the platform's
// local fleet left running, which outlive the agents as a kubelet's do:
// the test's end is their machines'. It runs bex-node reset on each
// worker's state directory, as localfleet.ResetNodes does (which this
// package cannot import: the packages localfleet imports import this one
// in their tests).
func resetNodes(t testing.TB, binDir, state string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(state, "fleet", "*", "*", "machines", "*", "root", "var", "lib", "bex-node"))
	for _, d := range dirs {
		if out, err := exec.Command(filepath.Join(binDir, "bex-node"), "reset", "--state-dir="+d).CombinedOutput(); err != nil {
			t.Errorf("removing the containers of the worker of %s: bex-node reset: %v: %s", d, err, out)
		}
	}
}

// Output returns what the platform printed so far.
func (p *Platform) Output() string { return p.out.String() }

// WaitEnv waits for <state>/env and parses it.
func (p *Platform) WaitEnv(ctx context.Context, t testing.TB) map[string]string {
	t.Helper()
	path := filepath.Join(p.State, "env")
	for {
		if data, err := os.ReadFile(path); err == nil {
			return ParseEnv(string(data))
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("bex-embedded exited before it was ready: %v\n%s", err, p.Output())
		case <-ctx.Done():
			t.Fatalf("bex-embedded not ready: %v\n%s", ctx.Err(), p.Output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Interrupt sends SIGINT, as Ctrl-C does, and waits for a clean exit.
func (p *Platform) Interrupt(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("bex-embedded exited with %v after SIGINT\n%s", err, p.Output())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("bex-embedded did not stop within 2 minutes of SIGINT\n%s", p.Output())
	}
}

// Children lists the processes whose parent is the platform.
func (p *Platform) Children(t testing.TB) []int {
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
	return pids
}

// ParseEnv reads the export lines of an env file.
func ParseEnv(s string) map[string]string {
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

// Client returns a controller-runtime client for a kubeconfig, one that
// watches too.
func Client(t testing.TB, kubeconfig string) client.WithWatch {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RepoRoot is the directory of go.mod above the working directory, where
// tests write their reports and screenshots (out/).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Kill sends SIGKILL, as a crash or the OOM killer would, and waits for the
// process to be gone. What the platform started is left to die on its
// own.
func (p *Platform) Kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	err := <-p.done
	p.done <- err
	return nil
}

// linkOrCopy makes dst the file src: a hard link, or a copy where the two
// are on different file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}
