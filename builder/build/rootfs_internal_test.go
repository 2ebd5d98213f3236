package build

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"
)

// rootFSExtract extracts layers as a root filesystem into parent/rootfs,
// beside a file parent/outside that must stay as it is.
func rootFSExtract(t *testing.T, parent string, layers ...[]entry) (dir string, err error) {
	t.Helper()
	dir = filepath.Join(parent, "rootfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "outside"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	x := &extractor{root: root, rootFS: true}
	for _, l := range layers {
		if err = x.extract(tarOf(t, l)); err != nil {
			return dir, err
		}
	}
	return dir, x.finish()
}

// A root filesystem keeps every top-level directory and its absolute
// links, skips device nodes, and honours whiteouts across layers.
func TestExtractRootFS(t *testing.T) {
	dir, err := rootFSExtract(t, t.TempDir(),
		[]entry{
			{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
			{name: "./etc/hostname", body: "base\n", typ: tar.TypeReg},
			{name: "usr/bin/tool", body: "tool", typ: tar.TypeReg, mode: 0o755},
			{name: "bin", link: "usr/bin", typ: tar.TypeSymlink},
			{name: "etc/alternatives/tool", link: "/usr/bin/tool", typ: tar.TypeSymlink},
			{name: "dev/null", typ: tar.TypeChar},
			{name: "var/cache/a", body: "a", typ: tar.TypeReg},
			{name: "var/cache/b", body: "b", typ: tar.TypeReg},
			{name: "srv/link", link: "usr/bin/tool", typ: tar.TypeLink},
		},
		[]entry{
			{name: "etc/.wh.hostname", typ: tar.TypeReg},
			{name: "var/cache/.wh..wh..opq", typ: tar.TypeReg},
			{name: "var/cache/c", body: "c", typ: tar.TypeReg},
		},
	)
	if err != nil {
		t.Fatalf("extracting: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "etc/alternatives/tool")); err != nil || l != "/usr/bin/tool" {
		t.Errorf("absolute link = %q, %v; want it kept", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "srv/link")); err != nil || string(b) != "tool" {
		t.Errorf("hard link = %q, %v", b, err)
	}
	for _, gone := range []string{"etc/hostname", "etc/.wh.hostname", "var/cache/a", "var/cache/b", "dev/null"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s exists", gone)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "var/cache/c")); err != nil || string(b) != "c" {
		t.Errorf("var/cache/c = %q, %v", b, err)
	}
}

// A root filesystem may hold links that lead out of it (they resolve in
// the container's root), but nothing is ever written through one: each
// attack fails and leaves the directory's surroundings as they were.
func TestExtractRootFSRefusesWritingThroughLinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(parent string) []entry
	}{
		{"absolute link to a directory", func(parent string) []entry {
			return []entry{
				{name: "etc", link: parent, typ: tar.TypeSymlink},
				{name: "etc/evil", body: "x", typ: tar.TypeReg},
			}
		}},
		{"absolute link to a file", func(parent string) []entry {
			return []entry{
				{name: "f", link: filepath.Join(parent, "outside"), typ: tar.TypeSymlink},
				{name: "f/", typ: tar.TypeDir, mode: 0o755},
				{name: "f", body: "overwritten", typ: tar.TypeReg},
			}
		}},
		{"relative link out", func(string) []entry {
			return []entry{
				{name: "up", link: "..", typ: tar.TypeSymlink},
				{name: "up/evil", body: "x", typ: tar.TypeReg},
			}
		}},
		{"directory through a link", func(string) []entry {
			return []entry{
				{name: "p", link: "..", typ: tar.TypeSymlink},
				{name: "p/evil/", typ: tar.TypeDir, mode: 0o755},
			}
		}},
		{"hard link out", func(string) []entry {
			return []entry{{name: "h", link: "../outside", typ: tar.TypeLink}}
		}},
		{"hard link through a link", func(string) []entry {
			return []entry{
				{name: "p", link: "..", typ: tar.TypeSymlink},
				{name: "h", link: "p/outside", typ: tar.TypeLink},
			}
		}},
		{"whiteout through a link", func(string) []entry {
			return []entry{
				{name: "p", link: "..", typ: tar.TypeSymlink},
				{name: "p/.wh.outside", typ: tar.TypeReg},
			}
		}},
		{"absolute name", func(parent string) []entry {
			return []entry{{name: filepath.Join(parent, "evil"), body: "x", typ: tar.TypeReg}}
		}},
		{"dotdot", func(string) []entry {
			return []entry{{name: "a/../../evil", body: "x", typ: tar.TypeReg}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			_, err := rootFSExtract(t, parent, tc.entries(parent))
			if err == nil {
				t.Error("the extraction succeeded")
			}
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if e.Name() != "rootfs" && e.Name() != "outside" {
					t.Errorf("the extraction wrote %s beside its directory", e.Name())
				}
			}
			if b, err := os.ReadFile(filepath.Join(parent, "outside")); err != nil || string(b) != "keep" {
				t.Errorf("the file beside the directory is %q, %v; want it untouched", b, err)
			}
		})
	}
}
