package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
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
// wrote, as go-containerregistry reads them back, gzip and zstd alike, and
// the file is compressed as its media type says.
func TestWriteLayerDigests(t *testing.T) {
	root := layerTree(t)
	for _, mt := range []types.MediaType{types.OCILayer, types.DockerLayer, types.OCILayerZStd} {
		t.Run(string(mt), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "layer.tar")
			l, err := writeLayer(root, dst, mt)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := tarball.LayerFromFile(dst, tarball.WithMediaType(mt))
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
			b, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			magic := []byte{0x1f, 0x8b} // gzip's
			if mt == types.OCILayerZStd {
				magic = []byte{0x28, 0xb5, 0x2f, 0xfd}
			}
			if !bytes.HasPrefix(b, magic) {
				t.Errorf("a %s layer starts with % x, want % x", mt, b[:4], magic)
			}
			// Read back uncompressed, it is the tar the diffID names.
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := io.Copy(h, rc); err != nil {
				t.Fatal(err)
			}
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != wantDiffID.String() {
				t.Errorf("uncompressed %s, want the diffID %s", got, wantDiffID)
			}
		})
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

// BenchmarkLayerCompression compares the app layer gzipped (as before,
// and still in a Docker image) and zstd-compressed (an OCI image's), on
// the push path: written by the build ("write"), read back uncompressed
// as Unpack reads it through go-containerregistry ("read"), on a tree
// whose bulk is BEX_BENCH_BINARY when set (a Go binary, say), else
// layerTree's. It reports the layer's size.
func BenchmarkLayerCompression(b *testing.B) {
	var root *os.Root
	if bin := os.Getenv("BEX_BENCH_BINARY"); bin != "" {
		dir := b.TempDir()
		data, err := os.ReadFile(bin)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "app"), data, 0o755); err != nil {
			b.Fatal(err)
		}
		if root, err = os.OpenRoot(dir); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { root.Close() })
	} else {
		root = layerTree(b)
	}
	for _, mt := range []types.MediaType{types.OCILayer, types.OCILayerZStd} {
		name := "gzip"
		if mt == types.OCILayerZStd {
			name = "zstd"
		}
		dst := filepath.Join(b.TempDir(), "layer.tar")
		b.Run(name+"/write", func(b *testing.B) {
			var size int64
			for b.Loop() {
				l, err := writeLayer(root, dst, mt)
				if err != nil {
					b.Fatal(err)
				}
				size = l.size
			}
			b.ReportMetric(float64(size), "bytes")
		})
		b.Run(name+"/read", func(b *testing.B) {
			l, err := tarball.LayerFromFile(dst, tarball.WithMediaType(mt))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rc, err := l.Uncompressed()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
