package testtree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Write creates, under dir, files (slash-separated path -> content; a path
// ending in "/" is a directory, a file named *.sh is executable) and
// symbolic links (path -> target, written as given), with the directories
// they need. It fails t on any error.
func Write(t testing.TB, dir string, files, links map[string]string) {
	t.Helper()
	mkdirFor := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mkdirFor(p)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		mkdirFor(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}
