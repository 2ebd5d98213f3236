package app_test

import (
	"bytes"
	"strings"
	"testing"

	"bex.co/bex/cmd/bex-kubebin/app"
	"bex.co/bex/cmd/internal/command"
)

// TestCommandLine: a flag bex-kubebin does not know is refused with exit
// code 2 and a message naming it, before anything is built.
func TestCommandLine(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := app.New(&out, &errOut)
	cmd.SetArgs([]string{"--version", "1.37.2"})
	err := cmd.ExecuteContext(t.Context())
	if code := command.ExitCode(err); code != 2 || err == nil || !strings.Contains(err.Error(), "unknown flag: --version") {
		t.Errorf("unknown flag: exit %d, error %v", code, err)
	}
	if out.Len() > 0 {
		t.Errorf("printed paths for a refused command line:\n%s", out.String())
	}
}

// TestUnknownComponent: a component bex does not build is refused, naming
// those it does, before anything is built.
func TestUnknownComponent(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := app.New(&out, &errOut)
	cmd.SetArgs([]string{"--cache-dir", t.TempDir(), "--components", "kube-proxy"})
	err := cmd.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), `unknown component "kube-proxy"`) || !strings.Contains(err.Error(), "kube-scheduler") {
		t.Errorf("error %v, want the unknown component and the known ones named", err)
	}
	if out.Len() > 0 || strings.Contains(errOut.String(), "building") {
		t.Errorf("built something for a refused command line:\n%s%s", out.String(), errOut.String())
	}
}
