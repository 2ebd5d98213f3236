package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/test/platformtest"
)

// TestUpgradeVerify builds bex and runs `bex upgrade verify` against a
// 1.36.3 + 1.37.2 control plane it did not start: the command gets only the
// plane's admin kubeconfig and the apiservers' URLs. Without MVP wired it
// exits 1 and names the 1.36.3 server and the resources it answered 404 for;
// wired, it passes (once peer discovery has synced) and exits 0.
func TestUpgradeVerify(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bex")
	if out, err := exec.Command("go", "build", "-o", bin, "bex.co/bex/cmd/bex").CombinedOutput(); err != nil {
		t.Fatalf("building bex: %v\n%s", err, out)
	}
	for _, wired := range []bool{false, true} {
		name := map[bool]string{true: "wired", false: "not wired"}[wired]
		t.Run(name, func(t *testing.T) {
			cp := cptest.Start(t,
				controlplane.APIServerSpec{Name: "old", Version: "1.36.3", NoMVP: !wired},
				controlplane.APIServerSpec{Name: "new", Version: "1.37.2", NoMVP: !wired},
			)
			oldURL, newURL := cp.APIServer("old").URL(), cp.APIServer("new").URL()
			verifyCmd := func(extra ...string) (string, string, int) {
				args := append([]string{"upgrade", "verify", "--kubeconfig", cp.KubeconfigPath(), "--apiserver", oldURL, "--apiserver", newURL}, extra...)
				cmd := exec.CommandContext(t.Context(), bin, args...)
				cmd.Env = []string{"HOME=" + t.TempDir()}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				switch {
				case err == nil:
					return stdout.String(), stderr.String(), 0
				case errors.As(err, &exit):
					return stdout.String(), stderr.String(), exit.ExitCode()
				}
				t.Fatalf("running bex: %v", err)
				return "", "", 0
			}
			oldName := strings.TrimPrefix(oldURL, "https://")

			if !wired {
				stdout, stderr, code := verifyCmd()
				t.Logf("bex upgrade verify, MVP not wired (exit %d):\n%s%s", code, stdout, stderr)
				if code != 1 {
					t.Fatalf("exit status %d, want 1", code)
				}
				verdict := lastLine(stdout)
				if !strings.HasPrefix(verdict, "FAIL: ") || !strings.Contains(verdict, oldName+": Spurious404 list ") {
					t.Errorf("verdict %q does not fail naming %s and its spurious 404s", verdict, oldName)
				}
				for _, gvr := range []string{"storagemigration.k8s.io/v1/storageversionmigrations", "resource.k8s.io/v1/devicetaintrules"} {
					if !strings.Contains(verdict, gvr) {
						t.Errorf("verdict does not name %s", gvr)
					}
				}
				if strings.Contains(verdict, strings.TrimPrefix(newURL, "https://")) {
					t.Errorf("verdict names the 1.37.2 server, which serves every resource itself: %q", verdict)
				}
				if !strings.HasPrefix(stderr, "bex: verification failed: ") {
					t.Errorf("stderr %q, want the verification error", stderr)
				}

				stdout, _, code = verifyCmd("-o", "json")
				var res struct {
					Passed bool `json:"passed"`
					Probes []struct {
						APIServer string `json:"apiserver"`
						Outcome   string `json:"outcome"`
						Message   string `json:"message"`
					} `json:"probes"`
				}
				if err := json.Unmarshal([]byte(stdout), &res); err != nil {
					t.Fatalf("-o json printed %q: %v", stdout, err)
				}
				spurious := 0
				for _, p := range res.Probes {
					if p.Outcome == "Spurious404" && p.APIServer == oldName && p.Message != "" {
						spurious++
					}
				}
				if code != 1 || res.Passed || spurious == 0 {
					t.Errorf("-o json: exit %d, passed %v, %d spurious 404s with evidence", code, res.Passed, spurious)
				}
				return
			}
			var stdout, stderr string
			var code int
			platformtest.Eventually(t, time.Minute, "bex upgrade verify to pass", func(context.Context) error {
				if stdout, stderr, code = verifyCmd(); code != 0 {
					return fmt.Errorf("exit %d:\n%s%s", code, stdout, stderr)
				}
				return nil
			})
			t.Logf("bex upgrade verify, MVP wired (exit %d):\n%s%s", code, stdout, stderr)
			if code != 0 || !strings.HasPrefix(lastLine(stdout), "PASS: ") || stderr != "" {
				t.Fatalf("exit %d, verdict %q, stderr %q; want a pass", code, lastLine(stdout), stderr)
			}
			if !strings.Contains(stdout, "Proxied") || !strings.Contains(stdout, "platform.bex.co/v1alpha1/apps") {
				t.Errorf("the table lacks proxied probes or the App probes")
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
