package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, created, err := LoadOrCreate(path)
	if err != nil || !created || len(first) < 20 {
		t.Fatalf("first call: %q, created %v, %v", first, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	again, created, err := LoadOrCreate(path)
	if err != nil || created || again != first {
		t.Fatalf("second call: %q, created %v, %v; want the first secret", again, created, err)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("empty file: err = %v, want one saying to delete it", err)
	}
}
