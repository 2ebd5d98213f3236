package buildagent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"bex.co/bex/builder/buildagent"
	"bex.co/bex/test/platformtest"
)

// agentProc is an agent served as bex-build-agent serves it, on loopback.
type agentProc struct {
	client *buildagent.Client
	// ended is closed when Serve returned err.
	ended chan struct{}
	err   error
}

// serveAgent serves an agent with the flags bex-build-agent parses.
func serveAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	var o buildagent.ServeOptions
	fs := pflag.NewFlagSet("bex-build-agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	dir := t.TempDir()
	if err := fs.Parse(append([]string{"--dir", dir}, args...)); err != nil {
		t.Fatal(err)
	}
	t.Setenv(buildagent.TokenEnv, "the-token")
	o.Complete()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &agentProc{
		client: &buildagent.Client{URL: "http://" + ln.Addr().String(), Token: "the-token", Dir: dir, HTTP: &http.Client{}},
		ended:  make(chan struct{}),
	}
	go func() {
		p.err = o.Serve(ctx, ln, logr.Discard())
		close(p.ended)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.ended
	})
	return p
}

// waitEnd waits for the agent to end and returns what it ended with.
func (p *agentProc) waitEnd(t *testing.T) error {
	t.Helper()
	select {
	case <-p.ended:
		return p.err
	case <-time.After(time.Minute):
		t.Fatal("the agent still serves a minute on")
		return nil
	}
}

// An agent no call comes to ends, saying the builder is gone, although the
// kubelet's readiness probe keeps calling /healthz.
func TestAgentEndsWhenIdle(t *testing.T) {
	p := serveAgent(t, "--idle-timeout", "300ms")
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-p.ended:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if resp, err := http.Get(p.client.URL + "/healthz"); err == nil {
				resp.Body.Close()
			}
		}
	}()
	err := p.waitEnd(t)
	<-probed
	if !errors.Is(err, buildagent.ErrBuilderGone) || err.Error() != "no call from the builder for 300ms: the builder is gone" {
		t.Errorf("Serve ended with %v; want no call from the builder for 300ms", err)
	}
	if _, err := http.Get(p.client.URL + "/healthz"); err == nil {
		t.Errorf("the ended agent still answers")
	}
}

// A step that runs longer than the idle limit is a call in flight: the
// agent serves on, the step ends as it would, and the agent ends once
// idle after it.
func TestAgentLivesThroughALongStep(t *testing.T) {
	p := serveAgent(t, "--idle-timeout", "200ms")
	var out bytes.Buffer
	err := p.client.Run(context.Background(), buildagent.Command{Argv: []string{"/bin/sh", "-c", "sleep 2; echo done"}}, &out)
	if err != nil || out.String() != "done\n" {
		t.Fatalf("a step of ten idle limits: %v, %q; want done", err, out.String())
	}
	select {
	case <-p.ended:
		t.Fatalf("the agent ended while a step ran: %v", p.err)
	default:
	}
	rc, err := p.client.Tree(context.Background())
	if err != nil {
		t.Fatalf("GET /tree after the step: %v", err)
	}
	rc.Close()
	if err := p.waitEnd(t); !errors.Is(err, buildagent.ErrBuilderGone) {
		t.Errorf("Serve ended with %v; want the builder gone", err)
	}
}

// A builder that goes mid-step (its call cut) has the step's processes
// killed, the step's children with it.
func TestAgentKillsTheStepOfAGoneCaller(t *testing.T) {
	p := serveAgent(t)
	pids := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOn{want: "started\n", cancel: cancel}
	// Longer than the body the JSON decoder reads at first.
	env := []string{"PIDS=" + pids, "PATH=/usr/bin:/bin", "PAD=" + strings.Repeat("x", 4096)}
	err := p.client.Run(ctx, buildagent.Command{
		Argv: []string{"/bin/sh", "-c", `sleep 600 & echo $! > "$PIDS/child"; echo $$ > "$PIDS/shell"; echo started; wait`},
		Env:  env,
	}, out)
	if err == nil || ctx.Err() == nil {
		t.Fatalf("Run: %v; want it cut when its caller went", err)
	}
	for _, name := range []string{"shell", "child"} {
		b, err := os.ReadFile(filepath.Join(pids, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the step's "+name+" killed", func(context.Context) error {
			if platformtest.ProcessAlive(pid) {
				return fmt.Errorf("pid %d runs", pid)
			}
			return nil
		})
	}
}

// cancelOn calls cancel once what was written ends with want.
type cancelOn struct {
	buf    bytes.Buffer
	want   string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.HasSuffix(c.buf.String(), c.want) {
		c.cancel()
	}
	return len(p), nil
}
