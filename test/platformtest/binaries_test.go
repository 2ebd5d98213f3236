package platformtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBuildBinariesShared: with BinDirEnv set, a command already in that
// directory is not built again: each test gets a directory of its own
// with that very file linked in, and what a test writes into its
// directory stays there. A command missing there is built once, for all.
func TestBuildBinariesShared(t *testing.T) {
	shared := t.TempDir()
	t.Setenv(BinDirEnv, shared)
	script := "#!/bin/sh\necho built before the tests\n"
	if err := os.WriteFile(filepath.Join(shared, "bex-static"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	first := BuildBinaries(t, "bex-static")
	second := BuildBinaries(t, "bex-static")
	if first == second || first == shared {
		t.Fatalf("BuildBinaries returned %s, then %s (shared %s): want a directory per call", first, second, shared)
	}
	for _, dir := range []string{first, second, shared} {
		if got, err := os.ReadFile(filepath.Join(dir, "bex-static")); err != nil || string(got) != script {
			t.Errorf("%s/bex-static is not the one in %s (%v): built again", dir, shared, err)
		}
	}
	if err := os.WriteFile(filepath.Join(first, "crash-meter-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(second, "crash-meter-1")); err == nil {
		t.Error("a file written into one test's directory shows in another's")
	}

	// bex-edge is not there: the first call builds it into the shared
	// directory, the second takes it from there.
	a := BuildBinaries(t, "bex-edge")
	built, err := os.Stat(filepath.Join(shared, "bex-edge"))
	if err != nil {
		t.Fatalf("bex-edge was not built into the shared directory: %v", err)
	}
	b := BuildBinaries(t, "bex-edge")
	after, err := os.Stat(filepath.Join(shared, "bex-edge"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(built, after) || !built.ModTime().Equal(after.ModTime()) {
		t.Error("the shared bex-edge was built again")
	}
	for _, dir := range []string{a, b} {
		if !sameFile(t, filepath.Join(dir, "bex-edge"), filepath.Join(shared, "bex-edge")) {
			t.Errorf("%s/bex-edge is not the shared binary", dir)
		}
	}
}

// sameFile reports whether the two paths are one file, or copies with the
// same content (a copy is made across file systems).
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	sa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(sa, sb) {
		return true
	}
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(da) == string(db)
}
