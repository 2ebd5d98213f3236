package app_test

import (
	"strings"
	"testing"

	"bex.co/bex/cmd/internal/cmdtest"
)

// TestCommandLine: a flag bex-edge does not know, and options it cannot
// run with, are refused with exit code 2 and a message naming the flag.
func TestCommandLine(t *testing.T) {
	bin := cmdtest.Build(t, "bex-edge")
	out, code := cmdtest.Run(t, bin, nil, "--https-listn", ":1")
	if code != 2 || !strings.Contains(out, "unknown flag: --https-listn") {
		t.Errorf("unknown flag: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x"}, "--certificate-budget", "-1")
	if code != 2 || !strings.Contains(out, "--certificate-budget -1 is negative") {
		t.Errorf("negative --certificate-budget: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x"}, "--app-metrics-token-file", "/nonexistent", "--metrics-listen", "")
	if code != 2 || !strings.Contains(out, "--app-metrics-token-file serves the apps' request totals on --metrics-listen, which is empty") {
		t.Errorf("--app-metrics-token-file without --metrics-listen: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x"}, "--workload-cluster", "main")
	if code != 2 || !strings.Contains(out, "--workload-cluster, --fleet-namespace and --runtime-kubeconfigs-secret need --follow-placement") {
		t.Errorf("--workload-cluster without --follow-placement: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x"}, "--follow-placement", "--runtime-kubeconfigs-secret", "bex-runtime-kubeconfigs")
	if code != 2 || !strings.Contains(out, `--runtime-kubeconfigs-secret "bex-runtime-kubeconfigs": want NAMESPACE/NAME`) {
		t.Errorf("--runtime-kubeconfigs-secret without a namespace: exit %d, output:\n%s", code, out)
	}
}
