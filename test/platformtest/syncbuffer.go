package platformtest

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer for concurrent writers (a command's stdout
// and stderr, a log) that a test reads while they write. The zero value is
// ready to use; it must not be copied after first use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LastLine is the last line of out (a process's output, a log) without
// its newline, for an error that says where a process has got to.
func LastLine(out string) string {
	out = strings.TrimRight(out, "\n")
	return out[strings.LastIndex(out, "\n")+1:]
}
