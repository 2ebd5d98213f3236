package testlayer

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"testing"
)

// TestTar: entries come out in order, directories as directories, files
// with their mode and body; the same entries make the same digest.
func TestTar(t *testing.T) {
	entries := []Entry{Dir("bin"), File("bin/sh", 0o755, []byte("#!/bin/sh\n")), Dir("srv/")}
	tr := tar.NewReader(bytes.NewReader(Tar(t, entries...)))
	var got []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%c %s %o %s", hdr.Typeflag, hdr.Name, hdr.Mode, body))
	}
	want := []string{"5 bin/ 755 ", "0 bin/sh 755 #!/bin/sh\n", "5 srv/ 755 "}
	if len(got) != len(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
	a, err := Layer(t, entries).Digest()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Layer(t, entries).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("the same entries made layers %s and %s", a, b)
	}
}
