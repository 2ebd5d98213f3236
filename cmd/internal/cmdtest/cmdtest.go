package cmdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/test/platformtest"
)

// Build builds bex.co/bex/cmd/<name> into a temporary directory and returns
// the binary's path.
func Build(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(platformtest.BuildBinaries(t, name), name)
}

// Addrs returns n distinct loopback addresses (127.0.0.1:port) nothing
// listens on.
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	ports, err := childproc.FreePorts("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return addrs
}

// Run runs bin with args to its end and returns its combined output and
// exit code.
func Run(t testing.TB, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running %s: %v", bin, err)
	return "", 0
}

// Proc is a running command.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  platformtest.SyncBuffer
	done chan struct{}
	err  error
}

// Output is what the process wrote so far.
func (p *Proc) Output() string {
	return p.out.String()
}

// Start starts bin with args (and env added to the test's environment); at
// the end of the test it is interrupted, and its output logged if the test
// failed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: filepath.Base(bin), cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", p.Name, p.Output())
		}
	})
	return p
}

// Stop interrupts the process and waits for it (killing it after 30 s).
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 30 s of an interrupt", p.Name)
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitOK polls GET url until it answers 200, failing t when timeout passes
// or the process exits first.
func (p *Proc) WaitOK(t testing.TB, timeout time.Duration, url string) {
	t.Helper()
	platformtest.Eventually(t, timeout, p.Name+" to answer "+url, func(ctx context.Context) error {
		if p.Exited() {
			t.Fatalf("%s exited (%v) before answering %s:\n%s", p.Name, p.err, url, p.Output())
		}
		code, body, err := Get(ctx, url, "")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, strings.TrimSpace(body))
		}
		return nil
	})
}

// Get fetches url, with a bearer token when token is set, and returns the
// status and body.
func Get(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
