package build

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layerTree writes an app-like tree (a binary-sized file that compresses
// little, sources that compress well) and opens it.
func layerTree(tb testing.TB) *os.Root {
	tb.Helper()
	dir := tb.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 6<<20)
	for i := range bin {
		if i%3 == 0 {
			bin[i] = byte(r.IntN(256))
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "app"), bin, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range 50 {
		src := []byte("package main\n\nfunc main() { println(\"hello\") }\n")
		for range 200 {
			src = append(src, "// a line of comment in a source file\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))+".go"), src, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { root.Close() })
	return root
}

// The digests writeLayer computes as it writes are those of the file it
// wrote, as go-containerregistry reads them back.
func TestWriteLayerDigests(t *testing.T) {
	root := layerTree(t)
	dst := filepath.Join(t.TempDir(), "layer.tar.gz")
	l, err := writeLayer(root, dst, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tarball.LayerFromFile(dst, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := ref.Digest()
	wantDiffID, _ := ref.DiffID()
	wantSize, _ := ref.Size()
	if got, _ := l.Digest(); got != wantDigest {
		t.Errorf("digest %s, want %s", got, wantDigest)
	}
	if got, _ := l.DiffID(); got != wantDiffID {
		t.Errorf("diffID %s, want %s", got, wantDiffID)
	}
	if got, _ := l.Size(); got != wantSize {
		t.Errorf("size %d, want %d", got, wantSize)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkLayer compares the layer step of a build: before, the layer
// was written and go-containerregistry read it back for its digest and
// (decompressing it) its diffID; now both come from the one write.
func BenchmarkLayer(b *testing.B) {
	root := layerTree(b)
	dst := filepath.Join(b.TempDir(), "layer.tar.gz")
	b.Run("write+readback", func(b *testing.B) {
		for b.Loop() {
			if _, err := writeLayer(root, dst, types.OCILayer); err != nil {
				b.Fatal(err)
			}
			l, err := tarball.LayerFromFile(dst, tarball.WithMediaType(types.OCILayer))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Digest(); err != nil {
				b.Fatal(err)
			}
			if _, err := l.DiffID(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			l, err := writeLayer(root, dst, types.OCILayer)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Digest(); err != nil {
				b.Fatal(err)
			}
			if _, err := l.DiffID(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
