package treetar_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"bex.co/bex/internal/treetar"
)

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRoundTrip copies a tree with files, modes, an empty directory and
// links (one leading outside, sent as a link and never followed).
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("platform secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"a.txt": "a", "bin/app": "#!/bin/sh\n", "deep/er/c": "c"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "bin/app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := treetar.Write(&buf, openRoot(t, src)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "platform secret") {
		t.Fatal("the stream carries the content of a file outside the tree (a link was followed)")
	}
	dst := t.TempDir()
	if err := treetar.Extract(&buf, openRoot(t, dst), treetar.Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "a", "bin/app": "#!/bin/sh\n", "deep/er/c": "c", "inside": "a"} {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "bin/app")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/app: %v, %v; want mode 0755", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty: %v; want a directory", err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "out")); err != nil || l != outside {
		t.Errorf("out: %q, %v; want the link as it was, to %s", l, err, outside)
	}
}

type entry struct {
	hdr  tar.Header
	body string
}

func stream(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		h.Size = int64(len(e.body))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestExtractStaysInside sends what a hostile build would leave to make
// the builder write outside its directory: each fails, and nothing is
// written beside the tree.
func TestExtractStaysInside(t *testing.T) {
	for name, s := range map[string][]entry{
		"parent":   {{hdr: tar.Header{Name: "../escaped", Typeflag: tar.TypeReg}, body: "x"}},
		"absolute": {{hdr: tar.Header{Name: "/escaped", Typeflag: tar.TypeReg}, body: "x"}},
		"through a link": {
			{hdr: tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."}},
			{hdr: tar.Header{Name: "up/escaped", Typeflag: tar.TypeReg}, body: "x"},
		},
		"through an absolute link": {
			{hdr: tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "PARENT"}},
			{hdr: tar.Header{Name: "up/escaped", Typeflag: tar.TypeReg}, body: "x"},
		},
		"hard link": {{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../escaped"}}},
		"device":    {{hdr: tar.Header{Name: "d", Typeflag: tar.TypeChar}}},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "tree")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range s {
				if s[i].hdr.Linkname == "PARENT" {
					s[i].hdr.Linkname = parent
				}
			}
			err := treetar.Extract(stream(t, s...), openRoot(t, dst), treetar.Limits{})
			if err == nil {
				t.Fatal("extracted")
			}
			if _, serr := os.Lstat(filepath.Join(parent, "escaped")); serr == nil {
				t.Fatalf("wrote %s outside the tree (err %v)", filepath.Join(parent, "escaped"), err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestExtractLimits(t *testing.T) {
	big := stream(t, entry{hdr: tar.Header{Name: "a", Typeflag: tar.TypeReg}, body: strings.Repeat("x", 100)},
		entry{hdr: tar.Header{Name: "b", Typeflag: tar.TypeReg}, body: strings.Repeat("x", 100)})
	var le *treetar.LimitError
	if err := treetar.Extract(big, openRoot(t, t.TempDir()), treetar.Limits{Bytes: 150}); !errors.As(err, &le) || le.What != "bytes" {
		t.Errorf("150 bytes: %v; want a LimitError on bytes", err)
	}
	many := stream(t, entry{hdr: tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755}},
		entry{hdr: tar.Header{Name: "b/", Typeflag: tar.TypeDir, Mode: 0o755}},
		entry{hdr: tar.Header{Name: "c/", Typeflag: tar.TypeDir, Mode: 0o755}})
	if err := treetar.Extract(many, openRoot(t, t.TempDir()), treetar.Limits{Entries: 2}); !errors.As(err, &le) || le.What != "entries" {
		t.Errorf("2 entries: %v; want a LimitError on entries", err)
	}
}

// TestExtractNoSetID keeps permission bits, never set-id ones.
func TestExtractNoSetID(t *testing.T) {
	dst := t.TempDir()
	s := stream(t, entry{hdr: tar.Header{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o4755}, body: "x"})
	if err := treetar.Extract(s, openRoot(t, dst), treetar.Limits{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dst, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v; want 0755 without setuid", fi.Mode())
	}
}
