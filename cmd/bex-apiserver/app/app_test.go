package app_test

import (
	"strings"
	"testing"

	"bex.co/bex/cmd/internal/cmdtest"
)

// TestCommandLine: a flag bex-apiserver does not know, and options it
// cannot run with, are refused with exit code 2 and a message naming the
// flag.
func TestCommandLine(t *testing.T) {
	bin := cmdtest.Build(t, "bex-apiserver")
	out, code := cmdtest.Run(t, bin, nil, "--scoring-mode", "spread")
	if code != 2 || !strings.Contains(out, "unknown flag: --scoring-mode") {
		t.Errorf("unknown flag: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, nil, "--scoring", "random", "--cluster-api=false", "--local-cluster", "local:cpu=4,memory=8Gi,pods=110")
	if code != 2 || !strings.Contains(out, `--scoring "random": want binpack or spread`) {
		t.Errorf("--scoring random: exit %d, output:\n%s", code, out)
	}
}
