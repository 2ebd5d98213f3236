package testlayer

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// modTime is the modification time of every entry, so that the same
// entries make the same layer digest.
var modTime = time.Unix(1700000000, 0)

// Entry is a file of a layer; a Name ending in "/" is a directory, and its
// Body is ignored.
type Entry struct {
	Name string
	Mode int64
	Body []byte
}

// Dir is a directory entry of mode 0755.
func Dir(name string) Entry { return Entry{Name: strings.TrimSuffix(name, "/") + "/", Mode: 0o755} }

// File is a file entry.
func File(name string, mode int64, body []byte) Entry {
	return Entry{Name: name, Mode: mode, Body: body}
}

// Tar returns the uncompressed tar of entries, in their order.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: modTime, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		if strings.HasSuffix(e.Name, "/") {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Layer returns a layer of entries, made with opts (a media type, say).
func Layer(t testing.TB, entries []Entry, opts ...tarball.LayerOption) v1.Layer {
	t.Helper()
	data := Tar(t, entries...)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return layer
}
