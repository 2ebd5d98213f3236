package buildagent_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"bex.co/bex/builder/buildagent"
)

func serve(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := buildagent.New(buildagent.Options{Dir: dir, Token: "the-token"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, dir
}

// Every call but the readiness probe wants the build's token: another
// process that reaches the Pod cannot run commands there nor read the
// tree.
func TestAgentWantsTheToken(t *testing.T) {
	srv, _ := serve(t)
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, token := range []string{"", "wrong"} {
		c := &buildagent.Client{URL: srv.URL, Token: token}
		err := c.Run(context.Background(), buildagent.Command{Argv: []string{"/bin/sh", "-c", "echo ran"}}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("run with token %q: %v; want 401", token, err)
		}
		if _, err := c.Tree(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("tree with token %q: %v; want 401", token, err)
		}
	}
}

// A command's output streams back; its exit status comes as an
// *ExitError; the environment is the one sent, not the agent's.
func TestRun(t *testing.T) {
	srv, dir := serve(t)
	t.Setenv("AGENT_SECRET", "of the agent")
	c := &buildagent.Client{URL: srv.URL, Token: "the-token", Dir: dir}
	var out bytes.Buffer
	err := c.Run(context.Background(), buildagent.Command{
		Argv: []string{"/bin/sh", "-c", `echo "in $PWD as $GREETING, agent's: $AGENT_SECRET"; exit 4`},
		Env:  []string{"GREETING=hello", "PATH=/usr/bin:/bin"},
	}, &out)
	var ee *buildagent.ExitError
	if !errors.As(err, &ee) || ee.Status != "exit status 4" {
		t.Errorf("Run: %v; want exit status 4", err)
	}
	if want := "in " + c.Paths().App + " as hello, agent's: \n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	err = c.Run(context.Background(), buildagent.Command{Argv: []string{"/no/such/program"}}, &out)
	if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "starting /no/such/program") {
		t.Errorf("Run of a missing program: %v; want a start error", err)
	}
}
