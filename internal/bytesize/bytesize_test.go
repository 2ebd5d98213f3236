package bytesize_test

import (
	"testing"

	"bex.co/bex/internal/bytesize"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1000: "1000 bytes", 64 << 10: "64 KiB", 200 << 20: "200 MiB",
		1 << 30: "1 GiB", 1<<30 + 1<<20: "1025 MiB", 1536: "1536 bytes",
	} {
		if got := bytesize.Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
