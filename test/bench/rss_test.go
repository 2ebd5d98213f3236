package bench_test

import (
	"os"
	"runtime"
	"testing"

	"bex.co/bex/test/bench"
)

// TestRSS: this process's resident size grows by what it touches, and a
// process that does not exist is an error.
func TestRSS(t *testing.T) {
	before, err := bench.RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after, err := bench.RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after < before+32<<20 {
		t.Errorf("RSS %d bytes after touching 64 MiB, %d before; want it at least 32 MiB more", after, before)
	}
	runtime.KeepAlive(buf)
	if _, err := bench.RSS(1 << 30); err == nil {
		t.Error("RSS of a process that does not exist: no error")
	}
}
