package crds_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyGenerated runs hack/verify-generated.sh against copies of
// deploy/crds: an unedited copy passes, and a copy with one hand edit fails
// with a message that names the edited file and says to run make generate.
func TestVerifyGenerated(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "verify-generated.sh")
	crds := filepath.Join(root, "deploy", "crds")

	t.Run("unedited", func(t *testing.T) {
		dir := copyDir(t, crds)
		if out, err := runScript(script, dir); err != nil {
			t.Fatalf("verify-generated.sh failed on an unedited copy of deploy/crds: %v\n%s", err, out)
		}
	})

	t.Run("hand edit", func(t *testing.T) {
		dir := copyDir(t, crds)
		const file = "platform.bex.co_routes.yaml"
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(data), "maxLength: 253", "maxLength: 254", 1)
		if edited == string(data) {
			t.Fatalf("%s has no maxLength: 253 to edit", file)
		}
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runScript(script, dir)
		if err == nil {
			t.Fatalf("verify-generated.sh passed on a hand-edited CRD:\n%s", out)
		}
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running verify-generated.sh: %v", err)
		}
		for _, want := range []string{filepath.Join(dir, file), "make generate"} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not mention %q:\n%s", want, out)
			}
		}
		for _, untouched := range []string{"platform.bex.co_apps.yaml", "fleet.bex.co_fleetupgrades.yaml"} {
			if strings.Contains(out, untouched) {
				t.Errorf("output mentions the unedited %s:\n%s", untouched, out)
			}
		}
	})
}

func runScript(script, crdDir string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command("bash", script, crdDir)
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// copyDir copies the regular files of dir into a new temporary directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
